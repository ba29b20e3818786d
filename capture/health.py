"""Capture health (principle 7): counters and times, a stall flag, persisted for `mirador status`."""

from __future__ import annotations

import copy
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

from memory.store.atomic import write_atomic

log = logging.getLogger(__name__)

HEALTH_FILE = "capture_health.json"
STALL_SECONDS = 60.0


@dataclass
class Health:
    """What capture is doing; every field is cheap to update and safe to show."""

    state: str = "stopped"  # stopped | capturing | paused | locked (until `mirador unlock`) | error
    pid: int = 0
    screen: str = "off"  # on | off | unavailable: reason
    audio: str = "off"
    session: str = ""  # x11, wayland (sway), wayland (gnome), windows, macos, none
    screen_backend: str = "none"  # what reads the pixels: mss (X11), grim (wlroots screencopy), the portal
    window_probe: str = "none"  # what tells the focused window; "none: why" means nothing is grabbed
    window_probe_failures: int = 0  # active-window calls that failed (app/title unknown for that frame)
    started_at: float | None = None  # unix seconds
    updated_at: float | None = None
    paused_until: float | None = None
    held: str | None = None  # why capture is paused by itself ("disk full: capture paused until space is freed — …")
    last_cycle_at: float | None = None
    last_frame_at: float | None = None
    last_change_at: float | None = None
    last_write_at: float | None = None
    last_utterance_at: float | None = None
    frames_grabbed: int = 0
    frames_skipped: int = 0  # unchanged since the previous frame
    frames_excluded: int = 0  # cycles that grabbed nothing: the window excluded, unknown, or none focused
    excluded_reason: str = ""  # why the screen is not being grabbed now ("" while it is); never an app or title
    frames_ocrd: int = 0
    ocr_full_reads: int = 0  # whole frame read (new view, or most rows changed)
    ocr_band_reads: int = 0  # changed bands read instead of the whole frame
    frames_no_new_rows: int = 0  # changed by the cheap check, but no row differed from the last read
    frames_stored: int = 0
    texts_deduped: int = 0  # OCR'd text with no line that was not already stored for that window
    texts_seen_before_start: int = 0  # of those, text stored before this start (capture.dedupe_hours)
    dedupe_seeded_rows: int = 0  # recent screen rows whose lines were loaded at start
    lines_recaptured: int = 0  # lines seen before whose row was deleted since, so stored again
    utterances: int = 0
    audio_status_flags: int = 0  # overflow/underflow flags the input device reported
    audio_ring_dropped: int = 0  # microphone blocks dropped because the VAD fell 30 s behind
    audio_reopened: int = 0  # times the microphone stream was reopened after it stopped by itself
    utterances_rejected: int = 0
    evidence_written: int = 0
    evidence_pending: int = 0
    write_batches: int = 0
    redactions: int = 0
    ocr_queue: int = 0
    asr_queue: int = 0
    ocr_dropped: int = 0
    asr_dropped: int = 0
    ocr_ms_last: float = 0.0
    ocr_ms_avg: float = 0.0
    asr_ms_last: float = 0.0
    asr_rtf_last: float = 0.0
    asr_rejected_last: str = ""  # guard reasons for the last dropped ASR text (never the text)
    ocr_busy_seconds: float = 0.0
    thumbnails_skipped: int = 0  # frames whose thumbnail could not be sealed (locked, no key): text kept, image not
    errors: int = 0
    recent_errors: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def bump(self, name: str, n: int = 1) -> None:
        """Add n to a counter."""
        with self._lock:
            setattr(self, name, getattr(self, name) + n)

    def set(self, **kw) -> None:
        """Set several fields at once."""
        with self._lock:
            for k, v in kw.items():
                setattr(self, k, v)

    def error(self, message: str) -> None:
        """Count an error and keep the last few messages."""
        with self._lock:
            self.errors += 1
            self.recent_errors = (self.recent_errors + [f"{time.strftime('%H:%M:%S')} {message}"])[-5:]

    def ocr_time(self, ms: float) -> None:
        """Record one OCR latency (exponential moving average)."""
        with self._lock:
            self.ocr_ms_last = ms
            self.ocr_ms_avg = ms if not self.ocr_ms_avg else 0.8 * self.ocr_ms_avg + 0.2 * ms

    def snapshot(self, now: float | None = None) -> dict:
        """A plain dict of every field plus the computed `stalled` / `stall_reason`."""
        with self._lock:
            d = {f.name: copy.copy(getattr(self, f.name)) for f in fields(self) if not f.name.startswith("_")}
        d["stall_reason"] = stall_reason(d, now or time.time())
        d["stalled"] = d["stall_reason"] is not None
        return d

    def save(self, home: Path) -> None:
        """Write the snapshot atomically to <home>/capture_health.json (read by another process).

        On a full disk the atomic write (a new file, then a rename) fails; the snapshot then goes over the old
        file in place, in the blocks it already has, so `mirador status` still learns why capture paused."""
        self.set(updated_at=time.time())
        path = home / HEALTH_FILE
        doc = json.dumps(self.snapshot())
        try:
            write_atomic(path, doc)
        except OSError as e:
            if not _overwrite(path, doc.encode("utf-8")):
                log.warning("could not write %s: %s", path, e)


def _overwrite(path: Path, data: bytes) -> bool:
    """Write data over the file in place, padded with spaces (JSON ignores them) to the file's allocated size,
    so no new block is needed; False when it does not fit or cannot be written."""
    try:
        with open(path, "r+b") as f:
            st = os.fstat(f.fileno())
            allocated = max(st.st_size, getattr(st, "st_blocks", 0) * 512)
            if len(data) > allocated:
                return False
            f.write(data + b" " * (max(st.st_size, len(data)) - len(data)))
            f.flush()
        return True
    except OSError:
        return False


def stall_reason(d: dict, now: float) -> str | None:
    """Why capture looks stalled, or None. A stall = capturing, the screen changing, work waiting, no write for 60 s."""
    if d.get("state") != "capturing":
        return None
    started = d.get("started_at") or now
    if now - started < STALL_SECONDS:
        return None
    if d.get("last_cycle_at") and now - d["last_cycle_at"] > STALL_SECONDS:
        return f"the capture loop has not run for {now - d['last_cycle_at']:.0f}s"
    changing = d.get("last_change_at") and now - d["last_change_at"] < STALL_SECONDS
    waiting = d.get("evidence_pending", 0) > 0 or d.get("ocr_queue", 0) > 0 or d.get("ocr_busy_seconds", 0) > STALL_SECONDS
    last_write = d.get("last_write_at") or started
    if changing and waiting and now - last_write > STALL_SECONDS:
        return (f"the screen is changing but nothing was written for {now - last_write:.0f}s "
                f"(pending {d.get('evidence_pending', 0)}, OCR queue {d.get('ocr_queue', 0)})")
    return None


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def read_health(home: Path, now: float | None = None) -> dict:
    """Health as the capture process last wrote it; state becomes "not running" if that process is gone."""
    path = home / HEALTH_FILE
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"state": "not running", "stalled": False, "stall_reason": None,
                "hint": "start capture with `mirador capture` (or `make run`)"}
    except (OSError, json.JSONDecodeError) as e:
        return {"state": "unknown", "stalled": False, "stall_reason": None, "hint": f"could not read {path}: {e}"}
    now = now or time.time()
    if d.get("state") not in ("stopped",) and not _alive(int(d.get("pid") or 0)):
        d["state"] = "not running"
        d["hint"] = "the capture process exited without stopping cleanly; start it again with `mirador capture`"
    d["stall_reason"] = stall_reason(d, now)
    d["stalled"] = d["stall_reason"] is not None
    return d
