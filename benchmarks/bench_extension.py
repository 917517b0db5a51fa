"""Time of the certified Lipschitz-extension ERM (paper 000, Lemma 2.7) and of the whole
Localized Double Output Perturbation vs the certified plain ERM on the same data, side by side
in one run.

    python benchmarks/bench_extension.py [--n 1000,10000,40000] [--d 20] [--C 1.0]
        [--lam 0.01] [--radius 1.0] [--box B] [--loss hinge] [--repeat 3] [--no-ldop]
        [--accuracy A]

Data: Student-t(5) features scaled by sqrt(3/(5d)) (so E||x||^2 = 1; t(5) has the finite 4th
moment LDOP's k = 4 needs), labels from a random linear model with noise (seeded), the loss
``--loss`` (hinge, absolute, pinball, logistic, huber, square; the regression losses take
``x^T beta`` plus noise as labels), the l2 ball of radius ``--radius`` (1: active at the
answer; 10: inactive), or with ``--box B`` the box ``cp.abs(w) <= B``. Times are medians of
``--repeat`` runs, each on a freshly built problem (so each pays its own compilation); LDOP
runs for the hinge loss only (its moments are the features'). ``--C`` is the
extension's constant; ``--C paper`` uses paper 000's ``G_4 (n epsilon / d)^(1/4)`` at
epsilon = 1. Prints one row per n with the times, their ratios, the solver iterations, both
certified gaps, the share of examples whose loss is C-Lipschitz on W and the solve paths.
``--accuracy`` certifies both solves to that target, as a private release does (without it,
each takes the tightest certificate: the stable gap is then always computed too).
"""

from __future__ import annotations

import argparse
import math
import time

import cvxpy as cp
import numpy as np

import dpcvx

NU = 5.0


def moments(d: int) -> tuple[float, float]:
    """Exact (G_2, G_4) of ||x|| for the benchmark's features."""
    scale2 = 3.0 / (5.0 * d)
    ex2 = NU / (NU - 2) * scale2
    ex4 = 3 * NU**2 / ((NU - 2) * (NU - 4)) * scale2**2
    return math.sqrt(d * ex2), (d * ex4 + d * (d - 1) * ex2**2) ** 0.25


LOSSES = ("hinge", "absolute", "pinball", "logistic", "huber", "square")
#: the losses whose LDOP release is timed (piecewise-linear: the slope of each is at most
#: ``||x||``, so the features' moments are the gradients' moments the plan takes)
LDOP_LOSSES = ("hinge", "absolute", "pinball")


def _loss(name: str, w, x, y):
    r = x @ w - y
    return {
        "hinge": lambda: cp.pos(1 - y * (x @ w)),
        "logistic": lambda: cp.logistic(-y * (x @ w)),
        "absolute": lambda: cp.abs(r),
        "pinball": lambda: cp.maximum(0.3 * -r, -0.7 * -r),
        "huber": lambda: cp.huber(r, 1.0),
        "square": lambda: cp.square(r),
    }[name]()


def run(
    n: int,
    d: int,
    C,
    lam: float,
    seed: int,
    ldop: bool = True,
    radius: float = 1.0,
    loss: str = "hinge",
    repeat: int = 1,
    accuracy: float | None = None,
    box: float | None = None,
) -> dict:
    rng = np.random.default_rng(seed)
    X = rng.standard_t(NU, size=(n, d)) * math.sqrt(3.0 / (5.0 * d))
    beta = rng.normal(size=d)
    noise = rng.normal(size=n)
    if loss in ("hinge", "logistic"):
        Y = np.sign(X @ beta + 0.1 * noise)
    else:
        Y = 0.3 * (X @ beta) + 0.3 * noise
    G2, G4 = moments(d)
    if C == "paper":
        C = G4 * (n / d) ** 0.25
    C = float(C)

    def fresh() -> dpcvx.Problem:
        w = cp.Variable(d)
        x = cp.Parameter(d)
        y = cp.Parameter()
        domain = [cp.norm(w) <= radius] if box is None else [cp.abs(w) <= box]
        return dpcvx.Problem(_loss(loss, w, x, y), w, {x: X, y: Y}, domain)

    plain_times, ext_times, ldop_times = [], [], []
    for _ in range(max(1, repeat)):
        problem = fresh()
        t0 = time.perf_counter()
        plain = problem.solve(regularization=lam, accuracy=accuracy)
        t1 = time.perf_counter()
        ext = problem.lipschitz_extension(C).solve(regularization=lam, accuracy=accuracy)
        t2 = time.perf_counter()
        plain_times.append(t1 - t0)
        ext_times.append(t2 - t1)
        if ldop and loss in LDOP_LOSSES:  # a release on a problem of its own, as a user runs it
            problem = fresh()
            t3 = time.perf_counter()
            mech = dpcvx.LocalizedDoubleOutputPerturbation(k=4, moment=G4, second_moment=G2)
            problem.solve_private(mech, epsilon=1.0, rng=seed)
            ldop_times.append(time.perf_counter() - t3)
    plain_s, ext_s = float(np.median(plain_times)), float(np.median(ext_times))
    ldop_s = float(np.median(ldop_times)) if ldop_times else float("nan")
    return {
        "n": n,
        "d": d,
        "C": C,
        "loss": loss,
        "plain_s": plain_s,
        "extension_s": ext_s,
        "ratio": ext_s / plain_s,
        "ball_rounds": ext.solver_stats.get("ball_rounds", 0),
        "plain_gap": plain.gap,
        "extension_gap": ext.gap,
        "plain_iters": plain.solver_stats.get("iterations"),
        "plain_path": plain.solver_stats.get("solver"),
        "extension_path": ext.solver_stats.get("solver")
        + (f" ({ext.solver_stats['method']})" if ext.solver_stats.get("method") else ""),
        "extension_iters": ext.solver_stats.get("iterations"),
        "light": float(np.mean(np.linalg.norm(X, axis=1) <= C)),
        "ldop_s": ldop_s,
        "ldop_ratio": ldop_s / plain_s,
    }


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="1000,10000,40000", help="comma-separated sample sizes")
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--C", default="1.0", help="a number, or 'paper'")
    parser.add_argument("--no-ldop", action="store_true", help="skip the LDOP timing")
    parser.add_argument("--lam", type=float, default=0.01)
    parser.add_argument("--radius", type=float, default=1.0, help="the domain's radius")
    parser.add_argument(
        "--box", type=float, default=None, help="the box cp.abs(w) <= B instead of the ball"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--loss", default="hinge", help="comma-separated: " + ", ".join(LOSSES))
    parser.add_argument("--repeat", type=int, default=3, help="runs per cell (medians)")
    parser.add_argument(
        "--accuracy",
        type=float,
        default=None,
        help="a certified target for both solves, as a private release has (default: none, "
        "the tightest certificate)",
    )
    args = parser.parse_args(argv)
    C = args.C if args.C == "paper" else float(args.C)
    rows = [
        run(
            int(float(v)),
            args.d,
            C,
            args.lam,
            args.seed,
            not args.no_ldop,
            args.radius,
            loss=loss,
            repeat=args.repeat,
            accuracy=args.accuracy,
            box=args.box,
        )
        for loss in args.loss.split(",")
        for v in args.n.split(",")
    ]
    print(
        f"{'loss':>8} {'n':>7} {'d':>4} {'C':>6} {'light':>6} {'plain_s':>8} {'extension_s':>11} "
        f"{'ratio':>6} {'ldop_s':>7} {'ldop/plain':>10} {'iters':>9} {'rounds':>6} "
        f"{'plain_gap':>9} {'ext_gap':>9}  paths (plain / extension)"
    )
    for r in rows:
        print(
            f"{r['loss']:>8} {r['n']:>7} {r['d']:>4} {r['C']:>6.3g} {r['light']:>6.2f} "
            f"{r['plain_s']:>8.3f} {r['extension_s']:>11.3f} {r['ratio']:>6.1f} "
            f"{r['ldop_s']:>7.2f} {r['ldop_ratio']:>10.1f} "
            f"{r['plain_iters']:>4}/{r['extension_iters']:<4} {r['ball_rounds']:>6} "
            f"{r['plain_gap']:>9.1e} {r['extension_gap']:>9.1e}  "
            f"{r['plain_path']} / {r['extension_path']}"
        )
    for a, b in zip(rows, rows[1:]):
        if a["loss"] != b["loss"]:
            continue
        print(
            f"{a['loss']}: "
            f"growth n={a['n']} -> {b['n']}: plain {b['plain_s'] / a['plain_s']:.2f}, "
            f"extension {b['extension_s'] / a['extension_s']:.2f}, "
            f"ldop {b['ldop_s'] / a['ldop_s']:.2f}"
        )
    return rows


if __name__ == "__main__":
    main()
