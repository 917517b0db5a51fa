"""The localized domain ``W0 = W intersect B(c, r)`` of paper 000 (Algorithms 2 and 4).

``W0`` is public (its center is a private release, its radius a public number), and it only
ever restricts ``w``: the copies ``y_i`` of the Lipschitz extension keep ranging over ``W``
(paper 000, Prop C.3; digest pitfall P5). :class:`LocalizedDomain` offers the part of the
:class:`~dpcvx.modeling.domains.Domain` interface that the certificate and the release use,
built from the base domain's closed forms, without any CVXPY analysis per localization.

Two facts carry the weight:

- **Lower bound (certificate).** For every ``mu >= 0`` and every ``w``,
  ``(lam/2)||w - w0||^2 + (mu/2)(||w - c||^2 - r^2)
  = ((lam + mu)/2)||w - w_mu||^2 + lam mu ||w0 - c||^2 / (2 (lam + mu)) - mu r^2 / 2`` with
  ``w_mu = (lam w0 + mu c)/(lam + mu)``; the multiplier term is ``<= 0`` on ``B(c, r)``, so weak
  duality bounds ``min_{W0} <s, w> + (lam/2)||w - w0||^2`` from below by the base domain's own
  (valid) bound at ``(lam + mu, w_mu)`` plus those constants, for ANY ``mu >= 0``. The bound is
  concave in ``mu``; dpcvx maximizes it by golden section and keeps the best value seen, so its
  validity never rests on the search.
- **Projection (Lemma C.6 of paper 000).** With an exact ``Pi_W`` and ``c`` in W, bisection on
  the multiplier of the ball constraint returns a point of ``W0`` within ``xi`` of
  ``Pi_W0(y)`` after ``N = ceil(log2(1 + ||y - c||^2 / (r xi)))`` steps, ``N + 1`` calls of
  ``Pi_W``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import cvxpy as cp
import numpy as np
from numpy.typing import ArrayLike

from dpcvx._validation import check_positive
from dpcvx.errors import InvalidParameterError, ModelingError
from dpcvx.modeling.domains import Domain

__all__ = ["LocalizedDomain", "inexact_projection"]

_EPS = np.finfo(float).eps
#: kinds whose ``project`` is an exact Euclidean projection (Lemma C.6 needs one)
EXACT_PROJECTION = ("l2_ball", "box", "l1_ball", "simplex")
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def inexact_projection(
    y: ArrayLike,
    project_W: Callable[[np.ndarray], np.ndarray],
    center: ArrayLike,
    radius: float,
    xi: float,
) -> tuple[np.ndarray, int]:
    """Paper 000, Lemma C.6: a point of ``W intersect B(center, radius)`` within ``xi`` of the
    exact projection of ``y``, given an exact projection ``project_W`` onto W and
    ``center`` in W.

    Returns ``(point, calls)`` where ``calls`` counts the evaluations of ``project_W``
    (at most ``N + 1``, ``N = ceil(log2(1 + ||y - c||^2/(r xi)))``). The point satisfies
    ``||point - c|| <= r`` up to the rounding of ``project_W``; pass it through
    :meth:`LocalizedDomain.make_feasible` for an exactly feasible point.
    """
    y = np.asarray(y, float)
    c = np.asarray(center, float)
    r = float(radius)
    x = project_W(y)
    calls = 1
    if np.linalg.norm(x - c) <= r:
        return x, calls
    R = float(np.linalg.norm(y - c))
    lo, hi = 0.0, R / r  # g(lo) > 0 >= g(hi), g(lam) = ||Pi_W(z_lam) - c||^2 - r^2
    steps = math.ceil(math.log2(1.0 + R * R / (r * xi)))
    best = project_W((y + hi * c) / (1.0 + hi))
    calls += 1
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        x = project_W((y + mid * c) / (1.0 + mid))
        calls += 1
        if np.linalg.norm(x - c) <= r:
            hi, best = mid, x
        else:
            lo = mid
    return best, calls


class LocalizedDomain:
    """``W0 = W intersect B(center, radius)`` for a public ``center`` in ``W``.

    Parameters
    ----------
    base : Domain
        The declared domain W.
    center : array-like
        A public point of W (e.g. ``problem.project`` of a private release).
    radius : float
        ``r > 0``.
    """

    kind = "localized"

    def __init__(self, base: Domain, center: ArrayLike, radius: float) -> None:
        owner = "LocalizedDomain"
        r = check_positive(radius, "radius", owner)
        c = np.asarray(center, dtype=float)
        if c.shape != (base.d,) or not np.all(np.isfinite(c)):
            raise InvalidParameterError(
                f"The localization center must be a finite vector of shape ({base.d},). "
                f"Got shape {c.shape}."
            )
        if not base.contains(c):
            raise InvalidParameterError(
                "The localization center must lie in the domain W (project it first: "
                "`problem.project(point)`)."
            )
        if base.interior is None:
            raise ModelingError("The domain has no interior point to localize around.")
        self.base = base
        self.variable = base.variable
        self.d = base.d
        self.ball_center = c.copy()
        self.ball_radius = r
        self._constraints: tuple | None = None  # built when asked (a CVXPY expression)
        if r < base.radius:
            self.center, self.radius = c.copy(), float(r * (1 + 4 * _EPS))
        else:
            self.center, self.radius = np.asarray(base.center, float), float(base.radius)
        self.diameter = min(base.diameter, 2 * r * (1 + 4 * _EPS))
        # a point strictly inside both sets: toward W's interior point, within r/2 of c
        gap = float(np.linalg.norm(base.interior - c))
        t = 1.0 if gap <= r / 2 else r / (2 * gap)
        cand = c + t * (base.interior - c)
        while not self.contains(cand):  # rounding at t ~ eps only
            t = min(1.0, 2 * t)
            cand = c + t * (base.interior - c) if t < 1 else base.interior.copy()
            if t >= 1 and not self.contains(cand):
                cand = c.copy()
                break
        self.interior = cand

    @property
    def constraints(self) -> tuple:
        """W's constraints and the ball's, as CVXPY constraints on the declared variable."""
        if self._constraints is None:
            ball = cp.norm(self.base.variable - self.ball_center, 2) <= self.ball_radius
            self._constraints = tuple(self.base.constraints) + (ball,)
        return self._constraints

    def _in_ball(self, point: np.ndarray) -> bool:
        return bool(np.linalg.norm(point - self.ball_center) <= self.ball_radius * (1 - 8 * _EPS))

    def contains(self, point: ArrayLike) -> bool:
        """Whether ``point`` lies in W (dpcvx's check) and in the ball (with a margin)."""
        point = np.asarray(point, float)
        return self._in_ball(point) and self.base.contains(point)

    def project(self, point: ArrayLike, xi: float | None = None) -> np.ndarray:
        """Lemma C.6 (``xi``-inexact, exact ``Pi_W``) for catalogue W; ``xi`` defaults to
        ``1e-9`` times the radius. For other W the base projection is not exact: the result
        is then only a feasible point near the projection (use :meth:`dpcvx.Problem.project`,
        which solves the projection with CVXPY)."""
        xi = 1e-9 * self.ball_radius if xi is None else check_positive(xi, "xi", "project")
        out, _ = inexact_projection(
            point, self.base.project, self.ball_center, self.ball_radius, xi
        )
        return out

    def make_feasible(self, point: ArrayLike) -> np.ndarray:
        """An exactly feasible point of W0 near ``point``: first feasible in W, then pulled
        toward the interior point along a segment that stays in W (convexity)."""
        q = self.base.make_feasible(np.asarray(point, float).reshape(self.d))
        if self.contains(q):
            return q
        dist = float(np.linalg.norm(q - self.ball_center))
        inner = float(np.linalg.norm(self.interior - self.ball_center))
        r = self.ball_radius * (1 - 16 * _EPS)
        t = (dist - r) / max(dist - inner, 1e-300) if dist > r else 0.0
        t = min(max(t, 0.0), 1.0)
        while True:
            t = min(1.0, t * (1 + 1e-9) + 1e-15)
            cand = (1 - t) * q + t * self.interior
            if self.contains(cand):
                return cand
            if t >= 1.0:
                from dpcvx.errors import CertificationError

                raise CertificationError(
                    "dpcvx could not produce a point that provably lies in the localized "
                    "domain (float64 check with its margin)."
                )
            t = 2 * t

    def support(self, V: ArrayLike, hints: np.ndarray | None = None) -> np.ndarray:
        """Upper bounds on ``max_{w in W0} <v, w>`` per row ``v`` of ``V`` (``hints``:
        near-maximizers over W, passed to the base domain)."""
        V = np.atleast_2d(np.asarray(V, float))
        nrm = np.linalg.norm(V, axis=1)
        ball = V @ self.ball_center + self.ball_radius * nrm
        mag = np.abs(V) @ np.abs(self.ball_center) + self.ball_radius * nrm
        ball = ball + 64 * _EPS * (mag + 1.0) * self.d
        return np.minimum(self.base.support(V, hints=hints), ball)

    def min_linear_quadratic(
        self, s: ArrayLike, lam: float, w0: ArrayLike, hint: np.ndarray | None = None
    ) -> float:
        """A valid lower bound on ``min_{w in W0} <s, w> + (lam/2)||w - w0||^2`` (the
        module docstring's Lagrangian bound, maximized over the ball multiplier)."""
        s = np.asarray(s, float)
        w0 = np.asarray(w0, float)
        c, r = self.ball_center, self.ball_radius
        shift = float(np.sum((w0 - c) ** 2))

        def bound(mu: float) -> float:
            total = lam + mu
            if total <= 0.0:
                return -math.inf
            center = (lam * w0 + mu * c) / total
            base = self.base.min_linear_quadratic(s, total, center, hint=hint)
            const = lam * mu / (2 * total) * shift - mu * r * r / 2
            return base + const - 16 * _EPS * (abs(base) + abs(const) + mu * r * r)

        best = bound(0.0)
        # the optimal multiplier is at most (objective at c - lower bound over W) / (r^2/2)
        at_c = float(s @ c) + lam / 2 * shift
        top = 2.0 * max(at_c - best, 0.0) / (r * r) * (1 + 1e-6) + 1e-300
        a, b = 0.0, top
        x1, x2 = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
        f1, f2 = bound(x1), bound(x2)
        best = max(best, f1, f2, bound(top))
        for _ in range(56):  # bracket shrinks to 2e-12 of its width; the bound is valid anyway
            if f1 < f2:
                a, x1, f1 = x1, x2, f2
                x2 = a + _GOLDEN * (b - a)
                f2 = bound(x2)
                best = max(best, f2)
            else:
                b, x2, f2 = x2, x1, f1
                x1 = b - _GOLDEN * (b - a)
                f1 = bound(x1)
                best = max(best, f1)
        return best
