"""The exceptions of ``core.service`` (see the tree in ``core/errors.py``): the flow changed under a
conversation."""

from core.store.errors import StoreError


class SessionChangedError(StoreError):
    """Dify's ``agent_session_configuration_changed`` (HTTP 409)."""

    code = "agent_session_configuration_changed"
    status = 409
