"""Forget means gone (principle 3): tombstone, delete, scrub the audit trail, purge old versions, drop frames."""

from __future__ import annotations

import json
import logging
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.errors import FIND_IDS, InputError, NotFoundError
from memory.scopes import validate_scope
from memory.store import filters as F
from memory.store import tables as T
from memory.store.audit import ACTORS_AUTOMATED, audit_row, utcnow
from memory.store.fingerprint import fingerprint
from memory.store.indexes import ensure_fts
from memory.store.leftovers import swept
from memory.store.lifecycle import memories_forgotten
from memory.store.maintenance_lock import maintenance_lock
from memory.store.rows import PREFIX, kind_of, to_arrow
from memory.types import Status

if TYPE_CHECKING:
    import threading

    from lancedb.table import Table

    from memory.store.core import Store

log = logging.getLogger(__name__)

_KIND_COLS = {
    "memory": ("memories", ["id", "scope", "fingerprint"]),
    "evidence": ("evidence", ["id", "scope", "text", "frame_path", "meta", "source", "app", "window", "captured_at"]),
    "vault": ("vault", ["id", "scope", "fingerprint"]),
}


def forget(store: Store, ids: Iterable[str], actor: str = "person", purge_now: bool = True,
           scopes: Iterable[str] | None = None) -> dict[str, Any]:
    """Erase rows by id. Every id is checked first: one unknown id and nothing is deleted."""
    if actor in ACTORS_AUTOMATED:
        raise InputError(f"{actor} may not delete; automated passes only propose (principle 2)")
    ids = list(dict.fromkeys(ids))
    if not ids:
        raise InputError("no ids given: pass one or more ids", hint=FIND_IDS)
    by_kind: dict[str, list[str]] = {}
    for i in ids:
        by_kind.setdefault(kind_of(i), []).append(i)
    found: dict[str, list[dict[str, Any]]] = {}
    for kind, kids in by_kind.items():
        # A shared scope's memories, and another device's shared evidence, too (memory/store/remote*.py).
        rows = list(store.get_many(kind, kids, _KIND_COLS[kind][1], scopes=scopes).values())
        missing = set(kids) - {r["id"] for r in rows}
        if missing:
            raise NotFoundError(
                f"no row with id {sorted(missing)[0]} (never existed, outside your scopes, or already forgotten) "
                "— nothing was deleted", hint=FIND_IDS)
        found[kind] = rows
    return _erase(store, found, actor, purge_now)


def forget_present(store: Store, ids: Iterable[str], actor: str = "person", purge_now: bool = True) -> dict[str, Any]:
    """Erase the rows with these ids that still exist; ids already gone (another window, the CLI or an MCP
    client forgot them meanwhile) are reported under "already_gone" instead of failing the whole delete.
    For a window whose list the person chose from; `forget` stays all-or-nothing for typed ids."""
    ids = list(dict.fromkeys(ids))
    present: list[str] = []
    for kind in ("memory", "evidence", "vault"):
        kids = [i for i in ids if kind_of(i) == kind]
        if kids:  # get_many also finds memories of a shared scope in their remote store
            present += list(store.get_many(kind, kids, ["id"]))
    gone = [i for i in ids if i not in set(present)]
    if not present:
        return {"deleted": 0, "by_kind": {}, "frames_removed": 0, "purged": False, "already_gone": gone}
    return {**forget(store, present, actor=actor, purge_now=purge_now), "already_gone": gone}


@dataclass
class ForgetPlan:
    """What a bulk forget will do, worked out before anything is erased (the confirmation states it).

    evidence: the captured rows that match; memories: rows erased with them (derived only from that
    evidence, or, for a scope delete, everything in the scope); review: memories that also rest on
    other evidence, which lose the erased ids from their provenance and go to review (and memories the
    person edited or pinned whose evidence is all erased: marked "orphaned", they keep their text, lose
    all provenance and go to review); vault: entries
    erased (only by a scope delete); frames: frame files on disk that go with the evidence."""

    evidence: list[dict[str, Any]] = field(default_factory=list)
    memories: list[dict[str, Any]] = field(default_factory=list)
    review: list[dict[str, Any]] = field(default_factory=list)
    vault: list[dict[str, Any]] = field(default_factory=list)
    frames: int = 0
    scope_only: bool = False
    # Shared scopes whose store did not answer while the plan was made: memories there derived from this
    # evidence are looked up (and erased or reviewed) once it answers again (recheck_derived).
    unchecked: list[str] = field(default_factory=list)
    shared: int = 0  # of memories: those in a shared scope's bucket (a scope forget), gone for every device

    def counts(self) -> dict[str, int]:
        return {"evidence": len(self.evidence), "frames": self.frames, "memories": len(self.memories),
                "review": len(self.review), "vault": len(self.vault)}

    def empty(self) -> bool:
        return not (self.evidence or self.memories or self.review or self.vault)

    def describe(self) -> str:
        """One plain sentence (or two) of what will be erased, with counts."""
        if self.empty():
            return "Nothing matches: nothing will be erased."
        parts = [_n(len(self.evidence), "captured row") + " (screen text, transcripts, notes)"]
        parts.append(_n(self.frames, "frame image"))
        if self.scope_only:
            parts.append(_n(len(self.memories), "memory", "memories") + " and "
                         + _n(len(self.vault), "vault entry", "vault entries") + " in the scope")
        else:
            parts.append(_n(len(self.memories), "memory", "memories") + " derived only from them")
        text = "Erases " + ", ".join(parts) + "."
        edited = sum(1 for r in self.review if r.get("orphaned"))
        if len(self.review) > edited:
            text += (f" {_n(len(self.review) - edited, 'memory', 'memories')} that also rest on other evidence "
                     "lose these sources and go to review.")
        if edited:
            text += (f" {_n(edited, 'memory', 'memories')} you edited keep your words, lose these sources "
                     "and go to review.")
        if not self.scope_only:
            text += " Memories you wrote yourself and vault entries are kept."
        if self.shared:
            text += (f" {_n(self.shared, 'memory', 'memories')} of the count are in a shared scope: erased for every "
                     "device sharing it.")
        if self.unchecked and self.scope_only:
            text += (f" The shared scope {', '.join(self.unchecked)} does not answer now: its memories are not "
                     "erased — run this forget again when it is back (`mirador remote test` checks it).")
        elif self.unchecked and self.evidence:
            text += (f" The shared scope {', '.join(self.unchecked)} does not answer now: its memories derived from "
                     "this evidence are erased or sent to review when it is back.")
        return text


def _n(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def plan_forget_where(store: Store, *, scope: str | None = None, app: str | None = None, since: datetime | None = None,
                      until: datetime | None = None) -> ForgetPlan:
    """What `forget_where` with the same filters would erase and send to review; changes nothing.

    An evidence delete (an app and/or a time range, optionally within a scope) takes the matching
    evidence and the memories derived only from it; memories that also rest on other evidence that
    survives go to review; memories without evidence provenance (written by hand) and vault entries
    are never touched. A scope alone takes everything in the scope, as well as memories elsewhere
    derived only from its evidence."""
    if not (scope or app or since or until):
        raise InputError("bulk forget needs --scope, --app, --since or --until; refusing to erase everything")
    scopes = [validate_scope(scope)] if scope else None
    scope_only = not (app or since or until)
    plan = ForgetPlan(scope_only=scope_only)
    ev_where = store.where("evidence", apps=[app] if app else None, since=since, until=until)
    # ...with the evidence other devices captured in a scope whose binding shares it: forget is everywhere.
    plan.evidence = store.rows("evidence", ev_where, _KIND_COLS["evidence"][1], scopes=scopes)
    if scope_only:  # memories and vault entries carry a scope, not an app or a capture time
        mem_where = F.where("memory", statuses=[])
        # ...and those of a shared scope, in its bucket: erased there, so for every device sharing it.
        plan.memories = store.rows("memory", mem_where, _KIND_COLS["memory"][1], scopes=scopes)
        if store.remotes.reading(scopes):
            plan.shared = len(plan.memories) - store.count("memory", mem_where, scopes=scopes, local=True)
        plan.vault = store.rows("vault", None, _KIND_COLS["vault"][1], scopes=scopes)
    erase, review = _derived_from(store, {r["id"] for r in plan.evidence}, {m["id"] for m in plan.memories})
    plan.memories += erase
    plan.review = review
    plan.unchecked = _offline_scopes(store) if plan.evidence or scope_only else []
    paths = {r["frame_path"] for r in plan.evidence if r.get("frame_path")}
    plan.frames = sum(1 for p in paths if _frame_file(store.home, p) is not None)
    return plan


def plan_forget_evidence(store: Store, ids: Iterable[str]) -> ForgetPlan:
    """What erasing these captured rows (picked one by one, e.g. in the browser or the timeline) does, with
    the same semantics as an evidence delete by app or time: their frames and the memories derived only
    from them go, memories resting on other evidence too go to review, hand-written memories and vault
    entries are never touched. Erase it with forget_where(store, plan=plan). Every id must exist."""
    ids = list(dict.fromkeys(ids))
    if not ids or any(kind_of(i) != "evidence" for i in ids):
        raise InputError("give captured-row ids (evd_…); memories and vault entries are erased with forget")
    plan = ForgetPlan()
    plan.evidence = list(store.get_many("evidence", ids, _KIND_COLS["evidence"][1]).values())
    missing = set(ids) - {r["id"] for r in plan.evidence}
    if missing:
        raise NotFoundError(f"no captured row with id {sorted(missing)[0]} (already deleted?) — nothing was erased")
    plan.memories, plan.review = _derived_from(store, set(ids), set())
    plan.unchecked = _offline_scopes(store)
    paths = {r["frame_path"] for r in plan.evidence if r.get("frame_path")}
    plan.frames = sum(1 for p in paths if _frame_file(store.home, p) is not None)
    return plan


def _derived_from(store: Store, gone: set[str], erased: set[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Memories whose provenance names evidence in `gone` (their provenance column or the derivations
    ledger), split into those resting only on it (erase) and those with surviving evidence too (review).
    Memories already in `erased` are left out."""
    if not gone:
        return [], []
    cols = _KIND_COLS["memory"][1] + ["status", "provenance", "user_edited", "pinned"]
    # Those of a shared scope too, in its bucket: extracted from this evidence, they rest on it as much as local
    # ones. A store that does not answer is reported (plan.unchecked). The ledger names those an earlier erase
    # left without provenance.
    hits = {r["id"]: r for r in store.derived_from(gone, cols, ledger=True) if r["id"] not in erased}
    # Evidence ids named besides the erased ones: they count only while that evidence still exists.
    others = {e for r in hits.values() for e in (r["provenance"] or []) if e not in gone}
    live = _existing_evidence(store, others)
    erase, review = [], []
    for r in hits.values():
        rest = [e for e in (r["provenance"] or []) if e not in gone]
        if any(e in live or not e.startswith(PREFIX["evidence"]) for e in rest):
            review.append(r)
        elif r.get("user_edited") or r.get("pinned"):
            # The person's own words survive an evidence delete: the evidence goes, the edited memory is
            # kept with no provenance left and goes to review (principle 3; the person decides).
            review.append({**r, "orphaned": True})
        else:
            erase.append({k: r[k] for k in _KIND_COLS["memory"][1]})
    return erase, review


def _offline_scopes(store: Store) -> list[str]:
    """The shared scopes whose store failed the last read (_derived_from has just asked every one)."""
    return [s.binding.scope for s in store.remotes.shared.values() if s.last_error] if store.remotes.shared else []


UNCHECKED_FILE = "derived-unchecked.json"  # in the data dir: {shared scope: [erased evidence ids]}, ids only


def _note_unchecked(store: Store, scopes: list[str], evidence_ids: list[str]) -> None:
    from memory.store.atomic import write_atomic

    path = Path(store.home) / UNCHECKED_FILE
    data = json.loads(path.read_text()) if path.exists() else {}
    for scope in scopes:
        data[scope] = sorted(set(data.get(scope, [])) | set(evidence_ids))
    write_atomic(path, json.dumps(data))


def recheck_derived(store: Store, actor: str = "person") -> dict[str, Any]:
    """Finish the forgets made while a shared scope's store did not answer: the memories of that scope derived
    from the erased evidence are erased (resting only on it) or lose it and go to review, as they would have
    then. Run after a flush that reached the store (the scheduler's share job, `mirador remote test`); a scope
    still offline keeps its entry. Returns {"erased": n, "reviewed": n, "waiting": n}."""
    path = Path(store.home) / UNCHECKED_FILE
    if not path.exists():
        return {"erased": 0, "reviewed": 0, "waiting": 0}
    data: dict[str, list[str]] = json.loads(path.read_text())
    data = {k: v for k, v in data.items() if store.remotes.binding_for(k) is not None}  # a removed binding: moot
    ids = sorted({i for v in data.values() for i in v})
    erase, review = _derived_from(store, set(ids), set()) if ids else ([], [])
    offline = set(_offline_scopes(store))
    if offline:  # nothing is changed from a partial answer: all of it at the next pass
        return {"erased": 0, "reviewed": 0, "waiting": len(ids)}
    reviewed = _send_to_review(store, review, set(ids), actor)
    if erase:
        _erase(store, {"memory": erase}, actor, purge_now=True)
    path.unlink(missing_ok=True)
    if erase or reviewed:
        log.info("finished %d forget(s) made offline: %d derived memories erased, %d sent to review",
                 len(ids), len(erase), reviewed)
    return {"erased": len(erase), "reviewed": reviewed, "waiting": 0}


def _existing_evidence(store: Store, ids: set[str]) -> set[str]:
    # Another device's shared evidence counts too (memory/store/remote_evidence.py).
    return set(store.get_many("evidence", sorted(e for e in ids if e.startswith(PREFIX["evidence"])), ["id"]))


def forget_where(store: Store, *, scope: str | None = None, app: str | None = None, since: datetime | None = None,
                 until: datetime | None = None, actor: str = "person", purge_now: bool = True,
                 plan: ForgetPlan | None = None) -> dict[str, Any]:
    """Bulk forget (see plan_forget_where for what goes): everything in a scope (and below), or the
    evidence from an app and/or a time range with the memories derived only from it. plan: one just
    made by plan_forget_where with the same filters (a caller that checked it, e.g. against a client's
    write scope, erases exactly what it checked)."""
    if actor in ACTORS_AUTOMATED:
        raise InputError(f"{actor} may not delete; automated passes only propose (principle 2)")
    if plan is None:
        plan = plan_forget_where(store, scope=scope, app=app, since=since, until=until)
    # Review first: should we stop part-way, no memory still cites evidence that is gone.
    reviewed = _send_to_review(store, plan.review, {r["id"] for r in plan.evidence}, actor)
    found = {"evidence": plan.evidence, "memory": plan.memories, "vault": plan.vault}
    # Old versions of the memories table hold the pre-edit text of orphaned memories: purge it too.
    extra = {T.MEMORIES} if any(r.get("orphaned") for r in plan.review) else set()
    result = _erase(store, {k: v for k, v in found.items() if v}, actor, purge_now, extra)
    result["reviewed"] = reviewed
    if plan.unchecked and plan.evidence:
        _note_unchecked(store, plan.unchecked, [r["id"] for r in plan.evidence])
    if plan.unchecked:
        result["unchecked_shared_scopes"] = plan.unchecked
    return result


def _send_to_review(store: Store, rows: list[dict[str, Any]], gone: set[str], actor: str) -> int:
    """Drop the erased evidence ids from these memories' provenance; an active one becomes a candidate
    again (the person decides whether it still holds). Superseded and rejected ones keep their status."""
    if not rows:
        return 0
    now = utcnow()
    audits = []
    orphaned = {r["id"] for r in rows if r.get("orphaned")}
    # get_many: those of a shared scope too, read from their bucket and written back through its outbox.
    full = list(store.get_many("memory", [r["id"] for r in rows], T.MEMORY_COLS + ["vector"]).values())
    originals = {r["id"]: dict(r) for r in full}
    for r in full:
        before = {"status": r["status"], "provenance": list(r["provenance"] or [])}
        # An edited memory whose evidence is all gone keeps no provenance (what is left names nothing).
        r["provenance"] = [] if r["id"] in orphaned else [e for e in before["provenance"] if e not in gone]
        if r["status"] == Status.ACTIVE.value:
            r["status"] = Status.CANDIDATE.value
        r["updated_at"] = now
        audits.append(audit_row(actor, "update", "memory", r["id"], r["scope"], before,
                                {"status": r["status"], "provenance": r["provenance"]}))
    local = [r for r in full if not store.remotes.put(r, actor=actor, old=originals[r["id"]])]
    if local:
        store.merge_rows(store.memories, local, insert=True)
    if orphaned:
        # Their earlier audit rows hold the text extracted from the erased evidence (create, before the
        # person's edit): keep who/when, drop what. The person's current words stay in the row.
        store.clear_audit_content(orphaned)
    store.write_audit(audits)
    store.reader.forget_cached()
    return len(full)


def _frame_file(home: Path, path: str) -> Path | None:
    p = Path(path)
    if not p.is_absolute():
        p = home / p
    try:
        p.resolve().relative_to(home.resolve())
    except ValueError:
        return None
    return p if p.exists() else None


def _erase(store: Store, found: dict[str, list[dict[str, Any]]], actor: str, purge_now: bool,
           extra_tables: Iterable[str] = ()) -> dict[str, Any]:
    now = utcnow()
    stones, audits, frames = [], [], []
    for kind, rows in found.items():
        for r in rows:
            fp = r.get("fingerprint") or fingerprint(r.get("text") or "")
            stones.append({"id": r["id"], "kind": kind, "fingerprint": fp, "deleted_at": now, "scope": r["scope"]})
            audits.append(audit_row(actor, "delete", kind, r["id"], r["scope"], after={"tombstone": fp[:16]}))
            if r.get("frame_path"):
                frames.append(r["frame_path"])
            if _audio_path(r):  # an utterance's recording (capture.keep_audio) goes with it, like a frame
                frames.append(_audio_path(r))
    if not stones:
        return {"deleted": 0, "by_kind": {}, "frames_removed": 0, "purged": False}
    # Tombstones first: if we crash between steps, a half-deleted row is still never re-extracted.
    store.append(store.tombstones, stones, T.tombstones_schema())
    for kind, rows in found.items():
        table = getattr(store, _KIND_COLS[kind][0])
        ids = [r["id"] for r in rows]
        for start in range(0, len(ids), 500):
            chunk = F.id_in(ids[start:start + 500])
            store.commit(lambda c=chunk, t=table: t.delete(c))
            # Earlier audit rows hold the content (create/update before-after): keep who/when, drop what.
            store.clear_audit_content(ids[start:start + 500])
    store.reader.forget_cached()  # search keeps ids by row address (memory/store/rowcache.py): drop theirs too
    from memory.store.reembed import forget_staged

    # A re-embed in progress (or stopped) holds a new vector of each row: derived from its text, so it goes.
    staged = forget_staged(store, [r["id"] for kind in ("memory", "evidence") for r in found.get(kind, [])])
    store.write_audit(audits)
    if found.get("memory"):
        # What hangs off a memory elsewhere goes with it: its edges (an edge is a fact about both ends)
        # and its use counts (memory/graph registers both in memory/store/lifecycle.py).
        memories_forgotten(store, [r["id"] for r in found["memory"]], actor)
    if found.get("evidence"):
        from memory.store.context import refresh_neighbours

        # Neighbouring rows were indexed with the forgotten text as context: re-index them without it.
        refresh_neighbours(store, found["evidence"])
        # A copy in the bucket of an evidence-sharing binding: its tombstone and delete go there, and every
        # device that pulls the tombstone erases its own copy (memory/store/remote_evidence.py).
        if getattr(store.remotes, "evidence", None) is not None:
            store.remotes.evidence.forget(found["evidence"])
    removed = sum(_remove_frame(store.home, p) for p in frames)
    if purge_now:
        # Only the tables this erase changed: forgetting a memory need not retrain the evidence index
        # (on a large store that retraining was much of a one-memory forget). The audit table always (content
        # removed), tombstones (appended), relations with memories (edges dropped).
        changed = {T.AUDIT, T.TOMBSTONES} | {_KIND_COLS[k][0] for k in found if found[k]}
        changed |= {T.RELATIONS} if found.get("memory") else set()
        # Use counts name the memory; an outbox held the whole row while it was queued for a shared scope
        # (remote_outbox: memories; remote_evidence_outbox: evidence), and every flush left a version of it.
        from memory.store.remote_evidence import EV_OUTBOX
        from memory.store.remote_io import OUTBOX

        present = set(store.db.table_names())
        changed |= {T.USAGE, OUTBOX} & present if found.get("memory") else set()
        changed |= {EV_OUTBOX} & present if found.get("evidence") else set()
        purge(store, changed | set(extra_tables) | ({T.REEMBED_STAGING} if staged else set()))
    return {
        "deleted": len(stones),
        "by_kind": {k: len(v) for k, v in found.items()},
        "frames_removed": removed,
        "purged": purge_now,
    }


def _audio_path(row: dict[str, Any]) -> str | None:
    meta = row.get("meta")
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except ValueError:
            return None
    return meta.get("audio_path") if isinstance(meta, dict) else None


def _remove_frame(home: Path, path: str) -> int:
    p = Path(path)
    if not p.is_absolute():
        p = home / p
    try:
        p.resolve().relative_to(home.resolve())  # never delete files we do not own
    except ValueError:
        log.warning("frame %s is outside the data dir; not removing it", p)
        return 0
    if p.exists():
        p.unlink()
        return 1
    return 0


# Any deleted row at all: Lance compacts a fragment once this share of its rows is deleted.
_ANY_DELETION = 1e-12


def _rewrite_fragments_with_deletions(store: Store, table: Table) -> int:
    """Rewrite the live rows of every fragment that holds a deleted row, so the old fragment is dropped;
    returns how many fragments were rewritten.

    Why: a delete only marks a row deleted; its bytes stay in the fragment's data file, and LanceDB's
    optimize() rewrites a fragment only when at least 10% of it is deleted (its Python API does not
    expose that threshold). One forgotten row in a 10k-row fragment stayed on disk. Lance's own
    compaction takes the threshold; the cleanup that follows removes the old fragments' files.
    """
    def compact() -> int:
        ds = table.to_lance()
        if not any(f.metadata.num_deletions for f in ds.get_fragments()):
            return 0
        m = ds.optimize.compact_files(materialize_deletions=True, materialize_deletions_threshold=_ANY_DELETION)
        removed: int = m.fragments_removed
        return removed

    done: int = store.commit(compact)
    return done


# Audit fields that hold content: what a memory or vault entry said, as opposed to who changed which field when.
_AUDIT_CONTENT = {"memory": ("text", "title", "details"), "vault": ("label",)}


def _fingerprinted(value: Any) -> dict[str, Any]:
    """What an audit row keeps of a text no longer current: its fingerprint (memory/store/fingerprint.py), which
    can confirm a guessed text and never gives one back."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return {"fingerprint": fingerprint(text)}


def _as_stored(value: Any) -> Any:
    """A current field as an audit row holds it (JSON, as memory/store/audit.py writes it), for comparison."""
    return json.loads(json.dumps(value, default=str, ensure_ascii=False))


def scrub_audit_history(store: Store) -> int:
    """Replace, in every audit row of a memory or vault entry, each content field that no longer is the entry's
    current value (an edit's old text; the text a create recorded before the edits) by its fingerprint.
    Returns how many audit rows changed.

    Why: the audit log is append-only (principle 6), so an edit's previous text stayed in it for good, and a
    purge that dropped every old version of the memories table still left it readable on disk. The rows stay,
    with who, when, which action and which fields; the current text stays where it is current (the memory's own
    row holds it anyway). A forgotten entry's rows lost before/after at the forget already. An entry this store
    cannot read now (a shared scope whose bucket does not answer) keeps fingerprints only: nothing it said
    outlives a purge because the bucket was down."""
    where = F.and_(F.one_of("entity_kind", ("memory", "vault")), F.not_equals("action", "delete"),
                   F.or_(F.not_null("before"), F.not_null("after")))
    rows = store.rows(T.AUDIT, where, T.audit_schema().names) if store.count(T.AUDIT, where) else []
    if not rows:
        return 0
    current: dict[str, dict[str, Any]] = {}
    for kind in ("memory", "vault"):
        ids = sorted({r["entity_id"] for r in rows if r["entity_kind"] == kind and r["entity_id"].startswith(PREFIX[kind])})
        for id_, row in store.get_many(kind, ids, ["id", *_AUDIT_CONTENT[kind]]).items():
            if kind == "memory":
                row = {**row, "details": json.loads(row["details"]) if row.get("details") else {}}
            current[id_] = {k: _as_stored(row.get(k)) for k in _AUDIT_CONTENT[kind]}
    changed = []
    for r in rows:
        now = current.get(r["entity_id"], {})
        touched = False
        for col in ("before", "after"):
            try:
                doc = json.loads(r[col]) if r[col] else None
            except ValueError:  # not JSON (a sealed value, issue 40): left as it is, never guessed at
                continue
            if not isinstance(doc, dict):
                continue
            for key in _AUDIT_CONTENT[r["entity_kind"]]:
                value = doc.get(key)
                if value is None or (isinstance(value, dict) and set(value) == {"fingerprint"}):
                    continue  # nothing to hide, or scrubbed by an earlier purge
                if key in now and value == now[key]:
                    continue
                doc[key] = _fingerprinted(value)
                touched = True
            if touched:
                r[col] = json.dumps(doc, default=str, ensure_ascii=False, sort_keys=True)
        if touched:
            changed.append(r)
    for start in range(0, len(changed), 500):
        store.merge_rows(store.audit, to_arrow(changed[start:start + 500], T.audit_schema()))
    if changed:
        log.info("purge: old text in %d audit rows replaced by fingerprints", len(changed))
    return len(changed)


def _rebuild_indexes(store: Store, table: Table) -> None:
    """Build every index of the table again from its live rows.

    Why: an inverted (full-text) index keeps the tokens of deleted rows until it is rebuilt, an IVF index
    their quantised vectors until retrained, and a scalar index (BTREE on ids, BITMAP) their values; the
    rebuild writes new index files without them, and the cleanup that follows removes the old ones."""
    from memory.store.indexes import ensure_vector_index

    for ix in table.list_indices():
        col = ix.columns[0] if ix.columns else None
        if col is None or col not in table.schema.names:
            continue
        kind = str(ix.index_type).upper()
        if kind == "FTS" or "INVERTED" in kind:
            store.commit(lambda c=col: ensure_fts(table, c, replace=True))
        elif col == "vector":
            store.commit(lambda: ensure_vector_index(table, force=True))
        elif kind in ("BTREE", "BITMAP", "LABELLIST", "LABEL_LIST"):
            store.commit(lambda c=col, k=kind: table.create_scalar_index(
                c, index_type="LABEL_LIST" if k.startswith("LABEL") else k, replace=True))


def _purge_table(store: Store, table: Table) -> None:
    """Drop one table's deleted and updated-away rows from its files, its indexes and every old version."""
    # cleanup_older_than=0 drops every old version (lancedb warns about concurrent readers). Files no
    # manifest references yet are kept (delete_unverified=False): they may be another writer's in-flight
    # commit, which deleting would corrupt, and deleted content only ever lives in files that old versions
    # referenced (a write that failed wrote rows that were never stored, so never forgotten either).
    store.commit(lambda: table.optimize(cleanup_older_than=timedelta(0), delete_unverified=False))
    if _rewrite_fragments_with_deletions(store, table):
        store.commit(lambda: table.optimize(cleanup_older_than=timedelta(0), delete_unverified=False))
    if table.list_indices():
        _rebuild_indexes(store, table)
    # The newest version is always kept, and with it its transaction file and manifest, which name what that
    # commit did: a delete that emptied whole fragments (nothing left to compact) or matched no row (the use
    # counts of a memory never used) stays the newest version, its predicate listing the forgotten ids. A
    # version on top that changes only the table's config makes it an old version like any other.
    store.commit(lambda: table.to_lance().update_config({"mirador.purged_at": str(time.time_ns())}))
    store.commit(lambda: table.optimize(cleanup_older_than=timedelta(0), delete_unverified=False))


def _drop_old_versions(store: Store, table: Table) -> None:
    """Delete every old version's files (what no version but the newest uses); writes nothing."""
    store.commit(lambda: table.to_lance().cleanup_old_versions(older_than=timedelta(0), delete_unverified=False))


def purge(store: Store, tables: Iterable[str] | None = None, stop: threading.Event | None = None,
          progress: Callable[[str, int, int], None] | None = None) -> bool:
    """Physically remove deleted rows and old text: compact, rewrite fragments that still hold deleted rows,
    rebuild indexes, drop every old version. tables: only these (default: every table of the data folder,
    outboxes and use counts included, after the audit log's old text is replaced by fingerprints —
    scrub_audit_history; `mirador purge` and the scheduled purge run that).

    stop: a threading.Event; once set, no further table is started (deleted rows of the tables not
    reached stay in their old versions until the next purge). Returns False when it stopped early.
    progress(table, done, total): called before each table (and once at the end, done == total)."""
    with store.write_lock, warnings.catch_warnings(), maintenance_lock(store.home) as locked:
        warnings.simplefilter("ignore")
        present = set(store.db.table_names())
        if tables is None:
            # Every table, not a list of those known to hold content: memory_usage, the outboxes and any table
            # added later hold ids or whole rows too, and an old version of any of them outlived a forget.
            first = [T.MEMORIES, T.EVIDENCE, T.VAULT, T.AUDIT, T.TOMBSTONES]
            names = first + sorted(present - set(first))
        else:
            names = list(dict.fromkeys(tables))
        done = True
        if not (stop is not None and stop.is_set()):
            # Dropping old versions only deletes files, so on a full disk it runs first: the space they hold is
            # what the writes below (the audit scrub, compaction, index rebuilds) need.
            for name in names:
                if name in present:
                    _drop_old_versions(store, store.db.open_table(name))
        if tables is None and not (stop is not None and stop.is_set()):
            scrub_audit_history(store)  # before the audit table's purge below drops the versions with the text
        for i, name in enumerate(names):
            if stop is not None and stop.is_set():
                done = False
                break
            if progress is not None:
                progress(name, i, len(names))
            if name not in store.db.table_names():
                continue  # e.g. a re-embed finished meanwhile and dropped its staging table
            table = store.db.open_table(name)
            with swept(store, table, locked):  # a rebuild that fails on a full disk leaves no partial index
                _purge_table(store, table)
        if done and progress is not None:
            progress("", len(names), len(names))
    store.reopen_tables()
    return done


def purge_shared(store: Store) -> dict[str, str | None]:
    """Purge the bucket of every shared scope (memory/store/remote.py): rewrite the fragments that held deleted
    or edited-away rows, rebuild its full-text index, drop every old version — so an edit's old text leaves
    the bucket too, not only a forget's. Returns {scope: None when purged, else why not}; a store that does not
    answer is left for the next forget or purge."""
    out: dict[str, str | None] = {}
    remotes = getattr(store, "remotes", None)
    for shared in (remotes.shared.values() if remotes is not None and remotes.shared else ()):
        scope = shared.binding.scope
        try:
            shared.purge([T.MEMORIES, T.RELATIONS])
            mirror = getattr(remotes, "evidence", None)
            if shared.binding.evidence and mirror is not None:
                from memory.store.remote_evidence import bucket_table

                try:
                    table = bucket_table(shared, mirror.schema(), create=False)
                except (ValueError, FileNotFoundError):
                    table = None  # no device shared evidence yet
                if table is not None:
                    shared._purge(table)
            out[scope] = None
        except Exception as e:  # down, refused, timed out: its old versions wait for the next purge
            out[scope] = str(e).splitlines()[0][:300] if str(e) else type(e).__name__
    return out
