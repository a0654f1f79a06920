"""The Service API's request and response shapes (they are also the OpenAPI document) and the checks
a request's values get: strings cleaned, ``user`` as Dify reads it, ids as UUIDs, a chat message's
arguments (:func:`chat_args`)."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field

from core.flow.errors import GranularityError
from core.flow.granularity import check_granularity
from core.limits import LimitError, check_query, check_value

from .errors import ApiError, FileInputError, invalid
from .uploads import parse_files

DEFAULT_USER = "DEFAULT-USER"


# -- input hygiene ----------------------------------------------------------------------------------


def clean(value: Any, field: str) -> Any:
    """NUL characters removed, lone surrogates replaced; values nested past the depth limit and
    non-finite numbers are refused."""
    try:
        check_value(value, field, finite=False, text=False)  # (scrub repairs the text)
    except LimitError as e:
        raise invalid(str(e), field) from None
    return scrub(value, field)


def scrub(value: Any, field: str) -> Any:
    if isinstance(value, str):
        if "\x00" in value:
            value = value.replace("\x00", "")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            value = value.encode("utf-8", "replace").decode("utf-8")
        return value
    if isinstance(value, float) and not math.isfinite(value):
        raise invalid(f"{field}: numbers must be finite", field)
    if isinstance(value, dict):
        return {scrub(k, field): scrub(v, field) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v, field) for v in value]
    return value


#: What a JSON body's ``user`` may be: Dify reads it from the raw JSON and takes a number (an
#: integer user id, say) or a boolean as its text.
UserArg = str | bool | int | float | None


def check_user(value: UserArg, *, required: bool = False) -> str:
    """Dify's ``user`` argument: required on chat-messages, stop and feedback, else ``DEFAULT-USER``
    when absent. A false value (``""``, ``0``, ``false``) is no user, as in Dify; any other number or
    boolean is its text (``12345`` is ``"12345"``, ``true`` is ``"True"``, as Python's ``str``)."""
    value = clean(value, "user") if value is not None else None
    if isinstance(value, (bool, int, float)) and value:
        value = str(value)
    user = value if isinstance(value, str) else ""
    if not user:
        if required:
            raise invalid("Arg user must be provided.")
        return DEFAULT_USER
    if len(user) > 255:
        raise invalid("user must be at most 255 characters", "user")
    return user


def is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except (ValueError, AttributeError, TypeError):
        return False
    return True


def ts(value: float | None) -> int:
    return int(value or 0)


# -- shapes -----------------------------------------------------------------------------------------


class ErrorBody(BaseModel):
    code: str = Field(description="snake_case error code, e.g. invalid_param, not_found, unauthorized")
    message: str
    status: int
    params: str | None = Field(default=None, description="the offending field, for invalid_param")


def error_responses(*codes: int) -> dict:
    described = {
        400: "bad input (invalid_param, bad_request, not_chat_app)",
        401: "missing, unknown or revoked key",
        404: "no such conversation, message or variable for this app and user",
    }
    return {c: {"model": ErrorBody, "description": described[c]} for c in codes}


def documented(**schema: Any):
    """A field's OpenAPI schema as Dify documents it (the handler does the checking, with Dify's messages)."""

    def apply(field_schema: dict) -> None:
        kept = {k: field_schema[k] for k in ("title", "description", "default") if k in field_schema}
        field_schema.clear()
        field_schema.update(kept, **schema)

    return apply


class ChatRequest(BaseModel):
    model_config = ConfigDict(json_schema_extra={"required": ["inputs", "query", "user"]})

    inputs: dict[str, Any] | None = Field(
        default=None, description="values for the start form's variables", json_schema_extra=documented(type="object")
    )
    query: str | None = Field(
        default=None,
        description="the user's message (must not be empty)",
        json_schema_extra=documented(type="string", minLength=1),
    )
    response_mode: Literal["blocking", "streaming"] | None = Field(
        default=None, description="blocking (default): one JSON answer; streaming: server-sent events"
    )
    conversation_id: str | None = Field(
        default=None,
        description="empty or omitted: a new conversation; unknown: a new conversation too",
        json_schema_extra=documented(
            anyOf=[{"type": "string", "format": "uuid"}, {"type": "string", "maxLength": 0}, {"type": "null"}]
        ),
    )
    user: UserArg = Field(
        default=None,
        description="the end user; conversations belong to their user (a number is taken as its text)",
        json_schema_extra=documented(type="string", minLength=1, maxLength=255),
    )
    files: list[dict[str, Any]] | None = Field(
        default=None,
        description="files sent with the query: {type: document|image|audio|video|custom, "
        "transfer_method: remote_url|local_file, url | upload_file_id}; they stay with "
        "the message, and later turns' history carries them when the flow has file "
        "upload on",
    )
    auto_generate_name: bool | None = Field(
        default=True, description="the name is the query's first 20 characters either way"
    )
    chat_history_granularity: str | None = Field(
        default=None,
        description="history granularity for agent nodes: QUERY_ANSWER (query and final answer "
        "of each earlier turn) or ALL_MESSAGES (tool calls and results too); any case; "
        "omitted: the flow's setting, else QUERY_ANSWER",
        json_schema_extra=documented(
            anyOf=[{"type": "string", "enum": ["QUERY_ANSWER", "ALL_MESSAGES"]}, {"type": "null"}]
        ),
    )
    workflow_id: str | None = Field(
        default=None,
        description="a version id of this app's flow to run",
        json_schema_extra=documented(anyOf=[{"type": "string", "format": "uuid"}, {"type": "null"}]),
    )


class UserBody(BaseModel):
    user: UserArg = None


class RenameRequest(BaseModel):
    name: str | None = None
    auto_generate: bool | None = False
    user: UserArg = None


class VariableUpdate(BaseModel):
    model_config = ConfigDict(json_schema_extra={"required": ["value"]})

    value: Any = Field(default=None, description="the new value; its type must match the variable's")
    user: UserArg = None


class Usage(BaseModel):
    prompt_tokens: int
    prompt_unit_price: str
    prompt_price_unit: str
    prompt_price: str
    completion_tokens: int
    completion_unit_price: str
    completion_price_unit: str
    completion_price: str
    total_tokens: int
    total_price: str
    currency: str
    latency: float


class ChatMetadata(BaseModel):
    retriever_resources: list[dict[str, Any]]
    usage: Usage


class ChatResponse(BaseModel):
    event: Literal["message"]
    task_id: str
    id: str
    message_id: str
    conversation_id: str
    mode: str
    answer: str
    metadata: ChatMetadata
    created_at: int


class MessageItem(BaseModel):
    id: str
    conversation_id: str
    parent_message_id: str | None
    inputs: dict[str, Any]
    query: str
    answer: str
    message_files: list[dict[str, Any]]
    feedback: dict[str, Any] | None
    retriever_resources: list[dict[str, Any]]
    agent_thoughts: list[dict[str, Any]]
    created_at: int
    status: str
    error: str | None
    extra_contents: list[dict[str, Any]]


class MessageList(BaseModel):
    limit: int
    has_more: bool
    data: list[MessageItem]


class ConversationItem(BaseModel):
    id: str
    name: str
    inputs: dict[str, Any]
    status: str
    introduction: str
    created_at: int
    updated_at: int


class ConversationList(BaseModel):
    limit: int
    has_more: bool
    data: list[ConversationItem]


class VariableItem(BaseModel):
    id: str
    name: str
    value_type: str
    value: str = Field(description="str() of the value, as Dify sends it")
    description: str
    created_at: int
    updated_at: int


class VariableList(BaseModel):
    limit: int
    has_more: bool
    data: list[VariableItem]


class LedgerEntryOut(BaseModel):
    ref: str | int
    turn: int
    turn_label: str = ""  # the turn's place on its thread, and its sibling: "turn 6 · 2/3"
    role: str
    tokens: int
    kept: bool
    reason: str
    kind: str
    why: str = ""  # the reason in words, as the node's memory system says it


class LedgerOut(BaseModel):
    turn: int
    entries: list[LedgerEntryOut]
    budget: int | None
    budget_note: str
    prompt_tokens: int
    history_tokens: int
    context_size: int | None
    exceeds_context: bool
    config: dict[str, Any]
    memory: str = ""  # the config in a few words, as its memory system labels it ("dify window 3")


class PromptMessageOut(BaseModel):
    role: str
    content: str
    origin: str
    tokens: int


class NodeLedger(BaseModel):
    node_id: str
    title: str
    type: str
    status: str
    error: str | None
    model: str | None
    ledger: LedgerOut | None
    prompt: list[PromptMessageOut] | None
    reply: str | None
    usage: dict[str, Any] | None


class MessageLedger(BaseModel):
    message_id: str
    turn_label: str = ""
    conversation_id: str
    query: str
    answer: str
    status: str
    dialogue_count: int
    nodes: list[NodeLedger]


class WhyResult(BaseModel):
    phrase: str
    mentions: list[dict]
    elsewhere: list[dict]
    losses: list[dict]
    sentences: list[str]


class ResultBody(BaseModel):
    result: Literal["success"]


class Parameters(BaseModel):
    opening_statement: str
    suggested_questions: list[str]
    suggested_questions_after_answer: dict[str, Any]
    speech_to_text: dict[str, Any]
    text_to_speech: dict[str, Any]
    retriever_resource: dict[str, Any]
    annotation_reply: dict[str, Any]
    more_like_this: dict[str, Any]
    user_input_form: list[dict[str, Any]]
    sensitive_word_avoidance: dict[str, Any]
    file_upload: dict[str, Any]
    system_parameters: dict[str, int]


class AppMeta(BaseModel):
    tool_icons: dict[str, Any]
    memlens_version: str = Field(description="MemLens's version (an extension: Dify's clients ignore it)")


class AppInfo(BaseModel):
    name: str
    description: str
    tags: list[str]
    mode: str
    author_name: str
    memlens_version: str = Field(description="MemLens's version (an extension: Dify's clients ignore it)")


class FeedbackRequest(BaseModel):
    rating: Literal["like", "dislike"] | None = Field(default=None, description="null revokes the rating")
    user: UserArg = None
    content: str | None = Field(default=None, max_length=10_000)


class StopRequest(BaseModel):
    user: UserArg = None


class Suggested(BaseModel):
    result: Literal["success"]
    data: list[str]


class UploadedFile(BaseModel):
    id: str
    name: str
    size: int
    extension: str
    mime_type: str
    created_by: str
    created_at: int


# -- a chat message's arguments ---------------------------------------------------------------------


@dataclass
class ChatArgs:
    user: str
    query: str
    inputs: dict
    streaming: bool
    conversation_id: str
    workflow_id: str | None
    granularity: str | None = None
    files: tuple = ()


def chat_args(body: ChatRequest, uploads: Mapping[str, Any] | None = None, flow_id: str | None = None) -> ChatArgs:
    user = check_user(body.user, required=True)
    if body.inputs is None:
        raise invalid("inputs is required", "inputs")
    query = clean(body.query, "query") if body.query is not None else ""
    if not query:
        raise invalid("query is required", "query")
    try:
        check_query(query)
    except LimitError as e:
        raise invalid(str(e), "query") from None
    conversation_id = body.conversation_id or ""
    if conversation_id and not is_uuid(conversation_id):
        raise invalid("conversation_id must be a valid UUID", "conversation_id")
    workflow_id = body.workflow_id or None
    if workflow_id is not None and not is_uuid(workflow_id):
        raise ApiError(400, "bad_request", f"Invalid workflow_id format: '{workflow_id}'.")
    granularity = None
    if body.chat_history_granularity is not None:
        try:
            granularity = check_granularity(body.chat_history_granularity, "chat_history_granularity")
        except GranularityError:
            raise invalid(
                "chat_history_granularity must be QUERY_ANSWER or ALL_MESSAGES", "chat_history_granularity"
            ) from None
    try:
        files = parse_files(body.files, uploads, flow_id)
    except FileInputError as e:
        raise invalid(str(e), "files") from None
    return ChatArgs(
        user=user,
        query=query,
        inputs=clean(body.inputs, "inputs"),
        streaming=body.response_mode == "streaming",
        conversation_id=conversation_id,
        workflow_id=workflow_id,
        granularity=granularity,
        files=files,
    )
