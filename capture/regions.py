"""Which horizontal bands of a changed frame hold new text, so OCR reads only those.

OCR cost grows with the number of text lines read (tesseract's LSTM runs per line), so a frame
where two lines of an editor changed should cost two lines, not the whole window. Bands are found
by comparing the frame with the last frame whose text was read (same view): rows that differ and
do not appear anywhere in that frame (rows that only moved — a terminal scrolling, lines pushed
down by an inserted line — were read already) are grouped and widened to the blank gaps between
text lines so no line is cut in half. Bands span the full width: cutting a line sideways would split words and lose the
line's context.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PIXEL_DELTA = 24  # a pixel "changed" if its gray level moved more than this (anti-aliasing is deterministic)
EDGE_DELTA = 40  # neighbouring pixels differing this much form an edge (text has many, background none)
MAX_BAND_FRACTION = 0.6  # above this share of rows, read the whole frame (one call beats many)
PAD = 3  # pixels kept above and below a band
MAX_GROW = 96  # at most this far up/down looking for the gap between text lines


@dataclass(frozen=True)
class Plan:
    """What to OCR: `bands` (top, bottom) rows, or the whole frame when `full`; `moved` = rows only shifted."""

    full: bool
    bands: tuple[tuple[int, int], ...] = ()
    moved: int = 0


def gray_of(image) -> np.ndarray:
    """A PIL image as a 2-D uint8 gray array."""
    return np.asarray(image.convert("L"), dtype=np.uint8)


def _row_keys(gray: np.ndarray) -> list[int]:
    """A fingerprint per row: equal pixel rows give equal keys."""
    return [hash(row.tobytes()) for row in gray]


def _blank_rows(gray: np.ndarray) -> np.ndarray:
    """True for rows without edges (the background between text lines), whatever the background colour."""
    edges = np.abs(np.diff(gray.astype(np.int16), axis=1)) > EDGE_DELTA
    return edges.sum(axis=1) <= 2


def changed_rows(prev: np.ndarray, cur: np.ndarray) -> tuple[np.ndarray, int]:
    """Bool per row of `cur` that shows something `prev` did not, and how many differing rows merely moved.

    A row that differs from the same row of `prev` but appears verbatim elsewhere in `prev` was
    scrolled or pushed by an inserted line: its text was read before, so it is not new.
    """
    differs = np.any(np.abs(cur.astype(np.int16) - prev.astype(np.int16)) > PIXEL_DELTA, axis=1)
    ys = np.flatnonzero(differs)
    if not len(ys):
        return differs, 0
    seen = set(_row_keys(prev))
    moved = [y for y, row in zip(ys.tolist(), cur[ys], strict=True) if hash(row.tobytes()) in seen]
    differs[moved] = False
    return differs, len(moved)


def _grow(blank: np.ndarray, top: int, bottom: int) -> tuple[int, int]:
    h = len(blank)
    t = top
    while t > 0 and top - t < MAX_GROW and not blank[t - 1]:
        t -= 1
    b = bottom
    while b < h and b - bottom < MAX_GROW and not blank[b]:
        b += 1
    return max(0, t - PAD), min(h, b + PAD)


def bands_from_rows(rows: np.ndarray, blank: np.ndarray, gap: int = 6) -> list[tuple[int, int]]:
    """Group changed rows into bands, widen each to the surrounding blank rows, merge overlaps."""
    ys = np.flatnonzero(rows)
    if not len(ys):
        return []
    raw: list[list[int]] = [[int(ys[0]), int(ys[0]) + 1]]
    for y in ys[1:].tolist():
        if y - raw[-1][1] <= gap:
            raw[-1][1] = y + 1
        else:
            raw.append([y, y + 1])
    out: list[list[int]] = []
    for top, bottom in raw:
        t, b = _grow(blank, top, bottom)
        if out and t - out[-1][1] <= gap:  # neighbouring lines: one OCR call, not two
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([t, b])
    return [(t, b) for t, b in out]


def plan(prev: np.ndarray | None, cur: np.ndarray) -> Plan:
    """Decide what to OCR in `cur` given the last frame read for the same view (None = read it all)."""
    if prev is None or prev.shape != cur.shape:
        return Plan(full=True)
    rows, moved = changed_rows(prev, cur)
    if not rows.any():
        return Plan(full=False, moved=moved)
    bands = bands_from_rows(rows, _blank_rows(cur))
    if sum(b - t for t, b in bands) > MAX_BAND_FRACTION * cur.shape[0]:
        return Plan(full=True, moved=moved)
    return Plan(full=False, bands=tuple(bands), moved=moved)
