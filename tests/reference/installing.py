"""What the two reference installers share (:mod:`tests.reference.js_packages` for n8n's and Flowise's
npm packages, :mod:`tests.reference.python_packages` for the Python platforms that need an environment of
their own): the error a platform's pinned code raises when it cannot run here, and their command line,
``python -m tests.reference.<installer> install [--force]``, which ``scripts/setup.sh --test`` runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterable


class ReferenceUnavailable(RuntimeError):
    """A platform's pinned code cannot run here (no Node.js, or its packages or environment are not installed)."""


def install_command(
    argv: list[str] | None,
    module: str,
    platforms: Iterable[str],
    install: Callable[..., bool],
    where: Callable[[str], Path],
) -> int:
    """Install each platform's pinned code (``--force``: again); print where it went, one line each.
    Exit status 0, 1 when one cannot be installed (said in one line), 2 for a usage error."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] != ["install"] or not set(args[1:]) <= {"--force"}:
        print(f"usage: python -m {module} install [--force]", file=sys.stderr)
        return 2
    for platform in platforms:
        try:
            did = install(platform, force="--force" in args)
        except (ReferenceUnavailable, OSError, subprocess.TimeoutExpired) as e:
            print(f"error: {platform}: {e}", file=sys.stderr)
            return 1
        print(f"{platform}: {'installed' if did else 'already installed'} ({where(platform)})")
    return 0
