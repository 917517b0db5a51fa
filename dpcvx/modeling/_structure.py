"""Decompose a (lifted) per-example loss into terms the certificate understands.

A loss is read as ``sum_t weight_t * psi_t(E_t(w; z))`` plus an affine part, where each ``E_t``
is affine in ``w`` and ``psi_t`` is an atom with a known convex conjugate (see
:mod:`dpcvx.certification._conjugates`). Compositions that are a maximum of affine pieces
(``pos``, ``maximum``, ``abs`` of affine expressions, nested, shifted by constants and scaled by
nonnegative constants, e.g. ``pos(abs(r) - eps)``) become ``pieces`` terms; a nondecreasing
``psi`` of such a nonnegative maximum (``power(g, p)`` with ``p > 1``, ``square(pos(r))``,
``abs(r)**p``, ``huber(pos(r))``) becomes a ``pos_power`` or ``pos_huber`` term on the pieces.
``power(norm(E, 2), p)`` (``p > 1``) becomes a ``norm2_power`` term (``psi(v) = ||v||_2**p``,
``psi*(theta) = (p - 1) (||theta||_2 / p)**(p / (p - 1))``). Anything else becomes a
``generic`` term, certified with tangent cuts (valid for every convex term, tight where it is
differentiable).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import cvxpy as cp
import numpy as np
from cvxpy.atoms.affine.add_expr import AddExpression
from cvxpy.atoms.affine.binary_operators import DivExpression, MulExpression, multiply
from cvxpy.atoms.affine.hstack import Hstack
from cvxpy.atoms.affine.promote import Promote
from cvxpy.atoms.affine.reshape import reshape as Reshape
from cvxpy.atoms.affine.sum import Sum
from cvxpy.atoms.affine.unary_operators import NegExpression
from cvxpy.atoms.affine.vstack import Vstack
from cvxpy.atoms.elementwise.abs import abs as cp_abs
from cvxpy.atoms.elementwise.exp import exp as cp_exp
from cvxpy.atoms.elementwise.huber import huber as cp_huber
from cvxpy.atoms.elementwise.logistic import logistic as cp_logistic
from cvxpy.atoms.elementwise.maximum import maximum as cp_maximum
from cvxpy.atoms.elementwise.minimum import minimum as cp_minimum
from cvxpy.atoms.elementwise.power import Power as cp_power
from cvxpy.atoms.log_sum_exp import log_sum_exp as cp_lse
from cvxpy.atoms.max import max as cp_max
from cvxpy.atoms.norm1 import norm1
from cvxpy.atoms.norm_inf import norm_inf
from cvxpy.atoms.pnorm import Pnorm
from cvxpy.atoms.quad_over_lin import quad_over_lin

__all__ = ["Term", "decompose", "pl_pieces"]

#: atoms applied elementwise to one affine argument (then summed when wrapped in ``cp.sum``)
ELEMENTWISE = ("abs", "square", "huber", "logistic", "exp")
#: atoms of one affine vector argument with a scalar value
VECTOR = ("norm2", "norm1", "norminf", "sum_squares", "max", "log_sum_exp", "norm2_power")
#: ``psi(max_j E_j)`` for a nondecreasing ``psi`` on ``[0, inf)`` (``max(v, 0)**p``, the Huber
#: function of ``max(v, 0)``), elementwise over the broadcast pieces ``E_j``
MONOTONE = ("pos_power", "pos_huber")
#: the most affine pieces one composition may expand to (sums multiply the counts)
MAX_PIECES = 32


@dataclass(frozen=True, slots=True)
class Term:
    """One term ``weight * psi(args)`` of the loss.

    ``kind`` is ``"affine"`` (``args == (E,)``, the term is ``weight * sum(E)``), ``"pieces"``
    (``psi = elementwise max over the args``), one of :data:`ELEMENTWISE` or :data:`VECTOR`, or
    ``"generic"`` (``expr`` is certified by tangent cuts). ``expr`` is the whole term without
    its weight (including an enclosing ``cp.sum``); ``atom`` is the atom node itself (for a
    1-norm ``cp.norm1(E)``, read as ``cp.sum(cp.abs(E))``, an ``abs`` node dpcvx builds). ``param``
    holds an atom's constant (the Huber threshold, the quad_over_lin denominator, the exponent
    ``p`` of ``pos_power`` and of ``norm2_power``, ``||E||_2**p``, smooth for ``p >= 2``).
    For the kinds in :data:`MONOTONE`, ``args`` are the affine pieces
    ``E_j`` (some may be constant) and the term is ``psi(max_j E_j)``; ``smooth`` records that
    it is differentiable with a Lipschitz gradient (``|E|**p`` or ``max(E, 0)**p``, ``p >= 2``).
    """

    kind: str
    weight: float
    args: tuple[cp.Expression, ...]
    expr: cp.Expression
    param: float | None = None
    summed: bool = False
    atom: cp.Expression | None = None
    smooth: bool = False
    #: ``max_terms`` only: the sub-terms ``g_j`` of ``max_j g_j(E_j)`` (kinds ``affine`` or
    #: :data:`ELEMENTWISE`, one scalar argument each, in the order of ``args``)
    parts: tuple = ()
    #: ``max_terms`` only: the constant added to each sub-term (``g_j = w_j psi_j(E_j) + b_j``)
    offsets: tuple = ()

    @property
    def param_value(self) -> float:
        """``param`` as a float, for the kinds that always carry one (huber's ``M``,
        pos_power's ``p``, pos_huber's ``M``)."""
        if self.param is None:
            raise ValueError(f"a {self.kind!r} term carries no parameter")
        return float(self.param)

    @property
    def reads_data(self) -> bool:
        """Whether the term reads a parameter (per-example data: public constants are frozen
        into the loss when it is declared)."""
        return bool(self.expr.parameters())

    @property
    def atom_shape(self) -> tuple[int, ...]:
        """The shape of the term's atom (of its expression when it has no atom)."""
        return tuple((self.atom if self.atom is not None else self.expr).shape)


def _const(expr: cp.Expression) -> float | None:
    if expr.size == 1 and not expr.variables() and not expr.parameters():
        return float(np.asarray(expr.value).reshape(()))
    return None


def _affine_in(expr: cp.Expression) -> bool:
    return expr.is_affine()


def _scalar_const(expr: cp.Expression) -> float | None:
    """The value of a variable-free, parameter-free expression of size one, else None."""
    if expr.variables() or expr.parameters() or expr.size != 1:
        return None
    return float(np.asarray(expr.value).reshape(()))


def pl_pieces(expr: cp.Expression) -> list[cp.Expression] | None:
    """Affine expressions ``E_j`` with ``expr == max_j E_j`` elementwise (broadcast), or None.

    Recognized: affine expressions; ``maximum`` (hence ``pos``) of such compositions; ``abs``
    of an affine or a nonnegative composition, and any norm of one affine number;
    ``-minimum(E_1, ...)`` of affine ``E_j`` (hence ``neg``); sums of compositions (every sum
    of one piece from each); nonnegative constant multiples and positive constant divisors. At
    most :data:`MAX_PIECES` pieces.
    """
    if expr.is_affine():
        return [expr]
    args = expr.args
    out: list[cp.Expression] | None = None
    if isinstance(expr, cp_maximum):
        found = [pl_pieces(a) for a in args]
        parts = [p for p in found if p is not None]
        if len(parts) == len(found):
            out = [q for p in parts for q in p]
    elif isinstance(expr, cp_abs):
        if args[0].is_affine():
            out = [args[0], -args[0]]
        elif args[0].is_nonneg():
            out = pl_pieces(args[0])
    elif (
        isinstance(expr, (Pnorm, norm1, norm_inf))
        and getattr(expr, "axis", None) is None
        and args[0].size == 1
        and args[0].is_affine()
    ):  # a norm of one number is its absolute value, of the norm's shape (a scalar)
        one = _scalar(args[0])
        out = [one, -one]
    elif isinstance(expr, NegExpression) and isinstance(args[0], cp_minimum):
        if all(a.is_affine() for a in args[0].args):
            out = [-a for a in args[0].args]
    elif isinstance(expr, AddExpression):
        found = [pl_pieces(a) for a in args]
        parts = [p for p in found if p is not None]
        if len(parts) == len(found) and math.prod(len(p) for p in parts) <= MAX_PIECES:
            out = []
            for combo in itertools.product(*parts):
                total = combo[0]
                for q in combo[1:]:
                    total = total + q
                out.append(total)
    elif isinstance(expr, (multiply, MulExpression)) and len(args) == 2:
        for c, e in ((args[0], args[1]), (args[1], args[0])):
            val = _scalar_const(c)
            if val is not None and val >= 0:
                inner = pl_pieces(e)
                if inner is not None:
                    out = [val * q for q in inner]
                break
    elif isinstance(expr, DivExpression):
        val = _scalar_const(args[1])
        if val is not None and val > 0:
            inner = pl_pieces(args[0])
            out = None if inner is None else [q / val for q in inner]
    if out is None or len(out) > MAX_PIECES:
        return None
    return out


def _is_even_integer(p: float) -> bool:
    return p.is_integer() and int(p) % 2 == 0


def _monotone_term(
    expr: cp.Expression, weight: float, summed: bool, whole: cp.Expression
) -> Term | None:
    """``power(g, p)`` (``p > 1``) or ``huber(g)`` of a piecewise-linear ``g`` (see
    :func:`pl_pieces`) as a ``pos_power``/``pos_huber`` term on ``g``'s pieces."""
    arg = expr.args[0]
    if isinstance(expr, cp_power):
        p = float(expr.p.value)
        if p <= 1.0:
            return None
        if arg.is_affine():
            if not _is_even_integer(p):
                return None  # the domain arg >= 0 is not known; the generic path applies
            pieces: list[cp.Expression] = [arg, -arg]
            smooth = p >= 2.0  # x**p = |x|**p for even p
        else:
            found = pl_pieces(arg)
            if found is None or not arg.is_nonneg():
                return None
            pieces = found
            constants_nonpos = all(q.is_nonpos() for q in pieces if not q.variables())
            smooth = p >= 2.0 and (
                # |E|^p, also written with a norm of one number (norm(r) ** 2)
                (isinstance(arg, (cp_abs, Pnorm, norm1, norm_inf)) and arg.args[0].is_affine())
                or (sum(1 for q in pieces if q.variables()) == 1 and constants_nonpos)
            )
        return Term(
            "pos_power",
            weight,
            tuple(pieces),
            whole,
            atom=expr,
            param=p,
            summed=summed,
            smooth=smooth,
        )
    if isinstance(expr, cp_huber) and not arg.is_affine() and arg.is_nonneg():
        m = _const(expr.M) if isinstance(expr.M, cp.Expression) else float(expr.M)
        huber_pieces = pl_pieces(arg)
        if m is not None and m > 0 and huber_pieces is not None:
            # the Huber function of max(E, 0) (one piece in w, the others constants the
            # structure makes nonpositive) is differentiable with a Lipschitz gradient
            live = [q for q in huber_pieces if q.variables()]
            smooth = len(live) == 1 and all(
                q.is_nonpos() for q in huber_pieces if not q.variables()
            )
            return Term(
                "pos_huber",
                weight,
                tuple(huber_pieces),
                whole,
                atom=expr,
                param=m,
                summed=summed,
                smooth=smooth,
            )
    return None


def _atom_term(
    expr: cp.Expression, weight: float, summed: bool, whole: cp.Expression | None = None
) -> Term | None:
    """The term for atom ``expr`` (``whole`` is ``cp.sum(expr)`` when ``summed``)."""
    whole = expr if whole is None else whole
    args = expr.args
    if isinstance(expr, (cp_power, cp_huber)) and len(args) == 1 and args[0].variables():
        if not (args[0].is_affine() and (isinstance(expr, cp_huber) or float(expr.p.value) == 2.0)):
            term = _monotone_term(expr, weight, summed, whole)
            if term is not None:
                return term
    if isinstance(expr, cp_maximum) and all(_affine_in(a) for a in args):
        return Term("pieces", weight, tuple(args), whole, atom=expr, summed=summed)
    if _stacked_max(expr):
        # max(hstack([E_1, ..., E_m])) of scalar affine pieces is maximum(E_1, ..., E_m)
        stacked = _flat_maximum(expr)
        if 2 <= len(stacked) <= MAX_PIECES and all(a.size == 1 and _affine_in(a) for a in stacked):
            pieces = tuple(a if a.shape == () else cp.reshape(a, (), order="C") for a in stacked)
            return Term("pieces", weight, pieces, whole, atom=expr, summed=summed)
    if (
        isinstance(expr, NegExpression)
        and isinstance(args[0], cp_minimum)
        and all(_affine_in(a) for a in args[0].args)
    ):
        pieces = tuple(-a for a in args[0].args)
        return Term("pieces", weight, pieces, whole, atom=expr, summed=summed)
    if len(args) >= 1 and _affine_in(args[0]) and args[0].variables():
        a = args[0]
        if isinstance(expr, cp_abs):
            return Term("abs", weight, (a,), whole, atom=expr, summed=summed)
        if isinstance(expr, cp_power) and float(expr.p.value) == 2.0:
            return Term("square", weight, (a,), whole, atom=expr, summed=summed)
        if isinstance(expr, cp_huber):
            m = _const(expr.M) if isinstance(expr.M, cp.Expression) else float(expr.M)
            if m is not None and m > 0:
                return Term("huber", weight, (a,), whole, atom=expr, param=m, summed=summed)
        if isinstance(expr, cp_logistic):
            return Term("logistic", weight, (a,), whole, atom=expr, summed=summed)
        if isinstance(expr, cp_exp):
            return Term("exp", weight, (a,), whole, atom=expr, summed=summed)
        if summed:
            return None
        axis_none = getattr(expr, "axis", None) is None
        if isinstance(expr, (Pnorm, norm1, norm_inf)) and axis_none and a.size == 1:
            # any norm of one number is its absolute value (norm1(r), norm(r, 2) of scalar r;
            # of a slice of one entry, cp.norm(w[:1]), that entry as a scalar: the shape of
            # the atom, as the piecewise paths need)
            one = a if a.shape == () else cp.reshape(a, (), order="C")
            return Term("abs", weight, (one,), whole, atom=expr.copy([one] + expr.args[1:]))
        if isinstance(expr, Pnorm) and axis_none and float(expr.p) == 2.0:
            return Term("norm2", weight, (a,), whole, atom=expr)
        if isinstance(expr, norm1) and axis_none:
            # ||E||_1 is sum(abs(E)): the same term, whose entries the piecewise paths (the
            # arrowhead method, proximal Newton) take one by one; as a norm it went to the
            # conic program (logistic plus 0.01 norm1(w), n = 1e4: 15 s, as a sum 0.35 s)
            entries = cp_abs(a)
            return Term("abs", weight, (a,), whole, atom=entries, summed=True)
        if isinstance(expr, norm_inf) and axis_none:
            return Term("norminf", weight, (a,), whole, atom=expr)
        if isinstance(expr, quad_over_lin) and axis_none:
            den = _const(args[1])
            if den is not None and den > 0:
                return Term("sum_squares", weight, (a,), whole, atom=expr, param=den)
        if isinstance(expr, cp_max) and axis_none:
            return Term("max", weight, (a,), whole, atom=expr)
        if isinstance(expr, cp_lse) and axis_none:
            return Term("log_sum_exp", weight, (a,), whole, atom=expr)
    if isinstance(expr, cp_power) and not summed:
        term = _norm_power_term(expr, weight, whole)
        if term is not None:
            return term
    if isinstance(expr, (cp_maximum, cp_abs, NegExpression)):
        found = pl_pieces(expr)
        if found is not None and len(found) > 1:
            return Term("pieces", weight, tuple(found), whole, atom=expr, summed=summed)
    if (isinstance(expr, cp_maximum) or _stacked_max(expr)) and not summed and expr.size == 1:
        return _max_terms(expr, weight, whole)
    return None


def _norm_power_term(expr: cp.Expression, weight: float, whole: cp.Expression) -> Term | None:
    """``power(norm(E, 2), p)`` with ``p > 1`` and ``E`` affine as a ``norm2_power`` term
    ``||E||_2**p`` (differentiable, with gradient ``p ||E||**(p - 2) E``; smooth for ``p >= 2``)."""
    inner = expr.args[0]
    if not (
        isinstance(inner, Pnorm)
        and getattr(inner, "axis", None) is None
        and float(inner.p) == 2.0
        and inner.args[0].is_affine()
        and inner.args[0].variables()
    ):
        return None
    p = float(expr.p.value)
    if not (math.isfinite(p) and p > 1.0):
        return None
    return Term("norm2_power", weight, (inner.args[0],), whole, atom=expr, param=p, smooth=p >= 2.0)


def _stacked_max(expr: cp.Expression) -> bool:
    """``max(hstack([g_1, ..., g_m]))`` (or ``vstack``): the same function as
    ``maximum(g_1, ..., g_m)``, another spelling of it."""
    return (
        isinstance(expr, cp_max)
        and getattr(expr, "axis", None) is None
        and isinstance(expr.args[0], (Hstack, Vstack))
    )


def _flat_maximum(expr: cp.Expression) -> list[cp.Expression]:
    if isinstance(expr, cp_maximum):
        return [b for a in expr.args for b in _flat_maximum(a)]
    if _stacked_max(expr):
        # hstack wraps each scalar piece in a reshape to shape (1,)
        pieces = [
            a.args[0] if isinstance(a, Reshape) and a.size == 1 else a for a in expr.args[0].args
        ]
        return [b for a in pieces for b in _flat_maximum(a)]
    return [expr]


def _max_terms(expr: cp.Expression, weight: float, whole: cp.Expression) -> Term | None:
    """``maximum(g_1, ..., g_m)`` of scalar pieces, each affine or one elementwise atom of an
    affine argument (``maximum(square(r), x @ w)``): certified by ``sum_j mu_j (theta_j E_j -
    g_j*(theta_j))`` for weights ``mu`` in the simplex, exact at the optimum."""
    parts: list[Term] = []
    offsets: list[float] = []
    for a in _flat_maximum(expr):
        if a.size != 1:
            return None
        if a.is_affine():
            parts.append(Term("affine", 1.0, (a,), a))
            offsets.append(0.0)
            continue
        # a positive multiple of one elementwise atom plus constants: c psi(E) + b
        subs = decompose(a, None)
        structured = [t for t in subs if t.kind != "affine"]
        consts = [t for t in subs if t.kind == "affine"]
        if (
            len(structured) != 1
            or structured[0].kind not in ELEMENTWISE
            or any(t.args[0].variables() or t.args[0].parameters() for t in consts)
        ):
            return None  # a data-dependent constant is not one public offset
        if structured[0].summed:
            return None
        parts.append(structured[0])
        offsets.append(
            float(sum(t.weight * float(np.asarray(t.args[0].value).sum()) for t in consts))
        )
    if all(p.kind == "affine" for p in parts):
        return None
    args = tuple(p.args[0] for p in parts)
    return Term(
        "max_terms", weight, args, whole, atom=expr, parts=tuple(parts), offsets=tuple(offsets)
    )


def _logistic_pair(expr: cp.Expression) -> tuple[cp.Expression, cp.Expression] | None:
    """``(c, E)`` for ``log_sum_exp(hstack([c, E]))`` (or ``vstack``, either order) of two
    numbers, ``E`` affine in the variable and ``c`` free of it: ``c + logistic(E - c)``, the
    logistic loss spelled ``cp.log_sum_exp(cp.hstack([0, -y * (x @ w)]))`` (``c = 0``)."""
    if not (
        isinstance(expr, cp_lse)
        and getattr(expr, "axis", None) is None
        and isinstance(expr.args[0], (Hstack, Vstack))
    ):
        return None
    # hstack wraps each scalar in a reshape to shape (1,)
    parts = [a.args[0] if isinstance(a, Reshape) and a.size == 1 else a for a in expr.args[0].args]
    if len(parts) != 2 or any(p.size != 1 or not p.is_affine() for p in parts):
        return None
    free = [p for p in parts if not p.variables()]
    if len(free) != 1:
        return None
    c = free[0]
    E = parts[1] if parts[0] is c else parts[0]
    return _scalar(c), _scalar(E)


def _scalar(expr: cp.Expression) -> cp.Expression:
    return expr if expr.shape == () else cp.reshape(expr, (), order="C")


#: the most groups a sum of norms along an axis is split into (one term each)
MAX_GROUPS = 1000


def _unkept(expr: cp.Expression) -> cp.Expression | None:
    """A whole reduction kept as a one-entry array (``cp.max(E, keepdims=True)``, norms,
    log-sum-exp) as the same reduction to a number, or None. (CVXPY's own compiler stops at
    ``cp.norm(E, 2, keepdims=True)``, and as a generic term such a maximum could not be
    certified at a kink.)"""
    if isinstance(expr, Reshape) and expr.args[0].shape == () and not expr.is_affine():
        return expr.args[0]  # a number reshaped to one entry (see _expressions.lift)
    if not getattr(expr, "keepdims", False) or getattr(expr, "axis", 0) is not None:
        return None
    (arg,) = expr.args[:1]
    if isinstance(expr, Pnorm):
        return cp.pnorm(arg, float(expr.p))
    if isinstance(expr, norm1):
        return cp.norm1(arg)
    if isinstance(expr, norm_inf):
        return cp.norm_inf(arg)
    if isinstance(expr, cp_max):
        return cp.max(arg)
    if isinstance(expr, cp_lse):
        return cp.log_sum_exp(arg)
    return None


def _norm1_of_nonneg(expr: cp.Expression) -> bool:
    """``||E||_1`` (``norm1``, ``pnorm(E, 1)``, no axis) of a non-affine ``E`` whose entries
    CVXPY knows to be nonnegative (norms, squares): the same as ``sum(E)``."""
    if isinstance(expr, Pnorm):
        if float(expr.p) != 1.0:
            return False
    elif not isinstance(expr, norm1):
        return False
    inner = expr.args[0]
    return getattr(expr, "axis", None) is None and not inner.is_affine() and inner.is_nonneg()


def _summands(inner: cp.Expression) -> list[cp.Expression] | None:
    """The parts whose sum is ``sum(inner)``, where each is a term of its own: the parts of a
    sum (``cp.sum(A + B)``, each part counted as often as broadcasting repeats it), the entries
    of a stack (``cp.sum(cp.hstack([cp.norm(w[:5]), cp.norm(w[5:])]))``) and the norms of the
    columns or rows of a norm along an axis (``cp.sum(cp.norm(W, 2, axis=0))``, a group
    lasso; ``inf`` likewise; ``1``: one sum of absolute values); None for anything else. As
    one generic term these had only a tangent cut, which cannot hold a group at zero: with a
    penalty large enough to zero a group, no solve met even 1e-8 (a gap of 2.45 for the
    logistic loss)."""
    if isinstance(inner, AddExpression) and not inner.is_affine():
        # sum(A + B) = sum(A) + sum(B), each part counted as often as broadcasting repeats
        # its entries (a number added to a vector: once per entry)
        parts = []
        for a in inner.args:
            if isinstance(a, Promote):  # a number spread over the entries
                a = a.args[0]
            parts.append(a if a.size == inner.size == 1 else (inner.size // a.size) * cp.sum(a))
        return parts
    if isinstance(inner, (Hstack, Vstack)) and not inner.is_affine():
        # (a number stacked as (1,) is its sum, which :func:`_unkept` reads as the number)
        return [a if a.shape == () else cp.sum(a) for a in inner.args]
    kind = _axis_norm(inner)
    if kind is None:
        return None
    X, axis = inner.args[0], inner.axis
    if kind == 1.0:  # the columns' (rows') 1-norms add up to every entry's absolute value
        return [cp.sum(cp.abs(X))]
    count = X.shape[1 - axis]
    if count > MAX_GROUPS:
        return None
    groups = [X[:, j] if axis == 0 else X[j, :] for j in range(count)]
    return [cp.norm(g, 2) if kind == 2.0 else cp.norm_inf(g) for g in groups]


def _axis_norm(expr: cp.Expression) -> float | None:
    """``p`` (1, 2 or inf) of ``cp.norm(X, p, axis=0 or 1)`` of an affine matrix ``X`` (the
    norms of its columns or rows), or None."""
    if getattr(expr, "axis", None) not in (0, 1) or not expr.args:
        return None
    X = expr.args[0]
    if X.ndim != 2 or not X.is_affine() or not X.variables():
        return None
    if isinstance(expr, norm1):
        return 1.0
    if isinstance(expr, norm_inf):
        return math.inf
    if isinstance(expr, Pnorm) and float(expr.p) in (1.0, 2.0):
        return float(expr.p)
    return None


def decompose(loss: cp.Expression, variable: cp.Variable) -> tuple[Term, ...]:
    """Split ``loss`` into :class:`Term` objects whose sum is ``loss``."""
    terms: list[Term] = []

    def visit(expr: cp.Expression, weight: float) -> None:
        if not expr.variables():
            terms.append(Term("affine", weight, (expr,), expr))
            return
        if expr.is_affine():
            terms.append(Term("affine", weight, (expr,), expr))
            return
        if isinstance(expr, AddExpression):
            for a in expr.args:
                visit(a, weight)
            return
        if isinstance(expr, (multiply, MulExpression)) and len(expr.args) == 2:
            a, b = expr.args
            for c, e in ((a, b), (b, a)):
                val = _const(c)
                if val is not None and val >= 0:
                    visit(e, weight * val)
                    return
        if isinstance(expr, DivExpression):
            val = _const(expr.args[1])
            if val is not None and val > 0:
                visit(expr.args[0], weight / val)
                return
        if (
            isinstance(expr, cp_max)
            and getattr(expr, "axis", None) is None
            and isinstance(expr.args[0], cp_abs)
            and _affine_in(expr.args[0].args[0])
            and expr.args[0].args[0].variables()
        ):
            # the largest absolute value is the sup norm (cp.max(cp.abs(w))): one norminf
            # term with its conjugate, where a generic term's tangent cut could not hold a
            # kink
            visit(cp.norm_inf(expr.args[0].args[0]), weight)
            return
        if _norm1_of_nonneg(expr):
            # ||E||_1 of entries that are never negative is their sum: the norms of the
            # groups of cp.mixed_norm(X, 2, 1) (a group lasso), each a term of its own
            visit(cp.sum(expr.args[0]), weight)
            return
        if isinstance(expr, Sum) and expr.axis is None:
            inner = expr.args[0]
            whole = _unkept(inner)
            if whole is not None:  # the sum of a reduction kept as one entry is the reduction
                visit(whole, weight)
                return
            parts = _summands(inner)
            if parts is not None:
                for part in parts:
                    visit(part, weight)
                return
            term = _atom_term(inner, weight, summed=True, whole=expr)
            if term is None and inner.size == 1:
                # the sum of one entry is the entry: a reduction kept as a one-entry array
                # (``cp.max(E, keepdims=True)``) is the atom itself
                term = _atom_term(inner, weight, summed=False, whole=expr)
            if term is not None:
                terms.append(term)
                return
        pair = _logistic_pair(expr)
        if pair is not None:
            c, E = pair
            zero = _scalar_const(c) == 0.0
            arg = E if zero else E - c
            atom = cp.logistic(arg)
            terms.append(Term("logistic", weight, (arg,), atom, atom=atom))
            if not zero:
                visit(c, weight)
            return
        term = _atom_term(expr, weight, summed=False)
        if term is not None:
            terms.append(term)
            return
        terms.append(Term("generic", weight, (), expr))

    visit(loss, 1.0)
    return tuple(terms)
