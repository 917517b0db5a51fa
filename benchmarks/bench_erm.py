"""Certified dpcvx ERM vs plain CVXPY + Clarabel, measured side by side (DESIGN section 9).

For each cell (loss, n, d) of a grid this script times, in the same process and interleaved:

- **cvxpy**: the usual vectorized model, built and solved end to end::

      cp.Problem(cp.Minimize(cp.sum(loss(Y * (X @ W))) / n + lam / 2 * cp.sum_squares(W)),
                 [cp.norm(W, 2) <= R]).solve(solver=cp.CLARABEL)

- **dpcvx**: ``dpcvx.Problem(loss, w, data=..., domain=[cp.norm(w, 2) <= R])`` followed by
  ``problem.solve(regularization=lam)``, end to end (declaration + compile + stamp + solve +
  certify), with the split into construction and first solve, and a best-effort breakdown of
  the first solve into dpcvx's phases (compile, derived values, theta, stamp, solver, certify).

Each measurement is repeated ``--repeats`` times (the two sides alternate which goes first) and
the median is reported; these machines are noisy, so read the *ratios*, not the seconds. The
rows are printed as plain tables and written as JSON (``benchmarks/results/bench_erm.json``).

Run ``python benchmarks/bench_erm.py --help``; ``--smoke`` is the quick CI version. The module is
also importable: :func:`make_data`, :func:`time_cvxpy`, :func:`time_dpcvx`, :func:`run`.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import cvxpy as cp
import numpy as np
from _common import results_dir

import dpcvx

__all__ = [
    "Config",
    "make_data",
    "main",
    "run",
    "time_cvxpy",
    "time_dpcvx",
]

LOSSES = ("hinge", "logistic")
FULL_N = (1_000, 10_000, 100_000)
FULL_D = (20, 100)
SMOKE_N = (300, 1_000)
SMOKE_D = (5,)
#: relative objective disagreement above which a row is flagged
OBJ_RTOL = 1e-6
#: the targets of the issue
TARGET_RATIO = 1.5  # dpcvx_s / cvxpy_s at n = TARGET_RATIO_N
TARGET_RATIO_N = 10_000
TARGET_GROWTH = 4.5  # time(4n) / time(n)
TARGET_CERT_SHARE = 0.10  # certify_seconds / total
DEFAULT_OUTPUT = results_dir() / "bench_erm.json"
SMOKE_OUTPUT = DEFAULT_OUTPUT.with_name("bench_erm_smoke.json")


# --------------------------------------------------------------------------- data
def make_data(n: int, d: int, seed: int = 0, noise: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """A seeded synthetic binary classification set.

    Rows ``x_i ~ N(0, I_d / d)`` clipped to the unit ball (``||x_i|| <= 1``), labels
    ``y_i = sign(<w_true, x_i>)`` for a random unit ``w_true``, each flipped with probability
    ``noise`` (10% label noise by default). The same ``(seed, n, d)`` gives the same data, for
    both losses.
    """
    rng = np.random.default_rng([int(seed), int(n), int(d)])
    X = rng.normal(size=(n, d)) / math.sqrt(d)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    w_true = rng.normal(size=d)
    w_true /= np.linalg.norm(w_true)
    Y = np.where(X @ w_true >= 0, 1.0, -1.0)
    Y[rng.random(n) < noise] *= -1.0
    return X, Y


def objective(loss: str, X: np.ndarray, Y: np.ndarray, W: np.ndarray, lam: float) -> float:
    """The regularized ERM objective at ``W``, in numpy (independent of both sides)."""
    m = Y * (X @ W)
    vals = np.maximum(0.0, 1.0 - m) if loss == "hinge" else np.logaddexp(0.0, -m)
    return float(np.mean(vals) + lam / 2 * W @ W)


def _project_ball(W: np.ndarray, radius: float) -> np.ndarray:
    nrm = float(np.linalg.norm(W))
    return W if nrm <= radius else W * (radius / nrm)


# --------------------------------------------------------------------------- the two sides
def time_cvxpy(
    loss: str, X: np.ndarray, Y: np.ndarray, lam: float, radius: float
) -> dict[str, Any]:
    """Plain CVXPY + Clarabel on the vectorized model, timed end to end."""
    n, d = X.shape
    start = time.perf_counter()
    W = cp.Variable(d)
    margin = cp.multiply(Y, X @ W)
    per = cp.pos(1 - margin) if loss == "hinge" else cp.logistic(-margin)
    prob = cp.Problem(
        cp.Minimize(cp.sum(per) / n + lam / 2 * cp.sum_squares(W)), [cp.norm(W, 2) <= radius]
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prob.solve(solver=cp.CLARABEL)
    total = time.perf_counter() - start
    stats = prob.solver_stats
    w_val = None if W.value is None else np.asarray(W.value, float)
    return {
        "seconds": total,
        "solver_seconds": getattr(stats, "solve_time", None),
        "compile_seconds": getattr(prob, "compilation_time", None),
        "status": prob.status,
        "iterations": getattr(stats, "num_iters", None),
        "value": None if prob.value is None else float(prob.value),
        "w": w_val,
        "warnings": [str(w.message) for w in caught],
    }


class _PhaseTimer:
    """Best-effort wall-clock timers around dpcvx's internal stages.

    Wraps module attributes (and two methods) for the duration of a ``with`` block and restores
    them afterwards; dpcvx's files are not touched. A name that does not exist (the internals
    moved) is skipped and its phase reported as None.
    """

    # (phase, module path, attribute) -- the module is where the *caller* looks the name up
    TARGETS = (
        # a template is checked (canonical_template) and compiled (finish_template) where it
        # is first needed (dpcvx.compilation.template.LazyTemplate looks both up there)
        ("compile", "dpcvx.compilation.template", "canonical_template"),
        ("compile", "dpcvx.compilation.template", "finish_template"),
        ("compile", "dpcvx.problem", "compile_domain"),
        ("stamp", "dpcvx.certification.solve", "stamp"),
        ("solver", "dpcvx.certification.solve", "solve_program"),
        ("certify", "dpcvx.certification.solve", "certify"),
    )
    METHODS = (
        ("theta", "dpcvx.compilation.template", "Template", "theta"),
        ("derived", "dpcvx.modeling.declaration", "Declaration", "derived_values"),
    )

    def __init__(self) -> None:
        self.seconds: dict[str, float | None] = {}
        self._depth = 0

    def _wrap(self, phase: str, fn: Callable) -> Callable:
        timer = self

        def wrapper(*args, **kwargs):
            # nested calls (derived_values inside certify) are charged to the outer phase only
            timer._depth += 1
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                timer._depth -= 1
                if timer._depth == 0:
                    timer.seconds[phase] = (timer.seconds.get(phase) or 0.0) + (
                        time.perf_counter() - start
                    )

        wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
        return wrapper

    @contextlib.contextmanager
    def active(self) -> Iterator[_PhaseTimer]:
        import importlib

        saved: list[tuple[Any, str, Any]] = []
        phases = {p for p, *_ in self.TARGETS} | {p for p, *_ in self.METHODS}
        self.seconds = {p: None for p in phases}
        try:
            for phase, mod_name, attr in self.TARGETS:
                with contextlib.suppress(ImportError, AttributeError):
                    mod = importlib.import_module(mod_name)
                    orig = getattr(mod, attr)
                    saved.append((mod, attr, orig))
                    setattr(mod, attr, self._wrap(phase, orig))
                    self.seconds[phase] = 0.0
            for phase, mod_name, cls_name, attr in self.METHODS:
                with contextlib.suppress(ImportError, AttributeError, TypeError):
                    cls = getattr(importlib.import_module(mod_name), cls_name)
                    orig = cls.__dict__[attr]
                    saved.append((cls, attr, orig))
                    setattr(cls, attr, self._wrap(phase, orig))
                    self.seconds[phase] = 0.0
            yield self
        finally:
            for owner, attr, orig in reversed(saved):
                setattr(owner, attr, orig)


def time_dpcvx(
    loss: str, X: np.ndarray, Y: np.ndarray, lam: float, radius: float, phases: bool = True
) -> dict[str, Any]:
    """dpcvx end to end: construction (declaration) + first certified solve."""
    n, d = X.shape
    timer = _PhaseTimer()
    ctx = timer.active() if phases else contextlib.nullcontext(timer)
    with ctx:
        start = time.perf_counter()
        w = cp.Variable(d)
        x = cp.Parameter(d)
        y = cp.Parameter()
        per = cp.pos(1 - y * (x @ w)) if loss == "hinge" else cp.logistic(-y * (x @ w))
        problem = dpcvx.Problem(per, w, data={x: X, y: Y}, domain=[cp.norm(w, 2) <= radius])
        built = time.perf_counter()
        sol = problem.solve(regularization=lam)
        end = time.perf_counter()
    stats = dict(sol.solver_stats)
    total = end - start
    out = {
        "seconds": total,
        "construct_seconds": built - start,
        "solve_seconds": end - built,
        "solver_seconds": stats.get("seconds"),
        "certify_seconds": stats.get("certify_seconds"),
        "attempts": len(stats.get("attempts", ())) or None,
        "status": stats.get("status"),
        "iterations": stats.get("iterations"),
        "n_variables": stats.get("n_variables"),
        "n_constraints": stats.get("n_constraints"),
        "nnz": stats.get("nnz"),
        "upper": float(sol.upper),
        "lower": float(sol.lower),
        "gap": float(sol.gap),
        "w": np.asarray(sol.w, float),
        "phases": dict(timer.seconds) if phases else {},
    }
    return out


# --------------------------------------------------------------------------- one cell
def _median(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return float(statistics.median(vals)) if vals else None


def _warm_up(lam: float, radius: float) -> None:
    """Import and first-call costs (solver library load, CVXPY caches) out of the timings."""
    X, Y = make_data(50, 3, seed=12345)
    for loss in LOSSES:
        time_cvxpy(loss, X, Y, lam, radius)
        time_dpcvx(loss, X, Y, lam, radius, phases=False)


def measure_cell(
    loss: str,
    n: int,
    d: int,
    *,
    lam: float,
    radius: float,
    seed: int,
    repeats: int,
    side: str = "both",
    budget: float | None = None,
    estimate: float | None = None,
    log: Callable[[str], None] = print,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``(side, measurement)`` for one cell, repeat by repeat, the two sides alternating
    which goes first.

    With a ``budget`` (seconds for the whole cell), fewer repeats are planned when ``estimate``
    (one repeat, both sides) says they would not all fit, and no repeat is started that the
    average so far says would not fit (at least one repeat always runs).
    """
    X, Y = make_data(n, d, seed)
    planned = repeats
    if budget is not None and estimate is not None and estimate > 0:
        planned = max(1, min(repeats, int(budget // estimate)))
    cell_start = time.perf_counter()
    for r in range(planned):
        order = ("cvxpy", "dpcvx") if r % 2 == 0 else ("dpcvx", "cvxpy")
        for which in order:
            if side not in ("both", which):
                continue
            gc.collect()
            if which == "cvxpy":
                yield which, time_cvxpy(loss, X, Y, lam, radius)
            else:
                yield which, time_dpcvx(loss, X, Y, lam, radius)
        elapsed = time.perf_counter() - cell_start
        per_repeat = elapsed / (r + 1)
        if budget is not None and r + 1 < planned and elapsed + per_repeat > budget:
            log(
                f"    [{loss} n={n} d={d}] stopping after {r + 1} repeat(s): "
                f"{elapsed:.0f} s elapsed, budget {budget:.0f} s"
            )
            break


def run_cell(
    loss: str,
    n: int,
    d: int,
    *,
    lam: float,
    radius: float,
    seed: int,
    repeats: int,
    side: str = "both",
    budget: float | None = None,
    estimate: float | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Measure one (loss, n, d) cell in this process and summarize it with medians."""
    runs: dict[str, list[dict]] = {"cvxpy": [], "dpcvx": []}
    for which, m in measure_cell(
        loss,
        n,
        d,
        lam=lam,
        radius=radius,
        seed=seed,
        repeats=repeats,
        side=side,
        budget=budget,
        estimate=estimate,
        log=log,
    ):
        runs[which].append(m)
    return summarize_cell(
        loss, n, d, runs["cvxpy"], runs["dpcvx"], lam=lam, radius=radius, seed=seed
    )


def _cell_child(queue, kwargs: dict[str, Any]) -> None:
    try:
        for which, m in measure_cell(**kwargs, log=lambda s: queue.put(("log", s))):
            queue.put((which, m))
        queue.put(("done", None))
    except BaseException as exc:  # report, never hang the parent
        queue.put(("error", f"{type(exc).__name__}: {exc}"))


def run_cell_isolated(
    loss: str,
    n: int,
    d: int,
    *,
    lam: float,
    radius: float,
    seed: int,
    repeats: int,
    side: str = "both",
    budget: float,
    estimate: float | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Like :func:`run_cell`, in a forked child that is killed when the cell exceeds
    ``budget`` seconds; the repeats completed by then are kept (a cell with no complete
    measurement of a side it needs is reported as skipped)."""
    import multiprocessing as mp
    import queue as queue_mod

    methods = mp.get_all_start_methods()
    ctx = mp.get_context("fork" if "fork" in methods else "spawn")
    q = ctx.Queue()
    kwargs = dict(
        loss=loss,
        n=n,
        d=d,
        lam=lam,
        radius=radius,
        seed=seed,
        repeats=repeats,
        side=side,
        budget=budget,
        estimate=estimate,
    )
    proc = ctx.Process(target=_cell_child, args=(q, kwargs), daemon=True)
    start = time.perf_counter()
    proc.start()
    runs: dict[str, list[dict]] = {"cvxpy": [], "dpcvx": []}
    status = None
    try:
        while True:
            left = budget - (time.perf_counter() - start)
            try:
                kind, payload = q.get(timeout=max(left, 0.01))
            except queue_mod.Empty:
                status = f"killed at the cell budget ({budget:.0f} s)"
                break
            if kind == "log":
                log(payload)
            elif kind == "done":
                break
            elif kind == "error":
                raise RuntimeError(f"cell {loss} n={n} d={d} failed: {payload}")
            else:
                runs[kind].append(payload)
    finally:
        if proc.is_alive():
            proc.terminate()
        proc.join(5)
    needed = ("cvxpy", "dpcvx") if side == "both" else (side,)
    if status is not None:
        log(
            f"    [{loss} n={n} d={d}] {status} after "
            f"{len(runs['cvxpy'])} cvxpy / {len(runs['dpcvx'])} dpcvx measurement(s)"
        )
    if any(not runs[s] for s in needed):
        return {"loss": loss, "n": n, "d": d, "skipped": status or "no measurement"}
    row = summarize_cell(
        loss, n, d, runs["cvxpy"], runs["dpcvx"], lam=lam, radius=radius, seed=seed
    )
    row["budget_status"] = status
    return row


def summarize_cell(
    loss: str,
    n: int,
    d: int,
    runs_c: list[dict],
    runs_d: list[dict],
    *,
    lam: float,
    radius: float,
    seed: int,
) -> dict[str, Any]:
    """Medians of the measurements of one cell, ratios and the accuracy checks."""
    X, Y = make_data(n, d, seed)
    row: dict[str, Any] = {
        "loss": loss,
        "n": n,
        "d": d,
        "lam": lam,
        "radius": radius,
        "seed": seed,
        "repeats": max(len(runs_c), len(runs_d)),
        "skipped": None,
    }
    c_s = _median([m["seconds"] for m in runs_c])
    d_s = _median([m["seconds"] for m in runs_d])
    row.update(
        cvxpy_s=c_s,
        cvxpy_solver_s=_median([m["solver_seconds"] for m in runs_c]),
        cvxpy_compile_s=_median([m["compile_seconds"] for m in runs_c]),
        cvxpy_status=runs_c[-1]["status"] if runs_c else None,
        cvxpy_iterations=runs_c[-1]["iterations"] if runs_c else None,
        dpcvx_s=d_s,
        construct_s=_median([m["construct_seconds"] for m in runs_d]),
        first_solve_s=_median([m["solve_seconds"] for m in runs_d]),
        solver_s=_median([m["solver_seconds"] for m in runs_d]),
        certify_s=_median([m["certify_seconds"] for m in runs_d]),
        dpcvx_status=runs_d[-1]["status"] if runs_d else None,
        dpcvx_iterations=runs_d[-1]["iterations"] if runs_d else None,
        attempts=runs_d[-1]["attempts"] if runs_d else None,
        n_variables=runs_d[-1]["n_variables"] if runs_d else None,
        n_constraints=runs_d[-1]["n_constraints"] if runs_d else None,
        nnz=runs_d[-1]["nnz"] if runs_d else None,
        all_cvxpy_s=[m["seconds"] for m in runs_c],
        all_dpcvx_s=[m["seconds"] for m in runs_d],
    )
    if runs_d:
        names = sorted({k for m in runs_d for k in m["phases"]})
        row["phases_s"] = {k: _median([m["phases"].get(k) for m in runs_d]) for k in names}
        known = [v for v in row["phases_s"].values() if v is not None]
        row["phases_s"]["other"] = (row["first_solve_s"] - sum(known)) if known else None
    row["ratio"] = d_s / c_s if (c_s and d_s) else None
    # the solver's time per interior-point iteration, and everything dpcvx does besides the
    # solver call (declaration, compile, stamp, certify), for the growth table
    its = row["dpcvx_iterations"]
    row["solver_per_iter_s"] = (row["solver_s"] / its) if (row["solver_s"] and its) else None
    row["overhead_s"] = _median(
        [m["seconds"] - m["solver_seconds"] for m in runs_d if m["solver_seconds"] is not None]
    )
    paired = [a["seconds"] / b["seconds"] for a, b in zip(runs_d, runs_c, strict=False)]
    row["ratio_paired_median"] = _median(paired)
    row["cert_share"] = (row["certify_s"] / d_s) if (d_s and row["certify_s"] is not None) else None
    row["cert_share_of_solver"] = (
        (row["certify_s"] / row["solver_s"])
        if (row["solver_s"] and row["certify_s"] is not None)
        else None
    )
    # accuracy: both sides must agree on the objective, and the cvxpy point must respect the
    # certified lower bound (an independent check of the certificate)
    last_c = runs_c[-1] if runs_c else None
    last_d = runs_d[-1] if runs_d else None
    row["gap"] = last_d["gap"] if last_d else None
    row["dpcvx_upper"] = last_d["upper"] if last_d else None
    row["dpcvx_lower"] = last_d["lower"] if last_d else None
    row["cvxpy_value"] = last_c["value"] if last_c else None
    warn = []
    if last_c and last_d and last_c["value"] is not None:
        ref = last_c["value"]
        row["obj_rel_diff"] = abs(last_d["upper"] - ref) / max(abs(ref), 1e-12)
        if row["obj_rel_diff"] > OBJ_RTOL:
            warn.append("OBJ")
        if last_c["w"] is not None:
            f_c = objective(loss, X, Y, _project_ball(last_c["w"], radius), lam)
            row["cvxpy_point_objective"] = f_c
            slack = 1e-9 * max(1.0, abs(f_c))
            row["lower_bound_ok"] = bool(f_c >= last_d["lower"] - slack)
            if not row["lower_bound_ok"]:
                warn.append("LOWER>F(cvxpy)")
    else:
        row["obj_rel_diff"] = None
    row["warning"] = ",".join(warn)
    # informational: more than one solve on the refinement ladder, CVXPY's own warnings
    notes = []
    if last_d and last_d["attempts"] not in (None, 1):
        notes.append(f"attempts={last_d['attempts']}")
    statuses = [m["status"] for m in runs_c]
    inaccurate = sum(1 for st in statuses if st and "inaccurate" in str(st))
    if inaccurate:
        notes.append(f"cvxpy inaccurate x{inaccurate}")
    row["cvxpy_statuses"] = statuses
    row["cvxpy_warnings"] = sorted({w for m in runs_c for w in m.get("warnings", ())})
    row["note"] = ",".join(notes)
    return row


# --------------------------------------------------------------------------- the grid
@dataclass(kw_only=True)
class Config:
    """What to run (see ``--help`` for each field)."""

    losses: tuple[str, ...] = LOSSES
    ns: tuple[int, ...] = FULL_N
    ds: tuple[int, ...] = FULL_D
    growth_n: tuple[int, ...] = (10_000,)
    growth_d: tuple[int, ...] = (20,)
    repeats: int = 3
    seed: int = 0
    lam: float = 0.01
    radius: float = 1.0
    max_n: int | None = None
    cell_budget: float | None = 300.0
    side: str = "both"
    output: Path | None = DEFAULT_OUTPUT
    warm_up: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def cells(cfg: Config) -> list[tuple[str, int, int]]:
    """The grid (plus the 4n growth cells), cheapest first: the biggest run last."""
    pairs = {(n, d) for n in cfg.ns for d in cfg.ds}
    for n in cfg.growth_n:
        for d in cfg.growth_d:
            pairs.add((n, d))
            pairs.add((4 * n, d))
    if cfg.max_n is not None:
        pairs = {(n, d) for n, d in pairs if n <= cfg.max_n}
    ordered = sorted(pairs, key=lambda nd: (nd[0] * nd[1], nd[1]))
    return [(loss, n, d) for n, d in ordered for loss in cfg.losses]


def growth_rows(rows: list[dict]) -> list[dict]:
    """``time(n2)/time(n1)`` for each (loss, d) and consecutive measured n (dpcvx end to end,
    dpcvx solver only, and cvxpy for reference), also normalized to a 4x step:
    ``per_4x = ratio ** (log 4 / log(n2 / n1))`` (equal to the ratio when n2 = 4 n1)."""
    out = []
    done = [r for r in rows if not r.get("skipped")]
    keys = sorted({(r["loss"], r["d"]) for r in done})
    for loss, d in keys:
        rs = sorted((r for r in done if r["loss"] == loss and r["d"] == d), key=lambda r: r["n"])
        for a, b in zip(rs, rs[1:], strict=False):
            g: dict[str, Any] = {
                "loss": loss,
                "d": d,
                "n1": a["n"],
                "n2": b["n"],
                "factor": b["n"] / a["n"],
            }
            for name, key in (
                ("dpcvx", "dpcvx_s"),
                ("dpcvx_solver", "solver_s"),
                ("dpcvx_per_iter", "solver_per_iter_s"),
                ("dpcvx_overhead", "overhead_s"),
                ("cvxpy", "cvxpy_s"),
            ):
                if a.get(key) and b.get(key):
                    ratio = b[key] / a[key]
                    g[name] = ratio
                    g[name + "_per_4x"] = ratio ** (math.log(4) / math.log(g["factor"]))
                else:
                    g[name] = g[name + "_per_4x"] = None
            out.append(g)
    return out


def targets(rows: list[dict], growth: list[dict]) -> dict[str, Any]:
    """Whether the issue's targets are met (None when the grid did not measure them)."""
    done = [r for r in rows if not r.get("skipped")]
    at_n = [r for r in done if r["n"] == TARGET_RATIO_N and r.get("ratio") is not None]
    exact = [g for g in growth if g["factor"] == 4 and g.get("dpcvx") is not None]
    shares = [r["cert_share"] for r in done if r.get("cert_share") is not None]
    return {
        "ratio_at_1e4": {
            "target": f"dpcvx_s / cvxpy_s <= {TARGET_RATIO} at n = {TARGET_RATIO_N}",
            "values": {f"{r['loss']} d={r['d']}": r["ratio"] for r in at_n},
            "met": (all(r["ratio"] <= TARGET_RATIO for r in at_n) if at_n else None),
        },
        "growth_4n": {
            "target": f"dpcvx time(4n) / time(n) <= {TARGET_GROWTH}",
            "values": {f"{g['loss']} d={g['d']} {g['n1']}->{g['n2']}": g["dpcvx"] for g in exact},
            "met": (all(g["dpcvx"] <= TARGET_GROWTH for g in exact) if exact else None),
        },
        "cert_share": {
            "target": f"certify_seconds / dpcvx total <= {TARGET_CERT_SHARE:.0%}",
            "max": max(shares) if shares else None,
            "met": (max(shares) <= TARGET_CERT_SHARE if shares else None),
        },
        "accuracy": {
            "target": f"objectives agree to {OBJ_RTOL:g} relative; certified lower bound "
            "below the objective at cvxpy's point",
            "flagged": [
                f"{r['loss']} n={r['n']} d={r['d']}: {r['warning']}"
                for r in done
                if r.get("warning")
            ],
        },
    }


def _estimate(rows: list[dict], loss: str, n: int, d: int) -> float | None:
    """Predict one repeat (both sides) of a cell from the largest smaller n measured at the same
    (loss, d), scaled by ``(n / n_prev) ** 1.1``."""
    prev = [
        r for r in rows if r["loss"] == loss and r["d"] == d and r["n"] < n and not r.get("skipped")
    ]
    if not prev:
        return None
    p = max(prev, key=lambda r: r["n"])
    one = (p.get("cvxpy_s") or 0.0) + (p.get("dpcvx_s") or 0.0)
    return one * (n / p["n"]) ** 1.1


def run(cfg: Config, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the grid of ``cfg``; returns (and, if ``cfg.output``, writes) the JSON document."""
    if cfg.warm_up:
        _warm_up(cfg.lam, cfg.radius)
    doc: dict[str, Any] = {
        "benchmark": "bench_erm",
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()},
        "environment": _environment(),
        "rows": [],
    }
    rows: list[dict] = doc["rows"]
    grid = cells(cfg)
    log(
        f"# {len(grid)} cells, repeats={cfg.repeats}, lam={cfg.lam}, R={cfg.radius}, "
        f"seed={cfg.seed}, cell budget={cfg.cell_budget} s"
    )
    for loss, n, d in grid:
        est = _estimate(rows, loss, n, d)
        if cfg.cell_budget is not None and est is not None and est > cfg.cell_budget:
            log(
                f"  skip {loss:8s} n={n:<7d} d={d:<4d} (one repeat estimated at {est:.0f} s > "
                f"budget {cfg.cell_budget:.0f} s)"
            )
            rows.append({"loss": loss, "n": n, "d": d, "skipped": f"estimated {est:.0f} s"})
            continue
        t0 = time.perf_counter()
        kwargs = dict(
            lam=cfg.lam,
            radius=cfg.radius,
            seed=cfg.seed,
            repeats=cfg.repeats,
            side=cfg.side,
            estimate=est,
            log=log,
        )
        if cfg.cell_budget is None:
            row = run_cell(loss, n, d, **kwargs)
        else:
            row = run_cell_isolated(loss, n, d, budget=cfg.cell_budget, **kwargs)
        row["cell_wall_s"] = time.perf_counter() - t0
        rows.append(row)
        if row.get("skipped"):
            log(f"  skip {loss:8s} n={n:<7d} d={d:<4d} ({row['skipped']})")
        else:
            log(
                f"  done {loss:8s} n={n:<7d} d={d:<4d} cvxpy {_f(row['cvxpy_s'])} s, dpcvx "
                f"{_f(row['dpcvx_s'])} s, ratio {_f(row['ratio'])}, gap {_g(row['gap'])} "
                f"[{row['cell_wall_s']:.0f} s wall] {row['warning']} {row['note']}"
            )
        doc["growth"] = growth_rows(rows)
        doc["targets"] = targets(rows, doc["growth"])
        if cfg.output is not None:
            _write(doc, cfg.output)
    doc["growth"] = growth_rows(rows)
    doc["targets"] = targets(rows, doc["growth"])
    if cfg.output is not None:
        _write(doc, cfg.output)
    return doc


def _environment() -> dict[str, Any]:
    import clarabel
    import scipy

    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_at_start": load,
        "dpcvx": dpcvx.__version__,
        "cvxpy": cp.__version__,
        "clarabel": getattr(clarabel, "__version__", None),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def _write(doc: dict, path: Path) -> None:
    from _common import write_json

    write_json(doc, path)


# --------------------------------------------------------------------------- printing
def _f(v, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _g(v) -> str:
    return "-" if v is None else f"{v:.1e}"


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _table(headers: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    widths = [
        max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(headers)
    ]
    lines = [
        "  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in body]
    return "\n".join(lines)


def format_report(doc: dict) -> str:
    """The plain-text tables of a run."""
    rows = doc["rows"]
    main_rows, split_rows = [], []
    for r in rows:
        if r.get("skipped"):
            main_rows.append(
                [r["loss"], str(r["n"]), str(r["d"])] + ["-"] * 6 + [f"skipped ({r['skipped']})"]
            )
            continue
        main_rows.append(
            [
                r["loss"],
                str(r["n"]),
                str(r["d"]),
                _f(r["cvxpy_s"]),
                _f(r["dpcvx_s"]),
                _f(r["ratio"], 2),
                _pct(r["cert_share"]),
                _g(r["gap"]),
                _g(r.get("obj_rel_diff")),
                (r["warning"] or "ok") + (f" ({r['note']})" if r.get("note") else ""),
            ]
        )
        ph = r.get("phases_s") or {}
        split_rows.append(
            [
                r["loss"],
                str(r["n"]),
                str(r["d"]),
                str(r["repeats"]),
                _f(r["construct_s"]),
                _f(r["first_solve_s"]),
                _f(ph.get("compile")),
                _f(ph.get("derived")),
                _f(ph.get("theta")),
                _f(ph.get("stamp")),
                _f(r["solver_s"]),
                _f(r["certify_s"]),
                _f(ph.get("other")),
                _f(r["cvxpy_compile_s"]),
                _f(r["cvxpy_solver_s"]),
                str(r["dpcvx_iterations"]),
                str(r["cvxpy_iterations"]),
            ]
        )
    out = [
        "",
        "== dpcvx (certified) vs plain CVXPY + Clarabel: medians of "
        f"{doc['config']['repeats']} repeats, seconds ==",
        _table(
            [
                "loss",
                "n",
                "d",
                "cvxpy_s",
                "dpcvx_s",
                "ratio",
                "cert_share",
                "gap",
                "obj_rel",
                "check",
            ],
            main_rows,
        ),
        "",
        "== split of the dpcvx time (first solve = compile + derived + theta + stamp + "
        "solver + certify + other) and cvxpy's own split, seconds ==",
        _table(
            [
                "loss",
                "n",
                "d",
                "reps",
                "construct",
                "first_solve",
                "compile",
                "derived",
                "theta",
                "stamp",
                "solver",
                "certify",
                "other",
                "cvx_compile",
                "cvx_solver",
                "dp_it",
                "cvx_it",
            ],
            split_rows,
        ),
    ]
    growth = doc.get("growth") or []
    if growth:
        out += [
            "",
            "== growth: time(n2) / time(n1) (per_4x normalizes to a 4x step) ==",
            _table(
                [
                    "loss",
                    "d",
                    "n1",
                    "n2",
                    "dpcvx",
                    "dpcvx_per_4x",
                    "solver_per_4x",
                    "per_iter_per_4x",
                    "overhead_per_4x",
                    "cvxpy_per_4x",
                ],
                [
                    [
                        g["loss"],
                        str(g["d"]),
                        str(g["n1"]),
                        str(g["n2"]),
                        _f(g["dpcvx"], 2),
                        _f(g["dpcvx_per_4x"], 2),
                        _f(g["dpcvx_solver_per_4x"], 2),
                        _f(g["dpcvx_per_iter_per_4x"], 2),
                        _f(g["dpcvx_overhead_per_4x"], 2),
                        _f(g["cvxpy_per_4x"], 2),
                    ]
                    for g in growth
                ],
            ),
        ]
    tg = doc.get("targets") or {}
    if tg:
        out += ["", "== targets =="]
        for key in ("ratio_at_1e4", "growth_4n"):
            t = tg[key]
            vals = ", ".join(f"{k}: {_f(v, 2)}" for k, v in t["values"].items()) or "not measured"
            out.append(f"{_met(t['met'])}  {t['target']}  ({vals})")
        t = tg["cert_share"]
        out.append(f"{_met(t['met'])}  {t['target']}  (max {_pct(t['max'])})")
        t = tg["accuracy"]
        out.append(
            f"{'FLAGGED' if t['flagged'] else 'ok     '}  {t['target']}"
            + ("".join("\n           " + s for s in t["flagged"]))
        )
    return "\n".join(out)


def _met(v) -> str:
    return {True: "MET    ", False: "MISSED ", None: "n/a    "}[v]


# --------------------------------------------------------------------------- CLI
def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(float(t)) for t in text.replace(",", " ").split())


def parse_args(argv: Sequence[str] | None = None) -> Config:
    p = argparse.ArgumentParser(
        description="Certified dpcvx ERM vs plain CVXPY + Clarabel (hinge and logistic), "
        "timed side by side; prints ratios and writes JSON.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--smoke",
        action="store_true",
        help=f"quick CI run: n in {SMOKE_N}, d in {SMOKE_D}, no 4n growth cell "
        "(overrides --n/--d unless they are given)",
    )
    p.add_argument(
        "--loss", default=",".join(LOSSES), help="comma-separated losses (hinge, logistic)"
    )
    p.add_argument(
        "--n",
        default=None,
        help=f"sample sizes, e.g. '1e3,1e4,1e5' (default {','.join(map(str, FULL_N))})",
    )
    p.add_argument("--d", default=None, help=f"dimensions (default {','.join(map(str, FULL_D))})")
    p.add_argument(
        "--growth-n",
        default=None,
        help="for each N here also run 4N, at the dimensions of --growth-d, to "
        "measure time(4n)/time(n) (default 1e4 on the full grid, none with "
        "--smoke or when --n is given; 'none' to disable)",
    )
    p.add_argument("--growth-d", default="20", help="dimensions of the growth cells")
    p.add_argument("--max-n", type=float, default=None, help="drop every cell with n above this")
    p.add_argument("--repeats", type=int, default=3, help="repeats per cell (median reported)")
    p.add_argument("--seed", type=int, default=0, help="data seed")
    p.add_argument("--lam", type=float, default=0.01, help="regularization lambda")
    p.add_argument("--radius", type=float, default=1.0, help="radius R of the l2-ball domain")
    p.add_argument(
        "--cell-budget",
        type=float,
        default=300.0,
        help="seconds per cell (all repeats, both sides): each cell runs in a forked "
        "child that is killed at the budget (completed repeats are kept); a "
        "cell predicted to need more for one repeat is skipped and repeats are "
        "cut to fit; 0 runs cells in this process without a limit (use 0 "
        "under a profiler)",
    )
    p.add_argument(
        "--side",
        choices=("both", "dpcvx", "cvxpy"),
        default="both",
        help="time only one side (e.g. under a profiler)",
    )
    p.add_argument(
        "--output",
        default=None,
        help=f"JSON output ('-' for none; default {DEFAULT_OUTPUT}, or "
        f"{SMOKE_OUTPUT.name} next to it with --smoke)",
    )
    p.add_argument("--no-warm-up", action="store_true", help="skip the tiny warm-up solves")
    p.add_argument(
        "--profile",
        type=int,
        nargs="?",
        const=40,
        default=0,
        metavar="LINES",
        help="instead of the benchmark, print a cProfile of one warm dpcvx run per "
        "cell of --loss/--n/--d (no cvxpy side, no growth cells, no JSON)",
    )
    a = p.parse_args(argv)
    losses = tuple(s.strip() for s in a.loss.split(",") if s.strip())
    bad = [s for s in losses if s not in LOSSES]
    if bad:
        p.error(f"unknown loss {bad[0]!r}; choose from {', '.join(LOSSES)}")
    ns = _ints(a.n) if a.n else (SMOKE_N if a.smoke else FULL_N)
    ds = _ints(a.d) if a.d else (SMOKE_D if a.smoke else FULL_D)
    if a.growth_n is None:
        growth_n = () if (a.smoke or a.n) else (10_000,)
    elif a.growth_n.strip().lower() == "none":
        growth_n = ()
    else:
        growth_n = _ints(a.growth_n)
    if a.repeats < 1:
        p.error("--repeats must be at least 1")
    return Config(
        losses=losses,
        ns=ns,
        ds=ds,
        growth_n=growth_n,
        growth_d=_ints(a.growth_d),
        repeats=a.repeats,
        seed=a.seed,
        lam=a.lam,
        radius=a.radius,
        max_n=None if a.max_n is None else int(a.max_n),
        cell_budget=a.cell_budget or None,
        side=a.side,
        output=(
            None
            if a.output == "-"
            else Path(a.output)
            if a.output
            else SMOKE_OUTPUT
            if a.smoke
            else DEFAULT_OUTPUT
        ),
        warm_up=not a.no_warm_up,
        extra={"smoke": a.smoke, "profile": a.profile},
    )


def profile_dpcvx(
    loss: str,
    n: int,
    d: int,
    *,
    lam: float = 0.01,
    radius: float = 1.0,
    seed: int = 0,
    lines: int = 40,
) -> str:
    """cProfile of one warm dpcvx run (construction + first solve) only, as text: sorted by
    cumulative time, then by internal time."""
    import cProfile
    import io
    import pstats

    _warm_up(lam, radius)
    X, Y = make_data(n, d, seed)
    gc.collect()
    prof = cProfile.Profile()
    prof.enable()
    out = time_dpcvx(loss, X, Y, lam, radius, phases=False)
    prof.disable()
    buf = io.StringIO()
    buf.write(
        f"# cProfile of dpcvx, {loss} n={n} d={d}: {out['seconds']:.3f} s end to end "
        f"(solver {out['solver_seconds']:.3f} s, certify {out['certify_seconds']:.3f} s)\n"
    )
    stats = pstats.Stats(prof, stream=buf).strip_dirs()
    stats.sort_stats("cumulative").print_stats(lines)
    stats.sort_stats("tottime").print_stats(max(10, lines // 2))
    return buf.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    if cfg.extra.get("profile"):
        for loss in cfg.losses:
            for n in cfg.ns:
                for d in cfg.ds:
                    print(
                        profile_dpcvx(
                            loss,
                            n,
                            d,
                            lam=cfg.lam,
                            radius=cfg.radius,
                            seed=cfg.seed,
                            lines=cfg.extra["profile"],
                        ),
                        flush=True,
                    )
        return 0
    doc = run(cfg, log=lambda s: print(s, flush=True))
    print(format_report(doc), flush=True)
    if cfg.output is not None:
        print(f"\nrows written to {cfg.output}")
    flagged = (doc.get("targets") or {}).get("accuracy", {}).get("flagged")
    return 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main())
