"""How the certificates' per-example passes group their rows: contiguous chunks that keep each
step's arrays in the processor's cache, and, at a point found without a program, the examples
whose copy ``y_i`` is the point itself apart from those that moved."""

from __future__ import annotations

from collections.abc import Iterator
from typing import overload

import numpy as np

#: data entries (rows times the dimension) of one chunk of a per-example pass
CHUNK_ENTRIES = 1 << 18
#: the examples at their own copies are taken apart only where at most this share of them
#: moved off the point; above it, every example at its own copy (a pass at the one point
#: would be spent)
MOVED_SHARE = 0.25


def row_chunks(n: int, d: int) -> Iterator[tuple[int, int]]:
    """Contiguous ``(start, stop)`` ranges of about :data:`CHUNK_ENTRIES` entries covering
    ``n`` rows of dimension ``d`` (one range when ``n`` is at most two chunks)."""
    rows = max(1, CHUNK_ENTRIES // max(d, 1))
    if n <= 2 * rows:
        yield 0, n
        return
    for start in range(0, n, rows):
        yield start, min(n, start + rows)


def moved_rows(copies: np.ndarray, w: np.ndarray) -> np.ndarray | None:
    """The examples whose copy (a row of ``copies``) is not ``w`` itself, or None when more
    than :data:`MOVED_SHARE` of them moved or all the copies fit in one chunk (a second pass
    would then cost more than it saves)."""
    if copies.size <= CHUNK_ENTRIES:
        return None
    moved = np.flatnonzero(np.any(copies != w[None, :], axis=1))
    return None if moved.size > MOVED_SHARE * copies.shape[0] else moved


@overload
def take_rows(thetas: None, rows: np.ndarray | slice, n: int) -> None: ...
@overload
def take_rows(thetas: list, rows: np.ndarray | slice, n: int) -> list: ...
def take_rows(thetas: list | None, rows: np.ndarray | slice, n: int) -> list | None:
    """The multipliers ``thetas`` (per term, per argument) of the examples ``rows``: arrays
    with one entry per example (first axis ``n``) taken, anything else (None, broadcast
    values) kept."""
    if thetas is None:
        return None

    def take(x):
        if x is None or np.ndim(x) == 0 or np.shape(x)[0] != n:
            return x
        return np.asarray(x)[rows]

    return [None if t is None else [take(x) for x in t] for t in thetas]
