"""Euclidean norms that read no data (a group lasso written into the loss) beside a
piecewise-linear data term (hinge, absolute, pinball) are second-order cones of the arrowhead
method's program (``dpcvx.certification.penalty_cones``): no fast rung held them, and such
a loss took the conic program (the hinge loss plus a two-group lasso at n = 1e5, d = 20:
118 s with a copy of the penalty per example, 7.4 s with it held once, 0.3 s here).

Checked against CVXPY + Clarabel at tight tolerances on the whole-dataset objective (the
certificate's bracket and its distance bound), with groups zeroed by a large weight, a ball
and a box; the multipliers of a nonzero group against their closed form, and a negative
control (the multipliers' sign flipped) that the certificate must catch.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
import dpcvx.certification.solve as solve_module
from dpcvx.certification.arrowhead import arrowhead_ipm, piecewise_model
from dpcvx.certification.penalty_cones import PenaltyCones

LAM = 0.05
N, D = 300, 6
W0 = np.linspace(-0.1, 0.1, D)

#: one example's data term, the penalty (written once for the reference), labels
LOSSES = {
    "hinge + group lasso": (
        lambda w, x, y: cp.pos(1 - y * (x @ w)),
        lambda w: 0.05 * (cp.norm(w[:3]) + cp.norm(w[3:])),
        "pm",
    ),
    "hinge + group lasso, groups at zero": (
        lambda w, x, y: cp.pos(1 - y * (x @ w)),
        lambda w: 0.8 * (cp.norm(w[:3]) + cp.norm(w[3:])),
        "pm",
    ),
    "absolute + column norms": (
        lambda w, x, y: cp.abs(x @ w - y),
        lambda w: 0.1 * cp.sum(cp.norm(cp.reshape(w, (2, 3), order="C"), 2, axis=0)),
        "reg",
    ),
    "pinball + a shifted norm": (
        lambda w, x, y: cp.maximum(0.3 * (y - x @ w), -0.7 * (y - x @ w)),
        lambda w: 0.05 * cp.norm(w - 0.3),
        "reg",
    ),
    "hinge + L1 + a group": (
        lambda w, x, y: cp.pos(1 - y * (x @ w)),
        lambda w: 0.01 * cp.norm1(w) + 0.05 * cp.norm(2 * w[:3] + 1),
        "pm",
    ),
}
DOMAINS = {
    "ball": lambda w: [cp.norm(w, 2) <= 2],
    "box": lambda w: [cp.abs(w) <= 0.5],
}


def _data(kind, seed=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D)) / np.sqrt(D)
    z = X @ (rng.normal(size=D) * (rng.random(D) < 0.5))
    if kind == "pm":
        return X, np.sign(z + 0.3 * rng.normal(size=N))
    return X, z + 0.3 * rng.normal(size=N)


def _problem(name, domain="ball"):
    loss, penalty, kind = LOSSES[name]
    X, Y = _data(kind)
    w, x, y = cp.Variable(D), cp.Parameter(D), cp.Parameter()
    expr = loss(w, x, y) + penalty(w)
    return dpcvx.Problem(expr, w, {x: X, y: Y}, DOMAINS[domain](w)), X, Y


def _reference(name, X, Y, domain="ball"):
    loss, penalty, _ = LOSSES[name]
    w = cp.Variable(D)
    total = sum(loss(w, X[i], Y[i]) for i in range(N)) / N
    objective = total + penalty(w) + LAM / 2 * cp.sum_squares(w - W0)
    ref = cp.Problem(cp.Minimize(objective), DOMAINS[domain](w))
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-9, tol_gap_rel=1e-9, tol_feas=1e-9)
    return float(ref.value), np.asarray(w.value, float)


@pytest.mark.parametrize("domain", list(DOMAINS))
@pytest.mark.parametrize("name", list(LOSSES))
def test_the_arrowhead_rung_certifies_norm_penalties(name, domain):
    """The arrowhead method certifies the loss on its first attempt; the certificate
    brackets the reference optimum and its distance bound holds at the reference minimizer."""
    problem, X, Y = _problem(name, domain)
    sol = problem.solve(regularization=LAM, center=W0, accuracy=1e-9)
    assert sol.solver_stats["solver"] == solve_module.ARROWHEAD
    assert len(sol.solver_stats["attempts"]) == 1
    ref, w_ref = _reference(name, X, Y, domain)
    slack = 1e-8 * (1 + abs(ref))
    assert sol.gap <= 1e-9
    assert sol.lower - slack <= ref <= sol.upper + slack
    assert np.linalg.norm(sol.w - w_ref) <= sol.distance_bound + 1e-5


def test_groups_at_zero_are_zero():
    """A weight past the data's pull zeroes both groups (the cones at their apex)."""
    problem, _, _ = _problem("hinge + group lasso, groups at zero")
    sol = problem.solve(regularization=LAM, center=np.zeros(D), accuracy=1e-10)
    assert sol.solver_stats["solver"] == solve_module.ARROWHEAD
    assert np.linalg.norm(sol.w) <= sol.distance_bound + 1e-9


def _method(name):
    problem, _, _ = _problem(name)
    decl = problem.declaration
    model = piecewise_model(decl, cones=True)
    assert model is not None and len(model.cones) >= 1
    cones = PenaltyCones(model.cones, np.zeros(D))
    w, mus, _ = arrowhead_ipm(model, LAM, W0, np.zeros(D), tol=1e-12, blocks=cones)
    return decl, model, cones, w, mus


def test_a_nonzero_group_s_multiplier_is_its_unit_vector():
    """Where a group is nonzero the norm is differentiable: its multiplier is ``u / ||u||``
    for ``u = A w + b`` at the answer, the same for every example."""
    decl, model, cones, w, mus = _method("pinball + a shifted norm")
    thetas = model.multipliers(mus, cones.thetas())
    for cone in model.cones:
        u = cone.A @ w + cone.b
        assert np.linalg.norm(u) > 1e-3
        theta = thetas[cone.index][0]
        assert theta.shape == (N, u.size) and not theta.flags.writeable
        assert np.allclose(theta[0], u / np.linalg.norm(u), atol=1e-6)
        assert np.all(theta == theta[:1])


def test_the_certificate_catches_multipliers_of_the_wrong_sign(monkeypatch):
    """Negative control: the cones' multipliers negated (``Z_1 / c`` instead of ``-Z_1 /
    c``) leave the certificate far from the target, and the ladder goes on to the conic
    program, which certifies."""
    true = PenaltyCones.thetas
    monkeypatch.setattr(PenaltyCones, "thetas", lambda self: [-t for t in true(self)])
    problem, _, _ = _problem("hinge + group lasso")
    sol = problem.solve(regularization=LAM, center=W0, accuracy=1e-9)
    first = sol.solver_stats["attempts"][0]
    assert first["solver"] == solve_module.ARROWHEAD and first["gap"] > 1e-3
    assert sol.solver_stats["solver"] == "CLARABEL" and sol.gap <= 1e-9


def test_a_model_without_cones_is_asked_for_none():
    """The cones are only in the model asked for them: the model of the rungs that do not
    hand them to the method stays None for such a loss (as before), and a loss without a
    norm penalty has no model with cones (the one without is the same)."""
    problem, _, _ = _problem("hinge + group lasso")
    assert piecewise_model(problem.declaration) is None
    assert piecewise_model(problem.declaration, share=False) is None
    w, x, y = cp.Variable(D), cp.Parameter(D), cp.Parameter()
    X, Y = _data("pm")
    plain = dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, {x: X, y: Y}, [cp.norm(w) <= 2])
    assert piecewise_model(plain.declaration, cones=True) is None
    assert piecewise_model(plain.declaration) is not None


def test_a_steep_example_under_an_extension_takes_the_conic_program():
    """The loss has no written extension with cones: with every example ``C``-Lipschitz the
    arrowhead method runs (its point certified as a plain block), with one steeper example
    the extension's conic program does."""
    X, Y = _data("pm")
    X = X / np.linalg.norm(X, axis=1, keepdims=True)
    loss, penalty, _ = LOSSES["hinge + group lasso"]
    w, x, y = cp.Variable(D), cp.Parameter(D), cp.Parameter()
    expr = loss(w, x, y) + penalty(w)
    light = dpcvx.Problem(expr, w, {x: X, y: Y}, [cp.norm(w) <= 2])
    sol = light.lipschitz_extension(1.2).solve(regularization=LAM, accuracy=1e-9)
    assert sol.solver_stats["solver"] == solve_module.ARROWHEAD and sol.gap <= 1e-9
    X[0] *= 5.0
    steep = dpcvx.Problem(expr, w, {x: X, y: Y}, [cp.norm(w) <= 2])
    sol = steep.lipschitz_extension(1.2).solve(regularization=LAM, accuracy=1e-9)
    assert sol.solver_stats["solver"] == "CLARABEL" and sol.gap <= 1e-9


def test_a_group_of_one_entry_is_its_absolute_value_on_the_arrowhead_rung():
    """``cp.norm(w[:1])`` is the absolute value of that entry, written as a scalar (the
    atom's shape): with groups of other sizes the loss takes the arrowhead method (before, an
    argument of shape (1,) under a scalar atom sent it to the conic program), and the
    certificate brackets the reference."""
    X, Y = _data("pm")
    w, x, y = cp.Variable(D), cp.Parameter(D), cp.Parameter()
    penalty = 0.05 * (cp.norm(w[:1]) + cp.norm(w[1:3]) + cp.norm(w[3:]))
    problem = dpcvx.Problem(cp.pos(1 - y * (x @ w)) + penalty, w, {x: X, y: Y}, [cp.norm(w) <= 2])
    kinds = [t.kind for t in problem.declaration.terms]
    assert kinds.count("abs") == 1 and kinds.count("norm2") == 2
    sol = problem.solve(regularization=LAM, center=W0, accuracy=1e-9)
    assert sol.solver_stats["solver"] == solve_module.ARROWHEAD and sol.gap <= 1e-9
    v = cp.Variable(D)
    hinge = cp.sum(cp.pos(1 - cp.multiply(Y, X @ v))) / N
    pen = 0.05 * (cp.abs(v[0]) + cp.norm(v[1:3]) + cp.norm(v[3:]))
    ref = cp.Problem(cp.Minimize(hinge + pen + LAM / 2 * cp.sum_squares(v - W0)), [cp.norm(v) <= 2])
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-9, tol_gap_rel=1e-9, tol_feas=1e-9)
    slack = 1e-8 * (1 + abs(ref.value))
    assert sol.lower - slack <= ref.value <= sol.upper + slack
    assert np.linalg.norm(sol.w - v.value) <= sol.distance_bound + 1e-5
