"""The multinomial loss as CVXPY users write it, with a one-hot label ``y`` and scores
``W @ x``: ``cp.log_sum_exp(W @ x) - y @ W @ x``. The label's score multiplies two data
parameters with the variable (``y^T W x``), which dpcvx refused as not DPP. It is now the
affine term ``sum(multiply(outer(y, x), W))``, its data one derived parameter, in any of the
usual spellings; checked against a CVXPY solve of the whole-data matrix form."""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.errors import ModelingError

K, D, N = 3, 4, 300
LAM = 0.01

SPELLINGS = {
    "y @ W @ x": lambda y, W, x: y @ W @ x,
    "y @ (W @ x)": lambda y, W, x: y @ (W @ x),
    "(W @ x) @ y": lambda y, W, x: (W @ x) @ y,
    "x @ (W.T @ y)": lambda y, W, x: x @ (W.T @ y),
    "(y @ W) @ x": lambda y, W, x: (y @ W) @ x,
}


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    labels = np.argmax(X @ rng.normal(size=(D, K)) + 0.5 * rng.normal(size=(N, K)), axis=1)
    return X, np.eye(K)[labels]


def _problem(spelling, X, Yh, penalty=0.0):
    w, x, y = cp.Variable(K * D), cp.Parameter(D), cp.Parameter(K)
    W = cp.reshape(w, (K, D), order="C")
    loss = cp.log_sum_exp(W @ x) - SPELLINGS[spelling](y, W, x)
    if penalty:
        loss = loss + penalty * cp.sum(cp.norm(W, 2, axis=0))
    return dpcvx.Problem(loss, w, {x: X, y: Yh}, [cp.norm(w) <= 5])


def _reference(X, Yh, penalty=0.0):
    W = cp.Variable((K, D))
    S = X @ W.T
    obj = (
        (cp.sum(cp.log_sum_exp(S, axis=1)) - cp.sum(cp.multiply(Yh, S))) / N
        + penalty * cp.sum(cp.norm(W, 2, axis=0))
        + LAM / 2 * cp.sum_squares(W)
    )
    ref = cp.Problem(cp.Minimize(obj), [cp.norm(cp.vec(W, order="C")) <= 5])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    return ref.value


@pytest.mark.parametrize("penalty", [0.0, 0.01])
@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_one_hot_spellings_bracket_the_matrix_form(spelling, penalty):
    X, Yh = _data()
    problem = _problem(spelling, X, Yh, penalty)
    kinds = [t.kind for t in problem.declaration.terms]
    assert kinds[:2] == ["log_sum_exp", "affine"], kinds
    sol = problem.solve(regularization=LAM, accuracy=1e-9)
    assert sol.gap <= 1e-9
    assert sol.solver_stats["solver"] != "CLARABEL", sol.solver_stats
    ref = _reference(X, Yh, penalty)
    assert sol.lower <= ref + 1e-9 and ref <= sol.upper + 1e-9


def test_the_claim_of_the_one_hot_spelling_is_enforced():
    """The multinomial loss of rows of norm at most one is sqrt(2)-Lipschitz: with that claim
    every example is light; a row of norm 10 is warned about and released on the extension."""
    X, Yh = _data(1)
    mech = dpcvx.OutputPerturbation(lipschitz=np.sqrt(2) * (1 + 1e-9), regularization=LAM)
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpcvx.LipschitzClaimWarning)
        res = _problem("y @ W @ x", X, Yh).solve_private(mech, epsilon=1.0, rng=0)
    assert res.detail["lipschitz_claim"].startswith("enforced")
    steep = X.copy()
    steep[0] *= 10.0
    with pytest.warns(dpcvx.LipschitzClaimWarning, match="1 of 300"):
        res = _problem("y @ W @ x", steep, Yh).solve_private(mech, epsilon=1.0, rng=0)
    assert np.all(np.isfinite(res.w))


def test_data_on_both_sides_of_a_data_matrix_is_still_refused():
    """The rewrite takes a matrix free of data only: a variable matrix that reads data
    (``y @ (cp.multiply(s, W) @ x)``, ``s`` per example) is still refused with the DPP
    message."""
    X, Yh = _data()
    w, x, y, s = cp.Variable(K * D), cp.Parameter(D), cp.Parameter(K), cp.Parameter()
    W = cp.reshape(w, (K, D), order="C")
    loss = cp.log_sum_exp(W @ x) - y @ (cp.multiply(s, W) @ x)
    with pytest.raises(ModelingError, match="not DPP"):
        dpcvx.Problem(loss, w, {x: X, y: Yh, s: np.ones(N)}, [cp.norm(w) <= 5])
