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

from dpcvx.certification.ball import (
    AT_W,
    FAR,
    KINK,
    REACH,
    LeaveOut,
    Pieces1D,
    envelope,
    in_chunks,
    model_at,
    rows_of,
    settle_slopes,
)
from dpcvx.modeling.domains import row_norms
from dpcvx.modeling.smooth import gram

__all__ = ["BoxRegion", "at_bounds", "balanced_duals", "box_extension"]

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


def at_bounds(w: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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


def _slope_sum(line, u, w, lo, hi, C, mu) -> np.ndarray:
    """``F(mu) = h'(t(mu)) + C mu / D(mu)`` per row, nondecreasing in ``mu`` (its sign says
    on which side of the copy ``mu`` lies)."""
    _, t, D, _ = _path(u, w, lo, hi, mu)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.nan_to_num(line.slope(t)) + C * np.where(D > 0, mu / D, 0.0)


def _narrowed(line, u, w, lo, hi, C, left, right) -> tuple[np.ndarray, np.ndarray]:
    """The bracket ``[left, right]`` of the copy's ``mu`` per row (``F(left) <= 0 < F(right)``,
    one end at 0 on entry) narrowed for a loss of pieces, each new end a point where
    :func:`_slope_sum` was evaluated and has the sign of the end it replaces, so the bracket
    still holds the copy whatever the rounding.

    Between the points where a coordinate reaches its bound the path is one piece: ``t`` is
    affine in ``mu``, ``D^2 = a mu^2 + c``, and ``F`` is ``h'`` (constant between the kinks of
    ``h``) plus ``C mu / D``. So a binary search over those points (sorted per row) leaves one
    piece, whose roots are in closed form: ``mu = -s sqrt(c / (C^2 - s^2 a))`` for a slope ``s``
    of ``h`` at either end, and the ``mu`` where ``t`` meets a kink of ``h``. Each root is
    evaluated a rounding either side (:data:`_NUDGES`). The bisection alone took about 80
    steps a row (a range of up to ``1e8`` times the box, then the last bits), each a pass
    over the rows."""
    k, d = u.shape
    left, right = left.copy(), right.copy()
    sign = np.where(right > 0, 1.0, -1.0)  # the side of 0 the copy lies on
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        toward = np.where(sign[:, None] * u > 0, hi[None, :], lo[None, :])
        reach = (toward - w[None, :]) / u  # where a coordinate reaches its bound
    inside = np.isfinite(reach) & (reach > left[:, None]) & (reach < right[:, None])
    x = np.sort(np.where(inside, sign[:, None] * reach, np.inf), axis=1)  # |mu|, ascending
    low, high = np.zeros(k, int), inside.sum(axis=1)

    def judge(mu: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Evaluate F at ``mu`` for the rows ``idx`` and move their ends; True where F > 0."""
        pos = _slope_sum(line.take(idx), u[idx], w, lo, hi, C, mu) > 0
        right[idx] = np.where(pos, np.minimum(right[idx], mu), right[idx])
        left[idx] = np.where(pos, left[idx], np.maximum(left[idx], mu))
        return pos

    # the first breakpoint past the copy (in |mu|): F > 0 there on the right of 0, F <= 0 on
    # the left (F is nondecreasing in mu)
    while True:
        idx = np.flatnonzero(low < high)
        if not idx.size:
            break
        mid = (low[idx] + high[idx]) // 2
        past = judge(sign[idx] * x[idx, mid], idx) == (sign[idx] > 0)
        high[idx] = np.where(past, mid, high[idx])
        low[idx] = np.where(past, low[idx], mid + 1)
    # the piece of the path between the ends: its free coordinates, a and c
    centre = 0.5 * (left + right)
    raw = w[None, :] + centre[:, None] * u
    free = (raw >= lo[None, :]) & (raw <= hi[None, :])
    with np.errstate(under="ignore"):
        a = np.sum(np.where(free, u * u, 0.0), axis=1)
    c = np.sum(np.where(free, 0.0, (toward - w[None, :]) ** 2), axis=1)
    t_mid = np.einsum("kd,kd->k", u, np.clip(raw, lo[None, :], hi[None, :]))  # as _path
    candidates = []
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for end in (left, right):
            s = line.slope(t_mid + (end - centre) * a)
            den = C * C - s * s * a
            candidates.append(np.where((den > 0) & (c > 0), -s * np.sqrt(c / den), np.nan))
        for kink in line.kinks():
            candidates.append(np.where(a > 0, centre + (kink - t_mid) / a, np.nan))
        # a root that is not finite (parallel pieces cross at infinity; a tiny a overflows)
        # is no candidate
        candidates = [np.where(np.isfinite(root), root, np.nan) for root in candidates]
    # each root a rounding either side, then wider where both sides had one sign (a root
    # computed from t's rounding, over a slope a that moves t little); only the rows whose
    # bracket still holds the point are evaluated
    for nudge in _NUDGES:
        for root in candidates:
            for side in (-nudge, nudge):
                mu = root + side * _EPS * np.abs(root)
                idx = np.flatnonzero((mu > left) & (mu < right))
                if idx.size:
                    judge(mu[idx], idx)
    return left, right


#: the distances, in roundings of the root, at which :func:`_narrowed` evaluates either side
#: of a closed-form root
_NUDGES = (2.0, 2.0**6, 2.0**12, 2.0**18, 2.0**24)


def box_extension(
    line,
    u: np.ndarray,
    w: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    C: float,
    n: float | np.ndarray,
    leave_out: LeaveOut | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Per example (rows of the unit directions ``u``, ``h`` given by ``line``, a
    :class:`~dpcvx.certification.ball.Pieces1D` or
    :class:`~dpcvx.certification.ball.Smooth1D`), the extension
    ``min_{lo <= y <= hi} h(u^T y) + C ||w - y||`` (see the module docstring); ``w`` lies in
    the box. Returns ``t``, the copies, the duals ``g = C (w - y) / ||w - y||``, the slopes
    ``theta`` of ``h`` at ``t`` that make ``g - theta u`` normal to the box at ``y`` (in
    ``h``'s subdifferential) and the model ``(Q, q)`` of
    :class:`~dpcvx.certification.ball.BallCopies` (``n`` examples in the mean, or per row) of
    the examples that ``leave_out`` (given the copies) does not leave out; all of them
    without it."""
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

    # the copy at w: the derivative of h + C D changes sign across mu = 0, where it is
    # h' +- C / |u_F| with F the coordinates free to move that way (not at a bound it pushes)
    top, bottom = at_bounds(w, lo, hi)
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
    if active.size and isinstance(line, Pieces1D):
        # the bracket narrowed first to one piece of the path, then onto its closed-form
        # roots (the bisection below then ends within a few steps)
        la, ra = _narrowed(line.take(active), u[active], w, lo, hi, C, left[active], right[active])
        left[active], right[active] = la, ra
    moving = None  # the active rows' directions and lines, until one of them settles
    for _ in range(_STEPS):
        if active.size == 0:
            break
        if moving is None:
            moving = u[active], line.take(active)
        la, ra = left[active], right[active]
        mid = 0.5 * (la + ra)
        pos = _slope_sum(moving[1], moving[0], w, lo, hi, C, mid) > 0
        right[active] = np.where(pos, mid, ra)
        left[active] = np.where(pos, la, mid)
        width = right[active] - left[active]
        done = (width <= 4 * _EPS * np.maximum(np.abs(left[active]), np.abs(right[active]))) | (
            (mid == la) | (mid == ra)
        )
        if done.any():
            active, moving = active[~done], None
    # the better end of the bracket (a jump of h' sits between them), or the copy at w
    mu = np.where(at_w, 0.0, left)
    _, t_l, D_l, _ = _path(u, w, lo, hi, left)
    _, t_r, D_r, _ = _path(u, w, lo, hi, right)
    v_l = np.nan_to_num(line.value(t_l), nan=np.inf) + C * D_l
    v_r = np.nan_to_num(line.value(t_r), nan=np.inf) + C * D_r
    mu = np.where(~at_w & (v_r < v_l), right, mu)
    Y, t, D, diff = _path(u, w, lo, hi, mu)
    # a copy within AT_W of W's size of w that sits at a kink of h (to KINK) is w itself:
    # w is at that kink (to rounding), where the slope of h is any in the subdifferential,
    # not the one that a move of a few 1e-13 gives its dual (C along the move). A copy that
    # moves that little off a kink keeps its move: its direction is exact (-mu u on the
    # free coordinates), and its dual is the extension's own
    near = D <= AT_W * (1.0 + scale + float(np.abs(w).max(initial=0.0)))
    if near.any() and isinstance(line, Pieces1D):
        rows = np.flatnonzero(near & ~at_w)
        lo_k, hi_k = line.take(rows).subdifferential(t[rows], KINK)
        at_w[rows[hi_k > lo_k]] = True
    mu = np.where(at_w, 0.0, mu)
    Y[at_w] = w
    diff[at_w] = 0.0
    t = np.where(at_w, tau, t)
    D = np.where(at_w, 0.0, D)
    normal = diff * np.where(D > 0, 1.0 / np.where(D > 0, D, 1.0), 0.0)[:, None]
    g = C * normal
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        theta = np.where(D > 0, -C * mu / np.where(D > 0, D, 1.0), 0.0)
    theta, s_lo, s_hi = settle_slopes(line, t, theta, g, at_w, u, w, BoxRegion(lo, hi), C)
    kept = np.ones(k, bool) if leave_out is None else ~leave_out(Y)
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
    cap = np.where(kept & (D > 0) & (room > 0), C / np.where(room > 0, room, 1.0), 0.0) / n
    Q = np.diag(np.sum(cap[:, None] * clipped, axis=0))
    unit = uf * np.where(nf > 0, 1.0 / np.where(nf > 0, nf, 1.0), 0.0)[:, None]
    Q += gram(unit, cap)
    Q -= gram(normal, cap)
    # a copy at w stays there as w moves: the extension is h(u^T w), of curvature h'' u u^T
    bend = np.where(kept & at_w, np.nan_to_num(line.curvature(t)), 0.0) / n
    if bend.any():
        Q += gram(u, bend)
    # where no kink of h holds t, t follows w: less C^2 (d_t grad_w D)(d_t grad_w D)^T /
    # (h'' + C d_tt D) (an envelope), with d_tt D = |w_C - y_C|^2 / (|u_F|^2 D^3)
    held = s_hi > s_lo
    follow = kept & ~at_w & ~held & (D > _FLOOR * scale) & (nf > 1e-8)
    if follow.any():
        f = np.flatnonzero(follow)
        Df, nff, muf = D[f], nf[f], mu[f]
        rest = np.sum((diff[f] * clipped[f]) ** 2, axis=1)
        with np.errstate(over="ignore", under="ignore"):
            Dtt = rest / (nff**2 * Df**3)
            cross = -uf[f] / (nff**2 * Df)[:, None] - diff[f] * (muf / Df**3)[:, None]
        ok = np.isfinite(Dtt) & np.all(np.isfinite(cross), axis=1)
        f, Dtt, cross = f[ok], Dtt[ok], cross[ok]
        Q = envelope(Q, cross, np.nan_to_num(line.curvature(t))[f], Dtt, C, rows_of(n, f))
    return t, Y, g, theta, model_at(Q, g, w, n, kept)


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

    def onto_boundary(self, w: np.ndarray, band: float) -> np.ndarray:
        """``w`` with each coordinate within ``band`` of a bound put on it, but for those
        :func:`at_bounds` already takes as at a bound (within rounding) and those whose width
        makes ``band`` less than :data:`~dpcvx.certification.ball.FAR` rounding bands or
        more than :data:`~dpcvx.certification.ball.REACH` of the width; the others as they
        are."""
        w = np.asarray(w, float)
        below, above = w - self.lo, self.hi - w
        top, bottom = at_bounds(w, self.lo, self.hi)
        width = self.hi - self.lo
        free = ~(top | bottom) & (FAR * _AT_BOUND * width <= band) & (band <= REACH * width)
        low = free & (below <= band)
        high = free & (above <= band) & ~low  # (not both: the band is under the width)
        return np.where(low, self.lo, np.where(high, self.hi, w))

    def extension(
        self, line, u: np.ndarray, w: np.ndarray, C: float, n: float | np.ndarray, leave_out=None
    ):
        """:func:`box_extension` in this box, over row chunks (:func:`in_chunks`)."""
        return in_chunks(box_extension, line, u, w, (self.lo, self.hi), C, n, leave_out)

    def cancelled(self, u: np.ndarray, w: np.ndarray, slope: np.ndarray) -> np.ndarray:
        """Per row, the part of ``slope_i u_i`` that the box's normal cone at ``w`` can
        cancel (:meth:`cancellable` for the row's sign, times its slope), in one pass: the
        entries of ``slope_i u_i`` that push out of the box at a coordinate at a bound."""
        top, bottom = at_bounds(np.asarray(w, float), self.lo, self.hi)
        base = slope[:, None] * u
        return np.where((top[None, :] & (base < 0)) | (bottom[None, :] & (base > 0)), base, 0.0)

    def cancellable(self, u: np.ndarray, w: np.ndarray, positive: bool) -> np.ndarray:
        """Per row of ``u``, the part of ``u`` that the box's normal cone at ``w`` can cancel
        from ``theta u`` for slopes ``theta`` of that sign: the coordinates at their upper
        bound where ``theta u_j < 0`` and at their lower bound where ``theta u_j > 0``."""
        top, bottom = at_bounds(np.asarray(w, float), self.lo, self.hi)
        down, up = (u < 0, u > 0) if positive else (u > 0, u < 0)
        return np.where((top[None, :] & down) | (bottom[None, :] & up), u, 0.0)


def balanced_duals(
    s: np.ndarray,
    given: np.ndarray,
    fixed: np.ndarray,
    w: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    C: float,
    n: int,
    memo: BalanceMemo | None = None,
    weights: np.ndarray | None = None,
) -> np.ndarray | None:
    """Duals ``g_i = s_i + v_i`` of copies at ``w`` on the box's boundary, ``v_i`` in the box's
    normal cone at ``w`` and ``||g_i|| <= C``, chosen jointly so that the mean
    ``fixed + sum_i g_i / n`` lies in minus that cone (the outer problem's optimality at
    ``w``); rows ``s`` (the loss's slopes at the copies, each longer than ``C``), ``fixed`` the
    rest of the gradient (the other examples' duals over ``n`` and the regularizer's). A row
    that cannot fit in the C-ball whatever it cancels keeps its ``given`` dual. None when no
    row is left to balance, or the balance (:func:`_balance`) fails.

    Each such example must cancel part of its slope against the bounds at ``w`` to fit in the
    C-ball; :func:`~dpcvx.certification.ball.dual_at_w` takes the least uniform share on
    every cancellable coordinate, one example at a time. At a corner of the box, where several
    coordinates are at their bounds, those shares can leave the mean pushing out of the box on
    one coordinate while another has room: the certificate then charges that push to the
    regularizer although a dual for every example fits. Per example and coordinate ``j`` at its
    bound (``sigma_j`` = +1 at the upper bound, -1 at the lower), only the magnitude
    ``r_ij = |g_ij| <= |s_ij|`` of a cancellable entry (``sigma_j s_ij < 0``) is free; it
    needs ``r`` with ``||g_i|| <= C`` and ``sum_i r_ij / n >= c_j``, the push the other terms
    leave on ``j`` (:func:`_balance`, with ``memo``'s last weights where given). The
    certificate judges the duals as any other.

    ``weights`` (per row of ``s``): the mean is ``fixed + sum_i weights_i g_i`` instead (a
    tilted mean's). The balance is the same for ``r'_i = n weights_i r_i``, whose caps
    scale alike; a row of weight zero keeps its ``given`` dual."""
    top, bottom = at_bounds(np.asarray(w, float), lo, hi)
    active = np.flatnonzero(top | bottom)
    if not active.size or not s.size:
        return None
    sigma = np.where(top[active], 1.0, -1.0)
    S = s[:, active] * sigma[None, :]  # sigma_j s_ij: cancellable where negative
    canc = S < 0
    a = np.where(canc, -S, 0.0)
    fixed_part = np.einsum("kd,kd->k", s, s) - np.einsum("km,km->k", a, a)
    room = C * C * (1 - 64 * _EPS) - fixed_part
    fits = np.isfinite(room) & (room > 0)  # else the copy cannot sit at w: it keeps its dual
    if weights is None:
        c = sigma * (fixed[active] + given[~fits][:, active].sum(axis=0) / n)
        c += np.where(canc, 0.0, S)[fits].sum(axis=0) / n
    else:
        share = np.asarray(weights, float)[:, None]
        scale = n * share[:, 0]
        fits &= scale > 0
        c = sigma * (fixed[active] + (share * given)[~fits][:, active].sum(axis=0))
        c += (share * np.where(canc, 0.0, S))[fits].sum(axis=0)
        scale = scale[fits]
    a, room, canc = a[fits], room[fits], canc[fits]
    k, m = a.shape
    if not k:
        return None
    if weights is None:
        R = _balance(a, np.sqrt(room), c, n, memo)
    else:
        R = _balance(a * scale[:, None], np.sqrt(room) * scale, c, n, memo)
        R = None if R is None else R / scale[:, None]
    if R is None:
        return None
    # rows the solver left a rounding outside the C-ball: shrink their cancellable part
    kept = fixed_part[fits]
    norms2 = kept + np.einsum("km,km->k", R, R)
    over = norms2 > C * C * (1 - 32 * _EPS)
    if np.any(over):
        scale = np.sqrt(np.maximum(C * C * (1 - 32 * _EPS) - kept[over], 0.0))
        scale /= np.maximum(np.sqrt(np.einsum("km,km->k", R[over], R[over])), 1e-300)
        R[over] *= np.minimum(scale, 1.0)[:, None]
    g = np.array(given, float)
    g[fits] = s[fits]
    g[np.ix_(np.flatnonzero(fits), active)] = np.where(
        canc, -R * sigma[None, :], s[fits][:, active]
    )
    return g


def _fill(a: np.ndarray, radius: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """Per row, the point of ``{0 <= r <= a_i, ||r|| <= radius_i}`` farthest along
    ``omega >= 0`` (every entry positive): ``r_j = min(a_ij, tau_i omega_j)`` with ``tau_i`` the
    level where the norm reaches ``radius_i`` (``r = a_i`` where ``a_i`` fits)."""
    k, m = a.shape
    ratio = a / omega[None, :]  # where each entry saturates
    order = np.argsort(ratio, axis=1)
    rs = np.take_along_axis(ratio, order, axis=1)
    a2 = np.take_along_axis(a * a, order, axis=1)
    w2 = (omega * omega)[order]
    below = np.concatenate([np.zeros((k, 1)), np.cumsum(a2, axis=1)[:, :-1]], axis=1)
    above = np.cumsum(w2[:, ::-1], axis=1)[:, ::-1]  # sum of omega^2 from p on
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = np.sqrt(np.maximum(radius[:, None] ** 2 - below, 0.0) / above)
    lower = np.concatenate([np.zeros((k, 1)), rs[:, :-1]], axis=1)
    valid = (tau >= lower) & (tau <= rs)
    # the first p whose level falls in its interval; none: every entry saturates (a_i fits)
    p = np.argmax(valid, axis=1)
    level = np.where(valid.any(axis=1), tau[np.arange(k), p], np.inf)
    return np.minimum(a, level[:, None] * omega[None, :])


class BalanceMemo:
    """The dual weights of the last :func:`_balance` that ran its dual, with the rows and the
    needs they were found for: the next balance on the same rows (entry for entry) whose
    needs are within :data:`MEMO_MOVE` of those (relative to their largest) starts its dual
    there. The rounds judge many points like that: a face step moves only the coordinates
    off the bounds, where a piecewise-linear loss's slopes at the copies at ``w`` stay, and
    the other terms' push ``c`` moves a little (in a hinge release in a box at n = 1e5, four
    balances in a row on the same 32,710 rows, ``c`` within 1.4e-6: their duals took 38
    evaluations each from the uniform weights and take 2 from the last). Needs that moved
    further can bind on a coordinate whose weight vanished there, which L-BFGS-B on the
    weights' logarithms does not bring back (in a random case, a shortfall of 0.041 from the
    last weights against 0.035 from the uniform ones): those start afresh."""

    def __init__(self) -> None:
        self.rows: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.z: np.ndarray | None = None
        self.short = False  # the dual proved that no allocation meets every need

    def start(self, a: np.ndarray, radius: np.ndarray, c: np.ndarray) -> np.ndarray | None:
        """The last weights if they were found for these rows and nearly these needs, else
        None."""
        if self.rows is None or self.z is None:
            return None
        ka, kr, kc = self.rows
        same = ka.shape == a.shape and kr.shape == radius.shape and kc.shape == c.shape
        if not (same and np.array_equal(ka, a) and np.array_equal(kr, radius)):
            return None
        near = float(np.max(np.abs(c - kc), initial=0.0))
        return self.z if near <= MEMO_MOVE * float(np.max(np.abs(kc), initial=0.0)) else None

    def keep(
        self, a: np.ndarray, radius: np.ndarray, c: np.ndarray, z: np.ndarray, short: bool
    ) -> None:
        self.rows, self.z, self.short = (a.copy(), radius.copy(), c.copy()), z.copy(), short


#: :class:`BalanceMemo` starts a dual from the last weights for needs within this fraction
#: of the largest of the last needs
MEMO_MOVE = 1e-3


def _balance(
    a: np.ndarray, radius: np.ndarray, c: np.ndarray, n: int, memo: BalanceMemo | None = None
) -> np.ndarray | None:
    """``r`` with ``0 <= r_i <= a_i``, ``||r_i|| <= radius_i`` and ``sum_i r_i / n >= c`` where
    one exists (else the one with the least shortfall found), or None.

    The coupling has one constraint per coordinate at a bound, so its dual is small: for
    weights ``omega`` on the simplex, each row's best response is :func:`_fill`, and
    ``psi(omega) = sum_i max_r <omega, r_i> / n - <omega, c>`` is convex with gradient
    ``sum_i r_i(omega) / n - c``. Its minimum over the simplex is the largest common slack
    ``t`` of ``sum_i r_i / n >= c + t``, attained by the best responses at the minimizer.

    First a few Newton steps on ``psi`` plus an entropy (:func:`_entropic`), whose best
    responses meet every need where the needs leave room (more than about ``eps ln m`` on
    every coordinate) and the steps get there within :data:`ENTROPIC_FILLS` responses: any
    allocation that meets every need serves the certificate as well as any other. Where
    they do not, the minimizer of ``psi`` by L-BFGS-B on ``omega = softmax(z)``, from
    ``memo``'s last weights where they were found for the same rows and nearly the same
    needs (:class:`BalanceMemo`), else from the Newton steps' last (15 evaluations instead
    of 38 from the uniform weights in a hinge case at n = 1e5), then price steps
    (:func:`_priced`) where its value leaves room. Where that last dual proved a shortfall,
    the Newton steps are skipped. Where no allocation meets every need, the shortfall found
    is not always the least one: a coordinate whose weight vanishes at the minimizer gets
    nearly nothing from the responses."""
    from scipy.optimize import minimize

    m = a.shape[1]
    # a row whose entries fit in its ball gives them all, whatever the weights
    tight = np.einsum("km,km->k", a, a) > radius * radius
    at, rt = a[tight], radius[tight]
    given = a[~tight].sum(axis=0) / n

    def responses(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        e = np.exp(z - np.max(z))
        omega = e / e.sum()
        return omega, _fill(at, rt, np.maximum(omega, 1e-12))

    def objective(z: np.ndarray) -> tuple[float, np.ndarray]:
        omega, r = responses(z)
        grad = given + r.sum(axis=0) / n - c
        value = float(omega @ grad)
        return value, omega * (grad - value)  # the softmax's chain rule

    start = None if memo is None else memo.start(a, radius, c)
    try:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            met = None
            if start is None or not memo.short:  # type: ignore[union-attr]
                met, weights = _entropic(at, rt, given, c, n)
                if start is None and np.all(np.isfinite(weights)):
                    start = np.log(np.maximum(weights, 1e-12))  # the responses' own floor
            if met is None:
                out = minimize(
                    objective,
                    np.zeros(m) if start is None else start,
                    jac=True,
                    method="L-BFGS-B",
                    options={"ftol": 1e-15, "gtol": 1e-14, "maxiter": 500},
                )
                if memo is not None:
                    memo.keep(a, radius, c, out.x, out.fun < 0)
                # the dual's value at any weights is at least the largest common slack:
                # where it is negative no allocation meets every need, and the weights stay
                z = _priced(out.x, responses, given, c, n) if out.fun >= 0 else out.x
                met = responses(z)[1]
            r = np.array(a, float, copy=True)
            r[tight] = met
    except (ValueError, ArithmeticError, np.linalg.LinAlgError):
        return None
    return r if np.all(np.isfinite(r)) else None


def _dual_hessian(a: np.ndarray, r: np.ndarray, omega: np.ndarray, n: int) -> np.ndarray:
    """The Hessian of the balance's dual ``psi`` at the positive weights ``omega`` whose best
    responses (:func:`_fill`) are ``r``: the Jacobian of ``sum_i r_i(omega) / n``. A row's
    response is ``min(a_i, tau_i omega)``, with ``r_F = tau_i omega_F`` on the entries ``F``
    below their cap and ``tau_i = ||r_F|| / ||omega_F||`` (the rest of the ball the capped
    entries leave), so its Jacobian is ``tau_i (I_F - r_F r_F^T / ||r_F||^2)``; a row that
    fits in its ball (every entry capped) adds nothing."""
    free = r < a
    rf = np.where(free, r, 0.0)
    norm2 = np.einsum("km,km->k", rf, rf)
    level = np.sqrt(norm2 / np.maximum(free @ (omega * omega), 1e-300))
    weight = np.where(norm2 > 0, level / np.where(norm2 > 0, norm2, 1.0), 0.0)
    return (np.diag(free.T.astype(float) @ level) - (rf * weight[:, None]).T @ rf) / n


#: the most best responses :func:`_entropic` evaluates
ENTROPIC_FILLS = 8
#: the entropy's weight in :func:`_entropic`, relative to the largest need in magnitude
ENTROPY = 1e-3


def _entropic(
    a: np.ndarray, radius: np.ndarray, given: np.ndarray, c: np.ndarray, n: int
) -> tuple[np.ndarray | None, np.ndarray]:
    """Best responses (:func:`_fill`, rows ``a`` and ``radius`` that do not fit) that meet
    every need, ``given + sum_i r_i / n >= c``, found by Newton's steps on the balance's dual
    plus an entropy, ``psi(omega) + eps sum_j omega_j ln omega_j`` on the simplex, from the
    uniform weights, and the last weights; None for the responses when
    :data:`ENTROPIC_FILLS` of them did not, or as soon as ``psi`` is negative at the weights
    (then no allocation meets every need).

    At that objective's minimizer the slack of coordinate ``j`` is ``nu - eps ln omega_j``
    (``nu`` its multiplier): a coordinate whose weight is small gets more than the others,
    never nothing, and every slack is at least the largest common slack less
    ``eps ln m``. So where the needs leave room (the dual's own minimizer leaves the
    coordinates that do not bind with nothing, :func:`_priced`), a few steps meet them all.
    The Hessian of ``psi`` is :func:`_dual_hessian`. Each step ``d`` is taken in the
    weights' logarithms, ``omega_j exp(alpha d_j / omega_j)`` normalized, with
    ``alpha d_j / omega_j`` clipped to ``[-50, 50]`` (the same direction to first order, and
    the weights stay positive: the coordinates with room go to small weights in a few
    steps, where steps kept inside the simplex took tens), ``alpha`` halved until the
    objective falls by a quarter of what the step's decrement promises. A step that
    promises no decrease (or NaN) also ends the steps, with None."""
    m = a.shape[1]
    eps = ENTROPY * (float(np.max(np.abs(c))) + 1e-300)
    omega = np.full(m, 1.0 / m)
    fills = 1
    r = _fill(a, radius, omega)
    slack = given + r.sum(axis=0) / n - c

    def objective(om: np.ndarray, sl: np.ndarray) -> float:
        return float(om @ sl) + eps * float(om @ np.log(om))

    while float(np.min(slack)) < 0:
        if fills >= ENTROPIC_FILLS or float(omega @ slack) < 0:  # the latter: no allocation can
            return None, omega
        H = _dual_hessian(a, r, np.maximum(omega, 1e-12), n) + np.diag(eps / omega)
        grad = slack + eps * (np.log(omega) + 1.0)
        solved = np.linalg.solve(H, np.column_stack([grad, np.ones(m)]))
        step = -(solved[:, 0] - solved[:, 1] * solved[:, 0].sum() / solved[:, 1].sum())
        decrease = float(-grad @ step)
        if not decrease > 0:
            return None, omega
        alpha = 1.0
        before = objective(omega, slack)
        while True:
            trial = omega * np.exp(np.clip(alpha * step / omega, -50.0, 50.0))
            trial = np.maximum(trial / trial.sum(), 1e-300)
            r = _fill(a, radius, np.maximum(trial, 1e-12))
            slack = given + r.sum(axis=0) / n - c
            fills += 1
            if objective(trial, slack) <= before - 0.25 * alpha * decrease:
                break
            if float(np.min(slack)) >= 0:
                return r, trial
            if fills >= ENTROPIC_FILLS or float(trial @ slack) < 0:
                return None, trial
            alpha /= 2
        omega = trial
    return r, omega


#: the most price updates of :func:`_priced`
PRICE_STEPS = 300
#: :func:`_priced` stops after this many updates that do not improve the worst shortfall
PRICE_STALL = 30


def _priced(z: np.ndarray, responses, given: np.ndarray, c: np.ndarray, n: int) -> np.ndarray:
    """Log-weights whose best responses meet ``sum_i r_i / n >= c`` on every coordinate,
    from the dual's minimizer ``z``. The dual's weights sit on the coordinates that bind;
    on the others they vanish, and so do the best responses there, whatever those
    coordinates need (the dual's minimizer gives the common slack, not a point that has
    it). Each step raises the weight of every coordinate short of its need in proportion to
    the shortfall (the responses are substitutes: a coordinate's share grows with its own
    weight and shrinks with the others'); up to :data:`PRICE_STEPS` steps, the best point
    kept (the least worst shortfall); they stop after :data:`PRICE_STALL` steps that do not
    improve it."""
    scale = float(np.max(np.abs(c))) + 1e-300
    z = np.maximum(z - np.max(z), -700.0)
    best, best_short, stalled = z, -np.inf, 0
    for _ in range(PRICE_STEPS):
        _, r = responses(z)
        slack = given + r.sum(axis=0) / n - c
        worst = float(np.min(slack))
        if worst >= 0:
            return z
        if worst > best_short:
            best, best_short, stalled = z, worst, 0
        else:
            stalled += 1
            if stalled >= PRICE_STALL:
                break
        z = z + 50.0 * np.maximum(-slack, 0.0) / scale
        z = np.maximum(z - np.max(z), -700.0)
    return best
