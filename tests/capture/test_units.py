"""Writer batching and failure handling, health stall flag, bounded queues, frame retention, config checks."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from capture.frames import purge_frames, save_thumbnail
from capture.health import Health, read_health, stall_reason
from capture.queues import DropOldestQueue
from capture.screen import ChangeDetector, TextDedupe
from capture.voice import Segmenter
from capture.writer import EvidenceWriter
from memory.store.core import EvidenceSpec


def test_writer_batches_and_commits_on_flush(store):
    h = Health()
    w = EvidenceWriter(store, h, flush_seconds=60, flush_rows=2)
    for i in range(5):
        w.submit(EvidenceSpec(text=f"row {i}", source="screen"))
    assert w.pending == 5 and store.count("evidence", local=True) == 0
    assert w.flush() == 5
    assert store.count("evidence", local=True) == 5 and h.write_batches == 3 and h.evidence_pending == 0


def test_writer_keeps_rows_when_the_store_fails(store):
    class Broken:
        home = store.home
        embedder = store.embedder

        def add_evidence_batch(self, specs, actor):
            raise OSError("disk full")

    h = Health()
    w = EvidenceWriter(Broken(), h, flush_rows=10)
    w.submit(EvidenceSpec(text="keep me", source="screen"))
    assert w.flush() == 0
    assert w.pending == 1 and h.errors == 1 and "disk full" in h.recent_errors[-1]


def test_writer_thread_flushes_on_stop(store):
    h = Health()
    w = EvidenceWriter(store, h, flush_seconds=600, flush_rows=1000)
    w.start()
    w.submit(EvidenceSpec(text="flushed at stop", source="screen"))
    w.stop()
    assert store.count("evidence", local=True) == 1 and not w.is_alive()


def test_stall_flag():
    now = time.time()
    base = {"state": "capturing", "started_at": now - 300, "last_cycle_at": now - 1, "last_change_at": now - 5,
            "last_write_at": now - 120, "evidence_pending": 3}
    assert "nothing was written" in stall_reason(base, now)
    assert stall_reason({**base, "last_write_at": now - 10}, now) is None  # writing fine
    assert stall_reason({**base, "last_change_at": now - 600}, now) is None  # idle screen is not a stall
    assert stall_reason({**base, "evidence_pending": 0}, now) is None  # nothing waiting (e.g. a video)
    assert stall_reason({**base, "state": "paused"}, now) is None
    assert "loop" in stall_reason({**base, "last_cycle_at": now - 100}, now)


def test_health_file_round_trip_and_dead_process(tmp_path):
    h = Health(state="capturing", pid=os.getpid(), started_at=time.time())
    h.save(tmp_path)
    assert read_health(tmp_path)["state"] == "capturing"
    Health(state="capturing", pid=2**22 + 12345).save(tmp_path)
    assert read_health(tmp_path)["state"] == "not running"
    assert read_health(tmp_path / "nowhere")["state"] == "not running"


def test_drop_oldest_queue_is_bounded():
    q = DropOldestQueue(2, "t")
    for i in range(5):
        q.put(i)
    assert len(q) == 2 and q.dropped == 3 and q.get(0) == 3


def test_change_detector_ignores_a_blinking_cursor():
    d = ChangeDetector(0.0005)
    a = np.full((200, 320), 255.0)
    assert d.changed("v", a)
    b = a.copy()
    b[50:54, 100] = 0  # a cursor-sized blip
    assert not d.changed("v", b)
    c = a.copy()
    c[50:60, 20:200] = 0  # a new line of text
    assert d.changed("v", c)


def test_text_dedupe():
    t = TextDedupe()
    assert t.new_text(("app", "w"), "alpha\nbeta") == ("alpha\nbeta", False)
    assert t.new_text(("app", "w"), "alpha\nbeta") == ("", False)
    assert t.new_text(("app", "w"), "alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\n") [0]
    assert t.new_text(("app", "w"), "alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\neta") == ("eta", True)


def test_frames_are_purged_after_retention(tmp_path):
    from datetime import datetime

    from PIL import Image

    rel = save_thumbnail(Image.new("RGB", (1280, 800), "white"), tmp_path, datetime(2026, 1, 1), "evd_x", 640)
    path = tmp_path / rel
    assert path.is_file() and Image.open(path).size == (640, 400)
    assert purge_frames(tmp_path, 7) == 0
    old = time.time() - 8 * 86400
    os.utime(path, (old, old))
    assert purge_frames(tmp_path, 7) == 1 and not path.exists() and not path.parent.exists()


def test_segmenter_cuts_at_pauses():
    class FakeVad:
        def __init__(self, pattern):
            self.pattern = pattern
            self.i = 0

        def probs(self, audio):
            n = len(audio) // 512
            out = np.array([self.pattern(self.i + k) for k in range(n)], np.float32)
            self.i += n
            return out

    # 2 s speech, 2 s silence, 1 s speech, silence (windows are 32 ms).
    speech = lambda i: 0.9 if (30 <= i < 92 or 155 <= i < 186) else 0.0  # noqa: E731
    seg = Segmenter(FakeVad(speech))
    utts = []
    for _ in range(20):
        utts += seg.feed(np.zeros(8000, np.float32))
    utts += seg.flush()
    assert len(utts) == 2
    assert 1.9 < len(utts[0]) / 16000 < 2.6 and 0.9 < len(utts[1]) / 16000 < 1.6
    assert len(seg.buf) == 0


def test_config_rejects_bad_capture_settings(mirador_home):
    from memory.config import load_config
    from memory.errors import ConfigError

    mirador_home.mkdir(parents=True, exist_ok=True)
    (mirador_home / "config.toml").write_text('[privacy]\nexcluded_title_patterns = ["(unclosed"]\n')
    with pytest.raises(ConfigError, match="not a valid regular expression"):
        load_config(mirador_home)
    (mirador_home / "config.toml").write_text('[capture]\ninterval_seconds = 0\n')
    with pytest.raises(ConfigError, match="interval_seconds"):
        load_config(mirador_home)
    (mirador_home / "config.toml").write_text('[capture]\nintervall = 2\n')
    with pytest.raises(ConfigError, match="unknown key"):
        load_config(mirador_home)
    (mirador_home / "config.toml").write_text('[privacy]\nredact_kinds = ["aws_key", "ssn"]\n')
    with pytest.raises(ConfigError, match="ssn"):
        load_config(mirador_home)
