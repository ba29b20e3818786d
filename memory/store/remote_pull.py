"""Pulling what other devices sharing a scope forgot (memory/store/remote.py): the bucket's tombstones come into
this device's tombstones table, and what they name is removed here as a forget here would remove it; and the
flag (`PULLING`) that tells remote.py's forget listener a pull is applying another device's forget, so it does not
send that forget back.
"""

from __future__ import annotations

import logging
import threading

from memory.store import filters as F
from memory.store import tables as T
from memory.store.remote_io import OUTBOX, automated, fresh, purge_local
from memory.store.remote_outbox import Outbox
from memory.store.remote_shared import Shared

log = logging.getLogger(__name__)


class Pulls(Outbox):
    """Mixed into Remotes (memory/store/remote.py)."""

    def _gone_elsewhere(self, name: str, ids: list[str]) -> None:
        """Memories another device forgot: remove here what a forget here would have removed besides the row
        (which only the bucket held) — the content in this device's audit trail, the local edges that touch
        them (an edge to a memory of a local scope stays on this device) and their use counts — and purge
        those tables, so forget means gone on every device that shares the scope."""
        if not ids:
            return
        from memory.store.lifecycle import memories_forgotten

        audit = self.store.audit
        self.store.clear_audit_content(ids)
        PULLING.active = True  # the listeners' remote half (Remotes.forget) has nothing left to do
        try:
            memories_forgotten(self.store, ids, f"shared:{name}")
        finally:
            PULLING.active = False
        # The outbox too: this device may have written or edited the memory, and every flush left an outbox
        # version holding the whole row it sent. And the use counts, which name it.
        present = set(self.store.db.table_names())
        for table in [audit, self.store.relations] + [self.store.table(n) for n in (T.USAGE, OUTBOX) if n in present]:
            purge_local(self.store, table)

    def pull(self, shared: Shared) -> int:
        """Copy the bucket's tombstones this device lacks into its local tombstones table (audited), and
        drop queued writes they forbid. Returns how many tombstones were new here.

        Skipped while the bucket's tombstones table is at the version this process last pulled: every flush
        pulls, and reading every tombstone each time grows with all a team ever forgot. A queued write a
        tombstone forbids is still refused when it is sent (_stoned), whatever this skips."""
        try:
            version = fresh(shared.tombstones(create=False)).version
        except (ValueError, FileNotFoundError):  # no device forgot anything yet
            return 0
        if self._pulled.get(shared.binding.name) == version:
            return 0
        stones = shared.stones()
        if not stones:
            self._pulled[shared.binding.name] = version
            return 0
        have = set(self.store.get_many(T.TOMBSTONES, [r["id"] for r in stones], ["id"]))
        new = [r for r in stones if r["id"] not in have]
        if new:
            from memory.store.audit import audit_row

            self.store.append(self.store.tombstones, new, T.tombstones_schema())
            self._gone_elsewhere(shared.binding.name, [r["id"] for r in new if (r["kind"] or "memory") == "memory"])
            # Evidence another device forgot: this device's copy goes too (the original, if it captured it).
            if self.evidence is not None:
                self.evidence.gone_elsewhere(shared.binding.name, [r["id"] for r in new if r["kind"] == "evidence"])
            self.store.write_audit([audit_row(f"shared:{shared.binding.name}", "delete", r["kind"] or "memory",
                                              r["id"], r["scope"], after={"tombstone": (r["fingerprint"] or "")[:16],
                                                                          "from": "another device"})
                                    for r in new])
            self.store.reader.forget_cached()
        ob = self.outbox()
        if ob.count_rows():
            dead_ids = {r["id"] for r in stones}
            dead_fps = {r["fingerprint"] for r in stones}
            queued = self.store.table_rows(ob, F.queued(("put",), [shared.binding.name]),
                                           ["id", "scope", "fingerprint", "origin"], None)
            drop = [q for q in queued if q["id"] in dead_ids
                    or (automated(q["origin"]) and q["fingerprint"] in dead_fps)]
            if drop:
                self._drop_queued_puts(sorted({q["id"] for q in drop}))
                self._audit_dropped(shared.binding.name, list({q["id"]: q for q in drop}.values()))
            self._drop_queued_edges(sorted(dead_ids))
        self._pulled[shared.binding.name] = version
        return len(new)


PULLING = threading.local()  # set while a pull applies another device's forget here
