"""The extension's copies as blocks of the arrowhead method (paper 000, Lemma 2.7's joint
program with copies for some examples): the second-order cone's scaling against its defining
identities, the blocks' elimination against the dense block system, and the method's point
against an independent high-accuracy CVXPY solve of the same program."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.certification import copy_blocks
from dpcvx.certification.arrowhead import arrowhead_ipm, extension_pieces, piecewise_model
from dpcvx.certification.ball import BallRegion
from dpcvx.certification.box import BoxRegion
from dpcvx.certification.copy_blocks import CopyBlocks
from dpcvx.certification.solve import _bounds

LAM, C, TAU = 0.05, 1.0, 0.3


def _inside(rng, k, d):
    x = rng.normal(size=(k, d + 1))
    x[:, 0] = np.linalg.norm(x[:, 1:], axis=1) + rng.random(k) + 1e-3
    return x


def test_the_cone_scaling_meets_its_identities():
    """Nesterov-Todd: ``W Z = W^-1 z``; ``W W^-1 = I``; the Jordan product solved; the step
    to the cone's boundary lands on it (and a step that never leaves is infinite)."""
    rng = np.random.default_rng(0)
    z, Z = _inside(rng, 50, 6), _inside(rng, 50, 6)
    wb, beta = copy_blocks._nt_scaling(z, Z)
    np.testing.assert_allclose(
        copy_blocks._scaled(wb, beta, Z, False), copy_blocks._scaled(wb, beta, z, True), atol=1e-12
    )
    V = rng.normal(size=z.shape)
    back = copy_blocks._scaled(wb, beta, copy_blocks._scaled(wb, beta, V, True), False)
    np.testing.assert_allclose(back, V, atol=1e-12)
    lam = copy_blocks._scaled(wb, beta, Z, False)
    r = rng.normal(size=z.shape)
    np.testing.assert_allclose(
        copy_blocks._jordan(lam, copy_blocks._jordan_solve(lam, r)), r, atol=1e-10
    )
    dx = 3 * rng.normal(size=z.shape)
    a = copy_blocks._cone_step(z, dx)
    y = z + a * dx
    margin = y[:, 0] - np.linalg.norm(y[:, 1:], axis=1)
    assert margin.min() == pytest.approx(0.0, abs=1e-12) and np.all(margin > -1e-12)
    assert copy_blocks._cone_step(z, z) == np.inf  # along itself: never leaves


def test_the_stacked_triangular_inverses_are_the_inverses():
    """:func:`copy_blocks._lower_inverse` against numpy's inverse of each factor, on factors
    of well and badly conditioned blocks (diagonals spread over ten orders, as a cone near
    its apex leaves them); a mutant that drops the off-diagonal rows fails."""
    rng = np.random.default_rng(3)
    k, d = 40, 7
    G = rng.normal(size=(k, d, d))
    N = G @ G.transpose(0, 2, 1) + np.eye(d)
    N[k // 2 :] += np.einsum(
        "k,ki,kj->kij",
        10.0 ** rng.uniform(0, 10, k - k // 2),
        *(2 * [rng.normal(size=(k - k // 2, d))]),
    )
    L = np.linalg.cholesky(N)
    X = copy_blocks._lower_inverse(L)
    assert np.all(np.triu(X, 1) == 0)
    for Li, Xi in zip(L, X):
        np.testing.assert_allclose(Xi, np.linalg.inv(Li), rtol=1e-9, atol=1e-12 * np.abs(Xi).max())
        np.testing.assert_allclose(Xi @ Li, np.eye(d), atol=1e-9)


def _problem(loss, kind, n=300, d=5, seed=1, size=0.1):
    rng = np.random.default_rng(seed)
    X = 2 * rng.standard_t(5.0, size=(n, d)) * np.sqrt(3.0 / (5.0 * d))
    beta = rng.normal(size=d)
    labels = (
        np.sign(X @ beta + 0.1 * rng.normal(size=n))
        if loss == "hinge"
        else 0.3 * X @ beta + 0.3 * rng.normal(size=n)
    )
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    f = {
        "hinge": lambda: cp.pos(1 - y * (x @ w)),
        "absolute": lambda: cp.abs(x @ w - y),
        "pinball": lambda: cp.maximum(TAU * (y - x @ w), (TAU - 1) * (y - x @ w)),
    }[loss]()
    dom = [cp.abs(w) <= size] if kind == "box" else [cp.norm(w) <= size]
    problem = dpcvx.Problem(f, w, {x: X, y: labels}, dom)
    region = (
        BoxRegion(-size * np.ones(d), size * np.ones(d))
        if kind == "box"
        else BallRegion(np.zeros(d), size)
    )
    return problem, X, labels, region


def _reference(loss, kind, X, labels, lifted, size=0.1):
    """The lifted program by CVXPY and Clarabel at tight tolerances: copies for ``lifted``,
    every other example with its own loss."""
    n, d = X.shape
    v = cp.Variable(d)
    mask = np.zeros(n, bool)
    mask[lifted] = True

    def f(z, lab):
        return {
            "hinge": lambda: cp.pos(1 - cp.multiply(lab, z)),
            "absolute": lambda: cp.abs(z - lab),
            "pinball": lambda: cp.maximum(TAU * (lab - z), (TAU - 1) * (lab - z)),
        }[loss]()

    obj = cp.sum(f(X[~mask] @ v, labels[~mask]))
    cons = [cp.abs(v) <= size] if kind == "box" else [cp.norm(v) <= size]
    if mask.any():
        Yc = cp.Variable((int(mask.sum()), d))
        obj += cp.sum(f(cp.sum(cp.multiply(X[mask], Yc), axis=1), labels[mask]))
        obj += C * cp.sum(cp.norm(Yc - v[None, :], 2, axis=1))
        cons += [cp.abs(Yc) <= size] if kind == "box" else [cp.norm(Yc, 2, axis=1) <= size]
    ref = cp.Problem(cp.Minimize(obj / n + LAM / 2 * cp.sum_squares(v)), cons)
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return v.value


def _solve(problem, region, lifted):
    decl = problem.declaration
    ext = extension_pieces(piecewise_model(decl), C)
    bounds = _bounds(decl.domain, None)
    start = bounds.interior(np.zeros(decl.d))
    blocks = CopyBlocks(ext, lifted, region, start)
    w, _, steps = arrowhead_ipm(
        ext.own_without(lifted),
        LAM,
        np.zeros(decl.d),
        start,
        tol=1e-13,
        bounds=bounds,
        blocks=blocks,
    )
    return w, steps, blocks


@pytest.mark.parametrize("kind", ["box", "ball"])
@pytest.mark.parametrize("loss", ["hinge", "absolute", "pinball"])
@pytest.mark.parametrize("share", [0.3, 1.0])
def test_the_method_with_copies_finds_the_lifted_programs_optimum(loss, kind, share):
    """Copies for a random share of the examples (all of them: the whole joint program), in a
    box or a ball small enough that copies move and press on it: the method's point is the
    reference solve's to 1e-7 (strong convexity: the objective is within a few 1e-15 of the
    optimum there)."""
    problem, X, labels, region = _problem(loss, kind)
    rng = np.random.default_rng(2)
    lifted = np.flatnonzero(rng.random(X.shape[0]) < share)
    w, steps, blocks = _solve(problem, region, lifted)
    ref = _reference(loss, kind, X, labels, lifted)
    assert np.linalg.norm(w - ref) <= 1e-7
    assert steps < 60
    # the copies moved: the cones are active somewhere (else this tests no copy at all)
    assert np.max(np.linalg.norm(blocks.Y - w[None, :], axis=1)) > 1e-3


def test_without_the_copies_the_point_is_another():
    """Negative control: the same examples with their own loss and no copy (the method
    without blocks) land elsewhere than the lifted program's optimum."""
    problem, X, labels, region = _problem("hinge", "box")
    lifted = np.arange(0, X.shape[0], 2)
    ref = _reference("hinge", "box", X, labels, lifted)
    decl = problem.declaration
    ext = extension_pieces(piecewise_model(decl), C)
    bounds = _bounds(decl.domain, None)
    start = bounds.interior(np.zeros(decl.d))
    plain, _, _ = arrowhead_ipm(ext.source, LAM, np.zeros(decl.d), start, tol=1e-13, bounds=bounds)
    assert np.linalg.norm(plain - ref) > 1e-3


@pytest.mark.parametrize("kind", ["box", "ball"])
def test_the_blocks_elimination_is_the_dense_one(monkeypatch, kind):
    """Mid-solve (a few steps in, the cones and bounds not yet degenerate), over chunks of 4
    blocks, the blocks' term of the Schur complement is that of the dense block system
    ``[[M_ww, M_wv], [M_vw, M_vv]]`` built from the constraints' gradients, and their
    direction for a ``dw`` solves its block rows ``M_vw dw + M_vv dv = -r``."""
    monkeypatch.setattr(copy_blocks, "CHUNK", 4)
    problem, X, labels, region = _problem("absolute", kind, n=40, d=3)
    decl = problem.declaration
    ext = extension_pieces(piecewise_model(decl), C)
    bounds = _bounds(decl.domain, None)
    start = bounds.interior(np.zeros(decl.d))
    lifted = np.arange(0, 40, 3)
    blocks = CopyBlocks(ext, lifted, region, start)
    w, _, _ = arrowhead_ipm(
        ext.own_without(lifted),
        LAM,
        np.zeros(3),
        start,
        tol=1e-13,
        bounds=bounds,
        blocks=blocks,
        max_iter=4,
    )
    d, m = 3, blocks.m
    blocks.residuals(blocks.w)
    S = blocks.schur(blocks.w)
    # the dense system per block, in (w, y, t, s)
    D = blocks.N / blocks.S
    wb, beta = blocks.nt
    Hc = (2 * np.einsum("ki,kj->kij", wb * [1, -1, -1, -1], wb * [1, -1, -1, -1])) / beta[
        :, None, None
    ] ** 2
    Hc[:, 0, 0] -= 1 / beta**2
    Hc[:, np.arange(1, d + 1), np.arange(1, d + 1)] += 1 / beta[:, None] ** 2
    dense = np.zeros((d, d))
    blocks.rhs(blocks.affine())
    dw = np.array([0.3, -0.2, 0.1])
    dv = blocks.back(dw, blocks.affine())[0]
    for i in range(blocks.k):
        G = []  # rows: sqrt(D) grad g for the pieces and W's constraints
        for j in range(m):
            G.append(np.sqrt(D[i, j]) * np.r_[np.zeros(d), blocks.sigma[i, j] * blocks.u[i], -1, 0])
        if kind == "box":
            for lcol in range(d):
                e = np.zeros(d)
                e[lcol] = 1
                G.append(np.sqrt(D[i, m + lcol] + D[i, m + d + lcol]) * np.r_[np.zeros(d), e, 0, 0])
        else:  # the ball's gradient, and its curvature N / R on y
            r = (blocks.Y[i] - blocks.center) / blocks.radius
            G.append(np.sqrt(D[i, m]) * np.r_[np.zeros(d), r, 0, 0])
            for lcol in range(d):
                e = np.zeros(d)
                e[lcol] = np.sqrt(blocks.N[i, m] / blocks.radius)
                G.append(np.r_[np.zeros(d), e, 0, 0])
        G = np.array(G)
        T = np.zeros((d + 1, 2 * d + 2))  # (w, y, t, s) -> (s, w - y)
        T[0, -1] = 1
        T[1:, :d] = np.eye(d)
        T[1:, d : 2 * d] = -np.eye(d)
        M = G.T @ G + T.T @ Hc[i] @ T
        dense += M[:d, :d] - M[:d, d:] @ np.linalg.solve(M[d:, d:], M[d:, :d])
        rows = M[d:, :d] @ dw + M[d:, d:] @ dv[i] + blocks._reduced[i]
        assert np.abs(rows).max() <= 1e-8 * (np.abs(M[d:, d:] @ dv[i]).max() + 1.0)
    np.testing.assert_allclose(S, dense, rtol=1e-8, atol=1e-10 * np.abs(dense).max())


def test_the_method_with_copies_ends_where_its_cones_leave_no_direction():
    """Absolute loss in ``cp.abs(w) <= 0.1`` (n = 2e4, d = 20, 73 copies) at a tolerance of
    1.9e-13: near the end some copy's cone and its multiplier sit on the cone's boundary to
    rounding, where the Jordan product has no inverse and the direction is not finite (the
    Schur system's solve raised ``ValueError`` out of the method). The method ends there
    with its best point, which is the reference's."""
    n, d, box = 20_000, 20, 0.1
    rng = np.random.default_rng(0)
    X = rng.standard_t(5.0, size=(n, d)) * np.sqrt(3.0 / (5.0 * d))
    labels = 0.3 * (X @ rng.normal(size=d)) + 0.3 * rng.normal(size=n)
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    problem = dpcvx.Problem(cp.abs(x @ w - y), w, {x: X, y: labels}, [cp.abs(w) <= box])
    decl = problem.declaration
    ext = extension_pieces(piecewise_model(decl), C)
    bounds = _bounds(decl.domain, None)
    start = bounds.interior(np.zeros(d))
    lifted = np.flatnonzero((np.linalg.norm(X, axis=1) > C) & (rng.random(n) < 0.01))
    assert lifted.size == 73
    region = BoxRegion(-box * np.ones(d), box * np.ones(d))
    blocks = CopyBlocks(ext, lifted, region, start)
    point, _, steps = arrowhead_ipm(
        ext.own_without(lifted),
        LAM,
        np.zeros(d),
        start,
        tol=1.9e-13,
        bounds=bounds,
        blocks=blocks,
        max_iter=200,
    )
    assert np.all(np.isfinite(point)) and steps < 200
    ref = _reference("absolute", "box", X, labels, lifted, size=box)
    assert np.linalg.norm(point - ref) <= 1e-7
