"""Integrations with the world outside: Claude Code hooks, importers of chat and note history, JSONL export/import.

See docs/architecture.md for the package map.
"""
