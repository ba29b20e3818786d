"""The CLI on a full disk (a real small tmpfs): one clear line and exit code 5, never a traceback or LanceDB's
text; `--idempotency-key` retries store once; `mirador doctor` fails when full; optimize and purge work again."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from desktop.cli.main import main
from tests.memory.mcp_support import ROOT, env_for
from tests.memory.small_disk import fill, small_disk


@pytest.fixture
def disk(tmp_path, monkeypatch):
    with small_disk(tmp_path, 24) as mnt:
        monkeypatch.setenv("MIRADOR_HOME", str(mnt / "home"))
        monkeypatch.setenv("MIRADOR_NO_SERVICE", "1")
        yield mnt


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def mirador(home, *args):
    """The real entry point in a child process, as a person runs it."""
    env = dict(env_for(home), MIRADOR_NO_SERVICE="1")
    return subprocess.run([sys.executable, "-m", "desktop.cli.main", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def clear_line(err: str, home) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: the disk holding {home} is full ("), err
    assert "MIRADOR_HOME" in err and "`mirador purge`" in err
    assert not re.search(r"Traceback|\.rs:\d+|cargo|LanceError|report it", err), err


def test_writes_fail_with_one_line_and_a_keyed_retry_stores_once(disk, capsys):
    home = disk / "home"
    code, first_id, _ = run(capsys, "evidence", "add", "stored before the disk filled")
    assert code == 0
    filler = fill(disk)

    done = mirador(home, "evidence", "add", "a note while full", "--idempotency-key", "note-1")
    assert done.returncode == 5 and done.stdout == ""
    clear_line(done.stderr, home)
    code, out, err = run(capsys, "add", "The build box is bx-9", "--idempotency-key", "mem-1")
    assert code == 5 and out == ""
    clear_line(err, home)
    code, _, err = run(capsys, "optimize")
    assert code == 5
    clear_line(err, home)

    os.remove(filler)
    code, evd, _ = run(capsys, "evidence", "add", "a note while full", "--idempotency-key", "note-1")
    assert code == 0
    code, again, err = run(capsys, "evidence", "add", "a note while full", "--idempotency-key", "note-1")
    assert code == 0 and again == evd and "stored by an earlier call with this key" in err
    code, mem, _ = run(capsys, "add", "The build box is bx-9", "--idempotency-key", "mem-1")
    code2, mem2, _ = run(capsys, "add", "The build box is bx-9", "--idempotency-key", "mem-1", "--json")
    assert code == code2 == 0 and json.loads(mem2)["id"] == mem.strip()
    code, out, err = run(capsys, "add", "Another fact", "--idempotency-key", "mem-1")
    assert code == 2 and "was used for a different memory" in err

    listed = json.loads(run(capsys, "list", "--evidence", "--json")[1])
    assert sorted(r["text"] for r in listed) == ["a note while full", "stored before the disk filled"]
    assert len(json.loads(run(capsys, "list", "--json")[1])) == 1
    assert first_id.strip() in {r["id"] for r in listed}
    assert run(capsys, "optimize")[0] == 0
    assert run(capsys, "purge")[0] == 0


def test_doctor_fails_on_a_full_disk_and_warns_when_low(disk, capsys):
    home = disk / "home"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text("[store]\ndisk_warn_mb = 2\ndisk_fail_mb = 1\n")
    from desktop.cli.doctor import check_disk

    assert check_disk()[0] == "ok"
    (home / "config.toml").write_text("[store]\ndisk_warn_mb = 100\ndisk_fail_mb = 1\n")
    status, detail, fix = check_disk()
    assert status == "WARN" and "store.disk_warn_mb" in detail and "MIRADOR_HOME" in fix

    filler = fill(disk)
    code, out, _ = run(capsys, "doctor", "--json")
    disk_check = next(c for c in json.loads(out) if c["name"] == "disk space")
    assert code == 1 and disk_check["status"] == "FAIL" and " is full (" in disk_check["detail"]
    assert "report" not in (disk_check["fix"] or "")
    os.remove(filler)
