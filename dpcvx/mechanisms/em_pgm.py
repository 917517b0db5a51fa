"""The exponential mechanism over a net with a projected-gradient score (EM-PGM, paper 000,
Appendix E: Algorithm 5 / Theorem E.1, and its smoothed nonsmooth variant, Section E.2 /
Proposition E.4), with the public step size of erratum E6.

**A reference route, exponential in d.** The net has about ``(D / h)^d`` points and every point
costs ``n`` loss evaluations per quadrature node, so the mechanism accepts only ``d <= 2``. It
exists to check the main algorithm (:class:`~dpcvx.LocalizedDoubleOutputPerturbation`) against
an independent pure epsilon-DP route on small problems, not for production use.

Symbols (as in the code; ``docs/em_pgm.md`` has the derivation):

- ``W`` the public domain (an l2 ball, a box or an l1 ball: ``Pi_W`` must be an exact Euclidean
  projection, because the sensitivity argument uses that it is nonexpansive), ``D`` its
  diameter bound, ``n`` the number of examples, ``d in {1, 2}``.
- ``tau`` (``smoothing``): the radius of the ball smoothing ``f^tau(w, z) = E_U f(w + tau U, z)``,
  ``U`` uniform on the unit ball (default ``D / sqrt(n)``, Theorem E.5).
- per-example gradient, from loss *values* only: ``grad f^tau(w, z) = (d / tau) E_V[f(w + tau V,
  z) V]`` with ``V`` uniform on the unit sphere. For ``d = 1`` this is exactly
  ``(f(w + tau) - f(w - tau)) / (2 tau)``; for ``d = 2`` it is computed with the fixed
  ``M``-node trapezoidal rule on the circle (``quadrature_nodes``; antipodal pairs, so
  ``(2 / (tau M)) sum_{j < M/2} (f(w + tau u_j) - f(w - tau u_j)) u_j``), which is exact for
  quadratic losses and converges like ``M^-2`` for piecewise-linear ones.
- ``g_{C,Z}(w) = (1/n) sum_i clip_C(grad_i(w))`` with ``clip_C(v) = v min(1, C/||v||)`` (a
  non-finite per-example gradient counts as 0: still a fixed per-example map of norm ``<= C``).
- ``Hbar`` (``smoothness``): a public smoothness bound; ``gamma = 1 / (lam + Hbar)``. Either the
  user's ``H`` (smooth case, Theorem E.1) or, from a public second moment ``G_2`` and a failure
  probability ``rho`` (``smoothness_failure``), ``Hbar = d G_2 sqrt(n / rho) / tau`` (the bound
  (29) of Section E.2, which holds for the data with probability ``>= 1 - rho``).
- score ``s_Z(w) = (1/gamma) ||w - Pi_W(w - gamma (g_{C,Z}(w) + lam (w - w0)))||``.
- the net: a public grid of spacing ``h <= spacing`` over the bounding box of ``W``; grid points in
  ``W`` are kept, a grid point outside ``W`` is replaced by its projection when it lies within
  half a cell diagonal of ``W`` (so the boundary of ``W``, and both endpoints of an interval, are
  in the net). Every point of ``W`` is within ``h sqrt(d) / 2 <= spacing`` of the net. Default
  spacing: the paper's ``eta = C d / (epsilon n (lam + Hbar))``.
- release ``w_hat`` from the net with probability proportional to
  ``exp(-epsilon s_Z(w) / (2 Delta))``, exactly (log-sum-exp, then the inverse CDF of one uniform
  draw from the mechanism's generator).

**Privacy (pure epsilon-DP, replace-one neighbors, public n).** For every fixed ``w`` and
neighbors ``Z, Z'``, each clipped per-example gradient has norm at most ``C`` and depends on its
own example only, so ``||g_{C,Z}(w) - g_{C,Z'}(w)|| <= 2C/n``. With the *same* ``gamma`` on both
datasets, ``Pi_W`` nonexpansive and the outer ``1/gamma`` cancelling the inner ``gamma``,
``|s_Z(w) - s_{Z'}(w)| <= (1/gamma) ||Pi_W(a) - Pi_W(a')|| <= ||g_{C,Z}(w) - g_{C,Z'}(w)|| <=
2C/n`` (paper 000, proof of Theorem E.1). ``Delta`` is ``2C/n`` plus a float64 rounding
allowance (:func:`score_sensitivity`; below 2e-9 relative in every configuration the tests
use). The exponential mechanism with weights ``exp(-epsilon s / (2 Delta))`` over a public
finite set is epsilon-DP: the weight of each point moves by a factor ``<= e^(epsilon/2)`` and
the normalizer by another ``e^(epsilon/2)``. Neither the smoothing, nor the quadrature, nor
the loss's true smoothness enters this argument: only ``C``, ``gamma`` and the net, which are
public.

**Erratum E6.** Proposition E.4 prints ``gamma = 1 / (lam + H_Z^tau)`` with ``H_Z^tau`` the
smoothness of the *data's* smoothed loss: a data-dependent step size. The argument above needs
one ``gamma`` for both neighbors; with different ``gamma`` the scores are not ``2C/n``-close
(the digest's counterexample: identical clipped gradients, max log-ratio 7.90 at epsilon = 1).
Here ``gamma`` is always computed from public numbers (``Hbar``). A wrong ``Hbar`` (or ``H``)
costs utility only.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from scipy.special import logsumexp

from dpcvx._validation import (
    check_center,
    check_nonnegative,
    check_positive,
    check_pure_budget,
)
from dpcvx.errors import InvalidParameterError, SolverError
from dpcvx.mechanisms.base import PLAIN, ExtensionUse, OneEventPlan, Release
from dpcvx.mechanisms.sampling import sample_index as exact_index
from dpcvx.neighbors import REPLACE_ONE, NeighborRelation
from dpcvx.types import Guarantee, Sensitivity

__all__ = [
    "ExponentialMechanismPlan",
    "NetDistribution",
    "ProjectedGradientExponentialMechanism",
    "check_net_domain",
    "exponential_log_probabilities",
    "net_points",
    "sample_index",
    "score_sensitivity",
    "smoothing_directions",
]

_OWNER = "ProjectedGradientExponentialMechanism"
#: domain kinds with an exact (nonexpansive) Euclidean projection in dpcvx
SUPPORTED_DOMAINS = ("l2_ball", "box", "l1_ball")
#: unit roundoff of float64
_U = 2.0**-53
#: loss evaluations per chunk (points x nodes x examples), to bound memory
_CHUNK_VALUES = 2_000_000

_FAILURE = (
    "dpcvx could not evaluate the EM-PGM scores on the net. Nothing was released and the whole "
    "budget stays spent. This message carries no data-dependent number, but the failure itself "
    "may depend on the data: do not retry on the same data without charging the budget again. "
    "To fix: check that the loss can be evaluated at every point within `smoothing` of the "
    "domain, and rescale the data so that losses are of order one."
)


# -------------------------------------------------------------------------------- public pieces
def score_sensitivity(
    *,
    n: int,
    C: float,
    regularization: float,
    step_size: float,
    center: np.ndarray,
    regularization_center: np.ndarray,
    diameter: float,
) -> float:
    """The score's sensitivity ``Delta = 2C/n`` plus a float64 rounding allowance, rounded up.

    Paper 000, proof of Theorem E.1: ``|s_Z(w) - s_{Z'}(w)| <= ||g_{C,Z}(w) - g_{C,Z'}(w)|| <=
    2C/n`` for replace-one neighbors, any ``w`` and any public ``gamma`` (``step_size``).

    The allowance bounds twice the float64 error of one computed score (generous constants):
    the mean of ``n`` clipped vectors (``2 (n + 8) u C``), then ``v = g + lam (w - w0)``,
    ``w - gamma v``, the projection, the difference and the division by ``gamma``
    (``32 u (B_v + 4 B_w / gamma)``), with ``u = 2^-53``, ``B_w = ||center|| + D`` a bound on
    every net point and its projection and ``B_v = C + lam (B_w + ||w0||)`` a bound on ``||v||``.
    It is public and tiny: relative to ``2C/n`` it is about
    ``1.5e-14 n (B_w / gamma + B_v) / C`` (``< 2e-9`` in every configuration of the tests).
    """
    base = 2.0 * C / n
    B_w = float(np.linalg.norm(center)) + diameter
    B_v = C + regularization * (B_w + float(np.linalg.norm(regularization_center)))
    per_score = 2.0 * (n + 8) * _U * C + 32.0 * _U * (B_v + 4.0 * B_w / step_size)
    value = base * (1.0 + 8.0 * _U) + 2.0 * per_score
    return float(np.nextafter(value, math.inf))


def exponential_log_probabilities(
    scores: np.ndarray, epsilon: float, sensitivity: float
) -> np.ndarray:
    """Log-probabilities of the exponential mechanism over a finite set:
    ``log p(w) = -epsilon s(w) / (2 Delta) - logsumexp_w'(-epsilon s(w') / (2 Delta))``.

    Pure epsilon-DP when ``|s_Z - s_{Z'}| <= Delta`` pointwise for neighbors (McSherry &
    Talwar 2007), on any public finite set.
    """
    s = np.asarray(scores, float)
    logits = -(epsilon / (2.0 * sensitivity)) * s
    return logits - logsumexp(logits)


def sample_index(log_probabilities: np.ndarray, rng: np.random.Generator) -> int:
    """One index drawn with probability exactly proportional to ``exp(log_probabilities)``
    (normalized or not; ``-inf`` is zero mass): the exact Gumbel-max sampler of
    :func:`dpcvx.mechanisms.sampling.sample_index`, which draws every positive mass, however
    small, with exactly its probability."""
    return exact_index(log_probabilities, rng)


def smoothing_directions(d: int, nodes: int) -> np.ndarray:
    """The fixed quadrature directions ``u_j`` (one per antipodal pair), shape ``(m, d)``.

    ``d = 1``: ``[[1]]`` (``m = 1``: the exact two-point formula). ``d = 2``: ``m = nodes / 2``
    directions ``(cos(pi j / m), sin(pi j / m))``, ``j = 0..m-1``: with their antipodes, the
    ``nodes`` equally spaced nodes of the trapezoidal rule on the circle.
    """
    if d == 1:
        return np.ones((1, 1))
    m = nodes // 2
    theta = np.pi * np.arange(m) / m
    return np.stack([np.cos(theta), np.sin(theta)], axis=1)


def _round_up_digits(value: float, digits: int) -> float:
    """``value > 0`` rounded up to ``digits`` significant digits (for messages that suggest a
    public value: the printed number must still satisfy the bound it is quoted for)."""
    quantum = 10.0 ** (math.floor(math.log10(value)) - digits + 1)
    return math.ceil(value / quantum * (1.0 + 1e-12)) * quantum


def check_net_domain(domain) -> None:
    """Raise :class:`~dpcvx.InvalidParameterError` unless ``domain`` has an exact Euclidean
    projection (an l2 ball, a box or an l1 ball), as EM-PGM's sensitivity argument needs."""
    _check_domain(domain)


def _check_domain(domain) -> None:
    kind = getattr(domain, "kind", None)
    if kind not in SUPPORTED_DOMAINS:
        raise InvalidParameterError(
            f"`{_OWNER}` needs a domain with an exact Euclidean projection (its sensitivity "
            "argument uses that Pi_W is nonexpansive): an l2 ball, a box or an l1 ball "
            "(dpcvx.domains.l2_ball / box / linf_ball / l1_ball). Got a domain of kind "
            f"{kind!r}. Use one of those domains (an interval is `dpcvx.domains.box(w, lo, hi)`"
            "; `cp.abs(w) <= 1` is analysed as a general set), or "
            "LocalizedDoubleOutputPerturbation."
        )


def net_points(domain, spacing: float) -> np.ndarray:
    """The public net: a grid of spacing ``h <= spacing`` over the bounding box of ``W``,
    intersected with ``W``, plus the projections of the grid points outside ``W`` that lie
    within half a cell diagonal of it (boundary points; both endpoints of an interval).

    Every net point passes ``domain.contains``. Every point of ``W`` lies within
    ``h sqrt(d) / 2`` of the net: if ``w`` is in a cell whose nearest corner ``c`` is outside
    ``W``, then ``dist(c, W) <= ||c - w||`` so ``Pi_W(c)`` is in the net and
    ``||Pi_W(c) - w|| <= ||c - w||`` (projection is nonexpansive and ``Pi_W(w) = w``).

    The net depends on the domain and ``spacing`` only (never on data). Rows are sorted
    lexicographically.
    """
    _check_domain(domain)
    d = int(domain.d)
    h = check_positive(spacing, "spacing", "net_points")
    c = np.asarray(domain.center, float)
    far = float(domain.diameter)
    axes, steps = [], []
    for j in range(d):
        e = np.zeros(d)
        e[j] = far
        # the exact coordinate extent: projecting a far point along +-e_j onto a ball or box
        # lands on the point of W with the largest / smallest j-th coordinate
        lo = float(domain.project(c - e)[j])
        hi = float(domain.project(c + e)[j])
        K = max(1, math.ceil((hi - lo) / h * (1.0 - 1e-12)))
        axis = lo + (hi - lo) * (np.arange(K + 1) / K)
        axis[-1] = hi
        axes.append(axis)
        steps.append((hi - lo) / K)
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, d)
    reach = 0.5 * math.sqrt(sum(s * s for s in steps)) * (1.0 + 1e-9)
    kept = []
    for p in grid:
        if domain.contains(p):
            kept.append(p)
            continue
        q = domain.make_feasible(p)
        if float(np.linalg.norm(q - p)) <= reach:
            kept.append(q)
    return np.unique(np.asarray(kept, float).reshape(-1, d), axis=0)


# -------------------------------------------------------------------------------- records
@dataclass(frozen=True, slots=True, kw_only=True)
class NetDistribution:
    """The exact output distribution of one release over the net.

    **Data-dependent: for tests and audits only.** The scores and probabilities are functions
    of the private data; releasing any of them voids the guarantee.

    Attributes
    ----------
    points : ndarray, shape (N, d)
        The public net (:func:`net_points`).
    scores : ndarray, shape (N,)
        ``s_Z(w)`` at every net point.
    log_probabilities : ndarray, shape (N,)
        ``log P(w_hat = w)`` (natural logarithm), normalized.
    """

    points: np.ndarray
    scores: np.ndarray
    log_probabilities: np.ndarray


@dataclass(frozen=True, slots=True, kw_only=True)
class ExponentialMechanismPlan(OneEventPlan):
    """Everything a release uses, fixed from public quantities before any data is touched."""

    guarantee: Guarantee
    n: int
    d: int
    C: float
    regularization: float  # lam
    center: np.ndarray  # w0
    smoothness: float  # Hbar (public)
    step_size: float  # gamma = 1 / (lam + Hbar)
    smoothing: float  # tau
    spacing: float  # upper bound on the grid spacing h
    paper_spacing: float  # eta = C d / (epsilon n (lam + Hbar))
    quadrature_nodes: int  # M (d = 2); 2 for d = 1
    sensitivity: Sensitivity  # Delta = 2C/n + rounding allowance
    net_bound: int  # public upper bound on the number of net points
    detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    ledger_detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))


# -------------------------------------------------------------------------------- mechanism
@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectedGradientExponentialMechanism:
    """Paper 000's EM-PGM (Appendix E): the exponential mechanism over a public net with the
    clipped projected-gradient score, smoothed for nonsmooth losses. **Exponential in d: a
    reference route for d <= 2 only.**

    Parameters
    ----------
    C : float
        Clipping threshold of the per-example gradients (public; the paper's
        ``C = G_k (epsilon n / d)^(1/k)``).
    regularization : float
        ``lam > 0``: the score targets ``argmin_W (1/n) sum_i f^tau(w, z_i) +
        (lam/2) ||w - w0||^2``.
    center : array-like, optional
        ``w0``; default the center of the domain's bounding ball.
    smoothness : float, optional
        A public bound ``H >= 0`` on the smoothness of the per-example loss (smooth case,
        Theorem E.1). Then ``gamma = 1 / (lam + H)``. Give this or ``second_moment``.
    second_moment : float, optional
        ``G_2 > 0`` with ``E_z[sup ||grad f||^2] <= G_2^2`` over ``W + tau B`` (nonsmooth case,
        Section E.2): then ``Hbar = d G_2 sqrt(n / rho) / tau``, public (erratum E6).
    smoothness_failure : float
        ``rho`` in ``(0, 1)`` of the bound (29) behind ``Hbar`` (utility only). Default 0.1.
    smoothing : float, optional
        ``tau > 0``; default ``D / sqrt(n)`` (Theorem E.5). Any public value is private; for
        smooth losses a smaller ``tau`` shrinks the smoothing bias (``|F^tau - F| <= tau G_2``).
    spacing : float, optional
        Largest grid spacing of the net; default the paper's
        ``eta = C d / (epsilon n (lam + Hbar))``. A coarser public value costs utility only.
    max_points : int
        Refuse (before anything is spent) when the net may have more points (at least 4).
        Default 10000.
    quadrature_nodes : int
        Even number ``M >= 4`` of nodes of the circle quadrature (``d = 2``). Default 32.

    Notes
    -----
    Guarantee: pure epsilon-DP, replace-one neighbors, public n, on every dataset (``delta``
    must be 0). One ledger event ``epsilon``. The score's sensitivity is ``2C/n`` (plus a tiny
    float64 allowance, :func:`score_sensitivity`): paper 000, proof of Theorem E.1, which
    holds for any fixed per-example map clipped to ``C`` and any *public* step size ``gamma``.
    Erratum E6 applied: Proposition E.4's data-dependent ``gamma = 1/(lam + H_Z^tau)`` is
    replaced by the public ``1/(lam + Hbar)``.

    Requirements checked before the budget is reserved: ``d <= 2``; the net bound
    ``(ceil(D/spacing) + 1)^d <= max_points``. Checked at release, before the data is touched
    (:func:`dpcvx.problem.release` does not pass the domain to ``plan``): the domain is an l2
    ball, a box or an l1 ball (exact projection). Unbounded domains are rejected when the
    :class:`~dpcvx.Problem` is built.

    The smoothing evaluates the loss at ``w +- tau u`` for net points ``w`` near the boundary,
    i.e. up to ``tau`` outside ``W``. dpcvx rejects losses with implicit domains (log, inv_pos,
    ...) when the problem is declared, so a valid declaration is finite on all of ``R^d``; a
    non-finite per-example gradient (overflow) is replaced by 0, which keeps the guarantee.

    The sampler draws one float64 uniform and inverts the CDF of the exactly computed
    probabilities: like every floating-point sampler it is exposed to the attacks on textbook
    float implementations (Mironov 2012; Ilvento 2020 for the exponential mechanism).

    Examples
    --------
    >>> import cvxpy as cp, numpy as np, dpcvx
    >>> from dpcvx.mechanisms.em_pgm import ProjectedGradientExponentialMechanism
    >>> w = cp.Variable(1); z = cp.Parameter()
    >>> problem = dpcvx.Problem(0.5 * cp.square(w[0] - z), w, data={z: np.linspace(-.5, .5, 20)},
    ...                         domain=dpcvx.domains.box(w, -1.0, 1.0))
    >>> mech = ProjectedGradientExponentialMechanism(C=1.0, regularization=0.5, smoothness=1.0,
    ...                                              spacing=0.01)
    >>> res = problem.solve_private(mech, epsilon=1.0, rng=0)
    >>> bool(abs(res.w[0]) <= 1)
    True
    """

    C: float
    regularization: float
    center: Any = None
    smoothness: float | None = None
    second_moment: float | None = None
    smoothness_failure: float = 0.1
    smoothing: float | None = None
    spacing: float | None = None
    max_points: int = 10_000
    quadrature_nodes: int = 32
    #: what the release needs from the data source (checked before anything is spent): loss
    #: values only (the net's projections are the public domain's own)
    requirements: ClassVar[tuple[str, ...]] = ("loss_values",)
    #: works on the problem's own loss (no Lipschitz-extension template)
    extension: ClassVar[ExtensionUse] = PLAIN
    enforces_lipschitz: ClassVar[bool] = False
    neighbors: ClassVar[NeighborRelation] = REPLACE_ONE

    def __post_init__(self) -> None:
        owner = _OWNER
        object.__setattr__(self, "C", check_positive(self.C, "C", owner))
        object.__setattr__(
            self, "regularization", check_positive(self.regularization, "regularization", owner)
        )
        object.__setattr__(self, "center", check_center(self.center, owner))
        if (self.smoothness is None) == (self.second_moment is None):
            raise InvalidParameterError(
                f"`{owner}` needs exactly one public source of its step size gamma = "
                "1/(lam + Hbar): `smoothness=H` (a bound on the per-example loss's smoothness, "
                "paper 000 Theorem E.1) or `second_moment=G_2` (nonsmooth case, Section E.2: "
                "Hbar = d G_2 sqrt(n/rho)/tau). Got "
                + ("neither." if self.smoothness is None else "both.")
                + " A step size computed from the data would break privacy (erratum E6)."
            )
        if self.smoothness is not None:
            object.__setattr__(
                self, "smoothness", check_nonnegative(self.smoothness, "smoothness", owner)
            )
        if self.second_moment is not None:
            object.__setattr__(
                self, "second_moment", check_positive(self.second_moment, "second_moment", owner)
            )
        rho = check_positive(self.smoothness_failure, "smoothness_failure", owner)
        if not rho < 1.0:
            raise InvalidParameterError(
                f"`smoothness_failure` of `{owner}` must lie in (0, 1). Got "
                f"{self.smoothness_failure!r}."
            )
        object.__setattr__(self, "smoothness_failure", rho)
        for name in ("smoothing", "spacing"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, check_positive(value, name, owner))
        for name, low in (("max_points", 4), ("quadrature_nodes", 4)):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, numbers.Integral)
                or int(value) < low
            ):
                raise InvalidParameterError(
                    f"`{name}` of `{owner}` must be an integer >= {low}. Got {value!r}."
                )
            object.__setattr__(self, name, int(value))
        if self.quadrature_nodes % 2:
            raise InvalidParameterError(
                f"`quadrature_nodes` of `{owner}` must be even (the rule uses antipodal pairs "
                f"of nodes). Got {self.quadrature_nodes}. Use e.g. 32."
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
    ) -> ExponentialMechanismPlan:
        """The step size, smoothing radius, net spacing and bound, and the score's
        sensitivity, from public quantities only. ``domain`` (optional) is checked too."""
        owner = _OWNER
        epsilon = check_pure_budget(epsilon, delta, owner)
        if d not in (1, 2):
            raise InvalidParameterError(
                f"`{owner}` (EM-PGM over a net, paper 000 Appendix E) costs time exponential "
                f"in d and is a reference route for d <= 2 only. Got d = {d}. Use "
                "LocalizedDoubleOutputPerturbation (polynomial time) in higher dimensions."
            )
        if domain is not None:
            _check_domain(domain)
        n = int(n)
        D = check_positive(diameter, "diameter", owner)
        c = np.asarray(center, float).reshape(-1)
        w0 = c if self.center is None else self.center
        if w0.shape != (d,):
            raise InvalidParameterError(
                f"The `center` of `{owner}` must have shape ({d},). Got {w0.shape}."
            )
        lam, C = self.regularization, self.C
        tau = self.smoothing if self.smoothing is not None else D / math.sqrt(n)
        if self.smoothness is not None:
            Hbar, case = self.smoothness, "smooth (Theorem E.1)"
        else:
            G2 = float(self.second_moment)  # type: ignore[arg-type]  # set when smoothness is None
            Hbar = d * G2 * math.sqrt(n / self.smoothness_failure) / tau
            case = "nonsmooth (Section E.2, public Hbar = d G_2 sqrt(n/rho)/tau, erratum E6)"
        gamma = 1.0 / (lam + Hbar)
        if not (math.isfinite(gamma) and gamma > 0.0):
            raise InvalidParameterError(
                f"`{owner}` computed the step size gamma = 1/(lam + Hbar) = {gamma!r}, which "
                "is not a positive finite float. Rescale the problem (smaller `smoothness` or "
                "`second_moment`, larger `smoothing`)."
            )
        eta = C * d / (epsilon * n * (lam + Hbar))
        h = self.spacing if self.spacing is not None else eta
        per_axis = D / h
        bound = math.inf if per_axis > 1e15 else (math.ceil(per_axis) + 1) ** d
        if bound > self.max_points:
            side = max(2, int(math.floor(self.max_points ** (1.0 / d) * (1 + 1e-12))))
            coarsest = _round_up_digits(D / (side - 1) * (1.0 + 1e-9), 6)
            raise InvalidParameterError(
                f"The net of `{owner}` at spacing {h:.3g} "
                + (
                    "(the paper's eta = C d/(epsilon n (lam + Hbar))) "
                    if self.spacing is None
                    else ""
                )
                + f"may have up to {bound:.3g} points over the bounding box of side D = {D:g} "
                f"in d = {d}, above max_points = {self.max_points}. EM-PGM is exponential in d "
                f"and meant for small reference problems: pass a coarser public "
                f"`spacing` (at least {coarsest:.6g}; this costs utility only) or raise "
                "`max_points`."
            )
        bound = int(bound)
        nodes = self.quadrature_nodes if d == 2 else 2
        delta_s = score_sensitivity(
            n=n,
            C=C,
            regularization=lam,
            step_size=gamma,
            center=c,
            regularization_center=w0,
            diameter=D,
        )
        common = {
            "paper": "000 App E (Alg 5, Thm E.1; E.2 smoothing; erratum E6: public gamma)",
            "case": case,
            "C": C,
            "regularization": lam,
            "smoothness": Hbar,
            "step_size": gamma,
            "smoothing": tau,
            "spacing": h,
            "net_bound": bound,
            "sensitivity": delta_s,
            "coefficient": epsilon / (2.0 * delta_s),
            "reference_only": "time exponential in d; d <= 2",
        }
        detail = dict(common)
        detail.update(
            {
                "mechanism": _OWNER,
                "center": tuple(float(v) for v in w0),
                "paper_spacing": eta,
                "quadrature_nodes": nodes,
                "base_sensitivity": 2.0 * C / n,
            }
        )
        ledger = dict(common)
        ledger["composition"] = "one exponential mechanism over a public finite net"
        return ExponentialMechanismPlan(
            guarantee=Guarantee(epsilon=epsilon, delta=0.0),
            n=n,
            d=d,
            C=C,
            regularization=lam,
            center=np.asarray(w0, float).copy(),
            smoothness=Hbar,
            step_size=gamma,
            smoothing=tau,
            spacing=h,
            paper_spacing=eta,
            quadrature_nodes=nodes,
            sensitivity=Sensitivity(value=delta_s, norm="l2"),
            net_bound=bound,
            detail=MappingProxyType(detail),
            ledger_detail=MappingProxyType(ledger),
        )

    # ------------------------------------------------------------------ data access
    def clipped_gradients(
        self, plan: ExponentialMechanismPlan, context, points: np.ndarray
    ) -> np.ndarray:
        """``g_{C,Z}(w)`` at every row of ``points``, shape ``(N, d)``: the mean over examples
        of ``clip_C`` of the smoothed per-example gradient, from ``context.loss_values`` only.

        **Data-dependent** (tests and audits only)."""
        P = np.asarray(points, float).reshape(-1, plan.d)
        U = smoothing_directions(plan.d, plan.quadrature_nodes)
        m = U.shape[0]
        tau = plan.smoothing
        factor = plan.d / (tau * 2.0 * m)
        chunk = max(1, _CHUNK_VALUES // (2 * m * max(plan.n, 1)))
        out = np.empty_like(P)
        for start in range(0, P.shape[0], chunk):
            W = P[start : start + chunk]
            k = W.shape[0]
            shifts = tau * U  # (m, d)
            probe = np.concatenate(
                [
                    (W[:, None, :] + shifts[None]).reshape(-1, plan.d),
                    (W[:, None, :] - shifts[None]).reshape(-1, plan.d),
                ]
            )
            values = np.asarray(context.loss_values(probe), float).reshape(2, k, m, -1)
            with np.errstate(invalid="ignore", over="ignore"):
                diff = values[0] - values[1]  # (k, m, n): each example's own values only
                grads = factor * np.einsum("kmi,mj->kij", diff, U)  # (k, n, d)
                finite = np.all(np.isfinite(grads), axis=-1)
                grads = np.where(finite[..., None], grads, 0.0)
                norms = np.hypot.reduce(grads, axis=-1) if plan.d > 1 else np.abs(grads[..., 0])
                scale = np.where(norms > plan.C, plan.C / np.where(norms > 0, norms, 1.0), 1.0)
            out[start : start + k] = np.mean(grads * scale[..., None], axis=1)
        return out

    def scores(
        self, plan: ExponentialMechanismPlan, context, points: np.ndarray, project
    ) -> np.ndarray:
        """``s_Z(w) = (1/gamma) ||w - Pi_W(w - gamma (g_{C,Z}(w) + lam (w - w0)))||`` at every
        row of ``points`` (``project`` is the exact Euclidean projection onto W).

        **Data-dependent** (tests and audits only)."""
        P = np.asarray(points, float).reshape(-1, plan.d)
        g = self.clipped_gradients(plan, context, P)
        gamma = plan.step_size
        v = g + plan.regularization * (P - plan.center[None, :])
        y = P - gamma * v
        proj = np.stack([np.asarray(project(row), float) for row in y])
        diff = P - proj
        norms = np.hypot.reduce(diff, axis=-1) if plan.d > 1 else np.abs(diff[:, 0])
        return norms / gamma

    def distribution(self, plan: ExponentialMechanismPlan, context) -> NetDistribution:
        """The exact output distribution of a release over the net (``context`` is a
        :class:`dpcvx.problem.ReleaseContext` or anything with ``domain`` and
        ``loss_values``).

        **Data-dependent: for tests and privacy audits only**, never to be released."""
        domain = context.domain
        _check_domain(domain)
        net = net_points(domain, plan.spacing)
        s = self.scores(plan, context, net, domain.project)
        logp = exponential_log_probabilities(s, plan.guarantee.epsilon, plan.sensitivity.value)
        return NetDistribution(points=net, scores=s, log_probabilities=logp)

    # ------------------------------------------------------------------ release
    def release(
        self, plan: ExponentialMechanismPlan, context: Any, rng: np.random.Generator
    ) -> Release:
        """Sample the net point (``context`` is :class:`dpcvx.problem.ReleaseContext`).
        Returns the released point, no certificates (nothing is solved), and public detail."""
        _check_domain(context.domain)  # public: raised before the data is touched
        try:
            dist = self.distribution(plan, context)
            index = sample_index(dist.log_probabilities, rng)
            w = np.asarray(dist.points[index], float).copy()
        except Exception:  # noqa: BLE001 - nothing data-dependent may leave a private release
            raise SolverError(_FAILURE) from None
        return Release(w, (), MappingProxyType({"net_size": int(dist.points.shape[0])}))
