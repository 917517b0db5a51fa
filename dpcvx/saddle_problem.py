"""Private adversarial training with a general (convex-concave) adversary: paper 002, Sec 5.2.

:class:`SaddleProblem` declares ``min_{w in W} max_{v_i in S} (1/n) sum_i f(w, v_i; z_i)`` with
``f`` convex in ``w`` and concave in ``v``; :meth:`SaddleProblem.solve` certifies it
(:mod:`dpcvx.certification.saddle`) and ``solve_private(dpcvx.OutputPerturbation(...))`` is
Algorithm 8 of paper 002 with the certified accuracy in place of the min-max solver's
iteration count, and the corrected inflation ``Delta + 2 sqrt(2 alpha / lam)`` (digest
erratum 2) in both noise branches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import cvxpy as cp
import numpy as np

from dpcvx._validation import check_nonnegative, check_positive
from dpcvx.accounting.ledger import Accountant
from dpcvx.certification.certificate import CertifiedSolution
from dpcvx.certification.saddle import MAX_ROUNDS, InnerBounds, SaddleSolver, inner_bounds
from dpcvx.compilation.solvers import check_solver
from dpcvx.errors import InvalidParameterError
from dpcvx.mechanisms.base import Mechanism
from dpcvx.modeling.saddle import SaddleDeclaration
from dpcvx.pipeline import release
from dpcvx.problem import DeclaredSource, project_point, resolve_center
from dpcvx.results import PrivateResult

__all__ = ["SaddleProblem"]


class SaddleProblem(DeclaredSource):
    """Per-example convex-concave ERM: adversarial training against a general adversary.

    Minimizes ``G(w) = (1/n) sum_i max_{v in S} f(w, v; z_i)`` over the public domain ``W``
    (paper 002, Section 5.2, Assumptions 1-2): each example has its own adversary ``v_i`` in
    the public perturbation set ``S``.

    Parameters
    ----------
    loss : cvxpy.Expression
        One example's loss ``f(w, v; z)`` in ``variable`` (``w``) and ``perturbation``
        (``v``), data entering through parameters. With ``v`` held fixed it must be convex
        (DCP, DPP) in ``w``; the terms that involve ``v`` must, with ``w`` held fixed, be
        concave (DCP) in ``v``. The joint expression need not be DCP (``v @ w`` is fine).
    variable, perturbation : cvxpy.Variable
        ``w`` of shape ``(d,)`` and ``v`` of shape ``(p,)``.
    data : dict
        Per-example data, as for :class:`~dpcvx.Problem`.
    domain, perturbation_set : list of cvxpy.Constraint
        The public compact convex sets ``W`` and ``S``.
    max_rounds : int
        Public cap on the cutting-set rounds of one certified solve (default 40).

    Notes
    -----
    For linear models whose loss is *convex* in the input perturbation (hinge, logistic,
    absolute error of ``(x + v) @ w``), Assumption 2 fails but the inner max has a closed
    form: use :func:`dpcvx.losses.robust_hinge` and its siblings with :class:`~dpcvx.Problem`.

    For a private release, ``lipschitz`` of :class:`~dpcvx.OutputPerturbation` must bound the
    Lipschitz constant in ``w`` over ``W`` of ``max_{v in S} f(w, v; z)`` for **every**
    possible example (paper 002, Lemma 5.4; digest P5: on ``X + S``), and
    ``strong_convexity`` that of every ``f(., v; z)``. Both are the user's public claims, and
    dpcvx trusts them here (there is no Lipschitz extension of the saddle objective): an
    example far outside the claim can make the certified solve slow or fail, and a failure
    (one fixed :class:`~dpcvx.CertificationError` text, budget spent) is a data-dependent
    event outside the guarantee.

    Examples
    --------
    >>> import cvxpy as cp, numpy as np, dpcvx
    >>> w = cp.Variable(2); v = cp.Variable(2); x = cp.Parameter(2); y = cp.Parameter()
    >>> X = np.array([[1.0, 0.5], [-0.5, 1.0], [-1.0, -0.2]]); Y = np.array([1.0, 1.0, -1.0])
    >>> loss = cp.logistic(-y * (x @ w)) + y * (v @ w) - 0.5 * cp.sum_squares(v)
    >>> problem = dpcvx.SaddleProblem(loss, w, v, data={x: X, y: Y},
    ...                               domain=[cp.norm(w, 2) <= 1],
    ...                               perturbation_set=[cp.norm(v, 2) <= 0.2])
    >>> sol = problem.solve(regularization=0.1, accuracy=1e-6)
    >>> bool(sol.gap <= 1e-6)
    True
    """

    def __init__(
        self,
        loss: cp.Expression,
        variable: cp.Variable,
        perturbation: cp.Variable,
        data: Mapping[cp.Parameter, Any],
        domain: list[cp.Constraint],
        perturbation_set: list[cp.Constraint],
        max_rounds: int = MAX_ROUNDS,
    ) -> None:
        if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 2:
            raise InvalidParameterError(
                f"`max_rounds` of `SaddleProblem` must be an integer >= 2. Got {max_rounds!r}."
            )
        self._decl = SaddleDeclaration(loss, variable, perturbation, data, domain, perturbation_set)
        self.max_rounds = max_rounds
        self._solvers: dict[str | None, SaddleSolver] = {}

    @property
    def declaration(self) -> SaddleDeclaration:
        """The validated saddle declaration."""
        return self._decl

    def _solver(self, solver: str | None) -> SaddleSolver:
        if solver not in self._solvers:
            self._solvers[solver] = SaddleSolver(
                self._decl, solver=solver, max_rounds=self.max_rounds
            )
        return self._solvers[solver]

    def solve(
        self,
        regularization: float = 0.0,
        center=None,
        accuracy: float | None = None,
        solver: str | None = None,
    ) -> CertifiedSolution:
        """Minimize ``G(w) + (regularization/2)||w - center||^2`` over ``W`` with dpcvx's
        certificate: ``lower <= min G <= G(w) <= upper`` (``solver_stats`` has the rounds).

        With ``accuracy`` the rounds run until the certified gap meets it (else
        :class:`~dpcvx.CertificationError`); without, until the gap stops halving.
        """
        lam = check_nonnegative(regularization, "regularization", "SaddleProblem.solve")
        if accuracy is not None:
            accuracy = check_positive(accuracy, "accuracy", "SaddleProblem.solve")
        check_solver(solver)
        w0 = resolve_center(self, center)
        return self._solver(solver).solve(lam, w0, accuracy)

    def adversary(self, w, solver: str | None = None) -> InnerBounds:
        """The adversaries' certified best responses at ``w``: per example an upper bound on
        ``max_{v in S} f(w, v; z_i)`` and a point of ``S`` attaining it within the bound."""
        point = np.asarray(w, float)
        if point.shape != (self.d,) or not self.domain.contains(point):
            raise InvalidParameterError(
                f"`w` must be a finite vector of shape ({self.d},) in the domain."
            )
        runner = self._solver(solver)
        runner.prepare()
        return inner_bounds(self._decl, point, runner._inner_template, solver=solver)

    def solve_private(
        self,
        mechanism,
        *,
        epsilon: float,
        delta: float = 0.0,
        rng=None,
        accountant: Accountant | None = None,
    ) -> PrivateResult:
        """Release a private minimizer of ``G`` with :class:`~dpcvx.OutputPerturbation`
        (paper 002, Algorithm 8; see :meth:`dpcvx.Problem.solve_private` for the arguments and
        the failure semantics)."""
        if not (isinstance(mechanism, Mechanism) and mechanism.enforces_lipschitz):
            raise InvalidParameterError(
                "A SaddleProblem is released with dpcvx.OutputPerturbation (paper 002, "
                f"Algorithm 8). Got {type(mechanism).__name__}."
            )
        return release(
            self, mechanism, epsilon=epsilon, delta=delta, rng=rng, accountant=accountant
        )

    @property
    def declared(self) -> None:
        """A saddle declaration's claims are trusted, not verified (see
        :class:`dpcvx.pipeline.DataSource`)."""
        return None

    def release_context(self, *, extension, solver, base=False) -> _SaddleReleaseContext:
        """The data access of a release (internal)."""
        return _SaddleReleaseContext(self, solver)

    def project(self, point) -> np.ndarray:
        """Euclidean projection onto ``W`` (public post-processing)."""
        return project_point(self._decl.outer, point)


class _SaddleReleaseContext:
    """Certified saddle solves (always private) and public projections."""

    def __init__(self, problem: SaddleProblem, solver: str | None) -> None:
        self.problem = problem
        self.n, self.d = problem.n, problem.d
        self.domain = problem.domain
        self._runner = problem._solver(solver)

    def prepare(self) -> None:
        self._runner.prepare()  # data-independent compilation, before the budget is reserved

    def solver(self, indices=None, C: float | None = None):
        """``solve(lam, w0, alpha)``: the certified saddle solve on every example (blocks and
        extensions are not available for saddle problems)."""
        if indices is not None or C is not None:
            raise InvalidParameterError(
                "A SaddleProblem release solves on every example and on the declared loss: "
                "block solves and Lipschitz extensions are not available."
            )
        runner = self._runner

        def solve(lam: float, w0: np.ndarray, alpha: float) -> CertifiedSolution:
            return runner.solve(lam, w0, alpha, private=True)

        return solve

    def project(self, point, localize=None, xi: float | None = None) -> np.ndarray:
        """Euclidean projection onto ``W`` (localized domains are not available here)."""
        if localize is not None:
            raise InvalidParameterError("A SaddleProblem release projects onto W only.")
        return self.problem.project(point)
