"""Edits of a shared memory that no race can lose: settled against the version the commit replaces.

Two devices (or two processes of one home, which share an outbox) may edit one shared memory within the same
second. Reading the bucket's version, deciding, then writing with an unconditional merge let the second
commit overwrite the first without seeing it (issue 41: one edit in two vanished from every read). Here the
decision and the commit are tied together:

1. Each queued put knows the shared version it started from (outbox_base: that version's updated_at; None for
   a memory new to the bucket). The queued puts of one memory are replayed in queue order on top of the
   bucket's current version (`settle`): a put whose base is the current version applies; one whose own
   version is already there was sent before (a retried batch, or the other process of this home) and is
   skipped; any other is a conflict, settled as docs/sharing.md says — a person's edit beats an automated
   one; between people the later edit wins and the earlier is kept as a superseded version, pointing at the
   winner (an automated edit that loses is dropped, and audited).
2. The result is committed with LanceDB's conditional merge: an update applies only where the row's
   updated_at is still the version settled against (`target.updated_at = <that version>`), and a new memory
   only where its id is absent from the version the merge read. Lance re-evaluates an update's condition
   when its commit races another, so of two edits from one version exactly one applies; two concurrent
   inserts of one id are not a conflict to it and both commit, so each insert is followed by a check of its
   ids that removes a second row (memory/store/remote_dedup.py; every read keeps one row per id too). The merge's own version says which rows did; the others
   are settled again against what replaced their version, up to ROUNDS times, after which the batch stays
   in the outbox for the next flush (never dropped).
3. A kept version is written before the winner replaces it, under an id derived from the memory and the
   kept version's time: a flush that dies between the two commits, or runs twice (or in both processes of
   one home), writes it once. One whose winner then did not apply stays: it is a version a person wrote, and
   removing it could remove what the other process of this home needs.

The person whose edit was kept as an earlier version is told in Review: the bucket's edit log gets a row for
the kept version naming the device and person who made it (actor "conflict"), and every device turns the rows
naming it into a `conflict` proposal on its next full flush (`propose_conflicts`): accept makes that edit the
current version again, dismiss keeps the winner. Both edits are in the audit: the settling device writes a
`conflict` row naming the other device, person and writer and what it kept; the device told writes a
`propose` row.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from memory.store import filters as F
from memory.store import tables as T
from memory.store.remote_dedup import dedupe_ids
from memory.store.remote_io import fresh
from memory.store.remote_io import now as _now
from memory.store.remote_io import retry as _retry
from memory.store.rows import PREFIX

if TYPE_CHECKING:
    from memory.store.remote_outbox import Outbox
    from memory.store.remote_shared import Shared

ROUNDS = 8  # settle-and-commit tries per batch before it waits for the next flush
CONFLICT = "conflict"  # the edit log's actor of a kept (superseded) version; the proposal's kind


@dataclass
class Queued:
    """One queued put of a memory: the row, the version it started from, who made it."""

    row: dict[str, Any]
    base: Any  # updated_at of the shared version it started from; None: new to the bucket
    actor: str


@dataclass
class Outcome:
    """What settling one memory's queued puts against the bucket's version decided."""

    id: str
    expect: Any  # updated_at of the bucket's version settled against; None: absent there
    final: dict[str, Any] | None = None  # the version to commit; None: nothing to write for this id
    final_actor: str = "person"
    copies: list[dict[str, Any]] = field(default_factory=list)  # earlier versions kept (superseded)
    kept_by: list[dict[str, str]] = field(default_factory=list)  # per copy: who made it (for the edit log)
    notes: list[dict[str, Any]] = field(default_factory=list)  # conflict audit rows


def copy_id(memory_id: str, version: Any) -> str:
    """The id of the kept copy of one version of a memory: the same on every try and every device."""
    digest = hashlib.sha256(f"{memory_id}|{version.isoformat() if version else ''}".encode()).hexdigest()
    return PREFIX["memory"] + digest[:24]


def _automated(actor: str | None) -> bool:
    from memory.store.audit import ACTORS_AUTOMATED

    return bool(actor and actor.split(":", 1)[0] in ACTORS_AUTOMATED)


def settle(current: dict[str, Any] | None, writer: dict[str, Any], chain: list[Queued], me: dict[str, str],
           binding: str, now: Any) -> Outcome:
    """Replay this device's queued puts of one memory (queue order) on the bucket's current version.

    writer: the edit-log row of the current version (actor, device, person; empty when unknown — a version
    with no log entry counts as a person's). me: this device's {"device", "person"}."""
    from memory.store.audit import audit_row

    i = chain[0].row["id"]
    out = Outcome(i, current["updated_at"] if current else None)
    state = current
    by = {"actor": writer.get("actor") or "person", "device": writer.get("device") or "",
          "person": writer.get("person") or ""}
    ours_in_state = False
    for q in chain:
        ours = {"actor": q.actor or "person", **me}
        if q.base is None:  # new to the bucket (or made here before the scope was bound)
            if state is None:
                state, by, ours_in_state = q.row, ours, True
            # Else the id, this device's own, is there already: this put was sent before, and whatever is there
            # now was made on top of it. Nothing to write.
            continue
        if state is None:  # forgotten or moved out of the shared scope elsewhere: an edit does not re-create it
            out.notes.append(audit_row(f"shared:{binding}", "conflict", "memory", i, q.row["scope"],
                                       after={"kept": "nothing", "reason": "no longer in the shared store"}))
            continue
        if state["updated_at"] == q.base:
            state, by, ours_in_state = q.row, ours, True
            continue
        if state["updated_at"] == q.row["updated_at"]:
            continue  # sent before (a retried batch, or the other process of this home sent it)
        # A conflict: this put started from a version that another edit has replaced since.
        if _automated(ours["actor"]) != _automated(by["actor"]):
            ours_win = not _automated(ours["actor"])
        else:
            ours_win = (q.row["updated_at"], me["device"]) > (state["updated_at"], by["device"])
        loser, loser_by = (state, by) if ours_win else (q.row, ours)
        kept = None
        if not _automated(loser_by["actor"]):  # a person's edit is never lost
            kept = copy_id(i, loser["updated_at"])
            # Its times come from the two versions, not this device's clock: two devices settling the same
            # conflict at once may both insert the copy (remote_dedup.py), and then the rows are identical.
            winner = q.row if ours_win else state
            when = max((t for t in (loser["updated_at"], winner["updated_at"]) if t is not None), default=now)
            out.copies.append({**loser, "id": kept, "status": "superseded", "superseded_by": i,
                               "valid_to": loser.get("valid_to") or when, "updated_at": when})
            out.kept_by.append({"device": loser_by["device"], "person": loser_by["person"]})
        other = {**by, "updated_at": state["updated_at"].isoformat() if state["updated_at"] else None}
        out.notes.append(audit_row(
            f"shared:{binding}", "conflict", "memory", i, q.row["scope"], before={"other": other},
            after={"kept": "this device's edit" if ours_win else "the other edit",
                   "this": {"actor": ours["actor"], "device": me["device"], "person": me["person"]},
                   "earlier_version": kept}))
        if ours_win:
            state, by, ours_in_state = q.row, ours, True
    if ours_in_state and state is not None:
        out.final, out.final_actor = state, by["actor"]
    return out


class EditCommit:
    """Settles and commits the queued puts of one flush to one shared store; then `finish` logs who wrote
    which version, writes the audit rows and tells the people whose edit was kept as an earlier version."""

    def __init__(self, remotes: Outbox, shared: Shared) -> None:
        self.remotes, self.shared = remotes, shared
        self.me = {"device": remotes.device, "person": remotes.person}
        self.done: list[Outcome] = []

    def send(self, chains: dict[str, list[Queued]]) -> None:
        """Commit each memory's queued puts (in queue order) so that no edit is lost; raises (the batch stays
        queued) when a memory kept changing under it for ROUNDS tries."""
        t = self.shared.memories()
        cols = T.memories_schema(1).names
        todo = dict(chains)
        written_copies: set[str] = set()
        for _ in range(ROUNDS):
            if not todo:
                break
            ids = sorted(todo)
            current = {r["id"]: r for r in fresh(t).search().where(F.id_in(ids))
                       .select(cols).limit(None).to_arrow().to_pylist()}
            writers = self.shared.writers(ids)
            now = _now()
            outcomes = {}
            for i in ids:
                cur = current.get(i)
                w = writers.get((i, cur["updated_at"]), {}) if cur else {}
                outcomes[i] = settle(cur, w, todo[i], self.me, self.shared.binding.name, now)
            copies = [c for o in outcomes.values() for c in o.copies if c["id"] not in written_copies]
            if copies:  # before the winners replace them: a flush that dies in between loses no version
                data = pa.Table.from_pylist(copies, schema=t.schema)
                _retry(lambda d=data: t.merge_insert("id").when_not_matched_insert_all().execute(d))
                written_copies.update(c["id"] for c in copies)
                # Another home settling the same conflict may have inserted the same copy at the same moment:
                # Lance commits both inserts, so the id is checked and any second row removed (remote_dedup.py).
                dedupe_ids(t, sorted({c["id"] for c in copies}))
            applied = self._commit(t, [o for o in outcomes.values() if o.final is not None])
            for i, o in outcomes.items():
                if o.final is None or i in applied:
                    self.done.append(o)
                    del todo[i]
        if todo:
            raise RuntimeError(f"retryable: {len(todo)} shared memories changed under every one of {ROUNDS} tries "
                               "to send this device's edits; they stay queued for the next flush")

    def _commit(self, t: Any, outcomes: list[Outcome]) -> set[str]:
        """Write each settled version only if the bucket still holds the version it was settled against;
        returns the ids written."""
        applied: set[str] = set()
        new = [o for o in outcomes if o.expect is None]
        edits = [o for o in outcomes if o.expect is not None]
        if new:
            # Insert only: an id that appeared meanwhile is settled again, never overwritten.
            data = pa.Table.from_pylist([o.final for o in new], schema=t.schema)
            res = _retry(lambda: t.merge_insert("id").when_not_matched_insert_all().execute(data))
            applied |= self._written(t, new, res, res.num_inserted_rows)
            if res.num_inserted_rows:  # a concurrent insert of one id is not a conflict to Lance (see above)
                dedupe_ids(t, sorted(o.id for o in new))
        if edits:
            # Update only, and only where the row is still the version settled against: a memory deleted
            # meanwhile is not re-created, and one edited meanwhile is settled again.
            cond = F.versions_are((o.id, o.expect) for o in edits if o.expect is not None)
            data = pa.Table.from_pylist([o.final for o in edits], schema=t.schema)
            res = _retry(lambda: t.merge_insert("id").when_matched_update_all(where=cond).execute(data))
            applied |= self._written(t, edits, res, res.num_updated_rows)
        return applied

    @staticmethod
    def _written(t: Any, outcomes: list[Outcome], res: Any, count: int) -> set[str]:
        """Which of these outcomes the merge wrote: all when its count says so; else read from the very
        version the merge committed (a later commit by another device cannot blur it)."""
        if count == len(outcomes):
            return {o.id for o in outcomes}
        if count == 0:
            return set()
        at = t.to_lance().checkout_version(res.version)
        rows = at.to_table(columns=["id", "updated_at"],
                           filter=F.id_in([o.id for o in outcomes])).to_pylist()
        version = {r["id"]: r["updated_at"] for r in rows}
        return {o.id for o in outcomes if o.final is not None and version.get(o.id) == o.final["updated_at"]}

    def finish(self) -> None:
        """Record what was sent: the edit log (who wrote each version; a kept version names who made it, so
        their device can tell them), the conflict audit rows, and proposals for this device's people."""
        now = _now()
        log = []
        for o in self.done:
            if o.final is not None:
                log.append({"id": o.id, "updated_at": o.final["updated_at"], "actor": o.final_actor,
                            "device": self.me["device"], "person": self.me["person"], "sent_at": now})
            log += [{"id": c["id"], "updated_at": c["updated_at"], "actor": CONFLICT, "device": k["device"],
                     "person": k["person"], "sent_at": now} for c, k in zip(o.copies, o.kept_by, strict=True)]
        self.shared.log_edits(log)
        notes = [n for o in self.done for n in o.notes]
        if notes:
            self.remotes.store.write_audit(notes)
        if any(k["device"] == self.me["device"] for o in self.done for k in o.kept_by):
            propose_conflicts(self.remotes, self.shared)


def propose_conflicts(remotes: Outbox, shared: Shared) -> int:
    """Turn the bucket's kept versions of this device's people's edits into Review proposals here (kind
    `conflict`: accept makes the kept edit current again, dismiss keeps the winner), once each; audited.
    Returns how many were new."""
    from memory.store.audit import audit_row

    try:
        edit_log = fresh(shared.edits(create=False))
    except (ValueError, FileNotFoundError):  # no device sent an edit yet
        return 0
    mine = (edit_log.search().where(F.and_(F.equals("actor", CONFLICT), F.equals("device", remotes.device)))
            .select(["id"]).limit(None).to_arrow().column("id").to_pylist())
    if not mine:
        return 0
    store = remotes.store
    ids = {c: "prp_" + hashlib.sha256(c.encode()).hexdigest()[:24] for c in mine}
    have = set(store.get_many(T.PROPOSALS, list(ids.values()), ["id"]))
    todo = [c for c, p in ids.items() if p not in have]
    if not todo:
        return 0
    kept = shared.query(F.id_in(todo), ["id", "scope", "superseded_by", "updated_at"], len(todo))
    winners = {r["id"]: r for r in shared.query(
        F.id_in(sorted({k["superseded_by"] for k in kept if k["superseded_by"]})),
        ["id", "updated_at"], len(kept))} if kept else {}
    writers = shared.writers(list(winners)) if winners else {}
    now = _now()
    rows, notes = [], []
    for k in kept:
        win = winners.get(k["superseded_by"])
        if win is None:  # the winner was forgotten since: nothing to decide
            continue
        w = writers.get((win["id"], win["updated_at"]), {})
        who = " ".join(x for x in (w.get("person"), f"on {w['device']}" if w.get("device") else "") if x) or \
            "someone sharing the scope"
        reason = (f"edited at the same time by {who}; their edit is current and yours is kept as an earlier "
                  "version — accept to make yours current again")
        rows.append({"id": ids[k["id"]], "kind": CONFLICT, "target_id": win["id"], "other_id": k["id"],
                     "scope": k["scope"], "reason": reason, "status": "open", "created_at": now, "decided_at": None})
        notes.append(audit_row(f"shared:{shared.binding.name}", "propose", "memory", win["id"], k["scope"],
                               after={"proposal": ids[k["id"]], "kind": CONFLICT, "other": k["id"]}))
    if rows:
        store.add_rows(T.PROPOSALS, rows)
        store.write_audit(notes)
    return len(rows)
