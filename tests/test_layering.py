"""The core's packages form layers: each imports only the layers below it, so no two import each other.

The graph is read from the source with ``ast``: every ``import`` and ``from … import`` in ``core/``,
at module level, inside functions and under ``if TYPE_CHECKING:`` alike — an import hidden in a
function, or one that only names a type, still makes the importer depend on what it names. A node is
one of core's packages (``core.memory``) or one of its top-level modules (``core.errors``).
ARCHITECTURE.md's "Layers" section states the same order.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

CORE = Path(__file__).resolve().parent.parent / "core"

#: From the bottom up. A node imports nodes of its own layer or of a layer below it; every node of the
#: core is named here, so a new package is placed on purpose.
LAYERS: list[tuple[str, ...]] = [
    ("core.errors", "core.limits", "core.retry", "core.hosts", "core.redact", "core"),
    ("core.model",),
    ("core.words",),
    ("core.llm",),
    ("core.memory",),
    ("core.flow",),
    ("core.store",),
    ("core.capture",),
    ("core.analysis",),
    ("core.report",),
    ("core.io",),
    ("core.proxy",),
    ("core.service",),
    ("core.api",),
    ("core.cli",),
    ("core.__main__",),
]


def _node(module: str, root: Path) -> str:
    """The package or top-level module a dotted module name belongs to (``core.memory.replay`` → ``core.memory``)."""
    parts = module.split(".")
    if len(parts) == 1:
        return parts[0]
    return ".".join(parts[:2]) if (root / parts[1]).is_dir() or (root / f"{parts[1]}.py").exists() else parts[0]


def package_graph(root: Path = CORE) -> dict[str, dict[str, set[str]]]:
    """node → {imported node: the files that import it}, for every node of the package at ``root``."""
    top = root.name
    graph: dict[str, dict[str, set[str]]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        package = parts[:-1]  # where a relative import starts, for a module and an __init__ alike
        if parts[-1] == "__init__":
            parts.pop()
        source = _node(".".join(parts), root)
        edges = graph.setdefault(source, {})
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                names = [f"{module}.{a.name}" for a in node.names] if module else [a.name for a in node.names]
            else:
                continue
            for name in names:
                if name.split(".")[0] != top:
                    continue
                target = _node(name, root)
                if target != source:
                    edges.setdefault(target, set()).add(str(path.relative_to(root.parent)))
    return graph


def cycle(graph: dict[str, dict[str, set[str]]]) -> list[str] | None:
    """One import loop (``[a, b, …, a]``), or None when the graph has none."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        path.append(v)
        for w in sorted(graph.get(v, {})):
            if state.get(w) == 1:
                return path[path.index(w) :] + [w]
            if w not in state and (found := visit(w)):
                return found
        path.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state and (found := visit(v)):
            return found
    return None


def layer_problems(graph: dict[str, dict[str, set[str]]], layers: list[tuple[str, ...]]) -> list[str]:
    """Every node no layer names, and every import of a layer above the importer's, as one line each."""
    level = {name: i for i, layer in enumerate(layers) for name in layer}
    problems = [
        f"{node} is in no layer: add it to LAYERS and to ARCHITECTURE.md's Layers"
        for node in sorted(set(graph) | {t for edges in graph.values() for t in edges})
        if node not in level
    ]
    for source, edges in sorted(graph.items()):
        for target, files in sorted(edges.items()):
            if source in level and target in level and level[target] > level[source]:
                problems.append(f"{source} imports {target}, a layer above it ({', '.join(sorted(files))})")
    return problems


def test_core_packages_import_each_other_in_no_loop():
    found = cycle(package_graph())
    assert found is None, "package import loop: " + " → ".join(found or [])


def test_core_packages_import_only_their_own_layer_or_those_below():
    assert layer_problems(package_graph(), LAYERS) == []


def test_architecture_states_the_same_layers():
    text = (CORE.parent / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    stated = [
        tuple(re.findall(r"`(core[\w.]*)`", line.split(" — ")[0]))
        for line in section.splitlines()
        if re.match(r"\d+\. `core", line)
    ]
    assert stated == LAYERS


def _toy(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "core"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_checker_finds_a_loop_through_a_function_level_and_a_type_only_import(tmp_path):
    root = _toy(
        tmp_path,
        {
            "__init__.py": "",
            "low/__init__.py": "",
            "low/a.py": "def f():\n    from core.high.b import g\n    return g\n",
            "high/__init__.py": "",
            "high/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..low import a\n",
        },
    )
    graph = package_graph(root)
    assert graph["core.low"] == {"core.high": {"core/low/a.py"}}
    assert graph["core.high"] == {"core.low": {"core/high/b.py"}}
    assert cycle(graph) == ["core.high", "core.low", "core.high"]
    assert layer_problems(graph, [("core",), ("core.low",), ("core.high",)]) == [
        "core.low imports core.high, a layer above it (core/low/a.py)"
    ]


def test_the_checker_passes_a_graph_that_follows_its_layers_and_names_an_unplaced_package(tmp_path):
    root = _toy(
        tmp_path,
        {
            "__init__.py": "",
            "errors.py": "",
            "low/__init__.py": "from core.errors import *\n",
            "high/__init__.py": "from core.low import x\nimport core.errors\n",
            "new/__init__.py": "",
        },
    )
    graph = package_graph(root)
    assert cycle(graph) is None
    assert layer_problems(graph, [("core", "core.errors"), ("core.low",), ("core.high",)]) == [
        "core.new is in no layer: add it to LAYERS and to ARCHITECTURE.md's Layers"
    ]
