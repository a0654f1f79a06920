"""The exceptions of ``core.service`` (see the tree in ``core/errors.py``): the flow changed under a
conversation; a conversation that cannot be replayed."""

from core.store.errors import StoreError


class SessionChangedError(StoreError):
    """Dify's ``agent_session_configuration_changed`` (HTTP 409)."""

    code = "agent_session_configuration_changed"
    status = 409


class ReplayError(StoreError):
    """A conversation that cannot be replayed from its first turn (no flow, no question, too long)."""
