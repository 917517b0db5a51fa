"""Power spellings the certificate understands: a nonnegative data-weighted maximum with a
power of ``pos`` (``plus * maximum(a - w, power(pos(w - a), k))``, paper 001's sharp family),
whose tied pieces' tangent cuts are mixed at the kink, and ``power(norm(E, 2), p)``, a
``norm2_power`` term with a closed-form conjugate and a Lipschitz bound. Certified gaps,
brackets around independent Clarabel optima, and validity under garbage points and duals."""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.certification.certificate import certify
from dpcvx.certification.extension import certify_extension
from dpcvx.certification.lipschitz import lipschitz_bounds
from dpcvx.compilation.stamp import stamp
from dpcvx.modeling.gradients import per_example_gradients

A = 0.1
LAM = 1e-3
D_UC = 5


def _reference(objective, constraints):
    ref = cp.Problem(cp.Minimize(objective), constraints)
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return float(ref.value)


def _sharp(k, n, seed=0, lam=LAM):
    """Paper 001's sharp family (benchmarks/bench_growth.py SharpCase), d = 1, W = [-1, 1]."""
    rng = np.random.default_rng(seed)
    s = np.where(rng.random(n) < 0.6, 1.0, -1.0)
    w = cp.Variable(1)
    plus = cp.Parameter(nonneg=True)
    minus = cp.Parameter(nonneg=True)
    loss = plus * cp.maximum(A - w, cp.power(cp.pos(w - A), k)) + minus * cp.maximum(
        w + A, cp.power(cp.pos(-A - w), k)
    )
    P, M = (s == 1.0).astype(float), (s == -1.0).astype(float)
    problem = dpcvx.Problem(loss, w, {plus: P, minus: M}, dpcvx.domains.box(w, -1.0, 1.0))
    v = cp.Variable()
    obj = (
        float(P.mean()) * cp.maximum(A - v, cp.power(cp.pos(v - A), k))
        + float(M.mean()) * cp.maximum(v + A, cp.power(cp.pos(-A - v), k))
        + lam / 2 * cp.square(v)
    )
    return problem, _reference(obj, [v >= -1, v <= 1])


def _uniformly_convex(kappa, n, seed=0, lam=LAM):
    """benchmarks/bench_growth.py UniformlyConvexCase: unit ball of R^5."""
    rng = np.random.default_rng(seed)
    j = rng.integers(D_UC, size=n)
    sign = np.where(rng.random(n) < 0.75, 1.0, -1.0)
    S = np.zeros((n, D_UC))
    S[np.arange(n), j] = sign
    sigma = 2.0 ** (1.0 - kappa)
    w = cp.Variable(D_UC)
    s = cp.Parameter(D_UC)
    loss = (sigma / kappa) * cp.power(cp.norm(w, 2), kappa) + 0.5 * (s @ w)
    problem = dpcvx.Problem(loss, w, {s: S}, [cp.norm(w, 2) <= 1.0])
    v = cp.Variable(D_UC)
    obj = (
        (sigma / kappa) * cp.power(cp.norm(v, 2), kappa)
        + 0.5 * (S.mean(axis=0) @ v)
        + lam / 2 * cp.sum_squares(v)
    )
    return problem, _reference(obj, [cp.norm(v, 2) <= 1.0])


def _check(problem, f_star, d):
    sol = problem.solve(regularization=LAM, center=np.zeros(d), accuracy=1e-8)
    tol = 1e-9 * (1 + abs(f_star))
    assert sol.lower <= f_star + tol and f_star <= sol.upper + tol
    assert sol.gap <= 1e-8
    return sol


@pytest.mark.parametrize("n", [200, 5000])
@pytest.mark.parametrize("k", [1.5, 2.0, 3.0])
def test_weighted_maximum_with_a_power_of_pos_certifies(k, n):
    problem, f_star = _sharp(k, n)
    # generic terms, certified by tangent cuts mixed at the kink (0.04 to 0.24 before)
    assert [t.kind for t in problem.declaration.terms] == ["generic", "generic"]
    sol = _check(problem, f_star, 1)
    assert abs(float(sol.w[0]) - A) <= 1e-3


@pytest.mark.parametrize("n", [200, 5000])
@pytest.mark.parametrize("kappa", [1.5, 3.0, 4.0])
def test_power_of_a_norm_certifies(kappa, n):
    problem, f_star = _uniformly_convex(kappa, n)
    assert [t.kind for t in problem.declaration.terms] == ["norm2_power", "affine"]
    _check(problem, f_star, D_UC)


def test_private_releases_run():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for problem, _ in (_sharp(1.5, 2000), _uniformly_convex(3.0, 2000)):
            for mech in (
                dpcvx.OutputPerturbation(lipschitz=2.0, regularization=0.1),
                dpcvx.LocalizedDoubleOutputPerturbation(
                    k=4, moment=2.0, second_moment=2.0, progress=False
                ),
            ):
                assert np.all(np.isfinite(problem.solve_private(mech, epsilon=1.0, rng=0).w))


def test_norm_power_lipschitz_bound_dominates_the_gradients():
    rng = np.random.default_rng(5)
    for kappa in (1.5, 3.0, 4.0):
        problem, _ = _uniformly_convex(kappa, 50, seed=5)
        bounds = lipschitz_bounds(problem.declaration)
        assert np.all(np.isfinite(bounds))
        for _ in range(30):
            v = rng.normal(size=D_UC)
            v /= max(1.0, float(np.linalg.norm(v)))
            g = per_example_gradients(problem.declaration, v)
            assert np.all(np.linalg.norm(g, axis=1) <= bounds * (1 + 1e-12))


def _garbage(problem, f_star, d, seed, C=None):
    """Random or perturbed points, garbage or missing duals: lower <= F* every time."""
    rng = np.random.default_rng(seed)
    decl = problem.declaration
    n = decl.n
    template, block = problem._compiled(C)
    prog = stamp(
        template, block, template.theta(decl.derived_values(), n), d=d, lam=LAM, w0=np.zeros(d)
    )
    w_star = problem.solve(regularization=LAM, center=np.zeros(d)).w
    for trial in range(24):
        cand = (
            w_star + rng.normal(size=d) * 10.0 ** -rng.integers(1, 9)
            if trial < 12
            else rng.normal(size=d)
        )
        z = (
            None
            if trial % 4 == 0
            else rng.normal(size=prog.A.shape[0]) * rng.choice([1e-3, 1.0, 1e3, 1e8])
        )
        if trial % 3 == 2 and z is not None:
            z = -z
        if C is None:
            cert = certify(
                decl, cand, lam=LAM, w0=np.zeros(d), prog=None if z is None else prog, z=z
            )
        else:
            x = rng.normal(size=prog.A.shape[1])
            x[:d] = cand
            if trial % 2:  # copies y_i at the candidate (a kink) with garbage SOC duals
                x[d:] = np.resize(cand, x.size - d)
            if z is None:
                z = rng.normal(size=prog.A.shape[0])
            cert = certify_extension(decl, prog, x, z, C=C, lam=LAM, w0=np.zeros(d))
        tol = 1e-9 * (1 + abs(f_star))
        assert cert.lower <= f_star + tol, (trial, cert.lower, f_star)
        if C is None:
            vals = decl.loss_values(cert.w)
            excess = float(np.mean(vals)) + LAM / 2 * float(np.sum(cert.w**2)) - f_star
            assert excess <= cert.gap + tol, (trial, excess, cert.gap)


@pytest.mark.parametrize("k", [1.5, 3.0])
def test_weighted_maximum_certificate_is_valid_under_garbage(k):
    problem, f_star = _sharp(k, 200, seed=1)
    _garbage(problem, f_star, 1, seed=1)


@pytest.mark.parametrize("k", [1.5, 3.0])
def test_weighted_maximum_extension_certificate_is_valid_under_garbage(k):
    # C above every slope of the loss on W: f_C = f, so F* is the plain optimum
    problem, f_star = _sharp(k, 60, seed=2)
    _garbage(problem, f_star, 1, seed=2, C=10.0)


@pytest.mark.parametrize("kappa", [1.5, 3.0, 4.0])
def test_norm_power_certificate_is_valid_under_garbage(kappa):
    problem, f_star = _uniformly_convex(kappa, 200, seed=3)
    _garbage(problem, f_star, D_UC, seed=3)
