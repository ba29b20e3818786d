"""Voice pipeline: espeak-ng speech in a WAV through VAD + whisper into evidence; silence stays silent."""

from __future__ import annotations

import shutil
import subprocess
import wave

import numpy as np
import pytest

from capture.runner import Capture
from models.asr import AsrSegment, Guards, apply_guards, collapse_repeats

pytestmark = pytest.mark.skipif(not shutil.which("espeak-ng"), reason="espeak-ng is not installed")


def write_wav(path, audio: np.ndarray, rate: int = 16000) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((np.clip(audio, -1, 1) * 32767).astype(np.int16).tobytes())


@pytest.fixture(scope="module")
def speech_wav(tmp_path_factory):
    """espeak-ng at its native 22.05 kHz (the pipeline resamples), with silence around it."""
    d = tmp_path_factory.mktemp("voice")
    raw = d / "raw.wav"
    subprocess.run(["espeak-ng", "-s", "150", "-w", str(raw),
                    "The quarterly budget meeting moves to Thursday afternoon. Please bring the invoices."], check=True)
    with wave.open(str(raw)) as w:
        rate = w.getframerate()
        a = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768
    pad = np.zeros(rate, np.float32)
    out = d / "speech.wav"
    write_wav(out, np.concatenate([pad, a, pad]), rate)
    return out


def run_file(store, path):
    cap = Capture(store, screen=False, audio_file=path)
    n = cap.voice.feed_wav(path)
    cap.drain()
    return cap, n


def test_speech_wav_becomes_a_transcript(store, speech_wav):
    cap, n = run_file(store, speech_wav)
    rows = store.list("evidence")
    assert n >= 1 and rows, cap.health.snapshot()
    text = " ".join(r["text"] for r in rows).lower()
    for word in ("budget", "thursday", "afternoon"):
        assert word in text, text
    assert all(r["source"] == "audio" and r["window"] == "speech.wav" for r in rows)
    # Raw audio is not kept unless configured.
    assert not (store.home / "audio").exists()


def test_ten_seconds_of_silence_produce_no_evidence(store, tmp_path):
    path = tmp_path / "silence.wav"
    write_wav(path, np.zeros(16000 * 10, np.float32))
    cap, n = run_file(store, path)
    assert n == 0
    assert store.list("evidence") == []
    assert cap.health.snapshot()["utterances"] == 0


def test_low_noise_produces_no_evidence(store, tmp_path):
    path = tmp_path / "hiss.wav"
    write_wav(path, (np.random.default_rng(1).standard_normal(16000 * 10) * 0.003).astype(np.float32))
    run_file(store, path)
    assert store.list("evidence") == []


def test_cli_audio_file_runs_the_same_pipeline(mirador_home, speech_wav):
    import os
    import sys

    out = subprocess.run([sys.executable, "-m", "desktop.cli.main", "capture", "--no-screen", "--audio-file", str(speech_wav)],
                         capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    from memory.store.core import Store

    rows = Store(mirador_home).list("evidence")
    import json

    h = json.loads((mirador_home / "capture_health.json").read_text())
    keys = ("utterances", "utterances_rejected", "asr_rejected_last", "asr_rtf_last", "evidence_written",
            "evidence_pending", "errors", "recent_errors")
    assert any("budget" in r["text"].lower() for r in rows), ({k: h.get(k) for k in keys}, rows, out.stderr[-1500:])


def test_guards_drop_invented_text():
    seg = lambda text, lp=-0.3, ns=0.1, cr=1.2: AsrSegment(0, 1, text, lp, ns, cr)  # noqa: E731
    kept, rejected = apply_guards([
        seg("real words here"),
        seg("Thank you.", lp=-1.2, ns=0.9),
        seg("la la la la la la la la", cr=3.1),
        seg("mumble", lp=-2.0),
        seg("I I I I I I I I I I said"),
    ], Guards())
    assert [s.text for s in kept] == ["real words here"]
    assert [r for _, r in rejected] == ["no speech", "compression ratio", "low log-probability", "repeated phrase"]
    assert collapse_repeats("we should we should we should ship it") == ("we should ship it", 4 / 8)


def test_kept_recordings_are_sealed_and_go_with_a_forget(mirador_home, speech_wav):
    import io

    from memory.store.core import Store
    from memory.store.erasure import forget
    from memory.store.keys import SEALED_MAGIC

    mirador_home.mkdir(parents=True, exist_ok=True)
    (mirador_home / "config.toml").write_text("[capture]\nkeep_audio = true\n")
    store = Store(mirador_home)
    run_file(store, speech_wav)
    rows = store.list("evidence")
    paths = [r["meta"]["audio_path"] for r in rows]
    assert rows and all(paths)
    for rel in paths:
        blob = (mirador_home / rel).read_bytes()
        assert blob.startswith(SEALED_MAGIC) and b"RIFF" not in blob and b"WAVE" not in blob
        with wave.open(io.BytesIO(store.keys.open_bytes(blob, "audio:" + rel))) as w:
            assert w.getframerate() == 16000 and w.getnframes() > 0
    forget(store, [r["id"] for r in rows])
    assert not any((mirador_home / rel).exists() for rel in paths)  # forget means gone: the recording too
