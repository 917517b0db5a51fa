"""The smooth first rung for smooth losses (chosen from public structure): Newton's method on
a second-order model of the loss (L-BFGS-B where a box bound is active), then dpcvx's own
certificate (smooth terms take
their multipliers from their derivatives). Checked against independent CVXPY solves; an active
ball hands over to the interior-point ladder."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
import dpcvx.certification.solve as solve_module
from dpcvx.certification.solve import SMOOTH_METHODS, SMOOTH_PATH

N, D, LAM = 2000, 5, 0.05


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    Y = np.sign(X @ rng.normal(size=D) + 0.5 * rng.normal(size=N))
    return X, Y


@pytest.mark.parametrize("loss", ["logistic", "squared", "huber", "squared hinge"])
@pytest.mark.parametrize("domain", ["ball", "box"])
def test_smooth_losses_are_certified_by_the_quasi_newton_rung(loss, domain):
    X, Y = _data()
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    expr = {
        "logistic": cp.logistic(-y * (x @ w)),
        "squared": cp.square(x @ w - y),
        "huber": cp.huber(x @ w - y, 1.0),
        "squared hinge": cp.square(cp.pos(1 - y * (x @ w))),
    }[loss]
    dom = [cp.norm(w, 2) <= 50] if domain == "ball" else [w >= -0.2, w <= 0.2]
    problem = dpcvx.Problem(expr, w, data={x: X, y: Y}, domain=dom)
    sol = problem.solve(regularization=LAM, center=np.zeros(D), accuracy=1e-9)
    assert sol.solver_stats["solver"] in SMOOTH_METHODS
    assert sol.gap <= 1e-9
    v = cp.Variable(D)
    whole = {
        "logistic": cp.logistic(-cp.multiply(Y, X @ v)),
        "squared": cp.square(X @ v - Y),
        "huber": cp.huber(X @ v - Y, 1.0),
        "squared hinge": cp.square(cp.pos(1 - cp.multiply(Y, X @ v))),
    }[loss]
    cons = [cp.norm(v, 2) <= 50] if domain == "ball" else [v >= -0.2, v <= 0.2]
    ref = cp.Problem(cp.Minimize(cp.sum(whole) / N + LAM / 2 * cp.sum_squares(v)), cons)
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    tol = 1e-9 * (1 + abs(ref.value))
    assert sol.lower <= ref.value + tol and ref.value <= sol.upper + tol


@pytest.mark.parametrize("loss", ["logistic", "squared", "huber", "squared hinge"])
@pytest.mark.parametrize("radius", [0.02, 0.1, 0.3])
def test_an_active_ball_is_handled_by_newton_on_the_sphere(loss, radius):
    """An active ball: sequential quadratic steps, each the exact minimizer of the model
    over the ball (the trust-region subproblem), certified against CVXPY's constrained
    solve."""
    X, Y = _data(1)
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    expr = {
        "logistic": cp.logistic(-3 * y * (x @ w)),
        "squared": cp.square(x @ w - 3 * y),
        "huber": cp.huber(x @ w - 3 * y, 0.5),
        "squared hinge": cp.square(cp.pos(3 - y * (x @ w))),
    }[loss]
    problem = dpcvx.Problem(expr, w, data={x: X, y: Y}, domain=[cp.norm(w, 2) <= radius])
    w0 = np.full(D, 0.01)
    sol = problem.solve(regularization=LAM, center=w0, accuracy=1e-9)
    assert sol.gap <= 1e-9
    assert sol.solver_stats["solver"] == "Newton"
    assert np.linalg.norm(sol.w) == pytest.approx(radius, rel=1e-6)  # the ball is active
    v = cp.Variable(D)
    whole = {
        "logistic": cp.sum(cp.logistic(-3 * cp.multiply(Y, X @ v))),
        "squared": cp.sum_squares(X @ v - 3 * Y),
        "huber": cp.sum(cp.huber(X @ v - 3 * Y, 0.5)),
        "squared hinge": cp.sum_squares(cp.pos(3 - cp.multiply(Y, X @ v))),
    }[loss] / N
    ref = cp.Problem(cp.Minimize(whole + LAM / 2 * cp.sum_squares(v - w0)), [cp.norm(v) <= radius])
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    tol = 1e-8 * (1 + abs(ref.value))
    assert sol.lower <= ref.value + tol and ref.value <= sol.upper + tol


def test_the_ball_quadratic_matches_a_reference_solve():
    """The trust-region subproblem against CVXPY, inside and on the sphere, including an
    ill-conditioned model."""
    from dpcvx.certification.solve import _ball_quadratic

    rng = np.random.default_rng(4)
    for cond in (1.0, 1e6):
        M = rng.normal(size=(6, 6))
        Q, _ = np.linalg.qr(M)
        H = Q @ np.diag(np.geomspace(1.0, 1.0 / cond, 6)) @ Q.T
        for scale in (0.01, 10.0):
            b = rng.normal(size=6) * scale
            v = _ball_quadratic(H, b, 1.0)
            ref = cp.Variable(6)
            prob = cp.Problem(
                cp.Minimize(cp.quad_form(ref, cp.psd_wrap(H)) / 2 + b @ ref), [cp.norm(ref) <= 1]
            )
            prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12)
            mine = float(v @ H @ v / 2 + b @ v)
            assert np.linalg.norm(v) <= 1 + 1e-12
            assert mine <= prob.value + 1e-9 * (1 + abs(prob.value))


def test_a_nonsmooth_loss_never_takes_the_quasi_newton_rung():
    X, Y = _data(2)
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    problem = dpcvx.Problem(
        cp.pos(1 - y * (x @ w)), w, data={x: X, y: Y}, domain=[cp.norm(w, 2) <= 50]
    )
    sol = problem.solve(regularization=LAM, accuracy=1e-8)
    assert all(a["solver"] != SMOOTH_PATH for a in sol.solver_stats["attempts"])


# --------------------------------------------------------------------------------------------
# The second-order model behind Newton's method, against the declaration and finite differences


def _model_cases():
    rng = np.random.default_rng(5)
    n, d, k = 40, 4, 3
    X = rng.normal(size=(n, d))
    Y = np.sign(rng.normal(size=n))
    Z = rng.normal(size=(n, k, d))
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    z = cp.Parameter((k, d))
    return (
        {
            "logistic": (cp.logistic(-y * (x @ w)), {x: X, y: Y}),
            "squared": (cp.square(x @ w - y), {x: X, y: Y}),
            "huber": (cp.huber(x @ w - y, 0.7), {x: X, y: Y}),
            "exp": (cp.exp(0.3 * (x @ w)), {x: X}),
            "sum_squares": (cp.sum_squares(z @ w - 1.0), {z: Z}),
            "quad_over_lin": (cp.quad_over_lin(z @ w, 2.0), {z: Z}),
            "log_sum_exp": (cp.log_sum_exp(z @ w) - y * (x @ w), {z: Z, x: X, y: Y}),
            "weighted": (2.0 * cp.logistic(x @ w) + 0.5 * cp.square(x @ w) + 3 * (x @ w), {x: X}),
            "elementwise vector": (cp.sum(cp.square(z @ w)), {z: Z}),
            "squared hinge": (cp.square(cp.pos(1 - y * (x @ w))), {x: X, y: Y}),
            "squared hinge, maximum": (cp.power(cp.maximum(0, 0.5 - y * (x @ w)), 2), {x: X, y: Y}),
            "squared hinge, vector": (cp.sum(cp.square(cp.pos(z @ w - 0.5))), {z: Z}),
            "square(abs(r))": (cp.square(cp.abs(x @ w - y)), {x: X, y: Y}),
            "norm(r) ** 2": (cp.norm(x @ w - y) ** 2, {x: X, y: Y}),
        },
        w,
        d,
    )


@pytest.mark.parametrize("case", list(_model_cases()[0]))
def test_the_smooth_model_matches_the_declaration_and_finite_differences(case):
    from dpcvx.modeling.declaration import Declaration
    from dpcvx.modeling.smooth import smooth_model

    cases, w, d = _model_cases()
    loss, data = cases[case]
    decl = Declaration(loss, w, data, [cp.norm(w, 2) <= 10])
    model = smooth_model(decl)
    assert model is not None
    assert smooth_model(decl) is model  # compiled once per declaration
    rng = np.random.default_rng(6)
    for _ in range(3):
        point = 0.3 * rng.normal(size=d)
        np.testing.assert_allclose(
            model.values(point), decl.loss_values(point), rtol=1e-12, atol=1e-12
        )
        value, grad = model.value_grad(point)
        assert value == pytest.approx(float(np.mean(decl.loss_values(point))), rel=1e-12)
        h = 1e-6
        fd = np.array(
            [
                (model.value_grad(point + h * e)[0] - model.value_grad(point - h * e)[0]) / (2 * h)
                for e in np.eye(d)
            ]
        )
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7)
        H = model.hessian(point)
        fdh = np.array(
            [
                (model.value_grad(point + h * e)[1] - model.value_grad(point - h * e)[1]) / (2 * h)
                for e in np.eye(d)
            ]
        )
        np.testing.assert_allclose(H, H.T, rtol=0, atol=1e-12)
        np.testing.assert_allclose(H, fdh, rtol=1e-5, atol=1e-6)


def test_non_smooth_or_generic_losses_have_no_model():
    from dpcvx.modeling.declaration import Declaration
    from dpcvx.modeling.smooth import smooth_model

    w = cp.Variable(2)
    x = cp.Parameter(2)
    data = {x: np.ones((5, 2))}
    for loss in (
        cp.abs(x @ w),
        cp.pos(1 - x @ w),
        cp.norm(x - w, 2),
        cp.square(cp.maximum(x @ w, 0.5)),  # flat at 0.25 below 0.5: a kink there
        cp.power(cp.pos(x @ w), 1.5),  # no second derivative at zero
        cp.huber(cp.maximum(x @ w, 0.5, -x @ w), 1.0),  # two pieces in w: a kink
    ):
        assert smooth_model(Declaration(loss, w, data, [cp.norm(w, 2) <= 1])) is None


def test_newton_reuses_one_factorization_for_a_quadratic_and_certifies():
    X, Y = _data(3)
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    problem = dpcvx.Problem(cp.square(x @ w - y), w, data={x: X, y: Y}, domain=[cp.norm(w) <= 50])
    sol = problem.solve(regularization=LAM, center=np.zeros(D), accuracy=1e-10)
    assert sol.solver_stats["solver"] == "Newton"
    assert sol.solver_stats["iterations"] <= 3
    assert sol.gap <= 1e-10
    # the closed form: (2 X^T X / n + lam I) w = 2 X^T Y / n
    closed = np.linalg.solve(2 * X.T @ X / N + LAM * np.eye(D), 2 * X.T @ Y / N)
    np.testing.assert_allclose(sol.w, closed, rtol=1e-8, atol=1e-10)


def test_an_active_box_bound_is_polished_on_the_free_coordinates():
    X, Y = _data(4)
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    problem = dpcvx.Problem(
        cp.logistic(-y * (x @ w)), w, data={x: X, y: Y}, domain=[w >= -0.3, w <= 0.3]
    )
    sol = problem.solve(regularization=LAM, center=np.zeros(D), accuracy=1e-10)
    assert sol.solver_stats["solver"] == "L-BFGS-B + Newton"
    assert sol.gap <= 1e-10
    active = np.isclose(np.abs(sol.w), 0.3)
    assert active.any() and not active.all()


def test_a_multinomial_loss_takes_newton():
    rng = np.random.default_rng(7)
    n, d, k = 500, 3, 4
    feats = rng.normal(size=(n, d))
    labels = rng.integers(k, size=n)
    W = cp.Variable(k * d)
    x = cp.Parameter(d)
    xe = cp.Parameter(k * d)  # the features in the true class's block: xe @ W is its score
    scores = cp.hstack([x @ W[j * d : (j + 1) * d] for j in range(k)])
    blocks = np.einsum("nk,nd->nkd", np.eye(k)[labels], feats).reshape(n, k * d)
    problem = dpcvx.Problem(
        cp.log_sum_exp(scores) - xe @ W,
        W,
        data={x: feats, xe: blocks},
        domain=[cp.norm(W, 2) <= 100],
    )
    sol = problem.solve(regularization=LAM, center=np.zeros(k * d), accuracy=1e-9)
    assert sol.solver_stats["solver"] == "Newton"
    assert sol.gap <= 1e-9


def test_the_smooth_rung_never_relies_on_the_lipschitz_bounds(monkeypatch):
    """Declare every example light (a wrong bound): the smooth rung then optimizes the plain
    loss, but its point is certified for the extension's objective F_C, whose optimum (an
    independent joint solve with every copy y_i) the bracket must contain."""
    import dpcvx.certification.solve as solve_module

    rng = np.random.default_rng(8)
    n, d, C, lam = 20, 3, 0.5, 0.2
    X = rng.standard_t(2.5, size=(n, d)) * 2.0
    Y = np.sign(X @ rng.normal(size=d) + 0.1)
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    problem = dpcvx.Problem(
        cp.logistic(-y * (x @ w)), w, data={x: X, y: Y}, domain=[cp.norm(w, 2) <= 1]
    )
    monkeypatch.setattr(solve_module, "lipschitz_bounds", lambda decl: np.zeros(decl.n))
    sol = problem.lipschitz_extension(C).solve(regularization=lam)
    W = cp.Variable(d)
    V = cp.Variable((n, d))
    obj = (
        cp.sum(cp.logistic(-cp.multiply(Y, cp.sum(cp.multiply(X, V), axis=1)))) / n
        + C * cp.sum(cp.norm(W[None, :] - V, 2, axis=1)) / n
        + lam / 2 * cp.sum_squares(W)
    )
    ref = cp.Problem(cp.Minimize(obj), [cp.norm(W) <= 1, cp.norm(V, 2, axis=1) <= 1])
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    assert sol.lower <= ref.value + 1e-8 <= sol.upper + 2e-8


def _joint_program_within(sol, value, W, V, w0, C, domain, radius, box) -> None:
    """``sol``'s bracket holds the optimum of paper 000's joint program (Lemma 2.7) solved by
    CVXPY with every copy: the examples' losses ``value`` at their copies ``V``, the copies
    and ``W`` in the ball of ``radius`` or the box ``[-box, box]``."""
    n = V.shape[0]
    inside = (
        [cp.norm(W) <= radius, cp.norm(V, 2, axis=1) <= radius]
        if domain == "ball"
        else [W >= -box, W <= box, V >= -box, V <= box]
    )
    obj = (
        cp.sum(value) / n
        + C * cp.sum(cp.norm(W[None, :] - V, 2, axis=1)) / n
        + LAM / 2 * cp.sum_squares(W - w0)
    )
    ref = cp.Problem(cp.Minimize(obj), inside)
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    tol = 1e-8 * (1 + abs(ref.value))
    assert sol.lower <= ref.value + tol and ref.value <= sol.upper + tol


def _extension_value(loss, X, Y, V):
    z = cp.sum(cp.multiply(X, V), axis=1)
    if loss == "logistic":
        return cp.logistic(-cp.multiply(Y, z))
    if loss == "squared":
        return cp.square(z - Y)
    if loss == "squared hinge":
        return cp.square(cp.pos(1 - cp.multiply(Y, z)))
    return cp.huber(z - Y, 0.5)


@pytest.mark.parametrize("domain", ["ball", "box"])
@pytest.mark.parametrize("loss", ["logistic", "squared", "huber", "squared hinge"])
def test_the_extension_of_steep_examples_runs_on_newton(loss, domain):
    """Examples steeper than C: the extension of one smooth atom of an affine argument is the
    atom continued linearly beyond the knots where its slope reaches C; Newton runs on it and
    its point is certified for paper 000's extension (copies in W), against the joint program
    solved by CVXPY with every copy."""
    rng = np.random.default_rng(12)
    n, d, C = 300, 4, 1.0
    X = rng.normal(size=(n, d))
    X[: n // 2] *= 3.0
    Y = np.sign(X @ rng.normal(size=d) + 0.5 * rng.normal(size=n))
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    expr = {
        "logistic": cp.logistic(-y * (x @ w)),
        "squared": cp.square(x @ w - y),
        "huber": cp.huber(x @ w - y, 0.5),
        "squared hinge": cp.square(cp.pos(1 - y * (x @ w))),
    }[loss]
    dom = [cp.norm(w, 2) <= 50] if domain == "ball" else [w >= -5, w <= 5]
    problem = dpcvx.Problem(expr, w, data={x: X, y: Y}, domain=dom)
    w0 = np.full(d, 0.1)
    sol = problem.lipschitz_extension(C).solve(regularization=LAM, center=w0, accuracy=1e-9)
    assert sol.solver_stats["solver"] == "Newton" and sol.gap <= 1e-9
    assert sol.solver_stats["extension_copies"] > 0
    W = cp.Variable(d)
    V = cp.Variable((n, d))
    _joint_program_within(sol, _extension_value(loss, X, Y, V), W, V, w0, C, domain, 50.0, 5.0)


def test_the_extension_model_matches_the_one_dimensional_infimal_convolution():
    """The relaxed extension's value at random points equals min_s psi(s) + c |s - v| by brute
    force on a fine grid, per example."""
    from dpcvx.modeling.declaration import Declaration
    from dpcvx.modeling.smooth import extension_model, smooth_model

    rng = np.random.default_rng(13)
    n, d, C = 6, 3, 0.7
    X = rng.normal(size=(n, d)) * 2
    Y = np.sign(rng.normal(size=n))
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    decl = Declaration(cp.logistic(-y * (x @ w)), w, {x: X, y: Y}, [cp.norm(w) <= 10])
    ext = extension_model(smooth_model(decl), C)
    point = rng.normal(size=d)
    values = ext.model.values(point)
    grid = np.linspace(-40, 40, 400001)
    for i in range(n):
        a = -Y[i] * X[i]
        slope = C / np.linalg.norm(a)
        v = a @ point
        coarse = np.logaddexp(0.0, grid) + slope * np.abs(grid - v)
        best = grid[np.argmin(coarse)]
        fine = np.linspace(best - 1e-3, best + 1e-3, 200001)
        brute = np.min(np.logaddexp(0.0, fine) + slope * np.abs(fine - v))
        assert abs(values[i] - brute) <= 1e-9


@pytest.mark.parametrize("domain", ["ball", "box"])
@pytest.mark.parametrize("loss", ["squared hinge", "square(abs(r))"])
def test_copies_leaving_a_small_domain_keep_newton_for_a_squared_maximum(loss, domain):
    """A squared maximum's block (the squared hinge, ``square(abs(r))``) hands the certificate
    no multipliers of its own; the extension's rounds in a small ball or box took the atom's
    derivative from those multipliers and failed (an assertion), so the conic program took
    over, and where it is too large to stamp (n = 1e6) the release aborted on some datasets
    and not on their neighbours. The rounds now run on Newton's path and certify against the
    joint program solved by CVXPY with every copy."""
    rng = np.random.default_rng(21)
    n, d, C = 300, 4, 1.0
    X = rng.normal(size=(n, d))
    X[: n // 2] *= 3.0
    Y = np.sign(X @ rng.normal(size=d) + 0.5 * rng.normal(size=n))
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    expr = {
        "squared hinge": cp.square(cp.pos(1 - y * (x @ w))),
        "square(abs(r))": cp.square(cp.abs(x @ w - 3 * y)),
    }[loss]
    dom = [cp.norm(w, 2) <= 0.3] if domain == "ball" else [w >= -0.3, w <= 0.3]
    problem = dpcvx.Problem(expr, w, data={x: X, y: Y}, domain=dom)
    w0 = np.full(d, 0.1)
    sol = problem.lipschitz_extension(C).solve(regularization=LAM, center=w0, accuracy=1e-9)
    assert sol.solver_stats["solver"] in SMOOTH_METHODS and sol.gap <= 1e-9
    assert sol.solver_stats.get("ball_rounds")  # copies left the domain
    W, V = cp.Variable(d), cp.Variable((n, d))
    z = cp.sum(cp.multiply(X, V), axis=1)
    value = {
        "squared hinge": cp.square(cp.pos(1 - cp.multiply(Y, z))),
        "square(abs(r))": cp.square(z - 3 * Y),
    }[loss]
    _joint_program_within(sol, value, W, V, w0, C, domain, 0.3, 0.3)


def test_a_missed_default_target_raises_a_certification_error(monkeypatch):
    """Without an accuracy, a solve whose rungs all miss the default target (a row 1e8 times
    the others, the conic program too large to stamp) raises ``CertificationError`` naming
    that target; the message formatted the missing accuracy and raised ``TypeError``."""
    from dpcvx.certification import solve as solve_module
    from dpcvx.errors import CertificationError

    monkeypatch.setattr(solve_module, "MAX_PROGRAM_NNZ", 1000)
    rng = np.random.default_rng(3)
    n, d = 3000, 4
    X = rng.normal(size=(n, d))
    X *= 0.45 / np.linalg.norm(X, axis=1, keepdims=True)
    Y = np.sign(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n))
    X[0] *= 1e8
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    problem = dpcvx.Problem(cp.square(x @ w - y), w, {x: X, y: Y}, [cp.norm(w) <= 1.0])
    with pytest.raises(CertificationError, match="accuracy target"):
        problem.lipschitz_extension(1.0).solve(regularization=0.05)


#: powers above two and the Huber function of a maximum with zero: one smooth scalar atom
#: each (``dpcvx.modeling.smooth._one_sided``); per loss the example's expression of ``(z,
#: y)`` (``z = x.w``) and the same over the data
ONE_SIDED = {
    "power(pos(1 - y x.w), 3)": lambda z, y: cp.power(cp.pos(1 - cp.multiply(y, z)), 3),
    "power(r, 4)": lambda z, y: cp.power(z - y, 4),
    "power(abs(r), 3)": lambda z, y: cp.power(cp.abs(z - y), 3),
    "power(pos(r), 2.5)": lambda z, y: cp.power(cp.pos(z - y), 2.5),
    "huber(pos(1 - y x.w), 0.5)": lambda z, y: cp.huber(cp.pos(1 - cp.multiply(y, z)), 0.5),
}


def _one_sided_problem(loss, X, Y, dom):
    d = X.shape[1]
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    return dpcvx.Problem(ONE_SIDED[loss](x @ w, y), w, data={x: X, y: Y}, domain=dom(w))


@pytest.mark.parametrize("domain", ["ball", "box"])
@pytest.mark.parametrize("loss", list(ONE_SIDED))
def test_one_sided_powers_and_hubers_run_on_newton(loss, domain, monkeypatch):
    """The plain solve (an inactive domain) and the extension's (examples steeper than C,
    copies leaving a ball or box of size 0.3) take Newton's path, and their brackets hold
    CVXPY's optima of the ERM and of the joint program with every copy. Control: without
    the smooth block the extension takes the conic program."""
    from dpcvx.modeling import smooth

    rng = np.random.default_rng(23)
    n, d, C = 300, 4, 1.0
    X = rng.normal(size=(n, d)) * 0.5
    X[: n // 2] *= 3.0
    Y = np.sign(X @ rng.normal(size=d) + 0.5 * rng.normal(size=n))
    wide = (lambda w: [cp.norm(w, 2) <= 50]) if domain == "ball" else (lambda w: [cp.abs(w) <= 5])
    small = (
        (lambda w: [cp.norm(w, 2) <= 0.3]) if domain == "ball" else (lambda w: [cp.abs(w) <= 0.3])
    )
    w0 = np.full(d, 0.1)
    sol = _one_sided_problem(loss, X, Y, wide).solve(regularization=LAM, center=w0, accuracy=1e-9)
    assert sol.solver_stats["solver"] in SMOOTH_METHODS and sol.gap <= 1e-9
    v = cp.Variable(d)
    whole = cp.sum(ONE_SIDED[loss](X @ v, Y)) / n + LAM / 2 * cp.sum_squares(v - w0)
    ref = cp.Problem(cp.Minimize(whole), wide(v))
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    tol = 1e-7 * (1 + abs(ref.value))
    assert sol.lower <= ref.value + tol and ref.value <= sol.upper + tol
    problem = _one_sided_problem(loss, X, Y, small)
    ext = problem.lipschitz_extension(C).solve(regularization=LAM, center=w0, accuracy=1e-9)
    assert ext.solver_stats["solver"] in SMOOTH_METHODS and ext.gap <= 1e-9
    assert ext.solver_stats.get("ball_rounds")  # copies left the domain
    W, V = cp.Variable(d), cp.Variable((n, d))
    value = ONE_SIDED[loss](cp.sum(cp.multiply(X, V), axis=1), Y)
    _joint_program_within(ext, value, W, V, w0, C, domain, 0.3, 0.3)
    monkeypatch.setattr(smooth, "_one_sided", lambda term: None)
    control = _one_sided_problem(loss, X, Y, small).lipschitz_extension(C)
    assert control.solve(regularization=LAM, center=w0).solver_stats["solver"] == "CLARABEL"


def test_without_a_target_the_ladder_returns_its_best_certificate(monkeypatch):
    """Without ``accuracy`` a solve whose fast rung misses the default target goes on to the
    conic program, whose certificate can be looser: a cubed hinge's extension with one row
    1e8 times the others certified 9e-7 on Newton's path and 3e-3 from Clarabel, and the
    ladder returned the latter. It returns the tightest of them (control: that attempt's gap
    is the looser one). Newton's path now certifies that case to 1e-12 (the stable gap of
    the one-sided powers), so the default target is lowered here until it misses."""
    monkeypatch.setattr(solve_module, "SMOOTH_DEFAULT", 1e-16)
    rng = np.random.default_rng(5)
    n, d = 300, 4
    X = rng.normal(size=(n, d))
    X /= np.maximum(1, np.linalg.norm(X, axis=1))[:, None]
    Y = np.sign(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n))
    Y[Y == 0] = 1.0
    X[0] *= 1e8
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    loss = cp.power(cp.pos(1 - y * (x @ w)), 3)
    problem = dpcvx.Problem(loss, w, {x: X, y: Y}, [cp.norm(w) <= 1.0])
    sol = problem.lipschitz_extension(1.0).solve(regularization=0.05)
    gaps = [a["gap"] for a in sol.solver_stats["attempts"] if "gap" in a]
    assert len(gaps) >= 2 and sol.gap == min(gaps)
    assert max(gaps) > 10 * sol.gap  # the conic attempt was looser


def _steep_huber(n: int, d: int, seed: int = 0) -> dpcvx.Problem:
    """A Huber loss on Student-t(5) rows with ``E||x||^2 = 1`` in the unit ball: with C = 1
    about 40% of the examples are steeper than C, and the extension's optimum lies just inside
    the ball while the relaxed start's copies leave it."""
    rng = np.random.default_rng(seed)
    X = rng.standard_t(5.0, size=(n, d)) * np.sqrt(3.0 / (5.0 * d))
    Y = 0.3 * (X @ rng.normal(size=d)) + 0.3 * rng.normal(size=n)
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    return dpcvx.Problem(cp.huber(x @ w - y, 1.0), w, {x: X, y: Y}, [cp.norm(w) <= 1.0])


def test_smooth_rounds_in_a_ball_do_not_judge_a_point_twice(monkeypatch):
    """Where the smooth rounds' certificate stalls in a ball, the balanced duals' judgement
    gave the same certificate again: the duals of a ball stay as they are, the smooth rounds'
    exact copies are the ones the round found and they have no kinks. It is skipped there
    (at d = 100, n = 1e5 it cost a third of a Huber extension's time). Same point and gap as
    with it; the control, with it, judges the stalled point twice to the same gap (the stable
    gap computed at every certificate, as the balanced judgement computes it)."""
    import dpcvx.certification.extension as ext_module

    monkeypatch.setattr(ext_module, "STABLE_FAR", np.inf)
    calls: list = []
    certs: list = []
    balanced_rounds, certify_point = solve_module._balanced_rounds, solve_module._certify_point

    def recording_balanced(*args, **kwargs):
        before = certs[-1]  # the rounds' certificate at the stalled point
        out = balanced_rounds(*args, **kwargs)
        calls.append((before, out))
        return out

    def recording_certify(*args, **kwargs):
        out = certify_point(*args, **kwargs)
        certs.append(out)
        return out

    monkeypatch.setattr(solve_module, "_balanced_rounds", recording_balanced)
    monkeypatch.setattr(solve_module, "_certify_point", recording_certify)
    sol = _steep_huber(3000, 100).lipschitz_extension(1.0).solve(regularization=0.01, accuracy=1e-9)
    assert sol.gap <= 1e-9 and sol.solver_stats["ball_rounds"] >= 3 and not calls
    monkeypatch.setattr(solve_module._SmoothRounds, "rebalances", True)
    control = (
        _steep_huber(3000, 100).lipschitz_extension(1.0).solve(regularization=0.01, accuracy=1e-9)
    )
    assert calls and all(before.gap == out.gap > 1e-9 for before, out in calls)
    assert np.array_equal(control.w, sol.w) and control.gap == sol.gap
