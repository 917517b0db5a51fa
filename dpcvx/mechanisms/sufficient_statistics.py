"""Sufficient-statistics perturbation (SSP) for linear and ridge regression, pure epsilon-DP.

Least squares needs the data only through two sums: the Gram matrix ``G = sum_i z_i z_i^T`` and
the moment vector ``b = sum_i z_i y_i`` of the (augmented) rows ``z_i``. SSP releases both with
Laplace noise and solves the regularized normal equations on the noisy sums (post-processing):
no iterative solve, no Lipschitz bound on a loss, and noise that does not grow with a
parameter domain. This is the estimator of Vu and Slavkovic (2009) and of Dwork et al.'s
"Analyze Gauss" family, in the pure-epsilon form studied by Wang (2018, "Revisiting
differentially private linear regression", Algorithm 1, SSP); dpcvx adds the exact L1
sensitivities of the upper triangle below and a floating-point-safe release.

**Data.** The mechanism runs on an array source whose rows are ``[x | y]``: the first ``d``
columns are the features, the **last column is the label** (a public column index; an
:class:`~dpcvx.ArraySource` has no separate label array). Inside the release every feature row
is clipped to the public l2 bound ``B`` (``feature_norm_bound``; rows longer than
``B (1 - 1e-10)`` are scaled to that length, so the float norm stays below ``B``) and every
label to the public range ``[lo, hi]`` (``label_range``). Clipping is a per-row map, so
neighbors stay neighbors and the guarantee holds on every dataset.

**Statistics.** Four blocks are released. The feature Gram matrix ``X^T X`` (its upper
triangle, diagonal included) and the moment vector ``X^T y``; with an intercept (the constant
column ``s``, the public ``intercept_scaling``) the label is centered at the public midpoint
``c = (lo + hi)/2``, ``y - c in [-h, h]`` with ``h = (hi - lo)/2``, and two more blocks are
released: the column sums ``s X^T 1`` and the label sum ``s 1^T (y - c)``. The last entry of
the augmented Gram matrix, ``n s^2``, is public under replace-one neighbors and kept exact.
Without an intercept the label is used as given, ``|y| <= m = max(|lo|, |hi|)``.

**Sensitivities (replace-one).** Write ``U(M)`` for the sum of the absolute values of the upper
triangle (diagonal included) of a symmetric ``M``.

- ``X^T y``: ``Delta_b = 2 h sqrt(d) B`` with an intercept, ``2 m sqrt(d) B`` without. Proof:
  ``||x y - x' y'||_1 <= ||x||_1 |y| + ||x'||_1 |y'|`` and ``||x||_1 <= sqrt(d) B``. **Exact**:
  attained by ``x = x' = (B/sqrt d) 1`` with ``y - c = h``, ``y' - c = -h`` (without
  intercept: ``x' = -x``, ``y = y' = +-m``).
- ``s X^T 1``: ``2 s sqrt(d) B`` (``s ||x - x'||_1``; **exact**, ``x' = -x``). ``s 1^T (y -
  c)``: ``2 s h`` (**exact**).
- ``X^T X``: ``U(x x^T - x' x'^T) = max_W (x^T W x - x'^T W x')`` over the symmetric sign
  patterns ``W`` (diagonal ``+-1``, off-diagonal ``+-1/2``; the maximizing ``W`` has the signs
  of the entries), and for a fixed ``W`` the supremum over the ball is attained at
  eigenvectors, so the **exact** sensitivity is ``Delta_G = B^2 max_W (max(lambda_max(W), 0)
  - min(lambda_min(W), 0))``. dpcvx enumerates the ``2^(d(d+1)/2 - 1)`` patterns for
  ``d <= 4`` (``B^2``, ``sqrt(5) B^2``, ``2.8723 B^2``, ``sqrt(13) B^2``) and above that uses
  the closed-form bound: when the eigenvalues have one sign the spread is at most the
  Gershgorin radius ``(d + 1)/2``; else ``lambda_max - lambda_min <= sqrt(2 (||W||_F^2 -
  tr(W)^2 / d))`` with ``||W||_F^2 = d + d(d - 1)/4`` and ``|tr W| >= d mod 2``, so
  ``Delta_G <= B^2 max((d + 1)/2, sqrt(2 d + d (d - 1)/2 - 2 (d mod 2)/d))``
  (``sqrt(d (d + 3)/2) B^2`` for even ``d``: within 4% of the best pair a local search finds
  for ``d <= 10``, against ``(d + 1) B^2`` from the triangle inequality).

Every sensitivity is then enlarged by twice the worst floating-point error of its computed
sums (``gamma_{n+1} = (n + 1) u / (1 - (n + 1) u)`` times ``n`` times the largest term, per
released entry, ``u = 2^-53``), so that the sums as computed, not only the exact ones, move by
at most the calibrated sensitivity; the noise is added by the exactly rounded Laplace sampler
(:func:`~dpcvx.mechanisms.base.perturb_steps`).

**Budget split (public rule).** With an intercept, a share ``g = intercept_fraction`` of
``epsilon`` goes to the intercept's two blocks (half each); the rest, ``(1 - g) epsilon``, is
split between ``X^T X`` (share ``f = gram_fraction``) and ``X^T y`` (share ``1 - f``). Without
an intercept ``epsilon`` is split by ``f`` alone. The last budget is stepped down to the next
float until the budgets add up, in exact arithmetic, to at most ``epsilon``. Each block gets
iid Laplace noise of scale ``Delta / epsilon_block`` per released entry, rounded up to the next
float. Basic composition of the Laplace mechanisms: pure ``epsilon``-DP, recorded as one
ledger event per block. The defaults (``f``, ``g``, the ridge factor) were chosen on public
synthetic data (``benchmarks/bench_diffprivlib.py``'s regression generator), never on a
user's data: ``python benchmarks/bench_diffprivlib.py --explore-ssp``; see
``docs/regression.md``.

**Post-processing (no privacy cost).** The noisy upper triangle is mirrored into a symmetric
matrix. With an intercept, the intercept is eliminated exactly (``q = n s^2`` is public):
``S = A - c c^T / q`` is the noisy Gram matrix of the centered features (``A`` the feature
block, ``c`` the noisy column sums); its eigenvalues are floored at 0 (the nearest positive
semidefinite matrix) and the public ridge ``n lambda`` is added, so the system is positive
definite; ``w_x = (S_+ + n lambda I)^{-1} (b_x - c b_s / q)`` and the intercept coordinate
``w_s = (b_s - c^T w_x) / q`` (not regularized). Without an intercept,
``w = (A_+ + n lambda I)^{-1} b``. This minimizes ``(1/n) sum_i (y_i - <z_i, w>)^2 + lambda
||w_x||^2`` for the noisy statistics. ``lambda`` (``regularization``) is public; by default
``n lambda = sqrt(d) beta_G`` with ``beta_G`` the Laplace scale of the Gram block: the
spectral norm of a symmetric ``d x d`` matrix of Laplace(``beta_G``) entries is about ``2
sqrt(2 d) beta_G``, so the ridge is of the order of the noise it has to dominate (the factor 1
was chosen on public synthetic data; the eigenvalue floor takes care of the rest).

**Release.** ``w = (coef, intercept)`` in the label's units (``intercept = s w_s + c``), or
``w = coef`` without an intercept: predictions are ``x @ coef + intercept``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from dpcvx._validation import check_positive, check_real
from dpcvx.accounting.ledger import PrivacyEvent
from dpcvx.errors import InvalidParameterError
from dpcvx.mechanisms.base import PLAIN, ExtensionUse, Release, perturb_steps, round_up
from dpcvx.neighbors import REPLACE_ONE, NeighborRelation
from dpcvx.types import Guarantee

__all__ = [
    "SSPPlan",
    "SufficientStatisticsPerturbation",
    "gram_sensitivity",
    "moment_sensitivity",
    "solve_normal_equations",
]

#: rows longer than the bound are scaled to ``bound * (1 - _CLIP_MARGIN)`` (float-safe norm)
_CLIP_MARGIN = 1e-10
#: the sign patterns are enumerated (exact sensitivity) up to this dimension
_EXACT_DIMENSION = 4
#: the unit roundoff of float64
_UNIT_ROUNDOFF = 2.0**-53
#: default ridge: ``n lambda = _AUTO_RIDGE * sqrt(d) * beta_G`` (the order of the Gram noise's
#: spectral norm; the factor was chosen on public synthetic data, docs/regression.md)
_AUTO_RIDGE = 1.0
#: the share of the intercept's budget spent on the column sums ``s X^T 1`` (the rest on the
#: label sum ``s 1^T y``)
_CROSS_SHARE = 0.5


# ------------------------------------------------------------------------------ sensitivities
def _sign_pattern_spread(d: int) -> float:
    """``max_W (max(lambda_max(W), 0) - min(lambda_min(W), 0))`` over the symmetric sign
    patterns of dimension ``d`` (diagonal +-1, off-diagonal +-1/2), by enumeration. ``W`` and
    ``-W`` give the same spread, so the first diagonal sign is fixed to +1."""
    iu = np.triu_indices(d)
    k = len(iu[0])
    best = 0.0
    for signs in itertools.product((1.0, -1.0), repeat=k - 1):
        W = np.zeros((d, d))
        W[iu] = (1.0,) + signs
        W = np.where(np.eye(d, dtype=bool), W, 0.5 * (W + W.T))
        lam = np.linalg.eigvalsh(W)
        best = max(best, max(lam[-1], 0.0) - min(lam[0], 0.0))
    return best


def _unit_gram_sensitivity(d: int) -> float:
    """``Delta_G / B^2`` for features only (see the module docstring), rounded up: exact for
    ``d <= 4``, the closed-form bound above that."""
    if d <= _EXACT_DIMENSION:
        value = _sign_pattern_spread(d) * (1.0 + 1e-12)  # covers the eigenvalues' rounding
    else:
        frob = d + d * (d - 1) / 4.0
        value = max((d + 1) / 2.0, math.sqrt(2.0 * (frob - (d % 2) / d))) * (1.0 + 1e-12)
    return round_up(value)


def gram_sensitivity(d: int, bound: float) -> float:
    """The L1 sensitivity of the upper triangle of ``X^T X`` under replace-one, for ``d``
    features with rows of l2 norm at most ``bound``: exact for ``d <= 4``, the closed-form
    bound above that (see the module docstring; before the floating-point slack)."""
    return round_up(_unit_gram_sensitivity(d) * bound * bound)


def moment_sensitivity(
    d: int, bound: float, label_range: tuple[float, float], intercept: bool
) -> float:
    """The exact L1 sensitivity of ``X^T y`` under replace-one: ``2 h sqrt(d) B`` with an
    intercept (labels centered, ``h`` the half range), ``2 m sqrt(d) B`` without
    (``m = max(|lo|, |hi|)``); before the floating-point slack."""
    lo, hi = label_range
    label = (hi - lo) / 2.0 if intercept else max(abs(lo), abs(hi))
    return round_up(2.0 * label * math.sqrt(d) * bound * (1.0 + 1e-15))


def _float_slack(n: int, entries: int, largest_term: float) -> float:
    """Twice the worst rounding error of ``entries`` computed sums of ``n`` products, each of
    magnitude at most ``largest_term`` (any summation order): ``2 entries gamma_{n+1} n T``."""
    k = (n + 1) * _UNIT_ROUNDOFF
    gamma = k / (1.0 - k)
    return round_up(2.0 * entries * gamma * n * largest_term * (1.0 + 1e-12))


# ------------------------------------------------------------------------------ solve
def solve_normal_equations(
    gram: np.ndarray, moment: np.ndarray, ridge: float, *, intercept: bool
) -> np.ndarray:
    """The post-processing of a (noisy) symmetric ``gram`` and ``moment``: the minimizer of
    ``w^T G w - 2 b^T w + ridge ||w_x||^2`` after the eigenvalues of the (centered) feature
    block are floored at 0. With ``intercept`` the last coordinate is the intercept's, whose
    diagonal entry must be positive (it is exact: ``n s^2``) and which is not regularized."""
    G = 0.5 * (np.asarray(gram, float) + np.asarray(gram, float).T)
    b = np.asarray(moment, float)
    if intercept:
        q = float(G[-1, -1])
        c = G[:-1, -1]
        S = G[:-1, :-1] - np.outer(c, c) / q
        rhs = b[:-1] - c * (b[-1] / q)
    else:
        S, rhs = G, b
    lam, V = np.linalg.eigh(0.5 * (S + S.T))
    w_x = V @ ((V.T @ rhs) / (np.maximum(lam, 0.0) + ridge))
    if not intercept:
        return w_x
    return np.append(w_x, (b[-1] - c @ w_x) / q)


# ------------------------------------------------------------------------------ plan
@dataclass(frozen=True, slots=True, kw_only=True)
class SSPPlan:
    """The public numbers of one SSP release (fixed before the data is read).

    Four released blocks, each with its L1 sensitivity, budget and Laplace scale: the feature
    Gram block ``X^T X`` (``gram_*``), the moment vector ``X^T y`` (``moment_*``) and, with an
    intercept, the column ``s X^T 1`` (``cross_*``) and the label sum ``s 1^T y`` (``offset_*``;
    the cross and offset blocks have zero budget and scale without an intercept)."""

    guarantee: Guarantee
    n: int
    features: int
    gram_sensitivity: float
    moment_sensitivity: float
    cross_sensitivity: float
    offset_sensitivity: float
    gram_epsilon: float
    moment_epsilon: float
    cross_epsilon: float
    offset_epsilon: float
    gram_scale: float
    moment_scale: float
    cross_scale: float
    offset_scale: float
    ridge: float
    regularization: float

    @property
    def extension_C(self) -> None:
        """SSP solves nothing on a loss: no Lipschitz extension."""
        return None

    def _blocks(self) -> tuple[tuple[str, float, float, float], ...]:
        blocks = (
            ("Gram matrix X^T X", self.gram_epsilon, self.gram_scale, self.gram_sensitivity),
            ("moments X^T y", self.moment_epsilon, self.moment_scale, self.moment_sensitivity),
            ("column sums s X^T 1", self.cross_epsilon, self.cross_scale, self.cross_sensitivity),
            (
                "label sum s 1^T y",
                self.offset_epsilon,
                self.offset_scale,
                self.offset_sensitivity,
            ),
        )
        return tuple(b for b in blocks if b[1] > 0.0)

    def events(self, label: str) -> tuple[PrivacyEvent, ...]:
        """One pure event per released block; they add up to at most the guarantee."""
        return tuple(
            PrivacyEvent(
                label=f"{label}: {name}",
                epsilon=eps,
                detail={"laplace_scale": scale, "l1_sensitivity": sens},
            )
            for name, eps, scale, sens in self._blocks()
        )

    def facts(self) -> Mapping[str, Any]:
        """The plan's public numbers."""
        facts: dict[str, Any] = {"noise": "laplace"}
        for key in ("gram", "moment", "cross", "offset"):
            if getattr(self, f"{key}_epsilon") > 0.0:
                facts[f"{key}_sensitivity"] = getattr(self, f"{key}_sensitivity")
                facts[f"{key}_epsilon"] = getattr(self, f"{key}_epsilon")
                facts[f"{key}_noise_scale"] = getattr(self, f"{key}_scale")
        facts.update(ridge=self.ridge, regularization=self.regularization)
        return MappingProxyType(facts)


def _split(epsilon: float, shares: tuple[float, ...]) -> tuple[float, ...]:
    """``epsilon`` split in proportion to ``shares`` (zero shares get zero), the parts adding
    up to at most ``epsilon`` in exact arithmetic (the last part is stepped down)."""
    total = math.fsum(shares)
    parts = [epsilon * (w / total) for w in shares]
    last = max(i for i, w in enumerate(shares) if w > 0)
    while sum(map(Fraction, parts), Fraction(0)) > Fraction(epsilon):
        parts[last] = math.nextafter(parts[last], 0.0)
    if any(w > 0 and not p > 0.0 for w, p in zip(shares, parts)):
        raise InvalidParameterError(
            f"`SufficientStatisticsPerturbation` cannot split epsilon = {epsilon!r} into "
            f"positive budgets in the proportions {shares}."
        )
    return tuple(parts)


# ------------------------------------------------------------------------------ mechanism
@dataclass(frozen=True, slots=True, kw_only=True)
class SufficientStatisticsPerturbation:
    """Sufficient-statistics perturbation for (ridge) linear regression, pure epsilon-DP.

    Released on an array source whose rows are ``[x | y]`` (features, then the label in the
    last column): ``dpcvx.ArraySource(np.column_stack([X, y])).solve_private(ssp,
    epsilon=...)``; ``result.w`` is ``(coef, intercept)`` (or ``coef`` without an intercept).

    Parameters
    ----------
    feature_norm_bound : float
        ``B``: public bound on the l2 norm of a feature row; longer rows are clipped.
    label_range : tuple of float
        ``(lo, hi)``, ``lo < hi``: public range of the label; labels are clipped to it.
    fit_intercept : bool, default=True
        Fit an (unregularized) intercept through the constant column ``intercept_scaling``.
    intercept_scaling : float, default=1.0
        ``s``: the constant column (it enters the sensitivities).
    regularization : float, optional
        ``lambda >= 0`` of ``lambda ||coef||^2`` next to the mean squared error (public).
        Default: ``n lambda = sqrt(d) beta_G``, of the order of the Gram noise's norm.
    gram_fraction : float, default=0.2
        ``f`` in (0, 1): the share of the features' budget spent on ``X^T X`` (the rest on
        ``X^T y``).
    intercept_fraction : float, default=0.45
        ``g`` in (0, 1), with an intercept: the share of epsilon spent on the intercept's
        sums ``s X^T 1`` and ``s 1^T y`` (half each).

    Notes
    -----
    Guarantee: pure epsilon-DP under replace-one neighbors with public ``n``, on every dataset
    (clipping is part of the mechanism). Sensitivities, budget split and post-processing: see
    :mod:`dpcvx.mechanisms.sufficient_statistics` (Vu and Slavkovic 2009; Wang 2018,
    Algorithm 1 "SSP"; the exact upper-triangle sensitivity is dpcvx's).
    """

    feature_norm_bound: float
    label_range: tuple[float, float]
    fit_intercept: bool = True
    intercept_scaling: float = 1.0
    regularization: float | None = None
    gram_fraction: float = 0.2
    intercept_fraction: float = 0.45

    owner: ClassVar[str] = "SufficientStatisticsPerturbation"
    requirements: ClassVar[tuple[str, ...]] = ("rows",)
    extension: ClassVar[ExtensionUse] = PLAIN
    enforces_lipschitz: ClassVar[bool] = False
    neighbors: ClassVar[NeighborRelation] = REPLACE_ONE

    def __post_init__(self) -> None:
        owner = self.owner
        object.__setattr__(
            self,
            "feature_norm_bound",
            check_positive(self.feature_norm_bound, "feature_norm_bound", owner),
        )
        rng = self.label_range
        if not isinstance(rng, (tuple, list, np.ndarray)) or len(rng) != 2:
            raise InvalidParameterError(
                f"The `label_range` parameter of `{owner}` must be a pair (lo, hi) of public "
                f"finite numbers with lo < hi. Got {rng!r}."
            )
        lo = check_real(rng[0], "label_range[0]", owner)
        hi = check_real(rng[1], "label_range[1]", owner)
        if not lo < hi:
            raise InvalidParameterError(
                f"The `label_range` parameter of `{owner}` must have lo < hi. Got {rng!r}."
            )
        object.__setattr__(self, "label_range", (lo, hi))
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise InvalidParameterError(
                f"The `fit_intercept` parameter of `{owner}` must be a bool. "
                f"Got {self.fit_intercept!r}."
            )
        object.__setattr__(self, "fit_intercept", bool(self.fit_intercept))
        object.__setattr__(
            self,
            "intercept_scaling",
            check_positive(self.intercept_scaling, "intercept_scaling", owner),
        )
        if self.regularization is not None:
            lam = check_real(self.regularization, "regularization", owner)
            if lam < 0:
                raise InvalidParameterError(
                    f"The `regularization` parameter of `{owner}` must be >= 0 (or None for "
                    f"the noise-level default). Got {self.regularization!r}."
                )
            object.__setattr__(self, "regularization", lam)
        f = check_real(self.gram_fraction, "gram_fraction", owner)
        if not 0.0 < f < 1.0:
            raise InvalidParameterError(
                f"The `gram_fraction` parameter of `{owner}` must lie in (0, 1). "
                f"Got {self.gram_fraction!r}."
            )
        object.__setattr__(self, "gram_fraction", f)
        g = check_real(self.intercept_fraction, "intercept_fraction", owner)
        if not 0.0 < g < 1.0:
            raise InvalidParameterError(
                f"The `intercept_fraction` parameter of `{owner}` must lie in (0, 1). "
                f"Got {self.intercept_fraction!r}."
            )
        object.__setattr__(self, "intercept_fraction", g)

    def plan(
        self,
        *,
        n: int,
        d: int,
        center: Any = None,
        diameter: float | None = None,
        epsilon: float,
        delta: float = 0.0,
        domain: Any = None,
    ) -> SSPPlan:
        """Sensitivities, budget split, noise scales and ridge, from public quantities only
        (``d`` counts the source's columns: the features and the label)."""
        owner = self.owner
        epsilon = check_positive(epsilon, "epsilon", owner)
        if delta != 0:
            raise InvalidParameterError(
                f"`{owner}` is pure epsilon-DP (Laplace noise): ask for delta = 0. "
                f"Got delta={delta!r}."
            )
        features = int(d) - 1
        if features < 1:
            raise InvalidParameterError(
                f"`{owner}` needs rows [x | y] with at least one feature column and the label "
                f"in the last column. Got {d} column(s)."
            )
        n = int(n)
        if n < 1:
            raise InvalidParameterError(f"`{owner}` needs at least one row. Got n = {n}.")
        B = self.feature_norm_bound
        lo, hi = self.label_range
        intercept = self.fit_intercept
        s = self.intercept_scaling if intercept else 0.0
        label = (hi - lo) / 2.0 if intercept else max(abs(lo), abs(hi))
        k = features
        sens = [
            round_up(gram_sensitivity(k, B) + _float_slack(n, k * (k + 1) // 2, B * B)),
            round_up(moment_sensitivity(k, B, (lo, hi), intercept) + _float_slack(n, k, B * label)),
            0.0,
            0.0,
        ]
        if intercept:
            sens[2] = round_up(
                2.0 * s * math.sqrt(k) * B * (1.0 + 1e-15) + _float_slack(n, k, s * B)
            )
            sens[3] = round_up(2.0 * s * label * (1.0 + 1e-15) + _float_slack(n, 1, s * label))
        g = self.intercept_fraction if intercept else 0.0
        f = self.gram_fraction
        shares = ((1 - g) * f, (1 - g) * (1 - f), g * _CROSS_SHARE, g * (1 - _CROSS_SHARE))
        budgets = _split(epsilon, shares)
        scales = [round_up(d_ / e_) if e_ > 0 else 0.0 for d_, e_ in zip(sens, budgets)]
        if not all(math.isfinite(v) for v in scales):
            raise InvalidParameterError(
                f"`{owner}` computed a non-finite noise scale: rescale the bounds."
            )
        if self.regularization is None:
            ridge = _AUTO_RIDGE * math.sqrt(k) * scales[0]
        else:
            ridge = n * self.regularization
        if not ridge > 0.0:
            # a zero ridge with the eigenvalue floor at 0 can leave the system singular
            ridge = math.ulp(1.0) * max(1.0, n * B * B)
        return SSPPlan(
            guarantee=Guarantee(epsilon=epsilon),
            n=n,
            features=k,
            gram_sensitivity=sens[0],
            moment_sensitivity=sens[1],
            cross_sensitivity=sens[2],
            offset_sensitivity=sens[3],
            gram_epsilon=budgets[0],
            moment_epsilon=budgets[1],
            cross_epsilon=budgets[2],
            offset_epsilon=budgets[3],
            gram_scale=scales[0],
            moment_scale=scales[1],
            cross_scale=scales[2],
            offset_scale=scales[3],
            ridge=ridge,
            regularization=ridge / n,
        )

    # ------------------------------------------------------------------ the release
    def statistics(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(G, b)``: the exact (non-private) sufficient statistics of the rows ``[x | y]``
        after clipping, with the augmented intercept column and the centered label."""
        Z = np.asarray(rows, float)
        X, y = Z[:, :-1], Z[:, -1]
        B = self.feature_norm_bound
        limit = B * (1.0 - _CLIP_MARGIN)
        norms = np.linalg.norm(X, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.where(norms > limit, limit / norms, 1.0)
        X = X * factor[:, None]
        lo, hi = self.label_range
        y = np.clip(y, lo, hi)
        if self.fit_intercept:
            X = np.hstack([X, np.full((X.shape[0], 1), self.intercept_scaling)])
            y = y - (lo + hi) / 2.0
        return X.T @ X, X.T @ y

    def release(self, plan: SSPPlan, context: Any, rng: np.random.Generator) -> Release:
        """The noisy statistics of ``context.rows()`` and their regularized solve (the budget
        is already reserved)."""
        G, b = self.statistics(context.rows())
        k = plan.features
        iu = np.triu_indices(k)
        A = np.zeros((k, k))
        A[iu] = perturb_steps(G[:k, :k][iu], "laplace", plan.gram_scale, rng)
        A = A + np.triu(A, 1).T
        b_x = perturb_steps(b[:k], "laplace", plan.moment_scale, rng)
        if not self.fit_intercept:
            w = solve_normal_equations(A, b_x, plan.ridge, intercept=False)
            return Release(w, ())
        s = self.intercept_scaling
        c = perturb_steps(G[:k, k], "laplace", plan.cross_scale, rng)
        b_s = perturb_steps(b[k:], "laplace", plan.offset_scale, rng)
        G_noisy = np.block([[A, c[:, None]], [c[None, :], np.array([[plan.n * s * s]])]])
        w = solve_normal_equations(G_noisy, np.append(b_x, b_s), plan.ridge, intercept=True)
        lo, hi = self.label_range
        return Release(np.append(w[:-1], s * w[-1] + (lo + hi) / 2.0), ())
