"""The exponential mechanism of paper 002, Appendix G, made exactly pure epsilon-DP over a
public finite net: Algorithm 9 (``A_exp``, Proposition G.1, Theorem G.1) and Algorithm 11
(Algorithm 10's localization at ``epsilon/2``, then Algorithm 9 at ``epsilon/2`` on the
localized set; Proposition G.2).

**A reference route, exponential in d.** The net has about ``(D / h)^d`` points and every point
costs ``n`` loss evaluations, so both mechanisms accept only ``d <= 3``. They exist to check the
polynomial-time mechanisms (output perturbation) against the paper's ``LR d/(epsilon n)`` and
``(L^2/lam) (d/(epsilon n))^2 log(...)`` routes on small problems, not for production use.

Symbols (as in the code; ``docs/exponential_mechanism.md`` has the derivation):

- ``W`` the public domain (an l2 ball, a box or an l1 ball, as for
  :mod:`dpcvx.mechanisms.em_pgm`), ``D`` its diameter bound, ``R = D/2``, ``n`` the number of
  examples, ``d <= 3``.
- ``L`` (``lipschitz``): a public bound on every example's Lipschitz constant on ``W``.
- ``lam``, ``w0`` (``regularization``, ``center``): the objective
  ``F(w) = (1/n) sum_i f(w, z_i) + (lam/2) ||w - w0||^2``.
- the net ``N``: a public grid of spacing ``h <= spacing`` intersected with ``W``
  (:func:`~dpcvx.mechanisms.em_pgm.net_points`); default ``h``: the finest uniform spacing
  whose public bound ``(ceil(D/h) + 1)^d`` on the number of points is at most ``max_points``.
- ``c`` the anchor, a public point of ``W`` (the domain's center made feasible), and
  ``r = max_{w in N} ||w - c||``, public because the net is.
- the score ``s_Z(w) = (1/n) sum_i clip(f(w, z_i) - f(c, z_i), -L ||w - c||, L ||w - c||)
  + (lam/2) ||w - w0||^2`` (a non-finite difference counts as 0).
- release ``w`` from ``N`` with probability proportional to
  ``exp(-epsilon s_Z(w) / (2 Delta_s))``, ``Delta_s = 2 L r / n`` plus a float64 allowance
  (:func:`clipped_score_sensitivity`): this is the paper's ``exp(-epsilon F / (4 L R))`` with
  the ERM variation ``2LR/n`` (Proposition G.1 and the remark after it).

**Privacy of Algorithm 9 (pure epsilon-DP, replace-one neighbors, public n, every dataset).**
For a fixed net point ``w`` each clipped term is a fixed function of its own example with
values in ``[-L r, L r]``, *whatever the loss and whether or not the Lipschitz claim holds*;
the regularizer is public. So ``|s_Z(w) - s_{Z'}(w)| <= 2 L r / n`` on every pair of neighbors,
and the exponential mechanism over the public finite net is epsilon-DP (McSherry & Talwar
2007; [DR14, Thm 3.10]). When ``L`` is a true Lipschitz bound on ``W`` the clip changes
nothing (``|f(w, z) - f(c, z)| <= L ||w - c||`` because ``c, w in W``), and the anchor term
``(1/n) sum_i f(c, z_i)`` is a constant shift: the released distribution is the paper's density
restricted to the net. The paper's continuous density has no exact sampler (digest pitfall
P9); a finite public net has one (the exact Gumbel-max of the log-probabilities,
:func:`~dpcvx.mechanisms.sampling.sample_index`, which draws every positive mass with exactly
its probability).

**Privacy of Algorithm 11.** Stage 1 is Algorithm 10 as its own mechanism
(:class:`~dpcvx.mechanisms.output_perturbation_localize.OutputPerturbationLocalize`, run
through its planning and release functions), certified output perturbation at ``epsilon/2``: the
exact minimizers of ``F`` over ``W`` on neighbors differ by at most ``2L/(lam n)`` (paper 002,
Prop 2.2; this needs ``L`` to be a true bound, as for :class:`~dpcvx.OutputPerturbation`), the
certified solve adds ``sqrt(2 alpha/lam)`` on each side, and ``w_loc = Pi_W(w~ + z)`` with
``z`` of density ``exp(-(epsilon/2) ||z|| / Delta_F)``, ``Delta_F = 2L/(lam n) +
2 sqrt(2 alpha/lam)``. Stage 2 is Algorithm 9 at ``epsilon/2`` over a net of
``W cap B(w_loc, R0)`` anchored at ``w_loc``. That net depends on ``w_loc``, a DP release, so
stage 2 is chosen adaptively (digest pitfall P7): given ``w_loc`` it is ``epsilon/2``-DP on
every dataset, and adaptive basic composition gives ``epsilon`` in total.

**Errata (digest section 7).** Erratum 16: the proof of Proposition G.1 says it "suffices to
show ``V <= 4LR``" but proves ``2LR``; the sampling constant ``epsilon/(4LR)``, i.e.
``epsilon/(2V)`` with ``V = 2LR``, is the right one and is the one used here. Proposition
G.2's proof drops the factor ``d`` of the tail radius; Algorithm 10 keeps it, and so does
``R0 = xi Delta_F d / (epsilon/2)`` here. The OCR prints ``p`` for ``d`` in
``xi = log(epsilon^2 mu R / (d L))``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from dpcvx._validation import (
    check_center,
    check_nonnegative,
    check_positive,
    check_pure_budget,
)
from dpcvx.errors import InvalidParameterError, SolverError
from dpcvx.mechanisms.base import PLAIN, ExtensionUse, OneEventPlan, Release
from dpcvx.mechanisms.em_pgm import (
    NetDistribution,
    _check_domain,
    _round_up_digits,
    exponential_log_probabilities,
    net_points,
    sample_index,
)
from dpcvx.mechanisms.noise import NoiseSpec
from dpcvx.mechanisms.output_perturbation_localize import (
    LocalizationPlan,
    localize,
    plan_localization,
)
from dpcvx.neighbors import REPLACE_ONE, NeighborRelation
from dpcvx.types import Guarantee, Sensitivity

__all__ = [
    "ExponentialMechanism",
    "ExponentialPlan",
    "LocalizedExponentialMechanism",
    "LocalizedExponentialPlan",
    "clipped_score_sensitivity",
    "clipped_scores",
    "localized_net",
]

#: the largest dimension accepted (the net is exponential in d)
MAX_DIMENSION = 3
#: unit roundoff of float64
_U = 2.0**-53
#: loss values per chunk (points x examples), to bound memory
_CHUNK_VALUES = 2_000_000

_FAILURE = (
    "dpcvx could not evaluate the exponential mechanism's scores on the net. Nothing was "
    "released and the whole budget stays spent. This message carries no data-dependent "
    "number, but the failure itself may depend on the data: do not retry on the same data "
    "without charging the budget again. To fix: check that the loss can be evaluated at every "
    "point of the domain, and rescale the data so that losses are of order one."
)


# -------------------------------------------------------------------------------- public pieces
def clipped_score_sensitivity(
    *, n: int, lipschitz: float, radius: float, regularization_bound: float
) -> float:
    """The clipped score's sensitivity ``2 L r / n`` plus a float64 rounding allowance,
    rounded up.

    Each clipped term lies in ``[-b_w, b_w]`` with the public ``b_w = L ||w - c|| <= L r`` and
    depends on its own example only, so the exact mean moves by at most ``2 L r / n`` between
    replace-one neighbors (paper 002, proof of Proposition G.1, with the ``1/n`` of the ERM
    form). The regularizer is computed from public numbers only, identically on both datasets.

    The allowance bounds twice the float64 error of one computed score and of its logit (generous
    constants), with ``u = 2^-53``, ``B = L r (1 + 4u)`` a bound on every computed clip bound
    and ``P = regularization_bound`` a bound on the computed regularizer: the mean of ``n``
    numbers of size ``<= B`` in any summation order (``2 (n + 8) u B``), the addition of the
    regularizer and the multiplication by ``epsilon / (2 Delta_s)`` (``8 u (B + P)``). Relative
    to ``2 L r / n`` it is about ``2.2e-16 n (n + 12 + 4 P / (L r))``: below ``3e-10`` for
    ``n <= 1000`` and ``P <= L r``, ``2.2e-6`` at ``n = 10^5`` (the summation bound holds in any
    order, so it grows like ``n^2 u``; it costs utility only).

    Parameters
    ----------
    n : int
        Number of examples (public).
    lipschitz : float
        ``L > 0``.
    radius : float
        ``r >= 0``: the largest distance of a net point from the anchor.
    regularization_bound : float
        ``P >= 0``: the largest computed regularizer ``(lam/2) ||w - w0||^2`` over the net.

    Returns
    -------
    float
        ``Delta_s``, positive.
    """
    owner = "clipped_score_sensitivity"
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or int(n) < 1:
        raise InvalidParameterError(
            f"The `n` parameter of `{owner}` must be a positive int. Got {n!r}."
        )
    n = int(n)
    L = check_positive(lipschitz, "lipschitz", owner)
    r = check_nonnegative(radius, "radius", owner)
    P = check_nonnegative(regularization_bound, "regularization_bound", owner)
    base = 2.0 * L * r / n
    B = L * r * (1.0 + 4.0 * _U)
    per_score = 2.0 * (n + 8) * _U * B + 8.0 * _U * (B + P)
    value = base * (1.0 + 8.0 * _U) + 2.0 * per_score
    return float(np.nextafter(value, math.inf))


def clipped_scores(
    values: np.ndarray, anchor_values: np.ndarray, bounds: np.ndarray, regularizer: np.ndarray
) -> np.ndarray:
    """``s(w_p) = (1/n) sum_i clip(values[p, i] - anchor_values[i], -bounds[p], bounds[p])
    + regularizer[p]`` for every row ``p`` (a NaN difference counts as 0; ``+-inf`` is clipped
    to ``+-bounds[p]``).

    Every clipped term is a function of its own example's two loss values and public numbers
    only, so this is the per-example map the sensitivity :func:`clipped_score_sensitivity`
    assumes. **Data-dependent** when the values are (tests and audits only).
    """
    V = np.asarray(values, float)
    a = np.asarray(anchor_values, float).reshape(1, -1)
    b = np.asarray(bounds, float).reshape(-1, 1)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = V - a
        diff = np.where(np.isnan(diff), 0.0, diff)
        clipped = np.minimum(np.maximum(diff, -b), b)
    return np.mean(clipped, axis=1) + np.asarray(regularizer, float).reshape(-1)


def localized_net(domain, center: np.ndarray, radius: float, spacing: float) -> np.ndarray:
    """The public net of ``W cap B(center, radius)`` (Algorithm 11's stage 2).

    A grid of spacing ``h <= spacing`` over the box ``[center - radius, center + radius]``
    intersected with the bounding box of ``W`` (coordinate extents from projections of far
    points, as :func:`~dpcvx.mechanisms.em_pgm.net_points` does), keeping the grid points that
    pass ``domain.contains`` and lie within ``radius`` of ``center``, plus ``center`` itself
    (which must lie in ``W``), so the net is never empty. It depends on ``domain``,
    ``center``, ``radius`` and ``spacing`` only: public once ``center`` is a DP release. Rows
    are sorted lexicographically.
    """
    _check_domain(domain)
    d = int(domain.d)
    h = check_positive(spacing, "spacing", "localized_net")
    R0 = check_positive(radius, "radius", "localized_net")
    w = np.asarray(center, float).reshape(d)
    c = np.asarray(domain.center, float)
    far = float(domain.diameter)
    axes = []
    for j in range(d):
        e = np.zeros(d)
        e[j] = far
        lo = max(float(w[j]) - R0, float(domain.project(c - e)[j]))
        hi = min(float(w[j]) + R0, float(domain.project(c + e)[j]))
        if not hi > lo:
            axes.append(np.array([float(w[j])]))
            continue
        K = max(1, math.ceil((hi - lo) / h * (1.0 - 1e-12)))
        axis = lo + (hi - lo) * (np.arange(K + 1) / K)
        axis[-1] = hi
        axes.append(axis)
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, d)
    near = grid[_distances(grid, w) <= R0]
    kept = [p for p in near if domain.contains(p)]
    kept.append(w)
    return np.unique(np.asarray(kept, float).reshape(-1, d), axis=0)


# -------------------------------------------------------------------------------- helpers
def _distances(points: np.ndarray, anchor: np.ndarray) -> np.ndarray:
    """``||w_p - c||`` for every row (the one computation the clip bounds and ``r`` share)."""
    return np.linalg.norm(np.asarray(points, float) - np.asarray(anchor, float)[None, :], axis=1)


def _regularizer(points: np.ndarray, lam: float, w0: np.ndarray) -> np.ndarray:
    """``(lam/2) ||w_p - w0||^2`` for every row (public)."""
    diff = np.asarray(points, float) - np.asarray(w0, float)[None, :]
    return 0.5 * lam * np.sum(diff * diff, axis=1)


def _check_count(value: object, name: str, owner: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < low:
        raise InvalidParameterError(
            f"`{name}` of `{owner}` must be an integer >= {low}. Got {value!r}."
        )
    return int(value)


def _check_dimension(d: int, owner: str) -> None:
    if not 1 <= int(d) <= MAX_DIMENSION:
        raise InvalidParameterError(
            f"`{owner}` (the exponential mechanism over a net, paper 002 Appendix G) costs "
            f"time exponential in d and is a reference route for d <= {MAX_DIMENSION} only. "
            f"Got d = {d}. Use OutputPerturbation (polynomial time) in higher dimensions."
        )


def _check_supported(domain, owner: str) -> None:
    """em_pgm's domain check, with this mechanism's name in the message."""
    try:
        _check_domain(domain)
    except InvalidParameterError:
        raise InvalidParameterError(
            f"`{owner}` builds its net from the exact Euclidean projection onto W: it needs "
            "an l2 ball, a box or an l1 ball (dpcvx.domains.l2_ball / box / linf_ball / "
            f"l1_ball). Got a domain of kind {getattr(domain, 'kind', None)!r}. Use one of "
            "those domains (an interval is `dpcvx.domains.box(w, lo, hi)`), or "
            "OutputPerturbation."
        ) from None


def _grid_spacing(
    spacing: float | None, extent: float, d: int, max_points: int, reserve: int, owner: str
) -> tuple[float, int]:
    """``(h, bound)``: the grid spacing and the public bound ``(ceil(extent/h) + 1)^d +
    reserve`` on the number of net points. Default ``h``: the finest uniform spacing whose
    bound is at most ``max_points``; a user's spacing above the cap is refused with the
    coarsest acceptable value."""
    cap = max_points - reserve
    side = max(1, int(cap ** (1.0 / d)))  # points per axis: the largest side^d <= cap
    while (side + 1) ** d <= cap:
        side += 1
    while side > 1 and side**d > cap:
        side -= 1
    if side < 2:
        raise InvalidParameterError(
            f"`max_points` = {max_points} of `{owner}` leaves no room for a grid with two "
            f"points per axis in d = {d}: raise `max_points` to at least {2**d + reserve}."
        )
    finest = extent / (side - 1) * (1.0 + 1e-9)
    h = finest if spacing is None else spacing
    per_axis = extent / h
    bound = math.inf if per_axis > 1e15 else (math.ceil(per_axis) + 1) ** d + reserve
    if bound > max_points:
        coarsest = _round_up_digits(finest, 6)
        raise InvalidParameterError(
            f"The net of `{owner}` at spacing {h:.6g} may have up to {bound:.3g} points over "
            f"a box of side {extent:.6g} in d = {d}, above max_points = {max_points}. The "
            "exponential mechanism over a net is exponential in d and meant for small "
            f"reference problems: pass a coarser public `spacing` (at least {coarsest:.6g}; "
            "this costs utility only), omit it (the finest spacing that fits), or raise "
            "`max_points`."
        )
    return float(h), int(bound)


def _net_scores(
    context, points: np.ndarray, anchor: np.ndarray, bounds: np.ndarray, regularizer: np.ndarray
) -> np.ndarray:
    """The clipped scores of every net point from ``context.loss_values`` (data-dependent)."""
    anchor_values = np.asarray(context.loss_values(anchor[None, :]), float).reshape(-1)
    n = max(anchor_values.size, 1)
    chunk = max(1, _CHUNK_VALUES // n)
    out = np.empty(points.shape[0])
    for start in range(0, points.shape[0], chunk):
        stop = start + chunk
        values = np.asarray(context.loss_values(points[start:stop]), float)
        out[start:stop] = clipped_scores(
            values, anchor_values, bounds[start:stop], regularizer[start:stop]
        )
    return out


def _log_probabilities(scores: np.ndarray, epsilon: float, sensitivity: float) -> np.ndarray:
    if scores.size == 1:  # one point: released with probability 1, whatever the data
        return np.zeros(1)
    return exponential_log_probabilities(scores, epsilon, sensitivity)


# -------------------------------------------------------------------------------- records
@dataclass(frozen=True, slots=True, kw_only=True)
class ExponentialPlan(OneEventPlan):
    """Everything an :class:`ExponentialMechanism` release uses, fixed from public quantities
    (including the public net) before any data is touched."""

    guarantee: Guarantee
    n: int
    d: int
    lipschitz: float  # L
    regularization: float  # lam
    center: np.ndarray  # w0
    anchor: np.ndarray  # c
    spacing: float  # upper bound on the grid spacing h
    net: np.ndarray  # the public net, (N, d), read-only
    radius: float  # r = max ||w - c|| over the net
    sensitivity: Sensitivity  # Delta_s = 2 L r / n + rounding allowance
    net_bound: int  # public upper bound on the number of net points
    detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    ledger_detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalizedExponentialPlan(OneEventPlan):
    """Everything a :class:`LocalizedExponentialMechanism` release uses that can be fixed
    before any data is touched: stage 1 is Algorithm 10's own plan at ``epsilon/2``
    (:class:`~dpcvx.mechanisms.output_perturbation_localize.LocalizationPlan`); the stage-2 net
    and its radius follow from the public ``w_loc`` at release."""

    guarantee: Guarantee  # the whole release: epsilon
    stage_epsilon: float  # epsilon / 2 for each stage
    n: int
    d: int
    lipschitz: float  # L
    regularization: float  # lam (the objective's strong convexity)
    center: np.ndarray  # w0
    localization: LocalizationPlan  # stage 1: Algorithm 10 at epsilon / 2
    spacing: float  # upper bound on the stage-2 grid spacing
    net_bound: int  # public upper bound on the number of stage-2 net points
    detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    ledger_detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    @property
    def accuracy(self) -> float:
        """``alpha`` of the stage-1 certified solve."""
        return self.localization.accuracy

    @property
    def base_sensitivity(self) -> float:
        """``2 L / (lam n)``."""
        return self.localization.base_sensitivity

    @property
    def localization_sensitivity(self) -> Sensitivity:
        """``Delta_F = 2L/(lam n) + 2 sqrt(2 alpha/lam)``, rounded up."""
        return self.localization.sensitivity

    @property
    def noise(self) -> NoiseSpec:
        """Stage 1's noise, at ``epsilon / 2``."""
        return self.localization.noise

    @property
    def xi(self) -> float:
        """The radius shrinkage."""
        return self.localization.xi

    @property
    def domain_radius(self) -> float:
        """``R = D / 2``."""
        return self.localization.domain_radius

    @property
    def radius(self) -> float:
        """``R0 = xi Delta_F d / (epsilon/2)``, rounded up."""
        return self.localization.radius


# -------------------------------------------------------------------------------- Algorithm 9
@dataclass(frozen=True, slots=True, kw_only=True)
class ExponentialMechanism:
    """Paper 002's exponential mechanism ``A_exp`` (Appendix G, Algorithm 9) over a public
    finite net, with clipped scores: exactly pure epsilon-DP. **Exponential in d: a
    reference route for d <= 3 only.**

    Parameters
    ----------
    lipschitz : float
        ``L > 0``: a public bound on every possible example's Lipschitz constant on the
        domain. Privacy does not depend on it being true (the scores are clipped to it);
        utility does.
    regularization : float
        ``lam >= 0`` (default 0): the score targets
        ``(1/n) sum_i f(w, z_i) + (lam/2) ||w - w0||^2``.
    center : array-like, optional
        ``w0``; default the center of the domain's bounding ball.
    spacing : float, optional
        Largest grid spacing of the net; default the finest uniform spacing whose public
        bound ``(ceil(D/h) + 1)^d`` is at most ``max_points``. A coarser public value costs
        utility only.
    max_points : int
        Refuse (before anything is spent) when the net may have more points (at least 4).
        Default 10000.

    Notes
    -----
    Guarantee: pure epsilon-DP, replace-one neighbors, public n, on **every** dataset
    (``delta`` must be 0), whether or not ``L`` is a true Lipschitz bound. One ledger event
    ``epsilon``.

    The score of a net point ``w`` is ``s_Z(w) = (1/n) sum_i clip(f(w, z_i) - f(c, z_i),
    -L ||w - c||, L ||w - c||) + (lam/2) ||w - w0||^2`` with the public anchor ``c`` (the
    domain's center made feasible). Its sensitivity is ``2 L r / n`` with ``r`` the largest
    distance of the public net from ``c`` (paper 002, Proposition G.1: the variation of the
    anchored objective is ``2LR``, divided by ``n`` for the ERM form), plus a float64
    allowance (:func:`clipped_score_sensitivity`). The point is drawn with probability
    proportional to ``exp(-epsilon s_Z(w) / (2 Delta_s))``: the paper's
    ``exp(-epsilon F / (4 L R))`` restricted to the net. Erratum 16 of the digest applies: the
    proof's "``V <= 4LR``" should read ``2LR``; the constant ``epsilon/(2V)`` is the right one.

    Why a net: the paper's continuous density has no exact sampler, and an approximate one
    (MCMC, a grid sampled as if it were the continuous density) breaks pure DP (digest
    pitfall P9). Over a finite public net the exponential mechanism is exact: the
    probabilities are computed in closed form and one index is drawn exactly, by the
    Gumbel-max of the log-probabilities decided with interval arithmetic
    (:func:`~dpcvx.mechanisms.sampling.sample_index`): no float inverse CDF, so no mass is
    dropped and the draw is not exposed to the attacks on textbook float implementations
    (Mironov 2012; Ilvento 2020). The log-probabilities themselves are float computations of
    the scores, covered by the sensitivity's rounding allowance.

    Utility (Theorem G.1, ``[BST14, Thm 3.2]``): the continuous mechanism has expected excess
    risk ``O(L R d / (epsilon n))``; the net adds at most ``(L + lam (D + ||w0 - c||)) h
    sqrt(d) / 2`` (every point of W is within ``h sqrt(d)/2`` of the net).

    Requirements checked before the budget is reserved: ``d <= 3``; the domain is an l2 ball,
    a box or an l1 ball (the net uses the exact projection); the net bound is at most
    ``max_points``.

    Examples
    --------
    >>> import cvxpy as cp, numpy as np, dpcvx
    >>> from dpcvx.mechanisms.exponential import ExponentialMechanism
    >>> w = cp.Variable(1); z = cp.Parameter()
    >>> problem = dpcvx.Problem(cp.abs(w[0] - z), w, data={z: np.linspace(-.5, .5, 21)},
    ...                         domain=dpcvx.domains.box(w, -1.0, 1.0))
    >>> res = problem.solve_private(ExponentialMechanism(lipschitz=1.0, spacing=0.01),
    ...                             epsilon=1.0, rng=0)
    >>> bool(abs(res.w[0]) <= 1), res.detail["net_size"]
    (True, 201)
    """

    lipschitz: float
    regularization: float = 0.0
    center: Any = None
    spacing: float | None = None
    max_points: int = 10_000
    #: what the release needs from the data source (checked before anything is spent)
    #: loss values only (the net's projections are the public domain's own)
    requirements: ClassVar[tuple[str, ...]] = ("loss_values",)
    #: works on the problem's own loss (no Lipschitz-extension template)
    extension: ClassVar[ExtensionUse] = PLAIN
    enforces_lipschitz: ClassVar[bool] = False
    neighbors: ClassVar[NeighborRelation] = REPLACE_ONE

    def __post_init__(self) -> None:
        owner = "ExponentialMechanism"
        object.__setattr__(self, "lipschitz", check_positive(self.lipschitz, "lipschitz", owner))
        object.__setattr__(
            self, "regularization", check_nonnegative(self.regularization, "regularization", owner)
        )
        object.__setattr__(self, "center", check_center(self.center, owner))
        if self.spacing is not None:
            object.__setattr__(self, "spacing", check_positive(self.spacing, "spacing", owner))
        object.__setattr__(
            self, "max_points", _check_count(self.max_points, "max_points", owner, 4)
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
    ) -> ExponentialPlan:
        """The net, the anchor, the net radius and the score's sensitivity, from public
        quantities only. ``domain`` is required: the net is built from it (public)."""
        owner = "ExponentialMechanism"
        epsilon = check_pure_budget(epsilon, delta, owner)
        _check_dimension(d, owner)
        if domain is None:
            raise InvalidParameterError(
                f"`{owner}.plan` needs the public `domain` to build its net (the score's "
                "sensitivity 2 L r / n uses the net's radius r). Got domain=None. Pass "
                "`domain=problem.domain`; `Problem.solve_private` does this for you."
            )
        _check_supported(domain, owner)
        if int(domain.d) != int(d):
            raise InvalidParameterError(
                f"The `domain` given to `{owner}.plan` has dimension {domain.d}, not d = {d}."
            )
        n = int(n)
        D = check_positive(diameter, "diameter", owner)
        c = np.asarray(center, float).reshape(-1)
        w0 = c if self.center is None else self.center
        if w0.shape != (d,):
            raise InvalidParameterError(
                f"The `center` of `{owner}` must have shape ({d},). Got {w0.shape}."
            )
        h, bound = _grid_spacing(self.spacing, D, d, self.max_points, 0, owner)
        net = np.ascontiguousarray(net_points(domain, h))
        net.flags.writeable = False
        anchor = np.asarray(domain.make_feasible(np.asarray(domain.center, float)), float)
        anchor.flags.writeable = False
        L, lam = self.lipschitz, self.regularization
        r = float(np.max(_distances(net, anchor)))
        P = float(np.max(_regularizer(net, lam, w0)))
        delta_s = clipped_score_sensitivity(n=n, lipschitz=L, radius=r, regularization_bound=P)
        common = {
            "paper": "002 App G (Alg 9, Prop G.1, Thm G.1; erratum 16: variation 2LR)",
            "lipschitz": L,
            "regularization": lam,
            "spacing": h,
            "net_bound": bound,
            "net_radius": r,
            "sensitivity": delta_s,
            "coefficient": epsilon / (2.0 * delta_s),
            "reference_only": f"time exponential in d; d <= {MAX_DIMENSION}",
        }
        detail = dict(common)
        detail.update(
            {
                "mechanism": "ExponentialMechanism",
                "center": tuple(float(v) for v in w0),
                "anchor": tuple(float(v) for v in anchor),
                "base_sensitivity": 2.0 * L * r / n,
            }
        )
        ledger = dict(common)
        ledger["composition"] = "one exponential mechanism over a public finite net"
        return ExponentialPlan(
            guarantee=Guarantee(epsilon=epsilon, delta=0.0),
            n=n,
            d=d,
            lipschitz=L,
            regularization=lam,
            center=np.asarray(w0, float).copy(),
            anchor=anchor,
            spacing=h,
            net=net,
            radius=r,
            sensitivity=Sensitivity(value=delta_s, norm="l2"),
            net_bound=bound,
            detail=MappingProxyType(detail),
            ledger_detail=MappingProxyType(ledger),
        )

    # ------------------------------------------------------------------ data access
    def scores(self, plan: ExponentialPlan, context) -> np.ndarray:
        """``s_Z(w)`` at every net point (``context`` offers ``loss_values``).

        **Data-dependent** (tests and audits only)."""
        bounds = plan.lipschitz * np.minimum(_distances(plan.net, plan.anchor), plan.radius)
        reg = _regularizer(plan.net, plan.regularization, plan.center)
        return _net_scores(context, plan.net, plan.anchor, bounds, reg)

    def distribution(self, plan: ExponentialPlan, context) -> NetDistribution:
        """The exact output distribution of a release over the net (``context`` is a
        :class:`dpcvx.problem.ReleaseContext` or anything with ``loss_values``).

        **Data-dependent: for tests and privacy audits only**, never to be released."""
        s = self.scores(plan, context)
        logp = _log_probabilities(s, plan.guarantee.epsilon, plan.sensitivity.value)
        return NetDistribution(points=plan.net, scores=s, log_probabilities=logp)

    # ------------------------------------------------------------------ release
    def release(self, plan: ExponentialPlan, context: Any, rng: np.random.Generator) -> Release:
        """Sample the net point (``context`` is :class:`dpcvx.problem.ReleaseContext`).
        Returns the released point, no certificates (nothing is solved), and public detail."""
        _check_supported(context.domain, "ExponentialMechanism")  # public, before the data
        try:
            dist = self.distribution(plan, context)
            index = sample_index(dist.log_probabilities, rng)
            w = np.asarray(dist.points[index], float).copy()
        except Exception:  # noqa: BLE001 - nothing data-dependent may leave a private release
            raise SolverError(_FAILURE) from None
        return Release(w, (), MappingProxyType({"net_size": int(plan.net.shape[0])}))


# -------------------------------------------------------------------------------- Algorithm 11
@dataclass(frozen=True, slots=True, kw_only=True)
class LocalizedExponentialMechanism:
    """Paper 002's exponential sampling with localization (Appendix G, Algorithm 11):
    Algorithm 10 at ``epsilon/2``, then :class:`ExponentialMechanism`'s sampler at
    ``epsilon/2`` over a net of the localized set. **Exponential in d: d <= 3 only.**

    Parameters
    ----------
    lipschitz : float
        ``L > 0``: a bound on every possible example's Lipschitz constant on the domain. Stage
        1 (output perturbation) is private only if it is true, as for
        :class:`~dpcvx.OutputPerturbation`; stage 2 clips to it and is private regardless.
    regularization : float
        ``lam > 0``: the strong convexity ``mu`` of ``F(w) = (1/n) sum_i f(w, z_i) +
        (lam/2) ||w - w0||^2``, from the public regularizer.
    center : array-like, optional
        ``w0``; default the center of the domain's bounding ball.
    accuracy : float, optional
        ``alpha``, the stage-1 certified accuracy (public); default such that
        ``2 sqrt(2 alpha / lam)`` is 5% of ``2L/(lam n)``, floored at ``1e-9 (1 + L D)``.
    xi : float, optional
        The radius shrinkage ``xi > 0`` (public); default Algorithm 11's
        ``log(epsilon^2 lam R / (d L))`` with ``R = D/2``.
    spacing : float, optional
        Largest grid spacing of the stage-2 net; default the finest uniform spacing whose
        public bound ``(ceil(min(2 R0, D)/h) + 1)^d + 1`` is at most ``max_points``.
    max_points : int
        Refuse (before anything is spent) when the stage-2 net may have more points (at
        least 4). Default 10000.
    solver : str, optional
        First solver of the refinement ladder of the stage-1 solve.

    Notes
    -----
    Guarantee: pure epsilon-DP, replace-one neighbors, public n (``delta`` must be 0),
    provided ``L`` bounds every example's Lipschitz constant on W. One ledger event
    ``epsilon``: ``epsilon/2`` localization + ``epsilon/2`` exponential mechanism, by basic
    composition (paper 002, Algorithm 11 and the sentence after it).

    1. **Localization (Algorithm 10, budget epsilon/2).** Exactly
       :class:`~dpcvx.mechanisms.output_perturbation_localize.OutputPerturbationLocalize`'s
       plan and release at ``epsilon/2`` (``plan.localization``; the module's
       ``plan_localization`` and ``localize``), with Algorithm 11's default ``xi`` from the
       whole ``epsilon``. Certified solve of ``min_W F`` to
       accuracy ``alpha``; ``w_loc = Pi_W(w~ + z)`` with ``z`` of density
       ``exp(-(epsilon/2) ||z|| / Delta_F)``, ``Delta_F = 2L/(lam n) + 2 sqrt(2 alpha/lam)``
       (paper 002, Prop 2.2 and Prop 3.1: the certified point is within ``sqrt(2 alpha /
       lam)`` of the minimizer on each dataset). The localized set is
       ``W0 = W cap B(w_loc, R0)``, ``R0 = xi Delta_F d / (epsilon/2)`` (Algorithm 10 keeps
       the factor ``d`` that Prop G.2's proof drops, erratum 16).
    2. **Exponential mechanism on W0 (Algorithm 9, budget epsilon/2).** The net of ``W0``
       (:func:`localized_net`), anchor ``c = w_loc`` and ``r`` the largest distance of the
       net from ``w_loc`` (at most ``R0``); scores and sampler as in
       :class:`ExponentialMechanism`. The net depends on ``w_loc``: stage 2 is chosen after
       seeing a DP release, which adaptive composition allows (digest pitfall P7: projecting
       onto, or sampling from, a data-dependent set is private only when that set is itself
       charged to the budget, as here).

    Proposition G.2 assumes ``d lam R >= 2L`` and ``epsilon > d``; then
    ``xi = log(epsilon^2 lam R/(d L)) > 0`` and the expected excess risk is
    ``O((L^2/lam) (d/epsilon)^2 log(epsilon^2 lam R/(d L)))`` (with ``n`` in the ERM form).
    When the default ``xi`` is not positive the plan refuses before anything is spent: use
    :class:`ExponentialMechanism` (no localization) or pass a public ``xi``. ``W0`` contains
    the minimizer with probability at least ``1 - d e^-xi`` (a Gamma tail, [CMS11, Lemma 17];
    utility only).

    Examples
    --------
    >>> import cvxpy as cp, numpy as np, dpcvx
    >>> from dpcvx.mechanisms.exponential import LocalizedExponentialMechanism
    >>> w = cp.Variable(1); z = cp.Parameter()
    >>> problem = dpcvx.Problem(cp.abs(w[0] - z), w, data={z: np.linspace(-.5, .5, 41)},
    ...                         domain=dpcvx.domains.box(w, -1.0, 1.0))
    >>> mech = LocalizedExponentialMechanism(lipschitz=1.0, regularization=1.0, spacing=0.001)
    >>> res = problem.solve_private(mech, epsilon=4.0, rng=0)
    >>> w_loc, R0 = np.array(res.detail["localization_center"]), res.detail["localization_radius"]
    >>> bool(np.linalg.norm(res.w - w_loc) <= R0 and abs(res.w[0]) <= 1)
    True
    """

    lipschitz: float
    regularization: float
    center: Any = None
    accuracy: float | None = None
    xi: float | None = None
    spacing: float | None = None
    max_points: int = 10_000
    solver: str | None = None
    #: a certified solve (stage 1), loss values (stage 2) and the public projection
    requirements: ClassVar[tuple[str, ...]] = ("solver", "loss_values", "project")
    #: works on the problem's own loss (no Lipschitz-extension template)
    extension: ClassVar[ExtensionUse] = PLAIN
    enforces_lipschitz: ClassVar[bool] = False
    neighbors: ClassVar[NeighborRelation] = REPLACE_ONE

    def __post_init__(self) -> None:
        owner = "LocalizedExponentialMechanism"
        for name in ("lipschitz", "regularization"):
            object.__setattr__(self, name, check_positive(getattr(self, name), name, owner))
        for name in ("accuracy", "xi", "spacing"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, check_positive(value, name, owner))
        object.__setattr__(self, "center", check_center(self.center, owner))
        object.__setattr__(
            self, "max_points", _check_count(self.max_points, "max_points", owner, 4)
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
    ) -> LocalizedExponentialPlan:
        """Stage 1's accuracy, sensitivity and noise, ``xi``, ``R0`` and the stage-2 net
        spacing and bound, from public quantities only. ``domain`` (optional) is checked
        too."""
        owner = "LocalizedExponentialMechanism"
        epsilon = check_pure_budget(epsilon, delta, owner)
        _check_dimension(d, owner)
        if domain is not None:
            _check_supported(domain, owner)
        n = int(n)
        D = check_positive(diameter, "diameter", owner)
        c = np.asarray(center, float).reshape(-1)
        w0 = c if self.center is None else self.center
        if w0.shape != (d,):
            raise InvalidParameterError(
                f"The `center` of `{owner}` must have shape ({d},). Got {w0.shape}."
            )
        L, lam, half = self.lipschitz, self.regularization, epsilon / 2.0
        # stage 1 is Algorithm 10 itself at epsilon/2, with Algorithm 11's default xi (from
        # the whole budget epsilon)
        loc = plan_localization(
            owner,
            lipschitz=L,
            regularization=lam,
            center=w0,
            n=n,
            d=d,
            diameter=D,
            epsilon=half,
            xi_epsilon=epsilon,
            accuracy=self.accuracy,
            xi=self.xi,
            fallback="Use ExponentialMechanism (no localization), or ",
        )
        alpha, base, delta_F, noise = (
            loc.accuracy,
            loc.base_sensitivity,
            loc.sensitivity.value,
            loc.noise,
        )
        xi, xi_source, R0, R = loc.xi, loc.detail["xi_source"], loc.radius, loc.domain_radius
        extent = min(2.0 * R0, D)
        h, bound = _grid_spacing(self.spacing, extent, d, self.max_points, 1, owner)
        split = "epsilon/2 localization + epsilon/2 exponential mechanism (basic composition)"
        adaptive = (
            "the stage-2 net W cap B(w_loc, R0) depends on the stage-1 release w_loc "
            "(adaptive composition, digest P7)"
        )
        common = {
            "paper": "002 App G (Alg 11 = Alg 10 + Alg 9; Prop G.1, G.2; erratum 16)",
            "lipschitz": L,
            "regularization": lam,
            "accuracy": alpha,
            "localization_sensitivity": delta_F,
            "noise": noise.kind,
            "noise_scale": noise.scale,
            "xi": xi,
            "localization_radius": R0,
            "spacing": h,
            "net_bound": bound,
            "reference_only": f"time exponential in d; d <= {MAX_DIMENSION}",
        }
        detail = dict(common)
        detail.update(
            {
                "mechanism": "LocalizedExponentialMechanism",
                "center": tuple(float(v) for v in w0),
                "base_sensitivity": base,
                "xi_source": xi_source,
                "domain_radius": R,
                # 2 L r / n with r <= min(R0, D), before the float64 allowance
                "score_sensitivity_bound": 2.0 * L * min(R0, D) / n,
                "stage_epsilon": half,
                "composition": split,
            }
        )
        ledger = dict(common)
        ledger.update({"composition": split, "adaptive": adaptive})
        return LocalizedExponentialPlan(
            guarantee=Guarantee(epsilon=epsilon, delta=0.0),
            stage_epsilon=half,
            n=n,
            d=d,
            lipschitz=L,
            regularization=lam,
            center=np.asarray(w0, float).copy(),
            localization=loc,
            spacing=h,
            net_bound=bound,
            detail=MappingProxyType(detail),
            ledger_detail=MappingProxyType(ledger),
        )

    # ------------------------------------------------------------------ stage 2 pieces
    @staticmethod
    def _local_setup(plan: LocalizedExponentialPlan, domain, w_loc: np.ndarray):
        """Stage 2's public pieces given the public ``w_loc``: the net, the clip bounds
        ``L ||w - w_loc||``, the net radius ``r``, the regularizer and ``Delta_s``."""
        net = localized_net(domain, w_loc, plan.radius, plan.spacing)
        dist = _distances(net, w_loc)
        r = float(np.max(dist))
        reg = _regularizer(net, plan.regularization, plan.center)
        delta_s = 0.0
        if net.shape[0] > 1:
            delta_s = clipped_score_sensitivity(
                n=plan.n,
                lipschitz=plan.lipschitz,
                radius=r,
                regularization_bound=float(np.max(reg)),
            )
        return net, plan.lipschitz * np.minimum(dist, r), r, reg, delta_s

    @staticmethod
    def _local_distribution(plan, context, w_loc, setup) -> NetDistribution:
        net, bounds, _, reg, delta_s = setup
        if net.shape[0] == 1:  # only w_loc: nothing data-dependent to draw
            return NetDistribution(points=net, scores=np.zeros(1), log_probabilities=np.zeros(1))
        s = _net_scores(context, net, w_loc, bounds, reg)
        logp = _log_probabilities(s, plan.stage_epsilon, delta_s)
        return NetDistribution(points=net, scores=s, log_probabilities=logp)

    def local_distribution(
        self, plan: LocalizedExponentialPlan, context, localization_center: np.ndarray
    ) -> NetDistribution:
        """Stage 2's exact output distribution given the (public) ``w_loc``: the clipped
        exponential mechanism at ``epsilon/2`` over :func:`localized_net`, anchored at
        ``w_loc`` (``context`` offers ``domain`` and ``loss_values``).

        **Data-dependent: for tests and privacy audits only**, never to be released."""
        w_loc = np.asarray(localization_center, float).reshape(plan.d)
        setup = self._local_setup(plan, context.domain, w_loc)
        return self._local_distribution(plan, context, w_loc, setup)

    # ------------------------------------------------------------------ release
    def release(
        self, plan: LocalizedExponentialPlan, context: Any, rng: np.random.Generator
    ) -> Release:
        """Localize (certified solve, noise, projection), then sample the localized net.
        Returns the released point, the public certificate of the stage-1 solve and public
        detail (``w_loc``, ``R0``, ``xi``, the net's size and radius, the stage-2 score
        sensitivity)."""
        owner = "LocalizedExponentialMechanism"
        domain = context.domain
        _check_supported(domain, owner)  # public, before the data is touched
        # stage 1: Algorithm 10 at epsilon/2 (a failed solve raises dpcvx's fixed-text
        # CertificationError); the noise and the projection are the localization's own
        w_loc, public = localize(
            plan.localization,
            context.solver(),
            context.project,
            rng,
            f"{domain.kind} (stage 1: localization)",
        )
        w_loc = w_loc.reshape(plan.d)
        # stage 2 (Algorithm 9 at epsilon/2 on W cap B(w_loc, R0)): everything but the scores
        # is a function of the public w_loc
        setup = self._local_setup(plan, domain, w_loc)
        net, _, r, _, delta_s = setup
        try:
            dist = self._local_distribution(plan, context, w_loc, setup)
            index = sample_index(dist.log_probabilities, rng)
            w = np.asarray(dist.points[index], float).copy()
        except Exception:  # noqa: BLE001 - nothing data-dependent may leave a private release
            raise SolverError(_FAILURE) from None
        extra = {
            "localization_center": tuple(float(v) for v in w_loc),
            "localization_radius": plan.radius,
            "xi": plan.xi,
            "net_size": int(net.shape[0]),
            "net_radius": r,
            "score_sensitivity": delta_s,
        }
        return Release(w, (public,), MappingProxyType(extra))
