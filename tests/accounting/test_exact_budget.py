"""Exact budgets: the ledger composes exact sums and accepts no overspend, not even one ulp;
``Accountant.share`` and ``Accountant.remaining`` are the documented ways to split a budget."""

from __future__ import annotations

import math
from fractions import Fraction

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.accounting.ledger import Accountant, Ledger, PrivacyEvent, ZcdpAccountant
from dpcvx.errors import InvalidParameterError, PrivacyBudgetError
from dpcvx.mechanisms.noise import calibrate

BUDGETS = [1.0, 0.3, 2.7, 1e-3, 7.0 / 3.0, 5e-324 * 2**60]


def _up(x: float) -> float:
    return math.nextafter(x, math.inf)


def _gaussian(label: str, epsilon: float, delta: float) -> PrivacyEvent:
    spec = calibrate(1.0, epsilon, delta)
    return PrivacyEvent(
        label=label,
        epsilon=epsilon,
        delta=delta,
        kind="gaussian",
        noise_multiplier=spec.noise_multiplier,
    )


def _exact_epsilon(ledger: Ledger) -> Fraction:
    return sum((Fraction(e.epsilon) for e in ledger), Fraction(0))


# --------------------------------------------------------------------------------------------
# No overspend, not even by one float
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("budget", BUDGETS)
def test_an_overspend_by_one_ulp_is_refused_and_records_nothing(budget):
    accountant = Accountant(budget)
    over = PrivacyEvent(label="one ulp over", epsilon=_up(budget))
    assert not accountant.can_afford(over)
    with pytest.raises(PrivacyBudgetError, match="Nothing was reserved"):
        accountant.reserve(over)
    assert len(accountant.ledger) == 0 and accountant.spent.epsilon == 0.0
    exact = PrivacyEvent(label="the budget", epsilon=budget)
    assert accountant.can_afford(exact)
    accountant.reserve(exact)
    assert accountant.spent.epsilon == budget and accountant.remaining.epsilon == 0.0


def test_an_overspend_of_delta_by_one_ulp_is_refused():
    accountant = Accountant(10.0, 1e-6)
    with pytest.raises(PrivacyBudgetError):
        accountant.reserve(PrivacyEvent(label="d", epsilon=1.0, delta=_up(1e-6), kind="approx"))
    assert len(accountant.ledger) == 0
    accountant.reserve(PrivacyEvent(label="d", epsilon=1.0, delta=1e-6, kind="approx"))
    assert accountant.spent.delta == 1e-6 and accountant.remaining.delta == 0.0


def test_an_overspend_after_earlier_releases_is_refused_and_records_nothing():
    accountant = Accountant(1.0, 1e-6)
    accountant.reserve(PrivacyEvent(label="a", epsilon=0.3, delta=3e-7, kind="approx"))
    left = accountant.remaining
    assert Fraction(0.3) + Fraction(left.epsilon) <= 1
    before = accountant.ledger
    with pytest.raises(PrivacyBudgetError):
        accountant.reserve(PrivacyEvent(label="b", epsilon=_up(left.epsilon)))
    with pytest.raises(PrivacyBudgetError):
        accountant.reserve_all(
            [
                PrivacyEvent(label="c", epsilon=left.epsilon / 2),
                PrivacyEvent(label="d", epsilon=left.epsilon, delta=left.delta, kind="approx"),
            ]
        )
    assert accountant.ledger == before  # all or nothing, the first of the two included
    accountant.reserve(
        PrivacyEvent(label="rest", epsilon=left.epsilon, delta=left.delta, kind="approx")
    )
    assert _exact_epsilon(accountant.ledger) <= 1
    assert sum(Fraction(e.delta) for e in accountant.ledger) <= Fraction(1e-6)


@pytest.mark.parametrize("seed", range(20))
def test_random_releases_fit_exactly_when_their_exact_sum_fits(seed):
    """Exact sums of arbitrary floats: a budget equal to the exact sum rounded up takes every
    release (no double rounding along the way); one float less refuses the last one."""
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 30))
    eps = [float(x) for x in rng.uniform(1e-3, 1.0, size=k)]
    deltas = [float(x) for x in rng.uniform(0.0, 1e-7, size=k)]
    events = [
        PrivacyEvent(label=f"e{i}", epsilon=e, delta=d, kind="approx")
        for i, (e, d) in enumerate(zip(eps, deltas))
    ]
    exact = sum(map(Fraction, eps), Fraction(0))
    budget = float(exact)
    if Fraction(budget) < exact:
        budget = _up(budget)
    delta_budget = 1e-5
    accountant = Accountant(budget, delta_budget)
    for event in events:
        accountant.reserve(event)
    assert accountant.spent.epsilon == budget
    assert accountant.ledger.total().epsilon == budget
    if Fraction(budget) > exact:  # the exact sum is not a float: one float less is too little
        tight = Accountant(math.nextafter(budget, 0.0), delta_budget)
        for event in events[:-1]:
            tight.reserve(event)
        with pytest.raises(PrivacyBudgetError):
            tight.reserve(events[-1])
        assert len(tight.ledger) == k - 1


def test_gaussian_events_compose_to_at_most_the_budget():
    accountant = Accountant(2.0, 1e-5)
    part = accountant.share(4)
    for i in range(4):
        accountant.reserve(_gaussian(f"g{i}", part.epsilon, part.delta))
    assert accountant.spent.epsilon <= 2.0 and accountant.spent.delta <= 1e-5
    total = accountant.ledger.total()
    assert total.epsilon <= 2.0  # the PLD composition is smaller than the sum here
    assert total.delta == accountant.spent.delta


# --------------------------------------------------------------------------------------------
# Splitting a budget: ten releases of 0.1 versus share(10) and remaining
# --------------------------------------------------------------------------------------------


def test_ten_releases_of_float_a_tenth_do_not_fit_a_budget_of_one():
    assert Fraction(0.1) * 10 > 1  # the float 0.1 is more than a tenth
    accountant = Accountant(1.0)
    for i in range(9):
        accountant.reserve(PrivacyEvent(label=f"tenth {i}", epsilon=0.1))
    before = accountant.ledger
    with pytest.raises(PrivacyBudgetError, match=r"share\(k\)") as info:
        accountant.reserve(PrivacyEvent(label="tenth 9", epsilon=0.1))
    assert "remaining" in str(info.value)
    assert accountant.ledger == before and len(accountant.ledger) == 9


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("parts", [1, 2, 3, 7, 10, 49, 100])
def test_share_splits_a_budget_into_parts_that_fit_exactly(budget, parts):
    accountant = Accountant(budget, 1e-6)
    part = accountant.share(parts)
    assert part.epsilon <= budget / parts and part.delta <= 1e-6 / parts
    assert parts * Fraction(part.epsilon) <= Fraction(budget)
    # the largest such float: one float more would not fit
    assert parts * Fraction(_up(part.epsilon)) > Fraction(budget)
    for i in range(parts):
        left = accountant.remaining  # never less than one share while shares are due
        assert left.epsilon >= part.epsilon and left.delta >= part.delta
        accountant.reserve(
            PrivacyEvent(label=f"part {i}", epsilon=part.epsilon, delta=part.delta, kind="approx")
        )
    assert len(accountant.ledger) == parts
    assert accountant.spent.epsilon <= budget and accountant.spent.delta <= 1e-6


def test_share_divides_what_is_left_and_remaining_pays_the_last_release():
    accountant = Accountant(1.0)
    accountant.reserve(PrivacyEvent(label="first", epsilon=0.25))
    part = accountant.share(3)
    assert part.epsilon == pytest.approx(0.25, rel=1e-15) and part.epsilon <= 0.25
    for i in range(2):
        accountant.reserve(PrivacyEvent(label=f"part {i}", epsilon=part.epsilon))
    last = accountant.remaining
    assert last.epsilon >= part.epsilon
    accountant.reserve(PrivacyEvent(label="last", epsilon=last.epsilon))
    assert accountant.remaining.epsilon == 0.0
    assert _exact_epsilon(accountant.ledger) <= 1
    with pytest.raises(PrivacyBudgetError):
        accountant.reserve(PrivacyEvent(label="more", epsilon=5e-324))


def test_nine_tenths_then_the_remaining_budget():
    accountant = Accountant(1.0)
    for i in range(9):
        accountant.reserve(PrivacyEvent(label=f"tenth {i}", epsilon=0.1))
    last = accountant.remaining
    assert _exact_epsilon(accountant.ledger) + Fraction(last.epsilon) <= 1
    accountant.reserve(PrivacyEvent(label="rest", epsilon=last.epsilon))
    assert _exact_epsilon(accountant.ledger) <= 1


@pytest.mark.parametrize("parts", [0, -1, 1.5, True, "2", None])
def test_share_takes_a_positive_integer(parts):
    with pytest.raises(InvalidParameterError, match="positive integer"):
        Accountant(1.0).share(parts)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="positive integer"):
        ZcdpAccountant(1.0).share_rho(parts)  # type: ignore[arg-type]


def test_split_budget_through_the_pipeline():
    """The documented user path: ten releases at ``accountant.share(10)`` all fit."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    Y = np.sign(X @ np.array([1.0, -0.5]) + 0.1)
    w, x, y = cp.Variable(2), cp.Parameter(2), cp.Parameter()
    problem = dpcvx.Problem(
        cp.pos(1 - y * (x @ w)), w, data={x: X, y: Y}, domain=[cp.norm(w, 2) <= 1]
    )
    mech = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=0.1)
    accountant = dpcvx.Accountant(1.0)
    with pytest.raises(dpcvx.PrivacyBudgetError):
        naive = dpcvx.Accountant(1.0)
        for i in range(10):
            problem.solve_private(mech, epsilon=0.1, rng=i, accountant=naive)
    assert len(naive.ledger) == 9
    part = accountant.share(10)
    for i in range(10):
        res = problem.solve_private(mech, epsilon=part.epsilon, rng=i, accountant=accountant)
    assert len(res.ledger) == 10 and accountant.spent.epsilon <= 1.0


# --------------------------------------------------------------------------------------------
# zCDP budgets in rho
# --------------------------------------------------------------------------------------------


def _eps_whose_float_square_rounds_down() -> float:
    for i in range(1, 1000):
        eps = 0.1 * i
        if Fraction(eps * eps / 2.0) < Fraction(eps) ** 2 / 2:
            return eps
    raise AssertionError("no such epsilon in the list")  # pragma: no cover


def test_implied_rho_is_exact_and_rounded_up():
    eps = _eps_whose_float_square_rounds_down()
    event = PrivacyEvent(label="pure", epsilon=eps)
    rho = event.implied_rho()
    assert rho is not None and Fraction(rho) >= Fraction(eps) ** 2 / 2
    # a rho budget of the rounded-to-nearest float eps^2/2 is less than the event's exact rho
    tight = ZcdpAccountant(eps * eps / 2.0)
    with pytest.raises(PrivacyBudgetError):
        tight.reserve(event)
    assert len(tight.ledger) == 0
    ZcdpAccountant(rho).reserve(event)


def test_a_rho_overspend_by_one_ulp_is_refused():
    accountant = ZcdpAccountant(0.5)
    with pytest.raises(PrivacyBudgetError, match="share_rho"):
        accountant.reserve(PrivacyEvent.zcdp("over", _up(0.5), 1e-6))
    assert len(accountant.ledger) == 0
    accountant.reserve(PrivacyEvent.zcdp("all", 0.5, 1e-6))
    assert accountant.spent_rho == 0.5 and accountant.remaining_rho == 0.0


@pytest.mark.parametrize("parts", [3, 10, 33])
def test_share_rho_and_remaining_rho_split_a_rho_budget(parts):
    accountant = ZcdpAccountant(0.3)
    rho = accountant.share_rho(parts)
    assert parts * Fraction(rho) <= Fraction(0.3)
    for i in range(parts - 1):
        accountant.reserve(PrivacyEvent.zcdp(f"part {i}", rho, 1e-6))
    last = accountant.remaining_rho
    assert last >= rho
    accountant.reserve(PrivacyEvent.zcdp("last", last, 1e-6))
    assert sum(Fraction(e.rho) for e in accountant.ledger) <= Fraction(0.3)
    assert accountant.remaining_rho == 0.0


def test_a_zcdp_budget_has_no_epsilon_delta_share():
    accountant = ZcdpAccountant(1.0)
    assert accountant.remaining.epsilon == math.inf and accountant.remaining.delta == 1.0
    with pytest.raises(InvalidParameterError, match="share_rho"):
        accountant.share(2)


# --------------------------------------------------------------------------------------------
# zCDP conversions are safe in floating point
# --------------------------------------------------------------------------------------------


def _requests(count: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        yield float(10 ** rng.uniform(-2.5, 1.0)), float(10 ** rng.uniform(-12.0, -2.0))


def test_dp_to_zcdp_never_converts_back_above_epsilon():
    """The closed form lost up to ~1e4 ulps to cancellation (e.g. at (0.01, 1e-8)); the rho it
    returns now converts back to at most epsilon, and one float more would not."""
    from dpcvx.accounting.zcdp import dp_to_zcdp, zcdp_to_dp

    for epsilon, delta in [(0.01, 1e-8), (0.01, 1e-9), (0.02, 1e-10), *_requests(300)]:
        rho = dp_to_zcdp(epsilon, delta)
        assert zcdp_to_dp(rho, delta, "bs16") <= epsilon
        assert zcdp_to_dp(_up(rho), delta, "bs16") > epsilon
        accountant = Accountant(epsilon, delta)
        accountant.reserve(PrivacyEvent.zcdp("release", rho, delta))  # fits, exactly


def test_zcdp_to_dp_bounds_the_real_number_conversion_from_above():
    mpmath = pytest.importorskip("mpmath")
    from dpcvx.accounting.zcdp import zcdp_to_dp

    mpmath.mp.prec = 200
    rng = np.random.default_rng(3)
    for _ in range(2000):
        rho, delta = float(10 ** rng.uniform(-6, 2)), float(10 ** rng.uniform(-12, -1))
        rho_m, delta_m = mpmath.mpf(rho), mpmath.mpf(delta)
        true = rho_m + 2 * mpmath.sqrt(rho_m * mpmath.log(1 / delta_m))
        assert mpmath.mpf(zcdp_to_dp(rho, delta, "bs16")) >= true


def test_pure_and_gaussian_rho_are_rounded_up():
    from dpcvx.accounting.zcdp import gaussian_to_zcdp, pure_to_zcdp

    rng = np.random.default_rng(4)
    for x in rng.uniform(0.01, 10.0, size=200):
        x = float(x)
        assert Fraction(pure_to_zcdp(x)) >= Fraction(x) ** 2 / 2
        assert Fraction(gaussian_to_zcdp(x)) >= 1 / (2 * Fraction(x) ** 2)
        assert pure_to_zcdp(x) == PrivacyEvent(label="p", epsilon=x).implied_rho()
