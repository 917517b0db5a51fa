"""Noisy clipped gradient methods for heavy-tailed SCO (paper 003, Kamath-Liu-Zhang 2022,
Algorithms 1 and 2 with Theorems 5.2, 5.4 and 5.6).

SCOF (Algorithm 1): ``w^t = Pi_W(w^{t-1} - eta g_t)``, where ``g_t`` is a private heavy-tailed
mean estimate (:mod:`dpcvx.mechanisms.robust_means` plus noise, as in
:mod:`dpcvx.mechanisms.mean_estimation`) of the per-example gradients at ``w^{t-1}``: over the whole
dataset every step (convex; output the average iterate) or over disjoint batches of ``n/T``
rows (strongly convex; output the last iterate). Algorithm 2 gives every step the budget
``rho/T`` (T-fold zCDP composition, Lemma 5.1); the ledger records every step.
The parameter calculators below are the theorems' (digest section 3.6):

- **Thm 5.2** (convex, coordinate-wise median of means): ``tau = (sqrt(rho) n/(M d^1.5))^(1/k)``,
  ``T = R^2 rho n^2 / (tau^2 d^4)``, ``eta = M/(R sqrt T)``, ``m = ceil(8 d log(3 M n^3))``
  buckets, per-step variance ``72 tau^2 m^2 d T / (rho n^2)``.
- **Thm 5.4** (convex, noise smoothing, ``0.5 <= q <= 2``): ``tau = (sqrt(rho) n/(M d^q))^(1/2)``,
  ``T = R^2 rho n^2 / (tau^2 d^2)``, ``eta = M/(R sqrt T)``, per-step variance
  ``16 tau^2 d T / (9 rho n^2)`` (the digest's correction of the printed ``tau^2 d T/(rho n^2)``).
- **Thm 5.6** (``lambda``-strongly convex, median of means on disjoint batches):
  ``eta = 1/(lambda + L)``, ``G = sqrt(d/n) + sqrt(d) (sqrt(d)/(sqrt(rho) n))^((k-1)/k)``,
  ``T = ceil(log((lambda + L) G/(lambda L)) / log((lambda^2 + L^2 + lambda L)/(lambda + L)^2))``
  (valid only when ``(lambda + L) G/(lambda L) < 1``), ``tau = (sqrt(rho) n/(sqrt(d)
  T^1.5))^(1/k)``, ``m = ceil(4 log(20 d))``.

Every calculator reports the validity flags of its theorem (``tau >= 10``, ``T >= 1``,
``n/T >= m``, ...); an invalid setting raises :class:`~dpcvx.InvalidParameterError` unless
``allow_outside_theory=True`` (then ``tau`` is clamped to 10 and ``T`` to ``[1, cap]``, which is
privacy-safe because all of them are public, but outside the theorem). ``T`` is always capped by
the public ``iteration_cap``.

Budgets: ``delta > 0`` runs the paper's rho-zCDP algorithm with
``rho = (sqrt(log(1/delta) + epsilon) - sqrt(log(1/delta)))^2`` (its BS16 conversion gives
exactly ``(epsilon, delta)``); ``delta = 0`` runs a pure epsilon-DP variant (not in the paper):
the same schedule computed at ``rho = epsilon^2 / 2``, each step's median of means with Laplace
noise at ``epsilon/T`` (basic composition).

The theorems assume an L-smooth loss (and coordinate-wise k-th moments of the gradient
bounded by ``moment`` at every ``w``, with ``||E grad|| <= R <= tau``); for a non-smooth loss
(hinge, absolute) dpcvx warns: privacy is unaffected, the utility bounds do not apply.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from dpcvx._progress import progress_bar
from dpcvx._validation import check_center, check_moment_order, check_positive, check_real
from dpcvx.accounting.ledger import PrivacyEvent
from dpcvx.accounting.zcdp import dp_to_zcdp, zcdp_to_dp
from dpcvx.errors import InvalidParameterError
from dpcvx.mechanisms.base import (
    PLAIN,
    ExtensionUse,
    Release,
    exact_share,
    perturb_steps,
    round_up,
)
from dpcvx.mechanisms.robust_means import median_of_means, sanitize, smoothed_truncation_mean
from dpcvx.neighbors import REPLACE_ONE, NeighborRelation
from dpcvx.types import Guarantee

__all__ = ["ClippedGradientDescent", "params_thm52", "params_thm54", "params_thm56"]


def _check_validity(params: dict, allow: bool, owner: str) -> dict:
    bad = [name for name, ok in params["valid"].items() if not ok]
    if bad and not allow:
        raise InvalidParameterError(
            f"`{owner}`: the public parameters fall outside the theorem's range ({', '.join(bad)}"
            f"; tau = {params['tau']:.4g}, T = {params['T_theory']:.4g}). Use more examples, a "
            "larger budget, or allow_outside_theory=True (privacy is unaffected; the utility "
            "bound no longer applies)."
        )
    return params


def _finish(params: dict, cap: int) -> dict:
    params["T_theory"] = params["T"]
    params["tau_theory"] = params["tau"]
    params["T"] = int(min(max(1, math.ceil(params["T"])), cap))
    params["tau"] = max(10.0, params["tau"])
    return params


def params_thm52(n, d, rho, k, M, R, cap=10_000) -> dict:
    """Theorem 5.2 (convex, CDPCWME on all n gradients every step)."""
    tau = (math.sqrt(rho) * n / (M * d**1.5)) ** (1.0 / k)
    T = R * R * rho * n * n / (tau * tau * d**4)
    m = math.ceil(8 * d * math.log(3 * M * n**3))
    p = {
        "tau": tau,
        "T": T,
        "buckets": m,
        "oracle": "cwme",
        "batches": False,
        "valid": {"tau >= 10": tau >= 10, "T >= 1": T >= 1, "n >= m": n >= m},
    }
    p = _finish(p, cap)
    p["eta"] = M / (R * math.sqrt(p["T"]))
    return p


def params_thm54(n, d, rho, M, R, q=1.0, cap=10_000) -> dict:
    """Theorem 5.4 (convex, CDPNSME on all n gradients every step), ``0.5 <= q <= 2``."""
    tau = (math.sqrt(rho) * n / (M * d**q)) ** 0.5
    T = R * R * rho * n * n / (tau * tau * d * d)
    p = {
        "tau": tau,
        "T": T,
        "buckets": None,
        "oracle": "nsme",
        "batches": False,
        "valid": {"tau >= 10": tau >= 10, "T >= 1": T >= 1},
    }
    p = _finish(p, cap)
    p["eta"] = M / (R * math.sqrt(p["T"]))
    return p


def params_thm56(n, d, rho, k, lam, L, cap=10_000) -> dict:
    """Theorem 5.6 (lambda-strongly convex, CDPCWME on disjoint batches of n/T rows)."""
    G = math.sqrt(d / n) + math.sqrt(d) * (math.sqrt(d) / (math.sqrt(rho) * n)) ** ((k - 1) / k)
    ratio = (lam + L) * G / (lam * L)
    contraction = (lam * lam + L * L + lam * L) / (lam + L) ** 2
    T = math.log(ratio) / math.log(contraction) if 0 < ratio < 1 else 0.0
    Tc = max(1, math.ceil(T))
    tau = (math.sqrt(rho) * n / (math.sqrt(d) * Tc**1.5)) ** (1.0 / k)
    m = math.ceil(4 * math.log(20 * d))
    p = {
        "tau": tau,
        "T": T,
        "buckets": m,
        "oracle": "cwme",
        "batches": True,
        "G": G,
        "valid": {
            "(lambda+L)G/(lambda L) < 1": ratio < 1,
            "tau >= 10": tau >= 10,
            "n/T >= m": n / Tc >= m,
        },
    }
    p = _finish(p, cap)
    p["eta"] = 1.0 / (lam + L)
    return p


@dataclass(frozen=True, slots=True, kw_only=True)
class ClippedPlan:
    """The public schedule of a run: the theorem's parameters, the per-step noise and the
    ledger entry of every step (``steps``: the fields of one :class:`PrivacyEvent` per step,
    labelled ``"step t/T"``), fixed before any data is read."""

    guarantee: Guarantee
    params: MappingProxyType
    rho: float | None
    step_scale: float  # per-step Gaussian sigma or Laplace scale
    step_noise: str
    steps: tuple[MappingProxyType, ...]  # one ledger event per step (fields of PrivacyEvent)
    detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    ledger_detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    @property
    def extension_C(self) -> None:
        """Gradient descent on the declared loss."""
        return None

    def events(self, label: str) -> tuple[PrivacyEvent, ...]:
        """One event per step, ``f"{label} step t/T"``; their epsilons and deltas add up,
        exactly, to at most the guarantee."""
        return tuple(
            PrivacyEvent(
                **{
                    **dict(step),
                    "label": f"{label} {step['label']}",
                    "neighbors": self.guarantee.neighbors,
                }
            )
            for step in self.steps
        )

    def facts(self) -> Mapping[str, Any]:
        """The schedule and the per-step noise."""
        return MappingProxyType(dict(self.detail))


@dataclass(frozen=True, slots=True, kw_only=True)
class ClippedGradientDescent:
    """Paper 003's private gradient descent with a heavy-tailed mean oracle (Algorithm 2).

    Parameters
    ----------
    k : float
        Moment order ``k >= 2`` (coordinate-wise central moments of the gradient).
    moment : float
        ``gamma``: public bound on those moments (paper: 1). Gradients are clipped at
        ``3 tau gamma^(1/k)`` and the noise scales with ``gamma^(1/k)``.
    gradient_bound : float
        ``R``: public bound on ``||E grad f(w, z)||`` over W (the paper needs ``R <= tau``).
    smoothness : float
        ``L`` (used by the strongly convex schedule; the convex schedules need it only for
        their utility bound).
    strong_convexity : float, optional
        ``lambda``: selects Theorem 5.6 (disjoint batches, last iterate).
    oracle : {"cwme", "nsme"}
        Coordinate-wise median of means (Thm 5.2/5.6) or noise smoothing (Thm 5.4).
    q : float
        Thm 5.4's exponent, ``0.5 <= q <= 2``.
    iteration_cap : int
        Public cap on T (default 2000).
    allow_outside_theory : bool
        Run with clamped parameters when the theorem's validity conditions fail.
    initial_point : array-like, optional
        ``w^0`` (public), default the domain's centre projected onto W.
    progress : bool
        A progress bar over the steps on a terminal; False silences it.
    """

    k: float
    moment: float = 1.0
    gradient_bound: float = 1.0
    smoothness: float = 1.0
    strong_convexity: float | None = None
    oracle: str = "cwme"
    q: float = 1.0
    iteration_cap: int = 2000
    allow_outside_theory: bool = False
    initial_point: object = None
    progress: bool = True

    requirements: ClassVar[tuple[str, ...]] = ("gradients", "smooth", "project")
    extension: ClassVar[ExtensionUse] = PLAIN
    enforces_lipschitz: ClassVar[bool] = False
    neighbors: ClassVar[NeighborRelation] = REPLACE_ONE

    def __post_init__(self) -> None:
        owner = "ClippedGradientDescent"
        object.__setattr__(self, "k", check_moment_order(self.k, owner))
        for name in ("moment", "gradient_bound", "smoothness"):
            object.__setattr__(self, name, check_positive(getattr(self, name), name, owner))
        if self.strong_convexity is not None:
            object.__setattr__(
                self,
                "strong_convexity",
                check_positive(self.strong_convexity, "strong_convexity", owner),
            )
        if self.oracle not in ("cwme", "nsme"):
            raise InvalidParameterError(
                f"`oracle` of `{owner}` must be 'cwme' or 'nsme'. Got {self.oracle!r}."
            )
        if self.oracle == "nsme" and self.strong_convexity is not None:
            raise InvalidParameterError(
                f"`{owner}`: the strongly convex schedule (Thm 5.6) uses oracle='cwme'."
            )
        q = check_real(self.q, "q", owner)
        if not 0.5 <= q <= 2.0:
            raise InvalidParameterError(f"`q` of `{owner}` must lie in [0.5, 2]. Got {q!r}.")
        object.__setattr__(self, "initial_point", check_center(self.initial_point, owner))
        cap = self.iteration_cap
        if isinstance(cap, bool) or not isinstance(cap, (int, np.integer)) or cap < 1:
            raise InvalidParameterError(
                f"`iteration_cap` of `{owner}` must be a positive integer. Got {cap!r}."
            )

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
    ) -> ClippedPlan:
        """The schedule, the per-step noise and one ledger event per step (public only)."""
        owner = "ClippedGradientDescent"
        epsilon = check_positive(epsilon, "epsilon", owner)
        pure = delta == 0
        rho = epsilon * epsilon / 2.0 if pure else dp_to_zcdp(epsilon, delta)
        M, R, cap = float(diameter), self.gradient_bound, int(self.iteration_cap)
        if self.strong_convexity is not None:
            p = params_thm56(n, d, rho, self.k, self.strong_convexity, self.smoothness, cap)
        elif self.oracle == "nsme":
            p = params_thm54(n, d, rho, M, R, self.q, cap)
        else:
            p = params_thm52(n, d, rho, self.k, M, R, cap)
        _check_validity(p, self.allow_outside_theory, owner)
        start = None if self.initial_point is None else np.asarray(self.initial_point, float)
        if start is not None and start.shape != (d,):
            raise InvalidParameterError(
                f"The `initial_point` of `{owner}` must have shape ({d},). Got {start.shape}."
            )
        T = p["T"]
        rows = n // T if p["batches"] else n
        if rows < 1:
            raise InvalidParameterError(
                f"`{owner}`: {T} steps on disjoint batches need at least {T} examples; got "
                f"n = {n}. Lower `iteration_cap` or use more examples."
            )
        if p["buckets"] is not None and rows < p["buckets"]:
            if not self.allow_outside_theory:
                raise InvalidParameterError(
                    f"`{owner}`: each step sees {rows} examples, fewer than the "
                    f"{p['buckets']} buckets of the median of means. Use more examples or "
                    "allow_outside_theory=True (then the buckets shrink to the rows)."
                )
            p["buckets"] = max(1, rows)
        s = self.moment ** (1.0 / self.k)
        width = p["tau"] * s
        if p["oracle"] == "cwme":
            linf = 12.0 * width * p["buckets"] / rows  # the paper's per-coordinate bound
        else:
            linf = 2.0 * (2.0 * math.sqrt(2.0) / 3.0) * width / rows
        if pure:
            step_eps = exact_share(epsilon, T)
            scale, kind = round_up(d * linf / step_eps), "laplace"
            events = tuple(
                MappingProxyType(
                    {
                        "label": f"step {t + 1}/{T}",
                        "epsilon": step_eps,
                        "delta": 0.0,
                        "kind": "pure",
                        "detail": {"laplace_scale": scale},
                    }
                )
                for t in range(T)
            )
        else:
            step_rho, step_delta = exact_share(rho, T), exact_share(delta, T)
            scale = round_up(math.sqrt(d) * linf / math.sqrt(2.0 * step_rho))
            kind = "gaussian"
            step_eps = zcdp_to_dp(step_rho, step_delta)
            events = tuple(
                MappingProxyType(
                    {
                        "label": f"step {t + 1}/{T}",
                        "epsilon": step_eps,
                        "delta": step_delta,
                        "kind": "zcdp",
                        "rho": step_rho,
                        "detail": {"sigma": scale},
                    }
                )
                for t in range(T)
            )
        params = dict(p)
        params.pop("valid")
        detail = {
            "mechanism": owner,
            "paper": "003 Alg 1-2, Thm 5.2/5.4/5.6",
            "rho": None if pure else rho,
            "steps": T,
            "step_noise": kind,
            "step_scale": scale,
            **params,
        }
        return ClippedPlan(
            guarantee=Guarantee(epsilon=epsilon, delta=delta),
            rho=rho,
            params=MappingProxyType(p),
            step_scale=scale,
            step_noise=kind,
            steps=events,
            detail=MappingProxyType(detail),
            ledger_detail=MappingProxyType({"steps": T}),
        )

    def release(self, plan: ClippedPlan, context: Any, rng: np.random.Generator) -> Release:
        """Run the T steps (``context`` gives per-example gradients and projections)."""
        p = plan.params
        n, T = context.n, p["T"]
        if not context.smooth:
            warnings.warn(
                "ClippedGradientDescent: the loss is not smooth (e.g. hinge or absolute value); "
                "privacy holds as stated, but paper 003's utility theorems assume an L-smooth "
                "loss and do not apply to this run.",
                UserWarning,
                stacklevel=3,
            )
        start = context.domain.center if self.initial_point is None else self.initial_point
        w = context.project(np.asarray(start, float))
        s = self.moment ** (1.0 / self.k)
        width = p["tau"] * s
        rows = n // T if p["batches"] else n
        iterates = []
        for t in progress_bar(range(T), desc="clipped GD", unit="step", enabled=self.progress):
            idx = np.arange(t * rows, (t + 1) * rows) if p["batches"] else None
            grads = sanitize(context.gradients(w, idx))  # no NaN from one example
            if p["oracle"] == "cwme":
                est = median_of_means(grads, width, p["buckets"])
            else:
                est = smoothed_truncation_mean(grads, width)
            est = perturb_steps(est, plan.step_noise, plan.step_scale, rng)
            w = context.project(w - p["eta"] * est)
            iterates.append(w)
        out = iterates[-1] if p["batches"] else np.mean(iterates, axis=0)
        out = context.project(out)  # the average of points of W is in W; rounding aside
        return Release(np.asarray(out, float), (), MappingProxyType({"steps": T}))
