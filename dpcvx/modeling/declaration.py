"""A validated, immutable declaration of a per-example ERM problem.

:class:`Declaration` checks everything the user wrote before any solve: the loss is a scalar,
DCP in the variable and DPP in the data (after dpcvx's lifting of data-only subtrees), uses only
that variable and only parameters that have data (or a value and no data: a public constant);
every data array is finite, has the same number of examples and the parameter's shape; the domain
is compact (see :class:`dpcvx.modeling.domains.Domain`). Each failure raises a typed error naming
the parameter.
"""

from __future__ import annotations

import dataclasses
import re
import weakref
from collections.abc import Callable, Mapping
from types import MappingProxyType

import cvxpy as cp
import numpy as np
from numpy.typing import ArrayLike

from dpcvx.errors import DataError, ModelingError
from dpcvx.modeling._expressions import DerivedParameter, Unsupported, affine_jet, evaluate, lift
from dpcvx.modeling._structure import Term, decompose
from dpcvx.modeling.domains import Domain

__all__ = ["Declaration", "once_per_declaration", "shared_terms"]


def _name(p: cp.Parameter) -> str:
    return p.name()


def _offending_term(expr: cp.Expression) -> cp.Expression:
    """The smallest subexpression that is not DCP/DPP, for error messages."""
    for a in expr.args:
        if not a.is_dcp(dpp=True):
            return _offending_term(a)
    return expr


def _quad_form_of_data(expr: cp.Expression, params: frozenset[int]) -> cp.Expression | None:
    """The first ``cp.quad_form(E, P)`` in ``expr`` whose ``E`` or ``P`` reads the per-example
    parameters ``params``, or None."""
    from cvxpy.atoms.quad_form import QuadForm

    if isinstance(expr, QuadForm) and any(p.id in params for p in expr.parameters()):
        return expr
    for a in expr.args:
        found = _quad_form_of_data(a, params)
        if found is not None:
            return found
    return None


def _freeze(expr: cp.Expression, constants: dict[int, cp.Parameter]) -> cp.Expression:
    """``expr`` with each parameter of ``constants`` replaced by a constant holding a copy of
    its current value (later changes to the parameter cannot reach the declared problem)."""
    if isinstance(expr, cp.Parameter) and expr.id in constants:
        return cp.Constant(np.array(expr.value, dtype=float, copy=True))
    if not expr.args:
        return expr
    return expr.copy([_freeze(a, constants) for a in expr.args])


#: a declaration with ``n d`` at most this keeps the affine jets of its loss's arguments
#: (:meth:`Declaration.jet`): a block of paper 000's LDOP asks for the same jets up to six
#: times (its model, its examples' Lipschitz bounds, its certificate), and the blocks that run
#: together have at most 2048 examples in at most 128 dimensions (:mod:`dpcvx._batching`); a
#: larger declaration computes them again rather than hold arrays of its data's size (2 MiB
#: here) for as long as it lives
JET_ENTRIES = 1 << 18

_JETS: weakref.WeakKeyDictionary[Declaration, dict[int, tuple]] = weakref.WeakKeyDictionary()
#: the parts of a declaration's loss (:meth:`Declaration.with_terms`), once per declaration
_PARTS: weakref.WeakKeyDictionary[Declaration, dict] = weakref.WeakKeyDictionary()


def once_per_declaration(store: weakref.WeakKeyDictionary, decl: Declaration, compute: Callable):
    """``compute(decl)``, computed once per declaration: kept in ``store`` (weakly keyed by
    the declaration) and returned from there afterwards."""
    try:
        return store[decl]
    except (KeyError, TypeError):
        pass
    out = compute(decl)
    try:
        store[decl] = out
    except TypeError:  # pragma: no cover - declarations are weakly referenceable
        pass
    return out


def shared_terms(terms: tuple[Term, ...]) -> frozenset[int]:
    """The indices of the terms the same for every example, which the solvers' models hold
    once instead of once per example: the non-affine terms that read no data (``0.01 *
    cp.norm1(w)``, ``0.01 * cp.sum_squares(w)`` written into the loss), where another
    non-affine term reads data. A loss whose only curved or piecewise term reads no data
    (``cp.abs(w[0]) - y * w[0]``) keeps it per example: with its affine terms it is then each
    example's one term, the form the Lipschitz extension's fast paths write."""
    free = frozenset(
        i
        for i, term in enumerate(terms)
        # a generic term has no arguments apart: its whole expression is asked
        if term.kind not in ("affine", "generic") and not term.reads_data
    )
    reads = any(t.kind != "affine" and i not in free for i, t in enumerate(terms))
    return free if reads else frozenset()


class _NoJet:
    """A cached :class:`~dpcvx.modeling._expressions.Unsupported`: its arguments only."""

    __slots__ = ("args",)

    def __init__(self, args: tuple) -> None:
        self.args = args


class Declaration:
    """The validated problem ``min_{w in W} (1/n) sum_i loss(w; z_i) [+ regularization]``.

    Parameters
    ----------
    loss : cvxpy.Expression
        One example's loss: scalar, DCP (convex) in ``variable``, DPP in the per-example
        parameters.
    variable : cvxpy.Variable
        The parameter vector, shape ``(d,)``.
    data : mapping from cvxpy.Parameter to array-like
        Each per-example parameter's values; the first axis indexes examples. A parameter of
        the loss that has a value (``cp.Parameter(value=0.3)``) and no entry here is a public
        constant: its value is copied at declaration (it must not depend on the data).
    domain : list of cvxpy.Constraint
        A compact, data-independent set of constraints on ``variable``.
    """

    def __init__(
        self,
        loss: cp.Expression,
        variable: cp.Variable,
        data: Mapping[cp.Parameter, object],
        domain: list[cp.Constraint],
    ) -> None:
        if not isinstance(loss, cp.Expression):
            raise ModelingError(
                f"The `loss` must be a cvxpy Expression. Got {type(loss).__name__}."
            )
        if not isinstance(variable, cp.Variable) or len(variable.shape) != 1:
            raise ModelingError(
                "The `variable` must be a cvxpy.Variable of shape (d,). "
                f"Got {variable!r} with shape {getattr(variable, 'shape', None)}."
            )
        if loss.size != 1:
            raise ModelingError(
                f"The `loss` must be one example's scalar loss. Got shape {loss.shape}; wrap it "
                "in cp.sum(...) if it is a sum over outputs."
            )
        variables = loss.variables()
        others = [v for v in variables if v.id != variable.id]
        if others:
            raise ModelingError(
                f"The `loss` uses the variable `{others[0]}`, which is not the problem's variable "
                f"`{variable}`. The loss may depend only on `variable` and data parameters."
            )
        if not variables:
            raise ModelingError(f"The `loss` does not depend on the variable `{variable}`.")
        if not isinstance(data, Mapping) or not data:
            raise DataError(
                "The `data` must be a non-empty dict mapping each per-example cp.Parameter of "
                f"the loss to an array. Got {type(data).__name__}."
            )
        used = {p.id: p for p in loss.parameters()}
        arrays: dict[int, np.ndarray] = {}
        n = None
        for key, value in data.items():
            if not isinstance(key, cp.Parameter):
                raise DataError(
                    f"The keys of `data` must be cp.Parameter objects. Got {type(key).__name__}: "
                    f"{key!r}."
                )
            if key.id not in used:
                raise DataError(
                    f"`data` binds the parameter `{_name(key)}`, which the loss does not use. "
                    "Remove it from `data` or use it in the loss."
                )
            try:
                arr = np.asarray(value, dtype=float)
            except (TypeError, ValueError) as exc:
                raise DataError(
                    f"The data for parameter `{_name(key)}` must be a numeric array. Got "
                    f"{type(value).__name__}."
                ) from exc
            expected = key.shape
            if arr.ndim != len(expected) + 1 or arr.shape[1:] != expected:
                raise DataError(
                    f"The data for parameter `{_name(key)}` must have shape (n, *{expected}) "
                    f"= (n{''.join(', ' + str(s) for s in expected)}): one row per example. Got "
                    f"shape {arr.shape}."
                )
            if not np.all(np.isfinite(arr)):
                bad = int(np.argmax(~np.isfinite(arr).reshape(arr.shape[0], -1).all(axis=1)))
                raise DataError(
                    f"The data for parameter `{_name(key)}` contains NaN or inf (first at "
                    f"example {bad}). Remove or impute those examples before binding the data."
                )
            if key.is_nonneg() and np.any(arr < 0):
                raise DataError(
                    f"Parameter `{_name(key)}` is declared nonneg but its data has "
                    "negative entries."
                )
            if key.is_nonpos() and np.any(arr > 0):
                raise DataError(
                    f"Parameter `{_name(key)}` is declared nonpos but its data has "
                    "positive entries."
                )
            if n is None:
                n = arr.shape[0]
            elif arr.shape[0] != n:
                raise DataError(
                    "Every data array must have the same number of examples (first axis). "
                    f"Parameter `{_name(key)}` has {arr.shape[0]}, an earlier one has {n}."
                )
            frozen = np.array(arr, dtype=float, copy=True, order="C")
            frozen.setflags(write=False)  # later changes to the caller's array cannot leak in
            arrays[key.id] = frozen
        missing = [p for pid, p in used.items() if pid not in arrays]
        unset = [p for p in missing if p.value is None]
        if unset:
            raise DataError(
                f"The loss uses the parameter `{_name(unset[0])}` but `data` has no array for "
                "it and it has no value. Add it to `data` (one value per example), or give it a "
                "value (`param.value = ...`) to use it as a public constant."
            )
        if missing:
            # a parameter with a value and no data is a public constant, frozen now
            loss = _freeze(loss, {p.id: p for p in missing})
            for p in missing:
                if not np.all(np.isfinite(np.asarray(p.value, dtype=float))):
                    raise DataError(
                        f"The parameter `{_name(p)}` (a public constant: it has a value and no "
                        "data) must have a finite value. Got "
                        f"{np.asarray(p.value).tolist()!r}."
                    )
            used = {pid: p for pid, p in used.items() if pid in arrays}
        if n is None or n < 1:
            raise DataError("The data must contain at least one example.")
        if loss.is_dcp() and not loss.is_convex():
            raise ModelingError(
                f"The `loss` must be convex in the variable, but `{loss}` is "
                f"{'concave' if loss.is_concave() else 'not convex'} by the DCP rules. dpcvx "
                "minimizes convex losses only."
            )
        if not loss.is_dcp():
            raise ModelingError(
                f"The `loss` is not DCP (convex) in the variable: the term "
                f"`{_offending_term_dcp(loss)}` breaks the DCP rules. Only convex losses are "
                "supported."
            )
        lifted, derived = lift(loss, frozenset(arrays))
        if not (lifted.is_dcp(dpp=True) and lifted.is_convex()):
            culprit = str(_offending_term(lifted))
            for dp in derived:  # show the user's own data expressions, not internal names
                # the whole name only (a parameter named `s` is no part of `logistic`)
                # (a function as the replacement: the expression is no pattern of escapes)
                shown = f"({dp.expression})"
                pattern = re.compile(rf"(?<![\w.]){re.escape(dp.parameter.name())}(?![\w])")
                culprit = pattern.sub(_constant(shown), culprit)
            raise ModelingError(
                "The `loss` is not DPP in the data: the term "
                f"`{culprit}` multiplies data with an expression that also depends on data and the "
                "variable in a way dpcvx cannot separate. A nonnegative per-example weight "
                "`s * loss` is accepted when the loss is built from maximum/abs/pos/norms and "
                "squares of affine expressions (not logistic, huber or exp). Write data only in "
                "affine positions (e.g. `cp.pos(1 - (y * x) @ w)`)."
            )
        quad = _quad_form_of_data(loss, frozenset(arrays))
        if quad is not None:
            # CVXPY cannot write such a form as a parametrized program (every solve stopped
            # in the template's compile with "unspecified parameters"): refused here, before
            # any solve or release
            raise ModelingError(
                f"The loss has a quadratic form of data, `cp.quad_form({quad.args[0]}, P)` "
                "(data in its argument or its matrix): CVXPY cannot compile a quadratic form of "
                "a parameter. Write it as a sum of squares of a factor, `cp.sum_squares(L.T @ "
                "E)` with `P = L @ L.T` (e.g. `L = np.linalg.cholesky(P)`)."
            )
        for con in lifted.domain:
            if not _trivially_true(con) and not _variable_attribute(con, variable):
                raise ModelingError(
                    f"The `loss` has an implicit domain (`{con}` must hold, as for inv_pos, "
                    "log, kl_div or non-integer powers). dpcvx needs a loss that is finite on "
                    "the whole domain for every possible example; rewrite it without such "
                    "atoms (e.g. use a Huber or logistic loss, or cp.pos inside)."
                )
        self.loss = loss
        self.variable = variable
        self.d = variable.size
        self.n = int(n)
        self.data = MappingProxyType(arrays)
        self.parameters = tuple(used.values())
        self.domain = Domain(variable, list(domain) if domain is not None else [])
        self.lifted = lifted
        self.derived: tuple[DerivedParameter, ...] = derived
        self.terms: tuple[Term, ...] = decompose(lifted, variable)
        self.shared_terms = shared_terms(self.terms)
        self._derived_values: dict[int, np.ndarray] | None = None
        self.derived_values()  # data-only expressions are checked now, before any release

    def derived_values(self) -> dict[int, np.ndarray]:
        """Per-example values of every derived parameter, shape ``(n, *shape)`` (cached)."""
        if self._derived_values is None:
            self._derived_values = {
                dp.parameter.id: np.ascontiguousarray(
                    np.broadcast_to(
                        evaluate(dp.expression, self.data, self.n), (self.n,) + dp.parameter.shape
                    )
                )
                for dp in self.derived
            }
            for dp in self.derived:
                vals = self._derived_values[dp.parameter.id]
                bad = not np.all(np.isfinite(vals))
                bad |= dp.parameter.is_nonneg() and bool(np.any(vals < 0))
                bad |= dp.parameter.is_nonpos() and bool(np.any(vals > 0))
                for con in dp.expression.domain:
                    if len(con.args) == 2:
                        gap = evaluate(con.args[0] - con.args[1], self.data, self.n)
                        bad |= bool(np.any(gap > 0))
                if bad:
                    self._derived_values = None
                    raise DataError(
                        f"The data expression `{dp.expression}` is undefined or outside its "
                        "sign on some example (NaN, inf, a division by zero, or an atom such "
                        "as inv_pos outside its domain). Fix the data or the expression."
                    )
        return self._derived_values

    def subset(self, indices: ArrayLike) -> Declaration:
        """The same declaration on the examples ``indices`` (a block of paper 000's
        Algorithm 1): loss, terms and domain are shared, the data and derived values sliced."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size == 0 or idx.min() < 0 or idx.max() >= self.n:
            raise DataError(f"A block needs indices in [0, {self.n}). Got {idx.size} indices.")
        return self._on_rows(int(idx.size), lambda arr: np.ascontiguousarray(arr[idx]))

    def jet(self, expr: cp.Expression) -> tuple[np.ndarray, np.ndarray]:
        """``affine_jet(expr, variable, derived values, n)`` for an expression of this
        declaration's loss (see :func:`dpcvx.modeling._expressions.affine_jet`; read-only
        arrays), computed once for a declaration with ``n d`` at most :data:`JET_ENTRIES`.

        Raises
        ------
        Unsupported
            As ``affine_jet`` does (every time it is asked)."""
        if self.n * self.d > JET_ENTRIES:
            return affine_jet(expr, self.variable, self.derived_values(), self.n)
        known = _JETS.setdefault(self, {})
        entry = known.get(id(expr))
        if entry is None or entry[0] is not expr:
            try:
                out: object = affine_jet(expr, self.variable, self.derived_values(), self.n)
            except Unsupported as exc:
                # its message only: the exception's traceback holds this frame, and so the
                # declaration, which would then keep its own cache entry alive
                out = _NoJet(exc.args)
            entry = known[id(expr)] = (expr, out)
        if isinstance(entry[1], _NoJet):
            raise Unsupported(*entry[1].args)
        return entry[1]

    def rows(self, start: int, stop: int) -> Declaration:
        """The same declaration on the contiguous examples ``start:stop``, its data and derived
        values read-only views of this one's (no copy): a chunk of a sum over examples."""
        if not 0 <= start < stop <= self.n:
            raise DataError(f"A chunk needs 0 <= start < stop <= {self.n}. Got {start}:{stop}.")
        return self._on_rows(int(stop - start), lambda arr: arr[start:stop])

    def _on_rows(self, n: int, take: Callable[[np.ndarray], np.ndarray]) -> Declaration:
        """The same declaration on ``n`` of its examples: loss, terms and domain shared, every
        data and derived array replaced by ``take(array)``, read-only."""
        out = object.__new__(Declaration)
        out.__dict__.update(self.__dict__)

        def part(arr: np.ndarray) -> np.ndarray:
            taken = take(arr)
            taken.setflags(write=False)
            return taken

        out.data = MappingProxyType({k: part(v) for k, v in self.data.items()})
        out.n = n
        out._derived_values = {k: part(v) for k, v in self.derived_values().items()}
        return out

    def with_data(self, updates: Mapping[int, object]) -> Declaration:
        """The same declaration with the arrays of some parameters (by id) replaced: loss,
        terms and domain are shared, so a template compiled for this declaration serves the
        new one too. Used for data dpcvx derives itself (the adversary's points of a saddle
        problem, paper 002 Sec 5.2); the arrays must have this declaration's shapes."""
        out = object.__new__(Declaration)
        out.__dict__.update(self.__dict__)
        data = dict(self.data)
        for pid, value in updates.items():
            if pid not in data:
                raise DataError("Internal: `with_data` may replace bound parameters only.")
            arr = np.array(value, dtype=float, copy=True, order="C")
            if arr.shape != data[pid].shape or not np.all(np.isfinite(arr)):
                raise DataError(
                    f"Internal: replacement data of shape {arr.shape} (finite: "
                    f"{bool(np.all(np.isfinite(arr)))}) for an array of shape "
                    f"{data[pid].shape}."
                )
            arr.setflags(write=False)
            data[pid] = arr
        out.data = MappingProxyType(data)
        out._derived_values = None
        out.derived_values()
        return out

    def with_terms(
        self, keep: frozenset[int], scale: float = 1.0, scaled: frozenset[int] = frozenset()
    ) -> Declaration:
        """The same declaration with only the terms ``keep`` of its loss (by index), those of
        ``scaled`` weighted ``scale`` times: its data, derived values and domain shared, its
        loss the kept terms' sum as :attr:`terms` hold them (data-only subtrees as their
        derived parameters, whose values join :attr:`data`). The folded Lipschitz extension's
        parts: the terms that read data, whose extension it takes, and the penalty it keeps
        exact (:func:`dpcvx.certification.solve.certified_solve`)."""
        keep = frozenset(int(i) for i in keep)
        scaled = frozenset(int(i) for i in scaled) if scale != 1.0 else frozenset()
        key = (keep, float(scale), scaled)
        store = _PARTS.setdefault(self, {})
        if key in store:
            return store[key]
        if not keep or not keep <= frozenset(range(len(self.terms))):
            raise ModelingError("Internal: a part of the loss needs some of its terms.")
        terms = tuple(
            dataclasses.replace(term, weight=float(term.weight) * float(scale))
            if index in scaled
            else term
            for index, term in enumerate(self.terms)
            if index in keep
        )
        expr = terms[0].weight * terms[0].expr
        for term in terms[1:]:
            expr = expr + term.weight * term.expr
        out = object.__new__(Declaration)
        out.__dict__.update(self.__dict__)
        out.terms = terms
        out.shared_terms = shared_terms(terms)
        out.loss = out.lifted = expr
        data = dict(self.data)
        data.update(self.derived_values())
        out.data = MappingProxyType(data)
        store[key] = out
        return out

    def loss_values(self, w: np.ndarray) -> np.ndarray:
        """``loss(w; z_i)`` for every example, evaluated from the user's own expression."""
        leaves = dict(self.data)
        leaves[self.variable.id] = np.asarray(w, float).reshape(1, self.d)
        return np.asarray(evaluate(self.loss, leaves, self.n), float).reshape(self.n)


def _variable_attribute(con: cp.Constraint, variable: cp.Variable) -> bool:
    """Whether ``con`` is a bound of the variable's own attributes (``bounds``, ``nonneg``):
    part of the domain (:class:`~dpcvx.modeling.domains.Domain` reads it), not of the loss."""
    from cvxpy.atoms.affine.index import index, special_index

    def own(a) -> bool:  # the variable itself, or an indexed part of it
        if isinstance(a, cp.Variable):
            return a.id == variable.id
        return isinstance(a, (index, special_index)) and own(a.args[0])

    return any(own(a) for a in con.args) and all(
        own(a) or not (a.variables() or a.parameters()) for a in con.args
    )


def _trivially_true(con: cp.Constraint) -> bool:
    """Whether an implicit-domain constraint ``lhs <= rhs`` holds by sign alone."""
    if len(con.args) != 2:
        return False
    lhs, rhs = con.args
    if type(con).__name__ == "Inequality":
        return bool((lhs.is_nonpos() and rhs.is_nonneg()) or (lhs - rhs).is_nonpos())
    return False


def _offending_term_dcp(expr: cp.Expression) -> cp.Expression:
    for a in expr.args:
        if not a.is_dcp():
            return _offending_term_dcp(a)
    return expr


def _constant(text: str) -> Callable[[re.Match[str]], str]:
    """A ``re.sub`` replacement that is ``text`` as it is (no escapes, no group references)."""

    def replace(_match: re.Match[str]) -> str:
        return text

    return replace
