"""Fixtures of the certification tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def whole_rounds(monkeypatch):
    """The extension's rounds re-solve their whole program every round, as they do where the
    screened re-solve gives up (:func:`~dpcvx.certification.arrowhead.screened_ipm`): for the
    tests of what the rounds do at the points of those solves. Their cases were found with
    them; a screened re-solve's point differs within the method's tolerance and can take a
    case down another path (in a box, with other balanced duals or face steps, or none)."""
    import dpcvx.certification.solve as solve_module

    monkeypatch.setattr(solve_module, "screened_ipm", lambda *args, **kwargs: None)


@pytest.fixture
def solve_paths(monkeypatch):
    """The ``solver`` of every certified solve run while the test runs (a list, in order):
    which rung certified each solve behind a release."""
    import dpcvx.certification.solve as solve_module

    paths: list = []
    inner = solve_module._certified_solve

    def recording(*args, **kwargs):
        sol = inner(*args, **kwargs)
        paths.append(sol.solver_stats["solver"])
        return sol

    monkeypatch.setattr(solve_module, "_certified_solve", recording)
    return paths
