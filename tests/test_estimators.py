"""The scikit-learn estimators (dpcvx.estimators): scikit-learn's estimator checks, accuracy
against the non-private fit, the data-dependent-bound warnings and their strict mode, seeded
reproducibility, accounting, LDOP on small heavy-tailed data, and bad input."""

from __future__ import annotations

import math
import pickle

import cvxpy as cp
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.linear_model import LinearRegression, LogisticRegression, QuantileRegressor
from sklearn.model_selection import cross_val_score, train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import dpcvx
from dpcvx.errors import DataError, InvalidParameterError, PrivacyBudgetError, PrivacyLeakWarning
from dpcvx.estimators import (
    PrivateLinearClassifier,
    PrivateQuantileRegressor,
    PrivateRidgeRegressor,
)

# ---------------------------------------------------------------- scikit-learn's checks
# Every estimator is checked at the default epsilon = 1 with its public bounds given
# (feature_norm_bound; label_bound for the squared loss), so no bound is taken from the data.
# The seed only makes the checks deterministic.
CHECKED = [
    PrivateLinearClassifier(feature_norm_bound=5.0, random_state=0),
    PrivateLinearClassifier("hinge", feature_norm_bound=5.0, random_state=0),
    PrivateQuantileRegressor(feature_norm_bound=5.0, random_state=0),
    PrivateRidgeRegressor(feature_norm_bound=5.0, random_state=0),
    PrivateRidgeRegressor("squared", label_bound=3.0, feature_norm_bound=5.0, random_state=0),
    PrivateRidgeRegressor(
        "squared", mechanism="ssp", label_range=(-5.0, 5.0), feature_norm_bound=5.0, random_state=0
    ),
]

# Checks expected to fail, with the reason (strict: a check that starts passing is reported).
# Checks that do not apply are not run at all, by scikit-learn's own tags, and need no entry:
# - multiclass parts (check_classifiers_train, check_classifiers_classes, ...): without public
#   `classes` the classifier is binary (tag multi_class=False; one-vs-rest needs `classes`,
#   tests/test_estimators_multiclass.py); check_classifier_not_supporting_multiclass runs
#   instead and passes (DataError, a ValueError, "Only binary classification is supported.");
# - the sample-weight checks: `fit` takes no sample_weight (a weight above 1 would multiply one
#   example's influence and void the sensitivity bound);
# - sparse input is rejected with scikit-learn's TypeError (check_estimator_sparse_* pass);
# - LDOP is not in the list: it needs n >= 2 J examples (J blocks per phase), more than most
#   of the checks' datasets have; it is tested below.
_EXPECTED_FAILED_CHECKS = {
    "regressor": {
        "check_regressors_train": (
            "asserts a training R^2 > 0.5 on 200 noisy examples in 10 dimensions; at "
            "epsilon = 1 the privacy noise on so few examples costs more than that (R^2 is "
            "0.47 for the pinball, 0.41 for the Huber and 0.19 for the squared loss here). "
            "The pinball and Huber configurations pass at epsilon = 100; the squared loss, "
            "whose Lipschitz bound grows with domain_radius and label_bound, reaches 0.46. "
            "Accuracy at realistic sizes is tested in test_*_accuracy below."
        ),
    },
    "classifier": {
        "check_class_weight_classifiers": (
            "asserts > 87% predictions of the up-weighted class on 50 very noisy points at "
            "epsilon = 1 with domain_radius = 1; the privacy noise (and, for the logistic loss, "
            "the unit domain bounding the intercept) keeps both losses near 0.5 (0.46-0.62 over "
            "10 seeds). Class weights are tested in tests/test_class_weight.py."
        ),
    },
}


def _expected_failed_checks(estimator) -> dict[str, str]:
    kind = "classifier" if isinstance(estimator, PrivateLinearClassifier) else "regressor"
    return _EXPECTED_FAILED_CHECKS[kind]


# The classifier's checks fit on many label sets (0/1, -1/1, strings), so no fixed public
# `classes` fits them all: the classifier takes its two labels from y there and says so with a
# PrivacyLeakWarning, which is ignored for these checks only (by its message). Every other
# PrivacyLeakWarning still fails the test (pyproject's filter).
@pytest.mark.filterwarnings("ignore:`classes` was not given:dpcvx.errors.PrivacyLeakWarning")
@parametrize_with_checks(CHECKED, expected_failed_checks=_expected_failed_checks, xfail_strict=True)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


# ---------------------------------------------------------------- data with public preprocessing
@pytest.fixture(scope="module")
def breast_cancer():
    """Standardized with the training split's statistics (a deployment fixes them from public
    knowledge, as examples/quickstart.py says); rows are clipped by the estimator."""
    X, y = load_breast_cancer(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    scaler = StandardScaler().fit(Xtr)
    return scaler.transform(Xtr), scaler.transform(Xte), ytr, yte


@pytest.fixture(scope="module")
def diabetes():
    """Features as shipped (each column has unit norm) times sqrt(442), i.e. standardized as
    the dataset documents; targets shifted and scaled by round public constants."""
    X, y = load_diabetes(return_X_y=True)
    X = X * math.sqrt(442)
    y = (y - 150.0) / 100.0
    return train_test_split(X, y, test_size=0.25, random_state=0)


def _reference_solution(est, X, target, loss):
    """The exact non-private certified solve of the estimator's own objective (same clipping,
    intercept column, regularization and domain), from its public ``bounds_``."""
    b = est.bounds_
    B, s = b["feature_norm_bound"], b["intercept_scaling"]
    norms = np.linalg.norm(X, axis=1)
    X = X * np.minimum(1.0, B / norms)[:, None]
    X = np.hstack([X, np.full((len(X), 1), s)])
    p = X.shape[1]
    w, x, y = cp.Variable(p), cp.Parameter(p), cp.Parameter()
    problem = dpcvx.Problem(
        loss(x @ w, y),
        w,
        data={x: X, y: target},
        domain=dpcvx.domains.l2_ball(w, b["domain_radius"]),
    )
    return problem.solve(regularization=b["regularization"])


def _released(est) -> np.ndarray:
    return np.append(
        np.ravel(est.coef_), np.ravel(est.intercept_)[0] / est.bounds_["intercept_scaling"]
    )


def _within_noise(est, reference) -> float:
    """A bound on ||w_released - w*|| that fails with probability < 1e-9: the certificate's
    distance bound plus the l2-Laplace noise norm (Gamma(d, scale)) at its 1 - 1e-9 quantile.
    (Projection onto the domain only brings the point closer to w*, which lies in it.)"""
    from scipy.stats import gamma

    d = reference.w.size
    scale = est.result_.detail["noise_scale"]
    return est.certificates_[0].distance_bound + gamma.ppf(1 - 1e-9, d, scale=scale)


# ---------------------------------------------------------------- accuracy
@pytest.mark.parametrize("loss", ["logistic", "hinge"])
def test_classifier_accuracy_matches_the_non_private_fit_at_large_epsilon(breast_cancer, loss):
    Xtr, Xte, ytr, yte = breast_cancer
    clf = PrivateLinearClassifier(
        loss, classes=[0, 1], epsilon=1e4, feature_norm_bound=6.0, domain_radius=5.0, random_state=0
    ).fit(Xtr, ytr)
    helper = dpcvx.losses.hinge if loss == "hinge" else dpcvx.losses.logistic
    ref = _reference_solution(clf, Xtr, np.where(ytr == 1, 1.0, -1.0), helper)
    assert np.linalg.norm(_released(clf) - ref.w) <= _within_noise(clf, ref)
    baseline = LogisticRegression().fit(Xtr, ytr).score(Xte, yte)
    assert clf.score(Xte, yte) >= baseline - 0.03


def test_classifier_is_useful_at_epsilon_one(breast_cancer):
    Xtr, Xte, ytr, yte = breast_cancer
    scores = [
        PrivateLinearClassifier(
            classes=[0, 1], epsilon=1.0, feature_norm_bound=6.0, random_state=seed
        )
        .fit(Xtr, ytr)
        .score(Xte, yte)
        for seed in range(5)
    ]
    assert np.mean(scores) >= 0.85  # seeded, so deterministic (0.90; non-private: 0.96)


@pytest.mark.parametrize(
    "make,loss",
    [
        (lambda: PrivateQuantileRegressor(), lambda s, t: dpcvx.losses.pinball(s, t, 0.5)),
        (lambda: PrivateRidgeRegressor(), lambda s, t: dpcvx.losses.huber(s, t, 1.0)),
        (lambda: PrivateRidgeRegressor("squared", label_bound=2.5), dpcvx.losses.squared),
    ],
)
def test_regressor_accuracy_matches_the_non_private_fit_at_large_epsilon(diabetes, make, loss):
    Xtr, Xte, ytr, yte = diabetes
    reg = (
        make()
        .set_params(epsilon=1e4, feature_norm_bound=5.0, domain_radius=2.0, random_state=0)
        .fit(Xtr, ytr)
    )
    target = np.clip(ytr, -2.5, 2.5) if reg.get_params().get("loss") == "squared" else ytr
    ref = _reference_solution(reg, Xtr, target, loss)
    assert np.linalg.norm(_released(reg) - ref.w) <= _within_noise(reg, ref)
    baseline = max(
        QuantileRegressor(alpha=0.0).fit(Xtr, ytr).score(Xte, yte),
        LinearRegression().fit(Xtr, ytr).score(Xte, yte),
    )
    assert reg.score(Xte, yte) >= baseline - 0.05


def test_quantile_regressor_estimates_the_requested_quantile():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 2))
    y = 0.5 * X[:, 0] + rng.normal(size=600)
    reg = PrivateQuantileRegressor(
        quantile=0.8, epsilon=1e3, feature_norm_bound=4.0, domain_radius=2.0, random_state=0
    ).fit(X, y)
    assert 0.74 <= np.mean(y <= reg.predict(X)) <= 0.86


# ---------------------------------------------------------------- data-dependent bounds
def _binary(n=120, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X @ np.arange(1.0, d + 1) > 0).astype(int)
    return X, y


@pytest.mark.parametrize(
    "make,name",
    [
        (lambda: PrivateLinearClassifier(classes=[0, 1]), "feature_norm_bound"),
        (lambda: PrivateLinearClassifier(feature_norm_bound=4.0), "classes"),
        (lambda: PrivateRidgeRegressor("squared", feature_norm_bound=4.0), "label_bound"),
        (lambda: PrivateQuantileRegressor(), "feature_norm_bound"),
    ],
)
def test_a_bound_taken_from_the_data_warns_and_says_how_to_fix_it(make, name):
    X, y = _binary()
    est = make()
    with pytest.warns(PrivacyLeakWarning, match=f"`{name}` was not given") as record:
        est.fit(X, y)
    message = str(record[0].message)
    assert "took it from the data" in message and f"Pass {name}" in message
    assert "on_data_dependent_bounds='raise'" in message
    assert record[0].filename == __file__  # points at the caller of fit
    assert est.data_dependent_bounds_ == (name,)


@pytest.mark.parametrize(
    "make,names",
    [
        (lambda: PrivateLinearClassifier(), ("feature_norm_bound", "classes")),
        (lambda: PrivateRidgeRegressor("squared"), ("feature_norm_bound", "label_bound")),
        (lambda: PrivateQuantileRegressor(mechanism="ldop"), ("feature_moment",)),
    ],
)
def test_strict_mode_raises_before_anything_is_spent(make, names):
    X, y = _binary(n=200)
    accountant = dpcvx.Accountant(5.0)
    est = make().set_params(on_data_dependent_bounds="raise", accountant=accountant)
    with pytest.raises(InvalidParameterError, match="needs public bounds") as info:
        est.fit(X, y)
    for name in names:
        assert f"`{name}`" in str(info.value)
    assert len(accountant.ledger) == 0 and accountant.spent.epsilon == 0.0
    assert not hasattr(est, "result_")


def test_public_bounds_give_no_warning_and_data_independent_noise():
    """With the bounds given, the noise scale is fixed before the data is seen: a dataset with
    a huge row (clipped) gets exactly the same noise as one without."""
    X, y = _binary()
    X_outlier = X.copy()
    X_outlier[0] *= 1e6
    est = PrivateLinearClassifier(classes=[0, 1], feature_norm_bound=2.0, random_state=0)
    first = est.fit(X, y).result_.detail
    second = clone(est).fit(X_outlier, y).result_.detail
    assert first["noise_scale"] == second["noise_scale"]
    assert first["lipschitz"] >= math.hypot(2.0, 1.0)
    assert first["lipschitz"] == pytest.approx(math.hypot(2.0, 1.0), rel=1e-15)
    assert est.data_dependent_bounds_ == ()


def test_ldop_moment_bound_from_data_warns():
    rng = np.random.default_rng(1)
    X = rng.standard_t(5, size=(150, 2))
    y = X @ [0.5, -0.3] + rng.standard_t(3, size=150)
    est = PrivateQuantileRegressor(
        mechanism="ldop", mechanism_options={"blocks": 3}, random_state=0
    )
    with pytest.warns(PrivacyLeakWarning, match="`feature_moment` was not given"):
        est.fit(X, y)
    assert est.data_dependent_bounds_ == ("feature_moment",)


# ---------------------------------------------------------------- randomness
def test_seeded_fits_are_reproducible_and_marked():
    X, y = _binary()
    make = lambda seed: PrivateLinearClassifier(
        classes=[0, 1], feature_norm_bound=3.0, random_state=seed
    ).fit(X, y)
    a, b, c = make(7), make(7), make(8)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.intercept_[0] == b.intercept_[0]
    assert not np.array_equal(a.coef_, c.coef_)
    assert a.result_.seeded and "SEEDED" in a.result_.summary()


def test_unseeded_fits_use_os_randomness():
    X, y = _binary()
    est = PrivateLinearClassifier(classes=[0, 1], feature_norm_bound=3.0)
    first = est.fit(X, y).coef_.copy()
    assert not est.result_.seeded
    assert not np.array_equal(first, est.fit(X, y).coef_)


# ---------------------------------------------------------------- accounting
def test_fits_are_charged_to_a_shared_accountant_and_clones_share_it():
    X, y = _binary()
    accountant = dpcvx.Accountant(3.0)
    est = PrivateLinearClassifier(
        classes=[0, 1], feature_norm_bound=3.0, epsilon=1.0, accountant=accountant, random_state=0
    )
    twin = clone(est)
    assert twin.accountant is accountant and twin.get_params()["epsilon"] == 1.0
    est.fit(X, y)
    twin.fit(X, y)
    assert len(accountant.ledger) == 2 and accountant.spent.epsilon == pytest.approx(2.0)
    assert twin.ledger_ is accountant.ledger and len(est.ledger_) == 1
    assert est.ledger_.events[0].label.startswith("OutputPerturbation")
    assert est.result_.epsilon == 1.0 and est.result_.delta == 0.0
    assert len(est.certificates_) == 1
    assert est.certificates_[0].distance_bound > 0
    with pytest.raises(PrivacyBudgetError):
        clone(est).set_params(epsilon=1.5).fit(X, y)
    assert len(accountant.ledger) == 2  # nothing reserved by the refused fit


def test_cross_validation_charges_every_fold():
    X, y = _binary(n=150)
    accountant = dpcvx.Accountant(10.0)
    est = PrivateLinearClassifier(
        classes=[0, 1], feature_norm_bound=3.0, epsilon=2.0, accountant=accountant, random_state=0
    )
    scores = cross_val_score(est, X, y, cv=3)
    assert len(scores) == 3
    assert len(accountant.ledger) == 3 and accountant.spent.epsilon == pytest.approx(6.0)


def test_without_accountant_each_fit_charges_exactly_its_budget():
    X, y = _binary()
    est = PrivateRidgeRegressor(
        feature_norm_bound=3.0, epsilon=0.5, delta=1e-6, random_state=0
    ).fit(X, y.astype(float))
    total = est.ledger_.total()
    assert (total.epsilon, total.delta) == pytest.approx((0.5, 1e-6))
    assert est.ledger_.events[0].kind == "gaussian"
    assert est.result_.detail["noise"] == "gaussian"


def test_pickling_keeps_the_fit_but_refuses_a_live_accountant():
    X, y = _binary()
    accountant = dpcvx.Accountant(1.0)
    est = PrivateLinearClassifier(
        classes=[0, 1], feature_norm_bound=3.0, random_state=0, accountant=accountant
    ).fit(X, y)
    with pytest.raises(InvalidParameterError, match="set_params\\(accountant=None\\)"):
        pickle.dumps(est)
    est.set_params(accountant=None)
    loaded = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(loaded.predict_proba(X), est.predict_proba(X))
    assert isinstance(loaded.result_, dpcvx.PrivateResult)
    assert loaded.result_.summary() == est.result_.summary()
    assert loaded.ledger_.total() == est.ledger_.total()


# ---------------------------------------------------------------- LDOP
@pytest.mark.parametrize(
    "make",
    [
        lambda: PrivateQuantileRegressor(),
        lambda: PrivateLinearClassifier("hinge", classes=[0, 1]),
        lambda: PrivateRidgeRegressor(),
    ],
)
def test_ldop_fits_small_heavy_tailed_data_without_clipping(make):
    rng = np.random.default_rng(2)
    n, d = 300, 2
    X = rng.standard_t(5, size=(n, d))  # E ||x||^4 is finite for t(5)
    X[0] *= 50.0  # a heavy-tailed row: not clipped, privacy does not rest on it
    signal = X @ np.array([0.5, -0.3])
    y = signal + 0.3 * rng.standard_t(3, size=n)
    if isinstance(make(), PrivateLinearClassifier):
        y = (signal > 0).astype(int)
    accountant = dpcvx.Accountant(2.0)
    est = (
        make()
        .set_params(
            mechanism="ldop",
            epsilon=2.0,
            feature_moment=3.0,
            feature_second_moment=2.0,
            mechanism_options={"blocks": 5},
            accountant=accountant,
            random_state=0,
        )
        .fit(X, y)
    )
    assert est.result_.mechanism == "LocalizedDoubleOutputPerturbation"
    assert est.data_dependent_bounds_ == () and est.bounds_["feature_norm_bound"] is None
    det = est.result_.detail
    assert det["blocks"] == 5 and len(est.certificates_) >= 5 * det["phases"]
    factor = est._gradient_factor()
    assert det["moment"] == pytest.approx(factor * (3.0 + 1.0))  # Minkowski with s = 1
    assert len(accountant.ledger) == 1 and accountant.spent.epsilon == pytest.approx(2.0)
    assert np.linalg.norm(_released(est)) <= 1.0 + 1e-9  # in the public domain
    assert np.all(np.isfinite(est.predict(X)))


def test_ldop_runs_on_an_executor_shared_by_clones():
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(4)
    X = rng.standard_t(5, size=(200, 2))
    y = X @ [0.5, -0.3] + rng.standard_t(3, size=200)
    with ThreadPoolExecutor(2) as pool:
        est = PrivateQuantileRegressor(
            mechanism="ldop",
            feature_moment=3.0,
            random_state=0,
            mechanism_options={"blocks": 3, "executor": pool},
        )
        twin = clone(est)
        assert twin.mechanism_options["executor"] is pool
        serial = clone(est).set_params(mechanism_options={"blocks": 3})
        np.testing.assert_array_equal(twin.fit(X, y).coef_, serial.fit(X, y).coef_)


# ---------------------------------------------------------------- model and API details
def test_intercept_is_an_appended_constant_feature_inside_the_norm():
    X, y = _binary()
    est = PrivateLinearClassifier(
        classes=[0, 1], feature_norm_bound=2.0, intercept_scaling=3.0, random_state=0
    ).fit(X, y)
    assert est.bounds_["lipschitz"] == pytest.approx(math.hypot(2.0, 3.0))
    assert est.result_.w.size == 4
    assert est.intercept_[0] == pytest.approx(3.0 * est.result_.w[-1])
    flat = PrivateLinearClassifier(
        classes=[0, 1], feature_norm_bound=2.0, fit_intercept=False, random_state=0
    ).fit(X, y)
    assert flat.intercept_[0] == 0.0 and flat.result_.w.size == 3
    assert flat.bounds_["lipschitz"] == pytest.approx(2.0)


def test_classifier_outputs_follow_the_classes():
    X, y = _binary()
    labels = np.array(["no", "yes"])[y]
    est = PrivateLinearClassifier(
        classes=["no", "yes"], feature_norm_bound=3.0, epsilon=5.0, random_state=0
    ).fit(X, labels)
    np.testing.assert_array_equal(est.classes_, ["no", "yes"])
    scores = est.decision_function(X)
    np.testing.assert_array_equal(est.predict(X), np.where(scores > 0, "yes", "no"))
    proba = est.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_allclose(np.exp(est.predict_log_proba(X)), proba)
    assert est.coef_.shape == (1, 3) and est.intercept_.shape == (1,)
    assert not hasattr(PrivateLinearClassifier("hinge"), "predict_proba")


def test_public_classes_allow_a_sample_with_one_class():
    X, y = _binary()
    est = PrivateLinearClassifier(classes=[0, 1], feature_norm_bound=3.0, random_state=0).fit(
        X, np.ones_like(y)
    )
    np.testing.assert_array_equal(est.classes_, [0, 1])


def test_squared_loss_lipschitz_bound_uses_the_label_bound_and_the_radius():
    X, y = _binary()
    est = PrivateRidgeRegressor(
        "squared", label_bound=2.0, feature_norm_bound=3.0, domain_radius=0.5, random_state=0
    ).fit(X, y * 10.0)
    row = math.hypot(3.0, 1.0)
    assert est.bounds_["lipschitz"] == pytest.approx(2 * row * (0.5 * row + 2.0))
    assert est.bounds_["label_bound"] == 2.0
    with pytest.warns(PrivacyLeakWarning, match="`label_bound` was not given"):
        est.set_params(label_bound=None).fit(X, y * 10.0)
    assert est.bounds_["label_bound"] == 10.0


def test_explicit_regularization_and_mechanism_options_are_used():
    X, y = _binary()
    est = PrivateQuantileRegressor(
        feature_norm_bound=3.0,
        regularization=0.3,
        mechanism_options={"gaussian": "zwb"},
        delta=1e-5,
        random_state=0,
    ).fit(X, y.astype(float))
    assert est.result_.detail["regularization"] == 0.3
    assert est.certificates_[0].regularization == 0.3


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "params,match",
    [
        ({"epsilon": -1.0}, "epsilon"),
        ({"delta": 1.0}, "delta"),
        ({"mechanism": "dp-sgd"}, "mechanism"),
        ({"regularization": "large"}, "regularization"),
        ({"regularization": 0.0}, "regularization"),
        ({"feature_norm_bound": np.inf}, "feature_norm_bound"),
        ({"domain_radius": 0}, "domain_radius"),
        ({"fit_intercept": "yes"}, "fit_intercept"),
        ({"moment_order": 1.5}, "moment_order"),
        ({"feature_moment": 1.0, "feature_second_moment": 2.0}, "Lyapunov"),
        ({"feature_second_moment": 2.0}, "without `feature_moment`"),
        ({"random_state": np.random.RandomState(0)}, "random_state"),
        ({"accountant": "budget"}, "accountant"),
        ({"on_data_dependent_bounds": "ignore"}, "on_data_dependent_bounds"),
        ({"mechanism_options": {"lipschitz": 1.0}}, "cannot set 'lipschitz'"),
        ({"mechanism_options": {"blocks": 3}}, "unknown key 'blocks'"),
        ({"mechanism": "ldop", "delta": 1e-6}, "pure epsilon-DP"),
        ({"loss": "squared_hinge"}, "loss"),
        ({"classes": [0]}, "two public class"),
    ],
)
def test_bad_parameters_raise_typed_errors_before_anything_is_spent(params, match):
    X, y = _binary()
    accountant = dpcvx.Accountant(1.0)
    est = PrivateLinearClassifier(classes=[0, 1], feature_norm_bound=3.0, accountant=accountant)
    with pytest.raises(InvalidParameterError, match=match):
        est.set_params(**params).fit(X, y)
    assert len(accountant.ledger) == 0


@pytest.mark.parametrize(
    "make,params,match",
    [
        (PrivateQuantileRegressor, {"quantile": 1.0}, "quantile"),
        (PrivateRidgeRegressor, {"huber_threshold": -1.0}, "huber_threshold"),
        (PrivateRidgeRegressor, {"loss": "squared", "mechanism": "ldop"}, "loss='huber'"),
        (PrivateRidgeRegressor, {"label_bound": 0.0}, "label_bound"),
    ],
)
def test_bad_regressor_parameters(make, params, match):
    X, y = _binary()
    with pytest.raises(InvalidParameterError, match=match):
        make(feature_norm_bound=3.0, **params).fit(X, y.astype(float))


@pytest.mark.parametrize(
    "mutate,match",
    [
        (lambda X, y: (np.where(np.arange(X.size).reshape(X.shape) == 0, np.nan, X), y), "NaN"),
        (lambda X, y: (X, np.arange(len(y)) % 3), "Only binary classification"),
        (lambda X, y: (X, y + 5), "outside `classes`"),
        (lambda X, y: (X, y + 0.5), "Unknown label type"),
        (lambda X, y: (X[:0], y[:0]), "0 sample"),
    ],
)
def test_bad_data_raises_data_error_before_anything_is_spent(mutate, match):
    X, y = _binary()
    accountant = dpcvx.Accountant(1.0)
    est = PrivateLinearClassifier(classes=[0, 1], feature_norm_bound=3.0, accountant=accountant)
    X, y = mutate(X.copy(), y.copy())
    with pytest.raises(DataError, match=match):
        est.fit(X, y)
    assert len(accountant.ledger) == 0


def test_predict_checks_the_number_of_features():
    X, y = _binary()
    est = PrivateQuantileRegressor(feature_norm_bound=3.0, random_state=0).fit(X, y * 1.0)
    with pytest.raises(DataError, match="X has 2 features"):
        est.predict(X[:, :2])


# ---------------------------------------------------------------- label range and SSP
def _ssp(**params):
    return PrivateRidgeRegressor(
        "squared", mechanism="ssp", feature_norm_bound=5.0, label_range=(-2.0, 3.0), **params
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda **p: PrivateQuantileRegressor(feature_norm_bound=5.0, **p),
        lambda **p: PrivateRidgeRegressor(feature_norm_bound=5.0, **p),
        lambda **p: PrivateRidgeRegressor("squared", feature_norm_bound=5.0, **p),
        lambda **p: PrivateRidgeRegressor("squared", mechanism="ssp", feature_norm_bound=5.0, **p),
    ],
)
def test_predictions_are_clipped_to_the_public_label_range(diabetes, make):
    """At a tiny epsilon the released model is mostly noise; its predictions still lie in
    the public range (post-processing), and without a range they are not clipped."""
    Xtr, Xte, ytr, yte = diabetes
    reg = make(label_range=(-1.0, 2.0), epsilon=0.01, random_state=0).fit(Xtr, ytr)
    pred = reg.predict(Xte * 10)
    assert pred.min() >= -1.0 and pred.max() <= 2.0
    assert reg.bounds_["label_range"] == (-1.0, 2.0)
    raw = Xte * 10 @ reg.coef_ + reg.intercept_
    assert np.any((raw < -1.0) | (raw > 2.0))  # the clipping did something
    if reg.mechanism != "ssp":  # the default keeps today's behaviour: no clipping
        plain = make(epsilon=0.01, label_bound=3.0, random_state=0).fit(Xtr, ytr)
        np.testing.assert_array_equal(
            plain.predict(Xte * 10), Xte * 10 @ plain.coef_ + plain.intercept_
        )


def test_ssp_matches_ordinary_least_squares_at_large_epsilon(diabetes):
    """Independent answer: scikit-learn's OLS on the same (public-range) targets. The rows of
    this split have norms below 5 after clipping only for a few; the test compares with OLS on
    the rows as the mechanism clips them (noise at epsilon = 1e9 is ~1e-7 of the sums: a
    failure has probability below 1e-20)."""
    Xtr, Xte, ytr, yte = diabetes
    reg = _ssp(epsilon=1e9, regularization=1e-12, random_state=0).fit(Xtr, ytr)
    norms = np.linalg.norm(Xtr, axis=1)
    Xc = Xtr * np.minimum(1.0, 5.0 * (1 - 1e-10) / norms)[:, None]
    ols = LinearRegression().fit(Xc, np.clip(ytr, -2.0, 3.0))
    np.testing.assert_allclose(reg.coef_, ols.coef_, atol=1e-4)
    assert reg.intercept_ == pytest.approx(ols.intercept_, abs=1e-4)
    assert reg.result_.certificates == () and reg.data_dependent_bounds_ == ()
    assert len(reg.ledger_.events) == 4  # X^T X, X^T y and the intercept's two sums


def test_ssp_is_useful_at_small_epsilon_on_diabetes(diabetes):
    """Seeded (deterministic): rows clipped to the public sqrt(d) ~ 3 (standardized features),
    mean test R^2 over 10 noise draws at epsilon = 2 and 5 (0.19 and 0.29 here; OLS 0.36),
    where output perturbation on the squared loss is far below 0. (Epsilon 1 over 30 splits:
    benchmarks/bench_diffprivlib.py.)"""
    Xtr, Xte, ytr, yte = diabetes
    means = []
    for eps in (2.0, 5.0):
        reg = _ssp(epsilon=eps).set_params(feature_norm_bound=3.0)
        scores = [reg.set_params(random_state=k).fit(Xtr, ytr).score(Xte, yte) for k in range(10)]
        means.append(np.mean(scores))
    assert means[0] > 0.1 and means[1] > 0.2


def test_ssp_charges_the_accountant_and_clones_share_it(diabetes):
    Xtr, _, ytr, _ = diabetes
    acc = dpcvx.Accountant(3.0)
    reg = _ssp(epsilon=1.0, accountant=acc, random_state=0)
    clone(reg).fit(Xtr, ytr)
    reg.fit(Xtr, ytr)
    assert acc.spent.epsilon == pytest.approx(2.0)
    with pytest.raises(PrivacyBudgetError):
        clone(reg).set_params(epsilon=1.5).fit(Xtr, ytr)
    assert acc.spent.epsilon == pytest.approx(2.0)


@pytest.mark.parametrize(
    "params,match",
    [
        ({"loss": "huber"}, "squared loss"),
        ({"delta": 1e-6}, "pure epsilon-DP"),
        ({"mechanism_options": {"feature_norm_bound": 2.0}}, "cannot set"),
        ({"mechanism_options": {"gram_fraction": 2.0}}, "gram_fraction"),
        ({"label_range": (3.0, 1.0)}, "lo < hi"),
        ({"label_range": "wide"}, "label_range"),
    ],
)
def test_bad_ssp_parameters_raise_before_anything_is_spent(diabetes, params, match):
    Xtr, _, ytr, _ = diabetes
    acc = dpcvx.Accountant(10.0)
    with pytest.raises(InvalidParameterError, match=match):
        _ssp(accountant=acc).set_params(**params).fit(Xtr, ytr)
    assert len(acc.ledger) == 0


def test_ssp_bounds_taken_from_the_data_warn_or_raise(diabetes):
    Xtr, _, ytr, _ = diabetes
    reg = PrivateRidgeRegressor("squared", mechanism="ssp", random_state=0)
    with pytest.warns(PrivacyLeakWarning) as caught:
        reg.fit(Xtr, ytr)
    assert set(reg.data_dependent_bounds_) == {"feature_norm_bound", "label_range"}
    assert len(caught) == 2
    acc = dpcvx.Accountant(10.0)
    strict = reg.set_params(on_data_dependent_bounds="raise", accountant=acc)
    with pytest.raises(InvalidParameterError, match="label_range"):
        strict.fit(Xtr, ytr)
    assert len(acc.ledger) == 0
    # a label bound is a public label range for SSP
    bounded = _ssp(random_state=0).set_params(label_range=None, label_bound=2.5).fit(Xtr, ytr)
    assert bounded.bounds_["label_range"] == (-2.5, 2.5) and bounded.data_dependent_bounds_ == ()


def test_label_range_gives_the_squared_loss_its_label_bound(diabetes):
    Xtr, _, ytr, _ = diabetes
    reg = PrivateRidgeRegressor(
        "squared", feature_norm_bound=5.0, label_range=(-1.0, 3.0), random_state=0
    ).fit(Xtr, ytr)
    assert reg.bounds_["label_bound"] == 3.0 and reg.data_dependent_bounds_ == ()


def test_parallel_cross_validation_with_an_accountant_runs_in_threads_or_fails_spending_nothing():
    # an accountant is one live budget: process workers (joblib's default, loky) would charge
    # copies of it, so pickling it is refused with dpcvx's message and nothing is spent; joblib's
    # threads share it, and every fold is charged to it
    import joblib
    from sklearn.model_selection import cross_val_score

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = (X @ np.array([1.0, -1.0, 0.5]) > 0).astype(int)
    acct = dpcvx.Accountant(3.0)
    clf = dpcvx.PrivateLinearClassifier(
        epsilon=1.0, feature_norm_bound=4.0, classes=[0, 1], accountant=acct, random_state=0
    )
    with pytest.raises(Exception) as info:
        cross_val_score(clf, X, y, cv=3, n_jobs=2)
    chain, exc = [], info.value
    while exc is not None:
        chain.append(str(exc))
        exc = exc.__cause__
    assert any("cannot be pickled" in text for text in chain)
    assert acct.spent.epsilon == 0.0 and not acct.ledger.events
    with joblib.parallel_backend("threading", n_jobs=2):
        scores = cross_val_score(clf, X, y, cv=3, n_jobs=2)
    assert scores.shape == (3,) and len(acct.ledger.events) == 3
    assert acct.spent.epsilon == pytest.approx(3.0)


def test_regularization_selected_privately_is_one_event_and_picks_from_the_grid():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 3))
    y = (X @ np.array([1.0, -1.0, 0.5]) > 0).astype(int)
    acct = dpcvx.Accountant(2.0)
    grid = [0.05, 0.5, 5.0]
    clf = dpcvx.PrivateLinearClassifier(
        epsilon=2.0,
        feature_norm_bound=4.0,
        classes=[0, 1],
        regularization=grid,
        accountant=acct,
        random_state=3,
    ).fit(X, y)
    assert len(acct.ledger.events) == 1 and acct.spent.epsilon == pytest.approx(2.0)
    assert clf.bounds_["regularization"] in grid
    assert clf.bounds_["regularization_grid"] == tuple(grid)
    assert clf.result_.mechanism.startswith("PrivateSelection")
    lo, hi = clf.bounds_["selection_loss_bounds"]
    L = clf.bounds_["lipschitz"]
    assert lo == 0.0 and hi == pytest.approx(np.log(2.0) + L * clf.bounds_["domain_radius"])
    select = dpcvx.PrivateLinearClassifier(
        epsilon=2.0, feature_norm_bound=4.0, classes=[0, 1], regularization="select", random_state=3
    ).fit(X, y)
    assert len(select.bounds_["regularization_grid"]) == 5
    assert select.bounds_["regularization"] in select.bounds_["regularization_grid"]


@pytest.mark.parametrize(
    "params, match",
    [
        ({"regularization": []}, "empty"),
        ({"regularization": [0.1, -1.0]}, "regularization"),
        ({"regularization": "tune"}, "'select'"),
        ({"regularization": "select", "delta": 1e-6}, "delta=0 only"),
        ({"regularization": "select", "mechanism": "ldop"}, "output_perturbation"),
    ],
)
def test_bad_selection_requests_raise_and_spend_nothing(params, match):
    X = np.random.default_rng(0).normal(size=(50, 2))
    y = (X[:, 0] > 0).astype(int)
    acct = dpcvx.Accountant(1.0)
    kw = {"epsilon": 1.0, "feature_norm_bound": 3.0, "classes": [0, 1], "accountant": acct}
    kw.update(params)
    with pytest.raises(InvalidParameterError, match=match):
        dpcvx.PrivateLinearClassifier(**kw).fit(X, y)
    assert not acct.ledger.events


def test_a_regressor_selects_only_with_a_public_label_bound():
    X = np.random.default_rng(0).normal(size=(80, 2))
    y = X[:, 0]
    acct = dpcvx.Accountant(1.0)
    with pytest.raises(InvalidParameterError, match="label_bound"):
        dpcvx.PrivateRidgeRegressor(
            epsilon=1.0, feature_norm_bound=3.0, regularization="select", accountant=acct
        ).fit(X, y)
    assert not acct.ledger.events
    reg = dpcvx.PrivateRidgeRegressor(
        epsilon=1.0,
        feature_norm_bound=3.0,
        label_bound=3.0,
        regularization=[0.1, 1.0],
        random_state=0,
    ).fit(X, y)
    assert reg.bounds_["regularization"] in (0.1, 1.0)
