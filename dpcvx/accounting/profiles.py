"""Exact privacy profiles (core: used by both the mechanisms and the accountant)."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import log_ndtr

from dpcvx._validation import check_nonnegative, check_positive

__all__ = ["gaussian_delta"]


def gaussian_delta(sigma: float, sensitivity: float, epsilon: float) -> float:
    """Exact privacy profile ``delta(epsilon)`` of the Gaussian mechanism.

    Parameters
    ----------
    sigma : float
        Positive finite standard deviation of the noise (per coordinate).
    sensitivity : float
        Positive finite l2 sensitivity ``Delta``.
    epsilon : float
        Non-negative finite privacy parameter.

    Returns
    -------
    float
        The smallest ``delta`` such that adding ``N(0, sigma^2 I)`` to a query of l2 sensitivity
        ``Delta`` is ``(epsilon, delta)``-DP::

            delta = Phi(Delta/(2 sigma) - epsilon sigma/Delta)
                    - exp(epsilon) Phi(-Delta/(2 sigma) - epsilon sigma/Delta)

        rounded up by a few ulps.

    Raises
    ------
    InvalidParameterError
        If an argument is out of range.

    Notes
    -----
    Balle & Wang (2018), "Improving the Gaussian mechanism for differential privacy",
    Theorem 8 (the formula quoted in the digest of paper 002, Section 3.3). The difference is
    evaluated in log space (``scipy.special.log_ndtr`` and ``expm1``) so that it keeps its
    relative accuracy when both terms are tiny.
    """
    owner = "gaussian_delta"
    sig = check_positive(sigma, "sigma", owner)
    delta_sens = check_positive(sensitivity, "sensitivity", owner)
    eps = check_nonnegative(epsilon, "epsilon", owner)
    ratio = delta_sens / sig  # Delta / sigma
    a = 0.5 * ratio - eps / ratio
    b = -0.5 * ratio - eps / ratio
    log_first = float(log_ndtr(a))
    log_second = eps + float(log_ndtr(b))
    if not log_second < log_first:
        return 0.0
    value = math.exp(log_first) * -math.expm1(log_second - log_first)
    if value <= 0.0:
        return 0.0
    return min(1.0, float(np.nextafter(value * (1.0 + 2.0**-48), math.inf)))
