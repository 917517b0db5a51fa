"""Tilted ERM (paper 002, Section 5.1): the certified solve against an independent CVXPY solve,
the sensitivity bound (2L/lam) min{1, C_tau/n} by brute force on tiny data, the mechanism."""

from __future__ import annotations

import itertools
import math

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.certification.tilted import certified_tilted_solve
from dpcvx.mechanisms.tilted import tilted_sensitivity


def _classification(n=120, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1, np.linalg.norm(X, axis=1, keepdims=True))
    Y = np.sign(X @ np.array([1.0, -0.5, 0.2])[:d] + 0.3 * rng.normal(size=n))
    return X, Y


@pytest.mark.parametrize("loss", ["hinge", "logistic"])
@pytest.mark.parametrize("tau", [0.1, 1.0, 5.0])
def test_certified_tilted_solve_brackets_an_independent_solve(loss, tau):
    X, Y = _classification()
    n, d = X.shape
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    expr = cp.pos(1 - y * (x @ w)) if loss == "hinge" else cp.logistic(-y * (x @ w))
    problem = dpcvx.Problem(expr, w, {x: X, y: Y}, [cp.norm(w, 2) <= 2])
    template, block = problem._compiled()
    lam = 0.1
    sol = certified_tilted_solve(
        problem.declaration, template, block, tilt=tau, lam=lam, w0=np.zeros(d), accuracy=None
    )
    W = cp.Variable(d)
    f = (
        cp.pos(1 - cp.multiply(Y, X @ W))
        if loss == "hinge"
        else cp.logistic(-cp.multiply(Y, X @ W))
    )
    ref = cp.Problem(
        cp.Minimize((cp.log_sum_exp(tau * f) - math.log(n)) / tau + lam / 2 * cp.sum_squares(W)),
        [cp.norm(W, 2) <= 2],
    )
    ref.solve(solver=cp.CLARABEL)
    # the reference is feasible, so it is above the true minimum and hence above `lower`; it is
    # accurate to about 1e-7, so it can sit slightly above dpcvx's (exact, feasible) upper bound
    assert sol.lower <= ref.value + 1e-9 and ref.value <= sol.upper + 1e-6
    assert sol.gap < 1e-5
    assert np.linalg.norm(sol.w) <= 2.0


def _tilted_minimizer(x, y, tau, lam):
    w = cp.Variable(1)
    f = cp.logistic(-cp.multiply(y, x * w))
    prob = cp.Problem(
        cp.Minimize(
            (cp.log_sum_exp(tau * f) - math.log(len(x))) / tau + lam / 2 * cp.sum_squares(w)
        ),
        [cp.abs(w) <= 1],
    )
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-9, tol_gap_rel=1e-9, tol_feas=1e-9)
    return float(w.value[0])


def test_sensitivity_bound_holds_by_brute_force_on_tiny_data():
    """n = 5, d = 1, logistic loss, |x| <= 1, |y| = 1, W = [-1, 1]: every loss value lies in
    [log(1 + e^-1), log(1 + e)], so Delta <= (2L/lam) min{1, C_tau/n} with L = 1. Every
    replacement of one example by a grid of values stays within it."""
    rng = np.random.default_rng(1)
    lam = 0.5
    bounds = (math.log(1 + math.exp(-1)), math.log(1 + math.e))
    for tau in (0.3, 1.0, 3.0):
        bound = tilted_sensitivity(1.0, lam, 5, tau, bounds)
        x = rng.uniform(-1, 1, size=5)
        y = np.sign(rng.normal(size=5))
        base = _tilted_minimizer(x, y, tau, lam)
        worst = 0.0
        for i, xv, yv in itertools.product(range(5), np.linspace(-1, 1, 9), (-1.0, 1.0)):
            x2, y2 = x.copy(), y.copy()
            x2[i], y2[i] = xv, yv
            worst = max(worst, abs(_tilted_minimizer(x2, y2, tau, lam) - base))
        assert worst <= bound + 1e-6
    assert tilted_sensitivity(1.0, lam, 5, 100.0, bounds) == 2.0 / lam  # C_tau >= n


def test_mechanism_plan_ledger_and_bad_input():
    X, Y = _classification(n=300)
    d = X.shape[1]
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    problem = dpcvx.Problem(cp.logistic(-y * (x @ w)), w, {x: X, y: Y}, [cp.norm(w, 2) <= 1])
    mech = dpcvx.TiltedOutputPerturbation(
        lipschitz=1.0, regularization=0.1, tilt=1.0, loss_bounds=(0.0, math.log(1 + math.e))
    )
    plan = mech.plan(n=300, d=d, center=np.zeros(d), diameter=2.0, epsilon=1.0, delta=0.0)
    base = (2 * 1.0 / 0.1) * math.exp(math.log(1 + math.e)) / 300
    assert plan.detail["base_sensitivity"] == pytest.approx(base)
    assert plan.noise.scale == pytest.approx(plan.sensitivity.value / 1.0)
    res = problem.solve_private(mech, epsilon=1.0, rng=0)
    assert len(res.ledger) == 1 and np.linalg.norm(res.w) <= 1.0
    for bad in (
        dict(tilt=0.0),
        dict(loss_bounds=(1.0, 0.0)),
        dict(loss_bounds="x"),
        dict(regularization=-1.0),
    ):
        kwargs = dict(lipschitz=1.0, regularization=0.1, tilt=1.0)
        kwargs.update(bad)
        with pytest.raises(dpcvx.InvalidParameterError):
            dpcvx.TiltedOutputPerturbation(**kwargs)


def _hinge_tilted_on_extension(X, Y, tau, lam, L, accuracy):
    """A hinge problem on the unit ball and its certified tilted solve on the L-extension."""
    from dpcvx.certification.tilted import certified_tilted_solve

    d = X.shape[1]
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    problem = dpcvx.Problem(
        cp.pos(1 - y * (x @ w)), w, data={x: X, y: Y}, domain=[cp.norm(w, 2) <= 1]
    )
    plain, block = problem._compiled(None)
    ext, _ = problem._compiled(L)
    cert = certified_tilted_solve(
        problem.declaration,
        ext,
        block,
        tilt=tau,
        lam=lam,
        w0=np.zeros(d),
        accuracy=accuracy,
        extension=L,
        plain_template=plain,
    )
    return problem, cert


def test_the_lipschitz_claim_is_enforced_with_the_extension():
    """With a claim L far below the data's slopes, the tilted release solves tilted ERM on the
    L-Lipschitz extension: its certified bracket contains an independent CVXPY solve of
    min_{w, y_i in W} (1/tau) log mean exp(tau (f(y_i) + L ||w - y_i||)) + (lam/2)||w - w0||^2
    (f_L is increasing inside, so minimizing the copies jointly is exact)."""
    rng = np.random.default_rng(9)
    n, d, tau, lam, L = 20, 2, 2.0, 0.5, 0.5
    X = rng.normal(size=(n, d)) * 5.0
    Y = np.sign(X[:, 0] + 0.3)
    problem, cert = _hinge_tilted_on_extension(X, Y, tau, lam, L, accuracy=1e-6)
    v = cp.Variable(d)
    Ys = cp.Variable((n, d))
    losses = cp.hstack(
        [cp.pos(1 - Y[i] * (X[i] @ Ys[i])) + L * cp.norm(v - Ys[i]) for i in range(n)]
    )
    obj = (cp.log_sum_exp(tau * losses) - np.log(n)) / tau + lam / 2 * cp.sum_squares(v)
    cons = [cp.norm(v, 2) <= 1] + [cp.norm(Ys[i], 2) <= 1 for i in range(n)]
    ref = cp.Problem(cp.Minimize(obj), cons)
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    tol = 1e-7 * (1 + abs(ref.value))
    assert cert.lower <= ref.value + tol and ref.value <= cert.upper + tol
    assert cert.gap <= 1e-6
    # the release goes through the same path (and would warn nothing: the claim is enforced)
    mech = dpcvx.TiltedOutputPerturbation(lipschitz=L, regularization=lam, tilt=tau)
    res = problem.solve_private(mech, epsilon=1.0, rng=0)
    assert np.all(np.isfinite(res.w)) and problem.domain.contains(res.w)


def test_an_example_outside_the_universe_enters_with_the_zero_loss():
    """One example 1e9 times steeper than the claim: it leaves the public universe of the
    extension solve and enters the tilted sum as exp(0). The certified bracket contains an
    independent solve of exactly that objective, and the release happens."""
    rng = np.random.default_rng(11)
    n, d, tau, lam, L = 16, 2, 1.0, 0.5, 1.0
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    Y = np.sign(X[:, 0] + 0.2)
    X[0] *= 1e9
    problem, cert = _hinge_tilted_on_extension(X, Y, tau, lam, L, accuracy=1e-7)
    assert cert.solver_stats["null_examples"] == 1
    v = cp.Variable(d)
    # the other examples are 1-Lipschitz on the ball (||x|| <= 1): f_L = f for them
    losses = cp.hstack([cp.pos(1 - Y[i] * (X[i] @ v)) for i in range(1, n)] + [0.0])
    obj = (cp.log_sum_exp(tau * losses) - np.log(n)) / tau + lam / 2 * cp.sum_squares(v)
    ref = cp.Problem(cp.Minimize(obj), [cp.norm(v, 2) <= 1])
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    tol = 1e-8 * (1 + abs(ref.value))
    assert cert.lower <= ref.value + tol and ref.value <= cert.upper + tol
    mech = dpcvx.TiltedOutputPerturbation(lipschitz=L, regularization=lam, tilt=tau)
    res = problem.solve_private(mech, epsilon=1.0, rng=0)
    assert np.all(np.isfinite(res.w)) and problem.domain.contains(res.w)


def test_a_tilted_program_over_the_size_limit_is_not_stamped(monkeypatch):
    """A loss without tilted ERM's smooth path (the hinge loss): a program over the ladder's
    size limit (counted from n and the template only) raises ``CertificationError`` naming it
    before anything is stamped or solved, and the fixed private text when private. At the
    limit it solves."""
    import dpcvx.certification.solve as S
    import dpcvx.certification.tilted as T
    from dpcvx.errors import CertificationError

    X, Y = _classification()
    n, d = X.shape
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    problem = dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, {x: X, y: Y}, [cp.norm(w, 2) <= 2])
    template, block = problem._compiled()
    stamped = []
    stamp = T.stamp

    def recording(*args, **kwargs):
        stamped.append(args)
        return stamp(*args, **kwargs)

    monkeypatch.setattr(T, "stamp", recording)
    args = dict(tilt=1.0, lam=0.1, w0=np.zeros(d), accuracy=None)
    monkeypatch.setattr(S, "MAX_PROGRAM_NNZ", S._conic_size(n, template, None) - 1)
    with pytest.raises(CertificationError, match="not stamped"):
        certified_tilted_solve(problem.declaration, template, block, **args)
    with pytest.raises(CertificationError) as private:
        certified_tilted_solve(problem.declaration, template, block, private=True, **args)
    assert "not stamped" not in str(private.value)  # the fixed text, no number in it
    assert not stamped
    monkeypatch.setattr(S, "MAX_PROGRAM_NNZ", S._conic_size(n, template, None))
    assert certified_tilted_solve(problem.declaration, template, block, **args).gap < 1e-5
    assert stamped
