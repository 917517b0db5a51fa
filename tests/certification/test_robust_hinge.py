"""Adversarially robust training of linear models (paper 002, Section 5.2): for l2-bounded input
perturbations the worst-case hinge loss is the DCP expression pos(1 - y x.w + rho ||w||), so it
goes through the ordinary certified path. Checked against the inner maximization and an
independent CVXPY solve."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import dpcvx


def _data(n=60, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    Y = np.sign(X @ np.array([1.0, -0.5, 0.25]) + 0.2 * rng.normal(size=n))
    return X, Y


def test_robust_hinge_is_the_worst_case_over_the_perturbation_ball():
    X, Y = _data()
    rho = 0.3
    rng = np.random.default_rng(1)
    for _ in range(20):
        w = rng.normal(size=3)
        closed = np.maximum(0.0, 1 - Y * (X @ w) + rho * np.linalg.norm(w))
        # the maximizing perturbation is -rho y w / ||w||; random ones never exceed it
        worst = np.maximum(0.0, 1 - Y * ((X - rho * Y[:, None] * w / np.linalg.norm(w)) @ w))
        assert np.allclose(closed, worst)
        for _ in range(10):
            delta = rng.normal(size=X.shape)
            delta *= (
                rho
                * rng.uniform(0, 1, size=(len(X), 1))
                / np.linalg.norm(delta, axis=1, keepdims=True)
            )
            assert np.all(np.maximum(0.0, 1 - Y * ((X + delta) @ w)) <= closed + 1e-12)


def test_robust_hinge_certified_solve_brackets_an_independent_solve():
    X, Y = _data()
    rho, lam = 0.3, 0.1
    w = cp.Variable(3)
    x = cp.Parameter(3)
    y = cp.Parameter()
    problem = dpcvx.Problem(
        cp.pos(1 - y * (x @ w) + rho * cp.norm(w, 2)), w, {x: X, y: Y}, [cp.norm(w, 2) <= 2]
    )
    sol = problem.solve(regularization=lam)
    W = cp.Variable(3)
    ref = cp.Problem(
        cp.Minimize(
            cp.sum(cp.pos(1 - cp.multiply(Y, X @ W) + rho * cp.norm(W, 2))) / len(Y)
            + lam / 2 * cp.sum_squares(W)
        ),
        [cp.norm(W, 2) <= 2],
    )
    ref.solve(solver=cp.CLARABEL)
    assert sol.lower <= ref.value + 1e-7 and ref.value <= sol.upper + 1e-7
    assert sol.gap < 1e-3


def test_robust_losses_are_the_worst_case_and_private_fits_run():
    X, Y = _data()
    rho = 0.2
    rng = np.random.default_rng(2)
    w = cp.Variable(3)
    x = cp.Parameter(3)
    y = cp.Parameter()
    for name, make, plain in (
        ("hinge", dpcvx.losses.robust_hinge, lambda m: np.maximum(0.0, 1 - m)),
        ("logistic", dpcvx.losses.robust_logistic, lambda m: np.log1p(np.exp(-m))),
    ):
        problem = dpcvx.Problem(make(x, w, y, rho), w, {x: X, y: Y}, [cp.norm(w, 2) <= 1])
        u = rng.normal(size=3) * 0.5
        worst = plain(Y * ((X - rho * Y[:, None] * u / np.linalg.norm(u)) @ u))
        assert np.allclose(problem.declaration.loss_values(u), worst), name
        res = problem.solve_private(
            dpcvx.OutputPerturbation(lipschitz=1.0 + rho, regularization=0.5, accuracy=1e-4),
            epsilon=1.0,
            rng=0,
        )
        assert np.linalg.norm(res.w) <= 1.0
    t = cp.Parameter()
    problem = dpcvx.Problem(
        dpcvx.losses.robust_absolute(x, w, t, rho), w, {x: X, t: Y}, [cp.norm(w, 2) <= 1]
    )
    u = rng.normal(size=3)
    assert np.allclose(
        problem.declaration.loss_values(u), np.abs(X @ u - Y) + rho * np.linalg.norm(u)
    )
    with pytest.raises(dpcvx.InvalidParameterError):
        dpcvx.losses.robust_hinge(x, w, y, -1.0)
