"""The noiseless heavy-tailed mean estimators of paper 003 (Algorithms 3 and 4), shared by the
private mean estimators (:mod:`dpcvx.mechanisms.mean_estimation`) and the clipped gradient
methods."""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm

__all__ = ["PHI_MAX", "median_of_means", "sanitize", "smoothed_truncation_mean"]

PHI_MAX = 2.0 * math.sqrt(2.0) / 3.0
_PHI_MAX = PHI_MAX
_SQRT2 = math.sqrt(2.0)
#: |x / tau| above which the smoothed truncation is integrated numerically
_EXPANSION_LIMIT = 50.0


def sanitize(X) -> np.ndarray:
    """Each entry mapped on its own: NaN to 0 and +-inf to +-1e300, so that one example can
    never turn an estimate into NaN (which the noise would not hide). Both estimators bound
    every row's influence after this map, so their sensitivities are unchanged."""
    return np.nan_to_num(np.asarray(X, float), nan=0.0, posinf=1e300, neginf=-1e300)


def median_of_means(X: np.ndarray, tau: float, buckets: int, center=None) -> np.ndarray:
    """Algorithm 3 of paper 003 (no noise): coordinate-wise median of the means of ``buckets``
    consecutive disjoint blocks of ``floor(n / buckets)`` rows, after clipping every
    coordinate to ``[center - 3 tau, center + 3 tau]``. Rows beyond ``buckets * floor(n /
    buckets)`` are not used. For an even number of buckets the median is the average of the two
    middle values."""
    X = sanitize(X)
    n, d = X.shape
    b = n // buckets
    c = np.zeros(d) if center is None else np.asarray(center, float)
    clipped = np.clip(X[: buckets * b], c - 3.0 * tau, c + 3.0 * tau)
    means = clipped.reshape(buckets, b, d).mean(axis=1)
    return np.median(means, axis=0)


def _integrals(A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, ...]:
    """``I_p = int_A^B z^p phi(z) dz`` for p = 0..3 (standard normal density ``phi``)."""
    pa, pb = norm.pdf(A), norm.pdf(B)
    # z^p phi(z) -> 0 as |z| -> inf; guard the products so that inf * 0 never gives NaN
    apa = np.where(pa > 0, A * pa, 0.0)
    bpb = np.where(pb > 0, B * pb, 0.0)
    aapa = np.where(pa > 0, A * apa, 0.0)
    bbpb = np.where(pb > 0, B * bpb, 0.0)
    i0 = norm.cdf(B) - norm.cdf(A)
    i1 = pa - pb
    i2 = i0 + apa - bpb
    i3 = 2.0 * i1 + aapa - bbpb
    return i0, i1, i2, i3


def smoothed_truncation_mean(X: np.ndarray, tau: float, c: float = 1.0) -> np.ndarray:
    """Algorithm 4 of paper 003 (no noise): ``(tau / n) sum_i E phi(x_ij (1 + N) / tau)``,
    ``N ~ N(0, c)``, in closed form: with ``a = x / tau``, ``Y = a (1 + N) ~ N(a, a^2 c)``, and
    ``E phi(Y) = E[Y 1{|Y| <= sqrt 2}] - E[Y^3 1{...}] / 6 + (2 sqrt(2)/3)(P(Y > sqrt 2) -
    P(Y < -sqrt 2))``."""
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        return _smoothed(sanitize(X), tau, c)


def _smoothed(X: np.ndarray, tau: float, c: float) -> np.ndarray:
    n = X.shape[0]
    a = X / tau
    s = np.abs(a) * math.sqrt(c)
    zero = s == 0.0
    s_safe = np.where(zero, 1.0, s)
    A = (-_SQRT2 - a) / s_safe
    B = (_SQRT2 - a) / s_safe
    tails = _PHI_MAX * (norm.sf(B) - norm.cdf(A))
    # the moment expansion cancels badly for large |a| (Y spreads far beyond [-sqrt 2, sqrt 2]);
    # there the density of Y is smooth on the interval and Gauss-Legendre is accurate
    small = np.abs(a) <= _EXPANSION_LIMIT
    inner = np.empty_like(a)
    if np.any(small):
        i0, i1, i2, i3 = _integrals(A[small], B[small])
        am, sm = a[small], s[small]
        first = am * i0 + sm * i1
        third = am**3 * i0 + 3 * am * am * sm * i1 + 3 * am * sm * sm * i2 + sm**3 * i3
        inner[small] = first - third / 6.0
    if np.any(~small):
        nodes, weights = np.polynomial.legendre.leggauss(64)
        y = _SQRT2 * nodes  # on [-sqrt 2, sqrt 2]
        am, sm = a[~small][:, None], s_safe[~small][:, None]
        dens = norm.pdf((y[None, :] - am) / sm) / sm
        inner[~small] = _SQRT2 * (dens * (y - y**3 / 6.0) * weights).sum(axis=1)
    value = np.where(zero, 0.0, inner + tails)  # a = 0: phi(0) = 0
    value = np.where(np.isfinite(value), value, 0.0)  # defence in depth: bounded either way
    # |E phi| <= 2 sqrt(2)/3 exactly; clipping keeps the sensitivity bound in float64 too
    value = np.clip(value, -_PHI_MAX, _PHI_MAX)
    return tau / n * value.sum(axis=0)
