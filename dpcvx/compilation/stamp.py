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

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from dpcvx.compilation.template import ConeLayout, DomainBlock, Template

__all__ = ["StampedProgram", "stamp"]


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


def _segments(layout: ConeLayout) -> list[tuple[str, int, int]]:
    """(kind, start, size) of each cone group of a block, in block row order."""
    out = []
    start = 0
    for kind, size in (("zero", layout.zero), ("nonneg", layout.nonneg),
                       ("soc", sum(layout.soc)), ("exp", 3 * layout.exp)):
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
) -> StampedProgram:
    """Build the stamped program for data ``theta`` (``(n, p + 1)``, first column ones)."""
    n = theta.shape[0]
    k = template.n_aux
    a0 = domain.n_cols - int(np.sum(domain.w_cols >= 0))
    n_var = d + a0 + n * k

    # --- column maps: w columns go to w, each block's auxiliaries to their own range
    dom_cols = np.where(domain.w_cols >= 0, domain.w_cols,
                        d + np.cumsum(domain.w_cols < 0) - 1)
    ex_cols = np.where(template.w_cols >= 0, template.w_cols,
                       d + a0 + np.add.outer(np.arange(n) * k,
                                             np.cumsum(template.w_cols < 0) - 1))  # (n, cols)

    # --- row maps: group rows by cone kind across the domain block and all examples
    seg_t = _segments(template.cones)
    seg_d = _segments(domain.cones)
    tmpl_row_global = np.empty((n, template.cones.rows), dtype=np.int64)
    dom_row_global = np.empty(domain.cones.rows, dtype=np.int64)
    offset = 0
    for (_, ts, tsize), (_, ds, dsize) in zip(seg_t, seg_d):
        dom_row_global[ds: ds + dsize] = offset + np.arange(dsize)
        offset += dsize
        tmpl_row_global[:, ts: ts + tsize] = offset + np.add.outer(np.arange(n) * tsize,
                                                                    np.arange(tsize))
        offset += n * tsize
    n_rows = offset

    # --- values
    A_vals = theta @ template.A_map  # (n, nnz)
    b_vals = theta @ template.b_map  # (n, rows)
    c_vals = theta @ template.c_map  # (n, cols)
    c0_vals = theta @ template.c0_map  # (n,)

    dom_coo = domain.A.tocoo()
    rows = np.concatenate([dom_row_global[dom_coo.row],
                           tmpl_row_global[:, template.A_rows].ravel()])
    cols = np.concatenate([dom_cols[dom_coo.col],
                           ex_cols[:, template.A_cols].ravel()])
    vals = np.concatenate([dom_coo.data, A_vals.ravel()])
    A = sp.csc_matrix((vals, (rows, cols)), shape=(n_rows, n_var))
    b = np.empty(n_rows)
    b[dom_row_global] = domain.b
    b[tmpl_row_global.ravel()] = b_vals.ravel()

    q = np.zeros(n_var)
    np.add.at(q, ex_cols.ravel(), (c_vals / n).ravel())
    w0 = np.asarray(w0, float)
    q[:d] -= lam * w0
    q0 = float(np.sum(c0_vals) / n + lam / 2 * w0 @ w0)
    P = sp.csc_matrix((np.full(d, float(lam)), (np.arange(d), np.arange(d))),
                      shape=(n_var, n_var))

    cones = ConeLayout(
        zero=domain.cones.zero + n * template.cones.zero,
        nonneg=domain.cones.nonneg + n * template.cones.nonneg,
        soc=tuple(domain.cones.soc) + tuple(template.cones.soc) * n,
        exp=domain.cones.exp + n * template.cones.exp,
    )
    split_rows = tuple(
        tuple(None if r is None else tmpl_row_global[:, r] for r in rows_t)
        for rows_t in template.split_rows
    )
    y_cols = None if template.y_cols is None else ex_cols[:, template.y_cols]
    soc_rows = None if template.soc_rows is None else tmpl_row_global[:, template.soc_rows]
    return StampedProgram(P=P, q=q, q0=q0, A=A, b=b, cones=cones, d=d, n=n,
                          split_rows=split_rows, y_cols=y_cols, soc_rows=soc_rows)
