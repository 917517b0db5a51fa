"""Paper 002's localization ``A_loc`` (Appendix G, Algorithm 10) as a mechanism of its own:
certified output perturbation that releases a *set*, the ball ``W0 = W cap B(w_loc, R0)``.

With ``F(w) = (1/n) sum_i f(w, z_i) + (lam/2) ||w - w0||^2`` over the public domain ``W``:

1. certified solve of ``min_W F`` to a public accuracy ``alpha`` (the point ``w~``);
2. ``w_loc = Pi_W(w~ + z)`` with ``z`` of density ``exp(-epsilon ||z|| / Delta_F)``,
   ``Delta_F = 2L/(lam n) + 2 sqrt(2 alpha/lam)``;
3. release ``W0 = {w in W : ||w - w_loc|| <= R0}``, ``R0 = xi Delta_F d / epsilon``: the centre
   ``w_loc`` is the released point, the radius ``R0`` is public (a function of public numbers
   only) and is reported in the result's detail.

**Privacy (pure epsilon-DP, replace-one neighbors, public n).** The paper: "this algorithm is
simply doing output perturbation but outputting a set ... Hence, it is epsilon-differentially
private by the same arguments used to establish the privacy of output perturbation". Here: the
exact minimizers on neighbors differ by at most ``2L/(lam n)`` (paper 002, Prop 2.2; the
regularizer cancels), the certified point is within ``sqrt(2 alpha/lam)`` of the minimizer on
each dataset (Prop 3.1), so ``w~`` moves by at most ``Delta_F`` and the l2-Laplace noise makes
``w~ + z`` epsilon-DP. The projection and the ball (a function of ``w_loc`` and public numbers)
are post-processing. The paper writes ``Delta_F`` for the exact minimizer's sensitivity; the
``2 sqrt(2 alpha/lam)`` term is dpcvx's, because the solve is certified, not exact (as in
:class:`~dpcvx.OutputPerturbation`). The ``lipschitz`` claim is enforced by the pipeline as for
:class:`~dpcvx.OutputPerturbation` (examples dpcvx cannot certify L-Lipschitz on W are solved
on their L-Lipschitz extension), so the release is private whatever the data.

**The radius (utility only).** ``||z|| ~ Gamma(d, theta)``, ``theta = Delta_F/epsilon``, and
``P(||z|| <= xi d theta) >= 1 - d e^-xi`` ([CMS11, Lemma 17]; a Gamma(d) variable is a sum of
``d`` unit exponentials, so the union bound gives it). So ``W0`` contains the certified point
``w~`` with probability at least ``1 - d e^-xi`` (projection onto the convex ``W`` is
non-expansive), and the exact minimizer is within ``sqrt(2 alpha/lam)`` of ``w~``. The plan
also reports the exact Gamma tail ``P(||z|| > R0)``. Proposition G.2's proof drops the factor
``d`` of the tail radius (it writes ``P(||z|| <= xi theta) >= 1 - d e^-xi``); Algorithm 10 keeps
it, and so does dpcvx (digest section 2.12, erratum 16).

**xi.** Default: Algorithm 11's ``xi = log(epsilon'^2 lam R / (d L))`` with ``R = D/2`` (the
OCR prints ``p`` for ``d``), where ``epsilon'`` is the whole release's budget (the localization
alone here; Algorithm 11's total epsilon there). Or a public ``xi``, or a public failure
probability ``beta`` (then ``xi = log(d/beta)``, from ``d e^-xi = beta``).

This module also holds the pieces Algorithm 11
(:class:`~dpcvx.mechanisms.exponential.LocalizedExponentialMechanism`) uses for its stage 1
(:func:`plan_localization`, :func:`localize`), so it runs exactly this code at ``epsilon/2``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from scipy.stats import gamma

from dpcvx._validation import check_center, check_positive, check_pure_budget
from dpcvx.certification.certificate import ReleaseCertificate
from dpcvx.errors import CertificationError, InvalidParameterError
from dpcvx.mechanisms.base import (
    PLAIN,
    ExtensionUse,
    PerturbedSolvePlan,
    Release,
    perturb,
    refuse_unsolvable,
)
from dpcvx.mechanisms.noise import NoiseSpec, calibrate
from dpcvx.neighbors import REPLACE_ONE, NeighborRelation
from dpcvx.types import Guarantee, Sensitivity

__all__ = [
    "LocalizationPlan",
    "OutputPerturbationLocalize",
    "localization_accuracy",
    "localize",
    "plan_localization",
    "tail_failure_probability",
]

#: the relative inflation of the base sensitivity the default accuracy allows
_DEFAULT_INFLATION = 0.05
#: the default accuracy's floor, times ``1 + L D`` (public)
_ACCURACY_FLOOR = 1e-9


def localization_accuracy(lipschitz: float, regularization: float, n: int, diameter: float):
    """The default ``alpha``: ``2 sqrt(2 alpha/lam)`` is 5% of ``2L/(lam n)``, floored at
    ``1e-9 (1 + L D)`` (public; the same default as :class:`~dpcvx.TiltedOutputPerturbation`)."""
    base = 2.0 * lipschitz / (regularization * n)
    alpha = (_DEFAULT_INFLATION / 2.0 * base) ** 2 * regularization / 2.0
    return max(alpha, _ACCURACY_FLOOR * (1.0 + lipschitz * diameter))


def tail_failure_probability(xi: float, d: int) -> tuple[float, float]:
    """``(bound, exact)``: the paper's ``min(1, d e^-xi)`` and the exact
    ``P(Gamma(d, 1) > xi d)``, both the probability that ``||z|| > xi d theta`` for ``z`` of
    density ``exp(-||z||/theta)`` on ``R^d`` ([CMS11, Lemma 17]; utility only)."""
    return min(1.0, d * math.exp(-xi)), float(gamma.sf(xi * d, d))


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalizationPlan(PerturbedSolvePlan):
    """Algorithm 10's public numbers, fixed before any data is touched."""

    guarantee: Guarantee  # of this localization alone
    regularization: float  # lam
    center: np.ndarray  # w0
    accuracy: float  # alpha
    sensitivity: Sensitivity  # Delta_F = 2L/(lam n) + 2 sqrt(2 alpha/lam), rounded up
    base_sensitivity: float  # 2L/(lam n)
    noise: NoiseSpec  # l2-Laplace, scale Delta_F/epsilon
    xi: float
    radius: float  # R0 = xi Delta_F d/epsilon, rounded up
    domain_radius: float  # R = D/2
    detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    @property
    def extension_C(self) -> None:
        """The declared loss (the pipeline may enforce the Lipschitz claim)."""
        return None


def plan_localization(
    owner: str,
    *,
    lipschitz: float,
    regularization: float,
    center: np.ndarray,
    n: int,
    d: int,
    diameter: float,
    epsilon: float,
    xi_epsilon: float,
    accuracy: float | None = None,
    xi: float | None = None,
    failure_probability: float | None = None,
    fallback: str = "",
) -> LocalizationPlan:
    """Algorithm 10's plan at budget ``epsilon`` (public quantities only).

    ``xi``: the public value; else ``log(d / failure_probability)``; else Algorithm 11's
    ``log(xi_epsilon^2 lam R/(d L))``, refused with :class:`~dpcvx.InvalidParameterError`
    (before anything is spent) when it is not positive (``fallback`` adds the caller's advice).
    """
    L, lam = lipschitz, regularization
    D = check_positive(diameter, "diameter", owner)
    n, d = int(n), int(d)
    base = 2.0 * L / (lam * n)
    alpha = localization_accuracy(L, lam, n, D) if accuracy is None else accuracy
    delta_F = math.nextafter(base + 2.0 * math.sqrt(2.0 * alpha / lam), math.inf)
    noise = calibrate(delta_F, epsilon, 0.0)
    R = D / 2.0
    if xi is not None:
        xi_value, xi_source = float(xi), "public xi"
    elif failure_probability is not None:
        xi_value = math.log(d / failure_probability)
        xi_source = f"log(d / beta), beta = {failure_probability:g} (d e^-xi = beta)"
    else:
        ratio = xi_epsilon**2 * lam * R / (d * L)
        xi_value, xi_source = math.log(ratio), "log(epsilon^2 lam R / (d L)) (Algorithm 11)"
        if not xi_value > 0.0:
            raise InvalidParameterError(
                f"`{owner}`'s default radius shrinkage xi = log(epsilon^2 lam R / (d L)) "
                f"= log({ratio:.4g}) = {xi_value:.4g} is not positive (epsilon = "
                f"{xi_epsilon:g}, lam = {lam:g}, R = D/2 = {R:g}, d = {d}, L = {L:g}), so the "
                "localized set would have a non-positive radius. Proposition G.2 assumes "
                "d lam R >= 2L and epsilon > d, which fail badly here. Nothing was spent. "
                f"{fallback}Pass a public `xi` > 0 or a `failure_probability` (they shape "
                "utility only), or a larger epsilon or regularization."
            )
    R0 = math.nextafter(xi_value * delta_F * d / epsilon, math.inf)
    if not (math.isfinite(R0) and R0 > 0.0):
        raise InvalidParameterError(
            f"`{owner}` computed the localization radius R0 = xi Delta_F d/epsilon = {R0!r}, "
            "which is not a positive finite float. Nothing was spent. Rescale the problem or "
            "pass a moderate public `xi`."
        )
    bound, exact = tail_failure_probability(xi_value, d)
    detail = {
        "mechanism": owner,
        "paper": "002 App G, Alg 10 (A_loc; [CMS11, Lemma 17] tail; erratum 16: factor d kept)",
        "lipschitz": L,
        "xi": xi_value,
        "xi_source": xi_source,
        "localization_radius": R0,
        "localization_sensitivity": delta_F,
        "domain_radius": R,
        "stage_epsilon": epsilon,
        "solve_distance": math.sqrt(2.0 * alpha / lam),
        "failure_probability_bound": bound,
        "failure_probability_exact": exact,
    }
    return LocalizationPlan(
        guarantee=Guarantee(epsilon=epsilon, delta=0.0),
        regularization=lam,
        center=np.asarray(center, float).copy(),
        accuracy=alpha,
        sensitivity=Sensitivity(value=delta_F, norm="l2"),
        base_sensitivity=base,
        noise=noise,
        xi=xi_value,
        radius=R0,
        domain_radius=R,
        detail=MappingProxyType(detail),
    )


def localize(
    plan: LocalizationPlan, solve: Any, project: Any, rng: np.random.Generator, domain: str
) -> tuple[np.ndarray, ReleaseCertificate]:
    """Run Algorithm 10: the certified solve ``solve(lam, w0, alpha)`` (a failure raises
    dpcvx's fixed-text :class:`~dpcvx.CertificationError`), the noise, the public projection.
    Returns ``w_loc`` (the released centre) and the solve's public certificate."""
    cert = solve(plan.regularization, plan.center, plan.accuracy)
    if not cert.gap <= plan.accuracy:  # defensive: the solve contract guarantees this
        raise CertificationError(
            "Internal: a certificate above the accuracy target reached the release step; "
            "nothing was released."
        )
    w_loc = np.asarray(project(perturb(cert.w, plan.noise, rng)), float).reshape(-1)
    public = ReleaseCertificate(
        accuracy=plan.accuracy,
        distance_bound=math.sqrt(2.0 * plan.accuracy / plan.regularization),
        regularization=plan.regularization,
        strong_convexity=0.0,
        center=np.asarray(plan.center, float).copy(),
        domain=domain,
    )
    return w_loc, public


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputPerturbationLocalize:
    """Paper 002's localization ``A_loc`` (Appendix G, Algorithm 10): releases the ball
    ``W0 = W cap B(w_loc, R0)`` as its centre ``w_loc`` (``result.w``) and its public radius
    ``R0`` (``result.detail["localization_radius"]``).

    Parameters
    ----------
    lipschitz : float
        ``L > 0``: a bound on every possible example's Lipschitz constant on the domain;
        **enforced** on a :class:`~dpcvx.Problem` as for :class:`~dpcvx.OutputPerturbation`.
    regularization : float
        ``lam > 0``: ``F(w) = (1/n) sum_i f(w, z_i) + (lam/2) ||w - w0||^2``.
    center : array-like, optional
        ``w0``; default the center of the domain's bounding ball.
    accuracy : float, optional
        ``alpha``, the certified accuracy (public); default such that ``2 sqrt(2 alpha/lam)``
        is 5% of ``2L/(lam n)``, floored at ``1e-9 (1 + L D)``.
    xi : float, optional
        The radius shrinkage ``xi > 0`` (public).
    failure_probability : float, optional
        ``beta`` in ``(0, 1)``: then ``xi = log(d / beta)``, so that ``W0`` misses the
        certified point with probability at most ``d e^-xi = beta``. At most one of ``xi``
        and ``failure_probability``; with neither, Algorithm 11's
        ``xi = log(epsilon^2 lam R/(d L))``, ``R = D/2`` (refused, before anything is spent,
        when it is not positive).

    Notes
    -----
    Guarantee: pure epsilon-DP, replace-one neighbors, public n (``delta`` must be 0); one
    ledger event ``epsilon``. Sensitivity ``Delta_F = 2L/(lam n) + 2 sqrt(2 alpha/lam)`` (paper
    002, Prop 2.2 with the certified solve's inflation, Prop 3.1); noise density
    ``exp(-epsilon ||z|| / Delta_F)``; ``R0 = xi Delta_F d / epsilon`` (Algorithm 10, which
    keeps the factor ``d`` that Proposition G.2's proof drops: digest erratum 16). Unlike
    :class:`~dpcvx.OutputPertLocalize` (paper 000's Algorithm 2 on the Lipschitz extension
    ``f_C``, radius ``sqrt(2 alpha/lam) + theta Q_Gamma(d)(1 - e^-zeta)``), this is paper 002's
    algorithm on the declared loss with the paper's radius. The detail reports ``xi``, its
    source, the paper's failure bound ``min(1, d e^-xi)`` and the exact Gamma tail
    ``P(||z|| > R0)``; the tail covers the certified point, and the exact minimizer is within
    ``detail["solve_distance"] = sqrt(2 alpha/lam)`` of it. Composed with
    :class:`~dpcvx.mechanisms.exponential.ExponentialMechanism` on ``W0`` it is Algorithm 11
    (:class:`~dpcvx.mechanisms.exponential.LocalizedExponentialMechanism`).

    Examples
    --------
    >>> import cvxpy as cp, numpy as np, dpcvx
    >>> from dpcvx.mechanisms.output_perturbation_localize import OutputPerturbationLocalize
    >>> w = cp.Variable(1); z = cp.Parameter()
    >>> problem = dpcvx.Problem(cp.abs(w[0] - z), w, data={z: np.linspace(-.5, .5, 41)},
    ...                         domain=dpcvx.domains.box(w, -1.0, 1.0))
    >>> mech = OutputPerturbationLocalize(lipschitz=1.0, regularization=1.0, xi=3.0)
    >>> res = problem.solve_private(mech, epsilon=1.0, rng=0)
    >>> R0 = res.detail["localization_radius"]
    >>> bool(abs(res.w[0]) <= 1), round(R0, 4)
    (True, 0.1537)
    """

    lipschitz: float
    regularization: float
    center: Any = None
    accuracy: float | None = None
    xi: float | None = None
    failure_probability: float | None = None

    requirements: ClassVar[tuple[str, ...]] = ("solver", "project")
    extension: ClassVar[ExtensionUse] = PLAIN
    enforces_lipschitz: ClassVar[bool] = True
    neighbors: ClassVar[NeighborRelation] = REPLACE_ONE

    def __post_init__(self) -> None:
        owner = "OutputPerturbationLocalize"
        for name in ("lipschitz", "regularization"):
            object.__setattr__(self, name, check_positive(getattr(self, name), name, owner))
        for name in ("accuracy", "xi", "failure_probability"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, check_positive(value, name, owner))
        beta = self.failure_probability
        if beta is not None and not beta < 1.0:
            raise InvalidParameterError(
                f"The `failure_probability` parameter of `{owner}` must lie in (0, 1). "
                f"Got {beta!r}."
            )
        if self.xi is not None and beta is not None:
            raise InvalidParameterError(
                f"`{owner}` takes at most one of `xi` and `failure_probability` (then "
                f"xi = log(d / failure_probability)). Got xi = {self.xi!r} and "
                f"failure_probability = {beta!r}: drop one."
            )
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
    ) -> LocalizationPlan:
        """Accuracy, sensitivity, noise, ``xi`` and ``R0`` from public quantities only."""
        owner = "OutputPerturbationLocalize"
        epsilon = check_pure_budget(epsilon, delta, owner)
        if center is None and self.center is None:
            raise InvalidParameterError(
                f"`{owner}` needs a data source with a domain (or a public `center`)."
            )
        w0 = np.asarray(center if self.center is None else self.center, float).reshape(-1)
        if w0.shape != (d,):
            raise InvalidParameterError(
                f"The `center` of `{owner}` must have shape ({d},). Got {w0.shape}."
            )
        return plan_localization(
            owner,
            lipschitz=self.lipschitz,
            regularization=self.regularization,
            center=w0,
            n=n,
            d=d,
            diameter=diameter,
            epsilon=epsilon,
            xi_epsilon=epsilon,
            accuracy=self.accuracy,
            xi=self.xi,
            failure_probability=self.failure_probability,
        )

    def preflight(self, plan: LocalizationPlan, context: Any) -> None:
        """Refuse, before the budget is reserved, a solve over W that would be refused on
        every dataset (:func:`~dpcvx.mechanisms.base.refuse_unsolvable`)."""
        refuse_unsolvable(context, plan.regularization)

    def release(self, plan: LocalizationPlan, context: Any, rng: np.random.Generator) -> Release:
        """Localize; returns the centre ``w_loc``, the solve's public certificate and the
        public radius."""
        w_loc, public = localize(
            plan, context.solver(), context.project, rng, f"{context.domain.kind} (localization)"
        )
        facts = {
            "localization_center": tuple(float(v) for v in w_loc),
            "localization_radius": plan.radius,
        }
        return Release(w_loc, (public,), MappingProxyType(facts))
