"""Re-embed a store: every memory's and evidence row's vector, made again by the embedder a new store
would get now (the tuned one, per models.embedder_tuning). For a store made before the tuning, or
tuned by an older release's delta: vectors of two models do not compare, so a store keeps its
embedder (memory/store/core.py) until this runs.

Only vectors change. The text, search_text and every other column stay. It runs in two steps, so that
searches match as well as ever while it works, which on a large store is long (bench/reembed.py):

1. Stage. Each row's new vector goes to a side table (reembed_staging) with a digest of the text it
   was made from. The store's vectors and every process's embedder stay as they are. A pass stopped
   here is picked up where it stopped: a staged row whose text has not changed is not embedded again.
2. Switch. The new embedder is recorded, marked "reembedding": every Store (in any process) switches
   to it within RECORD_CHECK_S, so what is written from then on is embedded by it. The staged vectors
   replace the old ones in a merge that never inserts, so a row forgotten meanwhile cannot come back;
   then every row without a staged vector of its current text (written or edited since it was
   staged, or during the merge) is embedded now. Only this step searches with mixed vectors:
   seconds, not the pass.

Then the mark goes, the side table is dropped and the vector indexes are retrained. Forgetting a row
drops its staged vector too (forget_staged, from memory/store/erasure.py): forget means gone.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from memory.errors import MiradorError
from memory.store import filters as F
from memory.store import tables as T
from memory.store.audit import audit_row
from memory.store.context import index_texts
from memory.store.embedder_record import (
    RECORD_CHECK_S,
    configured_embedder,
    embedder_record,
    write_embedder_record,
    write_record,
)

if TYPE_CHECKING:  # the store calls into this module (forget_staged): no import of it at run time
    from lancedb.table import Table

    from memory.config import ModelsConfig
    from memory.store.core import Store
    from memory.store.embedding import Embedder
    from models.embedder import Embedder as ModelEmbedder

log = logging.getLogger(__name__)

BATCH = 512
MERGE_BATCH = 4096  # staged vectors per merge of the switch
MAX_ROUNDS = 5  # a row edited again and again while its batch is embedded is left for the next pass
TABLES = ("memories", "evidence")
LOCK = "reembed.lock"  # in the data dir; held while a pass runs


def target_embedder(models: ModelsConfig) -> ModelEmbedder:
    """The embedder the settings (a ModelsConfig) choose for a new store."""
    return configured_embedder(models, models.embedder_tuning)


def why_reembed(made: dict[str, Any] | None, target: Embedder) -> str | None:
    """Why a store whose embedder.json says `made` should be re-embedded with target; None if not."""
    if not made:
        return None
    if made.get("reembedding"):
        return "a re-embed of this store has not finished"
    if made.get("staging"):
        return "a re-embed of this store was started and has not switched over yet (searches are unaffected meanwhile)"
    if made.get("embedder") == target.name:
        return None
    if made["tuned"] and target.tuning:
        return f"its vectors come from another tuning of the embedder ({made.get('weights')}) than this release's"
    if target.tuning:
        return "it was embedded before Mirador tuned its embedder for recall"
    return f"its vectors come from {made.get('embedder')}, and the settings now choose {target.name}"


def reembed(store: Store, progress: Callable[[str, int, int], None] | None = None, batch: int = BATCH,
            settle: float = 2 * RECORD_CHECK_S, actor: str = "person") -> dict[str, Any]:
    """Re-embed every row; returns {"embedder", "memories", "evidence", "skipped", "reused", "seconds",
    "switch_seconds", "freed_bytes", "indexes"}. reused: rows a stopped earlier pass had already
    embedded. switch_seconds: how long searches ran on mixed vectors. freed_bytes: the earlier tuned
    copy this store used, deleted when no other data dir uses it (models/tuning.py, release).

    progress(step, done, total) is called after each batch: step is "memories" or "evidence" while
    staging, "switch" while the staged vectors replace the old ones. settle: seconds to wait after
    recording the new embedder, so other processes have switched before rows written meanwhile are
    looked for.
    """
    from filelock import FileLock, Timeout

    # Two passes would stage every row twice, and a merge refuses a source with an id twice.
    lock = FileLock(store.home / LOCK)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise MiradorError("another `mirador reembed` is running on this store — let it finish (it shows its "
                           "progress where it was started), or stop it and run this again") from None
    try:
        return _reembed(store, progress, batch, settle, actor)
    finally:
        lock.release()


def _reembed(store: Store, progress: Callable[[str, int, int], None] | None, batch: int, settle: float, actor: str) -> dict[str, Any]:
    from models.embedder import bulk_threads

    t0 = time.perf_counter()
    emb = target_embedder(store.config.models)
    if emb.dim != store.embedder.dim:
        raise MiradorError(f"{emb.model_dir} makes {emb.dim}-dimension vectors but the store holds "
                           f"{store.embedder.dim} — export the store, move the data dir aside and import "
                           "into a new one instead")
    before = embedder_record(store.home) or write_embedder_record(store.home, store.embedder)
    report: dict[str, Any] = {"embedder": emb.name, "memories": 0, "evidence": 0, "skipped": 0, "reused": 0}
    staging = _staging_for(store, emb, before)
    with bulk_threads(store.config.models.embedder_bulk_threads):  # as an import embeds its batches
        for name in TABLES:
            report["reused"] += _stage(store, staging, name, emb, batch, progress)
        t_switch = time.perf_counter()
        write_embedder_record(store.home, emb, reembedding=True)
        store.use_embedder(emb)
        time.sleep(settle)
        for name in TABLES:
            _switch(store, staging, name, emb, report, progress)
    write_embedder_record(store.home, emb)
    store.use_embedder(emb)
    report["switch_seconds"] = round(time.perf_counter() - t_switch, 2)
    store.db.drop_table(T.REEMBED_STAGING)
    report["freed_bytes"] = _release_earlier(store, before, emb)
    report["indexes"] = _retrain(store)
    report["seconds"] = round(time.perf_counter() - t0, 2)
    store.write_audit([audit_row(actor, "reembed", "store", "embedder", "", before=_without_marks(before),
                            after={k: report[k] for k in ("embedder", "memories", "evidence", "skipped")})])
    log.info("re-embedded %d memories and %d evidence rows with %s in %.1fs (searches on mixed vectors for "
             "%.1fs)", report["memories"], report["evidence"], emb.name, report["seconds"], report["switch_seconds"])
    return report


def _release_earlier(store: Store, made: dict[str, Any], emb: Embedder) -> int:
    """Bytes freed by deleting the merged copy this store embedded with before, if no store uses it now."""
    from models import onnx_encoder, tuning

    old = tuning.cached_copy(made.get("weights")) if made.get("tuned") else None
    if old is None or old == emb.model_dir:
        return 0
    return tuning.release(old, store.home, store.config.models.onnx_dir or onnx_encoder.default_dir())


def _without_marks(made: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in made.items() if k not in ("staging", "reembedding")}


def _staging_for(store: Store, emb: Embedder, made: dict[str, Any]) -> Table:
    """The side table for vectors of emb: kept from a stopped pass for the same embedder, else new."""
    staged_for = made["embedder"] if made.get("reembedding") else made.get("staging")
    names = set(store.db.table_names())
    if T.REEMBED_STAGING in names and staged_for != emb.name:
        store.db.drop_table(T.REEMBED_STAGING)  # staged for other settings: of no use
        names.discard(T.REEMBED_STAGING)
    if not made.get("reembedding"):
        # Searches stay with the record's embedder; the mark tells a later run (and doctor) what is staged.
        write_record(store.home, {**made, "staging": emb.name})
    staging: Table
    if T.REEMBED_STAGING in names:
        staging = store.db.open_table(T.REEMBED_STAGING)
        return staging
    schema = pa.schema([("tbl", pa.string()), ("id", pa.string()), ("made_from", pa.string()),
                        ("vector", store.evidence.schema.field("vector").type)])
    staging = store.db.create_table(T.REEMBED_STAGING, schema=schema)
    return staging


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _key(name: str) -> tuple[str, list[str]]:
    """(column that was embedded, columns to read) per table. A memory's search_text changes when it
    is edited; an evidence row's text never does (ingest embeds it with its speaker and dates,
    memory/store/context.py), so its embedded text is rebuilt from the row."""
    return ("text", T.EVIDENCE_COLS) if name == "evidence" else ("search_text", ["id", "search_text"])


def _embedded_texts(name: str, rows: list[dict[str, Any]]) -> list[str]:
    return index_texts(rows)[1] if name == "evidence" else [r["search_text"] for r in rows]


def _in(ids: Iterable[str]) -> F.Where:
    return F.id_in(ids)


def _staged(store: Store, staging: Table, name: str) -> dict[str, str]:
    rows = store.scan_table(staging, F.equals("tbl", name), ["id", "made_from"]).to_pylist()
    return {r["id"]: r["made_from"] for r in rows}


def _stage(store: Store, staging: Table, name: str, emb: Embedder, batch: int, progress: Callable[[str, int, int], None] | None) -> int:
    """Stage a new vector for every row of table `name` that has none for its current text; returns how
    many already had one."""
    table = getattr(store, name)
    staged = _staged(store, staging, name)
    ids = store.scan_table(table, None, ["id"])["id"].to_pylist()
    gone = sorted(set(staged) - set(ids))
    for start in range(0, len(gone), BATCH):  # forgotten while their batch was being embedded
        store.commit(lambda c=gone[start: start + BATCH]: staging.delete(F.and_(F.equals("tbl", name), _in(c))))
    reused = 0
    for start in range(0, len(ids), batch):
        rows = store.table_rows(table, _in(ids[start: start + batch]), _key(name)[1], None)
        texts = _embedded_texts(name, rows)
        made_from = [_digest(t) for t in texts]
        todo = [k for k, (r, d) in enumerate(zip(rows, made_from, strict=True)) if staged.get(r["id"]) != d]
        reused += len(rows) - len(todo)
        if todo:
            vecs = emb.embed([texts[k] for k in todo])
            again = [rows[k]["id"] for k in todo if rows[k]["id"] in staged]
            if again:  # edited since it was staged
                store.commit(lambda a=again: staging.delete(F.and_(F.equals("tbl", name), _in(a))))
            store.append(staging, [{"tbl": name, "id": rows[k]["id"], "made_from": made_from[k], "vector": v}
                                    for k, v in zip(todo, vecs, strict=True)], staging.schema)
            staged.update((rows[k]["id"], made_from[k]) for k in todo)
        if progress:
            progress(name, min(start + batch, len(ids)), len(ids))
    return reused


def _switch(store: Store, staging: Table, name: str, emb: Embedder, report: dict[str, Any],
            progress: Callable[[str, int, int], None] | None) -> None:
    """Replace table `name`'s vectors by the staged ones, then embed now every row with no staged
    vector of its current text: written or edited since it was staged, or during the merge."""
    table = getattr(store, name)
    vector_type = table.schema.field("vector").type
    staged = _staged(store, staging, name)
    done = 0
    for found in staging.to_lance().to_batches(columns=["id", "vector"], filter=F.equals("tbl", name),
                                                batch_size=MERGE_BATCH):
        data = pa.table({"id": found.column("id"), "vector": found.column("vector").cast(vector_type)})
        # Only the vector column, and only rows still there: a row forgotten meanwhile stays gone.
        store.commit(lambda d=data: table.merge_insert("id").when_matched_update_all().execute(d))
        done += len(data)
        if progress:
            progress("switch", done, len(staged))
    ids = store.scan_table(table, None, ["id"])["id"].to_pylist()
    stale = []
    for start in range(0, len(ids), BATCH):
        rows = store.table_rows(table, _in(ids[start: start + BATCH]), _key(name)[1], None)
        stale += [r["id"] for r, t in zip(rows, _embedded_texts(name, rows), strict=True)
                  if staged.get(r["id"]) != _digest(t)]
    left = 0
    for start in range(0, len(stale), BATCH):
        left += _reembed_rows(store, table, name, stale[start: start + BATCH], emb)[1]
    report[name] += len(ids) - left
    report["skipped"] += left


def forget_staged(store: Store, ids: list[str]) -> bool:
    """Drop the staged vectors of forgotten rows; True when a side table exists (it then needs a purge)."""
    if not ids or T.REEMBED_STAGING not in store.db.table_names():
        return False
    try:
        staging = store.db.open_table(T.REEMBED_STAGING)
        for start in range(0, len(ids), 500):
            store.commit(lambda c=ids[start: start + 500]: staging.delete(_in(c)))
    except Exception:
        if T.REEMBED_STAGING in store.db.table_names():
            raise
        return False  # the pass finished meanwhile and dropped the table, staged vectors and all
    return True


def _reembed_rows(store: Store, table: Table, name: str, ids: list[str], emb: Embedder) -> tuple[int, int]:
    """(rows re-embedded, rows gone or edited over and over) for one batch of ids: embedded now, merged."""
    key, cols = _key(name)
    vector_type = table.schema.field("vector").type
    done: set[str] = set()
    todo = ids
    for _ in range(MAX_ROUNDS):
        rows = store.table_rows(table, _in(todo), cols, None)
        if not rows:
            break
        vecs = emb.embed(_embedded_texts(name, rows))
        # (A merge condition comparing the text would say "edited meanwhile, leave it", but LanceDB
        # 0.40 panics on a conditional partial merge once the id column is indexed; checked after.)
        data = pa.table({"id": [r["id"] for r in rows],
                         "vector": pa.array([list(map(float, v)) for v in vecs], type=vector_type)})
        store.merge_rows(table, data)
        embedded = {r["id"]: r[key] for r in rows}
        now = store.table_rows(table, _in(embedded), ["id", key], None)
        # A row edited between the read and the merge got a vector of its old text: embed it again.
        todo = [r["id"] for r in now if r[key] != embedded[r["id"]]]
        done |= {r["id"] for r in now} - set(todo)
        if not todo:
            break
    return len(done), len(ids) - len(done)


def _retrain(store: Store) -> dict[str, Any]:
    """Vector indexes were trained on the old vectors: retrain the ones that exist, then compact."""
    from memory.store.indexes import _vector_stats, ensure_vector_index
    from memory.store.maintenance_lock import maintenance_lock

    out = {}
    with store.write_lock, maintenance_lock(store.home):  # an index build: one process at a time (maintenance_lock.py)
        for name, table in (("memories", store.memories), ("evidence", store.evidence)):
            if _vector_stats(table) is not None:
                out[name] = store.commit(lambda tb=table: ensure_vector_index(tb, force=True))
    store.optimize()
    return out
