"""A data source backed by Dask arrays: rows partitioned over a cluster's workers.

:class:`DaskProblem` declares a loss, a variable and a domain like :class:`~dpcvx.Problem`, with
each data parameter bound to a ``dask.array.Array`` whose first axis indexes the examples. The
rows never gather on one process: every worker builds, once, the declaration of the partitions
it holds (and their second-order model), and each step of a solve sends it only the point
``w``, receiving sums of ``d`` or ``d x d`` numbers:

- Newton's method (:func:`~dpcvx.certification.solve.newton`, or
  :func:`~dpcvx.certification.solve.ball_newton` on an active ball; L-BFGS-B with the box as
  bounds then Newton on the free coordinates for a box) on the reduced value, gradient and
  Hessian of the mean loss;
- dpcvx's certificate, whose every bound is a sum over examples
  (:class:`~dpcvx.certification.certificate.ValueSums`,
  :class:`~dpcvx.certification.extension.ExtensionSums`,
  :class:`~dpcvx.certification.stable.StableSums`): each partition certifies its own
  examples at the point, with the loss's derivatives as multipliers, and the sums are added on
  the client. The certificate is the same as in one process (rounding margins cover any
  summation order).

Private releases solve on the Lipschitz extension with the mechanism's claimed constant (the
extension of a smooth atom of an affine argument,
:func:`~dpcvx.modeling.smooth.extension_model`), so privacy never rests on the claim: output
perturbation runs here. The structure of the loss (which atoms,
which paths) is read from the declaration on zero data of the right shapes: public.

The loss must be one of the smooth catalogue atoms of an affine argument per term (logistic,
squared, Huber, exponential, sum of squares, log-sum-exp, the squared hinge; one atom for a
private release), the domain an l2 ball or a box. See ``docs/distributed.md`` for running it
on a real cluster.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import cvxpy as cp
import numpy as np

from dpcvx.accounting.ledger import Accountant
from dpcvx.certification.certificate import (
    CertifiedSolution,
    ValueSums,
    finish_certificate,
    value_bounds,
    value_sums,
)
from dpcvx.certification.extension import (
    ExtensionSums,
    extension_bounds,
    extension_value_bounds,
    finish_extension,
)
from dpcvx.certification.solve import NEWTON_MAX_D, ball_newton, newton
from dpcvx.certification.stable import (
    StableSums,
    stable_extension_sums,
    stable_from_sums,
    stable_sums,
)
from dpcvx.errors import CertificationError, InvalidParameterError, ModelingError
from dpcvx.mechanisms.base import PLAIN
from dpcvx.mechanisms.output_perturbation import OutputPerturbation
from dpcvx.modeling.declaration import Declaration
from dpcvx.modeling.smooth import SmoothModel, extension_model, smooth_model
from dpcvx.pipeline import release
from dpcvx.problem import DeclaredSource, project_point, resolve_center
from dpcvx.results import PrivateResult

__all__ = ["DaskProblem"]

#: the fixed text of a private distributed solve that failed (no data-dependent numbers)
_PRIVATE_FAILURE = (
    "dpcvx could not certify the distributed solve to the accuracy target {accuracy:.6g} "
    "(fixed from public quantities). Nothing was released; the budget stays spent."
)


@dataclass(frozen=True)
class _Spec:
    """What a worker needs to declare its partitions: the user's expressions (their ids stay
    below ``id_floor``, which the worker's cvxpy counter is moved past before it creates any
    object of its own)."""

    loss: cp.Expression
    variable: cp.Variable
    params: tuple[cp.Parameter, ...]
    constraints: tuple[cp.Constraint, ...]
    id_floor: int


class _Part:
    """One partition on its worker: its declaration and second-order models."""

    def __init__(self, spec: _Spec, *blocks: np.ndarray) -> None:
        import cvxpy.lin_ops.lin_utils as lu

        lu.ID_COUNTER.count = max(lu.ID_COUNTER.count, spec.id_floor)
        data = {p: np.asarray(b) for p, b in zip(spec.params, blocks)}
        self.decl = Declaration(spec.loss, spec.variable, data, list(spec.constraints))
        model = smooth_model(self.decl)
        if model is None:  # pragma: no cover - the structure was checked on the client
            raise ModelingError("The loss has no second-order model.")
        self.model: SmoothModel = model
        self._relaxed: dict[float, Any] = {}

    def relaxed(self, C: float | None) -> Any:
        if C is None:
            return None
        if C not in self._relaxed:
            self._relaxed[C] = extension_model(self.model, C)
        return self._relaxed[C]

    def model_for(self, C: float | None) -> SmoothModel:
        ext = self.relaxed(C)
        return self.model if ext is None else ext.model


def _build(spec: _Spec, *blocks: np.ndarray) -> _Part:
    return _Part(spec, *blocks)


def _value_grad(part: _Part, w: np.ndarray, C: float | None) -> tuple[float, np.ndarray, int]:
    value, grad = part.model_for(C).value_grad(w)
    n = part.decl.n
    return value * n, grad * n, n


def _hessian(part: _Part, w: np.ndarray, C: float | None) -> np.ndarray:
    return part.model_for(C).hessian(w) * part.decl.n


def _sums(part: _Part, w: np.ndarray, C: float | None) -> tuple[Any, StableSums | None]:
    """The partition's certificate sums at the feasible point ``w``."""
    decl = part.decl
    ext = part.relaxed(C)
    model = part.model_for(C)
    thetas = model.multipliers(w)
    if C is None:
        sums, _ = value_sums(decl, w, thetas=thetas)
        try:
            stable = stable_sums(decl, w, thetas, radius=np.inf, domain=decl.domain)
        except Exception:  # noqa: BLE001 - an internal failure only forgoes the tighter bound
            stable = None
        return sums, stable
    copies = None if ext is None else ext.copies(w)
    piece = extension_bounds(decl, None, w, None, w, C, thetas=thetas, copies=copies)
    try:
        stable = stable_extension_sums(
            decl, piece[3] if copies is not None else None, None, thetas, w, C=C, radius=np.inf
        )
    except Exception:  # noqa: BLE001
        stable = None
    return ExtensionSums.of(piece), stable


class _Reduced:
    """Value, gradient and Hessian of the mean loss, reduced over the partitions (what
    :func:`~dpcvx.certification.solve.newton` needs from a model)."""

    def __init__(self, client: Any, parts: list, n: int, C: float | None) -> None:
        self.client, self.parts, self.n, self.C = client, parts, n, C
        self.round_trips = 0

    def value_grad(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        self.round_trips += 1
        out = self.client.gather(
            [self.client.submit(_value_grad, p, w, self.C) for p in self.parts]
        )
        value = sum(o[0] for o in out)
        grad = np.sum([o[1] for o in out], axis=0)
        return value / self.n, grad / self.n

    def hessian(self, w: np.ndarray) -> np.ndarray:
        self.round_trips += 1
        out = self.client.gather([self.client.submit(_hessian, p, w, self.C) for p in self.parts])
        return np.sum(out, axis=0) / self.n


class DaskProblem(DeclaredSource):
    """A per-example convex ERM problem whose data are Dask arrays partitioned by rows.

    Parameters
    ----------
    loss, variable, domain
        As for :class:`~dpcvx.Problem`: one example's smooth loss (catalogue atoms of affine
        arguments), the variable ``w`` of shape ``(d,)`` and a public l2-ball or box domain.
    data : dict
        Maps each per-example parameter of ``loss`` to a ``dask.array.Array`` whose first axis
        indexes the ``n`` examples; every array is split into the same row partitions (arrays
        are rechunked to the first one's row chunks).
    client : distributed.Client, optional
        The cluster's client (default: the current one, ``distributed.get_client()``).

    Examples
    --------
    .. code-block:: python

        import cvxpy as cp, dask.array as da, dpcvx
        from distributed import Client, LocalCluster

        client = Client(LocalCluster(n_workers=2))
        X = da.random.default_rng(0).normal(size=(10**7, 20), chunks=(10**6, 20))
        w, x = cp.Variable(20), cp.Parameter(20)
        problem = dpcvx.DaskProblem(cp.logistic(x @ w), w, {x: X}, [cp.norm(w) <= 10])
        sol = problem.solve(regularization=1e-3, accuracy=1e-9)  # certified, rows never moved
    """

    def __init__(
        self,
        loss: cp.Expression,
        variable: cp.Variable,
        data: Mapping[cp.Parameter, Any],
        domain: list[cp.Constraint],
        *,
        client: Any = None,
    ) -> None:
        import cvxpy.lin_ops.lin_utils as lu
        import dask.array as da

        if not data:
            raise InvalidParameterError("`data` must bind every data parameter of the loss.")
        params = tuple(data)
        arrays = []
        for p in params:
            arr = data[p]
            if not isinstance(arr, da.Array):
                raise InvalidParameterError(
                    f"DaskProblem's data must be dask arrays; parameter {p.name()} is bound to "
                    f"a {type(arr).__name__} (use dpcvx.Problem for in-memory data)."
                )
            if arr.ndim != 1 + len(p.shape) or tuple(arr.shape[1:]) != tuple(p.shape):
                raise InvalidParameterError(
                    f"The array for parameter {p.name()} must have shape (n, *{p.shape}); got "
                    f"{arr.shape}."
                )
            arrays.append(arr)
        n = arrays[0].shape[0]
        if not isinstance(n, (int, np.integer)) or any(a.shape[0] != n for a in arrays):
            raise InvalidParameterError(
                "Every data array must have the same, known number of rows (compute unknown "
                "chunk sizes first: `array.compute_chunk_sizes()`)."
            )
        rows = arrays[0].chunks[0]
        self._arrays = [a if a.chunks[0] == rows else a.rechunk({0: rows}) for a in arrays]
        # the public structure: the declaration on zero data of the right shapes
        zeros = {p: np.zeros((1,) + tuple(p.shape)) for p in params}
        self._structure = Declaration(loss, variable, zeros, domain)
        self._decl = self._structure  # the public shape (DeclaredSource)
        if self._structure.domain.kind not in ("l2_ball", "box"):
            raise ModelingError(
                "DaskProblem needs an l2-ball or box domain (its solves are Newton's method "
                "on the ball or box)."
            )
        if self._structure.d > NEWTON_MAX_D or smooth_model(self._structure) is None:
            raise ModelingError(
                "DaskProblem supports losses whose every term is a smooth catalogue atom of an "
                "affine argument (logistic, squared, Huber, exponential, sum of squares, "
                f"log-sum-exp, the squared hinge) with d <= {NEWTON_MAX_D}; use dpcvx.Problem "
                "otherwise."
            )
        self._n = int(n)
        self._spec = _Spec(loss, variable, params, tuple(domain), int(lu.ID_COUNTER.count))
        self._client = client
        self._parts: list | None = None

    # ------------------------------------------------------------------ public shape
    # d, domain, diameter and neighbors come from the structure declaration (public)
    @property
    def n(self) -> int:
        """Number of examples."""
        return self._n

    @property
    def declared(self) -> None:
        """None: the pipeline cannot inspect the data; releases here enforce the claimed
        Lipschitz constant themselves, by solving on the extension."""
        return None

    @property
    def partitions(self) -> int:
        """The number of row partitions."""
        return len(self._arrays[0].chunks[0])

    @property
    def client(self) -> Any:
        if self._client is None:
            from distributed import get_client

            self._client = get_client()
        return self._client

    # ------------------------------------------------------------------ solving
    def _partitions(self) -> list:
        """The partitions' futures (declared on their workers once)."""
        if self._parts is None:
            import dask

            client = self.client
            [spec] = client.scatter([self._spec], broadcast=True)
            blocks = [arr.to_delayed().reshape(-1) for arr in self._arrays]
            tasks = [dask.delayed(_build)(spec, *row) for row in zip(*blocks)]
            self._parts = client.compute(tasks)
        return self._parts

    def solve(
        self, regularization: float = 0.0, center=None, accuracy: float | None = None
    ) -> CertifiedSolution:
        """Minimize ``(1/n) sum_i loss_i(w) + (regularization/2) ||w - center||^2`` over the
        domain on the cluster and return dpcvx's certificate (see :meth:`dpcvx.Problem.solve`;
        ``regularization`` must be positive here)."""
        from dpcvx._validation import check_positive

        lam = check_positive(regularization, "regularization", "DaskProblem.solve")
        if accuracy is not None:
            accuracy = check_positive(accuracy, "accuracy", "DaskProblem.solve")
        return self._solve(lam, resolve_center(self, center), accuracy, None, private=False)

    def _solve(
        self, lam: float, w0: np.ndarray, accuracy: float | None, C: float | None, private: bool
    ) -> CertifiedSolution:
        start = time.perf_counter()
        parts = self._partitions()
        model = _Reduced(self.client, parts, self.n, C)
        dom = self.domain
        w0 = np.asarray(w0, float)
        init = dom.make_feasible(np.clip(w0, dom._lo, dom._hi) if dom.kind == "box" else w0)
        if dom.kind == "l2_ball":
            x, steps = ball_newton(model, lam, w0, init, dom.center, dom.radius)
            method = "Newton"
        else:
            x, steps = newton(model, lam, w0, init)
            method = "Newton"
            if not bool(np.all((x >= dom._lo) & (x <= dom._hi))):
                x, steps = _box_solve(model, lam, w0, init, dom._lo, dom._hi)
                method = "L-BFGS-B + Newton"
        x = dom.make_feasible(np.nan_to_num(np.asarray(x, float)))
        solve_seconds = time.perf_counter() - start
        out = self.client.gather([self.client.submit(_sums, p, x, C) for p in parts])
        values = [o[0] for o in out]
        total = values[0]
        for v in values[1:]:
            total = total.plus(v)
        stables = [o[1] for o in out]
        stable: StableSums | None = None
        if all(s is not None for s in stables):
            stable = stables[0]
            for s in stables[1:]:
                stable = stable.plus(s)  # type: ignore[union-attr]
        direct = (
            None
            if stable is None
            else stable_from_sums(stable, x, lam=lam, w0=w0, domain=dom, w_domain=dom)
        )
        stats = {
            "solver": method,
            "iterations": int(steps),
            "round_trips": model.round_trips + 1,
            "partitions": len(parts),
            "seconds": solve_seconds,
            "certify_seconds": time.perf_counter() - start - solve_seconds,
        }
        try:
            if C is None:
                assert isinstance(total, ValueSums)
                bounds = value_bounds(total, dom, lam=lam, w0=w0, w_hat=x)
                cert = finish_certificate(
                    x, bounds, direct, lam=lam, w0=w0, accuracy=accuracy, stats=stats
                )
            else:
                assert isinstance(total, ExtensionSums)
                stats["extension_C"] = C
                ext_bounds = extension_value_bounds(total, dom, lam=lam, w0=w0, w_hat=x)
                cert = finish_extension(
                    x, ext_bounds, direct, lam=lam, w0=w0, accuracy=accuracy, stats=stats
                )
        except CertificationError:
            if private:
                raise CertificationError(_PRIVATE_FAILURE.format(accuracy=accuracy)) from None
            raise
        if accuracy is not None and cert.gap > accuracy:
            if private:
                raise CertificationError(_PRIVATE_FAILURE.format(accuracy=accuracy))
            raise CertificationError(
                f"dpcvx could not certify the distributed solve to {accuracy:.3g}: the "
                f"certified gap is {cert.gap:.3g}."
            )
        return cert

    # ------------------------------------------------------------------ releasing
    def solve_private(
        self,
        mechanism,
        *,
        epsilon: float,
        delta: float = 0.0,
        rng=None,
        accountant: Accountant | None = None,
    ) -> PrivateResult:
        """Release a differentially private minimizer (see
        :meth:`dpcvx.Problem.solve_private`). Output perturbation runs on the Lipschitz
        extension with its claimed ``lipschitz`` (enforced, not trusted). Mechanisms that
        localize, solve blocks or plan their own extension are refused before anything is
        spent."""
        claim = getattr(mechanism, "lipschitz", None)
        enforcing = isinstance(mechanism, OutputPerturbation) and mechanism.extension == PLAIN
        if not enforcing or set(mechanism.requirements) - {"solver", "project"}:
            raise InvalidParameterError(
                f"DaskProblem releases output perturbation (one certified solve of every "
                f"example); `{type(mechanism).__name__}` needs data access it does not provide."
            )
        if float(getattr(mechanism, "strong_convexity", 0.0) or 0.0) > 0.0:
            raise InvalidParameterError(
                "DaskProblem cannot verify a `strong_convexity` claim (it never sees the data "
                "in one place): leave it at 0 (the regularization gives the strong convexity)."
            )
        probe = extension_model(smooth_model(self._structure), 1.0)  # type: ignore[arg-type]
        if probe is None:
            raise InvalidParameterError(
                "Private releases on a DaskProblem solve on the Lipschitz extension, which "
                "dpcvx writes down for one smooth atom of an affine argument per example "
                "(logistic, squared, Huber, exponential, squared hinge); this loss has another "
                "form."
            )
        return release(
            self,
            mechanism,
            epsilon=epsilon,
            delta=delta,
            rng=rng,
            accountant=accountant,
            extension=float(claim) if enforcing and claim is not None else None,
        )

    def release_context(
        self, *, extension: float | None, solver: str | None, base: bool = False
    ) -> _DaskContext:
        """The data access a mechanism gets once its budget is reserved (internal)."""
        return _DaskContext(self, extension)

    def project(self, point: np.ndarray, localize=None, xi: float | None = None) -> np.ndarray:
        """Euclidean projection onto the public domain (post-processing)."""
        return project_point(self._structure, point, localize=localize, xi=xi)


class _DaskContext:
    """What a mechanism may do during a release on a :class:`DaskProblem`: certified solves of
    every example on the extension (always private) and public projections."""

    def __init__(self, problem: DaskProblem, extension: float | None) -> None:
        self.problem = problem
        self.n, self.d = problem.n, problem.d
        self.domain = problem.domain
        self.extension = extension

    def prepare(self) -> None:
        """Check, before the budget is reserved, that the cluster runs a task (no data)."""
        try:
            ok = self.problem.client.submit(int, 1, pure=False).result(timeout=60)
        except Exception as exc:  # noqa: BLE001
            raise InvalidParameterError(
                f"The Dask cluster cannot run a task ({type(exc).__name__}); nothing was spent."
            ) from None
        if ok != 1:  # pragma: no cover
            raise InvalidParameterError("The Dask cluster returned a wrong result.")

    def solver(self, indices=None, C: float | None = None):
        if indices is not None:  # pragma: no cover - refused in solve_private
            raise CertificationError("A DaskProblem solves every example at once.")
        extension = self.extension if C is None else float(C)
        if extension is None:  # pragma: no cover - solve_private always gives one
            raise CertificationError("A private DaskProblem solve needs an extension.")

        def solve(lam: float, w0: np.ndarray, alpha: float, localize=None, candidate=None):
            if localize is not None:  # pragma: no cover - refused in solve_private
                raise CertificationError("A DaskProblem does not localize.")
            return self.problem._solve(lam, w0, alpha, extension, private=True)

        return solve

    def project(self, point: np.ndarray, localize=None, xi: float | None = None) -> np.ndarray:
        return self.problem.project(point, localize=localize, xi=xi)


def _box_solve(
    model: _Reduced,
    lam: float,
    w0: np.ndarray,
    init: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
) -> tuple[np.ndarray, int]:
    """L-BFGS-B with the box as bounds on the reduced objective, then Newton on the
    coordinates off their bounds."""
    from scipy.optimize import minimize

    def fun(w: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = model.value_grad(w)
        diff = w - w0
        return value + lam / 2 * float(diff @ diff), grad + lam * diff

    res = minimize(
        fun,
        init,
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(lo, hi)),
        options={"maxiter": 2000, "maxcor": 20, "ftol": 0.0, "gtol": 1e-12},
    )
    x = np.clip(np.asarray(res.x, float), lo, hi)
    free = (x > lo) & (x < hi)
    steps = int(res.nit)
    if free.any():
        polished, extra = newton(model, lam, w0, x, free=free)
        if bool(np.all((polished >= lo) & (polished <= hi))):
            x, steps = polished, steps + extra
    return x, steps
