"""A small empirical privacy audit used by the tests (threshold tests with Clopper-Pearson)."""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import beta


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Two-sided (1 - alpha) Clopper-Pearson interval for a binomial proportion."""
    lo = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def epsilon_lower_bound(out0: np.ndarray, out1: np.ndarray, thresholds, alpha: float) -> float:
    """A (1 - alpha)-confidence lower bound on epsilon from threshold events ``{o >= t}`` and
    ``{o < t}`` in both directions (Bonferroni over all 4 * len(thresholds) tests)."""
    tests = 4 * len(thresholds)
    a = alpha / tests
    best = 0.0
    n0, n1 = len(out0), len(out1)
    for t in thresholds:
        for k0, k1 in (((out0 >= t).sum(), (out1 >= t).sum()), ((out0 < t).sum(),
                                                                   (out1 < t).sum())):
            lo0, hi0 = clopper_pearson(int(k0), n0, a)
            lo1, hi1 = clopper_pearson(int(k1), n1, a)
            if lo0 > 0 and hi1 > 0:
                best = max(best, math.log(lo0 / hi1))
            if lo1 > 0 and hi0 > 0:
                best = max(best, math.log(lo1 / hi0))
    return best
