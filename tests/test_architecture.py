"""The structure of the code (docs/architecture.md): one declaration per family, parts that import one way.

Read from the sources with ``ast``, so these run anywhere and fail on the line that breaks a rule.
"""

from __future__ import annotations

import ast
import itertools
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

import oasr
from oasr.jit.families import FAMILIES
from profiling.harness.ops import OPS
from profiling.workbench.pages import page_of

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


SCANNED = [*MODULES.values(), *sorted((REPO / "dev").rglob("*.py")), REPO / "notebooks" / "generate.py"]
"""The Python the lookup checks read: production, dev/'s scripts and the notebook generator."""
TOP_PACKAGES = {"oasr", "profiling", "benchmarks"}
MODULE_BASENAMES = {name.rpartition(".")[2] for name in MODULES} - TOP_PACKAGES
LOOKUPS = {"getattr", "import_module", "__import__", "find_spec", "eval", "exec"}
"""Calls whose (second, for getattr; else first) argument names what they find."""

KNOWN_COMPUTED_LOOKUPS: set[tuple[str, str]] = set()
"""(file, the call as written) of lookups allowed for now: none."""
CODE_WRITERS = {"oasr/_op.py"}
"""Files whose ``exec`` writes functions from a declaration's own parameter names (as dataclasses writes
``__init__``): the code they run finds nothing by a name built from a string."""


def _module_aliases(tree: ast.Module) -> set[str]:
    """The names a file binds to modules: ``import x``, ``import x.y as z``, ``from pkg import module``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                if dotted in MODULES or isinstance(sys.modules.get(dotted), types.ModuleType):
                    names.add(alias.asname or alias.name)
    return names


def _is_module(node: ast.expr, aliases: set[str]) -> bool:
    """Whether ``node`` reads a module: a module's name (or an attribute of one, ``torch.ops.oasr``), a family's
    JIT module (``X.module(...)``) or ``sys.modules[...]``."""
    while isinstance(node, ast.Attribute):
        node = node.value
    if isinstance(node, ast.Name):
        return node.id in aliases
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Attribute) and node.func.attr == "module"
    if isinstance(node, ast.Subscript):
        return ast.unparse(node.value) == "sys.modules"
    return False


def _computed_module_path(node: ast.JoinedStr) -> bool:
    """An f-string that writes a module path with a computed part: ``f"families.{name}"``, ``f"oasr.jit.{x}"``
    (an error message's ``f"oasr.{op}: ..."`` names an op, not a module)."""
    for part, following in itertools.pairwise(node.values):
        if isinstance(part, ast.Constant) and isinstance(following, ast.FormattedValue):
            match = re.search(r"([A-Za-z_][\w.]*)\.$", str(part.value))
            if match and ("." in match.group(1) or match.group(1).rpartition(".")[2] in MODULE_BASENAMES):
                return True
    return False


def _computed_lookups(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    aliases = _module_aliases(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and _computed_module_path(node):
            yield node.lineno, ast.unparse(node)
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name not in LOOKUPS or not node.args:
            continue
        target = node.args[1] if name == "getattr" and len(node.args) > 1 else node.args[0]
        if isinstance(target, ast.Constant):
            continue
        if name != "getattr" or _is_module(node.args[0], aliases):
            yield node.lineno, ast.unparse(node)


def test_no_lookups_by_names_built_from_strings():
    """Families, ops and modules are found through the lists, not by building a module path or an attribute name: no
    ``getattr`` on a module with a computed name, no import or eval of a computed name, no f-string writing a module
    path with a computed part."""
    found = {(str(path.relative_to(REPO)), line, call) for path in SCANNED for line, call in _computed_lookups(path)}
    offenders = sorted(
        f"{path}:{line}: {call}"
        for path, line, call in found
        if (path, call) not in KNOWN_COMPUTED_LOOKUPS and not (path in CODE_WRITERS and call.startswith("exec("))
    )
    assert not offenders, "\n".join(offenders)
    fixed = KNOWN_COMPUTED_LOOKUPS - {(path, call) for path, _, call in found}
    assert not fixed, f"no longer there, remove from KNOWN_COMPUTED_LOOKUPS: {sorted(fixed)}"


@pytest.mark.parametrize(
    "source",
    [
        "import oasr.jit.families as families\ngetattr(families, name.upper())",
        "from oasr.jit import families\ngetattr(families, name)",
        "getattr(GEMM.module(variant), op)",
        "import sys\ngetattr(sys.modules[__name__], name)",
        "import importlib\nimportlib.import_module(f'oasr.{name}')",
        "code = f'wb = Workbench(families.{family.name.upper()})'",
        "path = f'profiling.harness.ops.{op}'",
    ],
)
def test_the_lookup_check_finds_a_planted_lookup(tmp_path, source):
    planted = tmp_path / "planted.py"
    planted.write_text(source + "\n")
    assert list(_computed_lookups(planted))


@pytest.mark.parametrize(
    "source",
    [
        "getattr(row, field)",
        "getattr(fn, '__module__', None)",
        "import torch\ngetattr(torch, 'float16')",
        "raise ValueError(f'oasr.{op}: `input` must be 2-D')",
        "f'{module}.{qualname}'",
    ],
)
def test_the_lookup_check_leaves_plain_code_alone(tmp_path, source):
    plain = tmp_path / "plain.py"
    plain.write_text(source + "\n")
    assert not list(_computed_lookups(plain))


PRODUCTION_TREES = ("include", "csrc", "oasr", "profiling", "benchmarks", "scripts")
DEV_REFERENCE = re.compile(r"(?<![\w./-])dev/(?!(?:\w+/)?RESULTS\.md)")
"""A path under dev/ other than a results table (``dev/gemm/RESULTS.md``); ``/dev/null`` and ``.dev/`` are not dev/."""
KNOWN_DEV_CITATIONS: set[str] = set()
"""Production files allowed to cite dev/ for now: none."""


def test_production_never_imports_or_cites_dev():
    """Production (the library, the profiler, the benchmarks, the scripts) imports nothing from dev/ and names no
    path under it but a results table (``measured: dev/gemm/RESULTS.md``): it runs and ships without dev/."""
    imports = [
        f"{MODULES[name].relative_to(REPO)}:{node.lineno}"
        for name in MODULES
        for node in ast.walk(ast.parse(MODULES[name].read_text()))
        if (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "dev" for a in node.names))
        or (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "dev" and not node.level)
    ]
    assert not imports, "\n".join(imports)
    cited = {}
    for tree in PRODUCTION_TREES:
        for path in sorted((REPO / tree).rglob("*")):
            if path.is_file() and path.suffix in (".py", ".cu", ".cuh", ".h", ".sh", ".md", ".txt", ".toml"):
                lines = [n for n, line in enumerate(path.read_text().splitlines(), 1) if DEV_REFERENCE.search(line)]
                if lines:
                    cited[str(path.relative_to(REPO))] = lines
    offenders = [f"{path}: lines {lines}" for path, lines in cited.items() if path not in KNOWN_DEV_CITATIONS]
    assert not offenders, "cites dev/ (name dev/<family>/RESULTS.md instead):\n" + "\n".join(offenders)
    fixed = KNOWN_DEV_CITATIONS - set(cited)
    assert not fixed, f"no longer cite dev/, remove from KNOWN_DEV_CITATIONS: {sorted(fixed)}"


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
        page = page_of(family)
        assert (REPO / "notebooks" / f"{page.notebook}.ipynb").is_file(), page.notebook
        assert all((REPO / "include" / header).is_file() for header in page.headers), family.name


def test_harness_ops_belong_to_declared_families_and_cover_them():
    for op in OPS.values():
        assert op.family in FAMILIES, op.name
    covered = {op.family.name for op in OPS.values()}
    assert covered == {family.name for family in FAMILIES}
