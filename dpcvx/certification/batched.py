"""Many small arrowhead programs solved in one pass, each exactly as if alone.

A mechanism that splits its data into blocks (paper 000's Localized Double Output
Perturbation: dozens of blocks per phase, each a regularized ERM of its own) solves many small
programs of one structure. :func:`~dpcvx.certification.arrowhead.arrowhead_ipm` on a block of
a few hundred examples spends most of its time in numpy's per-call overhead: a step's few
dozen operations each cost microseconds whatever the block's size. :func:`batched_ipm` runs
the same method on many such programs at once: every per-element operation runs once on the
examples of all programs, laid end to end, and only what couples a program's examples (its
matrix-vector products, its Schur complement and its factor) runs per program.

**Each program gets the iterates it would get alone.** Every program keeps its own step
length, centring, stopping rule and best iterate; every per-element operation is elementwise
(each element's value is the same whatever else is in the array), every per-program sum is a
``reduceat`` over the program's own elements (its value depends on the segment only, not on
where it lies), and every product with a program's
data is the same BLAS call on the same array as when it runs alone. So a program's point,
multipliers and step count do not depend on which programs share its batch, or on whether it
has any company: a block solved on an executor (alone) releases the same point as in a
batch in the calling process, which the tests check bit for bit.

Only small programs of the arrowhead method's common case are batched: every term a maximum
of multiples of one data matrix (hinge, absolute, pinball, epsilon-insensitive, their
Lipschitz extensions' relaxed forms), no quadratic term, no copies, and at most
:data:`BATCH_ROWS` elements (:func:`batchable`); the others run as they always did, in a
block or not. The method's steps are those of
:func:`~dpcvx.certification.arrowhead.arrowhead_ipm`, formula for formula; its point only goes
to the certificate.

Inside :func:`dpcvx._batching.block_scope` (a block of a mechanism that splits its data),
:func:`~dpcvx.certification.arrowhead.arrowhead_ipm` sends such programs here: alone, or,
where the blocks run together as greenlets (:func:`dpcvx._batching.together`), with every other
block's program that waits at the same time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpcvx._batching import SMALL, SMALL_D
from dpcvx.certification.arrowhead import (
    _GRAM_ENTRIES,
    STALL,
    Bounds,
    PiecewiseModel,
    _cho_factor,
    _cho_solve,
    _onto_rows,
    _row_max,
    _rows,
)

__all__ = ["IpmRequest", "batchable", "batched_ipm"]


@dataclass(frozen=True)
class IpmRequest:
    """One program for :func:`batched_ipm`: the arguments of
    :func:`~dpcvx.certification.arrowhead.arrowhead_ipm` (no quadratic term, no copies)."""

    model: PiecewiseModel
    lam: float
    w0: np.ndarray
    start: np.ndarray
    tol: float
    max_iter: int
    bounds: Bounds | None


#: the most elements (rows of all terms) of a program :func:`batched_ipm` takes. Above it the
#: method's fixed cost per step is small next to its work on the elements, and
#: :func:`~dpcvx.certification.arrowhead.arrowhead_ipm`'s own steps (in row chunks, in place)
#: are faster: hinge, d = 20, tightest tolerance, a batch against the same programs one by
#: one: 0.29x the time at 100 examples each, 0.37x at 300, 0.66x at 1,000, 1.0x at 3,000,
#: 1.6x at 10,000 (where the batch also holds every program's arrays at once)
BATCH_ROWS = SMALL
#: the largest dimension :func:`batched_ipm` takes (:data:`dpcvx._batching.SMALL_D`): a
#: program's ``d x d`` matrices then cost more than its elements
BATCH_D = SMALL_D
#: the most elements of all the programs of one batch, each program's ``d x d`` Schur
#: complement counted as ``d^2`` more: more programs run in further batches (the same
#: results), whose arrays stay in the processor's caches and whose memory stays small
BATCH_TOTAL = 1 << 15


def batchable(model: PiecewiseModel, quad: Any, blocks: Any) -> bool:
    """Whether :func:`batched_ipm` takes this program: no quadratic term, no copies, every
    term's pieces multiples of one matrix, at most :data:`BATCH_ROWS` elements and
    :data:`BATCH_D` dimensions."""
    return (
        quad is None
        and blocks is None
        and model.d <= BATCH_D
        and all(t.base is not None for t in model.terms)
        and sum(t.b[0].size for t in model.terms) <= BATCH_ROWS
    )


def _key(request: IpmRequest) -> tuple:
    """Programs with the same key share a batch: the same dimension, the same number of pieces
    per term and the same kinds of domain constraints (a program's data, its pieces' multiples,
    weights and domain are its own: the multiples are ratios found in the data, which can differ
    in their last bits between blocks)."""
    return (
        request.model.d,
        tuple(len(t.b) for t in request.model.terms),
        None if request.bounds is None else tuple(kind for kind, _, _ in request.bounds.parts),
    )


def batched_ipm(requests: Sequence[IpmRequest]) -> list[Any]:
    """Solve every program of ``requests``; per program ``(point, multipliers per term,
    steps, [domain slacks, their multipliers])``, as
    :func:`~dpcvx.certification.arrowhead.arrowhead_ipm` returns them (with ``domain_out``),
    or the exception that program raised. Programs of different structure run in separate
    batches, and so do more than :data:`BATCH_TOTAL` elements. Where a batch raises, each of
    its programs runs again alone: a program's result, or its exception, is its own."""
    out: list[Any] = [None] * len(requests)
    groups: dict[tuple, list[int]] = {}
    for i, request in enumerate(requests):
        groups.setdefault(_key(request), []).append(i)
    for members in groups.values():
        cuts = [0]
        total = 0
        for k, i in enumerate(members):
            model = requests[i].model
            size = sum(t.b[0].size for t in model.terms) + model.d * model.d
            if total and total + size > BATCH_TOTAL:
                cuts.append(k)
                total = 0
            total += size
        cuts.append(len(members))
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            part = members[lo:hi]
            try:
                results = _run([requests[i] for i in part])
            except Exception as exc:  # noqa: BLE001 - handed to the program(s) it concerns
                if len(part) == 1:
                    results = [exc]
                else:  # which program raised is found by running each alone
                    results = [_alone(requests[i]) for i in part]
            for i, result in zip(part, results):
                out[i] = result
    return out


def _alone(request: IpmRequest) -> Any:
    try:
        return _run([request])[0]
    except Exception as exc:  # noqa: BLE001 - that program's own failure
        return exc


def _run(requests: list[IpmRequest]) -> list[Any]:
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _Batch(requests).run()


class _Bounds:
    """The domains of programs whose :class:`~dpcvx.certification.arrowhead.Bounds` have the
    same parts (kinds, in order), one row per program: :class:`Bounds`'s methods on every
    program at once, each row computed from that program's values only."""

    def __init__(self, bounds: list[Bounds]) -> None:
        first = bounds[0]
        self.kinds = [kind for kind, _, _ in first.parts]
        self.a = [np.stack([b.parts[k][1] for b in bounds]) for k in range(len(self.kinds))]
        self.b = [
            np.array([b.parts[k][2] for b in bounds], float)
            if kind == "ball"
            else np.stack([b.parts[k][2] for b in bounds])
            for k, kind in enumerate(self.kinds)
        ]
        self.inner = np.stack([b.inner for b in bounds])

    def take(self, keep: list[int]) -> None:
        self.a = [a[keep] for a in self.a]
        self.b = [b[keep] for b in self.b]
        self.inner = self.inner[keep]

    def g(self, W: np.ndarray) -> np.ndarray:
        out = []
        for kind, a, b in zip(self.kinds, self.a, self.b):
            if kind == "ball":
                U = W - a
                out.append(((np.add.reduce(U * U, axis=1) - b * b) / (2 * b))[:, None])
            else:
                out.append(np.concatenate([a - W, W - b], axis=1))
        return np.concatenate(out, axis=1)

    def jac(self, W: np.ndarray, V: np.ndarray) -> np.ndarray:
        out = []
        for kind, a, b in zip(self.kinds, self.a, self.b):
            if kind == "ball":
                out.append((np.add.reduce((W - a) * V, axis=1) / b)[:, None])
            else:
                out.append(np.concatenate([-V, V], axis=1))
        return np.concatenate(out, axis=1)

    def jac_t(self, W: np.ndarray, E: np.ndarray) -> np.ndarray:
        d = W.shape[1]
        out = np.zeros(W.shape)
        at = 0
        for kind, a, b in zip(self.kinds, self.a, self.b):
            if kind == "ball":
                out += (W - a) * (E[:, at] / b)[:, None]
                at += 1
            else:
                out += E[:, at + d : at + 2 * d] - E[:, at : at + d]
                at += 2 * d
        return out

    def hessian(self, W: np.ndarray, nu: np.ndarray, s: np.ndarray) -> np.ndarray:
        J, d = W.shape
        H = np.zeros((J, d, d))
        diag = np.arange(d)
        at = 0
        for kind, a, b in zip(self.kinds, self.a, self.b):
            if kind == "ball":
                U = (W - a) / b[:, None]
                H[:, diag, diag] += (nu[:, at] / b)[:, None]
                H += (nu[:, at] / s[:, at])[:, None, None] * (U[:, :, None] * U[:, None, :])
                at += 1
            else:
                H[:, diag, diag] += (
                    nu[:, at : at + d] / s[:, at : at + d]
                    + nu[:, at + d : at + 2 * d] / s[:, at + d : at + 2 * d]
                )
                at += 2 * d
        return H

    def interior(self, W: np.ndarray) -> np.ndarray:
        if len(self.kinds) != 1:
            return self.inner.copy()
        a, b = self.a[0], self.b[0]
        if self.kinds[0] == "ball":
            U = W - a
            nrm = np.sqrt(np.add.reduce(U * U, axis=1))
            factor = np.minimum(1.0, 0.5 * b / np.where(nrm > 0, nrm, 1.0))
            return np.where((nrm > 0)[:, None], a + U * factor[:, None], a)
        width = b - a
        return np.clip(W, a + 0.05 * width, b - 0.05 * width)


class _Batch:
    """The state of :func:`batched_ipm` for programs of one structure. Per-element arrays hold
    the active programs' elements end to end (program-major); ``starts[t]`` are the offsets
    of each active program's rows in term ``t``'s arrays."""

    def __init__(self, requests: list[IpmRequest]) -> None:
        self.requests = requests
        self.results: list[Any] = [None] * len(requests)
        first = requests[0].model
        self.d = first.d
        self.T = len(first.terms)
        self.m = [len(t.b) for t in first.terms]
        self.base: list[list[Any]] = []  # per program, per term: its data matrix
        self.RC: list[Any] = []  # per term: the rows' own multiples, end to end (or None)
        self.sizes: list[list[int]] = []
        self.active: list[int] = []
        self.starts: list[np.ndarray] = []
        self.rows_of: list[np.ndarray] = []

    # ---------------------------------------------------------------- per-program products
    def _apply(self, t: int, W: np.ndarray, active: list[int]) -> np.ndarray:
        """``(N, m)``: every piece's ``A_j w`` of each active program's rows of term ``t``."""
        starts = self.starts[t]
        v = np.empty(starts[-1])
        for a, j in enumerate(active):
            np.dot(self.base[j][t], W[a], out=v[starts[a] : starts[a + 1]])
        out = np.empty((v.size, self.m[t]))
        R = self.RC[t]
        for p in range(self.m[t]):
            np.multiply(R[:, p], v, out=out[:, p])
        return out

    def _apply_t(self, t: int, E: np.ndarray, active: list[int]) -> np.ndarray:
        """``(J, d)``: ``sum_j A_j^T E[:, j]`` per active program."""
        R = self.RC[t]
        g = E[:, 0] * R[:, 0]
        for p in range(1, self.m[t]):
            g += E[:, p] * R[:, p]
        starts = self.starts[t]
        out = np.empty((len(active), self.d))
        for a, j in enumerate(active):
            out[a] = self.base[j][t].T @ g[starts[a] : starts[a + 1]]
        return out

    def _schur(self, t: int, D: np.ndarray, total: np.ndarray, live: list[int]) -> np.ndarray:
        """``(J, d, d)``: term ``t``'s part of every live program's Schur complement (zero for
        the others; the factor reads its upper triangle), by one symmetric rank-k update per
        program (in chunks of :data:`~dpcvx.certification.arrowhead._GRAM_ENTRIES` entries,
        numpy's ``B^T @ B``, as :func:`~dpcvx.certification.arrowhead._upper_gram`)."""
        m = self.m[t]
        R = self.RC[t]
        weight = sum(
            (R[:, q] - R[:, p]) ** 2 * D[:, q] * D[:, p] for q in range(m) for p in range(q + 1, m)
        )
        root = np.sqrt(np.asarray(weight) / total)
        d = self.d
        H = np.zeros((len(self.active), d, d))
        step = max(1, _GRAM_ENTRIES // max(d, 1))
        starts = self.starts[t]
        for a in live:
            base = self.base[self.active[a]][t]
            mine = root[starts[a] : starts[a + 1]]
            for lo in range(0, mine.size, step):
                B = base[lo : lo + step] * mine[lo : lo + step, None]
                H[a] += B.T @ B
        return H

    def _segments(self, t: int, values: np.ndarray, ufunc: np.ufunc) -> np.ndarray:
        """``ufunc`` reduced over each active program's rows (all columns) of term ``t``."""
        m = values.shape[1] if values.ndim == 2 else 1
        return ufunc.reduceat(values.ravel(), self.starts[t][:-1] * m)

    # ---------------------------------------------------------------- layout
    def _layout(self, active: list[int]) -> None:
        """The offsets of the programs ``active`` in the per-element arrays."""
        self.active = active
        self.starts = []
        self.rows_of = []  # per term, the program position of every row
        for t in range(self.T):
            sizes = np.array([self.sizes[j][t] for j in active], dtype=np.intp)
            self.starts.append(np.concatenate([[0], np.cumsum(sizes)]).astype(np.intp))
            self.rows_of.append(np.repeat(np.arange(len(active)), sizes))

    # ---------------------------------------------------------------- the method
    def run(self) -> list[Any]:  # noqa: C901 - arrowhead_ipm's steps, per program
        reqs = self.requests
        d, T = self.d, self.T
        J = len(reqs)
        self.base = [[t.base for t in r.model.terms] for r in reqs]
        self.sizes = [[t.b[0].size for t in r.model.terms] for r in reqs]
        lam = np.array([r.lam for r in reqs], float)
        W0 = np.stack([np.asarray(r.w0, float) for r in reqs])
        LIN = np.stack([np.asarray(r.model.linear, float) for r in reqs])
        W = np.stack([np.array(r.start, float) for r in reqs])
        bounded = reqs[0].bounds is not None
        dom = _Bounds([r.bounds for r in reqs]) if bounded else None  # type: ignore[misc]
        if dom is not None:
            W = dom.interior(W)
        active = list(range(J))
        self._layout(active)
        # per-element data, program-major (each program's data matrices stay its own)
        OFF = [
            np.concatenate([np.stack(r.model.terms[t].b, axis=1) for r in reqs]) for t in range(T)
        ]
        # every row's multiples of its term's matrix (the term's own, or the rows' own)
        self.RC = [
            np.concatenate(
                [
                    r.model.terms[t].row_coefs
                    if r.model.terms[t].row_coefs is not None
                    else np.tile(np.asarray(r.model.terms[t].coefs, float), (sizes[t], 1))
                    for r, sizes in zip(reqs, self.sizes)
                ]
            )
            for t in range(T)
        ]
        c_prog = np.array([[r.model.terms[t].c for t in range(T)] for r in reqs], float)  # (J, T)
        CROW = [c_prog[self.rows_of[t], t] for t in range(T)]
        n_prog = np.array([r.model.n for r in reqs], float)
        scale = 1.0 + np.array(
            [sum(tm.c * tm.b[0].size for tm in r.model.terms) for r in reqs], float
        )
        tol = np.array([r.tol for r in reqs], float)
        max_iter = np.array([r.max_iter for r in reqs], int)
        # the state
        Tt, S, MU = [], [], []
        for t in range(T):
            V = self._apply(t, W, active) + OFF[t]
            top = _row_max(V)
            Tt.append(top + 1.0)
            S.append(top[:, None] + 1.0 - V)
            MU.append(np.repeat(CROW[t][:, None] / self.m[t], self.m[t], axis=1))
        if dom is not None:
            SD = np.maximum(-dom.g(W), 1e-8)
            NU = np.repeat(np.maximum(lam, 1e-3)[:, None], SD.shape[1], axis=1)
        else:
            SD = NU = np.zeros((J, 0))
        count = (
            np.array([sum(self.sizes[j][t] * self.m[t] for t in range(T)) for j in range(J)], float)
            + SD.shape[1]
        )
        best: list[Any] = [None] * J
        last_merit = np.full(J, np.inf)
        stalled = np.zeros(J, int)
        steps = np.zeros(J, int)
        # per-program arrays follow the active programs (row a is program active[a])
        lamA, W0A, LINA = lam, W0, LIN
        eye = np.eye(d)

        def finish(a: int) -> None:
            """Program ``active[a]`` is done: its best iterate, or its last."""
            j = active[a]
            if best[j] is None:
                mus = [MU[t][self.starts[t][a] : self.starts[t][a + 1]].copy() for t in range(T)]
                self.results[j] = (W[a].copy(), mus, int(steps[j]), [SD[a].copy(), NU[a].copy()])
            else:
                _, w_b, mus_b, sd_b, nu_b = best[j]
                self.results[j] = (w_b, mus_b, int(steps[j]), [sd_b, nu_b])

        while active:
            done: list[int] = []  # positions of programs that stop this step
            steps[active] += 1
            # residuals
            r_w = lamA[:, None] * (W - W0A) + LINA
            r_t, r_p = [], []
            for t in range(T):
                r_w += self._apply_t(t, MU[t], active)
                r_t.append(_rows(MU[t]) - CROW[t])
                r = np.empty(S[t].shape)
                for p in range(self.m[t]):
                    np.subtract(S[t][:, p], Tt[t], out=r[:, p])
                r += self._apply(t, W, active)
                r += OFF[t]
                r_p.append(r)
            if dom is not None:
                r_w += dom.jac_t(W, NU)
                r_d = dom.g(W) + SD
            else:
                r_d = SD
            comp = np.add.reduce(NU * SD, axis=1)
            for t in range(T):
                comp += self._segments(t, MU[t] * S[t], np.add)
            infeas = np.sqrt(np.add.reduce(r_w * r_w, axis=1))
            n_act = n_prog[active]
            for t in range(T):
                infeas = np.maximum(infeas, self._segments(t, np.abs(r_t[t]), np.maximum) * n_act)
                infeas = np.maximum(infeas, self._segments(t, _row_max(np.abs(r_p[t])), np.maximum))
            if r_d.shape[1]:
                infeas = np.maximum(infeas, np.abs(r_d).max(axis=1))
            stopping = []
            for a, j in enumerate(active):
                if not np.isfinite(comp[a] + infeas[a]):
                    stopping.append(a)
                    continue
                merit = comp[a] / scale[j] + infeas[a]
                if best[j] is None or merit < best[j][0]:
                    stalled[j] = 0
                    mus = [
                        MU[t][self.starts[t][a] : self.starts[t][a + 1]].copy() for t in range(T)
                    ]
                    best[j] = (merit, W[a].copy(), mus, SD[a].copy(), NU[a].copy())
                elif not merit < last_merit[j]:
                    stalled[j] += 1
                last_merit[j] = merit
                if (comp[a] <= tol[j] * scale[j] and infeas[a] <= tol[j]) or stalled[j] >= STALL:
                    stopping.append(a)
            # the Schur complements, each factored
            stopped = set(stopping)
            live = [a for a in range(len(active)) if a not in stopped]
            Ds = [MU[t] / S[t] for t in range(T)]
            Dsums = [_rows(D) for D in Ds]
            H = lamA[:, None, None] * eye
            for t in range(T):
                H += self._schur(t, Ds[t], Dsums[t], live)
            if dom is not None:
                H += dom.hessian(W, NU, SD)
            factors: list[Any] = [None] * len(active)
            for a in live:
                try:
                    factors[a] = _cho_factor(H[a])
                except (np.linalg.LinAlgError, ValueError):
                    stopping.append(a)
            for a in stopping:  # before this step's update: as arrowhead_ipm's break
                finish(a)
            done.extend(stopping)
            live = [a for a in live if factors[a] is not None]  # not those that failed
            if live:
                mu_avg = comp / count[active]
                # predictor
                rc_aff = [MU[t] * S[t] for t in range(T)]
                rcd_aff = NU * SD
                system = (Ds, Dsums, r_w, r_t, r_p, r_d, factors, live, S, W, NU, SD, dom)
                _, aff, aff_d = self._direction(system, rc_aff, rcd_aff)
                a_aff = self._max_step(S, MU, aff, SD, NU, aff_d)
                comp_aff = np.zeros(len(active))
                for t in range(T):
                    _, ds, dmu = aff[t]
                    rows_aff = a_aff[self.rows_of[t]][:, None]
                    comp_aff += self._segments(
                        t, (MU[t] + rows_aff * dmu) * (S[t] + rows_aff * ds), np.add
                    )
                if dom is not None:
                    dsd, dnu = aff_d
                    comp_aff += np.add.reduce(
                        (NU + a_aff[:, None] * dnu) * (SD + a_aff[:, None] * dsd), axis=1
                    )
                sigma = np.where(comp > 0, (comp_aff / np.where(comp > 0, comp, 1.0)) ** 3, 0.0)
                target = sigma * mu_avg
                # corrector
                r_c = rc_aff
                for t in range(T):
                    _, ds, dmu = aff[t]
                    r_c[t] += dmu * ds
                    r_c[t] -= target[self.rows_of[t]][:, None]
                rcd = rcd_aff
                if dom is not None:
                    rcd = rcd + aff_d[1] * aff_d[0]
                    rcd = rcd - target[:, None]
                del aff
                dW, parts, parts_d = self._direction(system, r_c, rcd)
                alpha = np.minimum(1.0, 0.99 * self._max_step(S, MU, parts, SD, NU, parts_d))
                frozen = np.ones(len(active), bool)
                frozen[live] = False
                alpha[frozen] = 0.0
                W = W + alpha[:, None] * dW
                for t in range(T):
                    dt, ds, dmu = parts[t]
                    rows_alpha = alpha[self.rows_of[t]]
                    Tt[t] += rows_alpha * dt
                    S[t] += rows_alpha[:, None] * ds
                    MU[t] += rows_alpha[:, None] * dmu
                    _onto_rows(MU[t], CROW[t])
                if dom is not None:
                    SD = SD + alpha[:, None] * parts_d[0]
                    NU = NU + alpha[:, None] * parts_d[1]
                for a in live:
                    if steps[active[a]] >= max_iter[active[a]]:
                        finish(a)
                        done.append(a)
            if not done:
                continue
            gone = set(done)
            keep = [a for a in range(len(active)) if a not in gone]
            if not keep:
                break
            keep_rows = [
                np.concatenate([np.arange(self.starts[t][a], self.starts[t][a + 1]) for a in keep])
                for t in range(T)
            ]
            Tt = [x[rows] for x, rows in zip(Tt, keep_rows)]
            S = [x[rows] for x, rows in zip(S, keep_rows)]
            MU = [x[rows] for x, rows in zip(MU, keep_rows)]
            OFF = [x[rows] for x, rows in zip(OFF, keep_rows)]
            CROW = [x[rows] for x, rows in zip(CROW, keep_rows)]
            self.RC = [x[rows] for x, rows in zip(self.RC, keep_rows)]
            W, lamA, W0A, LINA = W[keep], lamA[keep], W0A[keep], LINA[keep]
            SD, NU = SD[keep], NU[keep]
            if dom is not None:
                dom.take(keep)
            active = [active[a] for a in keep]
            self._layout(active)
        return self.results

    def _direction(self, system, r_c, rc_d):
        """:func:`~dpcvx.certification.arrowhead._direction` per program: the Newton
        direction for the complementarity residuals ``r_c`` (per term) and ``rc_d`` (the
        domains', one row per active program); zero for the programs not live."""
        Ds, Dsums, r_w, r_t, r_p, r_d, factors, live, S, W, NU, SD, dom = system
        T = self.T
        active = self.active
        rhs = -r_w.copy()
        qs = []
        for t in range(T):
            D, s = Ds[t], S[t]
            g = D * r_p[t]
            g -= r_c[t] / s
            q = (_rows(g) + r_t[t]) / Dsums[t]
            for p in range(self.m[t]):
                g[:, p] -= D[:, p] * q
            rhs -= self._apply_t(t, g, active)
            qs.append(q)
        if dom is not None:
            rhs -= dom.jac_t(W, (NU * r_d - rc_d) / SD)
        dW = np.zeros_like(W)
        for a in live:
            dW[a] = _cho_solve(factors[a], rhs[a])
        out = []
        for t in range(T):
            D, s = Ds[t], S[t]
            Adw = self._apply(t, dW, active)
            dt = qs[t] + _rows(D * Adw) / Dsums[t]
            ds = np.empty(s.shape)
            for p in range(self.m[t]):
                np.subtract(r_p[t][:, p], dt, out=ds[:, p])
            np.negative(ds, out=ds)
            ds -= Adw
            dmu = D * ds
            dmu += r_c[t] / s
            np.negative(dmu, out=dmu)
            out.append((dt, ds, dmu))
        out_d = None
        if dom is not None:
            dsd = -r_d - dom.jac(W, dW)
            out_d = (dsd, (-rc_d - NU * dsd) / SD)
        return dW, out, out_d

    def _max_step(self, S, MU, parts, SD, NU, parts_d) -> np.ndarray:
        """Per active program, the longest step in ``[0, 1]`` that keeps its slacks and
        multipliers nonnegative (:func:`~dpcvx.certification.arrowhead._max_step`)."""
        low = np.full(len(self.active), -1.0)
        for t in range(self.T):
            _, ds, dmu = parts[t]
            for x, dx in ((S[t], ds), (MU[t], dmu)):
                low = np.fmin(low, self._segments(t, dx / x, np.fmin))
        if parts_d is not None and SD.shape[1]:
            for x, dx in ((SD, parts_d[0]), (NU, parts_d[1])):
                low = np.fmin(low, np.fmin.reduce(dx / x, axis=1))
        return np.where(low < -1.0, -1.0 / low, 1.0)
