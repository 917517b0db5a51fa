"""Ready-made per-example losses (re-exported from :mod:`dpcvx.modeling.losses`)."""

from dpcvx.modeling.losses import *  # noqa: F401,F403
from dpcvx.modeling.losses import __all__  # noqa: F401
