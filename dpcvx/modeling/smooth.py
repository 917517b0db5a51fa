"""Second-order models of smooth losses, compiled once per declaration.

A loss whose every term is ``weight * psi(E_i(w))`` with ``E_i`` affine and ``psi`` a smooth
catalogue atom (affine, square, Huber, logistic, exp, sum of squares, log-sum-exp, the squared
hinge ``max(E, 0)^2``) has, with
``A`` the stacked per-example Jacobians and ``b`` the offsets (computed once here),

- values ``weight * sum_k psi((A w + b)_k)`` per example,
- the mean gradient ``A^T (weight psi'(A w + b)) / n``, one matrix-vector product,
- the mean Hessian ``A^T diag(weight psi''(A w + b)) A / n``, one matrix-matrix product
  (log-sum-exp adds its rank-one correction per example).

This is what the smooth solve path (:mod:`dpcvx.certification.solve`) runs Newton's method on.
The model only proposes points: every point is certified by dpcvx's certificate, which
evaluates the declaration itself, so an error here costs speed, never a guarantee.
"""

from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
from cvxpy.atoms.affine.unary_operators import NegExpression
from scipy.special import expit, logsumexp, softmax

from dpcvx.modeling._expressions import Unsupported, affine_jet
from dpcvx.modeling.declaration import Declaration, once_per_declaration

__all__ = [
    "SmoothExtension",
    "SmoothModel",
    "TiltedModel",
    "atom_derivative",
    "derivative_range",
    "extension_model",
    "gram",
    "recentered",
    "smooth_model",
    "smooth_terms",
]

#: ``pos_square`` ``max(v, 0)^2``, ``pos_power`` ``max(v, 0)^p`` and ``abs_power`` ``|v|^p``
#: (``p > 2``), ``pos_huber`` the Huber function of ``max(v, 0)``: :func:`_one_sided`
_SCALAR = (
    "affine",
    "square",
    "huber",
    "logistic",
    "exp",
    "pos_square",
    "pos_power",
    "abs_power",
    "pos_huber",
)
_VECTOR = ("sum_squares", "log_sum_exp")


@dataclass(frozen=True, slots=True)
class _Block:
    """One term: ``weight * psi(v)`` with ``v = A w + b`` (rows of ``A``: every entry of every
    example's argument, example-major; ``k`` entries per example)."""

    kind: str
    weight: float
    param: float
    A: np.ndarray  # (n k, d)
    b: np.ndarray  # (n k,)
    k: int
    shape: tuple[int, ...]  # the argument's shape (k entries)
    #: per row ``(lo, hi)``: the atom continued linearly outside ``[lo, hi]`` (the Lipschitz
    #: extension's clipped slopes, :func:`extension_model`); None for the atom itself
    knots: tuple[np.ndarray, np.ndarray] | None = None
    #: whether the term's multipliers are the atom's derivative at each entry: not for a
    #: ``pos_power`` or ``pos_huber`` term (one multiplier per piece of its maximum:
    #: :func:`_one_sided`),
    #: whose certificate takes the slope at the point on the active piece itself
    duals: bool = True
    #: a term that reads no data (``Declaration.shared_terms``): ``A`` and ``b`` hold one
    #: example's ``k`` rows, the same for every example (the mean of its ``n`` copies is
    #: itself)
    shared: bool = False


class SmoothModel:
    """Values, gradient and Hessian of ``mean_i f(w; z_i)`` for a smooth declared loss.

    Build it with :func:`smooth_model` (None when a term has no closed-form second
    derivative here). Every method is vectorized; nothing is re-derived from CVXPY after
    construction.
    """

    def __init__(self, n: int, d: int, blocks: tuple[_Block, ...]) -> None:
        self.n = n
        self.d = d
        self.blocks = blocks

    def _args(self, block: _Block, w: np.ndarray) -> np.ndarray:
        return block.A @ w + block.b

    def values(self, w: np.ndarray) -> np.ndarray:
        """``(n,)``: each example's loss at ``w``."""
        out = np.zeros(self.n)
        with np.errstate(over="ignore", invalid="ignore"):
            for blk in self.blocks:
                v = self._args(blk, w)
                out += blk.weight * _psi(blk, v).reshape(_rows(self, blk), -1).sum(axis=1)
        return out

    def value_grad(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        """The mean loss and its gradient at ``w``."""
        value = 0.0
        grad = np.zeros(self.d)
        with np.errstate(over="ignore", invalid="ignore"):
            for blk in self.blocks:
                v = self._args(blk, w)
                copies = self.n if blk.shared else 1  # a shared block stands for n copies
                value += copies * blk.weight * float(np.sum(_psi(blk, v)))
                grad += copies * blk.weight * (blk.A.T @ _dpsi(blk, v))
        return value / self.n, grad / self.n

    def multipliers(self, w: np.ndarray) -> list[list[np.ndarray] | None]:
        """Per term, the derivative of its atom at ``w`` for each entry of its argument,
        shaped ``(n, *argument shape)`` (None for an affine term): the multipliers of the
        certificate's minorants, which are tight at a minimizer."""
        out: list[list[np.ndarray] | None] = []
        with np.errstate(over="ignore", invalid="ignore"):
            for blk in self.blocks:
                if blk.kind == "affine" or not blk.duals:
                    out.append(None)
                    continue
                theta = _dpsi(blk, self._args(blk, w))
                if blk.shared:  # one example's derivatives are every example's (a view)
                    theta = np.broadcast_to(theta.reshape(blk.shape), (self.n,) + blk.shape)
                out.append([theta.reshape((self.n,) + blk.shape)])
        return out

    def gradients(self, w: np.ndarray) -> np.ndarray:
        """``(n, d)``: each example's gradient at ``w``."""
        G = np.zeros((self.n, self.d))
        with np.errstate(over="ignore", invalid="ignore"):
            for blk in self.blocks:
                v = self._args(blk, w)
                rows = blk.A * _dpsi(blk, v)[:, None]
                G += blk.weight * rows.reshape(_rows(self, blk), blk.k, self.d).sum(axis=1)
        return G

    def hessian(self, w: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        """``(d, d)``: the Hessian of the mean loss at ``w``; with ``weights`` (n,), that of
        ``sum_i weights_i f_i`` instead."""
        H = np.zeros((self.d, self.d))
        with np.errstate(over="ignore", invalid="ignore"):
            for blk in self.blocks:
                if blk.kind == "affine":
                    continue
                v = self._args(blk, w)
                per_row = None if weights is None else np.repeat(weights, blk.k)
                if blk.kind == "log_sum_exp":
                    p = softmax(v.reshape(self.n, blk.k), axis=1)
                    pw = p.reshape(-1) if per_row is None else p.reshape(-1) * per_row
                    H += blk.weight * (blk.A.T @ (blk.A * pw[:, None]))
                    G = np.einsum("nk,nkd->nd", p, blk.A.reshape(self.n, blk.k, self.d))
                    Gw = G if weights is None else G * weights[:, None]
                    H -= blk.weight * (G.T @ Gw)
                    continue
                c = blk.weight * _d2psi(blk, v)
                if blk.shared:  # its n copies, or their weights' sum
                    H += (self.n if weights is None else float(np.sum(weights))) * gram(blk.A, c)
                    continue
                H += gram(blk.A, c if per_row is None else c * per_row)
        return H / self.n if weights is None else H


def _rows(model: SmoothModel, blk: _Block) -> int:
    """How many examples' rows ``blk`` holds: one for a shared block, ``n`` otherwise."""
    return 1 if blk.shared else model.n


class TiltedModel:
    """The data part of tilted ERM (paper 002, Section 5.1), ``(1/tau) log sum_i exp(tau
    f_i(w))`` up to a constant, for Newton's method (``value_grad`` and ``hessian`` as a
    :class:`SmoothModel`'s).

    ``model`` is the solver's model (a :class:`SmoothModel`, or any object with its
    ``values``, ``gradients`` and weighted ``hessian``), whose values may differ from the
    losses by a constant
    per example (:func:`recentered`); ``shifts`` adds those constants back (``f_i = model's
    value + shifts_i``), less their maximum, so that the values stay of order the spread
    even where one loss is 1e12 (it then takes all the weight). ``null`` examples enter with
    the zero loss. With ``pi = softmax(tau f)``, the gradient is ``sum_i pi_i grad f_i`` and
    the Hessian ``sum_i pi_i hess f_i + tau Cov_pi(grad f)``."""

    def __init__(self, model: Any, tilt: float, shifts: np.ndarray, null: int = 0):
        self.model = model
        self.tilt = float(tilt)
        top = float(np.max(shifts)) if shifts.size else 0.0
        top = max(top, 0.0) if null else top
        self.shifts = np.asarray(shifts, float) - top
        self.null_value = -top
        self.null = int(null)
        self.n, self.d = model.n, model.d

    def weights(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        """The tilted value (up to the constant) and the tilted weights of the data examples."""
        u = self.model.values(w) + self.shifts
        if self.null:
            u = np.concatenate([u, np.full(self.null, self.null_value)])
        scores = self.tilt * u
        value = float(logsumexp(scores)) / self.tilt
        return value, softmax(scores)[: self.n]

    def value_grad(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        value, pi = self.weights(w)
        return value, pi @ self.model.gradients(w)

    def hessian(self, w: np.ndarray) -> np.ndarray:
        _, pi = self.weights(w)
        G = self.model.gradients(w)
        mean = pi @ G
        # the covariance of the gradients under pi (its null examples have gradient zero)
        cov = gram(G, pi, minus=np.broadcast_to(mean, G.shape))
        rest = 1.0 - float(np.sum(pi))  # the null examples' weight: (0 - mean) outer
        cov += rest * np.outer(mean, mean)
        return self.model.hessian(w, weights=pi) + self.tilt * cov


#: an argument this many times farther from the atom's kink than its spread over the domain
#: is moved next to it by :func:`recentered`
RECENTER_RATIO = 1e3
#: the logistic loss is within ``exp(-LOGISTIC_LINEAR)`` of its asymptote ``v`` beyond this
LOGISTIC_LINEAR = 50.0


def recentered(model: SmoothModel, center: np.ndarray, radius: float) -> SmoothModel:
    """The model Newton's method runs on: ``model`` with the arguments that stay, on the whole
    ball ``B(center, radius)`` that holds the domain, where their atom is affine (a Huber
    function past its knee, the logistic loss far above zero: within ``exp(-50)``), or zero
    (a one-sided atom below zero), and lie over :data:`RECENTER_RATIO` times their spread
    from it, moved next to that region; an affine term's offsets go to zero.

    That changes each such term by a constant on the ball (the logistic loss by less than
    ``exp(-50)`` of its slope times the move), so the minimizer, derivatives and Hessian are
    the same, but the values are of order the spread instead of a label of 1e12, whose
    rounding hid the decrease from Newton's line search and its stopping rule (a neighbour
    with one such label stalled at a gap of 0.2). Only the solver's problem changes: the
    certificate evaluates the user's loss. Rows of the Lipschitz extension's clipped atoms
    (finite knots) are affine past their knots, and move there too. A moved offset is the
    target less ``a_i . center`` (the shift added to the old offset rounded at a label's
    size: 16 at 1e17)."""
    blocks = []
    changed = False
    # |v| <= |b| + ||a|| ||center||: with |b| <= RATIO and ||center|| <= RATIO radius, no row
    # is far (a pass over the offsets only, the common case)
    near = float(np.linalg.norm(center)) <= RECENTER_RATIO * radius
    for blk in model.blocks:
        movable = blk.knots is not None or blk.kind in (
            "affine",
            "huber",
            "pos_huber",
            "logistic",
            "pos_power",
            "pos_square",
        )
        if not movable or (near and not np.any(np.abs(blk.b) > RECENTER_RATIO)):
            blocks.append(blk)
            continue
        v = blk.A @ center + blk.b
        spread = np.linalg.norm(blk.A, axis=1) * radius
        far = np.abs(v) > RECENTER_RATIO * (spread + 1.0)
        if not far.any():
            blocks.append(blk)
            continue
        kind, M = blk.kind, float(blk.param) if blk.param is not None else 0.0
        low, high = v - spread, v + spread
        target = np.full(v.shape, np.nan)  # the argument at the center after the move
        if kind == "affine":
            target = np.zeros(v.shape)
        elif kind == "huber":
            target = np.where(low > M + 1.0, M + 1.0 + spread, target)
            target = np.where(high < -M - 1.0, -M - 1.0 - spread, target)
        elif kind == "pos_huber":
            target = np.where(low > M + 1.0, M + 1.0 + spread, target)
        elif kind == "logistic":
            target = np.where(low > LOGISTIC_LINEAR, LOGISTIC_LINEAR + spread, target)
        if kind in ("pos_huber", "pos_power", "pos_square"):
            target = np.where(high < -1.0, -1.0 - spread, target)
        if blk.knots is not None:
            # the extension's atom is affine past a finite knot (its slope clipped there)
            lo, hi = blk.knots
            with np.errstate(invalid="ignore"):
                target = np.where(np.isfinite(hi) & (low > hi + 1.0), hi + 1.0 + spread, target)
                target = np.where(np.isfinite(lo) & (high < lo - 1.0), lo - 1.0 - spread, target)
        move = far & np.isfinite(target)
        if not move.any():
            blocks.append(blk)
            continue
        changed = True
        b = blk.b.copy()
        # the new offset is the target less ``a_i . center``: ``b + (target - v)`` would round
        # at the size of the label (16 at 1e17, past the margin of 1 that keeps it affine)
        b[move] = target[move] - blk.A[move] @ center
        blocks.append(dataclasses.replace(blk, b=b))
    return SmoothModel(model.n, model.d, tuple(blocks)) if changed else model


def gram(A: np.ndarray, c: np.ndarray, minus: np.ndarray | None = None) -> np.ndarray:
    """``M^T diag(c) M`` for ``M = A`` (or ``A - minus``), in row chunks of a few megabytes
    (no temporary of the data's size: allocating one costs more than the arithmetic):
    symmetric rank-k updates when ``c >= 0`` (``B^T @ B`` of one chunk with its own
    transpose, which numpy computes by its BLAS's ``syrk``, half a matrix product's work),
    matrix products otherwise. Numpy's own BLAS, not scipy's ``dsyrk``: scipy loads a second
    OpenBLAS, whose threads contended with numpy's for the same cores after every numpy
    product (a Gram product at n = 1e5, d = 100 took 25 ms alone, 56 ms after a
    matrix-vector product and 123 ms after a matrix product; the squared loss's solve there
    took 152 ms, 61 ms now)."""
    n, d = A.shape
    H = np.zeros((d, d))
    step = max(1, _CHUNK // max(d, 1))
    psd = bool(np.all(c >= 0))
    for start in range(0, n, step):
        block = A[start : start + step]
        if minus is not None:
            block = block - minus[start : start + step]
        cb = c[start : start + step]
        if psd:
            B = block * np.sqrt(cb)[:, None]
            H += B.T @ B  # (numpy's syrk: one array times its own transpose, symmetric)
        else:
            H += block.T @ (block * cb[:, None])
    return H


#: rows times columns of one chunk of :func:`gram`
_CHUNK = 1 << 18


def atom_derivative(block: _Block, v: np.ndarray, order: int) -> np.ndarray:
    """The scalar atom of ``block`` (``order`` 0), or its first or second derivative, at the
    arguments ``v`` (with the block's knots, if any, continuing it linearly)."""
    fn = (_psi, _dpsi, _d2psi)[order]
    with np.errstate(over="ignore", invalid="ignore"):
        return fn(block, v)


def _psi(blk: _Block, v: np.ndarray) -> np.ndarray:
    if blk.knots is not None:
        # psi(v_c) + psi'(v_c) (v - v_c) with v_c = clip(v, lo, hi): linear beyond the knots
        vc = np.clip(v, *blk.knots)
        plain = dataclasses.replace(blk, knots=None)
        return _psi(plain, vc) + _dpsi(plain, vc) * (v - vc)
    kind = blk.kind
    if kind == "affine":
        return v
    if kind == "square":
        return v * v
    if kind == "pos_square":
        up = np.maximum(v, 0.0)
        return up * up
    if kind == "pos_power":
        return np.maximum(v, 0.0) ** blk.param
    if kind == "abs_power":
        return np.abs(v) ** blk.param
    if kind in ("huber", "pos_huber"):  # the Huber function of v, or of max(v, 0)
        M = blk.param
        a = np.abs(v) if kind == "huber" else np.maximum(v, 0.0)
        return np.where(a <= M, a * a, 2.0 * M * a - M * M)
    if kind == "logistic":
        return np.logaddexp(0.0, v)
    if kind == "exp":
        return np.exp(v)
    if kind == "sum_squares":
        return v * v / blk.param
    # log_sum_exp: one value per example, spread on its first entry
    r = v.reshape(-1, blk.k)
    top = r.max(axis=1, keepdims=True)
    out = np.zeros_like(r)
    out[:, 0] = (top + np.log(np.exp(r - top).sum(axis=1, keepdims=True)))[:, 0]
    return out.reshape(-1)


def _dpsi(blk: _Block, v: np.ndarray) -> np.ndarray:
    if blk.knots is not None:  # the atoms here have monotone derivatives
        return _dpsi(dataclasses.replace(blk, knots=None), np.clip(v, *blk.knots))
    kind = blk.kind
    if kind == "affine":
        return np.ones_like(v)
    if kind == "square":
        return 2.0 * v
    if kind == "pos_square":
        return 2.0 * np.maximum(v, 0.0)
    if kind == "pos_power":
        return blk.param * np.maximum(v, 0.0) ** (blk.param - 1.0)
    if kind == "abs_power":
        return blk.param * np.sign(v) * np.abs(v) ** (blk.param - 1.0)
    if kind in ("huber", "pos_huber"):
        return np.clip(2.0 * v, -2.0 * blk.param if kind == "huber" else 0.0, 2.0 * blk.param)
    if kind == "logistic":
        return expit(v)
    if kind == "exp":
        return np.exp(v)
    if kind == "sum_squares":
        return 2.0 * v / blk.param
    return softmax(v.reshape(-1, blk.k), axis=1).reshape(-1)


def _d2psi(blk: _Block, v: np.ndarray) -> np.ndarray:
    if blk.knots is not None:
        lo, hi = blk.knots
        inside = (v > lo) & (v < hi)
        return np.where(inside, _d2psi(dataclasses.replace(blk, knots=None), v), 0.0)
    kind = blk.kind
    if kind == "square":
        return np.full_like(v, 2.0)
    if kind == "pos_square":
        return np.where(v > 0, 2.0, 0.0)
    if kind == "pos_power":
        p = blk.param
        return p * (p - 1.0) * np.maximum(v, 0.0) ** (p - 2.0)
    if kind == "abs_power":
        p = blk.param
        return p * (p - 1.0) * np.abs(v) ** (p - 2.0)
    if kind == "pos_huber":
        return np.where((v > 0) & (v <= blk.param), 2.0, 0.0)
    if kind == "huber":
        return np.where(np.abs(v) <= blk.param, 2.0, 0.0)
    if kind == "logistic":
        return expit(v) * expit(-v)
    if kind == "exp":
        return np.exp(v)
    return np.full_like(v, 2.0 / blk.param)  # sum_squares


_CACHE: weakref.WeakKeyDictionary[Declaration, SmoothModel | None] = weakref.WeakKeyDictionary()


def smooth_terms(decl: Declaration, keep: frozenset[int]) -> SmoothModel | None:
    """The :class:`SmoothModel` of the declaration's terms whose index is in ``keep`` (not
    cached), or None as :func:`smooth_model`."""
    return _build(decl, keep)


def smooth_model(decl: Declaration) -> SmoothModel | None:
    """The declaration's :class:`SmoothModel` (computed once per declaration), or None when a
    term is not one of the smooth catalogue atoms of an affine argument."""
    return once_per_declaration(_CACHE, decl, _build)


def _build(decl: Declaration, keep: frozenset[int] | None = None) -> SmoothModel | None:
    """The model of the declaration's terms (of those whose index is in ``keep``, if given)."""
    n, d = decl.n, decl.d
    leaves = decl.derived_values()
    blocks = []
    for index, term in enumerate(decl.terms):
        if keep is not None and index not in keep:
            continue
        kind = term.kind
        args = term.args
        if kind in ("pos_power", "pos_huber"):  # of max(E, 0) or |E|: a scalar atom of E
            found = _one_sided(term)
            if found is None:
                return None
            kind, args = found[0], (found[1],)
        duals = term.kind not in ("pos_power", "pos_huber")
        given = term.param
        if kind == "norm2_power" and given == 2.0:
            # ||E||^2 (``cp.norm(w, 2)**2``, ``cp.square(cp.norm(w))``) is E's sum of squares
            # (the certificate takes its own gradient at the point for its multipliers): it
            # took the conic program, the logistic loss plus 0.01 norm(w)**2 12.6 s at n = 1e4
            kind, given = "sum_squares", 1.0
        if kind not in _SCALAR + _VECTOR or len(args) != 1:
            return None
        if kind in ("huber", "sum_squares") and given is None:
            return None
        try:
            offset, jac = affine_jet(args[0], decl.variable, leaves, n)
        except Unsupported:
            return None
        b = np.asarray(offset, float).reshape(n, -1)
        k = b.shape[1]
        # a term that reads no data is held once (log-sum-exp's Hessian sums per example)
        shared = index in decl.shared_terms and kind != "log_sum_exp"
        if shared:  # the first example's rows (the jet broadcasts them: no copy of n)
            b = b[:1]
            A = np.ascontiguousarray(np.asarray(jac, float).reshape((n, k, d))[0])
        else:
            A = np.ascontiguousarray(np.asarray(jac, float).reshape(n * k, d))
        if not (np.all(np.isfinite(A)) and np.all(np.isfinite(b))):
            return None
        param = float(given) if given is not None else 1.0
        if kind == "sum_squares" and not param > 0:
            return None
        shape = tuple(np.shape(offset)[1:])
        offsets = b.reshape(-1).copy()
        blocks.append(
            _Block(
                kind, float(term.weight), param, A, offsets, k, shape, duals=duals, shared=shared
            )
        )
    return SmoothModel(n, d, tuple(blocks))


def _one_sided(term) -> tuple[str, object] | None:
    """A ``pos_power`` term of ``p >= 2`` or a ``pos_huber`` term as a smooth block, or None.
    ``psi(max(E, c_1, ..., 0))`` with every other piece a constant the structure makes
    nonpositive is ``psi(max(E, 0))``: ``("pos_square", E)`` for ``p = 2`` (the squared hinge,
    second derivative ``2 [E > 0]``), ``("pos_power", E)`` for ``p > 2`` (``p (p - 1)
    max(E, 0)^(p - 2)``), ``("pos_huber", E)`` for the Huber function (``2 [0 < E <= M]``).
    ``psi(max(E, -E))`` (``|E|^p``, also ``square(abs(E))``, ``power(E, 4)``) is
    ``("square", E)`` for ``p = 2`` and ``("abs_power", E)`` above. Each piece of the atom's
    shape; the term's multipliers are one per piece (the block's ``duals`` False). Public
    structure only: no data value decides it."""
    if term.kind == "pos_power":
        if not term.smooth or not float(term.param_value) >= 2.0:
            return None
        two = float(term.param_value) == 2.0
    elif term.kind == "pos_huber":
        if not term.smooth:
            return None
        two = False
    else:
        return None
    live = [a for a in term.args if a.variables()]
    if any(tuple(a.shape) != tuple(term.atom_shape) for a in live):
        return None
    if len(live) == 1:
        if term.kind == "pos_huber":
            return "pos_huber", live[0]
        return ("pos_square" if two else "pos_power"), live[0]
    if (
        term.kind == "pos_power"
        and len(term.args) == 2
        and isinstance(live[1], NegExpression)
        and live[1].args[0] is live[0]
    ):
        return ("square" if two else "abs_power"), live[0]
    return None


#: the atoms whose Lipschitz extension :func:`extension_model` writes down (monotone
#: derivatives, a point of slope zero or slopes tending to zero)
_EXTENDABLE = (
    "square",
    "huber",
    "logistic",
    "exp",
    "sum_squares",
    "pos_square",
    "pos_power",
    "abs_power",
    "pos_huber",
)


@dataclass(frozen=True, slots=True)
class SmoothExtension:
    """The Lipschitz extension of a loss ``weight * psi(a_i^T w + b_i)`` (one smooth scalar
    atom per example), possibly plus affine terms whose Jacobians are per-example multiples
    of ``a_i`` (``tilt``): over all of ``R^d`` the copy ``y`` of ``min_y f(y) + C ||w - y||``
    moves only along ``a_i``, so the extension is the loss continued linearly where its
    slope, ``weight psi' + tilt_i`` per unit of ``a_i^T w`` times ``||a_i||``, exceeds ``C``
    (the atom's knots, where that slope is ``+-C``; the affine terms pass through): a smooth
    model (``model``, the atom's block with its knots and the affine blocks as they are)
    Newton's method runs on at the plain cost.

    :meth:`copies` gives each example's copy ``y_i`` (``a_i^T y_i + b_i`` the argument
    clipped to the knots), where the atom's own derivative is the certificate's multiplier;
    the extension dpcvx certifies keeps ``y_i`` in W (paper 000, eq. (5)), so the certificate
    is tight where the copies lie in W and loose (never wrong) otherwise. An example whose
    extension over ``R^d`` is unbounded below (its slope beyond ``C`` on one side
    everywhere, which affine terms allow: ``cp.logistic(z) - y z`` with a label of 5;
    ``unbounded``) has its atom's knots at one point (its relaxed loss affine) and its copy
    computed in W by the rounds whatever the relaxed one."""

    model: SmoothModel
    #: ``||a_i||^2`` per example (data only: computed once)
    sq_norms: np.ndarray
    #: which of the model's blocks is the atom's (the others are affine)
    curved: int = 0
    #: per example, the affine terms' slope per unit of ``a_i^T w`` (None: there are none)
    tilt: np.ndarray | None = None
    #: the examples whose extension over ``R^d`` is unbounded below (None: no example)
    unbounded: np.ndarray | None = None

    @property
    def block(self) -> _Block:
        """The atom's block (with its knots)."""
        return self.model.blocks[self.curved]

    def copies(self, w: np.ndarray) -> np.ndarray:
        """``(n, d)``: the copies ``y_i`` at ``w`` (not yet made feasible)."""
        blk = self.block
        assert blk.knots is not None
        v = blk.A @ w + blk.b
        shift = np.clip(v, *blk.knots) - v
        norms2 = self.sq_norms
        step = np.where(norms2 > 0, shift / np.where(norms2 > 0, norms2, 1.0), 0.0)
        return w[None, :] + step[:, None] * blk.A

    def affine_rows(self, rows: np.ndarray) -> np.ndarray:
        """``(rows, d)``: the affine terms' gradient of the examples ``rows`` (zeros without
        affine terms)."""
        out = np.zeros((rows.size, self.model.d))
        for j, blk in enumerate(self.model.blocks):
            if j != self.curved:
                out += blk.weight * blk.A[rows]
        return out

    def lines(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For the examples ``rows``: the unit directions ``u`` their loss varies along, the
        atom's argument per unit of ``t = u^T y`` (``||a_i||``; 0 where ``a_i = 0``: the loss
        is then affine, along its affine terms' gradient) and the affine terms' slope per
        unit of ``t``: the loss is ``weight psi(scale t + b_i) + tilt t`` plus a constant."""
        blk = self.block
        scale = np.sqrt(self.sq_norms[rows])
        safe = np.where(scale > 0, scale, 1.0)
        u = blk.A[rows] / safe[:, None]
        tilt = np.zeros(rows.size) if self.tilt is None else self.tilt[rows] * scale
        flat = np.flatnonzero(scale == 0)
        if self.tilt is not None and flat.size:
            c = self.affine_rows(rows[flat])
            size = np.sqrt(np.einsum("kd,kd->k", c, c))
            u[flat] = c / np.where(size > 0, size, 1.0)[:, None]
            tilt[flat] = size
        return u, scale, tilt


#: an example's atom knots where its extension over R^d is unbounded (its relaxed loss affine)
UNBOUNDED_KNOT = 0.0


#: :func:`extension_model`'s results per model (a rung asks for one to choose its path and
#: again to run it): a value holds the model's blocks, never the model, the key
_EXTENSIONS: weakref.WeakKeyDictionary[SmoothModel, dict[tuple[float, bool], Any]] = (
    weakref.WeakKeyDictionary()
)


def extension_model(model: SmoothModel, C: float, affine: bool = False) -> SmoothExtension | None:
    """The relaxed extension of ``model`` at ``C`` (:class:`SmoothExtension`), or None when the
    loss is not one smooth scalar atom with one entry per example. ``affine``: the model's
    other blocks, affine of one entry per example, have Jacobians that are per-example
    multiples of the atom's (public structure:
    :func:`~dpcvx.certification.arrowhead.parallel_affine`); they are then kept, and the
    atom's knots are where the example's whole slope reaches ``+-C``. Computed once per model,
    ``C`` and ``affine``."""
    known = _EXTENSIONS.setdefault(model, {})
    key = (float(C), bool(affine))
    if key not in known:
        known[key] = _extension_model(model, *key)
    return known[key]


def _extension_model(model: SmoothModel, C: float, affine: bool) -> SmoothExtension | None:
    if not C > 0:
        return None
    curved = [j for j, b in enumerate(model.blocks) if b.kind != "affine"]
    if len(curved) != 1 or (len(model.blocks) > 1 and not affine):
        return None
    (j,) = curved
    blk = model.blocks[j]
    if blk.kind not in _EXTENDABLE or blk.k != 1 or not blk.weight > 0 or blk.knots is not None:
        return None
    if any(b.k != 1 for b in model.blocks):
        return None
    sq_norms = np.einsum("nd,nd->n", blk.A, blk.A)
    norms = np.sqrt(sq_norms)
    with np.errstate(divide="ignore"):
        cap = np.where(norms > 0, C / (blk.weight * norms), np.inf)  # the largest |psi'|
    tilt = unbounded = None
    if len(model.blocks) == 1:
        lo, hi = _knots(blk, -cap, cap)
        # knots that meet (a cap of zero: a row whose norm overflows) leave no model
        if not (np.all(lo < hi) and not np.any(np.isnan(lo)) and not np.any(np.isnan(hi))):
            return None
    else:
        # the affine terms' slope per unit of the atom's argument: <c_i, a_i> / ||a_i||^2
        lean = np.zeros(model.n)
        for i, other in enumerate(model.blocks):
            if i != j:
                lean += other.weight * np.einsum("nd,nd->n", other.A, blk.A)
        with np.errstate(divide="ignore", invalid="ignore"):
            tilt = np.where(norms > 0, lean / np.where(norms > 0, sq_norms, 1.0), 0.0)
            shift = tilt / blk.weight
            lo, hi = _knots(blk, -cap - shift, cap - shift)
        # beyond the cap on one side everywhere, or knots that meet (a cap of zero)
        missed = ~(lo < hi) | (lo == np.inf) | (hi == -np.inf)
        flat = np.flatnonzero(norms == 0)
        if flat.size:  # the loss is affine there: unbounded where its slope exceeds C
            ext = SmoothExtension(model, sq_norms, j, tilt)
            c = ext.affine_rows(flat)
            missed[flat] = np.sqrt(np.einsum("kd,kd->k", c, c)) > C
        lo = np.where(missed, UNBOUNDED_KNOT, lo)
        hi = np.where(missed, UNBOUNDED_KNOT, hi)
        lo[flat], hi[flat] = -np.inf, np.inf  # the atom is constant there
        unbounded = missed if missed.any() else None
    relaxed = dataclasses.replace(blk, knots=(lo, hi))
    blocks = model.blocks[:j] + (relaxed,) + model.blocks[j + 1 :]
    return SmoothExtension(SmoothModel(model.n, model.d, blocks), sq_norms, j, tilt, unbounded)


def _knots(blk: _Block, s_lo: np.ndarray, s_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, ``lo = sup {v : psi'(v) <= s_lo}`` and ``hi = inf {v : psi'(v) >= s_hi}`` for
    the block's atom (``-inf``/``+inf`` where no such ``v`` exists on that side, ``+inf``/``-inf``
    where every ``v`` does: the example's slope is beyond the cap on that side everywhere).
    Beyond the knots the atom's slope is past ``s_lo`` or ``s_hi``, and continued linearly.
    Where the derivative is flat at the bound (a Huber function's slope ``+-2 M`` past its
    knee, a one-sided atom's zero below zero), no knot is needed: the slope there is within
    the bound."""
    inf = np.full(np.shape(s_lo), np.inf)
    kind = blk.kind
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if kind == "square":
            return s_lo / 2, s_hi / 2
        if kind == "sum_squares":
            return s_lo * blk.param / 2, s_hi * blk.param / 2
        if kind == "abs_power":  # psi' = p sign(v) |v|^(p - 1), onto R
            p = blk.param

            def inverse(s: np.ndarray) -> np.ndarray:
                return np.where(np.isfinite(s), np.sign(s) * (np.abs(s) / p) ** (1 / (p - 1)), s)

            return inverse(s_lo), inverse(s_hi)
        # the atoms whose derivative takes the values between bottom and top (each end
        # attained, flat there, where ``attained``)
        bottom, top = derivative_range(blk)
        attained = kind not in ("logistic", "exp")

        def inverse(s: np.ndarray) -> np.ndarray:  # the v of psi'(v) = s, bottom < s < top
            if kind in ("huber", "pos_huber", "pos_square"):
                return s / 2
            if kind == "pos_power":
                return (s / blk.param) ** (1.0 / (blk.param - 1.0))
            if kind == "logistic":
                return _logit(s)
            return np.log(s)

        inside_lo = (s_lo > bottom) & (s_lo < top)
        inside_hi = (s_hi > bottom) & (s_hi < top)
        middle = 0.5 * (bottom + min(top, bottom + 2.0))  # any value inside (unused there)
        at_lo = np.where(inside_lo, s_lo, middle)
        at_hi = np.where(inside_hi, s_hi, middle)
        # lo: no v below the bound's values (-inf), or every v (+inf, the slope below -cap)
        lo = np.where(inside_lo, inverse(at_lo), np.where(s_lo >= top, inf, -inf))
        hi = np.where(inside_hi, inverse(at_hi), np.where(s_hi <= bottom, -inf, inf))
        if attained:  # a bound equal to a flat end needs no knot
            lo = np.where(s_lo == bottom, -inf, lo)
            hi = np.where(s_hi == top, inf, hi)
    return lo, hi


def derivative_range(blk: _Block) -> tuple[float, float]:
    """The infimum and supremum of the block's atom's derivative over the real line (of one
    entry): ``(0, 1)`` for the logistic function, ``(-2 M, 2 M)`` for the Huber function."""
    kind = blk.kind
    if kind == "huber":
        return -2.0 * blk.param, 2.0 * blk.param
    if kind == "pos_huber":
        return 0.0, 2.0 * blk.param
    if kind == "logistic":
        return 0.0, 1.0
    if kind in ("exp", "pos_power", "pos_square"):
        return 0.0, np.inf
    return -np.inf, np.inf  # square, abs_power, sum_squares, log_sum_exp's entries


def _logit(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(p) - np.log1p(-p)
