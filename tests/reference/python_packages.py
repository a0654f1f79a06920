"""The Python packages whose memory MemLens is checked against, and the drivers that run them.

LlamaIndex (``llama-index-core``) and LangGraph with langmem are test dependencies
(``requirements-dev.txt``) and run in the test environment's own Python. The OpenAI Agents SDK cannot:
every ``openai-agents`` release that works with openai 3.x asks for ``websockets<17`` and the app
installs 17.4, so it has a virtual environment of its own, ``tests/reference/python/openai_agents/.venv``,
installed from that folder's ``requirements.lock`` (hashed, written by ``scripts/lock.sh`` with the app's
versions of every package both need) and stamped, so a second run is a no-op;
``./scripts/setup.sh --test`` runs::

    python -m tests.reference.python_packages install

:func:`run_driver` feeds a batch of cases to a platform's driver (``tests/reference/python/<platform>_driver.py``,
run as a module of its own process, in the platform's environment) on stdin and reads its JSON answer.
Plain Python only: no MemLens import, so the refresh script runs it anywhere.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import venv
from pathlib import Path

from tests.reference.installing import ReferenceUnavailable, install_command

ROOT = Path(__file__).resolve().parent.parent.parent
PY_ROOT = Path(__file__).resolve().parent / "python"
PLATFORMS = ("openai_agents", "llamaindex", "langgraph")
#: The platforms that run in an environment of their own (a folder with ``requirements.txt`` and its lock).
OWN_ENVIRONMENT = ("openai_agents",)
#: The package each platform's driver runs, and the release the recorded outcomes name.
PACKAGES = {
    "openai_agents": ("openai-agents",),
    "llamaindex": ("llama-index-core",),
    "langgraph": ("langgraph", "langgraph-prebuilt", "langmem", "langchain-core"),
}
STAMP = ".memlens-stamp"
#: How long one batch of cases may take; a platform's whole suite runs in well under a minute.
DRIVER_TIMEOUT = 600
_PIP_TIMEOUT = 900


def _check(platform: str) -> None:
    if platform not in PLATFORMS:
        raise ValueError(f"unknown platform {platform!r}; expected one of {', '.join(PLATFORMS)}")


def environment(platform: str) -> Path:
    """The folder of a platform that runs in an environment of its own (its pins, its lock, its ``.venv``)."""
    return PY_ROOT / platform


def python(platform: str) -> str:
    """The Python that runs a platform's driver."""
    _check(platform)
    if platform not in OWN_ENVIRONMENT:
        return sys.executable
    return str(environment(platform) / ".venv" / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))


def _stamp(platform: str) -> str:
    return hashlib.sha256((environment(platform) / "requirements.lock").read_bytes()).hexdigest()


def installed(platform: str) -> bool:
    """Whether a platform's environment holds exactly what its lock pins (always, for the test environment's)."""
    _check(platform)
    if platform not in OWN_ENVIRONMENT:
        return True
    stamp = environment(platform) / ".venv" / STAMP
    return stamp.is_file() and stamp.read_text(encoding="utf-8").strip() == _stamp(platform)


def install(platform: str, *, force: bool = False) -> bool:
    """Create a platform's own environment from its lock unless it is already there; True when it installed."""
    _check(platform)
    if platform not in OWN_ENVIRONMENT or (installed(platform) and not force):
        return False
    here = environment(platform)
    venv.EnvBuilder(with_pip=True, clear=True).create(here / ".venv")
    pip = [python(platform), "-m", "pip", "--quiet", "--disable-pip-version-check"]
    for args in (["install", "--require-hashes", "--no-deps", "-r", str(here / "requirements.lock")], ["check"]):
        done = subprocess.run([*pip, *args], capture_output=True, text=True, timeout=_PIP_TIMEOUT)
        if done.returncode != 0:
            raise ReferenceUnavailable(
                f"pip {args[0]} failed for {platform}: {(done.stderr or done.stdout).strip()[-1500:]}"
            )
    (here / ".venv" / STAMP).write_text(_stamp(platform) + "\n", encoding="utf-8")
    return True


def pinned(platform: str) -> dict[str, str]:
    """The version of each package a platform's driver runs, as its requirements pin it."""
    _check(platform)
    lock = (
        environment(platform) / "requirements.lock" if platform in OWN_ENVIRONMENT else ROOT / "requirements-dev.lock"
    )
    versions = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        name, _, rest = line.partition("==")
        if rest and name.strip() in PACKAGES[platform]:
            versions[name.strip()] = rest.split()[0].rstrip("\\").strip()
    return dict(sorted(versions.items()))


def run_driver(platform: str, payload: dict) -> dict:
    """The platform driver's answer to ``payload`` (its cases), as JSON."""
    if not installed(platform):
        raise ReferenceUnavailable(
            f"the pinned {platform} environment is not installed in "
            f"{environment(platform).relative_to(ROOT)}/.venv: run ./scripts/setup.sh --test "
            "(it needs PyPI)"
        )
    done = subprocess.run(
        [python(platform), "-m", f"tests.reference.python.{platform}_driver"],
        input=json.dumps(payload),
        text=True,
        capture_output=True,
        timeout=DRIVER_TIMEOUT,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if done.returncode != 0:
        raise RuntimeError(f"the {platform} driver failed:\n{done.stderr.strip()[-3000:]}")
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    return install_command(
        argv,
        "tests.reference.python_packages",
        OWN_ENVIRONMENT,
        install,
        lambda p: f"{environment(p).relative_to(ROOT)}/.venv",
    )


if __name__ == "__main__":
    sys.exit(main())
