"""Iterative and growth-adaptive localization (paper 001, Algorithms 1 and 2): public plan,
certified sensitivity, partition, ledger, bad input, utility trend and an empirical audit."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import cvxpy as cp
import numpy as np
import pytest
from scipy.stats import binom

import dpcvx
from dpcvx.errors import InvalidParameterError, PrivacyBudgetError
from dpcvx.mechanisms.iterative_localization import (
    GrowthAdaptiveLocalization,
    IterativeLocalization,
    certified_sensitivity,
    epoch_count,
)
from dpcvx.mechanisms.noise import gaussian_delta
from dpcvx.mechanisms.output_perturbation import ACCURACY_FLOOR


def _linear_problem(X: np.ndarray) -> dpcvx.Problem:
    """The loss ``x w`` on ``W = [-1, 1]`` (1-Lipschitz for ``|x| <= 1``)."""
    w = cp.Variable(1)
    x = cp.Parameter(1)
    return dpcvx.Problem(x @ w, w, {x: X.reshape(-1, 1)}, dpcvx.domains.box(w, -1.0, 1.0))


def _hinge_problem(n: int = 200, d: int = 2, seed: int = 0) -> dpcvx.Problem:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))  # ||x|| <= 1: L = 1
    Y = np.sign(X @ np.ones(d) + 0.3 * rng.normal(size=n))
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    return dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, {x: X, y: Y}, [cp.norm(w, 2) <= 1])


def _squares_problem(n: int, seed: int):
    """kappa = 2 growth with a closed form: f(w) = E 0.5 ||w - z||^2 is minimized at mu = E z and
    f(w) - f* = 0.5 ||w - mu||^2 (lambda = 1, kappa = 2); ||w - z|| <= 1 + 0.79 on the unit
    ball, so L = 2."""
    rng = np.random.default_rng(seed)
    mu = np.array([0.3, -0.2])
    Z = mu + rng.uniform(-0.3, 0.3, size=(n, 2))
    w = cp.Variable(2)
    z = cp.Parameter(2)
    problem = dpcvx.Problem(0.5 * cp.sum_squares(w - z), w, {z: Z}, [cp.norm(w, 2) <= 1])
    return problem, mu


def _il(**kw):
    kw.setdefault("lipschitz", 1.0)
    kw.setdefault("progress", False)
    return IterativeLocalization(**kw)


def _ga(**kw):
    kw.setdefault("lipschitz", 1.0)
    kw.setdefault("progress", False)
    return GrowthAdaptiveLocalization(**kw)


# ---------------------------------------------------------------- public plan (Alg 1)
def test_plan_matches_the_spec_regression_values():
    """Spec B.1 T2: n = 1e4, d = 5, eps = 1, beta = 1e-5, D = 2, L = 1 (natural logs)."""
    n, d, D, L = 10_000, 5, 2.0, 1.0
    mech = _il(failure_probability=1e-5)
    plan = mech.plan(n=n, d=d, center=np.zeros(d), diameter=D, epsilon=1.0, delta=0.0)
    f = plan.facts()
    assert f["rounds_paper"] == 10 and f["batch_size"] == 1000
    assert f["step_size"] == pytest.approx(5.8944e-3, rel=1e-4)
    lams = (5.429, 86.86, 1390.0, 2.224e4, 3.558e5)
    assert f["rounds_run"] == 5  # move_tolerance 1e-6: M_5 = 2.81e-6 >= 2e-6 > M_6
    eta = f["step_size"]
    for j, r in enumerate(plan.rounds, start=1):
        assert r.regularization == pytest.approx(lams[j - 1], rel=1e-3)
        assert r.step_size == pytest.approx(eta * 16.0**-j)
        assert r.regularization == pytest.approx(2.0 / (r.step_size * 1000))  # lam = 2/(eta m)
        assert r.base_sensitivity == pytest.approx(L * r.step_size)  # 2L/(lam m) = L eta_j
        floor = ACCURACY_FLOOR * (1 + L * D + r.regularization * D * D / 2)
        assert r.accuracy == pytest.approx(max(6.25e-4 * L * L * r.step_size / 1000, floor))
        expected = r.base_sensitivity + 2 * math.sqrt(2 * r.accuracy / r.regularization)
        assert r.sensitivity.value >= expected and r.sensitivity.value == pytest.approx(expected)
        assert r.noise.kind == "l2_laplace" and r.noise.epsilon == 1.0  # full epsilon (E2)
        assert r.noise.scale >= r.sensitivity.value  # Delta'/eps, rounded up
        assert r.batch == ((j - 1) * 1000, j * 1000)
    assert L * plan.rounds[-1].step_size * 1000 / 2 >= 1e-6 * D > L * eta * 16.0**-6 * 500
    # round 1: the float64 floor binds but inflates the sensitivity by under 15%
    assert plan.rounds[0].sensitivity.value <= 1.15 * L * plan.rounds[0].step_size
    # the plan reads no data: the same public inputs give the same plan
    again = mech.plan(n=n, d=d, center=np.zeros(d), diameter=D, epsilon=1.0, delta=0.0)
    assert again.facts() == f


def test_paper_constants_never_go_below_the_certified_sensitivity():
    n, d = 10_000, 5
    plan = _il(failure_probability=1e-5, constants="paper", noise="laplace").plan(
        n=n, d=d, center=np.zeros(d), diameter=2.0, epsilon=1.0, delta=0.0
    )
    for r in plan.rounds:
        eta = r.step_size
        assert r.accuracy >= eta / (2 * 1000)  # E4: alpha = L^2 eta_j / (2 m)
        _, certified = certified_sensitivity(1.0, r.regularization, 1000, r.accuracy)
        assert r.sensitivity.value >= max(4 * eta, certified)  # printed basis, never below
        assert r.noise.kind == "laplace"  # the paper's Lap_d: l1 sensitivity sqrt(d) Delta'
        assert r.noise.scale >= math.sqrt(d) * r.sensitivity.value
    # late rounds: the certified value exceeds the printed 4 L eta_j (spec B.0)
    last = plan.rounds[-1]
    assert last.sensitivity.value > 4 * last.step_size


def test_gaussian_rounds_use_the_analytic_calibration_with_one_multiplier():
    plan = _il(failure_probability=1e-5).plan(
        n=10_000, d=5, center=np.zeros(5), diameter=2.0, epsilon=1.0, delta=1e-6
    )
    multipliers = [r.noise.scale / r.noise.sensitivity for r in plan.rounds]
    assert max(multipliers) == pytest.approx(min(multipliers), rel=1e-9)
    for r in plan.rounds:
        assert r.noise.kind == "gaussian" and r.noise.sensitivity == r.sensitivity.value
        assert gaussian_delta(r.noise.scale, r.noise.sensitivity, 1.0) <= 1e-6
        # never the printed 4 L eta_j sqrt(log(1/delta))/eps (P3): not what is calibrated
        assert r.noise.scale != pytest.approx(4 * r.step_size * math.sqrt(math.log(1e6)))
    (event,) = plan.events("IL")
    assert event.kind == "gaussian" and event.epsilon == 1.0 and event.delta == 1e-6
    assert event.noise_multiplier == pytest.approx(min(multipliers))


# ---------------------------------------------------------------- public plan (Alg 2)
@pytest.mark.parametrize(
    "n,kappa,T,n0,k,m",
    [
        (10_000, 1.5, 37, 270, 6, 45),
        (100_000, 2.0, 24, 4166, 9, 462),
        (10**6, 3.0, 14, 71428, 12, 5952),
    ],
)
def test_growth_plan_matches_the_digest_table(n, kappa, T, n0, k, m):
    assert epoch_count(n, kappa) == T
    plan = _ga(growth_lower=kappa).plan(
        n=n, d=5, center=np.zeros(5), diameter=2.0, epsilon=1.0, delta=0.0
    )
    f = plan.facts()
    assert (f["epochs_paper"], f["chunk_size"], f["inner_rounds"], f["batch_size"]) == (
        T,
        n0,
        k,
        m,
    )
    # epoch i: chunk [i n0, (i+1) n0) (E5), radius D_i = 2^-i D (E6), eta_i = 2^-i eta_0
    eta0 = f["step_size"]
    for r in plan.rounds:
        i, j = r.epoch, r.index
        assert i * n0 <= r.batch[0] and r.batch[1] <= (i + 1) * n0
        assert r.batch == (i * n0 + (j - 1) * m, i * n0 + j * m)
        assert r.radius == (None if i == 0 else 2.0 * 2.0**-i)
        assert r.step_size == pytest.approx(eta0 * 2.0**-i * 16.0**-j)
        assert 1.0 * r.step_size * m / 2 >= 1e-6 * 2.0  # P5: public skipping
    assert f["epoch_radii"] == tuple(2.0 * 2.0**-i for i in range(f["epochs_run"]))
    assert f["epochs_run"] <= 20  # D_i >= 1e-6 D for i <= 19 only
    starts = [r.batch[0] for r in plan.rounds]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)  # disjoint


def test_growth_default_step_size_follows_the_paper():
    n, d, eps, beta = 20_000, 3, 1.0, 1e-5
    plan = _ga(growth_lower=2.0, failure_probability=beta).plan(
        n=n, d=d, center=np.zeros(d), diameter=2.0, epsilon=eps, delta=0.0
    )
    n0 = plan.facts()["chunk_size"]
    lb = math.log(1 / beta)
    expected = (2.0 / 2.0) * min(1 / math.sqrt(n0 * math.log(n0) * lb), eps / (d * lb))
    assert plan.facts()["step_size"] == pytest.approx(expected)
    assert plan.facts()["inner_failure_probability"] == pytest.approx(
        beta / plan.facts()["epochs_paper"]
    )


# ---------------------------------------------------------------- certified sensitivity
def test_sensitivity_is_attained_by_certified_solves():
    """Spec B.1 T1: F(x; s) = s x on [-1, 1], one round, m = 50, c = 0: the exact minimizer is
    -(eta_1/2) sum_j s_j, so flipping one s moves it by exactly L eta_1; the certified points
    are at most Delta'_1 apart and at least 0.95 Delta'_1 (a wrong factor 2 in lam fails)."""
    from dpcvx.problem import ReleaseContext

    s = np.array([1.0] * 25 + [-1.0] * 24 + [1.0])
    s2 = s.copy()
    s2[-1] = -1.0
    mech = _il(rounds=1, step_size=0.32)  # eta_1 = 0.02, lam_1 = 2
    plan = mech.plan(n=50, d=1, center=np.zeros(1), diameter=2.0, epsilon=1.0, delta=0.0)
    (r,) = plan.rounds
    assert r.regularization == pytest.approx(2.0) and r.base_sensitivity == pytest.approx(0.02)
    points = []
    for data in (s, s2):
        ctx = ReleaseContext(_linear_problem(data), extension=None, solver=None)
        cert = ctx.solver(indices=np.arange(50))(r.regularization, np.zeros(1), r.accuracy)
        assert cert.gap <= r.accuracy
        assert cert.w[0] == pytest.approx(-0.01 * data.sum(), abs=1e-4)
        points.append(cert.w[0])
    gap = abs(points[0] - points[1])
    assert 0.95 * r.sensitivity.value <= gap <= r.sensitivity.value


# ---------------------------------------------------------------- release and ledger
@pytest.mark.parametrize("factory", [_il, lambda **kw: _ga(growth_lower=3.0, **kw)])
def test_release_records_one_event_and_is_reproducible(factory):
    problem = _hinge_problem()
    res = problem.solve_private(factory(), epsilon=1.0, rng=3)
    det = res.detail
    assert len(res.certificates) == det["rounds_run"] >= 1
    assert len(det["round_outputs"]) == det["rounds_run"]
    assert np.array_equal(res.w, det["round_outputs"][-1])
    assert problem.domain.contains(res.w)
    assert res.seeded and res.delta == 0.0
    (event,) = res.ledger.events  # one event: parallel composition over disjoint batches
    assert event.epsilon == 1.0 and event.delta == 0.0 and event.kind == "pure"
    assert "parallel" in event.detail["composition"]
    assert det["records_used"] <= problem.n
    again = problem.solve_private(factory(), epsilon=1.0, rng=3)
    assert np.array_equal(again.w, res.w)


def test_approximate_release_records_one_gaussian_event():
    problem = _hinge_problem()
    res = problem.solve_private(_il(), epsilon=1.0, delta=1e-6, rng=0)
    (event,) = res.ledger.events
    assert event.kind == "gaussian" and event.delta == 1e-6 and event.noise_multiplier > 0


def test_unaffordable_release_spends_nothing_and_touches_no_data(monkeypatch):
    problem = _hinge_problem()
    import dpcvx.problem as problem_module

    touched = []
    monkeypatch.setattr(problem_module, "certified_solve", lambda *a, **k: touched.append(1))
    for mech in (_il(), _ga(growth_lower=3.0)):
        acct = dpcvx.Accountant(0.999)
        with pytest.raises(PrivacyBudgetError):
            problem.solve_private(mech, epsilon=1.0, accountant=acct)
        assert not touched and acct.spent.epsilon == 0.0


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"lipschitz": 0.0}, "lipschitz"),
        ({"lipschitz": -1.0}, "lipschitz"),
        ({"lipschitz": math.inf}, "lipschitz"),
        ({"lipschitz": math.nan}, "lipschitz"),
        ({"failure_probability": 0.0}, "failure_probability"),
        ({"failure_probability": 1.0}, "failure_probability"),
        ({"step_size": 0.0}, "step_size"),
        ({"step_size": math.inf}, "step_size"),
        ({"accuracy": -1.0}, "accuracy"),
        ({"noise": "gaussian"}, "noise"),
        ({"constants": "loose"}, "constants"),
        ({"move_tolerance": -0.1}, "move_tolerance"),
        ({"move_tolerance": 1.0}, "move_tolerance"),
        ({"min_batch_size": 0}, "min_batch_size"),
        ({"shuffle": 1}, "shuffle"),
        ({"initial_point": [math.nan]}, "initial_point|center"),
    ],
)
@pytest.mark.parametrize("cls", [IterativeLocalization, GrowthAdaptiveLocalization])
def test_bad_parameters(cls, kwargs, match):
    base = {"lipschitz": 1.0}
    base.update(kwargs)
    with pytest.raises(InvalidParameterError, match=match):
        cls(**base)


@pytest.mark.parametrize("kappa", [1.0, 0.5, -2.0, math.nan, math.inf])
def test_growth_lower_must_exceed_one(kappa):
    with pytest.raises(InvalidParameterError, match="growth_lower"):
        GrowthAdaptiveLocalization(lipschitz=1.0, growth_lower=kappa)


@pytest.mark.parametrize("cls", [IterativeLocalization, GrowthAdaptiveLocalization])
@pytest.mark.parametrize("value", [0, -1, 2.5, True])
def test_counts_must_be_positive_integers(cls, value):
    name = "rounds" if cls is IterativeLocalization else "epochs"
    with pytest.raises(InvalidParameterError, match=name):
        cls(lipschitz=1.0, **{name: value})


@pytest.mark.parametrize(
    "mech,kwargs,match",
    [
        (_il(), {"epsilon": 0.0}, "epsilon"),
        (_il(), {"epsilon": math.inf}, "epsilon"),
        (_il(), {"epsilon": 1.0, "delta": 1.0}, "delta"),
        (_il(), {"epsilon": 1.0, "delta": -1e-9}, "delta"),
        (_il(noise="laplace"), {"epsilon": 1.0, "delta": 1e-6}, "pure"),
        (_il(min_batch_size=100), {"epsilon": 1.0}, "min_batch_size"),
        (_il(rounds=500), {"epsilon": 1.0}, "min_batch_size"),
        (_il(step_size=1e-12), {"epsilon": 1.0}, "move"),
        (_ga(epochs=201), {"epsilon": 1.0}, "min_batch_size"),
        (_ga(epochs=3, min_batch_size=30), {"epsilon": 1.0}, "min_batch_size"),
        (_ga(step_size=1e-12), {"epsilon": 1.0}, "move"),
        (_ga(), {"epsilon": 1.0, "delta": 2.0}, "delta"),
        (_il(initial_point=[0.0, 0.0, 0.0]), {"epsilon": 1.0}, "shape"),
    ],
)
def test_bad_requests_raise_before_anything_is_spent(mech, kwargs, match):
    problem = _hinge_problem()
    acct = dpcvx.Accountant(10.0, 0.5)
    with pytest.raises(InvalidParameterError, match=match):
        problem.solve_private(mech, accountant=acct, **kwargs)
    assert acct.spent.epsilon == 0.0 and acct.spent.delta == 0.0


def test_utility_only_choices_warn_but_plan():
    with pytest.warns(UserWarning, match="close to 1"):
        mech = GrowthAdaptiveLocalization(lipschitz=1.0, growth_lower=1.05, progress=False)
    assert mech.plan(n=10**6, d=1, center=np.zeros(1), diameter=2.0, epsilon=1.0, delta=0.0)
    with pytest.warns(UserWarning, match="1/\\(n \\+ d\\)"):
        _il(failure_probability=0.1).plan(
            n=1000, d=1, center=np.zeros(1), diameter=2.0, epsilon=1.0, delta=0.0
        )


@pytest.mark.parametrize("diameter", [0.0, -1.0, math.inf, math.nan])
def test_unbounded_or_degenerate_domains_are_refused(diameter):
    with pytest.raises(InvalidParameterError, match="diameter"):
        _il().plan(n=100, d=1, center=np.zeros(1), diameter=diameter, epsilon=1.0, delta=0.0)


# ---------------------------------------------------------------- utility (kappa = 2)
@pytest.mark.statistical
@pytest.mark.parametrize("kind", ["alg1", pytest.param("alg2", marks=pytest.mark.slow)])
def test_excess_risk_decreases_with_n_on_a_kappa_two_family(kind):
    """Excess population risk 0.5 ||w - mu||^2 (closed form) at n = 300 and n = 3000, 8
    seeded datasets and releases each, with a public step size eta = 100 D/(L sqrt n) (the
    paper's D/(L sqrt(n log(1/beta))) with a larger constant: its O-constants are unknown,
    P12). Sign test on the 8 pairs: assuming each pair is won by the larger n with
    probability >= 0.95 (medians 0.11 vs 0.006 (Alg 1) and 0.09 vs 0.007 (Alg 2) when this
    was written, 8/8 wins each), the false-failure rate is binom.cdf(4, 8, 0.95) = 3.7e-4."""
    wins = 0
    medians = []
    for n in (300, 3000):
        excess = []
        for seed in range(8):
            problem, mu = _squares_problem(n, 100 + seed)
            eta = 100 * 2.0 / (2.0 * math.sqrt(n))
            if kind == "alg1":
                mech = _il(lipschitz=2.0, step_size=eta)
            else:
                mech = _ga(lipschitz=2.0, growth_lower=2.0, step_size=eta)
            with pytest.warns(dpcvx.LipschitzClaimWarning):  # the loss runs on f_L
                w = problem.solve_private(mech, epsilon=2.0, rng=seed).w
            excess.append(0.5 * float(np.sum((w - mu) ** 2)))
        medians.append(np.median(excess))
        if n == 300:
            small = excess
        else:
            wins = sum(big < sm for big, sm in zip(excess, small))
    assert binom.cdf(4, 8, 0.95) <= 4e-4
    assert wins >= 5
    assert medians[1] < medians[0]


# ---------------------------------------------------------------- empirical privacy
class _ExactLinearContext:
    """A release context for the loss ``x w`` on ``[-1, 1]`` whose solves are exact (closed
    form, gap 0): it isolates the mechanism's plan, partition and noise from the solver, so
    many releases are cheap. The certified-solve route is tested above."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = np.asarray(x, float)
        self.n, self.d = len(self.x), 1
        self.domain = SimpleNamespace(kind="box")

    def solver(self, indices=None, C=None):
        xs = self.x if indices is None else self.x[np.asarray(indices)]

        def solve(lam, w0, alpha, localize=None, candidate=None):
            w = self.project(np.asarray(w0, float) - xs.mean() / lam, localize)
            return SimpleNamespace(w=w, gap=0.0)

        return solve

    def project(self, point, localize=None, xi=None):
        lo, hi = -1.0, 1.0
        if localize is not None:
            c, r = localize
            lo, hi = max(lo, float(c[0]) - r), min(hi, float(c[0]) + r)
        return np.clip(np.asarray(point, float), lo, hi)


def _outputs(mech, plan, x, runs, seed):
    ctx = _ExactLinearContext(x)
    rng = np.random.default_rng(seed)
    return np.array([mech.release(plan, ctx, rng).w[0] for _ in range(runs)])


@pytest.mark.statistical
def test_empirical_privacy_on_a_worst_case_pair_with_negative_control():
    """Linear loss x w on [-1, 1], n = 10, two rounds of 5 records in the given order; the
    first record is +1 vs -1 (round 1's batch: the largest sensitivity, L eta_1 attained by
    the exact minimizers). Clopper-Pearson with Bonferroni at total level 1e-3: the correct
    mechanism fails with probability <= 1e-3. The control's noise is calibrated to 2 epsilon
    (charged epsilon) and must be caught."""
    from dpcvx.audit import negative_control
    from tests.audit_tools import epsilon_lower_bound

    eps, runs = 1.0, 4000
    x0 = np.zeros(10)
    x0[0] = 1.0
    x1 = -x0
    mech = _il(rounds=2, step_size=3.2, shuffle=False)  # eta_1 = 0.2: minimizers -+0.1
    kw = {"n": 10, "d": 1, "center": np.zeros(1), "diameter": 2.0, "epsilon": eps, "delta": 0.0}
    plan = mech.plan(**kw)
    assert plan.rounds[0].base_sensitivity == pytest.approx(0.2)
    thresholds = [-0.2, -0.1, 0.0, 0.1, 0.2]
    o0, o1 = _outputs(mech, plan, x0, runs, 1), _outputs(mech, plan, x1, runs, 2)
    assert epsilon_lower_bound(o0, o1, thresholds, alpha=1e-3) <= eps
    control = negative_control(mech, 4.0).plan(**kw)
    assert control.rounds[0].noise.epsilon == 4 * eps
    c0, c1 = _outputs(mech, control, x0, runs, 3), _outputs(mech, control, x1, runs, 4)
    assert epsilon_lower_bound(c0, c1, thresholds, alpha=1e-3) > eps


def test_batches_are_disjoint_and_follow_the_given_order():
    """With shuffle=False round j solves exactly records [(j-1) m, j m); with shuffle the
    batches are a partition drawn from the mechanism's own generator."""
    seen = []

    class Spy(_ExactLinearContext):
        def solver(self, indices=None, C=None):
            seen.append(np.asarray(indices).tolist())
            return super().solver(indices, C)

    x = np.linspace(-1, 1, 23)
    for shuffle in (False, True):
        seen.clear()
        mech = _il(rounds=4, step_size=3.2, shuffle=shuffle)
        plan = mech.plan(n=23, d=1, center=np.zeros(1), diameter=2.0, epsilon=1.0, delta=0.0)
        mech.release(plan, Spy(x), np.random.default_rng(0))
        assert len(seen) == len(plan.rounds) and all(len(b) == 5 for b in seen)
        flat = [i for b in seen for i in b]
        assert len(flat) == len(set(flat))  # every record in at most one round
        if not shuffle:
            assert seen == [list(range(5 * j, 5 * j + 5)) for j in range(len(seen))]


def test_negative_control_scales_every_round():
    from dpcvx.audit import negative_control

    kw = {"n": 1000, "d": 2, "center": np.zeros(2), "diameter": 2.0, "epsilon": 1.0, "delta": 0.0}
    mech = _ga(growth_lower=3.0)
    plan = mech.plan(**kw)
    control = negative_control(mech, 2.0).plan(**kw)
    for a, b in zip(plan.rounds, control.rounds):
        assert b.noise.scale == pytest.approx(a.noise.scale / 2)
    assert control.events("x") == plan.events("x")  # charged what the mechanism is charged
    assert dataclasses.is_dataclass(plan)
