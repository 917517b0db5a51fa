"""Double-OutputPert (paper 000, Algorithm 4 with Algorithm 2): constants, release, audit."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import cvxpy as cp
import numpy as np
import pytest
from scipy.stats import gamma

import dpcvx
from dpcvx.mechanisms import noise as noise_mod
from tests.audit_tools import epsilon_lower_bound


def _outlier_pair(n: int = 10, outlier: float = 1e4):
    """Linear loss x * w on [-1, 1] with a heavy-tailed outlier +-outlier in the last example:
    the gradient is unbounded, but f_C is C-Lipschitz and the extension ERM minimizers differ
    by exactly 2C/(lam n) (worst case)."""
    w = cp.Variable(1)
    x = cp.Parameter(1)
    X0 = np.zeros((n, 1))
    X1 = np.zeros((n, 1))
    X0[-1], X1[-1] = outlier, -outlier
    dom = dpcvx.domains.box(w, -1.0, 1.0)
    return (
        dpcvx.Problem(x @ w, w, data={x: X0}, domain=dom),
        dpcvx.Problem(x @ w, w, data={x: X1}, domain=dom),
    )


def test_tight_constants():
    mech = dpcvx.DoubleOutputPerturbation(C=2.0, regularization=0.5)
    n, d, eps = 100, 3, 1.0
    plan = mech.plan(n=n, d=d, center=np.zeros(d), diameter=2.0, epsilon=eps, delta=0.0)
    base = 2 * 2.0 / (0.5 * n)
    assert plan.base_sensitivity == pytest.approx(base)
    a1, a2 = plan.localization_accuracy, plan.accuracy
    assert plan.localization_sensitivity == pytest.approx(base + 2 * math.sqrt(2 * a1 / 0.5))
    assert plan.sensitivity.value == pytest.approx(base + 2 * math.sqrt(2 * a2 / 0.5))
    # each stage spends exactly epsilon / 2
    assert plan.localization_noise.scale == pytest.approx(plan.localization_sensitivity / 0.5)
    assert plan.noise.scale == pytest.approx(plan.sensitivity.value / 0.5)
    q = gamma.ppf(1 - math.exp(-3.0), d)
    assert plan.radius == pytest.approx(math.sqrt(2 * a1 / 0.5) + plan.localization_noise.scale * q)


def test_paper_constants_reproduce_the_printed_algorithm_4():
    mech = dpcvx.DoubleOutputPerturbation(C=2.0, regularization=0.5, constants="paper")
    n, d, eps = 100, 3, 1.0
    plan = mech.plan(n=n, d=d, center=np.zeros(d), diameter=2.0, epsilon=eps, delta=0.0)
    assert plan.localization_accuracy == pytest.approx(2.0**2 / (2 * 0.5 * n**2))
    assert plan.accuracy == pytest.approx(2.0**2 / (72 * 0.5 * n**2))
    printed_scale = 12 * 2.0 / (eps * 0.5 * n)
    assert plan.noise.scale == pytest.approx(printed_scale)
    assert plan.localization_noise.scale == pytest.approx(printed_scale)
    assert plan.radius == pytest.approx(600 * 2.0 * d / (0.5 * n * eps))
    # the printed noise is at least the exact requirement (valid, loose: digest E1/E2)
    assert plan.noise.scale >= plan.sensitivity.value / (eps / 2)


@pytest.mark.parametrize(
    "kwargs",
    [{"C": 0.0}, {"C": -1.0}, {"regularization": 0.0}, {"zeta": 0.0}, {"constants": "loose"}],
)
def test_bad_parameters(kwargs):
    base = {"C": 1.0, "regularization": 0.1}
    base.update(kwargs)
    with pytest.raises(dpcvx.InvalidParameterError):
        dpcvx.DoubleOutputPerturbation(**base)


def test_delta_must_be_zero_and_nothing_is_spent():
    p0, _ = _outlier_pair()
    acct = dpcvx.Accountant(2.0, 1e-3)
    mech = dpcvx.DoubleOutputPerturbation(C=1.0, regularization=1.0)
    with pytest.raises(dpcvx.InvalidParameterError, match="delta"):
        p0.solve_private(mech, epsilon=1.0, delta=1e-6, accountant=acct)
    assert len(acct.ledger) == 0


def test_release_on_heavy_tailed_data():
    rng = np.random.default_rng(1)
    n, d = 200, 3
    X = rng.standard_t(2.0, size=(n, d)) * 5  # no usable Lipschitz bound for the hinge loss
    Y = np.sign(X @ rng.normal(size=d) + 0.1)
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    problem = dpcvx.Problem(
        cp.pos(1 - y * (x @ w)), w, data={x: X, y: Y}, domain=[cp.norm(w, 2) <= 1]
    )
    acct = dpcvx.Accountant(1.0)
    res = problem.solve_private(
        dpcvx.DoubleOutputPerturbation(C=1.0, regularization=0.1),
        epsilon=1.0,
        rng=2,
        accountant=acct,
    )
    assert np.linalg.norm(res.w) <= 1.0
    assert len(res.certificates) == 2 and len(acct.ledger) == 1
    assert acct.spent.epsilon == pytest.approx(1.0)
    assert res.detail["extension_C"] == 1.0


def _audit(problem, mech, plan, runs, seed):
    """The full two-stage release, `runs` times. Stage 1's certified solve is deterministic for
    fixed data and is computed once; stage 2 depends on the random W0 and is solved every run."""
    from dpcvx.certification.solve import certified_solve

    decl = problem.declaration
    template, block = problem._compiled(mech.C)
    first = certified_solve(
        decl,
        template,
        block,
        lam=plan.regularization,
        w0=plan.center,
        accuracy=plan.localization_accuracy,
        extension=mech.C,
    )

    def solve(lam, w0, alpha, localize=None, candidate=None):
        if localize is None:
            return first
        return problem.lipschitz_extension(mech.C).solve(
            lam, center=w0, accuracy=alpha, localize=localize
        )

    # the release's data access: this solve and the problem's projection
    context = SimpleNamespace(solver=lambda: solve, project=problem.project, domain=problem.domain)
    rng = np.random.default_rng(seed)
    return np.array([mech.release(plan, context, rng).w[0] for _ in range(runs)])


@pytest.mark.slow
@pytest.mark.statistical
def test_privacy_audit_with_a_heavy_tailed_outlier_and_negative_control():
    # Clopper-Pearson with Bonferroni at total level 1e-3: the correct mechanism fails with
    # probability <= 1e-3. The control spends 10x the budget in stage 2 (true epsilon ~ 5.5)
    # and must be caught.
    eps, runs = 1.0, 1500
    p0, p1 = _outlier_pair()
    mech = dpcvx.DoubleOutputPerturbation(C=1.0, regularization=1.0)
    plan = mech.plan(n=10, d=1, center=np.zeros(1), diameter=2.0, epsilon=eps, delta=0.0)
    thresholds = [-0.1, 0.0, 0.1]
    o0, o1 = _audit(p0, mech, plan, runs, 1), _audit(p1, mech, plan, runs, 2)
    assert epsilon_lower_bound(o0, o1, thresholds, alpha=1e-3) <= eps
    bad = dataclasses.replace(
        plan, noise=noise_mod.calibrate(plan.sensitivity.value, 10 * eps / 2, 0.0)
    )
    c0, c1 = _audit(p0, mech, bad, runs, 3), _audit(p1, mech, bad, runs, 4)
    assert epsilon_lower_bound(c0, c1, thresholds, alpha=1e-3) > eps


def test_accuracy_override_is_used_by_both_stages_and_calibrated():
    mech = dpcvx.DoubleOutputPerturbation(C=2.0, regularization=0.5, accuracy=0.01)
    plan = mech.plan(n=100, d=3, center=np.zeros(3), diameter=2.0, epsilon=1.0, delta=0.0)
    assert plan.accuracy == plan.localization_accuracy == 0.01
    base = 2 * 2.0 / (0.5 * 100)
    assert plan.sensitivity.value == pytest.approx(base + 2 * math.sqrt(2 * 0.01 / 0.5))
    assert plan.noise.scale == pytest.approx(plan.sensitivity.value / 0.5)
    with pytest.raises(dpcvx.InvalidParameterError, match="accuracy"):
        dpcvx.DoubleOutputPerturbation(C=2.0, regularization=0.5, accuracy=0.0)


def test_output_pert_localize_paper_constants_are_the_printed_algorithm_2():
    mech = dpcvx.OutputPertLocalize(C=2.0, regularization=0.5, constants="paper", zeta=2.0)
    n, d, eps = 100, 3, 0.7
    plan = mech.plan(n=n, d=d, center=np.zeros(d), diameter=2.0, epsilon=eps, delta=0.0)
    assert plan.accuracy == pytest.approx(2.0**2 / (2 * 0.5 * n**2))
    assert plan.noise.scale == pytest.approx(6 * 2.0 / (0.5 * n * eps))  # exp(-eps lam n|b|/6C)
    assert plan.radius == pytest.approx(100 * 2.0 * 2.0 * d / (0.5 * n * eps))
    # the printed noise covers the true sensitivity: valid (it spends 2 eps / 3, erratum E1)
    assert plan.noise.scale >= plan.sensitivity.value / eps


def test_output_pert_localize_is_the_first_stage_of_double_output_perturbation():
    kwargs = dict(C=2.0, regularization=0.5)
    n, d = 100, 3
    single = dpcvx.OutputPertLocalize(**kwargs).plan(
        n=n, d=d, center=np.zeros(d), diameter=2.0, epsilon=0.5, delta=0.0
    )
    double = dpcvx.DoubleOutputPerturbation(**kwargs).plan(
        n=n, d=d, center=np.zeros(d), diameter=2.0, epsilon=1.0, delta=0.0
    )
    assert single.accuracy == double.localization_accuracy
    assert single.noise.scale == double.localization_noise.scale
    assert single.radius == double.radius


def test_output_pert_localize_releases_a_center_in_the_domain_and_its_radius():
    p0, _ = _outlier_pair()
    acct = dpcvx.Accountant(1.0)
    res = p0.solve_private(
        dpcvx.OutputPertLocalize(C=1.0, regularization=1.0), epsilon=1.0, rng=0, accountant=acct
    )
    assert p0.domain.contains(res.w) and res.detail["localization_radius"] > 0
    assert len(acct.ledger) == 1 and res.mechanism.startswith("OutputPertLocalize")
    with pytest.raises(dpcvx.InvalidParameterError, match="pure"):
        p0.solve_private(
            dpcvx.OutputPertLocalize(C=1.0, regularization=1.0), epsilon=1.0, delta=1e-6
        )


def test_default_C_comes_from_the_moment_bound():
    mech = dpcvx.DoubleOutputPerturbation(regularization=1.0, moment=2.0, k=4)
    plan = mech.plan(n=10, d=1, center=np.zeros(1), diameter=2.0, epsilon=1.0, delta=0.0)
    assert plan.extension_C == pytest.approx(2.0 * (10 * 1.0 / 1) ** 0.25)
    p0, _ = _outlier_pair()
    res = p0.solve_private(mech, epsilon=1.0, rng=0)
    assert res.detail["extension_C"] == pytest.approx(plan.extension_C)
    with pytest.raises(dpcvx.InvalidParameterError, match="moment"):
        dpcvx.DoubleOutputPerturbation(regularization=1.0)
    with pytest.raises(dpcvx.InvalidParameterError, match="at least 2"):
        dpcvx.DoubleOutputPerturbation(regularization=1.0, moment=2.0, k=1.5)
    acct = dpcvx.Accountant(1.0)
    with pytest.raises(dpcvx.InvalidParameterError, match="planned its noise"):
        p0.lipschitz_extension(100.0).solve_private(mech, epsilon=1.0, accountant=acct)
    assert acct.spent.epsilon == 0.0
