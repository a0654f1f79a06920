"""Dify's node executions of a workflow run, as its console lists them (``GET /console/api/apps/{app}/
workflow-runs/{run}/node-executions``: ``{data: [{id, node_id, node_type, title, process_data, outputs,
status, error, created_at, …}]}``, or the list alone). Dify saves what each LLM node was sent in its
``process_data.prompts`` (``{role, text, files}``, the model's name beside them; older Dify versions
keep ``process_data`` as JSON text) — so does a Question Classifier or a Parameter Extractor. Each such
node run is one model call (:mod:`.calls`), read as the prompt it was sent and its outputs' ``text``,
the calls threaded into the conversations they form (each node of a turn a node of it); the run's other
nodes sent no prompt and are left out, with a note."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterator

from core.capture.calls import Call
from core.errors import MemLensError
from core.io.errors import RecordError
from core.limits import load_json
from core.model.conversation import SOURCE_MODEL, Conversation

from .calls import call_conversation, call_name, prompt_messages, read_calls, reply_message
from .common import label_of
from .records import ReadContext, Records
from .registry import Format


def is_node_run(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("node_type"), str) and "process_data" in value


def _process_data(run: dict, at: str) -> dict:
    data = run.get("process_data")
    if isinstance(data, str):  # older Dify: the process data as JSON text
        try:
            data = load_json(data, f"{at}: 'process_data'")
        except MemLensError as e:  # not JSON, or nested too deep
            raise RecordError(str(e), "process_data") from None
    return data if isinstance(data, dict) else {}


def _when(value: Any) -> str | None:
    """A node run's time (Dify's seconds since the epoch) as ISO 8601 text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, tz=timezone.utc).isoformat()
        except (OverflowError, OSError, ValueError):
            return None
    return value if isinstance(value, str) else None


def _conversation(run: Any, n: int | None, stem: str) -> Call:
    if not isinstance(run, dict):
        raise RecordError("is not a node run (an object with 'node_type' and 'process_data')", "")
    at = f"node run {label_of(run, 'title', 'id')!r}" if label_of(run, "title", "id") else "the node run"
    data = _process_data(run, at)
    prompt = prompt_messages(data.get("prompts"), at, "process_data.prompts")
    when = _when(run.get("created_at"))
    meta = {
        "node_id": run.get("node_id"),
        "node_title": run.get("title"),
        "node_type": run.get("node_type"),
        SOURCE_MODEL: data.get("model_name"),
        "provider": data.get("model_provider"),
        "start_time": when,
        "status": run.get("status"),
        "error": run.get("error"),
    }
    return call_conversation(
        prompt,
        reply_message(run.get("outputs")),
        str(run.get("id") or (stem if n is None else f"{stem}#{n}")),
        name=call_name(run.get("title"), when),
        meta=meta,
        source_format="dify-node-runs",
    )


def _runs(value: Any) -> tuple[list, None]:
    """The node runs a record holds: a console page's ``data``, or the record itself."""
    return (value["data"] if isinstance(value, dict) and isinstance(value.get("data"), list) else [value]), None


def _other_kind(run: Any) -> str | None:
    """A node run that sent no prompt: its node type (None for one that did, or for what is no run)."""
    return run["node_type"] if is_node_run(run) and not _prompted(run) else None


def _read(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    yield from read_calls(
        ctx,
        records,
        lambda run, _, n: _conversation(run, n, ctx.stem),
        lambda run: label_of(run, "title", "id"),
        other_kind=_other_kind,
        expand=_runs,
        left_out="left out the node runs that sent no prompt ({left}): only a node that calls a model saves one",
        none="{name} holds no node run with a prompt, only {left}: an LLM node's run saves its prompt in process_data",
        field="process_data",
    )


def _prompted(run: dict) -> bool:
    """Whether a node run saved the prompt it sent (an LLM node, a Question Classifier, a Parameter
    Extractor); a run whose process data cannot be read counts as one, so its problem is named."""
    data = run.get("process_data")
    if isinstance(data, str):
        return "prompts" in data
    return isinstance(data, dict) and "prompts" in data


def _sniff(first: Any, layout: str) -> bool:
    if is_node_run(first):
        return True
    items = first.get("data") if isinstance(first, dict) else None
    return isinstance(items, list) and bool(items) and is_node_run(items[0])


FORMAT = Format(
    "dify-node-runs",
    "Dify node executions of a workflow run (each model call's saved prompt and reply; other nodes left out)",
    _sniff,
    _read,
)
