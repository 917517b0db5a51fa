"""Zero-concentrated DP (rho-zCDP, Bun-Steinke 2016) conversions.

- ``rho``-zCDP implies ``(rho + 2 sqrt(rho log(1/delta)), delta)``-DP for every ``delta`` in
  (0, 1) (Bun-Steinke Prop 1.3; paper 003, Lemma 2.3): :func:`zcdp_to_dp` with ``method="bs16"``.
- A tighter conversion goes through Renyi DP: a rho-zCDP mechanism has RDP curve
  ``epsilon(alpha) <= rho alpha``, exactly the curve of a Gaussian mechanism with noise
  multiplier ``1/sqrt(2 rho)``, so dp_accounting's RDP accountant on that Gaussian event gives a
  valid (and smaller) epsilon: ``method="rdp"``.
- ``epsilon``-DP implies ``epsilon^2 / 2``-zCDP (Bun-Steinke Prop 1.4): :func:`pure_to_zcdp`.
- A Gaussian mechanism with noise multiplier ``m`` (sigma / l2 sensitivity) is
  ``1/(2 m^2)``-zCDP: :func:`gaussian_to_zcdp`.
- :func:`dp_to_zcdp` inverts the BS16 conversion: the largest ``rho`` whose BS16 epsilon at
  ``delta`` is at most ``epsilon``, ``(sqrt(log(1/delta) + epsilon) - sqrt(log(1/delta)))^2``.

The conversions are safe in floating point: :func:`zcdp_to_dp` returns an upper bound on the
real-number value of its formula (the float evaluation, which is within a few ulps, is raised by a
relative ``2^-49`` and rounded up), :func:`pure_to_zcdp` and :func:`gaussian_to_zcdp` are computed
exactly and rounded up, and :func:`dp_to_zcdp` returns a ``rho`` whose :func:`zcdp_to_dp` (so
whose real-number BS16 epsilon) is at most ``epsilon``. The ledger relies on this: it accepts no
overspend, not even a rounding error.

Worked numbers (paper 003 digest, section 4): ``rho = 1, delta = 1e-5`` gives
``epsilon = 7.7861`` by BS16; ``epsilon = 1, delta = 1e-5`` gives ``rho = 0.020820``.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

from dpcvx._validation import check_positive
from dpcvx.errors import InvalidParameterError

__all__ = ["dp_to_zcdp", "gaussian_to_zcdp", "pure_to_zcdp", "zcdp_to_dp"]

# Relative margin that lifts a float evaluation of a conversion above its real-number value: the
# closed forms take a handful of correctly rounded (or < 1 ulp) operations, so their relative
# error is a few 2^-53; 2^-49 is sixteen of them.
_MARGIN = 2.0**-49


def _upper(value: float) -> float:
    """``value`` raised by the relative margin and rounded up (an upper bound on the real-number
    value of a formula whose float evaluation gave ``value``)."""
    return math.nextafter(value * (1.0 + _MARGIN), math.inf)


def _up(exact: Fraction) -> float:
    """The smallest float at least ``exact``."""
    out = float(exact)
    if Fraction(out) < exact:
        out = math.nextafter(out, math.inf)
    return out


def _bs16(rho: float, delta: float) -> float:
    """The BS16 conversion, raised to an upper bound (``-log(delta)``, not ``log(1/delta)``: no
    rounding of ``1/delta`` amplified by the logarithm)."""
    return _upper(rho + 2.0 * math.sqrt(rho * -math.log(delta)))


def _check_delta_open(delta: float, owner: str) -> float:
    d = check_positive(delta, "delta", owner)
    if not d < 1.0:
        raise InvalidParameterError(f"`delta` of `{owner}` must lie in (0, 1). Got {delta!r}.")
    return d


def zcdp_to_dp(rho: float, delta: float, method: str = "best") -> float:
    """The epsilon of ``(epsilon, delta)``-DP implied by ``rho``-zCDP.

    ``method``: ``"bs16"`` (the closed form), ``"rdp"`` (dp_accounting's RDP conversion of the
    curve ``rho alpha``) or ``"best"`` (the smaller of the two; both are valid). Either value is
    raised by a relative ``2^-49`` and rounded up, so that float rounding never makes it smaller
    than the real-number value of the conversion.
    """
    owner = "zcdp_to_dp"
    rho = check_positive(rho, "rho", owner)
    delta = _check_delta_open(delta, owner)
    if method not in ("bs16", "rdp", "best"):
        raise InvalidParameterError(
            f"`method` of `{owner}` must be 'bs16', 'rdp' or 'best'. Got {method!r}."
        )
    bs16 = _bs16(rho, delta)
    if method == "bs16":
        return bs16
    rdp = _upper(_rdp_epsilon(rho, delta))
    return rdp if method == "rdp" else min(bs16, rdp)


@functools.lru_cache(maxsize=256)
def _rdp_epsilon(rho: float, delta: float) -> float:
    import dp_accounting
    from dp_accounting.rdp import RdpAccountant

    orders = [1.0 + x / 20.0 for x in range(1, 200)] + [12.0 + x for x in range(0, 500)]
    accountant = RdpAccountant(orders=orders)
    accountant.compose(dp_accounting.GaussianDpEvent(1.0 / math.sqrt(2.0 * rho)))
    return float(accountant.get_epsilon(delta))


def pure_to_zcdp(epsilon: float) -> float:
    """``epsilon``-DP implies ``epsilon^2 / 2``-zCDP (computed exactly, rounded up)."""
    eps = check_positive(epsilon, "epsilon", "pure_to_zcdp")
    return _up(Fraction(eps) ** 2 / 2)


def gaussian_to_zcdp(noise_multiplier: float) -> float:
    """A Gaussian mechanism with ``sigma = m * sensitivity`` is ``1/(2 m^2)``-zCDP (computed
    exactly, rounded up)."""
    m = check_positive(noise_multiplier, "noise_multiplier", "gaussian_to_zcdp")
    return _up(1 / (2 * Fraction(m) ** 2))


def dp_to_zcdp(epsilon: float, delta: float) -> float:
    """The largest ``rho`` (a float) with ``zcdp_to_dp(rho, delta, "bs16") <= epsilon``.

    The closed form ``(sqrt(L + epsilon) - sqrt(L))^2`` with ``L = log(1/delta)`` is evaluated
    without cancellation, as ``(epsilon / (sqrt(L + epsilon) + sqrt(L)))^2``, then stepped down
    to the first float whose (safe, rounded-up) conversion is at most ``epsilon``: a release
    calibrated to this ``rho`` never states more than ``epsilon``.
    """
    owner = "dp_to_zcdp"
    eps = check_positive(epsilon, "epsilon", owner)
    delta = _check_delta_open(delta, owner)
    log = -math.log(delta)
    rho = (eps / (math.sqrt(log + eps) + math.sqrt(log))) ** 2
    while rho > 0.0 and _bs16(rho, delta) > eps:
        rho = math.nextafter(rho, 0.0)
    if not rho > 0.0:  # pragma: no cover - epsilon below every representable conversion
        raise InvalidParameterError(
            f"`{owner}`: no positive rho converts to at most epsilon={epsilon!r} at "
            f"delta={delta!r}."
        )
    return rho
