"""Paper 004's deletion-stability output perturbation, Algorithms 1 and 2, as exact, audited
**reference** implementations (exponential in the stability radius: tests and audits only).

Paper 004 is Ghazi, Kamath, Kumar, Meka, Manurangsi and Zhang, "On User-Level Private Convex
Optimization". ``L...`` are line numbers of its seed text
``shared/papers/004_57fbb49219620e0c.txt``; "erratum #" and "P#" are the numbered errata
(Section 11) and pitfalls (Section 10) of its digest; "spec C.#" is
``shared/papers/specs_001_004.md``. The public calibration (``epsilon_bar``, ``delta_bar``,
``kappa``, the radius law, ``sigma``) is :mod:`dpcvx.mechanisms.deletion`.

What is here
------------
:class:`DelOutputPert` (Alg 1, L135-145, Thm 3.3; spec C.3)
    For any deterministic, total ``f`` of a sub-dataset (the kept users' ``(n', m, ...)`` item
    arrays, canonical order) and any public ``Delta``: evaluate ``F[T] = f(x_{-T})`` for every
    deleted set ``|T| <= 4 kappa + 1``, ``D[T] = max_{i not in T} ||F[T] - F[T + i]||`` for
    ``|T| <= 4 kappa``; ``x_{-S}`` is stable iff ``max_{T >= S, |T| <= 4 kappa} D[T] <= Delta``
    (the bad-set form of Alg 1 line 5, digest 4.1). Only then draw ``R1 ~ TDLap`` (line 4) and
    release ``F[S] + N(0, sigma^2 I)`` for the first stable ``S`` with ``|S| <= R1``, scanning
    sizes ``0..R1`` and, within a size, sets in lexicographic order of user index (line 9: any
    tie rule is private); ``bottom`` (line 7, erratum 2) when there is none. ``bottom`` is an
    output: it is returned (``w=None, bottom=True``), never raised, and counted by the guarantee.
:class:`SCOutputPert` (Alg 2, L235-239, Thm 3.1; spec C.4)
    Algorithm 1 on the exact minimizer of a closed-form strongly convex user-level ERM: the item
    loss ``(mu/2)(theta - x)^2`` on a public interval ``K = [lower, upper]``, so
    ``f(y) = clip(mean of the kept users' item means, K)``, computed with correctly rounded sums
    (order-invariant and deterministic, P3) to within a proven ``eta``. ``Delta`` is the provable
    one of erratum 1 (:func:`~dpcvx.mechanisms.deletion.deletion_sensitivity_bound` at
    ``r = 4 kappa`` with ``2G``, P4) ``+ 2 eta``, or the printed L238 value, or a public number.
    ``mode="certified"`` adds the Appendix C fast path (Lemma C.1, generalized by digest 4.3 and
    spec C.4 steps 1-8, erratum 10): one solve, per-user gradients, the bound ``U + 2 eta`` on
    ``Delta_bar_{4 kappa} f(x)``; when it is at most ``Delta``, ``S = {}`` is stable for every
    ``R1`` and ``f(x) + N(0, sigma^2)`` is exactly Algorithm 1's output; otherwise the exhaustive
    test runs. **The fast path is private only with that fallback** (P2): the plan refuses
    ``mode="certified"`` exactly when it refuses the exhaustive test.
:func:`hockey_stick` and :class:`OutputLaw`
    The exact output law of either mechanism on a dataset (``distribution``: the ``bottom``
    mass and a Gaussian mixture over the ``R1`` outcomes) and the hockey-stick divergence of two
    such laws, by closed form and by numeric integration (the audits of spec C.3 T2 / C.4 T2).

Refusals (typed, before any data is read and before anything is spent): ``n < 4 kappa + 2``
users (some evaluated sub-dataset would be empty) and ``N(n, kappa) = sum_{t <= 4 kappa + 1}
C(n, t) > max_subsets`` (default ``10^5``). At ``epsilon = 8, delta = 0.05`` (``kappa = 3``),
``n = 14`` needs 16,383 evaluations and ``n = 16`` 65,399; at ``epsilon = 1, delta = 1e-6``
(``kappa = 32``, ``n >= 130``) more than ``10^30``.

Never released or logged (P13): ``R1``, ``S``, the bad sets, any ``F[T]``, the certificate, or
which path ran. The running time does reveal the path (and ``f``'s cost): treat it as observable.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from scipy import integrate
from scipy.special import ndtr

from dpcvx._validation import check_positive, check_real
from dpcvx.accounting.ledger import Accountant, PrivacyEvent
from dpcvx.errors import DataError, InvalidParameterError
from dpcvx.mechanisms.deletion import (
    DeletionCalibration,
    deletion_calibration,
    deletion_sensitivity_bound,
    tdlap_sample,
)
from dpcvx.neighbors import ReplaceOneUser
from dpcvx.rng import make_rng
from dpcvx.types import Guarantee

__all__ = [
    "DelOutputPert",
    "DeletionOutput",
    "DeletionPlan",
    "OutputLaw",
    "SCOutputPert",
    "hockey_stick",
    "subset_count",
]

#: default public budget of sub-dataset evaluations of the exhaustive stability test
DEFAULT_MAX_SUBSETS = 100_000
_MODES = ("exhaustive", "certified")
_GAUSSIANS = ("paper", "analytic")
#: unit roundoff of float64
_U = 2.0**-53
#: up to this many users the bitmask-to-row map is a dense array (2^n entries)
_DENSE_USERS = 20


def _up(value: float) -> float:
    """``value`` (non-negative) rounded up past the error of a few float operations."""
    return float(np.nextafter(value * (1.0 + 2.0**-44), math.inf))


def _check_int(value: object, name: str, owner: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InvalidParameterError(
            f"The `{name}` parameter of `{owner}` must be an int >= {minimum}. Got {value!r}."
        )
    return int(value)


def subset_count(n: int, max_deleted: int) -> int:
    """``N = sum_{t=0}^{max_deleted} C(n, t)``: the sub-datasets the exhaustive test evaluates
    (``max_deleted = 4 kappa + 1``; spec C.3 step 1). A public number."""
    owner = "subset_count"
    users = _check_int(n, "n", owner, 1)
    top = _check_int(max_deleted, "max_deleted", owner, 0)
    return sum(math.comb(users, t) for t in range(min(top, users) + 1))


# ----------------------------------------------------------------------------- plan and results
@dataclass(frozen=True, slots=True, kw_only=True)
class DeletionPlan:
    """The public numbers of one run of Algorithm 1 (or 2), fixed before any data is read.

    Attributes
    ----------
    guarantee : Guarantee
        ``(epsilon, delta)`` under replace-one-user neighbors with ``m`` items per user.
    calibration : DeletionCalibration
        ``epsilon_bar, delta_bar, kappa``, the radius ``4 kappa``, ``sigma`` (Alg 1 line 3).
    n, m, d : int
        Users, items per user, output dimension (all public).
    subsets : int
        ``N(n, kappa)``, the number of ``f`` evaluations of the exhaustive test.
    max_subsets : int
        The public cap the plan was checked against.
    target_sensitivity : float
        ``Delta`` (utility only: privacy holds for every value).
    detail : Mapping
        Public facts (paper lines, errata, ``Delta``'s formula).
    """

    guarantee: Guarantee
    calibration: DeletionCalibration
    n: int
    m: int
    d: int
    subsets: int
    max_subsets: int
    target_sensitivity: float
    detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    @property
    def sigma(self) -> float:
        return self.calibration.sigma

    def events(self, label: str) -> tuple[PrivacyEvent, ...]:
        """One ``"approx"`` event at ``(epsilon, delta)``: the mechanism is not a Gaussian
        mechanism and must not be composed as one (spec C.3 Ledger, P9)."""
        cal = self.calibration
        detail = {
            "paper": "004 Alg 1, Thm 3.3",
            "epsilon_bar": cal.epsilon_bar,
            "delta_bar": cal.delta_bar,
            "kappa": cal.kappa,
            "sigma": cal.sigma,
            "center_sensitivity": cal.center_sensitivity,
            **dict(self.detail),
        }
        return (
            PrivacyEvent(
                label=label,
                epsilon=self.guarantee.epsilon,
                delta=self.guarantee.delta,
                kind="approx",
                detail=detail,
                neighbors=self.guarantee.neighbors,
            ),
        )

    def facts(self) -> MappingProxyType:
        cal = self.calibration
        facts = dict(self.detail)
        facts.update(
            {
                "kappa": cal.kappa,
                "radius": cal.radius,
                "sigma": cal.sigma,
                "target_sensitivity": self.target_sensitivity,
                "min_users": cal.min_users,
                "subsets": self.subsets,
                "max_subsets": self.max_subsets,
            }
        )
        return MappingProxyType(facts)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletionOutput:
    """One release. ``w`` is ``None`` exactly when the output is ``bottom`` (Alg 1 line 7), a
    legitimate output covered by ``guarantee``; composite mechanisms map it to a public fallback
    (post-processing, P6)."""

    w: np.ndarray | None
    bottom: bool
    guarantee: Guarantee
    seeded: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputLaw:
    """The exact output law of one run on one dataset (tests and audits only: it is computed
    from the data and must never be released).

    ``bottom`` is ``Pr[output = bottom]``; the rest is the mixture
    ``sum_k weights[k] N(centers[k], sigma^2 I)`` (one component per distinct released centre,
    merged over the ``R1`` outcomes)."""

    bottom: float
    weights: tuple[float, ...]
    centers: np.ndarray  # shape (k, d)
    sigma: float


# ----------------------------------------------------------------------------- exhaustive engine
@dataclass(frozen=True, slots=True)
class _Table:
    """The exhaustive test's data on one dataset (never released): ``masks[t]`` the deleted
    sets of size ``t`` as bitmasks, in lexicographic order of their sorted user indices;
    ``F[k]`` the value on ``x_{-mask}`` and ``M[k] = max_{T >= mask, |T| <= radius} D[T]`` for
    the mask of row ``k`` (``inf`` for ``|mask| > radius``)."""

    masks: tuple[np.ndarray, ...]
    rows: Callable[[np.ndarray], np.ndarray]
    F: np.ndarray
    M: np.ndarray


def _stability_table(
    n: int, radius: int, evaluate: Callable[[tuple[int, ...]], np.ndarray]
) -> _Table:
    """``F[T]`` for every ``|T| <= radius + 1`` (``radius + 1 <= n - 1``: every sub-dataset
    keeps a user) and the upward closure ``M`` of ``D[T] = max_{i not in T} ||F[T] - F[T + i]||``
    over ``|T| <= radius`` (spec C.3 steps 2-4). ``evaluate(kept)`` gets the kept users in
    increasing order."""
    top = radius + 1
    everyone = range(n)
    by_size: list[np.ndarray] = []
    values: list[np.ndarray] = []
    lookup: dict[int, int] = {}
    for t in range(top + 1):
        masks = []
        for deleted in itertools.combinations(everyone, t):
            mask = 0
            for i in deleted:
                mask |= 1 << i
            lookup[mask] = len(values)
            values.append(evaluate(tuple(i for i in everyone if not mask >> i & 1)))
            masks.append(mask)
        by_size.append(np.asarray(masks, dtype=np.int64))
    F = np.asarray(values, dtype=np.float64)
    if n <= _DENSE_USERS:
        dense = np.full(1 << n, -1, dtype=np.int64)
        for mask, k in lookup.items():
            dense[mask] = k

        def rows(masks: np.ndarray) -> np.ndarray:
            return dense[masks]

    else:

        def rows(masks: np.ndarray) -> np.ndarray:
            return np.fromiter((lookup[int(v)] for v in masks), dtype=np.int64, count=masks.size)

    M = np.full(len(values), math.inf)
    for t in range(radius, -1, -1):
        level = by_size[t]
        own = rows(level)
        worst = np.full(level.size, -math.inf)
        for i in everyone:
            bit = np.int64(1) << np.int64(i)
            outside = (level & bit) == 0
            if not np.any(outside):
                continue
            bigger = rows(level[outside] | bit)
            diffs = F[bigger] - F[own[outside]]
            dist = np.sqrt(np.sum(diffs * diffs, axis=1))
            if t < radius:  # the closure over supersets of size <= radius
                dist = np.maximum(dist, M[bigger])
            worst[outside] = np.maximum(worst[outside], dist)
        M[own] = worst
    return _Table(masks=tuple(by_size), rows=rows, F=F, M=M)


def _first_stable(table: _Table, max_size: int, target: float) -> int | None:
    """The row of the first stable deleted set (sizes ``0..max_size``, lexicographic within a
    size; Alg 1 line 9), or None."""
    for s in range(max_size + 1):
        own = table.rows(table.masks[s])
        hits = np.flatnonzero(table.M[own] <= target)
        if hits.size:
            return int(own[hits[0]])
    return None


def _deleted_count(table: _Table, row: int) -> int:
    """``|S|`` of the set at ``row``."""
    total = 0
    for s, masks in enumerate(table.masks):
        total += masks.size
        if row < total:
            return s
    raise AssertionError("row out of range")  # pragma: no cover


def _selection(table: _Table, max_size: int, target: float) -> tuple[int | None, np.ndarray | None]:
    """``(|S*|, F[S*])`` for the first stable set ``S*`` with ``|S*| <= max_size``, or
    ``(None, None)``."""
    row = _first_stable(table, max_size, target)
    if row is None:
        return None, None
    return _deleted_count(table, row), table.F[row].copy()


def _law_from_choice(
    cal: DeletionCalibration, chosen: int | None, center: np.ndarray | None
) -> OutputLaw:
    """Alg 1's exact law from ``chosen = |S*|`` and ``center = F[S*]``, ``S*`` the first stable
    set of the fixed scan with ``|S*| <= 2 kappa`` (None: there is none). Since the scan order
    does not depend on ``R1``, the run with ``R1 = r`` releases ``F[S*] + N(0, sigma^2 I)``
    when ``|S*| <= r`` and bottom otherwise: the bottom mass is ``Pr[R1 < |S*|]``."""
    pmf = np.asarray(cal.tdlap_pmf, dtype=np.float64)
    if chosen is None or center is None:
        return OutputLaw(bottom=1.0, weights=(), centers=np.zeros((0, 0)), sigma=cal.sigma)
    size = chosen
    bottom = float(np.sum(pmf[:size]))
    released = float(np.sum(pmf[size:]))
    return OutputLaw(
        bottom=bottom,
        weights=(released,),
        centers=np.asarray(center, float).reshape(1, -1).copy(),
        sigma=cal.sigma,
    )


# ----------------------------------------------------------------------------- Algorithm 1
def _check_gaussian(value: object, owner: str) -> str:
    if not isinstance(value, str) or value not in _GAUSSIANS:
        raise InvalidParameterError(
            f"The `gaussian` parameter of `{owner}` must be 'paper' or 'analytic'. Got {value!r}."
        )
    return value


def _plan_counts(
    owner: str,
    n: object,
    m: object,
    d: object,
    epsilon: float,
    delta: float,
    target: float,
    gaussian: str,
    max_subsets: int,
) -> tuple[int, int, int, DeletionCalibration, int]:
    """The public checks shared by both algorithms (spec C.3 step 1)."""
    users = _check_int(n, "n", owner, 1)
    items = _check_int(m, "m", owner, 1)
    dim = _check_int(d, "d", owner, 1)
    cal = deletion_calibration(epsilon, delta, target, gaussian)  # type: ignore[arg-type]
    if users < cal.min_users:
        raise InvalidParameterError(
            f"`{owner}` needs n >= 4 kappa + 2 = {cal.min_users} users at epsilon={epsilon!r}, "
            f"delta={delta!r} (kappa = {cal.kappa}): the stability test deletes up to "
            f"{cal.radius + 1} users. Got n = {users}. Nothing was spent."
        )
    count = subset_count(users, cal.radius + 1)
    if count > max_subsets:
        raise InvalidParameterError(
            f"`{owner}`'s exhaustive stability test would evaluate N = {count} sub-datasets "
            f"(all deletions of up to 4 kappa + 1 = {cal.radius + 1} of {users} users), above "
            f"max_subsets = {max_subsets}. This is a reference implementation, exponential in "
            "the stability radius (004 L457); raise `max_subsets` or use the naive user-level "
            "output perturbation. Nothing was spent."
        )
    return users, items, dim, cal, count


def _check_users(plan: DeletionPlan, users: Any, owner: str) -> np.ndarray:
    """The item array, shape ``(n, m, ...)`` as planned (public shape only)."""
    if not isinstance(plan, DeletionPlan):
        raise InvalidParameterError(
            f"The `plan` parameter of `{owner}` must be a DeletionPlan from `{owner}.plan`. "
            f"Got {type(plan).__name__}."
        )
    try:
        arr = np.asarray(users, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(f"`{owner}` needs a numeric array of user items.") from None
    if arr.ndim < 2 or arr.shape[0] != plan.n or arr.shape[1] != plan.m:
        raise DataError(
            f"`{owner}` was planned for n = {plan.n} users of m = {plan.m} items: the data must "
            f"have shape ({plan.n}, {plan.m}, ...). Got {arr.shape}. Nothing was spent."
        )
    return arr


def _check_accountant(accountant: Any, owner: str) -> Accountant | None:
    if accountant is not None and not isinstance(accountant, Accountant):
        raise InvalidParameterError(
            f"The `accountant` parameter of `{owner}` must be a dpcvx.Accountant or None."
        )
    return accountant


@dataclass(frozen=True, slots=True, kw_only=True)
class DelOutputPert:
    """Paper 004's ``DelOutputPert`` (Algorithm 1, Thm 3.3): output perturbation of any function
    of the users' data after an exhaustive deletion-stability test. **Reference only**: it
    evaluates ``function`` on every sub-dataset with up to ``4 kappa + 1`` users deleted,
    ``n^Theta(log(1/delta)/epsilon)`` evaluations (004 L457).

    Parameters
    ----------
    function : callable
        ``function(items) -> array of shape (d,)`` where ``items`` holds the kept users' items,
        shape ``(n', m, ...)``, users in increasing index order. It must be deterministic (no
        warm starts, no randomness, no thread-dependent reductions; P3). It is made total: an
        exception or a non-finite or wrongly shaped value becomes ``fallback`` (still a function
        of the sub-dataset, so privacy is unaffected).
    target_sensitivity : float
        ``Delta`` (public). Privacy holds for every value; it sets ``sigma`` and which
        sub-datasets count as stable.
    gaussian : {"paper", "analytic"}
        ``sigma``'s calibration (:func:`~dpcvx.mechanisms.deletion.deletion_calibration`).
    max_subsets : int
        Public cap on the number of evaluations; the plan refuses above it. Default ``10^5``.
    fallback : array-like, optional
        The public value used where ``function`` fails (default the zero vector).

    Notes
    -----
    Guarantee: ``(epsilon, delta)``-DP under replace-one-user neighbors, for every ``function``,
    ``Delta`` and dataset (Thm 3.3; the proof, L159-221, uses ``Pr[R1 = 0] = Pr[R1 = 2 kappa] <=
    delta_bar``, adjacent radius masses within ``e^epsilon_bar``, Obs 3.5 and the Gaussian
    mechanism at sensitivity ``8 kappa Delta``). ``bottom`` is an output. Errata: 2 (line 6 reads
    "the stable set is empty"); P12 (outward ``kappa``, exact radius sampling), P13, P17
    (``epsilon > 1`` allowed).
    """

    function: Callable[[np.ndarray], Any]
    target_sensitivity: float
    gaussian: str = "paper"
    max_subsets: int = DEFAULT_MAX_SUBSETS
    fallback: Any = None

    _owner: ClassVar[str] = "DelOutputPert"

    def __post_init__(self) -> None:
        owner = self._owner
        if not callable(self.function):
            raise InvalidParameterError(f"The `function` parameter of `{owner}` must be callable.")
        object.__setattr__(
            self,
            "target_sensitivity",
            check_positive(self.target_sensitivity, "target_sensitivity", owner),
        )
        _check_gaussian(self.gaussian, owner)
        object.__setattr__(
            self, "max_subsets", _check_int(self.max_subsets, "max_subsets", owner, 1)
        )
        if self.fallback is not None:
            fb = np.asarray(self.fallback, dtype=np.float64)
            if fb.ndim != 1 or not np.all(np.isfinite(fb)):
                raise InvalidParameterError(
                    f"The `fallback` parameter of `{owner}` must be a finite vector."
                )
            object.__setattr__(self, "fallback", fb)

    def plan(self, *, n: int, m: int, d: int, epsilon: float, delta: float) -> DeletionPlan:
        """Public numbers only; refuses (InvalidParameterError, nothing spent) when
        ``n < 4 kappa + 2`` or the exhaustive test exceeds ``max_subsets``."""
        users, items, dim, cal, count = _plan_counts(
            self._owner,
            n,
            m,
            d,
            epsilon,
            delta,
            self.target_sensitivity,
            self.gaussian,
            self.max_subsets,
        )
        if self.fallback is not None and self.fallback.shape != (dim,):
            raise InvalidParameterError(
                f"The `fallback` of `{self._owner}` must have shape ({dim},). Got "
                f"{self.fallback.shape}."
            )
        return DeletionPlan(
            guarantee=Guarantee(
                epsilon=cal.epsilon, delta=cal.delta, neighbors=ReplaceOneUser(items)
            ),
            calibration=cal,
            n=users,
            m=items,
            d=dim,
            subsets=count,
            max_subsets=self.max_subsets,
            target_sensitivity=cal.target_sensitivity,
            detail=MappingProxyType(
                {"mechanism": self._owner, "paper": "004 Alg 1 (Thm 3.3)", "errata": "2; P12, P13"}
            ),
        )

    # -- f, made total and deterministic in its interface
    def _evaluator(
        self, plan: DeletionPlan, items: np.ndarray
    ) -> Callable[[tuple[int, ...]], np.ndarray]:
        fallback = np.zeros(plan.d) if self.fallback is None else self.fallback

        def evaluate(kept: tuple[int, ...]) -> np.ndarray:
            try:
                value = np.asarray(self.function(items[list(kept)]), dtype=np.float64).reshape(-1)
            except Exception:  # noqa: BLE001 - f must be total (spec C.3)
                return fallback
            if value.shape != (plan.d,) or not np.all(np.isfinite(value)):
                return fallback
            return value

        return evaluate

    def _choose(
        self, plan: DeletionPlan, items: np.ndarray
    ) -> tuple[int | None, np.ndarray | None]:
        """Steps 2-4 of spec C.3 and the first stable set with ``|S| <= 2 kappa``."""
        cal = plan.calibration
        table = _stability_table(plan.n, cal.radius, self._evaluator(plan, items))
        return _selection(table, 2 * cal.kappa, plan.target_sensitivity)

    def release(
        self, plan: DeletionPlan, users: Any, rng: Any = None, *, accountant: Any = None
    ) -> DeletionOutput:
        """Run Algorithm 1 on ``users`` (shape ``(n, m, ...)``). The plan's event is reserved in
        ``accountant`` (if given) after the public checks and before the data is evaluated."""
        owner = self._owner
        items = _check_users(plan, users, owner)
        acct = _check_accountant(accountant, owner)
        generator, seeded = make_rng(rng)
        if acct is not None:
            acct.reserve_all(plan.events(owner))
        chosen, center = self._choose(plan, items)
        return _finish(plan, chosen, center, generator, seeded)

    def distribution(self, plan: DeletionPlan, users: Any) -> OutputLaw:
        """The exact output law on ``users`` (tests and audits only; spends nothing and must
        never be released)."""
        items = _check_users(plan, users, self._owner)
        chosen, center = self._choose(plan, items)
        return _law_from_choice(plan.calibration, chosen, center)


def _finish(
    plan: DeletionPlan,
    chosen: int | None,
    center: np.ndarray | None,
    generator: np.random.Generator,
    seeded: bool,
) -> DeletionOutput:
    """Alg 1 lines 4 and 6-10 given ``chosen = |S*|`` and ``center = F[S*]`` (see
    :func:`_law_from_choice`): draw ``R1`` (after the data-dependent work, P13), then release
    ``F[S*] + N(0, sigma^2 I)`` if ``|S*| <= R1``, else bottom. The Gaussian is drawn in both
    branches, so the generator's consumption does not depend on the branch."""
    r1 = tdlap_sample(plan.calibration, generator)
    noise = generator.standard_normal(plan.d) * plan.calibration.sigma
    if chosen is None or center is None or chosen > r1:  # chosen = |S*|
        return DeletionOutput(w=None, bottom=True, guarantee=plan.guarantee, seeded=seeded)
    return DeletionOutput(w=center + noise, bottom=False, guarantee=plan.guarantee, seeded=seeded)


# ----------------------------------------------------------------------------- Algorithm 2
@dataclass(frozen=True, slots=True)
class _Certificate:
    """Appendix C / digest 4.3 on one dataset (never released)."""

    theta: float
    rho: float
    gamma: float
    bound: float  # U + 2 eta, an upper bound on Delta_bar_{4 kappa} f(x)


@dataclass(frozen=True, slots=True, kw_only=True)
class SCOutputPert:
    """Paper 004's ``SCOutputPert`` (Algorithm 2, Thm 3.1) for the strongly convex item loss
    ``(mu/2)(theta - x)^2`` on ``K = [lower, upper]``, with the corrected ``Delta`` (erratum 1)
    and the Appendix C fast path (``mode="certified"``) backed by the exhaustive test.
    **Reference only** (exponential in the stability radius).

    Parameters
    ----------
    lower, upper : float
        The public interval ``K``. Items are clipped into ``K`` (a per-item, data-independent
        map), so ``G = mu (upper - lower)`` bounds every item gradient on ``K``.
    strong_convexity : float
        ``mu`` (exact: it is the loss's own curvature, not a claim; P14). Default 1.
    failure_probability : float
        ``beta`` in ``(0, 1)`` of the provable ``Delta``. Default ``1e-3``.
    target_sensitivity : None, "printed" or float
        ``None`` (default): the provable ``Delta = 5 (2G) sqrt(ln(1/beta) + (4 kappa + 1) ln n)
        / (mu (n - 4 kappa - 1) sqrt(m)) + 2 eta`` (erratum 1; ``2G`` because ``K`` may be
        active, P4). ``"printed"``: 004 L238, ``10 (2G) sqrt(ln(1/beta)) / (mu n sqrt(m))``, not
        proven (comparison only). A float: that public ``Delta``. Privacy holds for all three.
    mode : {"exhaustive", "certified"}
        ``"certified"`` tries the Appendix C certificate first and falls back to the exhaustive
        test; both release exactly Algorithm 1's output law.
    gaussian, max_subsets : see DelOutputPert

    Notes
    -----
    ``f(y) = clip(fsum(u_i for i in y) / |y|, K)`` with ``u_i = fsum(items of i) / m`` computed
    once per user: correctly rounded sums make it deterministic and independent of user order
    (P3), and within ``eta = 2^-49 max(|lower|, |upper|)`` of the exact minimizer of
    ``(1/|y|) sum_{i in y} (mu/2m) sum_j (theta - x_ij)^2`` over ``K``. Certificate (spec C.4
    steps 1-6; erratum 10 for Lemma C.1's constant): ``g_i = mu (theta~ - u_i)``, ``g_bar`` their
    mean, ``nu`` in the normal cone of ``K`` at ``theta~``, ``rho = |g_bar + nu|``,
    ``gamma = max_i |g_i - g_bar|``, ``r = 4 kappa`` and
    ``U = [2 rho + r gamma/(n - r) + (r + 1) gamma/(n - r - 1)] / mu`` (float errors of
    ``u_i`` added, rounded up). If ``U + 2 eta <= Delta`` then ``Delta_bar_r f(x) <= Delta``,
    ``S = {}`` is the first stable set for every ``R1``, and the release ``f(x) + N(0, sigma^2)``
    is Algorithm 1's. "Certificate passes => release, else bottom" is **not** private (P2; the
    audit's negative control).
    """

    lower: float
    upper: float
    strong_convexity: float = 1.0
    failure_probability: float = 1e-3
    target_sensitivity: Any = None
    mode: str = "exhaustive"
    gaussian: str = "paper"
    max_subsets: int = DEFAULT_MAX_SUBSETS

    _owner: ClassVar[str] = "SCOutputPert"

    def __post_init__(self) -> None:
        owner = self._owner
        lo = check_real(self.lower, "lower", owner)
        hi = check_real(self.upper, "upper", owner)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise InvalidParameterError(
                f"`{owner}` needs a finite interval lower < upper. Got [{self.lower!r}, "
                f"{self.upper!r}]."
            )
        object.__setattr__(self, "lower", lo)
        object.__setattr__(self, "upper", hi)
        object.__setattr__(
            self,
            "strong_convexity",
            check_positive(self.strong_convexity, "strong_convexity", owner),
        )
        beta = check_real(self.failure_probability, "failure_probability", owner)
        if not 0.0 < beta < 1.0:
            raise InvalidParameterError(
                f"The `failure_probability` parameter of `{owner}` must lie in (0, 1). Got "
                f"{self.failure_probability!r}."
            )
        object.__setattr__(self, "failure_probability", beta)
        target = self.target_sensitivity
        if target is not None and target != "printed":
            if isinstance(target, str):
                raise InvalidParameterError(
                    f"The `target_sensitivity` parameter of `{owner}` must be None, 'printed' or "
                    f"a positive float. Got {target!r}."
                )
            object.__setattr__(
                self,
                "target_sensitivity",
                check_positive(target, "target_sensitivity", owner),
            )
        if not isinstance(self.mode, str) or self.mode not in _MODES:
            raise InvalidParameterError(
                f"The `mode` parameter of `{owner}` must be 'exhaustive' or 'certified'. Got "
                f"{self.mode!r}."
            )
        _check_gaussian(self.gaussian, owner)
        object.__setattr__(
            self, "max_subsets", _check_int(self.max_subsets, "max_subsets", owner, 1)
        )

    # -- public numbers
    @property
    def lipschitz(self) -> float:
        """``G = mu (upper - lower)``: every item gradient ``mu (theta - x)`` on ``K``."""
        return _up(self.strong_convexity * (self.upper - self.lower))

    @property
    def accuracy(self) -> float:
        """``eta``: a bound on ``|f(y) - theta*(y)|`` for every sub-dataset ``y``."""
        return 2.0**-49 * max(abs(self.lower), abs(self.upper))

    def _target(self, n: int, m: int, epsilon: float, delta: float) -> tuple[float, str]:
        owner = self._owner
        if isinstance(self.target_sensitivity, float):
            return self.target_sensitivity, "given"
        G, mu, beta = self.lipschitz, self.strong_convexity, self.failure_probability
        if self.target_sensitivity == "printed":
            value = _up(10.0 * 2.0 * G * math.sqrt(math.log(1.0 / beta)) / (mu * n * math.sqrt(m)))
            return value, "printed (004 L238, not proven: erratum 1)"
        kappa = deletion_calibration(epsilon, delta, 1.0).kappa
        if n < 4 * kappa + 2:
            raise InvalidParameterError(
                f"`{owner}` needs n >= 4 kappa + 2 = {4 * kappa + 2} users (kappa = {kappa}). "
                f"Got n = {n}. Nothing was spent."
            )
        bound = deletion_sensitivity_bound(G, mu, n, m, beta, 4 * kappa, constrained=True)
        return _up(bound + 2.0 * self.accuracy), "provable (erratum 1, 2G for an active K: P4)"

    def plan(self, *, n: int, m: int, epsilon: float, delta: float, d: int = 1) -> DeletionPlan:
        """Public numbers only; refuses (nothing spent) as :meth:`DelOutputPert.plan` does, in
        both modes (the fast path is private only with its exhaustive fallback, P2)."""
        owner = self._owner
        users = _check_int(n, "n", owner, 1)
        items = _check_int(m, "m", owner, 1)
        if d != 1:
            raise InvalidParameterError(f"`{owner}` is one-dimensional (d = 1). Got d = {d!r}.")
        # validate the budget first, so that a bad epsilon/delta is reported as such
        deletion_calibration(epsilon, delta, 1.0, self.gaussian)  # type: ignore[arg-type]
        target, how = self._target(users, items, epsilon, delta)
        users, items, dim, cal, count = _plan_counts(
            owner, users, items, 1, epsilon, delta, target, self.gaussian, self.max_subsets
        )
        return DeletionPlan(
            guarantee=Guarantee(
                epsilon=cal.epsilon, delta=cal.delta, neighbors=ReplaceOneUser(items)
            ),
            calibration=cal,
            n=users,
            m=items,
            d=1,
            subsets=count,
            max_subsets=self.max_subsets,
            target_sensitivity=target,
            detail=MappingProxyType(
                {
                    "mechanism": owner,
                    "paper": "004 Alg 2 (Thm 3.1) via Alg 1; App C fast path (Lemma C.1)",
                    "errata": "1, 2, 10, 11, 18; P2, P3, P4, P12, P13",
                    "target_sensitivity_rule": how,
                    "lipschitz": self.lipschitz,
                    "strong_convexity": self.strong_convexity,
                    "accuracy": self.accuracy,
                    "mode": self.mode,
                }
            ),
        )

    def _check_items(self, items: np.ndarray) -> np.ndarray:
        if items.ndim != 2:
            raise DataError(
                f"`{self._owner}` is one-dimensional: the data must have shape (n, m). Got "
                f"{items.shape}. Nothing was spent."
            )
        return items

    # -- the deterministic argmin f~ (P3)
    def _user_means(self, items: np.ndarray) -> np.ndarray:
        clipped = np.clip(items.reshape(items.shape[0], -1), self.lower, self.upper)
        m = clipped.shape[1]
        return np.array([math.fsum(row) / m for row in clipped.tolist()], dtype=np.float64)

    def _argmin(self, means: np.ndarray, kept: Sequence[int]) -> float:
        value = math.fsum(means[list(kept)].tolist()) / len(kept)
        return min(max(value, self.lower), self.upper)

    def _choose(
        self, plan: DeletionPlan, means: np.ndarray
    ) -> tuple[int | None, np.ndarray | None]:
        cal = plan.calibration

        def evaluate(kept: tuple[int, ...]) -> np.ndarray:
            return np.array([self._argmin(means, kept)])

        table = _stability_table(plan.n, cal.radius, evaluate)
        return _selection(table, 2 * cal.kappa, plan.target_sensitivity)

    def _certificate(self, plan: DeletionPlan, means: np.ndarray) -> _Certificate:
        """Spec C.4 steps 1-5 on the whole dataset (never released)."""
        n, mu, r = plan.n, self.strong_convexity, plan.calibration.radius
        theta = self._argmin(means, range(n))
        grads = mu * (theta - means)  # g_i, exact up to the float error of u_i and the product
        g_bar = math.fsum(grads.tolist()) / n
        if theta >= self.upper:
            nu = max(0.0, -g_bar)  # normal cone [0, inf) at the upper end
        elif theta <= self.lower:
            nu = min(0.0, -g_bar)  # (-inf, 0] at the lower end
        else:
            nu = 0.0
        # float slack: |u_i - exact| <= 2^-51 B, the product and the mean add a few ulps
        scale = max(abs(self.lower), abs(self.upper)) + abs(theta)
        slack = mu * 2.0**-48 * scale
        rho = _up(abs(g_bar + nu) + 2.0 * slack)
        gamma = _up(float(np.max(np.abs(grads - g_bar))) + 2.0 * slack)
        U = _up((2.0 * rho + r * gamma / (n - r) + (r + 1) * gamma / (n - r - 1)) / mu)
        return _Certificate(theta=theta, rho=rho, gamma=gamma, bound=_up(U + 2.0 * self.accuracy))

    def release(
        self, plan: DeletionPlan, users: Any, rng: Any = None, *, accountant: Any = None
    ) -> DeletionOutput:
        """Run Algorithm 2 on ``users`` (shape ``(n, m)``). The event is reserved (if an
        accountant is given) after the public checks and before the data is read."""
        owner = self._owner
        items = self._check_items(_check_users(plan, users, owner))
        acct = _check_accountant(accountant, owner)
        generator, seeded = make_rng(rng)
        if acct is not None:
            acct.reserve_all(plan.events(owner))
        means = self._user_means(items)
        if self.mode == "certified":
            cert = self._certificate(plan, means)
            if cert.bound <= plan.target_sensitivity:
                # S = {} is stable for every R1: Algorithm 1's output, same generator use
                return _finish(plan, 0, np.array([cert.theta]), generator, seeded)
        chosen, center = self._choose(plan, means)
        return _finish(plan, chosen, center, generator, seeded)

    def distribution(self, plan: DeletionPlan, users: Any) -> OutputLaw:
        """The exact output law on ``users`` (tests and audits only)."""
        means = self._user_means(self._check_items(_check_users(plan, users, self._owner)))
        chosen, center = self._choose(plan, means)
        return _law_from_choice(plan.calibration, chosen, center)


# ----------------------------------------------------------------------------- audits
def _check_law(law: object, name: str) -> OutputLaw:
    if not isinstance(law, OutputLaw):
        raise InvalidParameterError(f"`hockey_stick` needs OutputLaw values. Got {name}={law!r}.")
    if law.centers.size and law.centers.shape[1] != 1:
        raise InvalidParameterError("`hockey_stick` handles one-dimensional laws only.")
    return law


def _pair_closed_form(w: float, c: float, v: float, e: float, sigma: float, factor: float) -> float:
    """``int max(0, w phi(x - c) - factor v phi(x - e)) dx`` for ``N(., sigma^2)`` densities."""
    if w <= 0.0:
        return 0.0
    if v <= 0.0:
        return w
    if c == e:
        return max(0.0, w - factor * v)
    log_ratio = math.log(w / (factor * v))
    x0 = 0.5 * (c + e) - sigma * sigma * log_ratio / (c - e)
    if c > e:  # the region is x > x0
        return max(
            0.0, w * float(ndtr((c - x0) / sigma)) - factor * v * float(ndtr((e - x0) / sigma))
        )
    return max(0.0, w * float(ndtr((x0 - c) / sigma)) - factor * v * float(ndtr((x0 - e) / sigma)))


def hockey_stick(p: OutputLaw, q: OutputLaw, epsilon: float, *, method: str = "quad") -> float:
    """``sup_S Pr_p[S] - e^epsilon Pr_q[S]`` for two one-dimensional output laws: the bottom
    atoms' ``max(0, p_bot - e^epsilon q_bot)`` plus ``int max(0, p(x) - e^epsilon q(x)) dx``.

    ``method="quad"`` integrates the Gaussian-mixture densities numerically (adaptive
    quadrature on the span of all centres +- 40 sigma, with the centres and the crossing points
    as breakpoints; the mass outside is below 1e-300). ``method="closed"`` is exact for one
    component on each side (Gaussian CDFs). Both laws must share ``sigma``."""
    p = _check_law(p, "p")
    q = _check_law(q, "q")
    eps = check_real(epsilon, "epsilon", "hockey_stick")
    factor = math.exp(eps)
    total = max(0.0, p.bottom - factor * q.bottom)
    if not p.weights:
        return total
    if q.weights and p.sigma != q.sigma:
        raise InvalidParameterError("`hockey_stick` needs laws with the same sigma.")
    sigma = p.sigma
    pc = p.centers[:, 0] if p.weights else np.zeros(0)
    qc = q.centers[:, 0] if q.weights else np.zeros(0)
    if method == "closed":
        if len(p.weights) != 1 or len(q.weights) > 1:
            raise InvalidParameterError("method='closed' needs at most one component per law.")
        v = q.weights[0] if q.weights else 0.0
        e = float(qc[0]) if q.weights else 0.0
        return total + _pair_closed_form(p.weights[0], float(pc[0]), v, e, sigma, factor)
    if method != "quad":
        raise InvalidParameterError(f"`method` must be 'quad' or 'closed'. Got {method!r}.")
    pw = np.asarray(p.weights)
    qw = np.asarray(q.weights) if q.weights else np.zeros(0)
    norm = 1.0 / (sigma * math.sqrt(2.0 * math.pi))

    def excess(x: float) -> float:
        dp = float(np.sum(pw * np.exp(-0.5 * ((x - pc) / sigma) ** 2))) * norm
        dq = float(np.sum(qw * np.exp(-0.5 * ((x - qc) / sigma) ** 2))) * norm if qw.size else 0.0
        return max(0.0, dp - factor * dq)

    centers = np.concatenate([pc, qc])
    lo = float(centers.min()) - 40.0 * sigma
    hi = float(centers.max()) + 40.0 * sigma
    points = sorted(set(np.linspace(lo, hi, 81).tolist()) | set(centers.tolist()))
    value = 0.0
    for a, b in zip(points[:-1], points[1:]):
        if b > a:
            part, _ = integrate.quad(excess, a, b, epsabs=1e-15, epsrel=1e-11, limit=200)
            value += part
    return total + value
