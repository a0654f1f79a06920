"""The core's modules import each other without cycles.

The graph is read from the source with ``ast``: every ``import`` and ``from … import`` statement
in ``core/`` — at module level *and* inside functions, because an import moved into a function
to get past a cycle still ties the two modules together (each needs the other to work). Imports
under ``if TYPE_CHECKING:`` are left out: they never run and only name types. Importing a
submodule counts as importing the packages above it too, since Python runs their ``__init__``
first.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parent.parent / "core"


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(root: Path) -> dict[str, Path]:
    return {_module_name(root, p): p for p in sorted(root.rglob("*.py"))}


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(tree: ast.AST):
    """Every import statement that runs, wherever it is, skipping ``if TYPE_CHECKING:`` blocks."""
    for child in ast.iter_child_nodes(tree):
        if _is_type_checking(child):
            continue
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        yield from _imports(child)


def _targets(module: str, path: Path, node: ast.Import | ast.ImportFrom, known: set[str]) -> set[str]:
    """The core modules an import statement loads, with the packages above each."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    if isinstance(node, ast.ImportFrom):
        base = package[: len(package) - node.level + 1] if node.level else []
        base_name = ".".join(base + ([node.module] if node.module else []))
        names = [f"{base_name}.{a.name}" if base_name else a.name for a in node.names]
        explicit = {n for n in names if n in known}
        if len(explicit) < len(names) and base_name in known:
            explicit.add(base_name)  # a name defined in the module (or package) itself
    else:
        explicit = {a.name for a in node.names if a.name in known}
    # The packages above an imported module run first, except the importer's own packages: they
    # are already being set up when it runs.
    inside = {".".join(package[:k]) for k in range(1, len(package) + 1)}
    parents = {".".join(n.split(".")[:k]) for n in explicit for k in range(2, n.count(".") + 1)}
    return explicit | (parents - inside)


def import_graph(root: Path = CORE) -> dict[str, set[str]]:
    modules = _modules(root)
    known = set(modules)
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[name] = {t for node in _imports(tree) for t in _targets(name, path, node, known)} - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _describe(graph: dict[str, set[str]], component: list[str]) -> str:
    members = set(component)
    return "; ".join(f"{m} → {', '.join(sorted(graph[m] & members))}" for m in component)


def test_no_module_in_core_imports_itself_back_through_others():
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import cycles in core: " + " | ".join(_describe(graph, c) for c in found)


def test_the_walk_sees_imports_inside_functions_and_skips_type_checking_blocks(tmp_path):
    package = tmp_path / "core"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from .b import g\n    return g\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import X\nfrom . import a\n"
    )
    (package / "c.py").write_text("from .b import a\n")
    graph = import_graph(package)
    assert graph["core.a"] == {"core.b"}
    assert graph["core.b"] == {"core.a"}
    assert cycles(graph) == [["core.a", "core.b"]]


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from .strategies.base import Strategy\n", {"core.strategies", "core.strategies.base"}),
        ("from .strategies import base\n", {"core.strategies", "core.strategies.base"}),
        ("import core.strategies.base\n", {"core.strategies", "core.strategies.base"}),
        ("from ..ledger import KEPT\n", set()),  # above the package: not a core module here
    ],
)
def test_importing_a_submodule_counts_its_packages_too(tmp_path, source, expected):
    package = tmp_path / "core"
    (package / "strategies").mkdir(parents=True)
    for f in ("__init__.py", "strategies/__init__.py", "strategies/base.py"):
        (package / f).write_text("")
    (package / "m.py").write_text(source)
    assert import_graph(package)["core.m"] == expected
