"""The empirical privacy audit's statistics, now part of the library (:mod:`dpcvx.audit`).

Re-exported here so that the mechanism tests keep importing them from ``tests.audit_tools``.
"""

from __future__ import annotations

from dpcvx.audit import clopper_pearson, epsilon_lower_bound, threshold_tests

__all__ = ["clopper_pearson", "epsilon_lower_bound", "threshold_tests"]
