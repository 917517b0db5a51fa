"""Public class weights (``class_weight``) of :class:`dpcvx.estimators.PrivateLinearClassifier`.

Every fit here is seeded (deterministic). The noise-free fits run at ``epsilon = 1e12`` with a
fixed ``lam``: their noise is far below the tolerances, so they are compared with an
independent CVXPY solve of the weighted objective on the same clipped rows.
"""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pytest
from sklearn.base import clone

import dpcvx
from dpcvx.errors import InvalidParameterError
from dpcvx.estimators import PrivateLinearClassifier

B = 2.0  # public row-norm bound
R = 3.0  # public domain radius
LAM = 0.05


def _data(n=120, d=3, seed=0, K=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if K == 2:
        y = (X[:, 0] + 0.8 * rng.normal(size=n) > 0.3).astype(int)
    else:
        y = np.arange(n) % K
        X[:, 0] += y - 1.0
    return X, y


def _clipped(X):
    """The estimator's clipping (rows scaled to ``B (1 - 1e-10)``) and the intercept column."""
    limit = B * (1.0 - 1e-10)
    norms = np.linalg.norm(X, axis=1)
    X = X * np.where(norms > limit, limit / norms, 1.0)[:, None]
    return np.hstack([X, np.ones((X.shape[0], 1))])


def _reference(rows, target, weights, loss):
    """The weighted regularized objective, solved by CVXPY alone."""
    v = cp.Variable(rows.shape[1])
    margin = cp.multiply(target, rows @ v)
    per_example = cp.pos(1 - margin) if loss == "hinge" else cp.logistic(-margin)
    objective = cp.sum(cp.multiply(weights, per_example)) / rows.shape[0]
    problem = cp.Problem(cp.Minimize(objective + LAM / 2 * cp.sum_squares(v)), [cp.norm(v, 2) <= R])
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return v.value


def _classifier(loss="hinge", **params):
    params = {
        "classes": [0, 1],
        "feature_norm_bound": B,
        "domain_radius": R,
        "regularization": LAM,
        "epsilon": 1e12,
        "random_state": 0,
        **params,
    }
    return PrivateLinearClassifier(loss, **params)


# ---------------------------------------------------------------- the weighted objective
@pytest.mark.parametrize("loss", ["hinge", "logistic"])
def test_noise_free_binary_fit_is_the_weighted_minimizer(loss):
    X, y = _data()
    weight = {0: 0.5, 1: 3.0}
    clf = _classifier(loss, class_weight=weight).fit(X, y)
    expected = _reference(
        _clipped(X), np.where(y == 1, 1.0, -1.0), np.array([weight[k] for k in y]), loss
    )
    released = np.append(clf.coef_[0], clf.intercept_[0])
    np.testing.assert_allclose(released, expected, atol=1e-4)
    # and the weights matter: the unweighted minimizer is far from it
    plain = _reference(_clipped(X), np.where(y == 1, 1.0, -1.0), np.ones(y.size), loss)
    assert np.linalg.norm(plain - expected) > 0.05
    assert clf.data_dependent_bounds_ == ()


@pytest.mark.parametrize("loss", ["hinge", "logistic"])
def test_one_vs_rest_weights_each_example_by_its_original_label(loss):
    X, y = _data(n=90, K=3)
    weight = {0: 2.0, 2: 0.5}  # label 1 is not listed: weight 1
    clf = _classifier(loss, classes=[0, 1, 2], multi_class="ovr", class_weight=weight).fit(X, y)
    weights = np.array([weight.get(k, 1.0) for k in y])
    rows = _clipped(X)
    for k in range(3):
        expected = _reference(rows, np.where(y == k, 1.0, -1.0), weights, loss)
        released = np.append(clf.coef_[k], clf.intercept_[k])
        np.testing.assert_allclose(released, expected, atol=1e-4)
    assert clf.bounds_["class_weight"] == {0: 2.0, 1: 1.0, 2: 0.5}
    assert clf.bounds_["max_class_weight"] == 2.0


def test_the_lipschitz_bound_scales_with_the_largest_weight():
    X, y = _data()
    base = _classifier().fit(X, y).bounds_
    assert base["class_weight"] is None and base["max_class_weight"] == 1.0
    cases = [({1: 3.0}, 3.0), ({0: 0.5, 1: 0.25}, 0.5), ({0: 0.5}, 1.0)]  # unlisted: weight 1
    for weight, largest in cases:
        for loss in ("hinge", "logistic"):
            bounds = _classifier(loss, class_weight=weight).fit(X, y).bounds_
            assert bounds["max_class_weight"] == largest
            assert bounds["lipschitz"] >= largest * np.hypot(B, 1.0)
            assert bounds["lipschitz"] == pytest.approx(largest * base["lipschitz"], rel=1e-14)
    # the automatic lam (hence the noise) follows L
    auto = _classifier(regularization="auto", class_weight={1: 3.0}).fit(X, y).bounds_
    plain = _classifier(regularization="auto").fit(X, y).bounds_
    assert auto["regularization"] == pytest.approx(3.0 * plain["regularization"], rel=1e-12)


def test_a_weight_on_the_minority_class_raises_its_recall():
    rng = np.random.default_rng(3)
    n = 600
    y = (rng.random(n) < 0.12).astype(int)  # about 12% positives
    X = rng.normal(size=(n, 2)) + np.outer(y, [1.2, 0.6])
    recall = {}
    for name, weight in (("plain", None), ("weighted", {1: 7.0})):
        clf = _classifier(epsilon=1e3, regularization=0.01, class_weight=weight).fit(X, y)
        recall[name] = float(np.mean(clf.predict(X[y == 1]) == 1))
    # seeded: plain 0.0-ish, weighted well above it
    assert recall["weighted"] >= recall["plain"] + 0.3, recall


def test_class_weights_with_ldop_and_private_selection():
    X, y = _data(n=200)
    weight = {1: 2.0}
    sel = _classifier(epsilon=1e3, regularization="select", class_weight=weight).fit(X, y)
    plain = _classifier(epsilon=1e3, regularization="select").fit(X, y)
    upper, plain_upper = (
        sel.bounds_["selection_loss_bounds"][1],
        plain.bounds_["selection_loss_bounds"][1],
    )
    assert upper >= 2.0 * plain_upper * (1 - 1e-15)
    ldop = _classifier(
        mechanism="ldop",
        regularization="auto",
        epsilon=10.0,
        class_weight=weight,
        mechanism_options={"blocks": 5},
    ).fit(X, y)
    assert ldop.bounds_["gradient_moment"] == pytest.approx(2.0 * (B + 1.0))
    assert ldop.result_.epsilon == 10.0


# ---------------------------------------------------------------- refusals, nothing spent
@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"class_weight": "balanced"}, "class frequencies"),
        ({"class_weight": [1.0, 2.0]}, "must be None or a dict"),
        ({"class_weight": {1: 0.0}}, "positive"),
        ({"class_weight": {1: -2.0}}, "positive"),
        ({"class_weight": {1: np.inf}}, "finite"),
        ({"class_weight": {1: np.nan}}, "finite"),
        ({"class_weight": {1: "2"}}, "finite real"),
        ({"class_weight": {5: 2.0}}, "not among the classes"),
        (
            {"class_weight": {1: 2.0}, "loss": "logistic", "classes": [0, 1, 2]},
            "multinomial",
        ),
        (
            {
                "class_weight": {1: 2.0},
                "loss": "logistic",
                "classes": [0, 1],
                "multi_class": "multinomial",
            },
            "multinomial",
        ),
    ],
)
def test_refusals_are_typed_and_spend_nothing(params, match):
    X, y = _data()
    accountant = dpcvx.Accountant(1.0)
    params = {"loss": "hinge", "epsilon": 1.0, **params}
    clf = _classifier(accountant=accountant, **params)
    with pytest.raises(InvalidParameterError, match=match):
        clf.fit(X, y)
    assert accountant.ledger.events == ()


def test_unknown_labels_are_refused_when_the_classes_come_from_y():
    X, y = _data()
    accountant = dpcvx.Accountant(1.0)
    clf = _classifier(classes=None, class_weight={7: 2.0}, epsilon=1.0, accountant=accountant)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpcvx.PrivacyLeakWarning)
        with pytest.raises(InvalidParameterError, match="not among the classes"):
            clf.fit(X, y)
    assert accountant.ledger.events == ()


# ---------------------------------------------------------------- scikit-learn plumbing
def test_clone_and_get_params_round_trip():
    weight = {0: 1.0, 1: 4.0}
    clf = _classifier(class_weight=weight)
    assert clf.get_params()["class_weight"] == weight
    copy = clone(clf)
    assert copy.get_params()["class_weight"] == weight
    assert copy.class_weight is not weight  # cloned, not shared
    assert _classifier().get_params()["class_weight"] is None
    copy.set_params(class_weight={1: 2.0})
    assert copy.class_weight == {1: 2.0} and clf.class_weight == weight
    X, y = _data()
    np.testing.assert_array_equal(clone(clf).fit(X, y).coef_, clf.fit(X, y).coef_)
