"""Paper 002's Algorithm 2: the deterministic projected subgradient method with an a-priori
iteration count (Prop 3.2 = [ABD17, Prop 5.3]; digest erratum 12: best iterate).

For a ``mu``-strongly convex ``F`` over a compact convex ``W`` whose subgradients on ``W`` have
norm at most ``G``, the method runs ``T = ceil(2 G^2 / (mu alpha))`` steps, a number fixed from
public quantities before any data is seen, and returns a point ``w_hat`` of ``W`` with

    F(w_hat) - min_W F <= 2 G^2 / (mu (T + 1)) <= alpha.

The guarantee holds **by analysis**, on every run and every dataset, with no certificate and no
data-dependent stopping (so the running time does not depend on the data either). That makes it
the last rung of the certified-solve ladder, where a private release must never abort
(DESIGN section 5), and a building block of paper 004's user-level mechanisms.

This module holds the calculators (:func:`subgradient_iterations`, :func:`subgradient_accuracy`,
:func:`subgradient_rounding_allowance`, :func:`affordable`), the method on value/subgradient
oracles (:func:`projected_subgradient`), and its use on a dpcvx declaration
(:func:`declaration_oracle`, :func:`regularized_subgradient_bound`, :func:`solve_declaration`).
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from dpcvx._validation import check_nonnegative, check_positive
from dpcvx.errors import CertificationError, InvalidParameterError, ModelingError
from dpcvx.modeling.declaration import Declaration
from dpcvx.modeling.domains import Domain
from dpcvx.modeling.gradients import per_example_gradients

__all__ = [
    "DEFAULT_WORK_BUDGET",
    "SubgradientResult",
    "affordable",
    "declaration_oracle",
    "projected_subgradient",
    "regularized_subgradient_bound",
    "solve_declaration",
    "subgradient_accuracy",
    "subgradient_iterations",
    "subgradient_rounding_allowance",
]

_EPS = float(np.finfo(float).eps)
#: a public cap on ``T * n * d`` (multiply-adds of the per-example subgradients): about 10 to
#: 40 seconds of numpy on one core for the catalogue losses (measured: ~0.18 ms per iteration
#: at n = 1000, d = 5, i.e. ~35 ns per unit of ``n d``)
DEFAULT_WORK_BUDGET = 1_000_000_000
#: relative rounding charged to each oracle subgradient, in units of ``(terms + d + 8) eps``
_ORACLE_ROUNDING = 64.0
#: relative rounding charged to each projection, in units of ``(d + 2)^1.5 eps``
_PROJECTION_ROUNDING = 8.0
#: domains whose ``project`` (then ``make_feasible``) is an exact Euclidean projection
_EXACT_KINDS = ("l2_ball", "l1_ball", "box", "simplex")

Oracle = Callable[[np.ndarray], tuple[float, np.ndarray]]
Projection = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True, slots=True, kw_only=True)
class SubgradientResult:
    """The output of paper 002's Algorithm 2 with its analytic accuracy bound.

    Attributes
    ----------
    point : ndarray
        ``w_hat``: the best iterate among ``w_1..w_T`` (by computed value) or, with
        ``averaged=True``, the projection of the weighted average
        ``sum_t 2 t / (T (T + 1)) w_t``. It is an output of ``project``, hence in ``W``.
    iterations : int
        ``T``, the number of subgradient steps (fixed in advance).
    averaged : bool
        Whether ``point`` is the weighted average (else the best iterate).
    value : float
        The computed ``F(point)`` (for the best iterate, the best value seen).
    analytic_bound : float
        ``2 G^2 / (mu (T + 1))``, rounded up: the exact-arithmetic guarantee of Prop 3.2.
    rounding_allowance : float
        The float64 allowance added to it (see :func:`subgradient_rounding_allowance`).
    bound : float
        ``analytic_bound + rounding_allowance``, rounded up: ``F(point) - min_W F <= bound``
        under the hypotheses of :func:`projected_subgradient`.
    bound_is_public : bool
        Whether ``bound`` depends on public inputs only. False only for the best iterate
        without a ``value_error``: the value-rounding term then uses the magnitude of the
        computed values (data). Calibrate noise from :func:`subgradient_accuracy` and
        :func:`subgradient_rounding_allowance` (public), never from a non-public ``bound``.
    oracle_calls : int
        ``T + 1``.
    stats : mapping
        The allowance's terms, the run's time and the best iterate's index (informational).
    """

    point: np.ndarray
    iterations: int
    averaged: bool
    value: float
    analytic_bound: float
    rounding_allowance: float
    bound: float
    bound_is_public: bool
    oracle_calls: int
    stats: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


# --------------------------------------------------------------------------- calculators
def _check_count(value: object, name: str, owner: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise InvalidParameterError(
            f"The `{name}` parameter of `{owner}` must be a positive integer. Got {value!r}."
        )
    return int(value)


def _round_up(x: Fraction) -> float:
    """The smallest float ``>= x`` (``x >= 0``); inf past the float range."""
    try:
        out = float(x)
    except OverflowError:
        return math.inf
    return out if Fraction(out) >= x else math.nextafter(out, math.inf)


def subgradient_iterations(G: float, mu: float, alpha: float) -> int:
    """``T = ceil(2 G^2 / (mu alpha))``: the iterations paper 002's Algorithm 2 needs for
    accuracy ``alpha`` (Prop 3.2; digest section 2.4).

    Computed exactly (rational arithmetic on the float inputs), so that
    ``2 G^2 / (mu (T + 1)) < alpha`` holds exactly; at least 1.

    Parameters
    ----------
    G : float
        A public bound on the norm of every subgradient of ``F`` on ``W`` (for
        ``F_lam = mean loss + (lam/2)||w - w0||^2``: ``L + lam D``).
    mu : float
        The strong-convexity modulus of ``F`` (``lam`` for ``F_lam``).
    alpha : float
        The accuracy target.

    Returns
    -------
    int

    Raises
    ------
    InvalidParameterError
        A parameter is not a positive finite number.
    """
    owner = "subgradient_iterations"
    G = check_positive(G, "G", owner)
    mu = check_positive(mu, "mu", owner)
    alpha = check_positive(alpha, "alpha", owner)
    ratio = 2 * Fraction(G) ** 2 / (Fraction(mu) * Fraction(alpha))
    return max(1, math.ceil(ratio))


def subgradient_accuracy(G: float, mu: float, T: int) -> float:
    """``2 G^2 / (mu (T + 1))``, rounded up: Prop 3.2's bound on ``F(w_hat) - F*`` after ``T``
    steps of paper 002's Algorithm 2 (exact arithmetic; add
    :func:`subgradient_rounding_allowance` for float64).

    Raises
    ------
    InvalidParameterError
        ``G`` or ``mu`` not positive and finite, ``T`` not a positive integer.
    """
    owner = "subgradient_accuracy"
    G = check_positive(G, "G", owner)
    mu = check_positive(mu, "mu", owner)
    T = _check_count(T, "T", owner)
    return _round_up(2 * Fraction(G) ** 2 / (Fraction(mu) * (T + 1)))


def affordable(T: int, n: int, d: int, budget: float = DEFAULT_WORK_BUDGET) -> bool:
    """Whether ``T * n * d <= budget``: a public test, made before any data is seen, of whether
    Algorithm 2's ``T`` full-subgradient steps (``O(n d)`` each) fit a work budget.

    Raises
    ------
    InvalidParameterError
        ``T``, ``n`` or ``d`` not positive integers, ``budget`` not positive and finite.
    """
    owner = "affordable"
    T = _check_count(T, "T", owner)
    n = _check_count(n, "n", owner)
    d = _check_count(d, "d", owner)
    budget = check_positive(budget, "budget", owner)
    return Fraction(T * n * d) <= Fraction(budget)


def subgradient_rounding_allowance(
    G: float,
    mu: float,
    T: int,
    *,
    d: int,
    diameter: float | None = None,
    start_norm: float = 0.0,
    gradient_error: float | None = None,
    projection_error: float | None = None,
    value_error: float = 0.0,
    average: bool = False,
) -> float:
    """A float64 allowance to add to :func:`subgradient_accuracy` (public inputs only).

    Prop 3.2's proof is in exact arithmetic. With a computed subgradient ``g^_k`` within
    ``eps_g`` of a true one, iterates ``w_{k+1}`` within ``e_k`` of the exact projection of the
    exact step, and ``D >= diam(W)``, the same telescoping (with weights ``k``, see
    :func:`projected_subgradient`) gives, with ``G' = G + eps_g``,

        F(w_hat) - F* <= 2 G'^2 / (mu (T+1)) + eps_g D
                         + (2 / (T (T+1))) sum_k k (k+1) mu (2 D e_k + e_k^2) / 4 + out,

    where ``e_k = a + b / (k + 1)`` (``a``: projection of points of size ``||w_0|| + D`` and the
    step's rounding; ``b``: the size ``2 G' / (mu (k+1))`` of step ``k``), summed in closed
    form, and ``out`` is ``2 value_error`` for the best iterate (its selection compares computed
    values) or ``G (e_avg + a)`` for the average (its accumulation error
    ``e_avg <= gamma_{T+3} (||w_0|| + D)`` and the final projection). The returned value is this
    minus ``2 G^2 / (mu (T+1))``, times ``1 + 64 eps``, rounded up.

    Parameters
    ----------
    G, mu, T
        As in :func:`subgradient_accuracy`.
    d : int
        The dimension.
    diameter : float, optional
        A bound on ``diam(W)``; ``2 G / mu`` is always one (strong convexity) and is used when
        smaller or when ``diameter`` is None.
    start_norm : float
        ``||w_0||`` (the start, a point of ``W``; public).
    gradient_error : float, optional
        A bound on ``||g^_k - g_k||``; default ``64 (d + 8) eps G``.
    projection_error : float, optional
        A bound on the float64 error of one call to ``project`` at points of size
        ``||w_0|| + 2 D`` (its inputs' size is charged separately); default
        ``8 (d + 2)^1.5 eps (2 ||w_0|| + 3 D) + 64 eps D``, generous for the catalogue
        domains (balls, boxes, l1 balls, simplices) followed by ``make_feasible``.
    value_error : float
        A bound on the error of each computed value (best iterate only).
    average : bool
        Whether the output is the weighted average.

    Returns
    -------
    float
    """
    owner = "subgradient_rounding_allowance"
    G = check_positive(G, "G", owner)
    mu = check_positive(mu, "mu", owner)
    T = _check_count(T, "T", owner)
    d = _check_count(d, "d", owner)
    D = 2.0 * G / mu * (1 + 4 * _EPS)
    if diameter is not None:
        D = min(D, check_positive(diameter, "diameter", owner))
    S = check_nonnegative(start_norm, "start_norm", owner) + D
    eps_g = (
        _ORACLE_ROUNDING * (d + 8) * _EPS * G
        if gradient_error is None
        else check_nonnegative(gradient_error, "gradient_error", owner)
    )
    value_error = check_nonnegative(value_error, "value_error", owner)
    proj_rel = _PROJECTION_ROUNDING * (d + 2) ** 1.5 * _EPS
    if projection_error is None:
        projection_error = proj_rel * (S + 2 * D) + 64 * _EPS * D
    else:
        projection_error = check_nonnegative(projection_error, "projection_error", owner)
    Gp = G + eps_g
    step = 2.0 * Gp / mu  # ||eta_k g^_k|| <= step / (k + 1)
    # e_k = a + b / (k + 1): the projection's own error, plus the rounding of w - eta g
    # (<= 4 eps (||w|| + ||eta g||)) and the projection of an input of size ||eta g|| more
    a = projection_error + 4 * _EPS * S
    b = (proj_rel + 4 * _EPS) * step
    gradient_terms = 2 * (Gp * Gp - G * G) / (mu * (T + 1)) + eps_g * D
    projection_terms = (
        mu / 2 * ((2 * D * a + a * a) * (T + 2) / 3 + (D * b + a * b) + b * b / (T + 1))
    )
    if average:
        m = T + 3
        gamma = m * _EPS / (1 - m * _EPS) if m * _EPS < 0.5 else math.inf
        out = G * (gamma * S + a)
    else:
        out = 2 * value_error
    total = (gradient_terms + projection_terms + out) * (1 + 64 * _EPS)
    return math.nextafter(total, math.inf) if total > 0 else 0.0


# --------------------------------------------------------------------------- the method
def _evaluate(
    oracle: Oracle, w: np.ndarray, d: int, G: float, slack: float, owner: str
) -> tuple[float, np.ndarray]:
    answer = oracle(w)
    if not (isinstance(answer, tuple) and len(answer) == 2):
        raise CertificationError(f"`{owner}`: the oracle must return a pair (value, subgradient).")
    value = float(answer[0])
    g = np.asarray(answer[1], dtype=float)
    if g.shape != (d,) or not (math.isfinite(value) and math.isfinite(float(np.sum(g)))):
        problem = "non-finite entries" if g.shape == (d,) else f"subgradient shape {g.shape}"
        raise CertificationError(
            f"`{owner}`: the oracle must return a finite value and a finite subgradient of shape "
            f"({d},). Got {problem}. The analytic guarantee needs exact (finite) subgradients."
        )
    norm = math.sqrt(float(np.dot(g, g)))
    if norm > G * (1 + 4 * (d + 4) * _EPS) + slack:
        raise CertificationError(
            f"`{owner}`: the oracle returned a subgradient of norm {norm:.6g} > G = {G:.6g}. "
            "Prop 3.2's guarantee needs G to bound every subgradient of F on the domain: pass a "
            "valid (public) G, e.g. L + lam D for an L-Lipschitz loss."
        )
    return value, g


def _project(project: Projection, y: np.ndarray, d: int, owner: str) -> np.ndarray:
    out = np.array(project(y), dtype=float).reshape(-1)
    if out.shape != (d,) or not math.isfinite(float(np.sum(out))):
        raise CertificationError(
            f"`{owner}`: `project` must return a finite point of shape ({d},). Got "
            f"{'non-finite entries' if out.shape == (d,) else f'shape {out.shape}'}."
        )
    return out


def projected_subgradient(
    oracle: Oracle,
    project: Projection,
    w0: ArrayLike,
    *,
    G: float,
    mu: float,
    alpha: float | None = None,
    T: int | None = None,
    average: bool = False,
    diameter: float | None = None,
    gradient_error: float | None = None,
    projection_error: float | None = None,
    value_error: float | None = None,
) -> SubgradientResult:
    """Paper 002, Algorithm 2, Prop 3.2 (digest erratum 12: best iterate): the deterministic
    projected subgradient method for a ``mu``-strongly convex ``F`` over ``W``.

    With ``w_0`` the start (a point of ``W``) and ``eta_t = 2 / (mu (t + 1))``, for
    ``t = 1..T``::

        (F(w_{t-1}), g_{t-1}) = oracle(w_{t-1})        # a subgradient of the FULL F
        w_t = project(w_{t-1} - eta_{t-1} g_{t-1})     # eta_0 = 2 / mu

    then ``F(w_T)`` is evaluated and the best iterate ``argmin_{t in [T]} F(w_t)`` is returned
    (or, with ``average=True``, ``project(sum_t 2 t / (T (T + 1)) w_t)``, whose value is then
    evaluated): ``T + 1`` oracle calls either way, each ``O(n d)`` numpy for a declaration's
    oracle, and ``O(d)`` extra work per step. The printed algorithm returns ``w_T`` and its
    update line reads ``n g(w, x_i)``; both are errata (digest erratum 12, pitfall P14): the
    guarantee is for the best iterate, with subgradients of the full objective.

    Guarantee (exact arithmetic). If every subgradient of ``F`` on ``W`` has norm ``<= G``, the
    oracle's are exact and ``project`` is the exact Euclidean projection onto ``W``, then

        F(w_hat) - min_W F <= 2 G^2 / (mu (T + 1))   (<= alpha for T = ceil(2 G^2/(mu alpha))).

    Proof (the Lacoste-Julien--Schmidt--Bach telescoping in this indexing): strong convexity
    and nonexpansiveness give ``F(w_k) - F* <= mu (k - 1)/4 ||w_k - w*||^2 - mu (k + 1)/4
    ||w_{k+1} - w*||^2 + G^2 / (mu (k + 1))``; times ``k``, summed over ``k = 1..T`` (the step
    at ``k = T`` is hypothetical), ``sum_k k (F(w_k) - F*) <= G^2 T / mu``, and both the best
    iterate and (by convexity) the weighted average are within ``2 G^2 / (mu (T + 1))``.
    ``w_0`` itself never enters the bound (its weight is 0) and is never returned.

    Floating point. The returned ``bound`` adds :func:`subgradient_rounding_allowance` for
    subgradients within ``gradient_error`` of exact ones, projections within
    ``projection_error`` of exact ones, the rounding of each step and of the average, and, for
    the best iterate, the comparison of computed values (``value_error`` each). Its defaults
    assume a well-scaled oracle (relative rounding ``64 (d + 8) eps``) and the catalogue
    domains' projections. The run checks what it can: a non-finite answer or a subgradient of
    norm above ``G`` raises :class:`CertificationError` (the hypotheses fail, so no guarantee
    would hold); nothing else depends on the data, and there is no early stop.

    Parameters
    ----------
    oracle : callable
        ``w -> (F(w), g)`` with ``g`` a subgradient of ``F`` at ``w`` (shape ``(d,)``).
    project : callable
        ``y -> Pi_W(y)``, the exact Euclidean projection (its outputs must lie in ``W``).
    w0 : array-like
        The start, a point of ``W`` (public).
    G : float
        A public bound on the norm of every subgradient of ``F`` on ``W``.
    mu : float
        The strong-convexity modulus of ``F``.
    alpha, T : float or int
        Exactly one: the accuracy target (then ``T = subgradient_iterations(G, mu, alpha)``)
        or the number of steps.
    average : bool
        Return the weighted average instead of the best iterate.
    diameter : float, optional
        A bound on ``diam(W)`` for the allowance (``2 G / mu`` is used when smaller).
    gradient_error, projection_error : float, optional
        Absolute float64 error bounds of the oracle's subgradients and of ``project``; see
        :func:`subgradient_rounding_allowance` for the defaults.
    value_error : float, optional
        A public bound on the error of each computed value (best iterate). None:
        ``64 (d + 8) eps`` times the largest ``|F(w_t)|`` computed, and
        ``bound_is_public`` is False.

    Returns
    -------
    SubgradientResult

    Raises
    ------
    InvalidParameterError
        Invalid ``G``, ``mu``, ``alpha``, ``T`` or ``w0``; both or neither of ``alpha``, ``T``.
    CertificationError
        The oracle or ``project`` returned something unusable, or a subgradient above ``G``.
    """
    owner = "projected_subgradient"
    G = check_positive(G, "G", owner)
    mu = check_positive(mu, "mu", owner)
    if (alpha is None) == (T is None):
        raise InvalidParameterError(
            f"`{owner}` needs exactly one of `alpha` (the accuracy target) and `T` (the number "
            f"of steps). Got alpha={alpha!r}, T={T!r}."
        )
    if T is None:
        assert alpha is not None  # exactly one of them, checked above
        T = subgradient_iterations(G, mu, alpha)
    else:
        T = _check_count(T, "T", owner)
    w = np.array(w0, dtype=float).reshape(-1)
    if w.size == 0 or not np.all(np.isfinite(w)):
        raise InvalidParameterError(
            f"The start `w0` of `{owner}` must be a non-empty finite vector (a point of the "
            f"domain). Got {w0!r}."
        )
    d = w.size
    if value_error is not None:
        value_error = check_nonnegative(value_error, "value_error", owner)
    eps_g = (
        _ORACLE_ROUNDING * (d + 8) * _EPS * G
        if gradient_error is None
        else check_nonnegative(gradient_error, "gradient_error", owner)
    )
    start_norm = float(np.linalg.norm(w))
    analytic = subgradient_accuracy(G, mu, T)

    started = time.perf_counter()
    best_value, best_point, best_index = math.inf, w, 0
    largest = 0.0
    weighted = np.zeros(d)
    for t in range(1, T + 1):
        value, g = _evaluate(oracle, w, d, G, eps_g, owner)
        if t > 1:  # value of w_{t-1}; w_0 is never a candidate
            largest = max(largest, abs(value))
            if value < best_value:
                best_value, best_point, best_index = value, w, t - 1
        eta = 2.0 / (mu * t)
        w = _project(project, w - eta * g, d, owner)
        if average:
            weighted += t * w
    if average:
        point = _project(project, weighted / (0.5 * T * (T + 1)), d, owner)
        value, _ = _evaluate(oracle, point, d, G, eps_g, owner)
    else:
        value, _ = _evaluate(oracle, w, d, G, eps_g, owner)
        largest = max(largest, abs(value))
        if value < best_value:
            best_value, best_point, best_index = value, w, T
        point, value = best_point, best_value
    seconds = time.perf_counter() - started

    public = average or value_error is not None
    if not average and value_error is None:
        value_error = _ORACLE_ROUNDING * (d + 8) * _EPS * largest
    allowance = subgradient_rounding_allowance(
        G,
        mu,
        T,
        d=d,
        diameter=diameter,
        start_norm=start_norm,
        gradient_error=eps_g,
        projection_error=projection_error,
        value_error=value_error or 0.0,
        average=average,
    )
    bound = analytic + allowance
    bound = math.nextafter(bound, math.inf) if allowance > 0 else analytic
    point = np.array(point, dtype=float)
    point.setflags(write=False)
    stats = {
        "method": "paper 002 Alg 2, Prop 3.2 (digest erratum 12)",
        "seconds": seconds,
        "best_index": None if average else best_index,
        "gradient_error": eps_g,
        "value_error": None if average else value_error,
        "G": G,
        "mu": mu,
    }
    return SubgradientResult(
        point=point,
        iterations=T,
        averaged=bool(average),
        value=float(value),
        analytic_bound=analytic,
        rounding_allowance=allowance,
        bound=bound,
        bound_is_public=bool(public),
        oracle_calls=T + 1,
        stats=MappingProxyType(stats),
    )


# --------------------------------------------------------------------------- declarations
def _exact_domain(decl: Declaration, owner: str) -> Domain:
    domain = decl.domain
    if domain.kind not in _EXACT_KINDS:
        raise ModelingError(
            f"`{owner}` needs an exact Euclidean projection onto the domain (l2 ball, l1 ball, "
            f"box or simplex); this domain is of kind {domain.kind!r}. Use a catalogue domain "
            "(dpcvx.domains) or the interior-point path (Problem.solve)."
        )
    return domain


def _center(
    decl: Declaration, center: ArrayLike | None, owner: str, name: str = "center"
) -> np.ndarray:
    if center is None:
        return np.asarray(decl.domain.center, dtype=float).copy()
    try:
        c = np.asarray(center, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(
            f"The `{name}` parameter of `{owner}` must be a finite numeric vector. "
            f"Got {type(center).__name__}."
        ) from exc
    if c.shape != (decl.d,) or not np.all(np.isfinite(c)):
        raise InvalidParameterError(
            f"The `{name}` parameter of `{owner}` must be a finite vector of shape ({decl.d},). "
            f"Got shape {c.shape}."
        )
    return c


def regularized_subgradient_bound(
    decl: Declaration, lipschitz: float, regularization: float, center: ArrayLike | None = None
) -> float:
    """``G = L + lam max_{w in W} ||w - w0||``, rounded up: a bound on the subgradients of
    ``F_lam(w) = (1/n) sum_i f(w, z_i) + (lam/2) ||w - w0||^2`` on ``W`` when every
    ``f(., z)`` is ``L``-Lipschitz there (paper 002, section 2.4: ``G = L + lam R``).

    ``max ||w - w0||`` is the domain's diameter ``D`` when ``w0`` lies in ``W``, else
    ``||w0 - c|| + r`` with ``B(c, r)`` the bounding ball (public quantities only).
    """
    owner = "regularized_subgradient_bound"
    L = check_positive(lipschitz, "lipschitz", owner)
    lam = check_nonnegative(regularization, "regularization", owner)
    reach = _reach(decl, _center(decl, center, owner))
    return math.nextafter((L + lam * reach) * (1 + 4 * _EPS), math.inf)


def _reach(decl: Declaration, w0: np.ndarray) -> float:
    """A bound on ``max_{w in W} ||w - w0||`` from public quantities."""
    domain = decl.domain
    reach = float(np.linalg.norm(w0 - domain.center)) * (1 + 4 * _EPS) + domain.radius
    if domain.contains(w0):
        reach = min(reach, domain.diameter)
    return reach


def declaration_oracle(
    decl: Declaration, regularization: float, center: ArrayLike | None = None
) -> tuple[Oracle, Projection]:
    """The oracle and projection of ``F_lam`` for :func:`projected_subgradient`.

    ``oracle(w) = (mean_i loss(w; z_i) + (lam/2) ||w - w0||^2, mean_i g_i + lam (w - w0))``
    with values from :meth:`Declaration.loss_values` and per-example subgradients from
    :func:`dpcvx.modeling.gradients.per_example_gradients`: ``O(n d)`` numpy, no Python loop
    over examples (except CVXPY's fallback for atoms outside the catalogue). ``project(y) =
    make_feasible(project(y))`` of the declaration's domain: the exact Euclidean projection
    for l2 balls, l1 balls, boxes and simplices, landing in the domain (checked in float64).

    Raises
    ------
    ModelingError
        The domain has no exact projection.
    """
    owner = "declaration_oracle"
    lam = check_nonnegative(regularization, "regularization", owner)
    w0 = _center(decl, center, owner)
    domain = _exact_domain(decl, owner)

    def oracle(w: np.ndarray) -> tuple[float, np.ndarray]:
        diff = w - w0
        value = float(np.mean(decl.loss_values(w))) + 0.5 * lam * float(np.dot(diff, diff))
        grad = np.mean(per_example_gradients(decl, w), axis=0) + lam * diff
        return value, grad

    def project(y: np.ndarray) -> np.ndarray:
        return domain.make_feasible(domain.project(y))

    return oracle, project


def solve_declaration(
    decl: Declaration,
    *,
    regularization: float,
    lipschitz: float,
    alpha: float | None = None,
    T: int | None = None,
    center: ArrayLike | None = None,
    start: ArrayLike | None = None,
    average: bool = False,
    loss_bound: float | None = None,
) -> SubgradientResult:
    """Paper 002, Algorithm 2, Prop 3.2 (digest erratum 12: best iterate) on a declaration:
    minimize ``F_lam(w) = (1/n) sum_i f(w, z_i) + (lam/2) ||w - w0||^2`` over its domain.

    ``mu = lam``, ``G = L + lam D`` (:func:`regularized_subgradient_bound`), ``T`` from
    ``alpha`` (:func:`subgradient_iterations`) or given; the start is the feasible projection
    of ``start`` (default ``w0``). Everything that fixes the run is public; the guarantee
    ``F_lam(w_hat) - min F_lam <= result.bound`` holds on every dataset on which every
    ``f(., z_i)`` is ``L``-Lipschitz on the domain (a larger subgradient raises
    :class:`CertificationError`).

    Parameters
    ----------
    decl : Declaration
        The declared problem (its domain must have an exact projection).
    regularization : float
        ``lam > 0``.
    lipschitz : float
        ``L``, a public Lipschitz bound of every ``f(., z)`` on the domain.
    alpha, T : float or int
        Exactly one: the accuracy target or the number of steps.
    center : array-like, optional
        ``w0``; default the center of the domain's bounding ball (as :meth:`Problem.solve`).
    start : array-like, optional
        The first iterate (projected onto the domain); default ``w0``.
    average : bool
        Return the weighted average instead of the best iterate.
    loss_bound : float, optional
        A public bound on ``|f(w, z)|`` over the domain and the data universe; it makes the
        best iterate's value-rounding allowance public
        (``64 (n + d + 8) eps (loss_bound + lam max ||w - w0||^2 / 2)``).

    Returns
    -------
    SubgradientResult
    """
    owner = "solve_declaration"
    lam = check_positive(regularization, "regularization", owner)
    L = check_positive(lipschitz, "lipschitz", owner)
    w0 = _center(decl, center, owner)
    oracle, project = declaration_oracle(decl, lam, w0)
    domain = decl.domain
    G = regularized_subgradient_bound(decl, L, lam, w0)
    first = project(w0 if start is None else _center(decl, start, owner, "start"))
    n, d = decl.n, decl.d
    rel = _ORACLE_ROUNDING * (n + d + 8) * _EPS
    scale = float(np.linalg.norm(first)) + domain.diameter + float(np.linalg.norm(w0))
    gradient_error = rel * (L + lam * scale)
    value_error = None
    if loss_bound is not None:
        reach = _reach(decl, w0)
        value_error = rel * (
            check_nonnegative(loss_bound, "loss_bound", owner) + 0.5 * lam * reach * reach
        )
    return projected_subgradient(
        oracle,
        project,
        first,
        G=G,
        mu=lam,
        alpha=alpha,
        T=T,
        average=average,
        diameter=domain.diameter,
        gradient_error=gradient_error,
        value_error=value_error,
    )
