"""Output perturbation for tilted ERM (paper 002, Section 5.1, Theorem 5.1).

``F_tau(w) = (1/tau) log((1/n) sum_i exp(tau f(w, z_i))) + (lam/2)||w - w0||^2`` couples the
examples, so it is not an ERM: the sensitivity of its minimizer is the non-ERM ``2L/lam``
(Lemma 5.1 with the regularizer's strong convexity; the data-dependent part ``F_tau`` is
L-Lipschitz whenever every example's loss is), improved to ``(2L/lam) min{1, C_tau/n}`` with
``C_tau = exp(tau (A - a))`` when every loss value on the domain lies in ``[a, A]`` (Lemma 5.2,
with the digest's corrected proof: each tilted weight is at most ``C_tau/n``). dpcvx certifies
the solve (:mod:`dpcvx.certification.tilted`) to a public ``alpha`` and calibrates the noise to
``Delta + 2 sqrt(2 alpha/lam)``.

**The max-loss** (``tilt=math.inf``; paper 002, Section 5.1: "tau -> inf gives the max-loss",
and ``Delta_{F_tau} <= 2L/mu`` for every tau, including tau -> inf): ``F_inf(w) = max_i
f(w, z_i) + (lam/2)||w - w0||^2`` is L-Lipschitz in its data-dependent part and
lam-strongly convex, so its minimizer moves by at most ``2L/lam`` between replace-one
neighbors (the non-ERM Prop 2.2; no ``1/n``, and ``loss_bounds`` give no improvement since
``C_inf = inf``). dpcvx certifies the solve with the simplex dual (``max_i f_i >= sum_i p_i f_i``
for every ``p`` in the simplex, :mod:`dpcvx.certification.tilted`) and calibrates the noise to
``2L/lam + 2 sqrt(2 alpha/lam)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from dpcvx._validation import check_center, check_delta, check_positive, check_real
from dpcvx.certification.certificate import ReleaseCertificate
from dpcvx.errors import InvalidParameterError
from dpcvx.mechanisms.base import (
    PLAIN,
    ExtensionUse,
    OneEventPlan,
    Release,
    perturb,
    raise_refusal,
)
from dpcvx.mechanisms.noise import NoiseSpec, calibrate
from dpcvx.neighbors import REPLACE_ONE, NeighborRelation
from dpcvx.types import Guarantee, Sensitivity

__all__ = ["TiltedOutputPerturbation", "tilted_sensitivity"]


def tilted_sensitivity(
    lipschitz: float,
    regularization: float,
    n: int,
    tilt: float,
    loss_bounds: tuple[float, float] | None = None,
) -> float:
    """``(2L/lam) min{1, C_tau/n}`` (Lemmas 5.1-5.2 of paper 002), ``C_tau = e^{tau(A-a)}``;
    ``2L/lam`` for the max-loss (``tilt = inf``)."""
    base = 2.0 * lipschitz / regularization
    if loss_bounds is None or math.isinf(tilt):
        return base
    a, A = loss_bounds
    exponent = tilt * (A - a)
    if exponent >= math.log(n):  # C_tau >= n: no improvement (and no overflow)
        return base
    return base * math.exp(exponent) / n


@dataclass(frozen=True, slots=True, kw_only=True)
class TiltedPlan(OneEventPlan):
    """Everything a release uses, fixed from public quantities before any data is read."""

    guarantee: Guarantee
    regularization: float
    center: np.ndarray
    accuracy: float
    sensitivity: Sensitivity
    noise: NoiseSpec
    tilt: float
    detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    ledger_detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    @property
    def event_noise(self) -> NoiseSpec:
        """Gaussian noise (``delta > 0``) composes exactly through its multiplier."""
        return self.noise


@dataclass(frozen=True, slots=True, kw_only=True)
class TiltedOutputPerturbation:
    """Private tilted ERM by certified output perturbation (paper 002, Theorem 5.1).

    Parameters
    ----------
    lipschitz : float
        ``L``, a bound on every possible example's Lipschitz constant over the domain.
    regularization : float
        ``lam > 0``.
    tilt : float
        ``tau > 0`` (small: close to ERM; large: close to the max loss), or ``math.inf``: the
        max-loss ``max_i f(w, z_i)`` itself (sensitivity ``2L/lam``; ``loss_bounds`` are
        then refused, since ``C_inf`` is infinite).
    loss_bounds : (float, float), optional
        Public ``a <= f(w, z) <= A`` for every ``w`` in the domain and every possible example;
        gives the ``min{1, C_tau/n}`` improvement. They must hold for the data universe, not
        only the data at hand.
    center, accuracy
        As for :class:`~dpcvx.OutputPerturbation` (``accuracy`` defaults to a 5% inflation of
        the sensitivity, floored at ``1e-9 (1 + L D)``).

    Notes
    -----
    On a :class:`~dpcvx.Problem` the ``lipschitz`` claim is **enforced** as for
    :class:`~dpcvx.OutputPerturbation`: examples dpcvx cannot certify ``L``-Lipschitz on ``W``
    are solved on the ``L``-Lipschitz extension of their loss (Gibbs' bound with the
    extension's per-example minorants certifies the tilted objective of the ``f_L``), so the
    ``2L/lam`` part of the sensitivity holds whatever the data. ``loss_bounds`` (the
    ``C_tau/n`` improvement) stay a trusted claim, and losses with generic terms keep the
    plain program with a trusted claim. An example outside the extension's public universe
    (not ``K L``-Lipschitz by dpcvx's structural bound) enters with the zero loss, an
    ``exp(0)`` term of the tilted sum, so steep outliers release at any scale. The tilted
    certificate also has a stable form (:mod:`dpcvx.certification.tilted_gap`), and smooth
    losses run Newton's method on the tilted objective, so a huge label on a flat or linear
    side (1e12) releases too, and so does a huge loss *value* elsewhere on the smooth paths (a
    squared loss with a label of 1e6; see ``docs/output_perturbation.md``). A solve that no
    rung recovers from remains possible (none is known). Such a failure raises one fixed
    :class:`~dpcvx.CertificationError` text with the budget spent; whether it happens depends
    on the data, so it is an event outside the guarantee.
    """

    lipschitz: float
    regularization: float
    tilt: float
    loss_bounds: Any = None
    center: Any = None
    accuracy: float | None = None
    solver: str | None = None
    requirements: ClassVar[tuple[str, ...]] = ("tilted_solver", "project")
    extension: ClassVar[ExtensionUse] = PLAIN
    enforces_lipschitz: ClassVar[bool] = False
    neighbors: ClassVar[NeighborRelation] = REPLACE_ONE

    def __post_init__(self) -> None:
        owner = "TiltedOutputPerturbation"
        for name in ("lipschitz", "regularization"):
            object.__setattr__(self, name, check_positive(getattr(self, name), name, owner))
        tilt = self.tilt
        if isinstance(tilt, (int, float)) and not isinstance(tilt, bool) and tilt == math.inf:
            object.__setattr__(self, "tilt", math.inf)  # the max-loss
            if self.loss_bounds is not None:
                raise InvalidParameterError(
                    f"`{owner}` with tilt = inf (the max-loss) has sensitivity 2L/lam whatever "
                    "the loss range (C_tau = e^{tau (A - a)} is infinite), so `loss_bounds` "
                    f"would be ignored. Got loss_bounds = {self.loss_bounds!r}: drop them, or "
                    "use a finite tilt."
                )
        else:
            object.__setattr__(self, "tilt", check_positive(tilt, "tilt", owner))
        if self.loss_bounds is not None:
            try:
                a, A = (check_real(v, "loss_bounds", owner) for v in self.loss_bounds)
            except (TypeError, ValueError) as exc:
                raise InvalidParameterError(
                    f"`loss_bounds` of `{owner}` must be a pair (a, A). Got {self.loss_bounds!r}."
                ) from exc
            if not (math.isfinite(a) and math.isfinite(A) and a <= A):
                raise InvalidParameterError(
                    f"`loss_bounds` of `{owner}` must be finite with a <= A. Got ({a}, {A})."
                )
            object.__setattr__(self, "loss_bounds", (a, A))
        if self.accuracy is not None:
            object.__setattr__(self, "accuracy", check_positive(self.accuracy, "accuracy", owner))
        object.__setattr__(self, "center", check_center(self.center, owner))

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
    ) -> TiltedPlan:
        """The accuracy, the sensitivity and the noise from public quantities only
        (``domain`` is not needed)."""
        owner = "TiltedOutputPerturbation"
        epsilon = check_positive(epsilon, "epsilon", owner)
        delta = check_delta(delta, owner)
        w0 = np.asarray(center if self.center is None else self.center, float)
        if w0.shape != (d,):
            raise InvalidParameterError(f"The `center` of `{owner}` must have shape ({d},).")
        lam = self.regularization
        base = tilted_sensitivity(self.lipschitz, lam, n, self.tilt, self.loss_bounds)
        alpha = self.accuracy
        if alpha is None:  # 2 sqrt(2 alpha / lam) = 5% of the base sensitivity
            alpha = max((0.025 * base) ** 2 * lam / 2.0, 1e-9 * (1.0 + self.lipschitz * diameter))
        total = math.nextafter(base + 2.0 * math.sqrt(2.0 * alpha / lam), math.inf)
        noise = calibrate(total, epsilon, delta)
        max_loss = math.isinf(self.tilt)
        detail = {
            "mechanism": owner,
            "paper": (
                "002 Sec 5.1 (tau -> inf: max-loss; Delta <= 2L/mu, Lemma 5.1 / Prop 2.2)"
                if max_loss
                else "002 Sec 5.1, Thm 5.1 (Lemmas 5.1-5.2)"
            ),
            "objective": "max-loss" if max_loss else "tilted ERM",
            "tilt": self.tilt,
            "base_sensitivity": base,
            "sensitivity": total,
            "accuracy": alpha,
            "noise": noise.kind,
            "noise_scale": noise.scale,
            "loss_bounds": self.loss_bounds,
        }
        return TiltedPlan(
            guarantee=Guarantee(epsilon=epsilon, delta=delta),
            regularization=lam,
            center=w0,
            accuracy=alpha,
            sensitivity=Sensitivity(value=total),
            noise=noise,
            tilt=self.tilt,
            detail=MappingProxyType(detail),
            ledger_detail=MappingProxyType(
                {"sensitivity": total, "noise": noise.kind, "scale": noise.scale}
            ),
        )

    def preflight(self, plan: TiltedPlan, context: Any) -> None:
        """Refuse, before the budget is reserved, a solve that would be refused on every
        dataset (the Lipschitz extension of a loss the smooth path does not write, at a size
        whose conic program is too large to stamp: ``ReleaseContext.tilted_refusal``)."""
        ask = getattr(context, "tilted_refusal", None)
        if ask is not None:
            raise_refusal(ask(plan.tilt, plan.regularization, plan.accuracy, self.lipschitz))

    def release(self, plan: TiltedPlan, context: Any, rng: np.random.Generator) -> Release:
        # the data source enforces the Lipschitz claim (a declared problem: the L-extension)
        solve = context.tilted_solver(plan.tilt, self.solver, lipschitz=self.lipschitz)
        cert = solve(plan.regularization, plan.center, plan.accuracy)
        out = context.project(perturb(cert.w, plan.noise, rng))
        objective = "max-loss" if math.isinf(plan.tilt) else "tilted ERM"
        public = ReleaseCertificate(
            accuracy=plan.accuracy,
            distance_bound=math.sqrt(2 * plan.accuracy / plan.regularization),
            regularization=plan.regularization,
            strong_convexity=0.0,
            center=plan.center.copy(),
            domain=f"{context.domain.kind} ({objective})",
        )
        return Release(np.asarray(out, float), (public,))
