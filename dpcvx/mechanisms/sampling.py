"""Exact, floating-point-safe sampling: the released point is a function of ideal noise.

Continuous noise drawn in floating point leaks through the representation of its output
(Mironov 2012: the set of floats textbook Laplace sampling can produce depends on the shifted
value). dpcvx therefore never releases ``w + b`` computed in floating point. It releases

    ``fl(w + X)``: the float64 nearest to the exact real ``w_j + X_j`` (ties to even),

where ``X`` is the *ideal* continuous noise: a fixed function of ideal uniform random reals
(``-scale ln U`` for Laplace magnitudes, Box-Muller for Gaussians, a Gamma(d) radius times a
uniform direction for the l2-Laplace). Rounding the exact real is deterministic
post-processing of the ideal continuous mechanism, so the release has exactly the continuous
mechanism's guarantee, with nothing lost to the sampler.

How it is computed: each ideal uniform ``U`` is revealed lazily, 64 random bits at a time (the
bits drawn so far pin ``U`` to an interval of width ``2^-bits``); the noise is evaluated in
interval arithmetic (``mpmath.iv``, outward rounding) on those intervals; when the enclosure of
``w_j + X_j`` rounds to one float, that float is the output; otherwise 64 more bits of every
uniform involved are drawn and the precision raised (Las Vegas; needed for about one
coordinate in a thousand). Revealing more bits only when the revealed ones leave the output
undecided samples the ideal uniforms exactly.

The exponential mechanism's index (:func:`sample_index`) is the Gumbel-max of the
log-probabilities with ideal Gumbel noise ``-ln(-ln U)``, decided the same way: a float64 pass
with rigorous bounds keeps the candidates that can still win, and interval arithmetic on more
bits decides between them. Every index of positive mass, however small, is drawn with exactly
its probability (a float inverse CDF drops masses below about ``2^-53`` of the total).

What remains assumed: the generator's bits are independent and uniform (OS randomness by
default, :func:`dpcvx.rng.make_rng`; a seeded generator is for reproducibility only), and the
running time, which grows in the rare refinements, is not observed by the adversary (the
refinement's probability per coordinate is about ``2^-11``; it reveals only that the output
lies near a rounding boundary of the released float, itself released).
"""

from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Iterator
from typing import TYPE_CHECKING

import mpmath
import numpy as np
from mpmath import iv
from mpmath.libmp import finf, fnan, fninf, to_float

from dpcvx.errors import InvalidParameterError

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

#: random bits revealed per uniform at a time
_BITS = 64
#: working precision (bits) of the interval arithmetic at the first attempt
_PREC = 96
#: attempts before giving up (each adds 64 bits to every uniform); reaching it has
#: probability below 2^-600
_MAX_ROUNDS = 12


class _Uniform:
    """An ideal uniform on (0, 1), revealed 64 bits at a time: ``U in [k / 2^b, (k+1) / 2^b]``."""

    __slots__ = ("bits", "k")

    def __init__(self, rng: np.random.Generator) -> None:
        self.k = _draw(rng)
        self.bits = _BITS

    def refine(self, rng: np.random.Generator) -> None:
        self.k = (self.k << _BITS) | _draw(rng)
        self.bits += _BITS

    def interval(self):
        with mpmath.workprec(self.bits + 16):  # both endpoints exact
            lo = mpmath.ldexp(mpmath.mpf(self.k), -self.bits)
            hi = mpmath.ldexp(mpmath.mpf(self.k + 1), -self.bits)
        return iv.mpf([lo, hi])


@contextlib.contextmanager
def _precision(bits: int) -> Iterator[None]:
    """The interval context's working precision, restored afterwards."""
    saved = iv.prec
    iv.prec = bits
    try:
        yield
    finally:
        iv.prec = saved


def _draw(rng: np.random.Generator) -> int:
    return int(rng.integers(0, 2**64, dtype=np.uint64, endpoint=False))


def _bit(rng: np.random.Generator) -> int:
    return int(rng.integers(0, 2))


def _nearest(enclosure) -> float | None:
    """The float64 nearest to every point of the interval, or None when it straddles a
    rounding boundary (or is unbounded)."""
    lo, hi = enclosure._mpi_  # the raw endpoints
    if any(x in (finf, fninf, fnan) for x in (lo, hi)):
        return None
    a = to_float(lo, rnd="n")  # round to nearest, ties to even
    b = to_float(hi, rnd="n")
    return a if a == b and math.isfinite(a) else None


def _exponential(u):
    """``-ln U``: an ideal Exponential(1) from an ideal uniform (interval)."""
    return -iv.log(u)


def _gaussian(u1, u2):
    """Box-Muller: an ideal standard Gaussian from two ideal uniforms (intervals)."""
    return iv.sqrt(-2 * iv.log(u1)) * iv.cos(2 * iv.pi * u2)


def _solve(point: np.ndarray, rng: np.random.Generator, uniforms: list[_Uniform], noise_of):
    """``fl(point + X)`` where ``noise_of(intervals) -> list of interval X_j``."""
    out = np.empty(point.size)
    pending = list(range(point.size))
    for attempt in range(_MAX_ROUNDS):
        with _precision(_PREC + _BITS * attempt):
            X = noise_of([u.interval() for u in uniforms])
            still = []
            for j in pending:
                value = _nearest(iv.mpf(float(point[j])) + X[j])
                if value is None:
                    still.append(j)
                else:
                    out[j] = value
        if not still:
            return out
        pending = still
        for u in uniforms:
            u.refine(rng)
    raise InvalidParameterError(  # pragma: no cover - probability below 2^-600
        "The exact sampler could not decide the released value; nothing was released."
    )


def _check(point, scale: float, rng) -> np.ndarray:
    w = np.asarray(point, float)
    if w.ndim != 1 or not np.all(np.isfinite(w)):
        raise InvalidParameterError(
            f"The point to perturb must be a finite vector. Got shape {w.shape}."
        )
    if not (isinstance(scale, float) and math.isfinite(scale) and scale > 0):
        raise InvalidParameterError(f"The noise scale must be positive and finite. Got {scale!r}.")
    if not isinstance(rng, np.random.Generator):
        raise InvalidParameterError(
            f"`rng` must be a numpy.random.Generator (see dpcvx.rng.make_rng). Got {rng!r}."
        )
    return w


def laplace_point(point, scale: float, rng: np.random.Generator) -> np.ndarray:
    """``fl(point + X)`` with ``X`` iid ideal ``Laplace(0, scale)`` per coordinate."""
    w = _check(point, float(scale), rng)
    signs = [1 - 2 * _bit(rng) for _ in range(w.size)]
    uniforms = [_Uniform(rng) for _ in range(w.size)]
    s = iv.mpf(float(scale))

    def noise_of(us):
        return [sign * s * _exponential(u) for sign, u in zip(signs, us)]

    return _solve(w, rng, uniforms, noise_of)


def gaussian_point(point, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """``fl(point + X)`` with ``X`` ideal ``N(0, sigma^2 I)``."""
    w = _check(point, float(sigma), rng)
    uniforms = [_Uniform(rng) for _ in range(2 * w.size)]
    s = iv.mpf(float(sigma))

    def noise_of(us):
        return [s * _gaussian(us[2 * j], us[2 * j + 1]) for j in range(w.size)]

    return _solve(w, rng, uniforms, noise_of)


def l2_laplace_point(point, scale: float, rng: np.random.Generator) -> np.ndarray:
    """``fl(point + X)`` with ``X`` of density proportional to ``exp(-||x||_2 / scale)``: a
    radius ``Gamma(d, scale) = -scale sum_i ln U_i`` times the direction of ``d`` ideal
    Gaussians."""
    w = _check(point, float(scale), rng)
    d = w.size
    if d == 1:  # in one dimension the l2-Laplace is the Laplace distribution
        return laplace_point(w, scale, rng)
    uniforms = [_Uniform(rng) for _ in range(3 * d)]
    s = iv.mpf(float(scale))

    def noise_of(us):
        radius = s * iv.fsum(_exponential(u) for u in us[:d])
        g = [_gaussian(us[d + 2 * j], us[d + 2 * j + 1]) for j in range(d)]
        norm = iv.sqrt(iv.fsum(x * x for x in g))
        return [radius * x / norm for x in g]

    return _solve(w, rng, uniforms, noise_of)


def release_point(point, noise: NoiseSpec, rng: np.random.Generator) -> np.ndarray:
    """``fl(point + b)`` with ``b`` ideal noise of the calibrated ``noise`` (its kind and
    scale): the released point of every output-perturbation mechanism."""
    kind = noise.kind
    if kind == "l2_laplace":
        return l2_laplace_point(point, noise.scale, rng)
    if kind == "laplace":
        return laplace_point(point, noise.scale, rng)
    if kind == "gaussian":
        return gaussian_point(point, noise.scale, rng)
    raise InvalidParameterError(f"Unknown noise kind {kind!r}.")  # pragma: no cover


def sample_index(log_probabilities, rng: np.random.Generator) -> int:
    """One index ``i`` drawn with probability exactly proportional to
    ``exp(log_probabilities[i])`` (entries ``-inf`` have probability 0): the Gumbel-max of the
    log-probabilities with ideal Gumbel noise, decided by rigorous bounds."""
    logp = np.asarray(log_probabilities, float).ravel()
    if logp.size == 0 or np.isnan(logp).any() or np.isposinf(logp).any():
        raise InvalidParameterError(
            "`sample_index` needs finite log-probabilities (or -inf for zero mass)."
        )
    live = np.flatnonzero(np.isfinite(logp))
    if live.size == 0:
        raise InvalidParameterError("`sample_index`: every entry has zero mass.")
    if live.size == 1:
        return int(live[0])
    n = live.size
    keys = rng.integers(0, 2**64, size=n, dtype=np.uint64, endpoint=False)
    # float pass: U in [k/2^64, (k+1)/2^64]; G = -ln(-ln U) is increasing in U
    k = keys.astype(float)
    two64 = 2.0**64
    # one float step outward covers the rounding of k and k + 1 to float64
    u_lo = np.nextafter(k / two64, 0.0)
    u_hi = np.nextafter((k + 1.0) / two64, 2.0)
    top = u_hi >= 1.0  # the interval reaches U = 1: the Gumbel is unbounded above
    with np.errstate(divide="ignore", invalid="ignore"):
        g_lo = -np.log(-np.log(u_lo))
        g_hi = np.where(top, np.inf, -np.log(-np.log(np.where(top, 0.5, u_hi))))
    logw = logp[live]
    # outward margins for the float logs (a few ulps of each term) and the sum with logw
    margin = 1e-12 * (1.0 + np.abs(g_lo) + np.abs(g_hi) + np.abs(logw))
    lower = logw + g_lo - margin
    upper = logw + g_hi + margin
    upper[~np.isfinite(upper)] = np.inf
    best = np.max(lower[np.isfinite(lower)]) if np.isfinite(lower).any() else -np.inf
    candidates = np.flatnonzero(upper >= best)
    if candidates.size == 1:
        return int(live[candidates[0]])
    # exact decision among the candidates, on lazily refined uniforms
    uniforms = []
    for c in candidates:
        u = _Uniform.__new__(_Uniform)
        u.k, u.bits = int(keys[c]), _BITS
        uniforms.append(u)
    alive = list(range(candidates.size))
    for attempt in range(_MAX_ROUNDS):
        with _precision(_PREC + _BITS * attempt):
            scores = [
                iv.mpf(float(logw[candidates[i]])) - iv.log(-iv.log(uniforms[i].interval()))
                for i in alive
            ]
            top = max(score.a for score in scores)
            alive = [i for i, score in zip(alive, scores) if score.b >= top]
        if len(alive) == 1:
            return int(live[candidates[alive[0]]])
        for i in alive:
            uniforms[i].refine(rng)
    raise InvalidParameterError(  # pragma: no cover - probability below 2^-600
        "The exact sampler could not decide the exponential mechanism's index."
    )


# ----------------------------------------------------------------- float noise, for study
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

    Floating-point samplers such as these are exposed to the attacks of Mironov (2012) on
    textbook Laplace sampling (digest pitfall P10) once the noise is added to a point in
    floating point. dpcvx's mechanisms never do that: they release the correctly rounded exact
    sum of the point and ideal noise (:func:`dpcvx.mechanisms.sampling.release_point`). This
    function remains for noise that is studied on its own (calibration checks, audits). Use
    :func:`dpcvx.rng.make_rng` with ``None`` for cryptographic randomness in real releases.
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
