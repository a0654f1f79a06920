"""The dependencies: the app's apart from the tests', every one pinned, and every package installed —
direct or pulled in — pinned with hashes by the lock files scripts/setup.sh installs."""

from __future__ import annotations

import ast
import re
import tomllib
from importlib.metadata import packages_distributions

import pytest

from tests.conftest import ROOT

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._\-]*)(\[[^\]]*\])?==([^\s;\\]+)")


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def pins(path) -> dict[str, str]:
    """``name: version`` of each ``name==version`` line of a requirements file."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = PIN.match(line.strip())
        if match:
            out[_name(match[1])] = match[3]
        else:
            assert not line.strip() or line.lstrip().startswith("#"), f"{path.name}: not pinned with ==: {line}"
    return out


def lock(path) -> dict[str, tuple[str, int]]:
    """``name: (version, hashes)`` of each package a lock file pins (a name may appear once per marker)."""
    out: dict[str, tuple[str, int]] = {}
    name = None
    for line in path.read_text(encoding="utf-8").splitlines():
        match = PIN.match(line)
        if match:
            name = _name(match[1])
            assert line.rstrip().endswith("\\"), f"{path.name}: {line} has no hashes"
            out.setdefault(name, (match[3], 0))
        elif line.strip().startswith("--hash=sha256:") and name:
            version, hashes = out[name]
            out[name] = (version, hashes + 1)
    return out


PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
RUNTIME, DEV = pins(ROOT / "requirements.txt"), pins(ROOT / "requirements-dev.txt")
EXTRAS = {
    _name(PIN.match(r)[1]): PIN.match(r)[3] for rs in PYPROJECT["project"]["optional-dependencies"].values() for r in rs
}
RUNTIME_LOCK, DEV_LOCK = lock(ROOT / "requirements.lock"), lock(ROOT / "requirements-dev.lock")


def test_the_package_depends_on_requirements_txt_and_has_postgres_and_auth_extras():
    assert "dependencies" in PYPROJECT["project"]["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["dependencies"] == {"file": ["requirements.txt"]}
    assert set(PYPROJECT["project"]["optional-dependencies"]) == {"postgres", "auth"}
    assert set(EXTRAS) == {"psycopg", "authlib"}


@pytest.mark.parametrize(
    "wanted, locked", [("runtime", "runtime"), ("dev", "dev"), ("extras", "dev"), ("runtime", "dev")]
)
def test_every_pin_is_locked_at_its_version_with_hashes(wanted, locked):
    wanted = {"runtime": RUNTIME, "dev": DEV, "extras": EXTRAS}[wanted]
    locked = {"runtime": RUNTIME_LOCK, "dev": DEV_LOCK}[locked]
    for name, version in wanted.items():
        assert name in locked, f"{name} is not in the lock: run scripts/lock.sh"
        assert locked[name][0] == version, f"{name}: pinned {version}, locked {locked[name][0]}: run scripts/lock.sh"
        assert locked[name][1] >= 1


def test_the_test_install_runs_the_app_s_packages_at_the_app_s_versions():
    assert {n: v for n, (v, _) in RUNTIME_LOCK.items()} == {n: DEV_LOCK[n][0] for n in RUNTIME_LOCK}


def test_the_app_install_pulls_no_test_package():
    tests_only = {
        "pytest",
        "pytest-xdist",
        "hypothesis",
        "mutmut",
        "schemathesis",
        "playwright",
        "haystack-ai",
        "langchain-core",
        "langchain-openai",
        "langchain-classic",
        "langsmith",
        "pydantic-ai-slim",
        "pydantic-ai-harness",
        "dify-client",
        "psycopg",
        "authlib",
        "llama-index-core",
        "langgraph",
        "langmem",
    }
    assert tests_only <= set(DEV_LOCK)
    assert not tests_only & set(RUNTIME_LOCK)
    assert not set(DEV) & set(RUNTIME)


def test_the_build_uses_the_setuptools_the_tests_pin():
    assert PYPROJECT["build-system"]["requires"] == [f"setuptools=={DEV['setuptools']}"]


def test_every_library_the_app_imports_is_a_runtime_dependency_or_an_extra():
    distributions = packages_distributions()
    files = [
        ROOT / "app.py",
        *(ROOT / "core").rglob("*.py"),
        *(ROOT / "ui").rglob("*.py"),
        *(ROOT / "pages").rglob("*.py"),
    ]
    imported = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = {m for m in imported if m in distributions and m not in ("core", "ui", "app")}
    assert {"streamlit", "sqlalchemy", "litellm", "fastapi"} <= third_party
    declared = set(RUNTIME) | set(EXTRAS)
    missing = {m: distributions[m] for m in third_party if not {_name(d) for d in distributions[m]} & declared}
    assert not missing, f"imported by the app but not in requirements.txt: {missing}"


def test_the_tests_run_with_third_party_telemetry_off():
    import os

    from tests.conftest import NO_TELEMETRY, read_env_file

    off = read_env_file(NO_TELEMETRY)
    assert {"HAYSTACK_TELEMETRY_ENABLED", "LANGSMITH_TRACING", "STREAMLIT_BROWSER_GATHER_USAGE_STATS"} <= set(off)
    assert all(os.environ[name] == value for name, value in off.items())
    assert ". tests/no-telemetry.env" in (ROOT / ".ci" / "run").read_text()  # CI's whole run, servers included


def test_the_agents_sdk_environment_runs_the_app_s_versions_of_what_both_need():
    """The OpenAI Agents SDK has an environment of its own (it asks for websockets<17); every other package
    it shares with the app is the app's version, so its driver runs the openai and pydantic MemLens runs."""
    folder = ROOT / "tests" / "reference" / "python" / "openai_agents"
    wanted, locked = pins(folder / "requirements.txt"), lock(folder / "requirements.lock")
    assert wanted == {"openai-agents": "0.24.0"} and locked["openai-agents"][0] == "0.24.0"
    shared = set(locked) & set(RUNTIME_LOCK)
    assert {"openai", "pydantic", "starlette", "websockets"} <= shared
    assert {n: locked[n][0] for n in shared - {"websockets"}} == {
        n: RUNTIME_LOCK[n][0] for n in shared - {"websockets"}
    }
    assert locked["websockets"][0].split(".")[0] == "16" and RUNTIME_LOCK["websockets"][0].split(".")[0] == "17"
