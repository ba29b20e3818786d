"""The evidence storage cap removes the oldest evidence first, and nothing else."""

from __future__ import annotations

from datetime import datetime, timedelta

from memory.consolidation.scheduler import evidence_bytes, job_purge
from memory.store.core import EvidenceSpec
from memory.store.erasure import purge
from tests.conftest import StopAfter, files_containing


def test_cap_forgets_oldest_evidence_until_it_fits(store, mirador_home):
    t0 = datetime(2024, 1, 1)
    specs = [EvidenceSpec(text=f"screen text number {i} " + "lorem ipsum dolor " * 40, source="screen", app="term",
                          captured_at=t0 + timedelta(minutes=i)) for i in range(300)]
    specs[0].text = "the very oldest row mentions quillfeather-4411"
    for start in range(0, 300, 100):
        store.add_evidence_batch(specs[start:start + 100])
    mem = store.add_memory("A memory that must survive the cap")
    purge(store)  # measure live data, not old versions the purge would drop anyway
    before = evidence_bytes(store)
    store.config.scheduler.evidence_storage_cap_mb = before * 0.6 / 2**20

    report = job_purge(store)

    assert "oldest removed for the storage cap" in report
    assert evidence_bytes(store) <= before * 0.6
    left = store.list("evidence", limit=1000)
    assert 0 < len(left) < 300
    newest = max(s.captured_at for s in specs)
    assert any(e["captured_at"].startswith(newest.isoformat()[:16]) for e in left)  # the newest stays
    assert files_containing(mirador_home, "quillfeather-4411") == []  # the oldest is gone for good
    assert store.get(mem["id"])["text"] == "A memory that must survive the cap"


def test_no_cap_means_nothing_removed(store):
    store.add_evidence("kept evidence", source="manual")
    job_purge(store)
    assert len(store.list("evidence")) == 1


def test_retention_stops_between_batches_and_the_next_run_finishes(store, mirador_home):
    import pytest

    from memory.consolidation.scheduler import JobCancelled

    t0 = datetime(2020, 1, 1)
    specs = [EvidenceSpec(text=f"old terminal line {i}", source="screen", app="term", captured_at=t0 + timedelta(minutes=i))
             for i in range(600)]
    specs[0].text = "the oldest line names wrenfield-9083"
    store.add_evidence_batch(specs)
    store.add_evidence("captured today, kept", source="manual")
    store.config.scheduler.evidence_retention_days = 30

    with pytest.raises(JobCancelled, match="500 evidence rows past retention removed"):
        job_purge(store, StopAfter(1))  # one batch of 500 forgotten, then Quit
    left = {e["text"] for e in store.list("evidence", limit=1000)}
    assert len(left) == 101 and "the oldest line names wrenfield-9083" not in left  # out of every search now

    report = job_purge(store)  # the catch-up run at the next start
    assert report.startswith("100 evidence rows past retention removed")
    assert [e["text"] for e in store.list("evidence", limit=1000)] == ["captured today, kept"]
    assert files_containing(mirador_home, "wrenfield-9083") == []  # and now gone from disk too
    assert purge(store, stop=StopAfter(2)) is False  # between tables: two done, the rest not started
    assert purge(store) is True
