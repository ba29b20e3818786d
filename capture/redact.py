"""Secrets out of OCR text and transcripts before anything is stored (principle 4).

The patterns and the Redactor live in memory/redaction.py, so that evidence written over MCP is redacted
exactly like captured text; this module keeps capture's import path.
"""

from __future__ import annotations

from memory.redaction import _PATTERNS, Redacted, Redactor, luhn_ok

__all__ = ["_PATTERNS", "Redacted", "Redactor", "luhn_ok"]
