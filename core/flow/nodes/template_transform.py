"""The Template node (``template-transform``): a Jinja2 template over named variables, its text
the node's ``output``.

Dify's rule, as shipped (``TemplateTransformNode._run``): each ``{variable, value_selector}`` is
read from the variable pool (``None`` when absent) and the template is rendered with them; a
rendering error fails the node with its message, and so does an output longer than
:data:`core.limits.TEMPLATE_TRANSFORM_MAX_LENGTH` characters ("Output length exceeds 80000
characters"). MemLens renders in Jinja2's sandbox, as it does the LLM node's Jinja2 prompts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from core.limits import TEMPLATE_TRANSFORM_MAX_LENGTH

from ..errors import NodeFailed, node_error
from ..templates import NONE, render_jinja

if TYPE_CHECKING:  # pragma: no cover
    from ..context import RunContext
    from ..graph import Node
    from ..records import NodeRun


@dataclass(frozen=True)
class TemplateSettings:
    template: str
    variables: tuple[dict, ...]  # {"variable": name, "value_selector": [...]}, as render_jinja reads them


def template_settings(node: "Node") -> TemplateSettings:
    template = node.data.get("template", "")
    if not isinstance(template, str):
        raise node_error(node, "'template' must be text (a Jinja2 template)")
    variables = node.data.get("variables") or []
    if not isinstance(variables, list):
        raise node_error(node, "'variables' must be a list of {variable, value_selector}")
    for k, var in enumerate(variables):
        if (
            not isinstance(var, Mapping)
            or not isinstance(var.get("variable"), str)
            or not var["variable"]
            or not isinstance(var.get("value_selector"), list)
        ):
            raise node_error(node, f"variables[{k}] needs a 'variable' name and a 'value_selector' list")
    return TemplateSettings(template, tuple(dict(v) for v in variables))


def run_template_transform(node: Node, ctx: RunContext, run: NodeRun) -> None:
    settings = template_settings(node)
    unknown = [v["variable"] for v in settings.variables if ctx.pool.get(v["value_selector"]) is NONE]
    if unknown:  # a value from a node MemLens does not emulate: the rendering is as unknown as it is
        ctx.pool.mark_pass_through(node.id)
        run.outputs = {}
        run.notes.append(
            f"{', '.join(unknown)} {'comes' if len(unknown) == 1 else 'come'} from a node MemLens "
            f"does not emulate: output unknown"
        )
        return
    try:
        text = render_jinja(settings.template, settings.variables, ctx.pool)
    except Exception as e:  # noqa: BLE001 — any rendering error fails the node with its message, as in Dify
        raise NodeFailed(f"{type(e).__name__}: {e}") from None
    if len(text) > TEMPLATE_TRANSFORM_MAX_LENGTH:
        raise NodeFailed(f"Output length exceeds {TEMPLATE_TRANSFORM_MAX_LENGTH} characters")
    run.outputs = {"output": text}
