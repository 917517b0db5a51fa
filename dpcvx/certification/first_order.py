"""Certified first-order methods of paper 000: Algorithm 3 (Prop C.5) and Lemma D.5 (Thm D.4).

Both methods minimize a convex ``Phi`` over a compact convex ``K`` (points are flat float64
vectors of length ``q``) given a projection oracle ``project(y, xi)`` that returns a point **of
K** within ``xi`` of the exact Euclidean projection ``Pi_K(y)``. Their certificates are
a-priori inequalities of the paper evaluated on the quantities of the actual run, so they hold
for every run and every dataset (privacy rests on them), provided the hypotheses hold:

- ``diameter >= diam(K)``;
- the subgradients are exact (Algorithm 3) or ``B``-approximate with the stated norm bound
  (Lemma D.5);
- the projections land in K and are within the requested ``xi``.

No solver status and no objective value enters a certificate. What dpcvx can check at run time
it checks, and raises :class:`~dpcvx.CertificationError` when a hypothesis visibly fails: every
iterate must stay within ``diameter`` of the first one, the oracle's norms must respect the
declared bound, and every projection must pass two necessary conditions of an ``xi``-accurate
projection (it is no farther from ``y`` than the current iterate, plus ``xi``; and it satisfies
the projection's variational inequality against the current iterate, up to ``xi`` terms).
A too-small diameter that the iterates never exceed cannot be detected: pass a true bound.

**Floating point.** The paper's proofs are in exact arithmetic. dpcvx keeps them valid in
float64 as follows: the rounding of the step ``x - eta g`` is subtracted from the projection
budget handed to ``project`` (so the exact step is still projected to within ``xi``); the step
sizes are monotone under rounding, and the bounds carry a relative allowance
``1 + 2 (t + q + 8) eps``; the average is accumulated with compensated (Kahan) summation, and
the returned point is ``project(xbar, xi_f)`` with a tiny ``xi_f``, which lies in K and within
``xi_f + rounding`` of the exact average ``xbar``; the certificate then adds
``||g(x_out)|| (xi_f + rounding)`` (Algorithm 3, exact subgradient at the returned point) or
``L (xi_f + rounding)`` (Lemma D.5, ``Phi`` L-Lipschitz on K). Algorithm 3's "exact"
subgradients are float64 vectors: a relative rounding of up to ``64 (q + 8) eps`` in each is
charged as a bias ``64 (q + 8) eps D sqrt(S_T / T)`` (Lemma D.5's oracles carry their own ``B``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from dpcvx._validation import check_positive
from dpcvx.errors import CertificationError, InvalidParameterError

__all__ = ["FirstOrderResult", "adaptive_projected_subgradient", "biased_projected_subgradient"]

_EPS = float(np.finfo(float).eps)
#: the final projection of the average uses ``FINAL_XI_FACTOR`` times the last step's budget
FINAL_XI_FACTOR = 1e-3
#: relative float64 rounding allowed in each exact subgradient, in units of ``(q + 8) eps``
ORACLE_ROUNDING = 64.0


@dataclass(frozen=True, slots=True, kw_only=True)
class FirstOrderResult:
    """A point of K with a certified bound on ``Phi(point) - min_K Phi``.

    Attributes
    ----------
    point : ndarray
        The returned point; it is an output of ``project`` (or ``x1``), hence in K.
    certified_gap : float
        ``Phi(point) - min_K Phi <= certified_gap`` (see the method's docstring for the
        formula, and the module docstring for the floating-point allowances).
    iterations : int
        The number ``t`` of subgradient steps whose iterates are averaged.
    stop : str
        ``"zero_subgradient"``, ``"stopping_rule"`` (Algorithm 3) or ``"iterations"``
        (Lemma D.5's fixed ``T``).
    stats : mapping
        The terms of the bound and the run's step sizes (informational).
    """

    point: np.ndarray
    certified_gap: float
    iterations: int
    stop: str
    stats: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


# --------------------------------------------------------------------------- helpers
def _check_iterations(value: object, name: str, owner: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InvalidParameterError(
            f"The `{name}` parameter of `{owner}` must be a positive integer. Got {value!r}."
        )
    return int(value)


def _start(x1: ArrayLike, contains: Callable[[np.ndarray], bool] | None, owner: str) -> np.ndarray:
    x = np.array(x1, dtype=float).reshape(-1)
    if x.size == 0 or not np.all(np.isfinite(x)):
        raise InvalidParameterError(
            f"The starting point `x1` of `{owner}` must be a non-empty finite vector. Got {x1!r}."
        )
    if contains is not None and not contains(x):
        raise InvalidParameterError(
            f"The starting point `x1` of `{owner}` must lie in K (project it first)."
        )
    return x


def _norm(v: np.ndarray) -> float:
    return math.sqrt(float(np.dot(v, v)))


def _vector(value: ArrayLike, q: int, what: str) -> np.ndarray:
    out = np.asarray(value, dtype=float)
    # a sum is finite only if every entry is (NaN and inf propagate)
    if out.shape != (q,) or not math.isfinite(float(np.sum(out))):
        problem = "non-finite entries" if out.shape == (q,) else f"shape {out.shape}"
        raise CertificationError(
            f"The {what} must return a finite vector of shape ({q},). Got {problem}."
        )
    return out


def _step_rounding(x: np.ndarray, step: np.ndarray) -> float:
    """A bound on ``||fl(x - fl(eta g)) - (x - eta g)||`` given ``step = fl(eta g)``."""
    return 2.0 * _EPS * (_norm(x) + 2.0 * _norm(step))


def _rounding_factor(t: int, q: int) -> float:
    """Relative allowance for the rounding of sums of ``t`` squared norms of length ``q``."""
    return 1.0 + 2.0 * (t + q + 8) * _EPS


class _Average:
    """Compensated (Kahan) running sum of the iterates, with a bound on its rounding."""

    def __init__(self, q: int) -> None:
        self.total = np.zeros(q)
        self.comp = np.zeros(q)
        self.abs_total = np.zeros(q)
        self.count = 0

    def add(self, x: np.ndarray) -> None:
        y = x - self.comp
        t = self.total + y
        self.comp = (t - self.total) - y
        self.total = t
        self.abs_total += np.abs(x)
        self.count += 1

    def value(self) -> tuple[np.ndarray, float]:
        """``(fl(mean), bound on ||fl(mean) - exact mean||)``."""
        T = self.count
        mean = self.total / T
        per = (4.0 * _EPS + 4.0 * T * _EPS * _EPS) * self.abs_total * (1.0 + T * _EPS) / T
        return mean, _norm(per) + 2.0 * _EPS * _norm(mean)


class _Projector:
    """Calls ``project`` and checks what can be checked about its answer."""

    def __init__(
        self,
        project: Callable[[np.ndarray, float], np.ndarray],
        contains: Callable[[np.ndarray], bool] | None,
        x_first: np.ndarray,
        diameter: float,
        owner: str,
    ) -> None:
        self.project = project
        self.contains = contains
        self.x_first = x_first
        self.diameter = diameter
        self.owner = owner
        self.q = x_first.size

    def __call__(self, y: np.ndarray, xi: float, current: np.ndarray | None) -> np.ndarray:
        out = _vector(self.project(y, xi), self.q, "projection `project(y, xi)`")
        scale = _norm(y) + _norm(out) + (0.0 if current is None else _norm(current))
        slack = 64.0 * (self.q + 8) * _EPS * (scale + self.diameter)
        if self.contains is not None and not self.contains(out):
            raise CertificationError(
                f"`{self.owner}`: the projection returned a point outside K. The certificate "
                "needs projections that land in K: make the point exactly feasible (e.g. "
                "Domain.make_feasible) inside `project`."
            )
        far = _norm(out - self.x_first)
        if far > self.diameter * (1.0 + 1e-12) + slack:
            raise CertificationError(
                f"`{self.owner}`: two points of K are {far:.6g} apart, more than the declared "
                f"diameter {self.diameter:.6g}. The certificate needs diameter >= diam(K): pass "
                "a valid bound (or fix `project`, which must return points of K)."
            )
        if current is not None:
            # necessary conditions for ||out - Pi_K(y)|| <= xi, with x_t = current in K:
            # ||Pi_K(y) - y|| <= ||x_t - y|| and <y - Pi_K(y), x_t - Pi_K(y)> <= 0
            to_y = _norm(y - out)
            to_x = _norm(current - out)
            if to_y > _norm(current - y) + xi + slack:
                raise CertificationError(
                    f"`{self.owner}`: `project(y, xi)` returned a point farther from y than "
                    "the current iterate (a point of K), plus xi: it is not a xi-accurate "
                    "Euclidean projection. Use an exact projection (dpcvx.domains catalogue) "
                    "or paper 000's Lemma C.6 for W intersect B(c, r)."
                )
            inner = float(np.dot(y - out, current - out))
            if inner > xi * (to_y + to_x + 3.0 * xi) + slack * (scale + self.diameter):
                raise CertificationError(
                    f"`{self.owner}`: `project(y, xi)` violates the variational inequality "
                    "of the Euclidean projection by more than xi allows: it is not a "
                    "xi-accurate projection onto K. Use an exact projection (dpcvx.domains "
                    "catalogue) or paper 000's Lemma C.6 for W intersect B(c, r)."
                )
        return out


def _budget(xi: float, x: np.ndarray, step: np.ndarray, owner: str) -> float:
    """The ``xi`` handed to ``project``: the method's ``xi`` minus the step's rounding."""
    out = xi * (1.0 - 8.0 * _EPS) - _step_rounding(x, step)
    if not out > 0.0:
        raise CertificationError(
            f"`{owner}`: the projection accuracy the certificate needs ({xi:.3g}) is below the "
            "float64 rounding of the step. Raise `alpha` or rescale the problem to order one."
        )
    return out


# --------------------------------------------------------------------------- Algorithm 3
def adaptive_projected_subgradient(
    subgradient: Callable[[np.ndarray], np.ndarray],
    project: Callable[[np.ndarray, float], np.ndarray],
    x1: ArrayLike,
    diameter: float,
    alpha: float,
    max_iter: int,
    *,
    contains: Callable[[np.ndarray], bool] | None = None,
    callback: Callable[[int, float], None] | None = None,
) -> FirstOrderResult:
    """Paper 000, Algorithm 3 (Adaptive-Inexact-ProjSubgrad), with its certificate (Prop C.5).

    For ``t = 1, 2, ...``: ``g_t = subgradient(x_t)``; if ``g_t = 0`` return ``x_t`` (it is a
    minimizer: certified gap 0). Else ``S_t = sum_{s <= t} ||g_s||^2``,
    ``eta_t = D / sqrt(S_t)``, ``xi_t = min{D, alpha eta_t / (6 D)}``; if
    ``3 D sqrt(S_t) <= alpha t`` return the average ``xbar_t = (1/t) sum_{s <= t} x_s``;
    otherwise ``x_{t+1} = project(x_t - eta_t g_t, xi_t)``. (The paper computes ``x_{t+1}``
    before testing the rule; the output does not use it, so it is skipped at the stop.)

    Certificate (Prop C.5, proof checked in ``docs/paper000_digest.md`` section 2.3): with
    ``e_t = 2 D xi_t + xi_t^2 <= alpha eta_t / 2`` and the AdaGrad telescoping,

        Phi(xbar_T) - min_K Phi <= 3 D sqrt(S_T) / (2 T) + alpha / 4,

    which is ``<= 3 alpha / 4`` at the stop. ``certified_gap`` is this bound (times the
    rounding allowance of the module docstring) plus the cost of returning a point of K
    within ``xi_f + rounding`` of ``xbar_T`` (``||g(x_out)||`` times that distance, from the
    exact subgradient at the returned point) plus the subgradients' rounding allowance; the
    two additions are far below ``alpha`` in practice. It is checked to be ``<= alpha``.

    Parameters
    ----------
    subgradient : callable
        ``x -> g`` with ``Phi(y) >= Phi(x) + <g, y - x>`` for every ``y`` in K (exact).
    project : callable
        ``(y, xi) -> point of K`` within ``xi`` of ``Pi_K(y)``.
    x1 : array-like
        A point of K.
    diameter : float
        ``D >= diam(K)`` (for a product ``K`` the joint diameter: paper 000, proof of Prop
        D.1; digest pitfall P3).
    alpha : float
        The target accuracy.
    max_iter : int
        A public cap on the iterations; reaching it raises :class:`CertificationError` (in a
        private release, an abort; see ``docs/paper000_digest.md`` section 5.4).
    contains : callable, optional
        ``x -> bool``, a membership test of K; when given, ``x1`` and every projection are
        checked with it.
    callback : callable, optional
        ``callback(t, S_t)`` after every iteration (monitoring; it may raise to stop the run).

    Returns
    -------
    FirstOrderResult

    Raises
    ------
    CertificationError
        ``max_iter`` reached, or a hypothesis of the certificate visibly fails.
    """
    owner = "adaptive_projected_subgradient"
    D = check_positive(diameter, "diameter", owner)
    alpha = check_positive(alpha, "alpha", owner)
    max_iter = _check_iterations(max_iter, "max_iter", owner)
    x = _start(x1, contains, owner)
    q = x.size
    proj = _Projector(project, contains, x.copy(), D, owner)
    avg = _Average(q)
    S = 0.0
    eta = xi = math.nan
    for t in range(1, max_iter + 1):
        g = _vector(subgradient(x), q, "subgradient oracle")
        avg.add(x)
        if not np.any(g):
            return FirstOrderResult(
                point=x.copy(),
                certified_gap=0.0,
                iterations=t,
                stop="zero_subgradient",
                stats=MappingProxyType({"S": S, "method": "paper 000 Alg 3 (Prop C.5)"}),
            )
        S += float(np.dot(g, g))
        eta = D / math.sqrt(S)
        xi = min(D, alpha * eta / (6.0 * D))
        if callback is not None:
            callback(t, S)
        if 3.0 * D * math.sqrt(S) <= alpha * t:
            return _finish_adaptive(subgradient, proj, avg, D, alpha, S, t, xi, eta, q, owner)
        step = eta * g
        y = x - step
        x = proj(y, _budget(xi, x, step, owner), x)
    needed = math.ceil(9.0 * D * D * (S / max_iter) / alpha**2)  # 3 D sqrt(t G^2) = alpha t
    raise CertificationError(
        f"`{owner}` reached `max_iter` = {max_iter} iterations before its stopping rule "
        f"3 D sqrt(S_t) <= alpha t held (D = {D:.6g}, alpha = {alpha:.6g}; at the cap "
        f"3 D sqrt(S_t) / t = {3.0 * D * math.sqrt(S) / max_iter:.6g}). At the current mean "
        f"squared subgradient norm it needs about {needed} iterations. Nothing is certified. "
        "Raise `max_iter` or `alpha`."
    )


def _finish_adaptive(
    subgradient: Callable[[np.ndarray], np.ndarray],
    proj: _Projector,
    avg: _Average,
    D: float,
    alpha: float,
    S: float,
    T: int,
    xi: float,
    eta: float,
    q: int,
    owner: str,
) -> FirstOrderResult:
    mean, rounding = avg.value()
    xi_f = FINAL_XI_FACTOR * xi
    point = proj(mean, xi_f, None)
    g_out = _vector(subgradient(point), q, "subgradient oracle")
    rho = _rounding_factor(T, q)
    prop_c5 = 3.0 * D * math.sqrt(S) / (2.0 * T) + alpha / 4.0
    feasibility = _norm(g_out) * (xi_f + rounding) * (1.0 + 4.0 * _EPS)
    # each g_t may carry the relative rounding of its own float64 arithmetic: a bias of at
    # most ORACLE_ROUNDING (q + 8) eps ||g_t|| D per step, i.e. this on average
    oracle = ORACLE_ROUNDING * (q + 8) * _EPS * D * math.sqrt(S / T)
    gap = prop_c5 * rho + feasibility + oracle
    if not gap <= alpha:
        raise CertificationError(
            f"`{owner}`: the certified gap {gap:.6g} exceeds alpha = {alpha:.6g} after the "
            "stop (the subgradient at the returned point is unusually large). Nothing is "
            "certified. Rescale the problem to order one."
        )
    stats = {
        "method": "paper 000 Alg 3 (Prop C.5)",
        "S": S,
        "prop_c5_bound": prop_c5,
        "feasibility_term": feasibility,
        "oracle_rounding_term": oracle,
        "last_step": eta,
        "last_xi": xi,
        "final_xi": xi_f,
        "average_rounding": rounding,
    }
    return FirstOrderResult(
        point=point,
        certified_gap=gap,
        iterations=T,
        stop="stopping_rule",
        stats=MappingProxyType(stats),
    )


# --------------------------------------------------------------------------- Lemma D.5
def biased_projected_subgradient(
    oracle: Callable[[np.ndarray], tuple[np.ndarray, float]],
    project: Callable[[np.ndarray, float], np.ndarray],
    x1: ArrayLike,
    diameter: float,
    lipschitz: float,
    alpha: float,
    iterations: int | None = None,
    *,
    contains: Callable[[np.ndarray], bool] | None = None,
    callback: Callable[[int, float, float], None] | None = None,
) -> FirstOrderResult:
    """Paper 000, Theorem D.4's method: projected subgradient with biased subgradients and
    inexact projections, certified by Lemma D.5.

    ``T = ceil((4 D L / alpha)^2)`` unless ``iterations`` is given, constant step
    ``eta = D / (L sqrt T)``, projection accuracy ``xi = min{D, alpha eta / (6 D)}``;
    ``x_{t+1} = project(x_t - eta g_t, xi)`` for ``t = 1..T``, where ``(g_t, B_t) =
    oracle(x_t)`` is a ``B_t``-approximate subgradient (Def D.3 / eq. (15)):
    ``Phi(u) >= Phi(x_t) + <g_t, u - x_t> - B_t`` for all ``u`` in K, with ``||g_t|| <= L``.
    Returns the average ``xbar_T = (1/T) sum_{t <= T} x_t``. Every quantity that fixes the run
    (``T``, ``eta``, ``xi``) is public: the iteration count does not depend on the data.

    Certificate. The proof of Lemma D.5 gives, per step, ``Phi(x_t) - Phi* <=
    (||x_t - x*||^2 - ||x_{t+1} - x*||^2) / (2 eta) + (eta/2) ||g_t||^2 + B_t + D xi / eta +
    xi^2 / (2 eta)`` (from ``||x_{t+1} - x*||^2 <= ||p_t - x*||^2 + 2 D xi + xi^2`` and
    nonexpansiveness); summing, using ``||x_1 - x*|| <= D`` and convexity, the a-posteriori
    bound valid for this run is

        Phi(xbar_T) - Phi* <= D^2 / (2 eta T) + (eta / (2 T)) sum_t ||g_t||^2
                              + (1/T) sum_t B_t + D xi / eta + xi^2 / (2 eta),

    at most the printed ``D^2/(2 eta T) + eta L^2/2 + B + D xi/eta + xi^2/(2 eta)``, i.e.
    ``D L / sqrt T + B + D xi/eta + xi^2/(2 eta) <= alpha/4 + B + alpha/4`` with the defaults.
    ``certified_gap`` is this bound (times the rounding allowance) plus ``L (xi_f +
    rounding)`` for returning a point of K near ``xbar_T``; a bound above ``alpha`` raises.

    Parameters
    ----------
    oracle : callable
        ``x -> (g, B)`` as above (``B >= 0``).
    project : callable
        ``(y, xi) -> point of K`` within ``xi`` of ``Pi_K(y)``.
    x1 : array-like
        A point of K.
    diameter : float
        ``D >= diam(K)``.
    lipschitz : float
        ``L``: a bound on every ``||g_t||`` and on the Lipschitz constant of ``Phi`` on K
        (Theorem D.4: ``L = C + lam D`` with Prop D.6's oracle). Checked on every ``g_t``.
    alpha : float
        The target accuracy.
    iterations : int, optional
        ``T`` (public); default ``ceil((4 D L / alpha)^2)``.
    contains : callable, optional
        Membership test of K, as in :func:`adaptive_projected_subgradient`.
    callback : callable, optional
        ``callback(t, sum ||g||^2, sum B)`` after every iteration.

    Raises
    ------
    CertificationError
        The bound exceeds ``alpha``, or a hypothesis visibly fails (a norm above ``L``, a
        negative or non-finite ``B``, a projection that is not one).
    """
    owner = "biased_projected_subgradient"
    D = check_positive(diameter, "diameter", owner)
    L = check_positive(lipschitz, "lipschitz", owner)
    alpha = check_positive(alpha, "alpha", owner)
    if iterations is None:
        T = math.ceil((4.0 * D * L / alpha) ** 2)
    else:
        T = _check_iterations(iterations, "iterations", owner)
    eta = D / (L * math.sqrt(T))
    xi = min(D, alpha * eta / (6.0 * D))
    x = _start(x1, contains, owner)
    q = x.size
    proj = _Projector(project, contains, x.copy(), D, owner)
    avg = _Average(q)
    sum_g2 = 0.0
    sum_B = 0.0
    for t in range(1, T + 1):
        answer = oracle(x)
        if not (isinstance(answer, tuple) and len(answer) == 2):
            raise CertificationError(f"`{owner}`: the oracle must return a pair (g, B).")
        g = _vector(answer[0], q, "oracle")
        B = float(answer[1])
        if not (math.isfinite(B) and B >= 0.0):
            raise CertificationError(
                f"`{owner}`: the oracle's bias B must be finite and >= 0. Got {B!r}."
            )
        g2 = float(np.dot(g, g))
        if math.sqrt(g2) > L * (1.0 + 4.0 * (q + 4) * _EPS):
            raise CertificationError(
                f"`{owner}`: the oracle returned a subgradient of norm {math.sqrt(g2):.6g} > "
                f"L = {L:.6g}. Lemma D.5 needs ||g_t|| <= L: pass a valid `lipschitz`."
            )
        avg.add(x)
        sum_g2 += g2
        sum_B += B
        if callback is not None:
            callback(t, sum_g2, sum_B)
        if t == T:
            break  # x_{T+1} is not used by the output (the bound allows any point of K)
        step = eta * g
        y = x - step
        x = proj(y, _budget(xi, x, step, owner), x)
    mean, rounding = avg.value()
    xi_f = FINAL_XI_FACTOR * xi
    point = proj(mean, xi_f, None)
    rho = _rounding_factor(T, q)
    terms = {
        "distance": D * D / (2.0 * eta * T),
        "steps": eta / (2.0 * T) * sum_g2,
        "bias": sum_B / T,
        "projection": D * xi / eta + xi * xi / (2.0 * eta),
    }
    lemma = sum(terms.values())
    feasibility = L * (xi_f + rounding) * (1.0 + 4.0 * _EPS)
    gap = lemma * rho + feasibility
    if not gap <= alpha:
        raise CertificationError(
            f"`{owner}`: the Lemma D.5 bound {gap:.6g} exceeds alpha = {alpha:.6g} (terms: "
            + ", ".join(f"{k} {v:.3g}" for k, v in terms.items())
            + "). Nothing is certified. Lower the oracle's bias (B_t <= alpha/4) or raise "
            "`iterations`."
        )
    stats = {
        "method": "paper 000 Thm D.4 / Lemma D.5",
        "T": T,
        "eta": eta,
        "xi": xi,
        "lemma_d5_bound": lemma,
        "feasibility_term": feasibility,
        "final_xi": xi_f,
        "average_rounding": rounding,
        "mean_bias": sum_B / T,
        **terms,
    }
    return FirstOrderResult(
        point=point,
        certified_gap=gap,
        iterations=T,
        stop="iterations",
        stats=MappingProxyType(stats),
    )
