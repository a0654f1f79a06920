"""MemLens imports where POSIX-only modules and ``fork`` do not exist (Windows), and token counting then
counts every batch in its own process."""

from __future__ import annotations

import ast
import subprocess
import sys

from tests.conftest import ROOT

#: Standard-library modules that exist on POSIX systems only.
POSIX_ONLY = ("fcntl", "termios", "tty", "pty", "resource", "pwd", "grp", "crypt", "syslog")


def _module_level_imports(tree: ast.Module):
    """Imports run when the module is imported: its body and the bodies of its top-level ``if``s (an
    import inside a ``try`` is guarded, one inside a function runs when called)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If):
            todo += node.body + node.orelse
        elif isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


def test_no_module_imports_a_posix_only_module_when_it_is_imported():
    files = [
        ROOT / "app.py",
        *(ROOT / "core").rglob("*.py"),
        *(ROOT / "ui").rglob("*.py"),
        *(ROOT / "pages").rglob("*.py"),
    ]
    assert len(files) > 100
    found = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in files
        for name in _module_level_imports(ast.parse(path.read_text(encoding="utf-8")))
        if name in POSIX_ONLY
    ]
    assert not found, found


# In a process where the POSIX-only modules cannot be imported and os has no fork: every module of the
# core imports, and a long batch asked of two workers is counted here, with the same counts.
WITHOUT_POSIX = """
import os, sys
for name in %r:
    sys.modules[name] = None  # `import fcntl` now raises ImportError, as on Windows
del os.fork
import importlib, pkgutil
import core
for info in pkgutil.walk_packages(core.__path__, "core."):
    if ".migrations" not in info.name and info.name != "core.__main__":
        importlib.import_module(info.name)
from core.model import tokens
assert tokens.CAN_FORK is False and tokens.encoding_workers() == 1
texts = ["message %%d about the order 4411, and then some more words" %% i for i in range(30000)]
assert sum(map(len, texts)) > tokens.PARALLEL_MIN_CHARS
cache = tokens.CountCache("o200k_base")
assert list(cache.counted(texts, None, 2, 0.5))[-1] == len(texts)
encoding = tokens._encoding("o200k_base")
assert all(cache.counts[t] == len(encoding.encode_ordinary(t)) for t in texts[::997])
print("counted", len(cache.counts))
""" % (POSIX_ONLY,)


def test_without_posix_modules_and_fork_everything_imports_and_counting_stays_in_one_process():
    proc = subprocess.run([sys.executable, "-c", WITHOUT_POSIX], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "counted 30000"


class _FakeMsvcrt:
    """Windows' ``msvcrt.locking`` as far as a turn lock uses it: a byte range locked by one open
    file is refused to every other (``OSError``) until unlocked."""

    LK_UNLCK, LK_NBLCK = 0, 2

    def __init__(self):
        self.held: dict[tuple, int] = {}
        self.calls: list[int] = []

    def locking(self, fd: int, mode: int, nbytes: int) -> None:
        import os

        info = os.fstat(fd)
        key = (info.st_dev, info.st_ino, os.lseek(fd, 0, os.SEEK_CUR), nbytes)
        self.calls.append(mode)
        if mode == self.LK_NBLCK:
            if key in self.held:
                raise OSError(36, "Resource deadlock avoided")
            self.held[key] = fd
        elif self.held.get(key) == fd:
            del self.held[key]
        else:
            raise OSError(13, "Permission denied")


def test_without_fcntl_a_sqlite_turn_lock_is_taken_with_msvcrt_and_still_excludes_a_second_turn(tmp_path, monkeypatch):
    import threading

    import pytest

    from core.store.db import Database
    from core.store.errors import ConversationBusyError

    fake = _FakeMsvcrt()
    monkeypatch.setitem(sys.modules, "fcntl", None)  # `import fcntl` raises ImportError, as on Windows
    monkeypatch.setitem(sys.modules, "msvcrt", fake)
    db = Database(f"sqlite:///{tmp_path / 'memlens.db'}")
    try:
        locks = db._turn_locks
        held, release = threading.Event(), threading.Event()

        def first_turn():
            with locks.hold("conversation-1"):
                held.set()
                release.wait(30)

        worker = threading.Thread(target=first_turn)
        worker.start()
        assert held.wait(30)
        with pytest.raises(ConversationBusyError, match="is busy"):
            with locks.hold("conversation-1", timeout=0.2):
                pass
        with locks.hold("conversation-2", timeout=0.2):  # another bucket: not waiting for the first
            pass
        release.set()
        worker.join(30)
        with locks.hold("conversation-1", timeout=5):  # released: the next turn gets it
            pass
        assert fake.LK_NBLCK in fake.calls and fake.LK_UNLCK in fake.calls and not fake.held
    finally:
        db.dispose()
