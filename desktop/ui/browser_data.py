"""Store reads and writes the desktop views need, as plain functions (no Qt): run them in workers."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.store import filters as F
from memory.store import tables as T
from memory.store.audit import utcnow
from memory.store.rows import kind_of, public_evidence, public_memory, public_vault

if TYPE_CHECKING:
    from memory.store.core import Store

SEARCH_LIMIT = 200

# A person's words for the stored values, shared by the tables, the filters and the card (browser_detail).
TYPE_WORDS = {"episodic": "Event", "semantic": "Fact", "procedural": "How-to", "resource": "Link or file",
              "core": "About you", "vault": "Secret (vault)"}
TYPE_TIPS = {"episodic": "Something that happened: when, with whom, where",
             "semantic": "Something that is true: a fact, a preference, a decision",
             "procedural": "How to do something: the steps",
             "resource": "A link or a file worth finding again",
             "core": "About you: your profile, how you like to work",
             "vault": "A secret kept encrypted (a password, a key); its value shows only when you press Reveal"}
STATUS_WORDS = {"candidate": "Waiting for your review", "active": "", "superseded": "Replaced by a newer memory",
                "rejected": "Rejected", "deleted": "Deleted"}  # the card's badge ("" = nothing to say)
STATUS_SHORT = {"candidate": "Needs review", "active": "In use", "superseded": "Replaced", "rejected": "Rejected",
                "deleted": "Deleted"}  # a table cell
STATUS_TIPS = {"candidate": "Proposed by Mirador or an assistant and not confirmed yet: approve or reject it "
                            "in Review",
               "active": "In use: search, recall and your assistants find it",
               "superseded": "Replaced by a newer memory; kept for its history, not used",
               "rejected": "You rejected it: never used, and never proposed again",
               "deleted": "Deleted"}
SOURCE_WORDS = {"screen": "Seen on screen", "audio": "Spoken", "manual": "Typed note", "import": "Imported",
                "mcp": "Sent by an assistant"}


def type_word(value) -> str:
    """A memory type as a person says it ("episodic" → "Event")."""
    return TYPE_WORDS.get(str(value or ""), str(value or ""))


def status_word(value) -> str:
    """A status as a table shows it ("candidate" → "Needs review"; a vault entry has none: "")."""
    return STATUS_SHORT.get(str(value or ""), str(value or ""))
TIME_RANGES = {  # label -> how far back; None = any time
    "Any time": None,
    "Last hour": timedelta(hours=1),
    "Last 24 hours": timedelta(days=1),
    "Last 7 days": timedelta(days=7),
    "Last 30 days": timedelta(days=30),
}


@dataclass
class MemoryFilter:
    """What the browser shows: a query (hybrid search) or a filtered listing, newest first."""

    text: str = ""
    types: list[str] | None = None
    statuses: list[str] | None = None  # None = candidate + active; [] = every status
    scopes: list[str] | None = None
    since: datetime | None = None
    until: datetime | None = None
    sources: list[str] | None = None  # memories whose evidence came from these sources
    apps: list[str] | None = None  # ... or from these apps

    @classmethod
    def with_range(cls, label: str, **kw) -> MemoryFilter:
        """A filter whose `since` is the named time range back from now."""
        back = TIME_RANGES.get(label)
        return cls(since=utcnow() - back if back else None, **kw)


@dataclass
class KeyList:
    """The ordered ids a view will page through, plus rows already in hand (from a search).

    `stamps`, for a listing of memories: each id's last-change time (an Arrow array in the order of `ids`),
    so a refresh re-reads only the shown rows whose time moved (`rows_to_refetch`)."""

    ids: list[str]
    rows: dict[str, dict] = field(default_factory=dict)
    stamps: Any = None

    def stamps_of(self, n: int) -> list:
        """The stamps of the first n ids (empty when the list has none)."""
        return [] if self.stamps is None else self.stamps[:n].to_pylist()


def newest_first(table, time_col: str) -> tuple[list[str], Any]:
    """An Arrow table's ids newest first (rows without a time last, ties in table order) and their times.
    Sorted in Arrow: a listing of every row turns only the ids into Python objects."""
    import pyarrow.compute as pc

    if table.num_rows == 0:
        return [], None
    order = pc.sort_indices(table, [(time_col, "descending")])  # nulls sort last
    return table["id"].take(order).to_pylist(), table[time_col].take(order)


def _evidence_ids(store: Store, f: MemoryFilter) -> list[str] | None:
    if not (f.sources or f.apps):
        return None
    where = store.where("evidence", sources=f.sources, apps=f.apps)
    return [r["id"] for r in store.rows("evidence", where, ["id"], scopes=f.scopes)]


def vault_view(row: dict) -> dict:
    """A public vault row shaped like a memory row for the table: label as title, no status, never the value."""
    return {**row, "title": row["label"], "status": "", "confidence": None}


def _with_vault(f: MemoryFilter) -> bool:
    """Vault entries have no status and no evidence source: shown unless the filter needs one of those."""
    return ((not f.types or "vault" in f.types) and (f.statuses is None or not f.statuses or "active" in f.statuses)
            and not (f.sources or f.apps))


def memory_keys(store: Store, f: MemoryFilter) -> KeyList:
    """Ids matching the filter (memories and vault labels), newest first (search: best first), rows not loaded."""
    ev_ids = _evidence_ids(store, f)
    if ev_ids is not None and not ev_ids:
        return KeyList([])
    mem_types = [t for t in f.types if t != "vault"] if f.types else None
    if f.text.strip():
        from memory.retrieval.search import search_memories

        hits = search_memories(store, f.text, scopes=f.scopes, types=f.types or None, statuses=f.statuses,
                               since=f.since, until=f.until, limit=SEARCH_LIMIT)
        hits = [h for h in hits if h.kind == "memory" or (h.kind == "vault" and _with_vault(f))]
        if ev_ids is not None:  # source/app narrow a short ranked list; the scope filter ran in the query
            allowed = set(ev_ids)
            hits = [h for h in hits if allowed.intersection(h.row.get("provenance") or [])]
        hits, rel = _judged(store, f.text, hits)
        rows = {h.id: _with_relevance(vault_view(h.row) if h.kind == "vault" else h.row, rel[h.id]) for h in hits}
        return KeyList([h.id for h in hits], rows)
    import pyarrow as pa

    parts = []
    if not f.types or mem_types:
        where = F.where("memory", types=mem_types, statuses=f.statuses, since=f.since, until=f.until)
        # This device's memories and the shared scopes' (Store.scan / derived_from), the scope filter inside every
        # query; narrowed by source or app: those drawn from the matching evidence.
        if ev_ids is not None:
            parts.append(pa.Table.from_pylist(store.derived_from(ev_ids, ["updated_at"], scopes=f.scopes, where=where)))
        else:
            parts.append(store.scan("memory", where, ["id", "updated_at"], scopes=f.scopes))
    if _with_vault(f):
        parts.append(store.scan("vault", F.where("vault", since=f.since, until=f.until), ["id", "updated_at"],
                                scopes=f.scopes))
    parts = [p for p in parts if p.num_rows]
    if not parts:
        return KeyList([])
    ids, stamps = newest_first(pa.concat_tables(parts, promote_options="permissive"), "updated_at")
    return KeyList(ids, stamps=stamps)


def rows_to_refetch(keys: KeyList, window: list[str], loaded: dict[str, dict], keep: set[str]) -> list[str]:
    """Which of the ids a refresh shows must be read again: those not loaded yet, those whose last-change
    time moved since they were read (or whose time is unknown), and `keep` (the selection: its card also
    shows what changes without a new time, such as salience). The rest are shown as they were."""
    stamps = keys.stamps_of(len(window))
    out = []
    for n, i in enumerate(window):
        if i in keys.rows:
            continue
        old = loaded.get(i)
        if old is None or i in keep or n >= len(stamps) or old.get("_stamp") is None or old["_stamp"] != stamps[n]:
            out.append(i)
    return out


def _judged(store: Store, query: str, hits: list) -> tuple[list, dict]:
    """The hits about the query (the floor MCP memory_search applies) and each one's relevance."""
    from memory.retrieval.relevance import judge

    rel = judge(store, query, hits, measure_all=True)
    return [h for h in hits if rel[h.id].kept], rel


def _with_relevance(row: dict, rel) -> dict:
    """The row with what the views show of its relevance: `_match` (query stems it shares), `_relevance` (0-1)."""
    return {**row, "_match": sorted(rel.words), "_relevance": relevance_score(rel.similarity, bool(rel.words))}


def relevance_score(similarity: float | None, words: bool) -> float:
    """One 0-1 figure for a hit: its meaning similarity, at least 0.5 when it shares a word with the query."""
    sim = 1.0 if similarity is None else max(0.0, min(1.0, similarity))
    return max(sim, 0.5) if words else sim


def relevance_label(score: float | None) -> str:
    """Five dots for a person: how close a hit is to the query ("" outside a search)."""
    if score is None:
        return ""
    n = 5 if score >= 0.6 else 4 if score >= 0.5 else 3 if score >= 0.4 else 2 if score >= 0.3 else 1
    return "●" * n + "○" * (5 - n)


_WORD = re.compile(r"[^\W_]+")
MARK_STYLE = "background-color:#ffe27a; color:#1d1d1d"  # a highlighter pen; readable on light and dark themes


def highlight(text: str, match: list[str] | frozenset[str] | None) -> str:
    """HTML of text (escaped) with each word whose stem is in `match` marked (Qt rich text has no <mark>)."""
    from memory.retrieval.snippets import stems

    text = text or ""
    if not match:
        return html.escape(text)
    want, out, last = set(match), [], 0
    for m in _WORD.finditer(text):
        if stems(m.group()) & want:
            out.append(html.escape(text[last:m.start()]))
            out.append(f"<span style='{MARK_STYLE}'>{html.escape(m.group())}</span>")
            last = m.end()
    out.append(html.escape(text[last:]))
    return "".join(out)


def query_stems(text: str) -> list[str]:
    """The word stems of a query, as highlight() takes them."""
    from memory.retrieval.snippets import stems

    return sorted(stems(text or ""))


def evidence_search_keys(store: Store, f: MemoryFilter) -> KeyList:
    """Captured evidence (screens, transcripts, notes) matching the filter's text, best first, or every row
    the filter allows, newest first. Hits about nothing the query names are left out, as for memories."""
    if f.text.strip():
        from memory.retrieval.search import search_evidence

        hits = search_evidence(store, f.text, scopes=f.scopes, sources=f.sources, apps=f.apps, since=f.since,
                               until=f.until, limit=SEARCH_LIMIT)
        hits, rel = _judged(store, f.text, hits)
        return KeyList([h.id for h in hits], {h.id: _with_relevance(h.row, rel[h.id]) for h in hits})
    where = store.where("evidence", sources=f.sources, apps=f.apps, since=f.since, until=f.until)
    # no stamps: a captured row can change (its scope, its context) without a new time, so a refresh
    # re-reads the rows it shows
    return KeyList(newest_first(store.scan("evidence", where, ["id", "captured_at"], scopes=f.scopes),
                                "captured_at")[0])


def fetch_rows(store: Store, kind: str, ids: list[str]) -> list[dict]:
    """Public rows for these ids in the given order (missing ids, e.g. just forgotten, are skipped).

    kind "memory" also serves vault ids (vlt_…), as vault_view rows without their values.
    """
    if not ids:
        return []
    if kind == "memory":
        vault = [i for i in ids if kind_of(i) == "vault"]
        parts = [("memory", public_memory, [i for i in ids if kind_of(i) != "vault"]),
                 ("vault", lambda r: vault_view(public_vault(r)), vault)]
    else:
        parts = [("evidence", public_evidence, ids)]
    rows: dict[str, dict] = {}
    for table, conv, some in parts:
        rows.update((i, _stamped(conv(r), r, table)) for i, r in store.get_many(table, some).items())
    return [rows[i] for i in ids if i in rows]


def _stamped(row: dict, raw: dict, table: str) -> dict:
    """A memory or vault row with `_stamp`: its last-change time to the microsecond (what listings sort by;
    the public `updated_at` has whole seconds), so a refresh can tell it changed (rows_to_refetch)."""
    if table != "evidence":
        row["_stamp"] = raw.get("updated_at")
    return row


def resolve_frame(store: Store, path: str | None) -> Path | None:
    """The frame file on disk for an evidence row, if it still exists."""
    if not path:
        return None
    p = Path(path)
    if not p.is_absolute():
        p = store.home / p
    return p if p.is_file() else None


def memory_detail(store: Store, memory_id: str) -> dict:
    """One memory with its provenance evidence rows (each with the resolved frame path)."""
    row = store.get(memory_id)
    if row.get("type") == "vault":
        row = vault_view(row)
    evidence = fetch_rows(store, "evidence", list(row.get("provenance") or []))
    for e in evidence:
        frame = resolve_frame(store, e.get("frame_path"))
        e["_frame"] = str(frame) if frame else None
    row["_evidence"] = evidence
    return row


def pending_count(store: Store) -> int:
    """What waits for the person: candidate memories plus open dream proposals."""
    n = store.count("memory", F.equals("status", "candidate"))  # a shared scope's candidates too
    if store.has_table(T.PROPOSALS):  # the table arrives with the dream migration
        n += store.count(T.PROPOSALS, F.equals("status", "open"))
    return n


def evidence_keys(store: Store, *, day: datetime | None = None, app: str | None = None, scopes=None) -> KeyList:
    """Evidence ids this device captured on one local day (naive UTC bounds given) and/or app, newest first."""
    since, until = (day, day + timedelta(days=1)) if day else (None, None)
    where = store.where("evidence", apps=[app] if app else None, since=since, until=until)
    # The timeline is this device's capture (its frames): another device's shared copies are not its days.
    return KeyList(newest_first(store.scan("evidence", where, ["id", "captured_at"], scopes=scopes, local=True),
                                "captured_at")[0])


def evidence_groups(store: Store, scopes=None) -> list[tuple[str, str, int]]:
    """(local day 'YYYY-MM-DD', app, count) for all the evidence this device captured, newest day first."""
    t = store.scan("evidence", None, ["captured_at", "app"], scopes=scopes, local=True)
    counts: dict[tuple[str, str], int] = {}
    for at, app in zip(t["captured_at"].to_pylist(), t["app"].to_pylist(), strict=True):
        local = at.replace(tzinfo=timezone.utc).astimezone()
        key = (local.strftime("%Y-%m-%d"), app or "(no app)")
        counts[key] = counts.get(key, 0) + 1
    return sorted(((d, a, n) for (d, a), n in counts.items()), key=lambda x: (x[0], x[2]), reverse=True)


def known_scopes(store: Store) -> list[str]:
    """Every scope something is stored in (kept counts, no scan), the default scope and the scope rules' scopes."""
    found: set[str] = set()
    for kind in ("memory", "evidence", "vault"):
        found.update(key[0] for key, t in store.tallies.groups(kind).items() if t.count)
    cfg = getattr(store, "config", None)
    if cfg is not None:
        found.add(cfg.store.default_scope)
        found.update(r.scope for r in cfg.capture.scope_rules)
        if cfg.capture.scope:
            found.add(cfg.capture.scope)
    return sorted(found)


def normalise_scope(text: str) -> str:
    """A scope as a person may type it ("Work / Acme Corp") in the stored form ("work/acme-corp");
    raises InputError (memory.scopes) with the expected form when it still is not one."""
    from memory.scopes import validate_scope

    parts = [re.sub(r"\s+", "-", p.strip().lower()) for p in (text or "").split("/")]
    return validate_scope("/".join(p for p in parts if p))
