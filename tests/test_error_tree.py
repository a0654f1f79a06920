"""core/errors.py documents every exception the core raises for bad input, so the tree stays true."""

import importlib
import inspect
import pkgutil

import core
from core import errors
from core.errors import MemLensError

#: The packages that keep every exception class they define in their own ``errors.py``.
OWN_ERRORS_MODULE = ("analysis", "api", "cli", "flow", "io", "llm", "memory", "model", "report", "service", "store")


def _core_modules() -> list:
    modules = []
    for info in pkgutil.walk_packages(core.__path__, "core."):
        if ".migrations" in info.name or info.name == "core.__main__":
            continue
        modules.append(importlib.import_module(info.name))
    return modules


def _core_error_classes() -> set[type]:
    _core_modules()
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


def test_each_package_defines_its_exceptions_in_its_errors_module_deriving_from_the_common_base():
    """Walks every module of these packages: any exception class one defines is in ``core/<package>/errors.py``,
    and every one of them but the API's HTTP answer and two internal signals is a MemLensError (so in the tree
    above)."""
    seen = {}
    for module in _core_modules():
        parts = module.__name__.split(".")
        if len(parts) < 3 or parts[1] not in OWN_ERRORS_MODULE:
            continue
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == module.__name__:
                seen[name] = obj
                assert module.__name__ == f"core.{parts[1]}.errors", f"move {name} to core/{parts[1]}/errors.py"
    assert {
        "FlowError",
        "ConfigError",
        "LLMError",
        "CompareError",
        "FormatError",
        "FileInputError",
        "UsageError",
        "StoreError",
        "SessionChangedError",
        "ReportError",
    } <= set(seen)
    internal = {name for name, cls in seen.items() if not issubclass(cls, MemLensError)}
    assert internal == {"NodeFailed", "TooManyProblems", "ApiError"}, internal
    assert all(name in errors.__doc__ for name in internal)
