"""Specs → validated table rows, before embedding: what Store.add_* write and what an import replays."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from memory.errors import Hint, InputError
from memory.scopes import validate_scope
from memory.store.fingerprint import content_hash, fingerprint
from memory.store.rows import EvidenceRow, MemoryRow, VaultRow, new_id
from memory.store.specs import EvidenceSpec, MemorySpec
from memory.store.vault_crypto import VaultCipher
from memory.types import (
    EVIDENCE_SOURCES,
    MAX_EVIDENCE_CHARS,
    MAX_LABEL_CHARS,
    MAX_MEMORY_CHARS,
    TEXT_FIELD,
    MemoryType,
    Status,
    build_details,
    check_text,
    parse_status,
    parse_type,
)


def memory_row(spec: MemorySpec, now: datetime, default_scope: str) -> MemoryRow:
    """A memories-table row for spec (no vector yet); InputError names what is wrong with the spec."""
    mtype = parse_type(spec.type)
    details = build_details(mtype, spec.text, spec.details)
    text = check_text(spec.text if spec.text is not None else details.summary(), MAX_MEMORY_CHARS)
    status = parse_status(spec.status)
    if status == Status.DELETED:
        raise InputError("status 'deleted' is reached only by deleting the memory, which erases it",
                         hint=Hint(cli="`mirador delete ID` erases it", mcp="call memory_forget to erase it"))
    for name, v in (("confidence", spec.confidence), ("salience", spec.salience)):
        if not 0.0 <= float(v) <= 1.0:
            raise InputError(f"{name} must be between 0 and 1, got {v}")
    title = (spec.title or title_from(text)).strip()
    detail_json = details.model_dump(mode="json", exclude_none=True)
    search_text = " ".join([title, text] + _detail_words(detail_json, text))
    return {
        "id": spec.id or new_id("memory"),
        "type": mtype.value,
        "scope": validate_scope(spec.scope or default_scope),
        "title": title[:200],
        "text": text,
        "details": json.dumps(detail_json, ensure_ascii=False, sort_keys=True),
        "search_text": search_text,
        "status": status.value,
        "confidence": float(spec.confidence),
        "salience": float(spec.salience),
        "provenance": list(dict.fromkeys(spec.provenance or [])),
        "supersedes": spec.supersedes,
        "superseded_by": spec.superseded_by,
        "valid_from": spec.valid_from or spec.created_at or now,
        "valid_to": spec.valid_to,
        "created_at": spec.created_at or now,
        "updated_at": now,
        "origin": spec.origin,
        "user_edited": bool(spec.user_edited),
        "pinned": bool(spec.pinned),
        "fingerprint": fingerprint(text),
    }


def vault_row(spec: MemorySpec, now: datetime, default_scope: str, cipher: VaultCipher) -> VaultRow:
    """A vault-table row for spec, its value encrypted with cipher."""
    label = (spec.details or {}).get("label") or spec.title or spec.text
    label = check_text(label or "", MAX_LABEL_CHARS, "vault label")
    if not spec.value:
        raise InputError("a vault entry needs a secret value: pass it with --value-stdin (or value= in code)")
    check_text(spec.value, MAX_MEMORY_CHARS, "vault value")
    return {
        "id": spec.id or new_id("vault"),
        "label": label.strip(),
        "value_enc": cipher.encrypt(spec.value),
        "scope": validate_scope(spec.scope or default_scope),
        "provenance": list(spec.provenance or []),
        "created_at": spec.created_at or now,
        "updated_at": now,
        "origin": spec.origin,
        "fingerprint": fingerprint(label),
    }


def evidence_row(spec: EvidenceSpec, now: datetime, default_scope: str) -> EvidenceRow:
    """An evidence-table row for spec (no index text, run or vector yet)."""
    text = check_text(spec.text, MAX_EVIDENCE_CHARS, "evidence text")
    if spec.source not in EVIDENCE_SOURCES:
        raise InputError(f"unknown evidence source {spec.source!r}: use one of {', '.join(EVIDENCE_SOURCES)}")
    return {
        "id": spec.id or new_id("evidence"),
        "captured_at": spec.captured_at or now,
        "source": spec.source,
        "app": spec.app or "",
        "window": spec.window or "",
        "speaker": spec.speaker or "",
        "scope": validate_scope(spec.scope or default_scope),
        "text": text,
        "redactions": int(spec.redactions),
        "content_hash": content_hash(text),
        "frame_path": spec.frame_path,
        "meta": json.dumps(spec.meta, ensure_ascii=False) if spec.meta else None,
        "extracted_at": None,
    }


def main_field(mtype: MemoryType) -> str:
    """The details field that holds a memory type's main text."""
    return TEXT_FIELD[mtype]


def title_from(text: str) -> str:
    """A title for a memory that was given none: its first line, cut to 80 characters."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 80 else line[:77].rstrip() + "..."


def _detail_words(details: dict[str, Any], text: str) -> list[str]:
    words: list[str] = []
    for v in details.values():
        if isinstance(v, list):
            words.extend(str(x) for x in v if str(x) not in text)
        elif isinstance(v, str) and v not in text:
            words.append(v)
    return words
