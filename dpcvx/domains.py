"""Ready-made parameter domains (re-exported from :mod:`dpcvx.modeling.domains`)."""

from dpcvx.modeling.domains import (  # noqa: F401
    box,
    ellipsoid,
    l1_ball,
    l2_ball,
    linf_ball,
    polytope,
    simplex,
)

__all__ = ["box", "ellipsoid", "l1_ball", "l2_ball", "linf_ball", "polytope", "simplex"]
