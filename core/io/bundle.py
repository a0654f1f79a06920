"""The MemLens conversation export (``format: memlens-conversation``): its shape, checked whole.

An export is imported as it was — its ids, turns, node runs, variables and their history — so
every field that reaches the store is checked here first: its type, its range, that numbers are
finite and ids fit their columns, that nested values stay within the depth limit, and finally
that the turns, ledgers and variable history read back the way the Debugger and the report
read them. The first problem found is raised as one line naming the record and the field;
nothing is written (see :func:`core.service.transfer.import_conversation`).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from core.errors import MemLensError
from core.limits import LimitError, check_export_size, check_message, check_turns, check_value, load_json
from core.memory.strategies.compaction import SUMMARIES_META
from core.store import checks

from .errors import BundleError

FORMAT = "memlens-conversation"
FORMAT_VERSION = 1

_ID, _NAME, _SOURCE, _STATUS = checks.ID_WIDTH, checks.NAME_WIDTH, checks.SOURCE_WIDTH, checks.STATUS_WIDTH
_NODE_TYPE, _VARIABLE_ID, _VALUE_TYPE = checks.NODE_TYPE_WIDTH, checks.VARIABLE_ID_WIDTH, checks.VALUE_TYPE_WIDTH
_OPERATION, _STRUCTURE = checks.OPERATION_WIDTH, checks.STRUCTURE_WIDTH
_SUMMARY_KEY = 64  # a sha256 digest in hex


def _fail(message: str) -> None:
    raise BundleError(f"not a MemLens conversation export: {message}")


_ABSENT = object()


class _Record:
    """One object of the document (``turn 3``, ``variable 0``…) and checks of its fields."""

    def __init__(self, where: str, value: Any):
        if not isinstance(value, Mapping):
            _fail(f"{where} must be an object, not {checks.kind_of(value)}")
        self.where = where
        self.value = value

    def _get(self, key: str, required: bool, nullable: bool) -> Any:
        """The field's value, or ``_ABSENT`` when it may be left out and is, or may be null and is."""
        if key not in self.value and not required:
            return _ABSENT
        v = self.value.get(key)
        return _ABSENT if v is None and nullable else v

    def _bad(self, key: str, expected: str) -> None:
        _fail(f"{self.where}: '{key}' must be {expected}, not {checks.kind_of(self.value.get(key))}")

    def text(
        self,
        key: str,
        *,
        max_len: int | None = None,
        required: bool = True,
        nullable: bool = False,
        nonempty: bool = False,
    ) -> str | None:
        v = self._get(key, required, nullable)
        if v is _ABSENT:
            return None
        expected = "a non-empty string" if nonempty else "a string"
        if nullable:
            expected += " or null"
        if not isinstance(v, str) or (nonempty and not v):
            self._bad(key, expected)
        if max_len is not None and len(v) > max_len:
            _fail(f"{self.where}: '{key}' is {len(v)} characters; at most {max_len} fit")
        return v

    def number(self, key: str, *, required: bool = True, nullable: bool = False) -> float | None:
        v = self._get(key, required, nullable)
        if v is _ABSENT:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            self._bad(key, "a finite number" + (" or null" if nullable else ""))
        return float(v)

    def whole(self, key: str, *, minimum: int = 0, required: bool = True, nullable: bool = False) -> int | None:
        v = self._get(key, required, nullable)
        if v is _ABSENT:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or not minimum <= v <= checks.MAX_INT:
            self._bad(key, f"a whole number from {minimum} to {checks.MAX_INT}" + (" or null" if nullable else ""))
        return v

    def flag(self, key: str) -> None:
        if key in self.value and not isinstance(self.value[key], bool):
            self._bad(key, "true or false")

    def obj(self, key: str, *, required: bool = False, nullable: bool = False) -> Mapping | None:
        return self._typed(key, Mapping, "an object", required, nullable)

    def items(self, key: str, *, required: bool = False, nullable: bool = False) -> list | None:
        return self._typed(key, list, "a list", required, nullable)

    def _typed(self, key: str, kind: type, expected: str, required: bool, nullable: bool) -> Any:
        v = self._get(key, required, nullable)
        if v is _ABSENT:
            return None
        if not isinstance(v, kind):
            self._bad(key, expected + (" or null" if nullable else ""))
        return v


def _check_conversation(bundle: Mapping) -> _Record:
    conv = _Record("'conversation'", bundle.get("conversation"))
    if not isinstance(conv.value.get("id"), str) or not conv.value["id"]:
        _fail("'conversation.id' is missing")
    conv.where = "conversation"
    conv.text("id", max_len=_ID, nonempty=True)
    conv.text("user_id", max_len=_NAME)
    conv.text("name", max_len=_NAME)
    conv.text("source", max_len=_SOURCE)
    conv.obj("inputs", nullable=True)
    conv.text("active_turn_id", max_len=_ID, required=False, nullable=True)
    meta = conv.obj("meta", nullable=True) or {}
    conv.number("created_at")
    conv.number("updated_at")
    m = _Record("conversation.meta", meta)
    if meta.get("fidelity") is not None and meta.get("fidelity") not in ("documented", "code"):
        _fail(f"conversation.meta: 'fidelity' must be 'documented' or 'code', not {meta['fidelity']!r}")
    m.text("system_prompt", required=False, nullable=True)
    overrides = m.obj("memory_overrides", nullable=True) or {}
    for node, settings in overrides.items():
        if not isinstance(settings, Mapping):
            _fail(
                f"conversation.meta.memory_overrides: node {node!r} must map to an object, not {checks.kind_of(settings)}"
            )
    return conv


def _check_flow(bundle: Mapping) -> None:
    from core.flow.graph import Flow, FlowError

    raw = bundle.get("flow")
    if raw is None:
        return
    flow = _Record("'flow'", raw)
    flow.where = "flow"
    if not isinstance(raw.get("definition"), Mapping):
        _fail("'flow.definition' must be an object")
    flow.text("flow_id", max_len=_ID, required=False, nullable=True)
    flow.text("version_id", max_len=_ID, required=False, nullable=True)
    flow.text("name", max_len=_NAME, required=False, nullable=True)
    flow.whole("version", minimum=1, required=False, nullable=True)
    flow.text("structure", max_len=_STRUCTURE, required=False, nullable=True)
    flow.text("note", required=False, nullable=True)
    flow.number("created_at", required=False, nullable=True)
    try:
        Flow.from_dict(raw["definition"], name=str(raw.get("name") or "flow"))
    except FlowError as e:
        raise BundleError(f"not a MemLens conversation export: its flow is invalid: {e}") from None


def _check_message(where: str, raw: Any) -> None:
    m = _Record(where, raw)
    m.text("role", nonempty=True)
    content = m.text("content", required=False, nullable=True)
    if content is not None:
        try:
            check_message(len(content), f"{where}: its content")
        except LimitError as e:
            _fail(str(e))
    m.text("kind", required=False, nullable=True)
    ref = m.value.get("ref", "")
    if isinstance(ref, bool) or not isinstance(ref, (str, int)):  # a reader numbers messages or names them
        m._bad("ref", "a string or a whole number")
    m.text("name", required=False, nullable=True)
    m.text("tool_call_id", required=False, nullable=True)
    for k, call in enumerate(m.items("tool_calls", nullable=True) or []):
        c = _Record(f"{where} tool call {k}", call)
        for key in ("id", "name", "arguments"):
            c.text(key)
    for k, f in enumerate(m.items("files", nullable=True) or []):
        _Record(f"{where} file {k}", f)


def _check_node_run(where: str, raw: Any) -> None:
    run = _Record(where, raw)
    run.text("node_id", max_len=_NAME, required=False, nullable=True)
    run.text("type", max_len=_NODE_TYPE, required=False, nullable=True)
    run.text("title", max_len=_NAME, required=False, nullable=True)
    run.flag("emulated")
    run.text("status", max_len=_STATUS, required=False, nullable=True)
    run.text("error", required=False, nullable=True)
    run.obj("ledger", nullable=True)
    run.items("prompt", nullable=True)
    run.text("reply", required=False, nullable=True)
    run.obj("usage", nullable=True)
    run.number("latency_ms", required=False, nullable=True)
    for k, summary in enumerate(run.items("summaries", nullable=True) or []):
        _check_summary(f"{where} compaction summary {k}", summary)


def _check_summary(where: str, raw: Any) -> None:
    """A compaction summary stored with its turn: what it was written from (a digest), its text, its writer."""
    if not isinstance(raw, Mapping):
        _fail(f"{where} is not an object")
    summary = _Record(where, raw)
    summary.text("key", max_len=_SUMMARY_KEY, nonempty=True)
    summary.text("summary")
    summary.text("written_by", max_len=_NAME, required=False, nullable=True)


def _check_turns(bundle: Mapping) -> list:
    turns = bundle.get("turns")
    if not isinstance(turns, list):
        _fail(f"'turns' must be a list, not {checks.kind_of(turns)}")
    try:
        check_turns(len(turns), "the conversation")
    except LimitError as e:
        _fail(str(e))
    ids: set[str] = set()
    seqs: set[int] = set()
    for i, raw in enumerate(turns):
        where = f"turn {i}"
        if not isinstance(raw, Mapping):
            _fail(f"{where} is not an object")
        if not isinstance(raw.get("id"), str) or not raw["id"] or raw["id"] in ids:
            _fail(f"{where} has a missing or repeated 'id'")
        t = _Record(where, raw)
        t.text("id", max_len=_ID, nonempty=True)
        ids.add(raw["id"])
        if not isinstance(raw.get("query"), str) or not isinstance(raw.get("answer", ""), str):
            _fail(f"{where}: 'query' and 'answer' must be strings")
        t.text("parent_id", max_len=_ID, required=False, nullable=True)
        t.text("flow_version_id", max_len=_ID, required=False, nullable=True)
        t.text("status", max_len=_STATUS, required=False, nullable=True)
        t.text("error", required=False, nullable=True)
        t.obj("inputs", nullable=True)
        t.whole("dialogue_count", minimum=0, required=False, nullable=True)
        t.whole("answer_tokens", minimum=0, required=False, nullable=True)
        t.number("created_at", required=False, nullable=True)
        seq = t.whole("seq", minimum=1, required=False, nullable=True)
        if seq is not None:
            if seq in seqs:
                _fail(f"{where}: 'seq' {seq} is repeated")
            seqs.add(seq)
        t.obj("prompt_tokens", nullable=True)
        for k, summary in enumerate(t.items(SUMMARIES_META, nullable=True) or []):
            _check_summary(f"{where} compaction summary {k}", summary)
        for k, message in enumerate(t.items("messages", nullable=True) or []):
            _check_message(f"{where} message {k}", message)
        for j, run in enumerate(t.items("node_runs", nullable=True) or []):
            _check_node_run(f"{where} node run {j}", run)
    active = (bundle.get("conversation") or {}).get("active_turn_id")
    if active is not None and active not in ids:
        _fail(f"conversation: 'active_turn_id' {active!r} is not one of its turns")
    return turns


def _check_variables(bundle: Mapping) -> None:
    from core.flow.variables import VariableError, is_valid

    variables = bundle.get("variables")
    if not isinstance(variables, list):
        _fail(f"'variables' must be a list, not {checks.kind_of(variables)}")
    seen: set[str] = set()
    for i, raw in enumerate(variables):
        where = f"variable {i}"
        if not isinstance(raw, Mapping) or not all(isinstance(raw.get(k), str) for k in ("id", "name", "value_type")):
            _fail(f"{where} needs 'id', 'name' and 'value_type'")
        v = _Record(where, raw)
        v.text("id", max_len=_VARIABLE_ID, nonempty=True)
        if raw["id"] in seen:
            _fail(f"{where}: 'id' {raw['id']!r} is repeated")
        seen.add(raw["id"])
        v.text("name", max_len=_NAME, nonempty=True)
        v.text("value_type", max_len=_VALUE_TYPE)
        v.text("description", required=False, nullable=True)
        v.number("created_at", required=False, nullable=True)
        v.number("updated_at", required=False, nullable=True)
        try:
            fits = raw.get("value") is None or is_valid(raw["value_type"], raw["value"])
        except VariableError as e:
            _fail(f"{where}: {e}")
        if not fits:
            _fail(
                f"{where}: 'value' is {checks.kind_of(raw['value'])}, which does not fit its type {raw['value_type']!r}"
            )
    history = bundle.get("variable_history")
    if not isinstance(history, list):
        _fail(f"'variable_history' must be a list, not {checks.kind_of(history)}")
    for i, raw in enumerate(history):
        where = f"variable change {i}"
        if (
            not isinstance(raw, Mapping)
            or not isinstance(raw.get("name"), str)
            or not isinstance(raw.get("node_id"), str)
        ):
            _fail(f"{where} needs 'name' and 'node_id'")
        h = _Record(where, raw)
        h.text("name", max_len=_NAME)
        h.text("node_id", max_len=_NAME)
        h.text("turn_id", max_len=_ID, required=False, nullable=True)
        h.whole("turn_seq", minimum=0, required=False, nullable=True)
        h.text("operation", max_len=_OPERATION, required=False, nullable=True)
        h.number("created_at", required=False, nullable=True)


def _check_readable(bundle: Mapping, turns: list) -> None:
    """Read the turns and ledgers back the way the Debugger and the report do."""
    from core.model.conversation import Conversation
    from core.store.ledger_codec import unpack_node_run
    from core.store.repo.turns import turn_from_dict

    read = [turn_from_dict({k: v for k, v in t.items() if k != "damaged"}) for t in turns]
    for i, turn in enumerate(read):
        if (turn.meta or {}).get("damaged"):
            _fail(f"turn {i}: its 'messages' cannot be read as messages")
    conv = Conversation(id=bundle["conversation"]["id"], turns=read)
    for i, t in enumerate(turns):
        for j, run in enumerate(t.get("node_runs") or []):
            try:
                damaged = unpack_node_run(run, conv, i).get("damaged")
            except MemLensError as e:
                _fail(f"turn {i} node run {j}: {e}")
            if damaged:
                _fail(f"turn {i} node run {j}: its 'ledger' or 'prompt' cannot be read")


def validate_bundle(bundle: Any) -> None:
    """Check an export document completely before anything is written; raises :class:`BundleError`."""
    if not isinstance(bundle, Mapping):
        _fail("expected a JSON object")
    if bundle.get("format") != FORMAT:
        _fail(f"'format' must be {FORMAT!r}")
    if bundle.get("version") != FORMAT_VERSION:
        _fail(f"unsupported version {bundle.get('version')!r} (this MemLens reads version {FORMAT_VERSION})")
    # Field checks first (they look one level down only), so a bad field is named as such; then
    # the whole document's depth and numbers, before anything walks it recursively.
    _check_conversation(bundle)
    turns = _check_turns(bundle)
    _check_variables(bundle)
    for key in ("conversation", "flow", "turns", "variables", "variable_history"):
        try:
            check_value(bundle.get(key), key)
        except LimitError as e:
            raise BundleError(f"not a MemLens conversation export: {e}") from None
    _check_flow(bundle)
    _check_readable(bundle, turns)


def is_bundle(data: Any) -> bool:
    return isinstance(data, Mapping) and data.get("format") == FORMAT


def looks_like_bundle(head: str) -> bool:
    """Whether a file's first few kilobytes announce a conversation export."""
    return f'"{FORMAT}"' in head


def parse_bundle(data: bytes | str, name: str) -> Any:
    """The JSON document of an export's bytes, within the size and depth limits (not yet validated)."""
    check_export_size(len(data), name)
    try:
        return load_json(data, name)
    except LimitError as e:
        raise BundleError(str(e)) from None
    except MemLensError as e:
        raise BundleError(f"{e}; expected a MemLens conversation export") from None


__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "BundleError",
    "validate_bundle",
    "is_bundle",
    "looks_like_bundle",
    "parse_bundle",
]
