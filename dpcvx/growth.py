"""Growth fixtures and rate calculators for paper 001: pure functions of public numbers.

Paper 001 is Asi, Levy and Duchi, "Adapting to Function Difficulty and Growth Conditions in
Private Optimization". ``L...`` are line numbers of its seed text
``shared/papers/001_3f0c176aac4574bd.txt``; ``E#`` and ``P#`` are the errata (section 8) and
pitfalls (section 7) of its digest; "spec B.6" is ``shared/papers/specs_001_004.md``. Natural
logarithms everywhere (P12). Nothing here reads data: the fixtures are synthetic instances with
closed-form minimizers (for tests and benchmarks), the calculators map public numbers to the
number a statement of the paper gives, with its assumptions. Calling them costs no privacy.

Growth (Assumption 1, L59-63): ``f`` has ``(lambda, kappa)``-growth on ``X`` when ``f(x) - f(x*)
>= (lambda/kappa) ||x - x*||_2^kappa`` for all ``x`` in ``X``, ``x* = argmin_X f``.

What is here
------------
:func:`uniformly_convex_instance` -> :class:`UniformlyConvexInstance`
    Family (i) (proof of Thm 8, L557-575; Thms 4, 9): ``F(x; s) = (lambda 2^(kappa-2)/kappa)
    ||x||^kappa + (L/2) <x, s>`` on ``B_2^d(R)``, ``kappa >= 2``; the mean loss is ``sigma
    ||x||^kappa / kappa + <x, u>`` with ``sigma = lambda 2^(kappa-2)`` and ``u = (L/2) mean(s)``
    (ERM) or ``u = (L delta/(2d)) v`` (population, L569). Closed form (L573, **E13**: the norm
    of ``u`` is the l2 norm, not ``||u||_(kappa-1)``)::

        x* = -sigma^(-1/(kappa-1)) ||u||_2^(-(kappa-2)/(kappa-1)) u,
        f* = -(1 - 1/kappa) sigma^(-1/(kappa-1)) ||u||_2^(kappa/(kappa-1)),

    feasible iff ``||u||_2 <= sigma R^(kappa-1)`` (L575); L-Lipschitz on ``B(R)`` when
    ``lambda 2^(kappa-2) R^(kappa-1) + L/2 <= L`` (L563), implied by the theorems' assumption
    ``2^(kappa-1) <= (L/lambda) R^(1-kappa)``. ``(lambda, kappa)``-uniformly convex, hence
    ``(lambda, kappa)``-growth (``||x||^kappa/kappa`` is ``(2^(2-kappa), kappa)``-UC, Nesterov
    2008 Lemma 4, L561).
:func:`sharp_instance` -> :class:`SharpInstance`
    Family (ii) (Thm 5, L250 and proof L689-733): ``d = 1``, ``X = [-1, 1]``, ``kappa in (1, 2]``,
    ``delta in (0, 1/2]`` (L693), ``s in {+1, -1}`` with ``P_v(s = 1) = (1 + delta v)/2``,
    ``a = delta^(1/(kappa-1))/2``;
    ``F(x; +1) = |x - a|`` for ``x <= a`` and ``|x - a|^kappa`` above; ``F(x; -1) = |x + a|^kappa``
    for ``x <= -a`` and ``|x + a|`` above. ``f_v`` has ``(1, kappa)``-growth, is ``kappa``-
    Lipschitz, and is minimized at ``x* = v a`` with ``f* = a (1 - delta)``.
:func:`localization_rate` -> :class:`LocalizationRate`
    Props 1-2 (L159-175): the excess-risk shape of Algorithm 1 and its step size ``eta``.
:func:`growth_rate` -> :class:`GrowthRate`
    Thms 2-3 (L202-216, proof L459-531): the excess-risk shape of Algorithm 2 under
    ``(lambda, kappa)``-growth, with ``kappa_lower - 1`` in both (E10), and its ``T``, ``n_0``,
    ``eta_0``.
:func:`growth_nesting`
    [derived, digest section 0] ``(lambda, kappa)``-growth on a domain of diameter ``D`` implies
    ``(lambda', kappa')``-growth for ``kappa' >= kappa`` with ``lambda' = (kappa'/kappa) lambda
    D^(kappa - kappa')``.
:func:`power_tradeoff_minimum`
    ``inf_(nu > 0) a nu + b nu^(-1/(kappa-1))`` (Prop 3's proof, L745-779) with **E15**'s
    correction [derived]: ``kappa a^(1/kappa) b^((kappa-1)/kappa) (kappa-1)^(-(kappa-1)/kappa)``
    at ``nu* = (b/(a (kappa-1)))^((kappa-1)/kappa)``.

Status
------
The ``O(.)`` constants of Props 1-2 and Thms 2-3 are not given by the paper (P12): the rates
are returned with every such constant set to 1 and ``O~`` logs of Thms 2-3 dropped, so they show
how the bound scales, not its value. The fixtures' closed forms are exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpcvx._validation import check_positive, check_real
from dpcvx.errors import InvalidParameterError

__all__ = [
    "GrowthRate",
    "LocalizationRate",
    "SharpInstance",
    "UniformlyConvexInstance",
    "growth_nesting",
    "growth_rate",
    "localization_rate",
    "power_tradeoff_minimum",
    "sharp_instance",
    "uniformly_convex_instance",
]

_CONSTANTS = "O(1) constants set to 1 and O~ logarithms of n, d dropped (P12): a shape, not a value"


# ----------------------------------------------------------------------------------- helpers
def _check_count(value: object, name: str, owner: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InvalidParameterError(
            f"The `{name}` parameter of `{owner}` must be a positive integer. Got {value!r}."
        )
    return int(value)


def _check_open_unit(value: object, name: str, owner: str) -> float:
    out = check_real(value, name, owner)
    if not 0.0 < out < 1.0:
        raise InvalidParameterError(
            f"The `{name}` parameter of `{owner}` must lie in (0, 1). Got {value!r}."
        )
    return out


def _check_delta(value: object, owner: str) -> float:
    out = check_real(value, "delta", owner)
    if not 0.0 <= out < 1.0:
        raise InvalidParameterError(
            f"The `delta` parameter of `{owner}` must lie in [0, 1) (0: pure epsilon-DP, Prop 1 "
            f"/ Thm 2; positive: Prop 2 / Thm 3). Got {value!r}."
        )
    return out


def _check_beta(beta: object, n: int, d: int, owner: str) -> float:
    """``beta`` in ``(0, 1/(n + d)]``: the assumption of Props 1-2 and Thms 2-3 (L159, L202)."""
    out = check_real(beta, "failure_probability", owner)
    if not 0.0 < out <= 1.0 / (n + d):
        raise InvalidParameterError(
            f"The `failure_probability` parameter (beta) of `{owner}` must lie in (0, 1/(n + d)] "
            f"= (0, {1.0 / (n + d):.3g}] (the assumption of paper 001's Props 1-2 and Thms "
            f"2-3). Got {beta!r}."
        )
    return out


# ------------------------------------------------------------------- family (i): kappa >= 2
@dataclass(frozen=True, slots=True, kw_only=True)
class UniformlyConvexInstance:
    """Family (i) of paper 001 (L557-575) with its closed-form minimizer (E13 applied).

    The mean loss is ``f(x) = sigma ||x||_2^kappa / kappa + <x, u>`` on ``B_2^d(radius)``,
    ``sigma = growth 2^(kappa-2)``; it has ``(growth, kappa)``-growth around ``minimizer``.
    """

    kappa: float
    growth: float  # lambda
    lipschitz: float  # L
    radius: float  # R
    sigma: float  # lambda 2^(kappa-2)
    u: np.ndarray  # (L/2) mean(s) (ERM) or (L delta/(2d)) v (population)
    minimizer: np.ndarray  # x*_u (L573 with E13)
    optimal_value: float  # f* = -(1 - 1/kappa) sigma^(-1/(kappa-1)) ||u||_2^(kappa/(kappa-1))
    reference: str = "001 Thm 8 proof (L557-575), Thms 4, 9; E13"
    assumptions: tuple[str, ...] = ()

    def value(self, x: object) -> np.ndarray | float:
        """``f(x) = sigma ||x||^kappa / kappa + <x, u>`` (rows of ``x`` for a 2-d array)."""
        pts = np.asarray(x, float)
        norm = np.linalg.norm(pts, axis=-1)
        out = self.sigma * norm**self.kappa / self.kappa + pts @ self.u
        return float(out) if np.ndim(out) == 0 else out

    def loss(self, x: object, s: object) -> np.ndarray | float:
        """One sample's loss ``F(x; s) = sigma ||x||^kappa / kappa + (L/2) <x, s>``."""
        pts = np.asarray(x, float)
        norm = np.linalg.norm(pts, axis=-1)
        out = self.sigma * norm**self.kappa / self.kappa + (self.lipschitz / 2.0) * (
            pts @ np.asarray(s, float)
        )
        return float(out) if np.ndim(out) == 0 else out


def uniformly_convex_instance(
    *,
    kappa: float,
    growth: float,
    lipschitz: float,
    radius: float,
    samples: object = None,
    direction: object = None,
    bias: float | None = None,
) -> UniformlyConvexInstance:
    """Family (i) of paper 001 with its closed-form minimizer and optimal value.

    Give either ``samples`` (an ``(m, d)`` array of rows in ``{+-e_j}``, or any rows of norm at
    most 1; the ERM instance, ``u = (L/2) mean(samples)``) or ``direction`` ``v`` in
    ``{+-1}^d`` with ``bias`` ``delta`` in ``[0, 1]`` (the population instance ``f_v`` of L569,
    ``u = (L delta/(2d)) v``).

    Raises :class:`~dpcvx.InvalidParameterError` when ``kappa < 2`` (the family needs it),
    when the assumption ``2^(kappa-1) <= (L/lambda) R^(1-kappa)`` of Thms 4, 8, 9 fails (then
    ``F`` need not be L-Lipschitz on ``B(R)``, L563), or when the minimizer is outside the ball
    (``||u|| > sigma R^(kappa-1)``, L575).
    """
    owner = "uniformly_convex_instance"
    kappa = check_real(kappa, "kappa", owner)
    if not kappa >= 2.0:
        raise InvalidParameterError(
            f"The `kappa` parameter of `{owner}` must be at least 2 (family (i) of paper 001 is "
            f"(lambda, kappa)-uniformly convex for kappa >= 2). Got {kappa!r}. Use "
            "sharp_instance for kappa in (1, 2]."
        )
    lam = check_positive(growth, "growth", owner)
    L = check_positive(lipschitz, "lipschitz", owner)
    R = check_positive(radius, "radius", owner)
    if not 2.0 ** (kappa - 1.0) <= (L / lam) * R ** (1.0 - kappa) * (1.0 + 1e-12):
        raise InvalidParameterError(
            f"`{owner}` needs 2^(kappa-1) <= (L/lambda) R^(1-kappa) (paper 001 Thms 4, 8, 9; it "
            f"makes F L-Lipschitz on B(R), L563). Got 2^(kappa-1) = {2.0 ** (kappa - 1.0):.6g} "
            f"and (L/lambda) R^(1-kappa) = {(L / lam) * R ** (1.0 - kappa):.6g}. Lower `growth` "
            "or `radius`, or raise `lipschitz`."
        )
    if (samples is None) == (direction is None):
        raise InvalidParameterError(
            f"`{owner}` needs exactly one of `samples` (ERM) or `direction` with `bias` "
            "(population)."
        )
    if samples is not None:
        S = np.asarray(samples, float)
        if S.ndim != 2 or S.shape[0] < 1 or not np.all(np.isfinite(S)):
            raise InvalidParameterError(
                f"The `samples` of `{owner}` must be a finite (m, d) array with m >= 1. "
                f"Got shape {S.shape}."
            )
        if np.any(np.linalg.norm(S, axis=1) > 1.0 + 1e-12):
            raise InvalidParameterError(
                f"The `samples` of `{owner}` must have rows of l2 norm at most 1 (the sample "
                "space {+-e_j}); larger rows break the Lipschitz bound of L563."
            )
        u = (L / 2.0) * S.mean(axis=0)
        kind = "ERM: u = (L/2) mean(s)"
    else:
        v = np.asarray(direction, float)
        if v.ndim != 1 or v.size < 1 or not np.all(np.abs(v) == 1.0):
            raise InvalidParameterError(
                f"The `direction` of `{owner}` must be a vector in {{+-1}}^d. Got {direction!r}."
            )
        b = check_real(0.0 if bias is None else bias, "bias", owner)
        if not 0.0 <= b <= 1.0:
            raise InvalidParameterError(
                f"The `bias` (delta) of `{owner}` must lie in [0, 1]. Got {bias!r}."
            )
        u = (L * b / (2.0 * v.size)) * v
        kind = "population: u = (L delta/(2d)) v (L569)"
    sigma = lam * 2.0 ** (kappa - 2.0)
    nu = float(np.linalg.norm(u))
    if nu > sigma * R ** (kappa - 1.0) * (1.0 + 1e-12):
        raise InvalidParameterError(
            f"The minimizer of `{owner}` lies outside B(R): ||u|| = {nu:.6g} exceeds sigma "
            f"R^(kappa-1) = {sigma * R ** (kappa - 1.0):.6g} (L575)."
        )
    if nu == 0.0:
        x_star = np.zeros_like(u)
        f_star = 0.0
    else:
        x_star = -(sigma ** (-1.0 / (kappa - 1.0))) * nu ** (-(kappa - 2.0) / (kappa - 1.0)) * u
        f_star = (
            -(1.0 - 1.0 / kappa) * sigma ** (-1.0 / (kappa - 1.0)) * nu ** (kappa / (kappa - 1.0))
        )
    return UniformlyConvexInstance(
        kappa=kappa,
        growth=lam,
        lipschitz=L,
        radius=R,
        sigma=sigma,
        u=u,
        minimizer=x_star,
        optimal_value=float(f_star),
        assumptions=(
            "X = B_2^d(R); samples s with ||s||_2 <= 1 (the sample space {+-e_j})",
            "2^(kappa-1) <= (L/lambda) R^(1-kappa): F(.; s) is L-Lipschitz on B(R) (L563)",
            "kappa >= 2: (lambda, kappa)-uniformly convex, hence (lambda, kappa)-growth (L561)",
            kind,
        ),
    )


# ------------------------------------------------------------ family (ii): sharp, kappa <= 2
@dataclass(frozen=True, slots=True, kw_only=True)
class SharpInstance:
    """Family (ii) of paper 001 (Thm 5, L689-733) on ``X = [-1, 1]``: ``f_v = E_{P_v} F``
    has ``(1, kappa)``-growth around ``minimizer = v a`` with ``optimal_value = a (1 - delta)``."""

    kappa: float
    delta: float
    sign: int  # v
    a: float  # delta^(1/(kappa-1)) / 2
    minimizer: float
    optimal_value: float
    growth: float = 1.0  # lambda
    lipschitz: float = 2.0  # kappa <= 2 bounds every slope on [-1, 1]
    reference: str = "001 Thm 5 (L689-733)"
    assumptions: tuple[str, ...] = ()

    @property
    def probability_plus(self) -> float:
        """``P_v(s = +1) = (1 + delta v)/2``."""
        return (1.0 + self.delta * self.sign) / 2.0

    def loss(self, x: object, s: int) -> np.ndarray | float:
        """``F(x; s)`` for ``s`` in ``{+1, -1}`` (L695)."""
        if s not in (1, -1):
            raise InvalidParameterError(f"The sample `s` must be +1 or -1. Got {s!r}.")
        x = np.asarray(x, float)
        a, k = self.a, self.kappa
        if s == 1:
            out = np.where(x <= a, np.abs(x - a), np.abs(x - a) ** k)
        else:
            out = np.where(x <= -a, np.abs(x + a) ** k, np.abs(x + a))
        return float(out) if out.ndim == 0 else out

    def value(self, x: object) -> np.ndarray | float:
        """``f_v(x) = p F(x; +1) + (1 - p) F(x; -1)``, ``p = (1 + delta v)/2``."""
        p = self.probability_plus
        out = p * np.asarray(self.loss(x, 1)) + (1.0 - p) * np.asarray(self.loss(x, -1))
        return float(out) if np.ndim(out) == 0 else out


def sharp_instance(*, kappa: float, delta: float, sign: int = 1) -> SharpInstance:
    """Family (ii) of paper 001 (Thm 5): ``kappa`` in ``(1, 2]``, ``delta`` in ``(0, 1/2]`` (L693),
    ``sign`` ``v`` in ``{+1, -1}``. Minimizer ``v a`` with ``a = delta^(1/(kappa-1))/2`` and
    ``f* = a (1 - delta)`` (the ``v = -1`` case by the symmetry ``x -> -x``).

    For an ERM instance set ``delta`` to the empirical ``2 (fraction of s = v) - 1`` (digest
    section 5). Raises :class:`~dpcvx.InvalidParameterError` on parameters outside these ranges.
    """
    owner = "sharp_instance"
    k = check_real(kappa, "kappa", owner)
    if not 1.0 < k <= 2.0:
        raise InvalidParameterError(
            f"The `kappa` parameter of `{owner}` must lie in (1, 2] (paper 001 Thm 5). Got "
            f"{kappa!r}. Use uniformly_convex_instance for kappa >= 2."
        )
    dl = check_real(delta, "delta", owner)
    if not 0.0 < dl <= 0.5:
        raise InvalidParameterError(
            f"The `delta` parameter of `{owner}` must lie in (0, 1/2] (paper 001, proof of Thm 5, "
            f"L693). Got {delta!r}."
        )
    if isinstance(sign, bool) or sign not in (1, -1):
        raise InvalidParameterError(
            f"The `sign` parameter (v) of `{owner}` must be +1 or -1. Got {sign!r}."
        )
    a = 0.5 * dl ** (1.0 / (k - 1.0))
    return SharpInstance(
        kappa=k,
        delta=dl,
        sign=int(sign),
        a=a,
        minimizer=float(sign) * a,
        optimal_value=a * (1.0 - dl),
        assumptions=(
            "X = [-1, 1], s in {+1, -1}, P_v(s = 1) = (1 + delta v)/2, delta in (0, 1/2] (L693)",
            "kappa in (1, 2]: f_v has (1, kappa)-growth (L701-729) and F(.; s) is kappa-Lipschitz",
        ),
    )


# ------------------------------------------------------------------------ rate calculators
@dataclass(frozen=True, slots=True, kw_only=True)
class LocalizationRate:
    """Props 1-2 of paper 001: Algorithm 1's excess population risk, with probability
    ``1 - beta``, is ``L D O(statistical + privacy)`` (``rate`` with the O-constant 1)."""

    n: int
    d: int
    epsilon: float
    delta: float
    failure_probability: float
    lipschitz: float
    diameter: float
    step_size: float  # the paper's eta (L161 / L171)
    statistical_term: float  # sqrt(log(1/beta)) log^(3/2) n / sqrt(n)
    privacy_term: (
        float  # d log(1/beta) log n/(n eps) or sqrt(d log(1/delta)) log(1/beta) log n/(n eps)
    )
    rate: float  # L D (statistical_term + privacy_term)
    reference: str
    constants: str = _CONSTANTS
    assumptions: tuple[str, ...] = ()


def localization_rate(
    *,
    n: int,
    d: int,
    epsilon: float,
    delta: float = 0.0,
    failure_probability: float | None = None,
    lipschitz: float,
    diameter: float,
) -> LocalizationRate:
    """Prop 1 (``delta = 0``, L159-165) or Prop 2 (``delta > 0``, L169-175, main text; E7):

    ``eta = (D/L) min(1/sqrt(n log(1/beta)), eps/(d log(1/beta)))`` (Prop 1) or with
    ``sqrt(d log(1/delta)) log(1/beta)`` in place of ``d log(1/beta)`` (Prop 2), and the rate
    ``L D (sqrt(log(1/beta)) log^(3/2) n / sqrt(n) + d log(1/beta) log n / (n eps))`` (Prop 1)
    or with ``sqrt(d log(1/delta)) log(1/beta)`` in place of ``d log(1/beta)`` (Prop 2).

    ``failure_probability`` defaults to ``1/(n + d)``, the largest value allowed (L159).
    """
    owner = "localization_rate"
    n = _check_count(n, "n", owner)
    d = _check_count(d, "d", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    dl = _check_delta(delta, owner)
    beta = _check_beta(
        1.0 / (n + d) if failure_probability is None else failure_probability, n, d, owner
    )
    L = check_positive(lipschitz, "lipschitz", owner)
    D = check_positive(diameter, "diameter", owner)
    lb = math.log(1.0 / beta)
    if dl == 0.0:
        dim = d * lb
        ref = "001 Prop 1 (L159-165)"
    else:
        dim = math.sqrt(d * math.log(1.0 / dl)) * lb
        ref = "001 Prop 2 (L169-175, main-text form; E7)"
    eta = (D / L) * min(1.0 / math.sqrt(n * lb), eps / dim)
    statistical = math.sqrt(lb) * math.log(n) ** 1.5 / math.sqrt(n)
    privacy = dim * math.log(n) / (n * eps)
    return LocalizationRate(
        n=n,
        d=d,
        epsilon=eps,
        delta=dl,
        failure_probability=beta,
        lipschitz=L,
        diameter=D,
        step_size=eta,
        statistical_term=statistical,
        privacy_term=privacy,
        rate=L * D * (statistical + privacy),
        reference=ref,
        assumptions=(
            "F(., s) convex and L-Lipschitz on X for every s (L159)",
            "diam_2(X) <= D (bounded domain, P10)",
            "beta <= 1/(n + d) (L159)",
            "s_1..s_n i.i.d. (population excess risk, SCO)",
            "exact (or certified) minimizers in every round (L177)",
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class GrowthRate:
    """Thms 2-3 of paper 001: Algorithm 2's excess population risk under ``(lambda, kappa)``-
    growth, with probability ``1 - beta``: ``lambda^(-1/(kappa-1)) O~(base)^(kappa/(kappa-1))``
    with ``base = statistical_term + privacy_term`` (``rate`` with O-constants 1)."""

    n: int
    d: int
    epsilon: float
    delta: float
    failure_probability: float
    lipschitz: float
    growth: float  # lambda
    kappa: float
    kappa_lower: float
    epochs: int  # T = ceil(2 log n/(kappa_lower - 1))
    chunk_size: int  # n_0 = floor(n/T)
    step_size: float | None  # eta_0 (L189-191) given the diameter, else None
    statistical_term: float  # L sqrt(log(1/beta)) / sqrt(n)
    privacy_term: float  # L d log(1/beta)/(n eps (kappa_lower-1)) or the sqrt form (Thm 3)
    exponent: float  # kappa/(kappa-1)
    rate: float  # lambda^(-1/(kappa-1)) (statistical + privacy)^(kappa/(kappa-1))
    reference: str
    constants: str = _CONSTANTS
    assumptions: tuple[str, ...] = ()


def growth_rate(
    *,
    n: int,
    d: int,
    epsilon: float,
    delta: float = 0.0,
    failure_probability: float | None = None,
    lipschitz: float,
    growth: float,
    kappa: float,
    kappa_lower: float,
    diameter: float | None = None,
) -> GrowthRate:
    """Thm 2 (``delta = 0``, L202-206) or Thm 3 (``delta > 0``, L212-218):

    ``lambda^(-1/(kappa-1)) (L sqrt(log(1/beta))/sqrt(n) + L d log(1/beta)/(n eps (kappa_lower
    - 1)))^(kappa/(kappa-1))``, with ``sqrt(d log(1/delta) log(1/beta))`` in place of ``d
    log(1/beta)`` for Thm 3 and ``kappa_lower - 1`` in its denominator (E10: the main text's
    ``kappa - 1`` is a typo; the factor comes from ``T``). Also Algorithm 2's ``T = ceil(2 log
    n/(kappa_lower - 1))``, ``n_0 = floor(n/T)`` and, given ``diameter``, ``eta_0`` (L187-191).

    Raises :class:`~dpcvx.InvalidParameterError` unless ``kappa >= kappa_lower > 1``, ``beta``
    lies in ``(0, 1/(n + d)]`` (default ``1/(n + d)``) and ``n_0 >= 2`` (``log n_0 > 0`` in
    ``eta_0``).
    """
    owner = "growth_rate"
    n = _check_count(n, "n", owner)
    d = _check_count(d, "d", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    dl = _check_delta(delta, owner)
    beta = _check_beta(
        1.0 / (n + d) if failure_probability is None else failure_probability, n, d, owner
    )
    L = check_positive(lipschitz, "lipschitz", owner)
    lam = check_positive(growth, "growth", owner)
    k = check_real(kappa, "kappa", owner)
    kl = check_real(kappa_lower, "kappa_lower", owner)
    if not (kl > 1.0 and k >= kl):
        raise InvalidParameterError(
            f"`{owner}` needs kappa >= kappa_lower > 1 (paper 001 Thms 2-3). Got kappa = "
            f"{kappa!r}, kappa_lower = {kappa_lower!r}."
        )
    T = max(1, math.ceil(2.0 * math.log(n) / (kl - 1.0)))
    n0 = n // T
    if n0 < 2:
        raise InvalidParameterError(
            f"`{owner}`: Algorithm 2 runs T = {T} epochs on chunks of n_0 = floor(n/T) = {n0} "
            "records; it needs n_0 >= 2 (log n_0 > 0 in eta_0). Use more data or a larger "
            "kappa_lower."
        )
    lb = math.log(1.0 / beta)
    if dl == 0.0:
        dim = d * lb
        private_step = eps / dim
        ref = "001 Thm 2 (L202-206)"
    else:
        dim = math.sqrt(d * math.log(1.0 / dl) * lb)
        private_step = eps / dim
        ref = "001 Thm 3 (L212-218, with E10: kappa_lower - 1)"
    eta0 = None
    if diameter is not None:
        D = check_positive(diameter, "diameter", owner)
        eta0 = (D / (2.0 * L)) * min(1.0 / math.sqrt(n0 * math.log(n0) * lb), private_step)
    statistical = L * math.sqrt(lb) / math.sqrt(n)
    privacy = L * dim / (n * eps * (kl - 1.0))
    exponent = k / (k - 1.0)
    rate = lam ** (-1.0 / (k - 1.0)) * (statistical + privacy) ** exponent
    return GrowthRate(
        n=n,
        d=d,
        epsilon=eps,
        delta=dl,
        failure_probability=beta,
        lipschitz=L,
        growth=lam,
        kappa=k,
        kappa_lower=kl,
        epochs=T,
        chunk_size=n0,
        step_size=eta0,
        statistical_term=statistical,
        privacy_term=privacy,
        exponent=exponent,
        rate=rate,
        reference=ref,
        assumptions=(
            "F(., s) convex and L-Lipschitz on X for every s; diam_2(X) <= D (L202)",
            "the population f has (lambda, kappa)-growth with kappa >= kappa_lower > 1 "
            "(Assumption 1); lambda and kappa are never inputs of the algorithm",
            "beta <= 1/(n + d) (L202); s_1..s_n i.i.d. (SCO)",
            "D_0^(kappa-1) <~ L/lambda (P16; holds up to constants)",
        ),
    )


def growth_nesting(*, growth: float, kappa: float, kappa_new: float, diameter: float) -> float:
    """``lambda' = (kappa'/kappa) lambda D^(kappa - kappa')``: on a domain of diameter ``D``,
    ``(lambda, kappa)``-growth implies ``(lambda', kappa')``-growth for every ``kappa' >= kappa``
    (digest section 0 [derived]: ``r^kappa >= D^(kappa - kappa') r^kappa'`` for ``r <= D``)."""
    owner = "growth_nesting"
    lam = check_positive(growth, "growth", owner)
    k = check_real(kappa, "kappa", owner)
    k2 = check_real(kappa_new, "kappa_new", owner)
    D = check_positive(diameter, "diameter", owner)
    if not 1.0 <= k <= k2:
        raise InvalidParameterError(
            f"`{owner}` needs 1 <= kappa <= kappa_new (growth nests upward). Got kappa = "
            f"{kappa!r}, kappa_new = {kappa_new!r}."
        )
    return (k2 / k) * lam * D ** (k - k2)


def power_tradeoff_minimum(*, a: float, b: float, kappa: float) -> tuple[float, float]:
    """``(value, nu*)`` of ``inf_(nu > 0) a nu + b nu^(-1/(kappa-1))`` for ``a, b > 0``,
    ``kappa > 1``: ``nu* = (b/(a (kappa-1)))^((kappa-1)/kappa)`` and value ``kappa a^(1/kappa)
    b^((kappa-1)/kappa) (kappa-1)^(-(kappa-1)/kappa)`` (E15 [derived]: the printed closed form
    of Prop 3's proof, L779, is wrong for ``kappa != 2``; ``kappa = 3, a = b = 1`` gives 1.89)."""
    owner = "power_tradeoff_minimum"
    a = check_positive(a, "a", owner)
    b = check_positive(b, "b", owner)
    k = check_real(kappa, "kappa", owner)
    if not k > 1.0:
        raise InvalidParameterError(
            f"The `kappa` parameter of `{owner}` must exceed 1. Got {kappa!r}."
        )
    nu = (b / (a * (k - 1.0))) ** ((k - 1.0) / k)
    value = k * a ** (1.0 / k) * b ** ((k - 1.0) / k) * (k - 1.0) ** (-(k - 1.0) / k)
    return value, nu
