"""The `mirador` command-line contract: every command answers --help, and every command and flag the
README documented (README.md as of issue 28, captured below, since the README is rewritten) still parses.

Scripts and people depend on these spellings; a change here is a breaking change for them.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from desktop.cli.main import HELP_ORDER, build_parser

ROOT = Path(__file__).resolve().parents[2]

# Every command and sub-command path (as of issue 28). New commands may be added; none may go.
COMMANDS: list[tuple[str, ...]] = [
    ("add",), ("search",), ("show",), ("edit",), ("delete",), ("purge",), ("optimize",), ("reembed",), ("list",),
    ("export",), ("stats",), ("doctor",), ("evidence",), ("evidence", "add"), ("serve",), ("mcp",),
    ("mcp", "token"), ("mcp", "token", "add"), ("mcp", "token", "list"), ("mcp", "token", "revoke"),
    ("mcp", "config"), ("capture",), ("status",), ("pause",), ("resume",), ("recall",), ("app",), ("extract",),
    ("dream",), ("selftest",), ("import",), ("relate",), ("related",), ("chain",), ("unrelate",), ("reinforce",),
    ("hooks",), ("hooks", "install"), ("hooks", "uninstall"), ("hooks", "status"), ("hook",),
    ("hook", "user-prompt-submit"), ("hook", "stop"), ("remote",), ("remote", "add"), ("remote", "list"),
    ("remote", "test"), ("remote", "remove"), ("service",), ("lock",), ("unlock",),
]

# Every invocation the README showed (its CLI tour and sections), with placeholders filled in.
README_INVOCATIONS: list[list[str]] = [
    ["add", "The ledger uses PostgreSQL 16", "--type", "semantic", "--scope", "work"],
    ["add", "Release the app", "--type", "procedural", "--details", '{"steps": ["tag", "push"]}'],
    ["add", "Staging DB password", "--type", "vault", "--value-stdin", "--scope", "work"],
    ["search", "which database?", "--scope", "work", "--type", "semantic", "--limit", "10", "--json"],
    ["search", "release date", "--evidence", "--source", "audio", "--app", "zoom", "--since", "2024-05-01",
     "--until", "2024-06-01"],
    ["show", "mem_x", "--json", "--reveal"],
    ["edit", "mem_x", "--text", "new"], ["edit", "mem_x", "--details", "{}"], ["edit", "mem_x", "--scope", "s"],
    ["edit", "mem_x", "--status", "active"], ["edit", "mem_x", "--pin"], ["edit", "mem_x", "--unpin"],
    ["list", "--evidence", "--limit", "5", "--offset", "5"], ["list", "--vault"],
    ["list", "--type", "semantic", "--status", "all", "--limit", "5", "--offset", "0"],
    ["delete", "mem_a", "evd_b"], ["delete", "--scope", "work/acme", "--yes"],
    ["delete", "--app", "zoom", "--since", "2024-05-01", "--until", "2024-06-01", "--yes"],
    ["purge"],
    ["evidence", "add", "text", "--source", "manual", "--app", "A", "--window", "W", "--speaker", "me",
     "--at", "2024-05-01T10:00", "--scope", "work"],
    ["export", "--out", "FILE", "--evidence", "--include-secrets"],
    ["import", "FILE"],
    ["stats"], ["doctor"], ["-v", "doctor"], ["optimize"],
    ["reembed", "--force", "--json"], ["reembed", "--progress"],
    ["recall", "why did we pick PostgreSQL?", "--budget", "1000", "--scope", "work", "--type", "semantic",
     "--no-evidence", "--json"],
    ["capture", "--duration", "5", "--no-audio", "--no-screen", "--audio-file", "talk.wav"],
    ["status", "--json"], ["pause", "--minutes", "5"], ["resume"],
    ["extract", "--all", "--rules", "--json"],
    ["dream", "--dry-run", "--proposals", "--accept", "ID", "--dismiss", "ID"],
    ["serve", "--port", "8765"],
    ["mcp", "--token", "T"],
    ["mcp", "--scope", "work", "--scope", "personal", "--write", "work", "--name", "N"],
    ["mcp", "--scope", "work", "--read-only"],
    ["mcp", "token", "add", "claude-code", "--read", "work,personal", "--write", "work"],
    ["mcp", "token", "add", "reviewer", "--read", "work", "--allow-vault"],
    ["mcp", "token", "list"], ["mcp", "token", "revoke", "claude-code"],
    *[["mcp", "config", c, "--token", "T", "--write"] for c in ("claude-code", "claude-desktop", "cursor", "vscode")],
    ["app"], ["service", "--once"], ["service"], ["lock"], ["unlock", "--passphrase-stdin"],
    ["selftest", "--models"],
    ["relate", "mem_A", "BECAUSE", "mem_B", "--evidence", "evd_X"],
    ["related", "mem_A", "--relation", "BECAUSE", "--direction", "out", "--json"],
    ["related", "mem_A", "--direction", "in"], ["related", "mem_A", "--direction", "both"],
    ["chain", "mem_A", "--depth", "3", "--direction", "causes", "--json"],
    ["chain", "mem_A", "--direction", "consequences"],
    ["unrelate", "rel_ID"], ["unrelate", "mem_A", "BECAUSE", "mem_B"],
    ["reinforce", "mem_a", "mem_b", "--show", "--json"],
    ["hooks", "install", "claude-code", "--scope", "work"],
    ["hooks", "install", "claude-code", "--project"], ["hooks", "install", "claude-code", "--settings", "PATH"],
    ["hooks", "status"], ["hooks", "uninstall", "claude-code"],
    ["import", "~/Downloads/chatgpt-export.zip"], ["import", "~/notes", "--scope", "personal"],
    ["import", "log.jsonl", "--format", "jsonl", "--text-field", "msg.body", "--time-field", "ts",
     "--speaker-field", "who"],
    ["import", "x.zip", "--progress", "--json", "--all-branches", "--me", "NAME", "--extract", "--rules"],
    *[["import", "x", "--format", f] for f in ("chatgpt", "claude", "notes", "jsonl", "mirador")],
]


def _paths(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield path + (name,)
                yield from _paths(sub, path + (name,))


def _help(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(argv + ["--help"])
    return exit_.value.code, out.getvalue()


def test_every_command_is_still_there():
    found = set(_paths(build_parser()))
    assert set(COMMANDS) <= found, f"commands gone: {sorted(set(COMMANDS) - found)}"


def test_every_command_answers_help():
    # One test, not one per command: each test here pays the desktop fixtures' set-up.
    bad = []
    for path in [()] + sorted(set(_paths(build_parser()))):
        code, out = _help(list(path))
        if code != 0 or not out.startswith(f"usage: mirador{''.join(' ' + p for p in path)}"):
            bad.append((path, code, out[:200]))
    assert not bad


def test_help_lists_commands_in_the_documented_order():
    listed = [a.dest for a in next(a for a in build_parser()._actions
                                   if isinstance(a, argparse._SubParsersAction))._choices_actions]
    top = [p[0] for p in COMMANDS if len(p) == 1]
    assert listed[: len(top)] == top == HELP_ORDER


def test_every_readme_invocation_parses():
    bad = []
    for argv in README_INVOCATIONS:
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                args = build_parser().parse_args(argv)
        except SystemExit:
            bad.append((argv, err.getvalue().strip().splitlines()[-1:]))
            continue
        if not callable(getattr(args, "func", None)):
            bad.append((argv, "no handler"))
    assert not bad


def test_no_command_means_app():
    parser = build_parser()
    for argv in ([], ["-v"]):
        assert getattr(parser.parse_args(argv), "func", None) is None  # main() then runs `app`
    assert parser.parse_args(["app"]).func.__name__ == "cmd_app"


def test_version_and_help_import_neither_qt_nor_the_store():
    # Claude Code runs `mirador hook …` on every prompt: building the parser must stay cheap.
    code = ("import sys, contextlib, io\n"
            "from desktop.cli.main import build_parser\n"
            "p = build_parser()\n"
            "for argv in (['--version'], ['--help'], ['hook', 'stop', '--help']):\n"
            "    with contextlib.redirect_stdout(io.StringIO()):\n"
            "        try: p.parse_args(argv)\n"
            "        except SystemExit as e: assert e.code == 0, (argv, e.code)\n"
            "heavy = ('PySide6', 'desktop.ui', 'lancedb', 'torch', 'memory.store.core', 'mcp')\n"
            "import json; print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy\n"
            "                                    or any(m.startswith(h + '.') or m == h for h in heavy))))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


def test_console_script_answers_version_and_help():
    exe = [sys.executable, "-m", "desktop.cli.main"]
    for argv, first in ((["--version"], "mirador "), (["--help"], "usage: mirador")):
        out = subprocess.run(exe + argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and out.stdout.startswith(first), out.stderr


def test_one_shot_commands_are_commands_and_only_they_run_without_the_collector(tmp_path):
    """The commands that answer and end (a hook, a script's search) run with the cyclic garbage collector off
    and the embedder's weights unpacked (desktop/cli/main.py _one_shot); any other keeps both."""
    from desktop.cli.main import ONE_SHOT

    top = {p[0] for p in _paths(build_parser())}
    assert ONE_SHOT <= top, sorted(ONE_SHOT - top)
    assert not ONE_SHOT & {"app", "serve", "mcp", "capture", "service", "import", "reembed", "extract", "dream"}
    code = ("import gc, json, sys\n"
            "import desktop.cli.main as M\n"
            "from models import onnx_encoder\n"
            "M._leave = lambda code: print(json.dumps([code, gc.isenabled(), onnx_encoder._short_lived]),\n"
            "                              file=sys.stderr)\n"
            "sys.argv = ['mirador', *sys.argv[1:]]\n"
            "M.main()\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MIRADOR_HOME": str(tmp_path)}
    for argv, one_shot in ((["status", "--json"], True),
                           (["hooks", "status", "--settings", str(tmp_path / "settings.json")], False)):
        out = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True,
                             timeout=120, env=env)
        assert json.loads(out.stderr.strip().splitlines()[-1]) == [0, not one_shot, one_shot], (argv, out.stderr)
