"""Certificates for the Lipschitz extension (paper 000, eq. (5), Lemma 2.7, Prop D.6).

``f_C(w, z) = min_{y in W} f(y, z) + C ||w - y||`` is convex, C-Lipschitz on W and below f.
For ANY ``g`` with ``||g|| <= C`` and any affine minorant ``f(y, z) >= <s, y> + beta``:

    f_C(w, z) >= min_{y in W} f(y, z) + <g, w - y>
              >= <g, w> + beta - sigma_W(g - s),

with ``sigma_W`` the support function of W. dpcvx takes ``g`` from the solver's dual of the
cone constraint ``||w - y|| <= t`` clipped to the C-ball, and ``(s, beta)`` from the same
valid-by-construction minorants as for plain ERM (taken at each example's own ``y_i``). The
upper bound is ``f(y_i, z_i) + C ||w - y_i||`` at an exactly feasible ``y_i``. Hence, per
example, certified values and a B-approximate subgradient with ``||g|| <= C`` and
``B = upper - lower`` (Prop D.6, certified by dpcvx rather than read from the solver); and for
the joint regularized program of Lemma 2.7 a certified gap.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from dpcvx.certification._rows import (
    clipped_rows,
    differing_rows,
    moved_rows,
    row_groups,
    support_rows,
    take_rows,
)
from dpcvx.certification.certificate import (
    ROUNDING,
    CertifiedSolution,
    _minorants,
    _term_duals,
    lower_from_gap,
    matching_mixes,
)
from dpcvx.certification.stable import StableSums, stable_extension_gap, stable_extension_sums
from dpcvx.compilation.stamp import StampedProgram, terms_view
from dpcvx.errors import CertificationError
from dpcvx.modeling._expressions import evaluate
from dpcvx.modeling.declaration import Declaration
from dpcvx.modeling.domains import row_norms

if TYPE_CHECKING:
    from dpcvx.modeling.domains import Domain
    from dpcvx.modeling.localized import LocalizedDomain

__all__ = [
    "ExtensionSums",
    "ExtensionValues",
    "certify_extension",
    "extension_bounds",
    "extension_value_bounds",
    "folded_values",
    "finish_extension",
]

_EPS = np.finfo(float).eps
#: with Clarabel's convention the rows ``(t, w - y)`` carry ``z_x = -g / n``
_SOC_SIGN = -1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ExtensionValues:
    """Certified per-example values of ``f_C(w, z_i)`` at the point ``w``.

    ``lower <= f_C(w, z_i) <= upper``; ``subgradients[i]`` has norm at most ``C`` and
    ``f_C(u, z_i) >= f_C(w, z_i) + <subgradients[i], u - w> - B[i]`` for every ``u`` in the
    domain, with ``B = upper - lower``.
    """

    w: np.ndarray
    C: float
    upper: np.ndarray
    lower: np.ndarray
    subgradients: np.ndarray
    B: np.ndarray


def _loss_at(decl: Declaration, Y: np.ndarray) -> np.ndarray:
    """``f(y_i, z_i)`` for each example at its own point ``y_i`` (rows of ``Y``)."""
    leaves = dict(decl.data)
    leaves[decl.variable.id] = Y
    return np.asarray(evaluate(decl.loss, leaves, decl.n), float).reshape(decl.n)


def extension_bounds(
    decl: Declaration,
    prog: StampedProgram | None,
    x: np.ndarray,
    z: np.ndarray | None,
    w: np.ndarray,
    C: float,
    n_total: int | None = None,
    thetas: list | None = None,
    copies: np.ndarray | None = None,
    slopes: np.ndarray | None = None,
) -> tuple[np.ndarray, ...]:
    """Per-example ``(upper, lower, g, Y_hat, scale, phi)`` for ``f_C(w, z_i)``, where
    ``phi_i <= min_{y in W} f(y, z_i) - <g_i, y>``; ``w`` must lie in the domain. ``x`` and
    ``z`` only guide the choice of ``y_i`` and ``g_i``.

    ``prog`` may be a view of a larger program (``n_total`` examples in its objective). A view
    without copies ``y_i`` (the plain block, for examples dpcvx expects to be C-Lipschitz on
    W) is bounded with ``y_i = w``: ``f_C <= f(w)`` and the minorant of ``f`` at ``w`` with its
    slope clipped to the C-ball, which is valid for ``f_C`` whatever the example. ``prog``
    None is such a plain block for a point found without a program, whose multipliers
    ``thetas`` (as for :func:`~dpcvx.certification.certificate.certify`) guide the minorant;
    with ``copies`` (rows ``y_i``, made feasible here) such a point is bounded at those copies
    instead of ``y_i = w``, with the minorants' slopes clipped to the C-ball as ``g_i``, or
    the rows of ``slopes`` where they are finite (clipped to the C-ball: any finite ``g_i``
    there gives a valid bound; the cone's dual at a copy on W's boundary is tight)."""
    n = decl.n
    n_total = n if n_total is None else n_total
    if prog is None:
        return _bounds_at_points(decl, w, C, n_total, thetas, copies, slopes)
    Y_hat = (
        np.broadcast_to(w, (n, w.size)).copy()
        if prog.y_cols is None
        else decl.domain.make_feasible_rows(np.nan_to_num(x[prog.y_cols]))
    )
    return _bounds(decl, prog, z, w, C, n_total, thetas, Y_hat, None)


def _bounds_at_points(
    decl: Declaration,
    w: np.ndarray,
    C: float,
    n_total: int,
    thetas: list | None,
    copies: np.ndarray | None,
    slopes: np.ndarray | None,
) -> tuple[np.ndarray, ...]:
    """:func:`extension_bounds` for a point found without a program. On many examples, those
    whose copy is ``w`` itself (every one without ``copies``) are bounded at the single point
    ``w``, as plain ERM's certificate is (matrix-vector products rather than a pass over an
    ``(n, d)`` array of copies per step), and the few that moved at their own copies on their
    rows only (:func:`~dpcvx.certification._rows.moved_rows`); both run over row chunks.
    Every example gets :func:`_bounds`'s formula at its ``y_i``, however the examples are
    grouped (a copy equal to ``w`` is taken as ``w`` itself, which lies in the domain, where
    the ungrouped pass makes it feasible again: on a ball's sphere the two differ by
    rounding, and both bounds are valid)."""
    n = decl.n
    if copies is None:
        return _chunked(decl, w, C, n_total, thetas, None, slopes)
    copies = np.asarray(copies, float)
    moved = moved_rows(copies, w)
    if moved is None:
        Y_hat = decl.domain.make_feasible_rows(copies)
        return _chunked(decl, w, C, n_total, thetas, Y_hat, slopes)
    out = _chunked(decl, w, C, n_total, thetas, None, slopes, skip=moved)
    if not moved.size:
        return out
    own = _chunked(
        decl.subset(moved),
        w,
        C,
        n_total,
        take_rows(thetas, moved, n),
        decl.domain.make_feasible_rows(copies[moved]),
        None if slopes is None else np.asarray(slopes, float)[moved],
    )
    upper, lower, g, _, mag, phi = out
    Y_hat = np.empty((n, w.size))
    Y_hat[...] = w
    for full, part in zip((upper, lower, g, Y_hat, mag, phi), own):
        full[moved] = part
    return upper, lower, g, Y_hat, mag, phi


def _chunked(
    decl: Declaration,
    w: np.ndarray,
    C: float,
    n_total: int,
    thetas: list | None,
    Y_hat: np.ndarray | None,
    slopes: np.ndarray | None,
    skip: np.ndarray | None = None,
) -> tuple[np.ndarray, ...]:
    """:func:`_bounds` over the row groups of :func:`~dpcvx.certification._rows.row_groups`,
    at the copies ``Y_hat`` or, for None, at the one point ``w``; the rows of the results
    gathered (those of the examples ``skip`` are the caller's to replace, whatever they
    came out as)."""
    n, d = decl.n, w.size
    groups = list(row_groups(decl, skip))
    if len(groups) == 1:
        with groups[0][2]:
            return _bounds(
                decl, None, None, w, C, n_total, thetas, w if Y_hat is None else Y_hat, slopes
            )
    # the copies come back as they went in (_bounds hands back its rows of Y_hat)
    Y_out: np.ndarray = np.broadcast_to(w, (n, d)) if Y_hat is None else Y_hat
    out: tuple[np.ndarray, ...] = (
        np.empty(n),
        np.empty(n),
        np.empty((n, d)),
        Y_out,
        np.empty(n),
        np.empty(n),
    )
    for part, rows, context in groups:
        with context:
            piece = _bounds(
                part,
                None,
                None,
                w,
                C,
                n_total,
                take_rows(thetas, rows, n),
                w if Y_hat is None else Y_hat[rows],
                None if slopes is None else np.asarray(slopes, float)[rows],
            )
        for k, (full, result) in enumerate(zip(out, piece)):
            if k != 3:  # the copies: the view of w above, or Y_hat itself
                full[rows] = result
    return out


def _bounds(
    decl: Declaration,
    prog: StampedProgram | None,
    z: np.ndarray | None,
    w: np.ndarray,
    C: float | None,
    n_total: int,
    thetas: list | None,
    Y_hat: np.ndarray,
    slopes: np.ndarray | None,
) -> tuple[np.ndarray, ...]:
    """:func:`extension_bounds` at the feasible copies ``Y_hat``: rows ``(n, d)``, or the
    single point ``w`` for every example (``Y_hat`` of shape ``(d,)``; then ``w - y_i = 0``).
    ``C`` None: bounds of the terms themselves at ``w`` (no extension: the minorant's slope
    unclipped), for the penalty the folded extension keeps exact."""
    n = decl.n
    dom = decl.domain
    single = Y_hat.ndim == 1
    f_vals = _loss_at(decl, Y_hat[None, :] if single else Y_hat)
    dist = np.zeros(n) if single else row_norms(w[None, :] - Y_hat)
    s, beta, scale, _ = _minorants(decl, prog, z, Y_hat, n_total, thetas=thetas)
    if C is None:
        # terms the extension does not take (the folded penalty, at w itself): their own
        # minorant, unclipped
        assert single and (prog is None or prog.soc_rows is None)
        mag = 1.0 + np.abs(f_vals) + np.abs(beta) + scale + np.abs(s) @ np.abs(w)
        phi = beta - support_rows(dom, s, s, None, None)
        lower = s @ w + phi
        hints = np.broadcast_to(Y_hat, s.shape)
        return f_vals + ROUNDING * mag, lower - ROUNDING * mag, s, hints, mag, phi
    upper = f_vals + C * dist * (1 + (w.size + 4) * _EPS)  # row_norms: (d / 2 + 1) eps
    if prog is None or prog.soc_rows is None:
        g = s
        if slopes is not None:
            # a row with any non-finite entry takes the default (NaN marks it)
            given = np.asarray(slopes, float)
            finite = np.flatnonzero(np.all(np.isfinite(given), axis=1))
            if finite.size:
                g = s.copy()
                g[finite] = given[finite]
    else:
        assert z is not None
        g = _SOC_SIGN * n_total * np.nan_to_num(z[prog.soc_rows][:, 1:])
    hints = np.broadcast_to(Y_hat, g.shape)  # each y_i (a read-only view for one point)
    norms = row_norms(g)[:, None]
    factor = np.minimum(1.0, C / np.maximum(norms * (1 + (w.size + 8) * _EPS), 1e-300))
    g = g * factor
    # without given duals, only the clipped rows have a nonzero g - s; with them, the rows
    # given too (found by comparing: g - s is exactly zero on every other row)
    live = None
    if prog is None:
        live = clipped_rows(factor) if slopes is None else differing_rows(g, s)
    if prog is not None and prog.soc_rows is not None:
        # a generic maximum at a kink of y_i: mix its pieces' cuts toward the slope g_i
        try:
            mixes = matching_mixes(decl, Y_hat, g)
        except Exception:  # noqa: BLE001 - an internal failure only forgoes the mixed cuts
            mixes = None
        if mixes is not None:
            s_m, beta_m, scale_m, _ = _minorants(
                decl, prog, z, Y_hat, n_total, thetas=thetas, mixes=mixes
            )
            # per example, the tighter of the two valid support bounds
            phi_0 = beta - dom.support(g - s, hints=hints)
            phi_m = beta_m - dom.support(g - s_m, hints=hints)
            better = (phi_m > phi_0)[:, None]
            s = np.where(better, s_m, s)
            beta = np.where(better[:, 0], beta_m, beta)
            scale = np.where(better[:, 0], np.maximum(scale, scale_m), scale)
    phi = beta - support_rows(dom, g, s, hints, live)
    lower = g @ w + phi
    mag = 1.0 + np.abs(f_vals) + C * dist + np.abs(beta) + scale + np.abs(g) @ np.abs(w)
    return upper + ROUNDING * mag, lower - ROUNDING * mag, g, hints, mag, phi


@dataclass(frozen=True, slots=True)
class ExtensionSums:
    """The extension certificate's sums over a group of examples (a partition of the data):
    the per-example upper bounds, the minorants' offsets ``phi_i``, the slopes ``g_i`` and the
    rounding magnitudes. Sums of several groups add (:meth:`plus`)."""

    n: int
    upper: float
    phi: float
    g: np.ndarray
    mag: float

    @classmethod
    def of(cls, piece: tuple[np.ndarray, ...]) -> ExtensionSums:
        """The sums of one :func:`extension_bounds` result."""
        upper_i, _, g, _, mag, phi = piece
        return cls(
            int(upper_i.size),
            float(np.sum(upper_i)),
            float(np.sum(phi)),
            g.sum(axis=0),
            float(np.sum(mag)),
        )

    def plus(self, other: ExtensionSums) -> ExtensionSums:
        return ExtensionSums(
            self.n + other.n,
            self.upper + other.upper,
            self.phi + other.phi,
            self.g + other.g,
            self.mag + other.mag,
        )


def extension_value_bounds(
    sums: ExtensionSums,
    dom: Domain | LocalizedDomain,
    *,
    lam: float,
    w0: np.ndarray,
    w_hat: np.ndarray,
    once: ExtensionSums | None = None,
) -> tuple[float, float, float, float]:
    """``(upper, lower, gap, margin)`` of the joint program of Lemma 2.7 from the sums of every
    example (``w`` ranging over ``dom``); the gap is ``inf`` where it overflowed. ``once``:
    the bounds of the penalty the folded extension keeps exact, weighted one (not averaged)."""
    n = sums.n
    reg = lam / 2 * float(np.sum((w_hat - w0) ** 2))
    slope, o_upper, o_phi, o_mag = sums.g / n, 0.0, 0.0, 0.0
    if once is not None:
        slope = slope + once.g
        o_upper, o_phi, o_mag = once.upper, once.phi, once.mag
    q_min = dom.min_linear_quadratic(slope, lam, w0, hint=w_hat)
    margin = ROUNDING * (sums.mag / n + o_mag + reg + abs(q_min))
    upper = sums.upper / n + o_upper + reg + margin
    lower = sums.phi / n + o_phi + q_min - margin
    gap = upper - lower
    if not np.isfinite(gap):  # garbage duals overflowing a bound: the stable path may still
        gap = np.inf  # certify the point (it recomputes its multipliers)
    if gap < 0:
        raise CertificationError(
            "Internal: the Lipschitz-extension certificate is inconsistent (lower bound above "
            "the upper bound); nothing is certified."
        )
    return upper, lower, gap, margin


#: the stable gap of a point found without a program, with the loss's own derivatives as
#: multipliers, is skipped where the bound's gap is over this many times the target and over
#: :data:`STABLE_MARGINS` of its rounding margins (the stable gap came out within 0.3% of such
#: gaps: 13 of the extension rounds' certificates on the six losses of the extension
#: benchmark, balls of radius 0.5, 1 and 3, d = 20 and 100). Multipliers from a solver may be
#: off where the stable gap recomputes them (a sign away from a kink): it is kept for them
STABLE_FAR = 4.0
STABLE_MARGINS = 1e3


def certify_extension(
    decl: Declaration,
    prog: StampedProgram | None,
    x: np.ndarray,
    z: np.ndarray | None,
    *,
    C: float,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None = None,
    solver_stats: dict[str, Any] | None = None,
    w_domain: Domain | LocalizedDomain | None = None,
    parts: list[tuple[Declaration, StampedProgram]] | None = None,
    thetas: list | None = None,
    copies: np.ndarray | None = None,
    slopes: np.ndarray | None = None,
    derivatives: bool = False,
    fold: frozenset[int] = frozenset(),
) -> CertifiedSolution:
    """Certify the joint program of Lemma 2.7:
    ``min_{w in W0} (1/n) sum_i f_C(w, z_i) + (lam/2) ||w - w0||^2`` where ``W0`` is
    ``w_domain`` (default: the declared domain W; a localized ``W intersect B(c, r)`` in paper
    000's Algorithm 4). The copies ``y_i`` always range over W, as ``f_C`` is defined.

    ``parts``: ``[(declaration of a group of examples, its view of prog)]`` when the program
    mixes plain blocks and extension blocks (:func:`dpcvx.compilation.stamp.stamp_parts`);
    ``decl`` is then the whole declaration. ``prog`` None certifies a point ``x`` (of length
    ``d``) found without a program as a plain block (every ``y_i = w``), with the multipliers
    ``thetas``: valid for ``f_C`` whatever the examples' Lipschitz constants, and tight where
    they are at most ``C``; ``copies`` (with ``prog`` None) are the examples' points ``y_i``
    for such a point (tight where each copy is the minimizer of its example's extension), and
    ``slopes`` their cone duals ``g_i`` (NaN rows: the minorant's slope clipped to the C-ball;
    see :func:`extension_bounds`). ``derivatives``: ``thetas`` are the loss's own derivatives
    at each example's point, the multipliers the stable gap takes too (the smooth path's), so
    that the two gaps are the same sum but for rounding (see :data:`STABLE_FAR`).

    ``fold``: the terms (by index) the folded extension keeps exact, weighted one
    (:func:`~dpcvx.certification.solve.certified_solve`): the program is then
    ``(1/n) sum_i g_C(w, z_i) + P(w) + (lam/2)||w - w0||^2`` with ``g`` the other terms and
    ``P`` these. ``P`` is bounded once at ``w`` with its own minorant (from the program's
    block held once, or from ``thetas``), the examples' bounds are ``g``'s."""
    import time

    start = time.perf_counter()
    dom = decl.domain if w_domain is None else w_domain
    w_hat = dom.make_feasible(np.asarray(x[: decl.d], float))
    groups: list[tuple[Declaration, StampedProgram | None]] = (
        list(parts) if parts else [(decl, prog)]
    )
    once = once_stable = None
    if fold:
        penalty = _folded_penalty(decl, groups, z, w_hat, fold, thetas)
        once = ExtensionSums.of(penalty[0])
        once_stable = penalty[1]
        keep = frozenset(range(len(decl.terms))) - fold
        groups = [
            (part_decl.with_terms(keep), None if view is None else terms_view(view, keep))
            for part_decl, view in groups
        ]
        thetas = None if thetas is None else [thetas[t] for t in sorted(keep)]
    pieces = [
        extension_bounds(
            part_decl, view, x, z, w_hat, C, decl.n, thetas=thetas, copies=copies, slopes=slopes
        )
        for part_decl, view in groups
    ]
    total = ExtensionSums.of(pieces[0])
    for piece in pieces[1:]:
        total = total.plus(ExtensionSums.of(piece))
    w0 = np.asarray(w0, float)
    upper, lower, gap, margin = extension_value_bounds(
        total, dom, lam=lam, w0=w0, w_hat=w_hat, once=once
    )
    # the same gap as a sum of duality gaps computed stably (free of the losses' values)
    radius = (
        float(np.sqrt(2 * gap / lam)) if lam > 0 else 1e-6 * (1.0 + float(np.linalg.norm(w_hat)))
    )
    stable_parts = [
        (
            part_decl,
            piece[3]
            if (view is None and copies is not None)
            or (view is not None and view.y_cols is not None)
            else None,
            piece[2]
            if (view is not None and view.soc_rows is not None)
            or (view is None and slopes is not None)
            else None,
            _term_duals(part_decl, view, z, decl.n)
            if view is not None
            else (thetas if thetas is not None else [None] * len(part_decl.terms)),
        )
        for (part_decl, view), piece in zip(groups, pieces)
    ]
    # the stable bound only tightens: as for plain ERM it is skipped where the bound above
    # already meets the caller's target for a point found without a program, and where it
    # cannot: with the loss's own derivatives as multipliers (those the stable gap takes),
    # a gap of many rounding margins is the stable one to rounding, so one STABLE_FAR times
    # the target is missed by both
    meets = accuracy is not None and prog is None and gap <= accuracy
    misses = (
        derivatives
        and accuracy is not None
        and prog is None
        and bool(np.isfinite(gap) and np.isfinite(margin))  # an overflow: only it may certify
        and gap > STABLE_FAR * accuracy
        and gap > STABLE_MARGINS * margin
    )
    try:  # an internal failure here only forgoes the tighter bound
        direct = None
        if not (meets or misses):
            # a folded penalty without stable sums (a generic term): no stable gap at all
            # (without its share the sum would miss the penalty's own gap)
            held = None if once_stable is None else once_stable(radius)
            if once_stable is None or held is not None:
                direct = stable_extension_gap(
                    stable_parts,
                    w_hat,
                    C=C,
                    lam=lam,
                    w0=w0,
                    radius=radius,
                    w_domain=dom,
                    once=held,
                )
    except Exception:  # noqa: BLE001
        direct = None
    stats = dict(solver_stats or {})
    stats.update(certify_seconds=time.perf_counter() - start, extension_C=C)
    return finish_extension(
        w_hat, (upper, lower, gap, margin), direct, lam=lam, w0=w0, accuracy=accuracy, stats=stats
    )


def folded_values(
    decl: Declaration,
    parts: list[tuple[Declaration, StampedProgram]],
    indices: list[np.ndarray],
    x: np.ndarray,
    z: np.ndarray,
    w: np.ndarray,
    C: float,
    fold: frozenset[int],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per example, ``(upper, lower, g)`` of the folded extension's term
    ``g_C(w, z_i) + P(w)`` (see :func:`certify_extension`'s ``fold``) from its program's
    solution (``parts`` and their example ``indices``: :func:`~dpcvx.certification.solve.
    folded_program`): ``g``'s extension bounded at each example's copy, the penalty once at
    ``w`` and added to every example (its margins, relative ``ROUNDING``, cover the
    additions' rounding); ``g_i`` is the sum of both slopes."""
    n, d = decl.n, decl.d
    penalty = _folded_penalty(decl, parts, z, w, fold, None)[0]
    up_p, lo_p, s_p = float(penalty[0][0]), float(penalty[1][0]), penalty[2][0]
    keep = frozenset(range(len(decl.terms))) - fold
    upper, lower, g = np.empty(n), np.empty(n), np.empty((n, d))
    for (part_decl, view), idx in zip(parts, indices):
        piece = extension_bounds(
            part_decl.with_terms(keep), terms_view(view, keep), x, z, w, C, decl.n
        )
        upper[idx] = piece[0] + up_p
        lower[idx] = piece[1] + lo_p
        g[idx] = piece[2] + s_p
    return upper, lower, g


def _folded_penalty(
    decl: Declaration,
    groups: Sequence[tuple[Declaration, StampedProgram | None]],
    z: np.ndarray | None,
    w_hat: np.ndarray,
    fold: frozenset[int],
    thetas: list | None,
) -> tuple[tuple[np.ndarray, ...], Callable[[float], StableSums | None]]:
    """The folded extension's penalty (the terms ``fold``, read no data) bounded once at
    ``w_hat``: :func:`_bounds`'s one-row piece, unclipped, and a function of the stable gap's
    polishing radius giving its stable sums (None where they fail). Its multipliers come from
    the program's block held once (the view holding ``fold``), or from ``thetas`` (their
    first example's: the same for every example)."""
    one = decl.rows(0, 1).with_terms(fold)
    view = None
    if z is not None:
        # (affine and generic terms have no split rows: no view holds them, none needs to)
        split = frozenset(t for t in fold if decl.terms[t].kind not in ("affine", "generic"))
        holders = [v for _, v in groups if v is not None and split <= v.held]
        if not holders:
            raise CertificationError("Internal: no block holds the folded penalty once.")
        view = dataclasses.replace(terms_view(holders[0], fold), y_cols=None, soc_rows=None, n=1)
        mults = _term_duals(one, view, z, 1)
    else:
        mults = (
            [None] * len(fold)
            if thetas is None
            else take_rows([thetas[t] for t in sorted(fold)], np.arange(1), decl.n)
        )
    piece = _bounds(one, view, z, w_hat, None, 1, mults if view is None else None, w_hat, None)

    def stable(radius: float) -> StableSums | None:
        return stable_extension_sums(one, None, None, mults, w_hat, C=None, radius=radius)

    return piece, stable


def finish_extension(
    w_hat: np.ndarray,
    bounds: tuple[float, float, float, float],
    direct: float | None,
    *,
    lam: float,
    w0: np.ndarray,
    accuracy: float | None,
    stats: dict,
) -> CertifiedSolution:
    """The certificate from :func:`extension_value_bounds` and the stable gap ``direct``
    (None when it was not computed): the smaller gap counts."""
    upper, lower, gap, margin = bounds
    if direct is not None and 0.0 <= direct < gap:
        gap = direct
        fallback = lower_from_gap(upper, 2 * margin, direct)
        lower = fallback if not np.isfinite(lower) else max(lower, fallback)
    if not (np.isfinite(gap) and np.isfinite(upper)):
        raise CertificationError(
            "The Lipschitz-extension certificate is not finite (overflow in the bounds); "
            "nothing is certified."
        )
    return CertifiedSolution(
        w=w_hat,
        upper=upper,
        lower=lower,
        gap=gap,
        distance_bound=float(np.sqrt(2 * gap / lam)) if lam > 0 else float("inf"),
        regularization=lam,
        center=np.asarray(w0, float).copy(),
        accuracy=accuracy,
        solver_stats=MappingProxyType(stats),
    )
