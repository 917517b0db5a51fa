"""Localized Double Output Perturbation (paper 000, Algorithm 1) with its blocks on executors,
next to the in-process release, side by side in one run.

    python benchmarks/bench_executors.py                  # n = 2e5, d = 20, 2 workers
    python benchmarks/bench_executors.py --n 200000,400000 --workers 2
    python benchmarks/bench_executors.py --smoke          # CI: seconds

Data (seeded): Student-t(5) features scaled so that ``E||x||^2 = 1``, labels from a linear model
with Student-t(3) noise, the absolute loss ``|x.w - y|`` on the l2 ball of radius 5: a
heavy-tailed regression, LDOP's use case (k = 4 with the features' exact fourth moment). Each
row is the median of ``--repeats`` releases of the same seed on: one process; a
``concurrent.futures.ProcessPoolExecutor``; a ``distributed.LocalCluster`` (processes, one
thread each), given as the ``Client`` itself (block rows scattered straight to the workers)
and as ``client.get_executor()`` (block rows inside the task graph). Every executor must
release the same point as the in-process run (the blocks get generators spawned before
dispatch), which the ``same`` column checks. A block job carries only its block's rows and the
public solve setup.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import cvxpy as cp
import numpy as np

import dpcvx

NU = 5.0


def _problem(n: int, d: int, seed: int) -> tuple[dpcvx.Problem, float]:
    rng = np.random.default_rng(seed)
    X = rng.standard_t(NU, size=(n, d)) * math.sqrt(3.0 / (5.0 * d))
    Y = X @ rng.normal(size=d) / math.sqrt(d) + 0.3 * rng.standard_t(3.0, size=n)
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    problem = dpcvx.Problem(cp.abs(x @ w - y), w, {x: X, y: Y}, [cp.norm(w) <= 5.0])
    scale2 = 3.0 / (5.0 * d)
    ex2 = NU / (NU - 2) * scale2
    ex4 = 3 * NU**2 / ((NU - 2) * (NU - 4)) * scale2**2
    G4 = (d * ex4 + d * (d - 1) * ex2**2) ** 0.25  # E||x||^4 ^ (1/4), the gradients' bound
    return problem, G4


def _time(problem, G4, executor, repeats: int, seed: int):
    times, w = [], None
    for _ in range(repeats):
        mech = dpcvx.LocalizedDoubleOutputPerturbation(
            k=4, moment=G4, executor=executor, progress=False
        )
        t = time.perf_counter()
        w = problem.solve_private(mech, epsilon=1.0, rng=seed).w
        times.append(time.perf_counter() - t)
    return statistics.median(times), w


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="200000", help="comma-separated sample sizes")
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-dask", action="store_true", help="skip the LocalCluster")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    args = parser.parse_args(argv)
    ns = [int(float(v)) for v in args.n.split(",")]
    repeats = args.repeats
    if args.smoke:
        ns, args.d, repeats = [2000], 5, 1

    executors: list[tuple[str, object]] = []
    pool = ProcessPoolExecutor(args.workers)
    executors.append(("process pool", pool))
    cluster = client = None
    if not args.no_dask:
        from distributed import Client, LocalCluster

        cluster = LocalCluster(
            n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None
        )
        client = Client(cluster)
        executors.append(("Dask Client", client))
        executors.append(("Dask executor", client.get_executor()))
    rows = []
    print(
        f"{'n':>8s} {'d':>4s} {'executor':>14s} {'seconds':>8s} {'in-process':>10s} "
        f"{'speedup':>8s} {'same':>5s}",
        flush=True,
    )
    try:
        for n in ns:
            problem, G4 = _problem(n, args.d, args.seed)
            _time(problem, G4, None, 1, args.seed)  # warm-up: compile the templates once
            base, w0 = _time(problem, G4, None, repeats, args.seed)
            for name, executor in executors:
                _time(problem, G4, executor, 1, args.seed)  # warm-up: start the workers
                seconds, w = _time(problem, G4, executor, repeats, args.seed)
                row = {
                    "n": n,
                    "d": args.d,
                    "executor": name,
                    "seconds": seconds,
                    "in_process": base,
                    "speedup": base / seconds,
                    "same": bool(np.array_equal(w, w0)),
                }
                rows.append(row)
                print(
                    f"{n:8d} {args.d:4d} {name:>14s} {seconds:8.3f} {base:10.3f} "
                    f"{base / seconds:7.2f}x {str(row['same']):>5s}",
                    flush=True,
                )
    finally:
        pool.shutdown()
        if client is not None:
            client.close()
            cluster.close()  # type: ignore[union-attr]
    if not all(r["same"] for r in rows):
        print("an executor released a different point", file=sys.stderr)
        sys.exit(1)
    return rows


if __name__ == "__main__":
    main()
