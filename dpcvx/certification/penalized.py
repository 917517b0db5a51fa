"""Smooth losses plus penalties that no model holds: a group lasso (``cp.norm(w, 2)``, or norms
of blocks of ``w``), ``cp.norm_inf(w)``, ``cp.quad_form(w, P)``, maxima of affine pieces and
generic convex terms, each reading no data, beside terms that read data and are smooth (the
logistic, squared, Huber losses). A penalty of another kind (a maximum of curved pieces,
``max_terms``) keeps the loss off this rung.

Proximal Newton's method whose every step is one small conic program in ``d`` variables: the
smooth terms' second-order model at the current point, the regularization and the penalties
as the user wrote them (built by CVXPY for each step, solved by Clarabel). The data enters
only through the model's gradient and Hessian, so a step costs one pass over the data however
many examples there are, where the joint conic program held every example (the logistic loss
plus ``0.01 * cp.norm(w, 2)`` at n = 1e4, d = 20: 15 s).

Each step backtracks along the program's answer until the objective falls by a quarter of
the model's prediction. Every point goes to dpcvx's certificate with the smooth terms'
derivatives at the point, the step program's multipliers of the penalties' arguments (the
duals of ``z == E(w)``, the penalty written on ``z``), and a tangent cut of its own for a
penalty of no catalogue form: as on every path, the method only proposes points.
"""

from __future__ import annotations

import warnings
import weakref
from dataclasses import dataclass

import cvxpy as cp
import numpy as np

from dpcvx.certification.mixed import backtracked, predicted_decrease
from dpcvx.modeling._expressions import evaluate, substitute
from dpcvx.modeling.declaration import Declaration, once_per_declaration
from dpcvx.modeling.localized import LocalizedDomain
from dpcvx.modeling.smooth import SmoothModel, smooth_terms

__all__ = ["PenalizedModel", "PenaltyStep", "penalized_model", "penalized_newton"]

#: the penalty kinds whose certificate takes multipliers of their arguments (affine arguments,
#: a catalogue conjugate; a ``pieces`` term is the elementwise maximum of its arguments): the
#: step program writes them on a copy ``z`` of each argument
MULTIPLIED = ("abs", "norm2", "norminf", "max", "log_sum_exp", "pieces")
#: the penalty kinds the step program writes as the user did (the certificate takes a tangent
#: cut of them at the point: no multipliers)
AS_WRITTEN = ("generic",)


@dataclass(frozen=True)
class PenalizedModel:
    """The declaration's smooth and affine terms (``smooth``) and its penalties (``penalty``:
    the indices of the terms that read no data and that no smooth model holds), and which of
    the declaration's terms the smooth model holds (``in_smooth``, in the declaration's
    order)."""

    smooth: SmoothModel
    penalty: tuple[int, ...]
    in_smooth: tuple[bool, ...]

    def multipliers(self, w: np.ndarray, duals: dict[int, list[np.ndarray | None]], n: int) -> list:
        """The certificate's multipliers per term of the declaration: the smooth terms'
        derivatives at ``w``, and each multiplied penalty's step multipliers (the same for
        every example: a view), None for a penalty written as it was."""
        smooth = iter(self.smooth.multipliers(w))
        out: list = []
        for index, held in enumerate(self.in_smooth):
            if held:
                out.append(next(smooth))
            elif index in duals:
                out.append(
                    [
                        None if t is None else np.broadcast_to(t, (n,) + t.shape)
                        for t in duals[index]
                    ]
                )
            else:
                out.append(None)
        return out


_CACHE: weakref.WeakKeyDictionary[Declaration, PenalizedModel | None] = weakref.WeakKeyDictionary()


def penalized_model(decl: Declaration) -> PenalizedModel | None:
    """The declaration's :class:`PenalizedModel` (computed once), or None where it has no
    penalty, where a term that reads data is not smooth, or where a penalty is of a kind the
    method does not take (:data:`MULTIPLIED`, :data:`AS_WRITTEN`). Decided from the loss's
    form and constants only."""
    return once_per_declaration(_CACHE, decl, _build)


def _build(decl: Declaration) -> PenalizedModel | None:
    penalty = []
    for index, term in enumerate(decl.terms):
        if term.kind == "affine" or term.reads_data:
            continue
        if term.kind in MULTIPLIED + AS_WRITTEN:
            penalty.append(index)
    if not penalty or not any(t.reads_data for t in decl.terms):
        return None
    keep = frozenset(range(len(decl.terms))) - frozenset(penalty)
    for index in penalty:
        term = decl.terms[index]
        if (
            term.kind in MULTIPLIED
            and term.kind != "pieces"
            and (len(term.args) != 1 or term.atom is None or len(term.atom.args) != 1)
        ):
            return None
    smooth = smooth_terms(decl, keep)
    if smooth is None:
        return None
    in_smooth = tuple(index in keep for index in range(len(decl.terms)))
    return PenalizedModel(smooth, tuple(penalty), in_smooth)


class PenaltyStep:
    """The step program ``min_v (1/2) v^T M v + q^T v + sum_k P_k(v)`` over the domain, ``M``
    the smooth model's Hessian plus ``lam I``: the penalties and the domain written once, the
    program built anew for each step with ``M`` and ``q`` as constants (7 ms at d = 20, 24 ms
    at d = 100, 0.2 s at d = 400; a ``(d, d)`` parameter instead made CVXPY's compiled
    program hold about ``d^3`` numbers, 4.6 GB at d = 400). One per solve: its variables
    hold the last answer, so it is not shared between threads."""

    def __init__(
        self,
        decl: Declaration,
        model: PenalizedModel,
        w_domain: LocalizedDomain | None,
    ) -> None:
        d = decl.d
        self.d = d
        v = cp.Variable(d)
        self.v = v
        constraints = [substitute(c, decl.variable, v) for c in decl.domain.constraints]
        if w_domain is not None:
            center = np.asarray(w_domain.ball_center, float)
            constraints.append(cp.norm(v - center, 2) <= float(w_domain.ball_radius))
        pieces = []
        #: per multiplied penalty: its index, weight, and each argument's link and shape
        self.links: list[tuple[int, float, list[tuple[cp.Constraint | None, tuple[int, ...]]]]] = []
        self.values: list[tuple[float, cp.Expression]] = []  # each penalty on w (its value)
        for index in model.penalty:
            term = decl.terms[index]
            self.values.append((float(term.weight), term.expr))
            if term.kind in MULTIPLIED:
                args = [substitute(a, decl.variable, v) for a in term.args]
                # a copy of each argument with the variable (a constant piece has none: its
                # multiplier is what the others leave, as in the conic program's certificate)
                zs = [cp.Variable(a.shape) if a.variables() else a for a in args]
                links = [z == a if a.variables() else None for z, a in zip(zs, args)]
                constraints.extend(link for link in links if link is not None)
                if term.kind == "pieces":  # the elementwise maximum of its pieces
                    inner = cp.maximum(*zs) if len(zs) > 1 else zs[0]
                else:
                    assert term.atom is not None  # (penalized_model's condition)
                    inner = term.atom.copy([zs[0]])
                piece = cp.sum(inner) if term.summed else inner
                shapes = [a.shape for a in args]
                self.links.append((index, float(term.weight), list(zip(links, shapes))))
            else:
                piece = substitute(term.expr, decl.variable, v)
            pieces.append(float(term.weight) * piece)
        self.pieces = pieces
        self.constraints = constraints
        self.status = ""
        self._variable_id = decl.variable.id

    def penalty_value(self, w: np.ndarray) -> float:
        """The penalties' sum at ``w`` (the user's expressions, dpcvx's evaluator)."""
        leaves = {self._variable_id: np.asarray(w, float)[None, :]}
        total = 0.0
        for weight, expr in self.values:
            total += weight * float(np.sum(evaluate(expr, leaves, 1)))
        return total

    def solve(self, H: np.ndarray, lin: np.ndarray, lam: float) -> tuple[np.ndarray, dict]:
        """The step program's answer for the quadratic ``(1/2) v^T H v + lin^T v + (lam/2)
        ||v||^2`` and each multiplied penalty's multipliers (index: per argument, the
        atom's slope at the answer, shaped as the argument)."""
        M = H + lam * np.eye(self.d)
        M = (M + M.T) / 2
        objective = 0.5 * cp.quad_form(self.v, cp.psd_wrap(M)) + lin @ self.v
        for piece in self.pieces:
            objective = objective + piece
        problem = cp.Problem(cp.Minimize(objective), self.constraints)
        with warnings.catch_warnings():  # an inaccurate status: the certificate judges
            warnings.simplefilter("ignore")
            problem.solve(
                solver=cp.CLARABEL,
                tol_gap_abs=1e-12,
                tol_gap_rel=1e-12,
                tol_feas=1e-12,
                tol_ktratio=1e-10,
                max_iter=200,
            )
        self.status = str(problem.status)
        x = self.v.value
        if x is None:
            raise ValueError(f"the step program gave no point ({problem.status})")
        duals = {}
        for index, weight, links in self.links:
            thetas: list[np.ndarray | None] = []
            for link, shape in links:
                y = None if link is None else link.dual_value
                if link is not None and y is None:
                    break
                # the Lagrangian holds y^T (z - E): at the answer weight * atom'(z) = -y
                thetas.append(
                    None if y is None else np.asarray(-np.asarray(y, float) / weight).reshape(shape)
                )
            else:
                duals[index] = thetas
        return np.asarray(x, float).reshape(self.d), duals


#: the most proximal Newton steps
PENALIZED_STEPS = 30


def penalized_newton(
    smooth: SmoothModel,
    step: PenaltyStep,
    lam: float,
    w0: np.ndarray,
    start: np.ndarray,
    *,
    judge,
) -> tuple[np.ndarray, dict, int]:
    """Proximal Newton's method on ``smooth + penalties + (lam / 2) ||w - w0||^2`` over the
    step program's domain from ``start``: each step solves :class:`PenaltyStep` with the smooth
    part's second-order model at the current point, then backtracks along it until the
    objective decreases by a quarter of the model's prediction. ``judge(x, duals)`` is called
    after each full step and returns True to stop. Returns the last point, its multipliers
    and the steps taken."""
    w0 = np.asarray(w0, float)

    def objective(v: np.ndarray) -> float:
        value, _ = smooth.value_grad(v)
        diff = v - w0
        return value + step.penalty_value(v) + lam / 2 * float(diff @ diff)

    x = np.asarray(start, float)
    f = objective(x)
    duals: dict = {}
    steps = 0
    for steps in range(1, PENALIZED_STEPS + 1):  # noqa: B007 - the count is returned
        value, grad = smooth.value_grad(x)
        H = smooth.hessian(x)
        trial, duals = step.solve(H, grad - H @ x - lam * w0, lam)
        if not np.all(np.isfinite(trial)):
            break
        predicted, tiny = predicted_decrease(
            f, value, grad, H, x, trial, step.penalty_value(trial), lam, w0
        )
        if predicted < -tiny:
            break  # the program's answer is worse than x: x stays (the caller judges it)
        found = backtracked(objective, x, trial, f, predicted, tiny)
        if found is None:
            return x, duals, steps
        x, f, t = found
        if t == 1.0 and judge(x, duals):
            break
        if predicted <= tiny:
            break
    return x, duals, steps
