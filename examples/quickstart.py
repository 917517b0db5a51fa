"""Quickstart: a pure epsilon-DP linear classifier on scikit-learn's breast-cancer data.

Preprocessing uses only public choices (standardize, then clip every row to norm 1), so the
hinge loss is 1-Lipschitz in w for every possible example: that is the `lipschitz` we declare.

Run:  python examples/quickstart.py [--epsilon 1.0] [--seed 0]
"""

from __future__ import annotations

import argparse

import cvxpy as cp
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.preprocessing import StandardScaler

import dpcvx


def main(argv: list[str] | None = None) -> dpcvx.PrivateResult:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=1.0, help="privacy budget (pure DP)")
    parser.add_argument("--regularization", type=float, default=0.01)
    parser.add_argument(
        "--seed", type=int, default=None, help="seed the noise (reproducible, not for production)"
    )
    args = parser.parse_args(argv)

    features, labels = load_breast_cancer(return_X_y=True)
    # Public preprocessing. (StandardScaler's statistics come from the data; a real deployment
    # fixes them from public knowledge. Clipping to norm 1 is what the privacy proof needs.)
    X = StandardScaler().fit_transform(features)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    Y = 2.0 * labels - 1.0
    n, d = X.shape

    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    problem = dpcvx.Problem(
        dpcvx.losses.hinge(x @ w, y), w, data={x: X, y: Y}, domain=dpcvx.domains.l2_ball(w, 5.0)
    )

    exact = problem.solve(regularization=args.regularization)
    mechanism = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=args.regularization)
    result = problem.solve_private(mechanism, epsilon=args.epsilon, rng=args.seed)

    def accuracy(v: np.ndarray) -> float:
        return float(np.mean(np.sign(X @ v) == Y))

    print(f"breast_cancer: n={n}, d={d}, hinge loss, l2 ball of radius 5")
    print(f"guarantee: {dpcvx.Guarantee(epsilon=result.epsilon, delta=result.delta)}")
    print(result.summary())
    print(f"non-private certified solve: {exact}")
    print(
        f"training accuracy: private {accuracy(result.w):.3f}, non-private {accuracy(exact.w):.3f}"
    )
    return result


if __name__ == "__main__":
    main()
