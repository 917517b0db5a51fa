"""The public Problem (dpcvx.problem): properties, validation of solve(), projection, and the
release contract of solve_private (validate and plan first, reserve budget before the data is
touched, keep it spent on failure, release nothing uncertified)."""

from __future__ import annotations

import dataclasses
import math

import cvxpy as cp
import numpy as np
import pytest
from catalogue import CATALOGUE, by_name, objective

import dpcvx
from dpcvx import CertificationError, InvalidParameterError, PrivacyBudgetError


@pytest.fixture
def hinge():
    rng = np.random.default_rng(0)
    n, d = 40, 3
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))  # ||x|| <= 1: L = 1
    Y = np.sign(X @ np.array([1.0, -0.5, 0.2]) + 0.2 * rng.normal(size=n))
    w = cp.Variable(d, name="w")
    x, y = cp.Parameter(d, name="x"), cp.Parameter(name="y")
    problem = dpcvx.Problem(
        dpcvx.losses.hinge(x @ w, y), w, data={x: X, y: Y}, domain=dpcvx.domains.l2_ball(w, 1.0)
    )
    return problem, X, Y


def test_properties(hinge):
    problem, X, Y = hinge
    assert problem.n == 40 and problem.d == 3
    assert problem.diameter == pytest.approx(2.0, rel=1e-14)
    assert problem.diameter >= 2.0
    np.testing.assert_array_equal(problem.domain.center, np.zeros(3))
    assert problem.declaration.n == 40


def test_certified_solution_is_a_frozen_dataclass_with_every_field(hinge):
    problem, _, _ = hinge
    sol = problem.solve(regularization=0.1)
    assert isinstance(sol, dpcvx.CertifiedSolution)
    names = {f.name for f in dataclasses.fields(sol)}
    assert {"w", "upper", "lower", "gap", "distance_bound", "solver_stats"} <= names
    with pytest.raises(dataclasses.FrozenInstanceError):
        sol.gap = 0.0
    assert "certified" in str(sol)
    assert sol.solver_stats["solver"] == "arrowhead IPM"  # the hinge loss's own rung
    assert "certify_seconds" in sol.solver_stats


def test_hinge_helper_matches_numpy(hinge):
    problem, X, Y = hinge
    sol = problem.solve(regularization=0.2, center=np.array([0.1, 0.0, 0.0]))
    F = np.mean(np.maximum(0, 1 - Y * (X @ sol.w))) + 0.1 * np.sum((sol.w - [0.1, 0, 0]) ** 2)
    assert F <= sol.upper + 1e-14
    assert sol.upper - F < 1e-9


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"regularization": -1.0}, "regularization"),
        ({"regularization": float("nan")}, "regularization"),
        ({"regularization": float("inf")}, "regularization"),
        ({"regularization": "0.1"}, "regularization"),
        ({"regularization": True}, "regularization"),
        ({"accuracy": 0.0}, "accuracy"),
        ({"accuracy": -1e-3}, "accuracy"),
        ({"accuracy": float("nan")}, "accuracy"),
        ({"center": np.zeros(4)}, "center"),
        ({"center": [np.nan, 0.0, 0.0]}, "center"),
        ({"solver": "MOSEK"}, "solver"),
    ],
)
def test_solve_rejects_bad_parameters(hinge, kwargs, name):
    problem, _, _ = hinge
    with pytest.raises(InvalidParameterError, match=name):
        problem.solve(**kwargs)


def test_solver_names_are_case_insensitive(hinge):
    problem, _, _ = hinge
    a = problem.solve(regularization=0.1, solver="ecos")
    b = problem.solve(regularization=0.1, solver="ECOS")
    np.testing.assert_allclose(a.w, b.w)


def test_repeated_solves_are_reproducible(hinge):
    problem, _, _ = hinge
    a = problem.solve(regularization=0.3)
    b = problem.solve(regularization=0.3)
    np.testing.assert_array_equal(a.w, b.w)
    assert a.upper == b.upper and a.lower == b.lower


def test_zero_regularization_has_no_distance_bound(hinge):
    problem, _, _ = hinge
    sol = problem.solve(regularization=0.0)
    assert sol.distance_bound == math.inf
    assert sol.gap >= 0


@pytest.mark.parametrize(
    "name",
    [
        "mean/ball-outside",
        "mean/box",
        "mean/simplex",
        "logistic/l1_ball(d=3,r=1.3)",
        "logistic/ellipsoid(d=3)",
        "logistic/polytope(d=3,m=8)",
    ],
)
def test_project_lands_in_the_domain(name):
    ref = by_name(name)
    problem, _, _ = ref.problem()
    rng = np.random.default_rng(1)
    for p in rng.normal(size=(5, ref.d)) * 4:
        q = problem.project(p)
        assert ref.domain.contains(q, 0.0)
    # a point strictly inside is (nearly) left alone
    if not ref.domain.equality:
        inside = 0.5 * ref.point + 0.5 * ref.domain.points.mean(axis=0)
        assert ref.domain.contains(inside, -1e-3)
        np.testing.assert_allclose(problem.project(inside), inside, atol=1e-6)


def test_project_is_the_euclidean_projection_on_a_ball(hinge):
    problem, _, _ = hinge
    p = np.array([3.0, 4.0, 0.0])
    np.testing.assert_allclose(problem.project(p), p / 5.0, rtol=1e-12)
    assert np.linalg.norm(problem.project(p)) <= 1.0


# ------------------------------------------------------------------------------ solve_private


def test_solve_private_reserves_and_releases_a_point_of_the_domain(hinge):
    problem, _, _ = hinge
    mech = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=0.1)
    acc = dpcvx.Accountant(2.0)
    res = problem.solve_private(mech, epsilon=1.0, rng=3, accountant=acc)
    assert isinstance(res, dpcvx.PrivateResult)
    assert res.epsilon == 1.0 and res.delta == 0.0 and res.seeded
    assert np.linalg.norm(res.w) <= 1.0
    assert len(acc.ledger) == 1 and acc.spent.epsilon == pytest.approx(1.0)
    (cert,) = res.certificates
    assert cert.accuracy == res.detail["accuracy"]
    # same seed, same release
    again = problem.solve_private(mech, epsilon=1.0, rng=3)
    np.testing.assert_array_equal(res.w, again.w)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon": -1.0},
        {"epsilon": 0.0},
        {"epsilon": float("inf")},
        {"epsilon": 1.0, "delta": 1.0},
        {"epsilon": 1.0, "delta": -0.1},
        {"epsilon": 1.0, "rng": -3},
        {"epsilon": 1.0, "rng": "seed"},
    ],
)
def test_bad_private_inputs_spend_nothing(hinge, kwargs):
    problem, _, _ = hinge
    acc = dpcvx.Accountant(5.0, 1e-5)
    mech = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=0.1)
    with pytest.raises(InvalidParameterError):
        problem.solve_private(mech, accountant=acc, **kwargs)
    assert len(acc.ledger) == 0


def test_bad_mechanism_or_accountant_spends_nothing(hinge):
    problem, _, _ = hinge
    with pytest.raises(InvalidParameterError, match="mechanism"):
        problem.solve_private(object(), epsilon=1.0)
    mech = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=0.1)
    with pytest.raises(InvalidParameterError, match="accountant"):
        problem.solve_private(mech, epsilon=1.0, accountant={"epsilon": 1.0})
    wrong_center = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=0.1, center=np.zeros(5))
    acc = dpcvx.Accountant(1.0)
    with pytest.raises(InvalidParameterError, match="center"):
        problem.solve_private(wrong_center, epsilon=1.0, accountant=acc)
    assert len(acc.ledger) == 0


def test_unaffordable_release_touches_no_data(hinge, monkeypatch):
    problem, _, _ = hinge
    import dpcvx.problem as problem_mod

    def no_solve(*args, **kwargs):
        raise AssertionError("the data was touched before the budget was reserved")

    monkeypatch.setattr(problem_mod, "certified_solve", no_solve)
    acc = dpcvx.Accountant(0.5)
    mech = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=0.1)
    with pytest.raises(PrivacyBudgetError):
        problem.solve_private(mech, epsilon=1.0, accountant=acc)
    assert len(acc.ledger) == 0


def test_certification_failure_keeps_the_budget_spent_and_releases_nothing(hinge):
    problem, _, _ = hinge
    acc = dpcvx.Accountant(1.0)
    mech = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=0.1, accuracy=1e-300)
    with pytest.raises(CertificationError):
        problem.solve_private(mech, epsilon=0.6, accountant=acc, rng=0)
    assert len(acc.ledger) == 1
    assert acc.spent.epsilon == pytest.approx(0.6)
    with pytest.raises(PrivacyBudgetError):
        problem.solve_private(
            dpcvx.OutputPerturbation(lipschitz=1.0, regularization=0.1),
            epsilon=0.6,
            accountant=acc,
            rng=0,
        )


def test_budget_is_reserved_before_the_solve(hinge, monkeypatch):
    problem, _, _ = hinge
    import dpcvx.problem as problem_mod

    acc = dpcvx.Accountant(1.0)
    seen = []
    real = problem_mod.certified_solve

    def spy(*args, **kwargs):
        seen.append(len(acc.ledger))
        return real(*args, **kwargs)

    monkeypatch.setattr(problem_mod, "certified_solve", spy)
    problem.solve_private(
        dpcvx.OutputPerturbation(lipschitz=1.0, regularization=0.1),
        epsilon=1.0,
        accountant=acc,
        rng=1,
    )
    assert seen == [1]


@pytest.mark.parametrize(
    "ref", [r for r in CATALOGUE if r.name.startswith("logistic/")][:3], ids=repr
)
def test_private_release_uses_a_certified_solve(ref):
    problem, _, _ = ref.problem()
    mech = dpcvx.OutputPerturbation(lipschitz=5.0, regularization=0.5, center=ref.center)
    res = problem.solve_private(mech, epsilon=2.0, rng=0)
    (cert,) = res.certificates
    # the private result states only public facts about its solve ...
    assert not hasattr(cert, "w") and not hasattr(cert, "lower") and not hasattr(cert, "gap")
    assert cert.accuracy == res.detail["accuracy"]
    assert cert.distance_bound == pytest.approx(np.sqrt(2 * cert.accuracy / 0.5))
    # ... and the same certified solve, done non-privately, meets that accuracy
    sol = problem.solve(regularization=0.5, center=ref.center, accuracy=cert.accuracy)
    F = objective(ref.loss, ref.data, 0.5, ref.center, sol.w)
    assert sol.lower <= F <= sol.upper
    assert sol.gap <= cert.accuracy
    assert ref.domain.contains(res.w, 0.0)


def test_the_conic_template_is_compiled_only_when_the_ladder_needs_it():
    """A smooth loss certified on Newton's path never compiles the conic template (most of a
    small solve's time); a loss the conic program must solve compiles it then, once."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y_lab = np.sign(X @ np.ones(3) + 0.1)
    w = cp.Variable(3)
    x = cp.Parameter(3)
    y = cp.Parameter()
    smooth = dpcvx.Problem(cp.logistic(-y * (x @ w)), w, {x: X, y: y_lab}, [cp.norm(w) <= 10])
    sol = smooth.solve(regularization=0.1)
    assert sol.solver_stats["solver"] == "Newton"
    assert smooth._templates == {}
    ext = smooth.lipschitz_extension(1.0).solve(regularization=0.1)
    assert ext.gap <= 1e-6 and smooth._templates == {}
    # a loss none of the structured rungs takes (the sup norm of w beside an absolute loss)
    # goes to the conic program: compiled there, then reused
    conic = dpcvx.Problem(
        cp.abs(x @ w - y) + 0.1 * cp.norm_inf(w),
        w,
        {x: X, y: y_lab},
        [cp.norm(w) <= 10],
    )
    first = conic.solve(regularization=0.1)
    assert set(conic._templates) == {None}
    assert conic.solve(regularization=0.1).upper == pytest.approx(first.upper, rel=1e-6)
