"""A domain as an intersection of simple convex pieces, and weak-duality bounds over it.

:class:`~dpcvx.modeling.domains.Domain` reads the user's constraints, however they are spelled,
into pieces whose support functions dpcvx evaluates exactly:

- **rows** ``A w <= b``: every affine inequality, and every spelling that is one in disguise
  (``abs(E) <= r`` elementwise, ``norm_inf(E) <= r``, ``max(E) <= r``, ``maximum(E1, E2) <= r``,
  ``pos(E) <= r``, ``Variable(bounds=...)``, ``Variable(nonneg=True)``);
- **equalities** ``A_eq w = b_eq``;
- **norm pieces** ``||M w + m||_p <= r`` for ``p`` in {1, 2}: ``norm(E)``, ``norm1(E)``,
  ``sum(abs(E))``, ``sum_squares(E) <= r^2``, ``quad_form(E, P) <= r`` (``P`` factored, with the
  factor's rounding absorbed by a larger radius, so the piece contains the user's set), positive
  multiples and squares of these;
- **generic pieces** ``g(w) <= 0`` for any other convex ``g``: outer-approximated by tangent
  halfspaces at a hint (valid wherever the hint is).

Every bound is weak duality. For ANY multipliers, with ``v = sum_j v_j + r`` split over the
pieces and a remainder ``r`` given to a bounding set ``B`` of the domain (a box or a ball with
an exact support function),

    sigma_W(v) <= sum_j sigma_{C_j}(v_j) + sigma_B(r),
    min_{w in W} <s, w> + (lam/2)||w - w0||^2
        >= min_{w in B} <s + sum_j v_j, w> + (lam/2)||w - w0||^2 - sum_j sigma_{C_j}(v_j).

dpcvx picks the multipliers from the KKT conditions at a hint (the solver's point): the
nonnegative least-squares fit of ``v`` by the normals of the pieces active there, with the
remainder given to a norm piece (whose support function is exact for every vector) when there
is one. At an exact optimum the bounds are exact; the error is second order in the hint's error
for curved pieces and zero (up to rounding) for polyhedral ones once the active set is right.
Validity never depends on the hint or on the fit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import cvxpy as cp
import numpy as np
from cvxpy.atoms.affine.add_expr import AddExpression
from cvxpy.atoms.affine.binary_operators import DivExpression, MulExpression, multiply
from cvxpy.atoms.affine.sum import Sum
from cvxpy.atoms.affine.unary_operators import NegExpression
from cvxpy.atoms.elementwise.abs import abs as cp_abs
from cvxpy.atoms.elementwise.maximum import maximum as cp_maximum
from cvxpy.atoms.elementwise.power import Power
from cvxpy.atoms.max import max as cp_max
from cvxpy.atoms.norm1 import norm1
from cvxpy.atoms.norm_inf import norm_inf
from cvxpy.atoms.pnorm import Pnorm
from cvxpy.atoms.quad_form import QuadForm
from cvxpy.atoms.quad_over_lin import quad_over_lin
from scipy.optimize import nnls

__all__ = ["NormPiece", "Pieces", "parse_constraint", "scaled_identity", "variable_rows"]

_EPS = np.finfo(float).eps


@dataclass(frozen=True, slots=True, eq=False)
class NormPiece:
    """The set ``{w : ||M w + m||_p <= r}`` (``p`` is 1 or 2)."""

    M: np.ndarray
    m: np.ndarray
    r: float
    p: float
    _pinv: np.ndarray | None = field(init=False, default=None)

    def pinv(self) -> np.ndarray:
        """The pseudo-inverse of ``M^T`` (computed once, when first asked: an SVD of a
        ``d x d`` matrix took 30 s at d = 5000, for a ball that never needed it); a diagonal
        ``M`` (a ball, a scaled ball) is inverted entry by entry with numpy's cutoff."""
        if self._pinv is None:
            M = self.M
            diag = np.diagonal(M)
            if M.shape[0] == M.shape[1] and np.count_nonzero(M) == np.count_nonzero(diag):
                big = float(np.max(np.abs(diag), initial=0.0))
                keep = np.abs(diag) > 1e-15 * big
                inv = np.where(keep, 1.0 / np.where(keep, diag, 1.0), 0.0)
                object.__setattr__(self, "_pinv", np.diag(inv))
            else:
                object.__setattr__(self, "_pinv", np.linalg.pinv(M.T))
        assert self._pinv is not None
        return self._pinv

    def values(self, W: np.ndarray) -> np.ndarray:
        """``||M w + m||_p`` for each row ``w`` of ``W``."""
        X = W @ self.M.T + self.m
        return np.linalg.norm(X, ord=self.p, axis=1)

    def normal(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """``(M^T u, u)`` with ``u`` a subgradient of the norm at ``M y + m`` (None at 0)."""
        x = self.M @ y + self.m
        if self.p == 2:
            nrm = float(np.linalg.norm(x))
            if nrm == 0.0:
                return None
            u = x / nrm
        else:
            u = np.sign(x)
            if not np.any(u):
                return None
        return self.M.T @ u, u

    def sigma(self, U: np.ndarray) -> np.ndarray:
        """Upper bounds on ``sup_{w in piece} <M^T u, w>`` for each row ``u`` of ``U``:
        ``-<u, m> + r ||u||_q`` (``q`` the dual exponent), rounded upward."""
        U = np.atleast_2d(U)
        dual = np.linalg.norm(U, axis=1) if self.p == 2 else np.max(np.abs(U), axis=1)
        val = -(U @ self.m) + self.r * dual
        mag = np.abs(U) @ np.abs(self.m) + self.r * dual
        return val + 16 * _EPS * (mag + 1e-300) * (U.shape[1] + 4)


@dataclass(frozen=True, slots=True, eq=False)
class GenericPiece:
    """``g(w) <= 0`` elementwise for a convex expression ``g`` without a closed form."""

    expr: cp.Expression


@dataclass(eq=False)
class Pieces:
    """The parsed domain: rows ``A w <= b``, equalities, norm pieces and generic pieces."""

    d: int
    A: np.ndarray
    b: np.ndarray
    A_eq: np.ndarray
    b_eq: np.ndarray
    norms: list[NormPiece]
    generic: list[GenericPiece]
    pending: list = field(default_factory=list)

    @classmethod
    def empty(cls, d: int) -> Pieces:
        return cls(d, np.zeros((0, d)), np.zeros(0), np.zeros((0, d)), np.zeros(0), [], [])

    def finish(self, center: np.ndarray, radius: float) -> None:
        """Turn quadratic-form pieces into norm pieces once a bounding ball is known."""
        self.norms += [p.finish(center, radius) for p in self.pending]
        self.pending = []

    def add_rows(self, A: np.ndarray, b: np.ndarray) -> None:
        self.A = np.vstack([self.A, np.asarray(A, float).reshape(-1, self.d)])
        self.b = np.concatenate([self.b, np.asarray(b, float).reshape(-1)])

    def add_eq(self, A: np.ndarray, b: np.ndarray) -> None:
        self.A_eq = np.vstack([self.A_eq, np.asarray(A, float).reshape(-1, self.d)])
        self.b_eq = np.concatenate([self.b_eq, np.asarray(b, float).reshape(-1)])

    @property
    def polyhedral(self) -> bool:
        return not self.norms and not self.generic

    # ------------------------------------------------------------------ decomposition
    def _columns(self, y: np.ndarray, variable: cp.Variable, lock: threading.RLock) -> tuple:
        """Normals of the pieces active at ``y``: columns, their support values per unit
        multiplier, and which norm piece (if any) each column belongs to."""
        d = self.d
        cols: list[np.ndarray] = []
        rhs: list[float] = []
        owner: list[int] = []  # -1 rows/eq/generic, j for norm piece j
        units: list[np.ndarray | None] = []
        if self.A.shape[0]:
            slack = self.b - self.A @ y
            scale = 1.0 + np.abs(self.A) @ np.abs(y) + np.abs(self.b)
            act = np.flatnonzero(slack <= 1e-7 * scale)
            for k in map(int, act):
                cols.append(self.A[k])
                rhs.append(float(self.b[k]))
                owner.append(-1)
                units.append(None)
        for k in range(self.A_eq.shape[0]):
            for sgn in (1.0, -1.0):
                cols.append(sgn * self.A_eq[k])
                rhs.append(sgn * float(self.b_eq[k]))
                owner.append(-1)
                units.append(None)
        for j, piece in enumerate(self.norms):
            val = float(piece.values(y[None, :])[0])
            if val >= piece.r * (1 - 1e-7):
                out = piece.normal(y)
                if out is not None:
                    cols.append(out[0])
                    rhs.append(np.nan)  # evaluated through sigma(u)
                    owner.append(j)
                    units.append(out[1])
        if self.generic:
            a_rows, b_rows = tangent_rows(self.generic, variable, y, lock)
            for a, bb in zip(a_rows, b_rows):
                cols.append(a)
                rhs.append(bb)
                owner.append(-1)
                units.append(None)
        G = np.column_stack(cols) if cols else np.zeros((d, 0))
        return G, np.asarray(rhs, float), np.asarray(owner, int), units

    def split(
        self, v: np.ndarray, y: np.ndarray, variable: cp.Variable, lock: threading.RLock
    ) -> tuple[float, np.ndarray, float]:
        """Split ``v`` over the pieces using the KKT fit at ``y``.

        Returns ``(sigma_sum, covered, magnitude)``: ``sigma_sum`` bounds from above the sum of
        the pieces' support functions at their shares, whose sum is ``covered`` (``v -
        covered`` is the remainder for the bounding set), and a magnitude for rounding
        margins."""
        d = self.d
        G, rhs, owner, units = self._columns(y, variable, lock)
        mu = np.zeros(G.shape[1])
        if G.shape[1]:
            norms = np.linalg.norm(G, axis=0)
            ok = norms > 0
            try:
                sol, _ = nnls(G[:, ok] / norms[ok], v, maxiter=50 * G.shape[1] + 100)
                mu[ok] = sol / norms[ok]
            except (RuntimeError, ValueError, FloatingPointError):
                mu[:] = 0.0
            if not np.all(np.isfinite(mu)):
                mu[:] = 0.0
        total = 0.0
        mag = 0.0
        covered = np.zeros(d)
        lin = owner < 0
        if np.any(lin):
            total += float(mu[lin] @ rhs[lin])
            mag += float(np.abs(mu[lin]) @ np.abs(rhs[lin]))
            covered += G[:, lin] @ mu[lin]
        U = [np.zeros(p.M.shape[0]) for p in self.norms]
        for k in np.flatnonzero(~lin):
            U[owner[k]] = U[owner[k]] + mu[k] * units[k]
        if self.norms:
            # the norm piece with the largest share takes the remainder (its sigma is exact
            # for every vector), as far as its M^T can reach it
            shares = [float(np.linalg.norm(u)) for u in U]
            j = int(np.argmax(shares))
            covered_norm = sum(p.M.T @ u for p, u in zip(self.norms, U))
            rest = v - covered - covered_norm
            U[j] = U[j] + self.norms[j].pinv() @ rest
            for p, u in zip(self.norms, U):
                if np.any(u):
                    total += float(p.sigma(u[None, :])[0])
                    mag += float(np.abs(u) @ np.abs(p.m) + p.r * np.linalg.norm(u, 1))
                    covered = covered + p.M.T @ u
        return total, covered, mag


def tangent_rows(
    generic: list[GenericPiece], variable: cp.Variable, y: np.ndarray, lock: threading.RLock
) -> tuple[list[np.ndarray], list[float]]:
    """Halfspaces ``<a, w> <= b`` containing ``{g <= 0}``, from true subgradients at ``y``
    (``g(w) >= g(y) + <a, w - y>``), for the elements of each generic piece that are nearly
    active at ``y``. Elements without a subgradient rule are skipped (still valid)."""
    a_rows: list[np.ndarray] = []
    b_rows: list[float] = []
    lock.acquire()
    old = variable.value
    try:
        variable.value = y
        for piece in generic:
            expr = piece.expr
            try:
                val = np.asarray(expr.value, float).reshape(-1)
                grad = expr.grad.get(variable) if expr.grad else None
            except (NotImplementedError, ValueError, TypeError, AttributeError):
                continue
            if grad is None or not np.all(np.isfinite(val)):
                continue
            J = np.asarray(grad.toarray() if hasattr(grad, "toarray") else grad, float)
            J = J.reshape(variable.size, -1).T  # (elements, d): CVXPY's grad is d x size
            scale = 1.0 + np.abs(val)
            for k in np.flatnonzero(val >= -1e-6 * scale):
                a = J[k]
                if not np.all(np.isfinite(a)):
                    continue
                a_rows.append(a.copy())
                b_rows.append(float(a @ y - val[k]))
    finally:
        variable.value = old
        lock.release()
    return a_rows, b_rows


# ---------------------------------------------------------------------- parsing


def _const_value(expr: cp.Expression) -> np.ndarray | None:
    if expr.variables() or expr.parameters():
        return None
    return np.asarray(expr.value, float)


def _peel(expr: cp.Expression) -> tuple[cp.Expression | None, np.ndarray]:
    """``expr = core + const`` with ``const`` the sum of the constant addends."""
    if isinstance(expr, AddExpression):
        core: cp.Expression | None = None
        const = np.zeros(())
        for a in expr.args:
            val = _const_value(a)
            if val is not None:
                const = const + val
            else:
                core = a if core is None else core + a
        return core, const
    val = _const_value(expr)
    if val is not None:
        return None, val
    return expr, np.zeros(())


def _scaled(expr: cp.Expression) -> tuple[cp.Expression, float]:
    """``expr = factor * inner`` for a positive constant factor (1 when there is none)."""
    if isinstance(expr, (multiply, MulExpression)) and len(expr.args) == 2:
        for c, e in ((expr.args[0], expr.args[1]), (expr.args[1], expr.args[0])):
            val = _const_value(c)
            if val is not None and val.size == 1 and float(val) > 0:
                inner, f = _scaled(e)
                return inner, f * float(val)
    if isinstance(expr, DivExpression):
        val = _const_value(expr.args[1])
        if val is not None and val.size == 1 and float(val) > 0:
            inner, f = _scaled(expr.args[0])
            return inner, f / float(val)
    return expr, 1.0


def _norm_of(expr: cp.Expression) -> tuple[float, cp.Expression, int, np.ndarray | None] | None:
    """``(p, E, power, P)`` when ``expr`` is ``||E||_p`` (power 1) or ``||E||_2^2`` /
    ``E^T P E`` (power 2), with ``E`` affine."""
    if (
        isinstance(expr, Pnorm)
        and getattr(expr, "axis", None) is None
        and float(expr.p) in (1.0, 2.0)
    ):
        return (float(expr.p), expr.args[0], 1, None)
    if isinstance(expr, norm1) and getattr(expr, "axis", None) is None:
        return (1.0, expr.args[0], 1, None)
    if (
        isinstance(expr, Sum)
        and getattr(expr, "axis", None) is None
        and isinstance(expr.args[0], cp_abs)
    ):
        return (1.0, expr.args[0].args[0], 1, None)
    if isinstance(expr, quad_over_lin):
        den = _const_value(expr.args[1])
        if den is not None and den.size == 1 and float(den) > 0:
            return (2.0, expr.args[0] / float(np.sqrt(float(den))), 2, None)
    if isinstance(expr, QuadForm):
        P = _const_value(expr.args[1])
        if P is not None:
            return (2.0, expr.args[0], 2, np.asarray(P, float))
    if isinstance(expr, Power):
        try:
            p = float(expr.p.value) if hasattr(expr.p, "value") else float(expr.p)
        except (TypeError, ValueError):
            return None
        if p == 2.0:
            inner = expr.args[0]
            if isinstance(inner, cp_abs):
                inner = inner.args[0]
            if inner.is_affine() and inner.size == 1:
                return (2.0, inner, 2, None)
            sub = _norm_of(inner)
            if sub is not None and sub[0] == 2.0 and sub[2] == 1:
                return (2.0, sub[1], 2, None)
    return None


def _piecewise_rows(expr: cp.Expression) -> list[cp.Expression] | None:
    """Affine expressions ``E_k`` with ``expr <= r  <=>  E_k <= r`` for all ``k``
    (elementwise, broadcast), for the polyhedral spellings."""
    if expr.is_affine():
        return [expr]
    if isinstance(expr, cp_abs) and expr.args[0].is_affine():
        return [expr.args[0], -expr.args[0]]
    if (
        isinstance(expr, norm_inf)
        and getattr(expr, "axis", None) is None
        and expr.args[0].is_affine()
    ):
        return [expr.args[0], -expr.args[0]]
    if isinstance(expr, cp_max) and getattr(expr, "axis", None) is None:
        inner = _piecewise_rows(expr.args[0])
        return inner
    if isinstance(expr, cp_maximum):
        out = []
        for a in expr.args:
            sub = _piecewise_rows(a)
            if sub is None:
                return None
            out += sub
        return out
    if isinstance(expr, NegExpression):
        return None
    return None


def parse_constraint(
    constraint: cp.Constraint,
    variable: cp.Variable,
    pieces: Pieces,
    affine_rows: Callable[[cp.Expression], tuple[np.ndarray, np.ndarray]],
) -> str:
    """Add the pieces of one inequality ``lhs <= rhs`` to ``pieces``; return what it was read
    as (``"rows"``, ``"norm"``, ``"generic"``). ``affine_rows(expr)`` gives ``(M, c)`` with
    ``expr = M w + c`` flattened."""
    lhs, rhs = constraint.args
    expr = lhs - rhs
    if expr.is_affine():
        M, c = affine_rows(expr)
        pieces.add_rows(M, -c)
        return "rows"
    core, const = _peel(lhs)
    rcore, rconst = _peel(rhs)
    if core is not None and rcore is None:
        bound = np.asarray(rconst - const, float)  # core <= bound
        inner, factor = _scaled(core)
        limit = bound / factor
        rows = _piecewise_rows(inner)
        if rows is not None and all(e.is_affine() for e in rows):
            for e in rows:
                M, c = affine_rows(e)
                lims = np.broadcast_to(limit, e.shape if e.shape else (1,)).reshape(-1)
                pieces.add_rows(M, lims - c)
            return "rows"
        norm = _norm_of(inner)
        if norm is not None and limit.size == 1 and norm[1].is_affine():
            p, E, power, P = norm
            lim = float(limit.reshape(()))
            M, c = affine_rows(E)
            if P is not None and P.ndim == 2 and scaled_identity(P) > 0:
                lim, P = lim / scaled_identity(P) * (1 + 4 * _EPS), None
            if power == 2:
                if P is not None and lim >= 0:
                    factor_m, slack = _psd_factor(P)
                    if factor_m is None:
                        return _generic(expr, pieces)
                    # ||F x||^2 <= x^T P x + slack ||x||^2: the radius is finished once the
                    # bounding set is known (Domain), so the piece contains the user's set
                    pieces.pending.append(
                        PendingEllipsoid(F=factor_m, M=M, c=c, lim=lim, slack=slack)
                    )
                    return "norm"
                # a negative bound describes an empty set: kept, so the Domain reports it
                r = float(np.sqrt(lim)) * (1 + 4 * _EPS) if lim >= 0 else lim
            else:
                r = lim
            pieces.norms.append(NormPiece(M=M, m=c, r=r, p=p))
            return "norm"
    return _generic(expr, pieces)


def scaled_identity(P: np.ndarray) -> float:
    """``a`` when ``P`` is a square matrix equal to ``a * I`` exactly with ``a != 0``, else 0
    (without forming ``I``: at d = 5000 each identity was 200 MB)."""
    if P.ndim != 2 or P.shape[0] != P.shape[1] or P.shape[0] == 0:
        return 0.0
    a = float(P[0, 0])
    if a == 0.0 or not np.all(np.diagonal(P) == a):
        return 0.0
    # the diagonal is a != 0, so P is a * I when nothing else is nonzero (NaN counts)
    return a if np.count_nonzero(P) == P.shape[0] else 0.0


def _generic(expr: cp.Expression, pieces: Pieces) -> str:
    pieces.generic.append(GenericPiece(expr))
    return "generic"


def _psd_factor(P: np.ndarray) -> tuple[np.ndarray | None, float]:
    """``F`` with ``F^T F ~ P`` and the slack ``||F^T F - P||_2`` (bounded), or None."""
    P = (P + P.T) / 2
    try:
        vals, vecs = np.linalg.eigh(P)
    except np.linalg.LinAlgError:
        return None, 0.0
    if np.min(vals) < -1e-12 * max(1.0, float(np.max(np.abs(vals)))):
        return None, 0.0
    F = np.sqrt(np.maximum(vals, 0.0))[:, None] * vecs.T
    err = F.T @ F - P
    slack = float(np.linalg.norm(err, "fro")) + 64 * _EPS * float(np.linalg.norm(P, "fro"))
    return F, slack


@dataclass(frozen=True, slots=True, eq=False)
class PendingEllipsoid:
    """``(M w + c)^T P (M w + c) <= lim`` with ``P ~ F^T F`` up to ``slack`` (spectral)."""

    F: np.ndarray
    M: np.ndarray
    c: np.ndarray
    lim: float
    slack: float

    def finish(self, center: np.ndarray, radius: float) -> NormPiece:
        """The norm piece ``||F (M w + c)|| <= r`` containing the set on ``B(center, radius)``:
        ``r^2 = lim + slack * max ||M w + c||^2`` over the ball."""
        reach = (
            float(np.linalg.norm(self.M @ center + self.c))
            + float(np.linalg.norm(self.M, 2)) * radius
        )
        r2 = self.lim + self.slack * reach * reach
        return NormPiece(
            M=self.F @ self.M,
            m=self.F @ self.c,
            r=float(np.sqrt(max(r2, 0.0))) * (1 + 8 * _EPS),
            p=2.0,
        )


def variable_rows(variable: cp.Variable) -> tuple[np.ndarray, np.ndarray, list[cp.Constraint]]:
    """Rows ``A w <= b`` implied by the variable's own attributes (``bounds``, ``nonneg``,
    ``nonpos``), and the same as explicit constraints (so compiled copies carry them)."""
    d = variable.size
    A: list[np.ndarray] = []
    b: list[np.ndarray] = []
    cons: list[cp.Constraint] = []
    attrs = variable.attributes
    bounds = attrs.get("bounds")
    lo = np.full(d, -np.inf)
    hi = np.full(d, np.inf)
    if bounds is not None:
        blo, bhi = bounds
        if blo is not None:
            lo = np.maximum(lo, np.broadcast_to(np.asarray(blo, float), (d,)))
        if bhi is not None:
            hi = np.minimum(hi, np.broadcast_to(np.asarray(bhi, float), (d,)))
    if attrs.get("nonneg") or attrs.get("pos"):
        lo = np.maximum(lo, 0.0)
    if attrs.get("nonpos") or attrs.get("neg"):
        hi = np.minimum(hi, 0.0)
    fin_lo = np.isfinite(lo)
    fin_hi = np.isfinite(hi)
    if np.any(fin_lo):
        A.append(-np.eye(d)[fin_lo])
        b.append(-lo[fin_lo])
        idx = np.flatnonzero(fin_lo)
        cons.append(variable[idx] >= lo[idx])
    if np.any(fin_hi):
        A.append(np.eye(d)[fin_hi])
        b.append(hi[fin_hi])
        idx = np.flatnonzero(fin_hi)
        cons.append(variable[idx] <= hi[idx])
    if not A:
        return np.zeros((0, d)), np.zeros(0), []
    return np.vstack(A), np.concatenate(b), cons
