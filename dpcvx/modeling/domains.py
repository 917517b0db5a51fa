"""Parameter domains: catalogue constructors and the analysis every guarantee needs.

A domain is a list of CVXPY constraints on the variable, with no data in it (it is public).
:class:`Domain` analyses it once, before any data is seen:

- a bounding ball ``(center, radius)`` and a diameter bound ``D = 2 * radius`` (or better);
  closed form for the catalogue (l2/l1/linf balls with a center, boxes, ellipsoids, the simplex);
  for any other compact DCP set, dpcvx solves ``max / min w_j`` over the set, inflates the
  answers, and *adds* the resulting box to the domain, so compactness is a fact by construction
  rather than a solver's claim (the box is data-independent and contains the set);
- a strictly feasible point with its slack, used to make any candidate point exactly feasible;
- :meth:`Domain.make_feasible` (an exactly feasible point near a candidate, checked in float64
  with a margin) and :meth:`Domain.min_linear_quadratic` (a valid lower bound on
  ``min_{w in W} <s, w> + (lam/2) ||w - w0||^2``, exact for balls and boxes, and from
  nonnegative multipliers of linearized constraints on the bounding ball otherwise).

Equality constraints are met up to floating-point rounding (relative 1e-12).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import cvxpy as cp
import numpy as np
from cvxpy.constraints.nonpos import Inequality
from cvxpy.constraints.zero import Equality
from numpy.typing import ArrayLike

from dpcvx.errors import ModelingError
from dpcvx.modeling._expressions import VALUE_LOCK, Unsupported, affine_jet
from dpcvx.modeling._expressions import substitute as _substitute
from dpcvx.modeling._sets import Pieces, parse_constraint, scaled_identity, variable_rows

__all__ = [
    "Domain",
    "box",
    "row_norms",
    "ellipsoid",
    "l1_ball",
    "l2_ball",
    "linf_ball",
    "polytope",
    "simplex",
]

_EPS = np.finfo(float).eps


def row_norms(A: np.ndarray) -> np.ndarray:
    """The l2 norms of the rows of the 2-d array ``A`` (one pass, a few times faster than
    ``numpy.linalg.norm(A, axis=1)``, which squares into a temporary). The sum runs in order,
    so a norm is within ``(d / 2 + 1)`` eps of the true one (relative) rather than numpy's
    pairwise ``O(log d)``: every rounding allowance that uses it scales with ``d``."""
    return np.sqrt(np.einsum("ij,ij->i", A, A))


_FEAS_REL = 1e-12  # relative margin by which checked inequalities must hold
#: data entries (rows times the dimension) per chunk of :meth:`Domain.make_feasible_rows`
_ROW_CHUNK_ENTRIES = 1 << 18


def _center(variable: cp.Variable, center: ArrayLike | None) -> np.ndarray:
    c = np.zeros(variable.shape) if center is None else np.asarray(center, dtype=float)
    return np.broadcast_to(c, variable.shape).astype(float)


def l2_ball(
    variable: cp.Variable, radius: float, center: ArrayLike | None = None
) -> list[cp.Constraint]:
    """``||w - center||_2 <= radius``."""
    return [cp.norm(variable - _center(variable, center), 2) <= radius]


def l1_ball(
    variable: cp.Variable, radius: float, center: ArrayLike | None = None
) -> list[cp.Constraint]:
    """``||w - center||_1 <= radius``."""
    return [cp.norm(variable - _center(variable, center), 1) <= radius]


def linf_ball(
    variable: cp.Variable, radius: float, center: ArrayLike | None = None
) -> list[cp.Constraint]:
    """``||w - center||_inf <= radius`` (written as a box)."""
    c = _center(variable, center)
    return box(variable, c - radius, c + radius)


def box(variable: cp.Variable, lower: ArrayLike, upper: ArrayLike) -> list[cp.Constraint]:
    """``lower <= w <= upper`` elementwise."""
    return [variable >= lower, variable <= upper]


def ellipsoid(
    variable: cp.Variable, shape_matrix: ArrayLike, center: ArrayLike | None = None
) -> list[cp.Constraint]:
    """``||P (w - center)||_2 <= 1`` for an invertible matrix ``P``."""
    return [
        cp.norm(np.asarray(shape_matrix, float) @ (variable - _center(variable, center)), 2) <= 1
    ]


def polytope(variable: cp.Variable, A: ArrayLike, b: ArrayLike) -> list[cp.Constraint]:
    """``A w <= b`` (must be bounded)."""
    return [np.asarray(A, float) @ variable <= np.asarray(b, float)]


def simplex(variable: cp.Variable, total: float = 1.0) -> list[cp.Constraint]:
    """``w >= 0, sum(w) == total``."""
    return [variable >= 0, cp.sum(variable) == total]


@dataclass(frozen=True, slots=True)
class _Affine:
    """Rows ``M w + b <= 0`` (or ``== 0``)."""

    M: np.ndarray
    b: np.ndarray


def _affine_rows(expr: cp.Expression, variable: cp.Variable) -> _Affine:
    """Rows ``M w + b`` of an affine, data-free expression (flattened in C order)."""
    try:
        off, jac = affine_jet(expr, variable, {}, 1)
        return _Affine(jac[0].reshape(-1, variable.size), np.asarray(off[0], float).reshape(-1))
    except Unsupported:
        pass
    # an affine atom without a vectorized rule: read the map off CVXPY's own evaluation at
    # 0 and at the unit vectors (exact for an affine map; the domain is public and small)
    saved = variable.value
    try:
        d = variable.size
        variable.value = np.zeros(d)
        b = np.asarray(expr.value, float).reshape(-1)
        cols = []
        for j in range(d):
            e = np.zeros(d)
            e[j] = 1.0
            variable.value = e
            cols.append(np.asarray(expr.value, float).reshape(-1) - b)
    finally:
        variable.value = saved
    return _Affine(np.column_stack(cols), b)


def _flat_rows(expr: cp.Expression, variable: cp.Variable) -> tuple[np.ndarray, np.ndarray]:
    """``(M, c)`` with ``expr = M w + c`` (flattened in C order)."""
    rows = _affine_rows(expr, variable)
    return rows.M, rows.b


class Domain:
    """The analysed parameter domain ``W``.

    Parameters
    ----------
    variable : cvxpy.Variable
        A vector variable.
    constraints : list of cvxpy.Constraint
        DCP constraints involving only ``variable`` and constants.

    Attributes
    ----------
    center, radius : the bounding ball ``W subset B(center, radius)``.
    diameter : a bound on ``max ||u - v||`` over ``W``.
    kind : ``"l2_ball"``, ``"box"`` or ``"general"``.
    constraints : the constraints dpcvx compiles (the user's, plus an added box for general sets).
    interior : a strictly feasible point (None when equality constraints are present and the
        set is a single point).
    """

    def __init__(self, variable: cp.Variable, constraints: list[cp.Constraint]) -> None:
        if not isinstance(variable, cp.Variable) or len(variable.shape) != 1:
            raise ModelingError(
                "The `variable` must be a one-dimensional cvxpy.Variable (shape (d,)). "
                f"Got {variable!r} of shape {getattr(variable, 'shape', None)}."
            )
        has_bounds = (
            bool(variable_rows(variable)[2]) if isinstance(variable, cp.Variable) else False
        )
        if (constraints is None or len(constraints) == 0) and not has_bounds:
            raise ModelingError(
                "The `domain` must be a non-empty list of constraints describing a compact set "
                "(every guarantee needs its diameter). Got no constraints. Add e.g. "
                "`[cp.norm(w, 2) <= R]` or use `dpcvx.domains.l2_ball(w, R)`."
            )
        self.variable = variable
        self.d = variable.size
        user = list(constraints or [])
        for c in user:
            if not isinstance(c, cp.Constraint):
                raise ModelingError(
                    f"Every entry of `domain` must be a cvxpy constraint. Got {type(c).__name__}."
                )
            if c.parameters():
                raise ModelingError(
                    f"The domain must not depend on data (it is public): the constraint `{c}` "
                    "uses a cvxpy.Parameter. Use constants in the domain."
                )
            others = [v for v in c.variables() if v.id != variable.id]
            if others:
                raise ModelingError(
                    f"The domain constraint `{c}` uses a variable other than `{variable}`: "
                    f"{others[0]}. Domain constraints may use only the problem's variable."
                )
            if not c.is_dcp():
                raise ModelingError(f"The domain constraint `{c}` is not DCP.")
        self.user_constraints = tuple(user)
        pieces = Pieces.empty(self.d)
        A_var, b_var, var_cons = variable_rows(variable)
        pieces.add_rows(A_var, b_var)
        self._ineq: list[cp.Expression] = [c.args[0] - c.args[1] for c in var_cons]
        self._eq: list[_Affine] = []
        for c in user:
            if isinstance(c, Equality):
                expr = c.args[0] - c.args[1]
                if not expr.is_affine():
                    raise ModelingError(
                        f"The domain's equality constraint `{c}` must be affine in the variable "
                        "(a nonlinear equality does not describe a convex set)."
                    )
                rows = _affine_rows(expr, variable)
                self._eq.append(rows)
                pieces.add_eq(rows.M, -rows.b)
                continue
            if not isinstance(c, Inequality):
                raise ModelingError(
                    f"Domain constraint `{c}` ({type(c).__name__}) is not supported; use "
                    "inequalities `<=`/`>=` of convex/concave expressions and affine equalities."
                )
            self._ineq.append(c.args[0] - c.args[1])
            parse_constraint(c, variable, pieces, lambda e: _flat_rows(e, variable))
        # evaluations set ``.value`` on a stand-in without attributes (a ``nonneg`` variable
        # refuses negative values, and checks must evaluate points outside the set too)
        attrs = [k for k, v in variable.attributes.items() if v not in (None, False)]
        self._plain = cp.Variable(self.d) if attrs else variable
        if self._plain is not variable:
            self._ineq = [_substitute(e, variable, self._plain) for e in self._ineq]
            for k, piece in enumerate(pieces.generic):
                pieces.generic[k] = type(piece)(_substitute(piece.expr, variable, self._plain))
        self._pieces = pieces
        self._poly: list[_Affine] = [_Affine(pieces.A, -pieces.b)] if pieces.A.shape[0] else []
        lo = np.full(self.d, -np.inf)
        hi = np.full(self.d, np.inf)
        for M_row, b_row in zip(pieces.A, pieces.b):
            nz = np.flatnonzero(M_row)
            if len(nz) == 1:
                j = nz[0]
                bound = b_row / M_row[j]
                if M_row[j] > 0:
                    hi[j] = min(hi[j], bound)
                else:
                    lo[j] = max(lo[j], bound)
        balls: list[tuple[np.ndarray, float]] = []
        l1_balls: list[tuple[np.ndarray, float]] = []
        for norm_piece in pieces.norms:
            scale = scaled_identity(norm_piece.M)
            if scale:
                center = -norm_piece.m / scale
                radius = norm_piece.r / abs(scale)
                (balls if norm_piece.p == 2 else l1_balls).append((center, radius))
        for pend in pieces.pending:
            scale = scaled_identity(pend.F @ pend.M)
            if scale and pend.slack == 0.0:
                balls.append((-(pend.F @ pend.c) / scale, np.sqrt(pend.lim) / abs(scale)))
        only_one = (
            len(pieces.norms) + len(pieces.pending) == 1
            and not pieces.A.shape[0]
            and not self._eq
            and not pieces.generic
        )
        ball_is_l2 = only_one and len(balls) == 1
        ball_is_l1 = only_one and len(l1_balls) == 1
        simplex_total = self._simplex_total()
        box_only = (
            bool(np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)))
            and pieces.polyhedral
            and not pieces.pending
            and not self._eq
            and all(np.count_nonzero(row) == 1 for row in pieces.A)
        )
        self.constraints: tuple[cp.Constraint, ...] = self.user_constraints + tuple(var_cons)
        self._lo, self._hi = lo, hi
        if ball_is_l2:
            self.kind = "l2_ball"
            self.center, self.radius = balls[0]
            if self.radius <= 0:
                raise ModelingError(
                    f"The l2-ball domain has radius {self.radius}; it must be positive."
                )
            self.diameter = 2 * self.radius
        elif ball_is_l1:
            self.kind = "l1_ball"
            self.center, self.radius = l1_balls[0]
            if self.radius <= 0:
                raise ModelingError(
                    f"The l1-ball domain has radius {self.radius}; it must be positive."
                )
            self.diameter = 2 * self.radius
        elif simplex_total is not None:
            self.kind = "simplex"
            self.total = simplex_total
            self._lo, self._hi = np.zeros(self.d), np.full(self.d, simplex_total)
            self.center = np.full(self.d, simplex_total / self.d)
            vertex = np.zeros(self.d)
            vertex[0] = simplex_total
            self.radius = float(np.linalg.norm(vertex - self.center))
            self.diameter = float(np.sqrt(2) * simplex_total)
        elif box_only:
            if np.any(lo > hi):
                raise ModelingError(
                    "The box domain is empty: some lower bound exceeds its upper "
                    f"bound (lower={lo}, upper={hi})."
                )
            self.kind = "box"
            self.center = (lo + hi) / 2
            self.radius = float(np.linalg.norm((hi - lo) / 2))
            self.diameter = 2 * self.radius
        else:
            self.kind = "general"
            self._init_general(balls, lo, hi)
        self.radius = float(self.radius) * (1 + 4 * _EPS)
        self.diameter = float(self.diameter) * (1 + 4 * _EPS)
        pieces.finish(np.asarray(self.center, float), self.radius)
        self._hint_problems: dict[str, tuple] = {}
        self._init_interior()

    # ------------------------------------------------------------------ analysis
    def _simplex_total(self) -> float | None:
        """``t`` when the constraints are exactly ``w >= 0`` and ``sum(w) == t`` (t > 0)."""
        if len(self._eq) != 1 or len(self._poly) != 1 or len(self.user_constraints) != 2:
            return None
        eq, ineq = self._eq[0], self._poly[0]
        if eq.M.shape != (1, self.d) or not np.array_equal(eq.M[0], np.ones(self.d)):
            return None
        if not (scaled_identity(ineq.M) == -1.0 and np.all(ineq.b == 0)):
            return None
        total = -float(eq.b[0])
        if total <= 0:
            raise ModelingError(f"The simplex total must be positive. Got {total}.")
        return total

    def _solve(
        self, objective: cp.Minimize | cp.Maximize, constraints: list[cp.Constraint]
    ) -> cp.Problem:
        prob = cp.Problem(objective, constraints)
        try:
            prob.solve(solver=cp.CLARABEL)
        except cp.SolverError as exc:  # pragma: no cover - solver crash
            raise ModelingError(f"Could not analyse the domain: {exc}") from exc
        return prob

    def _init_general(
        self, balls: list[tuple[np.ndarray, float]], lo: np.ndarray, hi: np.ndarray
    ) -> None:
        w = self.variable
        if balls:
            c, r = min(balls, key=lambda b: b[1])
            self.center, self.radius = np.asarray(c, float), float(r)
            self.diameter = 2 * self.radius
            bounded_box = False
        else:
            bounded_box = True
        # feasibility (and emptiness); public analysis, no data. A wrong "infeasible" only
        # rejects a domain; a wrong bound is harmless because the box is added to the domain.
        prob = self._solve(cp.Minimize(0), list(self.user_constraints))
        if prob.status in ("infeasible", "infeasible_inaccurate"):
            raise ModelingError(
                "The domain is empty: its constraints have no common point. Check signs and "
                "bounds of the `domain` constraints."
            )
        if bounded_box:
            new_lo, new_hi = lo.copy(), hi.copy()
            for j in range(self.d):
                for sense in (1.0, -1.0):
                    if (sense > 0 and np.isfinite(hi[j])) or (sense < 0 and np.isfinite(lo[j])):
                        continue
                    p = self._solve(cp.Maximize(sense * w[j]), list(self.user_constraints))
                    if (
                        p.status in ("unbounded", "unbounded_inaccurate")
                        or p.value is None
                        or not np.isfinite(p.value)
                    ):
                        direction = "+inf" if sense > 0 else "-inf"
                        raise ModelingError(
                            f"The domain is unbounded: w[{j}] can go to {direction}. Every "
                            "guarantee needs a compact domain; add a bound such as "
                            "`cp.norm(w, 2) <= R`."
                        )
                    val = sense * float(p.value)
                    pad = 1e-6 * (1 + abs(val))
                    if sense > 0:
                        new_hi[j] = val + pad
                    else:
                        new_lo[j] = val - pad
            added = [w >= new_lo, w <= new_hi]
            self.constraints = self.constraints + tuple(added)
            for c in added:
                rows = _affine_rows(c.args[0] - c.args[1], w)
                self._poly.append(rows)
                self._pieces.add_rows(rows.M, -rows.b)
                self._ineq.append(_substitute(c.args[0] - c.args[1], w, self._plain))
            self._lo, self._hi = new_lo, new_hi
            self.center = (new_lo + new_hi) / 2
            self.radius = float(np.linalg.norm((new_hi - new_lo) / 2))
            self.diameter = 2 * self.radius

    def _init_interior(self) -> None:
        """Find a point of W with the largest common slack on the inequality constraints."""
        w = self._plain
        if self.kind == "l2_ball":
            self.interior, self.slack = self.center.copy(), None
            return
        if self.kind == "box":
            self.interior, self.slack = self.center.copy(), None
            return
        s = cp.Variable()
        cons = [expr + s * (1 + self._scale(expr)) <= 0 for expr in self._ineq]
        cons += [
            _substitute(c, self.variable, w) for c in self.constraints if isinstance(c, Equality)
        ]
        prob = self._solve(cp.Maximize(s), cons + [s <= 1])
        if w.value is None or s.value is None:
            raise ModelingError("Could not find a point inside the domain; is it empty?")
        point = self._onto_equalities(np.asarray(w.value, float))
        slacks = self._violations(point)
        # The status only ever *rejects* (fails safe); acceptance rests on dpcvx's own float64
        # check of every constraint at the point. The domain is public: no data is involved.
        if (
            prob.status not in ("optimal", "optimal_inaccurate")
            or np.max(slacks) >= 0
            or not self._eq_ok(point)
        ):
            raise ModelingError(
                "The domain has no strictly feasible point (its inequalities have empty "
                "interior). Describe lower-dimensional sets with equality constraints."
            )
        self.interior = point
        self.slack = -slacks

    @staticmethod
    def _scale(expr: cp.Expression) -> float:
        consts = [abs(float(np.max(np.abs(c.value)))) for c in expr.constants()] or [0.0]
        return max(consts)

    def _violations(self, point: np.ndarray) -> np.ndarray:
        """Values of every inequality ``g_j(point) <= 0`` plus a rounding margin (>0 = fail)."""
        w = self._plain
        VALUE_LOCK.acquire()  # checks set ``variable.value``: one at a time
        old = w.value
        w.value = point
        try:
            vals = []
            for expr in self._ineq:
                v = np.asarray(expr.value, float).reshape(-1)
                margin = _FEAS_REL * (1 + self._scale(expr) + np.linalg.norm(point, 1))
                vals.append(np.max(v) + margin)
        finally:
            w.value = old
            VALUE_LOCK.release()
        return np.asarray(vals)

    def _eq_ok(self, point: np.ndarray) -> bool:
        for rows in self._eq:
            res = rows.M @ point + rows.b
            tol = _FEAS_REL * (1 + np.abs(rows.M) @ np.abs(point) + np.abs(rows.b))
            if np.any(np.abs(res) > tol):
                return False
        return True

    def _onto_equalities(self, point: np.ndarray) -> np.ndarray:
        """Least-squares correction onto all affine equalities at once."""
        if not self._eq:
            return point
        M = np.vstack([rows.M for rows in self._eq])
        b = np.concatenate([rows.b for rows in self._eq])
        for _ in range(2):  # one refinement step for accuracy
            point = point - np.linalg.lstsq(M, M @ point + b, rcond=None)[0]
        return point

    def _checked(self, point: np.ndarray) -> np.ndarray:
        """Return ``point`` if it passes the feasibility check, else raise (never unchecked)."""
        if not self.contains(point):
            from dpcvx.errors import CertificationError

            raise CertificationError(
                "dpcvx could not produce a point that provably lies in the domain (float64 "
                "check with its margin). Rescale the domain to order one."
            )
        return point

    # ------------------------------------------------------------------ public operations
    def contains(self, point: np.ndarray) -> bool:
        """Whether ``point`` satisfies every constraint with dpcvx's rounding margin."""
        point = np.asarray(point, float)
        if self.kind == "l2_ball":
            return bool(
                np.linalg.norm(point - self.center) <= self.radius * (1 - 8 * _EPS) / (1 + 4 * _EPS)
            )
        if self.kind == "box":
            return bool(np.all(point >= self._lo) and np.all(point <= self._hi))
        if self.kind == "l1_ball":
            return bool(
                np.sum(np.abs(point - self.center)) * (1 + 2 * self.d * _EPS)
                <= self.radius / (1 + 4 * _EPS)
            )
        if self.kind == "simplex":
            return bool(np.all(point >= 0) and self._eq_ok(point))
        return bool(np.all(self._violations(point) <= 0) and self._eq_ok(point))

    def project(self, point: np.ndarray) -> np.ndarray:
        """Euclidean projection for balls and boxes; for general sets, the point itself."""
        point = np.asarray(point, float)
        if self.kind == "l2_ball":
            r = self.radius / (1 + 4 * _EPS)
            diff = point - self.center
            nrm = np.linalg.norm(diff)
            return point if nrm <= r else self.center + diff * (r / nrm)
        if self.kind == "box":
            return np.clip(point, self._lo, self._hi)
        if self.kind == "l1_ball":
            return self.center + _project_l1(point - self.center, self.radius / (1 + 4 * _EPS))
        if self.kind == "simplex":
            return _project_simplex(point, self.total)
        return point

    def make_feasible(self, point: np.ndarray) -> np.ndarray:
        """An exactly feasible point close to ``point`` (checked with :meth:`contains`).

        Balls and boxes: projection, then a shrink toward the center until the float64 check
        passes. General sets: projection onto the affine equalities, then a pull toward the
        strictly feasible interior point by the convexity bound on the violations.
        """
        point = np.asarray(point, float).reshape(self.d)
        if not np.all(np.isfinite(point)):
            point = self.interior.copy()
        if self.kind in ("l2_ball", "box", "l1_ball", "simplex"):
            cand = self.project(point)
            t = 0.0
            while not self.contains(cand):
                t = max(2 * t, 1e-15)
                if t >= 1:
                    cand = self._checked(self.interior.copy())
                    break
                cand = (1 - t) * self.project(point) + t * self.interior
            return cand
        point = self._onto_equalities(point)
        viol = self._violations(point)
        if np.all(viol <= 0) and self._eq_ok(point):
            return point
        pos = np.maximum(viol, 0)
        t = float(np.max(pos / (pos + self.slack)))
        while True:
            t = min(1.0, t * (1 + 1e-9) + 1e-15)
            cand = (1 - t) * point + t * self.interior
            if np.all(self._violations(cand) <= 0) and self._eq_ok(cand):
                return cand
            if t >= 1.0:
                return self._checked(self.interior.copy())
            t = 2 * t

    def _bounding_support(self, V: np.ndarray) -> np.ndarray:
        """Exact support function of the bounding set (box when finite, else ball)."""
        if np.all(np.isfinite(self._lo)) and np.all(np.isfinite(self._hi)):
            val = np.sum(np.maximum(V * self._lo, V * self._hi), axis=1)
            mag = np.sum(np.maximum(np.abs(V * self._lo), np.abs(V * self._hi)), axis=1)
        else:
            norms = row_norms(V)
            val = V @ self.center + self.radius * norms
            mag = np.abs(V) @ np.abs(self.center) + self.radius * norms
        return val + 64 * _EPS * (mag + 1.0) * self.d

    def support(self, V: np.ndarray, hints: np.ndarray | None = None) -> np.ndarray:
        """Upper bounds on the support function ``max_{y in W} <v, y>`` for each row ``v`` of
        ``V``, with a rounding allowance added.

        Closed forms for the catalogue kinds. For any other domain, weak duality over its
        pieces (:mod:`dpcvx.modeling._sets`) with multipliers from the KKT conditions at
        ``hints[i]`` (a near-maximizer, e.g. the solver's point), or at a point dpcvx solves
        for when no hint is given; never worse than the bounding set's support function."""
        V = np.atleast_2d(np.asarray(V, float))
        if self.kind == "l2_ball":
            norms = row_norms(V)
            val = V @ self.center + self.radius * norms
            mag = np.abs(V) @ np.abs(self.center) + self.radius * norms
            return val + 64 * _EPS * (mag + 1.0) * self.d
        if self.kind == "l1_ball":
            val = V @ self.center + self.radius * np.max(np.abs(V), axis=1)
            mag = np.abs(V) @ np.abs(self.center) + self.radius * np.max(np.abs(V), axis=1)
            return val + 64 * _EPS * (mag + 1.0) * self.d
        if self.kind == "simplex":
            val = self.total * np.max(V, axis=1)
            return val + 64 * _EPS * (np.abs(val) + 1.0) * self.d
        outer = self._bounding_support(V)
        if self.kind == "box":
            return outer
        if hints is None:
            hints = np.stack([self._hint_support(v) for v in V])
        hints = np.asarray(hints, float).reshape(V.shape)
        out = outer.copy()
        for i, (v, y) in enumerate(zip(V, hints)):
            if not np.any(v) or not np.all(np.isfinite(y)):
                continue
            total, covered, mag = self._pieces.split(v, y, self._plain, VALUE_LOCK)
            rest = (v - covered)[None, :]
            bound = total + float(self._bounding_support(rest)[0])
            bound += 64 * _EPS * (mag + abs(total) + 1.0) * self.d
            if np.isfinite(bound):
                out[i] = min(out[i], bound)
        return out

    def _hint_problem(self, kind: str) -> tuple:
        """A cached parametric CVXPY problem over the domain (public; no data)."""
        if kind not in self._hint_problems:
            v = cp.Variable(self.d)
            cons = [_substitute(c, self.variable, v) for c in self.constraints]
            q = cp.Parameter(self.d)
            if kind == "support":
                prob = cp.Problem(cp.Maximize(q @ v), cons)
                self._hint_problems[kind] = (prob, v, q, None)
            else:
                half = cp.Parameter(nonneg=True)
                prob = cp.Problem(cp.Minimize(q @ v + half * cp.sum_squares(v)), cons)
                self._hint_problems[kind] = (prob, v, q, half)
        return self._hint_problems[kind]

    def _solve_hint(self, kind: str, q: np.ndarray, half: float = 0.0) -> np.ndarray:
        prob, v, qp, hp = self._hint_problem(kind)
        with VALUE_LOCK:
            qp.value = np.asarray(q, float)
            if hp is not None:
                hp.value = float(half)
            try:
                with warnings.catch_warnings():  # an inaccurate hint only loosens a bound
                    warnings.simplefilter("ignore")
                    prob.solve(
                        solver=cp.CLARABEL,
                        tol_gap_abs=1e-12,
                        tol_gap_rel=1e-12,
                        tol_feas=1e-12,
                        max_iter=300,
                    )
            except (cp.SolverError, ValueError, ArithmeticError):
                return self.interior.copy()
            val = v.value
        if val is None or not np.all(np.isfinite(val)):
            return self.interior.copy()
        return np.asarray(val, float)

    def _hint_support(self, v: np.ndarray) -> np.ndarray:
        """A near-maximizer of ``<v, w>`` over the domain (public computation)."""
        return self._solve_hint("support", v)

    def make_feasible_rows(self, P: np.ndarray) -> np.ndarray:
        """:meth:`make_feasible` for every row of ``P`` (vectorized for l2 balls and boxes)."""
        P = np.asarray(P, float)
        if self.kind == "box":
            return np.clip(P, self._lo, self._hi)
        if self.kind == "l2_ball":
            n, d = P.shape
            rows = max(1, _ROW_CHUNK_ENTRIES // max(d, 1))
            if n > 2 * rows:  # each row on its own: chunks keep the temporaries small
                out = np.empty_like(P)
                for start in range(0, n, rows):
                    out[start : start + rows] = self.make_feasible_rows(P[start : start + rows])
                return out
            # the one-pass norms are within (d / 2 + 1) eps of the true ones: the check's margin
            # scales with d, and rows are projected just inside it (a point on the sphere, as
            # every copy y_i = w of a boundary point, then passes without the shrink below)
            limit = self.radius * (1 - (d + 8) * _EPS) / (1 + 4 * _EPS)
            r = limit * (1 - (d + 8) * _EPS)
            diff = P - self.center
            nrm = row_norms(diff)[:, None]
            out = self.center + diff * np.minimum(1.0, r / np.maximum(nrm, 1e-300))
            bad = row_norms(out - self.center) > limit
            # rows the check refuses (projections onto the sphere fail its margin): the shrink
            # of :meth:`make_feasible` toward the interior point, for all of them at once
            idx = np.flatnonzero(bad)
            proj = out[idx]
            t = 1e-15
            while idx.size and t < 1:
                cand = (1 - t) * proj + t * self.interior
                ok = row_norms(cand - self.center) <= limit
                out[idx[ok]] = cand[ok]
                idx, proj = idx[~ok], proj[~ok]
                t *= 2
            for i in idx:  # pragma: no cover - not reached: t -> 1 gives the interior point
                out[i] = self.make_feasible(P[i])
            return out
        return np.stack([self.make_feasible(row) for row in P])

    def min_linear_quadratic(
        self, s: np.ndarray, lam: float, w0: np.ndarray, hint: np.ndarray | None = None
    ) -> float:
        """A valid lower bound on ``min_{w in W} <s, w> + (lam/2) ||w - w0||^2``.

        Exact (up to rounding, which is subtracted) for balls and boxes. For general sets, a
        Lagrangian bound on the bounding ball (or box) with nonnegative multipliers of the
        constraints linearized at ``hint`` (true subgradients), chosen by NNLS to cancel the
        objective's gradient at ``hint``.
        """
        s = np.asarray(s, float)
        if self.kind == "l2_ball":
            return _min_ball(s, lam, w0, self.center, self.radius)
        if self.kind == "box":
            return _min_box(s, lam, w0, self._lo, self._hi)
        if self.kind == "simplex":
            return _min_simplex(s, lam, np.asarray(w0, float), self.total)
        if self.kind == "l1_ball":
            return _min_l1(s, lam, np.asarray(w0, float), self.center, self.radius)
        w0 = np.asarray(w0, float)
        old = self._outer_min(s, lam, w0)
        if hint is None or not np.all(np.isfinite(hint)):
            hint = self._solve_hint("quad", s - lam * w0, lam / 2)
        hint = np.asarray(hint, float).reshape(self.d)
        # KKT at the hint: -(s + lam (hint - w0)) lies in the normal cone of W there
        normal = -(s + lam * (hint - w0))
        total, covered, mag = self._pieces.split(normal, hint, self._plain, VALUE_LOCK)
        inner = self._outer_min(s + covered, lam, w0)
        bound = inner - total - 16 * _EPS * (abs(inner) + mag + abs(total) + 1.0) * self.d
        return max(old, bound) if np.isfinite(bound) else old

    def _outer_min(self, s: np.ndarray, lam: float, w0: np.ndarray) -> float:
        """``min <s, w> + (lam/2)||w - w0||^2`` over the bounding set (box or ball)."""
        if np.all(np.isfinite(self._lo)) and np.all(np.isfinite(self._hi)):
            return _min_box(s, lam, w0, self._lo, self._hi)
        return _min_ball(s, lam, w0, self.center, self.radius)


def _min_ball(
    s: np.ndarray, lam: float, w0: np.ndarray, center: np.ndarray, radius: float
) -> float:
    """Lower bound on ``min <s, w> + (lam/2)||w - w0||^2`` over ``{||w - c|| <= r}``.

    Weak duality with a multiplier ``tau >= 0`` of ``(||w - c||^2 - r^2) / 2 <= 0``: the inner
    minimum is attained at ``w = (lam w0 + tau c - s) / (lam + tau)`` and the value is a lower
    bound for ANY ``tau >= 0``; ``tau = max(0, ||lam (w0 - c) - s|| / r - lam)`` makes it exact.
    """
    a = lam * (w0 - center) - s
    tau = max(0.0, float(np.linalg.norm(a)) / radius - lam)
    if lam + tau == 0.0:  # s == 0 and lam == 0
        return -64 * _EPS
    w = center + a / (lam + tau)
    terms = (
        float(s @ w),
        lam / 2 * float(np.sum((w - w0) ** 2)),
        tau / 2 * (float(np.sum((w - center) ** 2)) - radius**2),
    )
    mag = (
        float(np.abs(s) @ np.abs(w))
        + abs(terms[1])
        + tau / 2 * (float(np.sum((w - center) ** 2)) + radius**2)
    )
    return sum(terms) - 64 * _EPS * (mag + 1.0) * len(s)


def _min_box(s: np.ndarray, lam: float, w0: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
    if lam > 0:
        p = np.clip(w0 - s / lam, lo, hi)
    else:
        p = np.where(s >= 0, lo, hi)
    val = float(s @ p + lam / 2 * np.sum((p - w0) ** 2))
    return val - 64 * _EPS * (np.abs(s) @ np.abs(p) + lam * np.sum((p - w0) ** 2) + 1.0)


def _simplex_threshold(a: np.ndarray, total: float) -> float:
    """``tau`` with ``sum(max(a - tau, 0)) = total`` (sort-based; robust to rounding)."""
    srt = np.sort(a)[::-1]
    css = np.cumsum(srt) - total
    idx = np.arange(1, len(a) + 1)
    hits = np.nonzero(srt - css / idx > 0)[0]
    k = int(hits[-1]) if len(hits) else 0
    return float(css[k] / (k + 1))


def _project_simplex(u: np.ndarray, total: float) -> np.ndarray:
    """Euclidean projection onto ``{w >= 0, sum w = total}`` (exact up to rounding)."""
    return np.maximum(u - _simplex_threshold(u, total), 0.0)


def _min_simplex(s: np.ndarray, lam: float, w0: np.ndarray, total: float) -> float:
    """Lower bound on ``min <s, w> + (lam/2)||w - w0||^2`` over ``{w >= 0, sum w = total}``.

    Weak duality with a multiplier ``tau`` of the sum constraint: for ANY ``tau`` the value
    ``sum_j min_{w_j >= 0} [(s_j + tau) w_j + (lam/2)(w_j - w0_j)^2] - tau * total`` is a lower
    bound; the right ``tau`` (computed without dividing by ``lam``) makes it exact. Each term is
    evaluated directly, so there is no cancellation for small ``lam``.
    """
    if lam > 0:
        tau = _simplex_threshold(lam * w0 - s, lam * total)
        wj = np.maximum(w0 - (s + tau) / lam, 0.0)
        terms = (s + tau) * wj + lam / 2 * (wj - w0) ** 2
        val = float(np.sum(terms) - tau * total)
        mag = float(np.sum(np.abs(terms)) + abs(tau) * total)
    else:
        tau = -float(np.min(s))
        val = -tau * total
        mag = abs(tau) * total
    return val - 64 * _EPS * (mag + 1.0) * len(s)


def _min_l1(s: np.ndarray, lam: float, w0: np.ndarray, c: np.ndarray, r: float) -> float:
    """Lower bound on ``min <s, w> + (lam/2)||w - w0||^2`` over ``{||w - c||_1 <= r}``.

    Weak duality with a multiplier ``tau >= 0`` of the norm constraint: per coordinate
    ``min_z s_j (z + c_j) + (lam/2)(z + c_j - w0_j)^2 + tau |z|`` (soft-thresholding), minus
    ``tau * r``; valid for any ``tau >= 0``, exact for the right one.
    """
    if lam > 0:
        a = lam * (w0 - c) - s  # = lam * (unconstrained minimizer - c), without dividing
        if np.sum(np.abs(a)) <= lam * r:
            tau = 0.0
        else:
            tau = max(_simplex_threshold(np.abs(a), lam * r), 0.0)
        z = np.sign(a) * np.maximum(np.abs(a) - tau, 0.0) / lam
        terms = s * (z + c) + lam / 2 * (z + c - w0) ** 2 + tau * np.abs(z)
        val = float(np.sum(terms) - tau * r)
        mag = float(np.sum(np.abs(terms)) + tau * r)
    else:
        tau = float(np.max(np.abs(s)))
        val = float(s @ c) - tau * r
        mag = float(np.abs(s) @ np.abs(c)) + tau * r
    return val - 64 * _EPS * (mag + 1.0) * len(s)


def _project_l1(u: np.ndarray, radius: float) -> np.ndarray:
    """Euclidean projection onto ``{||w||_1 <= radius}``."""
    if np.sum(np.abs(u)) <= radius:
        return u
    return np.sign(u) * _project_simplex(np.abs(u), radius)
