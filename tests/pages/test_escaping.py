"""The one escaping rule (``ui.html.plain``): any stored, imported or model text shows as typed.

Each payload goes through ``plain`` and then through a CommonMark parser with raw HTML allowed (what
``unsafe_allow_html`` does), and through the text patterns Streamlit's markdown renderer applies
after parsing (remark-gfm's literal auto-links, emoji and icon shortcodes): nothing may come out
as a link, an image, an HTML tag or formatting, and the text a reader sees must be the payload.
"""

import re
from html import unescape

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from tests.rendered import shown
from ui.html import WORD_JOINER, plain, safe_text

HOST = "127.0.0.2:9"
PAYLOADS = {
    "image": f"![](http://{HOST}/a.png)",
    "protocol-relative image": "![](//host/a)",
    "link": f"[click](http://{HOST}/l)",
    "javascript link": "[x](javascript:alert(1))",
    "reference link": f"[ref][1]\n\n[1]: http://{HOST}/r",
    "reference image": f"![pic][p]\n\n[p]: http://{HOST}/p.png",
    "angle autolink": f"<http://{HOST}/angle>",
    "literal url": f"see http://{HOST}/auto now",
    "https url": "https://example.com/x?y=1",
    "www": "visit www.example.com today",
    "upper-case www": "WWW.EXAMPLE.COM",
    "email": "write to ops@example.com",
    "mailto": "mailto:ops@example.com",
    "img tag": "<img src=x onerror=alert(1)>",
    "script tag": "<script>alert(1)</script>",
    "entity": "&lt;b&gt; and &amp; and &#33;",
    "emphasis": "**bold** _it_ ~~gone~~ `code`",
    "heading": "# big\n## smaller",
    "setext heading": "title\n===",
    "list and quote": "- one\n1. two\n> quote",
    "indented code": "    ![](//host/indented)",
    "table": "| a | b |\n|---|---|\n| 1 | 2 |",
    "math": "$x^2$ and $$y$$",
    "streamlit colour": ":red[alarm] :orange-badge[b]",
    "emoji shortcode": ":smile: :material/home:",
    "html after blank line": "hello\n\n<img src=//host/b>",
    "backslash": "C:\\path\\to\\![x](//host/c)",
    "plain words": "Hi again, I'm Dana.",
}

# What Streamlit's renderer (react-markdown with remark-gfm and remark-emoji) still turns into links or
# icons after parsing: it searches the parsed text, where references are already decoded.
LITERAL_AUTOLINK = re.compile(r"(https?://|www(?=\.))([-.\w]+)([^ \t\r\n]*)", re.IGNORECASE)
LITERAL_EMAIL = re.compile(r"([-.\w+]+)@([-\w]+(?:\.[-\w]+)+)")
SHORTCODE = re.compile(r":[-+\w/]+:")


def render(markdown: str) -> str:
    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(markdown)


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=PAYLOADS.keys())
def test_escaped_text_reads_exactly_as_typed(payload):
    assert shown(plain(payload)) == payload
    assert shown(safe_text(payload)) == payload.replace("\r\n", "\n")


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=PAYLOADS.keys())
def test_escaped_text_has_no_markup_left(payload):
    out = plain(payload)
    # Only letters, digits, spaces, line breaks, non-ASCII text and numeric character references.
    assert not re.search(r"[!-/:-@\[-`{-~]", re.sub(r"&#\d+;", "", out))
    assert not re.search(r"^[ \t]", out, re.MULTILINE)


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=PAYLOADS.keys())
def test_escaped_text_renders_as_paragraph_text_only(payload):
    for markup in (plain(payload), f"**Turn 3** — <span>{plain(payload)}</span>", f"<div>{safe_text(payload)}</div>"):
        html = render(markup)
        tags = set(re.findall(r"<\s*([a-zA-Z0-9]+)", html))
        assert tags <= {"p", "strong", "span", "div", "br"}, (markup, html)
        assert not re.findall(r"<[^>]*\b(?:href|src)=", html), (markup, html)


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=PAYLOADS.keys())
def test_no_auto_link_or_shortcode_survives_in_the_parsed_text(payload):
    text = unescape(plain(payload))  # the parsed text node: references decoded, word joiners kept
    assert not LITERAL_AUTOLINK.search(text)
    assert not LITERAL_EMAIL.search(text)
    assert not SHORTCODE.search(text)
    # Without the rule they are found: the patterns are the right ones.
    if payload in (PAYLOADS["literal url"], PAYLOADS["www"], PAYLOADS["email"], PAYLOADS["emoji shortcode"]):
        assert LITERAL_AUTOLINK.search(payload) or LITERAL_EMAIL.search(payload) or SHORTCODE.search(payload)


def test_only_invisible_characters_are_added():
    out = unescape(plain("http://a.b www.c.d e@f.g :x:"))
    assert out.replace(WORD_JOINER, "") == "http://a.b www.c.d e@f.g :x:"
    assert out.count(WORD_JOINER) == 5  # after each ":" and "@", inside "www."


def test_multi_line_text_stays_in_one_html_block_and_copies_intact():
    assert "\n" not in safe_text("a\r\n\r\nb\nc") and shown(safe_text("a\r\n\r\nb\nc")) == "a\n\nb\nc"
    # Markdown never runs inside the block, so no word joiner is needed there: a copied URL works.
    assert unescape(safe_text("see http://example.com/a")) == "see http://example.com/a"


@given(st.text().map(lambda t: t.replace(WORD_JOINER, "")))
def test_any_text_reads_as_typed_and_renders_without_markup(text):
    assert shown(plain(text)) == text
    html = render(plain(text))
    assert set(re.findall(r"<\s*([a-zA-Z0-9]+)", html)) <= {"p", "br"}


@pytest.mark.parametrize("payload", list(PAYLOADS.values()), ids=list(PAYLOADS))
def test_the_variables_changes_table_shows_every_cell_as_typed(payload):
    """The Changes table is one HTML block: a value holding markup or a URL stays the cell's text."""
    from ui.variables_panel import CHANGE_COLUMNS, changes_html

    rows = [{c: payload for c in CHANGE_COLUMNS}, {c: "" for c in CHANGE_COLUMNS}]
    html = render(changes_html(rows))
    assert set(re.findall(r"<\s*([a-zA-Z0-9]+)", html)) == {"div", "table", "thead", "tbody", "tr", "th", "td"}
    cells = re.findall(r"<td>(.*?)</td>", html, re.DOTALL)
    assert [unescape(c) for c in cells] == [payload.replace("\r\n", "\n")] * 6 + [""] * 6
