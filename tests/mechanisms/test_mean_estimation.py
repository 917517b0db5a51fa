"""Private heavy-tailed mean estimation (paper 003, Alg 3 and Alg 4): noise constants against
the digest's closed forms, worst-case sensitivity, the Alg 4 erratum, audits with negative
controls, and the error rate."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpcvx
from dpcvx.mechanisms.mean_estimation import CoordinatewiseMedianOfMeans, NoiseSmoothingMean
from dpcvx.mechanisms.robust_means import median_of_means, smoothed_truncation_mean
from tests.audit_tools import epsilon_lower_bound

# most tests exercise the earlier ``estimator.release(X, ...)`` spelling on purpose (it must keep
# working); its DeprecationWarning is asserted in test_the_earlier_spelling_is_deprecated_*
pytestmark = pytest.mark.filterwarnings(
    r"ignore:.*\.release\(X, \.\.\.\) is deprecated:DeprecationWarning"
)


def test_noise_constants_match_the_closed_forms():
    n, d, tau, m, rho, eps = 1000, 4, 12.0, 7, 0.3, 0.8
    cw = CoordinatewiseMedianOfMeans(k=4, tau=tau, buckets=m)
    assert cw.plan(n, d, rho=rho).scale ** 2 == pytest.approx(
        72 * tau**2 * m**2 * d / (rho * n**2), rel=1e-14
    )
    assert cw.plan(n, d, epsilon=eps).scale == pytest.approx(
        12 * tau * m * d / (eps * n), rel=1e-14
    )
    # the default bucket count: m = ceil(4 log(2d/beta)); with the unrounded m the Gaussian
    # variance is the digest's 1152 tau^2 d log^2(2d/beta) / (rho n^2)
    default = CoordinatewiseMedianOfMeans(k=4, tau=tau).plan(n, d, rho=rho)
    assert default.buckets == math.ceil(4 * math.log(2 * d / 0.1))
    ns = NoiseSmoothingMean(k=4, tau=tau)
    assert ns.plan(n, d, rho=rho).scale ** 2 == pytest.approx(
        16 * tau**2 * d / (9 * rho * n**2), rel=1e-14
    )
    assert NoiseSmoothingMean.printed_sigma(tau, n, d, rho) ** 2 == pytest.approx(
        tau**2 * d / (rho * n**2), rel=1e-14
    )
    # the printed calibration is (16/9) rho-zCDP: the erratum
    ratio = ns.plan(n, d, rho=rho).scale / NoiseSmoothingMean.printed_sigma(tau, n, d, rho)
    assert ratio**2 == pytest.approx(16 / 9)
    # Cor 4.2's tau, clamped to >= 10
    assert CoordinatewiseMedianOfMeans(k=4).plan(10**8, 2, epsilon=1.0).tau == pytest.approx(
        (1e8 / 2) ** 0.25
    )
    assert CoordinatewiseMedianOfMeans(k=4).plan(100, 2, epsilon=1.0).tau == 10.0


@pytest.mark.parametrize("constants", ["paper", "tight"])
def test_worst_case_neighbours_stay_within_the_sensitivity(constants):
    """A row replaced by +huge and by -huge in every bucket position."""
    rng = np.random.default_rng(0)
    n, d, m, tau = 203, 3, 5, 10.0
    X = rng.standard_t(3, size=(n, d))
    est = CoordinatewiseMedianOfMeans(k=4, tau=tau, buckets=m, constants=constants)
    plan = est.plan(n, d, epsilon=1.0)
    worst = 0.0
    for i in range(n):
        hi, lo = X.copy(), X.copy()
        hi[i], lo[i] = 1e9, -1e9
        diff = median_of_means(hi, tau, m) - median_of_means(lo, tau, m)
        worst = max(worst, float(np.max(np.abs(diff))))
        assert np.sum(np.abs(diff)) <= plan.l1_sensitivity * (1 + 1e-12)
        assert np.linalg.norm(diff) <= plan.l2_sensitivity * (1 + 1e-12)
    assert worst <= plan.linf_sensitivity * (1 + 1e-12)


def test_noise_smoothing_sensitivity_and_the_printed_error():
    rng = np.random.default_rng(1)
    n, d, tau = 50, 4, 10.0
    X = rng.standard_t(3, size=(n, d))
    hi, lo = X.copy(), X.copy()
    hi[7], lo[7] = 6 * tau, -6 * tau
    # with a small smoothing variance c the soft truncation saturates: the bound is attained.
    # (With c = 1 the sign flips of 1 + N keep |E phi| <= 0.643 and the printed calibration
    # happens to suffice; the paper leaves c unspecified, so dpcvx uses the bound for every c.)
    diff = smoothed_truncation_mean(hi, tau, 0.0001) - smoothed_truncation_mean(lo, tau, 0.0001)
    plan = NoiseSmoothingMean(k=4, tau=tau, smoothing=0.0001).plan(n, d, rho=1.0)
    assert np.linalg.norm(diff) <= plan.l2_sensitivity * (1 + 1e-12)
    assert np.linalg.norm(diff) == pytest.approx(plan.l2_sensitivity, rel=1e-3)  # attained
    printed = math.sqrt(2) * tau * math.sqrt(d) / n  # the paper's claimed Delta_2
    assert np.linalg.norm(diff) > 1.3 * printed


def test_closed_form_smoothing_matches_monte_carlo():
    rng = np.random.default_rng(2)
    noise = rng.normal(size=(400_000, 1))

    def phi(y):
        return np.where(np.abs(y) <= math.sqrt(2), y - y**3 / 6, np.sign(y) * 2 * math.sqrt(2) / 3)

    for x in (0.0, 0.3, -2.5, 7.0, -40.0, 150.0, -3000.0):
        mc = 2.0 * np.mean(phi(x * (1 + noise) / 2.0))
        assert smoothed_truncation_mean(np.array([[x]]), 2.0)[0] == pytest.approx(mc, abs=5e-3)


def test_release_ledger_and_bad_input():
    X = np.random.default_rng(3).standard_t(5, size=(500, 2))
    res = NoiseSmoothingMean(k=4).release(X, rho=0.2, delta=1e-6, rng=0)
    assert res.rho == 0.2 and res.ledger.events[0].kind == "zcdp" and res.seeded
    acct = dpcvx.ZcdpAccountant(0.3)
    NoiseSmoothingMean(k=4).release(X, rho=0.2, rng=0, accountant=acct)
    with pytest.raises(dpcvx.PrivacyBudgetError):
        CoordinatewiseMedianOfMeans(k=4).release(X, rho=0.2, rng=0, accountant=acct)
    for bad in (
        dict(k=1.5),
        dict(k=4, moment=0.0),
        dict(k=4, tau=-1.0),
        dict(k=4, constants="loose"),
        dict(k=4, buckets=0),
    ):
        with pytest.raises(dpcvx.InvalidParameterError):
            CoordinatewiseMedianOfMeans(**bad)
    with pytest.raises(dpcvx.InvalidParameterError, match="exactly one"):
        NoiseSmoothingMean(k=4).release(X, epsilon=1.0, rho=1.0)
    with pytest.raises(dpcvx.DataError):
        NoiseSmoothingMean(k=4).release(np.array([[np.nan, 1.0]]), epsilon=1.0)
    with pytest.raises(dpcvx.InvalidParameterError, match="at least m"):
        CoordinatewiseMedianOfMeans(k=4).release(X[:5], epsilon=1.0)


def _pair(n=30):
    """Three buckets of 10: the middle one holds the differing row, the others sit at the
    clipping bounds, so the median moves by the full 6 tau / b (worst case)."""
    X = np.zeros((n, 1))
    X[:10], X[20:] = -30.0, 30.0
    Y = X.copy()
    X[10], Y[10] = 60.0, -60.0  # beyond the clipping of both estimators (tau = 10)
    return X, Y


@pytest.mark.statistical
def test_pure_median_of_means_audit_and_negative_control():
    """Clopper-Pearson + Bonferroni at level 1e-3 (false-failure rate <= 1e-3). The control
    draws noise for 3 epsilon while claiming epsilon and must be caught."""
    X, Y = _pair()
    est = CoordinatewiseMedianOfMeans(k=4, tau=10.0, buckets=3, constants="tight")
    eps, runs = 1.0, 4000
    plan = est.plan(30, 1, epsilon=eps)
    base_x, base_y = median_of_means(X, 10.0, 3)[0], median_of_means(Y, 10.0, 3)[0]
    assert abs(base_x - base_y) == pytest.approx(plan.linf_sensitivity)  # attained
    rng = np.random.default_rng(4)
    thresholds = np.linspace(min(base_x, base_y), max(base_x, base_y), 5)
    o0 = np.array([est.release(X, epsilon=eps, rng=rng).mean[0] for _ in range(runs)])
    o1 = np.array([est.release(Y, epsilon=eps, rng=rng).mean[0] for _ in range(runs)])
    assert epsilon_lower_bound(o0, o1, thresholds, alpha=1e-3) <= eps
    c0 = base_x + rng.laplace(0, plan.scale / 3, size=runs)
    c1 = base_y + rng.laplace(0, plan.scale / 3, size=runs)
    assert epsilon_lower_bound(c0, c1, thresholds, alpha=1e-3) > eps


@pytest.mark.statistical
def test_noise_smoothing_zcdp_audit_catches_the_printed_calibration():
    """For a Gaussian release the privacy loss is set by rho_eff = Delta^2 / (2 sigma^2) on the
    worst-case pair (Delta the exact shift of the noiseless estimates). 20000 seeded releases
    estimate sigma to about 0.5%; the correct calibration gives rho_eff <= 1.05 rho (false-failure
    rate far below 1e-6, a 10-sigma event) and the printed one 16/9 rho, which must be caught."""
    X, Y = _pair()
    rho, runs, c = 0.5, 20000, 0.0001
    est = NoiseSmoothingMean(k=4, tau=10.0, smoothing=c)
    shift = abs(smoothed_truncation_mean(X, 10.0, c)[0] - smoothed_truncation_mean(Y, 10.0, c)[0])
    rng = np.random.default_rng(5)
    out = np.array([est.release(X, rho=rho, rng=rng).mean[0] for _ in range(runs)])
    sigma = float(np.std(out, ddof=1))
    assert shift**2 / (2 * sigma**2) <= 1.05 * rho
    printed = smoothed_truncation_mean(X, 10.0, c)[0] + rng.normal(
        0, NoiseSmoothingMean.printed_sigma(10.0, 30, 1, rho), size=runs
    )
    sigma_p = float(np.std(printed, ddof=1))
    assert shift**2 / (2 * sigma_p**2) > 1.5 * rho


def _lomax_sampler(shape: float, k: int):
    """Centered Lomax(shape) normalized so that its k-th central absolute moment is 1."""
    from scipy.stats import lomax

    mean = lomax.mean(shape)
    moment = lomax.expect(lambda x: abs(x - mean) ** k, args=(shape,))
    scale = moment ** (1.0 / k)
    return lambda rng, n: (lomax.rvs(shape, size=(n, 1), random_state=rng) - mean) / scale


@pytest.mark.slow
@pytest.mark.statistical
@pytest.mark.parametrize("law", ["student-t", "lomax"])
def test_error_rate_in_the_privacy_dominated_regime(law):
    """Normalized Student-t(5) or centered Lomax(6) (k-th central moment 1), k = 4, d = 1, pure
    epsilon = 1, tight constants: the median absolute error over 300 seeds for n in
    {1e5, 3e5, 1e6, 3e6} has a log-log slope within 0.1 of -(k - 1)/k = -0.75 (there
    tau = (eps n)^(1/4) >= 17.8 and the noise dominates the sampling error). The fitted
    slope's spread over seeds is about 0.033 (bootstrap; 0.085 with the 40 seeds used
    earlier, which made 0.1 a 1.2-sigma band: the test passed by luck and failed once the
    exact sampler changed the seeded draws), so 0.1 is 3 sigma: false-failure rate about 0.3%
    per law. Seeded: deterministic."""
    nu, k = 5.0, 4
    if law == "student-t":
        scale = (3 * nu**2 / ((nu - 2) * (nu - 4))) ** 0.25

        def draw(rng, n):
            return rng.standard_t(nu, size=(n, 1)) / scale
    else:
        draw = _lomax_sampler(6.0, k)
    est = CoordinatewiseMedianOfMeans(k=k, constants="tight")
    ns = [100_000, 300_000, 1_000_000, 3_000_000]
    errors = []
    for n in ns:
        rng = np.random.default_rng(n)
        errs = [abs(est.release(draw(rng, n), epsilon=1.0, rng=rng).mean[0]) for _ in range(300)]
        errors.append(float(np.median(errs)))
    slope = np.polyfit(np.log(ns), np.log(errors), 1)[0]
    assert abs(slope + 0.75) <= 0.1, (slope, errors)


def test_tiny_or_extreme_finite_values_never_produce_nan():
    """Review finding: a value like 1e-160 once made the closed form return NaN (inf * 0),
    which noise cannot hide. Every estimate stays finite and bounded."""
    X = np.random.default_rng(6).standard_t(5, size=(200, 2))
    for bad in (1e-160, -1e-300, 1e300, -1e308, 5e-324):
        Y = X.copy()
        Y[3, 1] = bad
        for c in (1.0, 1e-300):
            assert np.all(np.isfinite(smoothed_truncation_mean(Y, 10.0, c)))
        assert np.all(np.isfinite(median_of_means(Y, 10.0, 5)))
        res = NoiseSmoothingMean(k=4).release(Y, rho=0.5, rng=0)
        assert np.all(np.isfinite(res.mean))
    Z = X.copy()
    Z[0, 0] = np.nan  # the release refuses non-finite data; the noiseless core maps it to 0
    assert np.all(np.isfinite(median_of_means(np.nan_to_num(Z, nan=np.nan), 10.0, 5)))


# ---------------------------------------------------------------- the typed boundary
def test_estimators_are_frozen_mechanisms_released_through_the_pipeline():
    from dpcvx.mechanisms.base import Mechanism

    X = np.random.default_rng(3).standard_t(5, size=(400, 3))
    est = CoordinatewiseMedianOfMeans(k=4)
    assert isinstance(est, Mechanism)
    with pytest.raises((AttributeError, TypeError)):
        est.k = 3  # frozen
    new = dpcvx.ArraySource(X).solve_private(est, epsilon=1.0, rng=11)
    old = est.release(X, epsilon=1.0, rng=11)
    assert isinstance(new, dpcvx.PrivateResult) and isinstance(old, dpcvx.MeanEstimate)
    np.testing.assert_array_equal(new.w, old.mean)
    assert old.mean is old.w and old.rho is None and old.epsilon == 1.0
    assert new.detail["noise"] == "laplace" and len(new.ledger) == 1


def test_noise_scales_are_rounded_up_and_zcdp_events_carry_rho():
    est = NoiseSmoothingMean(k=4)
    plan = est.plan(1000, 4, rho=0.5)
    exact = plan.l2_sensitivity / math.sqrt(2 * 0.5)
    assert plan.scale == math.nextafter(exact, math.inf)
    res = est.release(np.zeros((1000, 4)), rho=0.5, delta=1e-6, rng=0)
    (event,) = res.ledger.events
    assert event.kind == "zcdp" and event.rho == 0.5 and res.rho == 0.5
    pure = CoordinatewiseMedianOfMeans(k=4).plan(1000, 4, epsilon=1.0)
    assert pure.scale == math.nextafter(pure.l1_sensitivity / 1.0, math.inf)


def test_bad_input_through_the_array_source_spends_nothing():
    acc = dpcvx.Accountant(5.0, 1e-5)
    est = CoordinatewiseMedianOfMeans(k=4)
    with pytest.raises(dpcvx.DataError):
        dpcvx.ArraySource([[np.nan, 1.0]]).solve_private(est, epsilon=1.0, accountant=acc)
    with pytest.raises(dpcvx.InvalidParameterError):
        dpcvx.ArraySource(np.zeros((50, 2))).solve_private(est, epsilon=-1.0, accountant=acc)
    with pytest.raises(dpcvx.InvalidParameterError):  # fewer examples than buckets
        dpcvx.ArraySource(np.zeros((3, 2))).solve_private(est, epsilon=1.0, accountant=acc)
    assert len(acc.ledger) == 0
    res = dpcvx.ArraySource(np.zeros((50, 2))).solve_private(
        est, epsilon=1.0, delta=1e-5, accountant=acc, rng=0
    )
    assert res.ledger.events[0].kind == "zcdp" and res.delta == 1e-5


def test_the_earlier_spelling_is_deprecated_but_unchanged():
    X = np.random.default_rng(7).standard_t(5, size=(200, 2))
    est = NoiseSmoothingMean(4, 2.0)  # k and moment by position, as earlier
    assert (est.k, est.moment) == (4.0, 2.0)
    with pytest.warns(DeprecationWarning, match=r"ArraySource\(X\)\.solve_private"):
        old = est.release(X, rho=0.3, delta=1e-6, rng=5)
    with pytest.warns(DeprecationWarning):
        by_name = est.release(X=X, rho=0.3, delta=1e-6, rng=5)
    new = dpcvx.ArraySource(X).solve_private(
        NoiseSmoothingMean(k=4, moment=2.0, rho=0.3), epsilon=old.epsilon, delta=1e-6, rng=5
    )
    np.testing.assert_array_equal(old.mean, new.w)
    np.testing.assert_array_equal(by_name.mean, new.w)
    assert old.rho == 0.3 and old.delta == 1e-6 and old.mechanism == "NoiseSmoothingMean"
    assert set(old.detail) >= {
        "tau",
        "buckets",
        "noise",
        "scale",
        "l1_sensitivity",
        "l2_sensitivity",
        "constants",
    }
    with pytest.raises(dpcvx.InvalidParameterError, match="delta"):  # spends nothing either
        est.release(X, rho=0.3, delta=0.0)
    with pytest.raises(dpcvx.InvalidParameterError, match="release context"):
        est.release(est.plan(200, 2, epsilon=1.0))  # a plan without its context


def test_every_epsilon_delta_request_fits_its_budget():
    """The closed form of dp_to_zcdp rounds above epsilon for about one request in ten (e.g.
    (0.01, 1e-8)); the plan steps rho down so the release never overspends, not even an ulp."""
    X = np.zeros((100, 2))
    for epsilon, delta in ((0.01, 1e-8), (0.01, 1e-9), (0.02, 1e-10), (1.0, 1e-5)):
        acc = dpcvx.Accountant(epsilon, delta)
        res = dpcvx.ArraySource(X).solve_private(
            NoiseSmoothingMean(k=4), epsilon=epsilon, delta=delta, rng=0, accountant=acc
        )
        (event,) = res.ledger.events
        assert event.kind == "zcdp" and event.epsilon <= epsilon and event.delta == delta


def test_a_rho_field_beyond_the_request_raises_and_spends_nothing():
    X = np.zeros((100, 2))
    acc = dpcvx.Accountant(10.0, 1e-5)
    with pytest.raises(dpcvx.InvalidParameterError, match="more than the epsilon"):
        dpcvx.ArraySource(X).solve_private(
            NoiseSmoothingMean(k=4, rho=5.0), epsilon=1.0, delta=1e-6, accountant=acc
        )
    with pytest.raises(dpcvx.InvalidParameterError, match="delta in"):
        dpcvx.ArraySource(X).solve_private(
            NoiseSmoothingMean(k=4, rho=0.1), epsilon=1.0, accountant=acc
        )
    assert len(acc.ledger) == 0
    res = dpcvx.ArraySource(X).solve_private(
        CoordinatewiseMedianOfMeans(k=4, rho=0.01, buckets=5),
        epsilon=1.0,
        delta=1e-6,
        rng=0,
        accountant=acc,
    )
    (event,) = res.ledger.events
    assert event.rho == 0.01 and res.detail["rho"] == 0.01 and res.detail["noise"] == "gaussian"
    assert res.detail["scale"] >= res.detail["l2_sensitivity"] / math.sqrt(2 * 0.01)
