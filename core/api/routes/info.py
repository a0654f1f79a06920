"""``GET /v1/parameters`` (the app's features as the flow exports them and its start form as Dify's
``user_input_form``), ``GET /v1/meta`` (its tool icons: none) and ``GET /v1/info`` (its name and
description); both of the latter add ``memlens_version``, which Dify's clients ignore."""

from __future__ import annotations

from fastapi import Depends, FastAPI, Query

from core import __version__

from ..caller import Caller, authenticate
from ..schemas import AppInfo, AppMeta, Parameters, error_responses
from .files import SYSTEM_PARAMETERS

_DISABLED = {"enabled": False}
_DEFAULT_FILE_UPLOAD = {
    "image": {"enabled": False, "number_limits": 3, "detail": "high", "transfer_methods": ["remote_url", "local_file"]}
}


def user_input_form(caller: Caller) -> list[dict]:
    """The start node's variables as Dify lists them: ``[{"text-input": {label, variable, …}}, …]``."""
    form = []
    for raw in caller.flow.start_fields:
        kind = str(raw.get("type") or "text-input")
        item = {
            "label": str(raw.get("label") or raw["variable"]),
            "variable": str(raw["variable"]),
            "required": bool(raw.get("required", False)),
            "default": raw.get("default", ""),
        }
        for key in (
            "max_length",
            "options",
            "allowed_file_types",
            "allowed_file_extensions",
            "allowed_file_upload_methods",
        ):
            if key in raw:
                item[key] = raw[key]
        form.append({kind: item})
    return form


def parameters(caller: Caller) -> dict:
    features = caller.flow.features
    file_upload = dict(_DEFAULT_FILE_UPLOAD)
    if isinstance(features.get("file_upload"), dict):
        file_upload.update(features["file_upload"])
    questions = features.get("suggested_questions")
    return {
        "opening_statement": str(features.get("opening_statement") or ""),
        "suggested_questions": [str(q) for q in questions] if isinstance(questions, list) else [],
        **{
            k: dict(features[k]) if isinstance(features.get(k), dict) else dict(_DISABLED)
            for k in (
                "suggested_questions_after_answer",
                "speech_to_text",
                "text_to_speech",
                "retriever_resource",
                "annotation_reply",
                "more_like_this",
                "sensitive_word_avoidance",
            )
        },
        "user_input_form": user_input_form(caller),
        "file_upload": file_upload,
        "system_parameters": dict(SYSTEM_PARAMETERS),
    }


def register(app: FastAPI) -> None:
    @app.get(
        "/v1/parameters",
        response_model=Parameters,
        responses=error_responses(400, 401),
        tags=["app"],
        summary="The app's features and start form (what a client shows before the first message)",
    )
    def get_parameters(caller: Caller = Depends(authenticate), user: str | None = Query(default=None)):
        return parameters(caller)

    @app.get(
        "/v1/meta",
        response_model=AppMeta,
        responses=error_responses(400, 401),
        tags=["app"],
        summary="The app's tool icons",
    )
    def get_meta(caller: Caller = Depends(authenticate)):
        return {"tool_icons": {}, "memlens_version": __version__}

    @app.get(
        "/v1/info",
        response_model=AppInfo,
        responses=error_responses(400, 401),
        tags=["app"],
        summary="The app's name, description and mode",
    )
    def get_info(caller: Caller = Depends(authenticate)):
        return {
            "name": caller.flow.name,
            "description": caller.flow.description,
            "tags": [],
            "mode": caller.flow.app_mode,
            "author_name": "",
            "memlens_version": __version__,
        }
