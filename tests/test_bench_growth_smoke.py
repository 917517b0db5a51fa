"""CI runs the growth benchmark in its smoke configuration (not timed: it must run, print its
table and slopes, and write its JSON)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_growth_smoke_runs(tmp_path):
    """GA, IL, OP and LDOP on the kappa = 1.5, 2, 3 fixtures at two tiny n, one repeat."""
    out = tmp_path / "growth.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_growth.py"),
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
    assert "fitted rate exponents" in proc.stdout
    doc = json.loads(out.read_text())
    assert {e["kappa"] for e in doc["table"]} == {1.5, 2.0, 3.0}
    assert len(doc["rows"]) == 6  # 3 kappas x 2 sizes x 1 repeat
    for row in doc["rows"]:
        # the common start is feasible and the closed forms are consistent: excess >= 0
        assert row["start"]["population"] >= 0.0
        assert row["erm"]["population"] >= -1e-12
        for name in ("GA", "IL", "OP", "LDOP"):
            res = row[name]
            if res["ok"]:  # a certification failure is counted, not a crash
                assert res["population"] >= -1e-9 and res["empirical"] >= -1e-9
    # growth-adaptive and iterative localization always release
    assert all(row["GA"]["ok"] and row["IL"]["ok"] for row in doc["rows"])
