"""Time of tilted ERM and max-loss releases (``TiltedOutputPerturbation``, paper 002, Section
5.1) on their smooth paths, next to the conic program they replace and to one plain
output-perturbation release on the same data, side by side in one run.

    python benchmarks/bench_tilted.py [--smoke] [--n 1000,10000,100000] [--d 20]
        [--losses logistic,huber,square,squared_hinge,hinge,absolute] [--tilts 1,inf]
        [--domains ball,box] [--conic-max 10000] [--repeat 3] [--scale 1]

Data: Student-t(4) features scaled by ``1/sqrt(2d)`` and rows clipped to norm one (heavy
tails: many examples steeper than ``lipschitz = 1`` on W), labels from a random linear model
(signs for the classification losses), seeded. Domains: the ball ``||w|| <= 1`` and the box
``|w_j| <= 0.3`` (where copies of the Lipschitz extension leave W; with ``--scale 3`` the rows
are three times longer, so the piecewise losses' copies leave W too). Each release has
``lipschitz = 1``, ``regularization = 0.1``, ``epsilon = 1``. Times are medians of ``--repeat``
runs, each on a freshly built problem. The conic column withholds the smooth path (the
conic program alone, as before it existed) and runs up to ``--conic-max`` examples only (at
n = 1e5 it takes minutes). ``plain`` is one ``OutputPerturbation`` release of the same loss.
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

import cvxpy as cp
import numpy as np

import dpcvx
from dpcvx.certification import tilted as tilted_module

LOSSES = {
    "logistic": lambda x, w, y: cp.logistic(-y * (x @ w)),
    "huber": lambda x, w, y: cp.huber(x @ w - y, 0.5),
    "square": lambda x, w, y: cp.square(x @ w - y),
    "squared_hinge": lambda x, w, y: cp.power(cp.maximum(1 - y * (x @ w), 0), 2),
    "hinge": lambda x, w, y: cp.pos(1 - y * (x @ w)),
    "absolute": lambda x, w, y: cp.abs(x @ w - y),
}
CLASSIFICATION = ("logistic", "squared_hinge", "hinge")


def data(
    n: int, d: int, seed: int = 0, scale: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_t(4, size=(n, d)) / math.sqrt(2 * d)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    X *= scale
    beta = rng.normal(size=d) / math.sqrt(d)
    signs = np.where(X @ beta + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    values = np.clip(X @ beta + 0.2 * rng.normal(size=n), -1, 1)
    return X, signs, values


def problem(loss: str, domain: str, X: np.ndarray, labels: np.ndarray) -> dpcvx.Problem:
    d = X.shape[1]
    w, x, y = cp.Variable(d), cp.Parameter(d), cp.Parameter()
    cons = [cp.norm(w) <= 1] if domain == "ball" else [cp.abs(w) <= 0.3]
    return dpcvx.Problem(LOSSES[loss](x, w, y), w, {x: X, y: labels}, cons)


def timed(build, mechanism, repeat: int) -> tuple[float, bool]:
    """The median time of ``repeat`` releases (each on a fresh problem) and whether all ran."""
    times, ok = [], True
    for rep in range(repeat):
        prob = build()
        start = time.perf_counter()
        try:
            out = prob.solve_private(mechanism, epsilon=1.0, rng=np.random.default_rng(rep))
            ok &= bool(np.all(np.isfinite(out.w)))
        except dpcvx.DpcvxError:
            ok = False
        times.append(time.perf_counter() - start)
    return float(np.median(times)), ok


def conic_only(build, mechanism, repeat: int) -> tuple[float, bool]:
    """:func:`timed` with the smooth path withheld (the conic program alone)."""
    original = tilted_module._smooth_tilted
    tilted_module._smooth_tilted = lambda *args, **kwargs: None
    try:
        return timed(build, mechanism, repeat)
    finally:
        tilted_module._smooth_tilted = original


def _quiet_claims() -> None:
    """The steep rows are the point here: the releases' warnings that some examples are not
    ``lipschitz``-Lipschitz (which dpcvx shows whatever the filters) are not printed."""
    show = warnings.showwarning

    def quiet(message, category, *args, **kwargs):
        if not issubclass(category, dpcvx.LipschitzClaimWarning):
            show(message, category, *args, **kwargs)

    warnings.showwarning = quiet


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="n = 200, d = 5, one repeat")
    parser.add_argument("--n", default="1000,10000,100000")
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--losses", default=",".join(LOSSES))
    parser.add_argument("--tilts", default="1,inf")
    parser.add_argument("--domains", default="ball,box")
    parser.add_argument("--conic-max", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="rows times this after clipping (3: the piecewise losses' copies leave W)",
    )
    args = parser.parse_args(argv)
    _quiet_claims()
    sizes = [int(float(v)) for v in args.n.split(",")]
    d, repeat = args.d, args.repeat
    losses = args.losses.split(",")
    if args.smoke:
        sizes, d, repeat, losses = [200], 5, 1, ["logistic", "squared_hinge", "hinge"]
    tilts = [float(t) for t in args.tilts.split(",")]
    header = (
        f"{'n':>8} {'loss':>14} {'domain':>6} {'tilt':>5} {'smooth s':>9} {'conic s':>9} "
        f"{'conic/smooth':>12} {'plain s':>8} {'tilted/plain':>12}"
    )
    print(header)
    failures = 0
    for n in sizes:
        X, signs, values = data(n, d, scale=args.scale)
        for loss in losses:
            labels = signs if loss in CLASSIFICATION else values
            for domain in args.domains.split(","):

                def build(loss=loss, domain=domain, labels=labels, X=X):
                    return problem(loss, domain, X, labels)

                plain_mech = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=0.1)
                plain, plain_ok = timed(build, plain_mech, repeat)
                for tilt in tilts:
                    mech = dpcvx.TiltedOutputPerturbation(
                        lipschitz=1.0, regularization=0.1, tilt=tilt
                    )
                    smooth, ok = timed(build, mech, repeat)
                    conic, conic_ok = (math.nan, True)
                    if n <= args.conic_max:
                        conic, conic_ok = conic_only(build, mech, repeat)
                    failures += (not ok) + (not conic_ok) + (not plain_ok)
                    mark = "" if ok and conic_ok else "  (not released)"
                    print(
                        f"{n:>8} {loss:>14} {domain:>6} {tilt:>5g} {smooth:>9.3f} "
                        f"{conic:>9.3f} {conic / smooth:>12.1f} {plain:>8.3f} "
                        f"{smooth / plain:>12.2f}{mark}",
                        flush=True,
                    )
    print(f"releases that failed: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
