"""Pop-Localize with EM-PGM blocks (paper 000, Theorem E.2 = Algorithm 1 with Algorithm 5 as
``A_ERM``; erratum E6's public step size): the public plan against the theorem's closed forms,
the ledger (one event by parallel composition), utility against the exact minimizer, an exact
and a sampled privacy audit on a worst-case pair with negative controls, and bad input."""

from __future__ import annotations

import dataclasses
import math
from concurrent.futures import ThreadPoolExecutor

import cvxpy as cp
import numpy as np
import pytest
from scipy.stats import binom

import dpcvx
from dpcvx.audit import audit, negative_control, worst_case_pair
from dpcvx.errors import InvalidParameterError, PrivacyBudgetError
from dpcvx.mechanisms.em_pgm import ProjectedGradientExponentialMechanism
from dpcvx.mechanisms.localized_double import (
    COUPLING,
    PopLocalizeEMPGM,
    _BlockRows,
    em_error_constant,
)


def _quadratic(z, d: int = 1) -> dpcvx.Problem:
    """f(w, z) = ||w - z||^2 / 2 on the box [-1, 1]^d (H = 1): the exact ERM minimizer is
    the mean of the z's clipped to the box."""
    w = cp.Variable(d)
    zp = cp.Parameter(d) if d > 1 else cp.Parameter()
    loss = 0.5 * cp.sum_squares(w - zp) if d > 1 else 0.5 * cp.square(w[0] - zp)
    return dpcvx.Problem(loss, w, {zp: np.asarray(z, float)}, dpcvx.domains.box(w, -1.0, 1.0))


def _heavy_tailed(n: int, seed: int = 0) -> np.ndarray:
    """0.3 + 0.5 t_5: a finite 4th moment only."""
    return 0.3 + 0.5 * np.random.default_rng(seed).standard_t(5, size=n)


def _mech(**kw) -> PopLocalizeEMPGM:
    kw.setdefault("blocks", 3)
    kw.setdefault("progress", False)
    return PopLocalizeEMPGM(k=4, moment=2.0, second_moment=1.5, smoothness=1.0, **kw)


# ---------------------------------------------------------------- public plan (Thm E.2)
def test_plan_reads_only_public_numbers_and_follows_theorem_e2():
    n, d, D, eps, k, Gk, G2, H, J = 2000, 1, 2.0, 1.0, 4.0, 2.0, 1.5, 1.0, 3
    mech = _mech()
    # plan() sees numbers only: no data source exists here
    plan = mech.plan(n=n, d=d, center=np.zeros(d), diameter=D, epsilon=eps, delta=0.0)
    det = plan.detail
    assert plan.blocks == J and det["phases_paper"] == math.ceil(math.log2(n)) == 11
    # Algorithm 1's partition: n_t = floor(n / 2^t), m_t = floor(n_t / J)
    sizes = [(n >> t) // J for t in range(1, 12)]
    assert [p.block_size for p in plan.phases] == sizes[: len(plan.phases)]
    # lambda_1 solves lambda = sqrt(2 A) rbar_1(lambda) / D, A = 1152/7 (closed form of rbar_1)
    m1, lam1 = sizes[0], det["base_regularization"]
    C1 = Gk * (eps * m1 / d) ** (1 / k)
    eta1 = C1 * d / (eps * m1 * (lam1 + H))
    c_em = 2 + 4 * math.log(3 * D / eta1) + 4 * math.log(10) / d
    assert c_em == pytest.approx(
        em_error_constant(C=C1, d=d, epsilon=eps, m=m1, lam=lam1, H=H, D=D), rel=1e-12
    )
    rbar = c_em * Gk * (d / (m1 * eps)) ** (1 - 1 / k) + G2 / math.sqrt(m1)
    assert det["error_scale"] == pytest.approx(rbar, rel=1e-12)
    assert lam1 == pytest.approx(math.sqrt(2 * COUPLING) * rbar / D, rel=1e-9)
    for t, phase in enumerate(plan.phases):
        m, lam, em = phase.block_size, phase.regularization, phase.block
        C = Gk * (eps * m / d) ** (1 / k)  # Theorem E.1's clip at sample size m_t
        assert lam == pytest.approx(lam1 * 32.0**t, rel=1e-12)  # lambda_t = 32^(t-1) lambda_1
        assert phase.C == pytest.approx(C, rel=1e-12) and em.C == phase.C
        assert em.step_size == pytest.approx(1 / (lam + H), rel=1e-12)  # public gamma (E6)
        eta = C * d / (eps * m * (lam + H))
        assert em.spacing == pytest.approx(eta, rel=1e-12) == em.paper_spacing
        assert em.net_bound == (math.ceil(D / eta) + 1) ** d <= mech.max_points
        assert 2 * C / m <= em.sensitivity.value <= 2 * C / m * (1 + 1e-8)  # Delta = 2C/m
        assert em.guarantee.epsilon == eps and em.n == m  # every block: the full epsilon
    # T_eff = min(T_paper, T_blocks, T_move, T_net): here the nets bind (16x finer per phase)
    T_net = det["phases_net"]
    assert len(plan.phases) == min(11, det["phases_blocks"], det["phases_move"], T_net)
    nxt = T_net  # the first phase not run for its net
    lam, m = lam1 * 32.0**nxt, sizes[nxt]
    eta = Gk * (eps * m / d) ** (1 / k) * d / (eps * m * (lam + H))
    assert (math.ceil(D / eta) + 1) ** d > mech.max_points
    assert det["implied_confidence"] == pytest.approx(
        1 - len(plan.phases) * binom.cdf(J // 2, J, 0.7)
    )
    # the release's detail is the same plan for two different datasets of the same size
    a = _quadratic(_heavy_tailed(n, 0)).solve_private(mech, epsilon=eps, rng=0).detail
    b = _quadratic(-_heavy_tailed(n, 1)).solve_private(mech, epsilon=eps, rng=0).detail
    for key in ("regularizations", "clip_C", "step_sizes", "spacings", "sensitivities"):
        assert a[key] == b[key] and a[key] == pytest.approx(det[key], rel=1e-12)


# ---------------------------------------------------------------- release and ledger
def test_release_is_one_pure_event_by_parallel_composition():
    problem = _quadratic(_heavy_tailed(400))
    mech = _mech(base_regularization=0.1)
    res = problem.solve_private(mech, epsilon=1.0, rng=3)
    phases, J = res.detail["phases"], res.detail["blocks"]
    assert phases >= 2
    outputs, chosen = res.detail["block_outputs"], res.detail["aggregated_indices"]
    assert len(outputs) == phases and all(o.shape == (J, 1) for o in outputs)
    assert np.array_equal(res.w, outputs[-1][chosen[-1]]) and problem.domain.contains(res.w)
    assert res.certificates == () and res.delta == 0.0 and res.seeded
    assert len(res.ledger.events) == 1
    event = res.ledger.events[0]
    assert event.kind == "pure" and event.epsilon == 1.0
    assert event.detail["per_block_epsilon"] == (1.0,)
    assert res.ledger.total().epsilon == pytest.approx(1.0, rel=1e-12)
    shown = str(res.ledger)
    assert shown.count(f"{J} disjoint blocks") == phases and "parallel composition" in shown
    # same seed, same release; an executor does not change it
    assert np.array_equal(problem.solve_private(mech, epsilon=1.0, rng=3).w, res.w)
    with ThreadPoolExecutor(2) as pool:
        threaded = _mech(base_regularization=0.1, executor=pool)
        assert np.array_equal(problem.solve_private(threaded, epsilon=1.0, rng=3).w, res.w)


def test_a_block_reads_its_own_rows_only():
    problem = _quadratic(_heavy_tailed(50))
    context = problem.release_context(extension=None, solver=None)
    idx = np.arange(10, 20)
    rows = _BlockRows(context, idx)
    pts = np.array([[-0.5], [0.0], [0.7]])
    assert rows.n == 10 and rows.domain is problem.domain
    assert np.array_equal(rows.loss_values(pts), context.loss_values(pts)[:, idx])


# ---------------------------------------------------------------- utility
@pytest.mark.statistical
def test_utility_in_one_dimension_against_the_exact_minimizer():
    """n = 2000 heavy-tailed examples (t_5), epsilon = 1, J = 3, lambda_1 = 0.05 (public).
    The exact ERM minimizer is clip(mean z, -1, 1). Over 200 seeded releases (other seeds) the
    error was <= 0.25 in 98.5% of them (median 0.058). The test asks for >= 15 of 20 releases
    within 0.25: with a per-release miss rate of 5% it fails with probability
    binom.sf(5, 20, 0.05) = 3.3e-4 (seeded: deterministic in CI)."""
    z = _heavy_tailed(2000)
    problem = _quadratic(z)
    target = float(np.clip(z.mean(), -1.0, 1.0))
    mech = _mech(base_regularization=0.05)
    errors = np.array(
        [
            abs(problem.solve_private(mech, epsilon=1.0, rng=100 + s).w[0] - target)
            for s in range(20)
        ]
    )
    assert np.sum(errors <= 0.25) >= 15
    assert binom.sf(5, 20, 0.05) < 4e-4
    # the regularization toward the public start (0) is what limits it: w = 0 is 0.30 away
    assert np.median(errors) < 0.15 < abs(target)


# ---------------------------------------------------------------- privacy audits
def _audit_mech() -> PopLocalizeEMPGM:
    """One block per phase, unshuffled: the outlier (first record) is in phase 1's block.
    lambda_1 = 1 and move_tolerance = 0.5 run phase 1 only (a 20-point net), which keeps the
    sampled audit fast; later phases would see outlier-free rows only."""
    return PopLocalizeEMPGM(
        k=4,
        moment=1.0,
        smoothness=0.0,
        blocks=1,
        shuffle=False,
        base_regularization=1.0,
        move_tolerance=0.5,
        progress=False,
    )


def _plan(mech, problem, epsilon=1.0):
    return mech.plan(
        n=problem.n,
        d=problem.d,
        center=problem.domain.center,
        diameter=problem.diameter,
        epsilon=epsilon,
        delta=0.0,
        domain=problem.domain,
    )


def test_exact_privacy_of_the_outlier_block_and_a_negative_control():
    """The worst-case pair of LDOP's audit (|x w - y| on [-1, 1], n = 40, an outlier with
    gradient 1e4 pulling to -1 vs +1): phase 1's block output distributions, computed exactly
    over the public net, differ by at most epsilon; the control (charged epsilon, calibrated
    to 4 epsilon) exceeds it. Measured: 0.50 (the exponential mechanism's factor-2 slack in
    the interior) and 2.0 for the control."""
    z0, z1 = worst_case_pair("ldop")
    eps = 1.0

    def max_log_ratio(mech):
        dists = []
        for z in (z0, z1):
            plan = _plan(mech, z, eps)
            phase = plan.phases[0]
            em = ProjectedGradientExponentialMechanism(
                C=phase.C, regularization=phase.regularization, smoothness=0.0
            )
            ctx = z.release_context(extension=None, solver=None)
            rows = _BlockRows(ctx, np.arange(phase.block_size))  # unshuffled: first block
            center = np.asarray(plan.initial_point, float)
            dists.append(em.distribution(dataclasses.replace(phase.block, center=center), rows))
        p, q = dists
        assert np.array_equal(p.points, q.points)
        return float(np.max(np.abs(p.log_probabilities - q.log_probabilities)))

    exact = max_log_ratio(_audit_mech())
    assert 0.45 < exact <= eps + 1e-12
    assert max_log_ratio(negative_control(_audit_mech(), 4.0)) > eps


@pytest.mark.statistical
def test_sampled_audit_on_a_worst_case_pair_catches_the_negative_control():
    """``dpcvx.audit.audit`` through the full release path (partition, block view, EM-PGM,
    aggregation, pipeline), 1000 releases per dataset, fixed thresholds from the pair's
    geometry, Clopper-Pearson with Bonferroni at total level 1e-3: the correct mechanism gets a
    bound above epsilon with probability <= 1e-3. Measured: 0.11 (correct) and 1.59 (control
    at factor 4; its exact epsilon on this pair is 2.0); seeded, so deterministic in CI."""
    pair = worst_case_pair("ldop")
    thresholds = (-0.2, -0.1, 0.0, 0.1, 0.2)
    kwargs = dict(epsilon=1.0, runs=1000, thresholds=thresholds, alpha=1e-3, progress=False)
    ok = audit(_audit_mech(), pair, seed=3, **kwargs)
    assert ok.passed and ok.lower_bound <= 1.0
    bad = audit(negative_control(_audit_mech(), 4.0), pair, seed=4, **kwargs)
    assert bad.lower_bound > 1.0


# ---------------------------------------------------------------- bad input
def _spy_loss_values(monkeypatch) -> list:
    import dpcvx.problem as problem_module

    touched: list = []
    original = problem_module.ReleaseContext.loss_values

    def spy(self, *args, **kwargs):
        touched.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(problem_module.ReleaseContext, "loss_values", spy)
    return touched


def test_bad_input_raises_a_typed_error_and_spends_nothing(monkeypatch):
    touched = _spy_loss_values(monkeypatch)
    acct = dpcvx.Accountant(2.0)
    problem = _quadratic(_heavy_tailed(400))
    with pytest.raises(InvalidParameterError, match="delta"):
        problem.solve_private(_mech(), epsilon=1.0, delta=1e-6, rng=0, accountant=acct)
    big = _quadratic(np.zeros((400, 3)), d=3)
    with pytest.raises(InvalidParameterError, match="d <= 2"):
        big.solve_private(_mech(), epsilon=1.0, rng=0, accountant=acct)
    with pytest.raises(InvalidParameterError, match="max_points"):
        problem.solve_private(_mech(max_points=4), epsilon=1.0, rng=0, accountant=acct)
    with pytest.raises(InvalidParameterError, match="n >= 2"):
        _quadratic(_heavy_tailed(5)).solve_private(_mech(), epsilon=1.0, accountant=acct)
    w = cp.Variable(2)
    zp = cp.Parameter(2)
    triangle = dpcvx.Problem(
        cp.sum_squares(w - zp), w, {zp: np.zeros((40, 2))}, [w >= 0, w[0] + 2 * w[1] <= 1]
    )
    with pytest.raises(InvalidParameterError, match="exact Euclidean projection"):
        triangle.solve_private(_mech(), epsilon=1.0, rng=0, accountant=acct)
    with pytest.raises(PrivacyBudgetError):
        problem.solve_private(_mech(), epsilon=2.5, rng=0, accountant=acct)
    assert len(acct.ledger) == 0 and acct.spent.epsilon == 0.0 and not touched


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"smoothness": -1.0}, "smoothness"),
        ({"smoothing": 0.0}, "smoothing"),
        ({"max_points": 3}, "max_points"),
        ({"quadrature_nodes": 7}, "even"),
        ({"k": 1.5}, "k"),
        ({"second_moment": 3.0}, "Lyapunov"),
        ({"blocks": 0}, "blocks"),
    ],
)
def test_bad_parameters(kwargs, match):
    base = {"k": 4, "moment": 2.0, "smoothness": 1.0}
    base.update(kwargs)
    with pytest.raises(InvalidParameterError, match=match):
        PopLocalizeEMPGM(**base)
