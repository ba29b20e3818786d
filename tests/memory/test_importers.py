"""Importers (issue 8 part 4): ChatGPT, Claude, notes and JSONL → evidence; idempotent, streamed, redacted.

Every export here is synthetic and written to tmp_path by the test (never real user data).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

from capture.redact import Redactor
from memory.integrations.importers import (
    ImportBroken,
    ImportOptions,
    detect_format,
    make_importer,
    run_import,
)
from memory.integrations.importers.base import split_long
from memory.integrations.importers.jsonstream import iter_conversations
from memory.integrations.importers.notes import chunk_text
from tests.conftest import files_containing

T0 = 1_700_000_000  # 2023-11-14T22:13:20Z
FAKE_AWS = "AKIA" + "Q3EXAMPLEKEY7XYZ"  # shaped like an AWS access key id; built here so no file holds it whole


# ---- synthetic exports ---------------------------------------------------------------------------


def gpt_msg(nid, role, text, t=None, parent=None, ctype="text", parts=None, **extra):
    msg = {"id": nid, "author": {"role": role}, "create_time": t,
           "content": {"content_type": ctype, "parts": parts if parts is not None else [text]}, **extra}
    return {"id": nid, "parent": parent, "children": [], "message": msg}


def gpt_conversation(cid, title, turns, t0=T0):
    """A linear ChatGPT conversation: root → system → turns; returns the conversation dict."""
    mapping = {"root": {"id": "root", "parent": None, "children": ["sys"], "message": None},
               "sys": gpt_msg("sys", "system", "", None, "root")}
    parent = "sys"
    for i, (role, text) in enumerate(turns):
        nid = f"{cid}-n{i}"
        mapping[nid] = gpt_msg(nid, role, text, t0 + 30 * i, parent)
        mapping[parent]["children"].append(nid)
        parent = nid
    return {"id": cid, "title": title, "create_time": t0, "current_node": parent, "mapping": mapping}


def chatgpt_export(n_conv=3, turns=4):
    return [gpt_conversation(f"conv{c}", f"Chat {c}",
                             [("user" if i % 2 == 0 else "assistant", f"conversation {c} turn {i}: the ledger uses "
                               f"PostgreSQL {10 + i}") for i in range(turns)], T0 + 3600 * c)
            for c in range(n_conv)]


def claude_export():
    return [{
        "uuid": "cl-1", "name": "Deploy plan", "created_at": "2024-05-01T10:00:00.000000Z",
        "chat_messages": [
            {"uuid": "m1", "sender": "human", "text": "How do I roll back the deploy?", "created_at": "2024-05-01T10:00:05Z",
             "content": [{"type": "text", "text": "How do I roll back the deploy?"}]},
            {"uuid": "m2", "sender": "assistant", "text": "", "created_at": "2024-05-01T10:00:09Z",
             "content": [{"type": "thinking", "thinking": "..."}, {"type": "text", "text": "Run make rollback."}]},
            {"uuid": "m3", "sender": "assistant", "created_at": "2024-05-01T10:00:12Z",
             "content": [{"type": "tool_use", "name": "bash", "input": {}}]},
            {"uuid": "m4", "sender": "human", "text": "   ", "created_at": "2024-05-01T10:01:00Z", "content": []},
            {"uuid": "m5", "sender": "system", "text": "be nice", "created_at": "2024-05-01T10:01:01Z"},
        ]}, {"uuid": "cl-2", "name": "Old style", "created_at": "2024-05-02T09:00:00Z",
             "chat_messages": [{"uuid": "o1", "sender": "human", "text": "Plain text field only",
                                "created_at": "2024-05-02T09:00:00Z"}]}]


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def redactor():
    return Redactor()


def do_import(store, fmt, path, **opts):
    return run_import(store, make_importer(fmt, path, ImportOptions(**opts)), redactor=redactor(), scope="chat")


def evidence_rows(store):
    return store.rows("evidence", None, ["id", "text", "speaker", "source", "app", "window", "scope",
                                              "captured_at", "meta", "extracted_at"])


# ---- each format, twice --------------------------------------------------------------------------


def test_chatgpt_import_keeps_the_thread_skips_with_reasons_and_twice_adds_nothing(store, tmp_path):
    convs = chatgpt_export(2, 4)
    m = convs[0]["mapping"]
    # An edited turn: a sibling branch under the first user turn's parent, not on current_node's chain.
    m["edit"] = gpt_msg("edit", "user", "an abandoned edit", T0 + 1, "sys")
    m["tool"] = gpt_msg("tool", "tool", "search results", T0 + 100, "conv0-n3")
    m["img"] = gpt_msg("img", "user", "", T0 + 101, "tool", ctype="multimodal_text",
                       parts=[{"content_type": "image_asset_pointer", "asset_pointer": "file-service://x"}])
    m["hid"] = gpt_msg("hid", "user", "hidden", T0 + 102, "img", metadata={"is_visually_hidden_from_conversation": True})
    m["code"] = gpt_msg("code", "assistant", "", T0 + 103, "hid", ctype="code", recipient="python")
    m["empty"] = gpt_msg("empty", "assistant", "", T0 + 104, "code")
    m["last"] = gpt_msg("last", "assistant", "Final answer, with a part", T0 + 105, "empty",
                        ctype="multimodal_text", parts=["Final answer,", {"content_type": "image_asset_pointer"},
                                                        "with a part"])
    convs[0]["current_node"] = "last"
    convs.append({"title": "broken", "no_mapping": True})
    path = write_json(tmp_path / "conversations.json", convs)

    first = do_import(store, "chatgpt", path, me="Ana")
    assert first.imported == 9 and first.error is None  # 4 + 1 ("last") + 4
    assert first.skipped_by_reason == {
        "system message": 2, "tool message": 1, "only images or files": 1, "hidden message": 1,
        "tool call": 1, "empty message": 1, "other branch (edited or regenerated turn)": 1,
        "not a ChatGPT conversation (no mapping)": 1}
    assert "node edit" in first.skip_examples["other branch (edited or regenerated turn)"][0]
    rows = {json.loads(r["meta"])["message_id"]: r for r in evidence_rows(store)}
    assert rows["last"]["text"] == "Final answer,\nwith a part"
    r0 = rows["conv0-n0"]
    assert (r0["source"], r0["app"], r0["scope"], r0["speaker"], r0["window"]) == ("import", "chatgpt", "chat", "Ana",
                                                                                    "Chat 0")
    assert rows["conv0-n1"]["speaker"] == "ChatGPT"
    assert r0["captured_at"] == datetime(2023, 11, 14, 22, 13, 20)
    assert json.loads(r0["meta"])["conversation_id"] == "conv0"
    assert "an abandoned edit" not in {r["text"] for r in rows.values()}

    before = store.count("evidence", local=True)
    again = do_import(store, "chatgpt", path, me="Ana")
    assert again.imported == 0 and store.count("evidence", local=True) == before
    assert again.skipped_by_reason["already imported"] == 9

    every = do_import(store, "chatgpt", path, all_branches=True)
    assert every.imported == 1  # only the abandoned edit is new
    assert "an abandoned edit" in {r["text"] for r in evidence_rows(store)}


@pytest.mark.parametrize("wrapped", [False, True])
def test_claude_import_and_twice_adds_nothing(store, tmp_path, wrapped):
    data = claude_export()
    path = write_json(tmp_path / "conversations.json", {"account": {"uuid": "a"}, "conversations": data} if wrapped
                      else data)
    assert detect_format(path) == "claude"
    first = do_import(store, "claude", path)
    assert first.imported == 3
    assert first.skipped_by_reason == {"no text (only tool_use)": 1, "empty message": 1, "system message": 1}
    rows = {json.loads(r["meta"])["message_id"]: r for r in evidence_rows(store)}
    assert rows["m2"]["text"] == "Run make rollback." and rows["m2"]["speaker"] == "Claude"
    assert rows["m1"]["speaker"] == "me" and rows["m1"]["captured_at"] == datetime(2024, 5, 1, 10, 0, 5)
    assert rows["o1"]["text"] == "Plain text field only"
    again = do_import(store, "claude", path)
    assert again.imported == 0 and again.skipped_by_reason["already imported"] == 3
    assert store.count("evidence", local=True) == 3


def test_notes_folder_chunks_by_heading_skips_with_reasons_and_twice_adds_nothing(store, tmp_path):
    root = tmp_path / "vault"
    (root / "projects").mkdir(parents=True)
    (root / ".obsidian").mkdir()
    (root / ".obsidian" / "config.md").write_text("# never read\n")
    (root / "projects" / "ledger.md").write_text(
        "---\ntags: [db]\n---\n# Ledger\n\nIntro paragraph.\n\n## Decisions\n\nWe chose PostgreSQL 16.\n\n"
        "```\n# not a heading inside a fence\n```\n\n## Links\n\nSee https://wiki.example/ledger\n")
    (root / "todo.txt").write_text("buy milk\n\ncall Sam\n")
    (root / "blank.md").write_text("  \n\n")
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0")
    (root / "binary.md").write_bytes(b"abc\0def")
    (root / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (root / "huge.md").write_text("x" * 3000)
    mtime = 1_710_000_000
    os.utime(root / "projects" / "ledger.md", (mtime, mtime))

    first = do_import(store, "notes", root, max_file_bytes=2000, chunk_chars=200)
    assert first.skipped_by_reason == {
        "hidden folder (not entered)": 1, "empty file": 1, "not a notes file (.md, .markdown, .txt)": 1,
        "binary file": 1, "not UTF-8 text": 1, "too large (over 2,000 bytes)": 1}
    rows = evidence_rows(store)
    by_heading = {json.loads(r["meta"])["heading"]: r for r in rows if r["window"] == "projects/ledger.md"}
    assert set(by_heading) == {"Ledger", "Ledger > Decisions", "Ledger > Links"}
    decisions = by_heading["Ledger > Decisions"]
    assert "We chose PostgreSQL 16." in decisions["text"] and "# not a heading inside a fence" in decisions["text"]
    assert "tags:" not in " ".join(r["text"] for r in rows)  # front matter is metadata, not prose
    assert decisions["captured_at"] == datetime.fromtimestamp(mtime, timezone.utc).replace(tzinfo=None)
    assert json.loads(decisions["meta"])["path"] == str((root / "projects" / "ledger.md").resolve())
    assert {r["app"] for r in rows} == {"notes"} and first.imported == len(rows) == 4  # 3 sections + todo.txt

    again = do_import(store, "notes", root, max_file_bytes=2000, chunk_chars=200)
    assert again.imported == 0 and store.count("evidence", local=True) == 4
    # An edited note brings in only its changed chunk.
    (root / "todo.txt").write_text("buy milk\n\ncall Sam today\n")
    assert do_import(store, "notes", root, max_file_bytes=2000, chunk_chars=200).imported == 1


def test_generic_jsonl_fields_and_twice_adds_nothing(store, tmp_path):
    lines = [
        {"msg": {"body": "Standup moved to 9:30"}, "ts": T0, "who": "Sam", "channel": "team"},
        {"msg": {"body": "Ship it Friday"}, "ts": "2024-01-02T03:04:05Z", "who": "Ana", "channel": "team"},
        {"msg": {"body": "millis"}, "ts": T0 * 1000, "who": "Bo"},
        {"msg": {"body": ""}, "ts": T0},
        {"msg": {"body": "bad time"}, "ts": "next tuesday-ish"},
        [1, 2, 3],
        {"msg": {"body": "Standup moved to 9:30"}, "ts": T0, "who": "Sam", "channel": "team"},  # same line again
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    opts = dict(text_field="msg.body", time_field="ts", speaker_field="who")
    first = do_import(store, "jsonl", path, **opts)
    assert first.imported == 3
    assert first.skipped_by_reason == {"no text in field 'msg.body'": 1, "unreadable time in field 'ts'": 1,
                                       "not a JSON object": 1, "duplicate within this import": 1}
    assert first.skip_examples["not a JSON object"] == ["line 6"]
    rows = {r["text"]: r for r in evidence_rows(store)}
    assert rows["Standup moved to 9:30"]["speaker"] == "Sam"
    assert rows["Standup moved to 9:30"]["captured_at"] == datetime(2023, 11, 14, 22, 13, 20)
    assert rows["millis"]["captured_at"] == datetime(2023, 11, 14, 22, 13, 20)
    assert rows["Ship it Friday"]["captured_at"] == datetime(2024, 1, 2, 3, 4, 5)
    assert json.loads(rows["Ship it Friday"]["meta"])["fields"] == {"channel": "team"}  # text, time, speaker: columns
    again = do_import(store, "jsonl", path, **opts)
    assert again.imported == 0 and store.count("evidence", local=True) == 3


# ---- broken files --------------------------------------------------------------------------------


def test_truncated_chatgpt_export_reports_where_and_keeps_what_came_before(store, tmp_path):
    convs = chatgpt_export(5, 2)
    full = json.dumps(convs)
    cut = full.index('"conv3"') + 40  # inside the 4th conversation
    path = tmp_path / "conversations.json"
    path.write_text(full[:cut])
    with pytest.raises(ImportBroken) as exc:
        do_import(store, "chatgpt", path, batch_size=2)  # several batches written before the break
    e = exc.value
    assert e.location["conversation"] == 4 and e.location["complete_conversations"] == 3 and e.location["truncated"]
    assert "conversation #4" in str(e) and "run the same command again" in str(e)
    assert e.report.imported == 6 and e.report.broken_at == e.location and e.report.error
    assert store.count("evidence", local=True) == 6  # conversations 1-3 kept
    # The repaired file brings in the rest and nothing twice.
    path.write_text(full)
    rest = do_import(store, "chatgpt", path)
    assert rest.imported == 4 and rest.skipped_by_reason["already imported"] == 6


def test_corrupt_jsonl_names_the_line_and_keeps_the_lines_before(store, tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"text": "one"}\n{"text": "two"}\n{"text": oops}\n{"text": "four"}\n')
    with pytest.raises(ImportBroken) as exc:
        do_import(store, "jsonl", path, batch_size=1)
    assert exc.value.location["line"] == 3 and not exc.value.location["truncated"]
    assert "log.jsonl:3" in str(exc.value)
    assert sorted(r["text"] for r in evidence_rows(store)) == ["one", "two"]
    path.write_text('{"text": "one"}\n{"text": "two"}\n{"text": "thr')  # cut mid-line: truncated
    with pytest.raises(ImportBroken) as exc:
        do_import(store, "jsonl", path)
    assert exc.value.location["truncated"] and "ends mid-line" in str(exc.value)
    assert store.count("evidence", local=True) == 2


def test_chat_export_is_streamed_not_loaded_whole(tmp_path):
    path = write_json(tmp_path / "conversations.json", chatgpt_export(400, 6))
    size = path.stat().st_size
    read = []
    gen = iter_conversations(str(path), read.append)
    index, conv = next(gen)
    assert index == 0 and conv["id"] == "conv0"
    assert size > 4 * 64 * 1024 and sum(read) <= 2 * 64 * 1024  # one parser block or two, not the file
    gen.close()


# ---- privacy, deletes, extraction -------------------------------------------------------------------


def test_a_secret_in_an_imported_chat_never_reaches_the_disk(store, tmp_path, mirador_home):
    convs = [gpt_conversation("s1", f"keys {FAKE_AWS}", [("user", f"my key is {FAKE_AWS} keep it safe"),
                                                         ("assistant", "Noted.")])]
    chat = write_json(tmp_path / "conversations.json", convs)
    jl = tmp_path / "x.jsonl"
    jl.write_text(json.dumps({"text": f"deploy with {FAKE_AWS}", "note": f"also {FAKE_AWS}"}) + "\n")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "aws.md").write_text(f"# Creds {FAKE_AWS}\n\nkey {FAKE_AWS}\n")
    r1 = do_import(store, "chatgpt", chat)
    r2 = do_import(store, "jsonl", jl)
    r3 = do_import(store, "notes", notes)
    # Counted wherever replaced: 1 in a message, and the title of each of the 2 messages (window and meta).
    assert r1.redactions_by_kind == {"aws_key": 5} and r2.redactions == 2 and r3.redactions == 3
    texts = [r["text"] for r in evidence_rows(store)]
    assert any("[REDACTED:aws_key]" in t for t in texts)
    store.optimize()  # indexes too
    assert files_containing(mirador_home, FAKE_AWS) == []
    assert files_containing(mirador_home, FAKE_AWS[4:]) == []


def test_a_deleted_imported_row_is_not_imported_again(store, tmp_path):
    from memory.store.erasure import forget

    path = write_json(tmp_path / "conversations.json", chatgpt_export(1, 2))
    do_import(store, "chatgpt", path)
    victim = evidence_rows(store)[0]["id"]
    forget(store, [victim])
    again = do_import(store, "chatgpt", path)
    assert again.imported == 0 and again.skipped_by_reason == {
        "system message": 1, "already imported": 1, "deleted by you earlier (never re-imported)": 1}
    assert victim not in {r["id"] for r in evidence_rows(store)}


def test_imported_evidence_goes_through_extraction_like_captured(store, tmp_path):
    from memory.consolidation.extraction import make_extractor, pending_count, run_extraction

    convs = [gpt_conversation("x1", "Runbook", [("user", "The on-call runbook is at https://wiki.example/runbook"),
                                                ("assistant", "Run `kubectl rollout undo deploy/api` to roll back.")])]
    path = write_json(tmp_path / "conversations.json", convs)
    report = do_import(store, "chatgpt", path)
    assert pending_count(store) == report.imported == 2
    out = run_extraction(store, extractor=make_extractor(store, engine="rules"))
    assert out.evidence == 2 and pending_count(store) == 0
    mems = store.list("memory", statuses=[])
    assert mems and all(set(m["provenance"]) <= {r["id"] for r in evidence_rows(store)} for m in mems)
    assert any("wiki.example/runbook" in m["text"] for m in mems)


# ---- pieces -----------------------------------------------------------------------------------------


def test_detect_format_rule(tmp_path):
    chat = tmp_path / "gpt"
    chat.mkdir()
    write_json(chat / "conversations.json", chatgpt_export(1, 2))
    assert detect_format(chat) == "chatgpt"
    assert detect_format(chat / "conversations.json") == "chatgpt"
    assert detect_format(write_json(tmp_path / "c.json", claude_export())) == "claude"
    z = tmp_path / "export.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("conversations.json", json.dumps(claude_export()))
    assert detect_format(z) == "claude"
    (tmp_path / "notes").mkdir()
    assert detect_format(tmp_path / "notes") == "notes"
    assert detect_format(write_text(tmp_path / "a.md", "# hi")) == "notes"
    # Anything else is Mirador's own export, as `mirador import FILE` always read it.
    assert detect_format(write_text(tmp_path / "e.jsonl", '{"kind": "memory", "text": "x"}\n{"text": "y"}\n')) == "mirador"
    assert detect_format(write_text(tmp_path / "own.jsonl", '{"body": "x"}\n')) == "mirador"


def test_zip_export_imports_like_the_file(store, tmp_path):
    z = tmp_path / "chatgpt-export.zip"
    with zipfile.ZipFile(z, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("conversations.json", json.dumps(chatgpt_export(2, 2)))
        zf.writestr("user.json", "{}")
    assert do_import(store, "chatgpt", z).imported == 4
    assert do_import(store, "chatgpt", z).imported == 0


def test_long_message_is_split_into_parts(store, tmp_path):
    long_text = ("word " * 30_000 + "\n\n") * 2  # 300k characters: over the 100k evidence limit
    path = write_json(tmp_path / "conversations.json", [gpt_conversation("L", "long", [("user", long_text)])])
    r = do_import(store, "chatgpt", path)
    assert r.imported == 4
    metas = [json.loads(x["meta"]) for x in evidence_rows(store)]
    assert sorted(m["part"] for m in metas) == [1, 2, 3, 4] and {m["parts"] for m in metas} == {4}
    assert do_import(store, "chatgpt", path).imported == 0
    assert all(len(p) <= 100 for p in split_long("a\n" * 500, 100))


def test_chunk_text_packs_paragraphs_under_headings():
    text = "# A\n\n" + "\n\n".join(f"para {i} " + "x" * 50 for i in range(6)) + "\n\n## B\n\nlast"
    chunks = chunk_text(text, 200)
    assert [h for h, _ in chunks] == ["A", "A", "A > B"]
    assert all(len(c) <= 200 for _, c in chunks)
    assert chunks[-1] == ("A > B", "## B\n\nlast")


def write_text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# ---- the CLI, as a real process ---------------------------------------------------------------------


def _mirador(home: Path, *args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "mirador"
    env = {**os.environ, "MIRADOR_HOME": str(home)}
    return subprocess.run([str(exe), *args], capture_output=True, text=True, env=env, timeout=300)


def test_cli_imports_a_chatgpt_export_as_a_real_process(tmp_path):
    home = tmp_path / "cli-home"
    convs = chatgpt_export(3, 2)
    convs[0]["mapping"]["conv0-n0"]["message"]["content"]["parts"] = [f"secret {FAKE_AWS}"]
    path = write_json(tmp_path / "conversations.json", convs)

    first = _mirador(home, "import", str(path), "--scope", "history", "--json", "--progress")
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    assert (doc["format"], doc["imported"], doc["scope"], doc["redactions"]) == ("chatgpt", 6, "history", 1)
    assert doc["skipped_by_reason"] == {"system message": 3}
    assert "imported" in first.stderr and "100%" in first.stderr  # the progress bar, forced with --progress

    full = path.read_text()
    broken = tmp_path / "broken.json"
    broken.write_text(full[: full.index('"conv2"')] + '"conv2", "title": ')  # cut inside the 3rd conversation
    second = _mirador(home, "import", str(broken), "--format", "chatgpt", "--scope", "history")
    assert second.returncode == 2
    assert "error:" in second.stderr and "conversation #3" in second.stderr
    assert "imported 0 row(s)" in second.stdout and "already imported" in second.stdout
    assert "\r[" not in second.stderr  # stderr is not a terminal and --progress was not given: no bar
    assert files_containing(home, FAKE_AWS) == []


def test_cli_keeps_mirador_exports_apart_from_history_flags(tmp_path, capsys):
    from desktop.cli.main import main

    own = write_text(tmp_path / "own.jsonl", '{"body": "x"}\n')
    assert main(["import", str(own), "--scope", "work"]) == 2
    assert "apply to imported histories" in capsys.readouterr().err
    assert main(["import", str(own)]) == 2  # detected as a Mirador export, which it is not: say what to do
    assert "add --format jsonl" in capsys.readouterr().err
    assert main(["import", str(own), "--text-field", "body", "--json"]) == 0  # a --text-field means jsonl
    assert json.loads(capsys.readouterr().out)["imported"] == 1
    assert main(["import", str(tmp_path / "missing"), "--format", "notes"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_cli_format_choices_match_the_importers():
    """The parser spells the formats out (so `mirador` starts without LanceDB); keep it in step."""
    from desktop.cli.imports import FORMATS as CLI_FORMATS
    from memory.integrations.importers import FORMATS

    assert tuple(CLI_FORMATS) == tuple(FORMATS)


def test_an_import_embeds_with_the_bulk_threads_and_gives_them_back(store, tmp_path, monkeypatch):
    """An import's batches run on models.embedder_bulk_threads torch threads; afterwards the process has
    the one thread capture and search are sized for, also when the import breaks off."""
    import torch

    torch.set_num_threads(1)
    seen = []
    real = store.embedder.embed
    monkeypatch.setattr(store.embedder, "embed", lambda texts: seen.append(torch.get_num_threads()) or real(texts))
    store.config.models.embedder_bulk_threads = 2
    report = do_import(store, "chatgpt", write_json(tmp_path / "c.json", chatgpt_export(n_conv=3, turns=6)),
                       batch_size=4)
    assert report.imported == 18 and len(seen) >= 4 and set(seen) == {2}
    assert torch.get_num_threads() == 1

    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(chatgpt_export(n_conv=4, turns=4))[:-700], encoding="utf-8")
    with pytest.raises(ImportBroken):
        do_import(store, "chatgpt", broken, batch_size=2)
    assert torch.get_num_threads() == 1

    # Mirador's own export, read back into another store: the same.
    from memory.integrations.transfer import import_jsonl, write_export
    from memory.store.core import Store

    out = tmp_path / "all.jsonl"
    with out.open("w") as fh:
        write_export(store, fh, include_evidence=True)
    other = Store(tmp_path / "other")
    monkeypatch.setattr(other.embedder, "embed", lambda texts: seen.append(torch.get_num_threads()) or real(texts))
    seen.clear()
    assert import_jsonl(other, out)["evidence"] >= 18
    assert seen and set(seen) == {2} and torch.get_num_threads() == 1
