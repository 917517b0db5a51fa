"""How ``PrivateLinearClassifier(loss="auto")`` fits ``K > 2`` classes, chosen on public
synthetic data: the multinomial logistic model, one-vs-rest with the hinge loss and one-vs-rest
with the logistic loss side by side, next to the public rule's choice and the non-private fit.

    python benchmarks/bench_multiclass.py                  # the study (about 30 min on 2 cores)
    python benchmarks/bench_multiclass.py --n 150,600 --reps 4
    python benchmarks/bench_multiclass.py --smoke          # CI: seconds

Data (seeded, nothing read from any user's data): ``K`` Gaussian classes in ``d`` dimensions,
class means drawn on the sphere of radius 2.5, unit noise, equal class frequencies in
expectation; the features standardized and every row clipped to the public norm
``B = sqrt(d)`` (the root-mean-square norm of a standardized row). ``n`` training rows and
``n / 4`` test rows per repetition. Every method runs the estimator's defaults otherwise
(output perturbation, ``regularization="auto"``, ``domain_radius=1``) at the same total
epsilon (one-vs-rest spends ``epsilon / K`` per class). Each cell is the mean test accuracy
(%) over ``--reps`` repetitions (a fresh dataset and noise each).

The rule (``loss="auto"`` with ``multi_class="auto"``): the multinomial model when ``K > d``,
one-vs-rest hinge otherwise. The summary prints, for the rule and for each fixed choice, the
mean accuracy over all cells and the largest shortfall behind the best of the three.
"""

from __future__ import annotations

import argparse
import sys
import warnings

import numpy as np
from _common import results_dir, write_json

CHOICES = {
    "multinomial": {"loss": "logistic"},
    "ovr hinge": {"loss": "hinge"},
    "ovr logistic": {"loss": "logistic", "multi_class": "ovr"},
}


def blobs(n: int, d: int, K: int, rng: np.random.Generator):
    """``n`` rows of ``K`` Gaussian classes in ``d`` dimensions, standardized and clipped to
    ``sqrt(d)``; returns ``(X, y, B)``."""
    means = rng.normal(size=(K, d))
    means *= 2.5 / np.linalg.norm(means, axis=1, keepdims=True)
    y = rng.integers(K, size=n)
    X = means[y] + rng.normal(size=(n, d))
    X = (X - X.mean(0)) / X.std(0)
    B = float(np.sqrt(d))
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X * np.minimum(1.0, B / np.maximum(norms, 1e-300)), y, B


def rule(K: int, d: int) -> str:
    """The choice of ``loss="auto"`` for ``K > 2`` classes and ``d`` features."""
    return "multinomial" if K > d else "ovr hinge"


def run_cell(n: int, d: int, K: int, epsilon: float, reps: int) -> dict:
    from sklearn.linear_model import LogisticRegression

    from dpcvx.estimators import PrivateLinearClassifier

    acc: dict[str, list[float]] = {name: [] for name in (*CHOICES, "non-private", "auto")}
    for r in range(reps):
        rng = np.random.default_rng(1000 * r + 7)
        X, y, B = blobs(n + n // 4, d, K, rng)
        Xtr, ytr, Xte, yte = X[:n], y[:n], X[n:], y[n:]
        for name, params in (*CHOICES.items(), ("auto", {})):
            clf = PrivateLinearClassifier(
                classes=list(range(K)),
                epsilon=epsilon,
                feature_norm_bound=B,
                random_state=r,
                **params,
            )
            acc[name].append(float(clf.fit(Xtr, ytr).score(Xte, yte)))
        plain = LogisticRegression(max_iter=1000).fit(Xtr, ytr)
        acc["non-private"].append(float(plain.score(Xte, yte)))
    row = {"n": n, "d": d, "K": K, "epsilon": epsilon, "rule": rule(K, d)}
    row.update({name: 100.0 * float(np.mean(v)) for name, v in acc.items()})
    return row


def summary(rows: list[dict]) -> list[str]:
    """Mean accuracy and largest shortfall behind the best fixed choice, per strategy."""
    lines = []
    best = [max(r[c] for c in CHOICES) for r in rows]
    for name in (*CHOICES, "rule"):
        got = [r[r["rule"]] if name == "rule" else r[name] for r in rows]
        short = [b - g for b, g in zip(best, got)]
        worst = int(np.argmax(short))
        w = rows[worst]
        lines.append(
            f"{name:>13s}: mean {np.mean(got):5.1f}%, behind the best by "
            f"{np.mean(short):4.1f} points on average, at most {short[worst]:4.1f} "
            f"(n={w['n']}, d={w['d']}, K={w['K']}, eps={w['epsilon']:g})"
        )
    return lines


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="150,600,1500", help="comma-separated training sizes")
    parser.add_argument("--d", default="4,16,64", help="comma-separated dimensions")
    parser.add_argument("--K", default="3,5,10", help="comma-separated class counts")
    parser.add_argument("--epsilon", default="0.5,1,2,5", help="comma-separated epsilons")
    parser.add_argument("--reps", type=int, default=4, help="repetitions per cell")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    args = parser.parse_args(argv)
    ns = [int(v) for v in args.n.split(",")]
    ds = [int(v) for v in args.d.split(",")]
    Ks = [int(v) for v in args.K.split(",")]
    epsilons = [float(v) for v in args.epsilon.split(",")]
    reps = args.reps
    if args.smoke:
        ns, ds, Ks, epsilons, reps = [120], [2, 4], [3], [2.0], 1
    warnings.simplefilter("ignore")  # the estimators' notes on public bounds: all given here
    names = (*CHOICES, "auto", "non-private")
    print(
        f"{'n':>5s} {'d':>3s} {'K':>3s} {'eps':>4s} "
        + " ".join(f"{name:>12s}" for name in names)
        + f" {'rule':>12s}",
        flush=True,
    )
    rows = []
    for n in ns:
        for d in ds:
            for K in Ks:
                for eps in epsilons:
                    row = run_cell(n, d, K, eps, reps)
                    rows.append(row)
                    print(
                        f"{n:5d} {d:3d} {K:3d} {eps:4g} "
                        + " ".join(f"{row[name]:12.1f}" for name in names)
                        + f" {row['rule']:>12s}",
                        flush=True,
                    )
    print()
    print("\n".join(summary(rows)))
    mismatch = [r for r in rows if abs(r["auto"] - r[r["rule"]]) > 1e-9]
    if mismatch:  # loss="auto" must release what the rule's fixed choice releases
        print("loss='auto' differs from the rule's choice", file=sys.stderr)
        sys.exit(1)
    name = "bench_multiclass_smoke.json" if args.smoke else "bench_multiclass.json"
    write_json({"rows": rows}, results_dir() / name)
    return rows


if __name__ == "__main__":
    main()
