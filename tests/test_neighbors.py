"""The neighboring relation is a typed value carried by guarantees, ledger events, ledgers,
accountants and results; guarantees under different relations never compose."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

import dpcvx
from dpcvx.accounting.ledger import Accountant, Ledger, PrivacyEvent, ZcdpAccountant
from dpcvx.errors import InvalidParameterError
from dpcvx.neighbors import REPLACE_ONE, AddRemoveOne, NeighborRelation, ReplaceOne, ReplaceOneUser
from dpcvx.results import PrivateResult
from dpcvx.types import Guarantee

USER = ReplaceOneUser(group_size=4)
RELATIONS = [REPLACE_ONE, AddRemoveOne(), USER]


def test_relations_are_exported_at_top_level():
    for name in ("NeighborRelation", "ReplaceOne", "AddRemoveOne", "ReplaceOneUser"):
        assert name in dpcvx.__all__
    assert dpcvx.NeighborRelation is NeighborRelation and dpcvx.ReplaceOne is ReplaceOne
    assert dpcvx.AddRemoveOne is AddRemoveOne and dpcvx.ReplaceOneUser is ReplaceOneUser


# --------------------------------------------------------------------------------------------
# Guarantee
# --------------------------------------------------------------------------------------------


def test_guarantee_defaults_to_replace_one_and_prints_as_before():
    pure = Guarantee(epsilon=1.0)
    assert pure.neighbors == REPLACE_ONE and isinstance(pure.neighbors, ReplaceOne)
    assert str(pure) == "1-DP (pure, replace-one neighbors)"
    approx = Guarantee(epsilon=0.5, delta=1e-6)
    assert str(approx) == "(0.5, 1e-06)-DP (replace-one neighbors)"


@pytest.mark.parametrize(
    ("name", "relation"), [("replace-one", REPLACE_ONE), ("add-remove-one", AddRemoveOne())]
)
def test_guarantee_converts_the_names_old_code_gave(name, relation):
    guarantee = Guarantee(epsilon=1.0, neighbors=name)  # type: ignore[arg-type]
    assert guarantee.neighbors == relation and isinstance(guarantee.neighbors, NeighborRelation)
    assert guarantee == Guarantee(epsilon=1.0, neighbors=relation)
    assert hash(guarantee) == hash(Guarantee(epsilon=1.0, neighbors=relation))
    assert f"{name} neighbors" in str(guarantee)


@pytest.mark.parametrize("bad", ["replace one", "user", 3, None, NeighborRelation()])
def test_guarantee_refuses_an_unknown_relation(bad):
    with pytest.raises(InvalidParameterError, match="neighboring relation"):
        Guarantee(epsilon=1.0, neighbors=bad)


def test_guarantee_carries_a_user_level_relation_and_stays_frozen():
    guarantee = Guarantee(epsilon=2.0, delta=1e-5, neighbors=USER)
    assert str(guarantee) == "(2, 1e-05)-DP (replace-one-user (m=4) neighbors)"
    assert guarantee != Guarantee(epsilon=2.0, delta=1e-5, neighbors=ReplaceOneUser(3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        guarantee.neighbors = REPLACE_ONE  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(guarantee)) == guarantee


# --------------------------------------------------------------------------------------------
# Events and ledgers
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("relation", RELATIONS)
def test_event_carries_its_relation_into_its_guarantee(relation):
    event = PrivacyEvent(label="e", epsilon=0.5, neighbors=relation)
    assert event.neighbors == relation and event.guarantee.neighbors == relation
    zcdp = PrivacyEvent.zcdp("z", 0.1, 1e-6, neighbors=relation)
    assert zcdp.neighbors == relation and zcdp.guarantee.neighbors == relation


def test_event_defaults_to_replace_one_and_converts_names():
    assert PrivacyEvent(label="e", epsilon=0.5).neighbors == REPLACE_ONE
    event = PrivacyEvent(label="e", epsilon=0.5, neighbors="add-remove-one")  # type: ignore[arg-type]
    assert event.neighbors == AddRemoveOne()
    with pytest.raises(InvalidParameterError, match="neighboring relation"):
        PrivacyEvent(label="e", epsilon=0.5, neighbors="everyone")  # type: ignore[arg-type]


@pytest.mark.parametrize("relation", RELATIONS)
def test_ledger_reports_its_relation_and_composes_under_it(relation):
    events = (
        PrivacyEvent(label="a", epsilon=0.5, neighbors=relation),
        PrivacyEvent(label="b", epsilon=0.25, neighbors=relation),
    )
    ledger = Ledger(events=events)
    assert ledger.neighbors == relation
    assert ledger.total().neighbors == relation and ledger.basic_total().neighbors == relation
    assert ledger.append(PrivacyEvent(label="c", epsilon=0.1, neighbors=relation)).neighbors == (
        relation
    )
    assert Ledger().neighbors == REPLACE_ONE
    empty = Ledger(neighbors=relation)
    assert empty.neighbors == relation and empty.total().neighbors == relation


def test_a_ledger_refuses_events_under_another_relation():
    user = PrivacyEvent(label="user", epsilon=0.5, neighbors=USER)
    item = PrivacyEvent(label="item", epsilon=0.5)
    with pytest.raises(InvalidParameterError, match="do not compose"):
        Ledger(events=(user, item))
    with pytest.raises(InvalidParameterError, match="do not compose"):
        Ledger(neighbors=USER, events=(item,))
    ledger = Ledger(events=(user,))
    with pytest.raises(InvalidParameterError, match="replace-one neighbors"):
        ledger.append(item)
    assert len(ledger) == 1


# --------------------------------------------------------------------------------------------
# Accountants
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("relation", RELATIONS)
def test_accountant_holds_a_budget_under_one_relation(relation):
    accountant = Accountant(1.0, 1e-6, neighbors=relation)
    assert accountant.neighbors == relation and accountant.budget.neighbors == relation
    accountant.reserve(PrivacyEvent(label="a", epsilon=0.5, neighbors=relation))
    for view in (accountant.spent, accountant.remaining, accountant.share(2)):
        assert view.neighbors == relation
    assert accountant.ledger.neighbors == relation


def test_accountant_defaults_to_replace_one_and_converts_names():
    assert Accountant(1.0).neighbors == REPLACE_ONE
    assert "neighbors" not in repr(Accountant(1.0))
    accountant = Accountant(1.0, neighbors="add-remove-one")  # type: ignore[arg-type]
    assert accountant.neighbors == AddRemoveOne() and "AddRemoveOne" in repr(accountant)
    with pytest.raises(InvalidParameterError, match="neighboring relation"):
        Accountant(1.0, neighbors="users")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("budget", "event"),
    [
        (REPLACE_ONE, USER),
        (USER, REPLACE_ONE),
        (USER, ReplaceOneUser(group_size=3)),
        (AddRemoveOne(), REPLACE_ONE),
    ],
)
def test_an_event_under_another_relation_is_refused_and_nothing_recorded(budget, event):
    accountant = Accountant(5.0, 1e-5, neighbors=budget)
    accountant.reserve(PrivacyEvent(label="ok", epsilon=0.5, neighbors=budget))
    before = accountant.ledger
    other = PrivacyEvent(label="other", epsilon=0.1, neighbors=event)
    with pytest.raises(InvalidParameterError, match="do not compose") as info:
        accountant.reserve(other)
    assert str(event) in str(info.value) and str(budget) in str(info.value)
    with pytest.raises(InvalidParameterError, match="do not compose"):
        accountant.can_afford(other)
    with pytest.raises(InvalidParameterError, match="do not compose"):
        accountant.reserve_all([PrivacyEvent(label="fine", epsilon=0.1, neighbors=budget), other])
    assert accountant.ledger == before and accountant.spent.epsilon == 0.5


def test_zcdp_accountant_refuses_another_relation():
    accountant = ZcdpAccountant(1.0, neighbors=USER)
    assert accountant.neighbors == USER and "ReplaceOneUser" in repr(accountant)
    with pytest.raises(InvalidParameterError, match="do not compose"):
        accountant.reserve(PrivacyEvent.zcdp("item", 0.1, 1e-6))
    assert len(accountant.ledger) == 0 and accountant.spent_rho == 0.0
    accountant.reserve(PrivacyEvent.zcdp("user", 0.1, 1e-6, neighbors=USER))
    assert accountant.ledger.neighbors == USER and accountant.spent.neighbors == USER


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


def _result(**kwargs) -> PrivateResult:
    fields = {
        "w": np.zeros(2),
        "epsilon": 1.0,
        "delta": 0.0,
        "certificates": (),
        "ledger": Ledger(),
        "seeded": True,
        "mechanism": "Test",
    }
    fields.update(kwargs)
    return PrivateResult(**fields)


def test_result_carries_its_relation_into_its_guarantee_and_summary():
    plain = _result()
    assert plain.neighbors == REPLACE_ONE
    assert plain.guarantee == Guarantee(epsilon=1.0)
    assert "(replace-one neighbors)" in plain.summary()
    user = _result(epsilon=0.5, delta=1e-6, neighbors=USER)
    assert user.guarantee == Guarantee(epsilon=0.5, delta=1e-6, neighbors=USER)
    assert "(replace-one-user (m=4) neighbors)" in user.summary()
    assert "replace-one neighbors" not in user.summary()
    named = _result(neighbors="add-remove-one")
    assert named.neighbors == AddRemoveOne() and "add-remove-one" in named.summary()


def test_a_release_states_its_relation_everywhere():
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(1)
    X = rng.normal(size=(20, 2))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    Y = np.sign(X[:, 0] + 0.1)
    w, x, y = cp.Variable(2), cp.Parameter(2), cp.Parameter()
    problem = dpcvx.Problem(
        cp.pos(1 - y * (x @ w)), w, data={x: X, y: Y}, domain=[cp.norm(w, 2) <= 1]
    )
    mech = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=0.1)
    res = problem.solve_private(mech, epsilon=1.0, rng=0)
    assert res.neighbors == REPLACE_ONE and res.guarantee.neighbors == REPLACE_ONE
    assert res.ledger.neighbors == REPLACE_ONE
    assert all(e.neighbors == REPLACE_ONE for e in res.ledger)
    user_budget = dpcvx.Accountant(5.0, neighbors=USER)
    with pytest.raises(dpcvx.InvalidParameterError, match="do not compose"):
        problem.solve_private(mech, epsilon=1.0, rng=0, accountant=user_budget)
    assert len(user_budget.ledger) == 0
