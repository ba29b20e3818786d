"""Keep LanceDB's import light: no REST client it does not use.

`import lancedb` imports `lance_namespace`, which imports the models of the generated REST client
`lance_namespace_urllib3_client`; importing any submodule first runs that package's __init__, which
imports every API module of the client as well. Mirador opens local directories and never calls that
REST API, yet every CLI call and Claude Code hook paid for loading it (the largest single part of a
cold `mirador search`). install() registers the package without running its __init__, so importing
its `models` loads the models alone; the first attribute read from the package itself runs the real
__init__ then, so a caller that does use the client still gets all of it. This is the import system's own
mechanism (a module registered in sys.modules); nothing of the package is changed.

On Python < 3.12 LanceDB also marks about a hundred methods with the `overrides` package's @override, which
checks each one's signature at import (about 0.1 s of CPU on a cold start here). That check is left to run:
skipping it meant replacing `overrides.override`, a patch of a third-party package (tests/test_no_patches.py);
on Python 3.12 LanceDB uses typing.override, which checks nothing at run time.
"""

from __future__ import annotations

import importlib.util
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

LAZY_PACKAGES = ("lance_namespace_urllib3_client",)


def install() -> None:
    """Register each LAZY_PACKAGES package unexecuted (a no-op once it is imported, or if it is absent)."""
    for name in LAZY_PACKAGES:
        if name in sys.modules:
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            continue
        module = importlib.util.module_from_spec(spec)

        def __getattr__(attr: str, module: ModuleType = module, spec: ModuleSpec = spec) -> Any:  # noqa: N807
            # the module-level hook
            module.__dict__.pop("__getattr__", None)
            assert spec.loader is not None  # checked above
            spec.loader.exec_module(module)  # the package's own __init__, into the registered module
            return getattr(module, attr)

        module.__getattr__ = __getattr__  # type: ignore[method-assign]
        sys.modules[name] = module
