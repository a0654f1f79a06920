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
* A Question Classifier before the LLM node (``classifier_window``), as Dify's chat-model classifier sends
  it: its memory's rows are fetched the same way with the window's size as the row limit (whether the
  window is enabled or not), and the history goes in as text, ``get_history_prompt_text``'s
  ``"Human: …"`` / ``"Assistant: …"`` lines (§1.7), inside a ``<histories>`` block of the system
  message; two worked examples follow as user/assistant messages, and the query goes last inside a
  JSON line. The words are ours; the layout is Dify's classifier template's.
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

    def __init__(
        self,
        endpoint: str,
        key: str,
        *,
        window: int,
        system: str,
        model: str = "gpt-4o-mini",
        user: str = "end-user-1",
        classifier_window: int | None = None,
        role_prefix: tuple[str, str] = ("Human", "Assistant"),
    ):
        self.endpoint, self.key, self.window, self.system, self.model, self.user = (
            endpoint,
            key,
            window,
            system,
            model,
            user,
        )
        self.classifier_window, self.role_prefix = classifier_window, role_prefix
        self.rows: list[Row] = []
        self.clock = 0
        self.sent: list[list[dict]] = []
        self.classified: list[list[dict]] = []

    def _rows(self, window: int | None) -> list[Row]:
        """The memory's rows, oldest first: the newest ``min(window, 500)``, their thread, the placeholder dropped."""
        limit = min(window, ROW_CAP) if window and window > 0 else ROW_CAP
        newest = sorted(self.rows, key=lambda r: r.created_at, reverse=True)[:limit]
        thread = extract_thread_messages(newest)
        if thread and not thread[0].answer and thread[0].answer_tokens == 0:
            thread.pop(0)
        return list(reversed(thread))

    def history(self) -> list[dict]:
        out = []
        for row in self._rows(self.window):
            out += [{"role": "user", "content": row.query}, {"role": "assistant", "content": row.answer}]
        return [m for m in out if m["content"]]  # the LLM node's filter: empty messages are left out

    def classifier_messages(self, query: str) -> list[dict]:
        """The classifier's prompt: the history as text lines in a ``<histories>`` block, examples, the query."""
        human, ai = self.role_prefix
        lines = [
            line
            for row in self._rows(self.classifier_window)
            for line in (f"{human}: {row.query}", f"{ai}: {row.answer}")
        ]
        system = (
            "\n    ### Job\n    You sort the user's text into exactly one of the given categories.\n"
            "    ### Output\n    Answer with one JSON object and nothing else.\n"
            "    ### Memory\n    The conversation so far is inside <histories></histories> XML tags.\n"
            "    <histories>\n    " + "\n".join(lines) + "\n    </histories>\n"
        )
        example = (
            '{"input_text": ["%s"], "categories": ["orders, chit-chat"], "classification_instructions": []}```JSON'
        )
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": example % "where is my parcel"},
            {"role": "assistant", "content": '{"keywords": ["parcel"], "categories": ["orders"]}```'},
            {"role": "user", "content": example % "you are lovely"},
            {"role": "assistant", "content": '{"keywords": ["lovely"], "categories": ["chit-chat"]}```'},
            {"role": "user", "content": example % query},
        ]

    def _post(self, messages: list[dict], fail: bool = False):
        headers = {"Content-Type": "application/json", "Accept-Charset": "utf-8", "Authorization": f"Bearer {self.key}"}
        if fail:
            headers["x-stub-status"] = "500"
        data = {
            "model": self.model,
            "stream": True,
            "temperature": 0.7,
            "max_tokens": 512,
            "messages": messages,
            "user": self.user,
        }
        return requests.post(
            self.endpoint.rstrip("/") + "/chat/completions", headers=headers, json=data, timeout=(10, 300), stream=True
        )

    def ask(self, query: str, *, parent: str | None = "previous", fail: bool = False) -> str:
        """Run one turn; ``parent`` the previous answer's row (default), or the one a regenerate names."""
        if parent == "previous":
            parent = self.rows[-1].id if self.rows else None
        self.clock += 1
        row = Row(str(uuid.uuid4()), query, "", 0, parent, self.clock)
        self.rows.append(row)
        if self.classifier_window is not None:  # the classifier runs first; its verdict is not the answer
            classifier = self.classifier_messages(query)
            self.classified.append(classifier)
            with self._post(classifier) as verdict:
                verdict.content  # read to its end, as Dify reads the stream
        messages = [{"role": "system", "content": self.system}, *self.history(), {"role": "user", "content": query}]
        self.sent.append(messages)
        response = self._post(messages, fail)
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
