"""Natural spellings of one loss at the speed of its canonical spelling.

A user writes pinball as ``cp.maximum(...)``, as ``tau * cp.neg(r) + (1 - tau) * cp.pos(r)`` or
as ``0.5 * cp.abs(r) + (tau - 0.5) * r``; the logistic loss as ``cp.logistic(-m)`` or
``cp.log_sum_exp(cp.hstack([0, -m]))``, or with labels in {0, 1} as ``cp.logistic(z) - y01 *
z``. For each group of such spellings (the same function of ``w``) this times, side by side in
one run, dpcvx's certified plain solve
(``problem.solve(regularization=lam)``) and its Lipschitz extension's
(``problem.lipschitz_extension(C).solve(regularization=lam)``, copies leaving the unit ball),
and prints each spelling's time over the group's first (canonical) spelling, the solve path
and the certified objective (the same within the gaps across a group: it is one function).

Data: Student-t(5) features scaled by ``sqrt(3 / (5 d))`` (seeded), labels from a random linear
model with noise (signs for the margin losses). Medians of ``--repeat`` solves, each on a
freshly built problem, the spellings of a group alternated.

    python benchmarks/bench_spelling_speed.py [--n 100000] [--d 20] [--repeat 3]
    python benchmarks/bench_spelling_speed.py --smoke     # CI: n = 2000, one repeat
    python benchmarks/bench_spelling_speed.py --groups pinball,logistic

A cell slower than ``--budget`` seconds (default 120) is not repeated.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
import warnings

import cvxpy as cp
import numpy as np
from _common import add_size_arguments, save_rows, sizes

import dpcvx

TAU, LAM, C = 0.3, 0.01, 1.0


def _groups(w, x, y):
    m = y * (x @ w)
    r = x @ w - y
    return {
        "hinge": (
            "signs",
            [
                ("cp.pos(1 - m)", cp.pos(1 - m)),
                ("cp.maximum(0, 1 - m)", cp.maximum(0, 1 - m)),
                ("cp.max(cp.hstack([0, 1 - m]))", cp.max(cp.hstack([0, 1 - m]))),
            ],
        ),
        "absolute": (
            "residuals",
            [
                ("cp.abs(r)", cp.abs(r)),
                ("cp.maximum(r, -r)", cp.maximum(r, -r)),
                ("cp.pos(r) + cp.neg(r)", cp.pos(r) + cp.neg(r)),
                ("cp.norm1(r)", cp.norm1(r)),
            ],
        ),
        "pinball": (
            "residuals",
            [
                ("cp.maximum(-tau r, (1 - tau) r)", cp.maximum(-TAU * r, (1 - TAU) * r)),
                ("tau cp.neg(r) + (1 - tau) cp.pos(r)", TAU * cp.neg(r) + (1 - TAU) * cp.pos(r)),
                ("0.5 cp.abs(r) + (0.5 - tau) r", 0.5 * cp.abs(r) + (0.5 - TAU) * r),
            ],
        ),
        "logistic": (
            "signs",
            [
                ("cp.logistic(-m)", cp.logistic(-m)),
                ("cp.log_sum_exp(cp.hstack([0, -m]))", cp.log_sum_exp(cp.hstack([0, -m]))),
                # the 0/1 labels' spelling, (1 + y) / 2 for the signs y
                ("cp.logistic(z) - (1 + y) / 2 z", cp.logistic(x @ w) - (1 + y) / 2 * (x @ w)),
            ],
        ),
        "squared hinge": (
            "signs",
            [
                ("cp.square(cp.pos(1 - m))", cp.square(cp.pos(1 - m))),
                ("cp.power(cp.pos(1 - m), 2)", cp.power(cp.pos(1 - m), 2)),
            ],
        ),
        "squared": (
            "residuals",
            [
                ("cp.square(r)", cp.square(r)),
                ("cp.square(cp.abs(r))", cp.square(cp.abs(r))),
                ("cp.power(r, 2)", cp.power(r, 2)),
            ],
        ),
    }


def make_data(n: int, d: int, seed: int = 7):
    rng = np.random.default_rng(seed)
    X = rng.standard_t(5, size=(n, d)) * math.sqrt(3.0 / (5.0 * d))
    beta = rng.normal(size=d)
    signs = np.sign(X @ beta + 0.1 * rng.normal(size=n))
    signs[signs == 0] = 1.0
    return X, signs, 0.3 * X @ beta + 0.3 * rng.normal(size=n)


def _time(group: str, index: int, X, labels, ext: bool):
    """One solve of the ``index``-th spelling of ``group`` on a freshly built problem."""
    d = X.shape[1]
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    loss = _groups(w, x, y)[group][1][index][1]
    problem = dpcvx.Problem(loss, w, {x: X, y: labels}, [cp.norm(w) <= 1.0])
    start = time.perf_counter()
    target = problem.lipschitz_extension(C) if ext else problem
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol = target.solve(regularization=LAM)
    return time.perf_counter() - start, sol


def run(n: int, d: int, repeat: int, names: list[str], budget: float) -> list[dict]:
    X, signs, residuals = make_data(n, d)
    rows = []
    d_ = X.shape[1]
    probe = _groups(cp.Variable(d_), cp.Parameter(d_), cp.Parameter())
    for group in names:
        kind, spellings = probe[group]
        labels = signs if kind == "signs" else residuals
        for ext in (False, True):
            times: dict[int, list[float]] = {i: [] for i in range(len(spellings))}
            sols: dict[int, object] = {}
            for _ in range(repeat):
                for i in range(len(spellings)):
                    if times[i] and times[i][-1] > budget:
                        continue
                    took, sol = _time(group, i, X, labels, ext)
                    times[i].append(took)
                    sols[i] = sol
            base = statistics.median(times[0])
            for i, (label, _) in enumerate(spellings):
                med = statistics.median(times[i])
                sol = sols[i]
                rows.append(
                    {
                        "group": group,
                        "spelling": label,
                        "extension": ext,
                        "seconds": med,
                        "ratio": med / base,
                        "path": sol.solver_stats["solver"],
                        "upper": sol.upper,
                        "gap": sol.gap,
                    }
                )
    return rows


def report(rows: list[dict]) -> str:
    lines = [
        f"{'group':14s} {'spelling':38s} {'solve':9s} {'seconds':>8s} {'ratio':>6s} "
        f"{'path':14s} {'objective':>14s} {'gap':>8s}"
    ]
    for row in rows:
        lines.append(
            f"{row['group']:14s} {row['spelling']:38s} "
            f"{'extension' if row['extension'] else 'plain':9s} {row['seconds']:8.3f} "
            f"{row['ratio']:6.2f} {row['path']:14s} {row['upper']:14.9f} {row['gap']:8.1e}"
        )
    worst = max(rows, key=lambda row: row["ratio"])
    lines.append(
        f"slowest against its canonical spelling: {worst['spelling']} "
        f"({'extension' if worst['extension'] else 'plain'}) at {worst['ratio']:.2f}x"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_size_arguments(parser)
    parser.add_argument("--groups", default="")
    parser.add_argument("--budget", type=float, default=120.0)
    args = parser.parse_args()
    n, repeat = sizes(args)
    d_ = args.d
    every = list(_groups(cp.Variable(d_), cp.Parameter(d_), cp.Parameter()))
    names = [g for g in args.groups.split(",") if g] or every
    unknown = [g for g in names if g not in every]
    if unknown:
        parser.error(f"unknown groups {unknown}; choose from {every}")
    rows = run(n, args.d, repeat, names, args.budget)
    print(report(rows))
    save_rows(args, "bench_spelling_speed", n, repeat, rows)


if __name__ == "__main__":
    main()
