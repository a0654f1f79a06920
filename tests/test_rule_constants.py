"""The memory systems' own numbers are written once (core/limits.py) and imported everywhere else; so are
the keys a turn's stored meta is written with.

Dify's 500-row cap and the Window Memory node's 1..200 messages used to stand as bare numbers in
the rules, the ledger's words, the flow checks and the CLI help, where one could change without
the others. This reads the core's source with ``ast`` and fails on a statement that writes one of
those numbers (as a number, or inside a text) next to the words of its rule.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from core import limits
from core.flow.nodes.window_memory import META_KEY as WINDOW_META
from core.memory.strategies.compaction import SUMMARIES_META
from core.store.repo import TEXT_COUNTS, TOKEN_COUNTS

ROOT = Path(__file__).resolve().parent.parent
#: (the number, what a statement says when the number is that rule's)
RULES = [
    (limits.DIFY_ROW_CAP, re.compile(r"dify|window|cap|row", re.I)),
    (limits.WINDOW_MAX_MESSAGES, re.compile(r"window", re.I)),
]


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first))
    return out


def bare_rule_numbers(source: str) -> list[tuple[int, int, str]]:
    """(line, number, statement) for each statement outside docstrings that writes a rule's number
    next to its rule's words."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    lines = source.splitlines()

    def segment(node: ast.AST) -> str:  # the node's lines (ast.get_source_segment re-splits the file each call)
        return "\n".join(lines[node.lineno - 1 : node.end_lineno])

    found = []
    for stmt in ast.walk(tree):
        if (
            not isinstance(stmt, ast.stmt)
            or id(stmt) in skip
            or isinstance(
                stmt,
                (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef, ast.If, ast.For, ast.While, ast.With, ast.Try),
            )
        ):
            continue
        text = segment(stmt)
        for number, words in RULES:
            if not words.search(text):
                continue
            as_number = any(
                isinstance(n, ast.Constant) and type(n.value) is int and n.value == number for n in ast.walk(stmt)
            )
            in_text = any(
                isinstance(n, ast.Constant)
                and isinstance(n.value, str)
                and re.search(rf"(?<![\d.,]){number}(?![\d,])", n.value)
                for n in ast.walk(stmt)
            )
            if as_number or in_text:
                found.append((stmt.lineno, number, text.splitlines()[0].strip()))
    # An `if` test is a statement of its own here: check the conditions of compound statements too.
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.While)):
            text = segment(node.test)
            for number, words in RULES:
                if words.search(text) and any(
                    isinstance(n, ast.Constant) and type(n.value) is int and n.value == number
                    for n in ast.walk(node.test)
                ):
                    found.append((node.lineno, number, text))
    return found


def _core_files():
    return sorted(p for p in (ROOT / "core").rglob("*.py") if p.name != "limits.py" and "migrations" not in p.parts)


def test_no_core_module_but_limits_writes_dify_s_row_cap_or_the_window_node_s_maximum():
    found = [
        f"{p.relative_to(ROOT)}:{line} ({number}): {text}"
        for p in _core_files()
        for line, number, text in bare_rule_numbers(p.read_text(encoding="utf-8"))
    ]
    assert not found, "write these as the constants in core/limits.py:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "if window < 0 or window > 500:\n    pass\n",
        "x = 'outside Dify\\'s 500-row cap'\n",
        "p.add_argument('--window', help='dify: turns (default: no window, 500-turn cap)')\n",
        "ok = 1 <= window <= 200\n",
    ],
)
def test_the_check_finds_the_numbers_written_out(source):
    assert bare_rule_numbers(source)


@pytest.mark.parametrize(
    "source",
    [
        "raise ApiError(500, 'internal_server_error', INTERNAL)\n",
        "SUMMARY_TOOL_CHARS = 500\n",
        "text = one_line(m.content, 200)\n",
        "x = f'outside Dify\\'s {DIFY_ROW_CAP}-row cap'\n",
        "def f():\n    '''Dify windows are 1..500 turns.'''\n",
    ],
)
def test_the_check_leaves_other_numbers_and_docstrings_alone(source):
    assert not bare_rule_numbers(source)


#: Keys of a turn's stored meta, each written as text only in the module that defines it.
META_KEYS = {
    SUMMARIES_META: "core/memory/strategies/compaction.py",
    WINDOW_META: "core/flow/nodes/window_memory.py",
    TOKEN_COUNTS: "core/store/repo/counts.py",
    TEXT_COUNTS: "core/store/repo/counts.py",
}


def meta_key_literals(source: str) -> list[tuple[int, str]]:
    """(line, key) for each string in the source that is one of the meta keys (names and prose mentioning
    one are not)."""
    return [
        (n.lineno, n.value)
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in META_KEYS
    ]


def test_a_turn_s_meta_keys_are_written_only_where_they_are_defined():
    found = [
        f"{p.relative_to(ROOT)}:{line}: {key!r}"
        for p in _core_files()
        for line, key in meta_key_literals(p.read_text(encoding="utf-8"))
        if p.relative_to(ROOT).as_posix() != META_KEYS[key]
    ]
    assert not found, "import the key from the module that defines it:\n" + "\n".join(found)


def test_the_meta_key_check_finds_a_key_written_out_and_leaves_names_and_prose_alone():
    assert meta_key_literals('meta = {k: d[k] for k in ("seq", "compaction_summaries") if k in d}\n') == [
        (1, "compaction_summaries")
    ]
    assert meta_key_literals('x = turn.meta.get("window_overwrites")\n') == [(1, "window_overwrites")]
    assert not meta_key_literals("ctx.window_overwrites[node.id] = []\ndoc = \"keeps Turn.meta['token_counts']\"\n")
