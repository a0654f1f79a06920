"""An agent run's state, as Haystack's ``State`` keeps it (spec/memory-models.md §A.1).

A schema maps each key to ``{"type": <type>, "handler": <callable or None>}``; a type is a class, a
parameterised generic or a union — bare ``typing.List``, ``Literal[...]`` and ``Annotated[...]`` are
refused as Haystack refuses them. ``messages`` is added as ``list[Message]`` with :func:`merge_lists`
when the schema lacks it. The default handler is :func:`merge_lists` for list types and
:func:`replace_values` for everything else; any ``f(current, new) -> merged`` is a custom handler
(:func:`dedup_append` is one). ``set`` merges through the handler (an override wins), ``get`` returns a
deep copy, and data given to the constructor — a run's ``state_inputs`` — is stored as it is (no
handler, ``None`` kept). ``to_dict`` keeps sets, frozensets and tuples; ``from_dict`` gives the same
state back. Schema errors raise :class:`StateError`, a ``ValueError``; Haystack 3.x also refuses its
run-metadata and internal keys (:data:`RESERVED_KEYS`) in a schema (:func:`check_schema`).

``version`` picks the rules: ``3`` (default) follows haystack-ai 3.4.1, ``2`` the newest 2.x (2.31.0).
"""

from __future__ import annotations

import copy
import inspect
import json
import re
import types
import typing
from typing import Any, Callable, Mapping

from core.model.conversation import Message

from ..errors import StateError

#: Keys the Agent keeps for itself (Haystack 3.x ``_INTERNAL_STATE_KEYS``), never outputs.
INTERNAL_KEYS = ("continue_run", "stop_run", "tools", "hook_context", "context_tokens")
#: Run metadata the Agent writes into its state and outputs (Haystack 3.x ``_RUN_METADATA_STATE_KEYS``).
RUN_METADATA_KEYS = ("step_count", "token_usage", "tool_call_counts", "exit_reason")
#: No state schema may declare these (Haystack raises ValueError for either group).
RESERVED_KEYS = INTERNAL_KEYS + RUN_METADATA_KEYS
#: The node's own outputs besides the state's keys.
NODE_OUTPUTS = ("text", "last_message", "usage") + RUN_METADATA_KEYS
HAYSTACK_VERSIONS = (3, 2)
DEFAULT_HAYSTACK_VERSION = 3


# -- merge handlers ---------------------------------------------------------------------------------


def merge_lists(current: Any, new: Any) -> list:
    """``None`` counts as ``[]``; a non-list value is wrapped in a list; the result is ``current + new``."""
    cur = [] if current is None else (list(current) if isinstance(current, list) else [current])
    add = list(new) if isinstance(new, list) else [new]
    return cur + add


def replace_values(current: Any, new: Any) -> Any:
    return new


def dedup_append(current: Any, new: Any) -> list:
    """A custom handler (the Haystack docs' example): append the items not already present."""
    out = merge_lists(current, [])
    for item in new if isinstance(new, list) else [new]:
        if item not in out:
            out.append(item)
    return out


def add_numbers(current: Any, new: Any) -> Any:
    """A custom handler: a running total (``None`` counts as 0)."""
    return (current or 0) + new


HANDLERS: dict[str, Callable[[Any, Any], Any]] = {
    "merge_lists": merge_lists,
    "replace_values": replace_values,
    "dedup_append": dedup_append,
    "add_numbers": add_numbers,
}


def handler_name(handler: Callable) -> str:
    for name, h in HANDLERS.items():
        if h is handler:
            return name
    return getattr(handler, "__name__", repr(handler))


# -- types ------------------------------------------------------------------------------------------

_TYPE_NAMES: dict[str, Any] = {
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "dict": dict,
    "list": list,
    "set": set,
    "frozenset": frozenset,
    "tuple": tuple,
    "object": object,
    "None": type(None),
    "Message": Message,
    "ChatMessage": Message,
    "Any": Any,
}


def _is_union(t: Any) -> bool:
    return isinstance(t, types.UnionType) or typing.get_origin(t) is typing.Union


def _check_type(key: str, t: Any) -> None:
    """Haystack's rule: a class, a parameterised generic (``list[str]``, ``typing.List[str]``) or a union.

    Bare ``typing.List``, ``Literal[...]``, ``Annotated[...]`` and ``Callable[...]`` are refused, as Haystack's
    ``_is_valid_type`` refuses every typing alias but the plain generic one.
    """
    if _is_union(t):
        return
    if t is typing.Union:
        raise StateError(f"state key {key!r}: a bare Union is not a type; write e.g. str | None")
    if inspect.isclass(t) or type(t).__name__ in ("_GenericAlias", "GenericAlias"):
        return
    raise StateError(
        f"state key {key!r}: {t!r} is not a type; use a class (str), a generic (list[str]) or a union (str | None)"
    )


def _is_list_type(t: Any) -> bool:
    return t is list or typing.get_origin(t) is list


def parse_type(text: str) -> Any:
    """A type written in a flow file: ``str``, ``list[str]``, ``int | None``, ``list[Message]``…"""
    if not isinstance(text, str) or not text.strip():
        raise StateError(f"{text!r} is not a type name")
    parts = [p.strip() for p in _split_top(text, "|")]
    if len(parts) > 1:
        out = parse_type(parts[0])
        for p in parts[1:]:
            out = out | parse_type(p)
        return out
    m = re.fullmatch(r"(list|set|frozenset|dict)\[(.+)\]", text.strip())
    if m:
        inner = [parse_type(p) for p in _split_top(m.group(2), ",")]
        if m.group(1) == "dict":
            return dict[inner[0], inner[1] if len(inner) > 1 else Any]
        return _TYPE_NAMES[m.group(1)][inner[0]]
    t = _TYPE_NAMES.get(text.strip())
    if t is None:
        raise StateError(
            f"unknown type {text!r}; use str, int, float, bool, dict, list, set, list[...] or a union with |"
        )
    return t


def _split_top(text: str, sep: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == sep and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def type_name(t: Any) -> str:
    if t is type(None):
        return "None"
    if isinstance(t, type) and typing.get_origin(t) is None:
        return t.__name__
    return str(t).replace("typing.", "").replace("core.model.conversation.", "")


# -- state ------------------------------------------------------------------------------------------


class State:
    """A run's state: a schema and the data written through its merge handlers (see the module docstring)."""

    def __init__(self, schema: Mapping[str, Mapping[str, Any]], data: dict[str, Any] | None = None):
        self.schema: dict[str, dict[str, Any]] = {}
        for key, spec in schema.items():
            if not isinstance(spec, Mapping) or "type" not in spec:
                raise StateError(f"state key {key!r} needs a 'type'")
            t = spec["type"]
            _check_type(key, t)
            handler = spec.get("handler")
            if handler is not None and not callable(handler):
                raise StateError(f"state key {key!r}: handler {handler!r} is not callable")
            if handler is None:
                handler = merge_lists if _is_list_type(t) else replace_values
            self.schema[key] = {"type": t, "handler": handler}
        if "messages" in self.schema:
            t = self.schema["messages"]["type"]
            args = typing.get_args(t)
            if not (_is_list_type(t) and args and isinstance(args[0], type) and issubclass(args[0], Message)):
                raise StateError(f"state key 'messages' must be a list of messages (list[Message]), not {type_name(t)}")
        else:
            self.schema["messages"] = {"type": list[Message], "handler": merge_lists}
        # The caller's dict itself, as Haystack keeps it (``data or {}``): a change to either shows in the
        # other; an empty one is replaced by a new dict. Stored as given: handlers are not applied.
        self._data: dict[str, Any] = data or {}

    def set(self, key: str, value: Any, handler_override: Callable[[Any, Any], Any] | None = None) -> None:
        if key not in self.schema:
            raise StateError(f"state key {key!r} is not in the schema; declared keys: {', '.join(self.schema)}")
        handler = handler_override or self.schema[key]["handler"]
        self._data[key] = handler(self._data.get(key), value)

    def replace(self, key: str, value: Any) -> None:
        """Store ``value`` as the key's new value, whatever its merge handler (``replace_values``)."""
        self.set(key, value, handler_override=replace_values)

    def get(self, key: str, default: Any = None) -> Any:
        return copy.deepcopy(self._data.get(key, default))

    def has(self, key: str) -> bool:
        return key in self._data

    @property
    def data(self) -> dict[str, Any]:
        return self._data

    def snapshot(self) -> dict[str, Any]:
        """The state as JSON-friendly data: every key but ``messages`` (which the record counts)."""
        out = {}
        for key, value in self._data.items():
            if key == "messages":
                continue
            try:
                json.dumps(value)
            except (TypeError, ValueError):
                value = repr(value)  # a non-serialisable field is shown, not dropped from the record
            out[key] = copy.deepcopy(value)
        return out

    def to_dict(self) -> dict:
        """Schema (types and handlers by name) and data as JSON; a field that cannot be encoded is dropped by
        itself (Haystack's field-level fallback). Sets, frozensets and tuples keep their kind (see
        :func:`encode_value`), so :meth:`from_dict` gives the same state back."""
        data = {}
        for key, value in self._data.items():
            try:
                data[key] = encode_value(value)
            except TypeError:
                continue
        return {
            "schema": {
                k: {"type": type_name(v["type"]), "handler": handler_name(v["handler"])} for k, v in self.schema.items()
            },
            "data": data,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "State":
        """The inverse of :meth:`to_dict`; handlers are found by name among :data:`HANDLERS`."""
        schema = {}
        for key, spec in (data.get("schema") or {}).items():
            handler = spec.get("handler")
            if handler is not None and handler not in HANDLERS:
                raise StateError(
                    f"state key {key!r}: handler {handler!r} is unknown; expected one of {', '.join(HANDLERS)}"
                )
            schema[key] = {"type": parse_type(spec["type"]), "handler": HANDLERS.get(handler)}
        return cls(schema, {k: decode_value(v) for k, v in (data.get("data") or {}).items()})


#: The marker of an encoded set, frozenset, tuple or message (a one-key object: ``{"$set": [...]}``).
_KINDS = {"$set": set, "$frozenset": frozenset, "$tuple": tuple}


def encode_value(value: Any) -> Any:
    """A state value as JSON data: containers keep their kind, messages become :meth:`Message.to_dict` (``exchanged_only``);
    ``TypeError`` for anything else that JSON cannot hold."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, Message):
        return {"$message": value.to_dict(exchanged_only=True)}
    if isinstance(value, list):
        return [encode_value(v) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [encode_value(v) for v in value]
        items.sort(key=lambda v: json.dumps(v, sort_keys=True))  # a set has no order: make the output stable
        return {"$frozenset" if isinstance(value, frozenset) else "$set": items}
    if isinstance(value, tuple):
        return {"$tuple": [encode_value(v) for v in value]}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("only text keys can be encoded")
        out = {k: encode_value(v) for k, v in value.items()}
        return {"$dict": out} if len(out) == 1 and next(iter(out)).startswith("$") else out
    raise TypeError(f"a {type(value).__name__} cannot be encoded")


def decode_value(value: Any) -> Any:
    """The inverse of :func:`encode_value`."""
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((key, inner),) = value.items()
        if key in _KINDS:
            return _KINDS[key](decode_value(v) for v in inner)
        if key == "$message":
            return Message.from_dict(inner)
        if key == "$dict":
            return {k: decode_value(v) for k, v in inner.items()}
    return {k: decode_value(v) for k, v in value.items()}


def check_schema(schema: Mapping[str, Any]) -> None:
    reserved = sorted(set(schema) & set(RESERVED_KEYS))
    if reserved:
        raise StateError(
            f"state key(s) {', '.join(reserved)} are reserved by the agent (run metadata or "
            f"internal keys: {', '.join(RESERVED_KEYS)}); choose another name"
        )


__all__ = [
    "DEFAULT_HAYSTACK_VERSION",
    "HANDLERS",
    "HAYSTACK_VERSIONS",
    "INTERNAL_KEYS",
    "NODE_OUTPUTS",
    "RESERVED_KEYS",
    "RUN_METADATA_KEYS",
    "State",
    "add_numbers",
    "check_schema",
    "decode_value",
    "dedup_append",
    "encode_value",
    "handler_name",
    "merge_lists",
    "parse_type",
    "replace_values",
    "type_name",
]
