"""`lancedb`, imported once for the store, and the pages its import read let go.

Once imported, the process lets go of the pages of LanceDB's library's read-only data that the import
read (its Python types' tables and docstrings, ~6 MB of a 33 MB segment): a query reads few of them
again, and those come back from the page cache (models/pages.py). Its code pages stay: a query runs
most of the code the import touched.

Importing lancedb also builds the schemas of a few hundred pydantic models of its REST namespace client,
which a local store never uses (about 0.07 s of CPU on a cold start here). They used to be deferred by
switching pydantic's private `defer_build` default during the import; that patch of pydantic's internals
is gone (tests/test_no_patches.py), and pydantic offers no public switch for it.
"""

from __future__ import annotations

import lancedb


def _release_import_pages() -> None:
    from models import pages

    native = getattr(getattr(lancedb, "_lancedb", None), "__file__", None)
    if native:
        pages.release(native, perms=("r--p",))  # its relocated part (also r--p) has private pages: kept


_release_import_pages()

__all__ = ["lancedb"]
