from __future__ import annotations

from contextlib import contextmanager

import pytest

from core.proxy.recorder import Recorder
from core.proxy.server import CaptureProxy
from core.store.db import Database
from tests.capture.servers import serving
from tests.capture.stub_upstream import StubUpstream

KEY = "sk-test-DO-NOT-STORE-1234567890"


@pytest.fixture
def stub():
    app = StubUpstream()
    with serving(app) as url:
        app.url = url
        yield app


@pytest.fixture
def capture_db(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'capture.db'}")
    db.path = tmp_path / "capture.db"
    yield db
    db.dispose()


@contextmanager
def running_proxy(db, upstream: str | None = None, **options):
    """The proxy over ``db`` (its recorder started by the server's lifespan); yields its ``/v1`` base URL and
    the recorder (``recorder.wait()`` before reading what it stored)."""
    recorder = Recorder(db, say=lambda line: recorder.lines.append(line))
    recorder.lines = []
    app = CaptureProxy(upstream=upstream, recorder=recorder, **options)
    with serving(app) as url:
        yield f"{url}/v1", recorder
    recorder.close()


@pytest.fixture
def proxy(capture_db, stub):
    with running_proxy(capture_db, f"{stub.url}/v1") as (url, recorder):
        yield url, recorder


@pytest.fixture
def demo_proxy(capture_db):
    with running_proxy(capture_db) as (url, recorder):
        yield url, recorder
