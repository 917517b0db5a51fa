"""Second-order models of smooth losses, compiled once per declaration.

A loss whose every term is ``weight * psi(E_i(w))`` with ``E_i`` affine and ``psi`` a smooth
catalogue atom (affine, square, Huber, logistic, exp, sum of squares, log-sum-exp) has, with
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

import weakref
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, softmax

from dpcvx.modeling._expressions import Unsupported, affine_jet
from dpcvx.modeling.declaration import Declaration

__all__ = ["SmoothModel", "gram", "smooth_model"]

_SCALAR = ("affine", "square", "huber", "logistic", "exp")
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
                out += blk.weight * _psi(blk, v).reshape(self.n, -1).sum(axis=1)
        return out

    def value_grad(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        """The mean loss and its gradient at ``w``."""
        value = 0.0
        grad = np.zeros(self.d)
        with np.errstate(over="ignore", invalid="ignore"):
            for blk in self.blocks:
                v = self._args(blk, w)
                value += blk.weight * float(np.sum(_psi(blk, v)))
                grad += blk.weight * (blk.A.T @ _dpsi(blk, v))
        return value / self.n, grad / self.n

    def multipliers(self, w: np.ndarray) -> list[list[np.ndarray] | None]:
        """Per term, the derivative of its atom at ``w`` for each entry of its argument,
        shaped ``(n, *argument shape)`` (None for an affine term): the multipliers of the
        certificate's minorants, which are tight at a minimizer."""
        out: list[list[np.ndarray] | None] = []
        with np.errstate(over="ignore", invalid="ignore"):
            for blk in self.blocks:
                if blk.kind == "affine":
                    out.append(None)
                    continue
                theta = _dpsi(blk, self._args(blk, w))
                out.append([theta.reshape((self.n,) + blk.shape)])
        return out

    def hessian(self, w: np.ndarray) -> np.ndarray:
        """``(d, d)``: the Hessian of the mean loss at ``w``."""
        H = np.zeros((self.d, self.d))
        with np.errstate(over="ignore", invalid="ignore"):
            for blk in self.blocks:
                if blk.kind == "affine":
                    continue
                v = self._args(blk, w)
                if blk.kind == "log_sum_exp":
                    p = softmax(v.reshape(self.n, blk.k), axis=1)
                    H += blk.weight * (blk.A.T @ (blk.A * p.reshape(-1, 1)))
                    G = np.einsum("nk,nkd->nd", p, blk.A.reshape(self.n, blk.k, self.d))
                    H -= blk.weight * (G.T @ G)
                    continue
                c = blk.weight * _d2psi(blk, v)
                H += gram(blk.A, c)
        return H / self.n


def gram(A: np.ndarray, c: np.ndarray, minus: np.ndarray | None = None) -> np.ndarray:
    """``M^T diag(c) M`` for ``M = A`` (or ``A - minus``), in row chunks of a few megabytes
    (no temporary of the data's size: allocating one costs more than the arithmetic):
    symmetric rank-k updates (BLAS ``syrk``, half a matrix product's work) when ``c >= 0``,
    matrix products otherwise."""
    from scipy.linalg.blas import dsyrk

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
            B = block * np.sqrt(cb)[:, None]  # C order: its transpose is a Fortran view
            H += dsyrk(1.0, B.T, trans=0, lower=0)
        else:
            H += block.T @ (block * cb[:, None])
    if psd:
        H = np.triu(H) + np.triu(H, 1).T
    return H


#: rows times columns of one chunk of :func:`gram`
_CHUNK = 1 << 18


def _psi(blk: _Block, v: np.ndarray) -> np.ndarray:
    kind = blk.kind
    if kind == "affine":
        return v
    if kind == "square":
        return v * v
    if kind == "huber":
        M = blk.param
        a = np.abs(v)
        return np.where(a <= M, v * v, 2.0 * M * a - M * M)
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
    kind = blk.kind
    if kind == "affine":
        return np.ones_like(v)
    if kind == "square":
        return 2.0 * v
    if kind == "huber":
        return np.clip(2.0 * v, -2.0 * blk.param, 2.0 * blk.param)
    if kind == "logistic":
        return expit(v)
    if kind == "exp":
        return np.exp(v)
    if kind == "sum_squares":
        return 2.0 * v / blk.param
    return softmax(v.reshape(-1, blk.k), axis=1).reshape(-1)


def _d2psi(blk: _Block, v: np.ndarray) -> np.ndarray:
    kind = blk.kind
    if kind == "square":
        return np.full_like(v, 2.0)
    if kind == "huber":
        return np.where(np.abs(v) <= blk.param, 2.0, 0.0)
    if kind == "logistic":
        return expit(v) * expit(-v)
    if kind == "exp":
        return np.exp(v)
    return np.full_like(v, 2.0 / blk.param)  # sum_squares


_CACHE: weakref.WeakKeyDictionary[Declaration, SmoothModel | None] = weakref.WeakKeyDictionary()


def smooth_model(decl: Declaration) -> SmoothModel | None:
    """The declaration's :class:`SmoothModel` (computed once per declaration), or None when a
    term is not one of the smooth catalogue atoms of an affine argument."""
    try:
        return _CACHE[decl]
    except (KeyError, TypeError):
        pass
    model = _build(decl)
    try:
        _CACHE[decl] = model
    except TypeError:  # pragma: no cover - a declaration that cannot be weakly referenced
        pass
    return model


def _build(decl: Declaration) -> SmoothModel | None:
    n, d = decl.n, decl.d
    leaves = decl.derived_values()
    blocks = []
    for term in decl.terms:
        kind = term.kind
        if kind not in _SCALAR + _VECTOR or len(term.args) != 1:
            return None
        if kind in ("huber", "sum_squares") and term.param is None:
            return None
        try:
            offset, jac = affine_jet(term.args[0], decl.variable, leaves, n)
        except Unsupported:
            return None
        b = np.asarray(offset, float).reshape(n, -1)
        k = b.shape[1]
        A = np.ascontiguousarray(np.asarray(jac, float).reshape(n * k, d))
        if not (np.all(np.isfinite(A)) and np.all(np.isfinite(b))):
            return None
        param = float(term.param) if term.param is not None else 1.0
        if kind == "sum_squares" and not param > 0:
            return None
        shape = tuple(np.shape(offset)[1:])
        blocks.append(_Block(kind, float(term.weight), param, A, b.reshape(-1).copy(), k, shape))
    return SmoothModel(n, d, tuple(blocks))
