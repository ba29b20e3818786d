"""Claude Code hooks: settings install/uninstall that never clobber, and the two hooks as real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from desktop.cli.main import main
from memory.config import Config, HooksConfig, McpConfig, save_config
from memory.graph.reinforcement import usage_rows
from memory.integrations import hooks
from memory.integrations.hooks_install import count_ours
from memory.store import filters as F
from tests.memory.mcp_support import ROOT, env_for, free_port, start_server, stop_server

MIRADOR = ROOT / ".venv" / "bin" / "mirador"
MARK = "zanzibarquokka"  # only in the personal memory: seeing it in a prompt is a leak
# Odd but valid: tabs, unsorted keys, unicode, no final newline — a rewrite would show.
ORIGINAL = ('{\n\t"model": "opus",\n\t"env": {"FOO": "bär"},\n\t"hooks": {\n\t\t"UserPromptSubmit": [\n'
            '\t\t\t{"hooks": [{"type": "command", "command": "~/bin/prompt-guard.sh"}]}\n\t\t],\n'
            '\t\t"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint-bash"}]}]\n'
            '\t}\n}')


def _settings(tmp_path: Path, text: str | None = ORIGINAL) -> Path:
    p = tmp_path / "claude" / "settings.json"
    if text is not None:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text.encode("utf-8"))
    return p


def _install(p: Path, *extra: str) -> int:
    return main(["hooks", "install", "claude-code", "--settings", str(p), "--json", *extra])


def _commands(p: Path, event: str) -> list[str]:
    data = json.loads(p.read_text(encoding="utf-8"))
    return [h["command"] for g in data["hooks"].get(event, []) for h in g["hooks"]]


def test_installing_twice_leaves_one_copy(tmp_path, capsys):
    p = _settings(tmp_path)
    assert _install(p, "--scope", "work") == 0
    first = json.loads(capsys.readouterr().out)
    assert first["changed"] and first["backup"] and first["allowed_scopes"] == ["work"]
    after_one = p.read_bytes()
    assert _install(p) == 0
    second = json.loads(capsys.readouterr().out)
    assert not second["changed"] and p.read_bytes() == after_one
    data = json.loads(after_one)
    assert count_ours(data) == {"UserPromptSubmit": 1, "Stop": 1}
    cmd = _commands(p, "UserPromptSubmit")[-1]
    assert cmd.endswith("hook user-prompt-submit --home " + os.environ["MIRADOR_HOME"])
    assert "matcher" not in data["hooks"]["Stop"][-1]  # Stop and UserPromptSubmit take no matcher
    assert data["hooks"]["Stop"][-1]["hooks"][0]["timeout"] >= 10


def test_uninstall_restores_the_original_file_byte_for_byte(tmp_path, capsys):
    p = _settings(tmp_path)
    original = p.read_bytes()
    assert _install(p, "--scope", "work") == 0 and _install(p) == 0
    assert p.read_bytes() != original
    capsys.readouterr()
    assert main(["hooks", "uninstall", "claude-code", "--settings", str(p), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mode"] == "restored"
    assert p.read_bytes() == original
    # A file that did not exist before install does not exist after uninstall.
    q = _settings(tmp_path / "fresh", text=None)
    assert _install(q) == 0 and q.exists()
    assert main(["hooks", "uninstall", "claude-code", "--settings", str(q)]) == 0
    assert not q.exists()


def test_unrelated_hooks_survive_install_and_uninstall(tmp_path, capsys):
    p = _settings(tmp_path)
    assert _install(p, "--scope", "work") == 0
    assert _commands(p, "UserPromptSubmit")[0] == "~/bin/prompt-guard.sh"
    assert _commands(p, "PreToolUse") == ["lint-bash"]
    # The person edits the file after install: uninstall must keep that and take only Mirador's entries.
    data = json.loads(p.read_text(encoding="utf-8"))
    data["hooks"]["Stop"].insert(0, {"hooks": [{"type": "command", "command": "notify-send done"}]})
    data["theme"] = "dark"
    p.write_text(json.dumps(data, indent=2), encoding="utf-8")
    capsys.readouterr()
    assert main(["hooks", "uninstall", "claude-code", "--settings", str(p), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mode"] == "removed-entries"
    left = json.loads(p.read_text(encoding="utf-8"))
    assert count_ours(left) == {}
    assert left["theme"] == "dark" and left["env"] == {"FOO": "bär"}
    assert _commands(p, "UserPromptSubmit") == ["~/bin/prompt-guard.sh"]
    assert _commands(p, "PreToolUse") == ["lint-bash"]
    assert _commands(p, "Stop") == ["notify-send done"]
    # Uninstalling again changes nothing.
    before = p.read_bytes()
    assert main(["hooks", "uninstall", "claude-code", "--settings", str(p)]) == 0
    assert p.read_bytes() == before


def test_broken_settings_are_refused_and_left_alone(tmp_path, capsys):
    p = _settings(tmp_path, text='{"hooks": {"Stop": ')
    assert _install(p) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert p.read_text(encoding="utf-8") == '{"hooks": {"Stop": '
    assert list(p.parent.iterdir()) == [p]  # no backup, no temp file


def test_status_reports_installed_events_and_scopes(tmp_path, capsys):
    p = _settings(tmp_path)
    _install(p, "--scope", "work", "--budget", "300")
    capsys.readouterr()
    assert main(["hooks", "status", "--settings", str(p), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    f = next(f for f in doc["files"] if f["path"] == str(p))
    assert f["installed"] == {"UserPromptSubmit": 1, "Stop": 1} and f["restorable"]
    assert doc["allowed_scopes"] == ["work"] and doc["budget_tokens"] == 300


# ---- the hooks themselves ----------------------------------------------------------------------------


@pytest.fixture
def hook_store(store, mirador_home):
    save_config(Config(hooks=HooksConfig(allowed_scopes=["work"], timeout_seconds=120)), mirador_home)
    store.config = Config(hooks=HooksConfig(allowed_scopes=["work"], timeout_seconds=120))
    return {
        "alpha": store.add_memory("The staging server for project Alpha is alpha-stg-1 behind the VPN.",
                                  scope="work")["id"],
        "beta": store.add_memory("Project Beta keeps its staging server in the Frankfurt office.", scope="work")["id"],
        "personal": store.add_memory(f"My {MARK} staging server password hint is the dog's name.",
                                     scope="personal")["id"],
    }


def _run_hook(home: Path, event: str, payload, timeout: float = 600) -> subprocess.CompletedProcess:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run([str(MIRADOR), "hook", event], input=data.encode("utf-8"), capture_output=True,
                          env=env_for(home), timeout=timeout, cwd=ROOT)


def test_user_prompt_submit_injects_allowed_scopes_only(hook_store, mirador_home):
    payload = {"session_id": "sess-1", "transcript_path": "/nonexistent.jsonl", "cwd": str(ROOT),
               "hook_event_name": "UserPromptSubmit", "prompt": "Which staging server does project Alpha use?"}
    proc = _run_hook(mirador_home, "user-prompt-submit", payload)
    assert proc.returncode == 0, proc.stderr.decode()
    out = json.loads(proc.stdout)
    ctx = out["hookSpecificOutput"]["additionalContext"]
    assert out["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert "alpha-stg-1" in ctx and hook_store["alpha"] in ctx
    assert MARK not in ctx and hook_store["personal"] not in ctx  # personal never leaves in a prompt
    state = hooks.load_state(mirador_home, "sess-1")
    assert hook_store["alpha"] in state["injected"] and hook_store["personal"] not in state["injected"]
    assert "alpha" not in json.dumps(state).lower()  # ids and hashed words only, no text


def test_hooks_never_break_the_prompt(hook_store, mirador_home, tmp_path):
    # Not JSON, no prompt, or nothing allowed to leave: exit 0 and print nothing.
    for payload in ("this is not json", {"session_id": "s"}):
        proc = _run_hook(mirador_home, "user-prompt-submit", payload)
        assert proc.returncode == 0 and proc.stdout == b""
    save_config(Config(), mirador_home)  # default: no allowed scopes
    proc = _run_hook(mirador_home, "user-prompt-submit", {"session_id": "s", "prompt": "Which staging server?"})
    assert proc.returncode == 0 and proc.stdout == b""
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.toml").write_text("[hooks]\nallowed_scopes = 3\n", encoding="utf-8")
    proc = _run_hook(broken, "user-prompt-submit", {"session_id": "s", "prompt": "Which staging server?"})
    assert proc.returncode == 0 and proc.stdout == b""
    assert "failed" in (broken / "hooks" / "hooks.log").read_text(encoding="utf-8")


def _transcript(path: Path, prompt: str, reply: str) -> Path:
    lines = [
        {"type": "user", "message": {"role": "user", "content": "an older question about Beta"}},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "Project Beta keeps its staging server in the Frankfurt office."}]}},
        {"type": "user", "message": {"role": "user", "content": prompt}},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]}},
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "Frankfurt office files"}]}},
        {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": reply}]}},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def test_stop_hook_reinforces_the_used_memory_and_not_the_unused_one(hook_store, mirador_home, tmp_path, store):
    prompt = "Which staging server does project Alpha use?"
    hooks.remember(mirador_home, "sess-2", [hook_store["alpha"], hook_store["beta"]])
    reply = "Project Alpha uses `alpha-stg-1`; you need to be on the VPN to reach it."
    transcript = _transcript(tmp_path / "t.jsonl", prompt, reply)
    assert hooks.last_reply(str(transcript)) == reply  # only the text after the last prompt
    assert hooks.last_turn(str(transcript)) == (prompt, reply)
    # Nothing of the prompt is kept beside the ids (unkeyed word hashes could be checked against guesses).
    kept = hooks.session_file(mirador_home, "sess-2").read_text(encoding="utf-8")
    assert set(json.loads(kept)) == {"session_id", "injected", "updated_at"}
    payload = {"session_id": "sess-2", "transcript_path": str(transcript), "hook_event_name": "Stop",
               "stop_hook_active": False}
    proc = _run_hook(mirador_home, "stop", payload)
    assert proc.returncode == 0 and proc.stdout == b"", proc.stderr.decode()
    usage = usage_rows(store, hook_store.values())
    assert usage[hook_store["alpha"]]["uses"] == 1
    assert hook_store["beta"] not in usage and hook_store["personal"] not in usage
    assert hooks.load_state(mirador_home, "sess-2") == {}  # cleared
    rows = store.rows("audit", F.equals("action", "reinforce"), ["actor"])
    assert [r["actor"] for r in rows] == [hooks.ACTOR]


def test_the_used_test_is_deterministic_and_ignores_prompt_echo():
    cfg = HooksConfig()
    prompt = "Which staging server does project Alpha use?"
    ph = prompt
    mem = "The staging server for project Alpha is alpha-stg-1 behind the VPN."
    assert hooks.used("mem_x", mem, "It is alpha-stg-1.", ph, cfg) == "identifier"
    assert hooks.used("mem_x", mem, "See mem_x for the details.", ph, cfg) == "id"
    # Echoing the question is not use, however many of its words the memory shares.
    assert hooks.used("mem_x", mem, "Project Alpha's staging server: I don't know which one it uses.", ph, cfg) is None
    other = "Deploy windows are Tuesday mornings; freeze starts Thursday evening before releases."
    assert hooks.used("mem_y", other, "Deploy on Tuesday mornings, before the Thursday evening freeze.", ph, cfg) \
        == "words"
    assert hooks.used("mem_y", other, "Deploys happen often.", ph, cfg) is None


def test_prompt_hook_asks_the_running_server_first(hook_store, mirador_home, tmp_path, capsys):
    port = free_port()
    cfg = Config(hooks=HooksConfig(allowed_scopes=["work"], timeout_seconds=120), mcp=McpConfig(port=port))
    save_config(cfg, mirador_home)
    assert _install(_settings(tmp_path)) == 0
    assert json.loads(capsys.readouterr().out)["server_token"]
    server = start_server(mirador_home, port, tmp_path / "serve.log")
    try:
        proc = _run_hook(mirador_home, "user-prompt-submit",
                         {"session_id": "sess-3", "prompt": "Which staging server does project Alpha use?"})
    finally:
        stop_server(server)
    assert proc.returncode == 0, proc.stderr.decode()
    ctx = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "alpha-stg-1" in ctx and MARK not in ctx
    assert "via server" in (mirador_home / "hooks" / "hooks.log").read_text(encoding="utf-8")
    assert hook_store["alpha"] in hooks.load_state(mirador_home, "sess-3")["injected"]
    # Uninstalling the last install revokes the hook's token.
    assert main(["hooks", "uninstall", "claude-code", "--settings", str(_settings(tmp_path, None))]) == 0
    assert not (mirador_home / "hooks" / "token").exists()
