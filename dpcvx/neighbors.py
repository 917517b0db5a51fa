"""Neighboring relations as typed values (house style point 5).

A differential-privacy guarantee is a statement about *pairs of neighboring datasets*; which
pairs count is part of the guarantee, so dpcvx carries the relation as a value with the
guarantee, on every ledger event, in every result and in every audit:

- :class:`ReplaceOne`: the datasets have the same public size ``n`` and differ in one example
  (every mechanism of papers 000, 002 and 003);
- :class:`AddRemoveOne`: one dataset is the other with one example added (``n`` differs by
  one, so ``n`` itself is not public);
- :class:`ReplaceOneUser`: the datasets hold the same users, each contributing exactly
  ``group_size`` examples (public), and differ in all the examples of one user (paper 004's
  user-level privacy).

A relation is immutable and hashable; ``str(relation)`` is its stable name.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpcvx.errors import InvalidParameterError

__all__ = [
    "AddRemoveOne",
    "NeighborRelation",
    "ReplaceOne",
    "ReplaceOneUser",
    "REPLACE_ONE",
    "as_relation",
]


@dataclass(frozen=True, slots=True)
class NeighborRelation:
    """The base of dpcvx's neighboring relations (not used directly)."""

    @property
    def name(self) -> str:
        """The relation's stable name (``"replace-one"``, ...)."""
        raise NotImplementedError  # pragma: no cover - abstract

    @property
    def public_size(self) -> bool:
        """Whether neighbors have the same number of examples (so ``n`` is public)."""
        return True

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class ReplaceOne(NeighborRelation):
    """Same public ``n``; the datasets differ in one example."""

    @property
    def name(self) -> str:
        return "replace-one"


@dataclass(frozen=True, slots=True)
class AddRemoveOne(NeighborRelation):
    """One dataset is the other with one example added or removed (``n`` is not public)."""

    @property
    def name(self) -> str:
        return "add-remove-one"

    @property
    def public_size(self) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class ReplaceOneUser(NeighborRelation):
    """Same users, each with exactly ``group_size`` examples (public); the datasets differ in
    every example of one user (user-level privacy, paper 004)."""

    group_size: int = 1

    def __post_init__(self) -> None:
        size = self.group_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise InvalidParameterError(
                f"The `group_size` of `ReplaceOneUser` must be a positive integer. Got {size!r}."
            )

    @property
    def name(self) -> str:
        return f"replace-one-user (m={self.group_size})"


#: the relation of every example-level mechanism in dpcvx
REPLACE_ONE = ReplaceOne()

_BY_NAME = {"replace-one": REPLACE_ONE, "add-remove-one": AddRemoveOne()}


def as_relation(value: object) -> NeighborRelation:
    """``value`` as a :class:`NeighborRelation`: a relation is returned as is; the names
    ``"replace-one"`` and ``"add-remove-one"`` (the strings earlier versions used) are
    accepted. Anything else raises :class:`~dpcvx.InvalidParameterError`."""
    if isinstance(value, NeighborRelation) and type(value) is not NeighborRelation:
        return value
    if isinstance(value, str) and value in _BY_NAME:
        return _BY_NAME[value]
    raise InvalidParameterError(
        "A neighboring relation must be dpcvx.ReplaceOne(), dpcvx.AddRemoveOne() or "
        f"dpcvx.ReplaceOneUser(group_size=m) (or the names {sorted(_BY_NAME)}). Got {value!r}."
    )
