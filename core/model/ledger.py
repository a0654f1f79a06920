"""The ledger: for one LLM call, every candidate message from the past, kept or not, and why.

One reason vocabulary serves the core, the UI, the CLI and the exports (DESIGN.md). A message's
reason is named by the first step of the removal pipeline that removes it; the order is fixed:

    memory off → scope → other branch → granularity → trimmed earlier → outside window
    → over budget → empty

Strategies that rewrite history instead of only cutting it (summary_buffer, compaction, trim)
name their own decision in the strategy step: ``summarized`` (folded into a summary),
``cleared`` (sent as a placeholder) and ``flushed`` (archived by a memory that flushes at write time)
sit where ``outside window`` does. What they send that no
earlier turn contains verbatim — a running summary, a cleared tool result's placeholder, the
kept part of a partially trimmed message — is listed in :attr:`Ledger.synthetic`.
"""

from __future__ import annotations

import copy
from array import array
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from itertools import compress
from typing import Any, Iterable, Iterator, Mapping, NamedTuple

KEPT = "kept"
MEMORY_OFF = "memory_off"
SCOPE = "scope"
OTHER_BRANCH = "other_branch"
GRANULARITY = "granularity"
TRIMMED_EARLIER = "trimmed_earlier"
OUTSIDE_WINDOW = "outside_window"
OVER_BUDGET = "over_budget"
EMPTY = "empty"
SUMMARIZED = "summarized"
CLEARED = "cleared"
#: LlamaIndex's ``Memory`` archives the oldest messages when a write leaves its chat history over its limit:
#: a message ``flushed`` is never sent again (what a memory block makes of it is not history).
FLUSHED = "flushed"
#: A Dify ReAct agent sends each earlier turn's steps as one assistant text (its scratchpad): a
#: message whose words are in it is ``rewritten``; one the scratchpad leaves out is ``omitted``. So too a
#: platform that stored a message in another shape (n8n: one tool call per message) sends it
#: ``rewritten``, and one it never stored (a turn's earlier tool rounds, Flowise's tool steps) is ``omitted``.
REWRITTEN = "rewritten"
OMITTED = "omitted"
#: An observed ledger (a captured call's payload, :mod:`core.capture.observed`) names a message the payload
#: left out while holding messages before and after it — a gap no window or budget leaves — ``not_sent``.
NOT_SENT = "not_sent"
#: The key of an observed ledger's config: what a captured payload held, not what a memory decided.
OBSERVED = "observed"

#: Removal pipeline order: the first step that removes a message names its reason.
PIPELINE = (MEMORY_OFF, SCOPE, OTHER_BRANCH, GRANULARITY, TRIMMED_EARLIER, OUTSIDE_WINDOW, OVER_BUDGET, EMPTY)
REASONS = (KEPT, *PIPELINE, SUMMARIZED, CLEARED, FLUSHED, REWRITTEN, OMITTED, NOT_SENT)
#: Reasons of messages whose text reaches the model: as they are, or inside a scratchpad.
WORDS_SENT = frozenset({KEPT, REWRITTEN})
#: Reasons for messages that were never candidates for this node's memory at all.
NOT_ELIGIBLE = frozenset({MEMORY_OFF, SCOPE, OTHER_BRANCH})


def is_dropped(reason: str) -> bool:
    """Whether a message with this reason was left out by the memory: not kept, and not one it could
    never send (:data:`NOT_ELIGIBLE`). Every message is kept, dropped or not eligible."""
    return reason != KEPT and reason not in NOT_ELIGIBLE


REASON_LABELS = {
    KEPT: "kept",
    MEMORY_OFF: "memory off",
    SCOPE: "out of scope",
    OTHER_BRANCH: "on another branch",
    GRANULARITY: "intermediate message",
    TRIMMED_EARLIER: "trimmed earlier",
    OUTSIDE_WINDOW: "outside window",
    OVER_BUDGET: "over token budget",
    EMPTY: "empty",
    SUMMARIZED: "summarized",
    CLEARED: "cleared",
    FLUSHED: "flushed",
    REWRITTEN: "rewritten",
    OMITTED: "omitted",
    NOT_SENT: "not sent",
}


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    ref: int | str
    turn: int
    role: str
    tokens: int
    kept: bool
    reason: str
    kind: str = ""
    position: int = 0  # the source turn's position in the conversation
    index: int = 0  # the message's index within that turn

    @property
    def dropped(self) -> bool:
        """Left out by the memory: it could have been sent (its reason is not in :data:`NOT_ELIGIBLE`)."""
        return is_dropped(self.reason)

    def to_json(self) -> dict:
        return {
            "ref": self.ref,
            "turn": self.turn,
            "role": self.role,
            "tokens": self.tokens,
            "kept": self.kept,
            "reason": self.reason,
        }


#: Origins of synthetic messages.
SUMMARY = "summary"  # a running summary standing for folded messages
PLACEHOLDER = "placeholder"  # a cleared tool result, sent with its content replaced
PARTIAL = "partial"  # the part of a message that fit (trim_messages allow_partial)
SCRATCHPAD = "scratchpad"  # a ReAct agent's text for an earlier turn's steps, sent instead of its first step
PAYLOAD_ONLY = "payload only"  # a captured payload's message that no turn of its thread holds (a summary, a rewrite)
STORED = "stored"  # a message as a platform's memory stored it (n8n: one tool call per message), sent instead


def format_spans(spans) -> str:
    """``((1, 3), (5, 5))`` → ``"turns 1–3, 5"``; ``((4, 4),)`` → ``"turn 4"``."""
    spans = list(spans)
    if not spans:
        return "no turns"
    single = len(spans) == 1 and spans[0][0] == spans[0][1]
    return ("turn " if single else "turns ") + ", ".join(f"{a}–{b}" if a != b else f"{a}" for a, b in spans)


def turn_ranges(turns) -> str:
    """``[1, 2, 3, 5]`` → ``"turns 1–3, 5"``; ``[4]`` → ``"turn 4"``."""
    spans: list[list[int]] = []
    for n in sorted(set(turns)):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return format_spans(spans)


@dataclass(frozen=True, slots=True)
class SyntheticMessage:
    """A message the memory sends that no earlier turn holds verbatim.

    ``covers`` lists the turns it stands for (a summary: every turn folded into it); ``replaces``
    is the ``(position, index)`` of the message it is sent instead of (placeholders, partial
    messages), ``None`` for a summary, which is sent first. Several may replace one message: they
    are sent in its place in the order listed (n8n stores a round of two tool calls as a call, its
    result, the other call and its result, all in place of the round's assistant message). ``turn``
    is the newest turn covered. A message stored in another shape (origin ``stored``) also carries
    its tool calls, ``(id, name, arguments)`` each, and, for a tool result, ``call_id``.
    """

    role: str
    content: str
    tokens: int
    origin: str
    turn: int
    covers: tuple[int, ...] = ()
    replaces: tuple[int, int] | None = None
    ref: str = ""
    calls: tuple[tuple[str, str, str], ...] = ()
    call_id: str = ""

    @property
    def covers_label(self) -> str:
        return turn_ranges(self.covers)

    @property
    def reason_words(self) -> str:
        """Its place in a ledger listing, beside the entries' reasons: "sent instead (summary)"."""
        return f"sent instead ({self.origin})"

    @property
    def why(self) -> str:
        """What it stands for, in words: "scratchpad standing for turn 3"."""
        return f"{self.origin} standing for {self.covers_label}" if self.covers else self.origin

    def to_json(self) -> dict:
        """The shape of a ledger entry, so a JSON ledger stays one list of what was sent and not."""
        return {
            "ref": self.ref or self.origin,
            "turn": self.turn,
            "role": self.role,
            "tokens": self.tokens,
            "kept": True,
            "reason": KEPT,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SyntheticMessage":
        """The inverse of ``dataclasses.asdict`` (JSON turns the tuples into lists)."""
        return cls(
            **{
                **data,
                "covers": tuple(data.get("covers") or ()),
                "replaces": tuple(data["replaces"]) if data.get("replaces") else None,
                "calls": tuple(tuple(c) for c in data.get("calls") or ()),
            }
        )


#: Every field of a ledger entry, as :meth:`Ledger.to_dict` writes it.
ENTRY_FIELDS = ("ref", "turn", "role", "tokens", "kept", "reason", "kind", "position", "index")
#: A ledger's fields besides its entries, synthetic messages and compactions.
HEADER_FIELDS = (
    "turn",
    "prompt_tokens",
    "history_tokens",
    "budget",
    "budget_note",
    "config",
    "context_size",
    "exceeds_context",
)


@dataclass(slots=True)
class Ledger:
    """The ledger of one LLM call (one turn, one node)."""

    turn: int
    # None only inside a RunLedger, which lists its entries when they are first read (its ``entries``).
    entries: list[LedgerEntry]
    prompt_tokens: int
    history_tokens: int
    budget: int | None
    budget_note: str = ""
    config: dict = field(default_factory=dict)
    context_size: int | None = None
    exceeds_context: bool = False
    #: Messages sent that stand for earlier ones; their tokens are part of history_tokens.
    synthetic: list[SyntheticMessage] = field(default_factory=list)
    #: Compaction checks that changed the history during this call's turn (Dify 1.17 as shipped):
    #: request number (1 = the turn's first; more = inside the tool loop), estimate, which
    #: estimate decided, tiers fired, results cleared, messages folded, summaries after.
    compactions: list[dict] = field(default_factory=list)

    def rows(self) -> list["LedgerEntry | SyntheticMessage"]:
        """Entries and synthetic messages in order: a summary right before the oldest message
        sent with it, a placeholder or partial message (or several) right after the entry it stands for."""
        if not self.synthetic:
            return list(self.entries)
        after = self.stand_ins()
        leading = [s for s in self.synthetic if s.replaces is None]
        out: list[LedgerEntry | SyntheticMessage] = []
        for e in self.entries:
            stand_ins = after.get((e.position, e.index))
            if leading and (e.kept or stand_ins):
                out.extend(leading)
                leading = []
            out.append(e)
            if stand_ins:
                out.extend(stand_ins)
        out.extend(leading)
        return out

    def stand_ins(self) -> dict[tuple[int, int], list[SyntheticMessage]]:
        """The synthetic messages sent in place of an earlier message, by its ``(position, index)``, in order."""
        out: dict[tuple[int, int], list[SyntheticMessage]] = {}
        for s in self.synthetic:
            if s.replaces is not None:
                out.setdefault(s.replaces, []).append(s)
        return out

    @property
    def kept(self) -> list[LedgerEntry]:
        return [e for e in self.entries if e.kept]

    def dropped_count(self) -> int:
        """Earlier messages the memory could have sent and did not (a reason outside :data:`NOT_ELIGIBLE`)."""
        return sum(1 for e in self.entries if e.dropped)

    def not_eligible_count(self) -> int:
        """Earlier messages that were never this node's to send (a reason in :data:`NOT_ELIGIBLE`:
        memory off, out of scope, on another branch): neither kept nor dropped."""
        return sum(1 for e in self.entries if e.reason in NOT_ELIGIBLE)

    def entries_at(self, positions: Iterable[int]) -> list[LedgerEntry]:
        """The entries of the earlier turns at ``positions`` (turn positions), in order."""
        wanted = set(positions)
        return [e for e in self.entries if e.position in wanted]

    def entries_with(self, reasons: Iterable[str]) -> list[LedgerEntry]:
        """The entries whose reason is one of ``reasons``, in order."""
        wanted = set(reasons)
        return [e for e in self.entries if e.reason in wanted]

    def entry_count(self) -> int:
        """How many earlier messages the ledger lists."""
        return len(self.entries)

    def positions_with(self, reasons: Iterable[str]) -> list[int]:
        """The positions of the earlier turns that have a message with one of ``reasons``, ascending."""
        wanted = set(reasons)
        return sorted({e.position for e in self.entries if e.reason in wanted})

    def last_entries_with(self, reasons: Iterable[str], n: int) -> list[LedgerEntry]:
        """The newest ``n`` entries whose reason is one of ``reasons`` (all of them when there are fewer), in order."""
        wanted = set(reasons)
        out = [e for e in reversed(self.entries) if e.reason in wanted][: max(n, 0)]
        return out[::-1]

    def tokens_by_reason(self) -> dict[str, int]:
        """The earlier messages' tokens summed by reason (the receipt's dropped part of the budget bar)."""
        out: dict[str, int] = {}
        for e in self.entries:
            out[e.reason] = out.get(e.reason, 0) + e.tokens
        return out

    def last_entries(self, n: int) -> list[LedgerEntry]:
        """The newest ``n`` entries (all of them when there are fewer), in order."""
        return self.entries[-n:] if n > 0 else []

    def to_dict(self) -> dict:
        """The ledger as data, losslessly: every entry field (:data:`ENTRY_FIELDS`), the header
        (:data:`HEADER_FIELDS`), and the synthetic messages and compactions when there are any.
        :meth:`from_dict` reads it back; the store packs it (:mod:`core.store.ledger_codec`)."""
        out = {"turn": self.turn, "entries": [{f: getattr(e, f) for f in ENTRY_FIELDS} for e in self.entries]}
        out.update((k, getattr(self, k)) for k in HEADER_FIELDS if k != "turn")
        out["config"] = copy.deepcopy(self.config)
        if self.synthetic:
            out["synthetic"] = [asdict(m) for m in self.synthetic]
        if self.compactions:
            out["compactions"] = copy.deepcopy(self.compactions)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], entries: list[LedgerEntry] | None = None) -> "Ledger":
        """A ledger from :meth:`to_dict`'s shape; ``entries`` given when the caller rebuilt them
        (a packed ledger stores its entries' reasons only)."""
        if entries is None:
            entries = [LedgerEntry(**e) for e in data.get("entries") or []]
        return cls(
            turn=data["turn"],
            entries=entries,
            prompt_tokens=data["prompt_tokens"],
            history_tokens=data["history_tokens"],
            budget=data.get("budget"),
            budget_note=data.get("budget_note") or "",
            config=dict(data.get("config") or {}),
            context_size=data.get("context_size"),
            exceeds_context=bool(data.get("exceeds_context")),
            synthetic=[SyntheticMessage.from_dict(m) for m in data.get("synthetic") or []],
            compactions=[dict(c) for c in data.get("compactions") or []],
        )

    def to_json(self) -> dict:
        """The documented JSON shape. Synthetic messages appear in ``ledger`` as entries of the
        same shape, placed as in :meth:`rows`, with ``kept: true``, reason ``kept`` and a string
        ref no source message has (``"summary"``, ``"cleared:<ref>"``, ``"partial:<ref>"``), so
        ``history_tokens`` is always the sum of the kept entries' tokens. Strategies that send
        no synthetic message print exactly the entries of the earlier messages, as before."""
        return {
            "turn": self.turn,
            "prompt_tokens": self.prompt_tokens,
            "history_tokens": self.history_tokens,
            "budget": self.budget,
            "ledger": [e.to_json() for e in self.rows()],
        }


def reason_runs(reasons) -> list[list]:
    """``["kept", "kept", "empty"]`` → ``[["kept", 2], ["empty", 1]]``: a ledger's reasons in order,
    as runs (what the store keeps, and what :class:`RunLedger` is built from)."""
    runs: list[list] = []
    for reason in reasons:
        if runs and runs[-1][0] == reason:
            runs[-1][1] += 1
        else:
            runs.append([reason, 1])
    return runs


class RunLedger(Ledger):
    """A ledger recorded as its reasons' runs and its kept entries, its full entries built the
    first time they are read (``expand(runs)``). Recording a turn of a long conversation needs
    only the runs (stored) and the kept messages (sent); listing every earlier message is left
    to whoever displays it. Equal to, and copied as, the plain :class:`Ledger` it stands for."""

    def __init__(
        self,
        *,
        runs: list[list],
        kept: list[LedgerEntry],
        count: int,
        first_ref,
        last_ref,
        expand,
        pick=None,
        offset=None,
        tokens=None,
        token_sums=None,
        **fields,
    ):
        self.runs, self.count, self.first_ref, self.last_ref = runs, count, first_ref, last_ref
        self._kept, self._expand = kept, expand
        self._entries: list[LedgerEntry] | None = None
        # Some entries without listing all: ``pick(ranges)`` builds the entries at the candidates'
        # offsets in ``[lo, hi)`` ranges (ascending); ``offset(p)`` is turn ``p``'s first candidate's;
        # ``tokens(p)`` turn ``p``'s messages' token counts; ``token_sums()`` the running total of the
        # candidates' tokens (``sums[k]``: the first ``k`` candidates'), shared by every ledger of the
        # conversation, so a reason's tokens are a difference, not a sum over its messages.
        self._pick, self._offset, self._tokens, self._token_sums = pick, offset, tokens, token_sums
        super().__init__(entries=None, **fields)  # type: ignore[arg-type]  # listed when first read

    def _ranges_with(self, reasons: Iterable[str]) -> list[tuple[int, int]]:
        """The candidates' offsets ``[lo, hi)`` of the runs whose reason is one of ``reasons``."""
        wanted, ranges, at = set(reasons), [], 0
        for reason, n in self.runs:
            if reason in wanted:
                ranges.append((at, at + int(n)))
            at += int(n)
        return ranges

    def _position_of(self, k: int) -> int:
        """The position of the turn holding candidate ``k`` (``offset`` never decreases; each turn before the
        call's has a message, so the call's own position is at most :attr:`count`)."""
        return bisect_right(range(self.count + 1), k, key=self._offset) - 1

    def positions_with(self, reasons: Iterable[str]) -> list[int]:  # from the runs' ends: no entry listed
        if self._entries is not None or self._offset is None:
            return super().positions_with(reasons)
        out: set[int] = set()
        for lo, hi in self._ranges_with(reasons):  # a run's turns are consecutive: another reason would split it
            out.update(range(self._position_of(lo), self._position_of(hi - 1) + 1))
        return sorted(out)

    def last_entries_with(self, reasons: Iterable[str], n: int) -> list[LedgerEntry]:
        if self._entries is not None or self._pick is None:
            return super().last_entries_with(reasons, n)
        picked: list[tuple[int, int]] = []
        for lo, hi in reversed(self._ranges_with(reasons)):
            if n <= 0:
                break
            picked.append((max(lo, hi - n), hi))
            n -= hi - max(lo, hi - n)
        return self._pick(picked[::-1])

    def tokens_by_reason(self) -> dict[str, int]:  # from the runs and each turn's counts: no entry listed
        out: dict[str, int]
        if self._entries is None and self._token_sums is not None:
            sums, start = self._token_sums(), 0
            by_reason: dict[str, int] = {}
            for reason, n in self.runs:
                by_reason[reason] = by_reason.get(reason, 0) + sums[start + int(n)] - sums[start]
                start += int(n)
            return by_reason
        if self._entries is not None or self._tokens is None or self._offset is None:
            return super().tokens_by_reason()
        flat: list[int] = []
        p = 0
        while len(flat) < self.count:
            flat.extend(self._tokens(p)[: self.count - len(flat)])
            p += 1
        out = {}
        at = 0
        for reason, n in self.runs:
            out[reason] = out.get(reason, 0) + sum(flat[at : at + int(n)])
            at += int(n)
        return out

    def entries_at(self, positions: Iterable[int]) -> list[LedgerEntry]:
        if self._entries is not None or self._pick is None:
            return super().entries_at(positions)
        count, offset, ranges = self.count, self._offset, []
        for p in sorted(p for p in set(positions) if p >= 0):
            lo = offset(p)
            if lo >= count:  # this turn and the later ones are not earlier messages
                break
            hi = min(offset(p + 1), count)
            if lo < hi:
                ranges.append((lo, hi))
        return self._pick(ranges)

    def entries_with(self, reasons: Iterable[str]) -> list[LedgerEntry]:
        if self._entries is not None or self._pick is None:
            return super().entries_with(reasons)
        wanted, ranges, at = set(reasons), [], 0
        for reason, n in self.runs:
            if reason in wanted:
                ranges.append((at, at + int(n)))
            at += int(n)
        return self._pick(ranges)

    def entry_count(self) -> int:  # from the runs: no entry listed
        return self.count

    def last_entries(self, n: int) -> list[LedgerEntry]:
        if self._pick is None:
            return super().last_entries(n)
        return self._pick([(max(self.count - n, 0), self.count)])  # (none when n <= 0: an empty range)

    @property
    def entries(self) -> list[LedgerEntry]:
        if self._entries is None:
            self._entries = self._expand(self.runs)
            self._expand = None
        return self._entries

    @entries.setter
    def entries(self, value) -> None:
        if value is not None:
            self._entries = value

    @property
    def kept(self) -> list[LedgerEntry]:
        return list(self._kept)

    def dropped_count(self) -> int:  # from the runs: no entry listed
        return sum(n for reason, n in self.runs if is_dropped(reason))

    def not_eligible_count(self) -> int:  # from the runs too
        return sum(n for reason, n in self.runs if reason in NOT_ELIGIBLE)

    def plain(self) -> Ledger:
        return Ledger(**{f.name: getattr(self, f.name) for f in fields(Ledger)})

    def __eq__(self, other):
        if isinstance(other, Ledger):
            return all(getattr(self, f.name) == getattr(other, f.name) for f in fields(Ledger) if f.compare)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal by value and mutable: not hashable

    def __copy__(self) -> Ledger:
        return copy.copy(self.plain())

    def __deepcopy__(self, memo) -> Ledger:
        return copy.deepcopy(self.plain(), memo)

    def __reduce_ex__(self, protocol):
        return self.plain().__reduce_ex__(protocol)


class TurnSummary(NamedTuple):
    """What a turn's memory kept, in numbers — cheap to compute for every turn (a named tuple: a
    long replay makes one per turn, and a tuple is quicker to make than a frozen dataclass)."""

    turn: int
    kept: int
    #: Earlier messages the memory left out, and those it could never send (memory off, out of scope,
    #: another branch): with ``kept``, every earlier message, as the turn's ledger counts them
    #: (:func:`is_dropped`).
    dropped: int
    not_eligible: int
    history_tokens: int
    prompt_tokens: int
    budget: int | None
    oldest_kept_turn: int | None

    def to_json(self) -> dict:
        return self._asdict()


#: The fields of :class:`TurnSummary` that may be ``None``.
_OPTIONAL = ("budget", "oldest_kept_turn")


class TurnSummaries(Sequence):
    """The summaries of a replay's answered turns, in turn order, held as columns of machine
    integers: a 10,000-turn replay holds eight arrays, not 10,000 tuples and their int objects,
    so a long replay's summaries take a few bytes per turn. Reads as a sequence of :class:`TurnSummary`, each made when asked
    for; equal to any sequence of the same summaries.

    Filled by position (:meth:`columns`, then :meth:`keep`): a replay walks its turns depth first,
    so a turn's slot is its position in the conversation, and the positions with a summary are
    kept, ascending, at the end.
    """

    __slots__ = ("_columns", "_positions")
    #: How a column holds ``None`` (a budget or a turn number is never negative).
    NONE = -1

    def __init__(self, size: int, columns: Iterable[array] | None = None):
        """``size`` positions, every column 0; or ``columns``, one ``array("q")`` of ``size`` per
        field, already written (each column can then be made only once what it holds is known)."""
        self._columns = (
            tuple(array("q", bytes(8 * size)) for _ in TurnSummary._fields) if columns is None else tuple(columns)
        )
        if len(self._columns) != len(TurnSummary._fields) or any(len(c) != size for c in self._columns):
            raise ValueError(f"a summary needs {len(TurnSummary._fields)} columns of {size} values")
        self._positions = array("q")

    def columns(self) -> tuple[array, ...]:
        """The writable columns, by position, in :class:`TurnSummary`'s field order; write
        ``None`` as :attr:`NONE`. A position whose turn stays 0 has no summary."""
        return self._columns

    def put(self, position: int, summary: TurnSummary) -> None:
        for column, value in zip(self._columns, summary):
            column[position] = self.NONE if value is None else value

    def keep(self) -> TurnSummaries:
        """Fixes the positions that have a summary (those with a turn number), ascending."""
        self._positions = array("q", compress(range(len(self._columns[0])), self._columns[0]))
        return self

    def column(self, name: str) -> list[int | None]:
        """One field of every summary, in turn order (``None`` where it is ``None``)."""
        column = self._columns[TurnSummary._fields.index(name)]
        values = [column[p] for p in self._positions]
        if name in _OPTIONAL:
            return [None if v == self.NONE else v for v in values]
        return values

    def _at(self, position: int) -> TurnSummary:
        # Each column indexed by name, not in a loop over them: a long replay's reader (the CLI's
        # summary, the report) makes one summary per turn, so this stays free of a generator.
        turn, kept, dropped, not_eligible, history, prompt, budgets, oldests = self._columns
        budget, oldest = budgets[position], oldests[position]
        return TurnSummary(
            turn[position],
            kept[position],
            dropped[position],
            not_eligible[position],
            history[position],
            prompt[position],
            None if budget == self.NONE else budget,
            None if oldest == self.NONE else oldest,
        )

    def __len__(self) -> int:
        return len(self._positions)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._at(p) for p in self._positions[i]]
        return self._at(self._positions[i])

    def __iter__(self) -> Iterator[TurnSummary]:
        return map(self._at, self._positions)

    def __eq__(self, other):
        if isinstance(other, (TurnSummaries, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal by value and mutable: not hashable

    def __repr__(self) -> str:
        return f"TurnSummaries({list(self)!r})"

    def __reduce__(self):
        return _summaries_from, (list(self),)


def _summaries_from(summaries: list[TurnSummary]) -> TurnSummaries:
    """A :class:`TurnSummaries` holding ``summaries`` in order (how one is unpickled)."""
    out = TurnSummaries(len(summaries))
    for k, s in enumerate(summaries):
        out.put(k, s)
    return out.keep()


# -- what one memory holds at one turn, in a sentence -----------------------------------------------
