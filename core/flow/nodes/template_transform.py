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

from ..errors import node_error

if TYPE_CHECKING:
    from ..graph import Node


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
        if not isinstance(var, Mapping) or not isinstance(var.get("variable"), str) or not var["variable"] \
                or not isinstance(var.get("value_selector"), list):
            raise node_error(node, f"variables[{k}] needs a 'variable' name and a 'value_selector' list")
    return TemplateSettings(template, tuple(dict(v) for v in variables))
