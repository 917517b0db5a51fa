"""The user-facing problem: declare once, solve with a certificate, release privately."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from dpcvx._batching import SMALL_D
from dpcvx._validation import check_nonnegative, check_positive
from dpcvx.accounting.ledger import Accountant
from dpcvx.certification.certificate import CertifiedSolution, still_certified
from dpcvx.certification.extension import ExtensionValues, extension_bounds, folded_values
from dpcvx.certification.lipschitz import enforceable, public_quadratic, remove_quadratic
from dpcvx.certification.solve import (
    certified_solve,
    extension_refusal,
    folded_program,
    folded_terms,
)
from dpcvx.certification.tilted import certified_tilted_solve, tilted_refusal
from dpcvx.compilation.solvers import check_solver, solve_program
from dpcvx.compilation.stamp import stamp
from dpcvx.compilation.template import (
    ConeLayout,
    DomainBlock,
    LazyTemplate,
    Template,
    compile_domain,
    localized_block,
)
from dpcvx.errors import InvalidParameterError
from dpcvx.modeling._expressions import evaluate, substitute
from dpcvx.modeling.declaration import Declaration
from dpcvx.modeling.gradients import is_smooth, per_example_gradients
from dpcvx.modeling.localized import EXACT_PROJECTION, LocalizedDomain
from dpcvx.neighbors import REPLACE_ONE, NeighborRelation
from dpcvx.pipeline import UNIVERSE_TEXT, release
from dpcvx.results import PrivateResult

__all__ = [
    "UNIVERSE_TEXT",
    "DeclaredSource",
    "LipschitzExtension",
    "Problem",
    "ReleaseContext",
    "release",
]


class DeclaredSource:
    """The public shape of a declared problem (``n``, ``d``, the domain of ``w``), read from
    its validated declaration ``_decl``: what :func:`release` needs from a data source."""

    _decl: Any

    @property
    def n(self) -> int:
        """Number of examples."""
        return self._decl.n

    @property
    def d(self) -> int:
        """Dimension of the variable."""
        return self._decl.d

    @property
    def domain(self):
        """The analysed domain (bounding ball, diameter, projection)."""
        return self._decl.domain

    @property
    def diameter(self) -> float:
        """A bound ``D`` on the domain's diameter."""
        return self._decl.domain.diameter

    @property
    def neighbors(self) -> NeighborRelation:
        """One example is one unit of privacy (replace-one neighbors)."""
        return REPLACE_ONE


class Problem(DeclaredSource):
    """A per-example convex ERM problem over a compact public domain.

    Parameters
    ----------
    loss : cvxpy.Expression
        One example's loss: scalar, convex (DCP) in ``variable``, with data entering through
        ``cp.Parameter`` objects (DPP; a scalar data factor times an affine term, such as
        ``y * (x @ w)``, is accepted and rewritten).
    variable : cvxpy.Variable
        The parameter vector ``w`` of shape ``(d,)``.
    data : dict
        Maps each per-example parameter of ``loss`` to an array whose first axis indexes the n
        examples.
    domain : list of cvxpy.Constraint
        The public, compact domain ``W`` (see :mod:`dpcvx.domains` for ready-made ones).

    Examples
    --------
    >>> import cvxpy as cp, numpy as np, dpcvx
    >>> w = cp.Variable(2); x = cp.Parameter(2); y = cp.Parameter()
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]); Y = np.array([1.0, 1.0, -1.0])
    >>> problem = dpcvx.Problem(cp.pos(1 - y * (x @ w)), w, data={x: X, y: Y},
    ...                         domain=[cp.norm(w, 2) <= 1])
    >>> sol = problem.solve(regularization=0.1)
    >>> bool(sol.gap < 1e-6)
    True
    """

    def __init__(
        self,
        loss: cp.Expression,
        variable: cp.Variable,
        data: Mapping[cp.Parameter, Any],
        domain: list[cp.Constraint],
    ) -> None:
        self._decl = Declaration(loss, variable, data, domain)
        self._templates: dict[float | None, LazyTemplate] = {}
        self._domain_block: DomainBlock | None = None

    @property
    def declaration(self) -> Declaration:
        """The validated declaration (lifted loss, terms, data)."""
        return self._decl

    @property
    def declared(self) -> Declaration:
        """The declaration the release pipeline verifies claims against (see
        :class:`dpcvx.pipeline.DataSource`)."""
        return self._decl

    def _domain(self) -> DomainBlock:
        if self._domain_block is None:
            self._domain_block = compile_domain(self._decl)
        return self._domain_block

    def _compiled(self, extension: float | None = None) -> tuple[Template, DomainBlock]:
        lazy, block = self._lazy(extension)
        return lazy(), block

    def _lazy(self, extension: float | None = None) -> tuple[LazyTemplate, DomainBlock]:
        """The template, compiled on its first use (:class:`LazyTemplate`; not checked)."""
        self._domain()
        assert self._domain_block is not None
        if extension not in self._templates:
            self._templates[extension] = LazyTemplate(self._decl, extension)
        return self._templates[extension], self._domain_block

    def _center(self, center) -> np.ndarray:
        return resolve_center(self, center)

    def lipschitz_extension(self, C: float) -> LipschitzExtension:
        """The problem whose per-example loss is the Lipschitz extension
        ``f_C(w, z) = min_{y in W} f(y, z) + C ||w - y||`` (paper 000, eq. (5)): convex,
        C-Lipschitz on the domain for every example, and below ``f``. Output perturbation
        with ``lipschitz=C`` on it is private on every dataset, whatever the data. A penalty
        written into the loss (terms that read no data) is kept exact: the per-example loss
        is ``g_C + P``, ``g`` the terms that read data and ``P`` the penalty
        (:func:`~dpcvx.certification.solve.folded_terms`; neighbours still differ in one
        C-Lipschitz ``g_C``)."""
        return LipschitzExtension(self, C)

    # ------------------------------------------------------------------ solving
    def solve(
        self,
        regularization: float = 0.0,
        center=None,
        accuracy: float | None = None,
        solver: str | None = None,
    ) -> CertifiedSolution:
        """Minimize ``(1/n) sum_i loss_i(w) + (regularization/2) ||w - center||^2`` over the
        domain and return dpcvx's certificate.

        Parameters
        ----------
        regularization : float
            ``lam >= 0`` (``distance_bound`` is finite only for ``lam > 0``).
        center : array-like, optional
            ``w0``; default the center of the domain's bounding ball.
        accuracy : float, optional
            A target for the certified gap; when given, the refinement ladder runs until it is
            met or raises :class:`~dpcvx.CertificationError`.
        solver : {"CLARABEL", "ECOS", "SCS"}, optional
            The first solver to try (default CLARABEL).

        Returns
        -------
        CertifiedSolution
        """
        lam = check_nonnegative(regularization, "regularization", "Problem.solve")
        if accuracy is not None:
            accuracy = check_positive(accuracy, "accuracy", "Problem.solve")
        check_solver(solver)
        w0 = self._center(center)
        # the conic template and the domain's block are compiled only if the ladder reaches
        # the conic program
        return certified_solve(
            self._decl,
            lambda: self._compiled()[0],
            self._domain,
            lam=lam,
            w0=w0,
            accuracy=accuracy,
            solver=solver,
        )

    def solve_private(
        self,
        mechanism,
        *,
        epsilon: float,
        delta: float = 0.0,
        rng=None,
        accountant: Accountant | None = None,
    ) -> PrivateResult:
        """Release a differentially private minimizer.

        Every input is validated and the release is planned from public quantities first
        (nothing spent on bad input). Then the budget is reserved in ``accountant`` (a fresh one
        holding exactly ``(epsilon, delta)`` when None) *before the data is touched*: a
        failure after that point (e.g. :class:`~dpcvx.CertificationError`) keeps it spent and
        releases nothing. The exception's message is fixed text (no data-dependent numbers),
        but its occurrence depends on the data: see ``docs/output_perturbation.md``.

        Parameters
        ----------
        mechanism : OutputPerturbation
            The mechanism with its public parameters.
        epsilon : float
            Privacy parameter, positive and finite.
        delta : float
            In ``[0, 1)``; 0 (default) asks for pure epsilon-DP.
        rng : None, int or numpy.random.Generator
            None (default) draws noise from OS cryptographic randomness; an int gives
            reproducible noise and marks the result ``seeded=True``.
        accountant : Accountant, optional
            Charge this release to an existing budget (composition of several releases).
        """
        return self._release(
            mechanism, epsilon=epsilon, delta=delta, rng=rng, accountant=accountant, extension=None
        )

    def _release(self, mechanism, *, epsilon, delta, rng, accountant, extension):
        return release(
            self,
            mechanism,
            epsilon=epsilon,
            delta=delta,
            rng=rng,
            accountant=accountant,
            extension=extension,
        )

    def release_context(
        self, *, extension: float | None, solver: str | None, base: bool = False
    ) -> ReleaseContext:
        """The data access a mechanism gets once its budget is reserved (internal)."""
        return ReleaseContext(self, extension=extension, solver=solver, base=base)

    def quadratic_removed(self, mu: float, center: np.ndarray) -> Problem:
        """The same data with the loss ``f - (mu/2) ||w - center||^2`` (up to per-example
        constants; convex because dpcvx verified ``mu``), on the same domain (internal: the
        pipeline enforces a Lipschitz claim on it while keeping the strong convexity, see
        :func:`dpcvx.certification.lipschitz.remove_quadratic`)."""
        decl = self._decl
        expr, data = remove_quadratic(decl, mu, center)
        return Problem(expr, decl.variable, data, list(decl.domain.user_constraints))

    def public_quadratic_removed(self) -> tuple[Problem, float, np.ndarray] | None:
        """The same data with the loss's squared terms that read no data taken out (the same
        for every example: ``(mu/2) ||w - a||^2`` plus a constant,
        :func:`~dpcvx.certification.lipschitz.public_quadratic`), with ``mu`` and ``a``; None
        when the loss has none (internal: the pipeline enforces a Lipschitz claim on the rest
        and adds the quadratic to every solve)."""
        found = public_quadratic(self._decl)
        if found is None:
            return None
        mu, center, expr, data = found
        decl = self._decl
        problem = Problem(expr, decl.variable, data, list(decl.domain.user_constraints))
        return problem, mu, center

    def _localized_domain(self, center, radius: float) -> LocalizedDomain:
        """The public domain ``W intersect B(center, radius)`` (``center`` must lie in W)."""
        return LocalizedDomain(self._decl.domain, center, radius)

    def project(self, point: np.ndarray, localize=None, xi: float | None = None) -> np.ndarray:
        """Euclidean projection onto the (public) domain, made exactly feasible; with
        ``localize=(c, r)`` onto ``W intersect B(c, r)`` (paper 000, Lemma C.6 bisection to
        within ``xi`` for the catalogue domains).

        Used on noisy points only (post-processing): for domains without a closed form it
        solves the projection with CVXPY and then makes the answer exactly feasible.
        """
        return project_point(self._decl, point, localize=localize, xi=xi)


def project_point(decl: Declaration, point, localize=None, xi: float | None = None) -> np.ndarray:
    """The body of :meth:`Problem.project` for any declaration (public post-processing)."""
    return DomainProjector(decl.domain, decl.variable, decl.d)(point, localize, xi)


@dataclass(frozen=True, slots=True)
class DomainProjector:
    """The Euclidean projection onto a declaration's public domain, made exactly feasible
    (with ``localize=(c, r)`` onto ``W intersect B(c, r)``). It holds the domain and nothing
    of the data, and pickles: executors receive it with their block."""

    domain: Any
    variable: Any
    d: int

    def __call__(self, point, localize=None, xi: float | None = None) -> np.ndarray:
        base = self.domain
        dom = base if localize is None else LocalizedDomain(base, *localize)
        point = np.asarray(point, float)
        if base.kind in EXACT_PROJECTION:
            if isinstance(dom, LocalizedDomain):
                return dom.make_feasible(dom.project(point, xi))
            return dom.make_feasible(dom.project(point))
        v = cp.Variable(self.d)
        cons = [substitute(c, self.variable, v) for c in dom.constraints]
        cp.Problem(cp.Minimize(cp.sum_squares(v - point)), cons).solve(solver=cp.CLARABEL)
        guess = point if v.value is None else np.asarray(v.value, float)
        return dom.make_feasible(guess)


@dataclass(frozen=True, slots=True)
class SolveSetup:
    """What every certified solve of a release shares, all public (compiled templates, the
    domain and its block, the extension's ``C``, the first solver): no data."""

    template: Template | LazyTemplate
    block: DomainBlock
    plain: Template | LazyTemplate | None
    domain: Any
    extension: float | None
    solver: str | None


@dataclass(frozen=True, slots=True)
class BlockSolve:
    """``solve(lam, w0, alpha, localize=None, candidate=None) -> CertifiedSolution``: the
    certified solve on one block of examples (a module-level class, so that it pickles with
    only its block's rows: a process pool or a Dask worker receives those and the public
    setup, never the whole dataset). ``candidate``: an earlier certificate of the same
    objective over W, returned as is when it also certifies ``alpha`` over the localized
    domain."""

    decl: Declaration
    setup: SolveSetup

    def __call__(
        self,
        lam: float,
        w0: np.ndarray,
        alpha: float,
        localize=None,
        candidate: CertifiedSolution | None = None,
    ) -> CertifiedSolution:
        setup = self.setup
        w_domain, w_block = None, setup.block
        if localize is not None:  # a public W0 = W intersect B(c, r) for w only
            w_domain = LocalizedDomain(setup.domain, *localize)
            if candidate is not None and still_certified(candidate, w_domain, lam, w0, alpha):
                return candidate
            w_block = localized_block(setup.block, w_domain.ball_center, w_domain.ball_radius)
        return certified_solve(
            self.decl,
            setup.template,
            w_block,
            lam=lam,
            w0=w0,
            accuracy=alpha,
            solver=setup.solver,
            private=True,
            extension=setup.extension,
            w_domain=w_domain,
            plain_template=setup.plain,
        )


def resolve_center(source, center) -> np.ndarray:
    """``center`` as a finite vector of shape ``(source.d,)``; None gives the centre of the
    source's domain (its bounding ball)."""
    if center is None:
        return np.asarray(source.domain.center, float).copy()
    c = np.asarray(center, dtype=float)
    if c.shape != (source.d,) or not np.all(np.isfinite(c)):
        raise InvalidParameterError(
            f"The `center` parameter must be a finite vector of shape ({source.d},). "
            f"Got shape {c.shape}."
        )
    return c


class ReleaseContext:
    """What a mechanism may do with the data during a release (after the budget is reserved):
    certified solves (always private: any failure is one fixed :class:`CertificationError`
    text) on all examples or on a block of them, and public projections.

    The templates are checked here, before any block is dispatched; blocks may then run
    concurrently (paper 000, Algorithm 1 on an executor: a template pickles compiled; in one
    process the first block that needs one compiles it, under its lock).
    """

    def __init__(
        self, problem: Problem, *, extension: float | None, solver: str | None, base: bool = False
    ) -> None:
        self.problem = problem
        self.n, self.d = problem.n, problem.d
        self.domain = problem.declaration.domain
        self.extension = extension
        self._solver = solver
        # a PER_SOLVE mechanism (base=True) runs extensions with its own C per phase
        self._key = 1.0 if base else extension
        self._base = base
        # checked on the first solver() call (on the calling thread, before the budget is
        # reserved); compiled by the first solve that needs them (under a lock)
        self._compiled: tuple[LazyTemplate, DomainBlock, LazyTemplate | None] | None = None
        decl = problem.declaration
        #: the public projection (see :meth:`Problem.project`); it holds no data, so blocks
        #: shipped to an executor carry it cheaply
        self.project = DomainProjector(decl.domain, decl.variable, decl.d)
        #: whether small blocks' solves gain from running together (public: the loss's
        #: structure and d). Piecewise-linear losses go to the arrowhead method, which
        #: batches them up to d = 128 (:mod:`dpcvx.certification.batched`); others would
        #: only pay for the threads (paper 000's LDOP, Huber loss, n = 2000: 0.14 s one
        #: after the other, 0.17 s together)
        self.batches = decl.d <= SMALL_D and all(
            term.kind in ("affine", "abs", "pieces") for term in decl.terms
        )

    def solver(self, indices=None, C: float | None = None):
        """``solve(lam, w0, alpha, localize=None, candidate=None) -> CertifiedSolution`` on the
        examples ``indices`` (default all), on the extension with ``C`` (default this
        release's own). ``candidate``: an earlier certificate of the same objective over W,
        returned as is when it also certifies ``alpha`` over the localized domain."""
        decl = self.problem.declaration
        if indices is not None:
            decl = decl.subset(indices)
        self.prepare()
        assert self._compiled is not None
        template, block, plain = self._compiled
        if self._base and C is None:
            raise InvalidParameterError(
                "Internal: a per-solve extension release must give C for every solve."
            )
        extension = self.extension
        if C is not None:
            extension = float(C)
            template = template.extended(extension)
        return BlockSolve(
            decl, SolveSetup(template, block, plain, self.domain, extension, self._solver)
        )

    def refusal(self, lam: float, radius: float | None = None) -> str | None:
        """Why a solve on all the examples over W at ``lam`` (``radius``: over W intersected
        with a ball of that public radius, as a localized stage solves) would be refused on
        every dataset of this size and form (:func:`~dpcvx.certification.solve.extension_refusal`:
        the Lipschitz extension of a loss no fast path writes, whose conic program is too
        large to stamp), or None. Data free (the loss's form on public probe data, ``n`` and
        the templates): a mechanism asks it before the budget is reserved."""
        if self.extension is None:
            return None
        self.prepare()
        assert self._compiled is not None
        template, _, plain = self._compiled
        decl = self.problem.declaration
        C = float(self.extension)
        w_domain = None
        if radius is not None:  # which rungs take a localized domain: its form, not its ball
            inside = self.project(np.asarray(decl.domain.center, float))  # a public point of W
            w_domain = LocalizedDomain(decl.domain, inside, radius)
        return extension_refusal(decl, template, plain, lam=lam, C=C, w_domain=w_domain)[2]

    def prepare(self) -> None:
        """Check the templates the solves need (data-independent; done before the budget is
        reserved: a loss dpcvx cannot compile is refused then). They are compiled on first use
        (:class:`~dpcvx.compilation.template.LazyTemplate`), by the first solve that reaches
        the conic program: the smooth and arrowhead paths need none (an output perturbation
        release of a logistic loss at n = 1e4 spent 0.03 s of its 0.035 s compiling two
        templates it did not use)."""
        if self._compiled is None:
            # the extension's template holds the loss's every atom (and the plain one's
            # cones), so checking it checks both
            template, block = self.problem._lazy(self._key)
            plain = self.problem._lazy(None)[0] if self._key is not None else None
            template.check()
            if plain is not None and template.compiled:  # large: both now (LAZY_ENTRIES)
                plain()
            self._compiled = (template, block, plain)

    def tilted_refusal(
        self, tilt: float, lam: float, accuracy: float | None, lipschitz: float | None
    ) -> str | None:
        """Why :meth:`tilted_solver`'s solves with these public parameters would be refused on
        every dataset of this size and form (:func:`~dpcvx.certification.tilted.tilted_refusal`),
        or None. Data free: a mechanism asks it before the budget is reserved."""
        decl = self.problem.declaration
        if lipschitz is None or not enforceable(decl):
            return None
        L = float(lipschitz)

        def templates():
            return self.problem._compiled(L)[0], self.problem._compiled(None)[0]

        return tilted_refusal(decl, templates, tilt=tilt, lam=lam, accuracy=accuracy, C=L)

    def tilted_solver(self, tilt: float, solver: str | None = None, lipschitz: float | None = None):
        """``solve(lam, w0, alpha)``: the certified tilted-ERM solve (always private). With
        ``lipschitz=L`` the claim is enforced as for output perturbation: examples dpcvx cannot
        certify L-Lipschitz on W are solved on the L-Lipschitz extension of their loss (losses
        with generic terms dpcvx cannot bound keep the plain program and the claim is
        trusted: :func:`~dpcvx.certification.lipschitz.enforceable`)."""
        template, block = self.problem._compiled(None)
        decl = self.problem.declaration
        L = None if lipschitz is None else float(lipschitz)
        enforce = L is not None and enforceable(decl)
        ext_template = self.problem._compiled(L)[0] if enforce else None

        def solve(lam: float, w0: np.ndarray, alpha: float) -> CertifiedSolution:
            if ext_template is not None:
                return certified_tilted_solve(
                    decl,
                    ext_template,
                    block,
                    tilt=tilt,
                    lam=lam,
                    w0=w0,
                    accuracy=alpha,
                    solver=solver,
                    private=True,
                    extension=L,
                    plain_template=template,
                )
            return certified_tilted_solve(
                decl,
                template,
                block,
                tilt=tilt,
                lam=lam,
                w0=w0,
                accuracy=alpha,
                solver=solver,
                private=True,
            )

        return solve

    @property
    def smooth(self) -> bool:
        """Whether every term of the loss is differentiable."""
        return is_smooth(self.problem.declaration)

    def gradients(self, w, indices=None) -> np.ndarray:
        """``(n, d)`` per-example (sub)gradients of the loss at ``w`` (rows ``indices``)."""
        decl = self.problem.declaration
        if indices is not None:
            decl = decl.subset(indices)
        return per_example_gradients(decl, w)

    def loss_values(self, points, indices=None) -> np.ndarray:
        """``f(w_p, z_i)`` for every row ``w_p`` of ``points`` and every example ``i`` in
        ``indices`` (default all): shape ``(len(points), n)``, from the user's own expression
        (vectorized over examples)."""
        decl = self.problem.declaration
        if indices is not None:
            decl = decl.subset(indices)
        pts = np.atleast_2d(np.asarray(points, float))
        n = decl.n
        out = np.empty((pts.shape[0], n))
        chunk = max(1, 2_000_000 // max(n, 1))  # points per vectorized evaluation
        for start in range(0, pts.shape[0], chunk):
            part = pts[start : start + chunk]
            k = part.shape[0]
            leaves = {pid: np.concatenate([arr] * k) for pid, arr in decl.data.items()}
            leaves[decl.variable.id] = np.repeat(part, n, axis=0)
            vals = evaluate(decl.loss, leaves, n * k)
            out[start : start + k] = np.asarray(vals, float).reshape(k, n)
        return out


class LipschitzExtension:
    """A problem whose per-example loss is ``f_C`` (see :meth:`Problem.lipschitz_extension`).

    Every evaluation is certified by dpcvx from the explicit second-order-cone program of the
    extension (paper 000, eq. (16) generalized to every DCP loss and domain dpcvx accepts),
    stamped for all examples at once. For polyhedral losses on SOCP-representable domains
    this is the structured case of paper 000, Prop D.6 / Cor D.7.
    """

    def __init__(self, problem: Problem, C: float) -> None:
        self.C = check_positive(C, "C", "Problem.lipschitz_extension")
        self.problem = problem

    @property
    def n(self) -> int:
        return self.problem.n

    @property
    def d(self) -> int:
        return self.problem.d

    def evaluate(self, w, solver: str | None = None) -> ExtensionValues:
        """Certified per-example values of ``f_C(w, z_i)`` (``lower <= f_C <= upper``), with
        certified ``B``-approximate subgradients of norm at most ``C`` (plus the slope on W of
        a penalty written into the loss, which the folded extension adds to every example:
        :func:`~dpcvx.certification.solve.penalty_slope`)."""
        decl = self.problem.declaration
        point = np.asarray(w, dtype=float)
        if point.shape != (self.d,) or not np.all(np.isfinite(point)):
            raise InvalidParameterError(
                f"`w` must be a finite vector of shape ({self.d},). Got shape {point.shape}."
            )
        if not decl.domain.contains(point):
            raise InvalidParameterError(
                "`w` must lie in the domain (f_C is defined and C-Lipschitz on the domain)."
            )
        fixed = DomainBlock(
            cones=ConeLayout(zero=self.d, nonneg=0, soc=(), exp=0),
            n_cols=self.d,
            w_cols=np.arange(self.d),
            A=sp.identity(self.d, format="csc"),
            b=point.copy(),
        )
        fold = folded_terms(decl, self.C)
        if fold:  # the penalty written into the loss kept exact (see folded_terms)
            prog, parts, indices = folded_program(
                decl,
                self.C,
                fixed,
                lam=0.0,
                w0=np.zeros(self.d),
                plain_template=lambda: self.problem._compiled()[0],
            )
            raw = solve_program(prog, solver, tight=True)
            upper, lower, g = folded_values(decl, parts, indices, raw.x, raw.z, point, self.C, fold)
            return ExtensionValues(
                w=point, C=self.C, upper=upper, lower=lower, subgradients=g, B=upper - lower
            )
        template, _ = self.problem._compiled(self.C)
        theta = template.theta(decl.derived_values(), self.n)
        prog = stamp(template, fixed, theta, d=self.d, lam=0.0, w0=np.zeros(self.d))
        raw = solve_program(prog, solver, tight=True)
        upper, lower, g, _, _, _ = extension_bounds(decl, prog, raw.x, raw.z, point, self.C)
        return ExtensionValues(
            w=point, C=self.C, upper=upper, lower=lower, subgradients=g, B=upper - lower
        )

    def subgradient(self, w, solver: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(g, B)``: per-example ``g_i`` with ``||g_i|| <= C`` and
        ``f_C(u, z_i) >= f_C(w, z_i) + <g_i, u - w> - B_i`` for all ``u`` in the domain."""
        vals = self.evaluate(w, solver)
        return vals.subgradients, vals.B

    def solve(
        self,
        regularization: float,
        center=None,
        accuracy: float | None = None,
        solver: str | None = None,
        localize: tuple | None = None,
    ) -> CertifiedSolution:
        """Certified solve of ``min_{W0} (1/n) sum_i f_C(w, z_i) + (lam/2)||w - center||^2`` as
        the joint program of paper 000, Lemma 2.7 (one conic program, compiled once).

        ``localize=(c, r)`` restricts ``w`` to ``W0 = W intersect B(c, r)`` (paper 000,
        Algorithms 2 and 4; ``c`` must be public, e.g. a private release, and in W), while
        every ``y_i`` still ranges over W as the extension's definition requires.
        """
        owner = "LipschitzExtension.solve"
        lam = check_positive(regularization, "regularization", owner)
        if accuracy is not None:
            accuracy = check_positive(accuracy, "accuracy", owner)
        check_solver(solver)
        w0 = self.problem._center(center)
        block: DomainBlock | Callable[[], DomainBlock] = self.problem._domain
        w_domain = None
        if localize is not None:
            w_domain = self.localized_domain(*localize)
            block = localized_block(
                self.problem._domain(), w_domain.ball_center, w_domain.ball_radius
            )
        return certified_solve(
            self.problem.declaration,
            lambda: self.problem._compiled(self.C)[0],
            block,
            lam=lam,
            w0=w0,
            accuracy=accuracy,
            solver=solver,
            extension=self.C,
            w_domain=w_domain,
            plain_template=lambda: self.problem._compiled()[0],
        )

    def localized_domain(self, center, radius: float) -> LocalizedDomain:
        """The public domain ``W intersect B(center, radius)``."""
        return self.problem._localized_domain(center, radius)

    def solve_private(
        self,
        mechanism,
        *,
        epsilon: float,
        delta: float = 0.0,
        rng=None,
        accountant: Accountant | None = None,
    ) -> PrivateResult:
        """A private release for the extension's ERM: the mechanism's ``lipschitz`` must be at
        least ``C`` (and then holds for every possible example by construction)."""
        return self.problem._release(
            mechanism,
            epsilon=epsilon,
            delta=delta,
            rng=rng,
            accountant=accountant,
            extension=self.C,
        )
