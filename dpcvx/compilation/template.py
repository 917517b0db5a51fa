"""Compile one example's loss once into a parametric conic block.

The per-example problem (DESIGN section 3) is, for the declared terms,
``min sum_t weight_t * psi_t(v_t) + affine(w) s.t. v_t == E_t(w; z)``: every structured term's
affine argument gets its own *split* variable ``v_t``, so that the solver's dual of the split
equality is that term's multiplier (used by the certificate). CVXPY canonicalizes this block once
into ``A(theta) u + s = b(theta), s in K`` with objective ``c(theta)^T u + c0(theta)``, where
``theta`` is the flat vector of derived data parameters; DPP guarantees the map is affine, and
dpcvx reads it off by probing CVXPY's parametric program at ``theta = 0`` and at each unit vector
(sparsity kept fixed with ``keep_zeros``), then checks affinity at a random point.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp
from cvxpy.atoms.elementwise.power import Power, PowerApprox
from cvxpy.atoms.pnorm import Pnorm, PnormApprox

from dpcvx.errors import ModelingError
from dpcvx.modeling._expressions import substitute
from dpcvx.modeling._structure import MONOTONE, Term
from dpcvx.modeling.declaration import Declaration

if TYPE_CHECKING:
    from cvxpy.reductions.dcp2cone.cone_matrix_stuffing import ConeDims, ParamConeProg

__all__ = [
    "CanonicalTemplate",
    "ConeLayout",
    "LazyTemplate",
    "Template",
    "canonical_template",
    "compile_template",
    "compile_domain",
    "finish_template",
    "localized_block",
    "with_extension",
]


@dataclass(frozen=True, slots=True)
class ConeLayout:
    """Row counts of one block, in the order zero, nonnegative, second-order, exponential."""

    zero: int
    nonneg: int
    soc: tuple[int, ...]
    exp: int  # number of 3-dimensional exponential cones

    @property
    def rows(self) -> int:
        return self.zero + self.nonneg + sum(self.soc) + 3 * self.exp


@dataclass(frozen=True, slots=True, kw_only=True)
class Template:
    """One example's conic block, affine in the flat data vector ``theta`` (length ``p``).

    Columns are the block's variables; ``w_cols[j]`` is the index in ``w`` of column ``j`` or -1
    for the block's own auxiliary columns. ``A_rows``/``A_cols`` give the fixed sparsity pattern
    and ``A_map`` (shape ``(p + 1, nnz)``) its values: ``values = [1, theta] @ A_map``. Likewise
    ``b_map`` (``(p + 1, rows)``), ``c_map`` (``(p + 1, cols)``) and ``c0_map`` (``(p + 1,)``).
    ``split_rows[t]`` lists, per argument of term ``t``, the block rows of its split equality
    (None for a constant argument), in the argument's flattened (Fortran) order.
    """

    cones: ConeLayout
    n_cols: int
    w_cols: np.ndarray
    A_rows: np.ndarray
    A_cols: np.ndarray
    A_map: np.ndarray
    b_map: np.ndarray
    c_map: np.ndarray
    c0_map: np.ndarray
    param_layout: tuple[tuple[int, int, tuple[int, ...]], ...]  # (param id, offset, shape)
    split_rows: tuple[tuple[np.ndarray | None, ...], ...]
    extension: float | None = None
    #: plain ERM whose loss has terms that read no data (``Declaration.shared_terms``): the
    #: block without them and their own block, which the conic program holds once instead of
    #: once per example (:func:`~dpcvx.compilation.stamp.stamp_parts`'s ``once``)
    held: tuple[Template, Template] | None = None
    #: Lipschitz extension only: block columns of y, and the rows of ``(t, w - y) in SOC``
    y_cols: np.ndarray | None = None
    soc_rows: np.ndarray | None = None
    #: Lipschitz extension only: the block column of ``t`` (objective ``C t``)
    t_col: int | None = None

    @property
    def n_aux(self) -> int:
        return int(np.sum(self.w_cols < 0))

    def theta(self, values: dict[int, np.ndarray], n: int) -> np.ndarray:
        """The ``(n, p + 1)`` matrix ``[1, theta_i]`` from per-example parameter values."""
        p = self.A_map.shape[0] - 1
        out = np.empty((n, p + 1))
        out[:, 0] = 1.0
        for pid, offset, shape in self.param_layout:
            size = int(np.prod(shape)) if shape else 1
            vals = np.asarray(values[pid], float).reshape((n,) + shape)
            # CVXPY flattens parameter values in Fortran order
            flat = vals.transpose((0,) + tuple(range(len(shape), 0, -1))).reshape(n, size)
            out[:, 1 + offset : 1 + offset + size] = flat
        return out


def _rebuild(term: Term, splits: list[cp.Variable | None]) -> cp.Expression:
    """The term written on its split variables."""
    args = [a if v is None else v for a, v in zip(term.args, splits)]
    if term.kind == "affine":
        return term.weight * cp.sum(term.args[0])
    if term.kind == "generic":
        return term.weight * term.expr
    if term.kind == "max_terms":
        subs = [
            a
            if part.kind == "affine"
            else part.weight * part.atom.copy([a] + list(part.atom.args[1:])) + b
            for part, a, b in zip(term.parts, args, term.offsets)
        ]
        return term.weight * _second_order(cp.maximum(*subs))
    if term.kind == "pieces":
        inner = cp.maximum(*args) if len(args) > 1 else args[0]
    elif term.kind == "pos_power":
        inner = cp.power(cp.maximum(*args, 0.0), term.param_value)
    elif term.kind == "pos_huber":
        inner = cp.huber(cp.maximum(*args, 0.0), term.param_value)
    elif term.kind == "norm2_power":
        inner = cp.power(cp.norm(args[0], 2), term.param_value)
    else:
        node = term.atom
        assert node is not None  # elementwise and vector kinds keep their atom
        inner = node.copy([args[0]] + list(node.args[1:]))
    return term.weight * (cp.sum(inner) if term.summed else inner)


def _second_order(expr: cp.Expression) -> cp.Expression:
    """``expr`` with every exact (power-cone) ``power``/``pnorm`` replaced by CVXPY's
    rational second-order-cone form. The solver then solves a problem whose exponents may be
    rounded to a nearby rational (CVXPY warns when they are); that only guides the solve: the
    certificate evaluates the user's own expression, with the exact exponent."""
    if not expr.args:
        return expr
    args = [_second_order(a) for a in expr.args]
    if type(expr) is Power:
        return PowerApprox(args[0], expr._p_orig, expr.max_denom)
    if type(expr) is Pnorm:
        p, axis, keepdims, max_denom = expr.get_data()
        return PnormApprox(args[0], p, axis, keepdims, max_denom)
    return expr.copy(args)


def _probe(
    pp: ParamConeProg, param_layout: tuple[tuple[int, int, tuple[int, ...]], ...], total: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, sp.csc_matrix]:
    """Values of the parametric program at theta = 0 and each unit vector."""

    def at(vec: np.ndarray) -> tuple[np.ndarray, float, sp.csc_matrix, np.ndarray]:
        values: dict[int, np.ndarray] = {}
        for pid, offset, shape in param_layout:
            size = int(np.prod(shape)) if shape else 1
            values[pid] = (
                vec[offset : offset + size].reshape(shape, order="F")
                if shape
                else np.asarray(vec[offset], float)
            )
        c, c0, A, b = pp.apply_parameters(values, keep_zeros=True)
        # CVXPY's parametric program reads ``A u + b in K``; solvers take ``b - A u in K``
        A = -sp.csc_matrix(A)
        return (
            np.asarray(c, float).reshape(-1),
            float(np.asarray(c0).reshape(())),
            A,
            np.asarray(b, float).reshape(-1),
        )

    base = at(np.zeros(total))
    c_rows = [base[0]]
    c0_rows = [base[1]]
    A_rows = [base[2].data.copy()]
    b_rows = [base[3]]
    pattern = (base[2].indices.copy(), base[2].indptr.copy())
    for k in range(total):
        e = np.zeros(total)
        e[k] = 1.0
        c, c0, A, b = at(e)
        if not (np.array_equal(A.indices, pattern[0]) and np.array_equal(A.indptr, pattern[1])):
            raise ModelingError(
                "Internal: CVXPY's compiled sparsity changed with the data; cannot stamp this loss."
            )  # pragma: no cover
        c_rows.append(c - base[0])
        c0_rows.append(c0 - base[1])
        A_rows.append(A.data - base[2].data)
        b_rows.append(b - base[3])
    # affinity check at a random point (DPP guarantees it; this guards dpcvx's own bookkeeping)
    rng = np.random.default_rng(0)
    v = rng.normal(size=total)
    c, c0, A, b = at(v)
    full = np.concatenate([[1.0], v])
    pred = full @ np.vstack(A_rows)
    if not np.allclose(pred, A.data, rtol=1e-9, atol=1e-9) or not np.allclose(
        full @ np.vstack(b_rows), b, rtol=1e-9, atol=1e-9
    ):
        raise ModelingError(
            "Internal: the compiled block is not affine in the data (not DPP)."
        )  # pragma: no cover
    return (np.vstack(c_rows), np.asarray(c0_rows), np.vstack(A_rows), np.vstack(b_rows), base[2])


def _layout(dims: ConeDims) -> ConeLayout:
    if getattr(dims, "psd", None) or getattr(dims, "p3d", None) or getattr(dims, "pnd", None):
        raise ModelingError(
            "The loss uses an atom that needs semidefinite or power cones (for example a "
            "non-integer power or a matrix atom); dpcvx supports losses representable with "
            "linear, second-order and exponential cones."
        )
    return ConeLayout(
        int(dims.zero), int(dims.nonneg), tuple(int(q) for q in dims.soc), int(dims.exp)
    )


def compile_template(decl: Declaration, extension: float | None = None) -> Template:
    """Compile the declaration's per-example loss once (see the module docstring).

    With ``extension=C`` the block is instead the Lipschitz extension (paper 000, eq. (5) and
    the joint program of Lemma 2.7): ``min_{y in W, t} f(y; z) + C t`` with
    ``||w - y|| <= t``, so that ``f_C(w; z)`` is the block's optimal value.
    """
    return finish_template(canonical_template(decl, extension))


@dataclass(frozen=True)
class CanonicalTemplate:
    """The first part of :func:`compile_template`: the block's conic form from CVXPY, its cones
    checked (everything that can reject a loss); :func:`finish_template` maps it to the data.
    Holds CVXPY's objects of the block, no data."""

    pp: Any
    layout: ConeLayout
    param_layout: tuple[tuple[int, int, tuple[int, ...]], ...]
    total: int
    w: cp.Variable
    at: cp.Variable
    t: cp.Variable | None
    soc: cp.Constraint | None
    split_cons: list[list[cp.Constraint | None]]
    d: int
    extension: float | None
    #: the canonical forms of :attr:`Template.held`
    held: tuple[CanonicalTemplate, CanonicalTemplate] | None = None

    @property
    def probe_entries(self) -> float:
        """An upper bound on the entries of the maps :func:`finish_template` builds (``(p + 1)``
        rows, one per entry of an example's data and the constant, times the parametric
        program's nonzeros): what the rest of the compile holds in memory (public: the loss's
        structure). Infinite where CVXPY's program does not show it."""
        try:
            nonzeros = int(self.pp.A.nnz) + int(self.pp.q.nnz)
        except AttributeError:  # pragma: no cover - another CVXPY's internals
            return float("inf")
        return float(self.total + 1) * float(nonzeros)


def canonical_template(
    decl: Declaration, extension: float | None = None, skip: frozenset[int] = frozenset()
) -> CanonicalTemplate:
    """The block's conic form and its cones (a few milliseconds: CVXPY's canonicalization),
    the part of :func:`compile_template` that rejects a loss dpcvx cannot compile. The terms
    ``skip`` (by index) are left out of the block (their split rows None). A plain block whose
    loss has terms that read no data also gets the blocks of :attr:`Template.held`."""
    orig = decl.variable
    w = _plain(orig)  # attribute bounds live in the domain's rows, not in every block
    objective = 0
    constraints: list[cp.Constraint] = []
    split_cons: list[list[cp.Constraint | None]] = []
    at = w
    soc = None
    if extension is not None:
        at = cp.Variable(decl.d)  # the per-example copy y
        t = cp.Variable()
        soc = cp.SOC(t, w - at)
        constraints.append(soc)
        constraints += [substitute(c, orig, at) for c in decl.domain.constraints]
        objective = extension * t
    for index, term in enumerate(decl.terms):
        if w is not orig:
            term = _term_at(term, orig, w)
        if extension is not None:
            term = _term_at(term, w, at)
        if index in skip:
            split_cons.append([None] * len(term.args))
            continue
        splits: list[cp.Variable | None] = []
        cons: list[cp.Constraint | None] = []
        structured = term.kind not in ("affine", "generic")
        for arg in term.args:
            # a monotone term's multiplier is the sum over all its pieces, constants included
            if structured and (arg.variables() or term.kind in MONOTONE):
                v = cp.Variable(arg.shape)
                con = v == arg
                constraints.append(con)
                splits.append(v)
                cons.append(con)
            else:
                splits.append(None)
                cons.append(None)
        split_cons.append(cons)
        objective = objective + _rebuild(term, splits)
    prob = cp.Problem(cp.Minimize(_second_order(objective)), constraints)
    if not prob.is_dcp(dpp=True):
        raise ModelingError(f"Internal: the split template is not DPP: {objective}")
    data, _, _ = prob.get_problem_data(cp.CLARABEL, solver_opts={"use_quad_obj": False})
    if data.get("P") is not None and sp.csc_matrix(data["P"]).nnz:
        raise ModelingError("Internal: unexpected quadratic objective in the template.")
    pp = data[cp.settings.PARAM_PROB]
    layout = _layout(data["dims"])
    params = {p.id: p for p in prob.parameters()}
    param_layout = tuple(
        (pid, int(pp.param_id_to_col[pid]), tuple(params[pid].shape))
        for pid in sorted(params, key=lambda k: pp.param_id_to_col[k])
    )
    total = int(sum(int(np.prod(s)) if s else 1 for _, _, s in param_layout))
    if any(off + (int(np.prod(s)) if s else 1) > total for _, off, s in param_layout):
        raise ModelingError("Internal: unexpected parameter layout.")  # pragma: no cover
    held = None
    shared = decl.shared_terms
    if extension is None and not skip and shared:
        try:  # the whole block compiled: a part that does not (never seen) holds nothing once
            once = canonical_template(decl, skip=frozenset(range(len(decl.terms))) - shared)
            if once.total == 0:  # reads no parameter (public values are constants by now)
                held = (canonical_template(decl, skip=shared), once)
        except ModelingError:  # pragma: no cover - the whole block's compile passed
            held = None
    return CanonicalTemplate(
        pp,
        layout,
        param_layout,
        total,
        w,
        at,
        t if extension is not None else None,
        soc,
        split_cons,
        decl.d,
        None if extension is None else float(extension),
        held,
    )


def finish_template(canonical: CanonicalTemplate) -> Template:
    """The template from its canonical form: the block's data as an affine map of each
    example's data (CVXPY's program at the data's unit vectors: most of the compile time)."""
    pp, layout, param_layout, total = (
        canonical.pp,
        canonical.layout,
        canonical.param_layout,
        canonical.total,
    )
    w, at, t, soc, split_cons = (
        canonical.w,
        canonical.at,
        canonical.t,
        canonical.soc,
        canonical.split_cons,
    )
    extension = canonical.extension
    c_map, c0_map, A_map, b_map, A0 = _probe(pp, param_layout, total)
    n_cols = A0.shape[1]
    w_cols = np.full(n_cols, -1, dtype=np.int64)
    start = pp.var_id_to_col[w.id]
    w_cols[start : start + w.size] = np.arange(w.size)
    A_coo = A0.tocoo()
    # rows of each split constraint: CVXPY keeps the formatted constraints in row order
    offsets: dict[int, int] = {}
    row = 0
    for con in pp.constraints:
        offsets[con.id] = row
        row += con.size
    if row != layout.rows:
        raise ModelingError("Internal: constraint rows do not match the cone layout.")
    # CSC data is column-major; COO from CSC keeps that order, matching A_map's columns
    split_rows = []
    for cons in split_cons:
        rows_t: list[np.ndarray | None] = []
        for con in cons:
            if con is None:
                rows_t.append(None)
            else:
                rows_t.append(offsets[_formatted_id(pp, con)] + np.arange(con.size))
        split_rows.append(tuple(rows_t))
    y_cols = soc_rows = None
    if extension is not None:
        start_y = pp.var_id_to_col[at.id]
        y_cols = np.arange(start_y, start_y + canonical.d)
        assert soc is not None and t is not None  # built with the extension
        soc_rows = offsets[_formatted_id(pp, soc)] + np.arange(soc.size)
        t_col = int(pp.var_id_to_col[t.id])
        if not np.isclose(c_map[0, t_col], extension) or np.any(c_map[1:, t_col]):
            raise ModelingError("Internal: unexpected objective on the extension's t.")
    held = canonical.held
    parts = None
    if held is not None:
        try:
            parts = (finish_template(held[0]), finish_template(held[1]))
        except ModelingError:  # pragma: no cover - as canonical_template's
            parts = None
    return Template(
        held=parts,
        extension=None if extension is None else float(extension),
        y_cols=y_cols,
        soc_rows=soc_rows,
        t_col=None if extension is None else t_col,
        cones=layout,
        n_cols=n_cols,
        w_cols=w_cols,
        A_rows=A_coo.row.astype(np.int64),
        A_cols=A_coo.col.astype(np.int64),
        A_map=A_map,
        b_map=b_map,
        c_map=c_map,
        c0_map=c0_map,
        param_layout=param_layout,
        split_rows=tuple(split_rows),
    )


#: a template whose compile builds maps of more entries than this is compiled when it is
#: checked (before a release spends anything): a loss with a 60 x 60 data matrix per example
#: builds 13 million (its compile took 2.5 s and 200 MiB at its peak); a hinge loss at d = 20,
#: about 2,000
LAZY_ENTRIES = 1 << 20


class LazyTemplate:
    """A template whose loss is checked before anything is spent, compiled on first use.

    :meth:`check` runs :func:`canonical_template` (it raises for any loss dpcvx cannot
    compile, so a release refuses it before its budget is reserved); :func:`finish_template`,
    most of the compile time, runs when the template is first called (once, under a lock):
    only the conic program needs it, and a solve on the smooth or arrowhead path never does.
    A large compile (:data:`LAZY_ENTRIES`) runs at the check.
    :meth:`extended` gives the extension template for another ``C`` (:func:`with_extension`).
    Pickled (for an executor), it is compiled first and travels as the :class:`Template`."""

    def __init__(
        self,
        decl: Declaration | None,
        extension: float | None = None,
        *,
        parent: LazyTemplate | None = None,
        C: float | None = None,
    ) -> None:
        self._decl = decl
        self._extension = extension
        self._parent = parent
        self._C = C
        self._canonical: CanonicalTemplate | None = None
        self._template: Template | None = None
        self._lock = threading.RLock()

    def check(self) -> LazyTemplate:
        """Canonicalize now (what can reject the loss), and compile now where the compile is
        large (:data:`LAZY_ENTRIES`: its memory could run out, which must happen before a
        release spends anything, not in a solve that reaches the conic rung on some datasets
        only); itself, for chaining."""
        with self._lock:
            if self._parent is not None:
                self._parent.check()
            elif self._canonical is None and self._template is None:
                assert self._decl is not None
                canonical = canonical_template(self._decl, self._extension)
                self._canonical = canonical
                if canonical.probe_entries > LAZY_ENTRIES:
                    self._template = finish_template(canonical)
                    self._canonical = self._decl = None
        return self

    def __call__(self) -> Template:
        with self._lock:
            if self._template is None:
                if self._parent is not None:
                    assert self._C is not None
                    self._template = with_extension(self._parent(), self._C)
                else:
                    self.check()  # which compiles a large template itself
                    if self._template is None:
                        assert self._canonical is not None
                        self._template = finish_template(self._canonical)
                        self._canonical = self._decl = None  # nothing more to compile from
            assert self._template is not None
            return self._template

    @property
    def compiled(self) -> bool:
        """Whether it was compiled (public: only a conic solve compiles it)."""
        return self._template is not None

    def extended(self, C: float) -> LazyTemplate:
        """The extension template for ``C``, compiled (from this one) on first use."""
        return LazyTemplate(None, parent=self, C=float(C))

    def __reduce__(self):
        return (_identity, (self(),))


def _identity(template: Template) -> Template:
    return template


def with_extension(template: Template, C: float) -> Template:
    """The same extension template for another ``C`` (only the objective of ``t`` changes), so
    that the mechanisms of paper 000 compile the extension once for every phase's ``C_t``."""
    from dataclasses import replace

    if template.t_col is None:
        raise ModelingError("Internal: not a Lipschitz-extension template.")
    c_map = template.c_map.copy()
    c_map[:, template.t_col] = 0.0
    c_map[0, template.t_col] = float(C)
    return replace(template, c_map=c_map, extension=float(C))


def _term_at(term: Term, old: cp.Variable, new: cp.Variable) -> Term:
    """The same term evaluated at ``new`` instead of the problem's variable."""
    from dataclasses import replace

    return replace(
        term,
        args=tuple(substitute(a, old, new) for a in term.args),
        expr=substitute(term.expr, old, new),
        atom=None if term.atom is None else substitute(term.atom, old, new),
    )


def _plain(variable: cp.Variable) -> cp.Variable:
    """``variable`` itself, or a stand-in without attributes when it has some (``bounds``,
    ``nonneg``, ...): CVXPY would otherwise replace it by a new variable when compiling, and
    the domain already holds those bounds as explicit rows."""
    attrs = {k: v for k, v in variable.attributes.items() if v not in (None, False)}
    return cp.Variable(variable.shape) if attrs else variable


def _formatted_id(pp: ParamConeProg, con: cp.Constraint) -> int:
    ids = {c.id for c in pp.constraints}
    if con.id in ids:
        return con.id
    raise ModelingError("Internal: a split constraint was renamed by CVXPY.")  # pragma: no cover


@dataclass(frozen=True, slots=True, kw_only=True)
class DomainBlock:
    """The domain's conic rows ``A u + s = b`` on ``[w, domain auxiliaries]``."""

    cones: ConeLayout
    n_cols: int
    w_cols: np.ndarray
    A: sp.csc_matrix
    b: np.ndarray


def compile_domain(decl: Declaration) -> DomainBlock:
    """Compile the (public) domain constraints once (a localized ``W0`` adds one cone to this
    block: :func:`localized_block`)."""
    orig = decl.variable
    w = _plain(orig)
    cons = (
        [substitute(c, orig, w) for c in decl.domain.constraints]
        if w is not orig
        else list(decl.domain.constraints)
    )
    prob = cp.Problem(cp.Minimize(0), cons)
    data, _, _ = prob.get_problem_data(cp.CLARABEL, solver_opts={"use_quad_obj": False})
    pp = data[cp.settings.PARAM_PROB]
    A = sp.csc_matrix(data["A"])
    w_cols = np.full(A.shape[1], -1, dtype=np.int64)
    if w.id in pp.var_id_to_col:
        start = pp.var_id_to_col[w.id]
        w_cols[start : start + w.size] = np.arange(w.size)
    return DomainBlock(
        cones=_layout(data["dims"]),
        n_cols=A.shape[1],
        w_cols=w_cols,
        A=A,
        b=np.asarray(data["b"], float).reshape(-1),
    )


def localized_block(block: DomainBlock, center: np.ndarray, radius: float) -> DomainBlock:
    """The rows of ``W0 = W intersect B(center, radius)``: W's block plus one second-order cone
    ``(radius, w - center)`` (in the convention ``A u + s = b``: rows ``[0; -I]`` on the w columns
    and ``b = [radius; -center]``), inserted after W's own second-order cones."""
    d = int(np.sum(block.w_cols >= 0))
    cones = block.cones
    split = cones.zero + cones.nonneg + sum(cones.soc)
    A = sp.csr_matrix(block.A)
    w_pos = np.empty(d, dtype=np.int64)
    w_pos[block.w_cols[block.w_cols >= 0]] = np.flatnonzero(block.w_cols >= 0)
    ball = sp.csr_matrix((-np.ones(d), (np.arange(1, d + 1), w_pos)), shape=(d + 1, A.shape[1]))
    new_A = sp.vstack([A[:split], ball, A[split:]], format="csc")
    c = np.asarray(center, float).reshape(d)
    new_b = np.concatenate([block.b[:split], [float(radius)], -c, block.b[split:]])
    return DomainBlock(
        cones=ConeLayout(
            zero=cones.zero, nonneg=cones.nonneg, soc=tuple(cones.soc) + (d + 1,), exp=cones.exp
        ),
        n_cols=block.n_cols,
        w_cols=block.w_cols,
        A=new_A,
        b=new_b,
    )
