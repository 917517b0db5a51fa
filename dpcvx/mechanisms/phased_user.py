"""Phased user-level ERM and SCO (paper 004, Algorithms 3 and 4; Feldman-Koren-Talwar
localization) with the naive user-level output perturbation as each phase's subroutine.

Paper 004 is Ghazi, Kamath, Kumar, Meka, Manurangsi and Zhang, "On User-Level Private Convex
Optimization". ``L...`` below are line numbers of its seed text
``shared/papers/004_57fbb49219620e0c.txt``; "erratum #" and "P#" are the numbered errata
(Section 11) and pitfalls (Section 10) of its digest; "spec C.5" is the implementation spec.

Data model. The mechanisms run on a :class:`~dpcvx.UserLevelProblem`: each of its ``n``
examples is one user, whose loss is the mean of its ``m`` item losses. They are example-level
mechanisms (replace-one), and the data source lifts their guarantee to replace-one-user
(spec C.0): nothing in the privacy argument below looks inside a user.

The phase loop (Alg 3 lines 6-13, L297-312; Alg 4 lines 6-14, L405-420), every number public::

    c_0 = Pi_K(theta_0)                         # theta_0 public (default: the domain's center)
    for i = 1..T_eff:
        lam_i = lam 4^i ;  R_i = G / lam_i
        K_i = K intersect B(c_{i-1}, R_i)       # erratum 3: the center is theta_hat_{i-1},
                                                # projected onto K (P5), so K_i is never empty
        w_i = certified argmin over K_i of  mean_{users of phase i} F_u(w)
                                             + (lam_i/2) ||w - c_{i-1}||^2   (gap <= alpha_i)
        theta_hat_i = w_i + noise_i             # the "naive" subroutine (below)
        if theta_hat_i is bottom: theta_hat_i = c_{i-1}     # P6 (post-processing)
        c_i = Pi_K(theta_hat_i)
    release c_{T_eff}

With ``c_{i-1}`` in ``K`` the ball is inactive at the exact phase minimizer
(``||w*_i - c_{i-1}|| <= G/lam_i`` by the variational inequality; digest 4.4(b)), so the
phase's exact minimizer over ``K_i`` is the one over ``K``, as the paper states. When
``R_i >= D`` (the public diameter of ``K``), ``K_i = K`` exactly and the solve runs on ``K``.

Subroutine ``"naive"`` (spec C.5, [derived], not in the paper): user-level output perturbation
(004 Section 2, eq. (1); spec C.1). The user losses are ``G``-Lipschitz (every item loss is) and
the regularizer is data-independent, so the exact phase minimizers on neighbouring datasets
(one user replaced) are at most ``2 G / (lam_i n_i)`` apart, ``n_i`` the number of users of the
phase (paper 002, Lemma B.2); dpcvx certifies ``gap <= alpha_i``, so the certified point is
within ``sqrt(2 alpha_i / lam_i)`` of the exact one, and the phase's sensitivity is

    Delta_i = 2 G / (lam_i n_i) + 2 sqrt(2 alpha_i / lam_i)

(rounded up). Noise: l2-Laplace with scale ``Delta_i / epsilon_i`` when ``delta = 0`` (pure),
the analytic Gaussian of Balle and Wang at ``(epsilon_i, delta_i)`` otherwise (P10: never the
classical ``sqrt(2 ln(1.25/delta))`` form). The route never outputs bottom; it keeps FKT's
structure but not paper 004's ``sqrt(m)`` gain (its noise is the item-level rate with ``n``
users). The paper's own subroutine (``"deletion"``, SCOutputPert, Alg 2) is a reference
implementation still to come.

Composition.

- Phased-ERM (Alg 3): every phase uses all users, at ``(epsilon_i, delta_i)`` the exact shares
  of ``(epsilon, delta)`` over ``T_eff`` phases (:func:`~dpcvx.mechanisms.base.exact_share`):
  ``T_eff`` events whose exact sums are at most ``(epsilon, delta)`` (basic composition, L343;
  adaptive: each phase's center is an earlier release).
- Phased-SCO (Alg 4): disjoint user batches (a data-independent partition: a uniformly random
  permutation of the users from the mechanism's own generator, or the given order), each phase
  at the full ``(epsilon, delta)`` (erratum 7), hence one event by adaptive parallel
  composition: a changed user enters one phase only, and the phases after it are the same
  randomized post-processing on both datasets. Every phase's Gaussian has the same noise
  multiplier ``sigma_i / Delta_i``, so the one event is a Gaussian with that multiplier.

Counts (public). ``T = ceil(log2(n m))`` (erratum 16: base 2; Alg 3 line 3 and, for
``batching="equal"``, erratum 6). ``T_eff = min(T, max{i : R_i >= move_tolerance D})`` (spec
C.5), at least 1: a phase whose reach ``R_i`` is below ``move_tolerance D`` cannot move the
point and would only ask for certified gaps far below float64 resolution. Batches of
Phased-SCO: ``"equal"`` (default, erratum 6): ``n_b = floor(n / T_eff)`` users per phase;
``"halving"`` (the paper's line 12, L414): phase ``i`` takes the positions
``[floor(n/2^i), floor(n/2^(i-1)))`` of the user order, ``T = ceil(log2 n)`` (``N_0 = 1`` for the
naive route, spec C.5; erratum 6.5's short last batch cannot occur). In both, phase 1 takes the
top of the order, as in the paper (users ``[n/2, n]`` first).

Regularization (utility only; every choice is private). Phased-ERM: ``lam = G sqrt(d) /
(D n sqrt(m))`` (proof of Thm 4.1, L331). Phased-SCO: ``lam = (G/D) max{1/sqrt(n m),
c_sigma sqrt(d) / (n sqrt(m))}`` (erratum 5: the printed ``lam`` leaves an ``O(D G/sqrt(d m))``
statistical term), with ``c_sigma = sigma_i lam_i n sqrt(m) / (2 G)`` the naive route's noise
multiplier (``sigma_i`` the per-coordinate root-mean-square of phase ``i``'s noise, its
inflation by the accuracy ignored) at ``n_b = floor(n/T)`` users per phase. ``m`` enters only
these defaults, ``T`` and ``beta``: for the naive route it affects utility only, never privacy.
``failure_probability`` ``beta`` (default ``1/(n m)``, L331/L438) is the deletion route's; the
naive route never fails and reports ``beta' = beta/T`` only.

Other errata followed: 4 (Lemma 5.2's ``n_i`` counts items: only the analysis and the SCO
default ``lam`` use it), 8 (``n >= Omega~(...)``: the plan refuses ``n`` too small for the
batches, before anything is spent).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from dpcvx._progress import progress_bar
from dpcvx._validation import check_center, check_delta, check_positive, check_real
from dpcvx.accounting.ledger import PrivacyEvent
from dpcvx.certification.certificate import ReleaseCertificate
from dpcvx.errors import CertificationError, InvalidParameterError
from dpcvx.mechanisms.base import (
    PLAIN,
    ExtensionUse,
    Release,
    exact_share,
    noise_event,
    perturb,
    public_start,
    round_up,
)
from dpcvx.mechanisms.noise import NoiseSpec, calibrate
from dpcvx.mechanisms.output_perturbation import default_accuracy
from dpcvx.neighbors import REPLACE_ONE, NeighborRelation
from dpcvx.types import Guarantee, Sensitivity

__all__ = [
    "PhasePlan",
    "PhasedPlan",
    "PhasedUserERM",
    "PhasedUserSCO",
    "phase_batches",
]

#: the subroutines that run in production (the deletion route is a reference implementation)
SUBROUTINES = ("naive",)
#: Phased-SCO's batchings
BATCHINGS = ("equal", "halving")

_FAILURE = (
    "dpcvx could not certify one of the phase solves of {owner} to its accuracy target (fixed "
    "from public quantities). Nothing was released and the whole budget stays spent. This "
    "message carries no data-dependent number, but the failure itself depends on the data: do "
    "not retry on the same data without charging the budget again. To fix: rescale the data so "
    "that losses are of order one, or raise `move_tolerance` (fewer, better-conditioned "
    "phases)."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PhasePlan:
    """One phase's public numbers (``i`` from 1)."""

    index: int
    users: int  # n_i: the users the phase solves on
    batch: tuple[int, int] | None  # positions [start, stop) in the user order; None: all
    regularization: float  # lam_i = lam 4^i
    radius: float  # R_i = G / lam_i
    accuracy: float  # alpha_i, the certified gap
    base_sensitivity: float  # 2 G / (lam_i n_i)
    sensitivity: Sensitivity  # Delta_i, rounded up
    epsilon: float  # the phase's own budget
    delta: float
    noise: NoiseSpec  # calibrated to (Delta_i, epsilon_i, delta_i)


@dataclass(frozen=True, slots=True, kw_only=True)
class PhasedPlan:
    """Everything the release uses, fixed from public quantities before any data is read.

    ``composition`` is ``"basic"`` (Phased-ERM: one event per phase, each at its own budget)
    or ``"parallel"`` (Phased-SCO: one event at the full guarantee)."""

    phases: tuple[PhasePlan, ...]
    guarantee: Guarantee
    composition: str
    n: int
    d: int
    diameter: float
    initial_point: np.ndarray
    detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    ledger_detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    @property
    def extension_C(self) -> None:
        """The phases solve the declared user loss (the pipeline may enforce the
        ``lipschitz`` claim with the Lipschitz extension, as for output perturbation)."""
        return None

    def events(self, label: str) -> tuple[PrivacyEvent, ...]:
        """Phased-ERM: one event per phase at its exact share of the budget. Phased-SCO: one
        event at the full guarantee (parallel composition over disjoint batches), Gaussian with
        the phases' smallest noise multiplier when ``delta > 0``."""
        if self.composition == "parallel":
            weakest = min(self.phases, key=lambda p: p.noise.scale / p.noise.sensitivity)
            detail = dict(self.ledger_detail)
            detail["noise_multiplier_phase"] = weakest.index
            return noise_event(label, self.guarantee, weakest.noise, detail)
        out = []
        T = len(self.phases)
        for p in self.phases:
            (event,) = noise_event(
                f"{label} phase {p.index}/{T}",
                Guarantee(epsilon=p.epsilon, delta=p.delta, neighbors=self.guarantee.neighbors),
                p.noise,
                {
                    **self.ledger_detail,
                    "phase": p.index,
                    "sensitivity": p.sensitivity.value,
                    "noise": p.noise.kind,
                    "scale": p.noise.scale,
                },
            )
            out.append(event)
        return tuple(out)

    def facts(self) -> MappingProxyType:
        """The plan's public numbers (computed from the phases, so a negative control's plan
        reports its own noise)."""
        ph = self.phases
        facts = dict(self.detail)
        facts.update(
            {
                "phases": len(ph),
                "regularizations": tuple(p.regularization for p in ph),
                "radii": tuple(p.radius for p in ph),
                "accuracies": tuple(p.accuracy for p in ph),
                "base_sensitivities": tuple(p.base_sensitivity for p in ph),
                "sensitivities": tuple(p.sensitivity.value for p in ph),
                "noise": ph[0].noise.kind,
                "noise_scales": tuple(p.noise.scale for p in ph),
                "phase_budgets": tuple((p.epsilon, p.delta) for p in ph),
                "batch_sizes": tuple(p.users for p in ph),
                "batches": tuple(p.batch for p in ph),
            }
        )
        return MappingProxyType(facts)


def phase_batches(n: int, phases: int, batching: str) -> tuple[tuple[int, int], ...]:
    """The positions ``[start, stop)`` in the user order of each phase's batch (disjoint).

    ``"equal"``: ``n_b = floor(n / phases)`` users each, phase ``i`` at
    ``[n - i n_b, n - (i-1) n_b)`` (the first ``n - phases n_b`` positions stay unused).
    ``"halving"``: phase ``i`` at ``[floor(n/2^i), floor(n/2^(i-1)))`` (Alg 4 line 12).
    Phase 1 takes the top of the order in both, as in the paper."""
    if batching == "equal":
        nb = n // phases
        return tuple((n - i * nb, n - (i - 1) * nb) for i in range(1, phases + 1))
    return tuple((n >> i, n >> (i - 1)) for i in range(1, phases + 1))


def _noise_rms(noise: NoiseSpec, d: int) -> float:
    """The per-coordinate root-mean-square of ``noise`` in ``R^d`` (l2-Laplace: its norm is
    Gamma(d, scale), so ``E||b||^2 = d (d+1) scale^2``)."""
    if noise.kind == "gaussian":
        return noise.scale
    if noise.kind == "l2_laplace":
        return noise.scale * math.sqrt(d + 1.0)
    return noise.scale * math.sqrt(2.0)  # pragma: no cover - per-coordinate Laplace


def _naive_phase(
    phase: PhasePlan,
    solve: Callable[..., Any],
    center: np.ndarray,
    localize: tuple[np.ndarray, float] | None,
    rng: np.random.Generator,
    domain: str,
) -> tuple[np.ndarray | None, ReleaseCertificate]:
    """The ``"naive"`` subroutine: one certified solve of the phase objective (over ``K_i``),
    perturbed by the phase's noise. Returns ``(point, public certificate)``; never bottom."""
    cert = solve(phase.regularization, center, phase.accuracy, localize=localize)
    if not cert.gap <= phase.accuracy:  # defensive: the solve contract guarantees this
        raise CertificationError("Internal: a certificate above the accuracy target.")
    public = ReleaseCertificate(
        accuracy=phase.accuracy,
        distance_bound=math.sqrt(2.0 * phase.accuracy / phase.regularization),
        regularization=phase.regularization,
        strong_convexity=0.0,
        center=np.asarray(center, float).copy(),
        domain=domain if localize is None else f"{domain} ∩ ball",
    )
    return perturb(cert.w, phase.noise, rng), public


#: the subroutine of each production route: ``(phase, solve, center, localize, rng, domain)
#: -> (point or None for bottom, public certificate)``
_ROUTES: dict[str, Callable[..., tuple[np.ndarray | None, ReleaseCertificate]]] = {
    "naive": _naive_phase
}


@dataclass(frozen=True, slots=True, kw_only=True)
class _PhasedUser:
    """The parameters and the phase loop shared by :class:`PhasedUserERM` and
    :class:`PhasedUserSCO`."""

    lipschitz: float
    items_per_user: int | None = None
    subroutine: str = "naive"
    regularization: float | None = None
    failure_probability: float | None = None
    initial_point: Any = None
    move_tolerance: float = 1e-6
    accuracy: float | None = None
    solver: str | None = None
    progress: bool = True

    requirements: ClassVar[tuple[str, ...]] = ("solver", "project")
    extension: ClassVar[ExtensionUse] = PLAIN
    enforces_lipschitz: ClassVar[bool] = True
    neighbors: ClassVar[NeighborRelation] = REPLACE_ONE
    _owner: ClassVar[str] = "_PhasedUser"

    def __post_init__(self) -> None:
        owner = self._owner
        object.__setattr__(self, "lipschitz", check_positive(self.lipschitz, "lipschitz", owner))
        m = self.items_per_user
        if m is not None:
            if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
                raise InvalidParameterError(
                    f"The `items_per_user` parameter of `{owner}` must be a positive integer "
                    f"(m, public). Got {m!r}."
                )
            object.__setattr__(self, "items_per_user", int(m))
        if self.subroutine not in SUBROUTINES:
            raise InvalidParameterError(
                f"The `subroutine` parameter of `{owner}` must be 'naive' (user-level output "
                f"perturbation per phase). Got {self.subroutine!r}. The paper's deletion route "
                "(SCOutputPert, paper 004 Algorithm 2) is a reference implementation still to "
                "come; it beats the naive route only with billions of items per user "
                "(dpcvx.crossover_items)."
            )
        if self.regularization is not None:
            object.__setattr__(
                self,
                "regularization",
                check_positive(self.regularization, "regularization", owner),
            )
        if self.failure_probability is not None:
            beta = check_real(self.failure_probability, "failure_probability", owner)
            if not 0.0 < beta < 1.0:
                raise InvalidParameterError(
                    f"The `failure_probability` parameter of `{owner}` must lie in (0, 1). "
                    f"Got {self.failure_probability!r}."
                )
            object.__setattr__(self, "failure_probability", beta)
        tol = check_real(self.move_tolerance, "move_tolerance", owner)
        if not 0.0 <= tol < 1.0:
            raise InvalidParameterError(
                f"The `move_tolerance` parameter of `{owner}` must lie in [0, 1). Got {tol!r}."
            )
        object.__setattr__(self, "move_tolerance", tol)
        if self.accuracy is not None:
            object.__setattr__(self, "accuracy", check_positive(self.accuracy, "accuracy", owner))
        object.__setattr__(self, "initial_point", check_center(self.initial_point, owner))
        if not isinstance(self.progress, bool):
            raise InvalidParameterError(f"The `progress` parameter of `{owner}` must be a bool.")

    # ------------------------------------------------------------------ public planning
    def _counts(
        self, n: int, d: int, center: Any, diameter: float, epsilon: float, delta: float
    ) -> tuple[float, float, int, np.ndarray, float, float]:
        """The validated public inputs shared by both algorithms."""
        owner = self._owner
        epsilon = check_positive(epsilon, "epsilon", owner)
        delta = check_delta(delta, owner)
        m = self.items_per_user
        if m is None:
            raise InvalidParameterError(
                f"`{owner}` needs `items_per_user` (m, the public number of items every user "
                "contributes: UserLevelProblem.items_per_user). It sets the number of phases "
                "T = ceil(log2(n m)), the default regularization and the default failure "
                f"probability 1/(n m); for the naive subroutine it affects utility only. Pass "
                f"{owner}(..., items_per_user=m)."
            )
        start, D = public_start(owner, self.initial_point, center, d, diameter)
        beta = self.failure_probability
        if beta is None:
            beta = 1.0 / (n * m)
        return epsilon, delta, m, start, D, beta

    def _phase_count(self, T: int, lam: float, D: float) -> int:
        """``T_eff = min(T, max{i : G / (lam 4^i) >= move_tolerance D})``, at least 1."""
        G, tol = self.lipschitz, self.move_tolerance
        movable = [i for i in range(1, T + 1) if G / (lam * 4.0**i) >= tol * D]
        return max(1, min(T, max(movable) if movable else 1))

    def _phase(
        self,
        i: int,
        lam: float,
        users: int,
        batch: tuple[int, int] | None,
        D: float,
        epsilon: float,
        delta: float,
    ) -> PhasePlan:
        """Phase ``i``'s numbers: ``lam_i``, ``R_i``, ``alpha_i``, ``Delta_i`` and its noise."""
        G = self.lipschitz
        lam_i = lam * 4.0**i
        alpha = self.accuracy
        if alpha is None:
            alpha = default_accuracy(G, lam_i, users, 1.0 + G * D)
        base = 2.0 * G / (lam_i * users)
        total = round_up(base + 2.0 * math.sqrt(2.0 * alpha / lam_i))
        return PhasePlan(
            index=i,
            users=users,
            batch=batch,
            regularization=lam_i,
            radius=G / lam_i,
            accuracy=alpha,
            base_sensitivity=base,
            sensitivity=Sensitivity(value=total),
            epsilon=epsilon,
            delta=delta,
            noise=calibrate(total, epsilon, delta),
        )

    def _common_detail(self, m: int, beta: float, T: int, lam: float, D: float) -> dict:
        return {
            "subroutine": self.subroutine,
            "lipschitz": self.lipschitz,
            "items_per_user": m,
            "phases_paper": T,
            "regularization": lam,
            "diameter": D,
            "move_tolerance": self.move_tolerance,
            "failure_probability": beta,
            "phase_failure_probability": beta / T,
        }

    # ------------------------------------------------------------------ release
    def release(self, plan: PhasedPlan, context: Any, rng: np.random.Generator) -> Release:
        """Run the phases (``context`` is the release's
        :class:`~dpcvx.mechanisms.base.DataAccess`). Returns the released point ``c_T``, the
        public certificate of every phase solve and public facts: every phase's output
        ``c_i`` (all covered by the guarantee) and the phases whose subroutine returned bottom.
        Any failure is one fixed :class:`~dpcvx.CertificationError` text."""
        try:
            return self._release(plan, context, rng)
        except Exception:  # noqa: BLE001 - nothing data-dependent may leave a private release
            raise CertificationError(_FAILURE.format(owner=self._owner)) from None

    def _order(self, plan: PhasedPlan, rng: np.random.Generator) -> np.ndarray:
        return np.arange(plan.n)

    def _release(self, plan: PhasedPlan, context: Any, rng: np.random.Generator) -> Release:
        order = self._order(plan, rng)
        route = _ROUTES[self.subroutine]
        kind = context.domain.kind
        center = np.asarray(context.project(plan.initial_point), float)  # c_0 (public)
        solvers: dict = {}
        certificates, outputs, bottoms = [], [], []
        phases = progress_bar(
            plan.phases,
            total=len(plan.phases),
            desc=f"{self._owner} phases",
            unit="phase",
            enabled=self.progress,
        )
        for phase in phases:
            if phase.batch not in solvers:
                indices = None
                if phase.batch is not None:
                    indices = np.sort(order[phase.batch[0] : phase.batch[1]])
                solvers[phase.batch] = context.solver(indices=indices)
            # K_i = K when the ball B(c, R_i) covers K (R_i >= D, c in K): the same program
            localize = None if phase.radius >= plan.diameter else (center, phase.radius)
            point, public = route(phase, solvers[phase.batch], center, localize, rng, kind)
            certificates.append(public)
            if point is None:  # bottom: keep c_{i-1} (post-processing, P6)
                bottoms.append(phase.index)
            else:
                center = np.asarray(context.project(point), float)
            outputs.append(center.copy())
        facts = {"phase_outputs": tuple(outputs), "bottom_phases": tuple(bottoms)}
        return Release(center.copy(), tuple(certificates), MappingProxyType(facts))


@dataclass(frozen=True, slots=True, kw_only=True)
class PhasedUserERM(_PhasedUser):
    """Paper 004's Phased-ERM (Algorithm 3, Thm 4.1) with the naive user-level subroutine.

    Run it on a :class:`~dpcvx.UserLevelProblem` (one example per user; the guarantee is then
    stated for replace-one-user neighbors). Every phase solves the regularized ERM over all
    users on the localized domain ``K_i = K intersect B(c_{i-1}, G/lam_i)``, certified by dpcvx,
    and perturbs it (module docstring).

    Parameters
    ----------
    lipschitz : float
        ``G``: a bound on the Lipschitz constant in ``w`` of one *item's* loss on the domain,
        for every possible item (hence of every user's loss, their mean). On a declared problem
        the claim is enforced as for :class:`~dpcvx.OutputPerturbation` (users dpcvx cannot
        certify ``G``-Lipschitz are solved on the ``G``-Lipschitz extension of their loss).
    items_per_user : int
        ``m`` (public; ``UserLevelProblem.items_per_user``). Required: it sets
        ``T = ceil(log2(n m))``, the default ``regularization`` and ``failure_probability``.
        For the naive subroutine it affects utility only.
    subroutine : {"naive"}
        The per-phase mechanism. Only ``"naive"`` (user-level output perturbation) is
        available; the paper's deletion route is a reference implementation still to come.
    regularization : float, optional
        ``lam`` (public; ``lam_i = lam 4^i``). Default ``G sqrt(d) / (D n sqrt(m))`` (L331).
    failure_probability : float, optional
        ``beta`` in ``(0, 1)``, default ``1/(n m)`` (L331). The naive route never fails; it is
        reported with ``beta' = beta/T``.
    initial_point : array-like, optional
        ``theta_0`` (public), projected onto the domain; default the domain's center.
    move_tolerance : float
        Phases with ``G/lam_i < move_tolerance * D`` are not run (``T_eff``). Default 1e-6.
    accuracy : float, optional
        Every phase's certified gap ``alpha_i`` (public). Default: the
        :func:`~dpcvx.mechanisms.output_perturbation.default_accuracy` of the phase (it
        inflates the sensitivity by at most 5% above its float64 floor).
    solver : str, optional
        First solver of the refinement ladder.
    progress : bool
        A progress bar over the phases on a terminal; False silences it.

    Notes
    -----
    Guarantee: ``epsilon``-DP (``delta = 0``) or ``(epsilon, delta)``-DP, replace-one
    neighbors on the source's examples (replace-one-user on a
    :class:`~dpcvx.UserLevelProblem`), public ``n``, on every dataset. ``T_eff`` events at the
    exact shares ``(epsilon/T_eff, delta/T_eff)`` (basic composition; re-splitting over
    ``T_eff`` rather than ``T`` is a public choice). Sensitivity of phase ``i``:
    ``2 G/(lam_i n) + 2 sqrt(2 alpha_i/lam_i)``. Errata applied: 3 (the ball's center is
    ``theta_hat_{i-1}``, projected onto ``K``), 16 (``log2``); bottom maps to ``c_{i-1}`` (P6).
    """

    _owner: ClassVar[str] = "PhasedUserERM"

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
    ) -> PhasedPlan:
        """Every phase's regularization, radius, accuracy, sensitivity, budget and noise, from
        public quantities only. ``domain`` is not needed."""
        epsilon, delta, m, start, D, beta = self._counts(n, d, center, diameter, epsilon, delta)
        G = self.lipschitz
        T = max(1, math.ceil(math.log2(n * m)))
        lam = self.regularization or G * math.sqrt(d) / (D * n * math.sqrt(m))
        T_eff = self._phase_count(T, lam, D)
        eps_i, delta_i = exact_share(epsilon, T_eff), exact_share(delta, T_eff)
        phases = tuple(self._phase(i, lam, n, None, D, eps_i, delta_i) for i in range(1, T_eff + 1))
        composition = (
            f"basic over {T_eff} phases on all {n} users, each at ({eps_i:g}, {delta_i:g}) "
            "(exact shares of the budget)"
        )
        detail = self._common_detail(m, beta, T, lam, D)
        detail.update(
            {
                "mechanism": "PhasedUserERM",
                "paper": "004 Alg 3 (Thm 4.1), naive user-level subroutine (spec C.5)",
                "errata": "004 digest errata 3, 16; P5, P6, P10",
                "composition": composition,
                "users_used": n,
            }
        )
        ledger = {
            "paper": "004 Alg 3",
            "subroutine": self.subroutine,
            "phases": T_eff,
            "composition": composition,
        }
        return PhasedPlan(
            phases=phases,
            guarantee=Guarantee(epsilon=epsilon, delta=delta),
            composition="basic",
            n=n,
            d=d,
            diameter=D,
            initial_point=start.copy(),
            detail=MappingProxyType(detail),
            ledger_detail=MappingProxyType(ledger),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PhasedUserSCO(_PhasedUser):
    """Paper 004's Phased-SCO (Algorithm 4, Thm 5.1) with the naive user-level subroutine.

    As :class:`PhasedUserERM`, but phase ``i`` solves on its own disjoint batch of users at the
    full ``(epsilon, delta)`` (erratum 7), and the release is one event by parallel
    composition.

    Parameters
    ----------
    regularization : float, optional
        ``lam`` (public). Default ``(G/D) max{1/sqrt(n m), c_sigma sqrt(d)/(n sqrt(m))}``
        (erratum 5; ``c_sigma`` the naive route's noise multiplier, module docstring).
    batching : {"equal", "halving"}
        ``"equal"`` (default, erratum 6): ``T = ceil(log2(n m))`` phases of
        ``floor(n/T_eff)`` users each. ``"halving"`` (the paper's Alg 4): ``T = ceil(log2 n)``
        phases, phase ``i`` on the positions ``[floor(n/2^i), floor(n/2^(i-1)))`` of the user
        order (its last-phase term is not dominated when ``m >> n + d``, erratum 6).
    shuffle : bool
        Draw the user order from a uniformly random permutation (default; it keeps batches
        i.i.d. when the users are sorted). It never affects privacy: the partition is
        data-independent either way.
    lipschitz, items_per_user, subroutine, failure_probability : see PhasedUserERM
        As for :class:`PhasedUserERM`.
    initial_point, move_tolerance, accuracy, solver, progress : see PhasedUserERM
        As for :class:`PhasedUserERM`.

    Notes
    -----
    Guarantee: as for :class:`PhasedUserERM`, one event at ``(epsilon, delta)`` (Gaussian with
    the phases' common noise multiplier when ``delta > 0``). Sensitivity of phase ``i``:
    ``2 G/(lam_i n_i) + 2 sqrt(2 alpha_i/lam_i)`` with ``n_i`` its batch's users. Raises
    :class:`~dpcvx.InvalidParameterError` before anything is spent when ``n`` is too small for
    one user per batch. Errata applied: 3, 5, 6, 7, 16 (and 4, 8 in the analysis).
    """

    batching: str = "equal"
    shuffle: bool = True

    _owner: ClassVar[str] = "PhasedUserSCO"

    def __post_init__(self) -> None:
        _PhasedUser.__post_init__(self)
        if self.batching not in BATCHINGS:
            raise InvalidParameterError(
                f"The `batching` parameter of `{self._owner}` must be 'equal' or 'halving'. "
                f"Got {self.batching!r}."
            )
        if not isinstance(self.shuffle, bool):
            raise InvalidParameterError(
                f"The `shuffle` parameter of `{self._owner}` must be a bool."
            )

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
    ) -> PhasedPlan:
        """Every phase's batch, regularization, radius, accuracy, sensitivity and noise, from
        public quantities only. ``domain`` is not needed."""
        owner = self._owner
        epsilon, delta, m, start, D, beta = self._counts(n, d, center, diameter, epsilon, delta)
        G = self.lipschitz
        if self.batching == "halving":
            if n < 2:
                raise InvalidParameterError(
                    f"`{owner}` with batching='halving' needs at least 2 users (T = "
                    f"ceil(log2 n) phases). Got n = {n}."
                )
            T = math.ceil(math.log2(n))
        else:
            T = max(1, math.ceil(math.log2(n * m)))
        nb_default = max(1, n // T)
        # c_sigma of the naive route: sigma_i lam_i n sqrt(m) / (2 G), sigma_i the per-coordinate
        # RMS of the noise for the base sensitivity 2 G / (lam_i n_b) (lam-free)
        rms = _noise_rms(calibrate(1.0, epsilon, delta), d)
        c_sigma = rms * (n / nb_default) * math.sqrt(m)
        lam = self.regularization or (G / D) * max(
            1.0 / math.sqrt(n * m), c_sigma * math.sqrt(d) / (n * math.sqrt(m))
        )
        T_eff = self._phase_count(T, lam, D)
        if self.batching == "equal" and n < T_eff:
            raise InvalidParameterError(
                f"`{owner}` with batching='equal' runs T_eff = {T_eff} phases on disjoint "
                f"batches of floor(n / T_eff) users and needs n >= {T_eff} users; got n = {n}. "
                "Raise `move_tolerance` (fewer phases), use batching='halving', or use "
                "PhasedUserERM (every phase on all users)."
            )
        batches = phase_batches(n, T_eff, self.batching)
        phases = tuple(
            self._phase(i, lam, b[1] - b[0], b, D, epsilon, delta)
            for i, b in zip(range(1, T_eff + 1), batches)
        )
        used = sum(p.users for p in phases)
        composition = (
            f"parallel over {T_eff} disjoint user batches ({self.batching}, "
            f"{'shuffled' if self.shuffle else 'in the given order'}), each phase at "
            f"({epsilon:g}, {delta:g}): one event ({n - used} of {n} users unused)"
        )
        detail = self._common_detail(m, beta, T, lam, D)
        detail.update(
            {
                "mechanism": "PhasedUserSCO",
                "paper": "004 Alg 4 (Thm 5.1), naive user-level subroutine (spec C.5)",
                "errata": "004 digest errata 3, 5, 6, 7, 16; P5, P6, P10",
                "composition": composition,
                "batching": self.batching,
                "shuffle": self.shuffle,
                "noise_constant": c_sigma,
                "users_used": used,
            }
        )
        ledger = {
            "paper": "004 Alg 4",
            "subroutine": self.subroutine,
            "phases": T_eff,
            "composition": composition,
        }
        return PhasedPlan(
            phases=phases,
            guarantee=Guarantee(epsilon=epsilon, delta=delta),
            composition="parallel",
            n=n,
            d=d,
            diameter=D,
            initial_point=start.copy(),
            detail=MappingProxyType(detail),
            ledger_detail=MappingProxyType(ledger),
        )

    def _order(self, plan: PhasedPlan, rng: np.random.Generator) -> np.ndarray:
        return rng.permutation(plan.n) if self.shuffle else np.arange(plan.n)
