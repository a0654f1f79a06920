"""Flows: the graph of nodes a chatflow runs, read from a MemLens flow file or a Dify DSL export.

Two input formats, detected from the top-level keys:

* **Dify DSL** (``app`` + ``workflow``; spec/dify-memory.md §5) — an export of a Chatflow
  (``advanced-chat``) or Workflow app, any DSL version up to 0.6.0. A missing version reads as
  0.1.0, as Dify does. Note nodes (``custom-note``) are dropped; nodes inside an iteration or loop
  are kept but never run (the container is not emulated).
* **MemLens flow** (``format: memlens-flow``) — the same graph written by hand, compactly::

      format: memlens-flow
      version: 1
      name: support-bot
      variables:
        - {name: turns, type: number, default: 0}
      nodes:
        - {id: start, type: start}
        - id: llm
          type: llm
          model: memlens/demo          # or Dify's {provider, name, mode, completion_params}
          max_tokens: 256              # → completion_params.max_tokens
          prompt_template:
            - {role: system, text: "You are a helpful assistant."}
          memory: {window: 3}          # window of 3 turns; `memory: off` or no key = memory off
        - {id: answer, type: answer, answer: "{{#llm.text#}}"}
      edges:
        - [start, llm]
        - [llm, answer]
        - {source: check, target: other, handle: "false"}

  Apart from those shorthands a node's keys are Dify's node ``data`` keys, so anything a Dify
  export can say, a MemLens flow can say too.

A :class:`Flow` serialises to one canonical dict (:meth:`Flow.to_dict`, the MemLens format with
the shorthands expanded), which reads back to an equal flow. :meth:`Flow.structure` is the
structural part — node ids, types and order, edges, variable names and types — as opposed to the
values (prompts, windows, memory on/off, defaults), so a store can tell a value-only edit from a
structural change (:func:`classify_change`).

Node types MemLens runs (the table in core/flow/node_types.py, which also reads each node's settings when
a flow is read): ``start``, ``llm``, ``question-classifier``, ``parameter-extractor``, ``answer``,
``assigner`` (v1 and v2), ``if-else``, ``variable-aggregator``, ``template-transform`` and ``end``, and
MemLens's own ``memory-retrieve`` / ``memory-store`` (long-term memory, core/flow/nodes/long_term.py),
``window-memory`` (core/flow/nodes/window_memory.py) and ``tool-agent`` (core/flow/nodes/tool_agent.py; Dify's
plugin-based ``agent`` node is not it). Every other type loads, runs as a pass-through with empty outputs and is
reported as not emulated (:func:`core.flow.imported.import_report`). A MemLens flow may also say
``history: {granularity: query_answer | all_messages}``: how agent nodes replay earlier turns unless a request
says otherwise.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from core.limits import read_bytes
from core.model.tokens import DEMO_MODEL

from .agent_chat import AGENT_CHAT, read_agent_chat
from .basic_chat import BASIC_CHAT, read_basic_chat
from .errors import FlowError, VariableError
from .node_types import NODE_TYPES, NodeType, read_settings
from .nodes.llm import LLMSettings, llm_settings
from .paths import check_paths
from .variables import ConversationVariable

FLOW_FORMAT = "memlens-flow"
FLOW_FORMAT_VERSION = 1

# Dify's DSL export writes a ``secret`` environment variable with an empty value (Workflow.to_dict
# without include_secret). MemLens does the same the moment a flow is read, so a secret's value
# never reaches the store, an export, a run's output, a page or a log: nodes reading it get "".
SECRET_VALUE = ""
SECRET_WARNING = (
    "secret environment variable(s) {names}: the value is not kept, as Dify's DSL export leaves it "
    "empty; nodes reading it get an empty string"
)


def without_secrets(environment: Mapping[str, Any], secrets: Sequence[str]) -> dict[str, Any]:
    """``environment`` with every secret's value replaced by :data:`SECRET_VALUE`."""
    return {**environment, **{name: SECRET_VALUE for name in secrets}}


#: The newest Dify DSL version MemLens reads (api/constants/dsl_version.py at the spec's snapshot).
DSL_VERSION = "0.6.0"
MODES = ("advanced-chat", "workflow")
#: Dify's UI default for the memory query template (web/.../memory-config.tsx).
DEFAULT_QUERY_TEMPLATE = "{{#sys.query#}}"


# -- the graph --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    """One node: its id, type, title and Dify ``data`` (kept whole, so nothing is lost on export)."""

    id: str
    type: str
    title: str = ""
    data: dict = field(default_factory=dict, hash=False)
    container: str | None = None  # the iteration/loop node that holds this node, if any

    @property
    def emulated(self) -> bool:
        return self.type in NODE_TYPES

    @property
    def kind(self) -> NodeType | None:
        """The node's type in the registry (:data:`core.flow.node_types.NODE_TYPES`); ``None``: not run."""
        return NODE_TYPES.get(self.type)

    @property
    def label(self) -> str:
        return self.title or self.id

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"id": self.id, "type": self.type}
        if self.title:
            out["title"] = self.title
        if self.container:
            out["container"] = self.container
        for key, value in self.data.items():
            if key not in ("type", "title"):
                out[key] = copy.deepcopy(value)
        return out


def node_names(nodes) -> dict[str, str]:
    """Node id → the node's name for people: its title with runs of spaces made one, or its id when it has
    none; a title that reads the same as another node's (``"LLM"`` and ``"LLM "``, case aside) is followed by
    the id — ``"LLM (1711528915811)"`` — so two nodes are never named alike (the Debugger's tabs and
    markers, "where did it go?", ``python -m core run``)."""
    shown = {n.id: " ".join((n.title or "").split()) or n.id for n in nodes}
    counts: dict[str, int] = {}
    for name in shown.values():
        counts[name.casefold()] = counts.get(name.casefold(), 0) + 1
    return {
        nid: f"{name} ({nid})" if counts[name.casefold()] > 1 and name != nid else name for nid, name in shown.items()
    }


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    handle: str = "source"  # Dify's sourceHandle: "source", an if-else case id, or "false" (else)

    def to_dict(self) -> dict:
        out = {"source": self.source, "target": self.target}
        if self.handle != "source":
            out["handle"] = self.handle
        return out


# -- the flow ---------------------------------------------------------------------------------------


@dataclass
class Flow:
    """A chatflow: nodes in file order, edges, conversation variables, environment variables."""

    name: str
    nodes: list[Node]
    edges: list[Edge]
    variables: list[ConversationVariable] = field(default_factory=list)
    mode: str = "advanced-chat"
    description: str = ""
    environment: dict[str, Any] = field(default_factory=dict)
    source: dict[str, Any] = field(default_factory=dict)  # {format, dsl_version, file}
    warnings: list[str] = field(default_factory=list)
    history: dict[str, Any] = field(default_factory=dict)  # {granularity}: agent nodes' replay of earlier turns
    #: The app's features as Dify exports them (opening statement, suggested questions, file upload…);
    #: served as-is by ``GET /v1/parameters``, never run.
    features: dict[str, Any] = field(default_factory=dict)
    # Names of ``secret`` environment variables. Their values are never kept (see ``without_secrets``).
    secrets: list[str] = field(default_factory=list)

    @property
    def file_upload(self) -> bool:
        """Whether the app's file upload feature is on: history messages then carry their files (§1.5)."""
        upload = self.features.get("file_upload")
        return isinstance(upload, Mapping) and upload.get("enabled") is True

    def __post_init__(self) -> None:
        self._by_id = {n.id: n for n in self.nodes}
        self.environment = without_secrets(self.environment, self.secrets)

    # -- lookup
    def node(self, node_id: str) -> Node:
        try:
            return self._by_id[node_id]
        except KeyError:
            raise FlowError(
                f"flow {self.name!r} has no node {node_id!r}; its nodes are {', '.join(n.id for n in self.nodes)}"
            ) from None

    def has_node(self, node_id: str) -> bool:
        return node_id in self._by_id

    @property
    def start(self) -> Node:
        """The root: the first start-type node (Dify's rule)."""
        for n in self.nodes:
            if n.type == "start" and not n.container:
                return n
        raise FlowError(f"flow {self.name!r} has no start node")

    @property
    def start_fields(self) -> list[dict]:
        """The start form's fields, in order: each of the start node's variables that names one (what
        a run checks, the API's ``user_input_form`` lists and the Debugger's start form offers)."""
        return [v for v in self.start.data.get("variables") or () if isinstance(v, dict) and v.get("variable")]

    @property
    def node_names(self) -> dict[str, str]:
        """Each node's name for people (:func:`node_names`): its title, with its id when another node's
        title reads the same."""
        return node_names(self.nodes)

    @property
    def llm_nodes(self) -> list[Node]:
        return [n for n in self.nodes if n.type == "llm"]

    @property
    def model_nodes(self) -> list[Node]:
        """The nodes that call a model with Dify's conversation memory, each run recording its ledger
        and prompt: LLM, Question Classifier, Parameter Extractor and Dify Agent nodes."""
        return [n for n in self.nodes if n.type in NODE_TYPES and NODE_TYPES[n.type].dify_memory]

    @property
    def memory_nodes(self) -> list[Node]:
        """The nodes whose memory a what-if can switch, one by one: LLM, Question Classifier, Parameter
        Extractor and agent nodes."""
        return [n for n in self.nodes if n.type in NODE_TYPES and NODE_TYPES[n.type].memory]

    def settings(self, node_id: str) -> Any:
        """A node's settings as its type's reader gives them (``None`` for a type with nothing to read)."""
        kind = self.node(node_id).kind
        return kind.read(self.node(node_id)) if kind is not None and kind.read is not None else None

    def llm(self, node_id: str) -> LLMSettings:
        node = self.node(node_id)
        if node.type != "llm":
            raise FlowError(f"node {node_id!r} is a {node.type} node, not an LLM node")
        return llm_settings(node)

    def outgoing(self, node_id: str) -> list[Edge]:
        return [e for e in self.edges if e.source == node_id]

    @property
    def is_chat(self) -> bool:
        return self.mode == "advanced-chat"

    @property
    def app_mode(self) -> str:
        """The Dify app mode the flow came from: ``chat`` for a basic Chatbot (run as a Chatflow), else its mode."""
        return self.source.get("app_mode") or self.mode

    # -- serialisation
    def to_dict(self) -> dict:
        out: dict[str, Any] = {
            "format": FLOW_FORMAT,
            "version": FLOW_FORMAT_VERSION,
            "name": self.name,
            "mode": self.mode,
        }
        if self.description:
            out["description"] = self.description
        out["variables"] = [v.to_dict() for v in self.variables]
        if self.environment:
            out["environment"] = copy.deepcopy(self.environment)
        if self.secrets:
            out["secrets"] = list(self.secrets)
        if self.history:
            out["history"] = copy.deepcopy(self.history)
        if self.features:
            out["features"] = copy.deepcopy(self.features)
        out["nodes"] = [n.to_dict() for n in self.nodes]
        out["edges"] = [e.to_dict() for e in self.edges]
        if self.source:
            out["source"] = copy.deepcopy(self.source)
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, name: str = "flow", stored: bool = False) -> "Flow":
        """The flow :meth:`to_dict` wrote. ``stored``: a flow read back from the store, whose graph was
        checked when it was imported (one stored before that check still opens, to show its turns)."""
        return _read_memlens(data, name, checked=not stored)

    def to_yaml(self) -> str:
        import yaml

        return yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True, width=100)

    # -- signatures
    def structure(self) -> dict:
        """What a conversation's record depends on: node ids/types/order, edges, variable names/types."""
        return {
            "mode": self.mode,
            "nodes": [[n.id, n.type, n.container] for n in self.nodes],
            "edges": [[e.source, e.handle, e.target] for e in self.edges],
            "variables": [[v.name, v.type] for v in self.variables],
        }

    def structural_signature(self) -> str:
        return _digest(self.structure())

    def content_signature(self) -> str:
        """Changes with any value too (prompts, windows, memory on/off, defaults, titles)."""
        doc = self.to_dict()
        doc.pop("source", None)
        doc.pop("warnings", None)
        return _digest(doc)


def _digest(doc: Any) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


def classify_change(old: Flow, new: Flow) -> str:
    """``"same"``, ``"values"`` (prompts, windows, memory… changed; the graph did not) or ``"structure"``."""
    if old.structural_signature() != new.structural_signature():
        return "structure"
    return "same" if old.content_signature() == new.content_signature() else "values"


# -- reading ----------------------------------------------------------------------------------------

_A_FLOW_FILE = "a flow file (MemLens flow or Dify DSL YAML)"


def load_flow(path: str | Path) -> Flow:
    """Read a MemLens flow file or a Dify DSL export (YAML or JSON)."""
    path = Path(path)
    data = read_bytes(path, FlowError, _A_FLOW_FILE, lambda size: _check_size(size, path.name))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise FlowError(f"{path} is not UTF-8 text; expected {_A_FLOW_FILE}") from None
    flow = parse_flow(text, name=path.name)
    flow.source["file"] = path.name
    return flow


def parse_flow_upload(data: bytes, name: str) -> Flow:
    """A flow from an uploaded file's bytes: size-checked and UTF-8, else one clear :class:`FlowError`."""
    _check_size(len(data), name)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise FlowError(f"{name} is not UTF-8 text; expected {_A_FLOW_FILE}") from None
    flow = parse_flow(text, name=name)
    flow.source["file"] = name
    return flow


def _check_size(size: int, name: str) -> None:
    from core.limits import LimitError, check_flow_size

    try:
        check_flow_size(size, name)
    except LimitError as e:
        raise FlowError(str(e)) from None


def parse_flow(text: str, name: str = "flow") -> Flow:
    import yaml

    from core.limits import NUMBER_TOO_LONG, LimitError, check_value, load_yaml

    try:
        data = load_yaml(text, name)
        check_value(data, name, finite=False)  # its text: no lone surrogate or NUL ("\ud800" in YAML)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or "invalid YAML"
        raise FlowError(f"{name} is not valid YAML{where}: {problem}") from None
    except LimitError as e:
        raise FlowError(str(e)) from None
    except ValueError:  # a whole number past Python's digit limit
        raise FlowError(f"{name} {NUMBER_TOO_LONG}") from None
    return flow_from_data(data, name)


def flow_from_data(data: Any, name: str = "flow") -> Flow:
    if not isinstance(data, Mapping):
        raise FlowError(
            f"{name}: expected a mapping at the top level (a Dify DSL export or a MemLens flow), "
            f"not {type(data).__name__}"
        )
    if data.get("format") == FLOW_FORMAT:
        return _read_memlens(data, name)
    if "workflow" in data or "app" in data:
        return _read_dify(data, name)
    raise FlowError(
        f"{name} is neither a Dify DSL export (top-level 'app' and 'workflow') nor a MemLens flow "
        f"('format: {FLOW_FORMAT}')"
    )


_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


def _version_tuple(text: str) -> tuple[int, int, int] | None:
    m = _VERSION.match(text)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def _read_dify(data: Mapping[str, Any], name: str) -> Flow:
    warnings: list[str] = []
    raw_version = data.get("version")
    if raw_version is None:
        version = "0.1.0"
        warnings.append("no DSL version: read as 0.1.0, as Dify does")
    else:
        version = str(raw_version)
    parsed = _version_tuple(version)
    newest = _version_tuple(DSL_VERSION)
    if parsed is None:
        raise FlowError(f"{name}: unknown DSL version {version!r}; expected a version like {DSL_VERSION}")
    if parsed > newest:
        # Dify imports a newer export once the user confirms it (status pending): so does MemLens, saying so.
        warnings.append(
            f"DSL version {version} is newer than the newest MemLens reads ({DSL_VERSION}): read as "
            f"{DSL_VERSION}, so a field added since is not used; check the flow runs as in Dify"
        )
    elif parsed[0] < newest[0]:
        raise FlowError(f"{name}: DSL version {version} is from an older major version than {DSL_VERSION}")
    if parsed[:2] < newest[:2]:
        warnings.append(
            f"DSL version {version} is older than {DSL_VERSION}: read with Dify's defaults for newer fields"
        )
    kind = data.get("kind", "app")
    if kind != "app":
        raise FlowError(f"{name}: kind {kind!r} is not an app export; MemLens imports Dify app DSL (kind: app)")
    app = data.get("app")
    if not isinstance(app, Mapping) or not app.get("mode"):
        raise FlowError(f"{name}: 'app.mode' is required (advanced-chat for a Chatflow)")
    mode = app["mode"]
    if mode in (BASIC_CHAT, AGENT_CHAT):
        return _read_app(data, app, name, version, warnings)
    if mode not in MODES:
        raise FlowError(
            f"{name}: app mode {mode!r} is not a flow; MemLens runs advanced-chat (Chatflow), "
            f"workflow, basic Chatbot (chat) and Agent (agent-chat) apps: switch the app to workflow "
            f"orchestration in Dify (its menu) and export that"
        )
    if mode == "workflow":
        warnings.append("workflow mode: there is no conversation, so LLM memory blocks have no effect")
    workflow = data.get("workflow")
    if not isinstance(workflow, Mapping):
        raise FlowError(f"{name}: 'workflow' must be a mapping with a 'graph'")
    graph = workflow.get("graph")
    if not isinstance(graph, Mapping):
        raise FlowError(f"{name}: 'workflow.graph' must be a mapping with 'nodes' and 'edges'")
    nodes: list[Node] = []
    notes = 0
    for i, raw in enumerate(_listed(graph, "nodes", "workflow.graph", name), start=1):
        if not isinstance(raw, Mapping):
            raise FlowError(f"{name}: graph node {i} is not a mapping")
        if raw.get("type") == "custom-note":
            notes += 1
            continue
        node_data = raw.get("data")
        if not isinstance(node_data, Mapping):
            raise FlowError(f"{name}: graph node {raw.get('id', i)!r} has no 'data' mapping")
        container = raw.get("parentId") or node_data.get("iteration_id") or node_data.get("loop_id")
        if not container and (node_data.get("isInIteration") or node_data.get("isInLoop")):
            container = "?"
        nodes.append(_make_node(raw.get("id"), node_data, name, i, container))
    if notes:
        warnings.append(f"{notes} note node{'s' if notes != 1 else ''} ignored, as Dify ignores them")
    warnings.extend(filter(None, map(_memory_mode_note, nodes)))
    edges = [_edge_from(e, name, i) for i, e in enumerate(_listed(graph, "edges", "workflow.graph", name), start=1)]
    variables = [
        _variable(v, name, app.get("name") or name)
        for v in _listed(workflow, "conversation_variables", "workflow", name)
    ]
    environment, secrets = {}, []
    for env in _listed(workflow, "environment_variables", "workflow", name):
        if isinstance(env, Mapping) and env.get("name"):
            environment[str(env["name"])] = env.get("value")
            if env.get("value_type") == "secret":
                secrets.append(str(env["name"]))
    if secrets:
        warnings.append(SECRET_WARNING.format(names=", ".join(secrets)))
    return _finish(
        Flow(
            name=str(app.get("name") or name).strip() or name,
            nodes=nodes,
            edges=edges,
            variables=variables,
            mode=mode,
            description=str(app.get("description") or ""),
            environment=environment,
            secrets=secrets,
            source={"format": "dify-dsl", "dsl_version": version},
            warnings=warnings,
            features=_features(workflow.get("features"), name),
        ),
        name,
    )


def _listed(block: Mapping[str, Any], key: str, where: str, file: str) -> list:
    """A list the export keeps under ``where.key`` (absent or null: none); anything else is refused."""
    value = block.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise FlowError(f"{file}: '{where}.{key}' must be a list, not {type(value).__name__}")
    return value


#: The memory mode every LLM node had before Dify added node-level memory (``memory.mode``).
CONVERSATION_MEMORY = "conversation"


def _memory_mode_note(node: Node) -> str | None:
    """What the import says of a node whose ``memory.mode`` is not the conversation's: newer Dify lets an
    LLM node of a Chatflow remember its own earlier exchanges (``node``), which MemLens does not emulate."""
    memory = node.data.get("memory")
    mode = memory.get("mode") if isinstance(memory, Mapping) else None
    if mode is None or mode == CONVERSATION_MEMORY:
        return None
    what = (
        "Dify's node-level memory: the node's own earlier exchanges"
        if mode == "node"
        else "a memory mode MemLens does not know"
    )
    return (
        f"{node.type} node {node.title or node.id!r}: memory mode {str(mode)[:40]!r} ({what}) is not emulated: "
        f"MemLens sends the conversation's history, as mode {CONVERSATION_MEMORY!r} does"
    )


def _read_app(data: Mapping[str, Any], app: Mapping[str, Any], name: str, version: str, warnings: list[str]) -> Flow:
    """An app without a graph — a basic Chatbot or an Agent app — as the Chatflow Dify runs it
    (:mod:`core.flow.basic_chat`, :mod:`core.flow.agent_chat`)."""
    mode = app["mode"]
    parts = (read_basic_chat if mode == BASIC_CHAT else read_agent_chat)(data, name)
    nodes = [
        Node(id=node_id, type=node_data["type"], title=node_data["title"], data=node_data)
        for node_id, node_data in parts["nodes"].items()
    ]
    edges = [Edge(source, target) for source, target in parts["edges"]]
    # Run as a Chatflow (Flow's default mode); its app mode is kept in its source.
    return _finish(
        Flow(
            name=str(app.get("name") or name).strip() or name,
            nodes=nodes,
            edges=edges,
            description=str(app.get("description") or ""),
            source={"format": "dify-dsl", "dsl_version": version, "app_mode": mode},
            warnings=parts["warnings"] + warnings,
            features=parts["features"],
        ),
        name,
    )


def _variable(raw: Any, file: str, scope: str) -> ConversationVariable:
    try:
        return ConversationVariable.from_dict(raw, scope=scope)
    except VariableError as e:
        raise FlowError(f"{file}: {e}") from None


def _make_node(node_id: Any, data: Mapping[str, Any], file: str, index: int, container: Any = None) -> Node:
    if node_id is None or str(node_id) == "":
        raise FlowError(f"{file}: node {index} has no id")
    node_type = data.get("type")
    if not isinstance(node_type, str) or not node_type:
        raise FlowError(f"{file}: node {node_id!r} has no type")
    return Node(
        id=str(node_id),
        type=node_type,
        title=str(data.get("title") or ""),
        data=copy.deepcopy(dict(data)),
        container=str(container) if container else None,
    )


def _edge_from(raw: Any, file: str, index: int) -> Edge:
    if isinstance(raw, (list, tuple)):
        if len(raw) not in (2, 3):
            raise FlowError(f"{file}: edge {index} must be [source, target] or [source, target, handle]")
        return Edge(str(raw[0]), str(raw[1]), str(raw[2]) if len(raw) == 3 else "source")
    if not isinstance(raw, Mapping) or raw.get("source") is None or raw.get("target") is None:
        raise FlowError(f"{file}: edge {index} needs a 'source' and a 'target'")
    handle = raw.get("handle", raw.get("sourceHandle")) or "source"
    return Edge(str(raw["source"]), str(raw["target"]), str(handle))


def _expand_shorthands(node: dict) -> dict:
    """MemLens-flow shorthands → Dify node data (idempotent on data already in Dify's shape)."""
    data = dict(node)
    if data.get("type") == "llm":
        model = data.get("model")
        if isinstance(model, str) or model is None:
            provider, _, model_name = (model or DEMO_MODEL).rpartition("/")
            data["model"] = {"provider": provider, "name": model_name, "mode": "chat", "completion_params": {}}
        else:
            data["model"] = dict(model)
        if "max_tokens" in data:
            params = dict(data["model"].get("completion_params") or {})
            params["max_tokens"] = data.pop("max_tokens")
            data["model"]["completion_params"] = params
        if "prompt" in data and "prompt_template" not in data:
            data["prompt_template"] = data.pop("prompt")
        if isinstance(data.get("prompt_template"), str):
            data["prompt_template"] = {"text": data["prompt_template"]}
        memory = data.get("memory", None)
        if isinstance(memory, int) and not isinstance(memory, bool):
            data["memory"] = {
                "window": {"enabled": True, "size": memory},
                "query_prompt_template": DEFAULT_QUERY_TEMPLATE,
            }
        elif memory is True or memory == "on":
            data["memory"] = {"window": {"enabled": False, "size": 50}, "query_prompt_template": DEFAULT_QUERY_TEMPLATE}
        elif memory is None or memory is False or memory in ("off", "none"):
            data.pop("memory", None)
        elif isinstance(memory, Mapping):
            mem = dict(memory)
            if "query_template" in mem:
                mem["query_prompt_template"] = mem.pop("query_template")
            window = mem.get("window")
            shorthand = not isinstance(window, Mapping)
            if isinstance(window, int) and not isinstance(window, bool):
                mem["window"] = {"enabled": True, "size": window}
            elif window is None or window is False:
                mem["window"] = {"enabled": False, "size": 50}
            if shorthand and "query_prompt_template" not in mem:
                # Dify's UI default when memory is switched on; Dify-shaped blocks stay as written.
                mem["query_prompt_template"] = DEFAULT_QUERY_TEMPLATE
            data["memory"] = mem
    return data


def _read_memlens(data: Mapping[str, Any], name: str, checked: bool = True) -> Flow:
    version = data.get("version", FLOW_FORMAT_VERSION)
    if version != FLOW_FORMAT_VERSION:
        raise FlowError(
            f"{name}: unknown MemLens flow version {version!r}; this MemLens reads version {FLOW_FORMAT_VERSION}"
        )
    mode = data.get("mode", "advanced-chat")
    if mode not in MODES:
        raise FlowError(f"{name}: mode {mode!r} is unknown; expected advanced-chat or workflow")
    raw_nodes = data.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise FlowError(f"{name}: 'nodes' must be a non-empty list")
    nodes = []
    for i, raw in enumerate(raw_nodes, start=1):
        if not isinstance(raw, Mapping):
            raise FlowError(f"{name}: node {i} is not a mapping")
        body = {k: v for k, v in raw.items() if k not in ("id", "container")}
        nodes.append(_make_node(raw.get("id"), _expand_shorthands(body), name, i, raw.get("container")))
    edges = [_edge_from(e, name, i) for i, e in enumerate(data.get("edges") or [], start=1)]
    flow_name = str(data.get("name") or name)
    variables = [_variable(v, name, flow_name) for v in data.get("variables") or []]
    environment = data.get("environment") or {}
    if not isinstance(environment, Mapping):
        raise FlowError(f"{name}: 'environment' must be a mapping of names to values")
    secrets = data.get("secrets") or []
    if not isinstance(secrets, list) or not all(isinstance(s, str) and s for s in secrets):
        raise FlowError(f"{name}: 'secrets' must be a list of environment variable names")
    source = dict(data.get("source") or {"format": FLOW_FORMAT})
    history = data.get("history") or {}
    if not isinstance(history, Mapping) or set(history) - {"granularity"}:
        raise FlowError(f"{name}: 'history' must be {{granularity: query_answer | all_messages}}")
    if history.get("granularity") not in (None, "query_answer", "all_messages"):
        raise FlowError(
            f"{name}: history granularity {history.get('granularity')!r} is unknown; expected "
            "query_answer or all_messages"
        )
    return _finish(
        Flow(
            name=flow_name,
            nodes=nodes,
            edges=edges,
            variables=variables,
            mode=mode,
            description=str(data.get("description") or ""),
            environment=dict(environment),
            secrets=list(dict.fromkeys(secrets)),
            source=source,
            warnings=list(data.get("warnings") or []),
            history={k: v for k, v in history.items() if v is not None},
            features=_features(data.get("features"), name),
        ),
        name,
        checked,
    )


def _features(raw: Any, name: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise FlowError(f"{name}: 'features' must be a mapping (opening_statement, suggested_questions, …)")
    return copy.deepcopy(dict(raw))


def _finish(flow: Flow, file: str, checked: bool = True) -> Flow:
    """Checks shared by both formats: unique ids, a start node, well-formed emulated nodes, known edges and
    (``checked``: every flow read, except one already stored) paths every node is on, without a cycle."""
    seen: set[str] = set()
    for n in flow.nodes:
        if n.id in seen:
            raise FlowError(f"{file}: node id {n.id!r} is used twice")
        seen.add(n.id)
    names = [v.name for v in flow.variables]
    dupes = sorted({x for x in names if names.count(x) > 1})
    if dupes:
        raise FlowError(f"{file}: conversation variable {dupes[0]!r} is declared twice")
    try:
        flow.start
    except FlowError:
        trigger = next((n for n in flow.nodes if n.type.startswith("trigger-") and not n.container), None)
        if trigger is not None:  # Dify's triggers (a schedule, a webhook, a plugin event) start a run without a user
            raise FlowError(
                f"{file}: the flow starts from a {trigger.type} node, which MemLens does not run: it runs "
                "a flow from its Start node (a user's input); add one to try the flow here"
            ) from None
        raise FlowError(f"{file}: the flow has no start node; add a node of type 'start' as the root") from None
    for n in flow.nodes:
        try:
            read_settings(n)
        except FlowError as e:
            raise FlowError(f"{file}: {e}") from None
    kept = []
    dropped = 0
    for e in flow.edges:
        if e.source in seen and e.target in seen:
            kept.append(e)
        else:
            dropped += 1
    if dropped:
        note = f"{dropped} edge{'s' if dropped != 1 else ''} to or from unknown nodes ignored"
        if note not in flow.warnings:
            flow.warnings.append(note)
        flow.edges = kept
    if checked:
        check_paths(flow, file)
    return flow


__all__ = [
    "FLOW_FORMAT",
    "DSL_VERSION",
    "Node",
    "Edge",
    "Flow",
    "load_flow",
    "parse_flow",
    "flow_from_data",
    "classify_change",
]
