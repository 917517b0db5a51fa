"""Certified solves: stamp, solve, certify, refine until the gap meets the target.

The refinement ladder is fixed in advance and never looks at the data to choose what to
release: the requested solver at its default tolerances (skipped when the public accuracy
target is below ``TIGHT_FIRST``), the same at its tightest, then the other solvers at their
tightest. The first certificate whose gap meets ``accuracy`` is returned;
if none does, :class:`CertificationError` is raised and nothing is released.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from dpcvx._allocator import settle_allocator, solving_allocator
from dpcvx.certification._moves import moved, moved_offsets, term_targets
from dpcvx.certification._rows import take_rows
from dpcvx.certification.arrowhead import (
    SCREEN_REACH,
    Bounds,
    ExtensionPieces,
    PiecewiseModel,
    _probe,
    arrowhead_ipm,
    extension_pieces,
    parallel_affine,
    piecewise_model,
    recentered_pieces,
    screened_ipm,
)
from dpcvx.certification.ball import (
    ON_SPHERE,
    BallCopies,
    BallRegion,
    Pieces1D,
    dual_at_w,
    smooth_copies_in,
)
from dpcvx.certification.box import BalanceMemo, BoxRegion, at_bounds, balanced_duals
from dpcvx.certification.certificate import CertifiedSolution, _minorants, certify
from dpcvx.certification.copy_blocks import CopyBlocks
from dpcvx.certification.extension import certify_extension, extension_bounds
from dpcvx.certification.lipschitz import argument_reach, enforceable, lipschitz_bounds
from dpcvx.certification.mixed import MixedModel, mixed_model, proximal_newton
from dpcvx.certification.penalized import (
    PenalizedModel,
    PenaltyStep,
    penalized_model,
    penalized_newton,
)
from dpcvx.certification.penalty_cones import PenaltyCones
from dpcvx.certification.stable import STABLE_KINDS, sub_values
from dpcvx.certification.subgradient import (
    affordable,
    regularized_subgradient_bound,
    solve_declaration,
    subgradient_iterations,
)
from dpcvx.compilation.solvers import SOLVERS, RawSolution, check_solver, solve_program
from dpcvx.compilation.stamp import StampedProgram, stamp, stamp_parts
from dpcvx.compilation.template import (
    DomainBlock,
    Template,
    canonical_template,
    compile_template,
    finish_template,
)
from dpcvx.errors import CertificationError, SolverError
from dpcvx.modeling._expressions import Unsupported, affine_jet
from dpcvx.modeling._structure import MONOTONE
from dpcvx.modeling.declaration import Declaration, once_per_declaration
from dpcvx.modeling.gradients import is_smooth, per_example_gradients
from dpcvx.modeling.localized import LocalizedDomain
from dpcvx.modeling.smooth import (
    RECENTER_RATIO,
    SmoothExtension,
    SmoothModel,
    extension_model,
    recentered,
    smooth_model,
)

if TYPE_CHECKING:
    from dpcvx.modeling.domains import Domain

__all__ = ["ball_newton", "certified_solve", "newton", "refinement_ladder"]

_PRIVATE_FAILURE = (
    "dpcvx could not certify the solve to the accuracy target {accuracy:.6g} (fixed from public "
    "quantities) with its fixed refinement ladder. Nothing was released and the budget stays "
    "spent. This message carries no data-dependent number, but the failure itself depends on "
    "the data: do not retry on the same data without charging the budget again. To fix: raise "
    "the mechanism's `accuracy` (it inflates the sensitivity by 2*sqrt(2*accuracy/m)), raise "
    "`regularization`, or rescale the data so that losses are of order one."
)


#: accuracy targets below this start the ladder at the solver's tightest tolerances (a
#: default-tolerance interior-point solve rarely certifies them; skipping it saves one solve)
TIGHT_FIRST = 1e-6


def refinement_ladder(
    solver: str | None, accuracy: float | None = None
) -> tuple[tuple[str, bool], ...]:
    """The (solver, tight) steps tried in order (a function of public inputs only)."""
    first = check_solver(solver)
    start = () if accuracy is not None and accuracy < TIGHT_FIRST else ((first, False),)
    return start + ((first, True),) + tuple((s, True) for s in SOLVERS if s != first)


def certified_solve(
    decl: Declaration,
    template: Template | Callable[[], Template],
    domain_block: DomainBlock | Callable[[], DomainBlock],
    *,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None = None,
    solver: str | None = None,
    private: bool = False,
    extension: float | None = None,
    w_domain: Domain | LocalizedDomain | None = None,
    plain_template: Template | Callable[[], Template] | None = None,
) -> CertifiedSolution:
    """Solve the regularized ERM and certify it (see the module docstring).

    ``template`` (and ``plain_template``, and ``domain_block``) may be a function that
    compiles it: it is called only when the ladder reaches the conic program (the smooth and
    arrowhead paths need none).

    With ``accuracy=None`` the first successful solve is certified and returned, whatever its
    gap (the gap is in the result); with a target, the ladder runs until the gap meets it.
    With ``private=True`` (a mechanism's solve) any failure raises one fixed
    :class:`CertificationError` text: no gap, solver report or other data-dependent number
    leaves this function (its cause is suppressed too). With ``extension=C`` the template is
    the Lipschitz extension's and the joint program of Lemma 2.7 is certified, with ``w``
    ranging over ``w_domain`` when given (``domain_block`` must then be its compiled block).
    With ``plain_template`` (the plain loss's template) the extension's program keeps the plain
    block for every example whose loss is C-Lipschitz on W by
    :func:`~dpcvx.certification.lipschitz.lipschitz_bounds` (there ``f_C = f``): the same
    optimization problem, with a copy ``y_i`` only for the other examples. The certificate is
    the extension's for every example either way.
    """
    settle_allocator()  # once per process: see dpcvx._allocator
    with solving_allocator():  # freed memory kept while it runs: see dpcvx._allocator

        def run(
            part: Declaration, lam_part: float, target: float | None, **extra: Any
        ) -> CertifiedSolution:
            common: dict[str, Any] = dict(
                lam=lam_part,
                w0=w0,
                accuracy=target,
                solver=solver,
                private=private,
                w_domain=w_domain,
                **extra,
            )
            if extension is not None and folded_light(part, extension):
                # every example's terms that read data are C-Lipschitz on W: there g_C = g,
                # and the folded program is plain ERM (its rungs hold the penalty once)
                cert = _certified_solve(
                    part,
                    plain_template
                    if plain_template is not None
                    else lambda: compile_template(part),
                    domain_block,
                    extension=None,
                    **common,
                )
                stats = dict(cert.solver_stats)
                stats.update(extension_C=float(extension), extension_copies=0)
                return _with_stats(cert, stats)
            return _certified_solve(
                part,
                template,
                domain_block,
                extension=extension,
                plain_template=plain_template,
                **common,
            )

        if not private:
            return run(decl, lam, accuracy)
        if extension is not None:
            # decided from the loss's form and n, before any rung (and before the universe's
            # cut): where no fast rung writes the extension, a dataset of C-Lipschitz examples
            # must not release on one while a neighbour's program is too large to stamp
            template, plain_template, refused = extension_refusal(
                decl, template, plain_template, lam=lam, C=float(extension), w_domain=w_domain
            )
            if refused is not None:
                raise CertificationError(
                    refused + " Nothing was released; a budget reserved for it stays spent."
                )
        try:
            fold = folded_terms(decl, extension)
            data = decl if not fold else decl.with_terms(_rest(decl, fold))
            kept = None if extension is None else universe_indices(data, extension)
            if kept is None:
                return run(decl, lam, accuracy)
            if kept.size == 0 and fold:
                # only the penalty the folded extension keeps exact is left
                alone = decl.rows(0, 1).with_terms(fold)
                return _certified_solve(
                    alone,
                    lambda: compile_template(alone),
                    domain_block,
                    lam=lam,
                    w0=w0,
                    accuracy=accuracy,
                    solver=solver,
                    private=private,
                    extension=None,
                    w_domain=w_domain,
                )
            if kept.size == 0:
                return _regularizer_only(decl, lam=lam, w0=w0, accuracy=accuracy, w_domain=w_domain)
            # (1/n) sum_{kept} f_i + (lam/2)||w - w0||^2 = (k/n) [(1/k) sum_{kept} f_i +
            # (lam n / k)/2 ||w - w0||^2]: the same minimizer, gaps scaled by k/n
            scale = decl.n / kept.size
            part = decl.subset(kept)
            if fold:
                # the penalty kept exact weighs one in F, so n / k in the kept examples' F_k:
                # the templates of the reweighted loss are compiled for it
                part = part.with_terms(frozenset(range(len(decl.terms))), scale, fold)
                template = lambda: compile_template(part, extension)  # noqa: E731
                plain_template = lambda: compile_template(part)  # noqa: E731
            cert = run(
                part,
                lam * scale,
                None if accuracy is None else accuracy * scale,
                public_n=decl.n,  # the size limit counts every example, kept or not
            )
            return _rescaled(cert, kept.size / decl.n, lam, accuracy)
        except Exception:  # noqa: BLE001 - nothing data-dependent may leave a private solve
            raise CertificationError(_PRIVATE_FAILURE.format(accuracy=accuracy)) from None


_NO_EXTENSION_PATH = (
    "dpcvx cannot solve the Lipschitz extension of this loss at n = {n}: no path without a "
    "conic program writes the extension of a loss of this form, and its conic program, about "
    "{size:.3g} nonzeros, is more than dpcvx hands to a conic solver (MAX_PROGRAM_NNZ). This "
    "is decided from n, d, the domain and the loss's form only. To fix: release on fewer "
    "examples (a subsample), or write the loss in a form whose extension a fast path writes "
    "(one smooth atom of an affine argument, plus affine terms along it that leave slopes of "
    "both signs; one maximum of at most four affine pieces with slopes of both signs; "
    "output perturbation's enforced claim keeps squared terms that read no data out of the "
    "extension). With `strong_convexity` set, the claim is "
    "enforced on the loss minus its quadratic, whose extension has no fast path unless that "
    "quadratic reads no data: leave `strong_convexity` at 0 and put the modulus in "
    "`regularization`."
)


def writes_extension(
    decl: Declaration, *, lam: float, C: float, w_domain: Domain | LocalizedDomain | None
) -> bool:
    """Whether a rung without a conic program solves the C-Lipschitz extension of this loss on
    every dataset of its form, steep examples included: decided on the loss's form alone, its
    rungs' conditions evaluated on public probe data of the data's shapes
    (:func:`~dpcvx.certification.arrowhead._probe`; no probe, a data expression that is not
    rational: False), with ``d``, the domain and ``lam``."""
    if folded_terms(decl, C):  # the folded extension takes the conic program
        return False
    probe = _probe(decl)
    return probe is not None and any(
        applies(probe, lam=lam, extension=C, w_domain=w_domain, heavy=True)
        for applies in (smooth_rung_applies, pieces_rung_applies)
    )


def extension_refusal(
    decl: Declaration,
    template: Template | Callable[[], Template],
    plain_template: Template | Callable[[], Template] | None,
    *,
    lam: float,
    C: float,
    w_domain: Domain | LocalizedDomain | None,
) -> tuple[Template | Callable[[], Template], Template | Callable[[], Template] | None, str | None]:
    """Why a private solve of the C-Lipschitz extension on these ``decl.n`` examples is refused
    for every dataset (None: it is not), with the templates (compiled if the answer needed
    them). A loss whose extension no fast rung writes (:func:`writes_extension`) runs on the
    conic program whenever an example is steeper than C; where that program is too large to
    stamp (:data:`MAX_PROGRAM_NNZ`, counted from ``n`` and the templates), a dataset whose
    examples are all C-Lipschitz would release on a fast rung and its neighbour with one steep
    example abort: the solve is refused for both instead. Public quantities only."""
    if writes_extension(decl, lam=lam, C=C, w_domain=w_domain):
        return template, plain_template, None
    if folded_terms(decl, C):
        size = _folded_size(decl.n, _folded_templates(decl, C, plain_template))
        if size <= MAX_PROGRAM_NNZ:
            return template, plain_template, None
        return template, plain_template, _NO_EXTENSION_PATH.format(n=decl.n, size=size)
    if callable(template):
        template = template()
    if callable(plain_template):
        plain_template = plain_template()
    size = _conic_size(decl.n, template, plain_template)
    if size <= MAX_PROGRAM_NNZ:
        return template, plain_template, None
    return template, plain_template, _NO_EXTENSION_PATH.format(n=decl.n, size=size)


#: the public numeric universe of private Lipschitz-extension solves (DESIGN section 5, "no
#: data-dependent abort"): an example whose loss dpcvx cannot show to be
#: ``UNIVERSE_SLOPE * C``-Lipschitz on the domain is given the zero loss. This map reads one
#: example at a time (neighbours stay neighbours) and the zero loss is C-Lipschitz, so every
#: guarantee of the extension's mechanisms holds unchanged; it keeps the stamped program's
#: coefficients within a public range of C, where float64 and the interior-point solvers
#: certify the targets (an example 1e8 times steeper than C made every rung fail before). Such
#: an example moves ``f_C``'s average by at most ``C D / n``; losses with terms dpcvx cannot
#: bound (generic terms) keep every example.
UNIVERSE_SLOPE = 1e4
#: the same for losses with curved terms (squares, exponentials, powers), whose values grow
#: like the square of the slope: 1e2 keeps their values within 1e4 of the extension's scale
UNIVERSE_SLOPE_CURVED = 1e2
_CURVED = ("square", "sum_squares", "exp", "pos_power", "pos_huber", "max_terms", "norm2_power")


def universe_slope(decl: Declaration) -> float:
    """The public factor of the universe for this loss (a function of its structure only)."""
    curved = any(term.kind in _CURVED for term in decl.terms)
    return UNIVERSE_SLOPE_CURVED if curved else UNIVERSE_SLOPE


def folded_terms(decl: Declaration, extension: float | None) -> frozenset[int]:
    """The terms the folded Lipschitz extension keeps exact (empty without an extension): a
    penalty written into the loss, every term that reads no data (affine and generic ones
    included), where some curved or piecewise term reads no data and another reads data. With
    an extension ``C`` the program is ``(1/n) sum_i g_C(w, z_i) + P(w) + (lam/2)||w - w0||^2``,
    ``g`` the terms that read data and ``P`` the others: neighbours differ in one example's
    ``g_C``, which is C-Lipschitz, and ``P`` is public and convex, so the sensitivity
    ``2 C / (lam n)`` holds as for the extension of the whole loss; an example is extended
    only where its terms that read data are steeper than C, and the penalty is held once,
    never extended. A loss whose only curved or piecewise term reads no data
    (``cp.abs(w[0]) - y * w[0]``) is extended whole. Decided from the loss's form only."""
    if extension is None:
        return frozenset()
    terms = decl.terms
    free = frozenset(i for i, t in enumerate(terms) if not t.reads_data)
    curved_free = any(terms[i].kind != "affine" for i in free)
    curved_data = any(t.kind != "affine" and i not in free for i, t in enumerate(terms))
    return free if curved_free and curved_data else frozenset()


def penalty_slope(decl: Declaration, C: float) -> float:
    """A bound on the Lipschitz constant on W of the penalty the folded extension keeps
    exact (:func:`folded_terms`; 0 without one), from the loss's form and constants only:
    the folded extension's per-example terms ``g_C + P`` are ``C`` plus this Lipschitz."""
    fold = folded_terms(decl, C)
    if not fold:
        return 0.0
    return float(lipschitz_bounds(decl.rows(0, 1).with_terms(fold))[0])


def folded_light(decl: Declaration, C: float) -> bool:
    """Whether the folded extension (:func:`folded_terms`) extends no example: every example's
    terms that read data certified C-Lipschitz on W (its bound rounded up), where
    ``g_C = g`` and the program is plain ERM. False without a penalty to fold."""
    return bool(folded_terms(decl, C)) and not folded_groups(decl, C)[1][1].size


def _rest(decl: Declaration, fold: frozenset[int]) -> frozenset[int]:
    """The terms of ``decl`` other than ``fold`` (those the folded extension extends)."""
    return frozenset(range(len(decl.terms))) - fold


#: the folded extension's blocks, per loss, domain and C (:func:`_folded_templates`)
_FOLDED: dict[tuple, tuple] = {}
_FOLDED_KEEP = 8


def _folded_templates(
    decl: Declaration, C: float, plain_template: Template | Callable[[], Template] | None
) -> tuple[Template, Template, Template]:
    """The folded extension's blocks ``(light, heavy, once)``: the loss without its penalty
    (an example C-Lipschitz on W), its extension without the penalty (one steeper), and the
    penalty (held once, weighted one): the plain template's :attr:`~dpcvx.compilation.
    template.Template.held` where the penalty is the terms models hold once, else compiled
    here. Compiled once per loss, domain and C."""
    key = (id(decl.lifted), id(decl.domain), float(C))
    found = _FOLDED.get(key)
    if found is not None and found[0] is decl.lifted and found[1] is decl.domain:
        return found[2]
    fold = folded_terms(decl, C)
    rest = _rest(decl, fold)
    if fold == decl.shared_terms:
        plain = plain_template() if callable(plain_template) else plain_template
        if plain is None:
            plain = compile_template(decl)
        if plain.held is None:
            raise SolverError("The penalty written into the loss does not compile as one block.")
        light, once = plain.held
    else:
        light = finish_template(canonical_template(decl, skip=fold))
        once = finish_template(canonical_template(decl, skip=rest))
        if once.A_map.shape[0] != 1:  # (p + 1 rows: the penalty reads no parameter)
            raise SolverError("The penalty written into the loss reads a parameter.")
    heavy = finish_template(canonical_template(decl, C, skip=fold))
    blocks = (light, heavy, once)
    if len(_FOLDED) >= _FOLDED_KEEP:
        _FOLDED.pop(next(iter(_FOLDED)))
    _FOLDED[key] = (decl.lifted, decl.domain, blocks)
    return blocks


#: every declaration's structural bounds, computed once (a private block solve asks up to
#: three times: its universe, its rung and the rung's relaxation)
_BOUNDS: weakref.WeakKeyDictionary[Declaration, np.ndarray] = weakref.WeakKeyDictionary()
_REACH: weakref.WeakKeyDictionary[Declaration, dict | None] = weakref.WeakKeyDictionary()


def _once(store: weakref.WeakKeyDictionary, decl: Declaration, compute: Callable) -> Any:
    """``compute(decl)``, once per declaration (its arrays read-only)."""

    def frozen(d: Declaration) -> Any:
        out = compute(d)
        for item in [out] if isinstance(out, np.ndarray) else (out or {}).values():
            for arr in [item] if isinstance(item, np.ndarray) else item:
                arr.flags.writeable = False
        return out

    return once_per_declaration(store, decl, frozen)


def _lipschitz_bounds(decl: Declaration) -> np.ndarray:
    """:func:`~dpcvx.certification.lipschitz.lipschitz_bounds` of ``decl``, once per
    declaration (read-only)."""
    return _once(_BOUNDS, decl, lambda d: np.asarray(lipschitz_bounds(d), float))


#: the public range of the loss's arguments in a private extension solve: an example whose
#: term argument can exceed this on the domain's bounding ball (a label of 1e300 in a Huber
#: loss, whose slope stays 2M ||x||) is given the zero loss, as one outside the slope universe
#: is. Float64 then holds every value and sum the certificate forms (``2 M |E|`` overflowed
#: from a label of 9e307; sums over n examples need far more room)
UNIVERSE_ARGUMENT = 1e100
#: the same for the curved terms (their values grow like a power of the argument)
UNIVERSE_ARGUMENT_BY_KIND = {
    "square": 1e50,
    "sum_squares": 1e50,
    "pos_power": 1e50,
    "pos_huber": 1e50,
    "norm2_power": 1e50,
    "max_terms": 1e50,
}
#: the largest argument of ``exp`` (whose value overflows from 710) in the universe, upward
UNIVERSE_EXP = 600.0
#: the curved terms whose arguments may not lie, where the term is not zero there, over
#: ``RECENTER_RATIO`` times their spread over the ball from it (plus one): such a term is
#: nearly constant on the domain with a value of the argument's square or more (a row of
#: zeros with a label of 1e6 in a squared loss: 1e12, which its slope, zero, left in the slope
#: universe), and the smooth path's steps and the curved terms' gaps, relative to the values,
#: could not resolve it: those releases aborted from a label of 1e4
UNIVERSE_FAR = ("square", "sum_squares", "pos_power", "norm2_power", "max_terms")
#: (the same for every kind without a stable gap, ``certification.stable.STABLE_KINDS``:
#: its certificate's rounding is relative to the values, and one entry of 1e8 in
#: ``log_sum_exp([y, x^T w, 0.5 x^T w - y])``, a value of 1e8 with slope zero, aborted)


def universe_indices(
    decl: Declaration, C: float, argument: float = UNIVERSE_ARGUMENT
) -> np.ndarray | None:
    """Indices of the examples inside the universe of a private extension solve with this
    ``C`` (None when all are): slopes within ``universe_slope(decl) * C`` and arguments
    within :data:`UNIVERSE_ARGUMENT` (by kind, and at most ``argument``) on the domain's
    bounding ball (``exp``'s at most :data:`UNIVERSE_EXP` upward), and for the curved kinds
    :data:`UNIVERSE_FAR` and those without a stable gap not far from it."""
    if not enforceable(decl):
        return None  # no structural bound: every example stays (documented)
    bounds = _lipschitz_bounds(decl)
    keep = np.isfinite(bounds) & (bounds <= universe_slope(decl) * C)
    reach = _once(_REACH, decl, argument_reach)
    if reach is None:  # pragma: no cover - only generic terms lack a jet
        return None
    for kind, (r, top, far) in reach.items():
        keep &= r <= min(UNIVERSE_ARGUMENT_BY_KIND.get(kind, UNIVERSE_ARGUMENT), argument)
        if kind == "exp":
            keep &= top <= UNIVERSE_EXP
        if kind in UNIVERSE_FAR or kind not in STABLE_KINDS:
            keep &= far <= RECENTER_RATIO
    return None if bool(np.all(keep)) else np.flatnonzero(keep)


def _rescaled(
    cert: CertifiedSolution, factor: float, lam: float, accuracy: float | None
) -> CertifiedSolution:
    """A certificate of ``factor * F_k`` from one of ``F_k`` (see :func:`certified_solve`)."""
    from dataclasses import replace

    gap = float(np.nextafter(cert.gap * factor, np.inf))
    dist = float(np.nextafter(np.sqrt(2 * gap / lam), np.inf)) if lam > 0 else float("inf")
    stats = dict(cert.solver_stats)
    stats.update(universe="examples outside the public slope universe have the zero loss")
    return replace(
        cert,
        upper=cert.upper * factor,
        lower=cert.lower * factor,
        gap=gap,
        distance_bound=dist,
        regularization=lam,
        accuracy=accuracy,
        solver_stats=MappingProxyType(stats),
    )


def _regularizer_only(
    decl: Declaration,
    *,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    w_domain: Domain | LocalizedDomain | None,
) -> CertifiedSolution:
    """The certificate of ``(lam/2)||w - w0||^2`` over the (localized) domain: the objective
    when no example lies inside the universe."""
    dom = decl.domain if w_domain is None else w_domain
    w0 = np.asarray(w0, float)
    guess = dom.project(w0) if w_domain is None else w0
    w_hat = dom.make_feasible(guess)
    upper = lam / 2 * float(np.sum((w_hat - w0) ** 2))
    lower = dom.min_linear_quadratic(np.zeros(decl.d), lam, w0, hint=w_hat)
    upper *= 1 + 1e-12
    gap = upper - lower
    if not (np.isfinite(gap) and gap >= 0 and (accuracy is None or gap <= accuracy)):
        raise CertificationError("The regularizer-only solve did not certify.")
    return CertifiedSolution(
        w=w_hat,
        upper=upper,
        lower=lower,
        gap=gap,
        distance_bound=float(np.sqrt(2 * gap / lam)) if lam > 0 else float("inf"),
        regularization=lam,
        center=w0.copy(),
        accuracy=accuracy,
        solver_stats=MappingProxyType({"universe": "no example inside the universe"}),
    )


def _recentered(
    prog: StampedProgram, parts: list[tuple[Declaration, StampedProgram]]
) -> StampedProgram:
    """See :func:`recentered_program` (the program only)."""
    return recentered_program(prog, parts)[0]


def recentered_program(
    prog: StampedProgram,
    parts: list[tuple[Declaration, StampedProgram]],
    keep: np.ndarray | None = None,
) -> tuple[StampedProgram, np.ndarray]:
    """The program the solver sees: ``prog`` with the offsets of piecewise-linear terms that
    are affine on the whole domain moved next to it.

    A term ``abs(E)`` whose argument keeps one sign on the domain's bounding ball, or
    ``max_j E_j`` whose winning piece wins on all of it, equals one affine piece there; a
    one-sided power or Huber term ``psi(max_j E_j)`` whose pieces all stay below zero there is
    zero on it (its pieces move to just below zero), and a one-sided Huber term past its knee
    there is affine (its winner moves to just past the knee). Moving
    that piece's offset (and pushing the losing pieces just below it where they could rise
    above it, or lie far below) changes the term by a constant on the domain: the same
    minimizer and multipliers, but values of order the spread instead of, say, a label of
    1e10, which the interior-point solvers cannot resolve to the accuracy targets. A piece of
    a maximum that never wins on the ball and lies far below moves to just below the piece
    that beats it (no change at all). Only the solver's problem changes: the certificate
    evaluates the user's own loss, so this can never make a certificate wrong.

    ``exp`` and ``logistic`` arguments below -750 on the whole ball (their atoms there are
    below ``exp(-745)``, under the smallest float) move to just below that; ``logistic``
    arguments above 50 there (affine within ``exp(-50)``) to just above that.

    Returns the program and, per example of the program (the parts in order), the change of
    its loss at the domain's center (``f_moved - f``: a constant on the ball, in float; zero
    for the moves that keep the values), which tilted ERM adds back (it weighs each example
    by its value). The examples of the mask ``keep`` (program order) are left as they are."""
    b = None
    change = np.zeros(sum(part_decl.n for part_decl, _ in parts))
    first = 0
    for part_decl, view in parts:
        first += part_decl.n
        rows_of = slice(first - part_decl.n, first)
        leaves = part_decl.derived_values()
        dom = part_decl.domain
        c, R = np.asarray(dom.center, float), float(dom.radius)
        n = part_decl.n
        for t, term in enumerate(part_decl.terms):
            if term.kind not in ("abs", "huber", "pieces", "exp", "logistic", *MONOTONE):
                continue
            if t >= len(view.split_rows):
                continue
            # a term held once (it reads no data) is one block: its first example's row is
            # every example's, and its one row of the program moves
            m = 1 if t in view.held else n
            rows = view.split_rows[t]
            if term.kind in ("abs", "huber") and rows[0] is None:
                continue
            try:
                jets = [affine_jet(arg, part_decl.variable, leaves, n) for arg in term.args]
            except Unsupported:
                continue
            jets = [(np.asarray(off)[:m], np.asarray(jac)[:m]) for off, jac in jets]
            flat = []  # per argument: (offset, J c, spread over the ball, program rows)
            size = max((r.shape[1] for r in rows if r is not None), default=0)
            for (off, jac), r in zip(jets, rows):
                off = np.asarray(off, float).reshape(m, -1, order="F")
                jac = np.asarray(jac, float).reshape(m, off.shape[1], -1, order="F")
                if off.shape[1] not in (1, size):
                    break
                off = np.broadcast_to(off, (m, size))
                jac = np.broadcast_to(jac, (m, size, jac.shape[-1]))
                flat.append((off, jac @ c, np.linalg.norm(jac, axis=-1) * R, r))
            else:
                V = np.stack([off + jc for off, jc, _, _ in flat], axis=-1)
                P = np.stack([p for _, _, p, _ in flat], axis=-1)
                movable = np.array([r is not None for *_, r in flat])
                targets = term_targets(term.kind, V, P, movable, term.param)
                if targets is None:
                    continue
                if keep is not None and m == n:  # (tilted ERM's program holds nothing once)
                    held = keep[rows_of].reshape((n,) + (1,) * (targets[0].ndim - 1))
                    targets = [np.where(held, np.nan, k) for k in targets]
                # a piece of one row per example broadcast over a vector argument (the 0 of
                # pos(hstack(...))) moves only by one target per example, or the term stays
                moves = []
                for (off, jc, _, r), target in zip(flat, targets):
                    if r is None or not moved([target]):
                        continue
                    if r.shape != target.shape:
                        if not all(
                            np.array_equal(a, np.broadcast_to(a[:, :1], a.shape), equal_nan=True)
                            for a in (target, off, jc)
                        ):
                            break
                        k = r.shape[1]
                        target, off, jc = target[:, :k], off[:, :k], jc[:, :k]
                    moves.append((r, target, off, jc))
                else:
                    if b is None:
                        b = prog.b.copy()
                    for r, target, off, jc in moves:
                        b[r] = moved_offsets(b[r], off, jc, target)
                    change[rows_of] += float(term.weight) * _value_change(
                        term.kind, V, targets, term.param
                    )
    if b is None:
        return prog, change
    from dataclasses import replace

    return replace(prog, b=b), change


#: from this regularization on, the conic solvers see ``w`` as ``w0 + u / sqrt(lam)``
#: (:func:`_solve_scaled`)
SCALED_LAM = 1e3


def _solve_scaled(
    prog: StampedProgram, name: str | None, tight: bool, lam: float, w0: np.ndarray
) -> RawSolution:
    """:func:`~dpcvx.compilation.solvers.solve_program` on ``prog`` with, from a
    regularization of :data:`SCALED_LAM` on, its ``w`` written ``w0 + u / sqrt(lam)`` (both
    public): the regularizer is then ``||u||^2 / 2`` and ``u`` of order its own scale. The
    solvers' tolerances are relative, and on ``w`` itself a strongly regularized block
    (``lam`` of 1e5, a late phase of localized double output perturbation with four to
    eight examples) came back a few 1e-7 from its minimizer: a gap of ``lam / 2`` times its
    square, over the target on every rung, on ordinary data. The point is mapped back; the
    certificate judges it as any other."""
    if not lam >= SCALED_LAM:
        return solve_program(prog, name, tight=tight)
    import scipy.sparse as sp

    d = prog.d
    scale = np.ones(prog.A.shape[1])
    scale[:d] = 1.0 / np.sqrt(lam)
    shift = np.zeros(prog.A.shape[1])
    shift[:d] = np.asarray(w0, float)
    S = sp.diags(scale).tocsc()
    P_shift = prog.P @ shift
    scaled = dataclasses.replace(
        prog,
        A=(prog.A @ S).tocsc(),
        b=prog.b - prog.A @ shift,
        P=(S @ prog.P @ S).tocsc(),
        q=scale * (prog.q + P_shift),
        q0=prog.q0 + float(prog.q @ shift) + 0.5 * float(shift @ P_shift),
    )
    raw = solve_program(scaled, name, tight=tight)
    return dataclasses.replace(raw, x=shift + scale * raw.x)


def _value_change(
    kind: str, V: np.ndarray, targets: list[np.ndarray], param: float | None
) -> np.ndarray:
    """Per example, a moved term's change of value at the center (summed over its entries):
    ``abs`` and ``huber`` of the moved argument, the maximum of the moved pieces; zero for
    the moves to a zero region (one-sided atoms, ``exp`` and ``logistic`` far below)."""
    T = np.stack(targets, axis=-1)
    U = np.where(np.isnan(T), V, T)  # every argument's value at the center after the moves
    if kind == "abs":
        out = np.abs(U[..., 0]) - np.abs(V[..., 0])
    elif kind == "huber":
        new = sub_values("huber", U[..., 0], param)[0]
        out = new - sub_values("huber", V[..., 0], param)[0]
    elif kind == "pieces":
        out = np.max(U, axis=-1) - np.max(V, axis=-1)
    elif kind == "pos_huber":  # the Huber function of max(M, 0): zero below, affine past K

        def psi(M: np.ndarray) -> np.ndarray:
            return sub_values("huber", np.maximum(M, 0.0), param)[0]

        out = psi(np.max(U, axis=-1)) - psi(np.max(V, axis=-1))
    elif kind == "logistic":
        out = np.logaddexp(0.0, U[..., 0]) - np.logaddexp(0.0, V[..., 0])
    else:
        return np.zeros(V.shape[0])
    return out.reshape(V.shape[0], -1).sum(axis=1)


def _program(
    decl: Declaration,
    template: Template | None,
    domain_block: DomainBlock,
    lam: float,
    w0: np.ndarray,
    extension: float | None,
    plain_template: Template | None,
    lifted: np.ndarray | None = None,
    fold: frozenset[int] = frozenset(),
) -> tuple[StampedProgram, list[tuple[Declaration, StampedProgram]] | None]:
    """The stamped program, and the example groups of a mixed extension program (copies for
    the examples steeper than ``extension``, or for those of the mask ``lifted``). ``fold``:
    the folded extension's penalty (:func:`folded_terms`), held once with weight one."""
    values = decl.derived_values()
    if fold:
        assert extension is not None
        prog, groups_of, _ = folded_program(
            decl, extension, domain_block, lam=lam, w0=w0, plain_template=plain_template
        )
        return prog, groups_of
    assert template is not None  # (only the folded program has none)
    if extension is None and template.held is not None:
        # the terms that read no data held once, not once per example
        per, shared = template.held
        theta = per.theta(values, decl.n)
        parts = [(per, theta)]
        prog = stamp_parts(parts, domain_block, d=decl.d, lam=lam, w0=w0, once=(0, shared))[0]
        return prog, None
    if extension is None or plain_template is None:
        theta = template.theta(values, decl.n)
        return stamp(template, domain_block, theta, d=decl.d, lam=lam, w0=w0), None
    # classification only decides speed: the certificate is valid for every example either way
    light = _lipschitz_bounds(decl) <= extension * (1 + 1e-12) if lifted is None else ~lifted
    # the light examples' terms that read no data held once (in the extension's blocks each
    # copy y_i carries the whole loss)
    held = plain_template.held
    groups = [
        (np.flatnonzero(light), plain_template if held is None else held[0]),
        (np.flatnonzero(~light), template),
    ]
    once = None if held is None or not groups[0][0].size else (0, held[1])
    groups = [(idx, tmpl) for idx, tmpl in groups if idx.size]
    parts = [(tmpl, tmpl.theta(values, decl.n)[idx]) for idx, tmpl in groups]
    prog, views = stamp_parts(parts, domain_block, d=decl.d, lam=lam, w0=w0, once=once)
    part_decls = [decl if idx.size == decl.n else decl.subset(idx) for idx, _ in groups]
    return prog, list(zip(part_decls, views))


def _certified_solve(
    decl: Declaration,
    template: Template | Callable[[], Template],
    domain_block: DomainBlock | Callable[[], DomainBlock],
    *,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    solver: str | None,
    private: bool,
    extension: float | None,
    w_domain: Domain | LocalizedDomain | None,
    plain_template: Template | Callable[[], Template] | None = None,
    public_n: int | None = None,
) -> CertifiedSolution:
    """:func:`certified_solve`'s ladder on ``decl``; ``public_n``: the number of examples of
    the declaration ``decl`` was taken from (for the program's size limit, which must not
    depend on which examples were kept), ``decl.n`` by default."""
    fold = folded_terms(decl, extension)
    best: CertifiedSolution | None = None
    attempts: list[dict] = []
    rounds: list = []  # the extension's rounds, of the rung that ran them (if one did)
    if not fold and smooth_rung_applies(decl, lam=lam, extension=extension, w_domain=w_domain):
        try:
            cert = _smooth_rung(
                decl, lam=lam, w0=w0, accuracy=accuracy, extension=extension, rounds_out=rounds
            )
        except Exception as exc:  # noqa: BLE001 - guarded like every rung
            attempts.append({"solver": SMOOTH_PATH, "tight": False, "error": _describe(exc)})
        else:
            attempts.append(
                {
                    "solver": SMOOTH_PATH,
                    "method": cert.solver_stats.get("solver"),
                    "tight": False,
                    "gap": cert.gap,
                }
            )
            best = cert
            # without a target, the quasi-Newton point must still be as good as the
            # interior-point default would be (otherwise the ladder goes on)
            if _meets(cert, accuracy):
                out = dict(cert.solver_stats)
                out.update(refinement_step=-1, attempts=tuple(attempts))
                return _with_stats(cert, out)
    # the structured rungs after the smooth one: each runs where the one before gave nothing
    structured: tuple[tuple[str, Callable, Callable[[], CertifiedSolution]], ...] = (
        (
            ARROWHEAD,
            pieces_rung_applies,
            lambda: _pieces_rung(
                decl,
                lam=lam,
                w0=w0,
                accuracy=accuracy,
                extension=extension,
                w_domain=w_domain,
                rounds_out=rounds,
            ),
        ),
        (
            MIXED,
            mixed_rung_applies,
            lambda: _mixed_rung(
                decl, lam=lam, w0=w0, accuracy=accuracy, extension=extension, w_domain=w_domain
            ),
        ),
        (
            PENALIZED,
            penalized_rung_applies,
            lambda: _penalized_rung(
                decl, lam=lam, w0=w0, accuracy=accuracy, extension=extension, w_domain=w_domain
            ),
        ),
    )
    for name, applies, run in structured:
        if best is not None or (fold and name == ARROWHEAD):  # (the folded extension: the
            continue  # proximal Newton rungs only)
        if not applies(decl, lam=lam, extension=extension, w_domain=w_domain):
            continue
        try:
            cert = run()
        except Exception as exc:  # noqa: BLE001 - guarded like every rung
            attempts.append({"solver": name, "tight": False, "error": _describe(exc)})
            continue
        attempts.append({"solver": name, "tight": False, "gap": cert.gap})
        best = cert
        if _meets(cert, accuracy):
            out = dict(cert.solver_stats)
            out.update(refinement_step=-1, attempts=tuple(attempts))
            return _with_stats(cert, out)
    # compiled only now: the paths above need no conic program (the folded extension's
    # program has blocks of its own)
    whole = None if fold else template() if callable(template) else template
    block = domain_block() if callable(domain_block) else domain_block
    if callable(plain_template):
        plain_template = plain_template()
    # a conic program too large for the machine is not stamped (a public decision: n and
    # the templates, every example counted with the larger pattern)
    public = decl.n if public_n is None else public_n
    if fold:
        assert extension is not None
        size = _folded_size(public, _folded_templates(decl, extension, plain_template))
    else:
        assert whole is not None
        size = _conic_size(public, whole, plain_template, held=extension is None)
    fits = size <= MAX_PROGRAM_NNZ
    if not fits:
        attempts.append({"solver": "conic program", "tight": False, "error": _TOO_LARGE % size})
    lifts = rounds and best is not None and extension is not None and plain_template is not None
    # (not on a localized domain: its certificate has no balanced duals, which the points of
    # that program need)
    # (the arrowhead path's lifted program stamps no conic program: it runs at any size)
    if lifts and w_domain is None and (fits or isinstance(rounds[0], _PiecesRounds)):
        assert best is not None and extension is not None
        # the rounds missed: the joint program with copies for the examples that move only
        try:
            lifted = _lifted_rung(
                decl,
                rounds[0],
                best.w,
                best.gap,
                (whole, plain_template, block),
                lam=lam,
                w0=w0,
                accuracy=accuracy,
                extension=float(extension),
                w_domain=w_domain,
                attempts=attempts,
                solver=check_solver(solver),
            )
        except Exception as exc:  # noqa: BLE001 - guarded like every rung
            attempts.append({"solver": LIFTED, "tight": True, "error": _describe(exc)})
        else:
            if lifted is not None:
                if lifted.gap < best.gap:
                    best = lifted
                if _meets(lifted, accuracy):
                    out = dict(lifted.solver_stats)
                    out.update(refinement_step=-1, attempts=tuple(attempts))
                    return _with_stats(lifted, out)
    parts: list[tuple[Declaration, StampedProgram]] | None = None
    steps = refinement_ladder(solver, accuracy) if fits else []
    if fits:
        prog, parts = _program(decl, whole, block, lam, w0, extension, plain_template, fold=fold)
        solved = _recentered(prog, parts or [(decl, prog)])
    for step, (name, tight) in enumerate(steps):
        # every rung is guarded: whatever goes wrong inside one (a solver crash, inf duals
        # reaching a numerical routine) moves on to the next rung, never ends the ladder
        try:
            raw = _solve_scaled(solved, name, tight, lam, w0)
        except Exception as exc:  # noqa: BLE001 - recorded, then the next rung
            attempts.append({"solver": name, "tight": tight, "error": _describe(exc)})
            continue
        stats = dict(raw.stats)
        try:
            if extension is None:
                cert = certify(
                    decl,
                    raw.x[: decl.d],
                    lam=lam,
                    w0=w0,
                    prog=prog,
                    z=raw.z,
                    accuracy=accuracy,
                    solver_stats=stats,
                    domain=w_domain,
                )
            else:
                cert = certify_extension(
                    decl,
                    prog,
                    raw.x,
                    raw.z,
                    C=extension,
                    lam=lam,
                    w0=w0,
                    accuracy=accuracy,
                    solver_stats=stats,
                    w_domain=w_domain,
                    parts=parts,
                    fold=fold,
                )
        except Exception as exc:  # noqa: BLE001 - recorded, then the next rung
            attempts.append({"solver": name, "tight": tight, "error": _describe(exc)})
            continue
        attempts.append(
            {
                "solver": name,
                "tight": tight,
                "gap": cert.gap,
                "status": stats.get("status"),
                "seconds": stats.get("seconds"),
            }
        )
        if best is None or cert.gap < best.gap:
            best = cert
        if accuracy is None or cert.gap <= accuracy:
            # without a target, the best certificate so far (a fast rung's may be tighter)
            chosen = best if accuracy is None else cert
            out = dict(chosen.solver_stats)
            out.update(refinement_step=step if chosen is cert else -1, attempts=tuple(attempts))
            return _with_stats(chosen, out)
    if private and not fold:
        fallback = _analytic_rung(
            decl, parts, lam=lam, w0=w0, accuracy=accuracy, extension=extension, w_domain=w_domain
        )
        if fallback is not None:
            out = dict(fallback.solver_stats)
            out.update(refinement_step=len(steps), attempts=tuple(attempts))
            return _with_stats(fallback, out)
        raise CertificationError(_PRIVATE_FAILURE.format(accuracy=accuracy)) from None
    if best is None:
        raise CertificationError(
            "Every solver failed on this problem: "
            + "; ".join(f"{a['solver']}: {a.get('error')}" for a in attempts)
        )
    target = _target(accuracy, best.upper)  # without an accuracy: the default target
    raise CertificationError(
        f"dpcvx could not certify the solve to the accuracy target {target:.3g}: the best "
        f"certified gap was {best.gap:.3g} after {len(attempts)} attempts "
        f"({', '.join(a['solver'] + (' tight' if a['tight'] else '') for a in attempts)}). "
        "Nothing was released. To fix: raise the mechanism's `accuracy` (it only inflates the "
        "sensitivity by 2*sqrt(2*accuracy/regularization)), raise `regularization`, or rescale "
        "the data so that losses are of order one."
    )


#: the most nonzeros of a conic program's constraint matrix that the ladder stamps and hands to
#: a solver, counted as :func:`_conic_size` does: a hinge extension's joint program in
#: ``cp.abs(w) <= B`` at d = 20 has up to 165 per example, so this stops at n = 3e5. Clarabel
#: took about 300 bytes per nonzero on that program at n = 1e4, so this limit is about 15 GB;
#: at n = 1e6 the program exhausted a machine of 24 GiB
MAX_PROGRAM_NNZ = 50_000_000

_TOO_LARGE = (
    "not stamped: about %.3g nonzeros, more than dpcvx hands to a conic solver "
    "(MAX_PROGRAM_NNZ); the fast paths missed the target"
)


def _conic_size(
    n: int, template: Template, plain_template: Template | None, held: bool = False
) -> int:
    """The nonzeros of the examples' blocks of the program stamped for ``n`` examples, at
    most, from public quantities only: every example counted with the larger of the
    templates' patterns (the domain's and the objective's few rows left out). ``held``: the
    plain program of :func:`_program`, whose terms held once count once."""
    per = max(t.A_rows.size for t in (template, plain_template) if t is not None)
    if held and template.held is not None:
        return n * int(template.held[0].A_rows.size) + int(template.held[1].A_rows.size)
    return n * int(per)


def folded_groups(decl: Declaration, C: float) -> list[tuple[int, np.ndarray]]:
    """The folded extension's examples by block: ``(0, light)``, those whose terms that read
    data dpcvx certifies C-Lipschitz on W (their plain block, without the penalty), then
    ``(1, heavy)``, the others (the extension's block without the penalty)."""
    rest = decl.with_terms(_rest(decl, folded_terms(decl, C)))
    light = _lipschitz_bounds(rest) <= C * (1 + 1e-12)
    return [(0, np.flatnonzero(light)), (1, np.flatnonzero(~light))]


def folded_program(
    decl: Declaration,
    C: float,
    domain_block: DomainBlock,
    *,
    lam: float,
    w0: np.ndarray,
    plain_template: Template | Callable[[], Template] | None,
) -> tuple[StampedProgram, list[tuple[Declaration, StampedProgram]], list[np.ndarray]]:
    """The folded extension's program (:func:`folded_terms`): the examples of each group of
    :func:`folded_groups` in their block, the penalty in one block held once with weight one.
    Returns the program, the groups' ``(declaration, view)`` and their indices (the empty
    groups left out)."""
    blocks = _folded_templates(decl, C, plain_template)
    groups = [(idx, blocks[k]) for k, idx in folded_groups(decl, C) if idx.size]
    values = decl.derived_values()
    stamped = [(tmpl, tmpl.theta(values, decl.n)[idx]) for idx, tmpl in groups]
    prog, views = stamp_parts(
        stamped, domain_block, d=decl.d, lam=lam, w0=w0, once=(0, blocks[2]), once_weight=1.0
    )
    part_decls = [decl if idx.size == decl.n else decl.subset(idx) for idx, _ in groups]
    return prog, list(zip(part_decls, views)), [idx for idx, _ in groups]


def _folded_size(n: int, blocks: tuple[Template, Template, Template]) -> int:
    """:func:`_conic_size` of the folded extension's program (every example counted with the
    larger of its two blocks, the penalty once)."""
    light, heavy, once = blocks
    return n * int(max(light.A_rows.size, heavy.A_rows.size)) + int(once.A_rows.size)


#: the name of the smooth path's attempt in ``solver_stats["attempts"]`` (its method, Newton or
#: L-BFGS-B, is the attempt's ``"method"`` and the certificate's ``solver``)
SMOOTH_PATH = "smooth"
#: the methods the smooth path may report as its ``solver``
SMOOTH_METHODS = ("Newton", "L-BFGS-B", "L-BFGS-B + Newton")

#: without an accuracy target, the quasi-Newton rung's certificate is kept when its gap is
#: at most this, relative to 1 + |F| (what an interior-point solve reaches by default)
SMOOTH_DEFAULT = 1e-9


def smooth_rung_applies(
    decl: Declaration,
    *,
    lam: float,
    extension: float | None,
    w_domain: Domain | LocalizedDomain | None,
    heavy: bool = False,
) -> bool:
    """Whether the quasi-Newton first rung runs (public structure only): every term smooth,
    ``lam > 0``, a ball or box domain, no localization, and the plain objective (no
    extension, or an extension whose every example dpcvx certifies C-Lipschitz on W with
    its bound rounded up, where ``f_C = f``) or a loss whose relaxed extension it writes
    (:func:`~dpcvx.modeling.smooth.extension_model`). ``heavy``: whether it runs on a
    dataset with an example steeper than C (the loss's form alone decides)."""
    if lam <= 0 or w_domain is not None or decl.domain.kind not in ("l2_ball", "box"):
        return False
    if not is_smooth(decl):
        return False
    C = _relaxed_C(decl, extension, heavy)
    if C is None:
        return True
    model = smooth_model(decl) if decl.d <= NEWTON_MAX_D else None
    if model is None:
        return False
    return extension_model(model, C, parallel_affine(decl)) is not None


def _smooth_rung(
    decl: Declaration,
    *,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    extension: float | None = None,
    rounds_out: list | None = None,
) -> CertifiedSolution:
    """Minimize ``F`` on the smooth path, then certify the point with dpcvx's certificate:
    smooth terms take their multipliers from their own derivatives, so no dual from a solver
    is needed.

    With a second-order model of the loss (:func:`~dpcvx.modeling.smooth.smooth_model`) and
    ``d <= NEWTON_MAX_D`` (public structure), damped Newton runs first from ``w0`` made
    feasible; where its point leaves a box (a bound is active), L-BFGS-B with the box as
    bounds runs instead, polished by Newton on the coordinates off their bounds. Otherwise
    scipy's L-BFGS-B runs alone. A ball must be inactive at the answer (the interior-point
    ladder handles an active ball)."""
    import time

    start = time.perf_counter()
    dom = decl.domain
    w0 = np.asarray(w0, float)
    model = smooth_model(decl) if decl.d <= NEWTON_MAX_D else None
    relaxed = None
    C = _relaxed_C(decl, extension)
    if C is not None:
        # examples steeper than C: Newton on the extension's smooth form (slopes clipped)
        relaxed = None if model is None else extension_model(model, C, parallel_affine(decl))
        if relaxed is None:  # pragma: no cover - checked by smooth_rung_applies
            raise SolverError("The extension of this loss has no smooth model.")
        model = relaxed.model
    # the solver's model: arguments far out where their atom is affine moved next to it
    moved = None if model is None else recentered(model, dom.center, float(dom.radius))
    x, iterations, solver = smooth_minimize(decl, moved, lam, w0)
    stats = {
        "solver": solver,
        "iterations": int(iterations),
        "status": "converged",
        "seconds": time.perf_counter() - start,
    }
    region = _region(dom) if relaxed is not None else None
    if relaxed is not None:
        if region is not None:
            x = dom.make_feasible(x)  # Newton's point may sit a rounding outside the ball
        Y = relaxed.copies(x)
        if region is not None:
            assert extension is not None
            rounds = _SmoothRounds(relaxed, float(extension), lam, w0, decl, region)
            fix = rounds.fix(x, Y)
            if fix is not None:  # copies over R^d leave the ball or box W
                if rounds_out is not None:
                    rounds_out.append(rounds)
                return _ball_rounds(decl, rounds, x, fix, lam, w0, accuracy, stats, None)
        # the atom's derivative at each copy y_i is the extension model's at w
        thetas = model.multipliers(x) if model is not None else None
        return _certify_point(decl, x, lam, w0, accuracy, stats, thetas, extension, copies=Y)
    thetas = model.multipliers(x) if model is not None else None
    return _certify_point(decl, x, lam, w0, accuracy, stats, thetas, extension)


def smooth_minimize(
    decl: Declaration, model: Any, lam: float, w0: np.ndarray, init: np.ndarray | None = None
) -> tuple[np.ndarray, int, str]:
    """``(x, iterations, solver)``: ``model`` (any object with ``value_grad(w)`` and
    ``hessian(w)`` for the data part of the objective, or None: L-BFGS-B on the declaration's
    own gradients) plus ``(lam/2)||w - w0||^2`` minimized over the declaration's ball or box.
    Damped Newton from ``w0`` made feasible (:func:`ball_newton` on a ball); where its point
    leaves a box, L-BFGS-B with the box as bounds, polished by Newton on the coordinates off
    their bounds. Raises :class:`SolverError` for a non-finite point or one off the ball.
    ``init``: the starting point (a feasible one), else ``w0`` made feasible."""
    dom = decl.domain
    box = dom.kind == "box"
    if init is None:
        init = _feasible_start(dom, w0)
    x: np.ndarray | None = None
    solver, iterations = "L-BFGS-B", 0
    if model is not None:
        if dom.kind == "l2_ball":
            x, iterations = ball_newton(model, lam, w0, init, dom.center, dom.radius)
        else:
            x, iterations = _newton(model, lam, w0, init)
        solver = "Newton"
        if box and not bool(np.all((x >= dom._lo) & (x <= dom._hi))):
            x = None
    if x is None:
        x, iterations = _lbfgsb(decl, model, lam, w0, init, box)
        solver = "L-BFGS-B"
        if model is not None and box:
            polished = _polish_off_bounds(model, lam, w0, x, dom._lo, dom._hi)
            if polished is not None:
                x, iterations, solver = polished[0], iterations + polished[1], "L-BFGS-B + Newton"
    if not np.all(np.isfinite(x)):
        raise SolverError(f"{solver} returned a non-finite point.")
    if dom.kind == "l2_ball" and np.linalg.norm(x - dom.center) > dom.radius * (1 + 1e-9):
        raise SolverError("The point left the ball: the interior-point path handles it.")
    return x, iterations, solver


#: Newton's method runs on the smooth path up to this dimension (each step forms a d x d
#: Hessian in O(n d^2) and factors it); above it, L-BFGS-B alone
NEWTON_MAX_D = 1000
#: Newton stops when half its decrement (its estimate of the gap) is at most this, relative
#: to ``1 + |F|``, or after ``NEWTON_MAX_ITER`` steps
NEWTON_TOL = 1e-14
NEWTON_MAX_ITER = 100
#: a Hessian factor is reused while each step shrinks the decrement at least this many times
REUSE_CONTRACTION = 16.0


def _newton(
    model: SmoothModel,
    lam: float,
    w0: np.ndarray,
    w: np.ndarray,
    free: np.ndarray | None = None,
) -> tuple[np.ndarray, int]:
    """Damped Newton on ``F(w) = mean_i f_i(w) + lam/2 ||w - w0||^2`` over the coordinates
    ``free`` (all by default; the others stay fixed), with an Armijo backtracking line
    search. Returns the last point and the number of steps; the certificate judges it."""
    from scipy.linalg import cho_factor, cho_solve

    idx = np.arange(w.size) if free is None else np.flatnonzero(free)
    w = np.array(w, float)

    def objective(v: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = model.value_grad(v)
        diff = v - w0
        return value + lam / 2 * float(diff @ diff), grad + lam * diff

    f, g = objective(w)
    steps = 0
    factor = None  # the Cholesky factor of the last Hessian formed
    previous = np.inf  # the last decrement
    for steps in range(1, NEWTON_MAX_ITER + 1):  # noqa: B007 - the count is returned
        gi = g[idx]
        decrement = np.nan
        if factor is not None:
            # the last factor is reused while the steps it gives converge fast (a constant
            # Hessian, as for squared losses, or near the answer): each such step costs one
            # gradient instead of a Hessian
            direction = -cho_solve(factor, gi)
            decrement = -float(gi @ direction)
            if not (0 <= decrement <= previous / REUSE_CONTRACTION):
                factor = None
        if factor is None:
            H = model.hessian(w)[np.ix_(idx, idx)]
            H[np.diag_indices_from(H)] += lam
            try:
                factor = cho_factor(H)
            except (np.linalg.LinAlgError, ValueError):
                break
            direction = -cho_solve(factor, gi)
            decrement = -float(gi @ direction)
        if not (np.isfinite(decrement) and decrement >= 0):
            break
        scale = 1.0 + abs(f)
        if decrement / 2 <= NEWTON_TOL * scale:
            break
        previous = decrement
        t = 1.0
        while True:
            trial = w.copy()
            trial[idx] += t * direction
            f_new, g_new = objective(trial)
            # near the answer (quadratic convergence) the full step is taken: the
            # decrease is below rounding there, and the certificate judges the point
            if decrement / 2 <= 1e-8 * scale or f_new <= f - 0.25 * t * decrement:
                break
            t /= 2
            if t < 1e-12:
                return w, steps
        w, f, g = trial, f_new, g_new
    return w, steps


def newton(
    model: Any, lam: float, w0: np.ndarray, w: np.ndarray, free: np.ndarray | None = None
) -> tuple[np.ndarray, int]:
    """Damped Newton on ``F`` for any ``model`` with ``value_grad(w)`` and ``hessian(w)`` (a
    :class:`~dpcvx.modeling.smooth.SmoothModel`, or one whose sums are reduced elsewhere);
    see :func:`ball_newton` for a ball."""
    return _newton(model, lam, w0, w, free)


def ball_newton(
    model: Any,
    lam: float,
    w0: np.ndarray,
    start: np.ndarray,
    center: np.ndarray,
    radius: float,
) -> tuple[np.ndarray, int]:
    """Minimize ``F`` over the ball ``||w - center|| <= radius`` by Newton's method: first
    unconstrained; where that minimizer lies outside, sequential quadratic steps from the
    sphere, each the exact minimizer of the quadratic model over the ball (the trust-region
    subproblem, solved on the eigenvectors of the model's Hessian by Newton's method on the
    secular equation ``1/||v(nu)|| = 1/radius``), with a backtracking line search inside the
    ball. Returns the point and the number of Hessians formed; the certificate judges it."""
    center = np.asarray(center, float)
    x, steps = _newton(model, lam, w0, start)
    dist = float(np.linalg.norm(x - center))
    if not dist > radius:
        return x, steps
    w0 = np.asarray(w0, float)

    def objective(v: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = model.value_grad(v)
        diff = v - w0
        return value + lam / 2 * float(diff @ diff), grad + lam * diff

    w = center + (x - center) * (radius / dist)
    f, g = objective(w)
    for _ in range(NEWTON_MAX_ITER):
        H = model.hessian(w)
        H[np.diag_indices_from(H)] += lam
        u = w - center
        v = _ball_quadratic(H, g - H @ u, radius)
        step = v - u
        decrement = -float(g @ step + 0.5 * step @ (H @ step))
        steps += 1
        if not (np.isfinite(decrement) and decrement >= 0):
            break
        scale = 1.0 + abs(f)
        if decrement <= NEWTON_TOL * scale:
            w = center + v if float(np.linalg.norm(v)) <= radius else w
            break
        t = 1.0
        while True:  # the ball is convex: every point of the segment is inside
            trial = w + t * step
            f_new, g_new = objective(trial)
            if decrement <= 1e-8 * scale or f_new <= f - 0.25 * t * decrement:
                break
            t /= 2
            if t < 1e-12:
                return w, steps
        w, f, g = trial, f_new, g_new
    return w, steps


def _ball_quadratic(H: np.ndarray, b: np.ndarray, radius: float) -> np.ndarray:
    """The minimizer of ``v^T H v / 2 + b^T v`` over ``||v|| <= radius`` (``H`` positive
    definite): ``v(nu) = -(H + nu I)^{-1} b`` with ``nu = 0`` or the root of the secular
    equation, found by Newton's method on ``1/||v(nu)||`` (concave: it converges monotonically
    from below)."""
    evals, Q = np.linalg.eigh(H)
    c = Q.T @ b
    lo = float(evals.min())

    def norm_at(nu: float) -> float:
        return float(np.sqrt(np.sum((c / (evals + nu)) ** 2)))

    nu = 0.0 if lo > 0 else -lo + 1e-12 * (1.0 + abs(lo))
    if norm_at(nu) <= radius:
        return -Q @ (c / (evals + nu))
    for _ in range(100):
        z = c / (evals + nu)
        nz = float(np.linalg.norm(z))
        phi = 1.0 / nz - 1.0 / radius
        if abs(phi) * radius <= 4 * np.finfo(float).eps:
            break
        dphi = float(np.sum(z * z / (evals + nu))) / nz**3
        nu_next = nu - phi / dphi
        if not nu_next > nu:  # the root is reached to rounding
            break
        nu = nu_next
    v = -Q @ (c / (evals + nu))
    nv = float(np.linalg.norm(v))
    return v * (radius / nv) if nv > radius else v


def _polish_off_bounds(
    model: Any, lam: float, w0: np.ndarray, x: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, int] | None:
    """Newton's steps (:func:`_newton`) from L-BFGS-B's point ``x`` on the coordinates off
    the box's bounds, or None where none is off them or the steps leave the box."""
    free = (x > lo) & (x < hi)
    if not free.any():
        return None
    polished, steps = _newton(model, lam, w0, x, free=free)
    if not bool(np.all((polished >= lo) & (polished <= hi))):
        return None
    return polished, steps


def _lbfgsb(
    decl: Declaration,
    model: SmoothModel | None,
    lam: float,
    w0: np.ndarray,
    init: np.ndarray,
    box: bool,
) -> tuple[np.ndarray, int]:
    """scipy's L-BFGS-B on ``F`` (the box as bounds), with the model's gradients when there
    is a model and per-example gradients of the declaration otherwise."""
    from scipy.optimize import minimize

    def fun(w: np.ndarray) -> tuple[float, np.ndarray]:
        diff = w - w0
        if model is not None:
            value, grad = model.value_grad(w)
        else:
            value = float(np.mean(decl.loss_values(w)))
            grad = per_example_gradients(decl, w).mean(axis=0)
        return value + lam / 2 * float(diff @ diff), grad + lam * diff

    dom = decl.domain
    res = minimize(
        fun,
        init,
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(dom._lo, dom._hi)) if box else None,
        options={"maxiter": 2000, "maxcor": 20, "ftol": 0.0, "gtol": 1e-12},
    )
    return np.asarray(res.x, float), int(res.nit)


#: the no-program rungs run under an extension when every example's certified Lipschitz bound
#: is at most ``C (1 + LIGHT_SLACK)``: rows normalized to norm one in floating point (1 + 2e-16)
#: qualify. Their point is certified for ``F_C`` (slopes clipped to the C-ball), so an example
#: slightly heavier than ``C`` only loosens the certificate by as much.
LIGHT_SLACK = 1e-9


def _nearly_light(decl: Declaration, C: float) -> bool:
    return bool(np.all(_lipschitz_bounds(decl) <= C * (1 + LIGHT_SLACK)))


def _relaxed_C(decl: Declaration, extension: float | None, heavy: bool = False) -> float | None:
    """The ``C`` of the extension a no-program rung must write, or None where it solves ``F``
    itself: no extension, or one whose every example dpcvx certifies C-Lipschitz on W
    (``f_C = f``). ``heavy``: asked for a dataset with an example steeper than C (``C``,
    under an extension)."""
    if extension is None or (not heavy and _nearly_light(decl, float(extension))):
        return None
    return float(extension)


#: the name of the arrowhead interior-point rung (piecewise-linear losses)
ARROWHEAD = "arrowhead IPM"


def _arrowhead_domain(
    decl: Declaration, lam: float, w_domain: Domain | LocalizedDomain | None
) -> bool:
    """Whether the arrowhead method can take the program's domain and regularization: ``lam >
    0``, a ball or a box with every coordinate free to move, localized (by paper 000's ball
    around a point of W) or not."""
    if lam <= 0 or decl.domain.kind not in ("l2_ball", "box"):
        return False
    if w_domain is not None and not (
        isinstance(w_domain, LocalizedDomain) and w_domain.base is decl.domain
    ):
        return False
    return decl.domain.kind != "box" or bool(np.all(decl.domain._hi > decl.domain._lo))


def pieces_rung_applies(
    decl: Declaration,
    *,
    lam: float,
    extension: float | None,
    w_domain: Domain | LocalizedDomain | None,
    heavy: bool = False,
) -> bool:
    """Whether the arrowhead interior-point rung runs (public structure only): every term
    affine, ``abs`` or a maximum of affine pieces (:func:`piecewise_model`), ``lam > 0``, a
    ball or box domain (localized or not), and a loss whose extension, if any, it can write
    down (:func:`~dpcvx.certification.arrowhead.extension_pieces`) or whose every example
    dpcvx certifies C-Lipschitz on W. ``heavy``: whether it runs on a dataset with an example
    steeper than C. Euclidean norms that read no data (a group lasso) are the method's cones
    (:class:`~dpcvx.certification.penalty_cones.PenaltyCones`); such a loss has no written
    extension."""
    if not _arrowhead_domain(decl, lam, w_domain):
        return False
    model = piecewise_model(decl)
    if model is None:
        model = piecewise_model(decl, cones=True)
    if decl.d > NEWTON_MAX_D or model is None:
        return False
    C = _relaxed_C(decl, extension, heavy)
    return C is None or (not model.cones and extension_pieces(model, C) is not None)


def _pieces_rung(
    decl: Declaration,
    *,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    extension: float | None = None,
    w_domain: Domain | LocalizedDomain | None = None,
    rounds_out: list | None = None,
) -> CertifiedSolution:
    """Solve the piecewise-linear ERM with :func:`~dpcvx.certification.arrowhead.arrowhead_ipm`
    from ``w0`` made feasible, the domain's constraints in its program, then certify its point
    with its multipliers (the certificate minimizes over the domain exactly, so it needs no
    multiplier of the domain's)."""
    import time

    start = time.perf_counter()
    model = piecewise_model(decl) or piecewise_model(decl, cones=True)
    if model is None:  # pragma: no cover - checked by pieces_rung_applies
        raise SolverError("The loss is not piecewise linear.")
    dom = decl.domain
    w0 = np.asarray(w0, float)
    init = _feasible_start(dom, w0)
    target = accuracy if accuracy is not None else SMOOTH_DEFAULT
    relaxed = None
    C = _relaxed_C(decl, extension)
    if C is not None:
        relaxed = None if model.cones else extension_pieces(model, C)
        if relaxed is None:  # pragma: no cover - checked by pieces_rung_applies
            raise SolverError("The extension of this loss has no piecewise-linear form.")
    # the method's model: elements far out where their maximum is one piece moved next to W
    ball = (np.asarray(dom.center, float), float(dom.radius))
    solved = recentered_pieces(model if relaxed is None else relaxed.model, *ball)
    bounds = _bounds(dom, w_domain)
    feasible = dom if w_domain is None else w_domain
    tol = min(target, 1e-6) * 1e-3
    slacks: list = []
    # the norm penalties' cones, at the method's first point (relaxed is None with them)
    cones = None
    if model.cones:
        cones = PenaltyCones(model.cones, bounds.interior(init))
        x, mus, steps = arrowhead_ipm(
            solved, lam, w0, init, tol=tol, bounds=bounds, domain_out=slacks, blocks=cones
        )
    else:
        x, mus, steps = arrowhead_ipm(
            solved, lam, w0, init, tol=tol, bounds=bounds, domain_out=slacks
        )
    if not np.all(np.isfinite(x)):
        raise SolverError("The arrowhead method returned a non-finite point.")
    x = feasible.make_feasible(x)
    stats = {
        "solver": ARROWHEAD,
        "iterations": int(steps),
        "status": "converged",
        "seconds": time.perf_counter() - start,
    }
    if relaxed is not None:
        region = _region(dom)
        if region is not None:
            rounds = _PiecesRounds(relaxed, mus, lam, w0, bounds, tol, region, slacks, ball)
            x = rounds.settle(x, feasible)
            fix = rounds.fix(x)
            if fix is not None:  # copies over R^d leave the ball or box W
                if rounds_out is not None:
                    rounds_out.append(rounds)
                return _ball_rounds(decl, rounds, x, fix, lam, w0, accuracy, stats, w_domain)
        # the copies y_i of the examples the extension moves, and multipliers at them
        Y, thetas = relaxed.copies(x, mus)
        return _certify_point(
            decl, x, lam, w0, accuracy, stats, thetas, relaxed.C, w_domain, copies=Y
        )
    thetas = model.multipliers(mus, None if cones is None else cones.thetas())
    return _certify_point(decl, x, lam, w0, accuracy, stats, thetas, extension, w_domain)


#: the name of the rung for losses with both smooth and piecewise-linear terms
MIXED = "proximal Newton + arrowhead IPM"


def mixed_rung_applies(
    decl: Declaration,
    *,
    lam: float,
    extension: float | None,
    w_domain: Domain | LocalizedDomain | None,
) -> bool:
    """Whether the proximal Newton rung runs (public structure only): both smooth and
    ``abs`` or ``pieces`` terms, each part with its model
    (:func:`~dpcvx.certification.mixed.mixed_model`), ``lam > 0``, a ball or box domain
    (localized or not), ``d <= NEWTON_MAX_D``, and the plain objective: no Lipschitz
    extension, or one whose every example dpcvx certifies C-Lipschitz on W. The rung has no
    form of the extension, so a neighbour with a steeper example takes the conic program;
    where that program is too large to stamp, a private solve is refused before any rung
    runs, from n and the loss's form (:func:`extension_refusal`), so this rung does not
    decide between a release and an abort."""
    if not _arrowhead_domain(decl, lam, w_domain) or decl.d > NEWTON_MAX_D:
        return False
    if folded_terms(decl, extension):
        assert extension is not None
        return _folded_mixed(decl, extension) is not None
    return _relaxed_C(decl, extension) is None and mixed_model(decl) is not None


def _folded_mixed(decl: Declaration, C: float) -> tuple[MixedModel, SmoothExtension] | None:
    """The mixed rung's models of the folded extension (:func:`folded_terms`), or None: the
    loss's piecewise-linear part is the penalty (it reads no data) and its smooth part the
    terms that read data, whose extension the relaxed smooth model writes (one smooth atom of
    an affine argument per example: :func:`~dpcvx.modeling.smooth.extension_model`, slopes
    clipped at C), which replaces it in the model. Public structure only."""
    fold = folded_terms(decl, C)
    model = mixed_model(decl)
    if not fold or model is None:
        return None
    pieces = frozenset(t for t, p in enumerate(model.in_pieces) if p)
    if not pieces <= fold or (fold - pieces) or decl.d > NEWTON_MAX_D:
        return None
    rest = decl.with_terms(_rest(decl, fold))
    relaxed = extension_model(model.smooth, C, parallel_affine(rest))
    if relaxed is None:
        return None
    return dataclasses.replace(model, smooth=relaxed.model), relaxed


def _folded_models(
    models_of: Callable[[Declaration, float], Any], decl: Declaration, extension: float | None
) -> tuple[frozenset[int], Any]:
    """``(fold, models)`` for a proximal Newton rung: the folded extension's terms
    (:func:`folded_terms`) and the rung's models of it (``models_of``: the data terms'
    relaxed extension, the penalty exact), or ``(empty, None)`` without a fold."""
    fold = folded_terms(decl, extension)
    if not fold:
        return fold, None
    assert extension is not None
    found = models_of(decl, extension)
    if found is None:  # pragma: no cover - checked by the rung's applies
        raise SolverError("The folded extension of this loss has no model on this rung.")
    return fold, found


def _mixed_rung(
    decl: Declaration,
    *,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    extension: float | None = None,
    w_domain: Domain | LocalizedDomain | None = None,
) -> CertifiedSolution:
    """Solve a loss of smooth and piecewise-linear terms by proximal Newton's method
    (:func:`~dpcvx.certification.mixed.proximal_newton`) from ``w0`` made feasible, certifying
    the point after each full step (for ``F_C`` under an extension, whose every example is
    then certified C-Lipschitz: :func:`mixed_rung_applies`), and return the best of its
    certificates."""
    import time

    start = time.perf_counter()
    model = mixed_model(decl)
    if model is None:  # pragma: no cover - checked by mixed_rung_applies
        raise SolverError("The loss has no smooth and piecewise-linear parts.")
    fold, found = _folded_models(_folded_mixed, decl, extension)
    relaxed = None
    if found is not None:
        model, relaxed = found
    dom = decl.domain
    w0 = np.asarray(w0, float)
    init = _feasible_start(dom, w0)
    target = accuracy if accuracy is not None else SMOOTH_DEFAULT
    center, radius = np.asarray(dom.center, float), float(dom.radius)
    pieces = recentered_pieces(model.pieces, center, radius)
    smooth = recentered(model.smooth, center, radius)
    bounds = _bounds(dom, w_domain)
    tol = min(target, 1e-6) * 1e-3

    def multipliers(point: np.ndarray, mus: Any, data: list | None = None) -> list:
        # (``data``: the data terms' multipliers at the copies in W, :func:`_folded_rounds`;
        # else the smooth part's derivatives at the point, the relaxed model's under a fold)
        return (model if data is None else _with_smooth(model, data)).multipliers(mus, point)

    judge = _PointJudge(
        decl,
        lam=lam,
        w0=w0,
        accuracy=accuracy,
        extension=extension,
        w_domain=w_domain,
        name=MIXED,
        start=start,
        multipliers=multipliers,
        copies=None if relaxed is None else relaxed.copies,
        fold=fold,
    )
    x, mus, steps, iterations = proximal_newton(
        pieces, smooth, lam, w0, init, tol=tol, bounds=bounds, judge=judge
    )
    if relaxed is not None and not judge.met:

        def again(model: Any, start: np.ndarray) -> tuple[np.ndarray, Any]:
            out = proximal_newton(
                pieces, model, lam, w0, start, tol=tol, bounds=bounds, judge=judge
            )
            return out[0], out[1]

        x, mus = _folded_rounds(decl, relaxed, float(extension or 0.0), judge, x, mus, again)
    return judge.finish(
        x,
        mus,
        "The proximal Newton steps certified nothing.",
        iterations=int(iterations),
        newton_steps=int(steps),
    )


#: the name of the rung for smooth losses with penalties that no model holds
PENALIZED = "proximal Newton + penalty program"


def penalized_rung_applies(
    decl: Declaration,
    *,
    lam: float,
    extension: float | None,
    w_domain: Domain | LocalizedDomain | None,
) -> bool:
    """Whether the penalized proximal Newton rung runs (public structure only): smooth terms
    that read data and penalties that read no data and that no model holds
    (:func:`~dpcvx.certification.penalized.penalized_model`), ``lam > 0``, a ball or box
    domain (localized or not), ``d <= NEWTON_MAX_D``, and the plain objective, as for
    :func:`mixed_rung_applies` (a neighbour with a steeper example takes the conic program,
    or is refused before any rung runs, from n and the loss's form)."""
    if not _arrowhead_domain(decl, lam, w_domain) or decl.d > NEWTON_MAX_D:
        return False
    if folded_terms(decl, extension):
        assert extension is not None
        return _folded_penalized(decl, extension) is not None
    return _relaxed_C(decl, extension) is None and penalized_model(decl) is not None


def _folded_penalized(decl: Declaration, C: float) -> tuple[PenalizedModel, SmoothExtension] | None:
    """The penalized rung's models of the folded extension (:func:`folded_terms`), or None:
    the rung's penalties are the folded terms, and its smooth part, the terms that read data,
    has a relaxed extension model (as :func:`_folded_mixed`), which replaces it."""
    fold = folded_terms(decl, C)
    model = penalized_model(decl)
    if not fold or model is None or frozenset(model.penalty) != fold:
        return None
    relaxed = extension_model(model.smooth, C, parallel_affine(decl.with_terms(_rest(decl, fold))))
    if relaxed is None:
        return None
    return dataclasses.replace(model, smooth=relaxed.model), relaxed


def _penalized_rung(
    decl: Declaration,
    *,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    extension: float | None = None,
    w_domain: Domain | LocalizedDomain | None = None,
) -> CertifiedSolution:
    """Solve a smooth loss with penalties by proximal Newton's method whose steps are small
    conic programs (:func:`~dpcvx.certification.penalized.penalized_newton`) from ``w0`` made
    feasible, certifying the point after each full step, and return the best of its
    certificates."""
    import time

    start = time.perf_counter()
    model = penalized_model(decl)
    if model is None:  # pragma: no cover - checked by penalized_rung_applies
        raise SolverError("The loss has no smooth part with penalties.")
    fold, found = _folded_models(_folded_penalized, decl, extension)
    relaxed = None
    if found is not None:
        model, relaxed = found
    dom = decl.domain
    w0 = np.asarray(w0, float)
    init = _feasible_start(dom, w0)
    smooth = recentered(model.smooth, np.asarray(dom.center, float), float(dom.radius))
    localized = w_domain if isinstance(w_domain, LocalizedDomain) else None
    step = PenaltyStep(decl, model, localized)

    def penalized_multipliers(point: np.ndarray, duals: Any, data: list | None = None) -> list:
        # (``data``: the data terms' multipliers at the copies in W, :func:`_folded_rounds`)
        use = model if data is None else _with_smooth(model, data)
        return use.multipliers(point, duals, decl.n)

    judge = _PointJudge(
        decl,
        lam=lam,
        w0=w0,
        accuracy=accuracy,
        extension=extension,
        w_domain=w_domain,
        name=PENALIZED,
        start=start,
        multipliers=penalized_multipliers,
        copies=None if relaxed is None else relaxed.copies,
        fold=fold,
    )
    x, duals, steps = penalized_newton(smooth, step, lam, w0, init, judge=judge)
    if relaxed is not None and not judge.met:

        def again(smooth_model: Any, start_at: np.ndarray) -> tuple[np.ndarray, Any]:
            out = penalized_newton(smooth_model, step, lam, w0, start_at, judge=judge)
            return out[0], out[1]

        x, duals = _folded_rounds(decl, relaxed, float(extension or 0.0), judge, x, duals, again)
    return judge.finish(
        x, duals, "The penalized proximal Newton steps certified nothing.", newton_steps=int(steps)
    )


class _GivenMultipliers:
    """A smooth model whose ``multipliers`` are given (the certificate's at the copies in W,
    :func:`_folded_rounds`), for :meth:`PenalizedModel.multipliers`."""

    def __init__(self, thetas: list) -> None:
        self.thetas = thetas

    def multipliers(self, w: np.ndarray) -> list:
        return self.thetas


def _with_smooth(model: Any, thetas: list) -> Any:
    """``model`` (a :class:`MixedModel` or a :class:`PenalizedModel`) whose smooth part's
    multipliers are ``thetas``."""
    return dataclasses.replace(model, smooth=_GivenMultipliers(thetas))


#: the most rounds of :func:`_folded_rounds`
FOLDED_ROUNDS = 6


def _folded_rounds(
    decl: Declaration,
    relaxed: SmoothExtension,
    C: float,
    judge: _PointJudge,
    x: np.ndarray,
    found: Any,
    again: Callable[[Any, np.ndarray], tuple[np.ndarray, Any]],
) -> tuple[np.ndarray, Any]:
    """The folded extension on a proximal Newton rung whose relaxed copies (over ``R^d``)
    leave W (a ball or a box): each round puts those examples' copies in W exactly
    (:func:`~dpcvx.certification.ball.smooth_copies_in`), certifies the point there, and,
    while that misses the target, solves again (``again(model, x)``) with those examples'
    terms replaced by a second-order model of their extensions at the point (the others keep
    their relaxed form), as the smooth rung's rounds do. Up to :data:`FOLDED_ROUNDS`; the
    judge keeps every certificate. Returns the last point and the method's multipliers."""
    dom = decl.domain
    region = _region(dom)
    if region is None:
        return x, found
    moved = recentered(relaxed.model, np.asarray(dom.center, float), float(dom.radius))
    out: np.ndarray | None = None
    for _ in range(FOLDED_ROUNDS):
        point = judge.feasible.make_feasible(x)
        fix = smooth_copies_in(relaxed, C, point, region, out)
        if fix is None:  # every relaxed copy lies in W: the judge's certificates are exact
            break
        if judge.judge(point, found, data=fix.thetas, copies=fix.Y, slopes=fix.slopes):
            break
        out = fix.rows
        x, found = again(_Replaced(moved, fix.rows, fix.quad), x)
        if judge.met:
            break
    return x, found


class _PointJudge:
    """The ``judge`` of a proximal Newton method (:func:`proximal_newton`,
    :func:`penalized_newton`): certifies each point it proposes, made feasible, with the
    rung's multipliers (``multipliers(point, method's multipliers)``), keeps every
    certificate, and answers True once one meets the target. Under the folded extension
    (``fold``), ``copies(point)`` are the examples' copies of its relaxed form."""

    def __init__(
        self,
        decl: Declaration,
        *,
        lam: float,
        w0: np.ndarray,
        accuracy: float | None,
        extension: float | None,
        w_domain: Domain | LocalizedDomain | None,
        name: str,
        start: float,
        multipliers: Callable[..., list],
        copies: Callable[[np.ndarray], np.ndarray] | None = None,
        fold: frozenset[int] = frozenset(),
    ) -> None:
        self.decl, self.lam, self.w0, self.accuracy = decl, lam, w0, accuracy
        self.extension, self.w_domain, self.name = extension, w_domain, name
        self.start, self.multipliers = start, multipliers
        self.copies, self.fold = copies, fold
        self.feasible = decl.domain if w_domain is None else w_domain
        self.certificates: list[CertifiedSolution] = []
        self.last: np.ndarray | None = None  # the last point judged
        self.met = False  # whether a certificate met the target

    def __call__(self, x: np.ndarray, found: Any) -> bool:
        self.last = x
        point = self.feasible.make_feasible(x)
        copies = None if self.copies is None else self.copies(point)
        return self.judge(point, found, copies=copies)

    def judge(
        self,
        point: np.ndarray,
        found: Any,
        *,
        data: list | None = None,
        copies: np.ndarray | None = None,
        slopes: np.ndarray | None = None,
    ) -> bool:
        """Certify the feasible ``point`` with the method's multipliers ``found`` (and, under
        the folded extension, the data terms' ``data`` multipliers at the examples'
        ``copies``, with their cone duals ``slopes``); True once a certificate meets the
        target."""
        import time

        thetas = (
            self.multipliers(point, found) if data is None else self.multipliers(point, found, data)  # type: ignore[call-arg]
        )
        stats = {
            "solver": self.name,
            "iterations": 0,
            "status": "converged",
            "seconds": time.perf_counter() - self.start,
        }
        try:
            cert = _certify_point(
                self.decl,
                point,
                self.lam,
                self.w0,
                self.accuracy,
                stats,
                thetas,
                self.extension,
                self.w_domain,
                copies=copies,
                slopes=slopes,
                fold=self.fold,
            )
        except CertificationError:
            return False
        self.certificates.append(cert)
        self.met = self.met or _meets(cert, self.accuracy)
        return _meets(cert, self.accuracy)

    def finish(self, x: np.ndarray, found: Any, message: str, **counts: int) -> CertifiedSolution:
        """The best certificate, the method's last point ``x`` judged too (after a shortened
        step it was not), with the method's ``counts`` and the rung's whole time in its
        stats; ``CertificationError(message)`` where none was certified."""
        import time

        if self.last is not x:
            self(x, found)
        if not self.certificates:
            raise CertificationError(message)
        best = min(self.certificates, key=lambda c: c.gap)
        stats = dict(best.solver_stats, **counts, seconds=time.perf_counter() - self.start)
        return _with_stats(best, stats)


def _feasible_start(dom: Domain, w0: np.ndarray) -> np.ndarray:
    """The solvers' starting point: ``w0`` (clipped into a box first) made feasible."""
    return dom.make_feasible(np.clip(w0, dom._lo, dom._hi) if dom.kind == "box" else w0)


def _region(dom: Domain) -> BallRegion | BoxRegion | None:
    """The ball or finite box the extension's copies stay in, for :func:`_ball_rounds`."""
    if dom.kind == "l2_ball":
        return BallRegion(np.asarray(dom.center, float), float(dom.radius))
    if dom.kind == "box" and np.all(np.isfinite(dom._lo)) and np.all(np.isfinite(dom._hi)):
        return BoxRegion(np.asarray(dom._lo, float), np.asarray(dom._hi, float))
    return None


#: the most re-solves of the extension with copies kept in W (see :func:`_ball_rounds`)
BALL_ROUNDS = 10


#: a certificate this many times the gap the slopes predict: the rounds settled on a point
#: that is not the answer (see :meth:`_PiecesRounds.release`)
STALLED = 30.0

#: a copy within this fraction of W's scale of ``w`` is at its extension's kink
NEAR_W = 1e-4

#: the rounds came back to a point when they are within this fraction of W's scale of one of
#: their last points (a cycle: the point is then certified at once, balanced duals included)
REVISIT = 1e-7

#: the arrowhead method's point within this many times its tolerance of W's boundary is put on
#: it before the rounds judge it (:meth:`_PiecesRounds.settle`)
SNAP = 10.0
#: and a ball's sphere within this fraction of its radius where the method's own multiplier
#: of it exceeds its slack (the sphere is active in the program it solved)
SNAP_ACTIVE = 1e-6


class _PiecesRounds:
    """:func:`_ball_rounds` for the arrowhead path: the relaxed piecewise-linear extension,
    re-solved with the moved examples taken out and their model added.

    An example whose copy sits at ``w`` (within :data:`NEAR_W`) on W's boundary, at a kink of
    its extension, has no second-order model: it is solved with its extension's pieces on the
    boundary instead (:meth:`~dpcvx.certification.arrowhead.ExtensionPieces.boundary_pieces`),
    for as long as its copy stays at ``w``. Those pieces charge the copies' push against W's
    boundary to the method's own multiplier of W, so where the certificate then misses the
    target that the slopes predict it meets, :meth:`release` takes their pieces back, all
    but those of the examples that leave the model and come back (each round they would
    swap between the model and their relaxed form, a cycle of two rounds)."""

    def __init__(
        self,
        relaxed: ExtensionPieces,
        mus,
        lam,
        w0,
        bounds: Bounds,
        tol,
        region,
        slacks=(),
        ball: tuple[np.ndarray, float] | None = None,
    ) -> None:
        self.relaxed, self.mus, self.lam, self.w0 = relaxed, mus, lam, w0
        #: the domain's bounding ball, where the method's models are recentered
        #: (:func:`~dpcvx.certification.arrowhead.recentered_pieces`)
        self.ball = ball
        self.bounds, self.tol, self.region = bounds, tol, region
        #: the domain's slacks and multipliers at the last solve's point (W's first)
        self.slacks: list = list(slacks)
        self.C = relaxed.C
        self.out: np.ndarray | None = None  # the examples the last solve took out
        self.own = np.zeros(0, int)  # the examples the next solve gives pieces of their own
        self.solved: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # the last's
        self.left: np.ndarray | None = None  # after a release, the examples that left the model
        self.inside = False  # the last solve's pieces went back at once (see off_sphere)
        self.last: dict = {}  # the arguments of the last fix
        self.balances = BalanceMemo()  # the balanced duals' last dual
        self.step: float | None = None  # the length of the last re-solve's step

    #: :func:`_balanced_rounds` judges the rounds' point again: the exact slopes of the
    #: copies at it, a box's balanced duals and the kinks' joint slopes
    rebalances = True
    #: the certificate's multipliers are the method's, not the loss's own derivatives
    derivatives = False

    def settle(self, x: np.ndarray, domain: Domain | LocalizedDomain) -> np.ndarray:
        """The method's point ``x`` with what lies within :data:`SNAP` times its tolerance of
        W's boundary put on it (radially onto a ball's sphere; a box's coordinates onto their
        bounds), and on a ball also what lies within :data:`SNAP_ACTIVE` of the radius where
        the method's multiplier of the sphere exceeds its slack (at any target); made feasible
        for ``domain``. Nothing moves with a band under ``FAR`` rounding bands or over
        ``REACH`` of W's size
        (:meth:`BallRegion.onto_boundary
        <dpcvx.certification.ball.BallRegion.onto_boundary>`).

        The method stops with its residuals and complementarity below its tolerance, so a
        point whose answer is on W's boundary comes back up to about that tolerance inside
        (its slack is its complementarity over its multiplier: more where that is small). The
        rounds take a point as on the boundary only to rounding (the normal cones of
        ``BallRegion.cancellable`` and :func:`~dpcvx.certification.box.at_bounds`): a point
        that far inside has no normal cone there, so the copies at it whose slopes push out of
        W got duals no normal could bring into the C-ball, the certificate missed by orders
        of magnitude, and each round came back to the same point. The certificate judges the
        point it gets; each coordinate, or the distance to the sphere, moves by at most the
        band (a thousandth of the target times ``SNAP``, or ``SNAP_ACTIVE`` of the radius)."""
        region = self.region
        if isinstance(region, BallRegion):
            # the sphere's slack and multiplier in the program solved (W's constraint first)
            s, nu = self.slacks if len(self.slacks) == 2 else (np.zeros(0), np.zeros(0))
            active = bool(s.size and nu.size and nu[0] > s[0])
            moved = region.onto_boundary(x, SNAP * self.tol, active, SNAP_ACTIVE)
        else:
            moved = region.onto_boundary(x, SNAP * self.tol)
        return x if np.array_equal(moved, x) else domain.make_feasible(moved)

    def fix(self, x: np.ndarray) -> BallCopies | None:
        solved = None if self.solved is None else self.solved[:2]
        self.last = dict(
            w=x,
            mus=self.mus,
            region=self.region,
            extra=self.out,
            own=self.own,
            solved=solved,
            near=NEAR_W,
            left=self.left,
        )
        fix = self.relaxed.copies_in(**self.last)
        if fix is not None:
            self.own = fix.own
            if self.left is not None:
                self.left = np.union1d(self.left, fix.others)
        return fix

    def exact_fix(self, x: np.ndarray) -> BallCopies | None:
        """The last :meth:`fix`, at ``x``, with the slopes of the copies at ``x`` that had
        pieces of their own set to the loss's own there (``exact_own``), the rounds' state
        untouched: what balanced duals start from."""
        return self.relaxed.copies_in(**dict(self.last, w=x), exact_own=True)

    @property
    def held(self) -> bool:
        """The last solve gave examples pieces of their own (:meth:`solve`), and they were
        not given back at once (:meth:`off_sphere`)."""
        return self.solved is not None and not self.inside

    def off_sphere(self, x: np.ndarray) -> bool:
        """After a solve that gave examples the extension's pieces on a ball's sphere, whether
        its point ``x`` (settled) lies inside the ball by more than :data:`SNAP_ACTIVE` of the
        radius, and the pieces go back at once (:meth:`release`), the point then not judged:
        those pieces hold only on the sphere (inside, the extension's slopes are clipped to
        C). Nearer the sphere the point is taken as on it: the method's point of an answer on
        the sphere can stop a few roundings inside (hinge, radius 0.3, n = 1e4: 4e-12 of the
        radius, where giving the pieces back cycled the rounds until the joint program took
        over). After an earlier release the pieces stay (those of the examples that left the
        model and came back, whose release would cycle) and the point is judged as before."""
        region = self.region
        self.inside = False
        if self.solved is None or not isinstance(region, BallRegion) or self.left is not None:
            return False
        if region.distance_inside(x) > SNAP_ACTIVE * region.radius:
            self.release()
            self.inside = True
        return self.inside

    def release(self) -> None:
        """From the next solve on, the copies at ``w`` lose their own pieces (relaxed in that
        solve, then modelled where their copy leaves W), but for those that leave the model
        and come back."""
        if self.left is None:
            self.left = np.zeros(0, int)
            self.own = np.zeros(0, int)

    def exact(self, x: np.ndarray) -> tuple[np.ndarray, list]:
        return self.relaxed.copies(x, self.mus)

    def recentered(self, model: PiecewiseModel) -> PiecewiseModel:
        """The model the method runs on (the same where there is no ball)."""
        return model if self.ball is None else recentered_pieces(model, *self.ball)

    def solve(self, fix: BallCopies, x: np.ndarray) -> tuple[np.ndarray, int]:
        self.solved = None
        if self.own.size:
            self.solved = (self.own, *self.relaxed.boundary_pieces(self.own, x, self.region))
        model = self.recentered(self.relaxed.without(fix.rows, self.solved))
        # the elements near a kink first (the rest keep their pieces between rounds), with
        # twice the last round's step as the radius; the whole program where that fails
        reach = SCREEN_REACH * self.region.scale if self.step is None else 2.0 * self.step
        lam, w0, tol, bounds, quad = self.lam, self.w0, self.tol, self.bounds, fix.quad
        solved = screened_ipm(
            model,
            lam,
            w0,
            x,
            tol=tol,
            reach=reach,
            bounds=bounds,
            quad=quad,
            domain_out=self.slacks,
        )
        if solved is None:
            solved = arrowhead_ipm(
                model, lam, w0, x, tol=tol, bounds=bounds, quad=quad, domain_out=self.slacks
            )
        out, self.mus, steps = solved
        self.step = float(np.linalg.norm(out - x))
        self.out = fix.rows
        return out, steps


class _SmoothRounds:
    """:func:`_ball_rounds` for the smooth path: Newton's method on the relaxed smooth
    extension with the moved examples' terms taken out and their model added (in a ball,
    Newton's steps kept in it; in a box, L-BFGS-B with its bounds, then Newton's steps on the
    coordinates off their bounds, as the plain rung)."""

    def __init__(self, relaxed: SmoothExtension, C: float, lam: float, w0, decl, region) -> None:
        self.relaxed, self.C, self.lam, self.w0 = relaxed, C, lam, w0
        self.decl, self.region = decl, region
        self.out: np.ndarray | None = None  # the examples the last solve modelled
        self.balances = BalanceMemo()  # the balanced duals' last dual
        self.moved: SmoothModel | None = None  # the solver's model (see :meth:`solve`)

    def fix(self, x: np.ndarray, copies: np.ndarray | None = None) -> BallCopies | None:
        return smooth_copies_in(self.relaxed, self.C, x, self.region, self.out, copies)

    def exact_fix(self, x: np.ndarray) -> BallCopies | None:
        """:meth:`fix` at ``x``, which leaves the rounds' state untouched (the smooth slopes
        are the loss's own derivatives already)."""
        return self.fix(x)

    def exact(self, x: np.ndarray) -> tuple[np.ndarray, list]:
        return self.relaxed.copies(x), self.relaxed.model.multipliers(x)

    #: no example has pieces of its own here
    held = False
    #: the certificate's multipliers are the loss's own derivatives (at each copy)
    derivatives = True

    @property
    def rebalances(self) -> bool:
        """Whether :func:`_balanced_rounds` can judge the rounds' point other than its
        certificate: on a box only. In a ball the duals stay as they are, the exact copies are
        those :meth:`fix` found (the smooth slopes are the loss's own) and there are no kinks,
        so it would compute the same certificate again (with the stable gap, at d = 100 and
        n = 1e5 a third of a Huber extension's time)."""
        return isinstance(self.region, BoxRegion)

    def settle(self, x: np.ndarray, domain: Domain | LocalizedDomain) -> np.ndarray:
        """``x`` as it is: Newton's steps in a ball end on its sphere, and L-BFGS-B's on the
        box's bounds."""
        return x

    def release(self) -> None:
        """Nothing to give back: every moved example is in the model."""

    def off_sphere(self, x: np.ndarray) -> bool:
        """No example has pieces of its own here (:meth:`_PiecesRounds.off_sphere`)."""
        return False

    def solve(self, fix: BallCopies, x: np.ndarray) -> tuple[np.ndarray, int]:
        if self.moved is None:  # the solver's model (see recentered), once
            dom = self.decl.domain
            self.moved = recentered(self.relaxed.model, dom.center, float(dom.radius))
        model = _Replaced(self.moved, fix.rows, fix.quad)
        self.out = fix.rows
        region = self.region
        if isinstance(region, BallRegion):
            return ball_newton(model, self.lam, self.w0, x, region.center, region.radius)
        x, steps = _lbfgsb(self.decl, model, self.lam, self.w0, x, True)  # type: ignore[arg-type]
        polished = _polish_off_bounds(model, self.lam, self.w0, x, region.lo, region.hi)
        return (x, steps) if polished is None else (polished[0], steps + polished[1])


class _Replaced:
    """A smooth model (blocks of one entry per example) with the examples ``rows`` replaced by
    the quadratic ``w^T Q w / 2 + q^T w``: the model less the rows' own, plus the
    quadratic."""

    def __init__(self, model: Any, rows: np.ndarray, quad: tuple[np.ndarray, np.ndarray]) -> None:
        subs = []
        for blk in model.blocks:
            knots = None if blk.knots is None else (blk.knots[0][rows], blk.knots[1][rows])
            subs.append(dataclasses.replace(blk, A=blk.A[rows], b=blk.b[rows], knots=knots))
        self.model = model
        self.sub = SmoothModel(rows.size, model.d, tuple(subs))
        self.share = rows.size / model.n
        self.Q, self.q = quad

    def value_grad(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = self.model.value_grad(w)
        sv, sg = self.sub.value_grad(w)
        Qw = self.Q @ w
        return (
            value - self.share * sv + float(w @ Qw) / 2 + float(self.q @ w),
            grad - self.share * sg + Qw + self.q,
        )

    def hessian(self, w: np.ndarray) -> np.ndarray:
        return self.model.hessian(w) - self.share * self.sub.hessian(w) + self.Q


def _ball_rounds(
    decl: Declaration,
    rounds_of: _PiecesRounds | _SmoothRounds,
    x: np.ndarray,
    fix: BallCopies,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    stats: dict,
    w_domain: Domain | LocalizedDomain | None,
) -> CertifiedSolution:
    """The extension over a ball W whose copies over ``R^d`` leave W (a small, active domain).

    ``fix`` puts the exact copies of the examples whose copy leaves W at ``x`` in W
    (:func:`~dpcvx.certification.ball.ball_extension`). Each round certifies them, or, while
    the certificate would miss the target, solves again (``rounds_of``: the arrowhead method
    or Newton's method), those examples replaced by a second-order model of their extensions
    at ``x`` (a proximal Newton step: the others keep their exact relaxed form). The
    certificate is skipped while the change in the slopes since the last solve, ``Delta``
    (the exact slopes at ``x`` less the solve's, of the examples it modelled or that moved
    since), predicts a gap above the target (:func:`_predicted_gap`), but for a point the
    rounds came back to, the last round, a point from a solve that gave examples pieces of
    their own (unless those pieces were on a ball's sphere and the point came back inside
    the ball, :meth:`_PiecesRounds.off_sphere`), and, on a box, a round with such pieces for
    the next solve. Up to
    :data:`BALL_ROUNDS` rounds; then the last certificate (or its error) goes to the ladder,
    and the joint program takes over. The rounds only move the point the certificate judges."""
    import time

    feasible = decl.domain if w_domain is None else w_domain  # what each point is made in
    best: CertifiedSolution | CertificationError | None = None
    steps = int(stats["iterations"])
    start = time.perf_counter() - float(stats["seconds"])
    n = decl.n
    C = rounds_of.C
    predicted = np.zeros(decl.d)  # the slopes the last solve's model gave its examples
    rows_before = np.zeros(0, int)  # the examples it modelled (none: all were relaxed)
    curvature = np.zeros((decl.d, decl.d))  # the last model's, beyond lam I
    visited: list[np.ndarray] = []  # the last rounds' points
    for rounds in range(1, BALL_ROUNDS + 1):
        # the change in the slopes since the last solve: of the examples modelled then or
        # now, their exact slopes at x, less the model's, less the relaxed slopes of those
        # that joined (the last solve had them relaxed; those it gave pieces of their own
        # count as exact, and one leaving them counts as relaxed: a guess either way)
        modelled = np.zeros(n, bool)
        modelled[rows_before] = True
        joined = ~modelled[fix.rows]
        change = (
            fix.slopes[fix.rows].sum(axis=0)
            + fix.slopes[fix.others].sum(axis=0)
            - fix.before[joined].sum(axis=0)
        ) / n - predicted
        goal = _target(accuracy, best.upper if isinstance(best, CertifiedSolution) else 0.0)
        guess = _predicted_gap(change, lam, curvature) if lam > 0 else np.inf
        hopeless = guess > goal
        # a point the rounds came back to (a cycle): judged now, balanced duals included
        near = REVISIT * rounds_of.region.scale
        revisit = any(float(np.max(np.abs(x - seen))) <= near for seen in visited)
        visited = (visited + [x])[-4:]
        # after a solve that gave examples pieces of their own, every round is judged: those
        # pieces hold the point on W's boundary, and only a certificate shows when to take
        # them back (but for a ball's point that came back inside: they went back at once,
        # see _PiecesRounds.off_sphere). Before such a solve nothing held the point, and in a
        # ball a hopeless round is not judged (that certificate missed every time); on a
        # box's faces the slopes overestimate the gap, and such a round is (it met the target
        # in a sixth of random box cases)
        boxed = isinstance(rounds_of.region, BoxRegion) and fix.own.size > 0
        if not hopeless or revisit or rounds == BALL_ROUNDS or rounds_of.held or boxed:
            stats = dict(
                stats, iterations=steps, ball_rounds=rounds, seconds=time.perf_counter() - start
            )
            args = (decl, x, lam, w0, accuracy)
            try:
                cert = _certify_point(
                    *args,
                    stats,
                    fix.thetas,
                    C,
                    w_domain,
                    fix.Y,
                    fix.slopes,
                    derivatives=rounds_of.derivatives,
                )
            except CertificationError as exc:
                if not isinstance(best, CertifiedSolution):
                    best = exc
            else:
                if _meets(cert, accuracy):
                    return cert
                if not isinstance(best, CertifiedSolution) or cert.gap < best.gap:
                    best = cert
                stalled = cert.gap > STALLED * guess  # the slopes settled, the certificate not
                if (stalled or revisit or rounds == BALL_ROUNDS) and rounds_of.rebalances:
                    # on a box's faces, the duals of the copies at x balanced jointly first
                    # (then Newton's steps on the coordinates off the bounds, if they miss)
                    info = dict(stats, balanced_duals=True)
                    # the last round's steps go on while they halve the gap (no round follows)
                    limit = FACE_STEPS_LAST if rounds == BALL_ROUNDS else FACE_STEPS
                    balanced = _balanced_rounds(
                        decl, rounds_of, x, fix, lam, w0, accuracy, info, C, w_domain, limit
                    )
                    if balanced is not None:
                        if _meets(balanced, accuracy):
                            return balanced
                        if balanced.gap < best.gap:
                            best = balanced
                        # within the slopes' prediction: the duals were off, not the point
                        stalled = stalled and balanced.gap > STALLED * guess
                if stalled:
                    rounds_of.release()
        if rounds == BALL_ROUNDS:
            break
        Q, q = fix.quad
        try:  # a failed re-solve keeps the best certificate so far
            x, more = rounds_of.solve(fix, x)
        except (np.linalg.LinAlgError, ValueError, FloatingPointError):
            break
        steps += int(more)
        if not np.all(np.isfinite(x)):
            break
        x = rounds_of.settle(feasible.make_feasible(x), feasible)
        rounds_of.off_sphere(x)
        predicted = Q @ x + q
        rows_before = fix.rows
        curvature = Q
        following = rounds_of.fix(x)
        if following is None:  # no copy leaves W now: the relaxed copies are exact
            Y, thetas = rounds_of.exact(x)
            return _certify_point(decl, x, lam, w0, accuracy, stats, thetas, C, w_domain, copies=Y)
        fix = following
    if isinstance(best, CertifiedSolution):
        return best
    if best is None:  # rounds judged hopeless, then a re-solve failed
        raise CertificationError("The extension's rounds certified nothing.")
    raise best


def _balanced_rounds(
    decl: Declaration,
    rounds_of: _PiecesRounds | _SmoothRounds,
    x: np.ndarray,
    fix: BallCopies,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    stats: dict,
    C: float,
    w_domain: Domain | LocalizedDomain | None,
    limit: int | None = None,
) -> CertifiedSolution | None:
    """The certificate at ``x`` with balanced duals (:func:`_balanced`); where it misses the
    target, up to ``limit`` (default :data:`FACE_STEPS`) Newton's steps on the coordinates
    off the box's bounds (:func:`_face_step`) from the best point so far, each certified so: a
    step that does not improve the certificate is taken back and the next one from there is a
    quarter as long (two steps in a row that do not halve the gap end the steps).

    On the arrowhead path, the examples whose copy sits at a kink of their loss also get
    slopes chosen jointly (:func:`_kink_duals`) at every point judged, certified where they
    can meet the target; where the steps above miss it, as many steps again from the best
    point those slopes gave, from their gradient and holding the kinks they hold. A
    certificate that meets the target ends the rounds; else the best certificate of the
    steps above (the rounds' next decisions rest on it, as before), or None (an internal
    failure or a floating-point warning here only forgoes a point, or a step). The rounds'
    state is not touched."""
    region = rounds_of.region
    domain = decl.domain if w_domain is None else w_domain
    target = _target(accuracy, 0.0)
    last: list = []  # the copies' duals at the last point judged, with the copies and point

    def duals(point: np.ndarray, fixed: BallCopies) -> np.ndarray:
        """:func:`_copy_duals`, once per point and copies (the plain judgement and the
        kinks' joint slopes both start from them)."""
        if not (last and last[0] is fixed and np.array_equal(last[1], point)):
            last[:] = [fixed, np.array(point, copy=True), _copy_duals(decl, point, fixed, C)]
        return last[2]

    def balanced(point: np.ndarray, fixed: BallCopies | None, step: int):
        """The certificate at ``point`` with ``fixed``'s duals balanced, the gradient they
        give and ``fixed``, or None (nothing balanced, or an internal failure or a
        floating-point warning inside: each only forgoes this point)."""
        if fixed is None:
            return None
        try:
            with np.errstate(all="ignore"):
                memo = rounds_of.balances
                out = _balanced(
                    decl,
                    point,
                    fixed,
                    lam,
                    w0,
                    C,
                    region,
                    w_domain,
                    memo,
                    lambda: duals(point, fixed),
                )
            if out is None:
                return None
            slopes, grad = out
            info = dict(stats, face_steps=step)
            cert = _certify_point(
                decl, point, lam, w0, accuracy, info, fixed.thetas, C, w_domain, fixed.Y, slopes
            )
        except Exception:  # noqa: BLE001
            return None
        return cert, grad, fixed

    def at_kinks(point: np.ndarray, fixed: BallCopies | None, step: int, hopeless: bool):
        """:func:`balanced` with the kinks' joint slopes, and the directions of the kinks
        that hold the point; None where there is no kink, or (unless ``hopeless``) where
        the gradient those slopes leave on the free coordinates alone misses the target."""
        if fixed is None or not isinstance(rounds_of, _PiecesRounds):
            return None
        try:
            with np.errstate(all="ignore"):
                pieces = rounds_of.relaxed
                out = _kink_duals(
                    decl, point, fixed, lam, w0, C, pieces, region, lambda: duals(point, fixed)
                )
        except Exception:  # noqa: BLE001 - only forgoes the kinks' joint slopes here
            return None
        if out is None or (out[2] > KINK_FLOOR * target and not hopeless):
            return None
        judged = balanced(point, out[0], step)
        return None if judged is None else (*judged, out[1])

    def exact_fix(point: np.ndarray) -> BallCopies | None:
        try:
            with np.errstate(all="ignore"):
                return rounds_of.exact_fix(point)
        except Exception:  # noqa: BLE001 - only forgoes the balanced duals there
            return None

    kinks_best: list = []  # the best judgement with the kinks' slopes so far

    def judged(point: np.ndarray, step: int):
        """The plain judgement at ``point``; the one with the kinks' slopes too where the
        plain one misses the target (kept in ``kinks_best`` when it is the best so far)."""
        fixed = exact_fix(point) or (fix if step == 0 else None)
        plain = balanced(point, fixed, step)
        if plain is None or not _meets(plain[0], accuracy):
            other = at_kinks(point, fixed, step, False)
            if other is not None and (not kinks_best or other[0].gap < kinks_best[0][0].gap):
                kinks_best[:] = [other]
        return plain

    def on_kinks(point: np.ndarray, step: int):
        """The judgement at ``point`` with the kinks' slopes (the plain one where there is
        no kink), kept in ``kinks_best`` when it is the best so far."""
        fixed = exact_fix(point)
        out = at_kinks(point, fixed, step, True) or balanced(point, fixed, step)
        if out is not None and (not kinks_best or out[0].gap < kinks_best[0][0].gap):
            kinks_best[:] = [out]
        return out

    def steps(first, judge, held) -> tuple:
        """Face steps from ``first`` (a judgement), each judged by ``judge``, holding the
        kinks ``held`` gives a judgement (if any); the best judgement."""
        best = first
        length, misses = 1.0, 0
        # the steps' curvature beyond lam I: the rounds' model at the best point, updated by
        # the gradient's change from the last best point to it (:func:`_secant`); the
        # coordinates that the gradient at that last best point pushed into the box
        curvature = first[2].quad[0]
        pushed: np.ndarray | None = None
        for step in range(1, (FACE_STEPS if limit is None else limit) + 1):
            if _meets(best[0], accuracy) or misses == 2 or _won():
                break
            try:
                with np.errstate(all="ignore"):
                    moved = _face_step(
                        best[0].w, best[1], curvature, lam, region, length, held(best), pushed
                    )
                    point = None if moved is None else domain.make_feasible(moved)
            except Exception:  # noqa: BLE001 - a failed step ends the steps, the best stays
                break
            if point is None:
                break
            trial = judge(point, step)
            if trial is not None and trial[0].gap < best[0].gap:
                try:  # the model at the new point, with the pair's secant
                    with np.errstate(all="ignore"):
                        change = trial[1] - best[1]
                        curvature = _secant(trial[2].quad[0], lam, point - best[0].w, change)
                        pushed = _pushing(best[0].w, best[1], region)
                except Exception:  # noqa: BLE001 - only forgoes the update, the step stays
                    curvature, pushed = trial[2].quad[0], None
                gained = trial[0].gap < 0.5 * best[0].gap
                best, length, misses = trial, 1.0, 0 if gained else misses + 1
            else:
                length, misses = length / 4, misses + 1
        return best

    def _won() -> bool:
        return bool(kinks_best) and _meets(kinks_best[0][0], accuracy)

    first = judged(x, 0)
    if first is None:
        return kinks_best[0][0] if _won() else None
    if not isinstance(region, BoxRegion):
        # a ball: no face steps; the kinks' joint slopes where they did better
        if kinks_best and kinks_best[0][0].gap < first[0].gap:
            return kinks_best[0][0]
        return first[0]
    best = steps(first, judged, lambda j: None)
    if _meets(best[0], accuracy):
        return best[0]
    if kinks_best and not _won():
        # from the best point the kinks' slopes gave, steps from their gradient, holding
        # the kinks those slopes hold
        steps(kinks_best[0], on_kinks, lambda j: j[3] if len(j) > 3 else None)
    if _won():
        return kinks_best[0][0]
    return best[0]


#: the name of the lifted rung's attempts in ``solver_stats["attempts"]`` and its
#: certificates' ``method`` (the joint program with copies for the moving examples only, by
#: the ladder's first solver)
LIFTED = "lifted copies"
#: the most joint programs the lifted rung solves (each lifts the examples that moved at the
#: last one's point too)
LIFT_ROUNDS = 3
#: the lifted rung gives way to the whole joint program past this share of the examples
#: steeper than C lifted
LIFT_SHARE = 0.5
#: a coordinate of the lifted program's point within this fraction of the box's width of a
#: bound is put on it (an interior-point solver stops just inside; the certificate judges)
LIFT_SNAP = 1e-9
#: an example whose copy is ``w`` within this fraction of its loss's scale of a kink is lifted
#: (the program's point is that far from the optimum's kinks)
LIFT_KINK = 1e-6
#: the lifted rung goes on only while each program's certificate is below this times the
#: last one's (``gap``: the rounds' best at first)
LIFT_PROGRESS = 0.5
#: the most steps of the arrowhead method on a lifted program: with many copies it takes
#: more than the plain solve's (absolute loss in ``cp.abs(w) <= 0.1``, n = 2e4: 23 steps with
#: 73 copies, 34 with 737, 81 with 3,887, 107 with 7,754; Clarabel took 146 iterations on a
#: whole joint program of that kind)
LIFT_STEPS = 200
#: the most entries of the lifted program's kept block factors (``copies x d^2``, one ``d x d``
#: inverse factor per copy: 2 GiB of float64). The method runs the whole program whatever
#: its copies, so at a large d this bounds its memory: d = 20 allows 671,088 copies (the hinge
#: release in a box at n = 1e6 lifts 109,256, its whole program 385,550), d = 100 26,843.
#: Past it the program is not run (recorded as an error) and the ladder goes on
LIFT_BLOCK_ENTRIES = 1 << 28


def _lifted_rung(
    decl: Declaration,
    rounds_of: _PiecesRounds | _SmoothRounds,
    x: np.ndarray,
    gap: float,
    programs: tuple,
    *,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    extension: float,
    w_domain: Domain | LocalizedDomain | None,
    attempts: list[dict],
    solver: str = "CLARABEL",
) -> CertifiedSolution | None:
    """The extension's joint program (paper 000, Lemma 2.7) with copies ``y_i`` for the
    examples whose copy leaves ``w`` only, its point certified as the rounds' points are
    (exact copies, balanced duals, the kinks' joint slopes): after the rounds missed the
    target at ``x``. After the arrowhead path's rounds the program is solved by
    :func:`~dpcvx.certification.arrowhead.arrowhead_ipm` with the copies as blocks of their
    own (:func:`_lifted_ipm`: no conic program, so at any n); after the smooth path's, by
    ``solver`` on the stamped conic program.

    The program's other examples enter with their own loss, which is at least their
    extension and equals it where the copy is ``w``: if every such example's copy is ``w`` at
    the optimum of ``F_C``, that optimum is the program's (the program's objective is above
    ``F_C`` and meets it there). So the examples lifted first are those whose copy leaves
    ``x``; where the certificate of the program's point misses the target, those whose copy
    leaves that point join them, up to :data:`LIFT_ROUNDS` programs (fewer copies than the
    whole joint program's, which Clarabel solves in as many iterations: 64 against 77 on
    one case, for a tenth of the copies), and while each program's certificate is below
    :data:`LIFT_PROGRESS` times the last (``gap`` the rounds' best): where it is not, another
    program rarely paid (the copies lifted were not the ones that move at the optimum: the
    examples with their own loss share one multiplier of the bounds, which can hold ``w`` on
    a face where their copies would move). On the arrowhead path the whole joint program
    (every example steeper than C lifted) comes last, where those programs miss, would lift
    more than :data:`LIFT_SHARE` of the steep examples, or lift none: the same method solves
    it, in one more program. The certificate alone judges every point. The best
    certificate, or None (none: on the smooth path, when more than :data:`LIFT_SHARE` of
    the steep examples would be lifted or none moves). ``x``: the rounds' best point;
    ``solver``: the ladder's first, at its tightest tolerances (the smooth path's). The
    whole program runs whatever its copies: the method's steps grow with them, but less
    than Clarabel's time on the same program (an absolute loss in ``cp.abs(w) <= 0.1`` at
    n = 1e5, 38,688 copies: 144 steps and 52 s, where Clarabel took 552 s)."""
    import time

    template, plain_template, domain_block = programs
    heavy = _lipschitz_bounds(decl) > extension * (1 + 1e-12)
    region = rounds_of.region
    domain = decl.domain if w_domain is None else w_domain
    best: CertifiedSolution | None = None
    before = float(gap)  # the last certificate's gap: the rounds' best, then each program's
    lifted = _moving(rounds_of, x, heavy, _copies_at(rounds_of, x))
    # on the arrowhead path the whole joint program (every steep example lifted) is one more
    # such program, tried last: where the programs with few copies miss, or would lift too
    # many, or none moves
    whole = np.flatnonzero(heavy) if isinstance(rounds_of, _PiecesRounds) else None
    last = False
    step = 0
    while True:
        step += 1
        few = 0 < lifted.size <= LIFT_SHARE * np.count_nonzero(heavy)
        if step > LIFT_ROUNDS or not few:
            if whole is None or not whole.size or last:
                break
            lifted, last = whole, True
        # each program guarded: a failure keeps the certificates of the programs before
        try:
            start = time.perf_counter()
            own = None  # the method's copies and duals, on the arrowhead path
            if isinstance(rounds_of, _PiecesRounds):
                found, raw_stats, own = _lifted_ipm(rounds_of, lifted, x)
            else:
                mask = np.zeros(decl.n, bool)
                mask[lifted] = True
                prog, parts = _program(
                    decl, template, domain_block, lam, w0, extension, plain_template, lifted=mask
                )
                raw = _solve_scaled(
                    _recentered(prog, parts or [(decl, prog)]), solver, True, lam, w0
                )
                found = None if raw.x is None else np.asarray(raw.x[: decl.d], float)
                raw_stats = {
                    "solver": solver,
                    "iterations": int(raw.stats.get("iterations", 0)),
                    "status": raw.stats.get("status"),
                }
            if found is None or not np.all(np.isfinite(found)):
                break
            point = domain.make_feasible(found)
            if isinstance(region, BoxRegion):
                reach = LIFT_SNAP * (region.hi - region.lo)
                point = np.where(point >= region.hi - reach, region.hi, point)
                point = np.where(point <= region.lo + reach, region.lo, point)
                point = domain.make_feasible(point)
            stats = {
                **raw_stats,
                "method": LIFTED,
                "lifted": int(lifted.size),
                "lift_rounds": step,
                "seconds": time.perf_counter() - start,
            }
            cert = None
            if own is not None:  # certified with the program's own copies and duals first
                rows, Y_rows, g_rows, thetas = own
                Y = np.broadcast_to(point, (decl.n, decl.d)).copy()  # every other copy: the point
                Y[rows] = Y_rows
                slopes = np.full(Y.shape, np.nan)
                slopes[rows] = g_rows
                C = rounds_of.C
                cert = _certify_point(
                    decl, point, lam, w0, accuracy, dict(stats), thetas, C, w_domain, Y, slopes
                )
            if cert is None or not _meets(cert, accuracy):
                # the exact copies at the point (for its judgement and the next program's
                # copies): not needed where the program's own certificate met the target
                copies = _copies_at(rounds_of, point)
                judged = _judged_point(
                    decl, rounds_of, point, copies, lam, w0, accuracy, stats, w_domain
                )
                cert = judged if cert is None or judged.gap < cert.gap else cert
        except Exception as exc:  # noqa: BLE001 - recorded; the best so far stands
            attempts.append(
                {
                    "solver": LIFTED,
                    "tight": True,
                    "lifted": int(lifted.size),
                    "error": _describe(exc),
                }
            )
            break
        attempts.append(
            {"solver": LIFTED, "tight": True, "lifted": int(lifted.size), "gap": cert.gap}
        )
        if best is None or cert.gap < best.gap:
            best = cert
        if _meets(cert, accuracy) or last:
            break
        grown = np.union1d(lifted, _moving(rounds_of, point, heavy, copies))
        if cert.gap > LIFT_PROGRESS * before or grown.size == lifted.size:
            # no progress (the copies lifted, or the duals at the point, miss), or no more
            # copies move: the whole program next, where there is one
            if whole is None:
                break
            grown = whole
        before = cert.gap
        lifted = grown
    return best


def _lifted_ipm(
    rounds_of: _PiecesRounds, lifted: np.ndarray, x: np.ndarray
) -> tuple[np.ndarray, dict, tuple | None]:
    """The lifted program's point by :func:`~dpcvx.certification.arrowhead.arrowhead_ipm`
    with the copies of ``lifted`` as blocks of their own
    (:class:`~dpcvx.certification.copy_blocks.CopyBlocks`), from the rounds' point ``x``, at
    the rounds' tolerance: no conic program is stamped. With it, the program's copies and
    duals for the certificate (:func:`_certify_point`'s ``thetas``, ``copies`` and
    ``slopes``): every other example's copy is the point itself, with the method's
    multipliers of its own pieces; a lifted one's copy is its block's ``y_i``, with the
    multipliers of its pieces there and the cone's multiplier as the dual ``g_i`` of
    ``C ||w - y_i||``."""
    relaxed, bounds = rounds_of.relaxed, rounds_of.bounds
    d = int(np.size(x))
    if lifted.size * d * d > LIFT_BLOCK_ENTRIES:
        raise MemoryError(
            f"the lifted program's {lifted.size} copies would keep {lifted.size * d * d} "
            f"entries of block factors, over LIFT_BLOCK_ENTRIES ({LIFT_BLOCK_ENTRIES})"
        )
    start = bounds.interior(np.asarray(x, float))
    blocks = CopyBlocks(relaxed, lifted, rounds_of.region, start)
    point, mus, steps = arrowhead_ipm(
        rounds_of.recentered(relaxed.own_without(lifted)),
        rounds_of.lam,
        rounds_of.w0,
        start,
        tol=rounds_of.tol,
        max_iter=LIFT_STEPS,
        bounds=bounds,
        blocks=blocks,
    )
    status = "converged" if steps < LIFT_STEPS else "step limit"
    stats = {"solver": ARROWHEAD, "iterations": int(steps), "status": status}
    kept = blocks.kept  # the copies and duals of the point returned
    if kept is None or not all(np.all(np.isfinite(a)) for a in kept):
        return point, stats, None
    Y, Z, N = kept
    # the block's w rows carry -Z_1 (its objective is c (t + C s)): g_i = -Z_1 / c
    mu = np.array(mus[0], float)
    mu[blocks.rows] = N[:, : blocks.m] * relaxed.weight  # rows summing to weight / n
    return point, stats, (blocks.rows, Y, -Z[:, 1:] / blocks.c, relaxed.source.multipliers([mu]))


def _copies_at(
    rounds_of: _PiecesRounds | _SmoothRounds, x: np.ndarray
) -> tuple[BallCopies | None, np.ndarray, list | None]:
    """The exact copies at ``x``: the rounds' exact fix there, and the copies with their
    multipliers (the relaxed ones, exact where the fix is None: every copy lies in W)."""
    with np.errstate(all="ignore"):
        fix = rounds_of.exact_fix(x)
        if fix is not None:
            return fix, fix.Y, None
        Y, thetas = rounds_of.exact(x)
    return None, Y, thetas


def _moving(
    rounds_of: _PiecesRounds | _SmoothRounds,
    x: np.ndarray,
    heavy: np.ndarray,
    copies: tuple[BallCopies | None, np.ndarray, list | None],
) -> np.ndarray:
    """The examples of ``heavy`` whose exact copy at ``x`` (in W; ``copies`` as
    :func:`_copies_at` gives them) is not ``x``, and those whose copy is ``x`` at a kink of
    their loss (to :data:`LIFT_KINK` of its scale): there the extension's slopes are a part
    of the loss's, which a program with the loss itself does not see."""
    with np.errstate(all="ignore"):
        out = heavy & np.any(copies[1] != x[None, :], axis=1)
        if isinstance(rounds_of, _PiecesRounds):
            pieces = rounds_of.relaxed
            rows = np.flatnonzero(heavy & ~out)
            line = Pieces1D(pieces.sigma[rows], pieces.beta[rows])
            lo, hi = line.subdifferential(pieces.u[rows] @ x, LIFT_KINK)
            out[rows[hi > lo]] = True
    return np.flatnonzero(out)


def _judged_point(
    decl: Declaration,
    rounds_of: _PiecesRounds | _SmoothRounds,
    x: np.ndarray,
    copies: tuple[BallCopies | None, np.ndarray, list | None],
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    stats: dict,
    w_domain: Domain | LocalizedDomain | None,
) -> CertifiedSolution:
    """The certificate at ``x`` with its exact copies (``copies``, as :func:`_copies_at`
    gives them): balanced duals and the kinks' joint slopes where they apply
    (:func:`_balanced_rounds`), else the copies' own duals."""
    C = rounds_of.C
    fix, Y, thetas = copies
    if fix is None:  # every relaxed copy lies in W: they are exact
        return _certify_point(decl, x, lam, w0, accuracy, stats, thetas, C, w_domain, copies=Y)
    cert = _certify_point(
        decl, x, lam, w0, accuracy, stats, fix.thetas, C, w_domain, fix.Y, fix.slopes
    )
    if _meets(cert, accuracy):
        return cert
    balanced = _balanced_rounds(decl, rounds_of, x, fix, lam, w0, accuracy, stats, C, w_domain)
    return cert if balanced is None or balanced.gap >= cert.gap else balanced


def _kink_duals(
    decl: Declaration,
    x: np.ndarray,
    fix: BallCopies,
    lam: float,
    w0: np.ndarray,
    C: float,
    pieces: ExtensionPieces,
    region: BallRegion | BoxRegion,
    duals: Callable[[], np.ndarray] | None = None,
    weights: np.ndarray | None = None,
    near: float | None = None,
) -> tuple[BallCopies, np.ndarray | None, float] | None:
    """``fix`` with the slopes of the examples whose copy is ``x`` at a kink of their loss
    chosen jointly so that the objective's gradient vanishes on the coordinates off the box's
    bounds (the least squares of it, each slope within its kink's range,
    :meth:`~dpcvx.certification.arrowhead.ExtensionPieces.kink_range`): at an optimum where
    the absolute loss's examples sit at their kinks (they interpolate, as in least absolute
    deviations), the method's split of those slopes is not the optimum's, and on those
    coordinates no cone of W takes up the difference. The other examples keep their duals; the
    certificate judges the result as any other.

    Also the directions ``u_i`` of the kinks whose slope came out strictly inside its range
    (they hold the point on their kinks: :func:`_face_step` keeps them there), or None; and
    the part of the certificate's gap that the gradient left on those free coordinates
    contributes alone (its global term there: a floor under the certificate, to skip one
    that cannot meet a target). None without a kink at ``x``. ``duals``: gives the copies'
    duals at ``x`` (:func:`_copy_duals` by default), when they are needed.

    In a ball (:func:`_ball_kink_duals`) the coordinates off the bounds are the directions
    along the sphere at ``x`` (all of them inside the ball). ``weights`` (per example): the
    objective's weights of the examples (a tilted mean's) instead of ``1/n`` each; ``near``:
    how near a kink (relative to the loss's scale) an example's pieces count as active
    (:data:`JOINT_KINK` by default)."""
    if isinstance(region, BallRegion):
        return _ball_kink_duals(decl, x, fix, lam, w0, C, pieces, region, duals, weights, near)
    top, bottom = at_bounds(x, region.lo, region.hi)
    free = np.flatnonzero(~(top | bottom))
    found = _kinks_at(x, fix, pieces, region, near) if free.size else None
    if found is None:
        return None
    rows, lo, hi = found
    g = _copy_duals(decl, x, fix, C) if duals is None else duals()
    # the gradient on the free coordinates without these examples, which must cancel it
    others, A = _kinks_system(g, rows, pieces.u[rows][:, free].T, decl.n, weights)
    rest = others[free] + lam * (x - w0)[free]
    gamma = _bounded_least_squares(A, -rest, lo, hi)
    if gamma is None:
        return None
    # the global term on the free coordinates, at the gradient those slopes leave there
    terms = _held_floor(x[free], rest + A @ gamma, lam, region.lo[free], region.hi[free])
    floor = float(np.sum(terms))
    slopes = np.array(fix.slopes, float, copy=True)
    slopes[rows] = np.nan  # the minorant's slope (within the C-ball, or balanced next)
    thetas = pieces.with_slopes(fix.thetas, x, rows, gamma)
    inside = (gamma > lo) & (gamma < hi)
    held = pieces.u[rows[inside]] if inside.any() else None
    return dataclasses.replace(fix, thetas=thetas, slopes=slopes), held, floor


def _kinks_at(
    x: np.ndarray,
    fix: BallCopies,
    pieces: ExtensionPieces,
    region: BallRegion | BoxRegion,
    near: float | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The examples whose copy is ``x`` at a kink of their loss whose range of slopes
    (:meth:`~dpcvx.certification.arrowhead.ExtensionPieces.kink_range`) is not a single
    slope, with that range; None where there is none."""
    at_x = np.flatnonzero(np.all(fix.Y == x[None, :], axis=1) & np.any(pieces.u != 0, axis=1))
    if not at_x.size:
        return None
    lo, hi = pieces.kink_range(x, at_x, region, JOINT_KINK if near is None else near)
    kinks = lo < hi
    if not kinks.any():
        return None
    return at_x[kinks], lo[kinks], hi[kinks]


def _ball_kink_duals(
    decl: Declaration,
    x: np.ndarray,
    fix: BallCopies,
    lam: float,
    w0: np.ndarray,
    C: float,
    pieces: ExtensionPieces,
    region: BallRegion,
    duals: Callable[[], np.ndarray] | None = None,
    weights: np.ndarray | None = None,
    near: float | None = None,
) -> tuple[BallCopies, None, float] | None:
    """:func:`_kink_duals` in a ball: the kinks' slopes chosen jointly so that the objective's
    gradient vanishes along the sphere at ``x`` (its projection across the sphere's normal
    ``e``, which the ball's normal cone cannot take up), or everywhere for a point inside
    (the least squares of it, each slope within its kink's range, which
    :meth:`~dpcvx.certification.arrowhead.ExtensionPieces.kink_range` keeps where the cone can
    bring the dual into the C-ball); each of those examples' duals is then the one of
    :func:`~dpcvx.certification.ball.dual_at_w` for its slope. The floor is the
    certificate's global term at ``x`` with those duals, ``q(x) - min_W q`` for
    ``q(w) = G^T w + lam/2 ||w - w0||^2`` (``G`` their mean): the per-example terms are
    nonnegative. (``|P G|^2 / (2 lam)``, the term without the sphere's curvature,
    overstated it by about ``1 + mu / (lam R)``, ``mu`` the normal part, and skipped joint
    slopes that certified.) (Hinge, radius 3, n = 1e5: the rounds' point on the sphere
    certified 2.1e-9 with the method's split of four kinks' slopes, against 1e-9, and five
    more rounds followed; with the joint slopes, 6e-12 at that point.) No kink directions are
    returned: the face steps are a box's."""
    found = _kinks_at(x, fix, pieces, region, near)
    if found is None:
        return None
    rows, lo, hi = found
    d = x.size
    across = np.eye(d)
    if region.distance_inside(x) <= ON_SPHERE * region.radius:
        e = (x - region.center) / region.radius
        across -= np.outer(e, e)
    g = _copy_duals(decl, x, fix, C) if duals is None else duals()
    others, A = _kinks_system(g, rows, across @ pieces.u[rows].T, decl.n, weights)
    rest = across @ (others + lam * (x - w0))
    gamma = _bounded_least_squares(A, -rest, lo, hi)
    if gamma is None:
        return None
    slopes = np.array(fix.slopes, float, copy=True)
    slopes[rows] = dual_at_w(region, pieces.u[rows], x, gamma, C)
    thetas = pieces.with_slopes(fix.thetas, x, rows, gamma)
    fixed = dataclasses.replace(fix, thetas=thetas, slopes=slopes)
    # the floor: the certificate's global term at x with these duals, q(x) - min_W q for
    # q(w) = G^T w + lam/2 |w - w0|^2 (the per-example terms are nonnegative)
    if weights is None:
        G = (g.sum(axis=0) - g[rows].sum(axis=0) + slopes[rows].sum(axis=0)) / decl.n
    else:
        G = others + np.asarray(weights, float)[rows] @ slopes[rows]
    at_x = float(G @ x) + 0.5 * lam * float(np.sum((x - w0) ** 2))
    floor = at_x - decl.domain.min_linear_quadratic(G, lam, w0)
    return fixed, None, max(floor, 0.0)


def _kinks_system(
    g: np.ndarray, rows: np.ndarray, U: np.ndarray, n: int, weights: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """The objective's gradient less the examples ``rows`` (their duals ``g``), and the
    matrix that takes their slopes to their part of it (``U``: a column per example, its
    direction): each example weighs ``1/n``, or ``weights`` (a tilted mean's)."""
    if weights is None:
        return (g.sum(axis=0) - g[rows].sum(axis=0)) / n, U / n
    p = np.asarray(weights, float)
    return p @ g - p[rows] @ g[rows], U * p[rows]


def _copy_duals(decl: Declaration, x: np.ndarray, fix: BallCopies, C: float) -> np.ndarray:
    """The duals ``g_i`` the extension's certificate takes at ``x`` for ``fix``'s copies."""
    return extension_bounds(
        decl, None, x, None, x, C, thetas=fix.thetas, copies=fix.Y, slopes=fix.slopes
    )[2]


def _bounded_least_squares(
    A: np.ndarray, b: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray | None:
    """``argmin ||A z - b||`` over ``lo <= z <= hi`` (scipy's bounded least squares), or None
    where it fails."""
    from scipy.optimize import lsq_linear

    lo = np.where(np.isfinite(lo), lo, -1e300)
    hi = np.where(np.isfinite(hi), hi, 1e300)
    try:
        out = lsq_linear(A, b, bounds=(lo, hi), method="bvls")
    except (ValueError, np.linalg.LinAlgError):
        return None
    z = np.clip(out.x, lo, hi)
    return z if np.all(np.isfinite(z)) else None


def _balanced(
    decl: Declaration,
    x: np.ndarray,
    fix: BallCopies,
    lam: float,
    w0: np.ndarray,
    C: float,
    region: BallRegion | BoxRegion,
    w_domain: Domain | LocalizedDomain | None,
    memo: BalanceMemo | None = None,
    duals: Callable[[], np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """``fix.slopes`` with the duals of the copies at ``x`` that must cancel part of their
    slope against a box's bounds chosen jointly (:func:`~dpcvx.certification.box.
    balanced_duals`), and the objective's gradient they give, or None where that does not
    apply (a localized domain; no such copy) or finds nothing. In a ball, whose normal cone
    is one ray, nothing is balanced: ``fix.slopes`` as they are, with their gradient (the
    judgement the kinks' joint slopes of :func:`_kink_duals` are weighed against). ``memo``:
    the rounds' last balance (:class:`~dpcvx.certification.box.BalanceMemo`); ``duals``:
    gives the copies' duals at ``x`` (:func:`_copy_duals` by default), when they are
    needed."""
    if w_domain is not None:
        return None
    if isinstance(region, BallRegion):
        g = _copy_duals(decl, x, fix, C) if duals is None else duals()
        return np.asarray(fix.slopes, float), g.sum(axis=0) / decl.n + lam * (x - w0)
    n = decl.n
    at_x = np.flatnonzero(np.all(fix.Y == x[None, :], axis=1))
    if not at_x.size:
        return None
    s, _, _, _ = _minorants(
        decl.subset(at_x), None, None, x, n, thetas=take_rows(fix.thetas, at_x, n)
    )
    steep = np.einsum("kd,kd->k", s, s) > C * C
    rows = at_x[steep]
    if not rows.size:
        return None
    g = _copy_duals(decl, x, fix, C) if duals is None else duals()
    fixed = (g.sum(axis=0) - g[rows].sum(axis=0)) / n + lam * (x - w0)
    balanced = balanced_duals(s[steep], g[rows], fixed, x, region.lo, region.hi, C, n, memo)
    if balanced is None:
        return None
    slopes = np.array(fix.slopes, float, copy=True)
    slopes[rows] = balanced
    return slopes, fixed + balanced.sum(axis=0) / n


#: the kinks' joint slopes are certified only where the gap they leave on the free
#: coordinates alone (a floor under the certificate, up to rounding) is within this many times
#: the target (:func:`_kink_duals`)
KINK_FLOOR = 1.5
#: the examples within this fraction of their loss's scale of a kink get joint slopes there
#: (a slope from the other side costs its deficiency, at most this times the scale and the
#: slopes' spread, which the certificate charges; a point a solver stops near the optimum
#: leaves its kinks about this far)
JOINT_KINK = 1e-6

#: a face step frees the coordinates at a bound that the gradient pushes into the box where
#: the least gap they leave held there is above this multiple of what the step removes
RELEASE = 1.0

#: Newton's steps on the coordinates off a box's bounds after balanced duals miss the target
FACE_STEPS = 4
#: and after the last round's (where no round follows and the joint program is next, or, past
#: its size limit, nothing): the steps end earlier where two in a row do not halve the gap
FACE_STEPS_LAST = 12


def _pushing(x: np.ndarray, grad: np.ndarray, region: BoxRegion) -> np.ndarray:
    """The coordinates of ``x`` at a bound of the box that ``grad`` pushes into it (not those
    of zero width, which no step moves)."""
    top, bottom = at_bounds(x, region.lo, region.hi)
    return ((top & (grad > 0)) | (bottom & (grad < 0))) & (region.hi > region.lo)


def _held_floor(
    x: np.ndarray, grad: np.ndarray, lam: float, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """Per coordinate, the certificate's global term ``q_j(x_j) - min over [lo_j, hi_j] of
    q_j`` for ``q_j`` of slope ``grad_j`` at ``x_j`` and curvature ``lam`` (the box is
    separable): what a coordinate held at ``x_j`` leaves in it, ``grad_j^2 / (2 lam)`` where
    the box leaves room for the minimizer, less where it does not."""
    if lam > 0:
        inner = np.clip(x - grad / lam, lo, hi)
    else:
        inner = np.where(grad > 0, lo, hi)
    delta = x - inner
    return np.maximum(grad * delta - lam * delta * delta / 2, 0.0)


def _face_step(
    x: np.ndarray,
    grad: np.ndarray,
    Q: np.ndarray,
    lam: float,
    region: BoxRegion,
    length: float = 1.0,
    kinks: np.ndarray | None = None,
    pushed: np.ndarray | None = None,
) -> np.ndarray | None:
    """A Newton step (times ``length``) on the coordinates of ``x`` off the box's bounds, and
    on those of ``pushed`` that ``grad`` still pushes into the box where they floor the
    certificate (below), from the gradient ``grad`` the balanced duals give and the
    curvature ``lam I + Q`` (the rounds' model, or the steps' secant update of it,
    :func:`_secant`; the other coordinates at a bound stay), clipped into the box; None
    without such a coordinate. With ``kinks`` (rows: directions ``u_k`` of examples held at
    a kink of their loss, :func:`_kink_duals`), the step keeps ``u_k^T w`` (its multipliers
    are those examples' slopes; the least-squares solution of that system where it is
    singular)."""
    top, bottom = at_bounds(x, region.lo, region.hi)
    off = ~(top | bottom)
    # the coordinates at a bound that the gradient pushes into the box: held there at this
    # gradient, each leaves its term of the certificate (:func:`_held_floor`, up to
    # push^2 / (2 lam)) whatever step the others take. They come off their bounds where they
    # pushed so at the last point too (``pushed``: a push that a step of the others removes
    # is the balanced duals' shortfall there, not the point's) and those terms are above
    # what the others' step can remove
    inward = np.zeros(x.size, bool) if pushed is None else _pushing(x, grad, region) & pushed
    if inward.any():
        floor = float(np.sum(_held_floor(x, grad, lam, region.lo, region.hi)[inward]))
        f = np.flatnonzero(off)
        H = Q[np.ix_(f, f)] + lam * np.eye(f.size)
        removable = float(grad[f] @ np.linalg.solve(H, grad[f])) / 2 if f.size else 0.0
        if floor > RELEASE * removable:
            off |= inward
    free = np.flatnonzero(off)
    if not free.size:
        return None
    H = Q[np.ix_(free, free)] + lam * np.eye(free.size)
    out = np.array(x, float, copy=True)
    if kinks is None or not kinks.size:
        out[free] -= length * np.linalg.solve(H, grad[free])
    else:
        U = kinks[:, free]
        k = U.shape[0]
        kkt = np.block([[H, U.T], [U, np.zeros((k, k))]])
        rhs = np.concatenate([-grad[free], np.zeros(k)])
        out[free] += length * np.linalg.lstsq(kkt, rhs, rcond=None)[0][: free.size]
    return np.clip(out, region.lo, region.hi)


def _secant(Q: np.ndarray, lam: float, step: np.ndarray, change: np.ndarray) -> np.ndarray:
    """The curvature ``lam I + Q`` of the face steps updated by BFGS from a ``step`` between
    two points judged and the ``change`` of the gradient their balanced duals give, less
    ``lam I``; ``Q`` as it is where the pair shows no positive curvature (``step^T change <=
    0``: the duals are chosen per point, not the gradient of one function) or the update is
    not finite. On a coordinate just off a box's bound the model alone underestimates the
    curvature (the copies on that face move with it), and the steps overshoot, back and
    forth."""
    H = Q + lam * np.eye(Q.shape[0])
    sy = float(step @ change)
    Hs = H @ step
    sHs = float(step @ Hs)
    if not (sy > 0 and sHs > 0):
        return Q
    out = Q + np.outer(change, change) / sy - np.outer(Hs, Hs) / sHs
    return out if np.all(np.isfinite(out)) else Q


def _predicted_gap(change: np.ndarray, lam: float, curvature: np.ndarray) -> float:
    """``Delta^T (lam I + Q)^{-1} Delta / 2``: the gap a change ``Delta`` in the gradient
    leaves when the objective's curvature is at least ``lam I + Q`` (the pieces only add to
    it, but the certificate also charges what the model missed: near the target it came out
    about 1.5 times this, far from it up to several hundred times). It only decides whether
    a certificate is worth computing."""
    H = curvature + lam * np.eye(change.size)
    try:
        return float(change @ np.linalg.solve(H, change)) / 2
    except np.linalg.LinAlgError:  # pragma: no cover - lam I + Q is positive definite
        return float(change @ change) / (2 * lam)


def _target(accuracy: float | None, upper: float) -> float:
    """The ladder's target (:func:`_certified_solve`): ``accuracy``, or without one the
    interior-point default relative to the objective's value ``upper``."""
    return accuracy if accuracy is not None else SMOOTH_DEFAULT * (1.0 + abs(upper))


def _meets(cert: CertifiedSolution, accuracy: float | None) -> bool:
    """Whether ``cert`` meets the ladder's target."""
    return bool(cert.gap <= _target(accuracy, cert.upper))


def _bounds(dom: Domain, w_domain: Domain | LocalizedDomain | None) -> Bounds:
    """The arrowhead method's constraints for the ball or box ``dom``, intersected with the
    localization ball of ``w_domain``."""
    part = (
        ("ball", np.asarray(dom.center, float), float(dom.radius))
        if dom.kind == "l2_ball"
        else ("box", dom._lo, dom._hi)
    )
    if not isinstance(w_domain, LocalizedDomain):
        return Bounds([part], np.asarray(dom.center, float))
    c, r = w_domain.ball_center, float(w_domain.ball_radius)
    # strictly inside both: between the localization center (in W) and W's interior point
    p = np.asarray(dom.interior, float)
    dist = float(np.linalg.norm(p - c))
    t = 0.5 if dist == 0 else min(0.5, 0.5 * r / dist)
    return Bounds([part, ("ball", c, r)], c + t * (p - c))


def _certify_point(
    decl: Declaration,
    x: np.ndarray,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    stats: dict,
    thetas: list | None,
    extension: float | None,
    w_domain: Domain | LocalizedDomain | None = None,
    copies: np.ndarray | None = None,
    slopes: np.ndarray | None = None,
    derivatives: bool = False,
    fold: frozenset[int] = frozenset(),
) -> CertifiedSolution:
    """Certify a point found without a program: for ``F``, or, under an extension, for
    ``F_C`` (as a plain block, or at the examples' ``copies`` of the extension's relaxed
    form), so that the certificate never relies on the Lipschitz bounds that chose the rung.
    A localized ``w_domain`` counts for the extension's certificate (paper 000's Algorithm
    4), and the plain one too (over ``W`` without one). ``derivatives``: the extension's
    ``thetas`` are the loss's own derivatives (see
    :func:`~dpcvx.certification.extension.certify_extension`)."""
    if copies is not None:
        stats["extension_copies"] = int(np.count_nonzero(np.any(copies != x[None, :], axis=1)))
    if extension is None:
        return certify(
            decl,
            x,
            lam=lam,
            w0=w0,
            accuracy=accuracy,
            solver_stats=stats,
            thetas=thetas,
            domain=w_domain,
        )
    return certify_extension(
        decl,
        None,
        x,
        None,
        C=extension,
        lam=lam,
        w0=w0,
        accuracy=accuracy,
        solver_stats=stats,
        w_domain=w_domain,
        thetas=thetas,
        copies=copies,
        slopes=slopes,
        derivatives=derivatives,
        fold=fold,
    )


#: the analytic rung's public limits: at most this many steps (each one costs a Python-level
#: iteration, about 0.3 ms) and this much arithmetic (steps * n * d)
ANALYTIC_MAX_STEPS = 20_000
ANALYTIC_BUDGET = 1e8


def analytic_rung_applies(
    decl: Declaration,
    *,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    extension: float | None,
    w_domain: Domain | LocalizedDomain | None,
) -> bool:
    """Whether paper 002's Algorithm 2 can be the ladder's last rung (public inputs only): a
    private solve of a plain program (every example's loss certified ``extension``-Lipschitz
    on W, the enforced claim's case) over a domain with an exact projection, with a fixed
    iteration count within :data:`ANALYTIC_MAX_STEPS` and :data:`ANALYTIC_BUDGET`."""
    return _analytic_steps(decl, lam, w0, accuracy, extension, w_domain) is not None


def _analytic_steps(
    decl: Declaration,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    extension: float | None,
    w_domain: Domain | LocalizedDomain | None,
) -> int | None:
    """The rung's fixed ``T = ceil(2 G^2 / (lam alpha/2))``, or None where it does not apply."""
    if extension is None or w_domain is not None or accuracy is None or lam <= 0:
        return None
    if decl.domain.kind not in ("l2_ball", "box", "l1_ball", "simplex"):
        return None
    G = regularized_subgradient_bound(decl, float(extension), lam, w0)
    T = subgradient_iterations(G, lam, accuracy / 2)
    if T > ANALYTIC_MAX_STEPS or not affordable(T, decl.n, decl.d, ANALYTIC_BUDGET):
        return None
    return T


def _analytic_rung(
    decl: Declaration,
    parts: list[tuple[Declaration, StampedProgram]] | None,
    *,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    extension: float | None,
    w_domain: Domain | LocalizedDomain | None,
) -> CertifiedSolution | None:
    """The last rung: paper 002's Algorithm 2 with ``T`` fixed in advance, whose accuracy
    holds by analysis (Prop 3.2) when every loss is ``L``-Lipschitz on W. Its point is
    certified by dpcvx as usual; where that certificate misses the target, the analytic
    bound (``2 G^2 / (lam (T + 1))`` plus a public rounding allowance, at most ``alpha``)
    stands instead. None when the rung does not apply (see :func:`analytic_rung_applies`)."""
    try:
        if parts is not None and len(parts) != 1:
            return None  # some example needs the extension's copy: no exact subgradients
        T = _analytic_steps(decl, lam, w0, accuracy, extension, w_domain)
        if T is None:
            return None
        assert extension is not None and accuracy is not None  # else T would be None
        # the analysis needs every loss C-Lipschitz: bounds rounded up, compared with C itself
        if not bool(np.all(_lipschitz_bounds(decl) * (1 + 1e-12) <= float(extension))):
            return None
        result = solve_declaration(
            decl, regularization=lam, lipschitz=float(extension), T=T, center=w0, average=True
        )
        cert = certify(decl, result.point, lam=lam, w0=w0, accuracy=accuracy)
        stats = dict(cert.solver_stats)
        stats.update(solver="paper 002 Algorithm 2", iterations=T)
        if cert.gap <= accuracy:
            return _with_stats(cert, stats)
        if not (result.bound_is_public and result.bound <= accuracy):
            return None
        from dataclasses import replace

        stats.update(certified_by="analysis (paper 002, Prop 3.2)")
        # the gap is the analytic bound; the certificate's own lower bound stays (upper minus
        # that bound would not be a lower bound: upper carries a rounding margin)
        return replace(
            cert,
            gap=float(result.bound),
            distance_bound=float(np.sqrt(2 * result.bound / lam)),
            solver_stats=MappingProxyType(stats),
        )
    except Exception:  # noqa: BLE001 - the rung is guarded like every other
        return None


def _describe(exc: BaseException) -> str:
    return (
        str(exc)
        if isinstance(exc, (SolverError, CertificationError))
        else f"{type(exc).__name__}: {exc}"
    )


def _with_stats(cert: CertifiedSolution, stats: dict) -> CertifiedSolution:
    from dataclasses import replace

    return replace(cert, solver_stats=MappingProxyType(stats))
