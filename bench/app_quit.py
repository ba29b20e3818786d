"""Quit latency of the whole app with an extraction in flight: prints one JSON object.

Starts its own Xvfb, a temp data dir with 12 pending evidence rows and the bundled Gemma GGUF as
the extraction model, then `python -m desktop.cli.main -v` (tray app: capture + scheduler + MCP) from
REPO. Once the scheduler's catch-up extraction has started its LLM worker process (and 3 s more),
it sends SIGTERM (the tray's Quit path) and measures the time to process exit. The app's own
"stop took ..." log line (seconds per stop step) is included.

    .venv/bin/python bench/app_quit.py [REPO]      # REPO: a checkout to measure; default this one
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# The bench's stores are throwaway: their data key is wrapped by a passphrase, never put in the person's keyring
# (on a machine without a keyring, as here, that is also the only way to open them without a prompt).
os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
os.environ.setdefault("MIRADOR_PASSPHRASE", "a throwaway passphrase for the bench's stores")

ROOT = Path(__file__).resolve().parents[1]


def _children(pid: int) -> list[bytes]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append((d / "cmdline").read_bytes())
            except (OSError, IndexError, ValueError):
                continue
    return out


def _xvfb() -> tuple[subprocess.Popen, str]:
    r, w = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(w), "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                            pass_fds=(w,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(w)
    with os.fdopen(r) as f:
        return proc, ":" + f.readline().strip()


def main() -> None:
    """Run the measurement and print the JSON result."""
    repo = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    home = Path(tempfile.mkdtemp(prefix="mirador-quit-"))
    os.environ["MIRADOR_HOME"] = str(home)
    sys.path.insert(0, str(ROOT))
    from memory.config import Config, save_config
    from memory.store.core import Store
    from models.locate import llm_gguf

    cfg = Config()
    cfg.capture.audio = False
    cfg.capture.interval_seconds = 1.0
    cfg.mcp.port = 18000 + os.getpid() % 1000
    cfg.models.llm_path = llm_gguf(None, home / "models")
    cfg.extraction.engine = "llm"
    save_config(cfg, home)
    store = Store(home)
    for i in range(12):
        store.add_evidence(f"Decision {i}: the billing service moves to Postgres {10 + i} next sprint.", source="manual")
    xvfb, display = _xvfb()
    env = dict(os.environ, DISPLAY=display, QT_QPA_PLATFORM="xcb")
    app = subprocess.Popen([sys.executable, "-m", "desktop.cli.main", "-v"], cwd=repo, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(app.stderr), daemon=True).start()
    t0 = time.monotonic()
    while not any(b"multiprocessing" in c for c in _children(app.pid)) and app.poll() is None:
        if time.monotonic() - t0 > 300:
            break
        time.sleep(0.2)
    llm_running = any(b"multiprocessing" in c for c in _children(app.pid))
    time.sleep(3)  # let the first LLM call get going
    sent = time.monotonic()
    app.send_signal(signal.SIGTERM)
    try:
        code: int | str = app.wait(600)
    except subprocess.TimeoutExpired:
        app.kill()
        code = "killed after 600 s"
    exit_s = time.monotonic() - sent
    xvfb.terminate()
    time.sleep(0.5)  # the reader thread drains the last lines
    print(json.dumps({"repo": str(repo), "llm_worker_running_at_quit": llm_running,
                      "sigterm_to_exit_s": round(exit_s, 1), "exit_code": code,
                      "traceback_in_stderr": any("Traceback" in ln for ln in lines),
                      "stop_log": next((ln.strip() for ln in lines if "stop took" in ln), None),
                      "extract_job": next((ln.strip() for ln in lines if "job extract" in ln), None)}))


if __name__ == "__main__":
    main()
