"""A Dify-shaped client: what a Dify 1.x Chatflow's LLM node with memory (window N, plugin token counting off,
as shipped) sends through Dify's "OpenAI-API-compatible" model provider, written from Dify's own rules
(spec/dify-memory.md §1.2–1.3, §2.7) — not from MemLens's emulation of them.

* Each turn writes its message row first (answer empty, 0 answer tokens), as Dify's web app does; the row's
  parent is the previous answer's row, a regenerated answer's row shares the regenerated one's parent.
* History: the conversation's newest ``min(N, 500)`` rows by creation time, whatever their branch; the
  thread walk over them (a NULL parent ends it, ``UUID_NIL`` takes the next older row, any other parent
  is followed and rows between are skipped); the newest kept row dropped when its answer is empty and it
  has 0 answer tokens (the turn's own placeholder); oldest first, a user message and an assistant message
  per row; the LLM node's filter then drops empty messages.
* The request: ``POST {endpoint}/chat/completions`` with ``Content-Type``, ``Accept-Charset`` and the
  key as ``Authorization: Bearer``, the body ``{"model", "stream", <model parameters>, "messages", "user"}``,
  streamed, read as Dify's provider reads a stream (``data:`` lines, ``[DONE]`` skipped).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

import requests

UUID_NIL = "00000000-0000-0000-0000-000000000000"
ROW_CAP = 500


@dataclass
class Row:
    id: str
    query: str
    answer: str
    answer_tokens: int
    parent_message_id: str | None
    created_at: int
    status: str = "normal"


def extract_thread_messages(rows_newest_first: list[Row]) -> list[Row]:
    thread, expected = [], None
    for row in rows_newest_first:
        if not row.parent_message_id:
            thread.append(row)
            break
        if expected is None:
            thread.append(row)
            expected = row.parent_message_id
        elif expected in (row.id, UUID_NIL):
            thread.append(row)
            expected = row.parent_message_id
    return thread


class DifyChatflow:
    """One conversation of a Chatflow whose LLM node has memory with window ``window``."""

    def __init__(self, endpoint: str, key: str, *, window: int, system: str, model: str = "gpt-4o-mini",
                 user: str = "end-user-1"):
        self.endpoint, self.key, self.window, self.system, self.model, self.user = endpoint, key, window, system, \
            model, user
        self.rows: list[Row] = []
        self.clock = 0
        self.sent: list[list[dict]] = []

    def history(self) -> list[dict]:
        limit = min(self.window, ROW_CAP) if self.window and self.window > 0 else ROW_CAP
        newest = sorted(self.rows, key=lambda r: r.created_at, reverse=True)[:limit]
        thread = extract_thread_messages(newest)
        if thread and not thread[0].answer and thread[0].answer_tokens == 0:
            thread.pop(0)
        out = []
        for row in reversed(thread):
            out += [{"role": "user", "content": row.query}, {"role": "assistant", "content": row.answer}]
        return [m for m in out if m["content"]]  # the LLM node's filter: empty messages are left out

    def ask(self, query: str, *, parent: str | None = "previous", fail: bool = False) -> str:
        """Run one turn; ``parent`` the previous answer's row (default), or the one a regenerate names."""
        if parent == "previous":
            parent = self.rows[-1].id if self.rows else None
        self.clock += 1
        row = Row(str(uuid.uuid4()), query, "", 0, parent, self.clock)
        self.rows.append(row)
        messages = [{"role": "system", "content": self.system}, *self.history(), {"role": "user", "content": query}]
        self.sent.append(messages)
        headers = {"Content-Type": "application/json", "Accept-Charset": "utf-8", "Authorization": f"Bearer {self.key}"}
        if fail:
            headers["x-stub-status"] = "500"
        data = {"model": self.model, "stream": True, "temperature": 0.7, "max_tokens": 512, "messages": messages,
                "user": self.user}
        response = requests.post(self.endpoint.rstrip("/") + "/chat/completions", headers=headers, json=data,
                                 timeout=(10, 300), stream=True)
        if response.status_code != 200:
            row.status = "error"  # Dify's handle_error: the answer stays empty, 0 answer tokens
            return ""
        answer = ""
        for line in response.iter_lines(decode_unicode=True, delimiter="\n\n"):
            chunk = line.strip().removeprefix("data: ").lstrip()
            if not chunk or chunk == "[DONE]":
                continue
            for choice in json.loads(chunk).get("choices") or []:
                answer += (choice.get("delta") or {}).get("content") or ""
        row.answer, row.answer_tokens = answer, len(answer.split())
        return answer

    def regenerate(self, row_index: int) -> str:
        """Regenerate the answer of the ``row_index``-th row: a new row with its query and parent."""
        old = self.rows[row_index]
        return self.ask(old.query, parent=old.parent_message_id)
