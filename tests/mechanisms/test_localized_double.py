"""Localized Double Output Perturbation (paper 000, Alg 1 + Alg 4): public plan, partition,
aggregation, ledger, bad input, executors, failure path and localization."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import cvxpy as cp
import numpy as np
import pytest
from scipy.stats import binom

import dpcvx
from dpcvx.errors import CertificationError, InvalidParameterError, PrivacyBudgetError
from dpcvx.mechanisms.localized_double import (
    COUPLING,
    aggregate,
    blocks_for_confidence,
    phase_blocks,
    phase_sizes,
)


def _hinge_problem(n: int = 400, d: int = 2, seed: int = 0, scale: float = 1.0):
    rng = np.random.default_rng(seed)
    X = rng.standard_t(5, size=(n, d)) * scale
    Y = np.sign(X @ np.ones(d) + rng.normal(size=n))
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    return dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, {x: X, y: Y}, [cp.norm(w, 2) <= 1])


def _mech(**kw):
    kw.setdefault("blocks", 3)
    return dpcvx.LocalizedDoubleOutputPerturbation(k=4, moment=3.0, second_moment=2.0, **kw)


# ---------------------------------------------------------------- public plan
@pytest.mark.parametrize(
    "p,T,J",
    [(0.7, 10, 31), (0.7, 14, 35), (0.7, 17, 37), (0.6, 10, 133), (0.6, 14, 147), (0.6, 17, 155)],
)
def test_blocks_follow_the_exact_binomial_rule(p, T, J):
    assert blocks_for_confidence(T, 0.1, p) == J
    assert binom.cdf(J // 2, J, p) <= 0.1 / T < binom.cdf((J - 1) // 2, J - 1, p)


def test_partition_is_disjoint_and_covers_what_the_paper_says():
    n, J = 1000, 5
    batch, block = phase_sizes(n, J)
    assert batch == [500, 250, 125, 62, 31, 15, 7, 3, 1, 0]
    assert block == [100, 50, 25, 12, 6, 3, 1, 0, 0, 0]
    perm = np.random.default_rng(0).permutation(n)
    blocks = phase_blocks(perm, batch[:7], block[:7], J)
    flat = [b for phase in blocks for b in phase]
    for t, phase in enumerate(blocks):
        assert all(len(b) == block[t] for b in phase)
    used = np.concatenate(flat)
    assert len(used) == len(set(used.tolist())) == 5 * 197 == 985  # disjoint
    # each phase takes the next n_t entries of the permutation; blocks are their first J m_t
    start = 0
    for t, phase in enumerate(blocks):
        assert np.array_equal(np.concatenate(phase), perm[start : start + J * block[t]])
        start += batch[t]


def test_plan_is_public_and_matches_the_digest_formulas():
    n, d, eps, D = 10_000, 20, 1.0, 2.0
    G4, G2 = 6.280170, 5.773503  # Student-t(5) features, d = 20 (digest 6.11)
    mech = dpcvx.LocalizedDoubleOutputPerturbation(k=4, moment=G4, second_moment=G2)
    plan = mech.plan(n=n, d=d, center=np.zeros(d), diameter=D, epsilon=eps, delta=0.0)
    det = plan.detail
    assert plan.blocks == 35 and det["phases_paper"] == 14 and det["phases_blocks"] == 8
    assert (
        tuple(p.block_size for p in plan.phases)
        == (142, 71, 35, 17, 8, 4, 2, 1)[: len(plan.phases)]
    )
    rbar = det["noise_constant"] * G4 * (d / (142 * eps)) ** 0.75 + G2 / math.sqrt(142)
    assert det["error_scale"] == pytest.approx(rbar)
    assert det["base_regularization"] == pytest.approx(math.sqrt(2 * COUPLING) * rbar / D)
    assert math.sqrt(2 * COUPLING) == pytest.approx(18.14, abs=0.01)
    for t, phase in enumerate(plan.phases):
        assert phase.regularization == pytest.approx(det["base_regularization"] * 32.0**t)
        assert phase.C == pytest.approx(G4 * (phase.block_size * eps / d) ** 0.25)
        assert phase.C / phase.regularization >= 1e-6 * D  # T_move
    assert plan.phases[0].C == pytest.approx(10.25, abs=0.01)
    # the plan does not look at any data: the same inputs give the same plan
    again = mech.plan(n=n, d=d, center=np.zeros(d), diameter=D, epsilon=eps, delta=0.0)
    assert again.detail == plan.detail


# ---------------------------------------------------------------- aggregation
def test_aggregation_returns_the_digest_example_block():
    pts = np.array([[0.0, 0.0], [0.1, 0.0], [0.0, 0.1], [10.0, 10.0], [-10.0, 5.0]])
    assert aggregate(pts) == 0


def test_aggregation_is_within_3r_of_a_majority_cluster_whatever_the_others():
    rng = np.random.default_rng(1)
    for trial in range(1000):
        J = int(rng.integers(1, 16))
        good = J // 2 + 1
        d = int(rng.integers(1, 4))
        center = rng.normal(size=d) * 5
        r = float(10 ** rng.uniform(-3, 1))
        dirs = rng.normal(size=(good, d))
        dirs /= np.maximum(np.linalg.norm(dirs, axis=1, keepdims=True), 1e-12)
        inliers = center + dirs * r * rng.uniform(0, 1, size=(good, 1))
        bad = J - good
        if trial % 2:  # a tight far cluster of size floor(J/2) (adversarial)
            outliers = center + 50 * r + rng.normal(size=(bad, d)) * 1e-9
        else:
            outliers = rng.normal(size=(bad, d)) * 100
        pts = np.vstack([inliers, outliers])[rng.permutation(J)]
        j = aggregate(pts)
        assert 0 <= j < J
        assert np.linalg.norm(pts[j] - center) <= 3 * r * (1 + 1e-9)


# ---------------------------------------------------------------- release and ledger
def test_release_runs_every_block_and_returns_an_aggregated_block_output():
    problem = _hinge_problem()
    res = problem.solve_private(_mech(), epsilon=1.0, rng=3)
    phases = res.detail["phases"]
    J = res.detail["blocks"]
    assert len(res.certificates) == 2 * phases * J
    outputs, chosen = res.detail["block_outputs"], res.detail["aggregated_indices"]
    assert len(outputs) == phases and all(o.shape == (J, 2) for o in outputs)
    assert np.array_equal(res.w, outputs[-1][chosen[-1]])
    assert problem.domain.contains(res.w)
    assert res.seeded and res.delta == 0.0
    # one pure event: the blocks are disjoint (parallel composition), charged once
    assert len(res.ledger.events) == 1
    event = res.ledger.events[0]
    assert event.epsilon == 1.0 and event.kind == "pure"
    assert res.ledger.total().epsilon == pytest.approx(1.0, rel=1e-12)  # rounded up
    assert sum(event.detail["per_block_epsilon"]) == pytest.approx(1.0)
    shown = str(res.ledger)  # the ledger shows every split
    assert shown.count(f"{J} disjoint blocks") == phases and "parallel composition" in shown
    # the same seed gives the same release
    assert np.array_equal(problem.solve_private(_mech(), epsilon=1.0, rng=3).w, res.w)


def test_unaffordable_release_spends_nothing_and_touches_no_data(monkeypatch):
    problem = _hinge_problem()
    import dpcvx.problem as problem_module

    touched = []
    monkeypatch.setattr(problem_module, "certified_solve", lambda *a, **k: touched.append(1))
    acct = dpcvx.Accountant(0.999)
    with pytest.raises(PrivacyBudgetError):
        problem.solve_private(_mech(), epsilon=1.0, accountant=acct)
    assert not touched and acct.spent.epsilon == 0.0


@pytest.mark.parametrize(
    "executor_kind",
    ["threads", "dask", "dask-client", pytest.param("dask-processes", marks=pytest.mark.slow)],
)
def test_executors_give_the_same_release_for_the_same_seed(executor_kind):
    problem = _hinge_problem(n=300)
    expected = problem.solve_private(_mech(), epsilon=1.0, rng=11).w
    if executor_kind == "threads":
        with ThreadPoolExecutor(max_workers=2) as pool:
            got = problem.solve_private(_mech(executor=pool), epsilon=1.0, rng=11).w
    else:
        distributed = pytest.importorskip("distributed")
        processes = executor_kind == "dask-processes"  # blocks pickled to other processes
        with (
            distributed.LocalCluster(
                n_workers=2, threads_per_worker=1, processes=processes, dashboard_address=None
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            # the Client itself scatters each block's rows to a worker; its executor view
            # ships them inside the task graph
            executor = client if executor_kind == "dask-client" else client.get_executor()
            got = problem.solve_private(_mech(executor=executor), epsilon=1.0, rng=11).w
    assert np.array_equal(got, expected)


def test_a_process_pool_runs_the_blocks_and_releases_the_same_point():
    # stdlib pickle, not cloudpickle: every block job is module-level functions and classes
    from concurrent.futures import ProcessPoolExecutor

    problem = _hinge_problem(n=300)
    expected = problem.solve_private(_mech(), epsilon=1.0, rng=5).w
    with ProcessPoolExecutor(max_workers=2) as pool:
        got = problem.solve_private(_mech(executor=pool), epsilon=1.0, rng=5).w
    assert np.array_equal(got, expected)


def test_a_block_job_carries_its_rows_only():
    import pickle

    from dpcvx.problem import BlockSolve

    problem = _hinge_problem(n=2000, d=3)
    context = problem.release_context(extension=None, solver=None, base=True)
    context.prepare()
    idx = np.arange(10, 30)
    solve = context.solver(indices=idx, C=1.0)
    assert isinstance(solve, BlockSolve) and solve.decl.n == idx.size
    whole = context.solver(C=1.0)
    assert len(pickle.dumps(solve)) < len(pickle.dumps(whole)) / 5
    X = problem.declaration.data
    for key, arr in solve.decl.data.items():
        assert np.array_equal(arr, np.asarray(X[key])[idx])
    # the projection the blocks use holds no data at all
    assert len(pickle.dumps(context.project)) < 50_000


class _BrokenExecutor:
    def submit(self, fn, *args, **kwargs):
        raise RuntimeError("no workers available")


class _UnpicklingExecutor:
    """Pickles every job as a process pool would, and runs it here."""

    def submit(self, fn, *args, **kwargs):
        import pickle
        from concurrent.futures import Future

        fn, args = pickle.loads(pickle.dumps((fn, args)))
        future: Future = Future()
        future.set_result(fn(*args, **kwargs))
        return future


def test_an_executor_that_cannot_run_a_block_is_refused_before_anything_is_spent():
    problem = _hinge_problem(n=300)
    acct = dpcvx.Accountant(1.0)
    with pytest.raises(InvalidParameterError, match="could not run a block job.*Nothing was spent"):
        problem.solve_private(_mech(executor=_BrokenExecutor()), epsilon=1.0, accountant=acct)
    assert acct.spent.epsilon == 0.0 and not acct.ledger.events
    # every part of a block job survives pickling (what a process pool does to it)
    got = problem.solve_private(_mech(executor=_UnpicklingExecutor()), epsilon=1.0, rng=2).w
    assert np.array_equal(got, problem.solve_private(_mech(), epsilon=1.0, rng=2).w)


def test_a_failed_block_raises_fixed_text_and_keeps_the_budget_spent(monkeypatch):
    problem = _hinge_problem()
    import dpcvx.certification.solve as solve_module

    calls = {"n": 0}
    real = solve_module.solve_program

    def garbage(prog, name, tight=False):
        calls["n"] += 1
        raw = real(prog, name, tight=tight)
        if calls["n"] > 3:  # the second block onwards: a wrong primal-dual pair
            raw.z[:] = np.random.default_rng(0).normal(size=raw.z.shape) * 1e3
            raw.x[:] = 5.0
        return raw

    monkeypatch.setattr(solve_module, "solve_program", garbage)
    # the arrowhead rung (hinge loss) would solve the blocks before the garbage solver runs
    monkeypatch.setattr(solve_module, "pieces_rung_applies", lambda *a, **k: False)
    acct = dpcvx.Accountant(1.0)
    with pytest.raises(CertificationError) as info:
        problem.solve_private(_mech(), epsilon=1.0, rng=0, accountant=acct)
    from dpcvx.mechanisms.localized_double import _FAILURE

    assert str(info.value) == _FAILURE
    assert info.value.__cause__ is None and info.value.__suppress_context__
    # reserved before the data was touched: it stays spent
    assert acct.spent.epsilon == pytest.approx(1.0, rel=1e-12)


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"k": 1.5}, "k"),
        ({"k": math.inf}, "k"),
        ({"k": float("nan")}, "k"),
        ({"moment": 0.0}, "moment"),
        ({"moment": -1.0}, "moment"),
        ({"moment": math.nan}, "moment"),
        ({"moment": math.inf}, "moment"),
        ({"second_moment": 0.0}, "second_moment"),
        ({"second_moment": 5.0}, "Lyapunov"),
        ({"failure_probability": 0.5}, "failure"),
        ({"failure_probability": 0.0}, "failure"),
        ({"block_success": 0.5}, "block_success"),
        ({"block_success": 1.0}, "block_success"),
        ({"blocks": 0}, "blocks"),
        ({"blocks": 2.5}, "blocks"),
        ({"min_block_size": 0}, "min_block_size"),
        ({"base_regularization": 0.0}, "base_regularization"),
        ({"zeta": 0.0}, "zeta"),
        ({"constants": "loose"}, "constants"),
        ({"executor": object()}, "executor"),
        ({"move_tolerance": -1.0}, "move_tolerance"),
    ],
)
def test_bad_parameters(kwargs, match):
    base = {"k": 4, "moment": 3.0, "second_moment": 2.0}
    base.update(kwargs)
    with pytest.raises(InvalidParameterError, match=match):
        dpcvx.LocalizedDoubleOutputPerturbation(**base)


def test_too_few_examples_say_the_minimum_and_spend_nothing():
    problem = _hinge_problem(n=50)
    mech = dpcvx.LocalizedDoubleOutputPerturbation(k=4, moment=3.0)  # T = 6: default J = 27
    acct = dpcvx.Accountant(1.0)
    with pytest.raises(InvalidParameterError, match="n >= 2 \\* J \\* min_block_size = 54"):
        problem.solve_private(mech, epsilon=1.0, accountant=acct)
    assert acct.spent.epsilon == 0.0


def test_delta_must_be_zero_and_the_extension_route_is_refused():
    problem = _hinge_problem()
    with pytest.raises(InvalidParameterError, match="pure"):
        problem.solve_private(_mech(), epsilon=1.0, delta=1e-6)
    with pytest.raises(InvalidParameterError, match="not on `problem.lipschitz_extension"):
        problem.lipschitz_extension(2.0).solve_private(_mech(), epsilon=1.0)


# ---------------------------------------------------------------- localization (Alg 2)
@pytest.mark.statistical
def test_localized_set_contains_the_extension_minimizer():
    """W0 = W ∩ B(Pi_W(w~ + b), r) contains argmin F_C in at least 1 - e^-3 of the releases.

    One certified stage-1 solve (deterministic), then 4000 seeded noise draws. The count of
    hits is Binomial(4000, q) with q >= 1 - e^-3 = 0.9502; the test fails when it is below
    the 1e-4 quantile of Binomial(4000, 0.9502) (false-failure rate <= 1e-4)."""
    from dpcvx.mechanisms.noise import sample

    problem = _hinge_problem(n=200, d=3, seed=4, scale=3.0)
    C, lam = 2.0, 0.5
    mech = dpcvx.DoubleOutputPerturbation(C=C, regularization=lam)
    plan = mech.plan(n=200, d=3, center=np.zeros(3), diameter=2.0, epsilon=1.0, delta=0.0)
    ext = problem.lipschitz_extension(C)
    first = ext.solve(lam, center=plan.center, accuracy=plan.localization_accuracy)
    exact = ext.solve(lam, center=plan.center, accuracy=1e-9)  # w* within sqrt(2 gap / lam)
    rng = np.random.default_rng(5)
    runs = 4000
    hits = 0
    slack = math.sqrt(2 * exact.gap / lam)
    for _ in range(runs):
        loc = problem.project(first.w + sample(plan.localization_noise, 3, rng))
        hits += np.linalg.norm(loc - exact.w) + slack <= plan.radius
    assert hits >= binom.ppf(1e-4, runs, 1 - math.exp(-3.0))


def test_stage_one_certificate_is_reused_only_when_it_certifies_stage_two():
    """Algorithm 4's second solve is skipped when stage 1's certified point lies in W0 with a
    gap within alpha_2 (min over W <= min over W0); otherwise W0 is solved afresh."""
    from dpcvx.problem import ReleaseContext

    problem = _hinge_problem(n=120, d=2)
    ctx = ReleaseContext(problem, extension=None, solver=None, base=True)
    solve = ctx.solver(indices=np.arange(60), C=2.0)
    lam, w0 = 0.5, np.zeros(2)
    first = solve(lam, w0, 1e-6)
    inside = solve(lam, w0, 1e-6, localize=(first.w, 0.1), candidate=first)
    assert inside is first
    far = problem.project(first.w + np.array([0.3, 0.0]))
    outside = solve(lam, w0, 1e-6, localize=(far, 0.05), candidate=first)
    assert outside is not first and outside.gap <= 1e-6
    assert np.linalg.norm(outside.w - far) <= 0.05
    other = solve(2 * lam, w0, 1e-6, localize=(first.w, 0.1), candidate=first)  # not the same F
    assert other is not first and other.regularization == 2 * lam
    from dataclasses import replace

    worse = replace(first, gap=2e-6)  # a certificate that does not meet alpha_2
    assert solve(lam, w0, 1e-6, localize=(first.w, 0.1), candidate=worse) is not worse


def _audit_pair(n: int = 40, outlier: float = 1e4):
    """1-d pair: n - 1 zero-loss records and one heavy-tailed outlier (gradient norm 1e4)
    pulling toward opposite ends of W, in the first position (phase 1's block when the
    partition is not shuffled: the worst case)."""
    w = cp.Variable(1)
    x = cp.Parameter(1)
    y = cp.Parameter()
    X0, X1 = np.zeros((n, 1)), np.zeros((n, 1))
    X0[0], X1[0] = -outlier, outlier
    Y = np.zeros(n)
    Y[0] = outlier  # |x w - y| is minimized at w = -1 on one side, +1 on the other
    dom = dpcvx.domains.box(w, -1.0, 1.0)
    return (
        dpcvx.Problem(cp.abs(x @ w - y), w, {x: X0, y: Y}, dom),
        dpcvx.Problem(cp.abs(x @ w - y), w, {x: X1, y: Y}, dom),
    )


def _ldop_outputs(problem, mech, plan, runs, seed):
    from dpcvx.problem import ReleaseContext

    ctx = ReleaseContext(problem, extension=None, solver=None, base=True)
    rng = np.random.default_rng(seed)
    return np.array([mech.release(plan, ctx, rng)[0][0] for _ in range(runs)])


@pytest.mark.slow
@pytest.mark.statistical
def test_privacy_audit_of_ldop_with_a_heavy_tailed_outlier_and_negative_control():
    """Clopper-Pearson with Bonferroni at total level 1e-3 (the correct mechanism fails with
    probability <= 1e-3). The control plans every block's noise for 10 epsilon but is charged
    epsilon; the audit must catch it."""
    import dataclasses

    from dpcvx.mechanisms import noise as noise_mod
    from tests.audit_tools import epsilon_lower_bound

    eps, runs = 1.0, 600
    p0, p1 = _audit_pair()
    mech = dpcvx.LocalizedDoubleOutputPerturbation(k=4, moment=1.0, blocks=1, shuffle=False)
    plan = mech.plan(n=40, d=1, center=np.zeros(1), diameter=2.0, epsilon=eps, delta=0.0)
    thresholds = [-0.1, -0.05, 0.0, 0.05, 0.1]
    o0, o1 = _ldop_outputs(p0, mech, plan, runs, 1), _ldop_outputs(p1, mech, plan, runs, 2)
    assert epsilon_lower_bound(o0, o1, thresholds, alpha=1e-3) <= eps

    def louder(block):
        return dataclasses.replace(
            block,
            noise=noise_mod.calibrate(block.sensitivity.value, 10 * eps / 2, 0.0),
            localization_noise=noise_mod.calibrate(
                block.localization_sensitivity, 10 * eps / 2, 0.0
            ),
        )

    bad = dataclasses.replace(
        plan, phases=tuple(dataclasses.replace(p, block=louder(p.block)) for p in plan.phases)
    )
    c0, c1 = _ldop_outputs(p0, mech, bad, runs, 3), _ldop_outputs(p1, mech, bad, runs, 4)
    assert epsilon_lower_bound(c0, c1, thresholds, alpha=1e-3) > eps
