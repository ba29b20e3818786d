"""The microphone path with a fake only at the sounddevice boundary.

`sounddevice.InputStream` is replaced by a fake device that calls the production callback with
16 kHz mono blocks read from an espeak-ng WAV; the ring buffer, pump thread, Silero VAD, whisper,
redaction and batched writer are the real ones. Device trouble (status flags, a stream that stops
by itself, a device that will not open) must show up in health: capture never silently stops.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
import wave

import numpy as np
import pytest
import sounddevice as sd

from capture.runner import Capture
from tests.capture.xdisplay import wait_for

pytestmark = pytest.mark.skipif(not (shutil.which("espeak-ng") and shutil.which("sox")),
                                reason="espeak-ng and sox are needed to make speech")

BLOCK = 1600
SPEED = 4.0  # the fake device delivers audio 4x faster than real time


@pytest.fixture(scope="module")
def speech(tmp_path_factory) -> np.ndarray:
    """espeak-ng speech converted by sox to 16 kHz mono 16-bit, with a second of silence either side."""
    d = tmp_path_factory.mktemp("mic")
    raw, wav = d / "raw.wav", d / "speech16k.wav"
    subprocess.run(["espeak-ng", "-s", "150", "-w", str(raw),
                    "The quarterly budget meeting moves to Thursday afternoon. Please bring the invoices."], check=True)
    subprocess.run(["sox", str(raw), "-r", "16000", "-c", "1", "-b", "16", str(wav)], check=True)
    with wave.open(str(wav)) as w:
        assert (w.getframerate(), w.getnchannels()) == (16000, 1)
        a = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768
    pad = np.zeros(16000, np.float32)
    return np.concatenate([pad, a, pad])


class Device:
    """What successive `InputStream(...)` opens do: raise, or play audio (then die or keep giving silence)."""

    def __init__(self, *opens) -> None:
        self.opens = list(opens)
        self.streams: list[FakeInputStream] = []

    def open(self, **kw) -> FakeInputStream:
        plan = self.opens.pop(0) if self.opens else {"audio": np.zeros(0, np.float32)}
        if isinstance(plan, Exception):
            raise plan
        s = FakeInputStream(plan, **kw)
        self.streams.append(s)
        return s


class FakeInputStream:
    """The slice of sounddevice.InputStream capture uses: start/stop/close/active and the callback."""

    def __init__(self, plan: dict, samplerate=None, blocksize=None, device=None, channels=None, dtype=None,
                 callback=None, **_kw) -> None:
        assert (samplerate, channels, dtype) == (16000, 1, "float32")
        self.plan, self.callback, self.blocksize = plan, callback, blocksize or BLOCK
        self.active = False
        self.closed = False
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.active = True
        self._thread.start()

    def _run(self) -> None:
        audio = self.plan["audio"]
        flags = self.plan.get("flags", {})
        i = 0
        while not self._halt.is_set():
            block = audio[i * self.blocksize:(i + 1) * self.blocksize]
            if len(block) < self.blocksize:
                if self.plan.get("die"):
                    self.active = False  # the device went away: PortAudio ends the stream
                    return
                block = np.concatenate([block, np.zeros(self.blocksize - len(block), np.float32)])
            status = sd.CallbackFlags(flags.get(i, 0))
            self.callback(block.reshape(-1, 1).copy(), len(block), None, status)
            i += 1
            # Pacing like a sound card (faster than real time); this is the device, not a test wait.
            time.sleep(self.blocksize / 16000 / SPEED)

    def stop(self) -> None:
        self._halt.set()
        if self._thread.is_alive():
            self._thread.join(5)
        self.active = False

    def close(self) -> None:
        self.stop()
        self.closed = True


@pytest.fixture
def device(monkeypatch):
    holder = {}

    def install(*opens) -> Device:
        d = Device(*opens)
        monkeypatch.setattr(sd, "InputStream", lambda **kw: d.open(**kw))
        holder["d"] = d
        return d

    return install


@pytest.fixture
def mic_capture(store):
    caps = []

    def make() -> Capture:
        cap = Capture(store, screen=False, audio=True)
        caps.append(cap)
        cap.start()
        return cap

    yield make
    for c in caps:
        c.stop()


def transcript(store) -> str:
    return " ".join(r["text"] for r in store.list("evidence", limit=100)).lower()


def test_microphone_speech_lands_in_evidence(store, device, mic_capture, speech):
    dev = device({"audio": speech})
    cap = mic_capture()
    wait_for(lambda: "thursday" in transcript(store), 240, interval=0.5, what="the transcript to be written")
    text = transcript(store)
    # "budget" is not asserted: depending on where the VAD cuts, tiny.en sometimes hears "quarter-limger".
    for word in ("thursday", "afternoon", "invoices"):
        assert word in text, text
    rows = store.list("evidence", limit=100)
    assert all(r["source"] == "audio" and r["app"] == "microphone" for r in rows)
    h = cap.health.snapshot()
    assert h["audio"] == "microphone" and h["errors"] == 0 and h["audio_status_flags"] == 0, h["recent_errors"]
    assert not (store.home / "audio").exists()  # raw audio is not kept unless configured
    cap.stop()
    assert dev.streams[0].closed and not dev.streams[0].active


def test_device_status_flags_are_reported_in_health(store, device, mic_capture):
    overflow = 0x2  # paInputOverflow
    device({"audio": np.zeros(16000 * 3, np.float32), "flags": {3: overflow, 4: overflow}})
    cap = mic_capture()
    wait_for(lambda: cap.health.audio_status_flags >= 2, 60, what="the overflow flags to reach health")
    h = cap.health.snapshot()
    assert h["errors"] >= 1 and any("input overflow" in e for e in h["recent_errors"]), h["recent_errors"]
    assert h["state"] == "capturing" and h["audio"] == "microphone"  # reported, and still listening


def test_a_stream_that_dies_is_reported_and_reopened(store, device, mic_capture, speech):
    dev = device({"audio": np.zeros(8000, np.float32), "die": True},
                 sd.PortAudioError("Error opening InputStream: Device unavailable [PaErrorCode -9985]"),
                 {"audio": speech})
    cap = mic_capture()
    wait_for(lambda: "thursday" in transcript(store), 240, interval=0.5, what="speech after the device came back")
    h = cap.health.snapshot()
    errs = " | ".join(h["recent_errors"])
    assert "stopped unexpectedly" in errs and "reopening the microphone failed" in errs and "Device unavailable" in errs
    assert h["audio_reopened"] == 1 and h["audio"] == "microphone"
    assert dev.streams[0].closed and len(dev.streams) == 2


def test_a_microphone_that_will_not_open_is_reported(store, device, mic_capture):
    device(sd.PortAudioError("Error querying device -1"))
    cap = mic_capture()
    wait_for(lambda: cap.health.audio.startswith("unavailable"), 60, what="health to say the microphone is unavailable")
    h = cap.health.snapshot()
    assert "Error querying device" in h["audio"] and h["errors"] >= 1
    assert any("PortAudioError" in e for e in h["recent_errors"])
