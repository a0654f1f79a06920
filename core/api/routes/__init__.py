"""The Service API's routes, one module per resource; :func:`register_routes` adds them all to an app.

``chat`` (chat-messages, stop), ``messages`` (list, feedbacks, suggested), ``conversations`` (list,
delete, rename), ``variables``, ``info`` (parameters, meta, info), ``files`` (upload) and ``memlens``
(the ledger and "where did it go?" extension).
"""

from fastapi import FastAPI

from . import chat, conversations, files, info, memlens, messages, variables


def register_routes(app: FastAPI) -> None:
    for resource in (chat, messages, conversations, variables, info, files, memlens):
        resource.register(app)


__all__ = ["register_routes"]
