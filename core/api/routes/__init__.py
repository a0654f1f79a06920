"""The Service API's routes, one module per resource; :func:`register_routes` adds them all to an app.

``chat`` (chat-messages, stop), ``messages`` (list, feedbacks, suggested), ``conversations`` (list,
delete, rename), ``variables``, ``info`` (parameters, meta, info), ``files`` (upload), ``audio`` (the
speech routes, and the routes of app modes MemLens does not serve, with Dify's answers) and
``memlens`` (the ledger and "where did it go?" extension).
"""

from fastapi import FastAPI

from . import audio, chat, conversations, files, info, memlens, messages, variables


def register_routes(app: FastAPI) -> None:
    for resource in (chat, messages, conversations, variables, info, files, audio, memlens):
        resource.register(app)


__all__ = ["register_routes"]
