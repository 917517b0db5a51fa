"""Piecewise-linear losses smoothed for Newton's method on objectives that are not sums.

A loss whose every term is ``weight * max_j (a_j^T w + b_j)`` elementwise (hinge, absolute,
pinball, epsilon-insensitive: :class:`~dpcvx.certification.arrowhead.PiecewiseModel`) is
replaced by its log-sum-exp smoothing at temperature ``mu``,

    max_j v_j  <=  mu log sum_j exp(v_j / mu)  <=  max_j v_j + mu log m,

whose per-example values, gradients and Hessians (a weighted covariance of the pieces'
slopes under ``p = softmax(v / mu)``, over ``mu``) a tilted sum
(:class:`~dpcvx.modeling.smooth.TiltedModel`) needs. Only the solver's problem changes: the
certificate judges the user's loss with the multipliers ``p`` (simplex weights on the pieces,
as the arrowhead method's), at a Fenchel-Young cost of at most ``mu log m`` per element.
"""

from __future__ import annotations

import numpy as np

from dpcvx.certification.arrowhead import PiecewiseModel, _Term
from dpcvx.modeling.smooth import gram


class SmoothedPieces:
    """The smoothed per-example losses of ``model`` (one without affine terms apart from its
    pieces: ``model.whole``) at temperature ``mu``: ``values``, ``gradients`` and the weighted
    ``hessian`` of :class:`~dpcvx.modeling.smooth.SmoothModel`, and the certificate's
    ``multipliers``."""

    def __init__(self, model: PiecewiseModel, mu: float) -> None:
        self.model, self.mu = model, float(mu)
        self.n, self.d = model.n, model.d
        self._at: tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]] | None = None

    def _state(self, w: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per term, every element's smoothed value ``mu log sum_j exp(v_j / mu)`` and the
        softmax weights of its pieces at ``w``, from one exponential of the pieces (kept for
        the last ``w``: Newton's method asks for the values, then the gradients, at each
        point)."""
        if self._at is not None and np.array_equal(self._at[0], w):
            return self._at[1]
        out = []
        for term in self.model.terms:
            V = self._pieces(term, w)
            top = V.max(axis=1)
            E = np.exp((V - top[:, None]) / self.mu)
            total = E.sum(axis=1)
            out.append((top + self.mu * np.log(total), E / total[:, None]))
        self._at = (np.array(w, float, copy=True), out)
        return out

    def _pieces(self, term: _Term, w: np.ndarray) -> np.ndarray:
        """``(N, m)``: every element's pieces at ``w``."""
        return term.apply(w) + np.stack(term.b, axis=1)

    @staticmethod
    def _coefs(term: _Term) -> np.ndarray:
        """The multiples of ``term.base`` of every piece: ``(N, m)`` or ``(m,)``."""
        return term.row_coefs if term.row_coefs is not None else np.asarray(term.coefs)

    def _slopes(self, term: _Term, P: np.ndarray) -> np.ndarray:
        """``(N, d)``: ``sum_j P_j a_j`` per element."""
        if term.base is not None:
            mix = np.sum(P * np.broadcast_to(self._coefs(term), P.shape), axis=1)
            return mix[:, None] * term.base
        out = np.zeros((P.shape[0], self.d))
        for j, A in enumerate(term.A):
            if A is not None:
                out += P[:, j, None] * A
        return out

    def _per_example(self, term: _Term, per_element: np.ndarray) -> np.ndarray:
        """Each example's sum over its elements, times its weight (``c n``)."""
        k = per_element.shape[0] // self.n
        summed = per_element.reshape((self.n, k) + per_element.shape[1:]).sum(axis=1)
        return term.c * self.n * summed

    def values(self, w: np.ndarray) -> np.ndarray:
        out = np.zeros(self.n)
        for term, (value, _) in zip(self.model.terms, self._state(w)):
            out += self._per_example(term, value)
        return out

    def weights(self, w: np.ndarray) -> list[np.ndarray]:
        """Per term, ``(N, m)``: the softmax weights of every element's pieces at ``w``."""
        return [P for _, P in self._state(w)]

    def gradients(self, w: np.ndarray) -> np.ndarray:
        out = np.zeros((self.n, self.d))
        for term, P in zip(self.model.terms, self.weights(w)):
            out += self._per_example(term, self._slopes(term, P))
        return out

    def hessian(self, w: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        """``sum_i weights_i hess f_i`` (the mean without ``weights``): per element,
        ``sum_j P_j (a_j - abar)(a_j - abar)^T / mu``."""
        per = np.full(self.n, 1.0 / self.n) if weights is None else np.asarray(weights, float)
        H = np.zeros((self.d, self.d))
        for term, P in zip(self.model.terms, self.weights(w)):
            k = P.shape[0] // self.n
            scale = np.repeat(per * term.c * self.n, k) / self.mu
            if term.base is not None:
                coefs = np.broadcast_to(self._coefs(term), P.shape)
                centred = coefs - np.sum(P * coefs, axis=1)[:, None]
                var = np.sum(P * centred * centred, axis=1)
                H += gram(term.base, scale * var)
                continue
            abar = self._slopes(term, P)
            for j, A in enumerate(term.A):
                diff = -abar if A is None else A - abar
                H += gram(diff, scale * P[:, j])
        return H

    def multipliers(self, w: np.ndarray) -> list:
        """The certificate's multipliers at ``w`` (the pieces' softmax weights, as
        :meth:`~dpcvx.certification.arrowhead.PiecewiseModel.multipliers` takes the arrowhead
        method's)."""
        return self.model.multipliers(
            [term.c * P for term, P in zip(self.model.terms, self.weights(w))]
        )
