"""Losses dpcvx cannot compile, and the structured first-order path (paper 000, Section 2.4 and
Appendix D.3).

:class:`OracleProblem` takes a per-example loss that is **not** DCP as two vectorized Python
callables (its value and an exact subgradient) and solves with paper 000's Algorithm 3
(:func:`~dpcvx.certification.first_order.adaptive_projected_subgradient`), whose stopping rule
is its own certificate (Prop C.5). It offers the release interface of :class:`dpcvx.Problem`,
so the mechanisms run on it unchanged; for a Lipschitz extension it solves the joint program of
Lemma 2.7 over ``K = W0 x W^m`` with the joint diameter of the digest's pitfall P3.

:func:`structured_solve` is Theorem D.4's path for a DCP problem's
:class:`~dpcvx.problem.LipschitzExtension`: projected subgradient on
``(1/n) sum_i f_C(w, z_i) + (lam/2)||w - w0||^2`` directly, with dpcvx's certified
``B``-approximate subgradients of Prop D.6 and Lemma D.5's a-posteriori certificate.

Both are **reference implementations**: their iteration counts grow like ``(D L / alpha)^2``
(``docs/first_order.md`` has measured reach). For DCP losses the interior-point path
(:meth:`dpcvx.Problem.solve`, :meth:`~dpcvx.problem.LipschitzExtension.solve`) is the default.

Projections. Both certificates charge every projection error, so only domains with an exact
Euclidean projection are accepted (l2 ball, l1 ball, box, simplex); ``W0 = W intersect B(c, r)``
uses Lemma C.6 (bisection, ``xi/2``) on top of the exact ``Pi_W``. Every projected point is then
made exactly feasible (``make_feasible``) and the shift is measured; together with a generous
float64 allowance (``16 (d + 2)^2 eps (||y||_1 + ||c||_1 + R)`` per block, 0 for boxes, whose
projection is exact) the total error must fit in the requested ``xi``, otherwise the solve
raises :class:`~dpcvx.CertificationError`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from dpcvx._validation import check_nonnegative, check_positive
from dpcvx.accounting.ledger import Accountant
from dpcvx.certification.certificate import ROUNDING, CertifiedSolution, still_certified
from dpcvx.certification.first_order import (
    adaptive_projected_subgradient,
    biased_projected_subgradient,
)
from dpcvx.certification.solve import penalty_slope
from dpcvx.errors import CertificationError, DataError, InvalidParameterError, ModelingError
from dpcvx.modeling.domains import Domain
from dpcvx.modeling.localized import EXACT_PROJECTION, LocalizedDomain, inexact_projection
from dpcvx.neighbors import REPLACE_ONE, NeighborRelation
from dpcvx.pipeline import release
from dpcvx.problem import LipschitzExtension, resolve_center
from dpcvx.results import PrivateResult

if TYPE_CHECKING:
    import cvxpy as cp

    from dpcvx.mechanisms.base import Mechanism, Solve

__all__ = ["OracleProblem", "OracleReleaseContext", "structured_solve"]

_EPS = float(np.finfo(float).eps)
#: the default public cap on Algorithm 3's iterations per solve
DEFAULT_MAX_ITER = 1_000_000

_PRIVATE_FAILURE = (
    "dpcvx could not certify a first-order solve of an OracleProblem to its accuracy target "
    "(fixed from public quantities): Algorithm 3's stopping rule was not reached within the "
    "public iteration cap `max_iter`, or a hypothesis of its certificate failed (e.g. the "
    "`subgradient` oracle returned a non-finite or mis-shaped array). Nothing was "
    "released and the budget stays spent. This message carries no data-dependent number, but "
    "the failure itself depends on the data: do not retry on the same data without charging "
    "the budget again. To fix: raise `max_iter` of the OracleProblem, or use a mechanism "
    "whose accuracy target is larger (Algorithm 3 needs about 9 (D_K G / alpha)^2 iterations, "
    "G the root-mean-square subgradient norm, D_K the joint diameter)."
)


# --------------------------------------------------------------------------- projections
def _allowance(domain: Domain, P: np.ndarray) -> np.ndarray:
    """A generous bound on the float64 error of ``domain.project`` for each row of ``P``."""
    P = np.atleast_2d(P)
    if domain.kind == "box":
        return np.zeros(P.shape[0])  # clipping is exact
    d = domain.d
    scale = np.sum(np.abs(P), axis=1) + float(np.sum(np.abs(domain.center))) + domain.radius
    return 16.0 * (d + 2) ** 2 * _EPS * scale


def _project_rows(domain: Domain, P: np.ndarray) -> np.ndarray:
    """The exact Euclidean projection of every row of ``P`` onto a catalogue domain (float64),
    vectorized for balls and boxes."""
    if domain.kind == "box":
        return domain.make_feasible_rows(P)  # np.clip onto the box: the projection itself
    if domain.kind == "l2_ball":
        r = domain.radius / (1 + 4 * _EPS)  # the declared radius (Domain inflates its own)
        diff = P - domain.center
        nrm = np.linalg.norm(diff, axis=1, keepdims=True)
        return domain.center + diff * np.minimum(1.0, r / np.maximum(nrm, 1e-300))
    return np.stack([domain.project(row) for row in P])


class _Projector:
    """``xi``-accurate projections onto ``W`` or ``W0 = W intersect B(c, r)`` (one block) and onto
    ``W`` (row blocks), exactly feasible, with their error accounted (module docstring)."""

    def __init__(self, base: Domain, localized: LocalizedDomain | None) -> None:
        if base.kind not in EXACT_PROJECTION:
            raise ModelingError(
                "dpcvx's first-order paths need a domain with an exact Euclidean projection "
                "(their certificates charge every projection error): an l2 ball, l1 ball, box "
                f"or simplex from dpcvx.domains. Got a '{base.kind}' domain. Use the "
                "interior-point path (dpcvx.Problem) for other domains."
            )
        self.base = base
        self.localized = localized
        self.w_domain = base if localized is None else localized
        self.d = base.d

    def block(self, y: np.ndarray, xi: float) -> tuple[np.ndarray, float]:
        """A point of the w-domain and a bound on its distance to the exact projection."""
        if self.localized is None:
            raw = _project_rows(self.base, y[None, :])[0]
            if self.base.kind == "box":
                return raw, 0.0  # clipping is the exact projection and lands in the box
            out = self.base.make_feasible(raw)
            err = float(_allowance(self.base, y[None, :])[0])
        else:
            loc = self.localized
            raw, _ = inexact_projection(
                y, self.base.project, loc.ball_center, loc.ball_radius, 0.5 * xi
            )
            out = loc.make_feasible(raw)
            scale = float(np.sum(np.abs(y)) + np.sum(np.abs(loc.ball_center)) + loc.ball_radius)
            err = (
                0.5 * xi
                + float(_allowance(self.base, y[None, :])[0])
                + 16.0 * (self.d + 2) ** 2 * _EPS * scale
            )
        return out, err + float(np.linalg.norm(out - raw))

    def rows(self, Y: np.ndarray) -> tuple[np.ndarray, float]:
        """Every row projected onto W, feasible, and the root-sum-square error bound."""
        raw = _project_rows(self.base, Y)
        if self.base.kind == "box":
            return raw, 0.0  # clipping is the exact projection and lands in the box
        out = self.base.make_feasible_rows(raw)
        err = _allowance(self.base, Y) + np.sqrt(np.sum((out - raw) ** 2, axis=1))
        return out, math.sqrt(float(np.dot(err, err)))

    def start(self, w0: np.ndarray) -> np.ndarray:
        """A point of the w-domain near ``w0``."""
        if self.localized is None:
            return self.base.make_feasible(self.base.project(w0))
        return self.localized.make_feasible(self.localized.project(w0))


def _over_budget(err: float, xi: float) -> CertificationError:
    return CertificationError(
        f"A projection's certified error {err:.3g} exceeds the accuracy {xi:.3g} the "
        "first-order certificate needs (float64 limits). Raise the accuracy target or rescale "
        "the domain to order one."
    )


# --------------------------------------------------------------------------- OracleProblem
def _check_callable(fn: object, name: str) -> Callable:
    if not callable(fn):
        raise ModelingError(
            f"The `{name}` of an OracleProblem must be a callable `{name}(W, data)` (see "
            f"dpcvx.OracleProblem). Got {type(fn).__name__}."
        )
    return fn


def _check_data(data: object) -> tuple[dict[str, np.ndarray], int]:
    if not isinstance(data, Mapping) or len(data) == 0:
        raise DataError(
            "The `data` of an OracleProblem must be a non-empty dict mapping names (str) to "
            f"arrays whose first axis indexes the examples. Got {type(data).__name__}"
            f"{'' if not isinstance(data, Mapping) else ' (empty)'}."
        )
    out: dict[str, np.ndarray] = {}
    n = None
    for key, value in data.items():
        if not isinstance(key, str):
            raise DataError(
                f"The keys of an OracleProblem's `data` must be names (str). Got {key!r}."
            )
        arr = np.array(value)
        if arr.dtype.kind not in "biuf":
            raise DataError(f"The data array `{key}` must be numeric. Got dtype {arr.dtype}.")
        if arr.ndim == 0:
            raise DataError(
                f"The data array `{key}` must have a first axis indexing the examples. Got a "
                "scalar."
            )
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            raise DataError(f"The data array `{key}` contains NaN or inf.")
        if n is None:
            n = arr.shape[0]
        elif arr.shape[0] != n:
            raise DataError(
                f"Every data array must have the same number of examples (first axis). "
                f"`{key}` has {arr.shape[0]}, another has {n}."
            )
        arr.setflags(write=False)
        out[key] = arr
    if n is None or n == 0:
        raise DataError("The `data` of an OracleProblem has no examples (first axis 0).")
    return out, int(n)


class OracleProblem:
    """A per-example convex loss given as value and subgradient oracles (not DCP), over a
    compact catalogue domain, solved by paper 000's Algorithm 3 with its certificate.

    Parameters
    ----------
    value : callable
        ``value(W, data) -> ndarray of shape (k,)``: entry ``i`` is ``f(W[i], z_i)``. ``W`` has
        shape ``(k, d)``, row ``i`` the point for example ``i``; ``data`` is a dict with the
        same keys as ``data`` below, each array restricted to the same ``k`` examples in the
        same order (first axis ``k``). dpcvx calls it with ``k`` = the number of examples of
        the solve (all, or a block).
    subgradient : callable
        ``subgradient(W, data) -> ndarray of shape (k, d)``: row ``i`` is an **exact**
        subgradient of ``f(., z_i)`` at ``W[i]``, valid on the whole domain
        (``f(u, z_i) >= f(W[i], z_i) + <g_i, u - W[i]>`` for every ``u`` in W). The
        certificate, and with it the privacy of a release, rests on this: a wrong subgradient
        voids it.
    data : dict
        Maps names (str) to arrays whose first axis indexes the ``n`` examples.
    variable : cvxpy.Variable
        The parameter vector, shape ``(d,)`` (only used to state the domain).
    domain : list of cvxpy.Constraint
        The public, compact domain W: an l2 ball, l1 ball, box or simplex (see
        :mod:`dpcvx.domains`); the first-order certificates need an exact projection.
    max_iter : int
        The public cap on Algorithm 3's iterations per solve (default 1e6). A private release
        whose solve reaches it raises :class:`~dpcvx.CertificationError` and keeps its
        budget spent.

    Notes
    -----
    Every solve is Algorithm 3 (paper 000, Prop C.5): plain solves minimize
    ``(1/m) sum_i f(w, z_i) + (lam/2)||w - w0||^2`` over W (or ``W0``); Lipschitz-extension
    solves (``extension=C``) minimize the joint program of Lemma 2.7,
    ``Phi(w, y_1..y_m) = (1/m) sum_i [f(y_i, z_i) + C ||w - y_i||] + (lam/2)||w - w0||^2``
    over ``K = W0 x W^m``, whose diameter is ``sqrt(m D^2 + D_0^2)`` (``D_0 = D`` for
    ``W0 = W``, ``min(D, 2r)`` for ``W0 = W intersect B(c, r)``; digest pitfall P3). The
    certified gap of ``Phi`` bounds that of the extension objective at ``w`` (Lemma 2.7), and
    ``||w - w*|| <= sqrt(2 gap / lam)``.

    Examples
    --------
    >>> import cvxpy as cp, numpy as np, dpcvx
    >>> from dpcvx.oracle import OracleProblem
    >>> w = cp.Variable(1)
    >>> def value(W, data):
    ...     return np.abs(data["x"] * W[:, 0] - data["y"])
    >>> def subgradient(W, data):
    ...     r = data["x"] * W[:, 0] - data["y"]
    ...     return (data["x"] * np.sign(r))[:, None]
    >>> problem = OracleProblem(value, subgradient, {"x": np.array([3.0, 0.5, -2.0]),
    ...                         "y": np.array([1.0, 0.2, 4.0])}, w,
    ...                         dpcvx.domains.box(w, -1.0, 1.0))
    >>> sol = problem.solve(regularization=0.5, center=[0.0], accuracy=0.05, extension=1.0)
    >>> bool(sol.gap <= 0.05 and abs(sol.w[0] - 1 / 3) <= sol.distance_bound)
    True
    """

    def __init__(
        self,
        value: Callable,
        subgradient: Callable,
        data: Mapping[str, Any],
        variable: cp.Variable,
        domain: list[cp.Constraint],
        *,
        max_iter: int = DEFAULT_MAX_ITER,
    ) -> None:
        self._value = _check_callable(value, "value")
        self._subgradient = _check_callable(subgradient, "subgradient")
        self._data, self._n = _check_data(data)
        self._domain = Domain(variable, domain)
        self.variable = variable
        _Projector(self._domain, None)  # raises ModelingError for domains without projection
        if (
            isinstance(max_iter, bool)
            or not isinstance(max_iter, (int, np.integer))
            or max_iter < 1
        ):
            raise InvalidParameterError(
                f"The `max_iter` parameter of `OracleProblem` must be a positive integer. "
                f"Got {max_iter!r}."
            )
        self.max_iter = int(max_iter)
        self._probe()

    def _probe(self) -> None:
        """Check the callables' output shapes on (at most) two examples at the interior point."""
        k = min(self._n, 2)
        rows = {key: arr[:k] for key, arr in self._data.items()}
        W = np.tile(self._domain.interior, (k, 1))
        try:
            self._values(W, rows, k)
            self._subgradients(W, rows, k)
        except CertificationError as exc:
            raise ModelingError(str(exc)) from None

    # ------------------------------------------------------------------ properties
    @property
    def n(self) -> int:
        """Number of examples."""
        return self._n

    @property
    def d(self) -> int:
        """Dimension of the variable."""
        return self._domain.d

    @property
    def domain(self) -> Domain:
        """The analysed domain (bounding ball, diameter, projection)."""
        return self._domain

    @property
    def diameter(self) -> float:
        """A bound ``D`` on the domain's diameter."""
        return self._domain.diameter

    @property
    def data(self) -> Mapping[str, np.ndarray]:
        """The bound data (read-only arrays)."""
        return MappingProxyType(self._data)

    # ------------------------------------------------------------------ oracles
    def _rows(self, indices: ArrayLike | None) -> tuple[dict[str, np.ndarray], int]:
        if indices is None:
            return self._data, self._n
        idx = np.asarray(indices)
        return {key: arr[idx] for key, arr in self._data.items()}, int(idx.size)

    def _values(self, W: np.ndarray, rows: Mapping[str, np.ndarray], k: int) -> np.ndarray:
        out = np.asarray(self._value(W, rows), dtype=float)
        if out.shape != (k,) or not np.all(np.isfinite(out)):
            bad = "non-finite values" if out.shape == (k,) else f"shape {out.shape}"
            raise CertificationError(
                f"The OracleProblem's `value(W, data)` must return {k} finite values (shape "
                f"({k},)) for {k} examples. Got {bad}."
            )
        return out

    def _subgradients(self, W: np.ndarray, rows: Mapping[str, np.ndarray], k: int) -> np.ndarray:
        out = np.asarray(self._subgradient(W, rows), dtype=float)
        if out.shape != (k, self.d) or not np.all(np.isfinite(out)):
            bad = "non-finite entries" if out.shape == (k, self.d) else f"shape {out.shape}"
            raise CertificationError(
                f"The OracleProblem's `subgradient(W, data)` must return a finite array of "
                f"shape ({k}, {self.d}). Got {bad}."
            )
        return out

    def _center(self, center: ArrayLike | None) -> np.ndarray:
        return resolve_center(self, center)

    # ------------------------------------------------------------------ solving
    def _solve(
        self,
        lam: float,
        w0: np.ndarray,
        alpha: float,
        *,
        extension: float | None,
        localize: tuple | None,
        indices: ArrayLike | None,
        max_iter: int,
        callback: Callable[[int, float], None] | None = None,
    ) -> CertifiedSolution:
        """Algorithm 3 on the plain or joint program (see the class Notes)."""
        start = time.perf_counter()
        base = self._domain
        loc = None if localize is None else LocalizedDomain(base, *localize)
        proj = _Projector(base, loc)
        rows, m = self._rows(indices)
        d = self.d
        w_start = proj.start(w0)
        D0 = float(proj.w_domain.diameter)
        if extension is None:
            D_K = D0

            def subgradient(u: np.ndarray) -> np.ndarray:
                G = self._subgradients(np.tile(u, (m, 1)), rows, m)
                return G.mean(axis=0) + lam * (u - w0)

            def project(u: np.ndarray, xi: float) -> np.ndarray:
                out, err = proj.block(u, xi)
                if err > xi:
                    raise _over_budget(err, xi)
                return out

            x1 = w_start
        else:
            C = float(extension)
            D = float(base.diameter)
            D_K = math.sqrt(m * D * D + D0 * D0) * (1 + 8 * _EPS)

            def subgradient(u: np.ndarray) -> np.ndarray:
                w, Y = u[:d], u[d:].reshape(m, d)
                G = self._subgradients(Y.copy(), rows, m)
                diff = w - Y
                nrm = np.linalg.norm(diff, axis=1, keepdims=True)
                S = np.divide(diff, nrm, out=np.zeros_like(diff), where=nrm > 0)
                g_w = C * S.mean(axis=0) + lam * (w - w0)
                return np.concatenate([g_w, ((G - C * S) / m).reshape(-1)])

            def project(u: np.ndarray, xi: float) -> np.ndarray:
                w_out, err_w = proj.block(u[:d], xi)
                Y_out, err_y = proj.rows(u[d:].reshape(m, d))
                err = math.hypot(err_w, err_y)
                if err > xi:
                    raise _over_budget(err, xi)
                return np.concatenate([w_out, Y_out.reshape(-1)])

            x1 = np.concatenate([w_start, np.tile(w_start, m)])
        result = adaptive_projected_subgradient(
            subgradient, project, x1, D_K, alpha, max_iter, callback=callback
        )
        u = result.point
        w = u[:d]
        if not proj.w_domain.contains(w):  # the projections guarantee it; never unchecked
            raise CertificationError("Internal: the certified point is not in the domain.")
        reg = lam / 2 * float(np.sum((w - w0) ** 2))
        if extension is None:
            vals = self._values(np.tile(w, (m, 1)), rows, m)
            dist = np.zeros(m)
        else:
            Y = u[d:].reshape(m, d)
            vals = self._values(Y, rows, m)
            dist = np.linalg.norm(w - Y, axis=1)
            vals = vals + float(extension) * dist
        phi = float(np.mean(vals)) + reg
        margin = ROUNDING * (1.0 + float(np.mean(np.abs(vals))) + reg)
        upper = phi + margin
        lower = phi - margin - result.certified_gap
        gap = upper - lower
        if not gap <= alpha:
            raise CertificationError(
                f"The certified gap {gap:.6g} (Algorithm 3's {result.certified_gap:.6g} plus "
                f"rounding margins) exceeds the accuracy target {alpha:.6g}. Rescale the "
                "problem so that losses are of order one."
            )
        stats = {
            "method": "first-order: paper 000 Alg 3 (Prop C.5)"
            + ("" if extension is None else ", joint program of Lemma 2.7"),
            "iterations": result.iterations,
            "stop": result.stop,
            "algorithm_gap": result.certified_gap,
            "joint_diameter": D_K,
            "examples": m,
            "seconds": time.perf_counter() - start,
            **dict(result.stats),
        }
        if extension is not None:
            stats["extension_C"] = float(extension)
        return CertifiedSolution(
            w=w.copy(),
            upper=upper,
            lower=lower,
            gap=gap,
            distance_bound=math.sqrt(2.0 * gap / lam) if lam > 0 else math.inf,
            regularization=lam,
            center=w0.copy(),
            accuracy=alpha,
            solver_stats=MappingProxyType(stats),
        )

    def solve(
        self,
        regularization: float = 0.0,
        center: ArrayLike | None = None,
        accuracy: float = 1e-2,
        *,
        extension: float | None = None,
        localize: tuple | None = None,
        max_iter: int | None = None,
        callback: Callable[[int, float], None] | None = None,
    ) -> CertifiedSolution:
        """Certified non-private solve with Algorithm 3 (see the class Notes).

        Parameters
        ----------
        regularization : float
            ``lam >= 0`` (``distance_bound`` is finite only for ``lam > 0``).
        center : array-like, optional
            ``w0``; default the center of the domain's bounding ball.
        accuracy : float
            The target ``alpha`` of Algorithm 3's stopping rule (its certified gap is at most
            ``3 alpha / 4`` plus rounding margins).
        extension : float, optional
            ``C``: solve the Lipschitz extension's joint program (Lemma 2.7) instead.
        localize : (center, radius), optional
            Restrict ``w`` to ``W0 = W intersect B(center, radius)`` (``center`` in W).
        max_iter : int, optional
            Iteration cap (default the problem's ``max_iter``).
        callback : callable, optional
            ``callback(t, S_t)`` after every iteration of Algorithm 3.
        """
        owner = "OracleProblem.solve"
        lam = check_nonnegative(regularization, "regularization", owner)
        alpha = check_positive(accuracy, "accuracy", owner)
        if extension is not None:
            extension = check_positive(extension, "extension", owner)
        cap = self.max_iter if max_iter is None else max_iter
        return self._solve(
            lam,
            self._center(center),
            alpha,
            extension=extension,
            localize=localize,
            indices=None,
            max_iter=cap,
            callback=callback,
        )

    def solve_private(
        self,
        mechanism: Mechanism,
        *,
        epsilon: float,
        delta: float = 0.0,
        rng: int | np.random.Generator | None = None,
        accountant: Accountant | None = None,
    ) -> PrivateResult:
        """A private release, exactly as :meth:`dpcvx.Problem.solve_private` (the same
        validation, planning, ledger and noise); every solve is Algorithm 3 with its
        certificate. A mechanism with ``extension_C`` (e.g.
        :class:`~dpcvx.DoubleOutputPerturbation`) runs on the Lipschitz extension."""
        return release(
            self, mechanism, epsilon=epsilon, delta=delta, rng=rng, accountant=accountant
        )

    @property
    def neighbors(self) -> NeighborRelation:
        """One example is one unit of privacy (replace-one neighbors)."""
        return REPLACE_ONE

    @property
    def declared(self) -> None:
        """An oracle's loss is not declared: dpcvx cannot verify claims about it (see
        :class:`dpcvx.pipeline.DataSource`)."""
        return None

    def release_context(
        self, *, extension: float | None, solver: str | None, base: bool = False
    ) -> OracleReleaseContext:
        """The data access a mechanism gets once its budget is reserved (internal)."""
        if solver is not None:
            raise InvalidParameterError(
                "An OracleProblem solves with first-order methods (paper 000, Algorithm 3): "
                f"the mechanism's `solver` must be None. Got {solver!r}."
            )
        return OracleReleaseContext(self, extension=extension, base=base)

    def project(
        self, point: ArrayLike, localize: tuple | None = None, xi: float | None = None
    ) -> np.ndarray:
        """Euclidean projection onto the domain, made exactly feasible; with
        ``localize=(c, r)`` onto ``W intersect B(c, r)`` (Lemma C.6 to within ``xi``)."""
        point = np.asarray(point, float).reshape(self.d)
        if localize is None:
            return self._domain.make_feasible(self._domain.project(point))
        loc = LocalizedDomain(self._domain, *localize)
        return loc.make_feasible(loc.project(point, xi))


class OracleReleaseContext:
    """:class:`dpcvx.problem.ReleaseContext` for an :class:`OracleProblem`: Algorithm 3 solves
    (any failure is one fixed :class:`~dpcvx.CertificationError` text) on all examples or a
    block, and public projections."""

    def __init__(
        self, problem: OracleProblem, *, extension: float | None, base: bool = False
    ) -> None:
        self.problem = problem
        self.n, self.d = problem.n, problem.d
        self.domain = problem.domain
        self.extension = extension
        self._base = base

    def prepare(self) -> None:
        """Nothing to compile: Algorithm 3 runs on the oracles."""

    def solver(self, indices: ArrayLike | None = None, C: float | None = None) -> Solve:
        """``solve(lam, w0, alpha, localize=None, candidate=None) -> CertifiedSolution`` on the
        examples ``indices`` (default all), on the extension with ``C`` (default this
        release's own). ``candidate``: an earlier certificate of the same objective over W,
        returned as is when it also certifies ``alpha`` over the localized domain (as
        :meth:`dpcvx.problem.ReleaseContext.solver`)."""
        extension = self.extension if C is None else float(C)
        problem = self.problem

        def solve(
            lam: float,
            w0: np.ndarray,
            alpha: float,
            localize: tuple | None = None,
            candidate: CertifiedSolution | None = None,
        ) -> CertifiedSolution:
            try:
                if (
                    localize is not None
                    and candidate is not None
                    and still_certified(
                        candidate, LocalizedDomain(problem.domain, *localize), lam, w0, alpha
                    )
                ):
                    return candidate
                return problem._solve(
                    float(lam),
                    np.asarray(w0, float),
                    float(alpha),
                    extension=extension,
                    localize=localize,
                    indices=indices,
                    max_iter=problem.max_iter,
                )
            except Exception:  # noqa: BLE001 - nothing data-dependent may leave a private solve
                raise CertificationError(_PRIVATE_FAILURE) from None

        return solve

    #: a user's callables carry no smoothness information: utility caveats apply
    smooth = False

    def gradients(self, w: ArrayLike, indices: ArrayLike | None = None) -> np.ndarray:
        """The user's per-example subgradients at ``w`` (rows ``indices``), ``(n, d)``."""
        rows, m = self.problem._rows(indices)
        point = np.asarray(w, float).reshape(1, self.d)
        return self.problem._subgradients(np.repeat(point, m, axis=0), rows, m)

    def loss_values(self, points: ArrayLike, indices: ArrayLike | None = None) -> np.ndarray:
        """``f(w_p, z_i)`` for every row ``w_p`` of ``points`` and every example ``i`` in
        ``indices`` (default all): shape ``(len(points), n)``."""
        rows, m = self.problem._rows(indices)
        pts = np.atleast_2d(np.asarray(points, float))
        return np.stack([self.problem._values(np.tile(p, (m, 1)), rows, m) for p in pts])

    def project(
        self, point: ArrayLike, localize: tuple | None = None, xi: float | None = None
    ) -> np.ndarray:
        """See :meth:`OracleProblem.project` (public post-processing)."""
        return self.problem.project(point, localize=localize, xi=xi)


# --------------------------------------------------------------------------- Theorem D.4
def structured_solve(
    extension: LipschitzExtension,
    regularization: float,
    center: ArrayLike | None,
    accuracy: float,
    localize: tuple | None = None,
    *,
    iterations: int | None = None,
    max_iter: int = DEFAULT_MAX_ITER,
    solver: str | None = None,
    callback: Callable[[int, float, float], None] | None = None,
) -> CertifiedSolution:
    """Paper 000, Theorem D.4's structured path: projected subgradient with certified biased
    subgradients on ``G(w) = (1/n) sum_i f_C(w, z_i) + (lam/2)||w - w0||^2`` over W (or
    ``W0 = W intersect B(c, r)`` with ``localize=(c, r)``), certified by Lemma D.5.

    The oracle is :meth:`LipschitzExtension.evaluate` (Prop D.6, certified by dpcvx): per
    example ``g_i`` with ``||g_i|| <= C`` and ``B_i = upper_i - lower_i``; their average plus
    ``lam (w - w0)`` is a ``B``-approximate subgradient of ``G`` with ``B = mean(B_i)`` (plus
    an allowance for the rounding of the average) and norm at most
    ``L = C + lam max_{w in K} ||w - w0||`` (``C + lam D`` when ``w0`` is in K; the paper's
    ``L`` with Prop D.6's oracle), which is also a Lipschitz constant of ``G`` on K; a
    penalty written into the loss, which the folded extension keeps exact, adds its slope on
    W to ``C`` (:func:`~dpcvx.certification.solve.penalty_slope`).
    ``T = ceil((4 D L / alpha)^2)`` (data-independent), ``eta = D/(L sqrt T)``, projections to
    within ``min{D, alpha eta/(6D)}`` (exact ``Pi_W``; Lemma C.6 for ``W0``). See
    :func:`~dpcvx.certification.first_order.biased_projected_subgradient`.

    Returns a :class:`CertifiedSolution` whose ``gap`` is Lemma D.5's bound plus the final
    evaluation's ``mean(B_i)`` and rounding margins, checked ``<= accuracy``. Each iteration
    is one certified conic evaluation of all ``n`` extensions: a reference implementation
    (``docs/first_order.md``); :meth:`LipschitzExtension.solve` is the default path.

    Parameters
    ----------
    extension : LipschitzExtension
        ``problem.lipschitz_extension(C)`` of a :class:`dpcvx.Problem` over a catalogue
        domain (l2 ball, l1 ball, box, simplex).
    regularization : float
        ``lam > 0``.
    center : array-like or None
        ``w0``; None for the center of the domain's bounding ball.
    accuracy : float
        ``alpha``.
    localize : (center, radius), optional
        Restrict ``w`` to ``W0 = W intersect B(center, radius)`` (``center`` in W).
    iterations : int, optional
        ``T`` (public); default ``ceil((4 D L / alpha)^2)``.
    max_iter : int
        Public cap on ``T``: a larger ``T`` raises :class:`~dpcvx.InvalidParameterError`
        **before** any data is touched (``T`` depends on public quantities only).
    solver : str, optional
        The conic solver of every evaluation.
    callback : callable, optional
        ``callback(t, sum ||g||^2, sum B)`` after every iteration.
    """
    owner = "structured_solve"
    if not isinstance(extension, LipschitzExtension):
        raise InvalidParameterError(
            f"The `extension` of `{owner}` must be a dpcvx LipschitzExtension "
            f"(`problem.lipschitz_extension(C)`). Got {type(extension).__name__}."
        )
    lam = check_positive(regularization, "regularization", owner)
    alpha = check_positive(accuracy, "accuracy", owner)
    start = time.perf_counter()
    problem = extension.problem
    base = problem.domain
    loc = None if localize is None else extension.localized_domain(*localize)
    proj = _Projector(base, loc)
    K = proj.w_domain
    w0 = problem._center(center)
    D = float(K.diameter)
    reach = float(np.linalg.norm(w0 - K.center)) + float(K.radius)
    if K.contains(w0):
        reach = min(reach, D)
    C, n = extension.C, extension.n
    # a penalty the folded extension keeps exact adds its own slope (folded_terms)
    slope = penalty_slope(problem.declaration, C)
    if not np.isfinite(slope):
        raise InvalidParameterError(
            f"`{owner}` needs a bound on the slope of the loss's terms that read no data (a "
            "penalty, kept exact by the folded extension: it adds its slope to every "
            "example's), and dpcvx has none for this one (a generic term, e.g. `cp.pnorm`). "
            "Use the interior-point path `LipschitzExtension.solve`."
        )
    C += slope
    # ||g|| <= C + lam reach; the tiny inflation covers the rounding of the average of the g_i
    L = (C + lam * reach) * (1.0 + 1e-13)
    bias_rounding = 1e-13 * (C + lam * reach) * D
    T = math.ceil((4.0 * D * L / alpha) ** 2) if iterations is None else iterations
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise InvalidParameterError(
            f"The `max_iter` parameter of `{owner}` must be a positive integer. Got {max_iter!r}."
        )
    if T > max_iter:
        raise InvalidParameterError(
            f"`{owner}` would need T = ceil((4 D L / alpha)^2) = {T} iterations (D = {D:.4g}, "
            f"L = C + lam max||w - w0|| = {L:.4g}, alpha = {alpha:.4g}: public quantities), "
            f"above `max_iter` = {max_iter}. Raise `accuracy` or `max_iter`, or use the "
            "interior-point path `LipschitzExtension.solve`."
        )

    def oracle(w: np.ndarray) -> tuple[np.ndarray, float]:
        vals = extension.evaluate(w, solver)
        g = vals.subgradients.mean(axis=0) + lam * (w - w0)
        return g, float(np.mean(vals.B)) * (1.0 + (n + 4) * _EPS) + bias_rounding

    def project(y: np.ndarray, xi: float) -> np.ndarray:
        out, err = proj.block(y, xi)
        if err > xi:
            raise _over_budget(err, xi)
        return out

    result = biased_projected_subgradient(
        oracle, project, proj.start(w0), D, L, alpha, iterations, callback=callback
    )
    w = result.point
    vals = extension.evaluate(w, solver)
    reg = lam / 2 * float(np.sum((w - w0) ** 2))
    margin = ROUNDING * (1.0 + float(np.mean(np.abs(vals.upper))) + reg)
    upper = float(np.mean(vals.upper)) + reg + margin
    lower = float(np.mean(vals.lower)) + reg - result.certified_gap - margin
    gap = upper - lower
    if not gap <= alpha:
        raise CertificationError(
            f"`{owner}`: the certified gap {gap:.6g} (Lemma D.5's {result.certified_gap:.6g} "
            f"plus the final evaluation's bias) exceeds the accuracy target {alpha:.6g}."
        )
    stats = {
        "method": "first-order: paper 000 Thm D.4 / Lemma D.5 (Prop D.6 oracle)",
        "iterations": result.iterations,
        "algorithm_gap": result.certified_gap,
        "lipschitz": L,
        "diameter": D,
        "seconds": time.perf_counter() - start,
        **dict(result.stats),
    }
    return CertifiedSolution(
        w=w.copy(),
        upper=upper,
        lower=lower,
        gap=gap,
        distance_bound=math.sqrt(2 * gap / lam),
        regularization=lam,
        center=w0.copy(),
        accuracy=alpha,
        solver_stats=MappingProxyType(stats),
    )
