"""The LanceDB store: one writer per process, batched writes, audited changes, scoped reads."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import lancedb

from memory.store import tables as T
from memory.store.audit import ACTORS_AUTOMATED, audit_row, diff, utcnow
from memory.config import Config, data_dir, load_config
from memory.errors import InputError, MiradorError, NotFoundError
from memory.store.fingerprint import content_hash, fingerprint
from memory.store.migrations import apply_migrations
from memory.store.rows import kind_of, new_id, public_evidence, public_memory, public_vault, sql_literal_id, to_arrow
from memory.scopes import in_scopes, scope_filter, validate_scope
from memory.store.reads import Reader
from memory.store.speakers import SpeakerNames
from memory.types import (
    EVIDENCE_SOURCES,
    MAX_EVIDENCE_CHARS,
    MAX_LABEL_CHARS,
    MAX_MEMORY_CHARS,
    TRANSITIONS,
    MemoryType,
    Status,
    build_details,
    check_text,
    parse_status,
    parse_type,
)
from memory.store.vault_crypto import VaultCipher

log = logging.getLogger(__name__)

_MEMORY_COLS = [f.name for f in T.memories_schema(1) if f.name not in ("vector",)]
_EVIDENCE_COLS = [f.name for f in T.evidence_schema(1) if f.name != "vector"]
_VAULT_COLS = [f.name for f in T.vault_schema()]
EMBEDDER_RECORD = "embedder.json"  # which embedder this store's vectors come from (Store._own_embedder)
# How often a Store looks whether embedder.json changed (another process's `mirador reembed`); a stat.
RECORD_CHECK_S = 1.0


def embedder_record(home: Path) -> dict | None:
    """What embedder.json says made a store's vectors ({"tuned": bool, ...}); None if it has no record."""
    record = Path(home) / EMBEDDER_RECORD
    try:
        made = json.loads(record.read_text())
        if not isinstance(made, dict) or not isinstance(made.get("tuned"), bool):
            raise ValueError("no 'tuned' flag")
    except FileNotFoundError:
        return None
    except ValueError as e:
        raise MiradorError(f"{record} is damaged ({e}) — restore it from a backup, or delete it if this "
                           "store was made before Mirador tuned its embedder") from e
    return made


def configured_embedder(models, tuned: bool):
    """The embedder the settings (a ModelsConfig) name, with the bundled tuning merged in or not."""
    from models import tuning

    return _embedder_at(models, models.embedder_dir, tuning.BUNDLED if tuned else None)


def earlier_tuning(models, made: dict | None):
    """The embedder of an earlier release's tuning that the record `made` names, if its merged copy is
    still in the tuning cache; else None.

    An upgrade that ships a new delta leaves the old merged copy behind: the very model the store's
    vectors came from, so searches keep matching until `mirador reembed` moves the store on.
    """
    from models import tuning

    here = tuning.cached_copy(made.get("weights")) if made and made.get("tuned") else None
    return _embedder_at(models, here, None) if here else None


def _embedder_at(m, model_dir: Path | None, delta: Path | None):
    from models.embedder import shared_embedder

    return shared_embedder(model_dir, m.embedder_batch_size, m.embedder_threads, m.onnx_dir, m.embedder_onnx, delta)


def write_embedder_record(home: Path, emb, **extra) -> dict:
    """Record emb as the embedder of the store in home (atomically: a reader never sees half a file)."""
    weights = emb.model_dir.name if emb.tuning else None
    return write_record(home, {"tuned": weights is not None, "weights": weights, "embedder": emb.name, **extra})


def write_record(home: Path, made: dict) -> dict:
    """Write embedder.json as `made`, atomically."""
    record = Path(home) / EMBEDDER_RECORD
    tmp = record.with_name(f"{record.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(made) + "\n")
    os.replace(tmp, record)
    return made


def _note_user(emb, home: Path) -> None:
    """A merged copy keeps a list of the data dirs that embed with it (models/tuning.py, release)."""
    from models import tuning

    if tuning.is_copy(emb.model_dir):
        tuning.note_user(emb.model_dir, home)


def _record_stamp(home: Path) -> tuple | None:
    try:
        st = os.stat(Path(home) / EMBEDDER_RECORD)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


@dataclass
class MemorySpec:
    """What it takes to create a memory; everything but text and type has a default."""

    text: str | None
    type: str = "semantic"
    scope: str | None = None
    title: str | None = None
    details: dict[str, Any] | None = None
    status: str = "active"
    confidence: float = 1.0
    salience: float = 0.5
    provenance: list[str] = field(default_factory=list)
    origin: str = "person"
    pinned: bool = False
    user_edited: bool = False
    valid_from: datetime | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    valid_to: datetime | None = None
    created_at: datetime | None = None
    id: str | None = None
    value: str | None = None  # vault only: the secret


@dataclass
class EvidenceSpec:
    """One captured unit of evidence (text already redacted by capture)."""

    text: str
    source: str = "manual"
    app: str = ""
    window: str = ""
    speaker: str = ""
    scope: str | None = None
    captured_at: datetime | None = None
    redactions: int = 0
    frame_path: str | None = None
    meta: dict[str, Any] | None = None
    id: str | None = None


def _is_conflict(exc: Exception) -> bool:
    text = str(exc).lower()
    return "conflict" in text or "retryable" in text or "concurrent" in text


class Store:
    """Opens (and migrates) the store in a data directory and owns every write to it."""

    def __init__(self, home: Path | None = None, config: Config | None = None, embedder=None) -> None:
        self.home = Path(home) if home else data_dir()
        self.home.mkdir(parents=True, exist_ok=True)
        self.config = config or load_config(self.home)
        # Strong read consistency: another process (the MCP stdio server, the app) may write the same
        # store, and a reader must see its commits; the per-read version check costs ~nothing locally.
        self.db = lancedb.connect(str(self.home / "lancedb"), read_consistency_interval=timedelta(0))
        self._fixed_embedder = embedder is not None
        self._embedder = embedder if embedder is not None else self._own_embedder()
        self._record_seen, self._record_checked = _record_stamp(self.home), time.monotonic()
        self._lock = threading.RLock()
        self._batches_since_optimize = 0
        self._stream_tails: dict[tuple, tuple] = {}  # last evidence row per stream (context.place_in_runs)
        self.speakers = SpeakerNames()
        self.reader = Reader(self.home / "lancedb", forgets=T.TOMBSTONES)  # search reads (memory/store/reads.py)
        self.migrations_applied = apply_migrations(self.db, self.embedder.dim)
        self.memories = self.db.open_table(T.MEMORIES)
        self.evidence = self.db.open_table(T.EVIDENCE)
        self.vault = self.db.open_table(T.VAULT)
        self.tombstones = self.db.open_table(T.TOMBSTONES)
        self.audit = self.db.open_table(T.AUDIT)
        self._check_dim()
        self.cipher = VaultCipher(self.home, self.config.vault.key_store)

    @property
    def embedder(self):
        """The embedder of this store's vectors. It follows embedder.json, so once `mirador reembed`
        (in any process) records another model, queries and writes here use it within RECORD_CHECK_S."""
        if not self._fixed_embedder and time.monotonic() - self._record_checked >= RECORD_CHECK_S:
            self._record_checked = time.monotonic()
            stamp = _record_stamp(self.home)
            if stamp != self._record_seen:
                self._record_seen = stamp
                self._embedder = self._own_embedder()
        return self._embedder

    def use_embedder(self, emb) -> None:
        """Embed with emb from now on (memory/store/reembed.py, which has just recorded it)."""
        self._embedder, self._record_seen = emb, _record_stamp(self.home)
        _note_user(emb, self.home)

    def _own_embedder(self):
        """_recorded_embedder(), noted as a user of the merged copy it loads (if it is one)."""
        emb = self._recorded_embedder()
        _note_user(emb, self.home)
        return emb

    def _recorded_embedder(self):
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
        return self.config.store.default_scope

    # ---- write plumbing -------------------------------------------------------------------

    def _commit(self, fn: Callable[[], Any], attempts: int = 6) -> Any:
        """Run a write, retrying when another writer (e.g. the MCP stdio process) committed first."""
        delay = 0.05
        for i in range(attempts):
            try:
                with self._lock:
                    return fn()
            except Exception as e:  # lance raises plain RuntimeError/OSError for commit conflicts
                if i == attempts - 1 or not _is_conflict(e):
                    raise
                log.info("commit conflict, retrying (%s)", e)
                time.sleep(delay)
                delay *= 2
        return None

    def _append(self, table, rows: list[dict], schema) -> None:
        if rows:
            data = to_arrow(rows, schema)
            self._commit(lambda: table.add(data))

    def _audit(self, rows: list[dict]) -> None:
        self._append(self.audit, rows, T.audit_schema())

    def _after_batch(self) -> None:
        self._batches_since_optimize += 1
        if self._batches_since_optimize >= self.config.store.optimize_after_writes:
            # Light pass only: training a vector index takes tens of seconds at 100k rows and
            # belongs to the scheduled maintenance (service / scheduler), not to a writer.
            from memory.store.indexes import maintain

            with self._lock:
                maintain(self, train=False)
                self._batches_since_optimize = 0

    def optimize(self, stop=None) -> dict:
        """Compact fragments and bring indexes up to date with rows added since the last build.

        Full-text indexes always; vector and scalar indexes once a table is large (memory/store/indexes.py,
        which also indexes evidence.search_text from memory/store/context.py). stop: a threading.Event that
        ends the pass between two commits (the scheduler's, at quit).
        """
        from memory.store.indexes import maintain

        with self._lock:
            report = maintain(self, stop=stop)
            self._batches_since_optimize = 0
        return report

    # ---- memories -------------------------------------------------------------------------

    def _memory_row(self, spec: MemorySpec, now: datetime) -> dict:
        mtype = parse_type(spec.type)
        details = build_details(mtype, spec.text, spec.details)
        text = check_text(spec.text if spec.text is not None else details.summary(), MAX_MEMORY_CHARS)
        status = parse_status(spec.status)
        if status == Status.DELETED:
            raise InputError("status 'deleted' is reached only by `mirador delete`, which erases the memory")
        for name, v in (("confidence", spec.confidence), ("salience", spec.salience)):
            if not 0.0 <= float(v) <= 1.0:
                raise InputError(f"{name} must be between 0 and 1, got {v}")
        title = (spec.title or _title_from(text)).strip()
        detail_json = details.model_dump(mode="json", exclude_none=True)
        search_text = " ".join([title, text] + _detail_words(detail_json, text))
        return {
            "id": spec.id or new_id("memory"),
            "type": mtype.value,
            "scope": validate_scope(spec.scope or self.default_scope),
            "title": title[:200],
            "text": text,
            "details": json.dumps(detail_json, ensure_ascii=False, sort_keys=True),
            "search_text": search_text,
            "status": status.value,
            "confidence": float(spec.confidence),
            "salience": float(spec.salience),
            "provenance": list(dict.fromkeys(spec.provenance or [])),
            "supersedes": spec.supersedes,
            "superseded_by": spec.superseded_by,
            "valid_from": spec.valid_from or spec.created_at or now,
            "valid_to": spec.valid_to,
            "created_at": spec.created_at or now,
            "updated_at": now,
            "origin": spec.origin,
            "user_edited": bool(spec.user_edited),
            "pinned": bool(spec.pinned),
            "fingerprint": fingerprint(text),
        }

    def add_memory(self, text: str | None, type: str = "semantic", actor: str = "person", **kw) -> dict:
        """Create one memory (any of the six types) and return its public row."""
        return self.add_memories([MemorySpec(text=text, type=type, **kw)], actor=actor)[0]

    def add_memories(self, specs: list[MemorySpec], actor: str = "person") -> list[dict]:
        """Validate every spec first, then write them in one batch with one audit row each."""
        now = utcnow()
        is_vault = [parse_type(s.type) == MemoryType.VAULT for s in specs]
        if actor in ACTORS_AUTOMATED and any(is_vault):
            raise InputError(f"{actor} may not write the vault; only the person adds secrets")
        rows = [self._vault_row(s, now) if v else self._memory_row(s, now) for s, v in zip(specs, is_vault, strict=True)]
        mem_rows = [r for r, v in zip(rows, is_vault, strict=True) if not v]
        vault_rows = [r for r, v in zip(rows, is_vault, strict=True) if v]
        if mem_rows:
            vecs = self.embedder.embed([r["search_text"] for r in mem_rows])
            for r, vec in zip(mem_rows, vecs, strict=True):
                r["vector"] = vec
            self._append(self.memories, mem_rows, self.memories.schema)
        self._append(self.vault, vault_rows, T.vault_schema())
        out = [public_vault(r) if v else public_memory(r) for r, v in zip(rows, is_vault, strict=True)]
        self._audit([
            audit_row(actor, "create", "vault", o["id"], o["scope"], after={"label": o["label"]}) if v
            else audit_row(actor, "create", "memory", o["id"], o["scope"], after=o)
            for o, v in zip(out, is_vault, strict=True)
        ])
        self._after_batch()
        return out

    def _scan(self, table, where: str | None, cols: list[str], limit: int | None = None):
        """Filtered scan as Arrow; limit None means every matching row."""
        q = table.search()
        if where:
            q = q.where(where)
        if limit is None:
            limit = max(table.count_rows(where) if where else table.count_rows(), 1)
        return q.select(cols).limit(limit).to_arrow()

    def versioned(self, key: str, table, load, version: int | None = None):
        """load(table), kept until the table's version moves: for small tables read inside every search.

        The version check is a fraction of a millisecond; a LanceDB query there costs 5-15 ms.
        version: the table's latest version when the caller has just read it (Reader.versions).
        """
        version = table.version if version is None else version
        snap = self.__dict__.get(key)
        if snap is None or snap[0] != version:
            snap = self.__dict__[key] = (version, load(table))
        return snap[1]

    def _rows(self, table, where: str | None, cols: list[str], limit: int | None = 1) -> list[dict]:
        return self._scan(table, where, cols, limit).to_pylist()

    def _raw_memory(self, id_: str, scopes: Iterable[str] | None = None, with_vector: bool = False) -> dict:
        where = f"id = {sql_literal_id(id_)}"
        sf = scope_filter(scopes)
        if sf:
            where += f" AND {sf}"
        cols = _MEMORY_COLS + (["vector"] if with_vector else [])
        rows = self._rows(self.memories, where, cols)
        if not rows:
            raise NotFoundError(_not_found(id_))
        return rows[0]

    def get(self, id_: str, scopes: Iterable[str] | None = None) -> dict:
        """Any row by id (memory, evidence or vault label), as its public dict; scopes limit what is visible."""
        kind = kind_of(id_)
        if kind == "memory":
            return public_memory(self._raw_memory(id_, scopes))
        table, cols, conv = (
            (self.evidence, _EVIDENCE_COLS, public_evidence) if kind == "evidence" else (self.vault, _VAULT_COLS, public_vault)
        )
        where = f"id = {sql_literal_id(id_)}"
        sf = scope_filter(scopes)
        rows = self._rows(table, where + (f" AND {sf}" if sf else ""), cols)
        if not rows:
            raise NotFoundError(_not_found(id_))
        return conv(rows[0])

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
    ) -> dict:
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
            new_details[_main_field(mtype)] = text
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
        row = self._memory_row(spec, utcnow())
        if row["search_text"] != old.get("search_text"):
            row["vector"] = self.embedder.embed([row["search_text"]])[0]
        else:
            row["vector"] = old["vector"]
        self._upsert(self.memories, row)
        if row["scope"] != old["scope"]:
            from memory.graph.relations import rescope

            rescope(self, id_, row["scope"])
        before, after = diff(public_memory(old), public_memory(row))
        after.pop("updated_at", None)
        before.pop("updated_at", None)
        self._audit([audit_row(actor, "update", "memory", id_, row["scope"], before, after)])
        self._after_batch()
        return public_memory(row)

    def _upsert(self, table, row: dict) -> None:
        data = to_arrow([row], table.schema)
        self._commit(
            lambda: table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(data)
        )

    def set_status(self, id_: str, status: str, actor: str = "person", scopes: Iterable[str] | None = None) -> dict:
        """Move a memory along its lifecycle; illegal moves are refused with the allowed ones named."""
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
        self._upsert(self.memories, row)
        self._audit([audit_row(actor, "status", "memory", id_, row["scope"], {"status": cur.value}, {"status": new.value})])
        return public_memory(row)

    def supersede(self, old_id: str, spec: MemorySpec, actor: str = "person") -> tuple[dict, dict]:
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
        self._upsert(self.memories, row)
        self._audit([audit_row(actor, "supersede", "memory", old_id, row["scope"],
                               {"status": old["status"]}, {"status": "superseded", "superseded_by": new["id"]})])
        return public_memory(row), new

    # ---- vault ----------------------------------------------------------------------------

    def _vault_row(self, spec: MemorySpec, now: datetime) -> dict:
        label = (spec.details or {}).get("label") or spec.title or spec.text
        label = check_text(label, MAX_LABEL_CHARS, "vault label")
        if not spec.value:
            raise InputError("a vault entry needs a secret value: pass it with --value-stdin (or value= in code)")
        check_text(spec.value, MAX_MEMORY_CHARS, "vault value")
        return {
            "id": spec.id or new_id("vault"),
            "label": label.strip(),
            "value_enc": self.cipher.encrypt(spec.value),
            "scope": validate_scope(spec.scope or self.default_scope),
            "provenance": list(spec.provenance or []),
            "created_at": spec.created_at or now,
            "updated_at": now,
            "origin": spec.origin,
            "fingerprint": fingerprint(label),
        }

    def reveal(self, id_: str, actor: str = "person", scopes: Iterable[str] | None = None) -> str:
        """Decrypt a vault value. The only way a value leaves the vault; audited (without the value)."""
        if kind_of(id_) != "vault":
            raise InputError(f"{id_} is not a vault entry; only vlt_ ids have secret values")
        sf = scope_filter(scopes)
        rows = self._rows(self.vault, f"id = {sql_literal_id(id_)}" + (f" AND {sf}" if sf else ""), _VAULT_COLS)
        if not rows:
            raise NotFoundError(_not_found(id_))
        self._audit([audit_row(actor, "reveal", "vault", id_, rows[0]["scope"])])
        return self.cipher.decrypt(rows[0]["value_enc"])

    def update_vault(self, id_: str, *, actor: str = "person", label: str | None = None, value: str | None = None,
                     scope: str | None = None, scopes: Iterable[str] | None = None) -> dict:
        """Change a vault entry's label, value or scope."""
        if actor in ACTORS_AUTOMATED:
            raise InputError(f"{actor} may not write the vault")
        sf = scope_filter(scopes)
        rows = self._rows(self.vault, f"id = {sql_literal_id(id_)}" + (f" AND {sf}" if sf else ""), _VAULT_COLS)
        if not rows:
            raise NotFoundError(_not_found(id_))
        old = rows[0]
        row = dict(old)
        if label is not None:
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
        self._audit([audit_row(actor, "update", "vault", id_, row["scope"], {k: old.get(k) for k in changed if k != "value"}, changed)])
        return public_vault(row)

    # ---- evidence -------------------------------------------------------------------------

    def _evidence_row(self, spec: EvidenceSpec, now: datetime) -> dict:
        text = check_text(spec.text, MAX_EVIDENCE_CHARS, "evidence text")
        if spec.source not in EVIDENCE_SOURCES:
            raise InputError(f"unknown evidence source {spec.source!r}: use one of {', '.join(EVIDENCE_SOURCES)}")
        return {
            "id": spec.id or new_id("evidence"),
            "captured_at": spec.captured_at or now,
            "source": spec.source,
            "app": spec.app or "",
            "window": spec.window or "",
            "speaker": spec.speaker or "",
            "scope": validate_scope(spec.scope or self.default_scope),
            "text": text,
            "redactions": int(spec.redactions),
            "content_hash": content_hash(text),
            "frame_path": spec.frame_path,
            "meta": json.dumps(spec.meta, ensure_ascii=False) if spec.meta else None,
            "extracted_at": None,
        }

    def add_evidence(self, text: str, actor: str = "person", **kw) -> dict:
        """Store one evidence row and return it."""
        return self.add_evidence_batch([EvidenceSpec(text=text, **kw)], actor=actor)[0]

    def add_evidence_batch(self, specs: list[EvidenceSpec], actor: str = "capture",
                           embed_texts: list[str] | None = None, context=None) -> list[dict]:
        """Validate, embed and write many evidence rows in one commit; one audit row for the batch.

        `text` stays exactly what was captured; what is indexed (search_text, vector) adds the
        speaker, resolved dates and neighbouring rows (memory/store/context.py; `context` overrides its
        ContextConfig). embed_texts, when given, replaces the embedded text.
        """
        from memory.store.context import index_texts, place_in_runs

        if not specs:
            return []
        now = utcnow()
        rows = [self._evidence_row(s, now) for s in specs]
        search_texts, ctx_texts = index_texts(rows, context)
        with self._lock:
            runs = place_in_runs(rows, self._stream_tails, context)
        for r, st, (run, pos) in zip(rows, search_texts, runs, strict=True):
            r["search_text"], r["run_id"], r["run_pos"] = st, run, pos
        self.speakers.note(rows)
        vecs = self.embedder.embed(embed_texts if embed_texts is not None else ctx_texts)
        for r, v in zip(rows, vecs, strict=True):
            r["vector"] = v
        self._append(self.evidence, rows, self.evidence.schema)
        scopes = sorted({r["scope"] for r in rows})
        # Evidence is high-volume: one audit row per batch, listing ids (never the text).
        self._audit([audit_row(actor, "create", "evidence", rows[0]["id"] if len(rows) == 1 else f"batch:{len(rows)}",
                               ",".join(scopes), after={"ids": [r["id"] for r in rows]})])
        self._after_batch()
        return [public_evidence(r) for r in rows]

    # ---- listing and counting -------------------------------------------------------------

    def list(self, kind: str = "memory", *, scopes=None, types=None, statuses=None, limit: int = 50,
             offset: int = 0) -> list[dict]:
        """Newest first. Memories default to candidate+active; `statuses=[]` means every status."""
        table, cols, conv, time_col = {
            "memory": (self.memories, _MEMORY_COLS, public_memory, "updated_at"),
            "evidence": (self.evidence, _EVIDENCE_COLS, public_evidence, "captured_at"),
            "vault": (self.vault, _VAULT_COLS, public_vault, "updated_at"),
        }[kind]
        where = self.where(kind, scopes=scopes, types=types, statuses=statuses)
        keys = self._scan(table, where, ["id", time_col])
        order = sorted(zip(keys["id"].to_pylist(), keys[time_col].to_pylist(), strict=True),
                       key=lambda x: (x[1] is not None, x[1]), reverse=True)
        ids = [i for i, _ in order[offset: offset + limit]]
        if not ids:
            return []
        rows = {r["id"]: r for r in self._rows(table, "id IN (" + ", ".join(sql_literal_id(i) for i in ids) + ")", cols, len(ids))}
        return [conv(rows[i]) for i in ids if i in rows]

    def where(self, kind: str, *, scopes=None, types=None, statuses=None, sources=None, apps=None,
              since: datetime | None = None, until: datetime | None = None) -> str | None:
        """The SQL filter every read path hands to LanceDB (scopes, types, status, source, app, time)."""
        from memory.store.rows import ts_literal
        from memory.scopes import sql_literal

        parts = []
        sf = scope_filter(scopes)
        if sf:
            parts.append(sf)
        if kind == "memory":
            if types:
                parts.append("type IN (" + ", ".join(sql_literal(parse_type(t).value) for t in types) + ")")
            sts = [Status.CANDIDATE, Status.ACTIVE] if statuses is None else [parse_status(s) for s in statuses]
            if sts:
                parts.append("status IN (" + ", ".join(sql_literal(s.value) for s in sts) + ")")
        time_col = {"memory": "updated_at", "evidence": "captured_at", "vault": "updated_at"}[kind]
        if kind == "evidence":
            if sources:
                parts.append("source IN (" + ", ".join(sql_literal(s) for s in sources) + ")")
            if apps:
                parts.append("app IN (" + ", ".join(sql_literal(a) for a in apps) + ")")
        if since:
            parts.append(f"{time_col} >= {ts_literal(since)}")
        if until:
            parts.append(f"{time_col} < {ts_literal(until)}")
        return " AND ".join(parts) if parts else None

    def is_tombstoned(self, fp: str) -> bool:
        """True if content with this fingerprint was deleted by the person (so must not be recreated)."""
        return self.tombstones.count_rows(f"fingerprint = {sql_literal_id(fp)}") > 0

    def stats(self) -> dict:
        """Row counts per table, memory counts per type and status, and bytes on disk."""
        def counts(col: str) -> dict:
            arr = self._scan(self.memories, None, [col])[col]
            out: dict[str, int] = {}
            for v in arr.to_pylist():
                out[v] = out.get(v, 0) + 1
            return dict(sorted(out.items()))

        size = sum(p.stat().st_size for p in self.home.rglob("*") if p.is_file())
        return {
            "data_dir": str(self.home),
            "memories": self.memories.count_rows(),
            "memories_by_type": counts("type") if self.memories.count_rows() else {},
            "memories_by_status": counts("status") if self.memories.count_rows() else {},
            "vault": self.vault.count_rows(),
            "evidence": self.evidence.count_rows(),
            "tombstones": self.tombstones.count_rows(),
            "audit": self.audit.count_rows(),
            "bytes_on_disk": size,
            "embedder": str(self.embedder.model_dir),
        }


def _not_found(id_: str) -> str:
    return (f"no row with id {id_} (it never existed, is outside your scopes, or was forgotten) — "
            "find ids with `mirador search` or `mirador list`")


def _title_from(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 80 else line[:77].rstrip() + "..."


def _main_field(mtype: MemoryType) -> str:
    from memory.types import TEXT_FIELD

    return TEXT_FIELD[mtype]


def _detail_words(details: dict, text: str) -> list[str]:
    words = []
    for v in details.values():
        if isinstance(v, list):
            words.extend(str(x) for x in v if str(x) not in text)
        elif isinstance(v, str) and v not in text:
            words.append(v)
    return words
