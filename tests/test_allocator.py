"""The allocator thresholds a block chunk runs under on a Dask worker (``dpcvx._allocator``):
raised only where the environment froze them, restored (and the heap trimmed) afterwards, even
when the block raises."""

from __future__ import annotations

import contextlib
import sys

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
