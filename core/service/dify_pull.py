"""Pull conversations from a running Dify app (or a served MemLens app) into the store.

It pages through the Service API as any Dify client would: ``GET /v1/conversations`` (``last_id``,
``limit``, ``has_more``) for ``--all``, and ``GET /v1/messages`` (``first_id``, ``limit``,
``has_more``; newest page first) for each conversation. Message records become turns through the
same reader as an exported ``/v1/messages`` file (:func:`core.io.readers.dify_messages.dify_turn`), so
``parent_message_id`` keeps regenerated branches, ``message_files`` keep their owner, and the thread
rule is Dify's.

A pulled conversation is stored with source ``dify-pull``, the app's base URL and its Dify id —
never the key. The key goes only in ``Authorization: Bearer``: a base URL carrying ``user:password@``
is refused (an HTTP client would send those as Basic credentials, and the URL is stored and printed).
Pulling it again replaces its turns when the app's history changed, and changes nothing when it did
not. A timeout, a rate limit (429) or a server error (5xx) is tried again (:mod:`core.retry`); every
server problem left (a refused key, an unknown conversation, no answer after the retries, an answer
that is not JSON or is over :data:`MAX_RESPONSE_BYTES`, which is read as it arrives and never past the
limit) is one :class:`PullFailedError` line, with any key the server quoted redacted; nothing is stored
then.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple
from urllib.parse import urlsplit

import httpx

from core.errors import MemLensError
from core.io.errors import PullError, PullFailedError, RecordError
from core.io.readers.dify_messages import dify_turn
from core.limits import LimitError, load_json
from core.model.conversation import Conversation, read_once
from core.redact import hold, redact
from core.retry import Passing, attempts_note, passing_status, retry_after, with_retries

from .transfer import store_pulled

PAGE = 100  # Dify's largest page
#: Limits of one pull: more than this is refused rather than read.
MAX_CONVERSATIONS = 10_000
MAX_MESSAGES = 100_000
MAX_RESPONSE_BYTES = 20 * 1024 * 1024
TIMEOUT_SECONDS = 30.0


@dataclass
class PullResult:
    """Stored conversation ids per Dify conversation, and which were new, updated or unchanged."""

    base_url: str
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    ids: dict[str, str] = field(default_factory=dict)  # Dify conversation id → stored conversation id

    def summary(self) -> str:
        n = len(self.ids)
        return (
            f"{n} conversation{'s' if n != 1 else ''} from {self.base_url}: {len(self.created)} new, "
            f"{len(self.updated)} updated, {len(self.unchanged)} unchanged"
        )


def normalise_base_url(base_url: str) -> str:
    url = (base_url or "").strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise PullError(
            f"--base-url {redact(base_url)!r} must be an http:// or https:// URL, e.g. https://api.dify.ai/v1"
        )
    if "@" in urlsplit(url).netloc:
        raise PullError(
            "--base-url must not carry a user name or password (user:password@): give the app's "
            "address alone, e.g. https://api.dify.ai/v1, and its key with --key or DIFY_API_KEY"
        )
    return url


class DifyApp:
    """A Dify app's Service API, read page by page; every failure is a :class:`PullError`."""

    def __init__(
        self, base_url: str, key: str, *, timeout: float = TIMEOUT_SECONDS, transport: httpx.BaseTransport | None = None
    ):
        if not key:
            raise PullError("no API key: pass --key or set DIFY_API_KEY (the app's key from Dify's API Access page)")
        self.base_url = normalise_base_url(base_url)
        hold(key)  # whatever the app answers, no text of this process carries the key on
        self._key = key
        self._http = httpx.Client(
            base_url=self.base_url, timeout=timeout, transport=transport, headers={"Authorization": f"Bearer {key}"}
        )

    def close(self) -> None:
        self._http.close()

    def get(self, path: str, params: dict) -> dict:
        where = f"{self.base_url}{path}"
        query = {k: v for k, v in params.items() if v is not None}

        def attempt() -> _Answer:
            with self._http.stream("GET", path, params=query) as response:
                answer = _Answer(response.status_code, _read_capped(response, where), response.headers)
            if passing_status(answer.status):  # tried again (core.retry), then read as any answer
                error = httpx.HTTPStatusError(str(answer.status), request=response.request, response=response)
                error.answer = answer
                raise error
            return answer

        try:
            answer, tries = with_retries(attempt, _passing), ""
        except httpx.HTTPStatusError as e:
            answer, tries = e.answer, attempts_note(e)
        except httpx.TimeoutException as e:
            raise PullFailedError(
                f"{where}: no answer within {self._http.timeout.read:g} s{attempts_note(e)}; is the app running?"
            ) from None
        except httpx.HTTPError as e:
            raise PullFailedError(f"{where}: cannot connect ({type(e).__name__}); check --base-url") from None
        status = answer.status
        try:
            body = load_json(answer.content, f"{where}'s answer")
        except LimitError as e:
            raise PullFailedError(str(e)) from None
        except MemLensError:
            raise PullFailedError(
                f"{where} answered {status} with something that is not JSON{tries}; "
                "--base-url must be the app's API base, ending in /v1"
            ) from None
        if status == 401:
            raise PullFailedError(f"{where}: the app refused the key (401: {self._message(body)}); check --key")
        if status == 404:
            raise PullFailedError(
                f"{where}: not found (404: {self._message(body)}); check the conversation id and --user"
            )
        if status >= 400:
            raise PullFailedError(f"{where}: the app answered {status} ({self._message(body)}){tries}")
        if not isinstance(body, dict) or not isinstance(body.get("data"), list):
            raise PullFailedError(f"{where}: expected {{data: [...], has_more}} in the answer")
        return body

    def conversations(self, user: str) -> list[dict]:
        """Every conversation of ``user``, newest first, following ``last_id`` and ``has_more``."""
        out: list[dict] = []
        last_id = None
        while True:
            page = self.get("/conversations", {"user": user, "limit": PAGE, "last_id": last_id})
            items = [c for c in page["data"] if isinstance(c, dict) and c.get("id")]
            out.extend(items)
            if len(out) > MAX_CONVERSATIONS:
                raise PullError(
                    f"{self.base_url}: more than {MAX_CONVERSATIONS:,} conversations; pull them one "
                    "at a time with --conversation"
                )
            if not page.get("has_more") or not items:
                return out
            last_id = items[-1]["id"]

    def messages(self, conversation_id: str, user: str) -> list[dict]:
        """Every message record of a conversation, every branch, oldest first."""
        pages: list[list[dict]] = []
        first_id = None
        count = 0
        while True:
            page = self.get(
                "/messages", {"conversation_id": conversation_id, "user": user, "limit": PAGE, "first_id": first_id}
            )
            items = [m for m in page["data"] if isinstance(m, dict)]
            pages.append(items)
            count += len(items)
            if count > MAX_MESSAGES:
                raise PullError(
                    f"{self.base_url}: conversation {conversation_id} has more than {MAX_MESSAGES:,} messages"
                )
            if not page.get("has_more") or not items:
                break
            first_id = items[0].get("id")  # each page is oldest first; the next page is older still
        return [m for items in reversed(pages) for m in items]

    def _message(self, body: Any) -> str:
        """The app's own words for a failure, in one line and without the key should it quote it."""
        if isinstance(body, dict):
            return " ".join(redact(str(body.get("message") or body.get("code") or "no message"), self._key).split())
        return "no message"


def _read_capped(response: httpx.Response, where: str) -> bytes:
    """The answer's body, read as it arrives and refused as soon as it passes :data:`MAX_RESPONSE_BYTES`
    (at once when its ``Content-Length`` says so): an endless answer costs no more than the limit."""
    too_large = PullFailedError(
        f"{where}: the answer is larger than {MAX_RESPONSE_BYTES // 1048576} MB, the most "
        "a pull reads; check that --base-url is the app's API base, ending in /v1"
    )
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_RESPONSE_BYTES:
        raise too_large
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


class _Answer(NamedTuple):
    status: int
    content: bytes
    headers: httpx.Headers


def _passing(error: Exception) -> Passing | None:
    """Whether a failed request is worth trying again: a timeout, or an answer a later try may not get
    (a 408, 429 or 5xx, raised as an ``HTTPStatusError`` carrying the answer inside :meth:`DifyApp.get`)."""
    if isinstance(error, httpx.HTTPStatusError):
        return Passing(retry_after(error.answer.headers))
    if isinstance(error, httpx.TimeoutException):
        return Passing()
    return None


def conversation_from_records(conversation_id: str, records: list[dict], name: str = "") -> Conversation:
    """The pulled message records as a conversation (creation order; ties keep the API's order)."""
    turns = []
    for i, item in enumerate(records):
        try:
            turns.append(dify_turn(item))
        except RecordError as e:
            raise PullFailedError(f"conversation {conversation_id}: message {i} is malformed ({e})") from None
    order = sorted(
        range(len(turns)), key=lambda i: (turns[i].created_at if turns[i].created_at is not None else float("-inf"), i)
    )
    try:
        once, _ = read_once(turns[i] for i in order)  # a record two pages both listed, read once
    except ValueError as e:
        raise PullFailedError(f"conversation {conversation_id}: {e}") from None
    return Conversation(id=conversation_id, turns=once, source_format="dify-messages", name=name or conversation_id)


def digest(conversation: Conversation) -> str:
    """What a re-pull compares: every turn's id, parent, messages, status and time."""
    doc = [
        [t.id, t.parent_id, [m.to_dict() for m in t.messages], t.status, t.error, t.created_at]
        for t in conversation.turns
    ]
    return hashlib.sha256(json.dumps(doc, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


def pull(
    db,
    base_url: str,
    key: str,
    user: str,
    *,
    conversation_id: str | None = None,
    everything: bool = False,
    timeout: float = TIMEOUT_SECONDS,
    transport: httpx.BaseTransport | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> PullResult:
    """Pull one conversation (``conversation_id``) or all of ``user``'s (``everything``) into ``db``.

    Everything is read before anything is written, so a failure stores nothing.
    """
    if bool(conversation_id) == bool(everything):
        raise PullError("name one conversation with --conversation ID, or pull every one with --all")
    if not user:
        raise PullError("--user is required: Dify lists conversations per end user")
    app = DifyApp(base_url, key, timeout=timeout, transport=transport)
    try:
        if everything:
            listed = app.conversations(user)
        else:
            listed = [{"id": conversation_id, "name": ""}]
        pulled = []
        for item in listed:
            cid = str(item["id"])
            if on_progress is not None:
                on_progress(f"reading conversation {cid}")
            records = app.messages(cid, user)
            pulled.append(conversation_from_records(cid, records, str(item.get("name") or "")))
    finally:
        app.close()
    result = PullResult(base_url=app.base_url)
    for conv in pulled:
        stored_id, outcome = store_pulled(db, conv, base_url=app.base_url, user_id=user, digest=digest(conv))
        result.ids[conv.id] = stored_id
        getattr(result, outcome).append(stored_id)
    return result
