"""CI runs the dpcvx-vs-diffprivlib comparison in its smoke configuration (2 splits, epsilon 1).

The diffprivlib side needs its own environment (``bench_diffprivlib.py --setup``); where it is
missing, the benchmark runs the dpcvx side only and says how to create it, and that is what is
tested here. Not timed: it must run, write its JSON and figure, and report sane numbers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_diffprivlib.py"


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def test_smoke_runs_and_reports(tmp_path):
    """Default environment lookup: both sides when the diffprivlib env exists, dpcvx only
    (with the note) otherwise."""
    out = tmp_path / "smoke.json"
    proc = _run("--smoke", "--no-progress", "--output", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert out.with_suffix(".png").stat().st_size > 0
    assert doc["config"]["splits"] == 2 and doc["config"]["epsilons"] == [1.0]
    cls = doc["summary"]["breast_cancer"][0]
    reg = doc["summary"]["diabetes"][0]
    assert cls["dpcvx_accuracy"]["count"] == 2
    assert 0.5 < cls["dpcvx_accuracy"]["mean"] <= 1.0
    assert cls["sklearn_accuracy"]["mean"] > 0.9
    assert 0 < reg["dpcvx_mae"]["mean"] < 200
    # dpcvx's sufficient-statistics perturbation (issue 13): scored on every split
    assert reg["dpcvx_ssp_r2"]["count"] == 2
    assert 0 < reg["dpcvx_ssp_mae"]["mean"] < 200
    assert -1.0 < reg["dpcvx_ssp_r2"]["mean"] < 1.0
    assert doc["regression_target"]["complete"] is False  # the smoke run has epsilon 1 only
    assert "dpcvx SSP" in proc.stdout
    if doc["environment"]["diffprivlib_side"].get("missing"):
        assert "--setup" in proc.stdout and "dpcvx side only" in proc.stdout
        assert cls["diffprivlib_accuracy"]["count"] == 0
    else:
        assert cls["diffprivlib_accuracy"]["count"] == 2
        assert "diff_accuracy" in cls
        assert reg["diff_ssp_r2"]["count"] == 2
    assert "breast_cancer" in proc.stdout and "diabetes" in proc.stdout


def test_missing_env_runs_dpcvx_side_or_fails_when_required(tmp_path):
    missing = tmp_path / "no-such-env"
    out = tmp_path / "dpcvx-only.json"
    proc = _run(
        "--smoke",
        "--no-progress",
        "--no-figure",
        "--env",
        str(missing),
        "--epsilons",
        "1",
        "--splits",
        "1",
        "--output",
        str(out),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"--setup --env {missing}" in proc.stdout
    doc = json.loads(out.read_text())
    assert doc["environment"]["diffprivlib_side"]["missing"]
    assert doc["target"]["met"] is None

    proc = _run("--smoke", "--env", str(missing), "--require-diffprivlib", "--output", "-")
    assert proc.returncode == 2
    assert "--setup" in proc.stderr
