"""Iterative and growth-adaptive localization (paper 001, Algorithms 1 and 2).

Paper 001 is Asi, Levy and Duchi, "Adapting to Function Difficulty and Growth Conditions in
Private Optimization". ``L...`` below are line numbers of its seed text
``shared/papers/001_3f0c176aac4574bd.txt``; ``E#`` and ``P#`` are the errata (section 8) and
pitfalls (section 7) of its digest; "spec B.#" is the implementation spec
(``shared/papers/specs_001_004.md``). Natural logarithms everywhere (P12).

Algorithm 1 (:class:`IterativeLocalization`, L139-157, Props 1-2). Every number is public::

    k = ceil(ln n) (or `rounds`);  m = floor(n / k)            # batch size (P8: floor)
    eta = (D/L) min(1/sqrt(n ln(1/beta)), eps/(d ln(1/beta)))   # Prop 1 (delta = 0)
          (D/L) min(1/sqrt(n ln(1/beta)), eps/(sqrt(d ln(1/delta)) ln(1/beta)))   # Prop 2
    c_0 = Pi_X(x_0)
    for j = 1..k_eff:
        eta_j = 2^(-4j) eta ;  lam_j = 2 / (eta_j m)             # regularization x16 per round
        w_j   = certified argmin over X (= over X cap B(c_{j-1}, 2 L eta_j m)) of
                (1/m) sum_{i in B_j} f_L(w, z_i) + (lam_j/2) ||w - c_{j-1}||^2  (gap <= alpha_j)
        c_j   = Pi_X(w_j + b_j)                                  # P6: projected (post-processing)
    release c_{k_eff}

The paper writes the regularizer ``(1/(eta_j m)) ||x - c||^2``: in dpcvx's ``(lam/2) ||w - c||^2``
that is ``lam_j = 2 / (eta_j m)``. The paper's ball ``X_j = X cap B(c_{j-1}, 2 L eta_j m)`` is never
active: with ``c_{j-1}`` in X (P6) the minimizer over X satisfies ``||w*_j - c_{j-1}|| <= L/lam_j
= L eta_j m / 2`` (the variational inequality), so it is also the minimizer over ``X_j``, and the
round solves over the public X itself (same minimizer, same sensitivity bound; a certificate
over the tiny ball of a late round is what float64 cannot reach reliably).

Certified sensitivity (spec B.0, issue 15). Exact minimizers of lam_j-strongly convex objectives
over the same public set that differ in one of ``m`` L-Lipschitz losses are at most
``2 L / (lam_j m) = L eta_j`` apart (paper 002 Lemma B.2; E16: the paper's ``2L/(lam_i n_0) <= 4
L eta_i`` uses the modulus ``1/(eta_i n_0)``, half the true one; its slack is safe). dpcvx
certifies ``gap <= alpha_j``, so the released point's sensitivity is

    Delta'_j = 2 L / (lam_j m) + 2 sqrt(2 alpha_j / lam_j)        (rounded up)

as for :class:`~dpcvx.OutputPerturbation`. ``alpha_j`` is the output-perturbation default
(5% inflation) but never below dpcvx's float64 floor ``1e-10 (1 + L D + lam_j D^2/2)`` (the
objective's variation over the public solve domain X); where the
floor binds the printed ``4 L eta_j`` noise basis is too small (spec B.0), so the noise always
comes from ``Delta'_j`` (``constants="paper"``: the max of ``4 L eta_j`` and ``Delta'_j``, with
E4's unit-consistent ``alpha_j = L^2 eta_j / (2 m)`` in place of the printed ``Delta <= eps/n``).

Noise at the **full** ``(epsilon, delta)`` in every round (E2: ``eps_i`` is ``eps``; the batches
are disjoint): l2-Laplace with density ``exp(-epsilon ||b|| / Delta'_j)`` by default, or the
paper's per-coordinate ``Lap_d`` with l1 sensitivity ``sqrt(d) Delta'_j`` (``noise="laplace"``);
for ``delta > 0`` the analytic Gaussian of Balle and Wang at ``(epsilon, delta)`` (E3/P3: never
the printed ``4 L eta_j sqrt(log(1/delta))/eps`` nor Lemma 2.3's form).

Composition: one ledger event ``(epsilon, delta)`` by adaptive parallel composition. Each record
enters at most one round (a data-independent partition: a uniformly random permutation from the
mechanism's own generator, or the given order, cut into contiguous batches); the centres are
post-processing of earlier releases and every solve's domain is public given them.

Public skipping (P5): a round whose movement bound ``M_j = L eta_j m / 2`` (when ``c_{j-1}`` is in
X, ``||w*_j - c_{j-1}|| <= L / lam_j``, so the ball is never active) is below ``move_tolerance
* D`` cannot move the point and would only ask for gaps below float64 resolution; it is not
run (``k_eff``), its batch stays unused.

Algorithm 2 (:class:`GrowthAdaptiveLocalization`, L183-198, Thms 2-3): ``T = ceil(2 ln n /
(kappa_lower - 1))`` epochs, each Algorithm 1 on its own disjoint chunk of ``n_0 = floor(n/T)``
records (E5: epoch ``i = 0..T-1`` takes positions ``[i n_0, (i+1) n_0)``), on the domain
``X_i = X cap B(x_i, D_i)`` with ``D_i = 2^(-i) D`` a **radius** (E6), step size ``eta_i =
2^(-i) eta_0`` (L185-191), ``x_{i+1}`` the epoch's last iterate (projected onto ``X_i``). The
inner ball ``B(c, 2 L eta_ij m)`` is never active when ``c`` is in ``X_i`` and is dropped (spec
B.2; any public convex set keeps the sensitivity bound). One event by parallel composition
over every executed inner batch of every epoch. Only ``kappa_lower`` is needed: the growth
constants ``lambda`` and ``kappa`` are never inputs.

Every solve runs on the L-Lipschitz extension ``f_L`` of the loss (paper 000, eq. (5)): on a
:class:`~dpcvx.Problem` the pipeline enforces the ``lipschitz`` claim (examples dpcvx cannot
certify L-Lipschitz on W enter with ``f_L``; the others keep their plain loss, equal to ``f_L``
on W), so privacy never rests on the claimed L (P9). Sources dpcvx cannot inspect (oracles,
losses with generic terms) trust the claim, as for :class:`~dpcvx.OutputPerturbation`.
"""

from __future__ import annotations

import math
import warnings
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
    noise_event,
    perturb,
    public_start,
    round_up,
)
from dpcvx.mechanisms.noise import NoiseSpec, calibrate
from dpcvx.mechanisms.output_perturbation import ACCURACY_FLOOR, default_accuracy
from dpcvx.neighbors import REPLACE_ONE, NeighborRelation
from dpcvx.types import Guarantee, Sensitivity

__all__ = [
    "GrowthAdaptiveLocalization",
    "IterativeLocalization",
    "LocalizationPlan",
    "RoundPlan",
    "certified_sensitivity",
    "epoch_count",
]

#: the noise laws of a pure release
NOISES = ("l2_laplace", "laplace")
#: the constants modes
CONSTANTS = ("tight", "paper")

_FAILURE = (
    "dpcvx could not certify one of the round solves of {owner} to its accuracy target (fixed "
    "from public quantities). Nothing was released and the whole budget stays spent. This "
    "message carries no data-dependent number, but the failure itself depends on the data: do "
    "not retry on the same data without charging the budget again. To fix: rescale the data so "
    "that losses are of order one, or raise `move_tolerance` (fewer, better-conditioned "
    "rounds)."
)


def certified_sensitivity(lipschitz: float, regularization: float, m: int, accuracy: float):
    """``(base, Delta')``: ``base = 2 L / (lam m)`` (exact minimizers, paper 002 Lemma B.2) and
    ``Delta' = base + 2 sqrt(2 alpha / lam)`` rounded up (the certified point of each side is
    within ``sqrt(2 alpha / lam)`` of its exact minimizer)."""
    base = 2.0 * lipschitz / (regularization * m)
    return base, round_up(base + 2.0 * math.sqrt(2.0 * accuracy / regularization))


def epoch_count(n: int, growth_lower: float) -> int:
    """Paper 001's ``T = ceil(2 ln n / (kappa_lower - 1))`` (Thm 2, natural log), at least 1."""
    return max(1, math.ceil(2.0 * math.log(n) / (growth_lower - 1.0)))


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundPlan:
    """One certified solve and its noise (every number public).

    ``radius`` is the radius ``D_i`` of the epoch's ball ``X_i = X cap B(x_i, D_i)`` centred at
    the epoch's start ``x_i`` (Algorithm 2); None means the whole domain (Algorithm 1, and
    epoch 0 whose ball covers X). The round's solve and the projection of its noisy output are
    on that public set.
    """

    index: int  # j, from 1 within its epoch
    epoch: int  # i, from 0 (0 for Algorithm 1)
    batch: tuple[int, int]  # positions [start, stop) in the record order
    step_size: float  # eta_j
    regularization: float  # lam_j = 2 / (eta_j m)
    radius: float | None
    accuracy: float  # alpha_j
    base_sensitivity: float  # 2 L / (lam_j m) = L eta_j
    sensitivity: Sensitivity  # Delta'_j (max with 4 L eta_j in paper mode), l2
    noise: NoiseSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalizationPlan:
    """Everything the release uses, fixed from public quantities before any data is read."""

    rounds: tuple[RoundPlan, ...]
    guarantee: Guarantee
    n: int
    d: int
    diameter: float
    initial_point: np.ndarray
    epoch_radii: tuple[float, ...]  # D_i of every executed epoch (Algorithm 1: (D,))
    detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    ledger_detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    @property
    def extension_C(self) -> None:
        """The solves use the declared loss; the pipeline enforces the ``lipschitz`` claim with
        the L-Lipschitz extension (module docstring)."""
        return None

    def events(self, label: str) -> tuple[PrivacyEvent, ...]:
        """One event at the full guarantee (adaptive parallel composition over disjoint
        batches); Gaussian with the rounds' smallest noise multiplier when ``delta > 0``."""
        weakest = min(self.rounds, key=lambda r: r.noise.scale / r.noise.sensitivity)
        detail = dict(self.ledger_detail)
        detail["noise_multiplier_round"] = (weakest.epoch, weakest.index)
        return noise_event(label, self.guarantee, weakest.noise, detail)

    def facts(self) -> MappingProxyType:
        """The plan's public numbers (computed from the rounds, so a negative control's plan
        reports its own noise)."""
        r = self.rounds
        facts = dict(self.detail)
        facts.update(
            {
                "rounds_run": len(r),
                "round_epochs": tuple(x.epoch for x in r),
                "step_sizes": tuple(x.step_size for x in r),
                "regularizations": tuple(x.regularization for x in r),
                "radii": tuple(x.radius for x in r),
                "accuracies": tuple(x.accuracy for x in r),
                "base_sensitivities": tuple(x.base_sensitivity for x in r),
                "sensitivities": tuple(x.sensitivity.value for x in r),
                "noise": r[0].noise.kind,
                "noise_scales": tuple(x.noise.scale for x in r),
                "batches": tuple(x.batch for x in r),
                "epoch_radii": self.epoch_radii,
            }
        )
        return MappingProxyType(facts)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Localization:
    """Parameters, validation and the round loop shared by both algorithms."""

    lipschitz: float
    failure_probability: float | None = None
    step_size: float | None = None
    initial_point: Any = None
    noise: str = "l2_laplace"
    constants: str = "tight"
    accuracy: float | None = None
    move_tolerance: float = 1e-6
    min_batch_size: int = 1
    shuffle: bool = True
    solver: str | None = None
    progress: bool = True

    requirements: ClassVar[tuple[str, ...]] = ("solver", "project")
    extension: ClassVar[ExtensionUse] = PLAIN
    enforces_lipschitz: ClassVar[bool] = True
    neighbors: ClassVar[NeighborRelation] = REPLACE_ONE
    _owner: ClassVar[str] = "_Localization"

    def __post_init__(self) -> None:
        owner = self._owner
        object.__setattr__(self, "lipschitz", check_positive(self.lipschitz, "lipschitz", owner))
        if self.failure_probability is not None:
            beta = check_real(self.failure_probability, "failure_probability", owner)
            if not 0.0 < beta < 1.0:
                raise InvalidParameterError(
                    f"The `failure_probability` parameter of `{owner}` must lie in (0, 1) "
                    f"(the paper assumes beta <= 1/(n + d)). Got {self.failure_probability!r}."
                )
            object.__setattr__(self, "failure_probability", beta)
        for name in ("step_size", "accuracy"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, check_positive(value, name, owner))
        if self.noise not in NOISES:
            raise InvalidParameterError(
                f"The `noise` parameter of `{owner}` must be 'l2_laplace' or 'laplace' (the "
                f"paper's per-coordinate Lap_d). Got {self.noise!r}."
            )
        if self.constants not in CONSTANTS:
            raise InvalidParameterError(
                f"The `constants` parameter of `{owner}` must be 'tight' or 'paper'. "
                f"Got {self.constants!r}."
            )
        tol = check_real(self.move_tolerance, "move_tolerance", owner)
        if not 0.0 <= tol < 1.0:
            raise InvalidParameterError(
                f"The `move_tolerance` parameter of `{owner}` must lie in [0, 1). Got {tol!r}."
            )
        object.__setattr__(self, "move_tolerance", tol)
        object.__setattr__(
            self, "min_batch_size", _check_count(self.min_batch_size, "min_batch_size", owner)
        )
        for name in ("shuffle", "progress"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidParameterError(f"The `{name}` parameter of `{owner}` must be a bool.")
        object.__setattr__(self, "initial_point", check_center(self.initial_point, owner))

    # ------------------------------------------------------------------ public planning
    def _inputs(self, n: int, d: int, center: Any, diameter: float, epsilon: float, delta: float):
        """The validated public inputs: ``(epsilon, delta, start, D, beta)``."""
        owner = self._owner
        epsilon = check_positive(epsilon, "epsilon", owner)
        delta = check_delta(delta, owner)
        if delta > 0 and self.noise == "laplace":
            raise InvalidParameterError(
                f"`{owner}` with noise='laplace' is pure epsilon-DP: `delta` must be 0. Got "
                f"{delta!r}. Use noise='l2_laplace' (Gaussian noise when delta > 0)."
            )
        start, D = public_start(owner, self.initial_point, center, d, diameter)
        beta = self.failure_probability
        if beta is None:
            beta = 1.0 / (n + d)
        elif beta > 1.0 / (n + d):
            warnings.warn(
                f"`{owner}`: failure_probability = {beta:g} exceeds 1/(n + d) = "
                f"{1.0 / (n + d):.3g}, the largest value paper 001's utility bounds allow. "
                "Privacy is unaffected; the stated excess-risk bound may not hold.",
                UserWarning,
                stacklevel=4,
            )
        return epsilon, delta, start, D, beta

    def _round(
        self,
        *,
        D: float,
        index: int,
        epoch: int,
        batch: tuple[int, int],
        eta: float,
        m: int,
        d: int,
        radius: float | None,
        epsilon: float,
        delta: float,
    ) -> RoundPlan:
        """One round's numbers: ``lam_j``, ``alpha_j``, ``Delta'_j`` and its noise. The accuracy
        floor scales with ``1 + L D + lam_j D^2 / 2``, a public bound on the variation of the
        round's objective over the public solve domain X: with ``1 + L D`` alone, late rounds
        (``lam_j`` of 1e4-1e6) on boundary centres were measured not to certify (a
        data-dependent CertificationError); the larger floor only raises ``Delta'_j``, and the
        noise always comes from ``Delta'_j``."""
        L = self.lipschitz
        lam = 2.0 / (eta * m)
        scale = 1.0 + L * D + lam * D * D / 2.0
        if self.accuracy is not None:
            alpha = self.accuracy
        elif self.constants == "paper":
            alpha = max(L * L * eta / (2.0 * m), ACCURACY_FLOOR * scale)  # E4
        else:
            alpha = default_accuracy(L, lam, m, scale)
        base, total = certified_sensitivity(L, lam, m, alpha)
        if self.constants == "paper":
            total = max(total, round_up(4.0 * L * eta))  # the printed basis, never below Delta'
        if self.noise == "laplace":  # the paper's Lap_d: l1 sensitivity sqrt(d) Delta'
            noise = calibrate(
                Sensitivity(value=round_up(math.sqrt(d) * total), norm="l1"), epsilon, 0.0
            )
        else:
            noise = calibrate(total, epsilon, delta)
        return RoundPlan(
            index=index,
            epoch=epoch,
            batch=batch,
            step_size=eta,
            regularization=lam,
            radius=radius,
            accuracy=alpha,
            base_sensitivity=base,
            sensitivity=Sensitivity(value=total),
            noise=noise,
        )

    def _common(self, D: float, beta: float, delta: float) -> dict:
        return {
            "lipschitz": self.lipschitz,
            "diameter": D,
            "failure_probability": beta,
            "noise_law": self.noise if delta == 0 else "gaussian (analytic)",
            "constants": self.constants,
            "move_tolerance": self.move_tolerance,
            "shuffle": self.shuffle,
            "log": "natural (P12)",
        }

    # ------------------------------------------------------------------ release
    def release(self, plan: LocalizationPlan, context: Any, rng: np.random.Generator) -> Release:
        """Run the rounds (``context`` is the release's
        :class:`~dpcvx.mechanisms.base.DataAccess`). Returns the last projected iterate, the
        public certificate of every round's solve and public facts (every round's released
        iterate, covered by the guarantee). Any failure is one fixed
        :class:`~dpcvx.CertificationError` text."""
        try:
            return self._release(plan, context, rng)
        except Exception:  # noqa: BLE001 - nothing data-dependent may leave a private release
            raise CertificationError(_FAILURE.format(owner=self._owner)) from None

    def _release(self, plan: LocalizationPlan, context: Any, rng: np.random.Generator) -> Release:
        order = rng.permutation(plan.n) if self.shuffle else np.arange(plan.n)
        kind = context.domain.kind
        x = np.asarray(context.project(plan.initial_point), float)  # x_0 (public)
        center, epoch = x, -1
        certificates, outputs = [], []
        rounds = progress_bar(
            plan.rounds,
            total=len(plan.rounds),
            desc=f"{self._owner} rounds",
            unit="round",
            enabled=self.progress,
        )
        for r in rounds:
            if r.epoch != epoch:  # a new epoch starts at the last iterate
                epoch, x = r.epoch, center
            # the solve's public domain and the projection's: X_i = X cap B(x_i, D_i), or X (P6)
            ball = None if r.radius is None else (x, r.radius)
            indices = np.sort(order[r.batch[0] : r.batch[1]])
            solve = context.solver(indices=indices)
            cert = solve(r.regularization, center, r.accuracy, localize=ball)
            if not cert.gap <= r.accuracy:  # defensive: the solve contract guarantees this
                raise CertificationError("Internal: a certificate above the accuracy target.")
            certificates.append(
                ReleaseCertificate(
                    accuracy=r.accuracy,
                    distance_bound=math.sqrt(2.0 * r.accuracy / r.regularization),
                    regularization=r.regularization,
                    strong_convexity=0.0,
                    center=np.asarray(center, float).copy(),
                    domain=kind if ball is None else f"{kind} ∩ ball",
                )
            )
            noisy = perturb(cert.w, r.noise, rng)
            center = np.asarray(context.project(noisy, localize=ball), float)
            outputs.append(center.copy())
        facts = {"round_outputs": tuple(outputs)}
        return Release(center.copy(), tuple(certificates), MappingProxyType(facts))


def _check_count(value: Any, name: str, owner: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InvalidParameterError(
            f"The `{name}` parameter of `{owner}` must be a positive integer. Got {value!r}."
        )
    return int(value)


def _log_inverse(beta: float) -> float:
    return math.log(1.0 / beta)


@dataclass(frozen=True, slots=True, kw_only=True)
class IterativeLocalization(_Localization):
    """Paper 001's localization-based algorithm (Algorithm 1, Props 1-2): pure epsilon-DP (or
    (epsilon, delta)-DP) stochastic convex optimization for L-Lipschitz losses.

    ``k`` rounds on disjoint batches; round ``j`` solves the regularized ERM of its batch
    centred at the previous projected noisy iterate, with the regularization growing 16x per
    round, certified by dpcvx, and perturbs it with noise calibrated to the certified
    sensitivity (module docstring).

    Parameters
    ----------
    lipschitz : float
        ``L``: a bound on the Lipschitz constant in ``w`` of one example's loss on the domain,
        for every possible example. On a :class:`~dpcvx.Problem` the claim is enforced with the
        L-Lipschitz extension (privacy never rests on it).
    failure_probability : float, optional
        ``beta`` in ``(0, 1)``, default ``1/(n + d)`` (the paper's largest allowed value). It
        sets the default step size only (utility; P13: never choose it on the data).
    step_size : float, optional
        ``eta`` (public). Default: Prop 1's ``(D/L) min(1/sqrt(n ln(1/beta)), eps/(d
        ln(1/beta)))`` for ``delta = 0``, Prop 2's ``(D/L) min(1/sqrt(n ln(1/beta)),
        eps/(sqrt(d ln(1/delta)) ln(1/beta)))`` otherwise (E7: the main-text form).
    rounds : int, optional
        ``k`` (public). Default ``ceil(ln n)``.
    initial_point : array-like, optional
        ``x_0`` (public), projected onto the domain; default the domain's center.
    noise : {"l2_laplace", "laplace"}
        Pure noise law: density ``exp(-eps ||b|| / Delta')`` (default) or the paper's
        per-coordinate ``Lap_d`` calibrated to the l1 sensitivity ``sqrt(d) Delta'``. With
        ``delta > 0`` the noise is the analytic Gaussian (``"laplace"`` is refused).
    constants : {"tight", "paper"}
        ``"tight"``: ``alpha_j`` inflates the sensitivity by 5% (floored) and the noise basis is
        ``Delta'_j``. ``"paper"``: ``alpha_j = L^2 eta_j/(2m)`` (E4) and the basis is
        ``max(4 L eta_j, Delta'_j)`` (the printed value, never below the certified one).
    accuracy : float, optional
        Every round's certified gap ``alpha_j`` (public), overriding the mode's default.
    move_tolerance : float
        Rounds with ``L eta_j m / 2 < move_tolerance * D`` are not run. Default 1e-6.
    min_batch_size : int
        Refuse plans whose batches ``m = floor(n/k)`` are smaller. Default 1.
    shuffle : bool
        Draw the record order from a uniformly random permutation (default); the partition is
        data-independent either way.
    solver : str, optional
        First solver of the refinement ladder.
    progress : bool
        A progress bar over the rounds on a terminal; False silences it.

    Notes
    -----
    Guarantee: epsilon-DP (``delta = 0``) or (epsilon, delta)-DP, replace-one neighbors,
    public n, on every dataset: one event at the full budget by adaptive parallel composition
    over the ``k_eff`` disjoint batches (E2). Sensitivity of round ``j``: ``2L/(lam_j m) +
    2 sqrt(2 alpha_j/lam_j)`` with ``lam_j = 2/(eta_j m)``, ``eta_j = 2^(-4j) eta`` (E16: the
    paper's ``4 L eta_j`` basis has a factor-4 slack over ``L eta_j``; the certified term is what
    an inexact solve adds, E4). Errata and pitfalls applied: E2, E3/P3 (analytic Gaussian), E4,
    E7, E16, P5 (public skipping), P6 (projection), P8 (floor; too-small batches raise), P12.
    Raises :class:`~dpcvx.InvalidParameterError` before anything is spent on bad input.
    """

    rounds: int | None = None

    _owner: ClassVar[str] = "IterativeLocalization"

    def __post_init__(self) -> None:
        _Localization.__post_init__(self)
        object.__setattr__(self, "rounds", _check_count(self.rounds, "rounds", self._owner))

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
    ) -> LocalizationPlan:
        """Every round's batch, step size, regularization, accuracy, sensitivity and noise,
        from public quantities only. ``domain`` is not needed."""
        owner = self._owner
        epsilon, delta, start, D, beta = self._inputs(n, d, center, diameter, epsilon, delta)
        L = self.lipschitz
        k = self.rounds or max(1, math.ceil(math.log(n)))
        m = n // k
        if m < self.min_batch_size:
            raise InvalidParameterError(
                f"`{owner}` runs k = {k} rounds on disjoint batches of floor(n/k) records and "
                f"needs floor(n/k) >= min_batch_size = {self.min_batch_size}; got n = {n}. "
                "Lower `rounds` or `min_batch_size`, or use more data."
            )
        eta = self.step_size or _default_step(D, L, n, d, epsilon, delta, beta)
        reach = [L * eta * 2.0 ** (-4 * j) * m / 2.0 for j in range(1, k + 1)]
        movable = [j for j in range(1, k + 1) if reach[j - 1] >= self.move_tolerance * D]
        if not movable:
            raise InvalidParameterError(
                f"`{owner}`: no round can move the point: the first round's reach L eta_1 m/2 = "
                f"{reach[0]:.3g} is below move_tolerance * D = {self.move_tolerance * D:.3g}. "
                "Raise `step_size` or lower `move_tolerance`."
            )
        k_eff = max(movable)
        rounds = []
        for j in range(1, k_eff + 1):
            rounds.append(
                self._round(
                    D=D,
                    index=j,
                    epoch=0,
                    batch=((j - 1) * m, j * m),
                    eta=eta * 2.0 ** (-4 * j),
                    m=m,
                    d=d,
                    radius=None,
                    epsilon=epsilon,
                    delta=delta,
                )
            )
        composition = (
            f"parallel over {k_eff} disjoint batches of {m} records "
            f"({'shuffled' if self.shuffle else 'in the given order'}), each round at "
            f"({epsilon:g}, {delta:g}); centres are post-processing: one event "
            f"({n - k_eff * m} of {n} records unused)"
        )
        detail = self._common(D, beta, delta)
        detail.update(
            {
                "mechanism": owner,
                "paper": "001 Alg 1 (Props 1, 2)",
                "errata": "001 digest E2, E3/P3, E4, E7, E16; P5, P6, P8, P12",
                "rounds_paper": k,
                "batch_size": m,
                "step_size": eta,
                "paper_radii": tuple(2.0 * L * r.step_size * m for r in rounds),
                "composition": composition,
                "records_used": k_eff * m,
            }
        )
        ledger = {"paper": "001 Alg 1", "rounds": k_eff, "composition": composition}
        return LocalizationPlan(
            rounds=tuple(rounds),
            guarantee=Guarantee(epsilon=epsilon, delta=delta),
            n=n,
            d=d,
            diameter=D,
            initial_point=start.copy(),
            epoch_radii=(D,),
            detail=MappingProxyType(detail),
            ledger_detail=MappingProxyType(ledger),
        )


def _default_step(D: float, L: float, n: int, d: int, epsilon: float, delta: float, beta: float):
    """Prop 1 (``delta = 0``) / Prop 2 main text (E7) step size ``eta``."""
    lb = _log_inverse(beta)
    statistical = 1.0 / math.sqrt(n * lb)
    if delta == 0:
        private = epsilon / (d * lb)
    else:
        private = epsilon / (math.sqrt(d * math.log(1.0 / delta)) * lb)
    return (D / L) * min(statistical, private)


@dataclass(frozen=True, slots=True, kw_only=True)
class GrowthAdaptiveLocalization(_Localization):
    """Paper 001's epoch-based algorithm for kappa-growth (Algorithm 2, Theorems 2-3).

    ``T`` epochs of :class:`IterativeLocalization` on disjoint chunks, each on the ball of the
    previous epoch's output with the radius and step size halved (module docstring). It adapts
    to any growth exponent ``kappa >= kappa_lower`` of the population loss without knowing
    ``kappa`` or the growth constant.

    Parameters
    ----------
    lipschitz : float
        ``L`` (enforced with the L-Lipschitz extension, as for
        :class:`IterativeLocalization`).
    growth_lower : float
        ``kappa_lower > 1``: a public lower bound on the growth exponent. It sets ``T``.
    epochs : int, optional
        ``T`` (public). Default ``ceil(2 ln n / (kappa_lower - 1))`` (Thm 2).
    step_size : float, optional
        ``eta_0`` (public). Default (L185-191): ``(D/(2L)) min(1/sqrt(n_0 ln(n_0) ln(1/beta)),
        eps/(d ln(1/beta)))`` for ``delta = 0`` and ``(D/(2L)) min(1/sqrt(n_0 ln(n_0)
        ln(1/beta)), eps/sqrt(d ln(1/delta) ln(1/beta)))`` otherwise (E7).
    failure_probability, initial_point, noise, constants, accuracy : see IterativeLocalization
        As for :class:`IterativeLocalization` (``beta`` enters ``eta_0`` only).
    move_tolerance : float
        Epochs with ``D_i < move_tolerance * D`` and inner rounds with ``L eta_ij m / 2 <
        move_tolerance * D`` are not run (P5). Default 1e-6.
    min_batch_size, shuffle, solver, progress : see IterativeLocalization
        As for :class:`IterativeLocalization`.

    Notes
    -----
    Guarantee: epsilon-DP (Thm 2) or (epsilon, delta)-DP (Thm 3), replace-one neighbors,
    public n, on every dataset: one event at the full budget by adaptive parallel composition
    over every executed inner batch of every epoch (no epsilon split across epochs, L475).
    Epoch ``i`` uses records ``[i n_0, (i+1) n_0)`` of the order (E5), domain ``X cap B(x_i,
    D_i)`` with ``D_i`` a radius (E6); inner rounds as Algorithm 1 with ``k = ceil(ln n_0)``,
    ``m = floor(n_0/k)``, ``eta_ij = 2^(-4j) 2^(-i) eta_0``, ``lam_ij = 2/(eta_ij m)`` and the
    sensitivity ``2L/(lam_ij m) + 2 sqrt(2 alpha_ij/lam_ij)``. E10/E11/E12 (utility statements:
    ``kappa_lower - 1`` in Thm 3, no extra T in rho, inner confidence beta^2) are reported,
    not used by the algorithm. Raises :class:`~dpcvx.InvalidParameterError` before anything
    is spent when ``kappa_lower <= 1`` or non-finite, or the batches are too small.
    """

    growth_lower: float = 2.0
    epochs: int | None = None

    _owner: ClassVar[str] = "GrowthAdaptiveLocalization"

    def __post_init__(self) -> None:
        _Localization.__post_init__(self)
        owner = self._owner
        kappa = check_real(self.growth_lower, "growth_lower", owner)
        if not kappa > 1.0:
            raise InvalidParameterError(
                f"The `growth_lower` parameter (kappa_lower) of `{owner}` must exceed 1 (a lower "
                f"bound on the growth exponent; T = ceil(2 ln n/(kappa_lower - 1)) epochs). Got "
                f"{self.growth_lower!r}. Sharp (kappa = 1) losses are covered by any "
                "kappa_lower > 1 (growth nests upward on a bounded domain)."
            )
        object.__setattr__(self, "growth_lower", kappa)
        if kappa < 1.1:
            warnings.warn(
                f"`{owner}`: growth_lower = {kappa:g} is close to 1, so T = ceil(2 ln n / "
                f"(kappa_lower - 1)) epochs is large and every epoch gets few records (P8). "
                "Privacy is unaffected; set `epochs` or a larger `growth_lower` if the plan "
                "is refused for small batches.",
                UserWarning,
                stacklevel=3,
            )
        object.__setattr__(self, "epochs", _check_count(self.epochs, "epochs", owner))

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
    ) -> LocalizationPlan:
        """Every epoch's chunk, radius and step size and every inner round's numbers, from
        public quantities only. ``domain`` is not needed."""
        owner = self._owner
        epsilon, delta, start, D, beta = self._inputs(n, d, center, diameter, epsilon, delta)
        L, tol = self.lipschitz, self.move_tolerance
        T = self.epochs or epoch_count(n, self.growth_lower)
        n0 = n // T
        k = max(1, math.ceil(math.log(n0))) if n0 >= 1 else 1
        m = n0 // k
        if m < self.min_batch_size:
            raise InvalidParameterError(
                f"`{owner}` runs T = {T} epochs on disjoint chunks of n_0 = floor(n/T) = {n0} "
                f"records, each cut into k = ceil(ln n_0) = {k} batches of floor(n_0/k) = {m}, "
                f"and needs batches of at least min_batch_size = {self.min_batch_size}; got "
                f"n = {n}. Raise `growth_lower` (fewer epochs), set `epochs`, or use more data."
            )
        if self.step_size is not None:
            eta0 = self.step_size
        else:
            lb = _log_inverse(beta)
            ln0 = math.log(n0)
            statistical = 1.0 / math.sqrt(n0 * ln0 * lb) if ln0 > 0 else math.inf
            if delta == 0:
                private = epsilon / (d * lb)
            else:
                private = epsilon / math.sqrt(d * math.log(1.0 / delta) * lb)
            eta0 = (D / (2.0 * L)) * min(statistical, private)
        rounds: list[RoundPlan] = []
        radii: list[float] = []
        for i in range(T):
            D_i = D * 2.0**-i
            if D_i < tol * D:
                break
            eta_i = eta0 * 2.0**-i
            epoch_rounds = []
            for j in range(1, k + 1):
                eta_ij = eta_i * 2.0 ** (-4 * j)
                if L * eta_ij * m / 2.0 < tol * D:
                    break
                start_pos = i * n0 + (j - 1) * m
                epoch_rounds.append(
                    self._round(
                        D=D,
                        index=j,
                        epoch=i,
                        batch=(start_pos, start_pos + m),
                        eta=eta_ij,
                        m=m,
                        d=d,
                        radius=None if D_i >= D else D_i,
                        epsilon=epsilon,
                        delta=delta,
                    )
                )
            if not epoch_rounds:
                break
            rounds.extend(epoch_rounds)
            radii.append(D_i)
        if not rounds:
            raise InvalidParameterError(
                f"`{owner}`: no round can move the point: the first round's reach L eta_01 m/2 "
                f"= {L * eta0 / 16.0 * m / 2.0:.3g} is below move_tolerance * D = {tol * D:.3g}. "
                "Raise `step_size` or lower `move_tolerance`."
            )
        used = len(rounds) * m
        composition = (
            f"parallel over {len(rounds)} disjoint batches of {m} records in {len(radii)} "
            f"epochs ({'shuffled' if self.shuffle else 'in the given order'}), each round at "
            f"({epsilon:g}, {delta:g}); centres and epoch balls are post-processing: one "
            f"event ({n - used} of {n} records unused)"
        )
        detail = self._common(D, beta, delta)
        detail.update(
            {
                "mechanism": owner,
                "paper": "001 Alg 2 (Thms 2, 3) over Alg 1",
                "errata": "001 digest E2-E7, E10-E12, E16; P5, P6, P8, P12, P13",
                "growth_lower": self.growth_lower,
                "epochs_paper": T,
                "epochs_run": len(radii),
                "chunk_size": n0,
                "inner_rounds": k,
                "batch_size": m,
                "step_size": eta0,
                "inner_failure_probability": beta / T,
                "composition": composition,
                "records_used": used,
            }
        )
        ledger = {
            "paper": "001 Alg 2",
            "epochs": len(radii),
            "rounds": len(rounds),
            "composition": composition,
        }
        return LocalizationPlan(
            rounds=tuple(rounds),
            guarantee=Guarantee(epsilon=epsilon, delta=delta),
            n=n,
            d=d,
            diameter=D,
            initial_point=start.copy(),
            epoch_radii=tuple(radii),
            detail=MappingProxyType(detail),
            ledger_detail=MappingProxyType(ledger),
        )
