"""Typed privacy-relevant values: a guarantee and a sensitivity (house style point 5)."""

from __future__ import annotations

import copyreg
from dataclasses import dataclass
from types import MappingProxyType

from dpcvx.neighbors import REPLACE_ONE, NeighborRelation, as_relation

__all__ = ["Guarantee", "Sensitivity"]


def _mapping_proxy(items: dict) -> MappingProxyType:
    """Rebuild a read-only mapping (a module-level function, so plain pickle finds it)."""
    return MappingProxyType(items)


def _reduce_mapping_proxy(proxy: MappingProxyType) -> tuple:
    return _mapping_proxy, (dict(proxy),)


# dpcvx's frozen records keep their mappings read-only (MappingProxyType), which pickle cannot
# serialize by itself. Registering a reducer lets plans, declarations and certificates travel
# to an executor's workers (paper 000, Algorithm 1 on a process pool or a Dask cluster); the
# copy is again read-only.
copyreg.pickle(MappingProxyType, _reduce_mapping_proxy)


@dataclass(frozen=True, slots=True, kw_only=True)
class Guarantee:
    """A differential-privacy guarantee ``(epsilon, delta)`` under a neighboring relation.

    ``delta == 0`` is pure epsilon-DP. ``neighbors`` is the neighboring relation
    (:mod:`dpcvx.neighbors`; default replace-one: same n, one record differs); the names
    ``"replace-one"`` and ``"add-remove-one"`` are accepted and converted.
    """

    epsilon: float
    delta: float = 0.0
    neighbors: NeighborRelation = REPLACE_ONE

    def __post_init__(self) -> None:
        object.__setattr__(self, "neighbors", as_relation(self.neighbors))

    @property
    def pure(self) -> bool:
        """Whether this is a pure epsilon-DP guarantee."""
        return self.delta == 0.0

    def __str__(self) -> str:
        if self.pure:
            return f"{self.epsilon:g}-DP (pure, {self.neighbors} neighbors)"
        return f"({self.epsilon:g}, {self.delta:g})-DP ({self.neighbors} neighbors)"


@dataclass(frozen=True, slots=True, kw_only=True)
class Sensitivity:
    """An upper bound ``value`` on ``||M(X) - M(X')||`` over neighbors, in the norm ``norm``."""

    value: float
    norm: str = "l2"
