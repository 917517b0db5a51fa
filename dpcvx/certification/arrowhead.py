"""An interior-point method for piecewise-linear losses that exploits the arrowhead structure.

For a loss whose every term is ``weight * max_j (a_j^T w + b_j)`` elementwise over affine
pieces (``cp.pos``, ``cp.maximum`` of affine expressions, ``cp.abs``: hinge, absolute,
pinball, epsilon-insensitive, ...) or affine, regularized ERM is the quadratic program

    minimize   (lam/2) ||w - w0||^2 + g^T w + sum_r c_r t_r
    subject to t_r >= a_rj^T w + b_rj        (every element r of every example, every piece j)

whose examples couple only through ``w``. A primal-dual (Mehrotra predictor-corrector) step
eliminates each element's ``t_r``, slacks and multipliers in closed form, which leaves one
dense ``d x d`` system, the Schur complement

    lam I + sum_r sum_{j < l} (D_rj D_rl / sum_j D_rj) (a_rj - a_rl)(a_rj - a_rl)^T,

with ``D = mu / s`` (a weighted covariance of the pieces: positive semidefinite). It is formed
by symmetric rank-k updates over row chunks (:func:`dpcvx.modeling.smooth.gram`), in
``O(n d^2)`` per iteration, and factored by Cholesky: no sparse factorization of the
``(n + d)``-sized KKT system. Clarabel (the general fallback) factors that system with a
sparse LDL; its ``qdldl`` and ``faer`` methods run alike here, about two orders of magnitude
slower than this elimination on hinge ERM at ``n = 2e4``, ``d = 100``.

The method only proposes a point and multipliers: the multipliers (each element's weights on
its pieces, which sum to its ``c_r``) are handed to dpcvx's certificate, which judges the
point; nothing here is trusted.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpcvx.certification._moves import moved_offsets, term_targets
from dpcvx.certification._rows import row_chunks
from dpcvx.certification.ball import KINK, BallCopies, BallRegion, Pieces1D, dual_at_w
from dpcvx.certification.box import BoxRegion
from dpcvx.certification.copy_blocks import CopyBlocks
from dpcvx.certification.penalty_cones import NormCone, PenaltyCones
from dpcvx.modeling._expressions import Unsupported
from dpcvx.modeling.declaration import Declaration, once_per_declaration
from dpcvx.modeling.domains import row_norms
from dpcvx.modeling.smooth import RECENTER_RATIO, gram

__all__ = [
    "Bounds",
    "ExtensionPieces",
    "PiecewiseModel",
    "arrowhead_ipm",
    "extension_pieces",
    "parallel_affine",
    "piecewise_model",
    "piecewise_terms",
    "recentered_pieces",
    "screened_ipm",
]

#: the method stops after this many steps that improve neither on its best merit nor on the
#: last step's
STALL = 5
#: the most pieces one element may have here (the Schur complement takes m (m - 1) / 2 updates)
MAX_PIECES = 4
#: with the extension's copies as blocks, the most centring of Mehrotra's step: their many
#: pairs (43 per copy at d = 20 in a box) keep the affine step short, so the heuristic
#: ``sigma = (gap_aff / gap)^3`` stays near one and each step gains little (the whole joint
#: program of an absolute loss in ``cp.abs(w) <= 0.1``, n = 1e5, 38,688 copies: 157 steps to
#: convergence with this cap, not converged after 196 without it)
SIGMA_COPIES = 0.2


@dataclass(frozen=True, slots=True)
class _Term:
    """One term: per element ``r`` (example-major, ``k`` per example), ``c * max_j (A_j[r] w +
    b_j[r])``; ``A_j`` is None for a piece constant in ``w``. ``abs`` terms are the two pieces
    ``E`` and ``-E``."""

    kind: str  # "pieces" or "abs"
    c: float  # weight / n (a shared term's: its weight)
    A: tuple[np.ndarray | None, ...]  # each (N, d) or None
    b: tuple[np.ndarray, ...]  # each (N,)
    shape: tuple[int, ...]  # the atom's shape per example (k entries)
    #: when every piece's Jacobian is a multiple of one matrix (``abs``: ``J, -J``; pinball:
    #: ``-tau X, (1 - tau) X``; a hinge's ``0, -y x``): that matrix and the multiples, so one
    #: matrix-vector product serves every piece and the Schur complement is one update. ``A``
    #: then holds ``base`` itself for every piece that depends on ``w`` (no copy per piece):
    #: its entries only say which pieces do; the Jacobians are ``coefs[j] * base``
    base: np.ndarray | None = None
    coefs: tuple[float, ...] = ()
    #: ``(N, m)`` multiples of ``base`` per row, when they differ between rows (the
    #: Lipschitz extension's clipped slopes, :func:`extension_pieces`); ``coefs`` is unused then
    row_coefs: np.ndarray | None = None
    #: when the term stands for several of the declaration's terms of one argument
    #: (:func:`_merged`): which of their pieces each of its pieces sums
    merged: _Merged | None = None
    #: a term that reads no data (``0.01 * cp.norm1(w)``): the same for every example, so its
    #: elements are one example's (``k`` rows, not ``n k``) and ``c`` is its weight, the mean
    #: of its ``n`` equal copies; its multipliers are every example's
    shared: bool = False

    def apply(self, w: np.ndarray) -> np.ndarray:
        """``(N, m)``: ``A_j w`` for every piece ``j``."""
        rows = self.b[0].size
        if self.base is not None and self.row_coefs is not None:
            return _by_rows(np.multiply, self.row_coefs, self.base @ w)
        if self.base is not None:
            v = self.base @ w
            out = np.empty((v.size, len(self.coefs)))
            for j, c in enumerate(self.coefs):
                np.multiply(v, c, out=out[:, j])
            return out
        return np.stack([np.zeros(rows) if A is None else A @ w for A in self.A], axis=1)

    def apply_t(self, E: np.ndarray) -> np.ndarray:
        """``sum_j A_j^T E[:, j]``."""
        if self.base is not None and self.row_coefs is not None:
            return self.base.T @ _row_dot(E, self.row_coefs)
        if self.base is not None:
            return self.base.T @ (E @ np.asarray(self.coefs))
        d = next(A.shape[1] for A in self.A if A is not None)
        out = np.zeros(d)
        for j, A in enumerate(self.A):
            if A is not None:
                out += A.T @ E[:, j]
        return out

    def schur(self, D: np.ndarray, d: int) -> np.ndarray:
        """``sum_r sum_{j < l} (D_j D_l / sum D) (a_j - a_l)(a_j - a_l)^T``."""
        total = _rows(D)
        m = D.shape[1]
        if self.base is not None and self.row_coefs is not None:
            R = self.row_coefs
            weight = sum(
                (R[:, j] - R[:, i]) ** 2 * D[:, j] * D[:, i]
                for j in range(m)
                for i in range(j + 1, m)
            )
            return _upper_gram(self.base, np.asarray(weight) / total)
        if self.base is not None:
            c = self.coefs
            weight = sum(
                (c[j] - c[i]) ** 2 * D[:, j] * D[:, i] for j in range(m) for i in range(j + 1, m)
            )
            return _upper_gram(self.base, np.asarray(weight) / total)
        H = np.zeros((d, d))
        for j in range(m):
            for i in range(j + 1, m):
                H += _pair_gram(self.A[j], self.A[i], D[:, j] * D[:, i] / total, d)
        return H


@dataclass(frozen=True, slots=True)
class _Merged:
    """How one term of the model is the sum of several of the declaration's terms, their
    pieces multiples of one matrix (one argument, such as pinball's ``tau * cp.neg(r) +
    (1 - tau) * cp.pos(r)``): ``c_1 max_j p_1j + c_2 max_k p_2k = (c_1 + c_2) max_{j, k}
    (c_1 p_1j + c_2 p_2k) / (c_1 + c_2)``, less the pieces that never rise above the others.
    A multiplier of the sum is one of each term, that term's weights on its pieces the sums
    over the pieces of the sum that hold them (:meth:`PiecewiseModel.multipliers`)."""

    #: ``(m, q)``: per piece of the sum, the piece of each of the ``q`` terms it holds
    combos: np.ndarray
    #: each term's kind (``"pieces"`` or ``"abs"``) and which of its pieces depend on ``w``
    kinds: tuple[str, ...]
    live: tuple[tuple[bool, ...], ...]
    #: how many of the declaration's affine terms (the first ones) every piece holds too
    affine: int = 0


class PiecewiseModel:
    """The arrowhead structure of a piecewise-linear declared loss (see the module
    docstring); build it with :func:`piecewise_model`."""

    def __init__(
        self,
        n: int,
        d: int,
        terms: tuple[_Term, ...],
        linear: np.ndarray,
        kinds: tuple[str, ...],
        whole: bool | None = None,
        cones: tuple[NormCone, ...] = (),
    ) -> None:
        self.n = n
        self.d = d
        self.terms = terms
        self.linear = linear  # the mean gradient of the affine terms not in a term's pieces
        self.kinds = kinds  # every term's kind, in the declaration's order
        #: the norm penalties that read no data (``piecewise_model(..., cones=True)``), each a
        #: second-order cone of the method's program (:class:`PenaltyCones`)
        self.cones = cones
        #: every term of the declaration is in ``terms`` (no affine part apart; by default,
        #: where the declaration has no affine term)
        self.whole = "affine" not in kinds if whole is None else whole

    def multipliers(
        self, mus: list[np.ndarray], cones: list[np.ndarray] | None = None
    ) -> list[list[np.ndarray | None] | None]:
        """The certificate's multipliers (per term of the declaration, per argument, in the
        atom's own units) from the method's ``mu`` (per term, ``(N, m)``): simplex weights
        for a ``pieces`` term (None for a piece constant in ``w``, whose weight the
        certificate completes to one), the derivative ``mu_1 - mu_2`` in ``[-1, 1]`` for
        ``abs``; for the norm penalties of :attr:`cones`, ``cones`` (per cone, its
        :meth:`PenaltyCones.thetas`), every example's (None without them)."""
        # per term of the declaration that is not affine: its kind, its weights on its pieces
        # and which of them depend on w
        parts: list[tuple[str, np.ndarray, tuple[bool, ...], tuple[int, ...], bool]] = []
        for term, mu in zip(self.terms, mus):
            weights = mu / term.c
            if term.merged is None:
                live = tuple(A is not None for A in term.A)
                parts.append((term.kind, weights, live, term.shape, term.shared))
                continue
            combos = term.merged.combos
            for k, (kind, live) in enumerate(zip(term.merged.kinds, term.merged.live)):
                own = np.zeros((weights.shape[0], len(live)))
                for piece, j in enumerate(combos[:, k]):
                    own[:, j] += weights[:, piece]
                parts.append((kind, own, live, term.shape, False))
        out: list[list[np.ndarray | None] | None] = []
        it = iter(parts)
        held = iter(range(len(self.cones)))
        for kind in self.kinds:
            if kind == "affine":
                out.append(None)
                continue
            if kind == "norm2":
                k = next(held)
                if cones is None:
                    out.append(None)
                    continue
                theta = np.asarray(cones[k], float)
                out.append([np.broadcast_to(theta, (self.n,) + theta.shape)])
                continue
            kind, weights, live, atom, shared = next(it)
            if kind == "abs":
                theta = np.clip(weights[:, 0] - weights[:, 1], -1.0, 1.0)
                out.append([_every(theta, self.n, atom, shared)])
            else:
                out.append(
                    [
                        _every(weights[:, j], self.n, atom, shared) if on else None
                        for j, on in enumerate(live)
                    ]
                )
        return out

    def with_terms(self, terms: tuple[_Term, ...]) -> PiecewiseModel:
        """This model with other terms (the same examples, affine part, kinds and cones)."""
        return PiecewiseModel(
            self.n, self.d, terms, self.linear, self.kinds, self.whole, self.cones
        )


def _every(v: np.ndarray, n: int, atom: tuple[int, ...], shared: bool) -> np.ndarray:
    """Per-element multipliers ``v`` in the declaration's shape ``(n, *atom)``: a shared
    term's one example's are every example's (a read-only view)."""
    if shared:
        return np.broadcast_to(v.reshape(atom), (n,) + atom)
    return v.reshape((n,) + atom)


_CACHE: weakref.WeakKeyDictionary[Declaration, PiecewiseModel | None] = weakref.WeakKeyDictionary()


def piecewise_terms(decl: Declaration, keep: frozenset[int]) -> PiecewiseModel | None:
    """The :class:`PiecewiseModel` of the declaration's terms whose index is in ``keep`` (not
    cached; its ``kinds`` are theirs), or None as :func:`piecewise_model`."""
    return _build(decl, keep)


def piecewise_model(
    decl: Declaration, share: bool = True, cones: bool = False
) -> PiecewiseModel | None:
    """The declaration's :class:`PiecewiseModel` (computed once), or None when a term is not
    affine, ``abs`` or a ``pieces`` maximum of at most :data:`MAX_PIECES` affine pieces of the
    same shape (or scalars). ``share``: a term that reads no data is one example's elements
    (``_Term.shared``); without it, every example's (for a caller that weighs the examples'
    elements apart, as tilted ERM does). ``cones``: a Euclidean norm that reads no data (a
    group lasso written into the loss) is allowed too, as one of the model's
    :attr:`~PiecewiseModel.cones` (only a caller that hands them to the method as
    :class:`PenaltyCones` asks for them; the model has none without one)."""
    if cones:
        return once_per_declaration(_CONED, decl, lambda decl: _build(decl, cones=True))
    if share:
        return once_per_declaration(_CACHE, decl, _build)
    return once_per_declaration(_UNSHARED, decl, lambda decl: _build(decl, share=False))


_UNSHARED: weakref.WeakKeyDictionary[Declaration, PiecewiseModel | None] = (
    weakref.WeakKeyDictionary()
)
_CONED: weakref.WeakKeyDictionary[Declaration, PiecewiseModel | None] = weakref.WeakKeyDictionary()


def _build(
    decl: Declaration, keep: frozenset[int] | None = None, share: bool = True, cones: bool = False
) -> PiecewiseModel | None:
    """The model of the declaration's terms (of those whose index is in ``keep``, if given:
    its ``kinds`` are theirs); ``share`` and ``cones``: see :func:`piecewise_model` (a model
    asked with ``cones`` that has none is None: the one without is the same)."""
    n, d = decl.n, decl.d
    leaves = decl.derived_values()
    terms: list[_Term] = []
    kinds: list[str] = []
    # the affine terms of one number per example: their weights over n, offsets, the
    # declaration's terms and their parts of ``linear``
    affine: list[tuple[float, np.ndarray, Any, np.ndarray]] = []
    sources: list[Any] = []  # the declaration's term of each of terms
    linear = np.zeros(d)
    others = np.zeros(d)  # the affine terms' part of linear but theirs
    has_pieces = False
    norm_cones: list[NormCone] = []
    for index, term in enumerate(decl.terms):
        if keep is not None and index not in keep:
            continue
        if term.kind != "affine" and not term.weight > 0:
            return None
        if cones and term.kind == "norm2" and index in decl.shared_terms:
            cone = _norm_cone(decl, index)
            if cone is None:
                return None
            norm_cones.append(cone)
            kinds.append(term.kind)
            continue
        if term.kind not in ("affine", "abs", "pieces"):
            return None
        if term.kind == "affine":
            try:
                off, jac = decl.jet(term.args[0])
            except Unsupported:
                return None
            kinds.append(term.kind)
            jac = np.asarray(jac, float).reshape(n, -1, d)
            part = term.weight * jac.sum(axis=1).mean(0)
            linear += part
            if jac.shape[1] != 1:
                others += part
            else:  # one number per example
                off = np.asarray(off, float).reshape(-1)
                if off.size not in (1, n):  # pragma: no cover - a jet of one number each
                    others += part
                    continue
                affine.append((term.weight / n, np.broadcast_to(off, (n,)), term, part))
            continue
        has_pieces = True
        shape = tuple(term.atom_shape)
        # pieces constant in w may broadcast; the others have the atom's shape
        if any(
            tuple(arg.shape) != shape and (arg.variables() or tuple(arg.shape) != ())
            for arg in term.args
        ):
            return None
        if term.kind == "pieces" and not 2 <= len(term.args) <= MAX_PIECES:
            return None
        k = int(np.prod(shape)) if shape else 1
        # a term of public constants alone is the same for every example: one example's
        # elements, of weight its own (L1 regularization written into the loss, n = 1e5,
        # d = 20: two million elements and a 320 MB Jacobian otherwise)
        shared = share and index in decl.shared_terms
        rows = 1 if shared else n
        # piece j's Jacobian is scales[j] * A[j]; A[j] is a data array (or a derived value)
        # where the Jacobian is a multiple of one, so the model holds no copy of the data's
        # size (a hinge's -y x is the derived y x negated, pinball's -tau x a multiple of x);
        # the pieces are built one at a time, so at most one such copy is alive
        A: list[np.ndarray | None] = []
        scales: list[float] = []
        b: list[np.ndarray] = []
        for arg in term.args:
            try:
                off, jac = decl.jet(arg)
            except Unsupported:
                return None
            lead = (n,) + (1,) * (len(shape) - len(arg.shape))  # a scalar piece broadcasts
            off = np.broadcast_to(np.asarray(off, float).reshape(lead + arg.shape), (n,) + shape)
            b.append(np.ascontiguousarray(off[:rows]).reshape(rows * k))
            if not np.all(np.isfinite(b[-1])):
                return None
            if not arg.variables():
                A.append(None)
                scales.append(0.0)
                continue
            jac = np.asarray(jac, float).reshape((n,) + arg.shape + (d,))[:rows]
            jac = np.broadcast_to(jac, (rows,) + shape + (d,))
            jac = np.ascontiguousarray(jac).reshape(rows * k, d)
            if not np.all(np.isfinite(jac)):
                return None
            mat, scale = (jac, 1.0) if shared else _data_multiple(jac, decl, leaves)
            del jac
            A.append(mat)
            scales.append(scale)
        kinds.append(term.kind)
        base: np.ndarray | None
        coefs: tuple[float, ...]
        if term.kind == "abs":  # the pieces E and -E: one matrix, multiples 1 and -1
            if A[0] is None:
                return None
            base, coefs = A[0], (scales[0], -scales[0])
            A = [base, base]
            b = [b[0], -b[0]]
        else:
            base, coefs = _shared_base(A)
            coefs = tuple(c * sc for c, sc in zip(coefs, scales))
        if base is not None:  # every piece is a multiple of base: no copy per piece
            A = [None if a is None else base for a in A]
        else:
            A = [a if a is None or sc == 1.0 else sc * a for a, sc in zip(A, scales)]
        weight = float(term.weight) / rows
        terms.append(
            _Term(term.kind, weight, tuple(A), tuple(b), shape, base, coefs, shared=shared)
        )
        sources.append(term)
    if not has_pieces or (cones and not norm_cones):
        return None
    held = tuple(norm_cones)
    single = _merged(decl, terms, sources, [a[:3] for a in affine])
    if single is None:
        return PiecewiseModel(n, d, tuple(terms), linear, tuple(kinds), cones=held)
    # the affine terms are in the term's pieces now, if it took them
    assert single.merged is not None
    if single.merged.affine:  # every affine term of one number per example
        linear = others
    whole = single.merged.affine == kinds.count("affine")
    return PiecewiseModel(n, d, (single,), linear, tuple(kinds), whole, held)


def _norm_cone(decl: Declaration, index: int) -> NormCone | None:
    """The term ``index`` (a Euclidean norm that reads no data) as a :class:`NormCone`: its
    argument's jet on the first example (every example's), its entries in the order of the
    certificate's (the jet's offsets flattened row-major), or None where it has none or is
    not finite."""
    term = decl.terms[index]
    try:
        off, jac = decl.jet(term.args[0])
    except Unsupported:
        return None
    d = decl.d
    b = np.array(np.asarray(off, float)[:1].reshape(-1))
    A = np.array(np.asarray(jac, float)[:1].reshape(b.size, d))
    if not (np.all(np.isfinite(A)) and np.all(np.isfinite(b))):
        return None
    return NormCone(index, float(term.weight), A, b)


def _merged(
    decl: Declaration, terms: list[_Term], sources: list, affine: list[tuple]
) -> _Term | None:
    """The declaration's several terms of one argument as one term (see :class:`_Merged`), or
    None. They merge when every piece of every term (``sources``, their model ``terms``) is
    affine with Jacobian a constant multiple of one matrix as the loss is written: decided on
    public data (:func:`_probe_slopes`), never on the data's values, so a dataset and its
    neighbour merge alike. At most :data:`MAX_PIECES` combinations of pieces. A combination
    below the others everywhere (under the chord of two with slopes either side of its own,
    or under a parallel one, on every row, to rounding) is dropped, which only shortens the
    method's steps. The method then has one element per entry, not one per term, and the
    Lipschitz extension, which needs one term, applies. The declaration's ``affine`` terms of
    one number per example (``(weight / n, offsets, the declaration's term)`` each), where
    every one of them is such a multiple too, are added to every piece (the extension then
    applies to a pinball loss spelled ``0.5 * cp.abs(r) + (tau - 0.5) * r``)."""
    if not terms or any(t.base is None or t.merged is not None or t.shared for t in terms):
        return None
    first = terms[0]
    if any(t.shape != first.shape for t in terms):
        return None
    if first.shape not in ((), (1,)):
        affine = []
    if len(terms) + len(affine) < 2 or math.prod(len(t.b) for t in terms) > MAX_PIECES:
        return None
    probed = _probe_slopes(decl, sources + [a[2] for a in affine])
    if probed is None and affine:  # the terms of pieces alone, without the affine ones
        affine = []
        probed = None if len(terms) < 2 else _probe_slopes(decl, sources)
    if probed is None:
        return None
    # the real Jacobians are the probe's multiples of one matrix, which is first.coefs[j] /
    # probed[0][j] times first.base for a piece j of the first term that depends on w
    j = next((j for j, a in enumerate(probed[0]) if a != 0.0), None)
    if j is None or first.coefs[j] == 0.0:
        return None
    unit = first.coefs[j] / probed[0][j]
    c = sum(t.c for t in terms)
    shares = [t.c / c for t in terms]
    combos = list(itertools.product(*(range(len(t.b)) for t in terms)))
    with np.errstate(all="ignore"):  # an overflow only means no merge (checked below)
        lean = sum(ca / c * unit * probed[len(terms) + i][0] for i, (ca, _, _) in enumerate(affine))
        rest = sum((ca / c * off for ca, off, _ in affine), np.zeros(first.b[0].size))
        slopes = [
            lean + sum(sh * unit * probed[k][jk] for k, (sh, jk) in enumerate(zip(shares, combo)))
            for combo in combos
        ]
        offsets = [
            rest + sum(sh * t.b[jk] for sh, t, jk in zip(shares, terms, combo)) for combo in combos
        ]
        if not (np.all(np.isfinite(slopes)) and all(np.all(np.isfinite(b)) for b in offsets)):
            return None
        keep = _envelope(slopes, offsets)
    if len(keep) < 2:  # (not reached: a sum of maxima of several slopes has two pieces)
        keep = list(range(len(combos)))
    merged = _Merged(
        np.array([combos[i] for i in keep], int).reshape(len(keep), len(terms)),
        tuple(t.kind for t in terms),
        tuple(tuple(A is not None for A in t.A) for t in terms),
        len(affine),
    )
    coefs = tuple(float(slopes[i]) for i in keep)
    return _Term(
        "pieces",
        c,
        tuple(first.base if cf != 0.0 else None for cf in coefs),
        tuple(offsets[i] for i in keep),
        first.shape,
        first.base,
        coefs,
        merged=merged,
    )


#: the examples of :func:`_probe_slopes`'s public data, and its seed
PROBE_ROWS = 3
PROBE_SEED = 20261128


#: the operations on the data that keep a data expression rational (CVXPY's class names; a
#: power counts with a nonnegative integer exponent only, :func:`_rational`)
RATIONAL = frozenset(
    {
        "AddExpression",
        "NegExpression",
        "MulExpression",
        "multiply",
        "DivExpression",
        "Promote",
        "Sum",
        "index",
        "special_index",
        "reshape",
        "transpose",
        "Hstack",
        "Vstack",
        "broadcast_to",
    }
)


def _rational(expr: Any) -> bool:
    """Whether the data expression ``expr`` is a rational function of the data: built from
    leaves, :data:`RATIONAL` operations and powers of nonnegative integer exponents (not
    ``abs``, ``maximum``, a norm, ``sqrt``, ``exp`` or ``log``: ``exp(log(y * y) / 2)`` is
    ``|y|``)."""
    if not expr.args:
        return True
    name = type(expr).__name__
    if name in ("power", "Power", "PowerApprox"):
        exponent: Any = getattr(expr, "p", None)
        try:
            p = float(getattr(exponent, "value", exponent))
        except (TypeError, ValueError):
            return False
        if not (p >= 0 and p.is_integer()):
            return False
    elif name not in RATIONAL:
        return False
    return all(_rational(a) for a in expr.args)


def _probe(decl: Declaration, scaled: int | None = None) -> Declaration | None:
    """The declaration on :data:`PROBE_ROWS` examples of public data drawn from a fixed seed
    (uniform on ``[0.5, 1.5]``, the data's shapes only; with ``scaled``, the data array of
    that index then multiplied by :data:`PROBE_SCALE`), or None where a data expression of
    the loss is not rational (:func:`_rational`) or that data cannot be bound."""
    if not all(_rational(dp.expression) for dp in decl.derived):
        return None
    rng = np.random.default_rng(PROBE_SEED)
    try:
        part = decl.rows(0, min(PROBE_ROWS, decl.n))
        fake = {pid: rng.uniform(0.5, 1.5, size=arr.shape) for pid, arr in part.data.items()}
        if scaled is not None:
            pid = list(fake)[scaled]
            fake[pid] = fake[pid] * PROBE_SCALE
        return part.with_data(fake)
    except Exception:  # noqa: BLE001 - the loss's form on public data: no probe, everywhere
        return None


_PARALLEL: weakref.WeakKeyDictionary[Declaration, bool] = weakref.WeakKeyDictionary()


def parallel_affine(decl: Declaration) -> bool:
    """Whether the loss is one curved smooth term of one number per example plus affine terms
    of one number each whose Jacobians are, per example, multiples of the curved term's (the
    logistic loss spelled ``cp.logistic(x @ w) - y * (x @ w)``, a Poisson loss ``cp.exp(x @ w)
    - y * (x @ w)``, ``cp.logistic(r) + 0.2 * r``), so that each example's loss is a function
    of one number and its Lipschitz extension has a smooth model
    (:func:`~dpcvx.modeling.smooth.extension_model` with ``affine``). Decided on public data
    (:func:`_probe`), never on the data's values: the smooth model of the probe, each affine
    block's row a multiple of the curved block's to 1e-12 (:func:`_multiple`), on the probe
    and again with each data array in turn scaled by :data:`PROBE_SCALE`. On the declared data
    the same holds wherever the data expressions are defined (a rational function of the
    data that vanishes at a random point vanishes as a function), though a multiple may be
    zero or the curved row vanish; the extension's model handles both. A part that is not
    parallel but below the tolerance on every probe (a coefficient of 1e-20 as written) is
    taken as parallel: on data where it is large, the path's certificate misses and the
    ladder goes on. Computed once per declaration."""
    return once_per_declaration(_PARALLEL, decl, _parallel_affine)


#: :func:`parallel_affine` probes again with each data array in turn scaled by this
PROBE_SCALE = 1e6


def _parallel_affine(decl: Declaration) -> bool:
    from dpcvx.modeling.smooth import derivative_range, smooth_model

    leans: list[np.ndarray] = []  # per probe, each example's affine slope per unit of v
    atom = None
    # on the plain probe and on one per data array with that array a million times larger:
    # a part that is not parallel but tiny as written (``1e-14 * v @ w`` beside ``y * x @
    # w``) shows on one of them above the tolerance, as it would on data of such scales
    for scaled in [None, *range(len(decl.data))]:
        probe = _probe(decl, scaled)
        if probe is None:
            return False
        try:
            model = smooth_model(probe)
        except Exception:  # noqa: BLE001 - the loss's form on public data: no such model
            return False
        if model is None or any(b.k != 1 for b in model.blocks):
            return False
        curved = [b for b in model.blocks if b.kind != "affine"]
        if len(curved) != 1 or len(model.blocks) < 2:
            return False
        base = curved[0].A
        lean = np.zeros(probe.n)
        for blk in model.blocks:
            if blk.kind != "affine":
                continue
            for i in range(probe.n):
                pivot = _pivot(base[i])
                ratio = None if pivot is None else _multiple(blk.A[i], base[i], pivot)
                if ratio is None:
                    return False
                lean[i] += blk.weight * ratio
        leans.append(lean)
        atom = curved[0]
    # a tilt that reads no data and keeps every slope on one side of zero (``cp.logistic(z)
    # + z``, slopes in (1, 2) per unit of z; ``cp.huber(r) + 3 z``): an example with a long
    # enough row has its extension over R^d unbounded below, whichever rows are long, so
    # the path is not the form's (a tilt that reads data, ``- y z``, is one-sided only on
    # some labels: the extension's model handles such examples, and its rounds can miss
    # where most of them are, as docs/certificate.md says)
    tilts = np.concatenate(leans)
    assert atom is not None
    if np.ptp(tilts) <= 1e-12 * max(1.0, float(np.max(np.abs(tilts)))):
        bottom, top = derivative_range(atom)
        tilt = float(tilts[0])
        if atom.weight * bottom + tilt > 0 or atom.weight * top + tilt < 0:
            return False
    return True


def _probe_slopes(decl: Declaration, sources: list) -> list[list[float]] | None:
    """Per term of the declaration (``sources``: ``pieces``, ``abs`` or ``affine`` of one
    number per example), the multiples ``a_j`` with each piece's Jacobian ``a_j M`` for one
    matrix ``M`` common to them all (``abs``: ``E`` and ``-E``; 0 for a piece constant in
    ``w``), on :data:`PROBE_ROWS` examples of public data drawn from a fixed seed (uniform on
    ``[0.5, 1.5]``, the data's shapes only); None where they are not such multiples there, or
    where that data has no Jacobian, or where a data expression of the loss is not rational
    (:func:`_rational`). On the declared data the Jacobians are then the same multiples of
    that matrix's value, whatever the values: a rational function of the data that vanishes
    at a random point is zero as a rational function, so wherever it is defined.
    (``cp.abs(y)`` is ``y`` on the probe's positive values, and not on a label of -1: a merge
    decided there mis-modelled such data, and a release took the fast path on a dataset and
    raised on its neighbour; so did ``exp(log(y * y) / 2)``, analytic on each of its two
    half-lines.)"""
    probe = _probe(decl)
    if probe is None:
        return None
    rows = probe.n
    try:
        jacs: list[list[np.ndarray | None]] = []
        for term in sources:
            args = term.args if term.kind != "abs" else (term.args[0], -term.args[0])
            out: list[np.ndarray | None] = []
            for arg in args:
                if not arg.variables():
                    out.append(None)
                    continue
                _, jac = probe.jet(arg)
                out.append(np.asarray(jac, float).reshape(rows, -1))
            jacs.append(out)
    except Exception:  # noqa: BLE001 - the loss's form on public data: no merge, everywhere
        return None
    live = [a for out in jacs for a in out if a is not None]
    if not live or any(a.shape != live[0].shape for a in live):
        return None
    pivot = _pivot(live[0])
    if pivot is None:
        return None
    probed: list[list[float]] = []
    for out in jacs:
        ratios = []
        for a in out:
            ratio = 0.0 if a is None else _multiple(a, live[0], pivot)
            if ratio is None:
                return None
            ratios.append(ratio)
        probed.append(ratios)
    return probed


def _envelope(slopes: list[float], offsets: list[np.ndarray]) -> list[int]:
    """The lines ``slopes[i] s + offsets[i]`` (one per row) that :func:`_merged` keeps: each
    line that on every row lies below a parallel one (the later of equal ones) or below the
    chord of two with slopes either side of its own, to rounding, goes, one at a time."""
    keep = list(range(len(slopes)))

    def below(i: int, j: int, k: int) -> bool:
        # line i under lam * line j + (1 - lam) * line k, the slopes matched by lam
        sj, sk, si = slopes[j], slopes[k], slopes[i]
        lam = 1.0 if sj == sk else (sk - si) / (sk - sj)
        if not 0.0 <= lam <= 1.0:
            return False
        bj, bk, bi = offsets[j], offsets[k], offsets[i]
        chord = lam * bj + (1.0 - lam) * bk
        slack = 8 * _EPS * (np.abs(bj) + np.abs(bk) + np.abs(bi))
        return bool(np.all(bi <= chord + slack))

    changed = True
    while changed and len(keep) > 1:
        changed = False
        for i in keep:
            others = [j for j in keep if j != i]
            parallel = [j for j in others if slopes[j] == slopes[i]]
            lower = [j for j in others if slopes[j] < slopes[i]]
            upper = [k for k in others if slopes[k] > slopes[i]]
            if any(below(i, j, j) for j in parallel) or any(
                below(i, j, k) for j in lower for k in upper
            ):
                keep.remove(i)
                changed = True
                break
    return keep


def _shared_base(A: list[np.ndarray | None]) -> tuple[np.ndarray | None, tuple[float, ...]]:
    """One matrix of which every piece's Jacobian is a multiple (to 1e-12 relative: the
    method only proposes a point, so a close model costs nothing), or ``(None, ())``."""
    live = [a for a in A if a is not None]
    if not live:
        return None, ()
    base = live[0]
    pivot = _pivot(base)
    if pivot is None:
        return None, ()
    coefs = []
    for a in A:
        if a is None:
            coefs.append(0.0)
            continue
        ratio = 1.0 if a is base else _multiple(a, base, pivot)
        if ratio is None:
            return None, ()
        coefs.append(ratio)
    return base, tuple(coefs)


def _data_multiple(jac: np.ndarray, decl: Declaration, leaves) -> tuple[np.ndarray, float]:
    """``(L, r)`` with ``jac = r * L`` (to 1e-12 relative) for a data array or derived value
    ``L`` of the declaration (viewed in ``jac``'s shape), or ``(jac, 1.0)``."""
    arrays = [*decl.data.values(), *leaves.values()]
    if any(np.may_share_memory(jac, v) for v in arrays):
        return jac, 1.0
    pivot = _pivot(jac)
    if pivot is None:
        return jac, 1.0
    for v in arrays:
        if v.size != jac.size or not v.flags.c_contiguous:
            continue
        view = v.reshape(jac.shape)
        ratio = _multiple(jac, view, pivot)
        if ratio is not None:
            return view, ratio
    return jac, 1.0


#: entries per chunk of the comparisons below (no temporary of the data's size)
_STEP = 1 << 18


def _pivot(base: np.ndarray) -> int | None:
    """The flat index of ``base``'s entry of largest magnitude (None when all are zero)."""
    flat = base.ravel()
    pivot, top = 0, 0.0
    for start in range(0, flat.size, _STEP):
        part = np.abs(flat[start : start + _STEP])
        k = int(np.argmax(part))
        if part[k] > top:
            pivot, top = start + k, float(part[k])
    return pivot if top > 0 else None


def _multiple(a: np.ndarray, base: np.ndarray, pivot: int) -> float | None:
    """The ``r`` with ``a = r * base`` to 1e-12 relative, or None; ``pivot`` is the entry of
    largest magnitude of ``a`` or of ``base`` (:func:`_pivot`), nonzero in both if either is a
    nonzero multiple of the other."""
    flat, other = base.ravel(), a.ravel()
    top, bottom = float(other[pivot]), float(flat[pivot])
    if bottom == 0.0:  # not a multiple (no division: a warning here would depend on the data)
        return None
    ratio = top / bottom
    if not np.isfinite(ratio):
        return None
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow only means no match
        for start in range(0, flat.size, _STEP):
            if not _close(other[start : start + _STEP], ratio * flat[start : start + _STEP]):
                return None
    return ratio


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    """``np.allclose(a, b, rtol=1e-12, atol=0)`` for a finite ``a``, in fewer passes: every
    ``|a - b| <= 1e-12 |b|``, and ``b`` finite (an infinite ``b`` is close to no finite
    ``a``, where the inequality alone would hold)."""
    if not np.all(np.isfinite(b)):
        return False
    return bool(np.all(np.abs(a - b) <= 1e-12 * np.abs(b)))


@dataclass(frozen=True, slots=True)
class ExtensionPieces:
    """The Lipschitz extension of a piecewise-linear loss whose pieces share one direction per
    example (hinge, absolute, pinball, epsilon-insensitive: one term, one element per example).

    Per example the loss is ``h_i(u_i^T w)`` along the unit direction ``u_i``, with ``h_i`` the
    maximum of the lines ``sigma_ij s + beta_ij``. Over all of ``R^d`` the copy ``y`` of the
    extension ``min_y f(y) + C ||w - y||`` only moves along ``u_i``, so that extension is the
    one-dimensional infimal convolution ``h_i [] C |.|``: the same maximum with every slope
    clipped to ``[-C, C]``, a piece steeper than ``C`` replaced by its tangent line of slope
    ``C`` (``C s - h_i^*(C)``, which touches ``h_i`` at ``t_hi``; likewise ``-C`` at ``t_lo``).
    That is again a maximum of affine pieces sharing ``u_i`` (``model``), solved by
    :func:`arrowhead_ipm` at the cost of the plain loss.

    The extension the mechanisms certify keeps its copies in the domain W (paper 000, eq. (5)),
    which can only be larger; :meth:`copies` gives the exact copies ``y_i = w + (s_i - u_i^T
    w) u_i`` with ``s_i`` clipped to ``[t_lo, t_hi]`` and multipliers of the declaration's own
    pieces at ``y_i`` (the pair of pieces with the target slope and the least deficiency at
    ``s_i``), so dpcvx's certificate of ``F_C`` is tight whenever those copies lie in W, and
    merely loose (never wrong) otherwise."""

    model: PiecewiseModel
    source: PiecewiseModel  # the declaration's own model
    C: float
    u: np.ndarray  # (N, d) unit directions (zero rows for examples constant in w)
    sigma: np.ndarray  # (N, m) the declaration's slopes along u
    beta: np.ndarray  # (N, m) and intercepts, in units of the example's loss
    t_lo: np.ndarray  # (N,) where h_i's slope crosses -C (-inf where it never does)
    t_hi: np.ndarray  # (N,) where it crosses C (+inf where it never does)
    weight: float  # the term's weight (c = weight / n)
    #: (N,) each row's least and greatest slope, and the rows whose direction is not zero
    #: (computed here when not given; every round reads them)
    lowest: np.ndarray | None = None
    highest: np.ndarray | None = None
    moving: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.lowest is None:
            object.__setattr__(self, "lowest", self.sigma.min(axis=1))
        if self.highest is None:
            object.__setattr__(self, "highest", self.sigma.max(axis=1))
        if self.moving is None:
            object.__setattr__(self, "moving", np.any(self.u != 0, axis=1))

    def copies(
        self, w: np.ndarray, mus: list[np.ndarray]
    ) -> tuple[np.ndarray, list[list[np.ndarray | None] | None]]:
        """The copies ``Y`` (rows ``y_i``, not yet made feasible) and the certificate's
        multipliers (as :meth:`PiecewiseModel.multipliers` of the declaration's model) for the
        extension at ``w``, from the method's multipliers ``mus`` of :attr:`model`."""
        Y, s_star, gamma = self._relaxed(w, mus)
        weights = _pair_weights(self.sigma, self.beta, gamma, s_star)
        return Y, self.source.multipliers([weights * self.model.terms[0].c])

    def _relaxed(
        self, w: np.ndarray, mus: list[np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The copies over ``R^d``, their positions ``s_i`` along ``u_i`` and the slopes
        ``gamma_i`` of ``h_i`` there that the method's multipliers give."""
        (term,) = self.model.terms
        tau = self.u @ w
        s_star = np.clip(tau, self.t_lo, self.t_hi)
        Y = (s_star - tau)[:, None] * self.u
        Y += w  # one array of the data's size, not two
        assert term.row_coefs is not None
        slopes = term.row_coefs * self.weight  # the extension's slopes along u
        # the slope the method's multipliers give each example (a copy that moved has slope
        # +-C there; near a kink the method's own split is kept: both are subgradients of the
        # extension at w, and the certificate charges the difference, (C - |gamma|) |w - y_i|)
        gamma = _row_dot(mus[0] / term.c, slopes)
        lo, hi = self.lowest, self.highest
        assert lo is not None and hi is not None
        gamma = np.clip(gamma, np.maximum(lo, -self.C), np.minimum(hi, self.C))
        return Y, s_star, gamma

    def copies_in(
        self,
        w: np.ndarray,
        mus: list[np.ndarray],
        region: BallRegion | BoxRegion,
        extra: np.ndarray | None = None,
        own: np.ndarray | None = None,
        solved: tuple[np.ndarray, np.ndarray] | None = None,
        near: float = 0.0,
        left: np.ndarray | None = None,
        exact_own: bool = False,
        weights: np.ndarray | None = None,
    ) -> BallCopies | None:
        """:meth:`copies` for copies that must stay in the domain W, a ball or a box
        (``region``): the examples whose copy over ``R^d`` leaves it get their exact copy in W
        (:func:`~dpcvx.certification.ball.ball_extension`,
        :func:`~dpcvx.certification.box.box_extension`), the dual ``g_i`` of
        ``||w - y_i||`` and the multipliers of their pieces at it, plus a second-order model of
        their extensions at ``w`` for the next solve. The examples ``extra`` (taken out of the
        last solve, so ``mus`` says nothing of them) and ``own`` get their exact copies too,
        outside the model. ``solved``: the examples the last solve gave pieces of their own
        and those pieces' slopes (:meth:`boundary_pieces`), whose multipliers then give the
        slopes of those whose copy is at ``w``.

        The examples of ``own`` and those that would join the model (those of ``left`` only,
        if given) whose copy lies within ``near`` times the region's scale of ``w`` (at its
        extension's kink, where no quadratic model holds) are the next solve's examples with
        pieces of their own (:attr:`BallCopies.own`; the latter are taken out of the model).
        None when every copy lies in W and there is no ``extra`` or ``own`` (:meth:`copies` is
        then exact). ``exact_own``: the slopes of the examples whose copy is ``w`` itself (of
        ``solved``, and relaxed) clipped to the loss's own at ``w`` (the pieces active there to
        :data:`KINK` of its scale) rather than the method's split on their pieces: at a point
        other than the last solve's, or for balanced duals. ``weights`` (per example): the
        model's weights of the examples (a tilted mean's) instead of ``1/n`` each (see
        :func:`~dpcvx.certification.ball.rows_of`)."""
        Y, s_star, gamma = self._relaxed(w, mus)
        if exact_own:
            # away from the last solve's point its multipliers say little: where the relaxed
            # copy is w itself, the slope is the loss's own there (to KINK), within +-C
            tau = self.u @ w
            still = np.flatnonzero(s_star == tau)
            line = Pieces1D(self.sigma[still], self.beta[still])
            lo, hi = line.subdifferential(tau[still], KINK)
            lo, hi = np.maximum(lo, -self.C), np.minimum(hi, self.C)
            fits = lo <= hi
            gamma[still[fits]] = np.clip(gamma[still[fits]], lo[fits], hi[fits])
        assert self.moving is not None
        leaves = self.moving & region.outside(Y)
        own = np.zeros(0, int) if own is None else np.asarray(own, int)
        leaves[own] = False
        rows = np.flatnonzero(leaves)
        others = np.zeros(0, int) if extra is None else np.asarray(extra, int)
        others = others[~leaves[others]]
        exact = np.union1d(others, own)
        if rows.size == 0 and exact.size == 0:
            return None
        before = gamma[rows, None] * self.u[rows]
        slopes = np.full(Y.shape, np.nan)
        part = np.concatenate([rows, exact])
        n: float | np.ndarray = self.model.n
        if weights is not None:
            with np.errstate(divide="ignore", over="ignore"):
                n = 1.0 / np.asarray(weights, float)[part]
        # one call for both (each copy is its own problem); the model is of the examples of
        # rows only, less, with near, those whose copy lies within reach of w (of left only)
        reach = near * region.scale
        exact_at = np.arange(part.size) >= rows.size
        candidate = np.zeros(part.size, bool)
        if near > 0:
            candidate[: rows.size] = True if left is None else np.isin(rows, left)
        back = np.zeros(part.size, bool)

        def leave_out(Yc: np.ndarray, span: slice) -> np.ndarray:
            back[span] = candidate[span] & (row_norms(Yc - w) <= reach)
            return back[span] | exact_at[span]

        line = Pieces1D(self.sigma[part], self.beta[part])
        t, Yr, g, theta, quad = region.extension(line, self.u[part], w, self.C, n, leave_out)
        Y[part] = Yr
        s_star[part] = t
        gamma[part] = theta
        slopes[part] = g
        if near > 0:
            own = own[row_norms(Y[own] - w) <= reach]
            taken = back[: rows.size]
            if taken.any():  # out of the model, into pieces of their own
                part = rows[taken]
                rows, before = rows[~taken], before[~taken]
                own = np.union1d(own, part)
                if extra is not None:  # modelled by the last solve: exact slopes here
                    others = np.union1d(others, np.intersect1d(part, extra))
        if solved is not None and solved[0].size:
            # an example solved with pieces of its own whose copy is at w: the slope its
            # multipliers give (at a kink, the method's split, which the rest of the solve
            # balances; within the slopes' range, any mix of the pieces is a valid minorant,
            # charged its deficiency at w, which the method's tolerance keeps small)
            done, sigma = solved
            here = np.all(Y[done] == w, axis=1)
            at_w = done[here]
            slope = np.einsum("km,km->k", mus[0][at_w] / self.model.terms[0].c, sigma[here])
            assert self.lowest is not None and self.highest is not None
            slope = np.clip(slope, self.lowest[at_w], self.highest[at_w])
            if exact_own:
                line = Pieces1D(self.sigma[at_w], self.beta[at_w])
                slope = np.clip(slope, *line.subdifferential(self.u[at_w] @ w, KINK))
            # the dual with the least of W's normal that brings it into the C-ball (the solve
            # put W's normal into its own multipliers; more of it here pushes past that)
            gamma[at_w] = slope
            slopes[at_w] = dual_at_w(region, self.u[at_w], w, slope, self.C)
        pair = _pair_weights(self.sigma, self.beta, gamma, s_star)
        thetas = self.source.multipliers([pair * self.model.terms[0].c])
        return BallCopies(Y, thetas, slopes, rows, quad, before, others, own)

    def boundary_pieces(
        self, rows: np.ndarray, w: np.ndarray, region: BallRegion | BoxRegion
    ) -> tuple[np.ndarray, np.ndarray]:
        """The pieces (slopes and intercepts along ``u``, in the loss's units) of the
        extension near ``w`` on W's boundary, for the examples ``rows`` whose copy is at
        ``w``. With ``P`` the part of ``u`` W's normal cone at ``w`` can cancel from
        ``theta u`` (:meth:`BallRegion.cancellable
        <dpcvx.certification.ball.BallRegion.cancellable>`; along the sphere's normal ``e``
        for a ball, ``|P| = |u^T e|`` where ``theta u^T e < 0``), the dual ``theta u + v`` of
        the copy's distance fits in the C-ball for some ``v`` in that cone exactly when
        ``|theta| <= C / sqrt(1 - |P|^2)``: the extension there is ``h`` with its slopes
        clipped to those bounds on each side (:func:`_clipped_pieces`). Off the boundary
        ``P`` is zero: the relaxed pieces."""
        sigma, beta = self.sigma[rows], self.beta[rows]
        u = self.u[rows]
        # past the steepest slope no bound clips: cap it there (1 - |P|^2 may round to zero)
        cap = np.abs(sigma).max(axis=1) + self.C
        bounds = []
        for positive in (False, True):
            P = region.cancellable(u, w, positive)
            room = np.sqrt(np.maximum(1.0 - np.einsum("kd,kd->k", P, P), 0.0))
            bounds.append(
                np.where(room * cap > self.C, self.C / np.where(room > 0, room, 1.0), cap)
            )
        new_sigma, new_beta, _, _ = _clipped_pieces(sigma, beta, bounds[0], bounds[1])
        # a row whose tangent lines did not come out finite keeps its relaxed pieces
        lost = ~np.all(np.isfinite(new_beta), axis=1)
        if lost.any():
            (term,) = self.model.terms
            assert term.row_coefs is not None
            kept = rows[lost]
            new_sigma[lost] = term.row_coefs[kept] * self.weight
            new_beta[lost] = np.stack([bj[kept] for bj in term.b], axis=1) * self.weight
        return new_sigma, new_beta

    def kink_range(
        self, w: np.ndarray, rows: np.ndarray, region: BallRegion | BoxRegion, near: float = KINK
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per example of ``rows`` (copies at ``w``), the slopes ``gamma`` along ``u`` that are
        both the loss's own at ``w`` (its pieces active there to ``near`` of its scale)
        and a dual that fits in the C-ball once W's normal cone at ``w`` cancels what it can
        of ``gamma u`` (``|gamma| <= C / sqrt(1 - |P|^2)``, as :meth:`boundary_pieces`): the
        least and the largest. Empty where ``lo > hi``."""
        u = self.u[rows]
        lo, hi = Pieces1D(self.sigma[rows], self.beta[rows]).subdifferential(u @ w, near)
        for positive in (False, True):
            P = region.cancellable(u, w, positive)
            room = np.sqrt(np.maximum(1.0 - np.einsum("kd,kd->k", P, P), 0.0))
            with np.errstate(divide="ignore"):  # within balanced_duals' margin of the ball
                reach = np.where(room > 0, self.C * (1 - 128 * _EPS) / room, np.inf)
            if positive:
                hi = np.minimum(hi, reach)
            else:
                lo = np.maximum(lo, -reach)
        return lo, hi

    def with_slopes(self, thetas: list, w: np.ndarray, rows: np.ndarray, gamma: np.ndarray):
        """``thetas`` (as :meth:`copies` gives them) with the multipliers of the examples
        ``rows`` (copies at ``w``) set to the pair of their pieces with slope ``gamma`` along
        ``u`` and the least deficiency at ``w``."""
        weights = np.zeros(self.sigma.shape)
        weights[rows] = _pair_weights(self.sigma[rows], self.beta[rows], gamma, self.u[rows] @ w)
        fresh = self.source.multipliers([weights * self.model.terms[0].c])
        out: list = []
        for old, new in zip(thetas, fresh):
            if old is None or new is None:
                out.append(old)
                continue
            args = []
            for a_old, a_new in zip(old, new):
                if a_old is None or a_new is None:
                    args.append(a_old)
                    continue
                a = np.array(a_old, float, copy=True)
                a[rows] = a_new[rows]
                args.append(a)
            out.append(args)
        return out

    def own_without(self, rows: np.ndarray) -> PiecewiseModel:
        """The declaration's own model (:attr:`source`) with the examples ``rows`` taken out
        (their pieces zero): the examples a joint program gives copies of
        (:class:`~dpcvx.certification.copy_blocks.CopyBlocks`) leave it."""
        (term,) = self.source.terms
        coefs = np.tile(np.asarray(term.coefs, float), (self.source.n, 1))
        coefs[rows] = 0.0
        b = []
        for bj in term.b:
            bj = bj.copy()
            bj[rows] = 0.0
            b.append(bj)
        out = dataclasses.replace(term, row_coefs=coefs, b=tuple(b))
        return self.source.with_terms((out,))

    def without(
        self, rows: np.ndarray, own: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    ) -> PiecewiseModel:
        """:attr:`model` with the examples ``rows`` taken out (their pieces zero) and, with
        ``own = (examples, slopes, intercepts)``, those examples given those pieces
        (:meth:`boundary_pieces`)."""
        (term,) = self.model.terms
        assert term.row_coefs is not None
        coefs = term.row_coefs.copy()
        coefs[rows] = 0.0
        if own is not None:
            coefs[own[0]] = own[1] / self.weight
        b = []
        for j, bj in enumerate(term.b):
            bj = bj.copy()
            bj[rows] = 0.0
            if own is not None:
                bj[own[0]] = own[2][:, j] / self.weight
            b.append(bj)
        out = dataclasses.replace(term, row_coefs=coefs, b=tuple(b))
        return self.model.with_terms((out,))


def _conjugate(sigma: np.ndarray, beta: np.ndarray, slope: np.ndarray) -> np.ndarray:
    """Per row, ``h^*(slope)`` for ``h = max_j (sigma_j s + beta_j)`` (``slope`` within the
    slopes' range): the least ``-(lam beta_j + (1 - lam) beta_l)`` over the pairs of pieces
    with ``lam sigma_j + (1 - lam) sigma_l = slope``."""
    N, m = sigma.shape
    best = np.full(N, np.inf)
    for j in range(m):
        for k in range(m):
            sj, sk = sigma[:, j], sigma[:, k]
            ok = (sj <= slope) & (slope <= sk)
            width = sk - sj
            lam = np.where(width > 0, (sk - slope) / np.where(width > 0, width, 1.0), 1.0)
            ok &= (width > 0) | (sj == slope)
            val = -(lam * beta[:, j] + (1 - lam) * beta[:, k])
            best = np.where(ok & (val < best), val, best)
    return best


_EPS = float(np.finfo(float).eps)


def _pair_weights(
    sigma: np.ndarray, beta: np.ndarray, gamma: np.ndarray, s: np.ndarray
) -> np.ndarray:
    """``(N, m)`` simplex weights on the pieces with slope ``gamma`` whose combination is
    closest to ``h`` at ``s`` (the least deficiency ``h(s) - sum_j w_j (sigma_j s + beta_j)``;
    a vertex of that linear program is a pair). Over chunks of rows (each row is its own
    choice, :func:`~dpcvx.certification._rows.row_chunks`): the loop's arrays stay in the
    processor's cache."""
    spans = list(row_chunks(*sigma.shape))
    if len(spans) == 1:
        return _pair_weights_rows(sigma, beta, gamma, s)
    out = np.empty(sigma.shape)
    for a, b in spans:
        out[a:b] = _pair_weights_rows(sigma[a:b], beta[a:b], gamma[a:b], s[a:b])
    return out


def _pair_weights_rows(
    sigma: np.ndarray, beta: np.ndarray, gamma: np.ndarray, s: np.ndarray
) -> np.ndarray:
    """:func:`_pair_weights` on all the rows given at once (by columns: see :func:`_rows`)."""
    N, m = sigma.shape
    values = [sigma[:, j] * s + beta[:, j] for j in range(m)]
    h = values[0].copy()
    for v in values[1:]:
        np.maximum(h, v, out=h)
    best = np.full(N, np.inf)
    out = np.zeros((N, m))
    for j in range(m):
        for k in range(m):
            sj, sk = sigma[:, j], sigma[:, k]
            width = sk - sj
            ok = (sj <= gamma) & (gamma <= sk) & ((width > 0) | (sj == gamma))
            lam = np.where(width > 0, (sk - gamma) / np.where(width > 0, width, 1.0), 1.0)
            lam = np.clip(lam, 0.0, 1.0)
            line = lam * values[j] + (1 - lam) * values[k]
            deficiency = h - line
            take = ok & (deficiency < best)
            if not take.any():
                continue
            best = np.where(take, deficiency, best)
            # the pair's weights (the sum where j = k), every other piece's zero
            for col in range(m):
                weight = (lam if col == j else 0.0) + (1 - lam if col == k else 0.0)
                np.copyto(out[:, col], weight, where=take)
    # a row with no admissible pair (not reached: gamma lies in the slopes' range) keeps the
    # piece active at s, whose weight alone is a valid minorant
    lost = ~np.isfinite(best)
    if lost.any():
        top = np.argmax(sigma[lost] * s[lost, None] + beta[lost], axis=1)
        out[lost] = 0.0
        out[np.flatnonzero(lost), top] = 1.0
    return out


#: the relaxed extensions built so far, per model and ``C`` (a block's solve asks twice: once
#: to choose its rung, once to run it), each without its ``source``: that is the model, the
#: key, which a value must not hold (the entry, and the data it holds, would never go)
_EXTENSIONS: weakref.WeakKeyDictionary[PiecewiseModel, dict[float, dict[str, Any] | None]] = (
    weakref.WeakKeyDictionary()
)


def recentered_pieces(model: PiecewiseModel, center: np.ndarray, radius: float) -> PiecewiseModel:
    """The model the method runs on: ``model`` with the pieces of every element whose maximum
    is one affine piece on the whole ball ``B(center, radius)`` that holds the domain, and
    that lies over ``RECENTER_RATIO`` times its spread from it, moved next to it (the winner
    just above the constant pieces and zero, the others just below it; a piece that loses
    far below another is moved up to just below it), as the conic program's are
    (:func:`dpcvx.certification._moves.term_targets`).

    Each moved maximum changes by a constant on the ball, so the minimizer and the
    multipliers are the same, but the values are of order the spread instead of a label of
    1e17, whose rounding (16 there) the method's steps and stopping rule could not resolve:
    an absolute loss with such a label stalled at a gap of 5e-3, on the extension too. Only
    the method's problem changes: the certificate evaluates the user's loss."""
    center = np.asarray(center, float)
    near = float(np.linalg.norm(center)) <= RECENTER_RATIO * radius
    terms = []
    changed = False
    for term in model.terms:
        # |v| <= |b| + ||a|| ||center||: no element is far where every offset is small and
        # the center near (one pass over the offsets: the common case)
        if near and not any(np.any(np.abs(bj) > RECENTER_RATIO) for bj in term.b):
            terms.append(term)
            continue
        jc, spread = _piece_ranges(term, center, radius)
        V = jc + np.stack(term.b, axis=1)
        movable = np.array([A is not None for A in term.A])
        targets = term_targets("pieces", V, spread, movable)
        if targets is None:
            terms.append(term)
            continue
        b = tuple(
            moved_offsets(bj, bj, jc[:, j], target)
            for j, (bj, target) in enumerate(zip(term.b, targets))
        )
        terms.append(dataclasses.replace(term, b=b))
        changed = True
    return model.with_terms(tuple(terms)) if changed else model


def _piece_ranges(term: _Term, center: np.ndarray, radius: float) -> tuple[np.ndarray, np.ndarray]:
    """``(N, m)`` each: every piece's ``a_j^T center`` and ``||a_j|| radius`` (zero for the
    pieces constant in ``w``)."""
    live = np.array([A is not None for A in term.A], float)
    if term.base is not None:
        v = term.base @ center
        norms = row_norms(term.base) * radius
        coefs = term.row_coefs if term.row_coefs is not None else np.asarray(term.coefs)[None, :]
        coefs = coefs * live
        return coefs * v[:, None], np.abs(coefs) * norms[:, None]
    rows = term.b[0].size
    jc = np.zeros((rows, len(term.A)))
    spread = np.zeros((rows, len(term.A)))
    for j, A in enumerate(term.A):
        if A is not None:
            jc[:, j] = A @ center
            spread[:, j] = row_norms(A) * radius
    return jc, spread


def extension_pieces(model: PiecewiseModel, C: float) -> ExtensionPieces | None:
    """The relaxed extension of ``model`` at ``C`` (see :class:`ExtensionPieces`), or None;
    computed once per model and ``C`` (see :func:`_extension_pieces`)."""
    known = _EXTENSIONS.setdefault(model, {})
    key = float(C)
    if key not in known:
        pieces = _extension_pieces(model, key)
        known[key] = None if pieces is None else _detached(pieces)
    parts = known[key]
    return None if parts is None else ExtensionPieces(source=model, **parts)


def _detached(pieces: ExtensionPieces) -> dict[str, Any]:
    """The fields of ``pieces`` but its ``source``."""
    names = [f.name for f in dataclasses.fields(pieces) if f.name != "source"]
    return {name: getattr(pieces, name) for name in names}


def _clipped_pieces(
    sigma: np.ndarray, beta: np.ndarray, below: np.ndarray, above: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per row, the pieces of ``h [] c |.|`` with ``c`` ``below`` for negative slopes and
    ``above`` for positive ones (each row's slopes reach into ``[-below, above]``): every slope
    clipped, a steeper piece replaced by its tangent line of the bound's slope, and where
    those touch ``h`` (``t_lo``, ``t_hi``; infinite where no piece is steeper).

    The steeper pieces' maximum minus the others' is increasing in ``s`` (decreasing, below),
    so it crosses zero once, at ``t_hi = max_j min_k`` of the points where a piece ``j`` within
    the bound meets a steeper piece ``k`` (``t_lo = min_j max_k``, below): for every ``j`` some
    steeper piece is above it from there on. (The pair attaining ``h``'s conjugate at the
    bound's slope is not that point where a steeper piece exceeds the bound by a rounding:
    ``max(0, r - 0.1, -r - 0.1)`` on a row of norm ``1 + 2e-16`` with ``C = 1`` had ``t_hi``
    at ``-1`` or at ``-0.9`` by the order of its pieces, and the arrowhead rung's certificate
    missed by 0.002 in one order.)"""
    N = sigma.shape[0]
    new_beta = beta.copy()
    t_hi = np.full(N, np.inf)
    t_lo = np.full(N, -np.inf)
    for upper, side, steep, touch in (
        (True, above, sigma > above[:, None], t_hi),
        (False, -below, sigma < -below[:, None], t_lo),
    ):
        mask = steep.any(axis=1)
        if not mask.any():
            continue
        conj = _conjugate(sigma, beta, side)
        s_, b_, k_steep = sigma[mask], beta[mask], steep[mask]
        # [row, j, k]: where pieces j and k meet (j within the bound, k steeper)
        with np.errstate(divide="ignore", invalid="ignore"):
            meet = (b_[:, :, None] - b_[:, None, :]) / (s_[:, None, :] - s_[:, :, None])
        pairs = ~k_steep[:, :, None] & k_steep[:, None, :]
        if upper:
            first = np.where(pairs, meet, np.inf).min(axis=2)
            touch[mask] = np.where(k_steep, -np.inf, first).max(axis=1)
        else:
            last = np.where(pairs, meet, -np.inf).max(axis=2)
            touch[mask] = np.where(k_steep, np.inf, last).min(axis=1)
        new_beta = np.where(steep, -conj[:, None], new_beta)
    new_sigma = np.clip(sigma, -below[:, None], above[:, None])
    return new_sigma, new_beta, t_lo, t_hi


def _extension_pieces(model: PiecewiseModel, C: float) -> ExtensionPieces | None:
    """The relaxed extension of ``model`` at ``C`` (see :class:`ExtensionPieces`), or None
    when the loss is not one term of pieces sharing a direction with one element per example,
    or when its pieces' slopes along that direction all have one sign (an example with a
    long enough row then has every slope beyond ``C`` on one side, and the relaxation is
    unbounded below there)."""
    if not model.whole or len(model.terms) != 1 or not C > 0:
        return None
    (term,) = model.terms
    if term.base is None or term.row_coefs is not None or term.b[0].size != model.n:
        return None
    if term.shared:  # (one example's elements, even where they number n)
        return None
    coefs = np.asarray(term.coefs, float)
    if coefs.min() > 0 or coefs.max() < 0:
        # every piece rises (or falls) along the direction: an example whose row is long
        # enough has every slope past C on one side, its relaxation unbounded below. Decided
        # from the loss's form, never from which examples are that long (``cp.pos(x @ w) +
        # x @ w`` released on rows of norm one and aborted with one row of norm 8 where its
        # conic program was too large to stamp)
        return None
    weight = term.c * model.n
    norms = np.linalg.norm(term.base, axis=1)
    u = term.base / np.where(norms > 0, norms, 1.0)[:, None]
    sigma = weight * norms[:, None] * coefs[None, :]
    beta = weight * np.stack(term.b, axis=1)
    if not (np.all(np.isfinite(sigma)) and np.all(np.isfinite(beta))):
        return None
    lo, hi = sigma.min(axis=1), sigma.max(axis=1)
    if np.any(lo > C) or np.any(hi < -C):
        return None
    bound = np.full(model.n, C)
    new_sigma, new_beta, t_lo, t_hi = _clipped_pieces(sigma, beta, bound, bound)
    if not np.all(np.isfinite(new_beta)):
        return None
    m = sigma.shape[1]
    clipped = _Term(
        term.kind,
        term.c,
        (u,) * m,
        tuple(new_beta[:, j] / weight for j in range(m)),
        term.shape,
        u,
        term.coefs,
        new_sigma / weight,
        term.merged,
    )
    relaxed = model.with_terms((clipped,))
    return ExtensionPieces(
        model=relaxed,
        source=model,
        C=float(C),
        u=u,
        sigma=sigma,
        beta=beta,
        t_lo=t_lo,
        t_hi=t_hi,
        weight=weight,
        lowest=lo,
        highest=hi,
        moving=np.any(u != 0, axis=1),
    )


class Bounds:
    """The domain's constraints ``g(w) <= 0`` for :func:`arrowhead_ipm`, an intersection of
    l2 balls (``g = (||w - c||^2 - R^2) / (2 R)``, one constraint each) and boxes (``lo - w``
    and ``w - hi``, ``2 d`` constraints): each adds a rank-one or diagonal term to the Schur
    complement. ``inner`` is a point strictly inside all of them (the start of the method
    when there are several)."""

    def __init__(self, parts: list[tuple[str, np.ndarray, Any]], inner: np.ndarray) -> None:
        for kind, _, _ in parts:
            if kind not in ("ball", "box"):
                raise ValueError(kind)
        self.parts = [
            (kind, np.asarray(a, float), float(b) if kind == "ball" else np.asarray(b, float))
            for kind, a, b in parts
        ]
        self.inner = np.asarray(inner, float)

    def _sizes(self, d: int) -> list[int]:
        return [1 if kind == "ball" else 2 * d for kind, _, _ in self.parts]

    def g(self, w: np.ndarray) -> np.ndarray:
        out = []
        for kind, a, b in self.parts:
            if kind == "ball":
                u = w - a
                out.append(np.array([(float(u @ u) - b * b) / (2 * b)]))
            else:
                out.append(np.concatenate([a - w, w - b]))
        return np.concatenate(out)

    def jac(self, w: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``G v`` for the Jacobian ``G`` of ``g`` at ``w``."""
        out = []
        for kind, a, b in self.parts:
            if kind == "ball":
                out.append(np.array([float((w - a) @ v) / b]))
            else:
                out.append(np.concatenate([-v, v]))
        return np.concatenate(out)

    def jac_t(self, w: np.ndarray, e: np.ndarray) -> np.ndarray:
        """``G^T e``."""
        d = w.size
        out = np.zeros(d)
        at = 0
        for (kind, a, b), size in zip(self.parts, self._sizes(d)):
            ek = e[at : at + size]
            at += size
            if kind == "ball":
                out += (w - a) * (float(ek[0]) / b)
            else:
                out += ek[d:] - ek[:d]
        return out

    def hessian(self, w: np.ndarray, nu: np.ndarray, s: np.ndarray) -> np.ndarray:
        """``sum_k nu_k grad^2 g_k + G^T diag(nu / s) G``."""
        d = w.size
        H = np.zeros((d, d))
        at = 0
        for (kind, a, b), size in zip(self.parts, self._sizes(d)):
            nk, sk = nu[at : at + size], s[at : at + size]
            at += size
            if kind == "ball":
                u = (w - a) / b
                H += (nk[0] / b) * np.eye(d) + (nk[0] / sk[0]) * np.outer(u, u)
            else:
                H[np.diag_indices(d)] += nk[:d] / sk[:d] + nk[d:] / sk[d:]
        return H

    def interior(self, w: np.ndarray) -> np.ndarray:
        """A point strictly inside, near ``w`` for a single ball or box."""
        if len(self.parts) != 1:
            return self.inner.copy()
        kind, a, b = self.parts[0]
        if kind == "ball":
            u = w - a
            nrm = float(np.linalg.norm(u))
            return a + u * min(1.0, 0.5 * b / nrm) if nrm > 0 else a.copy()
        width = b - a
        return np.clip(w, a + 0.05 * width, b - 0.05 * width)


@dataclass
class _State:
    w: np.ndarray
    t: list[np.ndarray]  # per term (N,)
    s: list[np.ndarray]  # per term (N, m)
    mu: list[np.ndarray]  # per term (N, m)
    # the domain's slacks and multipliers (empty without bounds)
    sd: np.ndarray
    nu: np.ndarray


def _by_rows(op: np.ufunc, A: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``op(A, v[:, None])`` for a tall ``(N, m)`` array, one column at a time (broadcasting
    over a trailing axis of two or three entries runs numpy's inner loop over those few
    entries: three to ten times slower than a column's loop over N)."""
    out = np.empty(A.shape)
    for j in range(A.shape[1]):
        op(A[:, j], v, out=out[:, j])
    return out


def _rows(A: np.ndarray) -> np.ndarray:
    """``A.sum(axis=1)`` for a tall ``(N, m)`` array with a few columns, by column additions
    (numpy's reduction along a short axis is an order of magnitude slower)."""
    out = A[:, 0].copy()
    for j in range(1, A.shape[1]):
        out += A[:, j]
    return out


def _row_dot(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``(A * B).sum(axis=1)`` for tall ``(N, m)`` arrays, by columns (an ``einsum`` over the
    short axis took five times as long at m = 2; see :func:`_rows`)."""
    out = A[:, 0] * B[:, 0]
    for j in range(1, A.shape[1]):
        out += A[:, j] * B[:, j]
    return out


def _row_max(A: np.ndarray) -> np.ndarray:
    """``A.max(axis=1)`` for a tall ``(N, m)`` array, by columns (see :func:`_rows`)."""
    out = A[:, 0].copy()
    for j in range(1, A.shape[1]):
        np.maximum(out, A[:, j], out=out)
    return out


def _cho_factor(H: np.ndarray) -> np.ndarray:
    """``scipy.linalg.cho_factor(H)[0]`` (upper factor, the other triangle left as is) by the
    same LAPACK call, without the wrapper's per-call overhead (it dominates at small ``d``):
    the same factor, the same errors (``ValueError`` on a non-finite matrix, ``LinAlgError``
    when it is not positive definite)."""
    from scipy.linalg.lapack import dpotrf

    if not np.all(np.isfinite(H)):
        raise ValueError("array must not contain infs or NaNs")
    c, info = dpotrf(H, lower=0, clean=0, overwrite_a=0)
    if info > 0:
        raise np.linalg.LinAlgError(f"{info}-th leading minor is not positive definite")
    if info < 0:  # pragma: no cover - the arguments are fixed here
        raise ValueError(f"illegal value in argument {-info} of POTRF")
    return c


def _cho_solve(c: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``scipy.linalg.cho_solve((c, False), b)`` by the same LAPACK call (see
    :func:`_cho_factor`)."""
    from scipy.linalg.lapack import dpotrs

    if not np.all(np.isfinite(b)):
        raise ValueError("array must not contain infs or NaNs")
    x, info = dpotrs(c, b, lower=0, overwrite_b=0)
    if info != 0:  # pragma: no cover - the arguments are fixed here
        raise ValueError(f"illegal value in argument {-info} of POTRS")
    return x


#: rows of one chunk of a term in :func:`arrowhead_ipm`
CHUNK_ROWS = 1 << 14


def _chunked(terms: tuple[_Term, ...]) -> tuple[list[_Term], list[int]]:
    """Every term cut into row chunks of :data:`CHUNK_ROWS` (views, no copy), and the index
    of the term each chunk comes from."""
    out: list[_Term] = []
    owners: list[int] = []
    for i, term in enumerate(terms):
        rows = term.b[0].size
        chunks = (
            [term]
            if rows <= CHUNK_ROWS
            else [_rows_of(term, slice(lo, lo + CHUNK_ROWS)) for lo in range(0, rows, CHUNK_ROWS)]
        )
        out.extend(chunks)
        owners.extend([i] * len(chunks))
    return out, owners


def _rows_of(term: _Term, rows: slice | np.ndarray) -> _Term:
    def cut(a):
        return None if a is None else a[rows]

    # the pieces that hold ``base`` itself hold its rows (one gather, not one per piece)
    base = cut(term.base)
    return dataclasses.replace(
        term,
        A=tuple(base if a is term.base else cut(a) for a in term.A),
        b=tuple(v[rows] for v in term.b),
        base=base,
        row_coefs=cut(term.row_coefs),
    )


def _joined(parts: list[np.ndarray], owners: list[int], count: int) -> list[np.ndarray]:
    """Per-chunk arrays put back together per term."""
    if len(parts) == count:
        return parts
    return [
        np.concatenate([p for p, o in zip(parts, owners) if o == i], axis=0) for i in range(count)
    ]


def arrowhead_ipm(
    model: PiecewiseModel,
    lam: float,
    w0: np.ndarray,
    start: np.ndarray,
    *,
    tol: float,
    max_iter: int = 80,
    bounds: Bounds | None = None,
    quad: tuple[np.ndarray, np.ndarray] | None = None,
    domain_out: list | None = None,
    blocks: CopyBlocks | PenaltyCones | None = None,
) -> tuple[np.ndarray, list[np.ndarray], int]:
    """Mehrotra's predictor-corrector on the quadratic program of the module docstring, from
    ``start``; stops when the complementarity and the residuals are below ``tol`` (relative
    to the scale of the problem) or after ``max_iter`` steps. Returns the point, the
    multipliers per term ``(N, m)`` and the number of steps. With ``bounds`` the domain's
    constraints are part of the program (the point may then sit on its boundary). ``quad``
    ``(Q, q)`` adds ``w^T Q w / 2 + q^T w`` to the objective (``Q`` positive semidefinite):
    it joins the Schur complement as it is. ``domain_out``, a list, receives the method's slack
    variables of the domain's constraints (``-g(w)`` up to its primal residual) and their
    multipliers, at the iterate whose point it returns (in the order of :meth:`Bounds.g`;
    empty arrays without ``bounds``). ``blocks`` adds the Lipschitz extension's copies of
    some examples, each a block of its own that couples to ``w`` only
    (:class:`~dpcvx.certification.copy_blocks.CopyBlocks`, built at ``start`` made interior:
    ``bounds.interior(start)``); each step eliminates them into the Schur complement. Norm
    penalties that read no data (:class:`~dpcvx.certification.penalty_cones.PenaltyCones`)
    are such blocks too.

    Division by zero and invalid operations raise no floating-point warning inside the
    method (a slack that underflows to zero, a non-finite iterate): the step-length rule
    skips the ``0 / 0`` of an entry that does not move, and a non-finite iterate ends the
    method, whose point only goes to the certificate.

    Inside a block (:func:`dpcvx._batching.block_scope`: a mechanism's block solves), a
    program of the common case goes to :func:`~dpcvx.certification.batched.batched_ipm`
    instead: the same steps, batched with other blocks' programs where several wait at once,
    each program's result the same whatever its company."""
    from dpcvx._batching import current
    from dpcvx.certification.batched import IpmRequest, batchable, batched_ipm  # (a cycle)

    scope = current()
    if scope is not None and max_iter >= 1 and batchable(model, quad, blocks):
        result = scope.gather(
            batched_ipm,
            IpmRequest(model, lam, np.asarray(w0, float), start, tol, max_iter, bounds),
        )
        if isinstance(result, Exception):  # this program's own failure, as if run alone
            raise result
        point, mus, steps, slacks = result
        if domain_out is not None:
            domain_out[:] = slacks
        return point, mus, steps
    with np.errstate(divide="ignore", invalid="ignore"):
        return _mehrotra(model, lam, w0, start, tol, max_iter, bounds, quad, domain_out, blocks)


#: :func:`screened_ipm`'s first trust radius where no earlier step gives one, as a fraction
#: of W's scale (the caller's choice; see :class:`~dpcvx.certification.solve._PiecesRounds`)
SCREEN_REACH = 1e-2
#: it solves at most this many times, the radius grown each time, before it gives up
SCREEN_TRIES = 3
#: and it gives up at once where more than this share of the elements would be kept
SCREEN_SHARE = 0.25


def screened_ipm(
    model: PiecewiseModel,
    lam: float,
    w0: np.ndarray,
    start: np.ndarray,
    *,
    tol: float,
    reach: float,
    bounds: Bounds | None = None,
    quad: tuple[np.ndarray, np.ndarray] | None = None,
    domain_out: list | None = None,
) -> tuple[np.ndarray, list[np.ndarray], int] | None:
    """:func:`arrowhead_ipm` on the elements near a kink at ``start``, every other element
    replaced by its piece active there; or None.

    An element whose active piece at ``start`` leads the next one by more than their slopes
    can close over a step of length ``reach`` (``||a_i|| max_j |r_ij - r_i*| reach``, with
    ``a_i`` the element's row of the term's matrix and ``r`` its multiples) keeps that piece
    near ``start``. With those elements replaced by their active pieces (a linear term, added
    to ``quad``'s), the program's objective is at most the whole one's everywhere (an affine
    piece is at most the maximum), and equal to it wherever those elements keep their pieces.
    So where they all keep them at the point the method returns, which they do whenever it
    lies within ``reach`` of ``start``, that point solves the whole program to the method's
    tolerance, and their multipliers are their active pieces' (a vertex of each simplex).
    Where one does not, the radius grows (to twice the larger of itself and the step) and
    the method solves again, at most :data:`SCREEN_TRIES` times.

    None where it still does not, where more than :data:`SCREEN_SHARE` of the elements would
    be kept, or where the model is not one term of multiples of one matrix per row (the
    relaxed extension's, :class:`ExtensionPieces`). The rounds of the extension in a ball or
    box re-solve a program close to the last one from its point (a few elements of hundreds
    of thousands switch pieces between rounds): the caller then solves the whole program.
    Whichever way it is solved, the point only goes to the certificate."""
    if len(model.terms) != 1 or not (reach > 0 and np.isfinite(reach)):
        return None
    (term,) = model.terms
    if term.base is None or term.row_coefs is None:
        return None
    R = term.row_coefs
    N, m = R.shape
    if N == 0 or m < 2:
        return None
    start = np.asarray(start, float)
    offset = np.stack(term.b, axis=1)
    idx = np.arange(N)

    def values(w: np.ndarray) -> np.ndarray:
        V = _by_rows(np.multiply, R, term.base @ w)
        V += offset
        return V

    V = values(start)
    if not np.all(np.isfinite(V)):
        return None
    top = np.argmax(V, axis=1)
    lead = V[idx, top]
    V[idx, top] = -np.inf
    margin = lead - np.max(V, axis=1)
    del V
    slope = R[idx, top]
    kappa = row_norms(term.base) * np.max(np.abs(R - slope[:, None]), axis=1)
    d = model.d
    Q, q = (np.zeros((d, d)), np.zeros(d)) if quad is None else quad
    steps = 0
    for _ in range(SCREEN_TRIES):
        near = margin < kappa * reach
        near[np.argmin(margin - kappa * reach)] = True  # at least one element: a program
        keep = np.flatnonzero(near)
        if keep.size > SCREEN_SHARE * N:
            return None
        linear = term.c * (term.base.T @ np.where(near, 0.0, slope))
        sub = model.with_terms((_rows_of(term, keep),))
        try:  # a failure here only sends the caller to the whole program
            x, mus, more = arrowhead_ipm(
                sub,
                lam,
                w0,
                start,
                tol=tol,
                bounds=bounds,
                quad=(Q, q + linear),
                domain_out=domain_out,
            )
        except (np.linalg.LinAlgError, ValueError, FloatingPointError):
            return None
        steps += int(more)
        if not np.all(np.isfinite(x)):
            return None
        Vx = values(x)
        held = Vx[idx, top] >= np.max(Vx, axis=1)
        del Vx
        if np.all(held | near):
            full = np.zeros((N, m))
            far = np.flatnonzero(~near)
            full[far, top[far]] = term.c
            full[keep] = mus[0]
            return x, [full], steps
        reach = 2.0 * max(reach, float(np.linalg.norm(x - start)))
    return None


def _mehrotra(
    model: PiecewiseModel,
    lam: float,
    w0: np.ndarray,
    start: np.ndarray,
    tol: float,
    max_iter: int,
    bounds: Bounds | None,
    quad: tuple[np.ndarray, np.ndarray] | None,
    domain_out: list | None = None,
    blocks: CopyBlocks | PenaltyCones | None = None,
) -> tuple[np.ndarray, list[np.ndarray], int]:
    """:func:`arrowhead_ipm`'s steps."""
    d = model.d
    w = np.array(start, float) if bounds is None else bounds.interior(np.array(start, float))
    empty = np.zeros(0)
    st = _State(w=w, t=[], s=[], mu=[], sd=empty, nu=empty)
    # every term in row chunks, each treated as a term of its own (the elements are
    # independent): a step's dozen passes over per-element arrays then run on short arrays
    # (measured 8-10% faster at n = 1e6, d = 20; alike for chunks of 2^12 to 2^15 rows)
    terms, owners = _chunked(model.terms)
    offsets = [np.stack(term.b, axis=1) for term in terms]
    for term, offset in zip(terms, offsets):
        V = term.apply(w) + offset
        top = _row_max(V)
        st.t.append(top + 1.0)
        st.s.append(top[:, None] + 1.0 - V)
        st.mu.append(np.full(V.shape, term.c / V.shape[1]))
    scale = 1.0 + sum(term.c * term.b[0].size for term in terms)
    if bounds is not None:
        st.sd = np.maximum(-bounds.g(w), 1e-8)
        st.nu = np.full(st.sd.size, max(lam, 1e-3))
    count = sum(s.size for s in st.s) + st.sd.size
    if blocks is not None:
        count += blocks.count
        scale += blocks.scale
    best: tuple[float, np.ndarray, list[np.ndarray], np.ndarray, np.ndarray] | None = None
    last_merit = np.inf
    stalled = 0
    steps = 0
    for steps in range(1, max_iter + 1):  # noqa: B007 - returned
        # residuals
        r_w = lam * (st.w - w0) + model.linear
        if quad is not None:
            r_w = r_w + quad[0] @ st.w + quad[1]
        r_t, r_p = [], []
        for term, offset, t, s, mu in zip(terms, offsets, st.t, st.s, st.mu):
            r_w = r_w + term.apply_t(mu)
            r_t.append(_rows(mu) - term.c)
            r = _by_rows(np.subtract, s, t)
            r += term.apply(st.w)
            r += offset
            r_p.append(r)
        r_d = empty
        if bounds is not None:
            r_w = r_w + bounds.jac_t(st.w, st.nu)
            r_d = bounds.g(st.w) + st.sd
        comp = sum(float(np.sum(mu * s)) for mu, s in zip(st.mu, st.s)) + float(st.nu @ st.sd)
        infeas = 0.0
        if blocks is not None:
            r_copies, comp_copies, infeas = blocks.residuals(st.w)
            r_w = r_w + r_copies
            comp += comp_copies
        infeas = max(
            infeas,
            float(np.linalg.norm(r_w)),
            # per element, its multipliers' sum less c: relative to the term's weight (a
            # shared term's c is its weight, the others' the weight over n)
            max(
                float(np.abs(r).max(initial=0.0)) * (1.0 if term.shared else model.n)
                for r, term in zip(r_t, terms)
            ),
            max(float(np.abs(r).max(initial=0.0)) for r in r_p),
            float(np.abs(r_d).max(initial=0.0)),
        )
        if not np.isfinite(comp + infeas):
            break
        # the best iterate so far is kept: near the limits of floating point the steps can
        # stall or drift, and then the method stops (after STALL steps that improve neither
        # on the best merit nor on the last step's) and returns the best one. A step that
        # improves on the last one is progress even above the best: the first steps of a
        # curved domain (a ball) can leave its linearization's residual above the start's
        # merit for several steps while it falls, and stopping there returned the start
        merit = comp / scale + infeas
        if best is None or merit < best[0]:
            stalled = 0
            best = (merit, st.w.copy(), [mu.copy() for mu in st.mu], st.sd.copy(), st.nu.copy())
            if blocks is not None:
                blocks.keep()  # the copies and duals of the iterate whose point is returned
        elif not merit < last_merit:
            stalled += 1
        last_merit = merit
        if (comp <= tol * scale and infeas <= tol) or stalled >= STALL:
            break
        # the Schur complement, formed once per step
        Ds = [mu / s for mu, s in zip(st.mu, st.s)]
        Dsums = [_rows(D) for D in Ds]
        H = lam * np.eye(d)
        if quad is not None:
            H += quad[0]
        for term, D in zip(terms, Ds):
            H += term.schur(D, d)
        if bounds is not None:
            H += bounds.hessian(st.w, st.nu, st.sd)
        try:
            if blocks is not None:
                H += blocks.schur(st.w)
            factor = _cho_factor(H)
        except (np.linalg.LinAlgError, ValueError):
            break
        mu_avg = comp / count

        # predictor
        system = (terms, st, Ds, Dsums, r_w, r_t, r_p, factor, bounds, r_d, blocks)
        slacks, mults = st.s + [st.sd], st.mu + [st.nu]
        rc_aff = [mu * s for mu, s in zip(mults, slacks)]
        rc_copies = None if blocks is None else blocks.affine()
        try:  # a copy's cones on their boundary to rounding end the method (no direction)
            _, aff = _direction(system, rc_aff, rc_copies)
        except _NoDirection:
            break
        a_aff = _max_step(slacks, mults, aff, blocks)
        comp_aff = sum(
            float(np.sum((mu + a_aff * dmu) * (s + a_aff * ds)))
            for (_, ds, dmu), s, mu in zip(aff, slacks, mults)
        )
        if blocks is not None:
            comp_aff += blocks.gap_at(a_aff, aff[-1])
        sigma = (comp_aff / comp) ** 3 if comp > 0 else 0.0
        if blocks is not None:  # many pairs cut the affine step: centre less (see SIGMA_COPIES)
            sigma = min(sigma, SIGMA_COPIES)
        # corrector: its residual overwrites the predictor's (in place, as the updates below:
        # per-element arrays are a tenth of the data each at d = 20, and a dozen are alive)
        r_c = rc_aff
        for rc, (_, ds, dmu) in zip(r_c, aff):
            rc += dmu * ds
            rc -= sigma * mu_avg
        if blocks is not None and rc_copies is not None:
            rc_copies = blocks.corrected(rc_copies, aff[-1], sigma * mu_avg)
        del aff
        try:
            dw, parts = _direction(system, r_c, rc_copies)
        except _NoDirection:
            break
        del r_c, rc_aff
        alpha = min(1.0, 0.99 * _max_step(slacks, mults, parts, blocks))
        st.w = st.w + alpha * dw
        for i, (dt, ds, dmu) in enumerate(parts[: len(st.s)]):
            st.t[i] += alpha * dt
            st.s[i] += alpha * ds
            st.mu[i] += alpha * dmu
            _onto_rows(st.mu[i], terms[i].c)
        _, dsd, dnu = parts[len(st.s)]
        st.sd = st.sd + alpha * dsd
        st.nu = st.nu + alpha * dnu
        if blocks is not None:
            blocks.update(alpha, parts[-1], st.w)
        del system, parts, Ds, r_p  # not alive while the next step's residuals are formed
    mus = st.mu if best is None else best[2]
    if domain_out is not None:
        domain_out[:] = [st.sd, st.nu] if best is None else [best[3], best[4]]
    return (st.w if best is None else best[1]), _joined(mus, owners, len(model.terms)), steps


def _onto_rows(mu: np.ndarray, c) -> None:
    """Each row of the multipliers ``mu`` (positive) scaled in place to sum to ``c``, the
    constraint a Newton step keeps only to its rounding. Near the end of a solve the
    directions' rounding, of the order of the largest slack's, is multiplied by ``mu / s``
    where a slack is near zero: in the relaxed extension of a hinge at n = 1e6 the rows' sums
    drifted by 2e-10 of ``c`` from the ninth step on (the residual counts them ``n`` times),
    and the method stalled above its tolerance until it gave up, seven steps later, on the
    best iterate so far. The scaling moves each multiplier by that fraction of itself."""
    total = _rows(mu)
    scale = np.divide(c, total, out=np.ones_like(total), where=total > 0)
    for j in range(mu.shape[1]):
        mu[:, j] *= scale


class _NoDirection(ArithmeticError):
    """The copies' part of a Newton system is not finite: a cone and its multiplier sit on
    the cone's boundary to rounding, where the Jordan product has no inverse."""


def _direction(
    system: tuple, r_c: list[np.ndarray], rc_copies: tuple | None = None
) -> tuple[np.ndarray, list[tuple]]:
    """One Newton direction of the primal-dual system with complementarity residual ``r_c``:
    ``dw`` from the Schur complement, then every element's ``dt``, ``ds``, ``dmu``."""
    terms, st, Ds, Dsums, r_w, r_t, r_p, factor, bounds, r_d, blocks = system
    rhs = -r_w.copy()
    qs = []
    for term, s, D, total, rt, rp, rc in zip(terms, st.s, Ds, Dsums, r_t, r_p, r_c):
        g = D * rp
        g -= rc / s
        q = (_rows(g) + rt) / total
        g -= _by_rows(np.multiply, D, q)
        rhs -= term.apply_t(g)
        qs.append(q)
    rc_d = r_c[len(terms)]
    if bounds is not None:
        # g(w) + s = 0, nu s = target:  ds = -r_d - G dw,  dnu = (-rc - nu ds) / s
        rhs -= bounds.jac_t(st.w, (st.nu * r_d - rc_d) / st.sd)
    if blocks is not None:
        rhs += blocks.rhs(rc_copies)
        if not np.all(np.isfinite(rhs)):
            raise _NoDirection
    dw = _cho_solve(factor, rhs)
    out = []
    for term, s, D, total, rp, rc, q in zip(terms, st.s, Ds, Dsums, r_p, r_c, qs):
        Adw = term.apply(dw)
        dt = q + _rows(D * Adw) / total
        ds = _by_rows(np.subtract, rp, dt)
        np.negative(ds, out=ds)
        ds -= Adw
        del Adw
        dmu = D * ds
        dmu += rc / s
        np.negative(dmu, out=dmu)
        out.append((dt, ds, dmu))
    if bounds is not None:
        dsd = -r_d - bounds.jac(st.w, dw)
        out.append((None, dsd, (-rc_d - st.nu * dsd) / st.sd))
    else:
        out.append((None, st.sd, st.nu))  # empty
    if blocks is not None:
        out.append(blocks.back(dw, rc_copies))
    return dw, out


def _max_step(
    slacks: list[np.ndarray],
    mults: list[np.ndarray],
    parts: list[tuple],
    blocks: CopyBlocks | PenaltyCones | None = None,
) -> float:
    """The longest step in ``[0, 1]`` that keeps every slack and multiplier nonnegative
    (and the copies' slacks and multipliers in their cones)."""
    # min over dx < 0 of x / -dx, as -1 / min(dx / x) (x > 0): one division and one
    # reduction per array (masks and gathers cost several passes over n elements); fmin skips
    # the 0/0 of an entry at zero that does not move
    # (inside arrowhead_ipm's floating-point context: the 0 / 0 warns nothing)
    low = -1.0
    for (_, ds, dmu), s, mu in zip(parts, slacks, mults):
        for x, dx in ((s, ds), (mu, dmu)):
            if dx.size:
                low = min(low, float(np.fmin.reduce((dx / x).ravel())))
    if blocks is not None:
        low = min(low, blocks.max_step(parts[-1]))
    return 1.0 if not low < -1.0 else -1.0 / low


def _upper_gram(A: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``A^T diag(c) A`` for weights ``c >= 0``, of which the Cholesky factor of
    :func:`arrowhead_ipm` reads the upper triangle (``dpotrf`` with ``lower=0``): one
    symmetric rank-k update per row chunk, ``B^T @ B``, which numpy computes by its BLAS's
    ``syrk`` (not scipy's ``dsyrk``, whose second OpenBLAS contended with numpy's threads:
    see :func:`~dpcvx.modeling.smooth.gram`; the hinge loss at n = 1e5, d = 100 took 2.08 s,
    0.67 s now). Weights that are not all nonnegative (NaN included) take the whole product."""
    if not np.all(c >= 0):
        return gram(A, c)
    n, d = A.shape
    H = np.zeros((d, d))
    step = max(1, _GRAM_ENTRIES // max(d, 1))
    for start in range(0, n, step):
        B = A[start : start + step] * np.sqrt(c[start : start + step])[:, None]
        H += B.T @ B  # (numpy's syrk: one array times its own transpose)
    return H


#: rows times columns of one chunk of :func:`_upper_gram`
_GRAM_ENTRIES = 1 << 18


def _pair_gram(
    Aj: np.ndarray | None, Ak: np.ndarray | None, weight: np.ndarray, d: int
) -> np.ndarray:
    """``(A_j - A_k)^T diag(weight) (A_j - A_k)`` (a piece constant in ``w`` has ``A = 0``)."""
    if Aj is None:
        return np.zeros((d, d)) if Ak is None else gram(Ak, weight)
    if Ak is None:
        return gram(Aj, weight)
    return gram(Aj, weight, minus=Ak)
