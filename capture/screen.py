"""Screen source: privacy check → grab (mss, grim or the portal) → cheap change detection → OCR worker → redact → dedupe → writer.

An idle screen costs one window probe, one grab and one downscaled comparison per cycle; OCR,
thumbnails and writes happen only for frames that changed, and text already stored for the same
window is not stored again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from capture.frames import save_thumbnail
from capture.grab import GrabUnavailable, open_grabber
from capture.health import Health
from capture.privacy import PrivacyFilter
from capture.queues import DropOldestQueue
from capture.redact import Redactor
from capture.regions import Plan, gray_of, plan
from capture.scope_rules import ScopeRules, window_names
from capture.window import WindowInfo, WindowProbe, default_probe
from memory.errors import MiradorError
from memory.store import filters as F
from memory.store.audit import utcnow
from memory.store.core import EvidenceSpec
from memory.store.io_faults import storage_error
from memory.store.rows import new_id

if TYPE_CHECKING:
    from memory.store.core import Store

log = logging.getLogger(__name__)

CELL = 4  # change detection compares 4x4-pixel block means of the green channel
PIXEL_DELTA = 10.0  # a block "changed" if its mean moved more than this (0..255)
MIN_TEXT_CHARS = 3
# A band is a strip of whole text lines: read it as one block, line by line (psm 6). The automatic
# layout (psm 3, kept for whole frames) splits left-aligned monospace text — terminals, code, logs —
# into columns ("line\nline\n...\n6.0\n6.1"), which lost most of the line tokens in bench/capture.py.
BAND_PSM = 6

# Why a cycle grabbed nothing (health's excluded_reason; never an app name or title).
NO_FOCUS = "no focused window"
EXCLUDED_FOCUSED = "the focused window is excluded"
EXCLUDED_SHOWING = "an excluded window is showing where the grab would read"
OFF_MONITORS = "the focused window is on no monitor capture.monitors lets Mirador read"


@dataclass
class Frame:
    """A grabbed, changed frame waiting for OCR."""

    image: object  # PIL.Image
    captured_at: datetime
    window: WindowInfo | None
    monitor: int | None
    region: dict = field(default_factory=dict)
    key: object = None  # the view (window id or monitor) it was grabbed from


@dataclass
class _Read:
    """OCR of a frame, possibly assembled from several bands (word boxes in frame coordinates)."""

    text: str
    words: list
    confidence: float
    ms: float

    def words_in(self, start: int, end: int) -> list:
        """Words overlapping text[start:end]."""
        return [w for w in self.words if w.start < end and w.end > start]


def signature(raw: bytes | bytearray, width: int, height: int) -> np.ndarray:
    """Downscaled grayscale-ish signature of a BGRA frame: CELLxCELL block means of the green channel."""
    a = np.frombuffer(raw, np.uint8).reshape(height, width, 4)
    h, w = height - height % CELL, width - width % CELL
    g = a[:h, :w, 1].astype(np.uint16)
    return g.reshape(h // CELL, CELL, w // CELL, CELL).sum(axis=(1, 3), dtype=np.uint16) / float(CELL * CELL)


class ChangeDetector:
    """Remembers the last signature per view and says whether a new one differs enough to OCR."""

    def __init__(self, min_changed_fraction: float = 0.0005, views: int = 6) -> None:
        self.min_changed_fraction = min_changed_fraction
        self._last: dict[object, np.ndarray] = {}
        # Gray copy of the last frame OCR'd per view (written by the OCR worker): what bands diff against.
        self.read_frames: OrderedDict[object, np.ndarray] = OrderedDict()
        self.views = views

    def changed(self, key: object, sig: np.ndarray) -> bool:
        """True if this view is new, resized, or more than min_changed_fraction of its blocks moved."""
        prev = self._last.get(key)
        self._last[key] = sig
        if prev is None or prev.shape != sig.shape:
            return True
        frac = float(np.count_nonzero(np.abs(sig - prev) > PIXEL_DELTA)) / sig.size
        return frac > self.min_changed_fraction

    def forget(self) -> None:
        """Drop every remembered view (e.g. after a pause) so the next frame counts as changed and is read whole."""
        self._last.clear()
        self.read_frames.clear()

    def remember_read(self, key: object, gray: np.ndarray) -> None:
        """Keep the frame just OCR'd for this view (a few views at most)."""
        self.read_frames[key] = gray
        self.read_frames.move_to_end(key)
        while len(self.read_frames) > self.views:
            self.read_frames.popitem(last=False)


def _norm_line(line: str) -> str:
    return re.sub(r"\W+", " ", line.lower()).strip()


def _line_key(norm: str) -> bytes:
    # A short hash, not the line: what is remembered of screen text is no more than a tombstone keeps.
    return hashlib.blake2b(norm.encode("utf-8"), digest_size=12).digest()


def view_key(app: str | None, window: str | None, monitor: int | None) -> tuple:
    """Which view a text belongs to: (app, redacted window title), or the monitor when no window is known."""
    if app or window or monitor is None:
        return (app or "", window or "")
    return ("monitor", monitor)


class TextDedupe:
    """Per-window memory of lines already stored, so unchanged text is not stored again, also after a restart.

    Each line is kept as a hash of its normalised form (case, punctuation, spacing) with the id of the
    evidence row that stored it. A line counts as seen only while that row exists (`live` says which
    ids still do): text the person forgot is captured again when it shows again. `seed()` loads the
    lines of recent screen rows at capture start, so a restart does not store the same screen twice.
    """

    def __init__(self, windows: int = 64, lines_per_window: int = 4000,
                 live: Callable[[set[str]], set[str]] | None = None) -> None:
        self._seen: OrderedDict[tuple, OrderedDict[bytes, str]] = OrderedDict()
        self.windows = windows
        self.lines_per_window = lines_per_window
        self.live = live
        self.seeded_ids: set[str] = set()
        self.last_hit_seeded = False  # the last text found nothing new only because of rows from before this start
        self.recaptured_lines = 0  # lines seen before whose row was deleted since: stored again

    def _window(self, key: tuple) -> OrderedDict[bytes, str]:
        seen = self._seen.setdefault(key, OrderedDict())
        self._seen.move_to_end(key)
        while len(self._seen) > self.windows:
            self._seen.popitem(last=False)
        return seen

    def _note(self, seen: OrderedDict[bytes, str], lk: bytes, eid: str) -> None:
        seen[lk] = eid
        seen.move_to_end(lk)

    def seed(self, rows: list[dict]) -> int:
        """Remember the lines of stored screen rows (given oldest first); returns the lines loaded.

        Only what the caps keep is read: the newest `windows` views, and per view the newest rows up to
        `lines_per_window` lines, so a busy day does not make the start slow.
        """
        by_view: dict[tuple, list[dict]] = {}
        for r in reversed(rows):  # newest first: a view's first row decides its rank
            by_view.setdefault(view_key(r.get("app"), r.get("window"), r.get("monitor")), []).append(r)
        n = 0
        for key, view_rows in reversed(list(by_view.items())[: self.windows]):  # the newest view ends most recent
            budget, take = self.lines_per_window, []
            for r in view_rows:
                if budget <= 0:
                    break
                take.append(r)
                budget -= (r.get("text") or "").count("\n") + 1
            seen = self._window(key)
            for r in reversed(take):  # oldest first, so the newest lines are the last evicted
                for ln in (r.get("text") or "").splitlines():
                    norm = _norm_line(ln)
                    if norm:
                        self._note(seen, _line_key(norm), r["id"])
                        n += 1
                self.seeded_ids.add(r["id"])
            while len(seen) > self.lines_per_window:
                seen.popitem(last=False)
        return n

    def new_text(self, key: tuple, text: str, eid: str = "") -> tuple[str, bool]:
        """What to store for this window as row `eid`: ('', False) if nothing is new, the full text if
        most lines are new, else only the new lines (partial=True)."""
        lines = [ln for ln in text.splitlines() if _norm_line(ln)]
        keys = [_line_key(_norm_line(ln)) for ln in lines]
        seen = self._window(key)
        known = {seen[k] for k in keys if k in seen}
        if known and self.live is not None:
            gone = known - self.live(known)
            if gone:  # deleted (forgotten, or never written): its lines are not "already stored" any more
                for k in [k for k, e in seen.items() if e in gone]:
                    del seen[k]
                self.recaptured_lines += sum(1 for k in keys if k not in seen)
                known -= gone
        fresh = [ln for ln, k in zip(lines, keys, strict=True) if k not in seen]
        self.last_hit_seeded = not fresh and bool(known) and known <= self.seeded_ids
        if not fresh:
            for k in keys:
                seen.move_to_end(k)
            return "", False
        partial = len(fresh) * 2 < len(lines)
        for k in keys:
            if not partial or k not in seen:  # a line belongs to the newest row that holds it
                self._note(seen, k, eid)
            else:
                seen.move_to_end(k)
        while len(seen) > self.lines_per_window:
            seen.popitem(last=False)
        return ("\n".join(fresh), True) if partial else ("\n".join(lines), False)


def recent_screen_rows(store: Store, hours: float, now: datetime | None = None) -> list[dict]:
    """Screen evidence captured in the last `hours`, oldest first, as TextDedupe.seed() takes it.

    Read from the live evidence table only, so a forgotten row is never seeded.
    """
    if hours <= 0:
        return []
    since = (now or utcnow()) - timedelta(hours=hours)
    where = F.and_(F.equals("source", "screen"), F.at_or_after("captured_at", since))
    # This device's own capture: the dedupe is of what this screen showed.
    rows = store.rows("evidence", where, ["id", "app", "window", "text", "meta", "captured_at"], local=True)
    for r in rows:
        meta = r.pop("meta", None)
        if not (r.get("app") or r.get("window")) and meta:
            try:
                r["monitor"] = json.loads(meta).get("monitor")
            except (ValueError, AttributeError):
                pass
    rows.sort(key=lambda r: r["captured_at"] or datetime.min)
    return rows


class ScreenSource:
    """One capture cycle per `step()`; changed frames go to `queue`, `handle()` turns them into evidence."""

    def __init__(self, home: Path, cfg, privacy: PrivacyFilter, redactor: Redactor, writer, health: Health,
                 ocr, scope: str | None = None, probe: WindowProbe | None = None, keys=None, session=None) -> None:
        self.home = Path(home)
        self.keys = keys  # memory.store.keys.DataKeys: thumbnails are sealed with the data key
        self.cfg = cfg
        self.privacy = privacy
        self.redactor = redactor
        self.writer = writer
        self.health = health
        self.ocr = ocr
        self.scope = scope
        self.scope_rules: ScopeRules | None = None  # capture.scope_rules; the runner sets and updates it
        self._probe = probe
        self._probe_failures = 0
        self._grab: Any = None  # capture.grab grabber: mss, grim or the Screenshot portal
        self._unavailable = ""  # why no grabber could be opened (reported once per new reason)
        self._no_probe_reported = False
        self._reopen = False
        self.session = session  # capture.wayland.session.Session; None = detect from the environment
        self.detector = ChangeDetector(cfg.min_changed_fraction)
        self.dedupe = TextDedupe()
        self.queue = DropOldestQueue(cfg.ocr_queue_size, "ocr")

    def _window_probe(self) -> WindowProbe:
        """The window probe: the one given, else the one for this session, chosen on first use."""
        if self._probe is None:
            from capture.wayland.session import detect

            self.session = self.session or detect()
            self._probe = default_probe(self.session)
            self.health.set(window_probe=self._probe.name, session=self.session.label)
        return self._probe

    def _grabber(self):
        # The grabber, the window probe and their connections belong to the thread that first calls step().
        # The probe comes first: on sway and Hyprland it also lists the outputs grim grabs from.
        if self._reopen and self._grab is not None:  # capture.screen_backend changed while running
            self._grab.close()
            self._grab, self._reopen = None, False
        probe = self._window_probe()
        if self._grab is None:
            try:
                self._grab = open_grabber(getattr(self.cfg, "screen_backend", "auto"), self.session,
                                          outputs=getattr(probe, "outputs", None))
            except GrabUnavailable as e:
                if str(e) != self._unavailable:  # once per reason, not every 2 s
                    self._unavailable = str(e)
                    self.health.set(screen=f"unavailable: {e}", screen_backend="none")
                    self.health.error(f"screen: {e}")
                return None
            self._unavailable = ""
            self.health.set(screen_backend=self._grab.name, screen="on")
        return self._grab

    def step(self) -> str:
        """Run one cycle: 'excluded', 'unchanged', 'queued', 'unavailable' or 'error' (see Health for counts)."""
        now = time.time()
        self.health.set(last_cycle_at=now)
        try:
            sct = self._grabber()
            if sct is None:
                return "unavailable"  # health says why and what to install; retried each cycle
            probe = self._window_probe()
            # Checked before any pixel is read: an excluded window is never grabbed, nor an unknown one.
            reason = self._no_probe(probe)
            win = None if reason else probe.active()
            reason = reason or self._probe_failed(probe)
            if not reason and win is None:
                # Nothing has focus (an empty workspace or output, GNOME's overview, the bare desktop): a grab
                # would take every monitor, whatever shows there, excluded windows included.
                reason = NO_FOCUS
            if not reason and self.privacy.excluded(win):
                reason = EXCLUDED_FOCUSED
            views: list[tuple[object, dict, int | None]] = []
            shown = None if reason else probe.visible()  # the other windows showing, where the probe can list them
            reason = reason or self._probe_failed(probe)
            if not reason:
                assert win is not None
                views, reason = self._views(sct, win, shown)
            if reason:
                self.health.bump("frames_excluded")
                self.health.set(excluded_reason=reason)
                self.detector.forget()
                log.debug("not capturing: %s", reason)
                return "excluded"
            self.health.set(excluded_reason="")
            queued = False
            for key, region, monitor in views:
                shot = sct.grab(region)
                self.health.bump("frames_grabbed")
                self.health.set(last_frame_at=now)
                if not self.detector.changed(key, signature(shot.raw, shot.width, shot.height)):
                    self.health.bump("frames_skipped")
                    continue
                self.health.set(last_change_at=now)
                from PIL import Image

                img = Image.frombuffer("RGB", shot.size, bytes(shot.raw), "raw", "BGRX", 0, 1)
                self.queue.put(Frame(img, utcnow(), win, monitor, region, key))
                self.health.set(ocr_queue=len(self.queue), ocr_dropped=self.queue.dropped)
                queued = True
            return "queued" if queued else "unchanged"
        except Exception as e:  # a failed grab is reported and retried next cycle
            log.exception("screen capture cycle failed")
            self.health.error(f"screen: {type(e).__name__}: {e}")
            return "error"

    def reopen_grabber(self) -> None:
        """Open the grabber again at the next cycle (on the capture thread, which owns it)."""
        self._reopen = True

    def _no_probe(self, probe: WindowProbe) -> str | None:
        """If no probe can tell the focused window here: report it once and say why to skip."""
        if probe.available:
            return None
        if not self._no_probe_reported:
            self._no_probe_reported = True
            self.health.error(f"window probe: {probe.reason}; nothing is grabbed until the focused "
                              "window can be known (an excluded app could be on screen)")
        # Fail closed: an unknown window might be an excluded one.
        return "active window unknown (no window probe on this desktop)"

    def _probe_failed(self, probe: WindowProbe) -> str | None:
        """If the window probe failed this cycle: report it (first time, then every 100th) and say why to skip."""
        before, now = self._probe_failures, probe.failures
        if now == before:
            return None
        self._probe_failures = now
        self.health.set(window_probe_failures=now)
        if before == 0 or now // 100 > before // 100:
            self.health.error(f"window probe ({now} failures): {probe.last_error}")
        # Fail closed: with the window unknown because a call failed, it could be an excluded one.
        return "active window unknown (probe failed)"

    def _views(self, sct, win: WindowInfo,
               shown: list[WindowInfo] | None) -> tuple[list[tuple[object, dict, int | None]], str | None]:
        """What to grab for a focused, allowed window, or why nothing: (views, None) or ([], reason).

        The focused window's rectangle when known and preferred, else the monitors. Where the probe lists
        the windows showing (`shown`: sway, Hyprland), a view on which an excluded one shows is dropped
        (for a grabber that reads the whole screen whatever the view, the portal, any excluded window
        showing stops the grab). Where it cannot, only the monitors the focused window is on are
        grabbed (all of them when its rectangle is unknown): what else shows there was never checked.
        """
        screen = sct.monitors[0]
        views: list[tuple[object, dict, int | None]] = []
        if self.cfg.prefer_active_window and win.region:
            r = _clip(win.region, screen)
            if r:
                views = [(("window", win.id), r, None)]
        if not views:
            mons = [i for i in (self.cfg.monitors or range(1, len(sct.monitors))) if 0 < i < len(sct.monitors)]
            if shown is None and win.region:
                mons = [i for i in mons if _overlaps(win.region, sct.monitors[i])]
            views = [(("monitor", i), sct.monitors[i], i) for i in mons]
            if not views:
                return [], OFF_MONITORS
        if shown is None:
            return views, None
        hidden = [w.region or screen for w in shown if self.privacy.excluded(w)]
        if not hidden:
            return views, None
        whole = getattr(sct, "reads_whole_screen", False)
        views = [v for v in views if not any(_overlaps(h, screen if whole else v[1]) for h in hidden)]
        return (views, None) if views else ([], EXCLUDED_SHOWING)

    def handle(self, frame: Frame) -> None:
        """OCR the changed bands of one frame, redact, drop already-stored text, save a thumbnail, submit evidence."""
        gray = gray_of(frame.image)
        todo = plan(self.detector.read_frames.get(frame.key) if frame.key is not None else None, gray)
        res = self._read(frame.image, todo)
        # Remembered only after OCR succeeded: a failed read leaves its changes for the next frame.
        if frame.key is not None:
            self.detector.remember_read(frame.key, gray)
        if res is None:
            self.health.bump("frames_no_new_rows")
            return
        self.health.bump("frames_ocrd")
        self.health.ocr_time(res.ms)
        text = res.text.strip()
        if len(text) < MIN_TEXT_CHARS:
            return
        red = self.redactor.redact(text)
        win = frame.window
        title = self.redactor.redact(win.title) if win else None
        # Keyed as the row is stored (redacted title), so rows read back at the next start match.
        key = view_key(win.app, title.text, None) if win and title else view_key("", "", frame.monitor)
        eid = new_id("evidence")
        new, partial = self.dedupe.new_text(key, red.text, eid)
        self.health.set(lines_recaptured=self.dedupe.recaptured_lines)
        if not new:
            self.health.bump("texts_deduped")
            if self.dedupe.last_hit_seeded:
                self.health.bump("texts_seen_before_start")
            return
        frame_path = None
        if self.cfg.thumbnails:
            boxes = [(w.left, w.top, w.width, w.height) for s, e, _ in red.spans for w in res.words_in(s, e)]
            try:
                frame_path = save_thumbnail(frame.image, self.home, frame.captured_at, eid, self.cfg.thumbnail_width,
                                            boxes, keys=self.keys)
            except MiradorError as e:  # locked, or no key: the text is kept, the image is not (never in the clear)
                self.health.bump("thumbnails_skipped")
                self.health.error(f"thumbnail not kept: {e}")
            except OSError as e:  # a full or failing disk: the text is kept (the writer holds it until there is room)
                fault = storage_error(e, self.home)
                if fault is None:
                    raise
                self.health.bump("thumbnails_skipped")
                self.health.error(f"thumbnail not kept: {fault}")
        count = red.total + (title.total if title else 0)
        meta = {"ocr_confidence": round(res.confidence, 1), "ocr_ms": round(res.ms, 1), "region": frame.region}
        if frame.monitor is not None:
            meta["monitor"] = frame.monitor
        if partial:
            meta["partial"] = True
        if not todo.full:
            meta["bands"] = [list(b) for b in todo.bands]
        if count:
            kinds = dict(red.counts)
            for k, v in (title.counts if title else {}).items():
                kinds[k] = kinds.get(k, 0) + v
            meta["redacted"] = kinds
            self.health.bump("redactions", count)
        self.writer.submit(EvidenceSpec(
            id=eid, text=new, source="screen", app=win.app if win else "", window=title.text if title else "",
            scope=self._scope(win, title.text if title else "", red.text), captured_at=frame.captured_at,
            redactions=count, frame_path=frame_path, meta=meta))
        self.health.bump("frames_stored")

    def _scope(self, win: WindowInfo | None, title: str, text: str) -> str | None:
        """The first scope rule matching this window (its whole text may show the address), else the default."""
        if self.scope_rules is None or win is None:
            return self.scope
        i = self.scope_rules.match(window_names(win), title, text)
        return self.scope_rules.rules[i].scope if i is not None else self.scope

    def _read(self, image, todo: Plan) -> _Read | None:
        """OCR the whole frame or just its changed bands; None if no row changed since the last read."""
        if todo.full:
            r = self.ocr.read(image)
            self.health.bump("ocr_full_reads")
            return _Read(r.text, list(r.words), r.confidence, r.ms)
        if not todo.bands:
            return None
        texts: list[str] = []
        words: list = []  # OcrWord, moved to frame coordinates
        ms, pos = 0.0, 0
        for top, bottom in todo.bands:
            r = self.ocr.read(image.crop((0, top, image.width, bottom)), psm=BAND_PSM)
            self.health.bump("ocr_band_reads")
            ms += r.ms
            if not r.text.strip():
                continue
            if texts:
                pos += 1  # the "\n" joining bands
            words += [replace(w, top=w.top + top, start=w.start + pos, end=w.end + pos) for w in r.words]
            texts.append(r.text)
            pos += len(r.text)
        conf = sum(w.confidence for w in words) / len(words) if words else 0.0
        return _Read("\n".join(texts), words, conf, ms)

    def close(self) -> None:
        """Release the grabber and the window probe."""
        if self._grab is not None:
            self._grab.close()
            self._grab = None
        if self._probe is not None:
            self._probe.close()


def _overlaps(a: dict, b: dict) -> bool:
    """True when two rectangles share any pixel."""
    return (a["left"] < b["left"] + b["width"] and b["left"] < a["left"] + a["width"]
            and a["top"] < b["top"] + b["height"] and b["top"] < a["top"] + a["height"])


def _clip(r: dict, screen: dict) -> dict | None:
    left, top = max(r["left"], screen["left"]), max(r["top"], screen["top"])
    right = min(r["left"] + r["width"], screen["left"] + screen["width"])
    bottom = min(r["top"] + r["height"], screen["top"] + screen["height"])
    if right - left < 16 or bottom - top < 16:
        return None
    return {"left": left, "top": top, "width": right - left, "height": bottom - top}
