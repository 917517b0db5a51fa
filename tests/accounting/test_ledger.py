"""Tests of the privacy ledger and the accountant (dpcvx.accounting.ledger)."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import dp_accounting
import numpy as np
import pytest

from dpcvx.accounting.ledger import Accountant, Ledger, PrivacyEvent
from dpcvx.errors import InvalidParameterError, PrivacyBudgetError
from dpcvx.mechanisms.noise import calibrate, gaussian_delta, sample
from dpcvx.types import Guarantee


def _gaussian_event(label: str, epsilon: float, delta: float, sensitivity: float = 1.0):
    spec = calibrate(sensitivity, epsilon, delta)
    return PrivacyEvent(
        label=label,
        epsilon=epsilon,
        delta=delta,
        kind="gaussian",
        noise_multiplier=spec.noise_multiplier,
        detail={"sigma": spec.scale, "sensitivity": sensitivity},
    )


# --------------------------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------------------------


def test_events_are_immutable():
    source = {"dim": 3}
    event = PrivacyEvent(label="a", epsilon=0.5, detail=source)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.epsilon = 0.1  # type: ignore[misc]
    with pytest.raises(TypeError):
        event.detail["dim"] = 4  # type: ignore[index]
    source["dim"] = 99  # the event holds its own copy
    assert event.detail["dim"] == 3
    assert event.detail == {"dim": 3}
    assert isinstance(hash(event), int)
    assert PrivacyEvent(label="b", epsilon=1.0).detail == {}
    assert event.guarantee == Guarantee(epsilon=0.5, delta=0.0)


def test_dp_event():
    gauss = _gaussian_event("g", 1.0, 1e-5)
    dp = gauss.dp_event()
    assert isinstance(dp, dp_accounting.GaussianDpEvent)
    assert dp.noise_multiplier == gauss.noise_multiplier
    assert isinstance(
        PrivacyEvent(label="p", epsilon=1.0).dp_event(), dp_accounting.UnsupportedDpEvent
    )
    approx = PrivacyEvent(label="a", epsilon=1.0, delta=1e-6, kind="approx")
    assert isinstance(approx.dp_event(), dp_accounting.UnsupportedDpEvent)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"label": "x", "epsilon": -0.1},
        {"label": "x", "epsilon": math.nan},
        {"label": "x", "epsilon": math.inf},
        {"label": "x", "epsilon": "1"},
        {"label": "x", "epsilon": True},
        {"label": 3, "epsilon": 1.0},
        {"label": "x", "epsilon": 1.0, "delta": 1e-6},  # pure with delta
        {"label": "x", "epsilon": 1.0, "delta": 1.0, "kind": "approx"},
        {"label": "x", "epsilon": 1.0, "delta": -1e-6, "kind": "approx"},
        {"label": "x", "epsilon": 1.0, "kind": "renyi"},
        {"label": "x", "epsilon": 1.0, "noise_multiplier": 3.0},  # multiplier on a pure event
        {"label": "x", "epsilon": 1.0, "delta": 1e-5, "kind": "gaussian"},  # no multiplier
        {"label": "x", "epsilon": 1.0, "delta": 1e-5, "kind": "gaussian", "noise_multiplier": 0.0},
        {"label": "x", "epsilon": 1.0, "delta": 1e-5, "kind": "gaussian", "noise_multiplier": -4},
        {"label": "x", "epsilon": 1.0, "delta": 0.0, "kind": "gaussian", "noise_multiplier": 4.0},
        # multiplier 1 is far from (1, 1e-5)-DP: inconsistent declaration
        {"label": "x", "epsilon": 1.0, "delta": 1e-5, "kind": "gaussian", "noise_multiplier": 1.0},
        {"label": "x", "epsilon": 1.0, "detail": [("a", 1)]},
    ],
)
def test_bad_events_raise(kwargs):
    with pytest.raises(InvalidParameterError):
        PrivacyEvent(**kwargs)


def test_gaussian_event_consistency_uses_the_exact_profile():
    # The Algorithm 6 typo (sigma_ZWB / sqrt 2 at eps = 1, delta = 1e-5) is not (1, 1e-5)-DP.
    with pytest.raises(InvalidParameterError, match="only"):
        PrivacyEvent(
            label="typo",
            epsilon=1.0,
            delta=1e-5,
            kind="gaussian",
            noise_multiplier=4.6089 / math.sqrt(2.0),
        )
    ok = PrivacyEvent(
        label="zwb", epsilon=1.0, delta=1e-5, kind="gaussian", noise_multiplier=4.6089
    )
    assert ok.noise_multiplier == 4.6089


# --------------------------------------------------------------------------------------------
# Ledger
# --------------------------------------------------------------------------------------------


def test_basic_composition_sums():
    ledger = Ledger().append(PrivacyEvent(label="a", epsilon=0.3))
    ledger = ledger.append(PrivacyEvent(label="b", epsilon=0.2, delta=1e-6, kind="approx"))
    ledger = ledger.append(PrivacyEvent(label="c", epsilon=0.5))
    total = ledger.total()
    assert total.epsilon >= 1.0 and total.epsilon == pytest.approx(1.0, rel=1e-15)
    assert total.delta >= 1e-6 and total.delta == pytest.approx(1e-6, rel=1e-15)
    assert total == ledger.basic_total()
    assert len(ledger) == 3
    assert [e.label for e in ledger] == ["a", "b", "c"]
    assert Ledger().total() == Guarantee(epsilon=0.0, delta=0.0)


def test_ledger_is_immutable_and_append_only():
    empty = Ledger()
    one = empty.append(PrivacyEvent(label="a", epsilon=0.3))
    assert len(empty) == 0 and len(one) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.events = ()  # type: ignore[misc]
    assert isinstance(one.events, tuple)
    with pytest.raises(InvalidParameterError):
        Ledger(events=(1.0,))  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError):
        empty.append("event")  # type: ignore[arg-type]


def test_ledger_str_is_a_table():
    ledger = Ledger(
        events=(
            PrivacyEvent(label="first release", epsilon=0.25),
            PrivacyEvent(label="second", epsilon=0.5, delta=1e-7, kind="approx"),
        )
    )
    text = str(ledger)
    lines = text.splitlines()
    assert lines[0].split() == ["label", "epsilon", "delta", "kind"]
    assert any(
        line.startswith("first release") and "0.25" in line and "pure" in line for line in lines
    )
    assert any(line.startswith("second") and "1e-07" in line and "approx" in line for line in lines)
    assert lines[-1].startswith("total") and "0.75" in lines[-1]
    assert "total" in str(Ledger())


def test_pld_composition_of_two_gaussians():
    """Two Gaussians with multipliers s1, s2 compose exactly to one with (s1^-2 + s2^-2)^-1/2."""
    g1 = _gaussian_event("g1", 1.0, 5e-6)
    g2 = _gaussian_event("g2", 0.5, 5e-6, sensitivity=3.0)
    ledger = Ledger(events=(g1, g2))
    basic = ledger.basic_total()
    total = ledger.total()
    assert total.delta == basic.delta
    assert total.epsilon <= basic.epsilon
    assert total.epsilon < 0.95 * basic.epsilon  # PLD is strictly better here

    combined = (g1.noise_multiplier**-2 + g2.noise_multiplier**-2) ** -0.5
    exact = dp_accounting.get_epsilon_gaussian(combined, 1e-5)
    # PLD is pessimistic (an upper bound) and accurate to its 1e-4 discretization.
    assert exact <= total.epsilon <= exact + 0.01
    # Independent check with dpcvx's own exact profile: (total.epsilon, 1e-5) is valid.
    assert gaussian_delta(combined, 1.0, total.epsilon) <= 1e-5
    assert gaussian_delta(combined, 1.0, exact * 0.99) > 1e-5


def test_pld_part_composes_with_pure_events_by_basic_composition():
    g1 = _gaussian_event("g1", 1.0, 5e-6)
    g2 = _gaussian_event("g2", 1.0, 5e-6)
    gauss_only = Ledger(events=(g1, g2)).total()
    mixed = Ledger(events=(g1, PrivacyEvent(label="p", epsilon=0.4), g2)).total()
    assert mixed.epsilon == pytest.approx(gauss_only.epsilon + 0.4, rel=1e-12)
    assert mixed.delta == gauss_only.delta
    # One Gaussian alone is reported by basic composition (its own epsilon).
    assert Ledger(events=(g1,)).total().epsilon == pytest.approx(1.0, rel=1e-15)


def test_total_never_exceeds_basic_composition():
    # A Gaussian declared with a loose (epsilon, delta): the basic sum can beat the PLD value.
    loose = PrivacyEvent(
        label="loose", epsilon=0.01, delta=0.3, kind="gaussian", noise_multiplier=10.0
    )
    tight = _gaussian_event("tight", 1.0, 1e-6)
    ledger = Ledger(events=(loose, tight))
    assert ledger.total().epsilon <= ledger.basic_total().epsilon


# --------------------------------------------------------------------------------------------
# Accountant
# --------------------------------------------------------------------------------------------


def test_reserve_beyond_budget_raises_and_records_nothing():
    accountant = Accountant(1.0)
    accountant.reserve(PrivacyEvent(label="first", epsilon=0.6))
    before = accountant.ledger
    with pytest.raises(PrivacyBudgetError) as info:
        accountant.reserve(PrivacyEvent(label="second", epsilon=0.5))
    message = str(info.value)
    for phrase in ("budget", "already spent", "second", "Nothing was reserved", "Lower"):
        assert phrase in message
    assert isinstance(info.value, ValueError)
    assert accountant.ledger == before and len(accountant.ledger) == 1
    assert accountant.spent.epsilon == pytest.approx(0.6, rel=1e-15)
    assert not accountant.can_afford(PrivacyEvent(label="second", epsilon=0.5))
    assert accountant.can_afford(PrivacyEvent(label="third", epsilon=0.4))


def test_delta_budget_is_enforced():
    pure_only = Accountant(5.0)
    with pytest.raises(PrivacyBudgetError):
        pure_only.reserve(_gaussian_event("g", 1.0, 1e-6))
    assert len(pure_only.ledger) == 0
    accountant = Accountant(5.0, 1e-6)
    accountant.reserve(_gaussian_event("g", 1.0, 6e-7))
    with pytest.raises(PrivacyBudgetError):
        accountant.reserve(_gaussian_event("h", 1.0, 6e-7))
    accountant.reserve(_gaussian_event("h", 1.0, 4e-7))
    assert accountant.remaining.delta == pytest.approx(0.0, abs=1e-18)


def test_the_ledger_accepts_no_overspend_not_even_a_rounding_error():
    """The float 0.1 is slightly more than a tenth: ten of them exceed a budget of 1.0 in exact
    arithmetic, so the tenth is refused (and nothing recorded); `share(10)` gives ten shares
    whose exact sum fits."""
    accountant = Accountant(1.0)
    for i in range(9):
        accountant.reserve(PrivacyEvent(label=f"tenth {i}", epsilon=0.1))
    with pytest.raises(PrivacyBudgetError, match="share"):
        accountant.reserve(PrivacyEvent(label="tenth 9", epsilon=0.1))
    assert len(accountant.ledger) == 9
    last = accountant.remaining.epsilon
    assert sum(Fraction(e.epsilon) for e in accountant.ledger) + Fraction(last) <= 1
    accountant.reserve(PrivacyEvent(label="the rest", epsilon=last))
    with pytest.raises(PrivacyBudgetError):
        accountant.reserve(PrivacyEvent(label="one too many", epsilon=1e-9))
    assert sum(Fraction(e.epsilon) for e in accountant.ledger) <= 1

    split = Accountant(1.0, 1e-6)
    share = split.share(10)
    assert share.epsilon <= 0.1 and 10 * Fraction(share.epsilon) <= 1
    for i in range(10):
        split.reserve(PrivacyEvent(label=f"share {i}", epsilon=share.epsilon))
    assert split.spent.epsilon <= 1.0


def test_an_overspend_by_one_float_is_refused_and_records_nothing():
    accountant = Accountant(1.0)
    with pytest.raises(PrivacyBudgetError):
        accountant.reserve(PrivacyEvent(label="x", epsilon=math.nextafter(1.0, 2.0)))
    assert len(accountant.ledger) == 0
    accountant.reserve(PrivacyEvent(label="x", epsilon=1.0))  # exactly the budget fits
    assert accountant.spent.epsilon == 1.0 and accountant.remaining.epsilon == 0.0


def test_several_releases_compose_against_one_accountant():
    accountant = Accountant(3.0, 1e-5)
    rng = np.random.default_rng(5)
    releases = []
    for i, (epsilon, delta) in enumerate([(1.0, 0.0), (1.0, 4e-6), (0.5, 4e-6)]):
        spec = calibrate(0.2, epsilon, delta)
        event = PrivacyEvent(
            label=f"release {i}",
            epsilon=spec.epsilon,
            delta=spec.delta,
            kind="gaussian" if spec.kind == "gaussian" else "pure",
            noise_multiplier=spec.noise_multiplier,
        )
        accountant.reserve(event)  # reserve before drawing noise
        releases.append(np.zeros(3) + sample(spec, 3, rng))
    assert len(accountant.ledger) == 3
    spent = accountant.spent
    assert spent.delta == pytest.approx(8e-6, rel=1e-12)
    assert 1.0 < spent.epsilon <= 2.5 * (1 + 1e-12)
    remaining = accountant.remaining
    assert remaining.epsilon == pytest.approx(3.0 - spent.epsilon, rel=1e-12)
    assert remaining.delta == pytest.approx(2e-6, rel=1e-9)
    # Anything within `remaining` can still be reserved.
    last = PrivacyEvent(
        label="rest", epsilon=remaining.epsilon, delta=remaining.delta, kind="approx"
    )
    assert accountant.can_afford(last)
    accountant.reserve(last)
    assert len(accountant.ledger) == 4


def test_remaining_is_affordable_after_pld_savings():
    accountant = Accountant(2.5, 1e-5)
    accountant.reserve(_gaussian_event("g1", 1.0, 2e-6))
    accountant.reserve(_gaussian_event("g2", 1.0, 2e-6))
    assert accountant.spent.epsilon < 2.0  # PLD saved budget
    remaining = accountant.remaining
    assert remaining.epsilon > 0.5
    event = _gaussian_event("g3", remaining.epsilon, remaining.delta)
    assert accountant.can_afford(event)
    accountant.reserve(event)
    assert accountant.spent.epsilon <= 2.5 * (1 + 1e-12)
    assert accountant.spent.epsilon <= accountant.ledger.total().epsilon


def test_a_failure_after_reserving_keeps_the_budget_spent():
    accountant = Accountant(1.0)

    def release():
        accountant.reserve(PrivacyEvent(label="doomed", epsilon=0.7))
        raise RuntimeError("solver crashed after the reservation")

    with pytest.raises(RuntimeError):
        release()
    assert len(accountant.ledger) == 1
    assert accountant.remaining.epsilon == pytest.approx(0.3, rel=1e-12)


def test_ledger_snapshot_does_not_change():
    accountant = Accountant(1.0)
    accountant.reserve(PrivacyEvent(label="a", epsilon=0.1))
    snapshot = accountant.ledger
    accountant.reserve(PrivacyEvent(label="b", epsilon=0.1))
    assert len(snapshot) == 1 and len(accountant.ledger) == 2
    assert "Accountant(" in repr(accountant)


@pytest.mark.parametrize(
    ("epsilon", "delta"),
    [
        (0.0, 0.0),
        (-1.0, 0.0),
        (math.nan, 0.0),
        (math.inf, 0.0),
        ("1", 0.0),
        (True, 0.0),
        (1.0, -1e-9),
        (1.0, 1.0),
        (1.0, 2.0),
        (1.0, math.nan),
        (1.0, None),
    ],
)
def test_bad_accountant_raises(epsilon, delta):
    with pytest.raises(InvalidParameterError):
        Accountant(epsilon, delta)


def test_reserve_rejects_non_events():
    accountant = Accountant(1.0)
    with pytest.raises(InvalidParameterError):
        accountant.reserve(Guarantee(epsilon=0.1))  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError):
        accountant.can_afford(0.1)  # type: ignore[arg-type]
    assert len(accountant.ledger) == 0
