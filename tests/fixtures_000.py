"""The hard instances of paper 000's lower bound (Theorem 4.1 / G.6) as test fixtures.

Line numbers ``L...`` refer to ``shared/papers/000_f960bd11b787d6d9.txt`` (Appendix G, L2414-2744).

Every instance is linear SCO on a ball: ``f(w, z) = <z, w>`` on ``W = B(0, D/2)`` (L2428-2434),
so ``grad f(w, z) = z`` for every ``w``, ``sup_w ||grad f(w, z)|| = ||z||``, the population risk is
``F_P(w) = <mu_P, w>``, its minimizer is ``-(D/2) mu_P/||mu_P||`` and ``inf_W F_P = -(D/2)
||mu_P||`` (proof of Lemma G.1, L2489-2491). A distribution is a finite list of atoms with
probabilities, so every moment and the population risk are exact sums.

- :func:`bounded_pair`: ``P_+`` and ``P_-`` on ``{+-G_2 e_1}`` with ``P_+(G_2 e_1) = (1 + r)/2``
  and ``P_-(G_2 e_1) = (1 - r)/2`` (proof of Prop G.2, L2514-2516), members of ``P^bdd(G_2)``
  (L2450).
- :func:`cube_packing`: ``V = {-1, +1}^d / sqrt(d)``, a 1/2-packing of the unit ball with
  ``|V| = 2^d`` (the pairwise distance is at least ``2/sqrt(d) >= 1/2`` for ``d <= 16``).
- :func:`packing_probability`: ``p = min{log((|V| - 1)/(4 e zeta))/(n epsilon), 1}`` (L2597).
- :func:`packing_instance`: ``P_nu = (1 - p) delta_0 + p delta_{a nu}``, ``a = G_k p^(-1/k)``
  (L2458-2468, L2597-2601), a member of ``P^pack_k(G_k; V, p)``.

[derived] :func:`packing_probability` rejects ``|V| - 1 <= 4 e zeta`` (for instance ``d = 1``
and ``zeta >= 1/(4e)``): the printed ``p`` is then not positive, so ``P_nu`` is not a
distribution; Prop G.4's proof needs ``|V| - 1 > 4 e zeta``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from dpcvx.errors import InvalidParameterError


@dataclass(frozen=True, slots=True, kw_only=True)
class LinearInstance:
    """A finitely supported distribution ``P`` for the linear loss ``<z, w>`` on ``B(0, D/2)``."""

    atoms: np.ndarray  # (s, d): the support points z
    probabilities: np.ndarray  # (s,): their probabilities, summing to 1
    diameter: float  # D; the domain is the ball of radius D/2 centred at 0
    name: str

    @property
    def d(self) -> int:
        return int(self.atoms.shape[1])

    @property
    def mean(self) -> np.ndarray:
        return self.probabilities @ self.atoms

    def moment(self, j: float) -> float:
        """``E ||z||^j = E[sup_w ||grad f(w, z)||^j]`` (the ``G_j^j`` of 000 eq. (3))."""
        return float(self.probabilities @ np.linalg.norm(self.atoms, axis=1) ** j)

    def risk(self, w: np.ndarray) -> float:
        """``F_P(w) = <mu_P, w>``."""
        return float(self.mean @ np.asarray(w, dtype=float))

    @property
    def minimizer(self) -> np.ndarray:
        mu = self.mean
        return -(self.diameter / 2) * mu / np.linalg.norm(mu)

    @property
    def optimal_risk(self) -> float:
        return -(self.diameter / 2) * float(np.linalg.norm(self.mean))

    def excess_risk(self, w: np.ndarray) -> float:
        return self.risk(w) - self.optimal_risk

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` i.i.d. draws, as an ``(n, d)`` data array."""
        idx = rng.choice(len(self.probabilities), size=n, p=self.probabilities)
        return self.atoms[idx]


def bounded_pair(
    *, d: int, G2: float, r: float, diameter: float = 1.0
) -> tuple[LinearInstance, LinearInstance]:
    """``(P_+, P_-)`` of the proof of Prop G.2 (L2514-2516), ``0 < r <= 1/2``."""
    if not (isinstance(d, int) and d >= 1 and G2 > 0 and 0 < r <= 0.5 and diameter > 0):
        raise InvalidParameterError("bounded_pair needs d >= 1, G2 > 0, 0 < r <= 1/2, D > 0.")
    e1 = np.zeros(d)
    e1[0] = G2
    atoms = np.stack([e1, -e1])
    plus = LinearInstance(
        atoms=atoms,
        probabilities=np.array([(1 + r) / 2, (1 - r) / 2]),
        diameter=diameter,
        name="P_+",
    )
    minus = LinearInstance(
        atoms=atoms,
        probabilities=np.array([(1 - r) / 2, (1 + r) / 2]),
        diameter=diameter,
        name="P_-",
    )
    return plus, minus


def cube_packing(d: int) -> np.ndarray:
    """``{-1, +1}^d / sqrt(d)``: ``2^d`` unit vectors, pairwise at distance ``>= 2/sqrt(d)``."""
    if not (isinstance(d, int) and 1 <= d <= 16):
        raise InvalidParameterError(
            f"cube_packing is a 1/2-packing only for 1 <= d <= 16 (2/sqrt(d) >= 1/2). Got {d!r}."
        )
    return np.array(list(itertools.product((-1.0, 1.0), repeat=d))) / math.sqrt(d)


def packing_probability(*, n: int, epsilon: float, zeta: float, size: int) -> float:
    """``p`` of the proof of Prop G.4 (L2597) for a packing of ``size`` points."""
    if not (n >= 1 and 0 < epsilon <= 1 and 0 < zeta <= 0.25 and size >= 2):
        raise InvalidParameterError(
            "packing_probability needs n >= 1, 0 < eps <= 1, "
            "0 < zeta <= 1/4 and a packing of at least 2 points."
        )
    if size - 1 <= 4 * math.e * zeta:
        raise InvalidParameterError(
            f"p = log((|V|-1)/(4 e zeta))/(n eps) is not positive for |V| = {size}, "
            f"zeta = {zeta!r}: Prop G.4 needs |V| - 1 > 4 e zeta."
        )
    return min(math.log((size - 1) / (4 * math.e * zeta)) / (n * epsilon), 1.0)


def packing_instance(
    *, nu: np.ndarray, Gk: float, k: float, p: float, diameter: float = 1.0
) -> LinearInstance:
    """``P_nu = (1 - p) delta_0 + p delta_{a nu}`` with ``a = G_k p^(-1/k)`` (L2597-2601)."""
    nu = np.asarray(nu, dtype=float)
    if not (nu.ndim == 1 and np.linalg.norm(nu) <= 1 + 1e-12 and Gk > 0 and k >= 2 and 0 < p <= 1):
        raise InvalidParameterError(
            "packing_instance needs ||nu|| <= 1, G_k > 0, k >= 2 and 0 < p <= 1."
        )
    a = Gk * p ** (-1.0 / k)
    atoms = np.stack([np.zeros_like(nu), a * nu])
    probs = np.array([1 - p, p]) if p < 1 else np.array([0.0, 1.0])
    return LinearInstance(atoms=atoms, probabilities=probs, diameter=diameter, name="P_nu")
