"""The llm package's exception, a :class:`core.errors.MemLensError` (the whole tree is in
core/errors.py)."""

from core.errors import RuntimeFailure


class LLMError(RuntimeFailure):
    """A model call failed: a missing key, an unreachable provider, a refused request (one line)."""


__all__ = ["LLMError"]
