"""Shared scopes: the memories of a bound scope live in a LanceDB store on S3-compatible object storage.

A binding (config `remote.bindings`, docs/sharing.md) names a scope, an `s3://bucket/prefix`, an endpoint
and a region; the access key and secret are in the OS keyring under the binding's name. Memories whose
scope is the bound scope or below it are written there instead of the local memories table, and so are
the relations whose two ends are both memories of that binding (`edge_binding`); every other table
(frames, vault, audit, tombstones, usage; evidence unless the binding shares it) stays on this machine.

Writes go through a local outbox table first and are flushed in batches, at once when the remote
answers and later (`Remotes.flush`, called on every write and by the scheduler) when it does not: a
write never waits on the network, and a flush is idempotent (merge on id), so a batch retried after
a lost answer is neither lost nor doubled. Reads (search, get, list) run the same scope filter inside
the remote query as inside the local one and the store merges the rows (principle 5: scope in every
query). Forget deletes the rows remotely, rewrites the fragments that held them, rebuilds the
full-text index and removes every old version, so no object in the bucket keeps their text
(principle 3).

Tombstones are shared too: a forget queues the forgotten memories' tombstones (id, content fingerprint,
scope; never the text) for the bucket's tombstones table, ahead of the delete. Every device pulls them
into its local tombstones table (`Remotes.pull`, on each full flush), so its extraction never writes the
same content again, and a flush never sends a queued write of a memory another device forgot, nor an
automated write of content that was forgotten there.

Concurrent edits: a queued edit keeps the shared version it started from (outbox_base) and who made it
(outbox_actor). A flush settles it against the bucket's version and commits it only onto that version
(memory/store/remote_conflicts.py): a person beats an automated pass; between people the later edit wins and
the earlier stays as a superseded version, and its maker is told in Review. The bucket's edit log (EDITS:
ids, times, actor, device, person; no text) tells who wrote a version.

Relations: an edge (memory/graph/relations.py) is shared when both its ends are memories of one binding. An
edge with an end in a local scope (or in another binding) stays local: sending it would put the id of a
memory the bucket does not hold into the bucket. Shared edges take the same outbox (ops rput, rdelete) and
are read back with every relation read (`edges`); forgetting a memory removes its shared edges too (op
unlink, sent with the memory's delete), by edge id, and purges their bytes like the memories'.

Evidence: a binding with `evidence = true` also keeps a copy of its scope's evidence in the bucket (text,
index text, vector, metadata; never frames, audio or file paths): memory/store/remote_evidence.py. Without it
the evidence of a shared scope stays on the machine that captured it.

The parts, one job each (each at most 400 lines, tests/test_architecture.py): remote_credentials.py (keyring,
environment, object-store options), remote_shared.py (one binding's bucket: tables, commits, health, maintenance),
remote_outbox.py (the outbox and its flush), remote_pull.py (tombstones pulled from other devices, a forget's
remote half), remote_search.py (reads of the buckets), remote_routing.py (which binding a write goes to, pushes,
moves, forgets, edges); remote_io.py holds what they share, Store.commit's retry among it (retrying.py). Remotes,
below, is them put together.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memory.errors import Hint, InputError
from memory.store.lifecycle import on_forget
from memory.store.remote_check import SETTINGS
from memory.store.remote_credentials import (  # noqa: F401  (the CLI's and the tests' names for them)
    KEYRING_SERVICE,
    credential_env,
    delete_credentials,
    load_credentials,
    require_keyring,
    save_credentials,
    storage_options,
)
from memory.store.remote_io import (  # noqa: F401  (re-exported: callers import them from here)
    EDGE_OPS,
    FLUSH_BATCH,
    OUTBOX,
    covers,
    device_name,
    edits_schema,
    fresh,
    outbox_schema,
    person_name,
    touches,
)
from memory.store.remote_outbox import drop_queued  # noqa: F401  (`mirador remote remove`)
from memory.store.remote_pull import PULLING
from memory.store.remote_routing import Routes
from memory.store.remote_shared import Shared

if TYPE_CHECKING:
    from memory.store.core import Store
    from memory.store.remote_evidence import EvidenceMirror

# What other modules import from here: the store's Remotes, and the names the CLI and the tests use for
# the shared-scope helpers (explicit, for the strict type check's no_implicit_reexport).
__all__ = ["EDGE_OPS", "FLUSH_BATCH", "KEYRING_SERVICE", "OUTBOX", "Remotes", "covers", "credential_env",
           "delete_credentials", "device_name", "drop_queued", "edits_schema", "fresh", "load_credentials",
           "outbox_schema", "person_name", "require_keyring", "save_credentials", "storage_options", "touches"]

log = logging.getLogger(__name__)


class Remotes(Routes):
    """The store's shared scopes: routing of writes through the outbox, and reads of the remote tables.

    Store creates one (`store.remotes`); with no binding configured every method is a cheap no-op.
    """

    def __init__(self, store: Store, evidence: Callable[[Remotes], EvidenceMirror]) -> None:
        self.store = store
        cfg = store.config.remote
        self.flush_interval = cfg.flush_interval_seconds
        self.shared = {b.name: Shared(b, store.embedder.dim, cfg.timeout_seconds) for b in cfg.bindings}
        self._outbox: Any = None
        self._flush_lock = threading.Lock()
        self._flush_file_lock: Any = None
        self._last_failed: float = 0.0
        self._pulled: dict[str, int] = {}  # binding -> version of its bucket's tombstones table last pulled
        self._legs: Any = None  # threads for the shared legs of a search, made on first use
        self.device, self.person = (device_name(store.home), person_name()) if self.shared else ("", "")
        # A lease outlives two maintenance intervals: a device that stopped hands it over after that.
        self.lease_minutes = 2 * cfg.maintain_interval_minutes
        # Evidence copies for bindings with `evidence = true`: memory/store/remote_evidence.py's EvidenceMirror,
        # handed in by the store (it imports this module, so this one may not import it).
        self.evidence: EvidenceMirror = evidence(self)

    def maintain(self, name: str | None = None, elected: bool = False, stop: Any = None) -> dict[str, Any]:
        """Maintain the shared stores (or the one named): {binding: report}. elected=True (the scheduler)
        maintains only the stores whose maintainer lease this device holds or takes, so that of all the
        devices sharing a store one does it; a store that does not answer is reported, not raised."""
        out: dict[str, Any] = {}
        for n, s in self.shared.items():
            if name is not None and n != name:
                continue
            try:
                if elected and not s.lease(self.device, self.lease_minutes):
                    out[n] = {"skipped": "another device maintains it"}
                    continue
                out[n] = s.maintain(stop)
                ev = self.evidence.maintain(s, stop) if self.evidence is not None else None
                if ev is not None:
                    out[n]["evidence"] = ev
            except Exception as e:  # offline: maintenance waits for the next pass
                s._failed(e)
                out[n] = {"error": s.last_error}
        if name is not None and not out:
            raise InputError(f"no shared scope binding named {name!r}", hint=Hint(cli="see `mirador remote list`"))
        return out

    def check(self, max_age: float = 30.0) -> list[dict[str, Any]]:
        """health(), after asking each store that has not answered within max_age seconds whether it
        answers now (one small read; what the tray and the settings window poll)."""
        now = time.time()
        for s in self.shared.values():
            if s.last_ok is not None and s.last_error is None and now - s.last_ok < max_age:
                continue
            if s.last_checked is not None and now - s.last_checked < max_age and max_age > 0:
                continue
            s.last_checked = now
            try:
                try:
                    fresh(s.memories(create=False)).count_rows()
                except (ValueError, FileNotFoundError):  # the store answers; no device has written yet
                    s._connect().table_names()
                s._ok()
            except Exception as e:
                s._failed(e)
        return self.health()

    def health(self) -> list[dict[str, Any]]:
        """Each binding: scope, url, endpoint, whether it shares evidence, queued writes, and the last error or
        success seen. problem: the kind of the last error (remote_check.HEADLINE: "credentials", "bucket", …,
        "timeout"); settings: whether it is one of the binding's settings (the store answers and refuses, so
        the writes waiting will not go until the binding changes) rather than the store being away."""
        from memory.store.remote_check import HEADLINE

        pending = self.pending()
        return [{"name": n, "scope": s.binding.scope, "url": s.binding.url, "endpoint": s.binding.endpoint,
                 "evidence": s.binding.evidence, "pending": pending.get(n, 0),
                 "online": s.last_error is None and s.last_ok is not None, "last_error": s.last_error,
                 "problem": s.problem if s.last_error else None,
                 "headline": HEADLINE.get(s.problem or "", "offline") if s.last_error else None,
                 "settings": bool(s.last_error) and s.problem in SETTINGS} for n, s in self.shared.items()]


def _forgotten(store: Store, ids: list[str], actor: str) -> None:
    remotes = getattr(store, "remotes", None)
    if remotes is not None and not getattr(PULLING, "active", False):
        remotes.forget(ids)


# memory/store/erasure.py erases local rows and then tells the listeners; the remote copies go here.
on_forget(_forgotten)
