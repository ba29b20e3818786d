"""ChatGPT data export (`conversations.json`, or the folder / .zip it came in).

Shape (confirmed against several public descriptions of the export): a JSON array of conversations
{id|conversation_id, title, create_time, current_node, mapping: {node_id: {id, parent, children,
message: {id, author: {role}, create_time, content: {content_type, parts: [...]}, recipient, metadata}}}}.
The visible thread is the chain from `current_node` up its parents; edited or regenerated turns are
other branches, left out unless `all_branches` (they are counted as skipped).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memory.integrations.importers.base import Item, Skip, from_epoch, stable_key
from memory.integrations.importers.jsonstream import ConversationExport

TEXT_TYPES = ("text", "multimodal_text")


class ChatGPTImporter(ConversationExport):
    """Messages of a ChatGPT export → items; system, tool, hidden and empty messages are skipped."""

    name = "chatgpt"
    app = "chatgpt"
    assistant = "ChatGPT"

    def _conversation(self, index: int, conv: Any) -> Iterator[Item | Skip]:
        where = f"conversation #{index + 1}"
        if not isinstance(conv, dict) or not isinstance(conv.get("mapping"), dict):
            yield Skip("not a ChatGPT conversation (no mapping)", where)
            return
        mapping: dict = conv["mapping"]
        title = str(conv.get("title") or "Untitled")
        conv_id = str(conv.get("conversation_id") or conv.get("id") or stable_key(title, conv.get("create_time")))
        where = f"{where} '{title}'"
        order, off_branch = self._order(conv, mapping)
        for nid in off_branch:
            yield Skip("other branch (edited or regenerated turn)", f"{where} node {nid}")
        for nid in order:
            msg = (mapping.get(nid) or {}).get("message")
            if isinstance(msg, dict):  # the root placeholder node has no message: structure, not a skip
                yield self._message(msg, nid, conv, conv_id, title, where)

    def _order(self, conv: dict, mapping: dict) -> tuple[list[str], list[str]]:
        """(node ids to import in thread order, node ids with a message on other branches)."""
        def when(nid: str) -> float:
            msg = (mapping.get(nid) or {}).get("message") or {}
            t = msg.get("create_time") if isinstance(msg, dict) else None
            return float(t) if isinstance(t, int | float) else 0.0

        current = conv.get("current_node")
        if self.options.all_branches or current not in mapping:
            # No current_node (older exports): every node, oldest first.
            return sorted(mapping, key=when), []
        chain, seen, nid = [], set(), current
        while nid is not None and nid in mapping and nid not in seen:  # seen: a malformed cycle must not hang
            seen.add(nid)
            chain.append(nid)
            nid = (mapping.get(nid) or {}).get("parent")
        chain.reverse()
        off = [n for n in mapping if n not in seen and isinstance((mapping.get(n) or {}).get("message"), dict)]
        return chain, off

    def _message(self, msg: dict, nid: str, conv: dict, conv_id: str, title: str, where: str) -> Item | Skip:
        msg_id = str(msg.get("id") or nid)
        where = f"{where} message {msg_id}"
        role = str(((msg.get("author") or {}).get("role")) or "unknown")
        meta = msg.get("metadata") or {}
        if role in ("system", "tool"):
            return Skip(f"{role} message", where)
        if role not in ("user", "assistant"):
            return Skip(f"message from unknown role '{role}'", where)
        if isinstance(meta, dict) and meta.get("is_visually_hidden_from_conversation"):
            return Skip("hidden message", where)
        if role == "assistant" and msg.get("recipient") not in (None, "all"):
            return Skip("tool call", where)
        content = msg.get("content") or {}
        ctype = str(content.get("content_type") or "text")
        if ctype not in TEXT_TYPES:
            return Skip(f"non-text content ({ctype})", where)
        parts = content.get("parts") or []
        texts = [p if isinstance(p, str) else p.get("text") for p in parts
                 if isinstance(p, str) or (isinstance(p, dict) and isinstance(p.get("text"), str))]
        text = "\n".join(t for t in texts if t and t.strip()).strip()
        if not text:
            media = any(not isinstance(p, str) for p in parts)
            return Skip("only images or files" if media else "empty message", where)
        return Item(
            key=stable_key("chatgpt", conv_id, msg_id), text=text,
            speaker=self.options.me if role == "user" else self.assistant,
            captured_at=from_epoch(msg.get("create_time")) or from_epoch(conv.get("create_time")),
            window=title, where=where,
            meta={"format": "chatgpt", "conversation_id": conv_id, "conversation_title": title,
                  "message_id": msg_id, "role": role,
                  **({"model": meta["model_slug"]} if isinstance(meta, dict) and meta.get("model_slug") else {})},
        )
