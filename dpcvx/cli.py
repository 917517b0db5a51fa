"""The ``dpcvx`` command line: ``demo``, ``bench`` and ``audit``.

Installed as the console script ``dpcvx`` (``python -m dpcvx`` works too)::

    dpcvx demo [--epsilon E] [--seed S] [--plot PATH] [--quiet]
    dpcvx bench [NAME] [--smoke] [--list] [--dir PATH] [-- ARGS...]
    dpcvx audit MECHANISM [--runs N] [--seed S] [--alpha A] [--method M]

Exit status: 0 on success, 2 on a usage error (bad option, unknown name, invalid value: the
message says what to do, with no traceback), 1 on a failure (an audit that does not pass, a
benchmark that fails, a solve that cannot be certified, a missing benchmarks folder).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from dpcvx.errors import DpcvxError, InvalidParameterError, ModelingError

__all__ = ["main"]

PROG = "dpcvx"
#: default file of the demo's risk-vs-epsilon plot (in the current directory)
DEMO_PLOT = "dpcvx-demo-risk.png"
#: the demo's epsilon grid
DEMO_EPSILONS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0)
#: smoke arguments of benchmarks that have no ``--smoke`` option of their own
SMOKE_ARGS = {"bench_extension": ("--n", "300", "--d", "5")}

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A user error found after parsing (unknown name, bad path): exit status 2."""


class Failure(Exception):
    """A failure that is not the user's fault: exit status 1."""


# ============================================================================ parser
class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the epilogs' line breaks and shows defaults where they are set."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            "%(default)" not in text
            and action.default not in (None, False, argparse.SUPPRESS)
            and action.option_strings
        ):
            text += " (default: %(default)s)"
        return text


def _wrap(text: str) -> str:
    """A description wrapped to 79 columns (the formatter keeps line breaks as written)."""
    return textwrap.fill(text, 79, break_on_hyphens=False)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive finite number, got {text!r}")
    return value


def _regularization(text: str) -> float | None:
    """``auto`` (None) or a positive finite number."""
    if text.strip().lower() == "auto":
        return None
    return _positive_float(text)


def _auto_regularization(lipschitz: float, radius: float, n: int, d: int, epsilon: float) -> float:
    """The estimators' automatic ``lam = 2 L sqrt(d / (epsilon n)) / R`` (pure epsilon): it
    balances the bias ``lam R^2 / 2`` against the noise's effect ``2 L^2 d / (epsilon lam n)``,
    from public quantities only (``docs/estimators.md``)."""
    return 2.0 * lipschitz * math.sqrt(d / (epsilon * n)) / radius


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a non-negative integer seed, got {text!r}"
        ) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer seed, got {text!r}")
    return value


def _epsilon_list(text: str) -> tuple[float, ...]:
    try:
        values = tuple(_positive_float(v) for v in text.split(",") if v.strip())
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated positive numbers such as 0.5,1,2, got {text!r}"
        ) from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one epsilon")
    return tuple(sorted(set(values)))


def build_parser() -> argparse.ArgumentParser:
    """The ``dpcvx`` argument parser (subcommands ``demo``, ``bench``, ``audit``)."""
    from dpcvx import __version__

    parser = argparse.ArgumentParser(
        prog=PROG,
        formatter_class=_Formatter,
        description=_wrap(
            "dpcvx: differentially private convex optimization declared in "
            "CVXPY, with solves certified by dpcvx."
        ),
        epilog=(
            "commands:\n"
            "  dpcvx demo             a private classifier on breast_cancer, with a plot\n"
            "  dpcvx bench [NAME]     run the benchmarks (or one) and print their tables\n"
            "  dpcvx audit MECHANISM  empirical privacy audit with a negative control\n\n"
            "Run `dpcvx COMMAND --help` for a command's options. Exit status: 0 success, "
            "2 usage error, 1 failure."
        ),
    )
    parser.add_argument("--version", action="version", version=f"dpcvx {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser(
        "demo",
        formatter_class=_Formatter,
        help="private linear classifier on scikit-learn's breast_cancer, with a plot",
        description=_wrap(
            "Fit a pure epsilon-DP linear classifier (hinge loss, certified output "
            "perturbation) on scikit-learn's breast_cancer data and compare it with the "
            "non-private certified fit. Preprocessing is public: a fixed train/test split, "
            "standardization, every row clipped to norm 1 (so the loss is 1-Lipschitz for "
            "every possible example). Prints the guarantee, dpcvx's certificates and the "
            "accuracies, then fits the grid of epsilons and saves a risk-vs-epsilon plot."
        ),
        epilog=(
            "example:\n  dpcvx demo --epsilon 0.5 --seed 0 --plot risk.png\n\n"
            + _wrap(
                "Without --seed the noise comes from OS cryptographic randomness (as "
                "in a real release); with it, results are reproducible and marked "
                "SEEDED."
            )
        ),
    )
    demo.add_argument(
        "--epsilon",
        type=_positive_float,
        default=1.0,
        help="privacy budget of the reported fit (pure epsilon-DP)",
    )
    demo.add_argument(
        "--seed",
        type=_seed,
        default=None,
        help="seed the noise (reproducible; not for a real release)",
    )
    demo.add_argument(
        "--regularization",
        type=_regularization,
        default=None,
        metavar="LAM|auto",
        help="lam of the regularized ERM (public); 'auto' (default): the estimators' rule "
        "2 L sqrt(d / (epsilon n)) / R for every epsilon",
    )
    demo.add_argument(
        "--epsilons",
        type=_epsilon_list,
        default=",".join(f"{e:g}" for e in DEMO_EPSILONS),
        metavar="E1,E2,...",
        help="epsilon grid of the plot",
    )
    demo.add_argument(
        "--repeats",
        type=_positive_int,
        default=10,
        help="private fits per epsilon of the grid (the plot shows their median and range)",
    )
    demo.add_argument(
        "--plot",
        default=DEMO_PLOT,
        metavar="PATH",
        help="where to save the risk-vs-epsilon plot (PNG, PDF or SVG)",
    )
    demo.add_argument("--no-plot", action="store_true", help="skip the grid and the plot")
    demo.add_argument(
        "--quiet",
        action="store_true",
        help="print only the guarantee, the certificates, the accuracies and "
        "the plot's path; no progress bar",
    )

    bench = sub.add_parser(
        "bench",
        formatter_class=_Formatter,
        help="run the benchmark suite or one benchmark and print its tables",
        description=_wrap(
            "Run the benchmarks (the repository's benchmarks/ folder, shipped with the package: "
            "every bench_*.py), "
            "or one of them, each in its own Python process, and print their tables of "
            "ratios measured side by side. The full suite takes a long time (see "
            "benchmarks/README.md); --smoke runs the quick CI configuration."
        ),
        epilog=(
            "examples:\n"
            "  dpcvx bench --list\n"
            "  dpcvx bench --smoke                 # every benchmark, quick\n"
            "  dpcvx bench erm --smoke             # one benchmark (bench_erm.py)\n"
            "  dpcvx bench erm -- --repeats 1      # arguments after -- go to the script\n"
            "  dpcvx bench speed --smoke --out results/\n"
            "\n"
            + _wrap(
                "The scripts' JSON results go to --out (default benchmarks/results in a "
                "clone, ./dpcvx-bench-results for an installed package); nothing is written "
                "into an installed package."
            )
        ),
    )
    bench.add_argument(
        "name",
        nargs="?",
        metavar="NAME",
        help="a benchmark (e.g. bench_erm or erm); all when omitted",
    )
    bench.add_argument(
        "--smoke", action="store_true", help="the quick CI configuration of each benchmark"
    )
    bench.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    bench.add_argument(
        "--dir",
        default=None,
        metavar="PATH",
        help="the benchmarks folder (default: the scripts shipped with the package: the "
        "repository's benchmarks/)",
    )
    bench.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="folder of the benchmarks' JSON results (default: benchmarks/results in a clone, "
        "./dpcvx-bench-results for an installed package)",
    )

    audit = sub.add_parser(
        "audit",
        formatter_class=_Formatter,
        help="empirical privacy audit of a mechanism and its negative control",
        description=_wrap(
            "Run the empirical privacy audit of dpcvx.audit on a mechanism's worst-case "
            "neighboring pair: seeded releases on both datasets, threshold tests with "
            "Clopper-Pearson intervals (Bonferroni), and an empirical lower bound on epsilon, "
            "which must not exceed the claimed epsilon. The same audit runs on a negative "
            "control (noise calibrated to a multiple of epsilon, charged epsilon), which it "
            "must catch. EM-PGM is audited exactly (its output distribution is computed over "
            "the net). Exit status 1 if the mechanism fails or the control is missed."
        ),
        epilog=(
            "examples:\n"
            "  dpcvx audit --list\n"
            "  dpcvx audit output-perturbation --runs 20000 --seed 3\n"
            "  dpcvx audit ldop\n"
            "  dpcvx audit all\n\n"
            "An audit can refute a privacy claim but never prove one."
        ),
    )
    audit.add_argument(
        "mechanism", nargs="?", metavar="MECHANISM", help="a mechanism name (see --list), or 'all'"
    )
    audit.add_argument(
        "--runs",
        type=_positive_int,
        default=None,
        help="releases per dataset for each audit (default: the mechanism's "
        "own, enough to catch its control)",
    )
    audit.add_argument(
        "--seed",
        type=_seed,
        default=0,
        help="seed of the mechanism's releases (the control uses seed + 1)",
    )
    audit.add_argument(
        "--alpha",
        type=_positive_float,
        default=1e-3,
        help="total error level of the simultaneous intervals",
    )
    audit.add_argument(
        "--method",
        choices=("auto", "sampled", "exact"),
        default="auto",
        help="auto: exact where available (em-pgm), sampled otherwise",
    )
    audit.add_argument("--list", action="store_true", help="list the mechanisms and exit")
    audit.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


# ============================================================================ demo
def _demo(args: argparse.Namespace) -> int:
    import cvxpy as cp
    import numpy as np
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    import dpcvx
    from dpcvx._progress import progress_bar

    plot_path = None if args.no_plot else _plot_path(args.plot)
    features, labels = load_breast_cancer(return_X_y=True)
    # Public preprocessing (as in examples/quickstart.py): a fixed split, standardization,
    # rows clipped to norm 1 so that the hinge loss is 1-Lipschitz for every possible example.
    # (The scaler's statistics come from the training rows; a real deployment fixes them
    # from public knowledge.)
    X_train, X_test, y_train, y_test = train_test_split(
        features, labels, test_size=0.25, random_state=0, stratify=labels
    )
    scaler = StandardScaler().fit(X_train)

    def prepare(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        Z = scaler.transform(X)
        Z /= np.maximum(1.0, np.linalg.norm(Z, axis=1, keepdims=True))
        return Z, 2.0 * y - 1.0

    X, Y = prepare(X_train, y_train)
    Xt, Yt = prepare(X_test, y_test)
    n, d = X.shape
    radius = 5.0

    def lam_for(epsilon: float) -> float:
        if args.regularization is not None:
            return float(args.regularization)
        return _auto_regularization(1.0, radius, n, d, epsilon)

    lam = lam_for(args.epsilon)
    majority = float(max(np.mean(Yt > 0), np.mean(Yt < 0)))
    w = cp.Variable(d)
    x = cp.Parameter(d)
    y = cp.Parameter()
    problem = dpcvx.Problem(
        dpcvx.losses.hinge(x @ w, y), w, data={x: X, y: Y}, domain=dpcvx.domains.l2_ball(w, radius)
    )
    mechanism = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=lam)
    rule = "automatic" if args.regularization is None else "fixed"

    def accuracy(v: np.ndarray, A: np.ndarray, b: np.ndarray) -> float:
        return float(np.mean(np.where(A @ v >= 0, 1.0, -1.0) == b))

    def risk(v: np.ndarray, A: np.ndarray, b: np.ndarray) -> float:
        return float(np.mean(np.maximum(0.0, 1.0 - b * (A @ v))))

    exact = problem.solve(regularization=lam)
    result = problem.solve_private(mechanism, epsilon=args.epsilon, rng=args.seed)
    say = print
    say(
        f"dpcvx demo: breast_cancer, {n} training and {len(Yt)} test examples, d = {d}; "
        f"hinge loss, l2 ball of radius {radius:g}, lam = {lam:.4g} ({rule})"
    )
    say(
        f"guarantee: {dpcvx.Guarantee(epsilon=result.epsilon, delta=result.delta)}"
        + ("  [SEEDED: reproducible noise, not for a real release]" if result.seeded else "")
    )
    if args.quiet:
        for cert in result.certificates:
            say(f"certificate: {cert}")
    else:
        say("")
        say(result.summary())
    say(f"non-private certified solve (same lam): {exact}")
    say("")
    rows = [(f"private (epsilon = {args.epsilon:g})", result.w), ("non-private", exact.w)]
    say(f"{'':28s} {'train acc':>9s} {'test acc':>9s} {'test risk':>9s}")
    for label, v in rows:
        say(
            f"{label:28s} {accuracy(v, X, Y):9.3f} {accuracy(v, Xt, Yt):9.3f} "
            f"{risk(v, Xt, Yt):9.4f}"
        )
    say(f"{'majority class (baseline)':28s} {'':9s} {majority:9.3f}")
    if plot_path is None:
        return EXIT_OK

    epsilons = args.epsilons
    # the grid's non-private reference: the certified fit at the grid's smallest lam
    best = problem.solve(regularization=min(lam_for(e) for e in epsilons))
    grid = [(e, r) for e in epsilons for r in range(args.repeats)]  # k % repeats == r
    risks: dict[float, list[float]] = {e: [] for e in epsilons}
    accs: dict[float, list[float]] = {e: [] for e in epsilons}
    for k, (e, _) in enumerate(
        progress_bar(grid, desc="demo: epsilon grid", unit="fit", enabled=not args.quiet)
    ):
        # seeded: the r-th fit of every epsilon shares its seed (common random numbers, so
        # the curve compares epsilons, not draws)
        seed = None if args.seed is None else args.seed + 1 + k % args.repeats
        mech = dpcvx.OutputPerturbation(lipschitz=1.0, regularization=lam_for(e))
        v = problem.solve_private(mech, epsilon=e, rng=seed).w
        risks[e].append(risk(v, Xt, Yt))
        accs[e].append(accuracy(v, Xt, Yt))
    if not args.quiet:
        say("")
        say(
            f"test risk and accuracy vs epsilon (median of {args.repeats} private fits"
            + ("" if args.seed is None else ", seeded")
            + ")"
        )
        say(f"{'epsilon':>8s} {'risk':>8s} {'accuracy':>8s}")
        for e in epsilons:
            say(f"{e:8g} {np.median(risks[e]):8.4f} {np.median(accs[e]):8.3f}")
        say(f"{'non-private':>8s} {risk(best.w, Xt, Yt):8.4f} {accuracy(best.w, Xt, Yt):8.3f}")
        say(f"{'majority':>8s} {'':8s} {majority:8.3f}")
    _save_plot(
        plot_path,
        epsilons,
        risks,
        accs,
        risk(best.w, Xt, Yt),
        accuracy(best.w, Xt, Yt),
        majority,
        args,
    )
    say(f"plot saved to {plot_path}")
    return EXIT_OK


def _plot_path(text: str) -> Path:
    path = Path(text).expanduser()
    if path.suffix.lower() not in (".png", ".pdf", ".svg"):
        raise UsageError(f"--plot must end in .png, .pdf or .svg. Got {text!r}.")
    parent = path.resolve().parent
    if not parent.is_dir():
        raise UsageError(
            f"--plot: the folder {str(parent)!r} does not exist. Create it or choose another path."
        )
    return path.resolve()


def _save_plot(
    path: Path,
    epsilons: Sequence[float],
    risks: Mapping[float, Sequence[float]],
    accs: Mapping[float, Sequence[float]],
    exact_risk: float,
    exact_acc: float,
    majority: float,
    args: argparse.Namespace,
) -> None:
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4), layout="constrained")
    FigureCanvasAgg(fig)  # the Agg backend, without touching pyplot's global state
    left, right = fig.subplots(1, 2)
    eps = np.asarray(epsilons, float)
    for ax, values, exact, name in (
        (left, risks, exact_risk, "test hinge risk"),
        (right, accs, exact_acc, "test accuracy"),
    ):
        arr = [np.asarray(values[e]) for e in epsilons]
        med = np.array([np.median(a) for a in arr])
        ax.fill_between(
            eps,
            [a.min() for a in arr],
            [a.max() for a in arr],
            alpha=0.25,
            color="C0",
            label=f"range of {args.repeats} fits",
        )
        ax.plot(eps, med, "o-", color="C0", label="dpcvx, pure epsilon-DP (median)")
        ax.axhline(exact, color="k", ls="--", label="non-private (certified, smallest lam)")
        if ax is right:
            ax.axhline(majority, color="C7", ls="-.", label="majority class")
        ax.axvline(args.epsilon, color="C3", ls=":", lw=1, label=f"epsilon = {args.epsilon:g}")
        ax.set_xscale("log")
        ax.set_xlabel("epsilon")
        ax.set_ylabel(name)
        ax.grid(True, which="both", alpha=0.3)
    right.legend(loc="lower right", fontsize="small")
    fig.suptitle(
        "dpcvx demo: breast_cancer, certified output perturbation (hinge loss, lam "
        + (
            "automatic per epsilon)"
            if args.regularization is None
            else f"= {args.regularization:g})"
        )
    )
    try:
        fig.savefig(path, dpi=120)
    except OSError as err:
        raise Failure(
            f"could not save the plot to {str(path)!r}: {err.strerror or err}. "
            "Choose another --plot path."
        ) from None


# ============================================================================ bench
def _installed_benchmarks() -> Path | None:
    """The benchmark scripts shipped in the package (``dpcvx._benchmarks``: the repository's
    benchmarks/ folder, in a clone or an installed wheel)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("dpcvx._benchmarks")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(location)
        if path.is_dir() and list(path.glob("bench_*.py")):
            return path.resolve()
    return None


def _find_benchmarks(directory: str | None) -> Path:
    if directory is not None:
        path = Path(directory).expanduser().resolve()
        if not path.is_dir() or not list(path.glob("bench_*.py")):
            raise UsageError(
                f"--dir {directory!r} is not a folder with bench_*.py scripts. Point it at the "
                "repository's benchmarks/ folder."
            )
        return path
    here = Path(__file__).resolve().parent.parent / "benchmarks"
    for candidate in (here, _installed_benchmarks(), Path.cwd() / "benchmarks"):
        if candidate is not None and candidate.is_dir() and list(candidate.glob("bench_*.py")):
            return candidate.resolve()
    raise Failure(
        "no benchmark scripts were found: not beside the package, not installed with it "
        "(dpcvx._benchmarks) and not in ./benchmarks. Reinstall dpcvx, or pass "
        "`--dir path/to/benchmarks`."
    )


def _results_folder(folder: Path, out: str | None) -> Path:
    """``--out``, else ``results/`` beside the scripts when they are a writable checkout,
    else ``./dpcvx-bench-results`` (never inside an installed package)."""
    if out is not None:
        path = Path(out).expanduser().resolve()
    elif (folder.parent / "pyproject.toml").is_file() and os.access(folder, os.W_OK):
        path = folder / "results"
    else:
        path = Path.cwd() / "dpcvx-bench-results"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(
            f"--out: cannot create the folder {str(path)!r} ({err.strerror or err}). "
            "Choose another output folder."
        ) from None
    return path


def _benchmark_names(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("bench_*.py"))


def _resolve_benchmark(name: str, names: list[str]) -> str:
    key = re.sub(r"\.py$", "", name.strip().lower()).replace("-", "_")
    for candidate in (key, f"bench_{key}"):
        if candidate in names:
            return candidate
    short = ", ".join(n.removeprefix("bench_") for n in names)
    raise UsageError(
        f"unknown benchmark {name!r}. Valid names: {', '.join(names)} (or without the "
        f"bench_ prefix: {short})."
    )


def _smoke_args(path: Path) -> tuple[str, ...] | None:
    """``--smoke`` when the script has it, the registered smoke arguments otherwise, or None
    (no smoke configuration known)."""
    if "--smoke" in path.read_text(encoding="utf-8", errors="replace"):
        return ("--smoke",)
    return SMOKE_ARGS.get(path.stem)


def _bench(args: argparse.Namespace, extra: list[str]) -> int:
    folder = _find_benchmarks(args.dir)
    names = _benchmark_names(folder)
    if args.list:
        print(f"benchmarks in {folder}:")
        for name in names:
            path = folder / f"{name}.py"
            doc = _first_doc_line(path)
            note = "" if _smoke_args(path) is not None else "  [no smoke configuration]"
            print(f"  {name:24s} {doc}{note}")
        return EXIT_OK
    if args.name is None:
        if extra:
            raise UsageError("arguments after -- go to one benchmark: give its NAME too.")
        selected = names
    else:
        selected = [_resolve_benchmark(args.name, names)]
    plan = []
    for name in selected:
        path = folder / f"{name}.py"
        script_args: tuple[str, ...] = ()
        if args.smoke:
            smoke = _smoke_args(path)
            if smoke is None:
                if args.name is not None:
                    raise UsageError(
                        f"{name} has no smoke configuration (no --smoke option and none "
                        f"registered in dpcvx.cli.SMOKE_ARGS). Run it without --smoke, with "
                        f"its own arguments after --: `dpcvx bench {name} -- --help`."
                    )
                print(f"== {name}: skipped (no smoke configuration)", flush=True)
                continue
            script_args = smoke
        plan.append((name, path, script_args + tuple(extra)))
    env = os.environ.copy()
    package_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    results = _results_folder(folder, args.out)
    env["DPCVX_BENCH_OUT"] = str(results)  # the scripts' JSON go there (benchmarks/_common.py)
    print(f"== results in {results}", flush=True)
    summary = []
    for name, path, script_args in plan:
        print(f"== {name} {' '.join(script_args)}".rstrip(), flush=True)
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                [sys.executable, str(path), *script_args],
                cwd=str(folder.parent if results.parent == folder else results),
                env=env,
                check=False,
            )
            code = proc.returncode
        except KeyboardInterrupt:
            print(f"== {name}: interrupted", file=sys.stderr, flush=True)
            raise
        summary.append((name, code, time.perf_counter() - start))
        print(flush=True)
    if len(summary) > 1 or args.name is None:
        print("== summary")
        print(f"{'benchmark':24s} {'status':>8s} {'seconds':>9s}")
        for name, code, seconds in summary:
            status = "ok" if code == 0 else f"exit {code}"
            print(f"{name:24s} {status:>8s} {seconds:9.1f}")
    failed = [name for name, code, _ in summary if code != 0]
    if failed:
        print(f"{PROG} bench: failed: {', '.join(failed)} (see the output above)", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def _first_doc_line(path: Path) -> str:
    import ast

    try:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    except (SyntaxError, ValueError, OSError):
        return ""
    if not doc:
        return ""
    first = " ".join(doc.strip().split("\n\n")[0].split())
    return first if len(first) <= 100 else first[:97].rstrip() + "..."


# ============================================================================ audit
def _audit(args: argparse.Namespace) -> int:
    from dpcvx.audit import audit_case, audit_cases, audit_mechanism

    cases = audit_cases()
    if args.list:
        print("mechanisms (name: aliases):")
        for case in cases.values():
            kind = "exact" if case.exact else f"sampled, {case.runs} runs per dataset"
            print(
                f"  {case.name}: {', '.join(case.aliases)}  [{kind}; control "
                f"{case.control_factor:g}x]"
            )
        print("  all: every mechanism above")
        return EXIT_OK
    if args.mechanism is None:
        raise UsageError(
            "give a MECHANISM to audit: " + ", ".join(cases) + ", or all (`dpcvx audit "
            "--list` describes them)."
        )
    if args.mechanism.strip().lower() == "all":
        selected = list(cases.values())
    else:
        selected = [audit_case(args.mechanism)]
    if args.method == "exact":
        missing = [c.name for c in selected if not c.exact]
        if missing:
            raise UsageError(
                f"--method exact needs an exact output distribution, which "
                f"{', '.join(missing)} does not have. Use --method sampled or auto."
            )
    status = EXIT_OK
    for i, case in enumerate(selected):
        if i:
            print()
        report = audit_mechanism(
            case,
            runs=args.runs,
            seed=args.seed,
            alpha=args.alpha,
            method=args.method,
            progress=not args.no_progress,
        )
        print(report, flush=True)
        if not report.ok:
            status = EXIT_FAILURE
    return status


# ============================================================================ entry point
def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``dpcvx`` command line; returns the exit status (0, 1 or 2)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, --version (0) or a usage error (2, already printed)
        return int(exit_.code or 0)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if extra and args.command != "bench":
        print(
            f"{PROG} {args.command}: error: unexpected arguments after --: {' '.join(extra)}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        if args.command == "demo":
            return _demo(args)
        if args.command == "bench":
            return _bench(args, extra)
        return _audit(args)
    except (UsageError, InvalidParameterError, ModelingError) as err:
        print(f"{PROG} {args.command}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except (Failure, DpcvxError) as err:
        print(f"{PROG} {args.command}: failed: {err}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print(f"{PROG} {args.command}: interrupted", file=sys.stderr)
        return 130
