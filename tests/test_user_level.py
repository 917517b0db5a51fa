"""User-level data (paper 004's data model): a user's loss is the mean of its m item losses;
example-level mechanisms run on users and their guarantee is stated for ReplaceOneUser(m).

Independent answers: the closed-form minimizer of a linear loss plus ridge, and a sampled
audit on a worst-case pair of user-level datasets (one user's three items all flipped) with a
negative control (false-failure rate <= 1e-3 by construction).
"""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.audit import audit, negative_control


def _linear(X, users, m=3, keep=None):
    w = cp.Variable(1)
    x = cp.Parameter(1)
    return dpcvx.UserLevelProblem(
        x @ w,
        w,
        data={x: X},
        domain=dpcvx.domains.box(w, -1.0, 1.0),
        users=users,
        items_per_user=m,
        keep=keep,
    )


def test_a_user_loss_is_the_mean_of_its_items():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(12, 1))
    users = np.repeat([7, 3, 9, 1], 3)
    problem = _linear(X, users)
    assert problem.n == 4 and problem.items_per_user == 3
    sol = problem.solve(regularization=1.0, center=np.zeros(1))
    # F(w) = mean over users of mean over items of x w + w^2 / 2: w* = -mean(x)
    assert sol.w[0] == pytest.approx(-X.mean(), abs=1e-6)
    np.testing.assert_array_equal(problem.users, [1, 3, 7, 9])


def test_releases_are_private_at_user_level():
    X = np.linspace(-1, 1, 12)[:, None]
    problem = _linear(X, np.repeat(np.arange(4), 3))
    mech = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=1.0)
    res = problem.solve_private(mech, epsilon=1.0, rng=0)
    assert res.neighbors == dpcvx.ReplaceOneUser(3)
    assert res.guarantee.neighbors == dpcvx.ReplaceOneUser(3)
    assert "replace-one-user (m=3)" in res.summary()
    assert all(e.neighbors == dpcvx.ReplaceOneUser(3) for e in res.ledger.events)
    # an example-level budget does not compose with a user-level release: nothing is spent
    example_level = dpcvx.Accountant(5.0)
    with pytest.raises(dpcvx.InvalidParameterError, match="replace-one-user"):
        problem.solve_private(mech, epsilon=1.0, rng=0, accountant=example_level)
    assert len(example_level.ledger) == 0
    user_level = dpcvx.Accountant(5.0, neighbors=dpcvx.ReplaceOneUser(3))
    problem.solve_private(mech, epsilon=1.0, rng=0, accountant=user_level)
    assert len(user_level.ledger) == 1


def test_unequal_item_counts_are_refused_or_cut_by_a_public_rule():
    X = np.arange(10, dtype=float)[:, None] / 10
    users = np.array([0, 0, 0, 0, 1, 1, 1, 2, 2, 2])
    with pytest.raises(dpcvx.DataError, match="keep='first'"):
        _linear(X, users)
    problem = _linear(X, users, keep="first")
    sol = problem.solve(regularization=1.0, center=np.zeros(1))
    kept = X[[0, 1, 2, 4, 5, 6, 7, 8, 9], 0]  # user 0's first three items
    assert sol.w[0] == pytest.approx(-kept.mean(), abs=1e-6)
    with pytest.raises(dpcvx.DataError, match="fewer"):
        _linear(X[:8], users[:8], keep="first")
    with pytest.raises(dpcvx.InvalidParameterError):
        _linear(X, users, m=0)
    with pytest.raises(dpcvx.DataError, match="one user id per item"):
        _linear(X, users[:5])


@pytest.mark.statistical
def test_worst_case_user_pair_audit_and_negative_control():
    """Four users of three items; the last user's items are all +1 vs all -1, so the user
    losses differ by the whole L = 1 and the minimizers are 2L/(lam n) = 0.5 apart (tight)."""
    n_users, m = 4, 3
    X0 = np.zeros((n_users * m, 1))
    X1 = X0.copy()
    X0[-m:], X1[-m:] = 1.0, -1.0
    users = np.repeat(np.arange(n_users), m)
    pair = (_linear(X0, users), _linear(X1, users))
    mech = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=1.0)
    s0 = pair[0].solve(regularization=1.0, center=np.zeros(1))
    s1 = pair[1].solve(regularization=1.0, center=np.zeros(1))
    assert abs(s0.w[0] - s1.w[0]) == pytest.approx(2.0 / n_users, abs=1e-6)
    thresholds = (-0.2, 0.0, 0.2)
    ok = audit(mech, pair, epsilon=1.0, runs=2000, thresholds=thresholds, seed=0, progress=False)
    assert ok.lower_bound <= 1.0
    control = negative_control(mech, 3.0)
    bad = audit(
        control, pair, epsilon=1.0, runs=2000, thresholds=thresholds, seed=1, progress=False
    )
    assert bad.lower_bound > 1.0


@pytest.mark.parametrize(
    "mech, delta",
    [
        (dpcvx.LocalizedDoubleOutputPerturbation(k=4, moment=1.0, blocks=1, progress=False), 0.0),
        (dpcvx.DoubleOutputPerturbation(C=1.0, regularization=0.1), 0.0),
        (dpcvx.TiltedOutputPerturbation(lipschitz=5.0, regularization=1.0, tilt=0.1), 0.0),
        (
            dpcvx.ClippedGradientDescent(
                k=4, allow_outside_theory=True, iteration_cap=5, progress=False
            ),
            1e-6,
        ),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, float) else "",
)
def test_every_example_level_mechanism_runs_on_users(mech, delta):
    """LDOP partitions users, clipped gradient descent takes per-user mean gradients, the
    extension acts on the user loss: each release is stated for replace-one-user neighbors."""
    rng = np.random.default_rng(0)
    n, m = 60, 4
    w, x, y = cp.Variable(2), cp.Parameter(2), cp.Parameter()
    problem = dpcvx.UserLevelProblem(
        cp.abs(x @ w - y),
        w,
        {x: rng.standard_t(3, size=(n * m, 2)), y: rng.normal(size=n * m)},
        dpcvx.domains.l2_ball(w, 2.0),
        users=np.repeat(np.arange(n), m),
        items_per_user=m,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # clipped GD on a nonsmooth loss
        res = problem.solve_private(mech, epsilon=1.0, delta=delta, rng=0)
    assert res.neighbors == dpcvx.ReplaceOneUser(m)
    assert np.linalg.norm(res.w) <= 2.0 + 1e-9
    assert {e.neighbors for e in res.ledger.events} == {dpcvx.ReplaceOneUser(m)}
