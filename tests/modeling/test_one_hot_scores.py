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
from catalogue import term_values

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


OVR = {
    "logistic, multiply(y, W @ x)": lambda y, W, x: cp.sum(cp.logistic(-cp.multiply(y, W @ x))),
    "logistic, multiply(x @ W.T, y)": lambda y, W, x: cp.sum(cp.logistic(-cp.multiply(x @ W.T, y))),
    "hinge, multiply(W @ x, y)": lambda y, W, x: cp.sum(cp.pos(1 - cp.multiply(W @ x, y))),
}


@pytest.mark.parametrize("name", list(OVR))
def test_one_vs_rest_scores_are_their_own_vector(name):
    """``cp.multiply(y, W @ x)`` with labels ``y`` in {-1, 1}^K is the vector of one-vs-rest
    margins, ``sum(multiply(outer(y, x), W), axis=1)``: the declared terms add up to the
    user's loss (an earlier rewrite took it for the one-hot score ``y^T W x``, a number, and
    certified a bound above the optimum), and the solve brackets the matrix form."""
    rng = np.random.default_rng(2)
    X, _ = _data(4)
    Ypm = np.sign(X @ rng.normal(size=(D, K)) + 0.3 * rng.normal(size=(N, K)))
    w, x, y = cp.Variable(K * D), cp.Parameter(D), cp.Parameter(K)
    W = cp.reshape(w, (K, D), order="C")
    problem = dpcvx.Problem(OVR[name](y, W, x), w, {x: X, y: Ypm}, [cp.norm(w) <= 3])
    decl = problem.declaration
    for _ in range(3):
        point = rng.normal(size=K * D)
        np.testing.assert_allclose(
            term_values(decl, point), decl.loss_values(point), rtol=1e-12, atol=1e-12
        )
    sol = problem.solve(regularization=LAM, accuracy=1e-9)
    assert sol.gap <= 1e-9 and sol.solver_stats["solver"] != "CLARABEL"
    Wv = cp.Variable((K, D))
    margins = cp.multiply(Ypm, X @ Wv.T)
    data = cp.logistic(-margins) if name.startswith("logistic") else cp.pos(1 - margins)
    ref = cp.Problem(
        cp.Minimize(cp.sum(data) / N + LAM / 2 * cp.sum_squares(Wv)),
        [cp.norm(cp.vec(Wv, order="C")) <= 3],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    assert sol.lower <= ref.value + 1e-9 and ref.value <= sol.upper + 1e-9


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_one_hot_terms_add_up_to_the_loss(spelling):
    X, Yh = _data(5)
    decl = _problem(spelling, X, Yh, 0.01).declaration
    rng = np.random.default_rng(6)
    for _ in range(3):
        point = rng.normal(size=K * D)
        np.testing.assert_allclose(
            term_values(decl, point), decl.loss_values(point), rtol=1e-12, atol=1e-12
        )


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
@pytest.mark.parametrize("keepdims", [False, True])
def test_the_affine_jet_of_a_sum_along_an_axis(axis, keepdims):
    """A sum along one axis of an affine matrix that reads data has an exact affine jet
    (before: only the subgradient jets had one): offset plus Jacobian times the point is the
    expression's value, example by example."""
    from dpcvx.modeling._expressions import affine_jet, evaluate

    rng = np.random.default_rng(7)
    n = 5
    w, s = cp.Variable(6), cp.Parameter((2, 3))
    expr = cp.sum(
        cp.multiply(s, cp.reshape(w, (2, 3), order="F")) + 1.0, axis=axis, keepdims=keepdims
    )
    leaves = {s.id: rng.normal(size=(n, 2, 3))}
    off, jac = affine_jet(expr, w, leaves, n)
    point = rng.normal(size=6)
    full = dict(leaves)
    full[w.id] = np.repeat(point[None], n, axis=0)
    value = np.asarray(evaluate(expr, full, n), float).reshape((n,) + expr.shape)
    jet = np.asarray(off).reshape((-1,) + expr.shape) + np.asarray(jac) @ point
    np.testing.assert_allclose(np.broadcast_to(jet, value.shape), value, rtol=1e-12, atol=1e-12)


BIASED = {
    "one-hot, y @ (W @ x + b)": lambda y, W, b, x: cp.log_sum_exp(W @ x + b) - y @ (W @ x + b),
    "one-hot, (W @ x + b + 1) @ y": lambda y, W, b, x: (
        cp.log_sum_exp(W @ x + b) - (W @ x + b + 1) @ y
    ),
    "one-vs-rest, multiply(y, W @ x + b)": lambda y, W, b, x: cp.sum(
        cp.logistic(-cp.multiply(y, W @ x + b))
    ),
    "one-vs-rest hinge, a shared bias": lambda y, W, b, x: cp.sum(
        cp.pos(1 - cp.multiply(W @ x + b[0], y))
    ),
}


@pytest.mark.parametrize("name", list(BIASED))
def test_scores_with_a_bias(name):
    """Scores with an intercept, ``W @ x + b`` (``b`` part of the variable), were refused as
    not DPP: the label's product is distributed over the sum, each part read as above. The
    terms add up to the user's loss, which matches CVXPY's own value per example."""
    X, Yh = _data(8)
    Y = Yh if name.startswith("one-hot") else 2 * Yh - 1
    w, x, y = cp.Variable(K * D + K), cp.Parameter(D), cp.Parameter(K)
    W = cp.reshape(w[: K * D], (K, D), order="C")
    loss = BIASED[name](y, W, w[K * D :], x)
    problem = dpcvx.Problem(loss, w, {x: X, y: Y}, [cp.norm(w) <= 3])
    decl = problem.declaration
    assert all(t.kind != "generic" for t in decl.terms)
    rng = np.random.default_rng(9)
    point = rng.normal(size=K * D + K)
    np.testing.assert_allclose(
        term_values(decl, point), decl.loss_values(point), rtol=1e-12, atol=1e-12
    )
    w.value = point
    for i in range(5):
        x.value, y.value = X[i], Y[i]
        np.testing.assert_allclose(decl.loss_values(point)[i], loss.value, rtol=1e-12)
    sol = problem.solve(regularization=LAM, accuracy=1e-9)
    assert sol.gap <= 1e-9 and sol.solver_stats["solver"] != "CLARABEL"


def test_a_centred_linear_term_of_data():
    """``x @ (w - x0)`` with ``x0`` per example too (data on both sides of a difference) was
    refused as not DPP; it is ``x @ w - x @ x0``."""
    rng = np.random.default_rng(10)
    X, X0 = rng.normal(size=(N, D)), rng.normal(size=(N, D))
    w, x, x0 = cp.Variable(D), cp.Parameter(D), cp.Parameter(D)
    loss = cp.abs(x @ (w - x0))
    problem = dpcvx.Problem(loss, w, {x: X, x0: X0}, [cp.norm(w) <= 1])
    point = rng.normal(size=D)
    expected = np.abs(np.einsum("nd,nd->n", X, point - X0))
    np.testing.assert_allclose(problem.declaration.loss_values(point), expected, rtol=1e-12)
    np.testing.assert_allclose(
        term_values(problem.declaration, point), expected, rtol=1e-12, atol=1e-12
    )
