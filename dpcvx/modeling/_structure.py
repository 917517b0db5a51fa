"""Decompose a (lifted) per-example loss into terms the certificate understands.

A loss is read as ``sum_t weight_t * psi_t(E_t(w; z))`` plus an affine part, where each ``E_t``
is affine in ``w`` and ``psi_t`` is an atom with a known convex conjugate (see
:mod:`dpcvx.certification._conjugates`). Anything else becomes a ``generic`` term, certified with
tangent cuts (valid for every convex term, tight where it is differentiable).
"""

from __future__ import annotations

from dataclasses import dataclass

import cvxpy as cp
import numpy as np
from cvxpy.atoms.affine.add_expr import AddExpression
from cvxpy.atoms.affine.binary_operators import DivExpression, MulExpression, multiply
from cvxpy.atoms.affine.sum import Sum
from cvxpy.atoms.affine.unary_operators import NegExpression
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

__all__ = ["Term", "decompose"]

#: atoms applied elementwise to one affine argument (then summed when wrapped in ``cp.sum``)
ELEMENTWISE = ("abs", "square", "huber", "logistic", "exp")
#: atoms of one affine vector argument with a scalar value
VECTOR = ("norm2", "norm1", "norminf", "sum_squares", "max", "log_sum_exp")


@dataclass(frozen=True, slots=True)
class Term:
    """One term ``weight * psi(args)`` of the loss.

    ``kind`` is ``"affine"`` (``args == (E,)``, the term is ``weight * sum(E)``), ``"pieces"``
    (``psi = elementwise max over the args``), one of :data:`ELEMENTWISE` or :data:`VECTOR`, or
    ``"generic"`` (``expr`` is certified by tangent cuts). ``expr`` is the whole term without
    its weight (including an enclosing ``cp.sum``); ``atom`` is the atom node itself. ``param``
    holds an atom's constant (the Huber threshold, the quad_over_lin denominator).
    """

    kind: str
    weight: float
    args: tuple[cp.Expression, ...]
    expr: cp.Expression
    param: float | None = None
    summed: bool = False
    atom: cp.Expression | None = None


def _const(expr: cp.Expression) -> float | None:
    if expr.size == 1 and not expr.variables() and not expr.parameters():
        return float(np.asarray(expr.value).reshape(()))
    return None


def _affine_in(expr: cp.Expression) -> bool:
    return expr.is_affine()


def _atom_term(expr: cp.Expression, weight: float, summed: bool,
               whole: cp.Expression | None = None) -> Term | None:
    """The term for atom ``expr`` (``whole`` is ``cp.sum(expr)`` when ``summed``)."""
    whole = expr if whole is None else whole
    args = expr.args
    if isinstance(expr, cp_maximum) and all(_affine_in(a) for a in args):
        return Term("pieces", weight, tuple(args), whole, atom=expr, summed=summed)
    if isinstance(expr, NegExpression) and isinstance(args[0], cp_minimum) and all(
        _affine_in(a) for a in args[0].args
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
        if isinstance(expr, Pnorm) and axis_none and float(expr.p) == 2.0:
            return Term("norm2", weight, (a,), whole, atom=expr)
        if isinstance(expr, norm1) and axis_none:
            return Term("norm1", weight, (a,), whole, atom=expr)
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
        if isinstance(expr, Sum) and expr.axis is None:
            inner = expr.args[0]
            term = _atom_term(inner, weight, summed=True, whole=expr)
            if term is not None:
                terms.append(term)
                return
        term = _atom_term(expr, weight, summed=False)
        if term is not None:
            terms.append(term)
            return
        terms.append(Term("generic", weight, (), expr))

    visit(loss, 1.0)
    return tuple(terms)
