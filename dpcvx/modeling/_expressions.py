"""Expression transformations and batched evaluation of CVXPY trees.

Three small pieces, each independent of CVXPY's canonicalization (so that the certificate can
check CVXPY's compiled program against the user's expression rather than against itself):

- :func:`lift` rewrites a per-example loss into DPP form: a scalar parameter factor is pushed into
  the affine expression it multiplies (``y * (x @ w)`` becomes ``(y * x) @ w``), then every maximal
  variable-free subtree that reads per-example data is replaced by a fresh *derived* parameter whose
  per-example values are computed from the data, vectorized.
- :func:`evaluate` evaluates a tree for n examples at once (leading batch axis), with vectorized
  rules for the common affine atoms and elementwise atoms, and a per-example fallback through the
  atom's own ``numeric`` for anything else.
- :func:`affine_jet` returns, for an expression affine in the variable, its per-example offset
  ``b_i`` and Jacobian ``M_i`` such that ``expr(w; z_i) = M_i w + b_i``.
- :func:`subgradient_jet` returns, for any DCP expression, its per-example value and a
  (sub/super)gradient at given points, by the chain rule with vectorized rules per atom (a
  per-example fallback through the atom's own ``_grad`` for atoms without a rule).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import cvxpy as cp
import numpy as np
from cvxpy.atoms.affine.add_expr import AddExpression
from cvxpy.atoms.affine.binary_operators import DivExpression, MulExpression, multiply
from cvxpy.atoms.affine.hstack import Hstack
from cvxpy.atoms.affine.index import index
from cvxpy.atoms.affine.promote import Promote
from cvxpy.atoms.affine.reshape import reshape as cp_reshape
from cvxpy.atoms.affine.sum import Sum
from cvxpy.atoms.affine.transpose import transpose as cp_transpose
from cvxpy.atoms.affine.unary_operators import NegExpression
from cvxpy.atoms.affine.vstack import Vstack
from cvxpy.atoms.elementwise.abs import abs as cp_abs
from cvxpy.atoms.elementwise.elementwise import Elementwise
from cvxpy.atoms.elementwise.exp import exp as cp_exp
from cvxpy.atoms.elementwise.huber import huber as cp_huber
from cvxpy.atoms.elementwise.logistic import logistic as cp_logistic
from cvxpy.atoms.elementwise.maximum import maximum as cp_maximum
from cvxpy.atoms.elementwise.minimum import minimum as cp_minimum
from cvxpy.atoms.elementwise.power import Power
from cvxpy.atoms.log_sum_exp import log_sum_exp
from cvxpy.atoms.max import max as cp_max
from cvxpy.atoms.min import min as cp_min
from cvxpy.atoms.norm1 import norm1
from cvxpy.atoms.norm_inf import norm_inf
from cvxpy.atoms.pnorm import Pnorm
from cvxpy.atoms.quad_form import QuadForm
from cvxpy.atoms.quad_over_lin import quad_over_lin
from cvxpy.expressions.constants.constant import Constant
from cvxpy.expressions.constants.parameter import Parameter
from cvxpy.expressions.variable import Variable
from scipy.special import expit, logsumexp, softmax

#: held while dpcvx sets ``.value`` on CVXPY leaves to evaluate an expression (CVXPY keeps
#: values on the shared objects), so that blocks certified on threads never interfere
VALUE_LOCK = threading.RLock()

__all__ = [
    "DerivedParameter",
    "affine_jet",
    "evaluate",
    "lift",
    "subgradient_jet",
    "substitute",
    "Unsupported",
]


class Unsupported(Exception):
    """Raised internally when a vectorized rule does not apply (callers fall back)."""


@dataclass(frozen=True, slots=True)
class DerivedParameter:
    """A fresh parameter standing for a variable-free subtree of per-example data."""

    parameter: Parameter
    expression: cp.Expression


def substitute(
    expr: cp.Expression | cp.Constraint, old: Variable, new: cp.Expression
) -> cp.Expression | cp.Constraint:
    """``expr`` (an expression or a constraint) with the variable ``old`` replaced by ``new``."""
    if isinstance(expr, Variable) and expr.id == old.id:
        return new
    if not expr.args:
        return expr
    return expr.copy([substitute(a, old, new) for a in expr.args])


def _has_params(expr: cp.Expression, params: frozenset[int]) -> bool:
    return any(p.id in params for p in expr.parameters())


def _push(factor: cp.Expression, expr: cp.Expression) -> cp.Expression | None:
    """Return an expression equal to ``factor * expr`` (scalar ``factor``, variable-free) in which
    the factor multiplies only variable-free pieces, or None when that is impossible."""
    if not expr.variables():
        return factor * expr
    if isinstance(expr, Variable):
        return cp.multiply(factor, expr)
    if isinstance(expr, AddExpression):
        found = [_push(factor, arg) for arg in expr.args]
        parts = [p for p in found if p is not None]
        if len(parts) != len(found):
            return None
        out = parts[0]
        for p in parts[1:]:
            out = out + p
        return out
    if isinstance(expr, NegExpression):
        return _push(-factor, expr.args[0])
    if isinstance(expr, DivExpression):
        num, den = expr.args
        if den.variables():
            return None
        inner = _push(factor, num)
        return None if inner is None else inner / den
    if isinstance(expr, (multiply, MulExpression)) and not expr.is_affine():
        return _push_weight(factor, expr) if factor.is_nonneg() else None
    if isinstance(expr, multiply):
        a, b = expr.args
        for c, e in ((a, b), (b, a)):
            if not c.variables() and e.parameters() and not c.parameters():
                inner = _push(factor, e)  # a constant times data: push into the data side
                return None if inner is None else cp.multiply(c, inner)
        if not a.variables():
            return cp.multiply(factor * a, b)
        if not b.variables():
            return cp.multiply(a, factor * b)
        return None
    if isinstance(expr, MulExpression):
        a, b = expr.args
        if not a.variables() and b.parameters() and not a.parameters():
            inner = _push(factor, b)
            return None if inner is None else a @ inner
        if not a.variables():
            return (factor * a) @ b
        if not b.variables():
            return a @ (factor * b)
        return None
    if isinstance(expr, (index, Sum, Promote)) and expr.is_affine():
        inner = _push(factor, expr.args[0])
        return None if inner is None else expr.copy([inner])
    if factor.is_nonneg():
        return _push_weight(factor, expr)
    return None


def _push_weight(factor: cp.Expression, expr: cp.Expression) -> cp.Expression | None:
    """``factor * expr`` for a nonnegative data factor (a per-example weight) and a convex
    ``expr``, rewritten through positive homogeneity so that the factor reaches affine
    pieces only: ``s max_j E_j = max_j s E_j``, ``s |E| = |s E|``, ``s ||E|| = ||s E||``,
    ``s E^2 = (sqrt(s) E)^2``; a sum or a nonnegative constant multiple passes it on.
    None where no such rewriting exists (``logistic``, ``huber``, ``exp``). Sums are split by
    :func:`_push` before this is reached."""
    if isinstance(expr, Sum):
        inner = _push(factor, expr.args[0])
        return None if inner is None else expr.copy([inner])
    if isinstance(expr, (multiply, MulExpression)) and len(expr.args) == 2:
        a, b = expr.args
        for c, e in ((a, b), (b, a)):
            if not c.variables() and not c.parameters() and c.is_nonneg():
                inner = _push(factor, e)
                return None if inner is None else cp.multiply(c, inner)
        return None
    if isinstance(expr, cp_maximum):
        parts = [_push(factor, a) for a in expr.args]
        return None if any(p is None for p in parts) else cp.maximum(*parts)
    if isinstance(expr, (cp_abs, cp_max, Pnorm, norm1, norm_inf)):
        inner = _push(factor, expr.args[0])
        return None if inner is None else expr.copy([inner] + list(expr.args[1:]))
    root = cp.sqrt(factor)
    if isinstance(expr, Power) and float(getattr(expr.p, "value", expr.p)) == 2.0:
        inner = _push(root, expr.args[0])
        return None if inner is None else expr.copy([inner])
    if (
        isinstance(expr, quad_over_lin)
        and not expr.args[1].variables()
        and not expr.args[1].parameters()
    ):
        inner = _push(root, expr.args[0])
        return None if inner is None else expr.copy([inner, expr.args[1]])
    return None


def _data_only(expr: cp.Expression, params: frozenset[int]) -> bool:
    return not expr.variables() and _has_params(expr, params)


def _data_matmul(
    prod: cp.Expression, params: frozenset[int]
) -> tuple[cp.Expression, cp.Expression, bool] | None:
    """``(M, v, rows)`` for a matrix product of a matrix ``M`` affine in the variable and free
    of data with a data vector ``v``: ``rows`` True for ``M @ v`` (the product runs over
    ``M``'s rows), False for ``v @ M`` (over its columns); None otherwise. An elementwise
    ``cp.multiply`` is a subclass of MulExpression, and no matrix product."""
    if type(prod) is not MulExpression or len(prod.args) != 2:
        return None
    p, q = prod.args
    if p.ndim == 2 and q.ndim == 1:
        M, v, rows = p, q, True
    elif p.ndim == 1 and q.ndim == 2:
        v, M, rows = p, q, False
    else:
        return None
    if not (_data_only(v, params) and M.is_affine() and M.variables()):
        return None
    return None if _has_params(M, params) else (M, v, rows)


def _scores(
    a: cp.Expression, b: cp.Expression, params: frozenset[int], elementwise: bool
) -> cp.Expression | None:
    """A data vector ``u`` times the scores ``M @ v`` (or ``v @ M``) of :func:`_data_matmul`:
    as a matrix product (``elementwise`` False), the number ``u^T M v``, the one-hot label's
    score in a multinomial loss (``y @ W @ x``, ``y @ (W @ x)``, ``(W @ x) @ y``, ``x @ (W.T @
    y)``), written ``sum(multiply(outer(u, v), M))``; elementwise (``cp.multiply(y, W @ x)``,
    one-vs-rest margins with labels in {-1, 1}^K), the vector ``u_k (M v)_k``, written
    ``sum(multiply(outer(u, v), M), axis=1)`` (``outer(v, u)`` and ``axis=0`` for ``v @ M``).
    The data ``outer(...)`` is one derived parameter (DPP). None otherwise."""
    for vec, prod in ((a, b), (b, a)):
        if not (_data_only(vec, params) and vec.ndim == 1):
            continue
        found = _data_matmul(prod, params)
        if found is None:
            continue
        M, v, rows = found
        if vec.shape != ((M.shape[0],) if rows else (M.shape[1],)):
            continue
        weighted = cp.multiply(cp.outer(vec, v) if rows else cp.outer(v, vec), M)
        if not elementwise:
            return cp.sum(weighted)
        return cp.sum(weighted, axis=1 if rows else 0)
    return None


def _over_a_sum(
    expr: cp.Expression, args: list[cp.Expression], params: frozenset[int]
) -> cp.Expression | None:
    """A one-hot or one-vs-rest score with a bias, ``y @ (W @ x + b)`` or ``cp.multiply(y, W @ x
    + b)`` (``y`` a data vector, the sum reading both the variable and data): the product
    distributed over the sum, each part read again (:func:`_scores`); None otherwise. Exact:
    both products are linear in each side."""
    scalar_matmul = type(expr) is MulExpression and expr.shape == ()
    vector_multiply = type(expr) is multiply and expr.ndim == 1
    if len(args) != 2 or not (scalar_matmul or vector_multiply):
        return None
    for vec, total, first in ((args[0], args[1], True), (args[1], args[0], False)):
        if not (
            _data_only(vec, params)
            and vec.ndim == 1
            and isinstance(total, AddExpression)
            and total.variables()
            and _has_params(total, params)
            and total.shape == vec.shape
        ):
            continue
        parts = []
        for part in total.args:
            if part.shape != total.shape:  # a number added to a vector: spread it
                part = part + np.zeros(total.shape)
            if scalar_matmul:
                product = vec @ part if first else part @ vec
            else:
                product = cp.multiply(vec, part) if first else cp.multiply(part, vec)
            parts.append(_distribute(product, params))
        out = parts[0]
        for part in parts[1:]:
            out = out + part
        return out
    return None


def _distribute(expr: cp.Expression, params: frozenset[int]) -> cp.Expression:
    """Push scalar data factors into the affine expressions they multiply, bottom-up."""
    if not expr.args:
        return expr
    args = [_distribute(a, params) for a in expr.args]
    if (
        isinstance(expr, Pnorm)
        and getattr(expr, "keepdims", False)
        and getattr(expr, "axis", 0) is None
    ):
        # CVXPY's compiler asserts a 2-norm kept as a one-entry array is a number: the norm,
        # reshaped
        return cp.reshape(cp.pnorm(args[0], float(expr.p)), expr.shape, order="F")
    split = _over_a_sum(expr, args, params)
    if split is not None:
        return split
    elementwise = type(expr) is multiply and expr.ndim == 1
    if len(args) == 2 and (elementwise or (type(expr) is MulExpression and expr.shape == ())):
        found = _scores(args[0], args[1], params, elementwise)
        if found is not None:
            return found
    if isinstance(expr, (multiply, MulExpression)) and len(args) == 2:
        a, b = args
        for fac, other in ((a, b), (b, a)):
            if (
                fac.size == 1
                and not fac.variables()
                and _has_params(fac, params)
                and other.variables()
                and (_has_params(other, params) or not other.is_affine())
            ):
                pushed = _push(cp.reshape(fac, (), order="F") if fac.shape else fac, other)
                if pushed is not None:
                    return pushed
    return expr.copy(args)


def lift(
    expr: cp.Expression, params: frozenset[int]
) -> tuple[cp.Expression, tuple[DerivedParameter, ...]]:
    """Rewrite ``expr`` so that data enters only through parameters used in DPP positions.

    Parameters
    ----------
    expr : cvxpy.Expression
        The per-example loss (or any expression in the variable and per-example parameters).
    params : frozenset of int
        Ids of the per-example parameters.

    Returns
    -------
    lifted : cvxpy.Expression
        An equal expression whose variable-free data subtrees are fresh parameters.
    derived : tuple of DerivedParameter
        The fresh parameters and the subtrees they stand for.
    """
    derived: list[DerivedParameter] = []
    cache: dict[int, Parameter] = {}

    def replace(node: cp.Expression) -> cp.Expression:
        if not node.variables():
            if not _has_params(node, params):
                return node
            if isinstance(node, Parameter):
                key = node.id
                if key not in cache:
                    cache[key] = node
                    derived.append(DerivedParameter(node, node))
                return cache[key]
            attrs = {}
            if node.is_nonneg():
                attrs["nonneg"] = True
            elif node.is_nonpos():
                attrs["nonpos"] = True
            fresh = Parameter(node.shape, **attrs)
            derived.append(DerivedParameter(fresh, node))
            return fresh
        if not node.args:
            return node
        return node.copy([replace(a) for a in node.args])

    return replace(_distribute(expr, params)), tuple(derived)


# ----------------------------------------------------------------------------- batched evaluation


def _key(key: tuple) -> tuple:
    """CVXPY's normalized index key as a numpy key (a reversed slice through index 0 has
    stop -1 in CVXPY, which numpy would read as 'the last element')."""
    out = []
    for k in key:
        if (
            isinstance(k, slice)
            and k.step is not None
            and k.step < 0
            and k.stop is not None
            and k.stop < 0
        ):
            k = slice(k.start, None, k.step)
        out.append(k)
    return tuple(out)


def _pad(value: np.ndarray, arg_ndim: int, out_ndim: int) -> np.ndarray:
    """Insert axes after the batch axis so that numpy broadcasting matches CVXPY's."""
    if arg_ndim >= out_ndim:
        return value
    return value.reshape(value.shape[:1] + (1,) * (out_ndim - arg_ndim) + value.shape[1:])


def _concat(expr: cp.Expression, arrays: list[np.ndarray], trailing: int) -> np.ndarray:
    """Batched ``hstack``/``vstack``; ``trailing`` extra axes (the Jacobian's) follow."""
    nb = max(a.shape[0] for a in arrays)
    out = []
    for arg, a in zip(expr.args, arrays):
        a = np.broadcast_to(a, (nb,) + a.shape[1:])
        tail = a.shape[a.ndim - trailing :] if trailing else ()
        shape = arg.shape
        if isinstance(expr, Hstack):
            shape = shape if len(shape) >= 1 else (1,)
        else:
            shape = shape if len(shape) >= 2 else (1,) + (shape if shape else (1,))
        out.append(a.reshape((nb,) + shape + tail))
    if isinstance(expr, Hstack):
        axis = 1 if len(expr.args[0].shape) <= 1 else 2
    else:
        axis = 1
    res = np.concatenate(out, axis=axis)
    return res.reshape(
        (nb,) + expr.shape + res.shape[res.ndim - trailing :] if trailing else (nb,) + expr.shape
    )


def _reshape(
    a: np.ndarray, old: tuple[int, ...], new: tuple[int, ...], order: str, trailing: int
) -> np.ndarray:
    """Per-example reshape of ``a`` (``(nb, *old, *tail)``) in CVXPY's ``order``."""
    nb = a.shape[0]
    tail = a.shape[a.ndim - trailing :] if trailing else ()
    m = nb * int(np.prod(tail, dtype=int))
    r = np.moveaxis(a, tuple(range(1 + len(old), a.ndim)), tuple(range(1, 1 + trailing)))
    r = r.reshape((m,) + old)
    if order == "F":
        r = r.transpose((0,) + tuple(range(len(old), 0, -1)))
        r = r.reshape((m,) + new[::-1])
        r = r.transpose((0,) + tuple(range(len(new), 0, -1)))
    else:
        r = r.reshape((m,) + new)
    r = r.reshape((nb,) + tail + new)
    return np.moveaxis(r, tuple(range(1, 1 + trailing)), tuple(range(1 + len(new), r.ndim)))


def _matmul(a: np.ndarray, b: np.ndarray, a_ndim: int, b_ndim: int) -> np.ndarray:
    spec = {
        (1, 1): "...k,...k->...",
        (2, 1): "...mk,...k->...m",
        (1, 2): "...k,...kp->...p",
        (2, 2): "...mk,...kp->...mp",
    }.get((a_ndim, b_ndim))
    if spec is None:
        raise Unsupported("matmul of these shapes")
    return np.einsum(spec, a, b)


def evaluate(expr: cp.Expression, leaves: Mapping[int, np.ndarray], n: int) -> np.ndarray:
    """Evaluate ``expr`` for ``n`` examples at once.

    Parameters
    ----------
    expr : cvxpy.Expression
    leaves : mapping from a leaf's id to its batched value, of shape ``(n, *leaf.shape)`` or
        ``(1, *leaf.shape)`` (broadcast over examples).
    n : int

    Returns
    -------
    numpy.ndarray of shape ``(n, *expr.shape)``
    """
    out = _eval(expr, leaves, n)
    return np.broadcast_to(out, (n,) + expr.shape)


def _eval(expr: cp.Expression, leaves: Mapping[int, np.ndarray], n: int) -> np.ndarray:
    key = getattr(expr, "id", None)
    if key is not None and key in leaves:
        return np.asarray(leaves[key], dtype=float)
    if isinstance(expr, Constant) or (
        not expr.args and not expr.variables() and not expr.parameters()
    ):
        return np.asarray(expr.value, dtype=float).reshape((1,) + expr.shape)
    if isinstance(expr, (Variable, Parameter)):
        raise KeyError(f"no value given for {expr}")
    vals = [_eval(a, leaves, n) for a in expr.args]
    nd = len(expr.shape)
    try:
        out = _vectorized(expr, vals, nd)
    except Unsupported:
        out = None
    if out is None:
        out = _per_example(expr, vals, n)
    return out


def _vectorized(expr: cp.Expression, vals: list[np.ndarray], nd: int) -> np.ndarray | None:
    args = expr.args
    if isinstance(expr, AddExpression):
        out = _pad(vals[0], len(args[0].shape), nd)
        for a, v in zip(args[1:], vals[1:]):
            out = out + _pad(v, len(a.shape), nd)
        return out
    if isinstance(expr, NegExpression):
        return -vals[0]
    if isinstance(expr, multiply):
        return _pad(vals[0], len(args[0].shape), nd) * _pad(vals[1], len(args[1].shape), nd)
    if isinstance(expr, DivExpression):
        return _pad(vals[0], len(args[0].shape), nd) / _pad(vals[1], len(args[1].shape), nd)
    if isinstance(expr, MulExpression):
        a, b = args
        if a.shape == () or b.shape == ():
            return _pad(vals[0], len(a.shape), nd) * _pad(vals[1], len(b.shape), nd)
        return _matmul(vals[0], vals[1], len(a.shape), len(b.shape))
    if isinstance(expr, index):
        out = vals[0][(slice(None),) + _key(expr.key)]
        return out.reshape(out.shape[:1] + expr.shape)
    if isinstance(expr, Sum):
        if expr.axis is None:
            axes = tuple(range(1, vals[0].ndim))
            out = vals[0].sum(axis=axes)
            return out.reshape(out.shape[:1] + expr.shape)
        if isinstance(expr.axis, int):
            return vals[0].sum(axis=expr.axis + 1, keepdims=expr.keepdims)
        raise Unsupported("sum over several axes")
    if isinstance(expr, Promote):
        v = vals[0].reshape(vals[0].shape[:1] + (1,) * nd)
        return np.broadcast_to(v, v.shape[:1] + expr.shape)
    if isinstance(expr, (Hstack, Vstack)):
        return _concat(expr, vals, 0)
    if isinstance(expr, cp_reshape):
        return _reshape(vals[0], args[0].shape, expr.shape, expr.order, 0)
    if getattr(expr, "axis", 0) is None and len(args) >= 1:
        reduced = _reduction(expr, vals)
        if reduced is not None:
            # shaped as the atom (``keepdims=True`` keeps a one-entry axis per dimension:
            # a flat (n,) broadcast against an (n, 1) operand to (n, n), summing examples)
            return reduced.reshape(reduced.shape[:1] + expr.shape)
    if isinstance(expr, Elementwise):
        shaped = [_pad(v, len(a.shape), nd) for a, v in zip(args, vals)]
        b = np.broadcast_shapes(*(s.shape for s in shaped))
        out = np.asarray(expr.numeric([np.broadcast_to(s, b) for s in shaped]), dtype=float)
        if out.shape != b:
            raise Unsupported("elementwise numeric changed the shape")
        return out
    return None


def _reduction(expr: cp.Expression, vals: list[np.ndarray]) -> np.ndarray | None:
    """``(n,)``: a reduction of its whole argument (a norm, a maximum, log-sum-exp), per
    example; None for another atom."""
    flat = vals[0].reshape(vals[0].shape[0], -1)
    if isinstance(expr, norm1):
        return np.abs(flat).sum(axis=1)
    if isinstance(expr, norm_inf):
        return np.abs(flat).max(axis=1)
    if isinstance(expr, Pnorm):
        p = float(expr.p)
        if p == 2.0:
            return np.linalg.norm(flat, axis=1)
        if p >= 1.0:
            return np.sum(np.abs(flat) ** p, axis=1) ** (1.0 / p)
    if isinstance(expr, quad_over_lin):
        return np.sum(flat**2, axis=1) / vals[1].reshape(-1)
    if isinstance(expr, cp_max):
        return flat.max(axis=1)
    if isinstance(expr, log_sum_exp):
        return logsumexp(flat, axis=1)
    return None


def _per_example(expr: cp.Expression, vals: list[np.ndarray], n: int) -> np.ndarray:
    """Fallback: call the atom's own ``numeric`` once per example."""
    if all(v.shape[0] == 1 for v in vals):
        out = np.asarray(expr.numeric([v[0] for v in vals]), dtype=float)
        return out.reshape((1,) + expr.shape)
    full = [np.broadcast_to(v, (n,) + v.shape[1:]) for v in vals]
    rows = [np.asarray(expr.numeric([v[i] for v in full]), dtype=float) for i in range(n)]
    return np.stack(rows).reshape((n,) + expr.shape)


# ----------------------------------------------------------------------------- affine jets


@dataclass(frozen=True, slots=True)
class Jet:
    """``value(w) = offset + jac @ w`` per example; ``jac`` is None for variable-free nodes and
    the string ``"identity"`` for the variable itself."""

    offset: np.ndarray  # (nb, *shape)
    jac: np.ndarray | str | None  # (nb, *shape, d)


def affine_jet(
    expr: cp.Expression, variable: Variable, leaves: Mapping[int, np.ndarray], n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per-example offset and Jacobian of an expression affine in ``variable``.

    Returns
    -------
    offset : ndarray of shape ``(n, *expr.shape)``
    jac : ndarray of shape ``(n, *expr.shape, d)``

    Raises
    ------
    Unsupported
        When the expression uses an affine atom without a vectorized rule here.
    """
    d = variable.size
    jet = _jet(expr, variable, leaves, n)
    offset = np.broadcast_to(jet.offset, (n,) + expr.shape)
    jac = _materialize(jet.jac, expr.shape, d)
    return offset, np.broadcast_to(jac, (n,) + expr.shape + (d,))


def _materialize(jac: np.ndarray | str | None, shape: tuple[int, ...], d: int) -> np.ndarray:
    if jac is None:
        return np.zeros((1,) + shape + (d,))
    if isinstance(jac, str):
        return np.eye(d).reshape((1, d, d))
    return jac


def _jet(
    expr: cp.Expression,
    variable: Variable,
    leaves: Mapping[int, np.ndarray],
    n: int,
    at: np.ndarray | None = None,
) -> Jet:
    """The jet of ``expr``: with ``at`` None, offset and Jacobian of an affine expression; with
    ``at`` (the variable's value, ``(1, d)`` or ``(n, d)``), value and (sub)gradient there."""
    if not expr.variables():
        return Jet(_eval(expr, leaves, n), None)
    if getattr(expr, "id", None) == variable.id:
        if len(variable.shape) != 1:
            raise Unsupported("the variable must be a vector")
        return Jet(np.zeros((1, variable.size)) if at is None else at, "identity")
    if not expr.is_affine():
        if at is None:
            raise Unsupported("not affine")
        if not isinstance(expr, _LINEAR):
            return _nonlinear_jet(expr, variable, leaves, n, at)
    d = variable.size
    nd = len(expr.shape)
    args = expr.args
    if isinstance(expr, AddExpression):
        offset: Any = 0.0
        jac = None
        for a in args:
            j = _jet(a, variable, leaves, n, at)
            offset = offset + _pad(j.offset, len(a.shape), nd)
            if j.jac is not None:
                jm = _pad(_materialize(j.jac, a.shape, d), len(a.shape) + 1, nd + 1)
                jac = jm if jac is None else jac + jm
        return Jet(np.asarray(offset), jac)
    if isinstance(expr, NegExpression):
        j = _jet(args[0], variable, leaves, n, at)
        return Jet(-j.offset, -_materialize(j.jac, args[0].shape, d))
    if isinstance(expr, (multiply, DivExpression)) or (
        isinstance(expr, MulExpression) and (args[0].shape == () or args[1].shape == ())
    ):
        a, b = args
        if a.variables() and b.variables():
            raise Unsupported("a product of two expressions in the variable")
        if isinstance(expr, DivExpression):
            if b.variables():
                raise Unsupported("division by a variable")
            j = _jet(a, variable, leaves, n, at)
            den = _pad(_eval(b, leaves, n), len(b.shape), nd)
            jac = _pad(_materialize(j.jac, a.shape, d), len(a.shape) + 1, nd + 1)
            return Jet(_pad(j.offset, len(a.shape), nd) / den, jac / den[..., None])
        if a.variables():
            a, b = b, a
        fac = _pad(_eval(a, leaves, n), len(a.shape), nd)
        j = _jet(b, variable, leaves, n, at)
        jac = _pad(_materialize(j.jac, b.shape, d), len(b.shape) + 1, nd + 1)
        return Jet(fac * _pad(j.offset, len(b.shape), nd), fac[..., None] * jac)
    if isinstance(expr, MulExpression):
        a, b = args
        if not a.variables():
            mat = _eval(a, leaves, n)
            j = _jet(b, variable, leaves, n, at)
            offset = _matmul(mat, j.offset, len(a.shape), len(b.shape))
            if isinstance(j.jac, str):
                if len(a.shape) == 1:
                    return Jet(offset, mat)
                if len(a.shape) == 2:
                    return Jet(offset, mat)
                raise Unsupported("matmul shape")
            jm = _materialize(j.jac, b.shape, d)
            if len(a.shape) == 2 and len(b.shape) == 1:
                return Jet(offset, np.einsum("...mk,...kd->...md", mat, jm))
            if len(a.shape) == 1 and len(b.shape) == 1:
                return Jet(offset, np.einsum("...k,...kd->...d", mat, jm))
            if len(a.shape) == 1 and len(b.shape) == 2:  # x @ W, W a matrix of the variable
                return Jet(offset, np.einsum("...k,...kpd->...pd", mat, jm))
            if len(a.shape) == 2 and len(b.shape) == 2:
                return Jet(offset, np.einsum("...mk,...kpd->...mpd", mat, jm))
            raise Unsupported("matmul shape")
        if not b.variables() and len(a.shape) == 1 and len(b.shape) == 1:
            vec = _eval(b, leaves, n)
            j = _jet(a, variable, leaves, n, at)
            offset = np.einsum("...k,...k->...", j.offset, vec)
            if isinstance(j.jac, str):
                return Jet(offset, vec)
            return Jet(offset, np.einsum("...kd,...k->...d", _materialize(j.jac, a.shape, d), vec))
        if not b.variables() and len(a.shape) == 2 and len(b.shape) in (1, 2):
            # W @ x or W @ B with W a matrix of the variable (``cp.reshape(w, (K, d)) @ x``,
            # the multinomial scores)
            mat = _eval(b, leaves, n)
            j = _jet(a, variable, leaves, n, at)
            jm = _materialize(j.jac, a.shape, d)
            if len(b.shape) == 1:
                offset = np.einsum("...mk,...k->...m", j.offset, mat)
                return Jet(offset, np.einsum("...mkd,...k->...md", jm, mat))
            offset = np.einsum("...mk,...kp->...mp", j.offset, mat)
            return Jet(offset, np.einsum("...mkd,...kp->...mpd", jm, mat))
        raise Unsupported("matmul with the variable on this side")
    if isinstance(expr, index):
        j = _jet(args[0], variable, leaves, n, at)
        key = (slice(None),) + _key(expr.key)
        off = np.asarray(j.offset)[key]
        jac = _materialize(j.jac, args[0].shape, d)[key]
        return Jet(
            off.reshape(off.shape[:1] + expr.shape), jac.reshape(jac.shape[:1] + expr.shape + (d,))
        )
    if isinstance(expr, Sum):
        j = _jet(args[0], variable, leaves, n, at)
        jm = _materialize(j.jac, args[0].shape, d)
        if expr.axis is None:
            axes = tuple(range(1, j.offset.ndim))
            off = j.offset.sum(axis=axes).reshape(j.offset.shape[:1] + expr.shape)
            jac = jm.sum(axis=tuple(range(1, jm.ndim - 1)))
            jac = jac.reshape(jm.shape[:1] + expr.shape + (d,))
            return Jet(off, jac)
        if isinstance(expr.axis, int):
            # the batch axis first, the variable's last: a negative axis counts past it
            ax = expr.axis + 1 if expr.axis >= 0 else expr.axis
            off = np.asarray(j.offset).sum(axis=ax, keepdims=expr.keepdims)
            jac = jm.sum(axis=ax if expr.axis >= 0 else ax - 1, keepdims=expr.keepdims)
            return Jet(off, jac)
        raise Unsupported("sum along several axes")
    if isinstance(expr, Promote):
        j = _jet(args[0], variable, leaves, n, at)
        jm = _materialize(j.jac, args[0].shape, d)
        off = np.broadcast_to(
            j.offset.reshape(j.offset.shape[:1] + (1,) * nd), j.offset.shape[:1] + expr.shape
        )
        jac = np.broadcast_to(
            jm.reshape(jm.shape[:1] + (1,) * nd + (d,)), jm.shape[:1] + expr.shape + (d,)
        )
        return Jet(off, jac)
    if isinstance(expr, cp_reshape):
        j = _jet(args[0], variable, leaves, n, at)
        off = _reshape(np.asarray(j.offset), args[0].shape, expr.shape, expr.order, 0)
        jac = _reshape(
            _materialize(j.jac, args[0].shape, d), args[0].shape, expr.shape, expr.order, 1
        )
        return Jet(off, jac)
    if isinstance(expr, (Hstack, Vstack)):
        jets = [_jet(a, variable, leaves, n, at) for a in args]
        off = _concat(expr, [j.offset for j in jets], 0)
        jac = _concat(expr, [_materialize(j.jac, a.shape, d) for j, a in zip(jets, args)], 1)
        return Jet(off, jac)
    if isinstance(expr, cp_transpose) and expr.axes is None and len(args[0].shape) == 2:
        # W.T of a matrix of the variable (``x @ cp.reshape(w, (K, d)).T``)
        j = _jet(args[0], variable, leaves, n, at)
        off = np.swapaxes(np.asarray(j.offset), -1, -2)
        jac = np.swapaxes(_materialize(j.jac, args[0].shape, d), -2, -3)
        return Jet(off, jac)
    raise Unsupported(f"affine atom {type(expr).__name__}")


# ----------------------------------------------------------------------------- subgradient jets

#: atoms that act linearly on their arguments (the jet rules above apply to any argument)
_LINEAR = (
    AddExpression,
    NegExpression,
    multiply,
    DivExpression,
    MulExpression,
    index,
    Sum,
    Promote,
    cp_reshape,
    Hstack,
    Vstack,
)


def subgradient_jet(
    expr: cp.Expression,
    variable: Variable,
    leaves: Mapping[int, np.ndarray],
    n: int,
    at: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-example value and (sub/super)gradient of a DCP expression at given points.

    The chain rule runs forward through the tree, batched over examples: linear atoms map the
    Jacobian as they map values; each nonlinear atom multiplies its arguments' Jacobians by a
    (sub/super)gradient of the atom at the arguments' values (a subgradient of a convex atom, a
    supergradient of a concave one, chosen at kinks by a fixed rule: ``sign(0) = 0``, the first
    maximizing argument, zero slope where ``max(x, 0)**p`` is flat). For a DCP expression this
    gives a true subgradient of a convex expression (the DCP composition rules make every
    factor of the chain rule carry the right sign). Atoms without a vectorized rule fall back to
    their own ``_grad``, example by example.

    Parameters
    ----------
    expr : cvxpy.Expression
    variable : cvxpy.Variable
        The vector variable, shape ``(d,)``.
    leaves : mapping from a leaf's id to its batched value (see :func:`evaluate`).
    n : int
    at : ndarray of shape ``(d,)`` or ``(n, d)``
        The point (one for all examples, or one per example).

    Returns
    -------
    value : ndarray of shape ``(n, *expr.shape)``
    jac : ndarray of shape ``(n, *expr.shape, d)``

    Raises
    ------
    Unsupported
        When an atom has neither a vectorized rule nor a gradient from CVXPY at the point.
    """
    d = variable.size
    pts = np.asarray(at, float)
    pts = pts.reshape(1, d) if pts.ndim == 1 else pts.reshape(-1, d)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        jet = _jet(expr, variable, leaves, n, pts)
    value = np.broadcast_to(jet.offset, (n,) + expr.shape)
    jac = np.broadcast_to(_materialize(jet.jac, expr.shape, d), (n,) + expr.shape + (d,))
    return value, jac


def _onehot(stack: np.ndarray, pick: np.ndarray) -> np.ndarray:
    """``(m, ...)`` weights with a 1 at index ``pick`` along the first axis."""
    return (
        np.arange(stack.shape[0]).reshape((-1,) + (1,) * (stack.ndim - 1)) == pick[None]
    ).astype(float)


def _elementwise_slopes(expr: cp.Expression, vals: list[np.ndarray]) -> list[np.ndarray] | None:
    """Partial (sub/super)derivatives of an elementwise atom w.r.t. each argument, or None."""
    x = vals[0]
    if isinstance(expr, cp_abs):
        return [np.sign(x)]
    if isinstance(expr, (cp_maximum, cp_minimum)):
        stack = np.stack(vals)
        pick = (
            np.argmax(stack, axis=0) if isinstance(expr, cp_maximum) else np.argmin(stack, axis=0)
        )
        return list(_onehot(stack, pick))
    if isinstance(expr, Power):
        p = float(expr.p.value)
        if p == 0.0:
            return [np.zeros_like(x)]
        if p == 1.0:
            return [np.ones_like(x)]
        if p > 1.0 and p.is_integer() and int(p) % 2 == 0:  # x**p = |x|**p
            return [p * np.sign(x) * np.abs(x) ** (p - 1.0)]
        if p > 1.0:  # domain x >= 0; flat (slope 0) at 0
            return [p * np.maximum(x, 0.0) ** (p - 1.0)]
        return [p * x ** (p - 1.0)]
    if isinstance(expr, cp_exp):
        return [np.exp(x)]
    if isinstance(expr, cp_logistic):
        return [expit(x)]
    if isinstance(expr, cp_huber):
        M = float(np.asarray(expr.M.value).reshape(()))
        return [np.clip(2.0 * x, -2.0 * M, 2.0 * M)]
    return None


def _vector_slope(expr: cp.Expression, flat: np.ndarray) -> np.ndarray | None:
    """A (sub/super)gradient ``(nb, k)`` of a vector atom (axis None) at the rows of ``flat``."""
    if isinstance(expr, norm1):
        return np.sign(flat)
    if isinstance(expr, norm_inf):
        mag = np.abs(flat)
        return _onehot(mag.T, np.argmax(mag, axis=1)).T * np.sign(flat)
    if isinstance(expr, Pnorm):
        p = float(expr.p)
        nrm = np.sum(np.abs(flat) ** p, axis=1, keepdims=True) ** (1.0 / p)
        if p < 1.0:
            return None
        g = np.sign(flat) * (np.abs(flat) / np.where(nrm > 0, nrm, 1.0)) ** (p - 1.0)
        return np.where(nrm > 0, g, 0.0)
    if isinstance(expr, cp_max):
        return _onehot(flat.T, np.argmax(flat, axis=1)).T
    if isinstance(expr, cp_min):
        return _onehot(flat.T, np.argmin(flat, axis=1)).T
    if isinstance(expr, log_sum_exp):
        return softmax(flat, axis=1)
    return None


def _nonlinear_jet(
    expr: cp.Expression,
    variable: Variable,
    leaves: Mapping[int, np.ndarray],
    n: int,
    at: np.ndarray,
) -> Jet:
    d = variable.size
    args = expr.args
    nd = len(expr.shape)
    jets = [_jet(a, variable, leaves, n, at) for a in args]
    vals = [np.asarray(j.offset, float) for j in jets]
    jacs = [None if j.jac is None else _materialize(j.jac, a.shape, d) for j, a in zip(jets, args)]
    if isinstance(expr, Elementwise):
        shaped = [_pad(v, len(a.shape), nd) for a, v in zip(args, vals)]
        b = np.broadcast_shapes(*(v.shape for v in shaped))
        full = [np.broadcast_to(v, b) for v in shaped]
        slopes = _elementwise_slopes(expr, full)
        if slopes is not None:
            value = np.asarray(expr.numeric(full), dtype=float)
            if value.shape != b:
                raise Unsupported("elementwise numeric changed the shape")
            jac = np.zeros(b + (d,))
            for a, jm, g in zip(args, jacs, slopes):
                if jm is not None:
                    jac = jac + g[..., None] * _pad(jm, len(a.shape) + 1, nd + 1)
            return Jet(value, jac)
    elif getattr(expr, "axis", 0) is None and (
        isinstance(expr, (norm1, norm_inf, Pnorm, cp_max, cp_min, log_sum_exp))
        or (isinstance(expr, quad_over_lin) and jacs[1] is None)
    ):
        j0 = jacs[0]
        if j0 is None:
            raise Unsupported("a vector atom of an expression without the variable")
        nb = max(vals[0].shape[0], j0.shape[0])
        flat = np.broadcast_to(vals[0], (nb,) + args[0].shape).reshape(nb, -1)
        jm = np.broadcast_to(j0, (nb,) + args[0].shape + (d,)).reshape(nb, -1, d)
        atom_value: np.ndarray | None
        slope: np.ndarray | None
        if isinstance(expr, quad_over_lin):
            den = vals[1].reshape(-1)
            atom_value = np.sum(flat**2, axis=1) / den
            slope = 2.0 * flat / den[:, None]
        else:
            slope = _vector_slope(expr, flat)
            atom_value = None if slope is None else _vectorized(expr, [flat], 0)
        if slope is not None and atom_value is not None:
            return Jet(
                atom_value.reshape((nb,) + expr.shape),
                np.einsum("nk,nkd->nd", slope, jm).reshape((nb,) + expr.shape + (d,)),
            )
    elif (
        isinstance(expr, QuadForm)
        and jacs[0] is not None
        and jacs[1] is None
        and vals[1].shape[0] == 1
        and len(args[0].shape) <= 1
    ):
        # x^T P x with a constant P: value and gradient (P + P^T) x for every example at
        # once (CVXPY's rule one example at a time: 1.5 s of an extension's certificate at
        # n = 1e4 with a quadratic-form penalty)
        k = args[0].size
        P = np.asarray(vals[1], float).reshape(k, k)
        nb = max(vals[0].shape[0], jacs[0].shape[0])
        x = np.broadcast_to(vals[0], (nb,) + args[0].shape).reshape(nb, k)
        jm = np.broadcast_to(jacs[0], (nb,) + args[0].shape + (d,)).reshape(nb, k, d)
        value = np.einsum("nk,nk->n", x, x @ P.T)
        slope = x @ (P + P.T).T
        return Jet(
            value.reshape((nb,) + expr.shape),
            np.einsum("nk,nkd->nd", slope, jm).reshape((nb,) + expr.shape + (d,)),
        )
    return _grad_per_example(expr, vals, jacs, n, d)


def _fortran_rows(arr: np.ndarray, ndim: int) -> np.ndarray:
    """Flatten the first ``ndim`` axes of ``arr`` in Fortran order (CVXPY's vectorization)."""
    lead = arr.shape[:ndim]
    perm = tuple(range(ndim - 1, -1, -1)) + tuple(range(ndim, arr.ndim))
    return arr.transpose(perm).reshape((int(np.prod(lead, dtype=int)),) + arr.shape[ndim:])


def _grad_per_example(
    expr: cp.Expression, vals: list[np.ndarray], jacs: list, n: int, d: int
) -> Jet:
    """Fallback: the atom's own value and gradient rules, one example at a time."""
    args = expr.args
    full = [np.broadcast_to(v, (n,) + a.shape) for v, a in zip(vals, args)]
    value = np.empty((n,) + expr.shape)
    jac = np.zeros((n, expr.size, d))
    for i in range(n):
        row = [v[i] for v in full]
        value[i] = np.asarray(expr.numeric(row), dtype=float).reshape(expr.shape)
        try:
            grads = expr._grad(row)
        except (NotImplementedError, ValueError, TypeError) as exc:
            raise Unsupported(f"no gradient rule for {type(expr).__name__}") from exc
        for a, jm, g in zip(args, jacs, grads):
            if jm is None:
                continue
            if g is None:
                raise Unsupported(f"CVXPY gives no gradient of {type(expr).__name__} here")
            G = g.toarray() if hasattr(g, "toarray") else np.asarray(g, float)
            G = np.asarray(G, float).reshape(a.size, expr.size)
            Ji = _fortran_rows(np.broadcast_to(jm, (n,) + a.shape + (d,))[i], len(a.shape))
            jac[i] += G.T @ Ji.reshape(a.size, d)
    # back from Fortran-flat to the atom's shape
    shape = expr.shape
    out = jac.reshape((n,) + shape[::-1] + (d,))
    out = out.transpose((0,) + tuple(range(len(shape), 0, -1)) + (len(shape) + 1,))
    return Jet(value, out)
