"""dpcvx vs diffprivlib vs the non-private fit on the datasets installed packages ship, in one
table (issue 13, item 8).

Datasets (every one ships inside an installed package or is drawn from a fixed seed; nothing is
downloaded):

- **binary classification**: scikit-learn's ``breast_cancer`` (n = 569, d = 30);
- **multiclass**: ``iris`` (150, 4, K = 3), ``wine`` (178, 13, K = 3), ``digits``
  (1797, 64, K = 10);
- **regression**: ``diabetes`` (442, 10; label range [0, 400]) and, when statsmodels is
  installed, its ``fair`` data (6366, 8; the marriage rating ``rate_marriage`` on its
  documented 1-5 scale from the other columns), skipped with a note otherwise;
- **heavy-tailed synthetic regression** (``heavy_t5``): n = 2000, d = 5, i.i.d. Student-t(5)
  features, ``y = <x, w*> + 0.5 t(5)`` with ``w* = 1 / sqrt(d)`` in every coordinate, labels
  in the public range [-5, 5] (3.5 standard deviations of ``y``), drawn from a fixed seed.

Preprocessing, the same for every method and public (as in ``bench_diffprivlib.py``): real
features are standardized (the scaler's statistics count as domain knowledge), then every row
is clipped to the public norm ``B``: 5 for breast_cancer and diabetes (``bench_diffprivlib``'s
setting), ``sqrt(d)`` (the root-mean-square norm of a standardized row) for the others, and
``G_2 = sqrt(d nu / (nu - 2))`` (the exact root-mean-square norm of a Student-t row) for
``heavy_t5``, whose features are used as drawn. Regression labels are clipped to the public
range, and every method's predictions are clipped to it before scoring.

Methods, one private release per (dataset, split, epsilon, method), pure epsilon-DP throughout:

- ``dpcvx OvR hinge`` (classification): ``PrivateLinearClassifier("hinge", classes=K public
  labels, feature_norm_bound=B, domain_radius=1)``, one-vs-rest for ``K > 2`` (each class at
  ``epsilon / K``), with ``bench_diffprivlib``'s public rule for the regularization at the
  per-class epsilon: ``lam = 2 L sqrt(d / n) / epsilon_k``, ``L = sqrt(B^2 + 1)``;
- ``dpcvx LAD-OP`` (regression): ``PrivateQuantileRegressor(0.5)`` (least absolute deviation,
  output perturbation) on labels scaled to [-1, 1] by the public range, ``domain_radius=1``,
  ``bench_diffprivlib``'s rule ``lam = 4 L sqrt(d / (n epsilon))`` (``L`` that of the absolute
  loss; the pinball loss at 0.5 is half of it, so the rule gives half the ``lam`` and the same
  release);
- ``dpcvx SSP`` (regression): ``PrivateRidgeRegressor("squared", mechanism="ssp")`` with its
  defaults, rows clipped further to the root-mean-square norm (``sqrt(d)``; ``G_2`` for
  ``heavy_t5``), ``label_range`` the public range;
- ``dpcvx LDOP`` (``heavy_t5`` only): ``PrivateQuantileRegressor(0.5, mechanism="ldop")`` with
  the exact public moments ``G_4``, ``G_2`` of the row norm, defaults otherwise (the mechanism
  for heavy-tailed features; at this n its theory keeps it near its start, see
  ``docs/localized_double_output_perturbation.md``);
- ``diffprivlib``: 0.6.6's ``LogisticRegression(epsilon, data_norm=B)`` (one-vs-rest at
  ``epsilon / K`` for ``K > 2``, its own scheme) and ``LinearRegression(epsilon,
  bounds_X=(-B, B), bounds_y=range)``, defaults otherwise, in its own environment;
- ``non-private``: scikit-learn's ``LogisticRegression(max_iter=1000)`` and
  ``LinearRegression()``.

Which dpcvx methods run is a list, :data:`METHODS`: one entry adds one (say a multinomial
classifier). Every hyperparameter comes from public quantities (n, d, K, epsilon, B, the label
range); none was tuned on these datasets. Protocol: ``--splits`` (20) random 80/20 splits per
dataset, the same for every method; epsilon in {0.5, 1, 2, 5}; each cell is the mean over the
splits ± its standard error. Metrics: test accuracy (%) for classification, test R^2 and MAE
(label units) for regression.

The diffprivlib side is ``bench_diffprivlib.py``'s machinery (its environment, made once with
``python benchmarks/bench_diffprivlib.py --setup``; the same ``--env``): this script runs itself
there as a worker that imports only numpy and scikit-learn, with the preprocessed data and the
split indices in a temporary ``.npz``, and scores the returned test predictions here with the
same code as every other method. Without that environment it runs the dpcvx side only (exit 0;
``--require-diffprivlib``: exit 2)::

    python benchmarks/bench_datasets.py            # the full table (about 10 minutes on 2 cores)
    python benchmarks/bench_datasets.py --smoke    # CI: 2 splits, epsilon 1, small datasets

Output: the table on stdout, JSON in ``benchmarks/results/bench_datasets.json``
(``bench_datasets_smoke.json`` with ``--smoke``; gitignored).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bench_diffprivlib as bdl
import numpy as np
from _common import results_dir, write_json

# Only numpy (and, lazily, scikit-learn) at module level, as in bench_diffprivlib: the same file
# runs as the worker in the diffprivlib environment, which has neither dpcvx nor cvxpy.

__all__ = ["DATASETS", "METHODS", "Dataset", "Method", "load_datasets", "main", "run"]

EPSILONS = (0.5, 1.0, 2.0, 5.0)
SMOKE_EPSILONS = (1.0,)
SPLITS = 20
SMOKE_SPLITS = 2
RESULTS = results_dir()
DEFAULT_OUTPUT = RESULTS / "bench_datasets.json"
SMOKE_OUTPUT = RESULTS / "bench_datasets_smoke.json"
DIFFPRIVLIB = "diffprivlib"
NONPRIVATE = "non-private"
#: the heavy-tailed generator: n, d, Student-t degrees of freedom, noise scale, label bound, seed
HEAVY = {"n": 2000, "d": 5, "nu": 5.0, "noise": 0.5, "label_bound": 5.0, "seed": 20240513}


# --------------------------------------------------------------------------- datasets
@dataclass(frozen=True, slots=True, kw_only=True)
class Dataset:
    """One dataset after the public preprocessing (standardized, rows clipped to
    ``norm_bound``; regression labels clipped to ``label_range``)."""

    name: str
    kind: str  # "classification" or "regression"
    X: np.ndarray
    y: np.ndarray
    norm_bound: float
    #: the root-mean-square row norm (SSP's row bound)
    rms_norm: float
    label_range: tuple[float, float] | None = None
    classes: tuple[float, ...] = ()
    #: public moment bounds (G_2, G_4) of the row norm, for LDOP; None when not known
    moments: tuple[float, float] | None = None
    source: str = ""

    @property
    def heavy_tailed(self) -> bool:
        return self.moments is not None


def _classification(name: str, X: np.ndarray, y: np.ndarray, bound: float | None) -> Dataset:
    d = X.shape[1]
    bound = math.sqrt(d) if bound is None else bound
    return Dataset(
        name=name,
        kind="classification",
        X=bdl.clip_rows(bdl._standardize(X), bound),
        y=y.astype(float),
        norm_bound=bound,
        rms_norm=math.sqrt(d),
        classes=tuple(float(c) for c in np.unique(y)),  # the documented label set
        source="scikit-learn",
    )


def _regression(
    name: str, X: np.ndarray, y: np.ndarray, bound: float | None, label_range, source: str
) -> Dataset:
    d = X.shape[1]
    bound = math.sqrt(d) if bound is None else bound
    return Dataset(
        name=name,
        kind="regression",
        X=bdl.clip_rows(bdl._standardize(X), bound),
        y=np.clip(y.astype(float), *label_range),
        norm_bound=bound,
        rms_norm=math.sqrt(d),
        label_range=label_range,
        source=source,
    )


def _sklearn(name: str) -> Dataset:
    from sklearn import datasets

    if name == "diabetes":
        X, y = datasets.load_diabetes(return_X_y=True, scaled=False)
        return _regression(name, X, y, bdl.NORM_BOUND, bdl.LABEL_BOUNDS, "scikit-learn")
    X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    return _classification(name, X, y, bdl.NORM_BOUND if name == "breast_cancer" else None)


def _statsmodels_fair() -> Dataset | None:
    """statsmodels' ``fair`` data (shipped with the package): ``rate_marriage`` (documented
    1-5 scale) from the other columns; None when statsmodels is not installed."""
    try:
        from statsmodels.datasets import fair
    except ImportError:
        return None
    frame = fair.load_pandas().data
    y = frame["rate_marriage"].to_numpy(float)
    X = frame.drop(columns=["rate_marriage"]).to_numpy(float)
    return _regression("fair", X, y, None, (1.0, 5.0), "statsmodels")


def heavy_moments(d: int, nu: float) -> tuple[float, float]:
    """Exact ``(G_2, G_4)`` of ``||x||`` for i.i.d. Student-t(nu) coordinates (nu > 4)."""
    ex2 = nu / (nu - 2)
    ex4 = 3 * nu**2 / ((nu - 2) * (nu - 4))
    return math.sqrt(d * ex2), (d * ex4 + d * (d - 1) * ex2**2) ** 0.25


def _heavy_tailed() -> Dataset:
    n, d, nu = HEAVY["n"], HEAVY["d"], HEAVY["nu"]
    rng = np.random.default_rng(HEAVY["seed"])
    X = rng.standard_t(nu, size=(n, d))
    y = X @ np.full(d, 1.0 / math.sqrt(d)) + HEAVY["noise"] * rng.standard_t(nu, size=n)
    g2, g4 = heavy_moments(d, nu)
    bound = HEAVY["label_bound"]
    return Dataset(
        name="heavy_t5",
        kind="regression",
        X=bdl.clip_rows(X, g2),
        y=np.clip(y, -bound, bound),
        norm_bound=g2,
        rms_norm=g2,
        label_range=(-bound, bound),
        moments=(g2, g4),
        source="synthetic (seeded)",
    )


#: (name, loader, in the smoke run); a loader returns None when its package is missing
DATASETS: tuple[tuple[str, Callable[[], Dataset | None], bool], ...] = (
    ("breast_cancer", lambda: _sklearn("breast_cancer"), True),
    ("iris", lambda: _sklearn("iris"), True),
    ("wine", lambda: _sklearn("wine"), False),
    ("digits", lambda: _sklearn("digits"), False),
    ("diabetes", lambda: _sklearn("diabetes"), True),
    ("fair", _statsmodels_fair, False),
    ("heavy_t5", _heavy_tailed, True),
)


def load_datasets(
    *, smoke: bool = False, only: Sequence[str] | None = None
) -> tuple[list[Dataset], list[str]]:
    """The datasets of the run (``only``: these names) and the notes on those skipped."""
    out, notes = [], []
    for name, load, in_smoke in DATASETS:
        if (smoke and not in_smoke) or (only is not None and name not in only):
            continue
        ds = load()
        if ds is None:
            notes.append(f"{name} skipped: its package (statsmodels) is not installed here")
        else:
            out.append(ds)
    return out, notes


# --------------------------------------------------------------------------- dpcvx methods
@dataclass(frozen=True, slots=True)
class Method:
    """One dpcvx method: ``fit_predict(ds, train, test, epsilon, rng)`` returns the test
    predictions of one private release; it runs on the datasets where ``applies(ds)``."""

    name: str
    applies: Callable[[Dataset], bool]
    fit_predict: Callable[[Dataset, np.ndarray, np.ndarray, float, np.random.Generator], Any]


def _scaled(ds: Dataset, y: np.ndarray) -> np.ndarray:
    lo, hi = ds.label_range
    return (y - (lo + hi) / 2) / ((hi - lo) / 2)


def _unscaled(ds: Dataset, s: np.ndarray) -> np.ndarray:
    lo, hi = ds.label_range
    return (lo + hi) / 2 + (hi - lo) / 2 * s


def _dpcvx_ovr_hinge(ds, train, test, epsilon, rng):
    from dpcvx.estimators import PrivateLinearClassifier

    n, d = len(train), ds.X.shape[1] + 1
    k = len(ds.classes)
    lam = bdl.CLASSIFICATION_RULE.regularization(
        n=n,
        d=d,
        epsilon=epsilon / k if k > 2 else epsilon,
        lipschitz=bdl.lipschitz_bound(ds.norm_bound),
    )
    clf = PrivateLinearClassifier(
        bdl.CLASSIFICATION_RULE.loss,
        classes=list(ds.classes),
        epsilon=epsilon,
        feature_norm_bound=ds.norm_bound,
        domain_radius=bdl.CLASSIFICATION_RULE.radius,
        regularization=lam,
        random_state=rng,
    )
    return clf.fit(ds.X[train], ds.y[train]).predict(ds.X[test])


def _dpcvx_default(ds, train, test, epsilon, rng):
    """``PrivateLinearClassifier`` with its defaults: ``loss="auto"`` (logistic for two
    classes; for ``K > 2`` the multinomial release when ``K > d``, else one-vs-rest hinge) and
    the automatic regularization."""
    from dpcvx.estimators import PrivateLinearClassifier

    clf = PrivateLinearClassifier(
        classes=list(ds.classes),
        epsilon=epsilon,
        feature_norm_bound=ds.norm_bound,
        random_state=rng,
    )
    return clf.fit(ds.X[train], ds.y[train]).predict(ds.X[test])


def _dpcvx_lad(ds, train, test, epsilon, rng):
    from dpcvx.estimators import PrivateQuantileRegressor

    lam = bdl.REGRESSION_RULE.regularization(
        n=len(train),
        d=ds.X.shape[1] + 1,
        epsilon=epsilon,
        lipschitz=0.5 * bdl.lipschitz_bound(ds.norm_bound),  # pinball(0.5) = |r| / 2
    )
    reg = PrivateQuantileRegressor(
        0.5,
        epsilon=epsilon,
        feature_norm_bound=ds.norm_bound,
        domain_radius=bdl.REGRESSION_RULE.radius,
        regularization=lam,
        label_range=(-1.0, 1.0),
        random_state=rng,
    )
    reg.fit(ds.X[train], _scaled(ds, ds.y[train]))
    return _unscaled(ds, reg.predict(ds.X[test]))


def _dpcvx_ssp(ds, train, test, epsilon, rng):
    from dpcvx.estimators import PrivateRidgeRegressor

    reg = PrivateRidgeRegressor(
        "squared",
        mechanism="ssp",
        epsilon=epsilon,
        feature_norm_bound=ds.rms_norm,
        label_range=ds.label_range,
        random_state=rng,
    )
    return reg.fit(ds.X[train], ds.y[train]).predict(ds.X[test])


def _dpcvx_ldop(ds, train, test, epsilon, rng):
    from dpcvx.estimators import PrivateQuantileRegressor

    g2, g4 = ds.moments
    reg = PrivateQuantileRegressor(
        0.5,
        epsilon=epsilon,
        mechanism="ldop",
        feature_moment=g4,
        feature_second_moment=g2,
        label_range=(-1.0, 1.0),
        random_state=rng,
    )
    reg.fit(ds.X[train], _scaled(ds, ds.y[train]))
    return _unscaled(ds, reg.predict(ds.X[test]))


def _is(kind: str) -> Callable[[Dataset], bool]:
    return lambda ds: ds.kind == kind


#: the dpcvx side, in table order; add one entry to add a method
METHODS: tuple[Method, ...] = (
    Method("dpcvx default", _is("classification"), _dpcvx_default),
    Method("dpcvx OvR hinge", _is("classification"), _dpcvx_ovr_hinge),
    Method("dpcvx LAD-OP", _is("regression"), _dpcvx_lad),
    Method("dpcvx SSP", _is("regression"), _dpcvx_ssp),
    Method("dpcvx LDOP", lambda ds: ds.heavy_tailed, _dpcvx_ldop),
)


def nonprivate_predict(ds: Dataset, train: np.ndarray, test: np.ndarray) -> np.ndarray:
    """scikit-learn's fit on the same preprocessed data (test predictions)."""
    from sklearn.linear_model import LinearRegression, LogisticRegression

    model = LogisticRegression(max_iter=1000) if ds.kind == "classification" else LinearRegression()
    return model.fit(ds.X[train], ds.y[train]).predict(ds.X[test]).astype(float)


# --------------------------------------------------------------------------- metrics
def metrics(ds: Dataset) -> tuple[tuple[str, Callable[[np.ndarray, np.ndarray], float]], ...]:
    """The metrics of a dataset; regression predictions are clipped to the public range
    first (post-processing that every method gets)."""
    if ds.kind == "classification":
        return (("accuracy (%)", lambda t, p: 100.0 * float(np.mean(t == p))),)

    def clip(p):
        return np.clip(np.asarray(p, float), *ds.label_range)

    def r2(t, p):
        return 1.0 - float(np.sum((t - clip(p)) ** 2) / np.sum((t - t.mean()) ** 2))

    return (("R^2", r2), ("MAE", lambda t, p: float(np.mean(np.abs(t - clip(p))))))


# --------------------------------------------------------------------------- diffprivlib side
def _diffprivlib_predictions(data: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict]:
    """Runs in the diffprivlib environment (``--worker``): every fit of the grid."""
    import diffprivlib
    import sklearn
    from diffprivlib.accountant import BudgetAccountant
    from diffprivlib.models import LinearRegression, LogisticRegression

    epsilons = [float(e) for e in data["epsilons"]]
    seed = int(data["seed"])
    preds, caught_all = {}, {}
    for i, name in enumerate(str(data["names"]).split(",")):
        X, y = data[f"{i}_X"], data[f"{i}_y"]
        train, test = data[f"{i}_train"], data[f"{i}_test"]
        bound = float(data[f"{i}_norm_bound"])
        regression = str(data[f"{i}_kind"]) == "regression"
        out = np.empty((len(epsilons), train.shape[0], test.shape[1]))
        for k in range(train.shape[0]):
            for e, epsilon in enumerate(epsilons):
                state = (seed * 1_000_003 + i * 100_003 + k * 101 + e) % 2**32
                if regression:
                    d = X.shape[1]
                    model = LinearRegression(
                        epsilon=epsilon,
                        bounds_X=(np.full(d, -bound), np.full(d, bound)),
                        bounds_y=tuple(float(v) for v in data[f"{i}_label_range"]),
                        random_state=state,
                        accountant=BudgetAccountant(),
                    )
                else:
                    model = LogisticRegression(
                        epsilon=epsilon,
                        data_norm=bound,
                        random_state=state,
                        accountant=BudgetAccountant(),
                    )
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    model.fit(X[train[k]], y[train[k]])
                for w in caught:
                    key = f"{name}: {w.category.__name__}: {str(w.message).splitlines()[0][:90]}"
                    caught_all[key] = caught_all.get(key, 0) + 1
                out[e, k] = model.predict(X[test[k]])
        preds[str(i)] = out
    info = {
        "diffprivlib": diffprivlib.__version__,
        "scikit-learn": sklearn.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "warnings": caught_all,
    }
    return preds, info


def _worker_main(in_path: str, out_path: str) -> int:
    with np.load(in_path) as f:
        data = {k: f[k] for k in f.files}
    t0 = time.perf_counter()
    preds, info = _diffprivlib_predictions(data)
    info["seconds"] = time.perf_counter() - t0
    np.savez(
        out_path, info=np.array(json.dumps(info)), **{f"pred_{k}": v for k, v in preds.items()}
    )
    return 0


class _Worker:
    """The diffprivlib side in a subprocess of its environment (started at once, collected
    after the dpcvx side)."""

    def __init__(self, env: Path, datasets, splits, epsilons, seed: int) -> None:
        payload: dict[str, Any] = {
            "epsilons": np.asarray(epsilons, float),
            "seed": seed,
            "names": ",".join(ds.name for ds in datasets),
        }
        for i, ds in enumerate(datasets):
            payload |= {
                f"{i}_X": ds.X,
                f"{i}_y": ds.y,
                f"{i}_train": splits[i][0],
                f"{i}_test": splits[i][1],
                f"{i}_kind": ds.kind,
                f"{i}_norm_bound": ds.norm_bound,
                f"{i}_label_range": np.asarray(ds.label_range or (0.0, 0.0), float),
            }
        self._count = len(datasets)
        self._tmp = tempfile.TemporaryDirectory(prefix="bench_datasets_")
        self._in = Path(self._tmp.name) / "in.npz"
        self._out = Path(self._tmp.name) / "out.npz"
        np.savez(self._in, **payload)
        cmd = [str(bdl.env_python(env)), str(Path(__file__).resolve()), "--worker"]
        self._proc = subprocess.Popen(
            [*cmd, str(self._in), str(self._out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def collect(self) -> tuple[list[np.ndarray], dict[str, Any]]:
        try:
            _, stderr = self._proc.communicate(timeout=bdl.WORKER_TIMEOUT)
            if self._proc.returncode != 0 or not self._out.exists():
                raise RuntimeError(
                    f"the diffprivlib worker failed (exit {self._proc.returncode}):\n"
                    f"{stderr[-3000:]}"
                )
            with np.load(self._out) as f:
                info = json.loads(str(f["info"]))
                preds = [f[f"pred_{i}"] for i in range(self._count)]
            return preds, info
        finally:
            self.close()

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._tmp.cleanup()


# --------------------------------------------------------------------------- the run
def run(
    *,
    splits: int,
    epsilons: Sequence[float],
    seed: int,
    smoke: bool,
    env: Path,
    require_diffprivlib: bool = False,
    skip_diffprivlib: bool = False,
    only: Sequence[str] | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Every method on every dataset (``only``: these) on the same splits; the JSON document
    of the run."""
    t_start = time.perf_counter()
    datasets, notes = load_datasets(smoke=smoke, only=only)
    versions = None
    if skip_diffprivlib:
        notes.append("diffprivlib side skipped (--skip-diffprivlib)")
    else:
        versions, reason = bdl.probe_env(env)
        if versions is None:
            msg = (
                f"diffprivlib environment missing ({reason}). Create it with:\n"
                f"    {bdl.setup_command(env)}"
            )
            if require_diffprivlib:
                raise bdl.EnvironmentMissing(msg)
            log("NOTE: " + msg + "\nRunning the dpcvx side only.")
            notes.append(f"diffprivlib side not run: {reason}")
    split_sets = [bdl.make_splits(len(ds.y), splits, seed) for ds in datasets]
    worker = None if versions is None else _Worker(env, datasets, split_sets, epsilons, seed)
    # scores[dataset][metric][method] -> (n_eps, splits) with NaN for a failed release
    scores: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    failures: dict[str, int] = {}
    caught: dict[str, int] = {}
    try:
        for i, ds in enumerate(datasets):
            t0 = time.perf_counter()
            train, test = split_sets[i]
            names = [m.name for m in METHODS if m.applies(ds)] + [DIFFPRIVLIB, NONPRIVATE]
            cell = {
                metric: {m: np.full((len(epsilons), splits), np.nan) for m in names}
                for metric, _ in metrics(ds)
            }
            for k in range(splits):
                y_test = ds.y[test[k]]
                reference = nonprivate_predict(ds, train[k], test[k])
                for metric, fn in metrics(ds):
                    cell[metric][NONPRIVATE][:, k] = fn(y_test, reference)
                for j, method in enumerate(METHODS):
                    if not method.applies(ds):
                        continue
                    for e, epsilon in enumerate(epsilons):
                        pred = _release(method, ds, train[k], test[k], epsilon, [seed, i, j, k, e])
                        if isinstance(pred, str):
                            failures[method.name] = failures.get(method.name, 0) + 1
                            continue
                        for metric, fn in metrics(ds):
                            cell[metric][method.name][e, k] = fn(y_test, pred[0])
                        for key in pred[1]:
                            caught[key] = caught.get(key, 0) + 1
            scores[ds.name] = cell
            log(f"  {ds.name}: dpcvx side done in {time.perf_counter() - t0:.1f} s")
        dpl_info: dict[str, Any] = {"env": str(env), "versions": versions}
        if worker is not None:
            preds, info = worker.collect()
            dpl_info |= info
            for i, ds in enumerate(datasets):
                for metric, fn in metrics(ds):
                    for e in range(len(epsilons)):
                        for k in range(splits):
                            scores[ds.name][metric][DIFFPRIVLIB][e, k] = fn(
                                ds.y[split_sets[i][1][k]], preds[i][e, k]
                            )
    finally:
        if worker is not None:
            worker.close()
    if failures:
        notes.append(f"releases that raised CertificationError (left out): {failures}")
    return {
        "benchmark": "bench_datasets",
        "config": {"splits": splits, "epsilons": list(epsilons), "seed": seed, "smoke": smoke},
        "datasets": [
            {
                "name": ds.name,
                "kind": ds.kind,
                "source": ds.source,
                "n": int(len(ds.y)),
                "d": int(ds.X.shape[1]),
                "classes": len(ds.classes) or None,
                "norm_bound": ds.norm_bound,
                "label_range": ds.label_range,
            }
            for ds in datasets
        ],
        "summary": {
            ds: {metric: {m: _summarize(v) for m, v in per.items()} for metric, per in c.items()}
            for ds, c in scores.items()
        },
        "raw": {
            ds: {metric: {m: v.tolist() for m, v in per.items()} for metric, per in c.items()}
            for ds, c in scores.items()
        },
        "have_diffprivlib": worker is not None,
        "environment": {"diffprivlib_side": dpl_info, "dpcvx_warnings": caught},
        "wall_seconds": time.perf_counter() - t_start,
        "notes": notes,
    }


def _release(method: Method, ds, train, test, epsilon, seed) -> tuple[np.ndarray, list] | str:
    """One private release: (test predictions, warnings) or the error's name."""
    import dpcvx

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            pred = method.fit_predict(ds, train, test, epsilon, np.random.default_rng(seed))
        except dpcvx.CertificationError as exc:
            return type(exc).__name__
    keys = [f"{ds.name} / {method.name}: {w.category.__name__}" for w in caught]
    return np.asarray(pred, float), keys


def _summarize(values: np.ndarray) -> list[dict[str, Any]]:
    """Mean and standard error per epsilon (rows of ``values``)."""
    return [bdl._summary(v for v in row if np.isfinite(v)) for row in values]


# --------------------------------------------------------------------------- output
def format_table(doc: dict[str, Any]) -> str:
    eps = doc["config"]["epsilons"]
    info = {d["name"]: d for d in doc["datasets"]}
    body = []
    for name, per_metric in doc["summary"].items():
        d = info[name]
        label = f"{name} (n={d['n']}, d={d['d']}" + (
            f", K={d['classes']})" if d["classes"] else ")"
        )
        for metric, per in per_metric.items():
            width = d["label_range"][1] - d["label_range"][0] if d["label_range"] else 0.0
            digits = 3 if metric == "R^2" or (metric == "MAE" and width < 50) else 1
            for method, cells in per.items():
                if method == DIFFPRIVLIB and not doc["have_diffprivlib"]:
                    continue
                body.append([label, metric, method] + [bdl._cell(c, digits=digits) for c in cells])
                label = ""
    return bdl._table(["dataset", "metric", "method"] + [f"eps={e:g}" for e in eps], body)


def losses_to_diffprivlib(doc: dict[str, Any]) -> list[str]:
    """The cells where a dpcvx method's mean is behind diffprivlib's, with the paired
    difference's standard error."""
    if not doc["have_diffprivlib"]:
        return []
    out = []
    for name, per_metric in doc["raw"].items():
        for metric, per in per_metric.items():
            better = 1.0 if metric != "MAE" else -1.0
            dpl = np.asarray(per[DIFFPRIVLIB], float)
            for method, values in per.items():
                if method in (DIFFPRIVLIB, NONPRIVATE):
                    continue
                diff = better * (np.asarray(values, float) - dpl)
                for e, epsilon in enumerate(doc["config"]["epsilons"]):
                    s = bdl._summary(v for v in diff[e] if np.isfinite(v))
                    if s["mean"] is not None and s["mean"] < 0:
                        se = "" if s["se"] is None else f" ± {s['se']:.3g}"
                        out.append(
                            f"{name} {metric} eps={epsilon:g}: {method} behind diffprivlib by "
                            f"{-s['mean']:.3g}{se} (paired)"
                        )
    return out


def format_report(doc: dict[str, Any]) -> str:
    cfg = doc["config"]
    out = [
        "",
        f"== dpcvx vs diffprivlib vs non-private: mean ± standard error over {cfg['splits']} "
        "random 80/20 splits, pure epsilon-DP ==",
        "(accuracy in %, MAE in label units; regression predictions clipped to the public "
        "label range)",
        format_table(doc),
    ]
    behind = losses_to_diffprivlib(doc)
    if doc["have_diffprivlib"]:
        out += ["", f"cells where a dpcvx method is behind diffprivlib: {len(behind)}"]
        out += [f"  {line}" for line in behind]
    dpl = doc["environment"]["diffprivlib_side"]
    if dpl.get("warnings"):
        out.append(
            "diffprivlib warnings (count): "
            + "; ".join(f"{k} x{v}" for k, v in sorted(dpl["warnings"].items()))
        )
    if doc["environment"]["dpcvx_warnings"]:
        out.append(
            "dpcvx warnings (count): "
            + "; ".join(
                f"{k} x{v}" for k, v in sorted(doc["environment"]["dpcvx_warnings"].items())
            )
        )
    out += [f"note: {n}" for n in doc["notes"]]
    return "\n".join(out)


# --------------------------------------------------------------------------- CLI
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="dpcvx vs diffprivlib vs the non-private fit on the datasets installed "
        "packages ship (classification, multiclass, regression, heavy-tailed synthetic), one "
        "table. The diffprivlib side runs in bench_diffprivlib.py's environment "
        "(python benchmarks/bench_diffprivlib.py --setup)."
    )
    p.add_argument(
        "--smoke",
        action="store_true",
        help=f"quick CI run: {SMOKE_SPLITS} splits, epsilon 1, the smaller datasets",
    )
    p.add_argument("--splits", type=int, default=None, help=f"random splits (default {SPLITS})")
    p.add_argument(
        "--epsilons",
        default=None,
        help=f"comma-separated epsilons (default {','.join(f'{e:g}' for e in EPSILONS)})",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the splits and noise (default 0)")
    p.add_argument(
        "--env",
        type=Path,
        default=bdl.DEFAULT_ENV,
        help=f"the diffprivlib environment (default ${bdl.ENV_VARIABLE}, else {bdl.DEFAULT_ENV})",
    )
    p.add_argument(
        "--require-diffprivlib",
        action="store_true",
        help="exit 2 instead of running the dpcvx side only when the environment is missing",
    )
    p.add_argument("--skip-diffprivlib", action="store_true", help="run the dpcvx side only")
    p.add_argument(
        "--datasets",
        default=None,
        help="comma-separated dataset names (default: all; "
        + ", ".join(n for n, *_ in DATASETS)
        + ")",
    )
    p.add_argument(
        "--output",
        default=None,
        help=f"JSON output ('-' for none; default {DEFAULT_OUTPUT.name}, or "
        f"{SMOKE_OUTPUT.name} with --smoke, in the results folder)",
    )
    p.add_argument("--worker", nargs=2, metavar=("IN_NPZ", "OUT_NPZ"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return _worker_main(*args.worker)
    log = lambda s: print(s, flush=True)
    epsilons = (
        bdl._floats(args.epsilons) if args.epsilons else SMOKE_EPSILONS if args.smoke else EPSILONS
    )
    try:
        doc = run(
            splits=args.splits or (SMOKE_SPLITS if args.smoke else SPLITS),
            epsilons=epsilons,
            seed=args.seed,
            smoke=args.smoke,
            env=args.env,
            require_diffprivlib=args.require_diffprivlib,
            skip_diffprivlib=args.skip_diffprivlib,
            only=args.datasets.split(",") if args.datasets else None,
            log=log,
        )
    except bdl.EnvironmentMissing as exc:
        print(f"ERROR: {exc}", file=sys.stderr, flush=True)
        return 2
    print(format_report(doc), flush=True)
    output = (
        None
        if args.output == "-"
        else Path(args.output)
        if args.output
        else SMOKE_OUTPUT
        if args.smoke
        else DEFAULT_OUTPUT
    )
    if output is not None:
        write_json(doc, output)
        print(f"\nresults written to {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
