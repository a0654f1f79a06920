"""What n8n's and Flowise's JavaScript sends for each generated case, live or as recorded.

:func:`live` runs every case of a platform through its driver (one run per tokenizer mode) and
gives the outcomes; :func:`recorded` reads them back from ``tests/fixtures/reference/`` (written by
``scripts/refresh_js_reference_outcomes.py``). A recorded outcome carries its case's
:func:`~tests.reference.platform_cases.fingerprint`, so a case that changed since the recording is
told apart from one whose outcome changed. Plain Python only.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.reference import js_packages
from tests.reference.platform_cases import cases, fingerprint

REFERENCE = Path(__file__).resolve().parent.parent / "fixtures" / "reference"
#: The platform release whose pins each folder follows, and the file its outcomes are recorded in.
RELEASES = {"n8n": "2.41.1", "flowise": "3.1.4"}


def recording(platform: str) -> Path:
    return REFERENCE / f"{platform}-{RELEASES[platform]}.json"


def _payload(named: dict[str, dict], counter: str) -> dict:
    return {"counter": counter, "cases": [{"name": name, "mode": c["mode"], "settings": c["settings"],
                                           "turns": c["turns"]} for name, c in named.items()]}


def live(platform: str) -> dict:
    """Every case's outcome as the installed JavaScript gives it, with the versions that ran."""
    every = cases(platform)
    outcomes: dict[str, dict] = {}
    versions: dict = {}
    for counter in sorted({c["counter"] for c in every.values()}):
        batch = {name: c for name, c in every.items() if c["counter"] == counter}
        answer = js_packages.run_driver(platform, _payload(batch, counter))
        versions = answer["versions"]
        for name, outcome in answer["outcomes"].items():
            outcomes[name] = {"case": fingerprint(every[name]), **outcome}
    return {"platform": platform, "release": RELEASES[platform], "versions": versions,
            **js_packages.pinned(platform), "outcomes": dict(sorted(outcomes.items()))}


def write(data: dict) -> Path:
    """Write a platform's outcomes, one case per line (a changed outcome is a one-line diff)."""
    path = recording(data["platform"])
    path.parent.mkdir(parents=True, exist_ok=True)
    head = {k: v for k, v in data.items() if k != "outcomes"}
    lines = [json.dumps(head, ensure_ascii=False, sort_keys=True)[:-1] + ', "outcomes": {']
    items = list(data["outcomes"].items())
    for i, (name, outcome) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        lines.append(f"{json.dumps(name)}: {json.dumps(outcome, ensure_ascii=False, sort_keys=True, separators=(',', ':'))}{comma}")
    lines.append("}}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def recorded(platform: str) -> dict:
    return json.loads(recording(platform).read_text(encoding="utf-8"))
