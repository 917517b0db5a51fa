"""Where the solvers' programs move an affine argument that is far from the domain.

A term that is affine (or zero) on the whole bounding ball of the domain is changed only by a
constant there when its argument's offset moves, so the solvers can be handed the argument
next to the domain instead of, say, a label of 1e17 (see
:func:`dpcvx.certification.solve.recentered_program` for the conic program and
:func:`dpcvx.certification.arrowhead.recentered_pieces` for the arrowhead method). The
functions here decide the moves from each argument's value ``V`` at the ball's center and its
spread ``P`` over the ball; they return the *targets*, the value each argument takes at the
center after its move (NaN where it stays), never the shift ``target - V``: a shift of the
size of a huge argument rounds at that size (16 at 1e17, past the margin of 1 that keeps a
moved argument on its side of a kink), while the new offset ``target - J c`` is computed
from small numbers (:func:`moved_offsets`).
"""

from __future__ import annotations

import numpy as np

from dpcvx.modeling._structure import MONOTONE
from dpcvx.modeling.smooth import LOGISTIC_LINEAR, RECENTER_RATIO

__all__ = ["FLAT_EXP", "moved", "moved_offsets", "term_targets", "winner_targets", "with_losers"]

#: ``exp`` and ``logistic`` arguments below ``-FLAT_EXP`` on the whole ball move to just
#: below it: ``exp(-750)`` is zero in floating point
FLAT_EXP = 750.0
#: how many ulps of an argument's offset its program's offset may differ by and count as its
#: rounding (:func:`moved_offsets`)
OFFSET_ROUNDING = 64.0
_EPS = float(np.finfo(float).eps)


def moved(targets: list[np.ndarray] | None) -> bool:
    """Whether any argument moves."""
    return targets is not None and any(bool(np.any(~np.isnan(t))) for t in targets)


def moved_offsets(b: np.ndarray, off: np.ndarray, jc: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The offsets ``b`` (of arguments ``off + J w``, ``jc = J c``) with the moved ones set to
    put the argument at ``target`` at the center: the target less ``J c``. The program's
    offset is the declaration's computed another way (``3 (y - x^T w) + 0.1`` stamped from
    its parameters): where they differ by more than their rounding, ``OFFSET_ROUNDING``
    ulps of ``off``, that difference is kept; within it, it is the rounding of a huge label
    (5.6e14 at -1e30) and is dropped, as it would put the moved argument off its target."""
    with np.errstate(invalid="ignore", over="ignore"):
        diff = b - off
        diff = np.where(np.abs(diff) <= OFFSET_ROUNDING * _EPS * np.abs(off), 0.0, diff)
        return np.where(np.isnan(target), b, diff + (target - jc))


def term_targets(
    kind: str, V: np.ndarray, P: np.ndarray, movable: np.ndarray, param: float | None = None
) -> list[np.ndarray] | None:
    """Per argument of a term of ``kind`` (``V``, ``P``: ``(..., m)`` values at the center and
    spreads over the ball of its ``m`` arguments; ``movable``: ``(m,)``, False for the
    pieces constant in ``w``), the targets, or None where nothing moves."""
    big = np.max(np.abs(V), axis=-1) > RECENTER_RATIO * (np.max(P, axis=-1) + 1.0)
    nan = np.full(V.shape[:-1], np.nan)
    if kind in ("exp", "logistic"):
        # below -750 on the whole ball the atom is under exp(-745): zero in floating point
        v, p = V[..., 0], P[..., 0]
        low = big & (v + p < -FLAT_EXP) & movable[0]
        target = np.where(low, -(p + FLAT_EXP + 10.0), nan)
        if kind == "logistic":
            # above 50 on the whole ball the logistic loss is v within exp(-50): affine
            up = big & (v - p > LOGISTIC_LINEAR + 1.0) & movable[0]
            target = np.where(up, LOGISTIC_LINEAR + 1.0 + p, target)
        return [target] if moved([target]) else None
    if kind in ("abs", "huber"):
        v, p = V[..., 0], P[..., 0]
        if kind == "abs":
            knee = 0.0
        else:
            assert param is not None  # a huber term always carries its threshold M
            knee = float(param)
        # linear on the whole ball when |E| stays beyond the kink (abs) or the knee (huber):
        # moving E's offset then changes the term by a constant there
        ok = big & (np.abs(v) > 2.0 * p + 2.0 + knee)
        target = np.where(ok, np.sign(v) * (p + 1.0 + knee), nan)
        return [target] if moved([target]) else None
    m = V.shape[-1]
    if kind in MONOTONE:
        # psi(max_j E_j) with psi zero on (-inf, 0]: zero on the whole ball where no piece
        # rises above zero there (the constant 0 of max(E, 0) may reach it); the pieces far
        # below then move to just below zero, and the term stays zero on the ball (a label
        # 1e10 on the flat side of max(x^T w - y, 0)**1.5)
        high = V + P
        ok = big & (np.max(high, axis=-1) <= 0.0)
        zero = [
            np.where(ok & movable[j] & (high[..., j] < -2.0), -(P[..., j] + 1.0), nan)
            for j in range(m)
        ]
        if kind == "pos_huber":
            # past the knee K on the whole ball the Huber function is affine, 2K M - K^2:
            # the maximum's winner moves to just past it (a constant on the ball)
            assert param is not None
            knee = float(param) + 1.0
            past = winner_targets(V, P, movable, big & ~ok, knee, above=knee)
            if past is not None:
                zero = [np.where(ok, z, q) for z, q in zip(zero, past)]
        return with_losers(zero if moved(zero) else None, V, P, movable)
    return with_losers(winner_targets(V, P, movable, big, 0.0), V, P, movable)


def with_losers(
    targets: list[np.ndarray] | None, V: np.ndarray, P: np.ndarray, movable: np.ndarray
) -> list[np.ndarray] | None:
    """``targets``, and where they move nothing, the pieces of a maximum that lose to another
    piece on the whole ball and lie far below it moved to just below that piece's lowest
    value there: the maximum keeps its value everywhere on the ball (an exact move; a label
    of 1e12 in one piece of ``max(r, 0.5 x^T w - 1, 0)**2``, whose other live piece keeps
    the term from being zero there)."""
    m = V.shape[-1]
    if m < 2:
        return targets
    low, high = V - P, V + P
    out = []
    for j in range(m):
        best_other = np.max(np.delete(low, j, axis=-1), axis=-1)
        far = high[..., j] < best_other - RECENTER_RATIO * (P[..., j] + 1.0)
        out.append(np.where(far & movable[j], best_other - P[..., j] - 1.0, np.nan))
    if targets is not None:
        untouched = np.all(np.isnan(np.stack(targets, axis=-1)), axis=-1)
        out = [np.where(untouched, o, q) for o, q in zip(out, targets)]
    return out if moved(out) else None


def winner_targets(
    V: np.ndarray,
    P: np.ndarray,
    movable: np.ndarray,
    big: np.ndarray,
    floor: float,
    above: float = -np.inf,
) -> list[np.ndarray] | None:
    """The targets of ``max_j E_j`` whose winner wins on the whole ball and stays above
    ``above`` there (where ``big``): the winner placed just above the constant pieces and
    ``floor``, the other movable pieces just below it, so the maximum changes by a constant
    on the ball."""
    m = V.shape[-1]
    top = np.argmax(V, axis=-1)
    is_top = np.eye(m, dtype=bool)[top]
    lo_top = np.take_along_axis(V - P, top[..., None], axis=-1)[..., 0]
    hi_rest = np.max(np.where(is_top, -np.inf, V + P), axis=-1)
    ok = big & (lo_top > hi_rest + 2.0) & (lo_top > above)
    if not np.any(ok):
        return None
    # the constant pieces stay; the winner is placed just above all of them, the other
    # movable pieces just below it: the maximum changes by a constant on the whole ball
    fixed = np.where(movable, -np.inf, V)
    base = np.maximum(np.max(fixed, axis=-1), floor)
    top_movable = np.take_along_axis(np.broadcast_to(movable, V.shape), top[..., None], axis=-1)[
        ..., 0
    ]
    top_value = np.where(
        top_movable,
        base + np.take_along_axis(P, top[..., None], axis=-1)[..., 0] + 1.0,
        np.take_along_axis(V, top[..., None], axis=-1)[..., 0],
    )
    P_top = np.take_along_axis(P, top[..., None], axis=-1)
    below = top_value[..., None] - P_top - P - 1.0  # just below the winner's lowest value
    target = np.where(is_top, top_value[..., None], below)
    # a losing piece moves where it could rise above the moved winner, or lies far below it;
    # one that stays below it on the ball keeps its place (the 0 of a one-sided atom, one
    # row per example broadcast over a vector argument, cannot move per entry)
    need = (V > below) | (V < below - RECENTER_RATIO * (P + 1.0))
    move = is_top | need
    return [np.where(ok & movable[j] & move[..., j], target[..., j], np.nan) for j in range(m)]
