"""User-level excess risk (paper 004) vs users n and items per user m: the naive baseline
(user-level output perturbation), Phased-ERM / Phased-SCO, and the deletion route, on
exchangeable and on duplicated-item users, next to the paper's rates and the crossover m*.

    python benchmarks/bench_user_level.py [--repeats 5] [--seed 0]
    python benchmarks/bench_user_level.py --smoke

Loss (exact excess risk): the item loss ``(mu/2)(w - x)^2`` with ``mu = 1`` on ``K = [-1, 1]``
(so ``G = mu * diam(K) = 2`` bounds every item gradient on ``K``). Items are Rademacher,
``x = +1`` with probability 0.6: ``E x = 0.2``, ``Var x = 0.96``, the population minimizer is
``w* = 0.2`` and the excess population risk of a point ``w`` in ``K`` is exactly
``(mu/2)(w - 0.2)^2``. Every release is projected onto ``K`` before scoring (post-processing);
a ``bottom`` output of the deletion route is mapped to the public centre 0 (post-processing).

Users. ``exchangeable``: each user's ``m`` items i.i.d. ``duplicated``: each user draws one item
and repeats it ``m`` times (the worst case of 004's remark L97: no ``m``-gain is possible).

Sections.

1. ``m``-gain at ``n`` users (``--n``), ``epsilon = --m-epsilon`` (4: the statistical term
   ``Var x/(n m)`` then dominates the privacy noise at ``m = 1``), ``delta = 1e-6``:
   ``dpcvx.OutputPerturbation`` (the naive baseline, ``strong_convexity = mu``, no
   regularization), ``dpcvx.PhasedUserSCO`` and
   ``dpcvx.PhasedUserERM`` (the latter for ``n m <= --erm-max-items``: it solves every phase on
   all users) on a ``dpcvx.UserLevelProblem``. Printed next to the medians: ``pred_naive``, the
   naive baseline's exact expected risk before projection, ``(mu/2)(Var x/(n m_eff) + s^2)``
   with ``m_eff = m`` (exchangeable) or 1 (duplicated) and ``s`` the analytic-Gaussian noise at
   the user-level sensitivity ``2G/(mu n)``; the paper's rates with constants 1 and logs dropped:
   ``rate_naive = G^2/mu (1/(n m) + d/(n eps)^2)`` and ``rate_004 = G^2/mu (1/(n m) +
   d/(n^2 m eps^2))`` (004 Thm 5.3, the deletion route's strongly convex SCO rate).
2. ``n`` sweep at ``m = --n-sweep-m``, ``epsilon = 1, delta = 1e-6``, same mechanisms and
   columns, and ``crossover_items`` (analytic Gaussian, provable and printed Delta) at each
   ``n`` with at least ``4 kappa + 2`` users.
3. The deletion route: the reference ``SCOutputPert`` (004 Alg 2, closed-form 1-d quadratic,
   ``mode="certified"``, analytic Gaussian) at ``n = 14`` users, ``epsilon = 8, delta = 0.05``
   (``kappa = 3``: the exhaustive stability test evaluates 16,383 sub-datasets; more users are
   out of reach), ``m`` up to ``--deletion-m``, with the provable Delta (erratum 1) and the
   printed one (004 L238; not proven, but the release is private for every Delta). The naive
   baseline there is its closed form (the exact minimizer ``clip(mean, K)`` plus the Gaussian
   at ``2G/(mu n)``, which ``crossover_items`` compares against): ``UserLevelProblem`` holds
   at most 1000 items per user.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import cvxpy as cp
import numpy as np
from _common import results_dir, write_json

import dpcvx
from dpcvx.mechanisms.deletion_output import SCOutputPert
from dpcvx.mechanisms.noise import analytic_gaussian_sigma

MU = 1.0
LOWER, UPPER = -1.0, 1.0
G = MU * (UPPER - LOWER)
P_PLUS = 0.6
W_STAR = 2 * P_PLUS - 1  # 0.2
VAR = 1.0 - W_STAR**2  # 0.96
MODES = ("exchangeable", "duplicated")
#: the median of a chi-square with one degree of freedom (the naive error is ~ Gaussian)
CHI2_MEDIAN = 0.454936


def items(n: int, m: int, mode: str, rng: np.random.Generator) -> np.ndarray:
    """``(n, m)`` Rademacher items (+1 w.p. 0.6), i.i.d. or one per user repeated (the same
    stream: at ``m = 1`` both modes hold the same data)."""
    out = np.empty((n, m))
    for u in range(n):  # row by row: m can be millions
        out[u] = np.where(rng.random(m) < P_PLUS, 1.0, -1.0)
    if mode == "duplicated":  # the exchangeable draw's first item, repeated
        out[:] = out[:, :1]
    return out


def excess(w) -> float:
    """Exact excess population risk of the release projected onto K (bottom -> 0)."""
    v = 0.0 if w is None else float(np.clip(np.ravel(w)[0], LOWER, UPPER))
    return 0.5 * MU * (v - W_STAR) ** 2


def problem(X: np.ndarray) -> dpcvx.UserLevelProblem:
    n, m = X.shape
    w = cp.Variable(1)
    x = cp.Parameter()
    return dpcvx.UserLevelProblem(
        0.5 * MU * cp.square(w[0] - x),
        w,
        {x: X.ravel()},
        dpcvx.domains.l2_ball(w, 1.0),
        users=np.repeat(np.arange(n), m),
        items_per_user=m,
    )


def naive_sigma(n: int, eps: float, delta: float) -> float:
    return analytic_gaussian_sigma(2.0 * G / (MU * n), eps, delta)


def rates(n: int, m: int, mode: str, eps: float, delta: float) -> dict:
    m_eff = m if mode == "exchangeable" else 1
    s = naive_sigma(n, eps, delta)
    return {
        "pred_naive": CHI2_MEDIAN * 0.5 * MU * (VAR / (n * m_eff) + s**2),
        "rate_naive": G**2 / MU * (1.0 / (n * m) + 1.0 / (n * eps) ** 2),
        "rate_004": G**2 / MU * (1.0 / (n * m) + 1.0 / (n**2 * m * eps**2)),
    }


def mechanisms(m: int, with_erm: bool) -> dict:
    mechs = {
        "naive": dpcvx.OutputPerturbation(lipschitz=G, regularization=0.0, strong_convexity=MU),
        "phased_sco": dpcvx.PhasedUserSCO(lipschitz=G, items_per_user=m, progress=False),
    }
    if with_erm:
        mechs["phased_erm"] = dpcvx.PhasedUserERM(lipschitz=G, items_per_user=m, progress=False)
    return mechs


def cell(
    n: int, m: int, mode: str, args, eps: float, delta: float, repeats: int, m_max: int
) -> dict:
    """Medians over repeats of every library mechanism on one (n, m, mode). Common random
    numbers: repeat ``r`` draws one ``(n, m_max)`` item matrix (per mode) and uses its first
    ``m`` columns, and every mechanism's generator is seeded by ``(n, r)`` only, so the rows of
    one sweep differ only by the items added (duplicated users: not at all)."""
    with_erm = n * m <= args.erm_max_items
    risks: dict[str, list[float]] = {k: [] for k in mechanisms(m, with_erm)}
    t0 = time.perf_counter()
    for r in range(repeats):
        seed = [args.seed, n, m_max, r]
        X = items(n, m_max, mode, np.random.default_rng(seed))[:, :m]
        prob = problem(X)
        for name, mech in mechanisms(m, with_erm).items():
            res = prob.solve_private(
                mech, epsilon=eps, delta=delta, rng=np.random.default_rng([args.seed, n, r, 1])
            )
            risks[name].append(excess(res.w))
    row = {"n": n, "m": m, "mode": mode, "epsilon": eps, "delta": delta}
    for name, vals in risks.items():
        row[name] = statistics.median(vals)
        row[name + "_all"] = vals
    row.update(rates(n, m, mode, eps, delta))
    row["seconds"] = time.perf_counter() - t0
    return row


def crossover(n: int, eps: float, delta: float) -> dict:
    out = {}
    for which in ("provable", "printed"):
        try:
            out[which] = dpcvx.crossover_items(
                eps,
                delta,
                G=G,
                mu=MU,
                n=n,
                beta=1e-3,
                constrained=True,
                gaussian="analytic",
                sensitivity=which,
            )
        except dpcvx.errors.InvalidParameterError:
            out[which] = None  # n < 4 kappa + 2: the deletion route is undefined
    return out


def deletion_cell(m: int, mode: str, args, m_max: int) -> dict:
    n, eps, delta = args.deletion_n, args.deletion_epsilon, args.deletion_delta
    routes = {
        "del_provable": SCOutputPert(
            lower=LOWER, upper=UPPER, mode="certified", gaussian="analytic"
        ),
        "del_printed": SCOutputPert(
            lower=LOWER,
            upper=UPPER,
            mode="certified",
            gaussian="analytic",
            target_sensitivity="printed",
        ),
    }
    plans = {k: r.plan(n=n, m=m, epsilon=eps, delta=delta) for k, r in routes.items()}
    s_naive = naive_sigma(n, eps, delta)
    risks: dict[str, list[float]] = {"naive_closed": [], **{k: [] for k in routes}}
    bottoms = {k: 0 for k in routes}
    t0 = time.perf_counter()
    for r in range(args.deletion_repeats):
        seed = [args.seed, 7, n, m_max, r]  # common random numbers
        X = items(n, m_max, mode, np.random.default_rng(seed))[:, :m]
        rng = np.random.default_rng([args.seed, 7, n, r, 1])
        center = float(np.clip(np.mean(X), LOWER, UPPER))  # equal m: mean of the user means
        risks["naive_closed"].append(excess(center + s_naive * rng.standard_normal()))
        for k, route in routes.items():
            out = route.release(plans[k], X, rng=np.random.default_rng([args.seed, 7, n, r, 2]))
            bottoms[k] += bool(out.bottom)
            risks[k].append(excess(out.w))
        del X
    row = {"n": n, "m": m, "mode": mode, "epsilon": eps, "delta": delta, "sigma_naive": s_naive}
    for k, vals in risks.items():
        row[k] = statistics.median(vals)
        row[k + "_all"] = vals
    for k in routes:
        row[k + "_sigma"] = plans[k].sigma
        row[k + "_bottom"] = bottoms[k] / args.deletion_repeats
    row["seconds"] = time.perf_counter() - t0
    return row


def fmt(v) -> str:
    return "-" if v is None else f"{v:.2e}"


def print_table(title: str, rows: list[dict]) -> None:
    print(f"\n## {title}")
    print(
        f"{'n':>5} {'m':>4} {'users':>12} {'naive':>9} {'phased_sco':>10} {'phased_erm':>10} "
        f"{'pred_naive':>10} {'rate_naive':>10} {'rate_004':>9} {'s':>6}"
    )
    for r in rows:
        print(
            f"{r['n']:>5} {r['m']:>4} {r['mode']:>12} {fmt(r['naive']):>9} "
            f"{fmt(r['phased_sco']):>10} {fmt(r.get('phased_erm')):>10} "
            f"{fmt(r['pred_naive']):>10} {fmt(r['rate_naive']):>10} {fmt(r['rate_004']):>9} "
            f"{r['seconds']:>6.1f}"
        )


def gains(rows: list[dict], n: int) -> list[dict]:
    """Risk at the smallest m over risk at each m, per mode and mechanism (the m-gain)."""
    out = []
    for mode in MODES:
        sel = sorted((r for r in rows if r["n"] == n and r["mode"] == mode), key=lambda r: r["m"])
        if not sel:
            continue
        base = sel[0]
        for r in sel[1:]:
            g = {"mode": mode, "m_from": base["m"], "m_to": r["m"]}
            for k in ("naive", "phased_sco", "phased_erm", "pred_naive"):
                if r.get(k) is not None and base.get(k) is not None and r[k] > 0:
                    g[k] = base[k] / r[k]
            out.append(g)
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny grid, seconds")
    parser.add_argument("--repeats", type=int, default=None, help="repeats of the m sweep")
    parser.add_argument("--n-repeats", type=int, default=None, help="repeats of the n sweep")
    parser.add_argument("--deletion-repeats", type=int, default=None)
    parser.add_argument("--m-epsilon", type=float, default=4.0, help="epsilon of the m sweep")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n", type=int, default=None, help="users in the m sweep")
    parser.add_argument("--m", default=None, help="comma-separated m of the m sweep")
    parser.add_argument("--n-sweep", default=None, help="comma-separated n of the n sweep")
    parser.add_argument("--n-sweep-m", type=int, default=None)
    parser.add_argument("--erm-max-items", type=int, default=None)
    parser.add_argument("--deletion-n", type=int, default=14)
    parser.add_argument("--deletion-m", default=None, help="comma-separated m, deletion route")
    parser.add_argument("--deletion-epsilon", type=float, default=8.0)
    parser.add_argument("--deletion-delta", type=float, default=0.05)
    parser.add_argument("--output", default=None, help="JSON path")
    args = parser.parse_args(argv)
    smoke = args.smoke
    defaults = {
        "repeats": 2 if smoke else 11,
        "n_repeats": 1 if smoke else 5,
        "deletion_repeats": 2 if smoke else 5,
        "n": 200 if smoke else 250,
        "m": "1,8" if smoke else "1,4,16,64",
        "n_sweep": "400" if smoke else "250,1000,4000",
        "n_sweep_m": 8 if smoke else 16,
        "erm_max_items": 200 if smoke else 1000,
        "deletion_m": "10,1000" if smoke else "100,10000,1000000,4000000",
    }
    for k, v in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    eps, delta = 1.0, 1e-6
    t_start = time.perf_counter()
    ms = [int(float(v)) for v in args.m.split(",")]
    me = args.m_epsilon
    rows_m = [
        cell(args.n, m, mode, args, me, delta, args.repeats, max(ms)) for mode in MODES for m in ms
    ]
    print_table(
        f"m sweep: n = {args.n} users, epsilon = {me}, delta = {delta}, medians of {args.repeats}",
        rows_m,
    )
    gain_rows = gains(rows_m, args.n)
    print("\nm-gain (risk at the smallest m / risk at m; 1 = no gain):")
    for g in gain_rows:
        print(
            f"  {g['mode']:>12} m {g['m_from']} -> {g['m_to']}: naive {g.get('naive', 0):.2f}, "
            f"phased_sco {g.get('phased_sco', 0):.2f}, phased_erm "
            f"{fmt(g.get('phased_erm'))}, predicted naive {g['pred_naive']:.2f}"
        )

    ns = [int(float(v)) for v in args.n_sweep.split(",") if v]
    rows_n = [
        cell(n, args.n_sweep_m, mode, args, eps, delta, args.n_repeats, args.n_sweep_m)
        for mode in MODES
        for n in ns
    ]
    cross = {}
    if rows_n:
        print_table(
            f"n sweep: m = {args.n_sweep_m}, epsilon = {eps}, delta = {delta}, medians of "
            f"{args.n_repeats}",
            rows_n,
        )
    print(
        f"\ncrossover m* (crossover_items, analytic Gaussian, beta 1e-3, eps {eps}, delta {delta})"
    )
    for n in sorted(ns):
        cross[n] = crossover(n, eps, delta)
        print(
            f"  n = {n:>5}: provable {fmt(cross[n]['provable'])}, "
            f"printed {fmt(cross[n]['printed'])}"
        )

    dn, de, dd = args.deletion_n, args.deletion_epsilon, args.deletion_delta
    cross_del = crossover(dn, de, dd)
    dms = [int(float(v)) for v in args.deletion_m.split(",")]
    rows_d = [deletion_cell(m, mode, args, max(dms)) for mode in MODES for m in dms]
    print(
        f"\n## deletion route: SCOutputPert, n = {dn}, epsilon = {de}, delta = {dd}, medians of "
        f"{args.deletion_repeats}; m* provable {fmt(cross_del['provable'])}, printed "
        f"{fmt(cross_del['printed'])}"
    )
    print(
        f"{'m':>8} {'users':>12} {'naive':>9} {'del_prov':>9} {'del_print':>9} {'s_naive':>8} "
        f"{'s_prov':>8} {'s_print':>8} {'bottom':>9} {'s':>6}"
    )
    for r in rows_d:
        print(
            f"{r['m']:>8} {r['mode']:>12} {fmt(r['naive_closed']):>9} "
            f"{fmt(r['del_provable']):>9} {fmt(r['del_printed']):>9} {r['sigma_naive']:>8.3g} "
            f"{r['del_provable_sigma']:>8.3g} {r['del_printed_sigma']:>8.3g} "
            f"{r['del_provable_bottom']:>4.2f}/{r['del_printed_bottom']:<4.2f} "
            f"{r['seconds']:>6.1f}"
        )
    total = time.perf_counter() - t_start
    print(f"\ntotal {total:.1f} s")
    doc = {
        "benchmark": "bench_user_level",
        "smoke": smoke,
        "args": vars(args),
        "loss": "0.5 mu (w - x)^2 on [-1, 1], Rademacher items P(+1) = 0.6, w* = 0.2",
        "m_sweep": rows_m,
        "m_gain": gain_rows,
        "n_sweep": rows_n,
        "crossover": {str(k): v for k, v in cross.items()},
        "deletion": {"crossover": cross_del, "rows": rows_d},
        "seconds": total,
    }
    name = "bench_user_level_smoke.json" if smoke else "bench_user_level.json"
    path = Path(args.output) if args.output else results_dir() / name
    write_json(doc, path)
    print(f"wrote {path}")
    return doc


if __name__ == "__main__":
    main()
