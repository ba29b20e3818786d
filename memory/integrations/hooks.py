"""Claude Code hooks at run time: put a small recall into each prompt, reinforce what the reply used.

`mirador hook user-prompt-submit` gets Claude Code's hook JSON on stdin (session_id, transcript_path,
cwd, hook_event_name, prompt), runs a recall for the prompt within `[hooks] budget_tokens`, only
over `[hooks] allowed_scopes` (the scopes the person allows to leave the machine inside a prompt;
none by default, so nothing is sent until they choose), memories only unless `include_evidence`,
and prints {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": ...}}.
It remembers the injected memory ids for the session in `hooks/sessions/<session>.json` in the
data dir — ids only, never memory or prompt text, so `mirador delete` still erases everything.

`mirador hook stop` gets {session_id, transcript_path, stop_hook_active, [last_assistant_message]},
reads the last prompt and the reply (the assistant text after it) from the JSONL transcript, reinforces the
injected memories the reply used (see `used`), and clears the session's state.

Both must never break a prompt: every error is logged to `hooks/hooks.log` and the hook exits 0
with nothing on stdout (desktop/cli/hooks.py also enforces `timeout_seconds`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from memory.store.audit import utcnow

if TYPE_CHECKING:
    from memory.config import Config, HooksConfig

log = logging.getLogger(__name__)

ACTOR = "hook:claude-code"
STATE_DIR = "hooks"
MAX_STDIN = 2_000_000
MAX_QUERY = 2_000
TRANSCRIPT_TAIL = 4_000_000  # bytes read from the end of a transcript: the last turn is at the end
STALE_SECONDS = 2 * 86400  # a session that never reached Stop leaves its state this long at most
HEADER = ("Possibly relevant memories from Mirador, the person's local memory "
          "([id] type date · source, then the memory):")

_TOKEN = re.compile(r"[^\W_](?:[\w.\-/:]*[^\W_])?", re.UNICODE)
_IDENT_CHARS = set("0123456789-_./:")
# Words of four letters or more that say nothing about which memory a reply drew on.
_STOP = frozenset("""
about above after again also another because been before being below between both cannot could does doing
done down during each either every from further have having here here's hers herself himself into itself just
like made make many might more most much must myself need only other ought ours ourselves over same shall
should some such than that that's their theirs them themselves then there these they this those through
under until upon used uses using very want were what when where which while will with within without would
your yours yourself yourselves sure yes okay thanks please know think thing things well good
""".split())


# ---- input, state ---------------------------------------------------------------------------------


def read_payload(stream: IO[Any]) -> dict:
    """The hook's JSON input; {} if it is missing, too large or not a JSON object."""
    raw = stream.read(MAX_STDIN + 1)
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    if not raw or len(raw) > MAX_STDIN:
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        log.warning("hook input is not JSON; ignoring it")
        return {}
    return data if isinstance(data, dict) else {}


def _state_dir(home: Path) -> Path:
    return Path(home) / STATE_DIR / "sessions"


def session_file(home: Path, session_id: str) -> Path:
    """Where a session's injected ids live (the id is sanitised: it becomes a file name)."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", str(session_id))[:128] or "_"
    return _state_dir(home) / f"{safe}.json"


def load_state(home: Path, session_id: str) -> dict:
    """The session's state, {} if there is none or it is unreadable."""
    p = session_file(home, session_id)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_atomic(path: Path, text: str) -> None:
    from memory.store.atomic import write_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text, mode=0o600)  # session state: only its owner may read it


def remember(home: Path, session_id: str, ids: list[str]) -> None:
    """Add injected ids to the session's state.

    Only ids: nothing of the prompt is kept. (Hashes of its words were, once; unkeyed, they let anyone
    holding the file confirm a guessed word.) The Stop hook reads the prompt back from the transcript.
    """
    state = load_state(home, session_id)
    injected = dict(state.get("injected") or {})
    now = utcnow().isoformat(timespec="seconds") + "Z"
    for i in ids:
        injected.setdefault(i, now)
    _write_atomic(session_file(home, session_id), json.dumps(
        {"session_id": str(session_id), "injected": injected, "updated_at": now}))
    _drop_stale(home)


def clear_state(home: Path, session_id: str) -> None:
    """Forget the session's injected ids."""
    session_file(home, session_id).unlink(missing_ok=True)


def _drop_stale(home: Path) -> None:
    cutoff = time.time() - STALE_SECONDS
    for p in _state_dir(home).glob("*.json"):
        try:
            if p.stat().st_mtime < cutoff:
                p.unlink()
        except OSError:
            pass


# ---- "did the reply use this memory?" ---------------------------------------------------------------


def tokens(text: str) -> list[str]:
    """Lower-case words and identifiers (pg-staging-3, v1.2.3, src/app.py keep their inner punctuation)."""
    return _TOKEN.findall((text or "").lower())


def content_words(text: str) -> set[str]:
    """Tokens of four characters or more that are not common function words."""
    return {t for t in tokens(text) if len(t) >= 4 and t not in _STOP}


def _identifier(token: str) -> bool:
    return any(c in _IDENT_CHARS for c in token)


def used(memory_id: str, memory_text: str, reply: str, prompt: str, cfg: HooksConfig) -> str | None:
    """Why the reply counts as having used the memory, or None. Deterministic, in this order:

    1. the reply names the memory id;
    2. the reply contains one of the memory's identifiers (a token of 4+ characters with a digit or
       - _ . / : inside, e.g. a host, version, path or ticket);
    3. the reply shares at least `use_min_words` of the memory's content words and at least
       `use_min_overlap` of them.
    Words of the prompt itself never count (a reply echoes its question whether or not it used
    the memory): only what the memory added can show that it was used.
    """
    if memory_id in reply:
        return "id"
    mem = content_words(memory_text) - content_words(prompt)
    if not mem:
        return None
    said = set(tokens(reply))
    if any(_identifier(w) and w in said for w in mem):
        return "identifier"
    shared = mem & said
    if len(shared) >= cfg.use_min_words and len(shared) >= cfg.use_min_overlap * len(mem):
        return "words"
    return None


# ---- transcript -------------------------------------------------------------------------------------


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _is_prompt(entry: dict) -> bool:
    msg = entry.get("message") or {}
    content = msg.get("content")
    if isinstance(content, str):
        return True
    # A user entry made only of tool results is the tool's answer inside the same turn, not a prompt.
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "text" for b in content)


def last_reply(transcript_path: str | None) -> str:
    """The assistant's text since the last prompt in a Claude Code JSONL transcript ('' if unreadable)."""
    return last_turn(transcript_path)[1]


def last_turn(transcript_path: str | None) -> tuple[str, str]:
    """(the last prompt, the assistant's text since it) in a Claude Code JSONL transcript ('' if unreadable)."""
    if not transcript_path:
        return "", ""
    p = Path(transcript_path).expanduser()
    try:
        with p.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(size - TRANSCRIPT_TAIL, 0))
            lines = fh.read().decode("utf-8", errors="replace").splitlines()
    except OSError as e:
        log.warning("cannot read transcript %s: %s", p, e)
        return "", ""
    prompt, parts = "", list[str]()
    for line in lines:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue  # the first line of a tail read is usually cut
        if not isinstance(entry, dict):
            continue
        kind = entry.get("type") or (entry.get("message") or {}).get("role")
        if kind == "user" and _is_prompt(entry):
            prompt, parts = _text_of((entry.get("message") or {}).get("content")), []
        elif kind == "assistant":
            parts.append(_text_of((entry.get("message") or {}).get("content")))
    return prompt, "\n".join(x for x in parts if x)


# ---- the two hooks ------------------------------------------------------------------------------------


def user_prompt_submit(home: Path, payload: dict, now: datetime | None = None) -> str | None:
    """The JSON Claude Code should read for this prompt, or None to add nothing."""
    from memory.config import load_config

    cfg = load_config(home)
    hc = cfg.hooks
    prompt = str(payload.get("prompt") or "").strip()
    if not hc.allowed_scopes:
        log.info("no [hooks] allowed_scopes: nothing may leave the machine in a prompt")
        return None
    if len(prompt) < hc.min_prompt_chars:
        return None
    text, ids, via = _recall_for(home, cfg, prompt[:MAX_QUERY], now)
    if not text:
        return None
    sid = payload.get("session_id")
    if sid and ids:
        remember(home, str(sid), ids)
    log.info("injected %d memories via %s for session %s", len(ids), via, sid)
    return json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                              "additionalContext": HEADER + "\n\n" + text}}, ensure_ascii=False)


def _recall_for(home: Path, cfg: Config, prompt: str, now: datetime | None) -> tuple[str, list[str], str]:
    """(recall text, memory ids, "server" | "in-process"): the running app's warm recall when it answers."""
    from memory.integrations.hooks_http import remote_recall

    hc = cfg.hooks
    # A fixed clock (tests, replays) can only be honoured in-process.
    remote = remote_recall(home, cfg, prompt, hc.timeout_seconds) if now is None else None
    if remote is not None:  # the server already counted appearances, if configured, as its token's client
        ids = [i["id"] for i in remote.get("items") or [] if i.get("kind") == "memory"]
        return remote.get("text") or "", ids, "server"
    from memory.graph.reinforcement import note_appearances
    from memory.retrieval.recall import recall
    from memory.store.core import Store

    store = Store(home, config=cfg)
    res = recall(store, prompt, hc.budget_tokens, scopes=list(hc.allowed_scopes),
                 include_evidence=hc.include_evidence, now=now)
    ids = [i.id for i in res.items if i.kind == "memory"]
    note_appearances(store, ids, actor=ACTOR, scopes=list(hc.allowed_scopes), now=now)
    return res.text, ids, "in-process"


def stop(home: Path, payload: dict, now: datetime | None = None) -> dict:
    """Reinforce the injected memories the reply used; returns {"used": {id: why}, "unused": [ids]}."""
    sid = payload.get("session_id")
    if not sid:
        return {"used": {}, "unused": []}
    state = load_state(home, str(sid))
    injected = list((state.get("injected") or {}).keys())
    if not injected:
        return {"used": {}, "unused": []}
    prompt, said = last_turn(payload.get("transcript_path"))
    reply = str(payload.get("last_assistant_message") or "") or said
    try:
        return _reinforce_used(home, injected, reply, prompt, now)
    finally:
        clear_state(home, str(sid))  # a turn is judged once, whatever happened


def _reinforce_used(home: Path, injected: list[str], reply: str, prompt: str, now: datetime | None) -> dict:
    from memory.config import load_config
    from memory.graph.reinforcement import reinforce
    from memory.store.core import Store

    if not reply.strip():
        return {"used": {}, "unused": injected}
    cfg = load_config(home)
    scopes = list(cfg.hooks.allowed_scopes)
    store = Store(home, config=cfg)
    rows = store.get_many("memory", injected, ["id", "title", "text"], scopes=scopes).values()
    why = {r["id"]: used(r["id"], r["text"], reply, prompt, cfg.hooks) for r in rows}
    hit = {k: v for k, v in why.items() if v}
    if hit:
        reinforce(store, list(hit), actor=ACTOR, scopes=scopes, now=now)
    log.info("stop: %d of %d injected memories used", len(hit), len(injected))
    return {"used": hit, "unused": [i for i in injected if i not in hit]}
