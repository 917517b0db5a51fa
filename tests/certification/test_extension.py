"""The Lipschitz extension f_C (paper 000, eq. (5), Lemma 2.7, Prop D.6) against independent
answers: per-example CVXPY solves of the definition, a 1-d grid, and the whole-dataset joint
program."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from catalogue import finite_difference_gradients

import dpcvx
from tests.certification.test_screened import _problem as _t5_problem


def _heavy_hinge(n=25, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_t(2.5, size=(n, d)) * 2.0  # heavy tails: no usable Lipschitz bound
    Y = np.sign(X @ rng.normal(size=d) + 0.1)
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    problem = dpcvx.Problem(
        cp.pos(1 - y * (x @ w)), w, data={x: X, y: Y}, domain=[cp.norm(w, 2) <= 1]
    )
    return problem, X, Y, rng


def _reference_fc(X, Y, w, C, loss="hinge"):
    out = []
    for xi, yi in zip(X, Y):
        v = cp.Variable(len(w))
        f = cp.pos(1 - yi * (xi @ v)) if loss == "hinge" else cp.abs(xi @ v - yi)
        prob = cp.Problem(cp.Minimize(f + C * cp.norm(w - v)), [cp.norm(v, 2) <= 1])
        prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
        out.append(prob.value)
    return np.array(out)


@pytest.mark.parametrize("solver", ["CLARABEL", "ECOS", "SCS"])
def test_evaluate_brackets_per_example_definition(solver):
    problem, X, Y, rng = _heavy_hinge()
    C = 1.5
    ext = problem.lipschitz_extension(C)
    w = rng.normal(size=3)
    w *= 0.6 / np.linalg.norm(w)
    vals = ext.evaluate(w, solver=solver)
    ref = _reference_fc(X, Y, w, C)
    assert np.all(vals.lower <= ref + 1e-8) and np.all(ref <= vals.upper + 1e-8)
    assert np.all(vals.B >= 0) and np.all(np.linalg.norm(vals.subgradients, axis=1) <= C)
    if solver != "SCS":
        assert vals.B.max() < 1e-6


def test_extension_is_below_f_and_equal_where_the_gradient_is_small():
    problem, X, Y, rng = _heavy_hinge()
    w = np.array([0.3, -0.2, 0.1])
    f = np.maximum(0.0, 1 - Y * (X @ w))
    small = problem.lipschitz_extension(0.5).evaluate(w)
    assert np.all(small.lower <= f + 1e-9)  # f_C <= f on W
    big_C = 1.01 * np.max(np.linalg.norm(X, axis=1))  # every gradient norm on W is below C
    big = problem.lipschitz_extension(big_C).evaluate(w)
    np.testing.assert_allclose(big.upper, f, atol=1e-6)
    np.testing.assert_allclose(big.lower, f, atol=1e-6)


def test_extension_is_C_lipschitz_and_subgradients_are_B_approximate():
    problem, X, Y, rng = _heavy_hinge(seed=3)
    C = 0.8
    ext = problem.lipschitz_extension(C)
    pts = rng.normal(size=(6, 3))
    pts *= rng.uniform(0.1, 0.95, size=(6, 1)) / np.linalg.norm(pts, axis=1, keepdims=True)
    vals = [ext.evaluate(p) for p in pts]
    for a, va in zip(pts, vals):
        for b, vb in zip(pts, vals):
            # |f_C(a) - f_C(b)| <= C ||a - b||, seen through the certified bounds
            assert np.all(va.lower <= vb.upper + C * np.linalg.norm(a - b) + 1e-9)
            # B-subgradient inequality at b with the certificate computed at a
            lin = va.upper + va.subgradients @ (b - a) - va.B
            assert np.all(vb.upper >= lin - 1e-9)


def test_joint_program_equals_the_extension_erm_in_one_dimension():
    # d = 1, W = [-1, 1], absolute loss: compute f_C on a fine grid by its definition and
    # minimize (1/n) sum f_C + (lam/2) w^2 by brute force; compare with the certified solve.
    rng = np.random.default_rng(7)
    n, C, lam = 9, 0.7, 0.3
    X = rng.standard_t(2.0, size=(n, 1)) * 3
    Yv = rng.normal(size=n)
    w = cp.Variable(1)
    x = cp.Parameter(1)
    y = cp.Parameter()
    problem = dpcvx.Problem(
        cp.abs(x @ w - y), w, data={x: X, y: Yv}, domain=dpcvx.domains.box(w, -1.0, 1.0)
    )
    sol = problem.lipschitz_extension(C).solve(regularization=lam, center=np.zeros(1))
    grid = np.linspace(-1, 1, 4001)
    f = np.abs(np.outer(grid, X[:, 0]) - Yv)  # (grid y, n)
    fc = np.min(f[None, :, :] + C * np.abs(grid[:, None, None] - grid[None, :, None]), axis=1)
    F = fc.mean(axis=1) + lam / 2 * grid**2
    assert sol.lower <= F.min() + 1e-9
    assert sol.upper >= F.min() - 2e-3  # grid resolution 5e-4 times the Lipschitz constant
    assert abs(sol.w[0] - grid[np.argmin(F)]) <= 2e-3 + sol.distance_bound


def test_joint_program_brackets_the_whole_dataset_reference():
    problem, X, Y, rng = _heavy_hinge(n=20, seed=5)
    C, lam = 1.2, 0.2
    sol = problem.lipschitz_extension(C).solve(regularization=lam)
    ref = _joint_reference(X, Y, C, lam)
    assert sol.lower <= ref + 1e-8 <= sol.upper + 2e-8
    assert sol.gap < 1e-6


def test_private_release_on_heavy_tailed_data_needs_lipschitz_at_least_C():
    problem, X, Y, rng = _heavy_hinge()
    ext = problem.lipschitz_extension(1.0)
    with pytest.raises(dpcvx.InvalidParameterError, match="at least C"):
        ext.solve_private(dpcvx.OutputPerturbation(lipschitz=0.5, regularization=0.1), epsilon=1.0)
    acct = dpcvx.Accountant(1.0)
    res = ext.solve_private(
        dpcvx.OutputPerturbation(lipschitz=1.0, regularization=0.1),
        epsilon=1.0,
        rng=0,
        accountant=acct,
    )
    assert np.linalg.norm(res.w) <= 1.0
    assert res.detail["extension_C"] == 1.0 and len(acct.ledger) == 1


@pytest.mark.parametrize("C", [0.0, -1.0, float("inf"), float("nan")])
def test_bad_C(C):
    problem, *_ = _heavy_hinge()
    with pytest.raises(dpcvx.InvalidParameterError, match="C"):
        problem.lipschitz_extension(C)


def test_evaluate_rejects_points_outside_the_domain():
    problem, *_ = _heavy_hinge()
    with pytest.raises(dpcvx.InvalidParameterError, match="domain"):
        problem.lipschitz_extension(1.0).evaluate(np.array([2.0, 0.0, 0.0]))


@pytest.mark.parametrize("radius", [0.05, 0.3, 3.0])
def test_localized_joint_program_brackets_the_whole_dataset_reference(radius):
    # w ranges over W0 = W intersect B(c, r); every copy y_i still ranges over W
    problem, X, Y, rng = _heavy_hinge(n=15, seed=11)
    C, lam = 1.0, 0.2
    c = np.array([0.5, -0.4, 0.2])
    ext = problem.lipschitz_extension(C)
    sol = ext.solve(regularization=lam, localize=(c, radius))
    assert np.linalg.norm(sol.w - c) <= radius and np.linalg.norm(sol.w) <= 1.0
    n, d = X.shape
    W = cp.Variable(d)
    V = cp.Variable((n, d))
    obj = (
        cp.sum(cp.pos(1 - cp.multiply(Y, cp.sum(cp.multiply(X, V), axis=1)))) / n
        + C * cp.sum(cp.norm(W[None, :] - V, 2, axis=1)) / n
        + lam / 2 * cp.sum_squares(W)
    )
    ref = cp.Problem(
        cp.Minimize(obj), [cp.norm(W) <= 1, cp.norm(W - c) <= radius, cp.norm(V, 2, axis=1) <= 1]
    )
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    assert sol.lower <= ref.value + 1e-8 <= sol.upper + 2e-8
    assert sol.gap < 1e-5


def test_localization_center_must_be_public_and_in_the_domain():
    problem, *_ = _heavy_hinge()
    ext = problem.lipschitz_extension(1.0)
    with pytest.raises(dpcvx.InvalidParameterError, match="domain"):
        ext.solve(regularization=0.1, localize=(np.array([2.0, 0.0, 0.0]), 0.5))
    with pytest.raises(dpcvx.InvalidParameterError, match="radius"):
        ext.solve(regularization=0.1, localize=(np.zeros(3), 0.0))


def _joint_reference(X, Y, C, lam):
    n, d = X.shape
    W = cp.Variable(d)
    V = cp.Variable((n, d))
    obj = (
        cp.sum(cp.pos(1 - cp.multiply(Y, cp.sum(cp.multiply(X, V), axis=1)))) / n
        + C * cp.sum(cp.norm(W[None, :] - V, 2, axis=1)) / n
        + lam / 2 * cp.sum_squares(W)
    )
    ref = cp.Problem(cp.Minimize(obj), [cp.norm(W) <= 1, cp.norm(V, 2, axis=1) <= 1])
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return ref.value


@pytest.mark.parametrize("C", [0.5, 2.0, 5.0, 100.0])
def test_mixed_program_keeps_plain_blocks_for_light_examples(C):
    """Examples with ||x_i|| <= C (hinge: f_C = f on W) keep the plain block; the optimum is
    the same joint program's (independent whole-dataset reference with every copy)."""
    from dpcvx.certification.lipschitz import lipschitz_bounds

    problem, X, Y, rng = _heavy_hinge(n=20, seed=5)
    bounds = lipschitz_bounds(problem.declaration)
    assert np.allclose(bounds, np.linalg.norm(X, axis=1))  # exact for the hinge loss
    lam = 0.2
    sol = problem.lipschitz_extension(C).solve(regularization=lam)
    ref = _joint_reference(X, Y, C, lam)
    assert sol.lower <= ref + 1e-8 <= sol.upper + 2e-8
    assert sol.gap < 1e-6


def test_extension_certificate_never_relies_on_the_lipschitz_bounds(monkeypatch):
    """Declare every example light (a wrong bound): the solver then optimizes the plain loss,
    but dpcvx's certificate is still a valid bracket of the extension's optimum."""
    import dpcvx.certification.solve as solve_module

    problem, X, Y, rng = _heavy_hinge(n=20, seed=5)
    monkeypatch.setattr(solve_module, "lipschitz_bounds", lambda decl: np.zeros(decl.n))
    C, lam = 0.5, 0.2
    sol = problem.lipschitz_extension(C).solve(regularization=lam)
    ref = _joint_reference(X, Y, C, lam)
    assert sol.lower <= ref + 1e-8 <= sol.upper + 2e-8
    with pytest.raises(dpcvx.CertificationError):
        problem.lipschitz_extension(C).solve(regularization=lam, accuracy=1e-6)


@pytest.mark.parametrize(
    "loss",
    [
        "hinge",
        "abs",
        "huber",
        "logistic",
        "square",
        "norm2",
        "norm1",
        "max",
        "lse",
        "sum_squares",
        "affine",
    ],
)
def test_lipschitz_bounds_dominate_gradient_norms_on_the_domain(loss):
    from dpcvx.certification.lipschitz import lipschitz_bounds

    rng = np.random.default_rng(2)
    n, d = 12, 3
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    M = cp.Parameter((2, d))
    data = {x: rng.standard_t(3, size=(n, d)), y: rng.normal(size=n)}
    expr = {
        "hinge": cp.pos(1 - y * (x @ w)),
        "abs": cp.abs(x @ w - y),
        "huber": cp.huber(x @ w - y, 0.7),
        "logistic": cp.logistic(x @ w),
        "square": cp.square(x @ w - y),
        "norm2": cp.norm(M @ w - y, 2),
        "norm1": cp.norm(M @ w, 1),
        "max": cp.max(M @ w),
        "lse": cp.log_sum_exp(M @ w),
        "sum_squares": cp.sum_squares(M @ w - y),
        "affine": x @ w + 2 * y,
    }[loss]
    used = {p.id for p in expr.parameters()}
    if M.id in used:
        data[M] = rng.normal(size=(n, 2, d))
    data = {p: v for p, v in data.items() if p.id in used}
    problem = dpcvx.Problem(expr, w, data, [cp.norm(w, 2) <= 1])
    bounds = lipschitz_bounds(problem.declaration)
    assert np.all(np.isfinite(bounds))
    decl = problem.declaration
    h = 1e-6
    for _ in range(30):
        u = rng.normal(size=d)
        u *= rng.uniform(0, 1) / np.linalg.norm(u)
        grad = finite_difference_gradients(decl, u, h)
        assert np.all(np.linalg.norm(grad, axis=1) <= bounds * (1 + 1e-6) + 1e-5)


@pytest.mark.parametrize("d", [3, 300, 5000])
def test_a_maximum_is_bounded_by_its_largest_piece_to_rounding_at_any_d(d):
    """The hinge's bound is ``||x||`` exactly (to rounding: the claim checks allow 1e-12
    relative), whatever d: with unit rows a true claim ``L = 1`` must hold at d = 5000, where
    rounding the norms up by their worst-case error would not; with an affine part the joint
    bound still covers the sum."""
    from dpcvx.certification.lipschitz import lipschitz_bounds

    rng = np.random.default_rng(3)
    n = 12
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1)[:, None]
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    labels = np.sign(rng.normal(size=n))
    hinge = dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, {x: X, y: labels}, [cp.norm(w) <= 1])
    bounds = lipschitz_bounds(hinge.declaration)
    assert np.all(np.abs(bounds - 1.0) <= 1e-13)
    joint = dpcvx.Problem(
        cp.pos(1 - y * (x @ w)) + 0.5 * (x @ w), w, {x: X, y: labels}, [cp.norm(w) <= 1]
    )
    expected = np.maximum(np.abs(0.5 - labels), 0.5)  # max_j ||J_j + 0.5 x||, J in {-y x, 0}
    assert np.allclose(lipschitz_bounds(joint.declaration), expected, rtol=1e-12)


@pytest.mark.parametrize("tau", [0.5, 0.2, 0.9])
def test_the_library_losses_bound_their_slope_by_their_lipschitz_constant(tau):
    """``losses.pinball`` is ``max(tau, 1 - tau) ||x||``-Lipschitz and
    ``losses.epsilon_insensitive`` ``||x||``-Lipschitz: dpcvx's structural bound must say so
    (a looser bound sends every example of a true claim to the extension, slower and with a
    warning to the curator), and must hold (checked against finite differences)."""
    from dpcvx.certification.lipschitz import lipschitz_bounds

    rng = np.random.default_rng(3)
    X, Y = rng.normal(size=(40, 3)), rng.normal(size=40)
    norms = np.linalg.norm(X, axis=1)
    w, x, y = cp.Variable(3), cp.Parameter(3), cp.Parameter()
    dom = dpcvx.domains.l2_ball(w, 2.0)
    for loss, slope in (
        (dpcvx.losses.pinball(x @ w, y, tau), max(tau, 1 - tau)),
        (dpcvx.losses.epsilon_insensitive(x @ w, y, 0.1), 1.0),
    ):
        problem = dpcvx.Problem(loss, w, {x: X, y: Y}, dom)
        bounds = lipschitz_bounds(problem.declaration)
        np.testing.assert_allclose(bounds, slope * norms, rtol=1e-12)
        for _ in range(20):  # the bound holds: difference quotients never exceed it
            u, v = rng.normal(size=(2, 3))
            u, v = u / max(1, np.linalg.norm(u) / 2), v / max(1, np.linalg.norm(v) / 2)
            gap = np.abs(problem.declaration.loss_values(u) - problem.declaration.loss_values(v))
            assert np.all(gap <= bounds * np.linalg.norm(u - v) * (1 + 1e-12) + 1e-12)


def test_an_affine_part_is_bounded_jointly_with_a_maximum():
    """The multinomial loss written naturally, ``log_sum_exp(scores) - <x_y, w>``, is
    ``sqrt(2) ||x||``-Lipschitz (gradient ``(p - e_y) (x) x``): the affine part's gradient is
    bounded jointly with the log-sum-exp's simplex (``max_j ||J_j + g||``), not added to it
    (which gave ``2 ||x||`` and sent every example of a true claim to the extension). The
    bound must hold: difference quotients never exceed it."""
    from dpcvx.certification.lipschitz import lipschitz_bounds

    rng = np.random.default_rng(7)
    n, d, k = 30, 3, 4
    feats, labels = rng.normal(size=(n, d)), rng.integers(k, size=n)
    W = cp.Variable(k * d)
    x, xe = cp.Parameter(d), cp.Parameter(k * d)
    scores = cp.hstack([x @ W[j * d : (j + 1) * d] for j in range(k)])
    blocks = np.einsum("nk,nd->nkd", np.eye(k)[labels], feats).reshape(n, k * d)
    problem = dpcvx.Problem(
        cp.log_sum_exp(scores) - xe @ W, W, {x: feats, xe: blocks}, [cp.norm(W, 2) <= 10]
    )
    bounds = lipschitz_bounds(problem.declaration)
    np.testing.assert_allclose(bounds, np.sqrt(2) * np.linalg.norm(feats, axis=1), rtol=1e-9)
    w, y = cp.Variable(d), cp.Parameter()
    Y = np.sign(rng.normal(size=n))
    hinge = dpcvx.Problem(
        cp.pos(1 - y * (x @ w)) - 0.3 * (x @ w), w, {x: feats, y: Y}, [cp.norm(w) <= 1]
    )
    expected = np.where(Y > 0, 1.3, 0.7) * np.linalg.norm(feats, axis=1)
    np.testing.assert_allclose(lipschitz_bounds(hinge.declaration), expected, rtol=1e-9)
    for prob, dim, radius in ((problem, k * d, 10.0), (hinge, d, 1.0)):
        b = lipschitz_bounds(prob.declaration)
        for _ in range(50):
            u, v = rng.normal(size=(2, dim))
            u, v = u * radius / np.linalg.norm(u), v * radius / np.linalg.norm(v) * 0.9
            gap = np.abs(prob.declaration.loss_values(u) - prob.declaration.loss_values(v))
            assert np.all(gap <= b * np.linalg.norm(u - v) * (1 + 1e-9) + 1e-12)


def _recorded_certificates(monkeypatch) -> list:
    """``(gap, margin, stable gap or None, accuracy)`` of every extension certificate."""
    import dpcvx.certification.extension as ext_module

    records: list = []
    finish = ext_module.finish_extension

    def recording(w_hat, bounds, direct, **kwargs):
        records.append((bounds[2], bounds[3], direct, kwargs.get("accuracy")))
        return finish(w_hat, bounds, direct, **kwargs)

    monkeypatch.setattr(ext_module, "finish_extension", recording)
    return records


def test_the_stable_gap_of_a_gap_of_many_margins_is_that_gap(monkeypatch):
    """The premise of skipping the stable gap where the bound's gap is over ``STABLE_FAR``
    times the target and ``STABLE_MARGINS`` rounding margins: there the stable gap is the
    same sum free of rounding, so it is the bound's gap to a few percent and cannot meet such
    a target. Every certificate of the extension's rounds (the six losses of the extension
    benchmark, balls of radius 0.5, 1 and 3, d = 20 and 100), each with its stable gap (no
    target)."""
    from dpcvx.certification.extension import STABLE_FAR, STABLE_MARGINS

    records = _recorded_certificates(monkeypatch)
    for loss in ("hinge", "absolute", "pinball", "logistic", "huber", "square"):
        for d in (20, 100):
            for radius in (0.5, 1.0, 3.0):
                problem = _t5_problem(loss, n=3000, d=d, radius=radius)
                problem.lipschitz_extension(1.0).solve(regularization=0.01)
    far = [(gap, direct) for gap, margin, direct, _ in records if gap > STABLE_MARGINS * margin]
    assert len(far) >= 5 and all(direct is not None for _, direct in far)
    assert all(abs(direct / gap - 1) <= 0.1 for gap, direct in far)
    assert all(direct > gap / STABLE_FAR for gap, direct in far)


def test_a_gap_far_above_the_target_skips_the_stable_gap(monkeypatch):
    """With a target, the smooth path's extension certificates whose gap is over
    ``STABLE_FAR`` times it and ``STABLE_MARGINS`` rounding margins skip the stable gap (a
    Huber extension at d = 100 whose rounds stall once above the target); the control
    computes it there, and the solve ends at the same point with the same gap. The arrowhead
    path (the absolute loss) keeps it."""
    import dpcvx.certification.extension as ext_module

    records = _recorded_certificates(monkeypatch)
    sol = _t5_problem("huber", n=3000, d=100, radius=1.0).lipschitz_extension(1.0)
    out = sol.solve(regularization=0.01, accuracy=1e-9)
    far = [r for r in records if r[0] > ext_module.STABLE_FAR * 1e-9 and r[0] > 1e3 * r[1]]
    assert out.gap <= 1e-9 and far and all(direct is None for _, _, direct, _ in far)
    records.clear()
    monkeypatch.setattr(ext_module, "STABLE_FAR", np.inf)
    control = _t5_problem("huber", n=3000, d=100, radius=1.0).lipschitz_extension(1.0)
    again = control.solve(regularization=0.01, accuracy=1e-9)
    computed = [r for r in records if r[0] > 4e-9 and r[0] > 1e3 * r[1]]
    assert computed and all(direct is not None for _, _, direct, _ in computed)
    assert np.array_equal(again.w, out.w) and again.gap == out.gap
    # the arrowhead path's multipliers are the method's: its certificates keep the stable gap
    monkeypatch.setattr(ext_module, "STABLE_FAR", 4.0)
    records.clear()
    pieces = _t5_problem("absolute", n=3000, d=100, radius=0.5).lipschitz_extension(1.0)
    assert pieces.solve(regularization=0.01, accuracy=1e-9).gap <= 1e-9
    kept = [r for r in records if r[0] > 4e-9 and r[0] > 1e3 * r[1]]
    assert kept and all(direct is not None for _, _, direct, _ in kept)


def test_an_overflowed_gap_keeps_the_stable_gap(monkeypatch):
    """Where the value bounds overflow (their gap infinite), the stable gap is the only one
    that may certify the point: the skip far above the target never applies there (the
    bounds' gap made infinite here, with a finite margin)."""
    import dpcvx.certification.extension as ext_module

    records = _recorded_certificates(monkeypatch)
    bounds = ext_module.extension_value_bounds

    def overflowed(*args, **kwargs):
        upper, lower, gap, margin = bounds(*args, **kwargs)
        return upper, lower, np.inf, margin

    monkeypatch.setattr(ext_module, "extension_value_bounds", overflowed)
    problem = _t5_problem("huber", n=3000, d=20, radius=1.0).lipschitz_extension(1.0)
    out = problem.solve(regularization=0.01, accuracy=1e-9)
    assert records and all(direct is not None for _, _, direct, _ in records)
    assert out.gap <= 1e-9  # the stable gaps certify


def test_the_lower_bound_from_the_stable_gap_rounds_down():
    """``lower = upper - 2 margin - gap`` with ``upper = U + margin`` (``U`` the value sums)
    where ``U`` and the margin are ten thousand times their difference (a review's case, a
    label of 1e17: 575 against 0.044): forming ``upper`` rounds by half an ulp of 1150,
    1.1e-13, which the subtraction hands to ``lower``, and the float ``lower`` came out above
    ``U - margin - gap``, the bound the certificate proves, by more than the gap. It is now at
    most that bound, computed in rationals."""
    from fractions import Fraction

    from dpcvx.certification.extension import finish_extension

    U, margin, direct = 574.8794350852307, 574.8352136272233, 1.4824753084745772e-13
    upper = U + margin  # 1149.7146487124542: rounded up by 1.1e-13
    out = finish_extension(
        np.zeros(2),
        (upper, -np.inf, 1.0, margin),
        direct,
        lam=1.0,
        w0=np.zeros(2),
        accuracy=None,
        stats={},
    )
    proved = Fraction(U) - Fraction(margin) - Fraction(direct)
    assert out.gap == direct
    assert Fraction(out.lower) <= proved
    assert proved - Fraction(out.lower) < Fraction(1, 10**11)
