"""Claude (claude.ai) data export `conversations.json` (or the folder / .zip it came in).

Shape (confirmed against public descriptions of the export): a JSON array of conversations
{uuid, name, created_at, updated_at, chat_messages: [{uuid, sender: human|assistant, text,
content: [{type: text|tool_use|tool_result|thinking, text}], created_at, attachments, files}]}.
Some descriptions show the array wrapped as {"conversations": [...]}; both are read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memory.integrations.importers.base import Item, Skip, from_iso, stable_key
from memory.integrations.importers.jsonstream import ConversationExport

SENDERS = {"human": "person", "user": "person", "assistant": "assistant"}


class ClaudeImporter(ConversationExport):
    """Messages of a Claude export → items; tool blocks, thinking and empty messages are skipped."""

    name = "claude"
    app = "claude"
    assistant = "Claude"

    def _conversation(self, index: int, conv: Any) -> Iterator[Item | Skip]:
        where = f"conversation #{index + 1}"
        if not isinstance(conv, dict) or not isinstance(conv.get("chat_messages"), list):
            yield Skip("not a Claude conversation (no chat_messages)", where)
            return
        title = str(conv.get("name") or conv.get("title") or "Untitled")
        conv_id = str(conv.get("uuid") or stable_key(title, conv.get("created_at")))
        where = f"{where} '{title}'"
        for pos, msg in enumerate(conv["chat_messages"]):
            if not isinstance(msg, dict):
                yield Skip("not a message object", f"{where} message #{pos + 1}")
                continue
            yield self._message(msg, pos, conv, conv_id, title, where)

    def _message(self, msg: dict, pos: int, conv: dict, conv_id: str, title: str, where: str) -> Item | Skip:
        msg_id = str(msg.get("uuid") or f"#{pos + 1}")
        where = f"{where} message {msg_id}"
        sender = str(msg.get("sender") or "unknown")
        who = SENDERS.get(sender)
        if who is None:
            return Skip(f"{sender} message" if sender == "system" else f"message from unknown sender '{sender}'", where)
        text, blocks = _text(msg)
        if not text:
            other = sorted({str(b.get("type")) for b in blocks if isinstance(b, dict)} - {"text"})
            return Skip(f"no text (only {', '.join(other)})" if other else "empty message", where)
        return Item(
            key=stable_key("claude", conv_id, msg_id), text=text,
            speaker=self.options.me if who == "person" else self.assistant,
            captured_at=from_iso(msg.get("created_at")) or from_iso(conv.get("created_at")),
            window=title, where=where,
            meta={"format": "claude", "conversation_id": conv_id, "conversation_title": title,
                  "message_id": msg_id, "role": sender,
                  **({"attachments": [a.get("file_name") for a in msg["attachments"] if isinstance(a, dict)]}
                     if msg.get("attachments") else {})},
        )


def _text(msg: dict) -> tuple[str, list]:
    """The message's text blocks joined (tool use, tool results and thinking left out), else `text`."""
    content = msg.get("content")
    blocks: list = content if isinstance(content, list) else []
    parts = [b["text"] for b in blocks
             if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str) and b["text"].strip()]
    if parts:
        return "\n\n".join(parts).strip(), blocks
    if not blocks and isinstance(msg.get("text"), str):
        return msg["text"].strip(), blocks
    return "", blocks
