"""Several terms of one argument as one term of the arrowhead method
(``dpcvx.certification.arrowhead._merged``).

A pinball loss spelled ``tau * cp.neg(r) + (1 - tau) * cp.pos(r)`` or
``0.5 * cp.abs(r) + (tau - 0.5) * r`` is two terms of the declaration. The arrowhead method
solves them as one maximum of the sums of their pieces, and the Lipschitz extension, which
needs one term, applies: without it those spellings' extensions took the conic program (70 s
and 8.5 s at n = 1e5, against 0.5 s for ``cp.maximum``).

Every answer is checked against CVXPY on the whole dataset (the losses written directly,
vectorized), solved by Clarabel: the plain regularized ERM and the joint program of the
extension (paper 000, Lemma 2.7, every copy in the ball). Each test has a control that must
fail: the same solve with the merge switched off takes the conic program.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
import dpcvx.certification.arrowhead as A
from dpcvx.certification.solve import ARROWHEAD

N, D, LAM, TAU, C, RADIUS = 300, 4, 0.05, 0.3, 1.0, 0.4


def _data(seed: int = 0, n: int = N, d: int = D):
    rng = np.random.default_rng(seed)
    X = rng.standard_t(5, size=(n, d)) * np.sqrt(3.0 / (5.0 * d)) * 2.0  # many rows past C
    beta = rng.normal(size=d)
    R = 0.3 * X @ beta + 0.3 * rng.normal(size=n)
    S = np.sign(X @ beta + 0.3 * rng.normal(size=n))
    S[S == 0] = 1.0
    return X, R, S


#: name, the loss of one example (w, x, y), the same loss summed over the data (vectorized
#: CVXPY, no dpcvx), whether its labels are signs
SPELLINGS = [
    (
        "tau neg + (1 - tau) pos",
        lambda w, x, y: TAU * cp.neg(x @ w - y) + (1 - TAU) * cp.pos(x @ w - y),
        lambda z: TAU * cp.sum(cp.neg(z)) + (1 - TAU) * cp.sum(cp.pos(z)),
        False,
    ),
    (
        "tau pos(-r) + (1 - tau) pos(r)",
        lambda w, x, y: TAU * cp.pos(-(x @ w - y)) + (1 - TAU) * cp.pos(x @ w - y),
        lambda z: TAU * cp.sum(cp.pos(-z)) + (1 - TAU) * cp.sum(cp.pos(z)),
        False,
    ),
    (
        "abs / 2 + (tau - 1/2) r",
        lambda w, x, y: 0.5 * cp.abs(x @ w - y) + (TAU - 0.5) * (x @ w - y),
        lambda z: 0.5 * cp.sum(cp.abs(z)) + (TAU - 0.5) * cp.sum(z),
        False,
    ),
    (
        "maximum(r, 0) + maximum(-r, 0)",
        lambda w, x, y: cp.maximum(x @ w - y, 0) + cp.maximum(-(x @ w - y), 0),
        lambda z: cp.sum(cp.abs(z)),
        False,
    ),
    (
        "abs + pos / 2",
        lambda w, x, y: cp.abs(x @ w - y) + 0.5 * cp.pos(x @ w - y),
        lambda z: cp.sum(cp.abs(z)) + 0.5 * cp.sum(cp.pos(z)),
        False,
    ),
    (
        "abs + 1/2",
        lambda w, x, y: cp.abs(x @ w - y) + 0.5,
        lambda z: cp.sum(cp.abs(z)) + 0.5 * z.size,
        False,
    ),
    (
        "hinge + margin / 100",
        lambda w, x, y: cp.pos(1 - y * (x @ w)) + 0.01 * (y * (x @ w)),
        None,  # the signed margins (below)
        True,
    ),
]


def _problem(spelling, X, labels, radius=RADIUS):
    _, one, _, _ = spelling
    w, x, y = cp.Variable(X.shape[1]), cp.Parameter(X.shape[1]), cp.Parameter()
    return dpcvx.Problem(one(w, x, y), w, {x: X, y: labels}, [cp.norm(w) <= radius])


def _whole(spelling, v, Y, X, labels):
    """The sum over the data of the spelling's loss at the rows of ``Y`` (CVXPY, vectorized);
    ``Y`` a variable of shape ``(n, d)`` or the point ``v`` broadcast."""
    _, _, whole, signs = spelling
    inner = cp.sum(cp.multiply(X, Y), axis=1)
    if signs:
        margin = cp.multiply(labels, inner)
        return cp.sum(cp.pos(1 - margin)) + 0.01 * cp.sum(margin)
    return whole(inner - labels)


def _plain_reference(spelling, X, labels, radius=RADIUS):
    v = cp.Variable(X.shape[1])
    loss = _whole_at_point(spelling, v, X, labels) / X.shape[0]
    prob = cp.Problem(cp.Minimize(loss + LAM / 2 * cp.sum_squares(v)), [cp.norm(v) <= radius])
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return float(prob.value)


def _whole_at_point(spelling, v, X, labels):
    _, _, whole, signs = spelling
    inner = X @ v
    if signs:
        margin = cp.multiply(labels, inner)
        return cp.sum(cp.pos(1 - margin)) + 0.01 * cp.sum(margin)
    return whole(inner - labels)


def _joint_reference(spelling, X, labels, radius=RADIUS):
    """The optimum of the extension's joint program (every copy in the ball)."""
    n, d = X.shape
    v, Y = cp.Variable(d), cp.Variable((n, d))
    obj = _whole(spelling, v, Y, X, labels) + C * cp.sum(cp.norm(Y - v[None, :], 2, axis=1))
    cons = [cp.norm(Y, 2, axis=1) <= radius, cp.norm(v) <= radius]
    prob = cp.Problem(cp.Minimize(obj / n + LAM / 2 * cp.sum_squares(v)), cons)
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return float(prob.value)


def _labels(spelling, seed=0):
    X, R, S = _data(seed)
    return X, (S if spelling[3] else R)


def _no_merge(monkeypatch):
    monkeypatch.setattr(A, "_merged", lambda *args, **kwargs: None)
    A._CACHE.clear()


@pytest.mark.parametrize("spelling", SPELLINGS, ids=lambda s: s[0])
def test_the_terms_are_one_term_of_the_method(spelling):
    """One term of at most MAX_PIECES pieces, holding every term of the declaration (no
    affine part apart), whose Lipschitz extension the arrowhead rung writes down."""
    X, labels = _labels(spelling)
    problem = _problem(spelling, X, labels)
    model = A.piecewise_model(problem.declaration)
    assert model is not None and len(model.terms) == 1
    (term,) = model.terms
    assert term.merged is not None and 2 <= len(term.b) <= A.MAX_PIECES
    assert model.whole and np.all(model.linear == 0.0)
    assert A.extension_pieces(model, C) is not None


@pytest.mark.parametrize("spelling", SPELLINGS, ids=lambda s: s[0])
def test_the_model_is_the_loss(spelling):
    """The merged term's value at random points is the declared loss's (numpy against the
    expression CVXPY evaluates), every piece of it at most the loss (none is dropped that
    rises above the others)."""
    X, labels = _labels(spelling)
    problem = _problem(spelling, X, labels)
    decl = problem.declaration
    model = A.piecewise_model(decl)
    (term,) = model.terms
    rng = np.random.default_rng(1)
    for _ in range(5):
        w = rng.normal(size=D)
        pieces = term.apply(w) + np.stack(term.b, axis=1)
        mine = term.c * decl.n * pieces.max(axis=1) + 0.0
        truth = np.array(
            [
                float(
                    _whole_at_point(spelling, cp.Constant(w), X[i : i + 1], labels[i : i + 1]).value
                )
                for i in range(decl.n)
            ]
        )
        np.testing.assert_allclose(mine, truth, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("spelling", SPELLINGS, ids=lambda s: s[0])
def test_plain_and_extension_solves_hold_cvxpy_optima(spelling, monkeypatch):
    """The plain solve and the extension's (copies leaving a ball of radius 0.4) run on the
    arrowhead rung, their brackets holding CVXPY's optima of the ERM and of the joint program.
    Control: without the merge the extension takes the conic program."""
    X, labels = _labels(spelling)
    plain = _problem(spelling, X, labels).solve(regularization=LAM, accuracy=1e-8)
    assert plain.solver_stats["solver"] == ARROWHEAD
    ref = _plain_reference(spelling, X, labels)
    slack = 1e-8 * (1 + abs(ref))
    assert plain.lower - slack <= ref <= plain.upper + slack
    ext = _problem(spelling, X, labels).lipschitz_extension(C).solve(regularization=LAM)
    assert ext.solver_stats["solver"] == ARROWHEAD
    assert ext.solver_stats.get("extension_copies", 0) > 0  # copies left the ball
    joint = _joint_reference(spelling, X, labels)
    slack = 1e-7 * (1 + abs(joint))
    assert ext.lower - slack <= joint <= ext.upper + slack
    _no_merge(monkeypatch)
    control = _problem(spelling, X, labels).lipschitz_extension(C).solve(regularization=LAM)
    assert control.solver_stats["solver"] != ARROWHEAD


def test_the_multipliers_of_each_term_are_its_shares_of_the_sum():
    """Weights on the merged pieces give each term of the declaration the sums over the pieces
    that hold its own (brute force over the combinations), simplex weights per row; an
    ``abs`` term its derivative ``w_E - w_{-E}``."""
    spelling = SPELLINGS[4]  # abs + pos / 2
    X, labels = _labels(spelling)
    model = A.piecewise_model(_problem(spelling, X, labels).declaration)
    (term,) = model.terms
    rng = np.random.default_rng(2)
    mu = rng.random((N, len(term.b)))
    mu *= term.c / mu.sum(axis=1, keepdims=True)
    (theta_abs,), pos = model.multipliers([mu])
    weights = mu / term.c
    expect_abs, expect_pos = np.zeros((N, 2)), np.zeros((N, 2))
    for piece, (j, k) in enumerate(term.merged.combos):
        expect_abs[:, j] += weights[:, piece]
        expect_pos[:, k] += weights[:, piece]
    np.testing.assert_allclose(theta_abs, expect_abs[:, 0] - expect_abs[:, 1], atol=1e-15)
    live = term.merged.live[1]  # pos = maximum(E, 0): E depends on w, 0 does not
    assert live == (True, False) and pos[1] is None  # the certificate completes it
    np.testing.assert_allclose(pos[0], expect_pos[:, 0], atol=1e-15)
    np.testing.assert_allclose(expect_pos.sum(axis=1), 1.0, atol=1e-14)


def test_the_envelope_drops_only_pieces_below_the_others():
    """Random lines with slopes from a few values (parallel ones included) and offsets per
    row: the maximum over the lines kept is the maximum over all, on a grid through every
    crossing; a line that rises above the others on one row only is kept (the control: the
    same line lowered on that row goes)."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        m = int(rng.integers(2, 7))
        slopes = [float(s) for s in rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0], size=m)]
        offsets = [rng.normal(size=6) * rng.choice([0.0, 1.0]) for _ in range(m)]
        keep = A._envelope(slopes, offsets)
        assert keep
        grid = np.linspace(-20, 20, 4001)
        full = np.max([np.outer(grid, np.ones(6)) * s + b for s, b in zip(slopes, offsets)], 0)
        kept = np.max([np.outer(grid, np.ones(6)) * slopes[i] + offsets[i] for i in keep], 0)
        np.testing.assert_allclose(kept, full, atol=1e-12)
    # the middle line is on top on row 1 only
    slopes = [-1.0, 0.0, 1.0]
    offsets = [np.zeros(3), np.array([-1.0, 0.5, -1.0]), np.zeros(3)]
    assert A._envelope(slopes, offsets) == [0, 1, 2]
    offsets[1][1] = -0.5
    assert A._envelope(slopes, offsets) == [0, 2]


def test_the_merge_depends_on_the_form_not_on_the_values():
    """Two terms merge where their pieces are multiples of the same array of the
    declaration, on every dataset: labels all zero (where the sum has fewer pieces) or not.
    Two terms of two data arrays that hold the same values on this dataset do not merge
    (on a neighbour they would differ): the choice never reads the values."""
    X, R, _ = _data()
    for labels in (R, np.zeros(N)):
        problem = _problem(SPELLINGS[0], X, labels)
        model = A.piecewise_model(problem.declaration)
        assert len(model.terms) == 1 and model.terms[0].merged is not None
    w, x, z, y = cp.Variable(D), cp.Parameter(D), cp.Parameter(D), cp.Parameter()
    loss = TAU * cp.neg(x @ w - y) + (1 - TAU) * cp.pos(z @ w - y)
    problem = dpcvx.Problem(loss, w, {x: X, z: X.copy(), y: R}, [cp.norm(w) <= RADIUS])
    model = A.piecewise_model(problem.declaration)
    assert len(model.terms) == 2 and all(t.merged is None for t in model.terms)


def test_three_terms_of_eight_combinations_stay_apart():
    """More than MAX_PIECES combinations (before any is dropped): the terms stay apart, on any
    data, and the plain solve still runs on the arrowhead rung."""
    X, R, _ = _data()
    w, x, y = cp.Variable(D), cp.Parameter(D), cp.Parameter()
    r = x @ w - y
    loss = cp.pos(r) + cp.neg(r) + cp.pos(r - 0.1)
    problem = dpcvx.Problem(loss, w, {x: X, y: R}, [cp.norm(w) <= RADIUS])
    model = A.piecewise_model(problem.declaration)
    assert len(model.terms) == 3
    assert problem.solve(regularization=LAM).solver_stats["solver"] == ARROWHEAD


@pytest.mark.parametrize("spelling", [SPELLINGS[0], SPELLINGS[2]], ids=lambda s: s[0])
def test_a_release_on_the_extension_certifies_on_a_dataset_and_its_neighbour(spelling, monkeypatch):
    """Double output perturbation (the extension at C) on a dataset and on its neighbour with
    one row a hundred million times larger: both release, and neither hands a conic program
    to a solver."""
    import dpcvx.certification.solve as S

    conic = []
    solve_program = S.solve_program
    monkeypatch.setattr(
        S, "solve_program", lambda *a, **k: conic.append(1) or solve_program(*a, **k)
    )
    X, labels = _labels(spelling)
    Xn = X.copy()
    Xn[7] *= 1e8
    mech = dpcvx.DoubleOutputPerturbation(C=C, regularization=LAM)
    for data in (X, Xn):
        released = _problem(spelling, data, labels).solve_private(mech, epsilon=1.0, rng=0)
        assert np.all(np.isfinite(released.w)) and len(released.certificates) == 2
    assert not conic


def test_a_data_expression_that_bends_keeps_the_terms_apart():
    """``cp.abs(y)`` is ``y`` on the probe's positive values and not on a label of -1: a merge
    decided there modelled such data wrongly (up to 0.24 per example), and a release took the
    fast path on a dataset of labels +1 and raised on its neighbour with one label -1 (the
    conic program over its size limit), and so did ``exp(log(y * y) / 2)``. A data
    expression that is not rational (``abs``, ``minimum``, ``sqrt``, ``exp``, ``log``, ...)
    keeps the terms apart on every dataset; the same loss with ``y`` itself, or ``y^2 / y``,
    merges (the control)."""
    X, _, _ = _data()
    plus = np.ones(N)
    minus = plus.copy()
    minus[0] = -1.0
    scales = [  # the factor of the second term, and whether the terms merge
        (cp.abs, False),
        (lambda y: cp.exp(cp.log(cp.multiply(y, y)) / 2), False),  # |y|: analytic, not rational
        (lambda y: cp.sqrt(cp.square(y)), False),
        (lambda y: y, True),
        (lambda y: cp.square(y) / y, True),  # rational, and y itself
    ]
    for factor, merges in scales:
        for labels in (plus, minus):
            w, x, y = cp.Variable(D), cp.Parameter(D), cp.Parameter()
            loss = cp.pos(1 - y * (x @ w)) + 0.5 * cp.pos(factor(y) * (x @ w))
            problem = dpcvx.Problem(loss, w, {x: X, y: labels}, [cp.norm(w) <= RADIUS])
            model = A.piecewise_model(problem.declaration)
            assert (len(model.terms) == 1) == merges
    w, s, x = cp.Variable(D), cp.Parameter(nonneg=True), cp.Parameter(D)
    loss = cp.minimum(s, 2) * cp.pos(x @ w) + s * cp.pos(-(x @ w))
    for weights in (np.full(N, 1.0), np.linspace(0.5, 4.0, N)):
        problem = dpcvx.Problem(loss, w, {x: X, s: weights}, [cp.norm(w) <= RADIUS])
        assert len(A.piecewise_model(problem.declaration).terms) == 2


def test_each_merged_piece_is_the_weighted_sum_of_its_terms_pieces(monkeypatch):
    """Against the terms as the method had them apart: each merged piece's slope and offsets
    are the weighted sums of the pieces its combination names (so the multipliers' sums run
    over the right pieces), and the dropped combinations are below the kept ones on every row
    (the maximum over all combinations equals the maximum over the kept ones at random
    points)."""
    plain = {  # the spellings without an affine term (those are in linear when apart)
        "tau neg + (1 - tau) pos",
        "tau pos(-r) + (1 - tau) pos(r)",
        "maximum(r, 0) + maximum(-r, 0)",
        "abs + pos / 2",
    }
    for spelling in [s for s in SPELLINGS if s[0] in plain]:
        X, labels = _labels(spelling)
        merged = A.piecewise_model(_problem(spelling, X, labels).declaration).terms[0]
        with monkeypatch.context() as m:
            m.setattr(A, "_merged", lambda *args, **kwargs: None)
            apart = A.piecewise_model(_problem(spelling, X, labels).declaration)
        parts = [t for t in apart.terms]
        c = sum(t.c for t in parts)
        rng = np.random.default_rng(5)
        for _ in range(3):
            w = rng.normal(size=D)
            values = [t.apply(w) + np.stack(t.b, axis=1) for t in parts]
            mine = merged.apply(w) + np.stack(merged.b, axis=1)
            for piece, combo in enumerate(merged.merged.combos):
                expect = sum(t.c / c * v[:, j] for t, v, j in zip(parts, values, combo))
                np.testing.assert_allclose(mine[:, piece], expect, rtol=1e-12, atol=1e-12)
            whole = sum(t.c / c * v.max(axis=1) for t, v in zip(parts, values))
            np.testing.assert_allclose(mine.max(axis=1), whole, rtol=1e-12, atol=1e-12)
