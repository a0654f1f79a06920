"""MemLens memory core: conversations, token accounting, memory strategies and their ledgers.

Pure Python; never imports Streamlit. Everything the app shows can be produced from here.
"""

from importlib import import_module
from typing import Any, Callable, Mapping

#: MemLens's version, the one place it is written: the package's metadata (pyproject.toml),
#: ``memlens --version``, the app's About and the Service API's ``/v1/info`` read it.
__version__ = "1.0.0"


def public_api(
    package: str, homes: Mapping[str, tuple[str, ...]], *, modules: tuple[str, ...] = (), here: tuple[str, ...] = ()
) -> tuple[list[str], Callable[[str], Any]]:
    """A package's public names (its ``__all__``) and the ``__getattr__`` that loads each from its module.

    ``homes`` maps each module of the package to the names it gives the other packages, ``ui/`` and
    ``pages/``; ``modules`` are the modules used whole (``from core.store import repo``) and ``here`` the
    names the package's ``__init__`` defines itself. A name is read from its module when it is used
    (PEP 562), so importing a package imports none of its modules: the import order, and with it the
    absence of import cycles, stays that of the modules themselves.
    """
    home = {name: module for module, names in homes.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name in modules:
            return import_module(f"{package}.{name}")
        if name not in home:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(f"{package}.{home[name]}"), name)

    return [*here, *modules, *home], __getattr__
