"""Screen text with tesseract (via pytesseract): one class, plain dataclass results, lazy checks."""

from __future__ import annotations

import logging
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

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
    engine: "auto" = a persistent libtesseract worker process when the library loads, else the CLI;
        "library" = the worker only; "cli" = one `tesseract` process per image (reloads the model
        every call, which costs CPU on every image: bench/capture.py).
    """

    def __init__(self, language: str = "eng", psm: int = 3, min_confidence: float = 10.0, upscale: float = 1.0,
                 threads: int = 1, tesseract_cmd: str | None = None, timeout: float = 30.0,
                 engine: str = "auto") -> None:
        if engine not in ("auto", "library", "cli"):
            raise ValueError(f"engine must be auto, library or cli, not {engine!r}")
        self.language = language
        self.psm = psm
        self.min_confidence = min_confidence
        self.upscale = upscale
        self.threads = threads
        self.tesseract_cmd = tesseract_cmd
        self.timeout = timeout
        self.engine = engine
        self._checked = False
        self._lock = threading.Lock()
        self._pt = None
        self._worker: _Worker | None = None
        self._worker_failed = engine == "cli" or getattr(sys, "frozen", False)  # frozen apps have no `python`

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

    def read(self, image, psm: int | None = None) -> OcrResult:
        """OCR one PIL image (psm overrides the page segmentation mode for it); word boxes in its pixels."""
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
        psm = self.psm if psm is None else psm
        tsv = self._run_worker(img, psm)
        data = pt.pytesseract.file_to_dict(tsv, "\t", -1) if tsv is not None else self._run(pt, img, psm)
        ms = (time.perf_counter() - t0) * 1000.0
        return _assemble(data, self.min_confidence, 1.0 / self.upscale, ms)

    @property
    def engine_in_use(self) -> str:
        """Which engine serves requests now: "library" (the persistent worker) or "cli"."""
        return "library" if self._worker is not None and self._worker.alive else "cli"

    @property
    def worker_pid(self) -> int | None:
        """Process id of the persistent tesseract worker (benchmarks add its CPU), or None."""
        return self._worker.proc.pid if self._worker is not None and self._worker.alive else None

    def _run_worker(self, img, psm: int) -> str | None:
        """TSV from the persistent worker, or None when the CLI must be used instead."""
        if self._worker_failed:
            return None
        with self._lock:
            if self._worker is None or not self._worker.alive:
                try:
                    self._worker = _Worker(self.language, self.psm, self.threads)
                except OSError as e:
                    if self.engine == "library":
                        raise OcrUnavailable(f"libtesseract worker did not start: {e}") from e
                    log.warning("libtesseract worker unavailable (%s); using the tesseract CLI", e)
                    self._worker_failed = True
                    return None
                weakref.finalize(self, self._worker.close)
            worker = self._worker
        return worker.tsv(img, psm, self.timeout)

    def close(self) -> None:
        """Stop the persistent worker (it also exits by itself when this process ends)."""
        with self._lock:
            if self._worker is not None:
                self._worker.close()
                self._worker = None

    def _run(self, pt, img, psm: int) -> dict:
        """One tesseract process with its own environment; returns the TSV table as pytesseract's DICT."""
        # OMP_THREAD_LIMIT goes to the child only: without it tesseract's OpenMP threads spin and
        # triple the CPU cost, but set process-wide it breaks CTranslate2 (whisper decodes garbage).
        env = dict(os.environ, OMP_THREAD_LIMIT=str(self.threads))
        cmd = pt.pytesseract.tesseract_cmd
        with tempfile.TemporaryDirectory(prefix="mirador-ocr-") as d:
            src = os.path.join(d, "frame.bmp")  # BMP: no compression work on either side
            img.save(src, "BMP")
            try:
                out = subprocess.run([cmd, src, "stdout", "-l", self.language, "--psm", str(psm),
                                      "-c", "tessedit_do_invert=0", "tsv"],
                                     capture_output=True, env=env, timeout=self.timeout)
            except FileNotFoundError as e:
                raise OcrUnavailable(f"tesseract not found at {cmd!r} — install tesseract-ocr") from e
        if out.returncode != 0:
            raise RuntimeError(f"tesseract failed ({out.returncode}): {out.stderr.decode(errors='replace')[-300:]}")
        return pt.pytesseract.file_to_dict(out.stdout.decode("utf-8", "replace"), "\t", -1)


class _Worker:
    """Client of models/tesseract_worker.py: one request at a time, killed if a request overruns."""

    def __init__(self, language: str, psm: int, threads: int) -> None:
        script = Path(__file__).with_name("tesseract_worker.py")
        # Only the child gets the OpenMP limit (see Ocr._run for why not process-wide).
        env = dict(os.environ, OMP_THREAD_LIMIT=str(threads))
        self.proc = subprocess.Popen([sys.executable, "-I", str(script), language, str(psm)], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both are pipes
        self._stdin: IO[bytes] = self.proc.stdin
        self._stdout: IO[bytes] = self.proc.stdout
        self._lock = threading.Lock()
        ready = self._stdout.readline()
        if ready != b"OK\n":
            self.close()
            raise OSError(ready.decode(errors="replace").strip() or f"worker exited ({self.proc.poll()})")

    @property
    def alive(self) -> bool:
        """True while the process runs."""
        return self.proc.poll() is None

    def tsv(self, img, psm: int, timeout: float) -> str:
        """OCR one grayscale PIL image; RuntimeError if the worker dies or overruns (it is restarted next call)."""
        gray = img.tobytes()
        with self._lock:
            timer = threading.Timer(timeout, self.proc.kill)
            timer.start()
            try:
                self._stdin.write(struct.pack("<III", img.width, img.height, psm) + gray)
                self._stdin.flush()
                head = self._stdout.read(4)
                n = struct.unpack("<I", head)[0] if len(head) == 4 else -1
                out = self._stdout.read(n) if n >= 0 else b""
            except (OSError, ValueError) as e:
                self._end()
                raise RuntimeError(f"tesseract worker failed: {e}") from e
            finally:
                timer.cancel()
        if n < 0 or len(out) != n:
            self._end()
            raise RuntimeError(f"tesseract worker died or overran {timeout:.0f}s (exit {self.proc.poll()})")
        return out.decode("utf-8", "replace")

    def _end(self) -> None:
        # Killed and reaped before the error is raised: a worker whose pipe has closed can still be
        # exiting, and `alive` would then hand the dead worker to the next read instead of a new one.
        self.proc.kill()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            log.warning("tesseract worker %s did not exit after SIGKILL", self.proc.pid)

    def close(self) -> None:
        """End the worker: EOF first, kill if it does not go."""
        try:
            self._stdin.close()
            self.proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(5)
        finally:
            self._stdout.close()


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
