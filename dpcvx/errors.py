"""The one exception hierarchy of dpcvx.

Every error dpcvx raises derives from :class:`DpcvxError`. Errors about bad input also derive from
:class:`ValueError` so that callers who catch the builtin keep working (as scikit-learn's
``InvalidParameterError`` does). An error raised before noise is drawn means nothing was released
and nothing was spent.
"""

from __future__ import annotations

__all__ = [
    "CertificationError",
    "DataError",
    "DpcvxError",
    "InvalidParameterError",
    "ModelingError",
    "PrivacyBudgetError",
    "LipschitzClaimWarning",
    "PrivacyLeakWarning",
    "SolverError",
]


class DpcvxError(Exception):
    """Base class of every error raised by dpcvx."""


class InvalidParameterError(DpcvxError, ValueError):
    """A public parameter (``epsilon``, ``delta``, ``regularization``, a Lipschitz bound, ...) is
    invalid: wrong type, not finite, or out of its range."""


class ModelingError(DpcvxError, ValueError):
    """The declared problem cannot be handled: the loss is not DCP in the variable or not DPP in
    the data, the domain is empty or unbounded, a parameter has no data, and so on."""


class DataError(ModelingError):
    """The bound data is unusable: NaN or inf, inconsistent numbers of examples, or an array whose
    trailing shape does not match its parameter."""


class CertificationError(DpcvxError, RuntimeError):
    """dpcvx could not certify that a solve meets its accuracy target, even after refinement.
    Nothing is released when this is raised."""


class SolverError(DpcvxError, RuntimeError):
    """A numerical solver failed outright (not installed, crashed, or returned no point)."""


class PrivacyBudgetError(DpcvxError, ValueError):
    """An accountant's remaining budget is too small for the requested release."""


class LipschitzClaimWarning(UserWarning):
    """Some examples' losses could not be shown to be ``L``-Lipschitz on the domain for the
    claimed ``L``. The release stays private (dpcvx enforced the claim by running those
    examples on the ``L``-Lipschitz extension), but the claim was wrong or loose for this data.
    The warning goes to the curator; it is not part of the release."""


class PrivacyLeakWarning(UserWarning):
    """Something is not a privacy violation by itself but deserves a look (for example a public
    bound that was left to default)."""
