"""Tests of ``dpcvx.calculators`` against answers computed independently of the code under test:
closed forms evaluated by hand at one point, numerical integration, brute-force minimization and
small simulations of the algorithms the theorems describe. Line numbers ``L...`` refer to the
seed texts of papers 000 and 003 (see the module docstring of ``dpcvx.calculators``)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, optimize

from dpcvx.calculators import (
    extension_tradeoff,
    framework_convex_bound,
    framework_strongly_convex_bound,
    heavy_tailed_rate,
    high_probability_parameters,
    lipschitz_extension_bias,
    localized_distance_bound,
    paper_extension_parameter,
)
from dpcvx.errors import InvalidParameterError
from tests.fixtures_000 import (
    bounded_pair,
    cube_packing,
    packing_instance,
    packing_probability,
)

# ------------------------------------------------------------------ 000 Lemma 2.3 / C.1


def test_bias_closed_form_by_hand():
    # D G^k / ((k-1) C^(k-1)) at D=2, G=3, k=3, C=6: 2*27/(2*36) = 0.75
    b = lipschitz_extension_bias(C=6, k=3, moment_bound=3, diameter=2)
    assert b.value == pytest.approx(0.75, rel=1e-15)
    assert b.tail_expectation == pytest.approx(0.375, rel=1e-15)
    assert "L210" in b.reference and b.assumptions and b.errata


def _brute_force_extension_gap(a: float, C: float, R: float) -> float:
    """max_w [f(w) - f_C(w)] for f(w) = a w on [-R, R], with f_C by minimizing over a y-grid."""
    y = np.linspace(-R, R, 4001)
    w = np.linspace(-R, R, 401)
    fC = np.min(a * y[None, :] + C * np.abs(w[:, None] - y[None, :]), axis=1)
    return float(np.max(a * w - fC))


@pytest.mark.parametrize("a", [0.5, 2.0, 3.0, 7.5])
def test_pointwise_lemma_c1_is_attained_by_a_linear_loss(a):
    # Lemma C.1 (L663): f - f_C <= D (A - C)_+ with A = max ||grad f|| = |a|; equality for a w.
    C, R = 2.0, 0.5
    gap = _brute_force_extension_gap(a, C, R)
    assert gap == pytest.approx(2 * R * max(a - C, 0.0), abs=1e-9)


@pytest.mark.parametrize("C", [1.0, 1.5, 3.0, 10.0])
def test_bias_bounds_the_integrated_bias_of_a_pareto_gradient_law(C):
    # A(z) Pareto(shape 4, scale 1): E A^3 = 4 / (4 - 3) = 4, so G_3 = 4^(1/3) (k = 3).
    # With the linear loss, max_w (f - f_C) = D (A - C)_+ exactly (test above), so the expected
    # worst-case bias is D E(A - C)_+, integrated here against the density 4 s^-5.
    D, k, shape = 1.3, 3.0, 4.0
    G = (shape / (shape - k)) ** (1 / k)
    exact, _ = integrate.quad(lambda s: (s - C) * shape * s ** (-shape - 1), max(C, 1.0), np.inf)
    if C < 1.0:
        exact += 1.0 - C
    bound = lipschitz_extension_bias(C=C, k=k, moment_bound=G, diameter=D)
    assert D * exact <= bound.value
    # the Markov step loses exactly the factor (shape/(shape-k)) * C^(shape-k) * (shape-1)/(k-1)
    # for C >= 1 (both sides in closed form): check the ratio, not only the inequality
    ratio = bound.value / (D * exact)
    assert ratio == pytest.approx(G**k / (k - 1) * C ** (shape - k) * (shape - 1), rel=1e-7)


def test_bias_against_monte_carlo_on_a_two_point_law():
    # A = s w.p. q, 0 otherwise: E A^k = q s^k. Monte Carlo of D * mean((A - C)_+).
    rng = np.random.default_rng(0)
    D, k, s, q, C = 2.0, 2.5, 8.0, 0.05, 3.0
    A = np.where(rng.random(200_000) < q, s, 0.0)
    mc = D * np.mean(np.maximum(A - C, 0.0))
    assert mc == pytest.approx(D * q * (s - C), rel=0.05)
    assert (
        mc
        <= lipschitz_extension_bias(C=C, k=k, moment_bound=(q * s**k) ** (1 / k), diameter=D).value
    )


def test_bias_accepts_k_between_one_and_two_but_not_one():
    assert lipschitz_extension_bias(C=2, k=1.5, moment_bound=1, diameter=1).value == (
        pytest.approx(1 / (0.5 * math.sqrt(2)))
    )
    for bad in (
        dict(C=0, k=2, moment_bound=1, diameter=1),
        dict(C=1, k=1, moment_bound=1, diameter=1),
        dict(C=1, k=2, moment_bound=-1, diameter=1),
        dict(C=1, k=2, moment_bound=1, diameter=float("inf")),
        dict(C=1, k=True, moment_bound=1, diameter=1),
    ):
        with pytest.raises(InvalidParameterError):
            lipschitz_extension_bias(**bad)


# ------------------------------------------------------------------ 000: choosing C


def test_paper_extension_parameter_by_hand():
    # G (n eps / d)^(1/k) = 2 * (1000 / 10)^(1/2) = 20
    assert paper_extension_parameter(n=1000, d=10, epsilon=1.0, k=2, moment_bound=2) == (
        pytest.approx(20.0, rel=1e-15)
    )
    with pytest.raises(InvalidParameterError):
        paper_extension_parameter(n=0, d=10, epsilon=1.0, k=2, moment_bound=2)
    with pytest.raises(InvalidParameterError):
        paper_extension_parameter(n=10, d=10, epsilon=1.0, k=1.5, moment_bound=2)


@pytest.mark.parametrize("k,c", [(2.0, 1.0), (3.0, 1.0), (4.5, 1.0), (3.0, 7.0)])
def test_tradeoff_minimizer_by_numeric_minimization(k, c):
    kw = dict(n=5000, d=7, epsilon=0.8, k=k, moment_bound=1.7, diameter=2.5, noise_constant=c)
    t = extension_tradeoff(**kw)
    res = optimize.minimize_scalar(
        lambda logC: extension_tradeoff(C=math.exp(logC), **kw).total,
        bounds=(-10, 15),
        method="bounded",
        options={"xatol": 1e-10},
    )
    assert math.exp(res.x) == pytest.approx(t.optimal_C, rel=1e-4)
    assert res.fun == pytest.approx(t.optimal_total, rel=1e-8)
    if c == 1.0:
        assert t.optimal_C == pytest.approx(t.paper_C, rel=1e-12)
        assert t.C == t.paper_C  # default C is the paper's
    # at the optimum the bias is 1/(k-1) of the privacy term, total k/(k-1) D G (cd/(n eps))^(1-1/k)
    opt = extension_tradeoff(C=t.optimal_C, **kw)
    assert opt.bias == pytest.approx(opt.privacy_term / (k - 1), rel=1e-12)
    hand = k / (k - 1) * 2.5 * 1.7 * (c * 7 / (5000 * 0.8)) ** (1 - 1 / k)
    assert t.optimal_total == pytest.approx(hand, rel=1e-12)


def test_tradeoff_shows_what_n_buys():
    small = extension_tradeoff(n=1000, d=5, epsilon=1, k=4, moment_bound=1, diameter=1)
    big = extension_tradeoff(n=16000, d=5, epsilon=1, k=4, moment_bound=1, diameter=1)
    # optimal total scales as n^-(1-1/k): 16^(3/4) = 8
    assert small.optimal_total / big.optimal_total == pytest.approx(8.0, rel=1e-12)
    with pytest.raises(InvalidParameterError):
        extension_tradeoff(n=10, d=5, epsilon=1, k=4, moment_bound=1, diameter=1, C=-1.0)


def test_localized_distance_bound_by_hand():
    # k = 2: noise c1 C d/(lam eps n) = 2*3*4/(0.5*1*100) = 0.48;
    # bias sqrt(60000*1*4/(1*0.25*100*1)) = sqrt(9600)
    b = localized_distance_bound(
        C=3, n=100, d=4, epsilon=1, k=2, moment_bound=1, regularization=0.5, c1=2
    )
    assert b.noise_term == pytest.approx(0.48, rel=1e-14)
    assert b.bias_term == pytest.approx(math.sqrt(9600.0), rel=1e-14)
    assert b.probability == pytest.approx(0.8 - math.exp(-3))
    assert b.minimizing_C is None  # k = 2: decreasing in C
    smaller = localized_distance_bound(
        C=1, n=100, d=4, epsilon=1, k=2, moment_bound=1, regularization=0.5, c1=2
    )
    assert smaller.value < b.value


@pytest.mark.parametrize("k", [2.5, 3.0, 6.0])
def test_localized_minimizing_C_by_numeric_minimization(k):
    kw = dict(n=20000, d=3, epsilon=0.5, k=k, moment_bound=2.0, regularization=0.1, c1=5.0)
    res = optimize.minimize_scalar(
        lambda logC: localized_distance_bound(C=math.exp(logC), **kw).value,
        bounds=(-10, 20),
        method="bounded",
        options={"xatol": 1e-10},
    )
    b = localized_distance_bound(C=1.0, **kw)
    assert math.exp(res.x) == pytest.approx(b.minimizing_C, rel=1e-4)
    # the paper's C balances the two terms up to (60000/((k-1) c1^2))^(1/k)
    at_paper = localized_distance_bound(C=b.paper_C, **kw)
    factor = (60000 / ((k - 1) * 25.0)) ** (1 / k)
    assert at_paper.bias_term / at_paper.noise_term == pytest.approx(factor ** (k / 2), rel=1e-9)


# ------------------------------------------------------------------ 000 Theorems 3.1 / 4.1


def test_heavy_tailed_rate_by_hand():
    beta = math.exp(-2.0)  # log(1/beta) = 2
    r = heavy_tailed_rate(
        n=10_000,
        d=10,
        epsilon=1.0,
        k=2,
        moment_bound=1.0,
        second_moment_bound=1.0,
        diameter=1.0,
        failure_probability=beta,
    )
    assert r.upper_private == pytest.approx(math.sqrt(20 / 1e4), rel=1e-12)
    assert r.upper_statistical == pytest.approx(math.sqrt(2 / 1e4), rel=1e-12)
    assert r.lower_private == pytest.approx(math.sqrt(12 / 1e4), rel=1e-12)
    assert r.lower == pytest.approx(math.sqrt(12 / 1e4) + math.sqrt(2 / 1e4), rel=1e-12)
    assert r.lower_bound_applies and r.lower <= r.upper
    capped = heavy_tailed_rate(
        n=10,
        d=10,
        epsilon=1.0,
        k=2,
        moment_bound=1.0,
        second_moment_bound=1.0,
        diameter=1.0,
        failure_probability=beta,
        first_moment_bound=0.1,
    )
    assert capped.lower == pytest.approx(0.1)  # D * G_1


def test_heavy_tailed_rate_slope_in_n():
    kw = dict(
        d=5,
        epsilon=1.0,
        k=4,
        moment_bound=3.0,
        second_moment_bound=0.01,
        diameter=1.0,
        failure_probability=0.1,
    )
    a = heavy_tailed_rate(n=10**4, **kw)
    b = heavy_tailed_rate(n=10**6, **kw)
    assert math.log(b.upper_private / a.upper_private) / math.log(100) == pytest.approx(-0.75)


def test_heavy_tailed_rate_rejects_bad_input():
    kw = dict(
        n=100,
        d=2,
        epsilon=1.0,
        k=2,
        moment_bound=1.0,
        second_moment_bound=1.0,
        diameter=1.0,
        failure_probability=0.1,
    )
    for change in (
        dict(second_moment_bound=2.0),  # G_2 > G_k
        dict(failure_probability=0.25),  # beta must be < 1/5
        dict(failure_probability=0.0),
        dict(k=1.5),
        dict(first_moment_bound=1.5),  # G_1 > G_2
        dict(d=2.0),
    ):
        with pytest.raises(InvalidParameterError):
            heavy_tailed_rate(**{**kw, **change})


# ------------------------------------------------------------------ 000 Thm 4.1 fixtures


def test_bounded_pair_moments_and_means():
    plus, minus = bounded_pair(d=3, G2=2.0, r=0.3, diameter=4.0)
    for P in (plus, minus):
        assert P.moment(2) == pytest.approx(4.0)  # E||z||^2 = G_2^2 (L2452)
        assert P.moment(7) == pytest.approx(2.0**7)
    np.testing.assert_allclose(plus.mean, [0.6, 0, 0])
    np.testing.assert_allclose(minus.mean, [-0.6, 0, 0])
    assert plus.optimal_risk == pytest.approx(-2.0 * 0.6)


@pytest.mark.parametrize("d", [1, 2, 5, 9])
def test_cube_packing_is_a_half_packing_of_the_unit_ball(d):
    V = cube_packing(d)
    assert len(V) == 2**d
    np.testing.assert_allclose(np.linalg.norm(V, axis=1), 1.0)
    dist = min(np.linalg.norm(u - v) for u, v in itertools.combinations(V, 2)) if d > 1 else 2.0
    assert dist >= 0.5


def test_packing_instance_moments_minimizer_and_lemma_g1():
    rng = np.random.default_rng(1)
    d, Gk, k, D = 3, 2.0, 3.0, 2.0
    V = cube_packing(d)
    p = packing_probability(n=50, epsilon=1.0, zeta=0.1, size=len(V))
    assert p == pytest.approx(math.log(7 / (0.4 * math.e)) / 50)
    P = packing_instance(nu=V[3], Gk=Gk, k=k, p=p, diameter=D)
    assert P.moment(k) == pytest.approx(Gk**k, rel=1e-12)  # E||z||^k = p a^k = G_k^k
    np.testing.assert_allclose(P.mean, Gk * p ** (1 - 1 / k) * V[3])  # L2605
    # the closed-form minimizer beats random points of the ball (brute force)
    W = rng.normal(size=(20000, d))
    W *= (D / 2) * rng.random((20000, 1)) ** (1 / d) / np.linalg.norm(W, axis=1, keepdims=True)
    assert np.all(W @ P.mean >= P.optimal_risk - 1e-12)
    assert P.risk(P.minimizer) == pytest.approx(P.optimal_risk)
    # Lemma G.1 (L2482): ||mu_hat - mu||^2 <= (8 m / D) * excess, mu_hat = -m A / ||A||
    m = float(np.linalg.norm(P.mean))
    for w in W[:2000]:
        mu_hat = -m * w / np.linalg.norm(w)
        assert np.sum((mu_hat - P.mean) ** 2) <= 8 * m / D * P.excess_risk(w) + 1e-12
    Z = P.sample(40000, rng)
    np.testing.assert_allclose(Z.mean(axis=0), P.mean, atol=0.1)


def test_fixtures_reject_the_nonpositive_p_of_prop_g4():
    with pytest.raises(InvalidParameterError):
        packing_probability(n=10, epsilon=1.0, zeta=0.2, size=2)  # d = 1: |V|-1 = 1 < 4e*0.2
    with pytest.raises(InvalidParameterError):
        cube_packing(17)


# ------------------------------------------------------------------ 003 Theorem 3.1


def test_convex_framework_by_hand():
    # M=2, R=1, G=1, B=0.1, T=100, eta=0.1: 4/(2*0.1*100) + 0.1*2 + 0.2 = 0.6
    b = framework_convex_bound(
        diameter=2, gradient_bound=1, oracle_bias=0.1, oracle_error=1, iterations=100, step_size=0.1
    )
    assert b.value == pytest.approx(0.6, rel=1e-14)
    assert b.paper_step_size == pytest.approx(0.2)


def test_convex_framework_optimal_step_by_numeric_minimization():
    kw = dict(diameter=3.0, gradient_bound=2.0, oracle_bias=0.05, oracle_error=0.7, iterations=40)
    res = optimize.minimize_scalar(
        lambda le: framework_convex_bound(step_size=math.exp(le), **kw).value,
        bounds=(-12, 5),
        method="bounded",
        options={"xatol": 1e-10},
    )
    b = framework_convex_bound(**kw)
    assert math.exp(res.x) == pytest.approx(b.optimal_step_size, rel=1e-4)
    assert b.value == pytest.approx(b.optimal_value, rel=1e-12) == pytest.approx(res.fun)


def _project_ball(w, radius):
    norm = np.linalg.norm(w, axis=-1, keepdims=True)
    return w * np.minimum(1.0, radius / np.maximum(norm, 1e-300))


def test_convex_framework_bounds_a_simulated_scof_run():
    # L(w) = 1/2 ||w - mu||^2 on the ball of radius 1 (M = 2), ||grad L|| <= 1 + ||mu|| = R.
    # Oracle: grad L(w) + b + xi with ||b|| = B and E||xi||^2 = s^2, so E||g - grad||^2 = B^2+s^2.
    rng = np.random.default_rng(2)
    d, reps, T, eta = 2, 4000, 30, 0.08
    mu = np.array([0.3, -0.2])
    R, B, s = 1 + float(np.linalg.norm(mu)), 0.1, 0.8
    bvec = np.array([B, 0.0])
    w = np.tile(np.array([-0.7, 0.7]), (reps, 1))
    avg = np.zeros_like(w)
    for _ in range(T):
        g = (w - mu) + bvec + rng.normal(scale=s / math.sqrt(d), size=w.shape)
        w = _project_ball(w - eta * g, 1.0)
        avg += w / T
    excess = np.mean(0.5 * np.sum((avg - mu) ** 2, axis=1))
    bound = framework_convex_bound(
        diameter=2.0,
        gradient_bound=R,
        oracle_bias=B,
        oracle_error=math.hypot(B, s),
        iterations=T,
        step_size=eta,
    )
    assert excess <= bound.value
    with pytest.raises(InvalidParameterError):
        framework_convex_bound(
            diameter=2.0, gradient_bound=R, oracle_bias=-B, oracle_error=1, iterations=T
        )
    with pytest.raises(InvalidParameterError):
        framework_convex_bound(
            diameter=2.0, gradient_bound=R, oracle_bias=B, oracle_error=1, iterations=0
        )


# ------------------------------------------------------------------ 003 Theorem 3.2


def test_strongly_convex_framework_by_hand():
    # lam = L = 1: q = 3/4, (lam+L)G/(lam L) = 2G; M=1, G=0.1, T=2: 9/16 + 0.2
    b = framework_strongly_convex_bound(
        diameter=1,
        smoothness=1,
        strong_convexity=1,
        oracle_error=0.1,
        iterations=2,
        gradient_bound=3,
    )
    assert b.contraction == pytest.approx(0.75)
    assert b.distance_bound == pytest.approx(0.7625, rel=1e-14)
    assert b.excess_bound == pytest.approx(3 * 0.7625)
    assert b.step_size == pytest.approx(0.5)
    # paper T: q^T = 2G = 0.2
    assert 0.75**b.paper_iterations == pytest.approx(0.2, rel=1e-12)
    assert b.printed_excess_bound == pytest.approx(4 * 4 * 0.01 / 2)


def test_strongly_convex_framework_bounds_a_simulated_run():
    # L(w) = 1/2 (w - mu)^T H (w - mu), eigenvalues lam and L; oracle error G * (random unit).
    rng = np.random.default_rng(3)
    lam, L, G, T, reps = 0.5, 2.0, 0.05, 12, 2000
    H = np.diag([lam, L])
    mu = np.array([0.1, 0.2])
    w = np.tile(np.array([0.9, -0.4]), (reps, 1))  # ||w0 - mu|| <= M = 2 (ball of radius 1)
    for _ in range(T):
        u = rng.normal(size=w.shape)
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        w = _project_ball(w - (1 / (lam + L)) * ((w - mu) @ H + G * u), 1.0)
    dist = np.mean(np.linalg.norm(w - mu, axis=1))
    excess = np.mean(0.5 * np.einsum("ij,jk,ik->i", w - mu, H, w - mu))
    R = L * (1 + np.linalg.norm(mu))  # max ||H (w - mu)|| over the ball
    b = framework_strongly_convex_bound(
        diameter=2.0,
        smoothness=L,
        strong_convexity=lam,
        oracle_error=G,
        iterations=T,
        gradient_bound=R,
    )
    assert dist <= b.distance_bound
    assert excess <= b.excess_bound


def test_strongly_convex_framework_rejects_bad_input():
    kw = dict(diameter=1, smoothness=1, strong_convexity=0.5, oracle_error=0.1, iterations=3)
    for change in (
        dict(strong_convexity=2.0),
        dict(oracle_error=-1.0),
        dict(iterations=1.5),
        dict(gradient_bound=0.0),
    ):
        with pytest.raises(InvalidParameterError):
            framework_strongly_convex_bound(**{**kw, **change})
    # the paper's T is undefined when (lam + L) G / (lam L) >= 1
    assert framework_strongly_convex_bound(**{**kw, "oracle_error": 1.0}).paper_iterations is None


# ------------------------------------------------------------------ 003 Theorem B.8


def test_high_probability_parameters_by_hand():
    # n=1e6, d=1, rho=1, k=2, M=R=L=1, beta=0.01:
    # tau = (1e6)^(1/2) = 1000; T = 1e12/(1e6) = 1e6; eta = 1/1000;
    # m = ceil(log(1e8)) = 19; sigma^2 = 72 * 1e6 * 361 * 1e6 / 1e12 = 25992;
    # printed sigma^2 = 72 * log(1e8)^2
    p = high_probability_parameters(
        n=10**6,
        d=1,
        rho=1.0,
        k=2,
        diameter=1.0,
        gradient_bound=1.0,
        smoothness=1.0,
        failure_probability=0.01,
    )
    assert p.tau == pytest.approx(1000.0, rel=1e-12)
    assert p.T == pytest.approx(1e6, rel=1e-12) and p.iterations == 10**6
    assert p.eta == pytest.approx(1e-3, rel=1e-12)
    assert p.buckets == 19 and p.alpha == pytest.approx(1e-18)
    assert p.sigma == pytest.approx(math.sqrt(25992.0), rel=1e-12)
    assert p.printed_sigma == pytest.approx(math.sqrt(72.0) * math.log(1e8), rel=1e-12)
    assert p.sigma >= p.printed_sigma
    assert p.rate_statistical == pytest.approx(math.sqrt(math.log(1e8) / 1e6), rel=1e-12)
    assert p.rate_private == pytest.approx(math.log(1e8) * 1e-6 * 1000.0, rel=1e-12)
    assert p.hypotheses_hold


def test_high_probability_parameters_flag_and_reject():
    p = high_probability_parameters(
        n=1000,
        d=10,
        rho=0.5,
        k=4,
        diameter=1.0,
        gradient_bound=20,
        smoothness=1.0,
        failure_probability=0.1,
    )
    flags = dict(p.conditions)
    assert not flags["tau >= 10"] and not flags["R <= 10"] and not p.hypotheses_hold
    kw = dict(
        n=1000,
        d=2,
        rho=0.5,
        k=4,
        diameter=1.0,
        gradient_bound=1,
        smoothness=1.0,
        failure_probability=0.1,
    )
    for change in (
        dict(failure_probability=1.0),
        dict(failure_probability=0.0),
        dict(k=1.9),
        dict(rho=0.0),
        dict(n=True),
        dict(diameter=1e-9, n=1, d=1),
    ):
        with pytest.raises(InvalidParameterError):
            high_probability_parameters(**{**kw, **change})
