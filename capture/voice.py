"""Voice source: microphone (sounddevice) or WAV file → ring buffer → Silero VAD → utterances → whisper → writer.

Both sources feed the same `feed()`; silence never reaches whisper (VAD gates it) and what
whisper returns passes the guards in models/asr.py before it can become evidence.
"""

from __future__ import annotations

import io
import logging
import threading
import time
import wave
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from capture.health import Health
from capture.queues import DropOldestQueue
from capture.redact import Redactor
from capture.scope_rules import ScopeRules
from memory.errors import MiradorError
from memory.store.atomic import write_atomic
from memory.store.audit import utcnow
from memory.store.core import EvidenceSpec
from memory.store.io_faults import storage_error
from memory.store.rows import new_id
from models.asr import SAMPLE_RATE, VAD_WINDOW

log = logging.getLogger(__name__)


@dataclass
class Utterance:
    """A stretch of detected speech."""

    audio: np.ndarray
    started_at: datetime
    origin: str  # "microphone" or the WAV file name


class Segmenter:
    """Incremental VAD: cuts speech into utterances at pauses of min_silence_ms, at most max_seconds long."""

    def __init__(self, vad, threshold: float = 0.5, neg_threshold: float = 0.35, min_silence_ms: int = 1000,
                 min_speech_ms: int = 300, pad_ms: int = 200, max_seconds: float = 25.0) -> None:
        self.vad = vad
        self.threshold, self.neg_threshold = threshold, neg_threshold
        ms_per_win = VAD_WINDOW * 1000 / SAMPLE_RATE
        self.silence_wins = int(min_silence_ms / ms_per_win)
        self.min_speech_wins = int(min_speech_ms / ms_per_win)
        self.pad = int(pad_ms * SAMPLE_RATE / 1000)
        self.max_wins = int(max_seconds * 1000 / ms_per_win)
        self.reset()

    def reset(self) -> None:
        """Forget buffered audio and speech state (e.g. on pause)."""
        self.buf = np.zeros(0, dtype=np.float32)
        self.buf_start = 0  # absolute sample index of buf[0]
        self.next_win = 0  # absolute index of the next window to score
        self.start: int | None = None  # first speech window of the open utterance
        self.last = 0  # last window at or above neg_threshold

    def _cut(self, start_win: int, end_win: int) -> np.ndarray:
        a = max(self.buf_start, start_win * VAD_WINDOW - self.pad) - self.buf_start
        b = min(self.buf_start + len(self.buf), end_win * VAD_WINDOW + self.pad) - self.buf_start
        return self.buf[a:b].copy()

    def feed(self, chunk: np.ndarray) -> list[np.ndarray]:
        """Add audio; returns the utterances it completed."""
        self.buf = np.concatenate([self.buf, np.asarray(chunk, dtype=np.float32).reshape(-1)])
        first = self.next_win * VAD_WINDOW - self.buf_start
        n_new = (len(self.buf) - first) // VAD_WINDOW
        if n_new <= 0:
            return []
        probs = self.vad.probs(self.buf[first: first + n_new * VAD_WINDOW])
        out = []
        for k, p in enumerate(probs):
            i = self.next_win + k
            if self.start is None:
                if p >= self.threshold:
                    self.start, self.last = i, i
                continue
            if p >= self.neg_threshold:
                self.last = i
            if i - self.last >= self.silence_wins or i - self.start >= self.max_wins:
                if self.last - self.start + 1 >= self.min_speech_wins:
                    out.append(self._cut(self.start, self.last + 1))
                self.start = None
        self.next_win += n_new
        self._trim()
        return out

    def _trim(self) -> None:
        # Bounded memory: keep only what an open utterance (or the next one's padding) can still need.
        keep_from = (self.start * VAD_WINDOW if self.start is not None else self.next_win * VAD_WINDOW) - self.pad
        drop = max(0, keep_from - self.buf_start)
        if drop:
            self.buf = self.buf[drop:]
            self.buf_start += drop

    def flush(self) -> list[np.ndarray]:
        """End of stream: the open utterance, if long enough."""
        out = []
        if self.start is not None and self.last - self.start + 1 >= self.min_speech_wins:
            out.append(self._cut(self.start, self.last + 1))
        self.reset()
        return out


def read_wav(path: Path) -> np.ndarray:
    """A PCM WAV file as 16 kHz mono float32 (mixed down and linearly resampled if needed)."""
    with wave.open(str(path), "rb") as w:
        rate, channels, width = w.getframerate(), w.getnchannels(), w.getsampwidth()
        raw = w.readframes(w.getnframes())
    dtypes: dict[int, type[np.integer]] = {1: np.uint8, 2: np.int16, 4: np.int32}
    dtype = dtypes.get(width)
    if dtype is None:
        raise ValueError(f"{path}: {width * 8}-bit samples are not supported; convert to 16-bit PCM")
    a = np.frombuffer(raw, dtype).astype(np.float32)
    a = (a - 128.0) / 128.0 if width == 1 else a / float(np.iinfo(dtype).max)
    if channels > 1:
        a = a.reshape(-1, channels).mean(axis=1)
    if rate != SAMPLE_RATE and len(a):
        n = int(round(len(a) * SAMPLE_RATE / rate))
        a = np.interp(np.linspace(0, len(a) - 1, n), np.arange(len(a)), a).astype(np.float32)
    return a


class VoiceSource:
    """Turns audio into transcript evidence; `feed()` is shared by the microphone and WAV files."""

    def __init__(self, home: Path, cfg, redactor: Redactor, writer, health: Health, asr, vad,
                 scope: str | None = None, paused=lambda: False, model_lock: threading.Lock | None = None,
                 keys=None) -> None:
        self.home = Path(home)
        self.keys = keys  # memory.store.keys.DataKeys: kept recordings are sealed with the data key
        self.cfg = cfg
        self.redactor = redactor
        self.writer = writer
        self.health = health
        self.asr = asr
        self.segmenter = Segmenter(vad)
        self.scope = scope
        self.scope_rules: ScopeRules | None = None  # capture.scope_rules; the runner sets and updates it
        self.paused = paused
        self.model_lock = model_lock or threading.Lock()
        self.queue = DropOldestQueue(cfg.asr_queue_size, "asr")
        self._ring: deque[np.ndarray] = deque()
        self._ring_samples = 0
        self._ring_max = SAMPLE_RATE * 30  # 30 s of microphone audio at most waits for the VAD
        self._ring_lock = threading.Lock()
        self._stream = None
        self._flags: deque[str] = deque(maxlen=256)  # status flags seen by the audio callback
        self._retry_at = 0.0
        self._backoff = 1.0
        self._pump: threading.Thread | None = None
        self._stop = threading.Event()
        self.ring_dropped = 0
        self._clock = 0  # samples fed since the stream began (to time utterances)
        self._stream_t0 = utcnow()

    # ---- shared pipeline ------------------------------------------------------------------------

    def feed(self, samples: np.ndarray, origin: str, block: bool = False) -> int:
        """Segment audio and queue finished utterances for ASR; returns how many were queued."""
        if self.paused():
            self.segmenter.reset()
            return 0
        end_clock = self._clock + len(samples)
        utts = self.segmenter.feed(samples)
        self._clock = end_clock
        return self._queue(utts, origin, block)

    def _queue(self, utts: list[np.ndarray], origin: str, block: bool) -> int:
        for u in utts:
            started = self._stream_t0 + timedelta(seconds=max(0, self._clock - len(u)) / SAMPLE_RATE)
            self.queue.put(Utterance(u, started, origin), block=block)
            self.health.bump("utterances")
            self.health.set(last_utterance_at=time.time(), asr_queue=len(self.queue), asr_dropped=self.queue.dropped)
        return len(utts)

    def end_of_stream(self, origin: str, block: bool = False) -> int:
        """Flush the open utterance at the end of a file or when the microphone stops."""
        return self._queue(self.segmenter.flush(), origin, block)

    def handle(self, utt: Utterance) -> None:
        """ASR one utterance (an ASR worker calls this); accepted text becomes redacted evidence."""
        with self.model_lock:
            tr = self.asr.transcribe(utt.audio)
        self.health.set(asr_ms_last=round(tr.ms, 1), asr_rtf_last=round(tr.rtf, 3))
        if tr.rejected:
            # Only the reasons go to health: rejected text may still be something the person said.
            log.info("dropped likely-invented ASR text: %s", tr.rejected)
            self.health.set(asr_rejected_last=", ".join(r for _, r in tr.rejected))
        if not tr.text:
            self.health.bump("utterances_rejected")
            return
        red = self.redactor.redact(tr.text)
        eid = new_id("evidence")
        meta = {"duration_s": round(tr.duration, 2), "asr_ms": round(tr.ms, 1), "origin": utt.origin}
        if red.total:
            meta["redacted"] = red.counts
            self.health.bump("redactions", red.total)
        if self.cfg.keep_audio:
            try:
                meta["audio_path"] = self._keep(utt, eid)
            except MiradorError as e:  # locked, or no key: the transcript is kept, the recording is not
                self.health.error(f"recording not kept: {e}")
            except OSError as e:  # a full or failing disk: the transcript is kept (the writer holds it), not the WAV
                fault = storage_error(e, self.home)
                if fault is None:
                    raise
                self.health.error(f"recording not kept: {fault}")
        app, window = ("microphone", "") if utt.origin == "microphone" else ("audio file", utt.origin)
        # No window is recorded for speech: only a rule naming "microphone" or "audio file" routes it.
        rules = self.scope_rules
        i = rules.match(app, window) if rules is not None else None
        self.writer.submit(EvidenceSpec(
            id=eid, text=red.text, source="audio", app=app, window=window,
            scope=rules.rules[i].scope if rules is not None and i is not None else self.scope,
            captured_at=utt.started_at, redactions=red.total, meta=meta))

    def _keep(self, utt: Utterance, eid: str) -> str:
        rel = Path("audio") / utt.started_at.strftime("%Y-%m-%d") / f"{eid}.wav"
        path = self.home / rel
        buf = io.BytesIO()  # in memory: the recording reaches the disk only sealed
        with wave.open(buf, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(SAMPLE_RATE)
            w.writeframes((np.clip(utt.audio, -1, 1) * 32767).astype(np.int16).tobytes())
        data = buf.getvalue()
        if self.keys is not None:
            data = self.keys.seal_bytes(data, "audio:" + rel.as_posix())
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data, mode=0o600)
        return rel.as_posix()

    # ---- sources ----------------------------------------------------------------------------------

    def feed_wav(self, path: Path, chunk_seconds: float = 0.5) -> int:
        """Run a WAV file through the same pipeline (blocking when the ASR queue is full); returns utterances."""
        audio = read_wav(Path(path))
        self.segmenter.reset()
        self._clock, self._stream_t0 = 0, utcnow()
        step = int(chunk_seconds * SAMPLE_RATE)
        n = 0
        for i in range(0, len(audio), step):
            if self._stop.is_set():
                break
            n += self.feed(audio[i:i + step], Path(path).name, block=True)
        # Trailing silence closes the last utterance exactly as a live pause would.
        n += self.feed(np.zeros(int(SAMPLE_RATE * 1.2), np.float32), Path(path).name, block=True)
        return n + self.end_of_stream(Path(path).name, block=True)

    def start_microphone(self) -> None:
        """Open the input device at 16 kHz mono; a pump thread moves audio from the ring buffer to the VAD."""
        self._open_stream()
        self._pump = threading.Thread(target=self._pump_loop, name="audio-pump", daemon=True)
        self._pump.start()

    def _open_stream(self) -> None:
        import sounddevice as sd

        stream = sd.InputStream(samplerate=SAMPLE_RATE, channels=1, dtype="float32", blocksize=1600,
                                device=self.cfg.input_device, callback=self._callback)
        stream.start()
        self._stream = stream
        self._stream_t0, self._clock = utcnow(), 0
        self.segmenter.reset()

    def _callback(self, indata, frames, time_info, status) -> None:
        """PortAudio's audio thread: copy the block into the ring and note device flags; never block here."""
        if status:
            # Overflows and the like: counted here, reported to health by the pump thread.
            self._flags.append(str(status))
        with self._ring_lock:
            self._ring.append(indata[:, 0].copy())
            self._ring_samples += frames
            while self._ring_samples > self._ring_max:
                self._ring_samples -= len(self._ring.popleft())
                self.ring_dropped += 1

    def _pump_loop(self) -> None:
        while not self._stop.wait(0.25):
            with self._ring_lock:
                chunks = list(self._ring)
                self._ring.clear()
                self._ring_samples = 0
            self._report_device()
            if chunks:
                try:
                    self.feed(np.concatenate(chunks), "microphone")
                except Exception as e:  # keep listening; the error is visible in health
                    log.exception("audio pipeline failed")
                    self.health.error(f"audio: {type(e).__name__}: {e}")
            if self._stream is None or not self._stream.active:
                self._recover()

    def _report_device(self) -> None:
        """Put what the audio thread noticed (status flags, ring overflow) into health."""
        flags = []
        while self._flags:
            flags.append(self._flags.popleft())
        if flags:
            self.health.bump("audio_status_flags", len(flags))
            self.health.error(f"audio: the microphone reported {', '.join(sorted(set(flags)))} ({len(flags)}x)")
        if self.ring_dropped != self.health.audio_ring_dropped:
            self.health.set(audio_ring_dropped=self.ring_dropped)

    def _recover(self) -> None:
        """The stream stopped without stop() (device unplugged, driver error): say so, flush, reopen with backoff."""
        if self._stop.is_set() or time.monotonic() < self._retry_at:
            return
        if self._stream is not None:
            log.warning("microphone stream stopped unexpectedly; reopening")
            self.health.error("audio: the microphone stream stopped unexpectedly; reopening")
            try:
                self._stream.close()
            except Exception as e:  # already broken; closing is best effort
                log.debug("closing the dead stream: %s", e)
            self._stream = None
            self._queue(self.segmenter.flush(), "microphone", False)
            self.health.set(audio="reopening")
        try:
            self._open_stream()
        except Exception as e:
            self._backoff = min(60.0, self._backoff * 2)
            self._retry_at = time.monotonic() + self._backoff
            self.health.set(audio=f"unavailable: {e}")
            self.health.error(f"audio: reopening the microphone failed: {type(e).__name__}: {e}")
            return
        self._backoff = 1.0
        self.health.bump("audio_reopened")
        self.health.set(audio="microphone")

    def stop(self) -> None:
        """Stop the microphone (if open) and flush the open utterance."""
        self._stop.set()
        if self._pump is not None:
            self._pump.join(5)
            self._pump = None
            if self._stream is not None:
                try:
                    self._stream.stop()
                    self._stream.close()
                except Exception as e:  # a dead device must not stop the shutdown
                    log.warning("closing the microphone: %s", e)
                self._stream = None
            with self._ring_lock:
                rest = list(self._ring)
                self._ring.clear()
            if rest:  # what arrived after the pump's last turn
                self.feed(np.concatenate(rest), "microphone")
            self.end_of_stream("microphone")
