"""Consolidation: extraction of memories from evidence, the write policy, dream passes and the scheduler.

See docs/architecture.md for the package map.
"""
