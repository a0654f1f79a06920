"""One memory config over a conversation that grows a turn at a time (the runtime's per-turn memory)."""

from __future__ import annotations

from array import array

from core.model.conversation import Conversation, Message
from core.model.ledger import Ledger

from .config import MemoryConfig
from .replay import Replay, turn_numbers
from .strategies.base import PathView


class TurnMemory:
    """One memory config over a conversation that grows a turn at a time: the ledger of each new
    turn without replaying the conversation.

    The thread view of the previous turn is kept and moved to the new turn's thread — usually one
    turn pushed; after a branch, popped back to the common ancestor and pushed down the new
    thread — so a turn costs what its own thread changes, plus a pass over the thread's turns
    that is skipped for a linear stretch of plain turns. Its ledger is a :class:`RunLedger`:
    reasons as runs and the kept entries (what is stored and sent), every entry listed only
    when read. The decision is the one :meth:`Replay.ledger_at` makes, by the same code.

    Only strategies that cut the thread qualify; a planning strategy's state depends on the
    current turn's prompt, so its ledgers are computed afresh (:meth:`ledger` does that).
    """

    def __init__(self, config: MemoryConfig, *, has_thread: bool = True):
        self.config = config
        self.has_thread = has_thread
        self._replay: Replay | None = None
        self._view: PathView | None = None
        self._index: dict[int, int] = {}  # turn position → its index in the view
        self._clean = 0  # the view's first turns that are positions 0, 1, … and plain (see cut_ledger)
        self._stable = 0  # turns before this position are the ones seen last time
        self._anchor: object = None  # the newest of those turns, to tell this conversation from another
        self.replay: Replay | None = None  # the replay that made the newest ledger (its compaction summaries)

    def ledger(self, conversation: Conversation, position: int, fixed_tokens: int) -> tuple[Ledger, list[Message]]:
        """The ledger of the turn at ``position`` (the conversation's newest: the turn being
        run) and the history messages it sends; ``fixed_tokens`` is the rest of its prompt."""
        replay = self._follow(conversation) if position == len(conversation.turns) - 1 else None
        if replay is None or replay.plans:
            replay = self.replay = Replay(
                conversation,
                self.config,
                system_prompt="",
                has_thread=self.has_thread,
                prompt_tokens=lambda _position: fixed_tokens,
            )
            ledger = replay.ledger_at(position)
            return ledger, replay.history_messages(ledger)
        self.replay = replay
        replay._prompt_tokens = lambda _position: fixed_tokens
        view = self._view
        assert view is not None  # _follow makes the view with the replay it returns
        self._move_to(replay, view, conversation.tree.thread_parent[position])
        ledger = replay.cut_ledger(view, replay._decide(view, position), position, self._clean)
        self._stable, self._anchor = position, conversation.turns[position - 1] if position else None
        return ledger, replay.history_messages(ledger)

    def _follow(self, conversation: Conversation) -> Replay:
        """The replay, moved onto ``conversation``: its first turns are the ones seen before when
        the newest of them is the same turn; otherwise everything starts again."""
        stable, replay = self._stable, self._replay
        turns = conversation.turns
        if replay is None or len(turns) <= stable or (stable and turns[stable - 1] is not self._anchor):
            replay = self._replay = Replay(conversation, self.config, system_prompt="", has_thread=self.has_thread)
            self._view = replay.strategy.new_view(replay)
            self._index, self._clean = {}, 0
            return replay
        for per_turn in (replay._tokens, replay._empty, replay._eligible):
            del per_turn[stable:]  # the rest is set again as needed (Replay._per_turn)
        replay._thread_before = None
        replay.numbers[stable:] = array("q", turn_numbers(conversation, stable))
        if replay._msg_before is not None:
            del replay._msg_before[stable + 1 :]
        replay._summaries = None  # (the new turns' texts are not counted)
        replay.conversation = conversation
        return replay

    def _move_to(self, replay: Replay, view: PathView, parent: int | None) -> None:
        """Make ``view`` the thread ending at ``parent`` (none: an empty thread)."""
        index, thread_parent = self._index, replay.conversation.tree.thread_parent
        path: list[int] = []
        q = parent
        while q is not None and q not in index:
            path.append(q)
            q = thread_parent[q]
        keep = index[q] + 1 if q is not None else 0
        while len(view.positions) > keep:
            del index[view.positions[-1]]
            view.pop()
        self._clean = min(self._clean, keep)
        for p in reversed(path):
            k = len(view.positions)
            replay._push(view, p, replay._decide(view, p))
            index[p] = k
            if (
                self._clean == k == p
                and len(replay.eligible(p)) == len(replay.conversation.turns[p].messages)
                and not any(replay._empties(p))
            ):
                self._clean += 1
