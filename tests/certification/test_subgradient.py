"""Paper 002's Algorithm 2 (deterministic projected subgradient, Prop 3.2, digest erratum 12:
best iterate) against independent answers: the iteration count against exact rational
arithmetic, closed-form minimizers (mean estimation on a ball: the projection of the mean;
a 1-d absolute loss on an interval: brute force over the breakpoints), the step-size schedule
replayed by hand, and dpcvx's own certified interior-point solves."""

from __future__ import annotations

import math
from fractions import Fraction

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.certification.subgradient import (
    affordable,
    declaration_oracle,
    projected_subgradient,
    regularized_subgradient_bound,
    solve_declaration,
    subgradient_accuracy,
    subgradient_iterations,
    subgradient_rounding_allowance,
)
from dpcvx.errors import CertificationError, InvalidParameterError, ModelingError

BAD_POSITIVE = [0.0, -1.0, math.nan, math.inf, -math.inf, "1", None, True]


# --------------------------------------------------------------------------- calculators
@pytest.mark.parametrize(
    ("G", "mu", "alpha"),
    [(1.0, 1.0, 0.5), (1.1, 0.1, 0.1), (3.0, 0.25, 1e-3), (0.1, 2.0, 1.0), (1.2, 0.1, 0.01)],
)
def test_iterations_are_the_formula(G, mu, alpha):
    T = subgradient_iterations(G, mu, alpha)
    exact = 2 * Fraction(G) ** 2 / (Fraction(mu) * Fraction(alpha))
    assert T == max(1, math.ceil(exact))
    assert T - 1 < exact <= T  # the smallest T with 2 G^2 / (mu T) <= alpha
    assert 2 * Fraction(G) ** 2 / (Fraction(mu) * (T + 1)) < Fraction(alpha)
    acc = subgradient_accuracy(G, mu, T)
    assert Fraction(acc) >= 2 * Fraction(G) ** 2 / (Fraction(mu) * (T + 1))  # rounded up
    assert acc < alpha


def test_iterations_known_values():
    assert subgradient_iterations(1.0, 1.0, 0.5) == 4  # exactly 4: no spurious rounding up
    assert subgradient_iterations(1.0, 1.0, 3.0) == 1  # at least one step
    assert subgradient_iterations(0.5, 0.25, 0.125) == 16  # dyadic inputs: exact
    # the floats 1.1 and 0.1 are not 11/10 and 1/10: 2 G^2 / (mu alpha) is just above 242
    assert subgradient_iterations(1.1, 0.1, 0.1) == 243
    assert subgradient_accuracy(1.0, 1.0, 3) == 0.5
    third = subgradient_accuracy(1.0, 1.0, 2)
    assert Fraction(third) > Fraction(2, 3) and third == math.nextafter(2 / 3, math.inf)


@pytest.mark.parametrize("bad", BAD_POSITIVE)
@pytest.mark.parametrize("which", ["G", "mu", "alpha"])
def test_bad_inputs_raise_typed_errors(bad, which):
    args = {"G": 1.0, "mu": 1.0, "alpha": 0.1}
    args[which] = bad
    with pytest.raises(InvalidParameterError, match=which):
        subgradient_iterations(**args)
    if which != "alpha":
        args = {"G": 1.0, "mu": 1.0, "T": 10}
        args[which] = bad
        with pytest.raises(InvalidParameterError, match=which):
            subgradient_accuracy(**args)


@pytest.mark.parametrize("bad", [0, -3, 1.5, True, "10", None, np.float64(2.0)])
def test_bad_iteration_counts_raise(bad):
    with pytest.raises(InvalidParameterError, match="`T`"):
        subgradient_accuracy(1.0, 1.0, bad)
    with pytest.raises(InvalidParameterError, match="`T`"):
        affordable(bad, 10, 2)
    assert isinstance(InvalidParameterError("x"), ValueError)


def test_affordable_is_exact_and_validated():
    assert affordable(10, 100, 5, budget=5000)
    assert not affordable(11, 100, 5, budget=5000)
    assert affordable(np.int64(2), 3, 4, budget=24.0)
    assert affordable(1, 1, 1)  # the default budget
    assert not affordable(10**6, 10**6, 10)
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(InvalidParameterError, match="budget"):
            affordable(1, 1, 1, budget=bad)
    with pytest.raises(InvalidParameterError, match="`n`"):
        affordable(1, 0, 1)


def test_rounding_allowance_is_small_and_public():
    G, mu = 1.2, 0.1
    T = subgradient_iterations(G, mu, 1e-3)
    for average in (False, True):
        extra = subgradient_rounding_allowance(G, mu, T, d=5, diameter=2.0, average=average)
        assert 0 < extra < 1e-5 * subgradient_accuracy(G, mu, T)  # T = 28800 here
    # it grows with the errors it is told about
    assert subgradient_rounding_allowance(G, mu, T, d=5, value_error=1e-6) >= 2e-6
    with pytest.raises(InvalidParameterError, match="gradient_error"):
        subgradient_rounding_allowance(G, mu, T, d=5, gradient_error=-1.0)


# --------------------------------------------------------------------------- closed forms
def _mean_estimation(points: np.ndarray, radius: float):
    """F(w) = (1/n) sum_i 0.5 ||w - x_i||^2 on B(0, radius): mu = 1, grad = w - mean."""
    mean = points.mean(axis=0)

    def value(w):
        return float(np.mean(0.5 * np.sum((w - points) ** 2, axis=1)))

    def oracle(w):
        return value(w), np.mean(w - points, axis=0)  # vectorized over examples

    def project(y):
        nrm = np.linalg.norm(y)
        return y if nrm <= radius else y * (radius / nrm) * (1 - 1e-15)

    nrm = np.linalg.norm(mean)
    w_star = mean if nrm <= radius else mean * radius / nrm  # projection of the mean
    G = radius + float(np.linalg.norm(mean))  # ||w - mean|| on the ball
    return oracle, project, value, w_star, G


@pytest.mark.parametrize("average", [False, True])
@pytest.mark.parametrize("alpha", [0.5, 0.1, 0.02, 0.005])
def test_mean_estimation_on_a_ball(alpha, average):
    rng = np.random.default_rng(7)
    points = rng.normal(loc=[2.0, -1.0, 0.5], scale=1.0, size=(300, 3))  # mean outside B(0, 1)
    oracle, project, value, w_star, G = _mean_estimation(points, 1.0)
    res = projected_subgradient(
        oracle, project, np.zeros(3), G=G, mu=1.0, alpha=alpha, average=average, diameter=2.0
    )
    excess = value(res.point) - value(w_star)
    assert res.iterations == subgradient_iterations(G, 1.0, alpha)
    assert res.oracle_calls == res.iterations + 1
    assert res.analytic_bound == subgradient_accuracy(G, 1.0, res.iterations)
    assert -1e-12 <= excess <= res.bound  # the guarantee (F* from the closed form)
    assert res.bound <= alpha  # not vacuous: within the target
    assert res.rounding_allowance < 1e-7 * alpha
    assert np.linalg.norm(res.point) <= 1.0
    assert res.bound_is_public is average
    assert res.value == pytest.approx(value(res.point), rel=1e-12, abs=1e-12)
    assert not res.point.flags.writeable


def _absolute_1d(x: np.ndarray, lam: float, c: float, lo: float, hi: float):
    """F(w) = mean |w - x_i| + (lam/2)(w - c)^2 on [lo, hi] and its minimum by brute force:
    on each piece between consecutive breakpoints F is a quadratic, minimized in closed form."""

    def value(w):
        return float(np.mean(np.abs(w - x)) + lam / 2 * (w - c) ** 2)

    knots = np.unique(np.clip(np.concatenate([x, [lo, hi]]), lo, hi))
    candidates = list(knots)
    for a, b in zip(knots[:-1], knots[1:]):
        slope = float(np.mean(np.sign((a + b) / 2 - x)))
        candidates.append(min(max(c - slope / lam, a), b))
    return value, min(value(w) for w in candidates)


@pytest.mark.parametrize("average", [False, True])
@pytest.mark.parametrize(("lam", "alpha"), [(1.0, 0.05), (0.2, 0.05), (0.5, 0.01)])
def test_absolute_loss_on_an_interval(lam, alpha, average):
    rng = np.random.default_rng(3)
    x = rng.standard_t(3, size=41)
    lo, hi, c = -0.4, 0.5, 1.2  # w* = hi for lam = 1 and 0.5; a breakpoint for lam = 0.2
    value, opt = _absolute_1d(x, lam, c, lo, hi)

    w = cp.Variable(1)
    z = cp.Parameter()
    problem = dpcvx.Problem(cp.abs(w[0] - z), w, data={z: x}, domain=dpcvx.domains.box(w, lo, hi))
    res = solve_declaration(
        problem.declaration,
        regularization=lam,
        lipschitz=1.0,
        alpha=alpha,
        center=[c],
        average=average,
        loss_bound=5.0 + float(np.max(np.abs(x))),
    )
    excess = value(float(res.point[0])) - opt
    G = regularized_subgradient_bound(problem.declaration, 1.0, lam, [c])
    # L + lam max_W |w - c| (c lies outside W here, so L + lam D would be too small)
    assert 1.0 + lam * (c - lo) <= G <= (1.0 + lam * (c - lo)) * (1 + 1e-12)
    assert res.iterations == subgradient_iterations(G, lam, alpha)
    assert -1e-12 <= excess <= res.bound <= alpha
    assert res.bound_is_public  # loss_bound given (best iterate) or average
    assert lo <= res.point[0] <= hi


def test_the_step_schedule_and_the_best_iterate():
    """Replays the cleaned-up update ``w_t = Pi(w_{t-1} - 2/(mu t) g_{t-1})`` by hand and checks
    that the best (not the last) iterate among ``w_1..w_T`` is returned (digest erratum 12)."""
    x = np.array([-1.0, 0.1, 0.2, 3.0])
    lam, lo, hi = 0.3, -2.0, 2.0
    seen: list[tuple[float, float, float]] = []

    def oracle(w):
        val = float(np.mean(np.abs(w[0] - x)) + lam / 2 * w[0] ** 2)
        g = float(np.mean(np.sign(w[0] - x)) + lam * w[0])
        seen.append((float(w[0]), val, g))
        return val, np.array([g])

    def project(y):
        return np.clip(y, lo, hi)

    T = 25
    res = projected_subgradient(oracle, project, [1.7], G=1.0 + lam * 2.0, mu=lam, T=T)
    assert len(seen) == T + 1 == res.oracle_calls
    for t in range(1, T + 1):
        w_prev, _, g_prev = seen[t - 1]
        assert seen[t][0] == pytest.approx(np.clip(w_prev - 2.0 / (lam * t) * g_prev, lo, hi))
    values = [v for _, v, _ in seen[1:]]  # w_1..w_T; w_0 is never a candidate
    best = int(np.argmin(values)) + 1
    assert res.value == min(values) and res.point[0] == seen[best][0]
    assert res.stats["best_index"] == best
    assert values[-1] > min(values)  # on this instance the last iterate is not the best


def test_weighted_average_is_the_printed_weights():
    projected = []

    def project(y):
        out = np.clip(y, -1.0, 1.0)
        projected.append(out)
        return out

    T = 7
    res = projected_subgradient(
        lambda w: (float(0.5 * w @ w), w.copy()),
        project,
        [1.0, -0.5],
        G=np.sqrt(2.0),
        mu=1.0,
        T=T,
        average=True,
    )
    iterates = projected[:T]  # w_1..w_T (the last projection is the average's)
    expected = sum(2 * t / (T * (T + 1)) * iterates[t - 1] for t in range(1, T + 1))
    assert np.allclose(res.point, expected, atol=1e-15)
    assert res.value == pytest.approx(0.5 * float(expected @ expected))


# --------------------------------------------------------------------------- certified solves
def _hinge_problem(domain_kind: str, n: int = 150, d: int = 3, loss: str = "hinge"):
    """A 1-Lipschitz ERM (``||x|| <= 1``): hinge classification or absolute regression (whose
    kinks at the optimum make the subgradient method oscillate)."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    truth = np.array([1.0, -2.0, 0.5][:d])
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    domains = {
        "l2_ball": dpcvx.domains.l2_ball(w, 1.0),
        "box": dpcvx.domains.box(w, -0.3, 0.8),
        "l1_ball": dpcvx.domains.l1_ball(w, 1.0),
        "simplex": dpcvx.domains.simplex(w),
    }
    if loss == "hinge":
        Y = np.sign(X @ truth + 0.3 * rng.normal(size=n))
        expr = cp.pos(1 - y * (x @ w))
    else:
        Y = X @ (0.4 * truth) + 0.1 * rng.standard_t(3, size=n)
        expr = cp.abs(x @ w - y)
    problem = dpcvx.Problem(expr, w, data={x: X, y: Y}, domain=domains[domain_kind])
    return problem, X, Y


def _numpy_objective(loss: str, X, Y, w, lam, w0) -> float:
    """F_lam(w) in plain numpy, independent of dpcvx's expression evaluator."""
    if loss == "hinge":
        losses = np.maximum(0.0, 1.0 - Y * (X @ w))
    else:
        losses = np.abs(X @ w - Y)
    return float(np.mean(losses) + lam / 2 * np.sum((w - w0) ** 2))


@pytest.mark.parametrize(
    ("loss", "domain_kind"),
    [
        ("hinge", "l2_ball"),
        ("hinge", "box"),
        ("hinge", "l1_ball"),
        ("hinge", "simplex"),
        ("absolute", "l2_ball"),
        ("absolute", "simplex"),
    ],
)
def test_within_alpha_of_the_certified_lower_bound(loss, domain_kind):
    problem, X, Y = _hinge_problem(domain_kind, loss=loss)
    lam, alpha = 0.2, 0.02
    cert = problem.solve(regularization=lam)  # dpcvx's interior-point certificate
    w0 = np.asarray(problem.declaration.domain.center, float)
    for average in (False, True):
        res = solve_declaration(
            problem.declaration, regularization=lam, lipschitz=1.0, alpha=alpha, average=average
        )
        value = _numpy_objective(loss, X, Y, res.point, lam, w0)
        assert value == pytest.approx(res.value, rel=1e-12, abs=1e-12)
        assert problem.declaration.domain.contains(res.point)
        assert value - cert.lower <= res.bound <= alpha
        assert value >= cert.lower - 1e-9


def test_declaration_oracle_matches_the_objective():
    problem, X, Y = _hinge_problem("l2_ball", n=40)
    lam, c = 0.3, np.array([0.1, 0.0, -0.2])
    oracle, project = declaration_oracle(problem.declaration, lam, c)
    w = np.array([0.3, -0.4, 0.2])
    value, g = oracle(w)
    margins = 1.0 - Y * (X @ w)
    assert value == pytest.approx(np.mean(np.maximum(margins, 0)) + lam / 2 * np.sum((w - c) ** 2))
    expected = np.mean(-(Y * (margins > 0))[:, None] * X, axis=0) + lam * (w - c)
    assert np.allclose(g, expected, atol=1e-14)
    far = project(np.array([3.0, 4.0, 0.0]))
    assert np.allclose(far, [0.6, 0.8, 0.0], atol=1e-12)
    assert problem.declaration.domain.contains(far)


# --------------------------------------------------------------------------- refusals
def test_alpha_xor_T():
    oracle, project, _, _, G = _mean_estimation(np.ones((3, 2)), 1.0)
    with pytest.raises(InvalidParameterError, match="exactly one"):
        projected_subgradient(oracle, project, np.zeros(2), G=G, mu=1.0)
    with pytest.raises(InvalidParameterError, match="exactly one"):
        projected_subgradient(oracle, project, np.zeros(2), G=G, mu=1.0, alpha=0.1, T=10)
    with pytest.raises(InvalidParameterError, match="w0"):
        projected_subgradient(oracle, project, [np.nan, 0.0], G=G, mu=1.0, T=3)
    with pytest.raises(InvalidParameterError, match="`mu`"):
        projected_subgradient(oracle, project, np.zeros(2), G=G, mu=0.0, T=3)


def test_a_subgradient_above_G_or_a_broken_oracle_raises():
    oracle, project, _, _, G = _mean_estimation(np.full((3, 2), 5.0), 1.0)
    with pytest.raises(CertificationError, match="G ="):
        projected_subgradient(oracle, project, np.zeros(2), G=1.0, mu=1.0, T=5)
    with pytest.raises(CertificationError, match="finite"):
        projected_subgradient(
            lambda w: (0.0, np.array([np.nan, 0.0])), project, np.zeros(2), G=G, mu=1.0, T=2
        )
    with pytest.raises(CertificationError, match="pair"):
        projected_subgradient(lambda w: w, project, np.zeros(2), G=G, mu=1.0, T=2)


def test_declarations_need_an_exact_projection_and_positive_lam():
    rng = np.random.default_rng(0)
    w, x = cp.Variable(2), cp.Parameter(2)
    problem = dpcvx.Problem(
        cp.norm(w - x, 2),
        w,
        data={x: rng.normal(size=(5, 2))},
        domain=dpcvx.domains.ellipsoid(w, np.diag([1.0, 2.0])),
    )
    with pytest.raises(ModelingError, match="exact Euclidean projection"):
        solve_declaration(problem.declaration, regularization=0.1, lipschitz=1.0, alpha=0.1)
    ball = dpcvx.Problem(
        cp.norm(w - x, 2),
        w,
        data={x: rng.normal(size=(5, 2))},
        domain=dpcvx.domains.l2_ball(w, 1.0),
    )
    with pytest.raises(InvalidParameterError, match="regularization"):
        solve_declaration(ball.declaration, regularization=0.0, lipschitz=1.0, alpha=0.1)
    with pytest.raises(InvalidParameterError, match="lipschitz"):
        solve_declaration(ball.declaration, regularization=0.1, lipschitz=-1.0, alpha=0.1)
