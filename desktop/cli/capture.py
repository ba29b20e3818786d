"""`mirador capture`, `mirador status`, `mirador pause`, `mirador resume`."""

from __future__ import annotations

import logging
import signal
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from desktop.cli.output import emit_json
from memory.errors import InputError

if TYPE_CHECKING:
    import argparse

    from desktop.cli.common import AddCommand, AddJson, AddScope

log = logging.getLogger(__name__)


def register(cmd: AddCommand, as_json: AddJson, scope: AddScope) -> None:
    """Add the capture commands to the `mirador` parser."""
    sp = cmd("capture", cmd_capture, "run screen and voice capture in the foreground until Ctrl+C (or --duration)")
    sp.add_argument("--duration", type=float, help="stop after this many seconds")
    sp.add_argument("--no-audio", action="store_true", help="screen only")
    sp.add_argument("--no-screen", action="store_true", help="audio only")
    sp.add_argument("--audio-file", help="transcribe this WAV file through the voice pipeline instead of the microphone")
    sp = cmd("status", cmd_status, "capture health: state, last frame and write, counters, queues, errors, stalls; shared scopes")
    as_json(sp)
    sp = cmd("pause", cmd_pause, "pause capture (in whichever process runs it)")
    sp.add_argument("--minutes", type=float, help="resume by itself after this many minutes")
    as_json(sp)
    sp = cmd("resume", cmd_resume, "resume paused capture")
    as_json(sp)


def cmd_capture(a: argparse.Namespace) -> int:
    """Run capture headless until the duration ends, the WAV is done, or SIGINT/SIGTERM (which flush the writer)."""
    from capture.runner import Capture, open_store_for_capture

    if a.audio_file and not Path(a.audio_file).is_file():
        raise InputError(f"no such WAV file: {a.audio_file} — give the path of a PCM .wav file")
    if a.duration is not None and a.duration <= 0:
        raise InputError("--duration must be a positive number of seconds")
    store = open_store_for_capture()
    screen = not a.no_screen and store.config.capture.screen
    audio = bool(a.audio_file) or (not a.no_audio and store.config.capture.audio)
    no_mic = False
    if audio and not a.audio_file:
        from desktop.runtime.platform import has_microphone

        no_mic = not has_microphone(store.config.capture.input_device)
        audio = not no_mic  # never report audio as on without a microphone to record
    if not screen and not audio:
        raise InputError("nothing to capture: " + ("no microphone was found (connect one, or set "
                                                   "capture.input_device) and the screen is off" if no_mic else
                                                   "drop --no-screen or --no-audio (or turn capture.screen/audio on)"))
    cap = Capture(store, screen=screen, audio=audio, audio_file=Path(a.audio_file) if a.audio_file else None)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    cap.start()
    if no_mic:
        cap.health.set(audio="unavailable: no microphone")  # what `mirador status` and the tray show
    print(f"capturing (screen {'on' if screen else 'off'}, audio {cap.health.audio}) — Ctrl+C to stop", flush=True)
    deadline = time.monotonic() + a.duration if a.duration else None
    while not stop.is_set():
        if deadline and time.monotonic() >= deadline:
            break
        if a.audio_file and not screen and cap.wait_audio_done(timeout=0.5):
            break
        stop.wait(0.5)
    cap.stop()
    h = cap.health.snapshot()
    print(f"stopped: {h['evidence_written']} evidence row(s) written, {h['frames_ocrd']} frame(s) OCR'd, "
          f"{h['utterances']} utterance(s), {h['errors']} error(s)", flush=True)
    return 0


def _span(secs: float) -> str:
    secs = int(round(secs))
    return f"{secs}s" if secs < 90 else f"{secs // 60} min" if secs < 5400 else f"{secs // 3600} h {secs % 3600 // 60} min"


def _ago(ts: float | None) -> str:
    """A past time as 'HH:MM:SS (N ago)'; a time still ahead (a pause's end) as 'HH:MM:SS (in N)'."""
    if not ts:
        return "never"
    secs = time.time() - ts
    when = datetime.fromtimestamp(ts).strftime("%H:%M:%S")
    return f"{when} (in {_span(-secs)})" if secs < -1 else f"{when} ({_span(max(0.0, secs))} ago)"


def cmd_status(a: argparse.Namespace) -> int:
    """Print what the capture process last reported; exit code 2 when it is stalled."""
    from capture.health import read_health
    from memory.config import data_dir

    h = read_health(data_dir())
    # Held: paused by itself because the disk refuses rows (capture/writer.py); as much a problem as a stall.
    held = h.get("held") if h.get("state") not in ("stopped", "not running") else None
    shared = _sharing()
    # A shared scope whose store refuses this device's settings: its writes wait until the binding is fixed.
    refused = any(r.get("settings") for r in shared)
    if a.json:
        emit_json({**h, "shared_scopes": shared})
        return 2 if h.get("stalled") or held or refused else 0
    print(f"capture: {h['state']}" + (f" — {h['hint']}" if h.get("hint") else ""))
    if held:
        print(f"WARNING: {held}")
    if h.get("stalled"):
        print(f"WARNING: capture is stalled: {h['stall_reason']}")
    for r in shared:
        print(_sharing_line(r))
    if "pid" not in h:
        return 2 if refused else 0
    if h.get("paused_until"):
        print(f"paused until {_ago(h['paused_until'])}")
    pixels = f" ({h['session']}, pixels by {h['screen_backend']})" if h.get("session") else ""
    print(f"screen {h['screen']}{pixels} · audio {h['audio']} · window probe {h['window_probe']}")
    if h.get("excluded_reason"):  # why nothing is grabbed right now (never an app name or title)
        print(f"not grabbing now: {h['excluded_reason']}")
    print(f"last frame {_ago(h['last_frame_at'])} · last change {_ago(h['last_change_at'])} · "
          f"last write {_ago(h['last_write_at'])}")
    print(f"frames: grabbed {h['frames_grabbed']}, unchanged {h['frames_skipped']}, excluded {h['frames_excluded']}, "
          f"OCR'd {h['frames_ocrd']}, stored {h['frames_stored']}, already stored {h['texts_deduped']} "
          f"({h.get('texts_seen_before_start', 0)} from before this start, {h.get('dedupe_seeded_rows', 0)} recent "
          f"row(s) loaded; {h.get('lines_recaptured', 0)} line(s) of deleted rows stored again)")
    print(f"audio: utterances {h['utterances']}, rejected {h['utterances_rejected']}, last RTF {h['asr_rtf_last']}")
    print(f"evidence: written {h['evidence_written']} in {h['write_batches']} batch(es), pending {h['evidence_pending']}, "
          f"redactions {h['redactions']}")
    print(f"queues: OCR {h['ocr_queue']} (dropped {h['ocr_dropped']}), ASR {h['asr_queue']} (dropped {h['asr_dropped']}); "
          f"OCR {h['ocr_ms_avg']:.0f} ms avg")
    print(f"errors: {h['errors']}")
    for e in h.get("recent_errors") or []:
        print(f"  {e}")
    return 2 if h.get("stalled") or held or refused else 0


def _sharing() -> list[dict]:
    """Each shared scope's state, asked of its store now (nothing when no scope is shared)."""
    from memory.config import load_config

    if not load_config().remote.bindings:
        return []
    from desktop.cli.common import open_store

    try:
        rows = open_store().remotes.check(max_age=0)
    except Exception as e:  # status must still print the capture half
        log.warning("shared scopes not checked: %s", e)
        return [{"scope": "shared scopes", "online": False, "last_error": f"not checked: {e}", "pending": 0}]
    return [{k: r.get(k) for k in ("name", "scope", "online", "pending", "last_error", "problem", "headline",
                                    "settings")} for r in rows]


def _sharing_line(r: dict) -> str:
    waiting = f", {r['pending']} write(s) waiting" if r.get("pending") else ""
    if r.get("online"):
        return f"shared scope {r['scope']}: online{waiting}"
    if r.get("settings"):  # the store answered and refused: retrying will not help
        return f"ERROR: shared scope {r['scope']}: {r['headline']}{waiting} — {r['last_error']}"
    return f"shared scope {r['scope']}: {r.get('headline') or 'offline'}{waiting} — {r.get('last_error')}"


def cmd_pause(a: argparse.Namespace) -> int:
    """Ask running capture to pause (for --minutes, or until `mirador resume`)."""
    from capture.runner import set_pause
    from memory.config import data_dir

    if a.minutes is not None and a.minutes <= 0:
        raise InputError("--minutes must be positive; use `mirador resume` to resume now")
    doc = set_pause(data_dir(), a.minutes, paused=True)
    emit_json(doc) if a.json else print("capture paused" + (f" for {a.minutes:g} minute(s)" if a.minutes else
                                                            " until `mirador resume`"))
    return 0


def cmd_resume(a: argparse.Namespace) -> int:
    """Ask running capture to resume."""
    from capture.runner import set_pause
    from memory.config import data_dir

    doc = set_pause(data_dir(), paused=False)
    emit_json(doc) if a.json else print("capture resumed")
    return 0
