"""The scheduler takes new schedules while running, and stops promptly even mid-LLM-call."""

from __future__ import annotations

import multiprocessing as mp
import threading
from datetime import timedelta

import pytest
from apscheduler.schedulers.base import STATE_PAUSED, STATE_RUNNING

from memory.consolidation.scheduler import LLM_PROCESS_NAME, MiradorScheduler, start_scheduler


def _llm_workers() -> list:
    return [p for p in mp.active_children() if p.name == LLM_PROCESS_NAME]


def test_apply_config_reschedules_only_changed_jobs_and_pauses(store):
    store.config.extraction.engine = "rules"
    sched = start_scheduler(store)
    try:
        get = sched.scheduler.get_job
        before = {j: str(get(j).trigger) for j in ("extract", "dream", "purge", "optimize")}
        next_optimize = get("optimize").next_run_time
        cfg = store.config.model_copy(deep=True)
        cfg.scheduler.extract_interval_minutes = 2.5
        cfg.scheduler.purge_cron = "45 5 * * 1"
        assert sched.apply_config(cfg) == ["extract", "purge"]
        assert get("extract").trigger.interval == timedelta(minutes=2.5)
        purge = {f.name: str(f) for f in get("purge").trigger.fields}
        # crontab's weekday 1 is Monday (memory/cron.py); APScheduler's own 1 would have been Tuesday
        assert (purge["minute"], purge["hour"], purge["day_of_week"]) == ("45", "5", "mon")
        assert get("purge").next_run_time.weekday() == 0
        assert str(get("dream").trigger) == before["dream"] and str(get("optimize").trigger) == before["optimize"]
        assert get("optimize").next_run_time == next_optimize, "an unchanged job keeps its countdown"
        assert sched.apply_config(cfg) == [], "saving the same values again reschedules nothing"

        cfg.scheduler.enabled = False
        sched.apply_config(cfg)
        assert sched.scheduler.state == STATE_PAUSED  # no job runs until re-enabled
        cfg.scheduler.enabled = True
        sched.apply_config(cfg)
        assert sched.scheduler.state == STATE_RUNNING
    finally:
        assert sched.stop()
    assert not sched.scheduler.running


@pytest.fixture(scope="module")
def gguf(tmp_path_factory):
    from models.locate import llm_gguf

    return llm_gguf(None, tmp_path_factory.mktemp("models"))


def test_stop_ends_llm_worker_and_leaves_the_batch_pending(store, gguf):
    from memory.consolidation.extraction import pending_count

    x = store.config.extraction
    x.engine, x.llm_isolated, x.batch_size, x.llm_timeout_seconds = "llm", True, 4, 600
    store.config.models.llm_path = gguf
    for i in range(12):
        store.add_evidence(f"Decision {i}: the billing service moves to Postgres {10 + i} next sprint.",
                           source="manual")
    sched = MiradorScheduler(store)
    result = []
    job = threading.Thread(target=lambda: result.append(sched.run_job("extract")))  # what the scheduler does
    job.start()
    tick = threading.Event()  # never set: wait(0.1) paces the polling below
    for _ in range(1200):  # wait (up to 120 s) for the LLM worker process: a call is loading or running
        if _llm_workers() or not job.is_alive():
            break
        tick.wait(0.1)
    assert _llm_workers(), f"the extraction never started an LLM worker: {result}"

    assert sched.stop(timeout=60), "the running job must end once the LLM worker is gone"
    job.join(60)
    assert not job.is_alive() and result and result[0].startswith("stopped"), result
    assert _llm_workers() == [], "no LLM process outlives stop()"
    assert pending_count(store) >= x.batch_size, "the abandoned batch stays pending for the next start"
    assert "extract" not in sched.state.data, "a stop is not recorded as a failed or finished run"
