"""Localized-ApproxEM of paper 000, Appendix F (Algorithms 6-7), with erratum E5 applied and an
honest reference sampler in place of the cited inexact log-concave sampler of [LL25].

**Reference only, d = 1.** The paper's polynomial-time route samples the continuous density
``exp(-Psi_Z)`` on ``W0`` with the inexact sampler of [LL25, Theorem 3.9], which the paper cites
and does not give. dpcvx ships instead a sampler whose output law it can bound exactly in
both directions: a piecewise-constant density on a public partition of the interval ``W0``
into equal cells, whose cell is drawn exactly. Its cost grows like ``m^2`` (cells times
examples), and it needs the exact cell volumes, which dpcvx computes only for intervals: it
refuses ``d > 1``. Use it to check the paper's accounting on small problems; use
:class:`~dpcvx.LocalizedDoubleOutputPerturbation` for releases.

Symbols (as in the code; ``docs/approx_em.md`` has the derivation):

- ``W`` the public domain (an interval), ``D`` its diameter bound, ``m`` the number of
  examples, ``C`` the Lipschitz extension's constant, ``lam``, ``w0`` the regularization.
- Stage 1 (Algorithm 2 at ``epsilon/2``, ``zeta = 3``): the certified solve on ``f_C`` and
  ``w_loc = Pi_W(w~ + b)``; ``D0`` is the **radius** of ``W0 = W cap B(w_loc, D0)``
  (erratum E5): ``600 C d/(lam epsilon m)`` with ``constants="paper"``, the Gamma-quantile
  radius with ``constants="tight"`` (both from
  :class:`~dpcvx.mechanisms.double_output_perturbation.OutputPertLocalize`'s helper).
- ``f_{C,N}(w, z) = min_{q in N_W} f(q, z) + C |w - q|``: Algorithm 6's inner minimum over
  ``y in W`` taken over a public net ``N_W`` of ``W`` (exhaustive search in place of
  Algorithm 3). It is exactly ``C``-Lipschitz in ``w`` for every example, whatever the loss,
  and ``f_{C,N} >= f_C`` (a minimum over fewer points; the gap costs utility only).
- The anchor ``u0 = w_loc`` (erratum E5) and ``r0 = max(w_loc - a, b - w_loc) <= D0`` for
  ``W0 = [a, b]``.
- The score ``S_Z(w) = (1/m) sum_i clip(f_{C,N}(w, z_i) - f_{C,N}(w_loc, z_i), +-C |w - w_loc|)
  + (lam/2)(w - w0)^2`` (the clip changes nothing in exact arithmetic and bounds every term
  in floating point) with sensitivity ``Delta0 = 2 C r0 / m`` (plus a float64 allowance,
  :func:`~dpcvx.mechanisms.exponential.clipped_score_sensitivity`), and the potential
  ``Psi_Z = epsilon_EM S_Z / (2 Delta0)`` (paper eq. (32)).
- The target ``mu_Z ~ exp(-Psi_Z)`` on ``W0``; the sampler's law ``mu~_Z``: ``W0`` cut into
  ``K`` equal cells of width ``h``, cell ``k`` drawn with probability proportional to
  ``exp(-Psi_Z(c_k))`` (``c_k`` its centre; exact Gumbel-max), then a uniform point of it.

**The sampler's two-sided bound (proof).** ``Psi_Z`` is ``L_Psi``-Lipschitz on ``W0`` with the
public ``L_Psi = epsilon_EM (C + lam R) / (2 Delta0)``, ``R = max_{W0} |w - w0|``, because
``f_{C,N}`` is ``C``-Lipschitz for every example. So ``|Psi_Z(w) - Psi_Z(c_k(w))| <= L_Psi h/2``
for every ``w``; the unnormalized densities are within that factor pointwise, hence so are
the normalizers, and ``|log mu~_Z(w) / mu_Z(w)| <= L_Psi h =: rho`` for every ``w`` in ``W0``:
``D_inf(mu~_Z || mu_Z) <= rho`` **and** ``D_inf(mu_Z || mu~_Z) <= rho`` (same support). ``K``
is the smallest count with ``rho <= xi``; ``xi = epsilon/64`` (Algorithm 7).

**Privacy (pure epsilon-DP, replace-one neighbors, public m, every dataset).** Stage 1 is
Algorithm 2 at ``epsilon/2`` on ``f_C`` (as in ``OutputPertLocalize``). Given the public
``w_loc``, the target ``mu_Z`` is ``epsilon_EM``-DP (Lemma F.1 with the anchor at the centre:
every term moves by at most ``2 C r0 / m``), and Lemma F.4 with the two-sided bound gives
``epsilon_EM + 2 rho <= epsilon_EM + 2 xi`` for ``mu~``. ``constants="paper"``:
``epsilon_EM = epsilon/4`` (stage 2 then spends ``9 epsilon/32`` of its ``epsilon/2``);
``"tight"``: ``epsilon_EM = epsilon/2 - 2 xi = 15 epsilon/32``. Adaptive basic composition
gives ``epsilon``. (The sampler is in fact itself an exponential mechanism over the cell
centres, which lie within ``r0`` of ``w_loc``: it is directly ``epsilon_EM``-DP, so the
``2 rho`` charged for it is never used. It is charged because it is the paper's accounting
and covers any sampler with the same two-sided bound.)

**Erratum E5 (digest of paper 000).** ``D0`` is ``W0``'s radius, not its diameter, so the
anchor must be the centre ``w_loc``: then ``||w - u0|| <= D0`` and ``Delta0 = 2 C D0 / m``
holds; and Lemma F.4 needs the sampler's bound in both directions (proved above). For an
exactly ``C``-Lipschitz score, as here, the anchor is a constant shift that cancels in the
normalization (Lemma F.1, part 1): it shapes the clip bound and the proof, not the law.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from dpcvx._validation import check_positive
from dpcvx.certification.certificate import ReleaseCertificate
from dpcvx.errors import CertificationError, InvalidParameterError, SolverError
from dpcvx.mechanisms.base import Release, noise_event, perturb
from dpcvx.mechanisms.double_output_perturbation import (
    _localization,
    _OnExtension,
    _pure_center,
)
from dpcvx.mechanisms.em_pgm import (
    NetDistribution,
    _check_domain,
    exponential_log_probabilities,
    net_points,
    sample_index,
)
from dpcvx.mechanisms.exponential import clipped_score_sensitivity, clipped_scores
from dpcvx.mechanisms.noise import NoiseSpec
from dpcvx.types import Guarantee, Sensitivity

__all__ = [
    "ApproximateExponentialPlan",
    "CellLaw",
    "LocalizedApproximateExponentialMechanism",
    "net_extension_values",
]

#: the only dimension accepted (exact cell volumes of W0 are computed for intervals only)
MAX_DIMENSION = 1
#: relative margin on the potential's Lipschitz bound (covers float64 rounding of L_Psi h)
_MARGIN = 1e-9

_FAILURE = (
    "dpcvx could not evaluate Localized-ApproxEM's scores on its cells. Nothing was released "
    "and the whole budget stays spent. This message carries no data-dependent number, but "
    "the failure itself may depend on the data: do not retry on the same data without "
    "charging the budget again. To fix: check that the loss can be evaluated at every point "
    "of the domain, and rescale the data so that losses are of order one."
)


# -------------------------------------------------------------------------------- public pieces
def net_extension_values(
    values: np.ndarray, net: np.ndarray, points: np.ndarray, C: float
) -> np.ndarray:
    """``f_{C,N}(w_p, z_i) = min_q values[q, i] + C |w_p - net_q|`` in one dimension.

    ``values`` has shape ``(len(net), n)`` (the loss at every point of the sorted public net
    ``net``), ``points`` shape ``(P,)``; returns shape ``(P, n)``. Each column depends on its
    own example only and is exactly ``C``-Lipschitz in ``w`` (a minimum of ``C``-Lipschitz
    functions), whatever the values: Algorithm 6's inner minimum over ``y in W`` taken over
    the public net. Two passes (prefix minimum of ``values - C q`` for ``q <= w``, suffix
    minimum of ``values + C q`` for ``q >= w``): ``O((len(net) + P) n)``. A NaN value counts
    as ``+inf`` (that net point is skipped). **Data-dependent** when the values are.
    """
    q = np.asarray(net, float).reshape(-1)
    V = np.asarray(values, float).reshape(q.size, -1)
    V = np.where(np.isnan(V), np.inf, V)
    w = np.asarray(points, float).reshape(-1)
    with np.errstate(invalid="ignore", over="ignore"):
        left = np.minimum.accumulate(V - C * q[:, None], axis=0)  # min over q_j <= q_i
        right = np.minimum.accumulate((V + C * q[:, None])[::-1], axis=0)[::-1]
        i = np.searchsorted(q, w, side="right") - 1  # last q <= w
        j = np.searchsorted(q, w, side="left")  # first q >= w
        out = np.full((w.size, V.shape[1]), np.inf)
        has_left = i >= 0
        out[has_left] = C * w[has_left, None] + left[i[has_left]]
        has_right = j < q.size
        out[has_right] = np.minimum(out[has_right], right[j[has_right]] - C * w[has_right, None])
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class CellLaw:
    """Stage 2's exact output law given the public ``w_loc``: the cells, their scores and the
    log-probability of each cell (the released point is uniform in its cell).

    **Data-dependent: for tests and audits only.**

    Attributes
    ----------
    edges : ndarray, shape (K + 1,)
        The public cell edges ``a = e_0 < ... < e_K = b`` of ``W0 = [a, b]``.
    distribution : NetDistribution
        ``points`` the cell centres ``(K, 1)``, ``scores`` ``S_Z(c_k)``,
        ``log_probabilities`` ``log P(cell k)``.
    sensitivity : float
        ``Delta0`` (public).
    potential_lipschitz : float
        ``L_Psi`` (public).
    divergence_bound : float
        ``rho = L_Psi h``: the two-sided max-divergence bound of the sampler (public).
    """

    edges: np.ndarray
    distribution: NetDistribution
    sensitivity: float
    potential_lipschitz: float
    divergence_bound: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ApproximateExponentialPlan:
    """Everything a :class:`LocalizedApproximateExponentialMechanism` release uses that can be
    fixed before any data is touched (the cells follow from the public ``w_loc``)."""

    guarantee: Guarantee  # the whole release: epsilon
    n: int  # m
    d: int
    extension_C: float  # C (the stage-1 solve runs on f_C)
    regularization: float  # lam
    center: np.ndarray  # w0
    accuracy: float  # alpha_1 of the stage-1 certified solve
    localization_sensitivity: Sensitivity  # Delta_1 = 2C/(lam m) + 2 sqrt(2 alpha_1/lam)
    noise: NoiseSpec  # stage 1, at epsilon / 2
    radius: float  # D0: W0's radius (erratum E5)
    em_epsilon: float  # epsilon_EM
    sampler_slack: float  # xi: the cells make rho <= xi, in both directions
    stage_two_epsilon: float  # epsilon_EM + 2 xi <= epsilon / 2 (Lemma F.4)
    inner_net: np.ndarray  # N_W: the public net of W for f_{C,N}
    cell_bound: int  # public bound on the number of cells
    detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    ledger_detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    def events(self, label: str):
        """One pure event ``epsilon`` (stage 1 ``epsilon/2`` + stage 2 ``<= epsilon/2``)."""
        return noise_event(label, self.guarantee, None, self.ledger_detail)

    def facts(self):
        """The plan's public facts."""
        return MappingProxyType(dict(self.detail))


# -------------------------------------------------------------------------------- mechanism
@dataclass(frozen=True, slots=True, kw_only=True)
class LocalizedApproximateExponentialMechanism(_OnExtension):
    """Paper 000's Localized-ApproxEM (Appendix F, Algorithms 6-7) with erratum E5 applied:
    localization on the Lipschitz extension, then an exponential mechanism on the localized
    interval through a sampler with a proved two-sided max-divergence bound. **Reference
    only: d = 1** (see the module docstring).

    Parameters
    ----------
    C : float, optional
        The extension's Lipschitz constant (public). Default: paper 000's
        ``C = G_k (m epsilon / d)^(1/k)`` from ``moment`` (= ``G_k``) and ``k``.
    regularization : float
        ``lam > 0``.
    center : array-like, optional
        ``w0``; default the center of the domain.
    zeta : float
        Stage 1's tail parameter (paper: 3); with ``constants="paper"``,
        ``D0 = 100 zeta C d / (lam m epsilon/2)`` (``600 C d/(lam epsilon m)`` at 3).
    constants : {"tight", "paper"}
        ``"paper"``: Algorithm 2's printed constants and ``epsilon_EM = epsilon/4``.
        ``"tight"`` (default): stage 1 calibrated exactly (quantile radius) and
        ``epsilon_EM = epsilon/2 - 2 xi``.
    solver : str, optional
        First solver of the refinement ladder of the stage-1 solve.
    accuracy : float, optional
        Stage 1's certified accuracy (public override).
    moment, k : float, optional
        ``G_k`` and ``k >= 2`` for the default ``C``.
    inner_spacing : float, optional
        Largest spacing of the public net ``N_W`` of the inner minimum; default ``D/2000``.
    max_cells : int
        Refuse (before anything is spent) when the public bound on the number of cells or
        net points exceeds it. Default 200000.

    Notes
    -----
    Guarantee: pure epsilon-DP, replace-one neighbors, public m, on every dataset
    (``delta`` must be 0); no Lipschitz constant of the loss is assumed. One ledger event
    ``epsilon``: ``epsilon/2`` for Algorithm 2, ``epsilon_EM + 2 xi <= epsilon/2`` for the
    sampled exponential mechanism (paper 000, Prop F.5 with Lemmas F.1, F.3, F.4; the
    sampler's bound ``rho <= xi = epsilon/64`` holds in both directions, as Lemma F.4 needs).

    Erratum E5 (``docs/paper000_digest.md``): ``D0`` is ``W0``'s radius, so the anchor is the
    centre ``u0 = w_loc``; the score's sensitivity is ``Delta0 = 2 C r0 / m`` with
    ``r0 <= D0`` the largest distance from ``w_loc`` to ``W0``'s ends.

    Algorithm 6's ``alpha_in`` plays no role: the inner minimum is exhaustive over the public
    net ``N_W``, whose result ``f_{C,N}`` is exactly ``C``-Lipschitz, so the target is the
    exponential mechanism on ``f_{C,N}`` and the evaluator adds nothing to ``rho``.

    Examples
    --------
    >>> import cvxpy as cp, numpy as np, dpcvx
    >>> from dpcvx.mechanisms.approx_em import LocalizedApproximateExponentialMechanism
    >>> w = cp.Variable(1); z = cp.Parameter()
    >>> problem = dpcvx.Problem(cp.abs(w[0] - z), w, data={z: np.linspace(-.5, .5, 21)},
    ...                         domain=dpcvx.domains.box(w, -1.0, 1.0))
    >>> mech = LocalizedApproximateExponentialMechanism(C=1.0, regularization=1.0)
    >>> res = problem.solve_private(mech, epsilon=8.0, rng=0)
    >>> bool(abs(res.w[0]) <= 1), res.detail["sampler_divergence_bound"] <= 8.0 / 64
    (True, True)
    """

    inner_spacing: float | None = None
    max_cells: int = 200_000
    #: a certified solve on f_C (stage 1), loss values (stage 2) and the public projection
    requirements: ClassVar[tuple[str, ...]] = ("solver", "project", "loss_values")

    def __post_init__(self) -> None:
        owner = "LocalizedApproximateExponentialMechanism"
        _OnExtension.__post_init__(self)
        if self.inner_spacing is not None:
            object.__setattr__(
                self, "inner_spacing", check_positive(self.inner_spacing, "inner_spacing", owner)
            )
        cells = self.max_cells
        if isinstance(cells, bool) or not isinstance(cells, int) or cells < 2:
            raise InvalidParameterError(
                f"`max_cells` of `{owner}` must be an integer >= 2. Got {cells!r}."
            )
        if self.solver is not None and not isinstance(self.solver, str):
            raise InvalidParameterError(
                f"The `solver` parameter of `{owner}` must be a solver name such as "
                f"'CLARABEL', or None. Got {type(self.solver).__name__}: {self.solver!r}."
            )

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
    ) -> ApproximateExponentialPlan:
        """Stage 1's accuracy, noise and radius ``D0``, ``epsilon_EM``, ``xi``, the inner net and
        the cell bound, from public quantities only. ``domain`` is required (the inner net is
        built from it)."""
        owner = "LocalizedApproximateExponentialMechanism"
        if int(d) != MAX_DIMENSION:
            raise InvalidParameterError(
                f"`{owner}` is a reference route for d = 1 only (its sampler needs the exact "
                f"cell volumes of W0, computed for intervals). Got d = {d}. Use "
                "LocalizedExponentialMechanism (a net, d <= 3) or "
                "LocalizedDoubleOutputPerturbation (any d)."
            )
        epsilon, w0 = _pure_center(self, owner, d, np.asarray(center, float), epsilon, delta)
        if domain is None:
            raise InvalidParameterError(
                f"`{owner}.plan` needs the public `domain` to build the inner net of W. Got "
                "domain=None. Pass `domain=problem.domain`; `Problem.solve_private` does this."
            )
        _check_supported(domain, owner)
        n = int(n)
        D = float(diameter)
        if not (math.isfinite(D) and D > 0.0):
            raise InvalidParameterError(
                f"`{owner}` needs a bounded domain with a positive finite diameter. Got "
                f"{diameter!r}."
            )
        C, lam, half = self._constant(n, d, epsilon), self.regularization, epsilon / 2.0
        alpha, sens, noise, D0 = _localization(
            C, lam, n, d, D, half, self.zeta, self.constants, self.accuracy
        )
        D0 = math.nextafter(float(D0), math.inf)
        xi = epsilon / 64.0
        em = epsilon / 4.0 if self.constants == "paper" else half - 2.0 * xi
        stage_two = em + 2.0 * xi
        if not stage_two <= half:  # exact arithmetic: 9/32 or 1/2 of epsilon
            stage_two = half
        h_in = D / 2000.0 if self.inner_spacing is None else self.inner_spacing
        per_axis = D / h_in
        if per_axis + 1 > self.max_cells:
            raise InvalidParameterError(
                f"The inner net of `{owner}` at spacing {h_in:.6g} may have up to "
                f"{per_axis + 1:.3g} points, above max_cells = {self.max_cells}. Pass a coarser "
                "public `inner_spacing` (utility only) or raise `max_cells`."
            )
        inner = np.ascontiguousarray(net_points(domain, h_in)[:, 0])
        inner.flags.writeable = False
        # K <= ceil(epsilon_EM m (C + lam R) / (2 C xi)) + 1 with R <= D + |w0 - center|
        R = D + float(np.linalg.norm(w0 - np.asarray(center, float)))
        cell_bound = math.ceil(em * n * (C + lam * R) / (2.0 * C * xi) * (1.0 + 1e-6)) + 1
        if cell_bound > self.max_cells:
            raise InvalidParameterError(
                f"`{owner}` may need up to {cell_bound} cells (epsilon_EM m (C + lam R)/(2 C "
                f"xi) with m = {n}, C = {C:g}, lam = {lam:g}, R = {R:g}), above max_cells = "
                f"{self.max_cells}. This reference sampler costs time quadratic in m: use "
                "fewer examples, raise `max_cells`, or use LocalizedDoubleOutputPerturbation."
            )
        split = (
            "epsilon/2 localization (Alg 2) + epsilon_EM + 2 xi <= epsilon/2 sampled "
            "exponential mechanism (Lemma F.4, two-sided bound rho <= xi); basic composition"
        )
        common = {
            "paper": "000 App F (Alg 7 = Alg 2 + EM via Alg 6; Lemmas F.1-F.4; erratum E5)",
            "C": C,
            "constants": self.constants,
            "regularization": lam,
            "accuracy": alpha,
            "localization_sensitivity": sens,
            "noise": noise.kind,
            "noise_scale": noise.scale,
            "localization_radius": D0,
            "em_epsilon": em,
            "sampler_slack": xi,
            "stage_two_epsilon": stage_two,
            "anchor": "w_loc (erratum E5)",
            "reference_only": "d = 1; cells quadratic in m",
        }
        detail = dict(common)
        detail.update(
            {
                "mechanism": "LocalizedApproximateExponentialMechanism",
                "center": tuple(float(v) for v in w0),
                "zeta": self.zeta,
                "inner_spacing": h_in,
                "inner_net_size": int(inner.size),
                "cell_bound": cell_bound,
                "composition": split,
            }
        )
        ledger = dict(common)
        ledger.update(
            {
                "composition": split,
                "adaptive": "the cells of W0 = W cap B(w_loc, D0) depend on the stage-1 "
                "release w_loc (adaptive composition)",
            }
        )
        return ApproximateExponentialPlan(
            guarantee=Guarantee(epsilon=epsilon, delta=0.0),
            n=n,
            d=int(d),
            extension_C=C,
            regularization=lam,
            center=np.asarray(w0, float).copy(),
            accuracy=alpha,
            localization_sensitivity=Sensitivity(value=sens, norm="l2"),
            noise=noise,
            radius=D0,
            em_epsilon=em,
            sampler_slack=xi,
            stage_two_epsilon=stage_two,
            inner_net=inner,
            cell_bound=cell_bound,
            detail=MappingProxyType(detail),
            ledger_detail=MappingProxyType(ledger),
        )

    # ------------------------------------------------------------------ stage 2
    def cell_law(
        self, plan: ApproximateExponentialPlan, context: Any, localization_center: Any
    ) -> CellLaw:
        """Stage 2's exact law given the public ``w_loc`` (``context`` offers ``domain`` and
        ``loss_values``). **Data-dependent: for tests and privacy audits only.**"""
        w_loc = float(np.asarray(localization_center, float).reshape(-1)[0])
        return _cell_law(plan, context, w_loc)

    def release(
        self, plan: ApproximateExponentialPlan, context: Any, rng: np.random.Generator
    ) -> Release:
        """Localize (certified solve on ``f_C``, noise, projection), then draw a cell of
        ``W0`` exactly and a uniform point in it. Returns the point, the stage-1 certificate
        and public detail (``w_loc``, ``D0``, the cells and the sampler's bound ``rho``)."""
        owner = "LocalizedApproximateExponentialMechanism"
        domain = context.domain
        _check_supported(domain, owner)  # public, before the data is touched
        cert = context.solver()(plan.regularization, plan.center, plan.accuracy)
        if not cert.gap <= plan.accuracy:  # defensive: the solve contract guarantees this
            raise CertificationError(
                "Internal: a certificate above the accuracy target reached the release step; "
                "nothing was released."
            )
        w_loc = float(np.asarray(context.project(perturb(cert.w, plan.noise, rng))).reshape(-1)[0])
        try:
            law = _cell_law(plan, context, w_loc)
            k = sample_index(law.distribution.log_probabilities, rng)
            lo, hi = float(law.edges[k]), float(law.edges[k + 1])
        except Exception:  # noqa: BLE001 - nothing data-dependent may leave a private release
            raise SolverError(_FAILURE) from None
        # a uniform point of the public cell: post-processing of the cell index
        w = min(max(lo + float(rng.random()) * (hi - lo), lo), hi)
        public = ReleaseCertificate(
            accuracy=plan.accuracy,
            distance_bound=math.sqrt(2.0 * plan.accuracy / plan.regularization),
            regularization=plan.regularization,
            strong_convexity=0.0,
            center=np.asarray(plan.center, float).copy(),
            domain=f"{domain.kind} (stage 1: localization on f_C)",
        )
        extra = {
            "localization_center": (w_loc,),
            "localization_radius": plan.radius,
            "cells": int(law.edges.size - 1),
            "score_sensitivity": law.sensitivity,
            "potential_lipschitz": law.potential_lipschitz,
            "sampler_divergence_bound": law.divergence_bound,
        }
        return Release(np.array([w]), (public,), MappingProxyType(extra))


# -------------------------------------------------------------------------------- helpers
def _check_supported(domain, owner: str) -> None:
    try:
        _check_domain(domain)
    except InvalidParameterError:
        raise InvalidParameterError(
            f"`{owner}` builds its inner net from the exact Euclidean projection onto W: it "
            "needs an interval (dpcvx.domains.box(w, lo, hi) or l2_ball in d = 1). Got a "
            f"domain of kind {getattr(domain, 'kind', None)!r}."
        ) from None


def _extent(domain) -> tuple[float, float]:
    """``W``'s ends (public): projections of far points, as :func:`net_points` does."""
    c = np.asarray(domain.center, float)
    far = np.array([float(domain.diameter)])
    return float(domain.project(c - far)[0]), float(domain.project(c + far)[0])


def _cell_law(
    plan: ApproximateExponentialPlan,
    context: Any,
    w_loc: float,
    *,
    anchor: float | None = None,
) -> CellLaw:
    """The cells of ``W0 = W cap [w_loc - D0, w_loc + D0]`` and the exact law over them.

    ``anchor`` (tests only) replaces the anchor ``w_loc`` in the score's centring and clip
    bound, with ``Delta0`` still computed for ``w_loc`` (the printed Algorithm 7 before E5).
    """
    lo_W, hi_W = _extent(context.domain)
    a, b = max(lo_W, w_loc - plan.radius), min(hi_W, w_loc + plan.radius)
    C, lam, m = plan.extension_C, plan.regularization, plan.n
    w0 = float(plan.center[0])
    if not b > a:  # W0 is the point w_loc: nothing data-dependent to draw
        one = NetDistribution(
            points=np.array([[w_loc]]), scores=np.zeros(1), log_probabilities=np.zeros(1)
        )
        return CellLaw(
            edges=np.array([w_loc, w_loc]),
            distribution=one,
            sensitivity=0.0,
            potential_lipschitz=0.0,
            divergence_bound=0.0,
        )
    r0 = max(w_loc - a, b - w_loc)
    R = max(abs(a - w0), abs(b - w0))
    delta0 = clipped_score_sensitivity(
        n=m, lipschitz=C, radius=r0, regularization_bound=0.5 * lam * R * R
    )
    coefficient = plan.em_epsilon / (2.0 * delta0)
    L_psi = coefficient * (C + lam * R) * (1.0 + _MARGIN)
    K = max(1, math.ceil((b - a) * L_psi / plan.sampler_slack))
    # K <= plan.cell_bound for every w_loc (the plan's public bound); a recalibrated copy of
    # the plan (an audit's negative control) may need more, which is allowed
    edges = a + (b - a) * (np.arange(K + 1) / K)
    edges[0], edges[-1] = a, b
    centres = 0.5 * (edges[:-1] + edges[1:])
    rho = L_psi * float(np.max(np.diff(edges)))
    u0 = w_loc if anchor is None else float(anchor)
    # every term of the score is a function of its own example (its loss on the public inner
    # net) and public numbers, clipped to +-C |c_k - u0|
    values = np.asarray(context.loss_values(plan.inner_net[:, None]), float)
    ext = net_extension_values(values, plan.inner_net, np.append(centres, u0), C)
    bounds = C * np.abs(centres - u0)
    reg = 0.5 * lam * (centres - w0) ** 2
    scores = clipped_scores(ext[:-1], ext[-1], bounds, reg)
    logp = exponential_log_probabilities(scores, plan.em_epsilon, delta0)
    dist = NetDistribution(points=centres[:, None], scores=scores, log_probabilities=logp)
    return CellLaw(
        edges=edges,
        distribution=dist,
        sensitivity=delta0,
        potential_lipschitz=L_psi,
        divergence_bound=rho,
    )
