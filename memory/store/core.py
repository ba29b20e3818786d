"""The LanceDB store: one writer per process, batched writes, audited changes, scoped reads.

`Store` is the public data-access API of the store package. Code outside memory/store reads and writes through
it and never holds a table handle or writes a filter (tests/test_architecture.py):
- reads (memory/store/store_reads.py): `scan` / `rows` / `count` by kind or side table, `get_many`, `get`,
  `list`, `derived_from` (memories drawn from evidence), `nearest`, `is_tombstoned` / `tombstoned` — each
  returning this device's rows and the shared scopes' together, under the scope filter;
- writes: the memory, evidence and vault methods here, and for side tables `add_rows` / `upsert_rows` /
  `update_rows` / `delete_rows` (memory/store/store_writes.py); `write_lock` to hold writers back;
- filters from memory/store/filters.py, and the row builders for an import that replays rows.
Table handles (`memories`, `evidence`, …, `table(name)`) and `scan_table` / `table_rows` / `commit` are for the
store package's own modules.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.config import Config, data_dir, load_config
from memory.errors import FIND_IDS, Hint, InputError, MiradorError, NotFoundError, SharedOfflineError, StorageError
from memory.scopes import validate_scope
from memory.store import builders, permissions
from memory.store import filters as F
from memory.store import tables as T
from memory.store.audit import ACTORS_AUTOMATED, audit_row, diff
from memory.store.embedder_record import (  # noqa: F401  (re-exported: callers import them from here)
    EMBEDDER_RECORD,
    RECORD_CHECK_S,
    configured_embedder,
    earlier_tuning,
    embedder_record,
    note_user,
    record_stamp,
    write_embedder_record,
    write_record,
)
from memory.store.fingerprint import fingerprint
from memory.store.lancedb_import import lancedb  # its pydantic models built on first use, not at import
from memory.store.lifecycle import memory_rescoped
from memory.store.migrations import apply_migrations
from memory.store.reads import Reader
from memory.store.remote import Remotes
from memory.store.remote_evidence import EvidenceMirror
from memory.store.rows import (
    EvidenceRow,
    MemoryRow,
    VaultRow,
    kind_of,
    public_evidence,
    public_memory,
    public_vault,
)
from memory.store.scrub import RowScrubber
from memory.store.seal_migration import seal_at_open, sealed_already
from memory.store.sealer import Sealer
from memory.store.speakers import SpeakerNames
from memory.store.specs import EvidenceSpec, MemorySpec
from memory.store.store_reads import Reads, not_found
from memory.store.store_writes import Writes
from memory.store.tables import EVIDENCE_COLS, MEMORY_COLS, VAULT_COLS
from memory.store.tallies import Tallies
from memory.store.vault_crypto import VaultCipher, legacy_pending, reseal_legacy
from memory.types import (
    MAX_LABEL_CHARS,
    MAX_MEMORY_CHARS,
    TRANSITIONS,
    MemoryType,
    Status,
    check_text,
    parse_status,
    parse_type,
    utcnow,
)

__all__ = ["EMBEDDER_RECORD", "EVIDENCE_COLS", "MEMORY_COLS", "RECORD_CHECK_S", "VAULT_COLS", "EvidenceSpec",
           "MemorySpec", "Store", "configured_embedder", "earlier_tuning", "embedder_record",
           "write_embedder_record", "write_record"]

log = logging.getLogger(__name__)

OPEN_LOCK = ".store-open.lock"


if TYPE_CHECKING:
    from memory.store.context import StreamKey
    from memory.store.embedding import Embedder
    from models.embedder import Embedder as ModelEmbedder


class Store(Reads, Writes):
    """Opens (and migrates) the store in a data directory and owns every write to it."""

    def __init__(self, home: Path | None = None, config: Config | None = None, embedder: Embedder | None = None) -> None:
        self.home = Path(home) if home else data_dir()
        # LanceDB's Rust writers create files with the process umask: owner-only from here on, and whatever
        # an older version or another program left wider is tightened once (memory/store/permissions.py).
        permissions.restrict_umask()
        self.home.mkdir(mode=permissions.DIR_MODE, parents=True, exist_ok=True)
        permissions.tighten(self.home)
        self.config = config or load_config(self.home)
        self._scrubber = RowScrubber(self.config.privacy)
        # Strong read consistency: another process (the MCP stdio server, the app) may write the same
        # store, and a reader must see its commits; the per-read version check is a local stat.
        self.db = lancedb.connect(str(self.home / "lancedb"), read_consistency_interval=timedelta(0))
        self._fixed_embedder = embedder is not None
        self._embedder: Embedder = embedder if embedder is not None else self._own_embedder()
        self._record_seen, self._record_checked = record_stamp(self.home), time.monotonic()
        # Held by every write (commit): hold it to keep this process's writers out for a while.
        self.write_lock = threading.RLock()
        self._batches_since_optimize = 0
        # the last evidence row per stream (context.place_in_runs)
        self._stream_tails: dict[StreamKey, tuple[str, int, datetime]] = {}
        self._tables: dict[str, Any] = {}  # table(name): handles opened once
        self._snapshots: dict[str, tuple[int, Any]] = {}  # versioned()
        self.tallies = Tallies(self)  # counts per scope for status, kept per fragment (tallies.py)
        self.cipher = VaultCipher(self.home, self.config.vault.key_store)
        self.keys = self.cipher.keys  # the data key (memory/store/keys.py): lock, unlock, seal
        # Every column of what was captured or written is sealed with it at rest (memory/store/sealer.py).
        self.sealer = Sealer(self.keys)
        self.speakers = SpeakerNames(self.sealer)
        # search reads (memory/store/reads.py)
        self.reader = Reader(self.home / "lancedb", forgets=T.TOMBSTONES, sealer=self.sealer)
        from filelock import FileLock

        # One process at a time creates, migrates or seals a store: the app and an assistant's server opening a
        # new folder together would both create its tables (one fails), and two sealings of an older store would
        # turn vectors twice. Held only while the store opens; an opened store is not locked.
        self.open_lock = FileLock(self.home / OPEN_LOCK, mode=0o600)  # reentrant: seal_migration takes it too
        with self.open_lock:
            self.migrations_applied = apply_migrations(self.db, self.embedder.dim)
        self.reopen_tables()
        self._check_dim()
        if legacy_pending(self.home):  # an older version's vault.key beside the vault: reseal, then erase it
            reseal_legacy(self)
        # Shared scopes (config remote.bindings): their memories live on S3-compatible storage.
        self.remotes = Remotes(self, evidence=EvidenceMirror)
        self.keys.sealed_data = self._holds_sealed_data
        with self.open_lock:
            seal_at_open(self)  # what an older version stored in the clear (memory/store/seal_migration.py)

    def _holds_sealed_data(self) -> bool:
        return sealed_already(self) and any(
            t.count_rows() for t in (self.memories, self.evidence, self.vault, self.audit))

    # ---- the embedder ---------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        """The embedder of this store's vectors. It follows embedder.json, so once `mirador reembed`
        (in any process) records another model, queries and writes here use it within RECORD_CHECK_S."""
        if not self._fixed_embedder and time.monotonic() - self._record_checked >= RECORD_CHECK_S:
            self._record_checked = time.monotonic()
            stamp = record_stamp(self.home)
            if stamp != self._record_seen:
                self._record_seen = stamp
                self._embedder = self._own_embedder()
        return self._embedder

    def use_embedder(self, emb: Embedder) -> None:
        """Embed with emb from now on (memory/store/reembed.py, which has just recorded it)."""
        self._embedder, self._record_seen = emb, record_stamp(self.home)
        note_user(emb, self.home)

    def _own_embedder(self) -> Embedder:
        """_recorded_embedder(), noted as a user of the merged copy it loads (if it is one)."""
        emb = self._recorded_embedder()
        note_user(emb, self.home)
        return emb

    def _recorded_embedder(self) -> ModelEmbedder:
        """The embedder this store's vectors come from: tuned or as shipped (models.embedder_tuning)
        for a new store, and whatever it was made with ever after (embedder.json), since vectors of
        two models in one table are not comparable. A store from before tuning existed holds rows
        embedded as shipped."""
        m = self.config.models
        made = embedder_record(self.home)
        emb = configured_embedder(m, made["tuned"] if made else (m.embedder_tuning and not self._has_rows()))
        # The tuned copy's directory is named by base weights and delta: it names the vectors' model.
        weights = emb.model_dir.name if emb.tuning else None
        if made and made.get("staging"):
            log.info("a re-embed of this store to %s is running, or stopped before it switched over: searches "
                     "use the current vectors until it does — if no `mirador reembed` is running, run it again "
                     "to finish (what it has embedded so far is kept)", made["staging"])
        if made is None:
            write_embedder_record(self.home, emb)
        elif made.get("reembedding"):
            log.warning("this store is being re-embedded, or a re-embed stopped before it finished: searches "
                        "match poorly until it is done — if no `mirador reembed` is running, run it again")
        elif made["tuned"] and made.get("weights") != weights:
            kept = earlier_tuning(m, made)
            if kept is not None:
                log.warning("this store's vectors come from an earlier tuning of the embedder (%s); it "
                            "keeps using that model, cached in %s, until `mirador reembed` moves it to "
                            "the current one (%s)", made.get("weights"), kept.model_dir, weights or "untuned")
                return kept
            log.warning("this store's vectors come from the tuned embedder %s, but %s is what can be made now: "
                        "searches will match poorly until `mirador reembed` re-embeds the store (or "
                        "models.embedder_dir points back at the model it was made with)",
                        made.get("weights"), weights or f"{emb.base_dir} untuned")
        elif m.embedder_tuning and not made["tuned"]:
            log.info("this store was embedded untuned; it keeps that embedder until `mirador reembed` "
                     "re-embeds it with the tuned one (new stores use the tuned one)")
        return emb

    def _has_rows(self) -> bool:
        names = set(self.db.table_names())
        return any(self.db.open_table(t).count_rows() for t in (T.EVIDENCE, T.MEMORIES) if t in names)

    def _check_dim(self) -> None:
        stored = self.memories.schema.field("vector").type.list_size
        if stored != self.embedder.dim:
            raise MiradorError(
                f"the store holds {stored}-dimension vectors but the embedder in {self.embedder.model_dir} "
                f"makes {self.embedder.dim} — point models.embedder_dir back at the old model, "
                "or export, move the data dir aside, and import into a new store"
            )

    @property
    def default_scope(self) -> str:
        """Where a row goes when its writer names no scope (store.default_scope in the config)."""
        return self.config.store.default_scope

    # ---- tables ---------------------------------------------------------------------------

    def reopen_tables(self) -> None:
        """Open the tables afresh (after the store was created, or a purge rewrote them)."""
        self.memories = self.db.open_table(T.MEMORIES)
        self.evidence = self.db.open_table(T.EVIDENCE)
        self.vault = self.db.open_table(T.VAULT)
        self.tombstones = self.db.open_table(T.TOMBSTONES)
        self.audit = self.db.open_table(T.AUDIT)
        self._tables.clear()

    @property
    def relations(self) -> Any:
        """The relations table (memory/graph/relations.py; created by migration m005_relations)."""
        return self.table(T.RELATIONS)

    @property
    def usage(self) -> Any:
        """The memory-usage table (memory/graph/reinforcement.py; created by m006_reinforcement)."""
        return self.table(T.USAGE)

    # ---- write plumbing (memory/store/store_writes.py has the rest) ------------------------

    def _upsert(self, table: Any, row: dict[str, Any], actor: str = "person",
                old: dict[str, Any] | None = None) -> None:
        # actor and old (the version edited) let a shared scope settle concurrent edits (remote.py).
        if table.name == T.MEMORIES and self.remotes.put(row, actor=actor, old=old):
            return  # a shared scope's memory: queued for its remote store (memory/store/remote.py)
        self.merge_rows(table, [row], insert=True)

    def _after_batch(self) -> None:
        self._batches_since_optimize += 1
        if self._batches_since_optimize >= self.config.store.optimize_after_writes:
            # Light pass only: training a vector index on a large table is slow and belongs to the
            # scheduled maintenance (service / scheduler), not to a writer.
            from memory.store.indexes import maintain

            with self.write_lock:
                try:
                    maintain(self, train=False, wait=0)  # skipped while another process maintains the store
                except StorageError as e:  # the rows are written: a full disk must not report them failed
                    log.warning("compaction after a write batch skipped: %s", e)
                self._batches_since_optimize = 0

    def optimize(self, stop: threading.Event | None = None) -> dict[str, Any]:
        """Compact fragments and bring indexes up to date with rows added since the last build.

        Full-text indexes always; vector and scalar indexes once a table is large (memory/store/indexes.py,
        which also indexes evidence.search_text from memory/store/context.py). stop: a threading.Event that
        ends the pass between two commits (the scheduler's, at quit).
        """
        from memory.store.indexes import maintain

        with self.write_lock:
            report = maintain(self, stop=stop)
            self._batches_since_optimize = 0
        return report

    # ---- row builders (validated rows, before embedding) ----------------------------------

    @property
    def scrubber(self) -> RowScrubber:
        """Redacts what every row builder below is handed (memory/store/scrub.py), per the live privacy config."""
        self._scrubber.configure(self.config.privacy)
        return self._scrubber

    def memory_row(self, spec: MemorySpec, now: datetime | None = None) -> MemoryRow:
        """The memories-table row spec makes (no vector), secrets redacted; InputError says what is wrong."""
        return builders.memory_row(self.scrubber.memory(spec)[0], now or utcnow(), self.default_scope)

    def vault_row(self, spec: MemorySpec, now: datetime | None = None) -> VaultRow:
        """The vault-table row spec makes, its value encrypted with this store's key (its label redacted)."""
        return builders.vault_row(self.scrubber.memory(spec)[0], now or utcnow(), self.default_scope, self.cipher)

    def evidence_row(self, spec: EvidenceSpec, now: datetime | None = None) -> EvidenceRow:
        """The evidence-table row spec makes (no index text, run or vector), secrets redacted."""
        return builders.evidence_row(self.scrubber.evidence(spec), now or utcnow(), self.default_scope)

    # ---- memories -------------------------------------------------------------------------

    def add_memory(
        self,
        text: str | None,
        type: str = "semantic",
        actor: str = "person",
        *,
        scope: str | None = None,
        title: str | None = None,
        details: dict[str, Any] | None = None,
        status: str = "active",
        confidence: float = 1.0,
        salience: float = 0.5,
        provenance: list[str] | None = None,
        origin: str = "person",
        pinned: bool = False,
        user_edited: bool = False,
        valid_from: datetime | None = None,
        supersedes: str | None = None,
        superseded_by: str | None = None,
        valid_to: datetime | None = None,
        created_at: datetime | None = None,
        id: str | None = None,
        value: str | None = None,
    ) -> dict[str, Any]:
        """Create one memory (any of the six types) and return its public row. The keywords are MemorySpec's
        fields (memory/store/specs.py), with its defaults; value is the secret of a vault entry."""
        spec = MemorySpec(
            text=text, type=type, scope=scope, title=title, details=details, status=status, confidence=confidence,
            salience=salience, provenance=[] if provenance is None else provenance, origin=origin, pinned=pinned,
            user_edited=user_edited, valid_from=valid_from, supersedes=supersedes, superseded_by=superseded_by,
            valid_to=valid_to, created_at=created_at, id=id, value=value)
        return self.add_memories([spec], actor=actor)[0]

    def add_memories(self, specs: list[MemorySpec], actor: str = "person") -> list[dict[str, Any]]:
        """Validate every spec first, then write them in one batch with one audit row each."""
        now = utcnow()
        is_vault = [parse_type(s.type) == MemoryType.VAULT for s in specs]
        if actor in ACTORS_AUTOMATED and any(is_vault):
            raise InputError(f"{actor} may not write the vault; only the person adds secrets")
        rows: list[dict[str, Any]] = [
            dict(self.vault_row(s, now)) if v else dict(self.memory_row(s, now))
            for s, v in zip(specs, is_vault, strict=True)]
        mem_rows = [r for r, v in zip(rows, is_vault, strict=True) if not v]
        vault_rows = [r for r, v in zip(rows, is_vault, strict=True) if v]
        if mem_rows:
            vecs = self.embedder.embed([r["search_text"] for r in mem_rows])
            for r, vec in zip(mem_rows, vecs, strict=True):
                r["vector"] = vec
            # Rows of shared scopes go to their remote store (through the outbox); the rest stay here.
            self.append(self.memories, self.remotes.divert(mem_rows, actor=actor), self.memories.schema)
        self.append(self.vault, vault_rows, T.vault_schema())
        out = [public_vault(r) if v else public_memory(r) for r, v in zip(rows, is_vault, strict=True)]
        self.write_audit([
            audit_row(actor, "create", "vault", o["id"], o["scope"], after={"label": o["label"]}) if v
            else audit_row(actor, "create", "memory", o["id"], o["scope"], after=o)
            for o, v in zip(out, is_vault, strict=True)
        ])
        self._after_batch()
        return out

    def _one(self, kind: str, id_: str, scopes: Iterable[str] | None, cols: list[str]) -> dict[str, Any]:
        from memory.store.reads import Leg

        where = F.and_(F.id_is(id_), F.scope_in(scopes))
        # Through the async reader, as searches: the sync query builder costs extra round trips per read.
        rows = self.reader.run(Leg(self.kind_table(kind).name, where, tuple(cols), 1))[0]
        if not rows and kind in ("memory", "evidence"):  # a shared scope's (or another device's shared evidence)
            rows = self._shared_rows(kind, scopes, where, cols, 1)
        if not rows and kind == "memory":
            raise self.missing(id_, scopes)
        if not rows:
            raise NotFoundError(not_found(id_), hint=FIND_IDS)
        return rows[0]

    def missing(self, id_: str, scopes: Iterable[str] | None = None, message: str | None = None) -> MiradorError:
        """The error for a memory id that a read did not find: not found (message, or the standard one), unless a
        shared store the read reached did not answer — then "not found" would be a wrong answer, as the memory
        may well be there."""
        offline = [s for s in self.remotes.reading(scopes) if s.last_error] if self.remotes.shared else []
        if offline:
            return SharedOfflineError(
                f"{id_} may be a memory of the shared scope {offline[0].binding.scope}, whose store does not "
                f"answer now ({offline[0].last_error}): it can be read or changed when the store is back",
                hint=Hint(cli="`mirador remote test` checks it", mcp="try again later; tell the person if it lasts"))
        return NotFoundError(message or not_found(id_), hint=FIND_IDS)

    def _raw_memory(self, id_: str, scopes: Iterable[str] | None = None, with_vector: bool = False) -> dict[str, Any]:
        return self._one("memory", id_, scopes, MEMORY_COLS + (["vector"] if with_vector else []))

    def get(self, id_: str, scopes: Iterable[str] | None = None) -> dict[str, Any]:
        """Any row by id (memory, evidence or vault label), as its public dict; scopes limit what is visible."""
        kind = kind_of(id_)
        if kind == "memory":
            return public_memory(self._raw_memory(id_, scopes))
        if kind == "evidence":
            return public_evidence(self._one("evidence", id_, scopes, EVIDENCE_COLS))
        return public_vault(self._one("vault", id_, scopes, VAULT_COLS))

    def update_memory(
        self,
        id_: str,
        *,
        actor: str = "person",
        text: str | None = None,
        title: str | None = None,
        details: dict[str, Any] | None = None,
        scope: str | None = None,
        confidence: float | None = None,
        salience: float | None = None,
        pinned: bool | None = None,
        provenance_add: Iterable[str] = (),
        scopes: Iterable[str] | None = None,
    ) -> dict[str, Any]:
        """Edit a memory. A person's edit marks it user_edited; automated actors may not touch those."""
        if kind_of(id_) == "vault":
            return self.update_vault(id_, actor=actor, label=text, scope=scope, scopes=scopes)
        old = self._raw_memory(id_, scopes, with_vector=True)
        automated = actor in ACTORS_AUTOMATED
        if automated and (old["user_edited"] or old["pinned"]) and (text or title or details or scope):
            raise InputError(f"{id_} was edited or pinned by the person; {actor} may only corroborate it")
        mtype = MemoryType(old["type"])
        new_details = json.loads(old["details"])
        if details:
            new_details.update(details)
        if text is not None:
            new_details[builders.main_field(mtype)] = text
        spec = MemorySpec(
            id=old["id"], text=text if text is not None else old["text"], type=old["type"],
            scope=scope or old["scope"], title=title if title is not None else (None if text else old["title"]),
            details=new_details, status=old["status"],
            confidence=old["confidence"] if confidence is None else confidence,
            salience=old["salience"] if salience is None else salience,
            provenance=list(old["provenance"] or []) + list(provenance_add), origin=old["origin"],
            pinned=old["pinned"] if pinned is None else pinned,
            user_edited=old["user_edited"] or (not automated and bool(text or title or details or scope)),
            valid_from=old["valid_from"], valid_to=old["valid_to"], supersedes=old["supersedes"],
            superseded_by=old["superseded_by"], created_at=old["created_at"],
        )
        row: dict[str, Any] = dict(self.memory_row(spec, utcnow()))
        if row["search_text"] != old.get("search_text"):
            row["vector"] = self.embedder.embed([row["search_text"]])[0]
        else:
            row["vector"] = old["vector"]
        self._upsert(self.memories, row, actor=actor, old=old)
        if row["scope"] != old["scope"]:
            self.remotes.moved(id_, old["scope"], row["scope"])  # into or out of a shared scope
            memory_rescoped(self, id_, row["scope"])  # e.g. the end scopes of its edges (memory/graph)
        before, after = diff(public_memory(old), public_memory(row))
        after.pop("updated_at", None)
        before.pop("updated_at", None)
        self.write_audit([audit_row(actor, "update", "memory", id_, row["scope"], before, after)])
        self._after_batch()
        return public_memory(row)

    def set_status(self, id_: str, status: str, actor: str = "person", scopes: Iterable[str] | None = None,
                   superseded_by: str | None = None) -> dict[str, Any]:
        """Move a memory along its lifecycle; illegal moves are refused with the allowed ones named.
        superseded_by: with status superseded, the memory that replaced it (one write, local or shared)."""
        new = parse_status(status)
        old = self._raw_memory(id_, scopes, with_vector=True)
        cur = Status(old["status"])
        if new == cur:
            return public_memory(old)
        if new not in TRANSITIONS[cur]:
            allowed = ", ".join(s.value for s in TRANSITIONS[cur]) or "none"
            raise InputError(f"cannot move {id_} from {cur.value} to {new.value}; allowed: {allowed}")
        if actor in ACTORS_AUTOMATED and new == Status.REJECTED:
            raise InputError(f"{actor} may propose but not reject; a person decides")
        row = dict(old)
        row["status"] = new.value
        row["updated_at"] = utcnow()
        if new == Status.SUPERSEDED and row["valid_to"] is None:
            row["valid_to"] = row["updated_at"]
        if new == Status.ACTIVE:
            row["valid_to"] = None
        if superseded_by is not None and new == Status.SUPERSEDED:
            row["superseded_by"] = superseded_by
        self._upsert(self.memories, row, actor=actor, old=old)
        self.write_audit([audit_row(actor, "status", "memory", id_, row["scope"], {"status": cur.value},
                                    {"status": new.value})])
        return public_memory(row)

    def supersede(self, old_id: str, spec: MemorySpec, actor: str = "person") -> tuple[dict[str, Any], dict[str, Any]]:
        """Replace a memory with a new version: old row keeps its text, gets valid_to and superseded_by."""
        old = self._raw_memory(old_id, with_vector=True)
        if actor in ACTORS_AUTOMATED and (old["user_edited"] or old["pinned"]):
            raise InputError(f"{old_id} was edited or pinned by the person; {actor} may not supersede it")
        spec.supersedes = old_id
        spec.scope = spec.scope or old["scope"]
        spec.type = spec.type or old["type"]
        new = self.add_memories([spec], actor=actor)[0]
        row = dict(old)
        now = utcnow()
        row.update(status=Status.SUPERSEDED.value, valid_to=now, superseded_by=new["id"], updated_at=now)
        self._upsert(self.memories, row, actor=actor, old=old)
        self.write_audit([audit_row(actor, "supersede", "memory", old_id, row["scope"],
                                    {"status": old["status"]}, {"status": "superseded", "superseded_by": new["id"]})])
        return public_memory(row), new

    # ---- vault ----------------------------------------------------------------------------

    def reveal(self, id_: str, actor: str = "person", scopes: Iterable[str] | None = None) -> str:
        """Decrypt a vault value. The only way a value leaves the vault; audited (without the value)."""
        if kind_of(id_) != "vault":
            raise InputError(f"{id_} is not a vault entry; only vlt_ ids have secret values")
        row = self._one("vault", id_, scopes, VAULT_COLS)
        self.write_audit([audit_row(actor, "reveal", "vault", id_, row["scope"])])
        return self.cipher.decrypt(row["value_enc"])

    def frame_bytes(self, path: str | None) -> bytes | None:
        """The image of an evidence row's frame (frame_path), opened with the data key; None when the file is gone.

        Frames of older versions (plain WebP) come back as they are. Raises LockedError / KeyUnavailableError."""
        if not path:
            return None
        p = Path(path)
        full = p if p.is_absolute() else self.home / p
        try:
            blob = full.read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            return None
        try:
            rel = full.relative_to(self.home).as_posix()
        except ValueError:
            rel = p.as_posix()
        return self.keys.open_bytes(blob, "frame:" + rel)

    def reseal_vault_value(self, id_: str, token: str) -> None:
        """Replace a vault value's sealed form (same secret, new key); audited without the value."""
        row = dict(self._one("vault", id_, None, VAULT_COLS))
        row["value_enc"] = token
        self._upsert(self.vault, row)
        self.write_audit([audit_row("system", "reseal", "vault", id_, row["scope"])])

    def update_vault(self, id_: str, *, actor: str = "person", label: str | None = None, value: str | None = None,
                     scope: str | None = None, scopes: Iterable[str] | None = None) -> dict[str, Any]:
        """Change a vault entry's label, value or scope."""
        if actor in ACTORS_AUTOMATED:
            raise InputError(f"{actor} may not write the vault")
        old = self._one("vault", id_, scopes, VAULT_COLS)
        row = dict(old)
        if label is not None:
            label = self.scrubber.text(label)[0] or ""
            row["label"] = check_text(label, MAX_LABEL_CHARS, "vault label").strip()
            row["fingerprint"] = fingerprint(row["label"])
        if value is not None:
            row["value_enc"] = self.cipher.encrypt(check_text(value, MAX_MEMORY_CHARS, "vault value"))
        if scope is not None:
            row["scope"] = validate_scope(scope)
        row["updated_at"] = utcnow()
        self._upsert(self.vault, row)
        changed = {k: row[k] for k in ("label", "scope") if row[k] != old[k]}
        if value is not None:
            changed["value"] = "(changed)"
        self.write_audit([audit_row(actor, "update", "vault", id_, row["scope"],
                                    {k: old.get(k) for k in changed if k != "value"}, changed)])
        return public_vault(row)

    # ---- evidence -------------------------------------------------------------------------

    def add_evidence(self, text: str, actor: str = "person", **kw: Any) -> dict[str, Any]:
        """Store one evidence row and return it."""
        return self.add_evidence_batch([EvidenceSpec(text=text, **kw)], actor=actor)[0]

    def add_evidence_batch(self, specs: list[EvidenceSpec], actor: str = "capture",
                           embed_texts: list[str] | None = None, context: Any = None) -> list[dict[str, Any]]:
        """Validate, embed and write many evidence rows in one commit; one audit row for the batch.

        `text` stays exactly what was captured; what is indexed (search_text, vector) adds the
        speaker, resolved dates and neighbouring rows (memory/store/context.py; `context` overrides its
        ContextConfig). embed_texts, when given, replaces the embedded text.
        """
        from memory.store.context import index_texts, place_in_runs

        if not specs:
            return []
        now = utcnow()
        rows: list[dict[str, Any]] = [dict(self.evidence_row(s, now)) for s in specs]
        search_texts, ctx_texts = index_texts(rows, context)
        with self.write_lock:
            runs = place_in_runs(rows, self._stream_tails, context)
        for r, st, (run, pos) in zip(rows, search_texts, runs, strict=True):
            r["search_text"], r["run_id"], r["run_pos"] = st, run, pos
        self.speakers.note(rows)
        vecs = self.embedder.embed(embed_texts if embed_texts is not None else ctx_texts)
        for r, v in zip(rows, vecs, strict=True):
            r["vector"] = v
        self.append(self.evidence, rows, self.evidence.schema)
        scopes = sorted({r["scope"] for r in rows})
        # Evidence is high-volume: one audit row per batch, listing ids (never the text).
        self.write_audit([audit_row(actor, "create", "evidence", rows[0]["id"] if len(rows) == 1 else f"batch:{len(rows)}",
                                    ",".join(scopes), after={"ids": [r["id"] for r in rows]})])
        # A copy of the rows of a scope whose binding shares evidence goes to its bucket (remote_evidence.py).
        self.remotes.evidence.mirror(rows)
        self._after_batch()
        return [public_evidence(r) for r in rows]

    def speaker_names(self) -> set[str]:
        """The speakers this store's evidence names (and their first names), for query rewriting."""
        return self.speakers.get(self.evidence)

    # ---- listing and counting -------------------------------------------------------------

    def decay_salience(self, ids: list[str]) -> None:
        """Halve the salience of these memories of this device, pinned ones left alone (the caller audits it).

        This device's rows only: every device sharing a scope runs its own dream pass, so a shared memory
        halved here would be halved again by each of them."""
        memories = self.memories
        for start in range(0, len(ids), 500):
            where = F.and_(F.id_in(ids[start:start + 500]), F.equals("pinned", False))
            self.commit(lambda w=where: memories.update(where=w, values_sql={"salience": "salience * 0.5"}))

    def stats(self) -> dict[str, Any]:
        """Row counts per table (memories: this device's and the shared scopes'), memory counts per type and
        status, and bytes on disk."""
        mem = self.scan("memory", None, ["id", "type", "status"])

        def counts(col: str) -> dict[str, int]:
            out: dict[str, int] = {}
            for v in mem[col].to_pylist():
                out[v] = out.get(v, 0) + 1
            return dict(sorted(out.items()))

        size = sum(p.stat().st_size for p in self.home.rglob("*") if p.is_file())
        return {
            "data_dir": str(self.home),
            "memories": mem.num_rows,
            "shared_memories": mem.num_rows - self.memories.count_rows(),
            "memories_by_type": counts("type"),
            "memories_by_status": counts("status"),
            "vault": self.vault.count_rows(),
            "evidence": self.evidence.count_rows(),
            "tombstones": self.tombstones.count_rows(),
            "audit": self.audit.count_rows(),
            "bytes_on_disk": size,
            "embedder": str(self.embedder.model_dir),
        }
