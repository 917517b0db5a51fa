"""Double output perturbation on the Lipschitz extension (paper 000, Algorithm 4, with
Algorithm 2 as its first stage).

With ``f_C`` the C-Lipschitz extension of the loss and ``F_C(w) = (1/n) sum_i f_C(w, z_i) +
(lam/2) ||w - w0||^2``:

1. **Localize (Algorithm 2, budget epsilon/2).** Certified solve of ``min_W F_C`` to accuracy
   ``alpha_1``; release ``w_loc = Pi_W(w~ + b_1)`` with l2-Laplace noise calibrated to
   ``Delta_1 = 2C/(lam n) + 2 sqrt(2 alpha_1 / lam)`` at ``epsilon/2``; set the public
   ``W0 = W intersect B(w_loc, r)``.
2. **Optimize over W0 (budget epsilon/2).** Certified solve of ``min_{W0} F_C`` (every copy
   ``y_i`` still in W) to accuracy ``alpha_2``; release ``Pi_W0(w_alpha + b_2)`` with noise
   calibrated to ``Delta_2 = 2C/(lam n) + 2 sqrt(2 alpha_2 / lam)`` at ``epsilon/2``.

Privacy: ``f_C`` is C-Lipschitz on W for every example, so the exact minimizers over any public
convex set move by at most ``2C/(lam n)`` between replace-one neighbors, and each certified
solve adds ``sqrt(2 alpha / lam)`` per dataset; stage 2 is conditioned on the public ``W0``;
projections are post-processing; basic composition gives ``epsilon``. Pure epsilon-DP on every
dataset, whatever the data (no Lipschitz constant of ``f`` is assumed).

``constants="tight"`` (default) calibrates both stages exactly as above, with dpcvx's default
accuracies, and the radius ``r = sqrt(2 alpha_1/lam) + s_1 * Q(1 - e^-zeta)`` (``Q`` the
Gamma(d, 1) quantile, ``s_1`` the stage-1 scale), which contains the stage-2 target with
probability ``>= 1 - e^-zeta`` (utility only). In both modes the accuracy targets are floored
at ``EXTENSION_ACCURACY_FLOOR * (1 + C D)`` (public), and the noise is calibrated to the
floored targets. ``constants="paper"`` reproduces the printed
Algorithm 4: ``alpha_1 = C^2/(2 lam n^2)``, ``alpha_2 = C^2/(72 lam n^2)``, both noise scales
``12 C/(epsilon lam n)`` and ``r = 600 C d/(lam n epsilon)``. The digest of paper 000
(``docs/paper000_digest.md``, erratum E1/E2) shows the printed constants are valid but loose:
they spend only ``19 epsilon / 36``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from scipy.stats import gamma

from dpcvx._validation import check_center, check_moment_order, check_positive, check_pure_budget
from dpcvx.certification.certificate import CertifiedSolution, ReleaseCertificate
from dpcvx.errors import InvalidParameterError
from dpcvx.mechanisms.base import (
    PLANNED,
    ExtensionUse,
    PerturbedSolvePlan,
    Release,
    perturb,
    refuse_unsolvable,
    single_solve_release,
)
from dpcvx.mechanisms.noise import NoiseSpec, calibrate
from dpcvx.mechanisms.output_perturbation import default_accuracy
from dpcvx.neighbors import REPLACE_ONE, NeighborRelation
from dpcvx.types import Guarantee, Sensitivity

__all__ = ["DoubleOutputPerturbation", "DoublePlan", "LocalizePlan", "OutputPertLocalize"]

#: the smallest accuracy target of an extension solve, times ``1 + C D`` (public). The joint
#: program carries ``n (d + 1)`` extra variables and its certified gaps bottom out near
#: ``1e-9`` for losses of order one (measured); a target below that would make the release
#: abort on ordinary data. The noise is calibrated to the floored target, so the floor only
#: inflates the sensitivity (by ``2 sqrt(2 alpha / lam)``), never weakens the guarantee.
EXTENSION_ACCURACY_FLOOR = 1e-8


@dataclass(frozen=True, slots=True, kw_only=True)
class DoublePlan(PerturbedSolvePlan):
    """Both stages' public quantities, fixed before any data is touched."""

    guarantee: Guarantee
    regularization: float
    center: np.ndarray
    accuracy: float  # alpha_2 (the released point's solve)
    localization_accuracy: float  # alpha_1
    sensitivity: Sensitivity  # Delta_2
    base_sensitivity: float  # 2C/(lam n)
    localization_sensitivity: float  # Delta_1
    noise: NoiseSpec  # stage 2
    localization_noise: NoiseSpec  # stage 1
    radius: float
    projection_accuracy: float  # xi of the final projection onto W0 (Lemma C.6)
    extension_C: float
    detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))


def _localization(C, lam, n, d, diameter, epsilon, zeta, constants, accuracy):
    """Algorithm 2's public numbers at budget ``epsilon``: ``(alpha_1, Delta_1, noise, r)``.

    ``"paper"``: the printed ``alpha_1 = C^2/(2 lam n^2)``, noise density
    ``exp(-epsilon lam n ||b|| / (6 C))`` (a sensitivity ``6C/(lam n)``, above the true
    ``Delta_1``) and radius ``100 zeta C d/(lam n epsilon)``. ``"tight"``: dpcvx's default
    accuracy, noise calibrated to ``Delta_1 = 2C/(lam n) + 2 sqrt(2 alpha_1/lam)`` exactly and the
    radius ``sqrt(2 alpha_1/lam) + s_1 Q_{Gamma(d,1)}(1 - e^-zeta)``. Both floor the accuracy at
    ``EXTENSION_ACCURACY_FLOOR (1 + C D)``; ``accuracy`` overrides it.
    """
    floor = EXTENSION_ACCURACY_FLOOR * (1.0 + C * diameter)
    if accuracy is not None:
        alpha = accuracy
    elif constants == "paper":
        alpha = max(C**2 / (2 * lam * n**2), floor)
    else:
        alpha = max(default_accuracy(C, lam, n, 1.0 + C * diameter), floor)
    sens = math.nextafter(2.0 * C / (lam * n) + 2.0 * math.sqrt(2.0 * alpha / lam), math.inf)
    if constants == "paper":
        noise = calibrate(max(6.0 * C / (lam * n), sens), epsilon, 0.0)
        radius = 100.0 * zeta * C * d / (lam * n * epsilon)
    else:
        noise = calibrate(sens, epsilon, 0.0)
        q = float(gamma.ppf(1.0 - math.exp(-zeta), d))
        radius = math.sqrt(2.0 * alpha / lam) + noise.scale * q
    return alpha, sens, noise, radius


def _check_common(mech, owner: str) -> None:
    if mech.accuracy is not None:
        object.__setattr__(mech, "accuracy", check_positive(mech.accuracy, "accuracy", owner))
    if mech.C is not None:
        object.__setattr__(mech, "C", check_positive(mech.C, "C", owner))
    elif mech.moment is None or mech.k is None:
        raise InvalidParameterError(
            f"`{owner}` needs the extension's constant `C`, or a moment bound `moment` = G_k "
            "with its order `k` (then C = G_k (n epsilon / d)^(1/k), paper 000, Section 3)."
        )
    if mech.moment is not None:
        object.__setattr__(mech, "moment", check_positive(mech.moment, "moment", owner))
    if mech.k is not None:
        object.__setattr__(mech, "k", check_moment_order(mech.k, owner))
    object.__setattr__(
        mech, "regularization", check_positive(mech.regularization, "regularization", owner)
    )
    object.__setattr__(mech, "zeta", check_positive(mech.zeta, "zeta", owner))
    if mech.constants not in ("tight", "paper"):
        raise InvalidParameterError(
            f"The `constants` parameter of `{owner}` must be 'tight' or 'paper'. "
            f"Got {mech.constants!r}."
        )
    object.__setattr__(mech, "center", check_center(mech.center, owner))


def _pure_center(mech, owner, d, center, epsilon, delta):
    epsilon = check_pure_budget(epsilon, delta, owner)
    w0 = center if mech.center is None else mech.center
    if w0.shape != (d,):
        raise InvalidParameterError(
            f"The `center` of `{owner}` must have shape ({d},). Got {w0.shape}."
        )
    return epsilon, np.asarray(w0, float)


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalizePlan(PerturbedSolvePlan):
    """Algorithm 2's public quantities."""

    guarantee: Guarantee
    regularization: float
    center: np.ndarray
    accuracy: float
    sensitivity: Sensitivity
    base_sensitivity: float
    noise: NoiseSpec
    radius: float
    extension_C: float
    detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True, kw_only=True)
class _OnExtension:
    """The public parameters shared by paper 000's mechanisms on ``f_C``."""

    C: float | None = None
    regularization: float
    center: Any = None
    zeta: float = 3.0
    constants: str = "tight"
    solver: str | None = None
    accuracy: float | None = None
    moment: float | None = None
    k: float | None = None

    requirements: ClassVar[tuple[str, ...]] = ("solver", "project")
    extension: ClassVar[ExtensionUse] = PLANNED
    enforces_lipschitz: ClassVar[bool] = False
    neighbors: ClassVar[NeighborRelation] = REPLACE_ONE

    def __post_init__(self) -> None:
        _check_common(self, type(self).__name__)

    def release(self, plan: Any, context: Any, rng: Any, *args: Any, **kwargs: Any) -> Any:
        """Run the release on the extension's certified solve and the public projection of
        ``context`` (the release's :class:`~dpcvx.mechanisms.base.DataAccess`); returns a
        :class:`~dpcvx.mechanisms.base.Release`. The earlier form ``release(plan, solve,
        project, rng, domain=...)`` still works, with a :class:`DeprecationWarning`."""
        return single_solve_release(self, plan, context, rng, args, kwargs, self._release)

    def _release(self, plan: Any, solve, project, rng, domain: str) -> Release:
        raise NotImplementedError  # pragma: no cover - each stage mechanism defines it

    def preflight(self, plan: Any, context: Any) -> None:
        """Refuse, before the budget is reserved, a release whose solve over W would be
        refused on every dataset (:func:`~dpcvx.mechanisms.base.refuse_unsolvable`)."""
        refuse_unsolvable(context, plan.regularization)

    @property
    def extension_C(self) -> float | None:
        """Tells :class:`dpcvx.Problem` to run this mechanism on the extension ``f_C`` (None:
        the plan computes ``C`` from the moment bound)."""
        return self.C

    def _constant(self, n: int, d: int, epsilon: float) -> float:
        """``C``, or paper 000's default ``G_k (n epsilon / d)^(1/k)`` (public)."""
        if self.C is not None:
            return self.C
        assert self.moment is not None and self.k is not None  # checked in __post_init__
        return float(self.moment * (n * epsilon / d) ** (1.0 / self.k))

    @property
    def lipschitz(self) -> float | None:
        """The extension's ``C`` (None: planned from the moment bound)."""
        return self.C


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputPertLocalize(_OnExtension):
    """Paper 000's OutputPert-Localize (Algorithm 2) on the Lipschitz extension ``f_C``.

    Releases ``w_loc = Pi_W(w~ + b)``, where ``w~`` is a certified minimizer of
    ``(1/n) sum_i f_C(w, z_i) + (lam/2)||w - w0||^2`` over W, together with the public radius
    ``r`` (``result.detail["localization_radius"]``): ``W0 = W intersect B(w_loc, r)`` contains
    the exact minimizer with probability at least ``1 - e^-zeta`` (utility only). This is the
    first stage of :class:`DoubleOutputPerturbation`; used alone it is epsilon-DP and its output
    is the localized set. Parameters as for :class:`DoubleOutputPerturbation`; the constants are
    those of :func:`_localization` (``"paper"``: the printed Algorithm 2, which spends only
    ``2 epsilon / 3``, digest erratum E1).
    """

    def plan(
        self,
        *,
        n: int,
        d: int,
        center: np.ndarray,
        diameter: float,
        epsilon: float,
        delta: float,
        domain: Any = None,
    ) -> LocalizePlan:
        """Accuracy, sensitivity, noise and radius from public quantities only."""
        epsilon, w0 = _pure_center(self, "OutputPertLocalize", d, center, epsilon, delta)
        C, lam = self._constant(n, d, epsilon), self.regularization
        alpha, sens, noise, radius = _localization(
            C, lam, n, d, diameter, epsilon, self.zeta, self.constants, self.accuracy
        )
        return LocalizePlan(
            guarantee=Guarantee(epsilon=epsilon, delta=0.0),
            regularization=lam,
            center=w0,
            accuracy=alpha,
            sensitivity=Sensitivity(value=sens),
            base_sensitivity=2.0 * C / (lam * n),
            noise=noise,
            radius=radius,
            extension_C=C,
            detail=MappingProxyType(
                {
                    "mechanism": "OutputPertLocalize",
                    "paper": "000 Alg 2 (Lemma C.2)",
                    "C": C,
                    "constants": self.constants,
                    "zeta": self.zeta,
                    "localization_radius": radius,
                }
            ),
        )

    def _release(self, plan: LocalizePlan, solve, project, rng, domain: str) -> Release:
        """``w_loc`` and the public certificate of the solve."""
        first = solve(plan.regularization, plan.center, plan.accuracy)
        w_loc = project(perturb(first.w, plan.noise, rng))
        return Release(np.asarray(w_loc, float), (_public(plan.accuracy, plan, domain),))


def _public(accuracy: float, plan, domain: str) -> ReleaseCertificate:
    lam = plan.regularization
    return ReleaseCertificate(
        accuracy=accuracy,
        distance_bound=math.sqrt(2.0 * accuracy / lam),
        regularization=lam,
        strong_convexity=0.0,
        center=np.asarray(plan.center, float).copy(),
        domain=domain,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class DoubleOutputPerturbation(_OnExtension):
    """Paper 000's Double-OutputPert (Algorithm 4) on the Lipschitz extension ``f_C``.

    Parameters
    ----------
    C : float, optional
        The extension's Lipschitz constant (public). Default: paper 000's
        ``C = G_k (n epsilon / d)^(1/k)`` from ``moment`` (= ``G_k``) and ``k``, a k-th moment
        bound of the per-example gradient norm (then both are required).
    regularization : float
        ``lam > 0``.
    center : array-like, optional
        ``w0`` (public; default the center of the domain's bounding ball).
    zeta : float
        Localization tail parameter (``W0`` contains the stage-2 target with probability at
        least ``1 - e^-zeta``); paper: 3.
    constants : {"tight", "paper"}
        See the module docstring.
    solver : str, optional
        First solver of the refinement ladder.
    moment, k : float, optional
        ``G_k > 0`` and ``k >= 2`` for the default ``C``. They shape utility only: ``f_C`` is
        C-Lipschitz for every example whatever the data.
    accuracy : float, optional
        Override both stages' certified accuracy target (public; it inflates each stage's
        sensitivity by ``2 sqrt(2 accuracy / lam)`` and the noise is calibrated to it). Useful
        with :class:`dpcvx.OracleProblem`, whose first-order solvers cannot reach the default
        targets; never choose it by looking at the data.

    Notes
    -----
    Guarantee: pure epsilon-DP, replace-one neighbors, public n, on every dataset (paper 000,
    Prop D.1 / Lemma C.2 with the digest's corrections). ``delta`` must be 0.
    """

    def plan(
        self,
        *,
        n: int,
        d: int,
        center: np.ndarray,
        diameter: float,
        epsilon: float,
        delta: float,
        domain: Any = None,
    ) -> DoublePlan:
        """Public planning: both accuracies, sensitivities, noises and the radius."""
        epsilon, w0 = _pure_center(self, "DoubleOutputPerturbation", d, center, epsilon, delta)
        C, lam, half = self._constant(n, d, epsilon), self.regularization, epsilon / 2.0
        base = 2.0 * C / (lam * n)
        alpha1, delta1, noise1, radius = _localization(
            C, lam, n, d, diameter, half, self.zeta, self.constants, self.accuracy
        )
        floor = EXTENSION_ACCURACY_FLOOR * (1.0 + C * diameter)
        if self.constants == "paper":
            alpha2 = max(C**2 / (72 * lam * n**2), floor)
        else:
            alpha2 = max(default_accuracy(C, lam, n, 1.0 + C * diameter), floor)
        if self.accuracy is not None:  # a public override (e.g. for first-order solvers)
            alpha2 = self.accuracy
        delta2 = math.nextafter(base + 2.0 * math.sqrt(2.0 * alpha2 / lam), math.inf)
        if self.constants == "paper":
            # the printed scale 12 C/(epsilon lam n) at epsilon/2 is a sensitivity 6C/(lam n)
            noise2 = calibrate(max(6.0 * C / (lam * n), delta2), half, 0.0)
        else:
            noise2 = calibrate(delta2, half, 0.0)
        return DoublePlan(
            guarantee=Guarantee(epsilon=epsilon, delta=0.0),
            regularization=lam,
            center=np.asarray(w0, float),
            accuracy=alpha2,
            localization_accuracy=alpha1,
            sensitivity=Sensitivity(value=delta2),
            base_sensitivity=base,
            localization_sensitivity=delta1,
            noise=noise2,
            localization_noise=noise1,
            radius=radius,
            projection_accuracy=C / (6.0 * lam * n),
            extension_C=C,
            detail=MappingProxyType(
                {
                    "mechanism": "DoubleOutputPerturbation",
                    "paper": "000 Alg 4 (stage 1 = Alg 2; Prop D.1, Lemma C.2)",
                    "C": C,
                    "constants": self.constants,
                    "zeta": self.zeta,
                    "localization_radius": radius,
                    "localization_sensitivity": delta1,
                    "localization_noise_scale": noise1.scale,
                    "localization_accuracy": alpha1,
                }
            ),
        )

    def preflight(self, plan: DoublePlan, context: Any) -> None:
        """Stage 1's question (:meth:`_OnExtension.preflight`) and stage 2's, over W
        intersected with the public ball: a stage that is reached or not by the first
        stage's point and noise must not be the one that refuses."""
        _OnExtension.preflight(self, plan, context)  # (slots: no zero-argument super)
        refuse_unsolvable(context, plan.regularization, radius=float(plan.radius))

    def _release(
        self,
        plan: DoublePlan,
        solve: Callable[..., CertifiedSolution],
        project: Callable[..., np.ndarray],
        rng: np.random.Generator,
        domain: str = "declared",
    ) -> Release:
        """Run both stages; ``solve(lam, w0, alpha, localize=None, candidate=None)`` and
        ``project(point, localize=None, xi=None)`` are the extension's certified solve and the
        public projection supplied by :class:`dpcvx.Problem` (the last one is paper 000's
        ``xi``-inexact projection onto W0, Lemma C.6, with ``xi = C/(6 lam n)``)."""
        lam = plan.regularization
        first = solve(lam, plan.center, plan.localization_accuracy)
        w_loc = project(perturb(first.w, plan.localization_noise, rng))
        localize = (w_loc, plan.radius)
        # stage 1's certificate over W also certifies stage 2 when its point lies in W0 and its
        # gap meets alpha_2 (a point of W0 within alpha_2 of min over W is within alpha_2 of
        # min over W0): the solve is then skipped, with the same guarantee
        second = solve(lam, plan.center, plan.accuracy, localize=localize, candidate=first)
        out = project(
            perturb(second.w, plan.noise, rng),
            localize=localize,
            xi=plan.projection_accuracy,
        )
        certs = (
            _public(plan.localization_accuracy, plan, domain),
            _public(plan.accuracy, plan, f"{domain} ∩ ball"),
        )
        return Release(np.asarray(out, float), certs)
