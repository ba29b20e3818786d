"""The detail pane: every field of a memory and its provenance (evidence, thumbnails, transcripts)."""

from __future__ import annotations

import html
import json

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QTextBrowser

from desktop.ui.browser_data import memory_detail
from desktop.ui.qt_models import local_time

THUMB = 220
FIELDS = ["id", "type", "status", "scope", "title", "confidence", "salience", "origin", "user_edited", "pinned",
          "created_at", "updated_at", "valid_from", "valid_to", "supersedes", "superseded_by", "fingerprint"]


def load_detail(store, memory_id: str) -> dict:
    """Worker: the memory, its evidence rows, and a thumbnail QImage per frame that still exists."""
    from memory.graph.relations import related

    row = memory_detail(store, memory_id)
    # the person sees every status; vault entries take no relations (they link memories only)
    row["_relations"] = [] if row.get("type") == "vault" else related(store, memory_id, statuses=[])
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


def render(row: dict, revealed: str | None = None, removable: bool = False) -> str:
    """HTML for one memory or vault entry; thumbnails are referenced as thumb://<evidence id> resources.

    A vault entry's value appears only when `revealed` is given (after the person pressed Reveal).
    """
    h = [f"<h3>{html.escape(row.get('title') or '')}</h3>"]
    if row.get("type") == "vault":
        value = (f"<code style='white-space:pre-wrap'>{html.escape(revealed)}</code>" if revealed is not None
                 else "<i style='color:#666'>hidden — press Reveal to decrypt and show it "
                      "(each reveal is audited)</i>")
        h.append(f"<p><b>Secret value:</b> {value}</p>")
    else:
        h.append(f"<p style='white-space:pre-wrap'>{html.escape(row.get('text') or '')}</p>")
    h.append("<table cellspacing=0 cellpadding=2>")
    for k in FIELDS:
        if k in row:
            h.append(f"<tr><td style='color:#666;padding-right:10px'>{k}</td><td>{_value(k, row[k])}</td></tr>")
    if row.get("type") == "vault":
        h.append(f"<tr><td style='color:#666'>label</td><td>{_value('label', row.get('label'))}</td></tr>")
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
    if row.get("type") != "vault":
        h.extend(_relations(row.get("_relations") or [], removable))
    return "".join(h)


def _relations(edges: list[dict], removable: bool) -> list[str]:
    """The relations section: 'RELATION → other' (this memory is src) or '← RELATION other', with "remove"
    links only where a view can run the removal (the browser; not the review panes)."""
    h = [f"<h4>Relations — {len(edges)}</h4>"]
    if not edges:
        h.append("<p style='color:#666'>None. Add one with <code>mirador relate SRC REL DST</code>.</p>")
    for e in edges:
        o = e["other"]
        arrow = f"{e['relation']} →" if e["direction"] == "out" else f"← {e['relation']}"
        remove = f" <a href='unrelate:{html.escape(e['id'])}'>remove</a>" if removable else ""
        h.append(f"<p><b>{html.escape(arrow)}</b> {html.escape(o.get('title') or o.get('text') or '')}"
                 f" <span style='color:#666'>{html.escape(o['type'] or '')} · {html.escape(o['status'] or '')}"
                 f" · {html.escape(e['origin'] or '')}</span>{remove}<br><code>{html.escape(o['id'])}</code></p>")
    return h


def remove_and_reload(store, edge_id: str, memory_id: str) -> dict:
    """Worker: remove one relation (as the person), then load the memory's detail again."""
    from memory.graph.relations import remove_relation

    remove_relation(store, edge_id, actor="person")
    return load_detail(store, memory_id)


class DetailView(QTextBrowser):
    """A read-only rich-text pane that serves thumb://<id> images from the loaded row.

    With jobs and a store it also removes relations: the "remove" link runs in a worker.
    """

    relation_removed = Signal(str)  # edge id, once the store no longer has it

    def __init__(self, parent=None, jobs=None, store=None) -> None:
        super().__init__(parent)
        self.jobs, self.store = jobs, store
        self.setOpenLinks(False)
        self.anchorClicked.connect(self._anchor)
        self._images: dict[str, QImage] = {}
        self.row: dict | None = None
        self.revealed: str | None = None  # a vault value, only after Reveal; dropped when the selection changes
        self.show_row(None)

    def loadResource(self, type_: int, url: QUrl):  # noqa: N802 - Qt override
        if url.scheme() == "thumb" and url.host() in self._images:
            return self._images[url.host()]
        return super().loadResource(type_, url)

    def _anchor(self, url: QUrl) -> None:
        if url.scheme() == "unrelate":
            self.remove_relation(url.path())

    def remove_relation(self, edge_id: str) -> None:
        """Remove one of the shown memory's relations off the GUI thread, then show the memory again."""
        if self.jobs is None or self.row is None:
            return
        memory_id = self.row["id"]

        def done(row: dict) -> None:
            if self.row is not None and self.row["id"] == memory_id:
                self.show_row(row)
            self.relation_removed.emit(edge_id)

        self.jobs.submit(remove_and_reload, self.store, edge_id, memory_id, on_done=done)

    def show_row(self, row: dict | None) -> None:
        """Show a loaded memory, or a hint when nothing is selected (GUI thread)."""
        self.row, self.revealed = row, None
        if row is None:
            self._images = {}
            self.setHtml("<p style='color:#666'>Select a memory to see every field and where it came from.</p>")
            return
        self._images = {e["id"]: e["_thumb"] for e in row.get("_evidence") or [] if e.get("_thumb") is not None}
        self.setHtml(render(row, removable=self.jobs is not None))

    def show_value(self, row_id: str, value: str) -> None:
        """Show a decrypted vault value for the entry on display (ignored if the selection moved on)."""
        if self.row is None or self.row["id"] != row_id:
            return
        self.revealed = value
        self.setHtml(render(self.row, value))
