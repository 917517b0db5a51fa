"""``maximum`` of non-affine convex pieces (``maximum(square(r), x @ w)``): certified by
``sum_j mu_j (w_j (theta_j E_j - psi_j*(theta_j)) + b_j)`` (mu in the simplex), not by tangent
cuts, against independent whole-dataset CVXPY solves; valid under fault injection."""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.certification.certificate import certify
from dpcvx.certification.lipschitz import lipschitz_bounds
from dpcvx.compilation.stamp import stamp
from dpcvx.modeling.gradients import per_example_gradients

N, D, LAM = 50, 3, 0.1

CASES = {
    "max(square, affine)": (
        lambda e, u: cp.maximum(cp.square(e), u),
        lambda E, U: cp.maximum(cp.square(E), U),
    ),
    "max(abs, half square - 1)": (
        lambda e, u: cp.maximum(cp.abs(e), 0.5 * cp.square(u) - 1),
        lambda E, U: cp.maximum(cp.abs(E), 0.5 * cp.square(U) - 1),
    ),
    "max(logistic, huber)": (
        lambda e, u: cp.maximum(cp.logistic(u), cp.huber(e, 1.0)),
        lambda E, U: cp.maximum(cp.logistic(U), cp.huber(E, 1.0)),
    ),
    "max(2 square + 0.3, abs - 0.2, 0)": (
        lambda e, u: cp.maximum(2 * cp.square(e) + 0.3, cp.abs(u) - 0.2, 0),
        lambda E, U: cp.maximum(2 * cp.square(E) + 0.3, cp.abs(U) - 0.2, 0),
    ),
}


def _case(name, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    R = X @ np.full(D, 0.3) + 0.1 * rng.normal(size=N)
    term, whole = CASES[name]
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    problem = dpcvx.Problem(
        term(x @ w - y, x @ w), w, data={x: X, y: R}, domain=[cp.norm(w, 2) <= 1]
    )
    v = cp.Variable(D)
    ref = cp.Problem(
        cp.Minimize(cp.sum(whole(X @ v - R, X @ v)) / N + LAM / 2 * cp.sum_squares(v)),
        [cp.norm(v, 2) <= 1],
    )
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return rng, problem, float(ref.value), np.asarray(v.value, float)


@pytest.mark.parametrize("name", list(CASES))
def test_maximum_of_convex_pieces_is_certified_exactly(name):
    rng, problem, f_star, _ = _case(name)
    assert [t.kind for t in problem.declaration.terms] == ["max_terms"]
    sol = problem.solve(regularization=LAM, center=np.zeros(D), accuracy=1e-9)
    tol = 1e-9 * (1 + abs(f_star))
    assert sol.lower <= f_star + tol and f_star <= sol.upper + tol
    assert sol.gap <= 1e-9  # the tangent-cut path stopped near 6e-3 here
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpcvx.LipschitzClaimWarning)
        for mech in (
            dpcvx.OutputPerturbation(lipschitz=10.0, regularization=LAM),
            dpcvx.DoubleOutputPerturbation(k=4, moment=5.0, regularization=LAM),
        ):
            assert np.all(np.isfinite(problem.solve_private(mech, epsilon=1.0, rng=0).w))


@pytest.mark.parametrize("name", list(CASES))
def test_maximum_certificate_is_valid_under_fault_injection(name):
    rng, problem, f_star, w_star = _case(name, seed=1)
    decl = problem.declaration
    template, block = problem._compiled(None)
    prog = stamp(
        template, block, template.theta(decl.derived_values(), N), d=D, lam=LAM, w0=np.zeros(D)
    )
    for trial in range(20):
        cand = (
            w_star + rng.normal(size=D) * 10.0 ** -rng.integers(1, 9)
            if trial < 10
            else rng.normal(size=D)
        )
        z = (
            None
            if trial % 4 == 0
            else rng.normal(size=prog.A.shape[0]) * rng.choice([1e-3, 1.0, 1e3])
        )
        cert = certify(decl, cand, lam=LAM, w0=np.zeros(D), prog=None if z is None else prog, z=z)
        vals = decl.loss_values(cert.w)
        excess = float(np.mean(vals)) + LAM / 2 * float(np.sum(cert.w**2)) - f_star
        assert excess <= cert.gap + 1e-9 * (1 + abs(f_star)), (trial, excess, cert.gap)


@pytest.mark.parametrize("name", list(CASES))
def test_maximum_lipschitz_bound_dominates_the_gradients(name):
    rng, problem, _, _ = _case(name, seed=2)
    bounds = lipschitz_bounds(problem.declaration)
    for _ in range(30):
        v = rng.normal(size=D)
        v /= max(1.0, float(np.linalg.norm(v)))
        g = per_example_gradients(problem.declaration, v)
        assert np.all(np.linalg.norm(g, axis=1) <= bounds * (1 + 1e-12))


def test_the_stable_gap_runs_for_maximum_terms_and_ignores_huge_labels():
    """The stable gap of maximum(square(x.w - y), x.w), called directly (a silent fallback
    to the value-based bound cannot hide), is tight at the solver's point; with a label of
    100 the reported gap is the stable one, below upper - lower."""
    from dpcvx.certification.certificate import _term_duals
    from dpcvx.certification.stable import stable_gap
    from dpcvx.compilation.solvers import solve_program

    rng, problem, _, _ = _case("max(square, affine)", seed=3)
    decl = problem.declaration
    template, block = problem._compiled(None)
    prog = stamp(
        template, block, template.theta(decl.derived_values(), N), d=D, lam=LAM, w0=np.zeros(D)
    )
    raw = solve_program(prog, "CLARABEL", tight=True)
    point = problem.domain.make_feasible(raw.x[:D])
    direct = stable_gap(
        decl,
        point,
        _term_duals(decl, prog, raw.z),
        lam=LAM,
        w0=np.zeros(D),
        radius=1e-4,
        domain=problem.domain,
    )
    assert direct is not None and direct <= 1e-8
    w = cp.Variable(D)
    xp = cp.Parameter(D)
    yp = cp.Parameter()
    Xa = rng.normal(size=(N, D))
    R = Xa @ np.full(D, 0.3)
    R[0] = 1e2  # (a square of 1e3 and more is beyond what the solver resolves; private
    # releases take such an example out of the universe)
    big = dpcvx.Problem(
        cp.maximum(cp.square(xp @ w - yp), xp @ w),
        w,
        data={xp: Xa, yp: R},
        domain=[cp.norm(w, 2) <= 1],
    )
    sol = big.solve(regularization=LAM, accuracy=1e-8)
    assert sol.gap <= 1e-8 and sol.gap < sol.upper - sol.lower


def test_a_data_dependent_constant_inside_a_piece_is_not_one_public_offset():
    """maximum(square(x.w - y) + c, x.w) with c bound per example: the offset is data, so the
    term is not a max_terms term (it was baked in as one number); it is certified validly."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(30, D))
    R = X @ np.full(D, 0.3)
    Cs = rng.uniform(-1.0, 1.0, size=30)
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    c = cp.Parameter()
    c.value = 3.0  # a stale value must not matter
    problem = dpcvx.Problem(
        cp.maximum(cp.square(x @ w - y) + c, x @ w),
        w,
        data={x: X, y: R, c: Cs},
        domain=[cp.norm(w, 2) <= 1],
    )
    assert all(t.kind != "max_terms" for t in problem.declaration.terms)
    v = cp.Variable(D)
    ref = cp.Problem(
        cp.Minimize(
            cp.sum(cp.maximum(cp.square(X @ v - R) + Cs, X @ v)) / 30 + LAM / 2 * cp.sum_squares(v)
        ),
        [cp.norm(v, 2) <= 1],
    )
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    sol = problem.solve(regularization=LAM, center=np.zeros(D))
    assert sol.lower <= ref.value + 1e-9 <= sol.upper + 2e-9


def test_infinite_duals_give_a_valid_bound_not_an_error():
    rng, problem, f_star, w_star = _case("max(square, affine)", seed=5)
    decl = problem.declaration
    template, block = problem._compiled(None)
    prog = stamp(
        template, block, template.theta(decl.derived_values(), N), d=D, lam=LAM, w0=np.zeros(D)
    )
    for bad in (np.inf, np.nan, 1e300):
        cert = certify(
            decl, w_star, lam=LAM, w0=np.zeros(D), prog=prog, z=np.full(prog.A.shape[0], bad)
        )
        assert np.isfinite(cert.gap) and cert.lower <= f_star + 1e-9


# An affine piece and a square piece meeting at a kink where the optimum sits: many examples
# have both pieces active, where the square's derivative vanishes, so its split dual says
# nothing about its weight. The weights come from the affine piece's dual and the stationarity
# of the combined slope (it used to take one-hot weights on the affine piece: gap 0.24).
KINK_LAM = 0.17


def _kink_case(kind, d):
    n = 300
    rng = np.random.default_rng(0)
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    v = cp.Variable(d)
    if d == 1:
        X = np.where(rng.random(n) < 0.75, 1.0, -1.0)[:, None]
        Y = np.zeros(n)
    else:
        X = rng.normal(size=(n, d))
        Y = X @ np.full(d, 0.3) + 0.1 * rng.normal(size=n)
    if kind == "offset":
        loss = cp.maximum(0.125 - x @ w, cp.square(x @ w - 0.125))
        whole = cp.maximum(0.125 - X @ v, cp.square(X @ v - 0.125))
        data = {x: X}
    else:
        loss = cp.maximum(y - x @ w, cp.square(x @ w - y))
        whole = cp.maximum(Y - X @ v, cp.square(X @ v - Y))
        data = {x: X, y: Y}
    problem = dpcvx.Problem(loss, w, data, [cp.norm(w) <= 1])
    ref = cp.Problem(
        cp.Minimize(cp.sum(whole) / n + KINK_LAM / 2 * cp.sum_squares(v)), [cp.norm(v, 2) <= 1]
    )
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return problem, float(ref.value)


@pytest.mark.parametrize("kind,d", [("offset", 1), ("offset", 3), ("label", 3)])
def test_affine_and_square_meeting_at_the_optimum_are_certified(kind, d):
    problem, f_star = _kink_case(kind, d)
    assert [t.kind for t in problem.declaration.terms] == ["max_terms"]
    sol = problem.solve(regularization=KINK_LAM, accuracy=1e-9)
    assert sol.gap <= 1e-9
    tol = 1e-8 * (1 + abs(f_star))
    assert sol.lower <= f_star + tol and f_star <= sol.upper + tol
    mech = dpcvx.OutputPerturbation(lipschitz=10.0, regularization=KINK_LAM)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpcvx.LipschitzClaimWarning)
        assert np.all(np.isfinite(problem.solve_private(mech, epsilon=1.0, rng=0).w))


def test_kink_weights_only_choose_a_simplex_point():
    """Garbage duals at the kink still give a valid (looser) bound: the weights are clipped
    to the simplex whatever the duals say."""
    from dpcvx.certification.stable import max_terms_weights

    rng = np.random.default_rng(3)
    n, m, d = 40, 2, 3
    G = np.zeros((n, m))
    D = np.stack([np.ones(n), np.zeros(n)], axis=1)
    J = rng.normal(size=(n, m, d))
    for raw in (
        [rng.normal(size=n) * 1e6, rng.normal(size=n)],
        [np.full(n, np.nan), np.full(n, np.inf)],
        [-np.ones(n), np.ones(n)],
    ):
        mu = max_terms_weights(G, D, raw, np.full(n, 1e-7), J)
        assert np.all(np.isfinite(mu)) and np.all(mu >= 0)
        assert np.allclose(mu.sum(axis=1), 1.0)


def _pow_case():
    n = 300
    rng = np.random.default_rng(0)
    X = np.where(rng.random(n) < 0.75, 1.0, -1.0)[:, None]
    w = cp.Variable(1)
    x = cp.Parameter(1)
    v = cp.Variable(1)
    problem = dpcvx.Problem(
        cp.maximum(0.125 - x @ w, cp.power(cp.pos(x @ w - 0.125), 1.5)),
        w,
        {x: X},
        [cp.norm(w) <= 1],
    )
    whole = cp.maximum(0.125 - X @ v, cp.power(cp.pos(X @ v - 0.125), 1.5))
    ref = cp.Problem(
        cp.Minimize(cp.sum(whole) / n + KINK_LAM / 2 * cp.sum_squares(v)), [cp.norm(v, 2) <= 1]
    )
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return problem, float(ref.value), np.asarray(v.value, float)


def test_generic_maximum_at_its_kink_mixes_the_pieces_cuts():
    """``maximum(affine, power(pos(.), 1.5))`` is a generic term (one tangent cut of the
    maximum, one piece's slope at the kink: gap 0.24): the tied pieces' cuts are mixed."""
    problem, f_star, _ = _pow_case()
    assert [t.kind for t in problem.declaration.terms] == ["generic"]
    sol = problem.solve(regularization=KINK_LAM, accuracy=1e-9)
    assert sol.gap <= 1e-9
    tol = 1e-8 * (1 + abs(f_star))
    assert sol.lower <= f_star + tol and f_star <= sol.upper + tol


def test_mixed_cuts_are_valid_for_any_weights():
    """Any exact simplex weights on the pieces' cuts give a lower bound below the minimum;
    weights off the simplex are refused (the single cut of the maximum is used)."""
    from dpcvx.certification.certificate import (
        _generic_max_cuts,
        _mixed_cut,
        value_bounds,
        value_sums,
    )

    problem, f_star, w_star = _pow_case()
    decl = problem.declaration
    w0 = np.zeros(1)
    rng = np.random.default_rng(5)
    for w_hat in (w_star, w_star + 1e-3, np.array([-0.5])):
        w_hat = decl.domain.make_feasible(w_hat)
        V, _ = _generic_max_cuts(decl, decl.terms[0], w_hat)
        for _ in range(5):
            t = np.round(rng.random(decl.n) * 2.0**40) / 2.0**40
            theta = np.stack([1.0 - t, t], axis=1)
            sums, _ = value_sums(decl, w_hat, mixes={0: theta})
            _, lower, _, _, _ = value_bounds(sums, decl.domain, lam=KINK_LAM, w0=w0, w_hat=w_hat)
            assert lower <= f_star + 1e-12
        bad = np.stack([np.full(decl.n, 0.7), np.full(decl.n, 0.7)], axis=1)
        assert _mixed_cut(decl, decl.terms[0], w_hat, bad) is None
        assert _mixed_cut(decl, decl.terms[0], w_hat, -np.eye(2)[np.zeros(decl.n, int)]) is None


@pytest.mark.parametrize("stack", [cp.hstack, cp.vstack])
def test_max_of_stacked_pieces_is_the_same_max_term_as_maximum(stack):
    # max(hstack([g_1, g_2])) spells maximum(g_1, g_2): it must parse as the same max term and
    # certify at the kink as well (it reached only 0.02 as a generic term)
    rng = np.random.default_rng(0)
    n = 300
    s = np.where(rng.random(n) < 0.75, 1.0, -1.0)
    X = np.c_[s, 0.1 * rng.normal(size=n)]
    certs = []
    for spell in ("maximum", "stacked"):
        w = cp.Variable(2)
        x = cp.Parameter(2)
        pieces = [0.125 - x @ w, cp.square(x @ w - 0.125)]
        loss = cp.maximum(*pieces) if spell == "maximum" else cp.max(stack(pieces))
        problem = dpcvx.Problem(loss, w, {x: X}, [cp.norm(w) <= 1])
        certs.append(problem.solve(regularization=0.17, accuracy=1e-9))
    assert all(c.gap <= 1e-9 for c in certs)
    assert certs[1].lower <= certs[0].upper + 1e-12 and certs[0].lower <= certs[1].upper + 1e-12
