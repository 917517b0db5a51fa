"""The extension's bounds at a point found without a program are computed in groups: the
examples whose copy is the point itself at that one point, the few that moved at their own
copies, both over row chunks. Each example's bound must be the one the ungrouped formula gives
at its copy (every example at its own row of copies, all rows at once)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.certification import extension as ext
from dpcvx.certification._rows import MOVED_SHARE, row_chunks
from dpcvx.modeling.smooth import extension_model, smooth_model


def _case(loss: str, n: int, d: int, C: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_t(5, size=(n, d)) / np.sqrt(d)
    y_lab = 0.5 * X @ rng.normal(size=d) + 0.3 * rng.normal(size=n)
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    f = {"huber": cp.huber(x @ w - y, 1.0), "logistic": cp.logistic(-y * (x @ w))}
    problem = dpcvx.Problem(f[loss], w, {x: X, y: y_lab}, [cp.norm(w) <= 3.0])
    decl = problem.declaration
    relaxed = extension_model(smooth_model(decl), C)
    assert relaxed is not None
    point = decl.domain.make_feasible(0.3 * rng.normal(size=d) / np.sqrt(d))
    return decl, relaxed, point


def _ungrouped(decl, point, C, thetas, Y):
    """The bounds with every example at its own row of ``Y`` (all rows at once)."""
    return ext._bounds(decl, None, None, point, C, decl.n, thetas, Y, None)


def _check_same(got, want):
    for a, b in zip(got, want):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


# n large enough for several row chunks at this d (2^18 entries each)
CASES = [("logistic", 1.0), ("logistic", 2.0), ("huber", 0.5), ("huber", 50.0)]


@pytest.mark.parametrize(("loss", "C"), CASES)
def test_grouped_bounds_are_the_ungrouped_ones(loss, C):
    decl, relaxed, point = _case(loss, 6000, 100, C)
    thetas = relaxed.model.multipliers(point)
    Y = relaxed.copies(point)
    assert len(list(row_chunks(decl.n, decl.d))) > 1  # the chunked path runs
    got = ext.extension_bounds(decl, None, point, None, point, C, thetas=thetas, copies=Y)
    want = _ungrouped(decl, point, C, thetas, decl.domain.make_feasible_rows(Y))
    _check_same(got, want)
    # without copies, every example at the point
    got = ext.extension_bounds(decl, None, point, None, point, C, thetas=thetas)
    want = _ungrouped(decl, point, C, thetas, np.broadcast_to(point, Y.shape).copy())
    _check_same(got, want)


def test_the_groups_cover_few_and_most_moved():
    """The cases above reach no moved copy, a few, and most (where every example is bounded
    at its own copy)."""
    shares = []
    for loss, C in CASES:
        decl, relaxed, point = _case(loss, 6000, 100, C)
        Y = relaxed.copies(point)
        shares.append(float(np.mean(np.any(Y != point, axis=1))))
    assert 0.0 in shares
    assert any(0 < s <= MOVED_SHARE for s in shares)
    assert any(s > MOVED_SHARE for s in shares)


def test_a_wrong_grouping_is_caught():
    """Negative control: the moved examples' results put on the wrong rows differ from the
    ungrouped bounds (the comparison above can fail)."""
    decl, relaxed, point = _case("logistic", 6000, 100, 1.0)
    thetas = relaxed.model.multipliers(point)
    Y = relaxed.copies(point)
    moved = np.flatnonzero(np.any(Y != point, axis=1))
    assert moved.size > 1
    got = [
        np.array(a, copy=True)
        for a in ext.extension_bounds(decl, None, point, None, point, 1.0, thetas=thetas, copies=Y)
    ]
    got[0][moved] = got[0][np.roll(moved, 1)]
    want = _ungrouped(decl, point, 1.0, thetas, decl.domain.make_feasible_rows(Y))
    with pytest.raises(AssertionError):
        _check_same(got, want)


def _same_sums(got, rows) -> None:
    """The grouped sums ``got`` against the ungrouped per-example rows: each gap is a
    rounding-level number, so the sums agree to rounding, not relatively."""
    assert got is not None and rows is not None
    totals, G = rows
    np.testing.assert_allclose(got.total, float(np.sum(totals)), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.asarray(got.slope, float), G.sum(axis=0), rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(got.slope_abs, np.abs(G).sum(axis=0), rtol=1e-12)


@pytest.mark.parametrize(("loss", "C"), CASES)
def test_grouped_stable_sums_are_the_ungrouped_ones(loss, C):
    """The stable gap's sums: the grouped pass against every example at its own row of the
    copies, in one pass (the slopes' sums to their extended-precision rounding)."""
    from dpcvx.certification import stable
    from dpcvx.certification._rows import moved_rows

    decl, relaxed, point = _case(loss, 6000, 100, C)
    thetas = relaxed.model.multipliers(point)
    Y = decl.domain.make_feasible_rows(relaxed.copies(point))
    rad = 1e-6 * (1.0 + float(np.max(np.abs(Y))))
    got = stable.stable_extension_sums(decl, Y, None, thetas, point, C=C, radius=np.inf)
    _same_sums(got, stable._stable_rows(decl, Y, None, thetas, point, C, rad))
    # given duals, a tenth of the examples moved (the grouped pass then skips them): the
    # same sums, and the caller's duals untouched (a grouped pass once zeroed the moved
    # examples' rows of them in place, and the moved pass read those zeros)
    rng = np.random.default_rng(4)
    moved = rng.random(decl.n) < 0.1
    Y_some = np.where(moved[:, None], Y, point[None, :])
    g = rng.normal(size=Y.shape)
    g *= C * rng.random(size=(decl.n, 1)) / np.linalg.norm(g, axis=1, keepdims=True)
    kept = g.copy()
    assert moved_rows(Y_some, point) is not None
    got = stable.stable_extension_sums(decl, Y_some, g, thetas, point, C=C, radius=np.inf)
    assert np.array_equal(g, kept)
    _same_sums(got, stable._stable_rows(decl, Y_some, g, thetas, point, C, rad))
    # without copies: every example at the point
    got = stable.stable_extension_sums(decl, None, None, thetas, point, C=C, radius=1e-3)
    rows = stable._stable_rows(decl, np.broadcast_to(point, Y.shape), None, thetas, point, C, 1e-3)
    assert got is not None and rows is not None
    np.testing.assert_allclose(got.total, float(np.sum(rows[0])), rtol=1e-9, atol=1e-12)


def test_a_moved_row_that_overflows_at_the_point_raises_nothing():
    """Rows whose loss overflows at the point but not at their copy (features of 1e153, a
    squared loss): the grouped pass at the point computes them too (their rows are then
    replaced), without raising their floating-point errors, so with warnings raised it gives
    the ungrouped bounds and raises nothing."""
    import warnings

    from dpcvx.certification import stable

    n, d = 30000, 20
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    X[:5] = 1e153 / np.sqrt(d)
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    problem = dpcvx.Problem(
        cp.square(x @ w - y), w, {x: X, y: rng.normal(size=n)}, [cp.abs(w) <= 100]
    )
    decl = problem.declaration
    point = decl.domain.make_feasible(np.full(d, 90.0))
    relaxed = extension_model(smooth_model(decl), 1.0)
    thetas = relaxed.model.multipliers(point)
    Y = np.broadcast_to(point, (n, d)).copy()
    Y[:5] = relaxed.copies(point)[:5]  # only the heavy rows moved
    assert len(list(row_chunks(n, d))) > 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = ext.extension_bounds(decl, None, point, None, point, 1.0, thetas=thetas, copies=Y)
        sums = stable.stable_extension_sums(decl, Y, None, thetas, point, C=1.0, radius=np.inf)
    want = _ungrouped(decl, point, 1.0, thetas, decl.domain.make_feasible_rows(Y))
    _check_same(got, want)
    rad = 1e-6 * (1.0 + float(np.max(np.abs(Y))))
    rows = stable._stable_rows(decl, Y, None, thetas, point, 1.0, rad)
    assert sums is not None and rows is not None
    np.testing.assert_allclose(sums.total, float(np.sum(rows[0])), rtol=1e-9)


def _domains(d: int):
    w = cp.Variable(d)
    return {
        "ball": [cp.norm(w - 0.1, 2) <= 2.0],
        "box": [w >= -1.0, w <= 0.5],
        "l1": [cp.norm(w, 1) <= 1.5],
        "simplex": [w >= 0, cp.sum(w) == 1.0],
        "generic": [cp.norm(w, 2) <= 2.0, w[0] >= -0.5],
        "localized": [cp.norm(w, 2) <= 2.0],
    }, w


@pytest.mark.parametrize("kind", ["ball", "box", "l1", "simplex", "generic", "localized"])
def test_the_support_on_clipped_rows_only_is_the_whole_one(kind):
    """``g - s`` is nonzero only on the rows the C-ball clipped (``g = factor s``): the
    support function computed on those rows alone, the others given a zero row's value, is
    the one computed on every row, a NaN row included. Negative control: a clipped row left
    out of the list changes the result."""
    from dpcvx.certification._rows import clipped_rows, support_rows
    from dpcvx.modeling.domains import Domain, row_norms

    d, n = 6, 400
    spellings, w = _domains(d)
    dom = Domain(w, spellings[kind])
    if kind == "localized":
        from dpcvx.modeling.localized import LocalizedDomain

        dom = LocalizedDomain(dom, np.full(d, 0.2), 0.5)
    rng = np.random.default_rng(1)
    s = rng.normal(size=(n, d)) * rng.choice([0.1, 3.0], size=(n, 1))
    s[7] = np.nan
    factor = np.minimum(1.0, 1.0 / np.maximum(row_norms(s)[:, None], 1e-300))
    g = s * factor
    hints = np.broadcast_to(dom.make_feasible(np.zeros(d)), (n, d))
    live = clipped_rows(factor)
    assert live is not None and 7 in live and 0 < live.size < n
    want = dom.support(g - s, hints=hints)
    got = support_rows(dom, g, s, hints, live)
    assert np.isnan(got[7]) and np.isnan(want[7])
    keep = np.arange(n) != 7
    np.testing.assert_allclose(got[keep], want[keep], rtol=1e-13, atol=0)
    wrong = support_rows(dom, g, s, hints, live[live != live[-1]])
    assert not np.allclose(wrong[keep], want[keep], rtol=1e-13, atol=0)


@pytest.mark.parametrize(("loss", "C"), [("huber", 0.5), ("logistic", 0.5)])
def test_bounds_on_clipped_rows_only_are_those_on_every_row(monkeypatch, loss, C):
    """The value bounds and the stable sums with the support function (and, for the stable
    gap, the inner products with the copies) on the clipped rows only are those computed on
    every row, to rounding (the inner products sum in another order). The case clips part
    of the rows (a proper subset: the path under test runs)."""
    from dpcvx.certification import _rows, stable

    decl, relaxed, point = _case(loss, 3000, 8, C)
    thetas = relaxed.model.multipliers(point)
    Y = relaxed.copies(point)
    seen = []
    clipped = _rows.clipped_rows

    def spy(factor):
        out = clipped(factor)
        seen.append(None if out is None else out.size / np.size(factor))
        return out

    monkeypatch.setattr(ext, "clipped_rows", spy)
    monkeypatch.setattr(stable, "clipped_rows", spy)
    got = ext.extension_bounds(decl, None, point, None, point, C, thetas=thetas, copies=Y)
    got_s = stable.stable_extension_sums(decl, Y, None, thetas, point, C=C, radius=1e-3)
    assert any(share is not None and 0 < share < 1 for share in seen)
    monkeypatch.setattr(ext, "clipped_rows", lambda factor: None)
    monkeypatch.setattr(stable, "clipped_rows", lambda factor: None)
    want = ext.extension_bounds(decl, None, point, None, point, C, thetas=thetas, copies=Y)
    want_s = stable.stable_extension_sums(decl, Y, None, thetas, point, C=C, radius=1e-3)
    _check_same(got, want)
    assert got_s.total == pytest.approx(want_s.total, rel=1e-13)
    np.testing.assert_allclose(
        np.asarray(got_s.slope, float), np.asarray(want_s.slope, float), rtol=1e-13, atol=1e-15
    )
