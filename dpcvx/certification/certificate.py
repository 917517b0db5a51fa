"""dpcvx's own certificate of a solve (DESIGN section 5).

For ``F(w) = (1/n) sum_i f_i(w) + (lam/2) ||w - w0||^2`` over the domain ``W``:

- **upper**: the candidate is made exactly feasible (:meth:`Domain.make_feasible`) and ``F`` is
  evaluated there from the user's own expression, in float64, plus a rounding margin;
- **lower**: every ``f_i`` gets a global affine minorant ``f_i(y) >= <s_i, y> + beta_i``, built
  from valid-by-construction objects only: for an atom with a known conjugate, Fenchel-Young with
  the solver's split dual *clipped into the conjugate's domain*; for a max of affine pieces, any
  convex combination of the pieces (weights from the duals, projected onto the simplex); for a
  nondecreasing ``psi`` of a max of affine pieces (``max(v, 0)**p``, one-sided Huber), any
  nonnegative weights ``lam_j`` on the pieces with ``psi*`` at their sum; for an affine term, the
  term itself; for any other convex term, a tangent cut with a true subgradient at the candidate
  (computed for all examples at once by a forward chain rule). Then
  ``OPT >= mean(beta) + min_{w in W} <mean(s), w> + (lam/2)||w - w0||^2``, the last term exact
  for catalogue domains (a lower bound otherwise), minus a rounding margin.

Nothing here reads the solver's status or objective. By ``lam``-strong convexity,
``||w - w*|| <= sqrt(2 gap / lam)`` for the certified point ``w``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from dpcvx.certification._conjugates import clip, conjugate, monotone_multipliers, simplex_defect
from dpcvx.certification._rows import CHUNK_ENTRIES, take_rows
from dpcvx.certification.stable import max_terms_weights, part_values, quadratic_cut, stable_gap
from dpcvx.compilation.stamp import StampedProgram
from dpcvx.errors import CertificationError
from dpcvx.modeling._expressions import VALUE_LOCK, Unsupported, subgradient_jet
from dpcvx.modeling._structure import ELEMENTWISE, MONOTONE, Term
from dpcvx.modeling.declaration import Declaration

if TYPE_CHECKING:
    from dpcvx.modeling.domains import Domain
    from dpcvx.modeling.localized import LocalizedDomain

__all__ = [
    "CertifiedSolution",
    "ReleaseCertificate",
    "ValueSums",
    "certify",
    "finish_certificate",
    "lower_from_gap",
    "matching_mixes",
    "still_certified",
    "value_bounds",
    "value_sums",
]

_EPS = np.finfo(float).eps
#: relative rounding margin applied to both bounds (covers float64 evaluation of sums of
#: products with up to ~1e3 terms each with a wide safety factor)
ROUNDING = 1e-12
#: with Clarabel's convention the split rows ``v - E = 0`` carry ``z = -(weight / n) theta``
_DUAL_SIGN = -1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class CertifiedSolution:
    """A point of the domain with dpcvx's proof of how far from optimal it is.

    Attributes
    ----------
    w : ndarray
        The certified point; it lies in the domain (checked in float64 with a margin).
    upper : float
        ``F(w)`` plus a rounding margin: an upper bound on the optimum.
    lower : float
        A valid lower bound on the optimum ``F*``.
    gap : float
        A certified bound on ``F(w) - F*``, at most ``upper - lower``: dpcvx also certifies it
        directly as a sum of per-term duality gaps computed in a numerically stable form
        (:mod:`dpcvx.certification.stable`), which does not carry the rounding margin of the
        losses' values that ``upper`` and ``lower`` do.
    distance_bound : float
        A bound on ``||w - w*||`` (``sqrt(2 gap / lam)``; ``inf`` when ``lam == 0``).
    regularization : float
        ``lam``.
    center : ndarray
        ``w0``.
    accuracy : float or None
        The target the gap was certified against (None for a plain solve).
    solver_stats : mapping
        What the solver(s) reported (status, iterations, seconds, ...), plus dpcvx's own timing
        (``certify_seconds``) and which refinement step succeeded. Informational only.
    """

    w: np.ndarray
    upper: float
    lower: float
    gap: float
    distance_bound: float
    regularization: float
    center: np.ndarray
    accuracy: float | None = None
    solver_stats: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __str__(self) -> str:
        target = "" if self.accuracy is None else f" (target {self.accuracy:.3g})"
        return (
            f"certified: objective in [{self.lower:.10g}, {self.upper:.10g}], "
            f"gap {self.gap:.3g}{target}, ||w - w*|| <= {self.distance_bound:.3g}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseCertificate:
    """What a private release may say about the solve behind it: public facts only.

    dpcvx certified ``F(w_hat) - F* <= accuracy`` for the point ``w_hat`` it perturbed, with
    ``w_hat`` in the domain, hence ``||w_hat - w*|| <= distance_bound``. The certified point, the
    objective bounds, the gap actually reached and the solver's report all depend on the data
    and are therefore **not** part of a private result (releasing them would void the
    guarantee); :meth:`dpcvx.Problem.solve` gives them for non-private use.
    """

    accuracy: float
    distance_bound: float
    regularization: float
    strong_convexity: float
    center: np.ndarray
    domain: str

    def __str__(self) -> str:
        return (
            f"certified by dpcvx: F(w_hat) - F* <= {self.accuracy:.3g} with w_hat in the "
            f"{self.domain} domain, so ||w_hat - w*|| <= {self.distance_bound:.3g} "
            f"(lam = {self.regularization:g}, mu = {self.strong_convexity:g})"
        )


def _flat_dual(z: np.ndarray, rows: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Duals of a split argument, reshaped from Fortran order to ``(n, *shape)``."""
    vals = z[rows]  # (n, size)
    n = vals.shape[0]
    if len(shape) <= 1:
        return vals.reshape((n,) + shape)
    rev = vals.reshape((n,) + shape[::-1])
    return rev.transpose((0,) + tuple(range(len(shape), 0, -1)))


def _sum_elems(arr: np.ndarray, keep_last: bool) -> np.ndarray:
    """Sum over all non-batch axes (except the last, the variable axis, if ``keep_last``)."""
    shaped = (
        arr.reshape(arr.shape[0], -1, arr.shape[-1]) if keep_last else arr.reshape(arr.shape[0], -1)
    )
    # one element per example: a view (summing a length-one axis would copy the same floats)
    return shaped[:, 0] if shaped.shape[1] == 1 else shaped.sum(axis=1)


def _apply(jac: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """``jac @ w`` per example, for one point ``(d,)`` or one point per example ``(n, d)``."""
    if pts.ndim == 1:
        return jac @ pts
    return np.einsum("n...d,nd->n...", jac, pts)


def _range_bound(off: np.ndarray, jac: np.ndarray, center: np.ndarray, radius: float) -> np.ndarray:
    """``max_{y in B(center, radius)} |off + jac y|`` elementwise, shape of ``off``."""
    return np.abs(off + jac @ center) + np.linalg.norm(jac, axis=-1) * radius


def _minorants(
    decl: Declaration,
    prog: StampedProgram | None,
    z: np.ndarray | None,
    w_hat: np.ndarray,
    n_total: int | None = None,
    thetas: list | None = None,
    mixes: dict[int, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, int]]:
    """Slopes ``s`` (n, d), intercepts ``beta`` (n,) and a per-example scale (for margins).
    ``n_total``: the number of examples the program's objective averages over (default n).
    ``thetas``: per term, multipliers of each argument in the atom's own units (as
    :func:`_term_duals` returns them), used instead of the solver's duals. ``mixes``: per
    generic ``maximum`` term (by index), weights ``(n, m)`` on its pieces' tangent cuts
    (:func:`_mixed_cut`) instead of one cut of the maximum."""
    n, d = decl.n, decl.d
    n_total = n if n_total is None else n_total
    s = np.zeros((n, d))
    beta = np.zeros(n)
    scale = np.zeros(n)
    center, radius = decl.domain.center, decl.domain.radius
    counts: dict[str, int] = {}
    for t, term in enumerate(decl.terms):
        counts[term.kind] = counts.get(term.kind, 0) + 1
        wgt = term.weight
        if term.kind == "generic":
            cut = (
                None if mixes is None or t not in mixes else _mixed_cut(decl, term, w_hat, mixes[t])
            )
            quad = quadratic_cut(decl, term, w_hat) if cut is None else None
            if quad is not None:  # a quadratic form that reads no data: its rounding charged
                gs, gb, value_error = quad
                # the margins are ROUNDING times the scale: its value's error, in full
                scale += value_error / ROUNDING
            else:
                gs, gb = _tangent_cut(decl, term, w_hat) if cut is None else cut
            s += gs
            beta += gb
            scale += np.abs(gb) + _apply(np.abs(gs)[:, None, :], np.abs(w_hat))[:, 0]
            continue
        jets = []
        try:
            for arg in term.args:
                jets.append(decl.jet(arg))
        except Unsupported:
            gs, gb = _tangent_cut(decl, term, w_hat)
            s += gs
            beta += gb
            scale += np.abs(gb) + _apply(np.abs(gs)[:, None, :], np.abs(w_hat))[:, 0]
            continue
        if term.kind == "affine":
            for part in _scales(wgt, jets, w_hat):
                scale += part
            off, jac = jets[0]
            s += wgt * _sum_elems(jac, True)
            beta += wgt * _sum_elems(off, False)
            continue
        rows = prog.split_rows[t] if prog is not None else (None,) * len(term.args)
        duals: list[np.ndarray | None] = []
        for j, ((off, _), r) in enumerate(zip(jets, rows)):
            if thetas is not None:
                duals.append(None if thetas[t] is None else thetas[t][j])
            elif r is None or z is None or prog is None:
                duals.append(None)
            else:
                duals.append(_split_duals(prog, t, z, r, off.shape[1:], n, n_total, wgt))
        if (
            t in decl.shared_terms
            and n > 1
            and np.ndim(w_hat) == 1
            and all(x is None or _same_rows(x) for x in duals)
        ):
            # a term that reads no data, with one multiplier for every example, at one point
            # (not a point per example: tilted ERM's, the extension's copies): every
            # example's minorant is the first's (the same floats), computed once
            jets = [(off[:1], jac[:1]) for off, jac in jets]
            duals = [None if x is None else x[:1] for x in duals]
        ds, db, scales = _term_minorant(term, jets, duals, w_hat, center, radius, d)
        for part in scales:  # one per argument, added in turn
            scale += part
        if ds is not None:
            s += ds
        beta += db
    return s, beta, scale, counts


def _scales(
    wgt: float, jets: list[tuple[np.ndarray, np.ndarray]], w_hat: np.ndarray
) -> list[np.ndarray]:
    """Per argument of a term, ``wgt`` times each row's ``sum |off| + |jac| |w_hat|``: the
    magnitudes the margins of :func:`_minorants` scale with."""
    return [
        wgt * _sum_elems(np.abs(off) + _apply(np.abs(jac), np.abs(w_hat)), False)
        for off, jac in jets
    ]


def _same_rows(x: np.ndarray) -> bool:
    """Whether every row of ``x`` (one per example) is the first."""
    x = np.asarray(x)
    return x.shape[0] > 0 and bool(np.all(x == x[:1]))


def _term_minorant(
    term: Term,
    jets: list[tuple[np.ndarray, np.ndarray]],
    duals: list[np.ndarray | None],
    w_hat: np.ndarray,
    center: np.ndarray,
    radius: float,
    d: int,
) -> tuple[np.ndarray | None, np.ndarray, list[np.ndarray]]:
    """One non-affine, non-generic term's part of :func:`_minorants` on the rows of its
    ``jets``: its slopes (None where it has none), intercepts and scales (one per argument),
    each per row and times the term's weight."""
    wgt = term.weight
    n = jets[0][0].shape[0]
    scale = _scales(wgt, jets, w_hat)
    if term.kind == "max_terms":
        gs, gb = _max_terms_minorant(term, jets, duals, w_hat, center, radius)
    elif term.kind == "pieces":
        gs, gb = _pieces(term, jets, duals, w_hat, center, radius)
    elif term.kind in MONOTONE:
        gs, gb = _monotone(term, jets, duals, w_hat, center, radius)
    elif term.kind in ELEMENTWISE:
        (off, jac), theta = jets[0], duals[0]
        if theta is None:
            theta = np.zeros_like(off)
        theta = clip(term.kind, theta, term.param)
        gb = _sum_elems(theta * off - conjugate(term.kind, theta, term.param), False)
        if not theta.any():  # no multipliers (e.g. the smooth path): a flat minorant
            return None, wgt * gb, scale
        gs = _sum_elems(theta[..., None] * jac, True)
    else:  # vector atoms
        (off, jac), theta = jets[0], duals[0]
        off2 = off.reshape(n, -1)
        jac2 = jac.reshape(n, -1, d)
        if term.kind == "norm2_power":
            # differentiable: its gradient at the point, whatever the duals (any theta
            # gives a valid bound; this one is exact at the point)
            theta = _norm_power_slope(off2 + _apply(jac2, w_hat), term.param_value)
        theta = clip(
            term.kind,
            np.zeros_like(off2) if theta is None else theta.reshape(n, -1),
            term.param,
        )
        gs = np.einsum("nk,nkd->nd", theta, jac2)
        gb = np.einsum("nk,nk->n", theta, off2) - conjugate(term.kind, theta, term.param)
        if term.kind in ("max", "log_sum_exp"):
            bound = np.max(_range_bound(off2, jac2, center, radius), axis=1)
            gb = gb - simplex_defect(theta) * bound
    return (gs if wgt == 1.0 else wgt * gs), wgt * gb, scale


def _norm_power_slope(e: np.ndarray, p: float) -> np.ndarray:
    """The gradient ``p ||e||**(p - 2) e`` of ``||e||_2**p`` per row of ``e`` (zero at 0)."""
    nrm = np.linalg.norm(e, axis=1, keepdims=True)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        g = p * nrm ** (p - 1.0) * (e / np.where(nrm > 0, nrm, 1.0))
    return np.nan_to_num(g, nan=0.0, posinf=0.0, neginf=0.0)


def _max_terms_minorant(
    term: Term,
    jets: list[tuple[np.ndarray, np.ndarray]],
    duals: list[np.ndarray | None],
    w_hat: np.ndarray,
    center: np.ndarray,
    radius: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Minorant of ``max_j g_j(E_j)``: ``sum_j mu_j (theta_j E_j - g_j*(theta_j))`` with
    ``mu`` in the simplex (:func:`~dpcvx.certification.stable.max_terms_weights`), ``theta_j``
    the derivative of ``g_j`` at the point clipped into the conjugate's domain, and the
    defect ``|1 - sum mu|`` charged with a bound of ``max_j |g_j|`` over the bounding ball."""
    n = jets[0][0].shape[0]
    d = w_hat.shape[-1]
    offs, jacs, E = [], [], []
    for off, jac in jets:
        off = np.broadcast_to(np.asarray(off, float).reshape(n, -1), (n, 1)).reshape(n)
        jac = np.broadcast_to(np.asarray(jac, float).reshape(n, -1, d), (n, 1, d)).reshape(n, d)
        offs.append(off)
        jacs.append(jac)
        E.append(off + _apply(jac[:, None, :], w_hat)[:, 0])
    GD = [part_values(p, b, e) for p, b, e in zip(term.parts, term.offsets, E)]
    G = np.stack([g for g, _ in GD], axis=1)
    D = np.stack([g_ for _, g_ in GD], axis=1)
    margin = 1e-7 * (1.0 + np.max(np.abs(G), axis=1))
    mu = max_terms_weights(
        G,
        D,
        [None if x is None else x for x in duals],
        margin,
        None if any(p.kind == "abs" for p in term.parts) else np.stack(jacs, axis=1),
    )
    gs = np.zeros((n, d))
    gb = np.zeros(n)
    bound = np.zeros(n)
    for j, part in enumerate(term.parts):
        reach = np.abs(offs[j] + jacs[j] @ center) + np.linalg.norm(jacs[j], axis=1) * radius
        b = term.offsets[j]
        if part.kind == "affine":
            theta, conj, wj = np.ones(n), np.zeros(n), 1.0
            bound = np.maximum(bound, reach)
        else:  # g_j = w psi(E) + b >= w (theta E - psi*(theta)) + b
            wj = float(part.weight)
            theta = D[:, j] / wj
            if part.kind == "abs" and duals[j] is not None:
                # at abs's own kink the multiplier is the solver's: split dual = mu w theta
                scale = np.abs(offs[j]) + _apply(np.abs(jacs[j])[:, None, :], np.abs(w_hat))[:, 0]
                near = np.abs(E[j]) <= 1e-9 * (1.0 + scale)
                rawj = np.nan_to_num(np.asarray(duals[j], float).reshape(n))
                ok = near & (mu[:, j] > 1e-12)
                theta = np.where(ok, rawj / np.where(ok, mu[:, j] * wj, 1.0), theta)
            theta = clip(part.kind, theta, part.param)
            conj = conjugate(part.kind, theta, part.param)
            bound = np.maximum(bound, np.abs(part_values(part, b, reach)[0]) + abs(b))
        gs += (mu[:, j] * wj * theta)[:, None] * jacs[j]
        gb += mu[:, j] * (wj * (theta * offs[j] - conj) + (0.0 if part.kind == "affine" else b))
    defect = np.abs(1.0 - mu.sum(axis=1)) + 4 * len(term.parts) * _EPS
    gb -= defect * np.nan_to_num(bound, posinf=1e300)
    return gs, gb


def _term_duals(
    decl: Declaration, prog: StampedProgram | None, z: np.ndarray | None, n_total: int | None = None
) -> list:
    """Per term, the solver's raw multipliers of each argument's split row (scaled as in
    :func:`_minorants`), or None."""
    out: list = []
    n = decl.n
    n_total = n if n_total is None else n_total
    for t, term in enumerate(decl.terms):
        if prog is None or z is None or term.kind in ("affine", "generic"):
            out.append(None)
            continue
        duals: list[np.ndarray | None] = []
        for arg, r in zip(term.args, prog.split_rows[t]):
            if r is None:
                duals.append(None)
                continue
            # the argument's own shape: that of its affine jet's per-example offset (no jet
            # is formed, so an affine atom without a jet rule cannot fail here)
            shape = tuple(arg.shape)
            duals.append(_split_duals(prog, t, z, r, shape, n, n_total, term.weight))
        out.append(duals)
    return out


def _split_duals(
    prog: StampedProgram,
    t: int,
    z: np.ndarray,
    rows: np.ndarray,
    shape: tuple[int, ...],
    n: int,
    n_total: int,
    weight: float,
) -> np.ndarray:
    """The multipliers of one split argument of term ``t`` from the solver's duals ``z``, per
    example ``(n, *shape)``: ``n_total`` times the duals over the term's weight (the
    objective averages the examples' blocks), or, for a term the program holds once
    (:attr:`~dpcvx.compilation.stamp.StampedProgram.held`: its objective weighs
    ``held_weight``, the part's share of the examples), its one block's duals over that
    weight and the term's, every example's (a read-only view)."""
    if t in prog.held:
        one = _DUAL_SIGN * _flat_dual(z, rows, shape) / (prog.held_weight * weight)
        return np.broadcast_to(one, (n,) + one.shape[1:])
    return _DUAL_SIGN * n_total * _flat_dual(z, rows, shape) / weight


def _pieces(
    term: Term,
    jets: list[tuple[np.ndarray, np.ndarray]],
    duals: list[np.ndarray | None],
    w_hat: np.ndarray,
    center: np.ndarray,
    radius: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Minorant of ``max_j P_j`` by a convex combination of the pieces (per element)."""
    n = jets[0][0].shape[0]
    if not term.atom_shape and all(off.shape == (n,) for off, _ in jets):
        return _scalar_pieces(term, jets, duals, w_hat, center, radius)
    return _shaped_pieces(term, jets, duals, w_hat, center, radius)


def _piece_weights(
    mu: np.ndarray, duals: list[np.ndarray | None], vals: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The pieces' weights per element, from their multipliers ``mu`` (last axis: the pieces;
    clipped to ``[0, 1]``, NaN as 0) where given: a piece without one (``duals`` None) takes
    what the others leave, and where all are zero the piece largest in ``vals`` (the pieces'
    values at the point) takes it all; then normalized. Returns the weights and their defect
    ``|sum - 1|`` plus its rounding."""
    mu = np.clip(np.nan_to_num(mu), 0.0, 1.0)
    const = np.array([dl is None for dl in duals])
    if const.any():
        j0 = int(np.flatnonzero(const)[0])
        mu[..., j0] = np.maximum(0.0, 1.0 - mu[..., ~const].sum(axis=-1))
    total = mu.sum(axis=-1, keepdims=True)
    active = np.eye(len(duals))[np.argmax(vals, axis=-1)]
    mu = np.where(total > 0, mu / np.where(total > 0, total, 1.0), active)
    return mu, np.abs(mu.sum(axis=-1) - 1.0) + 4 * len(duals) * _EPS


def _shaped_pieces(
    term: Term,
    jets: list[tuple[np.ndarray, np.ndarray]],
    duals: list[np.ndarray | None],
    w_hat: np.ndarray,
    center: np.ndarray,
    radius: float,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_pieces` for pieces of any shape (CVXPY broadcasting)."""
    n = jets[0][0].shape[0]
    d = w_hat.shape[-1]
    shape = (n,) + term.atom_shape
    nd = len(term.atom_shape)

    def pad(arr: np.ndarray, arg_nd: int, _tail: int) -> np.ndarray:
        # CVXPY broadcasting aligns trailing axes: insert axes after the batch axis
        return arr.reshape(arr.shape[:1] + (1,) * (nd - arg_nd) + arr.shape[1:])

    offs = [
        np.broadcast_to(pad(off, len(a.shape), 0), shape) for (off, _), a in zip(jets, term.args)
    ]
    jacs = [
        np.broadcast_to(pad(jac, len(a.shape), 1), shape + (d,))
        for (_, jac), a in zip(jets, term.args)
    ]
    mu = np.stack(
        [
            np.zeros(shape) if dl is None else np.broadcast_to(pad(dl, len(a.shape), 0), shape)
            for dl, a in zip(duals, term.args)
        ],
        axis=-1,
    )  # (n, ..., m)
    vals = np.stack([off + _apply(jac, w_hat) for off, jac in zip(offs, jacs)], axis=-1)
    mu, defect = _piece_weights(mu, duals, vals)
    bound = np.max(
        np.stack([_range_bound(off, jac, center, radius) for off, jac in zip(offs, jacs)], axis=-1),
        axis=-1,
    )
    slope = sum(mu[..., j, None] * jacs[j] for j in range(len(jets)))
    inter = sum(mu[..., j] * offs[j] for j in range(len(jets))) - defect * bound
    return (slope.reshape(n, -1, d).sum(axis=1), inter.reshape(n, -1).sum(axis=1))


def _scalar_pieces(
    term: Term,
    jets: list[tuple[np.ndarray, np.ndarray]],
    duals: list[np.ndarray | None],
    w_hat: np.ndarray,
    center: np.ndarray,
    radius: float,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_pieces` for a scalar maximum (one element per example: a hinge, a pinball
    loss), the same operations in the same order, but a piece constant in ``w`` has no
    Jacobian to multiply (its products are zeros, which add nothing)."""
    m = len(jets)
    moving = [bool(a.variables()) for a in term.args]
    offs = [off for off, _ in jets]
    shape = offs[0].shape
    mu = np.stack(
        [np.zeros(shape) if dl is None else np.broadcast_to(dl, shape) for dl in duals], axis=-1
    )
    vals = np.stack(
        [off + _apply(jac, w_hat) if mov else off for (off, jac), mov in zip(jets, moving)],
        axis=-1,
    )
    mu, defect = _piece_weights(mu, duals, vals)
    bound = np.max(
        np.stack(
            [
                _range_bound(off, jac, center, radius) if mov else np.abs(off)
                for (off, jac), mov in zip(jets, moving)
            ],
            axis=-1,
        ),
        axis=-1,
    )
    slope = sum(mu[:, j, None] * jets[j][1] for j in range(m) if moving[j])
    if not isinstance(slope, np.ndarray):  # every piece constant
        slope = np.zeros((shape[0], w_hat.shape[-1]))
    inter = sum(mu[:, j] * offs[j] for j in range(m)) - defect * bound
    return slope, inter


def _broadcast_pieces(
    term: Term, jets: list[tuple[np.ndarray, np.ndarray]], duals: list[np.ndarray | None]
) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray | None]]:
    """Offsets ``(n, *shape)``, Jacobians ``(n, *shape, d)`` and duals (or None) of the pieces,
    broadcast to the shape of the term's atom (CVXPY aligns trailing axes)."""
    n = jets[0][0].shape[0]
    d = jets[0][1].shape[-1]
    shape = (n,) + term.atom_shape
    nd = len(term.atom_shape)

    def pad(arr: np.ndarray, arg_nd: int) -> np.ndarray:
        return arr.reshape(arr.shape[:1] + (1,) * (nd - arg_nd) + arr.shape[1:])

    offs = [np.broadcast_to(pad(off, len(a.shape)), shape) for (off, _), a in zip(jets, term.args)]
    jacs = [
        np.broadcast_to(pad(jac, len(a.shape)), shape + (d,))
        for (_, jac), a in zip(jets, term.args)
    ]
    dls = [
        None if dl is None else np.broadcast_to(pad(dl, len(a.shape)), shape)
        for dl, a in zip(duals, term.args)
    ]
    return offs, jacs, dls


def _monotone(
    term: Term,
    jets: list[tuple[np.ndarray, np.ndarray]],
    duals: list[np.ndarray | None],
    w_hat: np.ndarray,
    center: np.ndarray,
    radius: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Minorant of ``psi(max_j E_j)`` (``psi`` nondecreasing, see :data:`MONOTONE`), per
    element: for any ``lam_j >= 0`` with ``t = sum_j lam_j`` in ``dom psi*``,
    ``psi(max_j E_j) >= t max_j E_j - psi*(t) >= sum_j lam_j E_j - psi*(t)``; ``psi*`` is
    nondecreasing on its domain, so it is evaluated at an upper bound of the float sum."""
    n = jets[0][0].shape[0]
    d = w_hat.shape[-1]
    offs, jacs, dls = _broadcast_pieces(term, jets, duals)
    m = len(offs)
    vals = np.stack([off + _apply(jac, w_hat) for off, jac in zip(offs, jacs)])  # (m, n, ...)
    # each piece's range on the bounding ball; the largest max_j E_j there (psi' is largest
    # there)
    mid = np.stack([off + jac @ center for off, jac in zip(offs, jacs)])
    spread = np.stack([np.linalg.norm(jac, axis=-1) * radius for jac in jacs])
    mid, spread = np.broadcast_arrays(mid, spread)
    pad = 8 * np.finfo(float).eps * (np.abs(mid) + spread)  # their rounding, outward
    reach = np.max(mid + spread, axis=0)
    ranges = (mid - spread - pad, mid + spread + pad)
    lam, _, conj = monotone_multipliers(term.kind, term.param_value, vals, dls, reach, ranges)
    slope = sum(lam[j][..., None] * jacs[j] for j in range(m))
    inter = sum(lam[j] * offs[j] for j in range(m)) - conj
    return slope.reshape(n, -1, d).sum(axis=1), inter.reshape(n, -1).sum(axis=1)


def _generic_max_cuts(
    decl: Declaration, term: Term, w_hat: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """Values ``(n, m)`` and true subgradients ``(n, m, d)`` at ``w_hat`` of each piece of a
    generic term whose expression is a ``maximum`` of scalar pieces, or a nonnegative
    per-example multiple ``c * maximum(g_1, ..., g_m)`` of one (``c`` free of the variable,
    e.g. a ``nonneg`` data parameter: the pieces are then ``c g_j``, since ``c max_j g_j =
    max_j c g_j`` and ``c`` times a cut of ``g_j`` is a cut of ``c g_j`` for ``c >= 0``,
    checked on the values), or None."""
    from cvxpy.atoms.elementwise.maximum import maximum as cp_maximum

    n, d = decl.n, decl.d
    if w_hat.shape[-1] != d or w_hat.ndim not in (1, 2):
        return None
    leaves = decl.derived_values()
    expr, factors = _scaled_maximum(term.expr)
    if not isinstance(expr, cp_maximum) or len(expr.args) < 2 or expr.size != 1:
        return None
    scale = np.ones(n)
    try:
        for c in factors:
            cv, _ = subgradient_jet(c, decl.variable, leaves, n, w_hat)
            scale = scale * np.broadcast_to(np.asarray(cv, float).reshape(-1), (n,))
    except (Unsupported, ValueError):
        return None
    if not (np.all(np.isfinite(scale)) and np.all(scale >= 0)):
        return None
    vals, jacs = [], []
    try:
        for a in expr.args:
            if a.size != 1:
                return None
            v, j = subgradient_jet(a, decl.variable, leaves, n, w_hat)
            vals.append(np.broadcast_to(np.asarray(v, float).reshape(-1), (n,)))
            jacs.append(np.broadcast_to(np.asarray(j, float).reshape(-1, d), (n, d)))
    except (Unsupported, ValueError):
        return None
    V, J = np.stack(vals, axis=1), np.stack(jacs, axis=1)
    if not (np.all(np.isfinite(V)) and np.all(np.isfinite(J))):
        return None
    if factors:
        V, J = scale[:, None] * V, scale[:, None, None] * J
    return V, J


def _scaled_maximum(expr: Any) -> tuple[Any, list]:
    """``(g, [c_1, ...])`` with ``expr == c_1 * ... * g``, each ``c_k`` a scalar free of the
    variable (a constant or a data parameter), peeled off the outside of ``expr``."""
    from cvxpy.atoms.affine.binary_operators import MulExpression, multiply

    factors: list = []
    while isinstance(expr, (multiply, MulExpression)) and len(expr.args) == 2:
        for c, e in ((expr.args[0], expr.args[1]), (expr.args[1], expr.args[0])):
            if not c.variables() and c.size == 1 and e.variables():
                factors.append(c)
                expr = e
                break
        else:
            break
    return expr, factors


def _mixed_cut(
    decl: Declaration, term: Term, w_hat: np.ndarray, theta: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """``max_j g_j(y) >= sum_j theta_j (g_j(w) + <a_j, y - w>)`` with ``a_j`` a true
    subgradient of the piece ``g_j`` at ``w`` and ``theta`` summing to one exactly (each cut
    minorizes its piece, hence the maximum; a piece below the top only loosens the bound).
    None when the weights are not such a point or the pieces have no cuts."""
    cuts = _generic_max_cuts(decl, term, w_hat)
    if cuts is None:
        return None
    V, J = cuts
    theta = np.asarray(theta, float)
    if (
        theta.shape != V.shape
        or not np.all(np.isfinite(theta))
        or np.any(theta < 0)
        or np.any(theta.sum(axis=1) != 1.0)  # exact: the weights are dyadic (_stationary_mixes)
    ):
        return None
    wgt = float(term.weight)
    gs = np.einsum("nm,nmd->nd", theta, J)
    at = J @ w_hat if w_hat.ndim == 1 else np.einsum("nmd,nd->nm", J, w_hat)
    gb = np.einsum("nm,nm->n", theta, V - at)
    return wgt * gs, wgt * gb


def matching_mixes(
    decl: Declaration, points: np.ndarray, target: np.ndarray
) -> dict[int, np.ndarray] | None:
    """Per generic ``maximum`` term, weights on its pieces' cuts at per-example points
    ``points`` (n, d) for the examples where two pieces tie there: the move ``t_i`` in
    ``[0, 1]`` from the top piece toward the second that brings the example's slope closest
    to ``target[i]`` (the extension's ``g_i``: at a kink of ``f`` the minorant's slope can
    match it, and the support gap ``sigma_W(g - s) - <g - s, y>`` vanishes). ``t`` is rounded
    to a multiple of ``2**-40``, so the weights sum to one exactly. None without such a term.
    Only a choice among valid minorants: the bound is valid for any weights."""
    n, d = decl.n, decl.d
    points = np.asarray(points, float)
    target = np.asarray(target, float)
    if points.shape != (n, d) or target.shape != (n, d) or not np.all(np.isfinite(target)):
        return None
    found: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for t, term in enumerate(decl.terms):
        if term.kind == "generic":
            cuts = _generic_max_cuts(decl, term, points)
            if cuts is not None:
                found[t] = cuts
    if not found:
        return None
    base = {t: np.eye(V.shape[1])[np.argmax(V, axis=1)] for t, (V, _) in found.items()}
    s0, _, _, _ = _minorants(decl, None, None, points, mixes=base)
    resid = target - s0  # what the mixed terms should add to their base slopes
    out: dict[int, np.ndarray] = {}
    rows = np.arange(n)
    for t, (V, J) in found.items():
        order = np.argsort(-V, axis=1, kind="stable")
        k1, k2 = order[:, 0], order[:, 1]
        top = V[rows, k1]
        tied = top - V[rows, k2] <= 1e-7 * (1.0 + np.abs(top))
        b = float(decl.terms[t].weight) * (J[rows, k2] - J[rows, k1])  # (n, d)
        bb = np.einsum("nd,nd->n", b, b)
        with np.errstate(invalid="ignore", divide="ignore"):
            step = np.einsum("nd,nd->n", resid, b) / np.where(bb > 0, bb, 1.0)
        step = np.where(tied & (bb > 0) & np.isfinite(step), np.clip(step, 0.0, 1.0), 0.0)
        step = np.round(step * 2.0**40) / 2.0**40
        theta = base[t].copy()
        theta[rows, k1] = 1.0 - step
        theta[rows, k2] += step
        resid = resid - step[:, None] * b
        out[t] = theta
    return out


def _stationary_mixes(
    decl: Declaration, w_hat: np.ndarray, lam: float, w0: np.ndarray
) -> dict[int, np.ndarray] | None:
    """Per generic ``maximum`` term, weights on its pieces' cuts for the examples where two
    pieces tie at ``w_hat``: the minimum-norm move ``t_i`` in ``[0, 1]`` from the top piece
    toward the second that makes the minorants' mean slope cancel ``lam (w_hat - w0)`` (the
    stationarity of the Lagrangian at an interior minimizer; at a kink any convex
    combination of the pieces' subgradients is one of the maximum's). ``t`` is rounded to a
    multiple of ``2**-40`` so that the weights sum to one exactly. None without such a term.
    Only a choice among valid minorants: the bound is valid for any weights."""
    if lam <= 0 or w_hat.ndim != 1:
        return None
    n, d = decl.n, decl.d
    if d > 2000:
        return None
    base: dict[int, np.ndarray] = {}
    moves = []
    for t, term in enumerate(decl.terms):
        if term.kind != "generic":
            continue
        cuts = _generic_max_cuts(decl, term, w_hat)
        if cuts is None:
            continue
        V, J = cuts
        m = V.shape[1]
        order = np.argsort(-V, axis=1, kind="stable")
        k1, k2 = order[:, 0], order[:, 1]
        rows = np.arange(n)
        top = V[rows, k1]
        tied = top - V[rows, k2] <= 1e-7 * (1.0 + np.abs(top))
        base[t] = np.eye(m)[k1]
        if tied.any():
            b = float(term.weight) * (J[rows, k2] - J[rows, k1])[tied] / n
            moves.append((t, np.flatnonzero(tied), k1[tied], k2[tied], b))
    if not moves:
        return None
    s0, _, _, _ = _minorants(decl, None, None, w_hat, mixes=base)
    r0 = s0.sum(axis=0) / n + lam * (w_hat - w0)
    B = np.concatenate([mv[4] for mv in moves], axis=0)  # (k, d)
    if not np.all(np.isfinite(B)) or not np.all(np.isfinite(r0)):
        return None

    def h(lmb: np.ndarray) -> np.ndarray:
        return B.T @ np.clip(B @ lmb, 0.0, 1.0) + r0

    lmb = np.zeros(d)
    res = h(lmb)
    ridge = 1e-12 * (1.0 + float(np.sum(B * B)))
    for _ in range(50):
        u = B @ lmb
        free = (u >= 0.0) & (u <= 1.0)
        H = B[free].T @ B[free] + ridge * np.eye(d)
        try:
            step = np.linalg.solve(H, res)
        except np.linalg.LinAlgError:
            break
        a = 1.0
        while a > 1e-6:
            trial = lmb - a * step
            r_trial = h(trial)
            if np.linalg.norm(r_trial) < np.linalg.norm(res):
                break
            a /= 2
        else:
            break
        lmb, res = trial, r_trial
    tt = np.round(np.clip(B @ lmb, 0.0, 1.0) * 2.0**40) / 2.0**40
    out = {k: v.copy() for k, v in base.items()}
    start = 0
    for t, idx, k1, k2, _b in moves:
        part = tt[start : start + idx.size]
        start += idx.size
        out[t][idx, k1] = 1.0 - part
        out[t][idx, k2] = part
    return out


def _tangent_cut(decl: Declaration, term: Term, w_hat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``f(y) >= f(w) + <g, y - w>`` with a true subgradient ``g`` of the term at ``w``, for all
    examples at once (:func:`subgradient_jet`); atoms without a rule there fall back to CVXPY's
    own gradient rules, example by example (the slow path)."""
    n, d = decl.n, decl.d
    if n > 1 and np.ndim(w_hat) == 1 and not term.reads_data:
        # a term that reads no data, at one point: every example's cut is the first's (the
        # same floats), taken once (``cp.quad_form(w, P)`` beside the logistic loss: CVXPY's
        # gradient rule n times was 1.5 s of a 1.6 s solve at n = 1e4)
        gs, gb = _tangent_cut(decl.subset(np.arange(1)), term, w_hat)
        return np.broadcast_to(gs, (n, d)), np.broadcast_to(gb, (n,))
    try:
        val, jac = subgradient_jet(term.expr, decl.variable, decl.derived_values(), n, w_hat)
    except Unsupported:
        return _tangent_cut_loop(decl, term, w_hat)
    val = np.asarray(val, float).reshape(n)
    jac = np.asarray(jac, float).reshape(n, d)
    if not (np.all(np.isfinite(val)) and np.all(np.isfinite(jac))):
        return _tangent_cut_loop(decl, term, w_hat)
    wgt = float(term.weight)
    at = w_hat if w_hat.ndim == 2 else w_hat[None, :]
    return wgt * jac, wgt * (val - np.sum(jac * at, axis=1))


def _tangent_cut_loop(
    decl: Declaration, term: Term, w_hat: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_tangent_cut` through CVXPY's ``grad``, one example at a time."""
    n, d = decl.n, decl.d
    leaves = decl.derived_values()
    w = decl.variable
    expr = term.weight * term.expr
    params = [dp.parameter for dp in decl.derived]
    VALUE_LOCK.acquire()
    saved = [p.value for p in params] + [w.value]
    gs = np.zeros((n, d))
    gb = np.zeros(n)
    per_example = w_hat.ndim == 2
    try:
        w.value = w_hat[0] if per_example else w_hat
        for i in range(n):
            if per_example:
                w.value = w_hat[i]
            for p in params:
                p.value = leaves[p.id][i]
            val = expr.value
            try:
                grad = expr.grad.get(w) if expr.grad else None
            except (NotImplementedError, ValueError, TypeError):
                grad = None
            if val is None or grad is None:
                raise CertificationError(
                    f"dpcvx cannot certify the loss term `{term.expr}`: CVXPY gives no "
                    "subgradient for it at the candidate point. Rewrite it with catalogue atoms "
                    "(see dpcvx.losses)."
                )
            g = np.asarray(grad.toarray() if hasattr(grad, "toarray") else grad, float).reshape(-1)
            gs[i] = g
            gb[i] = float(val) - g @ (w_hat[i] if per_example else w_hat)
    finally:
        for p, v in zip(params + [w], saved):
            p.value = v
        VALUE_LOCK.release()
    return gs, gb


@dataclass(frozen=True, slots=True)
class ValueSums:
    """The value-based certificate's sums over a group of examples (a partition of the data):
    the losses at the point, their absolute values, the minorants' slopes, offsets and scales.
    Sums of several groups add (:meth:`plus`); :func:`value_bounds` finishes."""

    n: int
    value: float
    abs_value: float
    slope: np.ndarray
    beta: float
    abs_beta: float
    scale: float

    def plus(self, other: ValueSums) -> ValueSums:
        return ValueSums(
            self.n + other.n,
            self.value + other.value,
            self.abs_value + other.abs_value,
            self.slope + other.slope,
            self.beta + other.beta,
            self.abs_beta + other.abs_beta,
            self.scale + other.scale,
        )


def value_sums(
    decl: Declaration,
    w_hat: np.ndarray,
    *,
    prog: StampedProgram | None = None,
    z: np.ndarray | None = None,
    thetas: list | None = None,
    mixes: dict[int, np.ndarray] | None = None,
) -> tuple[ValueSums, dict]:
    """:func:`certify`'s sums over the examples of ``decl`` at the feasible point ``w_hat``,
    and the count of each kind of minorant.

    On many examples the sums are taken over contiguous row chunks of about
    :data:`_CHUNK_ENTRIES` data entries (the sums add, :meth:`ValueSums.plus`), so the
    minorants' per-example slopes and the arguments' Jacobians never exist for all examples
    at once: the peak memory of a certificate is then a few chunks, not several copies of the
    data. The solver's duals, when given, are read once for all examples and sliced."""
    rows = max(1, _CHUNK_ENTRIES // max(decl.d, 1))
    if decl.n > 2 * rows:
        if thetas is None and prog is not None and z is not None:
            thetas = _term_duals(decl, prog, z)
        total: ValueSums | None = None
        counts: dict = {}
        for start in range(0, decl.n, rows):
            stop = min(decl.n, start + rows)
            part, counts = value_sums(
                decl.rows(start, stop),
                w_hat,
                thetas=take_rows(thetas, slice(start, stop), decl.n),
                mixes=None if mixes is None else {t: m[start:stop] for t, m in mixes.items()},
            )
            total = part if total is None else total.plus(part)
        assert total is not None
        return total, counts
    vals = decl.loss_values(w_hat)
    s, beta, scale, counts = _minorants(decl, prog, z, w_hat, thetas=thetas, mixes=mixes)
    sums = ValueSums(
        decl.n,
        float(np.sum(vals)),
        float(np.sum(np.abs(vals))),
        s.sum(axis=0),
        float(np.sum(beta)),
        float(np.sum(np.abs(beta))),
        float(np.sum(scale)),
    )
    return sums, counts


#: data entries (rows times the dimension) of one chunk of :func:`value_sums`
_CHUNK_ENTRIES = CHUNK_ENTRIES


def value_bounds(
    sums: ValueSums,
    domain: Domain | LocalizedDomain,
    *,
    lam: float,
    w0: np.ndarray,
    w_hat: np.ndarray,
) -> tuple[float, float, float, float, float]:
    """``(upper, lower, gap, f_hat, magnitude)`` from the sums of every example (see the module
    docstring); the gap is ``inf`` where garbage multipliers overflowed a bound."""
    n = sums.n
    reg = lam / 2 * float(np.sum((w_hat - w0) ** 2))
    f_hat = sums.value / n + reg
    q_min = domain.min_linear_quadratic(sums.slope / n, lam, w0, hint=w_hat)
    lower_raw = sums.beta / n + q_min
    magnitude = 1.0 + sums.abs_value / n + sums.scale / n + reg + abs(q_min) + sums.abs_beta / n
    upper = f_hat + ROUNDING * magnitude
    lower = lower_raw - ROUNDING * magnitude
    gap = upper - lower
    if not np.isfinite(gap):  # e.g. garbage duals overflowing a conjugate: the stable path
        gap = np.inf  # below recomputes its multipliers and may still certify the point
        # the upper bound's margin needs only what evaluating F(w_hat) involves
        upper = f_hat + ROUNDING * (1.0 + sums.abs_value / n + sums.scale / n + reg)
    if gap < 0:
        # impossible for valid bounds: refuse rather than certify anything
        raise CertificationError(
            f"Internal: dpcvx's lower bound {lower!r} exceeds its upper bound {upper!r}; the "
            "certificate is inconsistent and nothing is certified. Please report this problem."
        )
    return upper, lower, gap, f_hat, magnitude


def lower_from_gap(value: float, margin: float, gap: float) -> float:
    """``value - margin - gap`` rounded down, the lower bound a certificate's stable gap gives
    from a value bound (``margin``, ``gap >= 0``): less the subtractions' own rounding, as
    ``value`` and ``margin`` can be ten thousand times their difference (a label of 1e17:
    1150 against 0.044, whose rounding, 1.1e-13, exceeded a gap of 1.5e-13)."""
    floor = value - margin - gap
    return floor - 4 * _EPS * (abs(value) + margin + gap)


def finish_certificate(
    w_hat: np.ndarray,
    bounds: tuple[float, float, float, float, float],
    direct: float | None,
    *,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    stats: dict,
) -> CertifiedSolution:
    """The certificate from :func:`value_bounds` and the stable gap ``direct`` (None when it
    was not computed): the smaller gap counts."""
    upper, lower, gap, f_hat, magnitude = bounds
    if direct is not None and 0.0 <= direct < gap:
        gap = direct
        floor = lower_from_gap(f_hat, ROUNDING * magnitude, direct)
        lower = floor if not np.isfinite(lower) else max(lower, floor)
    if not (np.isfinite(gap) and np.isfinite(upper)):
        raise CertificationError("The certificate is not finite (overflow in the bounds).")
    dist = float(np.sqrt(2 * max(gap, 0.0) / lam)) if lam > 0 else float("inf")
    return CertifiedSolution(
        w=w_hat,
        upper=upper,
        lower=lower,
        gap=gap,
        distance_bound=dist,
        regularization=lam,
        center=np.asarray(w0, float).copy(),
        accuracy=accuracy,
        solver_stats=MappingProxyType(stats),
    )


def certify(
    decl: Declaration,
    w_candidate: np.ndarray,
    *,
    lam: float,
    w0: np.ndarray,
    prog: StampedProgram | None = None,
    z: np.ndarray | None = None,
    accuracy: float | None = None,
    solver_stats: Mapping[str, Any] | None = None,
    thetas: list | None = None,
    domain: Domain | LocalizedDomain | None = None,
) -> CertifiedSolution:
    """Certify ``w_candidate`` for ``F`` (see the module docstring) over ``domain`` (default
    the declaration's W; a localized ``W intersect B(c, r)`` for paper 000's localized solves,
    whose minimum the certificate then bounds).

    ``prog`` and ``z`` (the stamped program and the solver's duals), or ``thetas`` (per term,
    multipliers of each argument in the atom's own units, e.g. the loss's derivatives at the
    point: :meth:`~dpcvx.modeling.smooth.SmoothModel.multipliers`), only guide the choice of
    multipliers; any values, even wrong ones, give a valid (if loose) lower bound.
    """
    import time

    start = time.perf_counter()
    domain = decl.domain if domain is None else domain
    w_hat = domain.make_feasible(np.asarray(w_candidate, float))
    w0 = np.asarray(w0, float)
    # the multipliers that guide every bound below: the caller's, or the solver's duals read
    # once (the same values :func:`_minorants` would read from ``prog`` and ``z`` itself)
    guide = thetas if thetas is not None else _term_duals(decl, prog, z)
    sums, counts = value_sums(decl, w_hat, thetas=guide)
    bounds = value_bounds(sums, domain, lam=lam, w0=w0, w_hat=w_hat)
    if not (accuracy is not None and bounds[2] <= accuracy):
        # a generic maximum's single tangent cut takes one piece's slope at a kink: mix the
        # tied pieces' cuts toward stationarity instead, and keep the better valid bound
        try:
            mixes = _stationary_mixes(decl, w_hat, lam, w0)
        except Exception:  # noqa: BLE001 - an internal failure only forgoes the mixed cuts
            mixes = None
        if mixes is not None:
            mixed_sums, _ = value_sums(decl, w_hat, thetas=guide, mixes=mixes)
            mixed = value_bounds(mixed_sums, domain, lam=lam, w0=w0, w_hat=w_hat)
            if mixed[2] < bounds[2]:
                bounds = mixed
    gap = bounds[2]
    # the same gap as a sum of duality gaps, computed stably (values never meet a margin)
    radius = (
        float(np.sqrt(2 * gap / lam)) if lam > 0 else 1e-6 * (1.0 + float(np.linalg.norm(w_hat)))
    )
    # the stable bound only tightens: it is skipped where the bound above already meets
    # the caller's target (a point found with the loss's own derivatives as multipliers
    # usually does)
    meets = accuracy is not None and thetas is not None and gap <= accuracy
    try:  # an internal failure here only forgoes the tighter bound
        direct = (
            None
            if meets
            else stable_gap(
                decl,
                w_hat,
                guide,
                lam=lam,
                w0=w0,
                radius=radius,
                domain=domain,
            )
        )
    except Exception:  # noqa: BLE001
        direct = None
    stats = dict(solver_stats or {})
    stats.update(certify_seconds=time.perf_counter() - start, term_kinds=counts)
    return finish_certificate(w_hat, bounds, direct, lam=lam, w0=w0, accuracy=accuracy, stats=stats)


def still_certified(
    candidate: CertifiedSolution | None,
    w_domain: Domain | LocalizedDomain,
    lam: float,
    w0: ArrayLike,
    alpha: float,
) -> bool:
    """Whether a certificate over W (same data, same objective) also certifies ``alpha`` over
    ``W0``: its point lies in W0 exactly, and ``min_W F <= min_W0 F`` makes its lower bound
    valid over W0, so ``F(w_hat) - min_W0 F <= gap <= alpha``. Output perturbation needs only
    *some* certified point on each dataset (the sensitivity bound holds for any of them), so
    reusing it leaves the guarantee unchanged and saves a solve (paper 000, Algorithm 4)."""
    return (
        candidate is not None
        and candidate.gap <= alpha
        and candidate.regularization == lam
        and np.array_equal(candidate.center, np.asarray(w0, float))
        and w_domain.contains(candidate.w)
    )
