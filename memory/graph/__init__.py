"""The memory graph: typed relations between memories, and reinforcement by use.

See docs/architecture.md for the package map.
"""
