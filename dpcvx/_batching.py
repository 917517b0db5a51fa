"""Blocks that run together: one thread per block, their solver calls gathered into batches.

A mechanism that splits its data into blocks runs one release per block. Where a block's
solver can serve many blocks at once (:func:`dpcvx.certification.batched.batched_ipm`, for
blocks of at most :data:`SMALL` examples and :data:`SMALL_D` dimensions), the blocks run in
threads of their own (:func:`together`), one at a time, and a solver call of a block waits at
a :class:`Meeting` until every block of the group is waiting or done; then the waiting calls
run as one batch, on the calling thread. The results must not depend on the batch (the batched
solvers guarantee each call the result it gets alone), so where and how the blocks run
(together here, one by one on an executor's workers) changes only the time.

:func:`block_scope` marks code that runs as one block: a batching solver then takes its calls
through the block's :class:`Meeting` (inside :func:`together`), or alone (:data:`SOLO`). Code
outside any block scope is not affected. This module is the core of that protocol, below every
layer that uses it: mechanisms only mark their blocks and run them together; the solvers
decide what to batch.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = ["SMALL", "SMALL_D", "SOLO", "Cancelled", "Meeting", "block_scope", "current", "together"]

#: blocks (programs) of at most this many rows gain from running together: above it a
#: solver's fixed cost per step is small next to its work on the rows (see
#: :data:`dpcvx.certification.batched.BATCH_ROWS`, which is this)
SMALL = 2048
#: and of at most this many dimensions: above it a program's ``d x d`` matrices cost more than
#: its rows, and a batch would hold many of them at once (hinge, d = 1000, LDOP at n = 2e4
#: peaked at 3.9 GiB against 2.0 GiB one block after the other)
SMALL_D = 128


class _Solo:
    """A block on its own: each call runs at once, as a batch of one."""

    def gather(self, batch: Callable[[list], list], item: Any) -> Any:
        return batch([item])[0]

    def __repr__(self) -> str:
        return "SOLO"


SOLO = _Solo()


class Meeting:
    """Where the calls of ``members`` threads wait to be batched: each :meth:`gather` waits
    until every member that has not :meth:`leave`-d waits too; then :meth:`serve` (the thread
    that started the members) runs the waiting calls, grouped by their batch function in the
    order they arrived, and wakes them. A batch's large arrays so come from the serving
    thread's memory, not from that of whichever member arrived last (glibc gives every thread
    an arena of its own, and memory freed in one is not reused by another: batches run on the
    members' threads raised the peak of an LDOP release at n = 1e6 by 190 MiB)."""

    def __init__(self, members: int) -> None:
        lock = threading.Lock()
        self._cv = threading.Condition(lock)  # the members wait here for their batch
        self._server = threading.Condition(lock)  # and the serving thread here, for them
        self._live = members
        self._waiting: list[tuple[Callable[[list], list], Any, list]] = []
        #: held by the one member that runs: the others wait for it, not for the interpreter
        #: (threads that all run numpy's small calls hand the interpreter lock to each other
        #: at every call, and ran the blocks of a phase 40% slower than one after the other)
        self.baton = threading.Lock()
        self._cancelled = False

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        """Every call that waits now, or gathers later, raises :class:`Cancelled` (the caller
        of :func:`together` was interrupted: its jobs stop at their next call)."""
        with self._cv:
            self._cancelled = True
            self._cv.notify_all()
            self._server.notify_all()

    def _ready(self) -> bool:
        return bool(self._waiting) and len(self._waiting) == self._live

    def _flush(self) -> None:
        """Run the waiting calls (the lock held) and wake their threads."""
        waiting, self._waiting = self._waiting, []
        groups: dict[Callable[[list], list], list[tuple[Any, list]]] = {}
        for batch, item, slot in waiting:
            groups.setdefault(batch, []).append((item, slot))
        for batch, calls in groups.items():
            try:
                results: list[Any] = list(batch([item for item, _ in calls]))
            except BaseException as exc:  # noqa: BLE001 - each waiting thread re-raises it
                results = [_Failed(exc)] * len(calls)
            for (_, slot), result in zip(calls, results):
                slot.append(result)
        self._cv.notify_all()

    def serve(self) -> None:
        """Run every batch, as its members come to wait, until no member is left (on the
        thread that started them)."""
        with self._server:
            while self._live > 0:
                if self._ready():
                    self._flush()
                else:
                    self._server.wait()

    def gather(self, batch: Callable[[list], list], item: Any) -> Any:
        """``batch([item, ...])``'s result for ``item``, batched with the other members'."""
        slot: list = []
        with self._cv:
            if self._cancelled:
                raise Cancelled
            self._waiting.append((batch, item, slot))
            self.baton.release()  # another member runs meanwhile
            if self._ready():
                self._server.notify()
            while not slot and not self._cancelled:
                self._cv.wait()
        self.baton.acquire()
        if not slot:
            raise Cancelled
        result = slot[0]
        if isinstance(result, _Failed):
            raise result.error
        return result

    def leave(self) -> None:
        """A member is done: the waiting calls may now be all there are."""
        with self._cv:
            self._live -= 1
            if self._live == 0 or self._ready():
                self._server.notify()


class Cancelled(BaseException):
    """The caller of :func:`together` stopped waiting (an interrupt): the job ends. Like
    ``KeyboardInterrupt`` it is no ``Exception``, so no solver's guard catches it and goes
    on to another method."""


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


_SCOPE: contextvars.ContextVar[_Solo | Meeting | None] = contextvars.ContextVar(
    "dpcvx_block_scope", default=None
)


def current() -> _Solo | Meeting | None:
    """The block scope of the calling code: its :class:`Meeting`, :data:`SOLO`, or None
    outside any block."""
    return _SCOPE.get()


@contextlib.contextmanager
def block_scope() -> Iterator[None]:
    """Mark the code run inside as one block (in the :class:`Meeting` of :func:`together`
    where it runs there, else :data:`SOLO`)."""
    token = _SCOPE.set(_SCOPE.get() or SOLO)
    try:
        yield
    finally:
        _SCOPE.reset(token)


def together(function: Callable[..., Any], tasks: Sequence[tuple], limit: int = 256) -> list:
    """``[function(*task) for task in tasks]``, each task in a thread of its own (at most
    ``limit`` at once), their batching solvers' calls gathered at one :class:`Meeting` per
    group of threads. One thread runs at a time (it holds the meeting's baton, and hands it
    on while it waits for a batch). Results in the order of ``tasks``; where tasks raise, the
    first one's exception (in that order) is raised once every thread of its group ended."""
    out: list[Any] = [None] * len(tasks)
    errors: list[BaseException | None] = [None] * len(tasks)
    for lo in range(0, len(tasks), limit):
        group = range(lo, min(lo + limit, len(tasks)))
        meeting = Meeting(len(group))

        def work(i: int, meeting: Meeting = meeting) -> None:
            meeting.baton.acquire()
            token = _SCOPE.set(meeting)
            try:
                if meeting.cancelled:  # the group never started (a thread could not)
                    raise Cancelled
                out[i] = function(*tasks[i])
            except BaseException as exc:  # noqa: BLE001 - re-raised on the calling thread
                errors[i] = exc
            finally:
                _SCOPE.reset(token)
                meeting.leave()
                meeting.baton.release()

        threads = [
            threading.Thread(target=work, args=(i,), name=f"dpcvx-block-{i}", daemon=True)
            for i in group
        ]
        # the threads start while the calling thread holds the baton: a job that ran while
        # others were still starting kept the interpreter from them (its switch interval,
        # 5 ms, at every start: 1.3 ms a job for 120 jobs of 0.1 ms)
        meeting.baton.acquire()
        started = []
        try:
            for thread in threads:
                thread.start()
                started.append(thread)
        except BaseException as exc:
            # no job has run yet (they wait for the baton): those started end at once
            meeting.cancel()
            meeting.baton.release()
            for thread in started:
                thread.join()
            if not isinstance(exc, RuntimeError):  # an interrupt
                raise
            # a thread could not start (a limit on threads): the group runs here, one job
            # after the other, each alone (the same results)
            token = _SCOPE.set(SOLO)
            try:
                for i in group:
                    out[i] = function(*tasks[i])
            finally:
                _SCOPE.reset(token)
            continue
        meeting.baton.release()
        try:
            meeting.serve()
            for thread in threads:
                thread.join()
        except BaseException:  # an interrupt: the jobs stop at their next gathering
            meeting.cancel()
            raise
        for i in group:
            error = errors[i]
            if error is not None:
                raise error
    return out
