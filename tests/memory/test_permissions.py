"""The data folder is its owner's alone: folders 0700, files 0600, whoever wrote them (issue 40, permissions).

Every test starts from a umask of 0o022 (what a login shell gives), so a private result is the store's doing,
not the suite's: an earlier test's Store would otherwise have left the process umask private already.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from memory.store import permissions
from memory.store.core import Store
from tests.conftest import files_containing

posix_only = pytest.mark.skipif(os.name != "posix", reason="mode bits mean nothing on Windows (ACLs do)")
pytestmark = posix_only


@pytest.fixture(autouse=True)
def login_umask():
    """Start each test with a shell's umask and give the suite back the one it had."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def modes(home: Path) -> dict[str, int]:
    """Every path under home (home included), links not followed, and its permission bits."""
    out = {".": stat.S_IMODE(os.stat(home).st_mode)}
    for root, dirs, files in os.walk(home):
        for name in dirs + files:
            p = Path(root) / name
            st = os.lstat(p)
            if not stat.S_ISLNK(st.st_mode):
                out[str(p.relative_to(home))] = stat.S_IMODE(st.st_mode)
    return out


def assert_private(home: Path) -> dict[str, int]:
    seen = modes(home)
    wide = {p: oct(m) for p, m in seen.items()
            if m != (0o700 if os.path.isdir(home / p) else 0o600)}
    assert wide == {}
    return seen


def fill(store: Store, token: str = "private-token") -> None:
    """Write through every kind of writer: LanceDB tables (memories, evidence, vault, audit, indexes after
    optimize), the key file, a sealed frame, the config file."""
    from PIL import Image

    from capture.frames import save_thumbnail
    from memory.config import save_config

    store.add_memory(f"Dentist on Tuesday {token}", scope="personal")
    store.add_memory("Staging database password", type="vault", value=f"hunter2-{token}", scope="work")
    rel = save_thumbnail(Image.new("RGB", (64, 48), "white"), store.home, datetime(2026, 1, 5), "evd_perm",
                         keys=store.keys)
    store.add_evidence(f"screen says {token}", source="screen", app="Editor", frame_path=rel)
    store.optimize()
    save_config(store.config, store.home)


def test_a_fresh_store_makes_every_folder_0700_and_every_file_0600(mirador_home):
    store = Store(mirador_home)
    fill(store)
    seen = assert_private(mirador_home)
    # The walk saw what matters, not an empty folder: Lance data and versions, the key, a frame, the config.
    assert any(p.startswith("lancedb/memories.lance/data/") for p in seen)
    assert any("_versions" in p for p in seen) and any(p.startswith("frames/2026-01-05/") for p in seen)
    assert {"data-key.json", "config.toml"} <= set(seen)
    assert os.umask(0o022) & 0o077 == 0o077  # the store left the process private for later writers


def test_the_cli_makes_what_it_writes_private_from_its_start(mirador_home, capsys):
    from desktop.cli.main import main

    assert main(["add", "a note for the export"]) == 0
    out = mirador_home / "backup.jsonl"
    assert main(["export", "--out", str(out)]) == 0  # an export written inside the data folder
    assert "a note for the export" in out.read_text()
    assert_private(mirador_home)


def test_restrict_umask_never_widens_a_stricter_one():
    os.umask(0o277)
    assert permissions.restrict_umask() == 0o277
    assert os.umask(0o022) == 0o277


def test_a_wider_folder_from_before_is_tightened_when_the_store_opens(mirador_home, tmp_path, caplog):
    store = Store(mirador_home)
    row = store.add_memory("kept across the tightening", scope="personal")
    del store
    elsewhere = tmp_path / "elsewhere"  # the person's other files: a link inside the folder must not change them
    elsewhere.mkdir()
    elsewhere.chmod(0o755)
    outside = elsewhere / "notes.txt"
    outside.write_text("not Mirador's")
    outside.chmod(0o644)
    (mirador_home / "link-out").symlink_to(outside)
    (mirador_home / "link-dir").symlink_to(elsewhere)
    loosened = 0
    for p in [mirador_home, *mirador_home.rglob("*")]:
        if p.is_symlink():
            continue
        p.chmod(0o755 if p.is_dir() else 0o644)  # what an older version, or `cp -r`, left
        loosened += 1
    assert len(permissions.loose_paths(mirador_home)) == loosened

    with caplog.at_level(logging.WARNING, logger="memory.store.permissions"):
        store = Store(mirador_home)
    assert f"{loosened} path(s) under {mirador_home} could be read by other users" in caplog.text
    assert_private(mirador_home)
    assert permissions.loose_paths(mirador_home) == []
    # Links were neither followed nor changed: the file and folder they point at keep their modes.
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644 and stat.S_IMODE(elsewhere.stat().st_mode) == 0o755
    assert store.get(row["id"])["text"] == "kept across the tightening"  # the store works after it
    # A second open has nothing to change, and says nothing at warning level.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="memory.store.permissions"):
        Store(mirador_home)
    assert permissions.tighten(mirador_home) == 0 and caplog.text == ""


def test_tighten_keeps_the_owners_own_bits_and_skips_what_vanishes(tmp_path):
    home = tmp_path / "h"
    home.mkdir(mode=0o777)
    home.chmod(0o777)
    script = home / "hook.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    readonly = home / "sealed"
    readonly.write_text("x")
    readonly.chmod(0o444)
    assert permissions.tighten(home) == 3
    # Group and other bits go; the owner keeps execute on a script, and a read-only file stays read-only.
    assert [stat.S_IMODE(p.stat().st_mode) for p in (home, script, readonly)] == [0o700, 0o700, 0o400]
    assert permissions.tighten(tmp_path / "gone") == 0 and permissions.loose_paths(tmp_path / "gone") == []


def _age_folders(home: Path, seconds: float = 86400) -> None:
    """Make every folder look untouched for a day, as yesterday's frames and Lance's older files are."""
    old = time.time() - seconds
    for root, _dirs, _files in os.walk(home):
        os.utime(root, (old, old))


def test_later_opens_read_only_the_folders_that_changed_and_doctor_reads_everything(tmp_path):
    home = tmp_path / "h"
    day = home / "frames" / "2026-01-05"
    day.mkdir(parents=True, mode=0o700)
    for p in (home, home / "frames"):
        p.chmod(0o700)
    for i in range(3):
        (day / f"evd_{i}.webp").write_bytes(b"x")  # 0o644: the login umask
    assert permissions.tighten(home) == 3 and (home / permissions.STAMP).exists()
    assert stat.S_IMODE((home / permissions.STAMP).stat().st_mode) == 0o600
    _age_folders(home)

    # A file another program adds with wide bits changes its folder: the next open finds it.
    (day / "new.webp").write_bytes(b"y")
    assert stat.S_IMODE((day / "new.webp").stat().st_mode) == 0o644
    assert permissions.tighten(home) == 1
    _age_folders(home)

    # A file chmod-ed wider by hand in an unchanged private folder is not read at open (nobody else can
    # reach it: every folder above it is 0700); the doctor's full walk finds and fixes it.
    (day / "evd_0.webp").chmod(0o644)
    assert permissions.tighten(home) == 0
    assert permissions.loose_paths(home) == [str(day / "evd_0.webp")]
    assert permissions.tighten(home, full=True) == 1 and permissions.loose_paths(home) == []

    # `chmod -R` opens the folders too: a wide folder has all its files read whatever its mtime.
    for p in (day, *day.iterdir()):
        p.chmod(0o755 if p.is_dir() else 0o644)
    _age_folders(home)
    assert permissions.tighten(home) == 5 and permissions.loose_paths(home) == []


def test_a_stamp_from_the_future_is_not_trusted(tmp_path):
    home = tmp_path / "h"
    home.mkdir(mode=0o700)
    assert permissions.tighten(home) == 0
    future = time.time() + 86400  # the clock went back since the stamp was written
    os.utime(home / permissions.STAMP, (future, future))
    (home / "wide").write_text("x")
    _age_folders(home)
    assert permissions.tighten(home) == 1


def _as_nobody(cmd: str) -> subprocess.CompletedProcess:
    if shutil.which("runuser"):
        argv = ["runuser", "-u", "nobody", "--", "/bin/sh", "-c", cmd]
    else:
        argv = ["su", "nobody", "-s", "/bin/sh", "-c", cmd]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def _other_user_available() -> str | None:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root, to run grep as the user nobody"
    try:
        import pwd

        pwd.getpwnam("nobody")
    except (ImportError, KeyError):
        return "this system has no user nobody to read as"
    if not (shutil.which("runuser") or shutil.which("su")):
        return "neither runuser nor su is installed"
    return None


@pytest.mark.skipif(_other_user_available() is not None, reason=str(_other_user_available()))
def test_another_user_reads_nothing_of_the_data_folder():
    token = f"tok{uuid.uuid4().hex}"
    parent = Path(tempfile.mkdtemp(dir="/tmp", prefix="mirador-perm-"))
    try:
        parent.chmod(0o711)  # others may pass through it, as through a home directory
        home = parent / "mirador"
        control = parent / "control.txt"  # what any program writing with a 0o022 umask leaves
        control.write_text(f"{token}\n")
        control.chmod(0o644)
        store = Store(home)
        fill(store, token)
        assert stat.S_IMODE(home.stat().st_mode) == 0o700

        # The probe works: nobody does read a file that is open to others.
        seen = _as_nobody(f"grep -la {token} {control}")
        assert seen.returncode == 0 and str(control) in seen.stdout

        res = _as_nobody(f"grep -rla {token} {home}")
        assert res.returncode == 2 and res.stdout == ""
        assert "Permission denied" in res.stderr
        # Even if the person opened the top folder to others, everything inside stays closed.
        home.chmod(0o755)
        res = _as_nobody(f"grep -rla {token} {home}")
        assert res.stdout == "" and "Permission denied" in res.stderr
        listed = _as_nobody(f"ls {home}/lancedb")
        assert listed.returncode != 0 and listed.stdout == ""
        # As root (the owner here), the token's rows are there (sealed: found by their keyed search terms): the
        # grep above failed for want of permission alone.
        assert files_containing(home, token)
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def test_doctor_reports_a_loosened_path_and_fixes_it(mirador_home):
    from desktop.cli.doctor import OK, WARN, check_data_dir

    store = Store(mirador_home)
    store.add_memory("a note", scope="personal")
    key = mirador_home / "embedder.json"
    key.chmod(0o644)
    (mirador_home / "lancedb").chmod(0o755)

    status, detail, fix = check_data_dir()
    assert status == WARN and detail.startswith(f"2 path(s) in {mirador_home} could be read by other users")
    assert "embedder.json" in detail and "lancedb" in detail and "fixed now" in detail and fix is None
    assert permissions.loose_paths(mirador_home) == []
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert check_data_dir()[0] == OK  # nothing left to report


def test_doctor_names_a_few_and_counts_the_rest(mirador_home):
    from desktop.cli.doctor import check_data_dir

    mirador_home.mkdir(mode=0o700)
    for i in range(5):
        (mirador_home / f"f{i}").write_text("x")  # 0o644 under the login umask
    status, detail, _ = check_data_dir()
    assert status == "WARN" and detail.startswith("5 path(s)") and "and 2 more" in detail


def test_doctor_fails_with_a_fix_for_paths_it_cannot_change(mirador_home, monkeypatch):
    """A file of another owner (a `sudo mirador` run) cannot be chmod-ed by the person: its chmod is refused
    here as the kernel refuses it (EPERM), since as root every chmod would succeed."""
    from desktop.cli.doctor import FAIL, check_data_dir

    mirador_home.mkdir(mode=0o700)
    theirs = mirador_home / "written-by-root"
    theirs.write_text("x")
    (mirador_home / "mine").write_text("x")
    real_chmod = os.chmod

    def chmod(path, mode, **kw):
        if Path(path) == theirs:
            raise PermissionError(1, "Operation not permitted", str(path))
        real_chmod(path, mode, **kw)

    monkeypatch.setattr(permissions.os, "chmod", chmod)
    status, detail, fix = check_data_dir()
    assert status == FAIL and detail.startswith(f"1 path(s) in {mirador_home} can be read by other users")
    assert "written-by-root" in detail
    assert fix.startswith(f"they belong to another user (a `sudo mirador` run?): run `sudo chown -R {permissions.user_name()} {mirador_home}`")
    assert permissions.loose_paths(mirador_home) == [str(theirs)]  # what could be fixed was
