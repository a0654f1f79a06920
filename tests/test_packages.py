"""The layout: each package of the core names its public names, and importing a package loads none of its
modules until one of those names is used."""

import importlib
import subprocess
import sys

import pytest

from tests.conftest import ROOT

PACKAGES = sorted(".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "core").glob("*/**/__init__.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_every_name_a_package_states_as_public_is_importable_from_it(package):
    module = importlib.import_module(package)
    assert len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        assert hasattr(module, name), name


def test_a_name_a_package_does_not_state_is_refused_as_missing():
    from core import memory

    with pytest.raises(AttributeError, match="'core.memory' has no attribute 'Nothing'"):
        getattr(memory, "Nothing")


def test_a_public_name_is_the_object_its_module_defines():
    from core.memory import Replay
    from core.memory.replay import Replay as defined

    assert Replay is defined


def test_importing_a_package_imports_none_of_its_modules():
    code = ("import sys, core.model, core.memory, core.flow, core.analysis; "
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('core.'))))")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert loaded.stdout.split() == ["core.analysis", "core.flow", "core.memory", "core.model"]
