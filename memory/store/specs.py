"""What a caller hands the store to create a row: MemorySpec (memories and vault entries), EvidenceSpec."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass
class MemorySpec:
    """What it takes to create a memory; everything but text and type has a default."""

    text: str | None
    type: str = "semantic"
    scope: str | None = None
    title: str | None = None
    details: dict[str, Any] | None = None
    status: str = "active"
    confidence: float = 1.0
    salience: float = 0.5
    provenance: list[str] = field(default_factory=list)
    origin: str = "person"
    pinned: bool = False
    user_edited: bool = False
    valid_from: datetime | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    valid_to: datetime | None = None
    created_at: datetime | None = None
    id: str | None = None
    value: str | None = None  # vault only: the secret


@dataclass
class EvidenceSpec:
    """One captured unit of evidence (text already redacted by capture)."""

    text: str
    source: str = "manual"
    app: str = ""
    window: str = ""
    speaker: str = ""
    scope: str | None = None
    captured_at: datetime | None = None
    redactions: int = 0
    frame_path: str | None = None
    meta: dict[str, Any] | None = None
    id: str | None = None
