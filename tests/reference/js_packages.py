"""The pinned JavaScript that n8n and Flowise run, installed beside the tests and run by their drivers.

Each platform has a folder under ``tests/reference/js/`` (``n8n``, ``flowise``) whose ``package.json``
and ``package-lock.json`` pin the LangChain JS releases the platform's own release pins, and whose
``memlensSources`` list the platform's source files the drivers load (the files of a published npm
tarball, checked against the integrity npm publishes). :func:`install` puts both in the folder's
``node_modules/`` (``npm ci``; the platform files under ``node_modules/.platform/NAME@VERSION/``) and
stamps them, so a second run is a no-op; ``./scripts/setup.sh --test`` runs it::

    python -m tests.reference.js_packages install

:func:`run_driver` feeds a batch of cases to a platform's ``driver.js`` on stdin and reads its JSON
answer. Plain Python only: no MemLens import, so the refresh script runs it anywhere.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from tests.reference.installing import ReferenceUnavailable, install_command

JS_ROOT = Path(__file__).resolve().parent / "js"
PLATFORMS = ("n8n", "flowise")
PLATFORM_DIR = ".platform"
STAMP = ".memlens-stamp"
#: How long one batch of cases may take; a platform's whole suite runs in a few seconds.
DRIVER_TIMEOUT = 600
_NPM_TIMEOUT = 900


def folder(platform: str) -> Path:
    if platform not in PLATFORMS:
        raise ValueError(f"unknown platform {platform!r}; expected one of {', '.join(PLATFORMS)}")
    return JS_ROOT / platform


def manifest(platform: str) -> dict:
    return json.loads((folder(platform) / "package.json").read_text(encoding="utf-8"))


def pinned(platform: str) -> dict:
    """What the platform's folder pins: every package its lockfile installs (name → version) and the
    platform releases its source files come from (``name@version``)."""
    lock = json.loads((folder(platform) / "package-lock.json").read_text(encoding="utf-8"))
    packages = {
        name.removeprefix("node_modules/"): entry["version"]
        for name, entry in lock["packages"].items()
        if name.startswith("node_modules/")
    }
    sources = [f"{s['package']}@{s['version']}" for s in manifest(platform).get("memlensSources", [])]
    return {"packages": dict(sorted(packages.items())), "sources": sources}


def _stamp(platform: str) -> str:
    here = folder(platform)
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((here / name).read_bytes())
    return digest.hexdigest()


def installed(platform: str) -> bool:
    """Whether the platform's folder holds exactly what its package files pin."""
    stamp = folder(platform) / "node_modules" / STAMP
    return stamp.is_file() and stamp.read_text(encoding="utf-8").strip() == _stamp(platform)


def node() -> str:
    found = shutil.which("node")
    if not found:
        raise ReferenceUnavailable(
            "Node.js is not installed: run ./scripts/setup.sh --test (it installs Debian's nodejs package)"
        )
    return found


def source_path(platform: str, package: str, version: str, file: str) -> Path:
    return folder(platform) / "node_modules" / PLATFORM_DIR / f"{package}@{version}" / file


def _integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode("ascii")


def _npm(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    npm = shutil.which("npm")
    if not npm:
        raise ReferenceUnavailable("npm is not installed: run ./scripts/setup.sh --test (it installs Debian's npm)")
    done = subprocess.run(
        [npm, *args, "--no-audit", "--no-fund", "--ignore-scripts"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=_NPM_TIMEOUT,
    )
    if done.returncode != 0:
        raise ReferenceUnavailable(f"npm {args[0]} failed in {cwd.name}: {done.stderr.strip()[-1500:]}")
    return done


def _fetch_source(platform: str, source: dict, scratch: Path) -> None:
    """One platform tarball from the registry (``npm pack``), its integrity checked, its listed files kept."""
    spec = f"{source['package']}@{source['version']}"
    done = _npm(["pack", spec, "--json", "--pack-destination", str(scratch)], folder(platform))
    tarball = scratch / json.loads(done.stdout)[0]["filename"]
    data = tarball.read_bytes()
    if _integrity(data) != source["integrity"]:
        raise ReferenceUnavailable(f"{spec}: the tarball's integrity is not the one package.json pins")
    with tarfile.open(tarball, "r:gz") as archive:
        for file in source["files"]:
            member = archive.extractfile(f"package/{file}")
            if member is None:
                raise ReferenceUnavailable(f"{spec} has no {file}")
            target = source_path(platform, source["package"], source["version"], file)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(member.read())


def install(platform: str, *, force: bool = False) -> bool:
    """Install the platform's pinned packages and sources unless they are already there; True when it installed."""
    if installed(platform) and not force:
        return False
    here = folder(platform)
    _npm(["ci"], here)
    with tempfile.TemporaryDirectory(prefix="memlens-npm-") as scratch:
        for source in manifest(platform).get("memlensSources", []):
            _fetch_source(platform, source, Path(scratch))
    (here / "node_modules" / STAMP).write_text(_stamp(platform) + "\n", encoding="utf-8")
    return True


def require_installed(platform: str) -> None:
    node()
    if not installed(platform):
        raise ReferenceUnavailable(
            f"the pinned {platform} packages are not installed in {folder(platform).relative_to(JS_ROOT.parent.parent.parent)}"
            "/node_modules: run ./scripts/setup.sh --test (it needs npm and the npm registry)"
        )


def run_driver(platform: str, payload: dict) -> dict:
    """The platform driver's answer to ``payload`` (its cases), as JSON."""
    require_installed(platform)
    done = subprocess.run(
        [node(), str(folder(platform) / "driver.js")],
        input=json.dumps(payload),
        text=True,
        capture_output=True,
        timeout=DRIVER_TIMEOUT,
        cwd=folder(platform),
        env={**os.environ, "NODE_OPTIONS": ""},
    )
    if done.returncode != 0:
        raise RuntimeError(f"the {platform} driver failed:\n{done.stderr.strip()[-3000:]}")
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    return install_command(
        argv,
        "tests.reference.js_packages",
        PLATFORMS,
        install,
        lambda p: f"{folder(p).relative_to(JS_ROOT.parent.parent.parent)}/node_modules",
    )


if __name__ == "__main__":
    sys.exit(main())
