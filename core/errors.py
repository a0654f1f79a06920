"""The one base class for bad input anywhere in the core.

Every error a user can cause (a malformed file, an out-of-range setting, a type mismatch) is a
``MemLensError`` whose message says what was wrong and what to do; the CLI prints it as one line
and exits with status 2, the UI shows it in place. A ``RuntimeFailure`` is one the input did not
cause — what it names is not there (an id the store does not hold) or something it needs failed (a
network, a database server, a model) — and the CLI exits with status 1 for it. Anything else is a bug: the CLI still prints one
line (``MEMLENS_DEBUG=1`` shows the traceback) and the API answers 500 and logs the detail.

The tree (a package's exceptions live in its own ``errors.py``, e.g. ``core/flow/errors.py``, each
deriving from a class here; catch the narrowest that fits)::

    MemLensError (ValueError)
    ├── RuntimeFailure         not the input's fault: missing, unreachable, failed   core/errors.py
    ├── ConfigError            a memory config value, or a strategy's own check      core/memory/errors.py
    ├── ReportError            a report, report bundle, source file or config set    core/report/errors.py
    │   └── BundleFieldError   one field of a report bundle                          core/report/errors.py
    ├── HostsError             an entry of MEMLENS_ALLOWED_HOSTS                     core/hosts.py
    ├── LimitError             over a size or depth limit                            core/limits.py
    │   └── TooLargeError      over a size limit                                     core/limits.py
    ├── FormatError            a file no reader can read                             core/io/errors.py
    │   └── RecordError        one bad record in it                                  core/io/errors.py
    ├── FlowError              a flow file or Dify DSL export                        core/flow/errors.py
    ├── RunError               a turn that cannot run                                core/flow/errors.py
    ├── WindowInputError       a Window Memory node's input                          core/flow/errors.py
    ├── VariableError          a conversation variable                               core/flow/errors.py
    │   └── TypeMismatchError  a value of the wrong type                             core/flow/errors.py
    ├── AssignerError          a Variable Assigner operation                         core/flow/errors.py
    ├── StateError, ToolError, ToolConfigError, GranularityError   the agent node    core/flow/errors.py
    ├── TrimError              trim_messages' own refusals                           core/memory/errors.py
    ├── LongTermMemoryError    long-term memory settings and extraction              core/memory/errors.py
    │   └── MemoryNotFound     no memory with that id (a RuntimeFailure)             core/memory/errors.py
    ├── LLMError               the model call (a RuntimeFailure)                     core/llm/errors.py
    ├── CompareError           a comparison's configs or window                      core/analysis/errors.py
    ├── WhyError               a "where did it go?" question                         core/analysis/errors.py
    ├── PullError              pulling from a Dify app                               core/io/errors.py
    │   └── PullFailedError    the app did not answer as asked (a RuntimeFailure)    core/io/errors.py
    ├── FileInputError         a chat message's files                                core/api/errors.py
    ├── UsageError             the command line                                      core/cli/errors.py
    ├── CaptureError           a captured call, a capture setting, an inference      core/capture/errors.py
    ├── LedgerMismatchError    a stored ledger that does not fit its conversation    core/store/errors.py
    ├── ConversationBusyError  a conversation another turn is writing (a RuntimeFailure)  core/store/errors.py
    └── StoreError             the store                                             core/store/errors.py
        ├── NotFoundError      no row with that id (a RuntimeFailure)                core/store/errors.py
        ├── StoreUnavailableError  the database cannot be opened (a RuntimeFailure)  core/store/errors.py
        ├── ImportCheckError   a value an import would store                         core/store/errors.py
        ├── NoFeedbackError    a rating revoked where none was given                 core/store/errors.py
        ├── BundleError        a MemLens conversation export                         core/io/errors.py
        ├── SessionChangedError  the flow changed under a conversation               core/service/errors.py
        └── ReplayError        a conversation that cannot be replayed from turn 1    core/service/errors.py

``core.api.errors.ApiError`` is not part of it: it is an HTTP answer in Dify's error shape, made
from a ``MemLensError`` at the API's edge. Nor are two signals that never leave their package:
``core.flow.errors.NodeFailed``, a node runner's sign that its node failed, which the runtime records
on the node's run, and ``core.io.errors.TooManyProblems``, which stops an all-or-nothing import once
it cannot succeed.

Where each rule lives:

* Which failures are the input's (the CLI exits 2) and which are not (`RuntimeFailure`: not found, a network,
  a database, a model; exit 1): `core/errors.py`; the exit statuses in `core/cli/main.py`.
* The exceptions (one tree under `MemLensError`; every package's own classes in its `errors.py`:
  `core/memory`, `core/flow`, `core/llm`, `core/analysis`, `core/io`, `core/api`, `core/store`,
  `core/service`, `core/report`, `core/cli`; `core/model` raises none of its own): `core/errors.py` (the base
  and the documented tree, in its docstring), `core/<package>/errors.py`; `tests/test_error_tree.py` walks the
  tree.
"""


class MemLensError(ValueError):
    """Bad input: the message names the problem and, where it helps, the way forward."""


class RuntimeFailure(MemLensError):
    """The input was well formed, but what it names is not there or what it needs failed: an id the
    store does not hold, a network, database server or model that does not answer as asked. The CLI
    exits with status 1 for these (2 for the rest of the tree). Raised through its subclasses, each
    also under its package's own base (``class NotFoundError(StoreError, RuntimeFailure)``)."""
