"""Noise calibration for output perturbation.

Calibration (target guarantee + sensitivity -> noise scale) is a set of pure functions of public
numbers, returning a checked :class:`NoiseSpec`. Sampling lives apart, in
:mod:`dpcvx.mechanisms.sampling` (the exact, floating-point-safe release of a perturbed point;
``sample`` is importable from here as before). This mirrors dp_accounting's calibration helpers
(house style point 7).

Three noise distributions are supported, each matched to one kind of sensitivity bound:

``"l2_laplace"`` (pure epsilon-DP, l2 sensitivity)
    Density proportional to ``exp(-epsilon * ||b||_2 / Delta)`` on ``R^d``: the l2 instance of
    the K-norm mechanism, paper 002 (Lowy & Razaviyayn, "Output Perturbation for Differentially
    Private Convex Optimization") Eq. (4) and Prop 2.1. Its radius is ``Gamma(d, Delta/epsilon)``
    and its direction is uniform on the sphere (digest Section 3.1).
``"gaussian"`` ((epsilon, delta)-DP, l2 sensitivity)
    ``N(0, sigma^2 I_d)``. ``sigma`` comes either from the exact analytic calibration of Balle &
    Wang (2018), the default and the smallest valid ``sigma``, or from the closed form of Zhao et
    al. (ZWB+19, Theorem 5) used by paper 002 Eq. (5). Both are valid for every ``epsilon > 0``.
``"laplace"`` (pure epsilon-DP, l1 sensitivity)
    iid Laplace noise of scale ``Delta_1/epsilon`` per coordinate (Dwork et al. 2006).

Two calibrations printed in the literature are deliberately *not* offered (digest pitfalls P4 and
P11): the classical ``sigma = sqrt(2 log(1.25/delta)) Delta/epsilon``, which is only valid for
``epsilon <= 1`` (at ``epsilon = 10, delta = 1e-5`` its exact delta is 2.3e-5), and the
``sigma / sqrt(2)`` of paper 002's Algorithm 6 (an erratum: at ``epsilon = 1, delta = 1e-5`` its
exact delta is 7.4e-5).

Every privacy-relevant number computed here is rounded toward the safe side (larger noise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpcvx._validation import check_delta, check_positive, check_real
from dpcvx.accounting.profiles import gaussian_delta
from dpcvx.errors import InvalidParameterError
from dpcvx.types import Sensitivity

__all__ = [
    "NoiseSpec",
    "analytic_gaussian_sigma",
    "c_delta",
    "calibrate",
    "gaussian_delta",
    "l2_laplace_scale",
    "laplace_per_coordinate_scale",
    "zwb_sigma",
]

_KINDS = ("l2_laplace", "gaussian", "laplace")
#: relative safety margin on the analytic Gaussian sigma (see analytic_gaussian_sigma)
_SIGMA_SAFETY = 1e-6
_CALIBRATIONS = {
    "l2_laplace": ("l2_laplace",),
    "gaussian": ("analytic", "zwb"),
    "laplace": ("laplace",),
}
# Largest number of tiny inflation steps tried when the analytic sigma has to be nudged up.
_MAX_INFLATION_STEPS = 200


def _round_up(value: float) -> float:
    """Round ``value`` (positive) up by a few units in the last place.

    The multiplication absorbs the rounding of the few float operations that produced ``value``
    (each one is off by at most half an ulp); ``nextafter`` makes the result strictly larger.
    """
    return float(np.nextafter(value * (1.0 + 2.0**-50), math.inf))


def _check_finite_result(value: float, name: str, owner: str) -> float:
    if not math.isfinite(value) or value <= 0.0:
        raise InvalidParameterError(
            f"`{owner}` computed a {name} of {value!r}, which is not a positive finite float: "
            "the inputs are outside the range that float64 can represent. Rescale the problem "
            "(for example the sensitivity) so that the noise scale is finite."
        )
    return value


# --------------------------------------------------------------------------------------------
# Pure epsilon-DP
# --------------------------------------------------------------------------------------------


def l2_laplace_scale(sensitivity: float, epsilon: float) -> float:
    """Scale ``Delta/epsilon`` of the pure-epsilon l2 Laplace (K-norm) mechanism.

    Parameters
    ----------
    sensitivity : float
        Positive finite upper bound ``Delta`` on the l2 sensitivity
        ``sup ||w(X) - w(X')||_2`` over replace-one neighbors.
    epsilon : float
        Positive finite privacy parameter.

    Returns
    -------
    float
        ``Delta/epsilon`` rounded up to the next float. Noise with density proportional to
        ``exp(-||b||_2 / scale)`` then gives ``epsilon``-DP.

    Raises
    ------
    InvalidParameterError
        If an argument is not a positive finite number, or the ratio overflows.

    Notes
    -----
    Paper 002 Eq. (4) and Prop 2.1: for ``||w - w'|| <= Delta`` the density ratio is
    ``exp(epsilon (||s - w'|| - ||s - w||)/Delta) <= exp(epsilon)`` by the reverse triangle
    inequality. The radius ``||b||_2`` is ``Gamma(shape=d, scale=Delta/epsilon)``.
    """
    owner = "l2_laplace_scale"
    delta_sens = check_positive(sensitivity, "sensitivity", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    scale = float(np.nextafter(delta_sens / eps, math.inf))
    return _check_finite_result(scale, "scale", owner)


def laplace_per_coordinate_scale(l1_sensitivity: float, epsilon: float) -> float:
    """Scale ``Delta_1/epsilon`` of the classical (per-coordinate) Laplace mechanism.

    Parameters
    ----------
    l1_sensitivity : float
        Positive finite upper bound ``Delta_1`` on the l1 sensitivity ``sup ||w(X) - w(X')||_1``
        over replace-one neighbors.
    epsilon : float
        Positive finite privacy parameter.

    Returns
    -------
    float
        ``Delta_1/epsilon`` rounded up to the next float. Adding iid ``Laplace(0, scale)`` noise
        to each coordinate gives ``epsilon``-DP.

    Raises
    ------
    InvalidParameterError
        If an argument is not a positive finite number, or the ratio overflows.

    Notes
    -----
    The product density ratio is ``exp((||s - w'||_1 - ||s - w||_1)/scale)
    <= exp(||w - w'||_1/scale) <= exp(epsilon)`` (Dwork, McSherry, Nissim & Smith 2006). Use it
    only with an l1 bound; for an l2 bound, :func:`l2_laplace_scale` is the matching mechanism.
    """
    owner = "laplace_per_coordinate_scale"
    delta_sens = check_positive(l1_sensitivity, "l1_sensitivity", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    scale = float(np.nextafter(delta_sens / eps, math.inf))
    return _check_finite_result(scale, "scale", owner)


# --------------------------------------------------------------------------------------------
# Approximate (epsilon, delta)-DP: the Gaussian mechanism
# --------------------------------------------------------------------------------------------


def c_delta(delta: float) -> float:
    """The ZWB+19 constant ``c_delta = sqrt(log(2 / (sqrt(16 delta + 1) - 1)))``.

    Parameters
    ----------
    delta : float
        In the open interval ``(0, 1/2)``.

    Returns
    -------
    float
        ``c_delta`` (positive). It is not rounded; :func:`zwb_sigma` rounds the final ``sigma``.

    Raises
    ------
    InvalidParameterError
        If ``delta`` is not in ``(0, 1/2)`` (``c_delta`` is undefined or zero there).

    Notes
    -----
    Paper 002 Eq. (5), digest Section 0. ``sqrt(16 delta + 1) - 1`` is evaluated as
    ``expm1(log1p(16 delta)/2)`` to avoid cancellation for small ``delta``.
    """
    d = _check_zwb_delta(delta, "c_delta")
    denominator = math.expm1(0.5 * math.log1p(16.0 * d))
    return math.sqrt(math.log(2.0 / denominator))


def _check_zwb_delta(delta: object, owner: str) -> float:
    d = check_real(delta, "delta", owner)
    if not 0.0 < d < 0.5:
        raise InvalidParameterError(
            f"The `delta` parameter of `{owner}` must lie in the open interval (0, 1/2) for the "
            f"ZWB+19 Gaussian calibration. Got {delta!r}. Use delta = 0 with the l2 Laplace "
            "mechanism for pure DP, or a smaller delta (typically much less than 1/n)."
        )
    return d


def zwb_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Closed-form Gaussian noise level of ZWB+19 used by paper 002.

    Parameters
    ----------
    sensitivity : float
        Positive finite l2 sensitivity ``Delta``.
    epsilon : float
        Positive finite privacy parameter (any size: the formula is valid for ``epsilon > 1``).
    delta : float
        In the open interval ``(0, 1/2)``.

    Returns
    -------
    float
        ``sigma = (c_delta + sqrt(c_delta^2 + epsilon)) Delta / (sqrt(2) epsilon)``, rounded up.

    Raises
    ------
    InvalidParameterError
        If an argument is out of range.

    Notes
    -----
    Zhao et al. (2019), Theorem 5; paper 002 Eq. (5), Prop 2.1 and Thm B.1, with the digest's
    errata applied (pitfall P4): the denominator is ``sqrt(2) * epsilon``, never
    ``sqrt(2 epsilon)``, and there is no extra factor ``1/sqrt(2)`` (paper 002's Algorithm 6
    prints a density whose ``sigma`` is ``sqrt(2)`` too small; its exact delta at
    ``epsilon = 1, delta = 1e-5`` is 7.4e-5). Unlike the classical
    ``sqrt(2 log(1.25/delta)) Delta/epsilon`` this is valid for every ``epsilon > 0``
    (pitfall P11). :func:`analytic_gaussian_sigma` gives a 20-30 % smaller valid ``sigma``.
    """
    owner = "zwb_sigma"
    delta_sens = check_positive(sensitivity, "sensitivity", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    d = _check_zwb_delta(delta, owner)
    c = c_delta(d)
    sigma = (c + math.sqrt(c * c + eps)) * delta_sens / (math.sqrt(2.0) * eps)
    return _check_finite_result(_round_up(sigma), "sigma", owner)


def analytic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Smallest Gaussian noise level giving ``(epsilon, delta)``-DP (Balle & Wang 2018).

    Parameters
    ----------
    sensitivity : float
        Positive finite l2 sensitivity ``Delta``.
    epsilon : float
        Positive finite privacy parameter (any size).
    delta : float
        In the open interval ``(0, 1)``.

    Returns
    -------
    float
        ``sigma`` such that :func:`gaussian_delta` ``(sigma, Delta, epsilon) <= delta``, within a
        relative ``~1e-12`` of the smallest such value.

    Raises
    ------
    InvalidParameterError
        If an argument is out of range or the calibration cannot be carried out in float64.

    Notes
    -----
    ``dp_accounting.get_sigma_gaussian(epsilon, delta)`` returns the root (for sensitivity 1)
    of the exact profile found by bisection, to an absolute tolerance of 1e-12, which may sit
    on either side of the root. Its value is multiplied by ``Delta``, rounded up, and then
    verified independently with :func:`gaussian_delta`; while the exact delta exceeds the
    target, ``sigma`` is inflated by a tiny, growing factor. The returned ``sigma`` therefore
    never has an exact delta above the target. This is the calibration the digest of paper 002
    recommends in Section 5 in place of the ZWB+19 closed form (Section 3.3 lists both).
    """
    owner = "analytic_gaussian_sigma"
    delta_sens = check_positive(sensitivity, "sensitivity", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    d = check_real(delta, "delta", owner)
    if not 0.0 < d < 1.0:
        raise InvalidParameterError(
            f"The `delta` parameter of `{owner}` must lie in the open interval (0, 1). "
            f"Got {delta!r}. Use delta = 0 with the l2 Laplace mechanism for pure DP."
        )
    import dp_accounting

    try:
        unit_sigma = float(dp_accounting.get_sigma_gaussian(eps, d))
    except (ValueError, ArithmeticError) as exc:  # pragma: no cover - defensive
        raise InvalidParameterError(
            f"`{owner}` could not calibrate the Gaussian mechanism at epsilon={eps!r}, "
            f"delta={d!r}: {exc}. Use `zwb_sigma`, or parameters in a less extreme range."
        ) from exc
    if not math.isfinite(unit_sigma) or unit_sigma <= 0.0:
        raise InvalidParameterError(
            f"`{owner}` obtained sigma={unit_sigma!r} for epsilon={eps!r}, delta={d!r}, which is "
            "not a positive finite float. Use parameters in a less extreme range."
        )
    # A public safety factor: the float64 profile used for the check below loses relative
    # accuracy ~1e-8 for tiny epsilon and delta (measured against 60-digit arithmetic); a 1e-6
    # relative increase of sigma lowers the exact delta by far more than that.
    sigma = _check_finite_result(
        _round_up(unit_sigma * delta_sens * (1.0 + _SIGMA_SAFETY)), "sigma", owner
    )
    factor = 1e-12
    for _ in range(_MAX_INFLATION_STEPS):
        if gaussian_delta(sigma, delta_sens, eps) <= d:
            return sigma
        sigma = _check_finite_result(_round_up(sigma * (1.0 + factor)), "sigma", owner)
        factor *= 2.0
    raise InvalidParameterError(  # pragma: no cover - defensive
        f"`{owner}` could not find a sigma whose exact delta is at most {d!r} at "
        f"epsilon={eps!r}. Use `zwb_sigma`, or parameters in a less extreme range."
    )


# --------------------------------------------------------------------------------------------
# The calibrated specification and the sampler
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class NoiseSpec:
    """A calibrated noise distribution, checked to deliver its declared guarantee.

    Build one with :func:`calibrate`; draw from it with :func:`sample`. Direct construction is
    allowed but validated: a ``NoiseSpec`` whose ``scale`` is too small for its
    ``(sensitivity, epsilon, delta)`` cannot exist.

    Attributes
    ----------
    kind : {"l2_laplace", "gaussian", "laplace"}
        ``"l2_laplace"``: density proportional to ``exp(-||b||_2/scale)`` (pure, l2
        sensitivity). ``"gaussian"``: ``N(0, scale^2 I)`` (approximate, l2 sensitivity).
        ``"laplace"``: iid ``Laplace(0, scale)`` per coordinate (pure, l1 sensitivity).
    scale : float
        ``Delta/epsilon`` for the two Laplace kinds, ``sigma`` for the Gaussian.
    sensitivity : float
        The sensitivity bound the scale was calibrated to (l1 for ``"laplace"``, l2 otherwise).
    epsilon, delta : float
        The guarantee, under replace-one neighbors. ``delta == 0`` exactly for the Laplace
        kinds.
    calibration : {"l2_laplace", "laplace", "analytic", "zwb"}
        How ``scale`` was computed.
    """

    kind: str
    scale: float
    sensitivity: float
    epsilon: float
    delta: float
    calibration: str

    def __post_init__(self) -> None:
        owner = "NoiseSpec"
        if self.kind not in _KINDS:
            raise InvalidParameterError(
                f"The `kind` parameter of `{owner}` must be one of {_KINDS}. Got {self.kind!r}."
            )
        if self.calibration not in _CALIBRATIONS[self.kind]:
            raise InvalidParameterError(
                f"The `calibration` parameter of `{owner}` must be one of "
                f"{_CALIBRATIONS[self.kind]} for kind={self.kind!r}. Got {self.calibration!r}."
            )
        scale = check_positive(self.scale, "scale", owner)
        sens = check_positive(self.sensitivity, "sensitivity", owner)
        eps = check_positive(self.epsilon, "epsilon", owner)
        delta = check_real(self.delta, "delta", owner)
        for name, value in (
            ("scale", scale),
            ("sensitivity", sens),
            ("epsilon", eps),
            ("delta", delta),
        ):
            object.__setattr__(self, name, value)
        if self.kind == "gaussian":
            if not 0.0 < delta < 1.0:
                raise InvalidParameterError(
                    f"A Gaussian `{owner}` needs `delta` in (0, 1). Got {delta!r}. Use "
                    "kind='l2_laplace' for pure DP."
                )
            actual = gaussian_delta(scale, sens, eps)
            if actual > delta:
                raise InvalidParameterError(
                    f"A Gaussian `{owner}` with sigma={scale!r} and sensitivity={sens!r} is only "
                    f"({eps!r}, {actual!r})-DP, not ({eps!r}, {delta!r})-DP. Build it with "
                    "`calibrate` instead of choosing sigma by hand."
                )
        else:
            if delta != 0.0:
                raise InvalidParameterError(
                    f"A `{owner}` of kind {self.kind!r} is pure DP and needs delta == 0. "
                    f"Got {delta!r}. Use kind='gaussian' for (epsilon, delta)-DP."
                )
            if scale < sens / eps:
                raise InvalidParameterError(
                    f"A `{owner}` of kind {self.kind!r} needs scale >= sensitivity/epsilon = "
                    f"{sens / eps!r}. Got scale={scale!r}. Build it with `calibrate`."
                )

    @property
    def norm(self) -> str:
        """The norm of the sensitivity this noise is calibrated to: ``"l1"`` or ``"l2"``."""
        return "l1" if self.kind == "laplace" else "l2"

    @property
    def noise_multiplier(self) -> float | None:
        """``sigma / sensitivity`` for the Gaussian (rounded up), ``None`` otherwise."""
        if self.kind != "gaussian":
            return None
        return float(np.nextafter(self.scale / self.sensitivity, math.inf))


def calibrate(
    sensitivity: float | Sensitivity,
    epsilon: float,
    delta: float,
    *,
    norm: str | None = None,
    gaussian: str = "analytic",
) -> NoiseSpec:
    """Calibrate noise to a sensitivity bound and a target guarantee.

    Parameters
    ----------
    sensitivity : float or Sensitivity
        Positive finite bound on ``||w(X) - w(X')||`` over replace-one neighbors. A
        :class:`~dpcvx.types.Sensitivity` carries its own norm.
    epsilon : float
        Positive finite privacy parameter (any size).
    delta : float
        ``0`` for pure epsilon-DP, otherwise in ``(0, 1)`` (``(0, 1/2)`` for ``gaussian="zwb"``).
    norm : {"l2", "l1"} or None, optional
        Norm of the sensitivity bound. ``None`` (default) means the norm of a ``Sensitivity``
        argument, or ``"l2"`` for a bare float. ``"l1"`` selects per-coordinate Laplace noise
        and supports pure DP only.
    gaussian : {"analytic", "zwb"}, optional
        Gaussian calibration when ``delta > 0``: ``"analytic"`` (default) is the exact
        Balle-Wang calibration (:func:`analytic_gaussian_sigma`); ``"zwb"`` is paper 002's
        closed form (:func:`zwb_sigma`), valid for ``delta < 1/2``, about 20-30 % noisier.

    Returns
    -------
    NoiseSpec
        ``kind="l2_laplace"`` when ``delta == 0`` and the norm is l2, ``kind="laplace"`` when
        the norm is l1, ``kind="gaussian"`` otherwise.

    Raises
    ------
    InvalidParameterError
        If an argument is out of range or the combination is unsupported.

    Notes
    -----
    Paper 002 Eq. (4)-(5) and Prop 2.1 (the NOISE primitive of digest Section 2.0). The classical
    ``sigma = sqrt(2 log(1.25/delta)) Delta/epsilon`` and Algorithm 6's ``sigma/sqrt(2)`` are never
    used (digest pitfalls P4 and P11).
    """
    owner = "calibrate"
    if isinstance(sensitivity, Sensitivity):
        value: object = sensitivity.value
        declared_norm = sensitivity.norm
        if norm is not None and norm != declared_norm:
            raise InvalidParameterError(
                f"The `norm` parameter of `{owner}` is {norm!r} but the Sensitivity passed is "
                f"in the {declared_norm!r} norm. Omit `norm` or pass a matching Sensitivity."
            )
        norm = declared_norm
    else:
        value = sensitivity
    if norm is None:
        norm = "l2"
    if norm not in ("l1", "l2"):
        raise InvalidParameterError(
            f"The `norm` parameter of `{owner}` must be 'l2' or 'l1'. Got {norm!r}."
        )
    if gaussian not in ("analytic", "zwb"):
        raise InvalidParameterError(
            f"The `gaussian` parameter of `{owner}` must be 'analytic' or 'zwb'. Got {gaussian!r}."
        )
    sens = check_positive(value, "sensitivity", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    d = check_delta(delta, owner)
    if norm == "l1":
        if d != 0.0:
            raise InvalidParameterError(
                f"`{owner}` supports an l1 sensitivity only for pure DP (delta == 0). "
                f"Got delta={delta!r}. For (epsilon, delta)-DP pass an l2 bound with "
                "norm='l2' (an l1 bound is also a valid l2 bound)."
            )
        return NoiseSpec(
            kind="laplace",
            scale=laplace_per_coordinate_scale(sens, eps),
            sensitivity=sens,
            epsilon=eps,
            delta=0.0,
            calibration="laplace",
        )
    if d == 0.0:
        return NoiseSpec(
            kind="l2_laplace",
            scale=l2_laplace_scale(sens, eps),
            sensitivity=sens,
            epsilon=eps,
            delta=0.0,
            calibration="l2_laplace",
        )
    if gaussian == "zwb":
        sigma = zwb_sigma(sens, eps, d)
    else:
        sigma = analytic_gaussian_sigma(sens, eps, d)
    return NoiseSpec(
        kind="gaussian",
        scale=sigma,
        sensitivity=sens,
        epsilon=eps,
        delta=d,
        calibration=gaussian,
    )


#: names re-exported lazily from :mod:`dpcvx.mechanisms.sampling` (which imports this module)
_SAMPLING = (
    "gaussian_point",
    "l2_laplace_point",
    "laplace_point",
    "release_point",
    "sample",
    "sample_index",
)


def __getattr__(name: str):
    """The samplers live in :mod:`dpcvx.mechanisms.sampling` and stay importable from here:
    ``sample`` (the textbook float sampler, for studying noise: adding its result to a point
    in floating point is the representation-leaking route) and the exact
    ``release_point`` / ``laplace_point`` / ``gaussian_point`` / ``l2_laplace_point`` /
    ``sample_index`` that mechanisms use."""
    if name in _SAMPLING:
        from dpcvx.mechanisms import sampling

        return getattr(sampling, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
