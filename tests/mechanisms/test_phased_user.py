"""Phased user-level ERM and SCO (paper 004, Algorithms 3 and 4) with the naive subroutine.

Independent answers (spec C.5, T1-T2):

- composition: the ledger's events against exact rational sums (Phased-ERM: ``T_eff`` events
  summing to at most ``(epsilon, delta)``, within a few ulps of it; Phased-SCO: one event), all
  or nothing, and nothing solved when the budget is short;
- structure: the item loss ``0.5 ||w - x||^2`` on a large ball, whose phase minimizer has the
  closed form ``(xbar + lam_i c_{i-1}) / (1 + lam_i)`` (``xbar`` the mean over the phase's
  users' items): every certified phase solve (recorded by a test-only wrapper around the
  subroutine) is within its certified distance of it, its center is the previous released
  output, and the ball ``B(c_{i-1}, G/lam_i)`` is inactive;
- the default regularization, phase counts, sensitivities and noise against the paper's
  formulas (the analytic Gaussian recomputed with scipy from Balle and Wang's equation);
- bad input raises :class:`~dpcvx.InvalidParameterError` before anything is spent.

The privacy audits of the worst-case user pair and their negative controls run from the
registry (``dpcvx audit phased-user-erm``, ``tests/test_contract.py``).
"""

from __future__ import annotations

import math
from fractions import Fraction

import cvxpy as cp
import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

import dpcvx
from dpcvx.errors import InvalidParameterError, PrivacyBudgetError
from dpcvx.mechanisms import phased_user
from dpcvx.mechanisms.base import exact_share
from dpcvx.mechanisms.phased_user import PhasedUserERM, PhasedUserSCO, phase_batches
from dpcvx.problem import ReleaseContext

N, M, D_VAR, RADIUS = 16, 4, 2, 10.0
#: a Lipschitz bound of 0.5||w - x||^2 on the ball for |x| <= 1 (the true one is 11), with room
#: for dpcvx's structural bound (2 * RADIUS + |x|), so the claim is verified, not extended
G = 2 * RADIUS + 2.0


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


def _plan(mech, *, n=N, d=D_VAR, diameter=2 * RADIUS, epsilon=1.0, delta=0.0):
    return mech.plan(n=n, d=d, center=np.zeros(d), diameter=diameter, epsilon=epsilon, delta=delta)


@pytest.fixture
def recorded(monkeypatch):
    """Every certified phase solve: ``(lam, w0, alpha, localize, w, gap)`` (test-only)."""
    log: list = []
    naive = phased_user._ROUTES["naive"]

    def route(phase, solve, center, localize, rng, domain):
        def spy(lam, w0, alpha, localize=None):
            cert = solve(lam, w0, alpha, localize=localize)
            log.append((lam, np.array(w0), alpha, localize, np.array(cert.w), cert.gap))
            return cert

        return naive(phase, spy, center, localize, rng, domain)

    monkeypatch.setitem(phased_user._ROUTES, "naive", route)
    return log


# ---------------------------------------------------------------- T1: composition
@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_erm_events_are_exact_shares_summing_to_the_budget(delta):
    epsilon = 1.0
    mech = PhasedUserERM(lipschitz=1.0, items_per_user=5, move_tolerance=0.0)
    plan = _plan(mech, n=100, d=3, diameter=2.0, epsilon=epsilon, delta=delta)
    T = math.ceil(math.log2(100 * 5))
    assert len(plan.phases) == T == 9
    events = plan.events("PhasedUserERM(n=100, d=3)")
    assert len(events) == T
    share = exact_share(epsilon, T)
    assert all(e.epsilon == share for e in events)
    total_eps = sum(Fraction(e.epsilon) for e in events)
    assert total_eps <= Fraction(epsilon) and epsilon - float(total_eps) < 1e-15
    total_delta = sum(Fraction(e.delta) for e in events)
    assert total_delta <= Fraction(delta) and delta - float(total_delta) < 1e-20
    if delta:
        assert {e.kind for e in events} == {"gaussian"}
        assert all(e.noise_multiplier > 0 for e in events)
    else:
        assert {e.kind for e in events} == {"pure"}
    # an accountant holding exactly (epsilon, delta) takes them all
    dpcvx.Accountant(epsilon, delta).reserve_all(events)


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_sco_is_one_event_at_the_full_budget(delta):
    mech = PhasedUserSCO(lipschitz=1.0, items_per_user=5, move_tolerance=0.0)
    plan = _plan(mech, n=100, d=3, diameter=2.0, delta=delta)
    assert len(plan.phases) == 9
    (event,) = plan.events("PhasedUserSCO")
    assert (event.epsilon, event.delta) == (1.0, delta)
    assert event.kind == ("gaussian" if delta else "pure")
    assert all((p.epsilon, p.delta) == (1.0, delta) for p in plan.phases)
    if delta:  # the weakest phase's multiplier (they are all equal up to rounding)
        multipliers = [p.noise.noise_multiplier for p in plan.phases]
        assert event.noise_multiplier == min(multipliers)
        assert max(multipliers) / min(multipliers) < 1 + 1e-9


@pytest.mark.parametrize("mech_cls", [PhasedUserERM, PhasedUserSCO])
def test_an_unaffordable_release_spends_and_solves_nothing(mech_cls, monkeypatch):
    problem, _ = _quadratic()
    calls: list = []
    solver = ReleaseContext.solver

    def counting(self, *args, **kwargs):
        calls.append(1)
        return solver(self, *args, **kwargs)

    monkeypatch.setattr(ReleaseContext, "solver", counting)
    mech = mech_cls(lipschitz=G, items_per_user=M, progress=False)
    relation = dpcvx.ReplaceOneUser(M)
    # pure ERM: room for half of the phases but not all (all or nothing); Gaussian: the ledger
    # also composes Gaussian events exactly (PLD), so a budget far below their sum
    for budget, delta in [(0.5, 0.0), (0.1, 1e-6)]:
        acc = dpcvx.Accountant(budget, delta, neighbors=relation)
        with pytest.raises(PrivacyBudgetError):
            problem.solve_private(mech, epsilon=1.0, delta=delta, accountant=acc, rng=0)
        assert len(acc.ledger) == 0 and calls == []
    acc = dpcvx.Accountant(1.0, 1e-6, neighbors=relation)
    res = problem.solve_private(mech, epsilon=1.0, delta=1e-6, accountant=acc, rng=0)
    assert calls and len(acc.ledger) == (res.detail["phases"] if mech_cls is PhasedUserERM else 1)
    assert res.neighbors == relation and {e.neighbors for e in acc.ledger.events} == {relation}


# ---------------------------------------------------------------- T2: structure
def test_erm_phases_match_the_closed_form_and_the_ball_is_inactive(recorded):
    problem, X = _quadratic()
    xbar = X.reshape(-1, D_VAR).mean(axis=0)
    start = np.array([14.0, -14.0])  # public, outside the ball: c_0 is its projection
    mech = PhasedUserERM(
        lipschitz=G, items_per_user=M, initial_point=start, accuracy=1e-9, progress=False
    )
    res = problem.solve_private(mech, epsilon=1e4, rng=1)
    T = res.detail["phases"]
    assert T == math.ceil(math.log2(N * M)) == 6 and len(recorded) == T
    outputs = res.detail["phase_outputs"]
    assert np.array_equal(res.w, outputs[-1]) and res.detail["bottom_phases"] == ()
    c0 = start * RADIUS / np.linalg.norm(start)  # c_0 = Pi_K(theta_0) (erratum 3, P5)
    np.testing.assert_allclose(recorded[0][1], c0, rtol=0, atol=1e-12)
    assert all(np.linalg.norm(c) <= RADIUS for c in outputs)  # every center is in K
    centers = (recorded[0][1],) + outputs[:-1]
    lam = G * math.sqrt(D_VAR) / (2 * RADIUS * N * math.sqrt(M))
    for i, ((lam_i, w0, alpha, localize, w, gap), c, cert) in enumerate(
        zip(recorded, centers, res.certificates), start=1
    ):
        assert lam_i == pytest.approx(lam * 4.0**i, rel=1e-12)
        np.testing.assert_array_equal(w0, c)  # regularized toward the previous release
        exact = (xbar + lam_i * c) / (1.0 + lam_i)
        assert np.linalg.norm(w - exact) <= math.sqrt(2 * alpha / lam_i) + 1e-12
        assert gap <= alpha == 1e-9
        # the ball B(c_{i-1}, G/lam_i) is inactive at the exact minimizer
        assert np.linalg.norm(exact - c) <= G / lam_i
        if G / lam_i >= 2 * RADIUS:
            assert localize is None  # the ball covers K: K_i = K
        else:
            np.testing.assert_array_equal(localize[0], c)
            assert localize[1] == pytest.approx(G / lam_i)
        # the released facts say the same: public certificate and (nearly noiseless) output
        np.testing.assert_array_equal(cert.center, c)
        assert cert.regularization == lam_i and cert.accuracy == alpha
        assert cert.distance_bound == pytest.approx(math.sqrt(2 * alpha / lam_i))
        # l2-Laplace noise: its norm is Gamma(2, scale), above 30 scale with probability < 1e-11
        noise = res.detail["noise_scales"][i - 1]
        assert np.linalg.norm(outputs[i - 1] - exact) <= cert.distance_bound + 30 * noise
    assert any(loc is not None for *_, loc, _, _ in recorded)  # later phases localize


def test_sco_phases_solve_their_own_batch(recorded):
    problem, X = _quadratic(seed=2)
    mech = PhasedUserSCO(
        lipschitz=G, items_per_user=M, accuracy=1e-9, shuffle=False, progress=False
    )
    res = problem.solve_private(mech, epsilon=1e4, delta=1e-6, rng=3)
    T = res.detail["phases"]
    assert T == 6 and res.detail["batches"] == phase_batches(N, T, "equal")
    centers = (np.zeros(D_VAR),) + res.detail["phase_outputs"][:-1]
    for (lam_i, w0, alpha, _, w, _), c, (lo, hi) in zip(recorded, centers, res.detail["batches"]):
        np.testing.assert_array_equal(w0, c)
        xbar = X[lo:hi].reshape(-1, D_VAR).mean(axis=0)  # the batch's users only
        exact = (xbar + lam_i * c) / (1.0 + lam_i)
        assert np.linalg.norm(w - exact) <= math.sqrt(2 * alpha / lam_i) + 1e-12
        assert np.linalg.norm(exact - c) <= G / lam_i


def test_bottom_maps_to_the_previous_center(monkeypatch):
    problem, _ = _quadratic()
    naive = phased_user._ROUTES["naive"]

    def sometimes_bottom(phase, solve, center, localize, rng, domain):
        point, public = naive(phase, solve, center, localize, rng, domain)
        return (None if phase.index == 2 else point), public

    monkeypatch.setitem(phased_user._ROUTES, "naive", sometimes_bottom)
    mech = PhasedUserERM(lipschitz=G, items_per_user=M, progress=False)
    res = problem.solve_private(mech, epsilon=1.0, rng=0)
    out = res.detail["phase_outputs"]
    assert res.detail["bottom_phases"] == (2,)
    np.testing.assert_array_equal(out[1], out[0])
    assert not np.array_equal(out[2], out[1])


def test_batches_are_disjoint_and_phase_one_takes_the_top():
    assert phase_batches(10, 3, "equal") == ((7, 10), (4, 7), (1, 4))
    assert phase_batches(10, 4, "halving") == ((5, 10), (2, 5), (1, 2), (0, 1))
    for n, T, kind in [(100, 9, "equal"), (100, 7, "halving"), (37, 6, "halving")]:
        used = np.concatenate([np.arange(a, b) for a, b in phase_batches(n, T, kind)])
        assert len(used) == len(set(used.tolist())) and used.min() >= 0 and used.max() < n
    problem, _ = _quadratic()
    mech = PhasedUserSCO(lipschitz=G, items_per_user=M, batching="halving", progress=False)
    res = problem.solve_private(mech, epsilon=1.0, rng=0)
    assert res.detail["phases_paper"] == math.ceil(math.log2(N)) == 4
    assert res.detail["batch_sizes"] == (8, 4, 2, 1)


# ---------------------------------------------------------------- plan against formulas
def _analytic_sigma(epsilon: float, delta: float) -> float:
    """Balle and Wang (2018), Thm 8, for sensitivity 1: the smallest sigma with
    Phi(1/(2s) - eps s) - e^eps Phi(-1/(2s) - eps s) <= delta."""

    def excess(s):
        return (
            norm.cdf(0.5 / s - epsilon * s)
            - math.exp(epsilon) * norm.cdf(-0.5 / s - epsilon * s)
            - delta
        )

    return brentq(excess, 1e-3, 1e3, xtol=1e-14)


def test_erm_plan_follows_the_paper_formulas():
    n, m, d, D, eps = 200, 9, 4, 3.0, 2.0
    mech = PhasedUserERM(lipschitz=1.5, items_per_user=m)
    plan = _plan(mech, n=n, d=d, diameter=D, epsilon=eps)
    facts = plan.facts()
    lam = 1.5 * math.sqrt(d) / (D * n * math.sqrt(m))  # 004 L331
    assert facts["regularization"] == pytest.approx(lam, rel=1e-15)
    assert facts["phases_paper"] == math.ceil(math.log2(n * m)) == 11
    assert facts["failure_probability"] == pytest.approx(1 / (n * m))
    share = exact_share(eps, len(plan.phases))
    for i, p in enumerate(plan.phases, start=1):
        lam_i = lam * 4.0**i
        assert p.regularization == pytest.approx(lam_i, rel=1e-14)
        assert p.radius == pytest.approx(1.5 / lam_i, rel=1e-14)
        delta_i = 2 * 1.5 / (lam_i * n) + 2 * math.sqrt(2 * p.accuracy / lam_i)
        assert p.sensitivity.value >= delta_i and p.sensitivity.value == pytest.approx(delta_i)
        assert p.base_sensitivity == pytest.approx(2 * 1.5 / (lam_i * n))
        assert p.sensitivity.value <= 1.05 * p.base_sensitivity * (1 + 1e-12) or p.accuracy > 0
        assert p.noise.kind == "l2_laplace" and p.epsilon == share
        assert p.noise.scale >= p.sensitivity.value / share
    # T_eff: the last phase whose reach G/lam_i is at least move_tolerance * D
    truncated = _plan(
        PhasedUserERM(lipschitz=1.5, items_per_user=m, move_tolerance=1e-2),
        n=n,
        d=d,
        diameter=D,
        epsilon=eps,
    )
    reach = [1.5 / (lam * 4.0**i) for i in range(1, 12)]
    assert len(truncated.phases) == max(i + 1 for i, r in enumerate(reach) if r >= 1e-2 * D)
    assert len(truncated.phases) < 11
    assert len(truncated.events("x")) == len(truncated.phases)


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_sco_default_regularization_follows_erratum_5(delta):
    n, m, d, D, eps, Gs = 300, 16, 5, 2.0, 1.0, 2.0
    plan = _plan(PhasedUserSCO(lipschitz=Gs, items_per_user=m), n=n, d=d, diameter=D, delta=delta)
    T = math.ceil(math.log2(n * m))
    nb = n // T
    # the per-coordinate RMS of the naive route's noise for sensitivity 1
    rms = _analytic_sigma(eps, delta) if delta else math.sqrt(d + 1) / eps
    c_sigma = rms * (n / nb) * math.sqrt(m)
    lam = (Gs / D) * max(1 / math.sqrt(n * m), c_sigma * math.sqrt(d) / (n * math.sqrt(m)))
    assert plan.facts()["regularization"] == pytest.approx(lam, rel=1e-6)
    assert plan.facts()["noise_constant"] == pytest.approx(c_sigma, rel=1e-6)
    for p in plan.phases:
        if delta:
            sigma = _analytic_sigma(eps, delta) * p.sensitivity.value
            assert p.noise.kind == "gaussian" and p.noise.scale == pytest.approx(sigma, rel=1e-6)
        nb_i = p.batch[1] - p.batch[0]
        assert p.users == nb_i == n // len(plan.phases)
        assert p.base_sensitivity == pytest.approx(2 * Gs / (p.regularization * nb_i))


def test_explicit_regularization_and_items_affect_only_the_plan_numbers():
    kw = {"lipschitz": 1.0, "regularization": 0.5, "move_tolerance": 0.0}
    a = _plan(PhasedUserERM(items_per_user=4, **kw), n=50)
    b = _plan(PhasedUserERM(items_per_user=400, **kw), n=50)
    assert a.phases[0].regularization == b.phases[0].regularization == 2.0
    assert len(b.phases) > len(a.phases)  # T = ceil(log2(n m)) grows with m


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"subroutine": "deletion"}, "reference implementation"),
        ({"subroutine": "auto"}, "reference implementation"),
        ({"items_per_user": 0}, "items_per_user"),
        ({"items_per_user": True}, "items_per_user"),
        ({"items_per_user": 2.5}, "items_per_user"),
        ({"lipschitz": 0.0}, "lipschitz"),
        ({"regularization": -1.0}, "regularization"),
        ({"failure_probability": 1.0}, "failure_probability"),
        ({"failure_probability": 0.0}, "failure_probability"),
        ({"move_tolerance": 1.0}, "move_tolerance"),
        ({"accuracy": 0.0}, "accuracy"),
        ({"initial_point": [np.nan, 0.0]}, "center"),
        ({"progress": "yes"}, "progress"),
    ],
)
@pytest.mark.parametrize("mech_cls", [PhasedUserERM, PhasedUserSCO])
def test_bad_parameters_raise(mech_cls, kwargs, match):
    args = {"lipschitz": 1.0, "items_per_user": 3, **kwargs}
    with pytest.raises(InvalidParameterError, match=match):
        mech_cls(**args)


def test_bad_sco_parameters_raise():
    with pytest.raises(InvalidParameterError, match="batching"):
        PhasedUserSCO(lipschitz=1.0, items_per_user=3, batching="thirds")
    with pytest.raises(InvalidParameterError, match="shuffle"):
        PhasedUserSCO(lipschitz=1.0, items_per_user=3, shuffle=1)


@pytest.mark.parametrize(
    "mech, request_, match",
    [
        (PhasedUserERM(lipschitz=1.0), {}, "items_per_user"),
        (PhasedUserSCO(lipschitz=1.0), {}, "items_per_user"),
        (PhasedUserERM(lipschitz=1.0, items_per_user=3), {"delta": 1.0}, "delta"),
        (PhasedUserSCO(lipschitz=1.0, items_per_user=3), {"delta": -0.1}, "delta"),
        (PhasedUserERM(lipschitz=1.0, items_per_user=3), {"epsilon": 0.0}, "epsilon"),
        (PhasedUserERM(lipschitz=1.0, items_per_user=3, initial_point=[0.0]), {}, "shape"),
        (PhasedUserERM(lipschitz=1.0, items_per_user=3), {"diameter": math.inf}, "diameter"),
        # 3 users of 100 items: T = 9 equal batches need 9 users
        (
            PhasedUserSCO(lipschitz=1.0, items_per_user=100, move_tolerance=0.0),
            {"n": 3},
            "n >= 9",
        ),
        (PhasedUserSCO(lipschitz=1.0, items_per_user=3, batching="halving"), {"n": 1}, "2 users"),
    ],
)
def test_bad_requests_raise_in_the_plan(mech, request_, match):
    with pytest.raises(InvalidParameterError, match=match):
        _plan(mech, **request_)


def test_bad_input_spends_nothing():
    problem, _ = _quadratic()
    acc = dpcvx.Accountant(10.0, 1e-3, neighbors=dpcvx.ReplaceOneUser(M))
    for mech, delta in [
        (PhasedUserERM(lipschitz=G), 0.0),  # no items_per_user
        (PhasedUserSCO(lipschitz=G, items_per_user=M), 1.0),
    ]:
        with pytest.raises(InvalidParameterError):
            problem.solve_private(mech, epsilon=1.0, delta=delta, accountant=acc, rng=0)
    assert len(acc.ledger) == 0
