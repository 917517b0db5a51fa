"""A ledger of immutable privacy events and an accountant that reserves budget before release.

Accounting follows dp_accounting's design (house style point 8): each release is described by an
immutable :class:`PrivacyEvent`; a :class:`Ledger` is an immutable, append-only tuple of events
with a composed guarantee; an :class:`Accountant` holds a budget and is the only mutable object.
A release first *reserves* its event (which fails, appending nothing, if the budget would be
exceeded) and only then draws noise. A reservation is never removed: if anything fails after it,
the budget stays spent.

Composition
-----------
All events are composed by basic (sequential) composition: the epsilons add and the deltas add.
This is valid for any mix of pure and approximate events, adaptively chosen, under one
neighboring relation: every event carries its relation (:mod:`dpcvx.neighbors`), a ledger holds
events of one relation only and an accountant refuses (recording nothing) an event under another
relation than its own budget's. Composition across relations is not defined.

Exact budgets
-------------
A budget is held exactly: the float a user gives is the budget, to the last bit. Sums of
epsilons, deltas and rhos are computed in exact rational arithmetic (:class:`fractions.Fraction`
of the float values, which is exact) and an event is accepted only when the exact composed total
is at most the budget: no tolerance, not even a rounding error. Reported totals are the exact
sums rounded *up* to a float (once, at the end), remainders are rounded *down*.

The price is that a budget split by float division need not fit: ten releases of the float
``0.1`` do not fit a budget of ``1.0``, since the float ``0.1`` is slightly more than a tenth (the
tenth release is refused and nothing is recorded). A user splits a budget in one of two ways:

- ``accountant.share(k)``: the largest equal share of the remaining budget of which ``k``
  releases fit exactly (``epsilon / k`` or a float or two below it);
- ``accountant.remaining``: whatever is left; a release of exactly that fits (so the last of
  several releases may charge the remaining budget).

:class:`ZcdpAccountant` has ``share_rho(k)`` and ``remaining_rho`` for its rho budget.

zCDP events (kind ``"zcdp"``, with ``rho``) state their ``(epsilon, delta)`` at a delta of their
choice; the ledger also composes every event's zCDP form additively (pure epsilon is
``epsilon^2/2``-zCDP, a Gaussian with multiplier ``m`` is ``1/(2 m^2)``-zCDP) and uses that
bound when it is smaller. :class:`ZcdpAccountant` holds a budget in rho.

When a ledger holds at least two Gaussian events, their part is *also* composed exactly, with
dp_accounting's privacy-loss-distribution accountant (``PLDAccountant``, pessimistic estimates,
so the result is an upper bound), at the total delta of the Gaussian events. The reported
epsilon of the Gaussian part is the smaller of the two, since both are valid
``(epsilon, delta_gaussian)`` guarantees of the same composed mechanism.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np

from dpcvx._validation import check_delta, check_nonnegative, check_positive, check_real
from dpcvx.accounting.profiles import gaussian_delta
from dpcvx.errors import InvalidParameterError, PrivacyBudgetError
from dpcvx.neighbors import REPLACE_ONE, NeighborRelation, as_relation
from dpcvx.types import Guarantee

if TYPE_CHECKING:
    import dp_accounting

__all__ = ["Accountant", "Ledger", "PrivacyEvent", "ZcdpAccountant"]

_EVENT_KINDS = ("pure", "gaussian", "approx", "zcdp")
# Discretization of the PLD accountant (dp_accounting's default).
_PLD_DISCRETIZATION = 1e-4


def _empty_mapping() -> Mapping[str, object]:
    return MappingProxyType({})


def _round_up(value: float) -> float:
    """Round a positive computed value up to the next float (safe side); leave 0 alone."""
    if value <= 0.0:
        return 0.0
    return float(np.nextafter(value, math.inf))


def _exact_sum(values: Iterable[float | Fraction]) -> Fraction:
    """The exact sum of finite floats (or fractions)."""
    return sum((Fraction(v) for v in values), Fraction(0))


def _up(exact: Fraction) -> float:
    """The smallest float at least ``exact`` (``exact`` itself when it is a float)."""
    out = float(exact)  # correctly rounded
    if Fraction(out) < exact:
        out = math.nextafter(out, math.inf)
    return out


def _down(exact: Fraction) -> float:
    """The largest float at most ``exact``, clipped at 0."""
    if exact <= 0:
        return 0.0
    out = float(exact)
    if Fraction(out) > exact:
        out = math.nextafter(out, 0.0)
    return out


def _sum_up(values: Iterable[float]) -> float:
    """The exact sum of floats, as the smallest float at least as large (exact when the sum
    is a float)."""
    return _up(_exact_sum(values))


@dataclass(frozen=True, slots=True, kw_only=True)
class PrivacyEvent:
    """One release and the guarantee it consumes.

    Attributes
    ----------
    label : str
        Human-readable name of the release (shown in the ledger table).
    epsilon : float
        Non-negative finite epsilon of the release.
    delta : float
        Delta of the release, in ``[0, 1)``; ``0`` for a ``"pure"`` event.
    kind : {"pure", "gaussian", "approx"}
        ``"pure"``: an epsilon-DP release (l2 or per-coordinate Laplace noise).
        ``"gaussian"``: a Gaussian mechanism with known ``noise_multiplier``; eligible for exact
        (PLD) composition. ``"approx"``: any other ``(epsilon, delta)``-DP release.
    noise_multiplier : float or None
        ``sigma / sensitivity`` for a ``"gaussian"`` event (required there), ``None`` otherwise.
        The sensitivity is the l2 sensitivity under the event's relation (``neighbors``): the
        largest distance between the query on two neighboring datasets. The event is checked
        to be consistent: the exact delta of a Gaussian with this multiplier at ``epsilon``
        (:func:`~dpcvx.accounting.profiles.gaussian_delta`, rounded up) must not exceed
        ``delta``.
    rho : float or None
        The zCDP parameter of a ``"zcdp"`` event (required there, ``None`` otherwise); its
        ``(epsilon, delta)`` must be implied by ``rho``-zCDP (see :meth:`zcdp`).
    detail : Mapping[str, object]
        Free-form public metadata (stored as a read-only copy). Excluded from hashing.
    neighbors : NeighborRelation
        The neighboring relation of the guarantee (default :data:`~dpcvx.neighbors.REPLACE_ONE`;
        the names ``"replace-one"`` and ``"add-remove-one"`` are accepted and converted). Only
        events under one relation compose.

    Raises
    ------
    InvalidParameterError
        If a field is out of range or the fields are inconsistent.
    """

    label: str
    epsilon: float
    delta: float = 0.0
    kind: str = "pure"
    noise_multiplier: float | None = None
    rho: float | None = None
    detail: Mapping[str, object] = field(default_factory=_empty_mapping, hash=False)
    neighbors: NeighborRelation = REPLACE_ONE

    @classmethod
    def zcdp(
        cls,
        label: str,
        rho: float,
        delta: float,
        detail: Mapping[str, object] | None = None,
        *,
        neighbors: NeighborRelation = REPLACE_ONE,
    ) -> PrivacyEvent:
        """A ``rho``-zCDP release, with its ``(epsilon, delta)`` from :func:`zcdp_to_dp`."""
        from dpcvx.accounting.zcdp import zcdp_to_dp

        return cls(
            label=label,
            epsilon=zcdp_to_dp(rho, delta),
            delta=delta,
            kind="zcdp",
            rho=rho,
            detail=detail or {},
            neighbors=neighbors,
        )

    def implied_rho(self) -> float | None:
        """The event's zCDP parameter: its ``rho``, ``epsilon^2/2`` for a pure event,
        ``1/(2 m^2)`` for a Gaussian one (both computed exactly and rounded up), None for a
        generic ``(epsilon, delta)`` event."""
        exact = self._exact_rho()
        return None if exact is None else _up(exact)

    def _exact_rho(self) -> Fraction | None:
        """:meth:`implied_rho` in exact arithmetic."""
        if self.kind == "zcdp":
            assert self.rho is not None  # checked in __post_init__
            return Fraction(self.rho)
        if self.kind == "pure":
            return Fraction(self.epsilon) ** 2 / 2
        if self.kind == "gaussian":
            assert self.noise_multiplier is not None  # checked in __post_init__
            return 1 / (2 * Fraction(self.noise_multiplier) ** 2)
        return None

    def __post_init__(self) -> None:
        owner = "PrivacyEvent"
        object.__setattr__(self, "neighbors", as_relation(self.neighbors))
        if not isinstance(self.label, str):
            raise InvalidParameterError(
                f"The `label` parameter of `{owner}` must be a str. "
                f"Got {type(self.label).__name__}: {self.label!r}."
            )
        if self.kind not in _EVENT_KINDS:
            raise InvalidParameterError(
                f"The `kind` parameter of `{owner}` must be one of {_EVENT_KINDS}. "
                f"Got {self.kind!r}."
            )
        epsilon = check_nonnegative(self.epsilon, "epsilon", owner)
        delta = check_real(self.delta, "delta", owner)
        if not 0.0 <= delta < 1.0:
            raise InvalidParameterError(
                f"The `delta` parameter of `{owner}` must lie in [0, 1). Got {self.delta!r}."
            )
        object.__setattr__(self, "epsilon", epsilon)
        object.__setattr__(self, "delta", delta)
        if not isinstance(self.detail, Mapping):
            raise InvalidParameterError(
                f"The `detail` parameter of `{owner}` must be a mapping. "
                f"Got {type(self.detail).__name__}."
            )
        object.__setattr__(self, "detail", MappingProxyType(dict(self.detail)))

        if self.kind == "zcdp":
            from dpcvx.accounting.zcdp import zcdp_to_dp

            rho = check_positive(self.rho, "rho", owner)
            object.__setattr__(self, "rho", rho)
            if not 0.0 < delta < 1.0:
                raise InvalidParameterError(
                    f"A zCDP `{owner}` states its (epsilon, delta) at some delta in (0, 1) "
                    f"(zCDP does not imply pure DP). Got delta={self.delta!r}. Use "
                    "PrivacyEvent.zcdp(label, rho, delta)."
                )
            if epsilon < zcdp_to_dp(rho, delta):
                raise InvalidParameterError(
                    f"A {rho!r}-zCDP `{owner}` is not ({epsilon!r}, {delta!r})-DP: the smallest "
                    f"valid epsilon at that delta is {zcdp_to_dp(rho, delta)!r}."
                )
        elif self.rho is not None:
            raise InvalidParameterError(
                f"The `rho` parameter of `{owner}` is only meaningful for kind='zcdp'. Got "
                f"{self.rho!r} with kind={self.kind!r}."
            )
        if self.kind == "pure" and delta != 0.0:
            raise InvalidParameterError(
                f"A pure `{owner}` must have delta == 0. Got {self.delta!r}. "
                "Use kind='approx' (or 'gaussian') for an (epsilon, delta) release."
            )
        if self.kind != "gaussian":
            if self.noise_multiplier is not None:
                raise InvalidParameterError(
                    f"The `noise_multiplier` parameter of `{owner}` is only meaningful for "
                    f"kind='gaussian'. Got {self.noise_multiplier!r} with kind={self.kind!r}. "
                    "Pass noise_multiplier=None or kind='gaussian'."
                )
            return
        if self.noise_multiplier is None:
            raise InvalidParameterError(
                f"A Gaussian `{owner}` needs `noise_multiplier` = sigma / sensitivity. Got None. "
                "Pass it, or use kind='approx' if the release is not a plain Gaussian mechanism."
            )
        multiplier = check_positive(self.noise_multiplier, "noise_multiplier", owner)
        object.__setattr__(self, "noise_multiplier", multiplier)
        if epsilon <= 0.0 or delta <= 0.0:
            raise InvalidParameterError(
                f"A Gaussian `{owner}` needs epsilon > 0 and delta > 0. "
                f"Got epsilon={self.epsilon!r}, delta={self.delta!r}."
            )
        actual = gaussian_delta(multiplier, 1.0, epsilon)
        if actual > delta:
            raise InvalidParameterError(
                f"A Gaussian `{owner}` with noise_multiplier={multiplier!r} is only "
                f"({epsilon!r}, {actual!r})-DP, not ({epsilon!r}, {delta!r})-DP. Declare the "
                "guarantee the noise actually gives (see dpcvx.mechanisms.noise.calibrate)."
            )

    @property
    def guarantee(self) -> Guarantee:
        """The event's own ``(epsilon, delta)`` guarantee, under its relation."""
        return Guarantee(epsilon=self.epsilon, delta=self.delta, neighbors=self.neighbors)

    def dp_event(self) -> dp_accounting.DpEvent:
        """The matching ``dp_accounting`` event.

        Returns
        -------
        dp_accounting.DpEvent
            ``GaussianDpEvent(noise_multiplier)`` for a ``"gaussian"`` event. For ``"pure"`` and
            ``"approx"`` events there is no exact dp_accounting counterpart (an l2 Laplace
            K-norm release in ``d > 1`` dimensions is not a ``LaplaceDpEvent``, and an
            ``(epsilon, delta)`` pair alone does not determine a privacy loss distribution), so
            ``UnsupportedDpEvent()`` is returned; such events are composed by basic composition.

        Notes
        -----
        The noise multiplier is relative to the sensitivity under the event's own relation
        (``neighbors``), i.e. the full distance between the query on neighboring datasets,
        whatever the relation is. Compose it in a dp_accounting accountant with the default
        ``ADD_OR_REMOVE_ONE`` relation (whose Gaussian PLD is a shift by exactly one
        sensitivity); dp_accounting's ``NeighboringRelation.REPLACE_ONE`` would double the
        shift and overstate the epsilon.
        """
        import dp_accounting

        if self.kind == "gaussian":
            return dp_accounting.GaussianDpEvent(self.noise_multiplier)
        return dp_accounting.UnsupportedDpEvent()


@functools.lru_cache(maxsize=256)
def _pld_gaussian_epsilon(multipliers: tuple[float, ...], delta: float) -> float:
    """Epsilon of the composition of Gaussians (sorted multipliers) at ``delta``, by PLD."""
    import dp_accounting
    from dp_accounting.pld import PLDAccountant

    accountant = PLDAccountant(value_discretization_interval=_PLD_DISCRETIZATION)
    accountant.compose(
        dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(m) for m in multipliers])
    )
    return float(accountant.get_epsilon(delta))


@dataclass(frozen=True, slots=True, kw_only=True)
class Ledger:
    """An immutable, append-only record of privacy events under one neighboring relation.

    Attributes
    ----------
    events : tuple of PrivacyEvent
        In the order they were reserved.
    neighbors : NeighborRelation
        The relation of every event (and of the composed guarantee). Given as ``None`` (the
        default), it is the first event's relation, or replace-one for an empty ledger.

    Raises
    ------
    InvalidParameterError
        If an entry is not a PrivacyEvent, or the events are not all under ``neighbors``
        (guarantees under different relations do not compose).

    Notes
    -----
    ``Ledger.append`` returns a new ledger; a ledger never changes. :meth:`total` composes the
    events (see the module docstring): exact sums, rounded up once.
    """

    events: tuple[PrivacyEvent, ...] = ()
    neighbors: NeighborRelation = None  # type: ignore[assignment]  # None: the events' relation

    def __post_init__(self) -> None:
        events = tuple(self.events)
        for event in events:
            if not isinstance(event, PrivacyEvent):
                raise InvalidParameterError(
                    "Every entry of `Ledger.events` must be a PrivacyEvent. "
                    f"Got {type(event).__name__}: {event!r}."
                )
        if self.neighbors is None:
            relation = events[0].neighbors if events else REPLACE_ONE
        else:
            relation = as_relation(self.neighbors)
        for event in events:
            _check_relation(event, relation, "ledger")
        object.__setattr__(self, "events", events)
        object.__setattr__(self, "neighbors", relation)

    def append(self, event: PrivacyEvent) -> Ledger:
        """Return a new ledger with ``event`` added at the end (under the ledger's relation)."""
        if not isinstance(event, PrivacyEvent):
            raise InvalidParameterError(
                f"`Ledger.append` takes a PrivacyEvent. Got {type(event).__name__}: {event!r}."
            )
        _check_relation(event, self.neighbors, "ledger")
        return Ledger(events=self.events + (event,), neighbors=self.neighbors)

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[PrivacyEvent]:
        return iter(self.events)

    def basic_total(self) -> Guarantee:
        """Basic composition: the exact sum of the epsilons and of the deltas (rounded up)."""
        epsilon = _sum_up(e.epsilon for e in self.events)
        delta = _sum_up(e.delta for e in self.events)
        return Guarantee(epsilon=epsilon, delta=delta, neighbors=self.neighbors)

    def total(self) -> Guarantee:
        """The composed guarantee of every event in the ledger, under its relation.

        Returns
        -------
        Guarantee
            ``delta`` is the sum of the deltas. ``epsilon`` is the sum of the epsilons of the
            non-Gaussian events plus, for the Gaussian events, the smaller of their summed
            epsilons and (when there are at least two) the PLD epsilon of their exact
            composition at their summed delta. Sums are exact and rounded up once. When every
            event has a zCDP form (pure, Gaussian, zCDP) and the total delta is positive, the
            epsilon is also capped by the conversion of the summed rho at that delta.

        Notes
        -----
        Both values for the Gaussian part are valid guarantees of the composed Gaussian
        mechanisms at the same delta, so the smaller one is too; the rest is basic composition
        of that part with the other events. The PLD uses dp_accounting's pessimistic
        discretization (interval 1e-4), so its epsilon is an upper bound on the exact one; it
        is evaluated at the Gaussian deltas' sum rounded *down* (a smaller delta, a larger
        epsilon) and its epsilon is rounded up. The zCDP cap is valid for the same reason: the
        composition is ``sum(rho)``-zCDP (the exact sum, rounded up).
        """
        other_eps = _exact_sum(e.epsilon for e in self.events if e.kind != "gaussian")
        gaussians = [e for e in self.events if e.kind == "gaussian"]
        gaussian_eps = _exact_sum(e.epsilon for e in gaussians)
        if len(gaussians) >= 2:
            gaussian_delta_total = _down(_exact_sum(e.delta for e in gaussians))
            multipliers = tuple(sorted(float(e.noise_multiplier or 0.0) for e in gaussians))
            pld_eps = _round_up(_pld_gaussian_epsilon(multipliers, gaussian_delta_total))
            if math.isfinite(pld_eps) and Fraction(pld_eps) < gaussian_eps:
                gaussian_eps = Fraction(pld_eps)
        epsilon = _up(other_eps + gaussian_eps)
        delta = _sum_up(e.delta for e in self.events)
        rho = self.total_rho()
        if rho is not None and rho > 0 and 0.0 < delta < 1.0:
            from dpcvx.accounting.zcdp import zcdp_to_dp

            # zCDP composes additively: the whole ledger is rho-zCDP, hence (eps_z, delta)-DP
            # (zcdp_to_dp is an upper bound on the real-number conversion, rho the exact sum
            # rounded up)
            epsilon = min(epsilon, zcdp_to_dp(rho, delta))
        return Guarantee(epsilon=epsilon, delta=delta, neighbors=self.neighbors)

    def total_rho(self) -> float | None:
        """The ledger's zCDP parameter (additive composition; the exact sum, rounded up), or
        None when some event has no zCDP form (a generic ``(epsilon, delta)`` event)."""
        exact = self._exact_rho()
        return None if exact is None else _up(exact)

    def _exact_rho(self) -> Fraction | None:
        """:meth:`total_rho` in exact arithmetic."""
        rhos = [e._exact_rho() for e in self.events]
        if any(r is None for r in rhos):
            return None
        return _exact_sum(r for r in rhos if r is not None)

    def __str__(self) -> str:
        rows = [(e.label, f"{e.epsilon:.6g}", f"{e.delta:.6g}", e.kind) for e in self.events]
        header = ("label", "epsilon", "delta", "kind")
        if self.events:
            total = self.total()
            footer = ("total", f"{total.epsilon:.6g}", f"{total.delta:.6g}", "composed")
        else:
            footer = ("total", "0", "0", "(empty)")
        table = [header, *rows, footer]
        widths = [max(len(row[i]) for row in table) for i in range(4)]

        def line(row: tuple[str, str, str, str]) -> str:
            return "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()

        rule = "  ".join("-" * w for w in widths)
        body = []
        for event, row in zip(self.events, rows):
            body.append(line(row))
            # a composite release shows how its epsilon splits (e.g. disjoint blocks)
            split = event.detail.get("split", ())
            body += [f"  | {part}" for part in split]  # type: ignore[attr-defined]
        return "\n".join([line(header), rule, *body, rule, line(footer)])


def _share(total: float, parts: int) -> float:
    """The largest float ``s`` with ``parts * s <= total`` exactly."""
    share = total / parts
    while Fraction(share) * parts > Fraction(total):
        share = math.nextafter(share, 0.0)
    return share


def _check_parts(parts: object, owner: str) -> int:
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
        raise InvalidParameterError(
            f"`{owner}` takes a positive integer number of parts. Got {parts!r}."
        )
    return parts


def _check_relation(event: PrivacyEvent, relation: NeighborRelation, holder: str) -> None:
    if event.neighbors != relation:
        what = "the ledger's events are" if holder == "ledger" else "the accountant's budget is"
        raise InvalidParameterError(
            f"The event {event.label!r} is stated under {event.neighbors} neighbors, but "
            f"{what} under {relation} neighbors: guarantees under different relations do not "
            "compose. Nothing was recorded. Use an accountant (or ledger) whose `neighbors` "
            "is the event's relation."
        )


class Accountant:
    """A privacy budget ``(epsilon, delta)`` that releases reserve from before drawing noise.

    Parameters
    ----------
    epsilon : float
        Positive finite total epsilon. It is held exactly (see Notes).
    delta : float, optional
        Total delta in ``[0, 1)``; ``0`` (default) allows pure releases only.
    neighbors : NeighborRelation, optional
        The relation of the budget (default :data:`~dpcvx.neighbors.REPLACE_ONE`; the names
        ``"replace-one"`` and ``"add-remove-one"`` are accepted). Events under another relation
        are refused with :class:`~dpcvx.InvalidParameterError`, recording nothing (composition
        across relations is not defined).

    Raises
    ------
    InvalidParameterError
        If ``epsilon``, ``delta`` or ``neighbors`` is out of range.

    Notes
    -----
    The accountant is the only mutable object of the accounting stage. Reservations are
    atomic (a lock guards them) and permanent: nothing is ever removed, so a release that fails
    after reserving still counts as spent.

    **Exact budget.** The budget is the float given, exactly. An event is accepted only when
    the composed total, computed in exact rational arithmetic, is at most the budget: no
    tolerance. So splitting by float division may not fit: ``Accountant(1.0)`` refuses the
    tenth release of ``epsilon=0.1`` (ten floats ``0.1`` add up to slightly more than 1). To
    split a budget into ``k`` releases, charge each ``accountant.share(k)`` (computed once,
    before the first of them), or charge the last release ``accountant.remaining``::

        accountant = dpcvx.Accountant(1.0, 1e-6)
        part = accountant.share(10)  # ten of these fit exactly
        for i in range(10):
            problem.solve_private(mechanism, epsilon=part.epsilon, delta=part.delta,
                                  accountant=accountant)

    ``spent.epsilon`` is (rounded up) the smaller of the ledger's :meth:`Ledger.total` epsilon
    and the exact running sum "previous spent epsilon + new event epsilon" (both valid bounds).
    The second keeps the promise that any event with ``epsilon <= remaining.epsilon`` and
    ``delta <= remaining.delta`` can be reserved, even though a PLD estimate need not be
    monotone in the events added.
    """

    __slots__ = ("_budget", "_ledger", "_lock", "_spent_exact")

    def __init__(
        self, epsilon: float, delta: float = 0.0, *, neighbors: NeighborRelation = REPLACE_ONE
    ) -> None:
        owner = "Accountant"
        eps = check_positive(epsilon, "epsilon", owner)
        d = check_delta(delta, owner)
        relation = as_relation(neighbors)
        self._budget = Guarantee(epsilon=eps, delta=d, neighbors=relation)
        self._ledger = Ledger(neighbors=relation)
        # the exact spent epsilon (a valid bound on the composition of the ledger's events)
        self._spent_exact = Fraction(0)
        self._lock = threading.Lock()

    @property
    def budget(self) -> Guarantee:
        """The total budget, under the accountant's relation."""
        return self._budget

    @property
    def ledger(self) -> Ledger:
        """A snapshot of the events reserved so far (immutable)."""
        return self._ledger

    @property
    def neighbors(self) -> NeighborRelation:
        """The relation of the budget (and of every reserved event)."""
        return self._budget.neighbors

    def share(self, parts: int) -> Guarantee:
        """One of ``parts`` equal shares of the *remaining* budget.

        Parameters
        ----------
        parts : int
            The number of releases to split the remaining budget into (positive).

        Returns
        -------
        Guarantee
            The largest ``(epsilon, delta)`` (floats) such that ``parts`` releases at it fit the
            remaining budget exactly: ``parts * epsilon <= remaining.epsilon`` and
            ``parts * delta <= remaining.delta`` in exact arithmetic. The epsilon is the float
            ``remaining.epsilon / parts`` or a float or two below it.

        Raises
        ------
        InvalidParameterError
            If ``parts`` is not a positive integer.

        Notes
        -----
        Compute the share once, before the first of the ``parts`` releases: a share computed
        later divides what is left then.
        """
        parts = _check_parts(parts, "Accountant.share")
        left = self.remaining
        return Guarantee(
            epsilon=_share(left.epsilon, parts),
            delta=_share(left.delta, parts),
            neighbors=self.neighbors,
        )

    def _spent_delta_exact(self) -> Fraction:
        return _exact_sum(e.delta for e in self._ledger)

    @property
    def spent(self) -> Guarantee:
        """The composed guarantee of every reservation so far (exact values rounded up)."""
        return Guarantee(
            epsilon=_up(self._spent_exact),
            delta=_up(self._spent_delta_exact()),
            neighbors=self.neighbors,
        )

    @property
    def remaining(self) -> Guarantee:
        """The remaining budget: ``budget`` minus the exact spent values, rounded down and
        clipped at 0. Any event within it can still be reserved (charge the last release of a
        split budget this), and it is at least ``share(k)`` while releases at that share are
        due. (``spent`` is rounded up for display, so ``spent + remaining`` may exceed the
        budget by a rounding error; the exact values never do.)"""
        return Guarantee(
            epsilon=_down(Fraction(self._budget.epsilon) - self._spent_exact),
            delta=_down(Fraction(self._budget.delta) - self._spent_delta_exact()),
            neighbors=self.neighbors,
        )

    def _candidate(self, event: PrivacyEvent) -> tuple[Ledger, Fraction, Fraction]:
        """The ledger with ``event`` appended, and its exact epsilon and delta bounds."""
        if not isinstance(event, PrivacyEvent):
            raise InvalidParameterError(
                f"`Accountant.reserve` takes a PrivacyEvent. Got {type(event).__name__}: {event!r}."
            )
        _check_relation(event, self.neighbors, "accountant")
        ledger = self._ledger.append(event)
        composed = Fraction(ledger.total().epsilon)
        running = self._spent_exact + Fraction(event.epsilon)
        delta = self._spent_delta_exact() + Fraction(event.delta)
        return ledger, min(composed, running), delta

    def _fits(self, epsilon: Fraction, delta: Fraction) -> bool:
        """Whether an exact total is within the budget (exactly: no tolerance)."""
        return epsilon <= Fraction(self._budget.epsilon) and delta <= Fraction(self._budget.delta)

    def can_afford(self, event: PrivacyEvent) -> bool:
        """Whether :meth:`reserve` would accept ``event`` now (nothing is reserved).

        Raises
        ------
        InvalidParameterError
            If ``event`` is not a PrivacyEvent or is under another relation.
        """
        with self._lock:
            _, epsilon, delta = self._candidate(event)
            return self._fits(epsilon, delta)

    def reserve(self, event: PrivacyEvent) -> None:
        """Record ``event`` if the budget allows it, before any noise is drawn.

        Parameters
        ----------
        event : PrivacyEvent
            The release about to happen.

        Raises
        ------
        PrivacyBudgetError
            If the composed total after adding ``event`` would exceed the budget (exact
            sums, no tolerance: see :meth:`share`). Nothing is recorded then.
        InvalidParameterError
            If ``event`` is not a PrivacyEvent, or is stated under another neighboring
            relation than the budget. Nothing is recorded then.
        """
        with self._lock:
            ledger, epsilon, delta = self._candidate(event)
            if not self._fits(epsilon, delta):
                spent = self.spent
                raise PrivacyBudgetError(
                    f"Reserving {event.label!r} ({event.guarantee}) would exceed the privacy "
                    f"budget {self._budget}: already spent epsilon={spent.epsilon:.6g}, "
                    f"delta={spent.delta:.6g}; composed total would be "
                    f"epsilon={_up(epsilon):.17g}, delta={_up(delta):.17g}. Nothing was "
                    "reserved. Lower the release's epsilon/delta (split a budget into k equal "
                    "releases with `accountant.share(k)`: the float epsilon/k can add up to more "
                    "than epsilon; or charge the last release `accountant.remaining`), or use a "
                    "new accountant with a larger budget (for new data)."
                )
            self._ledger = ledger
            self._spent_exact = epsilon

    def reserve_all(self, events: Iterable[PrivacyEvent]) -> None:
        """Record every event of one release (e.g. each step of an iterative mechanism) if
        the budget allows all of them together; otherwise raise PrivacyBudgetError (or
        InvalidParameterError for an event under another relation) and record none (all or
        nothing)."""
        events = tuple(events)
        if not events:
            return
        with self._lock:
            saved = (self._ledger, self._spent_exact)
            try:
                for event in events:
                    self._reserve_unlocked(event)
            except BaseException:
                self._ledger, self._spent_exact = saved
                raise

    def _reserve_unlocked(self, event: PrivacyEvent) -> None:
        ledger, epsilon, delta = self._candidate(event)
        if not self._fits(epsilon, delta):
            raise PrivacyBudgetError(
                f"Reserving {event.label!r} would exceed the privacy budget {self._budget}: "
                f"the composed total would be epsilon={_up(epsilon):.17g}, "
                f"delta={_up(delta):.17g}. Nothing of this release was reserved."
            )
        self._ledger = ledger
        self._spent_exact = epsilon

    def _relation_repr(self) -> str:
        return "" if self.neighbors == REPLACE_ONE else f", neighbors={self.neighbors!r}"

    def __repr__(self) -> str:
        spent = self.spent
        return (
            f"Accountant(epsilon={self._budget.epsilon!r}, delta={self._budget.delta!r}"
            f"{self._relation_repr()}; spent epsilon={spent.epsilon:.6g}, "
            f"delta={spent.delta:.6g}; {len(self._ledger)} events)"
        )


class ZcdpAccountant(Accountant):
    """A privacy budget in zero-concentrated DP: ``rho``-zCDP in total (additive composition).

    Parameters
    ----------
    rho : float
        Positive finite total rho, held exactly (like an :class:`Accountant`'s epsilon).
    neighbors : NeighborRelation, optional
        The relation of the budget (default replace-one); events under another relation are
        refused, recording nothing.

    Notes
    -----
    Every reserved event must have a zCDP form (pure: ``epsilon^2/2``; Gaussian: ``1/(2 m^2)``;
    kind ``"zcdp"``: its ``rho``), computed exactly. An event is accepted only when the exact
    sum of the rhos is at most ``rho``. ``spent_rho`` is that sum rounded up,
    ``remaining_rho`` the remainder rounded down (an event of exactly that rho fits), and
    ``share_rho(k)`` the largest rho of which ``k`` events fit. The ``(epsilon, delta)`` view
    (``spent``) is the ledger's composed guarantee; there is no ``(epsilon, delta)`` cap, so
    ``remaining`` is ``(inf, 1)`` and :meth:`share` is refused (use :meth:`share_rho`).
    """

    __slots__ = ("_rho",)

    def __init__(self, rho: float, *, neighbors: NeighborRelation = REPLACE_ONE) -> None:
        self._rho = check_positive(rho, "rho", "ZcdpAccountant")
        super().__init__(epsilon=1.0, delta=0.0, neighbors=neighbors)
        # no (epsilon, delta) cap of its own: the cap is rho (any delta may be stated later)
        self._budget = Guarantee(epsilon=math.inf, delta=1.0, neighbors=self.neighbors)

    @property
    def rho(self) -> float:
        """The total rho budget."""
        return self._rho

    @property
    def spent_rho(self) -> float:
        """The rho reserved so far (the exact sum, rounded up)."""
        return self._ledger.total_rho() or 0.0

    @property
    def remaining_rho(self) -> float:
        """``rho - spent_rho`` in exact arithmetic, rounded down and clipped at 0: an event of
        this rho still fits."""
        return _down(Fraction(self._rho) - (self._ledger._exact_rho() or Fraction(0)))

    @property
    def remaining(self) -> Guarantee:
        """``(inf, 1)``: a zCDP budget has no ``(epsilon, delta)`` cap (see
        :attr:`remaining_rho`)."""
        return Guarantee(epsilon=math.inf, delta=1.0, neighbors=self.neighbors)

    def share(self, parts: int) -> Guarantee:
        """Refused: a zCDP budget is split in rho, with :meth:`share_rho`."""
        raise InvalidParameterError(
            "A ZcdpAccountant's budget is in rho, not (epsilon, delta): split it with "
            f"`share_rho({parts!r})`."
        )

    def share_rho(self, parts: int) -> float:
        """The largest rho (a float) of which ``parts`` events fit the remaining rho budget
        exactly (``remaining_rho / parts`` or a float or two below it).

        Raises
        ------
        InvalidParameterError
            If ``parts`` is not a positive integer.
        """
        parts = _check_parts(parts, "ZcdpAccountant.share_rho")
        return _share(self.remaining_rho, parts)

    def __repr__(self) -> str:
        return (
            f"ZcdpAccountant(rho={self._rho!r}{self._relation_repr()}; "
            f"spent rho={self.spent_rho:.6g}; {len(self._ledger)} events)"
        )

    def _rho_candidate(self, event: PrivacyEvent) -> tuple[Ledger, bool]:
        """The ledger with ``event`` appended, and whether its exact rho fits the budget."""
        if not isinstance(event, PrivacyEvent):
            raise InvalidParameterError(
                f"`ZcdpAccountant.reserve` takes a PrivacyEvent. Got {type(event).__name__}."
            )
        _check_relation(event, self.neighbors, "accountant")
        if event._exact_rho() is None:
            raise InvalidParameterError(
                f"The event {event.label!r} ({event.kind}) has no zCDP form; a ZcdpAccountant "
                "takes pure, Gaussian and zCDP events only."
            )
        ledger = self._ledger.append(event)
        total = ledger._exact_rho()
        assert total is not None  # every event has a zCDP form
        return ledger, total <= Fraction(self._rho)

    def can_afford(self, event: PrivacyEvent) -> bool:
        with self._lock:
            return self._rho_candidate(event)[1]

    def reserve(self, event: PrivacyEvent) -> None:
        """Record ``event`` if the rho budget allows it (exact sums, no tolerance); raises
        PrivacyBudgetError otherwise (InvalidParameterError for an event without a zCDP form or
        under another relation), recording nothing."""
        with self._lock:
            ledger, fits = self._rho_candidate(event)
            if not fits:
                raise PrivacyBudgetError(
                    f"Reserving {event.label!r} (rho = {event.implied_rho():.6g}) would exceed "
                    f"the zCDP budget: rho spent {self.spent_rho:.6g} of {self._rho:.6g}. "
                    "Nothing was reserved. Split a rho budget with `share_rho(k)`."
                )
            self._commit(ledger)

    def _reserve_unlocked(self, event: PrivacyEvent) -> None:
        ledger, fits = self._rho_candidate(event)
        if not fits:
            raise PrivacyBudgetError(
                f"Reserving {event.label!r} would exceed the zCDP budget rho = {self._rho:.6g}. "
                "Nothing of this release was reserved."
            )
        self._commit(ledger)

    def _commit(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._spent_exact = Fraction(ledger.total().epsilon)
