"""Batched evaluation, affine jets and lifting (dpcvx.modeling._expressions) against CVXPY.

The reference for every example ``i`` is CVXPY's own ``.value`` of the expression after setting
each parameter to example ``i``'s data and the variable to a point: an independent evaluation,
one example at a time.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcvx.modeling._expressions import Unsupported, affine_jet, evaluate, lift, subgradient_jet

D, N, K = 3, 5, 2


def _symbols():
    w = cp.Variable(D, name="w")
    p = {
        "x": cp.Parameter(D, name="x"),
        "y": cp.Parameter(name="y"),
        "A": cp.Parameter((K, D), name="A"),
        "M": cp.Parameter((K, 3), name="M"),
        "s": cp.Parameter(nonneg=True, name="s"),
    }
    return w, p


def _data(p, rng, n=N):
    return {
        p["x"]: rng.normal(size=(n, D)),
        p["y"]: rng.normal(size=n),
        p["A"]: rng.normal(size=(n, K, D)),
        p["M"]: rng.normal(size=(n, K, 3)),
        p["s"]: rng.uniform(0.5, 2.0, size=n),
    }


def _col(v):
    return cp.reshape(v, (v.size, 1), order="F")


# name -> (builder, affine_jet supported?)
EXPRESSIONS = {
    "index": (lambda w, p: p["x"] @ w + w[1] - 2 * p["x"][0], True),
    "slice": (lambda w, p: cp.sum(w[1:] - p["x"][:2]), True),
    "negative-index": (lambda w, p: w[-1] * 3 + p["x"][-2], True),
    "hstack": (lambda w, p: cp.hstack([p["x"] @ w, -(p["x"] @ w), p["y"]]), True),
    "hstack-vectors": (lambda w, p: cp.hstack([w, p["x"], w[:1]]), True),
    "vstack": (lambda w, p: cp.vstack([w, p["x"]]), True),
    "vstack-scalars": (lambda w, p: cp.vstack([p["x"] @ w, p["y"]]), True),
    "hstack-columns": (lambda w, p: cp.hstack([_col(w), _col(p["x"])]), True),
    "reshape-C": (lambda w, p: cp.reshape(cp.hstack([w, p["x"]]), (2, 3), order="C"), True),
    "reshape-F": (lambda w, p: cp.reshape(cp.hstack([w, p["x"]]), (2, 3), order="F"), True),
    "reshape-C-3x2": (lambda w, p: cp.reshape(cp.hstack([w, p["x"]]), (3, 2), order="C"), True),
    "reshape-F-back": (
        lambda w, p: cp.reshape(
            cp.reshape(cp.hstack([w, p["x"]]), (3, 2), order="F"), (6,), order="C"
        ),
        True,
    ),
    "matrix-param": (lambda w, p: p["A"] @ w - p["x"][:K], True),
    "matrix-param-index": (lambda w, p: (p["A"] @ w)[1] + p["M"][0, 2] * w[2], True),
    "promote": (lambda w, p: w + p["y"], True),
    "multiply-promote": (lambda w, p: cp.multiply(p["y"], w) + 1, True),
    "elementwise-multiply": (lambda w, p: cp.multiply(p["x"], w) - p["x"], True),
    "division": (lambda w, p: (p["x"] @ w) / 3 + w / 2, True),
    "division-by-data": (lambda w, p: w / (p["y"] ** 2 + 1), True),
    "sum": (lambda w, p: cp.sum(p["A"] @ w) + cp.sum(w), True),
    "neg": (lambda w, p: -(p["A"] @ w), True),
    "scalar-times-affine": (lambda w, p: p["y"] * (p["x"] @ w + 1), True),
    "param-matrix-times-stack": (lambda w, p: p["M"] @ cp.hstack([w[0], w[1], p["y"]]), True),
    "constant-matrix": (lambda w, p: np.arange(6.0).reshape(2, 3) @ w + p["x"][:2], True),
    "variable-left-matmul": (lambda w, p: w @ p["x"] - 2 * (w[1:] @ p["x"][:2]), True),
    # a matrix of the variable times data: the multinomial scores ``cp.reshape(w, (K, d)) @ x``
    "reshaped-variable-times-data": (
        lambda w, p: cp.reshape(cp.hstack([w, 2 * w]), (2, 3), order="C") @ p["x"] - 1,
        True,
    ),
    "reshaped-variable-times-data-matrix": (
        lambda w, p: cp.reshape(cp.hstack([w, w[::-1]]), (3, 2), order="F") @ p["M"][:, :2].T,
        True,
    ),
    "data-times-reshaped-variable": (
        lambda w, p: p["x"] @ cp.reshape(cp.hstack([w, w - 1]), (3, 2), order="F"),
        True,
    ),
    "data-matrix-times-reshaped-variable": (
        lambda w, p: p["M"] @ cp.reshape(cp.hstack([w, -w]), (3, 2), order="C"),
        True,
    ),
    "reversed-slice-with-stop": (lambda w, p: w[2:0:-1] - p["x"][-1:-3:-1], True),
    "sum-axis": (
        lambda w, p: cp.sum(cp.reshape(cp.hstack([w, p["x"]]), (2, 3), order="F"), axis=0),
        True,
    ),
    "cumsum": (lambda w, p: cp.cumsum(w), False),
    "transpose-matmul": (lambda w, p: _col(w).T @ p["x"], True),
    "data-times-transposed-reshape": (
        lambda w, p: p["x"][:2] @ cp.reshape(cp.hstack([w, w + 1]), (3, 2), order="C").T,
        True,
    ),
    # non-affine: evaluate only
    "square-plus-abs": (lambda w, p: cp.square(p["x"] @ w - p["y"]) + cp.abs(w[0]), None),
    "log-sum-exp": (lambda w, p: cp.log_sum_exp(cp.hstack([p["x"] @ w, -(p["x"] @ w)])), None),
    "norm2-matrix": (lambda w, p: cp.norm(p["A"] @ w - p["x"][:K], 2), None),
    "norm1": (lambda w, p: cp.norm(w - p["x"], 1), None),
    "norm-inf": (lambda w, p: cp.norm(w - p["x"], "inf"), None),
    "max": (lambda w, p: cp.max(p["A"] @ w), None),
    "quad-over-lin": (lambda w, p: cp.quad_over_lin(w - p["x"], 2.0), None),
    "pnorm3": (lambda w, p: cp.pnorm(w - p["x"], 3), None),
    "squared-hinge": (lambda w, p: cp.square(cp.pos(1 - p["y"] * (p["x"] @ w))), None),
    "huber-sum": (lambda w, p: cp.sum(cp.huber(p["A"] @ w - p["x"][:K], 0.5)), None),
    "logistic": (lambda w, p: cp.logistic(-p["y"] * (p["x"] @ w)), None),
    "entr-fallback": (lambda w, p: -cp.entr(cp.abs(w) + p["s"]), None),
    "scaled-by-nonneg-data": (lambda w, p: p["s"] * cp.abs(p["x"] @ w - 1), None),
}


def _per_example_values(expr, w, data, wv, n):
    """CVXPY's value of ``expr`` for each example (the independent reference)."""
    out = []
    for i in range(n):
        for param, arr in data.items():
            param.value = arr[i]
        w.value = wv
        out.append(np.asarray(expr.value, float).reshape(expr.shape))
    return np.stack(out)


def _leaves(data, w=None, wv=None):
    leaves = {p.id: arr for p, arr in data.items()}
    if w is not None:
        leaves[w.id] = np.asarray(wv, float).reshape(1, -1)
    return leaves


def _used(expr, data):
    ids = {p.id for p in expr.parameters()}
    return {p: v for p, v in data.items() if p.id in ids}


@pytest.mark.parametrize("name", list(EXPRESSIONS))
def test_evaluate_matches_cvxpy(name):
    build, _ = EXPRESSIONS[name]
    w, p = _symbols()
    expr = build(w, p)
    for seed in range(3):
        rng = np.random.default_rng(seed)
        data = _used(expr, _data(p, rng))
        wv = rng.normal(size=D)
        got = evaluate(expr, _leaves(data, w, wv), N)
        ref = _per_example_values(expr, w, data, wv, N)
        assert got.shape == (N,) + expr.shape
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", [k for k, v in EXPRESSIONS.items() if v[1] is not None])
def test_affine_jet_matches_cvxpy(name):
    """``offset_i + jac_i @ w`` equals the expression at several points ``w`` (so the Jacobian
    is right, not just the value at one point); unsupported atoms raise ``Unsupported``."""
    build, supported = EXPRESSIONS[name]
    w, p = _symbols()
    expr = build(w, p)
    assert expr.is_affine()
    rng = np.random.default_rng(1)
    data = _used(expr, _data(p, rng))
    if not supported:
        with pytest.raises(Unsupported):
            affine_jet(expr, w, _leaves(data), N)
        return
    offset, jac = affine_jet(expr, w, _leaves(data), N)
    assert offset.shape == (N,) + expr.shape
    assert jac.shape == (N,) + expr.shape + (D,)
    for _ in range(3):
        wv = rng.normal(size=D)
        ref = _per_example_values(expr, w, data, wv, N)
        np.testing.assert_allclose(offset + jac @ wv, ref, rtol=1e-12, atol=1e-12)


LIFTABLE = {
    "issue-hinge": lambda w, p: cp.pos(1 - p["y"] * (p["x"] @ w)),
    "label-right": lambda w, p: cp.logistic(-(p["x"] @ w) * p["y"]),
    "negated-label": lambda w, p: cp.logistic(-p["y"] * (p["x"] @ w)),
    "label-times-sum": lambda w, p: cp.abs(p["y"] * (p["x"] @ w + w[0] - 1)),
    "label-times-index": lambda w, p: cp.square(p["y"] * w[1] - 1),
    "label-times-division": lambda w, p: cp.abs(p["y"] * ((p["x"] @ w) / 2)),
    "data-subtree": lambda w, p: cp.abs((p["x"] * p["y"] + 1) @ w - p["y"] ** 2),
    "matrix-data": lambda w, p: cp.norm((p["A"] * p["y"]) @ w - p["x"][:K], 2),
    "already-dpp": lambda w, p: cp.huber(p["x"] @ w - p["y"], 1.0),
    "data-only-term": lambda w, p: cp.abs(p["x"] @ w) + cp.exp(p["y"]),
}


@pytest.mark.parametrize("name", list(LIFTABLE))
def test_lift_is_equal_and_dpp(name):
    """The lifted loss equals the original at every example (derived parameters set to their
    batched values) and is DPP, which CVXPY checks, not dpcvx."""
    w, p = _symbols()
    expr = LIFTABLE[name](w, p)
    rng = np.random.default_rng(2)
    data = _used(expr, _data(p, rng))
    lifted, derived = lift(expr, frozenset(q.id for q in data))
    assert lifted.is_dcp(dpp=True)
    assert not any(d.expression.variables() for d in derived)
    # every parameter of the lifted loss is a derived one
    assert {q.id for q in lifted.parameters()} <= {d.parameter.id for d in derived}
    leaves = _leaves(data)
    values = {
        d.parameter.id: np.broadcast_to(evaluate(d.expression, leaves, N), (N,) + d.parameter.shape)
        for d in derived
    }
    for _ in range(2):
        wv = rng.normal(size=D)
        ref = _per_example_values(expr, w, data, wv, N)
        got = []
        for i in range(N):
            for d in derived:
                d.parameter.value = values[d.parameter.id][i]
            w.value = wv
            got.append(lifted.value)
        np.testing.assert_allclose(np.asarray(got).reshape(ref.shape), ref, rtol=1e-12, atol=1e-12)


def test_lift_reuses_a_parameter_used_twice():
    w, p = _symbols()
    expr = cp.abs(p["x"] @ w - p["y"]) + cp.square(p["x"] @ w)
    lifted, derived = lift(expr, frozenset({p["x"].id, p["y"].id}))
    ids = [d.parameter.id for d in derived]
    assert len(ids) == len(set(ids))
    assert lifted.is_dcp(dpp=True)


def test_lift_leaves_constants_alone():
    w, _ = _symbols()
    expr = cp.abs(np.ones(D) @ w - 1)
    lifted, derived = lift(expr, frozenset())
    assert derived == ()
    w.value = np.arange(D, dtype=float)
    assert lifted.value == pytest.approx(expr.value)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    rows=st.integers(1, 4),
    cols=st.integers(1, 4),
    order=st.sampled_from(["C", "F"]),
    order2=st.sampled_from(["C", "F"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_reshape_orders_random_shapes(rows, cols, order, order2, seed):
    """Reshape in C and F order, twice, of a stack mixing the variable and data."""
    size = rows * cols
    w = cp.Variable(size, name="w")
    x = cp.Parameter(size, name="x")
    rng = np.random.default_rng(seed)
    data = {x: rng.normal(size=(N, size))}
    stacked = cp.hstack([w, x])  # (2 size,)
    expr = cp.reshape(
        cp.reshape(stacked, (2 * rows, cols), order=order), (cols, 2 * rows), order=order2
    )
    wv = rng.normal(size=size)
    ref = _per_example_values(expr, w, data, wv, N)
    got = evaluate(expr, _leaves(data, w, wv), N)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    offset, jac = affine_jet(expr, w, _leaves(data), N)
    np.testing.assert_allclose(offset + jac @ wv, ref, rtol=1e-12, atol=1e-12)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(
    k=st.integers(1, 4),
    d=st.integers(1, 4),
    n=st.integers(1, 6),
    seed=st.integers(0, 2**32 - 1),
)
def test_matrix_parameter_jets_random_shapes(k, d, n, seed):
    w = cp.Variable(d, name="w")
    A = cp.Parameter((k, d), name="A")
    b = cp.Parameter(k, name="b")
    rng = np.random.default_rng(seed)
    data = {A: rng.normal(size=(n, k, d)), b: rng.normal(size=(n, k))}
    expr = cp.vstack([A @ w - b, 2 * b - A @ w])
    offset, jac = affine_jet(expr, w, _leaves(data), n)
    wv = rng.normal(size=d)
    ref = _per_example_values(expr, w, data, wv, n)
    np.testing.assert_allclose(offset + jac @ wv, ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(evaluate(expr, _leaves(data, w, wv), n), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("key", [slice(None, None, -1), slice(1, None, -1)])
def test_reversed_slices_through_index_zero(key):
    w, p = _symbols()
    expr = w[key] - p["x"][key]
    rng = np.random.default_rng(3)
    data = _used(expr, _data(p, rng))
    wv = rng.normal(size=D)
    ref = _per_example_values(expr, w, data, wv, N)
    np.testing.assert_allclose(evaluate(expr, _leaves(data, w, wv), N), ref)
    offset, jac = affine_jet(expr, w, _leaves(data), N)
    np.testing.assert_allclose(offset + jac @ wv, ref)


def test_evaluate_broadcasts_shared_leaves():
    """A leaf given once (batch axis 1) is shared by every example."""
    w, p = _symbols()
    expr = p["x"] @ w
    rng = np.random.default_rng(4)
    X = rng.normal(size=(N, D))
    wv = rng.normal(size=D)
    got = evaluate(expr, {p["x"].id: X, w.id: wv.reshape(1, D)}, N)
    np.testing.assert_allclose(got, X @ wv)


def test_a_transpose_of_a_nonaffine_expression_keeps_its_gradient():
    """The transpose's jet rule covers affine matrices only; a transpose of a non-affine
    expression (of one axis, or with ``axes`` given) still takes the per-atom gradient (a
    review: listing transposes among the linear atoms had made these raise ``Unsupported``)."""
    rng = np.random.default_rng(0)
    w = cp.Variable(6)
    s = cp.Parameter(2, nonneg=True)
    W = cp.reshape(w, (2, 3), order="C")
    data = {s.id: rng.uniform(size=(N, 2))}
    for expr in (
        cp.sum(cp.transpose(cp.square(w))),
        cp.sum(cp.transpose(cp.square(W), axes=(1, 0)) @ s),
    ):
        at = rng.normal(size=6)
        value, grad = subgradient_jet(expr, w, data, N, at)
        h = 1e-6
        for i in range(6):
            e = np.eye(6)[i]
            up = evaluate(expr, {**data, w.id: (at + h * e)[None]}, N)
            down = evaluate(expr, {**data, w.id: (at - h * e)[None]}, N)
            np.testing.assert_allclose(grad[:, i], (up - down) / (2 * h), rtol=1e-6, atol=1e-6)
