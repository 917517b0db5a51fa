"""dpcvx.SaddleProblem: certified adversarial ERM with a general convex-concave adversary
(paper 002, Section 5.2, Algorithm 8), against closed forms.

The test loss ``f(w, v; x, y) = logistic(-y x.w) + y v.w - (gamma/2)||v||^2`` is convex in
``w`` and strongly concave in ``v``. Its inner max over ``S`` has a closed form:
``||v|| <= rho`` gives ``huber(||w||, gamma rho) / (2 gamma)``; the box ``|v_j| <= rho`` gives
``sum_j huber(w_j, gamma rho) / (2 gamma)`` (CVXPY's huber: ``t^2`` inside, ``2M|t| - M^2``
outside). So ``G`` is an ordinary convex program that CVXPY solves independently.
"""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.errors import InvalidParameterError, ModelingError

GAMMA, RHO, LAM = 1.0, 0.3, 0.1


def _data(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))  # ||x|| <= 1
    Y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return X, Y


def _problem(X, Y, box=False, radius=1.0, max_rounds=40):
    d = X.shape[1]
    w, v = cp.Variable(d), cp.Variable(d)
    x, y = cp.Parameter(d), cp.Parameter()
    loss = cp.logistic(-y * (x @ w)) + y * (v @ w) - GAMMA / 2 * cp.sum_squares(v)
    S = [cp.abs(v) <= RHO] if box else [cp.norm(v, 2) <= RHO]
    return dpcvx.SaddleProblem(
        loss,
        w,
        v,
        data={x: X, y: Y},
        domain=[cp.norm(w, 2) <= radius],
        perturbation_set=S,
        max_rounds=max_rounds,
    )


def _reference(X, Y, box=False, radius=1.0):
    """min_W G(w) + (LAM/2)||w||^2 from the closed-form inner max (independent CVXPY solve)."""
    n, d = X.shape
    w = cp.Variable(d)
    if box:
        inner = cp.sum(cp.huber(w, GAMMA * RHO)) / (2 * GAMMA)
    else:
        inner = cp.huber(cp.norm(w, 2), GAMMA * RHO) / (2 * GAMMA)
    obj = cp.sum(cp.logistic(-cp.multiply(Y, X @ w))) / n + inner + LAM / 2 * cp.sum_squares(w)
    prob = cp.Problem(cp.Minimize(obj), [cp.norm(w, 2) <= radius])
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    return prob.value, w.value


def _inner_closed_form(X, Y, w, box=False):
    V = Y[:, None] * w[None, :] / GAMMA
    if box:
        V = np.clip(V, -RHO, RHO)
    else:
        V = V * np.minimum(1.0, RHO / np.maximum(np.linalg.norm(V, axis=1, keepdims=True), 1e-300))
    return np.logaddexp(0.0, -Y * (X @ w)) + Y * (V @ w) - GAMMA / 2 * np.sum(V**2, axis=1)


@pytest.mark.parametrize("box", [False, True])
def test_certified_bracket_contains_the_closed_form_optimum(box):
    X, Y = _data(120, 3, seed=1)
    ref_value, ref_w = _reference(X, Y, box=box)
    sol = _problem(X, Y, box=box).solve(regularization=LAM, accuracy=1e-6)
    assert sol.gap <= 1e-6
    assert sol.lower <= ref_value + 1e-9 and ref_value <= sol.upper + 1e-9
    # strong convexity of G: the certified point is within sqrt(2 gap / lam) of w*
    assert np.linalg.norm(sol.w - ref_w) <= sol.distance_bound + 1e-5
    assert np.linalg.norm(sol.w) <= 1.0
    assert sol.solver_stats["rounds"] >= 2


def test_adversary_bounds_match_the_closed_form_inner_max():
    X, Y = _data(60, 3, seed=2)
    problem = _problem(X, Y)
    for w in (np.zeros(3), np.array([0.6, -0.5, 0.2]), np.array([0.05, 0.1, -0.02])):
        bounds = problem.adversary(w)
        exact = _inner_closed_form(X, Y, w)
        assert np.all(bounds.upper >= exact - 1e-12)
        assert np.all(bounds.upper - exact <= 1e-8)
        assert np.all(bounds.achieved <= exact + 1e-12)
        assert np.all(np.linalg.norm(bounds.points, axis=1) <= RHO * (1 + 1e-12))


def test_sensitivity_on_worst_case_neighbours():
    """||w(D) - w(D')|| <= 2L/(lam n) + both certified distances, L = 1 + rho (Lemma 5.4)."""
    X, Y = _data(40, 2, seed=3)
    L = 1.0 + RHO
    Xp, Yp = X.copy(), Y.copy()
    Xp[0] = X[0] / np.linalg.norm(X[0])  # the label flips, the margin direction too
    Yp[0] = -Y[0]
    a = _problem(X, Y).solve(regularization=LAM, accuracy=1e-8)
    b = _problem(Xp, Yp).solve(regularization=LAM, accuracy=1e-8)
    bound = 2 * L / (LAM * 40) + a.distance_bound + b.distance_bound
    assert np.linalg.norm(a.w - b.w) <= bound
    assert np.linalg.norm(a.w - b.w) > 0.01 * 2 * L / (LAM * 40)  # the pair is not trivial


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_private_release_is_algorithm_8_with_the_corrected_inflation(delta):
    X, Y = _data(100, 3, seed=4)
    problem = _problem(X, Y)
    mech = dpcvx.OutputPerturbation(lipschitz=1.0 + RHO, regularization=LAM, accuracy=1e-6)
    res = problem.solve_private(mech, epsilon=1.0, delta=delta, rng=0)
    base = 2 * (1.0 + RHO) / (LAM * 100)
    assert res.detail["sensitivity"] == pytest.approx(base + 2 * math.sqrt(2e-6 / LAM), rel=1e-12)
    # erratum 2 of the digest: never Delta + 2 alpha / mu (too little noise)
    assert res.detail["sensitivity"] > base + 2 * 1e-6 / LAM
    assert np.linalg.norm(res.w) <= 1.0
    assert res.ledger.total().epsilon == pytest.approx(1.0)


def test_composite_mechanisms_are_refused_before_anything_is_spent():
    X, Y = _data(30, 2)
    acct = dpcvx.Accountant(2.0)
    mech = dpcvx.TiltedOutputPerturbation(lipschitz=1.3, regularization=LAM, tilt=1.0)
    with pytest.raises(InvalidParameterError, match="OutputPerturbation"):
        _problem(X, Y).solve_private(mech, epsilon=1.0, accountant=acct)
    assert acct.ledger.total().epsilon == 0.0


def test_modeling_errors():
    X, Y = _data(10, 2)
    w, v = cp.Variable(2), cp.Variable(2)
    x, y = cp.Parameter(2), cp.Parameter()
    data = {x: X, y: Y}
    W = [cp.norm(w, 2) <= 1]
    S = [cp.norm(v, 2) <= 0.1]
    # convex in v (a linear model under input perturbation): Assumption 2 fails
    with pytest.raises(ModelingError, match="concave"):
        dpcvx.SaddleProblem(cp.logistic(-y * ((x + v) @ w)), w, v, data, W, S)
    with pytest.raises(ModelingError, match="does not depend on the perturbation"):
        dpcvx.SaddleProblem(cp.logistic(-y * (x @ w)), w, v, data, W, S)
    with pytest.raises(ModelingError, match="perturbation_set"):
        dpcvx.SaddleProblem(y * (v @ w) - cp.sum_squares(v), w, v, data, W, [])
    with pytest.raises(ModelingError, match="different"):
        dpcvx.SaddleProblem(y * (w @ x), w, w, data, W, S)
    with pytest.raises(InvalidParameterError, match="max_rounds"):
        dpcvx.SaddleProblem(y * (v @ w) - cp.sum_squares(v), w, v, data, W, S, max_rounds=1)


def test_an_unreachable_target_raises_and_names_no_data():
    X, Y = _data(50, 2, seed=5)
    problem = _problem(X, Y, max_rounds=2)
    with pytest.raises(dpcvx.CertificationError, match="cutting-set rounds"):
        problem.solve(regularization=LAM, accuracy=1e-12)
