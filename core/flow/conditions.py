"""An if-else condition, evaluated as graphon's condition processor evaluates it (spec §5.2): the
comparison operators, the ASCII spellings some flows use for them, and :func:`condition_holds`.

A value of the wrong type for its operator fails the node with Dify's message
(``Invalid actual value type: number``), as an if-else node fails in Dify.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from .errors import NodeFailed
from .templates import MISSING, NONE, FileList, VariablePool, render

COMPARISON_OPERATORS = (
    "contains",
    "not contains",
    "start with",
    "end with",
    "is",
    "is not",
    "empty",
    "not empty",
    "in",
    "not in",
    "all of",
    "=",
    "≠",
    ">",
    "<",
    "≥",
    "≤",
    "null",
    "not null",
    "exists",
    "not exists",
)
#: ASCII spellings some hand-written flows use for Dify's operators.
OPERATOR_ALIASES = {"==": "=", "!=": "≠", ">=": "≥", "<=": "≤"}


def _number_pair(value: Any, expected: Any) -> tuple[Any, Any]:
    if isinstance(expected, str):
        try:
            exp = float(expected)
        except ValueError:
            raise NodeFailed(f"Cannot convert '{expected}' to number") from None
        if isinstance(value, int) and exp.is_integer():
            return value, int(exp)
        return float(value), exp
    if isinstance(expected, (int, float)):
        return value, expected
    raise NodeFailed(f"Cannot convert {type(expected)} to number")


def _equality_expected(value: Any, expected: Any) -> Any:
    try:
        if isinstance(value, bool):
            return bool(expected)
        if isinstance(value, int):
            return int(float(expected)) if isinstance(expected, str) else int(expected)
        if isinstance(value, float):
            return float(expected)
    except (TypeError, ValueError):
        raise NodeFailed(f"Cannot convert {expected!r} to number") from None
    raise NodeFailed("Invalid actual value type: number or boolean")


def _compare(op: str, value: Any, expected: Any) -> bool:
    """One comparison, with Dify's handling of empty and missing values and its error messages."""
    if op == "contains" or op == "not contains":
        negate = op == "not contains"
        if not value:
            return negate
        if isinstance(value, str):
            hit = str(expected) in value
        elif isinstance(value, list):
            hit = expected in value
        else:
            raise NodeFailed("Invalid actual value type: string or array")
        return not hit if negate else hit
    if op in ("start with", "end with"):
        if not value:
            return False
        if not isinstance(value, str):
            raise NodeFailed("Invalid actual value type: string")
        return value.startswith(str(expected)) if op == "start with" else value.endswith(str(expected))
    if op in ("is", "is not"):
        if value is None:
            return False
        if not isinstance(value, (str, bool)):
            raise NodeFailed("Invalid actual value type: string or boolean")
        return (value == expected) if op == "is" else (value != expected)
    if op == "empty":
        return not value
    if op == "not empty":
        return bool(value)
    if op in ("=", "≠"):
        if value is None:
            return False
        exp = _equality_expected(value, expected)
        return (value == exp) if op == "=" else (value != exp)
    if op in (">", "<", "≥", "≤"):
        if value is None:
            return False
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise NodeFailed("Invalid actual value type: number")
        a, b = _number_pair(value, expected)
        return {">": a > b, "<": a < b, "≥": a >= b, "≤": a <= b}[op]
    if op in ("null", "not exists"):
        return value is None
    if op in ("not null", "exists"):
        return value is not None
    if op in ("in", "not in"):
        if not value:
            return op == "not in"
        if not isinstance(expected, list):
            raise NodeFailed("Invalid expected value type: array")
        return (value in expected) if op == "in" else (value not in expected)
    if op == "all of":
        if not value or not isinstance(expected, list):
            return False
        return isinstance(value, (list, str)) and all(item in value for item in expected)
    raise NodeFailed(f"Unsupported operator: {op}")


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return bool(value)
    if isinstance(value, str):
        try:
            loaded = json.loads(value)
        except ValueError:
            loaded = None
        if isinstance(loaded, (bool, int)):
            return bool(loaded)
    raise NodeFailed(f"unexpected value: type={type(value)}, value={value}")


def condition_holds(cond: Mapping[str, Any], pool: VariablePool) -> bool:
    """Whether one condition of a case holds for the values in ``pool``."""
    selector = list(cond.get("variable_selector") or [])
    op = OPERATOR_ALIASES.get(cond.get("comparison_operator"), cond.get("comparison_operator"))
    raw = pool.get(selector)
    if raw is MISSING:
        raise NodeFailed(f"Variable {selector} not found")
    value = None if raw is NONE else raw
    if isinstance(value, FileList) and op in ("contains", "not contains", "all of"):
        sub = cond.get("sub_variable_condition")
        if not sub:
            raise NodeFailed("Sub variable is required")
        # MemLens carries no files, so every per-file check sees an empty list (any → false, all → true).
        results = [("not" in str(c.get("comparison_operator"))) for c in sub.get("conditions") or []]
        return all(results) if sub.get("logical_operator", "and") == "and" else any(results)
    if op in ("empty", "not empty", "null", "not null", "exists", "not exists"):
        return _compare(op, value, None)
    expected = cond.get("value")
    if isinstance(expected, str):
        expected = render(expected, pool)
    if isinstance(value, bool) or (isinstance(value, list) and value and all(isinstance(v, bool) for v in value)):
        if expected is not None:
            expected = [_to_bool(e) for e in expected] if isinstance(expected, list) else _to_bool(expected)
    return _compare(op, value, expected)


__all__ = ["COMPARISON_OPERATORS", "OPERATOR_ALIASES", "condition_holds"]
