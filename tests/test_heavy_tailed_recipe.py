"""dpcvx's default heavy-tailed release (issue 13, item 2): output perturbation on rows clipped
at ``heavy_tailed_clipping``'s ``C = max(G_2, G_k (n epsilon/(T d))^(1/k))`` with paper 002's
population regularization (Prop 4.3), what the estimators run when given public moment
bounds and no clipping norm.

Independent answers: the rule by hand; the estimator's plan against the rule and
``choose_regularization`` (public numbers only: two datasets give the same plan, no bound is
taken from the data); utility on seeded heavy-tailed data against the usual practice, output
perturbation on rows clipped at ``G_2`` with ``lam = (G_2/D) sqrt(d/(n epsilon))``.
"""

from __future__ import annotations

import math
import warnings

import cvxpy as cp
import numpy as np
import pytest

import dpcvx
from dpcvx.calculators import HEAVY_TAILED_SCALE, heavy_tailed_clipping
from dpcvx.errors import InvalidParameterError
from dpcvx.mechanisms.output_perturbation import choose_regularization


def test_the_rule_by_hand():
    # n eps / (T d) = 240000 / (3000 * 5) = 16: growth C = G_k * 16^(1/4) = 2 G_k
    out = heavy_tailed_clipping(n=240_000, d=5, epsilon=1.0, k=4, moment=3.0, second_moment=2.0)
    assert out.growth_C == pytest.approx(6.0)
    assert out.C == pytest.approx(6.0)
    assert out.paper_C == pytest.approx(3.0 * (240_000 / 5) ** 0.25)
    assert out.scale == HEAVY_TAILED_SCALE == 3000.0
    # small n epsilon / d: the floor G_2
    small = heavy_tailed_clipping(n=1000, d=5, epsilon=1.0, k=4, moment=3.0, second_moment=2.0)
    assert small.C == 2.0 and small.growth_C < 2.0
    # the default second moment is G_k; a larger G_2 than G_k is refused
    assert heavy_tailed_clipping(n=10, d=1, epsilon=1.0, k=2, moment=1.0).second_moment_C == 1.0
    with pytest.raises(InvalidParameterError, match="Lyapunov"):
        heavy_tailed_clipping(n=10, d=1, epsilon=1.0, k=4, moment=1.0, second_moment=2.0)
    # monotone in n and epsilon, never below G_2
    cs = [
        heavy_tailed_clipping(n=n, d=5, epsilon=e, k=4, moment=3.0, second_moment=2.0).C
        for n in (1000, 10_000, 100_000, 1_000_000)
        for e in (0.5, 5.0)
    ]
    assert min(cs) >= 2.0 and cs[::2] == sorted(cs[::2])


def _heavy(n, d=5, nu=5.0, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_t(nu, size=(n, d))
    w_true = np.full(d, 0.5 / math.sqrt(d))
    Y = X @ w_true + 0.5 * rng.standard_t(nu, size=n)
    return X, Y, w_true


def _moments(d, nu=5.0):
    ex2, ex4 = nu / (nu - 2), 3 * nu**2 / ((nu - 2) * (nu - 4))
    return math.sqrt(d * ex2), (d * ex4 + d * (d - 1) * ex2**2) ** 0.25


def test_the_estimator_plans_the_recipe_from_public_numbers_only():
    d = 5
    G2, G4 = _moments(d)
    plans = []
    for seed in (0, 1):
        X, Y, _ = _heavy(4000, seed=seed)
        X[0] *= 1e6  # an extreme row changes nothing in the plan
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no bound may be taken from the data
            reg = dpcvx.PrivateQuantileRegressor(
                0.5,
                epsilon=2.0,
                fit_intercept=False,
                domain_radius=1.0,
                feature_moment=G4,
                feature_second_moment=G2,
                random_state=seed,
            ).fit(X, Y)
        assert reg.data_dependent_bounds_ == ()
        plans.append((reg.bounds_["feature_norm_bound"], reg.bounds_["regularization"]))
    assert plans[0] == plans[1]
    C = heavy_tailed_clipping(n=4000, d=d, epsilon=2.0, k=4, moment=G4, second_moment=G2).C
    assert plans[0][0] == C == reg.bounds_["heavy_tailed_clipping"]
    L = reg.bounds_["lipschitz"]
    assert L >= 0.5 * C  # pinball(0.5) is |r|/2: 0.5 ||x||-Lipschitz
    lam = choose_regularization(L, 1.0, 4000, d, 2.0, task="sco")[0]
    assert plans[0][1] == pytest.approx(lam, rel=1e-12)


@pytest.mark.statistical
def test_the_recipe_beats_output_perturbation_at_the_second_moment():
    """Median excess population risk of the absolute loss over 5 seeded releases at
    ``n = 4000, d = 5, epsilon = 1``: the recipe against the usual practice (clip at G_2,
    ``lam = (G_2/D) sqrt(d/(n epsilon))``). Measured 0.003-0.013 against 0.03-0.1 in the
    benchmark's grid; the test asks only for the recipe to be lower. Seeded, so
    deterministic; with fresh seeds the medians of 5 cross with probability below 1e-3
    (the per-release distributions are an order of magnitude apart)."""
    n, d, eps = 4000, 5, 1.0
    G2, G4 = _moments(d)
    Xt, Yt, w_true = _heavy(200_000, seed=99)
    f_star = float(np.mean(np.abs(Xt @ w_true - Yt)))

    def excess(w):
        return float(np.mean(np.abs(Xt @ w - Yt))) - f_star

    recipe, usual = [], []
    for seed in range(5):
        X, Y, _ = _heavy(n, seed=seed)
        reg = dpcvx.PrivateQuantileRegressor(
            0.5,
            epsilon=eps,
            fit_intercept=False,
            domain_radius=1.0,
            feature_moment=G4,
            feature_second_moment=G2,
            random_state=seed,
        ).fit(X, Y)
        recipe.append(excess(reg.coef_))
        norms = np.linalg.norm(X, axis=1, keepdims=True)
        Xc = X * np.minimum(1.0, G2 / norms)
        w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
        problem = dpcvx.Problem(cp.abs(x @ w - y), w, {x: Xc, y: Y}, [cp.norm(w, 2) <= 1])
        lam = G2 / 2.0 * math.sqrt(d / (n * eps))
        out = problem.solve_private(
            dpcvx.OutputPerturbation(lipschitz=G2, regularization=lam), epsilon=eps, rng=seed
        )
        usual.append(excess(out.w))
    assert np.median(recipe) < np.median(usual)
