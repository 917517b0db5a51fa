"""Sufficient-statistics perturbation (SSP) for ridge regression: the L1 sensitivities against
brute force on tiny data, convergence to the closed-form OLS / ridge solution as epsilon grows,
typed errors that spend nothing, the worst-case pair's audit with its negative control, and
the registry entry checked against the contract test's helpers."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

import dpcvx
from dpcvx.audit import audit, negative_control
from dpcvx.errors import InvalidParameterError, PrivacyBudgetError
from dpcvx.mechanisms.registry import Registered, WorstCasePair
from dpcvx.mechanisms.sufficient_statistics import (
    SufficientStatisticsPerturbation as SSP,
)
from dpcvx.mechanisms.sufficient_statistics import (
    gram_sensitivity,
    moment_sensitivity,
    solve_normal_equations,
)


def _upper(M: np.ndarray) -> np.ndarray:
    return M[np.triu_indices(M.shape[0])]


def _gram_change(x: np.ndarray, xp: np.ndarray) -> np.ndarray:
    """L1 change of the upper triangle of x x^T, for every pair of rows of x and xp."""
    iu = np.triu_indices(x.shape[1])
    a = (x[:, :, None] * x[:, None, :])[:, iu[0], iu[1]]
    b = (xp[:, :, None] * xp[:, None, :])[:, iu[0], iu[1]]
    return np.abs(a[:, None, :] - b[None, :, :]).sum(axis=2)


# ------------------------------------------------------------------------------ sensitivities
def test_gram_sensitivity_is_exact_in_two_dimensions_by_brute_force():
    """Every pair of rows on a fine grid of the disk of radius B (the circle, its interior
    rings and 0): the largest L1 change of the upper triangle of x x^T is the sensitivity."""
    B = 1.7
    angles = np.linspace(0.0, 2 * np.pi, 721)[:-1]
    rows = [np.zeros((1, 2))]
    for r in (0.25, 0.5, 0.75, 1.0):
        rows.append(r * B * np.column_stack([np.cos(angles), np.sin(angles)]))
    x = np.vstack(rows)
    worst = float(_gram_change(x, x).max())
    bound = gram_sensitivity(2, B)
    assert worst <= bound
    assert worst == pytest.approx(bound, rel=1e-4)  # attained (sqrt(5) B^2), up to the grid
    assert bound == pytest.approx(math.sqrt(5) * B * B, rel=1e-9)
    assert gram_sensitivity(1, B) == pytest.approx(B * B, rel=1e-9)  # x^2 in [0, B^2]


@pytest.mark.parametrize("d", [3, 4, 6, 10])
def test_gram_sensitivity_bounds_every_random_pair_and_is_close_to_the_supremum(d):
    """Random pairs on the sphere (and 0) never exceed it; the best pair of a local search
    attains it for d <= 4 (exact by enumeration) and is within 10% of the closed-form bound
    above that."""
    rng = np.random.default_rng(d)
    x = rng.normal(size=(400, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    x = np.vstack([x, np.zeros((1, d))])
    bound = gram_sensitivity(d, 1.0)
    assert float(_gram_change(x, x).max()) <= bound
    assert bound <= (d + 1)  # never worse than the triangle inequality
    # alternating ascent from random starts: W = the signs of u u^T - v v^T (the best
    # pattern for the pair), then u, v = the extreme eigenvectors of W (the best pair for W)
    iu = np.triu_indices(d)
    best = 0.0
    for _ in range(30):
        u, v = x[rng.integers(400)], x[rng.integers(400)]
        for _ in range(50):
            M = np.outer(u, u) - np.outer(v, v)
            W = np.where(np.eye(d, dtype=bool), 1.0, 0.5) * np.where(M >= 0, 1.0, -1.0)
            lam, V = np.linalg.eigh(W)
            u = V[:, -1] if lam[-1] > 0 else np.zeros(d)
            v = V[:, 0] if lam[0] < 0 else np.zeros(d)
        best = max(best, float(np.abs((np.outer(u, u) - np.outer(v, v))[iu]).sum()))
    assert best <= bound
    assert best >= bound / (1.0 + 1e-9 if d <= 4 else 1.1)


@pytest.mark.parametrize("intercept", [True, False])
def test_moment_sensitivities_are_exact_by_brute_force(intercept):
    """X^T y (and the intercept's sums): the largest L1 change over a grid of rows in the disk
    and labels at the ends of the range (the changes are linear in y) is the sensitivity."""
    B, lo, hi, s = 1.3, -2.0, 5.0, 0.7
    mech = SSP(
        feature_norm_bound=B, label_range=(lo, hi), fit_intercept=intercept, intercept_scaling=s
    )
    angles = np.linspace(0.0, 2 * np.pi, 361)[:-1]
    circle = B * np.column_stack([np.cos(angles), np.sin(angles)])
    X = np.vstack([circle, 0.5 * circle, np.zeros((1, 2))])
    rows = np.vstack([np.column_stack([X, np.full(len(X), v)]) for v in (lo, hi)])
    stats = [mech.statistics(r[None, :]) for r in rows]
    b = np.array([st[1] for st in stats])
    cross = np.array([st[0][:2, 2] if intercept else np.zeros(2) for st in stats])
    plan = mech.plan(n=1, d=3, epsilon=1.0)
    moment = np.abs(b[:, None, :2] - b[None, :, :2]).sum(axis=2).max()
    assert moment <= plan.moment_sensitivity
    assert moment == pytest.approx(moment_sensitivity(2, B, (lo, hi), intercept), rel=1e-4)
    if intercept:
        assert np.abs(cross[:, None] - cross[None, :]).sum(axis=2).max() == pytest.approx(
            plan.cross_sensitivity, rel=1e-4
        )
        offset = np.abs(b[:, None, 2] - b[None, :, 2]).max()
        assert offset == pytest.approx(plan.offset_sensitivity, rel=1e-9)
        assert offset == pytest.approx(2 * s * (hi - lo) / 2)


def test_neighbours_move_the_computed_statistics_by_at_most_the_plan():
    """Any dataset (outliers included: the mechanism clips) and any replaced row."""
    rng = np.random.default_rng(1)
    n, d = 50, 3
    mech = SSP(feature_norm_bound=2.0, label_range=(0.0, 10.0))
    plan = mech.plan(n=n, d=d + 1, epsilon=1.0)
    Z = np.column_stack([5 * rng.standard_t(2, size=(n, d)), 30 * rng.standard_t(2, size=n)])
    G0, b0 = mech.statistics(Z)
    for _ in range(300):
        Z1 = Z.copy()
        Z1[rng.integers(n)] = np.append(10 * rng.normal(size=d), rng.uniform(-20, 40))
        G1, b1 = mech.statistics(Z1)
        assert np.abs(_upper(G1[:d, :d] - G0[:d, :d])).sum() <= plan.gram_sensitivity
        assert np.abs(b1[:d] - b0[:d]).sum() <= plan.moment_sensitivity
        assert np.abs(G1[:d, d] - G0[:d, d]).sum() <= plan.cross_sensitivity
        assert abs(b1[d] - b0[d]) <= plan.offset_sensitivity
        assert G1[d, d] == G0[d, d] == n  # the public entry n s^2


def test_the_budget_split_adds_up_exactly_and_the_scales_round_up():
    mech = SSP(feature_norm_bound=3.0, label_range=(0.0, 400.0), gram_fraction=0.3)
    for eps in (0.1, 1.0 / 3.0, 0.7, 1.0, 2.0, 5.0, 10.0):
        plan = mech.plan(n=354, d=11, epsilon=eps)
        events = plan.events("ssp")
        assert len(events) == 4
        assert sum(Fraction(e.epsilon) for e in events) <= Fraction(eps)
        assert sum(e.epsilon for e in events) == pytest.approx(eps, rel=1e-12)
        for key in ("gram", "moment", "cross", "offset"):
            sens = getattr(plan, f"{key}_sensitivity")
            budget = getattr(plan, f"{key}_epsilon")
            assert Fraction(getattr(plan, f"{key}_scale")) * Fraction(budget) >= Fraction(sens)
    no_intercept = SSP(feature_norm_bound=3.0, label_range=(0.0, 1.0), fit_intercept=False)
    assert len(no_intercept.plan(n=10, d=3, epsilon=1.0).events("x")) == 2


# ------------------------------------------------------------------------------ accuracy
def _data(n=400, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d)) / math.sqrt(d)
    y = 2.0 + X @ np.array([1.0, -2.0, 0.5])[:d] + 0.1 * rng.normal(size=n)
    return X, np.clip(y, 0.0, 4.0)


@pytest.mark.parametrize("lam", [0.0, 0.05])
def test_converges_to_the_closed_form_solution_as_epsilon_grows(lam):
    """Against scikit-learn's OLS / ridge (unpenalized intercept): rows within the bounds, so
    clipping does nothing. At epsilon = 1e9 the Laplace noise is ~1e-6 of the statistics; the
    tolerance 1e-4 fails with probability below 1e-20 (Laplace tails), so never in practice."""
    from sklearn.linear_model import LinearRegression, Ridge

    X, y = _data()
    n = len(y)
    ref = (LinearRegression() if lam == 0 else Ridge(alpha=n * lam)).fit(X, y)
    src = dpcvx.ArraySource(np.column_stack([X, y]))
    mech = SSP(feature_norm_bound=1.0, label_range=(0.0, 4.0), regularization=lam)
    errors = []
    for eps in (1e3, 1e5, 1e9):
        w = src.solve_private(mech, epsilon=eps, rng=7).w
        errors.append(np.linalg.norm(w - np.append(ref.coef_, ref.intercept_)))
    assert errors[-1] < 1e-4
    assert errors[0] > errors[1] > errors[2]


def test_normal_equations_post_processing_is_positive_definite_on_any_noise():
    """An indefinite noisy Gram matrix still gives a finite solve (eigenvalue floor + ridge),
    and a positive definite one with ridge 0 gives the exact solution."""
    rng = np.random.default_rng(3)
    G = rng.normal(size=(4, 4)) * 100
    G[-1, -1] = 50.0
    w = solve_normal_equations(G, rng.normal(size=4), 1.0, intercept=True)
    assert np.all(np.isfinite(w))
    A = rng.normal(size=(30, 3))
    b = rng.normal(size=30)
    w = solve_normal_equations(A.T @ A, A.T @ b, 0.0, intercept=False)
    np.testing.assert_allclose(w, np.linalg.lstsq(A, b, rcond=None)[0], rtol=1e-10)


# ------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "kwargs",
    [
        {"feature_norm_bound": -1.0, "label_range": (0, 1)},
        {"feature_norm_bound": 1.0, "label_range": (1, 0)},
        {"feature_norm_bound": 1.0, "label_range": (0, math.inf)},
        {"feature_norm_bound": 1.0, "label_range": 5.0},
        {"feature_norm_bound": 1.0, "label_range": (0, 1), "gram_fraction": 1.0},
        {"feature_norm_bound": 1.0, "label_range": (0, 1), "intercept_fraction": 0.0},
        {"feature_norm_bound": 1.0, "label_range": (0, 1), "regularization": -0.1},
        {"feature_norm_bound": 1.0, "label_range": (0, 1), "fit_intercept": "yes"},
        {"feature_norm_bound": 1.0, "label_range": (0, 1), "intercept_scaling": 0.0},
    ],
)
def test_bad_parameters_raise_invalid_parameter_error(kwargs):
    with pytest.raises(InvalidParameterError):
        SSP(**kwargs)


@pytest.mark.parametrize(
    "request_",
    [
        {"epsilon": 1.0, "delta": 1e-6},  # pure only
        {"epsilon": -1.0},
        {"epsilon": math.nan},
        {"epsilon": 1.0, "rng": "seed"},
        {"epsilon": 20.0},  # more than the accountant holds
    ],
)
def test_bad_requests_raise_a_typed_error_and_spend_nothing(request_):
    X, y = _data(n=20)
    acc = dpcvx.Accountant(10.0)
    mech = SSP(feature_norm_bound=1.0, label_range=(0.0, 4.0))
    error = PrivacyBudgetError if request_["epsilon"] == 20.0 else InvalidParameterError
    with pytest.raises(error):
        dpcvx.ArraySource(np.column_stack([X, y])).solve_private(mech, accountant=acc, **request_)
    assert len(acc.ledger) == 0


def test_a_source_without_a_label_column_raises_and_spends_nothing():
    acc = dpcvx.Accountant(10.0)
    mech = SSP(feature_norm_bound=1.0, label_range=(0.0, 4.0))
    with pytest.raises(InvalidParameterError, match="last column"):
        dpcvx.ArraySource(np.ones((5, 1))).solve_private(mech, epsilon=1.0, accountant=acc)
    assert len(acc.ledger) == 0


# ------------------------------------------------------------------------------ audit, registry
#: the registry entry (the snippet for dpcvx/mechanisms/registry.py); its pair is built here
#: until dpcvx.audit.build_pair learns the "regression" kind
ENTRY = Registered(
    name="sufficient-statistics-perturbation",
    aliases=("SufficientStatisticsPerturbation", "ssp"),
    description=(
        "SSP of ridge regression (one feature, no intercept, B = 1, labels in [-1, 1], "
        "lambda = 1), rows [x | y]: 9 rows (0, 0) and a last row (1, +1) vs (1, -1); the "
        "moments X^T y move by exactly their sensitivity 2 B m = 2 and the Gram matrix is "
        "equal, so the pair realizes the moment block's budget (4/5 of epsilon at the "
        "default gram_fraction 1/5) in full; the control's factor 4 makes that 3.2 epsilon"
    ),
    mechanism=SSP(
        feature_norm_bound=1.0, label_range=(-1.0, 1.0), fit_intercept=False, regularization=1.0
    ),
    pair=WorstCasePair(loss="regression", n=10, value=1.0, source="arrays"),  # type: ignore[arg-type]
    epsilon=1.0,
    control_factor=4.0,
    thresholds=(-0.1, 0.0, 0.1),
    runs=2000,
)


def build_regression_pair(pair: WorstCasePair):
    """The "regression" pair on an array source (the build_pair case for dpcvx.audit): rows
    ``[x | y]``, ``n - 1`` rows ``(others, others)`` and a last row ``(value, +value)`` vs
    ``(value, -value)``."""
    Z0 = np.full((pair.n, 2), float(pair.others))
    Z1 = Z0.copy()
    Z0[-1] = (pair.value, pair.value)
    Z1[-1] = (pair.value, -pair.value)
    return dpcvx.ArraySource(Z0), dpcvx.ArraySource(Z1)


@pytest.mark.statistical
def test_the_worst_case_pair_passes_its_audit_and_the_control_is_caught():
    """Sampled audit (Clopper-Pearson, alpha = 1e-3 total: the mechanism fails falsely with
    probability at most 1e-3); the control realizes 3.2 epsilon on this pair and is caught
    (its bound is 2.6 at seed 1, far above epsilon = 1; the mechanism's 0.51)."""
    pair = build_regression_pair(ENTRY.pair)
    kwargs = dict(epsilon=ENTRY.epsilon, thresholds=ENTRY.thresholds, progress=False)
    runs = 1500
    report = audit(ENTRY.mechanism, pair, runs=runs, seed=0, **kwargs)
    assert report.passed, report
    control = audit(
        negative_control(ENTRY.mechanism, ENTRY.control_factor), pair, runs=runs, seed=1, **kwargs
    )
    assert not control.passed, control


@pytest.fixture
def contract(monkeypatch):
    """tests/test_contract.py's helpers with this entry registered."""
    import tests.test_contract as module

    original = module.build_pair

    def build(pair):
        return build_regression_pair(pair) if pair.loss == "regression" else original(pair)

    monkeypatch.setitem(module.ENTRIES, ENTRY.name, ENTRY)
    monkeypatch.setattr(module, "build_pair", build)
    return module


def test_the_registry_entry_satisfies_the_contract(contract):
    name = ENTRY.name
    contract.test_the_mechanism_and_its_plan_satisfy_the_protocol(name)
    pairs: dict = {}
    contract.test_the_budget_is_reserved_before_the_data_is_read(name, pairs)
    for bad in (
        {"epsilon": -1.0},
        {"epsilon": math.nan},
        {"epsilon": math.inf},
        {"delta": 1.5},
        {"delta": -0.1},
        {"rng": "seed"},
        {"accountant": "budget"},
    ):
        contract.test_bad_input_raises_a_typed_error_and_spends_nothing(name, bad, pairs)
    contract.test_an_unaffordable_release_records_nothing_and_reads_nothing(name, pairs)
    contract.test_the_events_add_up_to_the_claimed_guarantee(name, pairs)
    contract.test_an_abort_keeps_the_budget_spent_and_the_audit_counts_it(name, pairs)
    contract.test_the_negative_control_is_louder_than_it_is_charged(name)


def test_the_exact_sign_pattern_enumeration_matches_a_direct_search():
    """d = 2: the spread of the best sign pattern equals the brute-force maximum over sign
    patterns of the ball's quadratic forms (an independent enumeration)."""
    best = 0.0
    for signs in itertools.product((1.0, -1.0), repeat=3):
        W = np.array([[signs[0], signs[1] / 2], [signs[1] / 2, signs[2]]])
        lam = np.linalg.eigvalsh(W)
        best = max(best, max(lam[-1], 0) - min(lam[0], 0))
    assert best == pytest.approx(math.sqrt(5))
    assert gram_sensitivity(2, 1.0) == pytest.approx(best, rel=1e-9)
