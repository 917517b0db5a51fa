"""Tests of paper 004's Algorithms 1 and 2 as exact reference implementations
(dpcvx.mechanisms.deletion_output).

Independent answers: the literal Definition 3.2 (``Delta_bar_r f(x_{-S})`` by brute force over
every deleted set) for the stability test; closed forms (the quadratic loss's minimizer is the
clipped mean of user means; the hockey-stick divergence of two Gaussians with a common sigma is
two normal CDFs) for the audits; and numeric quadrature for the divergence. Every audit is
exact (no sampling): the output law of each mechanism on each dataset is computed from the
tested code path's own stability table and the TDLap masses.

Fixture: ``epsilon = 8, delta = 0.05`` gives ``kappa = 3`` (P17: the privacy proof holds for
any epsilon), so ``4 kappa + 2 = 14`` users and 16,383 sub-datasets per dataset.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpcvx.accounting.ledger import Accountant
from dpcvx.errors import DataError, InvalidParameterError
from dpcvx.mechanisms.deletion import deletion_calibration
from dpcvx.mechanisms.deletion_output import (
    DeletionPlan,
    DelOutputPert,
    OutputLaw,
    SCOutputPert,
    _stability_table,
    hockey_stick,
    subset_count,
)
from dpcvx.neighbors import ReplaceOneUser

EPS, DELTA = 8.0, 0.05
N, M = 14, 2


def mean_of_means(items: np.ndarray) -> np.ndarray:
    """The generic f of the Alg 1 tests: the mean of the users' means, clipped to [-40, 40]."""
    return np.array([np.clip(items.mean(axis=1).mean(), -40.0, 40.0)])


def outlier_pair(k: int, value: float, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """``x`` with ``k`` outlying users (all ``m`` items at ``value``) and its neighbour ``x'``
    with ``k - 1`` of them: one user's whole item set replaced (replace-one-user)."""
    base = np.random.default_rng(seed).uniform(-0.1, 0.1, size=(N, M))
    x, xp = base.copy(), base.copy()
    x[N - k :] = value
    xp[N - k + 1 :] = value
    return x, xp


def two_sided(p: OutputLaw, q: OutputLaw, epsilon: float = EPS) -> float:
    return max(hockey_stick(p, q, epsilon), hockey_stick(q, p, epsilon))


def gaussian_law(center: float, sigma: float) -> OutputLaw:
    return OutputLaw(bottom=0.0, weights=(1.0,), centers=np.array([[center]]), sigma=sigma)


BOTTOM = OutputLaw(bottom=1.0, weights=(), centers=np.zeros((0, 0)), sigma=1.0)


# ----------------------------------------------------------------------------- plans
def test_plan_public_numbers_and_event():
    mech = DelOutputPert(function=mean_of_means, target_sensitivity=0.1)
    plan = mech.plan(n=N, m=M, d=1, epsilon=EPS, delta=DELTA)
    cal = deletion_calibration(EPS, DELTA, 0.1)
    assert isinstance(plan, DeletionPlan)
    assert plan.calibration == cal and cal.kappa == 3 and cal.radius == 12
    assert plan.subsets == 2**N - 1 == subset_count(N, 13)
    assert plan.guarantee.neighbors == ReplaceOneUser(M)
    (event,) = plan.events("x")
    assert event.kind == "approx" and (event.epsilon, event.delta) == (EPS, DELTA)
    assert event.neighbors == ReplaceOneUser(M)
    assert plan.facts()["sigma"] == cal.sigma


def test_subset_counts_match_spec():
    # spec C.3 Cost: kappa = 3
    assert [subset_count(n, 13) for n in (14, 16, 20)] == [16_383, 65_399, 988_116]


@pytest.mark.parametrize(
    ("n", "max_subsets"),
    [(13, 10**5), (17, 10**5), (16, 65_398)],
)
@pytest.mark.parametrize("which", ["del", "sc-exhaustive", "sc-certified"])
def test_plan_refuses_before_anything(n, max_subsets, which):
    if which == "del":
        mech = DelOutputPert(
            function=mean_of_means, target_sensitivity=0.1, max_subsets=max_subsets
        )
        call = lambda: mech.plan(n=n, m=M, d=1, epsilon=EPS, delta=DELTA)  # noqa: E731
    else:
        mech = SCOutputPert(
            lower=-1.0,
            upper=1.0,
            target_sensitivity=0.1,
            mode=which.split("-")[1],
            max_subsets=max_subsets,
        )
        call = lambda: mech.plan(n=n, m=M, epsilon=EPS, delta=DELTA)  # noqa: E731
    with pytest.raises(InvalidParameterError, match="Nothing was spent"):
        call()


def test_plan_reads_no_data():
    # plan() has no data argument at all; a function that would fail on any data is never
    # called by plan()
    calls = []
    mech = DelOutputPert(function=lambda a: calls.append(a), target_sensitivity=0.1)
    mech.plan(n=N, m=M, d=1, epsilon=EPS, delta=DELTA)
    assert calls == []
    with pytest.raises(TypeError):
        mech.plan(np.zeros((N, M)), n=N, m=M, d=1, epsilon=EPS, delta=DELTA)  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"target_sensitivity": 0.0},
        {"target_sensitivity": float("nan")},
        {"target_sensitivity": 0.1, "gaussian": "classical"},
        {"target_sensitivity": 0.1, "max_subsets": 0},
        {"target_sensitivity": 0.1, "max_subsets": True},
        {"target_sensitivity": 0.1, "fallback": [np.inf]},
        {"target_sensitivity": 0.1, "function": 3},
    ],
)
def test_bad_parameters_are_typed(kwargs):
    kwargs = {"function": mean_of_means, **kwargs}
    with pytest.raises(InvalidParameterError):
        DelOutputPert(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lower": 1.0, "upper": 1.0},
        {"lower": 0.0, "upper": math.inf},
        {"strong_convexity": -1.0},
        {"failure_probability": 1.0},
        {"target_sensitivity": "paper"},
        {"target_sensitivity": -1.0},
        {"mode": "fast"},
    ],
)
def test_bad_sc_parameters_are_typed(kwargs):
    kwargs = {"lower": -1.0, "upper": 1.0, **kwargs}
    with pytest.raises(InvalidParameterError):
        SCOutputPert(**kwargs)


@pytest.mark.parametrize(
    "budget",
    [
        {"epsilon": 0.0, "delta": 0.05},
        {"epsilon": 8.0, "delta": 0.0},
        {"epsilon": 8.0, "delta": 1.0},
    ],
)
def test_bad_budget_is_typed(budget):
    with pytest.raises(InvalidParameterError):
        SCOutputPert(lower=-1.0, upper=1.0).plan(n=N, m=M, **budget)
    with pytest.raises(InvalidParameterError):
        DelOutputPert(function=mean_of_means, target_sensitivity=0.1).plan(n=N, m=M, d=1, **budget)


@pytest.mark.parametrize("shape", [(N - 1, M), (N, M + 1), (N,), (N, M, 2)])
def test_bad_data_is_typed_and_nothing_is_spent(shape):
    mech = SCOutputPert(lower=-1.0, upper=1.0, target_sensitivity=0.1)
    plan = mech.plan(n=N, m=M, epsilon=EPS, delta=DELTA)
    accountant = Accountant(EPS, DELTA, neighbors=ReplaceOneUser(M))
    with pytest.raises(DataError, match="Nothing was spent"):
        mech.release(plan, np.zeros(shape), rng=0, accountant=accountant)
    assert len(accountant.ledger) == 0 and accountant.spent.epsilon == 0.0


def test_release_records_one_approx_event_and_bottom_is_an_output():
    x, _ = outlier_pair(1, 3.0)
    mech = DelOutputPert(function=mean_of_means, target_sensitivity=0.01)  # bottom surely
    plan = mech.plan(n=N, m=M, d=1, epsilon=EPS, delta=DELTA)
    accountant = Accountant(EPS, DELTA, neighbors=ReplaceOneUser(M))
    out = mech.release(plan, x, rng=3, accountant=accountant)
    assert out.bottom and out.w is None and out.guarantee == plan.guarantee and out.seeded
    (event,) = accountant.ledger
    assert event.kind == "approx" and (event.epsilon, event.delta) == (EPS, DELTA)


# ----------------------------------------------------------------------------- the stability test
def literal_stable_sizes(
    users: np.ndarray, r: int, target: float, f=mean_of_means
) -> dict[tuple[int, ...], bool]:
    """Def 3.2 literally: x_{-S} is stable iff Delta_bar_{r - |S|} f(x_{-S}) <= target, with
    Delta_bar_k g(y) = max_{|T| <= k} max_{i} ||g(y_{-T}) - g(y_{-T-i})||."""
    n = users.shape[0]

    def value(deleted: frozenset) -> np.ndarray:
        return f(users[[i for i in range(n) if i not in deleted]])

    out = {}
    for s in range(r + 1):
        for S in itertools.combinations(range(n), s):
            worst = 0.0
            for t in range(r - s + 1):
                rest = [i for i in range(n) if i not in S]
                for T in itertools.combinations(rest, t):
                    base = frozenset(S) | frozenset(T)
                    for i in rest:
                        if i not in T:
                            d = float(np.linalg.norm(value(base) - value(base | {i})))
                            worst = max(worst, d)
            out[S] = worst <= target
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bad_set_rule_equals_the_definition(seed):
    rng = np.random.default_rng(seed)
    n, r = 7, 2
    users = rng.normal(size=(n, 2))
    users[rng.integers(n)] += 4.0 * rng.standard_normal()
    target = float(rng.uniform(0.1, 0.6))
    table = _stability_table(n, r, lambda kept: mean_of_means(users[list(kept)]))
    literal = literal_stable_sizes(users, r, target)
    for s in range(r + 1):
        own = table.rows(table.masks[s])
        for k, S in zip(own, itertools.combinations(range(n), s)):
            assert (table.M[k] <= target) == literal[S], (S, table.M[k])


# ----------------------------------------------------------------------------- exact audits
def test_hockey_stick_closed_form_and_quadrature_agree():
    sigma = 0.7
    cases = [
        (
            OutputLaw(bottom=0.3, weights=(0.7,), centers=np.array([[0.0]]), sigma=sigma),
            OutputLaw(bottom=0.01, weights=(0.99,), centers=np.array([[1.5]]), sigma=sigma),
        ),
        (gaussian_law(0.0, sigma), gaussian_law(-4.0, sigma)),
        (gaussian_law(2.0, sigma), gaussian_law(2.0, sigma)),
    ]
    for p, q in cases:
        for eps in (0.0, 0.5, 2.0):
            closed = hockey_stick(p, q, eps, method="closed")
            quad = hockey_stick(p, q, eps)
            assert closed == pytest.approx(quad, abs=1e-10)
    # total variation of two unit Gaussians 1 apart: 2 Phi(1/2) - 1
    tv = hockey_stick(gaussian_law(0.0, 1.0), gaussian_law(1.0, 1.0), 0.0)
    assert tv == pytest.approx(math.erf(0.5 / math.sqrt(2.0)), abs=1e-12)
    assert hockey_stick(gaussian_law(0.0, 1.0), BOTTOM, 5.0) == pytest.approx(1.0)


def law_pair(mech, plan, k, value):
    x, xp = outlier_pair(k, value)
    return mech.distribution(plan, x), mech.distribution(plan, xp)


@pytest.mark.parametrize(("k", "target"), [(1, 0.1), (4, 0.3)])
def test_exact_audit_alg1(k, target):
    """Alg 1's exact output laws on neighbours (one user's whole item set replaced by +3s) are
    (epsilon, delta)-close; the divergence is the TDLap end mass Pr[R1 = 0] (k = 1) or 0."""
    mech = DelOutputPert(function=mean_of_means, target_sensitivity=target)
    plan = mech.plan(n=N, m=M, d=1, epsilon=EPS, delta=DELTA)
    p, q = law_pair(mech, plan, k, 3.0)
    assert 0.0 < p.bottom < 1.0  # the stability test matters on x
    h = two_sided(p, q)
    assert h <= DELTA
    if k == 1:
        assert h == pytest.approx(float(plan.calibration.tdlap_pmf[0]), rel=1e-9)
    assert h == pytest.approx(
        max(hockey_stick(p, q, EPS, method="closed"), hockey_stick(q, p, EPS, method="closed")),
        abs=1e-12,
    )


def test_negative_controls_alg1_are_caught():
    # (a) no stability test: f(x) + N(0, sigma(Delta)^2) on the +-30 pair
    target = 0.01
    sigma = deletion_calibration(EPS, DELTA, target).sigma
    x, xp = outlier_pair(1, 30.0)
    xp[N - 1] = -30.0
    no_test = two_sided(
        gaussian_law(float(mean_of_means(x)[0]), sigma),
        gaussian_law(float(mean_of_means(xp)[0]), sigma),
    )
    assert no_test > 0.9 > DELTA
    # (b) a fixed radius R1 = kappa (no TDLap): k = 4 outliers need 4 > kappa deletions on x,
    # 3 <= kappa on x': bottom surely vs release surely
    mech = DelOutputPert(function=mean_of_means, target_sensitivity=0.3)
    plan = mech.plan(n=N, m=M, d=1, epsilon=EPS, delta=DELTA)
    kappa = plan.calibration.kappa
    x, xp = outlier_pair(4, 3.0)
    laws = []
    for data in (x, xp):
        size, center = mech._choose(plan, data)
        assert size is not None
        laws.append(BOTTOM if size > kappa else gaussian_law(float(center[0]), plan.sigma))
    assert two_sided(*laws) == pytest.approx(1.0)
    # while the mechanism itself passes on that pair
    assert two_sided(mech.distribution(plan, x), mech.distribution(plan, xp)) <= DELTA


@pytest.mark.slow
def test_exact_audit_grid_alg2():
    """The full grid of spec C.3 T2 shapes at n = 14 (about 25 s): k = 1..4 outliers at +-3
    and +-30, five Delta values; the worst divergence is Pr[R1 = 0] = 5.9e-6 <= 0.05."""
    worst = 0.0
    for value in (3.0, -30.0):
        for k in (1, 2, 3, 4):
            for target in (0.01, 0.03, 0.1, 0.3, 1.0):
                mech = SCOutputPert(lower=-40.0, upper=40.0, target_sensitivity=target)
                plan = mech.plan(n=N, m=M, epsilon=EPS, delta=DELTA)
                worst = max(worst, two_sided(*law_pair(mech, plan, k, value)))
    assert worst <= DELTA
    assert worst == pytest.approx(5.923191475607668e-06, rel=1e-6)


# ----------------------------------------------------------------------------- Algorithm 2
def easy_users(m: int = 1000, spread: float = 1e-3, seed: int = 0) -> np.ndarray:
    return 0.3 + spread * np.random.default_rng(seed).uniform(-1.0, 1.0, size=(N, m))


def test_certificate_is_sound_and_paths_agree():
    """U + 2 eta bounds the brute-force Delta_bar_{4 kappa} f(x) (= M at S = {}); when it is at
    most Delta, the exhaustive engine picks S = {} and both modes release bit-identical
    outputs from the same seed."""
    passed = []
    for seed, spread in [(0, 1e-4), (1, 1e-3), (2, 0.05), (3, 0.5)]:
        users = easy_users(m=50, spread=spread, seed=seed)
        users[seed] += spread * 3.0
        certified = SCOutputPert(lower=-1.0, upper=1.0, target_sensitivity=0.02, mode="certified")
        exhaustive = SCOutputPert(lower=-1.0, upper=1.0, target_sensitivity=0.02)
        plan = certified.plan(n=N, m=50, epsilon=EPS, delta=DELTA)
        means = certified._user_means(users)
        cert = certified._certificate(plan, means)
        table = _stability_table(
            N,
            plan.calibration.radius,
            lambda kept, mech=certified, u=means: np.array([mech._argmin(u, kept)]),
        )
        brute = float(table.M[table.rows(np.array([0], dtype=np.int64))[0]])
        assert brute <= cert.bound
        passed.append(cert.bound <= plan.target_sensitivity)
        if passed[-1]:
            size, center = exhaustive._choose(plan, means)
            assert size == 0 and center[0] == cert.theta
        for rng in (5, 6):
            a = certified.release(plan, users, rng=rng)
            b = exhaustive.release(plan, users, rng=rng)
            assert a.bottom == b.bottom
            assert (a.w is None and b.w is None) or np.array_equal(a.w, b.w)
    assert passed == [True, False, False, False]  # both branches of the fast path ran


def test_fast_path_without_fallback_is_caught():
    """P2: "certificate passes => release, else bottom" is not private. x: 14 typical users
    (the certificate passes); x': one of them replaced by an outlier (it fails). The control's
    divergence is 1; the real certified mechanism (with the fallback) passes the exact audit."""
    mech = SCOutputPert(lower=-5.0, upper=5.0, target_sensitivity=3.0, mode="certified")
    plan = mech.plan(n=N, m=M, epsilon=EPS, delta=DELTA)
    x, _ = outlier_pair(1, 0.05)
    x[N - 1] = 0.05
    xp = x.copy()
    xp[N - 1] = 3.0
    cx = mech._certificate(plan, mech._user_means(x))
    cp = mech._certificate(plan, mech._user_means(xp))
    assert cx.bound <= plan.target_sensitivity < cp.bound
    control = two_sided(gaussian_law(cx.theta, plan.sigma), BOTTOM)
    assert control == pytest.approx(1.0)
    real = two_sided(mech.distribution(plan, x), mech.distribution(plan, xp))
    assert real <= DELTA


def test_target_sensitivity_rules():
    # erratum 1: the provable Delta carries the union bound; the printed one does not
    mech = SCOutputPert(lower=-1.0, upper=1.0, failure_probability=1e-3)
    G = 2.0
    provable = mech.plan(n=N, m=10**4, epsilon=EPS, delta=DELTA).target_sensitivity
    expected = 5 * 2 * G * math.sqrt(math.log(1e3) + 13 * math.log(N)) / (1 * (N - 13) * 100)
    assert provable == pytest.approx(expected, rel=1e-9)
    printed = SCOutputPert(lower=-1.0, upper=1.0, target_sensitivity="printed").plan(
        n=N, m=10**4, epsilon=EPS, delta=DELTA
    )
    assert printed.target_sensitivity == pytest.approx(
        10 * 2 * G * math.sqrt(math.log(1e3)) / (N * 100), rel=1e-9
    )
    assert printed.target_sensitivity < provable / 10
    # utility only: Delta (hence sigma) falls as 1/sqrt(m)
    quarter = mech.plan(n=N, m=4 * 10**4, epsilon=EPS, delta=DELTA).target_sensitivity
    assert quarter == pytest.approx(provable / 2, rel=1e-9)


@pytest.mark.parametrize("mode", ["exhaustive", "certified"])
def test_utility_on_easy_data(mode):
    """Many items per user, users alike: S = {} is stable for every R1, so the output law is
    exactly N(theta*, sigma^2) (never bottom), and a release is near theta*."""
    users = easy_users()
    theta_star = float(np.clip(users.mean(), -1.0, 1.0))
    mech = SCOutputPert(
        lower=-1.0, upper=1.0, target_sensitivity=1e-3, mode=mode, gaussian="analytic"
    )
    plan = mech.plan(n=N, m=users.shape[1], epsilon=EPS, delta=DELTA)
    law = mech.distribution(plan, users)
    assert law.bottom == 0.0 and law.weights == (1.0,)
    assert law.centers[0, 0] == pytest.approx(theta_star, abs=1e-15)
    assert plan.sigma < 0.025
    for seed in range(5):
        out = mech.release(plan, users, rng=seed)
        assert not out.bottom
        assert abs(out.w[0] - theta_star) <= 5.0 * plan.sigma  # fails w.p. < 3e-6 per draw


def test_function_failures_become_the_public_fallback():
    def fragile(items: np.ndarray) -> np.ndarray:
        if items.shape[0] < 3:
            raise ZeroDivisionError("a data-dependent failure")
        return np.array([items.mean()])

    mech = DelOutputPert(function=fragile, target_sensitivity=1.0, fallback=[0.0])
    plan = mech.plan(n=N, m=M, d=1, epsilon=EPS, delta=DELTA)
    law = mech.distribution(plan, easy_users(m=M))
    assert law.bottom + sum(law.weights) == pytest.approx(1.0)
