"""Validation of public scalars, shared by every stage."""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING

from dpcvx.errors import InvalidParameterError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["check_center", "check_delta", "check_nonnegative", "check_positive", "check_real"]


def check_real(value: object, name: str, owner: str) -> float:
    """Return ``value`` as a finite float or raise :class:`InvalidParameterError`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidParameterError(
            f"The `{name}` parameter of `{owner}` must be a finite real number. "
            f"Got {type(value).__name__}: {value!r}."
        )
    out = float(value)
    if not math.isfinite(out):
        raise InvalidParameterError(
            f"The `{name}` parameter of `{owner}` must be finite. Got {out!r}."
        )
    return out


def check_positive(value: object, name: str, owner: str) -> float:
    """Return ``value`` as a positive finite float or raise :class:`InvalidParameterError`."""
    out = check_real(value, name, owner)
    if out <= 0:
        raise InvalidParameterError(
            f"The `{name}` parameter of `{owner}` must be a positive finite float. Got {value!r}."
        )
    return out


def check_nonnegative(value: object, name: str, owner: str) -> float:
    """Return ``value`` as a non-negative finite float or raise :class:`InvalidParameterError`."""
    out = check_real(value, name, owner)
    if out < 0:
        raise InvalidParameterError(
            f"The `{name}` parameter of `{owner}` must be a non-negative finite float. "
            f"Got {value!r}."
        )
    return out


def check_delta(value: object, owner: str, *, upper: float = 1.0) -> float:
    """Return ``delta`` as a float in [0, upper) or raise :class:`InvalidParameterError`."""
    out = check_real(value, "delta", owner)
    if not 0.0 <= out < upper:
        raise InvalidParameterError(
            f"The `delta` parameter of `{owner}` must lie in [0, {upper:g}). Got {value!r}. "
            "Use 0 for pure DP; a useful delta is much smaller than 1/n."
        )
    return out


def check_center(value: object, owner: str) -> np.ndarray | None:
    """Return ``value`` as a finite float vector (or None) or raise InvalidParameterError."""
    if value is None:
        return None
    import numpy as np

    try:
        c = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(
            f"The `center` parameter of `{owner}` must be a finite numeric vector. "
            f"Got {type(value).__name__}: {value!r}."
        ) from exc
    if c.ndim != 1 or not np.all(np.isfinite(c)):
        raise InvalidParameterError(
            f"The `center` parameter of `{owner}` must be a finite vector. Got {c!r}."
        )
    return c


def check_pure_budget(epsilon: object, delta: object, owner: str) -> float:
    """``epsilon`` of a pure epsilon-DP mechanism (``delta`` must be 0), or raise
    :class:`InvalidParameterError`."""
    eps = check_positive(epsilon, "epsilon", owner)
    if check_delta(delta, owner) != 0.0:
        raise InvalidParameterError(
            f"`{owner}` is a pure epsilon-DP mechanism: `delta` must be 0. Got {delta!r}."
        )
    return eps


def check_moment_order(value: object, owner: str, name: str = "k") -> float:
    """A moment order: a finite real number, at least 2 (papers 000 and 003 assume a bounded
    k-th moment with k >= 2), or raise :class:`InvalidParameterError`."""
    k = check_real(value, name, owner)
    if not (math.isfinite(k) and k >= 2):
        raise InvalidParameterError(
            f"The moment order `{name}` of `{owner}` must be a finite number, at least 2 (a "
            f"bounded k-th moment with k >= 2). Got {value!r}."
        )
    return k
