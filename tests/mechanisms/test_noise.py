"""Tests of noise calibration and sampling (dpcvx.mechanisms.noise).

Reference values come from the digest of paper 002 (Lowy & Razaviyayn), Sections 3.1-3.3 and
pitfalls P4/P11. Statistical tests are seeded and state their false-failure rate; they are
marked ``statistical``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from dpcvx.errors import InvalidParameterError
from dpcvx.mechanisms.noise import (
    NoiseSpec,
    analytic_gaussian_sigma,
    c_delta,
    calibrate,
    gaussian_delta,
    l2_laplace_scale,
    laplace_per_coordinate_scale,
    sample,
    zwb_sigma,
)
from dpcvx.rng import make_rng
from dpcvx.types import Sensitivity

# Significance level of every statistical test below: each one fails with probability about
# ALPHA when the code is correct.
ALPHA = 1e-4

# Digest Section 3.3 (Delta = 1): delta, epsilon, c_delta, sigma_ZWB, exact delta at sigma_ZWB,
# classical sigma, Balle-Wang optimal sigma.
TABLE_3_3 = [
    (1e-5, 0.1, 3.1822, 45.1145, 1.5e-8, 48.448, 30.750),
    (1e-5, 0.5, 3.1822, 9.1105, 7.4e-8, 9.690, 7.032),
    (1e-5, 1.0, 3.1822, 4.6089, 1.4e-7, 4.845, 3.731),
    (1e-5, 2.0, 3.1822, 2.3563, 2.7e-7, 2.422, 1.994),
    (1e-5, 5.0, 3.1822, 1.0001, 5.8e-7, 0.969, 0.892),
    (1e-5, 10.0, 3.1822, 0.5422, 9.4e-7, 0.4845, 0.500),
    (1e-6, 1.0, 3.5255, 5.0842, 1.1e-8, 5.299, 4.225),
    (1e-6, 10.0, 3.5255, 0.5842, 7.5e-8, 0.530, 0.541),
]


def _classical_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """The textbook sigma, valid only for epsilon <= 1 (never used by dpcvx; pitfall P11)."""
    return math.sqrt(2.0 * math.log(1.25 / delta)) * sensitivity / epsilon


# --------------------------------------------------------------------------------------------
# Calibration: closed forms and the Section 3.3 table
# --------------------------------------------------------------------------------------------


def test_l2_laplace_scale_is_delta_over_epsilon_rounded_up():
    scale = l2_laplace_scale(0.3, 2.0)
    assert scale >= 0.3 / 2.0
    assert scale == pytest.approx(0.15, rel=1e-15)
    # 1/3 is not representable: the result must not be below the float quotient.
    assert l2_laplace_scale(1.0, 3.0) > 1.0 / 3.0


def test_laplace_per_coordinate_scale_is_delta_over_epsilon_rounded_up():
    assert laplace_per_coordinate_scale(2.0, 0.5) >= 4.0
    assert laplace_per_coordinate_scale(2.0, 0.5) == pytest.approx(4.0, rel=1e-15)


@pytest.mark.parametrize(
    ("delta", "epsilon", "c", "sigma_zwb", "exact", "classical", "bw"), TABLE_3_3
)
def test_table_3_3(delta, epsilon, c, sigma_zwb, exact, classical, bw):
    assert c_delta(delta) == pytest.approx(c, abs=1e-4)
    s_zwb = zwb_sigma(1.0, epsilon, delta)
    assert s_zwb == pytest.approx(sigma_zwb, abs=1e-4)
    # The table's exact delta at sigma_ZWB is printed with two significant digits.
    assert gaussian_delta(s_zwb, 1.0, epsilon) == pytest.approx(exact, rel=0.05)
    assert gaussian_delta(s_zwb, 1.0, epsilon) <= delta
    s_bw = analytic_gaussian_sigma(1.0, epsilon, delta)
    assert s_bw == pytest.approx(bw, rel=1e-3)
    assert gaussian_delta(s_bw, 1.0, epsilon) <= delta
    assert s_bw <= s_zwb
    assert _classical_sigma(1.0, epsilon, delta) == pytest.approx(classical, rel=1e-3)


@pytest.mark.parametrize(("delta", "epsilon"), [(1e-5, 0.1), (1e-5, 1.0), (1e-6, 10.0), (0.3, 4.0)])
def test_analytic_sigma_is_tight(delta, epsilon):
    sigma = analytic_gaussian_sigma(1.0, epsilon, delta)
    assert gaussian_delta(sigma, 1.0, epsilon) <= delta
    # A slightly smaller sigma is no longer private: the calibration is (essentially) optimal.
    assert gaussian_delta(sigma * (1.0 - 1e-6), 1.0, epsilon) > delta


@pytest.mark.parametrize("sensitivity", [1e-3, 0.7, 25.0])
def test_gaussian_sigmas_scale_linearly_with_sensitivity(sensitivity):
    for fn in (zwb_sigma, analytic_gaussian_sigma):
        sigma = fn(sensitivity, 2.0, 1e-6)
        assert sigma == pytest.approx(sensitivity * fn(1.0, 2.0, 1e-6), rel=1e-9)
        assert gaussian_delta(sigma, sensitivity, 2.0) <= 1e-6


def test_analytic_sigma_is_inflated_when_dp_accounting_lands_below_the_root(monkeypatch):
    import dp_accounting

    true_get_sigma = dp_accounting.get_sigma_gaussian

    def too_small(epsilon, delta, tol=1e-12):
        return true_get_sigma(epsilon, delta, tol) * (1.0 - 1e-10)

    monkeypatch.setattr(dp_accounting, "get_sigma_gaussian", too_small)
    low = too_small(1.0, 1e-5)
    assert gaussian_delta(low, 1.0, 1.0) > 1e-5  # the helper's answer alone would not be private
    sigma = analytic_gaussian_sigma(1.0, 1.0, 1e-5)
    assert gaussian_delta(sigma, 1.0, 1.0) <= 1e-5
    assert sigma == pytest.approx(low, rel=2e-6)  # within dpcvx's public 1e-6 safety margin


def test_gaussian_delta_agrees_with_dp_accounting():
    import dp_accounting

    for sigma, epsilon in [(0.5, 3.0), (2.0, 0.5), (4.0, 1.0), (30.0, 0.1)]:
        delta = gaussian_delta(sigma, 1.0, epsilon)
        assert dp_accounting.get_epsilon_gaussian(sigma, delta) == pytest.approx(epsilon, rel=1e-6)


def test_gaussian_delta_limits():
    assert gaussian_delta(1e6, 1.0, 1.0) == 0.0  # huge noise: delta underflows to 0
    assert 0.0 < gaussian_delta(1e-3, 1.0, 1.0) <= 1.0  # tiny noise: delta near 1
    # epsilon = 0: delta is the total-variation distance 2 Phi(Delta/(2 sigma)) - 1.
    assert gaussian_delta(2.0, 1.0, 0.0) == pytest.approx(2 * stats.norm.cdf(0.25) - 1, rel=1e-12)


def test_algorithm_6_typo_is_not_reproduced():
    """Digest P4(i)/erratum 1: Alg 6 prints a density whose sigma is sqrt(2) too small."""
    sigma = zwb_sigma(1.0, 1.0, 1e-5)
    typo = 4.6089 / math.sqrt(2.0)
    assert sigma == pytest.approx(4.6089, abs=1e-4)
    assert not math.isclose(sigma, typo, rel_tol=0.1)
    # The typo's true delta is 7.4e-5 > 1e-5: it is not private.
    assert gaussian_delta(sigma / math.sqrt(2.0), 1.0, 1.0) == pytest.approx(7.4e-5, rel=0.02)
    for epsilon, expected in [(0.5, 3.4e-5), (2.0, 1.8e-4), (5.0, 7.0e-4)]:
        typo_delta = gaussian_delta(zwb_sigma(1.0, epsilon, 1e-5) / math.sqrt(2.0), 1.0, epsilon)
        assert typo_delta == pytest.approx(expected, rel=0.03)
        assert typo_delta > 1e-5


def test_classical_sigma_fails_for_large_epsilon():
    """Digest P11: the classical sigma must never be used for epsilon > 1."""
    classical = _classical_sigma(1.0, 10.0, 1e-5)
    assert gaussian_delta(classical, 1.0, 10.0) == pytest.approx(2.3e-5, rel=0.02)
    assert gaussian_delta(classical, 1.0, 10.0) > 1e-5
    assert gaussian_delta(_classical_sigma(1.0, 20.0, 1e-5), 1.0, 20.0) == pytest.approx(
        1.5e-3, rel=0.05
    )
    # At epsilon = 5 it happens to be fine (1.35e-6).
    assert gaussian_delta(_classical_sigma(1.0, 5.0, 1e-5), 1.0, 5.0) == pytest.approx(
        1.35e-6, rel=0.02
    )
    # dpcvx's sigmas at epsilon = 10 are above the classical one.
    assert zwb_sigma(1.0, 10.0, 1e-5) > classical
    assert analytic_gaussian_sigma(1.0, 10.0, 1e-5) > classical


def test_c_delta_is_stable_for_tiny_delta():
    # sqrt(16 delta + 1) - 1 ~ 8 delta: c_delta^2 ~ log(1/(4 delta)).
    assert c_delta(1e-300) ** 2 == pytest.approx(math.log(1.0 / (4e-300)), rel=1e-12)
    # Digest Section 2.0: c_delta <= sqrt(log(1/delta)).
    assert c_delta(1e-5) <= math.sqrt(math.log(1e5))


# --------------------------------------------------------------------------------------------
# calibrate and NoiseSpec
# --------------------------------------------------------------------------------------------


def test_calibrate_selects_the_mechanism():
    pure = calibrate(0.5, 2.0, 0.0)
    assert (pure.kind, pure.calibration, pure.delta) == ("l2_laplace", "l2_laplace", 0.0)
    assert pure.scale == l2_laplace_scale(0.5, 2.0)
    assert pure.noise_multiplier is None and pure.norm == "l2"

    gauss = calibrate(0.5, 2.0, 1e-6)
    assert (gauss.kind, gauss.calibration) == ("gaussian", "analytic")
    assert gauss.scale == analytic_gaussian_sigma(0.5, 2.0, 1e-6)
    assert gauss.noise_multiplier >= gauss.scale / gauss.sensitivity

    zwb = calibrate(0.5, 2.0, 1e-6, gaussian="zwb")
    assert (zwb.kind, zwb.calibration) == ("gaussian", "zwb")
    assert zwb.scale == zwb_sigma(0.5, 2.0, 1e-6)

    lap = calibrate(0.5, 2.0, 0.0, norm="l1")
    assert (lap.kind, lap.calibration, lap.norm) == ("laplace", "laplace", "l1")
    assert lap.scale == laplace_per_coordinate_scale(0.5, 2.0)

    from_sensitivity = calibrate(Sensitivity(value=0.5, norm="l1"), 2.0, 0)
    assert from_sensitivity == lap


def test_noise_spec_is_frozen_and_checked():
    spec = calibrate(1.0, 1.0, 1e-5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.scale = 0.1  # type: ignore[misc]
    # A hand-built spec with too little noise cannot exist.
    with pytest.raises(InvalidParameterError, match="only"):
        NoiseSpec(
            kind="gaussian",
            scale=4.6089 / math.sqrt(2),
            sensitivity=1.0,
            epsilon=1.0,
            delta=1e-5,
            calibration="zwb",
        )
    with pytest.raises(InvalidParameterError, match="scale >="):
        NoiseSpec(
            kind="l2_laplace",
            scale=0.9,
            sensitivity=1.0,
            epsilon=1.0,
            delta=0.0,
            calibration="l2_laplace",
        )
    with pytest.raises(InvalidParameterError, match="delta == 0"):
        NoiseSpec(
            kind="laplace",
            scale=2.0,
            sensitivity=1.0,
            epsilon=1.0,
            delta=1e-6,
            calibration="laplace",
        )
    with pytest.raises(InvalidParameterError, match="calibration"):
        NoiseSpec(
            kind="gaussian",
            scale=5.0,
            sensitivity=1.0,
            epsilon=1.0,
            delta=1e-5,
            calibration="classical",
        )
    with pytest.raises(InvalidParameterError, match="kind"):
        NoiseSpec(
            kind="cauchy",
            scale=5.0,
            sensitivity=1.0,
            epsilon=1.0,
            delta=0.0,
            calibration="l2_laplace",
        )


# --------------------------------------------------------------------------------------------
# Bad inputs
# --------------------------------------------------------------------------------------------

BAD_POSITIVE = [0, 0.0, -1.0, math.nan, math.inf, -math.inf, True, "1", None, [1.0]]


@pytest.mark.parametrize("bad", BAD_POSITIVE)
def test_bad_sensitivity_or_epsilon_raises(bad):
    two_arg = [l2_laplace_scale, laplace_per_coordinate_scale]
    three_arg = [zwb_sigma, analytic_gaussian_sigma]
    for fn in two_arg:
        with pytest.raises(InvalidParameterError):
            fn(bad, 1.0)
        with pytest.raises(InvalidParameterError):
            fn(1.0, bad)
    for fn in three_arg:
        with pytest.raises(InvalidParameterError):
            fn(bad, 1.0, 1e-5)
        with pytest.raises(InvalidParameterError):
            fn(1.0, bad, 1e-5)
    for delta in (0.0, 1e-5):
        with pytest.raises(InvalidParameterError):
            calibrate(bad, 1.0, delta)
        with pytest.raises(InvalidParameterError):
            calibrate(1.0, bad, delta)
    with pytest.raises(InvalidParameterError):
        gaussian_delta(bad, 1.0, 1.0)
    with pytest.raises(InvalidParameterError):
        gaussian_delta(1.0, bad, 1.0)


@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf, "0", None, True])
def test_bad_epsilon_for_gaussian_delta_raises(bad):
    with pytest.raises(InvalidParameterError):
        gaussian_delta(1.0, 1.0, bad)


@pytest.mark.parametrize("bad", [0.0, -1e-9, 0.5, 0.7, 1.0, math.nan, math.inf, "1e-5", None])
def test_bad_zwb_delta_raises(bad):
    with pytest.raises(InvalidParameterError, match="delta"):
        zwb_sigma(1.0, 1.0, bad)
    with pytest.raises(InvalidParameterError, match="delta"):
        c_delta(bad)
    if bad == 0.0:  # calibrate treats delta == 0 as pure DP, whatever `gaussian` says
        assert calibrate(1.0, 1.0, bad, gaussian="zwb").kind == "l2_laplace"
    else:
        with pytest.raises(InvalidParameterError, match="delta"):
            calibrate(1.0, 1.0, bad, gaussian="zwb")


@pytest.mark.parametrize("bad", [0.0, -1e-9, 1.0, 1.5, math.nan, "1e-5", None])
def test_bad_analytic_delta_raises(bad):
    with pytest.raises(InvalidParameterError, match="delta"):
        analytic_gaussian_sigma(1.0, 1.0, bad)


@pytest.mark.parametrize("bad", [-1e-9, 1.0, 2.0, math.nan, None])
def test_bad_calibrate_delta_raises(bad):
    with pytest.raises(InvalidParameterError, match="delta"):
        calibrate(1.0, 1.0, bad)


def test_bad_calibrate_options_raise():
    with pytest.raises(InvalidParameterError, match="norm"):
        calibrate(1.0, 1.0, 0.0, norm="linf")
    with pytest.raises(InvalidParameterError, match="gaussian"):
        calibrate(1.0, 1.0, 1e-5, gaussian="classical")
    with pytest.raises(InvalidParameterError, match="l1"):
        calibrate(1.0, 1.0, 1e-5, norm="l1")
    with pytest.raises(InvalidParameterError, match="norm"):
        calibrate(Sensitivity(value=1.0, norm="l2"), 1.0, 0.0, norm="l1")
    with pytest.raises(InvalidParameterError):
        calibrate(Sensitivity(value=-1.0, norm="l2"), 1.0, 0.0)
    with pytest.raises(InvalidParameterError):
        l2_laplace_scale(1e300, 1e-300)  # overflows to inf


def test_invalid_parameter_error_is_a_value_error():
    with pytest.raises(ValueError):
        calibrate(-1.0, 1.0, 0.0)


@pytest.mark.parametrize("bad_dim", [0, -3, 2.5, True, "3", None, np.float64(3.0)])
def test_sample_bad_dim_raises(bad_dim):
    spec = calibrate(1.0, 1.0, 0.0)
    with pytest.raises(InvalidParameterError, match="dim"):
        sample(spec, bad_dim, np.random.default_rng(0))


@pytest.mark.parametrize("bad_rng", [None, 3, np.random.RandomState(0), "seed"])
def test_sample_bad_rng_raises(bad_rng):
    spec = calibrate(1.0, 1.0, 0.0)
    with pytest.raises(InvalidParameterError, match="make_rng"):
        sample(spec, 3, bad_rng)


def test_sample_bad_spec_or_size_raises():
    rng = np.random.default_rng(0)
    with pytest.raises(InvalidParameterError, match="NoiseSpec"):
        sample({"kind": "gaussian", "scale": 1.0}, 3, rng)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="size"):
        sample(calibrate(1.0, 1.0, 0.0), 3, rng, size=0)


# --------------------------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("delta", "norm"), [(0.0, "l2"), (1e-5, "l2"), (0.0, "l1")])
def test_sample_is_reproducible_and_shaped(delta, norm):
    spec = calibrate(0.3, 2.0, delta, norm=norm)
    a = sample(spec, 4, np.random.default_rng(2024))
    b = sample(spec, 4, np.random.default_rng(2024))
    c = sample(spec, 4, make_rng(2024)[0])
    assert a.shape == (4,) and a.dtype == np.float64
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    batch = sample(spec, 4, np.random.default_rng(7), size=3)
    assert batch.shape == (3, 4)
    np.testing.assert_array_equal(batch, sample(spec, 4, np.random.default_rng(7), size=3))
    assert not np.array_equal(a, sample(spec, 4, np.random.default_rng(2025)))


def test_sample_does_not_touch_global_numpy_state():
    state = np.random.get_state()[1].copy()
    sample(calibrate(1.0, 1.0, 0.0), 5, np.random.default_rng(1), size=10)
    np.testing.assert_array_equal(state, np.random.get_state()[1])


@pytest.mark.statistical
@pytest.mark.parametrize("dim", [1, 5, 40])
def test_l2_laplace_radius_is_gamma(dim):
    """KS test of ||b|| against Gamma(d, Delta/epsilon). False-failure rate ALPHA = 1e-4."""
    sensitivity, epsilon = 0.3, 2.0
    spec = calibrate(sensitivity, epsilon, 0.0)
    draws = sample(spec, dim, np.random.default_rng(1000 + dim), size=20_000)
    radii = np.linalg.norm(draws, axis=1)
    result = stats.kstest(radii, stats.gamma(a=dim, scale=sensitivity / epsilon).cdf)
    assert result.pvalue > ALPHA


@pytest.mark.statistical
def test_l2_laplace_dim_1_is_symmetric():
    """d = 1: b is +-Exp(Delta/epsilon), i.e. Laplace(Delta/epsilon). KS, false-failure 1e-4."""
    spec = calibrate(1.0, 0.5, 0.0)
    draws = sample(spec, 1, np.random.default_rng(11), size=20_000)[:, 0]
    assert stats.kstest(draws, stats.laplace(scale=2.0).cdf).pvalue > ALPHA


@pytest.mark.statistical
def test_l2_laplace_direction_is_isotropic():
    """Direction u = b/||b||: mean ~ 0, E[u u^T] ~ I/d, and u_1 has the spherical marginal.

    The mean and second-moment bounds are Hoeffding bounds (u_j in [-1, 1], u_i u_j in
    [-1/2, 1/2], u_j^2 in [0, 1]) with a Bonferroni split over all d + d(d+1)/2 entries, so
    together they fail with probability at most 1e-4 (rigorous, not asymptotic). The KS test of
    the marginal fails with probability 1e-4.
    """
    dim, n = 6, 50_000
    spec = calibrate(1.0, 1.0, 0.0)
    draws = sample(spec, dim, np.random.default_rng(31), size=n)
    u = draws / np.linalg.norm(draws, axis=1, keepdims=True)
    np.testing.assert_allclose(np.linalg.norm(u, axis=1), 1.0, rtol=1e-12)

    n_checks = dim + dim * (dim + 1) // 2
    per_check = ALPHA / n_checks

    def hoeffding(width: float) -> float:
        # P(|mean - E| >= t) <= 2 exp(-2 n t^2 / width^2)
        return width * math.sqrt(math.log(2.0 / per_check) / (2.0 * n))

    mean = u.mean(axis=0)
    assert np.all(np.abs(mean) <= hoeffding(2.0))

    second = u.T @ u / n
    diag_err = np.abs(np.diag(second) - 1.0 / dim)
    off = second - np.diag(np.diag(second))
    assert np.all(diag_err <= hoeffding(1.0))
    assert np.all(np.abs(off) <= hoeffding(1.0))
    assert hoeffding(1.0) < 0.2 / dim  # the bound is informative at this n

    # (u_1 + 1)/2 ~ Beta((d-1)/2, (d-1)/2) for u uniform on the sphere.
    half = (dim - 1) / 2.0
    assert stats.kstest((u[:, 0] + 1.0) / 2.0, stats.beta(half, half).cdf).pvalue > ALPHA


@pytest.mark.statistical
def test_l2_laplace_second_moment():
    """E||b||^2 = d(d+1) Delta^2/epsilon^2 (digest Lemma B.3).

    Two-sided CLT interval at level 1e-4 using the exact variance of r^2 for r ~ Gamma(d, theta):
    Var(r^2) = theta^4 [d(d+1)(d+2)(d+3) - d^2 (d+1)^2]. Asymptotic false-failure rate ~1e-4.
    """
    dim, sensitivity, epsilon, n = 5, 0.3, 2.0, 100_000
    theta = sensitivity / epsilon
    spec = calibrate(sensitivity, epsilon, 0.0)
    draws = sample(spec, dim, np.random.default_rng(41), size=n)
    sq = np.sum(draws**2, axis=1)
    expected = dim * (dim + 1) * theta**2
    var = theta**4 * (dim * (dim + 1) * (dim + 2) * (dim + 3) - (dim * (dim + 1)) ** 2)
    half_width = stats.norm.isf(ALPHA / 2) * math.sqrt(var / n)
    assert abs(sq.mean() - expected) <= half_width
    # Each coordinate has variance (d+1) Delta^2/epsilon^2 (digest Section 3.1).
    assert draws[:, 0].var() == pytest.approx((dim + 1) * theta**2, rel=0.05)


@pytest.mark.statistical
@pytest.mark.parametrize("calibration", ["analytic", "zwb"])
def test_gaussian_coordinates_are_normal(calibration):
    """Pooled coordinates against N(0, sigma^2): KS, false-failure rate 1e-4."""
    spec = calibrate(0.7, 1.5, 1e-6, gaussian=calibration)
    draws = sample(spec, 8, np.random.default_rng(51), size=5_000)
    assert stats.kstest(draws.ravel(), stats.norm(scale=spec.scale).cdf).pvalue > ALPHA


@pytest.mark.statistical
def test_laplace_per_coordinate_has_the_right_scale():
    """Pooled coordinates against Laplace(0, Delta_1/epsilon): KS, false-failure rate 1e-4."""
    spec = calibrate(Sensitivity(value=1.5, norm="l1"), 0.75, 0.0)
    assert spec.scale == pytest.approx(2.0, rel=1e-15)
    draws = sample(spec, 10, np.random.default_rng(61), size=4_000)
    assert stats.kstest(draws.ravel(), stats.laplace(scale=2.0).cdf).pvalue > ALPHA
    # A wrong scale (the l2 radius convention, or a rate instead of a scale) is detected.
    assert stats.kstest(draws.ravel(), stats.laplace(scale=0.5).cdf).pvalue < ALPHA
