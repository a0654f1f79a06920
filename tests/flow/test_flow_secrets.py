"""Dify ``secret`` environment variables: marked as secret, their value never kept — not in the store,
an export, a run's output, a page or a log (Dify's DSL export writes them empty, and so does MemLens)."""

import json
import logging
import subprocess
import sys

import pytest
import yaml

from core.cli.app import main
from core.flow.errors import FlowError
from core.flow.graph import SECRET_VALUE, Flow, load_flow
from tests.conftest import FIXTURES, ROOT

SECRET = "sk-live-7f3a9c2e-do-not-leak"


@pytest.fixture
def dsl(tmp_path):
    """Dify's basic chatflow with a secret and a plain environment variable, both read by the LLM prompt."""
    doc = yaml.safe_load((FIXTURES / "dify_dsl" / "dify-fixtures__basic_chatflow.yml").read_text(encoding="utf-8"))
    doc["workflow"]["environment_variables"] = [
        {"id": "e1", "name": "api_key", "value": SECRET, "value_type": "secret", "description": "the CRM key"},
        {"id": "e2", "name": "region", "value": "eu-west", "value_type": "string", "description": ""},
    ]
    llm = next(n for n in doc["workflow"]["graph"]["nodes"] if n["data"]["type"] == "llm")
    llm["data"]["prompt_template"] = [{"role": "system", "text": "key=[{{#env.api_key#}}] region={{#env.region#}}"}]
    path = tmp_path / "secret-flow.yml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    queries = tmp_path / "queries.json"
    queries.write_text(json.dumps(["Hi, I'm Dana.", "What's my name?"]), encoding="utf-8")
    return path, queries


def test_a_secret_is_marked_and_read_empty_as_difys_export_writes_it(dsl):
    flow = load_flow(dsl[0])
    assert flow.secrets == ["api_key"]
    assert flow.environment == {"api_key": SECRET_VALUE, "region": "eu-west"} and SECRET_VALUE == ""
    assert any("api_key" in w and "not kept" in w for w in flow.warnings)
    stored = flow.to_dict()
    assert stored["secrets"] == ["api_key"] and SECRET not in json.dumps(stored)
    assert Flow.from_dict(stored, name="x").secrets == ["api_key"]


def test_a_memlens_flow_file_that_marks_a_value_secret_drops_the_value(dsl):
    stored = load_flow(dsl[0]).to_dict()
    stored["environment"]["api_key"] = SECRET
    assert Flow.from_dict(stored, name="x").environment["api_key"] == SECRET_VALUE
    with pytest.raises(FlowError, match="'secrets' must be a list"):
        Flow.from_dict({**stored, "secrets": "api_key"}, name="x")


def test_no_store_export_run_output_or_log_holds_the_secret(dsl, tmp_path, caplog):
    flow_file, queries = dsl
    db_file = tmp_path / "memlens.db"
    url = f"sqlite:///{db_file}"
    caplog.set_level(logging.DEBUG)
    imported = subprocess.run(
        [sys.executable, "-m", "core", "flows", "import", str(flow_file), "--db", url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert imported.returncode == 0, imported.stderr
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "core",
            "run",
            str(flow_file),
            "--queries",
            str(queries),
            "--format",
            "json",
            "--db",
            url,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    prompt = json.dumps(doc["turns"][0]["nodes"])
    assert "key=[] region=eu-west" in prompt  # the plain variable is read, the secret is empty
    exported = subprocess.run(
        [sys.executable, "-m", "core", "export", doc["conversation_id"], "--db", url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert exported.returncode == 0, exported.stderr
    assert '"secrets"' in exported.stdout and "api_key" in exported.stdout  # still marked as secret
    # In-process too, so the log records of the whole run are captured.
    assert main(["run", str(flow_file), "--queries", str(queries), "--format", "json"]) == 0
    outputs = [imported.stdout, imported.stderr, run.stdout, run.stderr, exported.stdout, exported.stderr, caplog.text]
    assert not [o for o in outputs if SECRET in o]
    # The database files themselves, byte for byte.
    for f in tmp_path.rglob("memlens.db*"):
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f.name
