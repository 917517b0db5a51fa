"""Strongly convex user-level ERM and SCO (paper 004, Algorithms 5 and 6) with the naive
subroutine.

Independent answers (spec C.6, T1-T2):

- the plan reads only public numbers: ``R'`` against its closed form (erratum 17, Prop B.1),
  the stage-2 regularization against Alg 5 line 6 / erratum 5, the stage-1 sensitivity
  ``2 G/(mu n)`` with ``n`` users (not ``n m`` items: the item-level negative control);
- the ledger: stage 1's event at half the budget plus stage 2's, adding up exactly to at most
  ``(epsilon, delta)``, all under ``ReplaceOneUser(m)``;
- utility on the item loss ``0.5 ||w - x||^2`` (``mu = 1``), whose user-level ERM minimizer
  is the mean of all items ``xbar``: a bound on ``||w - xbar||`` from the recursion of the
  phase minimizers ``(xbar + lam_i c_{i-1})/(1 + lam_i)`` and Gaussian norm tails, with a
  false-failure probability below ``1e-6`` (seeded, so in fact deterministic);
- bad input raises :class:`~dpcvx.InvalidParameterError` before anything is spent.
"""

from __future__ import annotations

import math
from fractions import Fraction

import cvxpy as cp
import numpy as np
import pytest
from scipy.special import gammainccinv

import dpcvx
from dpcvx.errors import InvalidParameterError
from dpcvx.mechanisms.base import exact_share
from dpcvx.mechanisms.strongly_convex_user import (
    StronglyConvexUserERM,
    StronglyConvexUserSCO,
    noise_radius,
)

N, M, D_VAR, RADIUS = 16, 4, 2, 10.0
#: a Lipschitz bound of 0.5||w - x||^2 on the ball for |x| <= 1 (as in test_phased_user.py)
G = 2 * RADIUS + 2.0
MU = 1.0


def _quadratic(seed: int = 0, n: int = N, m: int = M):
    """Users of ``m`` items, item loss ``0.5 ||w - x||^2`` on the ball of radius 10."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n * m, D_VAR)) / math.sqrt(D_VAR) + 0.3
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    w, x = cp.Variable(D_VAR), cp.Parameter(D_VAR)
    problem = dpcvx.UserLevelProblem(
        0.5 * cp.sum_squares(w - x),
        w,
        {x: X},
        dpcvx.domains.l2_ball(w, RADIUS),
        users=np.repeat(np.arange(n), m),
        items_per_user=m,
    )
    return problem, X.reshape(n, m, D_VAR)


def _plan(mech, *, n=N, d=D_VAR, diameter=2 * RADIUS, epsilon=1.0, delta=1e-6):
    return mech.plan(n=n, d=d, center=np.zeros(d), diameter=diameter, epsilon=epsilon, delta=delta)


# ---------------------------------------------------------------- plan: public formulas
@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_erm_plan_follows_the_paper_formulas(delta):
    n, m, d, D, eps = 200, 9, 3, 4.0, 2.0
    mech = StronglyConvexUserERM(lipschitz=1.5, strong_convexity=0.5, items_per_user=m)
    plan = _plan(mech, n=n, d=d, diameter=D, epsilon=eps, delta=delta)
    beta = 1 / (2 * n * n * m)  # L537
    s1 = plan.stage1
    # stage 1: naive SCOutputPert at half the budget, sensitivity 2G/(mu n) with n USERS
    assert (s1.guarantee.epsilon, s1.guarantee.delta) == (eps / 2, delta / 2)
    assert s1.base_sensitivity == pytest.approx(2 * 1.5 / (0.5 * n), rel=1e-15)
    assert s1.regularization == 0.0
    # R' (erratum 17): noise quantile + certified distance
    if delta:
        r_noise = s1.noise.scale * (math.sqrt(d) + math.sqrt(2 * math.log(1 / beta)))
    else:  # ||b|| ~ Gamma(d, scale)
        r_noise = s1.noise.scale * float(gammainccinv(d, beta))
    r_acc = math.sqrt(2 * s1.accuracy / 0.5)
    assert plan.radius == pytest.approx(r_noise + r_acc, rel=1e-9)
    assert plan.radius >= r_noise + r_acc
    # Alg 5 line 6 (L532) and stage 2 on K' (diameter min(D, 2R')) at the other half
    lam = 1.5 * math.sqrt(d) / (plan.radius * n * math.sqrt(m))
    assert plan.facts()["regularization"] == pytest.approx(lam, rel=1e-15)
    assert plan.stage2.phases[0].regularization == pytest.approx(4 * lam, rel=1e-14)
    assert plan.stage2.diameter == min(D, 2 * plan.radius)
    assert plan.stage2.guarantee.epsilon == eps / 2
    assert plan.facts()["failure_probability"] == beta


def test_sco_plan_adds_the_population_radius_and_erratum_5():
    n, m, d, D = 300, 16, 5, 2.0
    mech = StronglyConvexUserSCO(lipschitz=2.0, strong_convexity=4.0, items_per_user=m)
    plan = _plan(mech, n=n, d=d, diameter=D)
    beta = 1 / (2 * n * n * m)
    r_noise, r_acc, r_pop = plan.radius_terms
    assert r_pop == pytest.approx(30 * 2.0 * math.sqrt(math.log(2 / beta)) / (4 * math.sqrt(n * m)))
    assert r_noise == noise_radius(plan.stage1.noise, d, beta)
    assert plan.radius == pytest.approx(r_noise + r_acc + r_pop, rel=1e-12)
    c_sigma = plan.stage2.detail["noise_constant"]
    lam = (2.0 / plan.radius) * max(
        1 / math.sqrt(n * m), c_sigma * math.sqrt(d) / (n * math.sqrt(m))
    )
    assert plan.stage2_regularization == pytest.approx(lam, rel=1e-15)
    assert plan.stage2.composition == "parallel"


def test_noise_radius_is_a_quantile_bound():
    rng = np.random.default_rng(5)
    spec = dpcvx.mechanisms.noise.calibrate(1.0, 1.0, 1e-6)
    r = noise_radius(spec, 3, 1e-3)
    draws = np.linalg.norm(rng.normal(0, spec.scale, size=(20000, 3)), axis=1)
    # Pr[||b|| > r] <= 1e-3: at most 20 expected exceedances; 60 has probability < 1e-15
    assert np.sum(draws > r) <= 60


# ---------------------------------------------------------------- ledger
@pytest.mark.parametrize(
    "mech_cls, delta", [(StronglyConvexUserERM, 1e-6), (StronglyConvexUserSCO, 0.0)]
)
def test_events_add_up_to_the_budget_under_replace_one_user(mech_cls, delta):
    problem, _ = _quadratic()
    mech = mech_cls(lipschitz=G, strong_convexity=MU, items_per_user=M, progress=False)
    relation = dpcvx.ReplaceOneUser(M)
    acc = dpcvx.Accountant(1.0, delta, neighbors=relation)
    res = problem.solve_private(mech, epsilon=1.0, delta=delta, accountant=acc, rng=0)
    events = acc.ledger.events
    stage2 = res.detail["phases"] if mech_cls is StronglyConvexUserERM else 1
    assert len(events) == 1 + stage2
    assert (events[0].epsilon, events[0].delta) == (exact_share(1.0, 2), exact_share(delta, 2))
    assert sum(Fraction(e.epsilon) for e in events) <= 1
    assert sum(Fraction(e.delta) for e in events) <= Fraction(delta)
    assert 1.0 - sum(e.epsilon for e in events) < 1e-12
    assert {e.neighbors for e in events} == {relation} and res.neighbors == relation
    assert res.detail["mechanism"] == mech_cls.__name__
    assert len(res.certificates) == 1 + res.detail["phases"]


# ---------------------------------------------------------------- utility (statistical)
@pytest.mark.slow  # ~20-75 s on the shared cores (6 certified localized phase solves)
@pytest.mark.statistical
def test_erm_utility_against_the_closed_form_minimizer():
    """``c_0`` is within ``R'`` of ``xbar`` with probability ``>= 1 - beta``; then ``xbar`` is
    in ``K'``, every phase minimizer is ``(xbar + lam_i c_{i-1})/(1 + lam_i)`` (a convex
    combination of points of ``K'``), and projection onto ``K'`` is non-expansive toward
    ``xbar``, so ``e_i <= min(lam_i/(1+lam_i) e_{i-1} + sqrt(2 alpha_i/lam_i) + ||b_i||, 2 R')``.
    With
    ``beta = 1e-7`` and each of the ``T`` Gaussian norms below its ``1 - 1e-7`` quantile, the
    bound fails with probability at most ``(T + 1) 1e-7 < 1e-6``."""
    problem, X = _quadratic(seed=3)
    xbar = X.reshape(-1, D_VAR).mean(axis=0)
    mech = StronglyConvexUserERM(
        lipschitz=G,
        strong_convexity=MU,
        items_per_user=M,
        failure_probability=1e-7,
        progress=False,
    )
    eps, delta = 100.0, 1e-6
    res = problem.solve_private(mech, epsilon=eps, delta=delta, rng=11)
    plan = _plan(mech, epsilon=eps, delta=delta)
    c0 = res.detail["stage1_output"]
    assert np.linalg.norm(c0 - xbar) <= plan.radius  # coverage (prob >= 1 - 1e-7)
    e = plan.radius
    outputs = res.detail["phase_outputs"]
    for phase, out in zip(plan.stage2.phases, outputs):
        lam_i = phase.regularization
        tail = noise_radius(phase.noise, D_VAR, 1e-7)
        step = lam_i / (1 + lam_i) * e + math.sqrt(2 * phase.accuracy / lam_i) + tail
        e = min(step, 2 * plan.radius)  # c_i and xbar both lie in K' (diameter <= 2 R')
        assert np.linalg.norm(out - c0) <= plan.radius * (1 + 1e-9)  # every output in K'
        assert np.linalg.norm(out - xbar) <= e
    assert np.array_equal(res.w, outputs[-1])
    # the bound has teeth: the localization keeps it well below the domain's diameter
    assert e < 0.35 * 2 * RADIUS
    # excess empirical risk of 0.5||w - x||^2 is 0.5 ||w - xbar||^2
    assert 0.5 * np.linalg.norm(res.w - xbar) ** 2 <= 0.5 * e**2


def test_sco_runs_on_batches_inside_the_localized_domain():
    problem, _ = _quadratic(seed=4)
    mech = StronglyConvexUserSCO(
        lipschitz=G, strong_convexity=MU, items_per_user=M, shuffle=False, progress=False
    )
    res = problem.solve_private(mech, epsilon=5.0, delta=1e-6, rng=2)
    c0, R = res.detail["stage1_output"], res.detail["localization_radius"]
    assert res.detail["localized_domain"] is (R < 2 * RADIUS)
    for out in res.detail["phase_outputs"]:
        assert np.linalg.norm(out) <= RADIUS
        if res.detail["localized_domain"]:
            assert np.linalg.norm(out - c0) <= R * (1 + 1e-9)


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"strong_convexity": 0.0}, "strong_convexity"),
        ({"lipschitz": -1.0}, "lipschitz"),
        ({"subroutine": "deletion"}, "StronglyConvexUser"),
        ({"items_per_user": 0}, "items_per_user"),
        ({"failure_probability": 1.0}, "failure_probability"),
        ({"move_tolerance": 1.0}, "move_tolerance"),
        ({"progress": "no"}, "progress"),
    ],
)
@pytest.mark.parametrize("mech_cls", [StronglyConvexUserERM, StronglyConvexUserSCO])
def test_bad_parameters_raise(mech_cls, kwargs, match):
    args = {"lipschitz": 1.0, "strong_convexity": 1.0, "items_per_user": 3, **kwargs}
    with pytest.raises(InvalidParameterError, match=match):
        mech_cls(**args)


def test_sco_needs_beta_below_one_over_e_and_valid_batching():
    with pytest.raises(InvalidParameterError, match="1/e"):
        StronglyConvexUserSCO(lipschitz=1.0, strong_convexity=1.0, failure_probability=0.5)
    with pytest.raises(InvalidParameterError, match="batching"):
        StronglyConvexUserSCO(lipschitz=1.0, strong_convexity=1.0, batching="thirds")


@pytest.mark.parametrize(
    "mech, request_, match",
    [
        (StronglyConvexUserERM(lipschitz=1.0, strong_convexity=1.0), {}, "items_per_user"),
        (
            StronglyConvexUserERM(lipschitz=1.0, strong_convexity=1.0, items_per_user=3),
            {"delta": 1.0},
            "delta",
        ),
        (
            StronglyConvexUserSCO(lipschitz=1.0, strong_convexity=1.0, items_per_user=3),
            {"epsilon": 0.0},
            "epsilon",
        ),
        (
            StronglyConvexUserERM(lipschitz=1.0, strong_convexity=1.0, items_per_user=3),
            {"diameter": math.inf},
            "diameter",
        ),
        (
            StronglyConvexUserSCO(
                lipschitz=1.0, strong_convexity=1.0, items_per_user=100, move_tolerance=0.0
            ),
            {"n": 3},
            "n >= ",
        ),
    ],
)
def test_bad_requests_raise_in_the_plan(mech, request_, match):
    with pytest.raises(InvalidParameterError, match=match):
        _plan(mech, **request_)


def test_bad_input_spends_nothing():
    problem, _ = _quadratic()
    acc = dpcvx.Accountant(10.0, 1e-3, neighbors=dpcvx.ReplaceOneUser(M))
    for mech, delta in [
        (StronglyConvexUserERM(lipschitz=G, strong_convexity=MU), 0.0),  # no m
        (StronglyConvexUserSCO(lipschitz=G, strong_convexity=MU, items_per_user=M), 1.0),
        # a strong-convexity claim above what dpcvx verifies (1 for 0.5||w - x||^2)
        (StronglyConvexUserERM(lipschitz=G, strong_convexity=2.0, items_per_user=M), 0.0),
    ]:
        with pytest.raises(InvalidParameterError):
            problem.solve_private(mech, epsilon=1.0, delta=delta, accountant=acc, rng=0)
    assert len(acc.ledger) == 0
