"""Per-example convex-concave losses: the declaration behind :class:`dpcvx.SaddleProblem`.

Paper 002, Section 5.2 (private adversarial training): ``f(w, v; z)`` is convex in the model
``w`` for every perturbation ``v`` in the public set ``S`` and concave in ``v`` for every ``w``
in the public domain ``W`` (Assumptions 1 and 2). The objective is

    G(w) = (1/n) sum_i g_i(w),   g_i(w) = max_{v in S} f(w, v; z_i),

an ERM in ``w`` (each example has its own adversary ``v_i``).

The user writes ``f`` once as a CVXPY expression in two variables. dpcvx never asks CVXPY for
the (generally non-DCP) joint expression: it checks each side with the DCP rules, after
replacing the other variable by a parameter:

- **outer**: ``f(w, V; z)`` with ``v`` a per-example parameter must be convex (DCP) in ``w``;
- **inner**: ``-q(W_hat, v; z)`` with ``w`` a per-example parameter must be convex in ``v``,
  where ``q`` is the sum of the top-level terms of ``f`` that involve ``v``. The other terms
  (``phi(w; z)``, free of ``v``) are constants of the inner problem: ``g_i = phi_i + max_v q_i``.

Both are ordinary :class:`~dpcvx.modeling.declaration.Declaration` objects, so dpcvx's
certificate applies to each unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping

import cvxpy as cp
import numpy as np
from cvxpy.atoms.affine.add_expr import AddExpression
from cvxpy.atoms.affine.binary_operators import MulExpression, multiply
from cvxpy.atoms.affine.unary_operators import NegExpression
from numpy.typing import ArrayLike

from dpcvx.errors import DataError, ModelingError
from dpcvx.modeling._expressions import evaluate, substitute
from dpcvx.modeling.declaration import Declaration
from dpcvx.modeling.domains import Domain

__all__ = ["SaddleDeclaration"]


def _split(loss: cp.Expression, v: cp.Variable) -> tuple[list, list]:
    """The top-level terms of ``loss`` without and with ``v``."""
    terms = list(loss.args) if isinstance(loss, AddExpression) else [loss]
    free = [t for t in terms if all(x.id != v.id for x in t.variables())]
    coupled = [t for t in terms if any(x.id == v.id for x in t.variables())]
    return free, coupled


def _negated(term: cp.Expression) -> cp.Expression:
    """``-term``, unwrapping a negation or a negative constant factor."""
    if isinstance(term, NegExpression):
        return term.args[0]
    if (
        isinstance(term, (MulExpression, multiply))
        and term.args[0].is_constant()
        and not term.args[0].parameters()
        and term.args[0].size == 1
    ):
        return (-term.args[0].value) * term.args[1]
    return -term


def _total(terms: list) -> cp.Expression:
    out = terms[0]
    for t in terms[1:]:
        out = out + t
    return out


class SaddleDeclaration:
    """The validated saddle problem ``min_{w in W} max_{V in S^n} (1/n) sum_i f(w, v_i; z_i)``.

    Parameters
    ----------
    loss : cvxpy.Expression
        One example's loss in ``variable`` and ``perturbation`` (scalar).
    variable, perturbation : cvxpy.Variable
        ``w`` of shape ``(d,)`` and ``v`` of shape ``(p,)``.
    data : mapping from cvxpy.Parameter to array-like
        Per-example data (first axis: examples).
    domain, perturbation_set : list of cvxpy.Constraint
        The public compact convex sets ``W`` (on ``w``) and ``S`` (on ``v``).
    """

    def __init__(
        self,
        loss: cp.Expression,
        variable: cp.Variable,
        perturbation: cp.Variable,
        data: Mapping,
        domain: list[cp.Constraint],
        perturbation_set: list[cp.Constraint],
    ) -> None:
        for name, var in (("variable", variable), ("perturbation", perturbation)):
            if not isinstance(var, cp.Variable) or len(var.shape) != 1:
                raise ModelingError(
                    f"The `{name}` must be a cvxpy.Variable of shape (k,). Got {var!r}."
                )
        if variable.id == perturbation.id:
            raise ModelingError(
                "The `variable` and the `perturbation` must be different cvxpy Variables."
            )
        if not isinstance(loss, cp.Expression) or loss.size != 1:
            raise ModelingError("The `loss` must be one example's scalar cvxpy Expression.")
        ids = {x.id for x in loss.variables()}
        if perturbation.id not in ids:
            raise ModelingError(
                f"The `loss` does not depend on the perturbation `{perturbation}`: without an "
                "adversary this is an ordinary ERM; use dpcvx.Problem."
            )
        extra = ids - {variable.id, perturbation.id}
        if extra:
            raise ModelingError(
                "The `loss` may depend only on `variable`, `perturbation` and data parameters."
            )
        if not perturbation_set:
            raise ModelingError(
                "The `perturbation_set` must constrain the perturbation to a compact convex "
                "set S (e.g. dpcvx.domains.l2_ball(v, rho)): the adversary's budget."
            )
        free, coupled = _split(loss, perturbation)
        self.loss, self.variable, self.perturbation = loss, variable, perturbation
        self.d, self.p = variable.size, perturbation.size
        self.free = _total(free) if free else None
        self.coupled = _total(coupled)
        # the adversary's points enter the outer problem as per-example parameters
        self._cuts: list[cp.Parameter] = [cp.Parameter(perturbation.shape, name="v_adv_0")]
        box = Domain(perturbation, list(perturbation_set))
        #: the adversary's first (public) point: the centre of S, made feasible
        self.start = np.asarray(box.make_feasible(box.center), float)
        if not isinstance(data, Mapping) or not data:
            raise DataError(
                "The `data` must be a non-empty dict mapping each per-example "
                "cp.Parameter of the loss to an array."
            )
        self.data = dict(data)
        outer = self._outer_loss(1)
        try:
            self.outer = Declaration(outer, variable, self._outer_data(outer, [None]), domain)
        except ModelingError as exc:
            raise ModelingError(
                "With the perturbation held fixed, the loss must be convex (DCP, DPP) in the "
                f"variable: {exc}"
            ) from None
        self.n = self.outer.n
        self._models: dict[int, Declaration] = {}
        self.domain = self.outer.domain
        # inner: -q(w_hat, v; z) over S, with w a per-example parameter
        self._w_param = cp.Parameter(variable.shape, name="w_fixed")
        # negate term by term, so that each keeps its own structure for the certificate
        inner = _total([_negated(substitute(t, variable, self._w_param)) for t in coupled])
        try:
            self.inner = Declaration(
                inner,
                perturbation,
                self._inner_data(inner, self.domain.center),
                list(perturbation_set),
            )
        except ModelingError as exc:
            raise ModelingError(
                "With the model held fixed, the terms of the loss that involve the "
                "perturbation must be concave (DCP) in it (paper 002, Assumption 2), and the "
                f"perturbation set must be compact: {exc}"
            ) from None
        self.perturbation_domain = self.inner.domain

    # ------------------------------------------------------------------ builders
    def _cut(self, j: int) -> cp.Parameter:
        while len(self._cuts) <= j:
            self._cuts.append(
                cp.Parameter(self.perturbation.shape, name=f"v_adv_{len(self._cuts)}")
            )
        return self._cuts[j]

    def _outer_loss(self, k: int) -> cp.Expression:
        pieces = [substitute(self.coupled, self.perturbation, self._cut(j)) for j in range(k)]
        model = pieces[0] if k == 1 else cp.maximum(*pieces)
        return model if self.free is None else self.free + model

    def _outer_data(self, expr: cp.Expression, cuts: list) -> dict:
        used = {p.id for p in expr.parameters()}
        out = {key: val for key, val in self.data.items() if key.id in used}
        n = self._n_from(out)
        for j, V in enumerate(cuts):
            out[self._cut(j)] = np.broadcast_to(self.start, (n, self.p)) if V is None else V
        return out

    def _inner_data(self, expr: cp.Expression, w_hat: ArrayLike) -> dict:
        used = {p.id for p in expr.parameters()}
        out = {key: val for key, val in self.data.items() if key.id in used}
        n = self._n_from(self.data)
        out[self._w_param] = np.broadcast_to(np.asarray(w_hat, float), (n, self.d))
        return out

    def _n_from(self, data: Mapping) -> int:
        """The number of examples of the first array (the declarations check the rest)."""
        first = np.asarray(next(iter(data.values())), dtype=float)
        if first.ndim < 1 or first.shape[0] < 1:
            raise DataError("The data must contain at least one example (one row per example).")
        return int(first.shape[0])

    def model(self, cuts: list[np.ndarray]) -> Declaration:
        """The cutting-set model ``min_W (1/n) sum_i phi_i(w) + max_j q_i(w, V_j[i])``: a
        convex ERM below ``G`` everywhere (each ``V_j[i]`` lies in ``S``). The declaration for
        ``k`` cuts is built once; later calls only replace the cuts' arrays, so a template
        compiled for it stays valid."""
        k = len(cuts)
        if k not in self._models:
            if k == 1:
                self._models[1] = self.outer
            else:
                expr = self._outer_loss(k)
                self._models[k] = Declaration(
                    expr, self.variable, self._outer_data(expr, cuts), list(self.domain.constraints)
                )
        return self._models[k].with_data({self._cut(j).id: V for j, V in enumerate(cuts)})

    def inner_at(self, w_hat: np.ndarray) -> Declaration:
        """The inner declaration ``min_{v in S} -q(w_hat, v; z_i)`` (one problem per example,
        all with the same ``w_hat``)."""
        tiled = np.broadcast_to(np.asarray(w_hat, float), (self.n, self.d))
        return self.inner.with_data({self._w_param.id: tiled})

    def free_values(self, w_hat: np.ndarray) -> np.ndarray:
        """``phi(w_hat; z_i)`` for every example (zeros when every term involves ``v``)."""
        if self.free is None:
            return np.zeros(self.n)
        leaves = {pid: arr for pid, arr in self.outer.data.items()}
        leaves[self.variable.id] = np.asarray(w_hat, float).reshape(1, self.d)
        return np.asarray(evaluate(self.free, leaves, self.n), float).reshape(self.n)

    def values(self, w_hat: np.ndarray, V: np.ndarray) -> np.ndarray:
        """``f(w_hat, V[i]; z_i)`` for every example (float64, no certificate)."""
        decl = self.outer.with_data({self._cut(0).id: V})
        return decl.loss_values(w_hat)
