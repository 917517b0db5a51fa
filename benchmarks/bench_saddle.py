"""Adversarial training with a general convex-concave adversary (paper 002, Sec 5.2, Alg 8).

Side by side in one run, per n:
- dpcvx's certified saddle solve (``dpcvx.SaddleProblem.solve`` at the default private
  accuracy) vs plain CVXPY on the closed form of the same objective (the test loss has one:
  ``logistic(-y x.w) + y v.w - (gamma/2)||v||^2`` over ``||v|| <= rho`` gives
  ``huber(||w||, gamma rho)/(2 gamma)``): time ratio, rounds, and whether the certified
  bracket contains CVXPY's optimum;
- the private release (``OutputPerturbation``, epsilon = 1) vs the non-private optimum:
  excess objective ``G(w_priv) - min G``, median over seeds.

    python benchmarks/bench_saddle.py [--n 300,1000,3000] [--seeds 5] [--smoke]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import cvxpy as cp
import numpy as np
from _common import results_dir, write_json

import dpcvx

GAMMA, RHO, LAM, D = 1.0, 0.3, 0.1, 5


def data(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D)) / np.sqrt(D)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    Y = np.where(X @ np.ones(D) + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, Y


def objective(X, Y, w):
    t = float(np.linalg.norm(w))
    inner = t * t / (2 * GAMMA) if t <= GAMMA * RHO else RHO * t - GAMMA * RHO**2 / 2
    return float(np.mean(np.logaddexp(0.0, -Y * (X @ w)))) + inner + LAM / 2 * float(w @ w)


def reference(X, Y):
    n = X.shape[0]
    w = cp.Variable(D)
    obj = (
        cp.sum(cp.logistic(-cp.multiply(Y, X @ w))) / n
        + cp.huber(cp.norm(w, 2), GAMMA * RHO) / (2 * GAMMA)
        + LAM / 2 * cp.sum_squares(w)
    )
    prob = cp.Problem(cp.Minimize(obj), [cp.norm(w, 2) <= 1])
    start = time.perf_counter()
    prob.solve(solver=cp.CLARABEL)
    return prob.value, w.value, time.perf_counter() - start


def saddle(X, Y):
    w, v = cp.Variable(D), cp.Variable(D)
    x, y = cp.Parameter(D), cp.Parameter()
    loss = cp.logistic(-y * (x @ w)) + y * (v @ w) - GAMMA / 2 * cp.sum_squares(v)
    return dpcvx.SaddleProblem(
        loss,
        w,
        v,
        data={x: X, y: Y},
        domain=[cp.norm(w, 2) <= 1],
        perturbation_set=[cp.norm(v, 2) <= RHO],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="300,1000,3000")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--smoke", action="store_true", help="tiny run for the test suite")
    ap.add_argument("--out", default=str(results_dir() / "saddle.json"))
    args = ap.parse_args()
    ns = [100] if args.smoke else [int(s) for s in args.n.split(",")]
    seeds = 1 if args.smoke else args.seeds
    L = 1.0 + RHO  # |grad logistic| <= ||x|| <= 1, and the inner max adds at most rho
    rows = []
    print(
        f"{'n':>6} {'cvxpy s':>8} {'dpcvx s':>8} {'ratio':>6} {'rounds':>6} {'bracket':>8} "
        f"{'alpha':>9} {'excess (eps=1)':>15}"
    )
    for n in ns:
        X, Y = data(n, 0)
        ref_value, _, t_ref = reference(X, Y)
        problem = saddle(X, Y)
        mech = dpcvx.OutputPerturbation(lipschitz=L, regularization=LAM)
        alpha = mech.plan(
            n=n, d=D, center=np.zeros(D), diameter=2.0, epsilon=1.0, delta=0.0
        ).accuracy
        start = time.perf_counter()
        sol = problem.solve(regularization=LAM, accuracy=alpha)
        t_dp = time.perf_counter() - start
        inside = bool(sol.lower <= ref_value + 1e-9 <= sol.upper + 2e-9)
        excess = [
            objective(X, Y, problem.solve_private(mech, epsilon=1.0, rng=s).w) - ref_value
            for s in range(seeds)
        ]
        row = {
            "n": n,
            "cvxpy_seconds": t_ref,
            "dpcvx_seconds": t_dp,
            "ratio": t_dp / t_ref,
            "rounds": sol.solver_stats["rounds"],
            "bracket_contains_reference": inside,
            "alpha": alpha,
            "median_excess_eps1": float(np.median(excess)),
        }
        rows.append(row)
        print(
            f"{n:>6} {t_ref:>8.3f} {t_dp:>8.2f} {row['ratio']:>6.0f} {row['rounds']:>6} "
            f"{str(inside):>8} {alpha:>9.2e} {row['median_excess_eps1']:>15.3e}"
        )
    if not args.smoke:
        write_json({"rows": rows}, Path(args.out))
    if not all(r["bracket_contains_reference"] for r in rows):
        raise SystemExit("a certified bracket missed the reference optimum")


if __name__ == "__main__":
    main()
