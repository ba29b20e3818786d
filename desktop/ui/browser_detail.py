"""The detail pane: a memory (or a captured row) as a card a person reads.

What it says (large), when (in plain words: "Tuesday 3 Dec, 14:05"), where it came from (an app and
window, something said, a typed note) with the captured frame or transcript large enough to read
(click the frame to enlarge it), and its relations. Ids, fingerprints, salience and the raw fields
are behind a collapsed "Technical details" link.
"""

from __future__ import annotations

import html
import json
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QImage, QPixmap
from PySide6.QtWidgets import QDialog, QLabel, QScrollArea, QTextBrowser, QVBoxLayout

from desktop.ui.browser_data import (
    SOURCE_WORDS,
    STATUS_WORDS,
    TYPE_WORDS,
    highlight,
    memory_detail,
    resolve_frame,
)
from desktop.ui.frame_image import frame_image
from desktop.ui.qt_models import local_time

if TYPE_CHECKING:
    from memory.store.core import Store

THUMB = 460  # wide enough to read a captured window's text in the pane; click to see it whole
TECH_FIELDS = ["id", "type", "status", "scope", "confidence", "salience", "origin", "user_edited", "pinned",
               "created_at", "updated_at", "valid_from", "valid_to", "supersedes", "superseded_by", "fingerprint"]
MUTED = "color:#666"


def load_detail(store: Store, row_id: str) -> dict:
    """Worker: a memory with its evidence rows (or one captured row) and a readable image per frame."""
    from memory.store.rows import kind_of

    if kind_of(row_id) == "evidence":
        return load_evidence_detail(store, row_id)
    from memory.graph.relations import related

    row = memory_detail(store, row_id)
    # the person sees every status; vault entries take no relations (they link memories only)
    row["_relations"] = [] if row.get("type") == "vault" else related(store, row_id, statuses=[])
    for e in row["_evidence"]:
        e["_thumb"] = _thumb(store, e.get("frame_path")) if e.get("_frame") else None
    return row


def load_evidence_detail(store: Store, evidence_id: str) -> dict:
    """Worker: one captured row, its frame image, and the memories drawn from it."""
    row = dict(store.get(evidence_id))
    frame = resolve_frame(store, row.get("frame_path"))
    row["_frame"] = str(frame) if frame else None
    row["_thumb"] = _thumb(store, row.get("frame_path")) if frame else None
    # A shared scope's memories drawn from it too (Store.derived_from).
    row["_derived"] = store.derived_from([evidence_id], ["id", "title", "text", "type", "status"], limit=50)
    return row


def _thumb(store: Store, path: str | None) -> QImage | None:
    img = frame_image(store, path)
    if img is None:
        return None
    return img.scaledToWidth(min(THUMB, img.width()), Qt.TransformationMode.SmoothTransformation)


def plain_time(v) -> str:
    """'Tuesday 3 Dec, 14:05' in local time (the year only when it is not this year); '' for nothing."""
    if not v:
        return ""
    if isinstance(v, str):
        dt = datetime.fromisoformat(v.replace("Z", "+00:00"))
    else:
        dt = v
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    dt = dt.astimezone()
    year = "" if dt.year == datetime.now().astimezone().year else f" {dt.year}"
    return f"{dt.strftime('%A')} {dt.day} {dt.strftime('%b')}{year}, {dt.strftime('%H:%M')}"


def _e(v) -> str:
    return html.escape(str(v)) if v not in (None, "") else "—"


def where_from(e: dict) -> str:
    """Where a captured row came from, in words: "Seen on screen in Slack — #ledger-team", "Spoken by Sam"."""
    source = e.get("source") or ""
    if source == "screen":
        place = " — ".join(x for x in (e.get("app"), e.get("window")) if x)
        return f"Seen on screen in {place}" if place else "Seen on screen"
    if source == "audio":
        return f"Spoken by {e['speaker']}" if e.get("speaker") else "Spoken (microphone)"
    words = SOURCE_WORDS.get(source, source.capitalize() or "Captured")
    place = " — ".join(x for x in (e.get("app"), e.get("window")) if x)
    return f"{words} in {place}" if place else words


def _type_lines(row: dict, match) -> list[str]:
    """The fields of the memory's type, as a person would say them."""
    d = row.get("details") or {}
    t = row.get("type")
    out = []
    if t == "episodic":
        if d.get("when"):
            out.append(f"<b>When:</b> {html.escape(plain_time(d['when']))}")
        if d.get("who"):
            out.append(f"<b>With:</b> {html.escape(', '.join(d['who']))}")
        if d.get("where"):
            out.append(f"<b>Where:</b> {html.escape(d['where'])}")
    elif t == "semantic" and d.get("subject"):
        out.append(f"<b>About:</b> {html.escape(d['subject'])}")
    elif t == "procedural" and d.get("steps"):
        steps = "".join(f"<li>{highlight(s, match)}</li>" for s in d["steps"])
        out.append(f"<b>Steps</b><ol style='margin-top:2px'>{steps}</ol>")
    elif t == "resource":
        link = d.get("uri") or d.get("path")
        if link:
            href = link if "://" in link else QUrl.fromLocalFile(link).toString()
            out.append(f"<b>Link:</b> <a href='{html.escape(href)}'>{html.escape(link)}</a>")
        if d.get("kind"):
            out.append(f"<b>Kind:</b> {html.escape(d['kind'])}")
    elif t == "core" and d.get("block"):
        out.append(f"<b>Profile section:</b> {html.escape(d['block'])}")
    return out


def _technical(row: dict, open_: bool, fields=TECH_FIELDS) -> list[str]:
    if not open_:
        return ["<p><a href='technical:show'>▸ Technical details</a></p>"]
    h = ["<p><a href='technical:hide'>▾ Technical details</a></p><table cellspacing=0 cellpadding=2>"]
    for k in fields:
        if k in row:
            v = row[k]
            shown = local_time(v) if (k.endswith("_at") or k in ("valid_from", "valid_to")) and v else v
            h.append(f"<tr><td style='{MUTED};padding-right:10px'>{k}</td><td>{_e(shown)}</td></tr>")
    if row.get("details"):
        h.append(f"<tr><td style='{MUTED}'>details</td><td><code>"
                 f"{html.escape(json.dumps(row['details'], ensure_ascii=False, indent=1, default=str))}</code></td></tr>")
    if row.get("provenance"):
        h.append(f"<tr><td style='{MUTED}'>evidence ids</td><td><code>"
                 f"{html.escape(', '.join(row['provenance']))}</code></td></tr>")
    h.append("</table>")
    return h


def _frame_and_text(e: dict, match, limit: int = 4000) -> list[str]:
    h = []
    if e.get("_thumb") is not None:
        h.append(f"<p><a href='frame:{e['id']}'><img src='thumb://{e['id']}'></a><br>"
                 f"<span style='{MUTED}'>Click the picture to see it full size.</span></p>")
    label = "What was said" if e.get("source") == "audio" else "Text"
    text = (e.get("text") or "")[:limit]
    h.append(f"<p style='{MUTED};margin-bottom:0'>{label}</p>"
             f"<p style='white-space:pre-wrap;font-size:11pt;margin-top:2px;margin-left:8px'>"
             f"{highlight(text, match)}</p>")
    return h


def render(row: dict, revealed: str | None = None, removable: bool = False, match=None,
           technical: bool = False) -> str:
    """HTML for one memory, vault entry or captured row; frames are referenced as thumb://<evidence id>.

    A vault entry's value appears only when `revealed` is given (after the person pressed Reveal).
    `match`: query word stems to mark. `technical`: show ids, fingerprint, salience, raw fields.
    """
    if "source" in row and "captured_at" in row and "type" not in row:
        return render_evidence(row, match, technical)
    t: str = row.get("type") or ""
    kind = TYPE_WORDS.get(t, t)
    status = STATUS_WORDS.get(row.get("status") or "", row.get("status") or "")
    badge = f" · <span style='color:#a15c00'>{html.escape(status)}</span>" if status else ""
    h = [f"<p style='{MUTED};margin-bottom:0'>{html.escape(kind)} · {html.escape(row.get('scope') or '')}{badge}</p>",
         f"<h2 style='margin-top:2px'>{highlight(row.get('title') or '', match)}</h2>"]
    if t == "vault":
        value = (f"<code style='white-space:pre-wrap'>{html.escape(revealed)}</code>" if revealed is not None
                 else "<i style='color:#666'>hidden — press Reveal to decrypt and show it "
                      "(each reveal is audited)</i>")
        h.append(f"<p><b>Secret value:</b> {value}</p>")
    elif (row.get("text") or "") != (row.get("title") or ""):
        h.append(f"<p style='white-space:pre-wrap;font-size:12pt'>{highlight(row.get('text') or '', match)}</p>")
    lines = _type_lines(row, match)
    if lines:
        h.append("<p>" + "<br>".join(lines) + "</p>")
    when = [f"Noted {plain_time(row.get('created_at'))}"] if row.get("created_at") else []
    if row.get("updated_at") and row.get("updated_at") != row.get("created_at"):
        when.append(f"changed {plain_time(row['updated_at'])}")
    if row.get("valid_to") or (row.get("valid_from") and _minutes_apart(row["valid_from"], row.get("created_at"))):
        span = "true " + (f"from {plain_time(row['valid_from'])} " if row.get("valid_from") else "") + \
               (f"until {plain_time(row['valid_to'])}" if row.get("valid_to") else "onwards")
        when.append(span.strip())
    if row.get("user_edited"):
        when.append("edited by you")
    if row.get("pinned"):
        when.append("pinned")
    if when:
        h.append(f"<p style='{MUTED}'>{html.escape(' · '.join(when))}</p>")
    if t != "vault":
        h.extend(_sources(row, match))
        h.extend(_relations(row.get("_relations") or [], removable))
    h.extend(_technical(row, technical, TECH_FIELDS + (["label"] if t == "vault" else [])))
    return "".join(h)


def _minutes_apart(a, b) -> bool:
    """True when two times differ by a minute or more (a validity that starts at creation says nothing)."""
    return plain_time(a) != plain_time(b)


def _origin_words(origin: str | None) -> str:
    o = origin or "person"
    if o in ("person", "cli"):
        return "You wrote this yourself."
    if o == "extractor":
        return "Drawn from captured screens or speech that are no longer kept."
    if o == "dream":
        return "Proposed by Dream while tidying memories."
    return f"Added by {o.removeprefix('mcp:')}."


def _sources(row: dict, match) -> list[str]:
    evidence = row.get("_evidence") or []
    missing = len(row.get("provenance") or []) - len(evidence)
    h = ["<h3>Where it came from</h3>"]
    if not evidence:
        h.append(f"<p style='{MUTED}'>{html.escape(_origin_words(row.get('origin')))}</p>")
    for e in evidence:
        h.append(f"<p><b>{html.escape(where_from(e))}</b><br><span style='{MUTED}'>"
                 f"{html.escape(plain_time(e.get('captured_at')))}</span></p>")
        h.extend(_frame_and_text(e, match, 1500))
    if missing > 0:
        h.append(f"<p style='color:#a60'>{missing} captured source(s) of this memory were deleted since.</p>")
    return h


def render_evidence(row: dict, match=None, technical: bool = False) -> str:
    """HTML for one captured row: where and when, the frame large, the text, and the memories drawn from it."""
    h = [f"<p style='{MUTED};margin-bottom:0'>Captured · {html.escape(row.get('scope') or '')}</p>",
         f"<h2 style='margin-top:2px'>{html.escape(where_from(row))}</h2>",
         f"<p style='{MUTED}'>{html.escape(plain_time(row.get('captured_at')))}</p>"]
    h.extend(_frame_and_text(row, match))
    derived = row.get("_derived") or []
    h.append(f"<h3>Memories drawn from it — {len(derived)}</h3>")
    if not derived:
        h.append(f"<p style='{MUTED}'>None yet. Mirador reads new captures every few minutes and keeps what "
                 "is worth remembering.</p>")
    for m in derived:
        status = STATUS_WORDS.get(m.get("status") or "", "")
        note = f" <span style='{MUTED}'>({html.escape(status.lower())})</span>" if status else ""
        h.append(f"<p>{html.escape(m.get('title') or m.get('text') or '')}{note}</p>")
    fields = ["id", "source", "app", "window", "speaker", "scope", "captured_at", "frame_path", "fingerprint"]
    h.extend(_technical(row, technical, fields))
    return "".join(h)


# A relation (memory/graph/relations.py) read from this memory's side: "out" = this memory is its source.
RELATION_WORDS = {("BECAUSE", "out"): "Because of", ("BECAUSE", "in"): "The reason for",
                  ("TRIGGERED", "out"): "Triggered", ("TRIGGERED", "in"): "Triggered by",
                  ("RESOLVES", "out"): "Resolves", ("RESOLVES", "in"): "Resolved by",
                  ("UPDATES", "out"): "Replaces", ("UPDATES", "in"): "Replaced by",
                  ("CONTRADICTS", "out"): "Contradicts", ("CONTRADICTS", "in"): "Contradicts",
                  ("MENTIONS", "out"): "Mentions", ("MENTIONS", "in"): "Mentioned in"}


def _relations(edges: list[dict], removable: bool) -> list[str]:
    """The links section: 'Because of <other>', 'Triggered by <other>' (RELATION_WORDS), with "remove"
    links only where a view can run the removal (the browser; not the review panes)."""
    h = [f"<h3>Linked memories — {len(edges)}</h3>"]
    if not edges:
        h.append(f"<p style='{MUTED}'>None yet. Links tie memories that explain one another — a decision and "
                 "its reason, a fix and the problem it solved. Mirador proposes them for you to review, and "
                 "assistants you connect can add them.</p>")
    for e in edges:
        o = e["other"]
        arrow = RELATION_WORDS.get((e["relation"], e["direction"]), e["relation"].capitalize())
        remove = f" <a href='unrelate:{html.escape(e['id'])}'>remove</a>" if removable else ""
        status = STATUS_WORDS.get(o.get("status") or "", "")
        note = f" <span style='{MUTED}'>({html.escape(status.lower())})</span>" if status else ""
        h.append(f"<p><b>{html.escape(arrow)}</b> {html.escape(o.get('title') or o.get('text') or '')}"
                 f"{note}{remove}</p>")
    return h


def remove_and_reload(store: Store, edge_id: str, memory_id: str) -> dict:
    """Worker: remove one relation (as the person), then load the memory's detail again."""
    from memory.graph.relations import remove_relation

    remove_relation(store, edge_id, actor="person")
    return load_detail(store, memory_id)


class FrameViewer(QDialog):
    """A captured frame at full size (scrolls when larger than the screen)."""

    def __init__(self, image: QImage, title: str = "", parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Mirador — {title}" if title else "Mirador — captured frame")
        self.image = QLabel()
        self.image.setPixmap(QPixmap.fromImage(image))
        scroll = QScrollArea()
        scroll.setWidget(self.image)
        lay = QVBoxLayout(self)
        lay.addWidget(scroll)
        self.resize(min(1280, self.image.pixmap().width() + 40), min(860, self.image.pixmap().height() + 40))


class DetailView(QTextBrowser):
    """A read-only rich-text card that serves thumb://<id> images from the loaded row.

    With jobs and a store it also removes relations: the "remove" link runs in a worker.
    """

    relation_removed = Signal(str)  # edge id, once the store no longer has it
    value_hidden = Signal()  # a revealed vault value was hidden again (REVEAL_SECONDS passed)
    REVEAL_SECONDS = 30  # a revealed secret does not stay on screen for whoever passes by later

    def __init__(self, parent=None, jobs=None, store: Store | None = None) -> None:
        super().__init__(parent)
        self.jobs, self.store = jobs, store
        self.setOpenLinks(False)
        self.anchorClicked.connect(self._anchor)
        self._images: dict[str, QImage] = {}
        self.row: dict | None = None
        self.match: list[str] = []
        self.technical = False  # the "Technical details" section is open
        self.revealed: str | None = None  # a vault value, only after Reveal; dropped when the selection changes
        self._hide_timer = QTimer(self, singleShot=True)
        self._hide_timer.timeout.connect(self.hide_value)
        self.viewer: FrameViewer | None = None
        self._rendered_fit = 0  # the frame width of the last render
        self.show_row(None)

    def loadResource(self, type_: int, name: QUrl | str) -> Any:  # noqa: N802 - Qt override
        url = QUrl(name)  # Qt passes a QUrl; the stubs allow a str too
        if url.scheme() == "thumb" and url.host() in self._images:
            img = self._images[url.host()]
            fit = self._fit_width()  # a narrow pane (Review's) shows the whole frame, not a sideways scroll bar
            return img if img.width() <= fit else img.scaledToWidth(fit, Qt.TransformationMode.SmoothTransformation)
        return super().loadResource(type_, name)

    def _fit_width(self) -> int:
        return max(160, self.viewport().width() - int(2 * self.document().documentMargin()) - 12)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        if self._images and abs(self._fit_width() - self._rendered_fit) > 8:
            self._render()  # the frames are fitted to the new width

    def _anchor(self, url: QUrl) -> None:
        scheme = url.scheme()
        if scheme == "unrelate":
            self.remove_relation(url.path())
        elif scheme == "technical":
            self.set_technical(url.path() == "show")
        elif scheme == "frame":
            self.open_frame(url.path())
        elif scheme in ("http", "https", "file", "mailto"):
            QDesktopServices.openUrl(url)

    def set_technical(self, on: bool) -> None:
        """Open or close the "Technical details" section (stays so for the next memory)."""
        self.technical = on
        self._render()

    def open_frame(self, evidence_id: str) -> FrameViewer | None:
        """Show a captured frame of the card at full size."""
        if self.row is None or self.store is None:  # a card without a store has no frames to read
            return None
        rows = [self.row] if self.row.get("id") == evidence_id else (self.row.get("_evidence") or [])
        e = next((r for r in rows if r.get("id") == evidence_id and r.get("_frame")), None)
        if e is None:
            return None
        image = frame_image(self.store, e.get("frame_path"))
        if image is None:
            return None
        self.viewer = FrameViewer(image, where_from(e), self)
        self.viewer.show()
        return self.viewer

    def remove_relation(self, edge_id: str) -> None:
        """Remove one of the shown memory's relations off the GUI thread, then show the memory again."""
        if self.jobs is None or self.row is None:
            return
        memory_id = self.row["id"]

        def done(row: dict) -> None:
            if self.row is not None and self.row["id"] == memory_id:
                self.show_row(row, match=self.match)
            self.relation_removed.emit(edge_id)

        self.jobs.submit(remove_and_reload, self.store, edge_id, memory_id, on_done=done)

    def show_row(self, row: dict | None, match=None, hint: str | None = None) -> None:
        """Show a loaded memory or captured row (match: query stems to mark), or a hint when there is none.
        Showing the same row again keeps the pane's scroll position."""
        same = row is not None and self.row is not None and self.row.get("id") == row.get("id")
        scroll = self.verticalScrollBar().value() if same else 0
        self.row, self.revealed, self.match = row, None, list(match or [])
        if row is None:
            self._images = {}
            hint = hint or "Select a memory to see what it says, when, and where it came from."
            self.setHtml(f"<p style='{MUTED}'>{html.escape(hint)}</p>")
            return
        rows = [row] if row.get("_thumb") is not None else (row.get("_evidence") or [])
        self._images = {e["id"]: e["_thumb"] for e in rows if e.get("_thumb") is not None}
        self._render()
        if same:
            self.verticalScrollBar().setValue(scroll)

    def _render(self) -> None:
        if self.row is None:
            return
        scroll = self.verticalScrollBar().value()
        self._rendered_fit = self._fit_width()
        self.setHtml(render(self.row, self.revealed, removable=self.jobs is not None, match=self.match,
                            technical=self.technical))
        self.verticalScrollBar().setValue(scroll)

    def show_value(self, row_id: str, value: str) -> None:
        """Show a decrypted vault value for the entry on display (ignored if the selection moved on)."""
        if self.row is None or self.row["id"] != row_id:
            return
        self.revealed = value
        self._render()
        self._hide_timer.start(int(self.REVEAL_SECONDS * 1000))

    def hide_value(self) -> None:
        """Hide a revealed vault value again (the timer's end; Reveal shows it again)."""
        self._hide_timer.stop()
        if self.revealed is not None:
            self.revealed = None
            self._render()
            self.value_hidden.emit()
