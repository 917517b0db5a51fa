"""The Lipschitz extension of a one-direction loss with its copies kept in an l2 ball.

For a loss ``h_i(u_i^T y)`` of one direction per example (a hinge, an absolute value, a
pinball or epsilon-insensitive loss; a logistic, squared, Huber or exponential loss of one
affine argument), the extension of paper 000, eq. (5) over the ball ``W = B(c, R)``,

    f_C(w) = min_{y in W} h(u^T y) + C ||w - y||,

is a one-dimensional problem per example. For a fixed ``t = u^T y`` the copy ranges over the
slice of the ball, a ``(d - 1)``-ball of radius ``r(t) = sqrt(R^2 - (t - u^T c)^2)``; the
nearest point of it to ``w`` is at distance ``D(t) = hypot(u^T w - t, (p - r(t))_+)`` with
``p`` the distance of ``w - c`` from the line through ``c`` along ``u``. ``h + C D`` is convex
in ``t`` (``D`` is the distance to a convex set that moves affinely), so a bisection on its
derivative, Newton's steps, and the best of those and of the kinks give ``t``; the copy is
the nearest point of its slice.

The solve paths use it where the extension over ``R^d`` (whose copies move along ``u_i``
only, :class:`~dpcvx.certification.arrowhead.ExtensionPieces` and
:class:`~dpcvx.modeling.smooth.SmoothExtension`) puts copies outside a small, active ball:
:func:`ball_extension` gives those examples' exact copies, the duals ``g_i`` of ``||w - y_i||``
and the slopes of ``h_i`` at the copies (what dpcvx's certificate needs to be tight there),
and a second-order model of their extensions at ``w`` for the next solve. Nothing here is
trusted: every output only guides the certificate, which evaluates the declared loss.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dpcvx.certification._rows import row_chunks
from dpcvx.modeling.domains import row_norms
from dpcvx.modeling.smooth import atom_derivative, gram

if TYPE_CHECKING:
    from dpcvx.certification.box import BoxRegion
    from dpcvx.modeling.smooth import SmoothExtension

__all__ = [
    "BallCopies",
    "BallRegion",
    "Pieces1D",
    "Smooth1D",
    "ball_extension",
    "dual_at_w",
    "into_c_ball",
    "settle_slopes",
    "smooth_copies_in",
]

_EPS = float(np.finfo(float).eps)
#: the model's curvature ``C / D`` is capped at ``C / (_FLOOR R)``: a copy this near ``w`` is
#: near the kink of its extension, where no quadratic model holds
_FLOOR = 1e-4
#: bisection steps (each halves the bracket, to 2^-12 of the ball's diameter), then at most
#: this many safeguarded Newton's steps (quadratic convergence where the objective is smooth,
#: bisection where it is not)
_BISECT = 12
_NEWTON = 60
#: a copy this near ``w`` (relative to W's size) is taken as ``w`` itself; the bound at ``w``
#: differs from the one at the copy by at most about ``(C + |h'|) AT_W`` per example
AT_W = 1e-9
#: a point ``w`` within this fraction of the radius inside the sphere is on it (the normal
#: cone of :meth:`BallRegion.cancellable`; a rounding band)
ON_SPHERE = 1e-12
#: :meth:`BallRegion.onto_boundary` (and the box's) moves nothing with a band less than this
#: many times the rounding band: the interior-point method then stops within a few rounding
#: bands of W's boundary, which the rounds were built for
FAR = 100.0
#: nor with a band more than this fraction of the radius (or of a box coordinate's width): the
#: method's tolerance cannot place a point in so small a domain
REACH = 1e-6
#: a copy at ``w`` whose loss is within this fraction of its scale of a kink keeps the
#: method's split of the slopes there (:meth:`ExtensionPieces.copies_in
#: <dpcvx.certification.arrowhead.ExtensionPieces.copies_in>`, ``exact_own``); in a box, a
#: copy within :data:`AT_W` of ``w`` at such a kink is ``w`` itself
KINK = 1e-8


@dataclass(frozen=True, slots=True)
class BallCopies:
    """The copies of an extension in a ball: the copies ``Y`` (rows ``y_i``), the
    certificate's multipliers, the duals ``g_i`` of the moved examples (NaN rows elsewhere:
    the certificate's default there), the moved examples ``rows`` and ``(Q, q)``:
    ``w^T Q w / 2 + q^T w`` is the second-order model at ``w`` (up to a constant) of their
    extensions' mean over all ``n`` examples; ``before`` the moved examples' slopes in the
    relaxed extension over ``R^d`` (rows, as ``slopes``); ``others`` the examples the last
    solve modelled that no longer move, with their extensions' exact slopes in ``slopes``
    (they are outside the model); ``own`` the examples the next solve gives pieces of their
    own (outside the model; see :meth:`ExtensionPieces.copies_in
    <dpcvx.certification.arrowhead.ExtensionPieces.copies_in>`)."""

    Y: np.ndarray
    thetas: list
    slopes: np.ndarray
    rows: np.ndarray
    quad: tuple[np.ndarray, np.ndarray]
    before: np.ndarray
    others: np.ndarray
    own: np.ndarray


@dataclass(frozen=True, slots=True)
class Pieces1D:
    """``h(t) = max_j (sigma_j t + beta_j)`` per row (``sigma``, ``beta``: ``(k, m)``)."""

    sigma: np.ndarray
    beta: np.ndarray

    def take(self, idx: np.ndarray | slice) -> Pieces1D:
        """The rows ``idx``."""
        return Pieces1D(self.sigma[idx], self.beta[idx])

    def _lines(self, t: np.ndarray):
        # each piece's value, a column at a time (a broadcast over the few pieces runs
        # numpy's inner loop over them: several times slower)
        for j in range(self.sigma.shape[1]):
            yield j, self.sigma[:, j] * t + self.beta[:, j]

    def value(self, t: np.ndarray) -> np.ndarray:
        top = None
        for _, v in self._lines(t):
            top = v if top is None else np.maximum(top, v, out=top)
        assert top is not None
        return top

    def slope(self, t: np.ndarray) -> np.ndarray:
        # the first piece of largest value, as numpy's argmax picks it
        lines = self._lines(t)
        _, top = next(lines)
        out = self.sigma[:, 0].copy()
        for j, v in lines:
            np.copyto(out, self.sigma[:, j], where=v > top)
            np.maximum(top, v, out=top)
        return out

    def curvature(self, t: np.ndarray) -> np.ndarray:
        return np.zeros_like(t)

    def kinks(self) -> list[np.ndarray]:
        """Every pair of pieces' crossing (where they are parallel: NaN if they coincide,
        +-inf if not)."""
        m = self.sigma.shape[1]
        out = []
        with np.errstate(divide="ignore", invalid="ignore"):
            for j in range(m):
                for i in range(j + 1, m):
                    out.append(
                        (self.beta[:, i] - self.beta[:, j]) / (self.sigma[:, j] - self.sigma[:, i])
                    )
        return out

    def subdifferential(self, t: np.ndarray, rel: float = 1e-12) -> tuple[np.ndarray, np.ndarray]:
        """The slopes of the pieces active at ``t`` (to ``rel`` times its scale; rounding by
        default): their least and largest."""
        # by columns (see _lines)
        m = self.sigma.shape[1]
        H = [v for _, v in self._lines(t)]
        top = H[0].copy()
        reach = np.abs(self.sigma[:, 0] * t)
        size = np.abs(self.beta[:, 0])
        for j in range(1, m):
            np.maximum(top, H[j], out=top)
            np.maximum(reach, np.abs(self.sigma[:, j] * t), out=reach)
            np.maximum(size, np.abs(self.beta[:, j]), out=size)
        floor = top - rel * (np.abs(top) + reach + size)
        lo = np.full(t.shape, np.inf)
        hi = np.full(t.shape, -np.inf)
        for j in range(m):
            active = H[j] >= floor
            np.copyto(lo, np.minimum(lo, self.sigma[:, j]), where=active)
            np.copyto(hi, np.maximum(hi, self.sigma[:, j]), where=active)
        return lo, hi


@dataclass(frozen=True, slots=True)
class Smooth1D:
    """``h(t) = weight psi(scale t + offset) + tilt t`` per row for a smooth scalar atom ``psi``
    (the block of :mod:`dpcvx.modeling.smooth` that names it, without knots)."""

    block: object
    weight: float
    scale: np.ndarray
    offset: np.ndarray
    #: per row, the slope of affine terms added to ``h`` (None: none)
    tilt: np.ndarray | None = None

    def take(self, idx: np.ndarray | slice) -> Smooth1D:
        """The rows ``idx``."""
        tilt = None if self.tilt is None else self.tilt[idx]
        return Smooth1D(self.block, self.weight, self.scale[idx], self.offset[idx], tilt)

    def _at(self, t: np.ndarray) -> np.ndarray:
        return self.scale * t + self.offset

    def value(self, t: np.ndarray) -> np.ndarray:
        h = self.weight * atom_derivative(self.block, self._at(t), 0)  # type: ignore[arg-type]
        return h if self.tilt is None else h + self.tilt * t

    def slope(self, t: np.ndarray) -> np.ndarray:
        d1 = atom_derivative(self.block, self._at(t), 1)  # type: ignore[arg-type]
        s = self.weight * self.scale * d1
        return s if self.tilt is None else s + self.tilt

    def curvature(self, t: np.ndarray) -> np.ndarray:
        d2 = atom_derivative(self.block, self._at(t), 2)  # type: ignore[arg-type]
        return self.weight * self.scale**2 * d2

    def kinks(self) -> list[np.ndarray]:
        return []

    def subdifferential(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = self.slope(t)
        return s, s


def ball_extension(
    line: Pieces1D | Smooth1D,
    u: np.ndarray,
    w: np.ndarray,
    c: np.ndarray,
    R: float,
    C: float,
    n: float | np.ndarray,
    leave_out: LeaveOut | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Per example (rows of the unit directions ``u``, ``h`` given by ``line``), the extension
    ``min_{||y - c|| <= R} h(u^T y) + C ||w - y||`` (see the module docstring). Returns ``t``,
    the copies, the duals ``g = C (w - y) / ||w - y||``, the slopes ``theta`` of ``h`` at ``t``
    that make ``g - theta u`` normal to the ball at ``y`` (in ``h``'s subdifferential) and the
    model ``(Q, q)`` of :class:`BallCopies` (``n`` examples in the mean, or per row: see
    :func:`rows_of`) of the examples that ``leave_out`` (given the copies) does not leave
    out; all of them without it."""
    k = u.shape[0]
    z = w - c
    tau = u @ w
    gam = u @ c
    v = z[None, :] - (u @ z)[:, None] * u  # the part of w - c across u
    p = row_norms(v)
    lo0, hi0 = gam - R, gam + R

    def slice_radius(t: np.ndarray) -> np.ndarray:
        return np.sqrt(np.maximum(R * R - (t - gam) ** 2, 0.0))

    def value(t: np.ndarray) -> np.ndarray:
        return line.value(t) + C * np.hypot(tau - t, np.maximum(p - slice_radius(t), 0.0))

    def derivative(
        t: np.ndarray, idx: np.ndarray | None = None, part: Pieces1D | Smooth1D | None = None
    ) -> np.ndarray:
        # of h + C D, on the rows idx (all by default; part: line's rows idx, if taken)
        tau_, gam_, p_ = (tau, gam, p) if idx is None else (tau[idx], gam[idx], p[idx])
        r = np.sqrt(np.maximum(R * R - (t - gam_) ** 2, 0.0))
        q = np.maximum(p_ - r, 0.0)
        D = np.hypot(tau_ - t, q)
        with np.errstate(divide="ignore", invalid="ignore"):
            dq = np.where(q > 0, (t - gam_) / r, 0.0)  # q' = -r'
            dD = np.where(D > 0, ((t - tau_) + q * dq) / D, np.sign(t - tau_))
        dD = np.nan_to_num(dD, nan=0.0, posinf=1e300, neginf=-1e300)
        if part is None:
            part = line if idx is None else line.take(idx)
        return np.nan_to_num(part.slope(t)) + C * dD

    def distance_curvature(t: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
        # D'' where the copy is on the sphere (q > 0; elsewhere D is linear in t)
        tau_, gam_, p_ = (tau, gam, p) if idx is None else (tau[idx], gam[idx], p[idx])
        r = np.sqrt(np.maximum(R * R - (t - gam_) ** 2, 0.0))
        q = p_ - r
        D = np.hypot(tau_ - t, np.maximum(q, 0.0))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            slope = (t - gam_) / r
            Dt = (q * slope + (t - tau_)) / D
            Dtt = (1.0 + slope**2 + q * R * R / r**3 - Dt**2) / D
        return np.where((q > 0) & (D > 0) & (r > 0), np.nan_to_num(Dtt, nan=0.0), 0.0)

    lo, hi = lo0.copy(), hi0.copy()
    # the derivative at the bracket's ends (unknown at the range's ends: no secant from there)
    f_lo, f_hi = np.full(k, -np.inf), np.full(k, np.inf)
    for _ in range(_BISECT):
        mid = 0.5 * (lo + hi)
        dm = derivative(mid)
        up = dm > 0
        hi, f_hi = np.where(up, mid, hi), np.where(up, dm, f_hi)
        lo, f_lo = np.where(up, lo, mid), np.where(up, f_lo, dm)
    # safeguarded Newton's steps (the objective is smooth inside one piece of h): each
    # derivative shrinks the bracket, and a step that would leave it bisects instead (near a
    # pole of the ball, where D'' blows up, Newton alone overshoots)
    t_n = 0.5 * (lo + hi)
    tiny = 4 * _EPS * (np.abs(t_n) + R)
    # a kink of h, or of D at u^T w (the copy at w), where the derivative changes sign is the
    # answer (Newton's steps would only creep up to it): those rows are done at once
    settled = np.zeros(k, bool)
    for kink in line.kinks() + [tau]:
        near = np.isfinite(kink) & ~settled
        near[near] &= (kink[near] > lo[near]) & (kink[near] < hi[near])
        if not near.any():
            continue
        kink = np.where(near, kink, t_n)
        step = 1e-12 * (np.abs(kink) + R)
        left, right = derivative(kink - step), derivative(kink + step)
        hit = near & (left <= 0) & (right >= 0)
        t_n = np.where(hit, kink, t_n)
        settled |= hit
    # so is an end of the range (a pole of the ball) the derivative does not turn back from
    for end, inward, sign in (
        (lo0, lo0 + 1e-12 * (np.abs(lo0) + R), 1.0),
        (hi0, hi0 - 1e-12 * (np.abs(hi0) + R), -1.0),
    ):
        near = (end == (lo if sign > 0 else hi)) & ~settled
        if near.any():
            hit = near & (sign * derivative(np.where(near, inward, t_n)) >= 0)
            t_n = np.where(hit, end, t_n)
            settled |= hit
    last = hi - lo  # the last step's length (a Newton step must at least halve it)
    side = np.zeros(k)  # which end the last step replaced (+1 the upper, -1 the lower)
    for _ in range(_NEWTON):
        act = np.flatnonzero(~settled)  # only the rows still moving
        if act.size == 0:
            break
        whole = act.size == k
        ta, la, ha = (t_n, lo, hi) if whole else (t_n[act], lo[act], hi[act])
        fla, fha, sa = (f_lo, f_hi, side) if whole else (f_lo[act], f_hi[act], side[act])
        part = line if whole else line.take(act)
        slope = derivative(ta, None if whole else act, part)
        up = slope > 0
        # Illinois: an end kept twice in a row has its derivative halved for the secant
        fla = np.where(up, np.where(sa > 0, 0.5 * fla, fla), slope)
        fha = np.where(up, slope, np.where(sa < 0, 0.5 * fha, fha))
        sa = np.where(up, 1.0, -1.0)
        ha = np.where(up, ta, ha)
        la = np.where(up, la, ta)
        second = np.nan_to_num(part.curvature(ta)) + C * distance_curvature(
            ta, None if whole else act
        )
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            step = np.nan_to_num(slope / second)
            trial = ta - step
            short = np.abs(step) <= 0.5 * last[act]
            # where Newton's step is refused (a jump of h'' or D'' between t and the root,
            # where it overshoots), the secant of the derivative across the bracket: it is
            # continuous, so this converges superlinearly where bisection took ~40 halvings
            secant = la - fla * (ha - la) / (fha - fla)
        # a Newton step onto an end of the bracket is taken (the derivative is within
        # rounding of zero there; a step back and forth between the ends is not short); a
        # secant step must fall strictly inside (from an end it could stall there)
        newton = (second > 0) & (trial >= la) & (trial <= ha) & short
        inside = (fla < 0) & (fha > 0) & (secant > la) & (secant < ha)
        t_new = np.where(newton, trial, np.where(inside, secant, 0.5 * (la + ha)))
        # a zero derivative marks a minimizer (the objective is convex): where the minimizers
        # form an interval, the bracket's end on it is the answer (bisection only creeps there)
        flat_lo, flat_hi = fla == 0, fha == 0
        t_new = np.where(flat_lo, la, np.where(flat_hi, ha, t_new))
        moved = np.abs(t_new - ta)
        last[act] = moved
        lo[act], hi[act], t_n[act] = la, ha, t_new
        f_lo[act], f_hi[act], side[act] = fla, fha, sa
        settled[act] = (ha - la <= tiny[act]) | (moved <= tiny[act]) | flat_lo | flat_hi
    # the kinks of h and of D (at u^T w, where the copy reaches w) are candidates too: at one
    # the derivative jumps, and the bracket only comes near it
    cands = [lo, hi, 0.5 * (lo + hi), t_n, np.clip(tau, lo0, hi0)]
    cands += [np.clip(np.nan_to_num(kink, nan=0.0), lo0, hi0) for kink in line.kinks()]
    T = np.stack(cands, axis=1)
    vals = np.stack([value(T[:, a]) for a in range(T.shape[1])], axis=1)
    vals = np.where(np.isnan(vals), np.inf, vals)
    t = T[np.arange(k), np.argmin(vals, axis=1)]
    # within rounding of the least value, Newton's point (the most precise position)
    top = vals.min(axis=1)
    t = np.where(vals[:, 3] <= top + 16 * _EPS * (1.0 + np.abs(top)), T[:, 3], t)
    # the copy: the nearest point of the slice at t
    r = slice_radius(t)
    on_sphere = p > r
    with np.errstate(divide="ignore", invalid="ignore"):
        shrink = np.where(on_sphere, r / np.where(p > 0, p, 1.0), 1.0)
    Y = c[None, :] + (t - gam)[:, None] * u + shrink[:, None] * v
    # a copy within AT_W of W's size of w is w itself: where the kink of D at u^T w holds
    # the copy but the probes beside it missed it, the steps only creep up to it, and the
    # direction of w - y from a leftover of a few 1e-12 is that leftover's, not the dual's
    at_w = row_norms(w[None, :] - Y) <= AT_W * (1.0 + R + float(np.abs(w).max()))
    Y[at_w] = w
    diff = w[None, :] - Y
    D = row_norms(diff)
    normal = diff * np.where(D > 0, 1.0 / np.where(D > 0, D, 1.0), 0.0)[:, None]
    g = C * normal
    # theta: g = theta u + kappa (y - c) / R on the sphere (kappa >= 0 at the optimum)
    gu = np.einsum("kd,kd->k", g, u)
    e = (Y - c) / R
    ue = (t - gam) / R
    ge = np.einsum("kd,kd->k", g, e)
    det = 1.0 - ue * ue
    with np.errstate(divide="ignore", invalid="ignore"):
        theta = np.where(on_sphere & (det > 1e-12), (gu - ue * ge) / det, gu)
    theta, s_lo, s_hi = settle_slopes(line, t, theta, g, at_w, u, w, BallRegion(c, R), C)
    kept = np.ones(k, bool) if leave_out is None else ~leave_out(Y)
    # the model: C dist(w, slice at t) per example, its gradient C normal and Hessian
    # (C / D) (I - J - normal normal^T) with J the Jacobian of the projection onto the slice
    a = np.where(kept & (D > 0), C / np.maximum(D, _FLOOR * R), 0.0) / n
    rho = np.where(on_sphere, shrink, 1.0)
    ev = v / np.where(p > 0, p, 1.0)[:, None]
    Q = float(np.sum(a * (1.0 - rho))) * np.eye(w.size)
    Q += gram(u, a * rho)
    Q += gram(ev, a * rho * on_sphere)
    Q -= gram(normal, a)
    # a copy at w stays there as w moves (inside the ball; on the sphere, along it): the
    # extension is h(u^T w) there, of curvature h'' u u^T
    bend = np.where(kept & at_w, np.nan_to_num(line.curvature(t)), 0.0) / n
    if bend.any():
        Q += gram(u, bend)
    # where no kink of h holds t, t follows w: the extension's Hessian is the model's less
    # C^2 (d_t grad_w D)(d_t grad_w D)^T / (h'' + C d_tt D) (an envelope)
    held = s_hi > s_lo
    free = kept & on_sphere & ~held & (D > _FLOOR * R) & (r > _FLOOR * R)
    if free.any():
        f = np.flatnonzero(free)
        Df, rf, tf = D[f], r[f], t[f]
        delta = tau[f] - tf
        q = p[f] - rf
        slope = (tf - gam[f]) / rf  # -r'(t)
        Dt = (q * slope - delta) / Df
        Dtt = (1.0 + slope**2 + q * R * R / rf**3 - Dt**2) / Df
        cross = (
            (-u[f] + slope[:, None] * ev[f])
            - (delta[:, None] * u[f] + q[:, None] * ev[f]) * (Dt / Df)[:, None]
        ) / Df[:, None]
        Q = envelope(Q, cross, np.nan_to_num(line.curvature(t))[f], Dtt, C, rows_of(n, f))
    return t, Y, g, theta, model_at(Q, g, w, n, kept)


#: ``leave_out(Y)``: which of the copies ``Y`` (rows) stay out of the model of
#: :func:`ball_extension` and :func:`~dpcvx.certification.box.box_extension`
LeaveOut = Callable[[np.ndarray], np.ndarray]


def in_chunks(
    solve,
    line: Pieces1D | Smooth1D,
    u: np.ndarray,
    w: np.ndarray,
    region,
    C,
    n,
    leave_out: Callable[[np.ndarray, slice], np.ndarray] | None = None,
):
    """``solve(line, u, w, *region, C, n)`` (:func:`ball_extension`,
    :func:`~dpcvx.certification.box.box_extension`) over contiguous chunks of the rows of
    ``u`` (:func:`~dpcvx.certification._rows.row_chunks`): every row's copy is its own
    one-dimensional problem, so the rows come out as in one call, and the chunks' models add
    (each is a sum over its rows). A chunk's arrays stay a few megabytes where one call on
    hundreds of thousands of rows made fresh arrays of tens of megabytes at every step (at
    n = 1e6 the rows took three times as long each). ``leave_out(Y, rows)`` says which of
    the copies ``Y`` of the rows ``rows`` (a slice of ``u``'s) the model leaves out."""

    def chunk(a: int, b: int) -> LeaveOut | None:
        return None if leave_out is None else (lambda Y: leave_out(Y, slice(a, b)))

    spans = list(row_chunks(u.shape[0], u.shape[1]))
    if len(spans) == 1:
        return solve(line, u, w, *region, C, n, chunk(0, u.shape[0]))
    parts = [
        solve(line.take(slice(a, b)), u[a:b], w, *region, C, rows_of(n, slice(a, b)), chunk(a, b))
        for a, b in spans
    ]
    out = tuple(np.concatenate([p[k] for p in parts]) for k in range(4))
    return (*out, tuple(sum(p[4][k] for p in parts) for k in range(2)))


def settle_slopes(
    line: Pieces1D | Smooth1D,
    t: np.ndarray,
    theta: np.ndarray,
    g: np.ndarray,
    at_w: np.ndarray,
    u: np.ndarray,
    w: np.ndarray,
    region: BallRegion | BoxRegion,
    C: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The slopes ``theta`` of ``h`` at ``t`` clipped into its subdifferential there
    ``[s_lo, s_hi]`` (returned too); for a copy at ``w`` the slope nearest zero, with its
    dual ``g`` (set in place) from :func:`dual_at_w` (zero normal part inside W, where the
    normal cone is 0)."""
    s_lo, s_hi = line.subdifferential(t)
    theta = np.clip(np.nan_to_num(theta), s_lo, s_hi)
    near = np.clip(0.0, s_lo, s_hi)
    theta = np.where(at_w, near, theta)
    aw = np.flatnonzero(at_w)
    if aw.size:
        g[aw] = dual_at_w(region, u[aw], w, near[aw], C)
    return theta, s_lo, s_hi


def dual_at_w(
    region: BallRegion | BoxRegion, u: np.ndarray, w: np.ndarray, slope: np.ndarray, C: float
) -> np.ndarray:
    """The duals ``g_i = slope_i u_i + v_i`` of copies at ``w``, ``v_i`` in W's normal cone
    there: the least share of what the cone can cancel (``region.cancellable``) that brings
    each into the C-ball (:func:`into_c_ball`)."""
    return into_c_ball(slope[:, None] * u, region.cancelled(u, w, slope), C)


def into_c_ball(base: np.ndarray, part: np.ndarray, C: float) -> np.ndarray:
    """Per row, ``base - s part`` with the least ``s`` in ``[0, 1]`` that brings it into the
    C-ball, or ``s = 1`` where none does: ``part`` is what W's normal cone can cancel of
    ``base`` (a slope's push against W's boundary at a copy at ``w``). Cancelling more than
    that least share pushes the rounds' next step off the boundary, and the one after back."""
    canc = np.einsum("kd,kd->k", part, part)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        room = C * C - (np.einsum("kd,kd->k", base, base) - canc)
        share = 1.0 - np.sqrt(np.maximum(room, 0.0) / canc)
    share = np.where(room >= 0, np.clip(np.nan_to_num(share), 0.0, 1.0), 1.0)
    return base - share[:, None] * part


def envelope(
    Q: np.ndarray,
    cross: np.ndarray,
    curv: np.ndarray,
    Dtt: np.ndarray,
    C: float,
    n: float | np.ndarray,
) -> np.ndarray:
    """``Q`` less the envelope terms of the examples whose copy's position ``t`` follows
    ``w``: ``C (d_t grad_w D)(d_t grad_w D)^T / (h'' / C + d_tt D)`` each (rows of ``cross``,
    ``h''`` in ``curv``), ``n`` examples in the mean (or per row, see :func:`rows_of`); none
    where that curvature is not positive."""
    denom = curv / C + Dtt
    keep = denom > 0
    return Q - (cross[keep] * (C / rows_of(n, keep) / denom[keep])[:, None]).T @ cross[keep]


def rows_of(n: float | np.ndarray, idx: np.ndarray | slice) -> float | np.ndarray:
    """The extensions' models count ``n`` examples in their mean; a tilted mean gives each
    row its own count instead (the reciprocal of its weight: an array, taken at ``idx``
    here)."""
    return n if np.ndim(n) == 0 else np.asarray(n)[idx]


def model_at(
    Q: np.ndarray,
    g: np.ndarray,
    w: np.ndarray,
    n: float | np.ndarray,
    kept: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The model ``(Q, q)`` of :class:`BallCopies` with Hessian ``Q`` (symmetrized) and
    gradient at ``w`` the sum of the duals ``g`` (of the rows ``kept``, a mask, if given) over
    ``n`` examples (or per row, see :func:`rows_of`)."""
    Q = 0.5 * (Q + Q.T)
    if np.ndim(n) == 0:
        total = np.sum(g if kept is None or kept.all() else g[kept], axis=0)
        return Q, total / n - Q @ w
    rows = slice(None) if kept is None else kept
    return Q, np.sum(g[rows] / np.asarray(n)[rows, None], axis=0) - Q @ w


def smooth_copies_in(
    relaxed: SmoothExtension,
    C: float,
    w: np.ndarray,
    region: BallRegion | BoxRegion,
    extra: np.ndarray | None = None,
    copies: np.ndarray | None = None,
    weights: np.ndarray | None = None,
) -> BallCopies | None:
    """:class:`BallCopies` for the smooth extension ``relaxed`` at ``C`` (one scalar atom per
    example, plus affine terms along it, if any) at ``w``: the examples whose copy over
    ``R^d`` leaves W (a ball or a box, ``region``), and those whose extension over ``R^d`` is
    unbounded, get their exact copy in it, the atom's derivative at that copy as the
    certificate's multiplier, and the dual ``g_i``. The examples ``extra`` (modelled in the
    last solve) that no longer move get their relaxed slopes, exact for them. None when every
    copy lies in W (the relaxed copies are then exact). ``copies``: ``relaxed.copies(w)``
    when the caller has them (not modified). ``weights`` (per example): the model's weights
    of the examples (a tilted mean's) instead of ``1/n`` each (see :func:`rows_of`)."""
    model = relaxed.model
    blk = relaxed.block
    n = model.n
    Y = relaxed.copies(w) if copies is None else copies
    norms = np.sqrt(relaxed.sq_norms)
    outside = region.outside(Y)
    leaves = (norms > 0) & outside
    if relaxed.unbounded is not None:  # their relaxed copies say nothing: always computed
        leaves |= relaxed.unbounded
    rows = np.flatnonzero(leaves)
    others = np.zeros(0, int) if extra is None else np.asarray(extra, int)
    others = others[~leaves[others]]
    if rows.size == 0:
        return None
    if copies is not None:
        Y = Y.copy()
    # the relaxed atom's derivative at w: the original's at the relaxed copies y_i
    relaxed_slope = atom_derivative(blk, blk.A @ w + blk.b, 1)
    plain = dataclasses.replace(blk, knots=None)
    if relaxed.tilt is None:
        u = blk.A[rows] / norms[rows, None]
        line = Smooth1D(plain, blk.weight, norms[rows], blk.b[rows])
    else:  # the affine terms' slope along u is part of each example's h
        u, scale, tilt = relaxed.lines(rows)
        line = Smooth1D(plain, blk.weight, scale, blk.b[rows], tilt)
    count: float | np.ndarray = n
    if weights is not None:
        with np.errstate(divide="ignore", over="ignore"):
            count = 1.0 / np.asarray(weights, float)[rows]
    t, Yr, g, theta, quad = region.extension(line, u, w, C, count)
    Y[rows] = Yr
    flat = relaxed_slope.copy()
    if relaxed.tilt is None:
        before = (blk.weight * norms[rows] * flat[rows])[:, None] * u
        flat[rows] = theta / (blk.weight * norms[rows])  # psi' at the copy
    else:
        before = (blk.weight * flat[rows])[:, None] * blk.A[rows] + relaxed.affine_rows(rows)
        with np.errstate(divide="ignore", invalid="ignore"):
            at_copy = (theta - tilt) / (blk.weight * scale)
        # where the atom's argument is constant, its derivative there
        flat[rows] = np.where(scale > 0, at_copy, atom_derivative(plain, blk.b[rows], 1))
    # the certificate's multipliers: the atom's derivative at each copy, where the term's
    # are its atom's (a squared hinge's term has one per piece of its maximum: None, and the
    # certificate takes the slope at each copy on the active piece itself); None for the
    # affine terms
    thetas: list = [None] * len(model.blocks)
    if blk.duals:
        thetas[relaxed.curved] = [flat.reshape((n,) + blk.shape)]
    slopes = np.full(Y.shape, np.nan)
    slopes[rows] = g
    slopes[others] = (blk.weight * relaxed_slope[others])[:, None] * blk.A[others]
    if relaxed.tilt is not None:
        slopes[others] += relaxed.affine_rows(others)
    return BallCopies(Y, thetas, slopes, rows, quad, before, others, np.zeros(0, int))


@dataclass(frozen=True)
class BallRegion:
    """The ball ``W = B(center, radius)`` the copies stay in, for the extension's rounds
    (:class:`~dpcvx.certification.box.BoxRegion` is the box's)."""

    center: np.ndarray
    radius: float

    @property
    def scale(self) -> float:
        """The region's size: copies within a small fraction of it of ``w`` count as at
        ``w``."""
        return float(self.radius)

    def outside(self, Y: np.ndarray) -> np.ndarray:
        """Which rows of ``Y`` lie outside W (over row chunks: no temporary of ``Y``'s size)."""
        out = np.empty(Y.shape[0], bool)
        for a, b in row_chunks(*Y.shape):
            out[a:b] = row_norms(Y[a:b] - self.center) > self.radius
        return out

    def distance_inside(self, w: np.ndarray) -> float:
        """How far inside the sphere ``w`` lies (negative outside)."""
        return self.radius - float(np.linalg.norm(np.asarray(w, float) - self.center))

    def onto_boundary(
        self, w: np.ndarray, band: float, active: bool = False, reach: float = 0.0
    ) -> np.ndarray:
        """``w`` moved radially onto the sphere where it lies within ``band`` inside it, or,
        if ``active`` (the sphere is active in the program solved: its multiplier exceeds
        its slack), within ``reach`` times the radius whatever ``band``; but not where it
        lies within the rounding band in which :meth:`cancellable` already takes it as on the
        sphere, and not at all for a band (``reach`` times the radius, if larger, where
        ``active``) less than :data:`FAR` rounding bands or more than :data:`REACH` of the
        radius. (The active sphere's band was once widened only after that test, so at a
        tight target, whose band was under ``FAR`` rounding bands, a point an active sphere
        left 4e-12 of the radius inside stayed there: hinge, radius 0.3, n = 1e5, the rounds
        then certified 2.6e-4 at every round, and the solve took 12 to 13 s, 8 of them in
        the joint program.)"""
        w = np.asarray(w, float)
        z = w - self.center
        r = float(np.linalg.norm(z))
        R = self.radius
        if active:
            band = max(band, reach * R)
        if not FAR * ON_SPHERE * R <= band <= REACH * R or not 0 < r < R * (1 - ON_SPHERE):
            return w
        return self.center + z * (R / r) if R - r <= band else w

    def extension(
        self,
        line: Pieces1D | Smooth1D,
        u: np.ndarray,
        w: np.ndarray,
        C: float,
        n: float | np.ndarray,
        leave_out: Callable[[np.ndarray, slice], np.ndarray] | None = None,
    ):
        """:func:`ball_extension` in this ball, over row chunks (:func:`in_chunks`)."""
        region = (self.center, self.radius)
        return in_chunks(ball_extension, line, u, w, region, C, n, leave_out)

    def cancelled(self, u: np.ndarray, w: np.ndarray, slope: np.ndarray) -> np.ndarray:
        """Per row, the part of ``slope_i u_i`` that W's normal cone at ``w`` can cancel
        (:meth:`cancellable` for the row's sign, times its slope)."""
        P = np.where(
            (slope > 0)[:, None], self.cancellable(u, w, True), self.cancellable(u, w, False)
        )
        return slope[:, None] * P

    def cancellable(self, u: np.ndarray, w: np.ndarray, positive: bool) -> np.ndarray:
        """Per row of the unit directions ``u``, the part of ``u`` that W's normal cone at
        ``w`` can cancel from ``theta u`` for slopes ``theta`` of that sign: along the
        sphere's normal ``e`` where ``theta u^T e < 0``, on the sphere only."""
        z = np.asarray(w, float) - self.center
        if np.linalg.norm(z) < self.radius * (1 - ON_SPHERE):
            return np.zeros_like(u)
        e = z / self.radius
        a = u @ e
        a = np.where(a < 0, a, 0.0) if positive else np.where(a > 0, a, 0.0)
        return a[:, None] * e[None, :]
