"""A user-defined DCP loss: asymmetric Huber regression, certified by dpcvx, next to plain CVXPY.

The loss is written with ordinary CVXPY atoms on one example's residual ``r = <x, w> - y``:

    f(w; x, y) = 0.5 huber(r, M) + c pos(r)

a Huber loss (quadratic near 0, linear beyond ``M``) plus an extra price ``c`` per unit of
over-prediction. dpcvx needs nothing else: the same expression, with ``x`` and ``y`` as
``cp.Parameter`` objects, is compiled once for one example and stamped for all of them. Its
certificate is exact because the loss is a sum of catalogue atoms on affine arguments: the Huber
term gets a Fenchel-Young minorant from its clipped split dual, the ``pos`` term a convex
combination of its two affine pieces (``solver_stats["term_kinds"]`` says which was used). Other
convex terms get tangent cuts, valid but slower (``examples/robust_classification.py``).

The script solves the same regularized ERM on scikit-learn's diabetes data twice:

- ``dpcvx.Problem.solve``: a point of the domain with a certified bracket
  ``lower <= F* <= upper`` and a bound on its distance to the minimizer;
- a plain CVXPY model of the whole dataset solved by Clarabel: a status (``optimal``) and the
  solver's own estimate of the optimum, which is no proof. The script checks the CVXPY point
  against dpcvx's bracket.

Then a private fit with ``OutputPerturbation``. The Lipschitz bound, for every possible example:
``|d f / d r| <= M + c`` and ``||x|| <= 1`` (rows clipped to the public norm 1), so
``lipschitz = M + c``, whatever ``y`` is.

Run:  python examples/custom_loss.py [--asymmetry 1.0] [--epsilon 2] [--seed 0]
(a few seconds)
"""

from __future__ import annotations

import argparse
import time

import cvxpy as cp
import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.preprocessing import StandardScaler

import dpcvx


def asymmetric_huber(residual: cp.Expression, threshold: float, asymmetry: float) -> cp.Expression:
    """``0.5 huber(r, M) + c pos(r)``: convex, ``(M + c)``-Lipschitz in ``r``."""
    return 0.5 * cp.huber(residual, threshold) + asymmetry * cp.pos(residual)


def main(argv: list[str] | None = None) -> dpcvx.PrivateResult:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threshold", type=float, default=1.0, help="Huber threshold M")
    parser.add_argument(
        "--asymmetry",
        type=float,
        default=1.0,
        help="extra price c per unit of over-prediction (>= 0)",
    )
    parser.add_argument("--regularization", type=float, default=0.05)
    parser.add_argument("--epsilon", type=float, default=2.0, help="privacy budget (pure DP)")
    parser.add_argument(
        "--seed", type=int, default=None, help="seed the noise (reproducible, not for production)"
    )
    args = parser.parse_args(argv)
    if not (args.threshold > 0 and args.asymmetry >= 0):
        parser.error("--threshold must be positive and --asymmetry non-negative.")
    M, c, lam, radius = args.threshold, args.asymmetry, args.regularization, 10.0

    features, target = load_diabetes(return_X_y=True, scaled=False)
    # Public preprocessing. (The scaling statistics come from the data here; a real deployment
    # fixes them from public knowledge. Clipping rows to norm 1 is what the privacy proof needs.)
    X = StandardScaler().fit_transform(features)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    Y = (target - target.mean()) / target.std()
    n, d = X.shape

    # dpcvx: one example's loss, with the data as parameters
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    problem = dpcvx.Problem(
        asymmetric_huber(x @ w - y, M, c),
        w,
        data={x: X, y: Y},
        domain=dpcvx.domains.l2_ball(w, radius),
    )
    start = time.perf_counter()
    sol = problem.solve(regularization=lam)
    dpcvx_seconds = time.perf_counter() - start

    # plain CVXPY: the whole dataset in one model, same objective (center 0 = the ball's center)
    W = cp.Variable(d)
    objective = cp.sum(asymmetric_huber(X @ W - Y, M, c)) / n + lam / 2 * cp.sum_squares(W)
    plain = cp.Problem(cp.Minimize(objective), [cp.norm(W, 2) <= radius])
    start = time.perf_counter()
    plain.solve(solver=cp.CLARABEL)
    cvxpy_seconds = time.perf_counter() - start
    w_cvxpy = np.asarray(W.value, float)

    def objective_at(v: np.ndarray) -> float:
        r = X @ v - Y
        huber = np.where(np.abs(r) <= M, r**2, 2 * M * np.abs(r) - M**2)
        return float(np.mean(0.5 * huber + c * np.maximum(r, 0.0)) + lam / 2 * v @ v)

    mechanism = dpcvx.OutputPerturbation(lipschitz=M + c, regularization=lam)
    result = problem.solve_private(mechanism, epsilon=args.epsilon, rng=args.seed)

    print(
        f"diabetes: n={n}, d={d}, loss 0.5 huber(r, {M:g}) + {c:g} pos(r), "
        f"r = x.w - y, l2 ball of radius {radius:g}, lam = {lam:g}"
    )
    print(f"\ndpcvx.Problem.solve ({dpcvx_seconds:.2f} s): {sol}")
    print(f"  certificate terms: {dict(sol.solver_stats.get('term_kinds', {}))}")
    print(
        f"plain CVXPY + Clarabel ({cvxpy_seconds:.2f} s): status {plain.status!r}, "
        f"reported optimum {plain.value:.10f} (the solver's estimate, not a bound)"
    )
    feasible = bool(np.linalg.norm(w_cvxpy) <= radius)
    value = objective_at(w_cvxpy)
    print(
        f"  CVXPY's point: ||w|| <= {radius:g}: {feasible}; F = {value:.10f}; "
        f"F >= dpcvx's lower bound: {value >= sol.lower}"
    )
    print(
        f"  ||w_cvxpy - w_dpcvx|| = {np.linalg.norm(w_cvxpy - sol.w):.2e} "
        f"(dpcvx's point is within {sol.distance_bound:.2e} of the minimizer)"
    )

    print(f"\nprivate fit, Lipschitz bound M + c = {M + c:g} for every possible example")
    print(f"guarantee: {dpcvx.Guarantee(epsilon=result.epsilon, delta=result.delta)}")
    print(result.summary())
    print("\ntraining fit: mean over-prediction E[pos(r)], mean under-prediction E[neg(r)]")
    fits = [("non-private (dpcvx)", sol.w), (f"private, epsilon={args.epsilon:g}", result.w)]
    for label, v in fits:
        r = X @ v - Y
        print(f"  {label:<22} {np.mean(np.maximum(r, 0)):.3f}  {np.mean(np.maximum(-r, 0)):.3f}")
    return result


if __name__ == "__main__":
    main()
