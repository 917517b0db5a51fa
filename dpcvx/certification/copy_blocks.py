"""The Lipschitz extension's copies as blocks of the arrowhead interior-point method.

Paper 000's extension (eq. (5), Lemma 2.7) of a loss ``f_i`` at ``C`` over the domain W is
``f_{C,i}(w) = min_{y in W} f_i(y) + C ||w - y||``; its joint program gives an example a
copy ``y_i``. For a loss of :class:`~dpcvx.certification.arrowhead.ExtensionPieces` (one
term of pieces along one direction per example: hinge, absolute, pinball,
epsilon-insensitive) an example's copy is the block ``v_i = (y_i, t_i, s_i)`` of

    minimize    c (t_i + C s_i)
    subject to  sigma_ij u_i^T y_i + beta_ij <= t_i        (each piece j)
                (s_i, w - y_i) in the second-order cone     (s_i >= ||w - y_i||)
                y_i in W                                    (a box's 2 d bounds, or a ball)

with ``c = 1 / n`` (the loss's own units). The pieces and W's constraints have a slack and a
multiplier each, as the method's other constraints; the cone's slack is ``(s_i, w - y_i)``
itself, with Nesterov-Todd scaling and Mehrotra's corrector in the cone's Jordan algebra.

The blocks couple only through ``w`` (the cone), so
:func:`~dpcvx.certification.arrowhead.arrowhead_ipm` eliminates each block from its Newton
system, in ``O(k d^3)`` per step for ``k`` blocks (batched over chunks of blocks), without a
sparse factorization of the joint program: ``s_i`` and ``t_i`` in closed form, then ``y_i``
by a ``d x d`` Cholesky factor, which leaves a ``d x d`` term of the Schur complement per
block, computed as a product with no difference of large terms (:meth:`CopyBlocks.schur`).

The method only proposes ``w`` (and copies and duals that guide the certificate): dpcvx's
certificate evaluates the loss at every copy itself; nothing here is trusted.
"""

from __future__ import annotations

import numpy as np

from dpcvx.certification.ball import BallRegion
from dpcvx.certification.box import BoxRegion
from dpcvx.modeling.domains import row_norms

__all__ = ["CopyBlocks"]

#: blocks per chunk of the batched block matrices (a chunk's factors take ``2 CHUNK d^2``
#: entries). Chunks of a few megabytes at d = 20 stay in the processor's cache through a
#: block's elimination: the whole joint program of an absolute loss at n = 2e4 (7,754
#: copies, 84 steps) took 8.0 s with chunks of 4,096 blocks and 6.5 s with 512 (6.6 s with
#: 128, 6.8 s with 1,024)
CHUNK = 1 << 9


class CopyBlocks:
    """Copies ``y_i`` for the examples ``rows`` of the extension ``ext``
    (:class:`~dpcvx.certification.arrowhead.ExtensionPieces`) kept in ``region`` (W: a box or
    a ball), as blocks of :func:`~dpcvx.certification.arrowhead.arrowhead_ipm`'s program; the
    copies start at ``w`` (inside W).

    Per block, the slacks ``S`` and multipliers ``N`` (``(k, p)``) of the constraints
    ``g <= 0`` (``g + S = 0``) hold the pieces' ``m``, then W's (``2 d`` for a box: the lower
    bounds, then the upper; one for a ball, ``(||y - a||^2 - R^2) / (2 R)``); the cone's slack
    is ``(s, w - y)`` itself and its multiplier ``Z`` (``(k, d + 1)``), both in the
    second-order cone. The method calls :meth:`residuals`, :meth:`schur`, :meth:`rhs`,
    :meth:`back`, :meth:`max_step`, :meth:`gap_at`, :meth:`corrected` and :meth:`update`."""

    def __init__(self, ext, rows: np.ndarray, region: BallRegion | BoxRegion, w: np.ndarray):
        rows = np.asarray(rows, int)
        self.rows = rows
        self.u = np.ascontiguousarray(ext.u[rows])
        self.sigma = np.ascontiguousarray(ext.sigma[rows])
        self.beta = np.ascontiguousarray(ext.beta[rows])
        (term,) = ext.model.terms
        self.c = float(term.c / ext.weight)  # one example's loss units in the objective
        self.C = float(ext.C)
        k, d = self.u.shape
        m = self.sigma.shape[1]
        self.k, self.d, self.m = k, d, m
        self.box = isinstance(region, BoxRegion)
        if isinstance(region, BoxRegion):
            self.lo, self.hi = np.asarray(region.lo, float), np.asarray(region.hi, float)
        else:
            self.center, self.radius = np.asarray(region.center, float), float(region.radius)
        w = np.asarray(w, float)
        self.Y = np.repeat(w[None, :], k, axis=0)
        pieces = self.sigma * (self.u @ w)[:, None] + self.beta
        self.t = (pieces.max(axis=1) if k else np.zeros(0)) + 1.0
        self.s = np.full(k, float(region.scale))
        self.p = m + (2 * d if self.box else 1)
        self.S = np.maximum(-self._g(), 1e-8)
        self.N = np.full((k, self.p), self.c * self.C)
        self.N[:, :m] = self.c / m
        self.Z = np.zeros((k, d + 1))
        self.Z[:, 0] = self.c * self.C
        self.w = w
        #: the copies and multipliers of the method's best iterate (:meth:`keep`)
        self.kept: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.count = k * (self.p + 1)  # a cone counts once (its identity is (1, 0))
        self.scale = self.c * k

    # ------------------------------------------------------------------ the constraints
    def _g(self) -> np.ndarray:
        """The constraints' values ``g <= 0``, ``(k, p)``."""
        m, d = self.m, self.d
        g = np.empty((self.k, self.p))
        z = np.einsum("kd,kd->k", self.u, self.Y)
        g[:, :m] = self.sigma * z[:, None] + self.beta - self.t[:, None]
        if self.box:
            g[:, m : m + d] = self.lo - self.Y
            g[:, m + d :] = self.Y - self.hi
        else:
            r = self.Y - self.center
            g[:, m] = (np.einsum("kd,kd->k", r, r) - self.radius**2) / (2 * self.radius)
        return g

    def _adjoint(self, E: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, ...]:
        """``sum_col E[:, col] grad g_col + A^T V`` per block (its ``y``, ``t``, ``s`` parts)
        and summed over blocks for ``w``; ``A`` maps ``(w, y, s)`` to the cone's slack
        ``(s, w - y)``."""
        m, d = self.m, self.d
        gy = (np.einsum("km,km->k", E[:, :m], self.sigma))[:, None] * self.u
        gy -= V[:, 1:]
        if self.box:
            gy -= E[:, m : m + d]
            gy += E[:, m + d :]
        else:
            gy += (E[:, m] / self.radius)[:, None] * (self.Y - self.center)
        return gy, -E[:, :m].sum(axis=1), V[:, 0].copy(), V[:, 1:].sum(axis=0)

    def _forward(self, dy: np.ndarray, dt: np.ndarray) -> np.ndarray:
        """``grad g_col^T dv`` for every constraint, ``(k, p)`` (none depends on ``w`` or
        ``s``)."""
        m, d = self.m, self.d
        out = np.empty((self.k, self.p))
        out[:, :m] = self.sigma * np.einsum("kd,kd->k", self.u, dy)[:, None] - dt[:, None]
        if self.box:
            out[:, m : m + d] = -dy
            out[:, m + d :] = dy
        else:
            out[:, m] = np.einsum("kd,kd->k", self.Y - self.center, dy) / self.radius
        return out

    def _cone(self) -> np.ndarray:
        """The cone's slack ``(s, w - y)``."""
        out = np.empty((self.k, self.d + 1))
        out[:, 0] = self.s
        np.subtract(self.w[None, :], self.Y, out=out[:, 1:])
        return out

    # ------------------------------------------------------------------ the method's calls
    def residuals(self, w: np.ndarray) -> tuple[np.ndarray, float, float]:
        """At ``w``: the blocks' part of the stationarity residual in ``w``, their
        complementarity, and their largest residual (stationarity relative to ``c``)."""
        self.w = np.asarray(w, float)
        self.r_g = self._g() + self.S
        gy, gt, gs, gw = self._adjoint(self.N, -self.Z)
        gt += self.c
        gs += self.c * self.C
        self.r_v = (gy, gt, gs)
        self.z = self._cone()
        comp = float(np.sum(self.N * self.S)) + float(np.sum(self.Z * self.z))
        infeas = max(
            max(float(np.abs(r).max(initial=0.0)) for r in self.r_v) / self.c,
            float(np.abs(self.r_g).max(initial=0.0)),
        )
        return gw, comp, infeas

    def schur(self, w: np.ndarray) -> np.ndarray:
        """The cone's scaling at the current point, each block's elimination (kept for
        :meth:`rhs` and :meth:`back`), and the blocks' term ``sum_i S_i`` of the Schur
        complement in ``w``.

        A block's ``s`` and ``t`` go first, in closed form: ``s`` leaves the cone's
        ``K = H_uu - h_0 h_0^T / h_00`` on ``u = w - y`` (``H = W^-2``), ``t`` the pieces'
        ``rho u u^T`` (``rho`` their weighted variance of slopes, summed over pairs as the
        method's other terms are). ``y`` goes last: with ``R`` its own curvature (the
        pieces', W's) and ``N = K + R = L L^T``, ``S = K - K N^-1 K = (L^-1 K)^T (L^-1 R)``,
        which takes no difference of large terms: a cone near its apex makes ``K`` a
        thousand million times ``R``, and ``K - K N^-1 K`` left the Schur complement with no
        correct digit there."""
        m, d, k = self.m, self.d, self.k
        self.nt = _nt_scaling(self.z, self.Z)
        wb, beta = self.nt
        self.lam = _scaled(wb, beta, self.Z, inverse=False)
        # W^-2 = (2 w^ w^T - J) / beta^2 with w^ = J wb: in (s, u), h00, h0 = -2 w0 w1 / beta^2
        # and Huu = (I + 2 w1 w1^T) / beta^2
        ib2 = 1.0 / beta**2
        w0, w1 = wb[:, 0], wb[:, 1:]
        h00 = (2 * w0 * w0 - 1.0) * ib2
        h0 = (-2 * w0 * ib2)[:, None] * w1
        D = self.N / self.S
        Dp = D[:, :m]
        tt = Dp.sum(axis=1)
        tt = np.where(tt > 0, tt, 1.0)  # (positive inside the method: a guard only)
        ts = np.einsum("km,km->k", Dp, self.sigma)
        rho = (
            sum(
                Dp[:, j] * Dp[:, i] * (self.sigma[:, j] - self.sigma[:, i]) ** 2
                for j in range(m)
                for i in range(j + 1, m)
            )
            / tt
        )
        Ry = np.zeros((k, d))  # R's diagonal
        if self.box:
            Ry += D[:, m : m + d] + D[:, m + d :]
        else:
            Ry += (self.N[:, m] / self.radius)[:, None]
        kappa = 2.0 / (2 * w0 * w0 - 1.0)  # K = ib2 (I - kappa w1 w1^T)
        self._blocks = dict(ib2=ib2, w1=w1, h0=h0, h00=h00, tt=tt, ts=ts, kappa=kappa)
        idx = np.arange(d)
        H = np.zeros((d, d))
        self._Linv: list[np.ndarray] = []
        self._Lw: list[np.ndarray] = []  # L^-1 w1 per block: A = ib2 (L^-1 - kappa Lw w1^T)
        a = np.sqrt(ib2 * kappa)[:, None] * w1  # K = ib2 I - a a^T
        b = np.sqrt(rho)[:, None] * self.u  # R = diag(Ry) + b b^T (+ the ball's term)
        for lo in range(0, k, CHUNK):
            sl = slice(lo, min(k, lo + CHUNK))
            K = np.multiply(a[sl, :, None], a[sl, None, :])
            np.negative(K, out=K)
            K[:, idx, idx] += ib2[sl, None]
            R = np.multiply(b[sl, :, None], b[sl, None, :])
            R[:, idx, idx] += Ry[sl]
            if not self.box:
                r = (self.Y[sl] - self.center) / self.radius
                R += D[sl, m, None, None] * (r[:, :, None] * r[:, None, :])
            Linv = _lower_inverse(np.linalg.cholesky(K + R))
            # sum_i A_i^T B_i over the chunk is one product of (blocks x d, d) matrices
            A = np.matmul(Linv, K).reshape(-1, d)
            H += A.T @ np.matmul(Linv, R).reshape(-1, d)
            self._Linv.append(Linv)
            self._Lw.append(np.matmul(Linv, w1[sl, :, None])[:, :, 0])
        return (H + H.T) / 2

    def _chunks(self):
        """Per chunk of blocks: its rows, ``L^-1`` and ``L^-1 w1`` (``A = L^-1 K`` is ``ib2
        (L^-1 - kappa (L^-1 w1) w1^T)``: not kept, which halves the blocks' memory)."""
        for lo, Linv, Lw in zip(range(0, self.k, CHUNK), self._Linv, self._Lw):
            yield slice(lo, lo + Lw.shape[0]), Linv, Lw

    def _eliminate(self, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For the blocks' rows ``M_vv v + M_vw dw = V``: their term of the Schur system's
        right-hand side, ``sum_i (A_i^T L_i^-1 h_i - h0_i V_s,i / h00_i)``, and ``L^-1 h``
        per block (``h`` the ``y`` rows' right-hand side once ``s`` and ``t`` are gone)."""
        b = self._blocks
        d = self.d
        Vy, Vt, Vs = V[:, :d], V[:, d], V[:, d + 1]
        h = Vy + (Vs / b["h00"])[:, None] * b["h0"]
        h += (b["ts"] * Vt / b["tt"])[:, None] * self.u
        Lh = np.empty_like(h)
        out = -(b["h0"].T @ (Vs / b["h00"]))
        ib2, kappa, w1 = b["ib2"], b["kappa"], b["w1"]
        for sl, Linv, Lw in self._chunks():
            Lh[sl] = np.matmul(Linv, h[sl, :, None])[:, :, 0]
            # A^T Lh with A = ib2 (L^-1 - kappa (L^-1 w1) w1^T)
            x = ib2[sl, None] * Lh[sl]
            out += Linv.reshape(-1, d).T @ x.ravel()
            out -= (kappa[sl] * np.einsum("kd,kd->k", Lw, x)) @ w1[sl]
        return out, Lh

    def _block_solve(self, V: np.ndarray, dw: np.ndarray, Lh: np.ndarray) -> np.ndarray:
        """``v`` with ``M_vv v + M_vw dw = V`` per block (``Lh`` from :meth:`_eliminate`)."""
        b = self._blocks
        d = self.d
        out = np.empty_like(V)
        ib2, kappa, w1 = b["ib2"], b["kappa"], b["w1"]
        for sl, Linv, Lw in self._chunks():
            Adw = Linv @ dw - (kappa[sl] * (w1[sl] @ dw))[:, None] * Lw
            Adw *= ib2[sl, None]
            Adw += Lh[sl]
            out[sl, :d] = np.matmul(Adw[:, None, :], Linv)[:, 0, :]
        y = out[:, :d]
        out[:, d] = (V[:, d] + b["ts"] * np.einsum("kd,kd->k", self.u, y)) / b["tt"]
        out[:, d + 1] = (V[:, d + 1] - b["h0"] @ dw + np.einsum("kd,kd->k", b["h0"], y)) / b["h00"]
        return out

    def affine(self) -> tuple[np.ndarray, np.ndarray]:
        """The complementarity residuals of the predictor: ``N S`` and ``lam o lam``."""
        return self.N * self.S, _jordan(self.lam, self.lam)

    def rhs(self, rc: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """The blocks' part of the right-hand side of the Schur system for the
        complementarity residuals ``rc`` (the reduced residuals kept for :meth:`back`)."""
        rc_lp, rc_c = rc
        wb, beta = self.nt
        E = (self.N * self.r_g - rc_lp) / self.S
        V = _scaled(wb, beta, _jordan_solve(self.lam, rc_c), inverse=True)
        gy, gt, gs, gw = self._adjoint(E, V)
        ry, rt, rs = self.r_v
        self._reduced = np.concatenate([ry + gy, (rt + gt)[:, None], (rs + gs)[:, None]], axis=1)
        self._V = V
        eliminated, self._Lh = self._eliminate(-self._reduced)
        return eliminated - gw

    def back(self, dw: np.ndarray, rc: tuple[np.ndarray, np.ndarray]) -> tuple:
        """The blocks' directions for ``dw``: ``(dv, dS, dN, dz, dZ)``."""
        dv = self._block_solve(-self._reduced, dw, self._Lh)
        d = self.d
        dy, dt = dv[:, :d], dv[:, d]
        dS = -self.r_g - self._forward(dy, dt)
        dN = -(rc[0] + self.N * dS) / self.S
        dz = np.empty_like(self.z)
        dz[:, 0] = dv[:, d + 1]
        np.subtract(dw[None, :], dy, out=dz[:, 1:])
        wb, beta = self.nt
        dZ = -self._V - _scaled(wb, beta, _scaled(wb, beta, dz, True), True)
        return dv, dS, dN, dz, dZ

    def max_step(self, direction: tuple) -> float:
        """``min(-1, min(dx / x))`` over the slacks and multipliers, and ``-1 / a`` for the
        longest step ``a`` that keeps the cone's slack and multiplier in the cone (the step
        rule's ``-1 / min``)."""
        _, dS, dN, dz, dZ = direction
        low = -1.0
        for x, dx in ((self.S, dS), (self.N, dN)):
            if dx.size:
                low = min(low, float(np.fmin.reduce((dx / x).ravel())))
        for x, dx in ((self.z, dz), (self.Z, dZ)):
            if dx.size:
                low = min(low, -1.0 / _cone_step(x, dx))
        return low

    def gap_at(self, alpha: float, direction: tuple) -> float:
        """The complementarity after a step ``alpha``."""
        _, dS, dN, dz, dZ = direction
        return float(np.sum((self.N + alpha * dN) * (self.S + alpha * dS))) + float(
            np.sum((self.Z + alpha * dZ) * (self.z + alpha * dz))
        )

    def corrected(self, rc: tuple, direction: tuple, target: float) -> tuple:
        """Mehrotra's corrector: the predictor's residuals ``rc`` plus its second-order
        term, minus the centring ``target`` (in place where they are arrays of their own)."""
        _, dS, dN, dz, dZ = direction
        rc_lp, rc_c = rc
        rc_lp += dN * dS
        rc_lp -= target
        wb, beta = self.nt
        rc_c = rc_c + _jordan(_scaled(wb, beta, dz, True), _scaled(wb, beta, dZ, False))
        rc_c[:, 0] -= target
        return rc_lp, rc_c

    def keep(self) -> None:
        """Keep the current copies and multipliers (``kept``: ``(Y, Z, N)``), the method's
        best iterate so far."""
        self.kept = (self.Y.copy(), self.Z.copy(), self.N.copy())

    def update(self, alpha: float, direction: tuple, w: np.ndarray) -> None:
        """A step ``alpha`` along ``direction``, to the method's new point ``w``."""
        dv, dS, dN, _, dZ = direction
        self.w = w
        d = self.d
        self.Y += alpha * dv[:, :d]
        self.t += alpha * dv[:, d]
        self.s += alpha * dv[:, d + 1]
        self.S += alpha * dS
        self.N += alpha * dN
        self.Z += alpha * dZ


def _lower_inverse(L: np.ndarray) -> np.ndarray:
    """The inverses of a stack of lower-triangular matrices ``(k, d, d)`` (nonzero
    diagonals), by forward substitution one row at a time over the whole stack: a batched
    general inverse costs over twice as much at ``d = 20``."""
    k, d, _ = L.shape
    X = np.zeros_like(L)
    inv_diag = 1.0 / np.diagonal(L, axis1=1, axis2=2)
    for j in range(d):
        # row j of L X = I:  X[j, :j] = -L[j, :j] X[:j, :j] / L[j, j],  X[j, j] = 1 / L[j, j]
        if j:
            X[:, j, :j] = np.matmul(L[:, j : j + 1, :j], X[:, :j, :j])[:, 0, :]
            X[:, j, :j] *= -inv_diag[:, j, None]
        X[:, j, j] = inv_diag[:, j]
    return X


def _soc_norm(x: np.ndarray) -> np.ndarray:
    """``sqrt(x_0^2 - ||x_1||^2)`` per row (inside the cone), as ``sqrt((x_0 - r)(x_0 + r))``."""
    r = row_norms(x[:, 1:])
    return np.sqrt(np.maximum((x[:, 0] - r) * (x[:, 0] + r), 0.0))


def _nt_scaling(z: np.ndarray, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Nesterov-Todd scaling of the slack ``z`` and multiplier ``Z`` (rows inside the
    second-order cone), as ``(wb, beta)``: ``W = beta [[w0, w1^T], [w1, I + w1 w1^T / (1 +
    w0)]]`` with ``W Z = W^-1 z``."""
    zn, Zn = _soc_norm(z), _soc_norm(Z)
    zs, Zs = z / zn[:, None], Z / Zn[:, None]
    gamma = np.sqrt((1.0 + np.einsum("kd,kd->k", zs, Zs)) / 2.0)
    wb = zs.copy()
    wb[:, 0] += Zs[:, 0]
    wb[:, 1:] -= Zs[:, 1:]
    wb /= (2.0 * gamma)[:, None]
    return wb, np.sqrt(zn / Zn)


def _scaled(wb: np.ndarray, beta: np.ndarray, V: np.ndarray, inverse: bool) -> np.ndarray:
    """``W V`` (or ``W^-1 V``) per row for the scaling ``(wb, beta)``."""
    w0, w1 = wb[:, 0], wb[:, 1:]
    v0, v1 = V[:, 0], V[:, 1:]
    sign = -1.0 if inverse else 1.0
    dot = np.einsum("kd,kd->k", w1, v1)
    out = np.empty_like(V)
    out[:, 0] = w0 * v0 + sign * dot
    out[:, 1:] = v1 + (sign * v0 + dot / (1.0 + w0))[:, None] * w1
    return out * (1.0 / beta if inverse else beta)[:, None]


def _jordan(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The cone's Jordan product per row: ``(x^T y, x_0 y_1 + y_0 x_1)``."""
    out = np.empty_like(x)
    out[:, 0] = np.einsum("kd,kd->k", x, y)
    out[:, 1:] = x[:, :1] * y[:, 1:] + y[:, :1] * x[:, 1:]
    return out


def _jordan_solve(lam: np.ndarray, r: np.ndarray) -> np.ndarray:
    """``x`` with ``lam o x = r`` per row (``lam`` inside the cone)."""
    l0, l1 = lam[:, 0], lam[:, 1:]
    out = np.empty_like(r)
    radius = row_norms(l1)
    det = (l0 - radius) * (l0 + radius)
    out[:, 0] = (l0 * r[:, 0] - np.einsum("kd,kd->k", l1, r[:, 1:])) / det
    out[:, 1:] = (r[:, 1:] - out[:, :1] * l1) / l0[:, None]
    return out


def _cone_step(x: np.ndarray, dx: np.ndarray) -> float:
    """The longest step ``a`` with every row of ``x + a dx`` in the second-order cone (rows of
    ``x`` inside it; ``inf`` when no row leaves): the first positive root of ``(x_0 + a
    dx_0)^2 - ||x_1 + a dx_1||^2``."""
    a = dx[:, 0] ** 2 - np.einsum("kd,kd->k", dx[:, 1:], dx[:, 1:])
    b = x[:, 0] * dx[:, 0] - np.einsum("kd,kd->k", x[:, 1:], dx[:, 1:])
    c = _soc_norm(x) ** 2
    disc = b * b - a * c
    leaves = (a < 0) | ((b < 0) & (disc >= 0))
    if not leaves.any():
        return np.inf
    a, b, c = a[leaves], b[leaves], c[leaves]
    sq = np.sqrt(np.maximum(disc[leaves], 0.0))
    # the first positive root, without cancellation: c / (-b + sq) where b < 0, and
    # (b + sq) / -a where b >= 0 (then a < 0); the two are equal in exact arithmetic
    root = np.where(b < 0, c / np.where(b < 0, sq - b, 1.0), (b + sq) / np.where(b < 0, -1.0, -a))
    return float(root.min())
