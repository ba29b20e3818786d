"""Background jobs: extraction, dream, retention purge, index optimisation (apscheduler 3).

Jobs run on one worker thread: they share one store (one writer per process), so they
queue behind each other instead of racing. Each job has max_instances=1 and coalesce=True:
it never overlaps itself, and missed runs collapse into one. Last-run times are kept in
`scheduler_state.json` in the data dir; on start an overdue job (e.g. the nightly dream
while the laptop was off) is run once soon instead of waiting for its next slot.

Stopping is bounded: the job thread is a daemon; every job checks a stop flag between its steps
(extraction between batches, dream between steps, purge between batches and tables, optimize
between commits) and a stopped run is not recorded, so it is caught up at the next start; the LLM
worker process is ended so an in-flight call returns at once (its batch stays pending).
`apply_config()` reschedules jobs whose interval or cron changed, without a restart.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.store.atomic import write_atomic
from memory.store.rows import iso, parse_time
from memory.types import utcnow

if TYPE_CHECKING:
    from concurrent.futures import Future

    from apscheduler.executors.pool import BasePoolExecutor

    from memory.config import Config
    from memory.store.core import Store
    from models.llm import LLM, Completion, ModelInfo

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
        now = utcnow()
        with self._lock:
            entry = self.data.setdefault(job, {})
            entry["last_attempt"] = iso(now)
            entry["last_result"] = "ok" if ok else f"error: {detail}"[:500]
            if ok:
                entry["last_run"] = iso(now)
            write_atomic(self.path, json.dumps(self.data, indent=1, sort_keys=True))


class JobCancelled(Exception):
    """A job gave up because the scheduler is stopping (not an error; nothing half-written)."""


class _StopAwareLLM:
    """The shared LLM, refusing calls once stopping is set.

    Raising JobCancelled (not LLMError) matters: the extractor would answer an LLMError by using
    the rules for the batch and marking it extracted; JobCancelled leaves the batch pending for
    the LLM at the next start.
    """

    def __init__(self, llm: LLM, stopping: threading.Event) -> None:
        self.llm, self.stopping = llm, stopping

    @property
    def info(self) -> ModelInfo | None:
        """The wrapped model's info (its name goes into the extraction report)."""
        return self.llm.info

    def complete_json(self, *args: Any, **kwargs: Any) -> Completion:
        """The wrapped call, or JobCancelled when the scheduler stops before or during it."""
        if self.stopping.is_set():
            raise JobCancelled("Mirador is stopping")
        try:
            return self.llm.complete_json(*args, **kwargs)
        except Exception:
            if self.stopping.is_set():  # stop() ended the worker under this call
                raise JobCancelled("Mirador is stopping; the LLM worker was ended") from None
            raise


def job_extract(store: Store, stopping: threading.Event | None = None) -> str:
    """Extract pending evidence, only when there is some; one batch at a time, stopping early when asked."""
    from memory.consolidation.extraction import make_extractor, pending_count, run_extraction, shared_llm

    if not pending_count(store):
        return "no new evidence"
    stopping = stopping or threading.Event()
    x = store.config.extraction
    # Only the llm engine loads the LLM; the statement engine (auto) judges with the store's embedder.
    llm = _StopAwareLLM(shared_llm(store.config, store.home), stopping) if x.engine == "llm" else None
    extractor = make_extractor(store, llm=llm)
    n = created = candidates = corroborated = noise = 0
    while n < x.max_items_per_run and not stopping.is_set():
        r = run_extraction(store, extractor=extractor, limit=min(x.batch_size, x.max_items_per_run - n))
        if not r.evidence:
            break
        n, created = n + r.evidence, created + r.created
        candidates, corroborated = candidates + r.candidates, corroborated + r.corroborated
        noise += r.noise_rows
    if stopping.is_set():
        raise JobCancelled(f"Mirador is stopping ({n} evidence extracted first)")
    # Rows read as noise throughout give no memory; saying how many keeps that judgement visible.
    return (f"{n} evidence → {created} active, {candidates} candidates, {corroborated} corroborated"
            + (f", {noise} read as noise" if noise else ""))


def job_dream(store: Store, stopping: threading.Event | None = None) -> str:
    """One incremental dream pass; at quit it ends between two steps (the next pass does the rest)."""
    from memory.consolidation.dream import run_dream

    plan = run_dream(store, stop=stopping)
    if plan.stopped:
        raise JobCancelled(f"Mirador is stopping (dream pass stopped {plan.stopped}; the next pass does the rest)")
    return json.dumps(plan.counts())


def job_purge(store: Store, stopping: threading.Event | None = None) -> str:
    """Forget evidence past scheduler.evidence_retention_days (0 = keep), then drop deleted data for good.

    At quit it ends between two batches or two tables. A stopped run is not recorded, so the next
    start runs it again (CATCH_UP_DELAY): until then, what it forgot is out of every search but still
    in old table versions on disk.
    """
    from memory.store import filters as F
    from memory.store.erasure import forget, purge

    stopping = stopping or threading.Event()
    days = store.config.scheduler.evidence_retention_days
    removed = 0
    if days > 0:
        cutoff = utcnow() - timedelta(days=days)
        # By id, evidence only: retention ages out raw evidence and keeps what was learnt from it, while
        # forget_where (a person's erasure) would also erase the memories derived only from that evidence.
        # This device's capture: another device's shared copies age out by that device's own retention.
        ids = [r["id"] for r in store.rows("evidence", F.before("captured_at", cutoff), ["id"], local=True)]
        for i in range(0, len(ids), 500):
            _unless_stopping(stopping, f"{removed} evidence rows past retention removed")
            removed += forget(store, ids[i:i + 500], actor="retention", purge_now=False)["deleted"]
    if not purge(store, stop=stopping):
        _unless_stopping(stopping, f"{removed} evidence rows past retention removed, old versions partly purged")
    capped = enforce_storage_cap(store, stop=stopping)
    _unless_stopping(stopping, f"{removed} + {capped} evidence rows removed")
    return (f"{removed} evidence rows past retention removed, {capped} oldest removed for the storage cap; "
            "old versions purged")


def _unless_stopping(stopping: threading.Event, done: str) -> None:
    if stopping.is_set():
        raise JobCancelled(f"Mirador is stopping ({done}; the rest at the next start)")


def evidence_bytes(store: Store) -> int:
    """Bytes the captured evidence takes on disk: its LanceDB table plus frame thumbnails."""
    roots = [store.home / "lancedb" / "evidence.lance", store.home / "frames"]
    return sum(p.stat().st_size for root in roots if root.exists() for p in root.rglob("*") if p.is_file())


def enforce_storage_cap(store: Store, max_rounds: int = 20, stop: threading.Event | None = None) -> int:
    """Forget the oldest evidence, a tenth at a time, until evidence fits scheduler.evidence_storage_cap_mb.

    The person sets the cap; memories and vault entries are never touched, only raw evidence
    (memories keep their provenance ids, which then point at tombstones).
    """
    from memory.store.erasure import forget, purge

    cap = store.config.scheduler.evidence_storage_cap_mb * 1024 * 1024
    removed = 0
    for _ in range(max_rounds):
        if cap <= 0 or (stop is not None and stop.is_set()) or evidence_bytes(store) <= cap:
            break
        rows = store.rows("evidence", None, ["id", "captured_at"], local=True)  # this device's disk
        if not rows:
            break
        rows.sort(key=lambda r: r["captured_at"])
        oldest = [r["id"] for r in rows[: max(1, len(rows) // 10)]]
        for i in range(0, len(oldest), 500):
            if stop is not None and stop.is_set():
                break
            removed += forget(store, oldest[i:i + 500], actor="retention", purge_now=False)["deleted"]
        if not purge(store, stop=stop):
            break
    if cap > 0 and not (stop is not None and stop.is_set()) and evidence_bytes(store) > cap:
        log.warning("evidence still uses %.1f MB, above the %.1f MB cap", evidence_bytes(store) / 2**20, cap / 2**20)
    return removed


def job_optimize(store: Store, stop: threading.Event | None = None) -> str:
    """Compact fragments and refresh indexes; at quit (`stop` set) it ends between two commits."""
    report = store.optimize(stop=stop)
    return f"stopped {report['stopped']}" if "stopped" in report else "optimized"


def job_share(store: Store, stop: threading.Event | None = None) -> str:
    """Send what waits in the outbox to the shared scopes' remote stores (a remote that was down drains
    here once it is back, even when nothing new is written)."""
    remotes = store.remotes
    if not remotes.shared:
        return "no shared scopes"
    r = remotes.flush()
    errors = "; ".join(f"{k}: {v}" for k, v in r["errors"].items())
    done = ""
    if not r["errors"]:
        from memory.store.erasure import recheck_derived

        # Forgets made while a store was down: their derived memories there are dealt with now.
        d = recheck_derived(store)
        done = f"; {d['erased']} derived erased, {d['reviewed']} to review" if d["erased"] or d["reviewed"] else ""
    return f"sent {r['sent']}, {r['pending']} waiting" + (f" ({errors})" if errors else "") + done


def job_share_maintain(store: Store, stop: threading.Event | None = None) -> str:
    """Update the shared stores' indexes and compact them, on the one device holding each store's
    maintainer lease (so devices sharing a store do not all rebuild its indexes)."""
    remotes = store.remotes
    if not remotes.shared:
        return "no shared scopes"
    report = remotes.maintain(elected=True, stop=stop)
    return "; ".join(f"{n}: " + (r.get("skipped") or (f"error {r['error']}" if "error" in r else f"{r['rows']} rows"))
                     for n, r in report.items())


JOBS: dict[str, Callable] = {"extract": job_extract, "dream": job_dream, "purge": job_purge, "optimize": job_optimize,
                             "share": job_share, "share_maintain": job_share_maintain}
LLM_PROCESS_NAME = "mirador-llm"  # models/llm.py names its isolated worker process so


class _DaemonPool:
    """A one-thread stand-in for concurrent.futures.ThreadPoolExecutor whose thread is a daemon.

    concurrent.futures joins its (non-daemon) workers at interpreter exit, so a long job (a
    compaction, a dream pass) would hold the process open after Quit whatever the stop budget.
    """

    def __init__(self) -> None:
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="mirador-jobs", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[Any]:
        """Queue fn(*args, **kwargs); returns a concurrent.futures.Future."""
        from concurrent.futures import Future

        fut: Future[Any] = Future()
        self._queue.put((fut, fn, args, kwargs))
        return fut

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            fut, fn, args, kwargs = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn(*args, **kwargs))
            except BaseException as e:  # handed to apscheduler, which logs it
                fut.set_exception(e)

    def shutdown(self, wait: bool = True) -> None:
        """End the thread after the queued jobs (MiradorScheduler.run_job skips them once stopping); wait joins it."""
        self._queue.put(None)
        if wait:
            self._thread.join()


def _executor() -> BasePoolExecutor:
    from apscheduler.executors.pool import BasePoolExecutor

    class DaemonExecutor(BasePoolExecutor):
        def __init__(self) -> None:
            super().__init__(_DaemonPool())

    return DaemonExecutor()


def end_llm_workers(timeout: float = 5.0) -> int:
    """Terminate this process's LLM worker processes, killing any still alive after timeout; returns how many."""
    import multiprocessing as mp

    procs = [p for p in mp.active_children() if p.name == LLM_PROCESS_NAME]
    for p in procs:
        p.terminate()
    deadline = time.monotonic() + timeout
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            log.warning("LLM worker %s ignored SIGTERM; killing it", p.pid)
            p.kill()
            p.join(1.0)
    return len(procs)


class MiradorScheduler:
    """The running scheduler: apscheduler's BackgroundScheduler plus persisted job state."""

    def __init__(self, store: Store, config: Config | None = None) -> None:
        from apscheduler.schedulers.background import BackgroundScheduler

        self.store = store
        self.config = config or store.config
        self.state = JobState(store.home)
        self.stopping = threading.Event()
        self.idle = threading.Event()  # clear while a job runs
        self.idle.set()
        self.running_job: str | None = None
        self.scheduler = BackgroundScheduler(
            executors={"default": _executor()},
            job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": 3600},
        )

    def run_job(self, name: str) -> str:
        """Run one job now in this thread, recording its outcome (what the scheduler calls)."""
        if self.stopping.is_set():  # queued before stop(): not worth starting now
            return "skipped: stopping"
        self.idle.clear()
        self.running_job = name
        try:
            detail = JOBS[name](self.store, self.stopping)
        except JobCancelled as e:
            log.info("job %s stopped early: %s", name, e)
            return f"stopped: {e}"
        except Exception as e:
            log.exception("job %s failed", name)
            self.state.record(name, ok=False, detail=f"{type(e).__name__}: {e}")
            return f"error: {e}"
        finally:
            self.running_job = None
            self.idle.set()
        self.state.record(name, ok=True)
        log.info("job %s: %s", name, detail)
        return detail

    @staticmethod
    def _timing(config: Config) -> dict:
        c = config.scheduler
        return {"extract": c.extract_interval_minutes, "dream": c.dream_cron, "purge": c.purge_cron,
                "optimize": c.optimize_interval_minutes, "share": config.remote.flush_interval_seconds,
                "share_maintain": config.remote.maintain_interval_minutes}

    def _triggers(self) -> dict:
        from apscheduler.triggers.interval import IntervalTrigger

        from memory import cron

        c = self.config.scheduler
        return {
            "extract": IntervalTrigger(minutes=c.extract_interval_minutes),
            "dream": cron.trigger(c.dream_cron),
            "purge": cron.trigger(c.purge_cron),
            "optimize": IntervalTrigger(minutes=c.optimize_interval_minutes),
            "share": IntervalTrigger(seconds=self.config.remote.flush_interval_seconds),
            "share_maintain": IntervalTrigger(minutes=self.config.remote.maintain_interval_minutes),
        }

    def _overdue(self, name: str, trigger: Any, now_local: datetime) -> bool:
        last = self.state.last_run(name)
        if last is None:
            return name in ("extract", "optimize", "share")  # never run: cheap jobs start now, nightly ones wait
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

    def apply_config(self, config: Config) -> list[str]:
        """Use new settings now: reschedule jobs whose interval or cron changed; pause or resume with
        scheduler.enabled. Returns the ids of the rescheduled jobs."""
        before = self._timing(self.config)
        self.config = config
        after, triggers = self._timing(config), self._triggers()
        changed = [name for name in JOBS if before[name] != after[name]]
        if not self.scheduler.running:
            return changed
        for name in changed:  # untouched jobs keep their countdown
            self.scheduler.reschedule_job(name, trigger=triggers[name])
        if config.scheduler.enabled:
            self.scheduler.resume()
        else:
            self.scheduler.pause()
        log.info("scheduler settings applied: %s",
                 ", ".join(f"{n} → {after[n]}" for n in changed) or "no timing change")
        return changed

    def stop(self, wait: bool = True, timeout: float = 30.0) -> bool:
        """Stop within about `timeout` s: no new runs, extraction abandons its batch (LLM worker ended),
        then (wait=True) wait for the running job. True if no job is still running."""
        self.stopping.set()
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        busy = self.running_job
        ended = end_llm_workers(min(5.0, timeout))
        if wait and not self.idle.wait(timeout):
            log.warning("scheduler stop: job %s still running after %.0fs; left to end with the process", busy,
                        timeout)
        if ended:
            log.info("scheduler stop: ended %d LLM worker process(es)", ended)
        return self.idle.is_set()


def start_scheduler(store: Store, config: Config | None = None) -> MiradorScheduler:
    """Start the background jobs for this store; returns the scheduler (call .stop() or stop())."""
    return MiradorScheduler(store, config).start()


def stop(scheduler: MiradorScheduler, wait: bool = True) -> None:
    """Stop a scheduler returned by start_scheduler."""
    scheduler.stop(wait=wait)
