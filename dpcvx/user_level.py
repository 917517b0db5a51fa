"""User-level data (paper 004's data model, spec C.0): each user contributes ``m`` items.

A :class:`UserLevelProblem` declares one *item's* loss and binds item data with a user id per
item. Each user contributes exactly ``items_per_user = m`` items (public); a user's loss is the
mean of its ``m`` item losses,

    ``F_u(w) = (1/m) sum_{j <= m} f(w, z_{u,j})``,

and the problem is the ERM over users, ``(1/n) sum_u F_u(w)`` with ``n`` users (public). Neighbors
replace one user's whole set of ``m`` items (:class:`~dpcvx.ReplaceOneUser`), so every
example-level mechanism of dpcvx run on the users' losses is private at user level unchanged:
its sensitivity analysis holds example by example, and the examples are the users (output
perturbation is the paper's naive baseline; the Lipschitz extension, LDOP's partition and
clipped gradient descent all act on users). Items are never reassigned across users.

The user loss is built as a CVXPY expression: the item loss with its data parameters copied
``m`` times, bound to each user's ``j``-th item, averaged. dpcvx analyses and certifies it like
any declared loss (its Lipschitz and curvature bounds are those of the mean).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import cvxpy as cp
import numpy as np

from dpcvx.errors import DataError, InvalidParameterError
from dpcvx.neighbors import NeighborRelation, ReplaceOneUser
from dpcvx.problem import Problem

__all__ = ["UserLevelProblem"]

#: the largest ``items_per_user`` (the user loss holds ``m`` copies of the item loss)
MAX_ITEMS_PER_USER = 1000


def _renamed(expr: Any, mapping: Mapping[int, cp.Parameter]) -> Any:
    """``expr`` with every parameter whose id is in ``mapping`` replaced."""
    if isinstance(expr, cp.Parameter) and expr.id in mapping:
        return mapping[expr.id]
    if not expr.args:
        return expr
    return expr.copy([_renamed(a, mapping) for a in expr.args])


def _groups(users: Any, n_items: int, m: int, keep: str | None) -> tuple[np.ndarray, np.ndarray]:
    """``(order, ids)``: ``order[u, j]`` is the index of user ``u``'s ``j``-th item (users in
    sorted id order, items in their given order), ``ids`` the users' ids."""
    ids = np.asarray(users)
    if ids.ndim != 1 or ids.shape[0] != n_items:
        raise DataError(
            f"`users` must give one user id per item: a vector of length {n_items}. Got shape "
            f"{ids.shape}."
        )
    unique, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
    if keep is None and np.any(counts != m):
        raise DataError(
            f"Every user must contribute exactly items_per_user = {m} items (public). The "
            f"counts range from {int(counts.min())} to {int(counts.max())}. Pass "
            "keep='first' to keep each user's first m items (a rule that does not look at the "
            "data values); users with fewer than m items must be removed or padded by you."
        )
    if keep is not None and np.any(counts < m):
        raise DataError(
            f"With keep='first', every user needs at least items_per_user = {m} items; "
            f"{int(np.sum(counts < m))} users have fewer."
        )
    order = np.empty((unique.size, m), dtype=int)
    filled = np.zeros(unique.size, dtype=int)
    for i, u in enumerate(inverse):  # items in their given order
        if filled[u] < m:
            order[u, filled[u]] = i
            filled[u] += 1
    return order, unique


class UserLevelProblem(Problem):
    """A convex ERM over users, each the mean of ``items_per_user`` item losses (paper 004).

    Parameters
    ----------
    loss : cvxpy.Expression
        One *item's* loss, as for :class:`~dpcvx.Problem`.
    variable : cvxpy.Variable
        ``w``.
    data : dict
        Maps each per-item parameter to an array whose first axis indexes the items.
    domain : list of cvxpy.Constraint
        The public, compact domain.
    users : array-like
        The user id of every item (any sortable ids).
    items_per_user : int
        ``m``: the number of items every user contributes (public).
    keep : {None, "first"}
        ``None`` (default): every user must have exactly ``m`` items (a
        :class:`~dpcvx.DataError` otherwise, before anything is spent). ``"first"``: keep each
        user's first ``m`` items in the given order.

    Notes
    -----
    Releases are private under :class:`~dpcvx.ReplaceOneUser` neighbors (``group_size = m``):
    the result's ``guarantee`` and its ledger say so, and an accountant must hold a budget
    under that relation (``dpcvx.Accountant(epsilon, neighbors=dpcvx.ReplaceOneUser(m))``).
    """

    def __init__(
        self,
        loss: cp.Expression,
        variable: cp.Variable,
        data: Mapping[cp.Parameter, Any],
        domain: list[cp.Constraint],
        *,
        users: Any,
        items_per_user: int,
        keep: str | None = None,
    ) -> None:
        m = items_per_user
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or not 1 <= m:
            raise InvalidParameterError(
                f"`items_per_user` must be a positive integer (public). Got {m!r}."
            )
        if m > MAX_ITEMS_PER_USER:
            raise InvalidParameterError(
                f"`items_per_user` = {m} exceeds {MAX_ITEMS_PER_USER}: the user loss holds one "
                "copy of the item loss per item."
            )
        if keep not in (None, "first"):
            raise InvalidParameterError(f"`keep` must be None or 'first'. Got {keep!r}.")
        if not isinstance(data, Mapping) or not data:
            raise InvalidParameterError("`data` must map the loss's parameters to arrays.")
        arrays = {p: np.asarray(v) for p, v in data.items()}
        n_items = {a.shape[0] if a.ndim else -1 for a in arrays.values()}
        if len(n_items) != 1 or -1 in n_items:
            raise DataError("Every data array must have one row per item (the same first axis).")
        order, ids = _groups(users, n_items.pop(), int(m), keep)
        copies = [
            {p.id: cp.Parameter(p.shape, name=f"{p.name()}_{j}") for p in arrays} for j in range(m)
        ]
        user_loss = sum(_renamed(loss, c) for c in copies) / m
        user_data = {
            copy[p.id]: arrays[p][order[:, j]] for j, copy in enumerate(copies) for p in arrays
        }
        super().__init__(user_loss, variable, user_data, domain)
        self._relation = ReplaceOneUser(group_size=int(m))
        self.users = ids
        self.items_per_user = int(m)

    @property
    def neighbors(self) -> NeighborRelation:
        """Replace one user's whole set of items."""
        return self._relation
