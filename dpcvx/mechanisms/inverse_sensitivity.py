"""Inverse-sensitivity mechanisms for a 1-d ERM minimizer, and eq. (5) on a d = 2 net (paper 001,
eq. (3)-(5), Theorem 1), with the **corrected** exponents of erratum E1. **Reference-only.**

The inverse-sensitivity mechanism is intractable in general (paper 001, L117: "exactly sampling
from the un-normalized density is computationally intractable"; the paper gives no sampler).
This module ships the one case where both the score and the sampler are exact: the quantile
(pinball) loss on a public interval ``X = [a, b]``, whose score is piecewise constant. It is a
benchmark and an exact privacy test bed, not a production route: it is not wired into
``Problem.solve_private``; :func:`inverse_sensitivity_quantile` and
:func:`inverse_sensitivity_median` take a numpy array and an optional
:class:`~dpcvx.Accountant`.

Symbols (``docs/inverse_sensitivity.md`` has the derivation):

- records ``s_1..s_n`` (replace-one neighbors, ``n`` public), clipped to ``[a, b]`` (a fixed
  per-record map; for ``t`` in ``[a, b]`` it changes no derivative sign that matters);
- the pinball loss ``F(x; s) = q (s - x)_+ + (1 - q)(x - s)_+`` at level ``q`` in ``(0, 1)``
  (``q = 1/2`` is half the absolute loss: the median), Lipschitz constant
  ``L = max(q, 1 - q)``; ``f_S = (1/n) sum_i F(.; s_i)``, ``h(S) = argmin_X f_S`` (a set);
- ``m_<(t) = #{i : s_i < t}``, ``m_>(t) = #{i : s_i > t}``.

**Route "inverse" (eq. (3)/(4)).** ``len(S; t) = min {d_Ham(S, S') : t in argmin_X f_S'}``
over records in ``[a, b]``. For ``a < t < b`` the optimality condition is ``D^-(t) <= 0 <=
D^+(t)`` with ``n D^-(t) = m_<(t) - q n`` and ``n D^+(t) = (n - m_>(t)) - q n``, i.e.
``m_<(t) <= q n`` and ``m_>(t) <= (1 - q) n``. One replacement moves ``m_<`` (or ``m_>``) by at
most one, and moving a record to ``t`` itself attains that, so

    ``len(S; t) = max(0, ceil(m_<(t) - q n), ceil(m_>(t) - (1 - q) n))``.

(At ``t = a`` only the ``m_>`` term applies, at ``t = b`` only the ``m_<`` term: the normal
cone. Endpoints have measure zero, so the density ignores them.) ``len`` is constant on the
open intervals between the distinct clipped records and ``a, b``.

**Route "gradient" (eq. (5)).** ``G^rho_S(x) = inf_{y in X, |y - x| <= rho} dist(0, d f_S(y)
+ N_X(y))``; in 1-d with monotone one-sided derivatives it is ``max(0, [l > a] D^-(l),
-[u < b] D^+(u))`` with ``l = max(a, x - rho)``, ``u = min(b, x + rho)`` (digest 3.3(a)). It is
constant on the open intervals between ``a, b, a + rho, b - rho`` and ``s_i +- rho``.

**The corrected exponents (erratum E1 / pitfall P1).** Both scores, written as
``u = len`` and ``u = n G / (2 L)``, have sensitivity 1 under replace-one neighbors (``len`` by
the triangle inequality of the Hamming distance; ``G`` moves by at most ``2L/n`` because one
record's derivative lies in ``[-q, 1 - q]`` and ``q, 1 - q <= L``). The exponential mechanism
with density ``exp(-c u)`` has privacy loss ``|log pi_S(t) - log pi_S'(t)| <= c |u_S(t) -
u_S'(t)| + |log Z_S - log Z_S'| <= 2 c``. The paper prints ``c = epsilon`` (eq. (4):
``exp(-epsilon len)``; eq. (5): ``exp(-epsilon n G / (2 L))``), which is only
``2 epsilon``-DP, and the bound is attained in the limit (see the audit below). This module
uses ``c = epsilon / 2``: ``exp(-epsilon len / 2)`` and ``exp(-epsilon n G / (4 L))``, which
is ``epsilon``-DP; Asi and Duchi's original mechanism also has the ``1/2``. The printed rate is
available only to :func:`output_distribution` (``exponent="printed"``), for audits; no release
uses it.

**Sampler (exact).** Piece ``j`` (open interval ``(p_j, p_{j+1})``, exact rational ends, score
``u_j`` exact rational) is drawn with probability proportional to
``(p_{j+1} - p_j) exp(-c u_j)`` by dpcvx's exact Gumbel-max index sampler
(:func:`dpcvx.mechanisms.sampling.sample_index`); then the output is ``fl(p_j + (p_{j+1} - p_j)
U)``, the float64 nearest to the exact real for an ideal uniform ``U``, revealed 64 bits at a
time until both ends of its interval round to the same float (Las Vegas, exact rational
arithmetic). Rounding the ideal continuous output is post-processing, so the release has the
continuous mechanism's guarantee. What remains assumed is the float64 caveat shared by every
dpcvx exponential mechanism: the piece log-weights ``log(length) - c u`` are formed in float64
(a few ulps each, about ``1e-15`` in the privacy loss), and the running time is not observed.

**d = 2 (spec B.3(b)).** :class:`GradientInverseSensitivityNet` runs eq. (5), corrected, on a
public grid of a box for the geometric-median loss ``||x - s||_2``: a finite exponential
mechanism with the projected-gradient score minimized over net points within ``rho``
(sensitivity ``2L/n`` plus EM-PGM's float64 allowance), sampled exactly by
:func:`~dpcvx.mechanisms.sampling.sample_index`; :func:`net_max_log_ratio` is its audit.
Refused beyond ``d = 2`` (exponential in d).

**Cost.** ``O(n log n)`` pieces in exact rational arithmetic: fine for a reference on
``n <= 1e4``, slow beyond.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from mpmath import MPContext

from dpcvx._validation import check_real
from dpcvx.errors import DataError, InvalidParameterError
from dpcvx.mechanisms.base import OneEventPlan
from dpcvx.mechanisms.sampling import sample_index
from dpcvx.neighbors import REPLACE_ONE
from dpcvx.rng import make_rng
from dpcvx.types import Guarantee

if TYPE_CHECKING:
    from dpcvx.accounting.ledger import Accountant

__all__ = [
    "GradientInverseSensitivityNet",
    "InverseSensitivityPlan",
    "InverseSensitivityQuantile",
    "NetPlan",
    "PiecewiseDistribution",
    "inverse_sensitivity_median",
    "inverse_sensitivity_quantile",
    "inverse_sensitivity_length",
    "gradient_inverse_sensitivity_net",
    "max_log_ratio",
    "net_max_log_ratio",
    "output_distribution",
]

_OWNER = "InverseSensitivityQuantile"
Route = Literal["inverse", "gradient"]
Exponent = Literal["corrected", "printed"]
_ROUTES = ("inverse", "gradient")
_EXPONENTS = ("corrected", "printed")
#: bits of the high-precision context used by the exact audit (:func:`max_log_ratio`)
_AUDIT_BITS = 256
#: 64-bit refinements of the in-piece uniform before giving up (probability below 2^-1000)
_MAX_ROUNDS = 16


# ----------------------------------------------------------------------------- records
@dataclass(frozen=True, slots=True, kw_only=True)
class PiecewiseDistribution:
    """The exact output density of one release: piecewise constant on ``[a, b]``.

    **Data-dependent: for tests and audits only.** Releasing any field voids the guarantee.

    Attributes
    ----------
    breakpoints : tuple of Fraction
        ``a = p_0 < p_1 < ... < p_K = b``, exact.
    scores : tuple of Fraction
        The normalized score ``u_j`` on ``(p_j, p_{j+1})``: ``len`` (route ``"inverse"``) or
        ``n G^rho / (2 L)`` (route ``"gradient"``); sensitivity 1.
    rate : Fraction
        ``c`` in ``density ∝ exp(-c u)``: ``epsilon / 2`` (corrected) or ``epsilon``
        (printed, audits only).
    """

    breakpoints: tuple[Fraction, ...]
    scores: tuple[Fraction, ...]
    rate: Fraction

    def log_weights(self) -> np.ndarray:
        """Float64 ``log(p_{j+1} - p_j) - c u_j`` for every piece (unnormalized)."""
        lengths = [float(hi - lo) for lo, hi in zip(self.breakpoints[:-1], self.breakpoints[1:])]
        return np.array(
            [math.log(w) - float(self.rate * u) for w, u in zip(lengths, self.scores)], float
        )

    def _log_normalizer(self, ctx: Any) -> Any:
        total = ctx.mpf(0)
        for lo, hi, u in zip(self.breakpoints[:-1], self.breakpoints[1:], self.scores):
            total += _mp(ctx, hi - lo) * ctx.exp(-_mp(ctx, self.rate * u))
        return ctx.log(total)

    def piece_probabilities(self) -> np.ndarray:
        """The exact probability of every piece, computed at 256 bits, as float64."""
        ctx = _context()
        log_z = self._log_normalizer(ctx)
        out = []
        for lo, hi, u in zip(self.breakpoints[:-1], self.breakpoints[1:], self.scores):
            log_w = ctx.log(_mp(ctx, hi - lo)) - _mp(ctx, self.rate * u)
            out.append(float(ctx.exp(log_w - log_z)))
        return np.array(out, float)

    def piece_of(self, t: Fraction | float) -> int:
        """The index of the piece whose closure holds ``t`` (left piece at a breakpoint)."""
        k = bisect.bisect_left(self.breakpoints, Fraction(t)) - 1
        return min(max(k, 0), len(self.scores) - 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class InverseSensitivityPlan(OneEventPlan):
    """Everything a release uses, fixed from public quantities before any data is read."""

    guarantee: Guarantee
    n: int
    lower: float  # a
    upper: float  # b
    quantile: float  # q
    lipschitz: float  # L = max(q, 1 - q) of the pinball loss
    route: str  # "inverse" (eq. (3)/(4)) or "gradient" (eq. (5))
    smoothing: float  # rho (gradient route)
    rate: Fraction  # c = epsilon / 2 (corrected, E1)
    detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    ledger_detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))


# ----------------------------------------------------------------------------- helpers
@functools.cache
def _context() -> Any:
    """This module's own mpmath context at 256 bits (created once; its precision is never
    changed afterwards, so sharing it between threads is safe; mpmath's global ``mp`` is not
    touched)."""
    ctx = MPContext()
    ctx.prec = _AUDIT_BITS
    return ctx


def _mp(ctx: Any, x: Fraction) -> Any:
    return ctx.mpf(x.numerator) / x.denominator


def _check_bounds(lower: object, upper: object, owner: str) -> tuple[float, float]:
    a = check_real(lower, "lower", owner)
    b = check_real(upper, "upper", owner)
    if not a < b:
        raise InvalidParameterError(
            f"`{owner}` needs a public interval with `lower` < `upper`. Got lower={lower!r}, "
            f"upper={upper!r}. Pass finite bounds fixed before seeing the data."
        )
    return a, b


def _check_quantile(quantile: object, owner: str) -> float:
    q = check_real(quantile, "quantile", owner)
    if not 0.0 < q < 1.0:
        raise InvalidParameterError(
            f"The `quantile` parameter of `{owner}` must lie in (0, 1). Got {quantile!r}."
        )
    return q


def _check_epsilon(epsilon: object, owner: str) -> float:
    eps = check_real(epsilon, "epsilon", owner)
    if eps <= 0.0:
        raise InvalidParameterError(
            f"The `epsilon` parameter of `{owner}` must be a positive finite float. "
            f"Got {epsilon!r}."
        )
    return eps


def _check_data(data: object, owner: str) -> np.ndarray:
    """The records as a 1-d float array; raises :class:`DataError` before anything is spent."""
    try:
        arr = np.asarray(data, dtype=float)
    except (TypeError, ValueError) as exc:
        raise DataError(f"The data of `{owner}` must be a numeric 1-d array.") from exc
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise DataError(
            f"The data of `{owner}` must be a 1-d array (or shape (n, 1)). Got {arr.shape}."
        )
    if arr.size == 0:
        raise DataError(f"The data of `{owner}` is empty: there is nothing to release.")
    if not np.all(np.isfinite(arr)):
        raise DataError(f"The data of `{owner}` contains NaN or inf; remove those rows first.")
    return arr


def inverse_sensitivity_length(
    data: Sequence[float] | np.ndarray,
    t: float,
    *,
    lower: float,
    upper: float,
    quantile: float = 0.5,
) -> int:
    """``len(S; t)`` of eq. (3) for ``h(S) = argmin_[a, b]`` of the mean pinball loss.

    The fewest records of ``S`` (clipped to ``[a, b]``) to replace by records of ``[a, b]`` so
    that ``t`` becomes a minimizer: ``max(0, [t > a] ceil(m_< - q n), [t < b] ceil(m_> - (1 -
    q) n))``. **Data-dependent: tests and audits only.**
    """
    owner = "inverse_sensitivity_length"
    a, b = _check_bounds(lower, upper, owner)
    q = Fraction(_check_quantile(quantile, owner))
    s = [Fraction(float(v)) for v in np.clip(_check_data(data, owner), a, b)]
    tt = Fraction(check_real(t, "t", owner))
    if not a <= tt <= b:
        raise InvalidParameterError(f"`{owner}` needs `t` in [lower, upper]. Got {t!r}.")
    n = len(s)
    below = sum(v < tt for v in s)
    above = sum(v > tt for v in s)
    need = 0
    if tt > a:
        need = max(need, math.ceil(below - q * n))
    if tt < b:
        need = max(need, math.ceil(above - (1 - q) * n))
    return need


def _pieces(cuts: set[Fraction], a: Fraction, b: Fraction) -> tuple[Fraction, ...]:
    inner = sorted(c for c in cuts if a < c < b)
    return (a, *inner, b)


def _inverse_scores(
    s: list[float], points: tuple[Fraction, ...], q: Fraction
) -> tuple[Fraction, ...]:
    n = len(s)
    out = []
    for lo, hi in zip(points[:-1], points[1:]):
        below = bisect.bisect_right(s, lo)  # records <= lo, i.e. < t on (lo, hi)
        above = n - bisect.bisect_left(s, hi)  # records >= hi, i.e. > t on (lo, hi)
        out.append(Fraction(max(0, math.ceil(below - q * n), math.ceil(above - (1 - q) * n))))
    return tuple(out)


def _gradient_scores(
    s: list[float],
    points: tuple[Fraction, ...],
    q: Fraction,
    lipschitz: Fraction,
    rho: Fraction,
    a: Fraction,
    b: Fraction,
) -> tuple[Fraction, ...]:
    """``n G^rho / (2 L)`` at the midpoint of every piece (constant on it), exactly."""
    n = len(s)
    out = []
    for lo, hi in zip(points[:-1], points[1:]):
        x = (lo + hi) / 2
        left = max(a, x - rho)
        right = min(b, x + rho)
        g = Fraction(0)
        if left > a:  # n D^-(left) = #{s < left} - q n
            g = max(g, bisect.bisect_left(s, left) - q * n)
        if right < b:  # -n D^+(right) = q n - #{s <= right}
            g = max(g, q * n - bisect.bisect_right(s, right))
        out.append(g / (2 * lipschitz))
    return tuple(out)


def output_distribution(
    data: Sequence[float] | np.ndarray,
    *,
    epsilon: float,
    lower: float,
    upper: float,
    quantile: float = 0.5,
    route: Route = "inverse",
    smoothing: float = 0.0,
    exponent: Exponent = "corrected",
) -> PiecewiseDistribution:
    """The exact output density of the mechanism on ``data``. **Tests and audits only.**

    ``exponent="corrected"`` is the density every release samples (``exp(-epsilon u / 2)``);
    ``exponent="printed"`` is paper 001's printed eq. (4)/(5) (``exp(-epsilon u)``), which is
    only ``2 epsilon``-DP: it exists as the negative control of the privacy audit and is never
    released.
    """
    owner = "output_distribution"
    eps = _check_epsilon(epsilon, owner)
    a_f, b_f = _check_bounds(lower, upper, owner)
    q_f = _check_quantile(quantile, owner)
    if route not in _ROUTES:
        raise InvalidParameterError(
            f"The `route` parameter of `{owner}` must be one of {_ROUTES}. Got {route!r}."
        )
    if exponent not in _EXPONENTS:
        raise InvalidParameterError(
            f"The `exponent` parameter of `{owner}` must be one of {_EXPONENTS}. Got {exponent!r}."
        )
    rho_f = _check_smoothing(smoothing, route, owner)
    s = sorted(float(v) for v in np.clip(_check_data(data, owner), a_f, b_f))
    a, b, q, rho = Fraction(a_f), Fraction(b_f), Fraction(q_f), Fraction(rho_f)
    rate = Fraction(eps) / 2 if exponent == "corrected" else Fraction(eps)
    if route == "inverse":
        points = _pieces({Fraction(v) for v in s}, a, b)
        scores = _inverse_scores(s, points, q)
    else:
        cuts = {a + rho, b - rho}
        for v in s:
            cuts.update((Fraction(v) - rho, Fraction(v) + rho))
        points = _pieces(cuts, a, b)
        scores = _gradient_scores(s, points, q, max(q, 1 - q), rho, a, b)
    return PiecewiseDistribution(breakpoints=points, scores=scores, rate=rate)


def max_log_ratio(first: PiecewiseDistribution, second: PiecewiseDistribution) -> float:
    """``sup_t |log pi_first(t) - log pi_second(t)|`` over ``[a, b]``, computed exactly: exact
    rational pieces and scores, ``exp``/``log`` at 256 bits (error far below ``1e-60``).

    The two densities are constant on the pieces of the common refinement of their breakpoints,
    so the supremum is a maximum over those pieces. Both must be on the same interval.
    """
    if (
        first.breakpoints[0] != second.breakpoints[0]
        or first.breakpoints[-1] != second.breakpoints[-1]
    ):
        raise InvalidParameterError(
            "`max_log_ratio` compares two densities on the same interval. Got "
            f"[{float(first.breakpoints[0])}, {float(first.breakpoints[-1])}] and "
            f"[{float(second.breakpoints[0])}, {float(second.breakpoints[-1])}]."
        )
    ctx = _context()
    z1, z2 = first._log_normalizer(ctx), second._log_normalizer(ctx)
    points = sorted(set(first.breakpoints) | set(second.breakpoints))
    worst = ctx.mpf(0)
    for lo, hi in zip(points[:-1], points[1:]):
        mid = (lo + hi) / 2
        u1 = first.scores[first.piece_of(mid)]
        u2 = second.scores[second.piece_of(mid)]
        diff = -_mp(ctx, first.rate * u1) + _mp(ctx, second.rate * u2) - z1 + z2
        worst = max(worst, abs(diff))
    return float(worst)


def _check_smoothing(smoothing: object, route: str, owner: str) -> float:
    rho = check_real(smoothing, "smoothing", owner)
    if rho < 0.0:
        raise InvalidParameterError(
            f"The `smoothing` parameter of `{owner}` must be a non-negative finite float "
            f"(rho of eq. (5)). Got {smoothing!r}."
        )
    if route == "inverse" and rho != 0.0:
        raise InvalidParameterError(
            f"The `smoothing` parameter of `{owner}` applies to route='gradient' only (eq. (5)). "
            f"Got smoothing={smoothing!r} with route='inverse'."
        )
    return rho


def _uniform_in(lo: Fraction, hi: Fraction, rng: np.random.Generator) -> float:
    """``fl(lo + (hi - lo) U)`` for an ideal uniform ``U``, exactly (Las Vegas)."""
    width = hi - lo
    k, bits = 0, 0
    for _ in range(_MAX_ROUNDS):
        word = int(np.asarray(rng.integers(0, 2**64, size=1, dtype=np.uint64)).ravel()[0])
        k, bits = (k << 64) | word, bits + 64
        left = float(lo + width * Fraction(k, 1 << bits))
        right = float(lo + width * Fraction(k + 1, 1 << bits))
        if left == right:  # float() of a Fraction is correctly rounded and monotone
            return left
    raise InvalidParameterError(  # pragma: no cover - probability below 2^-1000
        "dpcvx's exact uniform could not decide the output float; nothing was released."
    )


def _sample(dist: PiecewiseDistribution, rng: np.random.Generator) -> float:
    j = sample_index(dist.log_weights(), rng)
    return _uniform_in(dist.breakpoints[j], dist.breakpoints[j + 1], rng)


# ----------------------------------------------------------------------------- mechanism
@dataclass(frozen=True, slots=True, kw_only=True)
class InverseSensitivityQuantile:
    """Paper 001's inverse-sensitivity mechanism (eq. (3)/(4)) or its rho-smoothed gradient
    version (eq. (5)) for the ``q``-quantile (pinball-loss minimizer) on a public interval,
    with the corrected exponent ``exp(-epsilon u / 2)`` (erratum E1). **Reference-only: exact
    here because the loss is 1-d and piecewise linear; intractable in general.**

    Parameters
    ----------
    lower, upper : float
        The public interval ``X = [a, b]`` (finite, ``a < b``). Records are clipped to it.
    quantile : float, default 0.5
        ``q`` in ``(0, 1)``; ``0.5`` is the median.
    route : {"inverse", "gradient"}, default "inverse"
        ``"inverse"``: density ``∝ exp(-epsilon len(S; t) / 2)`` (eq. (4), corrected).
        ``"gradient"``: density ``∝ exp(-epsilon n G^rho_S(t) / (4 L))`` (eq. (5), corrected),
        ``L = max(q, 1 - q)``.
    smoothing : float, default 0.0
        ``rho >= 0`` of eq. (5) (route ``"gradient"`` only; must be 0 for ``"inverse"``).

    Notes
    -----
    Guarantee: pure ``epsilon``-DP under replace-one neighbors with ``n`` public (001 L55,
    E14), for every dataset (no assumption on the records beyond finiteness: they are clipped
    to ``[a, b]``, a fixed per-record map). The score ``u`` (``len``, or ``n G / (2 L)``) has
    sensitivity 1 and the density is ``exp(-(epsilon / 2) u)`` normalized over ``[a, b]``:
    McSherry-Talwar gives ``epsilon``. Paper 001 prints ``exp(-epsilon u)`` (eq. (4), (5);
    proof L381), which is ``2 epsilon``-DP (E1/P1); :func:`max_log_ratio` on worst-case pairs
    shows it. Utility (Thm 1 with ``epsilon`` replaced by ``epsilon / 2``): the mass
    concentrates on ``{t : len(S; t) <= (2 / epsilon)(log(1 / beta) + log((b - a) / w))}``
    with ``w`` the length of the low-score region.
    """

    lower: float
    upper: float
    quantile: float = 0.5
    route: Route = "inverse"
    smoothing: float = 0.0

    def __post_init__(self) -> None:
        a, b = _check_bounds(self.lower, self.upper, _OWNER)
        object.__setattr__(self, "lower", a)
        object.__setattr__(self, "upper", b)
        object.__setattr__(self, "quantile", _check_quantile(self.quantile, _OWNER))
        if self.route not in _ROUTES:
            raise InvalidParameterError(
                f"The `route` parameter of `{_OWNER}` must be one of {_ROUTES}. Got {self.route!r}."
            )
        object.__setattr__(self, "smoothing", _check_smoothing(self.smoothing, self.route, _OWNER))

    def plan(self, *, n: int, epsilon: float, delta: float = 0.0) -> InverseSensitivityPlan:
        """The public plan of one release on ``n`` records (no data read, nothing spent)."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise InvalidParameterError(
                f"The `n` parameter of `{_OWNER}.plan` must be a positive int. Got {n!r}."
            )
        eps = _check_epsilon(epsilon, _OWNER)
        d = check_real(delta, "delta", _OWNER)
        if d != 0.0:
            raise InvalidParameterError(
                f"`{_OWNER}` is a pure epsilon-DP mechanism: `delta` must be 0. Got {delta!r}."
            )
        q = self.quantile
        facts = {
            "mechanism": _OWNER,
            "paper": "001 eq. (3)-(5), Theorem 1 (reference-only)",
            "route": self.route,
            "exponent": "exp(-epsilon * u / 2) (corrected, erratum E1; printed exp(-epsilon u) "
            "is 2 epsilon-DP)",
            "score_sensitivity": 1,
            "interval": (self.lower, self.upper),
            "quantile": q,
            "smoothing": self.smoothing,
            "n": int(n),
        }
        return InverseSensitivityPlan(
            guarantee=Guarantee(epsilon=eps, delta=0.0, neighbors=REPLACE_ONE),
            n=int(n),
            lower=self.lower,
            upper=self.upper,
            quantile=q,
            lipschitz=max(q, 1.0 - q),
            route=self.route,
            smoothing=self.smoothing,
            rate=Fraction(eps) / 2,
            detail=MappingProxyType(facts),
            ledger_detail=MappingProxyType(
                {"mechanism": _OWNER, "route": self.route, "composition": "single release"}
            ),
        )

    def distribution(
        self, plan: InverseSensitivityPlan, data: Sequence[float] | np.ndarray
    ) -> PiecewiseDistribution:
        """The exact density a release samples. **Data-dependent: tests and audits only.**"""
        return output_distribution(
            data,
            epsilon=plan.guarantee.epsilon,
            lower=plan.lower,
            upper=plan.upper,
            quantile=plan.quantile,
            route=plan.route,  # type: ignore[arg-type]
            smoothing=plan.smoothing,
        )

    def release(
        self,
        plan: InverseSensitivityPlan,
        data: Sequence[float] | np.ndarray,
        rng: np.random.Generator,
    ) -> float:
        """One draw from :meth:`distribution` (the budget must already be reserved)."""
        arr = _check_data(data, _OWNER)
        if arr.size != plan.n:
            raise DataError(f"The plan of `{_OWNER}` is for n={plan.n} records. Got {arr.size}.")
        return _sample(self.distribution(plan, arr), rng)


# ----------------------------------------------------------------------------- entry points
def inverse_sensitivity_quantile(
    data: Sequence[float] | np.ndarray,
    *,
    epsilon: float,
    lower: float,
    upper: float,
    quantile: float = 0.5,
    delta: float = 0.0,
    route: Route = "inverse",
    smoothing: float = 0.0,
    rng: None | int | np.random.Generator = None,
    accountant: Accountant | None = None,
) -> float:
    """An ``epsilon``-DP ``q``-quantile of ``data`` on ``[lower, upper]`` by the corrected
    inverse-sensitivity mechanism (paper 001 eq. (3)/(4); ``route="gradient"``: eq. (5)).
    **Reference-only** (see :class:`InverseSensitivityQuantile`).

    Order: parameters and the shape of ``data`` are validated (nothing spent on error), the
    plan is made from public numbers, one pure event is reserved on ``accountant`` (if given),
    then the data is read and one float is released.

    Raises
    ------
    InvalidParameterError
        Bad public parameter (bounds not finite or not ordered, ``epsilon <= 0``,
        ``delta != 0``, quantile outside ``(0, 1)``, ...). Nothing is spent.
    DataError
        Empty, non-1-d or non-finite data. Nothing is spent.
    PrivacyBudgetError
        The accountant cannot afford ``epsilon``. Nothing is spent.
    """
    mechanism = InverseSensitivityQuantile(
        lower=lower, upper=upper, quantile=quantile, route=route, smoothing=smoothing
    )
    arr = _check_data(data, _OWNER)
    plan = mechanism.plan(n=int(arr.size), epsilon=epsilon, delta=delta)
    generator, _ = make_rng(rng)
    if accountant is not None:
        (event,) = plan.events(_OWNER)
        accountant.reserve(event)
    return mechanism.release(plan, arr, generator)


def inverse_sensitivity_median(
    data: Sequence[float] | np.ndarray,
    *,
    epsilon: float,
    lower: float,
    upper: float,
    delta: float = 0.0,
    route: Route = "inverse",
    smoothing: float = 0.0,
    rng: None | int | np.random.Generator = None,
    accountant: Accountant | None = None,
) -> float:
    """:func:`inverse_sensitivity_quantile` at ``quantile=0.5``: the ``epsilon``-DP median."""
    return inverse_sensitivity_quantile(
        data,
        epsilon=epsilon,
        lower=lower,
        upper=upper,
        quantile=0.5,
        delta=delta,
        route=route,
        smoothing=smoothing,
        rng=rng,
        accountant=accountant,
    )


# ----------------------------------------------------------------------------- d = 2 net route
_NET_OWNER = "GradientInverseSensitivityNet"
#: refuse nets larger than this (a reference route: every point costs n gradient evaluations)
_MAX_NET_POINTS = 250_000


@dataclass(frozen=True, slots=True, kw_only=True)
class NetPlan(OneEventPlan):
    """The public plan of one release of :class:`GradientInverseSensitivityNet`."""

    guarantee: Guarantee
    n: int
    lower: tuple[float, float]
    upper: tuple[float, float]
    spacing: float  # h, largest grid step
    smoothing: float  # rho
    step_size: float  # gamma (public)
    lipschitz: float  # L = 1 (Euclidean-distance loss)
    sensitivity: float  # Delta = 2L/n plus a float64 rounding allowance (em_pgm.score_sensitivity)
    net_size: int
    detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    ledger_detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))


def _check_box(lower: object, upper: object, owner: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        lo = np.asarray(lower, dtype=float).reshape(-1)
        hi = np.asarray(upper, dtype=float).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(
            f"`{owner}` needs `lower` and `upper` as two finite numbers each (a box in R^2). "
            f"Got {lower!r}, {upper!r}."
        ) from exc
    if lo.shape != (2,) or hi.shape != (2,):
        raise InvalidParameterError(
            f"`{owner}` is the d = 2 reference route (exponential in d; use "
            "InverseSensitivityQuantile for d = 1, nothing for d >= 3): `lower` and `upper` "
            f"must have 2 entries each. Got shapes {lo.shape} and {hi.shape}."
        )
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(lo < hi)):
        raise InvalidParameterError(
            f"`{owner}` needs a finite public box with lower < upper in both coordinates. "
            f"Got lower={lo.tolist()}, upper={hi.tolist()}."
        )
    return lo, hi


def _net_axes(lo: np.ndarray, hi: np.ndarray, spacing: float) -> list[np.ndarray]:
    axes = []
    for j in range(2):
        K = max(1, math.ceil((hi[j] - lo[j]) / spacing * (1.0 - 1e-12)))
        axis = lo[j] + (hi[j] - lo[j]) * (np.arange(K + 1) / K)
        axis[-1] = hi[j]
        axes.append(axis)
    return axes


def _check_points(data: object, owner: str) -> np.ndarray:
    try:
        arr = np.asarray(data, dtype=float)
    except (TypeError, ValueError) as exc:
        raise DataError(f"The data of `{owner}` must be a numeric (n, 2) array.") from exc
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise DataError(f"The data of `{owner}` must have shape (n, 2). Got {arr.shape}.")
    if arr.shape[0] == 0:
        raise DataError(f"The data of `{owner}` is empty: there is nothing to release.")
    if not np.all(np.isfinite(arr)):
        raise DataError(f"The data of `{owner}` contains NaN or inf; remove those rows first.")
    return arr


@dataclass(frozen=True, slots=True, kw_only=True)
class GradientInverseSensitivityNet:
    """Paper 001's rho-smoothed gradient inverse-sensitivity mechanism (eq. (5), Thm 1) in
    ``d = 2`` on a public grid of a box, for the geometric-median loss ``F(x; s) = ||x - s||_2``
    (``L = 1``), with the corrected exponent (erratum E1). **Reference-only: exponential in
    d; eq. (5) is intractable in general.** Spec 001 B.3(b).

    Parameters
    ----------
    lower, upper : pair of float
        The public box ``X = [lower_1, upper_1] x [lower_2, upper_2]``.
    spacing : float
        Largest grid step ``h``; the net is the grid of the box (boundary included).
    smoothing : float, default 0.0
        ``rho >= 0``: the score is minimized over net points within ``rho``.
    step_size : float or None
        The public ``gamma`` of the gradient mapping (default ``spacing``).

    Notes
    -----
    Score (spec B.3(b)): ``s_S(x) = min_{y in N, ||y - x|| <= rho} (1/gamma) ||y - Pi_X(y -
    gamma g_S(y))||`` with ``g_S(y) = (1/n) sum_i clip_L((y - s_i) / ||y - s_i||)`` (``0`` at
    ``y = s_i``: a fixed per-record selection of the subdifferential). ``Pi_X`` is the
    coordinate clip, nonexpansive, and ``gamma`` is the same on both datasets, so
    ``|s_S(y) - s_S'(y)| <= ||g_S(y) - g_S'(y)|| <= 2L/n``; a minimum over a public set keeps
    it. ``Delta`` is ``2L/n`` plus EM-PGM's float64 rounding allowance
    (:func:`dpcvx.mechanisms.em_pgm.score_sensitivity` with no regularization). Release:
    ``x in N`` with probability ``∝ exp(-epsilon s(x) / (2 Delta))``, i.e. the corrected
    ``exp(-epsilon n G / (4 L))``; the printed eq. (5) ``exp(-epsilon n G / (2 L))`` is
    ``2 epsilon``-DP. Pure ``epsilon``-DP, replace-one neighbors, ``n`` public; records may
    be anywhere in ``R^2`` (the clip bounds every per-record gradient). With ``rho = 0`` this
    is EM-PGM (paper 000 App. E) with no regularization on a box.
    """

    lower: tuple[float, float]
    upper: tuple[float, float]
    spacing: float
    smoothing: float = 0.0
    step_size: float | None = None

    def __post_init__(self) -> None:
        lo, hi = _check_box(self.lower, self.upper, _NET_OWNER)
        object.__setattr__(self, "lower", (float(lo[0]), float(lo[1])))
        object.__setattr__(self, "upper", (float(hi[0]), float(hi[1])))
        h = check_real(self.spacing, "spacing", _NET_OWNER)
        if h <= 0:
            raise InvalidParameterError(
                f"The `spacing` parameter of `{_NET_OWNER}` must be a positive finite float. "
                f"Got {self.spacing!r}."
            )
        object.__setattr__(self, "spacing", h)
        object.__setattr__(
            self, "smoothing", _check_smoothing(self.smoothing, "gradient", _NET_OWNER)
        )
        gamma = h if self.step_size is None else check_real(self.step_size, "step_size", _NET_OWNER)
        if gamma <= 0:
            raise InvalidParameterError(
                f"The `step_size` parameter of `{_NET_OWNER}` must be a positive finite float "
                f"(public gamma). Got {self.step_size!r}."
            )
        object.__setattr__(self, "step_size", gamma)

    def net(self) -> np.ndarray:
        """The public net: the grid of the box, shape ``(N, 2)``, rows in ``ij`` order."""
        axes = _net_axes(np.array(self.lower), np.array(self.upper), self.spacing)
        return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 2)

    def plan(self, *, n: int, epsilon: float, delta: float = 0.0) -> NetPlan:
        """The public plan of one release on ``n`` records (no data read, nothing spent)."""
        from dpcvx.mechanisms.em_pgm import score_sensitivity

        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise InvalidParameterError(
                f"The `n` parameter of `{_NET_OWNER}.plan` must be a positive int. Got {n!r}."
            )
        eps = _check_epsilon(epsilon, _NET_OWNER)
        if check_real(delta, "delta", _NET_OWNER) != 0.0:
            raise InvalidParameterError(
                f"`{_NET_OWNER}` is a pure epsilon-DP mechanism: `delta` must be 0. Got {delta!r}."
            )
        lo, hi = np.array(self.lower), np.array(self.upper)
        size = math.prod(a.size for a in _net_axes(lo, hi, self.spacing))
        if size > _MAX_NET_POINTS:
            raise InvalidParameterError(
                f"`{_NET_OWNER}` would use {size} net points (more than {_MAX_NET_POINTS}). "
                "Raise `spacing`: this is a reference route."
            )
        center = (lo + hi) / 2
        gamma = float(self.step_size) if self.step_size is not None else self.spacing
        delta_s = score_sensitivity(
            n=int(n),
            C=1.0,
            regularization=0.0,
            step_size=gamma,
            center=center,
            regularization_center=center,
            diameter=float(np.linalg.norm(hi - lo)),
        )
        facts = {
            "mechanism": _NET_OWNER,
            "paper": "001 eq. (5), Theorem 1, d = 2 net (reference-only)",
            "exponent": "exp(-epsilon n G / (4 L)) (corrected, erratum E1)",
            "net_size": int(size),
            "sensitivity": delta_s,
            "smoothing": self.smoothing,
            "step_size": self.step_size,
        }
        return NetPlan(
            guarantee=Guarantee(epsilon=eps, delta=0.0, neighbors=REPLACE_ONE),
            n=int(n),
            lower=self.lower,
            upper=self.upper,
            spacing=self.spacing,
            smoothing=self.smoothing,
            step_size=gamma,
            lipschitz=1.0,
            sensitivity=delta_s,
            net_size=int(size),
            detail=MappingProxyType(facts),
            ledger_detail=MappingProxyType(
                {"mechanism": _NET_OWNER, "composition": "single release"}
            ),
        )

    def scores(self, plan: NetPlan, data: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
        """``s_S(x)`` at every net point. **Data-dependent: tests and audits only.**"""
        s = _check_points(data, _NET_OWNER)
        net = self.net()
        lo, hi = np.array(plan.lower), np.array(plan.upper)
        g = np.zeros_like(net)
        for start in range(0, s.shape[0], 256):  # per-record gradients, clipped, summed
            diff = net[:, None, :] - s[None, start : start + 256, :]
            norms = np.hypot(diff[..., 0], diff[..., 1])
            unit = np.where(
                norms[..., None] > 0, diff / np.where(norms > 0, norms, 1.0)[..., None], 0.0
            )
            un = np.hypot(unit[..., 0], unit[..., 1])
            scale = np.where(un > 1.0, 1.0 / np.where(un > 0, un, 1.0), 1.0)
            g += np.sum(unit * scale[..., None], axis=1)
        g /= s.shape[0]
        gamma = plan.step_size
        mapped = net - np.clip(net - gamma * g, lo, hi)
        base = np.hypot(mapped[:, 0], mapped[:, 1]) / gamma
        if plan.smoothing == 0.0:
            return base
        axes = _net_axes(lo, hi, plan.spacing)
        grid = base.reshape(axes[0].size, axes[1].size)
        rows, cols = grid.shape
        ii, jj = np.arange(rows)[:, None], np.arange(cols)[None, :]
        r0 = int(plan.smoothing / (axes[0][1] - axes[0][0])) + 1
        r1 = int(plan.smoothing / (axes[1][1] - axes[1][0])) + 1
        out = grid.copy()
        for di in range(-r0, r0 + 1):
            for dj in range(-r1, r1 + 1):
                # shifted[i, j] = grid[i + di, j + dj] (inf outside the net)
                shifted = np.full_like(grid, np.inf)
                shifted[max(0, -di) : rows - max(0, di), max(0, -dj) : cols - max(0, dj)] = grid[
                    max(0, di) : rows - max(0, -di), max(0, dj) : cols - max(0, -dj)
                ]
                ti, tj = np.clip(ii + di, 0, rows - 1), np.clip(jj + dj, 0, cols - 1)
                near = np.hypot(axes[0][ti] - axes[0][ii], axes[1][tj] - axes[1][jj])
                out = np.minimum(out, np.where(near <= plan.smoothing, shifted, np.inf))
        return out.reshape(-1)

    def log_probabilities(
        self,
        plan: NetPlan,
        data: np.ndarray | Sequence[Sequence[float]],
        exponent: Exponent = "corrected",
    ) -> np.ndarray:
        """The float log-weights the sampler draws from (exactly, up to normalization).
        ``exponent="printed"`` (paper 001's ``exp(-epsilon n G / (2L))``, with ``2L/n`` as
        the sensitivity) is for the audit's negative control only. **Tests and audits only.**"""
        from dpcvx.mechanisms.em_pgm import exponential_log_probabilities

        s = self.scores(plan, data)
        eps = plan.guarantee.epsilon
        if exponent == "corrected":
            return exponential_log_probabilities(s, eps, plan.sensitivity)
        if exponent == "printed":
            return exponential_log_probabilities(s, 2.0 * eps, 2.0 * plan.lipschitz / plan.n)
        raise InvalidParameterError(
            f"The `exponent` parameter must be one of {_EXPONENTS}. Got {exponent!r}."
        )

    def release(
        self,
        plan: NetPlan,
        data: np.ndarray | Sequence[Sequence[float]],
        rng: np.random.Generator,
    ) -> np.ndarray:
        """One net point (the budget must already be reserved)."""
        arr = _check_points(data, _NET_OWNER)
        if arr.shape[0] != plan.n:
            raise DataError(
                f"The plan of `{_NET_OWNER}` is for n={plan.n} records. Got {arr.shape[0]}."
            )
        index = sample_index(self.log_probabilities(plan, arr), rng)
        return self.net()[index].copy()


def net_max_log_ratio(first: np.ndarray, second: np.ndarray) -> float:
    """``max_x |log P_first(x) - log P_second(x)|`` for two arrays of (unnormalized) log-weights
    over the same net, each normalized as the sampler normalizes it (the float log-weights are
    taken as exact). The normalizers are exactly rounded sums (``math.fsum``) of float64
    exponentials, so the result is accurate to about ``1e-14`` (absolute).

    Raises :class:`~dpcvx.InvalidParameterError` if the shapes differ or a log-weight is not
    finite (a point with zero mass under one dataset only has infinite privacy loss)."""
    a = np.asarray(first, float).ravel()
    b = np.asarray(second, float).ravel()
    if a.shape != b.shape:
        raise InvalidParameterError(
            f"`net_max_log_ratio` needs two arrays over the same net. Got {a.shape}, {b.shape}."
        )
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise InvalidParameterError(
            "`net_max_log_ratio`: every log-weight must be finite (a point with zero mass "
            "under one dataset only has infinite privacy loss)."
        )

    def log_normalizer(x: np.ndarray) -> float:
        top = float(np.max(x))
        return top + math.log(math.fsum(np.exp(x - top).tolist()))

    shift = log_normalizer(a) - log_normalizer(b)
    return float(np.max(np.abs((a - b) - shift)))


def gradient_inverse_sensitivity_net(
    data: np.ndarray | Sequence[Sequence[float]],
    *,
    epsilon: float,
    lower: tuple[float, float],
    upper: tuple[float, float],
    spacing: float,
    smoothing: float = 0.0,
    step_size: float | None = None,
    delta: float = 0.0,
    rng: None | int | np.random.Generator = None,
    accountant: Accountant | None = None,
) -> np.ndarray:
    """An ``epsilon``-DP geometric median of ``(n, 2)`` points on a public box by the corrected
    eq. (5) over a net (:class:`GradientInverseSensitivityNet`). **Reference-only.** Parameters
    and the data's shape are checked first (nothing spent on error), then one pure event is
    reserved on ``accountant`` (if given), then the data is read."""
    mechanism = GradientInverseSensitivityNet(
        lower=lower, upper=upper, spacing=spacing, smoothing=smoothing, step_size=step_size
    )
    arr = _check_points(data, _NET_OWNER)
    plan = mechanism.plan(n=int(arr.shape[0]), epsilon=epsilon, delta=delta)
    generator, _ = make_rng(rng)
    if accountant is not None:
        (event,) = plan.events(_NET_OWNER)
        accountant.reserve(event)
    return mechanism.release(plan, arr, generator)
