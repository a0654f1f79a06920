"""``buffer`` keeps the whole thread and never prunes (it is still shown against the context
size, and says when it exceeds it); ``off`` is memory switched off: nothing is sent.
"""

from __future__ import annotations

from core.model.conversation import WHOLE_THREAD_SOURCES

from .base import Strategy


class BufferStrategy(Strategy):
    name = "buffer"
    help = "everything"
    lenses = (("Everything (buffer)", {}),)

    def label(self, config):
        return "buffer (everything)"

    def claims(self, conversation):
        # A transcript whose app sends the whole thread, every tool step included.
        return {"granularity": "all_messages"} if conversation.source_format in WHOLE_THREAD_SOURCES else None


class OffStrategy(Strategy):
    name = "off"
    help = "no memory"
    lenses = (("No memory", {}),)
    remembers = False

    def label(self, config):
        return "memory off"
