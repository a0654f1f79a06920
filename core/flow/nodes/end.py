"""The end node of a Workflow app: its outputs are the values its ``outputs`` selectors read (``None``
for a value a node MemLens does not emulate would have written).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Mapping

from ..templates import MISSING, NONE

if TYPE_CHECKING:  # pragma: no cover
    from ..context import RunContext
    from ..graph import Node
    from ..records import NodeRun


def run_end(node: Node, ctx: RunContext, run: NodeRun) -> None:
    outputs = {}
    for out in node.data.get("outputs") or []:
        if isinstance(out, Mapping) and out.get("variable"):
            value = ctx.pool.get(list(out.get("value_selector") or []))
            outputs[str(out["variable"])] = None if value in (MISSING, NONE) else copy.deepcopy(value)
    run.outputs = outputs


__all__ = ["run_end"]
