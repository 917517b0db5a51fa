"""The extension's screened re-solves (:func:`~dpcvx.certification.arrowhead.screened_ipm`):
the whole program's point from its elements near a kink, or nothing."""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
import dpcvx.certification.arrowhead as arrowhead
import dpcvx.certification.solve as solve_module
from dpcvx.certification.arrowhead import (
    PiecewiseModel,
    arrowhead_ipm,
    extension_pieces,
    piecewise_model,
    screened_ipm,
)
from dpcvx.certification.solve import ARROWHEAD

LAM, TOL = 0.01, 1e-12


def _problem(loss, n=3000, d=8, seed=0, radius=1.0):
    """The extension benchmark's data (``benchmarks/bench_extension.py``): Student-t(5) rows
    with ``E||x||^2 = 1``, labels from a random linear model (signs for the hinge and
    logistic losses), in the ball of ``radius``."""
    rng = np.random.default_rng(seed)
    X = rng.standard_t(5, size=(n, d)) * math.sqrt(3.0 / (5.0 * d))
    beta = rng.normal(size=d)
    if loss in ("hinge", "logistic"):
        labels = np.sign(X @ beta + 0.1 * rng.normal(size=n))
    else:
        labels = 0.3 * (X @ beta) + 0.3 * rng.normal(size=n)
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    r = x @ w - y
    f = {
        "hinge": lambda: cp.pos(1 - y * (x @ w)),
        "absolute": lambda: cp.abs(r),
        "pinball": lambda: cp.maximum(0.3 * -r, -0.7 * -r),
        "logistic": lambda: cp.logistic(-y * (x @ w)),
        "huber": lambda: cp.huber(r, 1.0),
        "square": lambda: cp.square(r),
    }[loss]()
    return dpcvx.Problem(f, w, {x: X, y: labels}, [cp.norm(w) <= radius])


def _relaxed(loss, **kwargs):
    """The relaxed extension's model (C = 1) of a problem in a ball, with the ball's bounds."""
    problem = _problem(loss, **kwargs)
    decl = problem.declaration
    pieces = extension_pieces(piecewise_model(decl), 1.0)
    assert pieces is not None
    return pieces.model, solve_module._bounds(decl.domain, None), decl.d


def _objective(model: PiecewiseModel, w: np.ndarray, quad) -> float:
    """The program's objective at ``w``, from the model's pieces directly."""
    (term,) = model.terms
    V = term.row_coefs * (term.base @ w)[:, None] + np.stack(term.b, axis=1)
    Q, q = quad
    return float(
        term.c * V.max(axis=1).sum() + model.linear @ w + LAM / 2 * w @ w + w @ Q @ w / 2 + q @ w
    )


def _quad(d, seed=1):
    """A positive semidefinite quadratic term like a round's model of its moved examples."""
    A = np.random.default_rng(seed).normal(size=(d, d)) / d
    return A @ A.T * 0.05, np.random.default_rng(seed + 1).normal(size=d) * 0.01


@pytest.mark.parametrize("loss", ["hinge", "absolute", "pinball"])
def test_a_screened_solve_is_the_whole_programs_point(loss):
    """From a point near the answer (as a round starts from the last round's point), the
    screened solve keeps a small share of the elements and returns the whole program's
    point and objective, with every row's multipliers summing to its weight and the rows it
    did not keep at the vertex of their active piece."""
    model, bounds, d = _relaxed(loss)
    w0 = np.zeros(d)
    quad = _quad(d)
    whole, _, _ = arrowhead_ipm(model, LAM, w0, w0, tol=TOL, bounds=bounds, quad=quad)
    start = whole + 1e-3 * np.random.default_rng(2).normal(size=d) / math.sqrt(d)
    kept = []
    real = arrowhead_ipm

    def counting(sub, *args, **kwargs):
        kept.append(sub.terms[0].b[0].size)
        return real(sub, *args, **kwargs)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(arrowhead, "arrowhead_ipm", counting)
        out = screened_ipm(
            model, LAM, w0, start, tol=TOL, reach=2e-3, bounds=bounds, quad=quad, domain_out=[]
        )
    assert out is not None
    x, mus, steps = out
    assert steps > 0 and kept and max(kept) < 0.25 * model.n
    assert np.linalg.norm(x - whole) <= 1e-6
    assert abs(_objective(model, x, quad) - _objective(model, whole, quad)) <= 1e-10
    (term,) = model.terms
    (mu,) = mus
    assert mu.shape == (model.n, len(term.b))
    assert np.allclose(mu.sum(axis=1), term.c, rtol=1e-9, atol=0)
    vertices = np.count_nonzero(mu == term.c, axis=1) == 1
    assert vertices.sum() >= model.n - max(kept)


def test_a_screened_solve_never_returns_another_programs_point(monkeypatch):
    """From far away (the origin) with a tiny radius, the elements kept are too few: the
    program with the others on their pieces at the start has another answer (the control,
    solved here directly, is worse on the whole program by orders of magnitude above the
    tolerance). With a single try the screened solve then gives up; with its default tries
    it grows the radius and returns the whole program's point, or gives up."""
    model, bounds, d = _relaxed("hinge", seed=3)
    w0 = np.zeros(d)
    quad = (np.zeros((d, d)), np.zeros(d))
    whole, _, _ = arrowhead_ipm(model, LAM, w0, w0, tol=TOL, bounds=bounds)
    best = _objective(model, whole, quad)
    # the control: every element but the nearest to its kink on its piece at the origin
    (term,) = model.terms
    V = term.row_coefs * (term.base @ w0)[:, None] + np.stack(term.b, axis=1)
    top = np.argmax(V, axis=1)
    slope = term.row_coefs[np.arange(model.n), top]
    keep = np.zeros(model.n, bool)
    keep[0] = True
    linear = term.c * (term.base.T @ np.where(keep, 0.0, slope))
    sub = PiecewiseModel(
        model.n, d, (arrowhead._rows_of(term, np.flatnonzero(keep)),), model.linear, model.kinds
    )
    wrong, _, _ = arrowhead_ipm(sub, LAM, w0, w0, tol=TOL, bounds=bounds, quad=(quad[0], linear))
    assert _objective(model, wrong, quad) - best > 1e-7
    monkeypatch.setattr(arrowhead, "SCREEN_TRIES", 1)
    assert screened_ipm(model, LAM, w0, w0, tol=TOL, reach=1e-9, bounds=bounds) is None
    monkeypatch.setattr(arrowhead, "SCREEN_TRIES", 3)
    out = screened_ipm(model, LAM, w0, w0, tol=TOL, reach=1e-9, bounds=bounds)
    if out is not None:
        assert abs(_objective(model, out[0], quad) - best) <= 1e-10


def test_a_screened_solve_gives_up_where_it_would_keep_most_elements():
    model, bounds, d = _relaxed("absolute")
    w0 = np.zeros(d)
    assert screened_ipm(model, LAM, w0, w0, tol=TOL, reach=1e6, bounds=bounds) is None
    for reach in (0.0, -1.0, np.nan, np.inf):
        assert screened_ipm(model, LAM, w0, w0, tol=TOL, reach=reach, bounds=bounds) is None


def test_a_model_other_than_the_relaxed_extensions_is_not_screened():
    """The declaration's own hinge model (one matrix, the same multiples for every row) has
    no per-row multiples: it is not the rounds' program."""
    problem = _problem("hinge")
    decl = problem.declaration
    model = piecewise_model(decl)
    w0 = np.zeros(decl.d)
    bounds = solve_module._bounds(decl.domain, None)
    assert screened_ipm(model, LAM, w0, w0, tol=TOL, reach=1e-2, bounds=bounds) is None


@pytest.mark.parametrize("loss", ["hinge", "absolute"])
def test_the_rounds_screen_and_certify_what_the_whole_solves_certify(monkeypatch, loss):
    """The rounds of an extension in the unit ball (n = 20000, d = 10, copies leaving it)
    re-solve screened (where it gives up, whole) and certify their point to the default
    target, within both certified distances of the point the rounds give with whole
    re-solves (each certificate bounds the distance to the one answer), the brackets
    overlapping."""
    calls = []
    real = solve_module.screened_ipm

    def recording(model, *args, **kwargs):
        out = real(model, *args, **kwargs)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(solve_module, "screened_ipm", recording)
    sol = _problem(loss, n=20000, d=10, seed=5).lipschitz_extension(1.0).solve(regularization=LAM)
    assert sol.solver_stats["solver"] == ARROWHEAD and sol.solver_stats.get("ball_rounds")
    assert any(calls)
    monkeypatch.setattr(solve_module, "screened_ipm", lambda *args, **kwargs: None)
    whole = _problem(loss, n=20000, d=10, seed=5).lipschitz_extension(1.0).solve(regularization=LAM)
    assert whole.solver_stats["solver"] == ARROWHEAD
    gap = 1e-9 * (1 + abs(sol.upper))
    assert sol.gap <= gap and whole.gap <= 1e-9 * (1 + abs(whole.upper))
    assert np.linalg.norm(sol.w - whole.w) <= sol.distance_bound + whole.distance_bound
    assert sol.lower <= whole.upper and whole.lower <= sol.upper


def test_a_failing_screened_solve_hands_the_round_to_the_whole_program(monkeypatch):
    """The reduced program's method failing (a factor that is not positive definite, a
    non-finite step) only sends the round to the whole program, which certifies as before;
    before, the error reached the rounds, which then stopped at their best certificate."""
    model, bounds, d = _relaxed("pinball")
    w0 = np.zeros(d)
    real = arrowhead.arrowhead_ipm

    def failing(sub, *args, **kwargs):
        if sub is not model:
            raise np.linalg.LinAlgError("not positive definite")
        return real(sub, *args, **kwargs)

    monkeypatch.setattr(arrowhead, "arrowhead_ipm", failing)
    assert screened_ipm(model, LAM, w0, w0, tol=TOL, reach=1e-2, bounds=bounds) is None
    sol = (
        _problem("hinge", n=20000, d=10, seed=5).lipschitz_extension(1.0).solve(regularization=LAM)
    )
    assert sol.solver_stats["solver"] == ARROWHEAD and sol.solver_stats.get("ball_rounds")
    assert sol.gap <= 1e-9 * (1 + abs(sol.upper))
