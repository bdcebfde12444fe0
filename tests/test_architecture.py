"""The structure of the code (docs/architecture.md): one declaration per family, parts that import one way.

Read from the sources with ``ast``, so these run anywhere and fail on the line that breaks a rule.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import oasr
from oasr.jit.families import FAMILIES
from profiling.harness.ops import OPS

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("oasr", "profiling", "benchmarks")

# Lower layers first; a module may import its own layer and the ones before it, never a later one.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("oasr",),
    ("profiling.provenance", "profiling.files", "profiling.units", "profiling.readable", "profiling.commands"),
    ("profiling.harness",),
    ("profiling.compare",),
    ("profiling.scaleout",),
    ("profiling.nsight",),
    ("profiling.analysis",),
    ("profiling.workbench",),
    ("benchmarks",),
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _imports(name: str) -> Iterator[tuple[str, int, bool]]:
    """(imported project module, line, inside a function) for every import statement of a module."""
    tree = ast.parse(MODULES[name].read_text())
    package = name if _is_package(name) else name.rpartition(".")[0]
    function_nodes = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for inner in ast.walk(node)
    }
    for node in ast.walk(tree):
        in_function = id(node) in function_nodes
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name)
                if target:
                    yield target, node.lineno, in_function
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            for alias in node.names:  # `from pkg import submodule` imports the submodule
                target = _resolve(f"{module}.{alias.name}") or _resolve(module)
                if target:
                    yield target, node.lineno, in_function


def _resolve(dotted: str) -> str | None:
    """The project module ``dotted`` names (or the nearest enclosing one), None outside the project."""
    while dotted:
        if dotted in MODULES:
            return dotted
        dotted = dotted.rpartition(".")[0]
    return None


GRAPH = {name: {target for target, _, _ in _imports(name) if target != name} for name in MODULES}


def _layer(name: str) -> int:
    for index, prefixes in enumerate(LAYERS):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return index
    raise AssertionError(f"{name} belongs to no layer of LAYERS: add it to docs/architecture.md and LAYERS")


def test_every_module_belongs_to_a_layer():
    for name in MODULES:
        if name not in ("profiling", "benchmarks"):
            _layer(name)


def test_no_import_cycles():
    """Tarjan's strongly connected components of the module graph: every one has one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in GRAPH[node]:
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in GRAPH:
        if node not in index:
            visit(node)
    assert not cycles, f"import cycles: {cycles}"


def test_cycle_detector_finds_a_planted_cycle(monkeypatch):
    planted = {**GRAPH, "profiling.harness.timing": {*GRAPH["profiling.harness.timing"], "profiling.harness.measure"}}
    monkeypatch.setitem(globals(), "GRAPH", planted)
    with pytest.raises(AssertionError, match="import cycles"):
        test_no_import_cycles()


def test_parts_import_one_way():
    """No module imports a later layer (e.g. the harness never imports the workbench)."""
    upward = [
        f"{MODULES[name].relative_to(REPO)}:{line} imports {target}"
        for name in MODULES
        if name not in ("profiling", "benchmarks")
        for target, line, _ in _imports(name)
        if target not in ("profiling", "benchmarks") and _layer(target) > _layer(name)
    ]
    assert not upward, "\n".join(upward)


def test_project_imports_sit_at_the_top_of_modules():
    """Imports of the project's own modules inside functions are how cycles hide: none are left."""
    inside = [
        f"{MODULES[name].relative_to(REPO)}:{line} imports {target} inside a function"
        for name in MODULES
        for target, line, in_function in _imports(name)
        if in_function
    ]
    assert not inside, "\n".join(inside)


def test_no_lookups_by_names_built_from_strings():
    """Families and ops are found through the two lists, not by building module or attribute names."""
    pattern = re.compile(r"import_module\(f|getattr\([^)]*f\"|gen_\{|_\{[a-z.]+\}_module")
    offenders = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in [*MODULES.values(), *(REPO / "dev").rglob("*.py"), REPO / "notebooks" / "generate.py"]
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if pattern.search(line)
    ]
    assert not offenders, "\n".join(offenders)


def test_each_public_op_is_declared_by_exactly_one_family():
    declared = [op for family in FAMILIES for op in family.ops]
    assert len(declared) == len(set(declared))
    assert sorted(oasr.__all__) == sorted(declared)
    for op in declared:
        assert callable(getattr(oasr, op)), op


def test_each_family_has_its_sources_api_module_and_notebook():
    for family in FAMILIES:
        assert all(source.is_file() for source in family.sources), family.name
        assert (REPO / "oasr" / f"{family.name}.py").is_file(), family.name
        assert (REPO / "notebooks" / f"{family.notebook}.ipynb").is_file(), family.notebook
        assert all((REPO / "include" / header).is_file() for header in family.headers), family.name


def test_harness_ops_belong_to_declared_families_and_cover_them():
    for op in OPS.values():
        assert op.family in FAMILIES, op.name
    covered = {op.family.name for op in OPS.values()}
    assert covered == {family.name for family in FAMILIES}
