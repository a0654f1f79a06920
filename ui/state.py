"""Every ``st.session_state`` key the app uses, named once.

A page writes only its own keys: the widget keys under its prefix (:func:`key`) and the keys
below that it owns. To hand something to another page it sets a hand-off key, which that page
reads and clears (``pop``) before drawing its widgets — so no page writes another page's widgets.
"""

from __future__ import annotations

from typing import Callable

# -- widget-key prefixes, one per page (a widget's key is ``key(prefix, name)``) ----------------------
COMPARE = "cmp"
PRESENT = "pre"
IMPORT = "imp"
LEDGER = "ledger"
MEMORIES = "mem"


def key(prefix: str, name: str) -> str:
    """A widget's key on the page (or component) with this prefix: ``cmp_turn``."""
    return f"{prefix}_{name}"


def keys_of(prefix: str) -> Callable[[str], str]:
    """:func:`key` for one page: ``page_key = keys_of(LEDGER)``, then ``page_key("turn")``."""
    return lambda name: key(prefix, name)


# -- the debugger (pages/debugger.py and the replay view of an imported conversation) -----------------
CONVERSATION = "conv_id"  # the open conversation's id (the sidebar's selectbox)
CONVERSATION_SOURCE = "conv_source"  # the sidebar's source filter
SELECTED_TURN = "selected_turn"  # the inspected turn's id
NEW_FLOW, NEW_NAME, NEW_START = "new_flow", "new_name", "new_start"  # the "New conversation" popover
# … and its upload of the user's own flow: ``f"{NEW_FLOW_FILE}-{n}"``, n = NEW_FLOW_FILE_ROUND, counted up
# once a conversation has started from it, so the next Start does not import that file again.
NEW_FLOW_FILE, NEW_FLOW_FILE_ROUND = "new_flow_file", "new_flow_file_round"
# … whether Start uses a stored flow or the user's file (Start waits for the file to arrive), and the
# stored flow to show picked on the next run (the file's flow once it was imported).
NEW_SOURCE, NEW_PICK = "new_source", "new_pick"
NEW_POPOVER = "new_popover"  # … and whether it is open
NEW_INPUTS = "new_inputs"  # … and its start form's fields: ``f"{NEW_INPUTS}-{variable}"``
TO_COMPARE, TO_PRESENT = "to_compare", "to_present"  # open the open conversation on Compare / Present
CONVERSATION_ONLY = "conversation_only"  # hide every debugging detail
CONTINUE_LATEST = "continue_latest"
RENAME_GO, DELETE_CONFIRM, DELETE_GO = "rename_go", "delete_confirm", "delete_go"
MODEL_CHOICE, MODEL_OTHER = "model_choice", "model_other"  # the model for new turns
NODE_FILTER = "node_filter"  # whose memory the markers show
SIDE = "ml-side"  # the receipt column (ui/html.py's CSS makes it sticky)
TRANSCRIPT = "ml-transcript"  # the transcript box (scrolled to the inspected turn)
INSPECTOR_TAB = "inspector_tab"  # the inspector's open tab, by its label: only that one is drawn
FIX = "fix"  # per conversation: the switchboard's actions (re-run, replay from turn 1, keep): ui/fix_path.py
CHAT_INPUT = "chat_input"
WORKSPACE_RUNS = "workspace_runs"  # how many times this session drew the transcript and inspector (ui/data.py)
# Kept per conversation (``of_conversation(NAME, id)``): its name being edited, the "where did it go?"
# box, how many turns the transcript shows, the transcript, the recall preview, the variables panel,
# the switchboard (per conversation and inspected turn: ``of_conversation(SWITCHBOARD, id) + f"-{turn}"``;
# ``of_conversation(SWITCHBOARD, id)`` itself holds the turn whose settings its widgets were loaded with).
RENAME, WHY, SHOWN, TRANSCRIPT_TURNS, RECALL, VARIABLES, SWITCHBOARD = (
    "rename",
    "why",
    "shown",
    "tx",
    "recall",
    "vars",
    "sb",
)


# One imported conversation's replay view keeps these per conversation: ``of_conversation(NAME, id)``.
RESCORE_FLOW = "rescore"  # the flow its answers are re-scored with
ATTACH_FLOW = "attach-flow"  # the flow version just attached to it


def of_conversation(name: str, conversation_id: str) -> str:
    """A key kept per conversation, so opening another one starts afresh."""
    return f"{name}-{conversation_id}"


# -- what the Debugger shows, for every page: (conversation id, inspected turn id) or None (ui/links.py) ------
DEBUGGED = "debugged"

# -- hand-offs between pages: set by one page, read and cleared by the page named -----------------------
OPEN_IN_DEBUGGER = "open_conversation"  # a conversation id the Debugger opens, whatever its source filter
OPEN_IN_COMPARE = "open_in_compare"  # a stored conversation id Compare opens
OPEN_IN_PRESENT = "open_in_present"  # a stored conversation id Present opens
COMPARE_CONFIGS = "compare_configs_current"  # Compare's configs as last shown (dicts), Present's default

# -- flashes: a message shown once after a rerun ---------------------------------------------------------
MEMORIES_FLASH = key(MEMORIES, "flash")


def flash(component_key: str) -> str:
    """A component's one-time message (the variables panel)."""
    return f"{component_key}-flash"


def result(component_key: str) -> str:
    """A form's last outcome, shown until the next submit (import, pull)."""
    return f"{component_key}_result"
