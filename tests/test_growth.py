"""Paper 001's growth fixtures and rate calculators (dpcvx.growth): closed-form minimizers
against high-accuracy numeric minimization, the growth inequality on random points, the
calculators against hand-computed values, and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar

from dpcvx.errors import InvalidParameterError
from dpcvx.growth import (
    growth_nesting,
    growth_rate,
    localization_rate,
    power_tradeoff_minimum,
    sharp_instance,
    uniformly_convex_instance,
)


def _signed_basis_samples(rng, m: int, d: int, bias: float = 0.6) -> np.ndarray:
    """m rows in {+-e_j}, with a public bias toward +e_j so the mean is not ~0."""
    j = rng.integers(0, d, size=m)
    sign = np.where(rng.random(m) < (1 + bias) / 2, 1.0, -1.0)
    S = np.zeros((m, d))
    S[np.arange(m), j] = sign
    return S


def _uc(kappa: float, d: int, seed: int):
    """Family (i) with lambda = 1, L = 1 and the largest radius the assumption allows."""
    rng = np.random.default_rng(seed)
    R = 0.5  # 2^(kappa-1) <= R^(1-kappa)  <=>  R <= 1/2; then ||u|| <= 1/2 = sigma R^(kappa-1)
    return uniformly_convex_instance(
        kappa=kappa,
        growth=1.0,
        lipschitz=1.0,
        radius=R,
        samples=_signed_basis_samples(rng, 40, d),
    )


# ---------------------------------------------------------------- family (i)
@pytest.mark.parametrize("kappa", [2.0, 3.0, 4.0, 2.5])
@pytest.mark.parametrize("d", [1, 5, 20])
def test_family_i_closed_form_matches_a_numeric_minimization(kappa, d):
    inst = _uc(kappa, d, seed=int(10 * kappa) + d)
    sigma, u = inst.sigma, inst.u

    def f(x):
        return sigma * np.linalg.norm(x) ** kappa / kappa + x @ u

    def grad(x):
        r = np.linalg.norm(x)
        return sigma * r ** (kappa - 2.0) * x + u if r > 0 else u

    res = minimize(f, np.zeros(d) + 1e-3, jac=grad, method="BFGS", options={"gtol": 1e-13})
    assert np.linalg.norm(res.x - inst.minimizer) <= 1e-7
    assert inst.optimal_value == pytest.approx(res.fun, abs=1e-12)
    assert inst.value(inst.minimizer) == pytest.approx(inst.optimal_value, abs=1e-14)
    assert np.linalg.norm(inst.minimizer) <= inst.radius * (1 + 1e-12)  # feasible (L575)
    # the mean of the per-sample losses is the instance's f
    x = np.full(d, 0.1)
    S = _signed_basis_samples(np.random.default_rng(int(10 * kappa) + d), 40, d)
    assert np.mean([inst.loss(x, s) for s in S]) == pytest.approx(inst.value(x), abs=1e-14)


def test_family_i_hand_computed_and_e13():
    """kappa = 3, lambda = 1 (sigma = 2), L = 1, one sample s = (0.6, 0.8): u = (0.3, 0.4),
    ||u|| = 0.5; x* = -(1/2)^(1/2) 0.5^(-1/2) u = -u and f* = -(2/3)(1/2)^(1/2) 0.5^(3/2)
    = -1/6. E13: at kappa = 4 the printed ||u||_3 gives a wrong f*, the l2 norm the right one."""
    inst = uniformly_convex_instance(
        kappa=3.0, growth=1.0, lipschitz=1.0, radius=0.5, samples=[[0.6, 0.8]]
    )
    np.testing.assert_allclose(inst.minimizer, [-0.3, -0.4], atol=1e-15)
    assert inst.optimal_value == pytest.approx(-1 / 6, abs=1e-15)

    v = np.array([1.0, -1.0, 1.0])
    inst4 = uniformly_convex_instance(
        kappa=4.0, growth=0.5, lipschitz=4.0, radius=1.0, direction=v, bias=0.9
    )
    sigma, u = inst4.sigma, inst4.u
    numeric = minimize(
        lambda x: sigma * np.linalg.norm(x) ** 4 / 4 + x @ u,
        np.zeros(3),
        method="BFGS",
        options={"gtol": 1e-13},
    ).fun
    printed = -(3 / 4) * sigma ** (-1 / 3) * np.linalg.norm(u, 3) ** (4 / 3)  # ||u||_(kappa-1)
    assert inst4.optimal_value == pytest.approx(numeric, abs=1e-12)
    assert abs(printed - numeric) > 1e-3
    np.testing.assert_allclose(inst4.u, (4.0 * 0.9 / 6) * v)  # u = (L delta/(2d)) v (L569)


@pytest.mark.parametrize("kappa", [2.0, 3.0, 4.0])
@pytest.mark.parametrize("d", [1, 5])
def test_family_i_growth_holds_on_random_points_of_the_ball(kappa, d):
    inst = _uc(kappa, d, seed=7 + d)
    rng = np.random.default_rng(100 + d)
    dirs = rng.normal(size=(4000, d))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    pts = dirs * inst.radius * rng.random((4000, 1)) ** (1.0 / d)
    pts = np.vstack([pts, dirs[:200] * inst.radius])  # and the sphere
    gap = inst.value(pts) - inst.optimal_value
    bound = (inst.growth / kappa) * np.linalg.norm(pts - inst.minimizer, axis=1) ** kappa
    assert np.all(gap >= bound - 1e-13)
    # F(., s) is L-Lipschitz on B(R) (L563)
    s = np.eye(d)[0]
    x, y = pts[:2000], pts[2000:4000]
    lhs = np.abs(inst.loss(x, s) - inst.loss(y, s))
    assert np.all(lhs <= inst.lipschitz * np.linalg.norm(x - y, axis=1) + 1e-13)


def test_family_i_zero_mean_has_the_origin_as_minimizer():
    inst = uniformly_convex_instance(
        kappa=3.0, growth=1.0, lipschitz=1.0, radius=0.5, samples=[[1.0, 0.0], [-1.0, 0.0]]
    )
    assert inst.minimizer.tolist() == [0.0, 0.0] and inst.optimal_value == 0.0


# ---------------------------------------------------------------- family (ii)
@pytest.mark.parametrize("kappa", [1.25, 1.5, 2.0])
@pytest.mark.parametrize("delta", [0.05, 0.2, 0.5])
@pytest.mark.parametrize("sign", [1, -1])
def test_family_ii_closed_form_growth_and_lipschitz(kappa, delta, sign):
    inst = sharp_instance(kappa=kappa, delta=delta, sign=sign)
    a = 0.5 * delta ** (1 / (kappa - 1))
    assert inst.minimizer == pytest.approx(sign * a, abs=0) and inst.optimal_value == pytest.approx(
        a * (1 - delta), rel=1e-15
    )
    # numeric minimization: bounded Brent at high accuracy, and a dense grid
    res = minimize_scalar(
        inst.value, bounds=(-1.0, 1.0), method="bounded", options={"xatol": 1e-12}
    )
    assert abs(res.x - inst.minimizer) <= 1e-7
    grid = np.linspace(-1.0, 1.0, 400_001)
    vals = inst.value(grid)
    assert vals.min() >= inst.optimal_value - 1e-15
    assert inst.value(inst.minimizer) == pytest.approx(inst.optimal_value, abs=1e-15)
    # (1, kappa)-growth on random points and on the grid (Thm 5 proof, L701-729)
    rng = np.random.default_rng(int(100 * kappa + 10 * delta))
    x = np.concatenate([rng.uniform(-1.0, 1.0, 20_000), grid])
    gap = inst.value(x) - inst.optimal_value
    assert np.all(gap >= np.abs(x - inst.minimizer) ** kappa / kappa - 1e-13)
    # kappa-Lipschitz per sample
    y = rng.uniform(-1.0, 1.0, 20_000)
    x = x[:20_000]
    for s in (1, -1):
        lhs = np.abs(inst.loss(x, s) - inst.loss(y, s))
        assert np.all(lhs <= kappa * np.abs(x - y) + 1e-12)


# ---------------------------------------------------------------- calculators
def test_localization_rate_hand_computed():
    """Prop 1: n = 1000, d = 5, eps = 1, beta = 1e-4, L = 1, D = 2. ln(1/beta) = 9.210340,
    ln n = 6.907755: eta = 2 min(1/sqrt(1000 * 9.210340), 1/(5 * 9.210340)) = 2 * 0.0104199
    = 0.0208398; statistical = sqrt(9.210340) 6.907755^1.5 / sqrt(1000) = 1.742390; privacy
    = 5 * 9.210340 * 6.907755 / 1000 = 0.318114; rate = 2 (1.742390 + 0.318114)."""
    r = localization_rate(
        n=1000, d=5, epsilon=1.0, failure_probability=1e-4, lipschitz=1.0, diameter=2.0
    )
    assert r.step_size == pytest.approx(0.0208398, rel=1e-5)
    assert r.statistical_term == pytest.approx(1.742390, rel=1e-5)
    assert r.privacy_term == pytest.approx(0.318114, rel=1e-5)
    assert r.rate == pytest.approx(2 * (1.742390 + 0.318114), rel=1e-5)
    assert "Prop 1" in r.reference and any("1/(n + d)" in a for a in r.assumptions)
    # Prop 2: d log(1/beta) -> sqrt(d log(1/delta)) log(1/beta); delta = 1e-6:
    # sqrt(5 * 13.815511) = 8.311259 -> privacy = 8.311259 * 9.210340 * 6.907755 / 1000
    r2 = localization_rate(
        n=1000,
        d=5,
        epsilon=1.0,
        delta=1e-6,
        failure_probability=1e-4,
        lipschitz=1.0,
        diameter=2.0,
    )
    assert r2.privacy_term == pytest.approx(8.311259 * 9.210340 * 6.907755 / 1000, rel=1e-5)
    assert "Prop 2" in r2.reference
    # default beta = 1/(n + d)
    assert localization_rate(
        n=1000, d=5, epsilon=1.0, lipschitz=1.0, diameter=2.0
    ).failure_probability == pytest.approx(1 / 1005)


def test_growth_rate_hand_computed():
    """Thm 2: n = 1e4, d = 2, eps = 1, beta = 1e-5, L = 1, lambda = 1, kappa = 2,
    kappa_lower = 1.5: T = ceil(2 ln(1e4)/0.5) = ceil(36.84) = 37, n_0 = 270 (spec B.2 T1);
    statistical = sqrt(11.512925)/100 = 0.0339307; privacy = 2 * 11.512925/(1e4 * 0.5) =
    0.00460517; rate = (0.0339307 + 0.00460517)^2 = 0.00148500. With D = 2: eta_0 =
    (1/1) min(1/sqrt(270 ln 270 * 11.512925), 1/(2 * 11.512925)) = 1/sqrt(17397.0)."""
    r = growth_rate(
        n=10_000,
        d=2,
        epsilon=1.0,
        failure_probability=1e-5,
        lipschitz=1.0,
        growth=1.0,
        kappa=2.0,
        kappa_lower=1.5,
        diameter=2.0,
    )
    assert (r.epochs, r.chunk_size) == (37, 270)
    assert r.statistical_term == pytest.approx(0.0339307, rel=1e-5)
    assert r.privacy_term == pytest.approx(0.00460517, rel=1e-5)
    assert r.exponent == 2.0 and r.rate == pytest.approx(0.00148500, rel=1e-4)
    assert r.step_size == pytest.approx(1 / math.sqrt(270 * math.log(270) * 11.512925), rel=1e-6)
    # kappa = 3, lambda = 4: lambda^(-1/2) (base)^(3/2)
    r3 = growth_rate(
        n=10_000,
        d=2,
        epsilon=1.0,
        failure_probability=1e-5,
        lipschitz=1.0,
        growth=4.0,
        kappa=3.0,
        kappa_lower=1.5,
    )
    assert r3.rate == pytest.approx(0.5 * (0.0339307 + 0.00460517) ** 1.5, rel=1e-4)
    assert r3.step_size is None
    # Thm 3 (E10: kappa_lower - 1 in the denominator): sqrt(d ln(1/delta) ln(1/beta))
    r4 = growth_rate(
        n=10_000,
        d=2,
        epsilon=1.0,
        delta=1e-6,
        failure_probability=1e-5,
        lipschitz=1.0,
        growth=1.0,
        kappa=3.0,
        kappa_lower=1.5,
    )
    assert r4.privacy_term == pytest.approx(
        math.sqrt(2 * 13.815511 * 11.512925) / (1e4 * 0.5), rel=1e-6
    )
    assert "E10" in r4.reference


def test_nesting_and_the_corrected_tradeoff_closed_form():
    assert growth_nesting(growth=1.0, kappa=2.0, kappa_new=3.0, diameter=2.0) == 0.75
    # family (i) at kappa = 2 has (lambda', 3)-growth on B(R) (diameter 2R)
    inst = _uc(2.0, 3, seed=5)
    lam3 = growth_nesting(growth=1.0, kappa=2.0, kappa_new=3.0, diameter=2 * inst.radius)
    rng = np.random.default_rng(9)
    pts = rng.normal(size=(3000, 3))
    pts *= inst.radius * rng.random((3000, 1)) / np.linalg.norm(pts, axis=1, keepdims=True)
    gap = inst.value(pts) - inst.optimal_value
    assert np.all(gap >= (lam3 / 3) * np.linalg.norm(pts - inst.minimizer, axis=1) ** 3 - 1e-13)

    value, nu = power_tradeoff_minimum(a=1.0, b=1.0, kappa=3.0)
    assert value == pytest.approx(3 * 2 ** (-2 / 3), rel=1e-12)  # 1.8899 (E15), printed 3.15
    assert value == pytest.approx(1.889882, rel=1e-6)
    for a, b, k in [(1.0, 1.0, 3.0), (0.3, 2.0, 1.5), (5.0, 0.1, 4.0), (2.0, 3.0, 2.0)]:
        value, nu = power_tradeoff_minimum(a=a, b=b, kappa=k)
        res = minimize_scalar(
            lambda t, a=a, b=b, k=k: a * t + b * t ** (-1 / (k - 1)),
            bounds=(1e-9, 1e6),
            method="bounded",
            options={"xatol": 1e-12},
        )
        assert value == pytest.approx(res.fun, rel=1e-9) and nu == pytest.approx(res.x, rel=1e-4)
    assert power_tradeoff_minimum(a=2.0, b=3.0, kappa=2.0)[0] == pytest.approx(2 * math.sqrt(6))


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"kappa": 1.5}, "at least 2"),
        ({"kappa": math.nan}, "kappa"),
        ({"growth": 0.0}, "growth"),
        ({"lipschitz": -1.0}, "lipschitz"),
        ({"radius": math.inf}, "radius"),
        ({"radius": 1.0}, "2\\^\\(kappa-1\\)"),  # the Lipschitz assumption of Thms 4, 8, 9
        ({"samples": None}, "exactly one"),
        ({"direction": [1.0, -1.0], "bias": 0.5}, "exactly one"),
        ({"samples": [[2.0, 0.0]]}, "norm at most 1"),
        ({"samples": np.zeros((0, 2))}, "m >= 1"),
        ({"samples": None, "direction": [1.0, 0.5], "bias": 0.5}, "\\{\\+-1\\}"),
        ({"samples": None, "direction": [1.0, -1.0], "bias": 1.5}, "bias"),
    ],
)
def test_family_i_bad_input(kwargs, match):
    base = {"kappa": 3.0, "growth": 1.0, "lipschitz": 1.0, "radius": 0.5, "samples": [[0.6, 0.8]]}
    base.update(kwargs)
    with pytest.raises(InvalidParameterError, match=match):
        uniformly_convex_instance(**base)


def test_family_i_minimizer_outside_the_ball_raises():
    # kappa = 2, lambda = 1: sigma = 1, u = (L/2) s, x* = -u; R = 0.25 with L = 1 satisfies
    # 2 <= R^-1 but ||u|| = 0.5 > sigma R = 0.25
    with pytest.raises(InvalidParameterError, match="outside B\\(R\\)"):
        uniformly_convex_instance(
            kappa=2.0, growth=1.0, lipschitz=1.0, radius=0.25, samples=[[1.0, 0.0]]
        )


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"kappa": 1.0}, "\\(1, 2\\]"),
        ({"kappa": 2.5}, "\\(1, 2\\]"),
        ({"delta": 0.0}, "delta"),
        ({"delta": 0.6}, "delta"),
        ({"sign": 0}, "sign"),
        ({"sign": True}, "sign"),
    ],
)
def test_family_ii_bad_input(kwargs, match):
    base = {"kappa": 1.5, "delta": 0.2, "sign": 1}
    base.update(kwargs)
    with pytest.raises(InvalidParameterError, match=match):
        sharp_instance(**base)
    with pytest.raises(InvalidParameterError, match="\\+1 or -1"):
        sharp_instance(kappa=1.5, delta=0.2).loss(0.0, 0)


@pytest.mark.parametrize(
    "func,kwargs,match",
    [
        (localization_rate, {"n": 0}, "`n`"),
        (localization_rate, {"d": 1.5}, "`d`"),
        (localization_rate, {"epsilon": 0.0}, "epsilon"),
        (localization_rate, {"delta": 1.0}, "delta"),
        (localization_rate, {"failure_probability": 0.01}, "1/\\(n \\+ d\\)"),
        (localization_rate, {"diameter": -1.0}, "diameter"),
        (growth_rate, {"kappa": 1.2}, "kappa >= kappa_lower > 1"),
        (growth_rate, {"kappa_lower": 1.0, "kappa": 2.0}, "kappa >= kappa_lower > 1"),
        (growth_rate, {"growth": 0.0}, "growth"),
        (growth_rate, {"n": 20, "kappa_lower": 1.05}, "n_0 >= 2"),
        (growth_rate, {"failure_probability": 0.5}, "1/\\(n \\+ d\\)"),
    ],
)
def test_calculators_bad_input(func, kwargs, match):
    base = {"n": 1000, "d": 2, "epsilon": 1.0, "lipschitz": 1.0}
    if func is localization_rate:
        base["diameter"] = 2.0
    else:
        base.update(growth=1.0, kappa=2.0, kappa_lower=1.5)
    base.update(kwargs)
    with pytest.raises(InvalidParameterError, match=match):
        func(**base)


def test_nesting_and_tradeoff_bad_input():
    with pytest.raises(InvalidParameterError, match="kappa_new"):
        growth_nesting(growth=1.0, kappa=3.0, kappa_new=2.0, diameter=1.0)
    with pytest.raises(InvalidParameterError, match="kappa"):
        power_tradeoff_minimum(a=1.0, b=1.0, kappa=1.0)
    with pytest.raises(InvalidParameterError, match="`a`"):
        power_tradeoff_minimum(a=0.0, b=1.0, kappa=2.0)
