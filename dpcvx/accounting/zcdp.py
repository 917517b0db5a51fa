"""Zero-concentrated DP conversions (see :mod:`dpcvx._zcdp`, where they live so that
mechanisms can plan in zCDP without importing the accounting stage)."""

from dpcvx._zcdp import dp_to_zcdp, gaussian_to_zcdp, pure_to_zcdp, zcdp_to_dp

__all__ = ["dp_to_zcdp", "gaussian_to_zcdp", "pure_to_zcdp", "zcdp_to_dp"]
