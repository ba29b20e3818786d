"""A data folder as Mirador wrote it before its text was sealed (issue 40): for migration tests.

Inside `older_version()`, stores are opened and written by today's code with the three things an older
version did not do turned off: migration m008 (the keyed-term column; the word indexes stay), sealing at the
write boundary (text, window, speaker, audit rows in the clear, vectors as embedded) and the sealing of what
is in the clear at open. What lands on disk is what an older version left there.
"""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from memory.store import migrations, seal_migration
from memory.store import sealer as sealer_mod


@contextmanager
def older_version():
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(migrations, "MIGRATIONS", [m for m in migrations.MIGRATIONS if m[0] != "m008_sealed_terms"])
        mp.setattr(sealer_mod.Sealer, "seal_arrow",
                   lambda self, table, data, schema=None: sealer_mod._conform(data, schema) if schema is not None
                   else data)
        mp.setattr("memory.store.core.seal_at_open", lambda store: None)
        mp.setattr(seal_migration, "seal_at_open", lambda store: None)
        yield
    finally:
        mp.undo()


@contextmanager
def apps_in_the_clear():
    """Stores written as the version before evidence apps were sealed wrote them: text, window and speaker
    sealed, vectors turned, `s001_sealed` recorded, but every evidence row's app (and its outbox copy's) in the
    clear and no `s002_apps_sealed`. Rows written inside are the rows that version left."""
    mp = pytest.MonkeyPatch()
    try:
        for table, cols in list(sealer_mod.EQUAL_COLUMNS.items()):
            mp.setitem(sealer_mod.EQUAL_COLUMNS, table, tuple(c for c in cols if c != "app"))
        real = seal_migration.record
        mp.setattr(seal_migration, "record",
                   lambda store, note, name=seal_migration.DONE: None if name == seal_migration.APPS_DONE
                   else real(store, note, name))
        yield
    finally:
        mp.undo()
