"""`mirador capture` as a real process: SIGKILL mid-batch leaves a readable store; SIGTERM flushes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from tests.capture.xdisplay import wait_for


def health(home) -> dict:
    try:
        return json.loads((home / "capture_health.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def start_capture(home, display, *args) -> subprocess.Popen:
    # A long flush interval keeps rows pending, so the kill lands while a batch is still open.
    (home / "config.toml").write_text("[capture]\nflush_seconds = 30.0\nflush_rows = 3\ninterval_seconds = 1.0\n")
    env = dict(os.environ, DISPLAY=display.display, MIRADOR_HOME=str(home))
    return subprocess.Popen([sys.executable, "-m", "desktop.cli.main", "capture", "--no-audio", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_sigkill_mid_batch_then_restart_leaves_a_readable_store(display, mirador_home):
    from memory.retrieval.search import search_evidence
    from memory.store.core import Store

    mirador_home.mkdir(parents=True, exist_ok=True)
    display.window("Ticker", "live counter window", changing=True)
    proc = start_capture(mirador_home, display, "--duration", "600")
    try:
        # Wait for at least one committed batch AND rows pending in the next one: that is "mid-batch".
        wait_for(lambda: health(mirador_home).get("evidence_written", 0) >= 3
                 and health(mirador_home).get("evidence_pending", 0) > 0, 240, what="a commit plus a pending batch")
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    written = health(mirador_home)["evidence_written"]

    store = Store(mirador_home)
    count = store.count("evidence", local=True)
    # Everything committed survived; the open batch (at most flush_rows rows) was lost, nothing else.
    assert count >= written
    assert all(r["text"] for r in store.list("evidence", limit=1000))
    assert search_evidence(store, "live counter window", limit=3)

    out = subprocess.run([sys.executable, "-m", "desktop.cli.main", "status", "--json"], capture_output=True, text=True,
                         env=dict(os.environ, MIRADOR_HOME=str(mirador_home)), timeout=60)
    assert json.loads(out.stdout)["state"] == "not running"

    # Restart: capture runs again on the same store, then SIGTERM flushes what is pending.
    proc = start_capture(mirador_home, display, "--duration", "600")
    try:
        wait_for(lambda: health(mirador_home).get("pid") == proc.pid
                 and health(mirador_home).get("evidence_pending", 0) > 0, 240, what="the restarted capture to queue rows")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(300) == 0, proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    h = health(mirador_home)
    assert h["state"] == "stopped" and h["evidence_pending"] == 0 and h["errors"] == 0
    assert Store(mirador_home).count("evidence", local=True) >= count + h["evidence_written"]
