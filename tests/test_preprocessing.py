"""Private preprocessing (dpcvx.preprocessing): the sensitivities and noise scales against their
formulas, one ledger event per fit, nothing spent on bad input, the Laplace scale of the
released mean (seeded, statistical), a private Pipeline on breast cancer sharing one accountant,
scikit-learn plumbing (clone, get_params, pickling, estimator checks), and the zero-cost
PublicBoundsScaler."""

from __future__ import annotations

import math
import pickle
import re
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import dpcvx
from dpcvx.errors import DataError, InvalidParameterError, PrivacyBudgetError
from dpcvx.neighbors import REPLACE_ONE
from dpcvx.preprocessing import (
    VARIANCE_FLOOR,
    PrivateStandardScaler,
    PublicBoundsScaler,
    noise_scale,
    split_epsilon,
    sum_sensitivity,
)


def _up(exact: Fraction) -> float:
    out = float(exact)
    if Fraction(out) < exact:
        out = math.nextafter(out, math.inf)
    return out


def _data(n: int = 200, d: int = 3, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 3.0, size=(n, d))


# ---------------------------------------------------------------- scikit-learn's checks
@parametrize_with_checks(
    [
        PrivateStandardScaler(epsilon=1.0, bounds=(-5.0, 5.0), random_state=0),
        PublicBoundsScaler(bounds=(-5.0, 5.0)),
    ]
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


# ---------------------------------------------------------------- the formulas
@pytest.mark.parametrize("epsilon", [1.0, 0.1, 3.0, 1e-300, 5e-324, 1.7976931348623157e308])
def test_epsilon_split_is_exact(epsilon):
    first, second = split_epsilon(epsilon)
    assert first > 0.0 or epsilon == 5e-324
    assert Fraction(first) + Fraction(second) <= Fraction(epsilon)
    if epsilon >= 1e-300:  # normal floats: exactly half each
        assert first == second == epsilon / 2


def test_sensitivities_and_scales_match_the_formula():
    n, d, epsilon = 200, 3, 2.0
    lo, hi = -1.0, 3.0
    scaler = PrivateStandardScaler(epsilon, (lo, hi), random_state=0).fit(_data(n, d))
    facts = scaler.privacy_
    # l1 sensitivity of the d column sums of u in [0, 1] and q in [0, 1/4], with the rounding
    # factor (1 + n 2^-52) of correctly rounded sums
    slack = 1 + Fraction(n, 2**52)
    assert facts["mean_sum_sensitivity"] == _up(Fraction(d) * slack)
    assert facts["second_moment_sum_sensitivity"] == _up(Fraction(d, 4) * slack)
    assert facts["epsilon_mean"] == facts["epsilon_second_moment"] == 1.0
    # every scale is the exact ratio rounded up
    assert facts["mean_sum_noise_scale"] == _up(Fraction(facts["mean_sum_sensitivity"]) / 1)
    assert facts["second_moment_sum_noise_scale"] == _up(
        Fraction(facts["second_moment_sum_sensitivity"]) / 1
    )
    # in the units of the data: the textbook sum_j (hi_j - lo_j) / (n epsilon_mean) per feature
    textbook = d * (hi - lo) / (n * facts["epsilon_mean"])
    per_feature = facts["mean_noise_scale"]
    assert per_feature.shape == (d,)
    assert np.all(per_feature >= textbook)
    np.testing.assert_allclose(per_feature, textbook, rtol=1e-12)


def test_per_feature_bounds_spread_the_noise_by_width():
    n, d = 100, 2
    scaler = PrivateStandardScaler(
        4.0, ([0.0, -10.0], [1.0, 10.0]), with_std=False, random_state=0
    ).fit(np.zeros((n, d)))
    facts = scaler.privacy_
    assert facts["epsilon_mean"] == 4.0 and facts["second_moment_sum_sensitivity"] is None
    # privacy loss: sum_j (w_j / n) / b_j = sum_j 1 / b_sum = d / b_sum <= epsilon
    b = facts["mean_sum_noise_scale"]
    assert Fraction(d) * (1 + Fraction(n, 2**52)) / Fraction(b) <= Fraction(4)
    np.testing.assert_allclose(facts["mean_noise_scale"], [1.0 * b / n, 20.0 * b / n])


def test_helpers_round_up():
    assert Fraction(noise_scale(1.0, 3.0)) >= Fraction(1, 3)
    assert noise_scale(1.0, 3.0) > 1.0 / 3.0  # 1/3 is not a float: strictly above
    assert noise_scale(1.0, 2.0) == 0.5  # exact ratios stay exact
    assert Fraction(sum_sensitivity(10**6, 7, 0.25)) >= Fraction(7, 4) * (
        1 + Fraction(10**6, 2**52)
    )


def test_computed_sums_of_neighbors_move_by_at_most_the_sensitivity():
    """Adversarial neighbors for rounding: many terms near 1 with the replaced one at 0 or 1."""
    rng = np.random.default_rng(3)
    n = 5000
    for _ in range(20):
        col = 1.0 - rng.uniform(0.0, 1e-3, size=n)
        other = col.copy()
        col[0], other[0] = 0.0, 1.0
        diff = abs(math.fsum(col.tolist()) - math.fsum(other.tolist()))
        assert diff <= sum_sensitivity(n, 1, 1.0)


# ---------------------------------------------------------------- accounting
def test_one_event_on_a_fresh_accountant():
    scaler = PrivateStandardScaler(0.7, (-1.0, 3.0), random_state=1).fit(_data())
    (event,) = scaler.ledger_.events
    assert event.epsilon == 0.7 and event.delta == 0.0 and event.kind == "pure"
    assert event.neighbors == REPLACE_ONE
    assert scaler.ledger_.total().epsilon == 0.7


def test_one_event_per_fit_on_a_given_accountant():
    accountant = dpcvx.Accountant(1.0)
    scaler = PrivateStandardScaler(0.5, (-1.0, 3.0), accountant=accountant, random_state=0)
    scaler.fit(_data())
    assert len(accountant.ledger.events) == 1 and accountant.spent.epsilon == 0.5
    scaler.fit(_data(seed=1))
    assert len(accountant.ledger.events) == 2 and accountant.spent.epsilon == 1.0
    with pytest.raises(PrivacyBudgetError):
        scaler.fit(_data())
    assert len(accountant.ledger.events) == 2


_BAD = {
    "nan in X": ({}, np.array([[0.0, np.nan], [1.0, 2.0]]), DataError),
    "inf in X": ({}, np.array([[0.0, np.inf], [1.0, 2.0]]), DataError),
    "1-D X": ({}, np.zeros(4), DataError),
    "empty X": ({}, np.zeros((0, 2)), DataError),
    "lo == hi": ({"bounds": (1.0, 1.0)}, None, InvalidParameterError),
    "lo > hi per feature": ({"bounds": ([0.0, 2.0], [1.0, 1.0])}, None, InvalidParameterError),
    "infinite bound": ({"bounds": (-np.inf, 1.0)}, None, InvalidParameterError),
    "nan bound": ({"bounds": (np.nan, 1.0)}, None, InvalidParameterError),
    "width overflows": ({"bounds": (-1e308, 1e308)}, None, InvalidParameterError),
    "no bounds": ({"bounds": None}, None, InvalidParameterError),
    "not a pair": ({"bounds": (0.0, 1.0, 2.0)}, None, InvalidParameterError),
    "bounds length != d": ({"bounds": ([0.0] * 3, [1.0] * 3)}, None, DataError),
    "2-D bounds": ({"bounds": (np.zeros((2, 1)), np.ones((2, 1)))}, None, InvalidParameterError),
    "epsilon 0": ({"epsilon": 0.0}, None, InvalidParameterError),
    "epsilon < 0": ({"epsilon": -1.0}, None, InvalidParameterError),
    "epsilon nan": ({"epsilon": float("nan")}, None, InvalidParameterError),
    "epsilon inf": ({"epsilon": float("inf")}, None, InvalidParameterError),
    "epsilon bool": ({"epsilon": True}, None, InvalidParameterError),
    "random_state < 0": ({"random_state": -1}, None, InvalidParameterError),
    "random_state str": ({"random_state": "0"}, None, InvalidParameterError),
    "legacy RandomState": (
        {"random_state": np.random.RandomState(0)},
        None,
        InvalidParameterError,
    ),
    "with_mean not bool": ({"with_mean": "yes"}, None, InvalidParameterError),
    "nothing to estimate": ({"with_mean": False, "with_std": False}, None, InvalidParameterError),
    "too expensive": ({"epsilon": 2.0}, None, PrivacyBudgetError),
}


@pytest.mark.parametrize("case", sorted(_BAD))
def test_nothing_is_spent_on_bad_input(case):
    params, X, error = _BAD[case]
    accountant = dpcvx.Accountant(1.0)
    kwargs = {"epsilon": 0.5, "bounds": (-1.0, 3.0), "random_state": 0, **params}
    scaler = PrivateStandardScaler(accountant=accountant, **kwargs)
    with pytest.raises(error):
        scaler.fit(_data(20, 2) if X is None else X)
    assert accountant.ledger.events == () and accountant.spent.epsilon == 0.0
    assert not hasattr(scaler, "mean_")


def test_wrong_accountant_type_and_relation_spend_nothing():
    with pytest.raises(InvalidParameterError, match="dpcvx.Accountant"):
        PrivateStandardScaler(1.0, (0.0, 1.0), accountant=object()).fit(_data())
    add_remove = dpcvx.Accountant(5.0, neighbors="add-remove-one")
    with pytest.raises(InvalidParameterError):
        PrivateStandardScaler(1.0, (0.0, 1.0), accountant=add_remove).fit(_data())
    assert add_remove.ledger.events == ()


def test_budget_is_reserved_before_the_values_are_read(monkeypatch):
    """The rows' values are first read (clipped) after the reservation: a failure there keeps
    the budget spent, as the ledger's rule says."""
    import dpcvx.preprocessing as module

    accountant = dpcvx.Accountant(1.0)

    def boom(*args, **kwargs):
        assert len(accountant.ledger.events) == 1  # reserved already
        raise RuntimeError("read")

    monkeypatch.setattr(module.np, "clip", boom)
    with pytest.raises(RuntimeError, match="read"):
        PrivateStandardScaler(0.5, (-1.0, 3.0), accountant=accountant).fit(_data())
    assert accountant.spent.epsilon == 0.5


# ---------------------------------------------------------------- the release
@pytest.mark.statistical
@pytest.mark.parametrize("with_std", [True, False])
def test_mean_error_has_the_stated_laplace_scale(with_std):
    """Seeded. The error of ``mean_`` (units of the data) divided by the stated per-feature
    scale is Laplace(0, 1) (KS test); clamping into [lo, hi] is negligible here (the means are
    more than 100 scales from the bounds). False-failure rate of an unseeded run: 1e-3 per
    parameter (KS p-value threshold)."""
    n, d = 1000, 1500
    X = np.random.default_rng(7).uniform(2.0, 8.0, size=(n, d))
    epsilon = 800.0
    scaler = PrivateStandardScaler(epsilon, (0.0, 10.0), with_std=with_std, random_state=11)
    scaler.fit(X)
    scale = scaler.privacy_["mean_noise_scale"]
    means = X.mean(axis=0)
    assert np.all(np.minimum(means, 10.0 - means) > 100 * scale)
    standardized = (scaler.mean_ - X.mean(axis=0)) / scale
    assert stats.kstest(standardized, stats.laplace.cdf).pvalue > 1e-3
    # the split: with_std=True spends half of epsilon on the means (twice the scale)
    expected = (2.0 if with_std else 1.0) * d * 10.0 / (n * epsilon)
    np.testing.assert_allclose(scale, expected, rtol=1e-12)


def test_variance_floor_is_the_public_noise_level():
    """A constant feature's variance is released as the floor ``b_Q / n`` (normalized), in
    the units of the data ``(hi - lo)^2 b_Q / n``: public, whatever the data."""
    n = 400
    s = PrivateStandardScaler(2.0, (0.0, 4.0), random_state=0).fit(np.full((n, 3), 2.0))
    facts = s.privacy_
    floor = 16.0 * facts["second_moment_sum_noise_scale"] / n
    np.testing.assert_allclose(facts["variance_floor"], floor, rtol=1e-15)
    assert np.all(s.var_ >= facts["variance_floor"])


def test_post_processing_clamps():
    X = _data(5, 4)
    for seed in range(10):
        s = PrivateStandardScaler(1e-3, (-1.0, 3.0), random_state=seed).fit(X)
        assert np.all((s.mean_ >= -1.0) & (s.mean_ <= 3.0))
        assert np.all(s.var_ >= VARIANCE_FLOOR * 4.0) and np.all(s.var_ <= 4.0)
        np.testing.assert_allclose(s.scale_, np.sqrt(s.var_))
        assert np.all(np.isfinite(s.transform(X * 1e6)))


def test_accuracy_at_large_epsilon_and_transform():
    X = np.random.default_rng(0).normal([1.0, -2.0], [0.5, 2.0], size=(20000, 2))
    s = PrivateStandardScaler(50.0, ([-2.0, -12.0], [4.0, 8.0]), random_state=0).fit(X)
    np.testing.assert_allclose(s.mean_, [1.0, -2.0], atol=0.05)
    np.testing.assert_allclose(s.scale_, [0.5, 2.0], rtol=0.05)
    Z = s.transform(X)
    expected = (np.clip(X, s.lower_, s.upper_) - s.mean_) / s.scale_
    np.testing.assert_array_equal(Z, expected)
    np.testing.assert_allclose(s.inverse_transform(Z), np.clip(X, s.lower_, s.upper_))
    no_mean = clone(s).set_params(with_mean=False).fit(X)
    np.testing.assert_array_equal(
        no_mean.transform(X), np.clip(X, no_mean.lower_, no_mean.upper_) / no_mean.scale_
    )
    no_std = clone(s).set_params(with_std=False).fit(X)
    assert no_std.scale_ is None and no_std.var_ is None
    np.testing.assert_array_equal(
        no_std.transform(X), np.clip(X, no_std.lower_, no_std.upper_) - no_std.mean_
    )
    with pytest.raises(DataError):
        s.transform(np.zeros((3, 5)))


def test_random_state():
    X = _data()
    a = PrivateStandardScaler(1.0, (-1.0, 3.0), random_state=5).fit(X)
    b = PrivateStandardScaler(1.0, (-1.0, 3.0), random_state=5).fit(X)
    np.testing.assert_array_equal(a.mean_, b.mean_)
    np.testing.assert_array_equal(a.var_, b.var_)
    assert a.seeded_
    c = PrivateStandardScaler(1.0, (-1.0, 3.0)).fit(X)
    d = PrivateStandardScaler(1.0, (-1.0, 3.0)).fit(X)
    assert not c.seeded_ and not np.array_equal(c.mean_, d.mean_)
    e = PrivateStandardScaler(1.0, (-1.0, 3.0), random_state=np.random.default_rng(5)).fit(X)
    assert e.seeded_


# ---------------------------------------------------------------- a private Pipeline
def _published_bounds() -> tuple[np.ndarray, np.ndarray]:
    """The per-feature (min, max) table published in the dataset's description (public
    knowledge, not computed from the rows at fit time)."""
    descr = load_breast_cancer().DESCR
    table = descr[descr.index(":Summary Statistics:") : descr.index(":Missing Attribute")]
    rows = re.findall(r"^[a-z ()]+:\s+([-0-9.]+)\s+([-0-9.]+)\s*$", table, flags=re.M)
    assert len(rows) == 30
    lo, hi = np.array(rows, dtype=float).T
    return lo, hi


def test_private_pipeline_on_breast_cancer_shares_one_accountant():
    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.3, stratify=y, random_state=0
    )
    accountant = dpcvx.Accountant(20.0)
    d = X.shape[1]
    pipe = Pipeline(
        [
            (
                "scale",
                PrivateStandardScaler(
                    10.0, _published_bounds(), accountant=accountant, random_state=0
                ),
            ),
            (
                "clf",
                dpcvx.PrivateLinearClassifier(
                    epsilon=10.0,
                    classes=[0, 1],
                    feature_norm_bound=math.sqrt(d),
                    accountant=accountant,
                    random_state=0,
                ),
            ),
        ]
    ).fit(X_train, y_train)
    events = accountant.ledger.events
    assert len(events) == 2
    assert [e.epsilon for e in events] == [10.0, 10.0]
    assert accountant.spent.epsilon == 20.0 == accountant.budget.epsilon
    accuracy = pipe.score(X_test, y_test)
    # measured 0.912 (seeds 0-7: 0.906 to 0.924); a non-private StandardScaler fitted on the
    # clipped rows in front of the same private classifier gives 0.912, and the fully
    # non-private StandardScaler + LogisticRegression 0.959
    assert accuracy >= 0.88, accuracy


# ---------------------------------------------------------------- scikit-learn plumbing
def test_get_params_and_clone_keep_the_accountant():
    accountant = dpcvx.Accountant(3.0)
    s = PrivateStandardScaler(0.5, (-1.0, 3.0), accountant=accountant, random_state=2)
    assert s.get_params() == {
        "epsilon": 0.5,
        "bounds": (-1.0, 3.0),
        "accountant": accountant,
        "random_state": 2,
        "with_mean": True,
        "with_std": True,
    }
    s.fit(_data())
    c = clone(s)
    assert c.accountant is accountant and not hasattr(c, "mean_")
    c.fit(_data())
    assert len(accountant.ledger.events) == 2
    assert clone(PublicBoundsScaler((0.0, 1.0))).get_params() == {"bounds": (0.0, 1.0)}


def test_pickling_rules():
    accountant = dpcvx.Accountant(1.0)
    s = PrivateStandardScaler(0.5, (-1.0, 3.0), accountant=accountant, random_state=0)
    s.fit(_data())
    with pytest.raises(InvalidParameterError, match="set_params\\(accountant=None\\)"):
        pickle.dumps(s)
    s.set_params(accountant=None)
    loaded = pickle.loads(pickle.dumps(s))
    np.testing.assert_array_equal(loaded.transform(_data()), s.transform(_data()))
    assert loaded.ledger_.total().epsilon == 0.5


# ---------------------------------------------------------------- the zero-cost scaler
def test_public_bounds_scaler():
    X = np.array([[-2.0, 0.0], [0.0, 5.0], [4.0, 10.0], [9.0, 20.0]])
    p = PublicBoundsScaler(([-2.0, 0.0], [2.0, 10.0])).fit(X)
    np.testing.assert_array_equal(
        p.transform(X), [[-1.0, -1.0], [0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]
    )
    np.testing.assert_array_equal(
        p.inverse_transform(p.transform(X)), np.clip(X, p.lower_, p.upper_)
    )
    assert list(p.get_feature_names_out()) == ["x0", "x1"]
    assert not hasattr(p, "ledger_")  # no privacy cost: nothing released from the data
    with pytest.raises(InvalidParameterError):
        PublicBoundsScaler((1.0, 0.0)).fit(X)
    with pytest.raises(InvalidParameterError):
        PublicBoundsScaler().fit(X)
    with pytest.raises(DataError):
        PublicBoundsScaler(([0.0] * 3, [1.0] * 3)).fit(X)


def test_public_bounds_scaler_output_ignores_the_other_rows():
    """Each output row is a function of its own input row only (so neighbors stay neighbors)."""
    X = _data(50, 3)
    Y = X.copy()
    Y[0] = [1e6, -1e6, 0.0]
    a = PublicBoundsScaler((-1.0, 3.0)).fit(X).transform(X)
    b = PublicBoundsScaler((-1.0, 3.0)).fit(Y).transform(Y)
    np.testing.assert_array_equal(a[1:], b[1:])


# ---------------------------------------------------------------- the documented warning
def test_the_documented_neighboring_pair_for_a_non_private_scaler():
    """docs/preprocessing.md: one replaced row flips the standardized value of all 99 others
    under a non-private StandardScaler, and its `mean_` reveals the replaced row exactly."""
    D = np.ones((100, 1))
    D[99] = 0.0
    D_prime = D.copy()
    D_prime[99] = 1000.0
    a, b = StandardScaler().fit(D), StandardScaler().fit(D_prime)
    assert a.mean_[0] == pytest.approx(0.99) and b.mean_[0] == pytest.approx(10.99)
    za, zb = a.transform(D)[:99, 0], b.transform(D_prime)[:99, 0]
    assert np.all(za == pytest.approx(0.1005, abs=1e-4))
    assert np.all(zb == pytest.approx(-0.1005, abs=1e-4))
    # the private scaler: the other rows' outputs move only by the noise's post-processing
    pa = PrivateStandardScaler(1.0, (0.0, 1.0), random_state=0).fit(D)
    pb = PrivateStandardScaler(1.0, (0.0, 1.0), random_state=0).fit(D_prime)
    # with the same noise (same seed), one replaced row moves the mean by at most (hi - lo) / n
    assert abs(pa.mean_[0] - pb.mean_[0]) <= 1.0 / 100 + 1e-15
