"""The tilted-ERM gap as a sum of stable duality gaps (no margin relative to the losses' values).

For tilted ERM ``F_tau(w) = (1/tau) log mean_i exp(tau f_i(w)) + (lam/2)||w - w0||^2`` and any
weights ``q`` in the simplex, Gibbs' variational principle gives, with ``pi`` the tilted
weights ``softmax(tau f(w_hat))`` at the point,

    F_tau(w_hat) - min_W F_tau  <=  KL(q || pi) / tau  +  [G_q(w_hat) - min_W G_q],

where ``G_q(w) = sum_i q_i f_i(w) + (lam/2)||w - w0||^2`` is a weighted ERM: the first term is
the exact difference ``F_tau(w_hat) - [sum_i q_i f_i(w_hat) - KL(q || uniform) / tau]``, the
second is bounded like plain ERM's stable gap (:mod:`dpcvx.certification.stable`), as the
``q``-weighted sum of per-example Fenchel-Young gaps plus the regularized linear part.

``KL(q || pi)`` needs only the *differences* of the losses, and only where the weights are not
negligible. dpcvx takes ``q`` proportional to ``Q_i = exp(tau (f~_i - f~_k))`` for the
computed values ``f~`` (``k`` their arg max, so ``Q_k = 1``), with errors ``|f~_i - f_i| <=
e_i`` from :func:`~dpcvx.certification.stable.per_example_values` (derivative-based: zero on
an atom's flat side, however large the argument). Then ``rho_i = tau (e_i + e_k)`` plus the
rounding of the exponent bounds ``|log Q_i - tau (f_i - f_k)|``, and with ``S`` the examples
whose ``Q_i`` did not underflow and ``pi'`` the tilted weights restricted to ``S``:

- ``KL(q || pi) = KL(q || pi') - log pi(S)``;
- ``KL(q || pi') = sum_i (q_i - pi'_i) log(q_i / pi'_i) - log sum_i pi'_i (q_i / pi'_i)`` is at
  most ``sum_{i != k} (q_i + pi'_i) rho_i`` (Jensen, and ``log(q_i/pi'_i) - log(q_k/pi'_k)``
  is ``log Q_i - tau (f_i - f_k)``), with ``pi'_i <= Q_i e^{rho_i} / T_low`` and ``T_low =
  sum_S Q_j e^{-rho_j}``;
- ``-log pi(S) <= sum_{i not in S} pi_i / pi(S) <= sum_{i not in S} exp(a_i + rho_i) / T_low``;
- and by Hoeffding's lemma (``log(q_i / pi'_i)`` ranges over an interval of width ``2 max_S
  rho_i``), ``KL(q || pi') <= max_S rho_i^2 / 2``: the smaller of the two counts.

A huge loss (a label of 1e12 on a Huber loss's linear side) takes all the weight: the others'
``Q_i`` underflow, and its own value's rounding never enters. An example on a flat side keeps
an error of zero. The max-loss (``tau = inf``) has no KL term: ``max_i f_i(w_hat) - sum_i q_i
f_i(w_hat)`` is bounded from the values and their errors directly.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from dpcvx.certification.stable import _EPS, _mean_from_sums, _q_gap, _sum_rows

if TYPE_CHECKING:
    from dpcvx.modeling.domains import Domain
    from dpcvx.modeling.localized import LocalizedDomain

__all__ = ["gibbs_weights", "tilted_stable_gap"]

_TINY = float(np.finfo(float).tiny)


def gibbs_weights(
    values: np.ndarray, errors: np.ndarray, tilt: float
) -> tuple[np.ndarray, float, float] | None:
    """``(Q, T, kl)``: the unnormalized weights ``Q`` (``q = Q / T`` exactly, ``T`` the sum of
    ``Q`` correctly rounded), and a bound on ``KL(q || pi)`` (module docstring); None when a
    bound is not finite."""
    a = tilt * np.asarray(values, float)
    k = int(np.argmax(a))
    diff = a - a[k]
    Q = np.exp(diff)
    # |log Q_i - tau (f_i - f_k)|: the values' errors, the products tau f~, the difference
    # and exp (an ulp each, relative to the exponents)
    rho = tilt * (errors + errors[k]) + 3 * _EPS * (np.abs(a) + abs(a[k])) + 4 * _EPS
    rho[k] = 0.0
    if not (np.all(np.isfinite(rho)) and np.all(np.isfinite(Q))):
        return None
    # weights below the smallest normal float (exp's relative error is not an ulp there)
    # count as underflowed: their share of pi is bounded with the others outside S
    live = Q >= _TINY
    Q = np.where(live, Q, 0.0)
    T = math.fsum(Q)
    T_low = math.fsum(Q[live] * np.exp(-rho[live])) * (1 - 8 * _EPS)
    others = live.copy()
    others[k] = False
    with np.errstate(over="ignore", under="ignore"):
        inner = (Q[others] / T + Q[others] * np.exp(rho[others]) / T_low) * rho[others]
        outer = np.exp(diff[~live] + rho[~live]) * (1 + 8 * _EPS) + 1e-300
    linear = math.fsum(inner * (1 + 16 * _EPS)) * (1 + 16 * _EPS)
    # Hoeffding's lemma: log(q_i / pi'_i) ranges over an interval of width 2 max_S rho_i, so
    # KL(q || pi') = E_q[delta] + log E_q[e^-delta] <= (2 max rho)^2 / 8 (second order)
    rho_max = float(np.max(rho[live]))
    quadratic = rho_max * rho_max / 2 * (1 + 8 * _EPS)
    kl = (min(linear, quadratic) + math.fsum(outer) / T_low) * (1 + 16 * _EPS)
    if not math.isfinite(kl):
        return None
    return Q, T, kl


def _max_slack(lower: np.ndarray, upper: np.ndarray, Q: np.ndarray) -> float:
    """A bound on ``sum_i Q_i (max_j f_j - f_i)`` for exact values ``lower <= f <= upper``:
    ``max_j f_j - f_i = max(0, max_{j != i} (f_j - f_i))``, so a clear winner (its lower
    bound above every other example's upper bound) adds exactly zero, whatever the size of
    its own value (a loss of 1e12 that is the maximum)."""
    order = np.argsort(upper)
    first = float(upper[order[-1]])
    second = float(upper[order[-2]]) if upper.size > 1 else -math.inf
    others = np.full(upper.size, first)
    others[order[-1]] = second
    with np.errstate(invalid="ignore", over="ignore"):
        diff = others - lower
        rounding = 2 * _EPS * (np.abs(others) + np.abs(lower))
        terms = np.maximum(diff + rounding, 0.0)
    # no other example (a single one): nothing to charge; any other non-finite bound (an
    # overflowed value) charges everything, never nothing
    terms = np.where(others == -np.inf, 0.0, np.where(np.isfinite(terms), terms, np.inf))
    if np.any(np.isinf(terms) & (Q > 0)):
        return math.inf
    return math.fsum(Q * np.where(Q > 0, terms, 0.0)) * (1 + 4 * _EPS)


def tilted_stable_gap(
    lower: np.ndarray,
    upper: np.ndarray,
    gaps: np.ndarray,
    slopes: np.ndarray,
    slopes_abs: np.ndarray,
    w_hat: np.ndarray,
    *,
    tilt: float,
    lam: float,
    w0: np.ndarray,
    domain: Domain | LocalizedDomain,
    w_domain: Domain | LocalizedDomain,
    simplex: np.ndarray | None = None,
) -> float | None:
    """A certified bound on ``F_tau(w_hat) - min F_tau`` (module docstring), or None.

    Per example (examples outside a mechanism's universe included, with bounds, gap and slope
    zero): ``lower <= f_i(w_hat) <= upper``; ``gaps`` bounds on
    ``f_i(w_hat) - [<s_i, w_hat> + beta_i]`` for minorants ``f_i >= <s_i, .> + beta_i`` on the
    domain (``slopes`` the ``s_i``, ``slopes_abs`` the sums of absolute values behind them,
    for their rounding). ``tilt = inf`` is the max-loss, whose weights are ``simplex`` (any
    nonnegative floats, normalized exactly here; the arg max of the values when None)."""
    lower = np.asarray(lower, float)
    upper = np.asarray(upper, float)
    n = lower.size

    def finish(Q: np.ndarray, T: float, slack: float) -> float | None:
        return _weighted_gap(
            Q, T, slack, gaps, slopes, slopes_abs, w_hat, lam, w0, domain, w_domain
        )

    if math.isinf(tilt):
        Q = np.zeros(n) if simplex is None else np.maximum(np.nan_to_num(simplex), 0.0)
        if Q.any():  # scaled to a largest weight of one (their sum then cannot overflow)
            Q = Q / float(np.max(Q))
        if not Q.any():
            Q = np.zeros(n)
            Q[int(np.argmax(lower))] = 1.0
        # any weights are valid: also those without the examples far below the maximum (an
        # interior-point solver's duals keep a trace there, which a loss of 1e12 magnifies)
        candidates = [Q]
        top = float(np.max(lower))
        far = top - upper > 1e-9 * abs(top) + 1e-3
        if np.any(Q[far]) and np.any(Q[~far]):
            candidates.append(np.where(far, 0.0, Q))
        onehot = np.zeros(n)
        onehot[int(np.argmax(lower))] = 1.0
        if np.count_nonzero(Q) > 1:  # the arg max alone: exact where it wins alone
            candidates.append(onehot)
        out = None
        for q in candidates:
            T = math.fsum(q)
            gap = finish(q, T, _max_slack(lower, upper, q) / T * (1 + 8 * _EPS))
            if gap is not None and (out is None or gap < out):
                out = gap
        return out
    # the interval's midpoint, and its half-width rounded up
    values = lower + (upper - lower) / 2
    errors = (upper - lower) / 2 * (1 + 4 * _EPS) + 2 * _EPS * (np.abs(lower) + np.abs(upper))
    weights = gibbs_weights(values, errors, tilt)
    if weights is None:
        return None
    Q, T, kl = weights
    return finish(Q, T, kl / tilt * (1 + 4 * _EPS))


def _weighted_gap(
    Q: np.ndarray,
    T: float,
    slack: float,
    gaps: np.ndarray,
    slopes: np.ndarray,
    slopes_abs: np.ndarray,
    w_hat: np.ndarray,
    lam: float,
    w0: np.ndarray,
    domain: Domain | LocalizedDomain,
    w_domain: Domain | LocalizedDomain,
) -> float | None:
    """``slack`` plus the weighted ERM's stable gap for the weights ``q = Q / T``."""
    n, d = Q.size, w_hat.size
    # the weighted ERM's gap: the per-example gaps (nonnegative) and the weighted slope
    fy = math.fsum(Q * np.asarray(gaps, float)) / T * (1 + 16 * _EPS)
    abs_sum = (Q @ slopes_abs) * (1 + (n + 4) * _EPS)
    slope, slope_err = _mean_from_sums(_sum_rows(Q[:, None] * slopes), abs_sum, n, T)
    q_part = _q_gap(slope, slope_err, w_hat, lam, np.asarray(w0, float), domain, w_domain)
    gap = (slack + fy + q_part) * (1 + 8 * (n + d + 8) * _EPS)
    return float(gap) if math.isfinite(gap) and gap >= 0 else None
