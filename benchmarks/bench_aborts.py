"""Adversarial search for aborts of the private mechanisms built on certified solves.

A ``CertificationError`` in a private release is an output: if a mechanism releases on one
dataset and raises on a neighbouring one, the abort itself leaks (DESIGN.md section 5, "no
data-dependent abort"). This benchmark looks for such datasets, for every mechanism that rests
on certified solves:

- ``op``: ``dpcvx.OutputPerturbation(lipschitz=L, regularization=lam)`` on the plain problem,
  ``L`` the bound a user declares for the nominal universe ``||x|| <= 1``, ``|y| <= 1`` on the
  unit ball (hinge, absolute: 1; squared: 4); the outliers below leave that universe on purpose;
- ``op_ext``: the same on ``problem.lipschitz_extension(C)`` with ``lipschitz=C`` (private on
  every dataset by construction);
- ``dop``: ``dpcvx.DoubleOutputPerturbation(C=C, regularization=lam)``;
- ``ldop``: ``dpcvx.LocalizedDoubleOutputPerturbation(k=4, moment=1, blocks=2)`` (small n);
- ``tilted``: ``dpcvx.TiltedOutputPerturbation(lipschitz=L, regularization=lam, tilt=1)``;
- ``saddle``: ``OutputPerturbation`` on a ``dpcvx.SaddleProblem`` (logistic loss against an
  adversary ``||v|| <= 0.3``; the ``saddle_logistic`` loss only, even k, 20 s per cell).

Families of datasets (seeded; n = 40, d = 3, rows in the unit ball, unit l2 ball domain):

- ``outlier``: the features of one example scaled by ``10^k``, k = 0..12 (hinge, absolute,
  squared losses);
- ``duplicates``: m copies of one example scaled by 1e6 (m = 2, 10, 20);
- ``kink``: minimizers at kinks, vertices and on the boundary (all examples at -1 and one at +1
  with ``cp.abs(w - x)`` on ``|w| <= 1`` in three spellings; ``norm1(w - x)`` with every example
  at a vertex of a box; separable hinge data whose minimizer is on the sphere; pinball with the
  quantile at a data point);
- ``lambda``: tiny and huge regularization (1e-8, 1e-5, 1e3, 1e6) on the plain data;
- ``label``: one label from +-1e8 to +-1.7e308 in losses with a flat or a linear side
  (``max(r, 0)**2.5``, ``max(r, 0)**1.5``, ``huber(max(r, 0))``, ``square(max(r, 0))``,
  ``exp(r)``, ``logistic(r)``, ``log_sum_exp([y, x^T w])``, ``logistic(r) + 0.2 r``, Huber in
  both spellings, absolute, pinball, epsilon-insensitive, squared, ``max(r, 0.5 x^T w - 1,
  0)``, ``log_sum_exp([y, x^T w, 0.5 x^T w - y])``, ``huber(3 (y - x^T w) + 0.1) + |r|``;
  ``r = x^T w - y``);
- ``zero_row``: one row of zeros (or of 1e-20) with a label from 1e2 to -1e60 in the squared
  loss, ``square(max(r, 0))`` and ``max(r, 0)**2.5`` and ``**1.5``: a nearly constant example
  of the label's square or more, whose slope is about zero.

``--warnings-as-errors`` raises every warning but the curator's ``LipschitzClaimWarning``
inside the releases (a warning that ends a solve on one side of a pair is an abort too).

Each cell records released / aborted (``CertificationError``) / error (any other exception,
type and first line), and for a release whether the output is finite and in the domain. The
report prints the outlier grid, the other cells, and the *abort frontier*: per mechanism and
loss, the smallest outlier scale ``10^k`` that aborted.

    python benchmarks/bench_aborts.py [--smoke] [--out DIR] [--mechanisms op,dop] [--budget S]
        [--families outlier,duplicates,lambda,kink,label,zero_row] [--warnings-as-errors]

The exit status is 0 (it measures); ``--strict`` exits 1 if any cell did not release.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import cvxpy as cp
import numpy as np
from _common import results_dir, write_json

import dpcvx

RESULTS = results_dir()
N, D, LAM, C_EXT, EPSILON, RHO = 40, 3, 0.1, 1.0, 1.0, 0.3
#: declared Lipschitz constants for the nominal universe ||x|| <= 1, |y| <= 1 on the unit ball
DECLARED_L = {"hinge": 1.0, "absolute": 1.0, "squared": 4.0, "saddle_logistic": 1.0 + RHO}
MECHANISMS = ("op", "op_ext", "dop", "ldop", "tilted", "saddle")
SCALES = tuple(range(13))
#: the saddle solve slows down with the outlier (about a minute per cell at k = 6): every other k
SADDLE_SCALES = tuple(range(0, 13, 2))
DOMAIN_TOL = 1e-8
#: what the releases do with a warning ("ignore", or "error" with --warnings-as-errors)
WARNINGS = ["ignore"]
CODES = {
    "released": "R",
    "aborted": "A",
    "error": "E",
    "nonfinite": "N",
    "outside": "O",
    "timeout": "T",
    "n/a": ".",
}


# ============================================================================ problems
@dataclass(frozen=True)
class Cell:
    """One dataset: the family, the loss, a parameter (the outlier exponent, the number of
    copies, the lambda), and how to build its problem."""

    family: str
    loss: str
    param: str
    X: np.ndarray
    Y: np.ndarray
    domain: Callable[[cp.Expression], list]
    lam: float = LAM
    kind: str = "xy"  # "xy": loss(x, y); "x": loss(x) only


def _loss(name: str, w, x, y):
    if name == "hinge":
        return cp.pos(1 - y * (x @ w))
    if name == "absolute":
        return cp.abs(x @ w - y)
    if name == "squared":
        return cp.square(x @ w - y)
    if name == "abs_w_minus_x":
        return cp.abs(w - x)
    if name == "norm1_w_minus_x":
        return cp.norm1(w - x)
    if name == "pinball":
        return cp.maximum(0.5 * (y - x @ w), -0.5 * (y - x @ w))
    if name in LABEL_LOSSES:
        return LABEL_LOSSES[name](x @ w - y, x @ w, y)
    if name in PENALTY_LOSSES:
        return PENALTY_LOSSES[name](x @ w - y, w)
    raise ValueError(name)


#: losses with a flat or a linear side, for one label of +-1e8 or +-1e12 (``r = x^T w - y``):
#: the example keeps a small slope, so it stays in every mechanism's universe, while its
#: argument or its value is huge
LABEL_LOSSES: dict[str, Callable] = {
    "pos_power_2.5": lambda r, m, y: cp.power(cp.pos(r), 2.5),
    "pos_power_1.5": lambda r, m, y: cp.power(cp.pos(r), 1.5),
    "huber_pos": lambda r, m, y: cp.huber(cp.pos(r), 0.5),
    "square_pos": lambda r, m, y: cp.square(cp.pos(r)),
    "exp": lambda r, m, y: cp.exp(r),
    "logistic_r": lambda r, m, y: cp.logistic(r),
    "log_sum_exp_y": lambda r, m, y: cp.log_sum_exp(cp.hstack([y, m])),
    # an affine term of r keeps a value of order the label after every move
    "logistic_plus_r": lambda r, m, y: cp.logistic(r) + 0.2 * r,
    "mixed_plus_r": lambda r, m, y: 0.5 * cp.logistic(r) + 0.25 * cp.abs(r) + 0.1 * r,
    # generalized linear models' negative log-likelihoods: one atom plus an affine term
    # along its direction whose multiple is the label (Newton's path)
    "logistic_01": lambda r, m, y: cp.logistic(m) - y * m,
    "poisson": lambda r, m, y: cp.exp(m) - cp.multiply(y, m),
    # slopes that do not grow with the label (2 ||x|| for the Huber losses: steeper than C)
    "huber_r": lambda r, m, y: cp.huber(r, 1.0),
    "huber_y_minus": lambda r, m, y: cp.huber(y - m, 1.0),
    "abs_r": lambda r, m, y: cp.abs(r),
    "pinball_r": lambda r, m, y: cp.maximum(0.3 * r, -0.7 * r),
    "eps_insensitive_r": lambda r, m, y: cp.pos(cp.abs(r) - 0.1),
    "square_r": lambda r, m, y: cp.square(r),
    # a piece far below the others; an entry far from the others without a stable gap; an
    # argument stamped from its parameters another way than its jet
    "max3": lambda r, m, y: cp.maximum(r, 0.5 * m - 1, 0),
    "lse3": lambda r, m, y: cp.log_sum_exp(cp.hstack([y, m, 0.5 * m - y])),
    "huber3_plus_abs": lambda r, m, y: cp.huber(3 * (y - m) + 0.1, 1.0) + cp.abs(r),
}
#: losses with a penalty that reads no data (``w`` its variable), for the same labels: such a
#: penalty (a norm, a maximum, ``log_sum_exp`` or a quadratic form of ``w``) sent the whole
#: loss to the value-based certificate until 2026-11-29, whose margin relative to the label's
#: value missed the targets
PENALTY_LOSSES: dict[str, Callable] = {
    "abs_r+group": lambda r, w: cp.abs(r) + 0.05 * (cp.norm(w[:1]) + cp.norm(w[1:])),
    "pinball_r+norm": lambda r, w: cp.maximum(0.3 * r, -0.7 * r) + 0.05 * cp.norm(w - 0.2),
    "abs_r+norm_inf": lambda r, w: cp.abs(r) + 0.05 * cp.norm_inf(w),
    "abs_r+log_sum_exp": lambda r, w: cp.abs(r) + 0.05 * cp.log_sum_exp(w),
    "huber_r+quad_form": lambda r, w: (
        cp.huber(r, 1.0) + 0.05 * cp.quad_form(w, np.diag([1.0, 2.0, 3.0]))
    ),
}
#: up to the largest float: past 1e16 the rounding of a label exceeds the margins of the
#: moves next to the domain, and past 1e100 the example leaves the argument universe
LABELS = (1e8, -1e8, 1e12, -1e12, 1e17, -1e17, 1e30, -1e30, 1e99, -1e101, 1.7e308, -1.7e308)
FAMILIES = ("outlier", "duplicates", "lambda", "kink", "label", "zero_row")
#: curved losses whose example with a row of zeros (or of 1e-20) and a huge label is nearly
#: constant on the domain, of the label's square or more, with a slope of about zero
ZERO_ROW_LOSSES = ("square_r", "square_pos", "pos_power_2.5", "pos_power_1.5")
ZERO_ROW_LABELS = (1e2, -1e4, 1e4, -1e8, -1e16, -1e60)


def build(cell: Cell):
    """The dpcvx problem of ``cell`` (a ``SaddleProblem`` for ``saddle_logistic``)."""
    d = cell.X.shape[1]
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    if cell.loss == "saddle_logistic":
        v = cp.Variable(d)
        loss = cp.logistic(-y * (x @ w)) + y * (v @ w) - 0.5 * cp.sum_squares(v)
        return dpcvx.SaddleProblem(
            loss,
            w,
            v,
            data={x: cell.X, y: cell.Y},
            domain=cell.domain(w),
            perturbation_set=[cp.norm(v, 2) <= RHO],
        )
    loss = _loss(cell.loss, w, x, y)
    data = {x: cell.X} if cell.kind == "x" else {x: cell.X, y: cell.Y}
    return dpcvx.Problem(loss, w, data=data, domain=cell.domain(w))


def mechanism_call(name: str, cell: Cell) -> Callable | None:
    """A callable ``problem -> PrivateResult`` for mechanism ``name``, or None if it does not
    apply to the cell's loss."""
    lam = cell.lam
    L = DECLARED_L.get(cell.loss, 1.0)
    saddle = cell.loss == "saddle_logistic"
    if (name == "saddle") != saddle:
        return None
    if name in ("op", "saddle"):
        mech = dpcvx.OutputPerturbation(lipschitz=L, regularization=lam)
        return lambda p, rng: p.solve_private(mech, epsilon=EPSILON, rng=rng)
    if name == "op_ext":
        mech = dpcvx.OutputPerturbation(lipschitz=C_EXT, regularization=lam)
        return lambda p, rng: p.lipschitz_extension(C_EXT).solve_private(
            mech, epsilon=EPSILON, rng=rng
        )
    if name == "dop":
        mech = dpcvx.DoubleOutputPerturbation(C=C_EXT, regularization=lam)
    elif name == "ldop":
        mech = dpcvx.LocalizedDoubleOutputPerturbation(
            k=4, moment=1.0, blocks=2, base_regularization=lam, progress=False
        )
    elif name == "tilted":
        mech = dpcvx.TiltedOutputPerturbation(lipschitz=L, regularization=lam, tilt=1.0)
    else:
        raise ValueError(name)
    return lambda p, rng: p.solve_private(mech, epsilon=EPSILON, rng=rng)


# ============================================================================ data
def base_data(loss: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``N(0, I/d)`` clipped to the unit ball; labels +-1 (hinge, saddle) or a linear
    model with noise clipped to [-1, 1]."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D)) / math.sqrt(D)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    w_true = np.array([0.6, -0.5, 0.4])
    if loss in ("hinge", "saddle_logistic"):
        Y = np.where(X @ w_true + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    else:
        Y = np.clip(X @ w_true + 0.2 * rng.normal(size=n), -1.0, 1.0)
    return X, Y


def _ball(w):
    return [cp.norm(w, 2) <= 1]


def cells(smoke: bool, n: int, seed: int, mechanisms: tuple[str, ...]) -> list[Cell]:
    losses = ("hinge",) if smoke else ("hinge", "absolute", "squared")
    if "saddle" in mechanisms and not smoke:
        losses += ("saddle_logistic",)
    scales = (0, 8) if smoke else SCALES
    out = []
    for loss in losses:
        X, Y = base_data(loss, n, seed)
        for k in scales if loss != "saddle_logistic" else SADDLE_SCALES:
            Xk = X.copy()
            Xk[0] *= 10.0**k
            out.append(Cell("outlier", loss, f"k={k}", Xk, Y, _ball))
    if not smoke:
        for loss in losses[:3]:
            X, Y = base_data(loss, n, seed)
            for m in (2, 10, 20):
                Xm = X.copy()
                Xm[:m] = X[0] * 1e6
                Ym = Y.copy()
                Ym[:m] = Y[0]
                out.append(Cell("duplicates", loss, f"m={m}", Xm, Ym, _ball))
        for loss in losses[:3]:
            X, Y = base_data(loss, n, seed)
            for lam in (1e-8, 1e-5, 1e3, 1e6):
                out.append(Cell("lambda", loss, f"lam={lam:g}", X, Y, _ball, lam=lam))
    # kinks, vertices, boundaries
    x1 = -np.ones((n, 1))
    x1[0] = 1.0
    ones = np.ones(n)
    out.append(
        Cell("kink", "abs_w_minus_x", "abs(w)<=1", x1, ones, lambda w: [cp.abs(w) <= 1], kind="x")
    )
    if not smoke:
        out.append(
            Cell(
                "kink",
                "abs_w_minus_x",
                "w in [-1,1]",
                x1,
                ones,
                lambda w: [w >= -1, w <= 1],
                kind="x",
            )
        )
        out.append(Cell("kink", "abs_w_minus_x", "norm(w)<=1", x1, ones, _ball, kind="x"))
        corner = np.tile([1.0, 1.0], (n, 1))
        corner[0] = [-1.0, 1.0]
        out.append(
            Cell(
                "kink",
                "norm1_w_minus_x",
                "box vertex d=2",
                corner,
                ones,
                lambda w: [w >= -1, w <= 1],
                kind="x",
            )
        )
        rng = np.random.default_rng(seed + 1)
        Xs = rng.normal(size=(n, D))
        Xs /= np.linalg.norm(Xs, axis=1, keepdims=True)
        Ys = np.where(Xs @ np.array([1.0, 0.0, 0.0]) >= 0, 1.0, -1.0)
        Xs += 0.5 * Ys[:, None] * np.array([1.0, 0.0, 0.0])  # separable with a margin
        Xs /= np.maximum(1.0, np.linalg.norm(Xs, axis=1, keepdims=True))
        out.append(Cell("kink", "hinge", "separable, boundary", Xs, Ys, _ball, lam=1e-4))
        Xp = np.tile([1.0, 0.0, 0.0], (n, 1))
        Yp = np.r_[np.full(n // 2, 0.5), np.full(n - n // 2, -0.5)]
        Yp[0] = 0.0  # the median residual sits exactly at a data point
        out.append(Cell("kink", "pinball", "median at a point", Xp, Yp, _ball, lam=1e-6))
        Xv = np.tile([1.0, 0.0, 0.0], (n, 1))
        out.append(
            Cell(
                "kink",
                "absolute",
                "vertex of abs(w)<=0.5",
                Xv,
                np.full(n, 2.0),
                lambda w: [cp.abs(w) <= 0.5],
            )
        )
        for loss in (*LABEL_LOSSES, *PENALTY_LOSSES):
            X, Y = base_data(loss, n, seed)
            for label in LABELS:
                Yl = Y.copy()
                Yl[0] = label
                out.append(Cell("label", loss, f"y0={label:g}", X, Yl, _ball))
        for loss in ZERO_ROW_LOSSES:
            X, Y = base_data(loss, n, seed)
            for row in (0.0, 1e-20):
                for label in ZERO_ROW_LABELS:
                    Xz, Yz = X.copy(), Y.copy()
                    Xz[0] *= row
                    Yz[0] = label
                    out.append(Cell("zero_row", loss, f"x0*{row:g},y0={label:g}", Xz, Yz, _ball))
    return out


# ============================================================================ one cell
class _Timeout(BaseException):
    """Not an ``Exception``, so that no ``except Exception`` inside dpcvx swallows it."""


@contextlib.contextmanager
def _budget(seconds: float):
    """Raise ``_Timeout`` after ``seconds`` (SIGALRM; no limit where it is unavailable)."""
    if seconds <= 0 or not hasattr(signal, "SIGALRM"):
        yield
        return

    def handler(signum, frame):
        raise _Timeout

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    where = ""
    if not isinstance(exc, dpcvx.DpcvxError) and exc.__traceback__ is not None:
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        where = f" [at {Path(frame.filename).name}:{frame.lineno}]"
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:150] + where


def in_domain(cell: Cell, point: np.ndarray) -> bool:
    v = cp.Variable(point.size)
    v.value = point
    return all(float(np.max(c.violation())) <= DOMAIN_TOL for c in cell.domain(v))


def run_cell(cell: Cell, mechanism: str, seed: int, budget: float) -> dict | None:
    try:
        call = mechanism_call(mechanism, cell)
    except Exception as exc:  # noqa: BLE001 - a mechanism refusing a public parameter
        call = exc
    if call is None:
        return None
    row = {
        "family": cell.family,
        "loss": cell.loss,
        "param": cell.param,
        "lam": cell.lam,
        "mechanism": mechanism,
        "outcome": None,
        "error": None,
        "finite": None,
        "in_domain": None,
    }
    start = time.perf_counter()
    try:
        with _budget(budget), warnings.catch_warnings():
            warnings.simplefilter(WARNINGS[0])
            warnings.simplefilter("ignore", dpcvx.LipschitzClaimWarning)
            if isinstance(call, Exception):
                raise call
            problem = build(cell)
            res = call(problem, seed)
    except _Timeout:
        row["outcome"] = "timeout"
    except dpcvx.CertificationError as exc:
        row["outcome"], row["error"] = "aborted", _error(exc)
    except Exception as exc:  # noqa: BLE001 - every failure is a measurement here
        row["outcome"], row["error"] = "error", _error(exc)
    else:
        w = np.asarray(res.w, float).ravel()
        row["finite"] = bool(np.all(np.isfinite(w)))
        row["in_domain"] = bool(row["finite"] and in_domain(cell, w))
        if not row["finite"]:
            row["outcome"] = "nonfinite"
        elif not row["in_domain"]:
            row["outcome"] = "outside"
        else:
            row["outcome"] = "released"
    row["seconds"] = time.perf_counter() - start
    return row


# ============================================================================ report
def outlier_grid(rows: list[dict]) -> list[str]:
    here = [r for r in rows if r["family"] == "outlier"]
    ks = sorted({int(r["param"][2:]) for r in here})
    lines = [
        "outlier grid (one example's features x 10^k): "
        + ", ".join(f"{c} {o}" for o, c in CODES.items() if o != "n/a"),
        f"{'mechanism':10s} {'loss':16s} " + " ".join(f"{k:>2d}" for k in ks),
    ]
    for mech in MECHANISMS:
        for loss in dict.fromkeys(r["loss"] for r in here):
            cell = {
                int(r["param"][2:]): r for r in here if r["mechanism"] == mech and r["loss"] == loss
            }
            if not cell:
                continue
            codes = [CODES[cell[k]["outcome"]] if k in cell else "." for k in ks]
            lines.append(f"{mech:10s} {loss:16s} " + " ".join(f"{c:>2s}" for c in codes))
    return lines


def frontier(rows: list[dict]) -> list[str]:
    """Per mechanism and loss: the smallest outlier exponent that aborted, and the smallest
    that did not release at all."""
    here = [r for r in rows if r["family"] == "outlier"]
    lines = [
        f"abort frontier: {'mechanism':10s} {'loss':16s} {'first abort':>12s} "
        f"{'first non-release':>18s}  (outlier scale 10^k)"
    ]
    for mech in MECHANISMS:
        for loss in dict.fromkeys(r["loss"] for r in here):
            cell = sorted(
                (int(r["param"][2:]), r["outcome"])
                for r in here
                if r["mechanism"] == mech and r["loss"] == loss
            )
            if not cell:
                continue
            abort = next((f"1e{k}" for k, o in cell if o == "aborted"), "none")
            other = next((f"1e{k} ({o})" for k, o in cell if o != "released"), "none")
            lines.append(f"{'':16s}{mech:10s} {loss:16s} {abort:>12s} {other:>18s}")
    return lines


def other_table(rows: list[dict]) -> list[str]:
    here = [r for r in rows if r["family"] != "outlier"]
    if not here:
        return []
    lines = [
        f"{'family':10s} {'loss':16s} {'param':22s} {'mechanism':9s} {'outcome':9s} "
        f"{'finite':>6s} {'in W':>5s} {'seconds':>7s}  error"
    ]
    for r in here:
        err = (r["error"] or "")[:90]
        lines.append(
            f"{r['family']:10s} {r['loss']:16s} {r['param']:22s} {r['mechanism']:9s} "
            f"{r['outcome']:9s} {str(r['finite'] if r['finite'] is not None else '-'):>6s} "
            f"{str(r['in_domain'] if r['in_domain'] is not None else '-'):>5s} "
            f"{r['seconds']:7.2f}  {err}"
        )
    return lines


def totals(rows: list[dict]) -> list[str]:
    lines = []
    for mech in MECHANISMS:
        mine = [r for r in rows if r["mechanism"] == mech]
        if not mine:
            continue
        counts = {o: sum(r["outcome"] == o for r in mine) for o in CODES if o != "n/a"}
        text = ", ".join(f"{o} {c}" for o, c in counts.items() if c)
        lines.append(f"{mech:10s} {len(mine):4d} cells: {text}")
    released = sum(r["outcome"] == "released" for r in rows)
    lines.append(f"released: {released} of {len(rows)} cells ({released / max(1, len(rows)):.0%})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="hinge, k in {0, 8}, three mechanisms")
    parser.add_argument("--out", default=None, help=f"folder of the JSON (default {RESULTS})")
    parser.add_argument("--mechanisms", default=",".join(MECHANISMS), help="comma-separated")
    parser.add_argument("--n", type=int, default=N)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", type=float, default=120.0, help="seconds per cell (0: none)")
    parser.add_argument(
        "--saddle-budget", type=float, default=20.0, help="seconds per saddle cell (0: none)"
    )
    parser.add_argument("--strict", action="store_true", help="exit 1 unless every cell released")
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated")
    parser.add_argument(
        "--warnings-as-errors",
        action="store_true",
        help="raise every warning but LipschitzClaimWarning inside the releases",
    )
    args = parser.parse_args(argv)
    WARNINGS[0] = "error" if args.warnings_as_errors else "ignore"
    families = {f.strip() for f in args.families.split(",") if f.strip()}
    if families - set(FAMILIES):
        parser.error(f"unknown families; choose from {', '.join(FAMILIES)}")
    mechanisms = tuple(m.strip() for m in args.mechanisms.split(",") if m.strip())
    unknown = set(mechanisms) - set(MECHANISMS)
    if unknown:
        parser.error(f"unknown mechanisms {sorted(unknown)}; choose from {', '.join(MECHANISMS)}")
    if args.smoke:
        mechanisms = tuple(m for m in mechanisms if m in ("op", "op_ext", "dop"))
    n = 20 if args.smoke else args.n
    print(f"dpcvx {dpcvx.__version__} from {Path(dpcvx.__file__).parent}")
    print(
        f"n = {n}, d = {D}, lam = {LAM} unless stated, epsilon = {EPSILON}, C = {C_EXT}, "
        f"declared L = {DECLARED_L}, budget {args.budget:g} s per cell "
        f"({args.saddle_budget:g} s per saddle cell)",
        flush=True,
    )
    rows = []
    start = time.perf_counter()
    plan = [
        (c, m)
        for c in cells(args.smoke, n, args.seed, mechanisms)
        if c.family in families
        for m in mechanisms
    ]
    plan.sort(key=lambda cm: cm[1] == "saddle")  # the slow saddle cells last
    for cell, mech in plan:
        budget = args.saddle_budget if mech == "saddle" else args.budget
        row = run_cell(cell, mech, args.seed, budget)
        if row is None:
            continue
        rows.append(row)
        print(
            f"  {cell.family} {cell.loss} {cell.param} {mech}: {row['outcome']} "
            f"({row['seconds']:.1f} s) {(row['error'] or '')[:100]}",
            file=sys.stderr,
            flush=True,
        )
    lines = outlier_grid(rows) + [""] + other_table(rows) + [""] + frontier(rows)
    lines += [""] + totals(rows)
    lines.append(f"total {time.perf_counter() - start:.1f} s")
    print("\n".join(lines))
    out = Path(args.out) if args.out else RESULTS
    name = "bench_aborts_smoke.json" if args.smoke else "bench_aborts.json"
    write_json(
        {
            "dpcvx": dpcvx.__version__,
            "dpcvx_path": str(Path(dpcvx.__file__).parent),
            "settings": {
                "n": n,
                "d": D,
                "lam": LAM,
                "C": C_EXT,
                "epsilon": EPSILON,
                "declared_lipschitz": DECLARED_L,
                "seed": args.seed,
                "smoke": args.smoke,
                "mechanisms": mechanisms,
            },
            "report": lines,
            "rows": rows,
        },
        out / name,
    )
    if args.strict and any(r["outcome"] != "released" for r in rows):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
