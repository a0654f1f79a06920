"""The flow package's exceptions, each a :class:`core.errors.MemLensError` (the whole tree is in
core/errors.py), and :class:`NodeFailed`, the signal a node runner raises inside a run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.errors import MemLensError

if TYPE_CHECKING:
    from .graph import Node


class FlowError(MemLensError):
    """A flow file cannot be read: the message names the file, the place and what to fix."""


def node_error(node: "Node", message: str) -> FlowError:
    """A node's bad setting, named with the node: ``node 'llm' (llm): …``."""
    return FlowError(f"node {node.id!r} ({node.type}): {message}")


class RunError(MemLensError):
    """Bad input to a run (an unknown parent turn, a missing required input, a bad override); nothing ran."""


class WindowInputError(MemLensError):
    """The overwrite input is not a list of messages."""


class VariableError(MemLensError):
    """A conversation variable declaration is invalid, or a variable does not exist."""


class TypeMismatchError(VariableError):
    """A live edit with a value of the wrong type (Dify: HTTP 400 ``bad_request``)."""


class AssignerError(MemLensError):
    """A Variable Assigner item failed; the node fails with this message and writes nothing."""


# -- the agent node ---------------------------------------------------------------------------------


class StateError(MemLensError, ValueError):
    """A state schema or a state write is invalid (Haystack raises ``ValueError`` here too)."""


class ToolError(MemLensError):
    """A tool could not do what it was asked (bad expression, unknown argument…); reported to the model."""


class ToolConfigError(MemLensError, ValueError):
    """A tool is built wrongly (a state mapping names a parameter it lacks): refused when the tool is made."""


class GranularityError(MemLensError):
    """A history granularity other than query_answer or all_messages."""


# -- inside a run -----------------------------------------------------------------------------------


class NodeFailed(Exception):
    """A node failed while the turn ran (a model error, a template error, a missing input): the runner
    raises it, the runtime records the message on the node's run and fails the turn. Not bad input to
    the caller, so not a MemLensError: it never leaves :func:`core.flow.runtime.run_turn`."""


__all__ = [
    "FlowError",
    "node_error",
    "RunError",
    "WindowInputError",
    "VariableError",
    "TypeMismatchError",
    "AssignerError",
    "StateError",
    "ToolError",
    "ToolConfigError",
    "GranularityError",
    "NodeFailed",
]
