"""Screen text with tesseract (via pytesseract): one class, plain dataclass results, lazy checks."""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


class OcrUnavailable(RuntimeError):
    """tesseract (or the requested language) is missing; the message says how to install it."""


@dataclass(frozen=True)
class OcrWord:
    """One recognised word with its box in the image passed to `read` (pixels) and its confidence."""

    text: str
    left: int
    top: int
    width: int
    height: int
    confidence: float
    start: int  # character offset of the word in OcrResult.text
    end: int


@dataclass
class OcrResult:
    """The text of an image, line by line, plus the words it was built from."""

    text: str
    words: list[OcrWord] = field(default_factory=list)
    confidence: float = 0.0  # mean word confidence, 0..100
    ms: float = 0.0  # wall time of the tesseract call

    def words_in(self, start: int, end: int) -> list[OcrWord]:
        """Words whose characters overlap text[start:end] (used to black out redacted words)."""
        return [w for w in self.words if w.start < end and w.end > start]


class Ocr:
    """Reads text from PIL images with tesseract.

    language: tesseract language code(s), e.g. "eng" or "eng+deu" (must be installed).
    psm: page segmentation mode; 3 (automatic) suits whole windows and screens.
    min_confidence: words below this confidence (0..100) are dropped as noise.
    upscale: resize factor applied before OCR; >1 helps tiny fonts at a CPU cost.
    threads: OpenMP threads tesseract may use; 1 avoids busy-waiting threads on shared machines.
    tesseract_cmd: path of the tesseract binary; None = the one on PATH.
    timeout: seconds before one OCR call is abandoned.
    """

    def __init__(self, language: str = "eng", psm: int = 3, min_confidence: float = 10.0, upscale: float = 1.0,
                 threads: int = 1, tesseract_cmd: str | None = None, timeout: float = 30.0) -> None:
        self.language = language
        self.psm = psm
        self.min_confidence = min_confidence
        self.upscale = upscale
        self.threads = threads
        self.tesseract_cmd = tesseract_cmd
        self.timeout = timeout
        self._checked = False
        self._lock = threading.Lock()
        self._pt = None

    def _load(self):
        with self._lock:
            if self._checked:
                return self._pt
            try:
                import pytesseract
            except ImportError as e:
                raise OcrUnavailable("pytesseract is not installed — `pip install pytesseract`") from e
            if self.tesseract_cmd:
                pytesseract.pytesseract.tesseract_cmd = self.tesseract_cmd
            try:
                langs = set(pytesseract.get_languages(config=""))
            except (pytesseract.TesseractNotFoundError, OSError) as e:
                raise OcrUnavailable(
                    "tesseract is not installed — `sudo apt-get install tesseract-ocr` (Debian/Ubuntu), "
                    "`brew install tesseract` (macOS) or the UB-Mannheim installer (Windows)") from e
            missing = [lang for lang in self.language.split("+") if lang not in langs]
            if missing:
                raise OcrUnavailable(
                    f"tesseract has no data for {', '.join(missing)} (installed: {', '.join(sorted(langs))}) — "
                    f"install e.g. `tesseract-ocr-{missing[0]}` or change capture.ocr_language")
            self._pt = pytesseract
            self._checked = True
            return pytesseract

    def check(self) -> None:
        """Raise OcrUnavailable now if tesseract or the language is missing."""
        self._load()

    def read(self, image) -> OcrResult:
        """OCR one PIL image; word boxes are in that image's pixel coordinates."""
        pt = self._load()
        img = image.convert("L")
        if _mean(img) < 110:
            # Dark theme: invert once here so tesseract can skip its own per-line inverted retry
            # (tessedit_do_invert=0), which otherwise costs up to a third of the OCR time.
            from PIL import ImageOps

            img = ImageOps.invert(img)
        if self.upscale != 1.0:
            img = img.resize((int(img.width * self.upscale), int(img.height * self.upscale)))
        t0 = time.perf_counter()
        data = self._run(pt, img)
        ms = (time.perf_counter() - t0) * 1000.0
        return _assemble(data, self.min_confidence, 1.0 / self.upscale, ms)


    def _run(self, pt, img) -> dict:
        """One tesseract process with its own environment; returns the TSV table as pytesseract's DICT."""
        # OMP_THREAD_LIMIT goes to the child only: without it tesseract's OpenMP threads spin and
        # triple the CPU cost, but set process-wide it breaks CTranslate2 (whisper decodes garbage).
        env = dict(os.environ, OMP_THREAD_LIMIT=str(self.threads))
        cmd = pt.pytesseract.tesseract_cmd
        with tempfile.TemporaryDirectory(prefix="mirador-ocr-") as d:
            src = os.path.join(d, "frame.bmp")  # BMP: no compression work on either side
            img.save(src, "BMP")
            try:
                out = subprocess.run([cmd, src, "stdout", "-l", self.language, "--psm", str(self.psm),
                                      "-c", "tessedit_do_invert=0", "tsv"],
                                     capture_output=True, env=env, timeout=self.timeout)
            except FileNotFoundError as e:
                raise OcrUnavailable(f"tesseract not found at {cmd!r} — install tesseract-ocr") from e
        if out.returncode != 0:
            raise RuntimeError(f"tesseract failed ({out.returncode}): {out.stderr.decode(errors='replace')[-300:]}")
        return pt.pytesseract.file_to_dict(out.stdout.decode("utf-8", "replace"), "\t", -1)


def _mean(img) -> float:
    """Mean luminance of a grayscale image, from a small copy (cheap)."""
    small = img.reduce(8) if min(img.size) >= 64 else img
    hist = small.histogram()
    total = sum(hist) or 1
    return sum(i * n for i, n in enumerate(hist)) / total


def _assemble(data: dict, min_conf: float, scale: float, ms: float) -> OcrResult:
    """Join tesseract's word table into lines, keeping each word's character span and box."""
    words: list[OcrWord] = []
    parts: list[str] = []
    pos = 0
    last_line = None
    for i, raw in enumerate(data["text"]):
        text = (raw or "").strip()
        conf = float(data["conf"][i])
        if not text or conf < min_conf:
            continue
        line = (data["block_num"][i], data["par_num"][i], data["line_num"][i])
        if last_line is not None:
            sep = " " if line == last_line else "\n"
            parts.append(sep)
            pos += 1
        last_line = line
        words.append(OcrWord(text, int(data["left"][i] * scale), int(data["top"][i] * scale),
                             int(data["width"][i] * scale), int(data["height"][i] * scale), conf, pos, pos + len(text)))
        parts.append(text)
        pos += len(text)
    mean = sum(w.confidence for w in words) / len(words) if words else 0.0
    return OcrResult("".join(parts), words, mean, ms)
