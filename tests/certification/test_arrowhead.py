"""The arrowhead interior-point rung for piecewise-linear losses (chosen from public
structure): Mehrotra's method with one d x d Schur complement per step, its point certified by
dpcvx's certificate with the method's multipliers. Checked against independent high-accuracy
CVXPY solves of the same objective; where the domain is active the general ladder takes over."""

from __future__ import annotations

import functools

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.certification.solve import ARROWHEAD
from dpcvx.modeling.declaration import Declaration

N, D, LAM, TAU = 600, 4, 0.05, 0.3


def _data(seed=0, n=N, d=D):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    beta = rng.normal(size=d)
    Y = np.sign(X @ beta + 0.5 * rng.normal(size=n))
    R = 0.3 * X @ beta + 0.3 * rng.normal(size=n)
    return X, Y, R


def _cases(X, Y, R):
    """name: (per-example loss builder, labels, whole-data CVXPY loss builder)."""
    n = X.shape[0]
    return {
        "hinge": (
            lambda w, x, y: cp.pos(1 - y * (x @ w)),
            Y,
            lambda v: cp.sum(cp.pos(1 - cp.multiply(Y, X @ v))) / n,
        ),
        "absolute": (
            lambda w, x, y: cp.abs(x @ w - y),
            R,
            lambda v: cp.norm1(X @ v - R) / n,
        ),
        "pinball": (
            lambda w, x, y: cp.maximum(TAU * (y - x @ w), (TAU - 1) * (y - x @ w)),
            R,
            lambda v: cp.sum(cp.maximum(TAU * (R - X @ v), (TAU - 1) * (R - X @ v))) / n,
        ),
        "epsilon-insensitive": (
            lambda w, x, y: cp.pos(cp.abs(x @ w - y) - 0.1),
            R,
            lambda v: cp.sum(cp.pos(cp.abs(X @ v - R) - 0.1)) / n,
        ),
        "weighted hinge plus a linear term": (
            lambda w, x, y: 2.0 * cp.pos(1 - y * (x @ w)) + 0.1 * (x @ w),
            Y,
            lambda v: (2.0 * cp.sum(cp.pos(1 - cp.multiply(Y, X @ v))) + 0.1 * cp.sum(X @ v)) / n,
        ),
    }


def _reference(whole, d, domain, w0):
    v = cp.Variable(d)
    cons = [cp.norm(v, 2) <= 50] if domain == "ball" else [v >= -3, v <= 3]
    ref = cp.Problem(cp.Minimize(whole(v) + LAM / 2 * cp.sum_squares(v - w0)), cons)
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return ref.value


@pytest.mark.parametrize("domain", ["ball", "box"])
@pytest.mark.parametrize(
    "loss",
    ["hinge", "absolute", "pinball", "epsilon-insensitive", "weighted hinge plus a linear term"],
)
def test_piecewise_losses_are_certified_by_the_arrowhead_rung(loss, domain):
    X, Y, R = _data()
    build, labels, whole = _cases(X, Y, R)[loss]
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    dom = [cp.norm(w, 2) <= 50] if domain == "ball" else [w >= -3, w <= 3]
    problem = dpcvx.Problem(build(w, x, y), w, data={x: X, y: labels}, domain=dom)
    w0 = np.full(D, 0.1)
    sol = problem.solve(regularization=LAM, center=w0, accuracy=1e-9)
    assert sol.solver_stats["solver"] == ARROWHEAD
    assert sol.gap <= 1e-9
    ref = _reference(whole, D, domain, w0)
    tol = 1e-8 * (1 + abs(ref))
    assert sol.lower <= ref + tol and ref <= sol.upper + tol


@pytest.mark.parametrize(
    "loss",
    [
        "hinge",
        "epsilon-insensitive",
        "weighted hinge plus a linear term",
        "hinge, a vector abs and a linear term",
    ],
)
def test_row_chunks_give_the_unchunked_method(monkeypatch, loss):
    """The method runs each term in row chunks (views, each a term of its own): with chunks of
    50 rows (which split an example's elements of a vector term) it must return the unchunked
    point, and the multipliers put back per term in the examples' order (a misplaced chunk
    would give another point's multipliers), and certify."""
    import dpcvx.certification.arrowhead as ah
    from dpcvx.certification.solve import _bounds

    X, Y, R = _data(2)
    cases = _cases(X, Y, R)
    cases["hinge, a vector abs and a linear term"] = (
        lambda w, x, y: (
            cp.pos(1 - y * (x @ w)) + 0.5 * cp.sum(cp.abs(cp.multiply(x, w) - 0.1)) + 0.1 * (x @ w)
        ),
        Y,
        None,
    )
    build, labels, _ = cases[loss]
    w, x, y = cp.Variable(D), cp.Parameter(D), cp.Parameter()
    decl = Declaration(build(w, x, y), w, {x: X, y: labels}, [cp.norm(w, 2) <= 0.5])
    model = ah.piecewise_model(decl)
    bounds = _bounds(decl.domain, None)
    w0, start = np.full(D, 0.1), np.zeros(D)
    one, mus_one, _ = ah.arrowhead_ipm(model, LAM, w0, start, tol=1e-12, bounds=bounds)
    monkeypatch.setattr(ah, "CHUNK_ROWS", 50)
    assert len(ah._chunked(model.terms)[0]) > len(model.terms)
    many, mus_many, _ = ah.arrowhead_ipm(model, LAM, w0, start, tol=1e-12, bounds=bounds)
    # the sums run in another order, so the method may stop a step apart near its tolerance
    # (measured: 1e-10 apart); a misplaced chunk moves multipliers by their own size, ~1/N
    assert np.allclose(many, one, rtol=0, atol=1e-8)
    assert [m.shape for m in mus_many] == [m.shape for m in mus_one]
    for a, b in zip(mus_many, mus_one):
        assert np.allclose(a, b, rtol=0, atol=1e-8)
    problem = dpcvx.Problem(
        build(w, x, y), w, data={x: X, y: labels}, domain=[cp.norm(w, 2) <= 0.5]
    )
    sol = problem.solve(regularization=LAM, center=w0, accuracy=1e-9)
    assert sol.solver_stats["solver"] == ARROWHEAD and sol.gap <= 1e-9


def test_the_schur_complement_upper_triangle_gives_the_same_factor():
    """The Schur complement's rank-k updates (numpy's ``B^T @ B`` per chunk) give the whole
    symmetric product, the same as the smooth models' Gram product (bitwise: the same
    updates in the same order), hence the same factor, which reads the upper triangle.
    Weights with a NaN take the whole product, as before. Negative control: a wrong upper
    triangle gives another factor."""
    import dpcvx.certification.arrowhead as ah
    from dpcvx.modeling.smooth import gram

    rng = np.random.default_rng(3)
    for n in (7, 140, 40_000):  # one chunk, and several of 2^18 entries
        A = rng.normal(size=(n, D))
        c = rng.random(n)
        upper, full = ah._upper_gram(A, c), gram(A, c)
        assert np.array_equal(upper, full)
        assert np.array_equal(upper, upper.T)
        H = full + np.eye(D)
        assert np.array_equal(
            np.triu(ah._cho_factor(upper + np.eye(D))), np.triu(ah._cho_factor(H))
        )
        wrong = upper + np.eye(D)
        wrong[0, 1] += 1e-3
        assert not np.array_equal(np.triu(ah._cho_factor(wrong)), np.triu(ah._cho_factor(H)))
    c[3] = np.nan
    assert np.array_equal(ah._upper_gram(A, c), gram(A, c), equal_nan=True)


def test_a_non_finite_offset_ends_the_method_without_a_warning():
    """A non-finite iterate (here from an infinite offset of one element, whose slack starts
    as ``inf - inf``) ends the method; under warnings raised as errors, its divisions by zero
    and invalid operations raise nothing (they raised, and the rung failed before the
    certificate could judge anything)."""
    import dataclasses
    import warnings

    import dpcvx.certification.arrowhead as ah
    from dpcvx.certification.solve import _bounds

    X, Y, _ = _data(1)
    w, x, y = cp.Variable(D), cp.Parameter(D), cp.Parameter()
    decl = Declaration(cp.pos(1 - y * (x @ w)), w, {x: X, y: Y}, [cp.norm(w, 2) <= 0.5])
    model = ah.piecewise_model(decl)
    (term,) = model.terms
    b = [v.copy() for v in term.b]
    b[1][5] = np.inf
    broken = ah.PiecewiseModel(
        model.n, model.d, (dataclasses.replace(term, b=tuple(b)),), model.linear, model.kinds
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        point, _, steps = ah.arrowhead_ipm(
            broken, LAM, np.zeros(D), np.zeros(D), tol=1e-12, bounds=_bounds(decl.domain, None)
        )
    assert steps == 1 and point.shape == (D,)


def test_a_data_array_with_a_zero_where_the_jacobian_peaks_warns_nothing():
    """Matching a piece to the declaration's arrays divides at the piece's largest entry: an
    unrelated array of the same size with a zero there must not warn (a warning that depends
    on the data becomes an abort under warnings-as-errors)."""
    import warnings

    from dpcvx.certification.arrowhead import piecewise_model

    X, Y, _ = _data(4, n=80, d=3)
    Z = np.random.default_rng(5).normal(size=X.shape)
    Z[np.unravel_index(np.argmax(np.abs(Y[:, None] * X)), X.shape)] = 0.0
    w, x, y, z = cp.Variable(3), cp.Parameter(3), cp.Parameter(), cp.Parameter(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        decl = Declaration(
            cp.pos(1 - y * (x @ w)) + cp.abs(z @ w), w, {x: X, y: Y, z: Z}, [cp.norm(w) <= 1]
        )
        assert piecewise_model(decl) is not None


def test_a_vector_of_pieces_per_example():
    rng = np.random.default_rng(3)
    n, d, k = 300, 3, 4
    Z = rng.normal(size=(n, k, d))
    w = cp.Variable(d)
    z = cp.Parameter((k, d))
    problem = dpcvx.Problem(cp.sum(cp.pos(1 - z @ w)), w, data={z: Z}, domain=[cp.norm(w, 2) <= 50])
    sol = problem.solve(regularization=LAM, center=np.zeros(d), accuracy=1e-9)
    assert sol.solver_stats["solver"] == ARROWHEAD and sol.gap <= 1e-9
    v = cp.Variable(d)
    whole = sum(cp.sum(cp.pos(1 - Z[i] @ v)) for i in range(n)) / n
    ref = cp.Problem(cp.Minimize(whole + LAM / 2 * cp.sum_squares(v)))
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    assert sol.lower <= ref.value + 1e-8 and ref.value <= sol.upper + 1e-8


@pytest.mark.parametrize(
    "data",
    ["duplicated rows", "zero features", "separable", "huge offsets"],
)
def test_degenerate_data_still_certify(data):
    X, Y, R = _data(4, n=200)
    if data == "duplicated rows":
        X = np.repeat(X[:10], 20, axis=0)
        Y = np.repeat(Y[:10], 20)
    elif data == "zero features":
        X = np.zeros_like(X)
    elif data == "separable":
        Y = np.sign(X[:, 0])
        X[:, 0] += 3 * Y
    else:
        Y = Y * 1e6
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    problem = dpcvx.Problem(
        cp.pos(1 - y * (x @ w)), w, data={x: X, y: Y}, domain=[cp.norm(w, 2) <= 1e3]
    )
    # losses of order 1e6 with huge offsets: the same relative accuracy
    accuracy = 1e-2 if data == "huge offsets" else 1e-8
    sol = problem.solve(regularization=LAM, center=np.zeros(D), accuracy=accuracy)
    assert sol.gap <= accuracy  # by this rung or, where it misses, by the ladder after it
    first = sol.solver_stats["attempts"][0]
    assert first["solver"] == ARROWHEAD


@pytest.mark.parametrize("domain", ["ball", "box"])
@pytest.mark.parametrize("loss", ["hinge", "absolute", "pinball"])
def test_an_active_domain_is_part_of_the_rungs_program(loss, domain):
    """A small ball or box, active at the answer: its constraints are in the method's program
    (a rank-one or diagonal term of the Schur complement) and the point certifies against the
    reference solve of the same constrained objective."""
    X, Y, R = _data(5)
    build, labels, whole = _cases(X, Y, R)[loss]
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    dom = [cp.norm(w, 2) <= 0.05] if domain == "ball" else [w >= -0.02, w <= 0.03]
    problem = dpcvx.Problem(build(w, x, y), w, data={x: X, y: labels}, domain=dom)
    sol = problem.solve(regularization=LAM, center=np.zeros(D), accuracy=1e-9)
    assert sol.solver_stats["solver"] == ARROWHEAD and sol.gap <= 1e-9
    v = cp.Variable(D)
    cons = [cp.norm(v, 2) <= 0.05] if domain == "ball" else [v >= -0.02, v <= 0.03]
    ref = cp.Problem(cp.Minimize(whole(v) + LAM / 2 * cp.sum_squares(v)), cons)
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    tol = 1e-8 * (1 + abs(ref.value))
    assert sol.lower <= ref.value + tol and ref.value <= sol.upper + tol
    inside = np.linalg.norm(sol.w) <= 0.05 if domain == "ball" else np.all(np.abs(sol.w) <= 0.03)
    assert inside


def test_a_degenerate_box_hands_over_to_the_general_ladder():
    X, Y, _ = _data(5)
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    dom = [w >= -1, w <= 1, w[0] == 0.5]
    problem = dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, data={x: X, y: Y}, domain=dom)
    sol = problem.solve(regularization=LAM, center=np.zeros(D), accuracy=1e-9)
    assert sol.gap <= 1e-9
    assert all(a["solver"] != ARROWHEAD for a in sol.solver_stats["attempts"])


def test_losses_outside_the_class_have_no_piecewise_model():
    from dpcvx.certification.arrowhead import piecewise_model

    w = cp.Variable(2)
    x = cp.Parameter(2)
    data = {x: np.ones((5, 2))}
    for loss in (cp.square(x @ w), cp.norm(x - w, 2), cp.logistic(x @ w), x @ w):
        assert piecewise_model(Declaration(loss, w, data, [cp.norm(w, 2) <= 1])) is None
    assert piecewise_model(Declaration(cp.abs(x @ w), w, data, [cp.norm(w, 2) <= 1])) is not None


@pytest.mark.parametrize(
    "spelling, pieces",
    [
        (lambda w, x, y: cp.pos(1 - y * (x @ w)), lambda m, y: [1 - y * m, 0]),
        (lambda w, x, y: cp.maximum(0, 1 - cp.multiply(y, x @ w)), lambda m, y: [1 - y * m, 0]),
        (lambda w, x, y: cp.pos(1 - (x @ w) * y), lambda m, y: [1 - y * m, 0]),
        (
            lambda w, x, y: cp.maximum(TAU * (y - x @ w), (TAU - 1) * (y - x @ w)),
            lambda m, y: [TAU * (y - m), (TAU - 1) * (y - m)],
        ),
        (lambda w, x, y: cp.abs(x @ w - y), lambda m, y: [m - y, y - m]),
        (
            lambda w, x, y: cp.pos(cp.abs(x @ w - y) - 0.1),
            lambda m, y: [m - y - 0.1, y - m - 0.1, 0],
        ),
        (lambda w, x, y: cp.maximum(-2.5 * (x @ w), y), lambda m, y: [-2.5 * m, y]),
    ],
)
def test_the_model_holds_no_copy_of_the_data(spelling, pieces):
    """The pieces' matrix is a data array (or a derived value such as ``y x``) with the
    multiples folded into ``coefs``: no array of the data's size beyond the declaration's. Its
    pieces must still be the loss's own (``pieces(x^T w, y)``, written out by hand)."""
    from dpcvx.certification.arrowhead import piecewise_model

    X, Y, _ = _data(1, n=50, d=3)
    w, x, y = cp.Variable(3), cp.Parameter(3), cp.Parameter()
    decl = Declaration(spelling(w, x, y), w, {x: X, y: Y}, [cp.norm(w, 2) <= 1])
    (term,) = piecewise_model(decl).terms
    arrays = [*decl.data.values(), *decl.derived_values().values()]
    assert any(np.may_share_memory(term.base, v) for v in arrays)
    v = np.array([0.3, -1.2, 0.7])
    model = term.apply(v) + np.stack(term.b, axis=1)
    expected = np.array([np.broadcast_to(p, X.shape[:1]) for p in pieces(X @ v, Y)]).T
    assert np.allclose(np.sort(model, axis=1), np.sort(expected, axis=1), rtol=0, atol=1e-12)


def test_garbage_multipliers_never_certify_a_wrong_point():
    """The rung only proposes: with its multipliers replaced by garbage, the certificate of the
    same point stays a valid (if loose) bracket of the reference optimum."""
    from dpcvx.certification.certificate import certify

    X, Y, R = _data(6)
    build, labels, whole = _cases(X, Y, R)["hinge"]
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    decl = Declaration(build(w, x, y), w, {x: X, y: labels}, [cp.norm(w, 2) <= 50])
    ref = _reference(whole, D, "ball", np.zeros(D))
    rng = np.random.default_rng(0)
    point = rng.normal(size=D)
    for garbage in (rng.uniform(-5, 5, size=N), np.full(N, np.nan), np.full(N, 1e300)):
        cert = certify(decl, point, lam=LAM, w0=np.zeros(D), thetas=[[None, garbage.reshape(N)]])
        assert cert.lower <= ref + 1e-9 * (1 + abs(ref))


def test_under_an_extension_the_point_is_certified_for_f_c():
    """Where every example is C-Lipschitz on W (public bounds), the rung runs under the
    extension and its certificate is the extension's (f_C = f there): it matches the plain
    solve's optimum."""
    X, Y, _ = _data(7)
    X = X / np.linalg.norm(X, axis=1, keepdims=True)  # every row in the unit ball: L <= 1
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    problem = dpcvx.Problem(
        cp.pos(1 - y * (x @ w)), w, data={x: X, y: Y}, domain=[cp.norm(w, 2) <= 50]
    )
    sol = problem.lipschitz_extension(1.0 + 1e-6).solve(regularization=LAM, accuracy=1e-9)
    assert sol.solver_stats["solver"] == ARROWHEAD and sol.gap <= 1e-9
    assert "extension_C" in sol.solver_stats
    plain = problem.solve(regularization=LAM, accuracy=1e-9)
    assert abs(sol.upper - plain.upper) <= 1e-8


@pytest.mark.parametrize("seed", range(4))
def test_garbage_from_the_method_is_caught_by_the_certificate(monkeypatch, seed):
    """Replace the method's point and multipliers by garbage: the certificate still brackets
    the reference optimum, and a loose bracket sends the solve down the general ladder."""
    import dpcvx.certification.solve as solve_module

    X, Y, R = _data(8 + seed)
    build, labels, whole = _cases(X, Y, R)["pinball"]
    rng = np.random.default_rng(seed)

    def garbage(
        model, lam, w0, start, *, tol, max_iter=80, bounds=None, quad=None, domain_out=None
    ):
        mus = [rng.uniform(-1, 2, size=(t.b[0].size, len(t.b))) * t.c for t in model.terms]
        if domain_out is not None:  # the domain's slacks and multipliers, garbage too
            domain_out[:] = [rng.uniform(-1, 2, size=3), rng.uniform(-1, 2, size=3)]
        return rng.normal(size=model.d) * 0.5, mus, 1

    monkeypatch.setattr(solve_module, "arrowhead_ipm", garbage)
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    problem = dpcvx.Problem(build(w, x, y), w, data={x: X, y: labels}, domain=[cp.norm(w) <= 50])
    ref = _reference(whole, D, "ball", np.zeros(D))
    sol = problem.solve(regularization=LAM, center=np.zeros(D), accuracy=1e-9)
    tol = 1e-8 * (1 + abs(ref))
    assert sol.lower <= ref + tol and ref <= sol.upper + tol
    first = sol.solver_stats["attempts"][0]
    assert first["solver"] == ARROWHEAD and first["gap"] > 1e-9
    assert sol.solver_stats["solver"] != ARROWHEAD


def _extension_reference(whole_i, X, labels, C, domain, w0=None):
    """The joint program of paper 000's Lemma 2.7 with every copy ``y_i`` in W, by CVXPY."""
    n, d = X.shape
    v = cp.Variable(d)
    Yc = cp.Variable((n, d))
    inside = (
        (lambda z: [cp.norm(z, 2, axis=1) <= 50])
        if domain == "ball"
        else (lambda z: [z >= -3, z <= 3])
    )
    cons = inside(Yc) + ([cp.norm(v, 2) <= 50] if domain == "ball" else [v >= -3, v <= 3])
    w0 = np.zeros(d) if w0 is None else w0
    obj = cp.sum(whole_i(Yc)) / n + C * cp.sum(cp.norm(Yc - v[None, :], 2, axis=1)) / n
    ref = cp.Problem(cp.Minimize(obj + LAM / 2 * cp.sum_squares(v - w0)), cons)
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    return ref.value


def _per_example(loss, labels):
    """Each example's loss of the rows of a copy matrix ``Yc`` (vectorized, for references)."""

    def value(Yc, X):
        z = cp.sum(cp.multiply(X, Yc), axis=1)
        if loss == "hinge":
            return cp.pos(1 - cp.multiply(labels, z))
        if loss == "absolute":
            return cp.abs(z - labels)
        if loss == "pinball":
            return cp.maximum(TAU * (labels - z), (TAU - 1) * (labels - z))
        if loss == "logistic":
            return cp.logistic(-cp.multiply(labels, z))
        if loss == "huber":
            return cp.huber(z - labels, 1.0)
        if loss == "square":
            return cp.square(z - labels)
        return cp.pos(cp.abs(z - labels) - 0.1)

    return value


@pytest.mark.parametrize("domain", ["ball", "box"])
@pytest.mark.parametrize("loss", ["hinge", "absolute", "pinball", "epsilon-insensitive"])
def test_the_extension_of_steep_examples_runs_on_the_arrowhead_rung(loss, domain):
    """Examples steeper than C: the extension of a loss whose pieces share one direction is
    the same loss with its slopes clipped (solved by the rung at the plain cost); its point is
    certified for paper 000's extension, copies in W, against the joint program by CVXPY."""
    X, Y, R = _data(9, n=300)
    X[:150] *= 3.0  # half the examples (and most others) steeper than C = 1
    build, labels, _ = _cases(X, Y, R)[loss]
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    dom = [cp.norm(w, 2) <= 50] if domain == "ball" else [w >= -3, w <= 3]
    problem = dpcvx.Problem(build(w, x, y), w, data={x: X, y: labels}, domain=dom)
    w0 = np.full(D, 0.1)
    sol = problem.lipschitz_extension(1.0).solve(regularization=LAM, center=w0, accuracy=1e-9)
    assert sol.solver_stats["solver"] == ARROWHEAD and sol.gap <= 1e-9
    assert sol.solver_stats["extension_copies"] > 0
    value = _per_example(loss, labels)
    ref = _extension_reference(lambda Yc: value(Yc, X), X, labels, 1.0, domain, w0)
    tol = 1e-8 * (1 + abs(ref))
    assert sol.lower <= ref + tol and ref <= sol.upper + tol


def _small_ball_reference(whole_i, X, C, radius):
    """The joint program of Lemma 2.7 with every copy in the ball of ``radius`` (CVXPY)."""
    n, d = X.shape
    v = cp.Variable(d)
    Yc = cp.Variable((n, d))
    cons = [cp.norm(Yc, 2, axis=1) <= radius, cp.norm(v, 2) <= radius]
    obj = cp.sum(whole_i(Yc)) / n + C * cp.sum(cp.norm(Yc - v[None, :], 2, axis=1)) / n
    ref = cp.Problem(cp.Minimize(obj + LAM / 2 * cp.sum_squares(v)), cons)
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    return ref.value


@pytest.mark.parametrize(
    "loss",
    ["hinge", "absolute", "pinball", "epsilon-insensitive", "logistic", "huber", "square"],
)
def test_copies_outside_a_small_ball_are_kept_in_it_on_the_plain_path(loss):
    """In a small ball the relaxed extension's copies leave W. The rung puts them back in W
    exactly (a one-dimensional problem per example) and re-solves with a second-order model
    of those examples: certified on the plain loss's own path (the arrowhead method, Newton's
    method), and the certified bracket holds the joint program's optimum (copies in W, solved
    by CVXPY)."""
    X, Y, R = _data(10, n=300)
    X[:150] *= 3.0
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    labels = Y if loss in ("hinge", "logistic") else R
    per = {
        "hinge": cp.pos(1 - y * (x @ w)),
        "absolute": cp.abs(x @ w - y),
        "pinball": cp.maximum(TAU * (y - x @ w), (TAU - 1) * (y - x @ w)),
        "epsilon-insensitive": cp.pos(cp.abs(x @ w - y) - 0.1),
        "logistic": cp.logistic(-y * (x @ w)),
        "huber": cp.huber(x @ w - y, 1.0),
        "square": cp.square(x @ w - y),
    }[loss]
    radius = 0.6
    problem = dpcvx.Problem(per, w, data={x: X, y: labels}, domain=[cp.norm(w) <= radius])
    sol = problem.lipschitz_extension(1.0).solve(regularization=LAM, accuracy=1e-9)
    assert sol.gap <= 1e-9
    smooth = loss in ("logistic", "huber", "square")
    assert sol.solver_stats["solver"] == ("Newton" if smooth else ARROWHEAD)
    assert sol.solver_stats["ball_rounds"] >= 1
    value = _per_example(loss, labels)
    ref = _small_ball_reference(lambda Yc: value(Yc, X), X, 1.0, radius)
    tol = 1e-7 * (1 + abs(ref))
    assert sol.lower - tol <= ref <= sol.upper + tol


@pytest.mark.parametrize("seed", range(3))
def test_garbage_under_the_extension_is_caught(monkeypatch, seed):
    """The relaxed extension's point and multipliers replaced by garbage: the certificate of
    paper 000's extension still brackets the joint program's optimum."""
    import dpcvx.certification.solve as solve_module

    X, Y, R = _data(11 + seed, n=200)
    X[:100] *= 3.0
    rng = np.random.default_rng(seed)

    def garbage(
        model, lam, w0, start, *, tol, max_iter=80, bounds=None, quad=None, domain_out=None
    ):
        mus = [rng.uniform(-1, 2, size=(t.b[0].size, len(t.b))) * t.c for t in model.terms]
        if domain_out is not None:  # the domain's slacks and multipliers, garbage too
            domain_out[:] = [rng.uniform(-1, 2, size=3), rng.uniform(-1, 2, size=3)]
        return rng.normal(size=model.d) * 0.5, mus, 1

    monkeypatch.setattr(solve_module, "arrowhead_ipm", garbage)
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    problem = dpcvx.Problem(
        cp.pos(1 - y * (x @ w)), w, data={x: X, y: Y}, domain=[cp.norm(w) <= 50]
    )
    sol = problem.lipschitz_extension(1.0).solve(regularization=LAM, accuracy=1e-9)
    value = _per_example("hinge", Y)
    ref = _extension_reference(lambda Yc: value(Yc, X), X, Y, 1.0, "ball")
    tol = 1e-8 * (1 + abs(ref))
    assert sol.lower <= ref + tol and ref <= sol.upper + tol
    first = sol.solver_stats["attempts"][0]
    assert first["solver"] == ARROWHEAD and first["gap"] > 1e-9


def test_a_localized_domain_is_part_of_the_rungs_program():
    """Paper 000's Algorithm 4 solves over W0 = W intersect B(c, r) with copies in W: the
    localization ball joins the method's constraints and the certificate of the extension
    over W0 brackets the joint program's optimum by CVXPY."""
    X, Y, _ = _data(15, n=200)
    X[:100] *= 3.0
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    problem = dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, data={x: X, y: Y}, domain=[cp.norm(w) <= 5])
    ctx = problem.release_context(extension=None, solver=None, base=True)
    c, r, C = np.full(D, 0.3), 0.2, 1.0
    sol = ctx.solver(C=C)(LAM, np.zeros(D), 1e-9, localize=(c, r))
    assert sol.solver_stats["solver"] == ARROWHEAD and sol.gap <= 1e-9
    assert np.linalg.norm(sol.w - c) <= r * (1 + 1e-12)
    n = X.shape[0]
    v = cp.Variable(D)
    Yc = cp.Variable((n, D))
    z = cp.sum(cp.multiply(X, Yc), axis=1)
    obj = (
        cp.sum(cp.pos(1 - cp.multiply(Y, z))) / n
        + C * cp.sum(cp.norm(Yc - v[None, :], 2, axis=1)) / n
        + LAM / 2 * cp.sum_squares(v)
    )
    cons = [cp.norm(Yc, 2, axis=1) <= 5, cp.norm(v) <= 5, cp.norm(v - c) <= r]
    ref = cp.Problem(cp.Minimize(obj), cons)
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    tol = 1e-8 * (1 + abs(ref.value))
    assert sol.lower <= ref.value + tol and ref.value <= sol.upper + tol


@pytest.mark.parametrize(
    "loss, C, radius",
    [
        ("square", 1.0, 0.05),  # copies at a pole of the ball (Newton alone overshot there)
        ("square", 0.01, 0.05),
        ("huber", 0.01, 0.5),
        ("hinge", 0.01, 0.5),
        ("absolute", 0.01, 0.5),
    ],
)
def test_extension_rounds_on_mixed_scales_and_an_off_center_ball(loss, C, radius):
    """Rows at two scales (0.1 and 10), a ball off the origin, C from tiny to moderate: the
    rounds keep the plain loss's path and meet the target; for the first case the bracket
    holds the joint program's optimum."""
    rng = np.random.default_rng(3)
    n, d = 400, 5
    X = rng.normal(size=(n, d)) * rng.choice([0.1, 10.0], size=(n, 1))
    labels = np.sign(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n))
    target = X @ rng.normal(size=d) * 0.2 + rng.normal(size=n)
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    per, lab = {
        "square": (cp.square(x @ w - y), target),
        "huber": (cp.huber(x @ w - y, 0.5), target),
        "hinge": (cp.pos(1 - y * (x @ w)), labels),
        "absolute": (cp.abs(x @ w - y), target),
    }[loss]
    c0 = np.full(d, 0.2)
    problem = dpcvx.Problem(per, w, data={x: X, y: lab}, domain=[cp.norm(w - c0) <= radius])
    sol = problem.lipschitz_extension(C).solve(
        regularization=0.05, center=np.zeros(d), accuracy=1e-8
    )
    assert sol.gap <= 1e-8
    assert sol.solver_stats["solver"] in (ARROWHEAD, "Newton")
    if (loss, C) == ("square", 1.0):
        v = cp.Variable(d)
        Yc = cp.Variable((n, d))
        z = cp.sum(cp.multiply(X, Yc), axis=1)
        obj = cp.sum(cp.square(z - lab)) / n + C * cp.sum(cp.norm(Yc - v[None, :], 2, axis=1)) / n
        cons = [cp.norm(Yc - c0[None, :], 2, axis=1) <= radius, cp.norm(v - c0) <= radius]
        ref = cp.Problem(cp.Minimize(obj + 0.05 / 2 * cp.sum_squares(v)), cons)
        ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
        tol = 1e-6 * (1 + abs(ref.value))
        assert sol.lower - tol <= ref.value <= sol.upper + tol


def _sphere_case(seed, n):
    """A hinge on features of norm about 1 (about 40% steeper than C = 1) in the unit ball,
    whose solution lies on the sphere with some examples' copies at ``w`` at their kink."""
    d = 5
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    Y = np.sign(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n))
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    problem = dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, {x: X, y: Y}, [cp.sum_squares(w) <= 1])
    return problem, X, Y


@pytest.mark.parametrize("seed", [4, 6, 15, 17])
def test_examples_at_a_kink_on_the_sphere_do_not_cycle_the_rounds(seed):
    """With these seeds one or two examples sit at their kink with their copy at ``w`` on the
    sphere: each round they swapped between the second-order model and their relaxed form, and
    the rounds ended in the joint program. Solved with the extension's pieces on the sphere,
    the rounds certify the private target on the arrowhead path; for the first seed the
    bracket holds the joint program's optimum (CVXPY)."""
    problem, X, Y = _sphere_case(seed, 10_000)
    sol = problem.lipschitz_extension(1.0).solve(regularization=0.05, accuracy=3e-10)
    assert sol.solver_stats["solver"] == ARROWHEAD
    assert sol.gap <= 3e-10
    if seed == 4:
        ref = _unit_ball_hinge_reference(X, Y, 0.05)
        tol = 1e-8 * (1 + abs(ref))
        assert sol.lower - tol <= ref <= sol.upper + tol


def _unit_ball_hinge_reference(X, Y, lam, box=None):
    """The optimum of the hinge's extension ERM (C = 1) in the unit ball, or in the box
    ``|w| <= box``: the joint program of paper 000's Lemma 2.7 by CVXPY."""
    n, d = X.shape
    v = cp.Variable(d)
    Yc = cp.Variable((n, d))
    z = cp.sum(cp.multiply(X, Yc), axis=1)
    obj = (
        cp.sum(cp.pos(1 - cp.multiply(Y, z))) / n
        + cp.sum(cp.norm(Yc - v[None, :], 2, axis=1)) / n
        + lam / 2 * cp.sum_squares(v)
    )
    if box is None:
        cons = [cp.norm(Yc, 2, axis=1) <= 1, cp.norm(v) <= 1]
    else:
        cons = [cp.abs(Yc) <= box, cp.abs(v) <= box]
    ref = cp.Problem(cp.Minimize(obj), cons)
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return float(ref.value)


def _t_hinge(rng, n, d, box=None):
    """A hinge on Student-t features (5 degrees of freedom, ``E||x||^2 = 1``) in the unit
    ball, or in the box ``|w| <= box``: the problem, features and labels."""
    X = rng.standard_t(5.0, size=(n, d)) * np.sqrt(3.0 / (5.0 * d))
    Y = np.sign(X @ rng.normal(size=d) + 0.1 * rng.normal(size=n))
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    domain = [cp.norm(w) <= 1] if box is None else [cp.abs(w) <= box]
    return dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, {x: X, y: Y}, domain), X, Y


def _judged_rounds(monkeypatch, problem, lam):
    """The extension's certified solve (C = 1, target 3e-10) and the rounds whose point was
    certified."""
    import dpcvx.certification.solve as solve_module

    judged = []
    certify = solve_module._certify_point

    def counted(*args, **kwargs):
        judged.append(args[5].get("ball_rounds"))
        return certify(*args, **kwargs)

    monkeypatch.setattr(solve_module, "_certify_point", counted)
    sol = problem.lipschitz_extension(1.0).solve(regularization=lam, accuracy=3e-10)
    assert sol.solver_stats["solver"] == ARROWHEAD
    assert sol.gap <= 3e-10
    return sol, judged


def test_a_large_sphere_case_certifies_on_the_arrowhead_path():
    """The case a user met at n = 1e5 (42% of the examples steeper than C, the solution on
    the sphere): one to four examples joined or left the moved ones every round, and the
    rounds ended in the joint program (17 s of 20). They now certify the private target on
    the arrowhead path in a few rounds (about 2 s)."""
    problem, _, _ = _sphere_case(0, 100_000)
    sol = problem.lipschitz_extension(1.0).solve(regularization=0.05, accuracy=3e-10)
    assert sol.solver_stats["solver"] == ARROWHEAD
    assert sol.gap <= 3e-10


def test_a_hopeless_first_round_is_not_certified(monkeypatch):
    """Heavy-tailed features (Student-t with 5 degrees of freedom), a hinge, the unit ball
    active: the relaxed start's copies leave the ball and some sit at ``w`` on the sphere,
    where they get pieces of their own for the next solve. The slopes predict a gap far above
    the target there, and no solve has used those pieces yet, so the first round is not
    certified (that certificate missed the target every time, a quarter of the extension's
    time at n = 1e5): one certificate in all, at the second round's point, whose bracket
    holds the joint program's optimum (CVXPY)."""
    lam = 0.01
    problem, X, Y = _t_hinge(np.random.default_rng(0), 1000, 5)
    sol, judged = _judged_rounds(monkeypatch, problem, lam)
    assert judged == [2]
    ref = _unit_ball_hinge_reference(X, Y, lam)
    assert sol.lower - 1e-8 * (1 + abs(ref)) <= ref <= sol.upper + 1e-8 * (1 + abs(ref))


def test_the_method_does_not_stop_while_the_balls_residual_falls():
    """In a ball the constraint is curved: the method's first steps on this relaxed extension
    left its linearization's residual above the start's merit for five steps while it fell.
    The method stopped there (no step had improved on the best merit) and returned the
    start, whose certificate missed by 0.28, and the joint program took over (1.1 s). Steps
    that improve on the last one no longer count as stalled: one solve, certified on the
    arrowhead path, its bracket holding the joint program's optimum (CVXPY)."""
    rng = np.random.default_rng(1048)  # n = 3706, d = 16 (a case of a random sweep)
    n, d = int(rng.integers(300, 5001)), int(rng.integers(3, 21))
    lam = float(rng.uniform(0.01, 0.05))
    X = rng.standard_t(5, size=(n, d)) * np.sqrt(3 / (5 * d))
    Y = np.sign(X @ rng.normal(size=d) + 0.1 * rng.normal(size=n))
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    problem = dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, {x: X, y: Y}, [cp.norm(w) <= 1])
    sol = problem.lipschitz_extension(1.0).solve(regularization=lam, accuracy=3e-10)
    assert sol.solver_stats["solver"] == ARROWHEAD
    assert sol.gap <= 3e-10
    ref = _unit_ball_hinge_reference(X, Y, lam)
    assert sol.lower - 1e-8 * (1 + abs(ref)) <= ref <= sol.upper + 1e-8 * (1 + abs(ref))


def test_a_copy_a_few_ulps_from_w_is_taken_as_w(monkeypatch):
    """A few examples' copies sit at ``w`` on the sphere (the kink of their distance to
    ``w``), where the probes beside the kink missed it and the steps crept up to within
    3e-12 to 8e-11 of ``w``. Their dual then took the direction of that leftover: each
    example's own gap reached 1e-3, the rounds took their boundary pieces back and ended in
    the joint program. Such a copy is now ``w`` itself: two rounds and one certificate, on
    the arrowhead path, its bracket holding the joint program's optimum (CVXPY)."""
    rng = np.random.default_rng(1123)  # n = 1528, d = 9 (a case of a random sweep)
    n, d = int(rng.integers(300, 5001)), int(rng.integers(3, 21))
    lam = float(rng.uniform(0.01, 0.05))
    problem, X, Y = _t_hinge(rng, n, d)
    sol, judged = _judged_rounds(monkeypatch, problem, lam)
    assert judged == [2]
    ref = _unit_ball_hinge_reference(X, Y, lam)
    assert sol.lower - 1e-8 * (1 + abs(ref)) <= ref <= sol.upper + 1e-8 * (1 + abs(ref))


def test_a_first_round_on_a_box_with_boundary_pieces_is_certified(monkeypatch):
    """On a box's faces the slopes overestimate the gap: with boundary pieces for the next
    solve, a first round that looks hopeless is certified all the same, and here it meets
    the target at once (one round, one certificate; skipped, it took a second round). Its
    bracket holds the joint program's optimum (CVXPY)."""
    rng = np.random.default_rng(1276)  # n = 2695, d = 4 (a case of a random sweep)
    n, d = int(rng.integers(300, 5001)), int(rng.integers(3, 21))
    lam = float(rng.uniform(0.01, 0.05))
    problem, X, Y = _t_hinge(rng, n, d, box=0.05)
    sol, judged = _judged_rounds(monkeypatch, problem, lam)
    assert judged == [1]
    ref = _unit_ball_hinge_reference(X, Y, lam, box=0.05)
    assert sol.lower - 1e-8 * (1 + abs(ref)) <= ref <= sol.upper + 1e-8 * (1 + abs(ref))


def _small_box_reference(whole_i, X, C, lo, hi):
    """The joint program of Lemma 2.7 with every copy in the box ``[lo, hi]`` (CVXPY)."""
    n, d = X.shape
    v = cp.Variable(d)
    Yc = cp.Variable((n, d))
    cons = [Yc >= lo[None, :], Yc <= hi[None, :], v >= lo, v <= hi]
    obj = whole_i(Yc) + C * cp.sum(cp.norm(Yc - v[None, :], 2, axis=1)) / n
    ref = cp.Problem(cp.Minimize(obj + LAM / 2 * cp.sum_squares(v)), cons)
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    return ref.value


@pytest.mark.parametrize("loss", ["hinge", "absolute", "pinball", "epsilon-insensitive"])
@pytest.mark.parametrize("side", [0.6, 1.0])
def test_copies_outside_a_small_box_are_kept_in_it_on_the_plain_path(loss, side):
    """As for a small ball: in a small box the relaxed extension's copies leave W; the rung
    puts them back in the box exactly (a one-dimensional problem per example) and re-solves.
    Certified on the arrowhead path (before, the joint program took over), and the certified
    bracket holds the joint program's optimum (CVXPY)."""
    X, Y, R = _data(10, n=300)
    X[:150] *= 3.0
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    labels = Y if loss == "hinge" else R
    per = {
        "hinge": cp.pos(1 - y * (x @ w)),
        "absolute": cp.abs(x @ w - y),
        "pinball": cp.maximum(TAU * (y - x @ w), (TAU - 1) * (y - x @ w)),
        "epsilon-insensitive": cp.pos(cp.abs(x @ w - y) - 0.1),
    }[loss]
    lo, hi = np.full(D, -side), np.full(D, side)
    lo[0] = -2.0 * side  # not a cube
    problem = dpcvx.Problem(per, w, data={x: X, y: labels}, domain=[w >= lo, w <= hi])
    sol = problem.lipschitz_extension(1.0).solve(
        regularization=LAM, center=np.zeros(D), accuracy=1e-9
    )
    assert sol.gap <= 1e-9
    assert sol.solver_stats["solver"] == ARROWHEAD
    value = _per_example(loss, labels)
    ref = _small_box_reference(lambda Yc: cp.sum(value(Yc, X)) / X.shape[0], X, 1.0, lo, hi)
    tol = 1e-7 * (1 + abs(ref))
    assert sol.lower - tol <= ref <= sol.upper + tol


def test_smooth_copies_at_w_on_the_sphere_do_not_cycle_the_rounds():
    """Squared loss in a ball of radius 0.5 with a quarter of the moved examples' copies at
    ``w`` on the sphere: their duals took the ball's normal that shortens them most, which
    pushed Newton's step inside every other round (a cycle of two rounds, then the joint
    program). With the least normal that brings each dual into the C-ball, the rounds
    certify the target on Newton's path."""
    n, d = 10_000, 5
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    rng.normal(size=d + n)  # the draws of the case's class labels, unused here
    labels = 0.3 * X @ rng.normal(size=d) + 0.3 * rng.normal(size=n)
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    problem = dpcvx.Problem(cp.square(x @ w - y), w, {x: X, y: labels}, [cp.norm(w) <= 0.5])
    sol = problem.lipschitz_extension(1.0).solve(regularization=0.05, accuracy=3e-10)
    assert sol.solver_stats["solver"] == "Newton"
    assert sol.gap <= 3e-10


@pytest.mark.parametrize("loss", ["logistic", "huber", "square"])
def test_smooth_copies_outside_a_small_box_are_kept_in_it(loss):
    """The smooth losses' copies kept in a box: rounds of L-BFGS-B (the box as bounds) and
    Newton's steps on the coordinates off their bounds certify on the smooth path (before,
    the joint program took over: 2.2-3.6 s at n = 1e4, against 0.03-0.04 s now), and at
    n = 300 the bracket holds the joint program's optimum (CVXPY)."""
    d = 5
    for n in (10_000, 300):
        rng = np.random.default_rng(0)
        X = rng.normal(size=(n, d)) / np.sqrt(d)
        signs = np.sign(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n))
        target = 0.3 * X @ rng.normal(size=d) + 0.3 * rng.normal(size=n)
        labels = signs if loss == "logistic" else target
        w = cp.Variable(d)
        x = cp.Parameter(d)
        y = cp.Parameter()
        per = {
            "logistic": cp.logistic(-y * (x @ w)),
            "huber": cp.huber(x @ w - y, 1.0),
            "square": cp.square(x @ w - y),
        }[loss]
        problem = dpcvx.Problem(per, w, {x: X, y: labels}, [cp.abs(w) <= 0.3])
        sol = problem.lipschitz_extension(1.0).solve(regularization=0.05, accuracy=3e-10)
        assert sol.solver_stats["solver"] in ("L-BFGS-B", "L-BFGS-B + Newton", "Newton")
        assert sol.gap <= 3e-10
    value = _per_example(loss, labels)
    v = cp.Variable(d)
    Yc = cp.Variable((n, d))
    obj = cp.sum(value(Yc, X)) / n + cp.sum(cp.norm(Yc - v[None, :], 2, axis=1)) / n
    cons = [cp.abs(Yc) <= 0.3, cp.abs(v) <= 0.3]
    ref = cp.Problem(cp.Minimize(obj + 0.05 / 2 * cp.sum_squares(v)), cons)
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    tol = 1e-7 * (1 + abs(ref.value))
    assert sol.lower - tol <= ref.value <= sol.upper + tol


def _sweep_case(i):
    """Case ``i`` of the benchmarks' random sweep of extension problems
    (``benchmarks/bench_rounds.py``: hinge, absolute or pinball loss on Student-t features;
    balls and boxes of several sizes; n from 300 to 5000, d from 3 to 20): the problem, the
    features, the labels, the domain and the regularization."""
    from dpcvx._benchmarks.bench_rounds import sweep_case

    return sweep_case(i)


@functools.lru_cache(maxsize=4)
def _sweep_reference(i):
    """:func:`_absolute_box_reference` for case ``i`` of :func:`_sweep_case` (an absolute
    loss in a box), solved once per test run."""
    _, X, R, (_, box), lam = _sweep_case(i)
    return _absolute_box_reference(X, R, lam, box)


def _absolute_box_reference(X, R, lam, box):
    """The optimum of the absolute loss's extension ERM (C = 1) in the box ``|w| <= box``:
    the joint program of paper 000's Lemma 2.7 by CVXPY."""
    n, d = X.shape
    v = cp.Variable(d)
    Yc = cp.Variable((n, d))
    obj = (
        cp.sum(cp.abs(cp.sum(cp.multiply(X, Yc), axis=1) - R)) / n
        + cp.sum(cp.norm(Yc - v[None, :], 2, axis=1)) / n
        + lam / 2 * cp.sum_squares(v)
    )
    ref = cp.Problem(cp.Minimize(obj), [cp.abs(Yc) <= box, cp.abs(v) <= box])
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return float(ref.value)


def test_a_box_copy_within_ulps_of_w_at_a_kink_is_w():
    """Absolute loss in ``|w| <= 0.05`` (n = 1358, d = 3). Some examples sit at their loss's
    kink at the optimum, with the copy at ``w``. The copy's bisection only crept up to within
    a few 1e-13 of ``w``, so the dual took the direction of that leftover (C along it)
    rather than a slope from the kink's range, and the rounds ended in the joint program.
    Such a copy is now ``w`` itself: the arrowhead path certifies the private target, and
    its bracket holds CVXPY's optimum of the joint program."""
    problem, X, R, (_, box), lam = _sweep_case(142)
    assert X.shape == (1358, 3)
    sol = problem.lipschitz_extension(1.0).solve(regularization=lam, accuracy=3e-10)
    assert sol.solver_stats["solver"] == ARROWHEAD
    assert sol.gap <= 3e-10
    ref = _absolute_box_reference(X, R, lam, box)
    slack = 1e-8 * (1 + abs(ref))
    assert sol.lower - slack <= ref <= sol.upper + slack


def test_kinks_in_a_box_get_joint_slopes(monkeypatch, whole_rounds):
    """Absolute loss in ``|w| <= 0.4`` (n = 4964, d = 3): at the rounds' second point the
    examples at their kinks need slopes chosen jointly (bounded least squares on the
    coordinates off the bounds) for the certificate to meet the target; with the method's
    split it missed, and the rounds took seven rounds. Disabling the joint slopes is the
    negative control."""
    import dpcvx.certification.solve as solve_module

    problem, _, _, _, lam = _sweep_case(58)
    sol = problem.lipschitz_extension(1.0).solve(regularization=lam, accuracy=3e-10)
    assert sol.solver_stats["solver"] == ARROWHEAD
    assert sol.gap <= 3e-10
    assert sol.solver_stats["ball_rounds"] <= 3
    problem, _, _, _, lam = _sweep_case(58)
    monkeypatch.setattr(solve_module, "_kink_duals", lambda *args, **kwargs: None)
    control = problem.lipschitz_extension(1.0).solve(regularization=lam, accuracy=3e-10)
    assert control.solver_stats["ball_rounds"] > 3


def _sweep_joint_reference(i):
    """The optimum of case ``i`` of :func:`_sweep_case`'s extension ERM (C = 1): the joint
    program of paper 000's Lemma 2.7, every copy in W, by CVXPY."""
    _, X, labels, (kind, size), lam = _sweep_case(i)
    n, d = X.shape
    v = cp.Variable(d)
    Yc = cp.Variable((n, d))
    z = cp.sum(cp.multiply(X, Yc), axis=1)
    loss = ["hinge", "absolute", "pinball"][i % 3]
    f = {
        "hinge": lambda: cp.pos(1 - cp.multiply(labels, z)),
        "absolute": lambda: cp.abs(z - labels),
        "pinball": lambda: cp.maximum(0.3 * (labels - z), (0.3 - 1) * (labels - z)),
    }[loss]()
    if kind == "ball":
        cons = [cp.norm(Yc, 2, axis=1) <= size, cp.norm(v, 2) <= size]
    else:
        cons = [cp.abs(Yc) <= size, cp.abs(v) <= size]
    obj = cp.sum(f) / n + cp.sum(cp.norm(Yc - v[None, :], 2, axis=1)) / n
    ref = cp.Problem(cp.Minimize(obj + lam / 2 * cp.sum_squares(v)), cons)
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return float(ref.value)


@pytest.mark.parametrize("case", [288, 115])
def test_a_point_a_tolerance_inside_w_is_put_on_its_boundary(monkeypatch, case):
    """Case 288 (hinge in the unit ball, n = 412, d = 9) and case 115 (absolute loss in
    ``|w| <= 0.1``, n = 390, d = 7) at a private release's looser target, 6e-8. The arrowhead
    method's tolerance is then a thousandth of it, and its point comes back about that far
    inside W: the rounds, which take a point as on W's boundary only to rounding, gave the
    copies at it no normal cone, the certificate missed by orders of magnitude at the same
    point every round (1e-3 against 6e-8 in the ball), and the joint program took over, where
    the tighter target 3e-10 certified in two rounds. Put on the boundary
    (:meth:`_PiecesRounds.settle`), the arrowhead path certifies, and the bracket holds the
    joint program's optimum. The negative control is no move (``SNAP = 0`` and
    ``SNAP_ACTIVE = 0``): the rounds miss."""
    import dpcvx.certification.solve as solve_module

    problem, *_, lam = _sweep_case(case)
    sol = problem.lipschitz_extension(1.0).solve(regularization=lam, accuracy=6e-8)
    assert sol.solver_stats["solver"] == ARROWHEAD
    assert sol.gap <= 6e-8
    ref = _sweep_joint_reference(case)
    slack = 1e-8 * (1 + abs(ref))
    assert sol.lower - slack <= ref <= sol.upper + slack
    monkeypatch.setattr(solve_module, "SNAP", 0.0)
    # the active sphere's own band now applies at any target, and alone moves case 288's
    # point too (its sphere is active): the control takes it away as well
    monkeypatch.setattr(solve_module, "SNAP_ACTIVE", 0.0)
    problem, *_, lam = _sweep_case(case)
    control = problem.lipschitz_extension(1.0).solve(regularization=lam, accuracy=6e-8)
    # the rounds miss without the move (a joint program then takes over)
    assert control.solver_stats["attempts"][0]["solver"] == ARROWHEAD
    assert control.solver_stats["attempts"][0]["gap"] > 6e-8


def test_a_point_near_a_sphere_active_in_the_program_solved_is_put_on_it(monkeypatch, whole_rounds):
    """Hinge in the unit ball (n = 925, d = 18, lam = 0.05) at 3e-8, the target a double
    output perturbation release at epsilon = 1 certifies to. The answer lies 1.7e-3 inside the
    ball, but the relaxed program's lies on the sphere, and the method stopped 1e-9 inside
    it, thirty times its tolerance (its multiplier of the sphere was small). Each round's
    model there held the next point within 1e-6 of the last, and the tenth round ended in the
    joint program; at 3e-10 the points came back on the sphere and the fourth round jumped
    to the answer. A point within 1e-6 of the radius where the method's multiplier of the
    sphere exceeds its slack is put on the sphere too: the arrowhead path certifies, and the
    bracket holds the joint program's optimum. Negative control: with ``SNAP_ACTIVE = 0``
    (and the pieces on the sphere kept for a point off it) the rounds miss."""
    import dpcvx.certification.solve as solve_module

    rng = np.random.default_rng(5006)
    n, d = int(rng.integers(200, 3001)), int(rng.integers(5, 21))
    lam = float(rng.uniform(0.01, 0.1))
    X = rng.standard_t(5, size=(n, d)) * np.sqrt(3 / (5 * d))
    labels = np.sign(X @ rng.normal(size=d) + 0.1 * rng.normal(size=n))
    assert (n, d) == (925, 18)

    def solve():
        w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
        problem = dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, {x: X, y: labels}, [cp.norm(w) <= 1])
        return problem.lipschitz_extension(1.0).solve(regularization=lam, accuracy=3e-8)

    sol = solve()
    assert sol.solver_stats["solver"] == ARROWHEAD and sol.gap <= 3e-8
    v, Yc = cp.Variable(d), cp.Variable((n, d))
    z = cp.sum(cp.multiply(X, Yc), axis=1)
    obj = cp.sum(cp.pos(1 - cp.multiply(labels, z)) + cp.norm(Yc - v[None, :], 2, axis=1)) / n
    ref = cp.Problem(
        cp.Minimize(obj + lam / 2 * cp.sum_squares(v)),
        [cp.norm(Yc, 2, axis=1) <= 1, cp.norm(v) <= 1],
    )
    ref.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    slack = 1e-8 * (1 + abs(ref.value))
    assert sol.lower - slack <= ref.value <= sol.upper + slack
    monkeypatch.setattr(solve_module, "SNAP_ACTIVE", 0.0)
    # the point left 1e-9 inside would now give its pieces back at once (it is off the
    # sphere), which alone certifies too: the control keeps them there
    monkeypatch.setattr(solve_module._PiecesRounds, "off_sphere", lambda self, x: False)
    control = solve()  # the rounds miss (a joint program takes over)
    assert control.solver_stats["attempts"][0]["solver"] == ARROWHEAD
    assert control.solver_stats["attempts"][0]["gap"] > 3e-8 >= control.gap


def test_the_method_hands_back_the_slacks_and_multipliers_of_its_point():
    """``arrowhead_ipm(..., domain_out=...)`` gives the domain's slacks and multipliers of the
    iterate whose point it returns: in a ball that holds the answer on its sphere, the
    sphere's slack is ``-g`` at that point to the method's tolerance and its multiplier is
    positive; without bounds the list holds two empty arrays."""
    from dpcvx.certification.arrowhead import Bounds, arrowhead_ipm, piecewise_model

    X, Y, R = _data(12, n=300)
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    problem = dpcvx.Problem(
        cp.pos(1 - y * (x @ w)), w, data={x: X, y: Y}, domain=[cp.norm(w) <= 50]
    )
    model = piecewise_model(problem.declaration)
    bounds = Bounds([("ball", np.zeros(D), 0.05)], np.zeros(D))
    out: list = []
    tol = 1e-10
    point, _, _ = arrowhead_ipm(
        model, LAM, np.zeros(D), np.zeros(D), tol=tol, bounds=bounds, domain_out=out
    )
    slack, nu = out
    assert slack.shape == nu.shape == (1,)
    assert abs(float(slack[0]) + float(bounds.g(point)[0])) <= 10 * tol
    assert nu[0] > slack[0] > 0
    assert abs(np.linalg.norm(point) - 0.05) <= 1e-8
    free: list = []
    arrowhead_ipm(model, LAM, np.zeros(D), np.zeros(D), tol=tol, domain_out=free)
    assert [a.size for a in free] == [0, 0]


def _rows_drift(monkeypatch, case: int, accuracy: float) -> float:
    """The largest relative drift of a row's sum of multipliers from its term's weight, over
    every arrowhead solve of case ``case`` of :func:`_sweep_case`'s extension (C = 1)."""
    import dpcvx.certification.solve as solve_module

    method = solve_module.arrowhead_ipm
    drift: list[float] = []

    def recorded(model, *args, **kwargs):
        out = method(model, *args, **kwargs)
        for mu, term in zip(out[1], model.terms):
            drift.append(float(np.max(np.abs(mu.sum(axis=1) - term.c)) / term.c))
        return out

    monkeypatch.setattr(solve_module, "arrowhead_ipm", recorded)
    problem, *_, lam = _sweep_case(case)
    problem.lipschitz_extension(1.0).solve(regularization=lam, accuracy=accuracy)
    return max(drift)


def test_the_multipliers_of_each_row_sum_to_its_weight(monkeypatch, whole_rounds):
    """Each example's multipliers are a convex combination of its pieces times its weight
    ``c``: a Newton step keeps their sum only to its rounding, which near the end of a solve
    is multiplied by ``mu / s`` where a slack is near zero. On case 184 (hinge in the unit
    ball, n = 634, d = 14) at 6e-8 the sums drifted by 2.3e-10 of ``c`` without the rows put
    back on it after each step (``_onto_rows`` a no-op: the negative control); at n = 1e6 the
    method's residual, which counts them n times, then stalled above its tolerance for seven
    steps. Now every solve hands back rows summing to ``c`` to rounding. The rows run in
    chunks of 128 here, so each of the method's chunks (a term of its own) is checked."""
    import dpcvx.certification.arrowhead as arrowhead_module

    monkeypatch.setattr(arrowhead_module, "CHUNK_ROWS", 128)
    assert _rows_drift(monkeypatch, 184, 6e-8) <= 1e-13
    monkeypatch.setattr(arrowhead_module, "_onto_rows", lambda mu, c: None)
    assert _rows_drift(monkeypatch, 184, 6e-8) > 1e-11


def test_onto_rows_puts_each_row_on_its_weight_in_place():
    """:func:`~dpcvx.certification.arrowhead._onto_rows` scales each row by ``c`` over its
    sum, in place; a row of zeros stays (no division by zero)."""
    from dpcvx.certification.arrowhead import _onto_rows

    mu = np.array([[1.0, 3.0], [0.5, 0.5], [0.0, 0.0], [2e-300, 6e-300]])
    before = mu.copy()
    _onto_rows(mu, 0.5)
    np.testing.assert_allclose(mu[[0, 1, 3]].sum(axis=1), 0.5, rtol=1e-15)
    np.testing.assert_allclose(mu[0] / mu[0].sum(), before[0] / before[0].sum(), rtol=1e-15)
    assert np.array_equal(mu[2], [0.0, 0.0])


def test_settle_moves_only_what_lies_within_the_band_and_stays_feasible():
    """:meth:`BallRegion.onto_boundary` moves a point within the band inside the sphere
    radially onto it, and leaves one farther in, one the normal cone already takes as on the
    sphere (within rounding) and one outside (made feasible before); :meth:`BoxRegion.
    onto_boundary` puts each coordinate within the band of a bound on it and leaves the
    others, those already at a bound to rounding, and those for which the band is under FAR
    rounding bands or over REACH of the width (a ball's point likewise for its radius). The
    rounds' ``settle`` makes the result feasible for the domain, a localized one included."""
    from dpcvx.certification.ball import FAR, ON_SPHERE, REACH, BallRegion
    from dpcvx.certification.box import BoxRegion

    ball = BallRegion(np.array([0.5, -0.5]), 2.0)
    e = np.array([0.6, 0.8])
    moved = ball.onto_boundary(ball.center + (2.0 - 1e-9) * e, 1e-8)
    assert abs(np.linalg.norm(moved - ball.center) - 2.0) <= 1e-15
    assert np.allclose(moved, ball.center + 2.0 * e, rtol=0, atol=1e-15)
    for kept in (2.0 - 1e-6, 2.0 * (1 - 1e-13), 2.0 + 1e-9):
        point = ball.center + kept * e
        assert np.array_equal(ball.onto_boundary(point, 1e-8), point)
    assert np.array_equal(ball.onto_boundary(ball.center, 10.0), ball.center)
    # a band under FAR rounding bands moves nothing (the method's tightest tolerances)
    near = ball.center + (2.0 - 1e-10) * e
    assert np.array_equal(ball.onto_boundary(near, 0.5 * FAR * ON_SPHERE * 2.0), near)
    assert np.array_equal(ball.onto_boundary(near, 0.5 * FAR * ON_SPHERE * 2.0, True, 1.0), near)
    assert not np.array_equal(ball.onto_boundary(near, 2.0 * FAR * ON_SPHERE * 2.0), near)
    # but an active sphere's band is reach times the radius whatever the band given (a tight
    # target's band, under FAR rounding bands, once left such a point where it was)
    tight = 0.5 * FAR * ON_SPHERE * 2.0
    assert np.allclose(ball.onto_boundary(near, tight, True, 1e-6), ball.center + 2.0 * e)
    # where the sphere is active in the program solved, within reach times the radius
    deeper = ball.center + (2.0 - 1e-8) * e
    band = 2.0 * FAR * ON_SPHERE * 2.0  # 4e-10, less than the 1e-8 to go
    assert np.array_equal(ball.onto_boundary(deeper, band), deeper)
    assert np.array_equal(ball.onto_boundary(deeper, band, False, 1e-6), deeper)
    assert np.allclose(ball.onto_boundary(deeper, band, True, 1e-6), ball.center + 2.0 * e)
    assert np.array_equal(ball.onto_boundary(deeper, band, True, 1e-9), deeper)
    # the reach is relative to the radius (2 here): 1.5e-6 inside is within 1e-6 of it
    deepest = ball.center + (2.0 - 1.5e-6) * e
    assert np.allclose(ball.onto_boundary(deepest, band, True, 1e-6), ball.center + 2.0 * e)

    box = BoxRegion(np.array([-1.0, -1.0, -1.0, 0.0, -1.0]), np.array([1.0, 1.0, 1.0, 1e-9, 1.0]))
    w = np.array([-1.0 + 5e-9, 1.0 - 5e-9, 0.3, 0.4e-9, 1.0 - 1e-13])
    moved = box.onto_boundary(w, 1e-8)
    assert np.array_equal(moved[:3], [-1.0, 1.0, 0.3])
    assert moved[3] == w[3]  # a band over REACH of its width (1e-9): as it was
    assert moved[4] == w[4]  # at its bound to rounding already: as it was
    far = np.array([-1.0 + 1e-6, 1.0 - 1e-6, 0.0, 0.5e-9, 0.0])
    assert np.array_equal(box.onto_boundary(far, 1e-8)[:3], far[:3])
    # a band under FAR rounding bands of a coordinate's width (1e-12 of it) leaves that
    # coordinate, however near its bound
    near = np.array([-1.0 + 0.5e-10, 1.0 - 0.5e-10, 0.0, 0.0, 0.0])
    moved = box.onto_boundary(near, 0.5 * FAR * 1e-12 * 2.0)
    assert np.array_equal(moved[:2], near[:2])
    assert np.array_equal(box.onto_boundary(near, 2.0 * FAR * 1e-12 * 2.0)[:2], [-1.0, 1.0])
    # a band over REACH of a coordinate's width leaves it too (the narrow fourth one here),
    # and over REACH of the radius leaves a ball's point
    narrow = np.array([0.0, 0.0, 0.0, 1e-9 - 1e-16, 0.0])
    assert box.onto_boundary(narrow, 1e-15)[3] == 1e-9
    assert box.onto_boundary(narrow, 2.0 * REACH * 1e-9)[3] == narrow[3]
    small = BallRegion(np.zeros(2), 1e-6)
    point = (1e-6 - 1e-13) * e
    assert np.allclose(small.onto_boundary(point, 1e-13), 1e-6 * e, rtol=0, atol=1e-21)
    assert np.array_equal(small.onto_boundary(point, 2.0 * REACH * 1e-6), point)

    import dpcvx.certification.solve as solve_module

    w = cp.Variable(2)
    x = cp.Parameter(2)
    problem = dpcvx.Problem(cp.abs(x @ w), w, data={x: np.ones((3, 2))}, domain=[cp.norm(w) <= 1.0])
    dom = problem.declaration.domain
    rounds = solve_module._PiecesRounds.__new__(solve_module._PiecesRounds)
    rounds.region, rounds.tol, rounds.slacks = BallRegion(np.zeros(2), 1.0), 1e-10, []
    settled = rounds.settle(np.array([0.6, 0.8]) * (1 - 5e-10), dom)
    # in the ball, and on its sphere for the normal cone (to rounding)
    assert 1.0 - ON_SPHERE <= np.linalg.norm(settled) <= 1.0
    # 1e-8 inside: moved only where the method's multiplier of the sphere exceeds its slack
    deeper = np.array([0.6, 0.8]) * (1 - 1e-8)
    rounds.slacks = [np.array([1e-8]), np.array([1e-9])]
    assert np.array_equal(rounds.settle(deeper, dom), deeper)
    rounds.slacks = [np.array([1e-8]), np.array([0.1])]
    assert 1.0 - ON_SPHERE <= np.linalg.norm(rounds.settle(deeper, dom)) <= 1.0
    # with a localization ball the program's constraints are W's sphere, then that ball's:
    # the flag is W's (active here, the other not; and the other way round)
    rounds.slacks = [np.array([1e-8, 1.0]), np.array([0.1, 1e-9])]
    assert 1.0 - ON_SPHERE <= np.linalg.norm(rounds.settle(deeper, dom)) <= 1.0
    rounds.slacks = [np.array([1.0, 1e-8]), np.array([1e-9, 0.1])]
    assert np.array_equal(rounds.settle(deeper, dom), deeper)
    # a localized domain: W's sphere point lies just outside the localization ball, and the
    # settled point is made feasible for both
    from dpcvx.modeling.localized import LocalizedDomain

    u = np.array([0.6, 0.8])
    local = LocalizedDomain(dom, 0.95 * u, 0.05 - 2.5e-10)
    rounds.slacks = []
    start = u * (1 - 5e-10)
    assert local.contains(start)
    settled = rounds.settle(start, local)
    assert not np.array_equal(settled, start)
    assert local.contains(settled) and np.linalg.norm(settled - 0.95 * u) <= 0.05 - 2.5e-10


def test_kink_slopes_give_the_chosen_slope_and_keep_the_others():
    """``with_slopes`` sets the multipliers of the chosen examples so that their minorant's
    slope is ``gamma u`` (checked through the certificate's own minorants), and leaves every
    other example's multipliers as they were; ``kink_range`` is a single slope away from a
    kink and an interval at one."""
    from dpcvx.certification.arrowhead import extension_pieces, piecewise_model
    from dpcvx.certification.box import BoxRegion
    from dpcvx.certification.certificate import _minorants

    rng = np.random.default_rng(7)
    n, d = 40, 3
    X = rng.normal(size=(n, d))
    w_at = rng.uniform(-0.2, 0.2, size=d)
    R = X @ w_at + rng.normal(size=n)
    R[:5] = X[:5] @ w_at  # five examples exactly at their kinks at w_at
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    problem = dpcvx.Problem(cp.abs(x @ w - y), w, {x: X, y: R}, [cp.abs(w) <= 1])
    decl = problem._decl
    pieces = extension_pieces(piecewise_model(decl), 0.5)
    region = BoxRegion(-np.ones(d), np.ones(d))
    rows = np.arange(n)
    lo, hi = pieces.kink_range(w_at, rows, region)
    assert np.all(lo[:5] < hi[:5])
    assert np.all(lo[5:] >= hi[5:])
    thetas = [[np.clip(rng.normal(size=n), -1, 1)]]
    chosen = np.array([0, 2, 4])
    gamma = 0.5 * (lo[chosen] + hi[chosen]) + 0.1 * (hi[chosen] - lo[chosen])
    out = pieces.with_slopes(thetas, w_at, chosen, gamma)
    s_new = _minorants(decl, None, None, w_at, thetas=out)[0]
    s_old = _minorants(decl, None, None, w_at, thetas=thetas)[0]
    np.testing.assert_allclose(s_new[chosen], gamma[:, None] * pieces.u[chosen], atol=1e-12)
    others = np.setdiff1d(rows, chosen)
    np.testing.assert_array_equal(s_new[others], s_old[others])
    # negative control: the old multipliers do not give those slopes
    assert not np.allclose(s_old[chosen], gamma[:, None] * pieces.u[chosen], atol=1e-6)


def test_a_face_step_keeps_the_kinks_held():
    """A face step with kinks moves the free coordinates only along directions that keep each
    held kink's ``u_k^T w`` (where nothing clips), and without kinks is the plain Newton step."""
    from dpcvx.certification.box import BoxRegion
    from dpcvx.certification.solve import _face_step

    rng = np.random.default_rng(3)
    d = 6
    region = BoxRegion(-np.ones(d), np.ones(d))
    x = np.array([1.0, -1.0, 0.1, -0.2, 0.05, 0.0])  # two coordinates at their bounds
    grad = 1e-3 * rng.normal(size=d)
    A = rng.normal(size=(d, d))
    Q = A @ A.T
    kinks = rng.normal(size=(2, d))
    out = _face_step(x, grad, Q, 0.1, region, 1.0, kinks)
    free = slice(2, d)
    assert np.all(out[:2] == x[:2])
    np.testing.assert_allclose(kinks[:, free] @ (out - x)[free], 0.0, atol=1e-14)
    plain = _face_step(x, grad, Q, 0.1, region)
    H = Q[free, free] + 0.1 * np.eye(d - 2)
    np.testing.assert_allclose(plain[free], x[free] - np.linalg.solve(H, grad[free]))
    assert not np.allclose(kinks[:, free] @ (plain - x)[free], 0.0, atol=1e-8)


def test_the_rounds_hand_a_box_case_to_a_joint_program_with_few_copies():
    """Absolute loss in ``|w| <= 0.05`` (n = 1771, d = 15): the rounds miss the target, and
    the whole joint program (copies for every example steeper than C) took 1.6 s in
    Clarabel. The joint program with copies only for the examples whose copy leaves ``w``
    (and those at a kink) has the same optimum; its point, certified as the rounds' points
    are, meets the target, and the bracket holds CVXPY's optimum of the whole joint
    program."""
    from dpcvx.certification.solve import LIFTED

    problem, X, R, (_, box), lam = _sweep_case(157)
    assert X.shape == (1771, 15)
    sol = problem.lipschitz_extension(1.0).solve(regularization=lam, accuracy=3e-10)
    assert sol.solver_stats["method"] == LIFTED
    assert 0 < sol.solver_stats["lifted"] < 0.1 * X.shape[0]
    assert sol.gap <= 3e-10
    ref = _sweep_reference(157)
    slack = 1e-8 * (1 + abs(ref))
    assert sol.lower - slack <= ref <= sol.upper + slack


def test_too_few_copies_are_caught_by_the_certificate(monkeypatch):
    """Negative control for the joint program with few copies: lifting only half the moving
    examples, in one program, gives a point the certificate does not pass at the target (the
    whole joint program then runs, by the same method), and every bracket still holds the
    optimum."""
    import dpcvx.certification.solve as solve_module

    moving = solve_module._moving
    monkeypatch.setattr(solve_module, "_moving", lambda *a: moving(*a)[::2])
    monkeypatch.setattr(solve_module, "LIFT_ROUNDS", 1)
    problem, X, R, (_, box), lam = _sweep_case(157)
    sol = problem.lipschitz_extension(1.0).solve(regularization=lam, accuracy=3e-10)
    attempts = [a for a in sol.solver_stats["attempts"] if a["solver"] == solve_module.LIFTED]
    assert len(attempts) == 2 and attempts[0]["gap"] > 3e-10
    # the whole joint program, every example steeper than C lifted, by the same method
    heavy = int(np.count_nonzero(np.linalg.norm(X, axis=1) > 1.0))
    assert attempts[1]["lifted"] == heavy > attempts[0]["lifted"]
    assert sol.solver_stats["solver"] == ARROWHEAD and sol.gap <= 3e-10
    ref = _sweep_reference(157)
    slack = 1e-8 * (1 + abs(ref))
    assert sol.lower - slack <= ref <= sol.upper + slack


def test_the_whole_joint_program_certifies_with_its_own_copies_and_duals(monkeypatch):
    """Absolute loss in ``|w| <= 0.4`` (case 13: n = 975, d = 17): the rounds miss (1.2e-4
    at 3e-10) and the program with few copies would lift more than half the steep
    examples, so the whole joint program runs, by the arrowhead method with every steep
    example's copy a block. Its point is Clarabel's on the same program, and certified with
    the method's own copies and duals (each lifted copy its block's ``y_i``, the cone's
    multiplier its dual) it meets the target; the bracket holds CVXPY's optimum. Negative
    control: judged as the rounds' points are (exact copies, balanced duals) the same point
    misses by orders of magnitude, and the ladder's Clarabel program takes over."""
    import dpcvx.certification.solve as solve_module

    problem, X, R, (kind, size), lam = _sweep_case(13)
    assert (kind, size) == ("box", 0.4) and X.shape == (975, 17)
    sol = problem.lipschitz_extension(1.0).solve(regularization=lam, accuracy=3e-10)
    assert sol.solver_stats["solver"] == ARROWHEAD and sol.gap <= 3e-10
    heavy = int(np.count_nonzero(np.linalg.norm(X, axis=1) > 1.0))
    assert sol.solver_stats["method"] == solve_module.LIFTED
    assert sol.solver_stats["lifted"] == heavy
    ref = _absolute_box_reference(X, R, lam, size)
    slack = 1e-8 * (1 + abs(ref))
    assert sol.lower - slack <= ref <= sol.upper + slack
    ipm = solve_module._lifted_ipm
    monkeypatch.setattr(solve_module, "_lifted_ipm", lambda *a: ipm(*a)[:2] + (None,))
    problem, *_ = _sweep_case(13)
    control = problem.lipschitz_extension(1.0).solve(regularization=lam, accuracy=3e-10)
    lifted = [a for a in control.solver_stats["attempts"] if a["solver"] == solve_module.LIFTED]
    assert lifted and min(a["gap"] for a in lifted) > 1e3 * 3e-10
    assert control.solver_stats["solver"] == "CLARABEL"


def test_a_lifted_program_over_the_block_memory_limit_is_not_run(monkeypatch):
    """Case 13 again with ``LIFT_BLOCK_ENTRIES`` one entry under the whole program's block
    factors (``copies x d^2``): that program is not run (its attempt records the limit), the
    ladder's Clarabel program certifies instead; at the limit itself the method runs it."""
    import dpcvx.certification.solve as solve_module

    problem, X, R, _, lam = _sweep_case(13)
    heavy = int(np.count_nonzero(np.linalg.norm(X, axis=1) > 1.0))
    monkeypatch.setattr(solve_module, "LIFT_BLOCK_ENTRIES", heavy * 17 * 17 - 1)
    sol = problem.lipschitz_extension(1.0).solve(regularization=lam, accuracy=3e-10)
    lifted = [a for a in sol.solver_stats["attempts"] if a["solver"] == solve_module.LIFTED]
    assert lifted and "LIFT_BLOCK_ENTRIES" in lifted[-1]["error"]
    assert sol.solver_stats["solver"] == "CLARABEL" and sol.gap <= 3e-10
    monkeypatch.setattr(solve_module, "LIFT_BLOCK_ENTRIES", heavy * 17 * 17)
    problem, *_ = _sweep_case(13)
    sol = problem.lipschitz_extension(1.0).solve(regularization=lam, accuracy=3e-10)
    assert sol.solver_stats["solver"] == ARROWHEAD and sol.solver_stats["lifted"] == heavy


def test_a_localized_box_goes_from_the_rounds_to_the_whole_joint_program(monkeypatch):
    """On a localized domain (paper 000's Algorithm 4) the certificate has no balanced duals,
    which the points of the joint program with few copies need: that program is not run
    there, and the ladder goes from the rounds to the whole joint program as before."""
    import dpcvx.certification.solve as solve_module

    ran = []
    lifted = solve_module._lifted_rung
    monkeypatch.setattr(
        solve_module, "_lifted_rung", lambda *a, **k: ran.append(1) or lifted(*a, **k)
    )
    problem, X, _, _, _ = _sweep_case(157)
    center = np.full(X.shape[1], 0.01)
    sol = problem.lipschitz_extension(1.0).solve(
        regularization=0.03, accuracy=3e-10, localize=(center, 0.2)
    )
    assert not ran
    assert sol.gap <= 3e-10
    assert all(a["solver"] != solve_module.LIFTED for a in sol.solver_stats["attempts"])


def test_pair_weights_on_row_chunks_are_those_of_all_rows_at_once(monkeypatch):
    """Each example's pair of pieces is its own choice: over chunks of rows the weights are
    the same floats, the last partial chunk included."""
    from dpcvx.certification import _rows, arrowhead

    rng = np.random.default_rng(6)
    N, m = 5003, 3
    sigma = np.sort(rng.normal(size=(N, m)), axis=1)
    beta = rng.normal(size=(N, m))
    s = rng.normal(size=N)
    gamma = rng.uniform(sigma[:, 0], sigma[:, -1])
    whole = arrowhead._pair_weights_rows(sigma, beta, gamma, s)
    monkeypatch.setattr(_rows, "CHUNK_ENTRIES", 500 * 3)  # 500 rows of 3 pieces a chunk
    chunked = arrowhead._pair_weights(sigma, beta, gamma, s)
    np.testing.assert_array_equal(chunked, whole)
    np.testing.assert_allclose(whole.sum(axis=1), 1.0)


def test_a_solve_held_on_the_sphere_that_ends_inside_gives_its_pieces_back_at_once(monkeypatch):
    """Case 94 (absolute loss in the unit ball, n = 3652, d = 16). The rounds' second solve
    gives the examples whose copy is at ``w`` the extension's pieces on the sphere, and its
    point comes back inside the ball, where those pieces do not hold (the extension's slopes
    are clipped to C there). Its point was judged (3.1e-3), its balanced duals tried, then
    the pieces were given back: six rounds and three certificates. They are now given back at
    once, the point unjudged: five rounds and one certificate, whose bracket holds CVXPY's
    optimum of the joint program. Keeping them until the certificate stalls is the negative
    control."""
    import dpcvx.certification.solve as solve_module

    judged = []
    certify_point = solve_module._certify_point

    def counted(*args, **kwargs):
        out = certify_point(*args, **kwargs)
        judged.append(out.gap)
        return out

    monkeypatch.setattr(solve_module, "_certify_point", counted)
    problem, X, _, _, lam = _sweep_case(94)
    assert X.shape == (3652, 16)
    sol = problem.lipschitz_extension(1.0).solve(regularization=lam, accuracy=3e-10)
    assert sol.solver_stats["solver"] == ARROWHEAD
    assert sol.gap <= 3e-10
    assert sol.solver_stats["ball_rounds"] <= 5 and len(judged) == 1
    ref = _sweep_joint_reference(94)
    slack = 1e-8 * (1 + abs(ref))
    assert sol.lower - slack <= ref <= sol.upper + slack
    judged.clear()
    monkeypatch.setattr(solve_module._PiecesRounds, "off_sphere", lambda self, x: False)
    problem, _, _, _, lam = _sweep_case(94)
    control = problem.lipschitz_extension(1.0).solve(regularization=lam, accuracy=3e-10)
    assert control.solver_stats["ball_rounds"] > 5 and len(judged) > 1


def test_a_point_an_active_sphere_left_a_few_roundings_inside_is_put_on_it_at_any_target(
    monkeypatch,
):
    """Hinge in the ball of radius 0.2 (n = 5000, d = 20), tightest certificate. The method's
    points came back 4e-12 of the radius inside the sphere, its multiplier of the sphere far
    above its slack; the band of a tight target is under ``FAR`` rounding bands, and the
    active sphere's wider band was only applied after that test, so nothing moved. Off the
    sphere by more than rounding, those points had no normal cone for the duals of the copies
    at ``w``, and the certificate missed until the rounds' fifth. It is applied first now:
    two rounds. (A hinge case in a ball of radius 0.3 at n = 1e5 took 12 to 13 s that way, 8
    of them in the joint program, and takes 1 s.) Both certified brackets hold one optimum;
    the old order is the negative control."""
    from dpcvx.certification.ball import FAR, ON_SPHERE, REACH, BallRegion

    rng = np.random.default_rng(0)
    n, d = 5000, 20
    X = rng.standard_t(5, size=(n, d)) * np.sqrt(3.0 / (5.0 * d))
    labels = np.sign(X @ rng.normal(size=d) + 0.1 * rng.normal(size=n))

    def solve():
        w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
        problem = dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, {x: X, y: labels}, [cp.norm(w) <= 0.2])
        return problem.lipschitz_extension(1.0).solve(regularization=0.01)

    sol = solve()
    assert sol.solver_stats["solver"] == ARROWHEAD and sol.solver_stats["ball_rounds"] == 2
    assert sol.gap <= 1e-11

    def old_order(self, w, band, active=False, reach=0.0):
        w = np.asarray(w, float)
        z = w - self.center
        r = float(np.linalg.norm(z))
        R = self.radius
        if not FAR * ON_SPHERE * R <= band <= REACH * R or not 0 < r < R * (1 - ON_SPHERE):
            return w
        if active:
            band = max(band, reach * R)
        return self.center + z * (R / r) if R - r <= band else w

    monkeypatch.setattr(BallRegion, "onto_boundary", old_order)
    control = solve()
    assert control.solver_stats.get("ball_rounds", 0) > 2 or "method" in control.solver_stats
    assert max(sol.lower, control.lower) <= min(sol.upper, control.upper)


def test_kinks_on_a_sphere_get_joint_slopes(monkeypatch, whole_rounds):
    """Case 271 (absolute loss in a ball of radius 0.3, n = 2011, d = 19) at 3e-10. The
    rounds' point sits on the sphere with examples at their kinks; with the method's split of
    their slopes the objective's gradient along the sphere is left over, the certificate
    misses, and the rounds swap the pieces on the sphere in and out. Chosen jointly so that
    the gradient vanishes along the sphere (each within its kink's range, the dual then
    brought into the C-ball by the sphere's normal), they certify in the third round, and the
    bracket holds CVXPY's optimum of the joint program. Without the joint slopes in a ball
    (the negative control) the rounds take eight. (The case was 34, n = 3146, whose control
    went to the joint program with copies, until the rounds' model of the examples at their
    kinks was summed without them rather than less them: case 34 then certified in three
    rounds without joint slopes.)"""
    import dpcvx.certification.solve as solve_module

    # the floor each joint choice reports is the certificate's global term with those slopes,
    # so it is at most the certificate's gap (the rounds skip a choice whose floor misses)
    pairs, last = [], {}
    kink_duals, certify_point = solve_module._ball_kink_duals, solve_module._certify_point

    def recorded_duals(*args, **kwargs):
        out = kink_duals(*args, **kwargs)
        if out is not None:
            last.update(slopes=out[0].slopes, floor=out[2])
        return out

    def recorded_certificate(*args, **kwargs):
        cert = certify_point(*args, **kwargs)
        if len(args) > 10 and "slopes" in last and args[10] is last["slopes"]:
            pairs.append((last["floor"], cert.gap))
        return cert

    monkeypatch.setattr(solve_module, "_ball_kink_duals", recorded_duals)
    monkeypatch.setattr(solve_module, "_certify_point", recorded_certificate)
    problem, X, _, _, lam = _sweep_case(271)
    assert X.shape == (2011, 19)
    sol = problem.lipschitz_extension(1.0).solve(regularization=lam, accuracy=3e-10)
    assert sol.solver_stats["solver"] == ARROWHEAD and "method" not in sol.solver_stats
    assert sol.gap <= 3e-10 and sol.solver_stats["ball_rounds"] <= 3
    assert pairs and all(0.0 <= floor <= gap * (1 + 1e-9) for floor, gap in pairs)
    monkeypatch.setattr(solve_module, "_certify_point", certify_point)
    ref = _sweep_joint_reference(271)
    slack = 1e-8 * (1 + abs(ref))
    assert sol.lower - slack <= ref <= sol.upper + slack
    monkeypatch.setattr(solve_module, "_ball_kink_duals", lambda *args, **kwargs: None)
    problem, _, _, _, lam = _sweep_case(271)
    control = problem.lipschitz_extension(1.0).solve(regularization=lam, accuracy=3e-10)
    assert control.solver_stats["ball_rounds"] >= 6


def _freed_after_an_extension_solve(solve_module) -> bool:
    """Whether the declaration's piecewise model is gone once the problem is, after a solve
    of its extension (hinge in the unit ball, n = 2000, d = 6: copies leave it)."""
    import gc
    import weakref

    from dpcvx.certification.arrowhead import piecewise_model

    rng = np.random.default_rng(3)
    X = rng.standard_t(5, size=(2000, 6)) * np.sqrt(3 / 30)
    labels = np.sign(X @ rng.normal(size=6) + 0.1 * rng.normal(size=2000))
    w, x, y = cp.Variable(6), cp.Parameter(6), cp.Parameter()
    problem = dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, {x: X, y: labels}, [cp.norm(w) <= 1.0])
    sol = problem.lipschitz_extension(1.0).solve(regularization=0.01)
    assert sol.solver_stats["solver"] == ARROWHEAD
    ref = weakref.ref(piecewise_model(problem.declaration))
    del problem, sol
    gc.collect()
    return ref() is None


def test_the_cached_extension_lets_its_model_go(monkeypatch):
    """The relaxed extension is cached per model, and its ``source`` is that model: a cached
    value holding it kept the model alive, with the extension's arrays of the data's size
    (about 40 MiB a solve at n = 1e5, d = 20, for as long as the process ran). Negative
    control: a cache that keeps each value's ``source``."""
    import dpcvx.certification.arrowhead as arrowhead
    import dpcvx.certification.solve as solve_module

    assert _freed_after_an_extension_solve(solve_module)

    def keeping(model, C):
        known = arrowhead._EXTENSIONS.setdefault(model, {})
        pieces = arrowhead._extension_pieces(model, float(C))
        known[float(C)] = {"kept": pieces}
        return pieces

    monkeypatch.setattr(solve_module, "extension_pieces", keeping)
    kept = not _freed_after_an_extension_solve(solve_module)
    for model in list(arrowhead._EXTENSIONS.keys()):
        arrowhead._EXTENSIONS.pop(model, None)
    assert kept


@pytest.mark.parametrize("stack", [cp.hstack, cp.vstack])
def test_a_maximum_spelled_max_of_a_stack_runs_on_the_arrowhead_rung(stack):
    """``cp.max(cp.hstack([0, 1 - y x^T w]))`` is the hinge: it took the conic program
    (n = 1e5, d = 10: 3.5 s against 0.16 s for ``cp.pos``, its extension 14 s against
    0.6 s). It is now the ``pieces`` term ``maximum(0, 1 - y x^T w)``, on the arrowhead rung,
    and certifies the same answer as the ``pos`` spelling (within both certified distances),
    plain and under the extension."""
    from dpcvx.certification.arrowhead import piecewise_model

    rng = np.random.default_rng(11)
    n, d = 3000, 6
    X = rng.standard_t(5, size=(n, d)) * np.sqrt(3 / (5 * d))
    labels = np.sign(X @ rng.normal(size=d) + 0.1 * rng.normal(size=n))
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    stacked = cp.max(stack([0, 1 - y * (x @ w)]))
    out = []
    for loss in (stacked, cp.pos(1 - y * (x @ w))):
        problem = dpcvx.Problem(loss, w, {x: X, y: labels}, [cp.norm(w) <= 1.0])
        assert piecewise_model(problem.declaration) is not None
        plain = problem.solve(regularization=0.01)
        ext = problem.lipschitz_extension(1.0).solve(regularization=0.01)
        assert plain.solver_stats["solver"] == ext.solver_stats["solver"] == ARROWHEAD
        out.append((plain, ext))
    for a, b in zip(*out):
        assert np.linalg.norm(a.w - b.w) <= a.distance_bound + b.distance_bound
        assert a.lower <= b.upper and b.lower <= a.upper


def test_the_extension_s_knots_do_not_depend_on_the_order_of_the_pieces():
    """``max(0, r - 0.1, -r - 0.1)`` in its six orders and as ``pos(abs(r) - 0.1)``, on unit
    rows (norms ``1 +- ulps``, so some slopes pass ``C = 1`` by a rounding) and one row twice
    as long: the relaxed extension's knots are the same, the independent answer being the
    envelope's kinks (``t_hi`` where the rising piece takes over, ``t_lo`` the falling one's),
    and the arrowhead rung certifies 1e-9 in every order (one order missed by 0.002: the
    knots were where the two sloped pieces meet, below the envelope)."""
    import itertools

    from dpcvx.certification.arrowhead import extension_pieces, piecewise_model
    from dpcvx.certification.solve import _pieces_rung

    n, d = 100, 4
    rng = np.random.default_rng(2)
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    Y = np.where(rng.standard_normal(n) > 0, 1.0, -1.0)
    X[0] *= 2
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    r = x @ w - y
    pieces = [0, r - 0.1, -r - 0.1]
    spellings = [cp.maximum(*[pieces[i] for i in p]) for p in itertools.permutations(range(3))]
    spellings.append(cp.pos(cp.abs(r) - 0.1))
    knots = []
    for loss in spellings:
        problem = dpcvx.Problem(loss, w, {x: X, y: Y}, [cp.norm(w, 2) <= 20])
        relaxed = extension_pieces(piecewise_model(problem.declared), 1.0)
        knots.append(np.stack([relaxed.t_lo, relaxed.t_hi]))
        sol = _pieces_rung(problem.declared, lam=1e-3, w0=np.zeros(d), accuracy=1e-9, extension=1.0)
        assert sol.gap <= 1e-9
    assert all(np.array_equal(k, knots[0]) for k in knots)
    # along u = x / ||x||, t = u^T w: the pieces meet at t = (y +- 0.1) / ||x||
    norms = np.linalg.norm(X, axis=1)
    steep = norms > 1.0
    assert np.allclose(knots[0][1][steep], ((Y + 0.1) / norms)[steep], rtol=0, atol=1e-12)
    assert np.allclose(knots[0][0][steep], ((Y - 0.1) / norms)[steep], rtol=0, atol=1e-12)
    assert np.all(np.isinf(knots[0][:, ~steep]))
