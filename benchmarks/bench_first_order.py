"""How far dpcvx's certified first-order paths reach (paper 000, Algorithm 3 and Theorem D.4),
next to the interior-point certified solve of the same Lipschitz-extension ERM, in one run.

    python benchmarks/bench_first_order.py [--smoke] [--budget 30] [--n 10,100,1000]
                                           [--alpha 1e-1,1e-2,1e-3]

Problem (seeded): absolute loss ``|<x, w> - y|`` (polyhedral, so Prop D.6's oracle applies),
``d = 5``, unit l2 ball (``D = 2``), Student-t(5) features scaled by ``1/sqrt(d)``,
``y = <x, w_true> + 0.1 noise``; extension ``C = 1``, ``lam = 0.1``, ``w0 = 0``. Per cell
``(n, alpha)`` the certified gap target is ``alpha`` on all three paths:

- ``ipm``: :meth:`LipschitzExtension.solve` (one interior-point solve of the joint conic program
  plus dpcvx's certificate);
- ``alg3``: :class:`dpcvx.oracle.OracleProblem` with the same loss written by hand
  (value/subgradient), extension solve = Algorithm 3 on the joint program over ``W^(n+1)``
  (``D_K = D sqrt(n + 1)``); stopped after ``--budget`` seconds, when it reports the projected
  iterations ``9 D_K^2 (S_t / t) / alpha^2`` (its stopping rule at the current mean squared
  subgradient norm) and the projected seconds at the measured time per iteration;
- ``thmD4``: :func:`dpcvx.oracle.structured_solve`, ``T = ceil((4 D L / alpha)^2)`` iterations
  (public, ``L = C + lam``), each a certified conic evaluation of the ``n`` extensions; run in
  full when ``T`` times the measured seconds per iteration fits in the budget, otherwise
  projected.

Projected entries are prefixed with ``~``. Read the ratios, not the seconds (noisy machines).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence

import cvxpy as cp
import numpy as np

import dpcvx
from dpcvx.oracle import OracleProblem, structured_solve

D_DIM = 5
C = 1.0
LAM = 0.1
FULL_N = (10, 100, 1000)
FULL_ALPHA = (1e-1, 1e-2, 1e-3)
SMOKE_N = (10,)
SMOKE_ALPHA = (0.5,)


class _Stop(Exception):
    """Raised by a callback when the time budget is spent."""


def make_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_t(5, size=(n, D_DIM)) / math.sqrt(D_DIM)
    w_true = rng.normal(size=D_DIM)
    w_true /= 2 * np.linalg.norm(w_true)
    return X, X @ w_true + 0.1 * rng.normal(size=n)


def value(W, data):
    return np.abs(np.sum(data["x"] * W, axis=1) - data["y"])


def subgradient(W, data):
    r = np.sum(data["x"] * W, axis=1) - data["y"]
    return data["x"] * np.sign(r)[:, None]


def build(n: int, seed: int):
    X, Y = make_data(n, seed)
    w = cp.Variable(D_DIM)
    dom = dpcvx.domains.l2_ball(w, 1.0)
    x, y = cp.Parameter(D_DIM), cp.Parameter()
    problem = dpcvx.Problem(cp.abs(x @ w - y), w, {x: X, y: Y}, dom)
    oracle = OracleProblem(value, subgradient, {"x": X, "y": Y}, w, dom, max_iter=10**12)
    return problem, oracle


def run_ipm(problem, alpha: float) -> dict:
    t0 = time.perf_counter()
    sol = problem.lipschitz_extension(C).solve(regularization=LAM, accuracy=alpha)
    return {"seconds": time.perf_counter() - t0, "gap": sol.gap, "projected": False}


def run_alg3(oracle, alpha: float, budget: float) -> dict:
    state = {"t": 0, "S": 0.0}
    t0 = time.perf_counter()

    def callback(t, S):
        state["t"], state["S"] = t, S
        if time.perf_counter() - t0 > budget:
            raise _Stop

    try:
        sol = oracle.solve(
            LAM, center=np.zeros(D_DIM), accuracy=alpha, extension=C, callback=callback
        )
    except _Stop:
        elapsed = time.perf_counter() - t0
        t = state["t"]
        D_K = oracle.diameter * math.sqrt(oracle.n + 1)
        iters = math.ceil(9 * D_K**2 * (state["S"] / t) / alpha**2)
        return {
            "iterations": max(iters, t),
            "seconds": max(iters, t) * elapsed / t,
            "gap": None,
            "projected": True,
            "measured_iterations": t,
            "measured_seconds": elapsed,
        }
    return {
        "iterations": sol.solver_stats["iterations"],
        "seconds": time.perf_counter() - t0,
        "gap": sol.gap,
        "projected": False,
    }


def run_d4(problem, alpha: float, budget: float) -> dict:
    ext = problem.lipschitz_extension(C)
    L = C + LAM * problem.domain.radius  # w0 = 0 is the center of the unit ball
    T = math.ceil((4 * problem.diameter * L / alpha) ** 2)
    probe = {"t": 0}
    t0 = time.perf_counter()
    probe_budget = min(budget, 3.0)

    def callback(t, _sum_g2, _sum_B):
        probe["t"] = t
        if time.perf_counter() - t0 > probe_budget and t < T:
            raise _Stop

    try:
        sol = structured_solve(ext, LAM, None, alpha, max_iter=10**12, callback=callback)
        return {
            "iterations": T,
            "seconds": time.perf_counter() - t0,
            "gap": sol.gap,
            "projected": False,
        }
    except _Stop:
        per_iter = (time.perf_counter() - t0) / probe["t"]
    if T * per_iter > budget:
        return {"iterations": T, "seconds": T * per_iter, "gap": None, "projected": True}
    t0 = time.perf_counter()
    sol = structured_solve(ext, LAM, None, alpha, max_iter=10**12)
    return {
        "iterations": T,
        "seconds": time.perf_counter() - t0,
        "gap": sol.gap,
        "projected": False,
    }


def _fmt(v, kind: str, projected: bool = False) -> str:
    if v is None:
        return "-"
    mark = "~" if projected else ""
    if kind == "s":
        return f"{mark}{v:.3g}"
    if kind == "i":
        return f"{mark}{v:.3g}" if v >= 1e5 else f"{mark}{int(v)}"
    return f"{v:.2g}"


def format_table(rows: list[dict]) -> str:
    head = (
        f"{'n':>5} {'alpha':>6} | {'ipm_s':>7} {'ipm_gap':>8} | {'alg3_iter':>10} "
        f"{'alg3_s':>9} {'alg3_gap':>8} | {'D4_T':>9} {'D4_s':>9} {'D4_gap':>8} | "
        f"{'alg3/ipm':>9} {'D4/ipm':>9}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        a3, d4, ipm = r["alg3"], r["thmD4"], r["ipm"]
        lines.append(
            f"{r['n']:>5} {r['alpha']:>6.0e} | {_fmt(ipm['seconds'], 's'):>7} "
            f"{_fmt(ipm['gap'], 'g'):>8} | {_fmt(a3['iterations'], 'i', a3['projected']):>10} "
            f"{_fmt(a3['seconds'], 's', a3['projected']):>9} {_fmt(a3['gap'], 'g'):>8} | "
            f"{_fmt(d4['iterations'], 'i'):>9} {_fmt(d4['seconds'], 's', d4['projected']):>9} "
            f"{_fmt(d4['gap'], 'g'):>8} | "
            f"{_fmt(a3['seconds'] / ipm['seconds'], 's', a3['projected']):>9} "
            f"{_fmt(d4['seconds'] / ipm['seconds'], 's', d4['projected']):>9}"
        )
    return "\n".join(lines)


def run(ns: Sequence[int], alphas: Sequence[float], budget: float, seed: int) -> list[dict]:
    rows = []
    for n in ns:
        problem, oracle = build(n, seed)
        run_ipm(problem, max(alphas))  # warm-up: compile the extension's template once
        previous, previous_alpha = None, None
        for alpha in sorted(alphas, reverse=True):
            row = {"n": n, "alpha": alpha, "ipm": run_ipm(problem, alpha)}
            if previous is not None and previous["projected"]:
                # the same trajectory (exact projections onto W, steps D/sqrt(S_t) free of
                # alpha): only the stop moves, about as 1/alpha^2
                scale = (previous_alpha / alpha) ** 2
                row["alg3"] = dict(
                    previous,
                    iterations=math.ceil(previous["iterations"] * scale),
                    seconds=previous["seconds"] * scale,
                )
            else:
                row["alg3"] = run_alg3(oracle, alpha, budget)
            previous, previous_alpha = row["alg3"], alpha
            row["thmD4"] = run_d4(problem, alpha, budget)
            rows.append(row)
            print(format_table([row]).splitlines()[-1], flush=True)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="n = 10, alpha = 0.5 (a few seconds)")
    p.add_argument("--n", default=None, help="comma-separated sample sizes")
    p.add_argument("--alpha", default=None, help="comma-separated accuracy targets")
    p.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds per first-order run before projecting (default 30; 20 smoke)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the rows as JSON to this path")
    a = p.parse_args(argv)
    ns = [int(float(v)) for v in a.n.split(",")] if a.n else (SMOKE_N if a.smoke else FULL_N)
    alphas = (
        [float(v) for v in a.alpha.split(",")]
        if a.alpha
        else (SMOKE_ALPHA if a.smoke else FULL_ALPHA)
    )
    budget = a.budget if a.budget is not None else (20.0 if a.smoke else 30.0)
    print(
        f"absolute loss, d = {D_DIM}, unit l2 ball, C = {C}, lam = {LAM}; budget {budget} s "
        "per first-order run; ~ = projected"
    )
    rows = run(ns, alphas, budget, a.seed)
    print()
    print(format_table(rows))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main())
