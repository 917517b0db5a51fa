"""The result of a private release."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from dpcvx.accounting.ledger import Ledger
from dpcvx.certification.certificate import ReleaseCertificate
from dpcvx.neighbors import REPLACE_ONE, NeighborRelation, as_relation
from dpcvx.types import Guarantee

__all__ = ["PrivateResult"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PrivateResult:
    """A differentially private minimizer with its guarantee and dpcvx's proof of every solve.

    Attributes
    ----------
    w : ndarray
        The released parameter vector.
    epsilon, delta : float
        The guarantee of this release (``delta == 0``: pure epsilon-DP), under ``neighbors``.
    certificates : tuple of ReleaseCertificate
        The public certificate of every solve behind the release: dpcvx certified each solve
        to the stated accuracy. (The certified points and objective values are data-dependent
        and are not part of a private result.)
    ledger : Ledger
        The accountant's ledger after this release (all releases charged to it so far).
    seeded : bool
        True when the noise came from a seeded generator (reproducible: not for production).
    mechanism : str
        The mechanism's name.
    detail : mapping
        The mechanism-specific public facts of the release: the plan's numbers (sensitivity,
        accuracy target, noise kind and scale, ...; see each mechanism's plan) and the run's
        (e.g. every block's output), all covered by the guarantee. Every mechanism's result
        has the same fields; what differs between mechanisms lives here only.
    neighbors : NeighborRelation
        The neighboring relation of the guarantee (default replace-one; the names
        ``"replace-one"`` and ``"add-remove-one"`` are accepted and converted).
    """

    w: np.ndarray
    epsilon: float
    delta: float
    certificates: tuple[ReleaseCertificate, ...]
    ledger: Ledger
    seeded: bool
    mechanism: str = ""
    detail: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    neighbors: NeighborRelation = REPLACE_ONE

    def __post_init__(self) -> None:
        object.__setattr__(self, "neighbors", as_relation(self.neighbors))

    @property
    def guarantee(self) -> Guarantee:
        """The release's guarantee, with its neighboring relation."""
        return Guarantee(epsilon=self.epsilon, delta=self.delta, neighbors=self.neighbors)

    def summary(self) -> str:
        """A human-readable account of the release."""
        kind = "pure epsilon-DP" if self.delta == 0 else "(epsilon, delta)-DP"
        lines = [
            f"{self.mechanism}: {kind} with epsilon = {self.epsilon:g}"
            + ("" if self.delta == 0 else f", delta = {self.delta:g}")
            + f" ({self.neighbors} neighbors)"
            + ("  [SEEDED: reproducible noise]" if self.seeded else ""),
        ]
        for key in (
            "sensitivity",
            "base_sensitivity",
            "accuracy",
            "noise",
            "noise_scale",
            "phases",
            "blocks",
            "block_sizes",
            "regularizations",
            "extension_C",
            "noise_scales",
            "implied_confidence",
            "lipschitz_claim",
            "universe",
        ):
            if key in self.detail:
                val = self.detail[key]
                if isinstance(val, float):
                    text = f"{val:.6g}"
                elif isinstance(val, tuple):
                    text = "(" + ", ".join(f"{v:.4g}" for v in val) + ")"
                else:
                    text = str(val)
                lines.append(f"  {key}: {text}")
        # identical certificates (the blocks of one phase) are shown once, with their count
        texts = [str(cert) for cert in self.certificates]
        groups: dict[str, list[int]] = {}
        for i, text in enumerate(texts):
            groups.setdefault(text, []).append(i)
        for text, idx in groups.items():
            label = f"solve {idx[0]}" if len(idx) == 1 else f"{len(idx)} solves"
            lines.append(f"  {label}: {text}")
        lines.append("  ledger:")
        lines += ["    " + row for row in str(self.ledger).splitlines()]
        return "\n".join(lines)
