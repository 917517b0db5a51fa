"""Tests of the paper-002 calculators of ``dpcvx.calculators`` (Lowy and Razaviyayn, output
perturbation) against answers computed independently of the code under test: closed forms
evaluated by hand, the ZWB+19 noise levels of the 002 digest (Section 3.3), monotonicity, the
printed constants of the paper checked on a grid, and a simulated unprojected release on a
smooth strongly convex ERM problem whose excess risk is known in closed form."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpcvx.calculators import (
    smooth_convex_bound,
    smooth_perturbation_bound,
    smooth_strongly_convex_bound,
    smooth_strongly_convex_population_bound,
    smooth_tilted_bound,
    strongly_convex_population_bound,
)
from dpcvx.errors import InvalidParameterError
from dpcvx.mechanisms.noise import calibrate
from dpcvx.mechanisms.sampling import release_point

# delta with c_delta = 1 exactly: sqrt(16 delta + 1) - 1 = 2/e; with epsilon = 3,
# s_delta = 1 + sqrt(1 + 3) = 3.
DELTA_C1 = ((1 + 2 / math.e) ** 2 - 1) / 16


# --------------------------------------------------------------------------- Prop 2.6 (E4)
def test_prop_2_6_pure_by_hand():
    # (beta/2) d(d+1) Delta^2/eps^2 at beta=2, Delta=0.5, d=3, eps=1.5: 12 * 0.25/2.25 = 4/3
    b = smooth_perturbation_bound(smoothness=2, sensitivity=0.5, d=3, epsilon=1.5)
    assert b.value == pytest.approx(4 / 3, rel=1e-14)
    assert b.noise_second_moment == pytest.approx(4 / 3, rel=1e-14)
    assert b.paper_value == pytest.approx(2 * 9 * 0.25 / 2.25, rel=1e-14)  # beta d^2 D^2/e^2
    assert b.sigma is None and "2.6" in b.reference


def test_prop_2_6_gaussian_by_hand_with_erratum_4():
    # c_delta = 1, eps = 3: s = 3, sigma = 3 * 0.5/(sqrt2 * 3) = 0.5/sqrt2, d sigma^2 = 3/8;
    # value = (beta/2) d sigma^2 = 3/8 at beta = 2. Printed (no d): 3/8 / 3 = 1/8.
    b = smooth_perturbation_bound(smoothness=2, sensitivity=0.5, d=3, epsilon=3.0, delta=DELTA_C1)
    assert b.sigma == pytest.approx(0.5 / math.sqrt(2), rel=1e-12)
    assert b.value == pytest.approx(3 / 8, rel=1e-12)
    assert b.paper_value == pytest.approx(1 / 8, rel=1e-12)  # erratum E4: missing factor d
    assert any("E4" in e for e in b.errata)


@pytest.mark.parametrize(
    "delta, epsilon, sigma", [(1e-5, 0.1, 45.1145), (1e-5, 1, 4.6089), (1e-6, 10, 0.5842)]
)
def test_gaussian_sigma_matches_the_digest_table(delta, epsilon, sigma):
    # digest Section 3.3 (Delta = 1), computed independently when the digest was written
    b = smooth_perturbation_bound(smoothness=1, sensitivity=1, d=1, epsilon=epsilon, delta=delta)
    assert b.sigma == pytest.approx(sigma, abs=1e-4)


# ------------------------------------------------------------------ Cor 2.2, Theorem 3.2
def test_cor_2_2_and_thm_3_2_erm_pure_by_hand():
    # L=1, mu=0.5, beta=2 (kappa=4), n=10, d=2, eps=1: Delta = 2L/(mu n) = 0.4, ratio = 0.2.
    # Conceptual: (beta/2) d(d+1) Delta^2/eps^2 = 6 * 0.16 = 0.96; Cor 2.2: 4*4*2*0.04 = 1.28.
    b = smooth_strongly_convex_bound(
        d=2, epsilon=1, lipschitz=1, strong_convexity=0.5, smoothness=2, n=10, accuracy=0
    )
    assert b.sensitivity == pytest.approx(0.4)
    assert b.ratio == pytest.approx(0.2)
    assert b.conceptual_value == pytest.approx(0.96, rel=1e-12)
    assert b.value == pytest.approx(0.96, rel=1e-12)  # alpha = 0
    assert b.corollary_value == pytest.approx(1.28, rel=1e-12)
    assert b.theorem_value == pytest.approx(26 * 4 * 2 * 0.04, rel=1e-12)
    # paper alpha = (L^2/(mu n^2)) min{kappa (d/eps)^2, 1} = 0.02; Delta' = 0.4 + 2 sqrt(0.08)
    p = smooth_strongly_convex_bound(
        d=2, epsilon=1, lipschitz=1, strong_convexity=0.5, smoothness=2, n=10
    )
    assert p.accuracy == pytest.approx(0.02) and p.theorem_value_applies
    Dp = 0.4 + 2 * math.sqrt(0.08)
    assert p.inflated_sensitivity == pytest.approx(Dp)
    assert p.value == pytest.approx(6 * Dp**2 + 0.02, rel=1e-12)
    # Thm 3.2 2a) display: 4 beta (L/(mu n) + sqrt(2 alpha/mu))^2 (d/eps)^2 + alpha
    assert p.theorem_display_value == pytest.approx(
        4 * 2 * (0.2 + math.sqrt(0.08)) ** 2 * 4 + 0.02, rel=1e-12
    )


def test_thm_3_2_non_erm_gaussian_by_hand():
    # d=1, eps=3, c=1 (s=3), L=1, mu=1, beta=2, non-ERM: Delta = 2, sigma = 3*2/(3 sqrt2)
    # = sqrt2, conceptual = (beta/2) sigma^2 = 2; Cor 2.2 printed: 4*2*1*(3/3)^2 = 8.
    b = smooth_strongly_convex_bound(
        d=1,
        epsilon=3,
        delta=DELTA_C1,
        lipschitz=1,
        strong_convexity=1,
        smoothness=2,
        accuracy=0,
    )
    assert b.conceptual_value == pytest.approx(2.0, rel=1e-12)
    assert b.corollary_value == pytest.approx(8.0, rel=1e-12)
    assert b.theorem_value == pytest.approx(13.5 * 2, rel=1e-12)


def test_printed_constants_bound_the_corrected_values_on_a_grid():
    grid = itertools.product([1, 3, 10], [0.5, 2, 20, 200], [0.0, 1e-5, 0.1], [None, 10, 1000])
    for d, eps, delta, n in grid:
        for kappa in (1, 4, 50):
            b = smooth_strongly_convex_bound(
                d=d,
                epsilon=eps,
                delta=delta,
                lipschitz=1.3,
                strong_convexity=0.7,
                smoothness=0.7 * kappa,
                n=n,
            )
            assert b.conceptual_value <= b.corollary_value * (1 + 1e-12)
            assert b.value <= b.theorem_display_value * (1 + 1e-12)
            assert b.theorem_display_value <= b.theorem_value * (1 + 1e-12)
        for R, beta in ((1.0, 1.0), (2.0, 0.5), (1.0, 10.0)):
            c = smooth_convex_bound(
                d=d, epsilon=eps, delta=delta, lipschitz=1.0, radius=R, smoothness=beta, n=n
            )
            c0 = smooth_convex_bound(
                d=d,
                epsilon=eps,
                delta=delta,
                lipschitz=1.0,
                radius=R,
                smoothness=beta,
                n=n,
                accuracy=0,
            )
            if c.hypotheses_hold:
                assert c.value <= c.theorem_value
                assert c0.value <= c0.conceptual_paper_value


@pytest.mark.parametrize("delta", [0.0, 1e-5])
def test_smooth_bounds_decrease_in_n_and_epsilon(delta):
    kw = dict(lipschitz=1.0, strong_convexity=0.5, smoothness=2.0, delta=delta, d=4)
    by_n = [smooth_strongly_convex_bound(epsilon=1.0, n=n, **kw).value for n in (10, 100, 1000)]
    by_e = [smooth_strongly_convex_bound(epsilon=e, n=100, **kw).value for e in (0.5, 1, 4)]
    assert by_n == sorted(by_n, reverse=True) and by_e == sorted(by_e, reverse=True)
    # conceptual ERM bound has slope -2 in n: (beta/2) E||z||^2 with Delta ~ 1/n
    a, b = (
        smooth_strongly_convex_bound(epsilon=1.0, n=n, accuracy=0, **kw).value for n in (100, 1000)
    )
    assert a / b == pytest.approx(100.0, rel=1e-12)
    kwj = dict(lipschitz=1.0, radius=1.0, smoothness=2.0, delta=delta, d=4)
    jn = [smooth_convex_bound(epsilon=1.0, n=n, **kwj).value for n in (10, 100, 1000)]
    je = [smooth_convex_bound(epsilon=e, n=100, **kwj).value for e in (0.5, 1, 4)]
    assert jn == sorted(jn, reverse=True) and je == sorted(je, reverse=True)


def test_thm_3_5_by_hand():
    # beta=1, L=1, R=1, d=1, eps=1, n=8 (ratio 1/8): lambda = (1/8)^(2/3) = 1/4, target = 1/4.
    c = smooth_convex_bound(d=1, epsilon=1, lipschitz=1, radius=1, smoothness=1, n=8, accuracy=0)
    assert c.regularization == pytest.approx(0.25) and c.target == pytest.approx(0.25)
    # Delta = 2 (1 + 1/4)/(1/4 * 8) = 1.25; E||z||^2 = 2 * 1.25^2; value = 1/8 + (5/8) * 3.125
    assert c.sensitivity == pytest.approx(1.25)
    assert c.value == pytest.approx(0.125 + 0.625 * 3.125, rel=1e-12)
    assert c.theorem_value == pytest.approx(65 / 4) and c.hypotheses_hold


# ----------------------------------------------------------------------- TERM (erratum E9)
def test_smooth_tilted_bound_carries_c_tau_squared():
    kw = dict(
        n=1000,
        d=2,
        epsilon=1.0,
        lipschitz=1.0,
        strong_convexity=1.0,
        smoothness=1.0,
        tilt=1.0,
        loss_lower=0.0,
        accuracy=0,
    )
    one = smooth_tilted_bound(loss_upper=math.log(4), **kw)  # C_tau = 4
    two = smooth_tilted_bound(loss_upper=math.log(8), **kw)  # C_tau = 8
    assert one.tilt_factor == pytest.approx(4) and one.sensitivity_factor == pytest.approx(4e-3)
    assert one.condition_number == pytest.approx(2.0)  # (beta + tau L^2)/mu
    # doubling C_tau (below n) quadruples the bound: Delta^2 scaling, not C_tau (E9)
    assert two.conceptual_value / one.conceptual_value == pytest.approx(4.0, rel=1e-12)
    assert two.theorem_value / one.theorem_value == pytest.approx(4.0, rel=1e-12)
    # by hand: 4 kappa_tau (L^2 C^2/mu)(d/(eps n))^2 = 4*2*16*(2e-3)^2
    assert one.corollary_value == pytest.approx(4 * 2 * 16 * 4e-6, rel=1e-12)
    # the printed Thm 5.2 (with C_tau) is C_tau times too small
    assert one.theorem_value / one.printed_value == pytest.approx(4.0, rel=1e-12)
    assert any("E9" in e for e in one.errata)
    # C_tau >= n: sensitivity falls back to 2L/mu
    big = smooth_tilted_bound(loss_upper=math.log(5000), **kw)
    assert big.sensitivity == pytest.approx(2.0)


# ---------------------------------------------------------------- Props 4.1, 4.2 (population)
def test_prop_4_1_by_hand():
    # L=1, mu=1, n=100, d=2, eps=1, pure, alpha=0: Delta = 0.02; stability 0.02; empirical
    # L d Delta/eps = 0.04; Prop 4.1 printed 2(1/100 + 2/100) = 0.06.
    p = strongly_convex_population_bound(n=100, d=2, epsilon=1, lipschitz=1, strong_convexity=1)
    assert p.stability_term == pytest.approx(0.02)
    assert p.empirical_term == pytest.approx(0.04)
    assert p.value == pytest.approx(0.06) and p.proposition_value == pytest.approx(0.06)
    assert p.corollary_value == pytest.approx(5 / 100 + 9 * 0.02)
    assert p.paper_accuracy == pytest.approx(1e-4)  # (L^2/(mu n)) min{1/n, d/eps}
    c = strongly_convex_population_bound(
        n=100, d=2, epsilon=1, lipschitz=1, strong_convexity=1, accuracy=p.paper_accuracy
    )
    assert c.value <= c.corollary_value


def test_prop_4_2_by_hand_and_the_stability_repair():
    # L=1, mu=1, beta=2, n=100, d=2, eps=1, alpha=0: Delta = 0.02, E||z|| = 0.04,
    # E||z||^2 = 6 * 4e-4. Stability (L + beta E||z||) Delta + beta Delta^2/2 = 1.08*0.02 + 4e-4
    p = smooth_strongly_convex_population_bound(
        n=100, d=2, epsilon=1, lipschitz=1, strong_convexity=1, smoothness=2
    )
    assert p.paper_stability_term == pytest.approx(0.02)
    assert p.stability_term == pytest.approx(1.08 * 0.02 + 4e-4, rel=1e-12)
    assert p.empirical_term == pytest.approx(6 * 4e-4, rel=1e-12)
    assert p.proposition_value == pytest.approx(2 / 100 + 4 * 2 * 4e-4, rel=1e-12)
    assert not p.projected and any("Lemma 4.2" in e for e in p.errata)


@pytest.mark.parametrize("delta", [0.0, 1e-5])
def test_population_bounds_decrease_in_n_and_epsilon(delta):
    for fn, extra in (
        (strongly_convex_population_bound, {}),
        (smooth_strongly_convex_population_bound, {"smoothness": 3.0}),
    ):
        kw = dict(d=3, lipschitz=1.0, strong_convexity=0.5, delta=delta, **extra)
        by_n = [fn(n=n, epsilon=1.0, **kw).value for n in (10, 100, 1000)]
        by_e = [fn(n=100, epsilon=e, **kw).value for e in (0.5, 1.0, 4.0)]
        assert by_n == sorted(by_n, reverse=True) and by_e == sorted(by_e, reverse=True)
        # the statistical floor 2L^2/(mu n) (or more) remains as epsilon grows
        assert fn(n=100, epsilon=1e6, **kw).value >= 2 * 1.0 / (0.5 * 100)


def test_bad_input_is_rejected():
    with pytest.raises(InvalidParameterError):
        smooth_perturbation_bound(smoothness=1, sensitivity=1, d=1, epsilon=1, delta=0.5)
    with pytest.raises(InvalidParameterError):
        smooth_strongly_convex_bound(d=1, epsilon=1, lipschitz=1, strong_convexity=2, smoothness=1)
    with pytest.raises(InvalidParameterError):
        smooth_strongly_convex_bound(
            d=1, epsilon=1, lipschitz=1, strong_convexity=1, smoothness=1, accuracy=-1
        )
    with pytest.raises(InvalidParameterError):
        smooth_tilted_bound(
            n=10,
            d=1,
            epsilon=1,
            lipschitz=1,
            strong_convexity=1,
            smoothness=1,
            tilt=1,
            loss_lower=1,
            loss_upper=0,
        )
    with pytest.raises(InvalidParameterError):
        strongly_convex_population_bound(n=0, d=1, epsilon=1, lipschitz=1, strong_convexity=1)


# ------------------------------------------------- utility: a simulated unprojected release
@pytest.mark.statistical
@pytest.mark.parametrize("delta", [0.0, 1e-5])
def test_unprojected_release_stays_below_the_smooth_bound(delta):
    """ERM with f(w, x) = (1/2)(w - x)^T H (w - x), H = diag(0.5, 1, 2), data in B(0, 1), domain
    B(0, 1): mu = 0.5, beta = 2, L = beta (R + B) = 4. w* = mean(x) is unconstrained and the
    excess risk of w* + z is exactly (1/2) z^T H z. Each draw releases w* + z with dpcvx's exact
    release (``release_point``), noise calibrated to the calculator's sensitivity 2L/(mu n).

    False-failure rate: E[excess] = (1/2) tr(H) E||z||^2/d = 0.583 x bound, and the exact
    variance of (1/2) z^T H z (Gamma radius / chi-square moments) gives by Chebyshev
    P(mean of N=2000 draws > bound) < 2e-3 (pure) and < 1e-3 (Gaussian); the normal
    approximation puts both below 1e-50. The draws are seeded, so the test is deterministic.
    """
    rng = np.random.default_rng(20240616)
    h = np.array([0.5, 1.0, 2.0])
    d, n, eps, N = 3, 50, 2.0, 2000
    x = rng.normal(size=(n, d))
    x /= np.maximum(1.0, np.linalg.norm(x, axis=1))[:, None]
    w_star = x.mean(axis=0)
    b = smooth_strongly_convex_bound(
        d=d,
        epsilon=eps,
        delta=delta,
        lipschitz=4.0,
        strong_convexity=0.5,
        smoothness=2.0,
        n=n,
        accuracy=0,
    )
    noise = calibrate(b.sensitivity, eps, delta, gaussian="zwb")
    excess = np.empty(N)
    for i in range(N):
        z = release_point(w_star, noise, rng) - w_star
        excess[i] = 0.5 * float(z @ (h * z))
    mean = float(excess.mean())
    assert mean <= b.value
    # and the measured value is what the closed form predicts (sanity of the setup)
    predicted = 0.5 * h.sum() * b.conceptual_value / (0.5 * 2.0 * d)
    assert mean == pytest.approx(predicted, rel=0.1)
