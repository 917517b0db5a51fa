"""Private ERM from a private SCO algorithm by resampling (paper 001, Proposition 4).

Paper 001 is Asi, Levy and Duchi, "Adapting to Function Difficulty and Growth Conditions in
Private Optimization". ``L...`` below are line numbers of its seed text
``shared/papers/001_3f0c176aac4574bd.txt``; ``E#`` and ``P#`` are the errata (section 8) and
pitfalls (section 7) of its digest; "spec B.5" is the implementation spec
(``shared/papers/specs_001_004.md``). Natural logarithms everywhere (P12).

Proposition 4 (App. C.1.1, L659-685). Let ``A`` be an ``(epsilon/k)``-DP algorithm. Then ``A'``::

    1. draw S_1 = (S'_1, ..., S'_n) i.i.d. from the empirical distribution P_S       (L669)
    2. if some record s_i was drawn more than k times, return a fixed point        (L670)
    3. else return A(S_1)                                                          (L671)

is epsilon-DP, and for every dataset S, with probability ``1 - beta``, ``f_S(A'(S)) - min f_S <=
gamma`` whenever ``A`` has population excess risk ``<= gamma`` with probability ``1 - beta/2``
on ``n`` i.i.d. samples (L663-665): ``f_S(x) = E_{S ~ P_S} F(x; S)`` (L677).

dpcvx draws **indices**: ``idx_1, ..., idx_n`` i.i.d. uniform on ``{0, ..., n-1}`` from the
mechanism's own generator, and runs the inner mechanism on the records ``z_{idx_1}, ...,
z_{idx_n}``. That is step 1 exactly (``S'_j = s_{idx_j}`` has law ``P_S``), and the draw reads
no data.

The cap ``k`` (the exact binomial rule). The paper prints ``k = 2 log(2/beta)`` with an unstated
log base (L670) and bounds ``Pr(s_i used more than k times) <= 2^-k <= beta^2/2`` by Chernoff
(L675-677, needing ``beta <= 1/10``; E18: the statement only says ``beta <= 1/n``); the
``2^-k <= beta^2/2`` step holds for ``log_2``, not for ``ln`` (spec B.5, [derived]). The count of
record ``i`` is ``Bin(n, 1/n)`` exactly, so dpcvx uses the smallest integer

    k = min { k >= 1 : n * P(Bin(n, 1/n) > k) <= beta / 2 }                  (:func:`resample_cap`)

computed with ``scipy.stats.binom``. Then step 2 fires with probability at most ``beta/2`` for
every ``beta`` in ``(0, 1)`` (union bound over the ``n`` records, as L677), which is all the
utility proof uses; the cap is public (a function of ``n`` and ``beta``) and much smaller than
the printed one (n = 1000, beta = 1e-3: exact 9, printed 16 with ``ln`` and 22 with ``log_2``),
so the inner mechanism gets a larger share ``epsilon/k``.

Privacy (L681-685). The event ``B`` = "some record drawn more than ``k`` times" depends on the
index draw only, not on the data. On ``B`` both neighbours release the same public point. Off
``B``, the resampled datasets of replace-one neighbours ``S, S'`` (differing in record ``i``) are
the same index vector applied to ``S`` and ``S'``, so they differ in exactly the ``c_i <= k``
positions where ``idx_j = i``: group privacy of a pure ``epsilon_A``-DP ``A`` gives
``e^(c_i epsilon_A) <= e^(k epsilon_A)``. With ``epsilon_A = epsilon/k`` (computed so that
``k * epsilon_A <= epsilon`` in exact arithmetic, :func:`~dpcvx.mechanisms.base.exact_share`)
``A'`` is ``epsilon``-DP. The ledger gets **one** pure event at the group cost ``k * e_A``
(rounded up, ``<= epsilon``), where ``e_A`` is the exact sum of the inner plan's own pure events
(basic composition; at most ``epsilon/k``).

Pure only. Group privacy of an ``(epsilon_A, delta_A)``-DP ``A`` gives ``(k epsilon_A, k
e^((k-1) epsilon_A) delta_A)``, a statement the paper does not make; dpcvx refuses ``delta > 0``
(spec B.5) and an inner whose plan records anything but pure events.

The fixed point of step 2. The paper returns ``0`` (L670), which need not lie in the domain
(spec B.5): dpcvx returns ``Pi_W(fallback)``, the projection of a public point (default: the
centre of the domain's bounding ball), which is post-processing of nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from scipy.stats import binom

from dpcvx._validation import check_center, check_delta, check_positive, check_real
from dpcvx.accounting.ledger import PrivacyEvent
from dpcvx.errors import InvalidParameterError
from dpcvx.mechanisms.base import ExtensionUse, Mechanism, Release, exact_share
from dpcvx.neighbors import REPLACE_ONE, NeighborRelation
from dpcvx.types import Guarantee

__all__ = [
    "ResampledERM",
    "ResampledPlan",
    "abort_bound",
    "paper_cap",
    "resample_cap",
]

#: the release-context methods a resampled run can forward (each takes rows by ``indices``)
SUPPORTED_REQUIREMENTS = frozenset({"solver", "project", "gradients", "smooth", "loss_values"})

_OWNER = "ResampledERM"


# ----------------------------------------------------------------------------- the cap
def _check_n(n: object, owner: str) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InvalidParameterError(
            f"The sample size `n` of `{owner}` must be a positive integer. Got {n!r}."
        )
    return int(n)


def _check_beta(beta: object, owner: str) -> float:
    out = check_real(beta, "failure_probability", owner)
    if not 0.0 < out < 1.0:
        raise InvalidParameterError(
            f"The `failure_probability` parameter (beta) of `{owner}` must lie in (0, 1): the "
            f"resampling step aborts with probability at most beta/2. Got {beta!r}."
        )
    return out


def abort_bound(n: int, cap: int) -> float:
    """``n * P(Bin(n, 1/n) > cap)``: the union bound (001 L677) on the probability that some
    record is drawn more than ``cap`` times when ``n`` indices are drawn uniformly with
    replacement from ``n`` (each record's count is exactly ``Bin(n, 1/n)``)."""
    n = _check_n(n, "abort_bound")
    if isinstance(cap, bool) or not isinstance(cap, (int, np.integer)) or cap < 0:
        raise InvalidParameterError(
            f"The `cap` parameter of `abort_bound` must be a non-negative integer. Got {cap!r}."
        )
    return min(1.0, float(n * binom.sf(int(cap), n, 1.0 / n)))


def resample_cap(n: int, failure_probability: float) -> int:
    """The exact binomial rule for Proposition 4's cap (spec B.5): the smallest integer
    ``k >= 1`` with ``n * P(Bin(n, 1/n) > k) <= beta / 2`` (``scipy.stats.binom``).

    The paper's ``k = 2 log(2/beta)`` (001 L670, :func:`paper_cap`) only bounds the same tail
    through Chernoff; the exact rule makes ``Pr(abort) <= beta/2`` hold for every ``beta`` in
    ``(0, 1)`` and every ``n`` (E18's ``beta <= 1/n``, ``beta <= 1/10`` are not needed). The cap
    is public: it is a function of ``n`` and ``beta`` only. It never exceeds ``n`` (a count
    cannot), and is 1 when ``n = 1``.
    """
    n = _check_n(n, "resample_cap")
    beta = _check_beta(failure_probability, "resample_cap")
    target = beta / 2.0
    p = 1.0 / n
    start = 1
    while start <= n:
        ks = np.arange(start, min(n, start + 63) + 1)
        ok = np.nonzero(n * binom.sf(ks, n, p) <= target)[0]
        if ok.size:
            return int(ks[ok[0]])
        start = int(ks[-1]) + 1
    return n  # P(Bin(n, 1/n) > n) = 0: never reached for beta > 0, kept for safety


def paper_cap(failure_probability: float, base: str = "natural") -> float:
    """The cap as printed, ``k = 2 log(2/beta)`` (001 L659, L670), with ``base`` ``"natural"``
    or ``"binary"`` (the paper does not say; its Chernoff step ``2^-k <= beta^2/2`` needs
    ``"binary"``). For comparison only: :class:`ResampledERM` uses :func:`resample_cap`."""
    beta = _check_beta(failure_probability, "paper_cap")
    if base == "natural":
        return 2.0 * math.log(2.0 / beta)
    if base == "binary":
        return 2.0 * math.log2(2.0 / beta)
    raise InvalidParameterError(
        f"The `base` parameter of `paper_cap` must be 'natural' or 'binary'. Got {base!r}."
    )


def _group_cost(cap: int, inner_epsilon: Fraction) -> float:
    """``cap * inner_epsilon`` as a float rounded up (never below the exact product)."""
    exact = cap * inner_epsilon
    cost = float(exact)
    while Fraction(cost) < exact:
        cost = math.nextafter(cost, math.inf)
    return cost


# ----------------------------------------------------------------------------- the plan
@dataclass(frozen=True, slots=True, kw_only=True)
class ResampledPlan:
    """Everything the release uses, fixed from public quantities before any data is read:
    the cap, the inner mechanism's plan at ``epsilon/k`` and the public fallback point."""

    guarantee: Guarantee  # the group-privacy cost k * (inner epsilon), <= the requested epsilon
    inner: Any  # the inner mechanism's plan
    n: int
    cap: int
    inner_epsilon: float  # the share epsilon/k the inner was planned at
    fallback: np.ndarray
    detail: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def extension_C(self) -> float | None:
        """The inner plan's Lipschitz extension (the resampled solves are the inner's)."""
        return self.inner.extension_C

    def events(self, label: str) -> tuple[PrivacyEvent, ...]:
        """One pure event at the group-privacy cost (001 L685)."""
        return (
            PrivacyEvent(
                label=label,
                epsilon=self.guarantee.epsilon,
                delta=0.0,
                kind="pure",
                detail={
                    "paper": "001 Prop 4 (App C.1.1, L659-685)",
                    "composition": self.detail["composition"],
                    "cap": self.cap,
                    "inner_epsilon": self.inner_epsilon,
                    "inner_events": self.detail["inner_events"],
                },
                neighbors=self.guarantee.neighbors,
            ),
        )

    def facts(self) -> Mapping[str, Any]:
        """The plan's public facts; the inner plan's facts are under ``"inner"``."""
        facts = dict(self.detail)
        facts["inner"] = MappingProxyType(dict(self.inner.facts()))
        return MappingProxyType(facts)


# ----------------------------------------------------------------------------- the context
class _ResampledContext:
    """The release context of the resampled dataset ``(z_{idx_1}, ..., z_{idx_n})``: every
    row-reading method of the base context is called with the rows mapped through ``idx``
    (repeated rows are allowed); projections and the domain are the base's (public)."""

    def __init__(self, base: Any, idx: np.ndarray) -> None:
        self._base = base
        self._idx = idx
        self.n = int(idx.size)
        self.d = base.d

    @property
    def domain(self) -> Any:
        return self._base.domain

    @property
    def smooth(self) -> Any:
        return self._base.smooth

    def _rows(self, indices: Any) -> np.ndarray:
        if indices is None:
            return self._idx
        return self._idx[np.asarray(indices, dtype=np.int64).reshape(-1)]

    def solver(self, indices: Any = None, C: float | None = None) -> Any:
        return self._base.solver(indices=self._rows(indices), C=C)

    def project(self, point: Any, localize: Any = None, xi: float | None = None) -> np.ndarray:
        if localize is None and xi is None:
            return self._base.project(point)
        return self._base.project(point, localize=localize, xi=xi)

    def gradients(self, w: Any, indices: Any = None) -> np.ndarray:
        return self._base.gradients(w, indices=self._rows(indices))

    def loss_values(self, points: Any, indices: Any = None) -> np.ndarray:
        return self._base.loss_values(points, indices=self._rows(indices))

    def prepare(self) -> None:
        if hasattr(self._base, "prepare"):
            self._base.prepare()


# ----------------------------------------------------------------------------- mechanism
@dataclass(frozen=True, slots=True, kw_only=True)
class ResampledERM:
    """Paper 001's Proposition 4: pure epsilon-DP ERM from a pure-DP SCO mechanism by
    resampling the data with replacement (module docstring).

    Parameters
    ----------
    inner : Mechanism
        A pure epsilon-DP dpcvx mechanism under replace-one neighbours, e.g.
        :class:`~dpcvx.IterativeLocalization`, :class:`~dpcvx.GrowthAdaptiveLocalization`
        (P14: ERM guarantees from Algorithm 2) or :class:`~dpcvx.OutputPerturbation`. It is
        planned at ``(n, epsilon/k, 0)`` and run on the resampled dataset. Its release context
        may read rows only through ``solver``, ``gradients`` and ``loss_values`` (with
        ``indices``), ``smooth`` and ``project``.
    failure_probability : float
        ``beta`` in ``(0, 1)`` (public; never chosen on the data, P13): the resampling aborts
        with probability at most ``beta/2``. Default 1e-4.
    cap : int, optional
        ``k``, the largest number of copies of one record (public). Default
        :func:`resample_cap`, the exact binomial rule. An override changes only the abort
        probability (reported as ``abort_bound``), never the guarantee.
    fallback : array-like, optional
        The public point released, projected onto the domain, when some record is drawn more
        than ``k`` times (the paper's "return 0", L670). Default: the domain's centre.

    Notes
    -----
    Guarantee: pure epsilon-DP, replace-one neighbours, public n, on every dataset (001 Prop 4,
    L659-685): the abort event does not depend on the data and, off it, neighbours' resampled
    datasets differ in at most ``k`` positions, so group privacy of the ``(epsilon/k)``-DP inner
    gives ``epsilon``. One ledger event at ``k`` times the inner plan's total epsilon (rounded
    up, at most ``epsilon``). Utility: with probability ``1 - beta``, ``f_S(w) - min f_S <=
    gamma`` for every dataset when the inner has population excess risk ``<= gamma`` with
    probability ``1 - beta/2`` on ``n`` i.i.d. samples. Errata: the printed cap ``2 log(2/beta)``
    (L670) is replaced by the exact binomial rule (its Chernoff step needs ``log_2`` and
    ``beta <= 1/10``, E18); "return 0" is a public point of the domain. Raises
    :class:`~dpcvx.InvalidParameterError` before anything is spent on bad input, including
    ``delta > 0`` (group privacy inflates delta; the proposition is pure) and an inner plan that
    is not pure or spends more than its share.
    """

    inner: Any
    failure_probability: float = 1e-4
    cap: int | None = None
    fallback: Any = None

    neighbors: ClassVar[NeighborRelation] = REPLACE_ONE

    def __post_init__(self) -> None:
        inner = self.inner
        if isinstance(inner, ResampledERM) or not isinstance(inner, Mechanism):
            raise InvalidParameterError(
                f"The `inner` parameter of `{_OWNER}` must be a dpcvx mechanism such as "
                f"dpcvx.IterativeLocalization (not a ResampledERM). Got {type(inner).__name__}."
            )
        if inner.neighbors != REPLACE_ONE:
            raise InvalidParameterError(
                f"`{_OWNER}` resamples records under replace-one neighbours; the inner "
                f"`{type(inner).__name__}` states its guarantee under {inner.neighbors}."
            )
        unsupported = sorted(set(inner.requirements) - SUPPORTED_REQUIREMENTS)
        if unsupported:
            raise InvalidParameterError(
                f"`{_OWNER}` can run an inner mechanism that reads rows through solver, "
                f"gradients or loss_values; `{type(inner).__name__}` needs "
                f"{', '.join(unsupported)}, which a resampled dataset does not provide."
            )
        object.__setattr__(
            self, "failure_probability", _check_beta(self.failure_probability, _OWNER)
        )
        if self.cap is not None:
            cap = self.cap
            if isinstance(cap, bool) or not isinstance(cap, (int, np.integer)) or cap < 1:
                raise InvalidParameterError(
                    f"The `cap` parameter (k) of `{_OWNER}` must be a positive integer. "
                    f"Got {cap!r}."
                )
            object.__setattr__(self, "cap", int(cap))
        try:
            fallback = check_center(self.fallback, _OWNER)
        except InvalidParameterError:
            raise InvalidParameterError(
                f"The `fallback` parameter of `{_OWNER}` must be a finite vector (a public point "
                f"of the domain). Got {self.fallback!r}."
            ) from None
        object.__setattr__(self, "fallback", fallback)

    # the pipeline reads these from the mechanism: they are the inner's
    @property
    def requirements(self) -> tuple[str, ...]:
        """The inner mechanism's requirements (plus ``project`` for the fallback)."""
        reqs = tuple(self.inner.requirements)
        return reqs if "project" in reqs else reqs + ("project",)

    @property
    def extension(self) -> ExtensionUse:
        """The inner mechanism's use of the Lipschitz extension."""
        return self.inner.extension  # type: ignore[no-any-return]

    @property
    def enforces_lipschitz(self) -> bool:
        """Whether the pipeline enforces the inner's ``lipschitz`` claim."""
        return bool(self.inner.enforces_lipschitz)

    @property
    def lipschitz(self) -> float:
        """The inner mechanism's ``lipschitz`` claim."""
        return float(self.inner.lipschitz)

    @property
    def solver(self) -> str | None:
        """The inner mechanism's first solver."""
        return getattr(self.inner, "solver", None)

    @property
    def strong_convexity(self) -> float:
        """The inner mechanism's strong-convexity claim (checked by the pipeline)."""
        return float(getattr(self.inner, "strong_convexity", 0.0) or 0.0)

    # ------------------------------------------------------------------ public planning
    def plan(
        self,
        *,
        n: int,
        d: int,
        center: Any,
        diameter: float,
        epsilon: float,
        delta: float,
        domain: Any = None,
    ) -> ResampledPlan:
        """The cap, the inner plan at ``(n, epsilon/k, 0)`` and the fallback, from public
        quantities only; raises :class:`~dpcvx.InvalidParameterError` on bad input."""
        n = _check_n(n, _OWNER)
        epsilon = check_positive(epsilon, "epsilon", _OWNER)
        if check_delta(delta, _OWNER) != 0.0:
            raise InvalidParameterError(
                f"`{_OWNER}` is pure epsilon-DP (001 Prop 4): `delta` must be 0. Got {delta!r}. "
                "Group privacy over k copies would inflate an inner delta by about k e^epsilon."
            )
        beta = self.failure_probability
        rule = "exact binomial: min k >= 1 with n P(Bin(n, 1/n) > k) <= beta/2"
        if self.cap is None:
            cap = resample_cap(n, beta)
        else:
            cap, rule = self.cap, "given"
        point = center if self.fallback is None else self.fallback
        if point is None:
            raise InvalidParameterError(
                f"`{_OWNER}` needs a data source with a domain (or a `fallback` point) for the "
                "point it releases when the resampling aborts."
            )
        point = np.asarray(point, float)
        if point.shape != (d,):
            raise InvalidParameterError(
                f"The `fallback` of `{_OWNER}` must have shape ({d},). Got {point.shape}."
            )
        share = exact_share(epsilon, cap)
        inner_plan = self.inner.plan(
            n=n,
            d=d,
            center=center,
            diameter=diameter,
            epsilon=share,
            delta=0.0,
            domain=domain,
        )
        events = inner_plan.events(type(self.inner).__name__)
        if not events or any(e.kind != "pure" or e.delta != 0.0 for e in events):
            raise InvalidParameterError(
                f"`{_OWNER}` needs a pure epsilon-DP inner mechanism; the plan of "
                f"`{type(self.inner).__name__}` records "
                f"{', '.join(e.kind for e in events) or 'no'} events."
            )
        total = sum((Fraction(e.epsilon) for e in events), Fraction(0))
        if total > Fraction(share):
            raise InvalidParameterError(
                f"Internal: the plan of `{type(self.inner).__name__}` spends {float(total):g}, "
                f"more than its share epsilon/k = {share:g}; nothing was spent."
            )
        cost = _group_cost(cap, total)
        composition = (
            f"group privacy over at most k = {cap} copies of a record: inner "
            f"{type(self.inner).__name__} at {float(total):.6g} <= epsilon/k on an index "
            f"resample, cost k * {float(total):.6g} = {cost:.6g} <= {epsilon:g}; the abort "
            "event reads no data (001 Prop 4)"
        )
        detail = {
            "mechanism": _OWNER,
            "paper": "001 Prop 4 (App C.1.1, L659-685)",
            "errata": "001 digest E18 (exact binomial cap in place of 2 log(2/beta)); P13, P14",
            "inner_mechanism": type(self.inner).__name__,
            "failure_probability": beta,
            "cap": cap,
            "cap_rule": rule,
            "abort_bound": abort_bound(n, cap),
            "paper_cap_natural": paper_cap(beta, "natural"),
            "paper_cap_binary": paper_cap(beta, "binary"),
            "inner_epsilon": share,
            "inner_events": tuple((e.label, e.epsilon) for e in events),
            "group_cost": cost,
            "composition": composition,
            "log": "natural (P12)",
        }
        return ResampledPlan(
            guarantee=Guarantee(epsilon=cost, delta=0.0),
            inner=inner_plan,
            n=n,
            cap=cap,
            inner_epsilon=share,
            fallback=point.copy(),
            detail=MappingProxyType(detail),
        )

    def preflight(self, plan: ResampledPlan, context: Any) -> None:
        """The inner mechanism's data-free checks, if it has any."""
        if hasattr(self.inner, "preflight"):
            self.inner.preflight(plan.inner, context)

    # ------------------------------------------------------------------ release
    def release(self, plan: ResampledPlan, context: Any, rng: np.random.Generator) -> Release:
        """Draw ``n`` indices uniformly with replacement (no data read); release the projected
        fallback if some index repeats more than ``k`` times, else the inner release on the
        resampled dataset. ``resample_aborted`` and ``resample_max_count`` in the facts are
        functions of the index draw only (public)."""
        idx = rng.integers(0, plan.n, size=plan.n)
        idx.setflags(write=False)
        top = int(np.bincount(idx, minlength=plan.n).max())
        if top > plan.cap:
            w = np.asarray(context.project(plan.fallback), float)
            facts = {"resample_aborted": True, "resample_max_count": top}
            return Release(w, (), MappingProxyType(facts))
        out = self.inner.release(plan.inner, _ResampledContext(context, idx), rng)
        facts = dict(out.facts)
        facts.update(resample_aborted=False, resample_max_count=top)
        return Release(np.asarray(out.w, float), tuple(out.certificates), MappingProxyType(facts))
