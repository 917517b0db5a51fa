"""Private heavy-tailed mean estimation (paper 003, Kamath-Liu-Zhang 2022, Section 4).

Two estimators of the mean of a distribution on R^d whose coordinates have bounded k-th
central moments (``E|x_j - mu_j|^k <= gamma``), each with pure epsilon-DP (Laplace) and
rho-zCDP (Gaussian) noise, replace-one neighbours, public n:

- **Coordinate-wise clipped median of means** (Algorithm 3; CDPCWME / DPCWME of Thm 4.1):
  clip every coordinate to ``[c - 3 tau s, c + 3 tau s]`` (``c`` a public centre, default 0;
  ``s = gamma^(1/k)`` the public moment scale), cut the rows into ``m`` consecutive disjoint
  buckets of ``b = floor(n/m)`` rows, and take per coordinate the median of the bucket means.
  One replaced row moves one bucket mean by at most ``6 tau s / b`` per coordinate, and an
  order statistic is 1-Lipschitz, so the l_inf sensitivity is ``6 tau s / b``
  (``constants="tight"``). The paper uses ``12 tau m / n`` (``constants="paper"``, the default,
  2x conservative: digest P2), with l2 and l1 sensitivities ``sqrt(d)`` and ``d`` times that (the
  printed l1 ``sqrt(d)`` is a typo; its Laplace scale uses d). Noise: Gaussian
  ``sigma^2 = Delta_2^2 / (2 rho)`` (paper: ``72 tau^2 m^2 d / (rho n^2)``), or Laplace per
  coordinate with scale ``Delta_1 / epsilon`` (paper: ``12 tau m d / (epsilon n)``).
  ``m = ceil(4 log(2d/beta))`` buckets (Cor 4.2), ``tau`` by default from Cor 4.2:
  ``(sqrt(rho) n / sqrt(d))^(1/k)`` or ``(epsilon n / d)^(1/k)``, clamped to ``>= 10``
  (the theorem's range; clamping a public number is privacy-safe).
- **Noise-smoothing estimator** (Algorithm 4, CDPNSME after Holland 2019): per coordinate
  ``(tau s / n) sum_i E_N phi(x_ij (1 + N) / (tau s))`` with ``N ~ N(0, c)`` integrated in
  closed form and the soft truncation ``phi(x) = x - x^3/6`` on ``|x| <= sqrt 2`` (``+-2
  sqrt(2)/3`` outside). ``|phi| <= 2 sqrt(2)/3``, so a replaced row moves a coordinate by at
  most ``(4 sqrt(2)/3) tau s / n``. **Erratum applied (digest P1):** the paper claims
  ``Delta_2 = sqrt(2) tau sqrt(d)/n`` and adds variance ``tau^2 d / (rho n^2)``, which is only
  ``(16/9) rho``-zCDP; dpcvx uses ``Delta_2 = (4 sqrt 2 / 3) tau sqrt(d) / n``, i.e. variance
  ``16 tau^2 d / (9 rho n^2)``. The paper leaves the smoothing variance ``c`` unspecified
  (default 1 here). The bound holds for every ``c``. For ``c = 1`` the sign flips of
  ``1 + N`` happen to keep ``|E phi| <= 0.643``, so the printed noise suffices there, but it
  does not for small ``c`` (``c = 1e-4``: ``0.9428``; tested).

Every noise scale, ``tau``, ``m`` and ``c`` is a function of public quantities only
(n, d, k, gamma, beta, the budget): never of the data. Every noise scale is rounded up to the
next float (float rounding can only add noise).

The estimators are frozen mechanisms (:mod:`dpcvx.mechanisms.base`) released through the one
pipeline on an array source: ``dpcvx.ArraySource(X).solve_private(estimator, epsilon=...)``.
With ``delta > 0`` (or a ``rho`` field) the release is rho-zCDP with Gaussian noise, recorded
as a ``"zcdp"`` ledger event; with ``delta == 0`` it is pure epsilon-DP with Laplace noise.
``estimator.release(X, epsilon=... | rho=..., delta=...)`` is the earlier spelling: it still
works (it releases through the same pipeline and returns a :class:`~dpcvx.MeanEstimate`), with
a :class:`DeprecationWarning`. This module never imports the array source (it lives above the
mechanisms): :mod:`dpcvx.arrays` registers the earlier spelling in ``array_release`` when
dpcvx is imported.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from dpcvx._validation import check_moment_order, check_positive, check_real
from dpcvx.accounting.ledger import PrivacyEvent
from dpcvx.accounting.zcdp import dp_to_zcdp, zcdp_to_dp
from dpcvx.errors import InvalidParameterError
from dpcvx.mechanisms.base import PLAIN, ExtensionUse, Release, perturb_steps, round_up
from dpcvx.mechanisms.robust_means import PHI_MAX, median_of_means, smoothed_truncation_mean
from dpcvx.neighbors import REPLACE_ONE, NeighborRelation
from dpcvx.types import Guarantee

__all__ = [
    "CoordinatewiseMedianOfMeans",
    "MeanPlan",
    "NoiseSmoothingMean",
    "median_of_means",
    "smoothed_truncation_mean",
]

#: the earlier ``estimator.release(X, ...)`` spelling, registered by :mod:`dpcvx.arrays` when
#: dpcvx is imported (the array data source lives in the problems stage, above the mechanisms:
#: the dependency is injected, never imported from here)
array_release: Callable[..., Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MeanPlan:
    """The public quantities of one release (fixed before the data is read)."""

    tau: float
    buckets: int | None
    linf_sensitivity: float
    l1_sensitivity: float
    l2_sensitivity: float
    noise: str  # "laplace" (per coordinate) or "gaussian"
    scale: float  # Laplace scale or Gaussian sigma, rounded up
    epsilon: float | None
    rho: float | None
    guarantee: Guarantee
    constants: str = "paper"

    @property
    def extension_C(self) -> None:
        """Mean estimation solves nothing."""
        return None

    def events(self, label: str) -> tuple[PrivacyEvent, ...]:
        """One pure event (Laplace) or one zCDP event (Gaussian) for the release."""
        if self.rho is not None:
            return (
                PrivacyEvent.zcdp(
                    label,
                    self.rho,
                    self.guarantee.delta,
                    detail={"sigma": self.scale, "l2_sensitivity": self.l2_sensitivity},
                ),
            )
        return (
            PrivacyEvent(
                label=label,
                epsilon=self.guarantee.epsilon,
                detail={"laplace_scale": self.scale, "l1_sensitivity": self.l1_sensitivity},
            ),
        )

    def facts(self) -> Mapping[str, Any]:
        """What the earlier ``MeanEstimate.detail`` held."""
        return MappingProxyType(
            {
                "tau": self.tau,
                "buckets": self.buckets,
                "noise": self.noise,
                "scale": self.scale,
                "l1_sensitivity": self.l1_sensitivity,
                "l2_sensitivity": self.l2_sensitivity,
                "constants": self.constants,
                "rho": self.rho,
            }
        )


def _add_noise(estimate: np.ndarray, plan: MeanPlan, rng: np.random.Generator) -> np.ndarray:
    """``fl(estimate + b)`` with ``b`` the plan's per-coordinate noise (Laplace with scale
    ``plan.scale``, or Gaussian with sigma ``plan.scale``): the one place mean estimation draws
    noise (the floating-point-safe sampler of :func:`~dpcvx.mechanisms.base.perturb_steps`)."""
    return perturb_steps(estimate, plan.noise, plan.scale, rng)


def _safe_rho(epsilon: float, delta: float) -> float:
    """A ``rho`` whose conversion at ``delta`` is at most ``epsilon``: the closed form of
    :func:`~dpcvx.accounting.zcdp.dp_to_zcdp`, stepped down to the next float while float
    rounding puts its conversion above ``epsilon`` (about one request in ten; the ledger
    accepts no overspend, not even an ulp)."""
    rho = dp_to_zcdp(epsilon, delta)
    while zcdp_to_dp(rho, delta, method="bs16") > epsilon:
        rho = math.nextafter(rho, 0.0)
    return rho


def _budget(epsilon, rho, owner):
    if (epsilon is None) == (rho is None):
        raise InvalidParameterError(
            f"`{owner}` needs exactly one budget: `epsilon` (pure epsilon-DP, Laplace noise) or "
            f"`rho` (rho-zCDP, Gaussian noise). Got epsilon={epsilon!r}, rho={rho!r}."
        )
    if epsilon is not None:
        return check_positive(epsilon, "epsilon", owner), None
    return None, check_positive(rho, "rho", owner)


class _MeanEstimator:
    """What both estimators share (a mixin of frozen dataclasses)."""

    __slots__ = ()

    owner: ClassVar[str] = "mean estimator"
    requirements: ClassVar[tuple[str, ...]] = ("rows",)
    extension: ClassVar[ExtensionUse] = PLAIN
    enforces_lipschitz: ClassVar[bool] = False
    neighbors: ClassVar[NeighborRelation] = REPLACE_ONE

    k: float
    moment: float
    tau: float | None
    center: Any
    rho: float | None

    def _check_common(self, failure_probability, constants) -> None:
        owner = self.owner
        object.__setattr__(self, "k", check_moment_order(self.k, owner))
        object.__setattr__(self, "moment", check_positive(self.moment, "moment", owner))
        beta = check_real(failure_probability, "failure_probability", owner)
        if not 0.0 < beta < 1.0:
            raise InvalidParameterError(
                f"`failure_probability` of `{owner}` must lie in (0, 1). Got {beta!r}."
            )
        if constants not in ("paper", "tight"):
            raise InvalidParameterError(
                f"`constants` of `{owner}` must be 'paper' or 'tight'. Got {constants!r}."
            )
        if self.tau is not None:
            object.__setattr__(self, "tau", check_positive(self.tau, "tau", owner))
        if self.center is not None:
            c = np.asarray(self.center, float)
            if not np.all(np.isfinite(c)):
                raise InvalidParameterError(f"The `center` of `{owner}` must be finite.")
            c.setflags(write=False)
            object.__setattr__(self, "center", c)
        if self.rho is not None:
            object.__setattr__(self, "rho", check_positive(self.rho, "rho", owner))

    @property
    def scale(self) -> float:
        """``s = gamma^(1/k)``: the moment bound's length scale (public)."""
        return self.moment ** (1.0 / self.k)

    def _default_tau(self, n: int, d: int, epsilon, rho) -> float:
        if self.tau is not None:
            return self.tau
        base = (epsilon * n / d) if epsilon is not None else (math.sqrt(rho) * n / math.sqrt(d))
        return max(10.0, base ** (1.0 / self.k))  # Cor 4.2, clamped to the theorem's range

    def _noise(self, l1, l2, epsilon, rho) -> tuple[str, float]:
        """``(kind, scale)``: Laplace ``Delta_1 / epsilon`` or Gaussian ``Delta_2 / sqrt(2
        rho)``, each rounded up to the next float (rounding can only add noise)."""
        if epsilon is not None:
            return "laplace", round_up(l1 / epsilon)
        return "gaussian", round_up(l2 / math.sqrt(2.0 * rho))

    def _check_center(self, d: int) -> None:
        if self.center is not None and self.center.shape not in ((d,), ()):
            raise InvalidParameterError(f"The `center` of `{self.owner}` must have shape ({d},).")

    def _pipeline_budget(self, epsilon: float, delta: float) -> tuple[float | None, float | None]:
        """``(epsilon, rho)`` of the release asked for by the pipeline: pure when ``delta``
        is 0 and no ``rho`` is set, else rho-zCDP (the field ``rho``, or the largest rho whose
        conversion at ``delta`` is at most ``epsilon``)."""
        owner = self.owner
        epsilon = check_positive(epsilon, "epsilon", owner)
        if self.rho is None and delta == 0:
            return epsilon, None
        if not 0.0 < delta < 1.0:
            raise InvalidParameterError(
                f"A zCDP release of `{owner}` states its guarantee at a delta in (0, 1). "
                f"Got delta={delta!r}."
            )
        if self.rho is None:
            return None, _safe_rho(epsilon, delta)
        implied = zcdp_to_dp(self.rho, delta)
        if implied > epsilon:
            raise InvalidParameterError(
                f"`{owner}(rho={self.rho:g})` is ({implied:g}, {delta:g})-DP, more than the "
                f"epsilon = {epsilon:g} asked for. Ask for epsilon >= {implied:g}, or lower "
                "`rho` (or leave it unset: the largest rho within (epsilon, delta) is used)."
            )
        return None, self.rho

    def release(self, plan: Any = None, context: Any = None, rng: Any = None, **kwargs: Any) -> Any:
        """``release(plan, context, rng) -> Release``: the pipeline's call (the robust
        estimate of ``context.rows()`` plus the planned noise; the budget is already reserved).

        Deprecated spelling: ``release(X, *, epsilon=None, rho=None, delta=1e-6, rng=None,
        accountant=None) -> MeanEstimate`` (no release context) still works, with a
        :class:`DeprecationWarning`: it releases through the same pipeline as
        ``dpcvx.ArraySource(X).solve_private(estimator, epsilon=...)``, with exactly one of
        ``epsilon`` (pure, Laplace) and ``rho`` (rho-zCDP, Gaussian, stated at ``delta``).
        """
        if context is not None:  # the pipeline always passes the release context
            if kwargs:
                raise TypeError(
                    f"{type(self).__name__}.release(plan, context, rng) takes no keyword "
                    f"arguments. Got {sorted(kwargs)}."
                )
            estimate = self._estimate(np.asarray(context.rows(), float), plan)
            return Release(_add_noise(estimate, plan, rng), ())
        if plan is None and "X" in kwargs:  # the earlier ``release(X=...)``
            plan = kwargs.pop("X")
        if plan is None or hasattr(plan, "events"):
            raise InvalidParameterError(
                f"`{type(self).__name__}.release` needs the release context: "
                "release(plan, context, rng) (the pipeline's call), or the data: use "
                f"dpcvx.ArraySource(X).solve_private({type(self).__name__}(...), epsilon=...)."
            )
        warnings.warn(
            f"{type(self).__name__}.release(X, ...) is deprecated: use "
            f"dpcvx.ArraySource(X).solve_private(estimator, epsilon=..., delta=...) (or give "
            "the estimator `rho=` for a rho-zCDP release).",
            DeprecationWarning,
            stacklevel=2,
        )
        if array_release is None:  # pragma: no cover - registered when dpcvx is imported
            raise InvalidParameterError("Import dpcvx to release a mean from an array.")
        return array_release(self, plan, rng=rng, **kwargs)

    def _request(self, epsilon, rho, delta, center, diameter, domain):
        """``(epsilon, rho)``: the pipeline's request (``center``/``diameter``/``domain`` given, all
        ignored by mean estimation) or the earlier direct call (exactly one budget)."""
        if diameter is not None or domain is not None or center is not None:
            return self._pipeline_budget(epsilon, delta)
        if rho is None and epsilon is not None and delta and self.rho is None:
            return self._pipeline_budget(epsilon, delta)
        return _budget(epsilon, rho if rho is not None else self.rho, self.owner)

    def _estimate(self, X: np.ndarray, plan: MeanPlan) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover - each estimator defines it

    def _plan(self, n, d, epsilon, rho, delta, tau, buckets, linf) -> MeanPlan:
        l1, l2 = d * linf, math.sqrt(d) * linf
        kind, scale = self._noise(l1, l2, epsilon, rho)
        if rho is None:
            guarantee = Guarantee(epsilon=epsilon)
        else:
            event = PrivacyEvent.zcdp("plan", rho, delta)
            guarantee = Guarantee(epsilon=event.epsilon, delta=delta)
        return MeanPlan(
            tau=tau,
            buckets=buckets,
            linf_sensitivity=linf,
            l1_sensitivity=l1,
            l2_sensitivity=l2,
            noise=kind,
            scale=scale,
            epsilon=epsilon,
            rho=rho,
            guarantee=guarantee,
            constants=getattr(self, "constants", "paper"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatewiseMedianOfMeans(_MeanEstimator):
    """Paper 003's coordinate-wise clipped median-of-means estimator (Algorithm 3 with
    Laplace noise = DPCWME, or Gaussian noise = CDPCWME; Thm 4.1, Cor 4.2).

    Parameters
    ----------
    k : float
        Moment order ``k >= 2``. ``k`` and ``moment`` may be given by position, the others
        by keyword.
    moment : float
        ``gamma``: a public bound on every coordinate's k-th central moment (the paper
        normalizes it to 1). Default 1.
    failure_probability : float
        ``beta``; sets ``m = ceil(4 log(2d/beta))`` buckets. Default 0.1 (Cor 4.2).
    buckets : int, optional
        Override ``m`` (public).
    tau : float, optional
        Override the truncation level (public); default Cor 4.2's, clamped to ``>= 10``.
    constants : {"paper", "tight"}
        ``"paper"`` (default): the printed sensitivity ``12 tau m / n`` per coordinate;
        ``"tight"``: ``6 tau / floor(n/m)`` (the digest's sharp bound).
    center : array-like, optional
        The public clipping centre (paper: 0, valid when ``||mu|| <= tau``).
    rho : float, optional
        Release rho-zCDP with this ``rho`` (Gaussian noise) whatever the pipeline's epsilon
        (which must then be at least the conversion of ``rho`` at its delta).
    """

    k: float = field(kw_only=False)
    moment: float = field(default=1.0, kw_only=False)
    failure_probability: float = 0.1
    buckets: int | None = None
    tau: float | None = None
    constants: str = "paper"
    center: Any = None
    rho: float | None = None

    owner: ClassVar[str] = "CoordinatewiseMedianOfMeans"

    def __post_init__(self) -> None:
        self._check_common(self.failure_probability, self.constants)
        buckets = self.buckets
        if buckets is not None and (
            isinstance(buckets, bool) or not isinstance(buckets, (int, np.integer)) or buckets < 1
        ):
            raise InvalidParameterError(
                f"`buckets` of `{self.owner}` must be a positive integer. Got {buckets!r}."
            )
        object.__setattr__(self, "buckets", None if buckets is None else int(buckets))

    def plan(
        self,
        n: int,
        d: int,
        *,
        epsilon: float | None = None,
        rho: float | None = None,
        delta: float = 0.0,
        center: Any = None,
        diameter: float | None = None,
        domain: Any = None,
    ) -> MeanPlan:
        """The truncation level, bucket count, sensitivities and noise (public only).

        Called by the pipeline with ``epsilon`` and ``delta`` (see the module docstring), or
        as earlier with exactly one of ``epsilon`` (pure) and ``rho`` (zCDP at ``delta``).
        """
        epsilon, rho = self._request(epsilon, rho, delta, center, diameter, domain)
        self._check_center(d)
        m = self.buckets or math.ceil(4.0 * math.log(2.0 * d / self.failure_probability))
        if n < m:
            raise InvalidParameterError(
                f"`{self.owner}` needs at least m = {m} examples (one per bucket; m = "
                f"ceil(4 log(2d/beta)) at beta = {self.failure_probability:g}). Got n = {n}."
            )
        tau = self._default_tau(n, d, epsilon, rho)
        width = tau * self.scale
        if self.constants == "paper":
            linf = 12.0 * width * m / n
        else:
            linf = 6.0 * width / (n // m)
        return self._plan(n, d, epsilon, rho, delta or 1e-6, tau, m, linf)

    def _estimate(self, X: np.ndarray, plan: MeanPlan) -> np.ndarray:
        assert plan.buckets is not None  # the median of means plans its buckets
        return median_of_means(X, plan.tau * self.scale, plan.buckets, self.center)


@dataclass(frozen=True, slots=True, kw_only=True)
class NoiseSmoothingMean(_MeanEstimator):
    """Paper 003's noise-smoothing (Holland-style) estimator, Algorithm 4 (CDPNSME), with the
    corrected calibration (digest P1): ``Delta_2 = (4 sqrt 2 / 3) tau sqrt(d) / n``, Gaussian
    variance ``16 tau^2 d / (9 rho n^2)``; or Laplace per coordinate with
    ``Delta_1 = (4 sqrt 2 / 3) tau d / n`` for pure epsilon (not in the paper; the same
    sensitivity argument).

    Parameters
    ----------
    k, moment, tau
        As for :class:`CoordinatewiseMedianOfMeans` (``tau`` by Cor 4.2's rule, clamped).
    smoothing : float
        ``c``, the variance of the multiplicative noise ``N ~ N(0, c)`` (unspecified in the
        paper; default 1).
    center : array-like, optional
        Subtracted before and added back after the estimate (public).
    rho : float, optional
        As for :class:`CoordinatewiseMedianOfMeans`.
    """

    k: float = field(kw_only=False)
    moment: float = field(default=1.0, kw_only=False)
    tau: float | None = None
    smoothing: float = 1.0
    center: Any = None
    rho: float | None = None

    owner: ClassVar[str] = "NoiseSmoothingMean"

    def __post_init__(self) -> None:
        self._check_common(0.1, "paper")
        object.__setattr__(
            self, "smoothing", check_positive(self.smoothing, "smoothing", self.owner)
        )

    def plan(
        self,
        n: int,
        d: int,
        *,
        epsilon: float | None = None,
        rho: float | None = None,
        delta: float = 0.0,
        center: Any = None,
        diameter: float | None = None,
        domain: Any = None,
    ) -> MeanPlan:
        """As :meth:`CoordinatewiseMedianOfMeans.plan`."""
        epsilon, rho = self._request(epsilon, rho, delta, center, diameter, domain)
        self._check_center(d)
        tau = self._default_tau(n, d, epsilon, rho)
        linf = 2.0 * PHI_MAX * tau * self.scale / n
        return self._plan(n, d, epsilon, rho, delta or 1e-6, tau, None, linf)

    @staticmethod
    def printed_sigma(tau: float, n: int, d: int, rho: float) -> float:
        """The paper's printed Gaussian scale ``sqrt(tau^2 d / (rho n^2))``: only
        ``(16/9) rho``-zCDP (kept for audits and reproduction, never used by a release)."""
        return math.sqrt(tau * tau * d / (rho * n * n))

    def _estimate(self, X: np.ndarray, plan: MeanPlan) -> np.ndarray:
        c = 0.0 if self.center is None else self.center
        return c + smoothed_truncation_mean(X - c, plan.tau * self.scale, self.smoothing)


def with_rho(estimator: Any, rho: float) -> Any:
    """A copy of ``estimator`` that releases ``rho``-zCDP (the earlier ``rho=`` spelling)."""
    return replace(estimator, rho=rho)
