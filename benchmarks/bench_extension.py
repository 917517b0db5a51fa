"""Time of the certified Lipschitz-extension ERM (paper 000, Lemma 2.7) vs the certified plain
ERM on the same data, side by side in one run.

    python benchmarks/bench_extension.py [--n 1000,10000] [--d 20] [--C 1.0] [--lam 0.01]

Data: Student-t(4) features scaled by 1/sqrt(2d), labels from a random linear model with noise
(seeded), hinge loss, unit l2 ball. Prints one row per n with both times, their ratio, the
solver iterations and both certified gaps.
"""

from __future__ import annotations

import argparse
import time

import cvxpy as cp
import numpy as np

import dpcvx


def run(n: int, d: int, C: float, lam: float, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    X = rng.standard_t(4, size=(n, d)) / np.sqrt(2 * d)
    Y = np.sign(X @ rng.normal(size=d) + 0.1 * rng.normal(size=n))
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    problem = dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, {x: X, y: Y}, [cp.norm(w) <= 1])
    t0 = time.perf_counter()
    plain = problem.solve(regularization=lam)
    t1 = time.perf_counter()
    ext = problem.lipschitz_extension(C).solve(regularization=lam)
    t2 = time.perf_counter()
    return {"n": n, "d": d, "plain_s": t1 - t0, "extension_s": t2 - t1,
            "ratio": (t2 - t1) / (t1 - t0), "plain_gap": plain.gap, "extension_gap": ext.gap,
            "plain_iters": plain.solver_stats.get("iterations"),
            "extension_iters": ext.solver_stats.get("iterations")}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="1000,10000", help="comma-separated sample sizes")
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument("--lam", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rows = [run(int(float(v)), args.d, args.C, args.lam, args.seed) for v in args.n.split(",")]
    print(f"{'n':>7} {'d':>4} {'plain_s':>8} {'extension_s':>11} {'ratio':>6} "
          f"{'iters':>9} {'plain_gap':>9} {'ext_gap':>9}")
    for r in rows:
        print(f"{r['n']:>7} {r['d']:>4} {r['plain_s']:>8.3f} {r['extension_s']:>11.3f} "
              f"{r['ratio']:>6.1f} {r['plain_iters']:>4}/{r['extension_iters']:<4} "
              f"{r['plain_gap']:>9.1e} {r['extension_gap']:>9.1e}")
    return rows


if __name__ == "__main__":
    main()
