"""The Lipschitz extension of a one-direction loss with its copies kept in a box.

For a loss ``h_i(u_i^T y)`` of one direction per example (see
:mod:`dpcvx.certification.ball`), the extension of paper 000, eq. (5) over the box
``W = [lo, hi]`` (finite bounds),

    f_C(w) = min_{y in W} h(u^T y) + C ||w - y||,

is again a one-dimensional problem per example. The nearest point to ``w`` of the slice
``{y in W : u^T y = t}`` is ``y(mu) = clip(w + mu u, lo, hi)`` for the ``mu`` with
``u^T y(mu) = t`` (the stationarity of the projection), and ``t(mu)`` is nondecreasing in
``mu``. Along that path the derivative of ``h(t) + C D(t)`` (``D`` the distance of ``w`` to the
slice, convex in ``t``) is ``F(mu) = h'(t(mu)) + C mu / D(mu)``: nondecreasing in ``mu``, so
a bisection on its sign gives the copy, each step one pass over the example's coordinates.
``mu = 0`` is the copy at ``w``.

As for the ball, :func:`box_extension` also gives the duals ``g_i`` of ``||w - y_i||``, the
slopes of ``h_i`` that make ``g_i`` minus them normal to the box at ``y_i`` (what dpcvx's
certificate needs to be tight there), and a second-order model of the extensions at ``w``.
Nothing here is trusted: every output only guides the certificate, which evaluates the
declared loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpcvx.certification.ball import envelope, model_at, settle_slopes
from dpcvx.modeling.domains import row_norms
from dpcvx.modeling.smooth import gram

__all__ = ["BoxRegion", "box_extension"]

_EPS = float(np.finfo(float).eps)
#: as for the ball (:data:`dpcvx.certification.ball._FLOOR`): the model's curvature ``C / D``
#: is capped at ``C / (_FLOOR s)``, ``s`` the box's largest half-width
_FLOOR = 1e-4
#: the most bisection steps on ``mu`` (each halves the bracket; the rows stop at rounding)
_STEPS = 200


#: a coordinate of ``w`` within this fraction of the box's width of a bound is at that bound
#: (the interior-point method stops a rounding inside): the copy at ``w`` and the normal cone
#: there both take it so, consistently
_AT_BOUND = 1e-12


def _at_bounds(w: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which coordinates of ``w`` sit at their upper and at their lower bound."""
    tol = _AT_BOUND * (hi - lo)
    return w >= hi - tol, w <= lo + tol


def _path(u: np.ndarray, w: np.ndarray, lo: np.ndarray, hi: np.ndarray, mu: np.ndarray):
    """``y(mu)``, ``t(mu) = u^T y``, ``D(mu) = ||y - w||`` and ``w - y`` per row. ``w - y`` is
    ``-mu u_j`` on the coordinates off their bounds (not ``w_j - y_j``, which cancels to
    rounding for a copy near ``w``) and ``w_j - bound`` on the others."""
    step = mu[:, None] * u
    raw = w[None, :] + step
    Y = np.clip(raw, lo[None, :], hi[None, :])
    diff = np.where(Y == raw, -step, w[None, :] - Y)
    t = np.einsum("kd,kd->k", u, Y)
    return Y, t, row_norms(diff), diff


def box_extension(
    line,
    u: np.ndarray,
    w: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    C: float,
    n: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Per example (rows of the unit directions ``u``, ``h`` given by ``line``, a
    :class:`~dpcvx.certification.ball.Pieces1D` or
    :class:`~dpcvx.certification.ball.Smooth1D`), the extension
    ``min_{lo <= y <= hi} h(u^T y) + C ||w - y||`` (see the module docstring); ``w`` lies in
    the box. Returns ``t``, the copies, the duals ``g = C (w - y) / ||w - y||``, the slopes
    ``theta`` of ``h`` at ``t`` that make ``g - theta u`` normal to the box at ``y`` (in
    ``h``'s subdifferential) and the model ``(Q, q)`` of
    :class:`~dpcvx.certification.ball.BallCopies` (``n`` examples in the mean)."""
    k, d = u.shape
    lo = np.asarray(lo, float)
    hi = np.asarray(hi, float)
    w = np.asarray(w, float)
    scale = float(np.max(hi - lo)) / 2 if d else 1.0
    tau = u @ w
    # the range of mu: past the last breakpoint every coordinate that moves is clipped. It is
    # capped where a coordinate with a tiny u_j would take it further (such a coordinate
    # moves t by at most 1e-8 of the box's width before the cap): the copy stays a guide
    top_u = np.abs(u).max(axis=1) if d else np.zeros(k)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        cap = np.where(top_u > 0, 1e8 * (2 * scale) * np.sqrt(d) / top_u, 0.0)
        a = np.where(u != 0, (lo[None, :] - w[None, :]) / u, 0.0)
        b = np.where(u != 0, (hi[None, :] - w[None, :]) / u, 0.0)
    cap = np.nan_to_num(cap)
    mu_min = np.maximum(np.nan_to_num(np.fmin(a, b).min(axis=1)), -cap)
    mu_max = np.minimum(np.nan_to_num(np.fmax(a, b).max(axis=1)), cap)
    mu_min = np.minimum(mu_min, 0.0)
    mu_max = np.maximum(mu_max, 0.0)

    def slope(t: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
        part = line if rows is None else line.take(rows)
        return np.nan_to_num(part.slope(t))

    # the copy at w: the derivative of h + C D changes sign across mu = 0, where it is
    # h' +- C / |u_F| with F the coordinates free to move that way (not at a bound it pushes)
    top, bottom = _at_bounds(w, lo, hi)
    moves_up = ~((top[None, :] & (u > 0)) | (bottom[None, :] & (u < 0)))
    moves_dn = ~((top[None, :] & (u < 0)) | (bottom[None, :] & (u > 0)))
    f_up = row_norms(u * moves_up)
    f_dn = row_norms(u * moves_dn)
    s_lo0, s_hi0 = line.subdifferential(tau)
    with np.errstate(divide="ignore", over="ignore"):
        up = s_hi0 + np.where(f_up > 0, C / np.where(f_up > 0, f_up, 1.0), np.inf)
        dn = s_lo0 - np.where(f_dn > 0, C / np.where(f_dn > 0, f_dn, 1.0), np.inf)
    at_w = (up >= 0) & (dn <= 0)
    # otherwise a bisection on the sign of F over [mu_min, 0] or [0, mu_max]
    left = np.where(dn > 0, mu_min, 0.0)
    right = np.where(dn > 0, 0.0, mu_max)
    active = np.flatnonzero(~at_w & (right > left))
    for _ in range(_STEPS):
        if active.size == 0:
            break
        la, ra = left[active], right[active]
        mid = 0.5 * (la + ra)
        _, tm, Dm, _ = _path(u[active], w, lo, hi, mid)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            F = slope(tm, active) + C * np.where(Dm > 0, mid / Dm, 0.0)
        pos = F > 0
        right[active] = np.where(pos, mid, ra)
        left[active] = np.where(pos, la, mid)
        width = right[active] - left[active]
        done = (width <= 4 * _EPS * np.maximum(np.abs(left[active]), np.abs(right[active]))) | (
            (mid == la) | (mid == ra)
        )
        active = active[~done]
    # the better end of the bracket (a jump of h' sits between them), or the copy at w
    mu = np.where(at_w, 0.0, left)
    _, t_l, D_l, _ = _path(u, w, lo, hi, left)
    _, t_r, D_r, _ = _path(u, w, lo, hi, right)
    v_l = np.nan_to_num(line.value(t_l), nan=np.inf) + C * D_l
    v_r = np.nan_to_num(line.value(t_r), nan=np.inf) + C * D_r
    mu = np.where(~at_w & (v_r < v_l), right, mu)
    Y, t, D, diff = _path(u, w, lo, hi, mu)
    Y[at_w] = w
    diff[at_w] = 0.0
    t = np.where(at_w, tau, t)
    D = np.where(at_w, 0.0, D)
    normal = diff * np.where(D > 0, 1.0 / np.where(D > 0, D, 1.0), 0.0)[:, None]
    g = C * normal
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        theta = np.where(D > 0, -C * mu / np.where(D > 0, D, 1.0), 0.0)
    theta, s_lo, s_hi = settle_slopes(line, t, theta, g, at_w, u, w, BoxRegion(lo, hi), C)
    # the model: C dist(w, slice at t) per example, Hessian (C / D) (I - J - n n^T) with J
    # the projector onto the slice's face at y (coordinates off their bounds, across u)
    # (a coordinate at its bound that the path pushes outward: at the end of the range the
    # last one to reach its bound is clipped too)
    raw = w[None, :] + mu[:, None] * u
    push = mu[:, None] * u
    clipped = ((raw <= lo[None, :]) & (push < 0)) | ((raw >= hi[None, :]) & (push > 0))
    clipped &= ~at_w[:, None]
    free = ~clipped
    uf = u * free
    nf = row_norms(uf)
    room = np.maximum(D, _FLOOR * scale)
    cap = np.where((D > 0) & (room > 0), C / np.where(room > 0, room, 1.0), 0.0) / n
    Q = np.diag(np.sum(cap[:, None] * clipped, axis=0))
    unit = uf * np.where(nf > 0, 1.0 / np.where(nf > 0, nf, 1.0), 0.0)[:, None]
    Q += gram(unit, cap)
    Q -= gram(normal, cap)
    # a copy at w stays there as w moves: the extension is h(u^T w), of curvature h'' u u^T
    bend = np.where(at_w, np.nan_to_num(line.curvature(t)), 0.0) / n
    if bend.any():
        Q += gram(u, bend)
    # where no kink of h holds t, t follows w: less C^2 (d_t grad_w D)(d_t grad_w D)^T /
    # (h'' + C d_tt D) (an envelope), with d_tt D = |w_C - y_C|^2 / (|u_F|^2 D^3)
    held = s_hi > s_lo
    follow = ~at_w & ~held & (D > _FLOOR * scale) & (nf > 1e-8)
    if follow.any():
        f = np.flatnonzero(follow)
        Df, nff, muf = D[f], nf[f], mu[f]
        rest = np.sum((diff[f] * clipped[f]) ** 2, axis=1)
        with np.errstate(over="ignore", under="ignore"):
            Dtt = rest / (nff**2 * Df**3)
            cross = -uf[f] / (nff**2 * Df)[:, None] - diff[f] * (muf / Df**3)[:, None]
        ok = np.isfinite(Dtt) & np.all(np.isfinite(cross), axis=1)
        f, Dtt, cross = f[ok], Dtt[ok], cross[ok]
        Q = envelope(Q, cross, np.nan_to_num(line.curvature(t))[f], Dtt, C, n)
    return t, Y, g, theta, model_at(Q, g, w, n)


@dataclass(frozen=True)
class BoxRegion:
    """The box ``W = [lo, hi]`` (finite bounds) the copies stay in, for the extension's rounds
    (as :class:`~dpcvx.certification.ball.BallRegion`)."""

    lo: np.ndarray
    hi: np.ndarray

    @property
    def scale(self) -> float:
        """The box's largest half-width."""
        return float(np.max(self.hi - self.lo)) / 2

    def outside(self, Y: np.ndarray) -> np.ndarray:
        """Which rows of ``Y`` lie outside W."""
        return np.any((Y < self.lo[None, :]) | (Y > self.hi[None, :]), axis=1)

    def extension(self, line, u: np.ndarray, w: np.ndarray, C: float, n: int):
        """:func:`box_extension` in this box."""
        return box_extension(line, u, w, self.lo, self.hi, C, n)

    def cancellable(self, u: np.ndarray, w: np.ndarray, positive: bool) -> np.ndarray:
        """Per row of ``u``, the part of ``u`` that the box's normal cone at ``w`` can cancel
        from ``theta u`` for slopes ``theta`` of that sign: the coordinates at their upper
        bound where ``theta u_j < 0`` and at their lower bound where ``theta u_j > 0``."""
        top, bottom = _at_bounds(np.asarray(w, float), self.lo, self.hi)
        down, up = (u < 0, u > 0) if positive else (u > 0, u < 0)
        return np.where((top[None, :] & down) | (bottom[None, :] & up), u, 0.0)
