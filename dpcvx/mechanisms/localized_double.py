"""Localized Double Output Perturbation (paper 000, Theorem 3.1): Pop-Localize (Algorithm 1)
around Double-OutputPert (Algorithm 4) on the Lipschitz extension.

Pure epsilon-DP stochastic convex optimization for losses with only a bounded k-th moment
``G_k`` of the per-example Lipschitz constant (``E sup_w ||grad f(w, z)||^k <= G_k^k``): no
worst-case Lipschitz constant is assumed anywhere. Privacy rests on three facts, none of which
involves the data: every block's release is Double-OutputPert on ``f_{C_t}``, which is
``C_t``-Lipschitz for every possible example by construction, so it is epsilon-DP on every
dataset (its two certified solves carry dpcvx's certificates); the phases and blocks are
disjoint pieces of a data-independent partition (a uniformly random permutation drawn from the
mechanism's own generator, then contiguous ranges), so a replace-one change touches at most one
block; aggregation and projections are post-processing. Hence the whole release is epsilon-DP
by adaptive parallel composition: one ledger event ``epsilon``.

Public plan (every number below is a function of ``n, d, D, epsilon, k, G_k, G_2`` and the
mechanism's own parameters; none is ever computed from the data):

- ``T_paper = ceil(log2 n)`` phases on disjoint batches of ``n_t = floor(n / 2^t)`` examples, each
  cut into ``J`` blocks of ``m_t = floor(n_t / J)`` examples (the rest of a batch is unused).
- ``J``: the smallest ``J`` with ``P(Binomial(J, p) <= floor(J/2)) <= beta / T_paper``, so that
  with per-block success probability ``p`` (``block_success``, 0.7 by Prop 3.2) a majority of
  every phase's blocks is good except with probability ``beta`` (``failure_probability``).
  The paper only says ``J = Theta(log(T/beta))``.
- ``C_t = G_k (m_t epsilon / d)^(1/k)`` (paper 000, Section 3), ``lambda_t = 32^(t-1) lambda_1``.
- ``lambda_1 = sqrt(2 A) rbar_1 / D`` with ``A = 1152/7`` (about ``18.14 rbar_1 / D``), where
  ``rbar_1 = c_noise G_k (d/(m_1 epsilon))^(1 - 1/k) + G_2 / sqrt(m_1)`` is phase 1's error
  scale and ``c_noise`` the median norm of the stage-2 noise in units of ``C/(epsilon lambda m)``.
  The paper leaves ``lambda_1`` to its reference [ALT24]; this choice balances the two terms
  ``lambda_1 D^2 / 2`` and ``A rbar_1^2 / lambda_1`` of the telescoping bound behind Theorem 2.1
  (``docs/paper000_digest.md``, section 5.2), so the phase-1 radius is about ``D / 18``.
- The number of phases actually run is ``T_eff = min(T_paper, T_blocks, T_move)``: phases need
  ``m_t >= min_block_size``, and a phase whose reach ``C_t / lambda_t`` is below
  ``move_tolerance * D`` cannot move the point (it would only add noise and ask for certified
  gaps far below float64 resolution), so it is not run.
- Aggregation (post-processing): the block output whose distance to its
  ``(floor(J/2) + 1)``-th nearest block output (itself included) is smallest, ties to the
  smallest index. If more than half of the outputs lie within ``r`` of a point ``x*``, the
  chosen output is within ``3 r`` of ``x*`` whatever the other outputs are and whatever ``r``
  is: the rule needs no radius (the paper's "geometric aggregation" is left to [ALT24]).

The phase loop is shared (``_PhaseLoop``): :class:`PopLocalizeEMPGM` runs it with EM-PGM
(paper 000, Algorithm 5) as the block mechanism, the route of Theorem E.2, as a reference for
``d <= 2``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from scipy.optimize import brentq
from scipy.stats import binom, gamma

from dpcvx._allocator import roomy_allocator
from dpcvx._batching import SMALL, block_scope, together
from dpcvx._progress import progress_bar
from dpcvx._validation import (
    check_center,
    check_moment_order,
    check_nonnegative,
    check_positive,
    check_pure_budget,
    check_real,
)
from dpcvx.errors import CertificationError, InvalidParameterError, SolverError
from dpcvx.mechanisms.base import PER_SOLVE, PLAIN, ExtensionUse, OneEventPlan, Release
from dpcvx.mechanisms.double_output_perturbation import DoubleOutputPerturbation, DoublePlan
from dpcvx.mechanisms.em_pgm import (
    ExponentialMechanismPlan,
    ProjectedGradientExponentialMechanism,
    check_net_domain,
    score_sensitivity,
)
from dpcvx.neighbors import REPLACE_ONE, NeighborRelation
from dpcvx.types import Guarantee, Sensitivity

__all__ = [
    "LocalizedDoubleOutputPerturbation",
    "LocalizedPlan",
    "PopLocalizeEMPGM",
    "aggregate",
    "blocks_for_confidence",
    "em_error_constant",
    "phase_blocks",
]

#: the constant of the phase-coupling term in the telescoping bound (digest 5.2(a))
COUPLING = 1152.0 / 7.0

_FAILURE = (
    "dpcvx could not certify one of the block solves of LocalizedDoubleOutputPerturbation to "
    "its accuracy target (fixed from public quantities). Nothing was released and the whole "
    "budget stays spent. This message carries no data-dependent number, but the failure "
    "itself depends on the data: do not retry on the same data without charging the budget "
    "again. To fix: rescale the data so that losses are of order one, or raise "
    "`move_tolerance` (fewer, better-conditioned phases)."
)


def blocks_for_confidence(phases: int, failure_probability: float, block_success: float) -> int:
    """The smallest ``J`` with ``P(Binomial(J, p) <= floor(J/2)) <= beta / phases``."""
    target = failure_probability / phases
    for J in range(1, 100_000):
        if binom.cdf(J // 2, J, block_success) <= target:
            return J
    raise InvalidParameterError(  # pragma: no cover - p > 1/2 always terminates far earlier
        "No number of blocks below 100000 reaches the requested confidence."
    )


def phase_sizes(n: int, blocks: int) -> tuple[list[int], list[int]]:
    """``n_t = floor(n / 2^t)`` and ``m_t = floor(n_t / J)`` for ``t = 1..ceil(log2 n)``."""
    T = max(1, math.ceil(math.log2(n))) if n > 1 else 1
    n_t = [n >> t for t in range(1, T + 1)]
    return n_t, [nt // blocks for nt in n_t]


def phase_blocks(perm: np.ndarray, batch_sizes, block_sizes, blocks: int) -> list[list[np.ndarray]]:
    """Disjoint index blocks: phase ``t`` takes the next ``n_t`` entries of ``perm`` and cuts its
    first ``J m_t`` into ``J`` contiguous blocks of ``m_t`` (only for the phases given)."""
    out = []
    start = 0
    for n_t, m_t in zip(batch_sizes, block_sizes):
        out.append([perm[start + j * m_t : start + (j + 1) * m_t] for j in range(blocks)])
        start += n_t
    return out


def aggregate(points: np.ndarray) -> int:
    """Index of the point whose distance to its ``(floor(J/2)+1)``-th nearest point (itself
    included, at distance 0) is smallest; ties go to the smallest index."""
    P = np.asarray(points, float)
    J = P.shape[0]
    k = J // 2 + 1
    dist = np.sqrt(np.maximum(np.sum((P[:, None, :] - P[None, :, :]) ** 2, axis=-1), 0.0))
    rho = np.sort(dist, axis=1)[:, k - 1]
    return int(np.argmin(rho))


def _spawn(rng: np.random.Generator, count: int) -> list[np.random.Generator]:
    """``count`` independent child generators drawn from ``rng`` in index order (the same
    children whatever order the blocks later run in). A generator backed by AES counter mode
    (dpcvx's unseeded default) gets AES children keyed from its own output."""
    keys = rng.integers(0, 2**63, size=(count, 2), dtype=np.int64)
    bit = type(rng.bit_generator).__name__
    if bit == "AESCounter":
        from randomgen import AESCounter

        return [np.random.Generator(AESCounter(key=(int(a) << 64) | int(b))) for a, b in keys]
    return [
        np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(a), int(b)])))
        for a, b in keys
    ]


def _check_pop_localize(obj: Any, owner: str) -> None:
    """Validate (and normalize, on the frozen ``obj``) the parameters every Pop-Localize
    mechanism shares: ``k``, ``moment``, ``second_moment``, ``failure_probability``,
    ``block_success``, ``blocks``, ``min_block_size``, ``base_regularization``,
    ``move_tolerance``, ``initial_point``, ``executor`` and ``shuffle``."""
    object.__setattr__(obj, "k", check_moment_order(obj.k, owner))
    Gk = check_positive(obj.moment, "moment", owner)
    G2 = (
        Gk
        if obj.second_moment is None
        else check_positive(obj.second_moment, "second_moment", owner)
    )
    if G2 > Gk:
        raise InvalidParameterError(
            f"`second_moment` (G_2 = {G2:g}) exceeds `moment` (G_k = {Gk:g}) in `{owner}`: "
            "by Lyapunov's inequality (E A^j)^(1/j) grows with j, so G_2 <= G_k for any "
            "valid moment bounds. One of the two bounds is wrong."
        )
    object.__setattr__(obj, "moment", Gk)
    object.__setattr__(obj, "second_moment", G2)
    beta = check_real(obj.failure_probability, "failure_probability", owner)
    if not 0.0 < beta < 0.5:
        raise InvalidParameterError(
            f"`failure_probability` of `{owner}` must lie in (0, 1/2). Got {beta!r}."
        )
    object.__setattr__(obj, "failure_probability", beta)
    p = check_real(obj.block_success, "block_success", owner)
    if not 0.5 < p < 1.0:
        raise InvalidParameterError(
            f"`block_success` of `{owner}` must lie in (1/2, 1) (a majority of good "
            f"blocks must be likely). Got {p!r}."
        )
    object.__setattr__(obj, "block_success", p)
    for name in ("blocks", "min_block_size"):
        value = getattr(obj, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise InvalidParameterError(
                f"`{name}` of `{owner}` must be a positive integer. Got {value!r}."
            )
        object.__setattr__(obj, name, int(value))
    if obj.base_regularization is not None:
        object.__setattr__(
            obj,
            "base_regularization",
            check_positive(obj.base_regularization, "base_regularization", owner),
        )
    tol = check_real(obj.move_tolerance, "move_tolerance", owner)
    if not 0.0 <= tol < 1.0:
        raise InvalidParameterError(
            f"`move_tolerance` of `{owner}` must lie in [0, 1). Got {tol!r}."
        )
    object.__setattr__(obj, "move_tolerance", tol)
    object.__setattr__(obj, "initial_point", check_center(obj.initial_point, owner))
    if obj.executor is not None and not callable(getattr(obj.executor, "submit", None)):
        raise InvalidParameterError(
            f"The `executor` of `{owner}` must have the concurrent.futures interface "
            f"(a `submit` method). Got {type(obj.executor).__name__}."
        )
    if not isinstance(obj.shuffle, bool):
        raise InvalidParameterError(f"`shuffle` of `{owner}` must be a bool.")


def _partition_plan(
    obj: Any, n: int, owner: str
) -> tuple[int, int, list[int], list[int], int, int]:
    """Algorithm 1's public partition: ``(T_paper, J, n_t, m_t, T_blocks, minimum_n)``, or
    :class:`~dpcvx.InvalidParameterError` when phase 1 has no block of ``min_block_size``."""
    T_paper = max(1, math.ceil(math.log2(n))) if n > 1 else 1
    J = obj.blocks or blocks_for_confidence(T_paper, obj.failure_probability, obj.block_success)
    batch, block = phase_sizes(n, J)
    minimum_n = 2 * J * obj.min_block_size
    if block[0] < obj.min_block_size:
        raise InvalidParameterError(
            f"`{owner}` needs n >= 2 * J * min_block_size = {minimum_n} examples (phase 1 "
            f"uses floor(n/2) examples cut into J = {J} blocks of at least "
            f"{obj.min_block_size}); got n = {n}. Lower `blocks` (less confidence: "
            f"failure_probability={obj.failure_probability:g} needs J = {J}) or use "
            "OutputPerturbation on clipped data."
        )
    T_blocks = max(t + 1 for t in range(T_paper) if block[t] >= obj.min_block_size)
    return T_paper, J, batch, block, T_blocks, minimum_n


class _PhaseLoop:
    """Algorithm 1's loop, shared by every Pop-Localize mechanism: the data-independent
    partition, one child generator per block, the blocks of a phase (in-process or on the
    ``executor``), the geometric aggregation. The block mechanism enters through
    ``jobs(phase, center, index_blocks, children) -> (function, tasks)``: ``function(*task)``
    runs one block and returns its :class:`Release` (a module-level function, so executors can
    ship it; ``task[2]`` is what carries the block's rows)."""

    __slots__ = ()

    def _release_phases(self, plan: Any, context: Any, rng: np.random.Generator, jobs, desc: str):
        J = plan.blocks
        perm = rng.permutation(plan.n) if self.shuffle else np.arange(plan.n)  # type: ignore[attr-defined]
        blocks = phase_blocks(
            perm, [p.batch_size for p in plan.phases], [p.block_size for p in plan.phases], J
        )
        w_bar = context.project(plan.initial_point)
        certificates = []
        outputs, chosen = [], []
        phases = progress_bar(
            zip(plan.phases, blocks),
            total=len(plan.phases),
            desc=desc,
            unit="phase",
            enabled=self.progress,  # type: ignore[attr-defined]
        )
        for phase, index_blocks in phases:
            center = np.asarray(w_bar, float).copy()
            children = _spawn(rng, J)
            function, tasks = jobs(phase, center, index_blocks, children)
            # small blocks whose solves the data source batches run together (public: the
            # phase's block size and the loss's structure)
            together_ = phase.block_size <= SMALL and getattr(context, "batches", False)
            results = self._run(function, tasks, together_)
            points = np.stack([np.asarray(r.w, float) for r in results])
            j_star = aggregate(points)
            w_bar = points[j_star]
            outputs.append(points)
            chosen.append(j_star)
            for r in results:
                certificates.extend(r.certificates)
        extra = {"block_outputs": tuple(outputs), "aggregated_indices": tuple(chosen)}
        w_out = np.asarray(w_bar, float).copy()
        return Release(w_out, tuple(certificates), MappingProxyType(extra))

    def _probe_executor(self, block_mechanism, block_plan, project, point) -> None:
        """Run one data-free probe job on the ``executor`` (the block mechanism, its plan, the
        public projection, a generator: what every block job ships except the rows); raise
        :class:`~dpcvx.InvalidParameterError`, nothing spent, when it cannot run there."""
        owner = type(self).__name__
        payload = (block_mechanism, block_plan, project, np.random.default_rng(0))
        try:
            ok = self.executor.submit(_probe, payload, point).result()  # type: ignore[attr-defined]
        except Exception as exc:  # noqa: BLE001 - data-free: reported with its cause
            raise InvalidParameterError(
                f"The `executor` of `{owner}` could not run a block job "
                f"({type(exc).__name__}: {exc}). Block jobs are pickled to the executor's "
                "workers (a process pool, a Dask client's executor): dpcvx must be importable "
                "there and the data source's projection picklable. Nothing was spent."
            ) from exc
        if not ok:  # pragma: no cover - a worker that returns without running the probe
            raise InvalidParameterError(
                f"The `executor` of `{owner}` returned a wrong probe result. Nothing was spent."
            )

    def _run(self, function, tasks, small=False):
        executor = self.executor  # type: ignore[attr-defined]
        if executor is None:
            if small and function is _run_block:
                # the blocks' programs solved together, each as alone (see dpcvx._batching)
                return together(function, tasks)
            return [function(*task) for task in tasks]
        scatter = getattr(executor, "scatter", None)
        chunked = callable(scatter)
        if chunked:
            # a Dask ``distributed.Client``: one task per worker, each running a contiguous
            # chunk of the phase's blocks (the blocks are the same size; a task per block paid
            # the scheduler's per-task overhead J times a phase), with the chunk's rows sent
            # straight to a worker (``direct=True``) instead of inside the task graph
            workers = len(executor.scheduler_info().get("workers", {})) or 1
            cuts = np.linspace(0, len(tasks), min(workers, len(tasks)) + 1).astype(int)
            chunks = [tasks[a:b] for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
            rows = scatter([[t[2] for t in c] for c in chunks], direct=True, hash=False)
            futures = [
                executor.submit(
                    _run_chunk,
                    function,
                    [(t[0], t[1], None, *t[3:]) for t in c],
                    r,
                    small and function is _run_block,
                    pure=False,  # no hashing of the arguments: each task is run once
                )
                for c, r in zip(chunks, rows)
            ]
        else:
            # on Dask's workers (``client.get_executor()``) under raised allocator thresholds;
            # any other executor (a process or thread pool) runs the blocks as they are
            if type(executor).__module__.split(".")[0] == "distributed":
                futures = [executor.submit(_run_one, function, *task) for task in tasks]
            else:
                futures = [executor.submit(function, *task) for task in tasks]
        try:
            if chunked:
                return [out for f in futures for out in f.result()]
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            raise


def _run_one(function, *task):
    """Run one block on an executor, with the allocator's thresholds raised while it runs (see
    :mod:`dpcvx._allocator`; module level, so executors can ship it)."""
    with roomy_allocator():
        return function(*task)


def _run_chunk(function, tasks, rows, small: bool = False) -> list:
    """Run the blocks ``tasks`` (their rows in ``rows``, in order) on one worker (module level,
    so executors can ship it), with the allocator's thresholds raised while they run (see
    :mod:`dpcvx._allocator`): together where ``small`` (their programs solved in batches, each
    as alone, see :mod:`dpcvx._batching`), else one after the other."""
    jobs = [(t[0], t[1], r, *t[3:]) for t, r in zip(tasks, rows)]
    with roomy_allocator():
        if small:
            return together(function, jobs)
        return [function(*job) for job in jobs]


@dataclass(frozen=True, slots=True, kw_only=True)
class PhasePlan:
    """One phase's public quantities."""

    index: int  # t, from 1
    batch_size: int  # n_t
    block_size: int  # m_t
    regularization: float  # lambda_t
    C: float  # C_t
    #: one block's plan (Double-OutputPert, or EM-PGM for PopLocalizeEMPGM; the block's
    #: center is set at release time)
    block: DoublePlan | ExponentialMechanismPlan


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalizedPlan(OneEventPlan):
    """Everything the release uses, fixed from public quantities before any data is touched."""

    guarantee: Guarantee
    n: int
    d: int
    blocks: int
    phases: tuple[PhasePlan, ...]
    initial_point: np.ndarray
    detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    ledger_detail: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))


def _localized_plan(
    *,
    epsilon: float,
    n: int,
    d: int,
    blocks: int,
    phases: list,
    start: np.ndarray,
    detail: dict,
    ledger: dict,
    used: int,
    per_block: tuple[float, ...],
    each: str,
) -> LocalizedPlan:
    """The plan of a Pop-Localize release (one event by parallel composition over the
    ``blocks`` disjoint blocks of every phase, each block spending ``per_block``)."""
    ledger["per_block_epsilon"] = per_block
    ledger["split"] = tuple(
        f"phase {p.index}: {blocks} disjoint blocks of {p.block_size} examples, each {each}"
        for p in phases
    ) + (
        f"parallel composition over disjoint blocks: {epsilon:g} in total "
        f"({n - used} of {n} examples unused)",
    )
    return LocalizedPlan(
        guarantee=Guarantee(epsilon=epsilon, delta=0.0),
        n=n,
        d=d,
        blocks=blocks,
        phases=tuple(phases),
        initial_point=np.asarray(start, float).copy(),
        detail=MappingProxyType(detail),
        ledger_detail=MappingProxyType(ledger),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalizedDoubleOutputPerturbation(_PhaseLoop):
    """Paper 000's Localized Double Output Perturbation: pure epsilon-DP heavy-tailed SCO.

    Parameters
    ----------
    k : float
        Moment order ``k >= 2`` of the per-example Lipschitz constant.
    moment : float
        ``G_k > 0``: a public bound with ``E_z[sup_w ||grad f(w, z)||^k] <= G_k^k``. It shapes
        utility only: privacy holds on every dataset even if the bound is wrong.
    second_moment : float
        ``G_2``, the same bound for ``k = 2`` (``0 < G_2 <= G_k``, Lyapunov). Default ``G_k``.
    failure_probability : float
        ``beta`` in ``(0, 1/2)``: the utility guarantee's failure probability (sets ``J``).
    block_success : float
        ``p`` in ``(1/2, 1)``: the probability that one block's output is good (paper 000,
        Prop 3.2 gives 0.7). Sets ``J``.
    blocks : int, optional
        Override ``J`` (public). The plan reports the confidence it implies.
    base_regularization : float, optional
        Override ``lambda_1`` (public; never tune it on the private data).
    min_block_size : int
        The smallest block run (phases with ``m_t`` below it are not run). Default 1.
    move_tolerance : float
        Phases with ``C_t / lambda_t < move_tolerance * D`` are not run. Default 1e-6.
    initial_point : array-like, optional
        ``wbar_1``, a public point (projected onto W); default the domain's center.
    zeta : float
        Localization tail parameter of every block's stage 1 (paper: 3).
    constants : {"tight", "paper"}
        Noise and radius constants of every block (see
        :class:`~dpcvx.DoubleOutputPerturbation`).
    shuffle : bool
        Draw the partition from a uniformly random permutation (default; it keeps blocks
        i.i.d. when the data are sorted). It never affects privacy.
    executor : concurrent.futures.Executor, optional
        Runs the ``J`` blocks of a phase (e.g. a process or thread pool, or a Dask
        ``distributed.Client``, whose workers then receive each block's rows directly by
        ``scatter``; its ``get_executor()`` works too, with the rows inside the task graph);
        default in-process, one after the other. The result does not
        depend on it: every block gets its own child generator, spawned in block order
        before dispatch.
    solver : str, optional
        First solver of the refinement ladder.
    progress : bool
        A progress bar over the phases on a terminal (never in pipes, logs or tests); False
        silences it.

    Notes
    -----
    Guarantee: pure epsilon-DP, replace-one neighbors, public n, on every dataset. ``delta``
    must be 0. Raises :class:`~dpcvx.InvalidParameterError` before anything is spent when ``n``
    is too small for one block per phase-1 slot (``n < 2 J min_block_size``).
    """

    k: float
    moment: float
    second_moment: float | None = None
    failure_probability: float = 0.1
    block_success: float = 0.7
    blocks: int | None = None
    base_regularization: float | None = None
    min_block_size: int = 1
    move_tolerance: float = 1e-6
    initial_point: Any = None
    zeta: float = 3.0
    constants: str = "tight"
    shuffle: bool = True
    executor: Any = None
    solver: str | None = None
    progress: bool = True

    #: block solves on Lipschitz extensions with each phase's own ``C_t``
    requirements: ClassVar[tuple[str, ...]] = ("solver", "project")
    extension: ClassVar[ExtensionUse] = PER_SOLVE
    enforces_lipschitz: ClassVar[bool] = False
    neighbors: ClassVar[NeighborRelation] = REPLACE_ONE

    def __post_init__(self) -> None:
        owner = "LocalizedDoubleOutputPerturbation"
        _check_pop_localize(self, owner)
        zeta = check_positive(self.zeta, "zeta", owner)
        object.__setattr__(self, "zeta", zeta)
        if self.constants not in ("tight", "paper"):
            raise InvalidParameterError(
                f"The `constants` parameter of `{owner}` must be 'tight' or 'paper'. "
                f"Got {self.constants!r}."
            )

    # ------------------------------------------------------------------ public planning
    def plan(
        self,
        *,
        n: int,
        d: int,
        center: np.ndarray,
        diameter: float,
        epsilon: float,
        delta: float,
        domain: Any = None,
    ) -> LocalizedPlan:
        """The phases, blocks, regularizations, extension constants and every block's plan,
        from public quantities only (module docstring). ``domain`` is not needed."""
        owner = "LocalizedDoubleOutputPerturbation"
        epsilon = check_pure_budget(epsilon, delta, owner)
        start = center if self.initial_point is None else self.initial_point
        if start.shape != (d,):
            raise InvalidParameterError(
                f"The `initial_point` of `{owner}` must have shape ({d},). Got {start.shape}."
            )
        k, Gk, D = self.k, self.moment, float(diameter)
        G2 = float(self.second_moment)  # type: ignore[arg-type]  # set in __post_init__
        T_paper, J, batch, block, T_blocks, minimum_n = _partition_plan(self, n, owner)
        C = [Gk * (m * epsilon / d) ** (1.0 / k) if m > 0 else 0.0 for m in block]
        # c_noise: median norm of the stage-2 noise in units of C/(epsilon lam m) (lam-free)
        probe = DoubleOutputPerturbation(
            C=C[0], regularization=1.0, center=start, zeta=self.zeta, constants=self.constants
        )
        probe_plan = probe.plan(
            n=block[0], d=d, center=start, diameter=D, epsilon=epsilon, delta=0.0
        )
        stage2 = probe_plan.noise.scale * epsilon * block[0] / C[0]
        c_noise = stage2 * float(gamma.median(d)) / d
        rbar = c_noise * Gk * (d / (block[0] * epsilon)) ** (1.0 - 1.0 / k) + G2 / math.sqrt(
            block[0]
        )
        lam1 = self.base_regularization or math.sqrt(2.0 * COUPLING) * rbar / D
        lams = [lam1 * 32.0**t for t in range(T_paper)]
        movable = [
            t + 1
            for t in range(T_paper)
            if block[t] > 0 and C[t] / lams[t] >= self.move_tolerance * D
        ]
        T_move = max(movable) if movable else 1
        T_eff = max(1, min(T_paper, T_blocks, T_move))
        phases = []
        doubles: list[DoublePlan] = []
        for t in range(T_eff):
            mech = DoubleOutputPerturbation(
                C=C[t],
                regularization=lams[t],
                center=start,
                zeta=self.zeta,
                constants=self.constants,
                solver=self.solver,
            )
            doubles.append(
                mech.plan(n=block[t], d=d, center=start, diameter=D, epsilon=epsilon, delta=0.0)
            )
            phases.append(
                PhasePlan(
                    index=t + 1,
                    batch_size=batch[t],
                    block_size=block[t],
                    regularization=lams[t],
                    C=C[t],
                    block=doubles[-1],
                )
            )
        confidence = max(0.0, 1.0 - T_eff * float(binom.cdf(J // 2, J, self.block_success)))
        used = sum(J * p.block_size for p in phases)
        composition = (
            f"parallel over {T_eff * J} disjoint blocks ({T_eff} phases x {J}; a "
            "data-independent random partition); per block Double-OutputPert: "
            "epsilon/2 (OutputPert-Localize) + epsilon/2 (output perturbation over "
            "the public W0), basic composition"
        )
        common = {
            "paper": "000 Thm 3.1 (Alg 1 + Alg 4 + Alg 2)",
            "k": k,
            "moment": Gk,
            "second_moment": G2,
            "phases": T_eff,
            "phases_paper": T_paper,
            "phases_blocks": T_blocks,
            "phases_move": T_move,
            "blocks": J,
            "block_sizes": tuple(p.block_size for p in phases),
            "regularizations": tuple(p.regularization for p in phases),
            "extension_C": tuple(p.C for p in phases),
            "constants": self.constants,
            "composition": composition,
        }
        detail = dict(common)
        detail.update(
            {
                "mechanism": "LocalizedDoubleOutputPerturbation",
                "base_regularization": lam1,
                "error_scale": rbar,
                "noise_constant": c_noise,
                "failure_probability": self.failure_probability,
                "block_success": self.block_success,
                "implied_confidence": confidence,
                "examples_used": used,
                "accuracies": tuple(b.accuracy for b in doubles),
                "localization_accuracies": tuple(b.localization_accuracy for b in doubles),
                "noise_scales": tuple(b.noise.scale for b in doubles),
                "localization_noise_scales": tuple(b.localization_noise.scale for b in doubles),
                "localization_radii": tuple(b.radius for b in doubles),
                "minimum_n": minimum_n,
            }
        )
        return _localized_plan(
            epsilon=epsilon,
            n=n,
            d=d,
            blocks=J,
            phases=phases,
            start=start,
            detail=detail,
            ledger=dict(common),
            used=used,
            per_block=(epsilon / 2.0, epsilon / 2.0),
            each=f"{epsilon / 2:g} (localize) + {epsilon / 2:g} (release) = {epsilon:g}",
        )

    # ------------------------------------------------------------------ preflight
    def preflight(self, plan: LocalizedPlan, context: Any) -> None:
        """Check, before the budget is reserved, that the ``executor`` can run a block: one
        probe job ships what every block job ships except the rows (the block mechanism, the
        public projection, a generator) and runs there. Data-free, so its failure is public:
        it raises :class:`~dpcvx.InvalidParameterError` and nothing is spent (a failure
        during the release is a private abort, with the budget spent)."""
        if self.executor is None:
            return
        phase = plan.phases[0]
        self._probe_executor(
            self._block_mechanism(phase.C, phase.regularization),
            phase.block,
            context.project,
            plan.initial_point,
        )

    def _block_mechanism(self, C: float, lam: float) -> DoubleOutputPerturbation:
        """One block's Double-OutputPert at the phase's ``C`` and ``lambda``."""
        return DoubleOutputPerturbation(
            C=C, regularization=lam, zeta=self.zeta, constants=self.constants, solver=self.solver
        )

    # ------------------------------------------------------------------ release
    def release(self, plan: LocalizedPlan, context: Any, rng: np.random.Generator) -> Release:
        """Run the phases (``context`` is :class:`dpcvx.problem.ReleaseContext`). Returns the
        released point, the public certificates of every block solve, and public detail (every
        block output and the aggregation's choices: all covered by the guarantee)."""
        try:
            return self._release(plan, context, rng)
        except Exception:  # noqa: BLE001 - nothing data-dependent may leave a private release
            raise CertificationError(_FAILURE) from None

    def _release(self, plan: LocalizedPlan, context, rng: np.random.Generator):
        def jobs(phase, center, index_blocks, children):
            mech = self._block_mechanism(phase.C, phase.regularization)
            block_plan = replace(phase.block, center=center)
            tasks = [
                (
                    mech,
                    block_plan,
                    context.solver(indices=idx, C=phase.C),
                    context.project,
                    child,
                    f"{context.domain.kind} (block of {len(idx)})",
                )
                for idx, child in zip(index_blocks, children)
            ]
            return _run_block, tasks

        return self._release_phases(plan, context, rng, jobs, "LDOP phases")


# ============================================================================ EM-PGM blocks
_EM_FAILURE = (
    "dpcvx could not evaluate the EM-PGM scores of one block of PopLocalizeEMPGM. Nothing was "
    "released and the whole budget stays spent. This message carries no data-dependent "
    "number, but the failure itself may depend on the data: do not retry on the same data "
    "without charging the budget again. To fix: check that the loss can be evaluated at every "
    "point within `smoothing` of the domain, and rescale the data so that losses are of order "
    "one."
)


def em_error_constant(*, C: float, d: int, epsilon: float, m: int, lam: float, H: float, D: float):
    """``c_em = 2 + 4 log(3D/eta) + 4 log(10)/d`` with ``eta = C d/(epsilon m (lam + H))``: the
    non-bias part of EM-PGM's distance bound, ``||w_hat - w_lam|| <= (b_Z + c_em C d/(epsilon
    m)) / lam`` with probability 0.9 (paper 000, proof of Theorem E.1, step 3: ``2 (H + lam)
    eta + (4C/(epsilon m)) (d log(3D/eta) + log 10)`` in units of ``C d/(epsilon m)``). The
    logarithm is floored at 0 (a net of one cell)."""
    eta = C * d / (epsilon * m * (lam + H))
    return 2.0 + 4.0 * max(math.log(3.0 * D / eta), 0.0) + 4.0 * math.log(10.0) / d


class _BlockRows:
    """One block's view of the data for an EM-PGM block: the public domain and the loss values
    of the block's own examples (``context.loss_values(points, indices=...)``)."""

    __slots__ = ("_context", "_indices", "domain", "n")

    def __init__(self, context: Any, indices: np.ndarray) -> None:
        self._context = context
        self._indices = np.asarray(indices)
        self.domain = context.domain
        self.n = int(self._indices.size)

    def loss_values(self, points: Any) -> np.ndarray:
        return self._context.loss_values(points, indices=self._indices)


@dataclass(frozen=True, slots=True, kw_only=True)
class PopLocalizeEMPGM(_PhaseLoop):
    """Paper 000's Theorem E.2: Pop-Localize (Algorithm 1) with EM-PGM (Algorithm 5) as the
    block mechanism ``A_ERM``. Pure epsilon-DP heavy-tailed SCO for H-smooth losses. **Time
    exponential in d: a reference route for d <= 2 only** (cross-checks
    :class:`LocalizedDoubleOutputPerturbation` on small problems).

    The phase loop, partition, block count ``J``, aggregation and executors are
    :class:`LocalizedDoubleOutputPerturbation`'s (one shared implementation); only the block
    mechanism and its parameters differ. Phase ``t`` (block size ``m_t``) runs, on every one of
    its ``J`` disjoint blocks and centred at the previous phase's aggregate ``wbar_t``,
    :class:`~dpcvx.mechanisms.em_pgm.ProjectedGradientExponentialMechanism` with Theorem E.1's
    parameters at sample size ``m_t``:

    - ``lambda_t = 32^(t-1) lambda_1`` (Algorithm 1);
    - clip ``C_t = G_k (epsilon m_t / d)^(1/k)``;
    - public step ``gamma_t = 1 / (lambda_t + H)`` (erratum E6: never the data's smoothness);
    - net spacing ``eta_t = C_t d / (epsilon m_t (lambda_t + H))``, a public net of all of W;
    - score sensitivity ``Delta_t = 2 C_t / m_t`` plus the float64 allowance of
      :func:`~dpcvx.mechanisms.em_pgm.score_sensitivity`, taken for the worst centre in W
      (``||w0|| <= ||c|| + D``), so it holds whatever ``wbar_t`` the earlier phases release.

    ``lambda_1`` is left open by the paper ("a polynomial in the problem parameters"). As for
    LDOP it balances the telescoping bound behind Theorem 2.1: ``lambda_1 = sqrt(2 A) rbar_1 /
    D`` (``A = 1152/7``) with the EM-PGM error scale ``rbar_1 = c_em G_k (d/(m_1
    epsilon))^(1 - 1/k) + G_2 / sqrt(m_1)``, where ``c_em`` (:func:`em_error_constant`) depends
    on ``lambda_1`` through a logarithm; ``lambda_1`` is the smallest root of that equation
    (found by bisection from public numbers only).

    Phases run: ``T_eff = min(T_paper, T_blocks, T_move, T_net)``; ``T_blocks`` and ``T_move``
    as in LDOP, and ``T_net``: the leading phases whose net (at most ``(ceil(D/eta_t) + 1)^d``
    points; ``eta_t`` shrinks about 16-fold per phase) fits ``max_points``. The detail reports
    all four. Truncation costs utility only.

    Parameters
    ----------
    k : float
        As for :class:`LocalizedDoubleOutputPerturbation`, and so are ``moment``,
        ``second_moment``, ``failure_probability``, ``block_success`` (default 0.7, Theorem
        E.1's success probability), ``blocks``, ``base_regularization``, ``min_block_size``,
        ``move_tolerance``, ``initial_point``, ``shuffle``, ``executor`` and ``progress``.
    smoothness : float
        ``H >= 0``, a public bound on the smoothness of every per-example loss (Theorem E.2
        assumes H-smooth losses). A wrong ``H`` costs utility only.
    smoothing : float, optional
        The radius ``tau`` of the value-only gradient of every block (default ``D /
        sqrt(m_t)``, EM-PGM's default at the block's size). Public; utility only.
    max_points : int
        The largest net a phase may use (at least 4). Default 10000.
    quadrature_nodes : int
        Circle quadrature nodes for ``d = 2`` (even, at least 4). Default 32.

    Notes
    -----
    Guarantee: pure epsilon-DP, replace-one neighbors, public n, on every dataset; ``delta``
    must be 0. One ledger event ``epsilon``, and the accounting is exact:

    - every block is EM-PGM at the full epsilon on its own examples, pure epsilon-DP on every
      dataset (paper 000, Theorem E.1's privacy proof: the clipped projected-gradient score
      moves by at most ``2 C_t / m_t`` for a *public* step size, which erratum E6 requires);
    - the blocks are disjoint pieces of a data-independent partition (a uniform permutation
      from the mechanism's own generator, then contiguous ranges), so a replace-one change
      touches at most one block; the centre ``wbar_t`` of a phase is a function of earlier
      releases only, so the whole run is epsilon-DP by adaptive parallel composition (paper 000,
      Theorem 2.1 and its use in Theorem E.2);
    - the aggregation and the projection of the initial point are post-processing.

    Utility (Theorem E.2, up to constants and logarithms, with probability ``1 - beta``):
    ``G_2 D sqrt(log(1/beta)/n) + G_k D (d log(1/beta)/(epsilon n))^(1-1/k) log(D (lambda_max
    + H) epsilon n / (G_k d))``, when all ``T_paper`` phases run.

    Checked before anything is spent: ``d <= 2``, ``delta = 0``, the partition, phase 1's net
    against ``max_points`` and (when the domain is known: always through
    ``solve_private``) that the domain has an exact Euclidean projection (an l2 ball, a box or
    an l1 ball).
    """

    k: float
    moment: float
    smoothness: float
    second_moment: float | None = None
    failure_probability: float = 0.1
    block_success: float = 0.7
    blocks: int | None = None
    base_regularization: float | None = None
    min_block_size: int = 1
    move_tolerance: float = 1e-6
    initial_point: Any = None
    smoothing: float | None = None
    max_points: int = 10_000
    quadrature_nodes: int = 32
    shuffle: bool = True
    executor: Any = None
    progress: bool = True

    #: loss values of each block's rows (the net and the projections are public)
    requirements: ClassVar[tuple[str, ...]] = ("loss_values", "project")
    extension: ClassVar[ExtensionUse] = PLAIN
    enforces_lipschitz: ClassVar[bool] = False
    neighbors: ClassVar[NeighborRelation] = REPLACE_ONE

    def __post_init__(self) -> None:
        owner = "PopLocalizeEMPGM"
        _check_pop_localize(self, owner)
        object.__setattr__(
            self, "smoothness", check_nonnegative(self.smoothness, "smoothness", owner)
        )
        if self.smoothing is not None:
            object.__setattr__(
                self, "smoothing", check_positive(self.smoothing, "smoothing", owner)
            )
        for name in ("max_points", "quadrature_nodes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 4:
                raise InvalidParameterError(
                    f"`{name}` of `{owner}` must be an integer >= 4. Got {value!r}."
                )
            object.__setattr__(self, name, int(value))
        if self.quadrature_nodes % 2:
            raise InvalidParameterError(
                f"`quadrature_nodes` of `{owner}` must be even (antipodal pairs of nodes). "
                f"Got {self.quadrature_nodes}. Use e.g. 32."
            )

    def _block_mechanism(self, C: float, lam: float) -> ProjectedGradientExponentialMechanism:
        return ProjectedGradientExponentialMechanism(
            C=C,
            regularization=lam,
            smoothness=self.smoothness,
            smoothing=self.smoothing,
            max_points=self.max_points,
            quadrature_nodes=self.quadrature_nodes,
        )

    # ------------------------------------------------------------------ public planning
    def plan(
        self,
        *,
        n: int,
        d: int,
        center: np.ndarray,
        diameter: float,
        epsilon: float,
        delta: float,
        domain: Any = None,
    ) -> LocalizedPlan:
        """Theorem E.2's phases and every block's EM-PGM plan, from public quantities only
        (class docstring)."""
        owner = "PopLocalizeEMPGM"
        epsilon = check_pure_budget(epsilon, delta, owner)
        if d not in (1, 2):
            raise InvalidParameterError(
                f"`{owner}` (Pop-Localize with EM-PGM blocks, paper 000 Theorem E.2) costs time "
                f"exponential in d and is a reference route for d <= 2 only. Got d = {d}. Use "
                "LocalizedDoubleOutputPerturbation (polynomial time) in higher dimensions."
            )
        if domain is not None:
            check_net_domain(domain)
        if center is None:
            raise InvalidParameterError(
                f"`{owner}` needs a data source with a public domain (its nets cover W)."
            )
        c = np.asarray(center, float).reshape(-1)
        start = c if self.initial_point is None else self.initial_point
        if start.shape != (d,):
            raise InvalidParameterError(
                f"The `initial_point` of `{owner}` must have shape ({d},). Got {start.shape}."
            )
        k, Gk, H, D = self.k, self.moment, self.smoothness, float(diameter)
        G2 = float(self.second_moment)  # type: ignore[arg-type]  # set in __post_init__
        T_paper, J, batch, block, T_blocks, minimum_n = _partition_plan(self, n, owner)
        C = [Gk * (m * epsilon / d) ** (1.0 / k) if m > 0 else 0.0 for m in block]
        m1, scale1 = block[0], C[0] * d / (epsilon * block[0])  # = G_k (d/(m_1 eps))^(1-1/k)

        def error_scale(lam: float) -> float:
            c_em = em_error_constant(C=C[0], d=d, epsilon=epsilon, m=m1, lam=lam, H=H, D=D)
            return c_em * scale1 + G2 / math.sqrt(m1)

        K = math.sqrt(2.0 * COUPLING) / D
        if self.base_regularization is not None:
            lam1 = self.base_regularization
        else:  # the smallest root of lam = K rbar_1(lam) (rbar_1 grows like log(lam))
            lo = K * (2.0 * scale1 + G2 / math.sqrt(m1))  # c_em >= 2: lo - K rbar(lo) <= 0
            hi = 2.0 * lo
            while hi - K * error_scale(hi) <= 0.0:
                hi *= 2.0
            lam1 = float(brentq(lambda x: x - K * error_scale(x), lo, hi, xtol=1e-300, rtol=1e-12))
        rbar = error_scale(lam1)
        lams = [lam1 * 32.0**t for t in range(T_paper)]
        spacing = [
            C[t] * d / (epsilon * block[t] * (lams[t] + H)) if block[t] > 0 else math.inf
            for t in range(T_paper)
        ]
        net = [math.inf if D / h > 1e15 else (math.ceil(D / h) + 1) ** d for h in spacing]
        if net[0] > self.max_points:
            raise InvalidParameterError(
                f"Phase 1 of `{owner}` needs a net of up to {net[0]:.3g} points (spacing "
                f"eta_1 = C_1 d/(epsilon m_1 (lambda_1 + H)) = {spacing[0]:.3g} over D = {D:g} "
                f"in d = {d}), above max_points = {self.max_points}. EM-PGM is exponential in d "
                "and meant for small reference problems: raise `max_points`, or use fewer "
                "examples or LocalizedDoubleOutputPerturbation."
            )
        T_net = 1
        while T_net < T_paper and block[T_net] > 0 and net[T_net] <= self.max_points:
            T_net += 1  # the leading phases whose net fits
        movable = [
            t + 1
            for t in range(T_paper)
            if block[t] > 0 and C[t] / lams[t] >= self.move_tolerance * D
        ]
        T_move = max(movable) if movable else 1
        T_eff = max(1, min(T_paper, T_blocks, T_move, T_net))
        # the rounding allowance of the score's sensitivity for every centre in W
        worst = np.zeros(d)
        worst[0] = float(np.linalg.norm(c)) + D
        phases = []
        em_plans: list[ExponentialMechanismPlan] = []
        for t in range(T_eff):
            mech = self._block_mechanism(C[t], lams[t])
            em = mech.plan(
                n=block[t], d=d, center=c, diameter=D, epsilon=epsilon, delta=0.0, domain=domain
            )
            bound = score_sensitivity(
                n=block[t],
                C=C[t],
                regularization=lams[t],
                step_size=em.step_size,
                center=c,
                regularization_center=worst,
                diameter=D,
            )
            value = max(bound, em.sensitivity.value)
            em_detail = dict(em.detail)
            em_detail.update(sensitivity=value, coefficient=epsilon / (2.0 * value))
            em = replace(
                em,
                sensitivity=Sensitivity(value=value, norm="l2"),
                detail=MappingProxyType(em_detail),
            )
            em_plans.append(em)
            phases.append(
                PhasePlan(
                    index=t + 1,
                    batch_size=batch[t],
                    block_size=block[t],
                    regularization=lams[t],
                    C=C[t],
                    block=em,
                )
            )
        confidence = max(0.0, 1.0 - T_eff * float(binom.cdf(J // 2, J, self.block_success)))
        used = sum(J * p.block_size for p in phases)
        composition = (
            f"parallel over {T_eff * J} disjoint blocks ({T_eff} phases x {J}; a "
            "data-independent random partition); per block one exponential mechanism (EM-PGM) "
            "over a public net at the full epsilon"
        )
        common = {
            "paper": "000 Thm E.2 (Alg 1 + Alg 5, Thm E.1; erratum E6: public gamma)",
            "k": k,
            "moment": Gk,
            "second_moment": G2,
            "smoothness": H,
            "phases": T_eff,
            "phases_paper": T_paper,
            "phases_blocks": T_blocks,
            "phases_move": T_move,
            "phases_net": T_net,
            "blocks": J,
            "block_sizes": tuple(p.block_size for p in phases),
            "regularizations": tuple(p.regularization for p in phases),
            "clip_C": tuple(p.C for p in phases),
            "step_sizes": tuple(b.step_size for b in em_plans),
            "spacings": tuple(b.spacing for b in em_plans),
            "sensitivities": tuple(b.sensitivity.value for b in em_plans),
            "reference_only": "time exponential in d; d <= 2",
            "composition": composition,
        }
        detail = dict(common)
        detail.update(
            {
                "mechanism": "PopLocalizeEMPGM",
                "base_regularization": lam1,
                "error_scale": rbar,
                "failure_probability": self.failure_probability,
                "block_success": self.block_success,
                "implied_confidence": confidence,
                "examples_used": used,
                "net_bounds": tuple(b.net_bound for b in em_plans),
                "smoothings": tuple(b.smoothing for b in em_plans),
                "minimum_n": minimum_n,
            }
        )
        return _localized_plan(
            epsilon=epsilon,
            n=n,
            d=d,
            blocks=J,
            phases=phases,
            start=start,
            detail=detail,
            ledger=dict(common),
            used=used,
            per_block=(epsilon,),
            each=f"one EM-PGM at {epsilon:g}",
        )

    # ------------------------------------------------------------------ preflight
    def preflight(self, plan: LocalizedPlan, context: Any) -> None:
        """Data-free checks before the budget is reserved: the domain has an exact Euclidean
        projection, and the ``executor`` (if any) can run a block job (see
        :meth:`LocalizedDoubleOutputPerturbation.preflight`). Raises
        :class:`~dpcvx.InvalidParameterError`; nothing is spent."""
        check_net_domain(context.domain)
        if self.executor is None:
            return
        phase = plan.phases[0]
        self._probe_executor(
            self._block_mechanism(phase.C, phase.regularization),
            phase.block,
            context.project,
            plan.initial_point,
        )

    # ------------------------------------------------------------------ release
    def release(self, plan: LocalizedPlan, context: Any, rng: np.random.Generator) -> Release:
        """Run the phases (``context`` is :class:`dpcvx.problem.ReleaseContext`). Returns the
        released point, no certificates (nothing is solved), and public detail (every block
        output and the aggregation's choices: all covered by the guarantee)."""
        check_net_domain(context.domain)  # public: raised before the data is touched
        try:
            return self._release(plan, context, rng)
        except Exception:  # noqa: BLE001 - nothing data-dependent may leave a private release
            raise SolverError(_EM_FAILURE) from None

    def _release(self, plan: LocalizedPlan, context, rng: np.random.Generator):
        def jobs(phase, center, index_blocks, children):
            mech = self._block_mechanism(phase.C, phase.regularization)
            block_plan = replace(phase.block, center=center)
            tasks = [
                (mech, block_plan, _BlockRows(context, idx), child)
                for idx, child in zip(index_blocks, children)
            ]
            return _run_em_block, tasks

        return self._release_phases(plan, context, rng, jobs, "Pop-Localize EM-PGM phases")


def _run_em_block(mechanism, plan, rows, rng):
    """One EM-PGM block (a module-level function, so executors can ship it)."""
    return mechanism.release(plan, rows, rng)


def _probe(payload, point) -> bool:
    """The executor's probe job (see :meth:`LocalizedDoubleOutputPerturbation.preflight`):
    unpickles a block job's public parts and projects the public initial point."""
    _, _, project, _ = payload
    return bool(np.all(np.isfinite(project(np.asarray(point, float)))))


def _run_block(mechanism, plan, solve, project, rng, domain):
    """One Double-OutputPert block (a module-level function, so executors can ship it). Its
    solvers batch what they can with the other blocks' (:mod:`dpcvx._batching`: in the calling
    process; alone on an executor, with the same result)."""
    with block_scope():
        return mechanism._release(plan, solve, project, rng, domain)
