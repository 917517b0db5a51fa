"""Strongly convex user-level ERM and SCO (paper 004, Algorithms 5 and 6: the Bassily-style
reduction from the strongly convex case to the convex phased algorithms), with the naive
user-level output perturbation as the subroutine of both stages.

Paper 004 is Ghazi, Kamath, Kumar, Meka, Manurangsi and Zhang, "On User-Level Private Convex
Optimization". ``L...`` below are line numbers of its seed text
``shared/papers/004_57fbb49219620e0c.txt``; "erratum #" and "P#" are the numbered errata
(Section 11) and pitfalls (Section 10) of its digest; "spec C.6" is the implementation spec.

The reduction (Alg 5 lines 3-7, L526-534; Alg 6 lines 3-7, L555-563), every number public
except the stage outputs, which are releases::

    theta_0 = SUB_{eps/2, delta/2}(F; all users) on K          # stage 1 (L529 / L558)
    c       = Pi_K(theta_0)                                    # post-processing (P5)
    R'      = r_noise + r_acc  (+ r_pop for SCO)               # line 4, erratum 17
    K'      = K intersect B(c, R')                             # line 5
    lam     = G sqrt(d) / (R' n sqrt(m))                       # line 6 (Alg 5)
              (G / R') max{1/sqrt(n m), c_sigma sqrt(d)/(n sqrt(m))}   (Alg 6, erratum 5)
    release Phased-ERM / Phased-SCO_{eps/2, delta/2, lam}(F; users) on K'   # line 7

Stage 1 is :class:`~dpcvx.OutputPerturbation` with ``regularization = 0`` and
``strong_convexity = mu`` (the naive SCOutputPert, spec C.1/C.5: sensitivity
``2 G/(mu n) + 2 sqrt(2 alpha_0/mu)`` with ``n`` users; [derived], not the paper's deletion
route). Stage 2 is :class:`~dpcvx.PhasedUserERM` (Alg 5) or :class:`~dpcvx.PhasedUserSCO`
(Alg 6) run on the localized domain ``K'``, started at ``c`` (an element of ``K'``, Alg 3/4
line 6).

Radius (erratum 17: the printed ``sigma sqrt(d log(1/beta))`` at L530/L559 has the
proof's unstated constant ``C``, L537). ``r_noise`` is a ``1 - beta`` quantile bound on the
norm of stage 1's noise: ``sigma_0 (sqrt(d) + sqrt(2 ln(1/beta)))`` for the Gaussian
(Lipschitz concentration of the Gaussian norm), ``s_0 Q^{-1}(d, beta)`` for the pure
l2-Laplace noise (its norm is ``Gamma(d, s_0)``; the paper treats ``(epsilon, delta)`` only).
``r_acc = sqrt(2 alpha_0 / mu)`` [derived, digest 4.8]: dpcvx's certified point is within it of
the exact minimizer, which the paper takes as exact. ``r_pop = 30 G sqrt(ln(2/beta)) /
(mu sqrt(n m))`` for Alg 6 (Prop B.1, L547-549, with its constant; needs ``beta < 1/e``).
Projection onto ``K`` never increases the distance to ``theta*`` (in ``K``), so
``theta*(x)`` (Alg 5) resp. ``theta*(D)`` (Alg 6, with Prop B.1) lies in ``K'`` with
probability at least ``1 - beta`` resp. ``1 - 2 beta``; outside that event only utility
suffers, never privacy.

Phases on ``K'``. The phase loop of :mod:`dpcvx.mechanisms.phased_user` solves over
``K' intersect B(c_{i-1}, G/lam_i)``. The solve templates hold one extra ball, so: when
``B(c_{i-1}, G/lam_i)`` lies inside ``B(c, R')`` the phase solves on ``K intersect
B(c_{i-1}, G/lam_i)`` (the same set); otherwise it solves on ``K'``, where the phase ball is
inactive at the exact minimizer (``c_{i-1}`` is in ``K'``; the variational inequality,
digest 4.4(b)), so the exact phase minimizer, and with it every sensitivity, is the same.
Privacy of the naive route holds on any public convex set either way.

Privacy (replace-one-user on a :class:`~dpcvx.UserLevelProblem`; basic composition, L537,
L566): stage 1 at ``(epsilon_1, delta_1) = exact_share((epsilon, delta), 2)``, stage 2 at the
same shares (its centre ``c`` and radius ``R'`` are a release and a public number, so stage 2
is adaptive composition). Events: stage 1's one event, then stage 2's (Phased-ERM: one per
phase at exact shares of the half; Phased-SCO: one by parallel composition), adding up
exactly to at most ``(epsilon, delta)``.

What privacy rests on: ``mu`` (stage 1's sensitivity is ``2 G/(mu n)``; P10, P14). The
pipeline accepts the ``strong_convexity`` claim only up to what dpcvx verifies from the
loss's public structure, before anything is spent; as for
:class:`~dpcvx.OutputPerturbation` with ``strong_convexity > 0``, the ``lipschitz`` claim is
enforced on ``h = f - (mu/2)||w - c||^2`` (``c`` the domain's center): items dpcvx cannot
certify ``G``-Lipschitz for ``h`` run on its ``G``-Lipschitz extension and
``(mu/2)||w - c||^2`` is kept as an exact regularizer of every solve (both stages), so the
objective keeps its strong convexity and neighbours' differences stay ``2G/n``-Lipschitz
whatever the data (:func:`dpcvx.pipeline.release`).

Defaults (utility only): ``failure_probability`` ``beta = 1/(2 n^2 m)`` (L541, L566). The
naive route never returns bottom, so the paper-silent bottom case (``K' = K``, P6) never
arises. Errata applied: 5 (Alg 6's ``lam``), 17 (``R'``), 18 (``beta < 1/e`` for Prop B.1),
and through the phased classes 3, 6, 7, 16.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from scipy.special import gammainccinv

from dpcvx._validation import check_delta, check_positive, check_real
from dpcvx.accounting.ledger import PrivacyEvent
from dpcvx.errors import CertificationError, InvalidParameterError
from dpcvx.mechanisms.base import PLAIN, ExtensionUse, Release, exact_share, round_up
from dpcvx.mechanisms.noise import NoiseSpec
from dpcvx.mechanisms.output_perturbation import OutputPerturbation, ReleasePlan
from dpcvx.mechanisms.phased_user import PhasedPlan, PhasedUserERM, PhasedUserSCO
from dpcvx.modeling.localized import LocalizedDomain
from dpcvx.neighbors import REPLACE_ONE, NeighborRelation
from dpcvx.types import Guarantee

__all__ = [
    "StronglyConvexPlan",
    "StronglyConvexUserERM",
    "StronglyConvexUserSCO",
    "noise_radius",
]

_FAILURE = (
    "dpcvx could not certify one of the solves of {owner} to its accuracy target (fixed from "
    "public quantities). Nothing was released and the whole budget stays spent. This message "
    "carries no data-dependent number, but the failure itself depends on the data: do not "
    "retry on the same data without charging the budget again. To fix: rescale the data so "
    "that losses are of order one, or raise `move_tolerance` (fewer, better-conditioned "
    "phases)."
)


def noise_radius(noise: NoiseSpec, d: int, beta: float) -> float:
    """A radius ``r`` with ``Pr[||b|| > r] <= beta`` for ``b`` drawn from ``noise`` in
    ``R^d`` (public; erratum 17): ``sigma (sqrt(d) + sqrt(2 ln(1/beta)))`` for the Gaussian,
    the exact ``1 - beta`` quantile ``scale Q^{-1}(d, beta)`` of ``Gamma(d, scale)`` for the
    l2-Laplace noise. Rounded up."""
    if noise.kind == "gaussian":
        r = noise.scale * (math.sqrt(d) + math.sqrt(2.0 * math.log(1.0 / beta)))
    elif noise.kind == "l2_laplace":
        r = noise.scale * float(gammainccinv(d, beta)) * (1.0 + 1e-12)
    else:  # pragma: no cover - per-coordinate Laplace is not used here
        raise InvalidParameterError(f"Internal: no radius for {noise.kind!r} noise.")
    return round_up(r)


@dataclass(frozen=True, slots=True, kw_only=True)
class StronglyConvexPlan:
    """Both stages' public numbers, fixed before any data is read.

    ``stage1`` is the :class:`~dpcvx.mechanisms.output_perturbation.ReleasePlan` of the naive
    SCOutputPert at half the budget; ``stage2`` the
    :class:`~dpcvx.mechanisms.phased_user.PhasedPlan` of the phased algorithm on ``K'`` at
    the other half (its ``initial_point`` is replaced by the stage-1 output at release);
    ``radius`` is ``R'``."""

    guarantee: Guarantee
    stage1: ReleasePlan
    stage2: PhasedPlan
    radius: float
    radius_terms: tuple[float, float, float]  # (noise, accuracy, population) parts of R'
    stage2_regularization: float
    diameter: float
    detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    @property
    def extension_C(self) -> None:
        """Both stages solve the declared user loss."""
        return None

    def events(self, label: str) -> tuple[PrivacyEvent, ...]:
        """Stage 1's event, then stage 2's (basic composition: they add up to at most the
        guarantee, exactly)."""
        neighbors = self.guarantee.neighbors
        first = tuple(
            dataclasses.replace(e, neighbors=neighbors)
            for e in self.stage1.events(f"{label} stage 1")
        )
        second = tuple(
            dataclasses.replace(e, neighbors=neighbors)
            for e in self.stage2.events(f"{label} stage 2")
        )
        return first + second

    def facts(self) -> MappingProxyType:
        """The plan's public facts: stage 2's (the phases), stage 1's prefixed ``stage1_``,
        and the localization."""
        facts = dict(self.stage2.facts())
        facts.update({f"stage1_{k}": v for k, v in self.stage1.facts().items()})
        facts.update(self.detail)
        facts.update(
            {
                "localization_radius": self.radius,
                "localization_radius_terms": self.radius_terms,
                "regularization": self.stage2_regularization,
                "stage_budgets": (
                    (self.stage1.guarantee.epsilon, self.stage1.guarantee.delta),
                    (self.stage2.guarantee.epsilon, self.stage2.guarantee.delta),
                ),
            }
        )
        return MappingProxyType(facts)


class _LocalizedContext:
    """The release context of stage 2: the data source's, restricted to the public
    ``K' = K intersect B(center, radius)`` (module docstring, "Phases on K'")."""

    def __init__(self, context: Any, center: np.ndarray, radius: float) -> None:
        self._context = context
        self.n, self.d = context.n, context.d
        self._center = np.asarray(center, float)
        self._radius = float(radius)
        self.domain = LocalizedDomain(context.domain, self._center, self._radius)

    def project(self, point: Any, localize: Any = None, xi: float | None = None) -> np.ndarray:
        if localize is not None:  # pragma: no cover - the phase loop never asks for it
            raise InvalidParameterError("Internal: nested localization of a projection.")
        return np.asarray(
            self._context.project(point, localize=(self._center, self._radius), xi=xi), float
        )

    def solver(self, indices: Any = None, C: float | None = None) -> Any:
        inner = (
            self._context.solver(indices=indices)
            if C is None
            else self._context.solver(indices=indices, C=C)
        )
        c0, r0 = self._center, self._radius

        def solve(
            lam: float, w0: np.ndarray, alpha: float, localize: Any = None, candidate: Any = None
        ) -> Any:
            ball = (c0, r0)
            if localize is not None:
                c, r = np.asarray(localize[0], float), float(localize[1])
                if float(np.linalg.norm(c - c0)) + r <= r0 * (1.0 - 1e-9):
                    ball = (c, r)  # B(c, r) inside B(c0, r0): K' ∩ B(c, r) = K ∩ B(c, r)
                # otherwise B(c, r) is inactive at the exact minimizer over K' (c in K')
            return inner(lam, w0, alpha, localize=ball)

        return solve


@dataclass(frozen=True, slots=True, kw_only=True)
class _StronglyConvexUser:
    """The parameters and both stages shared by the two reductions."""

    lipschitz: float
    strong_convexity: float
    items_per_user: int | None = None
    subroutine: str = "naive"
    failure_probability: float | None = None
    move_tolerance: float = 1e-6
    accuracy: float | None = None
    solver: str | None = None
    progress: bool = True

    requirements: ClassVar[tuple[str, ...]] = ("solver", "project")
    extension: ClassVar[ExtensionUse] = PLAIN
    enforces_lipschitz: ClassVar[bool] = True
    neighbors: ClassVar[NeighborRelation] = REPLACE_ONE
    _owner: ClassVar[str] = "_StronglyConvexUser"
    _beta_max: ClassVar[float] = 1.0

    def __post_init__(self) -> None:
        owner = self._owner
        object.__setattr__(self, "lipschitz", check_positive(self.lipschitz, "lipschitz", owner))
        object.__setattr__(
            self,
            "strong_convexity",
            check_positive(self.strong_convexity, "strong_convexity", owner),
        )
        if self.failure_probability is not None:
            beta = check_real(self.failure_probability, "failure_probability", owner)
            if not 0.0 < beta < self._beta_max:
                bound = "1/e (Prop B.1)" if self._beta_max < 1.0 else "1"
                raise InvalidParameterError(
                    f"The `failure_probability` parameter of `{owner}` must lie in (0, "
                    f"{bound}). Got {self.failure_probability!r}."
                )
            object.__setattr__(self, "failure_probability", beta)
        # the phased class validates the rest (items_per_user, subroutine, move_tolerance,
        # accuracy, progress) with its own messages; re-raise them under this class's name
        try:
            self._stage2_mechanism(None)
        except InvalidParameterError as err:
            raise InvalidParameterError(str(err).replace(self._phased_name(), owner)) from None

    # ------------------------------------------------------------------ stages
    def _phased_name(self) -> str:
        raise NotImplementedError

    def _stage2_mechanism(
        self, lam: float | None, beta: float | None = None
    ) -> PhasedUserERM | PhasedUserSCO:
        raise NotImplementedError

    def _stage1_mechanism(self) -> OutputPerturbation:
        """The naive SCOutputPert: output perturbation of the unregularized ERM of the
        ``mu``-strongly convex user losses (spec C.1)."""
        return OutputPerturbation(
            lipschitz=self.lipschitz,
            regularization=0.0,
            strong_convexity=self.strong_convexity,
            accuracy=self.accuracy,
            solver=self.solver,
        )

    def _population_radius(self, n: int, m: int, beta: float) -> float:
        return 0.0

    def _regularization(
        self, n: int, d: int, m: int, R: float, probe: Any
    ) -> float:  # pragma: no cover - overridden
        raise NotImplementedError

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
    ) -> StronglyConvexPlan:
        """Both stages' numbers from public quantities only (``domain`` is not needed)."""
        owner = self._owner
        epsilon = check_positive(epsilon, "epsilon", owner)
        delta = check_delta(delta, owner)
        m = self.items_per_user
        if m is None:
            raise InvalidParameterError(
                f"`{owner}` needs `items_per_user` (m, the public number of items every user "
                "contributes: UserLevelProblem.items_per_user). It sets the radius R', the "
                "stage-2 regularization and phases and the default failure probability "
                f"1/(2 n^2 m); for the naive subroutine it affects utility only. Pass "
                f"{owner}(..., items_per_user=m)."
            )
        if center is None:
            raise InvalidParameterError(f"`{owner}` needs a data source with a domain.")
        center = np.asarray(center, float)
        if center.shape != (d,):
            raise InvalidParameterError(
                f"The domain center given to `{owner}` must have shape ({d},). Got {center.shape}."
            )
        D = float(diameter)
        if not (math.isfinite(D) and D > 0.0):
            raise InvalidParameterError(
                f"`{owner}` needs a bounded domain with a positive diameter. Got {diameter!r}."
            )
        G, mu = self.lipschitz, self.strong_convexity
        beta = self.failure_probability
        if beta is None:
            beta = 1.0 / (2.0 * n * n * m)  # L537, L541, L566
        eps_half, delta_half = exact_share(epsilon, 2), exact_share(delta, 2)
        # stage 1 (line 3): SCOutputPert_{eps/2, delta/2, beta, G, mu, K}, naive route
        stage1 = self._stage1_mechanism().plan(
            n=n, d=d, center=center, diameter=D, epsilon=eps_half, delta=delta_half
        )
        # line 4 (erratum 17), plus the certified solve's distance bound [derived]
        r_noise = noise_radius(stage1.noise, d, beta)
        r_acc = round_up(math.sqrt(2.0 * stage1.accuracy / mu))
        r_pop = self._population_radius(n, m, beta)
        R = round_up(r_noise + r_acc + r_pop)
        D2 = min(D, 2.0 * R)  # the diameter of K' (line 5)
        probe = self._stage2_mechanism(None, beta).plan(
            n=n, d=d, center=center, diameter=D2, epsilon=eps_half, delta=delta_half
        )
        lam = self._regularization(n, d, m, R, probe)  # line 6 (L532 / L561)
        stage2 = self._stage2_mechanism(lam, beta).plan(
            n=n, d=d, center=center, diameter=D2, epsilon=eps_half, delta=delta_half
        )
        detail = {
            "mechanism": owner,
            "paper": self._paper,
            "errata": self._errata,
            "lipschitz": G,
            "strong_convexity": mu,
            "items_per_user": m,
            "failure_probability": beta,
            "subroutine": self.subroutine,
            "composition": (
                f"basic: stage 1 at ({eps_half:g}, {delta_half:g}), then "
                f"{stage2.detail.get('mechanism')} on K' at ({eps_half:g}, {delta_half:g})"
            ),
        }
        return StronglyConvexPlan(
            guarantee=Guarantee(epsilon=epsilon, delta=delta),
            stage1=stage1,
            stage2=stage2,
            radius=R,
            radius_terms=(r_noise, r_acc, r_pop),
            stage2_regularization=lam,
            diameter=D,
            detail=MappingProxyType(detail),
        )

    _paper: ClassVar[str] = ""
    _errata: ClassVar[str] = ""

    # ------------------------------------------------------------------ release
    def release(self, plan: StronglyConvexPlan, context: Any, rng: np.random.Generator) -> Release:
        """Stage 1 on ``K``, then the phased algorithm on ``K' = K intersect B(c, R')``
        started at ``c`` (``context`` is the release's
        :class:`~dpcvx.mechanisms.base.DataAccess`). Returns the released point, the public
        certificates of every solve (stage 1's first) and public facts: ``c`` and every
        phase's output (all covered by the guarantee). Any failure is one fixed
        :class:`~dpcvx.CertificationError` text."""
        try:
            return self._release(plan, context, rng)
        except Exception:  # noqa: BLE001 - nothing data-dependent may leave a private release
            raise CertificationError(_FAILURE.format(owner=self._owner)) from None

    def _release(self, plan: StronglyConvexPlan, context: Any, rng: np.random.Generator) -> Release:
        first = self._stage1_mechanism().release(plan.stage1, context, rng)
        c = np.asarray(context.project(first.w), float)  # Pi_K(theta_0), in K (P5)
        if plan.radius >= plan.diameter:  # the ball covers K: K' = K
            stage_context: Any = context
        else:
            stage_context = _LocalizedContext(context, c, plan.radius)
        stage2 = dataclasses.replace(plan.stage2, initial_point=c.copy())
        second = self._stage2_mechanism(plan.stage2_regularization).release(
            stage2, stage_context, rng
        )
        facts = dict(second.facts)
        facts["stage1_output"] = c.copy()
        facts["localized_domain"] = plan.radius < plan.diameter
        return Release(
            np.asarray(second.w, float).copy(),
            tuple(first.certificates) + tuple(second.certificates),
            MappingProxyType(facts),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class StronglyConvexUserERM(_StronglyConvexUser):
    """Paper 004's Strongly-Convex-ERM (Algorithm 5, Thm 4.3): naive user-level output
    perturbation at half the budget localizes the minimizer to ``K' = K intersect B(c, R')``;
    :class:`~dpcvx.PhasedUserERM` at the other half runs on ``K'`` with
    ``lam = G sqrt(d)/(R' n sqrt(m))`` (module docstring).

    Parameters
    ----------
    lipschitz : float
        ``G``: a bound on the Lipschitz constant in ``w`` of one *item's* loss on the domain,
        for every possible item. Enforced on the item loss minus ``(mu/2)||w - c||^2`` (module
        docstring): a false claim costs utility, never privacy.
    strong_convexity : float
        ``mu > 0``: the strong-convexity modulus of every item's loss (privacy-critical: stage
        1's sensitivity is ``2 G/(mu n)``). On a declared problem it must not exceed what
        dpcvx verifies from the loss's public structure (checked before anything is spent).
    items_per_user : int
        ``m`` (public; ``UserLevelProblem.items_per_user``). Required.
    subroutine : {"naive"}
        The subroutine of both stages (user-level output perturbation).
    failure_probability : float, optional
        ``beta``, default ``1/(2 n^2 m)`` (L541, L566): ``R'`` covers the minimizer with
        probability ``1 - beta`` (utility only).
    move_tolerance, accuracy, solver, progress
        As for :class:`~dpcvx.PhasedUserERM` (``accuracy`` is every solve's certified gap,
        stage 1's included).

    Notes
    -----
    Guarantee: ``epsilon``-DP (``delta = 0``) or ``(epsilon, delta)``-DP, replace-one neighbors
    on the source's examples (replace-one-user on a :class:`~dpcvx.UserLevelProblem`), public
    ``n``, on every dataset: stage 1's event at ``(epsilon/2, delta/2)`` and ``T_eff`` phase
    events at exact shares of the other half (basic composition, L537). Sensitivities: stage 1
    ``2 G/(mu n) + 2 sqrt(2 alpha_0/mu)``; phase ``i`` ``2 G/(lam_i n) + 2 sqrt(2 alpha_i/
    lam_i)``. Paper 004 Alg 5 (L526-534), proof L537-541; errata 17, 18 (and 3, 16 via
    :class:`~dpcvx.PhasedUserERM`); ``R' = sigma_0 (sqrt(d) + sqrt(2 ln(1/beta))) +
    sqrt(2 alpha_0/mu)``.
    """

    _owner: ClassVar[str] = "StronglyConvexUserERM"
    _paper: ClassVar[str] = "004 Alg 5 (Thm 4.3), naive user-level subroutine (spec C.6)"
    _errata: ClassVar[str] = "004 digest errata 17, 18; via Phased-ERM 3, 16; P5, P6, P10, P14"

    def _phased_name(self) -> str:
        return "PhasedUserERM"

    def _stage2_mechanism(self, lam: float | None, beta: float | None = None) -> PhasedUserERM:
        return PhasedUserERM(
            lipschitz=self.lipschitz,
            items_per_user=self.items_per_user,
            subroutine=self.subroutine,
            regularization=lam,
            failure_probability=self.failure_probability if beta is None else beta,
            move_tolerance=self.move_tolerance,
            accuracy=self.accuracy,
            solver=self.solver,
            progress=self.progress,
        )

    def _regularization(self, n: int, d: int, m: int, R: float, probe: Any) -> float:
        return self.lipschitz * math.sqrt(d) / (R * n * math.sqrt(m))  # Alg 5 line 6 (L532)


@dataclass(frozen=True, slots=True, kw_only=True)
class StronglyConvexUserSCO(_StronglyConvexUser):
    """Paper 004's Strongly-Convex-SCO (Algorithm 6, Thm 5.3): as
    :class:`StronglyConvexUserERM`, with Prop B.1's population term in ``R'`` and
    :class:`~dpcvx.PhasedUserSCO` as stage 2 (disjoint user batches, one event).

    Parameters
    ----------
    lipschitz : float
        ``G``: a bound on the Lipschitz constant in ``w`` of one *item's* loss on the domain,
        for every possible item. Enforced on the item loss minus ``(mu/2)||w - c||^2`` (module
        docstring): a false claim costs utility, never privacy.
    strong_convexity : float
        ``mu > 0``: the strong-convexity modulus of every item's loss (privacy-critical: stage
        1's sensitivity is ``2 G/(mu n)``). On a declared problem it must not exceed what
        dpcvx verifies from the loss's public structure (checked before anything is spent).
    items_per_user : int
        ``m`` (public; ``UserLevelProblem.items_per_user``). Required.
    subroutine : {"naive"}
        The subroutine of both stages (user-level output perturbation).
    failure_probability : float, optional
        ``beta``, default ``1/(2 n^2 m)`` (L541, L566): ``R'`` covers the minimizer with
        probability ``1 - beta`` (utility only).
    move_tolerance, accuracy, solver, progress
        As for :class:`~dpcvx.PhasedUserERM` (``accuracy`` is every solve's certified gap,
        stage 1's included).
    batching, shuffle
        As for :class:`~dpcvx.PhasedUserSCO` (stage 2).

    Notes
    -----
    Guarantee: as for :class:`StronglyConvexUserERM`, with stage 2 one event at
    ``(epsilon/2, delta/2)`` (parallel composition over disjoint batches, erratum 7). ``R' =
    sigma_0 (sqrt(d) + sqrt(2 ln(1/beta))) + sqrt(2 alpha_0/mu) + 30 G sqrt(ln(2/beta))/(mu
    sqrt(n m))`` (erratum 17; Prop B.1, L549, with ``beta < 1/e``, erratum 18). ``lam = (G/R')
    max{1/sqrt(n m), c_sigma sqrt(d)/(n sqrt(m))}`` (erratum 5: Alg 6 line 6 prints the
    Thm 5.1 ``lam``, which leaves a statistical term that does not vanish with ``n``).
    Paper 004 Alg 6 (L555-563), proof L566.
    """

    batching: str = "equal"
    shuffle: bool = True

    _owner: ClassVar[str] = "StronglyConvexUserSCO"
    _beta_max: ClassVar[float] = 1.0 / math.e
    _paper: ClassVar[str] = "004 Alg 6 (Thm 5.3), naive user-level subroutine (spec C.6)"
    _errata: ClassVar[str] = (
        "004 digest errata 5, 17, 18; via Phased-SCO 3, 6, 7, 16; P5, P6, P10, P14"
    )

    def _phased_name(self) -> str:
        return "PhasedUserSCO"

    def _stage2_mechanism(self, lam: float | None, beta: float | None = None) -> PhasedUserSCO:
        return PhasedUserSCO(
            lipschitz=self.lipschitz,
            items_per_user=self.items_per_user,
            subroutine=self.subroutine,
            regularization=lam,
            failure_probability=self.failure_probability if beta is None else beta,
            move_tolerance=self.move_tolerance,
            accuracy=self.accuracy,
            solver=self.solver,
            progress=self.progress,
            batching=self.batching,
            shuffle=self.shuffle,
        )

    def _population_radius(self, n: int, m: int, beta: float) -> float:
        """Prop B.1 (L549): ``||theta*(x) - theta*(D)|| <= 30 G sqrt(ln(2/beta))/(mu
        sqrt(n m))`` with probability ``>= 1 - beta``."""
        G, mu = self.lipschitz, self.strong_convexity
        return round_up(30.0 * G * math.sqrt(math.log(2.0 / beta)) / (mu * math.sqrt(n * m)))

    def _regularization(self, n: int, d: int, m: int, R: float, probe: Any) -> float:
        c_sigma = float(probe.detail["noise_constant"])  # the naive route's noise multiplier
        return (self.lipschitz / R) * max(
            1.0 / math.sqrt(n * m), c_sigma * math.sqrt(d) / (n * math.sqrt(m))
        )
