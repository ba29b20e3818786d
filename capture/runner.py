"""Capture: wires the screen and voice sources, their workers, the writer and health; pause/resume.

`start()`/`stop()` run everything on threads; tests drive the screen deterministically with
`step()` / `run_cycles(n)` and `drain()` instead of waiting on the clock. `apply_config()` takes
saved settings while running (the settings window calls it through the app); `stop()` is bounded.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from capture.frames import purge_frames
from capture.health import Health
from capture.privacy import PrivacyFilter
from capture.queues import Worker
from capture.redact import Redactor
from capture.scope_rules import ScopeRules
from capture.screen import ScreenSource, recent_screen_rows
from capture.voice import VoiceSource
from capture.writer import EvidenceWriter
from memory.errors import MiradorError
from memory.store.atomic import write_atomic

if TYPE_CHECKING:
    from memory.store.core import Store

log = logging.getLogger(__name__)

CONTROL_FILE = "capture_control.json"


def set_pause(home: Path, minutes: float | None = None, paused: bool = True) -> dict:
    """Ask a running capture (any process) to pause, for N minutes or until resumed; or to resume."""
    until = time.time() + minutes * 60 if (paused and minutes) else None
    doc = {"paused": paused, "paused_until": until, "at": time.time()}
    path = Path(home) / CONTROL_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(doc))
    return doc


def open_store_for_capture(home: Path | None = None):
    """A Store tuned for a capture process: one embedder thread unless configured otherwise.

    Capture embeds small batches all day; with torch's default thread pool the idle threads
    spin-wait after every batch, which on a shared machine costs several times the CPU of one thread.
    """
    from memory.config import data_dir, load_config
    from memory.store.core import Store

    cfg = load_config(home or data_dir())
    if cfg.models.embedder_threads == 0:
        cfg.models.embedder_threads = 1
    return Store(home, config=cfg)


class Capture:
    """Screen + voice capture into the store's evidence table, with health and pause control.

    store: the process's Store (the writer is its only capture writer).
    screen / audio: which sources to run; audio_file feeds a WAV instead of the microphone.
    probe, ocr, asr, vad: injectable runtimes (tests, benches); defaults are built from the config.
    """

    def __init__(self, store: Store, screen: bool = True, audio: bool = True, audio_file: Path | None = None,
                 probe=None, ocr=None, asr=None, vad=None) -> None:
        self.store = store
        self.home = Path(store.home)
        self.cfg = store.config.capture
        self.models = store.config.models
        self.health = Health(pid=os.getpid())
        self.redactor = Redactor(store.config.privacy.redact_kinds, store.config.privacy.redact)
        self.model_lock = threading.Lock()
        self.writer = EvidenceWriter(store, self.health, self.cfg.flush_seconds, self.cfg.flush_rows,
                                     model_lock=self.model_lock)
        self.audio_file = Path(audio_file) if audio_file else None
        self._paused_until: float | None = None
        self._paused = False
        self._control_mtime = 0.0
        self._stop = threading.Event()
        self._wake = threading.Event()  # cuts the screen loop's sleep short (new interval, stop)
        self._running = False
        self._screen_on = True  # capture.screen switched off live keeps the source but grabs nothing
        self._last_purge = 0.0
        self._threads: list[threading.Thread] = []
        self._workers: list[Worker] = []
        self.screen = self._make_screen(probe, ocr) if screen else None
        self.voice = self._make_voice(asr, vad) if (audio or audio_file) else None
        self.audio_done = threading.Event()

    def _new_ocr(self, language: str):
        from models.ocr import Ocr

        return Ocr(language=language)

    def _make_screen(self, probe, ocr) -> ScreenSource:
        if ocr is None:
            ocr = self._new_ocr(self.cfg.ocr_language)
        s = ScreenSource(self.home, self.cfg, PrivacyFilter.from_config(self.store.config.privacy), self.redactor,
                         self.writer, self.health, ocr, self.cfg.scope, probe, keys=self.store.keys)
        s.scope_rules = ScopeRules.from_config(self.cfg)
        s.dedupe.live = self.writer.existing
        try:
            # What the last run stored is "already seen": a restart must not store (and extract) it again.
            rows = recent_screen_rows(self.store, self.cfg.dedupe_hours)
            s.dedupe.seed(rows)
            self.health.set(dedupe_seeded_rows=len(rows))
        except Exception as e:  # an unreadable store must not keep capture from starting; say so
            log.exception("loading recent screen text for dedupe failed")
            self.health.error(f"recent screen text not loaded (the same screen may be stored again): {e}")
        return s

    def _make_voice(self, asr, vad) -> VoiceSource:
        if asr is None:
            from models.asr import Asr

            asr = Asr(self.models.whisper_dir, cpu_threads=self.cfg.asr_threads)
        if vad is None:
            from models.asr import Vad

            vad = Vad()
        v = VoiceSource(self.home, self.cfg, self.redactor, self.writer, self.health, asr, vad,
                        self.cfg.scope, paused=lambda: self.paused or self.held is not None,
                        model_lock=self.model_lock, keys=self.store.keys)
        v.scope_rules = ScopeRules.from_config(self.cfg)
        return v

    # ---- pause ----------------------------------------------------------------------------------

    @property
    def paused(self) -> bool:
        """True while paused (a timed pause ends by itself), and while Mirador is locked: what capture stores
        is sealed with the data key, and a lock means nothing new is seen or written until unlocked."""
        if self._paused_until is not None and time.time() >= self._paused_until:
            self.resume()
        if self._paused:
            return True
        if self.store.keys.locked:
            if self.health.state != "locked":
                self.health.set(state="locked")
                if self.screen:
                    self.screen.detector.forget()
            return True
        if self.health.state == "locked":
            self.health.set(state="capturing")
        return False

    @property
    def held(self) -> str | None:
        """Why capture pauses by itself (the writer's disk is full or cannot be written), or None.

        Nothing is grabbed or heard meanwhile, so the writer's queue, which keeps every row not yet written,
        stops growing; capture resumes by itself once the writer commits again (capture/writer.py)."""
        return self.writer.held

    def pause(self, minutes: float | None = None) -> None:
        """Stop grabbing and listening, for N minutes or until resume()."""
        self._paused = True
        self._paused_until = time.time() + minutes * 60 if minutes else None
        self.health.set(state="paused", paused_until=self._paused_until)
        if self.screen:
            self.screen.detector.forget()

    def resume(self) -> None:
        """Capture again."""
        self._paused, self._paused_until = False, None
        self.health.set(state="capturing" if self.health.state != "stopped" else "stopped", paused_until=None)

    def _check_control(self) -> None:
        """Apply a pause/resume request written by `mirador pause` / `mirador resume` in another process."""
        path = self.home / CONTROL_FILE
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return
        if mtime == self._control_mtime:
            return
        self._control_mtime = mtime
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return
        if doc.get("paused") and (doc.get("paused_until") is None or doc["paused_until"] > time.time()):
            self.pause((doc["paused_until"] - time.time()) / 60 if doc.get("paused_until") else None)
        elif not doc.get("paused"):
            self.resume()

    # ---- deterministic driving (tests, benches) ----------------------------------------------------

    def step(self) -> str:
        """One screen cycle now, on the calling thread: 'paused', 'held' (the disk refuses rows), 'excluded',
        'unchanged', 'queued' or 'error'."""
        self._check_control()
        if self.paused:
            return "paused"
        if self.held is not None:
            if self.screen:
                self.screen.detector.forget()  # the first frame after the hold is read whole
            return "held"
        return self.screen.step() if self.screen and self._screen_on else "off"

    def run_cycles(self, n: int, drain: bool = True) -> list[str]:
        """n screen cycles back to back; with drain, OCR finishes and the writer commits before returning."""
        out = []
        for _ in range(n):
            out.append(self.step())
            if drain:
                self.drain()
        return out

    def drain(self, timeout: float = 120.0) -> bool:
        """Process every queued frame/utterance (on worker threads if running, else here) and commit."""
        ok = True
        for src in (self.screen, self.voice):
            if src is None:
                continue
            if self._workers:
                ok = src.queue.wait_idle(timeout) and ok
            else:
                while (item := src.queue.get(timeout=0)) is not None:
                    try:
                        src.handle(item)
                    finally:
                        src.queue.done()
        self.writer.flush()
        self._refresh_health()
        return ok

    # ---- threads ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the writer, the OCR/ASR workers, the screen loop and the audio source."""
        self.health.set(state="capturing", started_at=time.time(),
                        screen="on" if self.screen else "off", audio=self._audio_label())
        self._running = True
        self.writer.start()
        if self.screen:
            self._start_screen(self.screen)
        if self.voice:
            self._start_voice(self.voice)
        self._spawn(self._health_loop, "capture-health")
        self._spawn(self._seal_old_frames, "seal-frames")
        self.health.save(self.home)

    def _seal_old_frames(self) -> None:
        # Thumbnails an older version wrote in the clear are sealed in place once the key can be had; until
        # then `mirador doctor` counts them and `mirador unlock` seals them.
        from memory.store.sealing import plain_frames, seal_frames

        try:
            if next(plain_frames(self.home), None) is None:
                return
            n = seal_frames(self.home, self.store.keys)
            log.info("sealed %d frame(s) an older version left in the clear", n)
        except MiradorError as e:
            log.info("older frames stay in the clear until the key can be had: %s", e)
        except OSError as e:
            self.health.error(f"could not seal older frames: {e}")

    def _start_screen(self, screen: ScreenSource) -> None:
        self._add_worker(screen, "ocr-worker")
        self._spawn(lambda: self._screen_loop(screen), "screen-loop")

    def _start_voice(self, voice: VoiceSource) -> None:
        self._add_worker(voice, "asr-worker")
        self._spawn(lambda: self._audio_main(voice), "audio-source")

    def _add_worker(self, src, name: str) -> None:
        w = Worker(src.queue, src.handle, self.health.error, name)
        w.start()
        self._workers.append(w)

    def _audio_label(self) -> str:
        if not self.voice:
            return "off"
        return f"file {self.audio_file.name}" if self.audio_file else "microphone"

    def _spawn(self, fn, name: str) -> None:
        t = threading.Thread(target=fn, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def _screen_loop(self, screen: ScreenSource) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            self.step()
            self._sleep_from(t0)
        screen.close()

    def _sleep_from(self, t0: float) -> None:
        """Wait out the interval since t0, re-reading it when apply_config() or stop() wakes the loop."""
        while not self._stop.is_set():
            left = self.cfg.interval_seconds - (time.monotonic() - t0)
            if left <= 0:
                return
            self._wake.wait(left)
            self._wake.clear()

    def _audio_main(self, voice: VoiceSource) -> None:
        try:
            if self.audio_file:
                voice.feed_wav(self.audio_file)
            else:
                voice.start_microphone()
                return
        except Exception as e:  # no microphone / bad file: say so, keep the screen running
            log.warning("audio capture unavailable: %s", e)
            self.health.set(audio=f"unavailable: {e}")
            self.health.error(f"audio: {type(e).__name__}: {e}")
        finally:
            if self.audio_file or self.health.audio.startswith("unavailable"):
                self.audio_done.set()

    def _refresh_health(self) -> None:
        busy = [time.monotonic() - w.busy_since for w in self._workers if w.name == "ocr-worker" and w.busy_since]
        self.health.set(ocr_queue=len(self.screen.queue) if self.screen else 0,
                        asr_queue=len(self.voice.queue) if self.voice else 0,
                        evidence_pending=self.writer.pending, ocr_busy_seconds=busy[0] if busy else 0.0)

    def _health_loop(self) -> None:
        while not self._stop.wait(1.0):
            self._refresh_health()
            # Paused by the person or held by a full disk; locked until `mirador unlock`; capturing otherwise.
            if self._paused or self.held is not None:
                state = "paused"
            elif self.store.keys.locked:
                state = "locked"
            else:
                state = "capturing"
            if self.health.state != state:
                self.health.set(state=state)
            self.health.save(self.home)
            if self.cfg.thumbnails and time.time() - self._last_purge > 3600:
                self._last_purge = time.time()
                try:
                    purge_frames(self.home, self.cfg.retention_days)
                except OSError as e:
                    self.health.error(f"frame retention purge: {e}")

    def wait_audio_done(self, timeout: float | None = None) -> bool:
        """For a WAV source: wait until the file is read and every utterance transcribed."""
        if not self.audio_done.wait(timeout):
            return False
        return self.voice.queue.wait_idle(timeout or 600) if self.voice is not None else True

    def stop(self, timeout: float = 60.0) -> dict[str, float]:
        """Stop sources, finish queued OCR/ASR and commit, within about `timeout` s; returns seconds per step.

        Frames or utterances still queued at the deadline are dropped (and logged): quitting must not
        wait minutes for OCR on a loaded machine. The writer always gets WRITER_GRACE_S more to commit
        what was already recognised.
        """
        deadline = time.monotonic() + timeout
        times: dict[str, float] = {}
        t = time.monotonic()
        self._stop.set()
        self._wake.set()
        self._running = False
        if self.voice:
            self.voice.stop()
        for th in self._threads:
            th.join(_left(deadline))
        late = [th.name for th in self._threads if th.is_alive()]
        if late:
            log.warning("capture stop: %s still running after the %.0fs budget", ", ".join(late), timeout)
        times["sources"] = _lap(t)
        t = time.monotonic()
        for src in (self.screen, self.voice):
            if src is not None and self._workers and not src.queue.wait_idle(_left(deadline)):
                log.warning("capture stop: %d queued %s item(s) dropped at the deadline", len(src.queue),
                            src.queue.name)
        for w in self._workers:
            w.stop(_left(deadline))
        if not self._workers and self.screen:
            self.screen.close()
        times["ocr_asr_drain"] = _lap(t)
        t = time.monotonic()
        if self.writer.is_alive() and not self.writer.pending and not self.writer._write_lock.locked():
            # Nothing pending and no commit under way: do not wait for a writer still loading the
            # embedder (tens of seconds under load); it sees the flag after its warm-up and ends.
            with self.writer._cond:
                self.writer._stopping = True
                self.writer._cond.notify_all()
        elif self.writer.is_alive():
            self.writer.stop(max(_left(deadline), WRITER_GRACE_S))
        else:
            self.writer.flush()
        times["writer"] = _lap(t)
        self._refresh_health()
        self.health.set(state="stopped")
        self.health.save(self.home)
        return times

    # ---- settings while running -------------------------------------------------------------------

    def apply_config(self, config, screen: bool | None = None, audio: bool | None = None) -> list[str]:
        """Use saved settings now, without a restart; returns problems that kept one from applying.

        Live: interval, monitors, active-window preference, change threshold, OCR language, excluded
        apps and title patterns, redaction switches, thumbnails, retention, queue sizes, batching,
        scope and scope rules, keep_audio. Audio on/off, input device, whisper model or ASR threads restart just the
        voice source. screen / audio: whether each source may run (the caller knows whether a display
        and a microphone exist); None follows the config.
        """
        old, c = self.cfg, config.capture
        old_models, self.models = self.models, config.models
        self.cfg = c
        self.redactor = Redactor(config.privacy.redact_kinds, config.privacy.redact)
        self.writer.flush_seconds, self.writer.flush_rows = c.flush_seconds, c.flush_rows
        problems = self._apply_screen(self.screen, config) if self.screen is not None else []
        self._screen_on = c.screen if screen is None else screen
        if self._screen_on and self.screen is None:
            self.screen = self._make_screen(None, None)
            if self._running:
                self._start_screen(self.screen)
        asr_changed = (old.asr_threads, old_models.whisper_dir) != (c.asr_threads, config.models.whisper_dir)
        problems += self._apply_voice(old, c.audio if audio is None else audio, asr_changed)
        if c.retention_days != old.retention_days:
            self._last_purge = 0.0  # a shorter retention takes effect within a second, not an hour
        self.health.set(screen="on" if self.screen and self._screen_on else "off", audio=self._audio_label())
        self._wake.set()  # the screen loop re-reads the interval now
        log.info("capture settings applied%s", f" except: {'; '.join(problems)}" if problems else "")
        return problems

    def _apply_screen(self, s: ScreenSource, config) -> list[str]:
        c = config.capture
        if getattr(s.cfg, "screen_backend", "auto") != c.screen_backend:
            s.reopen_grabber()
        s.cfg = c  # monitors, prefer_active_window, thumbnails and thumbnail_width are read from it per frame
        s.privacy = PrivacyFilter.from_config(config.privacy)  # one reference swap: the next cycle uses it
        s.redactor = self.redactor
        s.scope, s.scope_rules = c.scope, ScopeRules.from_config(c)  # the next frame is routed by the new rules
        s.detector.min_changed_fraction = c.min_changed_fraction
        s.queue.maxsize = c.ocr_queue_size
        if c.ocr_language == getattr(s.ocr, "language", c.ocr_language):
            return []
        from models.ocr import OcrUnavailable

        ocr = self._new_ocr(c.ocr_language)
        try:
            ocr.check()  # a missing language must not break capture: keep the old reader, say why
        except OcrUnavailable as e:
            return [f"capture.ocr_language: {e}"]
        s.ocr = ocr
        return []

    def _apply_voice(self, old, want: bool, asr_changed: bool) -> list[str]:
        if self.audio_file:  # a WAV run keeps its source
            return []
        c, v = self.cfg, self.voice
        if v is not None:
            v.cfg, v.redactor, v.scope, v.scope_rules = c, self.redactor, c.scope, ScopeRules.from_config(c)
            v.queue.maxsize = c.asr_queue_size
        restart = want != (v is not None) or (v is not None and (asr_changed or c.input_device != old.input_device))
        if not restart:
            return []
        asr = vad = None
        if v is not None:
            asr, vad = (None if asr_changed else v.asr), v.segmenter.vad
            self._stop_voice(v)
        if want:
            self.voice = self._make_voice(asr, vad)
            if self._running:
                self._start_voice(self.voice)
        log.info("voice source %s", "restarted" if want else "stopped")
        return []

    def _stop_voice(self, v: VoiceSource) -> None:
        v.stop()
        if self._running:
            v.queue.wait_idle(10.0)  # transcribe what was already heard
        for w in [w for w in self._workers if w.queue is v.queue]:
            w.stop()
            self._workers.remove(w)
        self.voice = None


WRITER_GRACE_S = 15.0


def _left(deadline: float) -> float:
    return max(0.1, deadline - time.monotonic())


def _lap(t0: float) -> float:
    return round(time.monotonic() - t0, 3)
