"""Convex conjugates of the atoms dpcvx certifies exactly.

For an atom ``psi`` and any ``theta`` in the domain of its conjugate ``psi*``, Fenchel-Young gives
``psi(v) >= <theta, v> - psi*(theta)`` for every ``v``. :func:`clip` maps a raw multiplier (the
solver's dual, which may be slightly outside the domain) into the domain, and :func:`conjugate`
evaluates ``psi*`` there. Any clipped ``theta`` gives a valid bound; good duals make it tight.

Elementwise atoms act on arrays of shape ``(n, ...)``; vector atoms on ``(n, k)``. The
nondecreasing atoms of :data:`dpcvx.modeling._structure.MONOTONE` are functions of one real:
``pos_power`` is ``psi(v) = max(v, 0)**p`` (``p > 1``), with
``psi*(t) = (p - 1) (t / p)**(p / (p - 1))`` on ``t >= 0``; ``pos_huber`` is
``psi(v) = huber(max(v, 0), M)``, with ``psi*(t) = t**2 / 4`` on ``0 <= t <= 2M``. Both
conjugates are nondecreasing on their domain, so evaluating them at an upper bound of ``t``
rounds the bound to the safe side. The vector atom ``norm2_power`` is ``psi(v) = ||v||_2**p``
(``p > 1``), with ``psi*(theta) = (p - 1) (||theta||_2 / p)**(p / (p - 1))`` on all of
``R^k``: ``pos_power``'s conjugate at ``||theta||_2`` (``sup_v <theta, v> - ||v||**p =
sup_{r >= 0} r ||theta|| - r**p``), evaluated at an upper bound of the float norm.
"""

from __future__ import annotations

import numpy as np
from scipy.special import xlogy

__all__ = ["clip", "conjugate", "monotone_multipliers", "simplex_defect"]


def _project_rows_simplex(theta: np.ndarray) -> np.ndarray:
    """Row-wise Euclidean projection onto the probability simplex. A row with an entry over
    one in size is shifted by its largest entry first (the projection is the same for
    ``theta + c 1``): past ``2^53`` the ``- 1`` of the threshold was lost to rounding, and a
    row of multipliers of 1e104 (a tilted example of weight about zero, its duals divided by
    it) came back summing to 1e104, which the certificates charged as the defect."""
    n, k = theta.shape
    big = np.max(np.abs(theta), axis=1, initial=0.0) > 1.0
    if big.any():
        theta = theta.copy()
        theta[big] -= np.max(theta[big], axis=1, keepdims=True)
    srt = -np.sort(-theta, axis=1)
    css = np.cumsum(srt, axis=1) - 1.0
    idx = np.arange(1, k + 1)
    cond = srt - css / idx > 0
    rho = k - 1 - np.argmax(cond[:, ::-1], axis=1)
    tau = css[np.arange(n), rho] / (rho + 1)
    return np.maximum(theta - tau[:, None], 0.0)


def _need(param: float | None, kind: str) -> float:
    """The parameter a ``kind`` always carries (huber's ``M``, pos_power's ``p``)."""
    if param is None:
        raise KeyError(f"{kind} needs its parameter")
    return float(param)


def clip(kind: str, theta: np.ndarray, param: float | None = None) -> np.ndarray:
    """Map ``theta`` into the domain of the conjugate of atom ``kind``."""
    theta = np.nan_to_num(np.asarray(theta, float))
    if kind == "abs":
        return np.clip(theta, -1.0, 1.0)
    if kind == "square":
        return theta
    if kind == "huber":
        return np.clip(theta, -2 * _need(param, kind), 2 * _need(param, kind))
    if kind == "logistic":
        return np.clip(theta, 0.0, 1.0)
    if kind in ("exp", "pos_power"):
        return np.maximum(theta, 0.0)
    if kind == "pos_huber":
        return np.clip(theta, 0.0, 2 * _need(param, kind))
    if kind in ("sum_squares", "norm2_power"):
        return theta
    if kind == "norm2":
        nrm = np.linalg.norm(theta, axis=1, keepdims=True)
        return theta / np.maximum(nrm * (1 + 4 * np.finfo(float).eps), 1.0)
    if kind == "norm1":
        return np.clip(theta, -1.0, 1.0)
    if kind == "norminf":
        nrm = np.sum(np.abs(theta), axis=1, keepdims=True)
        return theta / np.maximum(nrm * (1 + 4 * theta.shape[1] * np.finfo(float).eps), 1.0)
    if kind in ("max", "log_sum_exp"):
        return _project_rows_simplex(theta)
    raise KeyError(kind)


def conjugate(kind: str, theta: np.ndarray, param: float | None = None) -> np.ndarray:
    """``psi*(theta)`` (per row for vector atoms, elementwise otherwise), rounded upward."""
    eps = np.finfo(float).eps
    if kind in ("abs", "norm2", "norm1", "norminf", "max"):
        return (
            np.zeros(theta.shape[0])
            if kind in ("norm2", "norm1", "norminf", "max")
            else np.zeros_like(theta)
        )
    if kind in ("square", "huber", "pos_huber"):
        val = theta**2 / 4
        return val * (1 + 4 * eps)
    if kind == "pos_power":
        p = _need(param, kind)
        q = p / (p - 1.0)
        base = np.maximum(theta, 0.0) / p
        with np.errstate(divide="ignore", over="ignore"):
            val = (p - 1.0) * base**q
            # relative error of the float power (its argument and exponent are rounded too)
            rel = 16 * eps * (4.0 + q * (2.0 + np.abs(np.log(np.where(base > 0, base, 1.0)))))
        return val * (1 + rel) + np.where(base > 0, np.finfo(float).tiny, 0.0)
    if kind == "norm2_power":
        k = theta.shape[1]
        # numpy's norm of k floats is within (k + 2) eps relative of the exact norm
        r_up = np.linalg.norm(theta, axis=1) * (1 + 4 * (k + 2) * eps)
        return conjugate("pos_power", r_up, param)
    if kind == "logistic":
        val = xlogy(theta, theta) + xlogy(1 - theta, 1 - theta)
        return val + 8 * eps
    if kind == "exp":
        val = xlogy(theta, theta) - theta
        return val + 8 * eps * (1 + np.abs(val))
    if kind == "sum_squares":
        return param * np.sum(theta**2, axis=1) / 4 * (1 + 8 * eps * theta.shape[1])
    if kind == "log_sum_exp":
        val = np.sum(xlogy(theta, theta), axis=1)
        return val + 8 * eps * theta.shape[1]
    raise KeyError(kind)


def simplex_defect(theta: np.ndarray) -> np.ndarray:
    """``|sum(theta) - 1|`` per row: the rounding left after a projection onto the simplex."""
    return np.abs(np.sum(theta, axis=1) - 1.0) + 4 * theta.shape[1] * np.finfo(float).eps


def monotone_multipliers(
    kind: str,
    param: float,
    vals: np.ndarray,
    duals: list[np.ndarray | None],
    reach: np.ndarray,
    ranges: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The multipliers ``lam_j >= 0`` of the pieces of ``psi(max_j E_j)`` (``psi`` one of the
    nondecreasing atoms ``pos_power``, ``pos_huber``) that dpcvx's certificates use, for the
    pieces' values ``vals`` ``(m, ...)`` at the point: the ``duals`` (one per piece, None for
    none; non-finite and negative entries count as zero) or, without any, ``psi'`` at the
    point on its active piece. Their sum is capped below ``psi'(reach)``, the largest slope
    ``psi`` takes where ``max_j E_j <= reach`` (larger multipliers never help: ``reach`` an
    upper bound of ``max_j E_j`` on the domain, zero or less where the term is zero there; for
    ``pos_huber``, whose conjugate is finite up to ``2M`` only, a sum of several is capped a
    few roundings below). Returns
    ``(lam, t_up, conj)``: ``t_up`` an upper bound of the exact sum of ``lam`` in the
    conjugate's domain, and ``conj = psi*(t_up)``, at least ``psi*`` of that sum (``psi*`` is
    nondecreasing on its domain).

    ``ranges``: each piece's lowest and highest value on the domain ``(m, ...)``. Where one
    piece wins on all of it and stays past ``pos_huber``'s knee ``M`` there, the term is
    ``2M E_j - M^2`` on the domain, and that piece's multiplier is set to ``2M`` exactly (the
    minimizer's own; a solver's dual a relative 1e-5 off it cost ``1e-5 |E_j|``, 4e3 for an
    argument of 1e8)."""
    eps = np.finfo(float).eps
    m = vals.shape[0]
    reach = np.maximum(reach, 0.0)
    if kind == "pos_power":
        with np.errstate(over="ignore"):
            t_max = np.minimum(param * reach ** (param - 1.0), 1e150)
    else:  # pos_huber
        t_max = np.minimum(2.0 * reach, 2.0 * param)
    if all(dl is None for dl in duals):
        # no duals: the slope of psi at the candidate, on its active piece
        g_hat = np.maximum(vals.max(axis=0), 0.0)
        if kind == "pos_power":
            slope_hat = param * g_hat ** (param - 1.0)
        else:
            slope_hat = np.minimum(2.0 * g_hat, 2.0 * param)
        lam = slope_hat[None] * np.eye(m)[np.argmax(vals, axis=0)].transpose(
            (vals.ndim - 1,) + tuple(range(vals.ndim - 1))
        )
    else:
        lam = np.stack(
            [
                np.zeros(vals.shape[1:])
                if dl is None
                else np.maximum(np.nan_to_num(dl, posinf=0.0, neginf=0.0), 0.0)
                for dl in duals
            ]
        )
    if kind == "pos_huber" and ranges is not None:
        low, high = ranges
        win = np.argmax(vals, axis=0)
        pick = np.arange(m).reshape((m,) + (1,) * (vals.ndim - 1)) == win[None]
        low_win = np.max(np.where(pick, low, -np.inf), axis=0)
        high_rest = np.max(np.where(pick, -np.inf, high), axis=0)
        past = (low_win > high_rest) & (low_win > param)
        lam = np.where(past[None], np.where(pick, 2.0 * param, 0.0), lam)
    total = lam.sum(axis=0)
    # a sum of several multipliers is rounded: kept below pos_huber's bound 2M by a margin (a
    # single one is exact, and pos_power's domain has no bound)
    several = np.count_nonzero(lam, axis=0) > 1
    cap = np.where(several & (kind == "pos_huber"), t_max * (1 - 4 * m * eps), t_max)
    lam = lam * np.where(total > cap, cap / np.where(total > 0, total, 1.0), 1.0)[None]
    # (a single multiplier scaled onto the cap can round an ulp above it: clipped back)
    lam = np.clip(lam, 0.0, np.where(several, np.inf, cap)[None])
    t_up = lam.sum(axis=0) * (1 + 2 * m * eps)
    if kind == "pos_huber":
        t_up = np.minimum(t_up, 2.0 * param)  # the sum is below 2M by the cap above
    t_up = clip(kind, t_up, param)
    return lam, t_up, conjugate(kind, t_up, param)
