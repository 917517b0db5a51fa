"""A ridge term written into the loss, released at the speed of the same ridge as regularization.

``cp.logistic(-y x^T w) + (c/2) cp.sum_squares(w)`` with ``regularization=lam`` and
``cp.logistic(-y x^T w)`` with ``regularization=lam + c`` are one objective. The quadratic reads
no data, so an output perturbation release enforces its Lipschitz claim on the logistic term
only and adds the quadratic to the solve as written (``lipschitz.public_quadratic``). This
times, side by side in one run, the release of each spelling (``OutputPerturbation(lipschitz=C,
regularization=lam)``, the claim enforced, with ``strong_convexity=c`` for the spelling in the
loss so that both plans are the same: noise and accuracy target; one example in fifty has a row
five times longer, so the extension is active) and prints the ratio; with ``--before`` it also
times the release with the fold switched off (the claim enforced on the loss minus its
quadratic with a per-example linear term, the conic joint program), as dpcvx released before
2026-11-29.

Data: Gaussian features scaled to rows of norm about one (seeded), signs from a random linear
model with noise, residuals for the Huber loss. Medians of ``--repeat`` releases, each on a
freshly built problem, the spellings alternated.

    python benchmarks/bench_public_quadratic.py [--n 100000] [--d 20] [--repeat 3] [--before]
    python benchmarks/bench_public_quadratic.py --smoke     # CI: n = 2000, one repeat
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

LAM, RIDGE, C = 0.01, 0.02, 1.0


def make_data(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    X[::50] *= 5.0
    beta = rng.normal(size=d)
    signs = np.where(X @ beta + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, signs, 0.3 * X @ beta + 0.3 * rng.normal(size=n)


def _loss(name: str, w, x, y):
    if name == "logistic":
        return cp.logistic(-cp.multiply(y, x @ w)), "signs"
    if name == "huber":
        return cp.huber(x @ w - y), "residuals"
    return cp.pos(1 - cp.multiply(y, x @ w)), "signs"  # hinge


def _release(name: str, X, signs, residuals, in_loss: bool, fold: bool = True) -> float:
    d = X.shape[1]
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    loss, kind = _loss(name, w, x, y)
    lam = LAM
    if in_loss:
        loss = loss + (RIDGE / 2) * cp.sum_squares(w)
    else:
        lam = LAM + RIDGE
    labels = signs if kind == "signs" else residuals
    problem = dpcvx.Problem(loss, w, {x: X, y: labels}, [cp.norm(w) <= 1.0])
    # the quadratic's modulus claimed as strong convexity: the same plan (noise, target) as
    # the regularization spelling's
    mu = RIDGE if in_loss else 0.0
    mech = dpcvx.OutputPerturbation(lipschitz=C, regularization=lam, strong_convexity=mu)
    start = time.perf_counter()
    off = mock.patch.object(dpcvx.Problem, "public_quadratic_removed", lambda self: None)
    with warnings.catch_warnings(), off if not fold else contextlib.nullcontext():
        warnings.simplefilter("ignore")
        problem.solve_private(mech, epsilon=1.0, rng=0)
    return time.perf_counter() - start


def run(n: int, d: int, repeat: int, losses: list[str], before: bool) -> list[dict]:
    X, signs, residuals = make_data(n, d)
    rows = []
    _release(losses[0], X[:500], signs[:500], residuals[:500], True)  # imports, caches: untimed
    for name in losses:
        cells = [("regularization", False, True), ("in the loss", True, True)]
        if before:
            cells.append(("in the loss, not folded", True, False))
        times: dict[str, list[float]] = {label: [] for label, _, _ in cells}
        for _ in range(repeat):
            for label, in_loss, fold in cells:
                times[label].append(_release(name, X, signs, residuals, in_loss, fold))
        base = statistics.median(times["regularization"])
        for label, _, _ in cells:
            med = statistics.median(times[label])
            rows.append({"loss": name, "ridge": label, "seconds": med, "ratio": med / base})
    return rows


def report(rows: list[dict]) -> str:
    lines = [f"{'loss':10s} {'ridge':26s} {'seconds':>9s} {'ratio':>8s}"]
    for row in rows:
        lines.append(
            f"{row['loss']:10s} {row['ridge']:26s} {row['seconds']:9.3f} {row['ratio']:8.2f}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_size_arguments(parser)
    parser.add_argument("--losses", default="logistic,huber,hinge")
    parser.add_argument("--before", action="store_true", help="also time the unfolded release")
    args = parser.parse_args()
    n, repeat = sizes(args)
    rows = run(n, args.d, repeat, args.losses.split(","), args.before)
    print(f"n = {n}, d = {args.d}, lam = {LAM}, ridge {RIDGE}, C = {C}; medians of {repeat}")
    print(report(rows))
    save_rows(args, "bench_public_quadratic", n, repeat, rows)


if __name__ == "__main__":
    main()
