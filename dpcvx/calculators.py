"""Bound and parameter calculators for papers 000 and 003: pure functions of public numbers.

Nothing here touches data. Every function maps public numbers (a sample size, a dimension, a
privacy parameter, moment bounds, a diameter, a step size) to the number a theorem of the paper
gives, and returns a frozen dataclass that carries the inputs, the result, the reference and the
assumptions under which the result holds. Calling them costs no privacy.

Line numbers ``000 L...`` and ``003 L...`` refer to the seed texts
``shared/papers/000_f960bd11b787d6d9.txt`` (Lowy, pure-DP heavy-tailed SCO via Lipschitz
extensions) and ``shared/papers/003_2ce65b02e67e1136.txt`` (Kamath, Liu and Zhang, heavy-tailed
SCO with clipped gradient methods under zCDP). "E#" is an erratum of ``docs/paper000_digest.md``;
"P#" is a pitfall of the 003 digest (``shared/papers/003_2ce65b02e67e1136.digest.md``).

What is here
------------
Paper 000 (pure epsilon-DP, moment bound ``E[sup_w ||grad f(w, z)||^k] <= G_k^k``, 000 L29-31):

:func:`lipschitz_extension_bias` -> :class:`ExtensionBias`
    Lemma 2.3 / C.1 (000 L210-214, L659-697): ``E_Z max_w (F_Z - F_{C,Z}) <= D G_k^k /
    ((k - 1) C^(k-1))``.
:func:`paper_extension_parameter`
    The paper's Lipschitz-extension parameter ``C = G_k (n epsilon / d)^(1/k)`` (Prop 2.5,
    000 L243-249; Prop 3.2, 000 L370-376; Prop C.3, 000 L783).
:func:`extension_tradeoff` -> :class:`ExtensionTradeoff`
    What a choice of ``C`` buys on a domain of diameter ``D``: the bias of Lemma 2.3 against the
    order ``c D C d / (n epsilon)`` of pure-DP ``C``-Lipschitz ERM. The sum is minimized exactly
    at the paper's ``C`` when ``c = 1`` [derived].
:func:`localized_distance_bound` -> :class:`LocalizedDistanceBound`
    Proposition C.3 (000 L769-790): the distance ``c_1 C d / (lambda epsilon n) +
    sqrt(60000 G_k^k d / ((k - 1) lambda^2 n epsilon C^(k-2)))``, and the ``C`` minimizing it.
:func:`heavy_tailed_rate` -> :class:`HeavyTailedRate`
    The excess-risk rate of Theorem 3.1 (000 L358-364) next to the lower bound of Theorem 4.1 /
    G.6 (000 L396-400, L2710-2716), with the unspecified absolute constants set to 1.

Paper 003 (rho-zCDP, Algorithm 1 ``SCOF``: projected gradient descent with a mean oracle):

:func:`framework_convex_bound` -> :class:`ConvexFrameworkBound`
    Theorem 3.1 (003 L191-195, proof L434-495): ``M^2/(2 eta T) + eta (R^2 + G^2) + M B``.
:func:`framework_strongly_convex_bound` -> :class:`StronglyConvexFrameworkBound`
    Theorem 3.2 (003 L197-207, proof L497-541), with its errata (P6, P8) applied.
:func:`high_probability_parameters` -> :class:`HighProbabilityParameters`
    The parameters of Theorem B.8 (003 L974-1039): ``tau``, ``T``, ``eta``,
    ``m = d log(d M n / beta)``, ``alpha = 1/n^3`` and the per-step noise, with the rate's terms.

Corrections to the papers
-------------------------
- **000, Lemma 2.3 holds for every k > 1.** The paper assumes ``k >= 2`` (000 L31, L100), but the
  layer-cake proof (000 L689-697) only needs ``int_C^inf s^-k ds`` finite. The bias calculator
  accepts ``k > 1``; every other 000 calculator keeps the paper's ``k >= 2``.
- **000 E4** (Prop C.3 proof uses ``diam(W0) <= 600 Cd/(lambda n epsilon)``; the true bound is
  twice that). The statement stands as printed: redoing the Markov step with threshold 12000
  gives ``sqrt(24000 ...) <= sqrt(60000 ...)`` (digest Section 3). We use the printed 60000.
- **000 E13** (Prop D.1's ``G_2/sqrt(m)`` term) and **E20** (``delta`` in Theorems 3.1 and 4.1
  is a failure probability, called ``failure_probability`` here, and must lie in (0, 1/5)).
- **000 Prop G.4** [derived, not in the digest]: ``p = min{log((|V| - 1)/(4 e zeta))/(n epsilon),
  1}`` (000 L2597) is not positive when ``|V| - 1 <= 4 e zeta``, e.g. ``d = 1``, ``|V| = 2``,
  ``zeta >= 1/(4e)``. ``tests/fixtures_000.py`` rejects such parameters.
- **003 Theorem 3.2** (P6): its first display bounds ``E||w^T - w*||``, not the excess risk
  (the proof, 003 L521-527, bounds a distance). Its last step (003 L529-531),
  ``E[L(w^T)] - L(w*) <= (L/2) E||w^T - w*||^2 <= (L/2) (bound on E||w^T - w*||)^2``, squares
  a first-moment bound, which Jensen's inequality does not allow (``E X^2 >= (E X)^2``). We
  return the distance bound, the valid excess-risk bound ``R E||w^T - w*||`` (the population
  risk is ``R``-Lipschitz, 003 Assumption 2.12.6, L161), and the printed
  ``(lambda + L)^2 (M + 1)^2 G^2 / (2 lambda^2 L)`` only as ``printed_excess_bound``
  (unproved). The paper's ``T`` is only defined when ``(lambda + L) G / (lambda L) < 1`` (P6).
- **003 Theorem B.8** (P14): ``tau = (sqrt(rho n)/(M d^(3/2)))^(1/k)`` as typeset means
  ``(sqrt(rho) n / (M d^(3/2)))^(1/k)``, as in Theorem 5.2 and its proof. The bucket count is
  ``m = d log(d M n / beta)`` (003 L998), not Theorem 5.2's ``8 d log(3 M n^3)`` (P3).
- **003 Theorem 3.1**: the proof (003 L462-466) pulls the expectation inside
  ``<grad L(w^t) - g_t, w^t - w*>`` although ``w^t`` is random. The bound holds when the oracle's
  bias and second moment bounds hold conditionally on the past iterates (fresh oracle
  randomness), or uniformly over ``W`` as the paper arranges with its covering argument (Lemma
  B.2). We state the conditional form as the assumption.

Status
------
Rates with unspecified absolute constants (000 Theorems 3.1 and 4.1, 003 Theorem B.8) are
returned with every such constant set to 1 and labelled so: they show how the bound scales with
``n``, ``d``, ``epsilon``, ``k`` and the moments, not its value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpcvx._validation import check_moment_order, check_positive, check_real
from dpcvx.errors import InvalidParameterError

__all__ = [
    "ConvexFrameworkBound",
    "ExtensionBias",
    "ExtensionTradeoff",
    "HeavyTailedRate",
    "HighProbabilityParameters",
    "LocalizedDistanceBound",
    "StronglyConvexFrameworkBound",
    "extension_tradeoff",
    "framework_convex_bound",
    "framework_strongly_convex_bound",
    "heavy_tailed_rate",
    "high_probability_parameters",
    "lipschitz_extension_bias",
    "localized_distance_bound",
    "paper_extension_parameter",
]

_MOMENT_000 = (
    "f(., z) is convex on a closed convex domain W of l2-diameter D for every z "
    "(000 Assumption 1.1, L100)",
    "moment bound E_z[sup_{w in W} ||grad f(w, z)||^k] <= G_k^k, G_k public (000 eq. (3), L29)",
)


# ----------------------------------------------------------------------------------- helpers
def _check_k_above_one(value: object, owner: str) -> float:
    k = check_real(value, "k", owner)
    if not k > 1:
        raise InvalidParameterError(
            f"The moment order `k` of `{owner}` must be a finite number above 1 (the bias bound "
            f"integrates s^-k from C to infinity). Got {value!r}."
        )
    return k


def _check_count(value: object, name: str, owner: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidParameterError(
            f"The `{name}` parameter of `{owner}` must be a positive integer. Got {value!r}."
        )
    return value


def _check_probability(value: object, name: str, owner: str, upper: float) -> float:
    out = check_real(value, name, owner)
    if not 0.0 < out < upper:
        raise InvalidParameterError(
            f"The `{name}` parameter of `{owner}` must lie in (0, {upper:g}). Got {value!r}."
        )
    return out


def _check_moment_chain(lower: float, upper: float, lo: str, hi: str, owner: str) -> None:
    if lower > upper:
        raise InvalidParameterError(
            f"`{owner}` got `{lo}` = {lower!r} > `{hi}` = {upper!r}, but moment bounds are "
            f"nondecreasing in the order (Lyapunov): one of the two claims is false."
        )


# ----------------------------------------------------------------- paper 000: Lemma 2.3/C.1
@dataclass(frozen=True, slots=True, kw_only=True)
class ExtensionBias:
    """The bias bound of the empirical Lipschitz extension (000 Lemma 2.3 / C.1).

    Attributes
    ----------
    C, k, moment_bound, diameter : float
        The extension parameter ``C``, the moment order ``k``, ``G_k`` and the diameter ``D`` of
        the set the maximum runs over (``W``, or a localized ``W0 ⊆ W`` with its own diameter).
    value : float
        ``D G_k^k / ((k - 1) C^(k-1))``: a bound on ``E_Z max_w (F_Z(w) - F_{C,Z}(w)) >= 0``.
    tail_expectation : float
        ``G_k^k / ((k - 1) C^(k-1))``, the bound on ``E[(A(z) - C)_+]`` (000 L693-697), where
        ``A(z) = max_{u in W} ||grad f(u, z)||``; ``value = diameter * tail_expectation``.
    reference, assumptions, errata : str, tuple of str
    """

    C: float
    k: float
    moment_bound: float
    diameter: float
    value: float
    tail_expectation: float
    reference: str
    assumptions: tuple[str, ...]
    errata: tuple[str, ...]


def lipschitz_extension_bias(
    *, C: float, k: float, moment_bound: float, diameter: float
) -> ExtensionBias:
    """Bound on the expected worst-case bias of the Lipschitz extension ``f_C`` (000 Lemma 2.3).

    Parameters
    ----------
    C : float
        The Lipschitz-extension parameter, ``C > 0``.
    k : float
        The moment order, ``k > 1`` (the paper assumes ``k >= 2``; the proof needs ``k > 1``).
    moment_bound : float
        ``G_k > 0`` with ``E_z[sup_{w in W} ||grad f(w, z)||^k] <= G_k^k``.
    diameter : float
        ``D > 0``, the l2-diameter of the set the maximum over ``w`` runs over.

    Returns
    -------
    ExtensionBias

    Notes
    -----
    000 Lemma 2.3 (L210-214) and its precise version Lemma C.1 (L659-667): for every data set
    ``Z`` and ``w in W``, ``F_Z(w) - F_{C,Z}(w) <= (D/n) sum_i (A(z_i) - C)_+`` (L663), and with
    the layer-cake formula and Markov's inequality ``E[(A - C)_+] = int_C^inf P(A >= s) ds <=
    G_k^k / ((k - 1) C^(k-1))`` (L689-697). The first inequality is attained by linear losses on
    an interval (see ``tests/test_calculators.py``); the Markov step is not tight in general.
    The bound is a statement about the expectation over ``Z ~ P^n``, not about one data set.
    """
    owner = "lipschitz_extension_bias"
    C = check_positive(C, "C", owner)
    k = _check_k_above_one(k, owner)
    G = check_positive(moment_bound, "moment_bound", owner)
    D = check_positive(diameter, "diameter", owner)
    tail = G * (G / C) ** (k - 1) / (k - 1)  # = G^k / ((k-1) C^(k-1)), without overflow
    return ExtensionBias(
        C=C,
        k=k,
        moment_bound=G,
        diameter=D,
        value=D * tail,
        tail_expectation=tail,
        reference="000 Lemma 2.3 (L210-214) / Lemma C.1 (L659-697)",
        assumptions=(
            *_MOMENT_000,
            "the maximum over w runs over a set of diameter D; on a localized W0 ⊆ W use "
            "diam(W0), with A(z) still a maximum over W (000 digest Section 3)",
            "z_1, ..., z_n are i.i.d. from P (expectation over Z ~ P^n)",
        ),
        errata=("the paper assumes k >= 2 (000 L31); the proof (L689-697) holds for k > 1",),
    )


def paper_extension_parameter(
    *, n: int, d: int, epsilon: float, k: float, moment_bound: float
) -> float:
    """The paper's Lipschitz-extension parameter ``C = G_k (n epsilon / d)^(1/k)``.

    ``n`` is the size of the data set the extension is built on (a block of size ``m`` inside
    Algorithm 4). 000 Prop 2.5 (L243-249), Prop C.3 (L783), Prop 3.2 / D.1 (L370-376, L1154).
    It balances the two terms of Prop C.3 up to a constant (:func:`localized_distance_bound`) and
    minimizes the unlocalized trade-off of :func:`extension_tradeoff` exactly.
    """
    owner = "paper_extension_parameter"
    n = _check_count(n, "n", owner)
    d = _check_count(d, "d", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    k = check_moment_order(k, owner)
    G = check_positive(moment_bound, "moment_bound", owner)
    return G * (n * eps / d) ** (1.0 / k)


# -------------------------------------------------------------- paper 000: choosing C
@dataclass(frozen=True, slots=True, kw_only=True)
class ExtensionTradeoff:
    """Bias of the extension against the cost of privacy, as a function of ``C``.

    Attributes
    ----------
    C : float
        The ``C`` evaluated (the paper's ``C`` if none was given).
    bias : float
        ``D G_k^k / ((k - 1) C^(k-1))`` (000 Lemma 2.3).
    privacy_term : float
        ``c D C d / (n epsilon)``: the order of the excess empirical risk of pure epsilon-DP ERM
        with ``C``-Lipschitz losses on a domain of diameter ``D`` (the rate of [BST14], cited at
        000 L224 and L736), with ``c = noise_constant``.
    total : float
        ``bias + privacy_term``.
    optimal_C : float
        The exact minimizer of ``total`` over ``C > 0``: ``G_k (n epsilon / (c d))^(1/k)``
        [derived: d/dC of the bias is ``-D G_k^k / C^k``]. Equals the paper's ``C`` when
        ``c = 1``.
    optimal_total : float
        ``total`` at ``optimal_C``: ``k/(k - 1) D G_k (c d / (n epsilon))^(1 - 1/k)``.
    paper_C : float
        ``G_k (n epsilon / d)^(1/k)`` (:func:`paper_extension_parameter`).
    """

    C: float
    n: int
    d: int
    epsilon: float
    k: float
    moment_bound: float
    diameter: float
    noise_constant: float
    bias: float
    privacy_term: float
    total: float
    optimal_C: float
    optimal_total: float
    paper_C: float
    reference: str
    assumptions: tuple[str, ...]


def extension_tradeoff(
    *,
    n: int,
    d: int,
    epsilon: float,
    k: float,
    moment_bound: float,
    diameter: float,
    C: float | None = None,
    noise_constant: float = 1.0,
) -> ExtensionTradeoff:
    """What a choice of ``C`` and ``n`` buys: the extension's bias against the privacy cost.

    Notes
    -----
    The paper's discussion after Lemma 2.3 (000 L216-218): optimizing the regularized extension
    over all of ``W`` with an optimal pure-DP algorithm pays the bias
    ``D G_k^k/((k - 1) C^(k-1))`` plus a privacy cost of order ``C D d/(n epsilon)``.
    [derived] With the privacy constant ``c`` (default 1), the sum is convex in ``C`` and is
    minimized exactly at ``C* = G_k (n epsilon/(c d))^(1/k)``, the paper's choice when
    ``c = 1``; at ``C*`` the bias is ``1/(k - 1)`` times the privacy term, and the total is
    ``k/(k - 1) D G_k (c d/(n epsilon))^(1 - 1/k)``, the privacy term of Theorem 3.1 without its
    ``log(1/beta)``. The privacy term is an order of magnitude, not a proved bound with
    constant ``c``; the localized bound with the paper's explicit constant is
    :func:`localized_distance_bound`.
    """
    owner = "extension_tradeoff"
    n = _check_count(n, "n", owner)
    d = _check_count(d, "d", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    k = check_moment_order(k, owner)
    G = check_positive(moment_bound, "moment_bound", owner)
    D = check_positive(diameter, "diameter", owner)
    c = check_positive(noise_constant, "noise_constant", owner)
    paper_C = G * (n * eps / d) ** (1.0 / k)
    C_eval = paper_C if C is None else check_positive(C, "C", owner)

    def terms(x: float) -> tuple[float, float]:
        return D * G * (G / x) ** (k - 1) / (k - 1), c * D * x * d / (n * eps)

    bias, priv = terms(C_eval)
    c_star = G * (n * eps / (c * d)) ** (1.0 / k)
    b_star, p_star = terms(c_star)
    return ExtensionTradeoff(
        C=C_eval,
        n=n,
        d=d,
        epsilon=eps,
        k=k,
        moment_bound=G,
        diameter=D,
        noise_constant=c,
        bias=bias,
        privacy_term=priv,
        total=bias + priv,
        optimal_C=c_star,
        optimal_total=b_star + p_star,
        paper_C=paper_C,
        reference="000 Lemma 2.3 (L210-214), discussion L216-218, C of Prop 2.5 (L243-249)",
        assumptions=(
            *_MOMENT_000,
            "privacy_term is the order c*C*D*d/(n*epsilon) of pure-DP C-Lipschitz ERM "
            "(unspecified constant c = noise_constant), not a proved bound",
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalizedDistanceBound:
    """000 Proposition C.3: distance of the two-stage output to the regularized ERM minimizer.

    Attributes
    ----------
    noise_term : float
        ``c_1 C d / (lambda epsilon n)`` (the second stage's accuracy, hypothesis (11)).
    bias_term : float
        ``sqrt(60000 G_k^k d / ((k - 1) lambda^2 n epsilon C^(k-2)))``.
    value : float
        ``noise_term + bias_term``; ``||w_DP - w_lambda(Z; w0)|| <= value`` with probability at
        least ``probability``.
    probability : float
        ``0.8 - e^-3`` (000 L779).
    minimizing_C : float or None
        The ``C`` minimizing ``value``: ``((k - 2) b / (2 a))^(2/k)`` with ``value = a C +
        b C^(-(k-2)/2)`` [derived]; None for ``k = 2``, where ``value`` decreases to its infimum
        as ``C -> 0``.
    paper_C : float
        ``G_k (n epsilon / d)^(1/k)`` (000 L783): the two terms' balance point up to the
        constant ``(60000/((k - 1) c_1^2))^(1/k)``.
    """

    C: float
    n: int
    d: int
    epsilon: float
    k: float
    moment_bound: float
    regularization: float
    c1: float
    noise_term: float
    bias_term: float
    value: float
    probability: float
    minimizing_C: float | None
    paper_C: float
    reference: str
    assumptions: tuple[str, ...]
    errata: tuple[str, ...]


def localized_distance_bound(
    *,
    C: float,
    n: int,
    d: int,
    epsilon: float,
    k: float,
    moment_bound: float,
    regularization: float,
    c1: float,
) -> LocalizedDistanceBound:
    """000 Proposition C.3 (L769-790) as a function of ``C``.

    ``c1`` is the constant of the second stage's accuracy hypothesis (11) (000 L775); the paper
    leaves it unspecified, so the caller supplies the one its second stage achieves.
    """
    owner = "localized_distance_bound"
    C = check_positive(C, "C", owner)
    n = _check_count(n, "n", owner)
    d = _check_count(d, "d", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    k = check_moment_order(k, owner)
    G = check_positive(moment_bound, "moment_bound", owner)
    lam = check_positive(regularization, "regularization", owner)
    c1 = check_positive(c1, "c1", owner)
    a = c1 * d / (lam * eps * n)
    b = math.sqrt(60000.0 * d / ((k - 1) * lam * lam * n * eps)) * G ** (k / 2)
    noise = a * C
    bias = b * C ** (-(k - 2) / 2)
    minimizing = None if k == 2 else ((k - 2) * b / (2 * a)) ** (2 / k)
    return LocalizedDistanceBound(
        C=C,
        n=n,
        d=d,
        epsilon=eps,
        k=k,
        moment_bound=G,
        regularization=lam,
        c1=c1,
        noise_term=noise,
        bias_term=bias,
        value=noise + bias,
        probability=0.8 - math.exp(-3.0),
        minimizing_C=minimizing,
        paper_C=G * (n * eps / d) ** (1.0 / k),
        reference="000 Proposition C.3 (L769-790); Prop 2.5 (L243-253)",
        assumptions=(
            *_MOMENT_000,
            "Z ~ P^n; W0 is the output of Algorithm 2 at budget epsilon/2 with zeta = 3",
            "the (epsilon/2)-DP second stage outputs w_DP in W0 within c1*C*d/(lambda*epsilon*n) "
            "of argmin_{W0} of the regularized extension with probability >= 0.9 (hypothesis "
            "(11), 000 L775)",
        ),
        errata=(
            "E4: the proof uses diam(W0) <= 600Cd/(lambda n epsilon), the true bound is twice "
            "that; redone with threshold 12000 the constant is 24000 <= 60000, so the printed "
            "statement stands",
        ),
    )


# ------------------------------------------------------------- paper 000: Theorems 3.1, 4.1
@dataclass(frozen=True, slots=True, kw_only=True)
class HeavyTailedRate:
    """The pure-DP heavy-tailed SCO rate of 000 Theorem 3.1 and the lower bound of Theorem 4.1.

    Every absolute constant (``c_3``, ``c_4`` of Thm 3.1; ``c`` of Thm 4.1) is set to 1: the
    fields show how the rates scale, not their values.

    Attributes
    ----------
    upper_private, upper_statistical, upper : float
        ``G_k D (d log(1/beta)/(n epsilon))^(1 - 1/k)``, ``G_2 D sqrt(log(1/beta)/n)`` and their
        sum (000 L358-364).
    lower_private, lower_statistical, lower : float
        ``G_k D ((d + log(1/beta))/(n epsilon))^(1 - 1/k)``, ``G_2 D sqrt(log(1/beta)/n)`` and
        ``D min{G_1, (lower_statistical + lower_private)/D}`` (000 L396-400); without ``G_1``
        the cap is omitted.
    lower_bound_applies : bool
        Theorem 4.1 assumes ``epsilon <= 1``.
    gap : float
        ``upper / lower``: the theorems match up to ``d log(1/beta)`` versus
        ``d + log(1/beta)`` and the constants.
    paper_C : float
        ``G_k (n epsilon / d)^(1/k)`` for the whole sample (Algorithm 4 uses the block size).
    """

    n: int
    d: int
    epsilon: float
    k: float
    moment_bound: float
    second_moment_bound: float
    first_moment_bound: float | None
    diameter: float
    failure_probability: float
    upper_private: float
    upper_statistical: float
    upper: float
    lower_private: float
    lower_statistical: float
    lower: float
    lower_bound_applies: bool
    gap: float
    paper_C: float
    reference: str
    assumptions: tuple[str, ...]
    errata: tuple[str, ...]


def heavy_tailed_rate(
    *,
    n: int,
    d: int,
    epsilon: float,
    k: float,
    moment_bound: float,
    second_moment_bound: float,
    diameter: float,
    failure_probability: float,
    first_moment_bound: float | None = None,
) -> HeavyTailedRate:
    """Excess-risk rate of 000 Theorem 3.1 (LDOP) and lower bound of Theorem 4.1, constants 1.

    Parameters
    ----------
    n, d : int
        Sample size and dimension.
    epsilon : float
        Pure-DP parameter.
    k : float
        Moment order, ``k >= 2``.
    moment_bound, second_moment_bound : float
        ``G_k`` and ``G_2`` (``G_2 <= G_k``, else :class:`InvalidParameterError`).
    diameter : float
        ``D``.
    failure_probability : float
        ``beta`` in (0, 1/5): the bounds hold with probability ``1 - beta`` (upper) and fail with
        probability at least ``beta`` (lower). The paper writes ``delta`` (E20).
    first_moment_bound : float, optional
        ``G_1 = E[sup_w ||grad f||]`` (``G_1 <= G_2``), the cap of the lower bound.
    """
    owner = "heavy_tailed_rate"
    n = _check_count(n, "n", owner)
    d = _check_count(d, "d", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    k = check_moment_order(k, owner)
    Gk = check_positive(moment_bound, "moment_bound", owner)
    G2 = check_positive(second_moment_bound, "second_moment_bound", owner)
    _check_moment_chain(G2, Gk, "second_moment_bound", "moment_bound", owner)
    D = check_positive(diameter, "diameter", owner)
    beta = _check_probability(failure_probability, "failure_probability", owner, 0.2)
    G1 = None
    if first_moment_bound is not None:
        G1 = check_positive(first_moment_bound, "first_moment_bound", owner)
        _check_moment_chain(G1, G2, "first_moment_bound", "second_moment_bound", owner)
    log_b = math.log(1.0 / beta)
    e = 1.0 - 1.0 / k
    up_priv = Gk * D * (d * log_b / (n * eps)) ** e
    stat = G2 * D * math.sqrt(log_b / n)
    lo_priv = Gk * D * ((d + log_b) / (n * eps)) ** e
    lower = stat + lo_priv if G1 is None else min(D * G1, stat + lo_priv)
    return HeavyTailedRate(
        n=n,
        d=d,
        epsilon=eps,
        k=k,
        moment_bound=Gk,
        second_moment_bound=G2,
        first_moment_bound=G1,
        diameter=D,
        failure_probability=beta,
        upper_private=up_priv,
        upper_statistical=stat,
        upper=up_priv + stat,
        lower_private=lo_priv,
        lower_statistical=stat,
        lower=lower,
        lower_bound_applies=eps <= 1.0,
        gap=(up_priv + stat) / lower,
        paper_C=Gk * (n * eps / d) ** (1.0 / k),
        reference="000 Theorem 3.1 (L358-364), Theorem 4.1 (L396-400) / G.6 (L2710-2716)",
        assumptions=(
            *_MOMENT_000,
            "G_2 (and G_1) are the same moment bounds with k = 2 (and 1)",
            "absolute constants c_3, c_4 (Thm 3.1) and c (Thm 4.1) unspecified: set to 1",
            "the lower bound is over a class containing P^bdd(G_2) and P^pack_k(G_k) "
            "(000 L2450-2468) and needs epsilon <= 1",
        ),
        errata=(
            "E20: the paper's delta is a failure probability; Thms 3.1 and 4.1 need it in (0, 1/5)",
        ),
    )


# ------------------------------------------------------------- paper 003: Theorems 3.1, 3.2
_ASSUMPTION_003 = (
    "003 Assumption 2.12 (L149-159): loss convex and differentiable, W of diameter M, "
    "||E grad l(w, x)|| <= R for all w (so the population risk is R-Lipschitz, L161)",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConvexFrameworkBound:
    """003 Theorem 3.1: expected excess risk of the averaged iterate of SCOF.

    Attributes
    ----------
    optimization_term : float
        ``M^2 / (2 eta T)``.
    variance_term : float
        ``eta (R^2 + G^2)``.
    bias_term : float
        ``M B``.
    value : float
        The sum: ``E[L(w_priv)] - L(w*) <= value``.
    optimal_step_size : float
        ``M / sqrt(2 T (R^2 + G^2))``, the ``eta`` minimizing ``value`` for this ``T``
        [derived]; ``optimal_value = M sqrt(2 (R^2 + G^2) / T) + M B``.
    paper_step_size : float
        ``M / (R sqrt(T))``, the choice of the proofs of Theorems 5.2/5.4 (003 L681, L733).
    """

    diameter: float
    gradient_bound: float
    oracle_bias: float
    oracle_error: float
    iterations: int
    step_size: float
    optimization_term: float
    variance_term: float
    bias_term: float
    value: float
    optimal_step_size: float
    optimal_value: float
    paper_step_size: float
    reference: str
    assumptions: tuple[str, ...]
    errata: tuple[str, ...]


def framework_convex_bound(
    *,
    diameter: float,
    gradient_bound: float,
    oracle_bias: float,
    oracle_error: float,
    iterations: int,
    step_size: float | None = None,
) -> ConvexFrameworkBound:
    """003 Theorem 3.1 (L191-195): ``M^2/(2 eta T) + eta (R^2 + G^2) + M B``.

    Parameters
    ----------
    diameter : float
        ``M``, the diameter of ``W``.
    gradient_bound : float
        ``R`` with ``||grad L_D(w)|| <= R`` on ``W``.
    oracle_bias : float
        ``B >= 0``: ``||E[g(w)] - grad L_D(w)|| <= B``.
    oracle_error : float
        ``G >= 0``: ``E||g(w) - grad L_D(w)||^2 <= G^2``.
    iterations : int
        ``T``.
    step_size : float, optional
        ``eta``; default the minimizing step ``M / sqrt(2 T (R^2 + G^2))``.
    """
    owner = "framework_convex_bound"
    M = check_positive(diameter, "diameter", owner)
    R = check_positive(gradient_bound, "gradient_bound", owner)
    B = check_real(oracle_bias, "oracle_bias", owner)
    G = check_real(oracle_error, "oracle_error", owner)
    for name, v in (("oracle_bias", B), ("oracle_error", G)):
        if v < 0:
            raise InvalidParameterError(
                f"The `{name}` parameter of `{owner}` must be non-negative. Got {v!r}."
            )
    T = _check_count(iterations, "iterations", owner)
    s2 = R * R + G * G
    eta_opt = M / math.sqrt(2 * T * s2)
    eta = eta_opt if step_size is None else check_positive(step_size, "step_size", owner)
    opt = M * M / (2 * eta * T)
    var = eta * s2
    return ConvexFrameworkBound(
        diameter=M,
        gradient_bound=R,
        oracle_bias=B,
        oracle_error=G,
        iterations=T,
        step_size=eta,
        optimization_term=opt,
        variance_term=var,
        bias_term=M * B,
        value=opt + var + M * B,
        optimal_step_size=eta_opt,
        optimal_value=M * math.sqrt(2 * s2 / T) + M * B,
        paper_step_size=M / (R * math.sqrt(T)),
        reference="003 Theorem 3.1 (L191-195), proof B.1 (L434-495)",
        assumptions=(
            *_ASSUMPTION_003,
            "Algorithm 1 with constant step eta, output the average of w^1..w^T",
            "the oracle's bias (<= B) and mean-square error (<= G^2) bounds hold at every "
            "iterate conditionally on the past, or uniformly over W",
        ),
        errata=(
            "the proof takes E inside <grad L(w^t) - g_t, w^t - w*> with w^t random; valid "
            "under the conditional (or uniform) form of the oracle assumption stated here",
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class StronglyConvexFrameworkBound:
    """003 Theorem 3.2 with its errata applied.

    Attributes
    ----------
    contraction : float
        ``q = 1 - lambda L / (lambda + L)^2``.
    distance_bound : float
        ``q^T M + (lambda + L) G / (lambda L)``: a bound on ``E||w^T - w*||`` (the quantity the
        proof bounds, 003 L521-527; the theorem labels it an excess risk, P6).
    excess_bound : float or None
        ``R * distance_bound``: a valid bound on ``E[L(w^T)] - L(w*)`` since the population
        risk is ``R``-Lipschitz (None without ``gradient_bound``).
    paper_iterations : float or None
        ``log((lambda + L) G/(lambda L)) / log(q)``, defined only when ``(lambda + L) G /
        (lambda L) < 1`` (P6); then ``q^T M = M (lambda + L) G/(lambda L)``.
    printed_excess_bound : float
        ``(lambda + L)^2 (M + 1)^2 G^2 / (2 lambda^2 L)`` as printed: its proof squares a
        first-moment bound (P6) and needs ``grad L(w*) = 0`` (P8). Not a proved bound.
    """

    diameter: float
    smoothness: float
    strong_convexity: float
    oracle_error: float
    iterations: int
    gradient_bound: float | None
    step_size: float
    contraction: float
    distance_bound: float
    excess_bound: float | None
    paper_iterations: float | None
    printed_excess_bound: float
    reference: str
    assumptions: tuple[str, ...]
    errata: tuple[str, ...]


def framework_strongly_convex_bound(
    *,
    diameter: float,
    smoothness: float,
    strong_convexity: float,
    oracle_error: float,
    iterations: int,
    gradient_bound: float | None = None,
) -> StronglyConvexFrameworkBound:
    """003 Theorem 3.2 (L197-207): last iterate of SCOF with ``eta = 1/(lambda + L)``.

    Parameters
    ----------
    diameter : float
        ``M``.
    smoothness, strong_convexity : float
        ``L`` and ``lambda`` of the population risk, ``0 < lambda <= L``.
    oracle_error : float
        ``G >= 0`` with ``E||g(w^t) - grad L_D(w^t)|| <= G`` (first moment) at every iterate.
    iterations : int
        ``T``.
    gradient_bound : float, optional
        ``R`` (003 Assumption 2.12.6), for the corrected excess-risk bound.
    """
    owner = "framework_strongly_convex_bound"
    M = check_positive(diameter, "diameter", owner)
    L = check_positive(smoothness, "smoothness", owner)
    lam = check_positive(strong_convexity, "strong_convexity", owner)
    if lam > L:
        raise InvalidParameterError(
            f"`{owner}` got strong_convexity = {lam!r} > smoothness = {L!r}; a function cannot "
            "be more strongly convex than it is smooth."
        )
    G = check_real(oracle_error, "oracle_error", owner)
    if G < 0:
        raise InvalidParameterError(
            f"The `oracle_error` parameter of `{owner}` must be non-negative. Got {G!r}."
        )
    T = _check_count(iterations, "iterations", owner)
    R = None if gradient_bound is None else check_positive(gradient_bound, "gradient_bound", owner)
    q = 1.0 - lam * L / (lam + L) ** 2
    ratio = (lam + L) * G / (lam * L)
    dist = q**T * M + ratio
    paper_T = math.log(ratio) / math.log(q) if 0.0 < ratio < 1.0 else None
    return StronglyConvexFrameworkBound(
        diameter=M,
        smoothness=L,
        strong_convexity=lam,
        oracle_error=G,
        iterations=T,
        gradient_bound=R,
        step_size=1.0 / (lam + L),
        contraction=q,
        distance_bound=dist,
        excess_bound=None if R is None else R * dist,
        paper_iterations=paper_T,
        printed_excess_bound=(lam + L) ** 2 * (M + 1) ** 2 * G**2 / (2 * lam**2 * L),
        reference="003 Theorem 3.2 (L197-207), proof B.2 (L497-541)",
        assumptions=(
            *_ASSUMPTION_003,
            "the population risk is lambda-strongly convex and L-smooth on W, w* in W",
            "Algorithm 1 with eta = 1/(lambda + L), output w^T; E||g_t - grad L(w^t)|| <= G",
        ),
        errata=(
            "P6: the theorem's first display bounds E||w^T - w*||, not the excess risk",
            "P6: the final (L/2)(...)^2 step squares a first-moment bound; use excess_bound",
            "P6: the paper's T needs (lambda + L)G/(lambda L) < 1",
            "P8: the (L/2)||w - w*||^2 step also needs grad L(w*) = 0 (Assumption 2.12.4)",
        ),
    )


# -------------------------------------------------------------------- paper 003: Thm B.8
@dataclass(frozen=True, slots=True, kw_only=True)
class HighProbabilityParameters:
    """The parameters of 003 Theorem B.8 (Theorem 5.2 in high probability).

    Attributes
    ----------
    tau : float
        ``(sqrt(rho) n / (M d^(3/2)))^(1/k)``, the clipping level of CDPCWME (P14).
    T : float
        ``R^2 rho n^2 / (tau^2 d^4)``, as printed (not rounded).
    iterations : int
        ``max(1, ceil(T))``, what an implementation runs.
    eta : float
        ``M / (R sqrt(T))``.
    buckets : int
        ``ceil(d log(d M n / beta))``, the median-of-means bucket count ``m`` (003 L998).
    alpha : float
        ``1/n^3``, the covering radius of the uniform-convergence argument (003 L998).
    sigma : float
        Per-step Gaussian standard deviation of CDPCWME at budget ``rho/T`` with ``buckets``
        buckets: ``sqrt(72 tau^2 m^2 d T / (rho n^2))`` (003 L673).
    printed_sigma : float
        ``sqrt(72 tau^2 d^3 T log^2(M n d/beta) / (rho n^2))`` (003 L1032), the same with the
        real-valued ``m``; ``sigma >= printed_sigma``.
    rate_statistical, rate_private, rate_covering, rate : float
        The terms of the bound with the O-constant set to 1 (003 L976):
        ``M d sqrt(log(Mdn/beta)/n)``, ``log(Mdn/beta) (M d^2/(n sqrt(rho))) (sqrt(rho) n/(M
        d^(3/2)))^(1/k)``, ``log(Mdn/beta) M L d^1.5 / n^3`` and their sum.
    conditions : tuple of (str, bool)
        The theorem's hypotheses on the numbers: ``tau >= 10``, ``T >= 1``, ``n >= m``,
        ``R <= 10``, ``L <= 10`` (P4).
    """

    n: int
    d: int
    rho: float
    k: float
    diameter: float
    gradient_bound: float
    smoothness: float
    failure_probability: float
    tau: float
    T: float
    iterations: int
    eta: float
    buckets: int
    alpha: float
    sigma: float
    printed_sigma: float
    rate_statistical: float
    rate_private: float
    rate_covering: float
    rate: float
    conditions: tuple[tuple[str, bool], ...]
    reference: str
    assumptions: tuple[str, ...]
    errata: tuple[str, ...]

    @property
    def hypotheses_hold(self) -> bool:
        """Whether every numeric hypothesis of Theorem B.8 holds."""
        return all(ok for _, ok in self.conditions)


def high_probability_parameters(
    *,
    n: int,
    d: int,
    rho: float,
    k: float,
    diameter: float,
    gradient_bound: float,
    smoothness: float,
    failure_probability: float,
) -> HighProbabilityParameters:
    """003 Theorem B.8 (L974-1039): parameters of Algorithm 2 with CDPCWME, high probability.

    Parameters
    ----------
    n, d : int
        Sample size and dimension.
    rho : float
        The zCDP budget of the whole run (``rho/T`` per step).
    k : float
        Coordinate-wise moment order, ``k >= 2`` (moment bound ``gamma = 1``, Def 2.11).
    diameter, gradient_bound, smoothness : float
        ``M``, ``R`` and ``L`` of Assumption 2.12.
    failure_probability : float
        ``beta`` in (0, 1).
    """
    owner = "high_probability_parameters"
    n = _check_count(n, "n", owner)
    d = _check_count(d, "d", owner)
    rho = check_positive(rho, "rho", owner)
    k = check_moment_order(k, owner)
    M = check_positive(diameter, "diameter", owner)
    R = check_positive(gradient_bound, "gradient_bound", owner)
    L = check_positive(smoothness, "smoothness", owner)
    beta = _check_probability(failure_probability, "failure_probability", owner, 1.0)
    log_term = math.log(d * M * n / beta)
    if log_term <= 0:
        raise InvalidParameterError(
            f"`{owner}` needs d*M*n/beta > 1 so that the bucket count d*log(dMn/beta) is "
            f"positive. Got d={d}, M={M!r}, n={n}, beta={beta!r}."
        )
    root = math.sqrt(rho) * n / (M * d**1.5)
    tau = root ** (1.0 / k)
    T = R * R * rho * n * n / (tau * tau * d**4)
    m = math.ceil(d * log_term)
    sigma = math.sqrt(72.0 * tau * tau * m * m * d * T / (rho * n * n))
    printed = math.sqrt(72.0 * tau * tau * d**3 * T * log_term**2 / (rho * n * n))
    stat = M * d * math.sqrt(log_term / n)
    priv = log_term * (M * d * d / (n * math.sqrt(rho))) * root ** (1.0 / k)
    cover = log_term * M * L * d**1.5 / n**3
    return HighProbabilityParameters(
        n=n,
        d=d,
        rho=rho,
        k=k,
        diameter=M,
        gradient_bound=R,
        smoothness=L,
        failure_probability=beta,
        tau=tau,
        T=T,
        iterations=max(1, math.ceil(T)),
        eta=M / (R * math.sqrt(T)),
        buckets=m,
        alpha=1.0 / n**3,
        sigma=sigma,
        printed_sigma=printed,
        rate_statistical=stat,
        rate_private=priv,
        rate_covering=cover,
        rate=stat + priv + cover,
        conditions=(
            ("tau >= 10", tau >= 10),
            ("T >= 1", T >= 1),
            ("n >= m", n >= m),
            ("R <= 10", R <= 10),
            ("L <= 10", L <= 10),
        ),
        reference="003 Theorem B.8 (L974-978), proof (L980-1039)",
        assumptions=(
            *_ASSUMPTION_003,
            "003 Assumption 2.12: L-smooth losses, gradient at the optimum zero, coordinate-wise "
            "k-th moments of the gradient bounded by 1 at every w (Def 2.11)",
            "Algorithm 2 with CDPCWME(rho/T, tau) on all n gradients each step; rho-zCDP",
            "the rate's O-constant is unspecified and set to 1",
        ),
        errata=(
            "P14: tau's typeset sqrt(rho n) is sqrt(rho)*n (as in Thm 5.2)",
            "P3: m = d log(dMn/beta) here, not Thm 5.2's 8 d log(3 M n^3)",
        ),
    )
