"""The flow package's exceptions: each is a :class:`core.errors.MemLensError` (the tree is in
core/errors.py)."""

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
