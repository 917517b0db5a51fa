"""The documentation builds from the docstrings with warnings as errors.

The command is the one in ``docs/index.rst`` (and the one CI runs), with the output sent to a
temporary directory: ``python -m sphinx -W --keep-going -b html docs <out>``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import dpcvx

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def built_docs(tmp_path_factory) -> Path:
    pytest.importorskip(
        "sphinx", reason="sphinx is not installed (pip install -e '.[docs]'): no docs build"
    )
    out = tmp_path_factory.mktemp("docs") / "html"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-b",
            "html",
            str(ROOT / "docs"),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, (
        f"the docs build failed (warnings are errors)\n--- stdout\n{proc.stdout[-3000:]}\n"
        f"--- stderr\n{proc.stderr[-5000:]}"
    )
    return out


def test_docs_build_without_warnings(built_docs: Path):
    for page in ("index.html", "api.html", "guides.html"):
        assert (built_docs / page).is_file(), page


def test_api_reference_covers_the_public_api(built_docs: Path):
    """Every name ``dpcvx`` exports has an entry in the API reference (``docs/api.rst``)."""
    html = (built_docs / "api.html").read_text(encoding="utf-8")
    anchors = set(re.findall(r'id="([^"]+)"', html))
    missing = []
    for name in dpcvx.__all__:
        if name.startswith("__"):
            continue
        wanted = {f"dpcvx.{name}", f"module-dpcvx.{name}"}
        # re-exports may be documented in their module (e.g. dpcvx.oracle.OracleProblem)
        if not wanted & anchors and not any(
            a.endswith(f".{name}") and a.startswith("dpcvx.") for a in anchors
        ):
            missing.append(name)
    assert not missing, f"add these public names to docs/api.rst: {missing}"


def test_every_markdown_guide_is_included(built_docs: Path):
    """``docs/conf.py`` adds every ``docs/*.md`` to the guides page (a download link and the
    page verbatim)."""
    html = (built_docs / "guides.html").read_text(encoding="utf-8")
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert re.search(rf'href="_downloads/[^"]*/{re.escape(page.name)}"', html), page.name
        assert any((built_docs / "_downloads").glob(f"*/{page.name}")), page.name
