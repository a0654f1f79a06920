"""core/errors.py documents every exception the core raises for bad input, so the tree stays true."""

import importlib
import inspect
import pkgutil

import core
from core import errors
from core.errors import MemLensError


def _core_error_classes() -> set[type]:
    for info in pkgutil.walk_packages(core.__path__, "core."):
        if ".migrations" in info.name or info.name == "core.__main__":
            continue
        importlib.import_module(info.name)
    out, todo = set(), [MemLensError]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__.startswith("core.") and sub not in out:
                out.add(sub)
                todo.append(sub)
    return out


def test_every_bad_input_error_in_the_core_is_in_the_documented_tree():
    classes = _core_error_classes()
    assert len(classes) > 20
    missing = sorted(c.__name__ for c in classes if c.__name__ not in errors.__doc__)
    assert not missing, f"add these to the tree in core/errors.py: {', '.join(missing)}"


def test_the_tree_names_each_class_beside_the_module_it_lives_in():
    lines = [line for line in errors.__doc__.splitlines() if "core/" in line]
    classes = {c.__name__: c for c in _core_error_classes()}
    for line in lines:
        path = line.split()[-1]
        for name in classes:
            if f" {name} " in f" {line.replace(',', ' ')} ":
                assert inspect.getsourcefile(classes[name]).endswith(path), (name, path)
