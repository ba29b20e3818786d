"""`mirador hooks install|uninstall|status` (for people) and `mirador hook …` (run by Claude Code)."""

from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from desktop.cli.output import emit_json
from memory.errors import InputError

if TYPE_CHECKING:
    import argparse

    from desktop.cli.common import AddCommand, AddJson, AddScope
    from memory.config import Config

log = logging.getLogger(__name__)

LOG_BYTES = 256_000


def register(cmd: AddCommand, as_json: AddJson, scope: AddScope) -> None:
    """Add `hooks` (install, uninstall, status) and `hook` (the commands Claude Code runs)."""
    sp = cmd("hooks", None, "assistant hooks: inject recall into Claude Code prompts, reinforce what replies used")
    sp.set_defaults(func=lambda a: (_ for _ in ()).throw(
        InputError("`mirador hooks` needs an action: install, uninstall or status")))
    hsub = sp.add_subparsers(metavar="ACTION")
    ip = hsub.add_parser("install", help="add Mirador's UserPromptSubmit and Stop hooks (keeps every other hook)")
    ip.set_defaults(func=cmd_install)
    ip.add_argument("client", choices=["claude-code"])
    ip.add_argument("--scope", action="append", help="scope whose memories may be put into prompts (repeatable; "
                    "saved as [hooks] allowed_scopes; default: keep the configured list)")
    ip.add_argument("--budget", type=int, help="tokens per injection (saved as [hooks] budget_tokens)")
    _where(ip)
    as_json(ip)
    up = hsub.add_parser("uninstall", help="remove Mirador's hooks (restores the original file if unchanged since)")
    up.set_defaults(func=cmd_uninstall)
    up.add_argument("client", choices=["claude-code"])
    _where(up)
    as_json(up)
    st = hsub.add_parser("status", help="where Mirador's hooks are installed and what they may inject")
    st.set_defaults(func=cmd_status)
    _where(st)
    as_json(st)

    hp = cmd("hook", None, "run by Claude Code with the hook's JSON on stdin; always exits 0")
    hp.set_defaults(func=lambda a: (_ for _ in ()).throw(InputError("`mirador hook` needs: user-prompt-submit or stop")))
    rsub = hp.add_subparsers(metavar="EVENT")
    for event in ("user-prompt-submit", "stop"):
        ep = rsub.add_parser(event, help=f"the {event} hook")
        ep.set_defaults(func=cmd_hook, event=event)
        ep.add_argument("--home", help="data dir (default $MIRADOR_HOME or the platform's)")


def _where(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--settings", help="settings file (default ~/.claude/settings.json)")
    sp.add_argument("--project", action="store_true", help="use ./.claude/settings.json (this project only)")


def _home() -> Path:
    from memory.config import data_dir

    return data_dir()


def _settings(a: argparse.Namespace) -> Path:
    from memory.integrations.hooks_install import settings_path

    return Path(a.settings).expanduser() if a.settings else settings_path(project=a.project)


def _update_config(a: argparse.Namespace) -> Config:
    from memory.config import load_config, save_config

    cfg = load_config(_home())
    if a.scope:
        from memory.scopes import validate_scope

        scopes = [validate_scope(s.strip()) for raw in a.scope for s in raw.split(",") if s.strip()]
        cfg.hooks.allowed_scopes = list(dict.fromkeys(scopes))
    if a.budget is not None:
        cfg.hooks.budget_tokens = a.budget  # validated by the config model
    if a.scope or a.budget is not None:
        save_config(cfg, _home())
    return cfg


def cmd_install(a: argparse.Namespace) -> int:
    """Install the hooks (saving --scope/--budget to config.toml first) and issue the hook's token."""
    from memory.integrations.hooks_install import install

    cfg = _update_config(a)
    home_arg = _home() if os.environ.get("MIRADOR_HOME") else None
    res = install(_settings(a), _home(), timeout=int(cfg.hooks.timeout_seconds) + 5, home_arg=home_arg)
    from memory.integrations.hooks_http import issue_token

    # Read-only, limited to the allowed scopes: lets the hook ask the running app (warm model) first.
    res["server_token"] = issue_token(_home(), list(cfg.hooks.allowed_scopes)) is not None
    res["allowed_scopes"] = list(cfg.hooks.allowed_scopes)
    res["budget_tokens"] = cfg.hooks.budget_tokens
    if a.json:
        emit_json(res)
    else:
        state = "installed" if res["changed"] else "already installed (unchanged)"
        print(f"{state} in {res['path']}: " + ", ".join(f"{k}" for k in res["events"]))
        if res["backup"]:
            print(f"backup of the original: {res['backup']}")
    if not cfg.hooks.allowed_scopes:
        print("note: no scopes are allowed into prompts yet, so nothing is injected — rerun with --scope SCOPE "
              "(e.g. --scope work) or set [hooks] allowed_scopes in config.toml", file=sys.stderr)
    return 0


def cmd_uninstall(a: argparse.Namespace) -> int:
    """Remove the hooks; revoke the hook's token once no settings file has them."""
    from memory.integrations.hooks_http import revoke_token
    from memory.integrations.hooks_install import installed_anywhere, uninstall

    res = uninstall(_settings(a), _home())
    if not installed_anywhere(_home()):
        revoke_token(_home())
    if a.json:
        emit_json(res)
    else:
        print({"restored": f"restored the original {res['path']}",
               "removed-entries": f"removed {res['removed']} Mirador hook(s) from {res['path']} (other changes kept)",
               "not-installed": f"no Mirador hooks in {res['path']}"}[res["mode"]])
    return 0


def cmd_status(a: argparse.Namespace) -> int:
    """Where the hooks are installed and what they may inject."""
    from memory.config import load_config
    from memory.integrations.hooks_install import settings_path, status

    paths = [_settings(a)] if a.settings else [settings_path(), settings_path(project=True)]
    cfg = load_config(_home()).hooks
    files = status(paths, _home())
    sessions = list((_home() / "hooks" / "sessions").glob("*.json"))
    out = {"files": files, "allowed_scopes": list(cfg.allowed_scopes), "budget_tokens": cfg.budget_tokens,
           "include_evidence": cfg.include_evidence, "open_sessions": len(sessions),
           "server_token": (_home() / "hooks" / "token").exists()}
    if a.json:
        emit_json(out)
        return 0
    for f in files:
        got = ", ".join(f"{k}" for k in f["installed"]) or "not installed"
        print(f"{f['path']}: {got}" + ("" if f["exists"] else " (no file)"))
    print(f"allowed scopes: {', '.join(cfg.allowed_scopes) or 'none (nothing is injected)'}; "
          f"budget {cfg.budget_tokens} tokens; evidence {'included' if cfg.include_evidence else 'excluded'}")
    return 0


# ---- the hooks themselves --------------------------------------------------------------------------


def _file_log(home: Path) -> None:
    from logging.handlers import RotatingFileHandler

    try:
        (home / "hooks").mkdir(parents=True, exist_ok=True)
        h = RotatingFileHandler(home / "hooks" / "hooks.log", maxBytes=LOG_BYTES, backupCount=1, encoding="utf-8")
    except OSError:
        return
    h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for other in root.handlers:  # stderr keeps warnings only; the file gets the INFO trail as well
        other.setLevel(max(other.level, logging.WARNING))
    root.addHandler(h)
    logging.getLogger("memory").setLevel(logging.INFO)


def cmd_hook(a: argparse.Namespace) -> int:
    """Run one hook within [hooks] timeout_seconds; print only what Claude Code should read; exit 0 always."""
    from memory.integrations import hooks
    home = Path(a.home).expanduser() if a.home else _home()
    _file_log(home)
    # Only the hook's answer may reach stdout: anything else (a library's print) goes to stderr.
    real_out = os.dup(1)
    os.dup2(2, 1)
    result: dict = {}

    def work() -> None:
        try:
            payload = hooks.read_payload(sys.stdin)
            if a.event == "user-prompt-submit":
                result["out"] = hooks.user_prompt_submit(home, payload)
            else:
                result["stop"] = hooks.stop(home, payload)
        except BaseException:  # never break the person's prompt: log it and add nothing
            log.exception("hook %s failed", a.event)

    timeout = _timeout(home)
    t = threading.Thread(target=work, name="mirador-hook", daemon=True)
    t.start()
    t.join(timeout)
    text = result.get("out")
    if text:
        os.write(real_out, (text + "\n").encode("utf-8"))
    if t.is_alive():
        log.warning("hook %s gave up after %.1fs; nothing was injected", a.event, timeout)
        logging.shutdown()
        os._exit(0)  # worker threads (LanceDB, torch) must not hold the prompt up at interpreter exit
    return 0


def _timeout(home: Path) -> float:
    try:
        from memory.config import load_config

        return load_config(home).hooks.timeout_seconds
    except Exception:  # a broken config is logged by the hook itself; keep a sane limit meanwhile
        return 10.0
