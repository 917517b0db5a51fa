"""Progress bars for long runs (audits, benchmark grids, the demo's epsilon grid).

One helper, :func:`progress_bar`, wraps :class:`tqdm.tqdm` with dpcvx's policy: a bar is drawn
on standard error only when it is a terminal **and** the caller did not ask for silence
(``enabled=False``). In a pipe, a log file, CI or a test run nothing is written at all, so output
stays clean and byte-for-byte reproducible. The bar never affects what is computed.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any, TypeVar

__all__ = ["progress_bar", "progress_enabled"]

T = TypeVar("T")


def progress_enabled(enabled: bool = True) -> bool:
    """Whether a bar would be drawn: ``enabled`` and standard error is a terminal."""
    if not enabled:
        return False
    stream = sys.stderr
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):  # closed or replaced stream without isatty
        return False


def progress_bar(
    iterable: Iterable[T] | None = None,
    *,
    total: int | None = None,
    desc: str | None = None,
    unit: str = "it",
    enabled: bool = True,
) -> Any:
    """A ``tqdm`` bar over ``iterable`` (or a manual bar with ``update``), silent unless
    ``enabled`` and standard error is a terminal.

    Parameters
    ----------
    iterable : iterable, optional
        What to iterate over; omit it for a manual bar (call ``bar.update(k)``, then
        ``bar.close()``, or use it as a context manager).
    total : int, optional
        Number of steps (default ``len(iterable)`` when it has one).
    desc : str, optional
        Label shown before the bar.
    unit : str
        Name of one step ("run", "fit", ...).
    enabled : bool
        False silences the bar whatever the terminal (the ``progress=False`` of public APIs).

    Returns
    -------
    tqdm.tqdm
        Iterates like ``iterable``; a disabled bar writes nothing and costs next to nothing.
    """
    from tqdm import tqdm

    return tqdm(
        iterable,
        total=total,
        desc=desc,
        unit=unit,
        leave=False,
        file=sys.stderr,
        disable=not progress_enabled(enabled),
        dynamic_ncols=True,
    )
