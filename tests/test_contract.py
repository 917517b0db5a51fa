"""The mechanism contract, checked over every registered release path.

Generated from :data:`dpcvx.mechanisms.registry.REGISTRY`: a newly registered mechanism is
checked here without further wiring. For every path:

- the plan is built from public quantities only and satisfies the typed protocol;
- the budget is reserved before the first access to the data (a spy on the release context);
- bad input raises a typed error and spends nothing; an unaffordable release records nothing;
- the emitted events add up (exactly) to the claimed guarantee, under the mechanism's relation;
- an abort after the reservation keeps the budget spent and is counted as an output by the
  audit;
- the negative control plans louder noise than it is charged for, and (slow) the audit
  catches it while the mechanism passes.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import dpcvx
from dpcvx.audit import audit, audit_mechanism, build_pair, negative_control
from dpcvx.errors import (
    CertificationError,
    InvalidParameterError,
    PrivacyBudgetError,
    SolverError,
)
from dpcvx.mechanisms.base import Mechanism, Plan, Release
from dpcvx.mechanisms.registry import REGISTRY
from dpcvx.neighbors import NeighborRelation

ENTRIES = {entry.name: entry for entry in REGISTRY}
NAMES = sorted(ENTRIES)

#: context methods that read the data (everything else is public structure)
DATA_METHODS = ("solver", "tilted_solver", "gradients", "loss_values", "rows")


class _Log(list):
    pass


class _SpyContext:
    """Delegates to a release context and logs every call of a data-reading method."""

    def __init__(self, inner, log: _Log, fail: bool = False) -> None:
        self._inner, self._log, self._fail = inner, log, fail

    def __getattr__(self, name: str):
        value = getattr(self._inner, name)
        if name not in DATA_METHODS or not callable(value):
            return value
        log, fail = self._log, self._fail

        def call(*args, **kwargs):
            log.append(name)
            if fail:
                raise CertificationError("a planted failure of the data source")
            out = value(*args, **kwargs)
            if callable(out):  # a solve function: its calls read the data too

                def solve(*a, **k):
                    log.append(name + "()")
                    return out(*a, **k)

                return solve
            return out

        return call


class _SpySource:
    """A data source that hands out spying release contexts."""

    def __init__(self, source, log: _Log, fail: bool = False) -> None:
        self._source, self._log, self._fail = source, log, fail
        for name in ("n", "d", "domain", "diameter", "declared", "neighbors"):
            setattr(self, name, getattr(source, name))

    def release_context(self, **kwargs):
        return _SpyContext(self._source.release_context(**kwargs), self._log, self._fail)


class _SpyAccountant(dpcvx.Accountant):
    """Logs the moment the budget is reserved."""

    log: _Log

    def reserve_all(self, events):
        out = super().reserve_all(events)
        self.log.append("reserve")
        return out

    def reserve(self, event):
        out = super().reserve(event)
        self.log.append("reserve")
        return out


def _release(entry, source, *, accountant=None, rng=0, epsilon=None, delta=None):
    from dpcvx.pipeline import release

    return release(
        source,
        entry.mechanism,
        epsilon=entry.epsilon if epsilon is None else epsilon,
        delta=entry.delta if delta is None else delta,
        rng=rng,
        accountant=accountant,
    )


def _accountant(entry, scale: float = 1.0, spy: bool = False):
    cls = _SpyAccountant if spy else dpcvx.Accountant
    delta = entry.delta * scale if entry.delta else 0.0
    acc = cls(entry.epsilon * scale, delta, neighbors=entry.neighbors)
    if spy:
        acc.log = _Log()
    return acc


def _request(entry, src) -> dict:
    """The public request the pipeline plans from (no data)."""
    return dict(
        n=src.n,
        d=src.d,
        center=None if src.domain is None else src.domain.center,
        diameter=src.diameter,
        epsilon=entry.epsilon,
        delta=entry.delta,
        domain=src.domain,
    )


@pytest.fixture(scope="module")
def pairs():
    return {}


def _pair(pairs, name):
    if name not in pairs:
        pairs[name] = build_pair(ENTRIES[name].pair)
    return pairs[name]


@pytest.mark.parametrize("name", NAMES)
def test_the_mechanism_and_its_plan_satisfy_the_protocol(name):
    entry = ENTRIES[name]
    mech = entry.mechanism
    assert isinstance(mech, Mechanism)
    assert isinstance(type(mech).neighbors, NeighborRelation)
    src = build_pair(entry.pair)[0]
    plan = mech.plan(**_request(entry, src))
    assert isinstance(plan, Plan)
    assert plan.guarantee.epsilon <= entry.epsilon and plan.guarantee.delta <= entry.delta
    with pytest.raises((AttributeError, TypeError)):
        mech.regularization = 123.0  # mechanisms are frozen  # type: ignore[misc]


@pytest.mark.parametrize("name", NAMES)
def test_the_budget_is_reserved_before_the_data_is_read(name, pairs):
    entry = ENTRIES[name]
    acc = _accountant(entry, spy=True)
    src = _SpySource(_pair(pairs, name)[0], acc.log)
    result = _release(entry, src, accountant=acc)
    assert acc.log[0] == "reserve", acc.log[:5]
    assert any(item in DATA_METHODS for item in acc.log[1:]), "the release never read the data"
    assert np.all(np.isfinite(result.w))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    "bad",
    [
        {"epsilon": -1.0},
        {"epsilon": math.nan},
        {"epsilon": math.inf},
        {"delta": 1.5},
        {"delta": -0.1},
        {"rng": "seed"},
        {"accountant": "budget"},
    ],
    ids=lambda bad: next(iter(bad.items()))[0] + "=" + repr(next(iter(bad.values()))),
)
def test_bad_input_raises_a_typed_error_and_spends_nothing(name, bad, pairs):
    entry = ENTRIES[name]
    acc = _accountant(entry, scale=10.0, spy=True)
    src = _SpySource(_pair(pairs, name)[0], acc.log)
    kwargs = {"accountant": acc, **bad}
    with pytest.raises(InvalidParameterError):
        _release(entry, src, **kwargs)
    assert len(acc.ledger) == 0 and acc.log == []


@pytest.mark.parametrize("name", NAMES)
def test_an_unaffordable_release_records_nothing_and_reads_nothing(name, pairs):
    entry = ENTRIES[name]
    acc = _accountant(entry, scale=0.5, spy=True)
    src = _SpySource(_pair(pairs, name)[0], acc.log)
    with pytest.raises(PrivacyBudgetError):
        _release(entry, src, accountant=acc)
    assert len(acc.ledger) == 0 and acc.log == []


@pytest.mark.parametrize("name", NAMES)
def test_the_events_add_up_to_the_claimed_guarantee(name, pairs):
    entry = ENTRIES[name]
    acc = _accountant(entry)
    result = _release(entry, _pair(pairs, name)[0], accountant=acc)
    assert isinstance(result, dpcvx.PrivateResult)
    events = acc.ledger.events
    assert events
    assert sum(Fraction(e.epsilon) for e in events) <= Fraction(result.epsilon)
    assert sum(Fraction(e.delta) for e in events) <= Fraction(result.delta)
    assert (result.epsilon, result.delta) == (entry.epsilon, entry.delta)
    assert result.neighbors == entry.neighbors
    assert all(e.neighbors == entry.neighbors for e in events)
    assert all(result.mechanism.split("[")[0] in e.label for e in events)


@pytest.mark.parametrize("name", NAMES)
def test_an_abort_keeps_the_budget_spent_and_the_audit_counts_it(name, pairs):
    entry = ENTRIES[name]
    acc = _accountant(entry)
    log = _Log()
    failing = _SpySource(_pair(pairs, name)[0], log, fail=True)
    with pytest.raises((CertificationError, SolverError)):
        _release(entry, failing, accountant=acc)
    assert len(acc.ledger) > 0  # spent: the abort is an output of the mechanism

    healthy = _pair(pairs, name)[0]

    def run(dataset, rng):
        return _release(entry, dataset, rng=rng).w[0]

    # the audit treats an abort as an output: a source that always aborts is told apart
    report = audit(run, (healthy, failing), epsilon=entry.epsilon, runs=40, seed=0, progress=False)
    assert report.lower_bound > entry.epsilon


@pytest.mark.parametrize("name", NAMES)
def test_the_negative_control_is_louder_than_it_is_charged(name):
    entry = ENTRIES[name]
    kwargs = _request(entry, build_pair(entry.pair)[0])
    plan = entry.mechanism.plan(**kwargs)
    control = negative_control(entry.mechanism, entry.control_factor)
    louder = control.plan(**kwargs)
    assert louder._louder != plan  # the noise was recalibrated
    # charged exactly like the mechanism
    assert [(e.epsilon, e.delta) for e in louder.events("x")] == [
        (e.epsilon, e.delta) for e in plan.events("x")
    ]


def test_a_release_returns_a_typed_release(pairs):
    entry = ENTRIES["output-perturbation"]
    src = _pair(pairs, entry.name)[0]
    context = src.release_context(extension=1.0, solver=None)
    mech = entry.mechanism
    plan = mech.plan(
        n=src.n,
        d=src.d,
        center=src.domain.center,
        diameter=src.diameter,
        epsilon=1.0,
        delta=0.0,
    )
    out = mech.release(plan, context, np.random.default_rng(0))
    assert isinstance(out, Release)
    w, certificates, facts = out
    assert w.shape == (1,) and len(certificates) == 1 and dict(facts) == {}


@pytest.mark.slow
@pytest.mark.statistical
@pytest.mark.parametrize("name", NAMES)
def test_the_mechanism_passes_its_audit_and_the_control_is_caught(name):
    """The catalogue audit of every registered path (false failure <= 1e-3 per sampled audit,
    the catalogue's own run counts)."""
    report = audit_mechanism(name, seed=0, progress=False)
    assert report.passed and report.caught
