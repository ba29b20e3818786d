"""The persistent tesseract worker (models/ocr.py + models/tesseract_worker.py) against the CLI path."""

from __future__ import annotations

import os
import shutil
import signal

import pytest
from PIL import Image, ImageDraw, ImageFont

from models.ocr import Ocr

pytestmark = pytest.mark.skipif(not shutil.which("tesseract"), reason="tesseract is not installed")


def page(lines: list[str]) -> Image.Image:
    img = Image.new("RGB", (900, 40 + 30 * len(lines)), "white")
    d = ImageDraw.Draw(img)
    font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf", 20)
    for i, text in enumerate(lines):
        d.text((12, 12 + 30 * i), text, font=font, fill="black")
    return img


@pytest.fixture
def worker_ocr():
    o = Ocr(engine="library")
    yield o
    o.close()


def test_worker_reads_what_the_cli_reads(worker_ocr):
    img = page(["quarterly budget moves to thursday", "bring the signed invoices please"])
    lib, cli = worker_ocr.read(img), Ocr(engine="cli").read(img)
    assert worker_ocr.engine_in_use == "library" and worker_ocr.worker_pid
    assert lib.text == cli.text and "invoices" in lib.text
    assert [(w.text, w.left, w.top) for w in lib.words] == [(w.text, w.left, w.top) for w in cli.words]


def test_page_segmentation_mode_per_call(worker_ocr):
    # Left-aligned monospace columns: automatic layout (3) splits them, a single block (6) keeps lines.
    img = page([f"worker {i} processed batch {i * 7}" for i in range(1, 7)])
    assert "worker 3 processed batch 21" in worker_ocr.read(img, psm=6).text
    assert worker_ocr.read(img, psm=6).text.count("\n") == 5


def test_a_killed_worker_fails_one_read_then_restarts(worker_ocr):
    img = page(["first read starts the worker"])
    assert "worker" in worker_ocr.read(img).text
    pid = worker_ocr.worker_pid
    os.kill(pid, signal.SIGKILL)
    # At most one read fails: the one that meets the dying worker (none if its death is seen first).
    try:
        worker_ocr.read(img)
    except RuntimeError as e:
        assert "tesseract worker" in str(e)
    assert "worker" in worker_ocr.read(img).text  # a new process took over
    assert worker_ocr.worker_pid not in (None, pid)


def test_missing_language_is_reported_not_hung():
    o = Ocr(language="zzz", engine="library")
    with pytest.raises(Exception, match="zzz"):
        o.read(page(["x"]))
