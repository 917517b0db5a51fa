"""Penalties written into the loss under an enforced Lipschitz claim: output perturbation
releases next to the plain certified solve of the same objective, measured side by side.

``cp.logistic(-y x^T w) + 0.01 cp.norm1(w)`` is one example's loss; the penalty reads no data,
so every solve on the Lipschitz extension keeps it exact, once, and extends only the terms
that read data (the folded extension, ``certification.solve.folded_terms``). This times, per
loss, the release ``OutputPerturbation(lipschitz=C, regularization=lam)`` (the claim enforced)
on rows of norm at most one, where the data terms are C-Lipschitz, and on its neighbour with
one row three times longer (that example extended), next to ``problem.solve`` of the same
objective (no privacy, the yardstick). ``--before`` also times both releases with the fold
switched off (the extension of each example's whole loss: the penalty's slope counts toward
the claim, so every example is extended through the conic program), as dpcvx released before
2026-11-29. The ``extended`` columns count the examples each release extends.

Losses (``lam = 1e-2``, ``C = 1``, the unit ball): ``logistic + l1`` (``0.01 ||w||_1``),
``logistic + group`` (``0.02 (||w_A|| + ||w_B||)``, the halves), ``hinge + l1``, ``absolute +
l1`` (residual labels), ``logistic + elastic`` (``0.01 ||w||_1 + 0.01 ||w||^2``). Medians of
``--repeat`` runs, each on a freshly built problem.

    python benchmarks/bench_folded.py [--n 10000] [--d 20] [--repeat 3] [--before]
        [--losses logistic+l1,...]
    python benchmarks/bench_folded.py --smoke     # CI: n = 2000, one repeat
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
import warnings
from unittest import mock

import cvxpy as cp
import numpy as np
from _common import add_size_arguments, save_rows, sizes

import dpcvx
import dpcvx.certification.solve as solve_module
import dpcvx.pipeline as pipeline_module
import dpcvx.problem as problem_module
from dpcvx.certification.lipschitz import lipschitz_bounds

LAM, C = 0.01, 1.0
LOSSES = ("logistic+l1", "logistic+group", "hinge+l1", "absolute+l1", "logistic+elastic")


def make_data(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    beta = rng.normal(size=d)
    signs = np.where(X @ beta + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, signs, 0.3 * X @ beta + 0.3 * rng.normal(size=n)


def _problem(name: str, X, signs, residuals) -> dpcvx.Problem:
    d = X.shape[1]
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    data, penalty = name.split("+")
    labels = residuals if data == "absolute" else signs
    loss = {
        "logistic": lambda: cp.logistic(-cp.multiply(y, x @ w)),
        "hinge": lambda: cp.pos(1 - cp.multiply(y, x @ w)),
        "absolute": lambda: cp.abs(x @ w - y),
    }[data]()
    half = d // 2
    loss = (
        loss
        + {
            "l1": lambda: 0.01 * cp.norm1(w),
            "group": lambda: 0.02 * (cp.norm(w[:half]) + cp.norm(w[half:])),
            "elastic": lambda: 0.01 * cp.norm1(w) + 0.01 * cp.sum_squares(w),
        }[penalty]()
    )
    return dpcvx.Problem(loss, w, {x: X, y: labels}, [cp.norm(w) <= 1.0])


def _unfolded():
    """The fold switched off: every solve extends each example's whole loss."""
    none = lambda decl, extension: frozenset()  # noqa: E731
    stack = contextlib.ExitStack()
    for module in (solve_module, pipeline_module, problem_module):
        stack.enter_context(mock.patch.object(module, "folded_terms", none))
    return stack


def _extended(problem: dpcvx.Problem, fold: bool) -> int:
    """How many examples the release extends: those whose terms that read data (with
    ``fold``; else the whole loss) dpcvx cannot certify C-Lipschitz on the domain."""
    decl = problem.declaration
    shared = decl.shared_terms if fold else frozenset()
    if shared:
        decl = decl.with_terms(frozenset(range(len(decl.terms))) - shared)
    return int(np.sum(~(lipschitz_bounds(decl) <= C * (1 + 1e-12))))


def _release(problem: dpcvx.Problem, fold: bool) -> float:
    mech = dpcvx.OutputPerturbation(lipschitz=C, regularization=LAM)
    start = time.perf_counter()
    with (
        warnings.catch_warnings(record=True),  # the claim's warnings: counted instead
        _unfolded() if not fold else contextlib.nullcontext(),
    ):
        warnings.simplefilter("ignore")
        problem.solve_private(mech, epsilon=1.0, rng=0)
    return time.perf_counter() - start


def run(n: int, d: int, repeat: int, losses: list[str], before: bool) -> list[dict]:
    X, signs, residuals = make_data(n, d)
    steep = X.copy()
    steep[0] *= 3.0
    warm = _problem(losses[0], X[:300], signs[:300], residuals[:300])
    _release(warm, True)  # imports and caches: untimed
    rows = []
    for name in losses:
        for label, rows_of in (("unit rows", X), ("one row x3", steep)):
            cells: dict[str, list[float]] = {"plain solve": [], "release": []}
            if before:
                cells["before"] = []
            for _ in range(repeat):
                start = time.perf_counter()
                _problem(name, rows_of, signs, residuals).solve(regularization=LAM, accuracy=1e-9)
                cells["plain solve"].append(time.perf_counter() - start)
                cells["release"].append(_release(_problem(name, rows_of, signs, residuals), True))
                if before:
                    problem = _problem(name, rows_of, signs, residuals)
                    cells["before"].append(_release(problem, False))
            problem = _problem(name, rows_of, signs, residuals)
            med = {key: statistics.median(v) for key, v in cells.items()}
            rows.append(
                {
                    "loss": name,
                    "data": label,
                    "plain_s": med["plain solve"],
                    "release_s": med["release"],
                    "ratio": med["release"] / med["plain solve"],
                    "extended": _extended(problem, True),
                    "before_s": med.get("before", float("nan")),
                    "before_extended": _extended(problem, False),
                }
            )
    return rows


def report(rows: list[dict]) -> str:
    lines = [
        f"{'loss':18s} {'data':11s} {'plain s':>8s} {'release s':>9s} {'ratio':>6s} "
        f"{'extended':>8s} {'before s':>9s} {'before ext':>10s}"
    ]
    for r in rows:
        lines.append(
            f"{r['loss']:18s} {r['data']:11s} {r['plain_s']:8.3f} {r['release_s']:9.3f} "
            f"{r['ratio']:6.1f} {r['extended']:8d} {r['before_s']:9.3f} "
            f"{r['before_extended']:10d}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_size_arguments(parser)
    parser.add_argument("--losses", default=",".join(LOSSES))
    parser.add_argument("--before", action="store_true", help="also time the unfolded release")
    args = parser.parse_args()
    n, repeat = sizes(args)
    rows = run(n, args.d, repeat, args.losses.split(","), args.before)
    print(f"n = {n}, d = {args.d}, lam = {LAM}, C = {C}; medians of {repeat}")
    print(report(rows))
    save_rows(args, "bench_folded", n, repeat, rows)


if __name__ == "__main__":
    main()
