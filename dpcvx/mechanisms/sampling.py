"""Exact, floating-point-safe sampling: every released number is a function of ideal noise.

Continuous noise drawn in floating point leaks through the representation of its output
(Mironov 2012: the set of floats that textbook Laplace sampling ``w + scale * log(U)`` can
produce has holes that depend on ``w``). dpcvx therefore never releases a perturbed point
computed in floating point. It releases

    ``fl(w + X)``: for every coordinate, the float64 nearest to the exact real ``w_j + X_j``
    (ties to even; beyond the float64 range, the signed infinity that IEEE rounding gives),

where ``X`` is the *ideal* continuous noise, a fixed function of ideal uniform random reals:

- ``"laplace"`` (:func:`laplace_point`): ``X_j = s_j * scale * (-ln U_j)`` with a fair sign
  ``s_j`` and ``U_j`` uniform on ``(0, 1)``: iid ``Laplace(0, scale)``;
- ``"gaussian"`` (:func:`gaussian_point`): Box-Muller, ``(X_{2p}, X_{2p+1}) = sigma
  sqrt(-2 ln A_p) (cos 2 pi B_p, sin 2 pi B_p)``: iid ``N(0, sigma^2)``;
- ``"l2_laplace"`` (:func:`l2_laplace_point`): density proportional to
  ``exp(-||x||_2 / scale)``, i.e. a radius ``-scale ln(V_1 ... V_d) ~ Gamma(d, scale)`` times the
  direction ``G / ||G||`` of ``d`` Box-Muller Gaussians (for ``d = 1`` it is the Laplace law and
  :func:`laplace_point` is used).

Rounding the exact real is deterministic post-processing of the output of the ideal continuous
mechanism, so the release has exactly the continuous mechanism's guarantee: no floating-point
artefact of the sampler reaches the output. :func:`release_point` dispatches on a calibrated
:class:`~dpcvx.mechanisms.noise.NoiseSpec`.

How it is computed (Las Vegas). Each ideal uniform is revealed lazily from the generator: its
first 128 random bits (two 64-bit words) pin it to ``[k / 2^b, (k + 1) / 2^b]`` with
``b = 128``. The noise is enclosed over those intervals at a working precision of ``P = b + 32``
bits: each logarithm, cosine and sine is computed once by ``mpmath.libmp``, at the low end of
its uniform's interval, trusted to 16 units in its last place and widened by the function's
slope over the interval (``ln(1 + 1/k) <= 1/k`` for ``-ln U``, ``2 pi 2^-b`` for
``cos 2 pi U`` and ``sin 2 pi U``); the products, sums, square roots and the quotient that
combine them are exact integer operations on fixed-point values ``v / 2^P`` that carry an
integer bound on their error; the scale multiplies the enclosure exactly, and ``w_j`` is
added exactly (integers; Python rounds an integer, and a quotient of two, correctly to the
nearest float). (An earlier version evaluated every function at both ends of its interval in
outward-rounded interval arithmetic, in about twice the time. Its enclosures were about half
as wide: both release the same value from the same revealed bits whenever both decide, but
where this one refines and that one did not, the words drawn, and so a seeded generator's
later draws, differ; at 128 revealed bits, with probability about ``2^-67`` per
coordinate. Until dpcvx added ``w_j`` exactly, it added it rounding outward at ``P`` bits, an
enclosure wider by about ``2^-P`` of ``|w_j + X_j|``, which refines no less often.) When both
ends of the enclosure of ``w_j + X_j`` round to the same float, that
float is the output (rounding is monotone). Otherwise one more 64-bit word of every
uniform the undecided coordinate depends on is drawn, the precision is raised, and the
coordinate is recomputed. Revealing more bits only when the revealed ones leave the output
undecided samples the ideal uniforms exactly. The working precision is an argument of every
operation: no global mpmath state is touched, so concurrent releases in threads are safe.
mpmath runs its integer arithmetic on gmpy2 (a dependency) when it is installed and in pure
Python otherwise; both backends give the same values (tested).

Why 128 bits at first rather than 64: with 64 bits a refinement round was measured in 0.5 % of
one-dimensional Laplace releases, 1.2 % of one-dimensional Gaussian ones, 20 % of
100-dimensional Laplace ones and every 1000-dimensional release (an l2-Laplace coordinate
depends on all ``3d`` uniforms). With 128 bits the measured mean width of an enclosure is
``2^-67`` (Gaussian, l2-Laplace) to ``2^-71.6`` (Laplace) float64 units in the last place, so a
round is needed with probability about ``2^-67`` per coordinate, and releases are as fast or
faster (one round instead of two).

The exponential mechanism's index (:func:`sample_index`) is the Gumbel-max of the
log-probabilities with ideal Gumbel noise ``-ln(-ln U_i)``, decided the same way: a vectorized
float64 pass with rigorous error bounds keeps the candidates that can still win, and interval
arithmetic on more bits decides between them. Every index of positive mass, however small, is
drawn with exactly its probability (a float inverse CDF with one 53-bit uniform drops masses
below about ``2^-53`` of the total).

How the generator is consumed. All randomness is taken as 64-bit words through
``rng.integers(0, 2**64, size=m, dtype=numpy.uint64)``; for a given generator state the output
is a deterministic function of the words, so a seeded generator reproduces a release exactly.
The layouts (see each function) are part of the contract that the tests replay.

What remains assumed:

- the generator's words are independent and uniform. dpcvx's default generator
  (:func:`dpcvx.rng.make_rng` with ``None``) is AES in counter mode keyed by 128 bits of OS
  randomness; a seeded generator is for reproducibility only and gives no privacy against
  anyone who knows or can guess the seed;
- the running time and the number of words drawn are not observed by the adversary. Both depend
  on the draw: a coordinate needs a refinement round with probability about ``2^-67`` (the
  128 revealed bits beyond float64's 53, less the spread of the noise function), and whether
  it happened depends on ``w`` and the ideal noise separately, not only on the released
  float. This timing side channel is outside the guarantee; it opens with probability about
  ``d * 2^-67`` per release (``w = 0`` is about the worst case: a larger ``|w|`` only
  coarsens the grid of output floats). :func:`sample_index` reveals 64 bits per entry first: its
  interval-arithmetic phase runs only when two candidates' float64 bounds overlap (a
  probability of order ``2^-35`` per draw), and draws more words more rarely still;
- mpmath's logarithm, cosine and sine are accurate to within 16 units in the last place of the
  working precision (mpmath aims at correct rounding) and numpy's float64 ``log``, used by the
  first pass of :func:`sample_index`, to within ``2^10`` units in the last place (it is within a
  few).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from mpmath.libmp import (
    finf,
    fnan,
    fninf,
    from_float,
    from_man_exp,
    mpf_add,
    mpf_cos_sin_pi,
    mpf_ln,
    mpf_lt,
    mpf_mul,
    mpf_neg,
    round_ceiling,
    round_floor,
    round_nearest,
)

from dpcvx._validation import check_positive
from dpcvx.errors import InvalidParameterError, SolverError

if TYPE_CHECKING:
    from dpcvx.mechanisms.noise import NoiseSpec

__all__ = [
    "gaussian_point",
    "l2_laplace_point",
    "laplace_point",
    "release_point",
    "sample",
    "sample_index",
]

#: random bits in one word drawn from the generator
_WORD = 64
#: random bits revealed per uniform at the first attempt (a multiple of ``_WORD``; see the
#: module docstring for why 128 rather than 64)
_FIRST_BITS = 128
#: working precision beyond the revealed bits of the uniforms
_GUARD = 32
#: elementary functions (ln, cos, sin) are widened outward by 2^-(prec - _SLACK) relative
_SLACK = 4
#: refinement rounds before giving up; each adds 64 bits, so reaching the limit has
#: probability below 2^-900 per coordinate
_MAX_ROUNDS = 16
#: relative error margin of the float64 first pass of sample_index (2^10 ulps of each term)
_FLOAT_MARGIN = 2.0**-42

_Raw = tuple  # an mpmath raw float (sign, mantissa, exponent, bit count)
_Interval = tuple  # a pair (lower, upper) of raw floats
#: an exact interval ``[lo 2^exp, hi 2^exp]`` of integers ``(lo, hi, exp)``, ``lo <= hi``
_Dyadic = tuple


# ----------------------------------------------------------------------------- random words
def _words(rng: np.random.Generator, count: int) -> list[int]:
    """``count`` independent uniform 64-bit words, as Python ints (the only way this module
    consumes ``rng``)."""
    if count <= 0:
        return []
    out = rng.integers(0, 2**64, size=count, dtype=np.uint64, endpoint=False)
    return [int(x) for x in np.asarray(out, dtype=np.uint64).ravel()]


def _check_rng(rng: object, owner: str) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise InvalidParameterError(
            f"The `rng` parameter of `{owner}` must be a numpy.random.Generator. Got "
            f"{type(rng).__name__}: {rng!r}. Normalize it first with "
            "`dpcvx.rng.make_rng(rng)[0]` (None gives OS-keyed cryptographic randomness)."
        )
    return rng


def _check_point(point: object, owner: str) -> np.ndarray:
    try:
        w = np.array(point, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(
            f"The `point` parameter of `{owner}` must be a finite numeric array. "
            f"Got {type(point).__name__}: {point!r}."
        ) from exc
    if w.size == 0 or not np.all(np.isfinite(w)):
        raise InvalidParameterError(
            f"The `point` parameter of `{owner}` must be a non-empty array of finite floats. "
            f"Got an array of shape {w.shape} with "
            f"{int(np.sum(~np.isfinite(w)))} non-finite entries."
        )
    return w


# ----------------------------------------------------------------------------- rounding
def _nearest(man: int, exp: int) -> float:
    """The float64 nearest to the exact real ``man * 2^exp`` (ties to even), with IEEE
    overflow to a signed infinity and gradual underflow: Python's conversion of an integer
    and its true division of two integers are both correctly rounded (an exact zero is
    ``+0.0``; a negative real that rounds to zero is ``-0.0``)."""
    try:
        return float(man << exp) if exp >= 0 else man / (1 << -exp)
    except OverflowError:  # the correctly rounded value is beyond the largest float
        return math.inf if man > 0 else -math.inf


def _decide(point: tuple[int, int], x: _Dyadic | None) -> float | None:
    """The float nearest to every point of ``w + X`` for the exact float ``w``
    (``point = (m, e)``, ``w = m 2^e``) and ``X`` in the exact interval ``x``, or None when
    that interval contains a rounding boundary (a midpoint between consecutive floats) or
    ``x`` is None (unbounded). The sums are exact integers."""
    if x is None:
        return None
    lo, hi, exp = x
    m, e = point
    if e >= exp:
        m <<= e - exp
    else:
        lo, hi, exp = lo << (exp - e), hi << (exp - e), e
    a = _nearest(m + lo, exp)
    b = _nearest(m + hi, exp)
    if a == b and math.copysign(1.0, a) == math.copysign(1.0, b):
        return a
    return None


def _exact(value: float) -> tuple[int, int]:
    """The finite float ``value`` as ``(m, e)`` with ``value = m 2^e`` exactly."""
    frac, exp = math.frexp(value)  # frac in [0.5, 1) holds at most 53 significant bits
    return int(frac * 9007199254740992.0), exp - 53


# ----------------------------------------------------------------------------- intervals
_FACTORS: dict[int, tuple[_Raw, _Raw]] = {}


def _factors(prec: int) -> tuple[_Raw, _Raw]:
    """``1 - 2^-(prec - _SLACK)`` and ``1 + 2^-(prec - _SLACK)`` (exact raw floats)."""
    out = _FACTORS.get(prec)
    if out is None:
        e = prec - _SLACK
        out = (from_man_exp((1 << e) - 1, -e), from_man_exp((1 << e) + 1, -e))
        _FACTORS[prec] = out
    return out


def _down(x: _Raw, prec: int) -> _Raw:
    """``x`` moved down by a relative ``2^-(prec - _SLACK)`` (zero and infinities kept)."""
    if not x[1]:
        return x
    less, more = _factors(prec)
    return mpf_mul(x, more if x[0] else less, prec, round_floor)


def _up(x: _Raw, prec: int) -> _Raw:
    """``x`` moved up by a relative ``2^-(prec - _SLACK)`` (zero and infinities kept)."""
    if not x[1]:
        return x
    less, more = _factors(prec)
    return mpf_mul(x, less if x[0] else more, prec, round_ceiling)


def _uniform(k: int, bits: int) -> _Interval:
    """The exact interval ``[k / 2^bits, (k + 1) / 2^bits]``."""
    return from_man_exp(k, -bits), from_man_exp(k + 1, -bits)


def _neg_ln(u: _Interval, prec: int) -> _Interval:
    """An enclosure of ``-ln U`` for ``U`` in ``u`` (a sub-interval of ``[0, 1]``;
    ``-ln 0 = +inf``)."""
    lo, hi = u
    lower = mpf_neg(_up(mpf_ln(hi, prec, round_ceiling), prec))
    upper = finf if not lo[1] else mpf_neg(_down(mpf_ln(lo, prec, round_floor), prec))
    return lower, upper


def _add(a: _Interval, b: _Interval, prec: int) -> _Interval:
    lower = mpf_add(a[0], b[0], prec, round_floor)
    upper = mpf_add(a[1], b[1], prec, round_ceiling)
    return (fninf if lower == fnan else lower), (finf if upper == fnan else upper)


# ----------------------------------------------------------------------------- fixed point
# The Laplace, Gaussian and l2-Laplace samplers evaluate their noise in fixed point: a real
# ``t`` is held as an integer ``v`` with an integer error bound ``e``, meaning
# ``|t * 2^P - v| <= e`` at the working precision ``P``. Products, sums, square roots and
# quotients of such pairs are Python integer operations with their error bounds carried
# exactly; only the logarithms, cosines and sines go through mpmath (once each, at the low
# end of the uniform's interval, widened by the function's slope over that interval). The
# enclosures are symmetric (``v - e`` to ``v + e``) and about twice as wide as the exact
# ranges of the functions over the intervals (where a Box-Muller ``A`` lies within a few
# ``2^-b`` of 1, its radius's error is about the radius, and an l2-Laplace enclosure whose
# norm could then be 0 comes out unbounded: a refinement round, with probability about
# ``2^-b`` per uniform). Only scale-free quantities are held this way
# (the uniforms' logarithms, cosines and sines and what they combine into); the noise's
# scale, which can be any positive float, multiplies the enclosure exactly at the end.
_Fixed = tuple  # (value, error bound), integers, in units of 2^-P

#: the slope of ``u -> cos(2 pi u)`` and ``u -> sin(2 pi u)`` is at most ``2 pi < 7``
_TRIG_SLOPE = 7


def _fixed(x: _Raw, prec: int) -> int:
    """``x * 2^prec`` truncated toward zero (an error below 1) for a finite raw float."""
    sign, man, exp, _ = x
    shift = exp + prec
    v = int(man) << shift if shift >= 0 else int(man) >> -shift
    return -v if sign else v


def _fixed_function(x: _Raw, prec: int) -> _Fixed:
    """An elementary function's value ``x`` computed by mpmath at ``prec`` bits (round to
    nearest, trusted to 16 units in the last place: a relative ``2^-(prec - 5)``), in fixed
    point: the error bound is a relative ``2^-(prec - 6)`` plus the truncation."""
    v = _fixed(x, prec)
    return v, (abs(v) >> (prec - 6)) + 2


def _fixed_mul(a: _Fixed, b: _Fixed, prec: int) -> _Fixed:
    """The product of two fixed-point reals: ``|ab - a'b'| <= |a'| e_b + |b'| e_a + e_a e_b``,
    plus the truncation of the product."""
    (x, ex), (y, ey) = a, b
    return (x * y) >> prec, ((abs(x) * ey + abs(y) * ex + ex * ey) >> prec) + 2


def _fixed_sqrt(a: _Fixed, prec: int) -> _Fixed | None:
    """The square root of a nonnegative fixed-point real, or None when its value is not
    positive: ``|sqrt(t) - sqrt(q)| <= |t - q| / sqrt(q)``."""
    x, ex = a
    if x <= 0:
        return None
    r = math.isqrt(x << prec)  # floor(sqrt(x / 2^prec) * 2^prec)
    if r == 0:
        return None
    return r, ((ex << prec) // r) + 2


def _fixed_div(a: _Fixed, b: _Fixed, prec: int) -> _Fixed | None:
    """The quotient of two fixed-point reals, or None unless ``b``'s value exceeds its error
    (then the true divisor is positive): ``|t_a / t_b - a / b| <= (e_a + |a / b| e_b) /
    (b - e_b)``, plus the floors of the quotient and of the bound."""
    (x, ex), (y, ey) = a, b
    if y <= ey:
        return None
    q = (x << prec) // y
    return q, ((ex << prec) + (abs(q) + 1) * ey) // (y - ey) + 2


def _fixed_neg_ln(k: int, bits: int, prec: int) -> _Fixed | None:
    """``-ln U`` for ``U`` in ``[k, k + 1] / 2^bits``, or None for ``k = 0`` (unbounded):
    evaluated at ``k / 2^bits``, where it is largest, and within ``ln(1 + 1/k) <= 1/k`` of
    that over the interval."""
    if k <= 0:
        return None
    v, e = _fixed_function(mpf_neg(mpf_ln(from_man_exp(k, -bits), prec, round_nearest)), prec)
    return v, e + ((1 << prec) // k) + 1


def _fixed_box_muller(
    a: int, b: int, bits: int, prec: int
) -> tuple[_Fixed, _Fixed, _Fixed, _Fixed] | None:
    """``2 E = -2 ln A``, ``R = sqrt(2 E)``, ``cos(2 pi B)`` and ``sin(2 pi B)`` in fixed point
    for ``A`` and ``B`` in their revealed intervals, or None where ``A``'s reaches 0."""
    e = _fixed_neg_ln(a, bits, prec)
    if e is None:
        return None
    two_e = (2 * e[0], 2 * e[1])
    radius = _fixed_sqrt(two_e, prec)
    if radius is None:
        return None
    # cos and sin of 2 pi B at B's low end (the argument 2 B = b / 2^(bits - 1) is exact),
    # within 2 pi 2^-bits of their values anywhere in B's interval
    cos, sin = mpf_cos_sin_pi(from_man_exp(b, 1 - bits), prec, round_nearest)
    slope = _TRIG_SLOPE << (prec - bits)
    c, ec = _fixed_function(cos, prec)
    s, es = _fixed_function(sin, prec)
    return two_e, radius, (c, ec + slope), (s, es + slope)


def _scaled(y: _Fixed, scale: tuple[int, int], prec: int) -> _Dyadic:
    """The exact enclosure ``scale * [y - e, y + e] / 2^prec`` for a positive float
    ``scale = m 2^s`` given as ``(m, s)``."""
    v, e = y
    man, exp = scale
    return (v - e) * man, (v + e) * man, exp - prec


def _neg(x: _Dyadic) -> _Dyadic:
    """The exact enclosure of ``-X`` for ``X`` in ``x``."""
    lo, hi, exp = x
    return -hi, -lo, exp


# ----------------------------------------------------------------------------- the engine
#: evaluate(group, uniforms, bits, prec, coordinates) -> enclosures of X at those coordinates
#: (exact intervals, or None where X is not bounded yet)
_Evaluate = Callable[[int, list[int], int, int, list[int]], list["_Dyadic | None"]]


def _settle(
    w: np.ndarray,
    rng: np.random.Generator,
    groups: Sequence[Sequence[int]],
    per_group: int,
    evaluate: _Evaluate,
) -> np.ndarray:
    """``fl(w + X)`` for noise whose coordinates fall into independent groups.

    ``groups[g]`` lists the coordinates that depend on group ``g``'s ``per_group`` uniforms
    (and on no other random quantity except bits drawn before the call). Words are drawn as
    follows: first ``_FIRST_BITS / 64`` words per uniform for every uniform, group-major, in one
    call (the first word of a uniform is its most significant); then, in each refinement round,
    one word per uniform of every group that still has an undecided coordinate, in increasing
    group order, in one call. Revealing more bits of a group only when its revealed bits leave
    one of its coordinates undecided draws every ideal uniform exactly.
    """
    first = _FIRST_BITS // _WORD
    n_uniforms = len(groups) * per_group
    raw = _words(rng, n_uniforms * first)
    keys = []
    for i in range(n_uniforms):
        k = 0
        for word in raw[i * first : (i + 1) * first]:
            k = (k << _WORD) | word
        keys.append(k)
    uniforms = [keys[g * per_group : (g + 1) * per_group] for g in range(len(groups))]
    bits = [_FIRST_BITS] * len(groups)
    flat = w.ravel()
    points = [_exact(float(v)) for v in flat]
    out = np.empty(flat.size)
    pending = {g: list(members) for g, members in enumerate(groups)}
    for _ in range(_MAX_ROUNDS):
        for g in list(pending):
            coords = pending[g]
            prec = bits[g] + _GUARD
            enclosures = evaluate(g, uniforms[g], bits[g], prec, coords)
            still = []
            for j, x in zip(coords, enclosures):
                value = _decide(points[j], x)
                if value is None:
                    still.append(j)
                else:
                    out[j] = value
            if still:
                pending[g] = still
            else:
                del pending[g]
        if not pending:
            return out.reshape(w.shape)
        order = sorted(pending)
        more = _words(rng, len(order) * per_group)
        for i, g in enumerate(order):
            chunk = more[i * per_group : (i + 1) * per_group]
            uniforms[g] = [(k << _WORD) | word for k, word in zip(uniforms[g], chunk)]
            bits[g] += _WORD
    raise SolverError(  # pragma: no cover - probability below 2^-900 per coordinate
        "dpcvx's exact sampler could not decide the released value after "
        f"{_MAX_ROUNDS} refinements; nothing was released."
    )


# ----------------------------------------------------------------------------- the samplers
def laplace_point(point: object, scale: float, rng: np.random.Generator) -> np.ndarray:
    """The point perturbed by iid Laplace noise, correctly rounded: ``fl(point + X)``.

    Parameters
    ----------
    point : array-like of float
        The exact point ``w`` (any shape, finite entries; each entry is taken as exact).
    scale : float
        Positive finite Laplace scale ``b``: ``X_j`` has density ``exp(-|x|/b) / (2b)``.
    rng : numpy.random.Generator
        Source of random words (see the module docstring for the layout).

    Returns
    -------
    numpy.ndarray
        float64 array of ``point``'s shape: each entry is the float64 nearest to the exact
        real ``w_j + X_j`` (ties to even), with ``X_j = s_j * scale * (-ln U_j)`` ideal.

    Raises
    ------
    InvalidParameterError
        If ``point`` is empty or not finite, ``scale`` is not positive and finite, or ``rng``
        is not a numpy Generator.

    Notes
    -----
    Words drawn: ``ceil(d / 64)`` words whose bits (least significant first) are the signs
    (bit 1 is negative), then two words per coordinate (the first 128 bits of ``U_j``, most
    significant word first), in one call; then, for the rare undecided coordinates, one more
    word each per round (see :func:`_settle`). Used per coordinate by
    clipped gradient descent's steps and the mean estimators, and by
    :func:`release_point` for ``kind="laplace"``.
    """
    owner = "laplace_point"
    w = _check_point(point, owner)
    s = _exact(check_positive(scale, "scale", owner))
    rng = _check_rng(rng, owner)
    d = w.size
    sign_words = _words(rng, -(-d // 64))
    negative = [bool((sign_words[j // 64] >> (j % 64)) & 1) for j in range(d)]

    def evaluate(g: int, us: list[int], bits: int, prec: int, coords: list[int]):
        e = _fixed_neg_ln(us[0], bits, prec)
        if e is None:
            return [None]
        x = _scaled(e, s, prec)
        return [_neg(x) if negative[g] else x]

    return _settle(w, rng, [(j,) for j in range(d)], 1, evaluate)


def gaussian_point(point: object, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """The point perturbed by iid Gaussian noise, correctly rounded: ``fl(point + X)``.

    Parameters
    ----------
    point : array-like of float
        The exact point ``w`` (any shape, finite entries).
    sigma : float
        Positive finite standard deviation: ``X ~ N(0, sigma^2 I)``.
    rng : numpy.random.Generator
        Source of random words (see the module docstring).

    Returns
    -------
    numpy.ndarray
        float64 array of ``point``'s shape, the correctly rounded exact ``w + X``.

    Raises
    ------
    InvalidParameterError
        If an argument is invalid (as for :func:`laplace_point`).

    Notes
    -----
    Box-Muller on pairs of coordinates (flattened order): pair ``p`` has uniforms ``A_p, B_p``
    and gives ``X_{2p} = sigma R_p cos(2 pi B_p)``, ``X_{2p+1} = sigma R_p sin(2 pi B_p)`` with
    ``R_p = sqrt(-2 ln A_p)`` (the sine is unused for the last coordinate of an odd ``d``).
    Words drawn: ``A_0, B_0, A_1, B_1, ...`` (two words each, most significant first, in one
    call), then per round one more word for each of ``A_p, B_p`` of every pair with an
    undecided coordinate.
    """
    owner = "gaussian_point"
    w = _check_point(point, owner)
    s = _exact(check_positive(sigma, "sigma", owner))
    rng = _check_rng(rng, owner)
    d = w.size
    groups = [tuple(range(2 * p, min(2 * p + 2, d))) for p in range(-(-d // 2))]

    def evaluate(g: int, us: list[int], bits: int, prec: int, coords: list[int]):
        polar = _fixed_box_muller(us[0], us[1], bits, prec)
        if polar is None:
            return [None] * len(coords)
        _, radius, cos, sin = polar
        return [_scaled(_fixed_mul(radius, sin if j % 2 else cos, prec), s, prec) for j in coords]

    return _settle(w, rng, groups, 2, evaluate)


def l2_laplace_point(point: object, scale: float, rng: np.random.Generator) -> np.ndarray:
    """The point perturbed by l2-Laplace (K-norm) noise, correctly rounded: ``fl(point + X)``.

    Parameters
    ----------
    point : array-like of float
        The exact point ``w`` (any shape, finite entries; ``d`` is its size and the norm is
        the l2 norm of the flattened array).
    scale : float
        Positive finite scale: ``X`` has density proportional to ``exp(-||x||_2 / scale)``.
    rng : numpy.random.Generator
        Source of random words (see the module docstring).

    Returns
    -------
    numpy.ndarray
        float64 array of ``point``'s shape, the correctly rounded exact ``w + X``.

    Raises
    ------
    InvalidParameterError
        If an argument is invalid (as for :func:`laplace_point`).

    Notes
    -----
    ``X = r G / ||G||`` with the radius ``r = -scale ln(V_1 ... V_d) ~ Gamma(d, scale)`` and
    ``G`` the ``d`` Box-Muller Gaussians of :func:`gaussian_point` (so
    ``||G||^2 = 2 sum_p (-ln A_p)`` over complete pairs, plus ``G_{d-1}^2`` for an odd ``d``).
    Words drawn (``d >= 2``): ``V_1, ..., V_d, A_0, B_0, A_1, B_1, ...`` (two words each, most
    significant first, in one call); every coordinate depends on every uniform, so a
    refinement round draws one more word for each of them, in
    the same order. For ``d = 1`` the law is Laplace's and :func:`laplace_point` is used
    (with its layout).
    """
    owner = "l2_laplace_point"
    w = _check_point(point, owner)
    scale = check_positive(scale, "scale", owner)
    rng = _check_rng(rng, owner)
    d = w.size
    if d == 1:  # in one dimension the l2-Laplace law is the Laplace law
        return laplace_point(w, scale, rng)
    s = _exact(scale)
    pairs = -(-d // 2)

    def evaluate(g: int, us: list[int], bits: int, prec: int, coords: list[int]):
        unbounded: list[_Dyadic | None] = [None] * len(coords)
        if min(us[:d]) <= 0:  # a V_i's interval reaches 0: the radius is not bounded yet
            return unbounded
        # -ln(V_1 ... V_d) at the low ends k_i / 2^bits (their product, an exact integer over
        # 2^(bits d)), where it is largest; over the box it is within
        # sum_i ln(1 + 1/k_i) <= sum_i 1/k_i of that
        top = 1
        for k in us[:d]:
            top *= k
        ln_top = mpf_ln(from_man_exp(top, -bits * d), prec, round_nearest)
        radius, e_radius = _fixed_function(mpf_neg(ln_top), prec)
        e_radius += sum((1 << prec) // k + 1 for k in us[:d])
        # X_j = (r / ||G||) R_p (cos or sin)(2 pi B_p), grouped so that one division serves
        # every coordinate; ||G||^2 = sum_p R_p^2 = sum_p 2 E_p over complete pairs, exactly
        polar = []
        norm2, e_norm2 = 0, 0
        for p in range(pairs):
            pair = _fixed_box_muller(us[d + 2 * p], us[d + 2 * p + 1], bits, prec)
            if pair is None:
                return unbounded
            two_e, r_p, cos, sin = pair
            polar.append((r_p, cos, sin))
            if 2 * p + 1 < d:
                square = two_e
            else:  # the last coordinate of an odd d: G = R_p cos(2 pi B_p) alone
                g_last = _fixed_mul(r_p, cos, prec)
                square = _fixed_mul(g_last, g_last, prec)
            norm2 += square[0]
            e_norm2 += square[1]
        norm = _fixed_sqrt((norm2, e_norm2), prec)
        factor = None if norm is None else _fixed_div((radius, e_radius), norm, prec)
        if factor is None:
            return unbounded
        scaled = {p: _fixed_mul(factor, polar[p][0], prec) for p in {j // 2 for j in coords}}
        return [
            _scaled(_fixed_mul(scaled[j // 2], polar[j // 2][2 if j % 2 else 1], prec), s, prec)
            for j in coords
        ]

    return _settle(w, rng, [tuple(range(d))], d + 2 * pairs, evaluate)


def release_point(point: object, noise: NoiseSpec, rng: np.random.Generator) -> np.ndarray:
    """The released point of output perturbation: ``fl(point + X)`` exactly, ``X`` ideal noise
    of the calibrated ``noise``.

    Parameters
    ----------
    point : array-like of float
        The exact (certified) point ``w``, any shape, finite entries.
    noise : NoiseSpec
        A calibrated noise distribution (:func:`dpcvx.mechanisms.noise.calibrate`); its kind
        and scale are used.
    rng : numpy.random.Generator
        Source of random words (see the module docstring).

    Returns
    -------
    numpy.ndarray
        float64 array of ``point``'s shape: each entry the float64 nearest to the exact
        ``w_j + X_j`` (ties to even). It is a deterministic function of the ideal continuous
        mechanism's output, so it carries exactly that mechanism's guarantee.

    Raises
    ------
    InvalidParameterError
        If ``noise`` is not a NoiseSpec or another argument is invalid.

    Notes
    -----
    ``"l2_laplace"``: :func:`l2_laplace_point`; ``"laplace"``: :func:`laplace_point`;
    ``"gaussian"``: :func:`gaussian_point` (their docstrings give the word layouts). This is
    the exact counterpart of ``w + sample(noise, d, rng)``, which is the textbook,
    representation-leaking way.
    """
    from dpcvx.mechanisms.noise import NoiseSpec

    if not isinstance(noise, NoiseSpec):
        raise InvalidParameterError(
            "The `noise` parameter of `release_point` must be a NoiseSpec (see "
            f"`dpcvx.mechanisms.noise.calibrate`). Got {type(noise).__name__}: {noise!r}."
        )
    if noise.kind == "l2_laplace":
        return l2_laplace_point(point, noise.scale, rng)
    if noise.kind == "laplace":
        return laplace_point(point, noise.scale, rng)
    return gaussian_point(point, noise.scale, rng)


# ----------------------------------------------------------------------------- Gumbel-max
def _gumbel_bounds(keys: np.ndarray, logw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rigorous float64 bounds on ``logw_i - ln(-ln U_i)`` for ``U_i`` in
    ``[k_i / 2^64, (k_i + 1) / 2^64]`` (``keys`` uint64, ``logw`` finite).

    ``E = -ln U`` is decreasing in ``U`` and ``-ln E`` decreasing in ``E``, so both are
    evaluated at the ends of the interval. Below ``U = 1/2``, ``E = -log(u)`` with ``u`` the
    end rounded outward by two float steps (``k`` and ``k + 1`` are rounded to float64 exactly
    below ``2^53`` and by at most one float step above); above, ``E = -log1p(-v)`` with
    ``v = 1 - U`` formed from the complement ``2^64 - 1 - k`` (exact in uint64), so that
    uniforms close to 1 keep their relative accuracy. Each term then carries a relative margin
    of ``2^-42`` (``2^10`` ulps: numpy's ``log`` and ``log1p`` are accurate to a few ulps, the
    outer logarithm turns the relative error of ``E`` into an absolute one, and the sum adds
    one more rounding)."""
    step = 2.0**-64
    k = keys.astype(np.float64)
    comp = (~keys).astype(np.float64)  # 2^64 - 1 - k
    u_lo = np.nextafter(np.nextafter(k * step, 0.0), 0.0)
    u_hi = np.nextafter(np.nextafter(k * step + step, 2.0), 2.0)
    v_lo = np.nextafter(np.nextafter(comp * step, 0.0), 0.0)  # <= 1 - (k + 1) / 2^64
    v_hi = np.nextafter(np.nextafter(comp * step + step, 2.0), 2.0)  # >= 1 - k / 2^64
    high = keys >= np.uint64(2**63)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        e_lo = np.where(high, -np.log1p(-v_lo), -np.log(np.minimum(u_hi, 1.0)))
        e_hi = np.where(high, -np.log1p(-np.minimum(v_hi, 1.0)), -np.log(u_lo))
        e_lo = np.maximum(e_lo, 0.0)
        g_lo = -np.log(e_hi)  # -inf when U may be 0
        g_hi = -np.log(e_lo)  # +inf when U may be 1
        lower = logw + g_lo - _FLOAT_MARGIN * (1.0 + np.abs(g_lo) + np.abs(logw))
        upper = logw + g_hi + _FLOAT_MARGIN * (1.0 + np.abs(g_hi) + np.abs(logw))
    lower[np.isnan(lower)] = -np.inf
    upper[np.isnan(upper)] = np.inf
    return lower, upper


def _gumbel_interval(logw: float, k: int, bits: int) -> _Interval:
    """An enclosure of ``logw - ln(-ln U)`` for ``U`` in ``[k / 2^bits, (k + 1) / 2^bits]``."""
    prec = bits + _GUARD
    e = _neg_ln(_uniform(k, bits), prec)  # E = -ln U >= 0, decreasing in U
    # -ln E: decreasing in E; -ln 0 = +inf, -ln(+inf) = -inf
    lower = fninf if e[1] == finf else mpf_neg(_up(mpf_ln(e[1], prec, round_ceiling), prec))
    upper = finf if not e[0][1] else mpf_neg(_down(mpf_ln(e[0], prec, round_floor), prec))
    w = from_float(logw)
    return _add((w, w), (lower, upper), prec)


def sample_index(log_probabilities: object, rng: np.random.Generator) -> int:
    """One index drawn with probability exactly proportional to ``exp(log_probabilities)``.

    Parameters
    ----------
    log_probabilities : array-like of float
        Natural-log weights, normalized or not, each taken as exact; ``-inf`` is zero mass.
        Flattened.
    rng : numpy.random.Generator
        Source of random words.

    Returns
    -------
    int
        ``i`` with probability ``exp(l_i) / sum_j exp(l_j)`` exactly (as a flat index).

    Raises
    ------
    InvalidParameterError
        If the array is empty, contains NaN or ``+inf``, has no finite entry, or ``rng`` is
        not a numpy Generator.

    Notes
    -----
    Gumbel-max: ``argmax_i l_i - ln(-ln U_i)`` with ideal uniforms ``U_i`` is distributed
    exactly as required. Words drawn: one call with one word per finite entry (in index order;
    none when a single entry is finite), then, while more than one candidate can still win,
    one call per round with one more word for each remaining candidate (in index order). A
    vectorized float64 pass with rigorous bounds (:func:`_gumbel_bounds`) leaves only the
    entries whose upper bound reaches the best lower bound; interval arithmetic on lazily
    refined uniforms decides between those. Masses far below ``2^-53`` of the total keep their
    exact probability.
    """
    owner = "sample_index"
    try:
        logp = np.asarray(log_probabilities, dtype=np.float64).ravel()
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(
            f"The `log_probabilities` parameter of `{owner}` must be a numeric array. "
            f"Got {type(log_probabilities).__name__}."
        ) from exc
    rng = _check_rng(rng, owner)
    if logp.size == 0 or np.isnan(logp).any() or np.isposinf(logp).any():
        raise InvalidParameterError(
            f"The `log_probabilities` parameter of `{owner}` must be a non-empty array of "
            "finite floats or -inf (zero mass). Got "
            f"{logp.size} entries, {int(np.isnan(logp).sum())} NaN and "
            f"{int(np.isposinf(logp).sum())} +inf."
        )
    live = np.flatnonzero(np.isfinite(logp))
    if live.size == 0:
        raise InvalidParameterError(
            f"The `log_probabilities` parameter of `{owner}` has no finite entry: every index "
            "has zero mass and there is nothing to draw."
        )
    if live.size == 1:
        return int(live[0])
    logw = logp[live]
    keys = rng.integers(0, 2**64, size=live.size, dtype=np.uint64, endpoint=False)
    keys = np.asarray(keys, dtype=np.uint64)
    lower, upper = _gumbel_bounds(keys, logw)
    best = float(np.max(lower))
    candidates = [int(c) for c in np.flatnonzero(upper >= best)]
    if len(candidates) == 1:
        return int(live[candidates[0]])
    state = {c: int(keys[c]) for c in candidates}
    bits = _WORD
    alive = candidates
    for _ in range(_MAX_ROUNDS):
        bounds = [_gumbel_interval(float(logw[c]), state[c], bits) for c in alive]
        leader = 0
        for i in range(1, len(alive)):
            if mpf_lt(bounds[leader][0], bounds[i][0]):
                leader = i
        best_lower = bounds[leader][0]
        # an entry whose upper bound is below the leader's lower bound can no longer win
        alive = [
            c for i, c in enumerate(alive) if i == leader or not mpf_lt(bounds[i][1], best_lower)
        ]
        if len(alive) == 1:
            return int(live[alive[0]])
        more = _words(rng, len(alive))
        for c, word in zip(alive, more):
            state[c] = (state[c] << _WORD) | word
        bits += _WORD
    raise SolverError(  # pragma: no cover - probability below 2^-900
        "dpcvx's exact sampler could not decide the exponential mechanism's index after "
        f"{_MAX_ROUNDS} refinements; nothing was released."
    )


# ----------------------------------------------------------------------------- float noise
def _check_count(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 1:
        raise InvalidParameterError(
            f"The `{name}` parameter of `sample` must be a positive int. "
            f"Got {type(value).__name__}: {value!r}."
        )
    return int(value)


def _uniform_directions(rng: np.random.Generator, size: int, dim: int) -> np.ndarray:
    """``size`` points uniform on the unit sphere of ``R^dim`` (normalized standard normals).

    For ``dim == 1`` this is a fair random sign. A zero normal vector (probability zero, but
    possible in floating point) is redrawn.
    """
    g = rng.standard_normal((size, dim))
    norms = np.linalg.norm(g, axis=1)
    bad = norms == 0.0
    while np.any(bad):  # pragma: no cover - probability ~0
        g[bad] = rng.standard_normal((int(bad.sum()), dim))
        norms[bad] = np.linalg.norm(g[bad], axis=1)
        bad = norms == 0.0
    return g / norms[:, None]


def sample(
    spec: NoiseSpec,
    dim: int,
    rng: np.random.Generator,
    *,
    size: int | None = None,
) -> np.ndarray:
    """Draw noise from a calibrated :class:`NoiseSpec`.

    Parameters
    ----------
    spec : NoiseSpec
        Output of :func:`calibrate`.
    dim : int
        Dimension ``d >= 1`` of the released vector.
    rng : numpy.random.Generator
        An already-normalized generator: callers pass their ``rng`` argument through
        :func:`dpcvx.rng.make_rng` first. Global NumPy state is never used.
    size : int or None, optional
        ``None`` (default) draws one vector of shape ``(dim,)``; an int draws ``size``
        independent vectors, shape ``(size, dim)``.

    Returns
    -------
    numpy.ndarray
        float64 noise.

    Raises
    ------
    InvalidParameterError
        If ``spec``, ``dim``, ``rng`` or ``size`` is invalid.

    Notes
    -----
    ``"l2_laplace"``: radius ``r ~ Gamma(shape=d, scale=spec.scale)`` (NumPy's second argument
    is the scale, not the rate) times a direction uniform on the sphere (digest Section 3.1;
    paper 002 footnote 2: in polar coordinates ``p(r) ∝ r^(d-1) exp(-r/scale)``).
    ``"gaussian"``: ``N(0, scale^2 I_d)``. ``"laplace"``: iid ``Laplace(0, scale)``.

    This is the textbook float sampler, kept for noise studied on its own (calibration checks,
    audits of the noise law). Releasing ``w + sample(spec, d, rng)`` computed in floating point
    is the representation-leaking route of Mironov (2012) (digest pitfall P10): the floats it
    can produce depend on ``w``. dpcvx's mechanisms release
    :func:`release_point` ``(w, spec, rng)`` instead, the correctly rounded exact sum of ``w``
    and ideal noise. Use :func:`dpcvx.rng.make_rng` with ``None`` for cryptographic randomness
    in real releases.
    """
    from dpcvx.mechanisms.noise import NoiseSpec

    if not isinstance(spec, NoiseSpec):
        raise InvalidParameterError(
            f"The `spec` parameter of `sample` must be a NoiseSpec (see `calibrate`). "
            f"Got {type(spec).__name__}."
        )
    d = _check_count(dim, "dim")
    if not isinstance(rng, np.random.Generator):
        raise InvalidParameterError(
            "The `rng` parameter of `sample` must be a numpy.random.Generator. "
            f"Got {type(rng).__name__}: {rng!r}. Normalize it first with "
            "`dpcvx.rng.make_rng(rng)[0]`."
        )
    n = 1 if size is None else _check_count(size, "size")
    if spec.kind == "l2_laplace":
        radius = rng.gamma(shape=float(d), scale=spec.scale, size=n)
        out = radius[:, None] * _uniform_directions(rng, n, d)
    elif spec.kind == "gaussian":
        out = rng.normal(loc=0.0, scale=spec.scale, size=(n, d))
    else:  # "laplace"
        out = rng.laplace(loc=0.0, scale=spec.scale, size=(n, d))
    out = np.asarray(out, dtype=np.float64)
    return out[0] if size is None else out
