"""The README a newcomer reads in two minutes: short, a picture of the Debugger, the two commands CI
runs, a five-step tour, three steps to debug one's own bot, and links that lead somewhere."""

import re
import struct

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
#: Pages linked before they exist: written with the feature they describe (the capture proxy).
LINKED_AHEAD = {"docs/capture.md"}


def test_the_readme_is_short():
    assert len(README.splitlines()) <= 150


def test_the_readme_starts_with_a_screenshot_of_the_debugger_at_1440_by_900():
    image = re.search(r"!\[[^\]]+\]\(([^)]+\.png)\)", README)
    assert image and README.index(image[0]) < README.index("Run the app")
    data = (ROOT / image[1]).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24]) == (1440, 900)


def test_the_two_commands_are_the_ones_ci_runs():
    assert "    ./scripts/setup.sh && .venv/bin/memlens ui\n" in README
    assert "Run the tests:\n\n    ./scripts/setup.sh --test && .venv/bin/python -m pytest" in README
    assert "awk '/^Run the tests:/" in (ROOT / ".ci" / "run").read_text()


def test_a_five_step_tour_and_three_steps_to_debug_your_own_bot():
    tour = README.split("## A five-step tour of the demo")[1].split("\n## ")[0]
    assert re.findall(r"^\d\. \*\*(.+?)\*\*", tour, re.M) == [
        "Inspect.",
        "See turn 1 dropped.",
        "Widen the window.",
        "Compare.",
        "Present.",
    ]
    own = README.split("## Debug your own bot")[1].split("\n## ")[0]
    steps = re.findall(r"^\d\. \*\*(.+?)\*\*", own, re.M)
    assert len(steps) == 3 and "memlens pull" in own and "memlens import" in own and "capture" in own


def test_every_link_of_the_readme_and_the_docs_leads_to_a_file_or_a_heading():
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if str(linked.relative_to(ROOT)) in LINKED_AHEAD:
                continue
            assert linked.exists(), f"{page.name}: {target}"
            if anchor and linked.suffix == ".md":
                headings = {
                    re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
                    for h in re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), re.M)
                }
                assert anchor in headings, f"{page.name}: {target}"


def test_every_doc_is_linked_from_the_readme():
    for doc in (ROOT / "docs").glob("*.md"):
        assert f"docs/{doc.name}" in README, doc.name
