"""Tilted ERM's smooth path on the Lipschitz extension with examples steeper than C
(``dpcvx.certification.tilted._Rounds``): Newton's method on the relaxed extension (copies
free over R^d), then rounds with the copies that leave W kept in it.

Every certificate is checked against tight CVXPY + Clarabel solves of the extension's tilted
objective written directly (the copies ``y_i`` as variables in W), and the per-row weights of
the extensions' models against the sum of separate calls."""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.certification import tilted as tilted_module
from dpcvx.certification.ball import BallRegion, Smooth1D
from dpcvx.certification.box import BoxRegion
from dpcvx.modeling.smooth import extension_model, smooth_model

LAM = 0.1
C = 1.0

LOSSES = {
    "square": lambda r: cp.square(r),
    "huber": lambda r: cp.huber(r, 0.5),
    "pos_power_2.5": lambda r: cp.power(cp.pos(r), 2.5),
    "squared_hinge": lambda r: cp.power(cp.maximum(r, 0), 2),
    "exp": lambda r: cp.exp(r),
}


def _case(name: str, dom: str, n: int = 24, d: int = 3, seed: int = 2):
    """Rows of norm up to 3 (most examples steeper than C = 1 on W), labels up to 2, a ball
    or box of half-width 0.2 (their relaxed copies leave it)."""
    rng = np.random.default_rng(seed)
    X = 3 * rng.normal(size=(n, d)) / math.sqrt(d)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True) / 3)
    Y = 2 * np.clip(X @ np.array([0.6, -0.5, 0.4])[:d] / 3 + 0.3 * rng.normal(size=n), -1, 1)
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    problem = dpcvx.Problem(LOSSES[name](x @ w - y), w, {x: X, y: Y}, _domain(w, dom))
    return problem, X, Y


def _domain(v, dom: str) -> list:
    return [cp.norm(v) <= 0.2] if dom == "ball" else [cp.abs(v) <= 0.2]


def _f_C_tau(name, X, Y, tau, dom, w_hat=None):
    """``min F_{C,tau}`` (``w_hat`` None) or ``F_{C,tau}(w_hat)``: ``f_C(w) = min_{y in W}
    f(y) + C ||w - y||`` (paper 000, eq. (5)); ``F_tau`` is increasing in each loss, so the
    copies minimize it jointly."""
    n, d = X.shape
    w = cp.Variable(d) if w_hat is None else w_hat
    Yc = cp.Variable((n, d))
    losses = [LOSSES[name](X[i] @ Yc[i] - Y[i]) + C * cp.norm(w - Yc[i]) for i in range(n)]
    obj = cp.log_sum_exp(tau * cp.hstack(losses)) / tau - math.log(n) / tau
    cons = [c for i in range(n) for c in _domain(Yc[i], dom)]
    if w_hat is None:
        cons += _domain(w, dom)
        obj = obj + LAM / 2 * cp.sum_squares(w)
    prob = cp.Problem(cp.Minimize(obj), cons)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return float(prob.value) + (0.0 if w_hat is None else LAM / 2 * float(w_hat @ w_hat))


CASES = [(name, dom, tau) for name in LOSSES for dom in ("ball", "box") for tau in (0.5, 5.0)]


def _smooth(problem, tau, accuracy):
    decl = problem.declaration
    return tilted_module._smooth_tilted(decl, tau, LAM, np.zeros(decl.d), accuracy, C, 0)


@pytest.mark.parametrize("name,dom,tau", CASES)
def test_the_rounds_certify_the_extension_against_a_reference_solve(name, dom, tau):
    """The smooth path certifies ``F_{C,tau}`` to 1e-6 where the relaxed copies leave W; the
    true suboptimality (reference solves over the copies) is within the gap, and the
    reference minimum within the bounds."""
    problem, X, Y = _case(name, dom)
    cert = _smooth(problem, tau, 1e-6)
    assert cert is not None and cert.solver_stats["null_examples"] == 0
    assert cert.gap <= 1e-6
    f_star = _f_C_tau(name, X, Y, tau, dom)
    assert _f_C_tau(name, X, Y, tau, dom, cert.w) - f_star <= cert.gap + 1e-9
    assert cert.lower <= f_star + 1e-9 and cert.upper >= f_star - 1e-9


def test_a_box_corner_needs_the_balanced_duals(monkeypatch):
    """Control: without the duals balanced under the tilted weights, the box cases with the
    smaller tilt (the point at a corner of the box, optimal to 1e-12) miss 1e-6: the copies'
    duals chosen one at a time leave the weighted mean pushing out of the box."""
    monkeypatch.setattr(tilted_module._Rounds, "_balanced", lambda self, *args: None)
    missed = 0
    for name in LOSSES:
        problem, _, _ = _case(name, "box")
        cert = _smooth(problem, 0.5, 1e-6)
        missed += cert is None or cert.gap > 1e-6
    assert missed >= 4


def test_the_rounds_are_what_reaches_the_target(monkeypatch):
    """Control: with one round (the relaxed extension's minimizer, certified with the copies
    that leave W replaced by exact ones in W), copies leave W in every case, the point is
    suboptimal for ``F_{C,tau}`` by more than 1e-6 in the balls' cases (in a box the relaxed
    minimizer was often the answer, to 1e-10), and its certificate still bounds that: the
    rounds, not the certificate, close the gap."""
    monkeypatch.setattr(tilted_module, "TILTED_ROUNDS", 1)
    loose = outside = 0
    for name, dom, tau in CASES:
        problem, X, Y = _case(name, dom)
        cert = _smooth(problem, tau, 1e-9)
        assert cert is not None
        if cert.solver_stats["copies_outside"] == 0:
            continue
        outside += 1
        truth = _f_C_tau(name, X, Y, tau, dom, cert.w) - _f_C_tau(name, X, Y, tau, dom)
        assert truth <= cert.gap + 1e-9
        loose += truth > 1e-6
    assert outside == len(CASES)
    assert loose >= len(CASES) // 2


@pytest.mark.parametrize("region_kind", ["ball", "box"])
def test_per_row_weights_of_the_extension_model_add_like_separate_calls(region_kind):
    """``region.extension`` with a count per row (a tilted mean's reciprocal weights) gives
    the model ``(Q, q)`` of the two halves called separately with their own scalar counts,
    and the copies, duals and slopes of one call with a scalar count."""
    problem, X, Y = _case("square", region_kind, n=40)
    decl = problem.declaration
    relaxed = extension_model(smooth_model(decl), C)
    (blk,) = relaxed.model.blocks
    norms = np.sqrt(relaxed.sq_norms)
    u = blk.A / norms[:, None]
    line = Smooth1D(blk.__class__(**{**_fields(blk), "knots": None}), blk.weight, norms, blk.b)
    region = (
        BallRegion(np.zeros(3), 0.2)
        if region_kind == "ball"
        else BoxRegion(np.full(3, -0.2), np.full(3, 0.2))
    )
    w = np.array([0.1, -0.2, 0.05])
    counts = np.where(np.arange(40) < 20, 7.0, 300.0)
    t, Yc, g, theta, (Q, q) = region.extension(line, u, w, C, counts)
    half = slice(0, 20), slice(20, 40)
    parts = [region.extension(line.take(s), u[s], w, C, float(counts[s][0])) for s in half]
    np.testing.assert_allclose(Q, parts[0][4][0] + parts[1][4][0], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(q, parts[0][4][1] + parts[1][4][1], rtol=1e-12, atol=1e-14)
    t1, Y1, g1, theta1, _ = region.extension(line, u, w, C, 40)
    for a, b in ((t, t1), (Yc, Y1), (g, g1), (theta, theta1)):
        np.testing.assert_array_equal(a, b)
    assert np.any(np.abs(Q) > 0)


def _fields(blk):
    import dataclasses

    return {f.name: getattr(blk, f.name) for f in dataclasses.fields(blk)}


def _user_case(monkeypatch, neighbour: str) -> tuple[np.ndarray, np.ndarray]:
    """Heavy-tailed rows (n = 1500, d = 6) and signs, with one label or row times 1e8 for a
    neighbour; the conic program forbidden (it raises if it runs)."""

    def no_conic(*args, **kwargs):
        raise AssertionError("the conic program ran")

    monkeypatch.setattr(tilted_module, "_ladder", no_conic)
    n, d = 1500, 6
    rng = np.random.default_rng(3)
    X = rng.standard_t(4, size=(n, d)) / math.sqrt(2 * d)
    X /= np.maximum(1, np.linalg.norm(X, axis=1))[:, None]
    S = np.where(X @ rng.normal(size=d) > 0, 1.0, -1.0)
    if neighbour == "label*1e8":
        S[0] *= 1e8
    elif neighbour == "row*1e8":
        X[0] *= 1e8
    return X, S


SPELLINGS = {
    "squared hinge": lambda x, w, y: cp.power(cp.maximum(1 - y * (x @ w), 0), 2),
    "huber": lambda x, w, y: cp.huber(1 - y * (x @ w)),
}


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
@pytest.mark.parametrize("neighbour", ["dataset", "label*1e8", "row*1e8"])
def test_tilted_releases_with_copies_run_on_the_smooth_path(monkeypatch, spelling, neighbour):
    """A user's case: heavy-tailed rows on a box, examples steeper than ``lipschitz``, and a
    neighbour with one label or row times 1e8. Each releases without the conic program
    (before, only it applied: 5-12 s at n = 1e4, minutes at n = 1e5)."""
    X, S = _user_case(monkeypatch, neighbour)
    d = X.shape[1]
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    problem = dpcvx.Problem(SPELLINGS[spelling](x, w, y), w, {x: X, y: S}, [cp.abs(w) <= 1])
    mech = dpcvx.TiltedOutputPerturbation(lipschitz=1.0, regularization=LAM, tilt=1.0)
    out = problem.solve_private(mech, epsilon=1.0, rng=np.random.default_rng(0))
    assert np.all(np.isfinite(out.w))


def _weighted_balance(seed: int) -> tuple[float, float, float | None]:
    """One random case at a corner of the box (:func:`test_balanced_duals_under_weights`):
    checks the duals' structure and returns the reference's largest slack, the push the
    weighted balance leaves and the push the unweighted one leaves under the weights."""
    from dpcvx.certification.box import balanced_duals

    rng = np.random.default_rng(seed)
    n, d = 30, 3
    lo, hi = -np.ones(d), np.ones(d)
    sigma = rng.choice([-1.0, 1.0], size=d)
    w = np.where(sigma > 0, hi, lo)  # a corner: every coordinate at a bound
    s = rng.normal(size=(n, d))
    s *= (1.2 + rng.uniform(size=n))[:, None] / np.linalg.norm(s, axis=1, keepdims=True)
    s[:, 0] = -sigma[0] * np.abs(s[:, 0])  # something to cancel on every row
    keep = np.einsum("nd,nd->n", s, s) - np.sum(np.where(sigma * s < 0, s, 0.0) ** 2, 1) < 0.9
    s = s[keep]
    n = s.shape[0]
    given = s / np.maximum(1.0, np.linalg.norm(s, axis=1, keepdims=True))
    pi = rng.uniform(size=n) ** 3
    pi[0] = 0.0
    pi /= pi.sum() * 1.25  # some weight elsewhere (other examples, null ones)
    fixed = 0.05 * sigma * rng.uniform(size=d)
    out = balanced_duals(s, given, fixed, w, lo, hi, C, n, None, pi)
    assert out is not None
    np.testing.assert_array_equal(out[0], given[0])  # weight zero: its given dual
    assert np.all(np.linalg.norm(out, axis=1) <= C * (1 + 1e-12))
    canc = sigma[None, :] * s < 0
    between = np.where(canc, sigma * out >= sigma * s - 1e-15, out == s)
    assert np.all(between[1:])
    # the reference: the largest common slack over the allocations
    G, t = cp.Variable((n, d)), cp.Variable()
    cons = [cp.norm(G, axis=1) <= C, t <= 1.0]
    for j in range(d):
        high = np.where(canc[:, j], 0.0, sigma[j] * s[:, j])
        cons += [sigma[j] * G[:, j] >= sigma[j] * s[:, j], sigma[j] * G[:, j] <= high]
        cons += [sigma[j] * (fixed[j] + pi @ G[:, j]) <= -t]
    cp.Problem(cp.Maximize(t), cons).solve(solver="CLARABEL")
    plain = balanced_duals(s, given, fixed, w, lo, hi, C, n)
    uniform = balanced_duals(s, given, fixed, w, lo, hi, C, n, None, np.full(n, 1.0 / n))
    if plain is None:
        assert uniform is None
    else:
        np.testing.assert_allclose(uniform, plain, rtol=1e-9, atol=1e-12)
    push = float(np.max(sigma * (fixed + pi @ out)))
    unweighted = None if plain is None else float(np.max(sigma * (fixed + pi @ plain)))
    return float(t.value), push, unweighted


def test_balanced_duals_under_weights():
    """``balanced_duals`` with per-row weights (a tilted mean) against CVXPY's largest slack
    ``t`` of ``sigma_j (fixed_j + sum_i pi_i g_ij) <= -t`` at a corner of the box, over
    duals ``g_i`` between ``s_i`` and zero on the cancellable entries, ``s_i`` elsewhere, and
    ``||g_i|| <= C`` (6 random cases): where the reference leaves room, the weighted mean
    lies in minus the normal cone; every dual fits in the C-ball; a row of weight zero keeps
    its given dual; uniform weights ``1/n`` give the unweighted balance. Control: the
    unweighted balance misses the weighted need in some case."""
    cases = [_weighted_balance(seed) for seed in range(6)]
    roomy = [push for slack, push, _ in cases if slack > 1e-6]
    assert len(roomy) >= 3
    assert all(push <= 1e-12 for push in roomy)
    assert any(u is not None and u > 1e-6 for _, _, u in cases)


# ------------------------------------------------------------------ the max-loss's smooth path
def _max_loss(name, X, Y, dom, C_ext, w_hat=None):
    """``min_W max_i f_i + (lam/2)||w||^2`` (``w_hat`` None) or its value at ``w_hat``, on
    the extension ``f_C`` (copies ``y_i`` as variables in W) when ``C_ext`` is given."""
    n, d = X.shape
    w = cp.Variable(d) if w_hat is None else w_hat
    if C_ext is None:
        losses = [LOSSES[name](X[i] @ w - Y[i]) for i in range(n)]
        cons = []
    else:
        Yc = cp.Variable((n, d))
        losses = [LOSSES[name](X[i] @ Yc[i] - Y[i]) + C_ext * cp.norm(w - Yc[i]) for i in range(n)]
        cons = [c for i in range(n) for c in _domain(Yc[i], dom)]
    obj = cp.max(cp.hstack(losses)) + LAM / 2 * (
        cp.sum_squares(w) if w_hat is None else float(w_hat @ w_hat)
    )
    if w_hat is None:
        cons += _domain(w, dom)
    prob = cp.Problem(cp.Minimize(obj), cons)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return float(prob.value)


MAX_CASES = [
    (name, dom, C_ext) for name in LOSSES for dom in ("ball", "box") for C_ext in (None, C)
]


@pytest.mark.parametrize("name,dom,C_ext", MAX_CASES)
def test_the_max_loss_path_certifies_against_a_reference_solve(name, dom, C_ext):
    """The max-loss by continuation over the tilt (``_MaxPath``), plain and on the extension
    with copies leaving W (the rounds at each tilt): certified to 1e-3 without the conic
    program, and the true suboptimality (reference solves of the max written directly) is
    within the gap."""
    problem, X, Y = _case(name, dom)
    decl = problem.declaration
    cert = tilted_module._smooth_tilted(decl, math.inf, LAM, np.zeros(decl.d), 1e-3, C_ext, 0)
    assert cert is not None and cert.gap <= 1e-3
    assert math.isinf(cert.solver_stats["tilt"])
    f_star = _max_loss(name, X, Y, dom, C_ext)
    assert _max_loss(name, X, Y, dom, C_ext, cert.w) - f_star <= cert.gap + 1e-8
    assert cert.lower <= f_star + 1e-8 and cert.upper >= f_star - 1e-8


def test_the_max_loss_path_needs_the_tilt_to_grow(monkeypatch):
    """Control: certified at the tilt 1 alone (the path's first step), the max-loss misses
    1e-3 in most cases: the tilted minimizer there is not the max-loss's."""
    monkeypatch.setattr(tilted_module, "TILT_STEP", 1e12)
    monkeypatch.setattr(tilted_module, "TILT_REACH", 1e-12)
    missed = 0
    for name, dom, C_ext in MAX_CASES:
        problem, _, _ = _case(name, dom)
        decl = problem.declaration
        cert = tilted_module._smooth_tilted(decl, math.inf, LAM, np.zeros(decl.d), 1e-3, C_ext, 0)
        missed += cert is None or cert.gap > 1e-3
    assert missed >= len(MAX_CASES) // 2


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
@pytest.mark.parametrize("neighbour", ["dataset", "label*1e8"])
def test_max_loss_releases_run_on_the_smooth_path(monkeypatch, spelling, neighbour):
    """The max-loss release of the user's case above, without the conic program (before:
    1.5-2 s at n = 1e4; 20 s for a logistic and 209 s for a squared loss at n = 1e5)."""
    X, S = _user_case(monkeypatch, neighbour)
    d = X.shape[1]
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    problem = dpcvx.Problem(SPELLINGS[spelling](x, w, y), w, {x: X, y: S}, [cp.norm(w) <= 1])
    mech = dpcvx.TiltedOutputPerturbation(lipschitz=1.0, regularization=LAM, tilt=math.inf)
    out = problem.solve_private(mech, epsilon=1.0, rng=np.random.default_rng(0))
    assert np.all(np.isfinite(out.w))
