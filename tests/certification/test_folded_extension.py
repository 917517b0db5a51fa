"""The folded Lipschitz extension: a penalty written into the loss (terms that read no data)
is kept exact, once, and only the terms that read data are extended
(``dpcvx.certification.solve.folded_terms``):

    F_C(w) = (1/n) sum_i g_C(w; z_i) + P(w) + (lam/2) ||w - w0||^2.

Checked against an independent CVXPY program of that objective (a copy ``y_i`` in W for every
example, solved tightly by Clarabel), with the extension of the whole loss (the penalty inside
each example's extension) as the negative control the certificates must not match; against
the plain solve where every example's data terms are C-Lipschitz; and for the property the
privacy of every extension mechanism rests on, the minimizers of neighbouring datasets within
``2 C / (lam n)`` of each other.
"""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.certification.solve import certified_solve, folded_terms, penalty_slope
from dpcvx.errors import LipschitzClaimWarning

N, D, R, LAM, C = 30, 4, 1.0, 0.1, 1.0
TOL = 1e-8  # the reference programs' own accuracy (Clarabel at 1e-11, objectives of order 1)

CASES = {
    "logistic+l1": (
        lambda v, xi, yi: cp.logistic(-yi * (xi @ v)),
        lambda v: 0.05 * cp.norm1(v),
        "sign",
    ),
    "hinge+group": (
        lambda v, xi, yi: cp.pos(1 - yi * (xi @ v)),
        lambda v: 0.1 * (cp.norm(v[:2]) + cp.norm(v[2:])),
        "sign",
    ),
    "absolute+ridge": (
        lambda v, xi, yi: cp.abs(xi @ v - yi),
        lambda v: 0.2 * cp.sum_squares(v - 0.3),
        "real",
    ),
    "huber+sup": (
        lambda v, xi, yi: cp.huber(xi @ v - yi, 1),
        lambda v: 0.3 * cp.norm_inf(v),
        "real",
    ),
    # an affine part of the penalty is folded with it (it reads no data either)
    "hinge+affine+max": (
        lambda v, xi, yi: cp.pos(1 - yi * (xi @ v)),
        lambda v: 0.1 * cp.sum(v) + 0.2 * cp.maximum(v[0], v[1] - 0.5, 0),
        "sign",
    ),
    # a generic penalty: no stable sums of its own, so the value bounds certify alone
    "logistic+pnorm": (
        lambda v, xi, yi: cp.logistic(-yi * (xi @ v)),
        lambda v: 0.1 * cp.pnorm(v - 0.3, 3),
        "sign",
    ),
}


def _data(seed: int, labels: str, steep: float = 3.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D)) / np.sqrt(D)
    X[:4] *= steep  # a few examples steeper than C, the others mostly not
    Y = np.sign(rng.normal(size=N)) if labels == "sign" else rng.normal(size=N)
    return X, Y


def _problem(name: str, X: np.ndarray, Y: np.ndarray) -> dpcvx.Problem:
    data_term, penalty, _ = CASES[name]
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    return dpcvx.Problem(data_term(w, x, y) + penalty(w), w, {x: X, y: Y}, [cp.norm(w) <= R])


def _reference(name: str, X: np.ndarray, Y: np.ndarray, folded: bool = True):
    """``(F*, w*)`` of the extension's program written out in CVXPY: the folded objective, or
    (``folded=False``) the extension of the whole loss, the penalty at each copy."""
    data_term, penalty, _ = CASES[name]
    n = X.shape[0]
    w = cp.Variable(D)
    Yc = cp.Variable((n, D))
    t = cp.Variable(n)
    cons = [cp.norm(w) <= R, cp.norm(Yc, axis=1) <= R, cp.norm(w[None, :] - Yc, axis=1) <= t]
    per = [data_term(Yc[i], X[i], Y[i]) for i in range(n)]
    if folded:
        objective = sum(per) / n + penalty(w)
    else:
        objective = sum(p + penalty(Yc[i]) for i, p in enumerate(per)) / n
    objective = objective + C * cp.sum(t) / n + LAM / 2 * cp.sum_squares(w)
    return _tight(cp.Problem(cp.Minimize(objective), cons)), np.asarray(w.value, float)


def _tight(prob: cp.Problem) -> float:
    """The optimal value by Clarabel at tight tolerances (it may call them inaccurate: the
    tests compare to within ``TOL``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    return float(prob.value)


@pytest.mark.parametrize("name", sorted(CASES))
def test_certificate_brackets_the_folded_optimum(name):
    X, Y = _data(1, CASES[name][2])
    problem = _problem(name, X, Y)
    assert folded_terms(problem.declaration, C)
    cert = problem.lipschitz_extension(C).solve(regularization=LAM, accuracy=1e-9)
    F_star, w_star = _reference(name, X, Y)
    assert cert.lower <= F_star + TOL
    assert F_star <= cert.upper + TOL
    assert cert.gap <= 1e-9
    # strong convexity: the certified point is within its distance bound of the minimizer
    assert np.linalg.norm(cert.w - w_star) <= cert.distance_bound + 1e-4
    # negative control: the extension of the whole loss is another program, which these
    # bounds do not bracket (the penalty inside every copy)
    F_whole, _ = _reference(name, X, Y, folded=False)
    assert abs(F_whole - F_star) > 1e3 * TOL
    assert not (cert.lower - TOL <= F_whole <= cert.upper + TOL)


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_per_example_match_the_solve(name):
    X, Y = _data(2, CASES[name][2])
    extension = _problem(name, X, Y).lipschitz_extension(C)
    cert = extension.solve(regularization=LAM, accuracy=1e-9)
    values = extension.evaluate(cert.w)
    reg = LAM / 2 * float(cert.w @ cert.w)
    mean_upper = float(np.mean(values.upper)) + reg
    mean_lower = float(np.mean(values.lower)) + reg
    # the same objective at the same point: the per-example bounds bracket the solve's value
    assert mean_lower <= cert.upper + 1e-10
    assert cert.upper - cert.gap - 1e-10 <= mean_upper
    assert np.all(values.B >= 0) and float(np.max(values.B)) <= 1e-9
    # each example's slope is its data terms' (at most C) plus the penalty's
    bound = C + penalty_slope(extension.problem.declaration, C)
    assert np.all(np.linalg.norm(values.subgradients, axis=1) <= bound * (1 + 1e-12))


@pytest.mark.parametrize("name", sorted(CASES))
def test_light_data_terms_solve_as_plain_erm(name):
    """Rows of norm at most one: the data terms of the hinge, logistic and absolute losses are
    1-Lipschitz, so nothing is extended and the folded program is plain ERM (the penalty's
    own slope, which the extension of the whole loss counted, makes every example steeper
    than 1 there)."""
    if name == "huber+sup":
        pytest.skip("the Huber loss's slope 2|r| ||x|| exceeds one")
    X, Y = _data(3, CASES[name][2], steep=1.0)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    problem = _problem(name, X, Y)
    ext = problem.lipschitz_extension(C).solve(regularization=LAM, accuracy=1e-10)
    plain = problem.solve(regularization=LAM, accuracy=1e-10)
    assert ext.solver_stats["extension_copies"] == 0
    assert np.linalg.norm(ext.w - plain.w) <= ext.distance_bound + plain.distance_bound
    assert abs(ext.upper - plain.upper) <= 2e-10


def test_neighbours_minimizers_within_the_sensitivity():
    """The privacy of every extension mechanism rests on ``||w*(D) - w*(D')|| <= 2C/(lam n)``
    for neighbours: here one example replaced by a steep one, or with a huge label, each
    solved to a certified point within its distance bound of the minimizer."""
    rng = np.random.default_rng(7)
    for name in sorted(CASES):
        X, Y = _data(4, CASES[name][2])
        base = _problem(name, X, Y).lipschitz_extension(C).solve(regularization=LAM, accuracy=1e-10)
        for replace in ("steep", "label"):
            X2, Y2 = X.copy(), Y.copy()
            i = int(rng.integers(N))
            if replace == "steep":
                X2[i] = rng.normal(size=D) * 50
            else:
                Y2[i] = 1e6 if CASES[name][2] == "real" else -Y2[i]
            other = (
                _problem(name, X2, Y2)
                .lipschitz_extension(C)
                .solve(regularization=LAM, accuracy=1e-10)
            )
            slack = base.distance_bound + other.distance_bound
            assert np.linalg.norm(base.w - other.w) <= 2 * C / (LAM * N) + slack


def test_claim_counts_the_data_terms_only():
    """Output perturbation's claim on unit rows with a 1-norm penalty in the loss: the data
    term is 1-Lipschitz, so no example is extended and the curator is not warned (the
    extension of the whole loss counted the penalty's slope and warned for most of them)."""
    X, Y = _data(5, "sign", steep=1.0)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    problem = _problem("logistic+l1", X, Y)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = problem.solve_private(
            dpcvx.OutputPerturbation(lipschitz=1.0, regularization=LAM), epsilon=1.0, rng=0
        )
    assert result.w.shape == (D,)
    assert not [w for w in seen if issubclass(w.category, LipschitzClaimWarning)]
    X[0] *= 3.0  # one steep example: extended, and the curator told
    with pytest.warns(LipschitzClaimWarning, match="1 of 30"):
        _problem("logistic+l1", X, Y).solve_private(
            dpcvx.OutputPerturbation(lipschitz=1.0, regularization=LAM), epsilon=1.0, rng=0
        )


def _private_solve(problem: dpcvx.Problem, lam: float = LAM):
    return certified_solve(
        problem.declaration,
        lambda: problem._compiled(C)[0],
        problem._domain(),
        lam=lam,
        w0=np.zeros(D),
        accuracy=1e-10,
        private=True,
        extension=C,
        plain_template=lambda: problem._compiled()[0],
    )


def test_universe_cut_keeps_the_penalty():
    """A private solve gives an example outside the public slope universe the zero loss: its
    data terms only, the penalty stays with weight one (a zeroed penalty would move F by a
    slope no sensitivity covers)."""
    X, Y = _data(6, "sign")
    X[5] *= 1e6  # slope far beyond the universe (1e4 C)
    cert = _private_solve(_problem("logistic+l1", X, Y))
    keep = np.arange(N) != 5
    # the reference: the kept examples' data terms averaged over all n, the penalty once
    data_term, penalty, _ = CASES["logistic+l1"]
    w = cp.Variable(D)
    Yc = cp.Variable((N, D))
    t = cp.Variable(N)
    cons = [cp.norm(w) <= R, cp.norm(Yc, axis=1) <= R, cp.norm(w[None, :] - Yc, axis=1) <= t]
    kept = [i for i in range(N) if keep[i]]
    objective = (
        sum(data_term(Yc[i], X[i], Y[i]) + C * t[i] for i in kept) / N
        + penalty(w)
        + LAM / 2 * cp.sum_squares(w)
    )
    value = _tight(cp.Problem(cp.Minimize(objective), cons))
    assert cert.lower <= value + TOL <= cert.upper + 2 * TOL


def test_a_huge_label_beside_the_penalty_releases():
    """The stable gap takes the penalty once too: a label of 1e8 in the absolute loss beside
    a 1-norm penalty, under an enforced claim, certifies and releases."""
    X, Y = _data(8, "real")
    Y[3] = 1e8
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    problem = dpcvx.Problem(
        cp.abs(x @ w - y) + 0.05 * cp.norm1(w), w, {x: X, y: Y}, [cp.norm(w) <= R]
    )
    with pytest.warns(LipschitzClaimWarning):  # the rows steeper than the claim
        result = problem.solve_private(
            dpcvx.OutputPerturbation(lipschitz=1.0, regularization=LAM), epsilon=1.0, rng=0
        )
    assert np.all(np.isfinite(result.w))


def test_no_penalty_no_fold():
    """A loss whose terms all read data (or whose only curved term reads none) is extended
    whole, as before."""
    X, Y = _data(9, "sign")
    w = cp.Variable(D)
    x = cp.Parameter(D)
    y = cp.Parameter()
    plain = dpcvx.Problem(cp.logistic(-y * (x @ w)), w, {x: X, y: Y}, [cp.norm(w) <= R])
    assert not folded_terms(plain.declaration, C)
    alone = dpcvx.Problem(cp.abs(w[0]) - y * w[0], w, {y: Y}, [cp.norm(w) <= R])
    assert not folded_terms(alone.declaration, C)
    assert not folded_terms(_problem("logistic+l1", X, Y).declaration, None)


@pytest.mark.parametrize(
    "penalty",
    [
        lambda v: 0.05 * cp.norm1(v),
        lambda v: 1.5 * cp.sum(v) + 0.05 * cp.norm1(v) + 3.0,  # affine and constant parts
        lambda v: 0.75 * cp.pnorm(v - 3, 3) + 0.05 * cp.norm1(v),  # a generic part
    ],
    ids=["norm1", "affine+constant", "generic"],
)
def test_universe_cut_weighs_every_part_of_the_penalty_one(penalty):
    """A review's case: neighbours whose only difference is one example, a row of zeros on one
    and a row of 1e6 (outside the public slope universe) on the other. Both give that example
    a constant data term, so their private minimizers coincide; a penalty part weighted k/n
    instead of one (its affine, constant or generic part) moved them 0.098 apart, over
    ``2C/(lam n) = 0.067``."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D)) / np.sqrt(D)
    Y = np.sign(rng.normal(size=N))
    X[5] = 0.0
    X2 = X.copy()
    X2[5, 0] = 1e6
    sols = []
    for rows in (X, X2):
        w, x, y = cp.Variable(D), cp.Parameter(D), cp.Parameter()
        loss = cp.logistic(-y * (x @ w)) + penalty(w)
        problem = dpcvx.Problem(loss, w, {x: rows, y: Y}, [cp.norm(w) <= 10.0])
        sols.append(_private_solve(problem, lam=1.0))
    slack = sols[0].distance_bound + sols[1].distance_bound
    assert np.linalg.norm(sols[0].w - sols[1].w) <= slack + 1e-9


def test_reference_first_order_path_needs_the_penalty_slope():
    """``structured_solve``'s step count needs a bound on every example's slope: the folded
    penalty's is added (a norm's here), and a generic penalty without one is refused before
    any data is read, with the interior-point path named."""
    from dpcvx.oracle import structured_solve

    X, Y = _data(10, "sign")
    w, x, y = cp.Variable(D), cp.Parameter(D), cp.Parameter()
    ok = dpcvx.Problem(
        cp.pos(1 - y * (x @ w)) + 0.5 * cp.norm1(w), w, {x: X[:8], y: Y[:8]}, [cp.norm(w) <= R]
    )
    assert 0.5 * np.sqrt(D) <= penalty_slope(ok.declaration, C) <= 0.5 * np.sqrt(D) * (1 + 1e-8)
    generic = dpcvx.Problem(
        cp.pos(1 - y * (x @ w)) + 0.1 * cp.pnorm(w - 0.3, 3),
        w,
        {x: X[:8], y: Y[:8]},
        [cp.norm(w) <= R],
    )
    with pytest.raises(dpcvx.InvalidParameterError, match="LipschitzExtension.solve"):
        structured_solve(generic.lipschitz_extension(C), 0.1, None, 0.5)


#: the proximal Newton rungs that write the folded extension, by penalty
PROXIMAL = {
    "l1": (lambda v: 0.05 * cp.norm1(v), "proximal Newton + arrowhead IPM"),
    "group": (
        lambda v: 0.1 * (cp.norm(v[:2]) + cp.norm(v[2:])),
        "proximal Newton + penalty program",
    ),
}


@pytest.mark.parametrize("penalty", sorted(PROXIMAL))
@pytest.mark.parametrize(
    "steep, domain",
    [(3.0, "ball 1"), (10.0, "ball 1"), (10.0, "ball 0.3"), (100.0, "ball 0.5"), (30.0, "box 0.4")],
)
def test_proximal_newton_rungs_write_the_folded_extension(penalty, steep, domain, solve_paths):
    """The logistic loss plus a 1-norm or a group-lasso penalty with examples steeper than C:
    proximal Newton on the logistic term's relaxed extension (slopes clipped at C) with the
    penalty exact, each steep example at its copy, put in W exactly where it leaves W (in a
    small ball or a box, where the relaxed copies over ``R^d`` miss and the rounds take
    over); against the reference on that domain."""
    X, Y = _data(11, "sign", steep=steep)
    write, path = PROXIMAL[penalty]
    kind, size = domain.split()
    bound = float(size)

    def inside(v):
        return cp.norm(v) <= bound if kind == "ball" else cp.abs(v) <= bound

    w, x, y = cp.Variable(D), cp.Parameter(D), cp.Parameter()
    problem = dpcvx.Problem(cp.logistic(-y * (x @ w)) + write(w), w, {x: X, y: Y}, [inside(w)])
    cert = problem.lipschitz_extension(C).solve(regularization=LAM, accuracy=1e-9)
    assert solve_paths == [path]
    assert cert.gap <= 1e-9
    # the reference on this domain
    n = X.shape[0]
    v, copies, t = cp.Variable(D), cp.Variable((n, D)), cp.Variable(n)
    each = [cp.norm(copies, axis=1) <= bound] if kind == "ball" else [cp.abs(copies) <= bound]
    cons = [inside(v), *each, cp.norm(v[None, :] - copies, axis=1) <= t]
    margins = cp.multiply(Y, cp.sum(cp.multiply(X, copies), axis=1))
    objective = cp.sum(cp.logistic(-margins) + C * t) / n + write(v) + LAM / 2 * cp.sum_squares(v)
    F_star = _tight(cp.Problem(cp.Minimize(objective), cons))
    assert cert.lower <= F_star + TOL and F_star <= cert.upper + TOL
