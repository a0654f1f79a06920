"""`.streamlit/config.toml`: the app started the README's way listens on loopback only, with no file
watcher, no usage statistics and no developer menu ("Deploy")."""

import re
import subprocess
import sys
from pathlib import Path

from tests.browser import streamlit_server
from tests.conftest import ROOT


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a socket listening on ``port`` (IPv4 and IPv6), read from /proc."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


def test_the_app_listens_on_loopback_only_when_started_without_flags(tmp_path):
    env = {"MEMLENS_DATABASE_URL": f"sqlite:///{tmp_path / 'memlens.db'}"}
    with streamlit_server(env, tmp_path / "streamlit.log", config_file_only=True) as url:
        port = int(url.rsplit(":", 1)[1])
        # 127.0.0.1 in /proc's little-endian hex; no 0.0.0.0 or :: (every interface).
        assert listening_addresses(port) == {"0100007F"}


def test_the_config_turns_the_file_watcher_usage_statistics_and_developer_menu_off():
    code = (
        "from streamlit import config; config.get_config_options(force_reparse=True); "
        "print(config.get_option('server.address'), config.get_option('server.fileWatcherType'), "
        "config.get_option('browser.gatherUsageStats'), config.get_option('server.headless'), "
        "config.get_option('client.toolbarMode'), config.get_option('runner.magicEnabled'), "
        "config.get_option('runner.postScriptGC'))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    # The last: no full garbage collection after every rerun (a quarter of a second once litellm is loaded).
    assert out.split() == ["127.0.0.1", "none", "False", "True", "viewer", "False", "False"]


def test_no_page_is_parsed_for_magic(monkeypatch):
    """Magic runs ast.parse over each page on the script thread; CPython 3.11 before 3.11.8 can fail
    that ("AST constructor recursion depth mismatch") when another thread parses at the same moment,
    and a page then opened on an error. With magic off the source is compiled directly."""
    from streamlit.runtime.scriptrunner import magic
    from streamlit.testing.v1 import AppTest

    parsed = []
    monkeypatch.setattr(magic, "add_magic", lambda code, path: parsed.append(path) or code)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("pages/ledger.py").run()
    assert not at.exception and at.title[0].value == "Ledger explorer"
    assert parsed == []


def test_the_readme_names_the_address_the_app_listens_on():
    readme = (ROOT / "README.md").read_text()
    assert "http://127.0.0.1:8501" in readme
    assert not re.search(r"listens on http://(localhost|0\.0\.0\.0)", readme)


AUTH = {
    "redirect_uri": "http://127.0.0.1:8501/oauth2callback",
    "cookie_secret": "a-long-random-secret",
    "client_id": "memlens",
    "client_secret": "client-secret",
    "server_metadata_url": "https://idp.invalid/.well-known/openid-configuration",
}


def _app(tmp_path, monkeypatch, user=None):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("MEMLENS_DATABASE_URL", f"sqlite:///{tmp_path / 'memlens.db'}")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.secrets["auth"] = AUTH
    if user is not None:
        at.user = user
    return at.run()


def test_with_an_auth_section_nobody_sees_a_page_before_logging_in(tmp_path, monkeypatch):
    at = _app(tmp_path, monkeypatch)
    assert not at.exception, at.exception
    assert [b.label for b in at.button] == ["Log in"]
    assert len(at.chat_message) == 0 and not at.dataframe and not at.sidebar.selectbox


def test_a_logged_in_user_gets_the_debugger_and_a_log_out_button(tmp_path, monkeypatch):
    at = _app(tmp_path, monkeypatch, user={"is_logged_in": True, "email": "dana@example.com"})
    assert not at.exception, at.exception
    assert len(at.chat_message) == 16  # the demo conversation
    assert "Log out" in [b.label for b in at.sidebar.button]


PAGE_FILES = sorted(p.name for p in (ROOT / "pages").glob("*.py"))


def test_a_page_opened_by_its_address_first_still_asks_for_the_login(tmp_path, monkeypatch):
    """Streamlit serves the pages/ folder on its own, each file run without app.py, until a run of
    app.py has called st.navigation: a fresh server's first visitor opening /compare skipped the
    login. Each page is opened by its address before anything else, as on a fresh server."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("MEMLENS_DATABASE_URL", f"sqlite:///{tmp_path / 'memlens.db'}")
    assert {"compare.py", "debugger.py", "import.py"} <= set(PAGE_FILES)  # every file there is a page
    for name in PAGE_FILES:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)  # a fresh server's page registry
        at.secrets["auth"] = AUTH
        at.switch_page(f"pages/{name}")  # the address of that page, before app.py ever ran
        at.run()
        assert not at.exception, (name, at.exception)
        assert [b.label for b in at.button] == ["Log in"], name
        assert not at.dataframe and not at.sidebar.selectbox and not at.chat_message, name


def test_without_a_login_a_page_opened_by_its_address_first_opens_that_page(tmp_path, monkeypatch):
    """The same first visit with no login configured: started again through app.py, it still lands
    on the page asked for, not on the default one."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("MEMLENS_DATABASE_URL", f"sqlite:///{tmp_path / 'memlens.db'}")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("pages/ledger.py")
    at.run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Ledger explorer"]
