"""The allocator thresholds (``dpcvx._allocator``): settled once per process, the trim threshold
held while a certified solve runs, and those a block chunk runs under on a Dask worker (raised
only where the environment froze them, restored and the heap trimmed afterwards, even when the
block raises)."""

from __future__ import annotations

import contextlib
import os
import sys
import threading

import numpy as np
import pytest

from dpcvx import _allocator


class _FakeLibc:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append(("mallopt", param, value))
        return 1

    def malloc_trim(self, pad: int) -> int:
        self.calls.append(("trim", pad))
        return 1


def test_nothing_changes_where_the_environment_left_the_thresholds_dynamic(monkeypatch):
    fake = _FakeLibc()
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    monkeypatch.setattr(_allocator, "_libc", lambda: fake)
    with _allocator.roomy_allocator():
        pass
    assert fake.calls == []


@pytest.mark.parametrize("fail", [False, True])
def test_thresholds_are_raised_then_restored_to_the_environment_values(monkeypatch, fail):
    fake = _FakeLibc()
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "262144")
    monkeypatch.setattr(_allocator, "_libc", lambda: fake)
    with pytest.raises(RuntimeError) if fail else contextlib.nullcontext():
        with _allocator.roomy_allocator():
            assert fake.calls == [
                ("mallopt", _allocator._M_MMAP_THRESHOLD, _allocator._ROOMY),
                ("mallopt", _allocator._M_TRIM_THRESHOLD, 2 * _allocator._ROOMY),
            ]
            if fail:
                raise RuntimeError("a block failed")
    assert fake.calls[2:] == [
        ("mallopt", _allocator._M_MMAP_THRESHOLD, 262144),
        ("mallopt", _allocator._M_TRIM_THRESHOLD, 65536),
        ("trim", 0),
    ]


def test_the_default_mmap_threshold_is_restored_when_only_trim_was_set(monkeypatch):
    fake = _FakeLibc()
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.setattr(_allocator, "_libc", lambda: fake)
    with _allocator.roomy_allocator():
        pass
    assert ("mallopt", _allocator._M_MMAP_THRESHOLD, 128 << 10) in fake.calls


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_the_real_allocator_runs_numpy_work_unchanged(monkeypatch):
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    rng = np.random.default_rng(0)
    A = rng.normal(size=(3000, 20))
    expected = A.T @ A
    with _allocator.roomy_allocator():
        got = A.T @ A
    np.testing.assert_array_equal(got, expected)
    # roomy_allocator restored the thresholds this test's environment asked for (frozen at
    # glibc's defaults): put this test process back where dpcvx's first solve had settled it
    libc = _allocator._libc()
    if libc is not None and _allocator._settled and not _allocator._TUNED_AT_IMPORT:
        libc.mallopt(_allocator._M_MMAP_THRESHOLD, _allocator._ROOMY)
        libc.mallopt(_allocator._M_TRIM_THRESHOLD, 2 * _allocator._ROOMY)


def test_nested_blocks_restore_only_when_the_last_one_ends(monkeypatch):
    """Two blocks at once in one worker process (a worker with two threads): the thresholds
    stay raised until both have ended."""
    fake = _FakeLibc()
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    monkeypatch.setattr(_allocator, "_libc", lambda: fake)
    with _allocator.roomy_allocator():
        with _allocator.roomy_allocator():
            assert len(fake.calls) == 2  # raised once
        assert len(fake.calls) == 2  # the outer block still runs: nothing restored
    assert fake.calls[-1] == ("trim", 0) and len(fake.calls) == 5
    assert _allocator._active == 0


class _SpyLibc(_FakeLibc):
    def __init__(self, accept: bool = True) -> None:
        super().__init__()
        self.accept = accept

    def mallopt(self, param: int, value: int) -> int:
        super().mallopt(param, value)
        return 1 if self.accept else 0


def _fresh(monkeypatch, fake, tuned_at_import=False):
    monkeypatch.setattr(_allocator, "_libc", lambda: fake)
    monkeypatch.setattr(_allocator, "_settled", False)
    monkeypatch.setattr(_allocator, "_owned", None)
    monkeypatch.setattr(_allocator, "_TUNED_AT_IMPORT", tuned_at_import)
    for name in (*_allocator._TUNING, "DPCVX_MALLOC", "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)


def test_the_first_solve_settles_the_thresholds_at_glibcs_ceiling_once(monkeypatch):
    """The mmap threshold at 32 MiB and the trim threshold at 64 MiB (the ceiling of glibc's
    own dynamic adjustment), set by the first call and never again."""
    fake = _FakeLibc()
    _fresh(monkeypatch, fake)
    _allocator.settle_allocator()
    _allocator.settle_allocator()
    assert fake.calls == [
        ("mallopt", _allocator._M_MMAP_THRESHOLD, 32 << 20),
        ("mallopt", _allocator._M_TRIM_THRESHOLD, 64 << 20),
    ]


@pytest.mark.parametrize(
    "name, value",
    [
        ("MALLOC_TRIM_THRESHOLD_", "65536"),  # Dask's workers: roomy_allocator's case
        ("MALLOC_MMAP_THRESHOLD_", "1048576"),
        ("MALLOC_TOP_PAD_", "0"),
        ("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=131072"),
        ("DPCVX_MALLOC", "keep"),
    ],
)
def test_an_allocator_tuned_by_the_environment_is_left_alone(monkeypatch, name, value):
    """The environment is read as dpcvx was imported (what glibc saw: a Dask ``Client``
    started later sets ``MALLOC_TRIM_THRESHOLD_`` for its workers in this process's
    ``os.environ``, which this process's allocator never read); ``DPCVX_MALLOC`` at any time."""
    fake = _FakeLibc()
    _fresh(monkeypatch, fake, tuned_at_import=_allocator._tuned({name: value}))
    if name == "DPCVX_MALLOC":
        monkeypatch.setattr(_allocator, "_TUNED_AT_IMPORT", False)
        monkeypatch.setenv(name, value)
    _allocator.settle_allocator()
    assert fake.calls == []


def test_a_variable_set_after_import_does_not_stop_the_settling(monkeypatch):
    fake = _FakeLibc()
    _fresh(monkeypatch, fake)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")  # as a Dask Client's nanny does
    _allocator.settle_allocator()
    assert len(fake.calls) == 2


def test_a_rejected_mmap_threshold_leaves_the_trim_threshold_alone(monkeypatch):
    """Setting either threshold freezes glibc's dynamic adjustment: when the first is refused
    (older glibc capped it), the second is not set."""
    fake = _SpyLibc(accept=False)
    _fresh(monkeypatch, fake)
    _allocator.settle_allocator()
    assert fake.calls == [("mallopt", _allocator._M_MMAP_THRESHOLD, 32 << 20)]


def test_a_certified_solve_settles_the_allocator(monkeypatch):
    import cvxpy as cp

    import dpcvx

    fake = _FakeLibc()
    _fresh(monkeypatch, fake)
    w, x = cp.Variable(2), cp.Parameter(2)
    X = np.random.default_rng(1).normal(size=(20, 2))
    dpcvx.Problem(cp.square(x @ w - 1.0), w, {x: X}, [cp.norm(w) <= 1]).solve(regularization=0.1)
    assert ("mallopt", _allocator._M_MMAP_THRESHOLD, 32 << 20) in fake.calls


def _trims(fake) -> list[int]:
    return [c[2] for c in fake.calls if c[0] == "mallopt" and c[1] == _allocator._M_TRIM_THRESHOLD]


def test_a_solve_holds_freed_memory_while_it_runs_then_sets_the_trim_threshold_back(monkeypatch):
    """The trim threshold at its most while a certified solve runs (a solve at n = 1e6 trimmed
    the heap and faulted the pages in again, step after step), back at 64 MiB after it."""
    import cvxpy as cp

    import dpcvx

    fake = _FakeLibc()
    _fresh(monkeypatch, fake)
    w, x = cp.Variable(2), cp.Parameter(2)
    X = np.random.default_rng(1).normal(size=(20, 2))
    problem = dpcvx.Problem(cp.abs(x @ w - 1.0), w, {x: X}, [cp.norm(w) <= 1])
    problem.solve(regularization=0.1)
    problem.solve(regularization=0.1)
    assert _trims(fake) == [64 << 20, _allocator._HELD, 64 << 20, _allocator._HELD, 64 << 20]
    assert _allocator._solving == 0


@pytest.mark.parametrize("fail", [False, True])
def test_nested_solves_set_the_threshold_back_once_the_outermost_ends(monkeypatch, fail):
    fake = _FakeLibc()
    _fresh(monkeypatch, fake)
    _allocator.settle_allocator()
    with contextlib.suppress(RuntimeError):
        with _allocator.solving_allocator():
            with _allocator.solving_allocator():
                assert _trims(fake) == [64 << 20, _allocator._HELD]
                if fail:
                    raise RuntimeError("a solve that raises")
            assert _trims(fake) == [64 << 20, _allocator._HELD]
    assert _trims(fake) == [64 << 20, _allocator._HELD, 64 << 20]
    assert _allocator._solving == 0


def test_a_solve_leaves_an_allocator_it_did_not_settle_alone(monkeypatch):
    """Where the environment tuned the allocator (Dask's workers among them), or the trim
    threshold was refused, a solve sets nothing."""
    fake = _FakeLibc()
    _fresh(monkeypatch, fake, tuned_at_import=True)
    _allocator.settle_allocator()
    with _allocator.solving_allocator():
        pass
    assert fake.calls == []
    refused = _SpyLibc(accept=False)
    _fresh(monkeypatch, refused)
    _allocator.settle_allocator()
    with _allocator.solving_allocator():
        pass
    assert _trims(refused) == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_a_solve_runs_sets_the_trim_threshold_back(monkeypatch):
    """A child forked while a solve runs on another thread inherits the raised threshold and
    the count, but not the thread: the count would never come back to zero and the threshold
    would stay at its largest for the child's life. The child starts at zero, the threshold
    set back; the parent's solve ends as before."""
    fake = _FakeLibc()
    _fresh(monkeypatch, fake)
    monkeypatch.setattr(_allocator, "_solving", 0)
    _allocator.settle_allocator()
    entered, leave = threading.Event(), threading.Event()

    def solve() -> None:
        with _allocator.solving_allocator():
            entered.set()
            leave.wait(30)

    thread = threading.Thread(target=solve)
    thread.start()
    assert entered.wait(30)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only checks and leaves
        ok = _allocator._solving == 0 and _trims(fake)[-1] == 64 << 20
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    got = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    leave.set()
    thread.join()
    assert got == b"1"
    assert _trims(fake) == [64 << 20, _allocator._HELD, 64 << 20]


def test_a_forked_child_restores_a_dask_workers_thresholds(monkeypatch):
    """The same for a block chunk running on a Dask worker's thread (``roomy_allocator``):
    the child sets the environment's thresholds back and counts from zero."""
    fake = _FakeLibc()
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.setattr(_allocator, "_active", 1)
    monkeypatch.setattr(_allocator, "_raised", fake)
    monkeypatch.setattr(_allocator, "_solving", 0)
    monkeypatch.setattr(_allocator, "_lock", _allocator._lock)
    _allocator._after_fork_in_child()
    assert _allocator._active == 0
    assert fake.calls == [
        ("mallopt", _allocator._M_MMAP_THRESHOLD, 128 << 10),
        ("mallopt", _allocator._M_TRIM_THRESHOLD, 65536),
    ]
