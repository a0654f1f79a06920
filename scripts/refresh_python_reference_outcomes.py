"""Record how the OpenAI Agents SDK, LlamaIndex and LangGraph with langmem run the generated memory cases.

The tests run the pinned packages live (``./scripts/setup.sh --test`` installs them: LlamaIndex and
LangGraph in the test environment, the Agents SDK in an environment of its own) and check they still give
the recorded outcomes; the comparison with MemLens's memory systems reads the recorded outcomes, so it runs
where a package cannot be installed. After changing a case (``tests/reference/platform_cases.py``), a
driver (``tests/reference/python/*_driver.py``) or a pin, record again::

    python scripts/refresh_python_reference_outcomes.py                 # every platform
    python scripts/refresh_python_reference_outcomes.py --platform llamaindex

It installs the Agents SDK's environment if it is not installed (PyPI is needed then) and writes
``tests/fixtures/reference/<platform>-<release>.json``: the versions that ran, the pinned packages, each
stored conversation once, and per case its fingerprint and outcome.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.reference import platform_outcomes, python_packages  # noqa: E402  (the repository root is on the path now)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--platform",
        choices=python_packages.PLATFORMS,
        action="append",
        help="record this platform only (repeatable; default: all)",
    )
    args = parser.parse_args(argv)
    return platform_outcomes.refresh(
        args.platform or python_packages.PLATFORMS, python_packages.install, python_packages.ReferenceUnavailable
    )


if __name__ == "__main__":
    sys.exit(main())
