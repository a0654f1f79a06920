"""Record how n8n's and Flowise's JavaScript runs the generated memory cases, for the tests to compare against.

The tests run the pinned JavaScript live when Node.js and the packages are installed
(``./scripts/setup.sh --test``) and check it still gives the recorded outcomes; the comparison with
MemLens's memory systems reads the recorded outcomes, so it runs where npm cannot be reached. After
changing a case (``tests/reference/platform_cases.py``), a driver (``tests/reference/js/*/driver.js``)
or a pinned version (``tests/reference/js/*/package.json``), record again::

    python scripts/refresh_js_reference_outcomes.py            # both platforms
    python scripts/refresh_js_reference_outcomes.py --platform n8n

It installs the pinned packages if they are not installed (npm and the registry are needed then) and
writes ``tests/fixtures/reference/<platform>-<release>.json``: the versions that ran, every pinned
package, and per case its fingerprint and outcome.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.reference import js_packages, platform_outcomes  # noqa: E402  (the repository root is on the path now)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--platform",
        choices=js_packages.PLATFORMS,
        action="append",
        help="record this platform only (repeatable; default: all)",
    )
    args = parser.parse_args(argv)
    return platform_outcomes.refresh(
        args.platform or js_packages.PLATFORMS, js_packages.install, js_packages.ReferenceUnavailable
    )


if __name__ == "__main__":
    sys.exit(main())
