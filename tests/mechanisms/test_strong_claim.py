"""A Lipschitz claim enforced on a strongly convex loss (``strong_convexity = mu > 0``).

dpcvx enforces ``lipschitz = L`` on ``h = f - (mu/2)||w - c||^2`` (``c`` the domain's center)
and keeps ``(mu/2)||w - c||^2`` as an exact regularizer of every solve, so the objective stays
``(lam + mu)``-strongly convex and neighbours' objectives differ by a ``2L/n``-Lipschitz
function whatever the data. Independent answers:

- ``h + (mu/2)||w - c||^2 - f`` is constant in ``w`` for every example (random points, several
  spellings of the squared term, a user-level loss);
- on neighbouring datasets, one of them with an example at ``1e8``, the noise-free released
  points (the noise replaced by zero) are within the sensitivity
  ``2L/((lam + mu) n) + 2 sqrt(2 alpha/(lam + mu))`` the noise is calibrated to; the negative
  control, the same solve without enforcement, is far outside it;
- the strongly convex user-level reduction (paper 004, Algorithm 5) releases on such data
  (it used to abort) with its stage-1 point within the same bound.
"""

from __future__ import annotations

import math
import warnings

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
import dpcvx.mechanisms.output_perturbation as op_module
from dpcvx.certification.lipschitz import remove_quadratic, strong_convexity_bound
from dpcvx.mechanisms.strongly_convex_user import StronglyConvexUserERM


def _spellings():
    w, x, y = cp.Variable(3), cp.Parameter(3), cp.Parameter()
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(12, 3)) * 3.0, rng.normal(size=12)
    dom = dpcvx.domains.l2_ball(w, 2.0)
    A = np.array([[2.0, 0.3, 0.0], [0.0, 1.0, 0.5], [0.1, 0.0, 1.5]])
    return {
        "mean": dpcvx.Problem(0.5 * cp.sum_squares(w - x), w, {x: X}, dom),
        "scaled+abs": dpcvx.Problem(cp.sum_squares(2 * w - x) / 4 + cp.abs(x @ w), w, {x: X}, dom),
        "matrix": dpcvx.Problem(
            cp.sum_squares(A @ w - x) + cp.pos(1 - y * (x @ w)), w, {x: X, y: Y}, dom
        ),
        "quad_over_lin": dpcvx.Problem(
            cp.quad_over_lin(w - x, 2.0) + cp.logistic(x @ w), w, {x: X}, dom
        ),
        "norm squared": dpcvx.Problem(
            cp.norm(w - x, 2) ** 2 / 2 + cp.abs(x @ w - y), w, {x: X, y: Y}, dom
        ),
        "summed square": dpcvx.Problem(
            cp.sum(cp.square(w - x)) + cp.square(x @ w - y), w, {x: X, y: Y}, dom
        ),
        "user level": dpcvx.UserLevelProblem(
            0.5 * cp.sum_squares(w - x) + cp.abs(x @ w - y),
            w,
            {x: X, y: Y},
            dom,
            users=np.repeat(np.arange(4), 3),
            items_per_user=3,
        ),
    }


@pytest.mark.parametrize("name", list(_spellings()))
@pytest.mark.parametrize("fraction", [0.5, 1.0])
def test_the_rewritten_loss_is_the_loss_minus_the_quadratic(name, fraction):
    problem = _spellings()[name]
    decl = problem.declaration
    mu = fraction * strong_convexity_bound(decl)
    assert mu > 0
    c = np.array([0.3, -0.2, 0.1])
    rewritten = problem.quadratic_removed(mu, c).declaration
    assert rewritten.loss.is_dcp() and rewritten.loss.is_convex()
    rng = np.random.default_rng(1)
    diffs = []
    for _ in range(5):
        v = rng.normal(size=3) * 2.0
        f = decl.loss_values(v)
        h = rewritten.loss_values(v)
        diffs.append(h + 0.5 * mu * np.sum((v - c) ** 2) - f)
    diffs = np.array(diffs)
    scale = 1.0 + np.abs(diffs).max()
    np.testing.assert_allclose(diffs, np.broadcast_to(diffs[0], diffs.shape), atol=1e-9 * scale)
    # what is left of the squared terms is only convex when all of mu is removed
    assert strong_convexity_bound(rewritten) == pytest.approx(
        strong_convexity_bound(decl) - mu, abs=1e-9
    )


def test_remove_quadratic_refuses_a_loss_without_verified_strong_convexity():
    w, x = cp.Variable(2), cp.Parameter(2)
    problem = dpcvx.Problem(cp.abs(x @ w), w, {x: np.ones((3, 2))}, dpcvx.domains.l2_ball(w, 1.0))
    with pytest.raises(ValueError, match="Internal"):
        remove_quadratic(problem.declaration, 1.0, np.zeros(2))


def _mean_problem(X):
    w, x = cp.Variable(X.shape[1]), cp.Parameter(X.shape[1])
    return dpcvx.Problem(0.5 * cp.sum_squares(w - x), w, {x: X}, dpcvx.domains.l2_ball(w, 1.0))


def _noise_free(monkeypatch):
    monkeypatch.setattr(op_module, "perturb", lambda point, noise, rng: np.asarray(point, float))


@pytest.mark.parametrize("lam", [0.0, 0.3])
def test_neighbours_with_an_extreme_example_stay_within_the_sensitivity(monkeypatch, lam):
    _noise_free(monkeypatch)
    rng = np.random.default_rng(2)
    n, d, L, mu = 30, 2, 2.0, 1.0
    X = rng.normal(size=(n, d))
    X /= 2 * np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    Xp = X.copy()
    Xp[-1] = [1e8, -1e8]
    mech = dpcvx.OutputPerturbation(lipschitz=L, regularization=lam, strong_convexity=mu)
    plan = mech.plan(n=n, d=d, center=np.zeros(d), diameter=2.0, epsilon=1.0, delta=0.0)
    outs = []
    for data in (X, Xp):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dpcvx.LipschitzClaimWarning)
            res = _mean_problem(data).solve_private(mech, epsilon=1.0, rng=0)
        assert "minus its verified quadratic" in res.detail["lipschitz_claim"]
        outs.append(res.w)
    assert np.linalg.norm(outs[0] - outs[1]) <= plan.sensitivity.value
    # a true claim costs nothing: the clean data's release is the exact regularized mean
    exact = X.mean(axis=0) / (1 + lam) if lam else X.mean(axis=0)
    assert np.linalg.norm(outs[0] - exact) <= math.sqrt(2 * plan.accuracy / (lam + mu)) + 1e-9
    # negative control: without enforcement the minimizers are far apart (an example at 100
    # already shows it, and the plain solve certifies there)
    Xc = X.copy()
    Xc[-1] = [100.0, -100.0]
    plain = [
        _mean_problem(data).solve(regularization=lam, center=np.zeros(d), accuracy=plan.accuracy).w
        for data in (X, Xc)
    ]
    assert np.linalg.norm(plain[0] - plain[1]) > 5 * plan.sensitivity.value


def test_the_user_level_reduction_releases_with_an_extreme_user(monkeypatch):
    _noise_free(monkeypatch)
    n, m, d, R = 16, 4, 2, 10.0
    G = 2 * R + 2.0
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(n * m, d)) / math.sqrt(d) + 0.3
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    Xp = X.copy()
    Xp[:m] = 1e8  # the first user's items, all of them
    mech = StronglyConvexUserERM(
        lipschitz=G, strong_convexity=1.0, items_per_user=m, progress=False
    )
    stage1 = []
    for data in (X, Xp):
        w, x = cp.Variable(d), cp.Parameter(d)
        problem = dpcvx.UserLevelProblem(
            0.5 * cp.sum_squares(w - x),
            w,
            {x: data},
            dpcvx.domains.l2_ball(w, R),
            users=np.repeat(np.arange(n), m),
            items_per_user=m,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dpcvx.LipschitzClaimWarning)
            res = problem.solve_private(mech, epsilon=1.0, delta=1e-6, rng=1)
        assert np.all(np.isfinite(res.w))
        stage1.append(res.detail["stage1_output"])
    plan = mech.plan(n=n, d=d, center=np.zeros(d), diameter=2 * R, epsilon=1.0, delta=1e-6)
    assert np.linalg.norm(stage1[0] - stage1[1]) <= plan.stage1.sensitivity.value
