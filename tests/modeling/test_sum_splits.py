"""Sums of several atoms and reductions kept as one-entry arrays (``keepdims=True``), read
term by term. A review found that dpcvx's evaluator gave a reduction with ``keepdims=True``
the shape ``(n,)`` instead of ``(n, 1)``: added to an ``(n, 1)`` operand it broadcast to
``(n, n)`` and summed over the examples, so a loss's values were wrong (31.97 where CVXPY
gives 1.155), and a certificate's upper bound came out below its lower bound. The terms of a
sum ``cp.sum(A + B)`` are now ``sum(A)`` and ``sum(B)``, each counted as often as
broadcasting repeats it. Every case: the declared terms add up to the user's loss, both
match CVXPY's own value per example, and the solve brackets a CVXPY reference."""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pytest
from catalogue import term_values

import dpcvx

N, D, LAM = 40, 4, 0.05

LOSSES = {
    "abs plus a kept maximum": lambda w, x, y: cp.sum(
        cp.abs(w[:1] - x[:1]) + cp.max(w - x, keepdims=True)
    ),
    "a kept log-sum-exp plus abs": lambda w, x, y: cp.sum(
        cp.log_sum_exp(w - x, keepdims=True) + cp.abs(w[:1])
    ),
    "a kept 1-norm plus a square": lambda w, x, y: cp.sum(
        cp.square(w[:1] - x[:1]) + cp.norm1(w - x, keepdims=True)
    ),
    "a number added to a vector": lambda w, x, y: cp.sum(cp.abs(w - x) + cp.norm(w - 0.2)),
    "a sum of a square and a hinge": lambda w, x, y: cp.sum(
        cp.square(x @ w - y) + cp.pos(1 - y * (x @ w))
    ),
}


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(N, D)), rng.normal(size=N)


def _cvxpy_values(loss, w, x, y, X, Y, point):
    out = []
    w.value = point
    for i in range(N):
        x.value, y.value = X[i], Y[i]
        out.append(float(loss.value))
    return np.array(out)


@pytest.mark.parametrize("name", list(LOSSES))
def test_terms_add_up_and_the_solve_brackets_the_reference(name):
    X, Y = _data()
    w, x, y = cp.Variable(D), cp.Parameter(D), cp.Parameter()
    loss = LOSSES[name](w, x, y)
    used = {p.id for p in loss.parameters()}
    data = {p: v for p, v in ((x, X), (y, Y)) if p.id in used}
    problem = dpcvx.Problem(loss, w, data, [cp.norm(w) <= 2])
    decl = problem.declaration
    assert all(t.kind != "generic" for t in decl.terms), [t.kind for t in decl.terms]
    rng = np.random.default_rng(1)
    for _ in range(3):
        point = rng.normal(size=D)
        truth = _cvxpy_values(loss, w, x, y, X, Y, point)
        np.testing.assert_allclose(decl.loss_values(point), truth, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(term_values(decl, point), truth, rtol=1e-12, atol=1e-12)
    sol = problem.solve(regularization=LAM, accuracy=1e-8)
    assert sol.gap <= 1e-8
    W = cp.Variable(D)
    total = sum(LOSSES[name](W, X[i], Y[i]) for i in range(N)) / N
    ref = cp.Problem(cp.Minimize(total + LAM / 2 * cp.sum_squares(W)), [cp.norm(W) <= 2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    assert sol.lower <= ref.value + 1e-8 and ref.value <= sol.upper + 1e-8


KEPT = {
    "a kept 2-norm": (
        lambda w, x: cp.sum(cp.norm(w - x, keepdims=True)),
        lambda w, x: cp.norm(w - x),
        ["norm2"],
    ),
    "a kept largest absolute value": (
        lambda w, x: cp.sum(cp.max(cp.abs(w - x), keepdims=True)),
        lambda w, x: cp.norm_inf(w - x),
        ["norminf"],
    ),
    "abs plus a kept 2-norm": (
        lambda w, x: cp.sum(cp.abs(w - x) + cp.norm(w - x, keepdims=True)),
        lambda w, x: cp.sum(cp.abs(w - x)) + D * cp.norm(w - x),
        ["abs", "norm2"],
    ),
}


@pytest.mark.parametrize("name", list(KEPT))
def test_a_sum_of_a_kept_reduction_is_the_reduction(name):
    """``cp.sum(cp.norm(E, keepdims=True))`` stopped every solve in CVXPY's own compiler (an
    assertion that a 2-norm is a number), and ``cp.sum(cp.max(cp.abs(E), keepdims=True))``
    was a generic term that did not certify 1e-8 (gap 0.014): each is now its reduction, and
    certifies the reference (written without ``keepdims``, which CVXPY cannot compile)."""
    user, plain, kinds = KEPT[name]
    X, _ = _data()
    w, x = cp.Variable(D), cp.Parameter(D)
    problem = dpcvx.Problem(user(w, x), w, {x: X}, [cp.norm(w) <= 2])
    decl = problem.declaration
    assert sorted(t.kind for t in decl.terms) == kinds
    point = np.random.default_rng(3).normal(size=D)
    np.testing.assert_allclose(
        term_values(decl, point), decl.loss_values(point), rtol=1e-12, atol=1e-12
    )
    sol = problem.solve(regularization=LAM, accuracy=1e-8)
    W = cp.Variable(D)
    total = sum(plain(W, X[i]) for i in range(N)) / N
    ref = cp.Problem(cp.Minimize(total + LAM / 2 * cp.sum_squares(W)), [cp.norm(W) <= 2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    assert sol.gap <= 1e-8
    assert sol.lower <= ref.value + 1e-8 and ref.value <= sol.upper + 1e-8
