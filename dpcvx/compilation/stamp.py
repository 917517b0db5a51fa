"""Stamp the per-example block n times into one sparse conic program (vectorized).

The program is::

    minimize   (1/2) u^T P u + q^T u + q0
    subject to A u + s = b,  s in K

over ``u = [w, domain auxiliaries, aux_1, ..., aux_n]`` with objective
``(1/n) sum_i (c_i^T [w, aux_i] + c0_i) + (lam/2) ||w - w0||^2`` and rows ordered by cone type
(all zero rows, then nonnegative, then second-order, then exponential), so that one program
serves Clarabel, SCS and ECOS. No Python loop runs over examples: all index arithmetic is numpy
broadcasting, and the per-example values are one matrix product ``[1, theta] @ map``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from dpcvx.compilation.template import ConeLayout, DomainBlock, Template

__all__ = ["StampedProgram", "segments", "stamp", "stamp_parts"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StampedProgram:
    """One conic program for all n examples (see the module docstring).

    ``split_rows[t][j]`` is an ``(n, size)`` array of global rows of the split equality of
    argument ``j`` of term ``t`` (None for constant arguments).
    """

    P: sp.csc_matrix
    q: np.ndarray
    q0: float
    A: sp.csc_matrix
    b: np.ndarray
    cones: ConeLayout
    d: int
    n: int
    split_rows: tuple[tuple[np.ndarray | None, ...], ...]
    #: Lipschitz extension only: ``(n, d)`` global columns of the y_i, ``(n, d + 1)`` SOC rows
    y_cols: np.ndarray | None = None
    soc_rows: np.ndarray | None = None
    #: per-example objective ``C_obj[i] @ u + c0_obj[i]`` (the averaged objective is their mean)
    C_obj: sp.csr_matrix | None = None
    c0_obj: np.ndarray | None = None
    #: the terms held once (``stamp_parts``'s ``once``): their ``split_rows`` are ``(1, size)``,
    #: the rows of the one block every example of the part shares, whose objective weighs
    #: ``held_weight`` (the part's share of the examples) instead of ``1 / n`` per example
    held: frozenset[int] = frozenset()
    held_weight: float = 1.0


def terms_view(view: StampedProgram, keep: frozenset[int]) -> StampedProgram:
    """``view`` for the declaration of the terms ``keep`` only
    (:meth:`~dpcvx.modeling.declaration.Declaration.with_terms`): their split rows, renumbered
    in order, and which of them the program holds once."""
    order = sorted(keep)
    return dataclasses.replace(
        view,
        split_rows=tuple(view.split_rows[t] for t in order),
        held=frozenset(k for k, t in enumerate(order) if t in view.held),
    )


def segments(layout: ConeLayout) -> list[tuple[str, int, int]]:
    """(kind, start, size) of each cone group of a block, in block row order."""
    out = []
    start = 0
    for kind, size in (
        ("zero", layout.zero),
        ("nonneg", layout.nonneg),
        ("soc", sum(layout.soc)),
        ("exp", 3 * layout.exp),
    ):
        out.append((kind, start, size))
        start += size
    return out


def stamp(
    template: Template,
    domain: DomainBlock,
    theta: np.ndarray,
    *,
    d: int,
    lam: float,
    w0: np.ndarray,
    per_example_objective: bool = False,
) -> StampedProgram:
    """Build the stamped program for data ``theta`` (``(n, p + 1)``, first column ones)."""
    return stamp_parts(
        [(template, theta)],
        domain,
        d=d,
        lam=lam,
        w0=w0,
        per_example_objective=per_example_objective,
    )[0]


def stamp_parts(
    parts: list[tuple[Template, np.ndarray]],
    domain: DomainBlock,
    *,
    d: int,
    lam: float,
    w0: np.ndarray,
    per_example_objective: bool = False,
    once: tuple[int, Template] | None = None,
    once_weight: float | None = None,
) -> tuple[StampedProgram, tuple[StampedProgram, ...]]:
    """One program for several groups of examples, each stamped from its own template (e.g.
    the plain loss for some examples and the Lipschitz extension for the others), sharing
    ``w``, the domain rows and the objective ``(1/n) sum over all n examples``.

    Returns the whole program and, per part, a *view*: the same program whose ``split_rows``,
    ``y_cols``, ``soc_rows`` and ``n`` are those of the part (global indices).
    ``per_example_objective`` also stores each example's objective row (``C_obj``, ``c0_obj``).

    ``once`` ``(k, block)``: the terms every example of part ``k`` has the same (they read no
    data; the second of :attr:`~dpcvx.compilation.template.Template.held`), stamped once with
    the objective weight ``n_k / n`` (the mean over the part's examples of equal copies),
    where part ``k``'s template leaves them out (the first of ``held``); that part's view
    then has the once block's ``split_rows`` for them, ``(1, size)``
    (:attr:`StampedProgram.held`). ``once_weight``: the once block's objective weight
    instead (the folded extension's penalty, weighted one whatever the part:
    :func:`dpcvx.certification.solve.certified_solve`).
    """
    if once is not None and per_example_objective:
        raise ValueError("A block held once goes with the averaged objective.")
    n_total = sum(theta.shape[0] for _, theta in parts)
    # the once block is stamped as a part of one example, weighted as the part's examples
    weights = [1.0 / n_total] * len(parts)
    holder, held_weight = -1, 1.0
    if once is not None:
        holder, block = once
        held_weight = (
            parts[holder][1].shape[0] / n_total if once_weight is None else float(once_weight)
        )
        parts = parts + [(block, np.ones((1, 1)))]
        weights.append(held_weight)
    a0 = domain.n_cols - int(np.sum(domain.w_cols >= 0))
    # --- column maps: w columns go to w, each example's auxiliaries to their own range
    dom_cols = np.where(domain.w_cols >= 0, domain.w_cols, d + np.cumsum(domain.w_cols < 0) - 1)
    col = d + a0
    ex_cols = []
    for template, theta in parts:
        n, k = theta.shape[0], template.n_aux
        ex_cols.append(
            np.where(
                template.w_cols >= 0,
                template.w_cols,
                col + np.add.outer(np.arange(n) * k, np.cumsum(template.w_cols < 0) - 1),
            )
        )
        col += n * k
    n_var = col

    # --- row maps: group rows by cone kind across the domain block and all examples
    seg_d = segments(domain.cones)
    segs = [segments(template.cones) for template, _ in parts]
    row_global = [
        np.empty((theta.shape[0], template.cones.rows), dtype=np.int64) for template, theta in parts
    ]
    dom_row_global = np.empty(domain.cones.rows, dtype=np.int64)
    offset = 0
    for kind_index, (_, ds, dsize) in enumerate(seg_d):
        dom_row_global[ds : ds + dsize] = offset + np.arange(dsize)
        offset += dsize
        for part, (_, theta) in enumerate(parts):
            _, ts, tsize = segs[part][kind_index]
            n = theta.shape[0]
            row_global[part][:, ts : ts + tsize] = offset + np.add.outer(
                np.arange(n) * tsize, np.arange(tsize)
            )
            offset += n * tsize
    n_rows = offset

    dom_coo = domain.A.tocoo()
    rows = [dom_row_global[dom_coo.row]]
    cols = [dom_cols[dom_coo.col]]
    vals = [dom_coo.data]
    b = np.empty(n_rows)
    b[dom_row_global] = domain.b
    q = np.zeros(n_var)
    q0 = 0.0
    objective = []  # per part: (objective columns, c values, c0 values)
    for part, (template, theta) in enumerate(parts):
        c_part = theta @ template.c_map  # (n, cols)
        c0_part = theta @ template.c0_map  # (n,)
        rows.append(row_global[part][:, template.A_rows].ravel())
        cols.append(ex_cols[part][:, template.A_cols].ravel())
        vals.append((theta @ template.A_map).ravel())  # (n, nnz)
        b[row_global[part].ravel()] = (theta @ template.b_map).ravel()
        np.add.at(q, ex_cols[part].ravel(), (c_part * weights[part]).ravel())
        q0 += float(np.sum(c0_part) * weights[part])
        objective.append((ex_cols[part], c_part, c0_part))
    A = sp.csc_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n_rows, n_var)
    )
    w0 = np.asarray(w0, float)
    q[:d] -= lam * w0
    q0 += float(lam / 2 * w0 @ w0)
    P = sp.csc_matrix((np.full(d, float(lam)), (np.arange(d), np.arange(d))), shape=(n_var, n_var))

    def total(attr):
        return sum(getattr(t.cones, attr) * th.shape[0] for t, th in parts)

    soc: tuple[int, ...] = tuple(domain.cones.soc)
    for template, theta in parts:
        soc += tuple(template.cones.soc) * theta.shape[0]
    cones = ConeLayout(
        zero=domain.cones.zero + total("zero"),
        nonneg=domain.cones.nonneg + total("nonneg"),
        soc=soc,
        exp=domain.cones.exp + total("exp"),
    )
    C_obj = c0_obj = None
    if per_example_objective:  # only tilted ERM needs each example's objective row
        offsets = np.cumsum([0] + [c.shape[0] for _, c, _ in objective[:-1]])
        rows_obj = np.concatenate(
            [
                off + np.repeat(np.arange(c.shape[0]), c.shape[1])
                for off, (_, c, _) in zip(offsets, objective)
            ]
        )
        C_obj = sp.csr_matrix(
            (
                np.concatenate([c.ravel() for _, c, _ in objective]),
                (rows_obj, np.concatenate([ec.ravel() for ec, _, _ in objective])),
            ),
            shape=(n_total, n_var),
        )
        c0_obj = np.concatenate([c0 for _, _, c0 in objective])
    held: frozenset[int] = frozenset()
    if once is not None:
        parts = parts[:-1]
        held = frozenset(
            t for t, rows_t in enumerate(once[1].split_rows) if any(r is not None for r in rows_t)
        )
    views = []
    for part, (template, theta) in enumerate(parts):
        mine = held if part == holder else frozenset()
        split_rows = tuple(
            tuple(
                None if r is None else row_global[-1 if t in mine else part][:, r] for r in rows_t
            )
            for t, rows_t in enumerate(
                [
                    once[1].split_rows[t] if once is not None and t in mine else rows_t
                    for t, rows_t in enumerate(template.split_rows)
                ]
            )
        )
        y_cols = None if template.y_cols is None else ex_cols[part][:, template.y_cols]
        soc_rows = None if template.soc_rows is None else row_global[part][:, template.soc_rows]
        views.append(
            StampedProgram(
                P=P,
                q=q,
                q0=q0,
                A=A,
                b=b,
                cones=cones,
                d=d,
                n=theta.shape[0],
                split_rows=split_rows,
                y_cols=y_cols,
                soc_rows=soc_rows,
                C_obj=C_obj,
                c0_obj=c0_obj,
                held=mine,
                held_weight=held_weight if mine else 1.0,
            )
        )
    if len(parts) == 1:
        return views[0], tuple(views)
    whole = StampedProgram(
        P=P,
        q=q,
        q0=q0,
        A=A,
        b=b,
        cones=cones,
        d=d,
        n=n_total,
        split_rows=(),
        y_cols=None,
        soc_rows=None,
        C_obj=C_obj,
        c0_obj=c0_obj,
    )
    return whole, tuple(views)
