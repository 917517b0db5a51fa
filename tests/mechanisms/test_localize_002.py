"""Paper 002's localization ``A_loc`` (Appendix G, Algorithm 10) as a mechanism of its own
(:class:`OutputPerturbationLocalize`): the plan against closed forms from public numbers only;
the tail bound ``P(||z|| <= xi d theta) >= 1 - d e^-xi`` (seeded, with its false-failure rate);
Algorithm 11 running exactly Algorithm 10 at ``epsilon/2``; a sampled audit on the worst-case
pair with a negative control that must be caught; refusals that spend nothing.

The claim ``L = 1`` is true for ``|w - z|`` and ``||w - z||_2``; dpcvx enforces it (examples it
cannot certify run on their L-Lipschitz extension, equal to the loss when the claim is true)
and says so to the curator with a LipschitzClaimWarning on the 2-d problems (expected here).
"""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pytest
from scipy.stats import binom, gamma

import dpcvx
from dpcvx.audit import audit, build_pair, negative_control
from dpcvx.certification.certificate import ReleaseCertificate
from dpcvx.errors import InvalidParameterError
from dpcvx.mechanisms.base import perturb
from dpcvx.mechanisms.exponential import LocalizedExponentialMechanism
from dpcvx.mechanisms.output_perturbation_localize import (
    LocalizationPlan,
    OutputPerturbationLocalize,
    tail_failure_probability,
)
from dpcvx.mechanisms.registry import WorstCasePair

OPL = OutputPerturbationLocalize


def _absolute_1d(z) -> dpcvx.Problem:
    """f(w, z) = |w - z| on W = [-1, 1] (L = 1)."""
    w = cp.Variable(1)
    zp = cp.Parameter()
    return dpcvx.Problem(
        cp.abs(w[0] - zp), w, {zp: np.asarray(z, float)}, dpcvx.domains.box(w, -1.0, 1.0)
    )


def _norm_2d(Z) -> dpcvx.Problem:
    """f(w, z) = ||w - z||_2 on the unit disc (L = 1)."""
    w = cp.Variable(2)
    zp = cp.Parameter(2)
    return dpcvx.Problem(
        cp.norm(w - zp, 2), w, {zp: np.asarray(Z, float)}, dpcvx.domains.l2_ball(w, 1.0)
    )


def _plan(mech, problem, epsilon) -> LocalizationPlan:
    return mech.plan(
        n=problem.n,
        d=problem.d,
        center=problem.domain.center,
        diameter=problem.diameter,
        epsilon=epsilon,
        delta=0.0,
        domain=problem.domain,
    )


# ---------------------------------------------------------------- the plan, from public numbers
def test_plan_matches_the_closed_forms():
    """Delta_F = 2L/(lam n) + 2 sqrt(2 alpha/lam); alpha such that the inflation is 5% of
    2L/(lam n) (floored at 1e-9 (1 + L D)); noise l2-Laplace of scale Delta_F/epsilon;
    xi = log(eps^2 lam R/(d L)), R = D/2; R0 = xi Delta_F d/eps. To machine precision."""
    problem = _norm_2d(np.zeros((30, 2)))
    L, lam, eps, n, d, D = 1.0, 2.0, 8.0, 30, 2, problem.diameter
    plan = _plan(OPL(lipschitz=L, regularization=lam), problem, eps)
    base = 2 * L / (lam * n)
    alpha = max((0.025 * base) ** 2 * lam / 2, 1e-9 * (1 + L * D))
    delta_F = base + 2 * math.sqrt(2 * alpha / lam)
    xi = math.log(eps**2 * lam * (D / 2) / (d * L))
    R0 = xi * delta_F * d / eps
    assert plan.base_sensitivity == pytest.approx(base, rel=1e-15)
    assert plan.accuracy == pytest.approx(alpha, rel=1e-15)
    assert plan.sensitivity.value == pytest.approx(delta_F, rel=1e-15)
    assert plan.sensitivity.value >= delta_F  # rounded toward the safe side
    assert plan.noise.kind == "l2_laplace" and plan.noise.epsilon == eps
    assert plan.noise.scale == pytest.approx(delta_F / eps, rel=1e-15)
    assert plan.xi == pytest.approx(xi, rel=1e-15)
    assert plan.radius == pytest.approx(R0, rel=1e-15) and plan.radius >= R0
    assert plan.guarantee.epsilon == eps and plan.guarantee.delta == 0.0
    facts = plan.facts()
    assert facts["localization_radius"] == plan.radius
    assert facts["failure_probability_bound"] == pytest.approx(min(1, d * math.exp(-xi)))
    assert facts["failure_probability_exact"] == pytest.approx(gamma.sf(xi * d, d), rel=1e-12)
    assert facts["solve_distance"] == pytest.approx(math.sqrt(2 * alpha / lam), rel=1e-15)
    (event,) = plan.events("x")
    assert event.kind == "pure" and event.epsilon == eps and event.delta == 0.0


def test_xi_from_a_public_value_or_a_failure_probability():
    problem = _norm_2d(np.zeros((30, 2)))
    L, lam, eps, n, d = 1.0, 2.0, 1.0, 30, 2
    delta_F = 2 * L / (lam * n) + 2 * math.sqrt(2 * 1e-6 / lam)
    plan = _plan(OPL(lipschitz=L, regularization=lam, xi=0.7, accuracy=1e-6), problem, eps)
    assert plan.radius == pytest.approx(0.7 * delta_F * d / eps, rel=1e-15)
    assert plan.detail["xi_source"] == "public xi"
    beta = 0.01
    plan = _plan(
        OPL(lipschitz=L, regularization=lam, failure_probability=beta, accuracy=1e-6), problem, eps
    )
    assert plan.xi == pytest.approx(math.log(d / beta), rel=1e-15)
    assert plan.radius == pytest.approx(math.log(d / beta) * delta_F * d / eps, rel=1e-15)
    assert plan.detail["failure_probability_bound"] == pytest.approx(beta, rel=1e-12)


@pytest.mark.parametrize("d", [1, 2, 3, 10, 50])
@pytest.mark.parametrize("xi", [0.5, 1.0, 3.0, 8.0])
def test_the_exact_gamma_tail_is_below_the_papers_bound(d, xi):
    """P(Gamma(d, 1) > xi d) <= d e^-xi (a Gamma(d) is a sum of d unit exponentials: union
    bound), for every tabulated d and xi."""
    bound, exact = tail_failure_probability(xi, d)
    assert exact <= bound + 1e-15
    assert bound == min(1.0, d * math.exp(-xi))


@pytest.mark.statistical
@pytest.mark.parametrize("d", [1, 2, 3])
def test_tail_bound_coverage_of_the_release_noise(d):
    """The release's own noise (``perturb`` with the plan's NoiseSpec): the miss rate
    ``P(||z|| > R0)`` matches the exact Gamma tail and is below the paper's ``d e^-xi``.
    20000 seeded draws; two-sided binomial test at level 1e-6 against the exact tail
    (false-failure rate <= 1e-6 per case)."""
    problem = _norm_2d(np.zeros((30, 2))) if d == 2 else None
    lam, eps, N = 1.0, 2.0, 20_000
    mech = OPL(lipschitz=1.0, regularization=lam, failure_probability=0.2)
    plan = mech.plan(n=30, d=d, center=np.zeros(d), diameter=2.0, epsilon=eps, delta=0.0)
    if problem is not None:
        assert plan.radius == _plan(mech, problem, eps).radius
    rng = np.random.default_rng(1234 + d)
    norms = np.array([np.linalg.norm(perturb(np.zeros(d), plan.noise, rng)) for _ in range(N)])
    misses = int(np.sum(norms > plan.radius))
    p_exact = float(gamma.sf(plan.radius / plan.noise.scale, d))
    assert p_exact <= 0.2 + 1e-12  # the paper's bound d e^-xi = beta
    lo, hi = binom.ppf(0.5e-6, N, p_exact), binom.isf(0.5e-6, N, p_exact)
    assert lo <= misses <= hi, (misses, N * p_exact)
    assert misses / N <= 0.2


@pytest.mark.statistical
def test_the_localized_set_covers_the_certified_point():
    """Releases on a real problem: ``||w_loc - w~|| <= R0`` except with probability at most
    ``d e^-xi = 0.25`` (projection onto W is non-expansive). 300 seeded releases; one-sided
    binomial test at level 1e-6 (false-failure rate <= 1e-6)."""
    Z = np.random.default_rng(3).uniform(-0.6, 0.6, size=(25, 2))
    problem = _norm_2d(Z)
    mech = OPL(lipschitz=1.0, regularization=1.0, failure_probability=0.25)
    plan = _plan(mech, problem, 2.0)
    target = problem.solve(regularization=1.0, center=plan.center, accuracy=plan.accuracy).w
    runs, misses = 300, 0
    for seed in range(runs):
        res = problem.solve_private(mech, epsilon=2.0, rng=seed)
        # the certified point is within sqrt(2 alpha/lam) of the minimizer, as is target
        slack = 2 * res.detail["solve_distance"]
        misses += int(np.linalg.norm(res.w - target) > res.detail["localization_radius"] + slack)
    assert misses <= binom.isf(1e-6, runs, 0.25)


# ---------------------------------------------------------------- release
def test_release_is_one_pure_event_with_the_public_radius():
    Z = np.random.default_rng(10).uniform(-0.8, 0.8, size=(30, 2))
    problem = _norm_2d(Z)
    mech = OPL(lipschitz=1.0, regularization=2.0)
    res = problem.solve_private(mech, epsilon=8.0, rng=0)
    plan = _plan(mech, problem, 8.0)
    assert problem.domain.contains(res.w)
    assert res.detail["localization_radius"] == plan.radius
    assert tuple(res.detail["localization_center"]) == tuple(float(v) for v in res.w)
    (cert,) = res.certificates
    assert isinstance(cert, ReleaseCertificate) and cert.accuracy == plan.accuracy
    (event,) = list(res.ledger)
    assert event.epsilon == 8.0 and event.delta == 0.0 and event.kind == "pure"


def test_large_epsilon_centres_the_ball_at_the_minimizer():
    z = np.random.default_rng(5).uniform(-1, 1, 41)
    problem = _absolute_1d(z)
    target = problem.solve(regularization=1.0, center=np.zeros(1)).w
    res = problem.solve_private(OPL(lipschitz=1.0, regularization=1.0), epsilon=500.0, rng=0)
    assert abs(res.w[0] - target[0]) <= res.detail["localization_radius"]
    assert res.detail["localization_radius"] < 2e-3


def test_algorithm_11_runs_algorithm_10_at_half_the_budget():
    """LocalizedExponentialMechanism's stage 1 is this mechanism's plan at epsilon/2 (same
    accuracy, sensitivity, noise, xi, R0) and draws the same w_loc from the same seed."""
    z = np.random.default_rng(7).uniform(-0.5, 0.5, 21)
    problem = _absolute_1d(z)
    eps = 4.0
    lem = LocalizedExponentialMechanism(lipschitz=1.0, regularization=1.0, spacing=0.001)
    lem_plan = lem.plan(
        n=problem.n,
        d=1,
        center=problem.domain.center,
        diameter=problem.diameter,
        epsilon=eps,
        delta=0.0,
        domain=problem.domain,
    )
    # Algorithm 11's default xi uses the whole epsilon: pass it as a public xi here
    alone = OPL(lipschitz=1.0, regularization=1.0, xi=lem_plan.xi)
    plan = _plan(alone, problem, eps / 2)
    loc = lem_plan.localization
    assert isinstance(loc, LocalizationPlan)
    assert loc.accuracy == plan.accuracy and loc.sensitivity == plan.sensitivity
    assert loc.noise == plan.noise and loc.radius == plan.radius
    assert lem_plan.radius == plan.radius and lem_plan.noise == plan.noise
    assert lem_plan.xi == pytest.approx(math.log(eps**2 * 1.0 * 1.0 / (1 * 1.0)), rel=1e-15)
    for seed in range(3):
        a = problem.solve_private(lem, epsilon=eps, rng=seed)
        b = problem.solve_private(alone, epsilon=eps / 2, rng=seed)
        assert a.detail["localization_center"] == pytest.approx(
            b.detail["localization_center"], abs=1e-7
        )


# ---------------------------------------------------------------- audit
@pytest.mark.statistical
def test_audit_on_the_worst_case_pair_and_a_caught_negative_control():
    """The registry's linear pair (x w on [-1, 1], n = 10, last record +1 vs -1: the
    minimizers are exactly 2L/(lam n) apart). 3000 seeded releases per dataset, fixed
    thresholds, Clopper-Pearson at total level 1e-3 (the audit's default): a private
    mechanism exceeds its epsilon with probability <= 1e-3 (the false-failure rate). The
    control (noise for 3 epsilon, charged epsilon) must be caught. Measured: 0.63 and 1.88."""
    pair = build_pair(WorstCasePair(loss="linear", n=10, value=1.0))
    mech = OPL(lipschitz=1.0, regularization=1.0, xi=3.0)
    kwargs = dict(epsilon=1.0, runs=3000, thresholds=(-0.1, 0.0, 0.1), progress=False)
    ok = audit(mech, pair, seed=0, **kwargs)
    assert ok.lower_bound <= 1.0
    control = audit(negative_control(mech, 3.0), pair, seed=1, **kwargs)
    assert control.lower_bound > 1.0


# ---------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"lipschitz": -1.0, "regularization": 1.0}, "lipschitz"),
        ({"lipschitz": 1.0, "regularization": 0.0}, "regularization"),
        ({"lipschitz": 1.0, "regularization": 1.0, "xi": -2.0}, "xi"),
        ({"lipschitz": 1.0, "regularization": 1.0, "failure_probability": 1.0}, "failure_prob"),
        ({"lipschitz": 1.0, "regularization": 1.0, "failure_probability": 0.0}, "failure_prob"),
        (
            {"lipschitz": 1.0, "regularization": 1.0, "xi": 1.0, "failure_probability": 0.1},
            "at most one",
        ),
        ({"lipschitz": 1.0, "regularization": 1.0, "accuracy": math.nan}, "accuracy"),
    ],
)
def test_bad_parameters(kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        OPL(**kwargs)


def test_refusals_spend_nothing():
    problem = _absolute_1d(np.zeros(9))
    acct = dpcvx.Accountant(1.0)
    with pytest.raises(InvalidParameterError, match="delta"):
        problem.solve_private(
            OPL(lipschitz=1.0, regularization=1.0, xi=1.0),
            epsilon=1.0,
            delta=1e-6,
            rng=0,
            accountant=acct,
        )
    # eps = 0.5, lam = 0.1, R = 1, d = 1, L = 1: eps^2 lam R/(d L) = 0.025 < 1, xi < 0
    with pytest.raises(InvalidParameterError, match="xi") as info:
        problem.solve_private(
            OPL(lipschitz=1.0, regularization=0.1), epsilon=0.5, rng=0, accountant=acct
        )
    assert "Nothing was spent" in str(info.value)
    with pytest.raises(InvalidParameterError, match="center"):
        problem.solve_private(
            OPL(lipschitz=1.0, regularization=1.0, xi=1.0, center=[0.0, 0.0]),
            epsilon=1.0,
            rng=0,
            accountant=acct,
        )
    with pytest.raises(InvalidParameterError, match="radius"):
        problem.solve_private(
            OPL(lipschitz=1.0, regularization=1.0, xi=1e308),
            epsilon=1e-3,
            rng=0,
            accountant=acct,
        )
    assert len(acct.ledger) == 0 and acct.spent.epsilon == 0.0
    # a public failure probability makes the refused release possible (utility only)
    res = problem.solve_private(
        OPL(lipschitz=1.0, regularization=0.1, failure_probability=0.1),
        epsilon=0.5,
        rng=0,
        accountant=acct,
    )
    assert res.detail["xi"] == pytest.approx(math.log(10.0)) and len(acct.ledger) == 1
