"""Dify's Service API over the flows in the store: the server (``app``), the request and response
shapes with their checks (``schemas``), the API error and its mapping to HTTP answers (``errors``),
the caller an app key authenticates (``caller``), the routes, one module per resource (``routes/``),
and the files sent with chat messages (``uploads``).
"""

from core import public_api

__all__, __getattr__ = public_api(__name__, {
    "app": ("create_app",),
    "errors": ("ApiError", "FileInputError"),
})
