"""Every script in ``examples/`` runs as it is (house style point 19).

Each script is run in a subprocess with a fixed seed (``--seed 0``) and the non-interactive
matplotlib backend, with dpcvx's ``PrivacyLeakWarning`` turned into an error, and must exit with
status 0 and print its guarantee and dpcvx's certificates. Scripts are discovered by glob, so a
new example is smoke-tested without editing this file.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def test_examples_are_found():
    assert any(path.name == "quickstart.py" for path in EXAMPLES), EXAMPLES


@pytest.mark.parametrize("script", EXAMPLES, ids=[path.stem for path in EXAMPLES])
def test_example_declares_what_it_shows_and_takes_a_seed(script: Path):
    source = script.read_text(encoding="utf-8")
    docstring = ast.get_docstring(ast.parse(source))
    assert docstring, f"{script.name} needs a module docstring saying what it shows"
    assert "Run:" in docstring, f"{script.name}'s docstring should say how to run it ('Run: ...')"
    assert '"--seed"' in source, f"{script.name} needs an argparse `--seed` option"


@pytest.mark.parametrize("script", EXAMPLES, ids=[path.stem for path in EXAMPLES])
def test_example_runs(script: Path, tmp_path: Path):
    env = dict(os.environ, MPLBACKEND="Agg")
    proc = subprocess.run(
        [
            sys.executable,
            "-W",
            "error::dpcvx.errors.PrivacyLeakWarning",
            str(script),
            "--seed",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, (
        f"{script.name} exited with {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n"
        f"--- stderr\n{proc.stderr[-3000:]}"
    )
    assert "guarantee" in proc.stdout, f"{script.name} should print the guarantee"
    assert "certified" in proc.stdout, f"{script.name} should print dpcvx's certificates"
