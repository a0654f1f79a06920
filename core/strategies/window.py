"""The workflow tool's Window Memory node (spec/memory-models.md §C.1, §C.6).

Keeps the last N messages (1..200, default 10) and every message counts — user, assistant,
tool calls and tool results. Trimming is permanent: after each turn the store is the last N of
the previous store plus the new round (reading 1(a) of the spec's ambiguity list), so a message
cut once is ``trimmed_earlier`` from then on, even if N later grows.

Decisions pinned here (the node's documentation is silent on them):

* the cut is a pure message count, so it may separate a tool call from its result or leave a
  tool result first — the node as written does not repair pairs;
* the system prompt is node configuration, never stored nor counted;
* an N outside 1..200 is rejected, not clamped.

Scopes: ``thread`` keeps history per chat thread across turns; ``session`` lives for one
execution and ``call`` for one call, so across turns both see nothing; without a thread the
node behaves like ``session``.

Because the store is always a suffix of the thread's messages, a turn's state is two indices:
where the store starts (everything before was trimmed earlier) and where the window starts.
"""

from __future__ import annotations

from .base import Strategy

DEFAULT_WINDOW = 10
MAX_WINDOW = 200


class WindowStrategy(Strategy):
    name = "window"
    uses_granularity = False

    def window(self, view, current, config):
        if not view.positions:
            return 0, 0
        # The store the current call sees: the previous call's window plus that call's round.
        trimmed_before = view.marks[-1]
        size = config.window_at(view.turn_number(current)) or DEFAULT_WINDOW
        return trimmed_before, max(trimmed_before, view.length - size)
