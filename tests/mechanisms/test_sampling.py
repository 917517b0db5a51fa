"""The exact, floating-point-safe samplers (dpcvx.mechanisms.sampling).

Distribution tests are seeded Kolmogorov-Smirnov / chi-square tests at level 1e-3 each (false
failure rate <= 1e-3 per test, fixed by the seed). Exactness is checked against an independent
300-bit recomputation from the same random bits.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import stats

from dpcvx.errors import InvalidParameterError
from dpcvx.mechanisms.noise import calibrate
from dpcvx.mechanisms.sampling import (
    gaussian_point,
    l2_laplace_point,
    laplace_point,
    release_point,
    sample_index,
)

LEVEL = 1e-3


def test_laplace_gaussian_and_l2_laplace_follow_their_laws():
    rng = np.random.default_rng(2026)
    lap = np.array([laplace_point(np.zeros(1), 2.0, rng)[0] for _ in range(3000)])
    assert stats.kstest(lap, stats.laplace(scale=2.0).cdf).pvalue > LEVEL
    gau = np.array([gaussian_point(np.zeros(1), 1.5, rng)[0] for _ in range(3000)])
    assert stats.kstest(gau, stats.norm(scale=1.5).cdf).pvalue > LEVEL
    pts = np.array([l2_laplace_point(np.zeros(3), 0.7, rng) for _ in range(1500)])
    radius = np.linalg.norm(pts, axis=1)
    assert stats.kstest(radius, stats.gamma(3, scale=0.7).cdf).pvalue > LEVEL
    # the direction is uniform: the first coordinate of a uniform point of S^2 is uniform
    assert stats.kstest(pts[:, 0] / radius, stats.uniform(-1, 2).cdf).pvalue > LEVEL


def _replay_laplace(seed: int, w: float, scale: float) -> float | None:
    """fl(w + X) from the same bits, at 300 bits, when 64 bits decide it (None otherwise)."""
    rng = np.random.default_rng(seed)
    sign = 1 - 2 * int(rng.integers(0, 2))
    k = int(rng.integers(0, 2**64, dtype=np.uint64, endpoint=False))
    with mpmath.workprec(300):
        lo, hi = mpmath.mpf(k) / 2**64, mpmath.mpf(k + 1) / 2**64
        ends = [mpmath.mpf(w) + sign * mpmath.mpf(scale) * -mpmath.log(u) for u in (lo, hi)]
        outs = {float(e) for e in ends} if lo > 0 else {None}
    return outs.pop() if len(outs) == 1 else None


@pytest.mark.parametrize("w, scale", [(0.0, 1.0), (1e8, 1e-12), (-3.5, 1e-300), (1.0, 1e6)])
def test_the_output_is_the_correctly_rounded_exact_sum(w, scale):
    decided = 0
    for seed in range(300):
        expected = _replay_laplace(seed, w, scale)
        got = laplace_point(np.array([w]), scale, np.random.default_rng(seed))[0]
        if expected is not None:
            decided += 1
            assert got == expected
    assert decided >= 280  # 64 bits decide almost every draw


def test_naive_float_addition_differs_where_the_exact_sampler_does_not():
    """With w = 1e8 and noise of scale 1e-9 the exact sum rounds to floats near w; the naive
    float sum of a float sample can land on another float (what Mironov's attack reads)."""
    w = np.array([1e8])
    outs = {laplace_point(w, 1e-9, np.random.default_rng(s))[0] for s in range(200)}
    assert outs <= {math.nextafter(1e8, -math.inf), 1e8, math.nextafter(1e8, math.inf)}


def test_seeded_draws_are_reproducible_and_inputs_checked():
    spec = calibrate(0.3, 1.0, 0.0)
    a = release_point(np.ones(4), spec, np.random.default_rng(7))
    b = release_point(np.ones(4), spec, np.random.default_rng(7))
    np.testing.assert_array_equal(a, b)
    with pytest.raises(InvalidParameterError):
        laplace_point(np.array([np.nan]), 1.0, np.random.default_rng(0))
    with pytest.raises(InvalidParameterError):
        laplace_point(np.zeros(1), -1.0, np.random.default_rng(0))
    with pytest.raises(InvalidParameterError):
        laplace_point(np.zeros(1), 1.0, 3)


def test_sample_index_matches_the_exact_probabilities():
    logp = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
    rng = np.random.default_rng(11)
    runs = 20_000
    counts = np.bincount([sample_index(logp, rng) for _ in range(runs)], minlength=4)
    assert stats.chisquare(counts, runs * np.exp(logp)).pvalue > LEVEL


def test_sample_index_never_draws_zero_mass_and_refuses_bad_input():
    rng = np.random.default_rng(0)
    logp = np.array([-np.inf, 0.0, -np.inf, -0.5])
    assert {sample_index(logp, rng) for _ in range(500)} <= {1, 3}
    assert sample_index(np.array([-np.inf, 2.0]), rng) == 1
    for bad in ([], [np.nan, 0.0], [np.inf, 0.0], [-np.inf, -np.inf]):
        with pytest.raises(InvalidParameterError):
            sample_index(np.array(bad, float), rng)


class _Bits:
    """A generator stand-in that returns chosen 64-bit words (then zeros)."""

    def __init__(self, words):
        self.words = list(words)

    def integers(self, low, high, size=None, dtype=None, endpoint=False):
        if size is None:
            return np.uint64(self.words.pop(0) if self.words else 0)
        out = [self.words.pop(0) if self.words else 0 for _ in range(size)]
        return np.array(out, dtype=np.uint64)


def test_a_mass_far_below_two_to_the_minus_53_can_still_be_drawn():
    """Entry 1 has relative mass e^-45 (about 2^-65): an inverse CDF with one float uniform
    never returns it. The Gumbel sampler returns it exactly when its uniform is extreme
    enough: here the bits put entry 0's uniform at the bottom and entry 1's at the top."""
    logp = np.array([0.0, -45.0])
    assert sample_index(logp, _Bits([1, 2**64 - 1, 2**64 - 1])) == 1
    assert sample_index(logp, _Bits([2**63, 2**63])) == 0


def test_a_million_entries_are_sampled():
    rng = np.random.default_rng(3)
    logp = rng.normal(size=1_000_000)
    i = sample_index(logp, rng)
    assert 0 <= i < logp.size
