"""The Service API's errors: an answer in Dify's error shape (:class:`ApiError`), the messages Dify
answers with, and how every other failure becomes one (:func:`install`): a ``MemLensError`` is a 400
(404 for a conversation that is gone, 409 for a busy one), a request FastAPI cannot parse a 400, an
unknown route a 404, anything else a 500 whose detail only the log has."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from core.errors import MemLensError
from core.limits import too_deep
from core.redact import redact_log
from core.store.errors import ConversationBusyError, StoreError

log = redact_log(logging.getLogger("memlens.api"))

CONVERSATION_NOT_FOUND = "Conversation Not Exists."
MESSAGE_NOT_FOUND = "Message Not Exists."
NOT_CHAT_APP = "Please check if your app mode matches the right API route."
INTERNAL = (
    "The server encountered an internal error and was unable to complete your request. "
    "Either the server is overloaded or there is an error in the application."
)


class ApiError(Exception):
    """An answer in Dify's error shape: ``{"code", "message", "status"}`` (+ ``params``)."""

    def __init__(self, status: int, code: str, message: str, params: str | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.params = params

    def body(self) -> dict:
        out: dict[str, Any] = {"code": self.code, "message": self.message, "status": self.status}
        if self.params is not None:
            out["params"] = self.params
        return out


class FileInputError(MemLensError):
    """A ``files`` entry is malformed or names an upload that does not exist."""


def invalid(message: str, params: str | None = None) -> ApiError:
    return ApiError(400, "invalid_param", message, params)


def not_found(message: str) -> ApiError:
    return ApiError(404, "not_found", message)


def error_response(error: ApiError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status)


def from_memlens(error: MemLensError) -> ApiError:
    if isinstance(error, ConversationBusyError):
        return ApiError(error.status, error.code, str(error))
    if isinstance(error, StoreError) and str(error).startswith("no conversation"):
        return not_found(CONVERSATION_NOT_FOUND)
    return invalid(str(error))


def validation_message(error: RequestValidationError) -> ApiError:
    first = (error.errors() or [{}])[0]
    if first.get("type") == "json_invalid":
        return ApiError(400, "bad_request", "The request body is not valid JSON.")
    loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path", "header")]
    field = loc[0] if loc else None
    message = first.get("msg") or "invalid request"
    where = ".".join(loc)
    return invalid(f"{where}: {message}" if where else message, field)


def install(app: FastAPI) -> None:
    """Every failure of a request answers in Dify's error shape."""

    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, error: ApiError):
        return error_response(error)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_request: Request, error: RequestValidationError):
        return error_response(validation_message(error))

    @app.exception_handler(MemLensError)
    async def _memlens_error(_request: Request, error: MemLensError):
        return error_response(from_memlens(error))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, error: StarletteHTTPException):
        if error.status_code == 404:
            return error_response(
                not_found(
                    "The requested URL was not found on the server. If you entered the "
                    "URL manually please check your spelling and try again."
                )
            )
        if error.status_code == 405:
            return error_response(
                ApiError(405, "method_not_allowed", "The method is not allowed for the requested URL.")
            )
        if isinstance(error.__cause__, RecursionError):  # a body too deep for the JSON parser itself
            return error_response(invalid(too_deep("The request body")))
        code = {400: "bad_request", 413: "request_entity_too_large"}.get(error.status_code, "http_error")
        return error_response(ApiError(error.status_code, code, str(error.detail)))

    @app.exception_handler(Exception)
    async def _internal(_request: Request, error: Exception):
        log.error("request failed", exc_info=error)
        return error_response(ApiError(500, "internal_server_error", INTERNAL))
