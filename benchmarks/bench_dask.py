"""dpcvx's certified solve on a Dask cluster (``DaskProblem``) next to the in-process solve.

    python benchmarks/bench_dask.py                 # n = 1e6 both ways, then 1e7 on the cluster
    python benchmarks/bench_dask.py --n 1e6,1e7 --workers 2 --chunk 250000
    python benchmarks/bench_dask.py --smoke         # CI: seconds

Data: ``X ~ N(0, I_d / d)`` and labels ``sign(X beta + noise)``, generated lazily on the workers
by ``dask.array.random`` (the rows never exist on the client), logistic loss, the l2 ball of
radius 10 (inactive), ``lam = 1e-4``, certified to 1e-9. For every n up to ``--local-max-n`` the
same rows are also computed in one process and solved by ``dpcvx.Problem`` (Newton there too):
the table gives both times, their ratio and both certified gaps, and checks that the two
certificates bracket the same optimum. Then one private release (output perturbation on the
extension with C = 1) on the largest n. Prints one row per run as it is measured; medians of
``--repeats`` runs (the first distributed run also builds the partitions on the workers and is
reported apart).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import cvxpy as cp
import numpy as np

import dpcvx

LAM, ACCURACY, RADIUS = 1e-4, 1e-9, 10.0


def _data(n: int, d: int, chunk: int, seed: int):
    import dask.array as da

    rng = da.random.default_rng(seed)
    X = rng.normal(size=(n, d), chunks=(chunk, d)) / np.sqrt(d)
    beta = np.random.default_rng(seed + 1).normal(size=d)
    noise = rng.normal(size=n, chunks=chunk)
    Y = da.sign(X @ beta + 0.5 * noise)
    return X, Y


def _declare(d: int):
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    return cp.logistic(-y * (x @ w)), w, x, y


def run(
    n: int, d: int, chunk: int, client, repeats: int, local_max_n: int, seed: int
) -> tuple[dict, dpcvx.DaskProblem]:
    X, Y = _data(n, d, chunk, seed)
    if n <= local_max_n:  # one graph for both uses: the chunks are generated once, on workers
        X, Y = client.persist([X, Y])
    loss, w, x, y = _declare(d)
    problem = dpcvx.DaskProblem(loss, w, {x: X, y: Y}, [cp.norm(w) <= RADIUS], client=client)
    t = time.perf_counter()
    first = problem.solve(regularization=LAM, accuracy=ACCURACY)
    first_s = time.perf_counter() - t
    times, sol = [], first
    for _ in range(repeats):
        t = time.perf_counter()
        sol = problem.solve(regularization=LAM, accuracy=ACCURACY)
        times.append(time.perf_counter() - t)
    row = {
        "n": n,
        "d": d,
        "partitions": problem.partitions,
        "first_s": first_s,
        "dask_s": statistics.median(times),
        "gap": sol.gap,
        "steps": sol.solver_stats["iterations"],
        "round_trips": sol.solver_stats["round_trips"],
        "certify_s": sol.solver_stats["certify_seconds"],
        "local_s": float("nan"),
        "local_gap": float("nan"),
        "agree": None,
    }
    if n <= local_max_n:
        Xl, Yl = client.compute([X, Y], sync=True)
        local_problem = dpcvx.Problem(loss, w, {x: Xl, y: Yl}, [cp.norm(w) <= RADIUS])
        local_times = []
        for _ in range(repeats):
            t = time.perf_counter()
            local = local_problem.solve(regularization=LAM, accuracy=ACCURACY)
            local_times.append(time.perf_counter() - t)
        row.update(
            local_s=statistics.median(local_times),
            local_gap=local.gap,
            agree=bool(sol.lower <= local.upper and local.lower <= sol.upper),
        )
        del Xl, Yl, local_problem
    return row, problem


def private(problem: dpcvx.DaskProblem, seed: int) -> dict:
    """One private release on the problem's partitions (already on the workers)."""
    mech = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=LAM)
    t = time.perf_counter()
    result = problem.solve_private(mech, epsilon=1.0, rng=seed)
    return {
        "n": problem.n,
        "seconds": time.perf_counter() - t,
        "noise_scale": result.detail["noise_scale"],
    }


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="1e6,1e7", help="comma-separated sample sizes")
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--chunk", type=int, default=250_000, help="rows per partition")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--local-max-n", type=float, default=1e6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="a tiny run for CI")
    args = parser.parse_args(argv)
    from distributed import Client, LocalCluster

    sizes = [int(float(v)) for v in args.n.split(",")]
    chunk, repeats, workers = args.chunk, args.repeats, args.workers
    if args.smoke:
        sizes, chunk, repeats, workers = [4000], 1000, 1, 2
    cluster = LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=not args.smoke,
        dashboard_address=None,
        memory_limit=0,
    )
    rows = []
    with Client(cluster) as client:
        print(
            f"{'n':>9} {'d':>3} {'parts':>5} {'first s':>8} {'dask s':>8} {'local s':>8} "
            f"{'ratio':>6} {'steps':>5} {'trips':>5} {'cert s':>7} {'gap':>8} {'local gap':>9} "
            "agree",
            flush=True,
        )
        problem = None
        for n in sizes:
            r, problem = run(n, args.d, chunk, client, repeats, int(args.local_max_n), args.seed)
            rows.append(r)
            ratio = r["dask_s"] / r["local_s"] if r["local_s"] == r["local_s"] else float("nan")
            print(
                f"{r['n']:>9} {r['d']:>3} {r['partitions']:>5} {r['first_s']:>8.2f} "
                f"{r['dask_s']:>8.2f} {r['local_s']:>8.2f} {ratio:>6.2f} {r['steps']:>5} "
                f"{r['round_trips']:>5} {r['certify_s']:>7.2f} {r['gap']:>8.1e} "
                f"{r['local_gap']:>9.1e} {r['agree']}",
                flush=True,
            )
            if r["agree"] is False or not r["gap"] <= ACCURACY:
                print("the certificates disagree or missed the target", file=sys.stderr)
                sys.exit(1)
        assert problem is not None
        p = private(problem, args.seed)
        print(
            f"private release (output perturbation on the extension, C = 1) at n = {p['n']}: "
            f"{p['seconds']:.2f} s, noise scale {p['noise_scale']:.3g}",
            flush=True,
        )
    cluster.close()
    return rows


if __name__ == "__main__":
    main()
