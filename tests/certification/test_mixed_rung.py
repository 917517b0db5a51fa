"""Losses with both smooth and piecewise-linear terms (``cp.abs(r) + cp.square(r)``, a hinge
plus a squared margin, the logistic loss plus an absolute value) on proximal Newton's method
with the arrowhead interior-point method for each step (``dpcvx.certification.mixed``), chosen
from the loss's form. Before, they took the conic program (2 to 10 s at n = 1e4, d = 20,
where either part alone took 0.005 to 0.03 s). Checked against CVXPY + Clarabel at tight
tolerances on the same objective."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from catalogue import rung_data, rung_domain

import dpcvx
import dpcvx.certification.solve as solve_module
from dpcvx.certification.mixed import mixed_model

LAM = 0.05

LOSSES = {
    "abs + square": (lambda z, y: cp.abs(z - y) + cp.square(z - y), "reg"),
    "hinge + 0.1 square": (lambda z, y: cp.pos(1 - cp.multiply(y, z)) + 0.1 * cp.square(z), "pm"),
    "logistic + 0.1 abs": (
        lambda z, y: cp.logistic(-cp.multiply(y, z)) + 0.1 * cp.abs(z),
        "pm",
    ),
    "huber + pinball": (
        lambda z, y: cp.huber(z - y, 0.5) + cp.maximum(0.3 * (z - y), -0.7 * (z - y)),
        "reg",
    ),
    "square + eps-insensitive": (
        lambda z, y: 0.5 * cp.square(z - y) + cp.pos(cp.abs(z - y) - 0.1),
        "reg",
    ),
    "exp + hinge of r": (lambda z, y: 0.2 * cp.exp(z - y) + cp.pos(z - y), "reg"),
}


_data, _domain = rung_data, rung_domain


def _reference(loss, X, Y, domain, w0):
    d = X.shape[1]
    W = cp.Variable(d)
    obj = cp.sum(loss(X @ W, Y)) / X.shape[0] + LAM / 2 * cp.sum_squares(W - w0)
    ref = cp.Problem(cp.Minimize(obj), _domain(domain, W))
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return ref.value


@pytest.mark.parametrize("domain", ["ball", "small ball", "box"])
@pytest.mark.parametrize("name", list(LOSSES))
def test_mixed_losses_take_proximal_newton_and_bracket_the_reference(name, domain):
    loss, kind = LOSSES[name]
    X, Y = _data(kind, 400, 5, 11)
    w, x, y = cp.Variable(5), cp.Parameter(5), cp.Parameter()
    problem = dpcvx.Problem(loss(x @ w, y), w, {x: X, y: Y}, _domain(domain, w))
    w0 = np.full(5, 0.02)
    sol = problem.solve(regularization=LAM, center=w0, accuracy=1e-9)
    assert sol.solver_stats["solver"] == solve_module.MIXED, sol.solver_stats
    assert sol.gap <= 1e-9
    ref = _reference(loss, X, Y, domain, w0)
    tol = 1e-9 * (1 + abs(ref))
    assert sol.lower <= ref + tol and ref <= sol.upper + tol


def test_a_quadratic_smooth_part_takes_one_step():
    """The smooth part of ``cp.abs(r) + cp.square(r)`` is its own second-order model: one
    step of the method solves the problem, and its certificate meets the target."""
    X, Y = _data("reg", 3000, 8, 2)
    w, x, y = cp.Variable(8), cp.Parameter(8), cp.Parameter()
    loss = cp.abs(x @ w - y) + cp.square(x @ w - y)
    problem = dpcvx.Problem(loss, w, {x: X, y: Y}, [cp.norm(w) <= 10])
    sol = problem.solve(regularization=LAM, accuracy=1e-10)
    assert sol.solver_stats["solver"] == solve_module.MIXED
    assert sol.solver_stats["newton_steps"] == 1 and sol.gap <= 1e-10


def test_the_tightest_certificate_without_a_target():
    X, Y = _data("pm", 500, 4, 3)
    w, x, y = cp.Variable(4), cp.Parameter(4), cp.Parameter()
    loss = cp.logistic(-cp.multiply(y, x @ w)) + 0.1 * cp.abs(x @ w)
    problem = dpcvx.Problem(loss, w, {x: X, y: Y}, [cp.norm(w) <= 1])
    sol = problem.solve(regularization=LAM)
    assert sol.solver_stats["solver"] == solve_module.MIXED
    assert sol.gap <= 1e-9 * (1 + abs(sol.upper))


@pytest.mark.parametrize(
    "loss, mixed",
    [
        (lambda z, y: cp.abs(z - y) + cp.square(z - y), True),
        (lambda z, y: cp.logistic(z) + cp.abs(z) - y * z, True),
        (lambda z, y: cp.abs(z - y), False),  # piecewise only: the arrowhead rung
        (lambda z, y: cp.square(z - y) + 0.1 * (z - y), False),  # smooth only: Newton
        (lambda z, y: cp.norm(cp.hstack([z - y, z]), 2) + cp.square(z), False),  # an SOC term
        # a norm of one entry is its absolute value (a scalar: the piecewise model takes it)
        (lambda z, y: cp.norm(cp.hstack([z - y]), 2) + cp.square(z), True),
    ],
)
def test_the_loss_s_form_decides_the_rung(loss, mixed):
    """Whether the loss has a smooth and a piecewise-linear part is its form's: the same on
    data with a label of 1e12, a row of zeros, or labels of zero."""
    rng = np.random.default_rng(5)
    X, Y = rng.normal(size=(30, 3)), rng.normal(size=30)
    for data_X, data_Y in ((X, Y), (X, np.where(np.arange(30) == 0, 1e12, Y)), (X * 0, Y * 0)):
        w, x, y = cp.Variable(3), cp.Parameter(3), cp.Parameter()
        problem = dpcvx.Problem(loss(x @ w, y), w, {x: data_X, y: data_Y}, [cp.norm(w) <= 1])
        assert (mixed_model(problem._decl) is not None) == mixed


def test_a_huge_label_certifies_on_the_mixed_rung():
    """A label of 1e12 in ``cp.abs(r) + cp.square(r)`` (its square near 1e24): the method runs
    on the moved models (arguments far out where their term is affine go next to the
    domain) and the certificate meets its target on that dataset and its neighbour."""
    X, Y = _data("reg", 500, 4, 7)
    for label in (Y[0], 1e12):
        data_Y = Y.copy()
        data_Y[0] = label
        w, x, y = cp.Variable(4), cp.Parameter(4), cp.Parameter()
        loss = cp.abs(x @ w - y) + cp.huber(x @ w - y, 1.0)
        problem = dpcvx.Problem(loss, w, {x: X, y: data_Y}, [cp.norm(w) <= 1])
        sol = problem.solve(regularization=LAM, accuracy=1e-8)
        assert sol.solver_stats["solver"] == solve_module.MIXED and sol.gap <= 1e-8


def test_a_release_takes_the_mixed_rung_only_where_every_example_is_light(solve_paths):
    """Under a Lipschitz extension the rung runs where every example is certified C-Lipschitz
    (features of norm at most one, every loss 2.2-Lipschitz on the unit ball: ``f_C = f``):
    it has no form of the extension, so a neighbour with one steeper example takes the conic
    program. Every neighbour releases; where that program would be too large to stamp, all of
    them are refused alike (tests/certification/test_extension_refusal.py)."""
    X, Y = _data("pm", 600, 5, 9)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    runs = []
    for label, scale in ((Y[0], 1.0), (-Y[0], 1.0), (0.0, 1.0), (Y[0], 3.0)):
        data_X, data_Y = X.copy(), Y.copy()
        data_Y[0], data_X[0] = label, X[0] * scale
        w, x, y = cp.Variable(5), cp.Parameter(5), cp.Parameter()
        loss = cp.pos(1 - cp.multiply(y, x @ w)) + 0.1 * cp.square(x @ w)
        problem = dpcvx.Problem(loss, w, {x: data_X, y: data_Y}, [cp.norm(w) <= 1])
        mech = dpcvx.OutputPerturbation(lipschitz=2.2, regularization=0.05)
        start = len(solve_paths)
        result = problem.solve_private(mech, epsilon=1.0, rng=0)
        assert np.all(np.isfinite(result.w))
        runs.append(tuple(solve_paths[start:]))
    assert runs[:3] == [(solve_module.MIXED,)] * 3, runs
    assert runs[3] and solve_module.MIXED not in runs[3], runs


def test_the_piecewise_part_s_values_up_to_a_constant():
    """The line search's value of the piecewise-linear part (``mixed.pieces_values``) differs
    from the part's mean, in closed form, by the same constant at every point (its affine
    terms' offsets); the smooth part's is its mean."""
    from dpcvx.certification.mixed import pieces_values

    rng = np.random.default_rng(8)
    X, Y = rng.normal(size=(50, 3)), rng.normal(size=50)
    w, x, y = cp.Variable(3), cp.Parameter(3), cp.Parameter()
    loss = cp.maximum(0.3 * (x @ w - y), -0.7 * (x @ w - y)) + cp.abs(x @ w + 2 * y)
    loss = loss - 0.5 * (x @ w - y) + cp.logistic(x @ w)
    problem = dpcvx.Problem(loss, w, {x: X, y: Y}, [cp.norm(w) <= 1])
    model = mixed_model(problem._decl)

    def exact(v):
        r = X @ v - Y
        pieces = np.maximum(0.3 * r, -0.7 * r) + np.abs(X @ v + 2 * Y) - 0.5 * r
        return pieces.mean(), np.logaddexp(0.0, X @ v).mean()

    points = rng.normal(size=(4, 3))
    shifts = []
    for v in points:
        pieces, smooth = exact(v)
        shifts.append(pieces - pieces_values(model.pieces, v))
        assert abs(model.smooth.value_grad(v)[0] - smooth) <= 1e-12
    assert np.ptp(shifts) <= 1e-12


def _counted(monkeypatch, name: str) -> list:
    """The calls of ``dpcvx.certification.mixed.<name>`` while the test runs (one entry each)."""
    import dpcvx.certification.mixed as mixed

    calls: list = []
    inner = getattr(mixed, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return inner(*args, **kwargs)

    monkeypatch.setattr(mixed, name, counted)
    return calls


def _pulled_data(n: int = 200):
    """An intercept and one small feature, labels near 10: with ``exp(x^T w - y)`` and a
    linear pull ``-3 x^T w``, the answer lies where the exponential turns steep."""
    rng = np.random.default_rng(0)
    X = np.column_stack([np.ones(n), 0.1 * rng.normal(size=n)])
    return X, 10 + 0.1 * rng.normal(size=n)


def test_the_line_search_shortens_a_step_the_model_overshoots(monkeypatch):
    """``exp(x^T w - y) - 3 x^T w + 0.1 |x^T w - 5 y|`` with labels near 10, from ``w = 0``: the
    exponential's model there is nearly flat, so the first step goes far past the answer,
    where the exponential is huge. The line search shortens such steps (each tried point
    costs one more value of the piecewise part), and the rung certifies the answer."""
    calls = _counted(monkeypatch, "pieces_values")
    X, Y = _pulled_data()
    n = X.shape[0]
    w, x, y = cp.Variable(2), cp.Parameter(2), cp.Parameter()
    loss = cp.exp(x @ w - y) - 3 * (x @ w) + 0.1 * cp.abs(x @ w - 5 * y)
    problem = dpcvx.Problem(loss, w, {x: X, y: Y}, [cp.norm(w) <= 100])
    sol = problem.solve(regularization=LAM, accuracy=1e-9)
    assert sol.solver_stats["solver"] == solve_module.MIXED and sol.gap <= 1e-9
    steps = sol.solver_stats["newton_steps"]
    assert len(calls) > 1 + 2 * steps  # a full step costs two values; a shorter one more
    W = cp.Variable(2)
    obj = cp.sum(cp.exp(X @ W - Y) - 3 * (X @ W) + 0.1 * cp.abs(X @ W - 5 * Y)) / n
    ref = cp.Problem(cp.Minimize(obj + LAM / 2 * cp.sum_squares(W)), [cp.norm(W) <= 100])
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    tol = 1e-9 * (1 + abs(ref.value))
    assert sol.lower <= ref.value + tol and ref.value <= sol.upper + tol


def test_a_step_that_makes_no_progress_ends_the_steps(monkeypatch):
    """Where the arrowhead method returns its starting point (it stalls where a strong linear
    pull meets an active ball at a small ``lam``: ``-3 x^T w + |x^T w - 5 y|`` in a ball of
    radius 60), the model sees no decrease: the steps end after one, and the ladder's conic
    program certifies, rather than thirty identical solves and certificates."""
    solves = _counted(monkeypatch, "arrowhead_ipm")
    X, Y = _pulled_data()
    w, x, y = cp.Variable(2), cp.Parameter(2), cp.Parameter()
    loss = cp.exp(x @ w - y) - 3 * (x @ w) + cp.abs(x @ w - 5 * y)
    problem = dpcvx.Problem(loss, w, {x: X, y: Y}, [cp.norm(w) <= 60])
    sol = problem.solve(regularization=1e-3, accuracy=1e-9)
    assert sol.gap <= 1e-9
    assert len(solves) <= 2, len(solves)
