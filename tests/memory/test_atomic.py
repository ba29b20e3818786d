"""Atomic writes: each writer has its own temporary file, so concurrent writers of one file all finish."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from memory.store.atomic import atomic_path, write_atomic
from memory.store.embedder_record import EMBEDDER_RECORD, embedder_record, write_record


def _race(n: int, write) -> list[BaseException]:
    start = threading.Barrier(n)
    errors: list[BaseException] = []

    def run(k: int) -> None:
        start.wait()
        try:
            for i in range(50):
                write(k, i)
        except BaseException as e:  # noqa: BLE001  every failure is the test's finding
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_two_threads_writing_the_embedder_record_at_once_both_succeed(tmp_path: Path):
    errors = _race(2, lambda k, i: write_record(tmp_path, {"tuned": bool(k), "weights": f"w{k}-{i}"}))
    assert errors == []
    made = embedder_record(tmp_path)  # whole JSON from one of the writers, never half a file
    assert made is not None and made["weights"] in {"w0-49", "w1-49"}
    assert [p.name for p in tmp_path.iterdir()] == [EMBEDDER_RECORD]  # no temporary file left behind


def test_concurrent_writers_never_leave_a_torn_file(tmp_path: Path):
    target = tmp_path / "state.json"
    errors = _race(4, lambda k, i: write_atomic(target, json.dumps({"k": k, "i": i, "pad": "x" * 10_000})))
    assert errors == []
    assert json.loads(target.read_text())["i"] == 49
    assert list(tmp_path.iterdir()) == [target]


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path: Path):
    target = tmp_path / "f.txt"
    write_atomic(target, "old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("disk full")
    assert target.read_text() == "old"
    assert list(tmp_path.iterdir()) == [target]


def test_mode_is_what_the_caller_asks(tmp_path: Path):
    write_atomic(tmp_path / "secret", b"token", mode=0o600)
    assert (tmp_path / "secret").stat().st_mode & 0o777 == 0o600


def test_default_mode_is_owner_only_whatever_the_umask(tmp_path: Path):
    import os

    old = os.umask(0o022)  # a umask that would make open() give 0644
    try:
        write_atomic(tmp_path / "state.json", "{}")
    finally:
        os.umask(old)
    assert (tmp_path / "state.json").stat().st_mode & 0o777 == 0o600
