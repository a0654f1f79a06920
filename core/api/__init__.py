"""Dify's Service API over the flows in the store: chat, conversations, messages, variables and the
MemLens extension (``server``), the rest of its chat-app endpoints (``app_routes``), what every
route shares (``base``) and the files sent with chat messages (``uploads``).
"""

from core import public_api

__all__, __getattr__ = public_api(__name__, {
    "server": ("create_app",),
})
