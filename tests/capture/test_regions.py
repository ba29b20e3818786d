"""Changed-band OCR: only new rows are read, moved rows are not, and no text is lost on the way."""

from __future__ import annotations

import shutil
from datetime import datetime

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from capture.health import Health
from capture.privacy import PrivacyFilter
from capture.redact import Redactor
from capture.regions import gray_of, plan
from capture.screen import Frame, ScreenSource
from capture.window import WindowInfo
from capture.writer import EvidenceWriter
from memory.config import CaptureConfig

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
LINE = 26
WORDS = "amber basil cobalt dune ember fjord garnet harbor indigo juniper kelp lumen".split()


def render(lines: list[str], width: int = 900, height: int = 420, top: int = 8) -> Image.Image:
    """A white window with one text line every LINE pixels."""
    img = Image.new("RGB", (width, height), "white")
    d = ImageDraw.Draw(img)
    font = ImageFont.truetype(FONT, 18)
    for i, text in enumerate(lines):
        d.text((10, top + i * LINE), text, font=font, fill="black")
    return img


def log(i: int) -> str:
    # Ragged starts: tesseract's automatic layout (psm 3) reads left-aligned monospace columns as
    # separate blocks ("worker\nworker\n..."), which would hide what this test is about.
    return f"{WORDS[i % 12]} worker {i} processed {WORDS[i * 7 % 12]} batch at 09:00:{i % 60:02d}"


def longest_black_run(block: np.ndarray) -> int:
    """Longest horizontal run of near-black pixels in any row of block (text never has long ones)."""
    best = 0
    for row in block < 20:
        run = 0
        for v in row:
            run = run + 1 if v else 0
            best = max(best, run)
    return best


def test_new_view_is_read_whole_and_identical_frame_reads_nothing():
    a = gray_of(render([log(i) for i in range(10)]))
    assert plan(None, a).full
    same = plan(a, a.copy())
    assert not same.full and same.bands == ()


def test_one_edited_line_gives_one_band_covering_that_line_only():
    lines = [log(i) for i in range(12)]
    a = gray_of(render(lines))
    lines[5] = lines[5].replace("processed", "rejected")
    p = plan(a, gray_of(render(lines)))
    assert not p.full and len(p.bands) == 1
    top, bottom = p.bands[0]
    # The band holds line 5 whole (glyphs from y=8+5*26) and not its neighbours' text.
    assert top <= 8 + 5 * LINE + 2 and bottom >= 8 + 6 * LINE - 6
    assert bottom - top <= LINE + 8


def test_scrolled_lines_are_not_read_again_only_the_new_ones():
    a = gray_of(render([log(i) for i in range(14)]))
    b = gray_of(render([log(i) for i in range(2, 16)]))  # two new lines printed, the rest scrolled up
    p = plan(a, b)
    assert not p.full and p.moved > 0
    assert len(p.bands) == 1
    top, bottom = p.bands[0]
    assert top >= 8 + 12 * LINE - 4, p  # only the last two lines
    assert bottom - top <= 2 * LINE + 8


def test_inserted_line_pushing_the_rest_down_reads_one_line():
    lines = [log(i) for i in range(14)]
    a = gray_of(render(lines))
    b = gray_of(render(lines[:4] + ["    new_line = inserted(here, 42)"] + lines[4:13]))
    p = plan(a, b)
    assert not p.full and len(p.bands) == 1
    top, bottom = p.bands[0]
    assert top <= 8 + 4 * LINE + 2 and bottom - top <= LINE + 8


def test_whole_text_replaced_is_read_whole():
    a = gray_of(render([log(i) for i in range(14)]))
    b = gray_of(render([log(i) for i in range(100, 114)]))
    assert plan(a, b).full


def test_dark_background_bands_are_found_too():
    lines = [log(i) for i in range(10)]
    a = gray_of(Image.eval(render(lines), lambda v: 255 - v))
    lines[3] = "completely different words on this line"
    p = plan(a, gray_of(Image.eval(render(lines), lambda v: 255 - v)))
    assert len(p.bands) == 1 and p.bands[0][0] <= 8 + 3 * LINE + 2


# ---- the screen source with real tesseract: nothing lost, nothing stored twice ----------------------


@pytest.fixture
def source(store, ocr, tmp_path):
    if not shutil.which("tesseract"):
        pytest.skip("tesseract is not installed")
    health = Health()
    writer = EvidenceWriter(store, health, flush_seconds=600, flush_rows=1000)
    src = ScreenSource(store.home, CaptureConfig(), PrivacyFilter(), Redactor(), writer, health, ocr)
    yield src
    src.close()


def feed(src: ScreenSource, img: Image.Image) -> None:
    win = WindowInfo(app="Terminal", title="build log", left=0, top=0, width=img.width, height=img.height, id=7)
    src.handle(Frame(img, datetime(2026, 11, 30, 9, 0), win, None, {}, ("window", 7)))


def words(text: str) -> set[str]:
    return set(text.lower().split())


def test_terminal_scroll_stores_every_line_once_reading_only_bands(source, store):
    for start in range(0, 12, 2):  # 6 frames, two new log lines each
        feed(source, render([log(i) for i in range(start, start + 12)]))
    source.writer.flush()
    rows = store.list("evidence", limit=100)
    text = "\n".join(r["text"] for r in rows)
    # (worker 0 is skipped: tesseract reads DejaVu Mono's dotted zero as "©".)
    for i in range(1, 22):
        assert f"worker {i} processed" in text, (i, text)
    # Every line is stored exactly once: scrolled lines were neither read nor stored again.
    assert all(text.count(f"worker {i} processed") == 1 for i in range(1, 22)), text
    h = source.health.snapshot()
    assert h["ocr_full_reads"] == 1 and h["ocr_band_reads"] == 5
    assert all(r["meta"].get("bands") for r in rows[1:]) or len(rows) == 6


def test_secret_in_a_band_is_redacted_and_blacked_out_in_the_thumbnail(source, store):
    lines = [log(i) for i in range(8)]
    feed(source, render(lines))
    lines[6] = "export AWS_KEY=AKIAIOSFODNN7EXAMPLE now"
    feed(source, render(lines))
    source.writer.flush()
    rows = [r for r in store.list("evidence", limit=10) if "export" in r["text"].lower()]
    assert rows and "[REDACTED:aws_key]" in rows[0]["text"] and "AKIAIOSFODNN7EXAMPLE" not in rows[0]["text"]
    assert rows[0]["meta"]["bands"]
    # The thumbnail's black box sits on the secret's line (band offset applied), not at the top.
    thumb = np.asarray(Image.open(store.home / rows[0]["frame_path"]).convert("L"))
    scale = thumb.shape[1] / 900
    line = thumb[int((8 + 6 * LINE) * scale): int((8 + 7 * LINE) * scale)]
    assert longest_black_run(line) > 150 * scale
    assert longest_black_run(thumb[: int((8 + 6 * LINE) * scale) - 2]) < 40 * scale


def test_a_failed_read_is_retried_from_the_last_good_frame(source, store):
    lines = [log(i) for i in range(8)]
    feed(source, render(lines))
    real = source.ocr

    class Boom:
        def read(self, image, psm=None):
            raise RuntimeError("tesseract worker died")

    source.ocr = Boom()
    lines[3] = "first change that the failed read missed"
    with pytest.raises(RuntimeError):
        feed(source, render(lines))
    source.ocr = real
    lines[5] = "second change after the worker came back"
    feed(source, render(lines))
    source.writer.flush()
    text = "\n".join(r["text"] for r in store.list("evidence", limit=10)).lower()
    assert "first change that the failed read missed" in text and "second change after the worker" in text
