"""Retrieval: hybrid search, evidence ranking and reranking, budgeted recall, token counting, snippets.

See docs/architecture.md for the package map.
"""
