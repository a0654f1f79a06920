"""The start form of a flow, filled in before a conversation starts — what Dify's web app asks for
before the first message. Each field is offered as its type is (text, paragraph, select, number,
checkbox); a file or JSON field is not (MemLens reads no file contents), so a flow that requires
one says so. Labels and options are the flow's own text, shown as written."""

from __future__ import annotations

from typing import Any

import streamlit as st

from core.flow import Flow
from ui import html

#: The field types offered here; every other type (file, file-list, json_object) is named, not offered.
OFFERED = ("text-input", "paragraph", "select", "number", "checkbox")
#: What an optional select shows for "not given".
UNSET = "(not set)"


def start_form(flow: Flow, key: str) -> tuple[dict[str, Any], list[str]]:
    """Draws the flow's start form; returns the inputs given (a field left empty is not given) and
    the labels of the required fields still missing (a required field not offered here among them)."""
    fields = flow.start_fields
    inputs: dict[str, Any] = {}
    missing: list[str] = []
    if not fields:
        return inputs, missing
    st.caption("Start form — the inputs this flow asks for before the first message")
    for var in fields:
        name = str(var["variable"])
        kind = str(var.get("type") or "text-input")
        label = str(var.get("label") or name)
        required = bool(var.get("required"))
        shown = html.plain(label + (" *" if required else ""))
        wkey = f"{key}-{name}"
        value: Any = None
        if kind not in OFFERED:
            st.caption(
                html.plain(
                    f"{label}: a {kind} input, not offered here"
                    + (" (required: this flow cannot start from the Debugger)" if required else "")
                )
            )
        elif kind == "select":
            options = [str(o) for o in var.get("options") or ()]
            default = var.get("default")
            choices = options if required else [UNSET, *options]
            index = choices.index(default) if default in choices else 0
            picked = st.selectbox(shown, choices, index=index, key=wkey, format_func=html.plain)
            value = None if picked == UNSET else picked
        elif kind == "checkbox":
            value = st.checkbox(shown, value=bool(var.get("default")), key=wkey)
        else:
            limit = var.get("max_length") if isinstance(var.get("max_length"), int) and var["max_length"] > 0 else None
            default = var.get("default")
            initial = "" if default is None else str(default)
            widget = st.text_area if kind == "paragraph" else st.text_input
            text = widget(shown, value=initial, max_chars=limit if kind != "number" else None, key=wkey)
            value = text if text != "" else None
        if value is not None:
            inputs[name] = value
        elif required:
            missing.append(label)
    return inputs, missing
