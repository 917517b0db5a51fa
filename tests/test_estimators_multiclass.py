"""One-vs-rest multiclass for :class:`dpcvx.estimators.PrivateLinearClassifier`.

The accuracy tests are seeded (deterministic: they never fail by chance). Their thresholds
sit far below what fits reach and far above the majority rate: over the seeds 0..9 at the
epsilons used, the smallest test accuracies were iris 0.844 (threshold 0.70), wine 0.963
(0.85) and digits 0.930 (0.85), and the spread across seeds was at most 0.03. So an unseeded
run would fail with a probability we estimate far below 1e-3 per dataset (no seed came within
0.08 of its threshold; not an exact bound).
"""

from __future__ import annotations

import pickle
from fractions import Fraction

import numpy as np
import pytest
from scipy.special import expit
from sklearn.base import clone
from sklearn.datasets import load_digits, load_iris, load_wine
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import dpcvx
from dpcvx.errors import DataError, InvalidParameterError, PrivacyBudgetError
from dpcvx.estimators import PrivateLinearClassifier
from dpcvx.mechanisms.base import exact_share

LOADERS = {"iris": load_iris, "wine": load_wine, "digits": load_digits}
# (epsilon, smallest accepted test accuracy); majority rates are 0.33, 0.40 and 0.10
ACCURACY = {"iris": (1e3, 0.7), "wine": (1e2, 0.85), "digits": (1e3, 0.85)}


def _split(name):
    """Standardized with the training split's statistics (a deployment fixes them from public
    knowledge); rows are clipped by the estimator to the public bound sqrt(n_features)."""
    X, y = LOADERS[name](return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    scaler = StandardScaler().fit(Xtr)
    return scaler.transform(Xtr), scaler.transform(Xte), ytr, yte


def _classifier(X, K, **params):
    params = {
        "classes": list(range(K)),
        "feature_norm_bound": float(np.sqrt(X.shape[1])),
        "domain_radius": 5.0,
        "multi_class": "ovr",
        "random_state": 0,
        **params,
    }
    return PrivateLinearClassifier(**params)


def _blobs(n=150, K=3, d=2, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % K
    centers = 2.0 * np.stack(
        [np.cos(2 * np.pi * np.arange(K) / K), np.sin(2 * np.pi * np.arange(K) / K)], 1
    )
    X = centers[y][:, :d] + 0.5 * rng.normal(size=(n, d))
    return X, y


# ---------------------------------------------------------------- accuracy
@pytest.mark.parametrize("name", sorted(LOADERS))
def test_one_vs_rest_is_accurate_at_large_epsilon(name):
    Xtr, Xte, ytr, yte = _split(name)
    K = int(np.unique(ytr).size)
    epsilon, threshold = ACCURACY[name]
    clf = _classifier(Xtr, K, epsilon=epsilon).fit(Xtr, ytr)
    majority = np.bincount(yte).max() / yte.size
    accuracy = clf.score(Xte, yte)
    assert accuracy >= threshold > majority + 0.3
    assert clf.coef_.shape == (K, Xtr.shape[1]) and clf.intercept_.shape == (K,)
    assert clf.data_dependent_bounds_ == ()


# ---------------------------------------------------------------- accounting
@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_one_fit_records_exactly_one_event_of_the_requested_budget(delta):
    X, y = _blobs()
    accountant = dpcvx.Accountant(3.0, delta)
    clf = _classifier(X, 3, epsilon=3.0, delta=delta, accountant=accountant).fit(X, y)
    (event,) = accountant.ledger.events
    assert event.epsilon == 3.0 and event.delta == delta
    assert event.kind == ("pure" if delta == 0 else "approx")
    assert event.detail["classes"] == 3
    assert accountant.remaining.epsilon == 0.0
    assert clf.ledger_ == accountant.ledger
    assert (clf.result_.epsilon, clf.result_.delta) == (3.0, delta)
    assert clf.result_.w.shape == (3, X.shape[1] + 1)
    assert len(clf.certificates_) == 3  # one certified solve per class


def test_without_accountant_the_fit_charges_a_fresh_budget_once():
    X, y = _blobs()
    clf = _classifier(X, 3, epsilon=2.0).fit(X, y)
    (event,) = clf.ledger_.events
    assert event.epsilon == 2.0
    assert clf.result_.seeded


def test_each_class_runs_at_the_exact_share_of_epsilon():
    """The per-class release is the binary release at exact_share(epsilon, K): same automatic
    regularization, same noise scale (K times that of a binary fit at epsilon)."""
    X, y = _blobs(n=180, K=4)
    epsilon, K = 1.0, 4
    share = exact_share(epsilon, K)
    assert Fraction(share) * K <= Fraction(epsilon)
    clf = _classifier(X, K, epsilon=epsilon).fit(X, y)
    assert clf.result_.detail["per_class_epsilon"] == share
    assert clf.ledger_.events[0].detail["per_class_epsilon"] == share
    binary_at_share = _classifier(X, 2, classes=[False, True], epsilon=share).fit(X, y == 0)
    binary_at_epsilon = _classifier(X, 2, classes=[False, True], epsilon=epsilon).fit(X, y == 0)
    for facts in clf.result_.detail["per_class"]:
        assert facts["noise_scale"] == binary_at_share.result_.detail["noise_scale"]
    assert clf.bounds_["regularization"] == binary_at_share.bounds_["regularization"]
    ratio = clf.result_.detail["noise_scale"] / binary_at_epsilon.result_.detail["noise_scale"]
    # the scale is (sensitivity / epsilon_k), and the automatic lam grows like sqrt(1/epsilon_k)
    # so the sensitivity shrinks by sqrt(K): the scale grows by K / sqrt(K) = sqrt(K) overall
    assert ratio == pytest.approx(np.sqrt(K), rel=1e-6)
    # with a fixed lam the sensitivity is the same, and the scale is exactly K times larger
    fixed = {"regularization": 0.1}
    ovr = _classifier(X, K, epsilon=epsilon, **fixed).fit(X, y)
    binary = _classifier(X, 2, classes=[False, True], epsilon=epsilon, **fixed).fit(X, y == 0)
    ratio = ovr.result_.detail["noise_scale"] / binary.result_.detail["noise_scale"]
    assert ratio == pytest.approx(K, rel=1e-6)


def test_the_noise_is_independent_across_classes_and_reproducible():
    X, y = _blobs()
    a = _classifier(X, 3, epsilon=1.0, random_state=5).fit(X, y)
    b = _classifier(X, 3, epsilon=1.0, random_state=5).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    # with one seed reused per class, the symmetric blobs would give rotated copies of one
    # noise draw; independent draws differ
    noise = a.result_.w - _classifier(X, 3, epsilon=1e12, random_state=5).fit(X, y).result_.w
    assert not np.allclose(noise[0], noise[1])


# ---------------------------------------------------------------- bad input spends nothing
@pytest.mark.parametrize(
    "params,X_y,error,match",
    [
        ({}, lambda X, y: (X, y + 7), DataError, "outside `classes`"),
        ({"classes": None}, lambda X, y: (X, y), DataError, "Only binary classification"),
        ({"classes": None}, lambda X, y: (X, np.zeros_like(y)), DataError, "one class only"),
        ({"classes": [0, 1]}, lambda X, y: (X, y), DataError, "Only binary classification"),
        ({"classes": [3]}, lambda X, y: (X, y), InvalidParameterError, "two public class"),
        ({"epsilon": -1.0}, lambda X, y: (X, y), InvalidParameterError, "epsilon"),
        (
            {"feature_norm_bound": None, "on_data_dependent_bounds": "raise"},
            lambda X, y: (X, y),
            InvalidParameterError,
            "feature_norm_bound",
        ),
        ({"epsilon": 2.0}, lambda X, y: (X, y), PrivacyBudgetError, "exceed"),
        ({"mechanism": "ldop"}, lambda X, y: (X[:20], y[:20]), InvalidParameterError, "n >= 2"),
    ],
)
def test_bad_input_raises_and_spends_nothing(params, X_y, error, match):
    X, y = _blobs()
    accountant = dpcvx.Accountant(1.0)
    clf = _classifier(X, 3, epsilon=1.0, accountant=accountant).set_params(**params)
    X, y = X_y(X, y)
    with pytest.raises(error, match=match):
        clf.fit(X, y)
    assert len(accountant.ledger) == 0
    assert not hasattr(clf, "result_")


def test_public_classes_absent_from_the_sample_still_fit():
    X, y = _blobs(K=3)
    clf = _classifier(X, 4, epsilon=1e3).fit(X, y)
    np.testing.assert_array_equal(clf.classes_, [0, 1, 2, 3])
    assert clf.decision_function(X).shape == (X.shape[0], 4)
    assert set(clf.predict(X)) <= {0, 1, 2, 3}


# ---------------------------------------------------------------- prediction
def test_decision_function_predict_and_probabilities():
    X, y = _blobs()
    labels = np.array(["a", "b", "c"])[y]
    clf = _classifier(X, 3, classes=["c", "a", "b"], epsilon=1e3).fit(X, labels)
    np.testing.assert_array_equal(clf.classes_, ["a", "b", "c"])
    scores = clf.decision_function(X)
    assert scores.shape == (X.shape[0], 3)
    np.testing.assert_allclose(scores, X @ clf.coef_.T + clf.intercept_)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[np.argmax(scores, axis=1)])
    assert clf.score(X, labels) > 0.9
    proba = clf.predict_proba(X)
    assert proba.shape == (X.shape[0], 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    sig = expit(scores)
    np.testing.assert_allclose(proba, sig / sig.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(np.exp(clf.predict_log_proba(X)), proba)
    np.testing.assert_array_equal(np.argmax(proba, axis=1), np.argmax(scores, axis=1))


def test_binary_probabilities_are_the_sigmoid_of_the_score():
    X, y = _blobs(K=2)
    clf = _classifier(X, 2, epsilon=5.0).fit(X, y)
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba[:, 1], expit(clf.decision_function(X)))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert clf.decision_function(X).shape == (X.shape[0],)


def test_hinge_loss_has_no_probabilities():
    X, y = _blobs()
    clf = _classifier(X, 3, loss="hinge", epsilon=1e3).fit(X, y)
    assert not hasattr(clf, "predict_proba")
    with pytest.raises(AttributeError, match="predict_proba"):
        clf.predict_proba(X)
    assert clf.score(X, y) > 0.9


# ---------------------------------------------------------------- scikit-learn plumbing
def test_clone_get_params_and_pickle():
    X, y = _blobs()
    accountant = dpcvx.Accountant(2.0)
    clf = _classifier(X, 3, epsilon=1.0, accountant=accountant)
    params = clf.get_params()
    assert params["classes"] == [0, 1, 2] and params["accountant"] is accountant
    twin = clone(clf)
    assert twin.get_params()["classes"] == [0, 1, 2] and twin.accountant is accountant
    clf.fit(X, y)
    twin.fit(X, y)
    assert [e.epsilon for e in accountant.ledger.events] == [1.0, 1.0]
    assert twin.__sklearn_tags__().classifier_tags.multi_class
    assert not PrivateLinearClassifier().__sklearn_tags__().classifier_tags.multi_class
    clf.set_params(accountant=None)
    loaded = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
    assert loaded.result_.detail["one_vs_rest"] == 3


# ---------------------------------------------------------------- loss="auto"
def _default(X, K, **params):
    return PrivateLinearClassifier(
        classes=list(range(K)),
        feature_norm_bound=float(np.sqrt(X.shape[1])),
        random_state=0,
        **params,
    )


def test_auto_loss_fits_one_vs_rest_hinge_when_classes_are_at_most_the_features():
    X, y = _blobs(K=3, d=2)
    X = np.column_stack([X, np.zeros((X.shape[0], 2))])  # d = 4 >= K = 3
    clf = _default(X, 3)
    assert hasattr(clf, "predict_proba")  # before fit the rule needs d: not decided yet
    clf.fit(X, y)
    assert clf.loss_ == "hinge" and clf.loss == "auto"
    assert clf.result_.detail["one_vs_rest"] == 3
    assert not hasattr(clf, "predict_proba")
    with pytest.raises(AttributeError) as info:
        clf.predict_proba(X)
    assert "loss='logistic'" in str(info.value.__cause__)  # the reason, chained
    clf.set_params(multi_class="ovr")  # parameters changed, not refitted: still the hinge fit
    assert not hasattr(clf, "predict_proba")
    clf.set_params(multi_class="auto")
    twin = _default(X, 3, loss="hinge", multi_class="ovr").fit(X, y)
    np.testing.assert_array_equal(clf.coef_, twin.coef_)  # the same release, same seed


def test_auto_loss_fits_the_multinomial_model_when_classes_outnumber_the_features():
    X, y = _blobs(K=3, d=2)
    clf = _default(X, 3).fit(X, y)
    assert clf.loss_ == "logistic" and clf.result_.detail["multinomial"] == 3
    np.testing.assert_allclose(clf.predict_proba(X).sum(axis=1), 1.0)
    twin = _default(X, 3, loss="logistic").fit(X, y)
    np.testing.assert_array_equal(clf.coef_, twin.coef_)


@pytest.mark.parametrize(
    ("K", "params", "expected"),
    [
        (2, {}, "logistic"),  # binary: logistic whatever d
        (3, {"multi_class": "ovr"}, "logistic"),  # an explicit multi_class keeps logistic
        (3, {"multi_class": "multinomial"}, "logistic"),
        (3, {"class_weight": {0: 2.0}}, "hinge"),  # the multinomial takes no weights
        (3, {"loss": "logistic"}, "logistic"),
    ],
)
def test_auto_loss_rule_from_public_parameters(K, params, expected):
    X, y = _blobs(K=K, d=2)
    X = np.column_stack([X, np.zeros((X.shape[0], 3))])  # d = 5
    clf = _default(X, K, epsilon=5.0, **params).fit(X, y)
    assert clf.loss_ == expected
