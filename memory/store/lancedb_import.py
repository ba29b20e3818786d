"""`lancedb`, imported with pydantic's model building deferred to each model's first use.

Why: importing lancedb imports lance_namespace and its REST client, a few hundred pydantic models and
validate_call-wrapped methods for remote namespaces, which a local store never uses. Building their
schemas at import was the largest single cost of every cold CLI call (a Claude Code hook's
`mirador search` or `evidence add`; bench/cold_start.py). Deferred, a model builds its schema the first
time it validates, exactly as it would have at import; ours (memory/config.py, memory/types.py) are
unaffected, since the default is put back right after. pydantic exposes no public switch for this
default: if its private config dict moves, lancedb is imported as before, only slower.

Once imported, the process lets go of the pages of LanceDB's library's read-only data that the import
read (its Python types' tables and docstrings, ~6 MB of a 33 MB segment): a query reads few of them
again, and those come back from the page cache (models/pages.py). Its code pages stay: a query runs
most of the code the import touched.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()


@contextmanager
def _pydantic_builds_deferred() -> Iterator[None]:
    try:
        from pydantic._internal._config import config_defaults
    except ImportError:
        yield
        return
    with _lock:
        before = config_defaults.get("defer_build", False)
        config_defaults["defer_build"] = True
        try:
            yield
        finally:
            config_defaults["defer_build"] = before


with _pydantic_builds_deferred():
    import lancedb  # noqa: E402


def _release_import_pages() -> None:
    from models import pages

    native = getattr(getattr(lancedb, "_lancedb", None), "__file__", None)
    if native:
        pages.release(native, perms=("r--p",))  # its relocated part (also r--p) has private pages: kept


_release_import_pages()

__all__ = ["lancedb"]
