"""A command that did its work exits with its status, never a signal (issue 31 item 7).

LanceDB's native threads could release the GIL while the interpreter finalized, and CPython then aborted
the process (SIGABRT, exit -6) after the answer was printed (lance-format/lance#4152). The entry point now
runs what an ordinary exit runs and leaves without finalization; these tests run real processes.
The suite runs the issue's full count, 200 searches (about 2.5 minutes here); MIRADOR_EXIT_RUNS=N runs N.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.memory.mcp_support import INIT, ROOT, env_for

RUNS = int(os.environ.get("MIRADOR_EXIT_RUNS", "200"))
CLI = [sys.executable, "-m", "desktop.cli.main"]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """A small store with evidence and memories in `work`, created once for the module."""
    from memory.store.core import EvidenceSpec, Store

    home = tmp_path_factory.mktemp("exit") / "home"
    store = Store(home)
    store.add_evidence_batch([EvidenceSpec(text=f"planning the launch with Sam, note {i}", app="kitty", scope="work")
                              for i in range(8)])
    store.add_memory("Met Sam to plan the launch", scope="work")
    return home


def _cli(home: Path, *args: str, timeout: float = 180, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], cwd=ROOT, env=env_for(home), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, **kw)


def test_many_searches_exit_zero_with_their_whole_answer(home):
    def one(_):
        p = _cli(home, "search", "launch", "--evidence", "--json", "--scope", "work")
        return p.returncode, p.stdout, p.stderr

    with ThreadPoolExecutor(2) as pool:  # two at a time: what this 2-core machine runs without starving
        results = list(pool.map(one, range(RUNS)))
    bad = [(code, err[-500:]) for code, _, err in results if code != 0]
    assert bad == [], f"{len(bad)} of {RUNS} searches exited abnormally: {bad[:3]}"
    for _, out, _ in results:
        hits = json.loads(out)  # complete JSON every time
        assert hits and any(h["kind"] == "evidence" for h in hits)


def test_exit_codes_are_kept(home):
    assert _cli(home, "--version").returncode == 0
    assert _cli(home, "--help").returncode == 0
    bad = _cli(home, "no-such-command")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
    missing = _cli(home, "show", "mem_nope")
    assert missing.returncode == 2 and missing.stderr.startswith("error: no row with id mem_nope")
    assert _cli(home, "stats", "--json").returncode == 0


def test_a_closed_stdout_is_not_reported_as_an_error(home):
    """`mirador status | head -1`: the reader went away; stop quietly (Python docs, "Note on SIGPIPE")."""
    for args in (["status"], ["list", "--json"]):
        r, w = os.pipe()
        os.close(r)  # the reader is gone before the command writes
        try:
            p = subprocess.run([*CLI, *args], cwd=ROOT, env=env_for(home), stdout=w, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, text=True, timeout=180)
        finally:
            os.close(w)
        assert p.returncode == 1, (args, p.stderr)
        assert "BrokenPipeError" not in p.stderr and "Exception ignored" not in p.stderr, (args, p.stderr)


EXIT_HOOKS = textwrap.dedent("""
    import atexit, multiprocessing, sys, threading, time
    from pathlib import Path
    out = Path(sys.argv[1])

    def later():
        time.sleep(0.5)
        (out / "thread").write_text("joined")

    if __name__ == "__main__":
        child = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(120,), daemon=True)
        child.start()
        (out / "child").write_text(str(child.pid))
        threading.Thread(target=later).start()  # non-daemon: an ordinary exit waits for it
        atexit.register(lambda: (out / "atexit").write_text("ran"))
        from desktop.cli.main import main
        sys.argv = ["mirador", "--version"]
        main()
        (out / "after").write_text("main returned")
""")


def test_what_an_ordinary_exit_runs_still_runs(tmp_path, mirador_home):
    """Non-daemon threads are joined, atexit handlers run, daemon children (the LLM worker) are stopped."""
    p = subprocess.run([sys.executable, "-c", EXIT_HOOKS, str(tmp_path)], cwd=ROOT, env=env_for(mirador_home),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.startswith("mirador "), p.stderr
    assert (tmp_path / "thread").read_text() == "joined"
    assert (tmp_path / "atexit").read_text() == "ran"
    assert not (tmp_path / "after").exists(), "the process entry point ends the process"
    pid = int((tmp_path / "child").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_stdio_server_exits_zero_when_the_client_closes(home):
    """`mirador mcp` ends through the same entry point: after a search, closing stdin ends it with 0."""
    proc = subprocess.Popen([*CLI, "mcp", "--scope", "work", "--name", "exit"], cwd=ROOT, env=env_for(home),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "memory_search", "arguments": {"query": "launch"}}}
    try:
        for msg in (INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"}, call):
            proc.stdin.write(json.dumps(msg) + "\n")
            proc.stdin.flush()
        replies = {}
        while 2 not in replies:  # the search ran (its scanner threads exist) before the client leaves
            line = proc.stdout.readline()
            assert line, proc.stderr.read()[-1000:]
            msg = json.loads(line)
            replies[msg.get("id")] = msg
        proc.stdin.close()
        assert proc.wait(timeout=120) == 0, proc.stderr.read()[-1000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "result" in replies[2], replies


def test_status_is_read_as_sys_exit_reads_it(mirador_home):
    """A handler returning None exits 0; `sys.exit("message")` prints it and exits 1; an int is itself."""
    script = ("import sys\nimport desktop.cli.main as m\nwhat = sys.argv[1]\n"
              "def dispatch(_argv):\n"
              "    if what == 'none':\n        return None\n"
              "    if what == 'text':\n        sys.exit('stopped: why')\n"
              "    return 2\n"
              "m._dispatch = dispatch\nm.main()\n")
    got = {}
    for what in ("none", "text", "int"):
        p = subprocess.run([sys.executable, "-c", script, what], cwd=ROOT, env=env_for(mirador_home),
                           capture_output=True, text=True, timeout=120)
        got[what] = (p.returncode, p.stderr.strip())
    assert got == {"none": (0, ""), "text": (1, "stopped: why"), "int": (2, "")}
