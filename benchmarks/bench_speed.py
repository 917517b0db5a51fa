"""dpcvx's certified solves next to the fastest non-private tools on the same objective,
measured side by side in one run.

    python benchmarks/bench_speed.py [--smoke] [--losses logistic,huber,...] [--n 10000,100000]
                                     [--d 20,100] [--repeats 3] [--accuracy 1e-9]
                                     [--cvxpy-max-n 10000] [--out DIR]
    python benchmarks/bench_speed.py --ldop [--n 10000,100000] [--d 20] [--repeats 3]
                                     [--losses hinge]
    python benchmarks/bench_speed.py --release [--n 1000,10000,100000] [--d 20] [--repeats 5]
                                     [--losses logistic,huber,hinge,absolute]

Objective (seeded data, ``lam = 1e-2``, ``w0 = 0``, an l2 ball of radius 100, inactive):
``(1/n) sum_i f(w; z_i) + (lam/2) ||w||^2``, no intercept. References, each on that objective:

- logistic ``log(1 + exp(-y x.w))``: ``LogisticRegression(C=1/(lam n), tol=1e-8)`` (lbfgs);
- squared ``(x.w - y)^2``: ``Ridge(alpha=lam n / 2)`` (Cholesky);
- huber ``huber(x.w - y, 1)`` (CVXPY's: ``v^2`` inside, ``2|v| - 1`` outside): scipy's
  L-BFGS-B on vectorized numpy values and gradients (scikit-learn's ``HuberRegressor`` also
  fits a scale, a different objective);
- hinge ``max(0, 1 - y x.w)``: ``LinearSVC(C=1/(lam n), loss="hinge", tol=1e-8)``;
- squared hinge ``max(0, 1 - y x.w)^2``: ``LinearSVC(C=1/(lam n), loss="squared_hinge",
  tol=1e-8)`` (scikit-learn's default loss);
- absolute ``|x.w - y|`` and pinball (tau = 0.3): ``QuantileRegressor(solver="highs")`` with
  ``alpha = lam``, whose penalty is ``lam ||w||_1``: a close, *not identical* objective (no
  scikit-learn estimator has an l2-penalized quantile loss), shown because the issue names it;
- every loss: plain CVXPY (the whole-data expression, Clarabel, default tolerances, compile
  included), up to ``--cvxpy-max-n`` examples.

dpcvx certifies every solve to ``--accuracy`` (its own certificate: the reference tools'
points are not certified); its path is in the ``path`` column. Medians of ``--repeats`` runs
after one warm-up (dpcvx's warm-up compiles its template once); read the ratios, not the
seconds. A reference slower than ``SLOW`` seconds is timed by one run.

``--ldop``: LDOP end to end vs one plain solve instead. One certified plain solve
(``problem.solve(regularization=1e-2)``) and one whole
``LocalizedDoubleOutputPerturbation(k=4, moment=G_4, second_moment=G_2)`` release at
epsilon = 1 (seed = repeat index), alternating in one process, on the data of
``bench_extension.py`` (Student-t(5) features with exact public moments, the unit ball; hinge
or absolute loss); medians of ``--repeats`` and the median of the paired ratios.

``--release``: a private release end to end vs one plain solve. On the main benchmark's data
(rows scaled into the unit ball, so every loss here is 2-Lipschitz), the unit ball, ``lam =
0.1``: one certified plain solve (``problem.solve(regularization=0.1)``) and one
``OutputPerturbation(lipschitz=2, regularization=0.1)`` release at epsilon = 1, each on a
freshly built problem (what a user's first release pays: the checks, the planning, the
extension's template, the exact noise), alternating in one process after one warm-up of
each; medians of ``--repeats``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import cvxpy as cp
import numpy as np
from _common import results_dir, write_json

import dpcvx

LAM = 1e-2
TAU = 0.3
#: a reference whose first run takes longer than this (seconds) is timed by that run alone
SLOW = 10.0
LOSSES = ("logistic", "squared", "huber", "hinge", "squared_hinge", "absolute", "pinball")
#: losses with smooth and piecewise-linear terms (``--losses``; not in the default run): no
#: scikit-learn estimator has their objective, so the reference is plain CVXPY + Clarabel
MIXED_LOSSES = ("absolute_plus_squared", "hinge_plus_squared_margin", "logistic_plus_abs")


def _median_seconds(fn, repeats: int):
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), out


def _huber_lbfgs(X, R):
    from scipy.optimize import minimize

    n, d = X.shape

    def fun(w):
        v = X @ w - R
        a = np.abs(v)
        inside = a <= 1.0
        value = np.where(inside, v * v, 2.0 * a - 1.0).mean() + LAM / 2 * w @ w
        grad = X.T @ np.clip(2.0 * v, -2.0, 2.0) / n + LAM * w
        return value, grad

    return minimize(fun, np.zeros(d), jac=True, method="L-BFGS-B", options={"gtol": 1e-10})


def _case(name, X, Y, R):
    """(per-example CVXPY loss builder, data, whole-data CVXPY loss, reference name, fit)."""
    from sklearn.linear_model import LogisticRegression, QuantileRegressor, Ridge
    from sklearn.svm import LinearSVC

    n, d = X.shape
    labels = name in (
        "logistic",
        "hinge",
        "squared_hinge",
        "hinge_plus_squared_margin",
        "logistic_plus_abs",
    )
    target = Y if labels else R

    def per_example(w, x, y):
        return {
            "logistic": cp.logistic(-y * (x @ w)),
            "squared": cp.square(x @ w - y),
            "huber": cp.huber(x @ w - y, 1.0),
            "hinge": cp.pos(1 - y * (x @ w)),
            "squared_hinge": cp.square(cp.pos(1 - y * (x @ w))),
            "absolute": cp.abs(x @ w - y),
            "pinball": cp.maximum(TAU * (y - x @ w), (TAU - 1) * (y - x @ w)),
            "absolute_plus_squared": cp.abs(x @ w - y) + cp.square(x @ w - y),
            "hinge_plus_squared_margin": cp.pos(1 - y * (x @ w)) + 0.1 * cp.square(x @ w),
            "logistic_plus_abs": cp.logistic(-y * (x @ w)) + 0.1 * cp.abs(x @ w),
        }[name]

    def whole(v):
        u = X @ v
        return {
            "logistic": cp.sum(cp.logistic(-cp.multiply(Y, u))),
            "squared": cp.sum_squares(u - R),
            "huber": cp.sum(cp.huber(u - R, 1.0)),
            "hinge": cp.sum(cp.pos(1 - cp.multiply(Y, u))),
            "squared_hinge": cp.sum_squares(cp.pos(1 - cp.multiply(Y, u))),
            "absolute": cp.norm1(u - R),
            "pinball": cp.sum(cp.maximum(TAU * (R - u), (TAU - 1) * (R - u))),
            "absolute_plus_squared": cp.norm1(u - R) + cp.sum_squares(u - R),
            "hinge_plus_squared_margin": cp.sum(cp.pos(1 - cp.multiply(Y, u)))
            + 0.1 * cp.sum_squares(u),
            "logistic_plus_abs": cp.sum(cp.logistic(-cp.multiply(Y, u))) + 0.1 * cp.norm1(u),
        }[name] / n

    def clarabel():
        v = cp.Variable(d)
        objective = cp.Minimize(whole(v) + LAM / 2 * cp.sum_squares(v))
        cp.Problem(objective, [cp.norm(v, 2) <= 100]).solve(solver=cp.CLARABEL)

    if name in MIXED_LOSSES:
        return per_example, target, whole, ("CVXPY + Clarabel", clarabel)

    reference = {
        "logistic": (
            "LogisticRegression",
            lambda: LogisticRegression(
                C=1.0 / (LAM * n), fit_intercept=False, tol=1e-8, max_iter=5000
            ).fit(X, (Y > 0).astype(int)),
        ),
        "squared": (
            "Ridge",
            lambda: Ridge(alpha=LAM * n / 2, fit_intercept=False).fit(X, R),
        ),
        "huber": ("scipy L-BFGS-B", lambda: _huber_lbfgs(X, R)),
        "hinge": (
            "LinearSVC",
            lambda: LinearSVC(
                C=1.0 / (LAM * n), loss="hinge", fit_intercept=False, tol=1e-8, max_iter=100000
            ).fit(X, Y),
        ),
        "squared_hinge": (
            "LinearSVC",
            lambda: LinearSVC(
                C=1.0 / (LAM * n),
                loss="squared_hinge",
                fit_intercept=False,
                tol=1e-8,
                max_iter=100000,
            ).fit(X, Y),
        ),
        "absolute": (
            "QuantileRegressor*",
            lambda: QuantileRegressor(
                quantile=0.5, alpha=LAM, fit_intercept=False, solver="highs"
            ).fit(X, R),
        ),
        "pinball": (
            "QuantileRegressor*",
            lambda: QuantileRegressor(
                quantile=TAU, alpha=LAM, fit_intercept=False, solver="highs"
            ).fit(X, R),
        ),
    }[name]
    return per_example, target, whole, reference


HEADER = (
    f"{'loss':25s} {'n':>7s} {'d':>4s} {'dpcvx s':>8s} {'reference':>19s} {'ref s':>7s} "
    f"{'ratio':>7s} {'cvxpy s':>8s} {'ratio':>7s} {'gap':>6s}  path"
)


def _print_row(r: dict) -> None:
    cv = (
        f"{r['cvxpy_seconds']:8.3f} {r['cvxpy_ratio']:6.2f}x"
        if r["cvxpy_seconds"] is not None
        else f"{'-':>8s} {'-':>7s}"
    )
    print(
        f"{r['loss']:25s} {r['n']:7d} {r['d']:4d} {r['dpcvx_seconds']:8.3f} "
        f"{r['reference']:>19s} {r['reference_seconds']:7.3f} {r['ratio']:6.2f}x {cv} "
        f"{r['gap']:6.0e}  {r['path']}",
        flush=True,
    )


def run(losses, ns, ds, repeats: int, accuracy: float, cvxpy_max_n: int, report=None) -> list[dict]:
    """Every cell, each reported (``report(row)``) as soon as it is measured."""
    rows = []
    for n in ns:
        for d in ds:
            rng = np.random.default_rng(0)
            X = rng.normal(size=(n, d))
            beta = rng.normal(size=d)
            Y = np.sign(X @ beta + 0.5 * rng.normal(size=n))
            R = 0.1 * X @ beta + 0.1 * rng.normal(size=n)
            for name in losses:
                per_example, target, whole, (ref_name, ref_fit) = _case(name, X, Y, R)
                w = cp.Variable(d)
                x = cp.Parameter(d)
                y = cp.Parameter()
                problem = dpcvx.Problem(
                    per_example(w, x, y), w, data={x: X, y: target}, domain=[cp.norm(w, 2) <= 100]
                )

                def solve(problem=problem, d=d):
                    return problem.solve(regularization=LAM, center=np.zeros(d), accuracy=accuracy)

                solve()  # warm-up: compile the template once
                t_dpcvx, sol = _median_seconds(solve, repeats)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # convergence chatter of the references
                    start = time.perf_counter()
                    ref_fit()
                    t_ref = time.perf_counter() - start
                    if t_ref < SLOW:  # a slow reference is timed once (its warm-up)
                        t_ref, _ = _median_seconds(ref_fit, repeats)
                t_cvxpy = None
                if n <= cvxpy_max_n:
                    v = cp.Variable(d)
                    plain = cp.Problem(
                        cp.Minimize(whole(v) + LAM / 2 * cp.sum_squares(v)), [cp.norm(v, 2) <= 100]
                    )
                    t_cvxpy, _ = _median_seconds(
                        lambda plain=plain: plain.solve(solver=cp.CLARABEL), repeats
                    )
                rows.append(
                    {
                        "loss": name,
                        "n": n,
                        "d": d,
                        "dpcvx_seconds": t_dpcvx,
                        "reference": ref_name,
                        "reference_seconds": t_ref,
                        "ratio": t_dpcvx / t_ref,
                        "cvxpy_seconds": t_cvxpy,
                        "cvxpy_ratio": None if t_cvxpy is None else t_dpcvx / t_cvxpy,
                        "gap": float(sol.gap),
                        "path": sol.solver_stats.get("solver"),
                    }
                )
                if report is not None:
                    report(rows[-1])
    return rows


def _ldop_problem(name: str, n: int, d: int):
    """bench_extension.py's data and ball, with the hinge or absolute loss."""
    import math

    from bench_extension import NU, moments

    rng = np.random.default_rng(0)
    X = rng.standard_t(NU, size=(n, d)) * math.sqrt(3.0 / (5.0 * d))
    Y = np.sign(X @ rng.normal(size=d) + 0.1 * rng.normal(size=n))
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    loss = cp.pos(1 - y * (x @ w)) if name == "hinge" else cp.abs(x @ w - y)
    return dpcvx.Problem(loss, w, {x: X, y: Y}, [cp.norm(w) <= 1.0]), moments(d)


def run_ldop(losses, ns, d: int, repeats: int, report=None) -> list[dict]:
    """LDOP end to end vs one plain solve, side by side (see the module docstring)."""
    rows = []
    for name in losses:
        if name not in ("hinge", "absolute"):
            raise ValueError(f"--ldop runs the hinge or absolute loss, not {name!r}")
        for n in ns:
            problem, (G2, G4) = _ldop_problem(name, n, d)
            mech = dpcvx.LocalizedDoubleOutputPerturbation(
                k=4, moment=G4, second_moment=G2, progress=False
            )
            problem.solve(regularization=LAM)  # warm-up: compile the template once
            plain, ldop = _paired(
                lambda problem=problem: problem,
                lambda problem, rep: problem.solve(regularization=LAM),
                lambda problem, rep, mech=mech: problem.solve_private(mech, epsilon=1.0, rng=rep),
                repeats,
            )
            row = _row(name, n, d, plain, ldop, "ldop_seconds")
            row["paired_ratio"] = float(np.median(np.divide(ldop, plain)))
            rows.append(row)
            if report is not None:
                report(row)
    return rows


def _paired(make, plain_fn, other_fn, repeats: int) -> tuple[list[float], list[float]]:
    """Seconds of ``plain_fn`` and ``other_fn`` alternated ``repeats`` times, each on the
    problem ``make()`` returns (a fresh one, or always the same)."""
    plain, other = [], []
    for rep in range(repeats):
        for fn, times in ((plain_fn, plain), (other_fn, other)):
            problem = make()
            start = time.perf_counter()
            fn(problem, rep)
            times.append(time.perf_counter() - start)
    return plain, other


def _row(name: str, n: int, d: int, plain: list, other: list, key: str) -> dict:
    return {
        "loss": name,
        "n": n,
        "d": d,
        "plain_seconds": float(np.median(plain)),
        key: float(np.median(other)),
        "ratio": float(np.median(other) / np.median(plain)),
    }


def _print_ldop(r: dict) -> None:
    print(
        f"LDOP end to end vs one plain solve: {r['loss']} n={r['n']} d={r['d']}: "
        f"plain {r['plain_seconds']:.3f} s, LDOP {r['ldop_seconds']:.3f} s, "
        f"ratio {r['ratio']:.2f}x (paired median {r['paired_ratio']:.2f}x)",
        flush=True,
    )


def _release_problem(name: str, n: int, d: int):
    """The main benchmark's kind of data, rows scaled into the unit ball, and the unit ball."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    beta = rng.normal(size=d)
    classify = name in ("logistic", "hinge")
    Y = np.sign(X @ beta + 0.3 * rng.normal(size=n)) if classify else X @ beta / 2
    if not classify:
        Y = np.clip(Y + 0.1 * rng.normal(size=n), -1.0, 1.0)
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    loss = {
        "logistic": lambda: cp.logistic(-y * (x @ w)),
        "huber": lambda: cp.huber(x @ w - y, 1.0),
        "hinge": lambda: cp.pos(1 - y * (x @ w)),
        "absolute": lambda: cp.abs(x @ w - y),
    }[name]()

    def make():
        return dpcvx.Problem(loss, w, {x: X, y: Y}, [cp.norm(w) <= 1.0])

    return make


def run_release(losses, ns, d: int, repeats: int, report=None) -> list[dict]:
    """A private release end to end vs one plain solve (see the module docstring)."""
    rows = []
    mech = dpcvx.OutputPerturbation(lipschitz=2.0, regularization=0.1)
    for name in losses:
        for n in ns:
            make = _release_problem(name, n, d)
            make().solve(regularization=0.1)  # warm-up of both
            make().solve_private(mech, epsilon=1.0, rng=0)
            plain, release = _paired(
                make,
                lambda problem, rep: problem.solve(regularization=0.1),
                lambda problem, rep: problem.solve_private(mech, epsilon=1.0, rng=rep),
                repeats,
            )
            row = _row(name, n, d, plain, release, "release_seconds")
            rows.append(row)
            if report is not None:
                report(row)
    return rows


def _print_release(r: dict) -> None:
    print(
        f"output perturbation end to end vs one plain solve: {r['loss']} n={r['n']} "
        f"d={r['d']}: plain {r['plain_seconds']:.4f} s, release {r['release_seconds']:.4f} s, "
        f"ratio {r['ratio']:.2f}x",
        flush=True,
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny run for CI")
    parser.add_argument("--losses", default=",".join(LOSSES))
    parser.add_argument("--n", default="10000,100000")
    parser.add_argument("--d", default="20,100")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--accuracy", type=float, default=1e-9)
    parser.add_argument("--cvxpy-max-n", type=int, default=10_000)
    parser.add_argument("--out", default=None, help="directory for bench_speed.json")
    parser.add_argument(
        "--ldop", action="store_true", help="LDOP end to end vs one plain solve (hinge default)"
    )
    parser.add_argument(
        "--release",
        action="store_true",
        help="an output perturbation release end to end vs one plain solve",
    )
    args = parser.parse_args(argv)
    if args.release:
        default = args.losses == ",".join(LOSSES)
        chosen = (
            ("logistic", "huber", "hinge", "absolute")
            if default
            else tuple(v for v in args.losses.split(",") if v)
        )
        unknown = set(chosen) - {"logistic", "huber", "hinge", "absolute"}
        if unknown:
            parser.error(f"--release runs logistic, huber, hinge, absolute, not {sorted(unknown)}")
        default_n = args.n == "10000,100000"
        ns = (
            (300,)
            if args.smoke
            else (1000, 10000, 100000)
            if default_n
            else tuple(int(float(v)) for v in args.n.split(","))
        )
        d = 5 if args.smoke else int(args.d.split(",")[0])
        repeats = 1 if args.smoke else max(1, args.repeats if args.repeats != 3 else 5)
        rows = run_release(chosen, ns, d, repeats, report=_print_release)
        out_dir = Path(args.out) if args.out else results_dir()
        write_json({"lambda": 0.1, "rows": rows}, out_dir / "bench_speed_release.json")
        return 0
    if args.ldop:
        default = args.losses == ",".join(LOSSES)
        chosen = ("hinge",) if default else tuple(v for v in args.losses.split(",") if v)
        ns = (1000,) if args.smoke else tuple(int(float(v)) for v in args.n.split(","))
        d = 5 if args.smoke else int(args.d.split(",")[0])
        repeats = 1 if args.smoke else max(1, args.repeats)
        rows = run_ldop(chosen, ns, d, repeats, report=_print_ldop)
        out_dir = Path(args.out) if args.out else results_dir()
        write_json({"lambda": LAM, "rows": rows}, out_dir / "bench_speed_ldop.json")
        return 0
    losses = tuple(v for v in args.losses.split(",") if v)
    unknown = set(losses) - set(LOSSES) - set(MIXED_LOSSES)
    if unknown:
        names = ", ".join(LOSSES + MIXED_LOSSES)
        parser.error(f"unknown losses {sorted(unknown)}; choose from {names}")
    if args.smoke:
        ns, ds, repeats = (300,), (3,), 1
    else:
        ns = tuple(int(v) for v in args.n.split(","))
        ds = tuple(int(v) for v in args.d.split(","))
        repeats = max(1, args.repeats)
    print(HEADER, flush=True)
    rows = run(losses, ns, ds, repeats, args.accuracy, args.cvxpy_max_n, report=_print_row)
    print("* QuantileRegressor penalizes lam ||w||_1: a close objective, not the same one.")
    out_dir = Path(args.out) if args.out else results_dir()
    write_json(
        {"lambda": LAM, "accuracy": args.accuracy, "rows": rows}, out_dir / "bench_speed.json"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
