"""Nonnegative per-example weights ``s * loss``: rewritten through positive homogeneity (and
``s E^2 = (sqrt(s) E)^2``) so that the weight reaches affine pieces only, then certified like
any other loss, against independent whole-dataset CVXPY solves."""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pytest

import dpcvx

N, D, LAM = 40, 3, 0.1


def _data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(N, D))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    Y = np.sign(X @ np.array([1.0, -0.5, 0.2]) + 0.1)
    R = X @ np.full(D, 0.3) + 0.1 * rng.normal(size=N)
    S = rng.uniform(0.0, 2.0, size=N)
    S[:3] = 0.0  # zero weights are allowed
    return X, Y, R, S


CASES = {
    "weighted hinge": (
        lambda x, y, s, w: s * cp.pos(1 - y * (x @ w)),
        lambda X, Y, R, S, v: cp.multiply(S, cp.pos(1 - cp.multiply(Y, X @ v))),
        "class",
    ),
    "weighted absolute": (
        lambda x, y, s, w: s * cp.abs(x @ w - y),
        lambda X, Y, R, S, v: cp.multiply(S, cp.abs(X @ v - R)),
        "reg",
    ),
    "weighted squared": (
        lambda x, y, s, w: s * cp.square(x @ w - y),
        lambda X, Y, R, S, v: cp.multiply(S, cp.square(X @ v - R)),
        "reg",
    ),
    "weighted pinball": (
        lambda x, y, s, w: s * cp.maximum(0.3 * (x @ w - y), -0.7 * (x @ w - y)),
        lambda X, Y, R, S, v: cp.multiply(S, cp.maximum(0.3 * (X @ v - R), -0.7 * (X @ v - R))),
        "reg",
    ),
    "weighted sum": (
        lambda x, y, s, w: s * (cp.pos(1 - y * (x @ w)) + 0.5 * cp.abs(x @ w)),
        lambda X, Y, R, S, v: cp.multiply(
            S, cp.pos(1 - cp.multiply(Y, X @ v)) + 0.5 * cp.abs(X @ v)
        ),
        "class",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_weighted_losses_are_certified_against_a_reference(name):
    term, whole, kind = CASES[name]
    X, Y, R, S = _data()
    labels = Y if kind == "class" else R
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    s = cp.Parameter(nonneg=True)
    problem = dpcvx.Problem(
        term(x, y, s, w), w, data={x: X, y: labels, s: S}, domain=[cp.norm(w, 2) <= 1]
    )
    assert all(t.kind != "generic" for t in problem.declaration.terms)
    sol = problem.solve(regularization=LAM, center=np.zeros(D), accuracy=1e-9)
    v = cp.Variable(D)
    ref = cp.Problem(
        cp.Minimize(cp.sum(whole(X, Y, labels, S, v)) / N + LAM / 2 * cp.sum_squares(v)),
        [cp.norm(v, 2) <= 1],
    )
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    tol = 1e-8 * (1 + abs(ref.value))
    assert sol.lower <= ref.value + tol <= sol.upper + 2 * tol
    assert sol.gap <= 1e-9
    # the weight bound (2) times the loss's Lipschitz constant: enforced in any case
    mech = dpcvx.OutputPerturbation(lipschitz=2.0 * 3.0, regularization=LAM)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpcvx.LipschitzClaimWarning)
        res = problem.solve_private(mech, epsilon=1.0, rng=0)
    assert np.all(np.isfinite(res.w))


def _leaves():
    return cp.Variable(D), cp.Parameter(D), cp.Parameter(), cp.Parameter(nonneg=True)


def test_a_weight_on_a_loss_without_a_homogeneous_form_is_refused_with_a_hint():
    X, Y, R, S = _data()
    w, x, y, s = _leaves()
    with pytest.raises(dpcvx.ModelingError, match="per-example weight"):
        dpcvx.Problem(
            s * cp.logistic(-y * (x @ w)), w, data={x: X, y: Y, s: S}, domain=[cp.norm(w, 2) <= 1]
        )


def test_negative_weights_are_refused():
    X, Y, R, S = _data()
    w, x, y, s = _leaves()
    with pytest.raises(dpcvx.DataError, match="nonneg"):
        dpcvx.Problem(
            s * cp.abs(x @ w - y), w, data={x: X, y: R, s: S - 1.0}, domain=[cp.norm(w, 2) <= 1]
        )
