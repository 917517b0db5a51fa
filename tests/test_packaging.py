"""The package as installed: every subpackage is listed in pyproject.toml (the list is explicit
because the benchmark scripts ship inside the package as ``dpcvx._benchmarks``), and
``dpcvx bench`` writes its results where ``--out`` says, never into the package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_every_subpackage_is_listed_in_pyproject():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {
        ".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "dpcvx").rglob("__init__.py")
    }
    assert found <= listed, f"add {sorted(found - listed)} to [tool.setuptools] packages"
    assert config["package-dir"] == {"dpcvx._benchmarks": "benchmarks"}
    assert (ROOT / "benchmarks" / "__init__.py").is_file()


def test_the_benchmarks_ship_with_the_package():
    import dpcvx._benchmarks as shipped

    folders = [Path(p).resolve() for p in shipped.__path__]
    assert any((f / "bench_speed.py").is_file() for f in folders)


def test_bench_writes_its_results_under_out(tmp_path):
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "dpcvx", "bench", "speed", "--smoke", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"== results in {out}" in proc.stdout
    assert (out / "bench_speed.json").is_file()
