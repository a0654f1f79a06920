"""A process that appends demo-model turns to one stored conversation, reporting each commit.

Used by the crash-safety and concurrency tests:

* ``python -m tests.store.writer URL CONVERSATION N`` prints ``started <turn id> <pid>`` (flushed)
  when each of its N turns starts running and ``committed <turn id> <pid>`` once it is written.
* ``python -m tests.store.writer --fork URL CONVERSATION`` imports everything once, then for each
  line read on stdin forks a writer of endless turns, which prints ``writer <pid>`` first; the writer
  prints ``committed <turn id>`` as above, and stops once the forking process is gone. A test
  kills writers many times without paying a Python start-up for each.
"""

import os
import signal
import sys
from pathlib import Path

from core.llm.client import DemoClient
from core.service.sessions import ConversationService
from core.store.db import Database

FLOW = Path(__file__).resolve().parent.parent.parent / "sample_data" / "flows" / "support-bot.yml"


def _started(event: dict) -> None:
    if event["event"] == "workflow_started":  # the turn's row is written by now
        print(f"started {event['message_id']} {os.getpid()}", flush=True)


def write(url: str, conversation_id: str, count: int | None, parent: int | None = None) -> None:
    """``count`` turns (``None``: until killed); a forked writer also stops before its next turn once
    ``parent``, the process that forked it, has died: a test that lost track of it (its watchdog killed
    the forking process before it reported the writer) would otherwise read its output forever."""
    service = ConversationService(Database(url), llm=DemoClient())
    i = 0
    while (count is None or i < count) and (parent is None or os.getppid() == parent):
        record = service.send(conversation_id, f"Message {i}: my order number is {1000 + i}.", on_event=_started)
        print(f"committed {record.id} {os.getpid()}", flush=True)
        i += 1


def _warm_up() -> None:
    """One turn on a throwaway in-memory store: tokenizers, migrations and the runtime are loaded
    once here instead of in every forked writer."""
    service = ConversationService(Database("sqlite://"), llm=DemoClient())
    flow_id = service.import_flow(FLOW).flow_id
    service.send(service.start(flow_id).id, "Hello")


def fork_writers(url: str, conversation_id: str) -> None:
    _warm_up()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # writers are reaped as they die
    for _ in sys.stdin:
        parent = os.getpid()
        if os.fork() == 0:
            try:
                # The writer reports itself, before its first turn: a forking process slowed down
                # between fork and report once left a writer the test never heard of.
                print(f"writer {os.getpid()}", flush=True)
                write(url, conversation_id, None, parent)
            finally:
                os._exit(1)


def main() -> None:
    if sys.argv[1] == "--fork":
        fork_writers(sys.argv[2], sys.argv[3])
    else:
        write(sys.argv[1], sys.argv[2], int(sys.argv[3]))


if __name__ == "__main__":
    main()
