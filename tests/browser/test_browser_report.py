"""The exported report in a real browser with the network blocked: it renders its heatmaps and
charts and asks for nothing but its own file."""

from dataclasses import replace

from core.analysis.compare import NamedConfig
from core.analysis.source import Source
from core.memory.config import MemoryConfig
from core.report.build import build_report
from core.report.html import report_html
from core.service.samples import load_sample
from tests.browser import chromium

HOSTILE = '<img src="http://example.invalid/pixel.png"> <link rel="stylesheet" href="https://example.invalid/x.css">'


def test_the_report_renders_offline_and_requests_nothing_but_itself(tmp_path):
    conv = load_sample("lisbon-trip.json")[0]
    first = conv.turns[0]
    query = replace(first.messages[0], content=first.messages[0].content + " " + HOSTILE)
    conv.turns[0] = replace(first, messages=(query, *first.messages[1:]))
    configs = [
        NamedConfig("dify window 3", MemoryConfig(window=3)),
        NamedConfig("dify window 10", MemoryConfig(window=10)),
        NamedConfig("window 6 msgs", MemoryConfig(strategy="window", window=6)),
    ]
    report = build_report(Source(conv, "test"), configs, replies=True)
    path = tmp_path / "report.html"
    path.write_text(report_html(report), encoding="utf-8")
    url = path.as_uri()

    requested, blocked = [], []

    def route(r):
        if r.request.url.startswith("file:"):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    with chromium() as browser:
        context = browser.new_context(offline=True)
        page = context.new_page()
        page.on("request", lambda req: requested.append(req.url))
        page.route("**/*", route)
        page.goto(url)
        page.wait_for_load_state("load")
        heatmaps = page.locator("svg.heatmap")
        assert heatmaps.count() == 3
        for i in range(3):
            box = heatmaps.nth(i).bounding_box()
            assert box and box["width"] > 100 and box["height"] > 50
        spans = page.locator("svg.heatmap rect[data-reason]").evaluate_all(
            "els => els.map(e => Number(e.getAttribute('data-span')) * Number(e.getAttribute('data-rows')))"
        )
        assert sum(spans) == sum(1 for m in report.comparison.matrices for row in m.cells for x in row if x is not None)
        # A kept cell is drawn in the kept colour and carries its hover text.
        kept = page.locator('svg.heatmap rect[data-reason="kept"]').first
        assert kept.get_attribute("fill") == "#10b981"
        assert "sent to the model" in kept.locator("title").text_content()
        assert page.locator("svg.chart polyline").count() >= 3
        assert page.locator("#turn-12").is_visible()
        assert HOSTILE in page.locator("#turn-1").inner_text()
        page.locator('a[href="#turn-11"]').first.click()
        assert page.evaluate("location.hash") == "#turn-11"
        context.close()

    assert blocked == []
    assert requested and all(u.startswith("file:") for u in requested)
