"""The Variable Aggregator node (``variable-aggregator``; ``variable-assigner`` is its original
name in older exports, which Dify still runs as the aggregator): where branches join, it outputs
the first of its variables that holds a value — the one the branch that ran wrote.

Dify's rule, as shipped (``VariableAggregatorNode._run``): without groups, ``output`` is the first
selector found in the variable pool, in the order listed, and nothing when none is; with
``advanced_settings.group_enabled``, each group does the same on its own selectors and writes
``{group_name: {"output": value}}``. A variable is found when the node that writes it ran, even
with an empty value; a node of another branch never ran, so its outputs are not there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ..errors import node_error
from ..templates import MISSING, NONE

if TYPE_CHECKING:  # pragma: no cover
    from ..context import RunContext
    from ..graph import Node
    from ..records import NodeRun


@dataclass(frozen=True)
class AggregatorSettings:
    #: ``(group name, selectors)`` per group; one group named ``None`` when groups are off.
    groups: tuple[tuple[str | None, tuple[tuple[str, ...], ...]], ...]


def _selectors(node: "Node", value: Any, where: str) -> tuple[tuple[str, ...], ...]:
    if not isinstance(value, list):
        raise node_error(node, f"{where} must be a list of variable selectors")
    out = []
    for selector in value:
        if not isinstance(selector, list) or len(selector) < 2 or not all(isinstance(x, str) for x in selector):
            raise node_error(node, f"{where} holds {selector!r}, not a selector such as ['node_id', 'text']")
        out.append(tuple(selector))
    return tuple(out)


def aggregator_settings(node: "Node") -> AggregatorSettings:
    advanced = node.data.get("advanced_settings")
    if isinstance(advanced, Mapping) and advanced.get("group_enabled"):
        groups = advanced.get("groups")
        if not isinstance(groups, list):
            raise node_error(node, "advanced_settings.groups must be a list when groups are enabled")
        read = []
        for k, group in enumerate(groups):
            if (
                not isinstance(group, Mapping)
                or not isinstance(group.get("group_name"), str)
                or not group["group_name"]
            ):
                raise node_error(node, f"advanced_settings.groups[{k}] needs a group_name")
            read.append(
                (
                    group["group_name"],
                    _selectors(node, group.get("variables", []), f"advanced_settings.groups[{k}].variables"),
                )
            )
        return AggregatorSettings(tuple(read))
    if advanced is not None and not isinstance(advanced, Mapping):
        raise node_error(node, "advanced_settings must be a mapping")
    return AggregatorSettings(((None, _selectors(node, node.data.get("variables", []), "variables")),))


def aggregate(
    settings: AggregatorSettings, found: Callable[[Sequence[str]], bool], get: Callable[[Sequence[str]], Any]
) -> tuple[dict, list[tuple[str, ...]]]:
    """The node's outputs and the selectors it took them from: per group, the first selector
    ``found`` in the pool, read with ``get``."""
    outputs: dict[str, Any] = {}
    taken: list[tuple[str, ...]] = []
    for name, selectors in settings.groups:
        chosen = next((s for s in selectors if found(s)), None)
        if chosen is None:
            continue
        taken.append(chosen)
        if name is None:
            outputs["output"] = get(chosen)
        else:
            outputs[name] = {"output": get(chosen)}
    return outputs, taken


def run_variable_aggregator(node: Node, ctx: RunContext, run: NodeRun) -> None:
    outputs, taken = aggregate(aggregator_settings(node), lambda s: ctx.pool.get(s) is not MISSING, ctx.pool.get)
    unknown = [k for k, v in outputs.items() if v is NONE or isinstance(v, Mapping) and v.get("output") is NONE]
    for name in unknown:  # from a node MemLens does not emulate: as unknown here as it was there
        del outputs[name]
    if unknown:
        ctx.pool.mark_pass_through(node.id)
    run.outputs = outputs
    titles = ctx.flow.node_names
    for selector in taken:
        run.notes.append(
            f"took {'.'.join(selector)} ({titles.get(selector[0], selector[0])} ran)"
            + (": its value comes from a node MemLens does not emulate" if ctx.pool.get(selector) is NONE else "")
        )
    if not taken:
        run.notes.append("none of its variables was set on this run: no output")
