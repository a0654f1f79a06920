"""What a reader sees of markup the app built: references decoded, invisible word joiners removed.

AppTest reports an element's markdown source, where ``ui.html.plain`` has turned punctuation into
character references; tests compare against the text a browser shows.
"""

from html import unescape

from ui.html import WORD_JOINER


def shown(markup: str) -> str:
    return unescape(markup).replace(WORD_JOINER, "")
