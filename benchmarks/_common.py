"""Helpers shared by the benchmark scripts (they run as scripts: this folder is on sys.path)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

__all__ = [
    "RESULTS_ENV",
    "add_size_arguments",
    "results_dir",
    "save_rows",
    "sizes",
    "write_json",
]

#: ``dpcvx bench --out DIR`` sets this variable for the scripts it runs
RESULTS_ENV = "DPCVX_BENCH_OUT"


def results_dir() -> Path:
    """Where the benchmarks write their JSON: ``$DPCVX_BENCH_OUT`` when set (``dpcvx bench
    --out``), else ``results/`` beside the scripts."""
    env = os.environ.get(RESULTS_ENV)
    return Path(env).expanduser().resolve() if env else Path(__file__).resolve().parent / "results"


def write_json(doc: dict, path: Path) -> None:
    """Write ``doc`` atomically (a temporary file, then a rename), numpy values as plain JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=_json_default))
    tmp.replace(path)


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)


def add_size_arguments(parser: argparse.ArgumentParser) -> None:
    """``--n`` (1e5), ``--d`` (20), ``--repeat`` (3), ``--smoke`` (n = 2000, one repeat: CI)
    and ``--output`` (the JSON's path; default under :func:`results_dir`)."""
    parser.add_argument("--n", type=float, default=1e5)
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="n = 2000, one repeat (CI)")
    parser.add_argument("--output", default="")


def sizes(args: argparse.Namespace) -> tuple[int, int]:
    """``(n, repeat)`` from :func:`add_size_arguments`' options: ``(2000, 1)`` for ``--smoke``."""
    return (2000, 1) if args.smoke else (int(args.n), args.repeat)


def save_rows(args: argparse.Namespace, script: str, n: int, repeat: int, rows: list) -> None:
    """Write ``{n, d, repeat, rows}`` to ``--output`` or to ``<script>[_smoke].json`` under
    :func:`results_dir`."""
    name = f"{script}_smoke.json" if args.smoke else f"{script}.json"
    out = args.output or str(results_dir() / name)
    write_json({"n": n, "d": args.d, "repeat": repeat, "rows": rows}, Path(out))
