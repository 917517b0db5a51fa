"""Calibration of paper 004's deletion-stability output perturbation: pure functions of public
numbers.

Paper 004 is Ghazi, Kamath, Kumar, Meka, Manurangsi and Zhang, "On User-Level Private Convex
Optimization". Line numbers ``L...`` below refer to its seed text
``shared/papers/004_57fbb49219620e0c.txt``; "erratum #" and "P#" are the numbered errata
(Section 11) and pitfalls (Section 10) of its digest. Nothing here touches data: every function
maps public parameters (``epsilon``, ``delta``, ``n``, ``m``, Lipschitz and strong-convexity
constants, a failure probability) to numbers, so calling them costs no privacy.

What is here
------------
:func:`deletion_calibration` -> :class:`DeletionCalibration`
    Line 3 of Algorithm 1, ``DelOutputPert`` (L138), and Definition 3.4 (L131-133):
    ``epsilon_bar = epsilon/2``, ``delta_bar = delta/(e^epsilon_bar + 2)``,
    ``kappa = 1 + ceil(ln(1/delta_bar)/epsilon_bar)``, the stability radius ``4 kappa``
    (Alg 1 line 5), the sensitivity ``8 kappa Delta`` of the released centre (proof of
    Thm 3.3, L176-198) and the Gaussian ``sigma`` for it, either the paper's closed form
    ``2 sqrt(ln(2/delta_bar)) 8 kappa Delta / epsilon_bar`` or the analytic Gaussian of Balle &
    Wang (2018). Also the law of the radius ``R1 ~ TDLap(epsilon_bar, delta_bar)`` (Alg 1
    line 4) on ``{0, ..., 2 kappa}``.
:func:`tdlap_sample`
    One exact draw of ``R1`` (Alg 1 line 4, Def 3.4).
:func:`deletion_sensitivity_bound`
    Theorem 3.6 (L227-231) applied to every sub-dataset, with the union bound of Corollary 3.7
    (L240-246) made explicit: the target deletion sensitivity ``Delta`` under which
    ``SCOutputPert`` (Algorithm 2, L235-239) returns the unperturbed-centre output with
    probability ``1 - beta``.
:func:`population_radius`
    Proposition B.1 (L547-550): the distance between the empirical and the population
    minimizer that holds with probability ``1 - beta``.
:func:`required_users`
    The number of users Algorithm 1 needs (``4 kappa + 2``) or that the provable ``Delta``
    needs (``2 (4 kappa + 1)``), optionally per phase of a basic composition (Alg 3 line 4).
:func:`crossover_items`
    The number of items per user ``m*`` above which the deletion route's ``sigma`` is smaller
    than naive user-level output perturbation's (the 004 Section 2 baseline, sensitivity
    ``2G/(mu n)``).

Corrections to the paper
------------------------
- **Erratum 1** (Alg 2 line 3, L238). The printed ``Delta = 10 G sqrt(ln(1/beta))/(mu n
  sqrt(m))`` lacks the union bound over deleted sets that Corollary 3.7 and Theorem 3.1 carry.
  :func:`deletion_sensitivity_bound` uses the provable
  ``5 G sqrt(ln(1/beta) + (r + 1) ln n) / (mu (n - r - 1) sqrt(m))``; :func:`crossover_items`
  offers the printed form for comparison only.
- **Erratum 9** (proof of Prop B.1). Its intermediate probability statements are flipped; the
  statement itself (probability at least ``1 - beta``) is correct and is what
  :func:`population_radius` implements.
- **Erratum 18** (Thm 3.1 says "for all beta > 0"). Theorem 3.6, Lemma 3.8 and Proposition B.1
  need ``beta < 1/e``; the calculators enforce the hypothesis of the result they apply.
- **P4** (constrained domains). Theorem 3.6's proof uses ``grad L(theta*) = 0``. With an
  active constraint, the centred gradients ``grad l - mean`` have norm at most ``2G`` and sum
  to zero, and the variational inequality gives the same bound with ``2G`` in place of ``G``
  (``constrained=True``).
- **P10** (naive baseline). Its ``sigma`` is the analytic Gaussian, valid for every epsilon,
  not the classical ``sqrt(2 ln(1.25/delta))`` form of the digest's Section 8 (valid only for
  epsilon below 1).
- **P12** (floating point). Every privacy-relevant number is rounded toward the safe side:
  ``delta_bar`` down; ``kappa`` outward, ``1 + ceil(q (1 + 2^-50))``; ``8 kappa Delta`` and
  ``sigma`` up, and ``sigma`` is checked against the exact Gaussian profile. A ``kappa`` that
  is too large is safe, since the same ``kappa`` sets the ``4 kappa`` test radius and the
  ``8 kappa Delta`` sensitivity; one that is too small is not. The radius is sampled exactly
  (see :func:`tdlap_sample`).
- **P17** (epsilon above 1). The paper assumes ``epsilon <= 1`` and ``delta <= 1/2``
  throughout, but the privacy proof of Algorithm 1 holds for every ``epsilon > 0`` and
  ``delta`` in ``(0, 1)``. Tests use ``epsilon = 8`` to make ``kappa = 3``.

Status
------
These are calibrations only. The mechanisms that use them (``DelOutputPert``, Alg 1, and
``SCOutputPert``, Alg 2, with the Appendix C fast path) are **reference-only** (implementation
spec C.8). Their stability test evaluates the function on every sub-dataset with up to
``4 kappa + 1`` users deleted, that is ``n^Theta(log(1/delta)/epsilon)`` evaluations (004 L457);
the fast path is private only with that test as its fallback; and with honest constants the
deletion route is noisier than the naive user-level baseline until ``m`` is about ``10^9`` to
``10^10`` items per user (:func:`crossover_items`). The production route for user-level
releases is the naive baseline (spec C.1) and its compositions.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from dpcvx._validation import check_positive, check_real
from dpcvx.accounting.profiles import gaussian_delta
from dpcvx.errors import InvalidParameterError
from dpcvx.mechanisms.noise import analytic_gaussian_sigma
from dpcvx.mechanisms.sampling import sample_index
from dpcvx.rng import make_rng

__all__ = [
    "DeletionCalibration",
    "crossover_items",
    "deletion_calibration",
    "deletion_sensitivity_bound",
    "population_radius",
    "required_users",
    "tdlap_sample",
]

GaussianCalibration = Literal["paper", "analytic"]
_GAUSSIANS = ("paper", "analytic")
_SENSITIVITIES = ("provable", "printed")
#: the largest kappa for which the TDLap law is tabulated (2 kappa + 1 masses). Algorithm 1
#: with this kappa would need more than four million users and n^(4 kappa + 1) evaluations.
_MAX_KAPPA = 2**20
#: relative outward margin on kappa's quotient q (spec C.2, P12)
_KAPPA_MARGIN = 2.0**-50
#: relative margin covering the rounding of a handful of float operations (each < 2^-52)
_OPS_MARGIN = 2.0**-48
#: Theorem 3.6, Lemma 3.8 and Proposition B.1 assume beta < 1/e
_INV_E = math.exp(-1.0)


# ----------------------------------------------------------------------------- helpers
def _up(value: float) -> float:
    """``value`` (positive) rounded up past the error of the few float operations that made
    it."""
    return float(np.nextafter(value * (1.0 + _OPS_MARGIN), math.inf))


def _down(value: float) -> float:
    """``value`` (positive) rounded down past the error of the few float operations that made
    it."""
    return float(np.nextafter(value * (1.0 - _OPS_MARGIN), 0.0))


def _finite_result(value: float, name: str, owner: str) -> float:
    if not (math.isfinite(value) and value > 0.0):
        raise InvalidParameterError(
            f"`{owner}` computed a {name} of {value!r}, which is not a positive finite float: "
            "the inputs are outside the range float64 can represent. Rescale them (for "
            "example the sensitivity or the Lipschitz constant)."
        )
    return value


def _check_epsilon(value: object, owner: str) -> float:
    return check_positive(value, "epsilon", owner)


def _check_open_delta(value: object, owner: str) -> float:
    out = check_real(value, "delta", owner)
    if not 0.0 < out < 1.0:
        raise InvalidParameterError(
            f"The `delta` parameter of `{owner}` must lie in the open interval (0, 1). Got "
            f"{value!r}. Paper 004's mechanisms are (epsilon, delta)-DP with delta > 0 (there "
            "is no pure-DP variant); a useful delta is much smaller than 1/n."
        )
    return out


def _check_count(value: object, name: str, owner: str, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidParameterError(
            f"The `{name}` parameter of `{owner}` must be an int. Got "
            f"{type(value).__name__}: {value!r}. Pass a whole number as an int."
        )
    out = int(value)
    if out < minimum:
        raise InvalidParameterError(
            f"The `{name}` parameter of `{owner}` must be an int >= {minimum}. Got {value!r}."
        )
    return out


def _check_beta(value: object, owner: str, *, below: float = 1.0, why: str = "") -> float:
    out = check_real(value, "beta", owner)
    if not 0.0 < out < below:
        bound = "1" if below == 1.0 else f"1/e = {below:.6g}"
        raise InvalidParameterError(
            f"The `beta` parameter of `{owner}` (a utility failure probability) must lie in "
            f"the open interval (0, {bound}). Got {value!r}.{why}"
        )
    return out


def _check_choice(value: object, name: str, owner: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise InvalidParameterError(
            f"The `{name}` parameter of `{owner}` must be one of {choices}. Got {value!r}."
        )
    return value


def _bar(epsilon: float, delta: float, owner: str) -> tuple[float, float]:
    """``(epsilon_bar, delta_bar)`` of Alg 1 line 3: ``epsilon/2`` (exact) and
    ``delta/(e^epsilon_bar + 2)`` rounded down."""
    epsilon_bar = epsilon / 2.0
    if not epsilon_bar * 2.0 == epsilon or epsilon_bar <= 0.0:
        raise InvalidParameterError(
            f"The `epsilon` parameter of `{owner}` is too small to be halved exactly in "
            f"float64. Got {epsilon!r}."
        )
    delta_bar = _down(delta / (math.exp(epsilon_bar) + 2.0))
    if not delta_bar >= np.finfo(np.float64).tiny:
        raise InvalidParameterError(
            f"The `delta` parameter of `{owner}` is too small: delta/(e^(epsilon/2) + 2) = "
            f"{delta_bar!r} is below the smallest normal float64, where rounding toward the "
            f"safe side cannot be guaranteed. Got delta={delta!r}."
        )
    return epsilon_bar, delta_bar


def _kappa(epsilon_bar: float, delta_bar: float, owner: str) -> int:
    """``kappa(epsilon_bar, delta_bar) = 1 + ceil(ln(1/delta_bar)/epsilon_bar)`` (Def 3.4),
    with the quotient rounded outward by ``(1 + 2^-50)`` (spec C.2, P12)."""
    q = -math.log(delta_bar) / epsilon_bar
    q_out = q * (1.0 + _KAPPA_MARGIN)
    if not math.isfinite(q_out):
        raise InvalidParameterError(
            f"`{owner}`: kappa = 1 + ceil(ln(1/delta_bar)/epsilon_bar) overflows float64 "
            f"(epsilon_bar={epsilon_bar!r}, delta_bar={delta_bar!r}). Use a larger epsilon."
        )
    return 1 + math.ceil(q_out)


def _tdlap_epsilon(epsilon_bar: float, kappa: int) -> float:
    """``epsilon_bar`` rounded down to a float ``e`` whose multiples ``j e``, ``0 <= j <=
    kappa``, are all exact in float64 (its significand keeps ``53 - bitlength(kappa)`` bits).

    The sampler draws with probability proportional to ``exp(-j e)`` for these exact floats, so
    adjacent masses have ratio exactly ``e^e <= e^epsilon_bar``; with ``-j epsilon_bar``
    rounded to float64 instead, a ratio could exceed ``e^epsilon_bar`` by a relative
    ``~kappa 2^-53``.
    """
    bits = 53 - int(kappa).bit_length()
    mantissa, exponent = math.frexp(epsilon_bar)  # epsilon_bar = mantissa 2^exponent
    return math.ldexp(math.floor(math.ldexp(mantissa, bits)), exponent - bits)


def _tdlap_log_weights(kappa: int, tdlap_epsilon: float) -> np.ndarray:
    """``-|x - kappa| tdlap_epsilon`` for ``x = 0..2 kappa``: exact floats (see
    :func:`_tdlap_epsilon`)."""
    distance = np.abs(np.arange(2 * kappa + 1, dtype=np.float64) - float(kappa))
    return -(distance * tdlap_epsilon)


def _tdlap_pmf(kappa: int, tdlap_epsilon: float) -> np.ndarray:
    """The TDLap masses (float64, for reporting), read-only."""
    weights = np.exp(_tdlap_log_weights(kappa, tdlap_epsilon))
    pmf = weights / weights.sum()
    pmf.setflags(write=False)
    return pmf


def _paper_sigma(center_sensitivity: float, epsilon_bar: float, delta_bar: float) -> float:
    """Alg 1 line 3: ``2 sqrt(ln(2/delta_bar)) (8 kappa Delta) / epsilon_bar``, rounded up."""
    return _up(2.0 * math.sqrt(math.log(2.0 / delta_bar)) * center_sensitivity / epsilon_bar)


# ----------------------------------------------------------------------------- calibration
@dataclass(frozen=True, slots=True, kw_only=True)
class DeletionCalibration:
    """The public numbers of one run of 004 Algorithm 1 (``DelOutputPert``).

    Build one with :func:`deletion_calibration`. Direct construction is allowed but validated:
    every derived field must equal its recomputation from ``epsilon``, ``delta`` and
    ``target_sensitivity``, and ``sigma`` must pass the exact Gaussian check below.

    Attributes
    ----------
    epsilon, delta : float
        The guarantee of Algorithm 1, user-level (replace-one-user) ``(epsilon, delta)``-DP, for
        any deterministic function and any ``target_sensitivity`` (Thm 3.3).
    target_sensitivity : float
        The target local deletion sensitivity ``Delta`` (Alg 1 parameter).
    gaussian : {"paper", "analytic"}
        How ``sigma`` was calibrated.
    epsilon_bar : float
        ``epsilon / 2`` (exact).
    delta_bar : float
        ``delta / (e^epsilon_bar + 2)``, rounded down.
    kappa : int
        ``1 + ceil(ln(1/delta_bar) / epsilon_bar)`` (Def 3.4), rounded outward (P12).
    radius : int
        ``4 kappa``: a sub-dataset ``x_{-S}`` is stable when its deletion sensitivity within
        ``4 kappa - |S|`` further deletions is at most ``Delta`` (Alg 1 line 5).
    center_sensitivity : float
        ``8 kappa Delta`` rounded up: the distance between the centres released on neighbouring
        datasets (proof of Thm 3.3).
    sigma : float
        Standard deviation of the Gaussian noise. ``"paper"``: ``2 sqrt(ln(2/delta_bar))
        center_sensitivity / epsilon_bar`` (Alg 1 line 3); ``"analytic"``: the smallest
        ``sigma`` for which the Gaussian mechanism at ``center_sensitivity`` is
        ``(epsilon_bar, delta_bar)``-DP. Both are rounded up and satisfy
        ``gaussian_delta(sigma, center_sensitivity, epsilon_bar) <= delta_bar``.
    min_users : int
        ``4 kappa + 2``: with fewer users some sub-dataset evaluated by the stability test would
        have no user left. The provable ``Delta`` of Alg 2 wants ``2 (4 kappa + 1)``
        (:func:`required_users`).
    tdlap_epsilon : float
        The parameter of the radius law actually sampled: ``epsilon_bar`` rounded down by a
        relative ``2^-(52 - bitlength(kappa))`` or less, so that the sampler's log-weights are
        exact floats (see :func:`tdlap_sample`). Adjacent masses then have ratio
        ``e^tdlap_epsilon <= e^epsilon_bar``, and ``kappa tdlap_epsilon >= ln(1/delta_bar)``.
    tdlap_pmf : numpy.ndarray
        Read-only float64 array of the ``2 kappa + 1`` masses of ``R1`` on ``{0, ..., 2 kappa}``,
        proportional to ``exp(-tdlap_epsilon |x - kappa|)``. For reporting; the sampler draws
        from the exact law.

    Notes
    -----
    004 Algorithm 1, line 3 (L138) and Definition 3.4 (L131-133). The privacy proof (L159-221)
    uses only ``Pr[R1 = 0] = Pr[R1 = 2 kappa] <= delta_bar``, adjacent mass ratios at most
    ``e^epsilon_bar``, and "the Gaussian mechanism with l2 sensitivity ``8 kappa Delta`` is
    ``(epsilon_bar, delta_bar)``-DP". The total is then
    ``(e^epsilon_bar + 2) delta_bar <= delta`` and ``2 epsilon_bar = epsilon``.
    """

    epsilon: float
    delta: float
    target_sensitivity: float
    gaussian: str
    epsilon_bar: float
    delta_bar: float
    kappa: int
    radius: int
    center_sensitivity: float
    sigma: float
    min_users: int
    tdlap_epsilon: float
    tdlap_pmf: np.ndarray = field(compare=False, repr=False)

    def __post_init__(self) -> None:
        owner = "DeletionCalibration"
        eps = _check_epsilon(self.epsilon, owner)
        delta = _check_open_delta(self.delta, owner)
        target = check_positive(self.target_sensitivity, "target_sensitivity", owner)
        _check_choice(self.gaussian, "gaussian", owner, _GAUSSIANS)
        epsilon_bar, delta_bar = _bar(eps, delta, owner)
        kappa = _kappa(epsilon_bar, delta_bar, owner)
        tdlap_epsilon = _tdlap_epsilon(epsilon_bar, kappa)
        expected: dict[str, float | int] = {
            "epsilon_bar": epsilon_bar,
            "delta_bar": delta_bar,
            "kappa": kappa,
            "radius": 4 * kappa,
            "min_users": 4 * kappa + 2,
            "tdlap_epsilon": tdlap_epsilon,
        }
        for name, value in expected.items():
            if getattr(self, name) != value:
                raise InvalidParameterError(
                    f"The `{name}` field of `{owner}` must be {value!r} for epsilon={eps!r}, "
                    f"delta={delta!r}. Got {getattr(self, name)!r}. Build it with "
                    "`deletion_calibration`."
                )
        center = check_positive(self.center_sensitivity, "center_sensitivity", owner)
        if center < 8 * kappa * target:
            raise InvalidParameterError(
                f"The `center_sensitivity` field of `{owner}` must be at least 8 kappa Delta = "
                f"{8 * kappa * target!r}. Got {center!r}. Build it with `deletion_calibration`."
            )
        sigma = check_positive(self.sigma, "sigma", owner)
        actual = gaussian_delta(sigma, center, epsilon_bar)
        if actual > delta_bar:
            raise InvalidParameterError(
                f"The `sigma` field of `{owner}` gives the Gaussian at sensitivity {center!r} "
                f"only ({epsilon_bar!r}, {actual!r})-DP, not ({epsilon_bar!r}, "
                f"{delta_bar!r})-DP. Build it with `deletion_calibration`."
            )
        pmf = self.tdlap_pmf
        reference = _tdlap_pmf(kappa, tdlap_epsilon)
        if (
            not isinstance(pmf, np.ndarray)
            or pmf.shape != reference.shape
            or pmf.flags.writeable
            or not np.array_equal(pmf, reference)
        ):
            raise InvalidParameterError(
                f"The `tdlap_pmf` field of `{owner}` must be the read-only array of the "
                f"{2 * kappa + 1} TDLap masses. Build it with `deletion_calibration`."
            )


def deletion_calibration(
    epsilon: float,
    delta: float,
    target_sensitivity: float,
    gaussian: GaussianCalibration = "paper",
) -> DeletionCalibration:
    """The public parameters of 004 Algorithm 1 (``DelOutputPert``) for a target ``Delta``.

    Parameters
    ----------
    epsilon : float
        Positive finite privacy parameter of the whole mechanism (any size: P17).
    delta : float
        In the open interval ``(0, 1)``.
    target_sensitivity : float
        Positive finite target local deletion sensitivity ``Delta``. Privacy holds for every
        value; only utility depends on it (:func:`deletion_sensitivity_bound` gives a provable
        one for strongly convex ERM).
    gaussian : {"paper", "analytic"}, default "paper"
        ``"paper"``: the closed form of Alg 1 line 3. ``"analytic"``: the analytic Gaussian
        (:func:`dpcvx.mechanisms.noise.analytic_gaussian_sigma`) at sensitivity
        ``8 kappa Delta`` and ``(epsilon_bar, delta_bar)``, about 1.5 to 3.6 times smaller for
        ``delta <= 1e-4`` (digest Section 4.1). Both are valid: the proof only needs the
        Gaussian mechanism at that sensitivity to be ``(epsilon_bar, delta_bar)``-DP.

    Returns
    -------
    DeletionCalibration

    Raises
    ------
    InvalidParameterError
        If an argument is out of range, or ``kappa`` exceeds ``2^20`` (the radius law is then
        too large to tabulate, and the mechanism would need millions of users).

    Notes
    -----
    004 Alg 1 line 3 (L138) and Def 3.4 (L131-133), with the outward rounding of P12 described
    in the module docstring. At ``epsilon = 1, delta = 1e-6``: ``kappa = 32``, radius 128,
    ``sigma / Delta = 4070.7`` (paper) or ``2200.2`` (analytic), ``Pr[R1 = 0] = 2.76e-8``.
    """
    owner = "deletion_calibration"
    eps = _check_epsilon(epsilon, owner)
    d = _check_open_delta(delta, owner)
    target = check_positive(target_sensitivity, "target_sensitivity", owner)
    mode = _check_choice(gaussian, "gaussian", owner, _GAUSSIANS)
    epsilon_bar, delta_bar = _bar(eps, d, owner)
    kappa = _kappa(epsilon_bar, delta_bar, owner)
    if kappa > _MAX_KAPPA:
        raise InvalidParameterError(
            f"`{owner}`: kappa = {kappa} exceeds {_MAX_KAPPA} at epsilon={eps!r}, delta={d!r}; "
            f"Algorithm 1 would need at least {4 * kappa + 2} users and its radius law is too "
            "large to tabulate. Use a larger epsilon or delta; `required_users` reports the "
            "user count without tabulating."
        )
    tdlap_epsilon = _tdlap_epsilon(epsilon_bar, kappa)
    # Pr[R1 = 0] = exp(-kappa tdlap_epsilon) / Z < exp(-kappa tdlap_epsilon) <= delta_bar; the
    # product is exact and the logarithm is rounded up. Since kappa >= 1 + ln(1/delta_bar) /
    # epsilon_bar and tdlap_epsilon loses at most a relative 2^-31 (kappa <= 2^20), this
    # always holds; it is checked rather than assumed.
    if kappa * tdlap_epsilon < _up(-math.log(delta_bar)):  # pragma: no cover - defensive
        raise InvalidParameterError(
            f"`{owner}` could not certify Pr[R1 = 0] <= delta_bar at epsilon={eps!r}, delta={d!r}."
        )
    center = _finite_result(_up(8 * kappa * target), "centre sensitivity 8 kappa Delta", owner)
    if mode == "paper":
        sigma = _finite_result(_paper_sigma(center, epsilon_bar, delta_bar), "sigma", owner)
        if gaussian_delta(sigma, center, epsilon_bar) > delta_bar:  # pragma: no cover
            # Measured valid with a factor >= 800 to spare for epsilon in [0.01, 100] and
            # delta in [1e-12, 0.99]; refuse rather than release if that ever fails.
            raise InvalidParameterError(
                f"`{owner}`: the closed form of 004 Alg 1 line 3 is not "
                f"(epsilon_bar, delta_bar)-DP at epsilon={eps!r}, delta={d!r}. Use "
                "gaussian='analytic'."
            )
    else:
        sigma = analytic_gaussian_sigma(center, epsilon_bar, delta_bar)
    return DeletionCalibration(
        epsilon=eps,
        delta=d,
        target_sensitivity=target,
        gaussian=mode,
        epsilon_bar=epsilon_bar,
        delta_bar=delta_bar,
        kappa=kappa,
        radius=4 * kappa,
        center_sensitivity=center,
        sigma=sigma,
        min_users=4 * kappa + 2,
        tdlap_epsilon=tdlap_epsilon,
        tdlap_pmf=_tdlap_pmf(kappa, tdlap_epsilon),
    )


def tdlap_sample(
    calibration: DeletionCalibration, rng: None | int | np.random.Generator = None
) -> int:
    """One exact draw of the stability radius ``R1 ~ TDLap`` (004 Alg 1 line 4, Def 3.4).

    Parameters
    ----------
    calibration : DeletionCalibration
        From :func:`deletion_calibration`.
    rng : None, int or numpy.random.Generator, default None
        Normalized by :func:`dpcvx.rng.make_rng`: None draws from OS-keyed cryptographic
        randomness; an int or a Generator is reproducible (tests only).

    Returns
    -------
    int
        ``R1`` in ``{0, ..., 2 kappa}``, with probability exactly proportional to
        ``exp(-tdlap_epsilon |R1 - kappa|)``.

    Raises
    ------
    InvalidParameterError
        If ``calibration`` is not a :class:`DeletionCalibration` or ``rng`` is invalid.

    Notes
    -----
    The log-weights ``-|x - kappa| tdlap_epsilon`` are exact float64 numbers (see
    ``DeletionCalibration.tdlap_epsilon``) and
    :func:`dpcvx.mechanisms.sampling.sample_index` draws an index with probability exactly
    proportional to ``exp`` of its log-weights (Gumbel-max with ideal Gumbel noise, decided by
    interval arithmetic). So the law sampled satisfies the two facts the privacy proof uses,
    exactly: ``Pr[0] = Pr[2 kappa] <= delta_bar`` and adjacent ratios at most
    ``e^epsilon_bar``. ``R1`` is internal state of Algorithm 1: never release or log it (P13).
    """
    if not isinstance(calibration, DeletionCalibration):
        raise InvalidParameterError(
            "The `calibration` parameter of `tdlap_sample` must be a DeletionCalibration "
            f"(from `deletion_calibration`). Got {type(calibration).__name__}."
        )
    generator, _ = make_rng(rng)
    log_weights = _tdlap_log_weights(calibration.kappa, calibration.tdlap_epsilon)
    return int(sample_index(log_weights, generator))


# ----------------------------------------------------------------------------- calculators
def deletion_sensitivity_bound(
    G: float,
    mu: float,
    n: int,
    m: int,
    beta: float,
    r: int,
    constrained: bool = False,
) -> float:
    """A ``Delta`` with ``Delta_bar_r theta*(x^pi) <= Delta`` with probability ``1 - beta``.

    Parameters
    ----------
    G : float
        Positive bound on every per-item (sub)gradient norm on the domain.
    mu : float
        Positive strong-convexity modulus of the objective (the mean item loss plus any
        regularizer, which is not rescaled on deletion).
    n : int
        Number of users, at least ``r + 2`` (every sub-dataset keeps two users).
    m : int
        Items per user (every user has exactly ``m``), at least 1.
    beta : float
        Failure probability over the random assignment of items to users, in ``(0, 1)``, with
        ``beta / n^(r + 1) < 1/e`` (Thm 3.6's hypothesis for each union-bound term).
    r : int
        Deletion radius, at least 0: ``4 kappa`` for Algorithm 1 (``calibration.radius``).
    constrained : bool, default False
        True when the minimizer may sit on the boundary of the domain: ``G`` is replaced by
        ``2G`` (P4).

    Returns
    -------
    float
        ``5 G_eff sqrt(ln(1/beta) + (r + 1) ln n) / (mu (n - r - 1) sqrt(m))``, rounded up,
        with ``G_eff = G`` or ``2G``.

    Raises
    ------
    InvalidParameterError
        If an argument is out of range.

    Notes
    -----
    Theorem 3.6 (L227-231): for one deletion from a dataset of ``n'`` users the bound is
    ``5 G sqrt(ln(1/beta'))/(mu (n' - 1) sqrt(m))`` with probability ``1 - beta'``. Applied
    to every pair (``S``, ``i``) with ``|S| <= r`` and ``i`` not in ``S`` (each sub-dataset's
    items, given its item set, are uniformly assigned to its users), with
    ``n' - 1 >= n - r - 1``, and union-bounded over at most ``n^(r + 1)`` pairs with
    ``beta' = beta / n^(r + 1)``. This is Corollary 3.7 (L240) with explicit constants, and
    with ``r = 4 kappa`` the corrected Alg 2 line 3 (erratum 1). For ``n >= 2 (r + 1)`` it is at
    most ``10 G_eff sqrt(...)/(mu n sqrt(m))``. It bounds utility only: Algorithm 1 is private
    for every ``Delta``.
    """
    owner = "deletion_sensitivity_bound"
    g = check_positive(G, "G", owner)
    modulus = check_positive(mu, "mu", owner)
    users = _check_count(n, "n", owner)
    items = _check_count(m, "m", owner)
    radius = _check_count(r, "r", owner, minimum=0)
    b = _check_beta(beta, owner)
    if not isinstance(constrained, bool):
        raise InvalidParameterError(
            f"The `constrained` parameter of `{owner}` must be a bool. Got {constrained!r}."
        )
    if users < radius + 2:
        raise InvalidParameterError(
            f"`{owner}` needs n >= r + 2 users (every sub-dataset with r deletions keeps at "
            f"least two users, as Theorem 3.6 needs). Got n={users}, r={radius}."
        )
    log_term = math.log(1.0 / b) + (radius + 1) * math.log(users)
    if not log_term >= 1.0:
        raise InvalidParameterError(
            f"`{owner}`: Theorem 3.6 needs each union-bound term's failure probability "
            f"beta / n^(r + 1) below 1/e, i.e. ln(1/beta) + (r + 1) ln n >= 1. Got "
            f"{log_term!r} (beta={b!r}, n={users}, r={radius}). Use a smaller beta."
        )
    g_eff = 2.0 * g if constrained else g
    value = 5.0 * g_eff * math.sqrt(log_term) / (modulus * (users - radius - 1) * math.sqrt(items))
    return _finite_result(_up(value), "deletion sensitivity bound", owner)


def population_radius(G: float, mu: float, n: int, m: int, beta: float) -> float:
    """Radius around the empirical minimizer that contains the population minimizer with
    probability ``1 - beta`` (004 Proposition B.1).

    Parameters
    ----------
    G : float
        Positive Lipschitz constant of the item loss.
    mu : float
        Positive strong-convexity modulus of the item loss.
    n, m : int
        Users and items per user, each at least 1 (``n m`` iid items).
    beta : float
        Failure probability, in ``(0, 1/e)`` (Prop B.1's hypothesis).

    Returns
    -------
    float
        ``30 G sqrt(ln(2/beta)) / (mu sqrt(n m))``, rounded up.

    Raises
    ------
    InvalidParameterError
        If an argument is out of range.

    Notes
    -----
    Proposition B.1 (L547-550): ``Pr[||theta*(x) - theta*(D)|| <= 30 G sqrt(log(2/beta)) /
    (mu sqrt(nm))] >= 1 - beta`` for ``x ~ D^(n x m)``. The proof's intermediate displays print
    the probabilities flipped (erratum 9); the statement is as used here. It sets the radius
    ``R'`` of Algorithm 6 line 4 (with erratum 17's Gaussian term added by the caller).
    """
    owner = "population_radius"
    g = check_positive(G, "G", owner)
    modulus = check_positive(mu, "mu", owner)
    users = _check_count(n, "n", owner)
    items = _check_count(m, "m", owner)
    b = _check_beta(beta, owner, below=_INV_E, why=" Proposition B.1 assumes beta < 1/e.")
    value = 30.0 * g * math.sqrt(math.log(2.0 / b)) / (modulus * math.sqrt(users * items))
    return _finite_result(_up(value), "population radius", owner)


def required_users(
    epsilon: float,
    delta: float,
    *,
    provable_sensitivity: bool = False,
    phases: int = 1,
) -> int:
    """The fewest users for which 004's deletion route is defined or provably accurate.

    Parameters
    ----------
    epsilon : float
        Positive finite privacy parameter of the whole release.
    delta : float
        In ``(0, 1)``.
    provable_sensitivity : bool, default False
        False: ``4 kappa + 2``, the fewest users for which every sub-dataset that Algorithm 1's
        stability test evaluates (up to ``4 kappa + 1`` deletions) keeps a user. True:
        ``2 (4 kappa + 1)``, so that ``r = 4 kappa <= n/2 - 1`` (Cor 3.7's ``r <= n/2``) and
        :func:`deletion_sensitivity_bound` at ``r = 4 kappa`` is at most
        ``10 G sqrt(...)/(mu n sqrt(m))`` (erratum 1).
    phases : int, default 1
        Number of calls under basic composition, each at ``(epsilon/phases, delta/phases)``:
        ``T`` for Phased-ERM (Alg 3 line 4), 1 otherwise.

    Returns
    -------
    int

    Raises
    ------
    InvalidParameterError
        If an argument is out of range.

    Notes
    -----
    ``kappa = kappa(epsilon_bar, delta_bar)`` of Alg 1 line 3 (L138) at the per-call budget,
    computed as in :func:`deletion_calibration`. At ``epsilon = 1, delta = 1e-6``:
    ``kappa = 32``, 130 users (defined) and 258 (provable). Thm 3.1 states only
    ``n >= C log(1/delta)/epsilon`` (L107).
    """
    owner = "required_users"
    eps = _check_epsilon(epsilon, owner)
    d = _check_open_delta(delta, owner)
    calls = _check_count(phases, "phases", owner)
    if not isinstance(provable_sensitivity, bool):
        raise InvalidParameterError(
            f"The `provable_sensitivity` parameter of `{owner}` must be a bool. Got "
            f"{provable_sensitivity!r}."
        )
    epsilon_bar, delta_bar = _bar(eps / calls, d / calls, owner)
    kappa = _kappa(epsilon_bar, delta_bar, owner)
    return 2 * (4 * kappa + 1) if provable_sensitivity else 4 * kappa + 2


def crossover_items(
    epsilon: float,
    delta: float,
    G: float,
    mu: float,
    n: int,
    beta: float,
    *,
    constrained: bool = False,
    gaussian: GaussianCalibration = "paper",
    sensitivity: Literal["provable", "printed"] = "provable",
) -> float:
    """Items per user ``m*`` at which the deletion route's ``sigma`` equals the naive
    user-level output perturbation's.

    Parameters
    ----------
    epsilon, delta : float
        The guarantee, ``epsilon > 0`` and ``delta`` in ``(0, 1)``.
    G : float
        Positive per-item Lipschitz constant.
    mu : float
        Positive strong-convexity modulus of the user-level objective (``lambda + mu`` of
        spec C.1).
    n : int
        Number of users, at least ``4 kappa + 2`` (:func:`required_users`).
    beta : float
        Failure probability of the deletion route's ``Delta``, in ``(0, 1)``.
    constrained : bool, default False
        Passed to :func:`deletion_sensitivity_bound` (``2G`` when the constraint may be active).
    gaussian : {"paper", "analytic"}, default "paper"
        The deletion route's ``sigma`` calibration (:func:`deletion_calibration`).
    sensitivity : {"provable", "printed"}, default "provable"
        The deletion route's ``Delta``: ``"provable"`` is :func:`deletion_sensitivity_bound`
        at ``r = 4 kappa``; ``"printed"`` is 004 Alg 2 line 3 (L238),
        ``10 G_eff sqrt(ln(1/beta)) / (mu n sqrt(m))``, which is not proven (erratum 1) and is
        offered for comparison only.

    Returns
    -------
    float
        ``m* = (sigma_deletion(m = 1) / sigma_naive)^2``. The deletion route adds less noise
        exactly when ``m > m*``.

    Raises
    ------
    InvalidParameterError
        If an argument is out of range.

    Notes
    -----
    The deletion route is 004 Alg 2 through Alg 1: ``sigma_deletion(m) = sigma(Delta(m))``
    with ``Delta(m)`` proportional to ``1/sqrt(m)`` and ``sigma`` proportional to ``Delta``, so
    ``sigma_deletion(m) = sigma_deletion(1)/sqrt(m)``. The naive route (004 Section 2, eq. (1);
    spec C.1) is output perturbation with user-level sensitivity ``2G/(mu n)`` and the analytic
    Gaussian at ``(epsilon, delta)`` (P10), with an exact minimizer. Both ``sigma``'s depend
    on public numbers only, so choosing the smaller one is free. At ``epsilon = 1,
    delta = 1e-6, n = 10^4, G = mu = 1, beta = 1e-3``: ``m* = 7.1e9`` (paper) or ``2.1e9``
    (analytic), as in spec C.4 T1. The digest's Section 8 table prints ``1.8e10`` for the same
    case because it uses the simplified ``Delta <= 10 G sqrt(...)/(mu n sqrt(m))`` (a factor 4
    in ``m*``) and the classical naive ``sigma`` (a factor 0.64).
    """
    owner = "crossover_items"
    eps = _check_epsilon(epsilon, owner)
    d = _check_open_delta(delta, owner)
    g = check_positive(G, "G", owner)
    modulus = check_positive(mu, "mu", owner)
    users = _check_count(n, "n", owner)
    b = _check_beta(beta, owner)
    _check_choice(gaussian, "gaussian", owner, _GAUSSIANS)
    which = _check_choice(sensitivity, "sensitivity", owner, _SENSITIVITIES)
    if not isinstance(constrained, bool):
        raise InvalidParameterError(
            f"The `constrained` parameter of `{owner}` must be a bool. Got {constrained!r}."
        )
    epsilon_bar, delta_bar = _bar(eps, d, owner)
    kappa = _kappa(epsilon_bar, delta_bar, owner)
    if users < 4 * kappa + 2:
        raise InvalidParameterError(
            f"`{owner}`: Algorithm 1 needs n >= 4 kappa + 2 = {4 * kappa + 2} users at "
            f"epsilon={eps!r}, delta={d!r}. Got n={users}."
        )
    if which == "provable":
        target = deletion_sensitivity_bound(g, modulus, users, 1, b, 4 * kappa, constrained)
    else:
        g_eff = 2.0 * g if constrained else g
        target = _up(10.0 * g_eff * math.sqrt(math.log(1.0 / b)) / (modulus * users))
    sigma_deletion = deletion_calibration(eps, d, target, gaussian).sigma
    sigma_naive = analytic_gaussian_sigma(2.0 * g / (modulus * users), eps, d)
    return _finite_result((sigma_deletion / sigma_naive) ** 2, "crossover m*", owner)
