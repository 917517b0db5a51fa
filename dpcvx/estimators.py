"""scikit-learn estimators for differentially private linear models.

Each estimator declares a per-example convex loss of a linear model in CVXPY, binds the
(preprocessed) data to a :class:`dpcvx.Problem` over a public l2 ball, and releases a private
minimizer with a dpcvx mechanism: certified output perturbation (paper 002, Algorithms 1/6;
the default) or Localized Double Output Perturbation (paper 000, Theorem 3.1) for heavy-tailed
features. They follow scikit-learn's conventions (parameters stored as given and validated in
``fit``; learned attributes end with ``_``) and expose the guarantee, dpcvx's certificates and
the privacy ledger after fitting.

- :class:`PrivateLinearClassifier`: binary classification, hinge or logistic loss; over
  ``K > 2`` public classes one-vs-rest (one ledger event, ``epsilon / K`` per class) or, with
  ``multi_class="multinomial"``, one release of a softmax (multinomial logistic) model.
- :class:`PrivateQuantileRegressor`: quantile (pinball) regression; least absolute deviation
  is ``quantile=0.5``.
- :class:`PrivateRidgeRegressor`: l2-regularized regression with the Huber loss (default) or
  the squared loss.

Privacy rests on public bounds only. Every bound that enters the noise (the row-norm bound of
the features, the label bound of the squared loss, the moment bounds of the heavy-tailed
mechanism, the label set of the classifier) is a parameter. When one is left to default and
would have to be taken from the data, the estimator says so with a
:class:`~dpcvx.errors.PrivacyLeakWarning` (or raises, with ``on_data_dependent_bounds="raise"``).
See ``docs/estimators.md``.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import warnings
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import cvxpy as cp
import numpy as np
from scipy.special import expit, log_softmax, logsumexp, softmax
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted

from dpcvx import domains, losses
from dpcvx._validation import check_delta, check_moment_order, check_positive, check_real
from dpcvx.accounting.ledger import Accountant, Ledger, PrivacyEvent
from dpcvx.arrays import ArraySource
from dpcvx.calculators import heavy_tailed_clipping
from dpcvx.errors import DataError, InvalidParameterError, PrivacyLeakWarning
from dpcvx.mechanisms.base import Mechanism, exact_share
from dpcvx.mechanisms.localized_double import LocalizedDoubleOutputPerturbation
from dpcvx.mechanisms.noise import calibrate
from dpcvx.mechanisms.output_perturbation import OutputPerturbation, choose_regularization
from dpcvx.mechanisms.selection import PrivateSelection
from dpcvx.mechanisms.sufficient_statistics import SufficientStatisticsPerturbation
from dpcvx.problem import Problem
from dpcvx.results import PrivateResult
from dpcvx.rng import make_rng

if TYPE_CHECKING:
    from typing import Self

    from numpy.typing import ArrayLike

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _sk_validate_data
except ImportError:  # pragma: no cover - scikit-learn 1.4 and 1.5

    def _sk_validate_data(estimator, X="no_validation", y="no_validation", **kwargs):
        return estimator._validate_data(X, y, **kwargs)


__all__ = [
    "PrivateLinearClassifier",
    "PrivateQuantileRegressor",
    "PrivateRidgeRegressor",
]

_T = TypeVar("_T")

#: the mechanisms every estimator can use, by the name its ``mechanism`` parameter takes
MECHANISMS = ("output_perturbation", "ldop")
#: ... and those of :class:`PrivateRidgeRegressor` (sufficient-statistics perturbation)
RIDGE_MECHANISMS = (*MECHANISMS, "ssp")
_MECHANISM_CLASSES = {
    "output_perturbation": OutputPerturbation,
    "ldop": LocalizedDoubleOutputPerturbation,
    "ssp": SufficientStatisticsPerturbation,
}
#: mechanism parameters the estimator sets itself (from its own public bounds)
_RESERVED_OPTIONS = {
    "output_perturbation": {
        "lipschitz": "the bounds `feature_norm_bound`, `intercept_scaling`"
        " (and `label_bound`, `domain_radius` for the "
        "squared loss)",
        "regularization": "the estimator's `regularization`",
        "strong_convexity": "nothing: these losses are not strongly convex "
        "per example, so it must stay 0",
    },
    "ldop": {
        "k": "`moment_order`",
        "moment": "`feature_moment`",
        "second_moment": "`feature_second_moment`",
        "base_regularization": "the estimator's `regularization`",
    },
    "ssp": {
        "feature_norm_bound": "`feature_norm_bound`",
        "label_range": "`label_range` (or `label_bound`)",
        "fit_intercept": "`fit_intercept`",
        "intercept_scaling": "`intercept_scaling`",
        "regularization": "the estimator's `regularization`",
    },
}
#: rows longer than the bound are scaled to ``bound * (1 - _CLIP_MARGIN)``: their float64 norm
#: then stays below the bound whatever the rounding, so the Lipschitz bound is exact
_CLIP_MARGIN = 1e-10
#: ``regularization="select"``: the grid is the automatic ``lam`` of one candidate times these
SELECTION_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)
#: the validation share of a private selection of ``lam``
SELECTION_VALIDATION = 0.2
#: sqrt(2) rounded up: the multinomial loss's gradient factor (``||q - e_y|| <= sqrt(2)``)
_SQRT2_UP = math.nextafter(math.sqrt(2.0), math.inf)


class _DataBound(NamedTuple):
    """A public bound that was not given and was taken from the data instead."""

    name: str
    what: str
    fix: str


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """The public side of one release: the clipped rows (with the intercept column), the
    mechanism built from public bounds, and those bounds."""

    rows: np.ndarray
    mechanism: Mechanism
    bounds: dict[str, Any]
    n_features: int
    intercept_scaling: float  # 0.0 without an intercept
    domain_radius: float


@dataclasses.dataclass(frozen=True, slots=True)
class _Settings:
    """The validated public parameters of one fit (computed before any data is touched)."""

    epsilon: float
    delta: float
    mechanism: str
    feature_norm_bound: float | None
    label_bound: float | None
    domain_radius: float
    regularization: float | None  # None: "auto" (or a selection)
    fit_intercept: bool
    intercept_scaling: float
    moment_order: float
    feature_moment: float | None
    feature_second_moment: float | None
    options: Mapping[str, Any]
    strict: bool
    label_range: tuple[float, float] | None = None
    #: private selection of ``lam`` (:class:`~dpcvx.PrivateSelection`): ``"select"`` (the
    #: public default grid) or the user's grid
    regularization_grid: tuple[float, ...] | str | None = None


# ------------------------------------------------------------------------------------------
# Shared documentation of the parameters every estimator takes
# ------------------------------------------------------------------------------------------
_COMMON_PARAMETERS = """\
    epsilon : float, default=1.0
        Privacy parameter, positive and finite. One fit spends exactly ``(epsilon, delta)``.
    delta : float, default=0.0
        In ``[0, 1)``. 0 asks for pure epsilon-DP; ``delta > 0`` uses Gaussian noise
        (``mechanism="output_perturbation"`` only). A useful delta is much smaller than 1/n.
    mechanism : {"output_perturbation", "ldop"}, default="output_perturbation"
        ``"output_perturbation"``: :class:`dpcvx.OutputPerturbation` (paper 002, Algorithm 6)
        on rows clipped to ``feature_norm_bound``. ``"ldop"``:
        :class:`dpcvx.LocalizedDoubleOutputPerturbation` (paper 000, Theorem 3.1), for
        heavy-tailed features where no row-norm clipping is wanted: it needs only public
        moment bounds of the row norms (``moment_order``, ``feature_moment``), is pure
        epsilon-DP on every dataset, and needs ``n >= 2 J`` examples (``J`` blocks per phase,
        31 or more by default; set ``mechanism_options={"blocks": J}`` for small data).
        :class:`PrivateRidgeRegressor` also takes ``"ssp"`` (sufficient-statistics
        perturbation, the choice for small ``n``; see its Notes).
    feature_norm_bound : float, optional
        ``B``: a public bound on the l2 norm of a feature row. Rows longer than ``B`` are
        scaled down to norm ``B`` before the fit (clipping; predictions use rows as given).
        Choose it without looking at the data (for standardized features, about
        ``sqrt(n_features)``). When None with ``mechanism="output_perturbation"`` and public
        moment bounds (``feature_moment``), dpcvx's heavy-tailed recipe clips at
        ``C = max(G_2, G_k (n epsilon/(3000 d))^(1/k))`` (:func:`dpcvx.heavy_tailed_clipping`,
        fitted on public synthetic data) and ``regularization="auto"`` is paper 002's
        population rule (Prop 4.3); without moments, the largest row norm of ``X`` is used
        and a :class:`~dpcvx.errors.PrivacyLeakWarning` is issued: that is not private.
        With ``mechanism="ldop"``, None means no clipping.
    domain_radius : float, default=1.0
        ``R``: the model ``w = (coef_, intercept_ / intercept_scaling)`` is confined to the l2
        ball of radius ``R`` (the public domain ``W``; every guarantee needs one), and
        ``regularization="auto"`` takes ``R`` as the size of a good model. Choose the
        smallest radius that holds a good model in the units of your public preprocessing
        (predictions are at most ``R sqrt(B^2 + s^2)`` in magnitude); a needlessly large
        ``R`` means a smaller automatic ``lam`` and more noise.
    regularization : float, "auto", "select" or list of float, default="auto"
        ``lam > 0`` of the term ``(lam/2) ||w||^2`` (``w`` includes the intercept coordinate).
        ``"select"`` or a list of public values: ``lam`` is selected privately
        (:class:`~dpcvx.PrivateSelection`, Liu and Talwar's random stopping, pure epsilon, one
        ledger event) on a private 20% validation split, every candidate at ``epsilon / 3``;
        ``"select"`` searches the automatic ``lam`` of one candidate times 1/4, 1/2, 1, 2, 4.
        Output perturbation with ``delta = 0`` only; ``bounds_["regularization"]`` is the
        selected value.
        ``"auto"``: with output perturbation ``lam = 2 L sqrt(m / n) / R``, where ``L`` is
        the Lipschitz bound and ``m`` the expected noise norm per unit sensitivity
        (``d/epsilon`` for pure DP): it balances the bias ``lam R^2 / 2`` against the noise's
        effect ``2 L^2 m / (lam n)``, from public quantities only. With ``mechanism="ldop"``
        a float overrides the first phase's ``lambda_1`` and ``"auto"`` keeps the mechanism's
        own choice. Never tune it on the private data.
    fit_intercept : bool, default=True
        Fit an intercept as an extra coordinate of ``w`` multiplying the constant feature
        ``intercept_scaling``; that constant counts in the row norm
        (``sqrt(B^2 + intercept_scaling^2)``), so the privacy bound covers the intercept.
        The intercept is regularized and confined to the domain like every coordinate.
    intercept_scaling : float, default=1.0
        The constant feature ``s`` (``intercept_ = s * w_last``).
    moment_order : float, default=4.0
        ``k >= 2`` (``mechanism="ldop"``): order of the moment bound below.
    feature_moment : float, optional
        ``G_k``: a public bound with ``E ||x||^k <= G_k^k`` over the population of feature
        rows, for ``mechanism="ldop"``, and for output perturbation without
        ``feature_norm_bound`` (the heavy-tailed recipe above: the default heavy-tailed
        release: up to 56 times lower excess risk than clipping at ``G_2`` with the usual
        ``lam`` in ``benchmarks/bench_heavy_tailed.py``, within seed noise of it on the hinge
        loss at small n). It shapes accuracy only; privacy
        holds on every dataset. When None, ``feature_norm_bound`` is used if given
        (clipped rows), and otherwise the empirical moment of ``X`` is used with a
        :class:`~dpcvx.errors.PrivacyLeakWarning`.
    feature_second_moment : float, optional
        ``G_2``: the same bound for ``k = 2``; ``G_2 <= G_k``. Default ``G_k``.
    mechanism_options : dict, optional
        Further public keyword arguments of the mechanism's constructor (e.g.
        ``{"blocks": 5}`` or ``{"executor": pool}`` for ``"ldop"``, ``{"gaussian": "zwb"}``
        or ``{"solver": "ECOS"}`` for output perturbation). The parameters the estimator
        derives from its bounds cannot be set here.
    random_state : None, int or numpy.random.Generator, default=None
        None draws the noise from OS cryptographic randomness; an int gives reproducible noise
        and marks the result ``seeded=True`` (for tests, not for a real release).
    accountant : dpcvx.Accountant, optional
        Charge every fit to this budget (composition of several releases on the same data).
        Cloning the estimator (``sklearn.base.clone``, cross-validation) keeps the *same*
        accountant, so every fit of every clone is charged to it. When None, each fit charges
        a fresh accountant holding exactly ``(epsilon, delta)``.
    on_data_dependent_bounds : {"warn", "raise"}, default="warn"
        What to do when a public bound was not given and would be taken from the data:
        issue a :class:`~dpcvx.errors.PrivacyLeakWarning` and go on, or raise
        :class:`~dpcvx.InvalidParameterError` before anything is spent."""

_COMMON_ATTRIBUTES = """\
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of str
        Names of the features seen during ``fit`` (when ``X`` has string column names).
    result_ : dpcvx.PrivateResult
        The private release: ``w`` (coefficients, then the intercept coordinate), the
        guarantee, the certificates, the ledger, ``seeded`` and public ``detail``.
    certificates_ : tuple of dpcvx.ReleaseCertificate
        dpcvx's public certificate of every solve behind the release.
    ledger_ : dpcvx.Ledger
        The accountant's ledger after this fit.
    bounds_ : dict
        The public quantities the fit used (``feature_norm_bound``, ``lipschitz``,
        ``regularization``, ...), whether given or derived.
    data_dependent_bounds_ : tuple of str
        Names of the bounds that were taken from the data (empty for a private fit)."""


def _document(cls: type[_T]) -> type[_T]:
    # the placeholders stand indented like the docstring; the blocks carry their own indent
    cls.__doc__ = (
        (cls.__doc__ or "")
        .replace("    %(common_parameters)s", _COMMON_PARAMETERS)
        .replace("    %(common_attributes)s", _COMMON_ATTRIBUTES)
    )
    return cls


# ------------------------------------------------------------------------------------------
# Pickling helpers: dpcvx's frozen records keep read-only mappings, which plain pickle cannot
# serialize; the estimator stores them as plain data in its state and rebuilds them on load.
# ------------------------------------------------------------------------------------------
def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return tuple(_plain(item) for item in value)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _ledger_state(ledger: Ledger) -> list[dict[str, Any]]:
    return [
        {f.name: _plain(getattr(e, f.name)) for f in dataclasses.fields(e)} for e in ledger.events
    ]


def _ledger_from_state(state: list[dict[str, Any]]) -> Ledger:
    return Ledger(events=tuple(PrivacyEvent(**fields) for fields in state))


def _result_state(result: PrivateResult) -> dict[str, Any]:
    state = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    state["ledger"] = _ledger_state(result.ledger)
    state["detail"] = _plain(result.detail)
    return state


def _result_from_state(state: dict[str, Any]) -> PrivateResult:
    fields = dict(state)
    fields["ledger"] = _ledger_from_state(fields["ledger"])
    fields["detail"] = MappingProxyType(dict(fields["detail"]))
    return PrivateResult(**fields)


# ------------------------------------------------------------------------------------------
# The shared machinery
# ------------------------------------------------------------------------------------------
class _PrivateLinearModel(BaseEstimator):
    """Validation, bounds, the dpcvx release and the scikit-learn plumbing of every estimator.

    A subclass provides ``_loss(score, label)`` (one example's CVXPY loss), and
    ``_gradient_factor()`` ``c`` such that ``||grad_w f(w, (x, y))|| <= c ||x||`` for every
    ``w`` and every label (so the loss is ``c sqrt(B^2 + s^2)``-Lipschitz on clipped rows).
    """

    #: the values its ``mechanism`` parameter accepts
    _mechanisms: tuple[str, ...] = MECHANISMS

    # ------------------------------------------------------------------ validation
    def _owner(self) -> str:
        return type(self).__name__

    def _check_choice(self, name: str, choices: tuple[str, ...]) -> str:
        value = getattr(self, name)
        if not isinstance(value, str) or value not in choices:
            raise InvalidParameterError(
                f"The `{name}` parameter of `{self._owner()}` must be one of {choices}. "
                f"Got {value!r}."
            )
        return value

    def _optional_positive(self, name: str) -> float | None:
        value = getattr(self, name)
        return None if value is None else check_positive(value, name, self._owner())

    def _validated_settings(self) -> _Settings:
        """Every public parameter, validated before the data is looked at."""
        owner = self._owner()
        epsilon = check_positive(self.epsilon, "epsilon", owner)
        delta = check_delta(self.delta, owner)
        mechanism = self._check_choice("mechanism", self._mechanisms)
        if mechanism in ("ldop", "ssp") and delta != 0.0:
            raise InvalidParameterError(
                f"`{owner}` with mechanism={mechanism!r} is pure epsilon-DP: `delta` must be 0. "
                f"Got {self.delta!r}. Use mechanism='output_perturbation' for delta > 0."
            )
        strict = self._check_choice("on_data_dependent_bounds", ("warn", "raise")) == "raise"
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise InvalidParameterError(
                f"The `fit_intercept` parameter of `{owner}` must be a bool. "
                f"Got {type(self.fit_intercept).__name__}: {self.fit_intercept!r}."
            )
        regularization = self.regularization
        grid: tuple[float, ...] | str | None = None
        if isinstance(regularization, str):
            if regularization not in ("auto", "select"):
                raise InvalidParameterError(
                    f"The `regularization` parameter of `{owner}` must be 'auto', 'select', a "
                    f"positive finite float or a list of them. Got {regularization!r}."
                )
            grid = "select" if regularization == "select" else None
            regularization = None
        elif isinstance(regularization, (list, tuple, np.ndarray)):
            values = list(np.asarray(regularization, dtype=object).reshape(-1))
            if not values:
                raise InvalidParameterError(
                    f"The `regularization` grid of `{owner}` is empty: give public values of "
                    "lam, e.g. regularization=[0.01, 0.1, 1.0]."
                )
            grid = tuple(check_positive(v, "regularization", owner) for v in values)
            regularization = None
        else:
            regularization = check_positive(regularization, "regularization", owner)
        if grid is not None and (mechanism != "output_perturbation" or self.delta != 0):
            raise InvalidParameterError(
                f"`{owner}` selects `regularization` privately (regularization='select' or a "
                "list) with mechanism='output_perturbation' and delta=0 only (Liu and Talwar's "
                f"pure selection). Got mechanism={mechanism!r}, delta={self.delta!r}."
            )
        k = check_moment_order(self.moment_order, owner, "moment_order")
        g_k = self._optional_positive("feature_moment")
        g_2 = self._optional_positive("feature_second_moment")
        if g_2 is not None and g_k is None:
            raise InvalidParameterError(
                f"`{owner}` got `feature_second_moment` without `feature_moment`: give both "
                "public moment bounds (or neither)."
            )
        if g_2 is not None and g_k is not None and g_2 > g_k:
            raise InvalidParameterError(
                f"`feature_second_moment` ({g_2:g}) exceeds `feature_moment` ({g_k:g}) in "
                f"`{owner}`: by Lyapunov's inequality (E ||x||^j)^(1/j) grows with j, so valid "
                "bounds have G_2 <= G_k. One of the two is wrong."
            )
        self._check_random_state()
        if self.accountant is not None and not isinstance(self.accountant, Accountant):
            raise InvalidParameterError(
                f"The `accountant` parameter of `{owner}` must be a dpcvx.Accountant or None. "
                f"Got {type(self.accountant).__name__}."
            )
        self._check_loss_parameters(mechanism)
        return _Settings(
            epsilon=epsilon,
            delta=delta,
            mechanism=mechanism,
            feature_norm_bound=self._optional_positive("feature_norm_bound"),
            label_bound=self._optional_positive("label_bound")
            if hasattr(self, "label_bound")
            else None,
            domain_radius=check_positive(self.domain_radius, "domain_radius", owner),
            regularization=regularization,
            regularization_grid=grid,
            fit_intercept=bool(self.fit_intercept),
            intercept_scaling=check_positive(self.intercept_scaling, "intercept_scaling", owner),
            moment_order=k,
            feature_moment=g_k,
            feature_second_moment=g_2,
            options=self._validated_options(mechanism),
            strict=strict,
            label_range=self._validated_label_range(),
        )

    def _validated_label_range(self) -> tuple[float, float] | None:
        """``label_range`` as ``(lo, hi)`` with ``lo < hi`` (None when not given)."""
        value = getattr(self, "label_range", None)
        if value is None:
            return None
        owner = self._owner()
        if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 2:
            raise InvalidParameterError(
                f"The `label_range` parameter of `{owner}` must be None or a pair (lo, hi) of "
                f"public finite numbers with lo < hi. Got {value!r}."
            )
        lo = check_real(value[0], "label_range[0]", owner)
        hi = check_real(value[1], "label_range[1]", owner)
        if not lo < hi:
            raise InvalidParameterError(
                f"The `label_range` parameter of `{owner}` must have lo < hi. Got {value!r}."
            )
        return (lo, hi)

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

    def _check_loss_parameters(self, mechanism: str) -> None:
        """Validate the loss-specific parameters (subclasses)."""

    def _validated_options(self, mechanism: str) -> Mapping[str, Any]:
        owner = self._owner()
        options = self.mechanism_options
        if options is None:
            return MappingProxyType({})
        if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
            raise InvalidParameterError(
                f"The `mechanism_options` parameter of `{owner}` must be None or a dict of "
                f"keyword arguments. Got {type(options).__name__}."
            )
        cls = _MECHANISM_CLASSES[mechanism]
        reserved = _RESERVED_OPTIONS[mechanism]
        valid = sorted(f.name for f in dataclasses.fields(cls) if f.name not in reserved)
        for key in options:
            if key in reserved:
                raise InvalidParameterError(
                    f"`mechanism_options` of `{owner}` cannot set {key!r}: the estimator sets "
                    f"it from {reserved[key]}. Valid keys for mechanism={mechanism!r}: "
                    f"{valid}."
                )
            if key not in valid:
                raise InvalidParameterError(
                    f"`mechanism_options` of `{owner}` has the unknown key {key!r} for "
                    f"mechanism={mechanism!r} ({cls.__name__}). Valid keys: {valid}."
                )
        return MappingProxyType(dict(options))

    # ------------------------------------------------------------------ data
    def _validate(
        self, X: ArrayLike, y: ArrayLike | str = "no_validation", *, reset: bool, **kwargs: Any
    ) -> Any:
        """scikit-learn's input validation, with its ValueErrors raised as :class:`DataError`
        (same message; a DataError is a ValueError)."""
        try:
            return _sk_validate_data(self, X, y, reset=reset, dtype=np.float64, **kwargs)
        except DataError:
            raise
        except ValueError as exc:
            raise DataError(str(exc)) from exc

    # ------------------------------------------------------------------ the release
    def _gradient_factor(self) -> float:  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    def _lipschitz(
        self,
        row_bound: float,
        settings: _Settings,
        taken: list[_DataBound],
        target: np.ndarray,
        bounds: dict[str, Any],
    ) -> float:
        """``L`` with ``|f(u, z) - f(v, z)| <= L ||u - v||`` on the domain for every example
        whose (augmented) row norm is at most ``row_bound`` (a subclass that needs more
        bounds records them in ``bounds`` and any taken from the data in ``taken``)."""
        return self._gradient_factor() * row_bound

    def _loss(self, score: cp.Expression, label: cp.Parameter) -> cp.Expression:
        raise NotImplementedError  # pragma: no cover

    def _fit_private(
        self,
        settings: _Settings,
        X: np.ndarray,
        target: np.ndarray,
        taken: list[_DataBound],
        weights: np.ndarray | None = None,
    ) -> None:
        """Clip, build the problem and the mechanism from public bounds, report every bound
        taken from the data (warn or raise: nothing is spent before that), then release.
        ``weights``: the per-example class weights (classifier with ``class_weight``)."""
        plan = self._plan_private(settings, X, target, taken)
        self._report(taken, settings.strict)
        result = self._problem(plan, target, weights).solve_private(
            plan.mechanism,
            epsilon=settings.epsilon,
            delta=settings.delta,
            rng=self.random_state,
            accountant=self.accountant,
        )
        released = np.asarray(result.w, float)
        d, s = plan.n_features, plan.intercept_scaling
        self._set_coefficients(
            released[:d], float(released[d] * s) if settings.fit_intercept else 0.0
        )
        self.result_ = result
        self.certificates_ = result.certificates
        self.ledger_ = result.ledger
        if plan.bounds.get("regularization_grid") is not None:
            plan.bounds["regularization"] = float(result.detail["selected_regularization"])
        self.bounds_ = plan.bounds
        self.data_dependent_bounds_ = tuple(b.name for b in taken)

    def _problem(
        self, plan: _Plan, target: np.ndarray, weights: np.ndarray | None = None
    ) -> Problem:
        """The ERM problem of the plan's (clipped, augmented) rows with these targets
        (``weights``: the classifier's per-example class weights; None for the others)."""
        if weights is not None:  # pragma: no cover - only the classifier takes weights
            raise NotImplementedError
        p = plan.rows.shape[1]
        w = cp.Variable(p)
        x = cp.Parameter(p)
        label = cp.Parameter()
        return Problem(
            self._loss(x @ w, label),
            w,
            data={x: plan.rows, label: target},
            domain=domains.l2_ball(w, plan.domain_radius),
        )

    def _plan_private(
        self,
        settings: _Settings,
        X: np.ndarray,
        target: np.ndarray,
        taken: list[_DataBound],
        *,
        blocks: int = 1,
    ) -> _Plan:
        """Clip the rows and build the mechanism from public bounds (and any bound taken from
        the data, recorded in ``taken``); nothing is reported or spent here. ``blocks``: the
        model has that many coefficient blocks of the augmented row's length (the released
        dimension, which the automatic ``lam`` and the selection grid need, is
        ``blocks * p``)."""
        n, d = X.shape
        norms = np.linalg.norm(X, axis=1)
        bound = settings.feature_norm_bound
        recipe = None
        if (
            bound is None
            and settings.mechanism == "output_perturbation"
            and settings.feature_moment is not None
        ):
            # heavy-tailed features with public moment bounds: clip at dpcvx's public rule
            recipe = heavy_tailed_clipping(
                n=n,
                d=(d + int(settings.fit_intercept)) * blocks,
                epsilon=settings.epsilon,
                k=settings.moment_order,
                moment=settings.feature_moment,
                second_moment=settings.feature_second_moment,
            )
            bound = recipe.C
        if bound is None and settings.mechanism == "output_perturbation":
            bound = float(norms.max()) or 1.0  # any positive bound holds for all-zero rows
            taken.append(
                _DataBound(
                    "feature_norm_bound",
                    "the largest row norm of X",
                    "Pass feature_norm_bound=B chosen without looking at the data (rows longer "
                    "than B are clipped; for standardized features about sqrt(n_features)), or "
                    "use mechanism='ldop' with public moment bounds.",
                )
            )
        if bound is not None:
            limit = bound * (1.0 - _CLIP_MARGIN)
            with np.errstate(divide="ignore", invalid="ignore"):
                factor = np.where(norms > limit, limit / norms, 1.0)
            X = X * factor[:, None]
        s = settings.intercept_scaling if settings.fit_intercept else 0.0
        if settings.fit_intercept:
            X = np.hstack([X, np.full((n, 1), s)])
        p = X.shape[1] * blocks  # the released dimension
        R = settings.domain_radius

        bounds: dict[str, Any] = {
            "feature_norm_bound": bound,
            "domain_radius": R,
            "intercept_scaling": s if settings.fit_intercept else None,
        }
        if hasattr(self, "label_bound"):
            bounds["label_bound"] = settings.label_bound
        if settings.mechanism == "output_perturbation":
            assert bound is not None  # set above for output perturbation
            row_bound = math.nextafter(math.hypot(bound, s), math.inf)
            L = math.nextafter(
                self._lipschitz(row_bound, settings, taken, target, bounds), math.inf
            )
            lam = settings.regularization
            if recipe is not None:
                bounds.update(heavy_tailed_clipping=recipe.C)
            if lam is None and recipe is not None:  # paper 002 Prop 4.3 (population risk)
                lam = choose_regularization(
                    L, R, n, p, settings.epsilon, settings.delta, task="sco"
                )[0]
            if lam is None:
                options = settings.options
                unit = calibrate(
                    1.0,
                    settings.epsilon,
                    settings.delta,
                    gaussian=options.get("gaussian", "analytic"),
                )
                per_unit = unit.scale * (p if settings.delta == 0 else math.sqrt(p))
                lam = 2.0 * L * math.sqrt(per_unit / n) / R
            mech: Mechanism = OutputPerturbation(
                lipschitz=L, regularization=lam, **settings.options
            )
            bounds.update(lipschitz=L, regularization=lam)
            if settings.regularization_grid is not None:
                mech, grid = self._selection(settings, L, R, n, p, bounds)
                bounds.update(regularization=None, regularization_grid=grid)
        else:
            k = settings.moment_order
            g_k, g_2 = settings.feature_moment, settings.feature_second_moment
            if g_k is None and bound is not None:
                g_k = g_2 = bound  # clipped rows: every moment is at most B
            elif g_k is None:
                g_k = float(np.mean(norms**k) ** (1.0 / k)) or 1.0
                g_2 = min(g_k, float(np.sqrt(np.mean(norms**2))) or 1.0)
                taken.append(
                    _DataBound(
                        "feature_moment",
                        f"the empirical moments (mean ||x||^{k:g})^(1/{k:g}) "
                        "and (mean ||x||^2)^(1/2) of the row norms of X",
                        "Pass feature_moment (and feature_second_moment) from public knowledge "
                        "of the feature distribution, or feature_norm_bound to clip the rows.",
                    )
                )
            c = self._gradient_factor()
            # Minkowski: (E ||(x, s)||^j)^(1/j) <= (E ||x||^j)^(1/j) + s
            moment = c * (g_k + s)
            second = None if g_2 is None else c * (g_2 + s)
            kwargs = dict(settings.options)
            if settings.regularization is not None:
                kwargs["base_regularization"] = settings.regularization
            mech = LocalizedDoubleOutputPerturbation(
                k=k, moment=moment, second_moment=second, **kwargs
            )
            bounds.update(
                moment_order=k,
                feature_moment=g_k,
                feature_second_moment=g_2,
                gradient_moment=moment,
                gradient_second_moment=second,
                regularization=settings.regularization,
            )
        return _Plan(
            rows=X,
            mechanism=mech,
            bounds=bounds,
            n_features=d,
            intercept_scaling=s,
            domain_radius=R,
        )

    def _selection(
        self, settings: _Settings, L: float, R: float, n: int, p: int, bounds: dict[str, Any]
    ) -> tuple[Mechanism, tuple[float, ...]]:
        """:class:`~dpcvx.PrivateSelection` over the grid of ``lam`` (every entry with the
        extension's ``C = L``), scored by the mean validation loss clipped to ``[0, f_0 + L R]``
        (``f_0`` the largest loss at ``w = 0`` over the public labels: every loss here is
        nonnegative and ``L``-Lipschitz on the ball of radius ``R``). ``"select"``: the
        automatic ``lam`` of one candidate (``epsilon / 3``, ``n_train`` rows) times
        :data:`SELECTION_FACTORS`. All public."""
        grid = settings.regularization_grid
        fraction = SELECTION_VALIDATION
        if grid == "select":
            n_train = n - max(1, math.floor(fraction * n))
            unit = calibrate(1.0, settings.epsilon / 3.0, 0.0)
            base = 2.0 * L * math.sqrt(unit.scale * p / max(n_train, 1)) / R
            grid = tuple(base * f for f in SELECTION_FACTORS)
        assert isinstance(grid, tuple)
        f0 = self._largest_loss_at_zero(settings)
        upper = math.nextafter(f0 + L * R, math.inf)
        bounds.update(selection_loss_bounds=(0.0, upper))
        mech = PrivateSelection(
            grid=tuple((lam, L) for lam in grid),
            loss_bounds=(0.0, upper),
            validation_fraction=fraction,
        )
        return mech, grid

    def _largest_loss_at_zero(self, settings: _Settings) -> float:
        """``f_0``: the largest loss at ``w = 0`` over the public labels (public)."""
        score = cp.Constant(0.0)
        f0 = 0.0
        for value in self._public_labels(settings):
            label = cp.Parameter(value=float(value))
            f0 = max(f0, float(self._loss(score, label).value))
        return f0

    def _public_labels(self, settings: _Settings) -> tuple[float, ...]:
        """The extreme public labels (the loss at ``w = 0`` is largest at one of them)."""
        if settings.label_bound is None:
            raise InvalidParameterError(
                f"`{self._owner()}` needs a public `label_bound` to select `regularization` "
                "privately (the validation loss must have a public range)."
            )
        return (-settings.label_bound, settings.label_bound)

    def _report(self, taken: list[_DataBound], strict: bool) -> None:
        """Warn (pointing at the caller of ``fit``) or raise for every bound taken from the data."""
        owner = self._owner()
        if not taken:
            return
        if strict:
            details = " ".join(f"`{b.name}` would be {b.what}. {b.fix}" for b in taken)
            raise InvalidParameterError(
                f"`{owner}` needs public bounds that were not given: {details} "
                "(on_data_dependent_bounds='raise'; nothing was fitted and no budget was spent.)"
            )
        for b in taken:
            warnings.warn(
                f"`{b.name}` was not given, so `{owner}` took it from the data: {b.what}. The "
                "fit depends on it beyond what the privacy guarantee covers, so the result is "
                f"not differentially private with respect to it. {b.fix} "
                "(Set on_data_dependent_bounds='raise' to make this an error.)",
                PrivacyLeakWarning,
                stacklevel=4,
            )

    def _set_coefficients(self, coef: np.ndarray, intercept: float) -> None:
        raise NotImplementedError  # pragma: no cover

    # ------------------------------------------------------------------ scikit-learn plumbing
    def _decision(self, X: ArrayLike) -> np.ndarray:
        check_is_fitted(self, "result_")
        X = self._validate(X, reset=False)
        coef = np.ravel(self.coef_)
        return X @ coef + float(np.ravel(self.intercept_)[0])

    def __sklearn_clone__(self) -> Self:
        """A clone with the same parameters and the *same* accountant: every fit of every
        clone (cross-validation, grid search) is charged to the one budget. The entries of
        ``mechanism_options`` (e.g. an executor) are shared too."""
        params = self.get_params(deep=False)
        accountant = params.pop("accountant")
        options = params.pop("mechanism_options")
        fresh = {name: clone(value, safe=False) for name, value in params.items()}
        # public mechanism options (numbers, names, an executor) are shared, not deep-copied
        shared = (
            None if options is None else dict(options) if isinstance(options, Mapping) else options
        )
        return type(self)(accountant=accountant, mechanism_options=shared, **fresh)

    def __getstate__(self) -> dict[str, Any]:
        if getattr(self, "accountant", None) is not None:
            raise InvalidParameterError(
                f"A `{self._owner()}` holding an `accountant` cannot be pickled or deep-copied: "
                "the accountant is the live budget of one dataset, and a copy would not be "
                "charged. Call `set_params(accountant=None)` first (the fitted `ledger_` and "
                "`result_` stay), or `sklearn.base.clone` (which keeps the same accountant)."
            )
        state = dict(super().__getstate__())
        if "result_" in state:
            state["result_"] = _result_state(state["result_"])
            state["ledger_"] = _ledger_state(state["ledger_"])
        return state

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        state = dict(state)
        if isinstance(state.get("result_"), dict):
            state["result_"] = _result_from_state(state["result_"])
            state["ledger_"] = _ledger_from_state(state["ledger_"])
        super().__setstate__(state)


def _common_init(
    self: _PrivateLinearModel,
    *,
    epsilon: float,
    delta: float,
    mechanism: str,
    feature_norm_bound: float | None,
    domain_radius: float,
    regularization: float | str,
    fit_intercept: bool,
    intercept_scaling: float,
    moment_order: float,
    feature_moment: float | None,
    feature_second_moment: float | None,
    mechanism_options: Mapping[str, Any] | None,
    random_state: int | np.random.Generator | None,
    accountant: Accountant | None,
    on_data_dependent_bounds: str,
) -> None:
    self.epsilon = epsilon
    self.delta = delta
    self.mechanism = mechanism
    self.feature_norm_bound = feature_norm_bound
    self.domain_radius = domain_radius
    self.regularization = regularization
    self.fit_intercept = fit_intercept
    self.intercept_scaling = intercept_scaling
    self.moment_order = moment_order
    self.feature_moment = feature_moment
    self.feature_second_moment = feature_second_moment
    self.mechanism_options = mechanism_options
    self.random_state = random_state
    self.accountant = accountant
    self.on_data_dependent_bounds = on_data_dependent_bounds


# ------------------------------------------------------------------------------------------
# The classifier
# ------------------------------------------------------------------------------------------
@_document
class PrivateLinearClassifier(ClassifierMixin, _PrivateLinearModel):
    """Differentially private linear classifier (hinge or logistic loss): binary, or over
    ``K > 2`` public classes one-vs-rest or multinomial (softmax).

    Minimizes ``(1/n) sum_i loss(y_i <x_i, w>) + (lam/2) ||w||^2`` over the public ball
    ``||w|| <= domain_radius`` with labels encoded as ``-1`` (``classes_[0]``) and ``+1``
    (``classes_[1]``), and releases the minimizer privately. With ``K > 2`` public
    ``classes`` it fits ``K`` such binary problems (class ``k`` against the rest), each at
    ``epsilon / K``: see Notes for the cost. With ``multi_class="multinomial"`` it instead
    releases one ``K x p`` weight matrix ``W`` (rows ``w_k``) minimizing the softmax
    cross-entropy ``(1/n) sum_i [log sum_k exp(<x_i, w_k>) - <x_i, w_{y_i}>]
    + (lam/2) ||W||_F^2`` over ``||W||_F <= domain_radius``, at the full ``epsilon``.

    Parameters
    ----------
    loss : {"auto", "logistic", "hinge"}, default="auto"
        ``log(1 + exp(-y <x, w>))`` or ``max(0, 1 - y <x, w>)``. Both are
        ``||x||``-Lipschitz in ``w`` whatever the label, so ``L = sqrt(B^2 + s^2)`` on rows
        clipped to ``B`` (``s`` the intercept feature). ``"auto"`` decides from public
        quantities only (the given classes, ``multi_class``, ``class_weight`` and the number
        of features ``d``): the logistic loss for two classes and whenever ``multi_class`` is
        given; with ``K > 2`` classes and ``multi_class="auto"``, the multinomial logistic
        model when ``K > d`` and one-vs-rest with the hinge loss otherwise (and with class
        weights, which the multinomial model does not take).
        The rule was chosen on public synthetic data (Gaussian classes, ``n`` from 150 to
        1500, ``d`` 4 to 64, ``K`` 3 to 10, epsilon 0.5 to 5; ``python
        benchmarks/bench_multiclass.py``): one-vs-rest cannot separate many classes in few
        dimensions, and elsewhere the hinge loss's larger gradient near ``w = 0`` (twice the
        logistic loss's at the same ``L``) carries more signal through the same noise.
        ``loss_`` is the loss fitted; ``predict_proba`` needs the logistic one.
    classes : array-like of labels, optional
        The public label set (sorted into ``classes_``): two labels for a binary fit, ``K > 2``
        for one-vs-rest. Every label in ``y`` must be one of them, and a sample in which some
        classes do not occur (even a single class) still fits. When None, the labels are
        taken from ``y`` with a :class:`~dpcvx.errors.PrivacyLeakWarning`: which labels occur
        is a fact about the data that the guarantee does not cover (a fit on data with one
        class fails, on its neighbor it does not). Only two classes are ever taken from the
        data: a one-vs-rest or multinomial fit needs its ``K`` labels given here.
    multi_class : {"auto", "ovr", "multinomial"}, default="auto"
        How ``K > 2`` classes are fitted. ``"auto"``: ``"multinomial"`` when the loss
        (``loss="auto"`` resolved) is the logistic one with ``K > 2`` public classes (more
        accurate than one-vs-rest logistic at every epsilon measured, see
        ``docs/estimators.md``), ``"ovr"`` for the hinge loss, the binary fit for two
        classes. ``"ovr"``: ``K`` binary problems (class ``k`` against the rest), each at
        ``epsilon / K``. ``"multinomial"``: one release of the
        softmax (multinomial logistic) model, ``loss="logistic"`` only; with two classes it
        is released in scikit-learn's binary form ``coef_ = w_1 - w_0`` (shape
        ``(1, n_features)``). See Notes.
    class_weight : dict or None, default=None
        Public per-class weights ``{label: weight}``: example ``i`` enters the objective as
        ``c_{y_i} loss_i`` (weights positive and finite, keys among ``classes``; a label not
        listed has weight 1, as in scikit-learn). They are public constants, never read from
        the data, and the Lipschitz bound (hence the automatic ``lam`` and the noise) is
        multiplied by the largest weight ``c_max``. One-vs-rest gives every binary problem
        the weights of the *original* labels (scikit-learn's ``LogisticRegression`` rule). Not
        supported with the multinomial model. ``"balanced"`` is refused: it reads the class
        frequencies of the private data. See Notes.
    %(common_parameters)s

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels; with two, ``classes_[1]`` is the positive class.
    loss_ : str
        The loss fitted, ``"logistic"`` or ``"hinge"`` (``loss="auto"`` resolved).
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        Coefficients of the released model (for the features as given); one row per class
        (class ``k`` against the rest) when ``n_classes > 2``.
    intercept_ : ndarray of shape (1,) or (n_classes,)
        Its intercept(s) (0 when ``fit_intercept=False``).
    %(common_attributes)s

    Notes
    -----
    Guarantee: pure epsilon-DP (``delta == 0``) or (epsilon, delta)-DP, replace-one neighbors
    with public ``n``, on every dataset, provided the public bounds are given (no
    ``PrivacyLeakWarning``). Output perturbation (paper 002, Algorithm 6, with dpcvx's
    certified solves; ``docs/output_perturbation.md``) uses the sensitivity
    ``2 L / (lam n) + 2 sqrt(2 alpha / lam)``; ``mechanism="ldop"`` is paper 000's Theorem 3.1
    with the per-example Lipschitz constant ``||(x, s)||`` and the moment bound
    ``G_k + s``.

    One-vs-rest (``K > 2`` public classes) and its cost: under replace-one neighbors one
    record may change its label, and then its target changes in *every* one of the ``K``
    binary problems (all of them contain every record). So the ``K`` releases compose, and
    the honest cost is the sum of their epsilons (basic composition). The fit therefore
    runs each binary problem at ``epsilon_k = exact_share(epsilon, K)`` (the largest float
    with ``K epsilon_k <= epsilon`` exactly; likewise ``delta_k`` for ``delta``), with the
    automatic ``lam`` and the noise of ``epsilon_k``, and records **one** ledger event of
    ``(epsilon, delta)`` for the whole fit (reserved before any of the ``K`` solves reads
    the data; its ``detail`` holds ``K``, ``epsilon_k`` and ``delta_k``). Each binary
    model thus gets the noise of a binary fit at ``epsilon_k``: for pure DP, ``K`` times the
    noise scale of a binary fit at ``epsilon`` with a fixed ``lam``, ``sqrt(K)`` times with
    ``regularization="auto"`` (whose ``lam`` grows like ``sqrt(1 / epsilon_k)``).
    ``predict_proba`` (logistic loss) normalizes the ``K`` per-class sigmoids, as
    scikit-learn's ``OneVsRestClassifier`` does. ``result_.w`` is then the ``(K, p)``
    matrix of the released points, ``result_.certificates`` the certificates of all ``K``
    releases and ``result_.detail["per_class"]`` their public facts.

    Multinomial (``multi_class="multinomial"``): ``W`` is flattened to the vector
    ``w = (w_1, ..., w_K)`` of length ``K p`` (``p`` the augmented row length, the intercept
    coordinate last in each block), and one example's loss is the CVXPY expression
    ``log_sum_exp(scores - xe @ w)`` (which equals ``log_sum_exp(scores) - xe @ w``) with
    ``scores_k = <x, w_k>`` and ``xe`` the row placed in the true class's block (zeros
    elsewhere), so ``xe @ w = <x, w_y>``. This spelling lets dpcvx verify the Lipschitz claim
    below on every example: each piece ``<x, w_k - w_y>`` has gradient norm ``sqrt(2) ||x||``
    (or 0), and a log-sum-exp's gradient is a convex combination of its pieces' gradients;
    the other spelling is bounded term by term (``2 ||x||``) and would send examples to the
    Lipschitz extension with a warning. It is one
    :class:`dpcvx.Problem` released by the same mechanism as a binary fit (one ledger event of
    ``(epsilon, delta)``). Its Lipschitz bound: the gradient in ``w`` is the outer product
    ``(q - e_y) (x) x``, block ``k`` being ``(q_k - [k = y]) x``, where ``q`` is the softmax of
    the scores. So ``||grad|| = ||q - e_y|| ||x||``, and with ``t = 1 - q_y = sum_{k != y} q_k``,
    ``||q - e_y||^2 = t^2 + sum_{k != y} q_k^2 <= t^2 + t^2 = 2 t^2 <= 2`` (the sum of squares
    of nonnegative numbers is at most the square of their sum). Hence ``L = sqrt(2)
    sqrt(B^2 + s^2)`` on rows clipped to ``B`` (rounded up; the supremum ``sqrt(2)`` is
    approached as ``q`` puts its mass on one wrong class, so the factor cannot be lowered for
    every domain). The automatic ``lam`` and the noise use the released dimension ``K p``.
    ``predict_proba`` is the softmax of ``decision_function``. Compared with one-vs-rest, the
    sensitivity grows by ``sqrt(2)`` but no split of ``epsilon`` is paid.

    Class weights (``class_weight``): a public weight ``c_k`` per class makes example ``i``'s
    loss ``c_{y_i} loss_i``, which is ``c_max L``-Lipschitz for ``c_max = max_k c_k`` (over
    ``classes_``, including the weight 1 of unlisted labels), so every rule above holds with
    ``L`` replaced by ``c_max L`` (``bounds_["lipschitz"]``; ``bounds_["class_weight"]`` and
    ``bounds_["max_class_weight"]`` record the weights). The replaced record may change its
    label and so its weight; the bound covers every weight. Spelled for dpcvx: the hinge loss
    as ``s * hinge`` with ``s`` the per-example weight (a nonnegative data parameter in front
    of a positively homogeneous loss is DPP); the logistic loss, for which ``s * logistic``
    is not DPP, as a sum over the groups ``g`` of examples sharing a (target, weight) pair:
    ``sum_g c_g logistic(-t_g <u_g, w>) - log(2) (sum_g c_g - c_{g(i)})``, where ``u_g`` is the
    row in its own group and 0 in the others. The terms of the other groups are the constants
    ``c_g log 2``, which the offset removes, so each example's loss equals
    ``c_{y_i} logistic(-t_i <x_i, w>)`` and dpcvx certifies its Lipschitz bound. In one-vs-rest
    the ``K`` binary problems share the weights of the original labels (class ``k``'s
    problem weights a "rest" example by its own class's weight), as scikit-learn's
    ``LogisticRegression`` does with a dict; liblinear's one-vs-rest (``LinearSVC``) instead
    weights only the positive class. The multinomial model takes no class weights.

    Sample weights are not supported: a weight above 1 multiplies one example's influence and
    voids the sensitivity bound.

    Examples
    --------
    >>> import numpy as np, dpcvx
    >>> from dpcvx.estimators import PrivateLinearClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); y = (X[:, 0] + X[:, 1] > 0).astype(int)
    >>> clf = PrivateLinearClassifier(epsilon=5.0, feature_norm_bound=3.0, classes=[0, 1],
    ...                               random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.8), clf.result_.epsilon, clf.result_.seeded
    (True, 5.0, True)
    """

    def __init__(
        self,
        loss: str = "auto",
        *,
        classes: ArrayLike | None = None,
        multi_class: str = "auto",
        class_weight: Mapping[Any, float] | None = None,
        epsilon: float = 1.0,
        delta: float = 0.0,
        mechanism: str = "output_perturbation",
        feature_norm_bound: float | None = None,
        domain_radius: float = 1.0,
        regularization: float | str = "auto",
        fit_intercept: bool = True,
        intercept_scaling: float = 1.0,
        moment_order: float = 4.0,
        feature_moment: float | None = None,
        feature_second_moment: float | None = None,
        mechanism_options: Mapping[str, Any] | None = None,
        random_state: int | np.random.Generator | None = None,
        accountant: Accountant | None = None,
        on_data_dependent_bounds: str = "warn",
    ) -> None:
        self.loss = loss
        self.classes = classes
        self.multi_class = multi_class
        self.class_weight = class_weight
        _common_init(
            self,
            epsilon=epsilon,
            delta=delta,
            mechanism=mechanism,
            feature_norm_bound=feature_norm_bound,
            domain_radius=domain_radius,
            regularization=regularization,
            fit_intercept=fit_intercept,
            intercept_scaling=intercept_scaling,
            moment_order=moment_order,
            feature_moment=feature_moment,
            feature_second_moment=feature_second_moment,
            mechanism_options=mechanism_options,
            random_state=random_state,
            accountant=accountant,
            on_data_dependent_bounds=on_data_dependent_bounds,
        )

    def _public_multiclass(self) -> bool:
        """Whether the public ``classes`` name more than two labels (multiclass needs them)."""
        try:
            return bool(self.classes is not None and np.unique(np.asarray(self.classes)).size > 2)
        except TypeError:  # labels that cannot be ordered together: refused in fit
            return False

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        # labels are never inferred for more than two classes (see `classes`)
        tags.classifier_tags.multi_class = self._public_multiclass()
        return tags

    def _more_tags(self) -> dict[str, bool]:  # pragma: no cover - scikit-learn < 1.6
        return {"binary_only": not self._public_multiclass()}

    def _check_loss_parameters(self, mechanism: str) -> None:
        loss = self._check_choice("loss", ("auto", "logistic", "hinge"))
        multi_class = self._check_choice("multi_class", ("auto", "ovr", "multinomial"))
        if multi_class == "multinomial" and loss == "hinge":
            raise InvalidParameterError(
                f"`{self._owner()}` with multi_class='multinomial' fits the softmax "
                f"(multinomial logistic) loss. Got loss={loss!r}: pass loss='logistic', or "
                "multi_class='ovr' for one-vs-rest with the hinge loss."
            )
        if self._validated_class_weight() is not None:
            if self._multinomial():
                raise InvalidParameterError(
                    f"`{self._owner()}` does not support `class_weight` with the multinomial "
                    "(softmax) model: a per-class weight in front of the softmax cross-entropy "
                    "has no spelling dpcvx can certify. Pass multi_class='ovr' (one-vs-rest, "
                    "logistic or hinge loss) or class_weight=None."
                )
            classes = self._validated_classes()
            if classes is not None:
                self._class_weights(classes)  # keys among the public classes

    def _validated_class_weight(self) -> dict[Any, float] | None:
        """``class_weight`` as a dict of positive finite floats (None when not given);
        refuses ``"balanced"`` and anything that is not a dict (public: no data is read)."""
        owner = self._owner()
        value = getattr(self, "class_weight", None)
        if value is None:
            return None
        if isinstance(value, str) and value == "balanced":
            raise InvalidParameterError(
                f"`{owner}` does not support class_weight='balanced': it sets the weights "
                "from the class frequencies of y, which are private (one record changes them), "
                "and the weights enter the noise through their maximum. Pass a dict of public "
                "weights instead, e.g. from public knowledge of the class proportions: "
                "class_weight={0: 1.0, 1: 5.0}. (A private variant, which would estimate the "
                "frequencies with noise from a share of epsilon and cap the weights at a public "
                "bound, is not implemented.) Nothing was spent."
            )
        if not isinstance(value, Mapping):
            raise InvalidParameterError(
                f"The `class_weight` parameter of `{owner}` must be None or a dict "
                "{class label: positive finite weight}, e.g. class_weight={0: 1.0, 1: 5.0}. "
                f"Got {type(value).__name__}: {value!r}."
            )
        weights: dict[Any, float] = {}
        for label, weight in value.items():
            weights[label] = check_positive(weight, f"class_weight[{label!r}]", owner)
        return weights

    def _class_weights(self, classes: np.ndarray) -> np.ndarray:
        """The weight of every label of ``classes`` (1 when not listed), in their order;
        refuses labels that are not among ``classes``."""
        given = self._validated_class_weight() or {}
        labels = classes.tolist()
        known = set(labels)
        unknown = [label for label in given if label not in known]
        if unknown:
            raise InvalidParameterError(
                f"The `class_weight` parameter of `{self._owner()}` names labels that are not "
                f"among the classes {labels!r}: {unknown!r}. Give weights for those classes "
                "only (a class not listed has weight 1)."
            )
        return np.array([given.get(label, 1.0) for label in labels], dtype=float)

    def _max_class_weight(self) -> float:
        """``c_max``: the largest weight over the fitted ``classes_`` (1 without weights)."""
        if getattr(self, "class_weight", None) is None:
            return 1.0
        return float(np.max(self._class_weights(np.asarray(self.classes_))))

    def _multinomial(self) -> bool:
        choice = getattr(self, "multi_class", "auto")
        if choice == "auto":  # from public parameters only: the loss and the given classes
            classes = self._validated_classes()
            return self._resolved_loss() == "logistic" and classes is not None and len(classes) > 2
        return choice == "multinomial"

    def _resolved_loss(self) -> str:
        """The loss of the fit: ``loss``, or ``loss="auto"``'s public rule (see ``loss``),
        from the public classes, ``multi_class``, ``class_weight`` and the number of features."""
        if self.loss != "auto":
            return str(self.loss)
        classes = self._validated_classes()
        choice = getattr(self, "multi_class", "auto")
        if choice != "auto" or classes is None or len(classes) <= 2:
            return "logistic"
        if getattr(self, "class_weight", None) is not None:  # the multinomial takes none
            return "hinge"
        d = getattr(self, "n_features_in_", None)
        if d is None:  # before fit: the rule needs the number of features
            return "auto"
        return "logistic" if len(classes) > int(d) else "hinge"

    def _validated_classes(self) -> np.ndarray | None:
        if self.classes is None:
            return None
        try:
            classes = np.unique(np.asarray(self.classes))
        except TypeError:  # labels of types that cannot be ordered together
            classes = np.asarray([])
        if classes.ndim != 1 or classes.size < 2:
            raise InvalidParameterError(
                f"The `classes` parameter of `{self._owner()}` must list the two public class "
                "labels, e.g. classes=[0, 1], or K > 2 of them for one-vs-rest, e.g. "
                f"classes=[0, 1, 2]. Got {self.classes!r}."
            )
        return classes

    def _gradient_factor(self) -> float:
        # multinomial: ||q - e_y|| <= sqrt(2) (class Notes); rounded up. Class weights: times
        # the largest weight (multinomial takes none); the product is rounded up by the caller
        return _SQRT2_UP if self._multinomial() else self._max_class_weight()

    def _plan_private(
        self,
        settings: _Settings,
        X: np.ndarray,
        target: np.ndarray,
        taken: list[_DataBound],
        *,
        blocks: int = 1,
    ) -> _Plan:
        plan = super()._plan_private(settings, X, target, taken, blocks=blocks)
        weights = None
        if getattr(self, "class_weight", None) is not None:
            classes = np.asarray(self.classes_)
            weights = dict(zip(classes.tolist(), self._class_weights(classes).tolist()))
        plan.bounds.update(class_weight=weights, max_class_weight=self._max_class_weight())
        return plan

    def _problem(
        self, plan: _Plan, target: np.ndarray, weights: np.ndarray | None = None
    ) -> Problem:
        """The binary problem; with class ``weights`` (one per example, public values) the
        weighted loss spelled as in the class Notes."""
        if weights is None:
            return super()._problem(plan, target)
        rows = plan.rows
        p = rows.shape[1]
        w = cp.Variable(p)
        domain = domains.l2_ball(w, plan.domain_radius)
        if self._resolved_loss() == "hinge":  # s * hinge: DPP (a positively homogeneous loss)
            x = cp.Parameter(p)
            label = cp.Parameter()
            scale = cp.Parameter(nonneg=True)
            return Problem(
                scale * self._loss(x @ w, label),
                w,
                data={x: rows, label: target, scale: weights},
                domain=domain,
            )
        # logistic: one term per (target, weight) group with public constants, the row placed
        # in its own group's slot and the other groups' constant terms c_g log 2 removed
        pairs = np.column_stack([target, weights])
        groups, member = np.unique(pairs, axis=0, return_inverse=True)
        member = np.ravel(member)
        at_zero = math.log(2.0)
        slots = [cp.Parameter(p) for _ in groups]
        offset = cp.Parameter()
        loss: cp.Expression = -offset
        for u, (t, c) in zip(slots, groups):
            loss = loss + float(c) * self._loss(u @ w, cp.Constant(float(t)))
        data: dict[cp.Parameter, np.ndarray] = {
            u: rows * (member == g)[:, None] for g, u in enumerate(slots)
        }
        data[offset] = at_zero * (float(np.sum(groups[:, 1])) - groups[member, 1])
        return Problem(loss, w, data=data, domain=domain)

    def _public_labels(self, settings: _Settings) -> tuple[float, ...]:
        return (-1.0, 1.0)  # the encoded labels

    def _largest_loss_at_zero(self, settings: _Settings) -> float:
        if self._multinomial():
            # the cross-entropy at W = 0 is log K for every label
            return math.nextafter(math.log(int(np.size(self.classes_))), math.inf)
        # a weighted example's loss at zero is its weight times the unweighted one
        unweighted = super()._largest_loss_at_zero(settings)
        if getattr(self, "class_weight", None) is None:
            return unweighted
        return math.nextafter(self._max_class_weight() * unweighted, math.inf)

    def _loss(self, score: cp.Expression, label: cp.Parameter) -> cp.Expression:
        if self._resolved_loss() == "hinge":
            return losses.hinge(score, label)
        return losses.logistic(score, label)

    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Fit the private classifier (spends ``(epsilon, delta)``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Class labels: two, or any of the ``K > 2`` public ``classes``.

        Returns
        -------
        self

        Raises
        ------
        InvalidParameterError
            A parameter is invalid, or a public bound is missing with
            ``on_data_dependent_bounds="raise"`` (nothing spent).
        DataError
            ``X`` or ``y`` is unusable: NaN, wrong shape, more than two classes without
            ``K > 2`` public ``classes``, labels outside ``classes`` (nothing spent).
        PrivacyBudgetError
            The ``accountant`` cannot afford the fit (nothing spent).
        CertificationError
            A solve could not be certified: nothing released, budget spent.
        """
        settings = self._validated_settings()
        classes = self._validated_classes()
        X_fit, y = self._validate(X, y, reset=True)
        try:
            check_classification_targets(y)
        except ValueError as exc:
            raise DataError(
                f"{exc} `{self._owner()}` needs class labels: for a continuous target use "
                "PrivateQuantileRegressor or PrivateRidgeRegressor."
            ) from exc
        kind = type_of_target(y, input_name="y")
        multiclass = classes is not None and classes.size > 2
        if kind != "binary" and not (kind == "multiclass" and multiclass):
            given = (
                "without public `classes`"
                if classes is None
                else f"with the two `classes` = {classes.tolist()!r}"
            )
            raise DataError(
                f"Only binary classification is supported {given}. The type of the target is "
                f"{kind}. `{self._owner()}` fits more than two classes (one-vs-rest or "
                "multinomial) only when all K labels are public: pass them, e.g. "
                "classes=[0, 1, 2] (they are never taken from the data)."
            )
        taken: list[_DataBound] = []
        if classes is None:
            classes = np.unique(y)
            if classes.size != 2:
                raise DataError(
                    f"`{self._owner()}` needs two classes, but y contains one class only. "
                    "Pass the public label set, e.g. classes=[0, 1]: a fit with public classes "
                    "works whichever labels occur."
                )
            taken.append(
                _DataBound(
                    "classes",
                    "the labels that occur in y (np.unique(y))",
                    "Pass classes=[negative, positive], the public label set "
                    "(e.g. classes=[0, 1]).",
                )
            )
        else:
            unknown = ~np.isin(y, classes)
            if np.any(unknown):
                raise DataError(
                    f"y contains labels outside `classes` = {classes.tolist()!r} of "
                    f"`{self._owner()}`. Map them to the "
                    f"{'two ' if classes.size == 2 else ''}public classes before fitting, or "
                    "fix `classes`."
                )
        weights = None
        if self.class_weight is not None:  # public weights, looked up by each example's label
            weights = self._class_weights(classes)[np.searchsorted(classes, y)]
        self.classes_ = classes
        self.loss_ = self._resolved_loss()
        if self._multinomial():
            self._fit_multinomial(settings, X_fit, np.asarray(y), classes, taken)
            return self
        if classes.size > 2:
            self._fit_one_vs_rest(settings, X_fit, np.asarray(y), classes, taken, weights)
            return self
        target = np.where(y == classes[1], 1.0, -1.0)
        self._fit_private(settings, X_fit, target, taken, weights)
        return self

    def _fit_multinomial(
        self,
        settings: _Settings,
        X: np.ndarray,
        y: np.ndarray,
        classes: np.ndarray,
        taken: list[_DataBound],
    ) -> None:
        """One release of the flattened ``K x p`` softmax model (class Notes): the binary
        path with ``K`` coefficient blocks and ``L = sqrt(2) sqrt(B^2 + s^2)``."""
        K = int(classes.size)
        index = np.searchsorted(classes, y)  # every label is in `classes` (checked in fit)
        plan = self._plan_private(settings, X, index.astype(float), taken, blocks=K)
        self._report(taken, settings.strict)
        result = self._multinomial_problem(plan, index, K).solve_private(
            plan.mechanism,
            epsilon=settings.epsilon,
            delta=settings.delta,
            rng=self.random_state,
            accountant=self.accountant,
        )
        p = plan.rows.shape[1]
        W = np.asarray(result.w, float).reshape(K, p)
        d, s = plan.n_features, plan.intercept_scaling
        coef = W[:, :d]
        intercept = W[:, d] * s if settings.fit_intercept else np.zeros(K)
        if K == 2:  # scikit-learn's binary form: the score of classes_[1] minus that of [0]
            coef, intercept = coef[1:] - coef[:1], intercept[1:] - intercept[:1]
        self.coef_ = coef
        self.intercept_ = intercept
        if plan.bounds.get("regularization_grid") is not None:
            plan.bounds["regularization"] = float(result.detail["selected_regularization"])
        plan.bounds["multi_class"] = "multinomial"
        self.result_ = dataclasses.replace(
            result, detail=MappingProxyType({**result.detail, "multinomial": K})
        )
        self.certificates_ = result.certificates
        self.ledger_ = result.ledger
        self.bounds_ = plan.bounds
        self.data_dependent_bounds_ = tuple(b.name for b in taken)

    @staticmethod
    def _multinomial_problem(plan: _Plan, index: np.ndarray, K: int) -> Problem:
        """The softmax cross-entropy over the flattened ``K x p`` matrix: per example
        ``log_sum_exp(scores) - xe @ w`` with ``xe`` the row in block ``y`` (DPP: both
        parameters enter affinely; the spelling is explained in the class Notes)."""
        rows = plan.rows
        n, p = rows.shape
        w = cp.Variable(K * p)
        x = cp.Parameter(p)
        xe = cp.Parameter(K * p)
        scores = cp.hstack([x @ w[k * p : (k + 1) * p] for k in range(K)])
        blocks = np.zeros((n, K, p))
        blocks[np.arange(n), index] = rows
        return Problem(
            cp.log_sum_exp(scores - xe @ w),
            w,
            data={x: rows, xe: blocks.reshape(n, K * p)},
            domain=domains.l2_ball(w, plan.domain_radius),
        )

    def _fit_one_vs_rest(
        self,
        settings: _Settings,
        X: np.ndarray,
        y: np.ndarray,
        classes: np.ndarray,
        taken: list[_DataBound],
        weights: np.ndarray | None = None,
    ) -> None:
        """``K`` binary releases (class ``k`` against the rest) at ``exact_share(epsilon, K)``
        each, charged as one event of ``(epsilon, delta)`` (basic composition: one record's
        label change touches all ``K`` problems)."""
        K = int(classes.size)
        share = exact_share(settings.epsilon, K)
        delta_share = exact_share(settings.delta, K) if settings.delta > 0 else 0.0
        per_class = dataclasses.replace(settings, epsilon=share, delta=delta_share)
        targets = [np.where(y == c, 1.0, -1.0) for c in classes]
        plan = self._plan_private(per_class, X, targets[0], taken)
        self._report(taken, settings.strict)
        # before any spend; every problem weights an example by its original label's weight
        problems = [self._problem(plan, target, weights) for target in targets]
        n = X.shape[0]
        event = PrivacyEvent(
            label=(
                f"{self._owner()} one-vs-rest: {K} x {type(plan.mechanism).__name__}"
                f"(n={n}, d={plan.rows.shape[1]}) at epsilon/{K}"
            ),
            epsilon=settings.epsilon,
            delta=settings.delta,
            kind="pure" if settings.delta == 0 else "approx",
            detail={
                "composition": "basic, over the K one-vs-rest releases",
                "classes": K,
                "per_class_epsilon": share,
                "per_class_delta": delta_share,
            },
        )
        budget = (
            self.accountant
            if self.accountant is not None
            else Accountant(settings.epsilon, settings.delta)
        )
        # independent noise for every class: one generator drawn from in turn (None: a fresh
        # OS-random generator per release)
        rng = None if self.random_state is None else make_rng(self.random_state)[0]
        results = []
        for k, problem in enumerate(problems):
            # the first release reserves the fit's one event in `budget` once it has validated
            # and planned itself, before it reads the data; every release also checks its own
            # events against its share on a scratch budget
            scratch = (
                _ChargeFirst(share, delta_share, charge=budget, event=event)
                if k == 0
                else Accountant(share, delta_share)
            )
            results.append(
                problem.solve_private(
                    plan.mechanism, epsilon=share, delta=delta_share, rng=rng, accountant=scratch
                )
            )
        released = np.vstack([np.asarray(r.w, float) for r in results])
        d, s = plan.n_features, plan.intercept_scaling
        self.coef_ = released[:, :d]
        self.intercept_ = released[:, d] * s if settings.fit_intercept else np.zeros(K)
        detail: dict[str, Any] = {
            "one_vs_rest": K,
            "per_class_epsilon": share,
            "per_class_delta": delta_share,
            "per_class": tuple(MappingProxyType(dict(r.detail)) for r in results),
        }
        if "noise_scale" in results[0].detail:  # the same public plan for every class
            detail["noise_scale"] = results[0].detail["noise_scale"]
        self.result_ = PrivateResult(
            w=released,
            epsilon=settings.epsilon,
            delta=settings.delta,
            certificates=tuple(c for r in results for c in r.certificates),
            ledger=budget.ledger,
            seeded=results[0].seeded,
            mechanism=f"one-vs-rest[{K} x {results[0].mechanism}]",
            detail=MappingProxyType(detail),
            neighbors=results[0].neighbors,
        )
        self.certificates_ = self.result_.certificates
        self.ledger_ = self.result_.ledger
        self.bounds_ = plan.bounds
        self.data_dependent_bounds_ = tuple(b.name for b in taken)

    def _set_coefficients(self, coef: np.ndarray, intercept: float) -> None:
        self.coef_ = coef.reshape(1, -1)
        self.intercept_ = np.array([intercept])

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """Signed score ``X @ coef_[0] + intercept_[0]`` (positive: ``classes_[1]``), of
        shape (n_samples,); with ``K > 2`` classes the per-class scores
        ``X @ coef_.T + intercept_``, of shape (n_samples, K)."""
        check_is_fitted(self, "result_")
        if np.ndim(self.coef_) == 2 and np.shape(self.coef_)[0] > 1:
            X = self._validate(X, reset=False)
            return X @ np.asarray(self.coef_).T + np.asarray(self.intercept_)
        return self._decision(X)

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Predicted class labels (``K > 2`` classes: the class of the largest score)."""
        scores = self.decision_function(X)
        if scores.ndim == 2:
            return self.classes_[np.argmax(scores, axis=1)]
        return self.classes_[(scores > 0).astype(int)]

    def _has_probabilities(self) -> bool:
        # a fitted model answers for the loss it was fitted with, whatever the parameters now
        loss = getattr(self, "loss_", None) or self._resolved_loss()
        if loss in ("logistic", "auto"):
            return True
        # the reason, chained to scikit-learn's AttributeError (hasattr stays False)
        if self.loss != "auto":
            why = "the hinge loss has no probabilities (refit after changing `loss`)"
        elif getattr(self, "class_weight", None) is not None:
            why = 'loss="auto" fitted one-vs-rest with the hinge loss (class weights given)'
        else:
            why = 'loss="auto" fitted one-vs-rest with the hinge loss (K <= n_features classes)'
        raise AttributeError(
            f"predict_proba needs the logistic loss: {why}. Pass loss='logistic' (with K > 2 "
            "classes: the multinomial model, or multi_class='ovr') to get probabilities."
        )

    def _softmax_model(self) -> bool:
        """Whether the fitted model is a multinomial one with ``K > 2`` score columns."""
        return int(self.result_.detail.get("multinomial", 0)) > 2

    @available_if(_has_probabilities)
    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class probabilities of the logistic model (``loss="logistic"`` only): columns in
        the order of ``classes_``. Binary (also multinomial with two classes): the sigmoid of
        the score. Multinomial: the softmax of the ``K`` scores. One-vs-rest: the ``K``
        per-class sigmoids normalized to sum to 1 (as scikit-learn's OneVsRestClassifier)."""
        scores = self.decision_function(X)
        if scores.ndim == 2 and self._softmax_model():
            return softmax(scores, axis=1)
        if scores.ndim == 2:
            return np.exp(self._log_proba_one_vs_rest(scores))
        p = expit(scores)
        return np.column_stack([1.0 - p, p])

    @available_if(_has_probabilities)
    def predict_log_proba(self, X: ArrayLike) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`."""
        scores = self.decision_function(X)
        if scores.ndim == 2 and self._softmax_model():
            return log_softmax(scores, axis=1)
        if scores.ndim == 2:
            return self._log_proba_one_vs_rest(scores)
        return np.column_stack([-np.logaddexp(0.0, scores), -np.logaddexp(0.0, -scores)])

    @staticmethod
    def _log_proba_one_vs_rest(scores: np.ndarray) -> np.ndarray:
        """``log(sigmoid(s_k) / sum_j sigmoid(s_j))``, computed in log space."""
        log_sigmoid = -np.logaddexp(0.0, -scores)
        return log_sigmoid - logsumexp(log_sigmoid, axis=1, keepdims=True)


class _ChargeFirst(Accountant):
    """The scratch budget ``(share, delta_share)`` of the first binary release of a
    one-vs-rest fit. Its first reservation (made by the pipeline after that release has been
    validated and planned, before the data is read) first records the fit's one ``event`` in
    the accountant ``charge`` (all or nothing: if that raises, nothing is recorded anywhere
    and nothing is released)."""

    __slots__ = ("_charge", "_charged", "_event")

    def __init__(
        self, epsilon: float, delta: float, *, charge: Accountant, event: PrivacyEvent
    ) -> None:
        super().__init__(epsilon, delta)
        self._charge = charge
        self._event = event
        self._charged = False

    def _charge_once(self) -> None:
        if not self._charged:
            self._charge.reserve(self._event)
            self._charged = True

    def reserve(self, event: PrivacyEvent) -> None:
        self._charge_once()
        super().reserve(event)

    def reserve_all(self, events: Iterable[PrivacyEvent]) -> None:
        self._charge_once()
        super().reserve_all(events)


# ------------------------------------------------------------------------------------------
# The regressors
# ------------------------------------------------------------------------------------------
class _PrivateRegressor(RegressorMixin, _PrivateLinearModel):
    """Fit and predict of the private linear regressors."""

    def _labels_needed(self, settings: _Settings) -> bool:
        """Whether the Lipschitz bound needs ``label_bound`` (the squared loss)."""
        return False

    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Fit the private regressor (spends ``(epsilon, delta)``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Targets; clipped to ``[-label_bound, label_bound]`` when ``label_bound`` is given
            and to ``label_range`` when that is given.

        Returns
        -------
        self

        Raises
        ------
        InvalidParameterError
            A parameter is invalid, or a public bound is missing with
            ``on_data_dependent_bounds="raise"`` (nothing spent).
        DataError
            ``X`` or ``y`` is unusable (NaN, wrong shape; nothing spent).
        PrivacyBudgetError
            The ``accountant`` cannot afford the fit (nothing spent).
        CertificationError
            A solve could not be certified: nothing released, budget spent.
        """
        settings = self._validated_settings()
        X_fit, y_fit = self._validate(X, y, reset=True, y_numeric=True)
        target = np.asarray(y_fit, dtype=float)
        taken: list[_DataBound] = []
        if settings.label_bound is not None:
            target = np.clip(target, -settings.label_bound, settings.label_bound)
        if settings.label_range is not None:
            target = np.clip(target, *settings.label_range)
        if settings.mechanism == "ssp":
            self._fit_ssp(settings, X_fit, target, taken)
        else:
            self._fit_private(settings, X_fit, target, taken)
        if settings.mechanism != "ssp":
            self.bounds_["label_range"] = settings.label_range
        return self

    def _fit_ssp(
        self, settings: _Settings, X: np.ndarray, target: np.ndarray, taken: list[_DataBound]
    ) -> None:
        """Sufficient-statistics perturbation (:class:`~dpcvx.SufficientStatisticsPerturbation`)
        of the rows ``[x | y]`` on an array source (the mechanism clips the rows and labels)."""
        n, d = X.shape
        bound = settings.feature_norm_bound
        if bound is None:
            bound = float(np.linalg.norm(X, axis=1).max()) or 1.0
            taken.append(
                _DataBound(
                    "feature_norm_bound",
                    "the largest row norm of X",
                    "Pass feature_norm_bound=B chosen without looking at the data (rows longer "
                    "than B are clipped; for standardized features about sqrt(n_features)).",
                )
            )
        label_range = settings.label_range
        if label_range is None and settings.label_bound is not None:
            label_range = (-settings.label_bound, settings.label_bound)
        if label_range is None:
            lo, hi = (float(target.min()), float(target.max())) if target.size else (0.0, 0.0)
            label_range = (lo, hi) if hi > lo else (lo - 1.0, lo + 1.0)
            taken.append(
                _DataBound(
                    "label_range",
                    "the smallest and largest y",
                    "Pass label_range=(lo, hi) chosen without looking at the data (targets are "
                    "clipped to it and so are the predictions).",
                )
            )
        lam = settings.regularization
        # the estimators' objective is mean loss + (lam/2) ||w||^2; SSP's is MSE + lambda ||w||^2
        mech = SufficientStatisticsPerturbation(
            feature_norm_bound=bound,
            label_range=label_range,
            fit_intercept=settings.fit_intercept,
            intercept_scaling=settings.intercept_scaling,
            regularization=None if lam is None else lam / 2.0,
            **settings.options,
        )
        self._report(taken, settings.strict)
        result = ArraySource(np.column_stack([X, target]), self._owner()).solve_private(
            mech,
            epsilon=settings.epsilon,
            delta=0.0,
            rng=self.random_state,
            accountant=self.accountant,
        )
        released = np.asarray(result.w, float)
        self._set_coefficients(released[:d], float(released[d]) if settings.fit_intercept else 0.0)
        self.result_ = result
        self.certificates_ = result.certificates
        self.ledger_ = result.ledger
        self.bounds_ = {
            "feature_norm_bound": bound,
            "label_range": label_range,
            "intercept_scaling": settings.intercept_scaling if settings.fit_intercept else None,
            "regularization": 2.0 * float(result.detail["regularization"]),
            "ridge": result.detail["ridge"],
        }
        self.data_dependent_bounds_ = tuple(b.name for b in taken)

    def _set_coefficients(self, coef: np.ndarray, intercept: float) -> None:
        self.coef_ = coef
        self.intercept_ = intercept

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Predictions ``X @ coef_ + intercept_``, clipped to ``label_range`` when it was given
        (post-processing of the release: no privacy cost)."""
        out = self._decision(X)
        label_range = getattr(self, "bounds_", {}).get("label_range")
        if label_range is not None:
            out = np.clip(out, *label_range)
        return out


@_document
class PrivateQuantileRegressor(_PrivateRegressor):
    """Differentially private linear quantile regression; least absolute deviation (LAD) is
    ``quantile=0.5``.

    Minimizes ``(1/n) sum_i rho_tau(y_i - <x_i, w>) + (lam/2) ||w||^2`` over the public ball
    ``||w|| <= domain_radius``, with the pinball loss
    ``rho_tau(r) = tau max(r, 0) + (1 - tau) max(-r, 0)`` (at ``tau = 0.5``, half the absolute
    loss: the LAD fit), and releases the minimizer privately.

    Parameters
    ----------
    quantile : float, default=0.5
        ``tau`` in ``(0, 1)``: the conditional quantile to estimate.
    label_bound : float, optional
        ``Y``: targets are clipped to ``[-Y, Y]`` before the fit. Not needed for privacy (the
        pinball loss is ``max(tau, 1 - tau) ||x||``-Lipschitz in ``w`` whatever the target),
        so None (no clipping) issues no warning; a public bound keeps every loss of order
        ``Y + R sqrt(B^2 + s^2)``, which keeps the certified solves well conditioned.
    label_range : tuple of float, optional
        ``(lo, hi)``: a public range of the target. Targets are clipped to it before the fit
        and **predictions are clipped to it** (post-processing: no privacy cost). None (the
        default) keeps predictions unclipped. See ``docs/regression.md``.
    %(common_parameters)s

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        Coefficients of the released model (for the features as given).
    intercept_ : float
        Its intercept (0.0 when ``fit_intercept=False``).
    %(common_attributes)s

    Notes
    -----
    Guarantee: pure epsilon-DP (``delta == 0``) or (epsilon, delta)-DP, replace-one neighbors
    with public ``n``, on every dataset, provided the public bounds are given (no
    ``PrivacyLeakWarning``). With output perturbation (paper 002, Algorithm 6) the Lipschitz
    bound is ``L = max(tau, 1 - tau) sqrt(B^2 + s^2)`` and the sensitivity
    ``2 L / (lam n) + 2 sqrt(2 alpha / lam)``; ``mechanism="ldop"`` (paper 000, Theorem 3.1)
    uses the moment bound ``max(tau, 1 - tau) (G_k + s)``. The targets need no bound: a
    heavy-tailed ``y`` changes neither the sensitivity nor the noise. The targets must be on
    a scale the domain can reach (``|prediction| <= R sqrt(B^2 + s^2)``): rescale them with
    public constants. Sample weights are not supported (they would void the sensitivity
    bound).

    Examples
    --------
    >>> import numpy as np
    >>> from dpcvx.estimators import PrivateQuantileRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = X @ [1.0, -0.5] + rng.standard_t(2, size=300)
    >>> lad = PrivateQuantileRegressor(epsilon=10.0, feature_norm_bound=3.0,
    ...                                random_state=0).fit(X, y)
    >>> lad.coef_.shape, lad.data_dependent_bounds_
    ((2,), ())
    """

    def __init__(
        self,
        quantile: float = 0.5,
        *,
        label_bound: float | None = None,
        label_range: tuple[float, float] | None = None,
        epsilon: float = 1.0,
        delta: float = 0.0,
        mechanism: str = "output_perturbation",
        feature_norm_bound: float | None = None,
        domain_radius: float = 1.0,
        regularization: float | str = "auto",
        fit_intercept: bool = True,
        intercept_scaling: float = 1.0,
        moment_order: float = 4.0,
        feature_moment: float | None = None,
        feature_second_moment: float | None = None,
        mechanism_options: Mapping[str, Any] | None = None,
        random_state: int | np.random.Generator | None = None,
        accountant: Accountant | None = None,
        on_data_dependent_bounds: str = "warn",
    ) -> None:
        self.quantile = quantile
        self.label_bound = label_bound
        self.label_range = label_range
        _common_init(
            self,
            epsilon=epsilon,
            delta=delta,
            mechanism=mechanism,
            feature_norm_bound=feature_norm_bound,
            domain_radius=domain_radius,
            regularization=regularization,
            fit_intercept=fit_intercept,
            intercept_scaling=intercept_scaling,
            moment_order=moment_order,
            feature_moment=feature_moment,
            feature_second_moment=feature_second_moment,
            mechanism_options=mechanism_options,
            random_state=random_state,
            accountant=accountant,
            on_data_dependent_bounds=on_data_dependent_bounds,
        )

    def _check_loss_parameters(self, mechanism: str) -> None:
        tau = check_real(self.quantile, "quantile", self._owner())
        if not 0.0 < tau < 1.0:
            raise InvalidParameterError(
                f"The `quantile` parameter of `{self._owner()}` must lie in (0, 1) (0.5 is "
                f"least absolute deviation). Got {self.quantile!r}."
            )

    def _gradient_factor(self) -> float:
        tau = float(self.quantile)
        return max(tau, 1.0 - tau)

    def _loss(self, score: cp.Expression, label: cp.Parameter) -> cp.Expression:
        return losses.pinball(score, label, float(self.quantile))


@_document
class PrivateRidgeRegressor(_PrivateRegressor):
    """Differentially private l2-regularized linear regression: Huber loss (default) or
    squared loss.

    Minimizes ``(1/n) sum_i loss(<x_i, w> - y_i) + (lam/2) ||w||^2`` over the public ball
    ``||w|| <= domain_radius`` and releases the minimizer privately.

    Why Huber by default: CVXPY's Huber function (``r^2`` for ``|r| <= M``, ``2 M |r| - M^2``
    beyond) has slope at most ``2 M``, so the loss is ``2 M sqrt(B^2 + s^2)``-Lipschitz in
    ``w`` for **every** target and every ``w``: an honest public bound that needs no label
    bound, and an outlier in ``y`` can move the fit no more than any other example. The
    squared loss has gradient ``2 (<x, w> - y) x``, whose norm is bounded only on a bounded
    domain with bounded targets: ``L = 2 sqrt(B^2 + s^2) (R sqrt(B^2 + s^2) + Y)`` with the
    targets clipped to ``[-Y, Y]``. It is honest too, but it grows with ``R`` and ``Y`` (much
    more noise) and needs ``label_bound``.

    Parameters
    ----------
    loss : {"huber", "squared"}, default="huber"
        The per-example loss of the residual.
    huber_threshold : float, default=1.0
        ``M > 0`` (``loss="huber"``), in the units of ``y``: residuals beyond ``M`` count
        linearly.
    label_bound : float, optional
        ``Y``: targets are clipped to ``[-Y, Y]`` before the fit. Needed by ``loss="squared"``
        (its Lipschitz bound uses it): when None there, ``max(|lo|, |hi|)`` of
        ``label_range`` is used if given, else the largest ``|y|`` with a
        :class:`~dpcvx.errors.PrivacyLeakWarning`. Optional for ``loss="huber"``.
    label_range : tuple of float, optional
        ``(lo, hi)``: a public range of the target. Targets are clipped to it before the fit
        and **predictions are clipped to it** (post-processing: no privacy cost). None (the
        default) keeps predictions unclipped. ``mechanism="ssp"`` needs a label range: this
        one, else ``(-label_bound, label_bound)``, else the data's with a
        :class:`~dpcvx.errors.PrivacyLeakWarning`. See ``docs/regression.md``.
    %(common_parameters)s

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        Coefficients of the released model (for the features as given).
    intercept_ : float
        Its intercept (0.0 when ``fit_intercept=False``).
    %(common_attributes)s

    Notes
    -----
    Guarantee: pure epsilon-DP (``delta == 0``) or (epsilon, delta)-DP, replace-one neighbors
    with public ``n``, on every dataset, provided the public bounds are given (no
    ``PrivacyLeakWarning``). ``mechanism="ssp"`` is pure epsilon-DP with the exact
    sensitivities of :mod:`dpcvx.mechanisms.sufficient_statistics` (its ``result_.certificates``
    is empty: there is no solve to certify). Output perturbation is paper 002's Algorithm 6 with the
    Lipschitz bound above and the sensitivity ``2 L / (lam n) + 2 sqrt(2 alpha / lam)``;
    ``mechanism="ldop"`` (paper 000, Theorem 3.1, Huber loss only) uses the moment bound
    ``2 M (G_k + s)``. Sample weights are not supported (they would void the sensitivity
    bound).

    With ``mechanism="ssp"`` (this estimator only): sufficient-statistics perturbation,
    :class:`dpcvx.SufficientStatisticsPerturbation`: Laplace noise on ``X^T X``, ``X^T y``
    and the intercept's sums of the clipped rows and labels, then a ridge solve of the noisy
    normal equations. Needs ``loss="squared"`` and ``delta=0``; ``domain_radius`` is not used
    (no domain: the ridge keeps the solve stable), the intercept is not regularized, and
    ``regularization="auto"`` sets the ridge to the noise level of the Gram matrix (a float
    ``lam`` is the ``(lam/2) ||coef||^2`` of the objective). ``mechanism_options`` may set
    ``gram_fraction`` and ``intercept_fraction`` (the public budget split). It is the
    mechanism that works at small ``n`` (diabetes, n = 354: see ``docs/regression.md``).

    Examples
    --------
    >>> import numpy as np
    >>> from dpcvx.estimators import PrivateRidgeRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = X @ [1.0, -0.5] + 0.1 * rng.normal(size=300)
    >>> reg = PrivateRidgeRegressor(epsilon=10.0, feature_norm_bound=3.0,
    ...                             random_state=0).fit(X, y)
    >>> bool(reg.score(X, y) > 0.5)
    True
    """

    def __init__(
        self,
        loss: str = "huber",
        *,
        huber_threshold: float = 1.0,
        label_bound: float | None = None,
        label_range: tuple[float, float] | None = None,
        epsilon: float = 1.0,
        delta: float = 0.0,
        mechanism: str = "output_perturbation",
        feature_norm_bound: float | None = None,
        domain_radius: float = 1.0,
        regularization: float | str = "auto",
        fit_intercept: bool = True,
        intercept_scaling: float = 1.0,
        moment_order: float = 4.0,
        feature_moment: float | None = None,
        feature_second_moment: float | None = None,
        mechanism_options: Mapping[str, Any] | None = None,
        random_state: int | np.random.Generator | None = None,
        accountant: Accountant | None = None,
        on_data_dependent_bounds: str = "warn",
    ) -> None:
        self.loss = loss
        self.huber_threshold = huber_threshold
        self.label_bound = label_bound
        self.label_range = label_range
        _common_init(
            self,
            epsilon=epsilon,
            delta=delta,
            mechanism=mechanism,
            feature_norm_bound=feature_norm_bound,
            domain_radius=domain_radius,
            regularization=regularization,
            fit_intercept=fit_intercept,
            intercept_scaling=intercept_scaling,
            moment_order=moment_order,
            feature_moment=feature_moment,
            feature_second_moment=feature_second_moment,
            mechanism_options=mechanism_options,
            random_state=random_state,
            accountant=accountant,
            on_data_dependent_bounds=on_data_dependent_bounds,
        )

    _mechanisms = RIDGE_MECHANISMS

    def _check_loss_parameters(self, mechanism: str) -> None:
        loss = self._check_choice("loss", ("huber", "squared"))
        check_positive(self.huber_threshold, "huber_threshold", self._owner())
        if mechanism == "ssp" and loss != "squared":
            raise InvalidParameterError(
                f"`{self._owner()}` with mechanism='ssp' (sufficient-statistics perturbation) "
                f"fits the squared loss. Got loss={loss!r}: pass loss='squared' (or use "
                "mechanism='output_perturbation' for the Huber loss)."
            )
        if loss == "squared" and mechanism == "ldop":
            raise InvalidParameterError(
                f"`{self._owner()}` with mechanism='ldop' needs a loss whose per-example "
                "Lipschitz constant is a multiple of ||x||; the squared loss's also grows with "
                "|y| and ||w||. Use loss='huber' (or mechanism='output_perturbation')."
            )

    def _gradient_factor(self) -> float:
        return 2.0 * float(self.huber_threshold)

    def _lipschitz(
        self,
        row_bound: float,
        settings: _Settings,
        taken: list[_DataBound],
        target: np.ndarray,
        bounds: dict[str, Any],
    ) -> float:
        if self.loss == "huber":
            return self._gradient_factor() * row_bound
        Y = settings.label_bound
        if Y is None and settings.label_range is not None:
            Y = max(abs(v) for v in settings.label_range)  # the targets are clipped to it
            bounds["label_bound"] = Y
        if Y is None:
            Y = float(np.max(np.abs(target))) if target.size else 0.0
            taken.append(
                _DataBound(
                    "label_bound",
                    "the largest |y|",
                    "Pass label_bound=Y chosen without looking at the data (targets are clipped "
                    "to [-Y, Y]), or use loss='huber', which needs no label bound.",
                )
            )
            bounds["label_bound"] = Y
        # ||grad|| = 2 |<x, w> - y| ||x|| <= 2 ||x|| (R ||x|| + Y) on the ball ||w|| <= R
        return 2.0 * row_bound * (settings.domain_radius * row_bound + Y)

    def _loss(self, score: cp.Expression, label: cp.Parameter) -> cp.Expression:
        if self.loss == "squared":
            return losses.squared(score, label)
        return losses.huber(score, label, float(self.huber_threshold))
