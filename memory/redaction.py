"""Secrets out of text before anything is stored (principle 4): OCR text, transcripts, MCP evidence.

It lives in memory/ (not capture/) so that every writer of evidence, capture and the MCP server's
evidence_add alike, redacts with the same patterns; capture/redact.py re-exports it.

Each match becomes a typed marker such as `[REDACTED:aws_key]` and is counted; the spans in the
original text are returned too, so the screen source can black out the same words in a thumbnail.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from memory.config import REDACTION_KINDS

# Order matters: whole blocks and specific token shapes win over the generic label rule.
_PATTERNS: list[tuple[str, re.Pattern, int]] = [
    ("private_key", re.compile(
        r"-----BEGIN[A-Z ]*PRIVATE KEY-----.*?(?:-----END[A-Z ]*PRIVATE KEY-----|\Z)", re.S), 0),
    ("aws_key", re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA)[A-Z0-9]{16}(?![A-Z0-9])"), 0),
    ("aws_secret", re.compile(
        r"(?i)aws[\w ]{0,20}?(?:secret|sk)[\w ]{0,20}?[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"), 1),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"), 0),
    ("slack_token", re.compile(
        r"\bxox[abposr]-[A-Za-z0-9-]{10,}|https://hooks\.slack\.com/services/[A-Za-z0-9/]+"), 0),
    ("stripe_key", re.compile(r"\b(?:sk|rk|pk|whsec)_(?:live|test)_[A-Za-z0-9]{16,}"), 0),
    ("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-|ant-)?[A-Za-z0-9_-]{20,}"), 0),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), 0),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"), 0),
    ("gitlab_token", re.compile(r"\bgl(?:pat|dt|rt|ptt|cbt|imt)-[A-Za-z0-9_-]{20,}"), 0),
    ("npm_token", re.compile(r"\bnpm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"), 0),
    ("huggingface_token", re.compile(r"\bhf_[A-Za-z0-9]{30,}(?![A-Za-z0-9])"), 0),
    ("sendgrid_key", re.compile(r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"), 0),
    ("azure_key", re.compile(r"(?i)\b(?:AccountKey|SharedAccessKey|sig)=([A-Za-z0-9+/%]{20,}=*)"), 1),
    # user:password@ in any URL (a database DSN, a git remote): the password goes, the rest stays readable.
    ("url_credentials", re.compile(r"\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@]{1,64}:([^\s@/]{3,})@"), 1),
    # (a digit in it: "Basic internationalization" is prose, a token has digits)
    ("bearer_token", re.compile(r"(?i)\b(?:Bearer|Basic)\s+((?=[A-Za-z._~+/-]*\d)[A-Za-z0-9._~+/-]{16,}=*)"), 1),
    ("card_number", re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d])"), 0),
    ("password", re.compile(
        r"(?i)\b(?:password|passwd|pwd|passphrase|passcode|pin|secret|api[ _-]?key|access[ _-]?token|token"
        r"|client[ _-]?secret|secret[ _-]?key|private[ _-]?key|auth[ _-]?token|refresh[ _-]?token)"
        r"[\"']?\s*[:=]\s*[\"']?([^\s\"',;]{3,})"), 1),
    # ...and as it is said or written in a sentence: "the wifi password is tulip-88".
    ("password", re.compile(r"(?i)\b(?:password|passphrase|passcode|pin code)\s+(?:is|was|=)\s+[\"']?([^\s\"',;]{4,})"),
     1),
]
assert {k for k, _, _ in _PATTERNS} == set(REDACTION_KINDS), "config.REDACTION_KINDS and _PATTERNS disagree"


@dataclass
class Redacted:
    """Redacted text, how many of each kind were removed, and where they were in the original."""

    text: str
    counts: dict[str, int] = field(default_factory=dict)
    spans: list[tuple[int, int, str]] = field(default_factory=list)  # (start, end, kind) in the input

    @property
    def total(self) -> int:
        """Number of redactions of every kind together."""
        return sum(self.counts.values())


def luhn_ok(digits: str) -> bool:
    """True if the digit string passes the Luhn checksum card numbers carry."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _valid(kind: str, value: str) -> bool:
    if kind == "card_number":
        digits = re.sub(r"\D", "", value)
        return 13 <= len(digits) <= 19 and len(set(digits)) > 1 and luhn_ok(digits)
    if kind == "password":
        return not value.startswith("[REDACTED")
    return True


class Redactor:
    """Finds secrets of the enabled kinds and replaces them with typed markers."""

    def __init__(self, kinds: Iterable[str] = REDACTION_KINDS, enabled: bool = True) -> None:
        wanted = set(kinds) if enabled else set()
        self.patterns = [(k, p, g) for k, p, g in _PATTERNS if k in wanted]

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """Non-overlapping (start, end, kind) spans of secrets; earlier kinds win overlaps."""
        taken: list[tuple[int, int, str]] = []
        for kind, pat, group in self.patterns:
            for m in pat.finditer(text):
                start, end = m.span(group)
                if start < 0 or not _valid(kind, m.group(group)):
                    continue
                if any(start < e and end > s for s, e, _ in taken):
                    continue
                taken.append((start, end, kind))
        return sorted(taken)

    def redact(self, text: str) -> Redacted:
        """The text with every secret replaced by `[REDACTED:kind]`, plus counts and original spans."""
        spans = self.spans(text)
        if not spans:
            return Redacted(text)
        out, pos = [], 0
        for start, end, kind in spans:
            out.append(text[pos:start])
            out.append(f"[REDACTED:{kind}]")
            pos = end
        out.append(text[pos:])
        return Redacted("".join(out), dict(Counter(k for _, _, k in spans)), spans)
