"""Tests of paper 004's deletion-route calibrations (dpcvx.mechanisms.deletion).

Independent answers: the regression table of implementation spec C.2 (computed when the spec
was written, and matching the digest's Section 8); ``kappa``, ``delta_bar`` and the TDLap law
recomputed here in 50-digit arithmetic (mpmath); the exact Gaussian privacy profile
(``gaussian_delta``, Balle & Wang 2018 Thm 8) for every ``sigma``; the spec C.4 T1 plan
numbers; and closed forms chosen so that the square roots are exact. Statistical tests are
seeded, marked ``statistical`` and state their false-failure rate.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats

from dpcvx.accounting.profiles import gaussian_delta
from dpcvx.errors import InvalidParameterError
from dpcvx.mechanisms import deletion
from dpcvx.mechanisms.deletion import (
    DeletionCalibration,
    crossover_items,
    deletion_calibration,
    deletion_sensitivity_bound,
    population_radius,
    required_users,
    tdlap_sample,
)
from dpcvx.mechanisms.noise import analytic_gaussian_sigma

# Significance level of each statistical test: each fails with probability about ALPHA when the
# code is correct (chi-square approximation; every pooled cell expects at least 20 draws).
ALPHA = 1e-4

# Spec C.2 regression table: epsilon, delta, kappa, 4 kappa + 1, 2 (4 kappa + 1),
# sigma / Delta (paper), sigma / Delta (analytic), Pr[R1 = 0].
# The spec prints 8148.9 for the analytic (0.5, 1e-6) entry; the value is 8148.952 (the
# digits were truncated, not rounded), so the correctly rounded 8149.0 is used here.
TABLE_C2 = [
    (1.0, 1e-3, 18, 73, 146, 1717.9, 770.7, 3.02e-5),
    (1.0, 1e-5, 27, 109, 218, 3174.6, 1646.0, 3.36e-7),
    (1.0, 1e-6, 32, 129, 258, 4070.7, 2200.2, 2.76e-8),
    (1.0, 1e-8, 41, 165, 330, 5927.0, 3386.8, 3.06e-10),
    (0.5, 1e-6, 62, 249, 498, 15721.4, 8149.0, 2.31e-8),
    (8.0, 0.05, 3, 13, 26, 33.4, 19.9, 5.92e-6),
    (2.0, 0.3, 4, 17, 34, 118.8, 39.9, 8.55e-3),
]

EPSILONS = [0.01, 0.03, 0.1, 0.3, 1.0, 2.0, 4.0, 8.0]
DELTAS = [1e-9, 1e-6, 1e-3, 0.01, 0.1, 0.5]


def mp_kappa(epsilon: float, delta_bar: float) -> int:
    """Def 3.4 at (epsilon/2, delta_bar) in 50-digit arithmetic."""
    with mpmath.workdps(50):
        q = mpmath.log(1 / mpmath.mpf(delta_bar)) / (mpmath.mpf(epsilon) / 2)
        return 1 + int(mpmath.ceil(q))


def mp_pmf(epsilon_bar: float, kappa: int) -> np.ndarray:
    """TDLap(epsilon_bar) masses on {0..2 kappa} in 50-digit arithmetic."""
    with mpmath.workdps(50):
        w = [mpmath.exp(-mpmath.mpf(epsilon_bar) * abs(x - kappa)) for x in range(2 * kappa + 1)]
        total = mpmath.fsum(w)
        return np.array([float(v / total) for v in w])


# ----------------------------------------------------------------------------- T1: the table
@pytest.mark.parametrize("row", TABLE_C2, ids=lambda r: f"eps={r[0]}-delta={r[1]}")
def test_regression_table_c2(row):
    epsilon, delta, kappa, radius1, n_prov, ratio_paper, ratio_analytic, pr0 = row
    target = 0.37  # sigma / Delta does not depend on Delta
    paper = deletion_calibration(epsilon, delta, target, gaussian="paper")
    analytic = deletion_calibration(epsilon, delta, target, gaussian="analytic")
    for cal in (paper, analytic):
        assert cal.kappa == kappa
        assert cal.radius + 1 == radius1
        assert cal.min_users == 4 * kappa + 2
        assert float(f"{cal.tdlap_pmf[0]:.3g}") == pr0
        assert cal.epsilon_bar == epsilon / 2
        assert cal.center_sensitivity == pytest.approx(8 * kappa * target, rel=1e-13)
    assert required_users(epsilon, delta, provable_sensitivity=True) == n_prov
    assert required_users(epsilon, delta) == 4 * kappa + 2
    assert abs(paper.sigma / target - ratio_paper) <= 0.05 + 1e-9
    assert abs(analytic.sigma / target - ratio_analytic) <= 0.05 + 1e-9
    # kappa against 50-digit arithmetic on the exact delta_bar = delta / (e^(eps/2) + 2)
    with mpmath.workdps(50):
        exact_delta_bar = mpmath.mpf(delta) / (mpmath.exp(mpmath.mpf(epsilon) / 2) + 2)
    assert mp_kappa(epsilon, float(exact_delta_bar)) == kappa


def test_paper_sigma_is_the_closed_form_of_alg1_line3():
    cal = deletion_calibration(1.0, 1e-6, 0.01, gaussian="paper")
    with mpmath.workdps(50):
        eb = mpmath.mpf(0.5)
        db = mpmath.mpf(1e-6) / (mpmath.exp(eb) + 2)
        closed = 2 * mpmath.sqrt(mpmath.log(2 / db)) * 8 * 32 * mpmath.mpf(0.01) / eb
    assert cal.sigma >= float(closed)
    assert cal.sigma == pytest.approx(float(closed), rel=1e-13)


# ----------------------------------------------------------------------------- T2: TDLap
@pytest.mark.parametrize(
    ("epsilon", "delta"), [(8.0, 0.05), (2.0, 0.3), (1.0, 1e-6), (0.1, 1e-9), (0.01, 0.5)]
)
def test_tdlap_law(epsilon, delta):
    cal = deletion_calibration(epsilon, delta, 1.0)
    pmf = cal.tdlap_pmf
    k = cal.kappa
    assert pmf.shape == (2 * k + 1,)
    assert not pmf.flags.writeable
    assert math.fsum(pmf) == pytest.approx(1.0, abs=1e-12)
    assert pmf[0] == pmf[2 * k]
    assert pmf[0] <= cal.delta_bar
    ratios = np.concatenate([pmf[1:] / pmf[:-1], pmf[:-1] / pmf[1:]])
    assert np.all(ratios <= math.exp(cal.epsilon_bar) * (1 + 1e-12))
    # the tabulated law agrees with Def 3.4 at epsilon_bar itself (tdlap_epsilon differs from
    # epsilon_bar by a relative 2^-31 at most)
    np.testing.assert_allclose(pmf, mp_pmf(cal.epsilon_bar, k), rtol=1e-9, atol=0)


@pytest.mark.parametrize(("epsilon", "delta"), [(8.0, 0.05), (1.0, 1e-6), (0.01, 1e-9)])
def test_tdlap_log_weights_are_exact(epsilon, delta, monkeypatch):
    """The sampler's log-weights are exact floats -|x - kappa| e with e <= epsilon_bar, so the
    law it draws from has adjacent ratios e^e <= e^epsilon_bar exactly, and
    kappa e >= ln(1/delta_bar), so Pr[0] = Pr[2 kappa] <= delta_bar exactly."""
    cal = deletion_calibration(epsilon, delta, 1.0)
    seen = {}

    def spy(log_probabilities, rng):
        seen["logw"] = np.array(log_probabilities, dtype=np.float64)
        return 0

    monkeypatch.setattr(deletion, "sample_index", spy)
    assert tdlap_sample(cal, 0) == 0
    logw = seen["logw"]
    k = cal.kappa
    e = Fraction(cal.tdlap_epsilon)
    assert e <= Fraction(cal.epsilon_bar)
    assert e > 0
    assert logw.shape == (2 * k + 1,)
    for x, value in enumerate(logw):
        assert Fraction(float(value)) == -abs(x - k) * e
    with mpmath.workdps(50):
        assert k * mpmath.mpf(cal.tdlap_epsilon) >= -mpmath.log(mpmath.mpf(cal.delta_bar))


@pytest.mark.statistical
@pytest.mark.parametrize(("epsilon", "delta", "seed"), [(2.0, 0.3, 11), (1.0, 1e-3, 12)])
def test_tdlap_sampler_chi_square(epsilon, delta, seed):
    """Chi-square goodness of fit of 20,000 seeded draws against the 50-digit law; cells
    expecting fewer than 20 draws are pooled into the tails. False-failure rate ALPHA = 1e-4
    per case."""
    cal = deletion_calibration(epsilon, delta, 1.0)
    draws = 20_000
    rng = np.random.default_rng(seed)
    samples = np.array([tdlap_sample(cal, rng) for _ in range(draws)])
    assert samples.min() >= 0 and samples.max() <= 2 * cal.kappa
    counts = np.bincount(samples, minlength=2 * cal.kappa + 1).astype(float)
    expected = draws * mp_pmf(cal.epsilon_bar, cal.kappa)
    keep = expected >= 20
    lo, hi = np.flatnonzero(keep)[[0, -1]]
    obs = np.concatenate([[counts[: lo + 1].sum()], counts[lo + 1 : hi], [counts[hi:].sum()]])
    exp = np.concatenate([[expected[: lo + 1].sum()], expected[lo + 1 : hi], [expected[hi:].sum()]])
    exp *= obs.sum() / exp.sum()
    assert stats.chisquare(obs, exp).pvalue > ALPHA


def test_tdlap_sample_rng_door():
    cal = deletion_calibration(8.0, 0.05, 1.0)
    first = [tdlap_sample(cal, 5) for _ in range(3)]
    assert len(set(first)) == 1  # an int seed is reproducible
    gen = np.random.default_rng(3)
    values = [tdlap_sample(cal, gen) for _ in range(50)]
    assert all(isinstance(v, int) and 0 <= v <= 2 * cal.kappa for v in values)
    r = tdlap_sample(cal)  # None: OS-keyed cryptographic randomness
    assert isinstance(r, int) and 0 <= r <= 2 * cal.kappa
    with pytest.raises(InvalidParameterError):
        tdlap_sample(cal, -1)
    with pytest.raises(InvalidParameterError):
        tdlap_sample(cal, "seed")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError):
        tdlap_sample("not a calibration", 0)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- T3: sigma
@pytest.mark.parametrize("gaussian", ["paper", "analytic"])
def test_sigma_valid_over_grid(gaussian):
    for epsilon in EPSILONS:
        for delta in DELTAS:
            for target in (1.0, 3e-4):
                cal = deletion_calibration(epsilon, delta, target, gaussian=gaussian)
                assert 2 * cal.epsilon_bar == epsilon
                with mpmath.workdps(50):
                    total = (mpmath.exp(mpmath.mpf(cal.epsilon_bar)) + 2) * mpmath.mpf(
                        cal.delta_bar
                    )
                    assert total <= mpmath.mpf(delta)
                assert cal.kappa >= mp_kappa(epsilon, cal.delta_bar)
                assert cal.radius == 4 * cal.kappa
                sens = 8 * cal.kappa * target
                assert cal.center_sensitivity >= sens
                assert gaussian_delta(cal.sigma, sens, cal.epsilon_bar) <= cal.delta_bar


def test_analytic_is_smaller_and_still_valid():
    for epsilon in EPSILONS:
        for delta in DELTAS:
            paper = deletion_calibration(epsilon, delta, 1.0, "paper")
            analytic = deletion_calibration(epsilon, delta, 1.0, "analytic")
            assert analytic.sigma < paper.sigma
            # near-optimal: 1% less noise would break (epsilon_bar, delta_bar)
            sens = analytic.center_sensitivity
            assert gaussian_delta(0.99 * analytic.sigma, sens, analytic.epsilon_bar) > (
                analytic.delta_bar
            )


def test_calibration_is_frozen_and_validated():
    cal = deletion_calibration(8.0, 0.05, 0.1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cal.sigma = 1.0  # type: ignore[misc]
    with pytest.raises(ValueError):
        cal.tdlap_pmf[0] = 0.5
    assert dataclasses.replace(cal) == cal
    for changes in (
        {"sigma": cal.sigma / 2},
        {"kappa": cal.kappa - 1},
        {"radius": cal.radius - 1},
        {"min_users": cal.min_users - 1},
        {"delta_bar": cal.delta_bar * 1.01},
        {"center_sensitivity": cal.center_sensitivity / 2},
        {"tdlap_pmf": np.ones(2 * cal.kappa + 1) / (2 * cal.kappa + 1)},
        {"gaussian": "classical"},
    ):
        with pytest.raises(InvalidParameterError):
            dataclasses.replace(cal, **changes)


# ----------------------------------------------------------------------------- calculators
def test_deletion_sensitivity_bound_closed_forms():
    # n = 2, r = 0, beta = 2 e^-4: ln(1/beta) + ln 2 = 4, so the bound is
    # 5 G * 2 / (mu * 1 * sqrt(m)) = 5 at G = 3, mu = 2, m = 9
    beta = 2 * math.exp(-4)
    assert deletion_sensitivity_bound(3.0, 2.0, 2, 9, beta, 0) == pytest.approx(5.0, rel=1e-13)
    assert deletion_sensitivity_bound(3.0, 2.0, 2, 9, beta, 0, constrained=True) == (
        pytest.approx(10.0, rel=1e-13)
    )
    # spec C.4 T1: eps = 1, delta = 1e-6 -> kappa = 32, r = 128; n = 1e4, m = 100, beta = 1e-3
    r = deletion_calibration(1.0, 1e-6, 1.0).radius
    assert r == 128
    bound = deletion_sensitivity_bound(1.0, 1.0, 10**4, 100, 1e-3, r)
    assert float(f"{bound:.5g}") == 1.7511e-3
    # n >= 2 (r + 1): at most the 10 G sqrt(...) / (mu n sqrt(m)) form, printed 3.4569e-3
    simple = 10 * math.sqrt(math.log(1e3) + 129 * math.log(1e4)) / (1e4 * 10)
    assert float(f"{simple:.5g}") == 3.4569e-3
    assert bound <= simple
    # 1/sqrt(m) scaling
    assert deletion_sensitivity_bound(1.0, 1.0, 10**4, 400, 1e-3, r) == pytest.approx(
        bound / 2, rel=1e-13
    )


def test_population_radius_closed_form():
    # beta = 2 e^-4: ln(2/beta) = 4; 30 * 2 * 2 / (4 * sqrt(25 * 4)) = 3
    assert population_radius(2.0, 4.0, 25, 4, 2 * math.exp(-4)) == pytest.approx(3.0, rel=1e-13)


def test_required_users():
    assert required_users(8.0, 0.05) == 14
    assert required_users(8.0, 0.05, provable_sensitivity=True) == 26
    # phases: each call at (epsilon/T, delta/T)
    assert required_users(16.0, 0.1, phases=2) == 14
    assert required_users(1.0, 1e-6) == 130
    assert required_users(1.0, 1e-6, provable_sensitivity=True) == 258
    # no tabulation: works where deletion_calibration refuses (kappa > 2^20)
    assert required_users(1e-5, 1e-6) > 4 * 2**20
    with pytest.raises(InvalidParameterError, match="kappa"):
        deletion_calibration(1e-5, 1e-6, 1.0)


def test_crossover_items_spec_c4():
    """Spec C.4 T1: eps = 1, delta = 1e-6, n = 1e4, G = mu = 1, beta = 1e-3: naive analytic
    sigma 8.449e-4; crossover m* = 7.1e9 (paper) and 2.1e9 (analytic)."""
    args = (1.0, 1e-6, 1.0, 1.0, 10**4, 1e-3)
    m_paper = crossover_items(*args)
    m_analytic = crossover_items(*args, gaussian="analytic")
    assert float(f"{m_paper:.2g}") == 7.1e9
    assert float(f"{m_analytic:.2g}") == 2.1e9
    # at m = m*, the two sigmas agree
    naive = analytic_gaussian_sigma(2.0 / 10**4, 1.0, 1e-6)
    assert float(f"{naive:.4g}") == 8.449e-4
    for mode, m_star in (("paper", m_paper), ("analytic", m_analytic)):
        target = deletion_sensitivity_bound(1.0, 1.0, 10**4, round(m_star), 1e-3, 128)
        sigma = deletion_calibration(1.0, 1e-6, target, gaussian=mode).sigma
        assert sigma == pytest.approx(naive, rel=1e-6)
    # spec C.4 T1: at m = 100 the deletion route is 8.4e3 (paper) / 4.6e3 (analytic) noisier
    target_100 = deletion_sensitivity_bound(1.0, 1.0, 10**4, 100, 1e-3, 128)
    assert float(f"{deletion_calibration(1.0, 1e-6, target_100).sigma:.4g}") == 7.128
    assert float(f"{deletion_calibration(1.0, 1e-6, target_100, 'analytic').sigma:.4g}") == 3.853
    assert m_paper / 100 == pytest.approx((7.128 / 8.449e-4) ** 2, rel=1e-3)
    # the printed (unproven) Delta of Alg 2 line 3 is 2.6283e-4 at m = 100
    m_printed = crossover_items(*args, sensitivity="printed")
    sigma_printed_100 = 4070.7103449 * 10 * math.sqrt(math.log(1e3)) / (1e4 * 10)
    assert m_printed == pytest.approx(100 * (sigma_printed_100 / naive) ** 2, rel=1e-6)
    # constrained doubles G in Delta, so m* grows fourfold
    assert crossover_items(*args, constrained=True) == pytest.approx(4 * m_paper, rel=1e-9)


# ----------------------------------------------------------------------------- bad inputs
BAD_CALLS = [
    (deletion_calibration, (0.0, 1e-6, 1.0), {}),
    (deletion_calibration, (-1.0, 1e-6, 1.0), {}),
    (deletion_calibration, (math.inf, 1e-6, 1.0), {}),
    (deletion_calibration, (math.nan, 1e-6, 1.0), {}),
    (deletion_calibration, (True, 1e-6, 1.0), {}),
    (deletion_calibration, ("1", 1e-6, 1.0), {}),
    (deletion_calibration, (1.0, 0.0, 1.0), {}),
    (deletion_calibration, (1.0, 1.0, 1.0), {}),
    (deletion_calibration, (1.0, -0.1, 1.0), {}),
    (deletion_calibration, (1.0, 1e-320, 1.0), {}),
    (deletion_calibration, (1.0, 1e-6, 0.0), {}),
    (deletion_calibration, (1.0, 1e-6, -1.0), {}),
    (deletion_calibration, (1.0, 1e-6, math.inf), {}),
    (deletion_calibration, (1.0, 1e-6, 1e307), {}),
    (deletion_calibration, (1.0, 1e-6, 1.0), {"gaussian": "classical"}),
    (deletion_sensitivity_bound, (0.0, 1.0, 10, 1, 0.1, 1), {}),
    (deletion_sensitivity_bound, (1.0, -1.0, 10, 1, 0.1, 1), {}),
    (deletion_sensitivity_bound, (1.0, 1.0, 0, 1, 0.1, 1), {}),
    (deletion_sensitivity_bound, (1.0, 1.0, 10.5, 1, 0.1, 1), {}),
    (deletion_sensitivity_bound, (1.0, 1.0, True, 1, 0.1, 1), {}),
    (deletion_sensitivity_bound, (1.0, 1.0, 10, 0, 0.1, 1), {}),
    (deletion_sensitivity_bound, (1.0, 1.0, 10, 1, 0.0, 1), {}),
    (deletion_sensitivity_bound, (1.0, 1.0, 10, 1, 1.0, 1), {}),
    (deletion_sensitivity_bound, (1.0, 1.0, 10, 1, 0.1, -1), {}),
    (deletion_sensitivity_bound, (1.0, 1.0, 10, 1, 0.1, 9), {}),  # n < r + 2
    (deletion_sensitivity_bound, (1.0, 1.0, 2, 1, 0.9, 0), {}),  # beta / n > 1/e
    (deletion_sensitivity_bound, (1.0, 1.0, 10, 1, 0.1, 1), {"constrained": 1}),
    (population_radius, (1.0, 1.0, 10, 1, 0.5), {}),  # Prop B.1 needs beta < 1/e
    (population_radius, (1.0, 1.0, 10, 1, 0.0), {}),
    (population_radius, (1.0, 0.0, 10, 1, 0.1), {}),
    (population_radius, (1.0, 1.0, 10, 0, 0.1), {}),
    (required_users, (1.0, 1e-6), {"phases": 0}),
    (required_users, (1.0, 1e-6), {"provable_sensitivity": "yes"}),
    (required_users, (0.0, 1e-6), {}),
    (required_users, (1.0, 0.5 + 0.5), {}),
    (crossover_items, (1.0, 1e-6, 1.0, 1.0, 100, 1e-3), {}),  # n < 4 kappa + 2 = 130
    (crossover_items, (1.0, 1e-6, 1.0, 1.0, 10**4, 1e-3), {"sensitivity": "guess"}),
    (crossover_items, (1.0, 1e-6, 1.0, 1.0, 10**4, 1e-3), {"gaussian": "zwb"}),
    (crossover_items, (1.0, 1e-6, 1.0, 1.0, 10**4, 1.5), {}),
    (crossover_items, (1.0, 1e-6, -1.0, 1.0, 10**4, 1e-3), {}),
]


@pytest.mark.parametrize(("func", "args", "kwargs"), BAD_CALLS)
def test_bad_input_raises(func, args, kwargs):
    with pytest.raises(InvalidParameterError):
        func(*args, **kwargs)


def test_is_a_valueerror_with_a_clear_message():
    with pytest.raises(ValueError, match=r"`epsilon` parameter of `deletion_calibration`"):
        deletion_calibration(-1.0, 1e-6, 1.0)
    with pytest.raises(ValueError, match=r"n >= r \+ 2"):
        deletion_sensitivity_bound(1.0, 1.0, 5, 1, 0.1, 4)
    assert isinstance(deletion_calibration(1.0, 1e-6, 1.0), DeletionCalibration)
