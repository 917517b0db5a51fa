"""OracleProblem (paper 000, Algorithm 3 on value/subgradient oracles) and structured_solve
(Theorem D.4 / Lemma D.5) against independent answers: the digest's E1d closed forms and
dpcvx.Problem's interior-point certified solves of the same (extension) ERM."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.errors import (
    CertificationError,
    DataError,
    InvalidParameterError,
    ModelingError,
)
from dpcvx.oracle import OracleProblem, structured_solve

# E1d (docs/paper000_digest.md section 6.10): W = [-1, 1], f = |x w - y|, C = 1, lam = 0.5
X1 = np.array([3.0, 0.5, -2.0])
Y1 = np.array([1.0, 0.2, 4.0])
EXT_OPT = 207.0 / 180.0  # min of the extension objective, at w* = 1/3
ERM_OPT = 287.0 / 180.0  # min of the plain ERM, at w* = 1/3


def absolute_value(W, data):
    """|<x_i, w_i> - y_i| for every row (hand-written, vectorized)."""
    return np.abs(np.sum(np.atleast_2d(data["x"].T).T * W, axis=1) - data["y"])


def absolute_subgradient(W, data):
    x = np.atleast_2d(data["x"].T).T  # (k,) -> (k, 1); (k, d) stays
    r = np.sum(x * W, axis=1) - data["y"]
    return x * np.sign(r)[:, None]


def e1d_oracle(**kwargs) -> OracleProblem:
    w = cp.Variable(1)
    return OracleProblem(
        absolute_value,
        absolute_subgradient,
        {"x": X1, "y": Y1},
        w,
        dpcvx.domains.box(w, -1.0, 1.0),
        **kwargs,
    )


def e1d_problem() -> dpcvx.Problem:
    w = cp.Variable(1)
    x, y = cp.Parameter(1), cp.Parameter()
    return dpcvx.Problem(
        cp.abs(x @ w - y), w, {x: X1[:, None], y: Y1}, dpcvx.domains.box(w, -1.0, 1.0)
    )


def extension_objective(w: float) -> float:
    return (abs(w - 1 / 3) + abs(0.5 * w - 0.2) + w + 3) / 3 + 0.25 * w * w


def erm_objective(w: float) -> float:
    return float(np.mean(np.abs(X1 * w - Y1))) + 0.25 * w * w


def pair_2d(n: int = 4, seed: int = 1):
    """The same absolute-loss data as an OracleProblem and as a dpcvx.Problem (unit disc)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_t(3, size=(n, 2))
    Y = rng.normal(size=n)
    w = cp.Variable(2)
    dom = dpcvx.domains.l2_ball(w, 1.0)
    oracle = OracleProblem(absolute_value, absolute_subgradient, {"x": X, "y": Y}, w, dom)
    x, y = cp.Parameter(2), cp.Parameter()
    problem = dpcvx.Problem(cp.abs(x @ w - y), w, {x: X, y: Y}, dom)
    return oracle, problem


# --------------------------------------------------------------------------- certified solves
def test_extension_solve_on_E1d_brackets_the_closed_form():
    sol = e1d_oracle().solve(regularization=0.5, center=[0.0], accuracy=0.1, extension=1.0)
    assert sol.gap <= 0.1
    assert sol.lower <= EXT_OPT <= sol.upper
    assert 0.0 <= extension_objective(sol.w[0]) - EXT_OPT <= sol.gap
    assert abs(sol.w[0] - 1 / 3) <= sol.distance_bound
    assert sol.distance_bound == pytest.approx(np.sqrt(2 * sol.gap / 0.5))
    assert sol.solver_stats["joint_diameter"] == pytest.approx(4.0)  # D sqrt(m + 1)
    assert sol.solver_stats["algorithm_gap"] <= 0.075 * (1 + 1e-6)  # 3 alpha / 4


def test_plain_solve_on_E1d_brackets_the_closed_form():
    sol = e1d_oracle().solve(regularization=0.5, center=[0.0], accuracy=0.05)
    assert sol.lower <= ERM_OPT <= sol.upper and sol.gap <= 0.05
    assert 0.0 <= erm_objective(sol.w[0]) - ERM_OPT <= sol.gap


def _agree(sol, ref, problem, lam, C=None, localize=None):
    """``sol`` (Algorithm 3) against ``ref`` (interior point, certified to ~1e-9)."""
    assert sol.lower <= ref.upper + 1e-9 and ref.lower <= sol.upper + 1e-9
    assert np.linalg.norm(sol.w - ref.w) <= sol.distance_bound + ref.distance_bound
    # the point Algorithm 3 certified is within its gap of the optimum, by dpcvx's IPM values
    reg = lam / 2 * float(np.sum(sol.w**2))
    if C is None:
        value = float(np.mean(problem.declaration.loss_values(sol.w))) + reg
    else:
        value = float(np.mean(problem.lipschitz_extension(C).evaluate(sol.w).upper)) + reg
    assert value - ref.lower <= sol.gap + 1e-8


def test_extension_solve_agrees_with_the_interior_point_certificate():
    oracle, problem = pair_2d()
    ref = problem.lipschitz_extension(1.0).solve(0.5, center=np.zeros(2))
    sol = oracle.solve(0.5, center=np.zeros(2), accuracy=0.2, extension=1.0)
    assert sol.gap <= 0.2
    _agree(sol, ref, problem, 0.5, C=1.0)


def test_localized_extension_solve_agrees_and_stays_in_W0():
    oracle, problem = pair_2d()
    free = problem.lipschitz_extension(1.0).solve(0.5, center=np.zeros(2))
    # a ball away from the unconstrained minimizer, so that W0's boundary is active
    direction = free.w / np.linalg.norm(free.w)
    localize = (-0.6 * direction, 0.3)
    ref = problem.lipschitz_extension(1.0).solve(0.5, center=np.zeros(2), localize=localize)
    assert ref.lower > free.upper + 0.1  # the restriction matters
    sol = oracle.solve(0.5, center=np.zeros(2), accuracy=0.2, extension=1.0, localize=localize)
    w0_domain = problem.lipschitz_extension(1.0).localized_domain(*localize)
    assert w0_domain.contains(sol.w)  # exactly in W0 (digest pitfall P4)
    assert sol.solver_stats["joint_diameter"] == pytest.approx(
        np.sqrt(4 * 2.0**2 + 0.6**2), rel=1e-9
    )  # sqrt(m D^2 + min(D, 2r)^2)
    assert sol.lower <= ref.upper + 1e-9 and ref.lower <= sol.upper + 1e-9
    assert np.linalg.norm(sol.w - ref.w) <= sol.distance_bound + ref.distance_bound


def test_plain_solve_agrees_with_the_interior_point_certificate():
    oracle, problem = pair_2d()
    ref = problem.solve(0.5, center=np.zeros(2))
    sol = oracle.solve(0.5, center=np.zeros(2), accuracy=0.05)
    _agree(sol, ref, problem, 0.5)


def test_max_iter_raises_with_a_message():
    with pytest.raises(CertificationError, match="max_iter"):
        e1d_oracle().solve(0.5, [0.0], 1e-3, extension=1.0, max_iter=50)


# --------------------------------------------------------------------------- private releases
def test_double_output_perturbation_end_to_end():
    problem = e1d_oracle()
    mech = dpcvx.DoubleOutputPerturbation(C=1.0, regularization=1e-3)
    plan = mech.plan(
        n=3, d=1, center=np.zeros(1), diameter=problem.diameter, epsilon=1.0, delta=0.0
    )
    # the tight accuracy 0.05^2 C^2 / (2 lam n^2) is large only because lam n^2 is tiny
    assert plan.accuracy == pytest.approx(0.05**2 / (2 * 1e-3 * 9))
    res = problem.solve_private(mech, epsilon=1.0, rng=0)
    assert res.seeded and res.epsilon == 1.0 and res.delta == 0.0
    assert problem.domain.contains(res.w)
    assert res.ledger.total().epsilon == pytest.approx(1.0)
    assert len(res.certificates) == 2
    assert res.detail["extension_C"] == 1.0
    again = problem.solve_private(mech, epsilon=1.0, rng=0)
    np.testing.assert_array_equal(res.w, again.w)


def test_output_perturbation_on_the_plain_loss():
    problem = e1d_oracle()
    mech = dpcvx.OutputPerturbation(lipschitz=3.0, regularization=0.5, accuracy=0.05)
    res = problem.solve_private(mech, epsilon=1.0, rng=1)
    assert problem.domain.contains(res.w) and res.certificates[0].accuracy == 0.05


def test_localized_double_output_perturbation_runs_unchanged():
    rng = np.random.default_rng(0)
    X = rng.standard_t(3, 8)
    w = cp.Variable(1)
    problem = OracleProblem(
        absolute_value,
        absolute_subgradient,
        {"x": X, "y": 0.3 * X + 0.1 * rng.normal(size=8)},
        w,
        dpcvx.domains.box(w, -1.0, 1.0),
    )
    mech = dpcvx.LocalizedDoubleOutputPerturbation(
        k=2, moment=10.0, blocks=1, base_regularization=1e-5
    )
    res = problem.solve_private(mech, epsilon=1.0, rng=0)
    assert problem.domain.contains(res.w)
    assert res.ledger.total().epsilon == pytest.approx(1.0)
    assert len(res.certificates) == 2 * len(res.detail["block_sizes"])


def test_a_failed_private_solve_releases_nothing_and_keeps_the_budget_spent():
    problem = e1d_oracle(max_iter=5)
    accountant = dpcvx.Accountant(2.0)
    mech = dpcvx.DoubleOutputPerturbation(C=1.0, regularization=0.5)
    with pytest.raises(CertificationError) as info:
        problem.solve_private(mech, epsilon=1.0, rng=0, accountant=accountant)
    assert "max_iter" in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert accountant.ledger.total().epsilon == pytest.approx(1.0)  # spent
    # the text is fixed: another failing dataset gives the same message
    w = cp.Variable(1)
    other = OracleProblem(
        absolute_value,
        absolute_subgradient,
        {"x": 7 * X1, "y": -Y1},
        w,
        dpcvx.domains.box(w, -1.0, 1.0),
        max_iter=5,
    )
    with pytest.raises(CertificationError) as again:
        other.solve_private(mech, epsilon=1.0, rng=0)
    assert str(again.value) == str(info.value)


def test_a_mechanism_solver_is_rejected_before_anything_is_spent():
    accountant = dpcvx.Accountant(1.0)
    mech = dpcvx.DoubleOutputPerturbation(C=1.0, regularization=0.5, solver="CLARABEL")
    with pytest.raises(InvalidParameterError, match="solver"):
        e1d_oracle().solve_private(mech, epsilon=1.0, rng=0, accountant=accountant)
    assert accountant.ledger.total().epsilon == 0.0


def test_release_context_blocks_and_values():
    problem = e1d_oracle()
    context = problem.release_context(extension=1.0, solver=None)
    assert (context.n, context.d) == (3, 1) and context.domain is problem.domain
    values = context.loss_values(np.array([[0.0], [1 / 3]]))
    np.testing.assert_allclose(values, [[1.0, 0.2, 4.0], [0.0, 1 / 30, 14 / 3]])
    np.testing.assert_allclose(context.loss_values([[0.0]], indices=[2, 0]), [[4.0, 1.0]])
    # a block solve uses exactly that block's rows
    block = context.solver(indices=[0, 2])(0.5, np.zeros(1), 0.2)
    w = cp.Variable(1)
    alone = OracleProblem(
        absolute_value,
        absolute_subgradient,
        {"x": X1[[0, 2]], "y": Y1[[0, 2]]},
        w,
        dpcvx.domains.box(w, -1.0, 1.0),
    )
    ref = alone.solve(0.5, [0.0], 0.2, extension=1.0)
    np.testing.assert_array_equal(block.w, ref.w)
    # projections: onto W, and onto W0 = W intersect B(c, r) (Lemma C.6)
    assert context.project(np.array([3.0]))[0] == 1.0
    out = context.project(np.array([-3.0]), localize=(np.array([0.9]), 0.5), xi=1e-9)
    assert 0.4 <= out[0] <= 0.4 + 1e-9


# --------------------------------------------------------------------------- bad input
def test_bad_inputs_raise_typed_errors():
    w = cp.Variable(1)
    box = dpcvx.domains.box(w, -1.0, 1.0)
    data = {"x": X1, "y": Y1}
    with pytest.raises(ModelingError, match="callable"):
        OracleProblem("abs", absolute_subgradient, data, w, box)
    with pytest.raises(DataError, match="dict"):
        OracleProblem(absolute_value, absolute_subgradient, [X1, Y1], w, box)
    with pytest.raises(DataError, match="same number"):
        OracleProblem(absolute_value, absolute_subgradient, {"x": X1, "y": Y1[:2]}, w, box)
    with pytest.raises(DataError, match="NaN"):
        OracleProblem(absolute_value, absolute_subgradient, {"x": X1, "y": [1, np.nan, 0]}, w, box)
    with pytest.raises(DataError, match="names"):
        OracleProblem(absolute_value, absolute_subgradient, {1: X1}, w, box)
    with pytest.raises(ModelingError, match="shape"):
        OracleProblem(lambda W, d: np.zeros(5), absolute_subgradient, data, w, box)
    with pytest.raises(ModelingError, match="shape"):
        OracleProblem(absolute_value, lambda W, d: np.zeros(len(W)), data, w, box)
    with pytest.raises(ModelingError, match="exact Euclidean projection"):
        OracleProblem(
            absolute_value, absolute_subgradient, data, w, [cp.exp(w) <= 2.0, w >= -1.0]
        )  # a general set: no exact projection
    with pytest.raises(ModelingError, match="compact"):
        OracleProblem(absolute_value, absolute_subgradient, data, w, [])
    with pytest.raises(InvalidParameterError, match="max_iter"):
        OracleProblem(absolute_value, absolute_subgradient, data, w, box, max_iter=0)
    problem = e1d_oracle()
    with pytest.raises(InvalidParameterError, match="accuracy"):
        problem.solve(0.5, accuracy=0.0)
    with pytest.raises(InvalidParameterError, match="center"):
        problem.solve(0.5, center=[0.0, 1.0])


def test_properties():
    problem = e1d_oracle()
    assert (problem.n, problem.d) == (3, 1)
    assert problem.diameter == pytest.approx(2.0)
    with pytest.raises(ValueError):
        problem.data["x"][0] = 1.0  # read-only


# --------------------------------------------------------------------------- Theorem D.4
def test_structured_solve_on_E1d():
    ext = e1d_problem().lipschitz_extension(1.0)
    sol = structured_solve(ext, 0.5, [0.0], 0.3)
    # T = ceil((4 D L / alpha)^2) with L = C + lam max|w - w0| = 1.5 and D = 2 (+ rounding)
    assert sol.solver_stats["lipschitz"] == pytest.approx(1.5, rel=1e-14)
    assert (
        sol.solver_stats["iterations"]
        == int(np.ceil((4 * ext.problem.diameter * 1.5 / 0.3) ** 2))
        in (1600, 1601)
    )
    assert sol.gap <= 0.3 and sol.lower <= EXT_OPT <= sol.upper
    assert 0.0 <= extension_objective(sol.w[0]) - EXT_OPT <= sol.gap
    assert abs(sol.w[0] - 1 / 3) <= sol.distance_bound


def test_structured_solve_over_a_localized_domain():
    ext = e1d_problem().lipschitz_extension(1.0)
    localize = (np.array([-0.8]), 0.5)  # W0 = [-1, -0.3]: the minimizer over W0 is -0.3
    sol = structured_solve(ext, 0.5, [0.0], 0.5, localize=localize)
    assert -1.0 <= sol.w[0] <= -0.3
    assert 0.0 <= extension_objective(sol.w[0]) - extension_objective(-0.3) <= sol.gap
    assert sol.solver_stats["diameter"] == pytest.approx(1.0, rel=1e-9)  # min(D, 2r)


def test_structured_solve_rejects_bad_input():
    with pytest.raises(InvalidParameterError, match="LipschitzExtension"):
        structured_solve(e1d_problem(), 0.5, None, 0.3)
    with pytest.raises(InvalidParameterError, match="accuracy"):
        structured_solve(e1d_problem().lipschitz_extension(1.0), 0.5, None, -1.0)
    w = cp.Variable(1)
    x = cp.Parameter(1)
    poly = dpcvx.Problem(
        cp.abs(x @ w), w, {x: X1[:, None]}, [cp.exp(w) <= 2.0, w >= -1.0]
    )  # general: no exact projection
    with pytest.raises(ModelingError, match="exact Euclidean projection"):
        structured_solve(poly.lipschitz_extension(1.0), 0.5, None, 0.3)


def test_structured_solve_refuses_a_public_iteration_count_above_the_cap():
    ext = e1d_problem().lipschitz_extension(1.0)
    calls = []
    ext.evaluate = lambda *a, **k: calls.append(1)  # must never be reached
    with pytest.raises(InvalidParameterError, match="T = ceil"):
        structured_solve(ext, 0.5, None, 1e-3, max_iter=10**6)
    assert not calls
