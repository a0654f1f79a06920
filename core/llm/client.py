"""Calling models: one small interface, litellm behind it, the demo model as the default.

:class:`LLMClient` is what the runtime needs — ``complete(model, messages, max_tokens)`` returning
the reply text and token usage — so tests and other callers can inject their own client.
:class:`LiteLLMClient` is the default: every call goes through ``litellm.completion`` (imported on
first use), with the demo model registered as litellm's custom provider ``memlens``.

Which model actually answers (the demo rule):

* no model configured, or a ``memlens/…`` model → ``memlens/demo``;
* ``demo_only=True`` (``python -m core run`` uses it, so its output never depends on the machine's
  keys) → ``memlens/demo`` for every node;
* a provider that needs no key (``ollama``, ``lm_studio``, ``hosted_vllm``, ``llamafile``) → called
  as configured; if it cannot be reached, a one-line :class:`LLMError`;
* a provider whose API key is not in the environment, or one litellm does not know → with
  ``fallback_to_demo=True`` (the default) the node runs on ``memlens/demo`` and the reply says so
  (``LLMReply.note``); with ``fallback_to_demo=False`` a one-line :class:`LLMError` naming the
  missing variable.

A call that fails for a passing reason (a rate limit, a server error, a timeout) is tried again
with growing pauses (:mod:`core.retry`); the error of one that never succeeds says how many tries
there were.

API keys are read by litellm from the environment only; MemLens never stores, logs or exports them,
and a provider's error that quotes one is redacted (:mod:`core.redact`) before it goes anywhere.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import threading
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

from core.model.tokens import DEMO_MODEL
from core.redact import redact, redact_log
from core.retry import Passing, attempts_note, passing_status, retry_after, with_retries

from .errors import LLMError

log = redact_log(logging.getLogger("memlens.llm"))

KEYLESS_PROVIDERS = ("ollama", "ollama_chat", "lm_studio", "hosted_vllm", "llamafile")


@dataclass(frozen=True)
class LLMReply:
    text: str
    prompt_tokens: int
    completion_tokens: int
    model: str  # the model that actually answered
    note: str = ""  # e.g. why the demo model answered instead of the configured one

    @property
    def usage(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


class LLMClient(Protocol):
    def complete(self, model: str, messages: Sequence[Mapping[str, Any]], max_tokens: int | None = None) -> LLMReply:
        """Send ``messages`` (OpenAI format) to ``model``; raise :class:`LLMError` on failure."""
        ...


def one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def join_notes(*notes: str) -> str:
    """Notes of one reply in one line ("" when there are none)."""
    return "; ".join(n for n in notes if n)


class DemoClient:
    """The demo model called in-process, without litellm (same replies and usage as through litellm)."""

    def complete(self, model: str, messages: Sequence[Mapping[str, Any]], max_tokens: int | None = None) -> LLMReply:
        from .demo_model import demo_answer, demo_usage

        answer = demo_answer(list(messages))
        usage = demo_usage(list(messages), answer.text)
        note = "" if not model or model == DEMO_MODEL else f"{model} ran on {DEMO_MODEL}"
        return LLMReply(
            answer.text, usage["prompt_tokens"], usage["completion_tokens"], DEMO_MODEL, join_notes(note, answer.note)
        )


def _litellm():
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    from .demo_model import register

    register()
    return litellm


_warming: "threading.Thread | None" = None


def warm_up() -> None:
    """Import litellm and make one offline demo call in a background thread.

    ``import litellm`` takes seconds (far more on a busy machine) and the first completion more
    still; an app calls this once a person is using it, so the first turn they run — a re-run, a new
    message — does not wait for it. A call that needs litellm before the warm-up is done simply
    waits for the import already under way (Python's import lock)."""
    global _warming
    if _warming is not None:
        return

    def work() -> None:
        try:
            LiteLLMClient().complete(DEMO_MODEL, [{"role": "user", "content": "hello"}])
        except Exception:  # a failed warm-up only means the first real call pays the cost
            log.debug("litellm warm-up failed", exc_info=True)

    _warming = threading.Thread(target=work, name="memlens-litellm-warm-up", daemon=True)
    _warming.start()


class LiteLLMClient:
    """Calls models through litellm; the demo model is litellm's custom provider ``memlens``."""

    def __init__(self, *, fallback_to_demo: bool = True, demo_only: bool = False, timeout: float = 60.0):
        self.fallback_to_demo = fallback_to_demo
        self.demo_only = demo_only
        self.timeout = timeout

    def route(self, model: str) -> tuple[str, str]:
        """(model to call, note): the demo rule of this module's docstring."""
        if not model or model.startswith("memlens/"):
            return DEMO_MODEL, "" if model == DEMO_MODEL else (
                f"no model configured: {DEMO_MODEL}" if not model else f"{model} is not a MemLens model: {DEMO_MODEL}"
            )
        if self.demo_only:
            return DEMO_MODEL, f"{model} ran on {DEMO_MODEL} (demo mode)"
        litellm = _litellm()
        with contextlib.redirect_stdout(io.StringIO()):  # litellm prints provider lists on bad names
            try:
                _, provider, _, _ = litellm.get_llm_provider(model)
            except Exception:
                provider = None
            if provider in KEYLESS_PROVIDERS:
                return model, ""
            missing: list[str] = []
            if provider is not None:
                try:
                    missing = list(litellm.validate_environment(model).get("missing_keys") or [])
                except Exception:
                    missing = []
        if provider is None:
            problem = f"litellm does not know the provider of {model!r}"
        elif missing:
            problem = f"{' or '.join(missing)} is not set"
        else:
            return model, ""
        if self.fallback_to_demo:
            return DEMO_MODEL, f"{model}: {problem} — ran on {DEMO_MODEL}"
        raise LLMError(f"{model}: {problem}; set it in the environment, or run the node on {DEMO_MODEL}")

    def complete(self, model: str, messages: Sequence[Mapping[str, Any]], max_tokens: int | None = None) -> LLMReply:
        target, note = self.route(model)
        litellm = _litellm()
        kwargs: dict[str, Any] = {"model": target, "messages": [dict(m) for m in messages], "timeout": self.timeout}
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        response = _completion(litellm, target, kwargs)
        try:
            text = response.choices[0].message.content or ""
        except (AttributeError, IndexError):
            raise LLMError(f"{target}: the provider returned no message") from None
        usage = getattr(response, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        if target == DEMO_MODEL:  # what the demo model chose, said as it is when called in-process
            from .demo_model import demo_note

            note = join_notes(note, demo_note(messages))
        return LLMReply(text=text, prompt_tokens=prompt, completion_tokens=completion, model=target, note=note)

    def complete_tools(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        max_tokens: int | None = None,
    ) -> "ToolReply":
        """One model step with tools offered (litellm tool calling); the agent runs the tools itself."""
        target, note = self.route(model)
        litellm = _litellm()
        kwargs: dict[str, Any] = {"model": target, "messages": [dict(m) for m in messages], "timeout": self.timeout}
        if tools:  # OpenAI refuses an empty tool list: an agent without tools asks without one
            kwargs["tools"] = [dict(t) for t in tools]
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        response = _completion(litellm, target, kwargs)
        try:
            message = response.choices[0].message
        except (AttributeError, IndexError):
            raise LLMError(f"{target}: the provider returned no message") from None
        calls = tuple(
            ToolCallRequest(
                str(getattr(c, "id", "") or ""), str(c.function.name or ""), str(c.function.arguments or "{}")
            )
            for c in getattr(message, "tool_calls", None) or []
        )
        usage = getattr(response, "usage", None)
        return ToolReply(
            text=message.content or "",
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            model=target,
            note=note,
            tool_calls=calls,
        )


@dataclass(frozen=True)
class ToolCallRequest:
    """A tool call a model asked for (OpenAI's ``tool_calls`` item); ``arguments`` is JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolReply(LLMReply):
    """A reply that may ask for tool calls instead of (or with) text."""

    tool_calls: tuple[ToolCallRequest, ...] = ()


def _completion(litellm, model: str, kwargs: dict[str, Any]):
    """``litellm.completion(**kwargs)``, tried again after a rate limit, a server error or a
    timeout (:mod:`core.retry`: here, not inside litellm or the provider's SDK, so a call is tried
    ATTEMPTS times in all and the error says so); any failure left is one :class:`LLMError` line."""

    def attempt():
        with contextlib.redirect_stdout(io.StringIO()):  # litellm prints provider lists on bad names
            return litellm.completion(**kwargs, num_retries=0, max_retries=0)

    try:
        return with_retries(attempt, _passing)
    except Exception as e:  # litellm maps every provider failure onto its own exception classes
        raise LLMError(_describe_failure(model, e) + attempts_note(e)) from None


def _passing(error: Exception) -> Passing | None:
    """Whether a failed model call may succeed if made again: a timeout, a rate limit or a server error
    (not a refused connection, which litellm also gives status 500: nothing is listening there)."""
    kinds = {k.__name__ for k in type(error).__mro__}
    if kinds & {"Timeout", "APITimeoutError"}:
        return Passing()
    if "APIConnectionError" in kinds or not passing_status(getattr(error, "status_code", None)):
        return None
    return Passing(retry_after(getattr(getattr(error, "response", None), "headers", None)))


def _describe_failure(model: str, error: Exception) -> str:
    kind = type(error).__name__
    # Redacted before it is shortened: a key cut in two would no longer be recognised.
    message = one_line(redact(str(getattr(error, "message", None) or error or kind)))
    if kind == "AuthenticationError":
        return f"{model}: authentication failed — check the API key in the environment ({message})"
    if kind in ("APIConnectionError", "Timeout", "ServiceUnavailableError", "InternalServerError"):
        return f"{model}: cannot reach the provider — check that it is running and reachable ({message})"
    if kind == "NotFoundError":
        return f"{model}: the provider does not know this model ({message})"
    if kind == "RateLimitError":
        return f"{model}: rate limited by the provider ({message})"
    if kind in ("BadRequestError", "ContextWindowExceededError", "UnsupportedParamsError"):
        return f"{model}: the provider refused the request ({message})"
    return f"{model}: {kind}: {message}"


def default_client() -> LiteLLMClient:
    return LiteLLMClient()


__all__ = [
    "LLMClient",
    "LLMReply",
    "LiteLLMClient",
    "DemoClient",
    "default_client",
    "KEYLESS_PROVIDERS",
    "one_line",
    "ToolCallRequest",
    "ToolReply",
]
