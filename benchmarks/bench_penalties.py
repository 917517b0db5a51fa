"""Penalties written into the loss (L1, elastic net, a ridge, a group lasso, a sup norm, a
quadratic form), certified by dpcvx next to
scikit-learn and plain CVXPY on the same objective, measured side by side in one run.

A Problem's loss is one example's, so a user who wants an L1 penalty writes it there:
``cp.logistic(-y x.w) + a * cp.norm1(w)``. Every example then holds the same penalty; dpcvx's
models hold it once (``Declaration.shared_terms``). ``--before`` also times the solve with
every example holding its own copy (as dpcvx did before 2026-11-29; the 1-norm is read as a
sum of absolute values either way), and for the penalties no model holds (the last three
below) the solve without the rung that takes them, ``proximal Newton + penalty program``
(``dpcvx.certification.penalized``; before 2026-11-29 they took the conic program).

Objective (seeded data, Gaussian features of norm about one, an l2 ball of radius 100,
inactive): ``(1/n) sum_i f(w; z_i) + (lam/2) ||w||^2`` with ``lam = 1e-2`` and, per loss:

- ``logistic + L1``: ``log(1 + exp(-y x.w)) + a ||w||_1`` (``a = 1e-2``), against
  ``LogisticRegression(penalty="elasticnet", solver="saga", l1_ratio=a / (a + lam),
  C=1 / (n (a + lam)), tol=1e-8)``;
- ``squared + L1``: ``0.5 (x.w - y)^2 + a ||w||_1``, against ``ElasticNet(alpha=a + lam,
  l1_ratio=a / (a + lam), tol=1e-10)`` (coordinate descent; its objective is this one);
- ``hinge + L1``: ``max(0, 1 - y x.w) + a ||w||_1``: no scikit-learn estimator has it
  (``LinearSVC``'s L1 penalty takes the squared hinge only); plain CVXPY only;
- ``logistic + ridge``: ``log(1 + exp(-y x.w)) + (c/2) ||w||^2`` written in the loss
  (``c = 2e-2``), against ``LogisticRegression(C=1 / (n (lam + c)), tol=1e-8)`` (lbfgs);
- ``logistic + group``: ``log(1 + exp(-y x.w)) + g (||w_A||_2 + ||w_B||_2)``, ``A`` and
  ``B`` the halves of the coordinates (``g = 2e-2``): no scikit-learn estimator has it;
- ``squared + linf``: ``0.5 (x.w - y)^2 + a ||w||_inf``: none either;
- ``logistic + quad_form``: ``log(1 + exp(-y x.w)) + a w^T P w`` with ``P`` the tridiagonal
  second-difference matrix (a smoothness penalty on neighbouring coefficients): none either;
- ``hinge + group``: ``max(0, 1 - y x.w) + g (||w_A||_2 + ||w_B||_2)``: each norm is a
  second-order cone of the arrowhead method (``dpcvx.certification.penalty_cones``);
  ``--before``: a copy of the penalty per example, which took the conic program (as dpcvx
  did before 2026-11-29). Plain CVXPY only.

Plain CVXPY solves the whole-data expression with Clarabel (default tolerances, compile
included) up to ``--cvxpy-max-n`` examples. dpcvx certifies every solve to ``--accuracy``;
the reference tools' points are not certified: the ``excess`` column is each one's objective
less dpcvx's certified lower bound (its suboptimality, at least). Medians of ``--repeat`` runs
after one warm-up, each on a freshly built problem; read the ratios.

    python benchmarks/bench_penalties.py [--n 100000] [--d 20] [--repeat 3] [--before]
        [--losses logistic+l1,...,logistic+quad_form] [--cvxpy-max-n 10000]
    python benchmarks/bench_penalties.py --smoke     # CI: n = 2000, one repeat
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
import dpcvx.modeling.declaration as declaration_module

LAM, L1, RIDGE, GROUP, RADIUS = 1e-2, 1e-2, 2e-2, 2e-2, 100.0
#: the penalties the rung for penalties no model holds takes (``--before``: without it)
PENALIZED = ("logistic+group", "squared+linf", "logistic+quad_form")
LOSSES = ("logistic+l1", "squared+l1", "hinge+l1", "logistic+ridge", *PENALIZED, "hinge+group")


def second_difference(d: int) -> np.ndarray:
    """The tridiagonal ``D^T D`` of the first differences of ``d`` coefficients."""
    D = np.diff(np.eye(d), axis=0)
    return D.T @ D


def make_data(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    beta = rng.normal(size=d) * (rng.random(d) < 0.5)  # half the coefficients zero
    signs = np.where(X @ beta + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, signs, X @ beta + 0.3 * rng.normal(size=n)


def _labels(name: str, signs, values):
    return values if name.startswith("squared") else signs


def _example_loss(name: str, w, z, y):
    """One example's loss, the penalty written in it (z = x.w)."""
    if name == "logistic+l1":
        return cp.logistic(-cp.multiply(y, z)) + L1 * cp.norm1(w)
    if name == "squared+l1":
        return 0.5 * cp.square(z - y) + L1 * cp.norm1(w)
    if name == "hinge+l1":
        return cp.pos(1 - cp.multiply(y, z)) + L1 * cp.norm1(w)
    if name == "logistic+ridge":
        return cp.logistic(-cp.multiply(y, z)) + (RIDGE / 2) * cp.sum_squares(w)
    return _data_term(name, z, y) + _penalty(name, w)


def _data_term(name: str, z, y):
    if name.startswith("logistic"):
        return cp.logistic(-cp.multiply(y, z))
    if name.startswith("squared"):
        return 0.5 * cp.square(z - y)
    return cp.pos(1 - cp.multiply(y, z))


def _penalty(name: str, w):
    """The penalty of ``name`` on the variable ``w`` (a CVXPY expression)."""
    if name.endswith("ridge"):
        return RIDGE / 2 * cp.sum_squares(w)
    if name.endswith("group"):
        half = w.size // 2
        return GROUP * (cp.norm(w[:half], 2) + cp.norm(w[half:], 2))
    if name.endswith("linf"):
        return L1 * cp.norm_inf(w)
    if name.endswith("quad_form"):
        return L1 * cp.quad_form(w, second_difference(w.size))
    return L1 * cp.norm1(w)


def objective(name: str, w: np.ndarray, X, labels) -> float:
    """The mean loss with its penalty plus ``(lam/2) ||w||^2``, in numpy."""
    z = X @ w
    if name.startswith("logistic"):
        data = float(np.mean(np.logaddexp(0.0, -labels * z)))
    elif name.startswith("squared"):
        data = float(np.mean(0.5 * (z - labels) ** 2))
    else:
        data = float(np.mean(np.maximum(0.0, 1.0 - labels * z)))
    half = w.size // 2
    penalty = {
        "ridge": RIDGE / 2 * float(w @ w),
        "group": GROUP * float(np.linalg.norm(w[:half]) + np.linalg.norm(w[half:])),
        "linf": L1 * float(np.abs(w).max()),
        "quad_form": L1 * float(w @ second_difference(w.size) @ w),
    }.get(name.split("+")[1], L1 * float(np.abs(w).sum()))
    return data + penalty + LAM / 2 * float(w @ w)


def _dpcvx(name: str, X, labels, accuracy: float, before: bool = False):
    """``(seconds, solution)``; ``before``: a copy of the penalty per example, or without the
    penalty rung (:data:`PENALIZED`)."""
    d = X.shape[1]
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    copies = before and name not in PENALIZED
    off = mock.patch.object(declaration_module, "shared_terms", lambda terms: frozenset())
    with off if copies else contextlib.nullcontext():
        problem = dpcvx.Problem(
            _example_loss(name, w, x @ w, y), w, {x: X, y: labels}, [cp.norm(w) <= RADIUS]
        )
    rung = mock.patch.object(solve_module, "penalized_rung_applies", lambda *a, **k: False)
    with rung if before and not copies else contextlib.nullcontext():
        start = time.perf_counter()
        sol = problem.solve(regularization=LAM, accuracy=accuracy)
        return time.perf_counter() - start, sol


def _sklearn(name: str, X, labels):
    """``(seconds, w)`` of scikit-learn's estimator on the same objective, or None."""
    import sklearn
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import ElasticNet, LogisticRegression

    n = X.shape[0]
    if name == "logistic+l1":
        # scikit-learn 1.8 reads l1_ratio alone and deprecates ``penalty``; before, it is needed
        old = tuple(int(p) for p in sklearn.__version__.split(".")[:2]) < (1, 8)
        est = LogisticRegression(
            **({"penalty": "elasticnet"} if old else {}),
            solver="saga",
            l1_ratio=L1 / (L1 + LAM),
            C=1.0 / (n * (L1 + LAM)),
            fit_intercept=False,
            tol=1e-8,
            max_iter=10_000,
        )
    elif name == "squared+l1":
        est = ElasticNet(alpha=L1 + LAM, l1_ratio=L1 / (L1 + LAM), fit_intercept=False, tol=1e-10)
    elif name == "logistic+ridge":
        est = LogisticRegression(C=1.0 / (n * (LAM + RIDGE)), fit_intercept=False, tol=1e-8)
    else:
        return None
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, labels)
    return time.perf_counter() - start, np.ravel(est.coef_)


def _cvxpy(name: str, X, labels):
    n, d = X.shape
    W = cp.Variable(d)
    z = X @ W
    data = cp.sum(_data_term(name, z, labels)) / n
    penalty = _penalty(name, W)
    prob = cp.Problem(
        cp.Minimize(data + penalty + LAM / 2 * cp.sum_squares(W)), [cp.norm(W) <= RADIUS]
    )
    start = time.perf_counter()
    prob.solve(solver=cp.CLARABEL)
    return time.perf_counter() - start, np.asarray(W.value, float)


def run(
    n: int, d: int, repeat: int, losses: list[str], accuracy: float, before: bool, cvxpy_max: int
) -> list[dict]:
    X, signs, values = make_data(n, d)
    rows = []
    for name in losses:
        labels = _labels(name, signs, values)
        _dpcvx(name, X[:500], labels[:500], accuracy)  # imports and caches: untimed
        cells: dict[str, list[float]] = {"dpcvx": []}
        excess: dict[str, float] = {}
        path, gap, lower = "", 0.0, 0.0
        for _ in range(repeat):
            seconds, sol = _dpcvx(name, X, labels, accuracy)
            cells["dpcvx"].append(seconds)
            path, gap, lower = str(sol.solver_stats.get("solver")), sol.gap, sol.lower
            if before:
                cells.setdefault("before", []).append(
                    _dpcvx(name, X, labels, accuracy, before=True)[0]
                )
            ref = _sklearn(name, X, labels)
            if ref is not None:
                cells.setdefault("sklearn", []).append(ref[0])
                excess["sklearn"] = objective(name, ref[1], X, labels) - lower
            if n <= cvxpy_max:
                seconds, w_cvx = _cvxpy(name, X, labels)
                cells.setdefault("cvxpy", []).append(seconds)
                excess["cvxpy"] = objective(name, w_cvx, X, labels) - lower
        med = {k: statistics.median(v) for k, v in cells.items()}
        rows.append(
            {
                "loss": name,
                "dpcvx_s": med["dpcvx"],
                "before_s": med.get("before"),
                "sklearn_s": med.get("sklearn"),
                "cvxpy_s": med.get("cvxpy"),
                "sklearn_excess": excess.get("sklearn"),
                "cvxpy_excess": excess.get("cvxpy"),
                "gap": gap,
                "path": path,
            }
        )
    return rows


def _cell(value, fmt: str) -> str:
    width = int(fmt.split(".")[0])
    return "-".rjust(width) if value is None else format(value, fmt)


def report(rows: list[dict]) -> str:
    head = (
        f"{'loss':18s} {'dpcvx_s':>8s} {'before_s':>8s} {'sklearn_s':>9s} {'ratio':>6s} "
        f"{'cvxpy_s':>8s} {'ratio':>6s} {'sk_excess':>9s} {'cvx_excess':>10s} {'gap':>8s}  path"
    )
    lines = [head]
    for r in rows:
        sk = None if r["sklearn_s"] is None else r["dpcvx_s"] / r["sklearn_s"]
        cv = None if r["cvxpy_s"] is None else r["dpcvx_s"] / r["cvxpy_s"]
        lines.append(
            f"{r['loss']:18s} {r['dpcvx_s']:8.3f} {_cell(r['before_s'], '8.3f')} "
            f"{_cell(r['sklearn_s'], '9.3f')} {_cell(sk, '6.2f')} {_cell(r['cvxpy_s'], '8.3f')} "
            f"{_cell(cv, '6.2f')} {_cell(r['sklearn_excess'], '9.1e')} "
            f"{_cell(r['cvxpy_excess'], '10.1e')} {r['gap']:8.1e}  {r['path']}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_size_arguments(parser)
    parser.add_argument("--losses", default=",".join(LOSSES))
    parser.add_argument("--accuracy", type=float, default=1e-8)
    parser.add_argument("--before", action="store_true", help="also time a copy per example")
    parser.add_argument("--cvxpy-max-n", type=int, default=10_000)
    args = parser.parse_args()
    n, repeat = sizes(args)
    losses = args.losses.split(",")
    rows = run(n, args.d, repeat, losses, args.accuracy, args.before, args.cvxpy_max_n)
    print(
        f"n = {n}, d = {args.d}, lam = {LAM}, L1 {L1}, ridge {RIDGE}, accuracy {args.accuracy}; "
        f"medians of {repeat}; ratio = dpcvx / reference"
    )
    print(report(rows))
    save_rows(args, "bench_penalties", n, repeat, rows)


if __name__ == "__main__":
    main()
