"""A Service API server whose demo model takes its time, for tests that kill the server mid-turn.

``python -m tests.api.paced_server DB_URL SECONDS`` serves the store at ``DB_URL`` on a free loopback
port (announced on standard error as ``python -m core serve`` announces it) with the demo model
answering each call after ``SECONDS``: a turn then lasts long enough for a kill to land inside it.
"""

from __future__ import annotations

import socket
import sys
import time

import uvicorn

from core.api.app import create_app
from core.llm.client import DemoClient, LLMReply


class PacedDemo(DemoClient):
    """The demo model, answering each call after a pause."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def complete(self, model, messages, max_tokens=None) -> LLMReply:
        time.sleep(self.seconds)
        return super().complete(model, messages, max_tokens)


def main(url: str, seconds: str) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    app = create_app(url, llm=PacedDemo(float(seconds)), ping_interval=0.1)
    print(f"MemLens Service API on http://127.0.0.1:{sock.getsockname()[1]}/v1", file=sys.stderr, flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    main(*sys.argv[1:])
