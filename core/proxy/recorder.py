"""Recording captured calls: threading each into its conversation and writing it to the store, off the
proxy's request path.

The proxy hands each finished exchange to :meth:`Recorder.submit`, which only queues it; a worker
thread reads the call, places it (:class:`~core.capture.threader.Threader`) and writes what changed —
the conversation row, each changed turn with all its calls — in one transaction per batch, so a
conversation is never stored half-written. A call that cannot be read (a body that is not JSON) is
forwarded all the same and said in one line on stderr; a call that failed (an upstream error, a
timeout, a refused connection, a client that left mid-stream) is recorded as a failed or stopped call
of its turn, with what happened. No header that carries a secret is ever recorded
(:func:`core.proxy.server.public_headers` keeps the others).

On start, the conversations captured before into the same store are read back, so a restarted proxy
threads new calls into them.
"""

from __future__ import annotations

import queue
import sys
import threading
from typing import Callable, Iterable, Mapping, Sequence

from core.capture.calls import Call, Placed, Thread, ThreadTurn, message_key, split_payload
from core.capture.errors import CaptureError
from core.capture.stored import CAPTURE, NODE_RUNS, SOURCE, capture_meta, nodes_of, turn_record
from core.capture.threader import Threader
from core.model.conversation import SOURCE_MODEL, Message
from core.store import repo
from core.store.db import Database
from core.store.repo.turns import TURN_VALUES

from .exchange import Exchange, call_of, request_messages

#: Calls written per transaction at most (a burst is written in a few transactions, not one per call).
BATCH = 64
#: How much lower the recorder process's CPU priority is than the proxy's (``os.nice``).
RECORDER_NICENESS = 10


def load_threader(db: Database) -> Threader:
    """A threader holding every conversation captured into ``db`` before."""
    threader = Threader()
    for info in repo.list_conversations(db, source=SOURCE):
        turns = repo.load_turn_rows(db, info.id, with_node_runs=True)
        threader.adopt(thread_of(info.id, info.name, info.meta, turns, info.created_at, info.updated_at))
    return threader


#: A turn row's columns as the recorder writes them.
_TURN_COLUMNS = ("id", "conversation_id", "seq", *TURN_VALUES)


def save_threads(
    db: Database,
    threads: Iterable[Thread],
    *,
    source: str = SOURCE,
    source_format: str = SOURCE,
    user_id: str = "capture",
) -> list[str]:
    """Write what changed in ``threads`` — the conversation rows, each changed turn with its calls — in one
    transaction; returns the ids of the conversations written. Plain statements, not ORM objects: a busy
    proxy writes every call."""
    from sqlalchemy import bindparam, delete, insert, update

    from core.store.models import ConversationRow, NodeRunRow, TurnRow

    threads = [t for t in threads if t.changed]
    t = repo.now()
    new_conversations, conversations, new_turns, turns, runs, rerun = [], [], [], [], [], []
    for thread in threads:
        conversation = thread.conversation()
        model = conversation.meta.get(SOURCE_MODEL)
        meta = {
            "source_format": source_format,
            "source_id": thread.id,
            "system_prompt": "",
            CAPTURE: capture_meta(thread),
            **({SOURCE_MODEL: model} if model else {}),
        }
        active = (
            thread.turns[thread.active].id
            if thread.active is not None
            else (thread.turns[-1].id if thread.turns else None)
        )
        values = {
            "name": (thread.name or "captured conversation")[:255],
            "meta": meta,
            "active_turn_id": active,
            "updated_at": t,
        }
        if thread.in_store:
            conversations.append({"row_id": thread.id, **values})
        else:
            new_conversations.append(
                {
                    "id": thread.id,
                    "flow_version_id": None,
                    "source": source,
                    "inputs": {},
                    "user_id": (thread.user or user_id)[:255],
                    "created_at": thread.created_at or t,
                    **values,
                }
            )
        for position in sorted(thread.changed):
            record = turn_record(thread, position, conversation)
            turn_runs = record.pop(NODE_RUNS)
            row = repo.turn_row(thread.id, position + 1, record)
            columns = {c: getattr(row, c) for c in _TURN_COLUMNS}
            columns["meta"] = {**row.meta, "node_count": len(turn_runs)}
            if row.id in thread.stored_turns:
                turns.append({"row_id": row.id, **{k: v for k, v in columns.items() if k != "id"}})
                rerun.append(row.id)
            else:
                new_turns.append(columns)
            runs += [dict(repo.node_values(i, run), turn_id=row.id) for i, run in enumerate(turn_runs)]
    with db.session() as s:
        if new_conversations:
            s.execute(insert(ConversationRow), new_conversations)
        if conversations:
            s.connection().execute(
                update(ConversationRow)
                .where(ConversationRow.id == bindparam("row_id"))
                .values({k: bindparam(k) for k in conversations[0] if k != "row_id"}),
                conversations,
            )
        if new_turns:
            s.execute(insert(TurnRow), new_turns)
        if turns:
            s.connection().execute(
                update(TurnRow)
                .where(TurnRow.id == bindparam("row_id"))
                .values({k: bindparam(k) for k in turns[0] if k != "row_id"}),
                turns,
            )
        if rerun:
            s.execute(delete(NodeRunRow).where(NodeRunRow.turn_id.in_(rerun)))
        if runs:
            s.execute(insert(NodeRunRow), runs)
    written = [thread.id for thread in threads]
    for thread in threads:
        thread.in_store = True
        thread.stored_turns.update(thread.turns[p].id for p in thread.changed)
        thread.changed.clear()
        thread.fresh.clear()
    return written


class Recorder:
    """Threads and stores captured calls in a thread of its own: :meth:`submit` never waits."""

    def __init__(self, db: Database, *, threader: Threader | None = None, say: Callable[[str], None] | None = None):
        self.db = db
        self.threader = threader if threader is not None else load_threader(db)
        self.say = say or (lambda line: print(f"memlens proxy: {line}", file=sys.stderr, flush=True))
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._idle = threading.Condition()
        self._pending = 0
        self._worker = threading.Thread(target=self._run, name="memlens-recorder", daemon=True)
        self._started = False

    def start(self) -> "Recorder":
        if not self._started:
            self._started = True
            self._worker.start()
        return self

    def expect(self) -> None:
        """A call has begun: :meth:`wait` waits for it too, until it is submitted and written."""
        with self._idle:
            self._pending += 1

    def submit(self, exchange: Exchange) -> None:
        """Queue a finished call (one :meth:`expect` announced)."""
        self._queue.put(exchange)

    def wait(self, timeout: float = 30.0) -> bool:
        """Wait until every submitted call is written (tests, shutdown); False if ``timeout`` passed first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def close(self, timeout: float = 30.0) -> None:
        if self._started:
            self.wait(timeout)
            self._queue.put(None)
            self._worker.join(timeout)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < BATCH:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._queue.put(None)
                    break
                batch.append(more)
            try:
                self._record(batch)
            finally:
                with self._idle:
                    self._pending -= len(batch)
                    self._idle.notify_all()

    def _record(self, batch: list[Exchange]) -> None:
        touched: dict[str, Thread] = {}
        for exchange in batch:
            try:
                call = call_of(exchange)
            except CaptureError as e:
                self.say(f"call {exchange.id}: {e}")
                continue
            try:
                thread, _ = self.threader.place(call)
            except Exception as e:  # a bug must not stop the recording of the next calls
                self.say(f"call {exchange.id}: not threaded ({type(e).__name__}: {' '.join(str(e).split())[:200]})")
                continue
            touched[thread.id] = thread
            if call.status != "succeeded":
                self.say(f"call {exchange.id} ({exchange.api}): {call.status} — {call.error}")
        if not touched:
            return
        try:
            save_threads(self.db, touched.values())
        except Exception as e:
            self.say(f"{len(batch)} call(s) not written ({type(e).__name__}: {' '.join(str(e).split())[:200]})")


# -- back from the store ------------------------------------------------------------------------------


def thread_of(
    conversation_id: str, name: str, meta: Mapping, turns: Sequence[Mapping], created_at: float, updated_at: float
) -> Thread:
    """A stored captured conversation as the threader holds it (a proxy restarting on its database):
    ``turns`` are the stored turns in order, each with its ``node_runs``."""
    capture = meta.get(CAPTURE) if isinstance(meta.get(CAPTURE), Mapping) else {}
    thread = Thread(conversation_id, pin=capture.get("pin"), user=capture.get("user"), name=name, created_at=created_at)
    thread.updated_at = updated_at
    thread.nodes = nodes_of(meta)
    ids = {t["id"]: k for k, t in enumerate(turns)}
    for position, stored in enumerate(turns):
        messages = [Message.from_dict(m) for m in stored.get("messages") or []]
        query = messages[0] if messages and messages[0].kind == "query" else None
        rest = messages[1:] if query is not None else messages
        answer = rest[-1] if rest and rest[-1].kind == "answer" else None
        steps = rest[:-1] if answer is not None else rest
        turn = ThreadTurn(
            str(stored["id"]),
            ids.get(stored.get("parent_id")),
            _plain(query),
            [_plain(m) for m in steps],
            _plain(answer),
            bool(stored.get("answer_seen")),
            float(stored.get("created_at") or 0),
            query_wrapped=bool(stored.get("query_wrapped")),
        )
        thread.add_turn(turn)
        for run in stored.get("node_runs") or []:
            placed = _placed(run, position)
            if placed is not None:
                turn.calls.append(placed)
                thread.calls.append(placed)
                thread.active = position
                thread.last_called = max(thread.last_called, position)
                if placed.call.response_id:
                    thread.responses[placed.call.response_id] = position
    thread.calls.sort(key=lambda c: c.call.started_at)
    thread.changed.clear()
    thread.in_store = True
    thread.stored_turns = {t.id for t in thread.turns}
    return thread


def _plain(m: Message | None) -> Message | None:
    """A stored message as threading holds it: its kind and ref are the store's, set again when written."""
    if m is None:
        return None
    from dataclasses import replace

    return replace(m, kind="reasoning" if m.kind == "reasoning" else "", ref=0)


def _placed(run: Mapping, position: int) -> Placed | None:
    call_record = run.get("call") if isinstance(run.get("call"), Mapping) else {}
    request = call_record.get("request")
    try:
        if isinstance(request, Mapping):
            messages, tools = request_messages(str(run.get("api") or "chat"), dict(request))
        else:  # a call without its request (a trace's): the payload as its receipt lists it
            messages = [
                Message(str(r["role"]), str(r.get("content") or ""), "", k)
                for k, r in enumerate(run.get("prompt") or [])
            ]
            tools = ()
    except (ValueError, KeyError, TypeError):
        return None
    reply = Message.from_dict(run["reply_message"]) if isinstance(run.get("reply_message"), Mapping) else None
    call = Call(
        id=str(run.get("call_id") or ""),
        messages=tuple(messages),
        reply=reply,
        model=str(run.get("model") or ""),
        tools=tuple(run.get("tools") or tools),
        api=str(run.get("api") or "chat"),
        started_at=float(run.get("started_at") or 0),
        pin=run.get("pin"),
        user=run.get("user"),
        status=str(run.get("status") or "succeeded"),
        error=run.get("error"),
        previous_response=run.get("previous_response"),
        response_id=run.get("response_id"),
        node_name=run.get("node_name"),
        record={**call_record, "usage": run.get("usage"), "latency_ms": run.get("latency_ms")},
    )
    payload = split_payload(call.messages)
    places = tuple(tuple(p) if p else None for p in run.get("places") or [])
    text = run.get("text_history") if isinstance(run.get("text_history"), Mapping) else None
    return Placed(
        call,
        str(run.get("node_id")),
        position,
        int(run.get("call_number") or 1),
        int(run.get("step") or 1),
        tuple(tuple(p) for p in run.get("kept") or []),
        tuple(run.get("roles") or ()),
        places,
        tuple(message_key(m) for m in payload.steps),
        tuple(message_key(m) for m in call.messages),
        text=dict(text) if text is not None else None,
    )


class RecorderProcess:
    """A :class:`Recorder` in a process of its own (what ``python -m core proxy`` runs): threading a call,
    counting its tokens and writing it never hold the proxy's interpreter while it relays the next call's
    bytes. :meth:`submit` queues the exchange; a spawned process records it into the store at ``url``."""

    def __init__(self, url: str):
        import multiprocessing

        self.url = url
        context = multiprocessing.get_context("spawn")
        self._queue = context.Queue()
        self._done = context.Value("q", 0)
        self._sent = 0
        self._process = context.Process(
            target=_record_from, args=(url, self._queue, self._done), name="memlens-recorder", daemon=True
        )

    def start(self) -> "RecorderProcess":
        """Start the process with Ctrl-C and SIGTERM ignored from its first instruction: they reach the whole
        process group, and the proxy, not a signal, ends the recording (:meth:`close`). Call it from the main
        thread."""
        import signal

        if self._process.pid is None:
            previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                self._process.start()
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
        return self

    def expect(self) -> None:
        self._sent += 1

    def submit(self, exchange: Exchange) -> None:
        self._queue.put(exchange)

    def wait(self, timeout: float = 30.0) -> bool:
        import time

        deadline = time.monotonic() + timeout
        while self._done.value < self._sent:
            if time.monotonic() > deadline or not self._process.is_alive():
                return False
            time.sleep(0.02)
        return True

    def close(self, timeout: float = 30.0) -> None:
        if getattr(self, "_process", None) is not None and self._process.pid is not None:
            self.wait(timeout)
            self._queue.put(None)
            self._process.join(timeout)
            self._queue.close()
            self._queue.join_thread()
            # Their semaphores are unlinked as the objects go (else the resource tracker reports them at exit).
            self._process.close()
            del self._queue, self._done, self._process


def _record_from(url: str, exchanges, done) -> None:
    """The recorder process: every exchange queued, threaded and written in batches, until ``None``.

    It ignores Ctrl-C and SIGTERM (:meth:`RecorderProcess.start`): the proxy sends ``None`` once the last call
    is queued, so no recorded call is lost. Should the proxy die without doing so, it stops once nothing has
    arrived for a second and its parent is gone."""
    import os

    parent = os.getppid()
    try:
        os.nice(RECORDER_NICENESS)  # background work: the proxy relaying bytes goes first on a busy machine
    except OSError:
        pass
    recorder = Recorder(Database(url))
    while True:
        try:
            first = exchanges.get(timeout=1.0)
        except queue.Empty:
            if os.getppid() != parent:
                return
            continue
        if first is None:
            return
        batch = [first]
        while len(batch) < BATCH:
            try:
                more = exchanges.get_nowait()
            except queue.Empty:
                break
            if more is None:
                exchanges.put(None)
                break
            batch.append(more)
        try:
            recorder._record(batch)
        finally:
            with done.get_lock():
                done.value += len(batch)


__all__ = ["BATCH", "Recorder", "RecorderProcess", "load_threader", "save_threads", "thread_of"]
