"""Dify's TokenBufferMemory as the Chatflow LLM node uses it, in two profiles.

``fidelity="code"`` — **Dify 1.x as shipped, the default** — follows Dify's source, rule by rule:

* Window rows (``api/core/memory/token_buffer_memory.py``, ``get_history_prompt_messages``): the
  newest ``min(size, 500)`` message rows of the *whole conversation*, ordered by creation time,
  are fetched in SQL *before* the thread is extracted; a size that is unset, 0 or negative
  means 500 and a size over 500 is capped at 500 (:func:`row_limit`). Rows of other branches
  (regenerated siblings) therefore use up window slots.
* The placeholder row (same function, the "in-progress" skip): the current turn's own row —
  answer still empty, 0 answer tokens — is the newest of those rows and is dropped after the
  thread walk, so a window of N sends at most N−1 earlier turns and a window of 1 sends none.
* Thread extraction (``api/core/prompt/utils/extract_thread_messages.py``) is the conversation
  tree's own walk (:mod:`core.model.conversation`), shared by both profiles.
* Token counting (``api/configs/feature``: ``PLUGIN_BASED_TOKEN_COUNTING_ENABLED``, default
  false; ``api/core/plugin/impl/model_runtime.py``): with the switch off the count is 0, so the
  pruning loop never runs and history is bounded by the rows alone.
* Budget with counting on (graphon ``nodes/llm/llm_utils.py``, ``calculate_rest_token``):
  ``rest = max(context_size − max_tokens − count([]), 0)``; the node passes an empty list, whose
  count is the list's +3 reply priming (OpenAI's recipe, which Dify's OpenAI plugin counts
  with); 2,000 when the model has no context size. The Question Classifier and the Parameter
  Extractor count their own prompt instead: ``rest = max(context_size − max_tokens − count(prompt
  without history) − reserve, 0)``, the reserve 0 and 1,000 (``MemoryConfig.prompt_reserve``).
  The plugin Agent node (``api/core/workflow/nodes/agent/runtime_support.py``) passes no limit, so
  its memory keeps Dify's default of 2,000 whatever the context (``MemoryConfig.history_budget``).
  A basic Chatbot (``api/core/prompt/simple_prompt_transform.py``, ``prompt_transform.py``) counts
  the prompt built before its history — its system message, or its expert-mode messages, as a
  list — and adds the query after (``MemoryConfig.query_after_budget`` with a reserve of 0; the
  replay leaves the query out).
* Pruning (``token_buffer_memory.py``): while the count of the *whole history list* — its
  messages plus the list's +3 — is over ``rest`` and more than one message is left, drop the
  single oldest message and recount; the last message stays even if it alone is over.
  Empty answers (failed turns) are counted here and only removed afterwards by the node's
  empty-message filter (graphon ``llm_utils``, the prompt filter).

``fidelity="documented"`` follows Dify's docs: the window holds the last N turns of the thread,
and the history is always pruned to fit ``rest = max(context_size − max_tokens − prompt, 0)``
(2,000 when the context size is unknown), the prompt being the system prompt, template and query;
a node that passes its memory no limit (``history_budget``) is pruned to that fixed budget.
"""

from __future__ import annotations

from core.limits import DIFY_ROW_CAP as ROW_CAP
from core.limits import MAX_DIFY_WINDOW
from core.model.ledger import OUTSIDE_WINDOW
from core.model.tokens import DEFAULT_HISTORY_BUDGET, REPLY_PRIMING

from ..errors import ConfigError
from .base import Budget, Strategy, window_sizes
from .settings import BOOL, CHANGES, CHOICE, SWITCHED, TEXT, TOGGLE, Setting, Widget

CODE = "code"
DOCUMENTED = "documented"
#: Dify's memory, as its 1.x code runs it (the default) or as its docs describe it.
FIDELITIES = (CODE, DOCUMENTED)
DEFAULT_FIDELITY = CODE
FIDELITY_LABELS = {CODE: "Dify 1.x as shipped", DOCUMENTED: "as Dify's docs describe"}
#: Dify's count of an empty prompt-message list: the reply priming alone.
EMPTY_LIST_TOKENS = REPLY_PRIMING
#: The window the editor offers when one is switched on.
WINDOW_SHOWN = 3


def row_limit(window: int | None) -> int:
    """How many message rows (code) or turns (documented) a window fetches: unset, 0 or
    negative → 500; above 500 → 500."""
    if window is None or window <= 0:
        return ROW_CAP
    return min(window, ROW_CAP)


def window_note(window: int | None) -> str:
    """What a window size the user set turns into, when Dify does not take it as it is."""
    if window is not None and window > ROW_CAP:
        return f"window {window:,} runs as {ROW_CAP}: Dify caps the rows it fetches at {ROW_CAP}"
    if window is not None and window < 0:
        return f"window {window} runs as {ROW_CAP}: Dify reads a size of 0 or less as no limit ({ROW_CAP} rows)"
    return ""


def counts_tokens(config) -> bool:
    """Whether this config prunes by tokens at all."""
    return config.settings.fidelity != CODE or config.settings.plugin_token_counting


#: The widget of :data:`PLUGIN_TOKEN_COUNTING`, which the Agent app's setting adapts.
PLUGIN_TOKEN_COUNTING_WIDGET = Widget(
    TOGGLE,
    "Plugin token counting",
    key="counting",
    enabled_if=("fidelity", CODE),
    help="Dify's PLUGIN_BASED_TOKEN_COUNTING_ENABLED (off as shipped). On: prune the oldest message while "
    "the history is over context size − max_tokens − 3.",
)
#: Dify's PLUGIN_BASED_TOKEN_COUNTING_ENABLED, a setting of Dify's memories (this one, the Agent app's, whose
#: widget says what it does there): counted only as shipped (``fidelity`` code), the documented rules
#: always count.
PLUGIN_TOKEN_COUNTING = Setting(
    "plugin_token_counting",
    False,
    "Dify's PLUGIN_BASED_TOKEN_COUNTING_ENABLED (off by default, as Dify ships it): "
    "with it on, history is pruned by tokens",
    kind=BOOL,
    flag="--plugin-token-counting",
    widget=PLUGIN_TOKEN_COUNTING_WIDGET,
)


class DifyStrategy(Strategy):
    name = "dify"
    help = "Dify's LLM-node memory (window in turns + token budget)"
    settings = (
        Setting(
            "window",
            None,
            f"the window in turns (unset: no window, Dify's {ROW_CAP}-turn cap; 0 or less is "
            f"what Dify also reads as no limit)",
            optional=True,
            flag="--window",
            flag_minimum=0,
            widget=Widget(
                SWITCHED,
                "Window (turns)",
                key=("window_on", "window_turns"),
                minimum=0,
                maximum=ROW_CAP,
                unset_value=WINDOW_SHOWN,
                second_label="Window",
                help=f"Off: no window (Dify's {ROW_CAP}-turn cap); 0 is what Dify also reads as no limit",
            ),
        ),
        Setting(
            "fidelity",
            DEFAULT_FIDELITY,
            "Dify's memory rules: code = Dify 1.x as shipped (default); documented = as Dify's docs describe",
            kind=TEXT,
            choices=FIDELITIES,
            labels=FIDELITY_LABELS,
            expected=" or ".join(f"{f} ({FIDELITY_LABELS[f]})" for f in FIDELITIES),
            flag="--fidelity",
            widget=Widget(
                CHOICE,
                "Dify memory rules",
                key="fidelity",
                help="Dify 1.x as shipped: what Dify's code runs (N gives N−1 earlier turns; no token "
                "pruning unless plugin token counting is on). As Dify's docs describe: N earlier "
                "turns, always pruned by tokens.",
            ),
        ),
        PLUGIN_TOKEN_COUNTING,
        Setting(
            "window_changes",
            (),
            "later changes of the window, as TURN:N pairs (from turn TURN the window is "
            "N): read by the findings (a window of 0 from then on is no limit); the replay runs the window",
            kind=CHANGES,
            flag="--window-change",
        ),
    )
    lenses = (
        ("Dify as shipped (code)", {"fidelity": CODE}),
        ("Dify as documented", {"fidelity": DOCUMENTED}),
        ("Dify, window 10 turns", {"window": 10}),
    )
    follows_dify_profile = True
    has_profiles = True

    def label(self, config):
        s = config.settings
        w = f"window {s.window}" if s.window else "no window"
        out = f"dify {w}" + (" (docs)" if s.fidelity == DOCUMENTED else "")
        if s.fidelity == CODE and s.plugin_token_counting:
            out += " + token counting"
        return out

    def describe(self, config):
        fidelity = config.get("fidelity") or DEFAULT_FIDELITY
        out = FIDELITY_LABELS.get(fidelity, fidelity)
        if fidelity == CODE:
            out += " · plugin token counting " + ("on" if config.get("plugin_token_counting") else "off")
        note = window_note(config.get("window"))
        return out + (f" · {note}" if note else "")

    def explain(self, entry, config):
        if entry.reason != OUTSIDE_WINDOW:
            return None
        window = config.get("window")
        code = config.get("fidelity", CODE) == CODE
        if not window or window < 0 or window > ROW_CAP:
            return f"outside Dify's {ROW_CAP}-row cap" if code else f"outside Dify's {ROW_CAP}-turn cap"
        if code:
            return f"outside window of {window} rows: the conversation's newest on any branch, the current turn's one of them"
        return f"outside window of {window} turns"

    def short_words(self, reason, config):
        if reason != OUTSIDE_WINDOW:
            return None
        window = config.get("window")
        if not window or window < 0 or window > ROW_CAP:
            return f"past Dify's {ROW_CAP}-{'row' if config.get('fidelity', CODE) == CODE else 'turn'} cap"
        return f"outside window of {window}" + ("" if config.get("fidelity", CODE) == CODE else " turns")

    def pruning_words(self, config):
        if config.get("history_budget") is not None:
            return (
                f"Dify pops the oldest message while the history is over its budget (with plugin token counting "
                f"on: a fixed {config['history_budget']:,} tokens, the memory's default, since the node passes "
                f"it no limit — whatever the model's context) and nothing in the run says so. Narrow the window "
                f"so what is dropped is a choice.",
                True,
            )
        prompt = "the prompt before the history" if config.get("query_after_budget") else "the prompt"
        reserve = config.get("prompt_reserve")
        shipped = (
            f"− 3; as its docs describe: − {prompt}"
            if reserve is None
            else f"− {prompt}" + (f" − {reserve:,}" if reserve else "")
        )
        return (
            f"Dify pops the oldest message while the history is over its budget (Dify 1.x, with plugin token "
            f"counting on: context size − max_tokens {shipped}) and nothing in the run says so. Raise the "
            f"context size or lower max_tokens, or narrow the window so what is dropped is a choice.",
            True,
        )

    def finding_kinds(self, config):
        return ("window_zero", "docs_vs_code")

    def profiles(self, config):
        return config.with_(fidelity=CODE), config.with_(fidelity=DOCUMENTED)

    def later_turns_take_rows(self, config):
        return config.settings.fidelity == CODE

    def validate(self, config):
        for n in window_sizes(config.settings):
            if not -MAX_DIFY_WINDOW <= n <= MAX_DIFY_WINDOW:
                raise ConfigError(
                    f"window {n} is out of range: Dify windows are 1..{ROW_CAP} turns (larger ones "
                    f"run as {ROW_CAP}, 0 or less means no limit); give at most {MAX_DIFY_WINDOW:,}"
                )

    def window(self, view, current, config):
        size = row_limit(config.settings.window)
        if config.settings.fidelity == CODE:
            # Rows newest-first, limited in SQL before the thread walk; the current turn's placeholder
            # is the newest row and takes one slot: the oldest row fetched is current − size + 1, and
            # the window starts at the thread's first turn from there (other branches took the rest).
            first = view.first_turn_from(current - size + 1)
        else:
            first = view.maximum(0, view.turn_count - size)  # the thread's last ``size`` turns
        return 0, view.turn_start(first)

    def reach(self, config):
        # Code: rows of positions current-size+1 .. current-1, so at most size-1 earlier turns of
        # the thread; documented: the thread's last size turns. The budget cuts inside the window.
        return row_limit(config.settings.window)

    def budget_limit(self, config, facts, fixed_prompt_tokens):
        if not counts_tokens(config):
            return None, 0
        code = config.settings.fidelity == CODE
        if config.history_budget is not None:  # the node gives its memory no limit: Dify's default
            return config.history_budget, EMPTY_LIST_TOKENS if code else 0
        context = config.context_size or facts.context_size
        if code:
            if not context:
                return DEFAULT_HISTORY_BUDGET, EMPTY_LIST_TOKENS
            prompt = EMPTY_LIST_TOKENS if config.prompt_reserve is None else fixed_prompt_tokens + config.prompt_reserve
            return max(context - config.max_tokens - prompt, 0), EMPTY_LIST_TOKENS
        if not context:
            return DEFAULT_HISTORY_BUDGET, 0
        return max(context - config.max_tokens - fixed_prompt_tokens, 0), 0

    def budget(self, config, facts, fixed_prompt_tokens):
        context = config.context_size or facts.context_size
        limit, overhead = self.budget_limit(config, facts, fixed_prompt_tokens)
        code = config.settings.fidelity == CODE
        if limit is None:
            return Budget(
                None, "plugin token counting is off (Dify ships it off), so history is never pruned by tokens", context
            )
        if config.history_budget is not None:
            how = f"; the history is compared with it counted as a list (+{overhead})" if overhead else ""
            return Budget(
                limit,
                f"{limit:,} tokens whatever the context: the node passes its memory no limit, so "
                f"Dify's default applies{how}",
                context,
                overhead,
            )
        if not context:
            how = " counted with the history list's own +3" if overhead else ""
            return Budget(
                limit,
                f"context size of {config.model} unknown: Dify's default budget of "
                f"{DEFAULT_HISTORY_BUDGET:,} tokens{how}",
                None,
                overhead,
            )
        if code and config.prompt_reserve is None:
            return Budget(
                limit,
                f"{context:,} context − {config.max_tokens:,} max_tokens − {EMPTY_LIST_TOKENS} "
                f"(Dify counts an empty list: the prompt is not subtracted); the history is "
                f"compared with it counted as a list (+{overhead})",
                context,
                overhead,
            )
        # A basic Chatbot's budget counts the prompt built before its history (its system message, or its
        # expert-mode messages); the query comes after.
        prompt = "prompt before the history (the query is added after it)" if config.query_after_budget else "prompt"
        if code:
            reserved = f" − {config.prompt_reserve:,} reserved" if config.prompt_reserve else ""
            return Budget(
                limit,
                f"{context:,} context − {config.max_tokens:,} max_tokens − {fixed_prompt_tokens:,} "
                f"{prompt}{reserved}; the history is compared with it counted as a list "
                f"(+{overhead})",
                context,
                overhead,
            )
        return Budget(
            limit, f"{context:,} context − {config.max_tokens:,} max_tokens − {fixed_prompt_tokens:,} {prompt}", context
        )
