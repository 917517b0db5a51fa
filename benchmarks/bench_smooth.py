"""dpcvx's certified solve of smooth regularized ERM next to scikit-learn on the same
objective, measured side by side in one run.

    python benchmarks/bench_smooth.py [--smoke] [--n 10000,100000] [--d 20,100] [--repeats 3]
                                      [--out DIR]

Objective (seeded data, ``lam = 1e-2``, ``w0 = 0``, an l2 ball of radius 100, inactive):
``(1/n) sum_i f(w; z_i) + (lam/2) ||w||^2`` with the logistic loss ``log(1 + exp(-y x.w))``
(scikit-learn: ``LogisticRegression(C=1/(lam n), fit_intercept=False, tol=1e-8)``, lbfgs) and
the squared loss ``(x.w - y)^2`` (scikit-learn: ``Ridge(alpha=lam n/2, fit_intercept=False)``).
dpcvx certifies every solve to ``accuracy=1e-9``; its path (the quasi-Newton first rung for
smooth losses, or the interior-point ladder) is in the ``path`` column. Medians of
``--repeats`` runs after one warm-up; read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import cvxpy as cp
import numpy as np
from _common import write_json

import dpcvx

LAM = 1e-2


def _median_seconds(fn, repeats: int):
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), out


def run(ns, ds, repeats: int) -> list[dict]:
    from sklearn.linear_model import LogisticRegression, Ridge

    rows = []
    rng = np.random.default_rng(0)
    for n in ns:
        for d in ds:
            X = rng.normal(size=(n, d))
            beta = rng.normal(size=d)
            Y = np.sign(X @ beta + 0.5 * rng.normal(size=n))
            R = 0.1 * X @ beta + 0.1 * rng.normal(size=n)
            w = cp.Variable(d)
            x = cp.Parameter(d)
            y = cp.Parameter()
            cases = (
                (
                    "logistic",
                    cp.logistic(-y * (x @ w)),
                    {x: X, y: Y},
                    lambda X=X, Y=Y, n=n: LogisticRegression(
                        C=1.0 / (LAM * n), fit_intercept=False, tol=1e-8, max_iter=2000
                    ).fit(X, (Y > 0).astype(int)),
                ),
                (
                    "squared",
                    cp.square(x @ w - y),
                    {x: X, y: R},
                    lambda X=X, R=R, n=n: Ridge(alpha=LAM * n / 2, fit_intercept=False).fit(X, R),
                ),
            )
            for name, loss, data, sklearn_fit in cases:
                problem = dpcvx.Problem(loss, w, data=data, domain=[cp.norm(w, 2) <= 100])

                def solve(problem=problem, d=d):
                    return problem.solve(regularization=LAM, center=np.zeros(d), accuracy=1e-9)

                solve()  # warm-up: compile the template once
                t_dpcvx, sol = _median_seconds(solve, repeats)
                sklearn_fit()
                t_sklearn, _ = _median_seconds(sklearn_fit, repeats)
                rows.append(
                    {
                        "loss": name,
                        "n": n,
                        "d": d,
                        "dpcvx_seconds": t_dpcvx,
                        "sklearn_seconds": t_sklearn,
                        "ratio": t_dpcvx / t_sklearn,
                        "gap": float(sol.gap),
                        "path": sol.solver_stats.get("solver"),
                    }
                )
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny run for CI")
    parser.add_argument("--n", default="10000,100000")
    parser.add_argument("--d", default="20,100")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None, help="directory for bench_smooth.json")
    args = parser.parse_args(argv)
    if args.smoke:
        ns, ds, repeats = (500,), (5,), 1
    else:
        ns = tuple(int(v) for v in args.n.split(","))
        ds = tuple(int(v) for v in args.d.split(","))
        repeats = max(1, args.repeats)
    rows = run(ns, ds, repeats)
    print(
        f"{'loss':9s} {'n':>7s} {'d':>4s} {'dpcvx s':>9s} {'sklearn s':>10s} {'ratio':>7s} "
        f"{'gap':>8s}  path"
    )
    for r in rows:
        print(
            f"{r['loss']:9s} {r['n']:7d} {r['d']:4d} {r['dpcvx_seconds']:9.3f} "
            f"{r['sklearn_seconds']:10.3f} {r['ratio']:6.1f}x {r['gap']:8.0e}  {r['path']}"
        )
    out_dir = Path(args.out) if args.out else Path(__file__).resolve().parent / "results"
    write_json({"lambda": LAM, "rows": rows}, out_dir / "bench_smooth.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
