"""The certificate's sums over examples taken in row chunks (``value_sums`` on many examples)
equal the sums over all examples at once, whatever guides the multipliers (the solver's
duals, the loss's own derivatives, none, mixed cuts), and a certified solve on chunks meets
the same target. Independent answer: the unchunked computation of the same sums."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from dpcvx.certification import certificate
from dpcvx.compilation.solvers import solve_program
from dpcvx.compilation.stamp import stamp
from dpcvx.compilation.template import compile_domain, compile_template
from dpcvx.modeling.smooth import smooth_model
from dpcvx.problem import Problem

N, D = 257, 4


def _problem(kind: str) -> Problem:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(N, D))
    Y = np.sign(X @ rng.normal(size=D) + 0.3 * rng.normal(size=N))
    R = X @ rng.normal(size=D) + 0.2 * rng.standard_t(3, size=N)
    w, x, y = cp.Variable(D), cp.Parameter(D), cp.Parameter()
    loss, labels = {
        "hinge": (cp.pos(1 - y * (x @ w)), Y),
        "logistic": (cp.logistic(-y * (x @ w)), Y),
        "absolute": (cp.abs(x @ w - y), R),
        "huber+affine": (cp.huber(x @ w - y, 1.0) + 0.1 * (x @ w), R),
        "pinball": (cp.maximum(0.3 * (y - x @ w), -0.7 * (y - x @ w)), R),
    }[kind]
    return Problem(loss, w, data={x: X, y: labels}, domain=[cp.norm(w) <= 2])


def _assert_same(a, b) -> None:
    assert a.n == b.n
    for name in ("value", "abs_value", "beta", "abs_beta", "scale"):
        assert getattr(a, name) == pytest.approx(getattr(b, name), rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(a.slope, b.slope, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", ["hinge", "logistic", "absolute", "huber+affine", "pinball"])
@pytest.mark.parametrize("guide", ["duals", "none"])
def test_chunked_sums_equal_the_whole(kind, guide, monkeypatch):
    problem = _problem(kind)
    decl = problem.declaration
    lam, w0 = 0.05, np.zeros(D)
    prog = z = None
    if guide == "duals":
        theta = compile_template(decl).theta(decl.derived_values(), decl.n)
        prog = stamp(compile_template(decl), compile_domain(decl), theta, d=D, lam=lam, w0=w0)
        z = solve_program(prog, "CLARABEL", tight=True).z
    w_hat = decl.domain.make_feasible(problem.solve(regularization=lam).w)
    whole, counts = certificate.value_sums(decl, w_hat, prog=prog, z=z)
    monkeypatch.setattr(certificate, "_CHUNK_ENTRIES", 7 * D)  # chunks of 7 rows: 37 of them
    chunked, chunk_counts = certificate.value_sums(decl, w_hat, prog=prog, z=z)
    _assert_same(chunked, whole)
    assert chunk_counts == counts


def test_chunked_sums_with_the_loss_derivatives_and_mixes(monkeypatch):
    problem = _problem("logistic")
    decl = problem.declaration
    w_hat = decl.domain.make_feasible(problem.solve(regularization=0.05).w)
    thetas = smooth_model(decl).multipliers(w_hat)
    whole, _ = certificate.value_sums(decl, w_hat, thetas=thetas)
    monkeypatch.setattr(certificate, "_CHUNK_ENTRIES", 5 * D)
    _assert_same(certificate.value_sums(decl, w_hat, thetas=thetas)[0], whole)


def test_a_certified_solve_on_chunks_meets_the_same_target(monkeypatch):
    problem = _problem("hinge")
    whole = problem.solve(regularization=0.05, accuracy=1e-9)
    monkeypatch.setattr(certificate, "_CHUNK_ENTRIES", 11 * D)
    chunked = problem.solve(regularization=0.05, accuracy=1e-9)
    assert chunked.gap <= 1e-9 and whole.gap <= 1e-9
    np.testing.assert_allclose(chunked.w, whole.w, atol=1e-12)
    assert chunked.lower == pytest.approx(whole.lower, abs=1e-10)


def test_rows_are_views_of_the_declaration():
    decl = _problem("hinge").declaration
    part = decl.rows(10, 20)
    assert part.n == 10
    for key, arr in part.data.items():
        assert np.shares_memory(arr, decl.data[key]) and not arr.flags.writeable
        np.testing.assert_array_equal(arr, decl.data[key][10:20])
    w = np.full(D, 0.1)
    np.testing.assert_array_equal(part.loss_values(w), decl.loss_values(w)[10:20])
    with pytest.raises(Exception, match="start < stop"):
        decl.rows(5, 5)


def test_an_affine_atom_without_a_jet_rule_certifies_on_chunks(monkeypatch):
    """``cumsum`` has no affine-jet rule (its term gets a tangent cut): reading the solver's
    duals for the chunks must not need one either."""
    rng = np.random.default_rng(5)
    k = 3
    Xm = rng.normal(size=(N, k, D))
    Rk = rng.normal(size=(N, k))
    w, xm, rk = cp.Variable(D), cp.Parameter((k, D)), cp.Parameter(k)
    problem = Problem(
        cp.sum(cp.abs(cp.cumsum(xm @ w - rk))), w, data={xm: Xm, rk: Rk}, domain=[cp.norm(w) <= 2]
    )
    whole = problem.solve(regularization=0.1)
    monkeypatch.setattr(certificate, "_CHUNK_ENTRIES", 13 * D)
    chunked = problem.solve(regularization=0.1)
    assert chunked.gap == pytest.approx(whole.gap, rel=1e-6, abs=1e-9)
    np.testing.assert_allclose(chunked.w, whole.w, atol=1e-12)


@pytest.mark.parametrize("kind", ["hinge", "logistic", "absolute", "huber+affine", "pinball"])
@pytest.mark.parametrize("guide", ["duals", "none"])
def test_stable_sums_on_chunks_equal_the_whole(kind, guide, monkeypatch):
    """The stable gap's sums (``stable_sums``, the tightest certificate's) over row chunks
    are the sums over all examples at once, with the solver's duals as multipliers (each
    chunk must get its own rows of them) or none; a chunk left out or counted twice moves
    the total by a whole chunk's share."""
    from dpcvx.certification import _rows, stable

    problem = _problem(kind)
    decl = problem.declaration
    lam, w0 = 0.05, np.zeros(D)
    w_hat = decl.domain.make_feasible(problem.solve(regularization=lam).w)
    if guide == "duals":
        theta = compile_template(decl).theta(decl.derived_values(), decl.n)
        prog = stamp(compile_template(decl), compile_domain(decl), theta, d=D, lam=lam, w0=w0)
        guide = certificate._term_duals(decl, prog, solve_program(prog, "CLARABEL", tight=True).z)
    else:
        guide = [None] * len(decl.terms)
    args = dict(radius=1e-3, domain=decl.domain)
    whole = stable.stable_sums(decl, w_hat, guide, **args)
    monkeypatch.setattr(_rows, "CHUNK_ENTRIES", 7 * D)  # chunks of 7 rows: 37 of them
    assert len(list(_rows.row_chunks(N, D))) == 37
    chunked = stable.stable_sums(decl, w_hat, guide, **args)
    assert whole is not None and chunked is not None and chunked.n == whole.n == N
    assert chunked.total == pytest.approx(whole.total, rel=1e-12, abs=1e-14)
    np.testing.assert_allclose(
        np.asarray(chunked.slope, float), np.asarray(whole.slope, float), rtol=1e-12, atol=1e-13
    )
    np.testing.assert_allclose(chunked.slope_abs, whole.slope_abs, rtol=1e-12)
    gaps = [
        stable.stable_from_sums(s, w_hat, lam=lam, w0=w0, domain=decl.domain, w_domain=decl.domain)
        for s in (whole, chunked)
    ]
    assert gaps[1] == pytest.approx(gaps[0], rel=1e-9, abs=1e-14)


@pytest.mark.parametrize("region", ["ball", "box"])
def test_the_copies_in_w_on_chunks_are_those_of_one_call(region, monkeypatch):
    """Every example's copy in W is its own one-dimensional problem: over row chunks
    (``in_chunks``) the positions, copies, duals and slopes are the same floats as in one
    call, and the chunks' models add up to the one call's."""
    from dpcvx.certification import _rows
    from dpcvx.certification.ball import BallRegion, Pieces1D, ball_extension, in_chunks
    from dpcvx.certification.box import BoxRegion, box_extension

    rng = np.random.default_rng(1)
    k, d = 1000, 7
    u = rng.normal(size=(k, d))
    u /= np.linalg.norm(u, axis=1)[:, None]
    sigma = np.stack([np.zeros(k), -rng.uniform(0.5, 3.0, k)], axis=1)  # hinge-like rows
    beta = np.stack([np.zeros(k), rng.normal(size=k)], axis=1)
    line = Pieces1D(sigma, beta)
    w = rng.normal(size=d)
    if region == "ball":
        w *= 0.9 / np.linalg.norm(w)
        W, solve, where = BallRegion(np.zeros(d), 1.0), ball_extension, (np.zeros(d), 1.0)
    else:
        w = np.clip(w, -0.5, 0.5)  # some coordinates at a bound
        lo, hi = np.full(d, -0.5), np.full(d, 0.5)
        W, solve, where = BoxRegion(lo, hi), box_extension, (lo, hi)
    one = solve(line, u, w, *where, 1.0, 5000)
    monkeypatch.setattr(_rows, "CHUNK_ENTRIES", 150 * d)  # 150 rows a chunk, the last 100
    assert len(list(_rows.row_chunks(k, d))) == 7
    for chunked in (
        in_chunks(solve, line, u, w, where, 1.0, 5000),
        W.extension(line, u, w, 1.0, 5000),
    ):
        for a, b in zip(one[:4], chunked[:4]):
            np.testing.assert_array_equal(a, b)
        for a, b in zip(one[4], chunked[4]):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
        assert np.abs(one[4][0]).max() > 1e-4  # a model with something in it
    # which copies leave W, over the same chunks
    Y = w + 2.0 * rng.normal(size=(k, d)) * rng.uniform(0, 1, (k, 1))
    if region == "ball":
        want = np.linalg.norm(Y, axis=1) > 1.0
    else:
        want = np.any(np.abs(Y) > 0.5, axis=1)
    assert 0 < want.sum() < k
    np.testing.assert_array_equal(W.outside(Y), want)


@pytest.mark.parametrize("kind", ["hinge", "logistic"])
@pytest.mark.parametrize("region", ["ball", "box"])
def test_an_extension_solve_on_chunks_certifies_the_same_point(kind, region, monkeypatch):
    """End to end, an extension whose copies leave a small domain (rounds with copies in W,
    their pieces' weights, the copies made feasible, the certificate's sums) on chunks of a
    few rows certifies on the same path as in one pass, and the two certificates bracket
    the same optimum. The rows are the same floats, but the chunks' models add in another
    order, and the rounds may take another step (box and hinge: 65 steps against 66, gaps
    6.7e-10 and 8.3e-10). The hinge's copies are ``Pieces1D`` rows, the logistic loss's
    ``Smooth1D`` rows."""
    from dpcvx.certification import _rows
    from dpcvx.modeling import domains

    rng = np.random.default_rng(8)
    n, d = 600, 4
    X = 2.0 * rng.standard_t(4, size=(n, d))  # most examples steeper than C = 1
    Y = np.sign(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n))
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    loss = cp.pos(1 - y * (x @ w)) if kind == "hinge" else cp.logistic(-y * (x @ w))
    dom = [cp.norm(w) <= 0.3] if region == "ball" else [cp.abs(w) <= 0.15]
    problem = Problem(loss, w, data={x: X, y: Y}, domain=dom)
    whole = problem.lipschitz_extension(1.0).solve(regularization=0.05)
    monkeypatch.setattr(_rows, "CHUNK_ENTRIES", 7 * d)
    monkeypatch.setattr(domains, "_ROW_CHUNK_ENTRIES", 7 * d)
    chunked = problem.lipschitz_extension(1.0).solve(regularization=0.05)
    assert whole.solver_stats.get("ball_rounds", 0) >= 1  # copies left W: the rounds ran
    assert chunked.solver_stats.get("solver") == whole.solver_stats.get("solver")
    assert max(whole.gap, chunked.gap) < 1e-8
    # F* lies in each certificate's [lower, upper]; the minimizer within sqrt(2 gap / lam)
    # of each point (the objective is lam-strongly convex)
    assert chunked.lower <= whole.upper and whole.lower <= chunked.upper
    reach = np.sqrt(2 * whole.gap / 0.05) + np.sqrt(2 * chunked.gap / 0.05)
    assert np.linalg.norm(chunked.w - whole.w) <= reach


def test_the_rows_that_differ_are_found_on_chunks(monkeypatch):
    """``differing_rows`` (the rows where given duals differ from the slopes, over row
    chunks) against a direct comparison: a NaN differs, a row equal to the last rounding
    does not, and past ``LIVE_SHARE`` it gives None; the support over those rows only equals
    the support over every row of ``g - s``, bit for bit, in a ball and a generic domain."""
    from dpcvx.certification import _rows
    from dpcvx.modeling.domains import Domain

    monkeypatch.setattr(_rows, "CHUNK_ENTRIES", 64)  # chunks of 16 rows at d = 4
    rng = np.random.default_rng(7)
    s = rng.normal(size=(N, D))
    g = s.copy()
    changed = rng.choice(N, size=40, replace=False)
    g[changed[:30]] *= 0.5
    g[changed[30:35], 1] = np.nan
    g[changed[35:], 2] = np.nextafter(g[changed[35:], 2], np.inf)
    live = _rows.differing_rows(g, s)
    assert np.array_equal(live, np.sort(changed))
    assert _rows.differing_rows(-s, s) is None
    w = cp.Variable(D)
    for domain in (
        Domain(w, [cp.norm(w) <= 2.0]),
        Domain(w, [cp.norm(w) <= 2.0, w[0] + w[1] <= 1.5]),
    ):
        finite = np.setdiff1d(np.arange(N), changed[30:35])
        gf, sf = g[finite], s[finite]
        hints = np.zeros_like(gf)
        rows = _rows.differing_rows(gf, sf)
        assert rows is not None and rows.size == 35
        whole = domain.support(gf - sf, hints=hints)
        assert np.array_equal(_rows.support_rows(domain, gf, sf, hints, rows), whole)
