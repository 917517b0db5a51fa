"""The exact, floating-point-safe samplers (dpcvx.mechanisms.sampling).

Distribution tests are seeded Kolmogorov-Smirnov / chi-square tests at level ``LEVEL = 1e-3``:
with a fresh seed each would fail with probability at most 1e-3 for a correct sampler; the
seeds are fixed, so the suite is deterministic. Exactness is checked against an independent
300-bit recomputation (mpmath's ``mp`` and ``iv`` contexts, exact rationals for the final
rounding) from the same random words, read back from an identically seeded generator with the
documented word layout, or from a scripted generator.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from mpmath import iv, mp
from mpmath.libmp import finf, fninf, from_man_exp
from randomgen import UserBitGenerator
from scipy import stats

from dpcvx.errors import InvalidParameterError
from dpcvx.mechanisms import sampling
from dpcvx.mechanisms.noise import calibrate
from dpcvx.mechanisms.sampling import (
    gaussian_point,
    l2_laplace_point,
    laplace_point,
    release_point,
    sample_index,
)

LEVEL = 1e-3
FIRST = 2  # words per uniform at the first attempt (128 bits)
TWO64 = 2**64


# ---------------------------------------------------------------------------- helpers
def scripted(words, seed: int = 0) -> np.random.Generator:
    """A real numpy Generator whose 64-bit words are ``words``, then a seeded stream."""
    queue = list(words)
    rest = np.random.default_rng(seed)

    def next_64(_state):
        if queue:
            return int(queue.pop(0))
        return int(rest.integers(0, TWO64, dtype=np.uint64))

    return np.random.Generator(UserBitGenerator(next_64, 64))


class Counting:
    """Counts the 64-bit words a generator hands out."""

    def __init__(self, seed: int):
        self.count = 0
        inner = np.random.default_rng(seed)

        def next_64(_state):
            self.count += 1
            return int(inner.integers(0, TWO64, dtype=np.uint64))

        self.rng = np.random.Generator(UserBitGenerator(next_64, 64))


def read_words(seed: int, count: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return [int(x) for x in rng.integers(0, TWO64, size=count, dtype=np.uint64)]


def join(words) -> int:
    k = 0
    for w in words:
        k = (k << 64) | int(w)
    return k


def nearest(x) -> float:
    """The float nearest to an mpmath number (ties to even), via exact rationals: CPython's
    int / int division is correctly rounded, subnormals included."""
    raw = x._mpi_[0] if hasattr(x, "_mpi_") else mpmath.mpf(x)._mpf_  # an end of an iv.mpf
    sign, man, exp, _ = raw
    value = Fraction(int(man)) * Fraction(2) ** int(exp)
    return float(-value if sign else value)


def decide(values) -> float | None:
    """The common nearest float of a set of exact reals (interval ends), or None."""
    outs = {nearest(v) for v in values}
    return outs.pop() if len(outs) == 1 else None


def uniform_ends(k: int, bits: int):
    """The exact ends ``k / 2^bits`` and ``(k + 1) / 2^bits`` of a revealed uniform."""
    with mp.workprec(bits + 64):
        return mp.ldexp(mp.mpf(k), -bits), mp.ldexp(mp.mpf(k + 1), -bits)


# ---------------------------------------------------------------------------- rounding
def test_the_rounding_of_exact_reals_to_float64_is_correct_including_subnormals_and_ties():
    rnd = random.Random(3)
    cases = []
    for _ in range(4000):
        bits = rnd.choice([1, 20, 53, 54, 55, 80, 120])
        man = rnd.getrandbits(bits) | 1
        exp = rnd.choice(
            [rnd.randint(-1200, -1000), rnd.randint(-200, 200), rnd.randint(800, 1023 - bits)]
        )
        cases.append((man, exp))
    # exact midpoints between consecutive floats (normal and subnormal), both parities
    for f in [1.0, 1.5, 3.0, 1e-310, 5e-324, 2.2250738585072014e-308, 1e300, 0.1]:
        up = math.nextafter(f, math.inf)
        mid = (Fraction(f) + Fraction(up)) / 2
        cases.append((mid.numerator, -int(math.log2(mid.denominator))))
    cases.append((1, -1075))  # half the least subnormal: the tie goes to 0
    cases.append((3, -1076))  # 0.75 of the least subnormal: rounds up
    for man, exp in cases:
        for sign in (1, -1):
            expected = float(sign * Fraction(man) * Fraction(2) ** exp)
            got = sampling._nearest(sign * man, exp)
            assert got == expected and math.copysign(1, got) == math.copysign(1, expected)
    # IEEE overflow: below max + half an ulp rounds to max, at or above it to inf
    top = Fraction(2) ** 1024 - Fraction(2) ** 970
    below = top - Fraction(2) ** 900
    assert sampling._nearest(below.numerator, 0) == 1.7976931348623157e308
    assert sampling._nearest(top.numerator, 0) == math.inf
    assert sampling._nearest(-top.numerator, 0) == -math.inf


def test_the_exact_sum_of_a_float_and_an_enclosure_decides_like_exact_rationals():
    """``w + X`` is decided from the exact rational sums of ``w`` with both ends of ``X``'s
    enclosure: the value when both round to one float (of one sign), None otherwise, for
    floats from subnormals to near overflow and enclosures at and across rounding
    boundaries; every float is its own exact ``m 2^e``."""
    rnd = random.Random(11)
    floats = [0.0, -0.0, 5e-324, -2.5e-320, 1e-310, 0.1, -1.5, 3.0, 1e300, -1.7e308]
    floats += [rnd.uniform(-1, 1) * 10.0 ** rnd.randint(-300, 300) for _ in range(200)]
    decided = undecided = 0
    for w in floats:
        m, e = sampling._exact(w)
        assert Fraction(m) * Fraction(2) ** e == Fraction(w)
        for _ in range(20):
            exp = rnd.randint(-1200, 1000)
            lo = rnd.choice([1, -1]) * rnd.getrandbits(rnd.choice([1, 60, 215]))
            hi = lo + rnd.choice([0, 1, 2, rnd.getrandbits(40)])
            if rnd.random() < 0.2:  # an enclosure ending at a midpoint next to w
                mid = (Fraction(w) + Fraction(math.nextafter(w, math.inf))) / 2 - Fraction(w)
                exp = min(exp, -1200)
                lo = int(mid * Fraction(2) ** -exp) - 1
                hi = lo + 1
            ends = []
            for end in (lo, hi):
                exact = Fraction(w) + Fraction(end) * Fraction(2) ** exp
                try:
                    ends.append(float(exact) if exact != 0 else 0.0)
                except OverflowError:
                    ends.append(math.inf if exact > 0 else -math.inf)
            same = ends[0] == ends[1] and math.copysign(1, ends[0]) == math.copysign(1, ends[1])
            got = sampling._decide((m, e), (lo, hi, exp))
            if same:
                decided += 1
                assert got == ends[0] and math.copysign(1, got) == math.copysign(1, ends[0])
            else:
                undecided += 1
                assert got is None
    assert decided > 1000 and undecided > 100
    assert sampling._decide((1, 0), None) is None


# ---------------------------------------------------------------------------- (a) laws
@pytest.mark.statistical
def test_laplace_gaussian_and_l2_laplace_follow_their_laws():
    rng = np.random.default_rng(2026)
    lap = np.array([laplace_point(np.zeros(1), 2.0, rng)[0] for _ in range(3000)])
    assert stats.kstest(lap, stats.laplace(scale=2.0).cdf).pvalue > LEVEL
    # Gaussian: d = 3 covers both halves of a Box-Muller pair and the odd last coordinate
    gau = np.array([gaussian_point(np.zeros(3), 1.5, rng) for _ in range(1500)])
    for j in range(3):
        assert stats.kstest(gau[:, j], stats.norm(scale=1.5).cdf).pvalue > LEVEL
    # the two halves of a pair are independent: their correlation is ~ N(0, 1/n)
    assert abs(np.corrcoef(gau[:, 0], gau[:, 1])[0, 1]) < 3.3 / math.sqrt(1500)
    for d, scale in ((2, 0.4), (3, 0.7), (6, 1.3)):
        pts = np.array([l2_laplace_point(np.zeros(d), scale, rng) for _ in range(1500)])
        radius = np.linalg.norm(pts, axis=1)
        assert stats.kstest(radius, stats.gamma(d, scale=scale).cdf).pvalue > LEVEL
        if d == 2:  # the angle of a uniform direction in the plane is uniform
            angle = np.arctan2(pts[:, 1], pts[:, 0])
            assert stats.kstest(angle, stats.uniform(-np.pi, 2 * np.pi).cdf).pvalue > LEVEL
        if d == 3:  # Archimedes: a coordinate of a uniform point of S^2 is uniform on [-1, 1]
            assert stats.kstest(pts[:, 0] / radius, stats.uniform(-1, 2).cdf).pvalue > LEVEL
    # in one dimension the l2-Laplace law is Laplace's
    one = np.array([l2_laplace_point(np.zeros(1), 0.5, rng)[0] for _ in range(2000)])
    assert stats.kstest(one, stats.laplace(scale=0.5).cdf).pvalue > LEVEL


@pytest.mark.statistical
def test_release_point_draws_the_calibrated_noise():
    rng = np.random.default_rng(17)
    specs = {
        "l2_laplace": calibrate(1.0, 1.0, 0.0),
        "laplace": calibrate(1.0, 1.0, 0.0, norm="l1"),
        "gaussian": calibrate(1.0, 1.0, 1e-5),
    }
    w = np.array([[3.0, -1.0], [0.25, 8.0]])  # any shape is kept
    for kind, spec in specs.items():
        draws = np.array([release_point(w, spec, rng) for _ in range(600)])
        assert draws.shape == (600, 2, 2)
        noise = (draws - w).reshape(600, 4)
        if kind == "laplace":
            law = stats.laplace(scale=spec.scale)
            assert stats.kstest(noise[:, 0], law.cdf).pvalue > LEVEL
        elif kind == "gaussian":
            law = stats.norm(scale=spec.scale)
            assert stats.kstest(noise[:, 3], law.cdf).pvalue > LEVEL
        else:
            radius = np.linalg.norm(noise, axis=1)
            law = stats.gamma(4, scale=spec.scale)
            assert stats.kstest(radius, law.cdf).pvalue > LEVEL


# ---------------------------------------------------------------------------- (b) exactness
def replay_laplace(seed: int, w: np.ndarray, scale: float) -> list[float | None]:
    """fl(w_j + X_j) recomputed at 300 bits from the first-round words (None when the
    first-round interval leaves the rounding undecided)."""
    d = w.size
    n_sign = -(-d // 64)
    words = read_words(seed, n_sign + FIRST * d)
    out = []
    with mp.workprec(300):
        for j in range(d):
            negative = (words[j // 64] >> (j % 64)) & 1
            k = join(words[n_sign + FIRST * j : n_sign + FIRST * (j + 1)])
            lo, hi = uniform_ends(k, 64 * FIRST)
            if lo == 0:
                out.append(None)
                continue
            sign = -1 if negative else 1
            ends = [mp.mpf(float(w[j])) + sign * mp.mpf(scale) * -mp.log(u) for u in (lo, hi)]
            out.append(decide(ends))
    return out


@pytest.mark.parametrize(
    "w, scale",
    [
        (0.0, 1.0),
        (1e8, 1e-12),  # noise far below the unit in the last place of w
        (1e8, 1e-8),  # noise of the order of that unit: outputs on a few floats near 1e8
        (-3.5, 1e-300),
        (1.0, 1e6),
        (0.0, 1e-320),  # subnormal outputs: a single, correct rounding is needed
    ],
)
def test_laplace_releases_the_correctly_rounded_exact_sum(w, scale):
    decided = 0
    for seed in range(200):
        (expected,) = replay_laplace(seed, np.array([w]), scale)
        got = laplace_point(np.array([w]), scale, np.random.default_rng(seed))[0]
        if expected is not None:
            decided += 1
            assert got == expected, (seed, got, expected)
    assert decided >= 198


def test_laplace_in_many_coordinates_is_exact_and_differs_from_the_textbook_float_sum():
    rng = np.random.default_rng(4)
    w = np.concatenate([1e8 * rng.normal(size=40), np.zeros(40), rng.normal(size=40)])
    scale = 1e-8
    mismatches = 0
    for seed in range(10):
        expected = replay_laplace(seed, w, scale)
        got = laplace_point(w, scale, np.random.default_rng(seed))
        words = read_words(seed, 2 + FIRST * w.size)
        for j, e in enumerate(expected):
            assert e is not None and got[j] == e
            # the textbook computation from the same bits: a float uniform, float log, float sum
            u = join(words[2 + FIRST * j : 2 + FIRST * (j + 1)]) / 2.0**128
            sign = -1.0 if (words[j // 64] >> (j % 64)) & 1 else 1.0
            mismatches += float(w[j] + sign * scale * -math.log(u)) != got[j]
    assert mismatches > 20  # the float route differs on many coordinates where w = 0


def replay_gaussian(seed: int, w: np.ndarray, sigma: float) -> list[float | None]:
    d = w.size
    pairs = -(-d // 2)
    words = read_words(seed, 2 * FIRST * pairs)
    out = []
    with mp.workprec(300):
        for j in range(d):
            p = j // 2
            a = join(words[2 * FIRST * p : 2 * FIRST * p + FIRST])
            b = join(words[2 * FIRST * p + FIRST : 2 * FIRST * (p + 1)])
            trig = mp.sin if j % 2 else mp.cos
            # R is monotone in A and cos / sin in B on the box: the range is spanned by corners
            corners = [
                mp.mpf(float(w[j])) + mp.mpf(sigma) * mp.sqrt(-2 * mp.log(u)) * trig(2 * mp.pi * v)
                for u in uniform_ends(a, 64 * FIRST)
                for v in uniform_ends(b, 64 * FIRST)
            ]
            out.append(decide([min(corners), max(corners)]))
    return out


@pytest.mark.parametrize("w, sigma", [(0.0, 1.0), (1e8, 1e-12), (1e8, 3e-8), (-2.0, 1e-310)])
def test_gaussian_releases_the_correctly_rounded_exact_sum(w, sigma):
    decided = 0
    for seed in range(100):
        point = np.full(3, w)
        expected = replay_gaussian(seed, point, sigma)
        got = gaussian_point(point, sigma, np.random.default_rng(seed))
        for j, e in enumerate(expected):
            if e is not None:
                decided += 1
                assert got[j] == e, (seed, j, got[j], e)
    assert decided >= 297


def iv_box_muller_radius(u):
    """``sqrt(-2 ln U)`` over an mpmath.iv interval of ``U`` in ``(0, 1]`` (at ``U = 1`` the
    logarithm's enclosure dips below 0, where the square's root is 0)."""
    two_e = -2 * iv.log(u)
    return iv.sqrt(iv.mpf([max(two_e.a, 0), two_e.b]))


def iv_l2_laplace(uniforms: list[tuple[int, int]], d: int, scale: float) -> list:
    """Enclosures of the l2-Laplace noise X_j at 300 bits with mpmath.iv, by the textbook
    formula (sum of logs, norm of the Gaussian vector), over the box of uniforms given as
    (k, bits) in the documented order V_1..V_d, A_0, B_0, A_1, B_1, ..."""
    box = [iv.mpf(list(uniform_ends(k, bits))) for k, bits in uniforms]
    radius = -iv.mpf(scale) * iv.fsum(iv.log(v) for v in box[:d])
    gauss = []
    for p in range(-(-d // 2)):
        r = iv_box_muller_radius(box[d + 2 * p])
        angle = 2 * iv.pi * box[d + 2 * p + 1]
        gauss += [r * iv.cos(angle), r * iv.sin(angle)]
    gauss = gauss[:d]
    norm2 = iv.fsum(g * g for g in gauss)  # iv's product of an interval around 0 with itself
    norm = iv.sqrt(iv.mpf([max(norm2.a, 0), norm2.b]))  # dips below 0: a square does not
    return [radius * gauss[j] / norm for j in range(d)]


def replay_l2_laplace(uniforms: list[tuple[int, int]], w: np.ndarray, scale: float):
    """fl(w + X) from :func:`iv_l2_laplace` (None where its enclosure is undecided)."""
    saved = iv.prec
    iv.prec = 300
    try:
        noise = iv_l2_laplace(uniforms, w.size, scale)
        sums = [iv.mpf(float(w[j])) + x for j, x in enumerate(noise)]
        return [decide([x.a, x.b]) for x in sums]  # the raw ends of the enclosure
    finally:
        iv.prec = saved


@pytest.mark.parametrize("d, w0, scale", [(2, 0.0, 1.0), (3, 1e8, 1e-12), (5, 1.0, 1e-9)])
def test_l2_laplace_releases_the_correctly_rounded_exact_sum(d, w0, scale):
    n_uniforms = d + 2 * (-(-d // 2))
    decided = 0
    for seed in range(40):
        w = np.full(d, w0) + np.arange(d)
        words = read_words(seed, FIRST * n_uniforms)
        uniforms = [(join(words[FIRST * i : FIRST * (i + 1)]), 128) for i in range(n_uniforms)]
        expected = replay_l2_laplace(uniforms, w, scale)
        got = l2_laplace_point(w, scale, np.random.default_rng(seed))
        for j, e in enumerate(expected):
            if e is not None:
                decided += 1
                assert got[j] == e, (seed, j, got[j], e)
    assert decided >= 40 * d - 1


def test_an_undecided_laplace_coordinate_draws_one_more_word_and_stays_exact():
    """X = ln U lands within 2^-140 of the midpoint between -1.5 and its float neighbour
    above: 128 bits cannot decide, the sampler draws a third word for U and rounds right."""
    mid = Fraction(-3, 2) + Fraction(1, 2**53)  # ulp of 1.5 is 2^-52
    rnd = random.Random(8)
    for side in (-1, 1):
        with mp.workprec(400):
            target = mp.exp(mp.mpf(mid.numerator) / mid.denominator) + side * mp.mpf(2) ** -150
            k = int(mp.floor(target * mp.mpf(2) ** 192))
        words = [1, k >> 128, (k >> 64) & (TWO64 - 1), k & (TWO64 - 1), rnd.getrandbits(64)]
        with mp.workprec(400):
            lo, hi = uniform_ends(k, 192)
            assert (
                mp.log(uniform_ends(k >> 64, 128)[0]) < mid < mp.log(uniform_ends(k >> 64, 128)[1])
            )
            expected = decide([mp.log(lo), mp.log(hi)])
        assert expected == (-1.5 if side < 0 else math.nextafter(-1.5, 0.0))
        got = laplace_point(np.zeros(1), 1.0, scripted(words))[0]
        assert got == expected


def test_an_l2_laplace_release_with_an_unbounded_first_enclosure_is_refined_exactly():
    """V_1's first 128 bits are zero: the radius is unbounded until a refinement round, which
    draws one more word for every uniform, in the documented order."""
    d = 3
    n_uniforms = d + 4
    rnd = random.Random(11)
    first = [0, 0] + [rnd.getrandbits(64) for _ in range(FIRST * (n_uniforms - 1))]
    second = [rnd.getrandbits(64) | 1 for _ in range(n_uniforms)]
    w = np.array([0.5, -2.0, 1e3])
    got = l2_laplace_point(w, 0.8, scripted(first + second))
    uniforms = [
        ((join(first[FIRST * i : FIRST * (i + 1)]) << 64) | second[i], 192)
        for i in range(n_uniforms)
    ]
    expected = replay_l2_laplace(uniforms, w, 0.8)
    assert None not in expected
    np.testing.assert_array_equal(got, expected)


# ---------------------------------------------------------------------------- enclosures
def captured_enclosures(sampler, d: int, scale: float, keys: list[int], bits: int) -> list:
    """The enclosures of the noise X that ``sampler`` computes when its uniforms' revealed
    ``bits`` bits are ``keys`` (in its documented order): ``_settle`` is replaced by a stub
    that evaluates every group once on those keys and records what the evaluation returns."""
    captured: list = []

    def stub(w, rng, groups, per_group, evaluate):
        for g, members in enumerate(groups):
            us = list(keys[g * per_group : (g + 1) * per_group])
            for x in evaluate(g, us, bits, bits + sampling._GUARD, list(members)):
                # an exact interval (lo, hi, exp) as raw mpmath floats; None: unbounded
                lo, hi, exp = (None, None, 0) if x is None else x
                captured.append(
                    (fninf, finf) if x is None else (from_man_exp(lo, exp), from_man_exp(hi, exp))
                )
        return np.zeros(w.shape)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(sampling, "_settle", stub)
        # Laplace's sign words all 0: every sign +
        sampler(np.zeros(d), scale, scripted([0] * -(-d // 64)))
    return captured


def exact_noise(kind: str, d: int, scale, us: list) -> list | None:
    """The noise at the uniforms ``us`` (mpmath reals at the current precision), by the
    textbook formulas: Laplace ``scale (-ln U_j)`` (sign +), Box-Muller
    ``scale sqrt(-2 ln A_p) (cos or sin)(2 pi B_p)``, l2-Laplace
    ``scale (-ln(V_1 ... V_d)) G / ||G||``."""
    if kind == "laplace":
        return [scale * -mp.log(u) for u in us]
    first = d if kind == "l2_laplace" else 0
    gauss = []
    for p in range(-(-d // 2)):
        r = mp.sqrt(-2 * mp.log(us[first + 2 * p]))
        angle = 2 * mp.pi * us[first + 2 * p + 1]
        gauss += [r * mp.cos(angle), r * mp.sin(angle)]
    gauss = gauss[:d]
    if kind == "gaussian":
        return [scale * g for g in gauss]
    radius = scale * -mp.fsum(mp.log(v) for v in us[:d])
    norm = mp.sqrt(mp.fsum(g * g for g in gauss))
    if norm == 0:  # every A_p = 1: no direction (a point of the box of measure zero)
        return None
    return [radius * g / norm for g in gauss]


def box_points(keys: list[int], bits: int, rnd: random.Random, count: int):
    """Points of the box of uniforms ``[k, k + 1] / 2^bits``: both extreme corners, random
    corners and random interior points (the noise's range over the box is reached at its
    corners where it is monotone in each uniform)."""
    ends = [uniform_ends(k, bits) for k in keys]
    yield [lo for lo, _ in ends]
    yield [hi for _, hi in ends]
    for m in range(count):
        if m % 3 == 2:
            yield [lo + (hi - lo) * mp.mpf(rnd.random()) for lo, hi in ends]
        else:
            yield [e[rnd.getrandbits(1)] for e in ends]


SAMPLERS = {"laplace": laplace_point, "gaussian": gaussian_point, "l2_laplace": l2_laplace_point}


def adversarial_keys(kind: str, d: int, bits: int, rnd: random.Random) -> list[int]:
    """Revealed uniforms at the edges of the noise's formulas: a uniform pinned near 0 (its
    logarithm steep and large) or near 1 (its logarithm near 0, and the Box-Muller radius's
    error as large as the radius), an angle near a quarter turn (a cosine or sine near 0 and
    steepest), and random ones."""
    top = 1 << bits
    pool = [1, 2, 3, top - 1, top - 2, top // 4 - 1, top // 4, top // 2 + 1, 3 * top // 4]
    count = {"laplace": d, "gaussian": 2 * (-(-d // 2)), "l2_laplace": d + 2 * (-(-d // 2))}
    keys = [
        rnd.choice(pool) if rnd.random() < 0.5 else rnd.getrandbits(bits) | 1
        for _ in range(count[kind])
    ]
    if kind != "laplace":  # a pair with both: its coordinate's error is all second order
        first = d if kind == "l2_laplace" else 0
        for p in range(-(-d // 2)):
            if rnd.random() < 0.3:
                keys[first + 2 * p] = rnd.choice([top - 1, top - 2])
                keys[first + 2 * p + 1] = rnd.choice([top // 4 - 1, top // 4, 3 * top // 4])
    return keys


def enclosure_misses(kind: str, cases: int, seed: int) -> int:
    """How many (point, coordinate) pairs of the box of revealed uniforms have their exact
    noise (300 bits) outside the sampler's enclosure, over ``cases`` random draws of the
    dimension, the revealed bits (few, so that the boxes are wide and every error term
    counts, up to the samplers' own 128) and adversarial uniforms."""
    rnd = random.Random(seed)
    misses = 0
    with mp.workprec(300):
        for _ in range(cases):
            d, bits = rnd.choice([1, 2, 3, 5]), rnd.choice([6, 10, 16, 24, 64, 128])
            if kind == "l2_laplace" and d == 1:
                d = 2  # d = 1 is Laplace's sampler
            scale = rnd.choice([1.0, 0.37, 1e-9, 3e12])
            keys = adversarial_keys(kind, d, bits, rnd)
            got = captured_enclosures(SAMPLERS[kind], d, scale, keys, bits)
            assert len(got) == d
            bounds = [(mp.mpf(lo), mp.mpf(hi)) for lo, hi in got]
            for us in box_points(keys, bits, rnd, 24):
                if any(u == 0 for u in us):  # -ln 0: the enclosure must be unbounded
                    misses += sum(mp.isfinite(lo) or mp.isfinite(hi) for lo, hi in bounds)
                    continue
                noise = exact_noise(kind, d, mp.mpf(scale), us)
                for (lo, hi), x in zip(bounds, noise or []):
                    misses += not lo <= x <= hi
    return misses


@pytest.mark.parametrize("kind", ["laplace", "gaussian", "l2_laplace"])
def test_the_fixed_point_enclosures_contain_the_noise_over_the_revealed_box(kind):
    """The samplers' fixed-point evaluation (one function value per uniform, widened by its
    slope; exact integer products, square roots and quotients with carried error bounds)
    encloses the exact noise at every point tried of the box of revealed uniforms, with
    uniforms next to 0 and 1 and angles next to a quarter turn, from 6 revealed bits (wide
    boxes, where every term of the bounds counts) to 128."""
    assert enclosure_misses(kind, 60, seed=5) == 0


@pytest.mark.parametrize("kind", ["laplace", "gaussian", "l2_laplace"])
def test_the_enclosures_of_revealed_uniforms_are_narrow(kind):
    """Not vacuous: at the samplers' 128 revealed bits, on random uniforms, every enclosure
    is finite and within a relative 2^-110 of the noise's size and scale (the refinement
    rounds that a wide enclosure would force are then rare)."""
    rnd = random.Random(9)
    for _ in range(20):
        d, scale = rnd.choice([1, 2, 3, 5, 20]), rnd.choice([1.0, 1e-9, 3e12])
        if kind == "l2_laplace" and d == 1:
            d = 2
        count = {"laplace": d, "gaussian": 2 * (-(-d // 2)), "l2_laplace": d + 2 * (-(-d // 2))}
        keys = [rnd.getrandbits(128) | 1 for _ in range(count[kind])]
        for lo, hi in captured_enclosures(SAMPLERS[kind], d, scale, keys, 128):
            lo, hi = mpmath.mpf(lo), mpmath.mpf(hi)
            size = max(abs(lo), abs(hi)) + scale
            assert mpmath.isfinite(hi - lo) and hi - lo <= size * mpmath.mpf(2) ** -110


def fixed_point_misses(mul, div, sqrt, cases: int = 3000, seed: int = 12) -> int:
    """How often the fixed-point product, quotient and square root (of reals held as
    ``v +- e`` in units of ``2^-P``) give a bound that misses the exact result at a corner of
    their inputs' box (where those monotone or bilinear functions reach their extremes),
    over random values and errors, some errors as large as the values."""
    rnd = random.Random(seed)
    prec = 40
    misses = 0
    for _ in range(cases):
        x, y = (rnd.choice([1, -1]) * rnd.getrandbits(rnd.choice([1, 20, 41, 60])) for _ in "xy")
        ex, ey = (rnd.choice([0, 1, rnd.getrandbits(10), abs(v) // 2, abs(v)]) for v in (x, y))
        v, e = mul((x, ex), (y, ey), prec)
        for a in (x - ex, x + ex):
            for b in (y - ey, y + ey):
                misses += abs(Fraction(a * b, 2**prec) - v) > e
        if y > ey:
            out = div((x, ex), (y, ey), prec)
            v, e = out
            for a in (x - ex, x + ex):
                for b in (y - ey, y + ey):
                    misses += abs(Fraction(a * 2**prec, b) - v) > e
        if x > 0:
            out = sqrt((x, ex), prec)
            if out is not None:
                v, e = out
                for a in (max(x - ex, 0), x + ex):  # sqrt(a / 2^P) * 2^P = sqrt(a 2^P)
                    inside = (v + e) ** 2 >= a << prec and (v - e <= 0 or (v - e) ** 2 <= a << prec)
                    misses += not inside
    return misses


def test_the_fixed_point_operations_bound_their_results():
    """Each fixed-point operation's bound holds at every corner of its inputs' box, exactly
    (rationals and integers); mutants that drop a term or flip a sign are caught."""
    mul, div, sqrt = sampling._fixed_mul, sampling._fixed_div, sampling._fixed_sqrt
    assert fixed_point_misses(mul, div, sqrt) == 0

    def first_order_mul(a, b, prec):  # without e_x e_y
        (x, ex), (y, ey) = a, b
        return (x * y) >> prec, ((abs(x) * ey + abs(y) * ex) >> prec) + 2

    def flipped_div(a, b, prec):  # b + e_b where the divisor's least value b - e_b belongs
        (x, ex), (y, ey) = a, b
        q = (x << prec) // y
        return q, ((ex << prec) + (abs(q) + 1) * ey) // (y + ey) + 2

    def untruncated_sqrt(a, prec):  # the truncations not counted
        r, e = sqrt(a, prec)
        return r, e - 2

    assert fixed_point_misses(first_order_mul, div, sqrt) > 0
    assert fixed_point_misses(mul, flipped_div, sqrt) > 0
    assert fixed_point_misses(mul, div, untruncated_sqrt) > 0


def test_the_enclosure_check_catches_dropped_error_terms(monkeypatch):
    """Negative controls: without the sine's and cosine's slope over the angle's interval,
    the logarithm's over its uniform's, or the product of two errors in a product, the
    enclosures miss the noise."""
    with monkeypatch.context() as m:
        m.setattr(sampling, "_TRIG_SLOPE", 0)
        assert enclosure_misses("gaussian", 20, seed=6) > 0
    exact = sampling._fixed_neg_ln

    def without_slope(k, bits, prec):
        out = exact(k, bits, prec)
        return out if out is None else (out[0], out[1] - ((1 << prec) // k + 1))

    with monkeypatch.context() as m:
        m.setattr(sampling, "_fixed_neg_ln", without_slope)
        assert enclosure_misses("laplace", 20, seed=7) > 0
        assert enclosure_misses("l2_laplace", 20, seed=8) > 0

    def first_order(a, b, prec):
        (x, ex), (y, ey) = a, b
        return (x * y) >> prec, ((abs(x) * ey + abs(y) * ex) >> prec) + 2

    with monkeypatch.context() as m:
        m.setattr(sampling, "_fixed_mul", first_order)
        assert enclosure_misses("l2_laplace", 20, seed=10) > 0


def test_word_consumption_matches_the_documented_layout():
    for d in (1, 5, 64, 65):
        c = Counting(1)
        laplace_point(np.zeros(d), 1.0, c.rng)
        assert c.count == -(-d // 64) + FIRST * d
        c = Counting(2)
        gaussian_point(np.zeros(d), 1.0, c.rng)
        assert c.count == FIRST * 2 * (-(-d // 2))
        c = Counting(3)
        l2_laplace_point(np.zeros(d), 1.0, c.rng)
        expected = -(-1 // 64) + FIRST if d == 1 else FIRST * (d + 2 * (-(-d // 2)))
        assert c.count == expected
    c = Counting(4)
    sample_index(np.array([0.0, -np.inf, 1.0, 2.0]), c.rng)
    assert c.count == 3  # one word per finite entry


# ---------------------------------------------------------------------------- (c) Mironov
def test_every_float_near_the_noise_is_reachable_unlike_the_textbook_sampler():
    """Mironov (2012): ``scale * log(U)`` with a 53-bit uniform ``U`` reaches only some floats
    (the holes move with the shifted value, which is what the attack reads). Around
    ``X = -1.5`` (Laplace, ``w = 0``, ``scale = 1``) the textbook map reaches at most 5 of 12
    consecutive floats, while the exact sampler reaches each of them for suitable bits."""
    targets = [-1.5 + i * 2.0**-52 for i in range(12)]
    # the textbook route: every 53-bit uniform m / 2^53 whose log lands among the targets
    lo_m = math.floor(math.exp(targets[0]) * 2**53) - 3
    hi_m = math.ceil(math.exp(targets[-1]) * 2**53) + 3
    textbook = {math.log(m / 2**53) for m in range(lo_m, hi_m + 1)} & set(targets)
    assert len(textbook) <= 6
    for y in targets:
        with mp.workprec(300):
            k = int(mp.floor(mp.exp(mp.mpf(y)) * mp.mpf(2) ** 128))
        rng = scripted([1, k >> 64, k & (TWO64 - 1)])  # sign bit 1: negative
        assert laplace_point(np.zeros(1), 1.0, rng)[0] == y


# ---------------------------------------------------------------------------- (d) seeds
def test_seeded_draws_are_reproducible_and_inputs_checked():
    for spec in (
        calibrate(0.3, 1.0, 0.0),
        calibrate(0.3, 1.0, 1e-6),
        calibrate(0.3, 1, 0, norm="l1"),
    ):
        a = release_point(np.ones(5), spec, np.random.default_rng(7))
        b = release_point(np.ones(5), spec, np.random.default_rng(7))
        c = release_point(np.ones(5), spec, np.random.default_rng(8))
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, c)
    logp = np.linspace(0.0, 1.0, 50)
    draws = [sample_index(logp, np.random.default_rng(s)) for s in range(20)]
    assert draws == [sample_index(logp, np.random.default_rng(s)) for s in range(20)]
    with pytest.raises(InvalidParameterError, match="point"):
        laplace_point(np.array([np.nan]), 1.0, np.random.default_rng(0))
    with pytest.raises(InvalidParameterError, match="point"):
        gaussian_point(np.array([]), 1.0, np.random.default_rng(0))
    with pytest.raises(InvalidParameterError, match="scale"):
        laplace_point(np.zeros(1), -1.0, np.random.default_rng(0))
    with pytest.raises(InvalidParameterError, match="sigma"):
        gaussian_point(np.zeros(1), math.inf, np.random.default_rng(0))
    with pytest.raises(InvalidParameterError, match="rng"):
        l2_laplace_point(np.zeros(2), 1.0, 3)
    with pytest.raises(InvalidParameterError, match="noise"):
        release_point(np.zeros(2), 1.0, np.random.default_rng(0))
    with pytest.raises(InvalidParameterError, match="rng"):
        sample_index(np.zeros(2), np.random.RandomState(0))


# ---------------------------------------------------------------------------- sample_index
@pytest.mark.statistical
def test_sample_index_matches_the_exact_probabilities():
    logp = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
    rng = np.random.default_rng(11)
    runs = 20_000
    counts = np.bincount([sample_index(logp, rng) for _ in range(runs)], minlength=4)
    assert stats.chisquare(counts, runs * np.exp(logp)).pvalue > LEVEL
    # unnormalized, with zero-mass entries and a 2-D array (flat indices)
    weights = np.array([[0.0, 2.0, 1.0], [3.0, 0.0, 4.0]])
    with np.errstate(divide="ignore"):
        logw = np.log(weights) + 700.0
    counts = np.bincount([sample_index(logw, rng) for _ in range(10_000)], minlength=6)
    assert counts[0] == counts[4] == 0
    live = weights.ravel() > 0
    expected = 10_000 * weights.ravel()[live] / weights.sum()
    assert stats.chisquare(counts[live], expected).pvalue > LEVEL


def test_sample_index_never_draws_zero_mass_and_refuses_bad_input():
    rng = np.random.default_rng(0)
    logp = np.array([-np.inf, 0.0, -np.inf, -0.5])
    assert {sample_index(logp, rng) for _ in range(500)} <= {1, 3}
    assert sample_index(np.array([-np.inf, 2.0]), rng) == 1
    for bad in ([], [np.nan, 0.0], [np.inf, 0.0], [-np.inf, -np.inf]):
        with pytest.raises(InvalidParameterError, match="log_probabilities"):
            sample_index(np.array(bad, float), rng)


def test_the_float_pass_bounds_enclose_the_exact_gumbel_scores():
    rnd = random.Random(5)
    keys = [0, 1, 2, 2**53 - 1, 2**53, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 2**11, 2**64 - 1]
    keys += [rnd.getrandbits(64) for _ in range(300)] + [rnd.getrandbits(20) for _ in range(50)]
    keys += [TWO64 - 1 - rnd.getrandbits(20) for _ in range(50)]
    logw = np.array([rnd.choice([0.0, -45.0, 1e6, -3e-5, rnd.uniform(-50, 50)]) for _ in keys])
    lower, upper = sampling._gumbel_bounds(np.array(keys, dtype=np.uint64), logw)
    with mp.workprec(300):
        for k, lw, lo, hi in zip(keys, logw, lower, upper):
            u_lo, u_hi = uniform_ends(k, 64)
            g_lo = -mp.inf if u_lo == 0 else mp.mpf(lw) - mp.log(-mp.log(u_lo))
            g_hi = mp.inf if u_hi == 1 else mp.mpf(lw) - mp.log(-mp.log(u_hi))
            assert mp.mpf(lo) <= g_lo and g_hi <= mp.mpf(hi)
            if 2**40 < k < TWO64 - 2**40:  # tight where the interval itself is narrow
                assert float(hi) - float(lo) < 1e-9 * (1 + abs(lw) + abs(float(g_hi)))


def test_a_mass_far_below_two_to_the_minus_53_is_drawn_with_exactly_its_probability():
    """Entries with log-weights 0 and -45: entry 1 has relative mass c / (1 + c), c = e^-45
    (about 2^-65), which an inverse CDF with one float uniform never returns. With ideal
    uniforms, Gumbel-max returns 1 exactly when ``U_1 > exp(-c (-ln U_0))``. For random
    ``U_0`` and ``U_1`` placed 2^-254 to either side of that boundary (the words the sampler
    reads, in its order: one word each, then one more per round for both candidates), the
    sampler must return exactly the ideal answer: so P(1) = c / (1 + c) up to 2^-250."""
    logp = np.array([0.0, -45.0])
    rnd = random.Random(45)
    ones = 0
    for _ in range(60):
        k0 = rnd.getrandbits(256) | (1 << 250)
        with mp.workprec(600):
            u0_lo, u0_hi = uniform_ends(k0, 256)
            c = mp.exp(-45)
            edge_lo = mp.exp(-c * -mp.log(u0_lo))  # the boundary moves with U_0 by < 2^-300
            edge_hi = mp.exp(-c * -mp.log(u0_hi))
            assert edge_hi - edge_lo < mp.mpf(2) ** -300
            base = int(mp.floor(edge_lo * mp.mpf(2) ** 256))
        for offset, expected in ((-2, 0), (3, 1)):
            k1 = base + offset
            a = [(k0 >> (64 * (3 - i))) & (TWO64 - 1) for i in range(4)]
            b = [(k1 >> (64 * (3 - i))) & (TWO64 - 1) for i in range(4)]
            assert b[0] >= TWO64 - 64  # U_1 within 2^-58 of 1
            words = [a[0], b[0], a[1], b[1], a[2], b[2], a[3], b[3]]
            got = sample_index(logp, scripted(words))
            assert got == expected
            ones += got
    assert ones == 60
    # and with U_1 a typical uniform, entry 0 wins
    assert sample_index(logp, scripted([2**63, 2**63])) == 0


def test_a_million_entries_are_sampled():
    rng = np.random.default_rng(3)
    logp = rng.normal(size=1_000_000)
    logp[::3] = -np.inf
    for _ in range(3):
        i = sample_index(logp, rng)
        assert 0 <= i < logp.size and i % 3 != 0


_BACKEND_SCRIPT = """
import hashlib, numpy as np, mpmath.libmp
from dpcvx.mechanisms.sampling import gaussian_point, l2_laplace_point, laplace_point
h = hashlib.sha256()
rng = np.random.default_rng(7)
for _ in range(60):
    w = rng.normal(size=5) * 10.0 ** rng.integers(-8, 8)
    for f in (l2_laplace_point, laplace_point, gaussian_point):
        h.update(f(w, float(10.0 ** rng.integers(-10, 3)), rng).tobytes())
print(mpmath.libmp.BACKEND, h.hexdigest())
"""


def test_both_mpmath_backends_draw_the_same_values():
    """mpmath's gmpy2 backend (a dependency, for speed) and its pure-Python one must give
    bit-identical releases from the same generator: the backend is not part of the law."""
    import os
    import subprocess
    import sys

    import gmpy2  # noqa: F401 - a dependency: a missing one fails here, not skips

    runs = []
    for off in ("", "1"):
        env = {k: v for k, v in os.environ.items() if k != "MPMATH_NOGMPY"}
        if off:
            env["MPMATH_NOGMPY"] = off
        out = subprocess.run(
            [sys.executable, "-c", _BACKEND_SCRIPT], capture_output=True, text=True, env=env
        )
        assert out.returncode == 0, out.stderr
        runs.append(out.stdout.split())
    assert [r[0] for r in runs] == ["gmpy", "python"]
    assert runs[0][1] == runs[1][1]
