"""How dpcvx's certified solve grows with n on one machine: time and memory per loss.

    python benchmarks/bench_scale.py                       # n = 1e4, 1e5, 1e6 at d = 20
    python benchmarks/bench_scale.py --losses logistic,hinge --n 1e4,1e5 --d 100
    python benchmarks/bench_scale.py --smoke               # CI: seconds

Each cell runs in a fresh process (so the peak resident memory is the cell's own): the data
(``X ~ N(0, I)``, labels from a random linear model with noise), the declaration, then two
certified solves to 1e-9 (``lam = 1e-2``, the l2 ball of radius 100, inactive), the first and
then ``--repeat`` more (three by default). It prints the median time of those (the first also
compiles the second-order or piecewise model), the first,
the growth ``time(10 n) / time(n)``, the certified gap, the path, the data's size and the peak
memory above the process's state before the declaration, in multiples of the data's size.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CELL = r"""
import json, resource, sys, time
import cvxpy as cp, numpy as np, dpcvx
n, d, loss = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(0)
X = rng.normal(size=(n, d)); beta = rng.normal(size=d)
Y = np.sign(X @ beta + 0.5 * rng.normal(size=n)); R = 0.1 * X @ beta + 0.1 * rng.normal(size=n)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
w = cp.Variable(d); x = cp.Parameter(d); y = cp.Parameter()
expr, labels = {
    "logistic": (cp.logistic(-y * (x @ w)), Y),
    "squared": (cp.square(x @ w - y), R),
    "huber": (cp.huber(x @ w - y, 1.0), R),
    "hinge": (cp.pos(1 - y * (x @ w)), Y),
    "absolute": (cp.abs(x @ w - y), R),
    "pinball": (cp.maximum(0.3 * (y - x @ w), -0.7 * (y - x @ w)), R),
}[loss]
problem = dpcvx.Problem(expr, w, data={x: X, y: labels}, domain=[cp.norm(w, 2) <= 100])
t = time.perf_counter()
problem.solve(regularization=1e-2, center=np.zeros(d), accuracy=1e-9)
first = time.perf_counter() - t
times = []
for _ in range(int(sys.argv[4])):
    t = time.perf_counter()
    sol = problem.solve(regularization=1e-2, center=np.zeros(d), accuracy=1e-9)
    times.append(time.perf_counter() - t)
again = float(np.median(times))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
size = (X.nbytes + labels.nbytes) / 2**20
print(json.dumps({"first": first, "again": again, "gap": sol.gap, "data_mib": size,
                  "path": sol.solver_stats.get("solver"), "extra_mib": peak - base}))
"""


def cell(n: int, d: int, loss: str, repeat: int = 3) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CELL, str(n), str(d), loss, str(repeat)],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--losses", default="logistic,squared,huber,hinge,absolute,pinball")
    parser.add_argument("--n", default="1e4,1e5,1e6")
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3, help="timed solves per cell (median)")
    parser.add_argument("--smoke", action="store_true", help="a tiny run for CI")
    args = parser.parse_args(argv)
    sizes = [int(float(v)) for v in args.n.split(",")]
    losses = args.losses.split(",")
    if args.smoke:
        sizes, losses = [1000, 10000], ["logistic", "hinge"]
    print(
        f"{'loss':<9} {'n':>8} {'d':>4} {'solve s':>8} {'first s':>8} {'growth':>7} "
        f"{'gap':>8} {'data MiB':>9} {'extra MiB':>9} {'x data':>6}  path",
        flush=True,
    )
    rows = []
    for loss in losses:
        previous = None
        for n in sizes:
            r = cell(n, args.d, loss, 1 if args.smoke else max(1, args.repeat))
            growth = (
                r["again"] / previous["again"]
                if previous is not None and sizes[sizes.index(n) - 1] * 10 == n
                else float("nan")
            )
            r.update(loss=loss, n=n, d=args.d, growth=growth)
            rows.append(r)
            print(
                f"{loss:<9} {n:>8} {args.d:>4} {r['again']:>8.3f} {r['first']:>8.3f} "
                f"{growth:>7.2f} {r['gap']:>8.1e} {r['data_mib']:>9.1f} {r['extra_mib']:>9.1f} "
                f"{r['extra_mib'] / r['data_mib']:>6.2f}  {r['path']}",
                flush=True,
            )
            previous = r
    return rows


if __name__ == "__main__":
    main()
