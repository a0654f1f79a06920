"""``POST /v1/audio-to-text`` and ``POST /v1/text-to-audio``, and the routes of the app modes MemLens
does not serve (``POST /v1/completion-messages``, ``POST /v1/workflows/run``), answered as Dify
answers them for this app: ``/v1/parameters`` shows the speech features as the flow configures them,
so a client that offers a microphone gets Dify's answer for a workspace without a speech model
(MemLens has none) rather than an unknown route; a chat app asked to complete or to run a workflow
gets Dify's mode error."""

from __future__ import annotations

from typing import Any

from fastapi import Body, Depends, FastAPI, Form

from ..caller import Caller, authenticate
from ..errors import ApiError, invalid
from ..schemas import UserBody, check_user, error_responses


def _enabled(caller: Caller, feature: str) -> bool:
    value = caller.flow.features.get(feature)
    return isinstance(value, dict) and bool(value.get("enabled"))


def speech_to_text(caller: Caller, user: str | None) -> None:
    check_user(user)
    if not _enabled(caller, "speech_to_text"):
        raise invalid("Speech to text is not enabled")
    raise ApiError(400, "provider_not_support_speech_to_text", "Provider not support speech to text.")


def text_to_speech(caller: Caller, body: dict[str, Any] | None) -> None:
    check_user((body or {}).get("user"))
    if not _enabled(caller, "text_to_speech"):
        raise invalid("TTS is not enabled")
    raise ApiError(400, "provider_not_support_text_to_speech", "Provider not support text to speech.")


def register(app: FastAPI) -> None:
    @app.post(
        "/v1/audio-to-text",
        responses=error_responses(400, 401),
        tags=["audio"],
        summary="Speech to text: MemLens has no speech model, so this answers Dify's error for one",
    )
    def audio_to_text(caller: Caller = Depends(authenticate), user: str | None = Form(default=None)):
        speech_to_text(caller, user)

    @app.post(
        "/v1/text-to-audio",
        responses=error_responses(400, 401),
        tags=["audio"],
        summary="Text to speech: MemLens has no speech model, so this answers Dify's error for one",
    )
    def text_to_audio(caller: Caller = Depends(authenticate), body: dict[str, Any] | None = Body(default=None)):
        text_to_speech(caller, body)

    @app.post(
        "/v1/completion-messages",
        responses=error_responses(400, 401),
        tags=["chat"],
        summary="A completion app's route: a chat app answers Dify's app_unavailable",
    )
    def completion_messages(body: UserBody, caller: Caller = Depends(authenticate)):
        check_user(body.user, required=True)
        raise ApiError(400, "app_unavailable", "App unavailable, please check your app configurations.")

    @app.post(
        "/v1/workflows/run",
        responses=error_responses(400, 401),
        tags=["chat"],
        summary="A workflow app's route: a chat app answers Dify's not_workflow_app",
    )
    def workflows_run(body: UserBody, caller: Caller = Depends(authenticate)):
        check_user(body.user, required=True)
        raise ApiError(400, "not_workflow_app", "Only support workflow app.")
