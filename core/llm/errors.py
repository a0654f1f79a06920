"""The llm package's exception, a :class:`core.errors.MemLensError` (the whole tree is in
core/errors.py)."""

from core.errors import RuntimeFailure
from core.redact import redact


class LLMError(RuntimeFailure):
    """A model call failed: a missing key, an unreachable provider, a refused request (one line).

    Its message is redacted when it is made (:func:`core.redact.redact`): a provider that quotes the
    key it refused hands it to no turn, answer, stream or log."""

    def __init__(self, message: str = ""):
        super().__init__(redact(str(message)))


__all__ = ["LLMError"]
