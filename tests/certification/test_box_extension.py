"""The Lipschitz extension of a one-direction piecewise-linear loss with its copy kept in a box
(:func:`dpcvx.certification.box.box_extension`), against independent answers: CVXPY on every
example's own problem, finite differences, and the bound's own tightness."""

import cvxpy as cp
import numpy as np
import pytest

from dpcvx.certification.ball import Pieces1D
from dpcvx.certification.box import BoxRegion, box_extension
from tests.one_direction_rows import model_rows, one_direction_rows

C = 1.0
LO = np.array([-0.5, -0.3, -1.0, -0.2])
HI = np.array([0.5, 0.4, 0.2, 0.6])


def _value(u, sigma, beta, w, Y):
    h = (sigma * np.einsum("kd,kd->k", u, Y)[:, None] + beta).max(axis=1)
    return h + C * np.linalg.norm(Y - w[None, :], axis=1)


def _reference(u, sigma, beta, w):
    """Every example's extension ``min_{lo <= y <= hi} h(u^T y) + C ||w - y||`` by CVXPY."""
    k, d = u.shape
    Y = cp.Variable((k, d))
    t = cp.sum(cp.multiply(u, Y), axis=1)
    h = cp.maximum(*[cp.multiply(sigma[:, j], t) + beta[:, j] for j in range(3)])
    dist = cp.norm(Y - w[None, :], 2, axis=1)
    cons = [Y >= LO[None, :], Y <= HI[None, :]]
    prob = cp.Problem(cp.Minimize(cp.sum(h + C * dist)), cons)
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return _value(u, sigma, beta, w, np.clip(Y.value, LO, HI))


def _lower(u, sigma, beta, w, t, g, theta):
    """The certificate's lower bound from ``(g, theta)``:
    ``<g, w> + h(t) - theta t - sigma_W(g - theta u)``."""
    h = (sigma * t[:, None] + beta).max(axis=1)
    v = g - theta[:, None] * u
    return g @ w + h - theta * t - np.sum(np.maximum(v * LO, v * HI), axis=1)


@pytest.mark.parametrize(
    "where",
    [
        np.array([0.1, 0.0, -0.3, 0.1]),  # inside
        np.array([0.5, 0.1, -0.2, 0.0]),  # on a face
        HI.copy(),  # at a corner
        HI - 1e-13 * (HI - LO),  # a rounding inside the corner (the method's stopping point)
    ],
    ids=["inside", "face", "corner", "rounding inside the corner"],
)
def test_copies_values_and_duals_match_the_reference_and_bound_tightly(where):
    """Every copy's value is CVXPY's (to its tolerance) or better, the dual is in the C-ball,
    and the certificate's bound from ``(g, theta)`` meets the value (tight)."""
    u, sigma, beta = one_direction_rows(1, k=30)
    t, Y, g, theta, _ = box_extension(Pieces1D(sigma, beta), u, where, LO, HI, C, 1)
    assert np.all((Y >= LO) & (Y <= HI))
    value = _value(u, sigma, beta, where, Y)
    ref = _reference(u, sigma, beta, where)
    assert np.all(value <= ref + 1e-9)
    assert np.all(np.linalg.norm(g, axis=1) <= C * (1 + 1e-12))
    lower = _lower(u, sigma, beta, where, t, g, theta)
    assert np.all(lower <= value + 1e-12)
    np.testing.assert_allclose(lower, value, atol=1e-11)


def test_a_wrong_slope_is_caught_by_the_tightness_check():
    """The negative control: the same bound with every slope ``theta`` moved off by 0.3
    loses at least 1e-3 on most examples (the check above can fail)."""
    u, sigma, beta = one_direction_rows(2, k=30)
    w = np.array([0.5, 0.1, -0.2, 0.0])
    t, Y, g, theta, _ = box_extension(Pieces1D(sigma, beta), u, w, LO, HI, C, 1)
    value = _value(u, sigma, beta, w, Y)
    lower = _lower(u, sigma, beta, w, t, g, theta + 0.3)
    assert np.mean(value - lower > 1e-3) > 0.5


def test_the_model_is_the_extensions_second_order_expansion():
    """``(Q, q)``: the gradient is the mean of the duals, and the Hessian matches finite
    differences of the exact duals, where a kink of ``h`` holds the copy (hinges steeper
    than C), where none does (absolute values whose kink lies outside the box) and where the
    copy is a corner of the box (every coordinate it moves clipped)."""
    rng = np.random.default_rng(4)
    d = 4
    u, sigma, beta = model_rows(rng, d=d)
    lo, hi = -np.full(d, 0.6), np.full(d, 0.6)
    w = rng.normal(size=d)
    w *= 0.3 / np.linalg.norm(w)
    n = 50

    def duals(v):
        return box_extension(Pieces1D(sigma, beta), u, v, lo, hi, C, n)[2].sum(axis=0) / n

    _, Y, g, _, (Q, q) = box_extension(Pieces1D(sigma, beta), u, w, lo, hi, C, n)
    corners = np.all((Y == lo) | (Y == hi), axis=1)
    assert corners.any() and not corners.all()
    np.testing.assert_allclose(Q @ w + q, g.sum(axis=0) / n, atol=1e-12)
    eps = 1e-6
    H = np.stack([(duals(w + eps * e) - duals(w - eps * e)) / (2 * eps) for e in np.eye(d)], axis=1)
    np.testing.assert_allclose(Q, H, atol=1e-6 * np.abs(H).max())
    assert np.linalg.eigvalsh(Q).min() >= -1e-12


def test_the_normal_cone_at_a_corner_cancels_only_outward_parts():
    """:meth:`BoxRegion.cancellable`: at the upper corner a positive slope's push is
    cancelled on the coordinates where ``u`` points down (the cone holds ``v >= 0`` there),
    a negative slope's where ``u`` points up; inside the box nothing is."""
    region = BoxRegion(LO, HI)
    u = np.array([[0.5, -0.5, 0.5, -0.5]])
    np.testing.assert_array_equal(region.cancellable(u, HI, True), [[0, -0.5, 0, -0.5]])
    np.testing.assert_array_equal(region.cancellable(u, HI, False), [[0.5, 0, 0.5, 0]])
    np.testing.assert_array_equal(region.cancellable(u, (LO + HI) / 2, True), np.zeros((1, 4)))


@pytest.mark.parametrize("gap", [2e-12, 4e-12, 1e-10])
def test_copies_a_few_roundings_from_w_keep_tight_duals(gap):
    """``w`` a few roundings inside a corner (where the interior-point method stops, outside
    the snap to the bounds): copies within about 1e-12 of ``w`` still get duals that make
    the bound tight (from their displacement ``-mu u_j``, not ``w - y``, which cancels)."""
    u, sigma, beta = one_direction_rows(1, k=30)
    w = HI - gap * (HI - LO)
    t, Y, g, theta, _ = box_extension(Pieces1D(sigma, beta), u, w, LO, HI, C, 1)
    value = _value(u, sigma, beta, w, Y)
    np.testing.assert_allclose(_lower(u, sigma, beta, w, t, g, theta), value, atol=1e-12)


@pytest.mark.parametrize(
    "case",
    [
        "a tiny entry of u",
        "a tiny free part",
        "a point box",
        "a thin box",
        "a zero u, a wide box",
        "parallel pieces",
        "a tiny free part off the kink",
    ],
)
def test_extreme_inputs_raise_no_floating_point_warning(case):
    """Nothing here may warn on one dataset and not on its neighbour (under warnings as
    errors that would abort one release and not the other): directions with entries near
    the smallest float, a copy whose free part is tiny, boxes of zero, tiny and huge width,
    an example constant in ``w``, pieces parallel to each other (their crossing infinite), a
    free part so small that the closed-form roots of the copy's bracket overflow."""
    lo, hi = LO.copy(), HI.copy()
    u = np.array([[1.0, 0.2, 0.0, 0.0], [0.6, 0.0, 0.8, 0.0]])
    w = np.array([0.1, 0.0, -0.3, 0.1])
    sigma = np.array([[0.0, -3.0], [0.0, -3.0]])
    beta = np.array([[0.0, 3.0], [0.0, 3.0]])
    if case == "a tiny entry of u":
        u[0, 1] = 1e-310
    elif case == "a tiny free part":
        u[0] = [1.0, 1e-160, 0.0, 0.0]
        w = np.array([0.5, 0.0, -0.3, 0.1])
    elif case == "a point box":
        lo = hi = w.copy()
    elif case == "a zero u, a wide box":
        u[1] = 0.0  # an example constant in w
        lo, hi = np.full(4, -5e10), np.full(4, 5e10)
    elif case == "parallel pieces":  # a third piece under the flat one, parallel to it
        sigma = np.array([[0.0, -3.0, 0.0], [0.0, -3.0, 0.0]])
        beta = np.array([[0.0, 3.0, -1.0], [0.0, 3.0, -1.0]])
        w = np.zeros(4)
    elif case == "a tiny free part off the kink":
        u[0] = [1e-160, 0.8, 0.6, 0.0]
        w = np.zeros(4)
    else:
        lo, hi = w - 1e-9, w + 1e-9
    norms = np.linalg.norm(u, axis=1)
    u /= np.where(norms > 0, norms, 1.0)[:, None]
    # numpy warns on these three by default (underflow it leaves alone)
    with np.errstate(divide="raise", over="raise", invalid="raise"):
        t, Y, g, theta, (Q, q) = box_extension(Pieces1D(sigma, beta), u, w, lo, hi, C, 2)
    for out in (t, Y, g, theta, Q, q):
        assert np.all(np.isfinite(out))
    assert np.all((Y >= lo) & (Y <= hi))


# ------------------------------------------------------------------ duals balanced at a corner
def _box_sets(seed, k=60, m=4):
    rng = np.random.default_rng(seed)
    a = np.abs(rng.normal(size=(k, m))) * rng.uniform(0.2, 1.0, size=(k, 1))
    a[rng.random(size=(k, m)) < 0.2] = 0.0  # entries with nothing to cancel
    radius = rng.uniform(0.1, 0.9, size=k) * np.linalg.norm(a, axis=1)
    return a, radius


@pytest.mark.parametrize("seed", range(4))
def test_each_rows_response_is_its_farthest_point_along_the_weights(seed):
    """:func:`_fill` against CVXPY's maximum of ``<omega, r>`` over each row's set."""
    from dpcvx.certification.box import _fill

    a, radius = _box_sets(seed)
    omega = np.random.default_rng(seed + 10).dirichlet(np.ones(a.shape[1]))
    r = _fill(a, radius, omega)
    assert np.all(r >= 0) and np.all(r <= a * (1 + 1e-12))
    assert np.all(np.linalg.norm(r, axis=1) <= radius * (1 + 1e-12))
    R = cp.Variable(a.shape, nonneg=True)
    cons = [R <= a, cp.norm(R, 2, axis=1) <= radius]
    ref = cp.Problem(cp.Maximize(cp.sum(R @ omega)), cons)
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11)
    np.testing.assert_allclose(r @ omega, R.value @ omega, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_balance_meets_every_need_or_finds_the_least_shortfall(seed):
    """:func:`_balance` against CVXPY's largest ``t`` with ``sum_i r_i / n >= c + t``: on
    feasible targets (``c`` below what the rows can give) every need is met; on infeasible
    ones (the negative control) the shortfall found is the least one, and stays a
    shortfall."""
    from dpcvx.certification.box import _balance

    a, radius = _box_sets(seed)
    k, m = a.shape
    n = 3 * k
    for shift in (-0.3, 0.4):
        c = (a.sum(axis=0) / n) * (0.5 + shift) * np.random.default_rng(seed).uniform(0.5, 1.0, m)
        R = cp.Variable(a.shape, nonneg=True)
        t = cp.Variable()
        cons = [R <= a, cp.norm(R, 2, axis=1) <= radius, cp.sum(R, axis=0) / n >= c + t]
        ref = cp.Problem(cp.Maximize(t), cons)
        ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11)
        r = _balance(a, radius, c, n)
        assert r is not None
        assert np.all(r <= a * (1 + 1e-12))
        assert np.all(np.linalg.norm(r, axis=1) <= radius * (1 + 1e-12))
        slack = float(np.min(r.sum(axis=0) / n - c))
        assert (slack >= 0) == (t.value >= 0)
        if t.value < 0:
            assert slack >= t.value - 1e-7


def _counted_fills(monkeypatch):
    import dpcvx.certification.box as box_module

    fills = []
    fill = box_module._fill

    def counted(*args):
        fills.append(1)
        return fill(*args)

    monkeypatch.setattr(box_module, "_fill", counted)
    return fills


@pytest.mark.parametrize("seed", range(6))
def test_newton_steps_meet_needs_with_room_in_a_few_responses(seed, monkeypatch):
    """:func:`_entropic` on needs that leave room (CVXPY's largest common slack ``t`` less
    a third of ``|t|``, on every coordinate): the responses it returns meet every need
    within :data:`ENTROPIC_FILLS` responses and lie in each row's set, where the uniform
    weights alone fall short (so the steps did the work). With the needs raised past what
    any allocation meets it returns None, and before its budget runs out: the dual's value
    turns negative within three responses, which proves it."""
    from dpcvx.certification.box import ENTROPIC_FILLS, _entropic, _fill

    a, radius = _box_sets(seed, k=200, m=5)
    k, m = a.shape
    n = 2 * k
    rng = np.random.default_rng(seed + 20)
    c = (a.sum(axis=0) / n) * rng.uniform(0.05, 1.0, m)
    R = cp.Variable(a.shape, nonneg=True)
    t = cp.Variable()
    cons = [R <= a, cp.norm(R, 2, axis=1) <= radius, cp.sum(R, axis=0) / n >= c + t]
    cp.Problem(cp.Maximize(t), cons).solve(solver=cp.CLARABEL)
    t = float(t.value)
    need = c + t - abs(t) / 3
    tight = np.einsum("km,km->k", a, a) > radius**2
    given = a[~tight].sum(axis=0) / n
    uniform = _fill(a[tight], radius[tight], np.full(m, 1.0 / m))
    assert np.min(given + uniform.sum(axis=0) / n - need) < 0
    fills = _counted_fills(monkeypatch)
    r, _ = _entropic(a[tight], radius[tight], given, need, n)
    assert r is not None and len(fills) <= ENTROPIC_FILLS
    assert np.all(given + r.sum(axis=0) / n >= need)
    assert np.all((r >= 0) & (r <= a[tight]))
    assert np.all(np.linalg.norm(r, axis=1) <= radius[tight] * (1 + 1e-12))
    before = len(fills)
    assert _entropic(a[tight], radius[tight], given, c + t + abs(t) / 10, n)[0] is None
    assert len(fills) - before <= 3 < ENTROPIC_FILLS


@pytest.mark.parametrize("seed", range(3))
def test_the_duals_hessian_is_the_jacobian_of_the_responses(seed):
    """:func:`_dual_hessian` against central differences of ``sum_i r_i(omega) / n`` (the
    gradient of the balance's dual), on rows with some entries capped and some rows that fit
    in their ball; and it is symmetric positive semidefinite."""
    from dpcvx.certification.box import _dual_hessian, _fill

    a, radius = _box_sets(seed, k=80, m=5)
    n = 160
    omega = np.random.default_rng(seed + 30).dirichlet(np.ones(a.shape[1]))
    r = _fill(a, radius, omega)
    capped = (r == a) & (a > 0)
    assert capped.any() and (~capped & (a > 0)).any()
    H = _dual_hessian(a, r, omega, n)
    h = 1e-7
    fd = np.stack(
        [
            (
                _fill(a, radius, omega + h * e).sum(axis=0)
                - _fill(a, radius, omega - h * e).sum(axis=0)
            )
            / (2 * h * n)
            for e in np.eye(a.shape[1])
        ],
        axis=1,
    )
    np.testing.assert_allclose(H, fd, atol=1e-6 * np.abs(fd).max())
    np.testing.assert_allclose(H, H.T, atol=1e-15)
    assert np.linalg.eigvalsh(H).min() >= -1e-12


def test_a_balance_on_the_same_rows_starts_from_the_last_weights(monkeypatch):
    """Infeasible needs (the dual runs): a second balance on the same rows with needs
    moved by 1e-7 takes at most half the responses of a balance without
    :class:`BalanceMemo` (no Newton steps once the dual proved a shortfall, and its dual
    starts from the last weights), and finds the same least shortfall, to a relative 1e-8.
    Negative controls: other rows, or needs moved by a tenth, do not start from those
    weights (as many responses as cold; the same answer as cold)."""
    from dpcvx.certification.box import BalanceMemo, _balance

    a, radius = _box_sets(3, k=300, m=6)
    n = 2 * a.shape[0]
    c = a.sum(axis=0) / n
    moved = c + 1e-7 * np.random.default_rng(0).normal(size=c.size)
    fills = _counted_fills(monkeypatch)
    memo = BalanceMemo()
    _balance(a, radius, c, n, memo)
    first = len(fills)
    warm = _balance(a, radius, moved, n, memo)
    second = len(fills) - first
    cold = _balance(a, radius, moved, n)
    third = len(fills) - first - second
    assert second * 2 <= third
    short = float(np.min(warm.sum(axis=0) / n - moved))
    assert short < 0
    assert abs(short - float(np.min(cold.sum(axis=0) / n - moved))) <= 1e-8 * abs(short)
    other = a * 0.99
    before = len(fills)
    _balance(other, radius, moved, n, memo)
    assert len(fills) - before >= third // 2
    # nor do needs that moved by a tenth: they start afresh, as without the memo
    far = c * (1 + 0.1 * np.random.default_rng(1).uniform(-1, 1, c.size))
    memo = BalanceMemo()
    _balance(a, radius, c, n, memo)
    np.testing.assert_array_equal(_balance(a, radius, far, n, memo), _balance(a, radius, far, n))


def _corner_case(n=500, seed=0, B=0.3, d=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    labels = np.sign(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n))
    return X, labels, B


def _joint_reference(X, labels, B, C, lam, tol=1e-10):
    n, d = X.shape
    v, Y = cp.Variable(d), cp.Variable((n, d))
    hinge = cp.pos(1 - cp.multiply(labels, cp.sum(cp.multiply(X, Y), axis=1)))
    obj = cp.sum(hinge + C * cp.norm(Y - v[None, :], 2, axis=1)) / n + lam / 2 * cp.sum_squares(v)
    cons = [cp.abs(Y) <= B, cp.abs(v) <= B]
    ref = cp.Problem(cp.Minimize(obj), cons)
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=tol, tol_gap_rel=tol, tol_feas=tol)
    assert ref.status == cp.OPTIMAL
    return ref.value


@pytest.mark.parametrize(("seed", "B"), [(0, 0.3), (1, 0.3), (3, 0.4)])
def test_a_corner_answer_certifies_with_balanced_duals(seed, B, monkeypatch, whole_rounds):
    """A hinge loss in a small box whose answer is a corner (every coordinate at a bound): the
    least share of each copy's slope left the mean pushing out of the box on one coordinate;
    the balanced duals certify the same point, and the bracket holds CVXPY's joint program.
    Negative control: the least-share duals at that point miss the target by far."""
    import dpcvx
    import dpcvx.certification.solve as S

    X, labels, B = _corner_case(seed=seed, B=B)
    d = X.shape[1]
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    problem = dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, {x: X, y: labels}, [cp.abs(w) <= B])
    calls = []
    certify_point = S._certify_point

    def recording(*args, **kwargs):
        calls.append((args, kwargs))
        return certify_point(*args, **kwargs)

    monkeypatch.setattr(S, "_certify_point", recording)
    out = problem.lipschitz_extension(1.0).solve(regularization=0.05, accuracy=3e-10)
    assert out.solver_stats.get("balanced_duals") and out.gap <= 3e-10
    assert np.isclose(np.abs(out.w), B, atol=0.02 * B).sum() >= 3  # at or near a corner
    ref = _joint_reference(X, labels, B, 1.0, 0.05)
    tol = 1e-8 * (1 + abs(ref))
    assert out.lower - tol <= ref <= out.upper + tol
    # the certificate just before, at the same point, with the least-share duals
    (args, kwargs), last = calls[-2], calls[-1]
    np.testing.assert_array_equal(args[1], last[0][1])
    before = certify_point(*args, **kwargs)
    assert before.gap > 1e3 * 3e-10


def test_smooth_rounds_that_cycle_on_a_face_certify_with_balanced_duals(monkeypatch):
    """A logistic loss in a small box (half the examples three times heavier): the smooth
    rounds move a coordinate off its bound and back. The point they come back to is certified
    at once, with balanced duals, and the bracket holds CVXPY's joint program. Negative
    control: without the balanced duals the same rounds end in the joint program."""
    import dpcvx
    import dpcvx.certification.solve as S

    n, d, B = 2000, 4, 0.2
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    X[: n // 2] *= 3.0
    labels = np.sign(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n))

    def solve():
        w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
        problem = dpcvx.Problem(cp.logistic(-y * (x @ w)), w, {x: X, y: labels}, [cp.abs(w) <= B])
        return problem.lipschitz_extension(1.0).solve(regularization=0.05, accuracy=3e-10)

    out = solve()
    assert out.solver_stats.get("balanced_duals") and out.gap <= 3e-10
    assert out.solver_stats["solver"] in S.SMOOTH_METHODS
    v, Y = cp.Variable(d), cp.Variable((n, d))
    margins = cp.multiply(labels, cp.sum(cp.multiply(X, Y), axis=1))
    obj = cp.sum(cp.logistic(-margins) + cp.norm(Y - v[None, :], 2, axis=1)) / n
    ref = cp.Problem(cp.Minimize(obj + 0.025 * cp.sum_squares(v)), [cp.abs(Y) <= B, cp.abs(v) <= B])
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-9, tol_gap_rel=1e-9, tol_feas=1e-9)
    assert ref.status == cp.OPTIMAL
    tol = 1e-7 * (1 + abs(ref.value))
    assert out.lower - tol <= ref.value <= out.upper + tol
    monkeypatch.setattr(S, "_balanced", lambda *args: None)
    assert solve().solver_stats["solver"] == "CLARABEL"


def test_newton_steps_off_the_bounds_finish_what_balanced_duals_start(monkeypatch):
    """Hinge, d = 20, a box whose answer has all but a few coordinates at their bounds: the
    rounds' point has the right coordinates at the bounds but the free ones off, so balanced
    duals alone miss the target; Newton's steps on the free coordinates (each point certified
    with balanced duals) certify, and the bracket holds CVXPY's joint program. Negative
    control: without those steps the rounds miss (a joint program takes over)."""
    import dpcvx
    import dpcvx.certification.solve as S

    n, d, B = 1000, 20, 0.2
    rng = np.random.default_rng(0)
    X = rng.standard_t(5.0, size=(n, d)) * np.sqrt(3.0 / (5.0 * d))
    labels = np.sign(X @ rng.normal(size=d) + 0.1 * rng.normal(size=n))

    def solve():
        w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
        problem = dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, {x: X, y: labels}, [cp.abs(w) <= B])
        return problem.lipschitz_extension(1.0).solve(regularization=0.05, accuracy=3e-10)

    out = solve()
    assert out.solver_stats["solver"] == S.ARROWHEAD
    assert out.solver_stats.get("face_steps", 0) >= 1 and out.gap <= 3e-10
    ref = _joint_reference(X, labels, B, 1.0, 0.05, tol=1e-9)
    tol = 1e-7 * (1 + abs(ref))
    assert out.lower - tol <= ref <= out.upper + tol
    monkeypatch.setattr(S, "FACE_STEPS", 0)
    assert _rounds_missed(solve())


def test_a_failing_step_keeps_the_balanced_certificate(monkeypatch):
    """A Newton step off the bounds that fails (here: raises) ends the steps but keeps the
    certificate the balanced duals already gave (the rounds then go on from it)."""
    import dpcvx
    import dpcvx.certification.solve as S

    n, d, B = 1000, 20, 0.2
    rng = np.random.default_rng(0)
    X = rng.standard_t(5.0, size=(n, d)) * np.sqrt(3.0 / (5.0 * d))
    labels = np.sign(X @ rng.normal(size=d) + 0.1 * rng.normal(size=n))

    def failing(*args, **kwargs):
        raise np.linalg.LinAlgError("a step that fails")

    results = []
    balanced_rounds = S._balanced_rounds

    def recording(*args, **kwargs):
        out = balanced_rounds(*args, **kwargs)
        results.append(out)
        return out

    monkeypatch.setattr(S, "_face_step", failing)
    monkeypatch.setattr(S, "_balanced_rounds", recording)
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    problem = dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, {x: X, y: labels}, [cp.abs(w) <= B])
    out = problem.lipschitz_extension(1.0).solve(regularization=0.05, accuracy=3e-10)
    assert out.gap <= 3e-10
    assert results and all(r is not None and r.solver_stats["face_steps"] == 0 for r in results)


def test_the_balance_meets_a_coordinate_that_does_not_bind(monkeypatch, whole_rounds):
    """A hinge loss in ``|w| <= 0.05`` (n = 2888, d = 20; 19 coordinates at a bound at the
    optimum): the balance's dual puts its weight on the one coordinate that binds, and the
    best responses to it gave two other coordinates a little less than they need (3.7e-4
    short, where an exact solve of the balance has a slack of 1.1e-3), so the certificate
    charged that push and the rounds ended in the joint program. The entropic Newton steps
    meet every coordinate's need, and so do the price steps after the dual (each alone), and
    the arrowhead path certifies the private target; without both (the negative control)
    the same balance falls short."""
    import dpcvx.certification.box as box_module
    from dpcvx.certification.solve import ARROWHEAD
    from tests.certification.test_arrowhead import _sweep_case

    seen = []
    balance = box_module._balance

    def recorded(a, radius, need, n, memo=None):
        seen.append((a, radius, need, n))
        return balance(a, radius, need, n, memo)

    monkeypatch.setattr(box_module, "_balance", recorded)
    problem, X, _, _, lam = _sweep_case(96)
    assert X.shape == (2888, 20)
    sol = problem.lipschitz_extension(1.0).solve(regularization=lam, accuracy=3e-10)
    assert sol.solver_stats["solver"] == ARROWHEAD
    assert sol.gap <= 3e-10
    a, radius, need, n = seen[0]
    r = balance(a, radius, need, n)
    assert np.all(r.sum(axis=0) / n >= need - 1e-15 * (1 + np.abs(need)))
    assert np.all((r >= 0) & (r <= a))
    assert np.all(np.einsum("km,km->k", r, r) <= radius**2 * (1 + 1e-12))
    for knob in ("ENTROPIC_FILLS", "PRICE_STEPS"):
        with monkeypatch.context() as alone:
            alone.setattr(box_module, knob, 0)
            r = balance(a, radius, need, n)
            assert np.all(r.sum(axis=0) / n >= need - 1e-15 * (1 + np.abs(need)))
    monkeypatch.setattr(box_module, "ENTROPIC_FILLS", 0)
    monkeypatch.setattr(box_module, "PRICE_STEPS", 0)
    control = balance(a, radius, need, n)
    assert np.min(control.sum(axis=0) / n - need) < 0


def _sweep_case(i: int):
    """Hinge data as in the extension benchmarks' random box cases: case ``i``'s size, ``lam``
    and features (Student-t(5), scaled so that ``E||x||^2 = 1``)."""
    rng = np.random.default_rng(1000 + i)
    n, d = int(rng.integers(300, 5001)), int(rng.integers(3, 21))
    lam = float(rng.uniform(0.01, 0.05))
    X = rng.standard_t(5, size=(n, d)) * np.sqrt(3 / (5 * d))
    labels = np.sign(X @ rng.normal(size=d) + 0.1 * rng.normal(size=n))
    return X, labels, lam


def _hinge_in_box(X, labels, B, lam):
    import dpcvx

    d = X.shape[1]
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    problem = dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, {x: X, y: labels}, [cp.abs(w) <= B])
    return problem.lipschitz_extension(1.0).solve(regularization=lam, accuracy=3e-10)


def _rounds_missed(sol, target=3e-10) -> bool:
    """The rounds (the arrowhead path's first attempt) missed ``target``, and a joint
    program (with few copies, or all) certified after them."""
    first = sol.solver_stats["attempts"][0]
    return first["solver"] == "arrowhead IPM" and first["gap"] > target >= sol.gap


def test_a_coordinate_that_belongs_off_its_bound_comes_off_in_the_face_steps(
    monkeypatch, whole_rounds
):
    """Hinge, n = 3993, d = 12, in ``cp.abs(w) <= 0.4``: at a point of the rounds a coordinate
    sits at its bound, and the balanced duals leave it pushing into the box at that point and
    at the next step's (held there, it floors the certificate at ``push^2 / (2 lam)``, more
    than a step of the free coordinates removes). The face steps free it and certify on the
    arrowhead path. Negative control: with steps that hold every coordinate at its bound the
    rounds miss."""
    import dpcvx.certification.solve as S

    X, labels, lam = _sweep_case(72)
    calls = []
    face_step = S._face_step

    def recording(x, grad, Q, lam_, region, length=1.0, kinks=None, pushed=None):
        calls.append((np.array(x), np.array(grad), region, pushed))
        return face_step(x, grad, Q, lam_, region, length, kinks, pushed)

    with monkeypatch.context() as m:
        m.setattr(S, "_face_step", recording)
        out = _hinge_in_box(X, labels, 0.4, lam)
    assert out.solver_stats["solver"] == S.ARROWHEAD and out.gap <= 3e-10
    assert out.solver_stats.get("balanced_duals")
    # after an accepted step, the pushed coordinates are those of the point stepped from
    moves = [(a, b) for a, b in zip(calls, calls[1:]) if b[3] is not None and a[3] is not b[3]]
    assert moves
    for (x, grad, region, _), (*_, pushed) in moves:
        np.testing.assert_array_equal(pushed, S._pushing(x, grad, region))
    monkeypatch.setattr(S, "RELEASE", np.inf)
    assert _rounds_missed(_hinge_in_box(X, labels, 0.4, lam))


def test_face_steps_with_the_secant_curvature_certify(monkeypatch, whole_rounds):
    """Hinge, n = 4372, d = 10, in ``cp.abs(w) <= 0.1``: Newton's steps off the bounds with
    the rounds' model alone overshoot (the copies on the faces add curvature it misses); with
    the secant update of that curvature they certify on the arrowhead path. Negative control:
    without the update the rounds miss. (Case 264, n = 4852, d = 19,
    was this test's until the arrowhead method kept its multipliers' rows on their weight:
    its tenth round then met the target by 10% and now misses it.)"""
    import dpcvx.certification.solve as S

    X, labels, lam = _sweep_case(108)
    out = _hinge_in_box(X, labels, 0.1, lam)
    assert out.solver_stats["solver"] == S.ARROWHEAD and out.gap <= 3e-10
    monkeypatch.setattr(S, "_secant", lambda Q, lam, step, change: Q)
    assert _rounds_missed(_hinge_in_box(X, labels, 0.1, lam))


def test_the_last_rounds_face_steps_go_on_while_they_halve_the_gap(monkeypatch, whole_rounds):
    """Hinge, n = 2272, d = 20, in ``cp.abs(w) <= 0.1`` at 3e-10: the tenth round's face steps
    meet the target at the fifth step, one past :data:`FACE_STEPS`. No round follows the last
    one, so its steps go on up to :data:`FACE_STEPS_LAST` while they halve the gap. Negative
    control: with the last round held to ``FACE_STEPS`` the rounds miss."""
    import dpcvx.certification.solve as S

    X, labels, lam = _sweep_case(231)
    out = _hinge_in_box(X, labels, 0.1, lam)
    assert out.solver_stats["solver"] == S.ARROWHEAD and out.gap <= 3e-10
    assert out.solver_stats["ball_rounds"] == S.BALL_ROUNDS
    assert out.solver_stats["face_steps"] > S.FACE_STEPS
    monkeypatch.setattr(S, "FACE_STEPS_LAST", S.FACE_STEPS)
    assert _rounds_missed(_hinge_in_box(X, labels, 0.1, lam))


def test_the_face_steps_curvature_takes_the_gradients_change():
    """The secant update: ``lam I + Q`` after it maps the step to the gradient's change
    (BFGS's secant equation), stays symmetric positive definite, and is left as it was where
    the pair shows no positive curvature."""
    from dpcvx.certification.solve import _secant

    rng = np.random.default_rng(4)
    d, lam = 6, 0.05
    A = rng.normal(size=(d, d))
    Q = A @ A.T / d
    for _ in range(20):
        step = rng.normal(size=d)
        true = Q + np.diag(rng.uniform(0.1, 3.0, size=d))  # a curvature the model misses
        change = (true + lam * np.eye(d)) @ step
        new = _secant(Q, lam, step, change)
        np.testing.assert_allclose((new + lam * np.eye(d)) @ step, change, rtol=1e-10)
        np.testing.assert_allclose(new, new.T, atol=1e-12)
        assert np.linalg.eigvalsh(new + lam * np.eye(d)).min() > 0
    step = rng.normal(size=d)
    assert _secant(Q, lam, step, -step) is Q  # step^T change < 0
    assert _secant(Q, lam, np.zeros(d), step) is Q


def test_a_face_step_frees_a_pushed_coordinate_only_where_it_floors_the_certificate():
    """``_face_step``: a coordinate at its lower bound whose gradient pushes into the box stays
    there without ``pushed``, and with it comes off when its term of the certificate (the
    drop of its separable quadratic to the box's least value, ``push^2 / (2 lam)`` with room)
    is above what a step of the free coordinates removes; a small push stays held, and a
    coordinate of zero width is never freed. ``_held_floor`` against the closed form."""
    from dpcvx.certification.box import BoxRegion
    from dpcvx.certification.solve import _face_step, _held_floor

    lam = 0.1
    region = BoxRegion(np.array([-1.0, -1.0, -1.0, 0.5]), np.array([1.0, 1.0, 1.0, 0.5]))
    x = np.array([-1.0, 0.2, 0.0, 0.5])  # coordinate 0 at its lower bound, 3 of zero width
    Q = np.zeros((4, 4))
    Q[1, 3] = Q[3, 1] = 0.05  # were 3 freed, 1's step would change
    grad = np.array([-0.05, 0.001, 0.0, -0.3])  # pushes 0 inward; 1 a little off zero
    floor = _held_floor(x, grad, lam, region.lo, region.hi)
    assert floor[0] == pytest.approx(0.05**2 / (2 * lam))  # room: the minimizer -0.5 inside
    narrow = BoxRegion(np.array([-1.0] * 4), np.array([-0.9, 1.0, 1.0, 0.5]))
    assert _held_floor(x, grad, lam, narrow.lo, narrow.hi)[0] == pytest.approx(
        0.05 * 0.1 - lam * 0.01 / 2
    )
    pushed = np.array([True, False, False, True])
    held = _face_step(x, grad, Q, lam, region)
    assert held[0] == -1.0 and held[3] == 0.5
    freed = _face_step(x, grad, Q, lam, region, pushed=pushed)
    assert freed[0] == pytest.approx(-1.0 + 0.05 / lam) and freed[3] == 0.5
    np.testing.assert_allclose(freed[1:3], held[1:3])
    small = grad.copy()
    small[0] = -1e-4  # its floor 5e-8, below what the step on coordinate 1 removes (5e-6)
    assert _face_step(x, small, Q, lam, region, pushed=pushed)[0] == -1.0


def test_where_the_conic_program_is_too_large_the_method_solves_the_joint_program(monkeypatch):
    """The face steps' case above at a size limit under its conic program: the rounds miss
    (no face steps), nothing is stamped or handed to a solver, and the joint program with
    few copies, by the arrowhead method with each copy a block, certifies the solve and a
    private release (at n = 1e6 the only way past the rounds). The bracket holds CVXPY's
    joint program."""
    import dpcvx
    import dpcvx.certification.solve as S

    n, d, B = 1000, 20, 0.2
    rng = np.random.default_rng(0)
    X = rng.standard_t(5.0, size=(n, d)) * np.sqrt(3.0 / (5.0 * d))
    labels = np.sign(X @ rng.normal(size=d) + 0.1 * rng.normal(size=n))
    monkeypatch.setattr(S, "FACE_STEPS", 0)

    def problem():
        w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
        return dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, {x: X, y: labels}, [cp.abs(w) <= B])

    first = problem()
    size = S._conic_size(n, first._compiled(1.0)[0], first._compiled(None)[0])
    monkeypatch.setattr(S, "MAX_PROGRAM_NNZ", size - 1)
    stamped = []
    monkeypatch.setattr(S, "_program", lambda *a, **k: stamped.append(a))
    monkeypatch.setattr(S, "solve_program", lambda *a, **k: stamped.append(a))
    out = problem().lipschitz_extension(1.0).solve(regularization=0.05, accuracy=3e-10)
    assert _rounds_missed(out)
    assert out.solver_stats["solver"] == S.ARROWHEAD
    assert out.solver_stats["method"] == S.LIFTED
    ref = _joint_reference(X, labels, B, 1.0, 0.05, tol=1e-9)
    tol = 1e-7 * (1 + abs(ref))
    assert out.lower - tol <= ref <= out.upper + tol
    mech = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=0.05)
    released = problem().solve_private(mech, epsilon=1.0, rng=0)
    assert np.all(np.isfinite(released.w))
    assert not stamped


def test_a_conic_program_too_large_for_the_machine_is_not_stamped(monkeypatch, whole_rounds):
    """Where the fast paths miss and the joint program would have more nonzeros than
    ``MAX_PROGRAM_NNZ`` (counted from n and the templates only, every example with the larger
    pattern), no program is stamped or solved: a plain solve raises ``CertificationError``
    naming it, and a private release raises the fixed private text. Control: with the limit
    as shipped, the same solve goes to Clarabel. (The box was the face steps' case, 0.2, until
    the rounds certified it in their tenth round even without face steps.)"""
    import dpcvx
    import dpcvx.certification.solve as S
    from dpcvx.errors import CertificationError

    n, d, B = 1000, 20, 0.1
    rng = np.random.default_rng(0)
    X = rng.standard_t(5.0, size=(n, d)) * np.sqrt(3.0 / (5.0 * d))
    labels = np.sign(X @ rng.normal(size=d) + 0.1 * rng.normal(size=n))
    monkeypatch.setattr(S, "FACE_STEPS", 0)  # the rounds then miss (see the test above)
    # and the joint program with few copies, which the arrowhead method solves without a
    # conic program, is left out: the ladder's joint program comes next
    monkeypatch.setattr(S, "_lifted_rung", lambda *args, **kwargs: None)

    def problem():
        w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
        return dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, {x: X, y: labels}, [cp.abs(w) <= B])

    out = problem().lipschitz_extension(1.0).solve(regularization=0.05, accuracy=3e-10)
    assert out.solver_stats["solver"] == "CLARABEL"

    solved, stamped = [], []
    program = S._program

    def recording(*args, **kwargs):
        solved.append(args)
        raise AssertionError("a program over the limit reached the solver")

    def stamping(*args, **kwargs):
        stamped.append(args)
        return program(*args, **kwargs)

    first = problem()
    size = S._conic_size(n, first._compiled(1.0)[0], first._compiled(None)[0])
    monkeypatch.setattr(S, "MAX_PROGRAM_NNZ", size - 1)
    monkeypatch.setattr(S, "solve_program", recording)
    monkeypatch.setattr(S, "_program", stamping)
    with pytest.raises(CertificationError, match="conic program"):
        problem().lipschitz_extension(1.0).solve(regularization=0.05, accuracy=3e-10)
    mech = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=0.05)
    with pytest.raises(CertificationError):
        problem().solve_private(mech, epsilon=1.0, rng=0)
    # a neighbour with a row far outside the universe solves on the other n - 1 examples:
    # the limit still counts all n (one fewer would fit here)
    row = X[7].copy()
    X[7] *= 1e7
    with pytest.raises(CertificationError):
        problem().solve_private(mech, epsilon=1.0, rng=0)
    assert not solved and not stamped
    X[7] = row  # the dataset whose rounds miss (above)
    monkeypatch.setattr(S, "MAX_PROGRAM_NNZ", size)  # at the limit: stamped and solved
    with pytest.raises(CertificationError):
        problem().lipschitz_extension(1.0).solve(regularization=0.05, accuracy=3e-10)
    assert solved and stamped


@pytest.mark.parametrize("seed", range(3))
def test_the_narrowed_bracket_is_the_bisections_copy_in_fewer_passes(monkeypatch, seed):
    """The closed-form narrowing of the copy's bracket (``box._narrowed``) against the plain
    bisection it shortens (the narrowing switched off), on hinge, absolute, pinball and
    epsilon-insensitive rows (up to three kinks), some coordinates of ``w`` on their bounds,
    directions with tiny entries, and slopes over four orders: every copy's value is the
    bisection's to rounding, the narrowed bracket holds the copy (``F <= 0`` at its left end,
    ``> 0`` at its right), and the rows evaluated along the path are under a third of the
    bisection's (about 80 passes a row before)."""
    from dpcvx.certification import box

    rng = np.random.default_rng(seed)
    k, d, B = 3000, 12, 0.2
    lo, hi = -B * np.ones(d), B * np.ones(d)
    w = rng.uniform(-B, B, d)
    w[:4] = [B, -B, B, -B]
    X = rng.standard_t(3, size=(k, d)) * 10 ** rng.uniform(-2, 2, size=(k, 1))
    X[::7, 5] = 1e-12  # a tiny entry of u
    norm = np.linalg.norm(X, axis=1)
    u = X / norm[:, None]
    y = 0.3 * rng.normal(size=k)
    one, zero, q = np.ones(k), np.zeros(k), 0.3
    kinds = [
        (np.stack([zero, -np.sign(y) * norm], 1), np.stack([zero, one], 1)),  # hinge
        (np.stack([norm, -norm], 1), np.stack([-y, y], 1)),  # absolute
        (np.stack([q * norm, (q - 1) * norm], 1), np.stack([-q * y, (1 - q) * y], 1)),  # pinball
        (np.stack([norm, zero, -norm], 1), np.stack([-y - 0.1, zero, y - 0.1], 1)),  # eps-ins.
    ]
    evaluated = []
    path = box._path

    def counting(u_rows, *args):
        evaluated.append(u_rows.shape[0])
        return path(u_rows, *args)

    monkeypatch.setattr(box, "_path", counting)
    brackets = []
    narrowed = box._narrowed

    def checked(line, u_rows, w_, lo_, hi_, C_, left, right):
        out = narrowed(line, u_rows, w_, lo_, hi_, C_, left, right)
        brackets.append((line, u_rows, out))
        return out

    monkeypatch.setattr(box, "_narrowed", checked)
    for sigma, beta in kinds:
        line = Pieces1D(sigma, beta)
        evaluated.clear()
        t, Y, g, theta, _ = box.box_extension(line, u, w, lo, hi, C, k)
        fast = sum(evaluated)
        for line_rows, u_rows, (left, right) in brackets:
            assert np.all(box._slope_sum(line_rows, u_rows, w, lo, hi, C, left) <= 0)
            assert np.all(box._slope_sum(line_rows, u_rows, w, lo, hi, C, right) > 0)
        brackets.clear()
        with monkeypatch.context() as plain:
            plain.setattr(
                box, "_narrowed", lambda line, u, w, lo, hi, C, left, right: (left, right)
            )
            evaluated.clear()
            _, Y0, _, _, _ = box.box_extension(line, u, w, lo, hi, C, k)
            slow = sum(evaluated)
        value = line.value(np.einsum("kd,kd->k", u, Y)) + C * np.linalg.norm(Y - w, axis=1)
        value0 = line.value(np.einsum("kd,kd->k", u, Y0)) + C * np.linalg.norm(Y0 - w, axis=1)
        assert np.all(value <= value0 + 1e-13 * (1 + np.abs(value0)))
        assert fast < slow / 3
