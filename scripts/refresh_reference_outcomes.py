"""Record how a Haystack release runs the agent cases, for the tests to compare MemLens against.

The tests compare MemLens with the installed haystack-ai (3.x) live. Other releases cannot share
one environment with it, so their outcomes are recorded: install the release in a separate
virtual environment and point this script at that environment's Python::

    python3 -m venv /tmp/haystack-2.31 && /tmp/haystack-2.31/bin/pip install haystack-ai==2.31.0
    python scripts/refresh_reference_outcomes.py --python /tmp/haystack-2.31/bin/python

It writes ``tests/fixtures/reference/haystack-<version>.json``: the library version and, per case
of ``tests/reference/haystack_cases.py``, the outcome of ``tests/reference/haystack_runner.py``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "reference"

_RUN = """
import json, logging
logging.disable(logging.CRITICAL)
from importlib.metadata import version
from tests.reference.haystack_cases import CASES
from tests.reference.haystack_runner import outcome
print(json.dumps({"library": "haystack-ai", "version": version("haystack-ai"),
                  "outcomes": {name: outcome(case) for name, case in CASES.items()}}, ensure_ascii=False))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", required=True, help="the Python of an environment with haystack-ai installed")
    args = parser.parse_args(argv)
    try:
        done = subprocess.run([args.python, "-c", _RUN], cwd=ROOT, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(
            f"error: could not run {args.python}: {e}; give the Python of an environment with haystack-ai installed",
            file=sys.stderr,
        )
        return 1
    if done.returncode != 0:
        print(f"error: the reference run failed:\n{done.stderr.strip()[-2000:]}", file=sys.stderr)
        return 1
    data = json.loads(done.stdout.strip().splitlines()[-1])
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"haystack-{data['version']}.json"
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)} ({len(data['outcomes'])} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
