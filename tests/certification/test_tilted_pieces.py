"""Tilted ERM and the max-loss of piecewise-linear losses on their smooth path
(``dpcvx.certification.tilted._pieces_tilted``): Newton's method on the losses smoothed by
log-sum-exp (``dpcvx.certification.smoothed.SmoothedPieces``), certified for the losses
themselves. Checked against finite differences and tight CVXPY + Clarabel solves of the
objectives written directly."""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.certification import tilted as tilted_module
from dpcvx.certification.arrowhead import piecewise_model
from dpcvx.certification.smoothed import SmoothedPieces

LAM = 0.1

LOSSES = {
    "hinge": lambda r, s: cp.pos(1 - cp.multiply(s, r)),
    "absolute": lambda r, s: cp.abs(r),
    "pinball": lambda r, s: cp.maximum(0.3 * r, -0.7 * r),
    "eps_insensitive": lambda r, s: cp.pos(cp.abs(r) - 0.1),
    "abs_plus_hinge": lambda r, s: cp.abs(r) + 0.5 * cp.pos(r),
}


def _case(name: str, dom: str, n: int = 30, d: int = 3, seed: int = 4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / math.sqrt(d)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    Y = np.clip(X @ np.array([0.6, -0.5, 0.4]) + 0.3 * rng.normal(size=n), -1, 1)
    S = np.where(Y > 0, 1.0, -1.0)
    return _problem(name, dom, X, Y, S), X, Y, S


def _problem(name, dom, X, Y, S):
    d = X.shape[1]
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    labels = S if name == "hinge" else Y  # the hinge's margin takes the signs
    r = x @ w if name == "hinge" else x @ w - y
    return dpcvx.Problem(LOSSES[name](r, y), w, {x: X, y: labels}, _domain(w, dom))


def _domain(v, dom: str) -> list:
    return [cp.norm(v) <= 1.0] if dom == "ball" else [cp.abs(v) <= 0.3]


def _objective(name, X, Y, S, dom, tau, w_hat=None):
    """``min F_tau`` (``w_hat`` None) or ``F_tau(w_hat)``; ``tau = inf``: the max-loss."""
    n, d = X.shape
    w = cp.Variable(d) if w_hat is None else w_hat
    if name == "hinge":
        losses = cp.hstack([LOSSES[name](X[i] @ w, S[i]) for i in range(n)])
    else:
        losses = cp.hstack([LOSSES[name](X[i] @ w - Y[i], S[i]) for i in range(n)])
    data = cp.max(losses) if math.isinf(tau) else cp.log_sum_exp(tau * losses) / tau
    shift = 0.0 if math.isinf(tau) else math.log(n) / tau
    if w_hat is not None:
        value = cp.Problem(cp.Minimize(data)).solve(solver="CLARABEL")
        return float(value) - shift + LAM / 2 * float(w_hat @ w_hat)
    prob = cp.Problem(cp.Minimize(data + LAM / 2 * cp.sum_squares(w)), _domain(w, dom))
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return float(prob.value) - shift


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_the_smoothed_pieces_bound_the_loss_and_match_finite_differences(name):
    """Each smoothed loss lies in ``[f, f + bias mu]``; its gradients and weighted Hessian
    match central differences."""
    problem, *_ = _case(name, "ball", n=9)
    model = piecewise_model(problem.declaration)
    assert model is not None and model.whole
    rng = np.random.default_rng(1)
    for mu in (1.0, 0.05):
        smoothed = SmoothedPieces(model, mu)
        w = rng.normal(size=3) * 0.4
        f = problem.declaration.loss_values(w)
        gap = smoothed.values(w) - f
        bias = sum(
            t.c * model.n * (t.b[0].size // model.n) * math.log(len(t.b)) for t in model.terms
        )
        assert np.all(gap >= -1e-12) and np.all(gap <= bias * mu + 1e-12)
        h, E = 1e-6, np.eye(3)
        G = smoothed.gradients(w)
        fd = np.stack(
            [
                (smoothed.values(w + h * E[j]) - smoothed.values(w - h * E[j])) / (2 * h)
                for j in range(3)
            ],
            axis=1,
        )
        np.testing.assert_allclose(G, fd, atol=1e-6 / mu)
        weights = rng.uniform(size=model.n)
        H = smoothed.hessian(w, weights)
        fdH = np.stack(
            [
                (
                    weights @ smoothed.gradients(w + h * E[j])
                    - weights @ smoothed.gradients(w - h * E[j])
                )
                / (2 * h)
                for j in range(3)
            ],
            axis=1,
        )
        np.testing.assert_allclose(H, fdH, atol=1e-5 / mu)


CASES = [
    (name, dom, tau) for name in LOSSES for dom in ("ball", "box") for tau in (0.5, 5.0, math.inf)
]


@pytest.mark.parametrize("name,dom,tau", CASES)
def test_the_pieces_path_certifies_against_a_reference_solve(name, dom, tau):
    """Certified to 1e-4 without the conic program (the smooth path returns it), and the true
    suboptimality (a reference solve of the objective written directly) is within the gap."""
    problem, X, Y, S = _case(name, dom)
    decl = problem.declaration
    cert = tilted_module._smooth_tilted(decl, tau, LAM, np.zeros(decl.d), 1e-4, None, 0)
    assert cert is not None and cert.gap <= 1e-4
    f_star = _objective(name, X, Y, S, dom, tau)
    assert _objective(name, X, Y, S, dom, tau, cert.w) - f_star <= cert.gap + 1e-8
    assert cert.lower <= f_star + 1e-8 and cert.upper >= f_star - 1e-8


def test_the_pieces_path_needs_the_softmax_multipliers(monkeypatch):
    """Control: with uniform weights on every element's pieces in place of their softmax
    weights, the certificates miss 1e-4 in every case (the smooth path then returns a loose
    certificate or none); the point alone does not make the gap."""

    def uniform(self, w):
        return self.model.multipliers(
            [
                t.c * np.full(np.shape(P), 1.0 / np.shape(P)[1])
                for t, P in zip(self.model.terms, self.weights(w))
            ]
        )

    monkeypatch.setattr(SmoothedPieces, "multipliers", uniform)
    missed = 0
    for name, dom, tau in CASES:
        problem, *_ = _case(name, dom)
        decl = problem.declaration
        cert = tilted_module._smooth_tilted(decl, tau, LAM, np.zeros(decl.d), 1e-4, None, 0)
        missed += cert is None or cert.gap > 1e-4
    assert missed == len(CASES)


@pytest.mark.parametrize("name", ["hinge", "absolute"])
@pytest.mark.parametrize("neighbour", ["dataset", "label*1e8", "row*1e8"])
@pytest.mark.parametrize("tilt", [1.0, math.inf])
def test_piecewise_tilted_releases_run_on_the_smooth_path(monkeypatch, name, neighbour, tilt):
    """Tilted and max-loss releases of piecewise-linear losses on a dataset and its
    neighbours run without the conic program (before, only it applied: 2.7 s for a hinge
    release at n = 1e4; above its size limit, none)."""

    def no_conic(*args, **kwargs):
        raise AssertionError("the conic program ran")

    monkeypatch.setattr(tilted_module, "_ladder", no_conic)
    problem, X, Y, S = _case(name, "ball", n=1500, seed=7)
    if neighbour != "dataset":
        X, Y, S = X.copy(), Y.copy(), S.copy()
        if neighbour == "label*1e8":
            Y[0] *= 1e8
            S[0] *= 1e8
        else:
            X[0] *= 1e8
        problem = _problem(name, "ball", X, Y, S)
    mech = dpcvx.TiltedOutputPerturbation(lipschitz=1.0, regularization=LAM, tilt=tilt)
    out = problem.solve_private(mech, epsilon=1.0, rng=np.random.default_rng(0))
    assert np.all(np.isfinite(out.w))


# ------------------------------------------------------------------ on the Lipschitz extension
C = 1.0


def _steep_case(name: str, dom: str, R: float, n: int = 24, seed: int = 2):
    """Rows of norm about 3: most examples steeper than C = 1."""
    rng = np.random.default_rng(seed)
    X = 3 * rng.normal(size=(n, 3)) / math.sqrt(3)
    Y = np.clip(X @ np.array([0.6, -0.5, 0.4]) / 3 + 0.3 * rng.normal(size=n), -1, 1)
    S = np.where(Y > 0, 1.0, -1.0)
    d = 3
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    labels = S if name == "hinge" else Y
    r = x @ w if name == "hinge" else x @ w - y
    problem = dpcvx.Problem(LOSSES[name](r, y), w, {x: X, y: labels}, _in(w, dom, R))
    return problem, X, Y, S


def _in(v, dom: str, R: float) -> list:
    return [cp.norm(v) <= R] if dom == "ball" else [cp.abs(v) <= R]


def _extension_objective(name, X, Y, S, dom, R, tau, w_hat=None):
    """``min F_{C,tau}`` (``w_hat`` None) or ``F_{C,tau}(w_hat)`` with ``f_C(w) = min_{y in
    W} f(y) + C ||w - y||`` (the copies as variables in W)."""
    n, d = X.shape
    w = cp.Variable(d) if w_hat is None else w_hat
    Yc = cp.Variable((n, d))
    losses = []
    for i in range(n):
        r = X[i] @ Yc[i] if name == "hinge" else X[i] @ Yc[i] - Y[i]
        losses.append(LOSSES[name](r, S[i]) + C * cp.norm(w - Yc[i]))
    if math.isinf(tau):
        obj = cp.max(cp.hstack(losses))
    else:
        obj = cp.log_sum_exp(tau * cp.hstack(losses)) / tau - math.log(n) / tau
    cons = [c for i in range(n) for c in _in(Yc[i], dom, R)]
    if w_hat is None:
        cons += _in(w, dom, R)
        obj = obj + LAM / 2 * cp.sum_squares(w)
    prob = cp.Problem(cp.Minimize(obj), cons)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return float(prob.value) + (0.0 if w_hat is None else LAM / 2 * float(w_hat @ w_hat))


EXTENSION_CASES = [
    (name, dom, R, tau)
    for name in ("hinge", "absolute", "pinball", "eps_insensitive")
    for dom, R in (("ball", 2.0), ("box", 2.0), ("ball", 0.3), ("box", 0.3))
    for tau in (0.5, 5.0, math.inf)
]


#: the cases whose copies leave W and whose rounds still stop short of 1e-4 (a copy at ``w``
#: on W's boundary, where the rounds' model of ``f_C`` is too flat: the conic program takes
#: over); their certificates still bound the truth
LOOSE = {("pinball", "ball", 0.3, 0.5), ("eps_insensitive", "box", 0.3, math.inf)}


@pytest.mark.parametrize("name,dom,R,tau", EXTENSION_CASES)
def test_the_pieces_path_certifies_the_extension_against_a_reference_solve(name, dom, R, tau):
    """On the extension with examples steeper than C (tilted ERM and the max-loss), certified
    to 1e-4: on the larger domains the relaxed extension's copies lie in W; on the smaller
    ones they leave it, and the rounds (each with those examples' ``f_C`` modelled at their
    exact copies in W) certify all but :data:`LOOSE`. Everywhere the true suboptimality
    (reference solves over the copies) is within the gap."""
    problem, X, Y, S = _steep_case(name, dom, R)
    decl = problem.declaration
    cert = tilted_module._smooth_tilted(decl, tau, LAM, np.zeros(3), 1e-4, C, 0)
    assert cert is not None and cert.solver_stats["extension_copies"] > 0
    if R > 1:
        assert cert.solver_stats["copies_outside"] == 0
    assert cert.gap <= 1e-4 or (name, dom, R, tau) in LOOSE
    f_star = _extension_objective(name, X, Y, S, dom, R, tau)
    truth = _extension_objective(name, X, Y, S, dom, R, tau, cert.w) - f_star
    assert truth <= cert.gap + 1e-8


def test_without_the_rounds_the_copies_leaving_w_miss():
    """Control: with the rounds withheld (the certificate at the smoothed relaxed extension's
    point, its copies in W), most small-domain cases of tilted ERM miss 1e-4 (12 of 16 when
    this was written; all 16 meet it with the rounds but for :data:`LOOSE`)."""
    small = [c for c in EXTENSION_CASES if c[2] < 1 and not math.isinf(c[3])]
    missed = 0
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tilted_module._PiecesRounds, "run", lambda self, *a, **k: None)
        for name, dom, R, tau in small:
            problem, *_ = _steep_case(name, dom, R)
            cert = tilted_module._smooth_tilted(
                problem.declaration, tau, LAM, np.zeros(3), 1e-4, C, 0
            )
            missed += cert is None or cert.gap > 1e-4
    assert missed >= 10


@pytest.mark.parametrize("accuracy", [1e-4, 1e-8])
def test_the_kinks_slopes_are_chosen_jointly_under_the_tilted_weights(monkeypatch, accuracy):
    """The hinge on the unit ball at tilt 0.5: the rounds settle on the optimum (the truth is
    below 2e-9), where an example's copy is ``w`` at its hinge's kink. With the smoothed
    pieces' split of its slope the certificate stays at 2e-4; with the slopes of the
    examples at kinks chosen jointly under the tilted weights (within a few temperatures of
    their kinks) it meets the target. Control: without them, it misses."""
    problem, X, Y, S = _steep_case("hinge", "ball", 1.0)
    decl = problem.declaration
    cert = tilted_module._smooth_tilted(decl, 0.5, LAM, np.zeros(3), accuracy, C, 0)
    assert cert.gap <= accuracy and cert.solver_stats["copies_outside"] > 0
    f_star = _extension_objective("hinge", X, Y, S, "ball", 1.0, 0.5)
    truth = _extension_objective("hinge", X, Y, S, "ball", 1.0, 0.5, cert.w) - f_star
    assert truth <= cert.gap + 1e-8
    monkeypatch.setattr(tilted_module._PiecesRounds, "_balanced", lambda self, *a: None)
    loose = tilted_module._smooth_tilted(decl, 0.5, LAM, np.zeros(3), accuracy, C, 0)
    assert loose.gap > accuracy


def test_the_kinks_duals_with_uniform_weights_are_plain_erms():
    """``_kink_duals`` with the weights ``1/n`` given explicitly chooses the slopes it
    chooses without them (plain ERM's rounds), to rounding."""
    from dpcvx.certification import solve as solve_module
    from dpcvx.certification.arrowhead import extension_pieces
    from dpcvx.certification.ball import BallRegion

    problem, *_ = _steep_case("hinge", "ball", 1.0)
    decl = problem.declaration
    cert = tilted_module._smooth_tilted(decl, 0.5, LAM, np.zeros(3), 1e-8, C, 0)
    relaxed = extension_pieces(piecewise_model(decl), C)
    region = BallRegion(np.zeros(3), 1.0)
    w_hat = cert.w
    smoothed = SmoothedPieces(relaxed.model, 1e-9)
    mus = [t.c * P for t, P in zip(relaxed.model.terms, smoothed.weights(w_hat))]
    fix = relaxed.copies_in(w_hat, mus, region, exact_own=True)
    assert fix is not None
    args = (decl, w_hat, fix, LAM, np.zeros(3), C, relaxed, region, None)
    plain = solve_module._kink_duals(*args, None, 1e-3)
    weighted = solve_module._kink_duals(*args, np.full(decl.n, 1.0 / decl.n), 1e-3)
    assert plain is not None and weighted is not None
    assert np.allclose(plain[0].slopes, weighted[0].slopes, rtol=1e-9, atol=1e-12, equal_nan=True)
    assert abs(plain[2] - weighted[2]) <= 1e-12


@pytest.mark.parametrize("name", ["hinge", "absolute"])
@pytest.mark.parametrize("dom", ["ball", "box"])
@pytest.mark.parametrize("neighbour", ["dataset", "label*1e8", "row*1e8"])
@pytest.mark.parametrize("tilt", [1.0, math.inf])
def test_releases_with_copies_leaving_w_run_on_the_smooth_path(
    monkeypatch, name, dom, neighbour, tilt
):
    """Heavy-tailed rows (t(4), most examples steeper than C = 1) on a ball or box of
    half-width 0.3, where the relaxed extension's copies leave W: tilted and max-loss
    releases on a dataset and its neighbours run without the conic program (before the
    rounds, the conic program took over: 13-22 s at n = 1e4, minutes at 1e5, and none above
    its size limit)."""

    def no_conic(*args, **kwargs):
        raise AssertionError("the conic program ran")

    monkeypatch.setattr(tilted_module, "_ladder", no_conic)
    rng = np.random.default_rng(3)
    n, d = 1500, 5
    X = 3 * rng.standard_t(4, size=(n, d)) / math.sqrt(2 * d)
    beta = rng.normal(size=d) / math.sqrt(d)
    Y = np.clip(X @ beta + 0.2 * rng.normal(size=n), -1, 1)
    S = np.where(X @ beta + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    if neighbour == "label*1e8":
        Y[0] *= 1e8
        S[0] *= 1e8
    elif neighbour == "row*1e8":
        X[0] *= 1e8
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    labels = S if name == "hinge" else Y
    r = x @ w if name == "hinge" else x @ w - y
    problem = dpcvx.Problem(LOSSES[name](r, y), w, {x: X, y: labels}, _in(w, dom, 0.3))
    mech = dpcvx.TiltedOutputPerturbation(lipschitz=C, regularization=LAM, tilt=tilt)
    out = problem.solve_private(mech, epsilon=1.0, rng=np.random.default_rng(0))
    assert np.all(np.isfinite(out.w))
