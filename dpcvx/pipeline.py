"""The release pipeline: validate -> plan -> reserve -> release -> result, for every data source.

Every ``solve_private`` of dpcvx (:class:`~dpcvx.Problem`, its Lipschitz extension,
:class:`~dpcvx.OracleProblem`, :class:`~dpcvx.SaddleProblem`, the audits) runs
:func:`release`. The pipeline talks to a mechanism only through the typed boundary of
:mod:`dpcvx.mechanisms.base` and to the data only through a :class:`DataSource`:

1. **validate** ``epsilon``, ``delta``, the mechanism, the generator and the accountant;
2. **plan** from public quantities only (``n``, ``d``, the domain, the budget); the plan fixes
   every number of the release and emits its own privacy events;
3. check that the data source provides what the mechanism needs and check that what the
   solves need compiles (data-independent: the templates' canonical forms; the rest of their
   compile waits for the first solve that needs it), so bad input raises before anything is
   spent;
4. **reserve** every event in the accountant (all or nothing: an unaffordable release raises
   :class:`~dpcvx.PrivacyBudgetError` and records nothing);
5. **release**: only now is the data read, through the release context;
6. the **result**: the released point, the guarantee with its neighboring relation, the public
   certificates, the ledger and the public facts of the plan and the run.

A failure after step 4 keeps the budget spent and releases nothing.
"""

from __future__ import annotations

import dataclasses
import warnings
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from dpcvx._validation import check_delta, check_positive
from dpcvx.accounting.ledger import Accountant
from dpcvx.certification.lipschitz import enforceable, lipschitz_bounds, strong_convexity_bound
from dpcvx.certification.solve import folded_terms, universe_slope
from dpcvx.errors import (
    DpcvxError,
    InvalidParameterError,
    LipschitzClaimWarning,
    PrivacyBudgetError,
)
from dpcvx.mechanisms.base import PER_SOLVE, PLAIN, PLANNED, DataAccess, Mechanism, Release
from dpcvx.neighbors import REPLACE_ONE, NeighborRelation
from dpcvx.results import PrivateResult
from dpcvx.rng import make_rng

if TYPE_CHECKING:
    from dpcvx.modeling.declaration import Declaration
    from dpcvx.modeling.domains import Domain

__all__ = ["UNIVERSE_TEXT", "DataSource", "release"]

#: the data universe of every release that solves on a Lipschitz extension (public text)
UNIVERSE_TEXT = (
    "every example; one whose loss dpcvx cannot show to be {slope:g} C-Lipschitz "
    "on the domain enters with the zero loss (a per-example map: neighbours stay "
    "neighbours)"
)


@runtime_checkable
class DataSource(Protocol):
    """What :func:`release` needs from a data source: its public shape and, once the budget is
    reserved, a release context (:class:`~dpcvx.mechanisms.base.DataAccess`).

    ``declared`` is the validated declaration of a :class:`~dpcvx.Problem` (dpcvx then
    verifies or enforces a mechanism's claims about the loss from its structure), or None
    for sources dpcvx cannot inspect (oracles, saddle problems: the claims are trusted).
    """

    @property
    def n(self) -> int: ...

    @property
    def d(self) -> int: ...

    @property
    def domain(self) -> Domain | None: ...

    @property
    def diameter(self) -> float: ...

    @property
    def declared(self) -> Declaration | None: ...

    @property
    def neighbors(self) -> NeighborRelation:
        """The relation under which one of this source's examples is one unit of privacy
        (replace-one example; replace-one user for user-level data)."""
        ...

    def release_context(
        self, *, extension: float | None, solver: str | None, base: bool = False
    ) -> DataAccess: ...


def release(
    source: DataSource,
    mechanism: Mechanism,
    *,
    epsilon: float,
    delta: float,
    rng: Any,
    accountant: Accountant | None,
    extension: float | None = None,
) -> PrivateResult:
    """Validate, plan, reserve the budget, then release (the body of every ``solve_private``).

    Parameters
    ----------
    source : DataSource
        The data: a :class:`~dpcvx.Problem` or any object with the :class:`DataSource`
        interface.
    mechanism : Mechanism
        A dpcvx mechanism (:class:`~dpcvx.mechanisms.base.Mechanism`).
    epsilon, delta : float
        The guarantee asked for.
    rng : None, int or numpy.random.Generator
        See :func:`dpcvx.rng.make_rng`.
    accountant : Accountant or None
        Charge the release to this budget; None: a fresh one holding exactly the guarantee.
    extension : float, optional
        Solve on the Lipschitz extension with this ``C`` (a
        :meth:`~dpcvx.Problem.lipschitz_extension` source).
    """
    owner = f"{type(source).__name__}.solve_private"
    epsilon = check_positive(epsilon, "epsilon", owner)
    delta = check_delta(delta, owner)
    if not isinstance(mechanism, Mechanism):
        raise InvalidParameterError(
            f"The `mechanism` must be a dpcvx mechanism such as dpcvx.OutputPerturbation. "
            f"Got {type(mechanism).__name__}."
        )
    mode = mechanism.extension
    claim = float(mechanism.lipschitz) if mechanism.enforces_lipschitz else None  # type: ignore[attr-defined]
    if extension is not None:
        _check_extension_source(mechanism, mode, claim, extension)
    declared = source.declared
    _check_strong_convexity(declared, mechanism)
    generator, seeded = make_rng(rng)
    if accountant is not None and not isinstance(accountant, Accountant):
        raise InvalidParameterError(
            f"The `accountant` must be a dpcvx.Accountant or None. Got {type(accountant).__name__}."
        )

    domain = source.domain
    plan = mechanism.plan(
        n=source.n,
        d=source.d,
        center=None if domain is None else domain.center,
        diameter=source.diameter,
        epsilon=epsilon,
        delta=delta,
        domain=domain,
    )
    C = _extension_of(mechanism, mode, plan.extension_C, extension)
    enforced = claim is not None and C is None and declared is not None and enforceable(declared)
    mu = float(getattr(mechanism, "strong_convexity", 0.0) or 0.0)
    target: Any = source
    folded = False
    if enforced and set(mechanism.requirements) <= {"solver", "project"}:
        # squared terms that read no data are the same for every example: the claim is
        # enforced on the other terms, and the quadratic added to every solve as it is
        # (_StrongContext): neighbours differ in those other terms only, so the planned
        # sensitivity holds (a claimed strong convexity up to the quadratic's own modulus
        # included), and the quadratic is neither clipped nor solved n times
        taker = getattr(source, "public_quadratic_removed", None)
        try:
            found = None if taker is None else taker()
        except DpcvxError:  # the rest of the loss is not a problem of its own: no fold
            found = None
        if found is not None and found[1] >= mu:
            target, mu, shift_center = found
            folded = True
    if enforced and mu > 0.0 and not folded:
        # the extension of f itself would lose the strong convexity the noise relies on:
        # enforce the claim on h = f - (mu/2)||w - c||^2 (convex: dpcvx verified mu) and keep
        # (mu/2)||w - c||^2 as an exact regularizer of every solve (_StrongContext)
        remover = getattr(source, "quadratic_removed", None)
        if remover is None or domain is None:
            enforced = False  # a source that cannot rewrite its loss: the claim is trusted
        else:
            shift_center = np.asarray(domain.center, float).copy()
            target = remover(mu, shift_center)
    if enforced:
        # the claim is enforced, not trusted: examples not certified L-Lipschitz on W run on
        # the L-Lipschitz extension (the others keep their plain block, so a true claim costs
        # nothing); the release is private whatever the data
        C = claim
    name = type(mechanism).__name__
    if C is not None and not enforced and mode != PER_SOLVE:
        name += f"[f_C, C={C:g}]"
    relation = _relation(source, mechanism)
    events = tuple(
        e if e.neighbors == relation else dataclasses.replace(e, neighbors=relation)
        for e in plan.events(f"{name}(n={source.n}, d={source.d})")
    )
    _check_events(name, events, epsilon, delta, relation)

    context = target.release_context(
        extension=C, solver=getattr(mechanism, "solver", None), base=mode == PER_SOLVE
    )
    if target is not source:
        context = _StrongContext(context, mu, shift_center)
    missing = [r for r in mechanism.requirements if not hasattr(context, r)]
    if missing:  # checked before anything is spent
        raise InvalidParameterError(
            f"`{name}` needs {', '.join(missing)} from the data source, which a "
            f"{type(source).__name__} does not provide."
        )
    if "solver" in mechanism.requirements and hasattr(context, "prepare"):
        context.prepare()  # check the compile before anything is spent (data-independent)
    if hasattr(mechanism, "preflight"):
        mechanism.preflight(plan, context)  # data-free checks of the run (e.g. its executor)
    budget = (
        accountant if accountant is not None else Accountant(epsilon, delta, neighbors=relation)
    )
    budget.reserve_all(events)  # PrivacyBudgetError, nothing recorded, if unaffordable

    out = mechanism.release(plan, context, generator)
    if not isinstance(out, Release):  # pragma: no cover - a mechanism contract violation
        raise InvalidParameterError(
            f"`{name}.release` must return a dpcvx.mechanisms.base.Release. Got "
            f"{type(out).__name__}."
        )
    detail = dict(plan.facts())
    detail.update(out.facts)
    if C is not None:
        detail.update(extension_C=C)
    if declared is not None and (C is not None or mode == PER_SOLVE):
        # the universe of the loss the solves ran on (without a removed quadratic)
        solved = getattr(target, "declared", None) or declared
        text = UNIVERSE_TEXT.format(slope=universe_slope(solved))
        if folded:
            text += "; the squared terms that read no data stay in every solve"
        detail.update(universe=text)
    if enforced:
        if target is source:
            claim_text = "enforced by the L-Lipschitz extension"
        elif folded:
            claim_text = (
                "enforced by the L-Lipschitz extension of the loss without its isotropic "
                "squared terms that read no data (the same for every example), which are "
                "kept as written in every solve"
            )
        else:
            claim_text = (
                "enforced by the L-Lipschitz extension of the loss minus its verified "
                "quadratic (mu/2)||w - c||^2, c the domain's center; the quadratic is kept"
            )
        detail.update(lipschitz_claim=claim_text)
        # (tilted ERM extends each example's whole loss: its penalty counts there)
        _warn_if_claim_unverified(
            target.declared,
            float(claim),  # type: ignore[arg-type]
            folded="tilted_solver" not in mechanism.requirements,
        )
    return PrivateResult(
        w=np.asarray(out.w, float),
        epsilon=epsilon,
        delta=delta,
        certificates=tuple(out.certificates),
        ledger=budget.ledger,
        seeded=seeded,
        mechanism=name,
        detail=MappingProxyType(detail),
        neighbors=relation,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class _ShiftedSolve:
    """A certified solve of ``F(w) + (lam/2)||w - w0||^2`` with ``F = (1/n) sum_i h_i +
    (mu/2)||w - c||^2`` (up to a constant): the solve of ``(1/n) sum_i h_i`` with the
    regularization ``lam + mu`` centred at ``(lam w0 + mu c)/(lam + mu)``, the same objective
    up to a constant, so the certified gap and point are the same. Picklable (block jobs)."""

    inner: Any
    mu: float
    center: np.ndarray

    def __call__(self, lam: float, w0: Any, alpha: float, localize: Any = None, candidate=None):
        total = float(lam) + self.mu
        shifted = (float(lam) * np.asarray(w0, float) + self.mu * self.center) / total
        return self.inner(total, shifted, alpha, localize=localize, candidate=candidate)


class _StrongContext:
    """The release context of a strongly convex claim enforced on ``h = f - (mu/2)||w - c||^2``
    (see :func:`release`): the certified solves of ``h``'s source, each with ``(mu/2)||w -
    c||^2`` added back (:class:`_ShiftedSolve`), and the public projections. It offers nothing
    else (per-example gradients or loss values of ``h`` would not be ``f``'s): a mechanism
    that needs more is refused before anything is spent."""

    def __init__(self, inner: Any, mu: float, center: np.ndarray) -> None:
        self._inner = inner
        self._mu = float(mu)
        self._center = np.asarray(center, float)
        self.n, self.d, self.domain = inner.n, inner.d, inner.domain
        self.extension = inner.extension
        self.project = inner.project

    def prepare(self) -> None:
        self._inner.prepare()

    def refusal(self, lam: float, radius: float | None = None) -> str | None:
        """The inner context's refusal (data free) of solves at ``lam + mu``, or None."""
        ask = getattr(self._inner, "refusal", None)
        return None if ask is None else ask(float(lam) + self._mu, radius=radius)

    def solver(self, indices: Any = None, C: float | None = None) -> _ShiftedSolve:
        return _ShiftedSolve(self._inner.solver(indices=indices, C=C), self._mu, self._center)


def _relation(source: DataSource, mechanism: Mechanism) -> NeighborRelation:
    """The relation of the release: an example-level mechanism protects one of the source's
    examples, which is one user of a user-level source (the source lifts the relation)."""
    if mechanism.neighbors == REPLACE_ONE:
        return source.neighbors
    if source.neighbors != REPLACE_ONE:
        raise InvalidParameterError(
            f"`{type(mechanism).__name__}` states its guarantee under {mechanism.neighbors} "
            f"neighbors; it runs on example-level data, not on a {type(source).__name__} "
            f"(whose examples are already {source.neighbors} units)."
        )
    return mechanism.neighbors


def _check_events(name: str, events, epsilon: float, delta: float, neighbors) -> None:
    """The plan's events must compose to at most the requested guarantee (checked on a scratch
    accountant, before anything is spent: a plan that would overspend is a bug, never a
    release)."""
    if not events:
        raise InvalidParameterError(f"Internal: the plan of `{name}` records no privacy event.")
    try:
        Accountant(epsilon, delta, neighbors=neighbors).reserve_all(events)
    except PrivacyBudgetError:
        raise InvalidParameterError(
            f"Internal: the plan of `{name}` records more than the requested guarantee "
            f"({epsilon:g}, {delta:g}); nothing was spent."
        ) from None


def _check_extension_source(mechanism: Mechanism, mode: str, claim, extension: float) -> None:
    """A :meth:`~dpcvx.Problem.lipschitz_extension` source runs output perturbation (whose
    ``lipschitz`` must be at least ``C``) or a mechanism that plans on ``f_C`` itself."""
    if mode == PLANNED:
        return
    if claim is None or mode != PLAIN:
        raise InvalidParameterError(
            f"`{type(mechanism).__name__}` works on the problem's own loss (it builds any "
            "Lipschitz extension it needs itself): call `problem.solve_private(...)` on the "
            "problem, not on `problem.lipschitz_extension(C)`."
        )
    if claim < extension:
        raise InvalidParameterError(
            f"The Lipschitz extension with C = {extension:g} is C-Lipschitz; the mechanism's "
            f"`lipschitz` must be at least C. Got {claim:g}. Use "
            f"OutputPerturbation(lipschitz={extension:g}, ...)."
        )


def _extension_of(mechanism: Mechanism, mode: str, planned, extension) -> float | None:
    """The ``C`` of the release's extension: the source's, or the plan's (public)."""
    if mode != PLANNED:
        return extension
    if extension is not None and planned is not None and planned < extension:
        raise InvalidParameterError(
            f"The Lipschitz extension with C = {extension:g} is C-Lipschitz, but the mechanism "
            f"planned its noise for C = {planned:g}. Give the mechanism C={extension:g}, or "
            "call `problem.solve_private(...)` and let it build its own extension."
        )
    return float(extension if extension is not None else planned)


def _check_strong_convexity(declared, mechanism: Mechanism) -> None:
    """A ``strong_convexity`` claim is accepted on a declared problem only up to what dpcvx
    verifies from the loss's public structure (checked before anything is spent)."""
    mu = float(getattr(mechanism, "strong_convexity", 0.0) or 0.0)
    if mu <= 0.0 or declared is None:
        return
    verified = strong_convexity_bound(declared)
    if mu > verified * (1 + 1e-12):  # covers the eigenvalue's rounding
        raise InvalidParameterError(
            f"`{type(mechanism).__name__}` claims `strong_convexity={mu:g}` for every "
            f"example, but dpcvx can verify only {verified:g} from the loss's public "
            "structure (squared terms whose coefficient of the variable reads no data, e.g. "
            "`0.5 * cp.sum_squares(w - x)`). A claim dpcvx cannot check would rest the "
            "guarantee on trust: use `regularization` (added by dpcvx, always exact) instead, "
            "or lower `strong_convexity`."
        )


def _warn_if_claim_unverified(declared, lipschitz: float, folded: bool = True) -> None:
    """Tell the curator (a warning, not part of the release) when some examples could not be
    shown to be ``lipschitz``-Lipschitz on the domain by dpcvx's structural bounds (their
    terms that read data: a penalty written into the loss is kept exact, see
    :func:`~dpcvx.certification.solve.folded_terms`; with ``folded`` False, the whole loss)."""
    fold = folded_terms(declared, lipschitz) if folded else frozenset()
    if fold:
        declared = declared.with_terms(frozenset(range(len(declared.terms))) - fold)
    bounds = lipschitz_bounds(declared)
    count = int(np.sum(~(bounds <= lipschitz * (1 + 1e-12))))
    if not count:
        return
    # a diagnostic for the curator: never turned into an exception by a warnings filter
    # (it would replace the result after the budget is spent)
    with warnings.catch_warnings():
        warnings.simplefilter("always", LipschitzClaimWarning)
        warnings.warn(
            f"{count} of {declared.n} examples could not be shown to have a loss that is "
            f"{lipschitz:g}-Lipschitz on the domain (the claimed `lipschitz`"
            + (
                "; a penalty written into the loss, which reads no data, is not counted"
                if fold
                else ""
            )
            + "). The release is "
            "private anyway: dpcvx ran those examples on the L-Lipschitz extension of their "
            "loss. Check the claim (clip or normalize features with public bounds) if this is "
            "unexpected; this warning is for the curator and is not part of the release.",
            LipschitzClaimWarning,
            stacklevel=4,
        )
