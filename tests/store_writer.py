"""A process that appends demo-model turns to one stored conversation, reporting each commit.

Used by the crash-safety and concurrency tests: ``python -m tests.store_writer URL CONVERSATION N``
prints ``committed <turn id>`` (flushed) after each turn is written.
"""

import sys

from core.llm import DemoClient
from core.sessions import ConversationService
from core.store.db import Database


def main() -> None:
    url, conversation_id, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    service = ConversationService(Database(url), llm=DemoClient())
    for i in range(count):
        record = service.send(conversation_id, f"Message {i}: my order number is {1000 + i}.")
        print(f"committed {record.id}", flush=True)


if __name__ == "__main__":
    main()
