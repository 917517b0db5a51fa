"""Losses with both smooth and piecewise-linear terms (``cp.abs(r) + cp.square(r)``, a hinge
plus ``0.1 * cp.square(x @ w)``, the logistic loss plus ``0.1 * cp.abs(x @ w)``): proximal
Newton's method, each step the arrowhead interior-point method on the piecewise-linear terms
with the smooth terms' second-order model at the current point as its quadratic part.

The smooth terms (:func:`~dpcvx.modeling.smooth.smooth_terms`) and the piecewise-linear ones
with the affine terms (:func:`~dpcvx.certification.arrowhead.piecewise_terms`) are split by
their kinds, the loss's form (each part's model refuses non-finite Jacobians or offsets, as
the other rungs' models do). The rung solves the plain objective only, never a Lipschitz
extension (:func:`~dpcvx.certification.solve.mixed_rung_applies`). At a point ``x`` the
smooth mean is replaced by ``s(x) + g^T (w - x) + (w - x)^T H (w - x) / 2`` (its gradient and
Hessian); the method solves that program exactly as it solves a piecewise-linear loss with
the domain's regularization (its ``quad``), and a backtracking line search along the step on
the whole objective keeps every step a descent. Where the smooth terms are quadratic (a
squared loss, ``cp.square(x @ w)``) the model is exact and one step solves the problem.

Every point goes to dpcvx's certificate, with the method's multipliers for the
piecewise-linear terms and the smooth terms' derivatives at the point: as on every path, the
method only proposes points.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dpcvx.certification.arrowhead import PiecewiseModel, arrowhead_ipm, piecewise_terms
from dpcvx.modeling.declaration import Declaration, once_per_declaration
from dpcvx.modeling.smooth import SmoothModel, smooth_terms

__all__ = [
    "MixedModel",
    "backtracked",
    "mixed_model",
    "pieces_values",
    "predicted_decrease",
    "proximal_newton",
]

#: the declaration's term kinds that go to the piecewise-linear part (the others are smooth)
PIECEWISE_KINDS = ("affine", "abs", "pieces")


@dataclass(frozen=True)
class MixedModel:
    """The declaration's piecewise-linear terms with its affine ones (``pieces``) and its
    smooth terms (``smooth``), and which of the declaration's terms each holds (``in_pieces``:
    per term, in the declaration's order)."""

    pieces: PiecewiseModel
    smooth: SmoothModel
    in_pieces: tuple[bool, ...]

    def multipliers(self, mus: list[np.ndarray], w: np.ndarray) -> list:
        """The certificate's multipliers per term of the declaration: the method's for the
        piecewise-linear terms (:meth:`PiecewiseModel.multipliers`), the atom's derivatives at
        ``w`` for the smooth ones."""
        pieces = iter(self.pieces.multipliers(mus))
        smooth = iter(self.smooth.multipliers(w))
        return [next(pieces) if p else next(smooth) for p in self.in_pieces]


_CACHE: weakref.WeakKeyDictionary[Declaration, MixedModel | None] = weakref.WeakKeyDictionary()


def mixed_model(decl: Declaration) -> MixedModel | None:
    """The declaration's :class:`MixedModel` (computed once), or None where it has no smooth
    term or no ``abs`` or ``pieces`` term, or where either part has no model."""
    return once_per_declaration(_CACHE, decl, _build)


def _build(decl: Declaration) -> MixedModel | None:
    in_pieces = tuple(term.kind in PIECEWISE_KINDS for term in decl.terms)
    if all(in_pieces) or not any(
        term.kind in ("abs", "pieces") for term, p in zip(decl.terms, in_pieces) if p
    ):
        return None
    pieces = piecewise_terms(decl, frozenset(i for i, p in enumerate(in_pieces) if p))
    if pieces is None:
        return None
    smooth = smooth_terms(decl, frozenset(i for i, p in enumerate(in_pieces) if not p))
    if smooth is None:
        return None
    return MixedModel(pieces, smooth, in_pieces)


def pieces_values(model: PiecewiseModel, w: np.ndarray) -> float:
    """The piecewise-linear part's mean at ``w`` (its affine terms' offsets left out: a
    constant), for the line search."""
    total = float(model.linear @ w)
    with np.errstate(over="ignore", invalid="ignore"):
        for term in model.terms:
            V = term.apply(w)
            V += np.stack(term.b, axis=1)
            total += term.c * float(np.sum(np.max(V, axis=1)))
    return total


def predicted_decrease(
    f: float,
    value: float,
    grad: np.ndarray,
    H: np.ndarray,
    x: np.ndarray,
    trial: np.ndarray,
    rest: float,
    lam: float,
    w0: np.ndarray,
) -> tuple[float, float]:
    """``(predicted, tiny)``: the objective ``f`` at ``x`` less the proximal Newton model at
    ``trial`` (the smooth part's second-order model, ``value`` and ``grad`` at ``x`` with
    Hessian ``H``, plus ``rest``, the other part's value at ``trial``, plus the
    regularization), and the rounding below which a decrease is not resolved."""
    direction = trial - x
    model_trial = (
        value
        + float(grad @ direction)
        + 0.5 * float(direction @ (H @ direction))
        + rest
        + lam / 2 * float((trial - w0) @ (trial - w0))
    )
    return f - model_trial, 1e-12 * (1.0 + abs(f))


def backtracked(
    objective: Callable[[np.ndarray], float],
    x: np.ndarray,
    trial: np.ndarray,
    f: float,
    predicted: float,
    tiny: float,
) -> tuple[np.ndarray, float, float] | None:
    """``(point, its objective, step)`` along ``x -> trial`` from the full step, halved until
    the objective falls by a quarter of the model's ``predicted`` decrease times the step
    (near the answer, a prediction within ``tiny`` of rounding takes the full step, and the
    certificate judges it); None below a step of 1e-10."""
    direction = trial - x
    t = 1.0
    while True:
        point = x + t * direction if t < 1.0 else trial
        f_new = objective(point)
        if not np.isfinite(f_new):
            f_new = np.inf
        if predicted <= tiny or f_new <= f - 0.25 * t * predicted:
            return point, f_new, t
        t /= 2
        if t < 1e-10:
            return None


#: the most proximal Newton steps (each one solve of the arrowhead method)
MIXED_STEPS = 30


def proximal_newton(
    pieces: PiecewiseModel,
    smooth: SmoothModel,
    lam: float,
    w0: np.ndarray,
    start: np.ndarray,
    *,
    tol: float,
    bounds,
    judge,
) -> tuple[np.ndarray, list[np.ndarray], int, int]:
    """Proximal Newton's method on ``pieces + smooth + (lam / 2) ||w - w0||^2`` over the
    domain of ``bounds`` from ``start`` (feasible): each step solves the pieces with the
    smooth part's second-order model at the current point
    (:func:`~dpcvx.certification.arrowhead.arrowhead_ipm`, to ``tol``), then backtracks
    along it until the objective decreases by a quarter of the model's prediction.
    ``pieces`` and ``smooth`` are the models the method runs on (a :class:`MixedModel`'s
    parts, or those moved next to the domain:
    :func:`~dpcvx.certification.arrowhead.recentered_pieces`,
    :func:`~dpcvx.modeling.smooth.recentered`). ``judge(x, mus)`` is called after each full
    step and returns True to stop (the certificate met its target). Returns the last point,
    the method's multipliers there, the steps and the method's iterations in all."""
    w0 = np.asarray(w0, float)

    def objective(v: np.ndarray) -> float:
        value, _ = smooth.value_grad(v)
        diff = v - w0
        return value + pieces_values(pieces, v) + lam / 2 * float(diff @ diff)

    x = np.asarray(start, float)
    f = objective(x)
    mus: list[np.ndarray] = []
    iterations = 0
    steps = 0
    for steps in range(1, MIXED_STEPS + 1):  # noqa: B007 - the count is returned
        value, grad = smooth.value_grad(x)
        H = smooth.hessian(x)
        quad = (H, grad - H @ x)
        trial, mus, more = arrowhead_ipm(pieces, lam, w0, x, tol=tol, bounds=bounds, quad=quad)
        iterations += int(more)
        if not np.all(np.isfinite(trial)):
            break
        predicted, tiny = predicted_decrease(
            f, value, grad, H, x, trial, pieces_values(pieces, trial), lam, w0
        )
        if predicted < -tiny:
            break  # the model's solve came back worse than x: x stays (the caller judges it)
        found = backtracked(objective, x, trial, f, predicted, tiny)
        if found is None:
            return x, mus, steps, iterations
        # after a shortened step the multipliers are the trial point's: valid for the
        # certificate at x, looser (the next full step's are x's own)
        x, f, t = found
        if t == 1.0 and judge(x, mus):
            break
        if predicted <= tiny:
            break  # the model sees no decrease left: further steps would repeat this one
    return x, mus, steps, iterations
