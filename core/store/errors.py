"""The exceptions of ``core.store`` (see the tree in ``core/errors.py``): a store operation refused, a
row that is not there, a database that cannot be opened, a value an import would store, a stored
ledger that does not fit its conversation, a busy conversation."""

from core.errors import MemLensError, RuntimeFailure


class StoreError(MemLensError):
    """A store operation was refused; the message says why and what to do."""


class NotFoundError(StoreError, RuntimeFailure):
    """The store holds no row with that id (a conversation, a flow, a message, a key, a turn)."""


class StoreUnavailableError(StoreError, RuntimeFailure):
    """The database cannot be opened: its server does not answer or refuses the login, its file or
    folder cannot be made, or its driver is not installed."""


class NoFeedbackError(StoreError):
    """A rating was revoked where the user had given none (Dify refuses it as a bad request)."""


class ImportCheckError(StoreError):
    """An imported conversation holds a value the store cannot keep."""


class LedgerMismatchError(MemLensError):
    """A stored ledger does not fit the conversation it is read with."""


class ConversationBusyError(RuntimeFailure):
    """Another turn on the conversation is still running (and did not finish in time)."""

    code = "conversation_busy"
    status = 409
