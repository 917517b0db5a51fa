"""Validation of a declared problem (dpcvx.modeling.declaration) and domain analysis
(dpcvx.modeling.domains).

Every bad input must raise a typed error (DataError / ModelingError / InvalidParameterError, all
subclasses of ValueError and DpcvxError) whose message names what is wrong; every catalogue domain
must get a bounding ball and a diameter bound that contain the set (checked against closed forms,
vertex enumeration and dense boundary samples, not against dpcvx).
"""

from __future__ import annotations

import gc
import itertools
import weakref

import cvxpy as cp
import numpy as np
import pytest
from catalogue import (
    box_case,
    domain_cases,
    ellipsoid_case,
    l1_ball_case,
    l2_ball_case,
    polytope_case,
    simplex_case,
)

import dpcvx
from dpcvx import DataError, DpcvxError, InvalidParameterError, ModelingError
from dpcvx.modeling.declaration import Declaration
from dpcvx.modeling.domains import Domain

D, N = 3, 8


@pytest.fixture
def setup():
    rng = np.random.default_rng(0)
    w = cp.Variable(D, name="w")
    x = cp.Parameter(D, name="features")
    y = cp.Parameter(name="label")
    X = rng.normal(size=(N, D))
    Y = np.sign(rng.normal(size=N))
    return w, x, y, X, Y


def _ball(w):
    return [cp.norm(w, 2) <= 1]


def test_error_hierarchy():
    for cls in (DataError, ModelingError, InvalidParameterError):
        assert issubclass(cls, ValueError)
        assert issubclass(cls, DpcvxError)
    assert issubclass(DataError, ModelingError)


def test_a_good_declaration(setup):
    w, x, y, X, Y = setup
    decl = Declaration(cp.pos(1 - y * (x @ w)), w, {x: X, y: Y}, _ball(w))
    assert decl.n == N and decl.d == D
    np.testing.assert_array_equal(decl.data[x.id], X)
    np.testing.assert_array_equal(decl.data[y.id], Y)


def test_a_small_declaration_computes_each_jet_once_and_a_block_its_own(setup, monkeypatch):
    """``Declaration.jet`` is ``affine_jet`` (read-only arrays), computed once per expression
    on a declaration with ``n d`` at most ``JET_ENTRIES`` and again on a larger one; a block
    (``subset``) has jets of its own rows; an expression without a jet raises every time, and
    the declaration that raised is freed (the cache holds no traceback of its frames)."""
    from dpcvx.modeling import declaration as declaration_module
    from dpcvx.modeling._expressions import Unsupported, affine_jet

    w, x, y, X, Y = setup
    decl = Declaration(cp.pos(1 - y * (x @ w)), w, {x: X, y: Y}, _ball(w))
    arg = next(a for a in decl.terms[0].args if a.variables())
    off, jac = decl.jet(arg)
    expected = affine_jet(arg, w, decl.derived_values(), decl.n)
    np.testing.assert_array_equal(off, expected[0])
    np.testing.assert_array_equal(jac, expected[1])
    np.testing.assert_allclose(jac, -Y[:, None] * X)
    assert not off.flags.writeable and not jac.flags.writeable
    again = decl.jet(arg)
    assert again[0] is off and again[1] is jac
    rows = np.array([5, 1, 6])
    block = decl.subset(rows)
    np.testing.assert_array_equal(block.jet(arg)[1], jac[rows])
    assert decl.jet(arg)[1] is jac  # the block's rows did not replace the declaration's
    # above the limit: computed at each call (no n x d arrays kept)
    monkeypatch.setattr(declaration_module, "JET_ENTRIES", N * D - 1)
    big = Declaration(cp.pos(1 - y * (x @ w)), w, {x: X, y: Y}, _ball(w))
    arg_big = next(a for a in big.terms[0].args if a.variables())
    assert big.jet(arg_big)[1] is not big.jet(arg_big)[1]
    monkeypatch.undo()
    square = cp.square(x @ w)
    for _ in range(2):
        with pytest.raises(Unsupported):
            decl.jet(square)
    gone = weakref.ref(decl)
    del decl, block
    gc.collect()
    assert gone() is None


def test_declared_data_is_isolated_from_the_callers_arrays(setup):
    w, x, y, X, Y = setup
    problem = dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, {x: X, y: Y}, _ball(w))
    first = problem.solve(regularization=0.1)
    X *= 10.0  # the caller reuses its buffer
    second = problem.solve(regularization=0.1)
    assert second.upper == pytest.approx(first.upper, abs=1e-9)
    assert second.gap < 1e-6


def test_issue_example_is_accepted_although_cvxpy_says_it_is_not_dpp(setup):
    """``cp.pos(1 - y * (x @ w))`` is not DPP by CVXPY's rules (parameter times parameter-affine),
    but dpcvx lifts ``y * x`` into a derived parameter."""
    w, x, y, X, Y = setup
    loss = cp.pos(1 - y * (x @ w))
    assert not loss.is_dcp(dpp=True)
    problem = dpcvx.Problem(loss, w, data={x: X, y: Y}, domain=_ball(w))
    assert problem.declaration.lifted.is_dcp(dpp=True)
    sol = problem.solve(regularization=0.1)
    expected = np.mean(np.maximum(0, 1 - Y * (X @ sol.w))) + 0.05 * sol.w @ sol.w
    assert sol.upper == pytest.approx(expected, abs=1e-9)


def test_data_may_be_lists_and_ints(setup):
    w, x, y, X, Y = setup
    problem = dpcvx.Problem(
        cp.abs(x @ w - y), w, {x: X.tolist(), y: [1, 0, 2, 1, 0, 1, 1, 3]}, _ball(w)
    )
    assert problem.n == N


# ------------------------------------------------------------------------------ data errors


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_data(setup, bad):
    w, x, y, X, Y = setup
    X = X.copy()
    X[5, 1] = bad
    with pytest.raises(DataError, match="features") as info:
        Declaration(cp.pos(1 - y * (x @ w)), w, {x: X, y: Y}, _ball(w))
    assert "NaN or inf" in str(info.value)
    assert "example 5" in str(info.value)


def test_nonfinite_scalar_data(setup):
    w, x, y, X, Y = setup
    Y = Y.copy()
    Y[0] = np.nan
    with pytest.raises(DataError, match="label"):
        Declaration(cp.pos(1 - y * (x @ w)), w, {x: X, y: Y}, _ball(w))


def test_first_axes_disagree(setup):
    w, x, y, X, Y = setup
    with pytest.raises(DataError, match="label|features") as info:
        Declaration(cp.pos(1 - y * (x @ w)), w, {x: X, y: Y[:-1]}, _ball(w))
    assert "first axis" in str(info.value)


@pytest.mark.parametrize("shape", [(N, D + 1), (N,), (N, D, 1), (D,), ()])
def test_trailing_shape_mismatch(setup, shape):
    w, x, y, X, Y = setup
    with pytest.raises(DataError, match="features") as info:
        Declaration(cp.abs(x @ w), w, {x: np.ones(shape)}, _ball(w))
    assert str(shape) in str(info.value)


def test_scalar_parameter_with_a_column(setup):
    w, x, y, X, Y = setup
    with pytest.raises(DataError, match="label"):
        Declaration(cp.pos(1 - y * (x @ w)), w, {x: X, y: Y[:, None]}, _ball(w))


def test_nonnumeric_data(setup):
    w, x, y, X, Y = setup
    with pytest.raises(DataError, match="features"):
        Declaration(cp.abs(x @ w), w, {x: [["a", "b", "c"]] * N}, _ball(w))


def test_missing_parameter(setup):
    w, x, y, X, Y = setup
    with pytest.raises(DataError, match="label") as info:
        Declaration(cp.pos(1 - y * (x @ w)), w, {x: X}, _ball(w))
    assert "no array" in str(info.value)


def test_parameter_with_a_value_and_no_data_is_a_public_constant(setup):
    """cp.Parameter(value=0.3) without a data array is read as the constant 0.3, frozen at
    declaration: the loss values equal numpy's, and a later change of the value does not
    reach the declared problem."""
    w, x, y, X, Y = setup
    eps = cp.Parameter(name="margin", value=0.3)
    scale = cp.Parameter(D, name="scale", value=np.array([1.0, 2.0, 0.5]))
    decl = Declaration(
        cp.pos(cp.abs(x @ cp.multiply(scale, w) - y) - eps), w, {x: X, y: Y}, _ball(w)
    )
    assert {p.name() for p in decl.parameters} == {"features", "label"}
    wv = np.array([0.3, -0.2, 0.1])
    expected = np.maximum(np.abs(X @ (np.array([1.0, 2.0, 0.5]) * wv) - Y) - 0.3, 0.0)
    np.testing.assert_allclose(decl.loss_values(wv), expected, rtol=1e-14, atol=1e-15)
    eps.value = 5.0
    np.testing.assert_allclose(decl.loss_values(wv), expected, rtol=1e-14, atol=1e-15)
    assert decl.terms[0].kind == "pieces"


def test_unsigned_constant_parameter_may_scale_a_convex_term(setup):
    """A public constant needs no sign attribute: its value's sign decides convexity."""
    w, x, y, X, Y = setup
    c = cp.Parameter(name="c", value=2.0)
    decl = Declaration(c * cp.square(x @ w - y), w, {x: X, y: Y}, _ball(w))
    np.testing.assert_allclose(decl.loss_values(np.zeros(D)), 2.0 * Y**2, rtol=1e-14)
    neg = cp.Parameter(name="c_neg", value=-1.0)
    with pytest.raises(ModelingError, match="convex"):
        Declaration(neg * cp.square(x @ w - y), w, {x: X, y: Y}, _ball(w))


def test_parameter_without_a_value_or_data_is_refused(setup):
    w, x, y, X, Y = setup
    c = cp.Parameter(name="threshold")
    with pytest.raises(DataError, match="threshold") as info:
        Declaration(cp.pos(x @ w - c), w, {x: X}, _ball(w))
    assert "no value" in str(info.value)


def test_constant_parameter_must_be_finite(setup):
    w, x, y, X, Y = setup
    c = cp.Parameter(name="threshold", value=1.0)
    c._value = np.array(np.nan)  # CVXPY refuses NaN through the setter; force it
    with pytest.raises(DataError, match="threshold.*finite"):
        Declaration(cp.pos(x @ w - c), w, {x: X}, _ball(w))


def test_unused_data_key(setup):
    w, x, y, X, Y = setup
    with pytest.raises(DataError, match="label") as info:
        Declaration(cp.abs(x @ w), w, {x: X, y: Y}, _ball(w))
    assert "does not use" in str(info.value)


def test_data_keyed_by_name(setup):
    w, x, y, X, Y = setup
    with pytest.raises(DataError, match="cp.Parameter"):
        Declaration(cp.abs(x @ w), w, {"features": X}, _ball(w))


@pytest.mark.parametrize("data", [{}, None, [1, 2]])
def test_empty_or_wrong_data_container(setup, data):
    w, x, y, X, Y = setup
    with pytest.raises(DataError):
        Declaration(cp.abs(x @ w), w, data, _ball(w))


def test_zero_examples(setup):
    w, x, y, X, Y = setup
    with pytest.raises(DataError, match="at least one example"):
        Declaration(cp.abs(x @ w), w, {x: np.zeros((0, D))}, _ball(w))


def test_sign_attributes_of_parameters_are_checked(setup):
    w, x, _, X, _ = setup
    s = cp.Parameter(nonneg=True, name="weight")
    with pytest.raises(DataError, match="weight"):
        Declaration(s * cp.abs(x @ w), w, {x: X, s: -np.ones(N)}, _ball(w))


# ------------------------------------------------------------------------------ loss errors


@pytest.mark.parametrize(
    "make",
    [
        lambda w, x: cp.square(x @ w) - cp.abs(x @ w),  # convex minus convex: unknown curvature
        lambda w, x: cp.square(cp.sqrt(x @ w)),  # convex of concave, nonmonotone
        lambda w, x: cp.abs(x @ w) * (x @ w),  # product of variable expressions
    ],
    ids=["convex-minus-convex", "square-of-sqrt", "product"],
)
def test_non_dcp_loss(setup, make):
    w, x, y, X, Y = setup
    with pytest.raises(ModelingError, match="DCP"):
        Declaration(make(w, x), w, {x: X}, _ball(w))


@pytest.mark.parametrize(
    "make",
    [
        lambda w, x: -cp.square(x @ w),
        lambda w, x: cp.sqrt(x @ w),
        lambda w, x: cp.minimum(x @ w, 1),
    ],
    ids=["neg-square", "sqrt", "minimum"],
)
def test_concave_loss_is_rejected_when_declared(setup, make):
    w, x, y, X, Y = setup
    with pytest.raises(ModelingError, match="convex|DCP"):
        Declaration(make(w, x), w, {x: X}, _ball(w))


@pytest.mark.parametrize(
    "make",
    [lambda w, x: -cp.square(x @ w), lambda w, x: cp.sqrt(x @ w)],
    ids=["neg-square", "sqrt"],
)
def test_concave_loss_never_solves(setup, make):
    """Whatever the moment it is caught, a concave loss never produces a 'solution'."""
    w, x, y, X, Y = setup
    with pytest.raises(ModelingError):
        dpcvx.Problem(make(w, x), w, {x: np.abs(X)}, _ball(w)).solve()


@pytest.mark.parametrize(
    "make",
    [lambda w, x, y: cp.square(x @ w) * y, lambda w, x, y: cp.norm(w - x) * y],
    ids=["square-times-y", "norm-times-y"],
)
def test_sign_indefinite_parameter_times_convex_is_not_dcp(setup, make):
    """With a plain (sign-unknown) parameter the product is not even DCP."""
    w, x, y, X, Y = setup
    with pytest.raises(ModelingError, match="label"):
        Declaration(make(w, x, y), w, {x: X, y: Y}, _ball(w))


@pytest.mark.parametrize(
    "make",
    [
        lambda w, x, s: cp.square(x @ w) * s,
        lambda w, x, s: cp.norm(w - x) * s,
        lambda w, x, s: s * cp.abs(x @ w - 1),
    ],
    ids=["square-times-s", "norm-times-s", "s-times-abs"],
)
def test_a_nonnegative_weight_is_pushed_through_positive_homogeneity(setup, make):
    """A nonnegative data factor times a convex data-dependent term is DCP but not DPP; dpcvx
    rewrites it (``s |E| = |s E|``, ``s ||E|| = ||s E||``, ``s E^2 = (sqrt(s) E)^2``) into an
    equal DPP loss, checked here by evaluating both on the data."""
    w, x, _, X, _ = setup
    s = cp.Parameter(nonneg=True, name="scale")
    loss = make(w, x, s)
    assert loss.is_dcp() and not loss.is_dcp(dpp=True)
    S = np.abs(np.arange(N, dtype=float))
    decl = Declaration(loss, w, {x: X, s: S}, _ball(w))
    point = np.array([0.3, -0.2, 0.1])[: X.shape[1]]
    got = decl.loss_values(point)
    lifted = [float(make(point, X[i], S[i]).value) for i in range(N)]
    np.testing.assert_allclose(got, lifted, rtol=1e-12, atol=1e-12)
    assert all(t.kind != "generic" for t in decl.terms)


def test_a_weight_on_logistic_is_not_dpp(setup):
    """``s * logistic(E)`` has no homogeneous form: refused, naming the data factor."""
    w, x, _, X, _ = setup
    s = cp.Parameter(nonneg=True, name="scale")
    loss = s * cp.logistic(x @ w)
    with pytest.raises(ModelingError, match="DPP") as info:
        Declaration(loss, w, {x: X, s: np.abs(np.arange(N, dtype=float))}, _ball(w))
    assert "scale" in str(info.value)


def test_not_dpp_message_shows_the_users_term(setup):
    w, x, _, X, _ = setup
    s = cp.Parameter(nonneg=True, name="scale")
    with pytest.raises(ModelingError, match="features"):
        Declaration(cp.logistic(x @ w) * s, w, {x: X, s: np.ones(N)}, _ball(w))


def test_not_dpp_message_names_a_one_letter_parameter_once(setup):
    """A weight named ``s``: the message shows the data factor, not ``logi(s)tic``."""
    w, x, _, X, _ = setup
    s = cp.Parameter(nonneg=True, name="s")
    with pytest.raises(ModelingError, match="DPP") as info:
        Declaration(s * cp.logistic(x @ w), w, {x: X, s: np.ones(N)}, _ball(w))
    assert "logistic(" in str(info.value) and "(s)" in str(info.value)


def test_two_variables(setup):
    w, x, y, X, Y = setup
    v = cp.Variable(D, name="other")
    with pytest.raises(ModelingError, match="other"):
        Declaration(cp.abs(x @ w) + cp.sum(v), w, {x: X}, _ball(w))


def test_loss_in_another_variable_only(setup):
    w, x, y, X, Y = setup
    v = cp.Variable(D, name="other")
    with pytest.raises(ModelingError, match="other"):
        Declaration(cp.abs(x @ v), w, {x: X}, _ball(w))


def test_loss_without_the_variable(setup):
    w, x, y, X, Y = setup
    with pytest.raises(ModelingError, match="does not depend"):
        Declaration(cp.square(y) + 0 * cp.sum(x), w, {x: X, y: Y}, _ball(w))


@pytest.mark.parametrize("shape", [(2, 2), (), (3, 1)])
def test_variable_must_be_a_vector(setup, shape):
    _, x, y, X, Y = setup
    W = cp.Variable(shape, name="W")
    with pytest.raises(ModelingError, match=r"shape \(d,\)"):
        Declaration(cp.sum(cp.abs(W)), W, {x: X}, [cp.norm(W) <= 1])


def test_non_scalar_loss(setup):
    w, x, y, X, Y = setup
    with pytest.raises(ModelingError, match="scalar") as info:
        Declaration(cp.abs(w - x), w, {x: X}, _ball(w))
    assert "cp.sum" in str(info.value)


def test_loss_must_be_an_expression(setup):
    w, x, y, X, Y = setup
    with pytest.raises(ModelingError, match="Expression"):
        Declaration(lambda v: v, w, {x: X}, _ball(w))


# ------------------------------------------------------------------------------ domain errors


def test_unbounded_domain(setup):
    w, x, y, X, Y = setup
    with pytest.raises(ModelingError, match="unbounded"):
        Declaration(cp.abs(x @ w), w, {x: X}, [w >= 0])


def test_partially_bounded_domain(setup):
    w, x, y, X, Y = setup
    with pytest.raises(ModelingError, match=r"unbounded.*w\[1\]"):
        Declaration(cp.abs(x @ w), w, {x: X}, [w[0] >= 0, w[0] <= 1])


@pytest.mark.parametrize(
    "make",
    [
        lambda w: [w >= 1, w <= 0],
        lambda w: [cp.norm(w) <= 1, cp.sum(w) >= 5],
        lambda w: [cp.norm(w, "inf") <= -1],
    ],
    ids=["box", "ball-halfspace", "negative-linf"],
)
def test_empty_domain(setup, make):
    w, x, y, X, Y = setup
    with pytest.raises(ModelingError, match="empty"):
        Declaration(cp.abs(x @ w), w, {x: X}, make(w))


@pytest.mark.parametrize("domain", [None, []])
def test_no_domain(setup, domain):
    w, x, y, X, Y = setup
    with pytest.raises(ModelingError, match="domain"):
        Declaration(cp.abs(x @ w), w, {x: X}, domain)


@pytest.mark.parametrize("radius", [0.0, -1.0])
def test_nonpositive_ball_radius(setup, radius):
    w, x, y, X, Y = setup
    with pytest.raises(ModelingError, match="radius"):
        Declaration(cp.abs(x @ w), w, {x: X}, [cp.norm(w, 2) <= radius])


def test_domain_with_a_parameter(setup):
    w, x, y, X, Y = setup
    r = cp.Parameter(nonneg=True, name="radius_param")
    r.value = 1.0
    with pytest.raises(ModelingError, match="radius_param") as info:
        Declaration(cp.abs(x @ w), w, {x: X}, [cp.norm(w) <= r])
    assert "Parameter" in str(info.value)


def test_domain_with_a_data_parameter(setup):
    w, x, y, X, Y = setup
    with pytest.raises(ModelingError, match="features"):
        Declaration(cp.abs(x @ w), w, {x: X}, [cp.norm(w - x) <= 1])


def test_domain_with_another_variable(setup):
    w, x, y, X, Y = setup
    v = cp.Variable(D, name="other")
    with pytest.raises(ModelingError, match="other"):
        Declaration(cp.abs(x @ w), w, {x: X}, [cp.norm(w) <= 1, cp.norm(v) <= 1])


def test_domain_not_dcp(setup):
    w, x, y, X, Y = setup
    with pytest.raises(ModelingError, match="not DCP"):
        Declaration(cp.abs(x @ w), w, {x: X}, [cp.norm(w) >= 1, cp.norm(w) <= 2])


def test_domain_entries_must_be_constraints(setup):
    w, x, y, X, Y = setup
    with pytest.raises(ModelingError, match="constraint"):
        Declaration(cp.abs(x @ w), w, {x: X}, [cp.norm(w)])


def test_unsupported_cone_constraint(setup):
    w, x, y, X, Y = setup
    with pytest.raises(ModelingError, match="not supported"):
        Declaration(cp.abs(x @ w), w, {x: X}, [cp.SOC(cp.Constant(1.0), w)])


def test_affine_domain_with_an_unsupported_atom_raises_a_typed_error(setup):
    w, x, y, X, Y = setup
    try:
        Declaration(cp.abs(x @ w), w, {x: X}, [cp.norm(w) <= 1, cp.cumsum(w) <= 0.5])
    except DpcvxError:
        pass  # a typed rejection is fine; so is acceptance


# ------------------------------------------------------------------------------ domain analysis


def _domain(case):
    w = cp.Variable(case.d)
    return Domain(w, case.build(w))


ALL_DOMAINS = (
    domain_cases(2)
    + domain_cases(3)
    + [
        l2_ball_case(1, 0.7, 0.2),
        l2_ball_case(5, 3.0, np.arange(5.0)),
        box_case([-1.0], [2.0]),
        box_case(np.zeros(4), np.array([1.0, 2.0, 0.5, 3.0])),
        l1_ball_case(4, 0.5, np.ones(4)),
        simplex_case(5, 2.5),
        ellipsoid_case(np.array([[3.0, 1.0], [0.0, 0.5]]), [1.0, -1.0]),
        polytope_case(np.array([[-1.0, 0.0], [0.0, -1.0], [1.0, 1.0]]), np.array([0.0, 0.0, 1.0])),
    ]
)


@pytest.mark.parametrize("case", ALL_DOMAINS, ids=lambda c: c.name)
def test_bounding_ball_contains_the_domain(case):
    dom = _domain(case)
    assert dom.center.shape == (case.d,)
    # radius >= max distance from dpcvx's center to the set (vertices / boundary samples)
    assert dom.radius >= case.max_distance(dom.center) * (1 - 1e-12)
    # diameter >= the true diameter (exact for the catalogue, see tests/catalogue.py)
    assert dom.diameter >= case.diameter * (1 - 1e-15)
    assert dom.diameter <= 2 * dom.radius * (1 + 1e-12)


@pytest.mark.parametrize(
    "case",
    [c for c in ALL_DOMAINS if c.name.split("(")[0] in ("l2_ball", "box", "l1_ball", "simplex")],
    ids=lambda c: c.name,
)
def test_closed_form_diameter_and_center(case):
    """l2 ball radius r -> 2r; box -> ||u - l||; l1 ball radius r -> 2r; simplex -> sqrt(2) t."""
    dom = _domain(case)
    assert dom.diameter == pytest.approx(case.diameter, rel=1e-13)
    np.testing.assert_allclose(dom.center, case.center, rtol=0, atol=1e-14)
    assert dom.radius == pytest.approx(case.radius, rel=1e-13)


@pytest.mark.parametrize(
    "case",
    [c for c in ALL_DOMAINS if c.name.split("(")[0] in ("ellipsoid", "polytope")],
    ids=lambda c: c.name,
)
def test_general_domain_bounds_are_not_absurd(case):
    """The bounding box of a general set is found by solves: its ball should be within the
    half-diagonal of the set's own bounding box (plus the documented padding)."""
    dom = _domain(case)
    lo, hi = case.points.min(axis=0), case.points.max(axis=0)
    half_diag = np.linalg.norm(hi - lo) / 2
    assert dom.radius <= half_diag * 1.01 + 1e-5


def test_linf_ball_helper_is_a_box():
    w = cp.Variable(3)
    dom = Domain(w, dpcvx.domains.linf_ball(w, 0.5, center=[1.0, 0.0, -1.0]))
    assert dom.kind == "box"
    assert dom.diameter == pytest.approx(2 * 0.5 * np.sqrt(3), rel=1e-13)
    np.testing.assert_allclose(dom.center, [1.0, 0.0, -1.0])


@pytest.mark.parametrize("case", ALL_DOMAINS, ids=lambda c: c.name)
def test_make_feasible_gives_points_of_the_domain(case):
    """Any candidate, however far, is mapped to a point that satisfies every inequality exactly
    (numpy check without tolerance) and every equality to rounding."""
    dom = _domain(case)
    rng = np.random.default_rng(11)
    scale = case.max_distance(np.zeros(case.d))
    for p in itertools.chain(
        rng.normal(size=(10, case.d)) * 5 * scale, case.points[:20], [np.full(case.d, np.nan)]
    ):
        q = dom.make_feasible(p)
        assert case.contains(q, 0.0), (p, q)
        assert dom.contains(q)


@pytest.mark.parametrize("case", ALL_DOMAINS, ids=lambda c: c.name)
def test_contains_agrees_with_numpy(case):
    dom = _domain(case)
    inside = 0.999 * case.points + 0.001 * case.points.mean(axis=0)
    for p in inside[:50]:
        if case.equality:
            continue  # points of a lower-dimensional set are only feasible to rounding
        assert dom.contains(p)
    outside = case.points.mean(axis=0) + 1.5 * (case.points[:50] - case.points.mean(axis=0))
    for p in outside:
        if not case.contains(p, 1e-9):
            assert not dom.contains(p)


@pytest.mark.parametrize("case", ALL_DOMAINS, ids=lambda c: c.name)
def test_min_linear_quadratic_is_a_lower_bound(case):
    """``min_{w in W} <s, w> + (lam/2)||w - w0||^2`` from dpcvx is <= the value at every point
    of W and <= a high-accuracy CVXPY solve (it is exact for balls and boxes)."""
    dom = _domain(case)
    rng = np.random.default_rng(5)
    for lam in (0.0, 0.3):
        s = rng.normal(size=case.d)
        w0 = rng.normal(size=case.d)
        v = cp.Variable(case.d)
        prob = cp.Problem(cp.Minimize(s @ v + lam / 2 * cp.sum_squares(v - w0)), case.cvx(v))
        prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
        ref = prob.value
        hint = dom.make_feasible(v.value)
        bound = dom.min_linear_quadratic(s, lam, w0, hint=hint)
        assert bound <= ref + 1e-8 * (1 + abs(ref))
        vals = case.points @ s + lam / 2 * np.sum((case.points - w0) ** 2, axis=1)
        if not case.equality:
            assert bound <= vals.min() + 1e-12
        if dom.kind in ("l2_ball", "box", "l1_ball", "simplex"):
            assert bound == pytest.approx(ref, abs=1e-7)


def test_linf_norm_domain_solves(setup):
    w, x, y, X, Y = setup
    problem = dpcvx.Problem(cp.abs(x @ w - y), w, {x: X, y: Y}, [cp.norm(w - 0.1, "inf") <= 0.5])
    sol = problem.solve(regularization=0.1)
    assert np.max(np.abs(sol.w - 0.1)) <= 0.5


@pytest.mark.parametrize(
    "case", [simplex_case(2, 1.0), l1_ball_case(2, 1e-3, 0.0)], ids=lambda c: c.name
)
def test_make_feasible_of_a_huge_point(case):
    dom = _domain(case)
    q = dom.make_feasible(np.array([1e17, 1e17]))
    assert case.contains(q, 0.0)


# --- regressions for the independent review (findings F3, F4, F6)


def test_power_close_to_two_is_not_certified_as_a_square():
    w = cp.Variable(2)
    x = cp.Parameter(2)
    X = np.array([[1.0, 0.5], [-0.3, 2.0], [0.7, -1.2]])
    problem = dpcvx.Problem(
        cp.power(cp.abs(x @ w - 1.0), 2.00002), w, data={x: X}, domain=[cp.norm(w, 2) <= 1]
    )
    assert all(t.kind != "square" for t in problem.declaration.terms)


def test_certified_point_is_in_a_tiny_domain_with_an_equality():
    from dpcvx.certification.certificate import certify

    R, d = 1e-7, 3
    w = cp.Variable(d)
    x = cp.Parameter(d)
    problem = dpcvx.Problem(
        cp.abs(x @ w), w, data={x: np.eye(d)}, domain=[cp.norm(w, 2) <= R, cp.sum(w) == 0.1 * R]
    )
    assert problem.domain.contains(problem.domain.interior)
    try:
        cert = certify(problem.declaration, np.array([1e-6, -1e-6, 0.0]), lam=1.0, w0=np.zeros(d))
    except dpcvx.CertificationError:
        return  # refusing is fine; certifying a point outside the domain is not
    assert problem.domain.contains(cert.w)


@pytest.mark.parametrize(
    "make",
    [
        lambda w, x: cp.inv_pos(x @ w),
        lambda w, x: cp.kl_div(x @ w, 1.0),
        lambda w, x: -cp.log(x @ w),
    ],
)
def test_losses_with_an_implicit_domain_are_rejected(make):
    w = cp.Variable(2)
    x = cp.Parameter(2)
    with pytest.raises(dpcvx.ModelingError, match="implicit domain"):
        dpcvx.Problem(make(w, x), w, data={x: np.ones((3, 2))}, domain=[cp.norm(w, 2) <= 1])


def test_data_expression_outside_its_domain_is_rejected_at_declaration():
    w = cp.Variable(1)
    y = cp.Parameter()
    with pytest.raises(dpcvx.DataError, match="outside its"):
        dpcvx.Problem(
            cp.multiply(cp.inv_pos(y), cp.abs(w[0] - 0.3)),
            w,
            data={y: np.array([1.0, 1.0, -0.25])},
            domain=[cp.norm(w, 2) <= 1],
        )


@pytest.mark.parametrize("center", [np.zeros(4), np.array([3.0, -1.0, 0.5, 2.0])])
def test_make_feasible_rows_of_an_l2_ball_gives_points_of_the_ball(center):
    """Rows on the sphere (a point of the boundary repeated, as the extension certificate's
    copies ``y_i = w``), far outside and inside: every row lands in the ball by the domain's
    own check, close to its projection."""
    w = cp.Variable(4)
    dom = Domain(w, [cp.norm(w - center) <= 2.0])
    rng = np.random.default_rng(2)
    u = rng.normal(size=4)
    on_sphere = center + 2.0 * u / np.linalg.norm(u)
    P = np.vstack(
        [
            np.tile(on_sphere, (500, 1)),
            center + 50 * rng.normal(size=(20, 4)),
            center + 0.5 * rng.normal(size=(20, 4)),
        ]
    )
    Q = dom.make_feasible_rows(P)
    assert all(dom.contains(q) for q in Q)
    for p, q in zip(P, Q):
        np.testing.assert_allclose(q, dom.make_feasible(p), rtol=0, atol=1e-12)


def test_make_feasible_rows_on_row_chunks_is_the_same_as_all_at_once(monkeypatch):
    """Many rows are made feasible a chunk at a time (each row on its own): the same floats
    as one pass, the last partial chunk included."""
    from dpcvx.modeling import domains

    w = cp.Variable(3)
    dom = Domain(w, [cp.norm(w - np.array([1.0, 0.0, -2.0])) <= 1.5])
    rng = np.random.default_rng(4)
    P = np.array([1.0, 0.0, -2.0]) + rng.normal(size=(1003, 3)) * rng.uniform(0.1, 3.0, (1003, 1))
    whole = dom.make_feasible_rows(P)
    monkeypatch.setattr(domains, "_ROW_CHUNK_ENTRIES", 3 * 100)  # 100 rows a chunk: 11
    chunked = dom.make_feasible_rows(P)
    np.testing.assert_array_equal(chunked, whole)
    assert np.mean(np.linalg.norm(P - [1.0, 0.0, -2.0], axis=1) > 1.5) > 0.2  # rows moved
