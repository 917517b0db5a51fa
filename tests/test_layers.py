"""The import layers of DESIGN section 1: a stage imports only earlier stages and the core.

Every module under ``dpcvx/`` is parsed with ``ast`` (imports inside functions and under
``TYPE_CHECKING`` count too), each dpcvx import is resolved to a module, and the module's stage
must not be below the imported one's: core < accounting < modeling < compilation <
certification < mechanisms < pipeline < problems < front ends (audit, estimators, cli) < the
package. Mechanisms never import the compilation stage (the solvers' internals), and no module
imports a private name from another package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dpcvx

PACKAGE = Path(dpcvx.__file__).resolve().parent

#: the stages, in order (DESIGN section 1): a module imports only its own stage and earlier
#: ones. core < accounting < modeling < compilation < certification < mechanisms < pipeline <
#: problems < front ends < the package itself.
CORE = {
    "dpcvx.errors",
    "dpcvx.rng",
    "dpcvx._validation",
    "dpcvx.types",
    "dpcvx.neighbors",
    "dpcvx._progress",
    "dpcvx._allocator",
    "dpcvx._batching",
    "dpcvx.calculators",
    "dpcvx.growth",
}
PIPELINE = {"dpcvx.pipeline", "dpcvx.results"}
PROBLEMS = {
    "dpcvx.problem",
    "dpcvx.oracle",
    "dpcvx.saddle_problem",
    "dpcvx.arrays",
    "dpcvx.user_level",
    "dpcvx.distributed",
    "dpcvx.losses",
    "dpcvx.domains",
}
FRONT_ENDS = {"dpcvx.audit", "dpcvx.estimators", "dpcvx.preprocessing"}
PACKAGE_LEVEL = {"dpcvx"}
COMMAND_LINE = {"dpcvx.cli", "dpcvx.__main__"}
PREFIX_STAGES = [
    ("dpcvx.accounting", 1),
    ("dpcvx.modeling", 2),
    ("dpcvx.compilation", 3),
    ("dpcvx.certification", 4),
    ("dpcvx.mechanisms", 5),
]
STAGE_NAMES = (
    "core",
    "accounting",
    "modeling",
    "compilation",
    "certification",
    "mechanisms",
    "pipeline",
    "problems",
    "front ends",
    "package",
    "command line",
)


def stage(module: str) -> int:
    for members, k in (
        (CORE, 0),
        (PIPELINE, 6),
        (PROBLEMS, 7),
        (FRONT_ENDS, 8),
        (PACKAGE_LEVEL, 9),
        (COMMAND_LINE, 10),
    ):
        if module in members:
            return k
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


@pytest.mark.parametrize("module", sorted(m for m in IMPORTS if stage(m) == 5))
def test_mechanisms_never_import_the_solvers_internals(module):
    bad = [t for t in IMPORTS[module] if t.startswith("dpcvx.compilation")]
    assert not bad, f"mechanisms must not import solvers' internals: {module} imports {bad}"


def _package(module: str) -> str:
    """The package a module belongs to: its subpackage, or itself for a top-level module."""
    parts = module.split(".")
    return ".".join(parts[:2])


def _private_imports():
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module_name(path)
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                if node.module.split(".")[0] != "dpcvx":
                    continue
                for alias in node.names:
                    private = alias.name.startswith("_") and not alias.name.startswith("__")
                    if private and _package(node.module) != _package(name):
                        yield name, node.module, alias.name


def test_no_private_name_is_imported_across_packages():
    found = sorted(set(_private_imports()))
    assert not found, f"private names imported across packages: {found}"


def test_every_stage_is_populated_and_every_file_has_a_stage():
    stages = {stage(m) for m in IMPORTS}
    assert stages == set(range(len(STAGE_NAMES))), sorted(stages)
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) == len(IMPORTS)


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
