"""What the tests that start processes ask of them."""

from __future__ import annotations

import os
import time


def gone(pid: int, within: float = 10.0) -> bool:
    """Whether no process ``pid`` exists any more (exited and reaped) or is gone ``within`` seconds
    (a finished child is reaped by a thread of its parent, a moment after the parent went on)."""
    deadline = time.monotonic() + within
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
