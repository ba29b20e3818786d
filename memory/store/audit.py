"""Append-only audit log: who changed what, when (principle 6)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from memory.types import utcnow

__all__ = ["ACTORS_AUTOMATED", "audit_row", "diff", "utcnow"]

ACTORS_AUTOMATED = ("extractor", "dream")


def _dump(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, default=str, ensure_ascii=False, sort_keys=True)


def audit_row(
    actor: str,
    action: str,
    entity_kind: str,
    entity_id: str,
    scope: str,
    before: Any = None,
    after: Any = None,
) -> dict[str, Any]:
    """Build one audit row; before/after are stored as JSON."""
    return {
        "id": "aud_" + uuid.uuid4().hex[:24],
        "at": utcnow(),
        "actor": actor,
        "action": action,
        "entity_kind": entity_kind,
        "entity_id": entity_id,
        "scope": scope,
        "before": _dump(before),
        "after": _dump(after),
    }


def diff(before: dict[str, Any], after: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Only the fields that changed, as (before, after) dicts."""
    keys = [k for k in after if before.get(k) != after.get(k)]
    return {k: before.get(k) for k in keys}, {k: after.get(k) for k in keys}
