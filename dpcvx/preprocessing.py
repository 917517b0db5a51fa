"""Private preprocessing as scikit-learn transformers, so that a Pipeline is private end to end.

- :class:`PrivateStandardScaler`: standardization with a private (pure epsilon-DP) mean and
  variance of every feature, computed on the features clipped to public bounds; one ledger
  event per fit.
- :class:`PublicBoundsScaler`: the zero-cost alternative. It maps the public range
  ``[lo, hi]`` of every feature onto ``[-1, 1]`` (clipping first) and reads nothing from the
  data, so it spends no budget at all.

A non-private ``sklearn.preprocessing.StandardScaler`` fitted on the private data voids the
guarantee of everything downstream: its mean and standard deviation are functions of every row,
so the "public" bounds of the next step are then data-dependent. See ``docs/preprocessing.md``.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted

from dpcvx._validation import check_positive
from dpcvx.accounting.ledger import Accountant, PrivacyEvent
from dpcvx.errors import DataError, InvalidParameterError
from dpcvx.mechanisms.base import exact_share
from dpcvx.mechanisms.sampling import laplace_point
from dpcvx.neighbors import REPLACE_ONE
from dpcvx.rng import make_rng

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Self

    from numpy.typing import ArrayLike

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _sk_validate_data
except ImportError:  # pragma: no cover - scikit-learn 1.4 and 1.5

    def _sk_validate_data(estimator, X="no_validation", y="no_validation", **kwargs):
        return estimator._validate_data(X, y, **kwargs)


__all__ = ["PrivateStandardScaler", "PublicBoundsScaler"]

#: the unit roundoff of float64 (round to nearest): ``|fl(s) - s| <= _UNIT_ROUNDOFF |s|``
_UNIT_ROUNDOFF = Fraction(1, 2**53)
#: the released variance is at least this fraction of the largest possible one,
#: ``((hi - lo) / 2)^2``, whatever the noise level (the standard deviation is then at least
#: ``1e-6`` times the half width, so ``transform`` stays finite, at most ``2e6`` in magnitude);
#: the floor actually used is the larger public noise floor of the Notes
VARIANCE_FLOOR = 1e-12


# ------------------------------------------------------------------------------------------
# Exact arithmetic on public numbers (every noise scale is rounded up)
# ------------------------------------------------------------------------------------------
def _up(exact: Fraction) -> float:
    """The smallest float at least ``exact``."""
    out = float(exact)  # correctly rounded
    if Fraction(out) < exact:
        out = math.nextafter(out, math.inf)
    return out


def split_epsilon(epsilon: float) -> tuple[float, float]:
    """The exact split of ``epsilon`` between the means and the second moments:
    ``(epsilon_mean, epsilon_second)`` with ``epsilon_mean = exact_share(epsilon, 2)`` and
    ``epsilon_second`` the largest float with ``epsilon_mean + epsilon_second <= epsilon`` in
    exact arithmetic (for a normal float both are exactly ``epsilon / 2``)."""
    first = exact_share(epsilon, 2)
    second = epsilon - first
    while Fraction(first) + Fraction(second) > Fraction(epsilon):
        second = math.nextafter(second, 0.0)
    return first, second


def sum_sensitivity(n: int, d: int, term: float) -> float:
    """The l1 sensitivity, under replace-one neighbors with public ``n``, of the ``d`` column
    sums (``math.fsum``, correctly rounded) of per-row terms in ``[0, term]``, rounded up.

    The exact sum moves by at most ``term`` per column when one row is replaced; a correctly
    rounded sum ``S`` of ``n`` terms in ``[0, term]`` is within ``u |S| <= u n term`` of the
    exact one (``u = 2^-53``), on both datasets. So a computed column sum moves by at most
    ``term (1 + 2 u n)`` and the vector of ``d`` sums by ``d term (1 + n 2^-52)`` in l1.
    """
    return _up(Fraction(d) * Fraction(term) * (1 + 2 * n * _UNIT_ROUNDOFF))


def noise_scale(sensitivity: float, epsilon: float) -> float:
    """``sensitivity / epsilon``, computed exactly and rounded up to a float (Laplace scale of
    a pure ``epsilon``-DP release of a vector with this l1 sensitivity)."""
    return _up(Fraction(sensitivity) / Fraction(epsilon))


# ------------------------------------------------------------------------------------------
# Shared validation
# ------------------------------------------------------------------------------------------
def _check_bounds(bounds: Any, owner: str) -> tuple[np.ndarray, np.ndarray]:
    """``bounds`` as ``(lo, hi)`` float arrays of shape () or (d,), finite, ``lo < hi`` with a
    finite width, or raise :class:`InvalidParameterError`."""
    fix = (
        "Pass bounds=(lo, hi): public numbers chosen without looking at the data, either two "
        "scalars (every feature) or two arrays of length n_features, with lo < hi, e.g. "
        "bounds=(-5.0, 5.0)."
    )
    if bounds is None:
        raise InvalidParameterError(
            f"`{owner}` needs public `bounds` of the features: they are never taken from the "
            f"data (that would not be private). {fix}"
        )
    if isinstance(bounds, (str, bytes)) or not hasattr(bounds, "__len__") or len(bounds) != 2:
        raise InvalidParameterError(
            f"The `bounds` parameter of `{owner}` must be a pair (lo, hi). Got {bounds!r}. {fix}"
        )
    out = []
    for name, value in zip(("lo", "hi"), bounds):
        try:
            arr = np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            raise InvalidParameterError(
                f"The `bounds` of `{owner}` must be numeric. Got {name}={value!r}. {fix}"
            ) from None
        if arr.ndim > 1 or arr.size == 0 or (arr.dtype == bool):
            raise InvalidParameterError(
                f"The `bounds` of `{owner}` must be scalars or 1-D arrays. Got {name} of shape "
                f"{arr.shape}. {fix}"
            )
        if not np.all(np.isfinite(arr)):
            raise InvalidParameterError(
                f"The `bounds` of `{owner}` must be finite. Got {name}={value!r}. {fix}"
            )
        out.append(arr)
    lo, hi = out
    if lo.ndim == 1 and hi.ndim == 1 and lo.shape != hi.shape:
        raise InvalidParameterError(
            f"The `bounds` of `{owner}` have lo of length {lo.size} and hi of length "
            f"{hi.size}: give one value per feature in both (or a scalar). {fix}"
        )
    with np.errstate(over="ignore"):
        width = hi - lo
    if not np.all(lo < hi) or not np.all(np.isfinite(width)):
        raise InvalidParameterError(
            f"The `bounds` of `{owner}` must have lo < hi (and a finite width hi - lo) for "
            f"every feature. Got lo={lo.tolist()!r}, hi={hi.tolist()!r}. {fix}"
        )
    return lo, hi


def _per_feature(
    lo: np.ndarray, hi: np.ndarray, d: int, owner: str
) -> tuple[np.ndarray, np.ndarray]:
    """The bounds broadcast to ``d`` features (a per-feature array must have length ``d``)."""
    for arr in (lo, hi):
        if arr.ndim == 1 and arr.size != d:
            raise DataError(
                f"`{owner}` got per-feature `bounds` for {arr.size} features, but X has {d} "
                "features. Give one (lo, hi) per column of X, or scalars."
            )
    return np.broadcast_to(lo, (d,)).astype(float), np.broadcast_to(hi, (d,)).astype(float)


class _Transformer(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Input validation shared by the transformers."""

    def _owner(self) -> str:
        return type(self).__name__

    def _validate(self, X: ArrayLike, *, reset: bool) -> np.ndarray:
        """scikit-learn's input validation (finite, 2-D, numeric), its ValueErrors raised as
        :class:`DataError` (a ValueError) with the same message."""
        try:
            return _sk_validate_data(self, X, reset=reset, dtype=np.float64)
        except DataError:
            raise
        except ValueError as exc:
            raise DataError(str(exc)) from exc


# ------------------------------------------------------------------------------------------
# The zero-cost scaler
# ------------------------------------------------------------------------------------------
class PublicBoundsScaler(_Transformer):
    """Map the public range ``[lo, hi]`` of every feature onto ``[-1, 1]``, clipping first.

    ``transform(x) = (clip(x, lo, hi) - c) / h`` with the center ``c = (lo + hi) / 2`` and the
    half width ``h = (hi - lo) / 2``: every output lies in ``[-1, 1]``, so a row of ``d``
    features has l2 norm at most ``sqrt(d)`` (a public ``feature_norm_bound`` for the
    estimators). It reads nothing from the data but its shape: **no privacy cost**, no
    accountant, no randomness. It is the recommended preprocessing when public bounds are
    known; :class:`PrivateStandardScaler` spends budget to learn the scale inside them.

    Parameters
    ----------
    bounds : tuple (lo, hi)
        Public bounds, chosen without looking at the data: two scalars (every feature) or two
        arrays of length ``n_features``, finite, ``lo < hi``.

    Attributes
    ----------
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        (when ``X`` has string column names)
    lower_, upper_ : ndarray of shape (n_features,)
        The public bounds per feature.
    center_, half_width_ : ndarray of shape (n_features,)
        ``(lo + hi) / 2`` and ``(hi - lo) / 2``.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcvx.preprocessing import PublicBoundsScaler
    >>> PublicBoundsScaler(bounds=(0.0, 10.0)).fit_transform(np.array([[0.0], [5.0], [12.0]]))
    array([[-1.],
           [ 0.],
           [ 1.]])
    """

    def __init__(self, bounds: tuple[Any, Any] | None = None) -> None:
        self.bounds = bounds

    def fit(self, X: ArrayLike, y: object = None) -> Self:
        """Check the bounds against the shape of ``X`` (no value of ``X`` is used).

        Raises
        ------
        InvalidParameterError
            The bounds are missing or invalid.
        DataError
            ``X`` is unusable (NaN, wrong shape) or has another number of features than the
            per-feature bounds.
        """
        lo, hi = _check_bounds(self.bounds, self._owner())
        rows = self._validate(X, reset=True)
        self.lower_, self.upper_ = _per_feature(lo, hi, rows.shape[1], self._owner())
        self.center_ = self.lower_ / 2.0 + self.upper_ / 2.0
        self.half_width_ = self.upper_ / 2.0 - self.lower_ / 2.0
        return self

    def transform(self, X: ArrayLike) -> np.ndarray:
        """``(clip(X, lo, hi) - center_) / half_width_``, in ``[-1, 1]``."""
        check_is_fitted(self, "center_")
        Z = self._validate(X, reset=False)
        Z = (np.clip(Z, self.lower_, self.upper_) - self.center_) / self.half_width_
        return np.clip(Z, -1.0, 1.0)

    def inverse_transform(self, X: ArrayLike) -> np.ndarray:
        """``X * half_width_ + center_`` (the clipped values, for inputs in ``[-1, 1]``)."""
        check_is_fitted(self, "center_")
        Z = self._validate(X, reset=False)
        return Z * self.half_width_ + self.center_


# ------------------------------------------------------------------------------------------
# The private standard scaler
# ------------------------------------------------------------------------------------------
class PrivateStandardScaler(_Transformer):
    """Standardize features with a differentially private mean and variance (pure epsilon-DP).

    Each feature is clipped to its public range ``[lo, hi]``; its mean and variance are
    released with Laplace noise (one fit spends exactly ``epsilon``, recorded as **one**
    ledger event); ``transform(x) = (clip(x, lo, hi) - mean_) / scale_``.

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy parameter, positive and finite. One fit spends exactly ``epsilon`` (pure DP).
    bounds : tuple (lo, hi)
        Public bounds of the features, chosen without looking at the data: two scalars (every
        feature) or two arrays of length ``n_features``, finite, ``lo < hi``. Values outside
        are clipped, in ``fit`` and in ``transform``. Required (never taken from the data).
    accountant : dpcvx.Accountant, optional
        Charge every fit to this budget (e.g. one accountant shared by every step of a
        Pipeline). Cloning keeps the *same* accountant. When None, each fit charges a fresh
        accountant holding exactly ``epsilon``.
    random_state : None, int or numpy.random.Generator, default=None
        None draws the noise from OS cryptographic randomness; an int gives reproducible
        noise (for tests, not for a real release; ``seeded_`` is then True).
    with_mean : bool, default=True
        Center the data (``transform`` subtracts ``mean_``).
    with_std : bool, default=True
        Scale the data to unit variance. With ``with_std=False`` only the means are released
        and all of ``epsilon`` goes to them. ``with_mean=False, with_std=False`` is refused (it
        would estimate nothing: use :class:`PublicBoundsScaler`).

    Attributes
    ----------
    mean_ : ndarray of shape (n_features,)
        The released mean, clamped into ``[lo, hi]`` (also computed when ``with_mean=False``
        and ``with_std=True``: the variance needs it).
    var_ : ndarray of shape (n_features,) or None
        The released variance, clamped into ``[floor (hi - lo)^2, (hi - lo)^2 / 4]`` (the
        public ``floor`` of the Notes, at least ``VARIANCE_FLOOR / 4``); None when
        ``with_std=False``.
    scale_ : ndarray of shape (n_features,) or None
        ``sqrt(var_)``; None when ``with_std=False``.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        (when ``X`` has string column names)
    n_samples_seen_ : int
        ``n``, public under the guarantee's neighboring relation.
    lower_, upper_ : ndarray of shape (n_features,)
        The public bounds per feature.
    ledger_ : dpcvx.Ledger
        The accountant's ledger after this fit.
    privacy_ : dict
        The public facts of the release: ``epsilon``, ``epsilon_mean``,
        ``epsilon_second_moment``, the l1 sensitivities and Laplace scales of both sums (in
        the normalized units of the Notes), the per-feature noise scales of ``mean_`` in the
        units of the data, and ``neighbors``.
    seeded_ : bool
        Whether the noise came from a seeded generator (``random_state`` not None).

    Notes
    -----
    Guarantee: pure ``epsilon``-DP, **replace-one neighbors with public n** (two datasets are
    neighbors when they have the same number of rows and differ in one row; the number of
    rows ``n`` and of features ``d`` is public), on every dataset, whatever its values: the
    bounds are public and every row is clipped to them.

    Mechanism. With ``w_j = hi_j - lo_j``, every value is first normalized by the public
    affine map ``u_ij = (clip(x_ij, lo_j, hi_j) - lo_j) / w_j`` in ``[0, 1]`` (clipped to
    ``[0, 1]`` again after rounding) and ``q_ij = (u_ij - 1/2)^2`` in ``[0, 1/4]``. The
    column sums ``S_j = sum_i u_ij`` and ``Q_j = sum_i q_ij`` (``math.fsum``, correctly
    rounded) are released with iid Laplace noise, by dpcvx's exact sampler
    (:func:`~dpcvx.mechanisms.sampling.laplace_point`):

    - replacing one row moves each ``S_j`` by at most 1 and each ``Q_j`` by at most ``1/4``
      (the terms lie in ``[0, 1]`` and ``[0, 1/4]``), so the l1 sensitivities of the vectors
      are ``d`` and ``d / 4``, enlarged by the factor ``1 + n 2^-52`` that covers the
      rounding of the computed sums (:func:`sum_sensitivity`). In the units of the data the
      mean's sensitivity is ``(hi_j - lo_j) / n`` per feature: with scalar bounds the l1
      sensitivity of the mean vector is ``sum_j (hi_j - lo_j) / n``, as for the textbook
      Laplace mean; with per-feature bounds the noise is spread in proportion to each
      width (the same privacy loss, less noise for the narrow features);
    - ``epsilon`` is split exactly (:func:`split_epsilon`): ``epsilon_mean`` to ``S``,
      ``epsilon_second_moment`` to ``Q``, with ``epsilon_mean + epsilon_second_moment <=
      epsilon`` in exact arithmetic (all of it to ``S`` when ``with_std=False``); each Laplace
      scale is ``sensitivity / epsilon_part`` computed exactly and rounded up
      (:func:`noise_scale`);
    - basic composition of the two Laplace releases: pure ``epsilon``-DP, charged as one
      ledger event of ``epsilon``, reserved before any value of ``X`` is read.

    Post-processing (no privacy cost): ``m_j = clamp(noisy S_j / n, 0, 1)``,
    ``v_j = clamp(noisy Q_j / n - (m_j - 1/2)^2, floor, 1/4)`` (the variance of a value in
    ``[0, 1]`` is at most ``1/4``), then ``mean_ = lo + w m`` (clamped into ``[lo, hi]``),
    ``var_ = w^2 v`` and ``scale_ = w sqrt(v)``. The floor is public and is the noise level
    of the second moment, ``floor = min(max(VARIANCE_FLOOR / 4, b_Q / n), 1/4)`` with ``b_Q``
    the Laplace scale of ``Q``: a variance below the noise level cannot be told from zero,
    and dividing by its (noisy, possibly tiny) root would blow the feature up and swamp
    the row norm of a downstream estimator (on breast cancer at ``epsilon = 10`` a feature
    floored at ``1e-12`` instead cost a downstream classifier 10 to 35 points of accuracy).

    Every parameter and the input are validated before anything is reserved: bad input
    (NaN, wrong shape, invalid bounds, ``epsilon <= 0``, an accountant that cannot afford the
    fit or works under another neighboring relation) raises and spends nothing. Sample
    weights are not supported (they would void the sensitivity bound).

    Examples
    --------
    >>> import numpy as np, dpcvx
    >>> from dpcvx.preprocessing import PrivateStandardScaler
    >>> X = np.random.default_rng(0).normal(2.0, 1.0, size=(1000, 3))
    >>> scaler = PrivateStandardScaler(epsilon=5.0, bounds=(-3.0, 7.0), random_state=0).fit(X)
    >>> bool(np.all(np.abs(scaler.mean_ - 2.0) < 0.2)), len(scaler.ledger_.events)
    (True, 1)
    """

    def __init__(
        self,
        epsilon: float = 1.0,
        bounds: tuple[Any, Any] | None = None,
        *,
        accountant: Accountant | None = None,
        random_state: int | np.random.Generator | None = None,
        with_mean: bool = True,
        with_std: bool = True,
    ) -> None:
        self.epsilon = epsilon
        self.bounds = bounds
        self.accountant = accountant
        self.random_state = random_state
        self.with_mean = with_mean
        self.with_std = with_std

    # ------------------------------------------------------------------ validation
    def _check_flags(self) -> tuple[bool, bool]:
        owner = self._owner()
        for name in ("with_mean", "with_std"):
            value = getattr(self, name)
            if not isinstance(value, (bool, np.bool_)):
                raise InvalidParameterError(
                    f"The `{name}` parameter of `{owner}` must be a bool. "
                    f"Got {type(value).__name__}: {value!r}."
                )
        if not self.with_mean and not self.with_std:
            raise InvalidParameterError(
                f"`{owner}` with with_mean=False and with_std=False estimates nothing. Use "
                "PublicBoundsScaler(bounds) to clip and rescale by the public bounds at no "
                "privacy cost, or set with_mean=True or with_std=True."
            )
        return bool(self.with_mean), bool(self.with_std)

    def _check_random_state(self) -> None:
        rs = self.random_state
        if rs is None or isinstance(rs, np.random.Generator):
            return
        if isinstance(rs, numbers.Integral) and not isinstance(rs, bool) and int(rs) >= 0:
            return
        raise InvalidParameterError(
            f"The `random_state` parameter of `{self._owner()}` must be None (OS cryptographic "
            "randomness), a non-negative int (reproducible) or a numpy.random.Generator. "
            f"Got {type(rs).__name__}: {rs!r}. (numpy's legacy RandomState is not accepted: "
            "pass an int seed instead.)"
        )

    def _check_accountant(self) -> None:
        if self.accountant is not None and not isinstance(self.accountant, Accountant):
            raise InvalidParameterError(
                f"The `accountant` parameter of `{self._owner()}` must be a dpcvx.Accountant "
                f"or None. Got {type(self.accountant).__name__}."
            )

    # ------------------------------------------------------------------ fit
    def fit(self, X: ArrayLike, y: object = None) -> Self:
        """Release the private mean and variance of the clipped features (spends ``epsilon``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self

        Raises
        ------
        InvalidParameterError
            A parameter is invalid (nothing spent), or the accountant works under another
            neighboring relation than replace-one (nothing spent).
        DataError
            ``X`` is unusable: NaN or inf, wrong shape, a number of features that does not
            match per-feature bounds (nothing spent).
        PrivacyBudgetError
            The ``accountant`` cannot afford ``epsilon`` (nothing spent).
        """
        owner = self._owner()
        epsilon = check_positive(self.epsilon, "epsilon", owner)
        lo, hi = _check_bounds(self.bounds, owner)
        with_mean, with_std = self._check_flags()
        self._check_random_state()
        self._check_accountant()
        rows = self._validate(X, reset=True)  # finite, 2-D, at least one row
        n, d = (int(v) for v in rows.shape)
        lower, upper = _per_feature(lo, hi, d, owner)
        width = upper - lower

        # the public plan: budget split, sensitivities, scales
        if with_std:
            eps_mean, eps_second = split_epsilon(epsilon)
        else:
            eps_mean, eps_second = epsilon, 0.0
        mean_sens = sum_sensitivity(n, d, 1.0)
        mean_scale = noise_scale(mean_sens, eps_mean)
        second_sens = sum_sensitivity(n, d, 0.25) if with_std else None
        second_scale = noise_scale(second_sens, eps_second) if second_sens is not None else None
        # the public floor of the normalized variance: the second moment's noise level
        floor = min(max(VARIANCE_FLOOR / 4.0, second_scale / n), 0.25) if second_scale else 0.0
        facts: dict[str, Any] = {
            "epsilon": epsilon,
            "epsilon_mean": eps_mean,
            "epsilon_second_moment": eps_second,
            "mean_sum_sensitivity": mean_sens,
            "mean_sum_noise_scale": mean_scale,
            "second_moment_sum_sensitivity": second_sens,
            "second_moment_sum_noise_scale": second_scale,
            "n": n,
            "d": d,
            "neighbors": REPLACE_ONE.name,
        }
        event = PrivacyEvent(
            label=f"{owner}(n={n}, d={d}): Laplace means"
            + (" and second moments" if with_std else ""),
            epsilon=epsilon,
            kind="pure",
            detail=facts,
            neighbors=REPLACE_ONE,
        )
        rng, seeded = make_rng(self.random_state)
        budget = self.accountant if self.accountant is not None else Accountant(epsilon)
        budget.reserve(event)  # before any value of X is read; spent from here on

        # the release (see Notes): normalized terms, correctly rounded sums, exact noise
        with np.errstate(invalid="ignore", divide="ignore"):
            U = np.clip((np.clip(rows, lower, upper) - lower) / width, 0.0, 1.0)
        sums = np.array([math.fsum(col) for col in U.T.tolist()])
        m = np.clip(laplace_point(sums, mean_scale, rng) / n, 0.0, 1.0)
        self.mean_ = np.clip(lower + width * m, lower, upper)
        if with_std:
            assert second_scale is not None
            Q = np.minimum((U - 0.5) ** 2, 0.25)
            second = np.array([math.fsum(col) for col in Q.T.tolist()])
            noisy = laplace_point(second, second_scale, rng) / n
            v = np.clip(noisy - (m - 0.5) ** 2, floor, 0.25)
            self.var_ = width**2 * v
            self.scale_ = width * np.sqrt(v)
        else:
            self.var_ = None
            self.scale_ = None
        # per feature, in the units of the data
        facts["mean_noise_scale"] = width * (mean_scale / n)
        facts["variance_floor"] = width**2 * floor if with_std else None
        self.n_samples_seen_ = n
        self.lower_, self.upper_ = lower, upper
        self.ledger_ = budget.ledger
        self.privacy_ = facts
        self.seeded_ = seeded
        return self

    # ------------------------------------------------------------------ transform
    def transform(self, X: ArrayLike) -> np.ndarray:
        """``(clip(X, lo, hi) - mean_) / scale_`` (without the subtraction when
        ``with_mean=False``, without the division when ``with_std=False``). Post-processing of
        the release: no privacy cost."""
        check_is_fitted(self, "mean_")
        Z = np.clip(self._validate(X, reset=False), self.lower_, self.upper_)
        if self.with_mean:
            Z = Z - self.mean_
        if self.scale_ is not None:
            Z = Z / self.scale_
        return Z

    def inverse_transform(self, X: ArrayLike) -> np.ndarray:
        """Undo :meth:`transform` (for inputs within the bounds)."""
        check_is_fitted(self, "mean_")
        Z = self._validate(X, reset=False)
        if self.scale_ is not None:
            Z = Z * self.scale_
        if self.with_mean:
            Z = Z + self.mean_
        return Z

    # ------------------------------------------------------------------ scikit-learn plumbing
    def __sklearn_clone__(self) -> Self:
        """A clone with the same parameters and the *same* accountant: every fit of every clone
        is charged to the one budget."""
        params = self.get_params(deep=False)
        accountant = params.pop("accountant")
        fresh = {name: clone(value, safe=False) for name, value in params.items()}
        return type(self)(accountant=accountant, **fresh)

    def __getstate__(self) -> dict[str, Any]:
        if getattr(self, "accountant", None) is not None:
            raise InvalidParameterError(
                f"A `{self._owner()}` holding an `accountant` cannot be pickled or deep-copied: "
                "the accountant is the live budget of one dataset, and a copy would not be "
                "charged. Call `set_params(accountant=None)` first (the fitted `mean_`, "
                "`scale_` and `ledger_` stay), or `sklearn.base.clone` (which keeps the same "
                "accountant)."
            )
        return dict(super().__getstate__())

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        super().__setstate__(dict(state))
