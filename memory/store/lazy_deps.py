"""Keep LanceDB's import light: no REST client it does not use.

`import lancedb` imports `lance_namespace`, which imports the models of the generated REST client
`lance_namespace_urllib3_client`; importing any submodule first runs that package's __init__, which
imports every API module of the client as well. Mirador opens local directories and never calls that
REST API, yet every CLI call and Claude Code hook paid for loading it (the largest single part of a
cold `mirador search`). install() puts a finder on sys.meta_path (the import system's documented hook) that
imports that package without running its __init__ yet: the module is an instance of our own module class, so
importing its `models` loads the models alone, and the first attribute read from the package itself runs the real
__init__ (through the package's own loader) into that module, so a caller that does use the client still gets all
of it. Nothing is assigned onto a module or class of the package, and no file of it is changed.

On Python < 3.12 LanceDB also marks about a hundred methods with the `overrides` package's @override, which
checks each one's signature at import (about 0.1 s of CPU on a cold start here). That check is left to run:
skipping it meant replacing `overrides.override`, a patch of a third-party package (tests/test_no_patches.py);
on Python 3.12 LanceDB uses typing.override, which checks nothing at run time.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

LAZY_PACKAGES = ("lance_namespace_urllib3_client",)

_LOCK = threading.RLock()
_RAN: set[str] = set()  # packages whose real __init__ has run (or is running) in their deferred module
# What the import system itself looks up on a new module before setting it: reading these must not run __init__.
_IMPORT_ATTRS = frozenset({"__name__", "__loader__", "__package__", "__spec__", "__path__", "__file__", "__cached__",
                           "__builtins__"})


class DeferredPackage(ModuleType):
    """A package module whose __init__ runs at the first read of an attribute it does not have yet."""

    def __getattr__(self, attr: str) -> Any:
        if attr in _IMPORT_ATTRS:
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")
        loader = getattr(self.__spec__, "loader", None)
        with _LOCK:
            if not isinstance(loader, _DeferredInit) or self.__name__ in _RAN:
                raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")
            _RAN.add(self.__name__)
            loader.real.exec_module(self)  # the package's own __init__, into this module
        return ModuleType.__getattribute__(self, attr)


class _DeferredInit(importlib.abc.Loader):
    """Loads a package as a DeferredPackage; its real loader runs when the package is first used."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return DeferredPackage(spec.name)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing yet: DeferredPackage.__getattr__ runs the real __init__ when it is needed."""


class _DeferFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if name not in LAZY_PACKAGES:
            return None
        real = self._real_spec(name, path, target)
        if real is None or real.loader is None or real.submodule_search_locations is None:
            return None  # absent, or not a package: imported as usual
        spec = importlib.machinery.ModuleSpec(name, _DeferredInit(real.loader), origin=real.origin, is_package=True)
        spec.submodule_search_locations = real.submodule_search_locations
        spec.has_location = real.has_location
        return spec


    def _real_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None
                   ) -> importlib.machinery.ModuleSpec | None:
        """The spec the other finders give (the file system's, or a frozen app's own importer)."""
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec: importlib.machinery.ModuleSpec | None = find(name, path, target)
            if spec is not None:
                return spec
        return None


_FINDER = _DeferFinder()


def install() -> None:
    """Defer each LAZY_PACKAGES package's __init__ (a no-op for one already imported, or when called again)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
