"""The quasi-Newton first rung for smooth losses (chosen from public structure): scipy's
L-BFGS-B on vectorized values and gradients, then dpcvx's own certificate (smooth terms take
their multipliers from their derivatives). Checked against independent CVXPY solves; an active
ball hands over to the interior-point ladder."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import dpcvx

N, D, LAM = 2000, 5, 0.05


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    Y = np.sign(X @ rng.normal(size=D) + 0.5 * rng.normal(size=N))
    return X, Y


@pytest.mark.parametrize("loss", ["logistic", "squared", "huber"])
@pytest.mark.parametrize("domain", ["ball", "box"])
def test_smooth_losses_are_certified_by_the_quasi_newton_rung(loss, domain):
    X, Y = _data()
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    expr = {
        "logistic": cp.logistic(-y * (x @ w)),
        "squared": cp.square(x @ w - y),
        "huber": cp.huber(x @ w - y, 1.0),
    }[loss]
    dom = [cp.norm(w, 2) <= 50] if domain == "ball" else [w >= -0.2, w <= 0.2]
    problem = dpcvx.Problem(expr, w, data={x: X, y: Y}, domain=dom)
    sol = problem.solve(regularization=LAM, center=np.zeros(D), accuracy=1e-9)
    assert sol.solver_stats["solver"] == "L-BFGS-B"
    assert sol.gap <= 1e-9
    v = cp.Variable(D)
    whole = {
        "logistic": cp.logistic(-cp.multiply(Y, X @ v)),
        "squared": cp.square(X @ v - Y),
        "huber": cp.huber(X @ v - Y, 1.0),
    }[loss]
    cons = [cp.norm(v, 2) <= 50] if domain == "ball" else [v >= -0.2, v <= 0.2]
    ref = cp.Problem(cp.Minimize(cp.sum(whole) / N + LAM / 2 * cp.sum_squares(v)), cons)
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    tol = 1e-9 * (1 + abs(ref.value))
    assert sol.lower <= ref.value + tol and ref.value <= sol.upper + tol


def test_an_active_ball_hands_over_to_the_interior_point_ladder():
    X, Y = _data(1)
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    problem = dpcvx.Problem(
        cp.square(x @ w - 3 * y), w, data={x: X, y: Y}, domain=[cp.norm(w, 2) <= 0.1]
    )
    sol = problem.solve(regularization=LAM, center=np.zeros(D), accuracy=1e-9)
    assert sol.gap <= 1e-9
    assert sol.solver_stats["solver"] != "L-BFGS-B"
    assert sol.solver_stats["attempts"][0]["solver"] == "L-BFGS-B"


def test_a_nonsmooth_loss_never_takes_the_quasi_newton_rung():
    X, Y = _data(2)
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    problem = dpcvx.Problem(
        cp.pos(1 - y * (x @ w)), w, data={x: X, y: Y}, domain=[cp.norm(w, 2) <= 50]
    )
    sol = problem.solve(regularization=LAM, accuracy=1e-8)
    assert all(a["solver"] != "L-BFGS-B" for a in sol.solver_stats["attempts"])
