"""Bound and parameter calculators for papers 000, 002 and 003: pure functions of public numbers.

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

Paper 002 (Lowy and Razaviyayn, output perturbation; ``002 L...`` are lines of
``shared/papers/002_f70484ffcee9a6db.txt``, "002 E#" errata of its digest, Section 7):

:func:`smooth_perturbation_bound` -> :class:`SmoothPerturbationBound`
    Proposition 2.6: ``(beta/2) E||z||^2`` for the unprojected release, E4 (factor ``d``).
:func:`smooth_strongly_convex_bound` -> :class:`SmoothStronglyConvexBound`
    Corollary 2.2 and Theorem 3.2 (class ``H``, general or ERM, exact or ``alpha``-accurate).
:func:`smooth_tilted_bound` -> :class:`SmoothStronglyConvexBound`
    Smooth tilted ERM (Section 5.1.2, Theorem 5.2) with erratum E9: ``C_tau^2``, not ``C_tau``.
:func:`smooth_convex_bound` -> :class:`SmoothConvexBound`
    Theorem 3.5 / Proposition 2.8 (class ``J``, regularized, unprojected).
:func:`strongly_convex_population_bound`, :func:`smooth_strongly_convex_population_bound`
    -> :class:`StronglyConvexPopulationBound`: Propositions 4.1 and 4.2 with Corollaries 4.1
    and 4.2 (population loss by uniform stability); the unprojected stability step of Lemma 4.2
    is repaired [derived].

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
    "HeavyTailedClipping",
    "HeavyTailedRate",
    "HighProbabilityParameters",
    "LocalizedDistanceBound",
    "StronglyConvexFrameworkBound",
    "extension_tradeoff",
    "framework_convex_bound",
    "framework_strongly_convex_bound",
    "heavy_tailed_clipping",
    "heavy_tailed_rate",
    "high_probability_parameters",
    "lipschitz_extension_bias",
    "localized_distance_bound",
    "paper_extension_parameter",
    "SmoothConvexBound",
    "SmoothPerturbationBound",
    "SmoothStronglyConvexBound",
    "StronglyConvexPopulationBound",
    "smooth_convex_bound",
    "smooth_perturbation_bound",
    "smooth_strongly_convex_bound",
    "smooth_strongly_convex_population_bound",
    "smooth_tilted_bound",
    "strongly_convex_population_bound",
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


#: the scale ``T`` of :func:`heavy_tailed_clipping` (fitted on public synthetic data only)
HEAVY_TAILED_SCALE = 3000.0


@dataclass(frozen=True, slots=True, kw_only=True)
class HeavyTailedClipping:
    """The clipping norm of dpcvx's default heavy-tailed release (:func:`heavy_tailed_clipping`).

    Attributes
    ----------
    C : float
        The clipping norm: ``max(G_2, G_k (n epsilon / (T d))^(1/k))``.
    second_moment_C : float
        ``G_2``, the floor (clipping at the root mean square norm).
    growth_C : float
        ``G_k (n epsilon / (T d))^(1/k)``: the paper's ``C`` scaled down by ``T^(1/k)``.
    paper_C : float
        The paper's ``C = G_k (n epsilon / d)^(1/k)`` (:func:`paper_extension_parameter`).
    scale : float
        ``T``.
    assumptions : tuple of str
    """

    C: float
    second_moment_C: float
    growth_C: float
    paper_C: float
    scale: float
    assumptions: tuple[str, ...]


def heavy_tailed_clipping(
    *,
    n: int,
    d: int,
    epsilon: float,
    k: float,
    moment: float,
    second_moment: float | None = None,
    scale: float = HEAVY_TAILED_SCALE,
) -> HeavyTailedClipping:
    """The clipping norm (equivalently the Lipschitz extension's ``C``) of dpcvx's default
    heavy-tailed release: output perturbation on rows clipped to
    ``C = max(G_2, G_k (n epsilon / (T d))^(1/k))``, ``T = 3000``, with paper 002's population
    regularization (Prop 4.3, :func:`~dpcvx.mechanisms.output_perturbation.choose_regularization`
    with ``task="sco"``).

    Why this form. Clipping at ``C`` biases the risk by at most ``D G_k^k/((k - 1) C^(k-1))``
    (000 Lemma 2.3) and output perturbation's noise grows like ``C``; the balance point grows
    like ``(n epsilon/d)^(1/k)``, as the paper's ``C = G_k (n epsilon/d)^(1/k)`` does. The
    paper's constant is a worst case: on public synthetic heavy-tailed data (Student-t(5)
    features, absolute and hinge losses, d in {5, 20}, n in {1e3, 1e4, 1e5}, epsilon in
    {0.5, 1, 5}; ``benchmarks/bench_heavy_tailed.py``) the paper's ``C`` had 2 to 50 times the
    excess risk of clipping at ``G_2`` up to ``n epsilon/d`` of about ``1e3``, while clipping at
    ``2 G_2`` to ``4 G_2`` won from about ``1e4``. ``T = 3000`` puts the rule there (for k = 4 it
    doubles ``C`` over ``G_2`` near ``n epsilon/d = 2e4`` at d = 5). The rule reads public
    numbers only; ``T`` was fitted on synthetic data, never on a user's.
    """
    owner = "heavy_tailed_clipping"
    n = _check_count(n, "n", owner)
    d = _check_count(d, "d", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    k = check_moment_order(k, owner)
    G = check_positive(moment, "moment", owner)
    G2 = G if second_moment is None else check_positive(second_moment, "second_moment", owner)
    if G2 > G:
        raise InvalidParameterError(
            f"`second_moment` ({G2:g}) exceeds `moment` ({G:g}) in `{owner}`: by Lyapunov's "
            "inequality G_2 <= G_k. One of the two is wrong."
        )
    T = check_positive(scale, "scale", owner)
    growth = G * (n * eps / (T * d)) ** (1.0 / k)
    return HeavyTailedClipping(
        C=max(G2, growth),
        second_moment_C=G2,
        growth_C=growth,
        paper_C=G * (n * eps / d) ** (1.0 / k),
        scale=T,
        assumptions=(
            "E||x||^k <= G_k^k and E||x||^2 <= G_2^2 are public bounds on the feature norms "
            "(000 eq. (3)); wrong bounds cost utility only (the release clips at C)",
            "the constant T = 3000 was fitted on public synthetic data (see the docstring)",
        ),
    )


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


# ==================================================================================== paper 002
# Lowy & Razaviyayn, output perturbation (seed text ``shared/papers/002_f70484ffcee9a6db.txt``,
# "002 L..."; errata "E#" are items of Section 7 of its digest
# ``shared/papers/002_f70484ffcee9a6db.digest.md``).


def _zwb_s(delta: float, epsilon: float) -> float:
    """``s_delta = c_delta + sqrt(c_delta^2 + epsilon)`` of ZWB+19 (002 Eq. (5))."""
    c = math.sqrt(math.log(2.0 / math.expm1(0.5 * math.log1p(16.0 * delta))))
    return c + math.sqrt(c * c + epsilon)


def _check_delta_002(value: object, owner: str) -> float:
    out = check_real(value, "delta", owner)
    if not 0.0 <= out < 0.5:
        raise InvalidParameterError(
            f"The `delta` parameter of `{owner}` must be 0 (pure DP) or lie in (0, 1/2) (the "
            f"ZWB+19 Gaussian of 002 Eq. (5)). Got {value!r}."
        )
    return out


def _noise_moments(d: int, epsilon: float, delta: float, sensitivity: float) -> tuple[float, float]:
    """``(E||z||, E||z||^2)`` of 002's noise calibrated to ``sensitivity`` (Lemma B.3).

    Pure: ``||z|| ~ Gamma(d, Delta/epsilon)``, so ``E||z|| = d Delta/epsilon`` and ``E||z||^2 =
    d(d+1) Delta^2/epsilon^2``. Gaussian: ``sigma = s_delta Delta/(sqrt(2) epsilon)``,
    ``E||z||^2 = d sigma^2`` and the bound ``E||z|| <= sqrt(d) sigma`` (Jensen) is returned.
    """
    if delta == 0.0:
        scale = sensitivity / epsilon
        return d * scale, d * (d + 1) * scale * scale
    sigma = _zwb_s(delta, epsilon) * sensitivity / (math.sqrt(2.0) * epsilon)
    return math.sqrt(d) * sigma, d * sigma * sigma


def _base_ratio(d: int, epsilon: float, delta: float) -> float:
    """``d/epsilon`` (pure) or ``sqrt(d) s_delta/epsilon`` (approximate): the digest's rho."""
    return d / epsilon if delta == 0.0 else math.sqrt(d) * _zwb_s(delta, epsilon) / epsilon


def _check_accuracy(value: object, owner: str) -> float:
    out = check_real(value, "accuracy", owner)
    if out < 0:
        raise InvalidParameterError(
            f"The `accuracy` parameter (alpha) of `{owner}` must be non-negative (0 means an "
            f"exact minimizer). Got {value!r}."
        )
    return out


_ERRATUM_4 = (
    "002 E4: Prop 2.6's delta > 0 display (L353) omits the factor d; its proof (B.4.1, L1757) "
    "has E||z||^2 = d sigma^2, so the bound is (beta/4) d s_delta^2 Delta^2/epsilon^2"
)
_ERRATUM_9 = (
    "002 E9: the smooth TERM bounds (L1263-1279, Thm 5.2) print C_tau where Prop 2.6 gives "
    "C_tau^2 (they scale with Delta^2 and Delta = (2L/mu) C_tau/n, Lemma 5.2)"
)


# ------------------------------------------------------------------------ 002 Proposition 2.6
@dataclass(frozen=True, slots=True, kw_only=True)
class SmoothPerturbationBound:
    """002 Proposition 2.6: excess risk of unprojected output perturbation of a smooth ``F``.

    Attributes
    ----------
    smoothness, sensitivity : float
        ``beta`` and the l2 sensitivity ``Delta`` the noise is calibrated to.
    d, epsilon, delta :
        Dimension and guarantee (``delta = 0``: l2 Laplace noise, Eq. (4); ``delta`` in
        (0, 1/2): ZWB+19 Gaussian, Eq. (5)).
    sigma : float or None
        ``s_delta Delta/(sqrt(2) epsilon)`` for the Gaussian, None for pure DP.
    noise_second_moment : float
        ``E||z||^2``: ``d(d+1) Delta^2/epsilon^2`` (pure) or ``d sigma^2`` (Lemma B.3).
    value : float
        ``(beta/2) E||z||^2``, the bound of the proof (B.4.1), erratum E4 applied.
    paper_value : float
        The statement's last form: ``beta d^2 Delta^2/epsilon^2`` (pure, ``>= value``) or the
        printed ``(beta/4) s_delta^2 Delta^2/epsilon^2`` without the factor ``d`` (E4: it is
        ``value/d``, not a bound for ``d > 1``).
    """

    smoothness: float
    sensitivity: float
    d: int
    epsilon: float
    delta: float
    sigma: float | None
    noise_second_moment: float
    value: float
    paper_value: float
    reference: str
    assumptions: tuple[str, ...]
    errata: tuple[str, ...]


def smooth_perturbation_bound(
    *, smoothness: float, sensitivity: float, d: int, epsilon: float, delta: float = 0.0
) -> SmoothPerturbationBound:
    """002 Proposition 2.6 (L347-353): ``E F(w* + z) - F(w*) <= (beta/2) E||z||^2``.

    Parameters
    ----------
    smoothness : float
        ``beta > 0``: ``F(., X)`` is ``beta``-smooth on ``R^d`` for every ``X``.
    sensitivity : float
        ``Delta > 0``, the l2 sensitivity bound the noise is calibrated to (any valid bound:
        ``2L/mu``, ``2L/(mu n)``, TERM's ``(2L/mu) min{1, C_tau/n}``, ...).
    d : int
        Dimension.
    epsilon, delta : float
        The guarantee; ``delta = 0`` or ``0 < delta < 1/2``.

    Returns
    -------
    SmoothPerturbationBound

    Notes
    -----
    Proof B.4.1 (L1751-1757): the descent lemma at the unconstrained minimizer ``w*``
    (``grad F(w*) = 0``) and mean-zero noise give ``(beta/2) E||z||^2``. Erratum E4 of the 002
    digest is applied: the printed ``delta > 0`` display drops the factor ``d`` that its proof
    keeps. The bound is quadratic in ``Delta``, which is why the smooth TERM bounds must carry
    ``C_tau^2`` (erratum E9; see :func:`smooth_tilted_bound`).
    """
    owner = "smooth_perturbation_bound"
    beta = check_positive(smoothness, "smoothness", owner)
    Delta = check_positive(sensitivity, "sensitivity", owner)
    d = _check_count(d, "d", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    dl = _check_delta_002(delta, owner)
    _, second = _noise_moments(d, eps, dl, Delta)
    if dl == 0.0:
        sigma = None
        paper = beta * d * d * Delta * Delta / (eps * eps)
    else:
        s = _zwb_s(dl, eps)
        sigma = s * Delta / (math.sqrt(2.0) * eps)
        paper = beta / 4.0 * (s / eps) ** 2 * Delta * Delta
    return SmoothPerturbationBound(
        smoothness=beta,
        sensitivity=Delta,
        d=d,
        epsilon=eps,
        delta=dl,
        sigma=sigma,
        noise_second_moment=second,
        value=0.5 * beta * second,
        paper_value=paper,
        reference="002 Proposition 2.6 (L347-353), proof B.4.1 (L1749-1757), Lemma B.3",
        assumptions=(
            "F(., X) is beta-smooth on all of R^d (the noisy point leaves any ball)",
            "w*(X) is an unconstrained minimizer, grad F(w*(X), X) = 0 (digest P6); the "
            "release is w*(X) + z, not projected (002 Eq. (2))",
            "the noise is calibrated to an l2 sensitivity bound Delta (002 Eq. (4)/(5))",
        ),
        errata=(_ERRATUM_4,),
    )


# ---------------------------------------------------- 002 Corollary 2.2, Theorem 3.2, Thm 5.2
@dataclass(frozen=True, slots=True, kw_only=True)
class SmoothStronglyConvexBound:
    """002 Corollary 2.2 and Theorem 3.2 (and Theorem 5.2 for TERM): the class ``H``.

    Excess (empirical) risk of unprojected output perturbation of a ``mu``-strongly convex,
    ``beta``-smooth, ``L``-Lipschitz ``F``, from the exact minimizer (Cor 2.2) or from an
    ``alpha``-accurate one with the inflated sensitivity (Algorithm 1, Thm 3.2).

    Attributes
    ----------
    n : int or None
        Sample size (None for a general, non-ERM ``F``).
    erm : bool
        Whether ``F`` is an average of one per-example loss (sensitivity divided by ``n``).
    condition_number : float
        ``kappa = beta/mu`` (``beta_tau/mu`` for TERM).
    tilt_factor : float or None
        TERM's ``C_tau = exp(tau (A_R - a_R))`` (Lemma 5.2), None otherwise.
    sensitivity_factor : float
        ``m`` with ``Delta = 2 L m / mu``: ``1`` (general), ``1/n`` (ERM), ``min{1, C_tau/n}``
        (TERM, Lemma 5.2).
    ratio : float
        ``m d/epsilon`` (pure) or ``m sqrt(d) s_delta/epsilon`` (approximate): the paper's
        privacy ratio with ``n`` (or ``n/C_tau``) folded in.
    sensitivity : float
        ``Delta = 2 L m/mu`` (Prop 2.2; Lemma 5.2).
    conceptual_value : float
        ``(beta/2) E||z||^2`` at ``Delta`` (Prop 2.6 with E4): the bound of Cor 2.2.
    corollary_value : float
        Cor 2.2's printed closed form ``4 kappa (L^2/mu) ratio^2`` (``>= conceptual_value``; for
        ``delta > 0`` it is 4 times the corrected Prop 2.6). For TERM this is the bound of
        002 L1263-1269 with ``C_tau^2`` (E9).
    accuracy : float
        ``alpha``, the solver's guaranteed suboptimality (default: ``paper_accuracy``).
    paper_accuracy : float
        Thm 3.2's ``alpha = (L^2/mu) m^2 min{kappa rho^2, 1}`` (``rho = d/epsilon`` or
        ``sqrt(d) s_delta/epsilon``).
    inflated_sensitivity : float
        ``Delta' = Delta + 2 sqrt(2 alpha/mu)`` (Prop 3.1).
    value : float
        ``(beta/2) E||z'||^2 + alpha`` with ``z'`` calibrated to ``Delta'``: proof C.1.4 with
        the exact noise moments. Equals ``conceptual_value`` when ``alpha = 0``.
    theorem_display_value : float
        Thm 3.2's first display: ``4 beta (L m/mu + sqrt(2 alpha/mu))^2 rho^2 + alpha`` (pure)
        or ``2 beta (...)^2 rho^2 + alpha`` (approximate); ``>= value``.
    theorem_value : float
        ``26 kappa (L^2/mu) ratio^2`` (pure) or ``13.5 kappa (L^2/mu) ratio^2`` (approximate).
    theorem_value_applies : bool
        ``accuracy <= paper_accuracy``, under which ``theorem_value >= theorem_display_value``
        [derived: ``4 (1 + sqrt 2)^2 + 1 = 24.3 <= 26``, ``2 (1 + sqrt 2)^2 + 1 = 12.7 <=
        13.5``].
    printed_value : float or None
        TERM only: Thm 5.2's printed ``26 (or 13.5) kappa_tau (L^2 C_tau/mu) (rho/n)^2`` with
        ``C_tau`` where ``C_tau^2`` is needed (E9). Not a bound when ``C_tau < n``.
    conditions : tuple of (str, bool)
        The theorem's hypothesis ``ratio <= 1`` (the bound is informative only then; the
        constants above do not need it).
    """

    n: int | None
    d: int
    epsilon: float
    delta: float
    lipschitz: float
    strong_convexity: float
    smoothness: float
    erm: bool
    condition_number: float
    tilt_factor: float | None
    sensitivity_factor: float
    ratio: float
    sensitivity: float
    conceptual_value: float
    corollary_value: float
    accuracy: float
    paper_accuracy: float
    inflated_sensitivity: float
    value: float
    theorem_display_value: float
    theorem_value: float
    theorem_value_applies: bool
    printed_value: float | None
    conditions: tuple[tuple[str, bool], ...]
    reference: str
    assumptions: tuple[str, ...]
    errata: tuple[str, ...]


def _check_strongly_convex(
    lipschitz: object, strong_convexity: object, smoothness: object | None, owner: str
) -> tuple[float, float, float | None]:
    L = check_positive(lipschitz, "lipschitz", owner)
    mu = check_positive(strong_convexity, "strong_convexity", owner)
    if smoothness is None:
        return L, mu, None
    beta = check_positive(smoothness, "smoothness", owner)
    if mu > beta:
        raise InvalidParameterError(
            f"`{owner}` got strong_convexity = {mu!r} > smoothness = {beta!r}; a function "
            "cannot be more strongly convex than it is smooth."
        )
    return L, mu, beta


def _smooth_strongly_convex(
    *,
    owner: str,
    n: int | None,
    erm: bool,
    m: float,
    tilt: float | None,
    d: int,
    eps: float,
    dl: float,
    L: float,
    mu: float,
    beta: float,
    accuracy: object | None,
    reference: str,
    assumptions: tuple[str, ...],
    errata: tuple[str, ...],
) -> SmoothStronglyConvexBound:
    kappa = beta / mu
    rho = _base_ratio(d, eps, dl)
    ratio = m * rho
    Delta = 2.0 * L * m / mu
    _, second = _noise_moments(d, eps, dl, Delta)
    paper_alpha = (L * L / mu) * m * m * min(kappa * rho * rho, 1.0)
    alpha = paper_alpha if accuracy is None else _check_accuracy(accuracy, owner)
    inflated = Delta + 2.0 * math.sqrt(2.0 * alpha / mu)
    _, second_inflated = _noise_moments(d, eps, dl, inflated)
    lead = 4.0 if dl == 0.0 else 2.0
    display = lead * beta * (L * m / mu + math.sqrt(2.0 * alpha / mu)) ** 2 * rho * rho + alpha
    constant = 26.0 if dl == 0.0 else 13.5
    printed = None
    if tilt is not None and n is not None:
        printed = constant * kappa * (L * L * tilt / mu) * (rho / n) ** 2
    return SmoothStronglyConvexBound(
        n=n,
        d=d,
        epsilon=eps,
        delta=dl,
        lipschitz=L,
        strong_convexity=mu,
        smoothness=beta,
        erm=erm,
        condition_number=kappa,
        tilt_factor=tilt,
        sensitivity_factor=m,
        ratio=ratio,
        sensitivity=Delta,
        conceptual_value=0.5 * beta * second,
        corollary_value=4.0 * kappa * (L * L / mu) * ratio * ratio,
        accuracy=alpha,
        paper_accuracy=paper_alpha,
        inflated_sensitivity=inflated,
        value=0.5 * beta * second_inflated + alpha,
        theorem_display_value=display,
        theorem_value=constant * kappa * (L * L / mu) * ratio * ratio,
        theorem_value_applies=alpha <= paper_alpha,
        printed_value=printed,
        conditions=(("ratio <= 1", ratio <= 1.0),),
        reference=reference,
        assumptions=assumptions,
        errata=errata,
    )


_SMOOTH_ASSUMPTIONS_002 = (
    "F(., X) is mu-strongly convex and beta-smooth on all of R^d and L-Lipschitz on B(0, R) "
    "for every X, with its unconstrained minimizer in B(0, R) (class H, 002 Section 2.5)",
    "the release is w + z without projection (002 Eq. (2); Algorithm 1 for H)",
    "alpha > 0: the solver's point w_T satisfies F(w_T) - min F <= alpha on every run, not "
    "only in expectation (digest P1), and alpha is fixed before seeing data (P2)",
)


def smooth_strongly_convex_bound(
    *,
    d: int,
    epsilon: float,
    lipschitz: float,
    strong_convexity: float,
    smoothness: float,
    delta: float = 0.0,
    n: int | None = None,
    accuracy: float | None = None,
) -> SmoothStronglyConvexBound:
    """002 Corollary 2.2 (L357-369) and Theorem 3.2 (L657-693) for the class ``H``.

    Parameters
    ----------
    d : int
        Dimension.
    epsilon, delta : float
        The guarantee; ``delta = 0`` (l2 Laplace) or ``0 < delta < 1/2`` (ZWB+19 Gaussian).
    lipschitz, strong_convexity, smoothness : float
        ``L``, ``mu`` and ``beta`` of ``F`` (``0 < mu <= beta``).
    n : int, optional
        Sample size of an ERM objective ``F = (1/n) sum_i f(., x_i)`` (sensitivity ``2L/(mu
        n)``); None for a general ``F`` (sensitivity ``2L/mu``).
    accuracy : float, optional
        ``alpha >= 0`` of Algorithm 1; default Thm 3.2's ``alpha``. ``0`` is the conceptual
        algorithm of Cor 2.2.

    Returns
    -------
    SmoothStronglyConvexBound

    Notes
    -----
    ``value`` is the proof's bound (C.1.4: descent lemma at ``w_T`` plus ``alpha``) with the
    exact noise second moment of Lemma B.3, Prop 2.6's erratum E4 (the missing factor ``d``)
    applied. The printed closed forms (Cor 2.2's ``4 kappa``, Thm 3.2's 26 and 13.5) are
    returned beside it; each is ``>= value`` under its stated ``alpha``. Cor 2.2(b) and
    Thm 3.2's ``delta > 0`` display are loose by a factor 4 and 2 respectively, because their
    proofs use ``E||z||^2 = d s_delta^2 Delta^2/epsilon^2`` instead of ``d sigma^2 = d
    s_delta^2 Delta^2/(2 epsilon^2)``. For TERM objectives use :func:`smooth_tilted_bound`,
    which applies erratum E9 (``C_tau^2``).
    """
    owner = "smooth_strongly_convex_bound"
    d = _check_count(d, "d", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    dl = _check_delta_002(delta, owner)
    L, mu, beta = _check_strongly_convex(lipschitz, strong_convexity, smoothness, owner)
    assert beta is not None
    nn = None if n is None else _check_count(n, "n", owner)
    return _smooth_strongly_convex(
        owner=owner,
        n=nn,
        erm=nn is not None,
        m=1.0 if nn is None else 1.0 / nn,
        tilt=None,
        d=d,
        eps=eps,
        dl=dl,
        L=L,
        mu=mu,
        beta=beta,
        accuracy=accuracy,
        reference=(
            "002 Corollary 2.2 (L357-369) via Proposition 2.6 (L347-353) and 2.2; Theorem 3.2 "
            "(L657-693), proof C.1.4 (L1867-1881)"
        ),
        assumptions=_SMOOTH_ASSUMPTIONS_002
        + (
            ("ERM: F = (1/n) sum_i f(., x_i) with one fixed f, replace-one neighbors, public n",)
            if nn is not None
            else ()
        ),
        errata=(
            _ERRATUM_4,
            "Cor 2.2(b) and Thm 3.2's delta > 0 display use E||z||^2 = d s^2 Delta^2/eps^2 (2 "
            "sigma^2 d): valid but loose; value uses d sigma^2",
        ),
    )


def smooth_tilted_bound(
    *,
    n: int,
    d: int,
    epsilon: float,
    lipschitz: float,
    strong_convexity: float,
    smoothness: float,
    tilt: float,
    loss_lower: float,
    loss_upper: float,
    delta: float = 0.0,
    accuracy: float | None = None,
) -> SmoothStronglyConvexBound:
    """Smooth tilted ERM: 002 Section 5.1.2 (L1253-1283) and Theorem 5.2, with erratum E9.

    Parameters
    ----------
    n, d : int
        Sample size and dimension.
    epsilon, delta : float
        The guarantee.
    lipschitz, strong_convexity, smoothness : float
        ``L``, ``mu``, ``beta`` of every ``f(., x)`` (twice differentiable).
    tilt : float
        ``tau > 0``.
    loss_lower, loss_upper : float
        ``a_R <= f(w, x) <= A_R`` on ``B(0, R) x X``.
    accuracy : float, optional
        ``alpha`` of Algorithm 1 (AGD on ``F_tau``); default ``(L^2/mu) m^2 min{kappa_tau
        rho^2, 1}`` with ``m = min{1, C_tau/n}`` (see Notes).

    Returns
    -------
    SmoothStronglyConvexBound
        With ``tilt_factor = C_tau``, ``sensitivity_factor = min{1, C_tau/n}``,
        ``condition_number = kappa_tau`` and ``printed_value`` (the printed, uncorrected
        Thm 5.2 bound).

    Notes
    -----
    ``F_tau = (1/tau) log((1/n) sum_i exp(tau f(w, x_i)))`` is ``mu``-strongly convex (Lemma
    5.1), ``beta_tau``-smooth with ``beta_tau = beta + tau L^2`` (Lemma 5.3's statement and
    Thm 5.2; the proof's ``beta + 2 tau L^2`` is looser; [derived] ``hess F_tau = sum_i v_i hess
    f_i + tau Cov_v(grad f_i) <= (beta + tau L^2) I``) and has sensitivity ``(2L/mu) min{1,
    C_tau/n}``, ``C_tau = exp(tau (A_R - a_R))`` (Lemma 5.2, whose proof needs the digest's
    repair, E7). Prop 2.6 is quadratic in the sensitivity, so the bounds carry ``C_tau^2``:
    **erratum E9** of the 002 digest. The paper prints ``4 kappa_tau (L^2 C_tau/mu)(rho/n)^2``
    (L1265-1269) and ``26 (13.5) kappa_tau (L^2 C_tau/mu)(rho/n)^2`` (Thm 5.2); with ``C_tau <
    n`` the corrected bounds are those times ``C_tau``. The paper's Thm 5.2 ``alpha = (L^2/(mu
    n^2)) min{kappa_tau rho^2, C_tau^2}`` differs from the default here in its first branch;
    both satisfy ``alpha <= kappa_tau (L^2/mu) ratio^2`` and ``sqrt(2 alpha/mu) <= sqrt(2) L
    m/mu``, which is all the constants 26 and 13.5 need.
    """
    owner = "smooth_tilted_bound"
    n = _check_count(n, "n", owner)
    d = _check_count(d, "d", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    dl = _check_delta_002(delta, owner)
    L, mu, beta = _check_strongly_convex(lipschitz, strong_convexity, smoothness, owner)
    assert beta is not None
    tau = check_positive(tilt, "tilt", owner)
    a = check_real(loss_lower, "loss_lower", owner)
    A = check_real(loss_upper, "loss_upper", owner)
    if A < a:
        raise InvalidParameterError(
            f"`{owner}` got loss_upper = {A!r} < loss_lower = {a!r}: they bound f on B(0, R) x "
            "X from above and below."
        )
    C_tau = math.exp(tau * (A - a))
    if not math.isfinite(C_tau):
        raise InvalidParameterError(
            f"`{owner}`: C_tau = exp(tau (A_R - a_R)) overflows for tau = {tau!r} and loss "
            f"range {A - a!r}; use the non-tilted bound (sensitivity 2L/mu) instead."
        )
    return _smooth_strongly_convex(
        owner=owner,
        n=n,
        erm=False,
        m=min(1.0, C_tau / n),
        tilt=C_tau,
        d=d,
        eps=eps,
        dl=dl,
        L=L,
        mu=mu,
        beta=beta + tau * L * L,
        accuracy=accuracy,
        reference=(
            "002 Section 5.1.2 (L1253-1269), Theorem 5.2 (L1271-1283), via Proposition 2.6, "
            "Lemmas 5.1-5.3 and Theorem 3.2"
        ),
        assumptions=_SMOOTH_ASSUMPTIONS_002
        + (
            "f(., x) twice differentiable, mu-strongly convex, beta-smooth, L-Lipschitz on "
            "B(0, R), and a_R <= f <= A_R on B(0, R) x X (002 Theorem 5.2)",
        ),
        errata=(
            _ERRATUM_9,
            _ERRATUM_4,
            "002 E8: Lemma 5.3 states beta + L^2 tau, its proof beta + 2 L^2 tau; beta + tau "
            "L^2 is valid [derived] and used here",
        ),
    )


# ------------------------------------------------------------------------ 002 Theorem 3.5
@dataclass(frozen=True, slots=True, kw_only=True)
class SmoothConvexBound:
    """002 Theorem 3.5 (and Prop 2.8): regularized output perturbation for the class ``J``.

    Attributes
    ----------
    ratio : float
        ``d/epsilon`` or ``sqrt(d) s_delta/epsilon``, divided by ``n`` for ERM.
    regularization, paper_regularization : float
        ``lambda`` used, and Thm 3.5's ``(beta L^2/R^2)^(1/3) ratio^(2/3)``.
    sensitivity : float
        ``Delta_lambda = 2 (L + lambda R)/lambda`` (divided by ``n`` for ERM), as in
        Algorithm 6.
    accuracy, paper_accuracy : float
        ``alpha``, and Thm 3.5's ``min{L^(4/3) R^(2/3) beta^(-1/3) ratio^(-2/3) m^2, target}``
        (``m = 1/n`` for ERM, else 1).
    inflated_sensitivity : float
        ``Delta_lambda + 2 sqrt(2 alpha/lambda)`` (Prop 3.3).
    value : float
        ``lambda R^2/2 + ((beta + lambda)/2) E||z||^2 + alpha`` with the exact noise moment:
        the decomposition of proof C.3.1 (whose last line drops the 1/2, a valid loosening).
    target : float
        ``beta^(1/3) L^(2/3) R^(4/3) ratio^(2/3)``.
    conceptual_paper_value, theorem_value : float
        ``48.5 target`` (Prop 2.8, ``alpha = 0``) and ``65 target`` (pure) or ``127 target``
        (approximate) (Thm 3.5 at ``paper_accuracy``).
    conditions : tuple of (str, bool)
        ``ratio^2 <= L/(R beta)`` (Thm 3.5's hypothesis) and ``L <= 2 beta R`` (true for every
        ``F`` in ``J`` with a minimizer in ``B(0, R)``; a false claim shows up here).
    """

    n: int | None
    d: int
    epsilon: float
    delta: float
    lipschitz: float
    radius: float
    smoothness: float
    erm: bool
    ratio: float
    regularization: float
    paper_regularization: float
    sensitivity: float
    accuracy: float
    paper_accuracy: float
    inflated_sensitivity: float
    value: float
    target: float
    conceptual_paper_value: float
    theorem_value: float
    conditions: tuple[tuple[str, bool], ...]
    reference: str
    assumptions: tuple[str, ...]
    errata: tuple[str, ...]

    @property
    def hypotheses_hold(self) -> bool:
        """Whether every numeric hypothesis of Theorem 3.5 holds."""
        return all(ok for _, ok in self.conditions)


def smooth_convex_bound(
    *,
    d: int,
    epsilon: float,
    lipschitz: float,
    radius: float,
    smoothness: float,
    delta: float = 0.0,
    n: int | None = None,
    accuracy: float | None = None,
    regularization: float | None = None,
) -> SmoothConvexBound:
    """002 Theorem 3.5 (L883-925): Algorithm 6 without projection on a smooth convex ``F``.

    Parameters
    ----------
    d : int
        Dimension.
    epsilon, delta : float
        The guarantee.
    lipschitz, radius, smoothness : float
        ``L`` (on ``B(0, R)``), ``R`` and ``beta``.
    n : int, optional
        Sample size of an ERM objective; None for a general ``F``.
    accuracy : float, optional
        ``alpha >= 0`` (default Thm 3.5's; ``0`` is Prop 2.8's conceptual algorithm).
    regularization : float, optional
        ``lambda > 0`` (default Thm 3.5's).

    Returns
    -------
    SmoothConvexBound

    Notes
    -----
    Proof C.3.1 (L1929-1961): ``E F(w_T + z) - F(w*) <= lambda R^2/2 + ((beta + lambda)/2)
    E||z||^2 + alpha``, valid for any ``lambda > 0`` when ``||w*(X)|| <= R``. ``value``
    evaluates it with the exact moments of Lemma B.3. The printed constants 65 and 127 need
    the hypothesis ``ratio^2 <= L/(R beta)``. The proof's ``delta > 0`` line writes
    ``E||z||^2 <= d s_delta Delta'^2/epsilon^2`` (``s_delta`` not squared, no 1/2); ``value``
    uses ``d sigma^2``. Cor 3.7(a) prints the first branch of the min as ``alpha`` (digest
    Section 2.8); the default here is the min, as in the theorem.
    """
    owner = "smooth_convex_bound"
    d = _check_count(d, "d", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    dl = _check_delta_002(delta, owner)
    L = check_positive(lipschitz, "lipschitz", owner)
    R = check_positive(radius, "radius", owner)
    beta = check_positive(smoothness, "smoothness", owner)
    nn = None if n is None else _check_count(n, "n", owner)
    m = 1.0 if nn is None else 1.0 / nn
    ratio = m * _base_ratio(d, eps, dl)
    target = beta ** (1 / 3) * L ** (2 / 3) * R ** (4 / 3) * ratio ** (2 / 3)
    paper_lam = (beta * L * L / (R * R)) ** (1 / 3) * ratio ** (2 / 3)
    lam = (
        paper_lam
        if regularization is None
        else check_positive(regularization, "regularization", owner)
    )
    first = L ** (4 / 3) * R ** (2 / 3) * beta ** (-1 / 3) * ratio ** (-2 / 3) * m * m
    paper_alpha = min(first, target)
    alpha = paper_alpha if accuracy is None else _check_accuracy(accuracy, owner)
    Delta = 2.0 * (L + lam * R) * m / lam
    inflated = Delta + 2.0 * math.sqrt(2.0 * alpha / lam)
    _, second = _noise_moments(d, eps, dl, inflated)
    return SmoothConvexBound(
        n=nn,
        d=d,
        epsilon=eps,
        delta=dl,
        lipschitz=L,
        radius=R,
        smoothness=beta,
        erm=nn is not None,
        ratio=ratio,
        regularization=lam,
        paper_regularization=paper_lam,
        sensitivity=Delta,
        accuracy=alpha,
        paper_accuracy=paper_alpha,
        inflated_sensitivity=inflated,
        value=0.5 * lam * R * R + 0.5 * (beta + lam) * second + alpha,
        target=target,
        conceptual_paper_value=48.5 * target,
        theorem_value=(65.0 if dl == 0.0 else 127.0) * target,
        conditions=(
            ("ratio^2 <= L/(R beta)", ratio * ratio <= L / (R * beta)),
            ("L <= 2 beta R", L <= 2.0 * beta * R),
        ),
        reference=(
            "002 Theorem 3.5 (L883-925), proof C.3.1 (L1929-1961); Proposition 2.8; "
            "Algorithm 6 with Prop 3.3"
        ),
        assumptions=(
            "F(., X) convex and beta-smooth on all of R^d, L-Lipschitz on B(0, R), with a "
            "minimizer of norm <= R for every X (class J intersected with M_R)",
            "F_lambda = F + (lambda/2)||w||^2 is minimized to accuracy alpha on every run; the "
            "release w_T + z is not projected (002 Eq. (7))",
            "lambda and alpha are fixed before seeing data (digest P2)",
        ),
        errata=(
            "proof C.3.1 drops the 1/2 of the descent lemma and, for delta > 0, writes s_delta "
            "for s_delta^2/2 in E||z||^2; value uses the exact d sigma^2",
            "002 E13: Cor 3.7(a) prints the first branch of Thm 3.5's alpha; the theorem's min "
            "is used",
        ),
    )


# ----------------------------------------------------------- 002 Propositions 4.1 and 4.2
@dataclass(frozen=True, slots=True, kw_only=True)
class StronglyConvexPopulationBound:
    """002 Proposition 4.1 / Corollary 4.1 (class ``F``) or 4.2 / 4.2 (class ``H``).

    Expected excess population loss of output perturbation run on the empirical loss of ``n``
    i.i.d. samples, by uniform stability (Lemma 4.1 [BE02], Lemma 4.2) plus the empirical
    excess risk.

    Attributes
    ----------
    smoothness, condition_number : float or None
        ``beta`` and ``kappa`` (None for the non-smooth class of Prop 4.1).
    projected : bool
        Whether the release is projected onto ``B(0, R)`` (Prop 4.1, Eq. (3)) or not
        (Prop 4.2, Eq. (2)).
    ratio : float
        ``d/(epsilon n)`` or ``sqrt(d) s_delta/(epsilon n)``.
    sensitivity : float
        ``2 L/(mu n)`` (Prop 2.2).
    accuracy, paper_accuracy : float
        ``alpha`` (0 is the conceptual algorithm of the Proposition) and the Corollary's
        ``alpha``: ``(L^2/(mu n)) min{1/n, rho}`` (Cor 4.1) or ``(L^2/(mu n^2)) min{kappa
        rho^2, 1}`` (Cor 4.2), ``rho = d/epsilon`` or ``sqrt(d) s_delta/epsilon``.
    inflated_sensitivity : float
        ``Delta' = Delta + 2 sqrt(2 alpha/mu)``.
    stability_term : float
        The generalization gap bound. Projected: ``L Delta'`` (Lemma 4.2, proof D.1.3).
        Unprojected: ``(L + beta E||z||) Delta' + beta Delta'^2/2`` [derived, see Notes].
    paper_stability_term : float
        ``L Delta'``, as printed for both cases.
    empirical_term : float
        Projected: ``L E||z|| + alpha`` (Prop 2.3 / proof C.1.2). Unprojected: ``(beta/2)
        E||z||^2 + alpha`` (Prop 2.6 with E4, proof C.1.4). Exact noise moments at ``Delta'``.
    value : float
        ``stability_term + empirical_term``.
    proposition_value : float
        Prop 4.1: ``(2 L^2/mu)(1/n + ratio)``; Prop 4.2: ``(L^2/mu)(2/n + 4 kappa ratio^2)``.
    corollary_value : float
        Cor 4.1: ``(L^2/mu)(5/n + 9 ratio)`` (pure) or ``6 ratio`` (approximate); Cor 4.2:
        ``(L^2/mu)(5/n + 26 kappa ratio^2)`` or ``13.5 kappa ratio^2``.
    conditions : tuple of (str, bool)
        ``ratio <= 1`` (the Propositions' hypothesis).
    """

    n: int
    d: int
    epsilon: float
    delta: float
    lipschitz: float
    strong_convexity: float
    smoothness: float | None
    condition_number: float | None
    projected: bool
    ratio: float
    sensitivity: float
    accuracy: float
    paper_accuracy: float
    inflated_sensitivity: float
    stability_term: float
    paper_stability_term: float
    empirical_term: float
    value: float
    proposition_value: float
    corollary_value: float
    conditions: tuple[tuple[str, bool], ...]
    reference: str
    assumptions: tuple[str, ...]
    errata: tuple[str, ...]


_POPULATION_ASSUMPTIONS_002 = (
    "x_1, ..., x_n i.i.d. from D; the empirical loss (1/n) sum_i f(., x_i) is minimized and "
    "perturbed; replace-one neighbors, public n",
    "f(., x) is mu-strongly convex and L-Lipschitz on B(0, R) for every x, with the empirical "
    "and population minimizers in B(0, R)",
    "alpha > 0: the solver's accuracy holds on every run and alpha is fixed in advance "
    "(digest P1, P2); the solver's point lies in B(0, R)",
)


def strongly_convex_population_bound(
    *,
    n: int,
    d: int,
    epsilon: float,
    lipschitz: float,
    strong_convexity: float,
    delta: float = 0.0,
    accuracy: float = 0.0,
) -> StronglyConvexPopulationBound:
    """002 Proposition 4.1 (L1036-1039) and Corollary 4.1 (L1051-1056): class ``F``, projected.

    Parameters
    ----------
    n, d : int
        Sample size and dimension.
    epsilon, delta : float
        The guarantee.
    lipschitz, strong_convexity : float
        ``L`` and ``mu`` of every ``f(., x)``.
    accuracy : float, optional
        ``alpha >= 0`` of Algorithm 1 (default 0: the conceptual algorithm of Prop 4.1). Pass
        ``paper_accuracy`` of a first call to evaluate Cor 4.1.

    Notes
    -----
    Proofs D.1.2-D.1.3: excess population loss ``<=`` (stability ``L Delta'``, Lemmas 4.1-4.2)
    + (empirical excess ``L E||z|| + alpha``, Cor 2.1 / Thm 3.1) + (``E min F_hat - F* <=
    0``). ``value`` uses the exact noise moments; the printed Prop 4.1 (constant 2) and Cor 4.1
    (constants 5, 9 and 6) are returned beside it. For ``delta > 0`` Prop 4.1 writes ``2 L^2
    rho/mu`` for the proof's ``sqrt(2) L^2 rho/mu``.
    """
    owner = "strongly_convex_population_bound"
    n = _check_count(n, "n", owner)
    d = _check_count(d, "d", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    dl = _check_delta_002(delta, owner)
    L, mu, _ = _check_strongly_convex(lipschitz, strong_convexity, None, owner)
    alpha = _check_accuracy(accuracy, owner)
    rho = _base_ratio(d, eps, dl)
    ratio = rho / n
    Delta = 2.0 * L / (mu * n)
    inflated = Delta + 2.0 * math.sqrt(2.0 * alpha / mu)
    first, _ = _noise_moments(d, eps, dl, inflated)
    stability = L * inflated
    empirical = L * first + alpha
    k = 9.0 if dl == 0.0 else 6.0
    return StronglyConvexPopulationBound(
        n=n,
        d=d,
        epsilon=eps,
        delta=dl,
        lipschitz=L,
        strong_convexity=mu,
        smoothness=None,
        condition_number=None,
        projected=True,
        ratio=ratio,
        sensitivity=Delta,
        accuracy=alpha,
        paper_accuracy=(L * L / (mu * n)) * min(1.0 / n, rho),
        inflated_sensitivity=inflated,
        stability_term=stability,
        paper_stability_term=stability,
        empirical_term=empirical,
        value=stability + empirical,
        proposition_value=2.0 * L * L / mu * (1.0 / n + ratio),
        corollary_value=L * L / mu * (5.0 / n + k * ratio),
        conditions=(("ratio <= 1", ratio <= 1.0),),
        reference=(
            "002 Proposition 4.1 (L1036-1039), Corollary 4.1 (L1051-1056), Lemma 4.2 "
            "(L1043), proofs D.1.1-D.1.3 (L1965-1997)"
        ),
        assumptions=_POPULATION_ASSUMPTIONS_002
        + ("the release is projected onto B(0, R) (002 Eq. (3))",),
        errata=(
            "Cor 4.1 uses SGD, whose accuracy holds only in expectation (digest P1): use a "
            "solver with a per-run guarantee to keep the privacy proof",
        ),
    )


def smooth_strongly_convex_population_bound(
    *,
    n: int,
    d: int,
    epsilon: float,
    lipschitz: float,
    strong_convexity: float,
    smoothness: float,
    delta: float = 0.0,
    accuracy: float = 0.0,
) -> StronglyConvexPopulationBound:
    """002 Proposition 4.2 (L1066-1072) and Corollary 4.2 (L1076-1084): class ``H``, unprojected.

    Parameters
    ----------
    n, d : int
        Sample size and dimension.
    epsilon, delta : float
        The guarantee.
    lipschitz, strong_convexity, smoothness : float
        ``L``, ``mu``, ``beta`` of every ``f(., x)`` (``beta``-smooth on all of ``R^d``).
    accuracy : float, optional
        ``alpha >= 0`` (default 0: Prop 4.2's conceptual algorithm).

    Notes
    -----
    Proof D.2.1 reuses Prop 4.1's decomposition with the empirical term of Cor 2.2 (here with
    erratum E4 applied: ``(beta/2) E||z||^2``). Its stability step, Lemma 4.2, says the bound
    ``L Delta`` "clearly also holds without projection" (L1971). That needs ``f(., x)`` to be
    ``L``-Lipschitz where the unprojected output lands, i.e. outside ``B(0, R)``, which no
    strongly convex ``f`` is on all of ``R^d``. [derived] With ``u = w(X) + z``, ``u' = w(X') +
    z`` and ``w(X') in B(0, R)``: ``f(u) - f(u') <= ||grad f(u')|| ||u - u'|| + (beta/2)||u -
    u'||^2 <= (L + beta ||z||) Delta' + beta Delta'^2/2``, so the stability term used in
    ``value`` is ``(L + beta E||z||) Delta' + beta Delta'^2/2``. The printed ``L Delta'`` is
    kept as ``paper_stability_term``, and ``proposition_value`` / ``corollary_value`` are the
    printed bounds, which rely on it.
    """
    owner = "smooth_strongly_convex_population_bound"
    n = _check_count(n, "n", owner)
    d = _check_count(d, "d", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    dl = _check_delta_002(delta, owner)
    L, mu, beta = _check_strongly_convex(lipschitz, strong_convexity, smoothness, owner)
    assert beta is not None
    alpha = _check_accuracy(accuracy, owner)
    kappa = beta / mu
    rho = _base_ratio(d, eps, dl)
    ratio = rho / n
    Delta = 2.0 * L / (mu * n)
    inflated = Delta + 2.0 * math.sqrt(2.0 * alpha / mu)
    first, second = _noise_moments(d, eps, dl, inflated)
    stability = (L + beta * first) * inflated + 0.5 * beta * inflated * inflated
    empirical = 0.5 * beta * second + alpha
    k = 26.0 if dl == 0.0 else 13.5
    return StronglyConvexPopulationBound(
        n=n,
        d=d,
        epsilon=eps,
        delta=dl,
        lipschitz=L,
        strong_convexity=mu,
        smoothness=beta,
        condition_number=kappa,
        projected=False,
        ratio=ratio,
        sensitivity=Delta,
        accuracy=alpha,
        paper_accuracy=(L * L / (mu * n * n)) * min(kappa * rho * rho, 1.0),
        inflated_sensitivity=inflated,
        stability_term=stability,
        paper_stability_term=L * inflated,
        empirical_term=empirical,
        value=stability + empirical,
        proposition_value=L * L / mu * (2.0 / n + 4.0 * kappa * ratio * ratio),
        corollary_value=L * L / mu * (5.0 / n + k * kappa * ratio * ratio),
        conditions=(("ratio <= 1", ratio <= 1.0),),
        reference=(
            "002 Proposition 4.2 (L1066-1072), Corollary 4.2 (L1076-1084), Lemma 4.2 "
            "(L1043), proofs D.1.1, D.2.1-D.2.2 (L1965-2007)"
        ),
        assumptions=_POPULATION_ASSUMPTIONS_002
        + (
            "f(., x) is beta-smooth on all of R^d; the empirical minimizer is unconstrained "
            "(grad = 0); the release is not projected (002 Eq. (2))",
        ),
        errata=(
            _ERRATUM_4,
            "Lemma 4.2 (unprojected case, L1971) uses L-Lipschitzness outside B(0, R); "
            "[derived] stability_term adds beta E||z|| Delta' + beta Delta'^2/2",
            "Cor 4.2 uses Katyusha, whose accuracy holds only in expectation (digest P1)",
        ),
    )
