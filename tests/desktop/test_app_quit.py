"""Quitting the whole app (capture + scheduler + MCP in one process, as `mirador` runs it) ends the process.

The app runs in a subprocess on the test display. SIGTERM goes the same way as the tray's Quit
action (MiradorShell.quit). An extraction is in flight at that moment (an LLM worker process is
running), which is what once made quitting take minutes. No wall-clock asserts: the process must
exit, with code 0 and no traceback, and it logs how long each stop step took.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memory.config import Config, save_config
from tests.capture.xdisplay import wait_for

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[str]:
    """Command lines of the direct child processes of pid (Linux /proc)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                out.append((d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except (OSError, IndexError, ValueError):
            continue
    return out


@pytest.fixture(scope="module")
def gguf(tmp_path_factory):
    from models.locate import llm_gguf

    return llm_gguf(None, tmp_path_factory.mktemp("models"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc for the LLM worker")
def test_sigterm_quits_full_app_with_extraction_in_flight(xdisplay, mirador_home, store, gguf):
    cfg = Config()
    cfg.capture.audio = False  # no microphone under Xvfb; the screen is grabbed for real
    cfg.capture.interval_seconds = 1.0
    cfg.mcp.port = _free_port()
    cfg.models.llm_path = gguf
    cfg.extraction.engine = "llm"
    save_config(cfg, mirador_home)
    for i in range(12):  # pending evidence: the scheduler catches up on extraction shortly after start
        store.add_evidence(f"Decision {i}: the billing service moves to Postgres {10 + i} next sprint.",
                           source="manual")
    env = dict(os.environ, MIRADOR_HOME=str(mirador_home), DISPLAY=xdisplay, QT_QPA_PLATFORM="xcb")
    proc = subprocess.Popen([sys.executable, "-m", "desktop.cli.main", "-v"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    try:
        wait_for(lambda: any("Mirador started" in ln for ln in lines) or proc.poll() is not None, 180,
                 interval=0.2, what="the app to start")
        assert proc.poll() is None, "".join(lines)[-3000:]
        started = next(ln for ln in lines if "Mirador started" in ln)
        assert "capture on" in started and "scheduler on" in started and f":{cfg.mcp.port}/mcp" in started
        wait_for(lambda: any("multiprocessing" in c for c in _children(proc.pid)) or proc.poll() is not None, 180,
                 interval=0.2, what="the extraction's LLM worker process")
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=300)
        exit_s = time.monotonic() - sent  # reported, never asserted
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(10)
    err = "".join(lines)
    assert code == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert "job extract stopped early" in err or "job extract:" in err, err[-3000:]
    stop_line = next(ln for ln in lines if "stop took" in ln)
    times = dict((k, float(v)) for k, v in re.findall(r"(capture|scheduler|MCP server|total) ([\d.]+)s", stop_line))
    assert set(times) == {"capture", "scheduler", "MCP server", "total"}, stop_line
    print(f"{stop_line.strip()}; SIGTERM to exit {exit_s:.1f}s")  # shown with -s, for the report
