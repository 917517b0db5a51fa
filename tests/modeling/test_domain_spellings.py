"""Domains however they are spelled: recognized as the catalogue sets where they are one, and
bounded by weak duality over their pieces everywhere else, checked against independent CVXPY
solves (support functions, linear-quadratic minima, the Lipschitz extension's joint program)
and against garbage hints (validity never rests on them)."""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.modeling._expressions import substitute
from dpcvx.modeling.domains import Domain

D = 3
_P = np.diag([1.0, 4.0, 9.0])
_M = np.array([[2.5, 0.3, -0.2], [0.1, 1.8, 0.4], [-0.3, 0.2, 2.2]])
_A = np.vstack([np.eye(D), -np.eye(D), np.ones((1, D)), [[1.0, -1.0, 0.0]]])
_b = np.r_[np.ones(D), np.linspace(0.5, 1.2, D), 1.2, 0.8]


def _bounded(d):
    return cp.Variable(d, bounds=[-0.8, 0.6])


#: (name, variable factory, constraints of the variable, expected kind)
SPELLINGS = [
    ("abs elementwise", cp.Variable, lambda w: [cp.abs(w) <= 1], "box"),
    ("abs shifted", cp.Variable, lambda w: [cp.abs(w - 0.2) <= 0.5], "box"),
    ("norm inf", cp.Variable, lambda w: [cp.norm(w, "inf") <= 0.5], "box"),
    ("max abs", cp.Variable, lambda w: [cp.max(cp.abs(w)) <= 0.5], "box"),
    ("two-sided", cp.Variable, lambda w: [w >= -0.3, w <= np.array([0.5, 0.7, 0.9])], "box"),
    ("variable bounds", _bounded, lambda w: [], "box"),
    ("variable bounds and ball", _bounded, lambda w: [cp.norm(w) <= 0.9], "general"),
    (
        "nonneg variable and sum",
        lambda d: cp.Variable(d, nonneg=True),
        lambda w: [cp.sum(w) <= 1],
        "general",
    ),
    ("sum_squares ball", cp.Variable, lambda w: [cp.sum_squares(w) <= 0.25], "l2_ball"),
    ("sum_squares shifted", cp.Variable, lambda w: [cp.sum_squares(w - 0.1) <= 0.5], "l2_ball"),
    (
        "quad_form scaled identity",
        cp.Variable,
        lambda w: [cp.quad_form(w, 2 * np.eye(D)) <= 0.5],
        "l2_ball",
    ),
    ("norm2 shifted", cp.Variable, lambda w: [cp.norm2(w - 0.3) <= 0.8], "l2_ball"),
    ("squared norm", cp.Variable, lambda w: [cp.norm(w, 2) ** 2 <= 0.64], "l2_ball"),
    ("norm minus one", cp.Variable, lambda w: [cp.norm(w) - 1 <= 0], "l2_ball"),
    ("scaled norm", cp.Variable, lambda w: [2 * cp.norm(w) <= 1], "l2_ball"),
    ("quad_form ellipsoid", cp.Variable, lambda w: [cp.quad_form(w, _P) <= 1], "general"),
    ("norm(M w) ellipsoid", cp.Variable, lambda w: [cp.norm(_M @ w) <= 1], "general"),
    ("shifted ellipsoid", cp.Variable, lambda w: [cp.norm(_M @ (w - 0.1)) <= 1.5], "general"),
    ("polytope", cp.Variable, lambda w: [_A @ w <= _b], "general"),
    ("simplex", cp.Variable, lambda w: [w >= 0, cp.sum(w) == 1], "simplex"),
    ("l1 ball", cp.Variable, lambda w: [cp.norm1(w) <= 1.2], "l1_ball"),
    ("sum abs", cp.Variable, lambda w: [cp.sum(cp.abs(w)) <= 1.2], "l1_ball"),
    ("ball and box", cp.Variable, lambda w: [cp.norm(w) <= 1, w <= 0.5, w >= -0.7], "general"),
    ("ball and abs", cp.Variable, lambda w: [cp.norm(w, 2) <= 1, cp.abs(w) <= 0.6], "general"),
    ("ball and equality", cp.Variable, lambda w: [cp.norm(w) <= 1, cp.sum(w) == 0.2], "general"),
    (
        "ellipsoid and halfspace",
        cp.Variable,
        lambda w: [cp.quad_form(w, _P) <= 1, w[0] + w[1] <= 0.3],
        "general",
    ),
    ("pnorm 3 (generic)", cp.Variable, lambda w: [cp.pnorm(w, 3) <= 0.8], "general"),
    ("exp (generic) and box", cp.Variable, lambda w: [cp.exp(w) <= 2, w >= -1], "general"),
]


def _spelling(case, d=D):
    name, make_var, cons, kind = case
    w = make_var(d)
    return w, cons(w), kind


def _reference(w, constraints, objective_of):
    """Solve an independent CVXPY problem over the same set (fresh variable, tight)."""
    v = cp.Variable(
        w.size, bounds=w.attributes.get("bounds"), nonneg=bool(w.attributes.get("nonneg"))
    )
    cons = [substitute(c, w, v) for c in constraints]
    prob = cp.Problem(objective_of(v), cons)
    return _solve_tight(prob)


def _solve_tight(prob: cp.Problem) -> float:
    """Clarabel at 1e-12, relaxed to 1e-10 where it stalls, ECOS as a last resort."""
    for tol in (1e-12, 1e-10):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                prob.solve(
                    solver=cp.CLARABEL, tol_gap_abs=tol, tol_gap_rel=tol, tol_feas=tol, max_iter=400
                )
            if prob.status == "optimal":
                return float(prob.value)
        except cp.SolverError:
            pass
    prob.solve(solver=cp.ECOS, abstol=1e-10, reltol=1e-10, feastol=1e-10)
    return float(prob.value)


@pytest.mark.parametrize("case", SPELLINGS, ids=lambda c: c[0])
def test_spelling_is_read_as_its_set(case):
    w, cons, kind = _spelling(case)
    dom = Domain(w, cons)
    assert dom.kind == kind
    # the bounding ball contains the set: check on the set's extreme points in random directions
    rng = np.random.default_rng(0)
    for v in rng.normal(size=(4, D)):
        top = _reference(w, cons, lambda u, v=v: cp.Maximize(v @ u))
        assert top <= v @ dom.center + dom.radius * np.linalg.norm(v) + 1e-9


@pytest.mark.parametrize("case", SPELLINGS, ids=lambda c: c[0])
def test_support_function_is_valid_and_tight(case):
    w, cons, _ = _spelling(case)
    dom = Domain(w, cons)
    rng = np.random.default_rng(1)
    V = rng.normal(size=(5, D))
    got = dom.support(V)
    for v, g in zip(V, got):
        ref = _reference(w, cons, lambda u, v=v: cp.Maximize(v @ u))
        tol = 1e-9 * (1 + abs(ref))
        assert g >= ref - tol  # valid (the reference is accurate to ~1e-10)
        if "generic" not in case[0]:
            assert g <= ref + 1e-8 * (1 + abs(ref)), (g, ref)  # as tight as a closed form


@pytest.mark.parametrize("case", SPELLINGS, ids=lambda c: c[0])
def test_support_bound_is_valid_whatever_the_hints(case):
    w, cons, _ = _spelling(case)
    dom = Domain(w, cons)
    rng = np.random.default_rng(2)
    V = rng.normal(size=(4, D))
    hints = rng.normal(size=(4, D)) * rng.choice([1e-3, 1.0, 1e3], size=(4, 1))
    hints[0] = np.nan
    got = dom.support(V, hints=hints)
    for v, g in zip(V, got):
        ref = _reference(w, cons, lambda u, v=v: cp.Maximize(v @ u))
        assert g >= ref - 1e-9 * (1 + abs(ref))


@pytest.mark.parametrize("lam", [0.0, 0.3, 5.0])
@pytest.mark.parametrize("case", SPELLINGS, ids=lambda c: c[0])
def test_linear_quadratic_minimum_is_valid_and_tight(case, lam):
    w, cons, _ = _spelling(case)
    dom = Domain(w, cons)
    rng = np.random.default_rng(3)
    s = rng.normal(size=D) * 2
    w0 = rng.normal(size=D)
    ref = _reference(w, cons, lambda u: cp.Minimize(s @ u + lam / 2 * cp.sum_squares(u - w0)))
    got = dom.min_linear_quadratic(s, lam, w0)
    tol = 1e-9 * (1 + abs(ref))
    assert got <= ref + tol  # valid
    if "generic" not in case[0]:
        assert got >= ref - 1e-8 * (1 + abs(ref)), (got, ref)  # tight
    # with a garbage hint the bound is still valid
    for hint in (rng.normal(size=D) * 10, np.full(D, np.nan), dom.center):
        assert dom.min_linear_quadratic(s, lam, w0, hint=hint) <= ref + tol


def test_abs_box_in_one_dimension():
    """``cp.abs(w) <= 1`` with d = 1 used to crash in the constraint analysis."""
    w = cp.Variable(1)
    x = cp.Parameter(1)
    X = np.array([[-1.0], [-1.0], [-1.0], [1.0]])
    problem = dpcvx.Problem(cp.abs(w - x), w, data={x: X}, domain=[cp.abs(w) <= 1])
    assert problem.domain.kind == "box"
    sol = problem.solve(regularization=0.1, accuracy=1e-10)
    assert sol.gap <= 1e-10
    res = problem.solve_private(
        dpcvx.OutputPerturbation(lipschitz=1.0, regularization=0.1), epsilon=1.0, rng=0
    )
    assert np.all(np.isfinite(res.w)) and abs(res.w[0]) <= 1


def _hinge_data(n=30, seed=4):
    rng = np.random.default_rng(seed)
    X = rng.standard_t(3, size=(n, D)) * 1.5
    Y = np.sign(X @ np.array([1.0, -0.5, 0.3]) + 0.2 * rng.normal(size=n))
    return X, Y


def _joint_reference(w, cons, X, Y, C, lam, w0):
    """The extension's joint program (paper 000, Lemma 2.7) as one whole-dataset problem."""
    n = len(Y)
    v = cp.Variable(D)
    Ys = [cp.Variable(D) for _ in range(n)]
    constraints = [substitute(c, w, v) for c in cons]
    for yi in Ys:
        constraints += [substitute(c, w, yi) for c in cons]
    bounds = w.attributes.get("bounds")
    if bounds is not None:
        for u in [v, *Ys]:
            constraints += [u >= bounds[0], u <= bounds[1]]
    if w.attributes.get("nonneg"):
        constraints += [u >= 0 for u in [v, *Ys]]
    obj = sum(cp.pos(1 - Y[i] * (X[i] @ Ys[i])) + C * cp.norm(v - Ys[i]) for i in range(n)) / n
    prob = cp.Problem(cp.Minimize(obj + lam / 2 * cp.sum_squares(v - w0)), constraints)
    return _solve_tight(prob)


@pytest.mark.parametrize("case", SPELLINGS, ids=lambda c: c[0])
def test_extension_certifies_on_every_spelling(case):
    """The Lipschitz extension's joint program certifies to 1e-9 on every domain (it used to
    stop at 3e-3..1e-1 outside the catalogue, because the support function was the bounding
    box's), and its bracket contains the independent reference."""
    w, cons, _ = _spelling(case)
    x = cp.Parameter(D)
    y = cp.Parameter()
    X, Y = _hinge_data()
    problem = dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, data={x: X, y: Y}, domain=cons)
    C, lam = 1.0, 0.1
    w0 = problem.domain.center
    sol = problem.lipschitz_extension(C).solve(regularization=lam, accuracy=1e-9)
    ref = _joint_reference(w, cons, X, Y, C, lam, w0)
    tol = 1e-8 * (1 + abs(ref))
    assert sol.lower <= ref + tol and ref <= sol.upper + tol
    assert sol.gap <= 1e-9


@pytest.mark.parametrize("case", SPELLINGS, ids=lambda c: c[0])
def test_double_output_perturbation_releases_on_every_spelling(case):
    w, cons, _ = _spelling(case)
    x = cp.Parameter(D)
    y = cp.Parameter()
    X, Y = _hinge_data(n=60, seed=5)
    problem = dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, data={x: X, y: Y}, domain=cons)
    mech = dpcvx.DoubleOutputPerturbation(k=4, moment=2.0, regularization=0.1)
    res = problem.solve_private(mech, epsilon=1.0, rng=0)
    assert np.all(np.isfinite(res.w)) and problem.domain.contains(res.w)


def test_a_ball_in_many_dimensions_declares_without_a_matrix_inverse(monkeypatch):
    """The support-function cover needs the pseudo-inverse of a norm piece's ``M^T`` only
    when a remainder is left: it is computed when first asked, and a diagonal ``M`` (every
    ball and scaled ball) is inverted entry by entry. A ball at d = 5000 took 30 s to declare
    (an SVD of a 5000 x 5000 identity)."""
    import dpcvx
    from dpcvx.modeling._sets import NormPiece

    def refuse(*args, **kwargs):
        raise AssertionError("no dense pseudo-inverse for a ball")

    monkeypatch.setattr(np.linalg, "pinv", refuse)
    d = 3000
    w, x = cp.Variable(d), cp.Parameter(d)
    X = np.random.default_rng(0).normal(size=(4, d))
    dpcvx.Problem(cp.abs(x @ w), w, {x: X}, [cp.norm(w) <= 2.0])
    piece = NormPiece(np.diag([2.0, 0.0, 1e-20, 4.0]), np.zeros(4), 1.0, 2.0)
    monkeypatch.undo()
    assert np.allclose(piece.pinv(), np.linalg.pinv(piece.M.T), rtol=1e-14, atol=0)
    general = NormPiece(np.arange(6.0).reshape(2, 3), np.zeros(2), 1.0, 2.0)
    assert np.allclose(general.pinv(), np.linalg.pinv(general.M.T))
