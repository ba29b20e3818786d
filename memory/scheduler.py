"""Background jobs: extraction, dream, retention purge, index optimisation (apscheduler 3).

Jobs run on one worker thread: they share one store (one writer per process), so they
queue behind each other instead of racing. Each job has max_instances=1 and coalesce=True:
it never overlaps itself, and missed runs collapse into one. Last-run times are kept in
`scheduler_state.json` in the data dir; on start an overdue job (e.g. the nightly dream
while the laptop was off) is run once soon instead of waiting for its next slot.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

from memory.rows import iso, parse_time

log = logging.getLogger(__name__)

STATE_FILE = "scheduler_state.json"
CATCH_UP_DELAY = timedelta(seconds=30)  # let the app finish starting before an overdue job runs


class JobState:
    """Last-run times per job, persisted as JSON so they survive restarts."""

    def __init__(self, home: Path) -> None:
        self.path = Path(home) / STATE_FILE
        self._lock = threading.Lock()
        try:
            self.data = json.loads(self.path.read_text(encoding="utf-8")) if self.path.exists() else {}
        except (json.JSONDecodeError, OSError):
            log.warning("%s unreadable; every job counts as never run", self.path)
            self.data = {}

    def last_run(self, job: str) -> datetime | None:
        """Naive-UTC end of the job's last successful run."""
        v = self.data.get(job, {}).get("last_run")
        return parse_time(v) if v else None

    def record(self, job: str, ok: bool, detail: str = "") -> None:
        """Store the outcome of a run (atomically)."""
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        with self._lock:
            entry = self.data.setdefault(job, {})
            entry["last_attempt"] = iso(now)
            entry["last_result"] = "ok" if ok else f"error: {detail}"[:500]
            if ok:
                entry["last_run"] = iso(now)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True), encoding="utf-8")
            tmp.replace(self.path)


def job_extract(store) -> str:
    """Extract pending evidence, only when there is some."""
    from memory.extraction import pending_count, run_extraction

    n = pending_count(store)
    if not n:
        return "no new evidence"
    r = run_extraction(store)
    return f"{r.evidence} evidence → {r.created} active, {r.candidates} candidates, {r.corroborated} corroborated"


def job_dream(store) -> str:
    """One incremental dream pass."""
    from memory.dream import run_dream

    return json.dumps(run_dream(store).counts())


def job_purge(store) -> str:
    """Forget evidence past scheduler.evidence_retention_days (0 = keep), then drop deleted data for good."""
    from memory.erasure import forget, purge
    from memory.rows import ts_literal

    days = store.config.scheduler.evidence_retention_days
    removed = 0
    if days > 0:
        cutoff = datetime.now(timezone.utc).replace(tzinfo=None) - timedelta(days=days)
        # By id, evidence only: forget_where(until=...) without an app would take memories and vault too.
        ids = [r["id"] for r in store._rows(store.evidence, f"captured_at < {ts_literal(cutoff)}", ["id"], None)]
        for i in range(0, len(ids), 500):
            removed += forget(store, ids[i:i + 500], actor="retention", purge_now=False)["deleted"]
    purge(store)
    capped = enforce_storage_cap(store)
    return (f"{removed} evidence rows past retention removed, {capped} oldest removed for the storage cap; "
            "old versions purged")


def evidence_bytes(store) -> int:
    """Bytes the captured evidence takes on disk: its LanceDB table plus frame thumbnails."""
    roots = [store.home / "lancedb" / "evidence.lance", store.home / "frames"]
    return sum(p.stat().st_size for root in roots if root.exists() for p in root.rglob("*") if p.is_file())


def enforce_storage_cap(store, max_rounds: int = 20) -> int:
    """Forget the oldest evidence, a tenth at a time, until evidence fits scheduler.evidence_storage_cap_mb.

    The person sets the cap; memories and vault entries are never touched, only raw evidence
    (memories keep their provenance ids, which then point at tombstones).
    """
    from memory.erasure import forget, purge

    cap = store.config.scheduler.evidence_storage_cap_mb * 1024 * 1024
    removed = 0
    for _ in range(max_rounds):
        if cap <= 0 or evidence_bytes(store) <= cap:
            break
        rows = store._rows(store.evidence, None, ["id", "captured_at"], None)
        if not rows:
            break
        rows.sort(key=lambda r: r["captured_at"])
        oldest = [r["id"] for r in rows[: max(1, len(rows) // 10)]]
        for i in range(0, len(oldest), 500):
            removed += forget(store, oldest[i:i + 500], actor="retention", purge_now=False)["deleted"]
        purge(store)
    if cap > 0 and evidence_bytes(store) > cap:
        log.warning("evidence still uses %.1f MB, above the %.1f MB cap", evidence_bytes(store) / 2**20, cap / 2**20)
    return removed


def job_optimize(store) -> str:
    """Compact fragments and refresh indexes."""
    store.optimize()
    return "optimized"


JOBS: dict[str, Callable] = {"extract": job_extract, "dream": job_dream, "purge": job_purge, "optimize": job_optimize}


class MiradorScheduler:
    """The running scheduler: apscheduler's BackgroundScheduler plus persisted job state."""

    def __init__(self, store, config=None) -> None:
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.schedulers.background import BackgroundScheduler

        self.store = store
        self.config = config or store.config
        self.state = JobState(store.home)
        self.scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(max_workers=1)},
            job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": 3600},
        )

    def run_job(self, name: str) -> str:
        """Run one job now in this thread, recording its outcome (what the scheduler calls)."""
        try:
            detail = JOBS[name](self.store)
        except Exception as e:
            log.exception("job %s failed", name)
            self.state.record(name, ok=False, detail=f"{type(e).__name__}: {e}")
            return f"error: {e}"
        self.state.record(name, ok=True)
        log.info("job %s: %s", name, detail)
        return detail

    def _triggers(self) -> dict:
        from apscheduler.triggers.cron import CronTrigger
        from apscheduler.triggers.interval import IntervalTrigger

        c = self.config.scheduler
        return {
            "extract": IntervalTrigger(minutes=c.extract_interval_minutes),
            "dream": CronTrigger.from_crontab(c.dream_cron),
            "purge": CronTrigger.from_crontab(c.purge_cron),
            "optimize": IntervalTrigger(minutes=c.optimize_interval_minutes),
        }

    def _overdue(self, name: str, trigger, now_local: datetime) -> bool:
        last = self.state.last_run(name)
        if last is None:
            return name in ("extract", "optimize")  # never run: cheap jobs start now, nightly ones wait
        last_local = last.replace(tzinfo=timezone.utc).astimezone()
        nxt = trigger.get_next_fire_time(None, last_local)
        return nxt is not None and nxt <= now_local

    def start(self) -> MiradorScheduler:
        """Add the jobs (catching up overdue ones once) and start the background thread."""
        now_local = datetime.now().astimezone()
        for name, trigger in self._triggers().items():
            job = self.scheduler.add_job(self.run_job, trigger, args=[name], id=name, name=f"mirador {name}",
                                         replace_existing=True)
            if self._overdue(name, trigger, now_local):
                job.modify(next_run_time=now_local + CATCH_UP_DELAY)
        self.scheduler.start()
        log.info("scheduler started: %s", ", ".join(f"{j.id} next {j.next_run_time}" for j in self.scheduler.get_jobs()))
        return self

    def next_runs(self) -> dict[str, str | None]:
        """Next fire time per job (ISO), for status screens."""
        return {j.id: j.next_run_time.isoformat() if j.next_run_time else None for j in self.scheduler.get_jobs()}

    def stop(self, wait: bool = True) -> None:
        """Stop the scheduler; with wait=True a running job finishes first."""
        if self.scheduler.running:
            self.scheduler.shutdown(wait=wait)


def start_scheduler(store, config=None) -> MiradorScheduler:
    """Start the background jobs for this store; returns the scheduler (call .stop() or stop())."""
    return MiradorScheduler(store, config).start()


def stop(scheduler: MiradorScheduler, wait: bool = True) -> None:
    """Stop a scheduler returned by start_scheduler."""
    scheduler.stop(wait=wait)
