"""Helpers shared by the benchmark scripts (they run as scripts: this folder is on sys.path)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

__all__ = ["RESULTS_ENV", "results_dir", "write_json"]

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
