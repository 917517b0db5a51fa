"""Random Lipschitz-extension problems: which path certifies each, and in what time.

Case ``i`` (``sweep_case``) draws, from the seed ``1000 + i``: ``n`` in [300, 5000], ``d`` in
[3, 20], Student-t(5) features scaled so that ``E||x||^2 = 1``, ``lam`` in [0.01, 0.05]; the loss
cycles through hinge (labels from a random linear model's signs), absolute and pinball (tau =
0.3; labels ``0.3 x^T beta`` plus noise) and the domain, every three cases, through the l2
balls of radius 0.3 and 1 and the boxes ``cp.abs(w) <= B`` for B in {0.05, 0.1, 0.4}. Each case
solves ``problem.lipschitz_extension(1.0)`` certified to each ``--accuracy`` (a private release's
targets run from about 1e-10 to 1e-6) and records the path that certified it: the arrowhead
method with its rounds, the joint program with copies for the examples that move only
(``CLARABEL (lifted copies)``), or the whole joint program (``CLARABEL``). ``release`` instead
releases each case with ``DoubleOutputPerturbation(C=1)`` at epsilon = 1: its row counts the
slowest path among the certified solves behind the release (one per stage that ran, each at
the target the mechanism sets for it; all of them in the JSON's ``stages``), its seconds the
whole release, and its bracket the last solve's.

    python benchmarks/bench_rounds.py                       # cases 0-299 at 6e-8 and 3e-10
    python benchmarks/bench_rounds.py --cases 0:60 --accuracy 6e-8
    python benchmarks/bench_rounds.py --accuracy release    # DoubleOutputPerturbation releases
    python benchmarks/bench_rounds.py --smoke               # CI: six small cases, seconds

Prints one line per accuracy and domain (cases, seconds, and per path the count and seconds)
and the totals; the JSON (every case: path, rounds, seconds, bracket) goes to
``bench_rounds.json`` in the results folder. The tests use the same cases
(``tests/certification/test_arrowhead.py``).
"""

from __future__ import annotations

import argparse
import time
import warnings

import cvxpy as cp
import numpy as np

import dpcvx

__all__ = ["sweep_case", "run", "main"]

LOSSES = ("hinge", "absolute", "pinball")
#: ``--smoke``: six small cases, each loss in a ball and in a box
SMOKE = (7, 21, 46, 47, 51, 288)
DOMAINS = (("ball", 0.3), ("ball", 1.0), ("box", 0.05), ("box", 0.1), ("box", 0.4))


def sweep_case(i: int):
    """Case ``i``: the problem, the features, the labels, the domain ``(kind, size)`` and the
    regularization."""
    rng = np.random.default_rng(1000 + i)
    n, d = int(rng.integers(300, 5001)), int(rng.integers(3, 21))
    loss = LOSSES[i % 3]
    kind, size = DOMAINS[(i // 3) % 5]
    lam = float(rng.uniform(0.01, 0.05))
    X = rng.standard_t(5.0, size=(n, d)) * np.sqrt(3.0 / (5.0 * d))
    beta = rng.normal(size=d)
    signs = np.sign(X @ beta + 0.1 * rng.normal(size=n))
    R = 0.3 * X @ beta + 0.1 * rng.normal(size=n)
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    f = {
        "hinge": cp.pos(1 - y * (x @ w)),
        "absolute": cp.abs(x @ w - y),
        "pinball": cp.maximum(0.3 * (y - x @ w), (0.3 - 1) * (y - x @ w)),
    }[loss]
    labels = signs if loss == "hinge" else R
    domain = [cp.norm(w) <= size] if kind == "ball" else [cp.abs(w) <= size]
    problem = dpcvx.Problem(f, w, {x: X, y: labels}, domain)
    return problem, X, labels, (kind, size), lam


def run(i: int, accuracy: float | None) -> dict:
    """Case ``i`` certified to ``accuracy``: its path, rounds, seconds and bracket. With
    ``accuracy`` None, the case is released instead by ``DoubleOutputPerturbation(C=1)`` at
    epsilon = 1 (seeded), whose target comes from the mechanism; the row then describes the
    certified solve behind the release (and records that target)."""
    problem, X, _, (kind, size), lam = sweep_case(i)
    n, d = X.shape
    row = {"case": i, "n": n, "d": d, "loss": LOSSES[i % 3], "domain": f"{kind} {size}"}
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if accuracy is None:
                solves = _released(problem, lam, i)
            else:
                ext = problem.lipschitz_extension(1.0)
                solves = [(ext.solve(regularization=lam, accuracy=accuracy), accuracy)]
        except Exception as exc:  # noqa: BLE001 - a failure is a result here
            row.update(path="error", error=repr(exc)[:200], seconds=time.perf_counter() - start)
            return row
    stages = []
    for sol, target in solves:
        stats = sol.solver_stats
        method = stats.get("method")
        path = str(stats.get("solver")) + (f" ({method})" if method else "")
        stages.append({"path": path, "target": target, "rounds": stats.get("ball_rounds")})
    sol = solves[-1][0]
    row.update(
        path=max((s["path"] for s in stages), key=lambda p: _ORDER.index(p) if p in _ORDER else 3),
        stages=stages,
        seconds=time.perf_counter() - start,
        lower=sol.lower,
        upper=sol.upper,
        gap=sol.gap,
    )
    return row


#: the paths, from the fastest to the slowest (a release's row takes its slowest solve's)
_ORDER = ("arrowhead IPM", "CLARABEL (lifted copies)", "CLARABEL")


def _released(problem, lam: float, seed: int) -> list:
    """The certified solves behind a ``DoubleOutputPerturbation(C=1)`` release at epsilon =
    1 (one per stage that ran: the second is skipped where the first's certificate covers
    it), each with its target. A release shows no solver statistics (they depend on the
    data), so the solves are caught by wrapping dpcvx's internal ladder for the duration of
    the call."""
    import dpcvx.certification.solve as ladder

    caught: list = []
    inner = ladder._certified_solve

    def wrapped(*args, **kwargs):
        out = inner(*args, **kwargs)
        caught.append((out, kwargs.get("accuracy")))
        return out

    ladder._certified_solve = wrapped
    try:
        mech = dpcvx.DoubleOutputPerturbation(C=1.0, regularization=lam)
        problem.solve_private(mech, epsilon=1.0, rng=seed)
    finally:
        ladder._certified_solve = inner
    return caught


def _label(accuracy: float | None) -> str:
    return "release" if accuracy is None else f"{accuracy:.0e}"


def _report(rows: list[dict]) -> None:
    paths = sorted({r["path"] for r in rows})
    print(f"{'accuracy':>9} {'domain':>6} {'cases':>5} {'seconds':>8}  " + "  ".join(paths))
    order = sorted({r["accuracy"] for r in rows}, key=lambda a: -1.0 if a is None else -a)
    for acc in order:
        for kind in ("ball", "box", "all"):
            part = [
                r for r in rows if r["accuracy"] == acc and kind in ("all", r["domain"].split()[0])
            ]
            if not part:
                continue
            cells = []
            for p in paths:
                hit = [r["seconds"] for r in part if r["path"] == p]
                cells.append(f"{len(hit)} ({sum(hit):.1f} s)")
            print(
                f"{_label(acc):>9} {kind:>6} {len(part):>5} "
                f"{sum(r['seconds'] for r in part):>8.1f}  " + "  ".join(cells)
            )


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="0:300", help="a range start:stop of case numbers")
    parser.add_argument(
        "--accuracy",
        default="6e-8,3e-10",
        help="comma-separated certified targets; 'release': a DoubleOutputPerturbation(C=1) "
        "release at epsilon = 1 instead, at the target the mechanism sets",
    )
    parser.add_argument("--smoke", action="store_true", help="six small cases at 6e-8 (CI)")
    parser.add_argument("--output", default=None, help="the JSON file (default: results/)")
    args = parser.parse_args(argv)
    lo, hi = (int(v) for v in args.cases.split(":"))
    cases = list(SMOKE) if args.smoke else list(range(lo, hi))
    targets = (
        [6e-8]
        if args.smoke
        else [None if v == "release" else float(v) for v in args.accuracy.split(",")]
    )
    rows = []
    for acc in targets:
        for i in cases:
            row = dict(run(i, acc), accuracy=acc)
            rows.append(row)
            print(
                f"case {i:>3} {row['loss']:>8} {row['domain']:>8} n={row['n']:<5} "
                f"acc={_label(acc)} {row['path']:<28} {row['seconds']:6.2f} s",
                flush=True,
            )
    _report(rows)
    from pathlib import Path

    from _common import results_dir, write_json

    out = Path(args.output) if args.output else results_dir() / "bench_rounds.json"
    write_json({"cases": cases, "accuracies": targets, "rows": rows}, out)
    return rows


if __name__ == "__main__":
    main()
