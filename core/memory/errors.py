"""The memory package's exceptions, each a :class:`core.errors.MemLensError` (the whole tree is in
core/errors.py)."""

from core.errors import MemLensError, RuntimeFailure


class ConfigError(MemLensError):
    """A memory configuration value is out of range or unknown, or the strategy cannot run it."""


class TrimError(MemLensError, ValueError):
    """An invalid combination of trim_messages options (LangChain raises ValueError for it)."""


class LongTermMemoryError(MemLensError):
    """Bad input to the long-term memory (no user id, a malformed message list, an unknown memory)."""


class MemoryNotFound(LongTermMemoryError, RuntimeFailure):
    """No memory with that id (it never existed or was deleted)."""


__all__ = ["ConfigError", "TrimError", "LongTermMemoryError", "MemoryNotFound"]
