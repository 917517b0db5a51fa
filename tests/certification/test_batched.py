"""The batched arrowhead method (dpcvx.certification.batched) and the blocks that run together
(dpcvx._batching): each program gets in a batch exactly what it gets alone, the steps are the
arrowhead method's, and a mechanism's blocks in one process batch their programs."""

from __future__ import annotations

import dataclasses
import math
import threading

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx import _batching
from dpcvx._batching import SOLO, block_scope, current, together
from dpcvx.certification import batched
from dpcvx.certification.arrowhead import (
    PiecewiseModel,
    arrowhead_ipm,
    extension_pieces,
    piecewise_model,
)
from dpcvx.certification.batched import IpmRequest, batchable, batched_ipm
from dpcvx.certification.solve import _bounds
from dpcvx.modeling.localized import LocalizedDomain

LOSSES = ("hinge", "absolute", "pinball", "eps")


def _request(rng: np.random.Generator, d: int = 6) -> IpmRequest:
    """A random program: loss, size (down to one example), ball or box, a localized domain
    or not, the relaxed Lipschitz extension (rows' own slopes) or the loss, weights, targets."""
    loss = LOSSES[int(rng.integers(len(LOSSES)))]
    n = int(rng.integers(1, 120))
    X = rng.standard_t(3, size=(n, d))
    beta = rng.normal(size=d)
    if loss == "hinge":
        Y = np.sign(X @ beta + 0.3 * rng.normal(size=n))
    else:
        Y = 0.3 * X @ beta + 0.3 * rng.normal(size=n)
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    r = x @ w - y
    f = {
        "hinge": cp.pos(1 - y * (x @ w)),
        "absolute": cp.abs(r),
        "pinball": cp.maximum(-0.3 * r, 0.7 * r),
        "eps": cp.maximum(0, r - 0.1, -r - 0.1),
    }[loss]
    R = float(rng.choice([0.3, 1.0, 5.0]))
    box = rng.random() < 0.3
    problem = dpcvx.Problem(f, w, {x: X, y: Y}, [cp.abs(w) <= R] if box else [cp.norm(w) <= R])
    decl = problem.declaration
    model = piecewise_model(decl)
    assert model is not None
    if rng.random() < 0.5:
        relaxed = extension_pieces(model, float(rng.choice([0.5, 2.0])))
        if relaxed is not None:
            model = relaxed.model
    localized = None
    if rng.random() < 0.3:
        localized = LocalizedDomain(decl.domain, rng.normal(size=d) * 0.1 * R, 0.5 * R)
    w0 = rng.normal(size=d) * 0.1
    return IpmRequest(
        model,
        float(rng.choice([0.01, 0.1, 1.0])),
        w0,
        decl.domain.make_feasible(w0),
        float(rng.choice([1e-7, 1e-10, 1e-12])),
        int(rng.choice([3, 80])),
        _bounds(decl.domain, localized),
    )


def _same(a, b) -> bool:
    point, mus, steps, slacks = a
    return (
        np.array_equal(point, b[0])
        and len(mus) == len(b[1])
        and all(np.array_equal(u, v) for u, v in zip(mus, b[1]))
        and steps == b[2]
        and all(np.array_equal(u, v) for u, v in zip(slacks, b[3]))
    )


@pytest.fixture(scope="module")
def requests_mix() -> list[IpmRequest]:
    rng = np.random.default_rng(20261128)
    out = [_request(rng) for _ in range(40)]
    assert all(batchable(r.model, None, None) for r in out)
    return out


def test_each_program_gets_in_a_batch_exactly_what_it_gets_alone(requests_mix):
    together_ = batched_ipm(requests_mix)
    alone = [batched_ipm([r])[0] for r in requests_mix]
    # and in another company: the second half, in reverse order
    half = batched_ipm(requests_mix[::-2])
    assert all(_same(a, b) for a, b in zip(together_, alone))
    assert all(_same(a, b) for a, b in zip(half, alone[::-2]))
    assert len({r[2] for r in alone}) > 3  # programs that stop at different steps


def test_a_batch_whose_programs_share_their_steps_is_caught(requests_mix, monkeypatch):
    """The negative control: one step length for the whole batch (the shortest) couples the
    programs, and the comparison above sees it."""
    alone = [batched_ipm([r])[0] for r in requests_mix]
    own = batched._Batch._max_step

    def shared(self, *args):
        steps = own(self, *args)
        return np.full_like(steps, steps.min())

    monkeypatch.setattr(batched._Batch, "_max_step", shared)
    coupled = batched_ipm(requests_mix)
    assert not all(_same(a, b) for a, b in zip(coupled, alone))


def test_the_batched_method_takes_the_arrowhead_methods_steps(requests_mix):
    """Against :func:`arrowhead_ipm` itself (outside any block): the same formulas, so the
    same point up to rounding, and the same step count but where rounding decides a stop."""
    got = batched_ipm(requests_mix)
    same_steps = 0
    for r, (point, mus, steps, slacks) in zip(requests_mix, got):
        out: list = []
        ref, ref_mus, ref_steps = arrowhead_ipm(
            r.model,
            r.lam,
            r.w0,
            r.start,
            tol=r.tol,
            max_iter=r.max_iter,
            bounds=r.bounds,
            domain_out=out,
        )
        scale = 1.0 + float(np.abs(ref).max())
        assert np.abs(point - ref).max() <= 1e-6 * scale
        assert [m.shape for m in mus] == [m.shape for m in ref_mus]
        assert [s.shape for s in slacks] == [s.shape for s in out]
        same_steps += steps == ref_steps
    assert same_steps >= 0.9 * len(requests_mix)


def test_a_block_sends_its_programs_to_the_batched_method(requests_mix, monkeypatch):
    r = requests_mix[0]
    calls: list[int] = []
    real = batched.batched_ipm

    def counting(requests):
        out = real(requests)
        calls.append(len(requests))
        return out

    monkeypatch.setattr(batched, "batched_ipm", counting)
    arrowhead_ipm(r.model, r.lam, r.w0, r.start, tol=r.tol, bounds=r.bounds)
    assert calls == []  # outside a block: the arrowhead method itself
    with block_scope():
        got = arrowhead_ipm(r.model, r.lam, r.w0, r.start, tol=r.tol, bounds=r.bounds)
    assert calls == [1]
    alone = real([r])[0]
    assert np.array_equal(got[0], alone[0]) and got[2] == alone[2]
    # a quadratic term is not the common case: the arrowhead method runs it, even in a block
    quad = (np.eye(r.model.d), np.zeros(r.model.d))
    with block_scope():
        arrowhead_ipm(r.model, r.lam, r.w0, r.start, tol=r.tol, bounds=r.bounds, quad=quad)
    assert calls == [1]


# ------------------------------------------------------------------------------ _batching
def _double_all(items: list) -> list:
    return [2 * x for x in items]


def test_together_gathers_the_waiting_calls_into_one_batch():
    sizes: list[int] = []

    def batch(items):
        sizes.append(len(items))
        return [x + 100 for x in items]

    def job(i: int) -> tuple:
        scope = current()
        first = scope.gather(batch, i)
        if i % 2:  # half the jobs call twice, the others end first
            second = scope.gather(_double_all, i)
            return first, second
        return first, None

    out = together(job, [(i,) for i in range(7)])
    assert out == [(100 + i, 2 * i if i % 2 else None) for i in range(7)]
    assert sizes == [7]  # every first call in one batch; the second calls in one of three


def test_together_runs_one_job_at_a_time_and_hands_on_while_it_waits():
    running, peak = [0], [0]
    lock = threading.Lock()

    def job(i: int) -> int:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        x = sum(range(20000))  # some interpreter work
        with lock:
            running[0] -= 1
        y = current().gather(_double_all, i)
        return x + y

    out = together(job, [(i,) for i in range(12)])
    assert out == [sum(range(20000)) + 2 * i for i in range(12)]
    assert peak[0] == 1


def test_together_raises_the_first_failure_after_every_job_ended():
    ended: list[int] = []

    def job(i: int) -> int:
        try:
            value = current().gather(_double_all, i)
            if i in (2, 4):
                raise ValueError(f"job {i}")
            return value
        finally:
            ended.append(i)

    with pytest.raises(ValueError, match="job 2"):
        together(job, [(i,) for i in range(6)])
    assert sorted(ended) == list(range(6))


def test_a_failing_batch_fails_each_of_its_calls():
    def broken(items):
        raise ArithmeticError("batch")

    def job(i: int):
        try:
            current().gather(broken, i)
        except ArithmeticError:
            return "failed"
        return "ran"

    assert together(job, [(i,) for i in range(3)]) == ["failed"] * 3


def test_a_block_scope_outside_together_runs_each_call_alone():
    assert current() is None
    with block_scope():
        assert current() is SOLO
        assert current().gather(_double_all, 21) == 42
    assert current() is None

    def job() -> bool:
        meeting = current()
        with block_scope():  # a block inside together keeps the group's meeting
            return current() is meeting and isinstance(meeting, _batching.Meeting)

    assert together(job, [()] * 3) == [True] * 3


def _hinge_problem(n: int, d: int) -> dpcvx.Problem:
    rng = np.random.default_rng(3)
    X = rng.standard_t(5, size=(n, d)) * math.sqrt(3.0 / (5.0 * d))
    Y = np.sign(X @ rng.normal(size=d) + 0.1 * rng.normal(size=n))
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    return dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, {x: X, y: Y}, [cp.norm(w) <= 1.0])


def _ldop(**kw):
    return dpcvx.LocalizedDoubleOutputPerturbation(k=4, moment=1.2, progress=False, **kw)


def _count_batches(monkeypatch) -> list[int]:
    """The sizes of the batches the batched method runs from now on."""
    sizes: list[int] = []
    real = batched.batched_ipm

    def counting(requests):
        out = real(requests)
        sizes.append(len(requests))  # a batch that raised would leave the ladder to Clarabel
        return out

    monkeypatch.setattr(batched, "batched_ipm", counting)
    return sizes


def test_the_blocks_of_a_localized_release_batch_their_programs(monkeypatch):
    """Paper 000's LDOP in one process: the first stage of every block of a phase in one
    batch, and the release the same as with each block alone on a thread pool."""
    from concurrent.futures import ThreadPoolExecutor

    problem = _hinge_problem(4000, 5)
    sizes = _count_batches(monkeypatch)
    got = problem.solve_private(_ldop(), epsilon=1.0, rng=7).w
    assert max(sizes) > 1 and sum(sizes) >= 2 * len(sizes)
    sizes.clear()
    with ThreadPoolExecutor(2) as pool:
        alone = problem.solve_private(_ldop(executor=pool), epsilon=1.0, rng=7).w
    assert set(sizes) == {1}
    assert np.array_equal(got, alone)


def test_the_blocks_of_a_dask_workers_chunk_batch_their_programs(monkeypatch):
    """On a Dask ``Client`` each worker runs a chunk of a phase's blocks: small blocks run
    together there too (their programs in batches larger than one), and the release is the
    one of the calling process."""
    distributed = pytest.importorskip("distributed")
    problem = _hinge_problem(3000, 4)
    expected = problem.solve_private(_ldop(), epsilon=1.0, rng=7).w
    sizes = _count_batches(monkeypatch)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        got = problem.solve_private(_ldop(executor=client), epsilon=1.0, rng=7).w
    assert max(sizes) > 1
    assert np.array_equal(got, expected)


def test_an_interrupt_in_a_batch_ends_the_jobs_at_the_call_they_wait_in():
    """Ctrl-C while a batch runs (here: raised by the second batch) cancels the meeting: the
    jobs end at once, at their waiting call, instead of running the rest of their blocks,
    even behind a solver's ``except Exception``; the interrupt reaches the caller."""
    ended: list[str] = []
    calls = [0]

    def batch(items):
        calls[0] += 1
        if calls[0] == 2:
            raise KeyboardInterrupt
        return [2 * x for x in items]

    def job(i: int) -> None:
        try:
            try:
                current().gather(batch, i)
                current().gather(batch, i)
            except Exception:  # a solver's guard: it must not swallow the cancel
                ended.append("swallowed")
                return
            ended.append("ran")
        except _batching.Cancelled:
            ended.append("cancelled")
            raise

    with pytest.raises(KeyboardInterrupt):
        together(job, [(i,) for i in range(4)])
    assert ended == ["cancelled"] * 4


def test_an_interrupt_in_a_job_ends_the_others_and_reaches_the_caller():
    """An interrupt raised while a job runs (all of them run on the calling thread) ends
    the jobs waiting for their batch, and those not started never run."""
    ran: list[int] = []
    ended: list[int] = []

    def job(i: int) -> int:
        ran.append(i)
        try:
            if i == 2:
                raise KeyboardInterrupt
            return current().gather(_double_all, i)
        finally:
            ended.append(i)

    with pytest.raises(KeyboardInterrupt):
        together(job, [(i,) for i in range(5)])
    assert ran == [0, 1, 2] and sorted(ended) == [0, 1, 2]


def test_blocks_whose_solves_do_not_batch_run_one_after_the_other(monkeypatch):
    """A smooth loss's block solves never reach the arrowhead method: its LDOP phases run
    their blocks one after the other, not together."""
    from dpcvx.mechanisms import localized_double

    rng = np.random.default_rng(4)
    n, d = 2000, 4
    X = rng.normal(size=(n, d)) / 2
    Y = X @ rng.normal(size=d) + 0.1 * rng.normal(size=n)
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    problem = dpcvx.Problem(cp.huber(x @ w - y, 0.5), w, {x: X, y: Y}, [cp.norm(w) <= 1.0])
    groups: list[int] = []

    def counted(function, tasks, limit=256):
        groups.append(len(tasks))
        return together(function, tasks, limit)

    monkeypatch.setattr(localized_double, "together", counted)
    mech = dpcvx.LocalizedDoubleOutputPerturbation(k=4, moment=1.5, progress=False)
    problem.solve_private(mech, epsilon=1.0, rng=0)
    assert groups == []


def test_a_program_that_raises_in_a_batch_fails_alone(requests_mix, monkeypatch):
    """One program's exception is its own: the batch runs again program by program, and the
    others get exactly what they get alone (as on an executor, where each runs alone)."""
    alone = [batched_ipm([r])[0] for r in requests_mix[:6]]
    poisoned = dataclasses.replace(requests_mix[2], tol=0.125)
    batch = list(requests_mix[:6])
    batch[2] = poisoned
    real = batched._Batch.run

    def run(self):
        if any(r.tol == 0.125 for r in self.requests):
            raise FloatingPointError("poisoned")
        return real(self)

    monkeypatch.setattr(batched._Batch, "run", run)
    got = batched_ipm(batch)
    assert isinstance(got[2], FloatingPointError)
    assert all(_same(got[k], alone[k]) for k in (0, 1, 3, 4, 5))
    r = poisoned
    with block_scope(), pytest.raises(FloatingPointError, match="poisoned"):
        arrowhead_ipm(r.model, r.lam, r.w0, r.start, tol=r.tol, bounds=r.bounds)


def test_what_the_batched_method_does_not_take(requests_mix):
    r = requests_mix[0]
    assert not batchable(r.model, (np.eye(r.model.d), np.zeros(r.model.d)), None)
    wide = dataclasses.replace(r.model.terms[0])
    model = PiecewiseModel(
        r.model.n, batched.BATCH_D + 1, (wide,), np.zeros(batched.BATCH_D + 1), r.model.kinds
    )
    assert not batchable(model, None, None)  # too many dimensions
    # no step at all: the arrowhead method itself answers, in a block or not
    with block_scope():
        point, _, steps = arrowhead_ipm(
            r.model, r.lam, r.w0, r.start, tol=r.tol, bounds=r.bounds, max_iter=0
        )
    assert steps == 0 and np.all(np.isfinite(point))


def test_cancelled_is_no_exception_a_guard_would_catch():
    assert not issubclass(_batching.Cancelled, Exception)
