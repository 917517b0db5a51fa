"""Algorithm 3 (Prop C.5) and Lemma D.5 of paper 000 against independent answers: the digest's
running 1-d instance E1d (``docs/paper000_digest.md`` section 6.10, items 4, 13 and 14), closed
forms, and checks that broken hypotheses are not silently accepted."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcvx.certification.first_order import (
    adaptive_projected_subgradient,
    biased_projected_subgradient,
)
from dpcvx.errors import CertificationError, InvalidParameterError

# E1d: W = [-1, 1], f(w; x, y) = |x w - y|, C = 1, lam = 0.5, w0 = 0; min 207/180 at w* = 1/3
X = np.array([3.0, 0.5, -2.0])
Y = np.array([1.0, 0.2, 4.0])
C, LAM = 1.0, 0.5
OPT = 207.0 / 180.0


def joint_value(u: np.ndarray) -> float:
    """Phi(w, y_1, y_2, y_3) of Lemma 2.7 on E1d."""
    w, y = u[0], u[1:]
    return float(np.mean(np.abs(X * y - Y) + C * np.abs(w - y)) + LAM / 2 * w * w)


def joint_subgradient(u: np.ndarray) -> np.ndarray:
    w, y = u[0], u[1:]
    s = np.sign(w - y)
    g_w = C * np.mean(s) + LAM * w
    g_y = (X * np.sign(X * y - Y) - C * s) / 3
    return np.concatenate([[g_w], g_y])


def clip_box(u: np.ndarray, xi: float) -> np.ndarray:
    return np.clip(u, -1.0, 1.0)


def in_box(u: np.ndarray) -> bool:
    return bool(np.all(np.abs(u) <= 1.0))


def extension_objective(w: float) -> float:
    """The closed form of (1/3) sum_i f_C(w, z_i) + (lam/2) w^2 on E1d (digest 6.10 item 4)."""
    return (abs(w - 1 / 3) + abs(0.5 * w - 0.2) + w + 3) / 3 + LAM / 2 * w * w


def extension_subgradient(w: float) -> float:
    return (np.sign(w - 1 / 3) + 0.5 * np.sign(0.5 * w - 0.2) + 1.0) / 3 + LAM * w


# --------------------------------------------------------------------------- Algorithm 3
def test_closed_forms_of_E1d():
    grid = np.linspace(-1, 1, 2001)
    vals = np.array([extension_objective(w) for w in grid])
    assert grid[np.argmin(vals)] == pytest.approx(0.333, abs=1e-12)
    assert 0.0 <= vals.min() - OPT <= 1e-6  # 1.15000003 at 0.333
    assert extension_objective(1 / 3) == pytest.approx(OPT, abs=1e-15)
    # the joint program's value at (1/3, y*) equals the extension's minimum (Lemma 2.7)
    assert joint_value(np.array([1 / 3, 1 / 3, 1 / 3, -1.0])) == pytest.approx(OPT, abs=1e-15)


def test_algorithm3_on_the_E1d_joint_program():
    alpha, D_K = 0.1, 4.0  # K = [-1, 1]^4, D_K = D sqrt(m + 1) = 2 * 2
    result = adaptive_projected_subgradient(
        joint_subgradient, clip_box, -np.ones(4), D_K, alpha, 10**6, contains=in_box
    )
    # Prop C.5: at most ceil((3 D L / alpha)^2) iterations with L <= 2.3 on K
    assert result.iterations <= math.ceil((3 * D_K * 2.3 / alpha) ** 2) == 76176
    assert result.stop == "stopping_rule"
    assert in_box(result.point)
    excess = joint_value(result.point) - OPT
    assert -1e-12 <= excess <= result.certified_gap
    assert excess <= 3 * alpha / 4
    # the certificate is Prop C.5's bound (plus rounding allowances far below it)
    S, T = result.stats["S"], result.iterations
    assert 3 * D_K * math.sqrt(S) <= alpha * T  # the stopping rule held
    assert result.stats["prop_c5_bound"] == pytest.approx(
        3 * D_K * math.sqrt(S) / (2 * T) + alpha / 4, rel=1e-15
    )
    assert result.stats["prop_c5_bound"] <= result.certified_gap <= 3 * alpha / 4 * (1 + 1e-6)
    # the w-part is a certified point of the extension objective (Lemma 2.7)
    assert extension_objective(result.point[0]) - OPT <= result.certified_gap


def test_algorithm3_zero_subgradient_returns_the_iterate():
    x1 = np.array([0.25, -0.5])

    def sub(x):
        return x - x1  # Phi = ||x - x1||^2 / 2, minimized at x1

    result = adaptive_projected_subgradient(sub, clip_box, x1, 2 * math.sqrt(2), 0.1, 10)
    assert result.stop == "zero_subgradient" and result.iterations == 1
    assert result.certified_gap == 0.0
    np.testing.assert_array_equal(result.point, x1)


def test_algorithm3_max_iter_raises():
    with pytest.raises(CertificationError, match="max_iter"):
        adaptive_projected_subgradient(joint_subgradient, clip_box, -np.ones(4), 4.0, 0.1, 100)


def test_a_too_small_diameter_is_detected():
    with pytest.raises(CertificationError, match="diameter"):
        adaptive_projected_subgradient(joint_subgradient, clip_box, -np.ones(4), 0.5, 0.1, 10**5)


@pytest.mark.parametrize(
    "project",
    [
        lambda y, xi: 0.5 * np.clip(y, -1, 1),  # lands in K, is not a projection
        lambda y, xi: 0.99 * np.clip(y, -1, 1),
        # a point of K far more than xi away from the projection
        lambda y, xi: np.clip(np.clip(y, -1, 1) - 100 * xi * np.sign(np.clip(y, -1, 1)), -1, 1),
    ],
)
def test_a_non_projection_is_detected(project):
    with pytest.raises(CertificationError, match="projection"):
        adaptive_projected_subgradient(joint_subgradient, project, np.zeros(4), 4.0, 0.1, 10**5)


def test_a_projection_outside_K_is_detected_with_a_membership_test():
    with pytest.raises(CertificationError, match="outside K"):
        adaptive_projected_subgradient(
            joint_subgradient, lambda y, xi: y, np.zeros(4), 4.0, 0.1, 10**5, contains=in_box
        )


def test_non_finite_subgradients_raise():
    with pytest.raises(CertificationError, match="finite"):
        adaptive_projected_subgradient(
            lambda x: np.full(2, np.nan), clip_box, np.zeros(2), 3.0, 0.1, 10
        )
    with pytest.raises(CertificationError, match="shape"):
        adaptive_projected_subgradient(lambda x: np.ones(3), clip_box, np.zeros(2), 3.0, 0.1, 10)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"alpha": 0.0}, "alpha"),
        ({"diameter": -1.0}, "diameter"),
        ({"max_iter": 0}, "max_iter"),
        ({"x1": np.full(4, 2.0)}, "x1"),
    ],
)
def test_algorithm3_rejects_bad_input(kwargs, match):
    args = {
        "subgradient": joint_subgradient,
        "project": clip_box,
        "x1": np.zeros(4),
        "diameter": 4.0,
        "alpha": 0.1,
        "max_iter": 10,
        "contains": in_box,
    }
    args.update(kwargs)
    with pytest.raises(InvalidParameterError, match=match):
        adaptive_projected_subgradient(**args)


# --------------------------------------------------------------------------- Lemma D.5
def exact_oracle(v: np.ndarray) -> tuple[np.ndarray, float]:
    return np.array([extension_subgradient(v[0])]), 0.0


def test_lemma_d5_on_E1d_with_the_exact_oracle():
    alpha, D, L = 0.05, 2.0, C + LAM * 1.0  # max |w - w0| = 1 on W
    result = biased_projected_subgradient(exact_oracle, clip_box, [-1.0], D, L, alpha)
    assert result.iterations == math.ceil((4 * D * L / alpha) ** 2) == 57600
    excess = extension_objective(result.point[0]) - OPT
    assert -1e-12 <= excess <= result.certified_gap <= alpha
    eta = D / (L * math.sqrt(57600))
    xi = min(D, alpha * eta / (6 * D))
    assert result.stats["eta"] == pytest.approx(eta, rel=1e-15)
    assert result.stats["xi"] == pytest.approx(xi, rel=1e-15)
    # the a-posteriori bound's terms, as derived from the proof of Lemma D.5
    assert result.stats["distance"] == pytest.approx(D * D / (2 * eta * 57600), rel=1e-12)
    assert result.stats["projection"] == pytest.approx(
        D * xi / eta + xi * xi / (2 * eta), rel=1e-12
    )
    assert result.stats["steps"] <= eta * L * L / 2
    assert result.stats["bias"] == 0.0


def test_lemma_d5_with_an_oracle_biased_by_alpha_over_4():
    alpha, D, L = 0.05, 2.0, C + LAM * 1.0
    shift = alpha / 12  # the true bias at a shifted point is <= (L + L) |shift| = alpha / 4

    def biased(v):
        w = float(v[0])
        w_shift = float(np.clip(w + shift, -1, 1))
        g = extension_subgradient(w_shift)
        true_bias = extension_objective(w) - extension_objective(w_shift) - g * (w - w_shift)
        assert -1e-12 <= true_bias <= alpha / 4 + 1e-12  # a valid B = alpha/4 minorant
        return np.array([g]), alpha / 4

    result = biased_projected_subgradient(biased, clip_box, [1.0], D, L, alpha)
    assert result.stats["bias"] == pytest.approx(alpha / 4)
    excess = extension_objective(result.point[0]) - OPT
    assert -1e-12 <= excess <= result.certified_gap <= alpha


def test_lemma_d5_bound_above_alpha_raises():
    with pytest.raises(CertificationError, match="Lemma D.5"):
        biased_projected_subgradient(exact_oracle, clip_box, [-1.0], 2.0, 1.5, 0.05, iterations=10)
    # a bias above the budget is charged, not hidden
    with pytest.raises(CertificationError, match="bias"):
        biased_projected_subgradient(
            lambda v: (exact_oracle(v)[0], 0.05), clip_box, [-1.0], 2.0, 1.5, 0.05, iterations=400
        )


def test_lemma_d5_norm_above_L_raises():
    with pytest.raises(CertificationError, match="lipschitz"):
        biased_projected_subgradient(
            lambda v: (np.array([10.0]), 0.0), clip_box, [0.0], 2.0, 1.5, 0.5
        )


@pytest.mark.parametrize("B", [-1.0, math.nan])
def test_lemma_d5_bias_must_be_nonnegative(B):
    with pytest.raises(CertificationError, match="bias"):
        biased_projected_subgradient(lambda v: (np.array([0.1]), B), clip_box, [0.0], 2.0, 1.5, 0.5)


def test_lemma_d5_detects_a_non_projection():
    with pytest.raises(CertificationError, match="projection"):
        biased_projected_subgradient(
            exact_oracle, lambda y, xi: 0.5 * np.clip(y, -1, 1), [0.9], 2.0, 1.5, 0.05
        )
