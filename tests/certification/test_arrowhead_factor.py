"""The arrowhead method's direct LAPACK Cholesky calls match scipy's wrappers bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import cho_factor, cho_solve

from dpcvx.certification.arrowhead import _cho_factor, _cho_solve


@pytest.mark.parametrize("d", [1, 5, 20, 100])
def test_factor_and_solve_match_scipy(d):
    rng = np.random.default_rng(d)
    A = rng.normal(size=(3 * d, d))
    H = 0.01 * np.eye(d) + A.T @ A
    b = rng.normal(size=d)
    c = _cho_factor(H)
    assert np.array_equal(c, cho_factor(H)[0])
    assert np.array_equal(_cho_solve(c, b), cho_solve(cho_factor(H), b))


def test_errors_match_scipy():
    with pytest.raises(np.linalg.LinAlgError):
        _cho_factor(-np.eye(3))
    with pytest.raises(ValueError):
        _cho_factor(np.full((2, 2), np.nan))
    with pytest.raises(ValueError):
        _cho_solve(np.eye(2), np.array([1.0, np.inf]))
