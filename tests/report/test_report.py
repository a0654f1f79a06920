"""The one-file report and its JSON bundle: the HTML parses, holds every turn and config, loads
nothing from elsewhere and escapes every text; the bundle loads back into the same view; uploads
are stored all-or-nothing; config sets are saved; the replies grid re-asks under each config."""

import json
import re
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from core.analysis.compare import NamedConfig, replay_replies
from core.analysis.source import Source, source_of
from core.errors import MemLensError
from core.io import FormatError, import_text
from core.llm.client import DemoClient
from core.memory.config import MemoryConfig
from core.memory.replay import Replay
from core.model.conversation import Conversation
from core.report.build import DEFAULT_CONFIGS, build_report
from core.report.bundle import bundle_json, conversation_from_json, conversation_to_json, read_report, report_bundle
from core.report.errors import ReportError
from core.report.html import REASON_COLOURS, report_html
from core.service.config_sets import CONFIG_SETS_KEY, delete_config_set, save_config_set, saved_config_sets
from core.service.imports import import_upload
from core.service.samples import load_sample
from core.service.sessions import ConversationService
from core.service.sources import read_source_file, read_sources
from core.service.transfer import export_conversation
from core.store import repo
from core.store.db import Database
from tests.builders import linear
from tests.conftest import FIXTURES, ROOT

T = FIXTURES / "transcripts"
HOSTILE = '<img src="http://example.invalid/x.png" onerror="alert(1)"> & <script>alert(2)</script>'


def lisbon() -> Conversation:
    return load_sample("lisbon-trip.json")[0]


class Page(HTMLParser):
    """Every start tag with its attributes, and the page's text; fails on unbalanced tags."""

    VOID = {"meta", "br", "rect", "line", "polyline", "circle", "img", "input", "link"}

    def __init__(self, text):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.stack: list[str] = []
        self.text: list[str] = []
        self.feed(text)
        self.close()

    figure = None  # the data-config of the figure being read
    row = None  # the turn of the heatmap row being read

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "figure":
            self.figure = attrs.get("data-config")
        if tag == "g" and "data-turn" in attrs:
            self.row = int(attrs["data-turn"])
        self.tags.append((tag, {**attrs, "_figure": self.figure, "_turn": self.row} if tag == "rect" else attrs))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if tag == "figure":
            self.figure = None
        if tag in self.VOID:
            return
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1] if self.stack else None}>"
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)

    def all(self, tag, **attrs):
        return [a for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in attrs.items())]


def report_of(conv, configs=DEFAULT_CONFIGS, **kwargs):
    return build_report(Source(conv, "test"), configs, **kwargs)


def test_the_html_report_parses_and_holds_every_turn_config_and_finding():
    report = report_of(lisbon(), replies=True)
    page = Page(report_html(report))
    assert page.stack == []
    ids = {a.get("id") for _, a in page.tags}
    assert {f"turn-{n}" for n in range(1, 13)} <= ids
    text = "".join(page.text)
    for turn in lisbon().turns:
        for m in turn.messages:
            assert m.content in text
    for label in ["dify window 3", "dify window 10", "window 6 msgs"]:
        assert page.all("figure", **{"data-config": label})
        assert page.all("details", **{"data-config": label})
    assert len(page.all("li")) >= len(report.findings) > 0
    assert all(f.text in text for f in report.findings)
    # Finding links jump to turns of the transcript.
    links = {a["href"] for a in page.all("a") if a.get("href", "").startswith("#turn-")}
    assert links and all(link[1:] in ids for link in links)


def test_the_report_loads_nothing_from_anywhere():
    conv = linear(4, answer=lambda i: HOSTILE if i == 2 else f"answer {i}")
    html = report_html(report_of(conv))
    page = Page(html)
    assert not any(t in ("script", "link", "iframe", "img", "object", "embed", "base") for t, _ in page.tags)
    for tag, attrs in page.tags:
        assert "src" not in attrs and "srcset" not in attrs
        assert attrs.get("href", "#").startswith("#"), (tag, attrs)
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)
    assert "url(" not in html and "@import" not in html and "http" not in html.replace("http://example.invalid", "")


def test_every_text_is_escaped():
    conv = linear(
        4,
        answer=lambda i: HOSTILE if i == 2 else f"answer {i}",
        query=lambda i: "<b>bold?</b>" if i == 3 else f"question {i}",
    )
    conv.system_prompt = "</style><script>alert(3)</script>"
    report = report_of(
        conv, [NamedConfig("<i>config</i>", MemoryConfig(window=1)), NamedConfig("two", MemoryConfig(window=2))]
    )
    html = report_html(report)
    assert "<script" not in html and "<img" not in html and "<b>bold" not in html and "<i>config" not in html
    assert "&lt;img src=&quot;http://example.invalid/x.png&quot;" in html
    assert "&lt;i&gt;config&lt;/i&gt;" in html
    assert "".join(Page(html).text).count(HOSTILE) >= 1  # shown as text


def test_heatmap_cells_in_the_report_are_the_ledgers():
    conv = lisbon()
    configs = [MemoryConfig(window=3), MemoryConfig(strategy="window", window=4)]
    report = report_of(conv, configs)
    page = Page(report_html(report))
    for named in report.configs:
        replay = Replay(conv, named.config)
        cells = {}
        for a in page.all("rect", _figure=named.label):
            if "data-reason" not in a:
                continue
            first, column = int(a["data-row"]), int(a["data-column"])
            for r in range(first, first + int(a["data-rows"])):
                for c in range(column, column + int(a["data-span"])):
                    assert (r, c) not in cells, "blocks overlap"
                    cells[(r, c)] = (a["data-reason"], a["fill"])
        expected = {}
        for r, p in enumerate(conv.answered_turns()):
            for c, e in enumerate(replay.ledger_at(p).entries):
                expected[(r, c)] = (e.reason, REASON_COLOURS[e.reason])
        assert cells == expected, named.label
    html = report_html(report)
    runs = re.findall(r"<title>(turns? 5(?:–\d+)?: \d+ messages of turns 1–[^<]*)</title>", html)
    assert runs and runs[0].endswith(
        "— outside window of 3 rows: the conversation&#x27;s newest on any branch, the current turn&#x27;s one of them"
    )  # the block's reason, once
    assert re.search(r"<title>turn 1 · user · \d+ tokens · Hi! I&#x27;m Dana", html)  # each message, once


def test_a_report_reads_the_same_whether_or_not_it_reuses_the_comparisons_replays():
    # Findings and ledgers reuse the comparison's replays (their counts and summaries); a
    # comparison without them (as from elsewhere) gives the very same report.
    from dataclasses import replace

    from core.analysis.findings import findings_for

    path = T / "dify-web__realWorldMessages.json"
    conv = read_sources(path.read_bytes(), path.name)[0].conversation  # with branches
    configs = [
        MemoryConfig(window=3),
        MemoryConfig(window=4, fidelity="documented", context_size=400),
        MemoryConfig(context_size=300, plugin_token_counting=True),
        MemoryConfig(strategy="window", window=4),
        MemoryConfig(strategy="trim", max_history_tokens=200),
    ]
    report = report_of(conv, configs, selected_turn=4)
    own = report.comparison.replays
    assert [r.config for r in own] == [c.config for c in report.configs]
    assert all(a is b for a, b in zip(report.comparison.replays_for(conv), own))
    assert not any(a is b for a, b in zip(report.comparison.replays_for(conv, "another prompt"), own))
    assert not any(a is b for a, b in zip(report.comparison.replays_for(lisbon()), own))
    bare = replace(report, comparison=replace(report.comparison, replays=[]))
    assert findings_for(report.source, comparison=bare.comparison) == report.findings
    assert report_html(bare) == report_html(report)
    assert '<details class="ledger"' in report_html(report)


def test_a_long_report_stays_small_because_runs_of_equal_cells_share_one_hover():
    conv = linear(400, query=lambda i: f"question number {i} " + "words " * 20)
    report = report_of(conv, [MemoryConfig(window=3), MemoryConfig(strategy="buffer")])
    html = report_html(report)
    heatmaps = html[html.index('<section id="heatmaps">') : html.index('<section id="series">')]
    rows = sum(len(m.rows) for m in report.comparison.matrices)
    columns = len(report.comparison.matrices[0].columns)
    # window 3: two blocks a row (outside the window, then kept); buffer: one — never one rect per cell
    assert heatmaps.count("data-reason=") <= 3 * rows < rows * columns // 10
    assert len(html) < 400_000
    assert heatmaps.count('class="message"') == columns * len(report.configs)


def test_the_bundle_loads_back_into_the_same_view():
    conv = lisbon()
    configs = [
        NamedConfig("short", MemoryConfig(window=2)),
        NamedConfig("long", MemoryConfig(window=8)),
        NamedConfig("budget", MemoryConfig(context_size=300)),
    ]
    report = report_of(
        conv, configs, facts_mode="marked", marks=[((0, 0), "who is travelling")], selected_turn=7, replies=True
    )
    text = bundle_json(report)
    result = import_text(text, "lisbon.report.json")
    assert result.format == "memlens-report"
    again = source_of(result.conversations[0])
    assert [c.to_dict() for c in again.configs] == [c.to_dict() for c in configs]
    assert again.facts_mode == "marked" and again.facts == [((0, 0), "who is travelling")]
    assert again.view["selected_turn"] == 7
    rebuilt = build_report(again)
    assert rebuilt.comparison.to_json() == report.comparison.to_json()
    assert [f.to_json() for f in rebuilt.findings] == [f.to_json() for f in report.findings]
    assert rebuilt.selected_turn == 7
    assert conversation_to_json(again.conversation) == conversation_to_json(conv)
    assert json.loads(text)["replies"]["turns"] == list(range(1, 13))


def test_a_conversation_survives_the_json_round_trip_with_branches_and_tools():
    for conv in [
        load_sample("order-support.json")[0],
        *read_sources((T / "dify-web__realWorldMessages.json").read_bytes(), "w.json")[:1],
    ]:
        conv = conv.conversation if isinstance(conv, Source) else conv
        back = conversation_from_json(json.loads(json.dumps(conversation_to_json(conv))))
        assert back.turns == conv.turns and back.system_prompt == conv.system_prompt


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda d: d.update(version=9), "version"),
        (lambda d: d["configs"][1].update(window=9_000_000), "configs[1]"),
        (
            lambda d: d["conversation"]["turns"][2]["messages"][0].update(role="robot"),
            "conversation.turns[2].messages[0].role",
        ),
        (lambda d: d["conversation"]["turns"][1].update(query_index=7), "conversation.turns[1].query_index"),
        (lambda d: d["facts"].update(marks=[{"message": [40, 0], "label": "x"}]), "facts.marks[0].message"),
    ],
)
def test_a_malformed_bundle_names_its_field_and_imports_nothing(change, field):
    doc = report_bundle(report_of(lisbon()))
    change(doc)
    with pytest.raises(FormatError) as e:
        import_text(json.dumps(doc), "bad.json")
    assert [p.field for p in e.value.problems] == [field]
    with pytest.raises(ReportError, match=re.escape(field)):
        read_report(doc)


def test_the_facts_table_says_where_a_restated_fact_came_back():
    conv = linear(12, query=lambda i: "my name is Dana" if i in (1, 6) else f"question number {i}")
    configs = [NamedConfig("w3", MemoryConfig(window=3)), NamedConfig("w20", MemoryConfig(window=20))]
    html = report_html(report_of(conv, configs))
    assert re.findall(r'<td class="(\w+)">lost at', html) == ["dropped"]  # gone again at the newest turn
    text = "".join(Page(html).text)
    assert "lost at turn 4 (outside window); back at turn 6, gone again from turn 9 (outside window)" in text
    assert "lost at turn 4 with w3 (back at turn 6, gone again from turn 9); never with w20" in text
    again = linear(8, query=lambda i: "my name is Dana" if i in (1, 8) else f"question number {i}")
    html = report_html(report_of(again, configs))
    assert re.findall(r'<td class="(\w+)">lost at', html) == ["back"]  # in memory again at the newest turn
    assert "back at turn 8, still there at the newest turn" in "".join(Page(html).text)


def test_a_report_lists_its_first_facts_and_the_bundle_every_one(monkeypatch):
    import core.report.html as html_module

    monkeypatch.setattr(html_module, "REPORT_FACTS", 5)
    conv = linear(12, query=lambda i: f"My name is Dana{i}. Question {i}")
    report = report_of(
        conv, [NamedConfig("w3", MemoryConfig(window=3)), NamedConfig("all", MemoryConfig(strategy="buffer"))]
    )
    text = "".join(Page(report_html(report)).text)
    assert (
        "The first 5 of 12 facts, in the order they were stated; the JSON bundle (--bundle) follows every one." in text
    )
    assert "(Dana5)" in text and "(Dana6)" not in text
    facts = json.loads(bundle_json(report))["comparison"]["facts"]
    assert [f["value"] for f in facts] == [f"Dana{i}" for i in range(1, 13)]


def test_a_report_needs_configs_and_a_known_facts_mode():
    with pytest.raises(ReportError, match="2 to 6 memory configs"):
        build_report(Source(lisbon()))
    with pytest.raises(ReportError, match="unknown facts mode"):
        report_of(lisbon(), facts_mode="guessed")
    with pytest.raises(MemLensError, match="2 to 6 memory configs"):
        report_of(lisbon(), [MemoryConfig()])


# -- the replies grid --------------------------------------------------------------------------------------


def test_replies_re_asked_under_each_config_show_where_memory_forgets():
    conv = lisbon()
    grid = replay_replies(conv, [MemoryConfig(window=3), MemoryConfig(window=12)])
    row = grid.turns.index(11)
    short, long = grid.replies[row]
    assert "I don't know your name" in short and "Your name is Dana" in long
    assert row in grid.differing() and 0 not in grid.differing()
    assert grid.models == ["memlens/demo", "memlens/demo"]
    # Each reply is the demo model's answer to exactly the ledger's history plus the query.
    replay = Replay(conv, MemoryConfig(window=3))
    p = replay.position_of(11)
    messages = (
        [{"role": "system", "content": conv.system_prompt}]
        + [m.to_openai() for m in replay.history_messages(replay.ledger_at(p))]
        + [conv.turns[p].query_message.to_openai()]
    )
    assert DemoClient().complete("memlens/demo", messages).text == short
    assert replay_replies(conv, [MemoryConfig(window=3), MemoryConfig()], max_turns=2).turns == [11, 12]


# -- sources, uploads, saved configs -----------------------------------------------------------------------


def _db(tmp_path):
    return Database(f"sqlite:///{tmp_path / 'memlens.db'}")


def _flow_conversation(db):
    service = ConversationService(db, llm=DemoClient())
    version = service.import_flow(ROOT / "sample_data" / "flows" / "support-bot.yml")
    conv = service.start(version.flow_id, name="demo").id
    for q in json.loads((ROOT / "sample_data" / "flows" / "support-bot.queries.json").read_text()):
        service.send(conv, q)
    return conv


def test_a_stored_flow_conversation_brings_its_node_findings(tmp_path):
    db = _db(tmp_path)
    conv_id = _flow_conversation(db)
    from core.service.sources import load_stored

    source = load_stored(db, conv_id)
    assert source.flow.name == "support-bot" and len(source.records) == 8
    report = build_report(source, DEFAULT_CONFIGS)
    node = [f for f in report.findings if f.node_id == "responder"]
    assert [(f.kind, f.turn) for f in node] == [("fact_not_seen", 6)]
    # The same from a conversation export read as a file.
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export_conversation(db, conv_id)))
    exported, count = read_source_file(path)
    assert count == 1 and exported.flow is not None and len(exported.records) == 8
    assert [(f.kind, f.turn) for f in build_report(exported, DEFAULT_CONFIGS).findings if f.node_id] == [
        ("fact_not_seen", 6)
    ]


def test_an_upload_is_stored_whole(tmp_path):
    db = _db(tmp_path)
    data = (T / "taubench__gpt-4o-airline.sample.jsonl").read_bytes()
    seen = []
    outcome = import_upload(db, data, "tau.jsonl", on_progress=lambda done, total: seen.append((done, total)))
    assert len(outcome.ids) == 6 and outcome.format == "openai" and not outcome.problems
    assert seen[-1] == (len(data), len(data))
    stored = repo.load_conversation(db, outcome.ids[0])
    first = read_sources(data, "tau.jsonl")[0].conversation
    assert [t.messages for t in stored.turns] == [t.messages for t in first.turns]


def test_a_malformed_upload_stores_nothing_unless_bad_records_are_skipped(tmp_path):
    db = _db(tmp_path)
    data = (T / "llamafactory__glaive_toolcall_zh_demo.subset.json").read_bytes()
    with pytest.raises(FormatError) as e:
        import_upload(db, data, "glaive_zh.json")
    assert {p.record for p in e.value.problems} == {7, 8} or len(e.value.problems) == 2
    assert repo.list_conversations(db) == []
    outcome = import_upload(db, data, "glaive_zh.json", skip_bad=True)
    assert len(outcome.problems) == 2 and len(outcome.ids) == len(repo.list_conversations(db)) > 0


def test_an_uploaded_report_bundle_stores_its_conversation_and_saves_its_configs(tmp_path):
    db = _db(tmp_path)
    configs = [NamedConfig("short", MemoryConfig(window=2)), NamedConfig("long", MemoryConfig(window=8))]
    data = bundle_json(report_of(lisbon(), configs)).encode()
    outcome = import_upload(db, data, "lisbon.report.json")
    assert outcome.format == "memlens-report" and len(outcome.ids) == 1
    assert outcome.saved_configs == "from lisbon.report.json"
    assert [c.label for c in saved_config_sets(db)["from lisbon.report.json"]] == ["short", "long"]
    assert len(repo.load_conversation(db, outcome.ids[0]).turns) == 12


def test_an_uploaded_conversation_export_is_stored_as_it_was(tmp_path):
    src = _db(tmp_path)
    conv_id = _flow_conversation(src)
    data = json.dumps(export_conversation(src, conv_id)).encode()
    dst = Database(f"sqlite:///{tmp_path / 'other.db'}")
    outcome = import_upload(dst, data, "export.json")
    assert outcome.ids == [conv_id] and outcome.format == "memlens-conversation"
    assert len(repo.load_turn_rows(dst, conv_id, with_node_runs=True)[0]["node_runs"]) > 0
    with pytest.raises(MemLensError, match="already exists"):
        import_upload(dst, data, "export.json")


def test_config_sets_are_saved_listed_replaced_and_deleted(tmp_path):
    db = _db(tmp_path)
    assert saved_config_sets(db) == {}
    save_config_set(db, "windows", [MemoryConfig(window=3), MemoryConfig(window=10)])
    save_config_set(db, "budget", [NamedConfig("tight", MemoryConfig(context_size=500)), MemoryConfig()])
    assert [c.label for c in saved_config_sets(db)["budget"]] == ["tight", "dify no window"]
    save_config_set(db, "windows", [MemoryConfig(window=1), MemoryConfig(window=2), MemoryConfig(window=4)])
    assert [c.config.settings.window for c in saved_config_sets(db)["windows"]] == [1, 2, 4]
    assert repo.get_setting(db, CONFIG_SETS_KEY)["windows"][0]["window"] == 1
    delete_config_set(db, "windows")
    assert list(saved_config_sets(db)) == ["budget"]
    with pytest.raises(ReportError, match="needs a name"):
        save_config_set(db, " ", [MemoryConfig(), MemoryConfig()])
    with pytest.raises(ReportError, match="2 to 6 configs"):
        save_config_set(db, "one", [MemoryConfig()])
    with pytest.raises(MemLensError, match="window 9000000 is out of range"):
        save_config_set(db, "bad", [MemoryConfig(), {"window": 9_000_000}])
    assert list(saved_config_sets(db)) == ["budget"]


# -- the command line --------------------------------------------------------------------------------------


def cli(*args):
    p = subprocess.run(
        [sys.executable, "-m", "core", *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    return p.returncode, p.stdout, p.stderr


def test_report_command_takes_one_config_per_flag_group(tmp_path):
    out, bundle = tmp_path / "r.html", tmp_path / "r.json"
    code, _, err = cli(
        "report",
        ROOT / "sample_data" / "conversations" / "lisbon-trip.json",
        "--memory",
        "dify",
        "--window",
        "3",
        "--memory",
        "dify",
        "--window",
        "10",
        "--model",
        "gpt-4o",
        "--memory",
        "window",
        "--window",
        "4",
        "--window-change",
        "6:12",
        "--label",
        "grown",
        "-o",
        out,
        "--bundle",
        bundle,
    )
    assert code == 0, err
    doc = json.loads(bundle.read_text())
    assert [(c["label"], c["strategy"], c["window"], c["model"], c["window_changes"]) for c in doc["configs"]] == [
        ("dify window 3", "dify", 3, "gpt-4o-mini", []),
        ("dify window 10", "dify", 10, "gpt-4o", []),
        ("grown", "window", 4, "gpt-4o-mini", [[6, 12]]),
    ]
    page = Page(out.read_text())
    assert page.all("figure", **{"data-config": "grown"})
    assert any(f["kind"] == "trimmed_window" for f in doc["findings"])
    assert "3 configs" in err and "findings" in err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--window", "3", "--memory", "dify"], "--window 3 comes before any --memory"),
        (["--memory", "dify", "--window", "3", "--window", "4", "--memory", "off"], "--window is given twice"),
        (["--memory", "dify"], "compare needs 2 to 6 memory configs; got 1"),
        (["--memory", "window", "--window", "900", "--memory", "off"], "window 900 is out of range"),
        (["--memory", "dify", "--memory", "off", "--window-change", "x"], "--window-change must be TURN:N"),
        (["--memory", "dify", "--memory", "off", "--fact", "999=name"], "no message with ref '999'"),
        (["--memory", "dify", "--memory", "off", "--index", "3"], "holds 1 conversation"),
    ],
)
def test_report_command_rejects_bad_input_in_one_line(tmp_path, args, message):
    out = tmp_path / "r.html"
    code, _, err = cli("report", ROOT / "sample_data" / "conversations" / "lisbon-trip.json", *args, "-o", out)
    assert code == 2 and message in err and err.count("\n") == 1
    assert not out.exists()


def test_report_command_reads_a_stored_conversation_and_a_bundle(tmp_path):
    url = f"sqlite:///{tmp_path / 'memlens.db'}"
    db = Database(url)
    conv_id = _flow_conversation(db)
    db.dispose()
    out, bundle = tmp_path / "r.html", tmp_path / "r.json"
    code, _, err = cli(
        "report",
        "--conversation",
        conv_id,
        "--db",
        url,
        "--fact",
        f"{_ref(url, conv_id)}=the name",
        "-o",
        out,
        "--bundle",
        bundle,
    )
    assert code == 0, err
    doc = json.loads(bundle.read_text())
    assert doc["flow"] == "support-bot" and doc["facts"]["mode"] == "marked"
    assert any(f["node_id"] == "responder" for f in doc["findings"])
    again = tmp_path / "again.html"
    code, _, err = cli("report", bundle, "-o", again)
    assert code == 0, err and "dify window 3" in again.read_text()
    code, _, err = cli("report", "--db", url, "-o", out)
    assert code == 2 and "give a conversation FILE or --conversation ID" in err


def _ref(url, conv_id):
    db = Database(url)
    try:
        return repo.load_conversation(db, conv_id).turns[0].messages[0].ref
    finally:
        db.dispose()


def test_what_a_memory_holds_reads_as_one_sentence():
    from core.model.ledger_words import remembered

    conv = lisbon()
    window = Replay(conv, MemoryConfig(window=4))  # Dify 1.x: the current turn's row and the 3 before it
    assert remembered(window.ledger(1)).sentence() == "first turn: nothing earlier to remember"
    held = remembered(window.ledger(8))
    assert (held.kept_turns, held.forgotten_turns, held.kept) == ((5, 6, 7), (1, 2, 3, 4), 6)
    assert held.sentence().startswith("remembers turns 5–7 (6 messages, ") and held.sentence().endswith(
        "; forgot turns 1–4"
    )
    assert (
        remembered(Replay(conv, MemoryConfig(strategy="off")).ledger(8)).sentence()
        == "memory off: remembers nothing from earlier turns"
    )
    summary = remembered(Replay(conv, MemoryConfig(strategy="summary_buffer", max_history_tokens=100)).ledger(8))
    assert summary.summarized_turns and "has a summary of turns 1–" in summary.sentence()


def test_a_report_compares_an_agent_apps_two_runners_and_names_the_setting_that_differs(tmp_path):
    """``--agent-strategy`` is a per-config setting; the config table shows it for both configs (the
    function-calling one leaves it out of its stored form); the ReAct config's scratchpads are escaped
    text and its reasons are in the legend."""
    out, bundle = tmp_path / "r.html", tmp_path / "r.json"
    code, _, err = cli(
        "report",
        ROOT / "sample_data" / "conversations" / "shop-agent.json",
        "--memory",
        "dify_agent",
        "--memory",
        "dify_agent",
        "--agent-strategy",
        "react",
        "-o",
        out,
        "--bundle",
        bundle,
    )
    assert code == 0, err
    html = out.read_text()
    page = Page(html)
    assert "<th>agent_strategy</th>" in html and "<td>function_call</td>" in html and "<td>react</td>" in html
    legend = "".join(page.text)
    assert "rewritten" in legend and "omitted" in legend
    # Each ledger lists the scratchpad sent in place of a run's first step, right after that step; it quotes
    # the tool call's JSON: escaped, never markup.
    assert (
        '<td class="kept">sent instead (scratchpad)</td><td>scratchpad standing for turn 1</td><td class="text">'
        "Thought: I am thinking about how to help you Action: {&quot;action&quot;: &quot;order_lookup&quot;"
    ) in html
    configs = json.loads(bundle.read_text())["configs"]
    assert [c.get("agent_strategy") for c in configs] == [None, "react"]


def test_the_config_table_shows_a_setting_left_out_of_the_stored_form_when_only_one_config_sets_it():
    report = report_of(
        lisbon(),
        [NamedConfig("node", MemoryConfig(window=3)), NamedConfig("agent", MemoryConfig(window=3, sends_empty=True))],
    )
    html = report_html(report)
    assert "<th>sends_empty</th>" in html and "<td>False</td>" in html and "<td>True</td>" in html


def test_a_reports_ledgers_list_what_is_sent_in_place_of_dropped_messages():
    """A summary (first) and any stand-in are rows of the ledger table, with their text escaped."""
    conv = linear(8, answer=lambda i: HOSTILE if i == 1 else f"answer {i} " * 30)
    config = MemoryConfig(strategy="summary_buffer", max_history_tokens=120)
    report = report_of(conv, [NamedConfig("summary", config), NamedConfig("window", MemoryConfig(window=3))])
    html = report_html(report)
    ledger = Replay(conv, config).ledger(8)
    (summary,) = ledger.synthetic
    rows = re.findall(
        r'<tr><td><a href="#turn-\d+">\d+</a></td><td>(\w+)</td><td>[\d,]+</td><td class="kept">sent '
        r"instead \(summary\)</td><td>summary standing for ([^<]+)</td>",
        html,
    )
    assert (summary.role, summary.covers_label) in rows
    assert "<img" not in html


def test_a_small_heatmap_is_wide_enough_for_its_caption():
    from core.analysis.compare import compare
    from core.report.html import SVG_CHAR_WIDTH, heatmap_svg
    from tests.builders import linear

    conv = linear(3)  # 4 earlier messages at most: a grid far narrower than its caption
    matrix = compare(conv, [MemoryConfig(window=3), MemoryConfig(strategy="buffer")]).matrices[0]
    svg = heatmap_svg(matrix)
    width = int(re.search(r'<svg class="heatmap" width="(\d+)"', svg)[1])
    caption = re.search(r'<text x="(\d+)" y="\d+">(earlier messages[^<]*)</text>', svg)
    assert caption and "(4 shown;" in caption[2]
    assert width >= int(caption[1]) + SVG_CHAR_WIDTH * len(caption[2]) and SVG_CHAR_WIDTH >= 6


def test_a_turns_heading_counts_kept_dropped_and_not_eligible_apart():
    """'Dropped' is what the memory could have sent and left out; a message it never could send
    (memory off, another branch) is counted on its own, as the Debugger's ◌ marker shows it."""
    configs = (NamedConfig("off", MemoryConfig(strategy="off")), NamedConfig("dify window 3", MemoryConfig(window=3)))
    conv = lisbon()
    text = "".join(Page(report_html(report_of(conv, configs))).text)
    last = len(conv.turns)
    earlier = sum(len(t.messages) for t in conv.turns[:-1])
    assert f"Turn {last}: 0 kept, 0 dropped, {earlier} not eligible, 0 history tokens" in text
    ledger = Replay(conv, MemoryConfig(window=3)).ledger_at(last - 1)
    kept, dropped = len(ledger.kept), ledger.dropped_count()
    assert dropped > 0 and kept + dropped == earlier
    assert f"Turn {last}: {kept} kept, {dropped} dropped, {ledger.history_tokens:,} history tokens" in text


@pytest.mark.parametrize(
    "config", [MemoryConfig(window=3), MemoryConfig(strategy="summary_buffer", max_history_tokens=120)]
)
def test_a_long_ledger_lists_its_newest_messages_and_counts_the_rest(config):
    """Past the table's width only the newest messages are rows; the others are counted, with how
    many of them were kept (a ledger kept as runs and a listed one alike)."""
    from core.report.html import _ledgers_html

    conv = linear(8, answer=lambda i: f"answer {i} " * 30)
    report = report_of(conv, [NamedConfig("memory", config), NamedConfig("buffer", MemoryConfig(strategy="buffer"))])
    html = _ledgers_html(report, columns=5)
    for name, cfg in (("memory", config), ("buffer", MemoryConfig(strategy="buffer"))):
        part = html.split(f'data-config="{name}"')[1].split('<details class="ledger"')[0]
        newest = part.split("<summary>Turn 8:")[1].split("</details>")[0]
        ledger = Replay(conv, cfg).ledger(8)
        hidden = ledger.entries[:-5]
        assert f"{len(hidden):,} earlier messages not listed ({sum(e.kept for e in hidden):,} of them kept)." in newest
        # The rows (a run of three or more dropped ones as one) link to the newest five's turns, and to
        # a summary's: none of the hidden messages' turns.
        linked = {int(t) for t in re.findall(r'href="#turn-(\d+)"', newest)}
        assert linked == {e.turn for e in ledger.entries[-5:]} | {m.turn for m in ledger.synthetic}
        assert min(linked) > 4
