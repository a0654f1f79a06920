"""What a reader sees of markup the app built: references decoded, invisible word joiners removed.

AppTest reports an element's markdown source, where ``ui.html.plain`` has turned punctuation into
character references; tests compare against the text a browser shows.
"""

from html import unescape

from ui.html import WORD_JOINER


def shown(markup: str) -> str:
    return unescape(markup).replace(WORD_JOINER, "")


def table_columns(markup: str, css_class: str) -> dict[str, list[str]]:
    """The first HTML ``<table class=css_class>`` in ``markup``, as ``{header: [cell, …]}`` of the
    texts a browser shows."""
    from html.parser import HTMLParser

    class Reader(HTMLParser):
        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.inside = self.done = False
            self.rows: list[list[str]] = []
            self.cell: list[str] | None = None

        def handle_starttag(self, tag, attrs):
            if tag == "table" and not self.done and css_class in (dict(attrs).get("class") or "").split():
                self.inside = True
            elif self.inside and tag == "tr":
                self.rows.append([])
            elif self.inside and tag in ("td", "th"):
                self.cell = []

        def handle_endtag(self, tag):
            if self.inside and tag in ("td", "th") and self.cell is not None:
                self.rows[-1].append("".join(self.cell).replace(WORD_JOINER, ""))
                self.cell = None
            elif tag == "table" and self.inside:
                self.inside, self.done = False, True

        def handle_data(self, data):
            if self.cell is not None:
                self.cell.append(data)

    reader = Reader()
    reader.feed(markup)
    if not reader.rows:
        raise AssertionError(f"no table of class {css_class}")
    head, *body = reader.rows
    return {h: [row[i] for row in body] for i, h in enumerate(head)}


def open_tab(at, label: str):
    """Open the Debugger inspector's tab ``label`` as a click on it does (only the open tab is drawn); returns
    ``at`` after the rerun."""
    from ui.state import INSPECTOR_TAB

    at.session_state[INSPECTOR_TAB] = label
    return at.run()
