"""The import layers of DESIGN section 1: a stage imports only earlier stages and the core.

Every module under ``dpcvx/`` is parsed with ``ast`` (imports inside functions and under
``TYPE_CHECKING`` count too), each dpcvx import is resolved to a module, and the module's stage
must not be below the imported one's. The accountant may import only the core, and mechanisms
never import the compilation stage (the solvers' internals).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dpcvx

PACKAGE = Path(dpcvx.__file__).resolve().parent

CORE = {
    "dpcvx.errors",
    "dpcvx.rng",
    "dpcvx._validation",
    "dpcvx.types",
    "dpcvx._profiles",
    "dpcvx._zcdp",
    "dpcvx._progress",
}
TOP = {
    "dpcvx",
    "dpcvx.problem",
    "dpcvx.oracle",
    "dpcvx.losses",
    "dpcvx.domains",
    "dpcvx.estimators",
    "dpcvx.audit",
    "dpcvx.cli",
    "dpcvx.__main__",
    "dpcvx.mean_estimation",
    "dpcvx.saddle_problem",
}
PREFIX_STAGES = [
    ("dpcvx.modeling", 1),
    ("dpcvx.compilation", 2),
    ("dpcvx.certification", 3),
    ("dpcvx.mechanisms", 4),
    ("dpcvx.accounting", 4),
    ("dpcvx.results", 5),
]


def stage(module: str) -> int:
    if module in CORE:
        return 0
    if module in TOP:
        return 6
    for prefix, k in PREFIX_STAGES:
        if module == prefix or module.startswith(prefix + "."):
            return k
    raise KeyError(f"{module} has no stage: add it to tests/test_layers.py (and DESIGN.md)")


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (PACKAGE.parent / rel).with_suffix(".py").exists() or (
        PACKAGE.parent / rel / "__init__.py"
    ).exists()


def _resolve(node: ast.AST, current: str, is_package: bool) -> list[str]:
    """The dpcvx modules an import statement loads."""
    out: list[str] = []
    if isinstance(node, ast.Import):
        out += [a.name for a in node.names if a.name.split(".")[0] == "dpcvx"]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = current.split(".") if is_package else current.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            mod = ".".join(base + ([node.module] if node.module else []))
        else:
            mod = node.module or ""
        if mod.split(".")[0] != "dpcvx":
            return out
        for alias in node.names:
            sub = f"{mod}.{alias.name}"
            out.append(sub if _is_module(sub) else mod)
    return out


def _imports():
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module_name(path)
        tree = ast.parse(path.read_text(), filename=str(path))
        targets = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                targets += _resolve(node, name, path.name == "__init__.py")
        yield name, sorted(set(targets))


IMPORTS = dict(_imports())


def test_every_module_has_a_stage():
    assert IMPORTS, "no modules found"
    for name, targets in IMPORTS.items():
        stage(name)
        for t in targets:
            stage(t)


@pytest.mark.parametrize("module", sorted(IMPORTS))
def test_imports_only_earlier_stages(module):
    k = stage(module)
    bad = [t for t in IMPORTS[module] if stage(t) > k]
    assert not bad, f"{module} (stage {k}) imports later stages: {bad}"


@pytest.mark.parametrize("module", sorted(m for m in IMPORTS if stage(m) == 4))
def test_accounting_and_mechanisms_rules(module):
    targets = IMPORTS[module]
    if module.startswith("dpcvx.accounting"):
        bad = [t for t in targets if stage(t) != 0 and not t.startswith("dpcvx.accounting")]
        assert not bad, f"the accountant may import only the core: {module} imports {bad}"
    else:
        bad = [
            t
            for t in targets
            if t.startswith("dpcvx.compilation") or t.startswith("dpcvx.accounting")
        ]
        assert not bad, f"mechanisms must not import solvers' internals: {module} imports {bad}"


def test_the_checker_sees_relative_and_nested_imports():
    """The resolver itself: relative imports, ``from dpcvx import sub``, imports in functions."""
    tree = ast.parse(
        "from . import certificate\n"
        "from ..modeling.declaration import Declaration\n"
        "def f():\n"
        "    from dpcvx import errors, Problem\n"
        "    import dpcvx.compilation.stamp\n"
    )
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found += _resolve(node, "dpcvx.certification.solve", False)
    assert set(found) == {
        "dpcvx.certification.certificate",
        "dpcvx.modeling.declaration",
        "dpcvx.errors",
        "dpcvx",
        "dpcvx.compilation.stamp",
    }
