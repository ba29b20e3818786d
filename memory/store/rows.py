"""Conversions between Python rows and Arrow tables, and row → public dict."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from typing import Any, NotRequired, TypedDict

import numpy as np
import pyarrow as pa

from memory.errors import FIND_IDS, InputError

PREFIX = {"memory": "mem_", "evidence": "evd_", "vault": "vlt_"}


# Table rows as the store writes them (memory/store/builders.py) and reads them whole (Store.rows with
# MEMORY_COLS / EVIDENCE_COLS / VAULT_COLS): times are naive-UTC datetimes, details and meta JSON text.
class MemoryRow(TypedDict):
    id: str
    type: str
    scope: str
    title: str
    text: str
    details: str
    search_text: str
    status: str
    confidence: float
    salience: float
    provenance: list[str]
    supersedes: str | None
    superseded_by: str | None
    valid_from: datetime
    valid_to: datetime | None
    created_at: datetime
    updated_at: datetime
    origin: str
    user_edited: bool
    pinned: bool
    fingerprint: str
    vector: NotRequired[Any]


class EvidenceRow(TypedDict):
    id: str
    captured_at: datetime
    source: str
    app: str
    window: str
    speaker: str
    scope: str
    text: str
    redactions: int
    content_hash: str
    frame_path: str | None
    meta: str | None
    extracted_at: datetime | None
    search_text: NotRequired[str]
    run_id: NotRequired[str | None]
    run_pos: NotRequired[int | None]
    vector: NotRequired[Any]


class VaultRow(TypedDict):
    id: str
    label: str
    value_enc: str
    scope: str
    provenance: list[str]
    created_at: datetime
    updated_at: datetime
    origin: str
    fingerprint: str


def new_id(kind: str) -> str:
    """A fresh id whose prefix tells which table it lives in."""
    return PREFIX[kind] + uuid.uuid4().hex[:24]


def kind_of(id_: str) -> str:
    """Which table an id belongs to, from its prefix."""
    for kind, prefix in PREFIX.items():
        if isinstance(id_, str) and id_.startswith(prefix) and len(id_) > len(prefix):
            return kind
    raise InputError(f"unknown id {id_!r}: ids start with mem_, evd_ or vlt_", hint=FIND_IDS)


def to_arrow(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """Build an Arrow table; vectors go in as one flat float32 buffer (much faster than lists)."""
    cols = {}
    for field in schema:
        values = [r.get(field.name) for r in rows]
        if pa.types.is_fixed_size_list(field.type):
            flat = np.asarray(values, dtype=np.float32).reshape(-1)
            cols[field.name] = pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float32()), field.type.list_size)
        else:
            cols[field.name] = pa.array(values, type=field.type)
    return pa.Table.from_pydict(cols, schema=schema)


def parse_time(value: str | datetime | None, what: str = "time") -> datetime | None:
    """Parse an ISO time into naive UTC; a time without a zone is taken as local time."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        dt = value
    else:
        text = str(value).strip().replace("Z", "+00:00")
        try:
            dt = datetime.fromisoformat(text)
        except ValueError:
            raise InputError(f"bad {what} {value!r}: use ISO 8601, e.g. 2024-05-08T13:56:00 or 2024-05-08") from None
    if dt.tzinfo is None:
        dt = dt.astimezone()  # local wall-clock time
    return dt.astimezone(timezone.utc).replace(tzinfo=None)


def iso(dt: datetime | None) -> str | None:
    """Naive-UTC datetime → ISO 8601 with a Z."""
    if dt is None:
        return None
    return dt.replace(microsecond=dt.microsecond).isoformat(timespec="seconds") + "Z"


def public_memory(row: dict[str, Any]) -> dict[str, Any]:
    """A memory row as callers see it: no vector, no index text, details parsed, times in ISO."""
    out = {k: v for k, v in row.items() if k not in ("vector", "search_text") and not k.startswith("_")}
    out["details"] = json.loads(row["details"]) if row.get("details") else {}
    for k in ("valid_from", "valid_to", "created_at", "updated_at"):
        out[k] = iso(row.get(k))
    for k in ("confidence", "salience"):
        if out.get(k) is not None:
            out[k] = round(float(out[k]), 4)
    out["provenance"] = list(row.get("provenance") or [])
    return out


def public_evidence(row: dict[str, Any]) -> dict[str, Any]:
    """An evidence row as callers see it (no vector, no index text)."""
    out = {k: v for k, v in row.items() if k not in ("vector", "search_text") and not k.startswith("_")}
    out["meta"] = json.loads(row["meta"]) if row.get("meta") else {}
    for k in ("captured_at", "extracted_at"):
        out[k] = iso(row.get(k))
    return out


def public_vault(row: dict[str, Any]) -> dict[str, Any]:
    """A vault entry without its value; reading the value is a separate, explicit call."""
    out = {k: v for k, v in row.items() if k != "value_enc" and not k.startswith("_")}
    out["type"] = "vault"
    out["text"] = row["label"]
    out["provenance"] = list(row.get("provenance") or [])
    for k in ("created_at", "updated_at"):
        out[k] = iso(row.get(k))
    return out


def jsonable(value: Any) -> Any:
    """Make a value JSON-safe (datetimes to ISO)."""
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value

