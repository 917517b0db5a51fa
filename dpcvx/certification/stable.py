"""The certified gap as a sum of duality gaps, each computed in a numerically stable form.

:func:`~dpcvx.certification.certificate.certify` bounds ``F(w_hat)`` from above and ``F*``
from below and subtracts; both bounds carry a rounding margin relative to the *values* of the
losses, so one example whose loss is 1e10 on the whole domain (an absolute loss with a label
of 1e10) makes every gap at least ``1e-12 * 1e10 / n``, whatever the solver did. The same gap
has another exact expression. With the minorants ``psi_t(e) >= theta e - psi_t*(theta)`` of
every term and ``s_bar`` the mean of their slopes,

    F(w) - [mean_i beta_i + min_W q] = mean_i sum_t weight_t FY_t(e_t(w))  +  q(w) - min_W q,

where ``FY(e) = psi(e) - theta e + psi*(theta) >= 0`` is the Fenchel-Young gap of each term at
its argument ``e = J w + b`` and ``q(w) = <s_bar, w> + (lam/2)||w - w0||^2``. Each ``FY`` has a
closed form that is computed without cancellation (``|e| (1 - theta sgn e)`` for ``abs``,
``(e - theta/2)^2`` for ``square``, a binary KL divergence for ``logistic``, ...), and the
rounding of ``e`` itself enters only through ``|psi'(xi) - theta|`` over the interval where
``e`` can lie, which is zero wherever the multiplier is the exact derivative of a piecewise
linear ``psi`` away from its kinks. The huge value never meets a rounding margin.

Multipliers are **polished** where that is certified to be right: when the range of ``e`` over
the ball ``B(w_hat, r)`` that contains the minimizer (``r = sqrt(2 gap / lam)`` from a first
certificate) avoids every kink of ``psi``, the multiplier of the exact minimizer is
``psi'(e*)``, a constant for piecewise linear terms, so ``theta = psi'(e_hat)`` is used there.
Any multiplier in the conjugate's domain gives a valid bound; polishing only makes it tight.

Implemented for the terms of the common losses: affine, ``abs``, ``square``, ``huber``,
``logistic``, ``exp``, ``pieces`` (hinge, ReLU, pinball, epsilon-insensitive), maxima of such
terms and the one-sided powers and Huber function ``psi(max_j E_j)`` (``max(E, 0)**p``,
``|E|**p``, ``huber(max(E, 0))``); and, for terms that read no data (a penalty written into
the loss: a group lasso, a sup norm), the vector atoms of :data:`VECTOR_GAPS`, whose
arguments are public and of the domain's size, so that the rounding of their gaps,
relative to their values, is too; a loss with any other term keeps the value-based
certificate (one label of 1e8 beside a group lasso: a gap of 6e-8 at n = 1e4, and a private
release at its target aborted where the dataset without it released).
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np
from scipy.special import expit, xlogy

from dpcvx.certification._conjugates import clip, monotone_multipliers
from dpcvx.certification._rows import (
    clipped_rows,
    differing_rows,
    moved_rows,
    row_groups,
    support_rows,
    take_rows,
)
from dpcvx.modeling._expressions import Unsupported, affine_jet
from dpcvx.modeling._structure import MONOTONE, Term
from dpcvx.modeling.declaration import Declaration
from dpcvx.modeling.domains import row_norms

if TYPE_CHECKING:
    from dpcvx.modeling.domains import Domain
    from dpcvx.modeling.localized import LocalizedDomain

__all__ = [
    "STABLE_KINDS",
    "StableSums",
    "stable_extension_gap",
    "stable_extension_sums",
    "stable_from_sums",
    "stable_gap",
    "per_example_values",
    "quadratic_cut",
    "stable_sums",
]

_EPS = np.finfo(float).eps
#: the term kinds whose Fenchel-Young gap has a stable closed form here
STABLE_KINDS = (
    "affine",
    "abs",
    "square",
    "huber",
    "logistic",
    "pieces",
    "max_terms",
    "exp",
    *MONOTONE,
)


#: the vector atoms whose Fenchel-Young gap is computed here for a term that reads no data
#: (:func:`_vector`): each gap is a sum of nonnegative parts, but its rounding is relative to
#: the argument's size, which only a public argument keeps small
VECTOR_GAPS = ("norm2", "norm1", "norminf", "max", "log_sum_exp", "sum_squares")


def _stable(term: Term) -> bool:
    """Whether the stable gap takes ``term``: its kind is in :data:`STABLE_KINDS`, or it is
    a vector atom of :data:`VECTOR_GAPS` or a quadratic form (:func:`_quadratic`) that reads
    no data."""
    if term.kind in VECTOR_GAPS and not term.reads_data:
        return True
    return term.kind in STABLE_KINDS or _quadratic(term) is not None


def _quadratic(term: Term) -> tuple[np.ndarray, object] | None:
    """``(P, E)`` for a generic term ``cp.quad_form(E, P)`` that reads no data, ``P`` a
    constant as written (not symmetrized) and ``E`` affine; None otherwise."""
    from dpcvx.certification.lipschitz import bounded_quadratic  # (a cycle at import)

    found = bounded_quadratic(term)
    if found is None:
        return None
    E, P = term.expr.args
    value = P.value.toarray() if hasattr(P.value, "toarray") else P.value
    return np.atleast_2d(np.asarray(value, float)), found[1]


def _sp(x: np.ndarray) -> np.ndarray:
    """softplus ``log(1 + exp(x))`` without overflow."""
    return np.logaddexp(0.0, x)


def _elementwise(
    kind: str,
    e: np.ndarray,
    err: np.ndarray,
    theta: np.ndarray,
    reach: np.ndarray,
    param: float | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(theta, FY, bound on |FY(e_true) - FY(e_hat)| + rounding)`` for one elementwise
    term, with ``theta`` polished where the kink status is certified."""
    if kind == "abs":
        safe = np.abs(e) > reach
        theta = np.where(safe, np.sign(e), theta)
        fy = np.abs(e) * (1.0 - theta * np.sign(e))
        clear = np.abs(e) > err
        slope = np.where(clear, np.abs(np.sign(e) - theta), 1.0 + np.abs(theta))
        return theta, fy, slope * err + 4 * _EPS * fy
    if kind == "square":
        theta = 2.0 * e  # smooth: the tangent at w_hat (valid for any theta)
        fy = (e - theta / 2.0) ** 2
        slope = np.abs(2.0 * e - theta) + 2.0 * err
        return theta, fy, slope * err + 4 * _EPS * fy
    if kind == "huber":
        assert param is not None  # a huber term always carries its threshold M
        M = float(param)
        deriv = np.where(np.abs(e) <= M, 2.0 * e, 2.0 * M * np.sign(e))
        theta = np.clip(deriv, -2.0 * M, 2.0 * M)
        inner = np.abs(e) <= M
        t = theta * np.sign(e)
        fy = np.where(
            inner, (e - theta / 2.0) ** 2, (M - t / 2.0) * (2.0 * np.abs(e) - M - t / 2.0)
        )
        fy = np.maximum(fy, 0.0)
        # psi' is constant (2M sgn e) where |e| stays beyond the knee, 2-Lipschitz elsewhere
        linear = np.abs(e) - M > err
        slope = np.abs(deriv - theta) + np.where(linear, 0.0, 2.0 * err)
        return theta, fy, slope * err + 8 * _EPS * (fy + M * M * (~inner))
    if kind == "logistic":
        theta = expit(e)
        a = xlogy(theta, theta) + theta * _sp(-e)
        b = xlogy(1.0 - theta, 1.0 - theta) + (1.0 - theta) * _sp(e)
        fy = np.maximum(a + b, 0.0)
        mag = theta * (np.abs(np.log(np.maximum(theta, 1e-300))) + _sp(-e)) + (1.0 - theta) * (
            np.abs(np.log(np.maximum(1.0 - theta, 1e-300))) + _sp(e)
        )
        # |psi' - theta| over [e - err, e + err]: psi' = expit is increasing, so its ends
        # bound it (the curvature bound 1/4 charged err^2 / 4 to a label of 1e12 on the
        # linear side, where the curvature is exp(-1e12))
        slope = np.maximum(_logistic_distance(e + err, theta), _logistic_distance(e - err, theta))
        # (a floor for expit's underflow below -745)
        return theta, fy, slope * err + 16 * _EPS * (mag + 1e-300) + 1e-300
    if kind == "exp":
        # the tangent at w_hat, theta = fl(exp(e)) (any theta >= 0 is valid); with
        # delta = e - log(theta) the gap exp(e) - theta e + theta log(theta) - theta is
        # theta (expm1(delta) - delta), free of cancellation against exp(e) (at theta = 0 it
        # is exp(e) itself: 0 for an argument far below zero, whatever its size)
        theta = np.exp(np.minimum(e, 709.0))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            pos = theta > 0
            log_t = np.log(np.where(pos, theta, 1.0))
            delta = np.where(pos, e - log_t, 0.0)
            fy = np.where(pos, theta * np.maximum(np.expm1(delta) - delta, 0.0), np.exp(e))
            # delta's rounding (log to an ulp, the subtraction) and what it moves the gap by,
            # the rounding of expm1(delta) - delta and of the products
            d_err = 2 * _EPS * (np.abs(e) + np.abs(log_t) + np.abs(delta))
            moved_d = theta * np.expm1(np.abs(delta) + d_err) * d_err
            rounding = 8 * _EPS * (theta * (np.abs(np.expm1(delta)) + np.abs(delta)) + fy)
            # the exact argument lies within err of e: |exp - theta| at the interval's ends
            ends = np.maximum(
                np.abs(np.exp(e + err) * (1 + 4 * _EPS) - theta),
                np.abs(theta - np.exp(e - err) * (1 - 4 * _EPS)),
            )
            bound = ends * err + np.where(pos, moved_d + rounding, 4 * _EPS * fy)
        return theta, fy, bound + 1e-300  # (a floor for theta's underflow)
    raise KeyError(kind)


def _logistic_distance(x: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """A bound on ``|expit(x) - theta|`` for the exact ``expit`` (scipy's within 4 eps of it,
    relative): the smaller of the direct bound and the same through ``1 - expit(x) =
    expit(-x)``, which stays exact where ``expit(x)`` rounds to one (``1 - theta`` is exact
    for ``theta >= 1/2``, within eps below). Far up the linear side, where ``theta`` is one,
    the second is ``expit(-x)``: zero, where the first charged ``4 eps`` per unit of the
    argument's error (a label of 1e30: 1e15 of error, a gap of 0.02)."""
    up = expit(x)
    down = expit(-x)
    direct = np.abs(up - theta) + 4 * _EPS * up
    complement = np.abs((1.0 - theta) - down) + 4 * _EPS * down + np.where(theta < 0.5, _EPS, 0.0)
    return np.minimum(direct, complement)


def _pieces(
    vals: list[np.ndarray],
    errs: list[np.ndarray],
    mu: np.ndarray,
    reach: np.ndarray,
    bound: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(mu, FY, error)`` for ``max_j E_j`` with weights ``mu`` (..., m) on the simplex,
    polished to the clear winner where one is certified. Weights whose float sum is not
    exactly one are charged ``|1 - sum mu| * bound``, ``bound >= max_j |E_j|`` over the
    domain, which keeps ``sum_j mu_j E_j - defect * bound`` a minorant everywhere."""
    V = np.stack(vals, axis=-1)
    E = np.stack(errs, axis=-1)
    m = V.shape[-1]
    top = np.argmax(V, axis=-1)
    is_top = np.eye(m, dtype=bool)[top]
    best = np.take_along_axis(V, top[..., None], axis=-1)[..., 0]
    best_err = np.take_along_axis(E, top[..., None], axis=-1)[..., 0]
    # each other piece's lead under the winner with both errors (and the subtraction's
    # rounding): a piece far below, a label of 1e12 there, leads by its own size, and its
    # error charges nothing (the largest error of all the pieces charged 2e-3 to the gap)
    with np.errstate(invalid="ignore"):
        lead = (
            best[..., None]
            - V
            - best_err[..., None]
            - E
            - 4 * _EPS * (np.abs(best[..., None]) + np.abs(V))
        )
    margin = np.min(np.where(is_top, np.inf, lead), axis=-1)
    winner = margin > 2.0 * reach
    onehot = np.eye(m)[top]
    mu = np.where(winner[..., None], onehot, mu)
    defect = np.abs(1.0 - np.sum(mu, axis=-1)) + 4 * m * _EPS * (~winner)
    # true FY of sum_j mu_j E_j - defect * bound: sum_j mu_j (best - E_j) + (1 - sum mu) best
    # + defect * bound <= sum_j mu_j (best - E_j) + defect (bound + |best|)
    fy = np.sum(mu * (best[..., None] - V), axis=-1) + defect * (bound + np.abs(best))
    exact = winner & (margin > 0.0)
    # the exact maximum is within the largest error of the pieces that can reach it (those
    # above the largest lower end), each E_j within its own: sum_j mu_j of the two
    low = np.max(V - E, axis=-1)
    contenders = V + E >= low[..., None]
    max_err = np.max(np.where(contenders, E, 0.0), axis=-1)
    moved = (max_err * np.sum(mu, axis=-1) + np.sum(mu * E, axis=-1)) * (1 + 4 * m * _EPS)
    err = np.where(exact, 0.0, moved) + 4 * m * _EPS * fy
    return mu, fy, err


def part_values(part: Term, offset: float, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(g(e), g'(e))`` of a ``max_terms`` sub-term ``g = weight psi(e) + offset``."""
    if part.kind == "affine":
        return e, np.ones_like(e)
    g, dg = sub_values(part.kind, e, part.param)
    return part.weight * g + offset, part.weight * dg


def sub_values(kind: str, e: np.ndarray, param: float | None) -> tuple[np.ndarray, np.ndarray]:
    """``(psi(e), psi'(e))`` of an elementwise atom (or the identity for ``affine``)."""
    if kind == "affine":
        return e, np.ones_like(e)
    if kind == "abs":
        return np.abs(e), np.sign(e)
    if kind == "square":
        return e * e, 2.0 * e
    if kind == "huber":
        assert param is not None  # a huber term always carries its threshold M
        M = float(param)
        inner = np.abs(e) <= M
        return (
            np.where(inner, e * e, 2.0 * M * np.abs(e) - M * M),
            np.where(inner, 2.0 * e, 2.0 * M * np.sign(e)),
        )
    if kind == "logistic":
        return _sp(e), expit(e)
    if kind == "exp":
        v = np.exp(np.minimum(e, 700.0))
        return v, v
    raise KeyError(kind)


def max_terms_weights(
    G: np.ndarray,
    D: np.ndarray,
    raw: list,
    margin: np.ndarray,
    J: np.ndarray | None = None,
) -> np.ndarray:
    """Weights ``mu`` (n, m) in the simplex for ``max_j g_j``: one-hot on a winner that beats
    every other piece by more than ``margin``; elsewhere the solver's split duals (``mu_j
    theta_j``) divided by the derivatives, restricted to the pieces near the top. A near piece
    whose derivative vanishes (``square`` at its kink) does not reveal its weight through its
    dual: such pieces share what the identified weights leave of one. With the pieces'
    Jacobians ``J`` (n, m, d), the weights are then refined (:func:`_stationary_weights`) so
    that the combined slope ``sum_j mu_j g_j' J_j`` matches the solver's ``sum_j raw_j J_j``.
    Clipped and normalized (one-hot on the top when they give no weight). Any simplex point
    is valid: the weights only decide how tight the minorant is."""
    n, m = G.shape
    top = np.argmax(G, axis=1)
    onehot = np.eye(m)[top]
    best = G[np.arange(n), top]
    second = np.max(np.where(onehot > 0, -np.inf, G), axis=1) if m > 1 else np.full(n, -np.inf)
    clear = best - second > margin
    near = G >= (best - margin)[:, None]
    dscale = 1e-6 * (1.0 + np.max(np.abs(np.nan_to_num(D)) * near, axis=1))
    cols = []
    blind = np.zeros((n, m), dtype=bool)  # near pieces whose dual cannot tell their weight
    for j in range(m):
        r = raw[j]
        if r is None:
            cols.append(np.zeros(n))
            continue
        d = D[:, j]
        ok = np.abs(d) > 1e-12
        blind[:, j] = np.abs(d) <= dscale
        cols.append(
            np.where(ok, np.nan_to_num(np.asarray(r, float).reshape(n)) / np.where(ok, d, 1.0), 0.0)
        )
    mu = np.nan_to_num(np.stack(cols, axis=1), nan=0.0, posinf=0.0, neginf=0.0)
    mu = np.clip(mu, 0.0, 1e300) * near
    blind &= near
    nblind = blind.sum(axis=1)
    seen = np.where(blind, 0.0, mu).sum(axis=1)
    rest = np.where(nblind > 0, np.clip(1.0 - seen, 0.0, 1.0) / np.maximum(nblind, 1), 0.0)
    mu = np.where(blind, rest[:, None], mu)
    total = mu.sum(axis=1, keepdims=True)
    ok = (total > 0) & np.isfinite(total)
    mu = np.where(ok, mu / np.where(ok, total, 1.0), onehot)
    if J is not None and m > 1 and all(r is not None for r in raw):
        R = np.stack([np.asarray(r, float).reshape(n) for r in raw], axis=1)
        mu = _stationary_weights(mu, D, R, J, near & ~clear[:, None])
    return np.where(clear[:, None], onehot, mu)


def _project_simplex(v: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Rows of ``v`` projected onto the simplex of the entries where ``mask`` (zero elsewhere);
    rows without a masked entry are returned unchanged."""
    m = v.shape[1]
    x = np.where(mask, v, -1e300)
    u = -np.sort(-x, axis=1)
    css = np.cumsum(np.where(u > -1e299, u, 0.0), axis=1) - 1.0
    k = np.arange(1, m + 1)
    cond = (u - css / k > 0) & (u > -1e299)
    rho = np.maximum(np.sum(cond, axis=1), 1)
    tau = css[np.arange(v.shape[0]), rho - 1] / rho
    out = np.where(mask, np.maximum(x - tau[:, None], 0.0), 0.0)
    return np.where(mask.any(axis=1, keepdims=True), out, v)


def _stationary_weights(
    mu: np.ndarray, D: np.ndarray, R: np.ndarray, J: np.ndarray, active: np.ndarray
) -> np.ndarray:
    """Per example with two or more ``active`` pieces: the simplex weights (on the active
    pieces) nearest, in combined slope, to the solver's: least squares of ``sum_j mu_j D_j J_j
    - sum_j R_j J_j`` by projected gradient from ``mu`` (never worse than ``mu``). At a kink
    this is the convex combination of the pieces' subgradients that the stationarity of the
    Lagrangian asks for. Only a choice of simplex weights: validity does not depend on it."""
    rows = np.flatnonzero(active.sum(axis=1) >= 2)
    if rows.size == 0:
        return mu
    with np.errstate(all="ignore"):
        Dr = np.nan_to_num(D[rows])
        Rr = np.nan_to_num(R[rows])
        Jr = np.nan_to_num(np.asarray(J, float)[rows])
        V = Dr[:, :, None] * Jr  # (k, m, d)
        c = np.einsum("km,kmd->kd", Rr, Jr)
        Q = np.einsum("kmd,kld->kml", V, V)
        q = np.einsum("kmd,kd->km", V, c)
        cc = np.einsum("kd,kd->k", c, c)
        act = active[rows]
        L = np.maximum(np.einsum("kmm->k", Q), 1e-300)

        def resid(x: np.ndarray) -> np.ndarray:
            return np.einsum("km,kml,kl->k", x, Q, x) - 2.0 * np.einsum("km,km->k", x, q) + cc

        x0 = _project_simplex(mu[rows], act)
        x = x0
        for _ in range(100):
            g = np.einsum("kml,kl->km", Q, x) - q
            x = _project_simplex(x - g / L[:, None], act)
        better = np.isfinite(resid(x)) & (resid(x) < resid(x0))
        x = np.where(better[:, None], x, x0)
    if not np.all(np.isfinite(x)):
        return mu
    out = mu.copy()
    out[rows] = x
    return out


def max_terms_clear(G: np.ndarray, margin: np.ndarray) -> np.ndarray:
    """Where the top piece beats every other by more than ``margin``."""
    n, m = G.shape
    if m == 1:
        return np.ones(n, dtype=bool)
    part = np.sort(G, axis=1)
    return part[:, -1] - part[:, -2] > margin


def _simplex_weights(
    duals: list[np.ndarray | None] | None, shape: tuple[int, ...], m: int
) -> np.ndarray:
    """Weights on the pieces from the solver's duals (one array per piece, None for a
    constant piece without a split row): clipped to [0, 1], a constant piece takes the rest,
    normalized; uniform where the duals give no weight."""
    if duals is None:
        return np.full(shape + (m,), 1.0 / m)
    cols = [
        np.zeros(shape) if x is None else np.broadcast_to(np.nan_to_num(x), shape) for x in duals
    ]
    mu = np.clip(np.stack(cols, axis=-1), 0.0, 1.0)
    missing = [j for j, x in enumerate(duals) if x is None]
    if missing:
        mu[..., missing[0]] = np.maximum(0.0, 1.0 - mu.sum(axis=-1))
    total = mu.sum(axis=-1, keepdims=True)
    return np.where(total > 0, mu / np.where(total > 0, total, 1.0), 1.0 / m)


def _arguments(
    decl: Declaration, term: Term, leaves: dict, pts: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]] | None:
    """Per argument of ``term``: its offset and Jacobian broadcast to every example, its value
    at the examples' points ``pts`` (rows ``(n, d)``, or one point ``(d,)``), a bound on that
    value's rounding (dot products of length ``d`` plus the offset) and whether the Jacobian
    is one zero broadcast to every example (a piece constant in w: no products). None where
    an argument has no affine jet."""
    n, d = decl.n, decl.d
    gamma = (d + 3) * _EPS * 1.01
    try:
        jets = [affine_jet(arg, decl.variable, leaves, n) for arg in term.args]
    except Unsupported:
        return None

    def apply(jac: np.ndarray, at: np.ndarray) -> np.ndarray:  # jac (n, ..., d)
        if at.ndim == 1:
            return jac @ at
        return np.einsum("n...d,nd->n...", jac, at)

    out = []
    for off, jac in jets:
        off = np.broadcast_to(np.asarray(off, float), (n,) + np.shape(off)[1:])
        jac = np.broadcast_to(np.asarray(jac, float), off.shape + (d,))
        if _zero_jacobian(jac):
            out.append((off, jac, off + 0.0, gamma * np.abs(off) + _EPS * np.abs(off), True))
            continue
        u = apply(jac, pts)
        err = gamma * (np.abs(off) + apply(np.abs(jac), np.abs(pts))) + _EPS * np.abs(off + u)
        out.append((off, jac, off + u, err, False))
    return out


def _per_example(
    decl: Declaration,
    points: np.ndarray,
    thetas: list,
    radius: float,
    domain: Domain | LocalizedDomain,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Per example ``i``, at its point ``points[i]`` (or one point for all): the sum of the
    weighted Fenchel-Young gaps of its terms, a bound on their error, the minorant's slope
    ``s_i`` and the sum of absolute values behind it (for the slope's rounding). None when a
    term is outside :data:`STABLE_KINDS` (and not a vector atom that reads no data)."""
    if not all(_stable(t) for t in decl.terms):
        return None
    n, d = decl.n, decl.d
    leaves = decl.derived_values()
    pts = np.asarray(points, float)
    center = np.asarray(domain.center, float)
    dom_radius = float(domain.radius)
    fy_sum = np.zeros(n)
    err_sum = np.zeros(n)
    summands = 0  # terms x elements x pieces summed into each example's slope
    # the sums start empty: the first term's rows are taken as they are (0 + x is x)
    slope: np.ndarray | None = None
    slope_abs: np.ndarray | None = None

    for term, theta_t in zip(decl.terms, thetas):
        wgt = float(term.weight)
        if term.kind == "generic":  # a quadratic form that reads no data (_stable)
            form = _quadratic_rows(decl, term, leaves, pts)
            quad = None if form is None else _quadratic_gap(form, pts, center, dom_radius)
            if quad is None:
                return None
            fy, err, g, gabs, count = quad
            summands += count
            fy_sum += wgt * fy
            err_sum += wgt * err
            # (views of one row for every example at one point: not owned)
            slope = _accumulate(slope, wgt, g, owned=False)
            slope_abs = _accumulate(slope_abs, wgt, gabs, owned=False)
            continue
        args = _arguments(decl, term, leaves, pts)
        if args is None:
            return None
        vals, errs, reaches, jacs, offs, norms = [], [], [], [], [], []
        for off, jac, val, err, zero in args:
            vals.append(val)
            errs.append(err)
            # (a piece constant in w, the 0 of a hinge, has no products: norm zero)
            norms.append(np.zeros(off.shape) if zero else np.linalg.norm(jac, axis=-1))
            reaches.append(norms[-1] * radius)
            jacs.append(jac)
            offs.append(off)
        summands += sum(int(np.prod(v.shape[1:])) for v in vals)
        if term.kind == "affine":
            slope = _accumulate(slope, wgt, _rows(jacs[0], n, d), owned=False)
            slope_abs = _accumulate(slope_abs, wgt, _rows(np.abs(jacs[0]), n, d))
            continue
        if term.kind == "max_terms":
            out = _max_terms(
                term, vals, errs, reaches, offs, jacs, theta_t, center, dom_radius, n, d
            )
            if out is None:
                return None
            fy, err, g, gabs = out
            fy_sum += wgt * fy
            err_sum += wgt * err
            slope = _accumulate(slope, wgt, g)
            slope_abs = _accumulate(slope_abs, wgt, gabs)
            continue
        if term.kind in VECTOR_GAPS:
            raw = None if theta_t is None else theta_t[0]
            # |E| over the domain's ball, entrywise (a maximum's multipliers off the simplex
            # by rounding are charged their defect times its largest value there)
            span = np.abs(offs[0] + jacs[0] @ center) + norms[0] * dom_radius
            fy, err, g, gabs = _vector(term, vals[0], errs[0], raw, jacs[0], span, n, d)
        elif term.kind in MONOTONE:
            fy, err, g, gabs = _monotone(
                term, vals, errs, offs, jacs, norms, theta_t, center, dom_radius
            )
        elif term.kind == "pieces":
            # CVXPY broadcasting aligns trailing axes: insert axes after the batch axis
            nd = max(v.ndim for v in vals)

            def pad(a, extra=0, nd=nd):
                k = a.ndim - extra
                return a.reshape(a.shape[:1] + (1,) * (nd - k) + a.shape[1:])

            vals = [pad(v) for v in vals]
            errs = [pad(e) for e in errs]
            reaches = [pad(r) for r in reaches]
            offs = [pad(o) for o in offs]
            jacs = [pad(j, 1) for j in jacs]
            shape = np.broadcast_shapes(*[v.shape for v in vals])
            vals = [np.broadcast_to(v, shape) for v in vals]
            errs = [np.broadcast_to(e, shape) for e in errs]
            reach = np.max(np.stack([np.broadcast_to(r, shape) for r in reaches]), axis=0)
            m = len(vals)
            duals = (
                None
                if theta_t is None
                else [None if x is None else pad(np.asarray(x, float)) for x in theta_t]
            )
            mu0 = _simplex_weights(duals, shape, m)
            # |max_j E_j| on the ball: the maximum lies between the largest lower end and the
            # largest upper end of the pieces' ranges (each widened by its rounding), so a
            # piece far below, a label of 1e12 there, does not count
            highs, lows = [], []
            for off, jac in zip(offs, jacs):
                mid = off + jac @ center
                spread = np.linalg.norm(jac, axis=-1) * dom_radius
                slack = (d + 3) * _EPS * 1.01 * (np.abs(off) + np.abs(jac) @ np.abs(center))
                highs.append(np.broadcast_to(mid + spread + slack, shape))
                lows.append(np.broadcast_to(mid - spread - slack, shape))
            bound = np.maximum(
                np.abs(np.max(np.stack(highs), axis=0)), np.abs(np.max(np.stack(lows), axis=0))
            )
            mu, fy, err = _pieces(
                vals,
                errs,
                mu0,
                reach + np.max(np.stack(errs), axis=0),
                bound * (1 + 8 * (d + 2) * _EPS),
            )
            # pieces constant in w (a zero Jacobian shared by every example, e.g. the 0 of
            # a hinge) add nothing to the slope: skipped, the same floats
            live = [j for j in range(m) if not _zero_jacobian(jacs[j])] or [0]
            g = sum(mu[..., j, None] * np.broadcast_to(jacs[j], shape + (d,)) for j in live)
            if len(live) == 1:  # mu >= 0: |mu J| is mu |J| exactly
                gabs = np.abs(g)
            else:
                gabs = sum(
                    mu[..., j, None] * np.abs(np.broadcast_to(jacs[j], shape + (d,))) for j in live
                )
        else:
            e, err_e, reach = vals[0], errs[0], reaches[0] + errs[0]
            raw = None if theta_t is None else theta_t[0]
            theta0 = np.zeros_like(e) if raw is None else np.broadcast_to(raw, e.shape)
            theta0 = clip(term.kind, theta0, term.param)
            theta, fy, err = _elementwise(term.kind, e, err_e, theta0, reach, term.param)
            g = theta[..., None] * jacs[0]
            gabs = np.abs(g)  # |theta| |J|: abs is exact, so the same floats
        if not (np.all(np.isfinite(fy)) and np.all(np.isfinite(err))):
            return None
        fy_sum += wgt * _rows(fy, n)
        err_sum += wgt * _rows(err, n)
        slope = _accumulate(slope, wgt, _rows(g, n, d))
        slope_abs = _accumulate(slope_abs, wgt, _rows(gabs, n, d))
    if slope is None or slope_abs is None:
        slope, slope_abs = np.zeros((n, d)), np.zeros((n, d))
    slope_abs *= 1.0 + summands / 64.0  # an array of this function's own
    return fy_sum, err_sum, slope, slope_abs


def per_example_values(
    decl: Declaration, points: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """Per example, its loss at its point (``points``: rows ``(n, d)``, or one point ``(d,)``
    for all), computed from its terms' own arguments, and a bound on that value's error; None
    for a term outside :data:`STABLE_KINDS` (or an ``exp`` argument above 700).

    Each argument ``e`` is within ``err`` of the exact one (as in :func:`_per_example`), and
    every atom here is convex, so a term moves by at most its atom's largest slope over
    ``[e - err, e + err]`` (the interval's ends bound it) times ``err``; a maximum of pieces
    by at most its pieces' largest error. The atoms' and the sums' rounding is relative to
    the values. An example on the flat side of its atom (a label of 1e12 there) has an error
    of zero whatever the size of its argument, where a margin relative to the argument
    charged it 1e-12 * 1e12."""
    if not all(_stable(t) for t in decl.terms):
        return None
    n = decl.n
    leaves = decl.derived_values()
    pts = np.asarray(points, float)
    value, error, mag = np.zeros(n), np.zeros(n), np.zeros(n)
    summands = 0
    for term in decl.terms:
        wgt = float(term.weight)
        if term.kind == "generic":  # a quadratic form that reads no data (_stable)
            form = _quadratic_rows(decl, term, leaves, pts)
            if form is None:
                return None
            v, e_ = _quadratic_value(form)
            summands += int(np.size(v) // n)
            value += wgt * v
            error += abs(wgt) * e_
            mag += abs(wgt) * np.abs(v)
            continue
        args = _arguments(decl, term, leaves, pts)
        if args is None:
            return None
        vals = [val for _, _, val, _, _ in args]
        errs = [err for _, _, _, err, _ in args]
        with np.errstate(over="ignore", invalid="ignore"):
            out = _term_value(term, vals, errs, n)
        if out is None:
            return None
        v, e_ = out
        summands += int(np.prod(v.shape[1:]))
        value += wgt * _rows(v, n)
        error += abs(wgt) * _rows(e_, n)
        mag += abs(wgt) * _rows(np.abs(v), n)
    error = error * (1 + 8 * _EPS) + (summands + 4) * 2 * _EPS * mag + 1e-300
    if not (np.all(np.isfinite(value)) and np.all(np.isfinite(error))):
        return None
    return value, error


def _term_value(
    term: Term, vals: list[np.ndarray], errs: list[np.ndarray], n: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """One term's value per element and a bound on its error (:func:`per_example_values`)."""
    kind = term.kind
    if kind == "affine":
        return vals[0], errs[0]
    if kind in VECTOR_GAPS:
        return _vector_value(term, vals[0], errs[0], n)
    if kind == "max_terms":
        parts = term.parts
        if any(p.kind == "exp" for p in parts):
            return None
        E = [np.asarray(v, float).reshape(n) for v in vals]
        R = [np.asarray(e_, float).reshape(n) for e_ in errs]
        G, gerr = [], []
        for part, b, e, r in zip(parts, term.offsets, E, R):
            g, dg = part_values(part, b, e)
            G.append(g)
            gerr.append(
                np.abs(dg) * r
                + abs(part.weight) * _curvature(part.kind, e, r)
                + 4 * _EPS * (np.abs(g) + abs(b))
            )
        # each g_j within gerr_j of the exact one: their maximum within the largest
        return np.max(np.stack(G), axis=0), np.max(np.stack(gerr), axis=0)
    if kind == "pieces" or kind in MONOTONE:
        nd = max(v.ndim for v in vals)
        padded = [v.reshape(v.shape[:1] + (1,) * (nd - v.ndim) + v.shape[1:]) for v in vals]
        perr = [e.reshape(e.shape[:1] + (1,) * (nd - e.ndim) + e.shape[1:]) for e in errs]
        shape = np.broadcast_shapes(*[v.shape for v in padded])
        V = np.stack([np.broadcast_to(v, shape) for v in padded])
        Err = np.stack([np.broadcast_to(e, shape) for e in perr])
        M = np.max(V, axis=0)
        # the exact maximum lies in [max_j (E_j - err_j), max_j (E_j + err_j)], each end
        # rounded outward (exact where a piece without error leads the others by more)
        hi = np.max(np.nextafter(V + Err, np.inf), axis=0)
        lo = np.max(np.nextafter(V - Err, -np.inf), axis=0)
        err_m = np.nextafter(np.maximum(hi - M, M - lo), np.inf)
        if kind == "pieces":
            return M, err_m
        p = float(term.param_value)
        top = M + err_m
        if kind == "pos_power":
            val = np.maximum(M, 0.0) ** p
            slope = p * np.maximum(top, 0.0) ** (p - 1.0)
            rounding = 32 * _EPS * val
        else:  # pos_huber: the Huber function of max(M, 0), threshold p
            pos = np.maximum(M, 0.0)
            val = np.where(pos <= p, pos * pos, 2.0 * p * pos - p * p)
            slope = 2.0 * np.clip(top, 0.0, p)
            rounding = 32 * _EPS * np.where(pos <= p, val, val + 2.0 * p * pos + p * p)
        # psi is nondecreasing and convex: its slope at the top of the interval bounds it
        return val, slope * err_m * (1 + 32 * _EPS) + rounding
    e, err = vals[0], errs[0]
    if kind == "exp" and np.any(e + err > 700.0):
        return None
    param = term.param
    val = sub_values(kind, e, param)[0]
    slope = np.maximum(
        np.abs(sub_values(kind, e - err, param)[1]), np.abs(sub_values(kind, e + err, param)[1])
    )
    rounding = 8 * _EPS * np.abs(val)
    if kind == "huber":
        M = float(param)  # type: ignore[arg-type]
        rounding = rounding + 8 * _EPS * (2.0 * M * np.abs(e) + M * M)
    return val, slope * err * (1 + 16 * _EPS) + rounding


@functools.lru_cache(maxsize=64)
def _lowest_eigenvalue(data: bytes, shape: tuple[int, ...]) -> float:
    """The smallest eigenvalue of ``(P + P^T) / 2`` for the matrix ``P`` of these bytes
    (once per matrix: a certificate asks for it on every row chunk)."""
    P = np.frombuffer(data, dtype=float).reshape(shape)
    return float(np.linalg.eigvalsh((P + P.T) / 2.0)[0])


def _argument_rows(
    decl: Declaration, E: object, leaves: dict, pts: np.ndarray, rows: int
) -> tuple | None:
    """:func:`_arguments` of the one argument ``E`` of a term that reads no data, on the
    first ``rows`` examples (one where every example has the same point)."""
    from types import SimpleNamespace

    key = None
    if rows == 1:  # one point: the same numbers on every row chunk of a certificate
        key = (id(E), id(decl.variable), np.asarray(pts, float).tobytes())
        with _ONE_ROW_LOCK:
            hit = _ONE_ROW.get(key)
        if hit is not None and hit[0] is E:
            return hit[1]
    part = decl if rows == decl.n else decl.subset(np.arange(rows))
    found = _arguments(
        part,
        cast(Term, SimpleNamespace(args=(E,))),
        leaves if rows == decl.n else part.derived_values(),
        pts,
    )
    out = None if found is None else found[0]
    if key is not None:
        with _ONE_ROW_LOCK:
            if len(_ONE_ROW) >= 16:
                _ONE_ROW.pop(next(iter(_ONE_ROW)))
            _ONE_ROW[key] = (E, out)  # (E kept alive: its id is not reused while cached)
    return out


#: :func:`_argument_rows` at one point, the last few (keyed by the argument's and the
#: variable's identity and the point)
_ONE_ROW: dict[tuple, tuple] = {}
_ONE_ROW_LOCK = threading.Lock()


@dataclass(frozen=True)
class _QuadraticRows:
    """A quadratic form ``E^T P E`` that reads no data (:func:`_quadratic`) at the
    examples' points: ``P``, the ``n`` examples, and on the first ``rows`` of them (one at a
    single point, where every example's numbers are the first's) the argument ``Eh``, its
    rounding ``R`` and its Jacobian ``J``."""

    P: np.ndarray
    n: int
    rows: int
    Eh: np.ndarray  # (rows, m)
    R: np.ndarray  # (rows, m)
    J: np.ndarray  # (rows, m, d)


def _quadratic_rows(
    decl: Declaration, term: Term, leaves: dict, pts: np.ndarray
) -> _QuadraticRows | None:
    """:class:`_QuadraticRows` of ``term`` at ``pts``, or None where it is not such a form
    or its argument has no jet."""
    found = _quadratic(term)
    if found is None:
        return None
    P, E = found
    n, d = decl.n, decl.d
    rows = 1 if np.ndim(pts) == 1 else n
    args = _argument_rows(decl, E, leaves, pts, rows)
    if args is None:
        return None
    _, jac, val, err, _ = args
    m = int(np.prod(val.shape[1:])) if val.ndim > 1 else 1
    return _QuadraticRows(
        P,
        n,
        rows,
        np.asarray(val, float).reshape(rows, m),
        np.asarray(err, float).reshape(rows, m),
        np.asarray(jac, float).reshape(rows, m, d),
    )


def _quadratic_gap(
    q: _QuadraticRows, pts: np.ndarray, center: np.ndarray, dom_radius: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int] | None:
    """Per example, for ``q(E) = E^T P E`` (:func:`_quadratic`) at the example's point:
    the gap of the cut ``q(e0) + <theta, J (w - w_hat)>`` less the allowance ``V`` that makes
    it a minorant on the domain, ``V`` itself (``q(e0)``, the exact value at ``e0 = E(w_hat)``,
    never enters), an error of zero, the slope ``J^T theta`` and the sum of absolute values
    behind it, and the number of products in each slope; None where ``P``, the argument or
    the bound is not finite.

    ``theta = (P + P^T) E_hat`` in floats is off the exact gradient ``(P + P^T) e0`` by at
    most ``delta = (m + 2) eps (|P| + |P^T|) |E_hat| + (|P| + |P^T|) err`` (the sum's and the
    product's rounding, and the argument's own error ``err``), entrywise. On the domain
    ``q(E(w)) - [q(e0) + <theta, J (w - w_hat)>] >= (e - e0)^T P (e - e0) - <delta, |J (w -
    w_hat)|>``, and ``|J (w - w_hat)| <= r = |J| |w_hat - c| + ||J_j|| R`` (the ball of radius
    ``R`` about ``c`` that holds the domain). With ``mu`` ``P``'s negative curvature (zero
    for a positive semidefinite ``P``, as CVXPY checks it or ``psd_wrap`` asserts it),
    ``V = <delta, r> + mu ||r||^2``: a subgradient whose rounding cancels (an ill-conditioned
    ``P`` far from the origin) is charged its whole error, where a margin relative to the
    computed slope missed it by 1e8 (a review's case). At one point for every example the
    first example's numbers are every one's: computed on it once, then broadcast."""
    P, n, rows, Eh, R, J = q.P, q.n, q.rows, q.Eh, q.R, q.J
    m, d = J.shape[1], J.shape[2]
    A = np.abs(P) + np.abs(P.T)
    theta = Eh @ (P + P.T).T  # (P + P^T) E_hat per example
    gamma = (m + 2) * _EPS * 1.01
    delta = gamma * (np.abs(Eh) @ A.T) + (R @ A.T) * (1 + 4 * _EPS)
    pts2 = np.broadcast_to(pts, (rows, d))
    reach = (
        np.einsum("nmd,nd->nm", np.abs(J), np.abs(pts2 - center))
        + np.linalg.norm(J, axis=2) * dom_radius
    )
    reach *= 1 + (d + 4) * _EPS
    # negative curvature: the smallest eigenvalue of (P + P^T) / 2 where it is negative. A
    # P that CVXPY compiled is positive semidefinite to its own check (or asserted with
    # psd_wrap), on which the whole certificate rests, as for every convex term; within the
    # eigenvalues' rounding it is taken as such (charging that rounding, 16 m eps |P|, times
    # the reach squared cost a singular P = D^T D on a ball of radius 100 a gap of 1e-9)
    mu = max(0.0, -_lowest_eigenvalue(P.tobytes(), P.shape)) if m else 0.0
    V = np.sum(delta * reach, axis=1) + mu * np.sum(reach * reach, axis=1)
    V = V * (1 + 4 * (m + 2) * _EPS)
    if not np.all(np.isfinite(V)) or not np.all(np.isfinite(theta)):
        return None
    g = np.einsum("nm,nmd->nd", theta, J)
    gabs = np.einsum("nm,nmd->nd", np.abs(theta), np.abs(J))
    if rows < n:
        V, g, gabs = (
            np.broadcast_to(V, (n,)),
            np.broadcast_to(g, (n, d)),
            np.broadcast_to(gabs, (n, d)),
        )
    return V, np.zeros(n), g, gabs, m


def quadratic_cut(
    decl: Declaration, term: Term, pts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The value-based certificate's minorant of a quadratic form that reads no data
    (:func:`_quadratic`), weight included, per example at its point: slopes ``J^T theta``
    and intercepts ``q_lo - <J^T theta, w_hat> - V``, with ``q_lo`` the value at the point
    less its error (:func:`_quadratic_value`) and ``V`` the allowance of
    :func:`_quadratic_gap`, so that it is a minorant on the domain whatever the rounding of
    the slope (CVXPY's tangent cut, charged relative to the computed slope, was not: a
    review's ill-conditioned form far from the origin certified 1.9e-9 where the true gap
    was 2.9e-5); and the value's error bound, which the certificate's upper bound adds (a
    value that cancels is off by far more than a margin relative to it). None where
    :func:`_quadratic_gap` is."""
    dom = decl.domain
    pts = np.asarray(pts, float)
    q = _quadratic_rows(decl, term, decl.derived_values(), pts)
    if q is None:
        return None
    gap = _quadratic_gap(q, pts, np.asarray(dom.center, float), float(dom.radius))
    if gap is None:
        return None
    val = _quadratic_value(q)
    V, _, g, _, _ = gap
    value, error = val
    at = np.broadcast_to(pts, g.shape)
    wgt = float(term.weight)
    intercept = value - error - V - np.sum(g * at, axis=1)
    return wgt * g, wgt * intercept, abs(wgt) * error


def _quadratic_value(q: _QuadraticRows) -> tuple[np.ndarray, np.ndarray]:
    """Per example, ``E^T P E`` (:func:`_quadratic`) at the example's point and a bound on
    that value's error: the argument's error through ``|P| + |P^T|``, and the products' and
    sums' rounding."""
    P, n, Eh, R = q.P, q.n, q.Eh, q.R
    m = Eh.shape[1]
    A = np.abs(P) + np.abs(P.T)
    absP = np.abs(P)
    value = np.sum(Eh * (Eh @ P.T), axis=1)
    error = np.sum(R * (np.abs(Eh) @ A.T), axis=1) + np.sum(R * (R @ absP.T), axis=1)
    error += 2 * (m + 2) * _EPS * 1.01 * np.sum(np.abs(Eh) * (np.abs(Eh) @ absP.T), axis=1)
    error = error * (1 + 8 * _EPS)
    return np.broadcast_to(value, (n,)), np.broadcast_to(error, (n,))


def _vector(
    term: Term,
    e: np.ndarray,
    err: np.ndarray,
    raw: np.ndarray | None,
    jac: np.ndarray,
    span: np.ndarray,
    n: int,
    d: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per example, for a vector atom ``psi`` of :data:`VECTOR_GAPS` of the argument ``e``
    (within ``err`` of the exact one, entrywise): the Fenchel-Young gap ``psi(e) - <theta, e>
    + psi*(theta)`` with ``theta`` the multipliers ``raw`` clipped into the conjugate's domain
    (as the value-based certificate takes them), written as a sum of nonnegative parts; a
    bound on its error (the argument's error through the atom's and ``theta``'s slopes, and
    the parts' rounding, relative to their sizes); the minorant's slope ``J^T theta`` and
    the sum of absolute values behind it. The entries are the argument's, flattened
    row-major, as the certificate's multipliers are. ``span`` bounds ``|E|`` entrywise over
    the domain: multipliers of a maximum or ``log_sum_exp`` whose sum is off one by ``delta``
    (rounding) make the minorant ``<theta, e> - psi*(theta) - delta B``, valid with ``B`` at
    least the atom's size over the domain, as the value-based certificate takes it; the gap
    is charged ``delta (|psi(e)| + B)``."""
    kind = term.kind
    E = np.asarray(e, float).reshape(n, -1)
    R = np.asarray(err, float).reshape(n, -1)
    k = E.shape[1]
    J = np.asarray(jac, float).reshape(n, k, d)
    theta = np.zeros((n, k)) if raw is None else np.broadcast_to(np.asarray(raw, float), E.shape)
    theta = clip(kind, theta.reshape(n, k), term.param)
    absE, absT = np.abs(E), np.abs(theta)
    size = np.sum(absT * absE, axis=1)  # sum |theta e|
    if kind == "norm2":  # ||e|| - <theta, e>, ||theta|| <= 1
        nrm = row_norms(E)
        fy = np.maximum(nrm - np.sum(theta * E, axis=1), 0.0)
        move = (1.0 + row_norms(theta)) * row_norms(R)
        scale = nrm + size
    elif kind == "norm1":  # sum_j |e_j| (1 - theta_j sgn e_j), |theta_j| <= 1
        fy = np.sum(absE * (1.0 - theta * np.sign(E)), axis=1)
        move = np.sum((1.0 + absT) * R, axis=1)
        scale = np.sum(absE, axis=1) + size
    elif kind == "norminf":  # sum_j |theta_j| (m - sgn(theta_j) e_j) + (1 - |theta|_1) m
        top = np.max(absE, axis=1)
        fy = np.sum(absT * (top[:, None] - np.sign(theta) * E), axis=1)
        fy += np.maximum(1.0 - np.sum(absT, axis=1), 0.0) * top
        move = 2.0 * np.max(R, axis=1)
        scale = top + size
    elif kind == "max":  # sum_j theta_j (m - e_j) + (1 - sum theta) m, theta in the simplex
        top = np.max(E, axis=1)
        fy = np.sum(theta * (top[:, None] - E), axis=1)
        reach = np.max(np.asarray(span, float).reshape(n, k), axis=1)
        fy += np.abs(1.0 - np.sum(theta, axis=1)) * (np.abs(top) + reach)
        move = 2.0 * np.max(R, axis=1)
        scale = np.abs(top) + size
    elif kind == "log_sum_exp":
        # sum_j theta_j (log theta_j - (e_j - lse e)) + (1 - sum theta) lse e: a divergence
        # from softmax(e), its log computed as (e_j - max e) - log sum exp(e - max e)
        top = np.max(E, axis=1)
        shifted = E - top[:, None]
        tail = np.log(np.sum(np.exp(shifted), axis=1))
        log_soft = shifted - tail[:, None]
        lse = top + tail
        fy = np.sum(xlogy(theta, theta) - theta * log_soft, axis=1)
        # |lse| over the domain: at most its largest entry's size plus log k (and s log s
        # >= s - 1 for the multipliers' sum s: one more)
        reach = np.max(np.asarray(span, float).reshape(n, k), axis=1) + np.log(k) + 1.0
        fy += np.abs(1.0 - np.sum(theta, axis=1)) * (np.abs(lse) + reach)
        fy = np.maximum(fy, 0.0)
        move = 2.0 * np.max(R, axis=1)
        scale = (
            np.abs(lse)
            + size
            + np.sum(np.abs(xlogy(theta, theta)) + absT * np.abs(log_soft), axis=1)
        )
    else:  # sum_squares, ||e||^2 / a: ||e - a theta / 2||^2 / a
        a = float(term.param)  # type: ignore[arg-type]
        diff = E - (a / 2.0) * theta
        fy = np.sum(diff * diff, axis=1) / a
        # its gradient 2 (e - a theta / 2) / a, plus the curvature over the error
        move = (2.0 * row_norms(diff) * row_norms(R) + np.sum(R * R, axis=1)) / a
        scale = (np.sum(E * E, axis=1) + np.sum(np.abs(diff) * (absE + a * absT / 2), axis=1)) / a
    error = move * (1 + 16 * _EPS) + (4 * k + 16) * _EPS * scale
    g = np.einsum("nk,nkd->nd", theta, J)
    gabs = np.einsum("nk,nkd->nd", absT, np.abs(J))
    return fy, error, g, gabs


def _vector_value(
    term: Term, e: np.ndarray, err: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per example, a vector atom of :data:`VECTOR_GAPS` at the argument ``e`` (within
    ``err`` of the exact one, entrywise) and a bound on that value's error: the atom's slope
    over the error (1 in the norm's dual: the 2-norm's, the sum's, the largest entry's) and
    its rounding relative to the value."""
    kind = term.kind
    E = np.asarray(e, float).reshape(n, -1)
    R = np.asarray(err, float).reshape(n, -1)
    k = E.shape[1]
    if kind == "norm2":
        val, move = row_norms(E), row_norms(R)
    elif kind == "norm1":
        val, move = np.sum(np.abs(E), axis=1), np.sum(R, axis=1)
    elif kind == "norminf":
        val, move = np.max(np.abs(E), axis=1), np.max(R, axis=1)
    elif kind == "max":
        val, move = np.max(E, axis=1), np.max(R, axis=1)
    elif kind == "log_sum_exp":
        top = np.max(E, axis=1)
        val = top + np.log(np.sum(np.exp(E - top[:, None]), axis=1))
        move = np.max(R, axis=1)
    else:  # sum_squares
        a = float(term.param)  # type: ignore[arg-type]
        val = np.sum(E * E, axis=1) / a
        move = (2.0 * row_norms(E) * row_norms(R) + np.sum(R * R, axis=1)) / a
    return val, move * (1 + 16 * _EPS) + (4 * k + 16) * _EPS * np.abs(val)


def _monotone(
    term: Term,
    vals: list[np.ndarray],
    errs: list[np.ndarray],
    offs: list[np.ndarray],
    jacs: list[np.ndarray],
    norms: list[np.ndarray],
    raw: list[np.ndarray | None] | None,
    center: np.ndarray,
    dom_radius: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per element of ``psi(max_j E_j)`` (``psi`` nondecreasing: ``pos_power``,
    ``pos_huber``): the Fenchel-Young gap against the minorant ``sum_j lam_j E_j - psi*(t)``
    of the value-based certificate (the same multipliers,
    :func:`~dpcvx.certification._conjugates.monotone_multipliers`), a bound on its error, the
    minorant's slope and the sum of absolute values behind it.

    With ``M = max_j E_j`` and ``t = sum_j lam_j`` the gap is ``A + B``, both nonnegative:
    ``A = psi(M) - t M + psi*(t)`` (Fenchel-Young of ``psi`` alone) and ``B = sum_j lam_j (M -
    E_j)``. Each is computed from the element's own terms, so a huge argument enters only
    through the slopes there: an element on the flat part of ``psi`` well away from its knee
    (``psi' = 0`` wherever ``M`` can lie, and no multiplier) has gap and error exactly zero,
    where the value-based bound charged a margin relative to its argument (a label 1e8 times
    the others in ``max(x^T w - y, 0)**p``)."""
    nd = max(v.ndim for v in vals)

    def pad(a: np.ndarray, extra: int = 0) -> np.ndarray:
        # CVXPY broadcasting aligns trailing axes: insert axes after the batch axis
        k = a.ndim - extra
        return a.reshape(a.shape[:1] + (1,) * (nd - k) + a.shape[1:])

    vals, errs = [pad(v) for v in vals], [pad(e) for e in errs]
    offs, jacs = [pad(o) for o in offs], [pad(j, 1) for j in jacs]
    norms = [pad(r) for r in norms]  # the rows' norms of jacs, from the caller
    shape = np.broadcast_shapes(*[v.shape for v in vals])
    m = len(vals)
    E = np.stack([np.broadcast_to(v, shape) for v in vals])
    Err = np.stack([np.broadcast_to(e, shape) for e in errs])
    live = [j for j in range(m) if not _zero_jacobian(jacs[j])] or [0]
    # each piece's range on the domain's ball (a piece constant in w: its offset), and the
    # largest max_j E_j there
    mid = np.stack(
        [
            np.broadcast_to(off + jac @ center if j in live else off, shape)
            for j, (off, jac) in enumerate(zip(offs, jacs))
        ]
    )
    spread = np.stack(
        [
            np.broadcast_to(nrm * dom_radius if j in live else np.zeros(1), shape)
            for j, nrm in enumerate(norms)
        ]
    )
    reach = np.max(mid + spread, axis=0)
    outward = 8 * _EPS * (np.abs(mid) + spread)  # their rounding
    ranges = (mid - spread - outward, mid + spread + outward)
    duals: list[np.ndarray | None] = (
        [None] * m
        if raw is None
        else [None if x is None else np.broadcast_to(pad(np.asarray(x, float)), shape) for x in raw]
    )
    kind, param = term.kind, float(term.param_value)
    with np.errstate(over="ignore", invalid="ignore"):
        lam, _, conj = monotone_multipliers(kind, param, E, duals, reach, ranges)
        t = lam.sum(axis=0)  # within (m - 1) eps t of the exact sum
        M = E.max(axis=0)
        # the exact maximum lies in [max_j (E_j - err_j), max_j (E_j + err_j)] (exact where a
        # piece without error, the 0 of max(E, 0), leads the others by more than theirs)
        hi, lo = np.max(E + Err, axis=0), np.max(E - Err, axis=0)
        err_e = np.maximum(hi - M, M - lo)
        # (each of those float sums and differences is rounded: an ulp of its operands, the
        # leading ones only; a piece far below the maximum, the argument of max(E, 0) at a
        # label of -1e40, leaves its own error out of it, as it leaves its value)
        err_e = np.maximum(err_e, 0.0) * (1 + 4 * _EPS) + 4 * _EPS * (
            np.abs(M) + np.abs(hi) + np.abs(lo)
        )

        def slope(v: np.ndarray) -> np.ndarray:  # psi', nondecreasing
            if kind == "pos_power":
                return param * np.maximum(v, 0.0) ** (param - 1.0)
            return 2.0 * np.clip(v, 0.0, param)

        # the float sum t is exact where at most one multiplier is not zero (the smooth
        # path's: the slope on the active piece); else within (m - 1) eps t, which moves A by
        # that times |M|
        summed = np.count_nonzero(lam, axis=0) > 1
        t_err = np.where(summed, 2 * m * _EPS * t, 0.0) * np.abs(M)
        if kind == "pos_power":
            value = np.maximum(M, 0.0) ** param
            A = value - t * M + conj
            # rounding: of psi and psi* (a power each), of t M and the sums
            round_a = 32 * _EPS * (value + t * np.abs(M) + conj)
        else:
            # huber(max(M, 0)) - t M + c without cancellation against huge M: with
            # c - t^2/4 >= 0 (c is psi*(t_up), psi*(t) = t^2/4),
            #   M <= 0:      -t M + c
            #   0 < M <= K:  (M - t/2)^2 + (c - t^2/4)
            #   M > K:       (2K - t)(M - K) + (K - t/2)^2 + (c - t^2/4)
            K = param
            extra = conj - t * t / 4.0
            outer = (2.0 * K - t) * (M - K) + (K - t / 2.0) ** 2
            A = np.where(M <= 0.0, -t * M + conj, np.where(M <= K, (M - t / 2.0) ** 2, outer))
            A = np.where(M <= 0.0, A, A + extra)
            round_a = 16 * _EPS * (np.abs(A) + conj + np.where(M <= 0.0, t * np.abs(M), 0.0))
            round_a += 16 * _EPS * np.where(M > K, np.abs(2.0 * K - t) * (M - K) + K * K, 0.0)
        round_a = round_a + t_err
        B = np.sum(lam * (M[None] - E), axis=0)
        round_b = 4 * (m + 2) * _EPS * B
        # with the exact arguments, A moves by at most sup |psi' - t| over [M - err_e,
        # M + err_e] times err_e (psi' is monotone: the ends bound it), B by at most
        # sum_j lam_j (err_e + err_j)
        # (the ends' own rounding widens them by an ulp; the power's slope rounds, the Huber
        # function's, 2 clip(v, 0, K), is exact: its constant 2K past the knee meets t
        # exactly, whatever the argument's size)
        inflate = 32 * _EPS if kind == "pos_power" else 0.0
        below, above = M - err_e, M + err_e
        low = slope(below - 2 * _EPS * np.abs(below)) * (1 - inflate)
        high = slope(above + 2 * _EPS * np.abs(above)) * (1 + inflate)
        t_slack = np.where(summed, 2 * m * _EPS * t, 0.0)  # (the sum's rounding, as above)
        moved = (np.maximum(np.abs(high - t), np.abs(t - low)) + t_slack) * err_e
        # (the winner's own M - E_j stays exactly zero where it wins on the whole box of
        # exact arguments: M moves with it)
        win = np.argmax(E, axis=0)
        is_win = np.arange(m).reshape((m,) + (1,) * M.ndim) == win[None]
        others = np.max(np.where(is_win, -np.inf, E + Err), axis=0)
        win_err = np.take_along_axis(Err, win[None], axis=0)[0]
        lead = M - win_err - others
        # (its two roundings: an ulp of each operand; no other piece: an infinite lead)
        size = np.abs(M) + win_err + np.where(np.isfinite(others), np.abs(others), 0.0)
        clear = is_win & (lead > 4 * _EPS * size)[None]
        moved_b = np.sum(np.where(clear, 0.0, lam * (err_e[None] + Err)), axis=0)
        moved_b *= 1 + 4 * (m + 2) * _EPS
        # (and an absolute floor for what underflows: t^2 / 4 of a tiny t)
        err = moved + moved_b + round_a + round_b + 1e-300
        fy = np.maximum(A, 0.0) + B
    full = [np.broadcast_to(jacs[j], shape + (jacs[j].shape[-1],)) for j in live]
    g = np.asarray(sum(lam[j][..., None] * J for j, J in zip(live, full)), float)
    if len(live) == 1:  # lam >= 0: |lam J| is lam |J| exactly
        return fy, err, g, np.abs(g)
    gabs = sum(lam[j][..., None] * np.abs(J) for j, J in zip(live, full))
    return fy, err, g, np.asarray(gabs, float)


def _zero_jacobian(jac: np.ndarray) -> bool:
    """Whether ``jac`` is one zero Jacobian broadcast to every example (checked on one copy)."""
    return jac.ndim > 0 and jac.strides[0] == 0 and not np.any(jac[:1])


def _rows(arr: np.ndarray, n: int, d: int | None = None) -> np.ndarray:
    """Each example's sum over its elements: ``(n,)``, or ``(n, d)`` with a trailing axis
    (a view, without a copy, when there is one element per example)."""
    shaped = arr.reshape((n, -1) if d is None else (n, -1, d))
    return shaped[:, 0] if shaped.shape[1] == 1 else shaped.sum(axis=1)


def _accumulate(
    total: np.ndarray | None, weight: float, rows: np.ndarray, owned: bool = True
) -> np.ndarray:
    """``total + weight * rows``, in place in ``total`` when there is one; without one,
    ``weight * rows`` (for a unit weight, ``rows`` itself when the caller owns it, else a
    copy: the same floats)."""
    if total is None:
        if weight != 1.0:
            return weight * rows
        return rows if owned else np.array(rows, float, copy=True)
    if weight == 1.0:
        total += rows
    else:
        total += weight * rows
    return total


def _curvature(kind: str, e: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """A bound on ``|g(e + t) - g(e) - g'(e) t|`` for ``|t| <= rho``."""
    if kind in ("affine", "abs"):
        return np.zeros_like(e)
    if kind in ("square", "huber"):
        return rho * rho
    if kind == "logistic":
        return rho * rho / 8.0
    return np.exp(np.minimum(e + rho, 700.0)) * rho * rho  # exp


def _max_terms(
    term: Term,
    vals: list[np.ndarray],
    errs: list[np.ndarray],
    reaches: list[np.ndarray],
    offs: list[np.ndarray],
    jacs: list[np.ndarray],
    raw: list[np.ndarray | None] | None,
    center: np.ndarray,
    dom_radius: float,
    n: int,
    d: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Per example: the Fenchel-Young gap of ``max_j g_j(E_j)`` against
    ``sum_j mu_j (theta_j E_j - g_j*(theta_j))``, its error, the slope and its absolute sum."""
    parts = term.parts
    if any(p.kind == "exp" for p in parts):
        return None  # no stable closed form for exp here: the value-based bound stands
    m = len(parts)
    E = np.stack([np.asarray(v, float).reshape(n) for v in vals], axis=1)
    Err = np.stack([np.asarray(e_, float).reshape(n) for e_ in errs], axis=1)
    Rho = np.stack([np.asarray(r, float).reshape(n) for r in reaches], axis=1)
    J = np.stack([np.asarray(j, float).reshape(n, d) for j in jacs], axis=1)
    Off = np.stack([np.asarray(o, float).reshape(n) for o in offs], axis=1)
    GD = [part_values(part, b, E[:, j]) for j, (part, b) in enumerate(zip(parts, term.offsets))]
    G = np.stack([g for g, _ in GD], axis=1)
    D = np.stack([g_ for _, g_ in GD], axis=1)
    # each g_j moves by at most |g'| rho + curvature over the ball, and by its own error
    move = np.stack(
        [
            np.abs(D[:, j]) * (Rho[:, j] + Err[:, j])
            + abs(p.weight) * _curvature(p.kind, E[:, j], Rho[:, j] + Err[:, j])
            for j, p in enumerate(parts)
        ],
        axis=1,
    )
    gerr = np.stack(
        [
            np.abs(D[:, j]) * Err[:, j]
            + abs(p.weight) * _curvature(p.kind, E[:, j], Err[:, j])
            + 4 * _EPS * (np.abs(G[:, j]) + abs(b))
            for j, (p, b) in enumerate(zip(parts, term.offsets))
        ],
        axis=1,
    )
    margin = 2.0 * np.max(move, axis=1) + 1e-300
    mu = max_terms_weights(
        G,
        D,
        list(raw) if raw is not None else [None] * m,
        margin,
        None if any(p.kind == "abs" for p in parts) else J,
    )
    clear = max_terms_clear(G, margin)
    fy = np.zeros(n)
    err = np.zeros(n)
    slope = np.zeros((n, d))
    slope_abs = np.zeros((n, d))
    best = np.max(G, axis=1)
    onehot = clear  # a certified winner: no other piece can matter
    for j, part in enumerate(parts):
        if part.kind == "affine":
            theta = np.ones(n)
            fy_j = np.zeros(n)
            err_j = np.zeros(n)
        else:  # g_j = w psi(E) + b: its minorant w (theta E - psi*(theta)) + b
            theta0 = D[:, j] / part.weight
            r = None if raw is None else raw[j]
            if part.kind == "abs" and r is not None:
                # abs at its own kink (over the ball): the solver's multiplier mu w theta
                rj = np.nan_to_num(np.asarray(r, float).reshape(n))
                ok = mu[:, j] > 1e-12
                theta0 = np.where(ok, rj / np.where(ok, mu[:, j] * part.weight, 1.0), theta0)
            theta0 = clip(part.kind, theta0, part.param)
            reach_j = Rho[:, j] + Err[:, j]  # abs is polished to sign(E) away from its kink
            theta, fy_j, err_j = _elementwise(
                part.kind, E[:, j], Err[:, j], theta0, reach_j, part.param
            )
            theta, fy_j, err_j = part.weight * theta, part.weight * fy_j, part.weight * err_j
        fy += mu[:, j] * ((best - G[:, j]) + fy_j)
        err += mu[:, j] * (err_j + np.where(onehot, 0.0, gerr[:, j] + np.max(gerr, axis=1)))
        slope += (mu[:, j] * theta)[:, None] * J[:, j]
        slope_abs += (mu[:, j] * np.abs(theta))[:, None] * np.abs(J[:, j])
    # the defect's charge needs max_j |g_j| over the whole domain (the minorant is global)
    span = np.abs(Off + J @ center) + np.linalg.norm(J, axis=2) * dom_radius
    bound = np.max(
        np.stack(
            [
                np.abs(part_values(p, b, span[:, j])[0]) + abs(b)
                for j, (p, b) in enumerate(zip(parts, term.offsets))
            ],
            axis=1,
        ),
        axis=1,
    )
    defect = np.abs(1.0 - mu.sum(axis=1)) + 4 * m * _EPS * (~onehot)
    fy += defect * (np.nan_to_num(bound, posinf=1e300) + np.abs(best))
    if not (np.all(np.isfinite(fy)) and np.all(np.isfinite(err))):
        return None
    return fy, err, slope, slope_abs


@dataclass(frozen=True, slots=True)
class StableSums:
    """The stable gap's sums over a group of examples (a partition of the data): the sum of
    the per-example gaps, the slopes' sum in extended precision and the sum of their absolute
    values. Sums of several groups add (:meth:`plus`); :func:`stable_from_sums` finishes."""

    n: int
    total: float
    slope: np.ndarray  # long double
    slope_abs: np.ndarray

    def plus(self, other: StableSums) -> StableSums:
        return StableSums(
            self.n + other.n,
            self.total + other.total,
            self.slope + other.slope,
            self.slope_abs + other.slope_abs,
        )


def _sum_rows(rows: np.ndarray) -> np.ndarray:
    """The sum of ``rows`` (n, d) over examples, accumulated in extended precision."""
    acc = np.zeros(rows.shape[1], dtype=np.longdouble)
    for start in range(0, rows.shape[0], 4096):  # chunks keep the extended copy small
        acc += rows[start : start + 4096].sum(axis=0, dtype=np.longdouble)
    return acc


def _mean_from_sums(
    acc: np.ndarray, abs_sum: np.ndarray, n: int, total: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The mean of rows from their extended-precision sum, and an elementwise bound on its
    rounding error that holds whatever the summation order (and however the rows were split
    into groups): ``n`` additions in a format with unit roundoff ``u`` err by at most ``n u``
    times the sum of absolute values (``u`` is numpy's long double epsilon: 1e-19 on x86, the
    float64 one where long double is double), each row's own float64 rounding by ``66 eps``
    of it, plus the final rounding to float64. With ``total`` (a float), the rows were
    weighted (one more rounding each, within the same allowance) and their sum is divided by
    ``total`` instead of ``n``."""
    divisor = float(n) if total is None else total
    mean = np.asarray(acc / divisor, dtype=float)
    u = float(np.finfo(np.longdouble).eps)
    # (and each example's slope was itself rounded in float64: by at most 64 eps of its
    # absolute sum, which :func:`_per_example` inflates by its summands / 64)
    err = ((n + 2) * u + 68 * _EPS) * (abs_sum / divisor) * 1.02 + 4 * _EPS * np.abs(mean)
    return mean, err


def stable_from_sums(
    sums: StableSums,
    w_hat: np.ndarray,
    *,
    lam: float,
    w0: np.ndarray,
    domain: Domain | LocalizedDomain,
    w_domain: Domain | LocalizedDomain,
    once: StableSums | None = None,
) -> float | None:
    """The stable gap from the sums of all examples (``domain`` bounds the slopes' reach,
    ``w_domain`` is where ``w`` ranges); ``once``: sums weighted one, not averaged (the
    folded extension's penalty)."""
    d = w_hat.size
    slope_bar, slope_err = _mean_from_sums(sums.slope, sums.slope_abs, sums.n)
    extra, count = 0.0, sums.n
    if once is not None:
        o_bar, o_err = _mean_from_sums(once.slope, once.slope_abs, once.n, float(once.n))
        slope_bar = slope_bar + o_bar * once.n
        # (the sum's rounding, and the one block's mean times its count: exact for one)
        slope_err = slope_err + o_err * once.n + 2 * _EPS * np.abs(slope_bar)
        extra, count = once.total, sums.n + once.n
    gap = (
        sums.total / sums.n
        + extra
        + _q_gap(slope_bar, slope_err, w_hat, lam, np.asarray(w0, float), domain, w_domain)
    )
    # the per-example gaps are nonnegative: their sum errs by at most n eps of itself
    gap *= 1.0 + 8 * (count + d + 8) * _EPS
    return float(gap) if np.isfinite(gap) else None


def _q_gap(
    slope_bar: np.ndarray,
    slope_err: np.ndarray,
    w_hat: np.ndarray,
    lam: float,
    w0: np.ndarray,
    domain: Domain | LocalizedDomain,
    w_domain: Domain | LocalizedDomain,
) -> float:
    """A bound on ``q(w_hat) - min_{W0} q`` for ``q(w) = <s, w> + (lam/2)||w - w0||^2``, where
    the exact slope ``s`` is within ``slope_err`` (elementwise) of the float ``slope_bar``."""
    d = w_hat.size
    reach_w = np.abs(np.asarray(domain.center, float)) + float(domain.radius)
    slope_term = 2.0 * float(slope_err @ reach_w)
    reg = lam / 2.0 * float(np.sum((w_hat - w0) ** 2))
    q_hat = float(slope_bar @ w_hat) + reg
    q_min = w_domain.min_linear_quadratic(slope_bar, lam, w0, hint=w_hat)
    q_err = 4 * (d + 4) * _EPS * (float(np.abs(slope_bar) @ np.abs(w_hat)) + reg)
    return (q_hat - q_min) + q_err + slope_term


def stable_gap(
    decl: Declaration,
    w_hat: np.ndarray,
    thetas: list,
    *,
    lam: float,
    w0: np.ndarray,
    radius: float,
    domain: Domain | LocalizedDomain,
) -> float | None:
    """A certified bound on ``F(w_hat) - F*`` (see the module docstring), or None when the loss
    has a term outside :data:`STABLE_KINDS`.

    ``thetas[t]`` holds the solver's raw multipliers of term ``t`` (one array per argument,
    None where there is none; they are clipped and normalized here, and only guide the
    choice); ``radius`` bounds ``||w_hat - w*||`` (``inf`` when unknown: nothing is
    polished then).
    """
    w_hat = np.asarray(w_hat, float)
    sums = stable_sums(decl, w_hat, thetas, radius=radius, domain=domain)
    if sums is None:
        return None
    return stable_from_sums(sums, w_hat, lam=lam, w0=w0, domain=domain, w_domain=domain)


def stable_sums(
    decl: Declaration,
    w_hat: np.ndarray,
    thetas: list,
    *,
    radius: float,
    domain: Domain | LocalizedDomain,
) -> StableSums | None:
    """:func:`stable_gap`'s sums over the examples of ``decl`` (None as there), over row
    chunks (:func:`~dpcvx.certification._rows.row_groups`): each chunk's arrays stay a few
    megabytes however many examples there are, and the sums add whatever the grouping
    (:func:`_mean_from_sums`)."""
    w_hat = np.asarray(w_hat, float)
    n = decl.n
    total: StableSums | None = None
    for part, rows, context in row_groups(decl):
        with context:
            out = _per_example(part, w_hat, take_rows(thetas, rows, n), radius, domain)
        if out is None:
            return None
        fy, err, slope, slope_abs = out
        chunk = float(np.sum(fy + err))
        if not np.isfinite(chunk):
            return None
        sums = StableSums(part.n, chunk, _sum_rows(slope), slope_abs.sum(axis=0))
        total = sums if total is None else total.plus(sums)
    return total


def stable_extension_gap(
    parts: list[tuple[Declaration, np.ndarray | None, np.ndarray | None, list]],
    w_hat: np.ndarray,
    *,
    C: float,
    lam: float,
    w0: np.ndarray,
    radius: float,
    w_domain: Domain | LocalizedDomain,
    once: StableSums | None = None,
) -> float | None:
    """A certified bound on ``F_C(w_hat) - F_C*`` for the Lipschitz extension's joint program
    (paper 000, Lemma 2.7), computed as a sum of stable duality gaps, or None.

    ``parts`` lists ``(declaration, Y, g, thetas)`` per group of examples: each example's
    point ``y_i`` in W (``Y`` None for plain blocks, where ``y_i = w_hat``), its dual ``g_i``
    of the cone ``||w - y_i|| <= t_i`` (None for plain blocks, where the minorant's slope
    clipped to the C-ball is used) and the solver's multipliers of its terms. Per example,
    ``f_C(w) - [<g_i, w> + phi_i]`` is at most the sum of the Fenchel-Young gaps of its terms
    at ``y_i``, the support gap ``sigma_W(g_i - s_i) - <g_i - s_i, y_i>`` and the cone gap
    ``C ||w - y_i|| - <g_i, w - y_i>``, all nonnegative and free of the losses' values.
    ``once``: the sums of the penalty the folded extension keeps exact, weighted one."""
    w_hat = np.asarray(w_hat, float)
    total: StableSums | None = None
    for decl, Y, g, thetas in parts:
        part = stable_extension_sums(decl, Y, g, thetas, w_hat, C=C, radius=radius)
        if part is None:
            return None
        total = part if total is None else total.plus(part)
    if total is None:
        return None
    return stable_from_sums(
        total, w_hat, lam=lam, w0=w0, domain=w_domain, w_domain=w_domain, once=once
    )


def stable_extension_sums(
    decl: Declaration,
    Y: np.ndarray | None,
    g: np.ndarray | None,
    thetas: list,
    w_hat: np.ndarray,
    *,
    C: float | None,
    radius: float,
) -> StableSums | None:
    """:func:`stable_extension_gap`'s sums over the examples of one group. As for the
    extension's value bounds (:func:`~dpcvx.certification.extension.extension_bounds`), on
    many examples those whose point is ``w_hat`` itself (all of them for ``Y`` None) run at
    that one point and the few that moved at their own rows of ``Y``, both over row chunks;
    the sums add whatever the grouping (:func:`_mean_from_sums`). ``C`` None: the terms'
    own gaps at ``w_hat`` (``Y`` None), their slopes unclipped (the folded extension's
    penalty, :func:`~dpcvx.certification.extension.certify_extension`)."""
    n, d = decl.n, w_hat.size
    gs = None if g is None else np.asarray(g, float)
    rad, moved, at_own = radius, None, False
    if Y is not None:
        Y = np.asarray(Y, float)
        rad = 1e-6 * (1.0 + float(np.max(np.abs([Y.min(), Y.max()]))))  # max |Y|, no copy
        moved = moved_rows(Y, w_hat)
        at_own = moved is None  # every example at its own row of Y
    # the slopes' sums accumulate group by group: no array of the data's size
    totals = np.empty(n)
    G_sum, G_abs = np.zeros(d, dtype=np.longdouble), np.zeros(d)
    skipped = np.zeros(n, bool)
    if moved is not None:
        skipped[moved] = True
    for part, rows, context in row_groups(decl, moved):
        with context:
            out = _stable_rows(
                part,
                Y[rows] if at_own else w_hat,  # type: ignore[index]
                None if gs is None else gs[rows],
                take_rows(thetas, rows, n),
                w_hat,
                C,
                rad,
                skip=skipped[rows],
            )
        if out is None:
            return None
        totals[rows], G_part = out
        if moved is not None:  # the moved examples' slopes count below (G_part may be a
            G_part = np.where(skipped[rows][:, None], 0.0, G_part)  # view of the caller's g)
        G_sum += _sum_rows(G_part)
        G_abs += np.abs(G_part).sum(axis=0)
    if moved is not None and moved.size:
        assert Y is not None
        out = _stable_rows(
            decl.subset(moved),
            Y[moved],
            None if gs is None else gs[moved],
            take_rows(thetas, moved, n),
            w_hat,
            C,
            rad,
        )
        if out is None:
            return None
        totals[moved], G_part = out
        G_sum += _sum_rows(G_part)
        G_abs += np.abs(G_part).sum(axis=0)
    return StableSums(n, float(np.sum(totals)), G_sum, G_abs)


def _stable_rows(
    decl: Declaration,
    pts: np.ndarray,
    g: np.ndarray | None,
    thetas: list,
    w_hat: np.ndarray,
    C: float | None,
    rad: float,
    skip: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """Per example, the stable gap's term and the dual ``g_i``, at the points ``pts``: rows
    ``(n, d)``, or ``w_hat`` itself for every example (``pts`` of shape ``(d,)``: then
    ``w_hat - y_i = 0`` and the cone gap is zero). The examples ``skip`` (a mask), whose
    terms the caller replaces, may come out as anything, non-finite included."""
    n, d = decl.n, w_hat.size
    out = _per_example(decl, pts, thetas, rad, decl.domain)
    if out is None:
        return None
    fy, err, s, s_abs = out
    live: np.ndarray | None
    if g is None and C is None:  # terms the extension does not take: their own slope
        g, live = s, np.zeros(0, int)
    elif g is None:
        nrm = row_norms(s)[:, None]
        factor = np.minimum(1.0, C / np.maximum(nrm * (1 + (d + 8) * _EPS), 1e-300))
        g = s * factor
        live = clipped_rows(factor)
    else:  # given duals: the rows where they differ from the slopes (g - s is zero elsewhere)
        g = np.asarray(g, float)
        live = differing_rows(g, s)
    single = pts.ndim == 1
    P = np.broadcast_to(pts, (n, d))
    support = support_rows(decl.domain, g, s, P, live)
    # <v, y> and <|v|, |y|> for v = g - s: zero on the rows where v is (y is finite)
    inner, abs_inner = np.zeros(n), np.zeros(n)
    v, Pl = (g - s, P) if live is None else (g[live] - s[live], P[live])
    rows = slice(None) if live is None else live
    if v.shape[0]:
        inner[rows] = v @ pts if single else np.einsum("nd,nd->n", v, Pl)
        abs_v = np.abs(v)
        abs_inner[rows] = (
            abs_v @ np.abs(pts) if single else np.einsum("nd,nd->n", abs_v, np.abs(Pl))
        )
    reach_y = np.abs(np.asarray(decl.domain.center, float)) + float(decl.domain.radius)
    # <v, y> in float, and v = g - s rounded: sigma moves by at most |dv| max_W |y|
    sup_gap = support - inner + 4 * (d + 2) * _EPS * (abs_inner + (np.abs(g) + np.abs(s)) @ reach_y)
    if single:
        cone = np.zeros(n)
    else:
        u = w_hat[None, :] - P
        dist = row_norms(u)
        cone = (
            C * dist * (1 + (d + 4) * _EPS)
            - np.einsum("nd,nd->n", g, u)
            + 4 * (d + 2) * _EPS * (C * dist + np.einsum("nd,nd->n", np.abs(g), np.abs(u)))
        )
    # the slope s_i was summed in float: sigma and <., y> move by at most 2 |ds| max|y|
    s_round = 2.0 * (d + 64) * 4 * _EPS * (s_abs @ reach_y)
    total_i = fy + err + np.maximum(sup_gap, 0.0) + np.maximum(cone, 0.0) + s_round
    judged = total_i if skip is None else total_i[~skip]
    if not np.all(np.isfinite(judged)):
        return None
    return total_i, g
