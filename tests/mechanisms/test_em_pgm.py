"""EM-PGM over a net (paper 000, Appendix E, with erratum E6): exact privacy checks over the
whole net (no sampling), the E6 counterexample, the net, the value-only smoothed gradients,
utility against a certified non-private solve, the ledger and bad input.

The exact checks compute both output distributions over the net with the mechanism's own
``distribution`` helper and compare them point by point (digest, section 6.10 item 15).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import cvxpy as cp
import numpy as np
import pytest
from scipy.stats import chi2

import dpcvx
from dpcvx.errors import InvalidParameterError
from dpcvx.mechanisms.em_pgm import (
    ProjectedGradientExponentialMechanism,
    exponential_log_probabilities,
    net_points,
    sample_index,
    smoothing_directions,
)
from dpcvx.modeling.domains import Domain

EM = ProjectedGradientExponentialMechanism


# ---------------------------------------------------------------- helpers
def _quadratic_1d(z) -> dpcvx.Problem:
    """f(w, z) = (w - z)^2 / 2 on W = [-1, 1] (H = 1)."""
    w = cp.Variable(1)
    zp = cp.Parameter()
    return dpcvx.Problem(
        0.5 * cp.square(w[0] - zp), w, {zp: np.asarray(z, float)}, dpcvx.domains.l2_ball(w, 1.0)
    )


def _absolute_1d(x, y) -> dpcvx.Problem:
    """f(w; x, y) = |x w - y| on W = [-1, 1]."""
    w = cp.Variable(1)
    xp, yp = cp.Parameter(), cp.Parameter()
    return dpcvx.Problem(
        cp.abs(xp * w[0] - yp),
        w,
        {xp: np.asarray(x, float), yp: np.asarray(y, float)},
        dpcvx.domains.l2_ball(w, 1.0),
    )


def _hinge_2d(X, Y) -> dpcvx.Problem:
    w = cp.Variable(2)
    x, y = cp.Parameter(2), cp.Parameter()
    return dpcvx.Problem(
        cp.pos(1 - y * (x @ w)),
        w,
        {x: np.asarray(X, float), y: np.asarray(Y, float)},
        dpcvx.domains.l2_ball(w, 1.0),
    )


def _plan(mech, problem, epsilon):
    return mech.plan(
        n=problem.n,
        d=problem.d,
        center=problem.domain.center,
        diameter=problem.diameter,
        epsilon=epsilon,
        delta=0.0,
        domain=problem.domain,
    )


def _distribution(mech, problem, epsilon):
    context = problem.release_context(extension=None, solver=None)
    return mech.distribution(_plan(mech, problem, epsilon), context)


def _max_log_ratio(a, b) -> float:
    assert np.array_equal(a.points, b.points)  # the net is public: identical on neighbors
    return float(np.max(np.abs(a.log_probabilities - b.log_probabilities)))


# ---------------------------------------------------------------- exact privacy (6.10 item 15)
Z_SMOOTH = np.array([0.3, -0.2, 0.1, 0.5, -0.4, 0.0, 0.2, -0.1, 0.4, 5.0])


def test_exact_privacy_smooth_case_matches_the_digest():
    """d = 1, W = [-1, 1], a 201-point grid, f = (w - z)^2/2 (H = 1), C = 1, lam = 0.5,
    gamma = 1/1.5, epsilon = 1; Z' replaces 5.0 by -50. Digest: max log-ratio 0.5045."""
    Z2 = Z_SMOOTH.copy()
    Z2[-1] = -50.0
    mech = EM(C=1.0, regularization=0.5, center=[0.0], smoothness=1.0, spacing=0.01)
    p, q = (
        _distribution(mech, _quadratic_1d(Z_SMOOTH), 1.0),
        _distribution(mech, _quadratic_1d(Z2), 1.0),
    )
    assert p.points.shape == (201, 1)
    assert p.points[0, 0] == pytest.approx(-1.0, abs=1e-12)
    assert p.points[-1, 0] == pytest.approx(1.0, abs=1e-12)
    ratio = _max_log_ratio(p, q)
    assert ratio <= 1.0 + 1e-12
    assert ratio == pytest.approx(0.5045, abs=1e-4)
    # weak negative control: the same scores with Delta halved to C/n are not 1-DP
    half = [exponential_log_probabilities(r.scores, 1.0, 1.0 / 10) for r in (p, q)]
    assert float(np.max(np.abs(half[0] - half[1]))) == pytest.approx(1.0006, abs=1e-4)
    assert float(np.max(np.abs(half[0] - half[1]))) > 1.0


def test_exact_privacy_scores_move_by_at_most_the_sensitivity():
    Z2 = Z_SMOOTH.copy()
    Z2[-1] = -50.0
    mech = EM(C=1.0, regularization=0.5, center=[0.0], smoothness=1.0, spacing=0.01)
    plan = _plan(mech, _quadratic_1d(Z_SMOOTH), 1.0)
    p, q = (
        _distribution(mech, _quadratic_1d(Z_SMOOTH), 1.0),
        _distribution(mech, _quadratic_1d(Z2), 1.0),
    )
    assert np.max(np.abs(p.scores - q.scores)) <= 2 * 1.0 / 10 + 1e-12
    assert plan.sensitivity.value >= 0.2
    assert plan.sensitivity.value / 0.2 - 1.0 < 1e-9  # the rounding allowance is tiny


def test_e6_data_dependent_step_size_breaks_privacy_public_one_does_not():
    """Digest E6 / 6.10 item 15: n = 40 records (1, 3); Z' replaces one by (1000, 3000). All
    clipped smoothed gradients are -1 on both datasets; only gamma can differ."""
    n, tau = 40, 2.0 / math.sqrt(40)
    X, Y = np.ones(n), np.full(n, 3.0)
    X2, Y2 = X.copy(), Y.copy()
    X2[-1], Y2[-1] = 1000.0, 3000.0

    def dist(x, y, H):
        mech = EM(
            C=1.0, regularization=0.05, center=[0.0], smoothness=H, smoothing=tau, spacing=0.01
        )
        return _distribution(mech, _absolute_1d(x, y), 1.0)

    # Proposition E.4 as printed: gamma = 1/(lam + H_Z^tau), H_Z^tau = max_i |x_i| / tau
    leaky = _max_log_ratio(
        dist(X, Y, np.max(np.abs(X)) / tau), dist(X2, Y2, np.max(np.abs(X2)) / tau)
    )
    assert leaky == pytest.approx(7.90, abs=0.01)
    assert leaky > 1.0
    # erratum E6: one public Hbar for both datasets
    public = _max_log_ratio(dist(X, Y, 1000.0 / tau), dist(X2, Y2, 1000.0 / tau))
    assert public <= 1e-12


def test_exact_privacy_nonsmooth_public_hbar_heavy_tailed_outlier():
    """Absolute loss, public Hbar from G_2 (Section E.2), an outlier with gradient 1e4."""
    rng = np.random.default_rng(3)
    n = 30
    X = rng.standard_t(5, size=n)
    Y = X * 0.4 + 0.1 * rng.normal(size=n)
    X2, Y2 = X.copy(), Y.copy()
    X2[0], Y2[0] = 1e4, -1e4
    mech = EM(C=1.5, regularization=0.2, second_moment=2.0, spacing=0.01)
    for epsilon in (0.5, 1.0, 4.0):
        ratio = _max_log_ratio(
            _distribution(mech, _absolute_1d(X, Y), epsilon),
            _distribution(mech, _absolute_1d(X2, Y2), epsilon),
        )
        assert ratio <= epsilon + 1e-12


def test_exact_privacy_on_a_disc():
    """d = 2 on the unit disc, hinge loss (nonsmooth), circle quadrature, worst-ish pair."""
    rng = np.random.default_rng(4)
    n = 25
    X = rng.normal(size=(n, 2))
    Y = np.sign(X[:, 0] + 0.2)
    X2, Y2 = X.copy(), Y.copy()
    X2[0], Y2[0] = [300.0, -500.0], -1.0
    mech = EM(C=1.0, regularization=0.3, second_moment=1.5, spacing=0.15, quadrature_nodes=8)
    p, q = _distribution(mech, _hinge_2d(X, Y), 1.0), _distribution(mech, _hinge_2d(X2, Y2), 1.0)
    assert p.points.shape[1] == 2 and p.points.shape[0] > 100
    ratio = _max_log_ratio(p, q)
    assert 0.05 < ratio <= 1.0 + 1e-12


# ---------------------------------------------------------------- the net
@pytest.mark.parametrize(
    "make",
    [
        lambda w: dpcvx.domains.l2_ball(w, 1.0),
        lambda w: dpcvx.domains.box(w, [-1.0, 0.0], [1.0, 0.5]),
        lambda w: dpcvx.domains.l1_ball(w, 1.0, center=[0.2, 0.0]),
    ],
)
def test_net_lies_in_the_domain_and_covers_it(make):
    w = cp.Variable(2)
    domain = Domain(w, make(w))
    h = 0.1
    net = net_points(domain, h)
    assert all(domain.contains(p) for p in net)
    assert len(net) <= (math.ceil(domain.diameter / h) + 1) ** 2
    rng = np.random.default_rng(0)
    cand = rng.uniform(-1.5, 1.5, size=(4000, 2))
    inside = np.array([c for c in cand if domain.contains(c)])
    gaps = np.min(np.linalg.norm(inside[:, None, :] - net[None], axis=2), axis=1)
    assert gaps.max() <= h * math.sqrt(2) / 2 + 1e-9
    assert np.array_equal(net, net_points(domain, h))  # deterministic (public)


def test_net_of_an_interval_has_both_endpoints_and_the_requested_spacing():
    w = cp.Variable(1)
    for constraints, lo, hi in (
        (dpcvx.domains.box(w, -0.3, 0.75), -0.3, 0.75),
        (dpcvx.domains.l2_ball(w, 2.0, center=[1.0]), -1.0, 3.0),
    ):
        net = net_points(Domain(w, constraints), 0.1)[:, 0]
        assert net[0] == pytest.approx(lo, abs=1e-12) and net[-1] == pytest.approx(hi, abs=1e-12)
        assert np.max(np.diff(net)) <= 0.1 + 1e-12


# ---------------------------------------------------------------- gradients from values only
class _FakeContext:
    """A release context over closed-form per-example losses ``f(w, z_i)`` (vectorized)."""

    def __init__(self, domain, loss):
        self.domain = domain
        self.loss = loss

    def loss_values(self, points, indices=None):
        return self.loss(np.atleast_2d(np.asarray(points, float)))


def _manual_plan(d, n, C=10.0, tau=0.1, nodes=8):
    return SimpleNamespace(d=d, n=n, C=C, smoothing=tau, quadrature_nodes=nodes)


def test_smoothed_derivative_in_one_dimension_is_exact():
    """f = |w - a|: f^tau'(w) = clamp((w - a)/tau, -1, 1), exactly the two-point formula."""
    a = np.array([-0.5, 0.0, 0.03, 0.4])
    ctx = _FakeContext(None, lambda P: np.abs(P[:, :1] - a[None, :]))
    plan = _manual_plan(1, len(a), C=10.0, tau=0.1)
    pts = np.linspace(-1, 1, 41)[:, None]
    g = EM(C=10.0, regularization=1.0, smoothness=1.0).clipped_gradients(plan, ctx, pts)
    expect = np.mean(np.clip((pts - a[None, :]) / 0.1, -1, 1), axis=1)
    np.testing.assert_allclose(g[:, 0], expect, atol=1e-12)


def test_circle_quadrature_is_exact_for_quadratic_and_linear_losses():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(6, 2))
    pts = rng.uniform(-1, 1, size=(7, 2))
    mech = EM(C=100.0, regularization=1.0, smoothness=1.0)
    quad = _FakeContext(None, lambda P: 0.5 * np.sum((P[:, None, :] - A[None]) ** 2, axis=2))
    g = mech.clipped_gradients(_manual_plan(2, 6, C=100.0, tau=0.3), quad, pts)
    np.testing.assert_allclose(g, pts - A.mean(axis=0), atol=1e-12)
    lin = _FakeContext(None, lambda P: P @ A.T)
    g = mech.clipped_gradients(_manual_plan(2, 6, C=100.0, tau=0.3, nodes=4), lin, pts)
    np.testing.assert_allclose(g, np.broadcast_to(A.mean(axis=0), g.shape), atol=1e-12)
    U = smoothing_directions(2, 8)
    np.testing.assert_allclose(U.T @ U, 2.0 * np.eye(2), atol=1e-12)  # (m/2) I, m = 4


def test_clipping_and_non_finite_values_keep_every_contribution_within_C():
    """Per-example gradients of norm 5 are clipped to C = 1; an example whose loss overflows
    contributes 0 (a fixed per-example map of norm <= C, so the sensitivity is unchanged)."""
    A = np.array([[3.0, 4.0], [0.0, 0.5], [0.0, 0.0]])

    def loss(P):
        vals = P @ A.T
        vals[:, 2] = np.inf
        return vals

    g = EM(C=1.0, regularization=1.0, smoothness=0.0).clipped_gradients(
        _manual_plan(2, 3, C=1.0), _FakeContext(None, loss), np.zeros((1, 2))
    )
    np.testing.assert_allclose(g[0], (np.array([0.6, 0.8]) + np.array([0.0, 0.5])) / 3, atol=1e-12)


# ---------------------------------------------------------------- utility
def test_large_epsilon_concentrates_at_the_regularized_minimizer_in_one_dimension():
    rng = np.random.default_rng(2)
    z = rng.normal(0.3, 0.5, size=40)
    problem = _quadratic_1d(z)
    sol = problem.solve(regularization=0.2, center=np.zeros(1))
    mech = EM(
        C=5.0, regularization=0.2, center=[0.0], smoothness=1.0, smoothing=1e-3, spacing=0.002
    )
    dist = _distribution(mech, problem, 200.0)
    near = np.abs(dist.points[:, 0] - sol.w[0]) <= 0.02
    assert np.exp(dist.log_probabilities[near]).sum() >= 0.99
    for seed in range(3):
        res = problem.solve_private(mech, epsilon=200.0, rng=seed)
        assert abs(res.w[0] - sol.w[0]) <= 0.05


def test_large_epsilon_concentrates_at_the_regularized_minimizer_on_a_disc():
    rng = np.random.default_rng(5)
    n = 60
    X = rng.normal(size=(n, 2))
    Y = np.sign(X @ np.array([1.0, -0.5]) + 0.3 * rng.normal(size=n))
    w = cp.Variable(2)
    x, y = cp.Parameter(2), cp.Parameter()
    problem = dpcvx.Problem(
        cp.logistic(-y * (x @ w)), w, {x: X, y: Y}, dpcvx.domains.l2_ball(w, 1.0)
    )
    sol = problem.solve(regularization=0.1, center=np.zeros(2))
    H = 0.25 * float(np.max(np.sum(X**2, axis=1)))  # public here: a test's own bound
    mech = EM(
        C=10.0,
        regularization=0.1,
        center=[0.0, 0.0],
        smoothness=H,
        smoothing=0.01,
        spacing=0.05,
        quadrature_nodes=8,
    )
    dist = _distribution(mech, problem, 100.0)
    near = np.linalg.norm(dist.points - sol.w, axis=1) <= 0.1
    assert np.exp(dist.log_probabilities[near]).sum() >= 0.99
    assert np.linalg.norm(dist.points[np.argmin(dist.scores)] - sol.w) <= 0.05


# ---------------------------------------------------------------- release, ledger, sampler
def test_release_is_one_pure_event_and_returns_a_net_point():
    problem = _quadratic_1d(Z_SMOOTH)
    mech = EM(C=1.0, regularization=0.5, smoothness=1.0, spacing=0.01)
    res = problem.solve_private(mech, epsilon=1.0, rng=7)
    again = problem.solve_private(mech, epsilon=1.0, rng=7)
    assert np.array_equal(res.w, again.w) and res.seeded
    assert res.delta == 0.0 and res.certificates == ()
    assert len(res.ledger) == 1 and res.ledger.total().epsilon == pytest.approx(1.0)
    event = list(res.ledger)[0]
    assert event.epsilon == 1.0 and event.kind == "pure"
    assert event.detail["sensitivity"] >= 0.2
    assert res.detail["net_size"] == 201 and res.detail["step_size"] == pytest.approx(2 / 3)
    net = net_points(problem.domain, 0.01)
    assert np.any(np.all(net == res.w, axis=1))
    assert problem.domain.contains(res.w)


@pytest.mark.statistical
def test_sampler_follows_the_exact_probabilities():
    """Chi-square goodness of fit of 20000 draws over 8 cells; the test fails with probability
    1e-4 when the sampler is right (seeded, so it is deterministic in CI)."""
    logp = exponential_log_probabilities(
        np.array([0.0, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 50.0]), 1.0, 0.1
    )
    rng = np.random.default_rng(11)
    N = 20_000
    counts = np.bincount([sample_index(logp, rng) for _ in range(N)], minlength=8)
    expected = N * np.exp(logp)
    keep = expected >= 5
    stat = float(np.sum((counts[keep] - expected[keep]) ** 2 / expected[keep]))
    assert stat <= chi2.ppf(1 - 1e-4, int(keep.sum()) - 1)
    assert counts[~keep].sum() <= 5  # essentially zero mass


# ---------------------------------------------------------------- bad input
def test_bad_input_raises_before_anything_is_spent():
    problem = _quadratic_1d(Z_SMOOTH)
    acct = dpcvx.Accountant(1.0)
    with pytest.raises(InvalidParameterError, match="delta"):
        problem.solve_private(
            EM(C=1.0, regularization=0.5, smoothness=1.0, spacing=0.01),
            epsilon=1.0,
            delta=1e-6,
            rng=0,
            accountant=acct,
        )
    with pytest.raises(InvalidParameterError, match="spacing"):
        problem.solve_private(
            EM(C=1.0, regularization=0.5, second_moment=1.0, max_points=100),
            epsilon=1.0,
            rng=0,
            accountant=acct,
        )
    assert len(acct.ledger) == 0
    w = cp.Variable(3)
    z = cp.Parameter(3)
    big = dpcvx.Problem(
        cp.sum_squares(w - z), w, {z: np.zeros((5, 3))}, dpcvx.domains.l2_ball(w, 1.0)
    )
    with pytest.raises(InvalidParameterError, match="d <= 2"):
        big.solve_private(
            EM(C=1.0, regularization=0.5, smoothness=2.0, spacing=0.5),
            epsilon=1.0,
            rng=0,
            accountant=acct,
        )
    assert len(acct.ledger) == 0


@pytest.mark.parametrize("d,cap", [(1, 4), (1, 1000), (2, 500), (2, 10_000), (2, 12_345)])
def test_the_suggested_spacing_fits_the_cap(d, cap):
    mech = EM(C=1.0, regularization=0.5, second_moment=1.0, max_points=cap)
    with pytest.raises(InvalidParameterError, match="at least") as info:
        mech.plan(n=100, d=d, center=np.zeros(d), diameter=2.0, epsilon=1.0, delta=0.0)
    coarsest = float(str(info.value).split("at least ")[1].split(";")[0])
    ok = EM(C=1.0, regularization=0.5, second_moment=1.0, max_points=cap, spacing=coarsest)
    assert (
        ok.plan(n=100, d=d, center=np.zeros(d), diameter=2.0, epsilon=1.0, delta=0.0).net_bound
        <= cap
    )


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"C": 0.0, "regularization": 1.0, "smoothness": 1.0}, "C"),
        ({"C": 1.0, "regularization": -1.0, "smoothness": 1.0}, "regularization"),
        ({"C": 1.0, "regularization": 1.0}, "neither"),
        ({"C": 1.0, "regularization": 1.0, "smoothness": 1.0, "second_moment": 1.0}, "both"),
        ({"C": 1.0, "regularization": 1.0, "smoothness": -1.0}, "smoothness"),
        (
            {"C": 1.0, "regularization": 1.0, "second_moment": 1.0, "smoothness_failure": 1.0},
            "smoothness_failure",
        ),
        ({"C": 1.0, "regularization": 1.0, "smoothness": 1.0, "smoothing": 0.0}, "smoothing"),
        ({"C": 1.0, "regularization": 1.0, "smoothness": 1.0, "spacing": float("nan")}, "spacing"),
        ({"C": 1.0, "regularization": 1.0, "smoothness": 1.0, "quadrature_nodes": 7}, "even"),
        (
            {"C": 1.0, "regularization": 1.0, "smoothness": 1.0, "quadrature_nodes": 2},
            "quadrature_nodes",
        ),
        ({"C": 1.0, "regularization": 1.0, "smoothness": 1.0, "max_points": 3}, "max_points"),
        ({"C": 1.0, "regularization": 1.0, "smoothness": 1.0, "center": [np.inf]}, "center"),
    ],
)
def test_bad_parameters(kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        EM(**kwargs)


def test_unsupported_domain_is_refused():
    w = cp.Variable(2)
    z = cp.Parameter(2)
    problem = dpcvx.Problem(
        cp.sum_squares(w - z), w, {z: np.zeros((4, 2))}, [w >= 0, w[0] + 2 * w[1] <= 1]
    )  # a triangle: no exact projection
    mech = EM(C=1.0, regularization=0.5, smoothness=2.0, spacing=0.1)
    with pytest.raises(InvalidParameterError, match="exact Euclidean projection"):
        _plan(mech, problem, 1.0)  # early, when the domain is passed to plan
    with pytest.raises(InvalidParameterError, match="exact Euclidean projection"):
        problem.solve_private(mech, epsilon=1.0, rng=0)


@pytest.mark.slow
@pytest.mark.statistical
def test_release_draws_from_the_exact_distribution():
    """400 releases through ``release`` (the path ``solve_private`` takes) against the exact
    distribution, in 6 bins of equal exact mass: chi-square at level 1e-4, so the test fails
    with probability 1e-4 when the release is right (seeded: deterministic in CI)."""
    problem = _quadratic_1d(Z_SMOOTH)
    mech = EM(C=1.0, regularization=0.5, center=[0.0], smoothness=1.0, spacing=0.01)
    plan = _plan(mech, problem, 1.0)
    context = problem.release_context(extension=None, solver=None, base=True)
    dist = mech.distribution(plan, context)
    cdf = np.cumsum(np.exp(dist.log_probabilities))
    edges = np.searchsorted(cdf, np.arange(1, 6) / 6)  # bin b holds net indices < edges[b]
    rng = np.random.default_rng(12)
    N = 400
    draws = []
    for _ in range(N):
        w, certs, extra = mech.release(plan, context, rng)
        draws.append(int(np.flatnonzero(np.all(dist.points == w, axis=1))[0]))
    bins = np.searchsorted(edges, np.asarray(draws), side="right")
    counts = np.bincount(bins, minlength=6)
    probs = np.diff(np.concatenate([[0.0], cdf[edges - 1], [1.0]]))
    expected = N * probs
    stat = float(np.sum((counts - expected) ** 2 / expected))
    assert stat <= chi2.ppf(1 - 1e-4, 5)
