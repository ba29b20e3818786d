"""Capture.apply_config: settings saved while capture runs take effect without a restart."""

from __future__ import annotations

import random

from capture.runner import Capture
from tests.capture.xdisplay import frame_files
from tests.conftest import files_containing

WORDS = ["violet", "harbor", "lantern", "meadow", "copper", "falcon", "quartz", "willow", "summit", "canyon"]
SECRET_WORDS = ["badger", "crimson", "dolphin", "emerald", "fossil", "gondola", "hazel", "igloo", "jasmine", "kettle"]


def sentence(words: list[str]) -> str:
    """Six words unlikely to be on screen by accident."""
    return " ".join(random.sample(words, 6))


def norm(text: str) -> str:
    return " ".join(text.lower().split())


def _texts(store) -> list[str]:
    return [norm(r["text"]) for r in store.list("evidence", limit=1000)]


def test_title_pattern_added_live_stops_grabs(store, display, ocr, mirador_home):
    cap = Capture(store, audio=False, ocr=ocr)
    try:
        seen = sentence(words=WORDS)
        display.window("Payroll export - March", seen)
        cap.run_cycles(2)
        assert any(norm(seen) in t for t in _texts(store)), "before the change the window is captured"
        before = cap.health.snapshot()
        frames_before = frame_files(mirador_home)

        cfg = store.config.model_copy(deep=True)
        cfg.privacy.excluded_title_patterns = [*cfg.privacy.excluded_title_patterns, r"(?i)payroll export"]
        cfg.capture.interval_seconds = 9.0
        assert cap.apply_config(cfg) == []
        assert cap.cfg.interval_seconds == 9.0 and cap.screen.cfg is cfg.capture

        secret = sentence(words=SECRET_WORDS)
        display.window("Payroll export - April", secret)  # new text that a grab would store
        assert cap.run_cycles(3) == ["excluded"] * 3
        after = cap.health.snapshot()
        assert after["frames_grabbed"] == before["frames_grabbed"], "an excluded window is never grabbed"
        assert after["frames_excluded"] == before["frames_excluded"] + 3
        assert frame_files(mirador_home) == frames_before
        assert not any(w in t for t in _texts(store) for w in SECRET_WORDS)
        assert all(files_containing(mirador_home, w) == [] for w in SECRET_WORDS)

        ordinary = sentence(words=WORDS)
        display.window("Ordinary notes", ordinary)  # other windows are still captured
        assert "queued" in cap.run_cycles(2)
        assert any(norm(ordinary) in t for t in _texts(store))
    finally:
        cap.stop()


def test_missing_ocr_language_keeps_the_old_reader(store, ocr):
    cap = Capture(store, audio=False, ocr=ocr)
    cfg = store.config.model_copy(deep=True)
    cfg.capture.ocr_language = "eng+zzz"
    problems = cap.apply_config(cfg)
    assert len(problems) == 1 and problems[0].startswith("capture.ocr_language:") and "zzz" in problems[0]
    assert cap.screen.ocr is ocr, "capture keeps reading with the language that works"
    cfg.privacy.redact = False
    cap.apply_config(cfg)
    assert cap.screen.redactor is cap.redactor and cap.redactor.patterns == []


def test_voice_source_restarts_alone_for_device_and_audio_switch(store, ocr):
    cap = Capture(store, screen=True, audio=True, ocr=ocr)
    screen, voice = cap.screen, cap.voice
    cfg = store.config.model_copy(deep=True)
    cfg.capture.input_device = 3
    cap.apply_config(cfg, audio=True)
    assert cap.voice is not voice and cap.voice.cfg.input_device == 3, "a new device means a new voice source"
    assert cap.voice.asr is voice.asr, "the ASR model is reused, not reloaded"
    assert cap.screen is screen, "the screen source is untouched"
    cfg.capture.audio = False
    cap.apply_config(cfg)
    assert cap.voice is None and cap.health.audio == "off"
    cfg.capture.audio = True
    cfg.capture.asr_threads = 1
    cap.apply_config(cfg, audio=True)
    assert cap.voice is not None and cap.voice.asr is not voice.asr
