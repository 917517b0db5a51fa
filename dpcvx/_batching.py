"""Blocks that run together: one greenlet per block, their solver calls gathered into batches.

A mechanism that splits its data into blocks runs one release per block. Where a block's
solver can serve many blocks at once (:func:`dpcvx.certification.batched.batched_ipm`, for
blocks of at most :data:`SMALL` examples and :data:`SMALL_D` dimensions), the blocks run as
greenlets (coroutines of the ``greenlet`` package, all on the calling thread) with
:func:`together`: each runs until a solver call of its own waits at the group's
:class:`Meeting`; once every block of the group waits or is done, the waiting calls run as one
batch, and the blocks resume, one after the other, each with its result. The results must not
depend on the batch (the batched solvers guarantee each call the result it gets alone), so
where and how the blocks run (together here, one by one on an executor's workers) changes
only the time.

Why greenlets and not threads: the same protocol on threads (one thread running at a time,
holding a baton it handed on while it waited) cost about a third of a millisecond a block:
paper 000's LDOP at ``n = 1e5``, ``d = 20`` (148 blocks) took 0.43 s, and takes 0.38 s with
greenlets (medians of nine releases). A switch between greenlets is a
copy of a few stack frames on one thread: no lock, no scheduler, and every batch's arrays
come from that thread's memory.

:func:`block_scope` marks code that runs as one block: a batching solver then takes its calls
through the block's :class:`Meeting` (inside :func:`together`), or alone (:data:`SOLO`). Code
outside any block scope is not affected. This module is the core of that protocol, below every
layer that uses it: mechanisms only mark their blocks and run them together; the solvers
decide what to batch.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import greenlet

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
    """Where the calls of a group of block greenlets wait to be batched (see
    :func:`together`): :meth:`gather` hands control back to the greenlet that runs the group,
    which runs, in :meth:`serve`, the waiting calls grouped by their batch function in the
    order they arrived, and resumes each waiting block with its result."""

    def __init__(self) -> None:
        #: the greenlet that runs the group and its batches
        self._server = greenlet.getcurrent()
        self._waiting: list[tuple[Callable[[list], list], Any, greenlet.greenlet]] = []
        self._cancelled = False

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def gather(self, batch: Callable[[list], list], item: Any) -> Any:
        """``batch([item, ...])``'s result for ``item``, batched with the other blocks'."""
        if self._cancelled:
            raise Cancelled
        job = greenlet.getcurrent()
        if job is self._server:  # pragma: no cover - a block's scope is its own greenlet's
            return batch([item])[0]
        self._waiting.append((batch, item, job))
        result = self._server.switch()
        if isinstance(result, _Failed):
            raise result.error
        return result

    def serve(self) -> None:
        """Run the waiting calls, batch by batch, and resume their blocks, until no block
        waits (on the greenlet that started the blocks)."""
        while self._waiting:
            waiting, self._waiting = self._waiting, []
            groups: dict[Callable[[list], list], list[tuple[Any, greenlet.greenlet]]] = {}
            for batch, item, job in waiting:
                groups.setdefault(batch, []).append((item, job))
            resume: list[tuple[greenlet.greenlet, Any]] = []
            for batch, calls in groups.items():
                try:
                    results: list[Any] = list(batch([item for item, _ in calls]))
                except Exception as exc:  # noqa: BLE001 - each waiting block re-raises it
                    results = [_Failed(exc)] * len(calls)
                resume.extend((job, result) for (_, job), result in zip(calls, results))
            for job, result in resume:
                job.switch(result)  # it runs until its next call waits, or it ends

    def cancel(self, jobs: Sequence[greenlet.greenlet] = ()) -> None:
        """Every later :meth:`gather` raises :class:`Cancelled`, and so does the waiting call
        of every block of ``jobs`` that is suspended (the caller of :func:`together` was
        interrupted: the blocks end at once, their ``finally`` clauses run)."""
        self._cancelled = True
        self._waiting = []
        for job in jobs:
            if job and not job.dead:  # started and suspended
                job.throw(Cancelled)


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
    """``[function(*task) for task in tasks]``, each task in a greenlet of its own (in groups
    of at most ``limit``), their batching solvers' calls gathered at one :class:`Meeting` per
    group. One block runs at a time, on the calling thread. Results in the order of
    ``tasks``; where tasks raise, the first one's exception (in that order) is raised once
    every block of its group ended. An interrupt (an exception that is no ``Exception``,
    such as ``KeyboardInterrupt``, in a block or in a batch) ends the group at once: each
    suspended block at the call it waits in (its ``finally`` clauses run), and the blocks not
    started yet never run; the interrupt is raised, before any block's ``Exception``."""
    out: list[Any] = [None] * len(tasks)
    errors: list[BaseException | None] = [None] * len(tasks)
    for lo in range(0, len(tasks), limit):
        group = range(lo, min(lo + limit, len(tasks)))
        meeting = Meeting()

        def work(i: int, meeting: Meeting = meeting) -> None:
            _SCOPE.set(meeting)  # in the greenlet's own context
            try:
                out[i] = function(*tasks[i])
            except Cancelled:
                pass
            except Exception as exc:  # noqa: BLE001 - re-raised by the caller
                errors[i] = exc

        jobs = [greenlet.greenlet(work) for _ in group]
        try:
            for i, job in zip(group, jobs):
                job.switch(i)  # it runs until its first call waits, or it ends
            meeting.serve()
        except BaseException:
            meeting.cancel(jobs)
            raise
        for i in group:
            error = errors[i]
            if error is not None:
                raise error
    return out
