"""Dify's Service API over the flows in the store: the server (``app``), the request and response
shapes with their checks (``schemas``), the API error and its mapping to HTTP answers (``errors``),
the caller an app key authenticates (``caller``), the routes, one module per resource (``routes/``),
and the files sent with chat messages (``uploads``).

Where each rule lives:

* The Dify Service API: `core/api/app.py` (the server: `create_app`, the body limit, the OpenAPI document),
  `core/api/routes/` (one module per resource: chat, messages, conversations, variables, info, files, audio —
  the speech routes and other app modes' routes, with Dify's answers — and memlens), `core/api/schemas.py`
  (request and response shapes, input hygiene — `user` as Dify reads it in `check_user` — a chat message's
  arguments); a conversation's introduction rendered by `render_introduction` (`core/flow/templates.py`),
  `core/api/errors.py` (`ApiError` and how every failure becomes an HTTP answer), `core/api/caller.py` (app
  keys, the store scoped to the caller).
"""

from core import public_api

__all__, __getattr__ = public_api(
    __name__,
    {
        "app": ("create_app",),
        "errors": ("ApiError", "FileInputError"),
    },
)
