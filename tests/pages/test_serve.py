"""``memlens ui`` starts the app through ``ui.serve``: the app's code is loaded and the demo seeded before the
first visit, once per process."""

import subprocess
import sys

from core.store import repo
from core.store.db import Database
from tests.conftest import ROOT
from ui import data, serve


def test_the_warm_up_seeds_the_store_once_and_the_first_page_reuses_it(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    monkeypatch.setenv("MEMLENS_DATABASE_URL", url)
    serve.warm_up()
    service = data.service_for(url)
    assert service.conversations(), "the demo conversations are in the store before any page ran"
    assert data.service_for(url) is service  # the page's first call finds it made
    assert repo.get_setting(Database(url), "demo.seeded") is True


def test_memlens_ui_runs_streamlit_through_the_warm_up(monkeypatch):
    started = []
    monkeypatch.setattr(subprocess, "Popen", lambda command: started.append(command) or _Done())
    from core.cli.commands.ui import cmd_ui

    class Args:
        rest = ["--server.port", "8502"]

    assert cmd_ui(Args()) == 0
    assert started == [[sys.executable, "-m", "ui.serve", str(ROOT / "app.py"), "--server.port", "8502"]]


class _Done:
    def wait(self):
        return 0
