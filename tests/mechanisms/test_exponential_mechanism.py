"""The exponential mechanism of paper 002, Appendix G (Algorithms 9-11), over a public net:
exact privacy checks over the whole net (no sampling) on worst-case neighbors, with negative
controls; the clip under a false Lipschitz claim; utility against closed-form minimizers; the
localized variant's public plan against the closed forms, its release, its refusals; bad input.

The exact checks compute both output distributions with the mechanism's own ``distribution``
helper, after checking that helper against an independent numpy recomputation.
"""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pytest
from scipy.stats import chi2

import dpcvx
from dpcvx.audit import audit_exact
from dpcvx.certification.certificate import ReleaseCertificate
from dpcvx.errors import InvalidParameterError
from dpcvx.mechanisms.em_pgm import exponential_log_probabilities, net_points
from dpcvx.mechanisms.exponential import (
    ExponentialMechanism,
    LocalizedExponentialMechanism,
    clipped_score_sensitivity,
    clipped_scores,
    localized_net,
)
from dpcvx.modeling.domains import Domain

EM = ExponentialMechanism
LEM = LocalizedExponentialMechanism


# ---------------------------------------------------------------- helpers
def _absolute_1d(z, domain="box") -> dpcvx.Problem:
    """f(w, z) = |w - z| on W = [-1, 1] (L = 1)."""
    w = cp.Variable(1)
    zp = cp.Parameter()
    dom = dpcvx.domains.box(w, -1.0, 1.0) if domain == "box" else dpcvx.domains.l2_ball(w, 1.0)
    return dpcvx.Problem(cp.abs(w[0] - zp), w, {zp: np.asarray(z, float)}, dom)


def _square_1d(z) -> dpcvx.Problem:
    """f(w, z) = (w - z)^2 on W = [-1, 1]: 2(1 + max|z|)-Lipschitz, so L = 1 is false for
    large z."""
    w = cp.Variable(1)
    zp = cp.Parameter()
    return dpcvx.Problem(
        cp.square(w[0] - zp), w, {zp: np.asarray(z, float)}, dpcvx.domains.box(w, -1.0, 1.0)
    )


def _norm_2d(Z, domain="box") -> dpcvx.Problem:
    """f(w, z) = ||w - z||_2 on W = [-1, 1]^2 (or the unit disc): L = 1."""
    w = cp.Variable(2)
    zp = cp.Parameter(2)
    dom = (
        dpcvx.domains.box(w, [-1.0, -1.0], [1.0, 1.0])
        if domain == "box"
        else dpcvx.domains.l2_ball(w, 1.0)
    )
    return dpcvx.Problem(cp.norm(w - zp, 2), w, {zp: np.asarray(Z, float)}, dom)


def _sq_2d(Z) -> dpcvx.Problem:
    """f(w, z) = ||w - z||^2 / 2 on W = [-1, 1]^2."""
    w = cp.Variable(2)
    zp = cp.Parameter(2)
    return dpcvx.Problem(
        0.5 * cp.sum_squares(w - zp),
        w,
        {zp: np.asarray(Z, float)},
        dpcvx.domains.box(w, [-1.0, -1.0], [1.0, 1.0]),
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


def _context(problem):
    return problem.release_context(extension=None, solver=None)


def _log_ratio(a, b) -> float:
    assert np.array_equal(a.points, b.points)  # the net is public: identical on neighbors
    return float(np.max(np.abs(a.log_probabilities - b.log_probabilities)))


def _halved(p, q, epsilon, plan) -> float:
    """Negative control: the same scores with the sensitivity halved."""
    a, b = (
        exponential_log_probabilities(x.scores, epsilon, plan.sensitivity.value / 2) for x in (p, q)
    )
    return float(np.max(np.abs(a - b)))


# 15 examples near -1 (the mechanism concentrates at -1); the neighbor moves one to +1
Z_1D = np.array([-1.0, -0.9, -0.8, -0.95] + [-1.0] * 11)
Z_1D_MOVED = Z_1D.copy()
Z_1D_MOVED[0] = 1.0


# ---------------------------------------------------------------- the scores, independently
def test_distribution_matches_an_independent_recomputation():
    """|w - z| on [-1, 1], spacing 0.01: net = 201 points, anchor c = 0, r = 1, so
    s(w) = mean_i clip(|w - z_i| - |z_i|, -|w|, |w|) and Delta_s = 2/n (plus a tiny
    allowance)."""
    mech = EM(lipschitz=1.0, spacing=0.01)
    problem = _absolute_1d(Z_1D)
    plan = _plan(mech, problem, 1.0)
    grid = np.linspace(-1.0, 1.0, 201)
    np.testing.assert_allclose(plan.net[:, 0], grid, atol=1e-12)
    assert np.array_equal(plan.anchor, [0.0]) and plan.radius == 1.0
    n = len(Z_1D)
    assert 2.0 / n <= plan.sensitivity.value <= 2.0 / n * (1 + 1e-12)
    diff = np.abs(grid[:, None] - Z_1D[None, :]) - np.abs(Z_1D)[None, :]
    s = np.mean(np.clip(diff, -np.abs(grid)[:, None], np.abs(grid)[:, None]), axis=1)
    logits = -1.0 * s / (2 * plan.sensitivity.value)
    logp = logits - np.log(np.sum(np.exp(logits - logits.max()))) - logits.max()
    dist = mech.distribution(plan, _context(problem))
    np.testing.assert_allclose(dist.scores, s, atol=1e-12)
    np.testing.assert_allclose(dist.log_probabilities, logp, atol=1e-9)


def test_clipped_scores_are_a_per_example_map_into_the_interval():
    values = np.array([[0.0, 5.0, np.inf, np.nan], [1.0, -np.inf, 2.0, 0.5]])
    anchor = np.array([0.0, 0.0, 0.0, 0.0])
    s = clipped_scores(values, anchor, np.array([1.0, 0.25]), np.array([0.0, 10.0]))
    # row 0: clip(0, 5, inf, nan -> 0) to [-1, 1]; row 1: clip(1, -inf, 2, 0.5) to +-0.25
    np.testing.assert_allclose(s, [(0 + 1 + 1 + 0) / 4, (0.25 - 0.25 + 0.25 + 0.25) / 4 + 10])


def test_score_sensitivity_allowance_is_tiny_and_rounded_up():
    for n, L, r, P in ((10, 1.0, 1.0, 0.0), (1000, 3.0, 0.5, 2.0), (100_000, 1.0, 2.0, 5.0)):
        base = 2 * L * r / n
        value = clipped_score_sensitivity(n=n, lipschitz=L, radius=r, regularization_bound=P)
        assert value > base
        assert value / base - 1 <= 2.3e-16 * n * (n + 12 + 4 * P / (L * r)) + 1e-15
        assert n > 1000 or value / base - 1 < 3e-10
    assert clipped_score_sensitivity(n=5, lipschitz=1.0, radius=0.0, regularization_bound=0.0) > 0.0
    with pytest.raises(InvalidParameterError, match="lipschitz"):
        clipped_score_sensitivity(n=5, lipschitz=0.0, radius=1.0, regularization_bound=0.0)
    with pytest.raises(InvalidParameterError, match="`n`"):
        clipped_score_sensitivity(n=0, lipschitz=1.0, radius=1.0, regularization_bound=0.0)


# ---------------------------------------------------------------- exact privacy
@pytest.mark.parametrize(
    "epsilon,expected", [(0.5, 0.3724), (1.0, 0.8558), (4.0, 3.8366), (20.0, 19.8144)]
)
def test_exact_privacy_1d_worst_case_neighbors(epsilon, expected):
    """One example moved from -1 to +1 moves every score by (|w + 1| - |w - 1|)/n = 2w/n, up
    to Delta_s = 2/n at w = +-1: the bound is attained there. Measured max log-ratios: 0.3724,
    0.8558, 3.8366, 19.8144 at epsilon = 0.5, 1, 4, 20; with Delta_s halved (negative control)
    0.856, 1.849, 7.821, 39.84, all above epsilon."""
    mech = EM(lipschitz=1.0, spacing=0.01)
    plan = _plan(mech, _absolute_1d(Z_1D), epsilon)
    p = mech.distribution(plan, _context(_absolute_1d(Z_1D)))
    q = mech.distribution(plan, _context(_absolute_1d(Z_1D_MOVED)))
    assert np.max(np.abs(p.scores - q.scores)) <= plan.sensitivity.value
    ratio = _log_ratio(p, q)
    assert ratio <= epsilon + 1e-9
    assert ratio == pytest.approx(expected, abs=1e-4)
    assert _halved(p, q, epsilon, plan) > epsilon


@pytest.mark.parametrize("epsilon,expected", [(1.0, 0.8191), (4.0, 3.8474)])
def test_exact_privacy_2d_worst_case_neighbors(epsilon, expected):
    """||w - z|| on [-1, 1]^2 (spacing 0.05: 1681 points, anchor 0, r = sqrt 2); one example
    moved from the corner (-1, -1) to (1, 1): the score moves by 2 sqrt(2)/n = Delta_s at the
    corner. Cross-checked with :func:`dpcvx.audit.audit_exact`. Measured: 0.8191 and 3.8474;
    negative control (Delta_s halved): 1.825 and 7.893."""
    Z = np.full((20, 2), -1.0)
    Z2 = Z.copy()
    Z2[0] = [1.0, 1.0]
    mech = EM(lipschitz=1.0, spacing=0.05)
    plan = _plan(mech, _norm_2d(Z), epsilon)
    assert plan.net.shape == (1681, 2)
    assert plan.radius == pytest.approx(math.sqrt(2), abs=1e-15)
    p = mech.distribution(plan, _context(_norm_2d(Z)))
    q = mech.distribution(plan, _context(_norm_2d(Z2)))
    ratio = _log_ratio(p, q)
    assert ratio <= epsilon + 1e-9
    assert ratio == pytest.approx(expected, abs=1e-4)
    assert audit_exact(
        mech, (_norm_2d(Z), _norm_2d(Z2)), epsilon=epsilon
    ).lower_bound == pytest.approx(ratio, abs=1e-12)
    assert _halved(p, q, epsilon, plan) > epsilon


def test_exact_privacy_on_a_disc_with_regularization():
    """The unit disc (net points in W only), lam = 0.5 around w0 = (0.3, 0): the regularizer is
    public and cancels (measured 1.075 at epsilon = 2)."""
    rng = np.random.default_rng(4)
    Z = rng.uniform(-0.7, 0.7, size=(25, 2))
    Z2 = Z.copy()
    Z2[3] = [-0.7, 0.7]
    mech = EM(lipschitz=1.0, regularization=0.5, center=[0.3, 0.0], spacing=0.1)
    plan = _plan(mech, _norm_2d(Z, "disc"), 2.0)
    assert all(_norm_2d(Z, "disc").domain.contains(p) for p in plan.net)
    ratio = _log_ratio(
        mech.distribution(plan, _context(_norm_2d(Z, "disc"))),
        mech.distribution(plan, _context(_norm_2d(Z2, "disc"))),
    )
    assert 0.05 < ratio <= 2.0 + 1e-9


# ---------------------------------------------------------------- the clip
@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_a_false_lipschitz_claim_is_clipped(epsilon):
    """(w - z)^2 with z = 50 is about 100-Lipschitz on [-1, 1], but the mechanism is told
    L = 1. With the clip the max log-ratio stays below epsilon (measured 0.450 and 1.920);
    without it (negative control: the raw anchored scores, same Delta_s) it is 44.5 and 186.6."""
    z = np.zeros(10)
    z2 = z.copy()
    z2[0] = 50.0
    mech = EM(lipschitz=1.0, spacing=0.01)
    plan = _plan(mech, _square_1d(z), epsilon)
    p = mech.distribution(plan, _context(_square_1d(z)))
    q = mech.distribution(plan, _context(_square_1d(z2)))
    ratio = _log_ratio(p, q)
    assert ratio <= epsilon + 1e-9

    def unclipped(problem):
        ctx = _context(problem)
        values = ctx.loss_values(plan.net)
        anchor = ctx.loss_values(plan.anchor[None, :])[0]
        return exponential_log_probabilities(
            np.mean(values - anchor[None, :], axis=1), epsilon, plan.sensitivity.value
        )

    leak = float(np.max(np.abs(unclipped(_square_1d(z)) - unclipped(_square_1d(z2)))))
    assert leak > 10 * epsilon


def test_the_clip_changes_nothing_when_the_claim_is_true():
    z = np.random.default_rng(0).uniform(-1, 1, 12)
    mech = EM(lipschitz=1.0, spacing=0.02)
    problem = _absolute_1d(z)
    plan = _plan(mech, problem, 1.0)
    ctx = _context(problem)
    raw = np.mean(ctx.loss_values(plan.net) - ctx.loss_values(plan.anchor[None, :]), axis=1)
    np.testing.assert_allclose(mech.distribution(plan, ctx).scores, raw, atol=1e-14)


# ---------------------------------------------------------------- utility
def test_large_epsilon_releases_the_median_in_one_dimension():
    """Absolute loss: the exact minimizer is the sample median (n odd)."""
    z = np.random.default_rng(1).uniform(-1, 1, 41)
    problem = _absolute_1d(z)
    mech = EM(lipschitz=1.0, spacing=0.002)
    dist = mech.distribution(_plan(mech, problem, 20000.0), _context(problem))
    near = np.abs(dist.points[:, 0] - np.median(z)) <= 3 * 0.002
    assert np.exp(dist.log_probabilities[near]).sum() >= 0.99
    for seed in range(3):
        res = problem.solve_private(mech, epsilon=20000.0, rng=seed)
        assert abs(res.w[0] - np.median(z)) <= 3 * 0.002


def test_large_epsilon_releases_the_mean_in_two_dimensions():
    """||w - z||^2 / 2 with z in [-0.5, 0.5]^2 on [-1, 1]^2 (L = ||(1.5, 1.5)|| < 2.2): the
    exact minimizer is the sample mean."""
    Z = np.random.default_rng(2).uniform(-0.5, 0.5, size=(40, 2))
    problem = _sq_2d(Z)
    mech = EM(lipschitz=2.2, spacing=0.05)
    for seed in range(3):
        res = problem.solve_private(mech, epsilon=2000.0, rng=seed)
        assert np.linalg.norm(res.w - Z.mean(axis=0)) <= 2 * 0.05


def test_regularization_moves_the_target():
    """lam (w - w0)^2 / 2 added to |w - z| with all z = 0: the minimizer of
    |w| + (lam/2)(w - w0)^2 with lam = 4, w0 = 0.75 is w0 - 1/lam = 0.5."""
    problem = _absolute_1d(np.zeros(9))
    mech = EM(lipschitz=1.0, regularization=4.0, center=[0.75], spacing=0.01)
    dist = mech.distribution(_plan(mech, problem, 1.0), _context(problem))
    assert dist.points[np.argmin(dist.scores), 0] == pytest.approx(0.5, abs=1e-9)


# ---------------------------------------------------------------- release, ledger, sampler
def test_release_is_one_pure_event_and_returns_a_net_point():
    problem = _absolute_1d(Z_1D)
    mech = EM(lipschitz=1.0, spacing=0.01)
    res = problem.solve_private(mech, epsilon=1.0, rng=7)
    again = problem.solve_private(mech, epsilon=1.0, rng=7)
    assert np.array_equal(res.w, again.w) and res.seeded
    assert res.delta == 0.0 and res.certificates == ()
    assert len(res.ledger) == 1 and res.ledger.total().epsilon == pytest.approx(1.0)
    event = list(res.ledger)[0]
    assert event.epsilon == 1.0 and event.kind == "pure"
    assert event.detail["sensitivity"] >= 2.0 / len(Z_1D)
    assert res.detail["net_size"] == 201 and res.detail["net_radius"] == 1.0
    assert np.any(np.all(net_points(problem.domain, 0.01) == res.w, axis=1))
    assert problem.domain.contains(res.w)


@pytest.mark.statistical
def test_release_draws_from_the_exact_distribution():
    """3000 releases through ``release`` on a 21-point net against the exact distribution:
    chi-square at level 1e-4 over the cells of expected count >= 5, so the test fails with
    probability about 1e-4 when the sampler is right (seeded: deterministic in CI)."""
    z = np.random.default_rng(3).uniform(-1, 1, 11)
    problem = _absolute_1d(z)
    mech = EM(lipschitz=1.0, spacing=0.1)
    plan = _plan(mech, problem, 2.0)
    context = _context(problem)
    dist = mech.distribution(plan, context)
    rng = np.random.default_rng(12)
    N = 3000
    index = [
        int(np.flatnonzero(np.all(dist.points == mech.release(plan, context, rng)[0], axis=1))[0])
        for _ in range(N)
    ]
    counts = np.bincount(index, minlength=len(dist.points))
    expected = N * np.exp(dist.log_probabilities)
    keep = expected >= 5
    stat = float(np.sum((counts[keep] - expected[keep]) ** 2 / expected[keep]))
    assert stat <= chi2.ppf(1 - 1e-4, int(keep.sum()) - 1)


# ---------------------------------------------------------------- planning and bad input
@pytest.mark.parametrize(
    "d,cap", [(1, 4), (1, 10_000), (2, 500), (2, 10_000), (3, 10_000), (3, 12_345)]
)
def test_default_spacing_is_the_finest_that_fits(d, cap):
    w = cp.Variable(d)
    domain = Domain(w, dpcvx.domains.box(w, -np.ones(d), np.ones(d)))
    plan = EM(lipschitz=1.0, max_points=cap).plan(
        n=50,
        d=d,
        center=domain.center,
        diameter=domain.diameter,
        epsilon=1.0,
        delta=0.0,
        domain=domain,
    )
    # the public bound of em_pgm, (ceil(D/h) + 1)^d, with D the diameter bound (for a box the
    # per-axis extent is below D, so the net itself is smaller)
    side = math.ceil(domain.diameter / plan.spacing) + 1
    assert len(plan.net) <= plan.net_bound == side**d <= cap < (side + 1) ** d


@pytest.mark.parametrize("d,cap", [(1, 4), (1, 1000), (2, 500), (3, 10_000)])
def test_a_too_fine_spacing_is_refused_with_the_coarsest_that_fits(d, cap):
    w = cp.Variable(d)
    domain = Domain(w, dpcvx.domains.box(w, -np.ones(d), np.ones(d)))
    kwargs = dict(
        n=50,
        d=d,
        center=domain.center,
        diameter=domain.diameter,
        epsilon=1.0,
        delta=0.0,
        domain=domain,
    )
    with pytest.raises(InvalidParameterError, match="at least") as info:
        EM(lipschitz=1.0, spacing=1e-4, max_points=cap).plan(**kwargs)
    coarsest = float(str(info.value).split("at least ")[1].split(";")[0])
    assert EM(lipschitz=1.0, spacing=coarsest, max_points=cap).plan(**kwargs).net_bound <= cap


def test_refusals_spend_nothing():
    problem = _absolute_1d(Z_1D)
    acct = dpcvx.Accountant(1.0)
    with pytest.raises(InvalidParameterError, match="delta"):
        problem.solve_private(
            EM(lipschitz=1.0, spacing=0.01), epsilon=1.0, delta=1e-6, rng=0, accountant=acct
        )
    with pytest.raises(InvalidParameterError, match="spacing"):
        problem.solve_private(EM(lipschitz=1.0, spacing=1e-5), epsilon=1.0, rng=0, accountant=acct)
    w = cp.Variable(4)
    z = cp.Parameter(4)
    big = dpcvx.Problem(cp.norm(w - z, 2), w, {z: np.zeros((5, 4))}, dpcvx.domains.l2_ball(w, 1.0))
    with pytest.raises(InvalidParameterError, match="d <= 3"):
        big.solve_private(EM(lipschitz=1.0), epsilon=1.0, rng=0, accountant=acct)
    tri = cp.Variable(2)
    zz = cp.Parameter(2)
    triangle = dpcvx.Problem(
        cp.norm(tri - zz, 2), tri, {zz: np.zeros((4, 2))}, [tri >= 0, tri[0] + 2 * tri[1] <= 1]
    )
    with pytest.raises(InvalidParameterError, match="ExponentialMechanism.*exact Euclidean"):
        triangle.solve_private(EM(lipschitz=1.0, spacing=0.1), epsilon=1.0, rng=0, accountant=acct)
    assert len(acct.ledger) == 0


def test_plan_needs_the_domain():
    with pytest.raises(InvalidParameterError, match="domain"):
        EM(lipschitz=1.0).plan(n=5, d=1, center=np.zeros(1), diameter=2.0, epsilon=1.0, delta=0.0)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"lipschitz": 0.0}, "lipschitz"),
        ({"lipschitz": -1.0}, "lipschitz"),
        ({"lipschitz": float("nan")}, "lipschitz"),
        ({"lipschitz": 1.0, "regularization": -1.0}, "regularization"),
        ({"lipschitz": 1.0, "spacing": 0.0}, "spacing"),
        ({"lipschitz": 1.0, "spacing": -0.1}, "spacing"),
        ({"lipschitz": 1.0, "max_points": 3}, "max_points"),
        ({"lipschitz": 1.0, "max_points": 4.5}, "max_points"),
        ({"lipschitz": 1.0, "max_points": True}, "max_points"),
        ({"lipschitz": 1.0, "center": [np.inf]}, "center"),
    ],
)
def test_bad_parameters(kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        EM(**kwargs)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"lipschitz": 0.0, "regularization": 1.0}, "lipschitz"),
        ({"lipschitz": 1.0, "regularization": 0.0}, "regularization"),
        ({"lipschitz": 1.0, "regularization": -2.0}, "regularization"),
        ({"lipschitz": 1.0, "regularization": 1.0, "spacing": 0.0}, "spacing"),
        ({"lipschitz": 1.0, "regularization": 1.0, "xi": 0.0}, "xi"),
        ({"lipschitz": 1.0, "regularization": 1.0, "accuracy": -1e-6}, "accuracy"),
        ({"lipschitz": 1.0, "regularization": 1.0, "max_points": 3}, "max_points"),
        ({"lipschitz": 1.0, "regularization": 1.0, "solver": 3}, "solver"),
    ],
)
def test_bad_parameters_localized(kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        LEM(**kwargs)


# ---------------------------------------------------------------- localized (Algorithm 11)
def test_localized_plan_matches_the_closed_forms():
    """Delta_F = 2L/(lam n) + 2 sqrt(2 alpha/lam), xi = log(eps^2 lam R/(d L)) with R = D/2,
    R0 = xi Delta_F d/(eps/2), noise scale Delta_F/(eps/2), default alpha as in
    TiltedOutputPerturbation: to machine precision."""
    problem = _norm_2d(np.zeros((30, 2)), "disc")
    L, lam, eps, n, d, D = 1.0, 2.0, 8.0, 30, 2, problem.diameter
    plan = _plan(LEM(lipschitz=L, regularization=lam), problem, eps)
    alpha = max((0.025 * 2 * L / (lam * n)) ** 2 * lam / 2, 1e-9 * (1 + L * D))
    delta_F = 2 * L / (lam * n) + 2 * math.sqrt(2 * alpha / lam)
    xi = math.log(eps**2 * lam * (D / 2) / (d * L))
    R0 = xi * delta_F * d / (eps / 2)
    assert plan.accuracy == pytest.approx(alpha, rel=1e-15)
    assert plan.localization_sensitivity.value == pytest.approx(delta_F, rel=1e-15)
    assert plan.localization_sensitivity.value >= delta_F
    assert plan.xi == pytest.approx(xi, rel=1e-15)
    assert plan.radius == pytest.approx(R0, rel=1e-15) and plan.radius >= R0
    assert plan.noise.kind == "l2_laplace" and plan.noise.epsilon == eps / 2
    assert plan.noise.scale == pytest.approx(delta_F / (eps / 2), rel=1e-15)
    assert plan.stage_epsilon == eps / 2 and plan.guarantee.epsilon == eps
    assert plan.net_bound <= 10_000
    # a public override of xi and alpha
    plan = _plan(LEM(lipschitz=L, regularization=lam, xi=0.7, accuracy=1e-6), problem, eps)
    delta_F = 2 * L / (lam * n) + 2 * math.sqrt(2 * 1e-6 / lam)
    assert plan.radius == pytest.approx(0.7 * delta_F * d / (eps / 2), rel=1e-15)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_localized_release_lies_in_the_domain_and_the_localized_ball(seed):
    Z = np.random.default_rng(10 + seed).uniform(-0.8, 0.8, size=(30, 2))
    problem = _norm_2d(Z, "disc")
    mech = LEM(lipschitz=1.0, regularization=2.0)
    res = problem.solve_private(mech, epsilon=8.0, rng=seed)
    w_loc = np.array(res.detail["localization_center"])
    R0 = res.detail["localization_radius"]
    assert problem.domain.contains(res.w) and problem.domain.contains(w_loc)
    assert np.linalg.norm(res.w - w_loc) <= R0
    assert 1 < res.detail["net_size"] <= res.detail["net_bound"]
    assert res.detail["net_radius"] <= R0
    assert res.detail["score_sensitivity"] >= 2 * res.detail["net_radius"] / 30
    (cert,) = res.certificates
    assert isinstance(cert, ReleaseCertificate)
    assert cert.accuracy == res.detail["accuracy"] and cert.regularization == 2.0
    (event,) = list(res.ledger)
    assert event.epsilon == 8.0 and event.delta == 0.0 and event.kind == "pure"
    assert "epsilon/2 localization + epsilon/2 exponential mechanism" in event.detail["composition"]
    assert "adaptive" in event.detail["adaptive"]


def test_localized_release_near_the_regularized_minimizer_at_large_epsilon():
    z = np.random.default_rng(5).uniform(-1, 1, 41)
    problem = _absolute_1d(z)
    target = problem.solve(regularization=1.0, center=np.zeros(1)).w
    res = problem.solve_private(LEM(lipschitz=1.0, regularization=1.0), epsilon=200.0, rng=0)
    assert res.detail["localization_radius"] < 0.01
    assert abs(res.w[0] - target[0]) <= 0.01


@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_localized_stage_two_is_exactly_private_given_the_localization(epsilon):
    """Given a public w_loc, stage 2 is epsilon/2-DP on worst-case neighbors, even when the
    Lipschitz claim is false (squared loss with one example at 50, L = 1)."""
    z = np.zeros(10)
    z2 = z.copy()
    z2[0] = 50.0
    mech = LEM(lipschitz=1.0, regularization=1.0, xi=3.0)
    plan = _plan(mech, _square_1d(z), epsilon)
    for w_loc in ([0.0], [0.95], [-1.0]):
        p = mech.local_distribution(plan, _context(_square_1d(z)), w_loc)
        q = mech.local_distribution(plan, _context(_square_1d(z2)), w_loc)
        assert np.all(np.abs(p.points[:, 0] - w_loc[0]) <= plan.radius)
        assert np.any(p.points[:, 0] == w_loc[0])
        assert _log_ratio(p, q) <= epsilon / 2 + 1e-9


def test_localized_refuses_a_non_positive_default_xi_before_spending():
    """eps = 0.5, lam = 0.1, R = 1, d = 1, L = 1: eps^2 lam R/(d L) = 0.025 < 1, xi < 0."""
    problem = _absolute_1d(Z_1D)
    acct = dpcvx.Accountant(1.0)
    with pytest.raises(InvalidParameterError, match="xi") as info:
        problem.solve_private(
            LEM(lipschitz=1.0, regularization=0.1), epsilon=0.5, rng=0, accountant=acct
        )
    assert "ExponentialMechanism" in str(info.value) and "Nothing was spent" in str(info.value)
    assert len(acct.ledger) == 0 and acct.spent.epsilon == 0.0
    with pytest.raises(InvalidParameterError, match="delta"):
        problem.solve_private(
            LEM(lipschitz=1.0, regularization=1.0), epsilon=4.0, delta=1e-6, rng=0, accountant=acct
        )
    w = cp.Variable(4)
    z = cp.Parameter(4)
    big = dpcvx.Problem(cp.norm(w - z, 2), w, {z: np.zeros((5, 4))}, dpcvx.domains.l2_ball(w, 1.0))
    with pytest.raises(InvalidParameterError, match="d <= 3"):
        big.solve_private(
            LEM(lipschitz=1.0, regularization=1.0, xi=1.0), epsilon=1.0, rng=0, accountant=acct
        )
    with pytest.raises(InvalidParameterError, match="spacing"):
        problem.solve_private(
            LEM(lipschitz=1.0, regularization=1.0, spacing=1e-9),
            epsilon=4.0,
            rng=0,
            accountant=acct,
        )
    assert len(acct.ledger) == 0
    # a public xi makes the same release possible (utility only)
    res = problem.solve_private(
        LEM(lipschitz=1.0, regularization=0.1, xi=1.0), epsilon=0.5, rng=0, accountant=acct
    )
    assert res.detail["xi"] == 1.0 and len(acct.ledger) == 1


def test_localized_coarse_net_stays_at_the_localization():
    """A spacing far above R0 leaves at most w_loc and the two ends of its ball (the ends
    are kept when their computed distance does not exceed R0): stage 2 stays within R0."""
    problem = _absolute_1d(np.zeros(9))
    for seed in range(4):
        res = problem.solve_private(
            LEM(lipschitz=1.0, regularization=1.0, xi=1e-3, spacing=1.5), epsilon=4.0, rng=seed
        )
        assert res.detail["net_size"] in (1, 3)
        center = res.detail["localization_center"][0]
        assert abs(res.w[0] - center) <= res.detail["localization_radius"]


@pytest.mark.parametrize(
    "make",
    [
        lambda w: dpcvx.domains.l2_ball(w, 1.0),
        lambda w: dpcvx.domains.box(w, [-1.0, 0.0], [1.0, 0.5]),
        lambda w: dpcvx.domains.l1_ball(w, 1.0, center=[0.2, 0.0]),
    ],
)
def test_localized_net_lies_in_the_domain_and_the_ball(make):
    w = cp.Variable(2)
    domain = Domain(w, make(w))
    center = domain.make_feasible(np.array([0.9, 0.3]))
    net = localized_net(domain, center, 0.4, 0.05)
    assert all(domain.contains(p) for p in net)
    assert np.all(np.linalg.norm(net - center, axis=1) <= 0.4)
    assert np.any(np.all(net == center, axis=1))
    assert len(net) > 20
    assert np.array_equal(net, localized_net(domain, center, 0.4, 0.05))  # public, fixed
