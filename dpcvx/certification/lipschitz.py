"""Per-example bounds on the Lipschitz constant of the loss over the domain.

``A(z_i) = sup_{w in W} ||g||`` over subgradients ``g`` of ``f(., z_i)``, bounded from the loss's
term structure: each term is ``weight * psi(E(w; z_i))`` with ``E`` affine (Jacobian ``J_i``),
so ``||g|| <= weight * (bound on ||J_i^T theta||)`` over the subgradients ``theta`` of ``psi``
that can occur on W (``|theta| <= 1`` for abs, pos and logistic, ``<= 2M`` for Huber, a unit
dual-norm ball for norms, the simplex for max and log-sum-exp, and the range of ``E`` over the
domain's bounding ball for squares and exponentials; for ``psi(max_j E_j)`` with ``psi``
nondecreasing (``max(v, 0)**p``, one-sided Huber) the slope ``psi'`` at the largest value of
``max_j E_j`` over the bounding ball times ``max_j ||J_j||``; for ``||E||_2**p`` the slope
``p R_E**(p - 1)`` at the largest norm ``R_E`` of ``E`` over the ball times ``||J||_2``).
Generic terms get ``inf``, but for a quadratic form that reads no data (``cp.quad_form(w, P)``,
``2 ||P_s|| ||J|| max ||E||``). The affine part is bounded jointly with the first maximum-type term
(a maximum or log-sum-exp of one vector, a scalar maximum of affine pieces):
``max_j ||weight J_j + g||`` over its pieces, ``g`` the affine part's gradient, exact for the
multinomial loss ``lse(scores) - <x_y, w>`` (``sqrt(2) ||x||``).

dpcvx uses these bounds for speed only: an example with ``A(z_i) <= C`` has ``f_C = f`` on W,
so the extension's joint program can keep the plain block for it (no copy ``y_i``). The
certificate of the Lipschitz extension never relies on them: it bounds ``f_C`` from above by
``f`` and from below with minorants of slope at most C, valid for every example, so an
underestimated bound could only make a certificate fail, never make it wrong.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np

from dpcvx.modeling._expressions import Unsupported, affine_jet
from dpcvx.modeling._structure import MONOTONE, Term
from dpcvx.modeling.declaration import Declaration
from dpcvx.modeling.domains import row_norms

if TYPE_CHECKING:
    import cvxpy as cp

__all__ = [
    "argument_reach",
    "bounded_quadratic",
    "enforceable",
    "lipschitz_bounds",
    "remove_quadratic",
    "strong_convexity_bound",
]


def _spectral(jac: np.ndarray) -> np.ndarray:
    """Upper bounds on the spectral norms of the stacked matrices ``jac`` (n, k, d), rounded
    up (the SVD's error is far below the 1e-9 relative slack added)."""
    return np.linalg.norm(jac, ord=2, axis=(1, 2)) * (1 + 1e-9) + 1e-300


#: up to this many entries, :func:`_cube_bound` takes the maximum over the cube's vertices
CUBE_VERTICES = 4


def _cube_bound(jac: np.ndarray, norms: np.ndarray, shared: bool) -> np.ndarray:
    """Per example, an upper bound on ``max ||J^T theta||`` over ``theta`` in ``[-1, 1]^k``
    (a sum of absolute values', logistic or Huber functions' gradients, the last over
    ``2 M``; ``jac`` ``(n, k, d)`` with row norms ``norms``): the smaller of the row norms'
    sum and the maximum over the cube's vertices (up to :data:`CUBE_VERTICES` entries;
    ``sqrt(k) ||J||_2`` beyond), rounded up (``0.01 * cp.norm1(w)`` at d = 20: 0.045, where
    the sum gives 0.2). ``shared``: every example's ``J`` is the first's (a term that reads
    no data: computed once)."""
    total = norms.sum(axis=1)
    k = jac.shape[1]
    if k == 1:
        return total
    J = jac[:1] if shared else jac
    if k <= CUBE_VERTICES:  # the convex norm's maximum is at a vertex: exact, no SVD
        top = np.zeros(J.shape[0])
        for signs in itertools.product((1.0, -1.0), repeat=k - 1):  # J_0 + sum_j s_j J_j
            rows = J[:, 0] + np.einsum("k,nkd->nd", np.array(signs), J[:, 1:])
            top = np.maximum(top, np.linalg.norm(rows, axis=1))
        bound = top * (1 + 1e-9)
    else:
        bound = np.sqrt(k) * _spectral(J) * (1 + 1e-9)
    return np.minimum(total, bound)


def _quadratic_bound(
    off: np.ndarray, jac: np.ndarray, norms: np.ndarray, c: np.ndarray, R: float, shared: bool
) -> np.ndarray:
    """Per example, an upper bound on ``||2 J^T (J w + off)||`` over the ball ``B(c, R)``
    (the gradient of ``||J w + off||^2``, ``jac`` ``(n, k, d)`` with row norms ``norms``):
    ``2 s (||J c + off|| + s R)`` with ``s`` the Frobenius norm of ``J``, or, for a term
    that reads no data (``shared``: every example's is the first's), its spectral norm (one
    SVD: a ridge penalty on all but an intercept, ``0.01 * cp.sum_squares(w[:-1])`` on a ball
    of radius 2, adds 0.04 where the Frobenius norm gives 0.76). Rounded up by 1e-9."""
    if shared:
        s = _spectral(jac[:1])
        reach = np.linalg.norm(off[:1] + jac[:1] @ c, axis=1) * (1 + 1e-9) + s * R
        return np.broadcast_to(2.0 * s * reach * (1 + 1e-9), (off.shape[0],))
    frob = np.linalg.norm(norms, axis=1)
    reach = np.linalg.norm(off + jac @ c, axis=1) + frob * R
    return 2.0 * frob * reach * (1 + 1e-9)


def lipschitz_bounds(decl: Declaration) -> np.ndarray:
    """Upper bounds on ``sup_{w in W} ||subgradient of f(w, z_i)||``, shape ``(n,)``. An
    overflow (an example of 1e153 in a squared loss) is the largest float, and raises no
    floating-point warning: under warnings raised as errors, one would end a private
    release's solve on that dataset and not on its neighbour."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _bounds(decl)


def bounded_quadratic(term: Term) -> tuple[np.ndarray, cp.Expression] | None:
    """``(P_s, E)`` for a generic term ``x^T P x`` (``cp.quad_form(E, P)``) that reads no
    data, ``P`` a constant and ``E`` affine, with ``P_s = (P + P^T) / 2``; None otherwise."""
    from cvxpy.atoms.quad_form import QuadForm

    expr = term.expr
    if term.kind != "generic" or not isinstance(expr, QuadForm) or term.reads_data:
        return None
    E, P = expr.args
    if not E.is_affine() or P.variables() or P.value is None:
        return None
    value = P.value.toarray() if hasattr(P.value, "toarray") else P.value  # a sparse P
    if np.iscomplexobj(value):
        return None
    P = np.atleast_2d(np.asarray(value, float))
    if P.shape != (E.size, E.size) or not np.all(np.isfinite(P)):
        return None
    return (P + P.T) / 2.0, E


def enforceable(decl: Declaration) -> bool:
    """Whether dpcvx bounds every term of the loss (:func:`lipschitz_bounds` is finite on
    finite data), so that a Lipschitz claim can be enforced on it: every generic term is a
    quadratic form that reads no data (:func:`bounded_quadratic`). Form only."""
    return all(t.kind != "generic" or bounded_quadratic(t) is not None for t in decl.terms)


def _quadratic_form_bound(
    decl: Declaration, term: Term, c: np.ndarray, R: float
) -> np.ndarray | None:
    """``(1,)``: an upper bound on ``||2 J^T P_s (J w + b)||`` over the ball ``B(c, R)``, the
    gradient of ``weight^-1`` times the term :func:`bounded_quadratic` reads, ``2 ||P_s||_2
    ||J||_2 (||J c + b|| + ||J||_2 R)``, each factor rounded up by 1e-9; None where the
    argument has no jet."""
    found = bounded_quadratic(term)
    if found is None:
        return None
    P, E = found
    try:
        off, jac = decl.jet(E)
    except Unsupported:
        return None
    d = decl.d
    off = np.asarray(off, float)[:1].reshape(1, -1)
    jac = np.asarray(jac, float)[:1].reshape(1, -1, d)
    spec = _spectral(jac)
    reach = np.linalg.norm(off + jac @ c, axis=1) * (1 + 1e-9) + spec * R
    return 2.0 * _spectral(P[None]) * spec * reach * (1 + 1e-9)


def _bounds(decl: Declaration) -> np.ndarray:
    n, d = decl.n, decl.d
    c, R = np.asarray(decl.domain.center, float), float(decl.domain.radius)
    if not enforceable(decl):
        return np.full(n, np.inf)
    # the affine part's gradient is joined with the first term whose subgradients are convex
    # combinations of its pieces' gradients (a maximum, log-sum-exp, a scalar maximum of
    # affine pieces): ||wgt J^T p + g|| over the simplex is largest at a vertex, so the pair is
    # bounded by max_j ||wgt J_j + g||, where the sum of the two bounds would be looser (the
    # multinomial loss lse(scores) - <x_y, w>: sqrt(2) ||x|| instead of 2 ||x||)
    joint = next((t for t in decl.terms if _simplex_term(t)), None)
    g_aff = np.zeros((n, d))
    has_aff = False
    if joint is not None:
        for term in decl.terms:
            if term.kind == "affine":
                has_aff = True
                try:
                    _, jac = decl.jet(term.args[0])
                except Unsupported:
                    return np.full(n, np.inf)
                g_aff += float(term.weight) * np.asarray(jac, float).reshape(n, -1, d).sum(axis=1)
    total = np.zeros(n)
    for index, term in enumerate(decl.terms):
        if joint is not None and term.kind == "affine":
            continue  # in the joint term's bound
        if term.kind == "generic":  # a quadratic form that reads no data (enforceable)
            bound = _quadratic_form_bound(decl, term, c, R)
            if bound is None:
                return np.full(n, np.inf)
            total += abs(float(term.weight)) * bound
            continue
        shared = index in decl.shared_terms  # reads no data: its first example's is every one
        try:
            jets = [decl.jet(arg) for arg in term.args]
        except Unsupported:
            return np.full(n, np.inf)
        wgt = abs(float(term.weight))
        # a term that reads no data is bounded on its first example, every example's bound
        # (the same floats; broadcast into the total): a group lasso's n SVDs were 0.76 s of
        # a 1.9 s release at n = 1e5, and its Jacobians' n copies another 0.5 s
        m = 1 if shared and term is not joint else n
        flat = [
            (
                np.asarray(off, float)[:m].reshape(m, -1),
                np.asarray(jac, float)[:m].reshape(m, -1, d),
            )
            for off, jac in jets
        ]
        norms = [_row_norms(jac) for _, jac in flat]  # (m, k) row norms
        if term is joint and not has_aff:  # max_j ||wgt J_j||, and 0 for a constant piece
            total += wgt * np.concatenate(norms, axis=1).max(axis=1)
        elif term is joint:
            rows = np.concatenate([jac for _, jac in flat], axis=1)  # every piece's gradient
            if term.kind == "pieces":  # a constant piece has gradient 0
                rows = np.concatenate([rows, np.zeros((n, 1, d))], axis=1)
            joined = np.linalg.norm(wgt * rows + g_aff[:, None, :], axis=2).max(axis=1)
            total += joined
        elif term.kind == "affine":
            total += wgt * np.linalg.norm(flat[0][1].sum(axis=1), axis=1)
        elif term.kind == "pieces":
            total += wgt * _broadcast_max(term, norms, m).sum(axis=1)
        elif term.kind in ("pos_power", "pos_huber"):
            reach = _broadcast_max(
                term, [off + jac @ c + nrm * R for (off, jac), nrm in zip(flat, norms)], m
            )
            reach = np.maximum(reach, 0.0)
            p = term.param_value
            with np.errstate(over="ignore"):
                slope = (
                    p * reach ** (p - 1.0)
                    if term.kind == "pos_power"
                    else np.minimum(2.0 * reach, 2.0 * p)
                )
            total += wgt * (slope * _broadcast_max(term, norms, m)).sum(axis=1)
        elif term.kind in ("abs", "logistic"):
            total += wgt * _cube_bound(flat[0][1], norms[0], shared)
        elif term.kind == "huber":  # derivatives in [-2 M, 2 M]: the cube's, scaled
            total += wgt * 2.0 * term.param_value * _cube_bound(flat[0][1], norms[0], shared)
        elif term.kind in ("square", "exp"):
            off, jac = flat[0]
            reach = np.abs(off + jac @ c) + norms[0] * R  # max |E_k| over the bounding ball
            slope = (
                2.0 * reach
                if term.kind == "square"
                else np.exp(np.minimum(off + jac @ c + norms[0] * R, 700.0))
            )
            bound = (slope * norms[0]).sum(axis=1)
            if term.kind == "square" and off.shape[1] > 1:  # the gradient 2 J^T E
                bound = np.minimum(bound, _quadratic_bound(off, jac, norms[0], c, R, shared))
            total += wgt * bound
        elif term.kind == "max_terms":  # the largest of the pieces' bounds
            best = np.zeros(m)
            for part, (off, jac), nrm in zip(term.parts, flat, norms):
                reach = np.abs(off + jac @ c)[:, 0] + nrm[:, 0] * R  # max |E| over the ball
                if part.kind in ("affine", "abs", "logistic"):
                    slope = np.ones(m)
                elif part.kind == "huber":
                    slope = np.full(m, 2.0 * part.param_value)
                elif part.kind == "square":
                    slope = 2.0 * reach
                else:  # exp
                    slope = np.exp(np.minimum(reach, 700.0))
                best = np.maximum(best, abs(float(part.weight)) * slope * nrm[:, 0])
            total += wgt * best
        elif term.kind == "norm2_power":  # ||grad|| = p ||E||**(p-1) ||J^T u||, ||u|| = 1
            off, jac = flat[0]
            spec = _spectral(jac)
            reach = np.linalg.norm(off + jac @ c, axis=1) * (1 + 1e-9) + spec * R
            p = term.param_value
            with np.errstate(over="ignore"):
                total += wgt * p * reach ** (p - 1.0) * spec * (1 + 1e-9)
        elif term.kind == "norm2":
            total += wgt * _spectral(flat[0][1])  # the operator norm of each Jacobian
        elif term.kind in ("norminf", "max", "log_sum_exp"):
            total += wgt * norms[0].max(axis=1)
        elif term.kind == "sum_squares":
            off, jac = flat[0]
            bound = _quadratic_bound(off, jac, norms[0], c, R, shared)
            total += wgt * bound / float(term.param or 1.0)
        else:  # a kind without a rule: no bound
            return np.full(n, np.inf)
    # a structure dpcvx bounds never reports "no bound": an overflow is the largest float
    big = np.finfo(float).max
    return np.nan_to_num(total, nan=big, posinf=big)


#: the term kinds that are zero (``exp``: vanishing) below zero
ONE_SIDED = (*MONOTONE, "exp")


def argument_reach(decl: Declaration) -> dict[str, tuple[np.ndarray, ...]] | None:
    """Per term kind, ``(reach, top, far)``, each ``(n,)``: upper bounds on the largest
    ``|E|`` and on the largest ``E`` (at least 0) of any argument of the loss's terms of that
    kind over the domain's bounding ball (``|E(c)| + ||J|| R`` and ``E(c) + ||J|| R`` per
    element, the largest over the elements and the terms of the kind; the largest float where
    that overflows), and the largest ``|E(c)| / (||J|| R + 1)`` over the elements that can rise
    above zero on the ball (any element of a two-sided atom): how far an argument lies from the
    ball in units of its spread. None where an argument has no affine jet (generic terms)."""
    n, d = decl.n, decl.d
    c, R = np.asarray(decl.domain.center, float), float(decl.domain.radius)
    if not enforceable(decl):
        return None
    out: dict[str, tuple[np.ndarray, ...]] = {}
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for term in decl.terms:
            if term.kind == "generic":
                continue  # a quadratic form that reads no data: the same for every example
            try:
                jets = [decl.jet(arg) for arg in term.args]
            except Unsupported:
                return None
            reach, top, far = out.get(term.kind, (np.zeros(n), np.zeros(n), np.zeros(n)))
            for off, jac in jets:
                off = np.asarray(off, float).reshape(n, -1)
                jac = np.asarray(jac, float).reshape(n, -1, d)
                at = off + jac @ c
                spread = _row_norms(jac) * R
                reach = np.maximum(reach, (np.abs(at) + spread).max(axis=1, initial=0.0))
                top = np.maximum(top, (at + spread).max(axis=1, initial=0.0))
                live = at + spread > 0 if term.kind in ONE_SIDED else np.ones(at.shape, bool)
                ratio = np.where(live, np.abs(at) / (spread + 1.0), 0.0)
                far = np.maximum(far, ratio.max(axis=1, initial=0.0))
            out[term.kind] = (reach, top, far)
    big = np.finfo(float).max
    return {
        kind: tuple(np.nan_to_num(a, nan=big, posinf=big) for a in arrays)
        for kind, arrays in out.items()
    }


def _row_norms(jac: np.ndarray) -> np.ndarray:
    """``(n, k)``: the l2 norms of the rows of ``jac`` ``(n, k, d)``, as accurate as numpy's
    (the comparisons against ``C (1 + 1e-12)`` in the callers leave that much for rounding),
    in one pass where ``d`` is small enough that the ordered sum of
    :func:`~dpcvx.modeling.domains.row_norms` stays well within that (its error grows with
    ``d``; numpy's pairwise sum with ``log d``)."""
    n, k, d = jac.shape
    if d > 256:
        return np.linalg.norm(jac, axis=2)
    return row_norms(np.ascontiguousarray(jac).reshape(n * k, d)).reshape(n, k)


def _simplex_term(term: Term) -> bool:
    """Whether every subgradient of the term is ``weight J^T p`` with ``p`` in the simplex over
    its pieces (and 0 for a ``pieces`` term, whose pieces may be constant): a maximum or
    log-sum-exp of one affine vector, or a scalar maximum of affine pieces."""
    if float(term.weight) < 0:
        return False
    if term.kind in ("max", "log_sum_exp"):
        return True
    return term.kind == "pieces" and int(np.prod(term.atom_shape)) == 1


def _broadcast_max(term: Term, arrays: list[np.ndarray], n: int) -> np.ndarray:
    """Elementwise max over the pieces' per-element arrays (each ``(n, size_j)``, one per
    argument), broadcast to the atom's shape as CVXPY broadcasts them; ``(n, size)``."""
    shape = term.atom_shape if term.atom is not None else term.args[0].shape
    nd = len(shape)
    out: np.ndarray | None = None
    for arr, a in zip(arrays, term.args):
        full = arr.reshape((n,) + (1,) * (nd - len(a.shape)) + a.shape)
        full = np.broadcast_to(full, (n,) + shape).reshape(n, -1)
        out = full if out is None else np.maximum(out, full)
    assert out is not None  # a term has at least one argument
    return out


def _public_coefficient(expr: cp.Expression, variable: cp.Variable) -> bool:
    """Whether the coefficient of ``variable`` in the affine ``expr`` reads no data: no
    product or quotient has the variable on one side and a parameter on the other."""
    from cvxpy.atoms.affine.binary_operators import DivExpression, MulExpression, multiply

    if isinstance(expr, (MulExpression, multiply, DivExpression)):
        a, b = expr.args[0], expr.args[1]
        for u, v in ((a, b), (b, a)):
            if any(x.id == variable.id for x in u.variables()) and v.parameters():
                return False
    return all(_public_coefficient(arg, variable) for arg in expr.args)


def _strong_terms(decl: Declaration):
    """The loss's squared terms ``weight * ||M w + b(z)||^2 / den`` whose matrix ``M`` reads no
    data (``square`` summed or scalar, ``sum_squares``, ``quad_over_lin`` with a constant
    denominator, ``norm(E, 2)**2``), as ``(term, M, den, capacity)`` with ``capacity = weight
    lambda_min(M^T M) / den``: half the strong-convexity modulus the term contributes for every
    possible example."""
    for term in decl.terms:
        squared_norm = term.kind == "norm2_power" and float(term.param or 0.0) == 2.0
        if term.kind not in ("square", "sum_squares") and not squared_norm:
            continue
        if term.kind == "square" and not term.summed and term.args[0].size > 1:
            continue
        arg = term.args[0]
        if not _public_coefficient(arg, decl.variable):
            continue
        try:
            _, jac = decl.jet(arg)
        except Unsupported:
            continue
        M = np.asarray(jac, float).reshape(decl.n, -1, decl.d)[0]
        smallest = float(np.linalg.eigvalsh(M.T @ M)[0]) if M.shape[0] >= decl.d else 0.0
        den = float(term.param or 1.0) if term.kind == "sum_squares" else 1.0
        yield term, M, den, float(term.weight) * max(smallest, 0.0) / den


def strong_convexity_bound(decl: Declaration) -> float:
    """A strong-convexity modulus in ``w`` that holds for **every possible example**, read from
    the loss's public structure: the sum over its squared terms ``weight * ||M w + b(z)||^2``
    (``square`` summed, ``sum_squares``/``quad_over_lin`` with a constant denominator) whose
    matrix ``M`` reads no data, of ``2 weight lambda_min(M^T M) / denominator``; every other
    term is only convex. 0 when there is none."""
    return sum(2.0 * cap for *_, cap in _strong_terms(decl))


def remove_quadratic(
    decl: Declaration, mu: float, center: np.ndarray
) -> tuple[cp.Expression, dict[cp.Parameter, np.ndarray]]:
    """The loss minus ``(mu/2) ||w - center||^2``, up to a per-example constant, as a CVXPY
    expression with its data: ``h(w, z) = f(w, z) - (mu/2) ||w - c||^2 + const(z)``, convex for
    every possible example when ``mu <= strong_convexity_bound(decl)``.

    Each squared term of :func:`_strong_terms` gives up the share ``s_t = (mu/2) cap_t /
    sum cap`` (``<= cap_t``, so what is left is convex): ``(weight/den) ||M w + b||^2 -
    s_t ||w - c||^2 = (weight/den) ||P w||^2 + <q_t(z), w> + const`` with ``P^T P = M^T M -
    (s_t den / weight) I`` (public, positive semidefinite) and ``q_t(z) = (2 weight/den) M^T
    b(z) + 2 s_t c``. The linear parts of all such terms are one new per-example parameter;
    every other term is kept as written. Used to enforce a Lipschitz claim without giving up
    the verified strong convexity (:func:`dpcvx.pipeline.release`)."""
    import cvxpy as cp

    strong = list(_strong_terms(decl))
    total = sum(cap for *_, cap in strong)
    if not strong or total <= 0.0 or mu <= 0.0:
        raise ValueError("Internal: no verified strong convexity to remove.")
    w = decl.variable
    c = np.asarray(center, float).reshape(decl.d)
    leaves = dict(decl.data)
    leaves.update(decl.derived_values())
    replaced = {id(t) for t, *_ in strong}
    pieces = [t.weight * t.expr for t in decl.terms if id(t) not in replaced]
    linear = np.zeros((decl.n, decl.d))
    for term, M, den, cap in strong:
        share = min(0.5 * mu * cap / total, cap)
        offset, _ = affine_jet(term.args[0], w, leaves, decl.n)
        b = np.asarray(offset, float).reshape(decl.n, -1)
        scale = float(term.weight) / den
        linear += 2.0 * scale * (b @ M) + 2.0 * share * c
        vals, vecs = np.linalg.eigh(M.T @ M)
        rest = np.clip(vals - share / scale, 0.0, None)
        if np.any(rest > 0.0):
            P = np.sqrt(rest)[:, None] * vecs.T
            pieces.append(scale * cp.sum_squares(P @ w))
    q = cp.Parameter(decl.d, name="removed_quadratic_linear")
    expr = q @ w
    for piece in pieces:
        expr = expr + piece
    data = _data_of(decl, expr)
    data[q] = linear
    return expr, data


def _data_of(decl: Declaration, expr: cp.Expression) -> dict[cp.Parameter, np.ndarray]:
    """The declaration's data (its derived parameters' values included) that ``expr`` uses."""
    used = {p.id for p in expr.parameters()}
    data: dict[cp.Parameter, np.ndarray] = {
        p: np.asarray(decl.data[p.id]) for p in decl.parameters if p.id in used
    }
    values = decl.derived_values()
    data.update(
        {dp.parameter: values[dp.parameter.id] for dp in decl.derived if dp.parameter.id in used}
    )
    return data


#: the largest relative departure of ``M^T M`` from ``s I`` that :func:`public_quadratic`
#: takes for isotropic (rounding of the jet's entries)
ISOTROPY_TOLERANCE = 1e-12


def public_quadratic(
    decl: Declaration,
) -> tuple[float, np.ndarray, cp.Expression, dict[cp.Parameter, np.ndarray]] | None:
    """The loss's squared terms that read no data, ``weight ||M w + b||^2 / den`` with ``M``
    and ``b`` constants and ``M^T M = s I`` (``cp.sum_squares(w)``, ``cp.sum_squares(w -
    a)``, ``cp.norm(w, 2)**2``), summed: the same for every example, ``(mu/2) ||w - a||^2``
    plus a constant with ``mu = 2 sum weight s / den`` and ``a = -sum (weight / den) M^T b /
    (mu/2)``. Returns ``(mu, a, rest, data)``, ``rest`` the loss's other terms as a CVXPY
    expression and ``data`` what they read, or None when there is no such term or no other
    term. Read from the loss's form and constants only."""
    folded: set[int] = set()
    half = 0.0
    lin = np.zeros(decl.d)
    for term, M, den, _ in _strong_terms(decl):
        if term.reads_data:  # its offset, or a data-dependent weight
            continue
        offset, _ = decl.jet(term.args[0])  # the one _strong_terms computed
        b = np.asarray(offset, float).reshape(decl.n, -1)[0]
        gram = M.T @ M
        s = float(np.trace(gram)) / decl.d
        if not s > 0 or np.max(np.abs(gram - s * np.eye(decl.d))) > ISOTROPY_TOLERANCE * s:
            continue
        k = float(term.weight) / den
        half += k * s
        lin += k * (M.T @ b)
        folded.add(id(term))
    rest = [t.weight * t.expr for t in decl.terms if id(t) not in folded]
    if not folded or not rest or not half > 0:
        return None
    expr = rest[0]
    for piece in rest[1:]:
        expr = expr + piece
    data = _data_of(decl, expr)
    if not data:  # the other terms read no data either
        return None
    return 2.0 * half, -lin / half, expr, data
