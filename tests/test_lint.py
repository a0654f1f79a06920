"""The tree keeps ruff's lint and format and mypy's types clean (settings in pyproject.toml): CI fails on a
finding, with the tool's own report as the failure's message."""

import subprocess
import sys

import pytest

from tests.conftest import ROOT


def _run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("check", [("check", "."), ("format", "--check", ".")], ids=["lint", "format"])
def test_ruff_finds_nothing(check):
    done = _run(sys.executable, "-m", "ruff", *check)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_finds_nothing_in_the_model_and_the_memory_rules():
    done = _run(sys.executable, "-m", "mypy")
    assert done.returncode == 0, done.stdout + done.stderr
