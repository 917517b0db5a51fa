"""Sphinx configuration of dpcvx's API reference (offline: no intersphinx, no extra themes).

Build (warnings are errors)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

The hand-written pages in this directory are Markdown (``*.md``). Sphinx reads only the
reStructuredText sources (``source_suffix``); :func:`setup` appends one section per Markdown page
to ``guides.rst`` when Sphinx reads it (a download link and the page verbatim), so no Markdown
parser is needed and a new page shows up without editing any ``.rst`` file.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))  # document the working tree, installed or not

import dpcvx  # noqa: E402

project = "dpcvx"
author = "the dpcvx authors"
copyright = "the dpcvx authors"
version = release = dpcvx.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
]

source_suffix = {".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# numpydoc-style docstrings, read by napoleon
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = True  # a "Returns" type becomes :rtype: (autodoc does not repeat it)

autodoc_default_options = {
    "members": True,
    "member-order": "bysource",
    "show-inheritance": True,
}
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented_params"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
autoclass_content = "class"
add_module_names = False

html_theme = "alabaster"
html_title = f"dpcvx {release}"
html_static_path: list[str] = []


# ---------------------------------------------------------------- the Markdown guides
#: pages shown first, in this order (the others follow alphabetically)
GUIDE_ORDER = (
    "modeling.md",
    "certificate.md",
    "output_perturbation.md",
    "lipschitz_extension.md",
    "localized_double_output_perturbation.md",
)


def _guide_title(page: Path) -> str:
    """The page's first Markdown heading, as reStructuredText inline text."""
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip().replace("`", "``")
    return page.stem


def guide_sections() -> str:
    """One section per ``docs/*.md``: title, download link, the page verbatim."""
    pages = sorted(DOCS.glob("*.md"),
                   key=lambda p: (GUIDE_ORDER.index(p.name) if p.name in GUIDE_ORDER
                                  else len(GUIDE_ORDER), p.name))
    parts = []
    for page in pages:
        title = _guide_title(page)
        parts += [
            "",
            f".. _guide-{page.stem}:",
            "",
            title,
            "-" * len(title),
            "",
            f":download:`{page.name} <{page.name}>`",
            "",
            f".. literalinclude:: {page.name}",
            "   :language: markdown",
            "",
        ]
    return "\n".join(parts)


def _add_guides(app, docname: str, source: list[str]) -> None:
    if docname == "guides":
        source[0] += "\n" + guide_sections()


def _skip_sklearn_routing(app, what, name, obj, skip, options):
    """scikit-learn's generated ``set_*_request`` methods carry docstrings that reference its
    own glossary; they are documented by scikit-learn, not here."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


def setup(app):
    app.connect("source-read", _add_guides)
    app.connect("autodoc-skip-member", _skip_sklearn_routing)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
