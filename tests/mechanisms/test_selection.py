"""PrivateSelection: public planning, bad input, accounting, selection quality, noise scales,
the exact stopping coin and the fixed abort text."""

from __future__ import annotations

import math
from fractions import Fraction
from types import SimpleNamespace

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.mechanisms.output_perturbation import default_accuracy
from dpcvx.mechanisms.selection import (
    _FAILURE,
    MIN_STOP_PROBABILITY,
    PrivateSelection,
    SelectionPlan,
    score_sensitivity,
    stop_coin,
)

GRID = ((0.1, 1.0), (1.0, 2.0))


def _absolute_problem(n: int = 200, target: float = 0.8, spread: float = 0.01, seed: int = 0):
    """``|w - x|`` on ``[-1, 1]`` with every ``x`` near ``target``: a small regularization fits
    ``w ~ target`` (validation loss ~ 0), a huge one stays at ``w0 = 0`` (loss ~ target)."""
    rng = np.random.default_rng(seed)
    X = (target + spread * rng.uniform(-1.0, 1.0, size=n))[:, None]
    w = cp.Variable(1)
    x = cp.Parameter(1)
    dom = dpcvx.domains.box(w, -1.0, 1.0)
    return dpcvx.Problem(cp.abs(w - x), w, data={x: X}, domain=dom)


def _hinge_problem(n: int = 60, d: int = 2, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    Y = np.sign(X @ rng.normal(size=d) + 0.1)
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    return dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, data={x: X, y: Y}, domain=[cp.norm(w, 2) <= 1])


# ----------------------------------------------------------------------------- planning
def test_plan_reads_no_data_and_matches_the_stated_constants():
    mech = PrivateSelection(grid=GRID, loss_bounds=(0.0, 2.0), validation_fraction=0.25)
    kw = dict(n=100, d=3, center=np.zeros(3), diameter=2.0, epsilon=1.5, delta=0.0)
    plan = mech.plan(**kw)  # no data anywhere: n, d, the public domain and the budget
    assert isinstance(plan, SelectionPlan)
    assert plan == plan  # noqa: PLR0124 - dataclass equality does not touch any data
    assert plan.validation_rows == 25 and plan.training_rows == 75
    eps0 = plan.candidate_epsilon
    assert Fraction(eps0) * 3 <= Fraction(1.5) and eps0 == pytest.approx(0.5, rel=1e-15)
    assert plan.stop_probability == 0.5  # default 1 / len(grid)
    for cand, (lam, C) in zip(plan.candidates, GRID, strict=True):
        alpha = max(default_accuracy(C, lam, 75, 1.0 + 2.0 * C), 1e-8 * (1.0 + 2.0 * C))
        assert cand.accuracy == alpha
        base = 2.0 * C / (lam * 75)
        exact = base + 2.0 * math.sqrt(2.0 * alpha / lam)
        assert cand.base_sensitivity == pytest.approx(base, rel=1e-15)
        assert exact <= cand.sensitivity.value <= exact * (1 + 1e-12)
        assert cand.noise.kind == "l2_laplace"
        assert cand.noise.scale >= cand.sensitivity.value / eps0
    # score sensitivity: (hi - lo) / n_val plus the float margin, exactly rounded up
    delta_s = plan.score_sensitivity.value
    assert Fraction(delta_s) >= Fraction(2, 25) + Fraction(2.0**-50) * 2
    assert delta_s == pytest.approx(2.0 / 25, rel=1e-12)
    assert plan.score_noise.scale >= delta_s / eps0
    # the plan is the same for any dataset with the same public shape
    assert mech.plan(**kw).facts() == plan.facts()
    (event,) = plan.events("sel")
    assert event.epsilon == 1.5 and event.delta == 0.0 and event.kind == "pure"


def test_score_sensitivity_is_rounded_up_exactly():
    for bounds, rows in [((0.0, 1.0), 3), ((-1e-20, 1.0), 7), ((-3.0, 5.0), 1), ((0.1, 0.3), 11)]:
        lo, hi = bounds
        exact = (Fraction(hi) - Fraction(lo)) / rows + Fraction(2.0**-50) * max(
            abs(Fraction(lo)), abs(Fraction(hi))
        )
        assert Fraction(score_sensitivity(bounds, rows)) > exact


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"grid": []}, "grid"),
        ({"grid": 3.0}, "grid"),
        ({"grid": [(0.1,)]}, "grid"),
        ({"grid": [(0.0, 1.0)]}, "grid regularization"),
        ({"grid": [(float("nan"), 1.0)]}, "grid regularization"),
        ({"grid": [(0.1, float("inf"))]}, "grid C"),
        ({"grid": [(0.1, -1.0)]}, "grid C"),
        ({"loss_bounds": (1.0, 0.0)}, "loss_bounds"),
        ({"loss_bounds": (0.0, float("inf"))}, "loss_bounds"),
        ({"loss_bounds": (float("nan"), 1.0)}, "loss_bounds"),
        ({"loss_bounds": 1.0}, "loss_bounds"),
        ({"stop_probability": 0.0}, "stop_probability"),
        ({"stop_probability": -0.5}, "stop_probability"),
        ({"stop_probability": 1.5}, "stop_probability"),
        ({"stop_probability": float("nan")}, "stop_probability"),
        ({"stop_probability": MIN_STOP_PROBABILITY / 2}, "stop_probability"),
        ({"validation_fraction": 0.0}, "validation_fraction"),
        ({"validation_fraction": 1.0}, "validation_fraction"),
        ({"validation_fraction": float("nan")}, "validation_fraction"),
        ({"shuffle": 1}, "shuffle"),
        ({"accuracy": 0.0}, "accuracy"),
        ({"center": [float("nan")]}, "center"),
    ],
)
def test_bad_mechanism_parameters_raise_typed_errors(kwargs, name):
    args = {"grid": GRID, "loss_bounds": (0.0, 1.0), **kwargs}
    with pytest.raises(dpcvx.InvalidParameterError, match=name) as info:
        PrivateSelection(**args)
    assert isinstance(info.value, ValueError)


def test_stop_probability_one_is_accepted():
    assert PrivateSelection(grid=GRID, loss_bounds=(0, 1), stop_probability=1).stop_probability == 1


@pytest.mark.parametrize(
    "n, mech_kwargs, call_kwargs, match",
    [
        (60, {}, {"epsilon": 1.0, "delta": 1e-6}, "delta"),
        (60, {}, {"epsilon": 0.0}, "epsilon"),
        (60, {}, {"epsilon": float("inf")}, "epsilon"),
        (60, {}, {"epsilon": float("nan")}, "epsilon"),
        (60, {"validation_fraction": 0.01}, {"epsilon": 1.0}, "validation row"),  # n_val = 0
        (4, {}, {"epsilon": 1.0}, "validation row"),  # floor(0.2 * 4) = 0
        (60, {"center": np.zeros(3)}, {"epsilon": 1.0}, "shape"),
        (60, {}, {"epsilon": 1.0, "rng": "seed"}, "rng"),
    ],
)
def test_bad_release_input_spends_nothing(n, mech_kwargs, call_kwargs, match):
    problem = _hinge_problem(n=n)
    acct = dpcvx.Accountant(epsilon=5.0, delta=1e-3)
    mech = PrivateSelection(grid=GRID, loss_bounds=(0.0, 2.0), **mech_kwargs)
    kwargs = {"rng": 0, **call_kwargs}
    with pytest.raises(dpcvx.InvalidParameterError, match=match):
        problem.solve_private(mech, accountant=acct, **kwargs)
    assert len(acct.ledger) == 0 and acct.spent.epsilon == 0.0


def test_an_unaffordable_release_spends_nothing():
    problem = _hinge_problem()
    acct = dpcvx.Accountant(epsilon=0.5)
    with pytest.raises(dpcvx.PrivacyBudgetError):
        problem.solve_private(
            PrivateSelection(grid=GRID, loss_bounds=(0, 2)), epsilon=1.0, accountant=acct
        )
    assert len(acct.ledger) == 0


# ----------------------------------------------------------------------------- release
def test_release_records_one_event_at_the_true_cost_and_hides_the_trial_count():
    problem = _hinge_problem()
    acct = dpcvx.Accountant(epsilon=2.0)
    mech = PrivateSelection(grid=GRID, loss_bounds=(0.0, 2.0), stop_probability=0.2)
    res = problem.solve_private(mech, epsilon=1.2, rng=4, accountant=acct)
    (event,) = tuple(res.ledger)
    assert event.epsilon == 1.2 and event.delta == 0.0 and event.kind == "pure"
    assert acct.spent.epsilon == 1.2
    assert res.seeded and np.linalg.norm(res.w) <= 1.0 + 1e-12
    assert len(res.certificates) == 1
    j = res.detail["selected_index"]
    assert (res.detail["selected_regularization"], res.detail["selected_C"]) == GRID[j]
    assert res.certificates[0].regularization == GRID[j][0]
    assert math.isfinite(res.detail["selected_score"])  # noisy minus clipped mean loss
    assert not any("trial" in key and key != "expected_trials" for key in res.detail)
    again = problem.solve_private(mech, epsilon=1.2, rng=4)
    np.testing.assert_array_equal(res.w, again.w)
    assert again.detail["selected_score"] == res.detail["selected_score"]


def test_a_failed_candidate_solve_is_one_fixed_text_and_keeps_the_budget_spent():
    problem = _hinge_problem()
    acct = dpcvx.Accountant(epsilon=3.0)
    mech = PrivateSelection(grid=GRID, loss_bounds=(0.0, 2.0), accuracy=1e-300)
    with pytest.raises(dpcvx.CertificationError) as info:
        problem.solve_private(mech, epsilon=1.0, rng=0, accountant=acct)
    assert str(info.value) == _FAILURE
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert acct.spent.epsilon == 1.0
    with pytest.raises(dpcvx.CertificationError) as other:
        _hinge_problem(seed=5).solve_private(mech, epsilon=1.0, rng=1)
    assert str(other.value) == str(info.value)


@pytest.mark.statistical
def test_the_best_grid_entry_is_selected_when_the_score_gaps_are_large():
    """Grid: lam = 1e-3 (fits w ~ 0.8, validation loss ~ 0.05) and two huge regularizations
    (w stays near 0: validation loss ~ 0.8). At epsilon = 30 (epsilon_0 = 10) the good
    candidate's noise has scale ~ 0.026 and the score noise ~ 0.001, so a trial of the good
    entry loses to a bad one only if its noise exceeds ~ 0.7 (probability < e^-25). The
    selection fails essentially only when the good entry is never drawn: with 3 entries and
    gamma = 0.02 that has probability 2 gamma / (1 + 2 gamma) = 0.0385 per release. Requiring
    at least 15 of 20 seeded releases to pick it, the false-failure rate is
    P(Binomial(20, 0.0385) >= 6) < 1e-4 (the seeds are fixed, so the test is deterministic)."""
    problem = _absolute_problem(n=400)
    grid = ((1e-3, 1.0), (1e3, 1.0), (1e4, 1.0))
    mech = PrivateSelection(grid=grid, loss_bounds=(0.0, 2.0), stop_probability=0.02)
    picks = []
    for seed in range(20):
        res = problem.solve_private(mech, epsilon=30.0, rng=seed)
        picks.append(res.detail["selected_index"])
        if res.detail["selected_index"] == 0:
            assert abs(res.w[0] - 0.8) < 0.3
    assert sum(p == 0 for p in picks) >= 15, picks


# ----------------------------------------------------------------------------- noise scales
def _fixed_context(w_hat: np.ndarray, loss_value: float, n: int):
    """A release context whose certified solve returns ``w_hat`` and whose every validation
    loss is ``loss_value`` (so the clipped score is exactly ``-loss_value``)."""
    cert = SimpleNamespace(w=np.asarray(w_hat, float), gap=0.0)
    return SimpleNamespace(
        n=n,
        d=w_hat.size,
        domain=SimpleNamespace(kind="box"),
        solver=lambda indices=None, C=None: lambda lam, w0, alpha: cert,
        project=lambda p: p,
        loss_values=lambda points, indices=None: np.full(
            (np.atleast_2d(points).shape[0], len(indices)), loss_value
        ),
    )


@pytest.mark.statistical
def test_candidate_and_score_noise_scales_equal_sensitivity_over_epsilon_0():
    """One grid entry and gamma = 1: exactly one trial, so the released point is
    ``w_hat + b`` with ``|b| ~ Exponential(Delta / epsilon_0)`` (1-d l2-Laplace) and the score
    is ``-s + X`` with ``|X| ~ Exponential(Delta_s / epsilon_0)``. With 4000 runs the sample
    mean of an exponential is within 5 standard errors (7.9 %) of its scale except with
    probability < 1.2e-6 per check (CLT; two checks, false-failure rate < 3e-6); using
    epsilon in place of epsilon_0 (a factor 3) would be off by 67 %."""
    n, runs, epsilon = 50, 4000, 1.5
    mech = PrivateSelection(
        grid=((0.5, 1.0),), loss_bounds=(0.0, 1.0), stop_probability=1.0, project=False
    )
    plan = mech.plan(n=n, d=1, center=np.zeros(1), diameter=2.0, epsilon=epsilon, delta=0.0)
    eps0 = plan.candidate_epsilon
    cand = plan.candidates[0]
    w_scale = cand.sensitivity.value / eps0
    s_scale = plan.score_sensitivity.value / eps0
    assert cand.noise.scale == pytest.approx(w_scale, rel=1e-12)
    assert plan.score_noise.scale == pytest.approx(s_scale, rel=1e-12)
    assert plan.score_sensitivity.value == pytest.approx(1.0 / plan.validation_rows, rel=1e-12)
    assert cand.sensitivity.value == pytest.approx(
        2.0 / (0.5 * plan.training_rows) + 2 * math.sqrt(2 * cand.accuracy / 0.5), rel=1e-12
    )
    w_hat, loss = np.array([0.25]), 0.4
    context = _fixed_context(w_hat, loss, n)
    rng = np.random.default_rng(2024)
    b = np.empty(runs)
    x = np.empty(runs)
    for i in range(runs):
        out = mech.release(plan, context, rng)
        b[i] = out.w[0] - w_hat[0]
        x[i] = out.facts["selected_score"] + loss
    tol = 5.0 / math.sqrt(runs)
    assert abs(np.mean(np.abs(b)) / w_scale - 1.0) < tol
    assert abs(np.mean(np.abs(x)) / s_scale - 1.0) < tol
    # both signs, symmetric noise
    assert 0.45 < np.mean(b > 0) < 0.55 and 0.45 < np.mean(x > 0) < 0.55


# ----------------------------------------------------------------------------- the coin
def test_stop_coin_extremes_draw_no_words():
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    assert stop_coin(1.0, rng) is True and stop_coin(0.0, rng) is False
    assert rng.bit_generator.state == state
    with pytest.raises(dpcvx.InvalidParameterError):
        stop_coin(1.5, rng)


@pytest.mark.statistical
def test_stop_coin_is_bernoulli_gamma():
    """20000 flips: the frequency is within 5 standard errors of gamma except with
    probability < 6e-7 per gamma (false-failure rate < 2e-6 for the three)."""
    rng = np.random.default_rng(7)
    flips = 20_000
    for gamma in (0.3, 2.0**-20 * 3e5, 1.0 / 3.0):
        freq = np.mean([stop_coin(gamma, rng) for _ in range(flips)])
        assert abs(freq - gamma) < 5 * math.sqrt(gamma * (1 - gamma) / flips)


def test_stop_coin_compares_exactly_past_the_first_128_bits():
    """``p = 2^-100 + 2^-140`` is not decided by the first 128 bits of ``U`` when they are
    ``p``'s own: a third word is drawn and compared exactly (a scripted word source)."""
    p = 2.0**-100 + 2.0**-140
    words: list[int] = []

    def integers(lo, hi, size, dtype, endpoint):
        assert (lo, hi, endpoint) == (0, 2**64, False)
        return np.array([words.pop(0) for _ in range(size)], dtype=np.uint64)

    rng = SimpleNamespace(integers=integers)
    words[:] = [0, 2**28, 2**52]  # U in [p, p + 2^-192]: U >= p
    assert stop_coin(p, rng) is False  # type: ignore[arg-type]
    assert words == []
    words[:] = [0, 2**28, 2**52 - 1]  # U in [p - 2^-192, p]: U < p
    assert stop_coin(p, rng) is True  # type: ignore[arg-type]
    words[:] = [0, 2**28 + 1, 0]  # decided by the first 128 bits: no third word
    assert stop_coin(p, rng) is False  # type: ignore[arg-type]
    assert words == [0]


# ----------------------------------------------------------------------------- audit
@pytest.mark.slow
@pytest.mark.statistical
def test_privacy_audit_on_the_linear_pair_and_its_negative_control():
    """The proposed registry case: linear loss x*w on [-1, 1], n = 10, the last record +1 vs
    -1, unshuffled split (the record trains), two grid entries, gamma = 1/2. The audit's
    Clopper-Pearson bound exceeds epsilon for a private mechanism with probability at most
    its level (dpcvx.audit.DEFAULT_ALPHA, the false-failure rate); the control (noise for
    10 epsilon, charged epsilon) has a w-marginal epsilon of about 3 and is caught."""
    import functools

    from dpcvx.audit import AuditCase, audit_mechanism, build_pair
    from dpcvx.mechanisms.registry import WorstCasePair

    mech = PrivateSelection(
        grid=((1.0, 1.0), (0.25, 1.0)),
        loss_bounds=(-1.0, 1.0),
        stop_probability=0.5,
        shuffle=False,
    )
    case = AuditCase(
        name="private-selection",
        aliases=("PrivateSelection",),
        description="see the registry proposal",
        mechanism=mech,
        make_pair=functools.partial(build_pair, WorstCasePair(loss="linear", n=10, value=1.0)),
        epsilon=1.0,
        delta=0.0,
        control_factor=10.0,
        thresholds=(-0.5, 0.0, 0.5),
        runs=2000,
        exact=False,
        neighbors=mech.neighbors,
    )
    result = audit_mechanism(case, progress=False)
    assert result.mechanism.passed and result.ok, result
