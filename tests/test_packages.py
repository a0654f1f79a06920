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
    code = (
        "import sys, core.model, core.memory, core.flow, core.analysis; "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('core.'))))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert loaded.stdout.split() == ["core.analysis", "core.flow", "core.memory", "core.model"]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_public_name_shares_its_name_with_a_module_of_the_package(package):
    """``from core.service import pull`` would give the function until ``core.service.pull`` is imported once,
    and the module after: a public name is never also a module's name, unless it is that module."""
    import pkgutil

    module = importlib.import_module(package)
    modules = {m.name for m in pkgutil.iter_modules(module.__path__)}
    for name in set(module.__all__) & modules:
        # What the package's own __getattr__ gives for the name, before the module's import shadows it.
        given = module.__getattr__(name) if hasattr(module, "__getattr__") else None
        assert given is importlib.import_module(f"{package}.{name}"), f"{package}.{name} is a module and a name"


def test_the_pages_and_components_import_the_core_through_its_packages():
    """``ui/`` and ``pages/`` read a package's public surface (``from core.memory import Replay``), never the
    module that defines a name: the core can move a name between its modules without touching the app."""
    import ast

    offending = []
    for path in [ROOT / "app.py", *(ROOT / "pages").glob("*.py"), *(ROOT / "ui").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [node.module]
                if isinstance(node, ast.ImportFrom) and node.module and not node.level
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for name in names:
                target = ROOT.joinpath(*name.split("."))
                if (
                    name.startswith("core.")
                    and not (target / "__init__.py").exists()
                    and target.parent != ROOT / "core"
                ):
                    offending.append(f"{path.relative_to(ROOT)}: {name}")
    assert offending == []
