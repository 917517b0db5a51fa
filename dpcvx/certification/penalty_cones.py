"""Norm penalties that read no data as second-order cones of the arrowhead interior-point
method.

A penalty ``c ||A w + b||_2`` written into the loss (a group lasso: ``0.02 * cp.norm(w[:5])``;
``Declaration.shared_terms``) is the same for every example. Beside a piecewise-linear data
term (the hinge, absolute or pinball loss) no fast rung held it, and the loss took the conic
program (the hinge loss plus a two-group lasso: 7.4 s at n = 1e5, d = 20, with the penalty
held once there). Here each such term is one cone of
:func:`~dpcvx.certification.arrowhead.arrowhead_ipm`'s program:

    minimize    c t
    subject to  (t, A w + b) in the second-order cone

The cone's slack is ``(t, A w + b)`` itself and its multiplier ``Z`` (both in the cone), with
Nesterov-Todd scaling and Mehrotra's corrector in the cone's Jordan algebra, as the extension's
copies (:mod:`~dpcvx.certification.copy_blocks`, whose helpers this uses). ``t`` goes in closed
form: each cone adds ``A^T K A`` to the Schur complement in ``w``, with ``K = H_uu - h_0 h_0^T
/ h_00`` for ``H = W^-2`` (``ib2 (I - kappa w1 w1^T)`` in the scaling's terms). At the
answer ``Z = (c, -c theta)`` with ``||theta|| <= 1``: ``theta`` is the term's multiplier in the
certificate (the dual of the norm; at a group that is zero, the one that holds it there).

The method only proposes ``w`` and the multipliers: dpcvx's certificate evaluates the
penalty itself, and clips ``theta`` into the unit ball; nothing here is trusted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dpcvx.certification.copy_blocks import (
    _cone_step,
    _jordan,
    _jordan_solve,
    _nt_scaling,
    _scaled,
)

__all__ = ["NormCone", "PenaltyCones"]


@dataclass(frozen=True, slots=True)
class NormCone:
    """One penalty ``c ||A w + b||_2`` (``A`` ``(m, d)``, ``b`` ``(m,)``, ``c > 0``), the
    term ``index`` of the declaration."""

    index: int
    c: float
    A: np.ndarray
    b: np.ndarray


class PenaltyCones:
    """The cones of :class:`NormCone` penalties as blocks of
    :func:`~dpcvx.certification.arrowhead.arrowhead_ipm` (its ``blocks``: it calls
    :meth:`residuals`, :meth:`schur`, :meth:`affine`, :meth:`rhs`, :meth:`back`,
    :meth:`max_step`, :meth:`gap_at`, :meth:`corrected`, :meth:`keep` and :meth:`update`).
    Cones of one size are handled together, as rows of one array; the cones start at ``w``
    with ``t = ||A w + b|| + 1`` and ``Z = (c, 0)``. The residuals and directions it hands
    the method are its own (a list per group of cones), which the method hands back."""

    def __init__(self, cones: tuple[NormCone, ...], w: np.ndarray) -> None:
        w = np.asarray(w, float)
        self.cones = cones
        self.groups: list[_Group] = []
        for size in sorted({cone.b.size for cone in cones}):
            members = [k for k, cone in enumerate(cones) if cone.b.size == size]
            self.groups.append(_Group(members, [cones[k] for k in members], w))
        self.count = len(cones)  # a cone counts once (its identity is (1, 0))
        self.scale = float(sum(cone.c for cone in cones))
        self.kept: list[np.ndarray] | None = None

    def thetas(self) -> list[np.ndarray]:
        """Per cone (in :attr:`cones`' order), its multiplier ``-Z_1 / c`` at the method's
        best iterate (:meth:`keep`; the current one before any): the stationarity in ``w``
        reads ``grad(rest) = A^T Z_1``, and the norm's part of it is ``c A^T theta``."""
        out: list[np.ndarray] = [np.zeros(0)] * len(self.cones)
        Zs = self.kept if self.kept is not None else [g.Z for g in self.groups]
        for group, Z in zip(self.groups, Zs):
            for row, k in enumerate(group.members):
                out[k] = -Z[row, 1:] / group.c[row]
        return out

    def residuals(self, w: np.ndarray) -> tuple[np.ndarray, float, float]:
        """At ``w``: the cones' part ``-sum A^T Z_1`` of the stationarity residual in ``w``,
        their complementarity and their largest residual ``|c - Z_0| / c``."""
        gw = np.zeros(np.asarray(w).size)
        comp, infeas = 0.0, 0.0
        for group in self.groups:
            g, c, r = group.residuals(w)
            gw += g
            comp += c
            infeas = max(infeas, r)
        return gw, comp, infeas

    def schur(self, w: np.ndarray) -> np.ndarray:
        """The cones' term of the Schur complement in ``w`` (their scalings at the current
        point kept for the step's other calls)."""
        H = np.zeros((np.asarray(w).size,) * 2)
        for group in self.groups:
            H += group.schur()
        return H

    def affine(self) -> Any:
        """The complementarity residuals of the predictor, ``lam o lam`` per cone."""
        return [_jordan(group.lam, group.lam) for group in self.groups]

    def rhs(self, rc: Any) -> np.ndarray:
        """The cones' part of the Schur system's right-hand side for the complementarity
        residuals ``rc``."""
        out = np.zeros(self.groups[0].A.shape[2])
        for group, r in zip(self.groups, rc):
            out += group.rhs(r)
        return out

    def back(self, dw: np.ndarray, rc: Any) -> Any:
        """Per group of cones, the directions ``(dt, dz, dZ)`` for ``dw``."""
        return [group.back(dw) for group in self.groups]

    def max_step(self, direction: Any) -> float:
        """``-1 / a`` for the longest step ``a`` that keeps every cone's slack and multiplier
        in the cone (at most ``-1``: the step rule's ``-1 / min``)."""
        low = -1.0
        for group, (_, dz, dZ) in zip(self.groups, direction):
            for x, dx in ((group.z, dz), (group.Z, dZ)):
                low = min(low, -1.0 / _cone_step(x, dx))
        return low

    def gap_at(self, alpha: float, direction: Any) -> float:
        """The cones' complementarity after a step ``alpha``."""
        return float(
            sum(
                np.sum((group.Z + alpha * dZ) * (group.z + alpha * dz))
                for group, (_, dz, dZ) in zip(self.groups, direction)
            )
        )

    def corrected(self, rc: Any, direction: Any, target: float) -> Any:
        """Mehrotra's corrector: the predictor's residuals plus their second-order term, less
        the centring ``target``."""
        out = []
        for group, r, (_, dz, dZ) in zip(self.groups, rc, direction):
            wb, beta = group.nt
            r = r + _jordan(_scaled(wb, beta, dz, True), _scaled(wb, beta, dZ, False))
            r[:, 0] -= target
            out.append(r)
        return out

    def keep(self) -> None:
        """Keep the multipliers of the method's best iterate so far (:meth:`thetas`)."""
        self.kept = [group.Z.copy() for group in self.groups]

    def update(self, alpha: float, direction: Any, w: np.ndarray) -> None:
        """A step ``alpha`` along ``direction``, to the method's new point ``w``."""
        for group, (dt, _, dZ) in zip(self.groups, direction):
            group.t += alpha * dt
            group.Z += alpha * dZ
            group.w = np.asarray(w, float)


class _Group:
    """The cones of one size ``m`` (``k`` of them), as rows: ``A`` ``(k, m, d)``."""

    def __init__(self, members: list[int], cones: list[NormCone], w: np.ndarray) -> None:
        self.members = members
        self.A = np.stack([np.asarray(cone.A, float) for cone in cones])
        self.b = np.stack([np.asarray(cone.b, float) for cone in cones])
        self.c = np.array([cone.c for cone in cones], float)
        self.w = w
        self.t = np.linalg.norm(self._u(), axis=1) + 1.0
        self.Z = np.zeros((len(cones), self.b.shape[1] + 1))
        self.Z[:, 0] = self.c

    def _u(self) -> np.ndarray:
        return np.einsum("kmd,d->km", self.A, self.w) + self.b

    def residuals(self, w: np.ndarray) -> tuple[np.ndarray, float, float]:
        self.w = np.asarray(w, float)
        self.z = np.concatenate([self.t[:, None], self._u()], axis=1)
        self.r_t = self.c - self.Z[:, 0]
        gw = -np.einsum("kmd,km->d", self.A, self.Z[:, 1:])
        comp = float(np.sum(self.z * self.Z))
        return gw, comp, float(np.max(np.abs(self.r_t) / self.c))

    def schur(self) -> np.ndarray:
        """The scaling at the current point and ``sum A^T K A``, ``K = ib2 (I - kappa w1
        w1^T)`` (the cone's ``W^-2`` with ``t`` eliminated)."""
        self.nt = _nt_scaling(self.z, self.Z)
        wb, beta = self.nt
        self.lam = _scaled(wb, beta, self.Z, inverse=False)
        ib2 = 1.0 / beta**2
        w0, w1 = wb[:, 0], wb[:, 1:]
        self.h00 = (2 * w0 * w0 - 1.0) * ib2
        self.h0 = (-2 * w0 * ib2)[:, None] * w1
        kappa = 2.0 / (2 * w0 * w0 - 1.0)
        Aw1 = np.einsum("kmd,km->kd", self.A, w1)  # A^T w1 per cone
        AtA = np.einsum("kmd,kme->kde", self.A, self.A)
        H = np.einsum("k,kde->de", ib2, AtA) - np.einsum("k,kd,ke->de", ib2 * kappa, Aw1, Aw1)
        return (H + H.T) / 2

    def rhs(self, rc: np.ndarray) -> np.ndarray:
        """``-A^T V_1 + A^T h_0 (V_0 + r_t) / h_00`` with ``V = W^-1 (lam \\ rc)``."""
        wb, beta = self.nt
        self.V = _scaled(wb, beta, _jordan_solve(self.lam, rc), inverse=True)
        self.q = (self.V[:, 0] + self.r_t) / self.h00  # dt = -q - h0 . A dw / h00
        inner = -self.V[:, 1:] + self.h0 * self.q[:, None]
        return np.einsum("kmd,km->d", self.A, inner)

    def back(self, dw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(dt, dz, dZ)`` for ``dw``: ``dZ = -V - W^-2 dz`` with ``dz = (dt, A dw)``."""
        Adw = np.einsum("kmd,d->km", self.A, dw)
        dt = -self.q - np.einsum("km,km->k", self.h0, Adw) / self.h00
        dz = np.concatenate([dt[:, None], Adw], axis=1)
        wb, beta = self.nt
        dZ = -self.V - _scaled(wb, beta, _scaled(wb, beta, dz, True), True)
        return dt, dz, dZ
