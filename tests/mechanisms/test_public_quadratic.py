"""Squared terms of the loss that read no data (``cp.sum_squares(w - a)``, ``cp.norm(w)**2``)
are the same for every example: an enforced Lipschitz claim extends the loss's other terms
only, and the quadratic is added to every solve as it is (``lipschitz.public_quadratic``).

The release is compared with an independent answer: the minimizer of ``mean_i g_C(w; z_i) +
(mu/2) ||w - a||^2 + (lam/2) ||w - w0||^2``, ``g_C`` the C-Lipschitz extension over W of the
data terms written as CVXPY's joint program with a copy per example, at an epsilon so large
that the noise is far below the tolerance. The negative control is the extension of the whole
loss (the quadratic inside every example's extension), which the comparison tells apart.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.certification.lipschitz import public_quadratic

N, D, C, LAM, R = 40, 3, 1.0, 0.1, 1.0
A = np.array([0.3, -0.2, 0.1])


def _data(seed: int = 5):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, D))
    X *= 0.8 / np.linalg.norm(X, axis=1, keepdims=True)
    Y = np.where(X @ np.array([1.0, -1.0, 0.5]) > 0, 1.0, -1.0)
    # a fifth of the examples steeper than C and misclassified at the minimizer: their
    # extension is active there
    X[:8] *= 6.0
    Y[:8] = -Y[:8]
    return X, Y


def test_the_public_quadratic_is_read_from_the_form():
    """Closed form: ``0.01 ||w - a||^2 + 0.02 ||w||^2`` is ``(mu/2) ||w - a/3||^2`` plus a
    constant with ``mu = 0.06``; a squared term that reads data, a non-isotropic one and one
    entry's square stay in the loss."""
    w, x, y = cp.Variable(D), cp.Parameter(D), cp.Parameter()
    X, Y = _data()
    loss = cp.logistic(-y * (x @ w)) + 0.01 * cp.sum_squares(w - A) + 0.02 * cp.norm(w, 2) ** 2
    problem = dpcvx.Problem(loss, w, {x: X, y: Y}, [cp.norm(w) <= R])
    mu, center, rest, data = public_quadratic(problem.declared)
    assert mu == pytest.approx(0.06, rel=1e-12)
    assert np.allclose(center, A / 3, rtol=0, atol=1e-14)
    assert data and all(np.shape(v)[0] == N for v in data.values())
    for kept in (
        cp.sum_squares(w - x),  # reads data
        cp.sum_squares(np.diag([1.0, 2.0, 3.0]) @ w),  # not isotropic
        cp.square(w[0]),  # one entry
    ):
        other = dpcvx.Problem(
            cp.logistic(-y * (x @ w)) + 0.01 * kept, w, {x: X, y: Y}, [cp.norm(w) <= R]
        )
        assert public_quadratic(other.declared) is None


def _reference(X, Y, whole: bool) -> np.ndarray:
    """The minimizer of the mean extension plus the quadratic plus the regularizer (center
    0), by CVXPY with Clarabel at tight tolerances; ``whole``: the quadratic inside every
    example's extension (the negative control)."""
    w = cp.Variable(D)
    Yc = cp.Variable((N, D))
    quad = lambda v: 0.5 * cp.sum_squares(v - A)  # noqa: E731
    terms = []
    for i in range(N):
        g = cp.logistic(-Y[i] * (X[i] @ Yc[i]))
        if whole:
            g = g + quad(Yc[i])
        terms.append(g + C * cp.norm(w - Yc[i], 2))
    objective = sum(terms) / N + (LAM / 2) * cp.sum_squares(w)
    if not whole:
        objective = objective + quad(w)
    cons = [cp.norm(Yc, 2, axis=1) <= R, cp.norm(w) <= R]
    cp.Problem(cp.Minimize(objective), cons).solve(
        solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12
    )
    return np.asarray(w.value, float)


@pytest.mark.parametrize("spelling", ["sum_squares", "norm squared"])
def test_the_release_minimizes_the_extension_of_the_data_terms_plus_the_quadratic(spelling):
    X, Y = _data()
    w, x, y = cp.Variable(D), cp.Parameter(D), cp.Parameter()
    if spelling == "sum_squares":
        quad = 0.5 * cp.sum_squares(w - A)
    else:
        quad = 0.5 * cp.norm(w - A, 2) ** 2
    loss = cp.logistic(-y * (x @ w)) + quad
    problem = dpcvx.Problem(loss, w, {x: X, y: Y}, [cp.norm(w) <= R])
    mech = dpcvx.OutputPerturbation(lipschitz=C, regularization=LAM, accuracy=1e-12)
    with pytest.warns(dpcvx.LipschitzClaimWarning):
        result = problem.solve_private(mech, epsilon=1e12, rng=0)
    assert "read no data" in result.detail["lipschitz_claim"]
    assert "stay in every solve" in result.detail["universe"]
    ours = _reference(X, Y, whole=False)
    theirs = _reference(X, Y, whole=True)
    assert np.linalg.norm(result.w - ours) <= 1e-5
    # the negative control: the whole loss's extension has another minimizer
    assert np.linalg.norm(result.w - theirs) > 1e-3


def test_a_claimed_strong_convexity_the_public_quadratic_holds_is_folded_too():
    """With ``strong_convexity`` up to the public quadratic's modulus the claim is enforced on
    the data terms as well (the planned noise uses the smaller claimed modulus), and the
    release lands on the same reference minimizer; a larger claim is refused as before."""
    X, Y = _data()
    w, x, y = cp.Variable(D), cp.Parameter(D), cp.Parameter()
    loss = cp.logistic(-y * (x @ w)) + 0.5 * cp.sum_squares(w - A)
    problem = dpcvx.Problem(loss, w, {x: X, y: Y}, [cp.norm(w) <= R])
    mech = dpcvx.OutputPerturbation(
        lipschitz=C, regularization=LAM, strong_convexity=0.5, accuracy=1e-12
    )
    with pytest.warns(dpcvx.LipschitzClaimWarning):
        result = problem.solve_private(mech, epsilon=1e12, rng=0)
    assert "read no data" in result.detail["lipschitz_claim"]
    assert np.linalg.norm(result.w - _reference(X, Y, whole=False)) <= 1e-5
    with pytest.raises(dpcvx.InvalidParameterError):
        problem.solve_private(
            dpcvx.OutputPerturbation(lipschitz=C, regularization=LAM, strong_convexity=1.5),
            epsilon=1.0,
        )


def test_the_audit_releases_what_solve_private_releases():
    """The audit's memoized sources fold the public quadratic as the pipeline does on the
    Problem (they did not: the audited release was another one, 0.011 away at epsilon =
    1e12), and a neighbouring pair's folded sources are paired (no recursion)."""
    from dpcvx.audit import _releaser, _releasers

    X, Y = _data()
    w, x, y = cp.Variable(D), cp.Parameter(D), cp.Parameter()
    loss = cp.logistic(-y * (x @ w)) + 0.5 * cp.sum_squares(w)
    problems = []
    for flip in (False, True):
        labels = Y.copy()
        labels[5] = -labels[5] if flip else labels[5]
        problems.append(dpcvx.Problem(loss, w, {x: X, y: labels}, [cp.norm(w) <= R]))
    mech = dpcvx.OutputPerturbation(lipschitz=C, regularization=LAM, accuracy=1e-10)
    with pytest.warns(dpcvx.LipschitzClaimWarning):
        direct = problems[0].solve_private(mech, epsilon=1e12, rng=0).w
        audited = _releaser(mech, problems[0], 1e12, 0.0)(np.random.default_rng(0))
        assert np.linalg.norm(audited - direct) <= 1e-12
        pair = _releasers(mech, problems, 1e12, 0.0, adversarial=True)
        points = [run(np.random.default_rng(0)) for run in pair]
    assert all(np.all(np.isfinite(p)) for p in points)
