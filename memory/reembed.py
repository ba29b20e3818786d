"""Re-embed a store: every memory's and evidence row's vector, made again by the embedder a new store
would get now (the tuned one, per models.embedder_tuning). For a store made before the tuning, or
tuned by an older release's delta: vectors of two models do not compare, so a store keeps its
embedder (memory/store.py) until this runs.

Only vectors change. The text, search_text and every other column stay; a row edited while its batch
is embedded is embedded again with its new text, and the update never inserts: a row forgotten
meanwhile cannot come back. The new embedder is recorded first, marked
"reembedding": every Store (in any process) switches to it within RECORD_CHECK_S, so what is written
from then on needs no second pass, and a pass that stops half-way says so when the store opens.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pyarrow as pa

from memory.audit import audit_row
from memory.context import index_texts
from memory.errors import MiradorError
from memory.rows import sql_literal_id
from memory.store import RECORD_CHECK_S, Store, configured_embedder, embedder_record, write_embedder_record

log = logging.getLogger(__name__)

BATCH = 512
MAX_ROUNDS = 5  # a row edited again and again while its batch is embedded is left for the next pass


def target_embedder(models):
    """The embedder the settings (a ModelsConfig) choose for a new store."""
    return configured_embedder(models, models.embedder_tuning)


def why_reembed(made: dict | None, target) -> str | None:
    """Why a store whose embedder.json says `made` should be re-embedded with target; None if not."""
    if not made:
        return None
    if made.get("reembedding"):
        return "a re-embed of this store has not finished"
    if made.get("embedder") == target.name:
        return None
    if made["tuned"] and target.tuning:
        return f"its vectors come from another tuning of the embedder ({made.get('weights')}) than this release's"
    if target.tuning:
        return "it was embedded before Mirador tuned its embedder for recall"
    return f"its vectors come from {made.get('embedder')}, and the settings now choose {target.name}"


def reembed(store: Store, progress: Callable[[str, int, int], None] | None = None, batch: int = BATCH,
            settle: float = 2 * RECORD_CHECK_S, actor: str = "person") -> dict:
    """Re-embed every row; returns {"embedder", "memories", "evidence", "skipped", "seconds"}.

    progress(table, done, total) is called after each batch. settle: seconds to wait after recording
    the new embedder, so other processes have switched before the rows are read.
    """
    from models.embedder import bulk_threads

    t0 = time.perf_counter()
    emb = target_embedder(store.config.models)
    if emb.dim != store.embedder.dim:
        raise MiradorError(f"{emb.model_dir} makes {emb.dim}-dimension vectors but the store holds "
                           f"{store.embedder.dim} — export the store, move the data dir aside and import "
                           "into a new one instead")
    before = embedder_record(store.home)
    write_embedder_record(store.home, emb, reembedding=True)
    store.use_embedder(emb)
    time.sleep(settle)
    report = {"embedder": emb.name, "memories": 0, "evidence": 0, "skipped": 0}
    with bulk_threads(store.config.models.embedder_bulk_threads):  # as an import embeds its batches
        _all_rows(store, emb, report, progress, batch)
    write_embedder_record(store.home, emb)
    store.use_embedder(emb)
    report["indexes"] = _retrain(store)
    report["seconds"] = round(time.perf_counter() - t0, 2)
    store._audit([audit_row(actor, "reembed", "store", "embedder", "", before=before,
                            after={k: report[k] for k in ("embedder", "memories", "evidence", "skipped")})])
    log.info("re-embedded %d memories and %d evidence rows with %s in %.1fs", report["memories"],
             report["evidence"], emb.name, report["seconds"])
    return report


def _all_rows(store: Store, emb, report: dict, progress, batch: int) -> None:
    for name, table in (("memories", store.memories), ("evidence", store.evidence)):
        ids = store._scan(table, None, ["id"])["id"].to_pylist()
        for start in range(0, len(ids), batch):
            done, gone = _reembed_rows(store, table, name, ids[start: start + batch], emb)
            report[name] += done
            report["skipped"] += gone
            if progress:
                progress(name, min(start + batch, len(ids)), len(ids))


def _reembed_rows(store: Store, table, name: str, ids: list[str], emb) -> tuple[int, int]:
    """(rows re-embedded, rows gone) for one batch of ids."""
    from memory.store import _EVIDENCE_COLS

    # The column whose value was embedded: a memory's search_text changes when it is edited; an
    # evidence row's text never does (ingest embeds it with its speaker and dates, memory/context.py).
    key, cols = ("text", _EVIDENCE_COLS) if name == "evidence" else ("search_text", ["id", "search_text"])
    vector_type = table.schema.field("vector").type
    done: set[str] = set()
    todo = ids
    for _ in range(MAX_ROUNDS):
        rows = store._rows(table, "id IN (" + ", ".join(sql_literal_id(i) for i in todo) + ")", cols, None)
        if not rows:
            break
        texts = index_texts(rows)[1] if name == "evidence" else [r[key] for r in rows]
        vecs = emb.embed(texts)
        # Only the vector column, and only rows still there: a row forgotten meanwhile stays gone.
        # (A merge condition comparing the text would say "edited meanwhile, leave it", but LanceDB
        # 0.40 panics on a conditional partial merge once the id column is indexed; checked after.)
        data = pa.table({"id": [r["id"] for r in rows],
                         "vector": pa.array([list(map(float, v)) for v in vecs], type=vector_type)})
        store._commit(lambda d=data: table.merge_insert("id").when_matched_update_all().execute(d))
        embedded = {r["id"]: r[key] for r in rows}
        now = store._rows(table, "id IN (" + ", ".join(sql_literal_id(i) for i in embedded) + ")", ["id", key], None)
        # A row edited between the read and the merge got a vector of its old text: embed it again.
        todo = [r["id"] for r in now if r[key] != embedded[r["id"]]]
        done |= {r["id"] for r in now} - set(todo)
        if not todo:
            break
    return len(done), len(ids) - len(done)


def _retrain(store: Store) -> dict:
    """Vector indexes were trained on the old vectors: retrain the ones that exist, then compact."""
    from memory.indexes import _vector_stats, ensure_vector_index

    out = {}
    for name, table in (("memories", store.memories), ("evidence", store.evidence)):
        if _vector_stats(table) is not None:
            out[name] = store._commit(lambda tb=table: ensure_vector_index(tb, force=True))
    store.optimize()
    return out
