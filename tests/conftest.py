import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: Third-party telemetry off (and litellm's local model map), before any library under test is imported.
NO_TELEMETRY = Path(__file__).resolve().parent / "no-telemetry.env"


def read_env_file(path: Path) -> dict[str, str]:
    """``NAME=value`` lines; blank lines and ``#`` comments skipped."""
    pairs = (
        line.split("=", 1)
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    )
    return {name.strip(): value.strip() for name, value in pairs}


os.environ.update(read_env_file(NO_TELEMETRY))
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated_database(tmp_path, monkeypatch):
    """Every test gets its own default database, so nothing is ever written to the project's data/."""
    monkeypatch.setenv("MEMLENS_DATABASE_URL", f"sqlite:///{tmp_path / 'default.db'}")


@pytest.fixture(scope="session")
def postgres():
    """One throwaway PostgreSQL cluster for the whole test session."""
    from tests.pg_cluster import Cluster

    cluster = Cluster().start()
    yield cluster
    cluster.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    """A fresh, empty database URL: a SQLite file, then a new database on the PostgreSQL cluster."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'memlens.db'}"
    return request.getfixturevalue("postgres").create_database()


@pytest.fixture
def db(db_url):
    from core.store.db import Database

    database = Database(db_url)
    yield database
    database.dispose()
