"""Conversation variables and the Variable Assigner, as Dify's Chatflow runs them (spec/dify-memory.md §3).

* Types: ``string, number, boolean, object, array[string], array[number], array[boolean],
  array[object]``; DSL exports may write numbers as ``integer``/``float`` — both read as ``number``.
  ``clear`` writes the type's zero value (§3.1).
* Assigner v1 (``over-write``, ``append``, ``clear``) copies values without type checks (§3.3).
* Assigner v2 (§3.4) checks, per item and in this order: the target exists, the operation suits the
  target's type, the input kind (variable/constant) suits the operation, the source exists, the
  value is valid; items run in order on a copy of the values, so a later item reads an earlier
  item's write (read-after-write), and any error fails the node with *no* update applied. A source
  whose value is NONE makes its item a silent no-op.
* A live edit from outside the flow (the UI, the API) goes through :func:`edit_variable`, which
  rejects a value of the wrong type with Dify's message and changes nothing (§3.7).

Error messages are Dify's, word for word, so a user can search for them. Where Dify names a
number's stored type (``Operation append is not supported for type integer``) MemLens names it the
same way: an int value is ``integer``, a float ``float``.

Decisions where Dify's behaviour is a bug (§3.5): a ``/=`` that turns an integer into a float keeps
the variable a ``number`` (Dify would store a value its next turn cannot load); we do not emulate
that crash. Error messages still name the type Dify stored the variable with: a variable created
from an int stays ``integer`` after arithmetic (updates copy the segment without re-typing it).

As Dify 1.x ships: a v1 ``over-write`` copies its source even when it resolves to nothing, so the
variable becomes ``null`` (a source from a node MemLens does not emulate counts as nothing, and the
note says so). Writes are not size-checked; a value over :data:`MAX_VARIABLE_SIZE` bytes makes the
*next* turn fail when it loads the variable (:func:`check_sizes`). A live edit's mismatch message
names the value's type as Dify infers it (``integer``, ``float``, ``array[number]`` for ``[]``).
"""

from __future__ import annotations

import copy
import json
import sys
import uuid
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

from .errors import AssignerError, TypeMismatchError, VariableError
from .templates import MISSING, NONE

_ATOMIC = frozenset({str, int, float, bool, type(None)})


def copy_value(value: Any) -> Any:
    """A deep copy of a variable's value. Values are JSON-like, and a conversation variable that
    grows every turn (a list of labels, say) is copied several times per turn: lists of plain
    values are copied as lists, not element by element through :func:`copy.deepcopy` (about 20×
    faster); anything else falls back to it."""
    kind = type(value)
    if kind in _ATOMIC:
        return value
    if kind is list:
        if _ATOMIC.issuperset(map(type, value)):
            return value.copy()
        return [copy_value(x) for x in value]
    if kind is dict:
        return {k: copy_value(v) for k, v in value.items()}
    return copy.deepcopy(value)


VARIABLE_TYPES = (
    "string",
    "number",
    "boolean",
    "object",
    "array[string]",
    "array[number]",
    "array[boolean]",
    "array[object]",
)
_TYPE_ALIASES = {"integer": "number", "float": "number"}
_ELEMENT = {
    "array[string]": "string",
    "array[number]": "number",
    "array[boolean]": "boolean",
    "array[object]": "object",
}

V1_MODES = ("over-write", "append", "clear")
V2_OPERATIONS = (
    "over-write",
    "clear",
    "set",
    "+=",
    "-=",
    "*=",
    "/=",
    "append",
    "extend",
    "remove-first",
    "remove-last",
)
INPUT_TYPES = ("variable", "constant")
_NO_VALUE = ("clear", "remove-first", "remove-last")
_ARITHMETIC = ("+=", "-=", "*=", "/=")
#: Dify's MAX_VARIABLE_SIZE (bytes): a loaded variable bigger than this fails the run.
MAX_VARIABLE_SIZE = 204_800
#: The MemLens change-log name for an edit made from outside the flow.
USER = "user"
#: Namespace for the ids of variables declared without one (stable per flow and name).
_ID_NAMESPACE = uuid.UUID("6f9b1c1e-4c55-4d1a-9a57-3c1bd6f0a0d1")


# -- types ------------------------------------------------------------------------------------------


def normalize_type(value_type: str) -> str:
    """``integer``/``float`` → ``number``; anything unknown is a :class:`VariableError`."""
    t = _TYPE_ALIASES.get(value_type, value_type)
    if t not in VARIABLE_TYPES:
        raise VariableError(
            f"unknown conversation variable type {value_type!r}; expected one of {', '.join(VARIABLE_TYPES)}"
        )
    return t


def zero_value(value_type: str) -> Any:
    """What ``clear`` writes: ``""``, ``0``, ``false``, ``{}`` or ``[]`` (graphon ``get_zero_value``)."""
    t = normalize_type(value_type)
    return {"string": "", "number": 0, "boolean": False, "object": {}}.get(t, [])


def _is_number(value: Any) -> bool:
    # Dify accepts bools where numbers are expected (bool is an int in Python).
    return isinstance(value, (int, float))


def is_valid(value_type: str, value: Any) -> bool:
    """Dify's ``is_valid`` for a live edit: the value fits the (normalised) type."""
    t = normalize_type(value_type)
    if t == "string":
        return isinstance(value, str)
    if t == "number":
        return _is_number(value)
    if t == "boolean":
        return isinstance(value, bool)
    if t == "object":
        return isinstance(value, dict)
    return isinstance(value, list) and all(is_valid(_ELEMENT[t], v) for v in value)


_NUMERIC = frozenset({"integer", "float"})
#: Python types → the names Dify's inference gives them, in order (a bool is an int to Python).
_SCALAR_KINDS = ((bool, "boolean"), (int, "integer"), (float, "float"), (str, "string"), (dict, "object"))


def infer_type(value: Any) -> str:
    """The type Dify infers for a value (graphon's segment-type inference), as its mismatch
    message names it: an int is ``integer``, a float ``float``; a list whose elements are all
    numbers — an empty list too — is ``array[number]``; one of a single other kind is
    ``array[string]``/``array[boolean]``/``array[object]``; a mixed list is ``array[any]``;
    ``None`` is ``none``."""
    if value is None or value is NONE:
        return "none"
    for kind, name in _SCALAR_KINDS:
        if isinstance(value, kind):
            return name
    if isinstance(value, list):
        kinds = {infer_type(v) for v in value}
        if kinds <= _NUMERIC:
            return "array[number]"
        if len(kinds) == 1 and (k := kinds.pop()) in ("string", "boolean", "object"):
            return f"array[{k}]"
        return "array[any]"
    return type(value).__name__


def variable_size(value: Any) -> int:
    """Dify's size of a loaded variable: the shallow ``sys.getsizeof`` of its value as read back
    from the stored JSON. A list of plain values is not written and read back for it (a list that
    grows every turn was, whole, on every turn): its shallow size is that of a list the JSON reader
    fills one item at a time."""
    if type(value) is list and _ATOMIC.issuperset(map(type, value)):
        return _filled_list_size(len(value))
    return sys.getsizeof(json.loads(json.dumps(value)))


@lru_cache(maxsize=4096)
def _filled_list_size(n: int) -> int:
    """``sys.getsizeof`` of a list built by ``n`` appends, as the JSON reader builds one."""
    items: list = []
    for _ in range(n):
        items.append(None)
    return sys.getsizeof(items)


def check_sizes(values: Mapping[str, Any]) -> str | None:
    """Dify's message for the first variable over :data:`MAX_VARIABLE_SIZE`, or ``None``."""
    for value in values.values():
        size = variable_size(value)
        if size > MAX_VARIABLE_SIZE:
            return f"variable size {size} exceeds limit {MAX_VARIABLE_SIZE}"
    return None


def segment_type(value_type: str, value: Any) -> str:
    """The type name Dify's engine gives a stored variable: numbers are ``integer`` or ``float``."""
    t = normalize_type(value_type)
    if t == "number":
        return "float" if isinstance(value, float) else "integer"
    return t


def mismatch_message(name: str, value_type: str, current: Any, value: Any) -> str:
    """Dify's refusal of an edit whose ``value`` does not fit the variable. It names the type of the segment
    the variable holds now (:func:`segment_type`): a number variable holding 2.5 "expects float"; one
    holding an integer "expects number", the word the web app shows."""
    expected = segment_type(value_type, current)
    return (
        f"Type mismatch: variable '{name}' expects {'number' if expected == 'integer' else expected}, "
        f"but got {infer_type(value)} type"
    )


# -- declarations -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConversationVariable:
    """A declared conversation variable: its Dify id, name, type, default and description."""

    name: str
    type: str
    default: Any
    description: str = ""
    id: str = ""

    @property
    def selector(self) -> list[str]:
        return ["conversation", self.name]

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "name": self.name,
            "value_type": self.type,
            "value": copy_value(self.default),
            "description": self.description,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, scope: str = "") -> "ConversationVariable":
        """Read a declaration (Dify's ``{id, name, value_type, value, description}`` or MemLens's
        ``{name, type, default, description}``) and check it as Dify's factory does."""
        if not isinstance(data, Mapping):
            raise VariableError(f"a conversation variable must be a mapping, not {type(data).__name__}")
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise VariableError("a conversation variable needs a non-empty 'name'")
        raw_type = data.get("value_type", data.get("type"))
        if not isinstance(raw_type, str):
            raise VariableError(
                f"conversation variable {name!r} needs a 'value_type' (one of {', '.join(VARIABLE_TYPES)})"
            )
        t = normalize_type(raw_type)
        has_value = "value" in data or "default" in data
        value = data["value"] if "value" in data else data.get("default")
        if not has_value:
            value = zero_value(t)
        if value is None:
            raise VariableError(
                f"conversation variable {name!r}: missing value (a default is required; "
                f"use {json.dumps(zero_value(t))} for an empty {t})"
            )
        if t == "number" and isinstance(value, str):
            # Dify's UI writes number defaults typed into a text box as strings.
            try:
                value = int(value) if value.strip().lstrip("-").isdigit() else float(value)
            except ValueError:
                pass
        if not is_valid(t, value):
            raise VariableError(
                f"conversation variable {name!r}: default {json.dumps(value, ensure_ascii=False)} is not a {t}"
            )
        description = data.get("description") or ""
        if not isinstance(description, str):
            raise VariableError(f"conversation variable {name!r}: 'description' must be text")
        if len(description) > 255:
            raise VariableError(f"conversation variable {name!r}: description is longer than 255 characters")
        vid = data.get("id") or str(uuid.uuid5(_ID_NAMESPACE, f"{scope}:{name}"))
        return cls(name=name, type=t, default=copy_value(value), description=description, id=str(vid))


def defaults(declarations: Sequence[ConversationVariable]) -> dict[str, Any]:
    """Every declared variable at its default value (a conversation's first run)."""
    return {v.name: copy_value(v.default) for v in declarations}


def initialize(declarations: Sequence[ConversationVariable], values: Mapping[str, Any]) -> dict[str, Any]:
    """Stored values plus defaults for variables declared since (Dify keeps rows it no longer declares)."""
    out = copy_value(dict(values))
    for v in declarations:
        if v.name not in out:
            out[v.name] = copy_value(v.default)
    return out


# -- the change log ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class VariableChange:
    """One write to a conversation variable: by a node's operation, or by the user (``node_id="user"``)."""

    turn: int
    node_id: str
    operation: str
    name: str
    old: Any
    new: Any
    turn_id: str | None = None

    @property
    def by_user(self) -> bool:
        return self.node_id == USER

    def to_dict(self) -> dict:
        return {
            "turn": self.turn,
            "turn_id": self.turn_id,
            "node_id": self.node_id,
            "operation": self.operation,
            "name": self.name,
            "old": copy_value(self.old),
            "new": copy_value(self.new),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "VariableChange":
        return cls(
            turn=int(data["turn"]),
            node_id=str(data["node_id"]),
            operation=str(data["operation"]),
            name=str(data["name"]),
            old=copy_value(data.get("old")),
            new=copy_value(data.get("new")),
            turn_id=data.get("turn_id"),
        )


# -- the one way to edit a variable from outside the flow -------------------------------------------


def edit_variable(
    declarations: Sequence[ConversationVariable],
    values: Mapping[str, Any],
    name: str,
    value: Any,
    *,
    turn: int = 0,
    turn_id: str | None = None,
) -> tuple[dict[str, Any], VariableChange]:
    """Set a conversation variable from outside the flow (the UI's editor, the API's PUT).

    Returns the new values and the change record; ``values`` itself is never modified. A value of
    the wrong type raises :class:`TypeMismatchError` with Dify's message
    (``Type mismatch: variable 'x' expects number, but got string type``); an unknown name raises
    :class:`VariableError`. In both cases nothing changes.
    """
    by_name = {v.name: v for v in declarations}
    declared = by_name.get(name)
    if declared is None:
        known = ", ".join(sorted(by_name)) or "none"
        raise VariableError(f"conversation variable {name!r} does not exist; the flow declares: {known}")
    new_values = copy_value(dict(values))
    old = new_values.get(name, copy_value(declared.default))
    if not is_valid(declared.type, value):
        raise TypeMismatchError(mismatch_message(name, declared.type, old, value))
    new_values[name] = copy_value(value)
    return new_values, VariableChange(
        turn=turn, node_id=USER, operation="edit", name=name, old=old, new=copy_value(value), turn_id=turn_id
    )


# -- the Variable Assigner --------------------------------------------------------------------------

Lookup = Callable[[Sequence[str]], Any]


@dataclass
class AssignResult:
    """What an assigner node did: the values after it, one change per applied item, and notes."""

    values: dict[str, Any]
    changes: list[tuple[str, str, Any, Any]] = field(default_factory=list)  # (name, operation, old, new)
    notes: list[str] = field(default_factory=list)


def _target_name(selector: Any, values: Mapping[str, Any]) -> str | None:
    if (
        isinstance(selector, (list, tuple))
        and len(selector) == 2
        and selector[0] == "conversation"
        and isinstance(selector[1], str)
        and selector[1] in values
    ):
        return selector[1]
    return None


def _from_pass_through(value: Any) -> bool:
    return value is NONE


def run_assigner_v1(
    data: Mapping[str, Any], declarations: Sequence[ConversationVariable], values: Mapping[str, Any], lookup: Lookup
) -> AssignResult:
    """Variable Assigner v1 (``write_mode`` over-write / append / clear); raises :class:`AssignerError`."""
    by_name = {v.name: v for v in declarations}
    working = copy_value(dict(values))
    name = _target_name(data.get("assigned_variable_selector"), working)
    if name is None:
        raise AssignerError("assigned variable not found")
    mode = data.get("write_mode", "over-write")
    old = working[name]
    result = AssignResult(values=working)
    if mode == "clear":
        declared = by_name.get(name)
        new = zero_value(declared.type) if declared else zero_value(_infer_declared(old))
    else:
        source = lookup(data.get("input_variable_selector") or [])
        if source is MISSING:
            raise AssignerError("input value not found")
        empty = source is None or _from_pass_through(source)
        if empty and mode == "over-write":
            # Dify copies the NONE segment's value: the variable becomes null.
            where = ".".join(map(str, data.get("input_variable_selector") or []))
            why = "comes from a node MemLens does not emulate" if _from_pass_through(source) else "is empty"
            result.notes.append(
                f"{where} {why}; over-write copied nothing, so conversation.{name} is now null "
                f"(as Dify's v1 assigner does)"
            )
            source = None
        elif _from_pass_through(source):
            result.notes.append(
                f"{'.'.join(map(str, data.get('input_variable_selector') or []))} comes from a node "
                f"MemLens does not emulate; conversation.{name} left unchanged"
            )
            return result
        if mode == "append":
            declared = by_name.get(name)
            if not isinstance(old, list) or (declared and not declared.type.startswith("array")):
                raise AssignerError("append mode requires an array variable")
            new = old + [copy_value(source)]
        else:
            new = copy_value(source)
    working[name] = new
    result.changes.append((name, mode, old, copy_value(new)))
    return result


def _infer_declared(value: Any) -> str:
    t = _TYPE_ALIASES.get(infer_type(value), infer_type(value))
    return t if t in VARIABLE_TYPES else "string"


def _type_of(name: str, value: Any, by_name: Mapping[str, ConversationVariable]) -> str:
    declared = by_name.get(name)
    return declared.type if declared else _infer_declared(value)


def _operation_supported(value_type: str, op: str) -> bool:
    if op in ("over-write", "clear"):
        return True
    if op == "set":
        return not value_type.startswith("array")
    if op in _ARITHMETIC:
        return value_type == "number"
    return value_type.startswith("array")  # append, extend, remove-first, remove-last


def _constant_supported(value_type: str, op: str) -> bool:
    if value_type in ("string", "object", "boolean"):
        return op in ("over-write", "set")
    if value_type == "number":
        return op in ("over-write", "set", *_ARITHMETIC)
    return False


def _value_valid(value_type: str, op: str, value: Any) -> bool:
    if op in _NO_VALUE:
        return True
    if value_type == "number":
        return _is_number(value) and not (op == "/=" and value == 0)
    if value_type in ("string", "boolean", "object"):
        return is_valid(value_type, value)
    element = _ELEMENT[value_type]
    if op == "append":
        return is_valid(element, value)
    if op in ("extend", "over-write"):
        return isinstance(value, list) and all(is_valid(element, v) for v in value)
    return False


def _apply(op: str, value_type: str, old: Any, value: Any) -> Any:
    if op in ("over-write", "set"):
        return copy_value(value)
    if op == "clear":
        return zero_value(value_type)
    if op == "append":
        return old + [copy_value(value)]
    if op == "extend":
        return old + copy_value(value)
    if op == "+=":
        return old + value
    if op == "-=":
        return old - value
    if op == "*=":
        return old * value
    if op == "/=":
        return old / value
    if op == "remove-first":
        return old[1:] if old else old
    if op == "remove-last":
        return old[:-1] if old else old
    raise AssignerError(f"Operation {op} is not supported")  # unreachable: operations are checked at load


def _value_repr(value: Any) -> str:
    # Dify formats the offending value with str(): Python's spelling for lists, dicts and None.
    return str(value)


def _read(selector: Sequence[str], working: Mapping[str, Any], lookup: Lookup) -> Any:
    # Items run on the node's working copy: a conversation variable written by an earlier item of
    # the same node is read back with its new value (read-after-write, §3.4).
    if len(selector) == 2 and selector[0] == "conversation" and selector[1] in working:
        return working[selector[1]]
    return lookup(selector)


def run_assigner_v2(
    items: Sequence[Mapping[str, Any]],
    declarations: Sequence[ConversationVariable],
    values: Mapping[str, Any],
    lookup: Lookup,
) -> AssignResult:
    """Variable Assigner v2; raises :class:`AssignerError` (no update applied) on the first bad item."""
    by_name = {v.name: v for v in declarations}
    working = copy_value(dict(values))
    result = AssignResult(values=working)
    for position, item in enumerate(items, start=1):
        selector = item.get("variable_selector")
        op = item.get("operation", "over-write")
        input_type = item.get("input_type", "variable")
        name = _target_name(selector, working)
        if name is None:
            raise AssignerError(f"Variable {list(selector or [])} not found")
        old = working[name]
        value_type = _type_of(name, old, by_name)
        if not _operation_supported(value_type, op):
            # Dify names the type the variable was stored with, which arithmetic never changes.
            stored = by_name[name].default if name in by_name else old
            raise AssignerError(f"Operation {op} is not supported for type {segment_type(value_type, stored)}")
        if input_type == "variable" and op in ("set", *_ARITHMETIC):
            raise AssignerError(f"Input type variable is not supported for operation {op}")
        if input_type == "constant" and not _constant_supported(value_type, op):
            raise AssignerError(f"Input type constant is not supported for operation {op}")
        value = item.get("value")
        if input_type == "variable" and op not in _NO_VALUE and value is not None:
            source = _read(value if isinstance(value, (list, tuple)) else [], working, lookup)
            if source is MISSING:
                raise AssignerError(f"Variable {list(value) if isinstance(value, (list, tuple)) else value} not found")
            if source is NONE or source is None:
                # Dify skips an item whose source is a NONE segment, silently; the record says so.
                result.notes.append(
                    f"item {position}: {'.'.join(map(str, value))} is empty; conversation.{name} left unchanged"
                )
                continue
            value = source
        if op == "set" and value_type == "object" and isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:  # (a number past Python's digit limit too)
                raise AssignerError(f"Invalid input value {_value_repr(value)[:80]}") from None
        if not _value_valid(value_type, op, value):
            raise AssignerError(f"Invalid input value {_value_repr(value)}")
        try:
            new = _apply(op, value_type, old, value)
        except TypeError as e:  # a stored value of the wrong type (v1 copies without checks)
            raise AssignerError(
                f"Invalid input value {_value_repr(value)} for the stored value {_value_repr(old)} ({e})"
            ) from None
        working[name] = new
        result.changes.append((name, op, copy_value(old), copy_value(new)))
    return result


def check_assigner_data(data: Mapping[str, Any]) -> str:
    """Validate an assigner node's data at load time; returns its version ("1" or "2")."""
    version = str(data.get("version") or "1")
    if version == "2":
        items = data.get("items")
        if not isinstance(items, list):
            raise VariableError("a version 2 Variable Assigner needs an 'items' list")
        for i, item in enumerate(items, start=1):
            if not isinstance(item, Mapping):
                raise VariableError(f"assigner item {i} must be a mapping")
            op = item.get("operation", "over-write")
            if op not in V2_OPERATIONS:
                raise VariableError(
                    f"assigner item {i}: unknown operation {op!r}; expected one of {', '.join(V2_OPERATIONS)}"
                )
            kind = item.get("input_type", "variable")
            if kind not in INPUT_TYPES:
                raise VariableError(f"assigner item {i}: unknown input_type {kind!r}; expected variable or constant")
            if not isinstance(item.get("variable_selector"), list):
                raise VariableError(f"assigner item {i} needs a 'variable_selector' list, e.g. [conversation, name]")
        return "2"
    if version != "1":
        raise VariableError(f"unknown Variable Assigner version {version!r}; expected 1 or 2")
    mode = data.get("write_mode", "over-write")
    if not isinstance(mode, str) or mode not in V1_MODES:
        raise VariableError(f"unknown assigner write_mode {mode!r}; expected one of {', '.join(V1_MODES)}")
    for key in ("assigned_variable_selector", "input_variable_selector"):
        if data.get(key) is not None and not isinstance(data[key], list):
            raise VariableError(f"'{key}' must be a list, e.g. [conversation, name]")
    return "1"


__all__ = [
    "VARIABLE_TYPES",
    "V1_MODES",
    "V2_OPERATIONS",
    "USER",
    "ConversationVariable",
    "VariableChange",
    "AssignResult",
    "normalize_type",
    "zero_value",
    "is_valid",
    "infer_type",
    "segment_type",
    "mismatch_message",
    "MAX_VARIABLE_SIZE",
    "variable_size",
    "check_sizes",
    "defaults",
    "initialize",
    "edit_variable",
    "run_assigner_v1",
    "run_assigner_v2",
    "check_assigner_data",
]
