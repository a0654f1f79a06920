"""MemLens as a user installs it: the package built from a clean copy of the checkout and installed into a
fresh virtual environment, then run from another folder — `memlens --version`, `memlens replay` on a
sample it carries, the app's pages as `memlens ui` runs them, and `memlens serve`.

The fresh environment gets MemLens alone (``--no-deps``, no index: nothing is downloaded); the packages it
depends on are read from this test run's own environment through a path line, so the install takes
seconds. The package is built without build isolation, with the setuptools requirements-dev.txt pins (the
release pyproject.toml's build-system names)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from core import __version__
from tests.conftest import ROOT

BIN = "Scripts" if os.name == "nt" else "bin"


def _tracked_files() -> list[str]:
    """The checkout's files as a fresh clone has them (untracked files, .venv and data/ left out)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode == 0 and listed.stdout:
        return [name for name in listed.stdout.split("\0") if name and (ROOT / name).is_file()]
    skip = {".git", ".venv", "data", "__pycache__", "build", "dist", "mutants"}
    return [
        str(p.relative_to(ROOT))
        for p in ROOT.rglob("*")
        if p.is_file() and not skip & set(p.relative_to(ROOT).parts) and not p.name.endswith(".egg-info")
    ]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh venv holding MemLens built from a clean copy of the checkout: (venv, wheel, site-packages)."""
    tmp = tmp_path_factory.mktemp("install")
    source = tmp / "memlens"
    for name in _tracked_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    build = subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(tmp / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    wheel = next((tmp / "dist").glob("memlens-*.whl"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / BIN / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # The dependencies: this environment's packages, after the fresh one's own (a plain path line adds
    # the folder only, not the editable checkout this environment's own .pth files point at).
    (site / "memlens-test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run(
        [*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr
    return venv, wheel, site


def _run(venv: Path, *args: str, cwd: Path, timeout: float = 180, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "MEMLENS_DATABASE_URL": f"sqlite:///{cwd / 'memlens.db'}"}
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [str(venv / BIN / "memlens"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


def test_the_wheel_holds_the_app_its_pages_samples_and_settings_and_no_tests(installed):
    _, wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {
        "app.py",
        "pages/debugger.py",
        "ui/entry.py",
        "core/cli/main.py",
        ".streamlit/config.toml",
        "sample_data/conversations/lisbon-trip.json",
        "sample_data/transcripts/SOURCES.md",
        "core/store/migrations/script.py.mako",
    } <= names
    assert not any(n.startswith(("tests/", "benchmarks/", "scripts/")) for n in names)
    metadata = zipfile.ZipFile(wheel).read(f"memlens-{__version__}.dist-info/METADATA").decode()
    requires = re.findall(r"^Requires-Dist: ([A-Za-z0-9_.\-\[\]]+)", metadata, re.M)
    assert "streamlit" in requires and "pytest" not in requires and "playwright" not in requires
    assert "Provides-Extra: postgres" in metadata and "Provides-Extra: auth" in metadata


def test_the_installed_command_says_its_version_and_replays_a_sample_it_carries(installed, tmp_path):
    venv, _, site = installed
    version = _run(venv, "--version", cwd=tmp_path)
    assert (version.returncode, version.stdout.strip()) == (0, f"memlens {__version__}")
    sample = site / "sample_data" / "conversations" / "lisbon-trip.json"
    replay = _run(venv, "replay", str(sample), "--window", "3", "--turn", "12", "--format", "json", cwd=tmp_path)
    assert replay.returncode == 0, replay.stderr
    ledger = json.loads(replay.stdout)["turns"][0]["ledger"]
    assert {e["reason"] for e in ledger} == {"kept", "outside_window"}
    where = subprocess.run(
        [str(venv / BIN / "python"), "-c", "import core, app; print(core.__file__, app.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert all(Path(p).is_relative_to(site) for p in where), where  # the installed copy, not the checkout


def test_the_installed_app_runs_its_pages_from_where_it_is_installed(installed, tmp_path):
    venv, _, site = installed
    code = (
        "import sys\n"
        "from streamlit.testing.v1 import AppTest\n"
        f"at = AppTest.from_file({str(site / 'app.py')!r}, default_timeout=120).run()\n"
        "assert not at.exception, at.exception\n"
        "at.switch_page('pages/compare.py').run()\n"
        "assert not at.exception, at.exception\n"
        "print(at.title[0].value)\n"
    )
    env = {**os.environ, "MEMLENS_DATABASE_URL": f"sqlite:///{tmp_path / 'memlens.db'}"}
    proc = subprocess.run(
        [str(venv / BIN / "python"), "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "Compare memory configs"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(url: str, proc: subprocess.Popen, log: Path, seconds: float = 120) -> bytes:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"exited with {proc.returncode}: {log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=1) as answer:
                return answer.read()
        except OSError:
            time.sleep(0.3)
    pytest.fail(f"{url} did not answer: {log.read_text()[-3000:]}")


def _started(venv: Path, args: list[str], cwd: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "MEMLENS_DATABASE_URL": f"sqlite:///{cwd / 'memlens.db'}"}
    with open(log, "w") as out:
        return subprocess.Popen(
            [str(venv / BIN / "memlens"), *args],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _stop(proc: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(15)


@pytest.mark.skipif(os.name == "nt", reason="process groups: POSIX")
def test_memlens_ui_starts_the_installed_app_on_loopback_with_streamlit_options_passed_on(installed, tmp_path):
    venv, _, _ = installed
    port = _free_port()
    log = tmp_path / "ui.log"
    proc = _started(venv, ["ui", "--server.port", str(port)], tmp_path, log)
    try:
        assert _wait_for(f"http://127.0.0.1:{port}/_stcore/health", proc, log) == b"ok"
    finally:
        _stop(proc)
    shown = log.read_text()
    assert f"http://127.0.0.1:{port}" in shown and "Network URL" not in shown, shown  # the shipped settings


@pytest.mark.skipif(os.name == "nt", reason="process groups: POSIX")
def test_memlens_serve_answers_with_the_version(installed, tmp_path):
    venv, _, _ = installed
    port = _free_port()
    log = tmp_path / "serve.log"
    proc = _started(venv, ["serve", "--port", str(port), "--demo"], tmp_path, log)
    try:
        doc = json.loads(_wait_for(f"http://127.0.0.1:{port}/openapi.json", proc, log))
    finally:
        _stop(proc)
    assert doc["info"]["version"] == __version__
