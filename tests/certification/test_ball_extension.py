"""The Lipschitz extension of a one-direction piecewise-linear loss with its copy kept in an
l2 ball (:func:`dpcvx.certification.ball.ball_extension`), against independent answers:
CVXPY on every example's own problem, finite differences, and the bound's own tightness."""

import cvxpy as cp
import numpy as np
import pytest

from dpcvx.certification.ball import BallRegion, Pieces1D, ball_extension
from tests.one_direction_rows import model_rows, one_direction_rows


def _ball_extension(u, sigma, beta, w, c, R, C, n):
    return ball_extension(Pieces1D(sigma, beta), u, w, c, R, C, n)


C = 1.0


def _reference(u, sigma, beta, w, c, R):
    """Every example's extension ``min_{||y - c|| <= R} h(u^T y) + C ||w - y||`` by CVXPY."""
    k, d = u.shape
    Y = cp.Variable((k, d))
    t = cp.sum(cp.multiply(u, Y), axis=1)
    h = cp.maximum(*[cp.multiply(sigma[:, j], t) + beta[:, j] for j in range(3)])
    dist = cp.norm(Y - w[None, :], 2, axis=1)
    cons = [cp.norm(Y - c[None, :], 2, axis=1) <= R]
    prob = cp.Problem(cp.Minimize(cp.sum(h + C * dist)), cons)
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    Yv = Y.value
    return (sigma * np.einsum("kd,kd->k", u, Yv)[:, None] + beta).max(axis=1) + C * np.linalg.norm(
        Yv - w, axis=1
    )


def _bounds(u, sigma, beta, w, c, R, t, Y, g, theta):
    """Each example's value at its copy and the certificate's lower bound from ``(g, theta)``:
    ``<g, w> + h(t) - theta t - sigma_W(g - theta u)``."""
    h = (sigma * t[:, None] + beta).max(axis=1)
    value = (sigma * np.einsum("kd,kd->k", u, Y)[:, None] + beta).max(axis=1)
    value = value + C * np.linalg.norm(w[None, :] - Y, axis=1)
    v = g - theta[:, None] * u
    lower = g @ w + h - theta * t - (v @ c + R * np.linalg.norm(v, axis=1))
    return value, lower, h


@pytest.mark.parametrize("where", ["inside", "on the sphere", "off center"])
def test_copies_values_and_duals_match_the_reference_and_bound_tightly(where):
    u, sigma, beta = one_direction_rows(1)
    rng = np.random.default_rng(2)
    d = u.shape[1]
    c = np.zeros(d) if where != "off center" else rng.normal(size=d) * 0.4
    R = 1.0
    w = rng.normal(size=d)
    w *= (0.7 if where == "inside" else 1.0) * R / np.linalg.norm(w)
    w += c
    t, Y, g, theta, _ = _ball_extension(u, sigma, beta, w, c, R, C, 1)
    assert np.all(np.linalg.norm(Y - c, axis=1) <= R * (1 + 1e-12))
    value, lower, h = _bounds(u, sigma, beta, w, c, R, t, Y, g, theta)
    ref = _reference(u, sigma, beta, w, c, R)
    assert np.all(value <= ref + 1e-7)  # at least as good as CVXPY's copies
    assert np.all(value >= ref - 1e-7)
    # the certificate's ingredients are valid: ||g|| <= C, theta a slope of h at t
    assert np.all(np.linalg.norm(g, axis=1) <= C * (1 + 1e-12))
    grid = np.linspace(-5, 5, 2001)
    for i in range(len(t)):
        hg = (sigma[i][None, :] * grid[:, None] + beta[i][None, :]).max(axis=1)
        assert np.all(hg >= h[i] + theta[i] * (grid - t[i]) - 1e-9)
    # and tight: the lower bound meets the value (the negative control below shows it can miss)
    assert np.max(value - lower) <= 1e-9
    assert np.all(lower <= ref + 1e-7)


def test_a_wrong_slope_is_caught_by_the_tightness_check():
    """Negative control: with theta shifted the bound stays valid but is visibly loose."""
    u, sigma, beta = one_direction_rows(3)
    w = np.full(u.shape[1], 0.5)
    c = np.zeros(u.shape[1])
    t, Y, g, theta, _ = _ball_extension(u, sigma, beta, w, c, 1.0, C, 1)
    value, lower, _ = _bounds(u, sigma, beta, w, c, 1.0, t, Y, g, theta + 0.5)
    assert np.max(value - lower) > 1e-3


def test_the_model_is_the_extensions_second_order_expansion():
    """``(Q, q)``: the gradient is the mean of the duals, and the Hessian matches finite
    differences of the exact duals, both where a kink of ``h`` holds the copy (hinges steeper
    than C) and where none does (absolute values whose kink lies outside the ball: the copy's
    position follows ``w``)."""
    rng = np.random.default_rng(4)
    d = 4
    u, sigma, beta = model_rows(rng, d=d)
    c = np.zeros(d)
    w = rng.normal(size=d)
    w *= 0.8 / np.linalg.norm(w)
    n = 50

    def duals(v):
        return _ball_extension(u, sigma, beta, v, c, 1.0, C, n)[2].sum(axis=0) / n

    _, _, g, _, (Q, q) = _ball_extension(u, sigma, beta, w, c, 1.0, C, n)
    np.testing.assert_allclose(Q @ w + q, g.sum(axis=0) / n, atol=1e-12)
    eps = 1e-6
    H = np.stack([(duals(w + eps * e) - duals(w - eps * e)) / (2 * eps) for e in np.eye(d)], axis=1)
    np.testing.assert_allclose(Q, H, atol=1e-5 * np.abs(H).max())
    assert np.linalg.eigvalsh(Q).min() >= -1e-12


@pytest.mark.parametrize("kind", ["logistic", "huber", "square"])
def test_smooth_atoms_in_the_ball_match_the_reference(kind):
    """A smooth atom ``weight psi(scale t + offset)`` along ``u``: the same checks as for
    pieces (values against CVXPY, valid and tight bounds)."""
    import dataclasses

    from dpcvx.certification.ball import Smooth1D
    from dpcvx.modeling.smooth import _Block

    rng = np.random.default_rng(5)
    k, d = 20, 4
    u = rng.normal(size=(k, d))
    u /= np.linalg.norm(u, axis=1)[:, None]
    scale = rng.uniform(0.5, 4.0, k)
    offset = rng.normal(size=k)
    blk = _Block(kind, 1.0, 0.5, np.zeros((k, d)), np.zeros(k), 1, ())
    line = Smooth1D(dataclasses.replace(blk, knots=None), 0.7, scale, offset)
    c = np.zeros(d)
    w = rng.normal(size=d)
    w *= 0.95 / np.linalg.norm(w)
    t, Y, g, theta, _ = ball_extension(line, u, w, c, 1.0, C, 1)
    Yv = cp.Variable((k, d))
    arg = cp.multiply(scale, cp.sum(cp.multiply(u, Yv), axis=1)) + offset
    atom = {"logistic": cp.logistic(arg), "huber": cp.huber(arg, 0.5), "square": cp.square(arg)}
    prob = cp.Problem(
        cp.Minimize(cp.sum(0.7 * atom[kind] + C * cp.norm(Yv - w[None, :], 2, axis=1))),
        [cp.norm(Yv, 2, axis=1) <= 1.0],
    )
    prob.solve(solver=cp.CLARABEL)
    tY = np.einsum("kd,kd->k", u, Y)
    value = line.value(tY) + C * np.linalg.norm(w - Y, axis=1)
    assert float(value.sum()) <= prob.value + 1e-6
    assert np.all(np.linalg.norm(Y, axis=1) <= 1 + 1e-12)
    assert np.all(np.linalg.norm(g, axis=1) <= C * (1 + 1e-12))
    # theta is h's derivative at t; the bound is tight
    np.testing.assert_allclose(theta, line.slope(t), rtol=1e-12, atol=1e-12)
    vec = g - theta[:, None] * u
    lower = g @ w + line.value(t) - theta * t - np.linalg.norm(vec, axis=1)
    assert np.max(value - lower) <= 1e-8


def test_given_duals_that_are_not_finite_take_the_default():
    """``slopes`` rows with an infinite or NaN entry fall back to the minorant's clipped slope
    (a finite bound, the same as NaN's); huge finite rows are clipped to the C-ball."""
    import dpcvx
    from dpcvx.certification.extension import extension_bounds

    rng = np.random.default_rng(6)
    n, d = 12, 3
    X = rng.normal(size=(n, d)) * 3
    Y = np.sign(rng.normal(size=n))
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    problem = dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, {x: X, y: Y}, [cp.norm(w) <= 1])
    decl = problem.declaration
    point = np.array([0.3, -0.2, 0.1])
    copies = np.broadcast_to(point, (n, d)).copy()
    base = np.full((n, d), np.nan)
    weird = base.copy()
    weird[0] = [np.inf, 0.0, 0.0]
    weird[1] = [np.nan, 1.0, 0.0]
    weird[2] = [1e300, -1e300, 0.0]
    up0, lo0, g0, *_ = extension_bounds(
        decl, None, point, None, point, 1.0, copies=copies, slopes=base
    )
    up1, lo1, g1, *_ = extension_bounds(
        decl, None, point, None, point, 1.0, copies=copies, slopes=weird
    )
    assert np.all(np.isfinite(lo1)) and np.all(lo1 <= up1)
    np.testing.assert_array_equal(lo1[:2], lo0[:2])
    assert np.all(np.linalg.norm(g1, axis=1) <= 1.0)


def test_rows_whose_minimizers_form_an_interval_settle_in_a_few_steps(monkeypatch):
    """Huber rows on labels in {-1, 1} with a small ball: for many of them ``h + C D`` is flat
    on an interval, or Newton's step overshoots a jump of its curvature, and bisection alone
    took ~40 halvings there. With 12 safeguarded steps (secant where Newton's is refused, an
    end of zero derivative settled) every row must still be exact: tight bounds and CVXPY's
    values."""
    import dataclasses

    import dpcvx.certification.ball as ball
    from dpcvx.certification.ball import Smooth1D
    from dpcvx.modeling.smooth import _Block

    monkeypatch.setattr(ball, "_NEWTON", 12)
    rng = np.random.default_rng(6)
    k, d, R = 400, 5, 0.5
    X = rng.normal(size=(k, d)) / np.sqrt(d)
    norms = np.linalg.norm(X, axis=1)
    u = X / norms[:, None]
    labels = np.sign(rng.normal(size=k))
    blk = _Block("huber", 1.0, 1.0, np.zeros((k, d)), np.zeros(k), 1, ())
    line = Smooth1D(dataclasses.replace(blk, knots=None), 1.0, norms, -labels)
    w = rng.normal(size=d)
    w *= R / np.linalg.norm(w)
    c = np.zeros(d)
    t, Y, g, theta, _ = ball_extension(line, u, w, c, R, C, 1)
    value = line.value(np.einsum("kd,kd->k", u, Y)) + C * np.linalg.norm(w - Y, axis=1)
    vec = g - theta[:, None] * u
    lower = g @ w + line.value(t) - theta * t - R * np.linalg.norm(vec, axis=1)
    assert np.max(value - lower) <= 1e-9
    Yv = cp.Variable((k, d))
    arg = cp.multiply(norms, cp.sum(cp.multiply(u, Yv), axis=1)) - labels
    prob = cp.Problem(
        cp.Minimize(cp.sum(cp.huber(arg, 1.0) + C * cp.norm(Yv - w[None, :], 2, axis=1))),
        [cp.norm(Yv, 2, axis=1) <= R],
    )
    prob.solve(solver=cp.CLARABEL)
    assert float(value.sum()) <= prob.value + 1e-6


@pytest.mark.parametrize(
    "a, steep",
    [
        (0.6, 2.0),  # the steep side pushes the copy outward: clipped to C / sqrt(1 - a^2)
        (0.6, 1.1),  # steeper than C, within that bound: the loss's own pieces
        (-0.6, 2.0),  # the steep side pulls the copy inward: clipped to C
        (0.95, 3.0),  # u nearly along the normal: a bound past the steepest slope
    ],
)
def test_sphere_pieces_are_the_extension_on_the_sphere_near_a_copy_at_w(a, steep):
    """A hinge whose kink sits at ``w`` on the sphere, at angle ``a = u^T w`` to the normal:
    along the sphere, :meth:`ExtensionPieces.boundary_pieces` matches the exact extension
    (:func:`ball_extension`) to second order in the step, on both sides of the kink; the
    loss's own pieces miss it at first order wherever the bound clips (the control)."""
    from dpcvx.certification.arrowhead import ExtensionPieces

    rng = np.random.default_rng(0)
    d = 4
    c = np.zeros(d)
    w = rng.normal(size=d)
    w /= np.linalg.norm(w)
    across = rng.normal(size=d)
    across -= (across @ w) * w
    across /= np.linalg.norm(across)
    u = a * w + np.sqrt(1 - a * a) * across
    sigma = np.array([[0.0, -steep]])
    beta = np.array([[0.0, steep * (u @ w)]])
    pieces = ExtensionPieces(
        model=None, source=None, C=C, u=u[None], sigma=sigma, beta=beta,
        t_lo=None, t_hi=None, weight=1.0,
    )  # fmt: skip
    s_sphere, b_sphere = pieces.boundary_pieces(np.array([0]), w, BallRegion(c, 1.0))
    clips = steep > (C / np.sqrt(1 - a * a) if a > 0 else C)
    for step in (1e-3, 1e-4):
        for side in (1.0, -1.0):
            v = w + side * step * across
            v /= np.linalg.norm(v)
            _, Y, _, _, _ = _ball_extension(u[None], sigma, beta, v, c, 1.0, C, 1)
            exact = (sigma[0] * (u @ Y[0]) + beta[0]).max() + C * np.linalg.norm(v - Y[0])
            tau = u @ v
            model = (s_sphere[0] * tau + b_sphere[0]).max()
            own = (sigma[0] * tau + beta[0]).max()
            assert abs(exact - model) <= 0.5 * step**2 + 1e-13
            if clips and tau < u @ w:  # the steep side, where the bound clips
                assert abs(exact - own) >= 0.1 * step
