"""An array of examples as a data source of the release pipeline (the mean estimators').

``ArraySource(X).solve_private(mechanism, epsilon=..., delta=...)`` releases a mechanism that
reads the rows of ``X`` (``requirements = ("rows",)``, e.g.
:class:`~dpcvx.CoordinatewiseMedianOfMeans`) through :func:`dpcvx.pipeline.release`: validated
input, a public plan, the budget reserved before the rows are read, one typed result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpcvx._validation import check_real
from dpcvx.accounting.ledger import Accountant
from dpcvx.accounting.zcdp import zcdp_to_dp
from dpcvx.errors import DataError, InvalidParameterError
from dpcvx.mechanisms import mean_estimation
from dpcvx.mechanisms.mean_estimation import with_rho
from dpcvx.neighbors import REPLACE_ONE, NeighborRelation
from dpcvx.pipeline import release
from dpcvx.results import PrivateResult

__all__ = ["ArraySource", "MeanEstimate"]


def _rows(X: Any, owner: str) -> np.ndarray:
    try:
        arr = np.asarray(X, dtype=float)
    except (TypeError, ValueError) as exc:
        raise DataError(f"The data of `{owner}` must be a numeric (n, d) array.") from exc
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] < 1:
        raise DataError(f"The data of `{owner}` must have shape (n, d). Got {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        raise DataError(f"The data of `{owner}` contains NaN or inf; remove those rows first.")
    arr = arr.copy()
    arr.setflags(write=False)
    return arr


class _ArrayContext:
    """The data access of an array release: the rows (after the budget is reserved)."""

    def __init__(self, source: ArraySource) -> None:
        self._source = source
        self.n, self.d = source.n, source.d
        self.domain = None

    def rows(self) -> np.ndarray:
        """The ``(n, d)`` examples."""
        return self._source._X

    def solver(self, indices: Any = None, C: float | None = None):
        raise InvalidParameterError("An array source has no certified solves.")

    def project(self, point: Any, localize: Any = None, xi: float | None = None) -> np.ndarray:
        return np.asarray(point, float)


class ArraySource:
    """An ``(n, d)`` array of examples (a 1-D array is one column), as a data source.

    Parameters
    ----------
    X : array-like
        The examples: finite, numeric.
    owner : str
        Named in error messages.
    """

    def __init__(self, X: Any, owner: str = "ArraySource") -> None:
        self._X = _rows(X, owner)
        self.n, self.d = (int(v) for v in self._X.shape)

    @property
    def domain(self) -> None:
        """No parameter domain: the release is a vector in R^d."""
        return None

    @property
    def diameter(self) -> float:
        return math.inf

    @property
    def declared(self) -> None:
        return None

    @property
    def neighbors(self) -> NeighborRelation:
        """One row is one unit of privacy (replace-one neighbors)."""
        return REPLACE_ONE

    def release_context(
        self, *, extension: float | None, solver: str | None, base: bool = False
    ) -> _ArrayContext:
        """The data access of a release (after the budget is reserved)."""
        return _ArrayContext(self)

    def solve_private(
        self,
        mechanism: Any,
        *,
        epsilon: float,
        delta: float = 0.0,
        rng: Any = None,
        accountant: Accountant | None = None,
    ) -> PrivateResult:
        """Release ``mechanism`` on the rows (see :meth:`dpcvx.Problem.solve_private`)."""
        return release(
            self, mechanism, epsilon=epsilon, delta=delta, rng=rng, accountant=accountant
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class MeanEstimate(PrivateResult):
    """A private mean: a :class:`~dpcvx.PrivateResult` whose ``w`` is the mean (also
    ``mean``), with the ``rho`` of a zCDP release (None for pure epsilon-DP)."""

    rho: float | None = None

    @property
    def mean(self) -> np.ndarray:
        """The released mean (the same array as ``w``)."""
        return self.w


def _release_mean(
    estimator: Any,
    X: Any,
    *,
    epsilon: float | None = None,
    rho: float | None = None,
    delta: float = 1e-6,
    rng: Any = None,
    accountant: Accountant | None = None,
) -> MeanEstimate:
    """The earlier ``estimator.release(X, epsilon=... | rho=..., delta=...)``: exactly one of
    ``epsilon`` (pure, Laplace) and ``rho`` (rho-zCDP, Gaussian, stated at ``delta``)."""
    owner = estimator.owner
    if (epsilon is None) == (rho is None):
        raise InvalidParameterError(
            f"`{owner}` needs exactly one budget: `epsilon` (pure epsilon-DP, Laplace noise) or "
            f"`rho` (rho-zCDP, Gaussian noise). Got epsilon={epsilon!r}, rho={rho!r}."
        )
    source = ArraySource(X, owner)
    if rho is not None:
        delta = check_real(delta, "delta", owner)
        if not 0.0 < delta < 1.0:
            raise InvalidParameterError(
                f"A rho-zCDP release of `{owner}` states its (epsilon, delta) guarantee at a "
                f"`delta` in (0, 1). Got delta={delta!r}."
            )
        mech = with_rho(estimator, rho)
        result = source.solve_private(
            mech,
            epsilon=zcdp_to_dp(mech.rho, delta),
            delta=delta,
            rng=rng,
            accountant=accountant,
        )
    else:
        assert epsilon is not None
        result = source.solve_private(
            estimator, epsilon=epsilon, delta=0.0, rng=rng, accountant=accountant
        )
    fields = {f: getattr(result, f) for f in PrivateResult.__dataclass_fields__}
    fields["mechanism"] = owner
    return MeanEstimate(**fields, rho=result.detail.get("rho"))


mean_estimation.array_release = _release_mean
