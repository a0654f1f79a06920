"""What MemLens makes of a flow it read: per node, whether it runs (emulated), passes through (a type
MemLens does not run) or sits inside an iteration or loop (never run), and each model node's memory
setting in words — the import page, ``python -m core flows`` and the API show it. It is computed from
the flow alone, so a stored copy reports the same.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass

from core.model.tokens import DEMO_MODEL

from .graph import Flow, Node
from .nodes.text_memory import ShippedWindowNode


@dataclass(frozen=True)
class NodeReport:
    id: str
    type: str
    title: str
    emulated: bool
    status: str  # "emulated", "pass-through" or "inside <container>: not run"
    memory: dict | None = None  # LLM nodes: on/off, window, query template, model

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "type": self.type,
            "title": self.title,
            "emulated": self.emulated,
            "status": self.status,
            "memory": copy.deepcopy(self.memory),
        }


@dataclass(frozen=True)
class ImportReport:
    """Per file: which nodes MemLens runs, which pass through, and each LLM node's memory setting."""

    name: str
    file: str
    format: str
    dsl_version: str | None
    mode: str
    nodes: tuple[NodeReport, ...]
    warnings: tuple[str, ...]

    @property
    def emulated(self) -> list[NodeReport]:
        return [n for n in self.nodes if n.status == "emulated"]

    @property
    def pass_through(self) -> list[NodeReport]:
        return [n for n in self.nodes if n.status == "pass-through"]

    @property
    def llm_memory(self) -> dict[str, dict]:
        return {n.id: n.memory for n in self.nodes if n.memory is not None}

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "file": self.file,
            "format": self.format,
            "dsl_version": self.dsl_version,
            "mode": self.mode,
            "nodes": [n.to_dict() for n in self.nodes],
            "warnings": list(self.warnings),
        }

    def to_text(self) -> str:
        lines = [
            f"{self.file or self.name}: {self.name} ({self.format}"
            + (f" {self.dsl_version}" if self.dsl_version else "")
            + f", {self.mode})",
            f"  emulated {len(self.emulated)} · pass-through {len(self.pass_through)}"
            f" · not run {len(self.nodes) - len(self.emulated) - len(self.pass_through)}",
        ]
        for n in self.nodes:
            line = f"  {n.status:<14} {n.type:<20} {n.id}" + (f" ({n.title})" if n.title else "")
            if n.memory is not None:
                m = n.memory
                line += f" — memory {m['label'] if m['memory'] == 'on' else 'off'}"
                if m.get("query_prompt_template"):
                    line += f", query template {json.dumps(m['query_prompt_template'], ensure_ascii=False)}"
            lines.append(line)
        for w in self.warnings:
            lines.append(f"  note: {w}")
        return "\n".join(lines)


def _memory_report(node: Node, mode: str) -> dict:
    settings = node.kind.read(node)
    if settings.memory is None:
        out = {
            "memory": "off",
            "window_enabled": None,
            "window_size": None,
            "query_prompt_template": None,
            "role_prefix": None,
            "label": "off",
        }
    else:
        out = settings.memory.to_report()
        if isinstance(settings, ShippedWindowNode):  # its window's size is read even when it is off
            out["label"] = settings.memory_label()
        if mode != "advanced-chat":
            out["label"] += " (no effect: workflow mode has no conversation)"
    out["model"] = settings.model or DEMO_MODEL
    out["mode"] = settings.mode
    return out


def import_report(flow: Flow) -> ImportReport:
    """The import report of a flow: computed from the flow itself, so it is the same for a copy."""
    reports = []
    model_nodes = flow.model_nodes
    for n in flow.nodes:
        if n.container:
            status = f"inside {n.container}: not run"
        elif n.emulated:
            status = "emulated"
        else:
            status = "pass-through"
        reports.append(
            NodeReport(
                id=n.id,
                type=n.type,
                title=n.title,
                emulated=n.emulated and not n.container,
                status=status,
                memory=_memory_report(n, flow.mode) if n in model_nodes else None,
            )
        )
    return ImportReport(
        name=flow.name,
        file=str(flow.source.get("file", "")),
        format=str(flow.source.get("format", "")),
        dsl_version=flow.source.get("dsl_version"),
        mode=flow.app_mode,
        nodes=tuple(reports),
        warnings=tuple(flow.warnings),
    )


__all__ = ["ImportReport", "NodeReport", "import_report"]
