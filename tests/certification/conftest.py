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
