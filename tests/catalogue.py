"""A catalogue of reference problems with known optima (model: cvxpy's solver_test_helpers).

Every entry is a regularized ERM problem

    F(w) = (1/n) sum_i f(w; z_i) + (lam/2) ||w - w0||^2      over a compact domain W,

given as: a builder of one example's loss in CVXPY (what a dpcvx user writes), the data, the
domain (built with ``dpcvx.domains`` helpers), ``lam``, the center ``w0``, and a reference optimum
``(value, point)`` computed **without dpcvx**:

- ``closed form``: mean estimation ``0.5 ||w - x||^2`` (the optimum is the projection of the
  regularized mean onto the domain) and ridge regression (normal equations, the ball inactive);
- ``brute force``: hinge and absolute loss in d = 1, minimized exactly over an interval (the
  objective is piecewise quadratic; every breakpoint and every piece's stationary point is
  checked);
- ``clarabel``: a whole-dataset CVXPY problem (the n losses written directly, vectorized, not
  one example's template) solved by Clarabel at tolerance 1e-12.

Each entry also carries its own numpy evaluation of ``F`` and a numpy membership test of ``W``,
so that tests check dpcvx's answers against independent code.
"""

from __future__ import annotations

import functools
import itertools
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import cvxpy as cp
import numpy as np

import dpcvx
from dpcvx import domains

__all__ = [
    "CATALOGUE",
    "DomainCase",
    "LossCase",
    "Reference",
    "by_name",
    "domain_cases",
    "minimize_piecewise_1d",
    "reference_solve",
]

#: absolute error (relative to 1 + |F*|) of a Clarabel reference solved at tolerance 1e-12
CLARABEL_REFERENCE_TOL = 1e-9
#: error of a closed form / exact 1-d minimization (pure float64 rounding)
EXACT_REFERENCE_TOL = 1e-12


def _rng(name: str) -> np.random.Generator:
    """A generator seeded by a stable hash of ``name`` (independent of PYTHONHASHSEED)."""
    return np.random.default_rng(zlib.crc32(name.encode()))


# ============================================================================ domains


@dataclass(frozen=True, eq=False)
class DomainCase:
    """A compact domain with everything a test needs to check dpcvx's view of it.

    ``build`` uses the ``dpcvx.domains`` helper; ``cvx`` writes the same set directly in CVXPY
    (used by reference solves); ``contains(w, tol)`` is a numpy membership test (``tol`` is the
    allowed violation of each inequality, and of each equality); ``max_distance(a)`` is (a lower
    estimate of, exact where noted) ``max_{w in W} ||w - a||``; ``diameter`` is the exact diameter
    when known in closed form, else a lower bound from vertices/samples (``diameter_exact``
    says which); ``vertices`` are points of W (extreme points when enumerable).
    """

    name: str
    d: int
    build: Callable[[cp.Variable], list]
    cvx: Callable[[cp.Variable], list]
    contains: Callable[[np.ndarray, float], bool]
    diameter: float
    diameter_exact: bool
    center: np.ndarray | None  # the natural center when there is one (ball center, midpoint)
    radius: float | None  # the exact max distance from ``center`` when known
    points: np.ndarray  # points of W on its boundary (vertices or dense samples)
    equality: bool = False

    def max_distance(self, a: np.ndarray) -> float:
        """``max ||p - a||`` over the stored boundary points (a lower estimate of the max over
        W, exact for polytopes, whose maximum is at a vertex)."""
        return float(np.max(np.linalg.norm(self.points - np.asarray(a)[None, :], axis=1)))


def _sphere(d: int, m: int, seed: int) -> np.ndarray:
    if d == 1:
        return np.array([[-1.0], [1.0]])
    g = np.random.default_rng(seed).normal(size=(m, d))
    g = np.vstack([g, np.eye(d), -np.eye(d)])
    return g / np.linalg.norm(g, axis=1, keepdims=True)


def l2_ball_case(d: int, radius: float, center) -> DomainCase:
    c = np.broadcast_to(np.asarray(center, float), (d,)).copy()
    return DomainCase(
        name=f"l2_ball(d={d},r={radius:g})",
        d=d,
        build=lambda w: domains.l2_ball(w, radius, center=c),
        cvx=lambda w: [cp.norm(w - c, 2) <= radius],
        contains=lambda p, tol: bool(np.linalg.norm(p - c) <= radius + tol),
        diameter=2.0 * radius,
        diameter_exact=True,
        center=c,
        radius=float(radius),
        points=c + radius * _sphere(d, 4000, 1),
    )


def box_case(lower, upper) -> DomainCase:
    lo = np.asarray(lower, float)
    hi = np.asarray(upper, float)
    d = lo.size
    corners = np.array(list(itertools.product(*zip(lo, hi, strict=True))))
    return DomainCase(
        name=f"box(d={d})",
        d=d,
        build=lambda w: domains.box(w, lo, hi),
        cvx=lambda w: [w >= lo, w <= hi],
        contains=lambda p, tol: bool(np.all(p >= lo - tol) and np.all(p <= hi + tol)),
        diameter=float(np.linalg.norm(hi - lo)),
        diameter_exact=True,
        center=(lo + hi) / 2,
        radius=float(np.linalg.norm(hi - lo) / 2),
        points=corners,
    )


def l1_ball_case(d: int, radius: float, center) -> DomainCase:
    c = np.broadcast_to(np.asarray(center, float), (d,)).copy()
    verts = np.vstack([c + radius * np.eye(d), c - radius * np.eye(d)])
    return DomainCase(
        name=f"l1_ball(d={d},r={radius:g})",
        d=d,
        build=lambda w: domains.l1_ball(w, radius, center=c),
        cvx=lambda w: [cp.norm(w - c, 1) <= radius],
        contains=lambda p, tol: bool(np.sum(np.abs(p - c)) <= radius + tol),
        diameter=2.0 * radius,
        diameter_exact=True,
        center=c,
        radius=float(radius),
        points=verts,
    )


def simplex_case(d: int, total: float = 1.0) -> DomainCase:
    verts = total * np.eye(d)
    return DomainCase(
        name=f"simplex(d={d},t={total:g})",
        d=d,
        build=lambda w: domains.simplex(w, total),
        cvx=lambda w: [w >= 0, cp.sum(w) == total],
        contains=lambda p, tol: bool(
            np.all(p >= -tol) and abs(np.sum(p) - total) <= tol + 1e-11 * (1 + total)
        ),
        diameter=float(np.sqrt(2.0) * total) if d > 1 else 0.0,
        diameter_exact=True,
        center=np.full(d, total / d),
        radius=float(total * np.sqrt(1 - 1 / d)),
        points=verts,
        equality=True,
    )


def ellipsoid_case(shape_matrix, center) -> DomainCase:
    P = np.asarray(shape_matrix, float)
    d = P.shape[0]
    c = np.broadcast_to(np.asarray(center, float), (d,)).copy()
    Pinv = np.linalg.inv(P)
    boundary = c + _sphere(d, 20000, 2) @ Pinv.T
    smin = np.linalg.svd(P, compute_uv=False).min()
    return DomainCase(
        name=f"ellipsoid(d={d})",
        d=d,
        build=lambda w: domains.ellipsoid(w, P, center=c),
        cvx=lambda w: [cp.norm(P @ (w - c), 2) <= 1],
        contains=lambda p, tol: bool(np.linalg.norm(P @ (p - c)) <= 1 + tol),
        diameter=float(2.0 / smin),  # twice the longest semi-axis
        diameter_exact=True,
        center=c,
        radius=float(1.0 / smin),
        points=boundary,
    )


def _vertices(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """All vertices of ``{w : A w <= b}`` by enumerating d-subsets of the rows."""
    m, d = A.shape
    out = []
    for rows in itertools.combinations(range(m), d):
        sub = A[list(rows)]
        if abs(np.linalg.det(sub)) < 1e-12:
            continue
        v = np.linalg.solve(sub, b[list(rows)])
        if np.all(A @ v <= b + 1e-9):
            out.append(v)
    verts = np.unique(np.round(np.array(out), 12), axis=0)
    return verts


def polytope_case(A, b) -> DomainCase:
    A = np.asarray(A, float)
    b = np.asarray(b, float)
    d = A.shape[1]
    verts = _vertices(A, b)
    diam = max(float(np.linalg.norm(u - v)) for u in verts for v in verts)
    return DomainCase(
        name=f"polytope(d={d},m={A.shape[0]})",
        d=d,
        build=lambda w: domains.polytope(w, A, b),
        cvx=lambda w: [A @ w <= b],
        contains=lambda p, tol: bool(np.all(A @ p <= b + tol)),
        diameter=diam,  # exact: the diameter of a polytope is attained at two vertices
        diameter_exact=True,
        center=None,
        radius=None,
        points=verts,
    )


def domain_cases(d: int = 3) -> list[DomainCase]:
    """The catalogue domains in dimension ``d`` (2 or 3 for the non-ball ones)."""
    rng = _rng(f"domains-{d}")
    c = 0.2 * rng.normal(size=d)
    P = np.diag(np.linspace(0.8, 2.0, d)) + 0.2 * np.triu(rng.normal(size=(d, d)), 1)
    # a bounded polytope: a skewed box cut by two extra halfspaces
    A = np.vstack([np.eye(d), -np.eye(d), np.ones((1, d)), np.r_[1.0, -1.0, np.zeros(d - 2)]])
    b = np.r_[np.full(d, 1.0), np.linspace(0.5, 1.2, d), 1.2, 0.8]
    return [
        l2_ball_case(d, 1.0, c),
        box_case(c - np.linspace(0.5, 1.0, d), c + np.linspace(0.7, 0.4, d)),
        l1_ball_case(d, 1.3, c),
        simplex_case(d, 1.0),
        ellipsoid_case(P, c),
        polytope_case(A, b),
    ]


# ============================================================================ losses


@dataclass(frozen=True, eq=False)
class LossCase:
    """One example's loss in three independent writings.

    ``build(w, params)`` is what a dpcvx user writes (params: name -> cp.Parameter of one
    example); ``numpy(w, data)`` returns the n per-example values; ``whole(w, data)`` is the sum
    over all n examples written directly in CVXPY (for reference solves).
    """

    name: str
    shapes: dict[str, tuple[int, ...]]
    build: Callable[[cp.Variable, dict[str, cp.Parameter]], cp.Expression]
    numpy: Callable[[np.ndarray, dict[str, np.ndarray]], np.ndarray]
    whole: Callable[[cp.Variable, dict[str, np.ndarray]], cp.Expression]
    make_data: Callable[[np.random.Generator, int, int], dict[str, np.ndarray]]
    generic: bool = False  # certified through the tangent-cut path


def _classification(rng, n, d):
    X = rng.normal(size=(n, d))
    Y = np.sign(X @ rng.normal(size=d) + 0.5 * rng.normal(size=n))
    Y[Y == 0] = 1.0
    return {"x": X, "y": Y}


def _regression(rng, n, d):
    X = rng.normal(size=(n, d))
    return {"x": X, "y": X @ (0.5 * rng.normal(size=d)) + 0.3 * rng.normal(size=n)}


def _features(rng, n, d):
    return {"x": 0.7 * rng.normal(size=(n, d))}


def _matrix_regression(rng, n, d):
    A = rng.normal(size=(n, 2, d))
    return {"A": A, "b": A @ (0.4 * rng.normal(size=d)) + 0.3 * rng.normal(size=(n, 2))}


def _sq(v):
    return np.sum(v**2)


def _hinge_np(w, z):
    return np.maximum(0.0, 1.0 - z["y"] * (z["x"] @ w))


def _huber_np(r, M):
    a = np.abs(r)
    return np.where(a <= M, r**2, 2 * M * a - M**2)


def _pinball_np(r, tau):
    return tau * np.maximum(r, 0.0) + (1 - tau) * np.maximum(-r, 0.0)


HUBER_M = 0.5
PINBALL_TAU = 0.3
EPS_WIDTH = 0.2

LOSSES: dict[str, LossCase] = {}


def _register(case: LossCase) -> LossCase:
    LOSSES[case.name] = case
    return case


_register(
    LossCase(
        name="hinge",
        shapes={"x": ("d",), "y": ()},
        build=lambda w, p: cp.pos(1 - p["y"] * (p["x"] @ w)),
        numpy=_hinge_np,
        whole=lambda w, z: cp.sum(cp.pos(1 - cp.multiply(z["y"], z["x"] @ w))),
        make_data=_classification,
    )
)
_register(
    LossCase(
        name="absolute",
        shapes={"x": ("d",), "y": ()},
        build=lambda w, p: cp.abs(p["x"] @ w - p["y"]),
        numpy=lambda w, z: np.abs(z["x"] @ w - z["y"]),
        whole=lambda w, z: cp.sum(cp.abs(z["x"] @ w - z["y"])),
        make_data=_regression,
    )
)
_register(
    LossCase(
        name="squared",
        shapes={"x": ("d",), "y": ()},
        build=lambda w, p: cp.square(p["x"] @ w - p["y"]),
        numpy=lambda w, z: (z["x"] @ w - z["y"]) ** 2,
        whole=lambda w, z: cp.sum_squares(z["x"] @ w - z["y"]),
        make_data=_regression,
    )
)
_register(
    LossCase(
        name="mean",
        shapes={"x": ("d",)},
        build=lambda w, p: 0.5 * cp.sum_squares(w - p["x"]),
        numpy=lambda w, z: 0.5 * np.sum((w[None, :] - z["x"]) ** 2, axis=1),
        whole=lambda w, z: 0.5 * sum(cp.sum_squares(w - xi) for xi in z["x"]),
        make_data=_features,
    )
)
_register(
    LossCase(
        name="logistic",
        shapes={"x": ("d",), "y": ()},
        build=lambda w, p: dpcvx.losses.logistic(p["x"] @ w, p["y"]),
        numpy=lambda w, z: np.logaddexp(0.0, -z["y"] * (z["x"] @ w)),
        whole=lambda w, z: cp.sum(cp.logistic(-cp.multiply(z["y"], z["x"] @ w))),
        make_data=_classification,
    )
)
_register(
    LossCase(
        name="huber",
        shapes={"x": ("d",), "y": ()},
        build=lambda w, p: cp.huber(p["x"] @ w - p["y"], HUBER_M),
        numpy=lambda w, z: _huber_np(z["x"] @ w - z["y"], HUBER_M),
        whole=lambda w, z: cp.sum(cp.huber(z["x"] @ w - z["y"], HUBER_M)),
        make_data=_regression,
    )
)
_register(
    LossCase(
        name="pinball",
        shapes={"x": ("d",), "y": ()},
        build=lambda w, p: dpcvx.losses.pinball(p["x"] @ w, p["y"], PINBALL_TAU),
        numpy=lambda w, z: _pinball_np(z["y"] - z["x"] @ w, PINBALL_TAU),
        whole=lambda w, z: cp.sum(
            PINBALL_TAU * cp.pos(z["y"] - z["x"] @ w)
            + (1 - PINBALL_TAU) * cp.pos(z["x"] @ w - z["y"])
        ),
        make_data=_regression,
    )
)
_register(
    LossCase(
        name="epsilon_insensitive",
        shapes={"x": ("d",), "y": ()},
        build=lambda w, p: dpcvx.losses.epsilon_insensitive(p["x"] @ w, p["y"], EPS_WIDTH),
        numpy=lambda w, z: np.maximum(0.0, np.abs(z["x"] @ w - z["y"]) - EPS_WIDTH),
        whole=lambda w, z: cp.sum(cp.pos(cp.abs(z["x"] @ w - z["y"]) - EPS_WIDTH)),
        make_data=_regression,
    )
)
_register(
    LossCase(
        name="log_cosh",  # a user's own DCP loss: log(e^r + e^-r) through log_sum_exp of an hstack
        shapes={"x": ("d",), "y": ()},
        build=lambda w, p: cp.log_sum_exp(cp.hstack([p["x"] @ w - p["y"], -(p["x"] @ w) + p["y"]])),
        numpy=lambda w, z: np.logaddexp(z["x"] @ w - z["y"], z["y"] - z["x"] @ w),
        whole=lambda w, z: cp.sum(
            cp.log_sum_exp(cp.vstack([z["x"] @ w - z["y"], z["y"] - z["x"] @ w]), axis=0)
        ),
        make_data=_regression,
    )
)
_register(
    LossCase(
        name="matrix_norm2",  # a user's own loss with a matrix parameter: ||A w - b||_2
        shapes={"A": (2, "d"), "b": (2,)},
        build=lambda w, p: cp.norm(p["A"] @ w - p["b"], 2),
        numpy=lambda w, z: np.linalg.norm(z["A"] @ w - z["b"], axis=1),
        whole=lambda w, z: sum(
            cp.norm(Ai @ w - bi, 2) for Ai, bi in zip(z["A"], z["b"], strict=True)
        ),
        make_data=_matrix_regression,
    )
)
_register(
    LossCase(
        name="l1_distance",  # ||w - x||_1 (a median-type loss)
        shapes={"x": ("d",)},
        build=lambda w, p: cp.norm(w - p["x"], 1),
        numpy=lambda w, z: np.sum(np.abs(w[None, :] - z["x"]), axis=1),
        whole=lambda w, z: sum(cp.norm(w - xi, 1) for xi in z["x"]),
        make_data=_features,
    )
)
_register(
    LossCase(
        name="squared_hinge",  # nested: square(pos(.)) goes through the generic tangent-cut path
        shapes={"x": ("d",), "y": ()},
        build=lambda w, p: cp.square(cp.pos(1 - p["y"] * (p["x"] @ w))),
        numpy=lambda w, z: _hinge_np(w, z) ** 2,
        whole=lambda w, z: cp.sum_squares(cp.pos(1 - cp.multiply(z["y"], z["x"] @ w))),
        make_data=_classification,
        generic=True,
    )
)


def make_parameters(loss: LossCase, d: int) -> dict[str, cp.Parameter]:
    """Fresh per-example parameters for ``loss`` in dimension ``d`` (named after the keys)."""
    out = {}
    for key, shape in loss.shapes.items():
        concrete = tuple(d if s == "d" else s for s in shape)
        out[key] = cp.Parameter(concrete, name=key)
    return out


# ============================================================================ references


def objective(
    loss: LossCase, data: dict[str, np.ndarray], lam: float, w0: np.ndarray, w: np.ndarray
) -> float:
    """``F(w)`` in numpy (independent of dpcvx and of CVXPY)."""
    w = np.asarray(w, float)
    return float(np.mean(loss.numpy(w, data)) + lam / 2 * _sq(w - w0))


def reference_solve(
    loss: LossCase,
    data: dict[str, np.ndarray],
    domain: DomainCase,
    lam: float,
    w0: np.ndarray,
    *,
    return_tol: bool = False,
):
    """Minimize ``F`` over the domain as one whole-dataset CVXPY problem with Clarabel.

    Clarabel is asked for tolerance 1e-12; where it stalls short of that ("almost solved", which
    happens on CVXPY's Huber canonicalization), the tolerance is relaxed step by step to 1e-8 and
    finally ECOS at 1e-10 is tried. Returns ``(F*, w*)``, plus the tolerance reached when
    ``return_tol`` (the reference value is accurate to about that, relative to ``1 + |F*|``).
    """
    n = len(next(iter(data.values())))
    w = cp.Variable(domain.d)
    obj = loss.whole(w, data) / n
    if lam > 0:
        obj = obj + lam / 2 * cp.sum_squares(w - w0)
    prob = cp.Problem(cp.Minimize(obj), domain.cvx(w))
    attempts = [
        (
            cp.CLARABEL,
            tol,
            dict(
                tol_gap_abs=tol, tol_gap_rel=tol, tol_feas=tol, tol_ktratio=tol * 100, max_iter=500
            ),
        )
        for tol in (1e-12, 1e-11, 1e-10, 1e-9, 1e-8)
    ]
    attempts.append((cp.ECOS, 1e-9, dict(abstol=1e-10, reltol=1e-10, feastol=1e-10, max_iters=500)))
    for solver, tol, opts in attempts:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "solution may be inaccurate"
            try:
                prob.solve(solver=solver, **opts)
            except cp.SolverError:
                continue
        if prob.status == cp.OPTIMAL:
            out = (float(prob.value), np.asarray(w.value, float))
            return out + (tol,) if return_tol else out
    raise RuntimeError(f"reference solve failed: {prob.status}")


def minimize_piecewise_1d(
    values: Callable[[np.ndarray], np.ndarray],
    slope: Callable[[float], float],
    kinks: np.ndarray,
    lam: float,
    w0: float,
    lo: float,
    hi: float,
) -> tuple[float, float]:
    """Exact minimizer of ``L(w) + (lam/2)(w - w0)^2`` over ``[lo, hi]`` for a convex piecewise
    linear ``L`` with the given kinks: every kink, both endpoints and the stationary point of
    each piece (``w = w0 - slope/lam``, clipped into the piece) are compared.

    ``values(ws)`` evaluates ``L`` at an array of points; ``slope(m)`` is ``L'`` at a point ``m``
    strictly inside a piece.
    """
    pts = np.unique(np.concatenate([[lo, hi], kinks[(kinks > lo) & (kinks < hi)]]))
    cands = list(pts)
    for a, b in zip(pts[:-1], pts[1:], strict=True):
        s = slope(0.5 * (a + b))
        if lam > 0:
            cands.append(min(max(w0 - s / lam, a), b))
    cands = np.array(cands)
    F = values(cands) + lam / 2 * (cands - w0) ** 2
    k = int(np.argmin(F))
    return float(F[k]), float(cands[k])


@dataclass(eq=False)
class Reference:
    """One catalogue entry (see the module docstring)."""

    name: str
    loss: LossCase
    data: dict[str, np.ndarray]
    domain: DomainCase
    regularization: float
    center: np.ndarray
    method: str  # "closed form", "brute force" or "clarabel"
    tol: float  # the reference value's own error, relative to 1 + |value|
    _solver: Callable[[Reference], tuple[float, np.ndarray]] | None = field(
        default=None, repr=False
    )

    @property
    def n(self) -> int:
        return len(next(iter(self.data.values())))

    @property
    def d(self) -> int:
        return self.domain.d

    def problem(self) -> tuple[dpcvx.Problem, cp.Variable, dict[str, cp.Parameter]]:
        """A fresh dpcvx.Problem for this entry (new variable and parameters every call)."""
        w = cp.Variable(self.d, name="w")
        params = make_parameters(self.loss, self.d)
        loss = self.loss.build(w, params)
        data = {params[k]: v for k, v in self.data.items()}
        return dpcvx.Problem(loss, w, data=data, domain=self.domain.build(w)), w, params

    def objective(self, w: np.ndarray) -> float:
        return objective(self.loss, self.data, self.regularization, self.center, w)

    @functools.cached_property
    def optimum(self) -> tuple[float, np.ndarray]:
        """``(F*, w*)`` from the entry's reference method."""
        if self._solver is not None:
            return self._solver(self)
        return reference_solve(self.loss, self.data, self.domain, self.regularization, self.center)

    @property
    def value(self) -> float:
        return self.optimum[0]

    @property
    def point(self) -> np.ndarray:
        return self.optimum[1]

    @property
    def value_tol(self) -> float:
        return self.tol * (1.0 + abs(self.value))

    def __repr__(self) -> str:  # pytest ids
        return self.name


# ---------------------------------------------------------------------------- closed forms


def _mean_on(
    domain: DomainCase,
    project: Callable[[np.ndarray], np.ndarray],
    lam: float,
    w0: np.ndarray,
    seed: str,
    shift: float,
) -> Reference:
    """Mean estimation: F(w) = (1+lam)/2 ||w - u||^2 + const with u = (xbar + lam w0)/(1+lam),
    so the constrained optimum is the Euclidean projection of u onto W."""
    loss = LOSSES["mean"]
    rng = _rng(seed)
    X = shift + 0.7 * rng.normal(size=(12, domain.d))

    def solve(ref: Reference) -> tuple[float, np.ndarray]:
        u = (ref.data["x"].mean(axis=0) + lam * w0) / (1 + lam)
        p = project(u)
        return ref.objective(p), p

    return Reference(
        name=f"mean/{seed}",
        loss=loss,
        data={"x": X},
        domain=domain,
        regularization=lam,
        center=w0,
        method="closed form",
        tol=EXACT_REFERENCE_TOL,
        _solver=solve,
    )


def _project_ball(c: np.ndarray, r: float):
    def proj(u):
        v = u - c
        nrm = np.linalg.norm(v)
        return u.copy() if nrm <= r else c + v * (r / nrm)

    return proj


def _project_simplex(total: float):
    def proj(u):  # Held, Wolfe & Crowder / Duchi et al.: sort-based exact projection
        srt = np.sort(u)[::-1]
        cssv = np.cumsum(srt) - total
        ind = np.arange(1, u.size + 1)
        rho = ind[srt - cssv / ind > 0][-1]
        theta = cssv[rho - 1] / rho
        return np.maximum(u - theta, 0.0)

    return proj


def _closed_form_entries() -> list[Reference]:
    out = []
    d = 3
    c = np.array([0.1, -0.2, 0.05])
    ball = l2_ball_case(d, 1.0, c)
    # projection active (the data mean lies far outside the ball)
    out.append(
        _mean_on(
            ball, _project_ball(c, 1.0), 0.3, np.array([0.5, 0.0, -0.5]), "ball-outside", shift=2.0
        )
    )
    # projection inactive (interior optimum)
    out.append(
        _mean_on(
            ball, _project_ball(c, 1.0), 0.3, np.array([0.2, 0.1, 0.0]), "ball-inside", shift=0.0
        )
    )
    # no regularization
    out.append(_mean_on(ball, _project_ball(c, 1.0), 0.0, np.zeros(d), "ball-lam0", shift=1.5))
    # box: F is separable, so the optimum is the clipped u
    bx = box_case(np.array([-0.5, -1.0, 0.0]), np.array([0.3, 1.0, 0.2]))
    out.append(
        _mean_on(
            bx,
            lambda u: np.clip(u, bx.points.min(0), bx.points.max(0)),
            0.5,
            np.array([1.0, -2.0, 0.1]),
            "box",
            shift=0.4,
        )
    )
    # simplex: the projection of u onto the simplex
    sx = simplex_case(d, 1.0)
    out.append(
        _mean_on(sx, _project_simplex(1.0), 0.2, np.array([0.3, 0.3, 0.3]), "simplex", shift=0.2)
    )

    # ridge regression, normal equations: (2/n X^T X + lam I) w = 2/n X^T y + lam w0
    loss = LOSSES["squared"]
    for seed, lam in (("ridge-a", 0.1), ("ridge-b", 1.0)):
        rng = _rng(seed)
        n, dd = 25, 4
        X = rng.normal(size=(n, dd))
        y = X @ rng.normal(size=dd) + 0.2 * rng.normal(size=n)
        w0 = 0.3 * rng.normal(size=dd)
        ball = l2_ball_case(dd, 100.0, np.zeros(dd))

        def solve(ref: Reference, lam=lam) -> tuple[float, np.ndarray]:
            Xr, yr, m = ref.data["x"], ref.data["y"], ref.n
            H = 2.0 / m * Xr.T @ Xr + lam * np.eye(ref.d)
            g = 2.0 / m * Xr.T @ yr + lam * ref.center
            p = np.linalg.solve(H, g)
            assert np.linalg.norm(p) < 50.0  # the ball is inactive
            return ref.objective(p), p

        out.append(
            Reference(
                name=f"squared/{seed}",
                loss=loss,
                data={"x": X, "y": y},
                domain=ball,
                regularization=lam,
                center=w0,
                method="closed form",
                tol=1e-11,
                _solver=solve,
            )
        )
    return out


# ---------------------------------------------------------------------------- d = 1 brute force


def _brute_entries() -> list[Reference]:
    out = []
    specs = [
        ("hinge", 0.0, "ball", 1),
        ("hinge", 0.3, "ball", 2),
        ("hinge", 0.05, "box", 3),
        ("absolute", 0.0, "box", 4),
        ("absolute", 0.2, "ball", 5),
        ("absolute", 1.0, "box", 6),
    ]
    for loss_name, lam, dom_kind, k in specs:
        loss = LOSSES[loss_name]
        rng = _rng(f"brute-{k}")
        n = 9
        x = rng.choice([-1.0, 1.0], size=n) * rng.uniform(0.3, 2.0, size=n)
        if loss_name == "hinge":
            y = rng.choice([-1.0, 1.0], size=n)
        else:
            y = 0.8 * x + 0.5 * rng.normal(size=n)
        data = {"x": x[:, None], "y": y}
        if dom_kind == "ball":
            lo, hi = -1.2, 1.6
            domain = l2_ball_case(1, (hi - lo) / 2, (hi + lo) / 2)
        else:
            lo, hi = -0.4, 0.9
            domain = box_case([lo], [hi])
        w0 = np.array([rng.uniform(-1.0, 1.0)])

        def solve(ref: Reference, lo=lo, hi=hi) -> tuple[float, np.ndarray]:
            xs, ys = ref.data["x"][:, 0], ref.data["y"]
            lam0 = ref.regularization
            if ref.loss.name == "hinge":
                a = ys * xs
                kinks = 1.0 / a

                def values(ws):
                    return np.maximum(0.0, 1.0 - np.outer(ws, a)).mean(axis=1)

                def slope(m):
                    return float(np.mean(np.where(1.0 - a * m > 0, -a, 0.0)))
            else:
                kinks = ys / xs

                def values(ws):
                    return np.abs(np.outer(ws, xs) - ys).mean(axis=1)

                def slope(m):
                    return float(np.mean(np.sign(xs * m - ys) * xs))

            val, p = minimize_piecewise_1d(values, slope, kinks, lam0, float(ref.center[0]), lo, hi)
            return ref.objective(np.array([p])), np.array([p])

        out.append(
            Reference(
                name=f"{loss_name}/brute-{dom_kind}-lam{lam:g}",
                loss=loss,
                data=data,
                domain=domain,
                regularization=lam,
                center=w0,
                method="brute force",
                tol=EXACT_REFERENCE_TOL,
                _solver=solve,
            )
        )
    return out


# ---------------------------------------------------------------------------- Clarabel references

REFERENCE_LOSSES = (
    "logistic",
    "huber",
    "pinball",
    "epsilon_insensitive",
    "log_cosh",
    "matrix_norm2",
    "l1_distance",
    "squared_hinge",
)


def _clarabel_entries() -> list[Reference]:
    out = []
    d = 3
    for loss_name in REFERENCE_LOSSES:
        loss = LOSSES[loss_name]
        for domain in domain_cases(d):
            name = f"{loss_name}/{domain.name}"
            rng = _rng(name)
            n = 14
            data = loss.make_data(rng, n, d)
            lam = float(rng.choice([0.05, 0.2, 1.0]))
            w0 = rng.normal(size=d)
            out.append(
                Reference(
                    name=name,
                    loss=loss,
                    data=data,
                    domain=domain,
                    regularization=lam,
                    center=w0,
                    method="clarabel",
                    tol=CLARABEL_REFERENCE_TOL,
                )
            )
    # two unregularized ones (lam = 0: no strong convexity, the value is still unique)
    for loss_name, j in (("logistic", 0), ("huber", 1)):
        loss = LOSSES[loss_name]
        domain = domain_cases(d)[j]
        name = f"{loss_name}/{domain.name}/lam0"
        rng = _rng(name)
        out.append(
            Reference(
                name=name,
                loss=loss,
                data=loss.make_data(rng, 16, d),
                domain=domain,
                regularization=0.0,
                center=np.zeros(d),
                method="clarabel",
                tol=CLARABEL_REFERENCE_TOL,
            )
        )
    return out


CATALOGUE: list[Reference] = _closed_form_entries() + _brute_entries() + _clarabel_entries()


def by_name(name: str) -> Reference:
    for ref in CATALOGUE:
        if ref.name == name:
            return ref
    raise KeyError(name)


def finite_difference_gradients(decl, u: np.ndarray, h: float) -> np.ndarray:
    """``(n, d)``: every example's gradient of its loss at ``u`` by central differences of
    step ``h`` (an independent check of Lipschitz bounds: no dpcvx derivative involved)."""
    return np.stack(
        [
            (decl.loss_values(u + h * e) - decl.loss_values(u - h * e)) / (2 * h)
            for e in np.eye(u.size)
        ],
        axis=1,
    )


def rung_data(kind: str, n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Student-t(5) features scaled by ``1/sqrt(d)`` and labels of a random linear model:
    signs for ``kind == "pm"``, values with noise otherwise (the fast rungs' test data)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_t(5, size=(n, d)) / np.sqrt(d)
    z = X @ rng.normal(size=d)
    if kind == "pm":
        return X, np.sign(z + 0.3 * rng.normal(size=n))
    return X, 0.3 * z + 0.3 * rng.normal(size=n)


def rung_domain(kind: str, w) -> list:
    """A ball at the origin, a small ball off it, or a box (the fast rungs' domains)."""
    return {
        "ball": [cp.norm(w) <= 1],
        "small ball": [cp.norm(w - 0.1) <= 0.2],
        "box": [cp.abs(w) <= 0.3],
    }[kind]


def term_values(decl, point: np.ndarray) -> np.ndarray:
    """``(n,)``: each example's loss as the sum of its declared terms' own values at
    ``point`` (what the solvers and the certificate read), to set beside the user's loss
    (``decl.loss_values``)."""
    from dpcvx.modeling._expressions import evaluate

    leaves = dict(decl.derived_values())
    leaves[decl.variable.id] = np.repeat(np.asarray(point, float)[None], decl.n, axis=0)
    total = np.zeros(decl.n)
    for t in decl.terms:
        vals = np.asarray(evaluate(t.expr, leaves, decl.n), float).reshape(decl.n, -1)
        total += t.weight * vals.sum(axis=1)
    return total
