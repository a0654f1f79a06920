"""What each platform's own code sends for each generated case, live or as recorded.

:func:`live` runs every case of a platform through its driver — n8n's and Flowise's JavaScript (one run
per tokenizer mode), the OpenAI Agents SDK, LlamaIndex and LangGraph with langmem (one run each) — and
gives the outcomes; :func:`recorded` reads them back from ``tests/fixtures/reference/`` (written by
``scripts/refresh_js_reference_outcomes.py`` and ``scripts/refresh_python_reference_outcomes.py``). A
recorded outcome carries its case's :func:`~tests.reference.platform_cases.fingerprint`, so a case that
changed since the recording is told apart from one whose outcome changed. A Python platform's outcome
holds the conversation as the platform stored it (``stored``); the file keeps each stored conversation
once, under ``stored`` at its top, and the outcomes name it by a short hash. Plain Python only.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterable

from tests.reference import js_packages, python_packages
from tests.reference.platform_cases import cases, fingerprint

REFERENCE = Path(__file__).resolve().parent.parent / "fixtures" / "reference"
#: The platform release whose pins each folder follows, and the file its outcomes are recorded in.
RELEASES = {
    "n8n": "2.41.1",
    "flowise": "3.1.4",
    "openai_agents": "0.24.0",
    "llamaindex": "0.14.25",
    "langgraph": "1.2.24",
}


def recording(platform: str) -> Path:
    return REFERENCE / f"{platform}-{RELEASES[platform]}.json"


def _payload(named: dict[str, dict], counter: str) -> dict:
    return {
        "counter": counter,
        "cases": [
            {"name": name, "mode": c["mode"], "settings": c["settings"], "turns": c["turns"]}
            for name, c in named.items()
        ],
    }


def live(platform: str) -> dict:
    """Every case's outcome as the installed platform code gives it, with the versions that ran."""
    every = cases(platform)
    if platform in python_packages.PLATFORMS:
        answer = python_packages.run_driver(
            platform, {"cases": [{"name": name, **case} for name, case in every.items()]}
        )
        outcomes = {name: {"case": fingerprint(every[name]), **o} for name, o in answer["outcomes"].items()}
        return {
            "platform": platform,
            "release": RELEASES[platform],
            "versions": answer["versions"],
            "packages": python_packages.pinned(platform),
            "outcomes": dict(sorted(outcomes.items())),
        }
    outcomes: dict[str, dict] = {}
    versions: dict = {}
    for counter in sorted({c["counter"] for c in every.values()}):
        batch = {name: c for name, c in every.items() if c["counter"] == counter}
        answer = js_packages.run_driver(platform, _payload(batch, counter))
        versions = answer["versions"]
        for name, outcome in answer["outcomes"].items():
            outcomes[name] = {"case": fingerprint(every[name]), **outcome}
    return {
        "platform": platform,
        "release": RELEASES[platform],
        "versions": versions,
        **js_packages.pinned(platform),
        "outcomes": dict(sorted(outcomes.items())),
    }


def _stored_key(stored) -> str:
    return hashlib.sha256(json.dumps(stored, sort_keys=True).encode()).hexdigest()[:12]


def write(data: dict) -> Path:
    """Write a platform's outcomes, one case per line (a changed outcome is a one-line diff); each stored
    conversation once, at the top."""
    path = recording(data["platform"])
    path.parent.mkdir(parents=True, exist_ok=True)
    outcomes = data["outcomes"]
    if any("stored" in o for o in outcomes.values()):
        kept = {_stored_key(o["stored"]): o["stored"] for o in outcomes.values() if "stored" in o}
        outcomes = {
            name: {**o, "stored": _stored_key(o["stored"])} if "stored" in o else o for name, o in outcomes.items()
        }
        data = {**data, "stored": dict(sorted(kept.items()))}
    head = {k: v for k, v in data.items() if k != "outcomes"}
    lines = [json.dumps(head, ensure_ascii=False, sort_keys=True)[:-1] + ', "outcomes": {']
    items = list(outcomes.items())
    for i, (name, outcome) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        lines.append(
            f"{json.dumps(name)}: {json.dumps(outcome, ensure_ascii=False, sort_keys=True, separators=(',', ':'))}{comma}"
        )
    lines.append("}}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def recorded(platform: str) -> dict:
    """A platform's recorded outcomes, each with its stored conversation in place."""
    data = json.loads(recording(platform).read_text(encoding="utf-8"))
    kept = data.pop("stored", {})
    for outcome in data["outcomes"].values():
        if isinstance(outcome.get("stored"), str):
            outcome["stored"] = kept[outcome["stored"]]
    return data


def refresh(platforms: Iterable[str], install: Callable[[str], object], unavailable: type[Exception]) -> int:
    """Install (when needed), run and record each platform's cases; what the refresh scripts run."""
    for platform in platforms:
        try:
            install(platform)
            data = live(platform)
        except (unavailable, RuntimeError, OSError, subprocess.TimeoutExpired) as e:
            print(f"error: {platform}: {e}", file=sys.stderr)
            return 1
        path = write(data)
        print(f"wrote {path.relative_to(REFERENCE.parent.parent.parent)} ({len(data['outcomes'])} cases)")
    return 0
