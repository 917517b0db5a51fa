"""How the certificates' per-example passes group their rows: contiguous chunks that keep each
step's arrays in the processor's cache, and, at a point found without a program, the examples
whose copy ``y_i`` is the point itself apart from those that moved."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, overload

import numpy as np

if TYPE_CHECKING:
    from dpcvx.modeling.declaration import Declaration

#: data entries (rows times the dimension) of one chunk of a per-example pass
CHUNK_ENTRIES = 1 << 18
#: the examples at their own copies are taken apart only where at most this share of them
#: moved off the point; above it, every example at its own copy (a pass at the one point
#: would be spent)
MOVED_SHARE = 0.25


def _rows_per_chunk(d: int) -> int:
    return max(1, CHUNK_ENTRIES // max(d, 1))


def row_chunks(n: int, d: int) -> Iterator[tuple[int, int]]:
    """Contiguous ``(start, stop)`` ranges of about :data:`CHUNK_ENTRIES` entries covering
    ``n`` rows of dimension ``d`` (one range when ``n`` is at most two chunks)."""
    rows = _rows_per_chunk(d)
    if n <= 2 * rows:
        yield 0, n
        return
    for start in range(0, n, rows):
        yield start, min(n, start + rows)


def row_groups(
    decl: Declaration, skip: np.ndarray | None = None
) -> Iterator[tuple[Declaration, slice, AbstractContextManager]]:
    """Per range of :func:`row_chunks`, the declaration on its examples (a view of the data;
    the declaration itself for one range), which rows of ``decl`` those are, and the
    floating-point context to run it in: where the range holds examples of ``skip`` (whose
    results the caller replaces), their floating-point errors are not raised (a loss that
    overflows at the point but not at an example's own copy); elsewhere numpy's own."""
    n = decl.n
    keep = None
    if skip is not None and skip.size:
        keep = np.ones(n, bool)
        keep[skip] = False
    for start, stop in row_chunks(n, decl.d):
        part = decl if (start, stop) == (0, n) else decl.rows(start, stop)
        whole = keep is None or bool(keep[start:stop].all())
        yield part, slice(start, stop), nullcontext() if whole else np.errstate(all="ignore")


def moved_rows(copies: np.ndarray, w: np.ndarray) -> np.ndarray | None:
    """The examples whose copy (a row of ``copies``) is not ``w`` itself, or None when more
    than :data:`MOVED_SHARE` of them moved or all of them make one range of
    :func:`row_chunks` (a second pass would then cost more than it saves)."""
    n, d = copies.shape
    if n <= 2 * _rows_per_chunk(d):
        return None
    moved = np.flatnonzero(np.any(copies != w[None, :], axis=1))
    return None if moved.size > MOVED_SHARE * n else moved


@overload
def take_rows(thetas: None, rows: np.ndarray | slice, n: int) -> None: ...
@overload
def take_rows(thetas: list, rows: np.ndarray | slice, n: int) -> list: ...
def take_rows(thetas: list | None, rows: np.ndarray | slice, n: int) -> list | None:
    """The multipliers ``thetas`` (per term, per argument) of the examples ``rows``: arrays
    with one entry per example (first axis ``n``) taken, anything else (None, broadcast
    values) kept. Multipliers are per example by construction (an array whose first axis
    is ``n`` is taken as one entry per example)."""
    if thetas is None:
        return None

    def take(x):
        if x is None or np.ndim(x) == 0 or np.shape(x)[0] != n:
            return x
        return np.asarray(x)[rows]

    return [None if t is None else [take(x) for x in t] for t in thetas]


#: the rows of a dual excess ``g_i - s_i`` are taken apart only where at most this share of
#: them may be nonzero (above it, gathering them costs more than the passes it saves)
LIVE_SHARE = 0.75


def clipped_rows(factor: np.ndarray) -> np.ndarray | None:
    """The examples whose slope ``s_i`` the C-ball clipped (``g_i = factor_i s_i`` with a
    factor other than 1, NaN included), or None when more than :data:`LIVE_SHARE` of them
    are. Every other example's dual is its slope itself (``s_i * 1.0``), so ``g_i - s_i``
    is exactly zero there."""
    live = np.flatnonzero(np.ravel(factor) != 1.0)
    return None if live.size > LIVE_SHARE * np.size(factor) else live


def differing_rows(g: np.ndarray, s: np.ndarray) -> np.ndarray | None:
    """The rows where ``g`` and ``s`` differ (a NaN differs), or None when more than
    :data:`LIVE_SHARE` of them do: every other row of ``g - s`` is exactly zero. Over row
    chunks (no temporary of the data's size)."""
    n, d = g.shape
    differ = np.empty(n, bool)
    for a, b in row_chunks(n, d):
        np.any(g[a:b] != s[a:b], axis=1, out=differ[a:b])
    live = np.flatnonzero(differ)
    return None if live.size > LIVE_SHARE * n else live


def support_rows(
    domain, g: np.ndarray, s: np.ndarray, hints: np.ndarray | None, live: np.ndarray | None
) -> np.ndarray:
    """``domain.support(g - s, hints=hints)``, computed on the rows ``live`` only (None: on
    every row), where every other row of ``g - s`` is zero (:func:`clipped_rows`). A zero row
    gets what the domain gives one: ``max_W <0, y>`` is 0 exactly, plus the domain's rounding
    allowance, as for any row."""
    if live is None:
        return domain.support(g - s, hints=hints)
    zero = np.zeros((1, g.shape[1]))
    out = np.full(g.shape[0], float(domain.support(zero, hints=zero)[0]))
    if live.size:
        out[live] = domain.support(g[live] - s[live], hints=None if hints is None else hints[live])
    return out
