"""A persistent tesseract engine in its own process, driven over stdin/stdout (standard library only).

Why a process and not in-process ctypes: libtesseract's OpenMP threads busy-wait unless
OMP_THREAD_LIMIT is set before libgomp loads, which multiplied the CPU per frame; setting it
process-wide breaks CTranslate2 (whisper). A child gets the limit alone, keeps the language model
loaded between frames (the tesseract CLI reloads it on every call), and a crash in
native code cannot take capture down with it.

Run as `python -I tesseract_worker.py LANG PSM` with OMP_THREAD_LIMIT in its environment.
Protocol: the worker writes b"OK\\n" once ready (or b"ERR <message>\\n" and exits). Each request is
struct "<III" (width, height, page segmentation mode) followed by width*height bytes of 8-bit grayscale; each reply is
struct "<I" (length) followed by tesseract's TSV (UTF-8, with a header row). EOF on stdin ends it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
import sys

TSV_HEADER = "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext\n"
LIBRARY_NAMES = ("libtesseract.so.5", "libtesseract.so.4", "libtesseract.5.dylib", "libtesseract-5.dll",
                 "libtesseract.dylib")


def load_library():
    """libtesseract through ctypes with the few C-API signatures used here; OSError if absent."""
    names = [n for n in (ctypes.util.find_library("tesseract"),) if n] + list(LIBRARY_NAMES)
    err: Exception | None = None
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError as e:
            err = e
    else:
        raise OSError(f"libtesseract not found ({err})")
    vp, cp, i = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    lib.TessBaseAPICreate.restype = vp
    lib.TessBaseAPIInit3.argtypes = [vp, cp, cp]
    lib.TessBaseAPISetPageSegMode.argtypes = [vp, i]
    lib.TessBaseAPISetVariable.argtypes = [vp, cp, cp]
    lib.TessBaseAPISetImage.argtypes = [vp, cp, i, i, i, i]
    lib.TessBaseAPIGetTsvText.restype = vp
    lib.TessBaseAPIGetTsvText.argtypes = [vp, i]
    lib.TessDeleteText.argtypes = [vp]
    lib.TessBaseAPIClear.argtypes = [vp]
    lib.TessBaseAPIEnd.argtypes = [vp]
    lib.TessBaseAPIDelete.argtypes = [vp]
    return lib


class Engine:
    """One initialised TessBaseAPI: `tsv(gray_bytes, width, height)` returns the TSV table with a header."""

    def __init__(self, language: str, psm: int) -> None:
        self.lib = load_library()
        self.api = self.lib.TessBaseAPICreate()
        if self.lib.TessBaseAPIInit3(self.api, None, language.encode()) != 0:
            raise OSError(f"tesseract could not load language {language!r}")
        self.psm = psm
        # Same settings as the CLI path; the caller inverts dark themes itself (see models/ocr.py).
        self.lib.TessBaseAPISetVariable(self.api, b"tessedit_do_invert", b"0")
        self.lib.TessBaseAPISetVariable(self.api, b"debug_file", os.devnull.encode())

    def tsv(self, gray: bytes, width: int, height: int, psm: int | None = None) -> str:
        """Recognise one grayscale image (psm: page segmentation mode for this image, None = the default)."""
        self.lib.TessBaseAPISetPageSegMode(self.api, self.psm if psm is None else psm)
        self.lib.TessBaseAPISetImage(self.api, gray, width, height, 1, width)
        ptr = self.lib.TessBaseAPIGetTsvText(self.api, 0)
        try:
            text = ctypes.string_at(ptr).decode("utf-8", "replace") if ptr else ""
        finally:
            if ptr:
                self.lib.TessDeleteText(ptr)
            self.lib.TessBaseAPIClear(self.api)
        return text if text.startswith("level") else TSV_HEADER + text

    def close(self) -> None:
        """Free the engine."""
        self.lib.TessBaseAPIEnd(self.api)
        self.lib.TessBaseAPIDelete(self.api)


def _read(stream, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = stream.read(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def serve(language: str, psm: int, stdin=None, stdout=None) -> int:
    """Answer requests until EOF; returns the process exit code."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    try:
        engine = Engine(language, psm)
    except OSError as e:
        stdout.write(f"ERR {e}\n".encode())
        stdout.flush()
        return 2
    stdout.write(b"OK\n")
    stdout.flush()
    while (head := _read(stdin, 12)) is not None:
        width, height, psm = struct.unpack("<III", head)
        gray = _read(stdin, width * height)
        if gray is None:
            break
        out = engine.tsv(gray, width, height, psm).encode("utf-8")
        stdout.write(struct.pack("<I", len(out)) + out)
        stdout.flush()
    engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1], int(sys.argv[2])))
