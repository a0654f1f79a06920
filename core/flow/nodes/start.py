"""The start node and its form: the fields a run's inputs fill (``variables``), checked when a flow is
read, and the inputs of a run checked and converted as Dify's ``BaseAppGenerator._validate_inputs``
does before it runs (:func:`check_inputs`); the start node's outputs are those inputs.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import RunError, node_error

if TYPE_CHECKING:  # pragma: no cover
    from ..context import RunContext
    from ..graph import Flow, Node
    from ..records import NodeRun


def check_start(node: Node) -> None:
    fields = node.data.get("variables")
    if fields is not None and not isinstance(fields, list):
        raise node_error(node, "'variables' must be a list of the start form's fields")


def check_inputs(flow: Flow, query: str, inputs: Mapping[str, Any] | None) -> dict:
    """The start form's inputs, checked and converted as Dify's ``BaseAppGenerator._validate_inputs``
    does before a run (nothing runs on error): only a missing value (``None``) is "not given" — it
    takes the field's default, else stays ``None``, and fails a required field; an empty text is
    a value like any other (an empty number is ``None``); NUL characters are taken out of text."""
    given = dict(inputs or {})
    out: dict[str, Any] = {}
    for var in flow.start_fields:
        name = str(var["variable"])
        kind = var.get("type") or "text-input"
        label = var.get("label") or name
        if not flow.is_chat and name == "query" and name not in given:
            given[name] = query  # a Workflow app's form usually carries the question as its `query` input
        value = given.get(name)
        defaulted = value is None
        if defaulted:
            if var.get("required"):
                raise RunError(f"input {name!r} ({label}) is required by the start form; pass it in inputs")
            value = var.get("default")
        out[name] = _input_value(name, kind, var, value, defaulted=defaulted)
    return out


#: The texts Dify reads as a checkbox's value (any other text is kept as it is).
CHECKBOX_WORDS = {
    "true": True,
    "1": True,
    "yes": True,
    "on": True,
    "false": False,
    "0": False,
    "no": False,
    "off": False,
}


def _input_value(name: str, kind: str, var: Mapping[str, Any], value: Any, *, defaulted: bool = False) -> Any:
    """One start-form value as Dify takes it (``_validate_inputs`` and ``_sanitize_value``);
    ``defaulted``: the value is the field's default, the input not being given."""
    if value is None:
        return None
    if kind in ("file", "file-list") and not var.get("required") and value == "":
        return None  # the form's empty placeholder for an optional file: no file
    if kind in ("text-input", "paragraph", "select") and not isinstance(value, str):
        raise RunError(f"input {name!r} must be text")
    if kind == "number":
        if isinstance(value, str):
            if not value.strip():
                return None
            try:
                value = float(value) if "." in value else int(value)
            except ValueError:  # (a whole number past Python's 4,300 digits too)
                shown = repr(value) if len(value) <= 40 else f"{value[:40]!r}… ({len(value):,} characters)"
                raise RunError(f"input {name!r} must be a valid number, not {shown}") from None
        if not isinstance(value, (int, float)):
            raise RunError(f"input {name!r} must be a number")
        if isinstance(value, float) and not math.isfinite(value):  # "1.5e400" reads as inf
            raise RunError(f"input {name!r} must be a finite number, not {value!r}")
        return value
    if kind == "select":
        options = var.get("options") or []
        if value not in options:
            # An optional select left unset whose default is no option (often ''): Dify fails the run
            # too (langgenius/dify#33069), so the message says where the value came from.
            why = f" (not given, so its default {value!r}, which Dify refuses too)" if defaulted else ""
            raise RunError(f"input {name!r} must be one of the following: {list(options)}{why}")
    elif kind in ("text-input", "paragraph"):
        limit = var.get("max_length")
        if isinstance(limit, int) and limit > 0 and len(value) > limit:
            raise RunError(f"input {name!r} must be less than {limit} characters")
    elif kind == "checkbox":
        if isinstance(value, str):
            value = CHECKBOX_WORDS.get(value.strip().lower(), value)
        elif isinstance(value, (int, float)) and value in (0, 1):
            value = value == 1
    elif kind == "json_object":
        if value and not isinstance(value, Mapping):
            raise RunError(f"input {name!r} must be an object")
    return value.replace("\x00", "") if isinstance(value, str) else value


def run_start(node: Node, ctx: RunContext, run: NodeRun) -> None:
    run.outputs = dict(ctx.inputs)


__all__ = ["CHECKBOX_WORDS", "check_inputs", "check_start", "run_start"]
