"""Composing several releases against one privacy budget with ``dpcvx.Accountant``.

Every release on the same data spends budget, and the guarantees add up (basic composition;
``dpcvx.Ledger.total`` may tighten the epsilon of several Gaussian releases with dp_accounting's
PLD accountant). A ``dpcvx.Accountant(epsilon, delta)`` holds the total; passing it to
``solve_private`` *reserves* each release's event in its ledger before the data is touched and
before any noise is drawn. A release that would exceed the budget raises
``PrivacyBudgetError``: nothing is released and nothing is spent.

On scikit-learn's breast-cancer data (rows clipped to norm 1 with public preprocessing), with a
budget of ``(epsilon, delta) = (2, 1e-6)``:

1. a hinge-loss classifier, ``OutputPerturbation``, pure epsilon = 0.5;
2. a logistic-loss classifier, ``OutputPerturbation`` with Gaussian noise, (0.5, 5e-7);
3. a hinge-loss classifier on the Lipschitz extension, ``DoubleOutputPerturbation``
   (paper 000, Algorithm 4), pure epsilon = 0.5;
4. an attempt at epsilon = 1.0, which would exceed what is left: refused, nothing spent;
5. a last release that uses exactly what is left.

The script prints each release's guarantee and certificates, and the ledger.

Run:  python examples/composing_releases.py [--seed 0]
(a few seconds)
"""

from __future__ import annotations

import argparse

import cvxpy as cp
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.preprocessing import StandardScaler

import dpcvx


def main(argv: list[str] | None = None) -> dpcvx.Accountant:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regularization", type=float, default=0.01)
    parser.add_argument(
        "--seed", type=int, default=None, help="seed the noise (reproducible, not for production)"
    )
    args = parser.parse_args(argv)
    lam = args.regularization

    features, labels = load_breast_cancer(return_X_y=True)
    # Public preprocessing (see examples/quickstart.py): with ||x|| <= 1 and |y| = 1 the hinge
    # and logistic losses are 1-Lipschitz in w for every possible example.
    X = StandardScaler().fit_transform(features)
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    Y = 2.0 * labels - 1.0
    n, d = X.shape

    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    domain = dpcvx.domains.l2_ball(w, 5.0)
    hinge = dpcvx.Problem(dpcvx.losses.hinge(x @ w, y), w, data={x: X, y: Y}, domain=domain)
    logistic = dpcvx.Problem(dpcvx.losses.logistic(x @ w, y), w, data={x: X, y: Y}, domain=domain)

    accountant = dpcvx.Accountant(epsilon=2.0, delta=1e-6)
    # one generator for every release of a seeded run, so the releases draw independent noise
    rng = None if args.seed is None else np.random.default_rng(args.seed)

    def accuracy(v: np.ndarray) -> float:
        return float(np.mean(np.sign(X @ v) == Y))

    def report(step: str, result: dpcvx.PrivateResult) -> None:
        print(
            f"\n[{step}] guarantee {dpcvx.Guarantee(epsilon=result.epsilon, delta=result.delta)}"
            f", training accuracy {accuracy(result.w):.3f}"
        )
        for cert in result.certificates:
            print(f"  {cert}")
        print(f"  spent so far: {accountant.spent}; remaining: {accountant.remaining}")

    print(f"breast_cancer: n={n}, d={d}; budget {accountant.budget}")

    first = hinge.solve_private(
        dpcvx.OutputPerturbation(lipschitz=1.0, regularization=lam),
        epsilon=0.5,
        rng=rng,
        accountant=accountant,
    )
    report("1: hinge, OutputPerturbation, pure", first)

    second = logistic.solve_private(
        dpcvx.OutputPerturbation(lipschitz=1.0, regularization=lam),
        epsilon=0.5,
        delta=5e-7,
        rng=rng,
        accountant=accountant,
    )
    report("2: logistic, OutputPerturbation, Gaussian", second)

    third = hinge.solve_private(
        dpcvx.DoubleOutputPerturbation(C=1.0, regularization=lam),
        epsilon=0.5,
        rng=rng,
        accountant=accountant,
    )
    report("3: hinge on f_C, DoubleOutputPerturbation, pure", third)

    events_before, spent_before = len(accountant.ledger), accountant.spent
    try:
        hinge.solve_private(
            dpcvx.OutputPerturbation(lipschitz=1.0, regularization=lam),
            epsilon=1.0,
            rng=rng,
            accountant=accountant,
        )
    except dpcvx.PrivacyBudgetError as error:
        print(f"\n[4: epsilon = 1.0] refused with PrivacyBudgetError:\n  {error}")
    else:  # pragma: no cover - the budget arithmetic above makes this unreachable
        raise AssertionError("the accountant should have refused the release")
    assert len(accountant.ledger) == events_before and accountant.spent == spent_before
    print(f"  ledger still has {events_before} events; spent still {accountant.spent}")

    left = accountant.remaining.epsilon
    last = hinge.solve_private(
        dpcvx.OutputPerturbation(lipschitz=1.0, regularization=lam),
        epsilon=left,
        rng=rng,
        accountant=accountant,
    )
    report(f"5: hinge, OutputPerturbation, the remaining epsilon = {left:g}", last)

    print("\nthe ledger (every release charged to this accountant):")
    print(accountant.ledger)
    return accountant


if __name__ == "__main__":
    main()
