"""``buffer`` keeps the whole thread and never prunes (it is still shown against the context
size, and says when it exceeds it); ``off`` is memory switched off: nothing is sent.
"""

from __future__ import annotations

from .base import Strategy


class BufferStrategy(Strategy):
    name = "buffer"


class OffStrategy(Strategy):
    name = "off"
    remembers = False
