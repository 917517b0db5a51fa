"""An adversarial search for aborts: a private release must happen on every dataset of the
mechanism's data universe (DESIGN section 5), or the abort is an output outside the guarantee.

Each case builds the kind of dataset that used to make a certificate fail: one example whose
features are scaled by 10^k for k = 0..12 (the outlier a heavy-tailed mechanism exists for),
several copies of such a row, minimizers at a kink, a vertex or on the boundary, and tiny and
huge regularization. Every mechanism built on certified solves must release a finite point in
the domain on all of them, including a loss *value* of 1e16 with a moderate slope.
"""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pytest

import dpcvx

N, D = 60, 3


def _mechanisms():
    return {
        "output perturbation (claim enforced)": dpcvx.OutputPerturbation(
            lipschitz=2.0, regularization=0.1
        ),
        "double output perturbation": dpcvx.DoubleOutputPerturbation(
            k=4, moment=2.0, regularization=0.1
        ),
    }


def _release(problem, mech, seed=0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpcvx.LipschitzClaimWarning)
        res = problem.solve_private(mech, epsilon=1.0, rng=seed)
    assert np.all(np.isfinite(res.w))
    assert problem.domain.contains(res.w)
    return res


def _hinge(X, Y, domain=None):
    w = cp.Variable(X.shape[1])
    x = cp.Parameter(X.shape[1])
    y = cp.Parameter()
    dom = [cp.norm(w, 2) <= 1] if domain is None else domain(w)
    return dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, data={x: X, y: Y}, domain=dom)


def _base(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    Y = np.sign(X @ np.array([1.0, -0.5, 0.2]) + 0.3 * rng.normal(size=N))
    return X, Y


@pytest.mark.parametrize("k", range(0, 13, 2))
@pytest.mark.parametrize("name", list(_mechanisms()))
def test_one_steep_outlier_over_twelve_orders_of_magnitude(name, k):
    X, Y = _base()
    X[0] *= 10.0**k
    _release(_hinge(X, Y), _mechanisms()[name])


@pytest.mark.parametrize("k", (4, 8, 12))
def test_the_lipschitz_extension_releases_whatever_the_outlier(k):
    X, Y = _base(1)
    X[0] *= 10.0**k
    problem = _hinge(X, Y)
    mech = dpcvx.OutputPerturbation(lipschitz=2.0, regularization=0.1)
    res = problem.lipschitz_extension(2.0).solve_private(mech, epsilon=1.0, rng=0)
    assert np.all(np.isfinite(res.w)) and problem.domain.contains(res.w)


@pytest.mark.parametrize("k", (6, 10))
def test_duplicated_extreme_rows(k):
    X, Y = _base(2)
    X[:5] = X[0] * 10.0**k
    Y[:5] = Y[0]
    for mech in _mechanisms().values():
        _release(_hinge(X, Y), mech)


@pytest.mark.parametrize("k", (0, 6, 12))
def test_every_example_extreme(k):
    X, Y = _base(3)
    X *= 10.0**k
    for mech in _mechanisms().values():
        _release(_hinge(X, Y), mech)


@pytest.mark.parametrize("n", (5, 40))
@pytest.mark.parametrize("domain", ["abs", "two-sided", "norm"])
def test_minimizer_at_a_kink_on_the_boundary(n, domain):
    """All examples at -1, one at +1: the minimizer of sum |w - x_i| sits at the kink -1, on
    the boundary of [-1, 1]."""
    X = np.full((n, 1), -1.0)
    X[0] = 1.0
    w = cp.Variable(1)
    x = cp.Parameter(1)
    dom = {"abs": [cp.abs(w) <= 1], "two-sided": [w >= -1, w <= 1], "norm": [cp.norm(w) <= 1]}[
        domain
    ]
    problem = dpcvx.Problem(cp.abs(w - x), w, data={x: X}, domain=dom)
    for mech in (
        dpcvx.OutputPerturbation(lipschitz=1.0, regularization=1e-3),
        dpcvx.OutputPerturbation(lipschitz=1.0, regularization=10.0),
        dpcvx.DoubleOutputPerturbation(k=4, moment=1.0, regularization=0.01),
    ):
        _release(problem, mech)


def test_minimizer_at_a_vertex_of_a_polytope():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(N, D)) + 3.0  # pulls every example toward the same corner
    w = cp.Variable(D)
    x = cp.Parameter(D)
    A = np.vstack([np.eye(D), -np.eye(D), np.ones((1, D))])
    b = np.r_[np.ones(D), np.ones(D), 1.5]
    problem = dpcvx.Problem(cp.norm1(w - x), w, data={x: X}, domain=[A @ w <= b])
    for mech in (
        dpcvx.OutputPerturbation(lipschitz=np.sqrt(D), regularization=0.05),
        dpcvx.DoubleOutputPerturbation(k=4, moment=2.0, regularization=0.05),
    ):
        _release(problem, mech)


@pytest.mark.parametrize("lam", (1e-6, 1e-3, 10.0, 1e4))
def test_tiny_and_huge_regularization(lam):
    X, Y = _base(5)
    problem = _hinge(X, Y)
    for mech in (
        dpcvx.OutputPerturbation(lipschitz=3.0, regularization=lam),
        dpcvx.DoubleOutputPerturbation(k=4, moment=2.0, regularization=lam),
    ):
        _release(problem, mech)


def test_localized_double_output_perturbation_with_a_steep_outlier():
    rng = np.random.default_rng(6)
    n = 400
    X = rng.standard_t(3, size=(n, 2))
    Y = np.sign(X[:, 0] + 0.2 * rng.normal(size=n))
    X[0] *= 1e9
    mech = dpcvx.LocalizedDoubleOutputPerturbation(k=4, moment=3.0, second_moment=2.0, blocks=1)
    _release(_hinge(X, Y), mech)


@pytest.mark.parametrize("k", range(0, 17, 4))
def test_huge_loss_value_with_a_moderate_slope(k):
    """A label of 10^k (absolute loss): the loss is 10^k on the whole domain while its slope
    is moderate. The certificate's gap is a sum of stable duality gaps and the solver sees
    the term recentered, so nothing here depends on the value."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(N, D))
    Y = X @ np.array([0.3, 0.3, 0.3]) + 0.1 * rng.normal(size=N)
    Y[0] = 10.0**k
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    problem = dpcvx.Problem(cp.abs(x @ w - y), w, data={x: X, y: Y}, domain=[cp.norm(w, 2) <= 1])
    for mech in _mechanisms().values():
        _release(problem, mech)


def test_the_last_rung_is_paper_002_algorithm_2_where_affordable(monkeypatch):
    """Every interior-point rung fails here (a solver crash, simulated): where the fixed
    iteration count of paper 002's Algorithm 2 is affordable (small n d), the private
    release still happens, on the subgradient method's point; where it is not, the release
    aborts with the fixed text, as before."""
    import dpcvx.certification.solve as solve_module
    from dpcvx.errors import SolverError

    def crash(*args, **kwargs):
        raise SolverError("simulated crash")

    monkeypatch.setattr(solve_module, "solve_program", crash)
    monkeypatch.setattr(solve_module, "arrowhead_ipm", crash)  # the hinge loss's own rung
    rng = np.random.default_rng(8)
    X = rng.normal(size=(12, 2))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True)) * 1.001  # norms < 1
    Y = np.sign(X[:, 0] + 0.1)
    small = _hinge(X, Y)
    # a public accuracy large enough for a short run: T = ceil(2 G^2 / (lam alpha / 2))
    mech = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=1.0, accuracy=1e-2)
    assert solve_module.analytic_rung_applies(
        small.declaration,
        lam=1.0,
        w0=small.domain.center,
        accuracy=mech.plan(
            n=12, d=2, center=small.domain.center, diameter=small.diameter, epsilon=1.0, delta=0.0
        ).accuracy,
        extension=1.0,
        w_domain=None,
    )
    res = _release(small, mech)
    assert res.detail["lipschitz_claim"].startswith("enforced")
    X2 = rng.normal(size=(2000, 3))
    X2 /= np.maximum(1.0, np.linalg.norm(X2, axis=1, keepdims=True))
    big = _hinge(X2, np.sign(X2[:, 0] + 0.1))
    default = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=1.0)  # alpha ~ 3e-10
    with pytest.raises(dpcvx.CertificationError):
        big.solve_private(default, epsilon=1.0, rng=0)


@pytest.mark.parametrize("scale", (1e100, 1e160))
def test_an_overflowing_lipschitz_bound_leaves_the_universe(scale):
    """A squared loss with features of 1e160: its structural Lipschitz bound overflows. That
    example must leave the universe like any steep one (it was kept, and the release aborted
    on one side of a neighbouring pair: 1e100 released, 1e160 aborted)."""
    rng = np.random.default_rng(10)
    X = rng.normal(size=(20, 2))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    Y = X @ np.array([0.3, -0.2])
    X[0] *= scale
    w = cp.Variable(2)
    x = cp.Parameter(2)
    y = cp.Parameter()
    problem = dpcvx.Problem(cp.square(x @ w - y), w, data={x: X, y: Y}, domain=[cp.norm(w, 2) <= 1])
    _release(problem, dpcvx.OutputPerturbation(lipschitz=1.0, regularization=0.1))


@pytest.mark.parametrize("scale", (1.0, 1e153))
def test_an_overflowing_lipschitz_bound_raises_no_warning(scale):
    """The same overflow under warnings raised as errors, in a box: the bound's overflow is
    the largest float without a floating-point warning, so the release happens on the
    dataset with the 1e153 rows and on its neighbour without them alike (it aborted on the
    first: the warning ended the solve)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4)) / 2.0
    X[:3] *= scale
    Y = rng.normal(size=300)
    w, x, y = cp.Variable(4), cp.Parameter(4), cp.Parameter()
    problem = dpcvx.Problem(cp.square(x @ w - y), w, {x: X, y: Y}, [cp.abs(w) <= 100])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", dpcvx.LipschitzClaimWarning)
        res = problem.solve_private(
            dpcvx.OutputPerturbation(lipschitz=1.0, regularization=0.05), epsilon=1.0, rng=0
        )
    assert np.all(np.isfinite(res.w)) and problem.domain.contains(res.w)


#: losses whose slope does not grow with the label: one huge label keeps the example in the
#: slope universe, its argument and value of the label's size
_LABEL_LOSSES = {
    "huber": lambda r: cp.huber(r, 1.0),
    "absolute": cp.abs,
    "epsilon-insensitive": lambda r: cp.pos(cp.abs(r) - 0.1),
    "pinball": lambda r: cp.maximum(0.3 * r, -0.7 * r),
    "logistic": cp.logistic,
    "logistic + 0.2 r": lambda r: cp.logistic(r) + 0.2 * r,
}


def _labelled(loss, label, row=1.0, copies=1, seed=11, full=None):
    """Rows in the unit ball and a linear model's labels, the first ``copies`` labels set to
    ``label`` and the first row scaled by ``row``; the loss ``loss(x^T w - y)``, or
    ``full(x, w, y)``; the unit ball."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    Y = X @ np.array([0.3, -0.2, 0.1]) + 0.1 * rng.normal(size=N)
    Y[:copies] = label
    X[0] *= row
    w, x, y = cp.Variable(D), cp.Parameter(D), cp.Parameter()
    expr = loss(x @ w - y) if full is None else full(x, w, y)
    return dpcvx.Problem(expr, w, data={x: X, y: Y}, domain=[cp.norm(w, 2) <= 1])


def _release_all(problem, errors=True):
    """Every mechanism releases a finite point in the domain (with ``errors``, under warnings
    raised as errors, but the curator's ``LipschitzClaimWarning``)."""
    with warnings.catch_warnings():
        if errors:
            warnings.simplefilter("error")
        warnings.simplefilter("ignore", dpcvx.LipschitzClaimWarning)
        for mech in _mechanisms().values():
            res = problem.solve_private(mech, epsilon=1.0, rng=0)
            assert np.all(np.isfinite(res.w)) and problem.domain.contains(res.w)


@pytest.mark.parametrize("label", [1e17, -1e17, -1e30, 1e99, 1e101, -1.7e308])
@pytest.mark.parametrize("name", list(_LABEL_LOSSES))
def test_one_huge_label_releases_under_warnings_as_errors(name, label):
    """One label from 1e17 to the largest float, on losses whose slope it leaves alone. Up
    to 1e16 these released; past it every one of them aborted on some label: the moves of
    far arguments rounded at the label's size (the arrowhead method had none), the stable
    gap charged ``eps`` times the argument's error on the logistic loss's linear side, and a
    Huber value of ``2 |E|`` overflowed from 9e307. Past ``UNIVERSE_ARGUMENT`` (1e100) the
    example has the zero loss; below it the certificate resolves it. Warnings are raised as
    errors: none may end a solve on one side of a pair."""
    _release_all(_labelled(_LABEL_LOSSES[name], label))


#: penalties written into the loss (they read no data), beside the absolute and pinball losses
_PENALTIES = {
    "group lasso": lambda w: 0.05 * (cp.norm(w[:1]) + cp.norm(w[1:])),
    "sup norm": lambda w: 0.05 * cp.norm_inf(w),
    "norm of w - c": lambda w: 0.05 * cp.norm(w - 0.2),
    "log_sum_exp": lambda w: 0.05 * cp.log_sum_exp(w),
    "maximum": lambda w: 0.05 * cp.max(w),
    "quadratic form": lambda w: 0.05 * cp.quad_form(w, np.diag([1.0, 2.0, 3.0])),
}


@pytest.mark.parametrize("label", [1e8, -1e12, 1e17])
@pytest.mark.parametrize("loss", ["absolute", "pinball"])
@pytest.mark.parametrize("penalty", list(_PENALTIES.values()), ids=list(_PENALTIES))
def test_one_huge_label_beside_a_penalty_releases(penalty, loss, label):
    """A penalty that reads no data beside one huge label: before 2026-11-29 such a penalty
    (a norm, a maximum, ``log_sum_exp`` or a quadratic form of ``w``) sent the whole loss to
    the value-based certificate, whose margin relative to the label's value missed the
    private target, and the release aborted where the dataset without the label released
    (a review's case; 30 of these 36 aborted). The stable gap takes such penalties now."""
    base = _LABEL_LOSSES[loss]
    problem = _labelled(None, label, full=lambda x, w, y: base(x @ w - y) + penalty(w))
    _release_all(problem, errors=False)


@pytest.mark.parametrize(
    ("loss", "label", "row", "kept"),
    [
        (lambda r: cp.huber(r, 1.0), 1e99, 1.0, True),
        (lambda r: cp.huber(r, 1.0), -1e101, 1.0, False),
        (lambda r: cp.square(cp.pos(r)), 1e49, 1.0, True),  # the flat side, within 1e50
        (lambda r: cp.square(cp.pos(r)), 1e51, 1.0, False),
        (cp.exp, 1e8, 1.0, True),  # exp(x^T w - 1e8) is zero on the domain: nothing overflows
        (cp.exp, -1e3, 1.0, False),  # exp(1000) overflows
        (cp.exp, 1e101, 1.0, False),  # zero, but ten such labels overflowed the value bounds
        # a row of zeros: a constant loss, of the square of its label where that is live
        (cp.square, 900.0, 0.0, True),
        (cp.square, 2e3, 0.0, False),
        (lambda r: cp.power(cp.pos(r), 2.5), -2e3, 1e-20, False),
        (lambda r: cp.power(cp.pos(r), 2.5), 2e3, 1e-20, True),  # the flat side: zero
    ],
)
def test_the_argument_universe(loss, label, row, kept):
    """An example leaves a private extension solve's universe where a term's argument can
    exceed ``UNIVERSE_ARGUMENT`` (by kind) on the domain's bounding ball (for the
    exponential also upward past 600, where its value overflows), and where a curved term's
    live argument lies over a thousand times its spread (plus one) from the ball."""
    from dpcvx.certification.solve import universe_indices

    problem = _labelled(loss, label, row)
    kept_rows = universe_indices(problem.declaration, 1e6)  # no example is steeper than 1e10
    if kept:
        assert kept_rows is None
    else:
        np.testing.assert_array_equal(kept_rows, np.arange(1, N))


_CURVED_LOSSES = {
    "squared": cp.square,
    "square(pos)": lambda r: cp.square(cp.pos(r)),
    "pos power 2.5": lambda r: cp.power(cp.pos(r), 2.5),
    "pos power 3": lambda r: cp.power(cp.pos(r), 3),
}


@pytest.mark.parametrize("row", [0.0, 1e-300, 1e-20])
@pytest.mark.parametrize("label", [-1e4, 1e8, -1e16, -1e60])
@pytest.mark.parametrize("name", list(_CURVED_LOSSES))
def test_a_row_of_zeros_with_a_huge_label_releases(name, label, row):
    """A row of zeros (or of 1e-300, 1e-20) with a huge label in a curved loss: the loss is
    nearly constant on the domain, of the label's square or more, and its slope is about
    zero, so the slope universe kept it. Newton's steps and the curved terms' gaps, relative
    to the values, could not resolve it: the releases aborted from a label of 1e4 (a label
    of 1e2 released). Such an example now leaves the universe where its live argument lies
    over a thousand times its spread from the domain."""
    _release_all(_labelled(_CURVED_LOSSES[name], label, row))


@pytest.mark.parametrize("label", [1e101, 1.7e308])
def test_copies_of_a_label_far_below_an_exponential_release(label):
    """Ten examples at ``exp(x^T w - 1e308)``: each is zero on the domain, but the value
    bounds' sums of their arguments overflowed (one copy released, ten aborted)."""
    _release_all(_labelled(cp.exp, label, copies=10, seed=12), errors=False)


@pytest.mark.parametrize("label", [1e12, 1e17, 1e99])
def test_a_maximums_piece_far_below_charges_nothing(label):
    """``max(x^T w - y, 0.5 x^T w - 1, 0)`` with one label from 1e12: the first piece lies
    far below the others. The stable gap charged the largest error of all the pieces, and a
    bound on the maximum's size taken over all of them, to the example (6.7e-5 at 1e12, more
    at larger labels): every private release aborted up to 1e99 (a review's case). The plain
    solve certifies 1e-6 now, and the releases run."""
    problem = _labelled(
        None, label, seed=13, full=lambda x, w, y: cp.maximum(x @ w - y, 0.5 * (x @ w) - 1, 0)
    )
    assert problem.solve(regularization=0.05, accuracy=1e-6).gap <= 1e-6
    _release_all(problem, errors=False)


@pytest.mark.parametrize("label", [1e4, -1e8, 1e17])
def test_a_far_entry_of_log_sum_exp_leaves_the_universe(label):
    """``log_sum_exp([y, x^T w, 0.5 x^T w - y])`` with one label of 1e8: a value of 1e8 with
    slope zero, in a term without a stable gap, whose certificate's rounding is relative to
    the value; the releases aborted from 1e8 (a review's case). Such an example (an argument
    over a thousand times its spread from the domain) now has the zero loss."""
    _release_all(_labelled(None, label, seed=13, full=_lse3), errors=False)


def _lse3(x, w, y):
    return cp.log_sum_exp(cp.hstack([y, x @ w, 0.5 * (x @ w) - y]))
