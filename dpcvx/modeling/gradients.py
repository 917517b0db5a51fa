"""Per-example (sub)gradients of a declared loss, vectorized over examples.

Each term of the decomposed loss is ``weight * psi(E_i(w))`` with ``E_i`` affine
(per-example Jacobian ``J_i`` from :func:`affine_jet`), so its gradient is
``weight * J_i^T psi'(E_i(w))`` with ``psi'`` a (sub)gradient of the catalogue atom: exact for
smooth atoms, a valid subgradient (sign, argmax piece, ...) for the non-smooth ones. Generic
terms use :func:`dpcvx.modeling._expressions.subgradient_jet` (vectorized over examples), and
only atoms without a rule there fall back to CVXPY's gradient rules, example by example (slow).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, softmax

from dpcvx.modeling._expressions import VALUE_LOCK, Unsupported, affine_jet, subgradient_jet
from dpcvx.modeling._structure import Term
from dpcvx.modeling.declaration import Declaration

__all__ = ["is_smooth", "per_example_gradients"]

_SMOOTH = ("affine", "square", "huber", "logistic", "exp", "sum_squares", "log_sum_exp")


def is_smooth(decl: Declaration) -> bool:
    """Whether every term of the loss is differentiable (the utility theorems of the clipped
    gradient methods need smoothness; privacy does not)."""
    return all(term.kind in _SMOOTH or term.smooth for term in decl.terms)


def per_example_gradients(decl: Declaration, w: np.ndarray) -> np.ndarray:
    """``(n, d)``: a (sub)gradient of ``f(., z_i)`` at ``w`` for every example (entries may
    overflow to inf or NaN for extreme data; callers sanitize them row by row). ``w`` of
    shape ``(n, d)`` gives each example its own point ``w[i]``."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _gradients(decl, w)


def _gradients(decl: Declaration, w: np.ndarray) -> np.ndarray:
    n, d = decl.n, decl.d
    w = np.asarray(w, float)
    w = w.reshape(n, d) if w.ndim == 2 else w.reshape(d)
    leaves = decl.derived_values()
    grad = np.zeros((n, d))
    for term in decl.terms:
        wgt = float(term.weight)
        if term.kind == "generic":
            grad += wgt * _generic(decl, term, w)
            continue
        try:
            jets = [affine_jet(arg, decl.variable, leaves, n) for arg in term.args]
        except Unsupported:
            grad += wgt * _generic(decl, term, w)
            continue
        flat = [
            (np.asarray(o, float).reshape(n, -1), np.asarray(j, float).reshape(n, -1, d))
            for o, j in jets
        ]
        values = [o + (np.einsum("nkd,nd->nk", j, w) if w.ndim == 2 else j @ w) for o, j in flat]
        kind = term.kind
        if kind == "affine":
            grad += wgt * flat[0][1].sum(axis=1)
            continue
        if kind in ("pieces", "pos_power", "pos_huber"):
            shape = term.atom_shape
            stacked = np.stack(
                [_to_shape(v, a.shape, shape, n) for v, a in zip(values, term.args)]
            )  # (m, n, k)
            best = np.argmax(stacked, axis=0)  # (n, k)
            jac = np.stack(
                [_to_shape(j, a.shape, shape, n, (d,)) for (_, j), a in zip(flat, term.args)]
            )
            chosen = np.take_along_axis(jac, best[None, :, :, None], axis=0)[0]  # (n, k, d)
            top = np.maximum(np.max(stacked, axis=0), 0.0)
            if kind == "pos_power":
                chosen = chosen * (term.param_value * top ** (term.param_value - 1.0))[..., None]
            elif kind == "pos_huber":
                chosen = chosen * np.minimum(2.0 * top, 2.0 * term.param_value)[..., None]
            grad += wgt * chosen.sum(axis=1)
            continue
        v, jac = values[0], flat[0][1]
        if kind == "abs":
            theta = np.sign(v)
        elif kind == "logistic":
            theta = expit(v)
        elif kind == "square":
            theta = 2.0 * v
        elif kind == "huber":
            theta = np.clip(2.0 * v, -2.0 * term.param_value, 2.0 * term.param_value)
        elif kind == "exp":
            theta = np.exp(v)
        elif kind == "norm2":
            nrm = np.linalg.norm(v, axis=1, keepdims=True)
            theta = np.where(nrm > 0, v / np.maximum(nrm, 1e-300), 0.0)
        elif kind == "norm1":
            theta = np.sign(v)
        elif kind == "norminf":
            idx = np.argmax(np.abs(v), axis=1)
            theta = np.zeros_like(v)
            theta[np.arange(n), idx] = np.sign(v[np.arange(n), idx])
        elif kind == "max":
            theta = np.zeros_like(v)
            theta[np.arange(n), np.argmax(v, axis=1)] = 1.0
        elif kind == "log_sum_exp":
            theta = softmax(v, axis=1)
        elif kind == "sum_squares":
            theta = 2.0 * v / float(term.param or 1.0)
        else:
            grad += wgt * _generic(decl, term, w)
            continue
        grad += wgt * np.einsum("nk,nkd->nd", theta, jac)
    return grad


def _to_shape(
    arr: np.ndarray,
    arg_shape: tuple[int, ...],
    shape: tuple[int, ...],
    n: int,
    tail: tuple[int, ...] = (),
) -> np.ndarray:
    """Per-example values of an argument (``(n, size, *tail)``) broadcast to the atom's
    ``shape`` as CVXPY broadcasts (trailing axes aligned), flattened to ``(n, k, *tail)``."""
    nd = len(shape)
    arr = arr.reshape((n,) + (1,) * (nd - len(arg_shape)) + arg_shape + tail)
    return np.broadcast_to(arr, (n,) + shape + tail).reshape((n, -1) + tail)


def _generic(decl: Declaration, term: Term, w: np.ndarray) -> np.ndarray:
    """A subgradient of one term for every example: vectorized where every atom has a rule,
    else CVXPY's gradient, example by example (zero where CVXPY gives none)."""
    n, d = decl.n, decl.d
    try:
        _, jac = subgradient_jet(term.expr, decl.variable, decl.derived_values(), n, w)
        return np.asarray(jac, float).reshape(n, d)
    except Unsupported:
        pass
    leaves = decl.derived_values()
    params = [dp.parameter for dp in decl.derived]
    out = np.zeros((n, d))
    with VALUE_LOCK:
        saved = [p.value for p in params] + [decl.variable.value]
        try:
            decl.variable.value = w if w.ndim == 1 else w[0]
            for i in range(n):
                if w.ndim == 2:
                    decl.variable.value = w[i]
                for p in params:
                    p.value = leaves[p.id][i]
                grad = term.expr.grad.get(decl.variable) if term.expr.grad else None
                if grad is not None:
                    out[i] = np.asarray(
                        grad.toarray() if hasattr(grad, "toarray") else grad, float
                    ).reshape(-1)
        finally:
            for p, v in zip(params + [decl.variable], saved):
                p.value = v
    return out
