"""Certified solves of per-example convex-concave (adversarial) ERM: paper 002, Section 5.2.

For ``f(w, v; z) = phi(w; z) + q(w, v; z)``, convex in ``w`` and concave in ``v`` in the public
set ``S`` (:class:`~dpcvx.modeling.saddle.SaddleDeclaration`), dpcvx minimizes

    G(w) = (1/n) sum_i max_{v in S} f(w, v; z_i) + (lam/2) ||w - w0||^2     over W

and returns a point ``w_hat`` with a certified bracket ``lower <= min_W G <= G(w_hat) <= upper``.
Algorithm 8 of paper 002 needs exactly ``G(w_hat) - min G <= alpha`` (its privacy proof turns
an alpha-saddle point into that bound by Sion's theorem, then uses the strong convexity of
``G``); dpcvx certifies it directly:

- **upper** ``>= G(w_hat)``: for every example, the inner problem ``min_{v in S} -q(w_hat, v;
  z_i)`` is a convex program (Assumption 2). All n of them are solved as *one* conic program
  (the Lipschitz-extension template of the inner declaration, whose per-example copies are
  exactly the n adversaries; the coupling weight is a negligible ``1e-10``), and each gets a
  valid-by-construction affine minorant from dpcvx's certificate, so ``max_{v in S} q_i <=
  -(beta_i - sigma_S(-s_i))``. Then ``upper = mean(phi_i(w_hat) + that) + reg`` plus rounding.
- **lower** ``<= min_W G``: the cutting-set model of Mutapcic & Boyd (2009),
  ``M_k(w) = (1/n) sum_i phi_i(w) + max_{j <= k} q(w, V_j[i]; z_i) + reg`` with every
  ``V_j[i]`` in ``S``, is below ``G`` everywhere, so dpcvx's certified lower bound of
  ``min_W M_k`` is one for ``min_W G``.
- The adversaries' points of the inner solve at ``w_hat`` become the next cut; rounds stop
  when ``upper - lower <= alpha``.

The bracket is also an alpha-saddle certificate in the paper's sense (Definition 4): by LP
duality of the finite max and concavity in ``v``, ``lower <= min_w H(w, V_bar)`` for the
mixture ``V_bar`` of the cuts weighted by the model's multipliers, so ``max_V H(w_hat, V) -
min_w H(w, V_bar) <= upper - lower``. Nothing here reads a solver's status or objective.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
import scipy.sparse as sp

from dpcvx.certification.certificate import ROUNDING, CertifiedSolution
from dpcvx.certification.extension import _loss_at as _own_values
from dpcvx.certification.extension import extension_bounds
from dpcvx.certification.solve import _PRIVATE_FAILURE, certified_solve
from dpcvx.compilation.solvers import solve_program
from dpcvx.compilation.stamp import stamp
from dpcvx.compilation.template import (
    ConeLayout,
    DomainBlock,
    Template,
    compile_domain,
    compile_template,
    with_extension,
)
from dpcvx.errors import CertificationError
from dpcvx.modeling.declaration import Declaration
from dpcvx.modeling.gradients import per_example_gradients
from dpcvx.modeling.saddle import SaddleDeclaration

__all__ = ["InnerBounds", "SaddleSolver", "inner_bounds"]

#: weight of the (irrelevant) coupling term of the extension template used for the n inner
#: problems: it moves each adversary's point by at most this times diam(S) in value, and the
#: bounds below never use it
INNER_COUPLING = 1e-10
#: projected-gradient steps that polish the adversaries' points (see :func:`_polish`)
POLISH_STEPS = 30
#: default cap on the cutting-set rounds (public)
MAX_ROUNDS = 40


@dataclass(frozen=True, slots=True, kw_only=True)
class InnerBounds:
    """Certified per-example values of the adversary's problem at ``w``:
    ``max_{v in S} f(w, v; z_i) <= upper[i]``, attained up to ``upper[i] - achieved[i]`` by
    ``points[i]`` (``f(w, points[i]; z_i) = achieved[i]`` in float64)."""

    w: np.ndarray
    upper: np.ndarray
    achieved: np.ndarray
    points: np.ndarray


def inner_bounds(
    sdecl: SaddleDeclaration, w: np.ndarray, template, *, solver: str | None = None
) -> InnerBounds:
    """Solve the n adversaries' problems at ``w`` as one conic program and bound each.

    ``template`` is ``compile_template(sdecl.inner, extension=1.0)`` (compiled once)."""
    decl = sdecl.inner_at(w)
    p = sdecl.p
    anchor = sdecl.start
    fixed = DomainBlock(
        cones=ConeLayout(zero=p, nonneg=0, soc=(), exp=0),
        n_cols=p,
        w_cols=np.arange(p),
        A=sp.identity(p, format="csc"),
        b=anchor.copy(),
    )
    tmpl = with_extension(template, INNER_COUPLING)
    theta = tmpl.theta(decl.derived_values(), decl.n)
    prog = stamp(tmpl, fixed, theta, d=p, lam=0.0, w0=np.zeros(p))
    raw = solve_program(prog, solver, tight=True)
    _, _, g, Y_hat, mag, phi = extension_bounds(decl, prog, raw.x, raw.z, anchor, INNER_COUPLING)
    dom = decl.domain
    Y_hat = _polish(decl, Y_hat)
    # two valid lower bounds on m_i = min_{v in S} h_i(v), h_i = -q(w, .; z_i):
    # (a) the solver-guided minorant: m_i >= phi_i + min_{v in S} <g_i, v>
    dual = phi - dom.support(-g) - ROUNDING * mag
    # (b) the tangent at the adversary's point: h_i(v) >= h_i(Y_i) + <s_i, v - Y_i> for a
    # true subgradient s_i (convexity), so m_i >= h_i(Y_i) - <s_i, Y_i> - sigma_S(-s_i)
    h_vals = _own_values(decl, Y_hat)
    with np.errstate(over="ignore", invalid="ignore"):
        s = per_example_gradients(decl, Y_hat)
        base = h_vals - np.einsum("nd,nd->n", s, Y_hat)
        tangent = (
            base
            - dom.support(-s)
            - ROUNDING
            * (
                1.0
                + np.abs(h_vals)
                + np.abs(s) @ np.abs(anchor)
                + np.einsum("nd,nd->n", np.abs(s), np.abs(Y_hat))
                + np.abs(base)
            )
        )
    tangent = np.where(np.isfinite(tangent), tangent, -np.inf)
    lower_neg = np.maximum(dual, tangent)
    free = sdecl.free_values(w)
    upper = free + (-lower_neg) + ROUNDING * (1.0 + np.abs(free))
    achieved = sdecl.values(w, Y_hat)
    if not np.all(np.isfinite(upper)):
        raise CertificationError("The adversary's bounds are not finite (overflow).")
    return InnerBounds(w=np.asarray(w, float).copy(), upper=upper, achieved=achieved, points=Y_hat)


def _polish(decl: Declaration, Y: np.ndarray, steps: int = POLISH_STEPS) -> np.ndarray:
    """Projected-gradient steps with per-example backtracking on ``h_i(v) = -q(w, v; z_i)``
    from the interior-point solution (S a catalogue set with an exact projection).

    The interior-point solution is accurate in *value* to the solver's tolerance, so its
    points are only accurate to about the square root of it; the tangent bound below loses
    ``diam(S)`` times the gradient's error. A few exact-projection steps shrink that. Only
    improvements are kept (every point stays in S), so the bounds stay valid whatever
    happens here."""
    dom = decl.domain
    if dom.kind not in ("l2_ball", "box", "l1_ball"):
        return Y
    Y = dom.make_feasible_rows(Y)
    h = _own_values(decl, Y)
    step = np.ones(Y.shape[0])
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(steps):
            g = per_example_gradients(decl, Y)
            ok_g = np.all(np.isfinite(g), axis=1)
            if not np.any(ok_g):
                break
            # make_feasible_rows is the exact projection for these sets (vectorized for balls
            # and boxes), shrunk into S when float64 rounding leaves a point outside
            trial = dom.make_feasible_rows(Y - step[:, None] * np.nan_to_num(g))
            h_trial = _own_values(decl, trial)
            better = ok_g & np.isfinite(h_trial) & (h_trial < h)
            Y = np.where(better[:, None], trial, Y)
            h = np.where(better, h_trial, h)
            step = np.where(better, step * 1.5, step * 0.25)
            if np.all(step < 1e-12):
                break
    return Y


@dataclass
class SaddleSolver:
    """Certified cutting-set solves of one saddle declaration (templates compiled once)."""

    sdecl: SaddleDeclaration
    solver: str | None = None
    max_rounds: int = MAX_ROUNDS
    _inner_template: Template | None = field(default=None, repr=False)
    _outer: dict[int, Template] = field(default_factory=dict, repr=False)
    _block: DomainBlock | None = field(default=None, repr=False)

    def prepare(self) -> None:
        """Compile the inner template and the one-cut model (data-independent)."""
        if self._inner_template is None:
            self._inner_template = compile_template(self.sdecl.inner, extension=1.0)
            self._block = compile_domain(self.sdecl.outer)
            self._outer[1] = compile_template(self.sdecl.outer)

    def _model(self, cuts: list[np.ndarray]) -> tuple[Declaration, Template]:
        decl = self.sdecl.model(cuts)
        k = len(cuts)
        if k not in self._outer:
            self._outer[k] = compile_template(decl)
        return decl, self._outer[k]

    def solve(
        self, lam: float, w0: np.ndarray, accuracy: float | None, *, private: bool = False
    ) -> CertifiedSolution:
        """A certified point of ``G`` (module docstring). With ``accuracy=None`` the rounds
        stop when the bracket stops shrinking by half per round, or at ``max_rounds``; with a
        target they run until it is met (else :class:`~dpcvx.CertificationError`). With
        ``private=True`` any failure is one fixed message."""
        if private:
            try:
                return self._solve(lam, w0, accuracy)
            except Exception:  # noqa: BLE001 - nothing data-dependent may leave a private solve
                raise CertificationError(_PRIVATE_FAILURE.format(accuracy=accuracy)) from None
        return self._solve(lam, w0, accuracy)

    def _solve(self, lam: float, w0: np.ndarray, accuracy: float | None) -> CertifiedSolution:
        start = time.perf_counter()
        self.prepare()
        assert self._block is not None and self._inner_template is not None  # prepare()
        w0 = np.asarray(w0, float)
        cuts = [np.broadcast_to(self.sdecl.start, (self.sdecl.n, self.sdecl.p)).copy()]
        best_lower, best = -math.inf, None
        history = []
        for round_ in range(1, self.max_rounds + 1):
            decl, template = self._model(cuts)
            target = None if accuracy is None else accuracy / 4.0
            try:
                model = certified_solve(
                    decl, template, self._block, lam=lam, w0=w0, accuracy=target, solver=self.solver
                )
            except CertificationError:
                model = certified_solve(
                    decl, template, self._block, lam=lam, w0=w0, accuracy=None, solver=self.solver
                )
            best_lower = max(best_lower, model.lower)
            inner = inner_bounds(self.sdecl, model.w, self._inner_template, solver=self.solver)
            # the saddle lower bound of Definition 4: min_w H(w, V) <= min_w G for any V in
            # S^n, here the adversaries' best responses to the model's point
            response = certified_solve(
                self.sdecl.model([inner.points]),
                self._outer[1],
                self._block,
                lam=lam,
                w0=w0,
                accuracy=None,
                solver=self.solver,
            )
            best_lower = max(best_lower, response.lower)
            reg = lam / 2.0 * float(np.sum((model.w - w0) ** 2))
            upper = float(np.mean(inner.upper)) + reg
            upper += ROUNDING * (1.0 + abs(upper))
            if best is None or upper < best[0]:
                best = (upper, model.w, inner)
            gap = best[0] - best_lower
            history.append(gap)
            if accuracy is not None and gap <= accuracy:
                break
            if accuracy is None and round_ > 1 and gap > 0.5 * history[-2]:
                break
            cuts.append(inner.points)
        else:
            if accuracy is not None:
                raise CertificationError(
                    f"dpcvx could not certify the saddle problem to the accuracy target "
                    f"{accuracy:.3g} in {self.max_rounds} cutting-set rounds (best certified "
                    f"gap {history[-1]:.3g}). Nothing was released. To fix: raise the "
                    "mechanism's `accuracy`, raise `regularization`, or raise `max_rounds`."
                )
        assert best is not None  # at least one round ran
        upper, w_hat, inner = best
        gap = upper - best_lower
        if not math.isfinite(gap) or gap < -1e-12 * (1.0 + abs(upper)):
            raise CertificationError(
                "Internal: dpcvx's saddle bounds are inconsistent (lower above upper); nothing "
                "is certified. Please report this problem."
            )
        gap = max(gap, 0.0)
        dist = math.sqrt(2.0 * gap / lam) if lam > 0 else math.inf
        stats = {
            "rounds": len(history),
            "gaps": tuple(history),
            "seconds": time.perf_counter() - start,
            "method": "cutting-set model (lower) + certified adversaries (upper)",
        }
        return CertifiedSolution(
            w=np.asarray(w_hat, float).copy(),
            upper=upper,
            lower=best_lower,
            gap=gap,
            distance_bound=dist,
            regularization=lam,
            center=w0.copy(),
            accuracy=accuracy,
            solver_stats=MappingProxyType(stats),
        )
