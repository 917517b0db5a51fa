"""Natural CVXPY spellings of domains and losses: does dpcvx certify what a user writes?

A catalogue of domains and losses written the way a user would write them (``cp.abs(w) <= r``
at d = 1 and d > 1, ``cp.norm(w, "inf") <= r``, ``cp.Variable(d, bounds=...)``,
``cp.quad_form(w, P) <= 1``, ``cp.norm(M @ w) <= 1``, ``A @ w <= b``, the simplex, l1 balls,
intersections; hinge, logistic, absolute, squared in three writings, Huber, pinball,
epsilon-insensitive, squared hinge, ``cp.power(cp.abs(r), 1.5)``, ReLU, ``cp.log_sum_exp``,
``cp.norm(x - w)``, a fixed-value parameter, per-example weights ``s * loss``, ...). Each case:

- builds ``dpcvx.Problem`` and runs ``problem.solve(regularization=lam, center=w0)``;
- solves an independent whole-dataset CVXPY problem (the n losses written directly, vectorized,
  the domain written without dpcvx) with Clarabel at tolerance 1e-11, and checks that the
  certified bracket ``[lower, upper]`` contains its optimum (to ``REF_TOL (1 + |F*|)``), that
  dpcvx's point lies in the domain and that its objective there is below ``upper``;
- releases with ``dpcvx.OutputPerturbation(lipschitz=L, regularization=lam)`` at epsilon = 1
  (``L`` bounds every example's Lipschitz constant on the domain for the data at hand);
- for the cases marked ``ext``: the Lipschitz extension ``problem.lipschitz_extension(C)``
  solved at ``accuracy=1e-8`` against the joint program of paper 000 (Lemma 2.7) written in
  CVXPY, and a ``dpcvx.DoubleOutputPerturbation(C=C, regularization=lam)`` release.

``w0`` is the projection of the origin onto the domain (computed by CVXPY, public). A case is
*certified* when nothing raised, the gap is at most ``CERT_GAP (1 + |F*|)`` and the bracket and
the point check out.

    python benchmarks/bench_spellings.py [--smoke] [--out DIR] [--only SUBSTRING] [--strict]

Exit status 1 if a certified bracket misses the reference optimum (a certificate bug), or,
with ``--strict``, if any case is not certified or any release fails.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
import traceback
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import cvxpy as cp
import numpy as np
from _common import results_dir, write_json

import dpcvx

RESULTS = results_dir()
#: Clarabel settings of the reference solves
REFERENCE_SETTINGS = {"tol_gap_abs": 1e-11, "tol_gap_rel": 1e-11, "tol_feas": 1e-11}
#: allowed error of a reference optimum, relative to 1 + |F*|
REF_TOL = 1e-8
#: a certified gap above CERT_GAP (1 + |F*|) counts as "loose"
CERT_GAP = 1e-6
#: allowed violation of a domain constraint by a returned point
DOMAIN_TOL = 1e-8
LAM, C_EXT, EPSILON = 0.1, 0.5, 1.0


# ============================================================================ losses
@dataclass(frozen=True)
class Loss:
    """One example's loss as a user writes it, and the n losses written directly.

    ``build(w, d)`` returns ``(loss, params)``: the expression and its per-example parameters
    by data key (``"x"``, ``"y"``, ``"s"``). ``vec(P, data)`` gives the n losses at the rows
    of the ``(n, d)`` expression ``P`` (row i is the point where example i is evaluated).
    ``lipschitz(data, R)`` bounds every example's Lipschitz constant on ``||w|| <= R``.
    """

    build: Callable
    vec: Callable
    lipschitz: Callable
    task: str = "class"  # "class" (y = +-1), "reg" (y in [-1, 1]), "mean" (x only)
    keys: tuple[str, ...] = ("x", "y")


def _xy(d):
    return cp.Parameter(d, name="x"), cp.Parameter(name="y")


def _inner(P, X):
    """The n inner products <x_i, P_i>."""
    return cp.sum(cp.multiply(X, P), axis=1)


def _norms(data):
    return np.linalg.norm(data["x"], axis=1)


def _lip_linear(scale: float = 1.0):
    """``|psi'| <= scale`` composed with ``<x, w>`` (times ``|y|`` for a margin)."""
    return lambda data, R: scale * float(np.max(_norms(data) * np.abs(data.get("y", 1.0))))


def _lip_resid(deriv: Callable[[np.ndarray], np.ndarray]):
    """``psi(<x, w> - y)`` with ``|psi'(r)| <= deriv(|r|)`` increasing, ``|r| <= ||x|| R + |y|``."""

    def lip(data, R):
        norms = _norms(data)
        return float(np.max(deriv(norms * R + np.abs(data["y"])) * norms))

    return lip


def _simple(expr_of: Callable, vec_of: Callable, lipschitz, task="class", keys=("x", "y")) -> Loss:
    """A loss of the pair (x, y): ``expr_of(w, x, y)`` and ``vec_of(P, X, Y)``."""

    def build(w, d):
        x, y = _xy(d)
        return expr_of(w, x, y), {"x": x, "y": y}

    return Loss(build, lambda P, data: vec_of(P, data["x"], data.get("y")), lipschitz, task, keys)


TAU, EPS_INS, HUBER_M = 0.3, 0.1, 0.5


def _margin(P, X, Y):
    return cp.multiply(Y, _inner(P, X))


def _resid(P, X, Y):
    return _inner(P, X) - Y


def _pinball_vec(P, X, Y):
    r = Y - _inner(P, X)
    return cp.maximum(TAU * r, (TAU - 1) * r)


def _lse_vec(P, X, Y):
    z = -_margin(P, X, Y)
    n = X.shape[0]
    return cp.log_sum_exp(cp.hstack([np.zeros((n, 1)), cp.reshape(z, (n, 1), order="C")]), axis=1)


def _mean_loss(expr_of, vec_of, lipschitz) -> Loss:
    def build(w, d):
        x = cp.Parameter(d, name="x")
        return expr_of(w, x), {"x": x}

    return Loss(build, lambda P, data: vec_of(P, data["x"]), lipschitz, "mean", ("x",))


def _param_margin_build(w, d):
    x, y = _xy(d)
    m = cp.Parameter(name="margin", value=1.0)
    return cp.pos(m - y * (x @ w)), {"x": x, "y": y}


def _param_tau_build(w, d):
    x, y = _xy(d)
    tau = cp.Parameter(name="tau", value=TAU)
    r = y - x @ w
    return cp.maximum(tau * r, (tau - 1) * r), {"x": x, "y": y}


def _param_scale_build(w, d):
    x, y = _xy(d)
    s = cp.Parameter(nonneg=True, name="scale", value=0.3)
    return s * cp.logistic(-y * (x @ w)), {"x": x, "y": y}


def _weighted_build(psi: str):
    def build(w, d):
        x, y = _xy(d)
        s = cp.Parameter(nonneg=True, name="s")
        inner = cp.pos(1 - y * (x @ w)) if psi == "hinge" else cp.abs(x @ w - y)
        return s * inner, {"x": x, "y": y, "s": s}

    return build


def _weighted_vec(psi: str):
    def vec(P, data):
        X, Y, S = data["x"], data["y"], data["s"]
        inner = cp.pos(1 - _margin(P, X, Y)) if psi == "hinge" else cp.abs(_resid(P, X, Y))
        return cp.multiply(S, inner)

    return vec


def _lip_weighted(data, R):
    return float(np.max(data["s"] * _norms(data) * np.maximum(np.abs(data["y"]), 1.0)))


LOSSES: dict[str, Loss] = {
    "hinge": _simple(
        lambda w, x, y: cp.pos(1 - y * (x @ w)),
        lambda P, X, Y: cp.pos(1 - _margin(P, X, Y)),
        _lip_linear(),
    ),
    "hinge_maximum": _simple(
        lambda w, x, y: cp.maximum(0, 1 - y * (x @ w)),
        lambda P, X, Y: cp.pos(1 - _margin(P, X, Y)),
        _lip_linear(),
    ),
    "hinge_x_times_y": _simple(
        lambda w, x, y: cp.pos(1 - (x @ w) * y),
        lambda P, X, Y: cp.pos(1 - _margin(P, X, Y)),
        _lip_linear(),
    ),
    "logistic": _simple(
        lambda w, x, y: cp.logistic(-y * (x @ w)),
        lambda P, X, Y: cp.logistic(-_margin(P, X, Y)),
        _lip_linear(),
    ),
    "logistic_lse": _simple(
        lambda w, x, y: cp.log_sum_exp(cp.hstack([0, -y * (x @ w)])),
        _lse_vec,
        _lip_linear(),
    ),
    "absolute": _simple(
        lambda w, x, y: cp.abs(x @ w - y),
        lambda P, X, Y: cp.abs(_resid(P, X, Y)),
        _lip_linear(),
        "reg",
    ),
    "absolute_norm1": _simple(
        lambda w, x, y: cp.norm1(x @ w - y),
        lambda P, X, Y: cp.abs(_resid(P, X, Y)),
        _lip_linear(),
        "reg",
    ),
    "square": _simple(
        lambda w, x, y: cp.square(x @ w - y),
        lambda P, X, Y: cp.square(_resid(P, X, Y)),
        _lip_resid(lambda r: 2 * r),
        "reg",
    ),
    "sum_squares": _simple(
        lambda w, x, y: cp.sum_squares(x @ w - y),
        lambda P, X, Y: cp.square(_resid(P, X, Y)),
        _lip_resid(lambda r: 2 * r),
        "reg",
    ),
    "pow2_operator": _simple(
        lambda w, x, y: (x @ w - y) ** 2,
        lambda P, X, Y: cp.square(_resid(P, X, Y)),
        _lip_resid(lambda r: 2 * r),
        "reg",
    ),
    "half_square": _simple(
        lambda w, x, y: 0.5 * cp.square(y - x @ w),
        lambda P, X, Y: 0.5 * cp.square(_resid(P, X, Y)),
        _lip_resid(lambda r: r),
        "reg",
    ),
    "huber": _simple(
        lambda w, x, y: cp.huber(x @ w - y, HUBER_M),
        lambda P, X, Y: cp.huber(_resid(P, X, Y), HUBER_M),
        _lip_linear(2 * HUBER_M),
        "reg",
    ),
    "pinball": _simple(
        lambda w, x, y: cp.maximum(TAU * (y - x @ w), (TAU - 1) * (y - x @ w)),
        _pinball_vec,
        _lip_linear(max(TAU, 1 - TAU)),
        "reg",
    ),
    "pinball_pos_neg": _simple(
        lambda w, x, y: TAU * cp.pos(y - x @ w) + (1 - TAU) * cp.neg(y - x @ w),
        _pinball_vec,
        _lip_linear(max(TAU, 1 - TAU)),
        "reg",
    ),
    "pinball_abs_linear": _simple(
        lambda w, x, y: 0.5 * cp.abs(y - x @ w) + (TAU - 0.5) * (y - x @ w),
        _pinball_vec,
        _lip_resid(lambda r: np.full_like(r, max(TAU, 1 - TAU))),
        "reg",
    ),
    "absolute_plus_hinge_of_residual": _simple(
        lambda w, x, y: cp.abs(x @ w - y) + 0.5 * cp.pos(x @ w - y),
        lambda P, X, Y: cp.abs(_resid(P, X, Y)) + 0.5 * cp.pos(_resid(P, X, Y)),
        _lip_resid(lambda r: np.full_like(r, 1.5)),
        "reg",
    ),
    "eps_insensitive_pos": _simple(
        lambda w, x, y: cp.pos(cp.abs(x @ w - y) - EPS_INS),
        lambda P, X, Y: cp.pos(cp.abs(_resid(P, X, Y)) - EPS_INS),
        _lip_linear(),
        "reg",
    ),
    "eps_insensitive_maximum": _simple(
        lambda w, x, y: cp.maximum(0, cp.abs(x @ w - y) - EPS_INS),
        lambda P, X, Y: cp.pos(cp.abs(_resid(P, X, Y)) - EPS_INS),
        _lip_linear(),
        "reg",
    ),
    "squared_hinge": _simple(
        lambda w, x, y: cp.square(cp.pos(1 - y * (x @ w))),
        lambda P, X, Y: cp.square(cp.pos(1 - _margin(P, X, Y))),
        lambda data, R: float(np.max(2 * (1 + _norms(data) * R) * _norms(data))),
    ),
    "power_abs_1.5": _simple(
        lambda w, x, y: cp.power(cp.abs(x @ w - y), 1.5),
        lambda P, X, Y: cp.power(cp.abs(_resid(P, X, Y)), 1.5),
        _lip_resid(lambda r: 1.5 * np.sqrt(r)),
        "reg",
    ),
    "relu": _simple(
        lambda w, x, y: cp.pos(x @ w),
        lambda P, X, Y: cp.pos(_inner(P, X)),
        lambda data, R: float(np.max(_norms(data))),
        "mean",
        ("x",),
    ),
    "poisson": _simple(
        lambda w, x, y: cp.exp(x @ w) - y * (x @ w),
        lambda P, X, Y: cp.exp(_inner(P, X)) - cp.multiply(Y, _inner(P, X)),
        lambda data, R: float(
            np.max((np.exp(_norms(data) * R) + np.abs(data["y"])) * _norms(data))
        ),
        "count",
    ),
    "hinge_plus_l1": _simple(
        lambda w, x, y: cp.pos(1 - y * (x @ w)) + 0.1 * cp.norm1(w),
        lambda P, X, Y: cp.pos(1 - _margin(P, X, Y)) + 0.1 * cp.norm(P, 1, axis=1),
        lambda data, R: float(np.max(_norms(data))) + 0.1 * math.sqrt(data["x"].shape[1]),
    ),
    "absolute_plus_square": _simple(
        lambda w, x, y: cp.abs(x @ w - y) + 0.5 * cp.square(x @ w - y),
        lambda P, X, Y: cp.abs(_resid(P, X, Y)) + 0.5 * cp.square(_resid(P, X, Y)),
        _lip_resid(lambda r: 1 + r),
        "reg",
    ),
    "norm_x_minus_w": _mean_loss(
        lambda w, x: cp.norm(x - w),
        lambda P, X: cp.norm(X - P, 2, axis=1),
        lambda data, R: 1.0,
    ),
    "norm1_x_minus_w": _mean_loss(
        lambda w, x: cp.norm1(x - w),
        lambda P, X: cp.norm(X - P, 1, axis=1),
        lambda data, R: math.sqrt(data["x"].shape[1]),
    ),
    "half_sum_squares_w_minus_x": _mean_loss(
        lambda w, x: 0.5 * cp.sum_squares(w - x),
        lambda P, X: 0.5 * cp.sum(cp.square(P - X), axis=1),
        lambda data, R: R + float(np.max(_norms(data))),
    ),
    "param_margin_fixed": Loss(
        _param_margin_build,
        lambda P, data: cp.pos(1 - _margin(P, data["x"], data["y"])),
        _lip_linear(),
    ),
    "param_tau_pinball_fixed": Loss(
        _param_tau_build,
        lambda P, data: _pinball_vec(P, data["x"], data["y"]),
        _lip_linear(max(TAU, 1 - TAU)),
        "reg",
    ),
    "param_scale_logistic_fixed": Loss(
        _param_scale_build,
        lambda P, data: 0.3 * cp.logistic(-_margin(P, data["x"], data["y"])),
        _lip_linear(0.3),
    ),
    "weighted_hinge": Loss(
        _weighted_build("hinge"), _weighted_vec("hinge"), _lip_weighted, "class", ("x", "y", "s")
    ),
    "weighted_absolute": Loss(
        _weighted_build("abs"), _weighted_vec("abs"), _lip_weighted, "reg", ("x", "y", "s")
    ),
    "constant_weight_hinge": _simple(
        lambda w, x, y: 0.5 * cp.pos(1 - y * (x @ w)),
        lambda P, X, Y: 0.5 * cp.pos(1 - _margin(P, X, Y)),
        _lip_linear(0.5),
    ),
}


# ============================================================================ cases
@dataclass(frozen=True)
class Case:
    """One spelling. ``domain(w)`` is what the user passes to ``dpcvx.Problem``; ``ref(w)`` the
    same set written for the reference solve (default: ``domain``); ``bounds`` goes to
    ``cp.Variable(d, bounds=...)`` on the dpcvx side only."""

    name: str
    kind: str  # "domain" or "loss"
    d: int
    loss: str
    domain: Callable[[cp.Expression], list]
    ref: Callable[[cp.Expression], list] | None = None
    bounds: tuple | None = None
    ext: bool = False
    n: int = 60
    smoke: bool = False
    extra: dict = field(default_factory=dict)

    def reference_domain(self, w) -> list:
        return (self.ref or self.domain)(w)


def _ball(r=1.0):
    return lambda w: [cp.norm(w, 2) <= r]


def _cases() -> list[Case]:
    rng = np.random.default_rng(20240607)
    c3 = np.array([0.2, -0.1, 0.15])
    P3 = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, -0.2], [0.0, -0.2, 1.5]])
    M3 = np.array([[1.5, 0.2, 0.0], [0.0, 1.0, 0.4], [0.3, 0.0, 2.0]])
    A3 = np.vstack([np.eye(3), -np.eye(3), np.ones((1, 3)), [[1.0, -1.0, 0.0]]])
    b3 = np.r_[1.0, 0.8, 0.9, 0.6, 0.7, 1.0, 1.2, 0.5]
    A2 = np.array([[-1.0, 0.0], [0.0, -1.0], [1.0, 1.0]])
    b2 = np.array([0.5, 0.5, 0.8])
    lo5, hi5 = -np.linspace(0.3, 0.9, 5), np.linspace(0.5, 1.0, 5)
    P5 = np.diag(np.linspace(0.8, 2.0, 5)) + 0.1 * np.triu(rng.normal(size=(5, 5)), 1)
    P5 = P5 @ P5.T
    D = "domain"
    H = "hinge"
    out = [
        # ------------------------------------------------------------------ boxes
        Case("abs_le_1_d1", D, 1, H, lambda w: [cp.abs(w) <= 1], smoke=True),
        Case("abs_le_1_d1_absolute", D, 1, "absolute", lambda w: [cp.abs(w) <= 1]),
        Case("abs_le_0.5_d3", D, 3, H, lambda w: [cp.abs(w) <= 0.5], smoke=True),
        Case("abs_le_0.5_d5_absolute", D, 5, "absolute", lambda w: [cp.abs(w) <= 0.5]),
        Case(
            "abs_shift_vec_radius", D, 3, H, lambda w: [cp.abs(w - c3) <= np.array([0.3, 0.5, 0.7])]
        ),
        Case("norm_inf_le_0.5", D, 3, H, lambda w: [cp.norm(w, "inf") <= 0.5]),
        Case("norm_inf_atom_d1", D, 1, "absolute", lambda w: [cp.norm_inf(w) <= 0.7]),
        Case("max_abs_le_0.5", D, 3, H, lambda w: [cp.max(cp.abs(w)) <= 0.5]),
        Case("two_sided_box", D, 5, H, lambda w: [w >= lo5, w <= hi5]),
        Case("two_sided_box_d1", D, 1, H, lambda w: [w >= -0.3, w <= 0.8]),
        Case("two_sided_reversed", D, 3, H, lambda w: [-1 <= w, 1 >= w]),
        Case("two_sided_scalar_lo_hi", D, 3, "absolute", lambda w: [w >= -0.4, w <= 0.6]),
        Case(
            "bounds_var_empty_domain",
            D,
            3,
            H,
            lambda w: [],
            ref=lambda w: [w >= -1, w <= 1],
            bounds=(-1, 1),
            smoke=True,
        ),
        Case(
            "bounds_var_d1_empty_domain",
            D,
            1,
            "absolute",
            lambda w: [],
            ref=lambda w: [w >= -0.5, w <= 0.5],
            bounds=(-0.5, 0.5),
        ),
        Case(
            "bounds_var_plus_ball",
            D,
            3,
            H,
            lambda w: [cp.norm(w) <= 1],
            ref=lambda w: [cp.norm(w) <= 1, w >= -0.6, w <= 0.6],
            bounds=(-0.6, 0.6),
        ),
        Case(
            "bounds_var_redundant_abs",
            D,
            3,
            H,
            lambda w: [cp.abs(w) <= 1],
            ref=lambda w: [w >= -1, w <= 1],
            bounds=(-1, 1),
        ),
        Case(
            "bounds_var_vector",
            D,
            5,
            "absolute",
            lambda w: [],
            ref=lambda w: [w >= lo5, w <= hi5],
            bounds=(lo5, hi5),
        ),
        # ------------------------------------------------------------------ l2 balls
        Case("norm_le_1", D, 3, H, _ball(), ext=True, smoke=True),
        Case("norm_le_1_d1", D, 1, H, _ball()),
        Case("norm2_shifted", D, 3, H, lambda w: [cp.norm(w - c3, 2) <= 0.8]),
        Case("norm2_atom_shifted", D, 3, "logistic", lambda w: [cp.norm2(w - c3) <= 1]),
        Case("pnorm_2", D, 3, H, lambda w: [cp.pnorm(w, 2) <= 1]),
        Case("sum_squares_le_r2", D, 3, H, lambda w: [cp.sum_squares(w) <= 0.8**2], ext=True),
        Case("quad_form_iso", D, 3, H, lambda w: [cp.quad_form(w, 2.0 * np.eye(3)) <= 0.9**2]),
        Case("square_le_d1", D, 1, "absolute", lambda w: [cp.square(w) <= 0.49]),
        Case("norm_ball_d5_logistic", D, 5, "logistic", _ball(0.7)),
        # ------------------------------------------------------------------ ellipsoids
        Case("quad_form_P", D, 3, H, lambda w: [cp.quad_form(w, P3) <= 1], ext=True),
        Case("quad_form_P_d5", D, 5, "absolute", lambda w: [cp.quad_form(w, P5) <= 1]),
        Case("norm_M_w", D, 3, H, lambda w: [cp.norm(M3 @ w) <= 1], ext=True, smoke=True),
        Case("norm_M_w_shifted", D, 3, "logistic", lambda w: [cp.norm(M3 @ (w - c3)) <= 1]),
        # ------------------------------------------------------------------ polytopes
        Case("polytope_A_w_le_b", D, 3, H, lambda w: [A3 @ w <= b3], ext=True),
        Case("polytope_triangle_d2", D, 2, "absolute", lambda w: [A2 @ w <= b2]),
        Case("simplex_eq", D, 3, H, lambda w: [w >= 0, cp.sum(w) == 1]),
        Case("simplex_eq_d5_logistic", D, 5, "logistic", lambda w: [w >= 0, cp.sum(w) == 1]),
        Case("solid_simplex", D, 3, "absolute", lambda w: [w >= 0, cp.sum(w) <= 1]),
        # ------------------------------------------------------------------ l1 balls
        Case("norm1_le_1", D, 3, H, lambda w: [cp.norm1(w) <= 1]),
        Case("sum_abs_le_1", D, 3, H, lambda w: [cp.sum(cp.abs(w)) <= 1]),
        Case("norm_1_shifted", D, 3, "absolute", lambda w: [cp.norm(w - c3, 1) <= 0.8]),
        # ------------------------------------------------------------------ intersections
        Case(
            "ball_and_abs_0.6",
            D,
            3,
            H,
            lambda w: [cp.norm(w, 2) <= 1, cp.abs(w) <= 0.6],
            ext=True,
            smoke=True,
        ),
        Case(
            "ball_and_box_two_sided",
            D,
            3,
            "absolute",
            lambda w: [cp.norm(w) <= 1, w >= -0.5, w <= 0.7],
            ext=True,
        ),
        Case(
            "ball_plus_equality",
            D,
            3,
            H,
            lambda w: [cp.norm(w) <= 1, cp.sum(w) == 0.3],
            ext=True,
        ),
        Case(
            "ball_and_halfspace",
            D,
            3,
            "logistic",
            lambda w: [cp.norm(w) <= 1, w[0] >= 0.2],
        ),
        Case(
            "box_and_l1",
            D,
            3,
            "absolute",
            lambda w: [cp.abs(w) <= 0.6, cp.norm1(w) <= 1],
        ),
        Case(
            "ellipsoid_and_box",
            D,
            3,
            H,
            lambda w: [cp.quad_form(w, P3) <= 1, cp.abs(w) <= 0.5],
            ext=True,
        ),
    ]
    L = "loss"
    ball = _ball()
    losses = [
        ("hinge", True),
        ("hinge_maximum", False),
        ("hinge_x_times_y", False),
        ("logistic", True),
        ("logistic_lse", False),
        ("absolute", True),
        ("absolute_norm1", False),
        ("square", True),
        ("sum_squares", False),
        ("pow2_operator", False),
        ("half_square", False),
        ("huber", False),
        ("pinball", False),
        ("pinball_pos_neg", True),
        ("pinball_abs_linear", True),
        ("absolute_plus_hinge_of_residual", True),
        ("eps_insensitive_pos", True),
        ("eps_insensitive_maximum", False),
        ("squared_hinge", True),
        ("power_abs_1.5", False),
        ("relu", False),
        ("poisson", False),
        ("hinge_plus_l1", False),
        ("absolute_plus_square", False),
        ("norm_x_minus_w", True),
        ("norm1_x_minus_w", False),
        ("half_sum_squares_w_minus_x", False),
        ("param_margin_fixed", False),
        ("param_tau_pinball_fixed", False),
        ("param_scale_logistic_fixed", False),
        ("weighted_hinge", True),
        ("weighted_absolute", False),
        ("constant_weight_hinge", False),
    ]
    smoke_losses = {"logistic", "squared_hinge", "weighted_hinge", "param_margin_fixed"}
    for name, ext in losses:
        out.append(Case(f"{name}", L, 3, name, ball, ext=ext, smoke=name in smoke_losses))
    out += [
        Case("absolute_box_d1_kink", L, 1, "absolute", lambda w: [cp.abs(w) <= 1]),
        Case("eps_insensitive_box", L, 3, "eps_insensitive_pos", lambda w: [cp.abs(w) <= 0.5]),
        Case("squared_hinge_box", L, 3, "squared_hinge", lambda w: [w >= -0.5, w <= 0.5]),
        Case("power_abs_1.5_box", L, 3, "power_abs_1.5", lambda w: [cp.abs(w) <= 0.5]),
    ]
    return out


# ============================================================================ data
def make_data(case: Case, seed: int) -> dict[str, np.ndarray]:
    """Seeded synthetic data: rows in the unit ball; labels +-1, residual targets in [-1, 1],
    counts, or weights in [0.5, 2] as the loss needs."""
    rng = np.random.default_rng(zlib.crc32(case.name.encode()) + 7919 * seed)
    n, d = case.n, case.d
    X = rng.normal(size=(n, d)) / math.sqrt(d)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    w_true = rng.normal(size=d)
    w_true /= np.linalg.norm(w_true)
    spec = LOSSES[case.loss]
    data = {"x": X}
    if spec.task == "class":
        data["y"] = np.where(X @ w_true + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    elif spec.task == "reg":
        data["y"] = np.clip(X @ w_true + 0.2 * rng.normal(size=n), -1, 1)
    elif spec.task == "count":
        data["y"] = rng.poisson(np.exp(0.5 * X @ w_true)).astype(float)
    if "s" in spec.keys:
        data["s"] = rng.uniform(0.5, 2.0, size=n)
    return data


# ============================================================================ reference
def _clarabel(prob: cp.Problem, settings: dict | None = None) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            prob.solve(solver=cp.CLARABEL, **(settings or REFERENCE_SETTINGS))
        except cp.error.SolverError:
            pass  # the status stays unsolved; the caller looks at it


#: the reference ladder: Clarabel settings and the error allowed on the optimum they give
#: (relative to 1 + |F*|); the first ``optimal`` status is used
REFERENCE_LADDER = (
    (REFERENCE_SETTINGS, REF_TOL),
    ({"tol_gap_abs": 1e-9, "tol_gap_rel": 1e-9, "tol_feas": 1e-9}, 1e-6),
    ({}, 1e-5),
)


def _rows(w: cp.Expression, n: int) -> cp.Expression:
    """The ``(n, d)`` expression whose every row is ``w``."""
    return np.ones((n, 1)) @ cp.reshape(w, (1, w.shape[0]), order="C")


def domain_geometry(case: Case) -> tuple[np.ndarray, float]:
    """``w0`` (the projection of the origin onto W) and ``R >= max ||w||`` over W (from the
    coordinate ranges), both from CVXPY on the reference domain (public)."""
    w = cp.Variable(case.d)
    cons = case.reference_domain(w)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(w)), cons)
    _clarabel(prob)
    w0 = np.asarray(w.value, float).reshape(case.d)
    extent = np.zeros(case.d)
    for j in range(case.d):
        for sign in (1.0, -1.0):
            p = cp.Problem(cp.Maximize(sign * w[j]), cons)
            _clarabel(p)
            extent[j] = max(extent[j], abs(float(p.value)))
    return w0, float(np.linalg.norm(extent)) * (1 + 1e-6) + 1e-9


def reference(case: Case, data, w0: np.ndarray, C: float | None = None) -> dict:
    """The regularized ERM (``C`` None) or its Lipschitz-extension joint program (paper 000,
    Lemma 2.7) written directly in CVXPY, solved by Clarabel at tight tolerances."""
    n, d = case.n, case.d
    spec = LOSSES[case.loss]
    w = cp.Variable(d)
    cons = case.reference_domain(w)
    reg = LAM / 2 * cp.sum_squares(w - w0)
    if C is None:
        objective = cp.sum(spec.vec(_rows(w, n), data)) / n + reg
    else:
        Yp = cp.Variable((n, d))
        for i in range(n):
            cons += case.reference_domain(Yp[i])
        dist = cp.norm(_rows(w, n) - Yp, 2, axis=1)
        objective = cp.sum(spec.vec(Yp, data) + C * dist) / n + reg
    prob = cp.Problem(cp.Minimize(objective), cons)
    start = time.perf_counter()
    tol = REFERENCE_LADDER[-1][1]
    for settings, allowed in REFERENCE_LADDER:
        _clarabel(prob, settings)
        if prob.status == "optimal":
            tol = allowed
            break
    return {
        "value": float(prob.value) if prob.value is not None else float("nan"),
        "status": prob.status,
        "tol": tol,
        "seconds": time.perf_counter() - start,
        "w": w,
        "objective": objective if C is None else None,
    }


def in_domain(case: Case, point) -> bool:
    """Every reference constraint holds at ``point`` to ``DOMAIN_TOL``."""
    if point is None:
        return False
    point = np.asarray(point, float).reshape(case.d)
    if not np.all(np.isfinite(point)):
        return False
    v = cp.Variable(case.d)
    v.value = point
    return all(float(np.max(c.violation())) <= DOMAIN_TOL for c in case.reference_domain(v))


# ============================================================================ one case
def _error(exc: BaseException, width: int = 160) -> str:
    """The exception's type and first line; for an exception that is not dpcvx's own, where it
    was raised (the innermost frame)."""
    text = str(exc).strip().splitlines()
    where = ""
    if not isinstance(exc, dpcvx.DpcvxError) and exc.__traceback__ is not None:
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        where = f" [at {Path(frame.filename).name}:{frame.lineno}]"
    return f"{type(exc).__name__}: {text[0] if text else ''}"[: width - len(where)] + where


def _classify(exc: BaseException, stage: str) -> str:
    if isinstance(exc, dpcvx.CertificationError):
        return "uncertified"
    if isinstance(exc, dpcvx.DpcvxError) and stage == "build":
        return "refused"
    return "crashed"


def build_problem(case: Case, data) -> tuple[dpcvx.Problem, cp.Variable]:
    spec = LOSSES[case.loss]
    if case.bounds is None:
        w = cp.Variable(case.d)
    else:
        w = cp.Variable(case.d, bounds=list(case.bounds))
    loss, params = spec.build(w, case.d)
    bound = {params[k]: data[k] for k in spec.keys}
    return dpcvx.Problem(loss, w, data=bound, domain=case.domain(w)), w


def _bracket(sol, ref: dict, case: Case, check_point: bool) -> str:
    """``ok``, or what is wrong: ``LOW>F*`` / ``UP<F*`` (the bracket misses the reference
    optimum), ``W-out`` (dpcvx's point outside W), ``F(w)>UP`` (the objective at dpcvx's point
    above its upper bound), ``ref?`` (the reference did not solve)."""
    value = ref["value"]
    if ref["status"] not in ("optimal",) or not math.isfinite(value):
        return "ref?"
    tol = ref["tol"] * (1 + abs(value))
    if sol.lower > value + tol:
        return "LOW>F*"
    if sol.upper < value - tol:
        return "UP<F*"
    if check_point:
        if not in_domain(case, sol.w):
            return "W-out"
        ref["w"].value = np.asarray(sol.w, float).reshape(case.d)
        if float(ref["objective"].value) > sol.upper + tol:
            return "F(w)>UP"
    return "ok"


def _release(case: Case, fn: Callable) -> tuple[str, str | None]:
    try:
        res = fn()
    except Exception as exc:  # noqa: BLE001 - every failure is a measurement here
        return ("abort" if isinstance(exc, dpcvx.CertificationError) else "error"), _error(exc)
    w = np.asarray(res.w, float)
    if not np.all(np.isfinite(w)):
        return "nonfinite", None
    if not in_domain(case, w):
        return "outside", None
    return "ok", None


def run_case(case: Case, seed: int, with_ext: bool = True) -> dict:
    start = time.perf_counter()
    data = make_data(case, seed)
    spec = LOSSES[case.loss]
    row: dict = {"case": case.name, "kind": case.kind, "d": case.d, "n": case.n}
    row["loss"], row["bounds"] = case.loss, case.bounds is not None
    w0, R = domain_geometry(case)
    ref = reference(case, data, w0)
    row["reference"] = {k: ref[k] for k in ("value", "status", "tol", "seconds")}
    row.update(outcome=None, error=None, gap=None, lower=None, upper=None, bracket=None)
    problem = None
    try:
        problem, _ = build_problem(case, data)
    except Exception as exc:  # noqa: BLE001
        row["outcome"], row["error"] = _classify(exc, "build"), _error(exc)
        row["traceback"] = traceback.format_exc(limit=-3)
    if problem is not None:
        try:
            sol = problem.solve(regularization=LAM, center=w0)
        except Exception as exc:  # noqa: BLE001
            row["outcome"], row["error"] = _classify(exc, "solve"), _error(exc)
            row["traceback"] = traceback.format_exc(limit=-3)
        else:
            row.update(gap=float(sol.gap), lower=float(sol.lower), upper=float(sol.upper))
            row["bracket"] = _bracket(sol, ref, case, check_point=True)
            scale = 1 + abs(ref["value"]) if math.isfinite(ref["value"]) else 1.0
            if row["bracket"] not in ("ok", "ref?"):
                row["outcome"] = "WRONG"
            elif not sol.gap <= CERT_GAP * scale:
                row["outcome"] = "loose"
            else:
                row["outcome"] = "certified"
    row["lipschitz"] = L = spec.lipschitz(data, R) * (1 + 1e-6)
    row["private"], row["private_error"] = ("skipped", None)
    if problem is not None:
        mech = dpcvx.OutputPerturbation(lipschitz=L, regularization=LAM)
        row["private"], row["private_error"] = _release(
            case, lambda: problem.solve_private(mech, epsilon=EPSILON, rng=seed)
        )
    row.update(ext=None, ext_gap=None, ext_bracket=None, ext_error=None, dop=None, dop_error=None)
    if case.ext and with_ext and problem is not None:
        ext_ref = reference(case, data, w0, C=C_EXT)
        row["ext_reference"] = {k: ext_ref[k] for k in ("value", "status", "tol", "seconds")}
        try:
            ext_sol = problem.lipschitz_extension(C_EXT).solve(
                regularization=LAM, center=w0, accuracy=1e-8
            )
        except Exception as exc:  # noqa: BLE001
            row["ext"], row["ext_error"] = _classify(exc, "solve"), _error(exc)
        else:
            row["ext_gap"] = float(ext_sol.gap)
            row["ext_bracket"] = _bracket(ext_sol, ext_ref, case, check_point=False)
            if not in_domain(case, ext_sol.w):
                row["ext_bracket"] = "W-out"
            row["ext"] = "certified" if row["ext_bracket"] in ("ok", "ref?") else "WRONG"
        dop = dpcvx.DoubleOutputPerturbation(C=C_EXT, regularization=LAM)
        row["dop"], row["dop_error"] = _release(
            case, lambda: problem.solve_private(dop, epsilon=EPSILON, rng=seed)
        )
    row["seconds"] = time.perf_counter() - start
    return row


# ============================================================================ report
def _fmt(value, spec=".1e") -> str:
    return "-" if value is None else format(value, spec)


def format_row(row: dict) -> str:
    ext = "-"
    if row["ext"] is not None:
        ext = f"{row['ext']}:{_fmt(row['ext_gap'])}" if row["ext_gap"] is not None else row["ext"]
    return (
        f"{row['case']:30s} {row['kind']:6s} {row['outcome']:11s} {_fmt(row['gap']):>8s} "
        f"{row['bracket'] or '-':>7s} {row['private']:>8s} {ext:>20s} {row['dop'] or '-':>6s} "
        f"{row['seconds']:7.2f}"
    )


HEADER = (
    f"{'case':30s} {'kind':6s} {'outcome':11s} {'gap':>8s} {'bracket':>7s} {'private':>8s} "
    f"{'extension (C=' + format(C_EXT, 'g') + ')':>20s} {'dop':>6s} {'seconds':>7s}"
)


def _short(outcome: str, error: str | None) -> str:
    """A release's outcome; the best certified gap when a CertificationError reports one, the
    error's first words otherwise."""
    if not error:
        return outcome
    found = re.search(r"best certified gap was ([0-9.e+-]+)", error)
    if found:
        return f"{outcome} (best gap {found.group(1)})"
    if error.startswith("CertificationError"):
        return outcome
    return f"{outcome} ({error[:80]})"


def summary(rows: list[dict]) -> list[str]:
    n = len(rows)
    k = sum(r["outcome"] == "certified" for r in rows)
    lines = [f"certified: {k} of {n} ({k / n:.0%})" if n else "certified: 0 of 0"]
    priv = sum(r["private"] == "ok" for r in rows)
    lines.append(f"private releases (OutputPerturbation): {priv} of {n}")
    ext_rows = [r for r in rows if r["ext"] is not None]
    if ext_rows:
        tol = [r for r in ext_rows if r["ext"] == "certified" and r["ext_gap"] <= 1e-8]
        dop = sum(r["dop"] == "ok" for r in ext_rows)
        lines.append(f"extension certified to 1e-8: {len(tol)} of {len(ext_rows)}")
        lines.append(f"private releases (DoubleOutputPerturbation): {dop} of {len(ext_rows)}")
    failing = [r for r in rows if r["outcome"] != "certified" or r["private"] != "ok"]
    failing += [r for r in ext_rows if r["ext"] != "certified" or r["dop"] != "ok"]
    if failing:
        lines.append("failing cases (full messages in the JSON):")
    seen = set()
    for r in failing:
        if r["case"] in seen:
            continue
        seen.add(r["case"])
        what = [r["outcome"]]
        if r["error"]:
            what[0] += f" ({r['error'][:110]})"
        elif r["outcome"] == "loose":
            what[0] += f" (gap {r['gap']:.2e})"
        elif r["outcome"] == "WRONG":
            what[0] += f" (bracket {r['bracket']})"
        if r["private"] not in ("ok", "skipped"):
            what.append(f"private {_short(r['private'], r['private_error'])}")
        if r["ext"] is not None and r["ext"] != "certified":
            what.append(f"extension {_short(r['ext'], r['ext_error'])}")
        if r["dop"] is not None and r["dop"] != "ok":
            what.append(f"dop {_short(r['dop'], r['dop_error'])}")
        lines.append(f"  {r['case']}: " + "; ".join(what))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a handful of cases, n = 30")
    parser.add_argument("--out", default=None, help=f"folder of the JSON (default {RESULTS})")
    parser.add_argument("--only", default=None, help="run the cases whose name contains this")
    parser.add_argument("--no-ext", action="store_true", help="skip the extension and DOP")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 unless every case certifies and releases"
    )
    args = parser.parse_args(argv)
    cases = _cases()
    if args.smoke:
        cases = [replace(c, n=30) for c in cases if c.smoke]
    if args.only:
        cases = [c for c in cases if args.only in c.name]
    print(f"dpcvx {dpcvx.__version__} from {Path(dpcvx.__file__).parent}")
    print(
        f"lam = {LAM}, epsilon = {EPSILON}, extension C = {C_EXT}; reference: Clarabel "
        f"{REFERENCE_SETTINGS}; certified = gap <= {CERT_GAP:g} (1 + |F*|) and bracket ok"
    )
    print(HEADER, flush=True)
    rows = []
    for case in cases:
        row = run_case(case, args.seed, with_ext=not args.no_ext)
        rows.append(row)
        print(format_row(row), flush=True)
    lines = summary(rows)
    print("\n".join(lines))
    out = Path(args.out) if args.out else RESULTS
    name = "bench_spellings_smoke.json" if args.smoke else "bench_spellings.json"
    write_json(
        {
            "dpcvx": dpcvx.__version__,
            "dpcvx_path": str(Path(dpcvx.__file__).parent),
            "cvxpy": cp.__version__,
            "settings": {
                "lam": LAM,
                "epsilon": EPSILON,
                "C": C_EXT,
                "reference": REFERENCE_SETTINGS,
                "ref_tol": REF_TOL,
                "cert_gap": CERT_GAP,
                "seed": args.seed,
                "smoke": args.smoke,
            },
            "summary": lines,
            "rows": rows,
        },
        out / name,
    )
    wrong = [r["case"] for r in rows if "WRONG" in (r["outcome"], r["ext"])]
    if wrong:
        print(f"certificate bug: the bracket misses the reference in {wrong}", file=sys.stderr)
        return 1
    if args.strict and any(
        r["outcome"] != "certified" or r["private"] != "ok" or r["dop"] not in (None, "ok")
        for r in rows
    ):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
