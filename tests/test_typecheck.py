"""mypy on the whole package (configuration in pyproject.toml), run by the test suite so CI
runs it: every module of dpcvx/ type-checks without errors."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def errors() -> Counter:
    if shutil.which("mypy") is None and not _module_available("mypy"):
        pytest.skip("mypy is not installed (pip install -e '.[test]')")
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in out.stdout.splitlines() if ": error:" in line]
    if out.returncode not in (0, 1) or (out.returncode == 1 and not lines):
        pytest.fail(f"mypy did not run: {out.stdout[-2000:]}{out.stderr[-2000:]}")
    return Counter(re.match(r"([^:]+):", line).group(1) for line in lines)  # type: ignore[union-attr]


def _module_available(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def test_the_package_type_checks(errors):
    assert not errors, f"type errors per file: {dict(errors)} (run `mypy`)"
