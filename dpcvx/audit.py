"""Empirical privacy audits: a lower bound on a mechanism's epsilon from seeded releases.

An audit runs a mechanism many times on two neighboring datasets ``Z`` and ``Z'``, reduces
every released point to a scalar test statistic ``T``, and looks at threshold events
``{T >= t}`` and ``{T < t}``. A pure epsilon-DP mechanism satisfies
``P_Z(S) <= e^epsilon P_Z'(S)`` for every event ``S`` and both orders of the pair, so

    epsilon >= log(P_Z(S) / P_Z'(S)),   and for (epsilon, delta)-DP
    epsilon >= log((P_Z(S) - delta) / P_Z'(S)).

The probabilities are replaced by Clopper-Pearson bounds (the lower one in the numerator, the
upper one in the denominator). With ``m`` thresholds there are ``4 m`` intervals (two events,
two datasets); each is computed at level ``alpha / (4 m)`` (Bonferroni), so with probability at
least ``1 - alpha`` all of them hold at once and then every ratio is a valid lower bound. The
reported bound is the largest (floored at 0). **An audit can only refute a claim**: a bound above
the claimed epsilon is evidence of a privacy bug (or a false alarm of probability at most
``alpha``); a bound below it proves nothing about the mechanism on other pairs.

What is here:

- the statistics: :func:`clopper_pearson`, :func:`threshold_tests`, :func:`epsilon_lower_bound`
  and, for mechanisms whose output distribution can be computed exactly,
  :func:`exact_epsilon`;
- :func:`audit`: the seeded sampling audit of a dpcvx mechanism on two
  :class:`~dpcvx.Problem` objects (or of any ``release(dataset, rng)`` callable), returning an
  :class:`AuditResult`; :func:`audit_exact` for mechanisms with an exact ``distribution``
  helper (:class:`~dpcvx.ProjectedGradientExponentialMechanism`);
- :func:`negative_control`: a mechanism whose noise is calibrated to ``factor`` times the
  epsilon it is charged (an audit with power must catch it);
- a catalogue of worst-case neighboring pairs, one per mechanism (:func:`audit_cases`,
  :func:`worst_case_pair`), and :func:`audit_mechanism`, which audits a named mechanism and its
  negative control on its pair (what ``dpcvx audit`` runs).

Every audit is seeded (an ``int``) and reproducible: the same seed gives the same releases,
bound and intervals. The certified solves behind a release are deterministic functions of the
data and the public plan, so the audit computes each one once per dataset and reuses it
(memoized), and redraws everything random (noise, localization, partitions, net samples) for
every release through the mechanism's own code path (:func:`dpcvx.problem.release`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
from scipy.stats import beta

from dpcvx._progress import progress_bar
from dpcvx._validation import check_delta, check_positive
from dpcvx.errors import CertificationError, InvalidParameterError, SolverError
from dpcvx.mechanisms.noise import NoiseSpec, calibrate
from dpcvx.mechanisms.registry import REGISTRY, WorstCasePair
from dpcvx.neighbors import REPLACE_ONE, NeighborRelation
from dpcvx.types import Sensitivity

__all__ = [
    "AuditCase",
    "AuditResult",
    "MechanismAudit",
    "NegativeControl",
    "ThresholdTest",
    "audit",
    "audit_case",
    "audit_cases",
    "audit_exact",
    "audit_mechanism",
    "clopper_pearson",
    "epsilon_lower_bound",
    "exact_epsilon",
    "negative_control",
    "threshold_tests",
    "worst_case_pair",
]

#: default total level of the simultaneous Clopper-Pearson intervals (confidence 99.9%)
DEFAULT_ALPHA = 1e-3
#: pooled quantiles of the pilot releases used as thresholds when none are given
PILOT_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


# ============================================================================ statistics
def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Two-sided ``(1 - alpha)`` Clopper-Pearson interval for a binomial proportion.

    Parameters
    ----------
    k : int
        Number of successes, ``0 <= k <= n``.
    n : int
        Number of trials, ``n >= 1``.
    alpha : float
        Total level of the interval, in ``(0, 1)``.

    Returns
    -------
    (lower, upper) : tuple of float
        Exact (conservative) bounds: ``P(p < lower) <= alpha / 2`` and
        ``P(p > upper) <= alpha / 2`` whatever the true proportion ``p``.
    """
    lo = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


@dataclass(frozen=True, slots=True, kw_only=True)
class ThresholdTest:
    """One threshold test: ``epsilon >= log((lower_num - delta) / upper_den)``.

    Attributes
    ----------
    threshold : float
        ``t``.
    event : {">=", "<"}
        The event ``{T >= t}`` or ``{T < t}``.
    numerator : {0, 1}
        Which dataset's probability is in the numerator (0: the first of the pair).
    counts : tuple of int
        ``(k_numerator, k_denominator)``: releases in the event on each side.
    runs : tuple of int
        ``(n_numerator, n_denominator)``: releases on each side.
    interval_numerator, interval_denominator : tuple of float
        The Clopper-Pearson intervals (each at the Bonferroni level ``alpha / (4 m)``).
    bound : float
        ``log((interval_numerator[0] - delta) / interval_denominator[1])``; ``-inf`` when the
        numerator's lower bound does not exceed ``delta`` (the test says nothing).
    """

    threshold: float
    event: str
    numerator: int
    counts: tuple[int, int]
    runs: tuple[int, int]
    interval_numerator: tuple[float, float]
    interval_denominator: tuple[float, float]
    bound: float

    def __str__(self) -> str:
        num, den = self.numerator, 1 - self.numerator
        lo, _ = self.interval_numerator
        _, hi = self.interval_denominator
        return (
            f"P{num}(T {self.event} {self.threshold:.4g}) >= {lo:.4g} "
            f"({self.counts[0]}/{self.runs[0]}) vs P{den}(T {self.event} "
            f"{self.threshold:.4g}) <= {hi:.4g} ({self.counts[1]}/{self.runs[1]}): "
            f"epsilon >= {self.bound:.4g}"
        )


def _check_level(alpha: object, owner: str) -> float:
    a = check_positive(alpha, "alpha", owner)
    if not a < 1.0:
        raise InvalidParameterError(
            f"The `alpha` parameter of `{owner}` is the total error level of the intervals and "
            f"must lie in (0, 1). Got {alpha!r}. Use e.g. 1e-3 (99.9% confidence)."
        )
    return a


def _check_thresholds(thresholds: object, owner: str) -> tuple[float, ...]:
    try:
        values = tuple(float(t) for t in thresholds)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"The `thresholds` of `{owner}` must be a non-empty sequence of finite numbers. "
            f"Got {thresholds!r}."
        ) from None
    if not values or not all(math.isfinite(t) for t in values):
        raise InvalidParameterError(
            f"The `thresholds` of `{owner}` must be a non-empty sequence of finite numbers. "
            f"Got {thresholds!r}."
        )
    return values


def threshold_tests(
    out0, out1, thresholds, alpha: float, delta: float = 0.0
) -> tuple[ThresholdTest, ...]:
    """Every threshold test on two samples of the statistic, with simultaneous intervals.

    Parameters
    ----------
    out0, out1 : array-like of float
        The statistic of independent releases on the first and the second dataset.
    thresholds : sequence of float
        The ``m`` thresholds ``t`` (fixed before the samples were drawn).
    alpha : float
        Total level: all ``4 m`` Clopper-Pearson intervals hold at once with probability at
        least ``1 - alpha`` (each is computed at level ``alpha / (4 m)``).
    delta : float
        The mechanism's claimed ``delta`` (0 for pure DP).

    Returns
    -------
    tuple of ThresholdTest
        ``4 m`` tests: for each threshold, both events, both orders of the pair.
    """
    owner = "threshold_tests"
    thresholds = _check_thresholds(thresholds, owner)
    a = _check_level(alpha, owner) / (4 * len(thresholds))
    delta = check_delta(delta, owner)
    o0 = np.asarray(out0, float).reshape(-1)
    o1 = np.asarray(out1, float).reshape(-1)
    if o0.size == 0 or o1.size == 0:
        raise InvalidParameterError(
            f"`{owner}` needs at least one release on each dataset. Got {o0.size} and {o1.size}."
        )
    n0, n1 = o0.size, o1.size
    tests = []
    for t in thresholds:
        for event, k0, k1 in (
            (">=", int((o0 >= t).sum()), int((o1 >= t).sum())),
            ("<", int((o0 < t).sum()), int((o1 < t).sum())),
        ):
            ci0, ci1 = clopper_pearson(k0, n0, a), clopper_pearson(k1, n1, a)
            for numerator, (kn, nn, cin), (kd, nd, cid) in (
                (0, (k0, n0, ci0), (k1, n1, ci1)),
                (1, (k1, n1, ci1), (k0, n0, ci0)),
            ):
                top, bottom = cin[0] - delta, cid[1]
                bound = math.log(top / bottom) if top > 0 and bottom > 0 else -math.inf
                tests.append(
                    ThresholdTest(
                        threshold=t,
                        event=event,
                        numerator=numerator,
                        counts=(kn, kd),
                        runs=(nn, nd),
                        interval_numerator=cin,
                        interval_denominator=cid,
                        bound=bound,
                    )
                )
    return tuple(tests)


def epsilon_lower_bound(out0, out1, thresholds, alpha: float, delta: float = 0.0) -> float:
    """A ``(1 - alpha)``-confidence lower bound on epsilon from threshold events.

    The largest bound of :func:`threshold_tests` (events ``{T >= t}`` and ``{T < t}`` in both
    directions, Bonferroni over all ``4 len(thresholds)`` intervals), floored at 0.

    Parameters
    ----------
    out0, out1 : array-like of float
        The statistic of independent releases on each dataset.
    thresholds : sequence of float
        Thresholds fixed independently of these samples.
    alpha : float
        Total level (the false-alarm probability for a truly epsilon-DP mechanism).
    delta : float
        The mechanism's ``delta`` (0: pure DP).

    Returns
    -------
    float
    """
    tests = threshold_tests(out0, out1, thresholds, alpha, delta)
    return max(0.0, max(t.bound for t in tests))


def exact_epsilon(log_p0, log_p1) -> float:
    """The exact epsilon of a pair of discrete output distributions on the same support:
    ``max_w |log P0(w) - log P1(w)|`` (for pure DP the worst event is a single point).

    Parameters
    ----------
    log_p0, log_p1 : array-like of float
        Natural-log probabilities of the same points (``-inf`` for mass zero).

    Returns
    -------
    float
        ``inf`` when one distribution puts mass where the other puts none.
    """
    a = np.asarray(log_p0, float).reshape(-1)
    b = np.asarray(log_p1, float).reshape(-1)
    if a.shape != b.shape:
        raise InvalidParameterError(
            f"`exact_epsilon` needs log-probabilities of the same points. Got shapes "
            f"{a.shape} and {b.shape}."
        )
    both_zero = np.isneginf(a) & np.isneginf(b)
    one_zero = np.isneginf(a) ^ np.isneginf(b)
    if np.any(one_zero):
        return math.inf
    keep = ~both_zero
    if not np.any(keep):
        return 0.0
    return float(np.max(np.abs(a[keep] - b[keep])))


# ============================================================================ results
@dataclass(frozen=True, slots=True, kw_only=True)
class AuditResult:
    """The outcome of one audit of one mechanism on one neighboring pair.

    Attributes
    ----------
    label : str
        What was audited.
    method : {"sampled", "exact"}
        Seeded releases with threshold tests, or the exact output distributions.
    epsilon, delta : float
        The guarantee the mechanism claims (what it is charged in the ledger).
    lower_bound : float
        The empirical lower bound on epsilon (``>= 0``); exact for ``method="exact"``.
    alpha : float
        Total level of the simultaneous intervals (0 for the exact method).
    runs : int
        Releases per dataset used by the tests (0 for the exact method).
    pilot_runs : int
        Extra releases per dataset, from separate seed streams, that chose the thresholds
        (0 when the thresholds were given).
    seed : int or None
        The seed of every release (None for the exact method).
    thresholds : tuple of float
    tests : tuple of ThresholdTest
        Every threshold test (empty for the exact method).
    best : ThresholdTest or None
        The test that gave ``lower_bound`` (None for the exact method).
    seconds : float
        Wall time of the audit.
    detail : mapping
        Method-specific extras (sampled: ``"mean"``, the mean statistic on each dataset;
        exact: ``"points"``, the net size, and ``"argmax"``, the point of largest log-ratio).
    """

    label: str
    method: str
    epsilon: float
    delta: float
    lower_bound: float
    alpha: float
    runs: int
    pilot_runs: int
    seed: int | None
    thresholds: tuple[float, ...]
    tests: tuple[ThresholdTest, ...]
    best: ThresholdTest | None
    seconds: float
    detail: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def confidence(self) -> float:
        """``1 - alpha``."""
        return 1.0 - self.alpha

    @property
    def passed(self) -> bool:
        """Whether the claim survived: ``lower_bound <= epsilon``."""
        return self.lower_bound <= self.epsilon

    def __str__(self) -> str:
        claim = f"epsilon = {self.epsilon:g}" + (f", delta = {self.delta:g}" if self.delta else "")
        verdict = "consistent with" if self.passed else "VIOLATES"
        if self.method == "exact":
            head = (
                f"{self.label}: exact epsilon of the pair {self.lower_bound:.4g} "
                f"({verdict} the claimed {claim})"
            )
            net = self.detail.get("points")
            where = self.detail.get("argmax")
            extra = f"  max over the {net} net points of |log P0(w) - log P1(w)|"
            if where is not None:
                extra += f", attained at w = {where}"
            return head + "\n" + extra + f"  ({self.seconds:.2f} s)"
        head = (
            f"{self.label}: epsilon >= {self.lower_bound:.4g} with "
            f"{100 * self.confidence:.4g}% confidence ({verdict} the claimed {claim})"
        )
        lines = [
            head,
            (
                f"  {self.runs} seeded releases per dataset (seed {self.seed}"
                + (f", thresholds from {self.pilot_runs} pilot releases" if self.pilot_runs else "")
                + f"), {len(self.thresholds)} threshold{'' if len(self.thresholds) == 1 else 's'}, "
                f"Clopper-Pearson with Bonferroni over "
                f"{4 * len(self.thresholds)} intervals  ({self.seconds:.2f} s)"
            ),
        ]
        if self.best is not None and math.isfinite(self.best.bound):
            lines.append(f"  best test: {self.best}")
        else:
            lines.append("  no test had enough events to bound epsilon above 0")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True, kw_only=True)
class MechanismAudit:
    """A mechanism's audit and its negative control's, on the same worst-case pair.

    Attributes
    ----------
    name : str
        The catalogue name (see :func:`audit_cases`).
    description : str
        The pair and the configuration.
    mechanism : AuditResult
        The correct mechanism: its bound must not exceed ``epsilon``.
    control : AuditResult
        The negative control (noise calibrated to ``control_factor * epsilon``, charged
        ``epsilon``): its bound must exceed ``epsilon``.
    control_factor : float
    """

    name: str
    description: str
    mechanism: AuditResult
    control: AuditResult
    control_factor: float

    @property
    def passed(self) -> bool:
        """The correct mechanism's bound is at most its epsilon."""
        return self.mechanism.passed

    @property
    def caught(self) -> bool:
        """The control's bound exceeds the epsilon it is charged."""
        return not self.control.passed

    @property
    def ok(self) -> bool:
        """Both: the audit passes the mechanism and has the power to catch the control."""
        return self.passed and self.caught

    def __str__(self) -> str:
        m, c = self.mechanism, self.control
        lines = [
            f"audit of {self.name} (epsilon = {m.epsilon:g})",
            f"  pair: {self.description}",
            "  " + str(m).replace("\n", "\n  "),
            "  " + str(c).replace("\n", "\n  "),
        ]
        if self.ok:
            verdict = (
                f"OK: bound {m.lower_bound:.4g} <= epsilon = {m.epsilon:g} for the "
                f"mechanism; the control is caught ({c.lower_bound:.4g} > "
                f"{c.epsilon:g})"
            )
        elif not self.passed:
            verdict = (
                f"FAILED: the mechanism's empirical bound {m.lower_bound:.4g} exceeds "
                f"its epsilon = {m.epsilon:g}: a privacy bug, or a false alarm of "
                f"probability at most alpha = {m.alpha:g}"
            )
        else:
            verdict = (
                f"FAILED: the audit missed the negative control ({c.lower_bound:.4g} "
                f"<= {c.epsilon:g}): too few runs for power; raise `runs`"
            )
        lines.append(verdict)
        return "\n".join(lines)


# ============================================================================ negative controls
def _scaled(value, factor: float):
    """``(new, changed)``: ``value`` with every noise calibrated to ``factor`` times its
    epsilon (recursing into plans, phases and blocks)."""
    if isinstance(value, NoiseSpec):
        gaussian = value.calibration if value.kind == "gaussian" else "analytic"
        return calibrate(
            value.sensitivity,
            factor * value.epsilon,
            value.delta,
            norm=value.norm,
            gaussian=gaussian,
        ), True
    if isinstance(value, tuple):
        pairs = [_scaled(v, factor) for v in value]
        if any(changed for _, changed in pairs):
            return tuple(v for v, _ in pairs), True
        return value, False
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if f.name.endswith("scale") and isinstance(item, float):
                changes[f.name] = item / factor  # a noise scale: Laplace scale or sigma
            elif f.name.endswith("_epsilon") and isinstance(item, float):
                changes[f.name] = item * factor  # a stage's own budget
            else:
                new, changed = _scaled(item, factor)
                if changed:
                    changes[f.name] = new
        if not changes and isinstance(getattr(value, "sensitivity", None), Sensitivity):
            # an exponential mechanism: its coefficient is epsilon / (2 sensitivity)
            g = value.guarantee  # type: ignore[attr-defined]
            changes["guarantee"] = dataclasses.replace(g, epsilon=factor * g.epsilon)
        if changes:
            return dataclasses.replace(value, **changes), True
    return value, False


class _ControlPlan:
    """A negative control's plan: the louder plan for the release, the mechanism's own events
    for the ledger (the control is charged what the mechanism is charged)."""

    __slots__ = ("_charged", "_louder")

    def __init__(self, louder, charged) -> None:
        self._louder, self._charged = louder, charged

    def __getattr__(self, name: str):
        if name in self.__slots__:
            raise AttributeError(name)
        return getattr(self._louder, name)

    def events(self, label: str):
        """The mechanism's events (what the control is charged)."""
        return self._charged.events(label)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ControlPlan) and other._louder == self._louder

    __hash__ = None  # type: ignore[assignment]


class NegativeControl:
    """A mechanism whose noise is calibrated to ``factor * epsilon`` while it is charged
    ``epsilon``: a deliberately broken copy that an audit with power must catch.

    Built by :func:`negative_control`. It plans exactly like ``mechanism``, then recalibrates
    every noise of the plan (each stage's, each phase's and block's; the exponential
    mechanism's coefficient) to ``factor`` times the epsilon it was calibrated to
    (:func:`dataclasses.replace`, as the mechanism tests do); every other attribute is the
    mechanism's. **Not private**: for audits only.
    """

    __slots__ = ("_last", "factor", "mechanism")

    def __init__(self, mechanism, factor: float) -> None:
        self.mechanism = mechanism
        self.factor = factor
        self._last: tuple | None = None  # (key, plan) of the last planning

    def __getattr__(self, name: str):
        if name in self.__slots__:  # not yet set (copy, pickle)
            raise AttributeError(name)
        return getattr(self.mechanism, name)

    def plan(self, **kwargs):
        """The mechanism's plan with every noise recalibrated to ``factor`` times its
        epsilon (the last one is reused for identical public inputs: plans are immutable
        functions of them)."""
        key = tuple(
            sorted(
                (
                    k,
                    _key(v)
                    if isinstance(v, np.ndarray)
                    else v
                    if isinstance(v, (int, float, str, type(None)))
                    else id(v),
                )
                for k, v in kwargs.items()
            )
        )
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        plan = self.mechanism.plan(**kwargs)
        louder, changed = _scaled(plan, self.factor)
        if not changed:
            raise InvalidParameterError(
                f"`negative_control` found no noise to recalibrate in the plan of "
                f"{type(self.mechanism).__name__} (a {type(plan).__name__}). It supports "
                "plans holding NoiseSpec fields (possibly in phases or blocks) and the "
                "exponential mechanism's plan; write the control by hand with "
                "dataclasses.replace on the plan."
            )
        control = _ControlPlan(louder, plan)
        self._last = (key, control)
        return control

    def __repr__(self) -> str:
        return f"NegativeControl({self.mechanism!r}, factor={self.factor:g})"


def negative_control(mechanism, factor: float) -> NegativeControl:
    """A copy of ``mechanism`` whose noise is calibrated to ``factor * epsilon`` but which is
    charged ``epsilon``.

    Parameters
    ----------
    mechanism : dpcvx mechanism
        :class:`~dpcvx.OutputPerturbation`, :class:`~dpcvx.OutputPertLocalize`,
        :class:`~dpcvx.DoubleOutputPerturbation`,
        :class:`~dpcvx.LocalizedDoubleOutputPerturbation`,
        :class:`~dpcvx.ProjectedGradientExponentialMechanism`, or any mechanism whose plan
        holds its noise as ``NoiseSpec`` fields.
    factor : float
        ``> 1``. The control's true epsilon on a worst-case pair is up to ``factor`` times
        the claim; how much of it a pair reveals depends on the mechanism (e.g. Double-
        OutputPert's first stage moves only its localization ball).

    Returns
    -------
    NegativeControl
        Use it wherever the mechanism is used: ``audit(negative_control(mech, 4), ...)``.
    """
    factor = check_positive(factor, "factor", "negative_control")
    if factor <= 1.0:
        raise InvalidParameterError(
            f"The `factor` of `negative_control` must exceed 1 (the control must spend more "
            f"than it is charged). Got {factor!r}."
        )
    if not (hasattr(mechanism, "plan") and hasattr(mechanism, "release")):
        raise InvalidParameterError(
            f"`negative_control` needs a dpcvx mechanism (with `plan` and `release`). Got "
            f"{type(mechanism).__name__}."
        )
    return NegativeControl(mechanism, factor)


# ============================================================================ releases
def _key(array) -> bytes:
    a = np.ascontiguousarray(np.asarray(array, float))
    return repr(a.shape).encode() + a.tobytes()


class _MemoizedContext:
    """A :class:`~dpcvx.problem.ReleaseContext` whose deterministic calls are memoized:
    certified solves over the whole domain (keyed by examples, ``C``, ``lam``, ``w0`` and
    ``alpha``) and loss values. Localized solves (their ball is random) are not cached.

    With a ``partner`` (the same context on the neighboring dataset: an adversarial-but-valid
    solver), a certified solve over the whole domain on all examples returns its point moved
    away from the partner's point, as far as the certificate still allows: the moved point
    stays in the domain and its objective, bounded above independently (the loss values, or
    the Lipschitz extension's certified upper values), stays within ``alpha`` of the
    certificate's own lower bound on the optimum. The mechanism then sees a valid
    ``alpha``-accurate solve at the worst place, which exercises the ``2 sqrt(2 alpha / lam)``
    part of the sensitivity."""

    def __init__(self, context, problem=None, partner: Callable[[], Any] | None = None) -> None:
        self._context = context
        self._solvers: dict = {}
        self._values: dict = {}
        self._exact: dict = {}
        self._problem = problem
        self._partner = partner

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._context, name)

    def exact(self, indices, C, lam, w0, alpha):
        """The memoized certified solve, never moved."""
        key = (None if indices is None else _key(indices), C, float(lam), _key(w0), float(alpha))
        if key not in self._exact:
            self._exact[key] = self._context.solver(indices=indices, C=C)(lam, w0, alpha)
        return self._exact[key]

    def solver(self, indices=None, C: float | None = None):
        key = (None if indices is None else _key(indices), C)
        if key not in self._solvers:
            inner = self._context.solver(indices=indices, C=C)
            cache: dict = {}
            pushed = self._partner is not None and indices is None and self._problem is not None
            extension = C if C is not None else getattr(self._context, "extension", None)

            def solve(lam, w0, alpha, localize=None, candidate=None):
                if localize is not None:
                    return inner(lam, w0, alpha, localize=localize, candidate=candidate)
                k = (float(lam), _key(w0), float(alpha))
                if k not in cache:
                    cert = self.exact(indices, C, lam, w0, alpha)
                    if pushed:
                        other = self._partner().exact(indices, C, lam, w0, alpha)  # type: ignore[misc]
                        cert = self._pushed(
                            cert, other.w, float(lam), np.asarray(w0, float), alpha, extension
                        )
                    cache[k] = cert
                return cache[k]

            self._solvers[key] = solve
        return self._solvers[key]

    def _objective(self, w: np.ndarray, lam: float, w0: np.ndarray, extension) -> float:
        """An upper bound on the solved objective at ``w`` (independent of the solver)."""
        if extension is None:
            values = self._context.loss_values(w[None, :])[0]
        else:
            from dpcvx.problem import LipschitzExtension

            values = LipschitzExtension(self._problem, extension).evaluate(w).upper
        return float(np.mean(values)) + 0.5 * lam * float(np.sum((w - w0) ** 2))

    def _pushed(self, cert, away: np.ndarray, lam: float, w0: np.ndarray, alpha: float, extension):
        """``cert`` with its point moved away from ``away`` as far as it stays certified."""
        from dpcvx.certification.solve import universe_indices

        decl = self._problem.declared
        if decl is None or lam <= 0:
            return cert
        if extension is not None and universe_indices(decl, extension) is not None:
            return cert  # some examples sit outside the universe: the objective differs
        domain = self._context.domain
        target = alpha * (1.0 - 1e-6)  # room for the float evaluation of the objective
        step = cert.w - np.asarray(away, float)
        norm = float(np.linalg.norm(step))
        if not norm > 0:
            return cert
        direction = step / norm

        def fits(t: float) -> bool:
            w = cert.w + t * direction
            return (
                domain.contains(w) and self._objective(w, lam, w0, extension) - cert.lower <= target
            )

        lo, hi = 0.0, math.sqrt(2.0 * alpha / lam)  # no alpha-accurate point lies further
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        if lo == 0.0:
            return cert
        w = cert.w + lo * direction
        gap = self._objective(w, lam, w0, extension) - cert.lower
        return dataclasses.replace(cert, w=w, gap=max(gap, 0.0), upper=cert.lower + max(gap, 0.0))

    def loss_values(self, points, indices=None):
        key = (_key(points), None if indices is None else _key(indices))
        if key not in self._values:
            self._values[key] = self._context.loss_values(points, indices=indices)
        return self._values[key]


class _MemoizedSource:
    """A release source (see :func:`dpcvx.problem.release`) over a Problem, handing out one
    memoized context per ``(extension, solver, base)``."""

    def __init__(self, problem) -> None:
        self._problem = problem
        self.partner: _MemoizedSource | None = None  # the neighboring dataset's source
        self.n, self.d = problem.n, problem.d
        self.diameter = problem.diameter
        self.domain = problem.domain
        self.declared = problem.declared
        self.neighbors = problem.neighbors
        self._contexts: dict = {}
        self._removed: dict = {}
        if hasattr(problem, "quadratic_removed"):  # as the pipeline finds it on the Problem
            self.quadratic_removed = self._quadratic_removed
        if hasattr(problem, "public_quadratic_removed"):
            self.public_quadratic_removed = self._public_quadratic_removed
        self._public: list = []  # the memoized answer of public_quadratic_removed, once asked

    def _quadratic_removed(self, mu: float, center) -> _MemoizedSource:
        """The memoized source of ``problem.quadratic_removed(mu, center)`` (a strongly convex
        claim enforced on the loss minus its quadratic), paired with the partner's."""
        key = (float(mu), tuple(np.asarray(center, float).tolist()))
        if key not in self._removed:
            derived = _MemoizedSource(self._problem.quadratic_removed(mu, center))
            self._removed[key] = derived
            if self.partner is not None:
                other = self.partner._quadratic_removed(mu, center)
                derived.partner, other.partner = other, derived
        return self._removed[key]

    def _public_quadratic_removed(self) -> tuple[_MemoizedSource, float, np.ndarray] | None:
        """The memoized ``problem.public_quadratic_removed()`` (squared terms that read no data
        added to every solve, the claim enforced on the rest), its source paired with the
        partner's, as the pipeline finds it on the Problem."""
        if not self._public:
            found = self._problem.public_quadratic_removed()
            if found is not None:
                found = (_MemoizedSource(found[0]), found[1], found[2])
            self._public.append(found)  # before the partner asks back
            other = None if self.partner is None else self.partner._public_quadratic_removed()
            if found is not None and other is not None and found[0].partner is None:
                found[0].partner, other[0].partner = other[0], found[0]
        return self._public[0]

    def release_context(self, *, extension, solver, base: bool = False):
        key = (extension, solver, base)
        if key not in self._contexts:
            partner = self.partner
            self._contexts[key] = _MemoizedContext(
                self._problem.release_context(extension=extension, solver=solver, base=base),
                problem=self._problem if self.declared is not None else None,
                partner=None
                if partner is None
                else lambda: partner.release_context(extension=extension, solver=solver, base=base),
            )
        return self._contexts[key]


def _is_mechanism(obj) -> bool:
    return hasattr(obj, "plan") and hasattr(obj, "release")


def _releasers(mechanism, pair, epsilon: float, delta: float, adversarial: bool) -> list:
    """One ``rng -> released point`` per dataset of ``pair`` (see :func:`_releaser`); with
    ``adversarial``, each dataset's certified solves move away from the other's."""
    runs = [_releaser(mechanism, z, epsilon, delta) for z in pair]
    if adversarial:
        first, second = (run.source for run in runs)  # type: ignore[attr-defined]
        first.partner, second.partner = second, first
    return runs


def _releaser(mechanism, dataset, epsilon: float, delta: float) -> Callable:
    """``rng -> released point``: the full release path of ``problem.solve_private`` (plan,
    budget, release), with the deterministic solves memoized."""
    from dpcvx.pipeline import DataSource, release
    from dpcvx.problem import LipschitzExtension

    problem: Any
    if isinstance(dataset, LipschitzExtension):
        problem, extension = dataset.problem, dataset.C
    elif isinstance(dataset, DataSource):
        problem, extension = dataset, None
    else:
        raise InvalidParameterError(
            "To audit a dpcvx mechanism, each dataset must be a dpcvx data source (a "
            "Problem, a LipschitzExtension, a SaddleProblem, an ArraySource). Got "
            f"{type(dataset).__name__}. To audit anything else, pass a callable "
            "`release(dataset, rng) -> point` as `mechanism`."
        )
    source = _MemoizedSource(problem)

    def run(rng: np.random.Generator):
        return release(
            source,
            mechanism,
            epsilon=epsilon,
            delta=delta,
            rng=rng,
            accountant=None,
            extension=extension,
        ).w

    run.source = source  # type: ignore[attr-defined]
    return run


def _default_statistic(point) -> float:
    a = np.asarray(point, float)
    if a.size != 1:
        raise InvalidParameterError(
            f"The released point has {a.size} coordinates: pass a scalar `statistic`, e.g. "
            "`statistic=lambda w: w[0]` or the projection on the direction in which the two "
            "datasets pull the minimizer apart."
        )
    return float(a.reshape(-1)[0])


def _check_runs(runs: object, owner: str) -> int:
    if isinstance(runs, bool) or not isinstance(runs, numbers.Integral) or int(runs) < 1:
        raise InvalidParameterError(
            f"The `runs` parameter of `{owner}` must be a positive int (releases per "
            f"dataset). Got {runs!r}."
        )
    return int(runs)


def _check_seed(seed: object, owner: str) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or int(seed) < 0:
        raise InvalidParameterError(
            f"The `seed` parameter of `{owner}` must be a non-negative int: audits are "
            f"always seeded and reproducible. Got {seed!r}."
        )
    return int(seed)


def _check_pair(datasets: object, owner: str) -> tuple[Any, Any]:
    if (
        isinstance(datasets, (str, bytes))
        or not isinstance(datasets, Sequence)
        or len(datasets) != 2
    ):
        raise InvalidParameterError(
            f"The `datasets` of `{owner}` must be a pair (Z, Z') of neighboring datasets, "
            f"e.g. two dpcvx.Problem objects that differ in one example. Got "
            f"{type(datasets).__name__}."
        )
    return datasets[0], datasets[1]


#: the threshold of the event {the release aborted} (aborts are recorded as +inf)
ABORT_THRESHOLD = float(np.finfo(float).max)


def _sample(release_fns, generators, runs, statistic, bar) -> list[np.ndarray]:
    outs = []
    for release_fn, rng in zip(release_fns, generators):
        out = np.empty(runs)
        for i in range(runs):
            try:
                point = release_fn(rng)
            except (CertificationError, SolverError):
                # an abort is an output of the mechanism: it is recorded as +inf, so it falls
                # in every event {T >= t} and only there (a threshold at +inf, which the pilot
                # quantiles produce whenever aborts are common, isolates it)
                out[i] = math.inf
                bar.update(1)
                continue
            value = statistic(point)
            try:
                value = float(value)
            except (TypeError, ValueError):
                value = math.nan
            if not math.isfinite(value):
                raise InvalidParameterError(
                    f"The audit's `statistic` must return a finite real number for every "
                    f"release. Got {value!r}."
                )
            out[i] = value
            bar.update(1)
        outs.append(out)
    return outs


def audit(
    mechanism,
    datasets,
    *,
    epsilon: float,
    delta: float = 0.0,
    runs: int = 1000,
    thresholds: Sequence[float] | None = None,
    statistic: Callable[[np.ndarray], float] | None = None,
    alpha: float = DEFAULT_ALPHA,
    seed: int = 0,
    progress: bool = True,
    label: str | None = None,
    adversarial_solves: bool = True,
) -> AuditResult:
    """Empirical epsilon lower bound of a mechanism on a neighboring pair, from seeded
    releases.

    Parameters
    ----------
    mechanism : dpcvx mechanism or callable
        A dpcvx mechanism (``OutputPerturbation(...)``, a :func:`negative_control`, ...):
        every release runs the mechanism's own path of ``problem.solve_private(mechanism,
        epsilon=epsilon, delta=delta, rng=...)``, with the deterministic certified solves
        computed once per dataset. Or any callable ``release(dataset, rng) -> point`` (a
        factory of releases for data that are not dpcvx problems).
    datasets : pair
        ``(Z, Z')``: two neighboring datasets (for a dpcvx mechanism, two
        :class:`~dpcvx.Problem` objects that differ in one example). Worst-case pairs:
        :func:`worst_case_pair`.
    epsilon : float
        The claimed epsilon (passed to the release).
    delta : float
        The claimed delta (0: pure DP).
    runs : int
        Releases per dataset.
    thresholds : sequence of float, optional
        Thresholds of the events ``{T >= t}`` and ``{T < t}``. Default: pooled quantiles
        (5, 25, 50, 75, 95%) of ``max(50, runs // 5)`` pilot releases per dataset drawn from
        separate seed streams (the thresholds must not depend on the tested samples).
    statistic : callable, optional
        ``T(point) -> float``; default the point itself when it is one-dimensional.
    alpha : float
        Total level of the simultaneous Clopper-Pearson intervals: a truly
        (epsilon, delta)-DP mechanism gets a bound above ``epsilon`` with probability at most
        ``alpha``.
    seed : int
        Seeds every release (``numpy.random.SeedSequence(seed)``, spawned into one stream
        per dataset and per pilot); the same seed gives the same result.
    progress : bool
        Show a progress bar over the releases (only when standard error is a terminal).
    label : str, optional
        Name in the report (default: the mechanism's class name).
    adversarial_solves : bool
        For a dpcvx mechanism (default True): every certified solve over the whole domain
        returns, instead of the solver's near-exact point, a point moved away from the
        neighboring dataset's as far as the certificate still allows (still within the
        accuracy target ``alpha``), so the audit exercises the ``2 sqrt(2 alpha / lam)`` part of
        the sensitivity. False: the near-exact points (memoized).

    Returns
    -------
    AuditResult

    Raises
    ------
    InvalidParameterError
        On bad input (nothing is run).

    Examples
    --------
    >>> import dpcvx
    >>> from dpcvx.audit import audit, worst_case_pair
    >>> pair = worst_case_pair("output-perturbation")
    >>> mech = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=1.0)
    >>> result = audit(mech, pair, epsilon=1.0, runs=500, thresholds=[-0.1, 0.0, 0.1])
    >>> result.passed
    True
    """
    owner = "audit"
    epsilon = check_positive(epsilon, "epsilon", owner)
    delta = check_delta(delta, owner)
    runs = _check_runs(runs, owner)
    alpha = _check_level(alpha, owner)
    seed = _check_seed(seed, owner)
    if thresholds is not None:
        thresholds = _check_thresholds(thresholds, owner)
    if statistic is None:
        statistic = _default_statistic
    elif not callable(statistic):
        raise InvalidParameterError(
            f"The `statistic` of `{owner}` must be a callable `T(point) -> float`. Got "
            f"{type(statistic).__name__}."
        )
    z0, z1 = _check_pair(datasets, owner)
    if _is_mechanism(mechanism):
        fns = _releasers(mechanism, (z0, z1), epsilon, delta, adversarial_solves)
        name = (
            f"NegativeControl[{type(mechanism.mechanism).__name__} x {mechanism.factor:g}]"
            if isinstance(mechanism, NegativeControl)
            else type(mechanism).__name__
        )
    elif callable(mechanism):
        fns = [lambda rng, z=z: mechanism(z, rng) for z in (z0, z1)]
        name = getattr(mechanism, "__name__", type(mechanism).__name__)
    else:
        raise InvalidParameterError(
            f"The `mechanism` of `{owner}` must be a dpcvx mechanism or a callable "
            f"`release(dataset, rng) -> point`. Got {type(mechanism).__name__}."
        )
    label = name if label is None else str(label)
    streams = np.random.SeedSequence(seed).spawn(4)
    tested = [np.random.default_rng(s) for s in streams[:2]]
    pilot_runs = 0 if thresholds is not None else max(50, runs // 5)
    start = time.perf_counter()
    with progress_bar(
        total=2 * (runs + pilot_runs), desc=f"audit {label}", unit="release", enabled=progress
    ) as bar:
        if thresholds is None:
            pilot = _sample(
                fns, [np.random.default_rng(s) for s in streams[2:]], pilot_runs, statistic, bar
            )
            pooled = np.concatenate(pilot)
            pooled = pooled[np.isfinite(pooled)] if np.any(np.isfinite(pooled)) else np.zeros(1)
            thresholds = tuple(float(v) for v in np.unique(np.quantile(pooled, PILOT_QUANTILES)))
        # the event {abort} (recorded as +inf) is always one of the tests
        thresholds = tuple(thresholds) + (ABORT_THRESHOLD,)
        out0, out1 = _sample(fns, tested, runs, statistic, bar)
    tests = threshold_tests(out0, out1, thresholds, alpha, delta)
    best = max(tests, key=lambda t: t.bound)
    return AuditResult(
        label=label,
        method="sampled",
        epsilon=epsilon,
        delta=delta,
        lower_bound=max(0.0, best.bound),
        alpha=alpha,
        runs=runs,
        pilot_runs=pilot_runs,
        seed=seed,
        thresholds=tuple(thresholds),
        tests=tests,
        best=best,
        seconds=time.perf_counter() - start,
        detail=MappingProxyType(
            {
                "mean": tuple(
                    float(np.mean(o[np.isfinite(o)])) if np.any(np.isfinite(o)) else math.nan
                    for o in (out0, out1)
                ),
                "aborts": (int(np.sum(np.isinf(out0))), int(np.sum(np.isinf(out1)))),
            }
        ),
    )


def audit_exact(mechanism, datasets, *, epsilon: float, label: str | None = None) -> AuditResult:
    """The exact epsilon of a mechanism with a ``distribution`` helper on a neighboring pair.

    For :class:`~dpcvx.ProjectedGradientExponentialMechanism` (or its
    :func:`negative_control`): both output distributions over the public net are computed
    exactly and compared point by point (no sampling, no confidence level).

    Parameters
    ----------
    mechanism : ProjectedGradientExponentialMechanism or NegativeControl of one
    datasets : pair of dpcvx.Problem
        Neighboring datasets on the same domain (hence the same net).
    epsilon : float
        The claimed epsilon.
    label : str, optional

    Returns
    -------
    AuditResult
        ``method="exact"``; ``lower_bound`` is the pair's exact epsilon.
    """
    owner = "audit_exact"
    epsilon = check_positive(epsilon, "epsilon", owner)
    z0, z1 = _check_pair(datasets, owner)
    if not (_is_mechanism(mechanism) and hasattr(mechanism, "distribution")):
        raise InvalidParameterError(
            f"`{owner}` needs a mechanism with an exact `distribution(plan, context)` helper "
            f"(ProjectedGradientExponentialMechanism). Got {type(mechanism).__name__}; use "
            "`audit` (sampled) instead."
        )
    start = time.perf_counter()
    dists = []
    for z in (z0, z1):
        plan = mechanism.plan(
            n=z.n,
            d=z.d,
            center=z.domain.center,
            diameter=z.diameter,
            epsilon=epsilon,
            delta=0.0,
            domain=z.domain,
        )
        context = z.release_context(extension=None, solver=None)
        dists.append(mechanism.distribution(plan, context))
    p, q = dists
    if p.points.shape != q.points.shape or not np.array_equal(p.points, q.points):
        raise InvalidParameterError(
            f"`{owner}` compares the two output distributions point by point: both datasets "
            "must have the same public domain (hence the same net). Build both problems with "
            "the same domain."
        )
    value = exact_epsilon(p.log_probabilities, q.log_probabilities)
    diff = np.abs(p.log_probabilities - q.log_probabilities)
    where = tuple(round(float(v), 6) for v in p.points[int(np.nanargmax(diff))])
    if isinstance(mechanism, NegativeControl):
        name = f"NegativeControl[{type(mechanism.mechanism).__name__} x {mechanism.factor:g}]"
    else:
        name = type(mechanism).__name__
    return AuditResult(
        label=name if label is None else str(label),
        method="exact",
        epsilon=epsilon,
        delta=0.0,
        lower_bound=value,
        alpha=0.0,
        runs=0,
        pilot_runs=0,
        seed=None,
        thresholds=(),
        tests=(),
        best=None,
        seconds=time.perf_counter() - start,
        detail=MappingProxyType({"points": int(p.points.shape[0]), "argmax": where}),
    )


# ============================================================================ worst-case pairs
def _box_problem(loss_of, X0, X1, Y=None):
    """Two problems on ``W = [-1, 1]`` with the loss ``loss_of(w, x, y)`` and data ``X0``
    vs ``X1`` (and the shared ``Y``, if any)."""
    import cvxpy as cp

    from dpcvx import domains
    from dpcvx.problem import Problem

    w = cp.Variable(1)
    x = cp.Parameter(1)
    dom = domains.box(w, -1.0, 1.0)
    if Y is None:
        return (
            Problem(loss_of(w, x, None), w, data={x: X0}, domain=dom),
            Problem(loss_of(w, x, None), w, data={x: X1}, domain=dom),
        )
    y = cp.Parameter()
    return (
        Problem(loss_of(w, x, y), w, data={x: X0, y: Y}, domain=dom),
        Problem(loss_of(w, x, y), w, data={x: X1, y: Y}, domain=dom),
    )


def _linear_pair(n: int = 10, value: float = 1.0, others: float = 0.0):
    """Linear loss ``x w`` on ``W = [-1, 1]``: ``n - 1`` records ``x = others``, the last one
    ``+value`` on one side and ``-value`` on the other."""
    X0 = np.full((n, 1), float(others))
    X1 = X0.copy()
    X0[-1], X1[-1] = value, -value
    return _box_problem(lambda w, x, y: x @ w, X0, X1)


def _quadratic_loss(w, x, y):
    """The item loss ``0.5 (w - x)^2`` (strong convexity 1, verified from its structure)."""
    import cvxpy as cp

    return 0.5 * cp.sum_squares(w - x)


def _quadratic_pair(n: int = 10, value: float = 1.0, others: float = 0.0):
    """Quadratic loss ``0.5 (w - x)^2`` on ``W = [-1, 1]``: records as for
    :func:`_linear_pair`."""
    X0 = np.full((n, 1), float(others))
    X1 = X0.copy()
    X0[-1], X1[-1] = value, -value
    return _box_problem(_quadratic_loss, X0, X1)


def _user_pair(n: int, items: int, value: float, others: float, loss: str = "linear"):
    """The linear (or quadratic) pair of :func:`_linear_pair` (:func:`_quadratic_pair`) as
    user-level data: ``n`` users of ``items`` items, every item of a user equal to its
    record."""
    import cvxpy as cp

    from dpcvx import domains
    from dpcvx.user_level import UserLevelProblem

    w, x = cp.Variable(1), cp.Parameter(1)
    X0 = np.full((n * items, 1), float(others))
    X1 = X0.copy()
    X0[-items:], X1[-items:] = value, -value
    users = np.repeat(np.arange(n), items)
    dom = domains.box(w, -1.0, 1.0)
    item_loss = _quadratic_loss(w, x, None) if loss == "quadratic" else x @ w
    return tuple(
        UserLevelProblem(item_loss, w, {x: X}, dom, users=users, items_per_user=items)
        for X in (X0, X1)
    )


def _saddle_pair(n: int, value: float, others: float):
    """The saddle loss ``x w + v w - v^2`` with an adversary ``|v| <= 1/2`` on ``[-1, 1]``
    (``G(w) = mean(x) w + max_v (v w - v^2)``, Lipschitz ``1 + 1/2`` for ``|x| <= 1``): records
    as for :func:`_linear_pair`."""
    import cvxpy as cp

    from dpcvx.saddle_problem import SaddleProblem

    w, v, x = cp.Variable(1), cp.Variable(1), cp.Parameter(1)
    X0 = np.full((n, 1), float(others))
    X1 = X0.copy()
    X0[-1], X1[-1] = value, -value
    loss = x @ w + v @ w - cp.sum_squares(v)
    return tuple(
        SaddleProblem(
            loss, w, v, data={x: X}, domain=[cp.abs(w) <= 1], perturbation_set=[cp.abs(v) <= 0.5]
        )
        for X in (X0, X1)
    )


def _absolute_outlier_pair(n: int = 40, outlier: float = 1e4):
    """Absolute loss ``|x w - y|`` on ``[-1, 1]``: ``n - 1`` zero records and, first, one
    heavy-tailed outlier pulling toward ``-1`` on one side and ``+1`` on the other."""
    import cvxpy as cp

    X0, X1 = np.zeros((n, 1)), np.zeros((n, 1))
    X0[0], X1[0] = -outlier, outlier
    Y = np.zeros(n)
    Y[0] = outlier
    return _box_problem(lambda w, x, y: cp.abs(x @ w - y), X0, X1, Y)


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditCase:
    """A ready-made audit: a mechanism, its worst-case neighboring pair and its control.

    Attributes
    ----------
    name : str
        The catalogue name (``dpcvx audit NAME``).
    aliases : tuple of str
        Other accepted names (class name, short forms).
    description : str
        The pair and why it is worst case.
    mechanism : dpcvx mechanism
        The correct mechanism, with public parameters.
    make_pair : callable
        ``() -> (Problem, Problem)``.
    epsilon : float
        The budget the mechanism is charged.
    control_factor : float
        The control's noise is calibrated to ``control_factor * epsilon``.
    thresholds : tuple of float
        Fixed thresholds for the sampled audit (chosen from the pair's geometry, not from
        samples).
    runs : int
        Default releases per dataset: enough to catch the control with a wide margin.
    exact : bool
        Whether the exact audit is available (and the default).
    delta : float
        The delta of the audited release (0: pure).
    neighbors : NeighborRelation
        The relation under which the pair is neighboring.
    """

    name: str
    aliases: tuple[str, ...]
    description: str
    mechanism: Any
    make_pair: Callable[[], tuple[Any, Any]]
    epsilon: float
    control_factor: float
    thresholds: tuple[float, ...]
    runs: int
    exact: bool = False
    delta: float = 0.0
    neighbors: NeighborRelation = REPLACE_ONE

    @property
    def control(self) -> NegativeControl:
        """The negative control of :attr:`mechanism`."""
        return negative_control(self.mechanism, self.control_factor)


def build_pair(pair: WorstCasePair) -> tuple[Any, Any]:
    """The two data sources of a registered worst-case pair (see
    :class:`dpcvx.mechanisms.registry.WorstCasePair`)."""
    if pair.source == "problem" and pair.loss == "linear":
        return _linear_pair(pair.n, pair.value, others=pair.others)
    if pair.source == "problem" and pair.loss == "absolute":
        return _absolute_outlier_pair(pair.n, pair.value)
    if pair.source == "problem" and pair.loss == "quadratic":
        return _quadratic_pair(pair.n, pair.value, others=pair.others)
    if pair.source == "users" and pair.loss in ("linear", "quadratic"):
        return _user_pair(pair.n, pair.items, pair.value, pair.others, loss=pair.loss)
    if pair.source == "saddle" and pair.loss == "saddle-linear":
        return _saddle_pair(pair.n, pair.value, pair.others)
    if pair.source == "arrays" and pair.loss == "mean":
        from dpcvx.arrays import ArraySource

        X0 = np.full((pair.n, 1), float(pair.others))
        X1 = X0.copy()
        X0[-1], X1[-1] = pair.value, -pair.value
        return ArraySource(X0), ArraySource(X1)
    if pair.source == "arrays" and pair.loss == "median":
        from dpcvx.arrays import ArraySource

        half = (pair.n - 4) // 2
        rows = [-pair.others] * half + [0.0, 0.0, 0.0, pair.value] + [pair.others] * half
        X0 = np.asarray(rows, float)[:, None]
        X1 = X0.copy()
        X1[half + 3] = -pair.value
        return ArraySource(X0), ArraySource(X1)
    if pair.source == "arrays" and pair.loss == "regression":
        from dpcvx.arrays import ArraySource

        Z0 = np.full((pair.n, 2), float(pair.others))
        Z1 = Z0.copy()
        Z0[-1] = (pair.value, pair.value)
        Z1[-1] = (pair.value, -pair.value)
        return ArraySource(Z0), ArraySource(Z1)
    raise InvalidParameterError(  # pragma: no cover - a registry entry the audit cannot build
        f"The audit cannot build a {pair.loss!r} pair on a {pair.source!r} source."
    )


def _catalogue() -> tuple[AuditCase, ...]:
    """One audit per registered release path (:data:`dpcvx.mechanisms.registry.REGISTRY`)."""
    return tuple(
        AuditCase(
            name=entry.name,
            aliases=entry.aliases,
            description=entry.description,
            mechanism=entry.mechanism,
            make_pair=functools.partial(build_pair, entry.pair),
            epsilon=entry.epsilon,
            delta=entry.delta,
            control_factor=entry.control_factor,
            thresholds=entry.thresholds,
            runs=entry.runs,
            exact=entry.exact,
            neighbors=entry.neighbors,
        )
        for entry in REGISTRY
    )


_CASES: tuple[AuditCase, ...] | None = None


def audit_cases() -> dict[str, AuditCase]:
    """The catalogue of ready-made audits, by name (one per mechanism)."""
    global _CASES
    if _CASES is None:
        _CASES = _catalogue()
    return {case.name: case for case in _CASES}


def _normalize(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def audit_case(name: str) -> AuditCase:
    """The catalogue entry for ``name`` (a catalogue name, a class name or an alias;
    case, dashes and underscores are ignored).

    Raises
    ------
    InvalidParameterError
        For an unknown name; the message lists the valid ones.
    """
    cases = audit_cases()
    if isinstance(name, str):
        wanted = _normalize(name)
        for case in cases.values():
            if wanted in {_normalize(n) for n in (case.name, *case.aliases)}:
                return case
    valid = ", ".join(f"{c.name} ({', '.join(c.aliases)})" for c in cases.values())
    raise InvalidParameterError(f"Unknown mechanism {name!r} for an audit. Valid names: {valid}.")


def worst_case_pair(name: str) -> tuple[Any, Any]:
    """The worst-case neighboring pair ``(Z, Z')`` of a catalogue mechanism (two
    :class:`~dpcvx.Problem` objects that differ in one example; see :func:`audit_cases` for
    their descriptions)."""
    return audit_case(name).make_pair()


def audit_mechanism(
    name: str | AuditCase,
    *,
    runs: int | None = None,
    seed: int = 0,
    alpha: float = DEFAULT_ALPHA,
    method: str = "auto",
    progress: bool = True,
) -> MechanismAudit:
    """Audit a catalogue mechanism and its negative control on its worst-case pair.

    Parameters
    ----------
    name : str or AuditCase
        See :func:`audit_cases` (``"output-perturbation"``, ``"ldop"``, ...).
    runs : int, optional
        Releases per dataset for each of the two audits (default: the case's ``runs``).
    seed : int
        The mechanism's releases use ``seed``, the control's ``seed + 1``.
    alpha : float
        Total level of each sampled audit's intervals.
    method : {"auto", "sampled", "exact"}
        ``"auto"``: exact where the mechanism has an exact distribution helper (EM-PGM),
        sampled otherwise.
    progress : bool
        Progress bars (only on a terminal).

    Returns
    -------
    MechanismAudit
        ``.ok`` when the mechanism passes and the control is caught.
    """
    case = name if isinstance(name, AuditCase) else audit_case(name)
    if method not in ("auto", "sampled", "exact"):
        raise InvalidParameterError(
            f"The `method` of `audit_mechanism` must be 'auto', 'sampled' or 'exact'. Got "
            f"{method!r}."
        )
    if method == "exact" and not case.exact:
        raise InvalidParameterError(
            f"{case.name} has no exact output distribution; use method='sampled' (or 'auto')."
        )
    seed = _check_seed(seed, "audit_mechanism")
    runs = case.runs if runs is None else _check_runs(runs, "audit_mechanism")
    pair = case.make_pair()
    results = []
    control_label = (
        f"negative control (noise for {case.control_factor:g} x epsilon, charged epsilon)"
    )
    for mech, offset, label in (
        (case.mechanism, 0, type(case.mechanism).__name__),
        (case.control, 1, control_label),
    ):
        if case.exact and method in ("auto", "exact"):
            results.append(audit_exact(mech, pair, epsilon=case.epsilon, label=label))
        else:
            results.append(
                audit(
                    mech,
                    pair,
                    epsilon=case.epsilon,
                    delta=case.delta,
                    runs=runs,
                    thresholds=case.thresholds,
                    alpha=alpha,
                    seed=seed + offset,
                    progress=progress,
                    label=label,
                )
            )
    return MechanismAudit(
        name=case.name,
        description=case.description,
        mechanism=results[0],
        control=results[1],
        control_factor=case.control_factor,
    )
