"""A quadratic form that reads no data (``cp.quad_form(w, P)``, a Tikhonov or smoothness
penalty written into the loss) is a generic term, which dpcvx could not bound, so a Lipschitz
claim on such a loss was trusted, not enforced: a dataset with one steep example was released
with noise for the claim. dpcvx now bounds it (``2 ||P_s|| ||J|| max ||E||`` over the domain's
bounding ball) and enforces the claim on the loss: the steep examples run on the extension."""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pytest
from catalogue import finite_difference_gradients

import dpcvx
from dpcvx.certification.lipschitz import bounded_quadratic, enforceable, lipschitz_bounds

D = 5
#: the second differences' Gram matrix (a smoothness penalty on neighbouring coefficients)
P = np.diff(np.eye(D), axis=0).T @ np.diff(np.eye(D), axis=0)
LAM, C = 0.1, 2.5


def _problem(X, Y, penalty=None, radius=2.0):
    w, x, y = cp.Variable(D), cp.Parameter(D), cp.Parameter()
    pen = 0.05 * cp.quad_form(w - 0.3, P) if penalty is None else penalty(w, x, y)
    loss = cp.logistic(-cp.multiply(y, x @ w)) + pen
    return dpcvx.Problem(loss, w, {x: X, y: Y}, [cp.norm(w) <= radius])


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X, np.sign(X @ rng.normal(size=D) + 0.3 * rng.normal(size=n))


@pytest.mark.parametrize(
    "penalty, bounded",
    [
        (lambda w, x, y: 0.05 * cp.quad_form(w, P), True),
        (lambda w, x, y: 0.05 * cp.quad_form(w[1:] - 1.0, P[1:, 1:]), True),
        (lambda w, x, y: 0.05 * cp.pnorm(w, 3), False),  # generic, not a quadratic form
    ],
)
def test_which_generic_terms_are_bounded(penalty, bounded):
    X, Y = _data(30)
    decl = _problem(X, Y, penalty).declaration
    generic = [t for t in decl.terms if t.kind == "generic"]
    assert generic, [t.kind for t in decl.terms]
    assert enforceable(decl) == bounded
    assert (bounded_quadratic(generic[0]) is not None) == bounded
    assert np.all(np.isfinite(lipschitz_bounds(decl))) == bounded


def test_the_bound_holds_on_the_ball():
    """Finite-difference gradients at points of the domain (the sphere included) stay within
    each example's bound, and the bound is within a few times the largest of them."""
    X, Y = _data(40, 1)
    decl = _problem(X, Y).declaration
    bounds = lipschitz_bounds(decl)
    rng = np.random.default_rng(2)
    largest = np.zeros(decl.n)
    for _ in range(30):
        u = rng.normal(size=D)
        u *= 2.0 * rng.uniform(0.5, 1.0) / np.linalg.norm(u)
        g = np.linalg.norm(finite_difference_gradients(decl, u, 1e-6), axis=1)
        largest = np.maximum(largest, g)
    assert np.all(largest <= bounds * (1 + 1e-6))
    assert np.all(bounds <= 4 * largest)


def test_a_claim_on_a_loss_with_a_quadratic_form_is_enforced():
    """The squared loss plus the penalty, rows and labels of norm at most one, a ball of
    radius 2: the claim ``C = 7`` bounds every example (6 for the squared loss, at most
    0.05 * 2 * 3.7 * 2.7 for the penalty), so no warning. One row of norm 5 with a label of
    20 (slope up to 300, inside the universe of 100 C): the curator is warned, the release
    runs that example on the extension and says the claim was enforced. The solve behind it
    is the extension's, whose minimizers of the two neighbours are within the planned
    sensitivity ``2 C / (lam n)`` (0.06 against 0.23), where the plain minimizers are not
    (1.24: so this test fails if the steep row kept its plain loss)."""
    rng = np.random.default_rng(3)
    X, _ = _data(60, 3)
    Y = np.clip(X @ rng.normal(size=D) / 3, -1, 1)
    C, lam = 7.0, 1.0

    def squared(X, Y):
        w, x, y = cp.Variable(D), cp.Parameter(D), cp.Parameter()
        loss = cp.square(x @ w - y) + 0.05 * cp.quad_form(w - 0.3, P)
        return dpcvx.Problem(loss, w, {x: X, y: Y}, [cp.norm(w) <= 2.0])

    honest = squared(X, Y)
    assert np.all(lipschitz_bounds(honest.declaration) <= C)
    mech = dpcvx.OutputPerturbation(lipschitz=C, regularization=lam)
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpcvx.LipschitzClaimWarning)
        res = honest.solve_private(mech, epsilon=1.0, rng=0)
    assert res.detail["lipschitz_claim"].startswith("enforced")
    steep_X, steep_Y = X.copy(), Y.copy()
    steep_X[0] *= 5.0
    steep_Y[0] = 20.0
    steep = squared(steep_X, steep_Y)
    with pytest.warns(dpcvx.LipschitzClaimWarning, match="1 of 60"):
        res = steep.solve_private(mech, epsilon=1.0, rng=0)
    assert res.detail["lipschitz_claim"].startswith("enforced")
    assert np.all(np.isfinite(res.w))
    bound = 2 * C / (lam * 60)
    ext = [
        p.lipschitz_extension(C).solve(regularization=lam, accuracy=1e-8) for p in (honest, steep)
    ]
    slack = sum(s.distance_bound for s in ext)
    assert np.linalg.norm(ext[0].w - ext[1].w) <= bound + slack
    plain = [p.solve(regularization=lam, accuracy=1e-8) for p in (honest, steep)]
    assert np.linalg.norm(plain[0].w - plain[1].w) > bound + slack  # the negative control


def test_the_quadratic_form_s_jet_is_cvxpy_s_gradient_at_every_point():
    """The tangent cuts of a quadratic form at a point per example (the extension's copies,
    tilted ERM) are taken for all examples at once: the same values and gradients as
    CVXPY's own rule, one example at a time."""
    from dpcvx.modeling._expressions import subgradient_jet

    rng = np.random.default_rng(4)
    w = cp.Variable(D)
    A = rng.normal(size=(D, D))
    for expr in (cp.quad_form(w - 1, A @ A.T), cp.quad_form(2 * w[1:] + 0.5, P[1:, 1:])):
        at = rng.normal(size=(7, D))
        value, jac = subgradient_jet(expr, w, {}, 7, at)
        for i, point in enumerate(at):
            w.value = point
            grad = expr.grad[w]
            grad = np.asarray(grad.toarray() if hasattr(grad, "toarray") else grad).ravel()
            np.testing.assert_allclose(np.ravel(value)[i], expr.value, rtol=1e-13)
            np.testing.assert_allclose(np.asarray(jac)[i], grad, rtol=1e-12, atol=1e-12)


def test_a_quadratic_form_of_data_is_refused_with_its_factored_spelling():
    """``cp.quad_form(w - x, P)`` (a Mahalanobis distance to each example) was accepted and
    then stopped every solve in CVXPY's compile ("unspecified parameters"). It is refused when
    the problem is built, and the spelling the message gives certifies the same objective."""
    from dpcvx.errors import ModelingError

    X, _ = _data(50, 5)
    S = P + np.eye(D)  # positive definite
    w, x = cp.Variable(D), cp.Parameter(D)
    with pytest.raises(ModelingError, match="sum_squares"):
        dpcvx.Problem(cp.quad_form(w - x, S), w, {x: X}, [cp.norm(w) <= 2])
    L = np.linalg.cholesky(S)
    problem = dpcvx.Problem(cp.sum_squares(L.T @ (w - x)), w, {x: X}, [cp.norm(w) <= 2])
    sol = problem.solve(regularization=LAM, accuracy=1e-9)
    W = cp.Variable(D)
    obj = sum(cp.quad_form(W - X[i], S) for i in range(50)) / 50 + LAM / 2 * cp.sum_squares(W)
    ref = cp.Problem(cp.Minimize(obj), [cp.norm(W) <= 2])
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    assert sol.lower <= ref.value + 1e-8 and ref.value <= sol.upper + 1e-8
