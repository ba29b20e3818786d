"""Mirador's entries in Claude Code's settings JSON: install, uninstall, status.

Claude Code reads hooks from ~/.claude/settings.json (user), .claude/settings.json (project) or
.claude/settings.local.json:

    {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "...", "timeout": 15}]}],
               "Stop":             [{"hooks": [{"type": "command", "command": "...", "timeout": 15}]}]}}

Neither event takes a matcher, so Mirador's groups have none. Install first removes any earlier
Mirador entry (so installing twice leaves one copy), appends one group per event after whatever is
there (other hooks are never touched), backs the file up and writes it atomically. The first install
records in `hooks_installs.json` (data dir) the SHA-256 of the original bytes, the backup path and
the SHA-256 of what it wrote. Uninstall puts the original bytes back when the file is still exactly
what install wrote; if anything changed since, it removes only Mirador's entries.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shlex
import shutil
from copy import deepcopy
from pathlib import Path

from memory.errors import InputError
from memory.store.atomic import write_atomic
from memory.store.audit import utcnow

log = logging.getLogger(__name__)

EVENTS = {"UserPromptSubmit": "user-prompt-submit", "Stop": "stop"}
RECORD = "hooks_installs.json"
CLIENTS = ("claude-code",)
_OURS = re.compile(r"\bhook\s+(user-prompt-submit|stop)\b")


def settings_path(project: bool = False, cwd: Path | None = None, home: Path | None = None) -> Path:
    """Claude Code's user settings file, or the project's with project=True."""
    if project:
        return Path(cwd or Path.cwd()) / ".claude" / "settings.json"
    return Path(home or Path.home()) / ".claude" / "settings.json"


def hook_command(action: str, data_home: Path | None = None) -> str:
    """The shell command Claude Code runs for one of our hooks (with --home when not the default dir)."""
    from memory.mcp.clients import mirador_command

    args = mirador_command() + ["hook", action] + (["--home", str(data_home)] if data_home else [])
    return shlex.join(args)


def is_ours(hook: object) -> bool:
    """True for a hook entry Mirador wrote (a `mirador … hook user-prompt-submit|stop` command)."""
    if not isinstance(hook, dict) or hook.get("type") != "command":
        return False
    cmd = str(hook.get("command") or "")
    return bool(_OURS.search(cmd)) and ("mirador" in cmd.lower() or "desktop.cli.main" in cmd)


def _sha(data: bytes | None) -> str | None:
    return hashlib.sha256(data).hexdigest() if data is not None else None


def _parse(path: Path, raw: bytes | None) -> dict:
    if raw is None or not raw.strip():
        return {}
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path} is not valid JSON ({e}); fix it first — the file was not changed") from None
    if not isinstance(data, dict):
        raise InputError(f"{path} does not hold a JSON object; the file was not changed")
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict) or any(not isinstance(v, list) for v in hooks.values()):
        raise InputError(f"{path}: 'hooks' must map event names to lists; the file was not changed")
    return data


def _strip(data: dict) -> tuple[dict, int]:
    """A copy without Mirador's entries; containers emptied by the removal go too, others stay."""
    out = deepcopy(data)
    hooks = out.get("hooks")
    removed = 0
    if not isinstance(hooks, dict):
        return out, 0
    for event in list(hooks):
        groups = hooks[event]
        kept = []
        for g in groups:
            inner = g.get("hooks") if isinstance(g, dict) else None
            if not isinstance(inner, list):
                kept.append(g)
                continue
            mine = [h for h in inner if is_ours(h)]
            removed += len(mine)
            if mine and len(mine) == len(inner):
                continue  # a group that held only our hooks
            kept.append({**g, "hooks": [h for h in inner if not is_ours(h)]} if mine else g)
        if len(kept) != len(groups) and not kept:
            del hooks[event]
        else:
            hooks[event] = kept
    if removed and not hooks:
        del out["hooks"]
    return out, removed


def count_ours(data: dict) -> dict[str, int]:
    """Mirador hook entries per event in parsed settings."""
    out = {}
    for event, groups in (data.get("hooks") or {}).items():
        n = sum(1 for g in groups if isinstance(g, dict) for h in (g.get("hooks") or []) if is_ours(h))
        if n:
            out[event] = n
    return out


def _dump(data: dict) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _write_atomic(path: Path, data: bytes) -> None:
    if path.is_symlink():  # a dotfiles link stays a link: write through it to the file it points at
        path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600  # settings may hold env secrets
    write_atomic(path, data, mode=mode, fsync=True)


def _records(data_home: Path) -> dict:
    p = Path(data_home) / RECORD
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_records(data_home: Path, records: dict) -> None:
    _write_atomic(Path(data_home) / RECORD, json.dumps(records, indent=1, sort_keys=True).encode("utf-8"))


def _key(path: Path) -> str:
    return str(Path(path).expanduser().resolve())


def install(path: Path, data_home: Path, timeout: int = 15, home_arg: Path | None = None) -> dict:
    """Add (or refresh) Mirador's UserPromptSubmit and Stop hooks in a Claude Code settings file."""
    path = Path(path).expanduser()
    raw = path.read_bytes() if path.exists() else None
    data = _parse(path, raw)
    before = count_ours(data)
    new, _ = _strip(data)
    hooks = new.setdefault("hooks", {})
    for event, action in EVENTS.items():
        hooks.setdefault(event, []).append(
            {"hooks": [{"type": "command", "command": hook_command(action, home_arg), "timeout": int(timeout)}]})
    out = _dump(new)
    records = _records(data_home)
    rec = records.get(_key(path))
    if rec is None:
        rec = {"path": str(path), "existed": raw is not None, "original_sha256": _sha(raw), "backup": None,
               # Our hooks already in the file without a record: its bytes are not the person's original.
               "restorable": not before, "installed_at": utcnow().isoformat(timespec="seconds") + "Z"}
        if raw is not None:
            backup = path.with_name(f"{path.name}.mirador-backup-{utcnow().strftime('%Y%m%d%H%M%S')}")
            shutil.copy2(path, backup)
            rec["backup"] = str(backup)
    elif _sha(raw) != rec.get("installed_sha256"):
        rec["restorable"] = False  # someone edited the file since: restoring the original would lose that
    changed = out != raw
    if changed:
        _write_atomic(path, out)
    rec["installed_sha256"] = _sha(out)
    records[_key(path)] = rec
    _save_records(data_home, records)
    return {"path": str(path), "changed": changed, "replaced": before, "backup": rec["backup"],
            "events": count_ours(new)}


def uninstall(path: Path, data_home: Path) -> dict:
    """Remove Mirador's hooks: the original bytes back if nothing else changed, else only our entries."""
    path = Path(path).expanduser()
    raw = path.read_bytes() if path.exists() else None
    records = _records(data_home)
    rec = records.pop(_key(path), None)
    result = {"path": str(path), "mode": "not-installed", "removed": 0, "backup": rec and rec.get("backup")}
    if rec and rec.get("restorable") and raw is not None and _sha(raw) == rec.get("installed_sha256"):
        original = Path(rec["backup"]).read_bytes() if rec.get("backup") and Path(rec["backup"]).exists() else None
        if not rec.get("existed"):
            path.unlink()
            result.update(mode="restored", removed=sum(count_ours(_parse(path, raw)).values()))
        elif original is not None and _sha(original) == rec.get("original_sha256"):
            _write_atomic(path, original)
            result.update(mode="restored", removed=sum(count_ours(_parse(path, raw)).values()))
    if result["mode"] == "not-installed" and raw is not None:
        new, removed = _strip(_parse(path, raw))
        if removed:
            _write_atomic(path, _dump(new))
            result.update(mode="removed-entries", removed=removed)
    _save_records(data_home, records)
    return result


def status(paths: list[Path], data_home: Path) -> list[dict]:
    """For each settings file: does it exist, which Mirador hooks it holds, can uninstall restore it exactly."""
    records = _records(data_home)
    seen, out = set(), []
    for p in list(paths) + [Path(r["path"]) for r in records.values() if r.get("path")]:
        p = Path(p).expanduser()
        if _key(p) in seen:
            continue
        seen.add(_key(p))
        rec = records.get(_key(p))
        raw = p.read_bytes() if p.exists() else None
        events: dict[str, int] | dict[str, str]
        try:
            events = count_ours(_parse(p, raw))
        except InputError as e:
            events = {"error": str(e)}
        out.append({"path": str(p), "exists": raw is not None, "installed": events, "recorded": rec is not None,
                    "restorable": bool(rec and rec.get("restorable") and _sha(raw) == rec.get("installed_sha256")),
                    "backup": rec.get("backup") if rec else None})
    return out


def installed_anywhere(data_home: Path) -> bool:
    """True while some settings file still has a recorded Mirador install."""
    return bool(_records(data_home))
