"""ResampledERM (paper 001, Prop 4): the exact binomial cap against brute-force binomial tails,
the group-privacy cost, exact privacy of the wrapper with an exact inner, the abort branch,
the resampled data access, end-to-end releases and bad input."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Any, ClassVar

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.accounting.ledger import PrivacyEvent
from dpcvx.errors import InvalidParameterError, PrivacyBudgetError
from dpcvx.mechanisms.base import Release
from dpcvx.mechanisms.iterative_localization import IterativeLocalization
from dpcvx.mechanisms.resampled_erm import (
    ResampledERM,
    _ResampledContext,
    abort_bound,
    paper_cap,
    resample_cap,
)
from dpcvx.neighbors import REPLACE_ONE
from dpcvx.types import Guarantee


# ---------------------------------------------------------------- brute-force binomial tails
def _tail(n: int, k: int) -> Fraction:
    """``P(Bin(n, 1/n) > k)`` exactly, by summing the binomial pmf in rational arithmetic."""
    p = Fraction(1, n)
    return sum(
        (math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k + 1, n + 1)), Fraction(0)
    )


def _brute_cap(n: int, beta: float) -> int:
    target = Fraction(beta) / 2
    return next(k for k in range(1, n + 1) if n * _tail(n, k) <= target)


@pytest.mark.parametrize("n", [1, 2, 3, 6, 10, 37, 200])
@pytest.mark.parametrize("beta", [0.9, 1 / 6, 0.05, 1e-3, 1e-6, 1e-12])
def test_cap_is_the_smallest_k_of_the_exact_binomial_rule(n, beta):
    k = resample_cap(n, beta)
    assert k == _brute_cap(n, beta)
    assert n * _tail(n, k) <= Fraction(beta) / 2
    assert k == 1 or n * _tail(n, k - 1) > Fraction(beta) / 2
    assert abort_bound(n, k) == pytest.approx(float(n * _tail(n, k)), rel=1e-9, abs=1e-300)


def test_cap_matches_the_spec_table_and_beats_the_printed_cap():
    """Spec B.5: n = 1000, beta = 1e-3 -> exact 9, printed 16 (ln) and 22 (log2); n = 6,
    beta = 1/6 -> 3; the exact union bound at n = 1000, k = 9 is 1.07e-4."""
    assert resample_cap(1000, 1e-3) == 9
    assert resample_cap(6, 1 / 6) == 3
    assert math.ceil(paper_cap(1e-3)) == 16 and math.ceil(paper_cap(1e-3, "binary")) == 22
    assert abort_bound(1000, 9) == pytest.approx(1.0743e-4, rel=1e-3)
    assert abort_bound(1000, 9) <= 1e-3 / 2 < abort_bound(1000, 8)
    exact = 1000 * _tail(1000, 9)  # rational arithmetic, 1000-term pmf
    assert abort_bound(1000, 9) == pytest.approx(float(exact), rel=1e-9)


def test_union_bound_covers_the_exact_abort_probability():
    """n = 6: enumerate all 6^6 index draws; the probability that some index repeats more
    than k times is at most n P(Bin(n, 1/n) > k) <= beta/2."""
    n = 6
    draws = np.array(list(itertools.product(range(n), repeat=n)))
    counts = np.stack([(draws == i).sum(axis=1) for i in range(n)], axis=1).max(axis=1)
    for k in range(1, n + 1):
        exact = np.mean(counts > k)
        assert exact <= abort_bound(n, k) + 1e-15
    assert np.mean(counts > 3) <= (1 / 6) / 2


# ---------------------------------------------------------------- a toy inner with an exact law
@dataclass(frozen=True, slots=True, kw_only=True)
class _GeoPlan:
    guarantee: Guarantee
    kind: str = "pure"
    overspend: float = 1.0
    detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    @property
    def extension_C(self) -> None:
        return None

    def events(self, label: str) -> tuple[PrivacyEvent, ...]:
        eps = self.guarantee.epsilon * self.overspend
        if self.kind == "approx":
            return (PrivacyEvent(label=label, epsilon=eps, delta=1e-9, kind="approx"),)
        return (PrivacyEvent(label=label, epsilon=eps, delta=0.0, kind="pure"),)

    def facts(self):
        return MappingProxyType({"toy": True})


@dataclass(frozen=True, slots=True, kw_only=True)
class _Geometric:
    """Releases ``sum_i z_i + Z`` with ``Z`` two-sided geometric, ``P(Z = z) ∝ e^(-eps |z|)``:
    exactly eps-DP for records in {0, 1} (sensitivity 1). Reads rows via ``loss_values``."""

    kind: str = "pure"
    overspend: float = 1.0
    requirements: ClassVar[tuple[str, ...]] = ("loss_values",)
    extension: ClassVar[str] = "plain"
    enforces_lipschitz: ClassVar[bool] = False
    neighbors: ClassVar = REPLACE_ONE

    def plan(self, *, n, d, center, diameter, epsilon, delta, domain=None):
        return _GeoPlan(
            guarantee=Guarantee(epsilon=epsilon, delta=delta),
            kind=self.kind,
            overspend=self.overspend,
        )

    @staticmethod
    def total(context) -> int:
        return int(round(float(np.sum(context.loss_values(np.zeros((1, 1)))))))

    def release(self, plan, context, rng):
        q = math.exp(-plan.guarantee.epsilon)
        noise = int(rng.geometric(1 - q)) - int(rng.geometric(1 - q))
        return Release(np.array([float(self.total(context) + noise)]), (), {"toy": True})

    @staticmethod
    def log_pmf(outputs: np.ndarray, total: int, epsilon: float) -> np.ndarray:
        q = math.exp(-epsilon)
        return math.log((1 - q) / (1 + q)) - epsilon * np.abs(outputs - total)


class _Rows:
    """A fake release context over scalar records (loss value of record i = z_i)."""

    def __init__(self, z: np.ndarray) -> None:
        self.z = np.asarray(z, float)
        self.n, self.d = self.z.size, 1
        self.seen: list[np.ndarray] = []

    def loss_values(self, points, indices=None):
        rows = self.z if indices is None else self.z[np.asarray(indices)]
        self.seen.append(np.asarray(indices).copy() if indices is not None else None)
        return np.tile(rows, (np.atleast_2d(points).shape[0], 1))

    def project(self, point, localize=None, xi=None):
        return np.clip(np.asarray(point, float), -100.0, 100.0)


def _wrapper_log_pmf(mech: ResampledERM, plan, z, outputs):
    """The wrapper's exact output law on ``outputs`` (plus the fallback atom), by enumerating
    every index draw of n = 6 and reading the resampled rows through ``_ResampledContext``."""
    n = len(z)
    base = _Rows(z)
    probs = np.zeros(outputs.size)
    abort = 0.0
    for draw in itertools.product(range(n), repeat=n):
        idx = np.array(draw)
        if np.bincount(idx, minlength=n).max() > plan.cap:
            abort += 1.0
            continue
        total = _Geometric.total(_ResampledContext(base, idx))
        probs += np.exp(_Geometric.log_pmf(outputs, total, plan.inner.guarantee.epsilon))
    return np.log(probs / n**n), abort / n**n


def test_wrapper_is_exactly_epsilon_dp_with_an_exact_inner_and_the_control_is_not():
    """Spec B.5 T2: n = 6, beta = 1/6 -> k = 3; the worst-case pair differs in one record.
    The exact law of the wrapper has max log-ratio <= epsilon; the same wrapper with the inner
    at the full epsilon (the negative control) exceeds it."""
    eps = 1.0
    mech = ResampledERM(inner=_Geometric(), failure_probability=1 / 6, fallback=[-50.0])
    plan = mech.plan(n=6, d=1, center=None, diameter=1.0, epsilon=eps, delta=0.0)
    assert plan.cap == 3 and Fraction(plan.inner_epsilon) * 3 <= Fraction(eps)
    z, z2 = np.array([1, 0, 0, 0, 0, 0.0]), np.zeros(6)
    outputs = np.arange(-30, 37)
    a, abort_a = _wrapper_log_pmf(mech, plan, z, outputs)
    b, abort_b = _wrapper_log_pmf(mech, plan, z2, outputs)
    assert abort_a == abort_b <= (1 / 6) / 2  # the abort atom is the same on both sides
    worst = np.max(np.abs(a - b))
    assert worst <= eps + 1e-12
    # conditional on the index draw the loss is c_0 * eps/k <= k * eps/k: attained at c_0 = k
    assert 3 * plan.inner_epsilon == pytest.approx(eps)

    control = ResampledERM(inner=_Geometric(), failure_probability=1 / 6, fallback=[-50.0])
    cplan = control.plan(n=6, d=1, center=None, diameter=1.0, epsilon=eps, delta=0.0)
    cplan = type(cplan)(  # the inner at the full epsilon instead of epsilon/k
        guarantee=cplan.guarantee,
        inner=_Geometric().plan(n=6, d=1, center=None, diameter=1.0, epsilon=eps, delta=0.0),
        n=6,
        cap=cplan.cap,
        inner_epsilon=eps,
        fallback=cplan.fallback,
        detail=cplan.detail,
    )
    ca, _ = _wrapper_log_pmf(control, cplan, z, outputs)
    cb, _ = _wrapper_log_pmf(control, cplan, z2, outputs)
    assert np.max(np.abs(ca - cb)) > eps + 0.2


def test_release_reads_the_resampled_rows_and_reports_the_draw():
    mech = ResampledERM(inner=_Geometric(), failure_probability=0.4, fallback=[0.0])
    plan = mech.plan(n=8, d=1, center=None, diameter=1.0, epsilon=1.0, delta=0.0)
    base = _Rows(np.arange(8.0))
    out = mech.release(plan, base, np.random.default_rng(3))
    idx = np.random.default_rng(3).integers(0, 8, size=8)  # the same draw
    top = int(np.bincount(idx, minlength=8).max())
    assert out.facts["resample_max_count"] == top
    if top <= plan.cap:
        assert out.facts["resample_aborted"] is False
        np.testing.assert_array_equal(base.seen[-1], idx)  # rows z_{idx_1}, ..., z_{idx_n}
    nested = _ResampledContext(base, idx)
    nested.loss_values(np.zeros((1, 1)), indices=[0, 2])
    np.testing.assert_array_equal(base.seen[-1], idx[[0, 2]])


def test_abort_branch_returns_the_public_point_at_the_exact_rate():
    """Spec B.5 T3: cap k = 1 forces aborts unless all n indices are distinct, which has
    probability n!/n^n exactly; an abort releases the projected fallback and reads no rows."""
    n = 5
    mech = ResampledERM(inner=_Geometric(), cap=1, fallback=[500.0])
    plan = mech.plan(n=n, d=1, center=None, diameter=1.0, epsilon=1.0, delta=0.0)
    rng = np.random.default_rng(11)
    runs, aborts = 3000, 0
    for _ in range(runs):
        base = _Rows(np.ones(n))
        out = mech.release(plan, base, rng)
        if out.facts["resample_aborted"]:
            aborts += 1
            assert out.w.tolist() == [100.0] and out.certificates == () and base.seen == []
    p = 1 - math.factorial(n) / n**n
    # seeded; 5 sigma: false-failure rate below 1e-6
    assert abs(aborts / runs - p) <= 5 * math.sqrt(p * (1 - p) / runs)
    assert plan.detail["abort_bound"] >= p - 1e-12


# ---------------------------------------------------------------- plan and cost accounting
def _problem(n: int = 30, seed: int = 0) -> dpcvx.Problem:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n, 1))
    w = cp.Variable(1)
    x = cp.Parameter(1)
    return dpcvx.Problem(x @ w, w, {x: X}, dpcvx.domains.box(w, -1.0, 1.0))


@pytest.mark.parametrize(
    "inner",
    [
        dpcvx.OutputPerturbation(lipschitz=1.0, regularization=1.0),
        IterativeLocalization(lipschitz=1.0, progress=False),
    ],
)
def test_plan_charges_the_group_privacy_cost(inner):
    eps, n, beta = 0.7, 400, 1e-3
    mech = ResampledERM(inner=inner, failure_probability=beta)
    plan = mech.plan(n=n, d=1, center=np.zeros(1), diameter=2.0, epsilon=eps, delta=0.0)
    k = resample_cap(n, beta)
    assert plan.cap == k
    assert Fraction(plan.inner_epsilon) * k <= Fraction(eps)
    assert plan.inner.guarantee.epsilon == plan.inner_epsilon  # the inner is planned at eps/k
    (event,) = plan.events("x")
    assert event.kind == "pure" and event.delta == 0.0
    inner_total = sum(Fraction(e.epsilon) for e in plan.inner.events("i"))
    assert Fraction(event.epsilon) >= k * inner_total  # rounded up, never below
    assert event.epsilon <= eps and event.epsilon == pytest.approx(eps, rel=1e-12)
    facts = plan.facts()
    assert facts["cap"] == k and facts["paper"].startswith("001 Prop 4")
    assert facts["abort_bound"] <= beta / 2 and "inner" in facts


def test_end_to_end_release_on_a_problem():
    problem = _problem()
    mech = ResampledERM(
        inner=dpcvx.OutputPerturbation(lipschitz=1.0, regularization=1.0),
        failure_probability=0.05,
    )
    res = problem.solve_private(mech, epsilon=1.0, rng=0)
    (event,) = res.ledger.events
    assert event.kind == "pure" and event.epsilon <= 1.0
    assert res.detail["cap"] == resample_cap(30, 0.05) and res.mechanism == "ResampledERM"
    assert res.detail["resample_aborted"] is False and -1.0 <= res.w[0] <= 1.0
    assert len(res.certificates) == 1


def test_end_to_end_abort_releases_the_domain_point():
    problem = _problem(n=12)
    mech = ResampledERM(
        inner=dpcvx.OutputPerturbation(lipschitz=1.0, regularization=1.0), cap=1, fallback=[3.0]
    )
    for seed in range(20):
        res = problem.solve_private(mech, epsilon=1.0, rng=seed)
        if res.detail["resample_aborted"]:
            assert res.w.tolist() == [1.0] and res.certificates == ()  # Pi_W(3) = 1
            return
    pytest.fail("no abort in 20 seeded draws (probability 1 - 12!/12^12 > 0.99 each)")


def test_unaffordable_release_spends_nothing_and_touches_no_data(monkeypatch):
    import dpcvx.problem as problem_module

    touched = []
    monkeypatch.setattr(problem_module, "certified_solve", lambda *a, **k: touched.append(1))
    mech = ResampledERM(inner=dpcvx.OutputPerturbation(lipschitz=1.0, regularization=1.0))
    acct = dpcvx.Accountant(0.5)
    with pytest.raises(PrivacyBudgetError):
        _problem().solve_private(mech, epsilon=1.0, accountant=acct)
    assert not touched and acct.spent.epsilon == 0.0


# ---------------------------------------------------------------- bad input
_OP = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=1.0)


@dataclass(frozen=True, slots=True)
class _RowsInner:
    requirements: ClassVar[tuple[str, ...]] = ("rows",)
    extension: ClassVar[str] = "plain"
    enforces_lipschitz: ClassVar[bool] = False
    neighbors: ClassVar = REPLACE_ONE

    def plan(self, **kw: Any): ...

    def release(self, plan: Any, context: Any, rng: Any): ...


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"inner": "OutputPerturbation"}, "dpcvx mechanism"),
        ({"inner": ResampledERM(inner=_OP)}, "not a ResampledERM"),
        ({"inner": _RowsInner()}, "rows"),
        ({"inner": _OP, "failure_probability": 0.0}, "failure_probability"),
        ({"inner": _OP, "failure_probability": 1.0}, "failure_probability"),
        ({"inner": _OP, "failure_probability": math.nan}, "failure_probability"),
        ({"inner": _OP, "cap": 0}, "cap"),
        ({"inner": _OP, "cap": True}, "cap"),
        ({"inner": _OP, "cap": 2.5}, "cap"),
        ({"inner": _OP, "fallback": [[0.0]]}, "fallback"),
        ({"inner": _OP, "fallback": [math.nan]}, "fallback"),
    ],
)
def test_bad_construction_raises(kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        ResampledERM(**kwargs)


@pytest.mark.parametrize(
    "mech,kwargs,match",
    [
        (ResampledERM(inner=_OP), {"epsilon": 1.0, "delta": 1e-6}, "pure"),
        (ResampledERM(inner=_OP), {"epsilon": -1.0}, "epsilon"),
        (ResampledERM(inner=_OP), {"epsilon": math.inf}, "epsilon"),
        (ResampledERM(inner=_OP, fallback=[0.0, 0.0]), {"epsilon": 1.0}, "shape"),
        (ResampledERM(inner=_Geometric(kind="approx")), {"epsilon": 1.0}, "pure"),
        (ResampledERM(inner=_Geometric(overspend=1.5)), {"epsilon": 1.0}, "share"),
    ],
)
def test_bad_requests_raise_before_anything_is_spent(mech, kwargs, match):
    acct = dpcvx.Accountant(10.0, 0.5)
    with pytest.raises(InvalidParameterError, match=match):
        _problem().solve_private(mech, accountant=acct, **kwargs)
    assert acct.spent.epsilon == 0.0 and acct.spent.delta == 0.0


def test_plan_without_a_domain_needs_a_fallback_and_helpers_validate():
    with pytest.raises(InvalidParameterError, match="fallback"):
        ResampledERM(inner=_Geometric()).plan(
            n=5, d=1, center=None, diameter=1.0, epsilon=1.0, delta=0.0
        )
    for bad in (0, -3, 2.0, True):
        with pytest.raises(InvalidParameterError, match="n"):
            resample_cap(bad, 0.1)
    with pytest.raises(InvalidParameterError, match="failure_probability"):
        resample_cap(10, 1.5)
    with pytest.raises(InvalidParameterError, match="cap"):
        abort_bound(10, -1)
    with pytest.raises(InvalidParameterError, match="base"):
        paper_cap(0.1, "decimal")
