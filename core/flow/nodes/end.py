"""The end node of a Workflow app: its outputs are the values its ``outputs`` selectors read (``None``
for a value a node MemLens does not emulate would have written).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Mapping

from ..errors import node_error
from ..templates import MISSING, NONE

if TYPE_CHECKING:  # pragma: no cover
    from ..context import RunContext
    from ..graph import Node
    from ..records import NodeRun


def end_settings(node: Node) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each output the end node gives: its name and the selector it reads (an output without a name is
    skipped, as Dify leaves it out); a selector that is not a list of names is the flow's error."""
    outputs = node.data.get("outputs") or []
    if not isinstance(outputs, list):
        raise node_error(node, "outputs must be a list of {variable, value_selector}")
    read = []
    for k, out in enumerate(outputs):
        if not (isinstance(out, Mapping) and out.get("variable")):
            continue
        selector = out.get("value_selector") or []
        if not isinstance(selector, list) or not all(isinstance(x, str) for x in selector):
            raise node_error(node, f"outputs[{k}].value_selector must be a list of names such as ['llm', 'text']")
        read.append((str(out["variable"]), tuple(selector)))
    return tuple(read)


def run_end(node: Node, ctx: RunContext, run: NodeRun) -> None:
    outputs = {}
    for name, selector in end_settings(node):
        value = ctx.pool.get(list(selector))
        outputs[name] = None if value in (MISSING, NONE) else copy.deepcopy(value)
    run.outputs = outputs


__all__ = ["end_settings", "run_end"]
