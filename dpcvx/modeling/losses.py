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
import numpy as np

from dpcvx.errors import InvalidParameterError

__all__ = [
    "absolute",
    "affine",
    "epsilon_insensitive",
    "hinge",
    "huber",
    "logistic",
    "pinball",
    "relu",
    "robust_absolute",
    "robust_hinge",
    "robust_logistic",
    "squared",
]


def _margin(
    score: cp.Expression, label: cp.Expression | np.ndarray | float | None
) -> cp.Expression:
    return cp.multiply(label, score) if label is not None else score


def hinge(
    score: cp.Expression, label: cp.Expression | np.ndarray | float | None = None
) -> cp.Expression:
    """``max(0, 1 - label * score)``; Lipschitz in ``w`` with constant ``max ||label * x||``."""
    return cp.pos(1 - _margin(score, label))


def logistic(
    score: cp.Expression, label: cp.Expression | np.ndarray | float | None = None
) -> cp.Expression:
    """``log(1 + exp(-label * score))``; Lipschitz constant ``max ||label * x||``."""
    return cp.logistic(-_margin(score, label))


def absolute(
    score: cp.Expression, target: cp.Expression | np.ndarray | float = 0.0
) -> cp.Expression:
    """``|score - target|`` (least absolute deviation); Lipschitz constant ``max ||x||``."""
    return cp.abs(score - target)


def relu(score: cp.Expression) -> cp.Expression:
    """``max(0, score)``."""
    return cp.pos(score)


def affine(score: cp.Expression) -> cp.Expression:
    """The score itself (a linear loss)."""
    return score


def pinball(
    score: cp.Expression, target: cp.Expression | np.ndarray | float, tau: float
) -> cp.Expression:
    """Quantile (pinball) loss ``tau * pos(r) + (1 - tau) * neg(r)`` with ``r = target - score``,
    for ``0 < tau < 1``; Lipschitz constant ``max(tau, 1 - tau) * max ||x||``.

    Written as the one maximum ``max(tau r, (tau - 1) r)`` (the same function): dpcvx then
    bounds its slope by the larger piece, ``max(tau, 1 - tau) ||x||``, where the sum of two
    terms would be bounded by the sum of their slopes, ``||x||``."""
    if not 0 < tau < 1:
        raise InvalidParameterError(
            f"The `tau` parameter of `pinball` must lie in (0, 1). Got {tau!r}."
        )
    r = target - score
    return cp.maximum(tau * r, (tau - 1) * r)


def epsilon_insensitive(
    score: cp.Expression, target: cp.Expression | np.ndarray | float, width: float
) -> cp.Expression:
    """``max(0, |score - target| - width)``, written as the one maximum
    ``max(0, r - width, -r - width)`` (equal for ``width >= 0``), whose slope dpcvx bounds by
    ``||x||`` (the sum ``pos(r - width) + pos(-r - width)`` would be bounded by ``2 ||x||``)."""
    if width < 0:
        raise InvalidParameterError(
            f"The `width` parameter of `epsilon_insensitive` must be non-negative. Got {width!r}."
        )
    r = score - target
    return cp.maximum(0, r - width, -r - width)


def squared(
    score: cp.Expression, target: cp.Expression | np.ndarray | float = 0.0
) -> cp.Expression:
    """``(score - target)^2``; Lipschitz only on a bounded domain with bounded data."""
    return cp.square(score - target)


def huber(
    score: cp.Expression, target: cp.Expression | np.ndarray | float = 0.0, threshold: float = 1.0
) -> cp.Expression:
    """CVXPY's Huber function of ``score - target``: ``r^2`` for ``|r| <= M`` and
    ``2 M |r| - M^2`` beyond; Lipschitz constant ``2 M max ||x||``."""
    return cp.huber(score - target, threshold)


def _radius(radius: float, name: str) -> float:
    value = float(radius)
    if not value >= 0 or value == float("inf"):
        raise InvalidParameterError(
            f"The `radius` parameter of `{name}` must be finite and non-negative. Got {radius!r}."
        )
    return value


def robust_hinge(
    features: cp.Expression | np.ndarray,
    variable: cp.Variable,
    label: cp.Expression | np.ndarray | float,
    radius: float,
) -> cp.Expression:
    """The worst-case hinge loss of a linear model under input perturbations of l2 norm at most
    ``radius`` (paper 002, Section 5.2): ``max_{||v|| <= radius} pos(1 - label (x + v).w)
    = pos(1 - label x.w + radius ||w||)`` for ``|label| = 1``. DCP, so adversarially robust
    training goes through the ordinary certified path; Lipschitz constant ``max ||x|| + radius``
    (the perturbed inputs' norm bound, as the paper requires on X + S)."""
    r = _radius(radius, "robust_hinge")
    return cp.pos(1 - label * (features @ variable) + r * cp.norm(variable, 2))


def robust_logistic(
    features: cp.Expression | np.ndarray,
    variable: cp.Variable,
    label: cp.Expression | np.ndarray | float,
    radius: float,
) -> cp.Expression:
    """Worst-case logistic loss under l2 input perturbations of norm at most ``radius``:
    ``log(1 + exp(-label x.w + radius ||w||))`` (logistic is increasing in the negative
    margin); Lipschitz constant ``max ||x|| + radius``."""
    r = _radius(radius, "robust_logistic")
    return cp.logistic(-label * (features @ variable) + r * cp.norm(variable, 2))


def robust_absolute(
    features: cp.Expression | np.ndarray,
    variable: cp.Variable,
    target: cp.Expression | np.ndarray | float,
    radius: float,
) -> cp.Expression:
    """Worst-case absolute error under l2 input perturbations of norm at most ``radius``:
    ``|x.w - target| + radius ||w||``; Lipschitz constant ``max ||x|| + radius``."""
    r = _radius(radius, "robust_absolute")
    return cp.abs(features @ variable - target) + r * cp.norm(variable, 2)
