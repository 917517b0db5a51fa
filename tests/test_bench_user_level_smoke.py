"""CI runs the user-level benchmark in its smoke configuration (not timed: it must run, print
its tables and write its JSON)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_user_level_smoke_runs(tmp_path):
    """Naive baseline, Phased-SCO/ERM and the reference deletion route on a tiny grid, both
    user models; the crossover m* is reported."""
    out = tmp_path / "user_level.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_user_level.py"),
            "--smoke",
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "m-gain" in proc.stdout and "crossover m*" in proc.stdout
    assert "deletion route" in proc.stdout
    doc = json.loads(out.read_text())
    modes = {r["mode"] for r in doc["m_sweep"]}
    assert modes == {"exchangeable", "duplicated"}
    for r in doc["m_sweep"]:
        assert 0.0 <= r["naive"] <= 2.0 and 0.0 <= r["phased_sco"] <= 2.0
    assert doc["deletion"]["crossover"]["printed"] > 1.0
