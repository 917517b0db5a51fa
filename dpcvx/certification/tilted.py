"""Certified solves of tilted ERM (paper 002, Section 5.1; Li et al.'s TERM):

    F_tau(w) = (1/tau) log( (1/n) sum_i exp(tau f(w, z_i)) ) + (lam/2) ||w - w0||^2   over W.

The program is the stamped per-example block with an exponential-cone epigraph of the
log-sum-exp: ``s_i >= f_i`` (each example's block), ``v_i >= exp(tau s_i - t)``,
``sum_i v_i <= 1``, minimize ``t / tau`` plus the regularizer. dpcvx certifies the answer
itself:

- **upper bound**: ``F_tau`` at an exactly feasible point, from the user's own loss;
- **lower bound** (Gibbs' variational principle): for ANY weights ``p`` in the simplex,
  ``F_tau(w) >= sum_i p_i f_i(w) - KL(p || uniform) / tau`` for every ``w``, and each
  ``f_i >= <s_i, w> + beta_i`` (the same valid-by-construction minorants as plain ERM), so
  ``min F_tau >= sum_i p_i beta_i + min_W <sum_i p_i s_i, w> + (lam/2)||w - w0||^2 - KL/tau``.
  dpcvx takes ``p = softmax(tau f(w_hat))``; any other choice would still be valid.

**The max-loss (``tilt = math.inf``; paper 002, Section 5.1: ``tau -> inf``).**
``F_inf(w) = max_i f(w, z_i) + (lam/2) ||w - w0||^2``, solved as the epigraph program
``s_i >= f_i``, ``t >= s_i``, minimize ``t`` plus the regularizer (a linear program in the
stamped blocks: no exponential cone). Certificate: for ANY ``p`` in the simplex,
``max_i f_i(w) >= sum_i p_i f_i(w)`` (Gibbs' bound with ``KL/tau = 0``), so
``min F_inf >= sum_i p_i beta_i + min_W <sum_i p_i s_i, w> + (lam/2)||w - w0||^2``; dpcvx
takes ``p`` = the solver's duals of the rows ``t >= s_i``, clipped at 0 and normalized (the
arg-max indicator of ``f(w_hat)`` if they vanish); any other choice would still be valid.

**The stable gap.** Both bounds above carry margins relative to the losses' values, so one
loss of 1e12 would cost every solve about 1e-12 times it. Each certificate also computes the
same gap as a sum of stable duality gaps (:mod:`dpcvx.certification.tilted_gap`: Gibbs' slack
``KL(q || pi)/tau`` from derivative-based value errors, plus a weighted ERM's stable gap), and
the smaller counts.

**Solve paths.** Smooth losses run Newton's method on the tilted objective first
(:func:`_smooth_tilted`): under an extension, on the relaxed extension where some examples
are steeper than C, with rounds that keep the copies leaving W in it (:class:`_Rounds`); the
max-loss by continuation over the tilt (:class:`_MaxPath`). Piecewise-linear losses run it
on their log-sum-exp smoothing (:func:`_pieces_tilted`). The conic program is the
fallback, with its far pieces moved next to the ball first
(:func:`dpcvx.certification.solve.recentered_program`) and each example's constant added back
inside the exponentials (or the max-loss epigraph), less the largest (:func:`_offsets`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from types import MappingProxyType
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp, softmax

from dpcvx.certification import solve as ladder
from dpcvx.certification.certificate import (
    ROUNDING,
    CertifiedSolution,
    _minorants,
    _term_duals,
    lower_from_gap,
)
from dpcvx.certification.extension import extension_bounds
from dpcvx.certification.lipschitz import lipschitz_bounds
from dpcvx.certification.smoothed import SmoothedPieces
from dpcvx.certification.stable import _per_example, _stable_rows, per_example_values
from dpcvx.certification.tilted_gap import tilted_stable_gap
from dpcvx.compilation.solvers import RawSolution, solve_program
from dpcvx.compilation.stamp import StampedProgram, segments, stamp, stamp_parts
from dpcvx.compilation.template import ConeLayout, DomainBlock, Template
from dpcvx.errors import CertificationError, SolverError
from dpcvx.modeling.declaration import Declaration
from dpcvx.modeling.domains import row_norms
from dpcvx.modeling.smooth import RECENTER_RATIO

__all__ = ["certified_tilted_solve"]

_EPS = np.finfo(float).eps

_FAILURE = (
    "dpcvx could not certify the tilted-ERM solve to its accuracy target (fixed from public "
    "quantities). Nothing was released and the budget stays spent. The failure itself depends "
    "on the data: do not retry on the same data without charging the budget again."
)


def _tilted_program(
    prog: StampedProgram,
    tilt: float,
    lam: float,
    w0: np.ndarray,
    null: int = 0,
    offsets: np.ndarray | None = None,
) -> tuple[StampedProgram, int]:
    """The exponential-cone program (columns ``[u, s, t, v]``, plus ``v0`` when ``null``
    examples enter with the zero loss: ``v0 >= exp(-t)`` counted ``null`` times in the sum);
    returns it and ``n_var``. ``offsets`` (one per example, then one for the null examples)
    are added to the losses inside the exponentials (:func:`_offsets`)."""
    n, d = prog.n, prog.d
    A = sp.csr_matrix(prog.A)
    n_var = A.shape[1]
    cols = n_var + 2 * n + 1 + (1 if null else 0)
    s0, t0, v0 = n_var, n_var + n, n_var + n + 1
    segs = {kind: (start, size) for kind, start, size in segments(prog.cones)}

    def widen(block):
        return sp.hstack([block, sp.csr_matrix((block.shape[0], cols - n_var))], format="csr")

    zs, zn = segs["zero"]
    ns_, nn = segs["nonneg"]
    ss, sn = segs["soc"]
    es, en = segs["exp"]
    eye = sp.identity(n, format="csr")
    # s_i - C_i u - c0_i >= 0   (slack = b - A x)
    rows_fit = sp.hstack(
        [
            sp.csr_matrix(prog.C_obj),
            -eye,
            sp.csr_matrix((n, 1)),
            sp.csr_matrix((n, cols - n_var - n - 1)),
        ],
        format="csr",
    )
    b_fit = -np.asarray(prog.c0_obj, float)
    sum_vals = (
        np.ones((1, n)) if not null else np.concatenate([np.ones((1, n)), [[float(null)]]], axis=1)
    )
    rows_sum = sp.hstack([sp.csr_matrix((1, n_var + n + 1)), sp.csr_matrix(sum_vals)], format="csr")
    # (tau s_i - t, 1, v_i) in the exponential cone: v_i >= exp(tau s_i - t)
    r = np.arange(n)
    exp_rows = sp.csr_matrix(
        (
            np.concatenate([-tilt * np.ones(n), np.ones(n), -np.ones(n)]),
            (
                np.concatenate([3 * r, 3 * r, 3 * r + 2]),
                np.concatenate([s0 + r, np.full(n, t0), v0 + r]),
            ),
        ),
        shape=(3 * n, cols),
    )
    b_exp = np.zeros(3 * n)
    b_exp[1::3] = 1.0
    if offsets is not None:  # v_i >= exp(tau (s_i + o_i) - t)
        b_exp[0::3] = tilt * offsets[:n]
    if null:  # (-t, 1, v0) in the exponential cone: v0 >= exp(-t)
        extra = sp.csr_matrix(
            (np.array([1.0, -1.0]), (np.array([0, 2]), np.array([t0, cols - 1]))), shape=(3, cols)
        )
        exp_rows = sp.vstack([exp_rows, extra], format="csr")
        first = 0.0 if offsets is None else tilt * float(offsets[n])
        b_exp = np.concatenate([b_exp, [first, 1.0, 0.0]])
    A_new = sp.vstack(
        [
            widen(A[zs : zs + zn]),
            widen(A[ns_ : ns_ + nn]),
            rows_fit,
            rows_sum,
            widen(A[ss : ss + sn]),
            widen(A[es : es + en]),
            exp_rows,
        ],
        format="csc",
    )
    b = prog.b
    b_new = np.concatenate(
        [b[zs : zs + zn], b[ns_ : ns_ + nn], b_fit, [1.0], b[ss : ss + sn], b[es : es + en], b_exp]
    )
    q = np.zeros(cols)
    q[:d] = -lam * np.asarray(w0, float)
    q[t0] = 1.0 / tilt
    q0 = lam / 2 * float(np.sum(np.asarray(w0, float) ** 2)) - math.log(n + null) / tilt
    P = sp.csc_matrix((np.full(d, float(lam)), (np.arange(d), np.arange(d))), shape=(cols, cols))
    cones = ConeLayout(
        zero=prog.cones.zero,
        nonneg=prog.cones.nonneg + n + 1,
        soc=prog.cones.soc,
        exp=prog.cones.exp + n + (1 if null else 0),
    )
    # split rows move: zero rows keep their place; nonneg rows keep theirs; soc/exp shift
    shift = n + 1

    def moved(rows: np.ndarray | None) -> np.ndarray | None:
        if rows is None:
            return None
        return np.where(rows >= ns_ + nn, rows + shift, rows)

    split_rows = tuple(tuple(moved(r_) for r_ in rows_t) for rows_t in prog.split_rows)
    out = StampedProgram(
        P=P, q=q, q0=q0, A=A_new, b=b_new, cones=cones, d=d, n=n, split_rows=split_rows
    )
    return out, n_var


def _max_program(
    prog: StampedProgram,
    lam: float,
    w0: np.ndarray,
    null: int = 0,
    offsets: np.ndarray | None = None,
) -> tuple[StampedProgram, int, np.ndarray]:
    """The max-loss epigraph program (columns ``[u, s, t]``): ``s_i >= C_i u + c0_i`` (each
    example's block), ``t >= s_i``, and ``t >= 0`` when ``null`` examples enter with the zero
    loss; minimize ``t`` plus the regularizer. Returns it, ``n_var`` and the rows (of the new
    program) of ``t >= s_i`` (then ``t >= 0``), whose duals are the simplex weights.
    ``offsets`` (as for :func:`_tilted_program`): ``t >= s_i + o_i``."""
    n, d = prog.n, prog.d
    A = sp.csr_matrix(prog.A)
    n_var = A.shape[1]
    cols = n_var + n + 1
    t0 = n_var + n
    segs = {kind: (start, size) for kind, start, size in segments(prog.cones)}

    def widen(block):
        return sp.hstack([block, sp.csr_matrix((block.shape[0], cols - n_var))], format="csr")

    zs, zn = segs["zero"]
    ns_, nn = segs["nonneg"]
    ss, sn = segs["soc"]
    es, en = segs["exp"]
    eye = sp.identity(n, format="csr")
    # s_i - C_i u - c0_i >= 0   (slack = b - A x)
    rows_fit = sp.hstack([sp.csr_matrix(prog.C_obj), -eye, sp.csr_matrix((n, 1))], format="csr")
    b_fit = -np.asarray(prog.c0_obj, float)
    # t - s_i >= 0, then t >= 0 for the null examples
    k = n + (1 if null else 0)
    t_col = -np.ones((k, 1))
    s_part = sp.vstack([eye, sp.csr_matrix((k - n, n))], format="csr")
    rows_max = sp.hstack([sp.csr_matrix((k, n_var)), s_part, sp.csr_matrix(t_col)], format="csr")
    A_new = sp.vstack(
        [
            widen(A[zs : zs + zn]),
            widen(A[ns_ : ns_ + nn]),
            rows_fit,
            rows_max,
            widen(A[ss : ss + sn]),
            widen(A[es : es + en]),
        ],
        format="csc",
    )
    b = prog.b
    b_max = np.zeros(k) if offsets is None else -np.asarray(offsets[:k], float)
    b_new = np.concatenate(
        [b[zs : zs + zn], b[ns_ : ns_ + nn], b_fit, b_max, b[ss : ss + sn], b[es : es + en]]
    )
    q = np.zeros(cols)
    q[:d] = -lam * np.asarray(w0, float)
    q[t0] = 1.0
    q0 = lam / 2 * float(np.sum(np.asarray(w0, float) ** 2))
    P = sp.csc_matrix((np.full(d, float(lam)), (np.arange(d), np.arange(d))), shape=(cols, cols))
    cones = ConeLayout(
        zero=prog.cones.zero,
        nonneg=prog.cones.nonneg + n + k,
        soc=prog.cones.soc,
        exp=prog.cones.exp,
    )
    shift = n + k

    def moved(rows: np.ndarray | None) -> np.ndarray | None:
        if rows is None:
            return None
        return np.where(rows >= ns_ + nn, rows + shift, rows)

    split_rows = tuple(tuple(moved(r_) for r_ in rows_t) for rows_t in prog.split_rows)
    out = StampedProgram(
        P=P, q=q, q0=q0, A=A_new, b=b_new, cones=cones, d=d, n=n, split_rows=split_rows
    )
    return out, n_var, zn + nn + n + np.arange(k)


def _simplex_weights(duals: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The solver's duals of ``t >= s_i`` (and ``t >= 0``) made a point of the simplex:
    clipped at 0 and normalized; the arg-max indicator of ``values`` if they vanish. Any
    point of the simplex gives a valid lower bound, so this only shapes the gap."""
    p = np.maximum(np.nan_to_num(np.asarray(duals, float)), 0.0)
    total = float(np.sum(p))
    if not (math.isfinite(total) and total > 0.0):
        p = np.zeros(values.size)
        p[int(np.argmax(values))] = 1.0
        return p
    return p / total


def certified_tilted_solve(
    decl: Declaration,
    template: Template,
    domain_block: DomainBlock,
    *,
    tilt: float,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    solver: str | None = None,
    private: bool = False,
    extension: float | None = None,
    plain_template: Template | None = None,
) -> CertifiedSolution:
    """Solve and certify tilted ERM (module docstring). ``accuracy=None`` returns the first
    certificate; otherwise the fixed ladder (tight Clarabel, then ECOS, then SCS, all at their
    tightest) runs until the gap meets it, or :class:`CertificationError` is raised (one fixed
    text when ``private``).

    With ``extension=C`` (``template`` then the Lipschitz extension's, ``plain_template`` the
    plain loss's) the losses are ``f_C`` (paper 000, eq. (5)): examples certified
    C-Lipschitz on W keep their plain block (there ``f_C = f``), the others get the copy
    ``y_i``, and the certificate is Gibbs' bound with the extension's per-example minorants
    ``f_C(w') >= <g_i, w'> + phi_i`` (``||g_i|| <= C``) and upper bounds.

    A program over the ladder's size limit (:data:`dpcvx.certification.solve.MAX_PROGRAM_NNZ`,
    counted from ``n`` and the templates only) is not stamped: where the smooth path does not
    certify the target, ``CertificationError``."""
    try:
        size = ladder._conic_size(decl.n, template, plain_template)
        if extension is not None:
            return _solve_extension(
                decl,
                template,
                plain_template,
                domain_block,
                tilt,
                lam,
                np.asarray(w0, float),
                accuracy,
                solver,
                float(extension),
                size,
            )
        return _solve(
            decl, template, domain_block, tilt, lam, np.asarray(w0, float), accuracy, solver, size
        )
    except Exception as exc:  # noqa: BLE001
        if private:
            raise CertificationError(_FAILURE) from None
        raise exc


def _solve(
    decl: Declaration,
    template: Template,
    domain_block: DomainBlock,
    tilt: float,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    solver: str | None,
    size: int = 0,
) -> CertifiedSolution:
    n, d = decl.n, decl.d
    first = _smooth_first(lambda: _smooth_tilted(decl, tilt, lam, w0, accuracy), accuracy)
    if first is not None:
        return first
    _check_size(size)
    base = stamp(
        template,
        domain_block,
        template.theta(decl.derived_values(), n),
        d=d,
        lam=lam,
        w0=w0,
        per_example_objective=True,
    )
    # far pieces moved next to the ball (which the solvers resolve), their constants added back
    dom = decl.domain
    spread = float(np.max(lipschitz_bounds(decl))) * float(dom.radius)
    variants = _variants(base, [(decl, base)], decl, None, spread, 0, tilt)

    def certify(
        raw: RawSolution,
        prog: StampedProgram,
        n_var: int,
        max_rows: np.ndarray | None,
        offsets: np.ndarray | None,
    ) -> CertifiedSolution:
        if max_rows is not None:
            return _certify_max(
                decl, raw.z, raw.x[:n_var], prog, max_rows, lam, w0, accuracy, dict(raw.stats)
            )
        return _certify(decl, raw.x[:n_var], raw.z, prog, tilt, lam, w0, accuracy, dict(raw.stats))

    return _ladder(_programs(variants, tilt, lam, w0, 0, certify), solver, accuracy)


def _variants(
    unmoved: StampedProgram,
    parts: list[tuple[Declaration, StampedProgram]],
    decl: Declaration,
    below: np.ndarray | None,
    spread: float,
    null: int,
    tilt: float,
) -> list[tuple[StampedProgram, np.ndarray | None]]:
    """The programs the ladder tries, with their offsets (:func:`_offsets`): every far piece
    moved, then (where it differs) without the moves of the examples whose loss stays huge
    after them (another of its terms carries the huge value: ``lse([y, x^T w])`` with a label
    of -1e8 is ``y + logistic(x^T w - y)``, whose moved logistic only puts the same constant,
    of the other sign, into its row; which of the two the solvers resolve depends on the
    data, and each is only the solver's problem). Each comes first with the huge values at
    the domain's center out of its rows (:func:`_rows_recentered`), then, where that changed
    it, as it is (where Clarabel stalls on one, it may resolve another: a mixed loss with a
    label of 1e8 at tilt 5 took 60 s without them, ending in SCS, and 0.1 s with them)."""
    moved, change = ladder.recentered_program(unmoved, parts)
    center = np.asarray(decl.domain.center, float)
    at_center = np.concatenate([pd.loss_values(center) for pd, _ in parts])
    limit = RECENTER_RATIO * (1.0 + (spread if math.isfinite(spread) else 0.0))

    def offsets(constants: np.ndarray) -> np.ndarray | None:
        return _offsets(-constants, null, tilt, at_center, below, spread)

    programs = [(moved, change)]
    keep = (change != 0) & ~(np.abs(at_center + change) <= limit)
    if keep.any():
        programs.append(ladder.recentered_program(unmoved, parts, keep))
    # each with the huge values at the center out of its rows first; the programs as they
    # are after them (a solver that stalls on one may resolve another)
    recentred = [_rows_recentered(prog, ch, at_center, limit) for prog, ch in programs]
    out = [(prog, offsets(ch)) for prog, ch in recentred]
    out += [
        (prog, offsets(ch))
        for (prog, ch), (again, _) in zip(programs, recentred)
        if again is not prog
    ]
    return out


def _rows_recentered(
    prog: StampedProgram, change: np.ndarray, at_center: np.ndarray, limit: float
) -> tuple[StampedProgram, np.ndarray]:
    """``prog`` with each example whose value at the domain's center, as the program has it
    (``at_center + change``), exceeds ``limit`` in magnitude (a huge label in a term the moves
    leave, such as the affine ``0.1 (x^T w - y)`` of ``0.5 logistic(r) + 0.25 |r| + 0.1 r``:
    its value of order the label stays in the program) given that value less in its objective
    row, and ``change`` to match (the offsets add it back inside the exponentials, as the
    moves' constants). The program's values at the center are then of order the losses'
    spread over the ball; only the solver's problem changes."""
    if prog.c0_obj is None or not np.all(np.isfinite(at_center)):
        return prog, change
    value = at_center + change
    shift = np.where(np.abs(value) > limit, value, 0.0)
    if not np.any(shift):
        return prog, change
    return replace(prog, c0_obj=np.asarray(prog.c0_obj, float) - shift), change - shift


def _check_size(size: int) -> None:
    """Refuse to stamp a conic program over the ladder's size limit (``size`` counted from
    ``n`` and the templates only: public)."""
    if size > ladder.MAX_PROGRAM_NNZ:
        raise CertificationError(
            f"Tilted ERM's conic program was not stamped: about {size:.3g} nonzeros, more "
            "than dpcvx hands to a conic solver (MAX_PROGRAM_NNZ), and the smooth path did "
            "not apply or did not certify the target."
        )


def _smooth_first(
    run: Callable[[], CertifiedSolution | None], accuracy: float | None
) -> CertifiedSolution | None:
    """The smooth path's certificate where it applies and meets ``accuracy`` (any
    certificate without one), else None: the conic ladder runs. Its failures are guarded."""
    try:
        cert = run()
    except Exception:  # noqa: BLE001 - the conic ladder is the fallback
        return None
    if cert is None or (accuracy is not None and not cert.gap <= accuracy):
        return None
    return cert


def _ladder(
    programs: list[tuple[StampedProgram, Callable[[RawSolution], CertifiedSolution]]],
    solver: str | None,
    accuracy: float | None,
) -> CertifiedSolution:
    """Tight Clarabel, then ECOS, then SCS (all at their tightest), each on every program
    (with its certificate) in turn; every rung guarded, the first certificate meeting
    ``accuracy`` returned."""
    best: CertifiedSolution | None = None
    errors: list[str] = []
    first = solver or "CLARABEL"
    ladder = [(first, True)] + [(s_, True) for s_ in ("ECOS", "SCS") if s_ != first]
    for name, tight in ladder:
        for prog, certify_raw in programs:
            try:
                cert = certify_raw(solve_program(prog, name, tight=tight))
            except Exception as exc:  # noqa: BLE001 - every rung is guarded
                errors.append(f"{name}: {type(exc).__name__}: {exc}")
                continue
            if best is None or cert.gap < best.gap:
                best = cert
            if accuracy is None or cert.gap <= accuracy:
                return cert
    if best is None:
        raise CertificationError("Every solver failed on the tilted program: " + "; ".join(errors))
    raise CertificationError(
        f"dpcvx could not certify the tilted-ERM solve to {accuracy:.3g}: best gap {best.gap:.3g}."
    )


#: the argument universe of tilted extension solves (see
#: :data:`dpcvx.certification.solve.UNIVERSE_ARGUMENT`), smaller than plain ERM's: the tilted
#: objective weighs each example by its loss's value, which float64 resolves from the terms'
#: own arguments only to about ``eps`` times their size. Where terms cancel (``log_sum_exp([y,
#: x^T w])`` is ``logistic(x^T w - y) + y``) one label of -1e15 left a value error near 0.1
#: and the releases aborted (n = 100 to 1000, d = 4 and 10, a ball or a box), as did a value
#: of 1e30 (``logistic(r) + 0.2 r``); from 1e8 to 1e14 they release (the tests' neighbours
#: with labels of 1e12 stay inside, a hundred times below where the aborts began)
TILTED_ARGUMENT = 1e13


def _solve_extension(
    decl: Declaration,
    template: Template,
    plain_template: Template | None,
    domain_block: DomainBlock,
    tilt: float,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    solver: str | None,
    C: float,
    size: int = 0,
) -> CertifiedSolution:
    from dpcvx.certification.solve import _regularizer_only, universe_indices

    # the public data universe of extension solves: an example whose loss dpcvx cannot show
    # to be K C-Lipschitz on W enters with the zero loss (an exp(0) term of the tilted sum),
    # as does one with an argument past TILTED_ARGUMENT
    if size > ladder.MAX_PROGRAM_NNZ and not _writes_extension(decl, tilt, lam, accuracy, C):
        # steep examples take the conic program: where it is too large to stamp, refused
        # for every dataset alike (before the universe's cut), never on a neighbour only
        _check_size(size)
    kept = universe_indices(decl, C, argument=TILTED_ARGUMENT)
    null = 0 if kept is None else decl.n - kept.size
    if kept is not None and kept.size == 0:
        return _regularizer_only(decl, lam=lam, w0=w0, accuracy=accuracy, w_domain=None)
    if kept is not None:
        decl = decl.subset(kept)
    n, d = decl.n, decl.d
    first = _smooth_first(lambda: _smooth_tilted(decl, tilt, lam, w0, accuracy, C, null), accuracy)
    if first is not None:
        return first
    _check_size(size)
    values = decl.derived_values()
    if plain_template is None:  # no plain block: every example gets the extension's copy
        groups = [(np.arange(n), template)]
    else:
        light = lipschitz_bounds(decl) <= C * (1 + 1e-12)
        both = [(np.flatnonzero(light), plain_template), (np.flatnonzero(~light), template)]
        groups = [(idx, tmpl) for idx, tmpl in both if idx.size]
    parts = [(tmpl, tmpl.theta(values, n)[idx]) for idx, tmpl in groups]
    base, stamped = stamp_parts(
        parts, domain_block, d=d, lam=lam, w0=w0, per_example_objective=True
    )
    part_decls = [decl if idx.size == n else decl.subset(idx) for idx, _ in groups]
    # far pieces moved next to the ball (which the solvers resolve), their constants added back
    # (f_C is C-Lipschitz: it changes by at most C R over the ball)
    radius = float(decl.domain.radius)
    below = np.concatenate(
        [
            np.zeros(pd.n) if tmpl is plain_template else lipschitz_bounds(pd) * radius
            for pd, (_, tmpl) in zip(part_decls, groups)
        ]
    )
    spread = C * radius
    variants = _variants(base, list(zip(part_decls, stamped)), decl, below, spread, null, tilt)
    # the program inserts nonnegative rows (n + 1 tilted; 2n, plus one with null examples,
    # max-loss) after the base's nonnegative rows
    cut = base.cones.zero + base.cones.nonneg
    shift = (2 * n + (1 if null else 0)) if math.isinf(tilt) else n + 1

    def moved(rows: np.ndarray | None) -> np.ndarray | None:
        return None if rows is None else np.where(rows >= cut, rows + shift, rows)

    views = [
        replace(
            v,
            split_rows=tuple(tuple(moved(r) for r in rt) for rt in v.split_rows),
            soc_rows=moved(v.soc_rows),
        )
        for v in stamped
    ]

    def certify(
        raw: RawSolution,
        prog: StampedProgram,
        n_var: int,
        max_rows: np.ndarray | None,
        offsets: np.ndarray | None,
    ) -> CertifiedSolution:
        return _certify_extension(
            decl,
            part_decls,
            views,
            raw.x,
            raw.z,
            n_var,
            tilt,
            lam,
            w0,
            accuracy,
            dict(raw.stats),
            C,
            null,
            max_rows,
            offsets,
        )

    return _ladder(_programs(variants, tilt, lam, w0, null, certify), solver, accuracy)


def _programs(
    variants: list[tuple[StampedProgram, np.ndarray | None]],
    tilt: float,
    lam: float,
    w0: np.ndarray,
    null: int,
    certify: Callable[..., CertifiedSolution],
) -> list[tuple[StampedProgram, Callable[[RawSolution], CertifiedSolution]]]:
    """Per variant of the moved base (:func:`_variants`), the tilted or max-loss program and
    its certificate ``certify(raw, prog, n_var, max_rows, offsets)`` bound to it."""
    out: list[tuple[StampedProgram, Callable[[RawSolution], CertifiedSolution]]] = []
    for moved, offsets in variants:
        max_rows: np.ndarray | None = None
        if math.isinf(tilt):
            prog, n_var, max_rows = _max_program(moved, lam, w0, null, offsets)
        else:
            prog, n_var = _tilted_program(moved, tilt, lam, w0, null, offsets)
        bound = partial(certify, prog=prog, n_var=n_var, max_rows=max_rows, offsets=offsets)
        out.append((prog, bound))
    return out


#: an example whose moved constant puts it this far below the largest, times ``1/tau``, keeps
#: this much in its exponential (``exp(-760)`` is zero in floating point); for the max-loss,
#: ``MAX_OFFSET`` below the largest
FLAT_TILT = 760.0
MAX_OFFSET = 1e4


def _offsets(
    constants: np.ndarray,
    null: int,
    tilt: float,
    at_center: np.ndarray | None = None,
    below: np.ndarray | None = None,
    spread: float = math.inf,
) -> np.ndarray | None:
    """The offsets that add the moved terms' constants back to the losses the tilted and
    max-loss programs see (``f_i = moved value + constants_i``), less their largest (the
    null examples' is 0), so a loss of 1e12 that takes all the weight is of order one in the
    program. None where nothing moved.

    An example whose offset would put a huge constant into its row (``-1e12``: the solvers
    cannot resolve it) is raised to ``FLAT_TILT / tau`` (``MAX_OFFSET`` for the max-loss)
    below the top only where its weight is certainly negligible on the whole ball: its loss
    at the domain's center (``at_center``, an upper bound for an example on its extension
    copy) plus the losses' largest change over the ball (``spread``, twice for each side)
    stays that far below the largest lower bound of a loss at the center (``at_center``
    less ``below``: zero for a plain block, ``L_i R`` for an example on its copy, whose
    ``f_C(c) >= min_W f >= f(c) - L_i R``; the null examples' zero). Otherwise the offset
    stays as it is."""
    if not np.any(constants):
        return None
    extra = 1 if null else 0
    raw = np.concatenate([np.nan_to_num(constants), np.zeros(extra)])
    ref = float(np.max(raw))
    c = raw - ref
    if at_center is None or not math.isfinite(spread):
        return c
    # each example's loss at the center, less the constants' largest (the program's value
    # there with the offset as it is)
    value = np.concatenate([np.asarray(at_center, float), np.zeros(extra)]) - ref
    low = value - np.concatenate(
        [np.zeros(len(constants)) if below is None else np.asarray(below, float), np.zeros(extra)]
    )
    if not (np.all(np.isfinite(value)) and np.any(np.isfinite(low))):
        return c
    top = float(np.max(low[np.isfinite(low)]))
    gap = (MAX_OFFSET if math.isinf(tilt) else FLAT_TILT / tilt) + 4.0 * spread
    dead = value < top - gap
    # moved: its program value at the center becomes ``top - gap``, still negligible
    moved_value = value - c  # the example's own (moved) loss at the center
    return np.where(dead, np.maximum(c, top - gap - moved_value), c)


def _certify_extension(
    decl: Declaration,
    part_decls: list[Declaration],
    views: list[StampedProgram],
    x: np.ndarray,
    z_full: np.ndarray,
    n_var: int,
    tilt: float,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    stats: dict[str, Any],
    C: float,
    null: int = 0,
    max_rows: np.ndarray | None = None,
    offsets: np.ndarray | None = None,
) -> CertifiedSolution:
    """Gibbs' bound for tilted ERM on ``f_C``: for ANY ``p`` in the simplex,
    ``F_tau(w) >= sum_i p_i f_C(w, z_i) - KL(p || uniform) / tau``, and each
    ``f_C(w, z_i) >= <g_i, w> + phi_i`` on W; the upper bound is ``F_tau`` of the
    per-example upper bounds (``F_tau`` is increasing in every loss)."""
    n = decl.n
    n_all = n + null  # the examples outside the universe enter with the zero loss
    dom = decl.domain
    w_hat = dom.make_feasible(np.asarray(x[: decl.d], float))
    # the solver's epigraph values s_i estimate f_C(w_hat, z_i): tilted weights for the duals
    s_hat = np.nan_to_num(np.asarray(x[n_var : n_var + n], float))
    shift = np.zeros(n + (1 if null else 0)) if offsets is None else offsets
    if null:
        shift = np.concatenate([shift[:n], np.full(null, shift[n])])
    s_hat = s_hat + shift[:n]  # the program's values with the moved constants back
    if max_rows is not None:  # max-loss: the simplex weights are the duals of t >= s_i
        p_max = _simplex_weights(
            np.asarray(z_full, float)[max_rows], np.concatenate([s_hat, shift[n:]])
        )
        p_hat = p_max[:n]
    else:
        p_hat = softmax(np.concatenate([tilt * s_hat, tilt * shift[n:]]))[:n]
    z = np.array(np.nan_to_num(z_full), float)
    offset = 0
    for view in views:
        k = view.n
        scale = np.maximum(n_all * p_hat[offset : offset + k], 1e-300)[:, None]
        for rows_t in view.split_rows:
            for rows in rows_t:
                if rows is not None:
                    z[rows] = z[rows] / scale
        if view.soc_rows is not None:
            z[view.soc_rows] = z[view.soc_rows] / scale
        offset += k
    parts = []
    for pd, view in zip(part_decls, views):
        piece = extension_bounds(pd, view, x, z, w_hat, C, n_all)
        Y = piece[3] if view.y_cols is not None else None
        g_i = piece[2] if view.soc_rows is not None else None
        parts.append((pd, piece, Y, g_i, _term_duals(pd, view, z, n_all)))
    simplex = None
    if max_rows is not None:  # the row t >= 0 weighs the null examples (one stands in)
        simplex = np.concatenate([p_max[:n], p_max[n:], np.zeros(null - p_max[n:].size)])
    return _extension_certificate(
        decl, w_hat, parts, tilt, lam, w0, accuracy, stats, C, null, simplex
    )


def _extension_certificate(
    decl: Declaration,
    w_hat: np.ndarray,
    parts: list[tuple[Declaration, tuple, np.ndarray | None, np.ndarray | None, list]],
    tilt: float,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    stats: dict[str, Any],
    C: float,
    null: int,
    simplex: np.ndarray | None,
) -> CertifiedSolution:
    """:func:`_certify_extension`'s bounds from each group of examples' ``(declaration,
    extension bounds, copies Y or None, cone duals g or None, multipliers)``; ``simplex``:
    the max-loss weights of all ``n + null`` examples (None for tilted ERM)."""
    n = decl.n
    n_all = n + null
    dom = decl.domain
    pieces = [part[1] for part in parts]
    f_up, g, mag_i, phi = (np.concatenate([pc[k] for pc in pieces]) for k in (0, 2, 4, 5))
    reg = lam / 2 * float(np.sum((w_hat - w0) ** 2))
    if simplex is not None:  # max-loss: max_i f_i >= sum_i p_i f_i for p in the simplex
        upper_raw = max(float(np.max(f_up)), 0.0 if null else -math.inf) + reg
        total_p = float(np.sum(simplex))
        p = simplex[:n] / total_p  # the null examples' minorant is 0 (slope 0, intercept 0)
        kl, kl_term = 0.0, 0.0
    else:
        scores = np.concatenate([tilt * f_up, np.zeros(null)])  # null examples: f = 0 exactly
        upper_raw = float(logsumexp(scores) - math.log(n_all)) / tilt + reg
        p_all = softmax(scores)
        p = p_all[:n]  # the null examples' minorant is 0 (slope 0, intercept 0)
        kl = float(
            np.sum(np.where(p_all > 0, p_all * np.log(np.maximum(n_all * p_all, 1e-300)), 0.0))
        )
        kl_term = kl / tilt
    q_min = dom.min_linear_quadratic(p @ g, lam, w0, hint=w_hat)
    lower_raw = float(p @ phi) + q_min - kl_term
    mag = 1.0 + float(p @ mag_i) + reg + abs(q_min) + kl_term
    if simplex is not None:  # the max may come from an example of small weight
        mag += abs(upper_raw)
    margin = ROUNDING * mag * (1 + n * 1e-4)
    stats.update(tilt=tilt, kl=kl, extension_C=C, null_examples=null)
    radius = _radius(upper_raw - lower_raw + 2 * margin, lam)

    def stable() -> float | None:
        rows = []
        for pd, _, Y, g_i, thetas in parts:
            rad = radius if Y is None else 1e-6 * (1.0 + float(np.max(np.abs(Y))))
            pts = w_hat if Y is None else Y
            out = _stable_rows(pd, pts, g_i, thetas, w_hat, C, rad)
            vals = per_example_values(pd, pts)
            if out is None or vals is None:
                return None
            total, g_rows = out
            value, error = vals
            if Y is not None:  # f_C(w_hat) <= f(y_i) + C ||w_hat - y_i||
                dist = C * row_norms(w_hat[None, :] - Y)
                value = value + dist
                error = error + 4 * (decl.d + 4) * _EPS * dist
            # f_C(w_hat) lies within the example's gap below that bound; f_C <= f bounds it
            # too (an example the solver did not weigh may keep a loose copy)
            lo = np.nextafter(value - error - total, -np.inf)
            hi = np.nextafter(value + error, np.inf)
            if Y is not None:
                at_w = per_example_values(pd, w_hat)
                if at_w is not None:
                    hi = np.minimum(hi, np.nextafter(at_w[0] + at_w[1], np.inf))
            rows.append((lo, hi, total, g_rows))
        lower, upper, total = (np.concatenate([r[k] for r in rows]) for k in range(3))
        g_all = np.concatenate([r[3] for r in rows])
        if null:  # outside the universe: the zero loss, exactly
            zeros = np.zeros(null)
            lower, upper, total = (np.concatenate([a, zeros]) for a in (lower, upper, total))
            g_all = np.concatenate([g_all, np.zeros((null, decl.d))])
        return tilted_stable_gap(
            lower,
            upper,
            total,
            g_all,
            np.abs(g_all),
            w_hat,
            tilt=tilt,
            lam=lam,
            w0=w0,
            domain=dom,
            w_domain=dom,
            simplex=simplex,
        )

    return _finish(w_hat, upper_raw, lower_raw, margin, stable, lam, w0, accuracy, stats)


def _certify(
    decl: Declaration,
    x: np.ndarray,
    z_full: np.ndarray | None,
    prog: StampedProgram | None,
    tilt: float,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    stats: dict[str, Any],
    thetas: list | None = None,
) -> CertifiedSolution:
    """Gibbs' bound for tilted ERM (module docstring) at the program's point ``x`` with the
    solver's duals ``z_full``, or (``prog`` None) at a point found without a program with
    the multipliers ``thetas`` (as for :func:`~dpcvx.certification.certificate.certify`)."""
    n = decl.n
    dom = decl.domain
    w_hat = dom.make_feasible(np.asarray(x[: decl.d], float))
    f = decl.loss_values(w_hat)
    reg = lam / 2 * float(np.sum((w_hat - w0) ** 2))
    upper_raw = float(logsumexp(tilt * f) - math.log(n)) / tilt + reg
    p = softmax(tilt * f)
    kl = float(np.sum(np.where(p > 0, p * np.log(np.maximum(n * p, 1e-300)), 0.0)))
    z = None
    if prog is not None and z_full is not None:
        # the split rows of example i carry p_i times its ERM duals: rescale them to 1/n
        z = np.array(np.nan_to_num(z_full), float)
        for rows_t in prog.split_rows:
            for rows in rows_t:
                if rows is not None:
                    z[rows] = z[rows] / np.maximum(n * p[:, None], 1e-300)
        thetas = _term_duals(decl, prog, z)
    rows_w = np.broadcast_to(w_hat, (n, decl.d)).copy()
    s, beta, scale, _ = _minorants(decl, None, None, rows_w, thetas=thetas)
    q_min = dom.min_linear_quadratic(p @ s, lam, w0, hint=w_hat)
    lower_raw = float(p @ beta) + q_min - kl / tilt
    mag = 1.0 + float(p @ (np.abs(f) + np.abs(beta) + scale)) + reg + abs(q_min) + kl / tilt
    margin = ROUNDING * mag * (1 + n * 1e-4)
    stats.update(tilt=tilt, kl=kl)
    radius = _radius(upper_raw - lower_raw + 2 * margin, lam)
    guide = thetas if thetas is not None else [None] * len(decl.terms)
    return _finish(
        w_hat,
        upper_raw,
        lower_raw,
        margin,
        lambda: _stable_plain(decl, w_hat, guide, radius, tilt, lam, w0),
        lam,
        w0,
        accuracy,
        stats,
    )


def tilted_refusal(
    decl: Declaration,
    templates: Callable[[], tuple[Template, Template | None]],
    *,
    tilt: float,
    lam: float,
    accuracy: float | None,
    C: float,
) -> str | None:
    """Why a private tilted solve of the C-Lipschitz extension on these ``decl.n`` examples is
    refused for every dataset (None: it is not): the smooth path writes no extension of this
    loss's form (:func:`_writes_extension`) and the conic program is over the size limit.
    ``templates`` gives the extension's and the plain loss's templates (compiled only when
    needed). Public quantities only (a mechanism asks it before the budget is reserved)."""
    if _writes_extension(decl, tilt, lam, accuracy, C):
        return None
    size = ladder._conic_size(decl.n, *templates())
    if size <= ladder.MAX_PROGRAM_NNZ:
        return None
    return ladder._NO_EXTENSION_PATH.format(n=decl.n, size=size)


def _writes_extension(
    decl: Declaration, tilt: float, lam: float, accuracy: float | None, C: float
) -> bool:
    """Whether the smooth path writes the C-Lipschitz extension of this loss for every dataset
    of its form, steep examples included (public structure: the conditions of
    :func:`_smooth_tilted` and :func:`_pieces_tilted` with a relaxed extension), evaluated
    on public probe data of the data's shapes (:func:`~dpcvx.certification.arrowhead._probe`),
    never on the data's values."""
    from dpcvx.certification.arrowhead import _probe, extension_pieces, piecewise_model
    from dpcvx.modeling.gradients import is_smooth
    from dpcvx.modeling.smooth import extension_model, smooth_model

    probe = _probe(decl)
    if probe is None:
        return False
    decl = probe
    dom = decl.domain
    if lam <= 0 or dom.kind not in ("l2_ball", "box") or ladder._region(dom) is None:
        return False
    if (math.isinf(tilt) and accuracy is None) or decl.d > ladder.NEWTON_MAX_D:
        return False
    if is_smooth(decl):
        model = smooth_model(decl)
        return model is not None and extension_model(model, C) is not None
    if accuracy is None or not accuracy > 0:
        return False
    source = piecewise_model(decl, share=False)
    return source is not None and source.whole and extension_pieces(source, C) is not None


def _smooth_tilted(
    decl: Declaration,
    tilt: float,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    C: float | None = None,
    null: int = 0,
) -> CertifiedSolution | None:
    """Tilted ERM on the smooth path, or None where it does not apply (public structure
    only: a finite tilt, or the max-loss with an accuracy target (:class:`_MaxPath`), smooth
    terms with a second-order model (else :func:`_pieces_tilted`), ``lam > 0``, a ball or box,
    and under an extension either every example certified C-Lipschitz on W, where ``f_C =
    f``, or one smooth scalar atom per example, whose relaxed extension
    (:func:`~dpcvx.modeling.smooth.extension_model`) the rounds of :class:`_Rounds` solve,
    on a ball or a box with finite bounds).

    Newton's method (:func:`~dpcvx.certification.solve.smooth_minimize`) runs on
    :class:`~dpcvx.modeling.smooth.TiltedModel` over the solver's model with the far
    arguments moved (:func:`~dpcvx.modeling.smooth.recentered`), their constants added back
    to the tilted weights; the point is certified with the loss's own derivatives as
    multipliers, as plain ERM's smooth path does."""
    from dpcvx.modeling.gradients import is_smooth
    from dpcvx.modeling.smooth import TiltedModel, extension_model, recentered, smooth_model

    dom = decl.domain
    if lam <= 0 or dom.kind not in ("l2_ball", "box"):
        return None
    if math.isinf(tilt) and accuracy is None:
        return None
    if decl.d > ladder.NEWTON_MAX_D:
        return None
    if not is_smooth(decl):
        return _pieces_tilted(decl, tilt, lam, w0, accuracy, C, null)
    model = smooth_model(decl)
    if model is None:
        return None
    relaxed = None
    steep = ladder._relaxed_C(decl, C)
    if steep is not None:
        relaxed = extension_model(model, steep)
        if relaxed is None or ladder._region(dom) is None:
            return None
    start = time.perf_counter()
    solved = model if relaxed is None else relaxed.model
    moved = recentered(solved, dom.center, float(dom.radius))
    center = np.asarray(dom.center, float)
    shifts = np.zeros(decl.n) if moved is solved else solved.values(center) - moved.values(center)
    if math.isinf(tilt):
        assert accuracy is not None
        path = _MaxPath(decl, model, relaxed, moved, np.nan_to_num(shifts), C, null)
        return path.run(lam, w0, accuracy, start)
    tilted = TiltedModel(moved, tilt, np.nan_to_num(shifts), null)
    x, iterations, solver = ladder.smooth_minimize(decl, tilted, lam, w0)
    stats: dict[str, Any] = {
        "solver": solver,
        "iterations": int(iterations),
        "status": "converged",
        "seconds": time.perf_counter() - start,
    }
    if C is None:
        thetas = model.multipliers(x)
        return _certify(decl, x, None, None, tilt, lam, w0, accuracy, stats, thetas)
    if relaxed is None:
        thetas = model.multipliers(x)
        w_hat = dom.make_feasible(x)
        args = (tilt, lam, w0, accuracy, stats, C, null)
        return _at_copies(decl, w_hat, thetas, None, None, *args)[0]
    region = ladder._region(dom)
    assert region is not None  # checked above
    rounds = _Rounds(decl, relaxed, moved, np.nan_to_num(shifts), region, C, tilt, null)
    return rounds.run(x, lam, w0, accuracy, stats, start)


#: the smoothing of piecewise-linear losses starts at this temperature and falls by
#: :data:`TILT_STEP` per stage, to a bias of a tenth of the target (:func:`_pieces_tilted`)
SMOOTHING_START = 1.0


def _pieces_tilted(
    decl: Declaration,
    tilt: float,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    C: float | None,
    null: int,
) -> CertifiedSolution | None:
    """Tilted ERM (or the max-loss) of a piecewise-linear loss (hinge, absolute, pinball,
    epsilon-insensitive: :func:`~dpcvx.certification.arrowhead.piecewise_model`, with no
    affine term apart from its pieces) on its smooth path, or None where it does not apply
    (public structure only: an accuracy target, and under an extension either every example
    certified C-Lipschitz on W, where ``f_C = f``, or, on a ball or a box, a loss whose
    relaxed extension is again piecewise linear
    (:func:`~dpcvx.certification.arrowhead.extension_pieces`), smoothed and certified at its
    copies by :func:`_pieces_extension`).

    Newton's method runs on the tilted sum of the losses smoothed at temperatures ``1, 0.1,
    ...`` (:class:`~dpcvx.certification.smoothed.SmoothedPieces`: each example's smoothed
    loss lies within ``bias * mu`` above its loss), each from the last one's point; from the
    temperature whose bias is ten times the target on, each point is certified for the
    loss itself with the pieces' softmax weights as multipliers, and the first certificate
    meeting the target ends the path, which stops where the bias is a tenth of it. Where a
    stage's exact copies leave W, the stages until that last one are not judged, and the
    rounds of :class:`_PiecesRounds` run at its temperature. The max-loss runs
    :class:`_MaxPath` with the temperature falling as the tilt grows."""
    from dpcvx.certification.arrowhead import extension_pieces, piecewise_model
    from dpcvx.modeling.smooth import TiltedModel

    if accuracy is None or not accuracy > 0:
        return None
    source = piecewise_model(decl, share=False)
    if source is None or not source.whole:
        return None
    model, relaxed = source, None
    dom = decl.domain
    steep = ladder._relaxed_C(decl, C)
    if steep is not None:
        relaxed = extension_pieces(source, steep)
        if relaxed is None or ladder._region(dom) is None:
            return None
        model = relaxed.model
    n = decl.n
    # each example's smoothed loss exceeds its loss by at most bias * mu
    bias = sum(
        t.c * n * (t.b[0].size // n) * math.log(len(t.b)) for t in model.terms if len(t.b) > 1
    )
    if not bias > 0:
        return None
    start = time.perf_counter()
    shifts = np.zeros(n)
    if math.isinf(tilt):  # (its certificate never falls back to the smooth rounds' model)
        path = _MaxPath(decl, model, relaxed, None, shifts, C, null, bias)
        return path.run(lam, w0, accuracy, start)
    best: CertifiedSolution | None = None
    x: np.ndarray | None = None
    steps, mu = 0, SMOOTHING_START
    outside = False  # exact copies left W at a stage's point: the rounds judge the last one
    while True:
        smoothed = SmoothedPieces(model, mu)
        tilted = TiltedModel(smoothed, tilt, shifts, null)
        init = None if x is None else dom.make_feasible(x)
        try:  # a failed stage keeps the best certificate so far
            x, more, solver = ladder.smooth_minimize(decl, tilted, lam, w0, init=init)
        except _STAGE_FAILURES:
            return best
        steps += int(more)
        last = bias * mu <= accuracy / TILT_STEP
        if bias * mu <= TILT_STEP * accuracy and not outside:
            stats = _stage_stats(solver, steps, start, smoothing=mu)
            try:
                if C is None:
                    thetas = smoothed.multipliers(x)
                    cert = _certify(decl, x, None, None, tilt, lam, w0, accuracy, stats, thetas)
                else:
                    cert = _pieces_extension(
                        decl, smoothed, relaxed, x, tilt, lam, w0, accuracy, stats, C, null
                    )
            except _STAGE_FAILURES:
                return best
            if best is None or cert.gap < best.gap:
                best = cert
            if ladder._meets(cert, accuracy):
                return cert
            outside = relaxed is not None and bool(stats.get("copies_outside"))
        if outside and last:
            # the rounds at the last temperature (the smoothing's bias a tenth of the
            # target); the stages between were not judged (their copies left W too)
            stats = _stage_stats(solver, steps, start, smoothing=mu)
            region = ladder._region(dom)
            assert C is not None and region is not None
            rounds = _PiecesRounds(decl, relaxed, mu, region, C, tilt, null)
            got = rounds.run(x, lam, w0, accuracy, stats, start)
            if got is not None and (best is None or got.gap < best.gap):
                best = got
            return best
        if last:
            return best
        mu /= TILT_STEP


def _pieces_extension(
    decl: Declaration,
    smoothed: SmoothedPieces,
    relaxed: Any,
    x: np.ndarray,
    tilt: float,
    lam: float,
    w0: np.ndarray,
    accuracy: float,
    stats: dict[str, Any],
    C: float,
    null: int,
    simplex: np.ndarray | None = None,
) -> CertifiedSolution:
    """:func:`_pieces_tilted`'s certificate of the extension at ``x``: every example as a
    plain block (``relaxed`` None: each certified C-Lipschitz on W), or at its copy of the
    relaxed extension (:class:`~dpcvx.certification.arrowhead.ExtensionPieces`), the exact
    copy in W where that one leaves it (``copies_in``), with the multipliers of the pieces at
    the copies. ``simplex``: the max-loss's weights of all examples (tilted ERM without)."""
    dom = decl.domain
    w_hat = dom.make_feasible(x)
    Y = slopes = None
    if relaxed is None:
        thetas = smoothed.multipliers(x)
    else:
        mus = _softmax_multipliers(smoothed, w_hat)
        region = ladder._region(dom)
        fix = relaxed.copies_in(w_hat, mus, region, exact_own=True)
        if fix is None:
            Y, thetas = relaxed.copies(w_hat, mus)
        else:
            Y, thetas, slopes = fix.Y, fix.thetas, fix.slopes
        stats["extension_copies"] = int(np.count_nonzero(np.any(Y != w_hat[None, :], axis=1)))
        stats["copies_outside"] = 0 if fix is None else int(fix.rows.size)
    args = (tilt, lam, w0, accuracy, stats, C, null, simplex)
    return _at_copies(decl, w_hat, thetas, Y, slopes, *args)[0]


def _softmax_multipliers(smoothed: SmoothedPieces, w: np.ndarray) -> list[np.ndarray]:
    """The smoothed pieces' softmax weights at ``w`` as the arrowhead method's multipliers of
    the model they smooth (the relaxed extension's, for its copies)."""
    return [t.c * P for t, P in zip(smoothed.model.terms, smoothed.weights(w))]


def _at_copies(
    decl: Declaration,
    w_hat: np.ndarray,
    thetas: list,
    Y: np.ndarray | None,
    slopes: np.ndarray | None,
    tilt: float,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    stats: dict[str, Any],
    C: float,
    null: int,
    simplex: np.ndarray | None = None,
) -> tuple[CertifiedSolution, np.ndarray]:
    """The extension's certificate at ``w_hat`` of a point found without a program (every
    example a plain block for ``Y`` None, else at its copy ``y_i``, with the duals ``slopes``
    where given) and the duals ``g_i`` it took; ``simplex``: the max-loss's weights of all
    examples (tilted ERM without)."""
    piece = extension_bounds(
        decl, None, w_hat, None, w_hat, C, decl.n + null, thetas=thetas, copies=Y, slopes=slopes
    )
    part = (decl, piece, None if Y is None else piece[3], None if Y is None else piece[2])
    parts: list[tuple[Declaration, tuple, np.ndarray | None, np.ndarray | None, list]] = [
        (*part, thetas)
    ]
    if simplex is not None:
        tilt = math.inf
    cert = _extension_certificate(
        decl, w_hat, parts, tilt, lam, w0, accuracy, stats, C, null, simplex
    )
    return cert, piece[2]


def _stage_stats(solver: str, steps: int, start: float, **extra: float) -> dict[str, Any]:
    """The solver's report of a smooth path's stage (``start``: the path's clock)."""
    return {
        "solver": solver,
        "iterations": steps,
        "status": "converged",
        "seconds": time.perf_counter() - start,
        **extra,
    }


#: what ends a smooth path's stage (the best certificate so far is kept)
_STAGE_FAILURES = (
    CertificationError,
    SolverError,
    np.linalg.LinAlgError,
    ValueError,
    ArithmeticError,
)

#: the max-loss's smooth path: the tilts grow by this factor from 1, and stop at this many
#: times ``log(n) / accuracy`` (:class:`_MaxPath`)
TILT_STEP = 10.0
TILT_REACH = 1e3
#: the stages of the max-loss's path that run the smoothed pieces' rounds, from the tilt whose
#: slack is the target, besides its last stage (a pinball's met 1e-6 at the second; rounds at
#: every stage spent up to 30 rounds each where they kept missing; in 2 of 600 random cases
#: the last stage met a target the second missed)
PIECES_ROUND_STAGES = 2


class _MaxPath:
    """The max-loss (``tilt = inf``) of smooth losses by continuation: Newton's method on
    tilted ERM (:class:`~dpcvx.modeling.smooth.TiltedModel`) at tilts ``1, 10, 100, ...``,
    each from the last one's point. The tilted objective lies within ``log(n) / tau`` below
    the max-loss, so from the tilt before ``log(n) / accuracy`` on, each point is certified
    for the max-loss itself (:func:`_certify_max_at`, or the extension's certificate), with
    the tilted weights at the point as the simplex weights of Gibbs' bound (any weights give
    a valid bound; at the tilted minimizer these make the linear part vanish, leaving
    ``max_i f_i - sum_i p_i f_i``). The first certificate meeting the target ends the path;
    past :data:`TILT_REACH` times that tilt, the best certificate is returned (the caller
    falls back to the conic program if it misses). Under the extension with examples
    steeper than C, where the relaxed extension's copies leave W, the rounds of
    :class:`_Rounds` run at that tilt (with the max-loss's certificate); the smoothed pieces
    of :func:`_pieces_tilted` are certified at their exact copies
    (:func:`_pieces_extension`), and where that misses, from the tilt whose slack is the
    target on, the rounds of :class:`_PiecesRounds` run at the stage's temperature (at
    :data:`PIECES_ROUND_STAGES` stages and the last). A
    failure inside a stage ends the path with the best certificate so far."""

    def __init__(
        self,
        decl: Declaration,
        model: Any,
        relaxed: Any,
        moved: Any,
        shifts: np.ndarray,
        C: float | None,
        null: int,
        bias: float | None = None,
    ) -> None:
        self.decl, self.model, self.relaxed, self.moved = decl, model, relaxed, moved
        self.shifts, self.C, self.null = shifts, C, null
        self.bias = bias
        self.pieces_rounds = PIECES_ROUND_STAGES  # the stages left to run the pieces' rounds

    def run(
        self, lam: float, w0: np.ndarray, accuracy: float, start: float
    ) -> CertifiedSolution | None:
        from dpcvx.modeling.smooth import TiltedModel

        dom = self.decl.domain
        n_all = max(self.decl.n + self.null, 2)
        need = math.log(n_all) / accuracy
        best: CertifiedSolution | None = None
        x: np.ndarray | None = None
        steps, tau = 0, 1.0
        while True:
            base = self.moved
            if self.bias is not None:  # the pieces smoothed as far as the tilt's own slack
                base = SmoothedPieces(self.model, math.log(n_all) / (tau * self.bias))
            tilted = TiltedModel(base, tau, self.shifts, self.null)
            init = None if x is None else dom.make_feasible(x)
            try:  # a failed stage keeps the best certificate so far
                x, more, solver = ladder.smooth_minimize(self.decl, tilted, lam, w0, init=init)
            except _STAGE_FAILURES:
                return best
            steps += int(more)
            if tau * TILT_STEP >= need:
                stats = _stage_stats(solver, steps, start, path_tilt=tau)
                try:
                    cert = self._stage(x, tilted, base, tau, lam, w0, accuracy, stats, start)
                except _STAGE_FAILURES:
                    return best
                if cert is None:
                    return best
                if self.bias is None:
                    # (the smoothed pieces' path keeps its own point: the next stage's relaxed
                    # model starts better there than at the rounds' point, whose copies are
                    # exact; from it, a pinball's rounds at the next tilt stalled at 3e-6)
                    x = cert.w
                if best is None or cert.gap < best.gap:
                    best = cert
                if ladder._meets(cert, accuracy):
                    return cert
            if tau >= TILT_REACH * need:
                return best
            tau *= TILT_STEP

    def _stage(
        self,
        x: np.ndarray,
        tilted: Any,
        base: Any,
        tau: float,
        lam: float,
        w0: np.ndarray,
        accuracy: float,
        stats: dict[str, Any],
        start: float,
    ) -> CertifiedSolution | None:
        """The max-loss certificate of the stage at tilt ``tau`` from its point ``x``: at
        ``x``, or, where relaxed copies leave W, the best of the rounds at that tilt (for
        the smoothed pieces, from the tilt whose slack ``log(n) / tau`` is the target on,
        with the pieces' smoothing as the stage's: from a tenth of it, absolute and pinball
        max-loss releases on a ball or box of half-width 0.3 at n = 1e4 took 3-4 times as
        long, the rounds at the higher tilts stiffer)."""
        cert = self._certify(x, tilted.weights(x)[1], lam, w0, accuracy, stats, base)
        region = ladder._region(self.decl.domain)
        if self.bias is not None:  # smoothed pieces: certified at their exact copies
            n_all = max(self.decl.n + self.null, 2)
            need = math.log(n_all) / accuracy
            late = tau >= need
            if cert is None or not (late and stats.get("copies_outside")):
                return cert
            final = tau >= TILT_REACH * need  # the path's last stage
            if ladder._meets(cert, accuracy) or not (self.pieces_rounds or final):
                return cert
            self.pieces_rounds = max(self.pieces_rounds - 1, 0)
            assert self.C is not None and region is not None
            pieces = _PiecesRounds(
                self.decl, self.relaxed, base.mu, region, self.C, tau, self.null, max_loss=True
            )
            got = pieces.run(x, lam, w0, accuracy, stats, start)
            return cert if got is None or not got.gap < cert.gap else got
        if cert is not None:
            return cert
        assert self.C is not None and region is not None
        rounds = _Rounds(
            self.decl,
            self.relaxed,
            self.moved,
            self.shifts,
            region,
            self.C,
            tau,
            self.null,
            max_loss=True,
        )
        return rounds.run(x, lam, w0, accuracy, stats, start)

    def _certify(
        self,
        x: np.ndarray,
        pi: np.ndarray,
        lam: float,
        w0: np.ndarray,
        accuracy: float,
        stats: dict[str, Any],
        base: Any,
    ) -> CertifiedSolution | None:
        """The max-loss certificate at ``x`` with the data examples' weights ``pi`` (the
        null examples share the rest) and the multipliers of the stage's model ``base``, or
        None where relaxed copies leave W."""
        from dpcvx.certification.ball import smooth_copies_in

        decl, C, null = self.decl, self.C, self.null
        dom = decl.domain
        guide = self.model if self.bias is None else base
        if C is None:
            thetas = guide.multipliers(x)
            return _certify_max_at(decl, x, thetas, pi, lam, w0, accuracy, stats)
        if self.bias is not None:  # smoothed pieces: plain blocks, or the relaxed pieces' copies
            simplex = _simplex_of(pi, null)
            return _pieces_extension(
                decl, base, self.relaxed, x, math.inf, lam, w0, accuracy, stats, C, null, simplex
            )
        w_hat = dom.make_feasible(x)
        Y = None
        if self.relaxed is None:
            thetas = guide.multipliers(x)
        else:
            region = ladder._region(dom)
            Y = self.relaxed.copies(w_hat)
            if region is None or smooth_copies_in(self.relaxed, C, w_hat, region, None, Y):
                return None
            thetas = self.relaxed.model.multipliers(w_hat)
        args = (math.inf, lam, w0, accuracy, stats, C, null, _simplex_of(pi, null))
        return _at_copies(decl, w_hat, thetas, Y, None, *args)[0]


def _simplex_of(pi: np.ndarray, null: int) -> np.ndarray:
    """The max-loss simplex weights of all ``n + null`` examples from the data examples'
    tilted weights ``pi``: the null examples share the rest."""
    rest = max(1.0 - float(np.sum(pi)), 0.0)
    return np.concatenate([pi, np.full(null, rest / null if null else 0.0)])


#: the most re-solves of tilted ERM's smooth extension with the copies kept in W, and the
#: most halvings of one step that raised the objective (:class:`_Rounds`)
TILTED_ROUNDS = 30
HALVINGS = 6


class _Rounds:
    """Tilted ERM on the Lipschitz extension of a smooth loss (one scalar atom per example)
    where some examples are not C-Lipschitz on W.

    Newton's method ran on the relaxed extension (each copy ``y_i`` free over ``R^d``, a
    smooth model: :class:`~dpcvx.modeling.smooth.SmoothExtension`), which lies below
    ``f_C`` (paper 000, eq. (5): ``y_i`` in W) and equals it where every copy lies in W;
    then its point is certified for ``f_C`` exactly. Where copies leave W (a small or boxed
    domain), each round certifies the point at those examples' exact copies in W
    (:func:`~dpcvx.certification.ball.smooth_copies_in`), and, while the certificate misses
    the target, solves again with those examples' ``f_C`` replaced by its first-order
    model at the point inside the tilted sum and its curvature under the tilted weights
    outside (a proximal Newton step; the others keep their relaxed form, exact for them), as
    plain ERM's rounds do (:func:`~dpcvx.certification.solve._ball_rounds`). A step that
    raises the objective (the certificate's upper bound) is halved, up to :data:`HALVINGS`
    times. The rounds stop when a certificate meets the target, when the halvings run out,
    when the relaxed extension's minimizer has its copies in W, or after
    :data:`TILTED_ROUNDS`; the best certificate is returned (the caller falls back to the
    conic program if it misses). The rounds only move the point the certificate judges.

    With ``max_loss``, the rounds solve tilted ERM at ``tilt`` (a stage of :class:`_MaxPath`)
    and certify the max-loss at each point, the tilted weights there as Gibbs' simplex
    weights."""

    def __init__(
        self,
        decl: Declaration,
        relaxed: Any,
        moved: Any,
        shifts: np.ndarray,
        region: Any,
        C: float,
        tilt: float,
        null: int,
        max_loss: bool = False,
    ) -> None:
        self.decl, self.relaxed, self.moved, self.shifts = decl, relaxed, moved, shifts
        self.region, self.C, self.tilt, self.null = region, C, tilt, null
        self.max_loss = max_loss
        self.pi: np.ndarray | None = None  # the last round's exact tilted weights
        self._last: tuple | None = None  # :meth:`_tilted`'s last point and model

    def run(
        self,
        x: np.ndarray,
        lam: float,
        w0: np.ndarray,
        accuracy: float | None,
        stats: dict[str, Any],
        start: float,
    ) -> CertifiedSolution | None:
        from dpcvx.modeling.smooth import TiltedModel

        dom = self.decl.domain
        best: CertifiedSolution | None = None
        at: np.ndarray | None = None  # the point of the lowest objective so far
        upper = math.inf  # its objective's upper bound
        steps = int(stats["iterations"])
        relaxed_last = True  # the last solve ran on the relaxed extension itself
        relaxed_model = TiltedModel(self.moved, self.tilt, self.shifts, self.null)
        halved = 0
        for rounds in range(1, TILTED_ROUNDS + 1):
            w_hat = dom.make_feasible(x)
            info = dict(
                stats,
                iterations=steps,
                tilted_rounds=rounds,
                seconds=time.perf_counter() - start,
            )
            try:  # a failure here keeps the best certificate so far
                # the curvature of the moved rows under the last round's exact tilted weights
                # (the first round's: the relaxed extension's)
                pi = self.pi if self.pi is not None else relaxed_model.weights(w_hat)[1]
                Y, fix = self._copies(w_hat, pi)
                cert = self._certificate(w_hat, Y, fix, lam, w0, accuracy, info)
            except _STAGE_FAILURES:
                break
            if ladder._meets(cert, accuracy):
                return cert
            try:  # an internal failure here only forgoes the balanced duals
                balanced = self._balanced(w_hat, fix, lam, w0, accuracy, info)
            except Exception:  # noqa: BLE001
                balanced = None
            if balanced is not None:
                if ladder._meets(balanced, accuracy):
                    return balanced
                if balanced.gap < cert.gap:
                    cert = balanced
            if best is None or cert.gap < best.gap:
                best = cert
            if at is not None and not cert.upper < upper:
                # the step raised the objective: back to half of it (a model's step is only
                # good near its point), up to HALVINGS times
                if halved == HALVINGS:
                    break
                halved += 1
                x = at + 0.5 * (w_hat - at)
                continue
            at, upper, halved = w_hat, float(cert.upper), 0
            if fix is None and relaxed_last:
                break  # the relaxed extension's minimizer, its copies exact: as tight as it gets
            relaxed_last = fix is None
            try:  # a failed model or re-solve keeps the best certificate so far
                model = relaxed_model if fix is None else self._model(w_hat, fix)
                x, more, _ = ladder.smooth_minimize(self.decl, model, lam, w0, init=w_hat)
            except _STAGE_FAILURES:
                break
            steps += int(more)
        return best

    def _copies(self, w_hat: np.ndarray, pi: np.ndarray) -> tuple[np.ndarray, Any]:
        """The relaxed copies at ``w_hat`` and the exact copies in W of those that leave it
        (None where none does), their curvature under the tilted weights ``pi``."""
        from dpcvx.certification.ball import smooth_copies_in

        Y = self.relaxed.copies(w_hat)
        return Y, smooth_copies_in(self.relaxed, self.C, w_hat, self.region, None, Y, pi)

    def _relaxed_multipliers(self, w_hat: np.ndarray) -> list:
        """The certificate's multipliers at ``w_hat`` where every relaxed copy lies in W."""
        return self.relaxed.model.multipliers(w_hat)

    def _moved_values(self, w_hat: np.ndarray, fix: Any) -> np.ndarray:
        """``f_C(w_hat) = h(u^T y_i) + C ||w_hat - y_i||`` of the rows ``fix.rows`` at their
        exact copies ``y_i`` in W."""
        from dpcvx.certification.ball import Smooth1D

        rows = fix.rows
        (blk,) = self.relaxed.model.blocks
        norms = np.sqrt(self.relaxed.sq_norms[rows])
        line = Smooth1D(replace(blk, knots=None), blk.weight, norms, blk.b[rows])
        exact = fix.Y[rows]
        t = np.einsum("kd,kd->k", blk.A[rows], exact) / norms
        return line.value(t) + self.C * row_norms(w_hat[None, :] - exact)

    def _certificate(
        self,
        w_hat: np.ndarray,
        Y: np.ndarray,
        fix: Any,
        lam: float,
        w0: np.ndarray,
        accuracy: float | None,
        stats: dict[str, Any],
    ) -> CertifiedSolution:
        """The extension's certificate at ``w_hat`` with the relaxed copies ``Y`` where they
        lie in W, and ``fix``'s exact copies in W elsewhere (their duals ``fix.slopes``); the
        duals it took are kept (``self.duals``)."""
        decl, C, null = self.decl, self.C, self.null
        slopes = None
        if fix is None:
            thetas = self._relaxed_multipliers(w_hat)
        else:
            Y, thetas, slopes = fix.Y, fix.thetas, fix.slopes
        stats["extension_copies"] = int(np.count_nonzero(np.any(Y != w_hat[None, :], axis=1)))
        stats["copies_outside"] = 0 if fix is None else int(fix.rows.size)
        simplex = None
        if self.max_loss:
            if fix is None:
                from dpcvx.modeling.smooth import TiltedModel

                tilted = TiltedModel(self.moved, self.tilt, self.shifts, null)
            else:
                tilted = self._tilted(w_hat, fix)
            simplex = _simplex_of(tilted.weights(w_hat)[1], null)
            stats["path_tilt"] = self.tilt
        args = (self.tilt, lam, w0, accuracy, stats, C, null, simplex)
        cert, self.duals = _at_copies(decl, w_hat, thetas, Y, slopes, *args)
        return cert

    def _tilted(self, w_hat: np.ndarray, fix: Any) -> Any:
        """The tilted model with the rows ``fix.rows`` (copies leaving W) replaced by
        ``f_C``'s value and slope at ``w_hat`` (:class:`_Linearized`); once per round (the
        certificate, the balanced duals and the next model each take it)."""
        from dpcvx.modeling.smooth import TiltedModel

        last = self._last
        if last is not None and last[0] is fix and np.array_equal(last[1], w_hat):
            return last[2]
        rows = fix.rows
        values = self._moved_values(w_hat, fix)
        lin = _Linearized(self.moved, rows, values - self.shifts[rows], fix.slopes[rows], w_hat)
        out = TiltedModel(lin, self.tilt, self.shifts, self.null)
        self._last = (fix, np.array(w_hat, copy=True), out)
        return out

    def _model(self, w_hat: np.ndarray, fix: Any) -> Any:
        """The next solve's model: :meth:`_tilted`'s, with the replaced rows' curvature
        (``fix.quad``, under the weights it was given) added outside the tilted sum (second
        order at ``w_hat`` but for those weights). The exact tilted weights at ``w_hat``,
        which need the copies, are kept for the next round's curvature: a second pass over
        the moved rows for this one took about as long as the round (0.45 s at n = 1e5)."""
        tilted = self._tilted(w_hat, fix)
        self.pi = tilted.weights(w_hat)[1]
        return _Curved(tilted, fix.quad[0], w_hat)

    def _balanced(
        self,
        w_hat: np.ndarray,
        fix: Any,
        lam: float,
        w0: np.ndarray,
        accuracy: float | None,
        stats: dict[str, Any],
    ) -> CertifiedSolution | None:
        """The certificate at ``w_hat`` with the duals :meth:`_joint_duals` chooses jointly
        under the tilted weights, or None where that does not apply or finds nothing."""
        joint = None if fix is None else self._joint_duals(w_hat, fix, lam, w0)
        if joint is None:
            return None
        info = dict(stats, balanced_duals=True)
        return self._certificate(w_hat, joint.Y, joint, lam, w0, accuracy, info)

    def _joint_duals(self, w_hat: np.ndarray, fix: Any, lam: float, w0: np.ndarray) -> Any:
        """On a box's boundary, ``fix`` with the duals of the copies at ``w_hat`` that must
        cancel part of their slope against the bounds chosen jointly under the tilted
        weights (:func:`~dpcvx.certification.box.balanced_duals`, as plain ERM's rounds do
        with uniform ones: one at a time, they can leave the weighted mean pushing out of
        the box, which the certificate charges). None where that does not apply or finds
        nothing; the weights are the model's at ``w_hat`` (the certificate takes its own:
        any duals give a valid bound)."""
        from dpcvx.certification.box import BoxRegion, balanced_duals
        from dpcvx.modeling.smooth import atom_derivative

        region = self.region
        if not isinstance(region, BoxRegion):
            return None
        at_x = fix.rows[np.all(fix.Y[fix.rows] == w_hat[None, :], axis=1)]
        if not at_x.size:
            return None
        (blk,) = self.relaxed.model.blocks
        plain = replace(blk, knots=None)
        slope = blk.weight * atom_derivative(plain, blk.A[at_x] @ w_hat + blk.b[at_x], 1)
        s = slope[:, None] * blk.A[at_x]
        steep = np.einsum("kd,kd->k", s, s) > self.C * self.C
        rows = at_x[steep]
        if not rows.size:
            return None
        tilted = self._tilted(w_hat, fix)
        _, pi = tilted.weights(w_hat)
        g = self.duals
        others = np.ones(self.decl.n, bool)
        others[rows] = False
        fixed = pi[others] @ g[others] + lam * (w_hat - w0)
        n = self.decl.n
        with np.errstate(all="ignore"):
            out = balanced_duals(
                s[steep], g[rows], fixed, w_hat, region.lo, region.hi, self.C, n, None, pi[rows]
            )
        if out is None:
            return None
        slopes = np.array(fix.slopes, float, copy=True)
        slopes[rows] = out
        return replace(fix, slopes=slopes)


#: an example of the smoothed pieces within this many temperatures of its kink is at it (its
#: pieces' softmax weights both above ``exp(-5)``, about 0.7%): its slope is chosen jointly
#: (:meth:`_PiecesRounds._balanced`), the certificate charging the pieces' difference there
KINK_REACH = 5.0


class _PiecesRounds(_Rounds):
    """:class:`_Rounds` for a piecewise-linear loss smoothed at temperature ``mu``
    (:func:`_pieces_tilted`): the relaxed extension ``relaxed`` is again piecewise linear
    (:class:`~dpcvx.certification.arrowhead.ExtensionPieces`), and Newton's method runs on its
    pieces smoothed (:class:`~dpcvx.certification.smoothed.SmoothedPieces`), the rows whose
    copies leave W replaced as in :class:`_Rounds`. Their exact copies in W, duals and
    curvature come from ``relaxed.copies_in`` (the method's multipliers there are the
    smoothed pieces' softmax weights); the certificate judges the loss itself, so the
    smoothing only moves the point it judges. The duals of the copies at a kink are chosen
    jointly (:meth:`_balanced`)."""

    def __init__(
        self,
        decl: Declaration,
        relaxed: Any,
        mu: float,
        region: Any,
        C: float,
        tilt: float,
        null: int,
        max_loss: bool = False,
    ) -> None:
        smoothed = SmoothedPieces(relaxed.model, mu)
        shifts = np.zeros(decl.n)
        super().__init__(decl, relaxed, smoothed, shifts, region, C, tilt, null, max_loss)

    def _mus(self, w_hat: np.ndarray) -> list[np.ndarray]:
        return _softmax_multipliers(self.moved, w_hat)

    def _copies(self, w_hat: np.ndarray, pi: np.ndarray) -> tuple[np.ndarray, Any]:
        mus = self._mus(w_hat)
        fix = self.relaxed.copies_in(w_hat, mus, self.region, exact_own=True, weights=pi)
        Y = self.relaxed.copies(w_hat, mus)[0] if fix is None else fix.Y
        return Y, fix

    def _relaxed_multipliers(self, w_hat: np.ndarray) -> list:
        return self.relaxed.copies(w_hat, self._mus(w_hat))[1]

    def _moved_values(self, w_hat: np.ndarray, fix: Any) -> np.ndarray:
        from dpcvx.certification.ball import Pieces1D

        rows, relaxed = fix.rows, self.relaxed
        exact = fix.Y[rows]
        t = np.einsum("kd,kd->k", relaxed.u[rows], exact)
        line = Pieces1D(relaxed.sigma[rows], relaxed.beta[rows])
        return line.value(t) + self.C * row_norms(w_hat[None, :] - exact)

    def _joint_duals(self, w_hat: np.ndarray, fix: Any, lam: float, w0: np.ndarray) -> Any:
        """``fix`` with the slopes of the examples whose copy is ``w_hat`` at a kink of their
        loss chosen jointly under the tilted weights, so that the objective's gradient
        vanishes where no cone of W takes it up (:func:`~dpcvx.certification.solve.
        _kink_duals`, as plain ERM's rounds do with uniform weights): the smoothed pieces'
        split of those slopes is the smoothed problem's, not the optimum's. None where there
        is no such kink or nothing is found."""
        pi = self._tilted(w_hat, fix).weights(w_hat)[1]
        duals = self.duals
        # the smoothed pieces' point leaves an example at its kink within a few mu of it
        near = max(ladder.JOINT_KINK, KINK_REACH * self.moved.mu)
        args = (self.decl, w_hat, fix, lam, w0, self.C, self.relaxed, self.region)
        found = ladder._kink_duals(*args, lambda: duals, pi, near)
        return None if found is None else found[0]


class _Linearized:
    """A smooth model (per-example ``values``, ``gradients`` and weighted ``hessian``) with
    the examples ``rows`` replaced by the affine functions ``values + <slopes, w - at>``."""

    def __init__(
        self, model: Any, rows: np.ndarray, values: np.ndarray, slopes: np.ndarray, at: np.ndarray
    ) -> None:
        self.model, self.rows, self.at = model, rows, at
        self.rows_values, self.slopes = values, slopes
        self.n, self.d = model.n, model.d

    def values(self, w: np.ndarray) -> np.ndarray:
        out = self.model.values(w)
        out[self.rows] = self.rows_values + self.slopes @ (w - self.at)
        return out

    def gradients(self, w: np.ndarray) -> np.ndarray:
        out = self.model.gradients(w)
        out[self.rows] = self.slopes
        return out

    def hessian(self, w: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """``sum_i weights_i hess f_i`` (the replaced rows are affine)."""
        full = np.array(weights, float)
        full[self.rows] = 0.0
        return self.model.hessian(w, weights=full)


class _Curved:
    """``model`` plus ``(w - at)^T Q (w - at) / 2`` (``value_grad`` and ``hessian``)."""

    def __init__(self, model: Any, Q: np.ndarray, at: np.ndarray) -> None:
        self.model, self.Q, self.at = model, Q, at

    def value_grad(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = self.model.value_grad(w)
        step = self.Q @ (w - self.at)
        return value + float((w - self.at) @ step) / 2, grad + step

    def hessian(self, w: np.ndarray) -> np.ndarray:
        return self.model.hessian(w) + self.Q


def _certify_max(
    decl: Declaration,
    z_full: np.ndarray,
    x: np.ndarray,
    prog: StampedProgram,
    max_rows: np.ndarray,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    stats: dict[str, Any],
) -> CertifiedSolution:
    """The max-loss certificate (module docstring): the upper bound ``max_i f_i(w_hat)`` plus
    the regularizer at the exactly feasible ``w_hat``, from the user's own loss; the lower
    bound ``sum_i p_i beta_i + min_W <sum_i p_i s_i, w> + reg`` for the simplex weights ``p``
    (the duals of ``t >= s_i``) and the valid-by-construction minorants ``f_i >= <s_i, w> +
    beta_i`` of each example's block."""
    n = decl.n
    w_hat = decl.domain.make_feasible(np.asarray(x[: decl.d], float))
    f = decl.loss_values(w_hat)
    p = _simplex_weights(np.asarray(z_full, float)[max_rows], f)
    # the split rows of example i carry p_i times its ERM duals: rescale them to weight 1/n
    z = np.array(np.nan_to_num(z_full), float)
    for rows_t in prog.split_rows:
        for rows in rows_t:
            if rows is not None:
                z[rows] = z[rows] / np.maximum(n * p[:, None], 1e-300)
    minorants = _minorants(decl, prog, z, np.broadcast_to(w_hat, (n, decl.d)).copy())
    return _max_certificate(
        decl, w_hat, f, p, minorants, lambda: _term_duals(decl, prog, z), lam, w0, accuracy, stats
    )


def _certify_max_at(
    decl: Declaration,
    x: np.ndarray,
    thetas: list,
    p: np.ndarray,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    stats: dict[str, Any],
) -> CertifiedSolution:
    """:func:`_certify_max` at a point found without a program: the multipliers ``thetas``
    (as for :func:`~dpcvx.certification.certificate.certify`) and any weights ``p``
    (normalized here) of the simplex."""
    n = decl.n
    w_hat = decl.domain.make_feasible(np.asarray(x[: decl.d], float))
    f = decl.loss_values(w_hat)
    p = np.maximum(np.nan_to_num(np.asarray(p, float)), 0.0)
    total = float(np.sum(p))
    p = p / total if total > 0 else (np.arange(n) == int(np.argmax(f))).astype(float)
    rows_w = np.broadcast_to(w_hat, (n, decl.d)).copy()
    minorants = _minorants(decl, None, None, rows_w, thetas=thetas)
    return _max_certificate(decl, w_hat, f, p, minorants, lambda: thetas, lam, w0, accuracy, stats)


def _max_certificate(
    decl: Declaration,
    w_hat: np.ndarray,
    f: np.ndarray,
    p: np.ndarray,
    minorants: tuple,
    guide: Callable[[], list],
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    stats: dict[str, Any],
) -> CertifiedSolution:
    """The max-loss certificate at ``w_hat`` (losses ``f``) from the simplex weights ``p``
    and the minorants ``(s, beta, scale, _)``; ``guide`` gives the multipliers the stable
    gap polishes."""
    dom = decl.domain
    s, beta, scale, _ = minorants
    reg = lam / 2 * float(np.sum((w_hat - w0) ** 2))
    upper_raw = float(np.max(f)) + reg
    q_min = dom.min_linear_quadratic(p @ s, lam, w0, hint=w_hat)
    lower_raw = float(p @ beta) + q_min
    mag = 1.0 + float(np.max(np.abs(f))) + float(p @ (np.abs(beta) + scale)) + reg + abs(q_min)
    margin = ROUNDING * mag * (1 + decl.n * 1e-4)
    stats.update(tilt=math.inf, objective="max-loss", weights_support=int(np.sum(p > 1e-9)))
    radius = _radius(upper_raw - lower_raw + 2 * margin, lam)
    return _finish(
        w_hat,
        upper_raw,
        lower_raw,
        margin,
        lambda: _stable_plain(decl, w_hat, guide(), radius, math.inf, lam, w0, simplex=p),
        lam,
        w0,
        accuracy,
        stats,
    )


def _radius(gap: float, lam: float) -> float:
    """The polishing radius of the stable gaps' multipliers (any radius gives a valid
    bound): ``sqrt(2 gap / lam)`` for a finite value-based gap, else none."""
    return float(np.sqrt(2 * gap / lam)) if lam > 0 and np.isfinite(gap) and gap >= 0 else np.inf


def _stable_plain(
    decl: Declaration,
    w_hat: np.ndarray,
    thetas: list,
    radius: float,
    tilt: float,
    lam: float,
    w0: np.ndarray,
    simplex: np.ndarray | None = None,
) -> float | None:
    """The stable tilted (or max-loss) gap of the plain losses
    (:func:`~dpcvx.certification.tilted_gap.tilted_stable_gap`), or None."""
    vals = per_example_values(decl, w_hat)
    out = _per_example(decl, w_hat, thetas, radius, decl.domain)
    if vals is None or out is None:
        return None
    fy, err, slope, slope_abs = out
    return tilted_stable_gap(
        np.nextafter(vals[0] - vals[1], -np.inf),
        np.nextafter(vals[0] + vals[1], np.inf),
        fy + err,
        slope,
        slope_abs,
        w_hat,
        tilt=tilt,
        lam=lam,
        w0=w0,
        domain=decl.domain,
        w_domain=decl.domain,
        simplex=simplex,
    )


def _finish(
    w_hat: np.ndarray,
    upper_raw: float,
    lower_raw: float,
    margin: float,
    stable: Callable[[], float | None],
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    stats: dict[str, Any],
) -> CertifiedSolution:
    """The certificate from the value-based bounds (``upper_raw``, ``lower_raw`` with their
    ``margin``) and the stable gap (module :mod:`~dpcvx.certification.tilted_gap`, computed
    where the value-based gap misses ``accuracy``): the smaller gap counts."""
    upper = upper_raw + margin
    lower = lower_raw - margin
    gap = upper - lower if np.isfinite(upper - lower) else math.inf
    if gap < 0:
        raise CertificationError("Internal: inconsistent tilted-ERM certificate.")
    direct = None
    if accuracy is None or not gap <= accuracy:
        try:  # an internal failure here only forgoes the tighter bound
            direct = stable()
        except Exception:  # noqa: BLE001
            direct = None
    if direct is not None and 0.0 <= direct < gap:
        gap = direct
        # F(w_hat) >= upper_raw - margin: the minimum is at least that less the gap
        floor = lower_from_gap(upper_raw, margin, direct)
        lower = floor if not np.isfinite(lower) else max(lower, floor)
        stats["stable_gap"] = direct
    if not (np.isfinite(gap) and np.isfinite(upper)):
        raise CertificationError("The tilted-ERM certificate is not finite.")
    return CertifiedSolution(
        w=w_hat,
        upper=upper,
        lower=lower,
        gap=gap,
        distance_bound=float(np.sqrt(2 * gap / lam)) if lam > 0 else float("inf"),
        regularization=lam,
        center=w0.copy(),
        accuracy=accuracy,
        solver_stats=MappingProxyType(stats),
    )
