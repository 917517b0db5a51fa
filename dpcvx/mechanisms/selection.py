"""Private hyperparameter selection: private selection from private candidates with random
stopping (Liu and Talwar, "Private selection from private candidates", STOC 2019, Section 3,
Theorem 3.4), pure epsilon-DP.

The release, every number public (fixed by the plan before any data is read)::

    split the n positions (a uniformly random permutation from the release's generator, or the
    given order) into n_val validation rows (the first n_val positions) and the n_train = n -
    n_val training rows (the rest)                        # data-independent
    epsilon_0 = exact_share(epsilon, 3)                   # 3 epsilon_0 <= epsilon exactly
    repeat:
        j  = a grid index drawn uniformly from the generator      # public randomness
        (lam_j, C_j) = grid[j]
        w  = Pi_W(w_hat_j + b)     # w_hat_j: certified minimizer over W of
                                   #   (1/n_train) sum_{i in train} f_{C_j}(w, z_i)
                                   #   + (lam_j/2) ||w - w0||^2       (gap <= alpha_j)
                                   # b: l2-Laplace, scale Delta_j / epsilon_0
        q  = -s(w) + X             # s(w) = mean over validation rows of
                                   #   clip(f(w, z_i), lo, hi); X ~ Laplace(Delta_s / epsilon_0)
        keep (j, w, q) if q beats every earlier score (the first one on ties)
        stop with probability gamma (an exact Bernoulli(gamma) coin)
    release the kept w; its grid entry and its noisy score are public facts

The candidate ``Q`` (one trial) is epsilon_0-DP under replace-one neighbors with public ``n``.
For a fixed split a replaced example lies in exactly one of the two disjoint parts (parallel
composition): in the training part it moves the certified fit by at most
``Delta_j = 2 C_j / (lam_j n_train) + 2 sqrt(2 alpha_j / lam_j)`` (rounded up; the minimizers of
``lam_j``-strongly convex objectives on the ``C_j``-Lipschitz extension move by at most
``2 C_j / (lam_j n_train)``, paper 002 Lemma B.2; the certificate adds ``sqrt(2 alpha_j / lam_j)``
on each side) and the score is the same randomized function of ``w`` on both datasets; in the
validation part the fit is identical and, for every ``w``, the score moves by at most
``Delta_s``. The extension map is per example, so neighbors stay neighbors; the projection and
the clipping are post-processing. The grid index is drawn independently of the data.

Score sensitivity (floating point included). ``s(w) = fl(fsum(c_i) / n_val)`` with
``c_i = min(max(f(w, z_i), lo), hi)`` (a NaN loss counts as ``hi``): ``fsum`` is correctly rounded,
so ``|s - (1/n_val) sum_i c_i| <= (2u + u^2) M`` with ``u = 2^-53``, ``M = max(|lo|, |hi|)``,
and ``Delta_s = (hi - lo) / n_val + 2^-50 M`` (computed in exact rational arithmetic, then
rounded up to a float: a float evaluation of ``hi - lo`` could round down) bounds the change of
the computed score. The released score is ``fl(-s + X)`` from the exact sampler.

Selection (Liu and Talwar 2019, Theorem 3.4, its pure case): if every trial is an i.i.d. run of
an epsilon_0-DP candidate ``Q`` and the loop stops after each trial with probability
``gamma in (0, 1]``, with no cap on the number of trials, the output (the best-scored candidate
and its score) is ``3 epsilon_0``-DP. The printed theorem is stated for ``(epsilon_1, delta_1)``
candidates and a loop capped at ``T = max{(1/gamma) ln(1/delta_2), 1 + 1/(e gamma)}`` trials,
giving ``(3 epsilon_1 + 3 sqrt(2 delta_1), sqrt(2 delta_1) T + delta_2)``; with pure candidates
and no cap that is ``(3 epsilon_0, 0)``, the statement used here. A self-contained proof of the
pure case (with dpcvx's tie rule) is in ``docs/selection.md``: the output density is
``gamma p(y) / ((1 - (1 - gamma) F_<(q_y)) (1 - (1 - gamma) F_<=(q_y)))`` and each of the three
factors moves by at most ``e^epsilon_0``.

The stop probability is at least ``1e-6`` (:data:`MIN_STOP_PROBABILITY`, a public
validation: the loop has no cap, so a tinier ``gamma`` would in practice never end). A cap
``T`` on the trials is not offered: truncating the loop breaks pure DP (a coupling with
the uncapped loop gives ``(3 epsilon_0, (1 + e^(3 epsilon_0)) (1 - gamma)^T)``, and the paper's
capped statement pays ``delta_2`` too). The number of trials must stay hidden (it is not part of
the release: the number of best-of-k trials is what random stopping hides; a fixed number of
trials ``k`` costs up to ``k epsilon_0``), so the release carries only the selected candidate's
certificate and no trial count; the running time is a side channel outside the guarantee, as
for the samplers. The split is drawn once per release from the generator, independently of the
data: for every fixed split the loop is the theorem's algorithm with a fixed candidate, and a
data-independent mixture of ``3 epsilon_0``-DP mechanisms is ``3 epsilon_0``-DP. The certified
solve of a grid entry is a deterministic function of the data and is computed once per release
(every trial draws fresh noise), so trials are i.i.d. runs of ``Q``.

Exactness. Noise is drawn by :mod:`dpcvx.mechanisms.sampling` (ideal l2-Laplace and Laplace,
exactly rounded). The stopping coin (:func:`stop_coin`) is an exact Bernoulli(gamma): the
sampling module has no Bernoulli sampler, so it is written here from the same 64-bit words and
128-bit first reveal as the module's uniforms, comparing the revealed dyadic interval of an
ideal uniform ``U`` with the float ``gamma`` (a dyadic rational) exactly.

Aborts. Any failure after the reservation (a certified solve that misses its target, anything
else) raises one fixed :class:`~dpcvx.CertificationError` text and keeps the budget spent, as
in :mod:`dpcvx.mechanisms.phased_user`: the text carries no data-dependent number, the abort is
an output (it can depend on the data, like any certified release's abort).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from dpcvx._validation import check_center, check_positive, check_pure_budget, check_real
from dpcvx.accounting.ledger import PrivacyEvent
from dpcvx.certification.certificate import ReleaseCertificate
from dpcvx.errors import CertificationError, InvalidParameterError
from dpcvx.mechanisms.base import (
    PER_SOLVE,
    ExtensionUse,
    Release,
    exact_share,
    noise_event,
    perturb,
    round_up,
)
from dpcvx.mechanisms.double_output_perturbation import EXTENSION_ACCURACY_FLOOR
from dpcvx.mechanisms.noise import NoiseSpec, calibrate
from dpcvx.mechanisms.output_perturbation import default_accuracy
from dpcvx.neighbors import REPLACE_ONE, NeighborRelation
from dpcvx.types import Guarantee, Sensitivity

__all__ = [
    "CandidatePlan",
    "PrivateSelection",
    "SelectionPlan",
    "score_sensitivity",
    "stop_coin",
]

#: the factor of Liu and Talwar's Theorem 3.4 (pure candidates, random stopping, no cap)
SELECTION_FACTOR = 3
#: the floating-point margin of the score's sensitivity, times ``max(|lo|, |hi|)`` (module
#: docstring: ``2 (2u + u^2)`` with ``u = 2^-53`` is below ``2^-50``)
_SCORE_FLOAT_MARGIN = 2.0**-50
#: random bits in one word drawn from the generator, and bits revealed at the first attempt
#: (the layout of :mod:`dpcvx.mechanisms.sampling`)
_WORD = 64
_FIRST_BITS = 128
#: the smallest ``stop_probability`` accepted (a public, practical limit: the number of trials
#: is geometric with mean ``1/gamma`` and cannot be capped without breaking pure DP)
MIN_STOP_PROBABILITY = 1e-6

_OWNER = "PrivateSelection"
_FAILURE = (
    "dpcvx could not certify one of the candidate solves of PrivateSelection to its accuracy "
    "target (fixed from public quantities), or a candidate run failed. Nothing was released "
    "and the whole budget stays spent. This message carries no data-dependent number, but the "
    "failure itself depends on the data: do not retry on the same data without charging the "
    "budget again. To fix: rescale the data so that losses are of order one, or remove grid "
    "entries with a very small regularization."
)


# ----------------------------------------------------------------------------- the coin
def _word_ints(rng: np.random.Generator, count: int) -> list[int]:
    """``count`` independent uniform 64-bit words as Python ints (the layout of
    :mod:`dpcvx.mechanisms.sampling`)."""
    out = rng.integers(0, 2**64, size=count, dtype=np.uint64, endpoint=False)
    return [int(x) for x in np.asarray(out, dtype=np.uint64).ravel()]


def stop_coin(probability: float, rng: np.random.Generator) -> bool:
    """An exact Bernoulli(``probability``) coin: True with probability exactly ``probability``.

    Parameters
    ----------
    probability : float
        In ``[0, 1]``; a float is a dyadic rational ``m / 2^e`` (``e <= 1074``), compared
        exactly.
    rng : numpy.random.Generator
        Source of 64-bit words.

    Returns
    -------
    bool
        ``U < probability`` for an ideal uniform ``U`` on ``(0, 1)``.

    Notes
    -----
    Words drawn: none for ``probability`` 0 or 1; otherwise two words (the first 128 bits of
    ``U``, most significant first) in one call, then one word per round while the revealed
    interval ``[k / 2^b, (k + 1) / 2^b]`` still contains ``probability``. The comparison is
    exact (integers), so ``P(True) = P(U < probability) = probability``; it ends after at most
    ``ceil((e - 128) / 64)`` extra rounds (once ``b >= e``, ``probability`` is a multiple of
    ``2^-b`` and cannot lie inside an open revealed interval).
    """
    p = check_real(probability, "probability", "stop_coin")
    if not 0.0 <= p <= 1.0:
        raise InvalidParameterError(
            f"The `probability` parameter of `stop_coin` must lie in [0, 1]. Got {probability!r}."
        )
    if p == 0.0:
        return False
    if p == 1.0:
        return True
    target = Fraction(p)
    num, den = target.numerator, target.denominator  # den = 2^e
    first = _word_ints(rng, _FIRST_BITS // _WORD)
    k, bits = 0, 0
    for word in first:
        k, bits = (k << _WORD) | word, bits + _WORD
    while True:
        # U in [k / 2^bits, (k + 1) / 2^bits]; compare both ends with num / den exactly
        if (k + 1) * den <= num << bits:
            return True  # U < p except on a null set
        if k * den >= num << bits:
            return False
        (word,) = _word_ints(rng, 1)
        k, bits = (k << _WORD) | word, bits + _WORD


def score_sensitivity(bounds: tuple[float, float], rows: int) -> float:
    """``Delta_s``: the change of the computed clipped validation score over replace-one
    neighbors, floating point included: ``(hi - lo) / rows + 2^-50 max(|lo|, |hi|)``, computed
    exactly (rationals) and rounded up to the next float (module docstring)."""
    lo, hi = bounds
    exact = (Fraction(hi) - Fraction(lo)) / rows + Fraction(_SCORE_FLOAT_MARGIN) * max(
        abs(Fraction(lo)), abs(Fraction(hi))
    )
    value = float(exact)
    if Fraction(value) < exact:
        value = math.nextafter(value, math.inf)
    return round_up(value)


def _clipped_mean(values: np.ndarray, lo: float, hi: float) -> float:
    """``fl(fsum(clip(v_i, lo, hi)) / n)`` with NaN counted as ``hi`` (per example)."""
    v = np.asarray(values, float).ravel()
    v = np.where(np.isnan(v), hi, v)
    clipped = np.minimum(np.maximum(v, lo), hi)
    return math.fsum(clipped.tolist()) / v.size


# ----------------------------------------------------------------------------- plans
@dataclass(frozen=True, slots=True, kw_only=True)
class CandidatePlan:
    """One grid entry's public numbers: its certified fit on the training rows and the noise
    of one trial (at the candidate budget ``epsilon_0``)."""

    index: int
    regularization: float  # lam_j
    C: float  # the Lipschitz extension's constant C_j
    accuracy: float  # alpha_j, the certified gap
    base_sensitivity: float  # 2 C_j / (lam_j n_train)
    sensitivity: Sensitivity  # Delta_j, rounded up
    noise: NoiseSpec  # l2-Laplace calibrated to (Delta_j, epsilon_0)


@dataclass(frozen=True, slots=True, kw_only=True)
class SelectionPlan:
    """Everything the selection uses, fixed from public quantities before any data is read."""

    guarantee: Guarantee
    candidate_epsilon: float  # epsilon_0 = exact_share(epsilon, 3)
    stop_probability: float  # gamma
    candidates: tuple[CandidatePlan, ...]
    n: int
    d: int
    validation_rows: int
    training_rows: int
    shuffle: bool
    center: np.ndarray
    loss_bounds: tuple[float, float]
    score_sensitivity: Sensitivity
    score_noise: NoiseSpec  # Laplace (d = 1) calibrated to (Delta_s, epsilon_0)
    detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    ledger_detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    @property
    def extension_C(self) -> None:
        """Every candidate gives its own ``C`` with its solve (``PER_SOLVE``)."""
        return None

    def events(self, label: str) -> tuple[PrivacyEvent, ...]:
        """One pure event at the guarantee: ``3 epsilon_0 <= epsilon`` exactly (Theorem 3.4)."""
        return noise_event(label, self.guarantee, None, self.ledger_detail)

    def facts(self) -> MappingProxyType:
        """The plan's public numbers (computed from the candidates, so a negative control's
        plan reports its own noise)."""
        c = self.candidates
        facts = dict(self.detail)
        facts.update(
            {
                "candidate_epsilon": self.candidate_epsilon,
                "stop_probability": self.stop_probability,
                "expected_trials": 1.0 / self.stop_probability,
                "grid": tuple((p.regularization, p.C) for p in c),
                "regularizations": tuple(p.regularization for p in c),
                "extension_Cs": tuple(p.C for p in c),
                "accuracies": tuple(p.accuracy for p in c),
                "base_sensitivities": tuple(p.base_sensitivity for p in c),
                "sensitivities": tuple(p.sensitivity.value for p in c),
                "noise": c[0].noise.kind,
                "noise_scales": tuple(p.noise.scale for p in c),
                "training_rows": self.training_rows,
                "validation_rows": self.validation_rows,
                "loss_bounds": self.loss_bounds,
                "score_sensitivity": self.score_sensitivity.value,
                "score_noise_scale": self.score_noise.scale,
            }
        )
        return MappingProxyType(facts)


@dataclass(frozen=True, slots=True)
class _Trial:
    index: int
    w: np.ndarray
    score: float


# ----------------------------------------------------------------------------- the mechanism
@dataclass(frozen=True, slots=True, kw_only=True)
class PrivateSelection:
    """Pure epsilon-DP hyperparameter selection: private selection from private candidates
    with random stopping (Liu and Talwar 2019, Theorem 3.4).

    Every trial draws a grid entry ``(lam, C)`` uniformly, fits it privately on the training
    rows (certified output perturbation on the ``C``-Lipschitz extension ``f_C`` with
    regularization ``lam``) and scores the fit privately on the disjoint validation rows (minus
    the mean validation loss clipped to ``loss_bounds``, plus Laplace noise); after each trial
    the loop stops with probability ``stop_probability``; the best-scored fit is released.

    Parameters
    ----------
    grid : sequence of (float, float)
        The public grid of ``(regularization, C)`` pairs: ``lam > 0`` is the regularization
        ``(lam/2) ||w - w0||^2`` and ``C > 0`` the constant of the Lipschitz extension ``f_C``
        the fit solves (the per-example gradient clip; an example whose loss dpcvx certifies
        ``C``-Lipschitz on the domain keeps its loss). Must not be chosen by looking at the
        data. Repeated entries weigh the draw.
    loss_bounds : (float, float)
        Public ``lo < hi``: every validation loss is clipped to ``[lo, hi]`` before it is
        averaged (the score's sensitivity is ``(hi - lo) / n_val``). Choose them from the loss's
        public range (e.g. ``(0, log 2 + B R)`` for the logistic loss with ``||x|| <= B`` on a
        ball of radius ``R``); a tight range gives a less noisy score.
    stop_probability : float, optional
        ``gamma`` in ``(0, 1]``: the loop stops after each trial with this probability (the
        number of trials is geometric with mean ``1/gamma``). Default ``1 / len(grid)``.
        At least ``1e-6`` (a million expected trials): the loop has no cap (a cap would break
        pure DP), so a smaller ``gamma`` is refused rather than left to run for ever.
    validation_fraction : float
        The share of rows held out for scoring, in ``(0, 1)``: ``n_val = floor(fraction n)``
        rows (at least 1, and at least 1 training row must remain). Default 0.2.
    shuffle : bool
        Draw the split from a uniformly random permutation of the rows (default); False: the
        first ``n_val`` rows validate and the rest train. Either way the split is
        data-independent.
    center : array-like, optional
        ``w0`` (public); default the center of the domain's bounding ball.
    accuracy : float, optional
        Every candidate's certified gap ``alpha`` (public). Default: the candidate's
        :func:`~dpcvx.mechanisms.output_perturbation.default_accuracy`, floored at
        ``1e-8 (1 + C D)`` as for the other extension solves.
    solver : str, optional
        The first solver of the refinement ladder.
    project : bool
        Project every noisy fit onto the domain (post-processing; default True).

    Notes
    -----
    Guarantee: pure ``epsilon``-DP under replace-one neighbors (replace-one-user on a
    :class:`~dpcvx.UserLevelProblem`) with public ``n``, on every dataset; ``delta`` must be 0.
    Liu and Talwar 2019 ("Private selection from private candidates", STOC 2019), Theorem 3.4
    with ``delta_1 = 0`` and no cap on the trials: an ``epsilon_0``-DP candidate repeated with
    random stopping is ``3 epsilon_0``-DP; dpcvx runs every candidate at
    ``epsilon_0 = exact_share(epsilon, 3)`` and records one pure event at ``epsilon``.
    Candidate: ``epsilon_0``-DP by parallel composition over the disjoint training and
    validation rows; fit sensitivity ``2 C/(lam n_train) + 2 sqrt(2 alpha/lam)`` (paper 002,
    Lemma B.2 on ``f_C``, and the certificate), score sensitivity
    ``(hi - lo)/n_val + 2^-50 max(|lo|, |hi|)`` (floating point included). The release carries
    the selected fit, its grid entry, its noisy score and its solve's public certificate, never
    the number of trials (a cap, or a revealed count, would break the guarantee; see the module
    docstring).
    """

    grid: Sequence[tuple[float, float]]
    loss_bounds: tuple[float, float]
    stop_probability: float | None = None
    validation_fraction: float = 0.2
    shuffle: bool = True
    center: Any = None
    accuracy: float | None = None
    solver: str | None = None
    project: bool = True

    requirements: ClassVar[tuple[str, ...]] = ("solver", "project", "loss_values")
    extension: ClassVar[ExtensionUse] = PER_SOLVE
    enforces_lipschitz: ClassVar[bool] = False
    neighbors: ClassVar[NeighborRelation] = REPLACE_ONE

    def __post_init__(self) -> None:
        owner = _OWNER
        object.__setattr__(self, "grid", _check_grid(self.grid))
        object.__setattr__(self, "loss_bounds", _check_bounds(self.loss_bounds))
        gamma = self.stop_probability
        if gamma is None:
            gamma = 1.0 / len(self.grid)
        gamma = check_real(gamma, "stop_probability", owner)
        if not 0.0 < gamma <= 1.0:
            raise InvalidParameterError(
                f"The `stop_probability` parameter of `{owner}` must lie in (0, 1] (gamma of "
                f"Liu and Talwar's random stopping). Got {self.stop_probability!r}."
            )
        if gamma < MIN_STOP_PROBABILITY:
            raise InvalidParameterError(
                f"The `stop_probability` parameter of `{owner}` must be at least "
                f"{MIN_STOP_PROBABILITY:g}: the number of trials is geometric with mean "
                f"1/gamma and is never capped. Got {self.stop_probability!r}. Use a larger "
                "`stop_probability` (a smaller grid needs fewer trials)."
            )
        object.__setattr__(self, "stop_probability", gamma)
        fraction = check_real(self.validation_fraction, "validation_fraction", owner)
        if not 0.0 < fraction < 1.0:
            raise InvalidParameterError(
                f"The `validation_fraction` parameter of `{owner}` must lie in (0, 1). Got "
                f"{self.validation_fraction!r}."
            )
        object.__setattr__(self, "validation_fraction", fraction)
        for name in ("shuffle", "project"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidParameterError(
                    f"The `{name}` parameter of `{owner}` must be a bool. "
                    f"Got {getattr(self, name)!r}."
                )
        if self.accuracy is not None:
            object.__setattr__(self, "accuracy", check_positive(self.accuracy, "accuracy", owner))
        object.__setattr__(self, "center", check_center(self.center, owner))

    # ------------------------------------------------------------------ public planning
    def plan(
        self,
        *,
        n: int,
        d: int,
        center: Any,
        diameter: float,
        epsilon: float,
        delta: float,
        domain: Any = None,
    ) -> SelectionPlan:
        """The split's sizes, every candidate's accuracy, sensitivity and noise, and the
        score's noise, from public quantities only. ``domain`` is not needed."""
        owner = _OWNER
        epsilon = check_pure_budget(epsilon, delta, owner)
        n_val = math.floor(self.validation_fraction * n)
        n_train = n - n_val
        if n_val < 1 or n_train < 1:
            raise InvalidParameterError(
                f"`{owner}` needs at least one validation row and one training row: "
                f"validation_fraction = {self.validation_fraction:g} of n = {n} gives "
                f"{n_val} validation rows. Change `validation_fraction` or use more data."
            )
        if center is None and self.center is None:
            raise InvalidParameterError(
                f"`{owner}` needs a data source with a domain (certified solves on a public "
                "domain), or an explicit `center`."
            )
        w0 = np.asarray(self.center if self.center is not None else center, float)
        if w0.shape != (d,):
            raise InvalidParameterError(
                f"The `center` of `{owner}` must have shape ({d},) to match the variable. "
                f"Got {w0.shape}."
            )
        D = check_positive(diameter, "diameter", owner)
        eps0 = exact_share(epsilon, SELECTION_FACTOR)
        candidates = tuple(
            self._candidate(j, lam, C, n_train, D, eps0) for j, (lam, C) in enumerate(self.grid)
        )
        score_sens = Sensitivity(value=score_sensitivity(self.loss_bounds, n_val))
        score_noise = calibrate(score_sens.value, eps0, 0.0)
        gamma = float(self.stop_probability)  # type: ignore[arg-type]
        composition = (
            f"random stopping (gamma = {gamma:g}) over {len(candidates)} grid entries, every "
            f"trial {eps0:g}-DP (parallel composition over {n_train} training and {n_val} "
            f"validation rows): 3 x {eps0:g} <= {epsilon:g} (Liu-Talwar 2019, Thm 3.4)"
        )
        detail = {
            "mechanism": _OWNER,
            "paper": "Liu and Talwar 2019 (STOC), Thm 3.4, pure candidates, no cap",
            "composition": composition,
            "score": "minus the mean validation loss clipped to loss_bounds, plus Laplace noise",
            "fit": "certified output perturbation on the Lipschitz extension f_C",
            "shuffle": self.shuffle,
        }
        ledger = {
            "paper": "Liu-Talwar 2019 Thm 3.4",
            "candidate_epsilon": eps0,
            "stop_probability": gamma,
            "grid_size": len(candidates),
            "composition": composition,
        }
        return SelectionPlan(
            guarantee=Guarantee(epsilon=epsilon, delta=0.0),
            candidate_epsilon=eps0,
            stop_probability=gamma,
            candidates=candidates,
            n=n,
            d=d,
            validation_rows=n_val,
            training_rows=n_train,
            shuffle=self.shuffle,
            center=w0.copy(),
            loss_bounds=self.loss_bounds,
            score_sensitivity=score_sens,
            score_noise=score_noise,
            detail=MappingProxyType(detail),
            ledger_detail=MappingProxyType(ledger),
        )

    def _candidate(
        self, j: int, lam: float, C: float, n_train: int, D: float, eps0: float
    ) -> CandidatePlan:
        alpha = self.accuracy
        if alpha is None:
            alpha = max(
                default_accuracy(C, lam, n_train, 1.0 + C * D),
                EXTENSION_ACCURACY_FLOOR * (1.0 + C * D),
            )
        base = 2.0 * C / (lam * n_train)
        total = round_up(base + 2.0 * math.sqrt(2.0 * alpha / lam))
        return CandidatePlan(
            index=j,
            regularization=lam,
            C=C,
            accuracy=alpha,
            base_sensitivity=base,
            sensitivity=Sensitivity(value=total),
            noise=calibrate(total, eps0, 0.0),
        )

    # ------------------------------------------------------------------ release
    def release(self, plan: SelectionPlan, context: Any, rng: np.random.Generator) -> Release:
        """Run the random-stopping loop (``context`` is the release's
        :class:`~dpcvx.mechanisms.base.DataAccess`). Returns the selected fit, the public
        certificate of its solve and public facts: its grid index, its ``(lam, C)`` and its
        noisy score (all covered by the guarantee). Any failure is one fixed
        :class:`~dpcvx.CertificationError` text."""
        try:
            return self._release(plan, context, rng)
        except Exception:  # noqa: BLE001 - nothing data-dependent may leave a private release
            raise CertificationError(_FAILURE) from None

    def _release(self, plan: SelectionPlan, context: Any, rng: np.random.Generator) -> Release:
        n, n_val = plan.n, plan.validation_rows
        order = rng.permutation(n) if plan.shuffle else np.arange(n)
        validation = np.sort(order[:n_val])
        training = np.sort(order[n_val:])
        kind = context.domain.kind
        lo, hi = plan.loss_bounds
        candidates = plan.candidates
        fits: dict[int, tuple[np.ndarray, ReleaseCertificate]] = {}
        solvers: dict[float, Any] = {}
        best: _Trial | None = None
        while True:
            j = int(rng.integers(0, len(candidates)))
            cand = candidates[j]
            if j not in fits:
                if cand.C not in solvers:
                    solvers[cand.C] = context.solver(indices=training, C=cand.C)
                fits[j] = self._fit(cand, solvers[cand.C], plan.center, kind)
            point = perturb(fits[j][0], cand.noise, rng)
            w = np.asarray(context.project(point), float) if self.project else point
            values = np.asarray(context.loss_values(w[None, :], indices=validation), float)
            score = perturb(np.array([-_clipped_mean(values, lo, hi)]), plan.score_noise, rng)
            trial = _Trial(index=j, w=w, score=float(score[0]))
            if best is None or trial.score > best.score:
                best = trial
            if stop_coin(plan.stop_probability, rng):
                break
        assert best is not None  # the loop runs at least one trial
        chosen = candidates[best.index]
        facts = {
            "selected_index": best.index,
            "selected_regularization": chosen.regularization,
            "selected_C": chosen.C,
            "selected_score": best.score,
        }
        return Release(best.w.copy(), (fits[best.index][1],), MappingProxyType(facts))

    @staticmethod
    def _fit(
        cand: CandidatePlan, solve: Any, center: np.ndarray, kind: str
    ) -> tuple[np.ndarray, ReleaseCertificate]:
        cert = solve(cand.regularization, center, cand.accuracy)
        if not cert.gap <= cand.accuracy:  # defensive: the solve contract guarantees this
            raise CertificationError("Internal: a certificate above the accuracy target.")
        public = ReleaseCertificate(
            accuracy=cand.accuracy,
            distance_bound=math.sqrt(2.0 * cand.accuracy / cand.regularization),
            regularization=cand.regularization,
            strong_convexity=0.0,
            center=np.asarray(center, float).copy(),
            domain=kind,
        )
        return np.asarray(cert.w, float), public


def _check_grid(grid: object) -> tuple[tuple[float, float], ...]:
    owner = _OWNER
    try:
        entries = [tuple(entry) for entry in grid]  # type: ignore[attr-defined]
    except TypeError:
        raise InvalidParameterError(
            f"The `grid` parameter of `{owner}` must be a sequence of (regularization, C) "
            f"pairs. Got {type(grid).__name__}: {grid!r}."
        ) from None
    if not entries:
        raise InvalidParameterError(
            f"The `grid` parameter of `{owner}` must hold at least one (regularization, C) "
            "pair. Got an empty grid."
        )
    out = []
    for entry in entries:
        if len(entry) != 2:
            raise InvalidParameterError(
                f"Every entry of the `grid` of `{owner}` must be a (regularization, C) pair. "
                f"Got {entry!r}."
            )
        lam = check_positive(entry[0], "grid regularization", owner)
        C = check_positive(entry[1], "grid C", owner)
        out.append((lam, C))
    return tuple(out)


def _check_bounds(bounds: Any) -> tuple[float, float]:
    owner = _OWNER
    try:
        pair: tuple[object, ...] = tuple(bounds)
        raw_lo, raw_hi = pair
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"The `loss_bounds` parameter of `{owner}` must be a pair (lo, hi). Got {bounds!r}."
        ) from None
    lo = check_real(raw_lo, "loss_bounds", owner)
    hi = check_real(raw_hi, "loss_bounds", owner)
    if not lo < hi:
        raise InvalidParameterError(
            f"The `loss_bounds` parameter of `{owner}` must satisfy lo < hi. Got {bounds!r}."
        )
    return lo, hi
