"""Ready-made per-example losses.

Each helper returns an ordinary CVXPY expression of one example's loss, built from affine scores
of the variable and data parameters. They are conveniences: a user's own DCP loss goes through
exactly the same path. ``score`` below stands for any expression affine in the variable, such as
``x @ w``; ``label`` is a parameter or constant.

All of these are written as sums of scalar atoms applied to affine arguments, the form whose
certificates dpcvx computes exactly (see :mod:`dpcvx.certification`).
"""

from __future__ import annotations

import cvxpy as cp

__all__ = [
    "absolute",
    "affine",
    "epsilon_insensitive",
    "hinge",
    "huber",
    "logistic",
    "pinball",
    "relu",
    "squared",
]


def _margin(score: cp.Expression, label) -> cp.Expression:
    return cp.multiply(label, score) if label is not None else score


def hinge(score: cp.Expression, label=None) -> cp.Expression:
    """``max(0, 1 - label * score)``; Lipschitz in ``w`` with constant ``max ||label * x||``."""
    return cp.pos(1 - _margin(score, label))


def logistic(score: cp.Expression, label=None) -> cp.Expression:
    """``log(1 + exp(-label * score))``; Lipschitz constant ``max ||label * x||``."""
    return cp.logistic(-_margin(score, label))


def absolute(score: cp.Expression, target=0.0) -> cp.Expression:
    """``|score - target|`` (least absolute deviation); Lipschitz constant ``max ||x||``."""
    return cp.abs(score - target)


def relu(score: cp.Expression) -> cp.Expression:
    """``max(0, score)``."""
    return cp.pos(score)


def affine(score: cp.Expression) -> cp.Expression:
    """The score itself (a linear loss)."""
    return score


def pinball(score: cp.Expression, target, tau: float) -> cp.Expression:
    """Quantile (pinball) loss ``tau * pos(r) + (1 - tau) * neg(r)`` with ``r = target - score``,
    for ``0 < tau < 1``; Lipschitz constant ``max(tau, 1 - tau) * max ||x||``."""
    if not 0 < tau < 1:
        raise ValueError(f"The `tau` parameter of `pinball` must lie in (0, 1). Got {tau!r}.")
    r = target - score
    return tau * cp.pos(r) + (1 - tau) * cp.neg(r)


def epsilon_insensitive(score: cp.Expression, target, width: float) -> cp.Expression:
    """``max(0, |score - target| - width)`` written as ``pos(r - width) + pos(-r - width)``
    (equal for ``width >= 0``)."""
    if width < 0:
        raise ValueError(f"The `width` parameter must be non-negative. Got {width!r}.")
    r = score - target
    return cp.pos(r - width) + cp.pos(-r - width)


def squared(score: cp.Expression, target=0.0) -> cp.Expression:
    """``(score - target)^2``; Lipschitz only on a bounded domain with bounded data."""
    return cp.square(score - target)


def huber(score: cp.Expression, target=0.0, threshold: float = 1.0) -> cp.Expression:
    """CVXPY's Huber function of ``score - target``: ``r^2`` for ``|r| <= M`` and
    ``2 M |r| - M^2`` beyond; Lipschitz constant ``2 M max ||x||``."""
    return cp.huber(score - target, threshold)
