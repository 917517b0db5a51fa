"""The typed boundary between the release pipeline and the mechanisms.

A mechanism is a frozen dataclass of public parameters with two methods and three class
attributes (the :class:`Mechanism` protocol):

- ``plan(*, n, d, center, diameter, epsilon, delta, domain=None) -> Plan`` fixes every number
  of the release from public quantities only and validates the request (it raises
  :class:`~dpcvx.InvalidParameterError` on bad input, before anything is spent);
- ``release(plan, context, rng) -> Release`` runs the release once the budget is reserved,
  reading the data only through ``context`` (the :class:`DataAccess` protocol);
- ``requirements`` names every method of the release context it calls (``solver``,
  ``project``, ``gradients``, ``loss_values``, ``rows``, ...): a source that lacks one is
  refused before anything is spent, and when ``solver`` is named the solve templates are
  compiled before the budget is reserved; ``extension`` says which loss it solves
  (:data:`PLAIN`, :data:`PLANNED`, :data:`PER_SOLVE`); ``enforces_lipschitz`` asks the
  pipeline to enforce its ``lipschitz`` claim with the Lipschitz extension (paper 000, eq. (5));
- optionally ``preflight(plan, context)``: data-free checks of the run that need the release
  context (e.g. that an executor can run a block job), called after the templates are compiled
  and before the budget is reserved; it raises :class:`~dpcvx.InvalidParameterError`.

A plan (the :class:`Plan` protocol) carries its guarantee and emits its own privacy events
(:meth:`Plan.events`) and its public facts (:meth:`Plan.facts`), so what a plan contains is
known in one file: the mechanism's. :mod:`dpcvx.pipeline` owns validate -> plan -> reserve ->
release -> result for every data source.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

import numpy as np

from dpcvx.accounting.ledger import PrivacyEvent
from dpcvx.errors import InvalidParameterError
from dpcvx.neighbors import NeighborRelation

if TYPE_CHECKING:
    from dpcvx.certification.certificate import CertifiedSolution, ReleaseCertificate
    from dpcvx.mechanisms.noise import NoiseSpec
    from dpcvx.modeling.domains import Domain
    from dpcvx.types import Guarantee, Sensitivity

__all__ = [
    "PER_SOLVE",
    "PLAIN",
    "PLANNED",
    "DataAccess",
    "ExtensionUse",
    "Mechanism",
    "OneEventPlan",
    "PerturbedSolvePlan",
    "Plan",
    "Release",
    "noise_event",
    "exact_share",
    "perturb",
    "perturb_steps",
    "round_up",
    "single_solve_release",
]

#: which loss a mechanism's solves use
ExtensionUse = Literal["plain", "planned", "per-solve"]
#: the declared loss itself (a ``lipschitz`` claim may still be enforced by the pipeline)
PLAIN: ExtensionUse = "plain"
#: the Lipschitz extension ``f_C`` with the plan's ``extension_C``
PLANNED: ExtensionUse = "planned"
#: Lipschitz extensions whose ``C`` the mechanism gives with every solve (phases of paper 000's
#: Localized Double Output Perturbation)
PER_SOLVE: ExtensionUse = "per-solve"

#: a certified solve: ``solve(lam, w0, alpha, localize=None, candidate=None)``
Solve = Callable[..., "CertifiedSolution"]


@runtime_checkable
class DataAccess(Protocol):
    """What a mechanism may do with the data once its budget is reserved.

    Every data source's release context provides these; a mechanism names every method it
    calls (these and the optional ones: ``gradients``, ``smooth``, ``loss_values``,
    ``tilted_solver``, ``rows``) in its ``requirements``, checked before anything is spent.
    Every failure of a certified solve is one fixed :class:`~dpcvx.CertificationError` text.
    """

    n: int
    d: int

    @property
    def domain(self) -> Domain: ...

    def solver(self, indices: Any = None, C: float | None = None) -> Solve: ...

    def project(self, point: Any, localize: Any = None, xi: float | None = None) -> np.ndarray: ...


@runtime_checkable
class Plan(Protocol):
    """A mechanism's public plan: every number of the release, fixed before any data is read."""

    @property
    def guarantee(self) -> Guarantee: ...

    @property
    def extension_C(self) -> float | None:
        """The Lipschitz extension's ``C`` the solves use (``None``: the declared loss)."""
        ...

    def events(self, label: str) -> tuple[PrivacyEvent, ...]:
        """The privacy events this release records, labelled ``label`` (all or nothing)."""
        ...

    def facts(self) -> Mapping[str, Any]:
        """Public facts of the plan for :attr:`dpcvx.PrivateResult.detail`."""
        ...


@runtime_checkable
class Mechanism(Protocol):
    """A differentially private mechanism (see the module docstring)."""

    requirements: ClassVar[tuple[str, ...]]
    extension: ClassVar[ExtensionUse]
    enforces_lipschitz: ClassVar[bool]
    neighbors: ClassVar[NeighborRelation]

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
    ) -> Plan:
        """Every number of the release from public quantities: ``center`` is the source's
        domain's center (None for a source without a domain, e.g. an array of examples)."""
        ...

    def release(self, plan: Any, context: Any, rng: np.random.Generator) -> Release: ...


@dataclass(frozen=True, slots=True)
class Release:
    """What a mechanism's ``release`` returns: the released point, the public certificate of
    every solve behind it, and public facts of the run (e.g. every block's output of paper
    000's Algorithm 5, all covered by the guarantee). Unpacks as ``w, certificates, facts``."""

    w: np.ndarray
    certificates: tuple[ReleaseCertificate, ...]
    facts: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __iter__(self) -> Iterator[Any]:
        return iter((self.w, self.certificates, self.facts))

    def __getitem__(self, index: int) -> Any:
        return (self.w, self.certificates, self.facts)[index]

    def __len__(self) -> int:
        return 3


class PerturbedSolvePlan:
    """A mixin for the plan (a frozen dataclass) of one certified solve perturbed by noise:
    fields ``guarantee``, ``noise``, ``sensitivity``, ``base_sensitivity``, ``accuracy``,
    ``regularization`` and ``detail``. One event (pure, or Gaussian with the noise's
    multiplier); the public facts are the plan's numbers."""

    __slots__ = ()

    guarantee: Guarantee
    noise: NoiseSpec
    sensitivity: Sensitivity
    base_sensitivity: float
    accuracy: float
    regularization: float
    detail: Mapping[str, Any]

    def events(self, label: str) -> tuple[PrivacyEvent, ...]:
        """One event: pure, or Gaussian with the noise's multiplier."""
        return noise_event(
            label,
            self.guarantee,
            self.noise,
            {
                "sensitivity": self.sensitivity.value,
                "noise": self.noise.kind,
                "scale": self.noise.scale,
            },
        )

    def facts(self) -> Mapping[str, Any]:
        """The plan's public numbers."""
        return MappingProxyType(
            {
                **self.detail,
                "sensitivity": self.sensitivity.value,
                "base_sensitivity": self.base_sensitivity,
                "accuracy": self.accuracy,
                "noise": self.noise.kind,
                "noise_scale": self.noise.scale,
                "regularization": self.regularization,
            }
        )


class OneEventPlan:
    """A mixin for a plan (a frozen dataclass) with the fields ``guarantee``, ``detail`` (its
    public facts) and ``ledger_detail`` (the detail of its one ledger event), on the declared
    loss. A plan whose Gaussian noise allows exact composition overrides ``event_noise``."""

    __slots__ = ()

    guarantee: Guarantee
    detail: Mapping[str, Any]
    ledger_detail: Mapping[str, Any]

    @property
    def extension_C(self) -> float | None:
        """The solves use the declared loss (or extensions the mechanism builds itself)."""
        return None

    @property
    def event_noise(self) -> NoiseSpec | None:
        """The noise whose multiplier the event carries (None: pure or generic)."""
        return None

    def events(self, label: str) -> tuple[PrivacyEvent, ...]:
        """The release's one event."""
        return noise_event(label, self.guarantee, self.event_noise, self.ledger_detail)

    def facts(self) -> Mapping[str, Any]:
        """The plan's public facts."""
        return MappingProxyType(dict(self.detail))


def noise_event(
    label: str,
    guarantee: Guarantee,
    noise: NoiseSpec | None = None,
    detail: Mapping[str, Any] | None = None,
) -> tuple[PrivacyEvent, ...]:
    """The one event of a release whose guarantee is ``guarantee``: pure, or Gaussian with the
    multiplier of ``noise`` (exact composition), or a generic approximate one."""
    if guarantee.delta == 0:
        kind, multiplier = "pure", None
    elif noise is not None and noise.kind == "gaussian":
        kind, multiplier = "gaussian", noise.noise_multiplier
    else:
        kind, multiplier = "approx", None
    return (
        PrivacyEvent(
            label=label,
            epsilon=guarantee.epsilon,
            delta=guarantee.delta,
            kind=kind,
            noise_multiplier=multiplier,
            detail=dict(detail or {}),
            neighbors=guarantee.neighbors,
        ),
    )


def refuse_unsolvable(context: Any, lam: float, radius: float | None = None) -> None:
    """Raise :class:`~dpcvx.InvalidParameterError` (before the budget is reserved: a
    mechanism's ``preflight``) when the release context would refuse a solve of all its
    examples at ``lam`` over W (``radius``: over W intersected with a ball of that public
    radius) on every dataset of this size and form: the Lipschitz extension of a loss no fast
    path writes, whose conic program is too large to stamp (``ReleaseContext.refusal``). Data
    free; a context without the question passes."""
    ask = getattr(context, "refusal", None)
    raise_refusal(None if ask is None else ask(lam, radius=radius))


def raise_refusal(refused: str | None) -> None:
    """Raise a release context's refusal (see :func:`refuse_unsolvable`), if any, as
    :class:`~dpcvx.InvalidParameterError` before anything is spent."""
    if refused is not None:
        raise InvalidParameterError(refused + " Nothing was spent.")


def single_solve_release(
    mechanism: Any,
    plan: Any,
    context: Any,
    rng: Any,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    run: Callable[..., Release],
) -> Any:
    """The ``release`` of a mechanism that runs ``run(plan, solve, project, rng, domain)`` on
    the release's solve and projection. The earlier call form ``release(plan, solve, project,
    rng, domain=...)`` (a solve function in place of the context) still works, with a
    :class:`DeprecationWarning`, and returns ``(w, certificates)`` as it did."""
    if callable(context):
        warnings.warn(
            f"{type(mechanism).__name__}.release(plan, solve, project, rng) is deprecated: "
            "pass the release context, release(plan, context, rng).",
            DeprecationWarning,
            stacklevel=3,
        )
        out = run(plan, context, rng, args[0], kwargs.get("domain", "declared"))
        return out.w, out.certificates
    return run(plan, context.solver(), context.project, rng, context.domain.kind)


def public_start(
    owner: str, initial_point: Any, center: Any, d: int, diameter: float | None = None
) -> tuple[np.ndarray, float]:
    """The public starting point of a localization (``initial_point``, else the domain's
    center) as a float vector of shape ``(d,)``, and the domain's diameter as a positive finite
    float (when ``diameter`` is given; ``nan`` otherwise); :class:`~dpcvx.InvalidParameterError`
    before anything is spent."""
    from dpcvx.errors import InvalidParameterError

    start = center if initial_point is None else initial_point
    if start is None:
        raise InvalidParameterError(
            f"`{owner}` needs a data source with a domain (or an `initial_point`)."
        )
    start = np.asarray(start, float)
    if start.shape != (d,):
        raise InvalidParameterError(
            f"The `initial_point` of `{owner}` must have shape ({d},). Got {start.shape}."
        )
    if diameter is None:
        return start, float("nan")
    D = float(diameter)
    if not (math.isfinite(D) and D > 0.0):
        raise InvalidParameterError(
            f"`{owner}` needs a bounded domain with a positive finite diameter. Got {diameter!r}."
        )
    return start, D


def exact_share(total: float, parts: int) -> float:
    """The largest float ``s <= total / parts`` with ``parts * s <= total`` in exact arithmetic:
    the per-step budget of an iterative mechanism, so that its events never add up to more
    than its guarantee (the ledger accepts no overspend, not even a rounding error)."""
    share = total / parts
    while Fraction(share) * parts > Fraction(total):
        share = math.nextafter(share, 0.0)
    return share


def round_up(value: float) -> float:
    """``value`` rounded up to the next float: a noise scale computed in floating point, moved
    to the safe side of its exact value."""
    return math.nextafter(float(value), math.inf)


def perturb_steps(
    point: np.ndarray, kind: str, scale: float, rng: np.random.Generator
) -> np.ndarray:
    """``fl(point + b)`` with ``b`` iid ideal ``Laplace(0, scale)`` (``kind="laplace"``) or
    ``N(0, scale^2)`` (``kind="gaussian"``) per coordinate, exactly rounded
    (:mod:`dpcvx.mechanisms.sampling`): the noise of an iterative mechanism's step or a
    per-coordinate estimate."""
    from dpcvx.mechanisms.sampling import gaussian_point, laplace_point

    point = np.asarray(point, float)
    if kind == "laplace":
        return laplace_point(point.ravel(), float(scale), rng).reshape(point.shape)
    return gaussian_point(point.ravel(), float(scale), rng).reshape(point.shape)


def perturb(w: np.ndarray, noise: NoiseSpec, rng: np.random.Generator) -> np.ndarray:
    """``fl(w + b)`` with ``b`` ideal noise of ``noise``, exactly rounded (floating-point safe,
    :mod:`dpcvx.mechanisms.sampling`): the one place every mechanism adds its noise to a
    certified point."""
    from dpcvx.mechanisms.sampling import release_point

    w = np.asarray(w, float)
    return release_point(w.ravel(), noise, rng).reshape(w.shape)
