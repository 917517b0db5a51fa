"""The localized domain W0 = W ∩ B(c, r): Lemma C.6 projection, the certificate's lower bound,
exact feasibility and its conic rows, against closed forms and high-accuracy CVXPY solves."""

import math

import cvxpy as cp
import numpy as np
import pytest

from dpcvx.compilation.template import compile_domain, localized_block
from dpcvx.errors import InvalidParameterError
from dpcvx.modeling.domains import Domain
from dpcvx.modeling.localized import LocalizedDomain, inexact_projection


def _domain(kind: str, d: int) -> Domain:
    w = cp.Variable(d)
    cons = {
        "l2": [cp.norm(w, 2) <= 1],
        "box": [w >= -1, w <= 1],
        "l1": [cp.norm(w, 1) <= 1.5],
        "simplex": [w >= 0, cp.sum(w) == 1],
        "ellipsoid": [cp.sum_squares(np.diag(np.arange(1.0, d + 1)) @ w) <= 1],
    }[kind]
    return Domain(w, cons)


def _reference_projection(dom: Domain, c, r, y) -> np.ndarray:
    v = cp.Variable(dom.d)
    from dpcvx.modeling._expressions import substitute

    cons = [substitute(k, dom.variable, v) for k in dom.constraints] + [cp.norm(v - c) <= r]
    cp.Problem(cp.Minimize(cp.sum_squares(v - y)), cons).solve(
        solver=cp.CLARABEL, tol_gap_abs=1e-9, tol_gap_rel=1e-9, tol_feas=1e-9
    )
    return np.asarray(v.value, float)


def test_lemma_c6_one_dimension_closed_form():
    w = cp.Variable(1)
    dom = Domain(w, [w >= -1, w <= 1])
    xi = 1e-6
    point, calls = inexact_projection(np.array([-3.0]), dom.project, np.array([0.9]), 0.5, xi)
    # Pi_W0(-3) = 0.4 (W0 = [0.4, 1]); N = ceil(log2(1 + 3.9^2/(0.5 xi))) bisection steps
    steps = math.ceil(math.log2(1 + 3.9**2 / (0.5 * xi)))
    assert steps == 25
    assert calls <= steps + 2
    assert 0.4 <= point[0] <= 0.4 + xi


@pytest.mark.parametrize("xi", [1e-3, 1e-6, 1e-9])
def test_lemma_c6_disc_with_both_constraints_active(xi):
    w = cp.Variable(2)
    dom = Domain(w, [cp.norm(w, 2) <= 1])
    c, r = np.array([0.8, 0.0]), 0.5
    loc = LocalizedDomain(dom, c, r)
    exact = np.array([139 / 160, math.sqrt(6279) / 160])  # intersection of the two circles
    point, calls = inexact_projection(np.array([3.0, 3.0]), dom.project, c, r, xi)
    R = np.linalg.norm(np.array([3.0, 3.0]) - c)
    assert calls <= math.ceil(math.log2(1 + R**2 / (r * xi))) + 2
    assert np.linalg.norm(point - exact) <= xi
    out = loc.make_feasible(loc.project(np.array([3.0, 3.0]), xi))
    assert loc.contains(out)
    assert np.linalg.norm(out - exact) <= xi + 1e-12


def test_lemma_c6_only_the_ball_active():
    w = cp.Variable(2)
    dom = Domain(w, [cp.norm(w, 2) <= 1])
    c, r, y = np.array([0.8, 0.0]), 0.5, np.array([0.0, 2.0])
    exact = c + r * (y - c) / np.linalg.norm(y - c)
    point, _ = inexact_projection(y, dom.project, c, r, 1e-9)
    assert np.allclose(exact, [0.6143047, 0.4642383], atol=1e-7)
    assert np.linalg.norm(point - exact) <= 1e-9


@pytest.mark.parametrize("kind", ["l2", "box", "l1", "simplex"])
def test_lemma_c6_random_points_against_a_high_accuracy_projection(kind):
    rng = np.random.default_rng(3)
    d = 5
    dom = _domain(kind, d)
    for _ in range(5):
        c = dom.make_feasible(dom.project(rng.normal(size=d)))
        r = float(rng.uniform(0.05, 0.6))
        y = rng.normal(scale=2.0, size=d)
        xi = 1e-4
        loc = LocalizedDomain(dom, c, r)
        out = loc.make_feasible(loc.project(y, xi))
        ref = _reference_projection(dom, c, r, y)
        assert loc.contains(out)
        # an interior-point reference is accurate to about sqrt(its gap) in the point
        assert np.linalg.norm(out - ref) <= xi + 2e-5


def test_lemma_c6_box_against_an_independent_kkt_root():
    """For a box, Pi_W0(y) = clip((y + mu c)/(1 + mu)) at the root mu of
    ||clip(...) - c|| = r (scipy's brentq to machine precision): xi = 1e-8 is checked."""
    from scipy.optimize import brentq

    rng = np.random.default_rng(11)
    dom = _domain("box", 5)
    for _ in range(5):
        c = rng.uniform(-0.9, 0.9, size=5)
        r = float(rng.uniform(0.05, 0.5))
        y = rng.normal(scale=3.0, size=5)

        def at(mu, y=y, c=c):
            return np.clip((y + mu * c) / (1 + mu), -1, 1)

        if np.linalg.norm(at(0.0) - c) <= r:
            ref = at(0.0)
        else:
            mu = brentq(
                lambda m, c=c, r=r: np.linalg.norm(at(m) - c) - r,
                0.0,
                np.linalg.norm(y - c) / r,
                xtol=1e-15,
                rtol=4 * np.finfo(float).eps,
            )
            ref = at(mu)
        out = LocalizedDomain(dom, c, r).project(y, 1e-8)
        assert np.linalg.norm(out - ref) <= 1e-8 + 1e-12


@pytest.mark.parametrize("kind", ["l2", "box", "l1", "simplex", "ellipsoid"])
def test_min_linear_quadratic_is_a_valid_and_tight_lower_bound(kind):
    rng = np.random.default_rng(5)
    d = 3
    dom = _domain(kind, d)
    for trial in range(6):
        direction = rng.normal(size=d)
        c = dom.make_feasible(dom.project(0.9 * direction / np.linalg.norm(direction)))
        r = 0.3 if trial % 2 == 0 else 2.0
        loc = LocalizedDomain(dom, c, r)
        s = rng.normal(scale=3.0, size=d)
        lam = float(rng.uniform(0.01, 5.0))
        w0 = rng.normal(size=d)
        v = cp.Variable(d)
        from dpcvx.modeling._expressions import substitute

        cons = [substitute(k, dom.variable, v) for k in dom.constraints]
        cons.append(cp.norm(v - c) <= r)
        prob = cp.Problem(cp.Minimize(s @ v + lam / 2 * cp.sum_squares(v - w0)), cons)
        prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-9, tol_gap_rel=1e-9, tol_feas=1e-9)
        bound = loc.min_linear_quadratic(s, lam, w0, hint=np.asarray(v.value))
        assert bound <= prob.value + 1e-9
        if kind != "ellipsoid":  # catalogue bases: exact up to rounding
            assert bound >= prob.value - 1e-7


def test_make_feasible_lands_in_both_sets():
    rng = np.random.default_rng(7)
    for kind in ("l2", "box", "ellipsoid"):
        dom = _domain(kind, 4)
        c = dom.make_feasible(dom.project(rng.normal(size=4) * 0.3))
        loc = LocalizedDomain(dom, c, 0.2)
        assert loc.contains(loc.interior)
        for _ in range(20):
            out = loc.make_feasible(rng.normal(size=4) * 3)
            assert loc.contains(out) and dom.contains(out)
        assert loc.diameter <= 0.4 * (1 + 1e-12)


def test_center_must_lie_in_the_domain():
    dom = _domain("l2", 3)
    with pytest.raises(InvalidParameterError, match="must lie in the domain"):
        LocalizedDomain(dom, np.array([2.0, 0, 0]), 0.5)
    with pytest.raises(InvalidParameterError):
        LocalizedDomain(dom, np.zeros(3), 0.0)
    with pytest.raises(InvalidParameterError, match="shape"):
        LocalizedDomain(dom, np.zeros(2), 0.5)


def test_localized_block_matches_cvxpy_compilation_of_the_intersection():
    """The hand-built rows describe the same set as CVXPY's compilation of W ∩ B(c, r)."""
    w = cp.Variable(3)
    from dpcvx.modeling.declaration import Declaration

    x = cp.Parameter(3)
    decl = Declaration(cp.abs(x @ w), w, {x: np.ones((2, 3))}, [w >= -1, w <= 1])
    c, r = np.array([0.5, -0.2, 0.1]), 0.4
    block = localized_block(compile_domain(decl), c, r)
    rng = np.random.default_rng(0)
    for _ in range(200):
        u = rng.uniform(-1.2, 1.2, size=3)
        s = block.b - block.A @ u  # the slack; membership: each cone group holds
        z, nn = block.cones.zero, block.cones.nonneg
        ok = np.all(np.abs(s[:z]) <= 1e-12) and np.all(s[z : z + nn] >= -1e-12)
        start = z + nn
        for size in block.cones.soc:
            seg = s[start : start + size]
            ok = ok and seg[0] >= np.linalg.norm(seg[1:]) - 1e-12
            start += size
        inside = np.all(np.abs(u) <= 1) and np.linalg.norm(u - c) <= r
        assert bool(ok) == bool(inside)
