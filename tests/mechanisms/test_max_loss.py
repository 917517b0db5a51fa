"""The max-loss objective ``max_i f(w, z_i) + (lam/2)||w - w0||^2`` (paper 002, Section 5.1,
``tau -> inf``) through :class:`TiltedOutputPerturbation` with ``tilt=math.inf``: the plan
against the closed form ``2L/lam + 2 sqrt(2 alpha/lam)`` (no ``1/n``); dpcvx's simplex-dual
certificate against high-accuracy CVXPY solves and a brute-force grid; the worst-case move of
the certified minimizers; an exact and a sampled audit on a neighboring pair with negative
controls that must be caught; refusals that spend nothing.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.audit import audit
from dpcvx.certification.tilted import _simplex_weights
from dpcvx.errors import InvalidParameterError
from dpcvx.mechanisms.tilted import TiltedOutputPerturbation, tilted_sensitivity

T = TiltedOutputPerturbation
INF = math.inf


def _context(problem):
    return problem.release_context(extension=None, solver=None)


def _regression(n=25, d=2, seed=0, radius=2.0) -> tuple[dpcvx.Problem, np.ndarray, np.ndarray]:
    """``|<x_i, w> - y_i|`` on the l2 ball of radius 2."""
    rng = np.random.default_rng(seed)
    X, y = rng.normal(size=(n, d)), rng.normal(size=n)
    w, x, yy = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    problem = dpcvx.Problem(cp.abs(x @ w - yy), w, {x: X, yy: y}, dpcvx.domains.l2_ball(w, radius))
    return problem, X, y


def _hinge(n=25, d=2, seed=1) -> tuple[dpcvx.Problem, np.ndarray, np.ndarray]:
    """``max(0, 1 - y_i <x_i, w>)`` on the box ``[-1, 1]^d``."""
    rng = np.random.default_rng(seed)
    X, y = rng.normal(size=(n, d)), np.sign(rng.normal(size=n))
    w, x, yy = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    problem = dpcvx.Problem(
        cp.pos(1 - yy * (x @ w)), w, {x: X, yy: y}, dpcvx.domains.box(w, -np.ones(d), np.ones(d))
    )
    return problem, X, y


def _reference(kind, X, y, lam, w0):
    """min_W max_i f_i(w) + (lam/2)||w - w0||^2 by CVXPY (Clarabel, tight)."""
    W = cp.Variable(X.shape[1])
    if kind == "regression":
        loss, cons = cp.max(cp.abs(X @ W - y)), [cp.norm(W, 2) <= 2.0]
    else:
        loss, cons = cp.max(cp.pos(1 - cp.multiply(y, X @ W))), [W <= 1, W >= -1]
    ref = cp.Problem(cp.Minimize(loss + lam / 2 * cp.sum_squares(W - w0)), cons)
    ref.solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return ref.value, W.value


# ---------------------------------------------------------------- the plan, from public numbers
@pytest.mark.parametrize("n", [5, 50, 5000])
def test_plan_is_the_non_erm_closed_form(n):
    """Delta = 2L/lam + 2 sqrt(2 alpha/lam), alpha such that the inflation is 5% of 2L/lam
    (floored at 1e-9 (1 + L D)), noise scale Delta/epsilon: the same for every n."""
    L, lam, eps, D = 3.0, 0.5, 2.0, 2.0
    plan = T(lipschitz=L, regularization=lam, tilt=INF).plan(
        n=n, d=2, center=np.zeros(2), diameter=D, epsilon=eps, delta=0.0
    )
    base = 2 * L / lam
    alpha = max((0.025 * base) ** 2 * lam / 2, 1e-9 * (1 + L * D))
    total = base + 2 * math.sqrt(2 * alpha / lam)
    assert tilted_sensitivity(L, lam, n, INF) == base
    assert tilted_sensitivity(L, lam, n, INF, (0.0, 0.0)) == base  # C_inf: no improvement
    assert plan.accuracy == pytest.approx(alpha, rel=1e-15)
    assert plan.sensitivity.value == pytest.approx(total, rel=1e-15)
    assert plan.sensitivity.value >= total
    assert plan.noise.kind == "l2_laplace" and plan.noise.scale == pytest.approx(total / eps)
    assert plan.tilt == INF and plan.detail["objective"] == "max-loss"
    (event,) = plan.events("x")
    assert event.kind == "pure" and event.epsilon == eps


def test_approximate_dp_uses_the_same_sensitivity():
    plan = T(lipschitz=1.0, regularization=1.0, tilt=INF).plan(
        n=10, d=1, center=np.zeros(1), diameter=2.0, epsilon=1.0, delta=1e-6
    )
    assert plan.noise.kind == "gaussian" and plan.noise.sensitivity == plan.sensitivity.value


# ---------------------------------------------------------------- the certificate
@pytest.mark.parametrize("kind", ["regression", "hinge"])
@pytest.mark.parametrize("lipschitz", [None, 10.0])
@pytest.mark.parametrize("lam", [0.1, 1.0])
def test_certified_value_brackets_a_high_accuracy_cvxpy_solve(kind, lipschitz, lam):
    """Plain program (lipschitz=None) and the enforced-claim program (every example certified
    10-Lipschitz here, so it is the same objective): lower <= min <= upper, gap <= accuracy,
    and the certified point within sqrt(2 gap/lam) of CVXPY's minimizer."""
    problem, X, y = _regression() if kind == "regression" else _hinge()
    w0 = np.zeros(2)
    solve = _context(problem).tilted_solver(INF, None, lipschitz=lipschitz)
    cert = solve(lam, w0, 1e-7)
    value, w_ref = _reference(kind, X, y, lam, w0)
    assert cert.gap <= 1e-7 and cert.lower <= cert.upper
    assert cert.lower <= value + 1e-9 and value <= cert.upper + 1e-9
    assert np.linalg.norm(cert.w - w_ref) <= math.sqrt(2 * cert.gap / lam) + 1e-6
    assert problem.domain.contains(cert.w)


def test_certified_lower_bound_against_a_brute_force_grid():
    """1-d: f_i(w) = |w - z_i| on [-1, 1]; max_i f_i + (lam/2) w^2 on a grid of 200001 points:
    the certificate's lower bound is below every grid value and its upper bound is within the
    gap of the grid minimum."""
    z = np.random.default_rng(4).uniform(-1, 1, 31)
    w, zp = cp.Variable(1), cp.Parameter()
    problem = dpcvx.Problem(cp.abs(w[0] - zp), w, {zp: z}, dpcvx.domains.box(w, -1.0, 1.0))
    lam = 0.7
    cert = _context(problem).tilted_solver(INF)(lam, np.zeros(1), 1e-8)
    grid = np.linspace(-1, 1, 200_001)
    values = np.max(np.abs(grid[:, None] - z[None, :]), axis=1) + lam / 2 * grid**2
    assert cert.lower <= float(np.min(values))
    # the certified point's value is within the gap of min F <= the grid minimum
    assert cert.upper <= float(np.min(values)) + cert.gap + 1e-12
    # F is (1 + lam)-Lipschitz and the grid spacing is 1e-5: min F >= grid min - 1.7e-5
    assert cert.lower >= float(np.min(values)) - (1 + lam) * 1e-5 - 1e-8


def test_simplex_weights_are_a_point_of_the_simplex():
    p = _simplex_weights(np.array([0.2, -1e-9, 0.6, math.nan]), np.zeros(4))
    assert np.all(p >= 0) and math.isclose(float(np.sum(p)), 1.0)
    assert p[1] == 0 and p[3] == 0
    p = _simplex_weights(np.zeros(3), np.array([0.0, 2.0, 1.0]))  # vanishing duals: arg-max
    assert p.tolist() == [0.0, 1.0, 0.0]


def test_a_false_claim_runs_on_the_extension_and_is_still_certified():
    """Squared loss (w - z)^2 on [-1, 1] with one example at 50 and L = 1 (false): the solve
    runs on the 1-Lipschitz extension, with the unshown examples entering as the zero loss;
    the certificate stays consistent and meets its target."""
    z = np.zeros(12)
    z[0] = 50.0
    w, zp = cp.Variable(1), cp.Parameter()
    problem = dpcvx.Problem(cp.square(w[0] - zp), w, {zp: z}, dpcvx.domains.box(w, -1.0, 1.0))
    cert = _context(problem).tilted_solver(INF, None, lipschitz=1.0)(1.0, np.zeros(1), 1e-7)
    assert cert.lower <= cert.upper and cert.gap <= 1e-7
    res = problem.solve_private(T(lipschitz=1.0, regularization=1.0, tilt=INF), epsilon=1.0, rng=0)
    assert -1.0 <= res.w[0] <= 1.0


# ---------------------------------------------------------------- privacy
def _max_pair(n=10, others=1.0):
    """Linear loss x w on [-1, 1], n - 1 records x = +1, the last +1 vs -1: max_i x_i w is
    w vs |w|, so with lam = 4 the minimizers are -1/4 and 0 (2L/lam = 1/2 bounds the move)."""
    from dpcvx.audit import build_pair
    from dpcvx.mechanisms.registry import WorstCasePair

    return build_pair(WorstCasePair(loss="linear", n=n, value=1.0, others=others))


class _Cached:
    """A release context whose tilted solve is computed once (deterministic), as the audit
    does for the other mechanisms' solves; everything else is the problem's own."""

    def __init__(self, problem):
        self._ctx = _context(problem)
        self._cache: dict = {}

    def __getattr__(self, name):
        return getattr(self._ctx, name)

    def tilted_solver(self, tilt, solver=None, lipschitz=None):
        inner = self._ctx.tilted_solver(tilt, solver, lipschitz=lipschitz)

        def solve(lam, w0, alpha):
            key = (lam, tuple(np.asarray(w0, float)), alpha)
            if key not in self._cache:
                self._cache[key] = inner(lam, w0, alpha)
            return self._cache[key]

        return solve


def _releaser(mech, problem, epsilon, factor=1.0):
    plan = mech.plan(
        n=problem.n,
        d=problem.d,
        center=problem.domain.center,
        diameter=problem.diameter,
        epsilon=epsilon,
        delta=0.0,
    )
    if factor != 1.0:  # negative control: noise for factor * epsilon, charged epsilon
        from dpcvx.mechanisms.noise import calibrate

        noise = calibrate(plan.sensitivity.value, factor * epsilon, 0.0)
        plan = SimpleNamespace(**{k: getattr(plan, k) for k in plan.__dataclass_fields__})
        plan.noise = noise
    ctx = _Cached(problem)
    return lambda rng: mech.release(plan, ctx, rng).w


def test_certified_minimizers_move_by_at_most_the_sensitivity():
    """Exact audit of the 1-d release: the output is Pi_[-1,1](w~ + z) with l2-Laplace z, whose
    privacy loss is |w~_0 - w~_1| / scale exactly (the densities and the end atoms alike). It
    must be <= epsilon; the control (scale / 4) must exceed it."""
    p0, p1 = _max_pair()
    mech = T(lipschitz=1.0, regularization=4.0, tilt=INF)
    plan = mech.plan(n=10, d=1, center=np.zeros(1), diameter=2.0, epsilon=1.0, delta=0.0)
    w = [
        _context(p).tilted_solver(INF, None, lipschitz=1.0)(4.0, np.zeros(1), plan.accuracy).w[0]
        for p in (p0, p1)
    ]
    assert w[0] == pytest.approx(-0.25, abs=1e-3) and w[1] == pytest.approx(0.0, abs=1e-3)
    move = abs(w[0] - w[1])
    assert move <= plan.sensitivity.value
    exact = move / plan.noise.scale
    assert exact <= 1.0  # measured 0.476
    assert 4 * exact > 1.0  # the control leaks 1.9 epsilon


@pytest.mark.statistical
def test_sampled_audit_and_a_caught_negative_control():
    """2000 seeded releases per dataset through the mechanism's own release (the
    deterministic solve cached), fixed thresholds, Clopper-Pearson at total level 1e-3 (the
    false-failure rate of the first assertion). Control: noise for 4 epsilon, charged
    epsilon (true loss 1.9 epsilon on this pair). Measured: 0.27 and 1.50."""
    pair = _max_pair()
    mech = T(lipschitz=1.0, regularization=4.0, tilt=INF)
    kwargs = dict(epsilon=1.0, runs=2000, thresholds=(-0.2, -0.125, -0.05), progress=False)
    fns = [_releaser(mech, p, 1.0) for p in pair]
    ok = audit(lambda data, rng: fns[data](rng), (0, 1), seed=0, **kwargs)
    assert ok.lower_bound <= 1.0
    bad = [_releaser(mech, p, 1.0, factor=4.0) for p in pair]
    control = audit(lambda data, rng: bad[data](rng), (0, 1), seed=1, **kwargs)
    assert control.lower_bound > 1.0


# ---------------------------------------------------------------- refusals
def test_bad_input_is_refused_before_anything_is_spent():
    with pytest.raises(InvalidParameterError, match="loss_bounds"):
        T(lipschitz=1.0, regularization=1.0, tilt=INF, loss_bounds=(0.0, 1.0))
    with pytest.raises(InvalidParameterError, match="tilt"):
        T(lipschitz=1.0, regularization=1.0, tilt=-INF)
    with pytest.raises(InvalidParameterError, match="tilt"):
        T(lipschitz=1.0, regularization=1.0, tilt=math.nan)
    with pytest.raises(InvalidParameterError, match="regularization"):
        T(lipschitz=1.0, regularization=0.0, tilt=INF)
    p0, _ = _max_pair()
    acct = dpcvx.Accountant(1.0)
    with pytest.raises(InvalidParameterError):
        p0.solve_private(
            T(lipschitz=1.0, regularization=1.0, tilt=INF, center=[0.0, 0.0]),
            epsilon=1.0,
            rng=0,
            accountant=acct,
        )
    with pytest.raises(dpcvx.PrivacyBudgetError):
        p0.solve_private(
            T(lipschitz=1.0, regularization=1.0, tilt=INF), epsilon=2.0, rng=0, accountant=acct
        )
    assert len(acct.ledger) == 0 and acct.spent.epsilon == 0.0
    res = p0.solve_private(
        T(lipschitz=1.0, regularization=1.0, tilt=INF), epsilon=1.0, rng=0, accountant=acct
    )
    assert len(acct.ledger) == 1 and res.detail["objective"] == "max-loss"
