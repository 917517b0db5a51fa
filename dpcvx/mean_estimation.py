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
(n, d, k, gamma, beta, the budget): never of the data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from dpcvx._validation import check_moment_order, check_positive, check_real
from dpcvx.accounting.ledger import Accountant, Ledger, PrivacyEvent
from dpcvx.errors import DataError, InvalidParameterError
from dpcvx.mechanisms.robust_means import PHI_MAX, median_of_means, smoothed_truncation_mean
from dpcvx.rng import make_rng

__all__ = [
    "CoordinatewiseMedianOfMeans",
    "MeanEstimate",
    "NoiseSmoothingMean",
    "median_of_means",
    "smoothed_truncation_mean",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class MeanEstimate:
    """A private mean with its guarantee: ``epsilon``-DP (``delta == 0``), or ``rho``-zCDP
    (then also ``(epsilon, delta)``-DP), replace-one neighbours."""

    mean: np.ndarray
    epsilon: float
    delta: float
    rho: float | None
    ledger: Ledger
    seeded: bool
    mechanism: str
    detail: MappingProxyType


@dataclass(frozen=True, slots=True, kw_only=True)
class MeanPlan:
    """The public quantities of one release."""

    tau: float
    buckets: int | None
    linf_sensitivity: float
    l1_sensitivity: float
    l2_sensitivity: float
    noise: str  # "laplace" (per coordinate) or "gaussian"
    scale: float  # Laplace scale or Gaussian sigma
    epsilon: float | None
    rho: float | None


def _budget(epsilon, rho, owner):
    if (epsilon is None) == (rho is None):
        raise InvalidParameterError(
            f"`{owner}` needs exactly one budget: `epsilon` (pure epsilon-DP, Laplace noise) or "
            f"`rho` (rho-zCDP, Gaussian noise). Got epsilon={epsilon!r}, rho={rho!r}."
        )
    if epsilon is not None:
        return check_positive(epsilon, "epsilon", owner), None
    return None, check_positive(rho, "rho", owner)


def _data(X, owner) -> np.ndarray:
    try:
        arr = np.asarray(X, dtype=float)
    except (TypeError, ValueError) as exc:
        raise DataError(f"The data of `{owner}` must be a numeric (n, d) array.") from exc
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] < 1:
        raise DataError(f"The data of `{owner}` must have shape (n, d). Got {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        raise DataError(f"The data of `{owner}` contains NaN or inf; remove those rows first.")
    return arr


class _MeanEstimator:
    owner = "mean estimator"

    def _check_common(self, k, moment, failure_probability, constants, tau, center):
        owner = self.owner
        self.k = check_moment_order(k, owner)
        self.moment = check_positive(moment, "moment", owner)
        beta = check_real(failure_probability, "failure_probability", owner)
        if not 0.0 < beta < 1.0:
            raise InvalidParameterError(
                f"`failure_probability` of `{owner}` must lie in (0, 1). Got {beta!r}."
            )
        self.failure_probability = beta
        if constants not in ("paper", "tight"):
            raise InvalidParameterError(
                f"`constants` of `{owner}` must be 'paper' or 'tight'. Got {constants!r}."
            )
        self.constants = constants
        self.tau = None if tau is None else check_positive(tau, "tau", owner)
        self.center = None if center is None else np.asarray(center, float)
        if self.center is not None and not np.all(np.isfinite(self.center)):
            raise InvalidParameterError(f"The `center` of `{owner}` must be finite.")

    @property
    def scale(self) -> float:
        """``s = gamma^(1/k)``: the moment bound's length scale (public)."""
        return self.moment ** (1.0 / self.k)

    def _default_tau(self, n: int, d: int, epsilon, rho) -> float:
        if self.tau is not None:
            return self.tau
        base = (epsilon * n / d) if epsilon is not None else (math.sqrt(rho) * n / math.sqrt(d))
        return max(10.0, base ** (1.0 / self.k))  # Cor 4.2, clamped to the theorem's range

    def _noise(self, linf, l1, l2, epsilon, rho):
        if epsilon is not None:
            return "laplace", l1 / epsilon
        return "gaussian", l2 / math.sqrt(2.0 * rho)

    def release(
        self,
        X,
        *,
        epsilon: float | None = None,
        rho: float | None = None,
        delta: float = 1e-6,
        rng=None,
        accountant: Accountant | None = None,
    ) -> MeanEstimate:
        """Release the private mean of the rows of ``X``.

        Exactly one of ``epsilon`` (pure epsilon-DP, Laplace) and ``rho`` (rho-zCDP, Gaussian).
        A zCDP release is recorded as a ``"zcdp"`` ledger event whose ``(epsilon, delta)`` view
        is stated at ``delta``. The budget is reserved before the data is used; bad input
        spends nothing.
        """
        owner = self.owner
        epsilon, rho = _budget(epsilon, rho, owner)
        arr = _data(X, owner)
        n, d = arr.shape
        if self.center is not None and self.center.shape not in ((d,), ()):
            raise InvalidParameterError(f"The `center` of `{owner}` must have shape ({d},).")
        plan = self.plan(n, d, epsilon=epsilon, rho=rho)
        generator, seeded = make_rng(rng)
        if rho is not None:
            event = PrivacyEvent.zcdp(
                f"{owner}(n={n}, d={d})",
                rho,
                delta,
                detail={"sigma": plan.scale, "l2_sensitivity": plan.l2_sensitivity},
            )
            guarantee_eps, guarantee_delta = event.epsilon, event.delta
        else:
            event = PrivacyEvent(
                label=f"{owner}(n={n}, d={d})",
                epsilon=epsilon,
                detail={"laplace_scale": plan.scale, "l1_sensitivity": plan.l1_sensitivity},
            )
            guarantee_eps, guarantee_delta = epsilon, 0.0
        budget = (
            accountant if accountant is not None else Accountant(guarantee_eps, guarantee_delta)
        )
        budget.reserve(event)
        estimate = self._estimate(arr, plan)
        if plan.noise == "laplace":
            noisy = estimate + generator.laplace(0.0, plan.scale, size=d)
        else:
            noisy = estimate + generator.normal(0.0, plan.scale, size=d)
        detail = {
            "tau": plan.tau,
            "buckets": plan.buckets,
            "noise": plan.noise,
            "scale": plan.scale,
            "l1_sensitivity": plan.l1_sensitivity,
            "l2_sensitivity": plan.l2_sensitivity,
            "constants": self.constants,
        }
        return MeanEstimate(
            mean=noisy,
            epsilon=guarantee_eps,
            delta=guarantee_delta,
            rho=rho,
            ledger=budget.ledger,
            seeded=seeded,
            mechanism=owner,
            detail=MappingProxyType(detail),
        )


class CoordinatewiseMedianOfMeans(_MeanEstimator):
    """Paper 003's coordinate-wise clipped median-of-means estimator (Algorithm 3 with
    Laplace noise = DPCWME, or Gaussian noise = CDPCWME; Thm 4.1, Cor 4.2).

    Parameters
    ----------
    k : float
        Moment order ``k >= 2``.
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
    """

    owner = "CoordinatewiseMedianOfMeans"

    def __init__(
        self,
        k: float,
        moment: float = 1.0,
        *,
        failure_probability: float = 0.1,
        buckets: int | None = None,
        tau: float | None = None,
        constants: str = "paper",
        center=None,
    ) -> None:
        self._check_common(k, moment, failure_probability, constants, tau, center)
        if buckets is not None and (
            isinstance(buckets, bool) or not isinstance(buckets, (int, np.integer)) or buckets < 1
        ):
            raise InvalidParameterError(
                f"`buckets` of `{self.owner}` must be a positive integer. Got {buckets!r}."
            )
        self.buckets = None if buckets is None else int(buckets)

    def plan(self, n: int, d: int, *, epsilon=None, rho=None) -> MeanPlan:
        """The truncation level, bucket count, sensitivities and noise (public only)."""
        epsilon, rho = _budget(epsilon, rho, self.owner)
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
        l1, l2 = d * linf, math.sqrt(d) * linf
        kind, scale = self._noise(linf, l1, l2, epsilon, rho)
        return MeanPlan(
            tau=tau,
            buckets=m,
            linf_sensitivity=linf,
            l1_sensitivity=l1,
            l2_sensitivity=l2,
            noise=kind,
            scale=scale,
            epsilon=epsilon,
            rho=rho,
        )

    def _estimate(self, X: np.ndarray, plan: MeanPlan) -> np.ndarray:
        return median_of_means(X, plan.tau * self.scale, plan.buckets, self.center)


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
    """

    owner = "NoiseSmoothingMean"

    def __init__(
        self,
        k: float,
        moment: float = 1.0,
        *,
        tau: float | None = None,
        smoothing: float = 1.0,
        center=None,
    ) -> None:
        self._check_common(k, moment, 0.1, "paper", tau, center)
        self.smoothing = check_positive(smoothing, "smoothing", self.owner)

    def plan(self, n: int, d: int, *, epsilon=None, rho=None) -> MeanPlan:
        epsilon, rho = _budget(epsilon, rho, self.owner)
        tau = self._default_tau(n, d, epsilon, rho)
        linf = 2.0 * PHI_MAX * tau * self.scale / n
        l1, l2 = d * linf, math.sqrt(d) * linf
        kind, scale = self._noise(linf, l1, l2, epsilon, rho)
        return MeanPlan(
            tau=tau,
            buckets=None,
            linf_sensitivity=linf,
            l1_sensitivity=l1,
            l2_sensitivity=l2,
            noise=kind,
            scale=scale,
            epsilon=epsilon,
            rho=rho,
        )

    @staticmethod
    def printed_sigma(tau: float, n: int, d: int, rho: float) -> float:
        """The paper's printed Gaussian scale ``sqrt(tau^2 d / (rho n^2))``: only
        ``(16/9) rho``-zCDP (kept for audits and reproduction, never used by a release)."""
        return math.sqrt(tau * tau * d / (rho * n * n))

    def _estimate(self, X: np.ndarray, plan: MeanPlan) -> np.ndarray:
        c = 0.0 if self.center is None else self.center
        return c + smoothed_truncation_mean(X - c, plan.tau * self.scale, self.smoothing)
