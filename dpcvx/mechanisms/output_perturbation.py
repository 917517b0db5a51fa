"""Certified output perturbation (paper 002, Algorithms 1 and 6).

The mechanism solves the regularized ERM

    F(w) = (1/n) sum_i f(w, z_i) + (lam/2) ||w - w0||^2   over the domain W,

to a certified accuracy ``alpha`` fixed beforehand from public quantities, and releases
``Pi_W(w_hat + b)`` with noise ``b`` calibrated to the sensitivity

    Delta' = 2 L / (m n) + 2 sqrt(2 alpha / m),    m = lam + mu,

where ``mu`` is a public lower bound on every example's own strong convexity (Algorithm 1; 0 for
Algorithm 6).

Why this is private (replace-one neighbors, every dataset): the exact minimizers of
lam-strongly convex objectives that differ in one example's loss differ by at most
``2 L / (lam n)`` (paper 002, Prop 2.2 via Lemma B.2; the regularizer is data-independent and
cancels, which is the digest's tighter bound and needs ``L`` to bound only the loss); dpcvx's
certificate gives ``F(w_hat) - F* <= alpha`` with ``w_hat in W``, so by strong convexity
``||w_hat - w*|| <= sqrt(2 alpha / lam)`` on both datasets (Prop 3.1 / 3.3). Projection onto the
public domain is post-processing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from dpcvx._validation import check_center, check_delta, check_nonnegative, check_positive
from dpcvx.certification.certificate import ReleaseCertificate
from dpcvx.errors import CertificationError, InvalidParameterError
from dpcvx.mechanisms.base import (
    PLAIN,
    ExtensionUse,
    PerturbedSolvePlan,
    Release,
    perturb,
    refuse_unsolvable,
    single_solve_release,
)
from dpcvx.mechanisms.noise import NoiseSpec, calibrate
from dpcvx.neighbors import REPLACE_ONE, NeighborRelation
from dpcvx.types import Guarantee, Sensitivity

__all__ = ["OutputPerturbation", "ReleasePlan", "choose_regularization", "default_accuracy"]

#: relative inflation of the sensitivity allowed by the default accuracy target
DEFAULT_INFLATION = 0.05
#: the smallest default accuracy target (certified gaps below this are not reliably reachable
#: in float64 for objectives of order one); a public constant, never data-dependent
ACCURACY_FLOOR = 1e-10


def default_accuracy(lipschitz: float, regularization: float, n: int, scale: float) -> float:
    """The default ``alpha``: inflate the sensitivity by at most 5%, but no lower than
    ``ACCURACY_FLOOR * scale`` (``scale = 1 + L * D`` bounds the objective's variation).

    ``2 sqrt(2 alpha / lam) = 0.05 * 2 L / (lam n)`` gives ``alpha = 0.05^2 L^2 / (2 lam n^2)``.
    Every input is public.
    """
    alpha = DEFAULT_INFLATION**2 * lipschitz**2 / (2 * regularization * n**2)
    return max(alpha, ACCURACY_FLOOR * scale)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleasePlan(PerturbedSolvePlan):
    """Everything a release will use, computed from public quantities before any solve."""

    guarantee: Guarantee
    regularization: float
    center: np.ndarray
    accuracy: float
    sensitivity: Sensitivity
    base_sensitivity: float
    noise: NoiseSpec
    detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    @property
    def extension_C(self) -> None:
        """Output perturbation solves the declared loss (the pipeline may enforce the claim)."""
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputPerturbation:
    """Pure epsilon-DP (or (epsilon, delta)-DP) output perturbation of a certified solve.

    Parameters
    ----------
    lipschitz : float
        ``L``: a bound on the Lipschitz constant in ``w`` of one example's loss, valid for every
        ``w`` in the domain and **every possible example** (the data universe, not just the data
        at hand), i.e. ``|f(u, z) - f(v, z)| <= L ||u - v||_2`` for all ``u, v in W`` and all
        ``z``. For ``hinge``/``logistic`` with ``||x|| <= B`` and ``|y| <= 1`` that is ``B``.
        A penalty written into the loss (terms that read no data: ``0.01 * cp.norm1(w)``) is
        the same for every example and is not counted: every solve keeps it exact, once
        (:func:`~dpcvx.certification.solve.folded_terms`), and the claim bounds the other
        terms. On a :class:`~dpcvx.Problem` the claim is **enforced**: examples dpcvx cannot certify
        ``L``-Lipschitz on ``W`` are solved on the ``L``-Lipschitz extension of their loss
        (paper 000, eq. (5)), the others keep their plain block, so the release is private
        whatever the data and a true claim costs nothing; a
        :class:`~dpcvx.LipschitzClaimWarning` tells the curator when the data contradict it.
        With ``strong_convexity = mu > 0`` the claim is enforced on ``f - (mu/2)||w - c||^2``
        (``c`` the domain's center; for ``0.5 ||w - x||^2`` that is ``||x - c|| <= L``), and
        ``(mu/2)||w - c||^2`` is kept as an exact regularizer, so the objective stays
        ``(lam + mu)``-strongly convex. The claim is trusted (not enforced) for losses with
        generic terms other than a quadratic form that reads no data
        (:func:`~dpcvx.certification.lipschitz.enforceable`); clip or normalize features with
        public bounds there.
    regularization : float
        ``lam >= 0``, the strong-convexity modulus added as ``(lam/2) ||w - center||^2``
        (Algorithm 6). May be 0 when ``strong_convexity > 0``.
    strong_convexity : float
        ``mu >= 0``: a public lower bound on the strong-convexity modulus in ``w`` of **every**
        example's loss (e.g. 1 for ``0.5 * cp.sum_squares(w - x)``), for Algorithm 1. The
        objective is then ``(lam + mu)``-strongly convex and every bound below uses
        ``lam + mu``. Default 0.
    center : array-like, optional
        ``w0`` (public); default: the center of the domain's bounding ball.
    accuracy : float, optional
        ``alpha``, the certified suboptimality target; default :func:`default_accuracy`.
        Must not be chosen by looking at the data.
    gaussian : {"analytic", "zwb"}
        Calibration of the Gaussian noise when ``delta > 0``: the exact analytic Gaussian
        (Balle-Wang, via dp_accounting) or the ZWB+19 closed form of paper 002, Eq. (5).
    solver : {"CLARABEL", "ECOS", "SCS"}, optional
        The first solver of the refinement ladder.
    project : bool
        Project the noisy point back onto the domain (post-processing; default True).

    Notes
    -----
    Guarantee: epsilon-DP (``delta == 0``) or (epsilon, delta)-DP under replace-one neighbors
    with public ``n``. Sensitivity ``2 L / (m n) + 2 sqrt(2 alpha / m)``, ``m = lam + mu``
    (paper 002,
    Prop 2.2 and Prop 3.1/3.3 for Algorithms 1 and 6, with the digest's errata applied: the
    inflation is ``2 sqrt(2 alpha / lam)``, never ``2 alpha / lam`` (Alg 8), and the Gaussian
    sigma is ``s_delta Delta' / (sqrt 2 epsilon)``, never the Alg 6 value smaller by sqrt 2).
    Pure-epsilon noise has density proportional to ``exp(-epsilon ||b|| / Delta')``.
    """

    lipschitz: float
    regularization: float
    strong_convexity: float = 0.0
    center: Any = None
    accuracy: float | None = None
    gaussian: str = "analytic"
    solver: str | None = None
    project: bool = True

    requirements: ClassVar[tuple[str, ...]] = ("solver", "project")
    extension: ClassVar[ExtensionUse] = PLAIN
    enforces_lipschitz: ClassVar[bool] = True
    neighbors: ClassVar[NeighborRelation] = REPLACE_ONE

    def __post_init__(self) -> None:
        owner = "OutputPerturbation"
        object.__setattr__(self, "lipschitz", check_positive(self.lipschitz, "lipschitz", owner))
        lam = check_nonnegative(self.regularization, "regularization", owner)
        mu = check_nonnegative(self.strong_convexity, "strong_convexity", owner)
        if lam + mu <= 0:
            raise InvalidParameterError(
                f"`{owner}` needs a strongly convex objective: `regularization` (got {lam!r}) "
                f"plus `strong_convexity` (got {mu!r}) must be positive. Set regularization > 0."
            )
        object.__setattr__(self, "regularization", lam)
        object.__setattr__(self, "strong_convexity", mu)
        if self.accuracy is not None:
            object.__setattr__(self, "accuracy", check_positive(self.accuracy, "accuracy", owner))
        if self.gaussian not in ("analytic", "zwb"):
            raise InvalidParameterError(
                f"The `gaussian` parameter of `{owner}` must be 'analytic' or 'zwb'. "
                f"Got {self.gaussian!r}."
            )
        object.__setattr__(self, "center", check_center(self.center, owner))

    # ------------------------------------------------------------------ public planning
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
    ) -> ReleasePlan:
        """Fix ``alpha``, the sensitivity and the noise from public quantities only."""
        owner = "OutputPerturbation"
        epsilon = check_positive(epsilon, "epsilon", owner)
        delta = check_delta(delta, owner)
        w0 = center if self.center is None else self.center
        if w0.shape != (d,):
            raise InvalidParameterError(
                f"The `center` of `{owner}` must have shape ({d},) to match the variable. "
                f"Got {w0.shape}."
            )
        L = self.lipschitz
        modulus = self.regularization + self.strong_convexity  # of the whole objective
        alpha = self.accuracy
        if alpha is None:
            alpha = default_accuracy(L, modulus, n, 1.0 + L * diameter)
        base = 2.0 * L / (modulus * n)
        inflation = 2.0 * math.sqrt(2.0 * alpha / modulus)
        total = math.nextafter(base + inflation, math.inf)
        noise = calibrate(total, epsilon, delta, gaussian=self.gaussian)
        return ReleasePlan(
            guarantee=Guarantee(epsilon=epsilon, delta=delta),
            regularization=self.regularization,
            center=np.asarray(w0, float),
            accuracy=alpha,
            sensitivity=Sensitivity(value=total),
            base_sensitivity=base,
            noise=noise,
            detail=MappingProxyType(
                {
                    "mechanism": "OutputPerturbation",
                    "paper": "002 Alg 1/6 (Prop 2.2, 3.1, 3.3)",
                    "lipschitz": L,
                    "strong_convexity": self.strong_convexity,
                    "inflation": inflation,
                }
            ),
        )

    def preflight(self, plan: ReleasePlan, context: Any) -> None:
        """Refuse, before the budget is reserved, a solve that would be refused on every
        dataset (the Lipschitz extension of a loss no fast path writes, at a size whose conic
        program is too large to stamp: ``ReleaseContext.refusal``). Data free."""
        refuse_unsolvable(context, plan.regularization)

    # ------------------------------------------------------------------ release
    def release(self, plan: ReleasePlan, context: Any, rng: Any, *args: Any, **kwargs: Any):
        """Solve to the planned accuracy (raises ``CertificationError`` otherwise), add noise,
        project. ``context`` is the release's :class:`~dpcvx.mechanisms.base.DataAccess`.

        Returns a :class:`~dpcvx.mechanisms.base.Release`: the released point and the *public*
        certificate of the solve (the certified point and its bounds stay inside: they are not
        private). The earlier form ``release(plan, solve, project, rng, domain=...)`` still
        works, with a :class:`DeprecationWarning`, and returns ``(w, certificates)``.
        """
        return single_solve_release(self, plan, context, rng, args, kwargs, self._release)

    def _release(self, plan: ReleasePlan, solve, project, rng, domain: str) -> Release:
        cert = solve(plan.regularization, plan.center, plan.accuracy)
        if not cert.gap <= plan.accuracy:  # defensive: the solve contract guarantees this
            raise CertificationError(
                "Internal: a certificate above the accuracy target reached the release step; "
                "nothing was released."
            )
        noisy = perturb(cert.w, plan.noise, rng)
        out = project(noisy) if self.project else noisy
        modulus = self.regularization + self.strong_convexity
        public = ReleaseCertificate(
            accuracy=plan.accuracy,
            distance_bound=math.sqrt(2.0 * plan.accuracy / modulus),
            regularization=self.regularization,
            strong_convexity=self.strong_convexity,
            center=np.asarray(plan.center, float).copy(),
            domain=domain,
        )
        return Release(np.asarray(out, float), (public,))


def choose_regularization(
    lipschitz: float,
    radius: float,
    n: int,
    d: int,
    epsilon: float,
    delta: float = 0.0,
    *,
    task: str = "erm",
    smoothness: float | None = None,
) -> tuple[float, float]:
    """Paper 002's regularization for Algorithm 6, from public quantities only.

    Returns ``(lam, bound)``: the regularization and the theorem's excess-risk bound (empirical
    risk for ``task="erm"``, population risk for ``task="sco"``), capped at the trivial
    ``L R``. With ``rho = d/(epsilon n)`` (pure) or ``sqrt(d) s_delta/(epsilon n)`` (approx,
    ``s_delta = c_delta + sqrt(c_delta^2 + epsilon)``):

    - ERM, Lipschitz (Prop 2.5 / Thm 3.4): ``lam = L / (R sqrt(1 + 1/rho))``, bound
      ``8.5 L R sqrt(rho)``;
    - ERM, ``smoothness = beta`` (Prop 2.8): ``lam = (beta L^2/R^2)^(1/3) rho^(2/3)``, bound
      ``48.5 beta^(1/3) L^(2/3) R^(4/3) rho^(2/3)`` (needs ``rho^2 <= L/(R beta)``);
    - SCO, Lipschitz (Prop 4.3): ``lam = (L/R)(sqrt(rho) + 1/sqrt(n))``, bound
      ``32 L R (sqrt(rho) + 1/sqrt(n))`` (Cor 4.3's safer constant; the digest notes the
      printed 127/(1/2) constants are unreliable);
    - SCO, smooth (Prop 4.4): ``lam = (beta L^2/R^2)^(1/3)(rho^(2/3) + 1/sqrt(n))``, bound
      ``beta^(1/3) L^(2/3) R^(4/3)(11/sqrt(n) + 83 rho^(2/3))`` (pure; 43 approx).

    ``R`` bounds the norm of the minimizers (e.g. the domain's radius around 0).
    """
    owner = "choose_regularization"
    L = check_positive(lipschitz, "lipschitz", owner)
    R = check_positive(radius, "radius", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    delta = check_delta(delta, owner)
    if task not in ("erm", "sco"):
        raise InvalidParameterError(f"`task` of `{owner}` must be 'erm' or 'sco'. Got {task!r}.")
    if delta == 0:
        rho = d / (eps * n)
    else:
        from dpcvx.mechanisms.noise import c_delta

        c = c_delta(delta)
        rho = math.sqrt(d) * (c + math.sqrt(c * c + eps)) / (eps * n)
    if smoothness is None:
        if task == "erm":
            lam, bound = L / (R * math.sqrt(1.0 + 1.0 / rho)), 8.5 * L * R * math.sqrt(rho)
        else:
            lam = (L / R) * (math.sqrt(rho) + 1.0 / math.sqrt(n))
            bound = 32.0 * L * R * (math.sqrt(rho) + 1.0 / math.sqrt(n))
    else:
        beta = check_positive(smoothness, "smoothness", owner)
        scale = (beta * L * L / (R * R)) ** (1.0 / 3.0)
        lead = beta ** (1.0 / 3.0) * L ** (2.0 / 3.0) * R ** (4.0 / 3.0)
        if task == "erm":
            lam, bound = scale * rho ** (2.0 / 3.0), 48.5 * lead * rho ** (2.0 / 3.0)
        else:
            lam = scale * (rho ** (2.0 / 3.0) + 1.0 / math.sqrt(n))
            const = 83.0 if delta == 0 else 43.0
            bound = lead * (11.0 / math.sqrt(n) + const * rho ** (2.0 / 3.0))
    return lam, min(bound, L * R)
