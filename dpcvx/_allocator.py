"""The C allocator's thresholds: settled once per process, the trim threshold raised while a
certified solve runs, and both raised while a chunk of block solves runs on a Dask worker.

**Once per process** (:func:`settle_allocator`, called by the first certified solve). glibc
starts its mmap threshold at 128 KiB and raises it, with its trim threshold, only as it frees
mapped blocks, up to 32 MiB (and 64 MiB). Until then, and whenever the top of the heap is
trimmed, arrays of a few megabytes are fresh mappings whose pages fault in on first use, and a
page fault costs microseconds: a warm squared-loss solve at ``n = 1e5``, ``d = 20`` took
11,570 page faults and 120 ms a solve, against none and 25 ms with the thresholds at that
ceiling. dpcvx sets them there from its first solve on: the ceiling glibc's own adjustment
reaches once the process frees a mapped block of 32 MiB, set at once. The process then keeps
more of what it frees: blocks up to 32 MiB come from the heap, and the heap is handed back to
the system only once more than 64 MiB is free at its top. Nothing changes where the
environment tuned the allocator when dpcvx was imported (``MALLOC_*`` thresholds,
``glibc.malloc`` tunables in ``GLIBC_TUNABLES``, Dask's workers), where
``DPCVX_MALLOC=keep``, on 32-bit systems, or outside glibc.

**While a solve runs** (:func:`solving_allocator`, around every certified solve, where the
thresholds were settled so). At ``n = 1e6`` a solve frees and allocates arrays of tens of
megabytes at every step, and with 64 MiB free at the top the heap was trimmed and faulted in
again; the trim threshold is raised while a solve runs, and set back to 64 MiB after it.

**On Dask's workers** (:func:`roomy_allocator`). Dask's nannies start every worker with
``MALLOC_TRIM_THRESHOLD_=65536`` (the configuration value ``distributed.nanny.pre-spawn-environ``),
so that workers hand freed memory back to the system. Setting that variable also freezes glibc's
allocation thresholds at their defaults: every array over 128 KiB is then a fresh ``mmap`` and
its pages are faulted in again on every use. A block solve allocates many such arrays, and ran
about 1.5 times slower on a worker than in a plain process. :func:`roomy_allocator` raises the
thresholds while a chunk runs and, when it ends, restores the values the environment asked for
and trims the heap, so the worker's memory afterwards is what Dask intended. It changes nothing
where that variable is unset and nothing outside glibc.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import sys
import threading
from collections.abc import Iterator

__all__ = ["roomy_allocator", "settle_allocator"]

#: mallopt parameters (glibc's malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: the thresholds while a chunk runs (glibc's dynamic mmap threshold tops out at 32 MiB)
_ROOMY = 32 << 20
#: the trim threshold while a certified solve runs (mallopt takes a C int)
_HELD = (1 << 31) - 1
#: glibc's default mmap threshold
_DEFAULT_MMAP = 128 << 10


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt  # noqa: B018 - glibc only (musl has no mallopt)
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return default


#: the blocks running under raised thresholds in this process (a worker with several threads
#: runs several at once: the first raises the thresholds, the last restores them)
_active = 0
_lock = threading.Lock()


#: the environment variables that tune glibc's thresholds: any of them set, dpcvx leaves them
_TUNING = (
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_TOP_PAD_",
    "MALLOC_MMAP_MAX_",
)


def _keep(environ) -> bool:
    """Whether ``environ`` asks dpcvx to leave the allocator alone (``DPCVX_MALLOC=keep``)."""
    return environ.get("DPCVX_MALLOC", "").strip().lower() == "keep"


def _tuned(environ) -> bool:
    """Whether ``environ`` tunes glibc's allocator (or asks dpcvx to leave it alone)."""
    tunables = "glibc.malloc." in environ.get("GLIBC_TUNABLES", "")
    return _keep(environ) or tunables or any(name in environ for name in _TUNING)


#: the environment as dpcvx was imported: glibc read its own at the process's start, and a Dask
#: ``Client`` started later in the process sets ``MALLOC_TRIM_THRESHOLD_`` in ``os.environ``
#: for its workers without that reaching this process's allocator
_TUNED_AT_IMPORT = _tuned(os.environ)
_settled = False
#: the C library whose thresholds :func:`settle_allocator` set (None until then, or where it
#: left them)
_owned: ctypes.CDLL | None = None
#: the certified solves running in this process (see :func:`solving_allocator`)
_solving = 0
#: the C library whose thresholds :func:`roomy_allocator` raised (None before)
_raised: ctypes.CDLL | None = None


def settle_allocator() -> None:
    """Set glibc's mmap and trim thresholds at the ceiling of its own dynamic adjustment on
    64-bit systems (32 MiB and 64 MiB), once per process (see the module docstring); a no-op
    afterwards, where the environment tuned the allocator when dpcvx was imported (``MALLOC_*``
    thresholds, ``glibc.malloc`` tunables, ``DPCVX_MALLOC=keep``), on 32-bit systems and outside
    glibc."""
    global _settled
    if _settled:
        return
    # found before the lock: finding the C library may run a subprocess, and a thread that
    # forks meanwhile must not leave the lock held in its child
    keep = _TUNED_AT_IMPORT or _keep(os.environ)
    libc = None if keep or ctypes.sizeof(ctypes.c_void_p) != 8 else _libc()
    with _lock:
        if _settled:
            return
        _settled = True
        if libc is None:
            return
        # the trim threshold only once the mmap one is accepted: setting either freezes both
        if libc.mallopt(_M_MMAP_THRESHOLD, _ROOMY) and libc.mallopt(_M_TRIM_THRESHOLD, 2 * _ROOMY):
            global _owned
            _owned = libc


@contextlib.contextmanager
def solving_allocator() -> Iterator[None]:
    """Keep what the process frees at the top of its heap while the block (a certified solve)
    runs: the trim threshold at :data:`_HELD`, back at 64 MiB when the last running block
    ends (where :func:`settle_allocator` set the thresholds; a no-op elsewhere).

    At 64 MiB, a solve at ``n = 1e6`` (``d = 20``) handed its arrays' pages back to the system
    and faulted them in again, 57,000 to 91,000 page faults a piecewise-linear solve; held,
    none, and the solve takes 3-4% less. The peak is the same; what the solve freed at the
    top of the heap goes back to the system at the next free of a block of 64 KiB or more
    after it ends (glibc trims there). A child forked meanwhile starts at zero, the
    threshold set back (:func:`_after_fork_in_child`)."""
    global _solving
    libc = _owned
    if libc is None:
        yield
        return
    with _lock:
        if _solving == 0:
            libc.mallopt(_M_TRIM_THRESHOLD, _HELD)
        _solving += 1
    try:
        yield
    finally:
        with _lock:
            _solving = max(_solving - 1, 0)  # (a forked child starts its count again at zero)
            if _solving == 0:
                libc.mallopt(_M_TRIM_THRESHOLD, 2 * _ROOMY)


@contextlib.contextmanager
def roomy_allocator() -> Iterator[None]:
    """Raise glibc's trim and mmap thresholds for the block, when the environment froze them
    (``MALLOC_TRIM_THRESHOLD_`` set, as on Dask workers); restore them and trim after the
    last block of the process that runs under them ends."""
    global _active, _raised
    trim = _env_int("MALLOC_TRIM_THRESHOLD_", -1)
    libc = _libc() if trim >= 0 else None
    if libc is None:
        yield
        return
    with _lock:
        if _active == 0:
            libc.mallopt(_M_MMAP_THRESHOLD, _ROOMY)
            libc.mallopt(_M_TRIM_THRESHOLD, 2 * _ROOMY)
            _raised = libc
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active = max(_active - 1, 0)  # (a forked child starts its count again at zero)
            last = _active == 0
            if last:
                libc.mallopt(_M_MMAP_THRESHOLD, _env_int("MALLOC_MMAP_THRESHOLD_", _DEFAULT_MMAP))
                libc.mallopt(_M_TRIM_THRESHOLD, trim)
        if last:  # outside the lock: a trim may take a while
            libc.malloc_trim(0)


def _after_fork_in_child() -> None:
    """In a child forked while solves or block chunks ran on other threads: those threads are
    not in the child, so their counts start again at zero and the thresholds they raised are
    set back (the trim threshold held by :func:`solving_allocator` would otherwise stay at
    its largest for the child's life), with a new lock (one of them may have held it)."""
    global _lock, _solving, _active
    _lock = threading.Lock()
    if _solving > 0 and _owned is not None:
        _owned.mallopt(_M_TRIM_THRESHOLD, 2 * _ROOMY)
    _solving = 0
    trim = _env_int("MALLOC_TRIM_THRESHOLD_", -1)
    if _active > 0 and _raised is not None and trim >= 0:
        _raised.mallopt(_M_MMAP_THRESHOLD, _env_int("MALLOC_MMAP_THRESHOLD_", _DEFAULT_MMAP))
        _raised.mallopt(_M_TRIM_THRESHOLD, trim)
    _active = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
