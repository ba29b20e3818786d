"""Memory types, their typed fields, and the status lifecycle."""

from __future__ import annotations

from datetime import datetime, timezone
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memory.errors import InputError

MAX_MEMORY_CHARS = 10_000  # a memory is a distilled statement; longer input belongs in evidence
MAX_EVIDENCE_CHARS = 100_000  # one screen of OCR text or a long transcript fits comfortably
MAX_LABEL_CHARS = 200


def utcnow() -> datetime:
    """Naive UTC now, the form every timestamp column (and every time Mirador compares) holds."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


class MemoryType(StrEnum):
    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"
    RESOURCE = "resource"
    CORE = "core"
    VAULT = "vault"


class Status(StrEnum):
    CANDIDATE = "candidate"
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    REJECTED = "rejected"
    DELETED = "deleted"


# Which status changes are allowed; `deleted` is reached only through erasure, never set directly.
TRANSITIONS: dict[Status, set[Status]] = {
    Status.CANDIDATE: {Status.ACTIVE, Status.REJECTED, Status.SUPERSEDED},
    Status.ACTIVE: {Status.SUPERSEDED, Status.REJECTED, Status.CANDIDATE},
    Status.SUPERSEDED: {Status.ACTIVE},
    Status.REJECTED: {Status.CANDIDATE, Status.ACTIVE},
    Status.DELETED: set(),
}

VISIBLE_STATUSES = (Status.CANDIDATE, Status.ACTIVE)

EVIDENCE_SOURCES = ("screen", "audio", "manual", "import", "mcp")


class _Details(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def summary(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError


class Episodic(_Details):
    event: str
    when: datetime | None = None
    who: list[str] = Field(default_factory=list)
    where: str | None = None

    def summary(self) -> str:
        return self.event


class Semantic(_Details):
    subject: str | None = None
    fact: str

    def summary(self) -> str:
        return self.fact


class Procedural(_Details):
    goal: str
    steps: list[str] = Field(default_factory=list)

    def summary(self) -> str:
        if not self.steps:
            return self.goal
        return self.goal + ": " + "; ".join(self.steps)


class Resource(_Details):
    title: str
    uri: str | None = None
    path: str | None = None
    kind: str | None = None

    def summary(self) -> str:
        loc = self.uri or self.path
        return f"{self.title} ({loc})" if loc else self.title


class Core(_Details):
    block: str = Field("user", description="which profile block: user, persona, preferences, ...")
    content: str

    @field_validator("block")
    @classmethod
    def _block(cls, v: str) -> str:
        v = v.strip().lower()
        if not v or len(v) > 40:
            raise ValueError("block must be a short name such as 'user' or 'persona'")
        return v

    def summary(self) -> str:
        return self.content


class Vault(_Details):
    label: str

    def summary(self) -> str:
        return self.label


DETAILS: dict[MemoryType, type[_Details]] = {
    MemoryType.EPISODIC: Episodic,
    MemoryType.SEMANTIC: Semantic,
    MemoryType.PROCEDURAL: Procedural,
    MemoryType.RESOURCE: Resource,
    MemoryType.CORE: Core,
    MemoryType.VAULT: Vault,
}

# The field a bare text fills when a memory is added with just a sentence.
TEXT_FIELD: dict[MemoryType, str] = {
    MemoryType.EPISODIC: "event",
    MemoryType.SEMANTIC: "fact",
    MemoryType.PROCEDURAL: "goal",
    MemoryType.RESOURCE: "title",
    MemoryType.CORE: "content",
    MemoryType.VAULT: "label",
}


def parse_type(value: str) -> MemoryType:
    """Parse a memory type name, naming the valid ones on error."""
    try:
        return MemoryType(str(value).strip().lower())
    except ValueError:
        raise InputError(
            f"unknown memory type {value!r}: use one of {', '.join(t.value for t in MemoryType)}"
        ) from None


def parse_status(value: str) -> Status:
    """Parse a status name, naming the valid ones on error."""
    try:
        return Status(str(value).strip().lower())
    except ValueError:
        raise InputError(f"unknown status {value!r}: use one of {', '.join(s.value for s in Status)}") from None


def build_details(mtype: MemoryType, text: str | None, details: dict[str, Any] | None) -> _Details:
    """Validate type-specific fields; a bare text fills the type's main field."""
    data = dict(details or {})
    if text is not None and not data.get(TEXT_FIELD[mtype]):
        data[TEXT_FIELD[mtype]] = text
    try:
        return DETAILS[mtype].model_validate(data)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'details'}: {err['msg']}" for err in e.errors()
        )
        fields = ", ".join(DETAILS[mtype].model_fields)
        raise InputError(f"invalid {mtype.value} fields ({problems}); {mtype.value} takes: {fields}") from None


def check_text(text: str, limit: int, what: str = "text") -> str:
    """Reject empty or oversized text with a message that states the limit."""
    if text is None or not str(text).strip():
        raise InputError(f"empty {what}: give some words to store")
    if len(text) > limit:
        raise InputError(f"{what} is {len(text):,} characters; the limit is {limit:,} — shorten it or split it")
    return text


def parse_details(raw: str) -> dict[str, Any]:
    """Parse type-specific fields given as JSON text; must be an object."""
    import json

    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError as e:
        raise InputError(f"not valid JSON ({e.msg}); example: {{\"subject\": \"ledger\"}}") from None
    if not isinstance(value, dict):
        raise InputError("must be a JSON object, e.g. {\"subject\": \"ledger\"}")
    return value
