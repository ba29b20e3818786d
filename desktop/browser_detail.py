"""The detail pane: every field of a memory and its provenance (evidence, thumbnails, transcripts)."""

from __future__ import annotations

import html
import json

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QTextBrowser

from desktop.browser_data import memory_detail
from desktop.qt_models import local_time

THUMB = 220
FIELDS = ["id", "type", "status", "scope", "title", "confidence", "salience", "origin", "user_edited", "pinned",
          "created_at", "updated_at", "valid_from", "valid_to", "supersedes", "superseded_by", "fingerprint"]


def load_detail(store, memory_id: str) -> dict:
    """Worker: the memory, its evidence rows, and a thumbnail QImage per frame that still exists."""
    row = memory_detail(store, memory_id)
    for e in row["_evidence"]:
        if e.get("_frame"):
            img = QImage(e["_frame"])
            e["_thumb"] = None if img.isNull() else img.scaledToWidth(THUMB, Qt.TransformationMode.SmoothTransformation)
    return row


def _value(key: str, v) -> str:
    if key.endswith("_at") or key in ("valid_from", "valid_to"):
        return html.escape(local_time(v) if v else "—")
    if v is None or v == "":
        return "—"
    return html.escape(str(v))


def render(row: dict) -> str:
    """HTML for one memory; thumbnails are referenced as thumb://<evidence id> resources."""
    h = [f"<h3>{html.escape(row.get('title') or '')}</h3>",
         f"<p style='white-space:pre-wrap'>{html.escape(row.get('text') or '')}</p>",
         "<table cellspacing=0 cellpadding=2>"]
    for k in FIELDS:
        if k in row:
            h.append(f"<tr><td style='color:#666;padding-right:10px'>{k}</td><td>{_value(k, row[k])}</td></tr>")
    details = row.get("details") or {}
    h.append("<tr><td style='color:#666'>details</td><td><code>"
             f"{html.escape(json.dumps(details, ensure_ascii=False, indent=1))}</code></td></tr></table>")
    evidence = row.get("_evidence") or []
    missing = len(row.get("provenance") or []) - len(evidence)
    h.append(f"<h4>Provenance — {len(evidence)} evidence row(s)</h4>")
    if not evidence:
        h.append("<p style='color:#666'>Added by hand or from a source that kept no evidence.</p>")
    for e in evidence:
        where = " · ".join(x for x in (e.get("app"), e.get("window"), e.get("speaker")) if x)
        h.append(f"<p><b>{html.escape(e.get('source') or '')}</b> {html.escape(local_time(e.get('captured_at')))}"
                 f" <span style='color:#666'>{html.escape(where)}</span><br><code>{html.escape(e['id'])}</code></p>")
        if e.get("_thumb") is not None:
            h.append(f"<p><img src='thumb://{e['id']}'></p>")
        label = "Transcript" if e.get("source") == "audio" else "Text"
        h.append(f"<blockquote><i>{label}:</i> {html.escape((e.get('text') or '')[:1500])}</blockquote>")
    if missing > 0:
        h.append(f"<p style='color:#a60'>{missing} evidence row(s) were deleted since.</p>")
    return "".join(h)


class DetailView(QTextBrowser):
    """A read-only rich-text pane that serves thumb://<id> images from the loaded row."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setOpenLinks(False)
        self._images: dict[str, QImage] = {}
        self.row: dict | None = None
        self.show_row(None)

    def loadResource(self, type_: int, url: QUrl):  # noqa: N802 - Qt override
        if url.scheme() == "thumb" and url.host() in self._images:
            return self._images[url.host()]
        return super().loadResource(type_, url)

    def show_row(self, row: dict | None) -> None:
        """Show a loaded memory, or a hint when nothing is selected (GUI thread)."""
        self.row = row
        if row is None:
            self._images = {}
            self.setHtml("<p style='color:#666'>Select a memory to see every field and where it came from.</p>")
            return
        self._images = {e["id"]: e["_thumb"] for e in row.get("_evidence") or [] if e.get("_thumb") is not None}
        self.setHtml(render(row))
