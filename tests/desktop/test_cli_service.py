"""The CLI hands search, recall and evidence add to a running service: a real `mirador serve` child process on a
real LanceDB temp home, real `mirador` processes as clients. Via the service or in-process, the output is the same."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys

import httpx
import pytest

from desktop.runtime.local_endpoint import ENDPOINT_FILE, ROUTE, Endpoint, read_endpoint, write_endpoint
from tests.memory.mcp_support import ROOT, env_for, free_port, start_server, stop_server

ANSWERED = "answered by the running Mirador service"  # what -v logs when the service answered
AT = "2026-11-30T10:00:00+00:00"


def cli(home, *args: str, service: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess:
    """`mirador -v ARGS` in a new process on `home`; service=False forbids using a running service."""
    env = env_for(home)
    env.pop("MIRADOR_NO_SERVICE", None)
    if not service:
        env["MIRADOR_NO_SERVICE"] = "1"
    return subprocess.run([sys.executable, "-m", "desktop.cli.main", "-v", *args], cwd=ROOT, env=env, input=stdin,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from memory.store.core import Store

    home = tmp_path_factory.mktemp("cli_service")
    store = Store(home)
    store.add_memory("We picked PostgreSQL for billing because we need transactional DDL", scope="work")
    store.add_memory("I prefer green tea in the afternoon", scope="personal")
    store.add_evidence("Sam: the billing migration to PostgreSQL 16 is done", app="slack", scope="work")
    store.add_evidence("Ana: the staging kafka volume is full again", app="kitty", scope="work")
    proc = start_server(home, free_port(), home / "serve.log")
    try:
        assert read_endpoint(home) is not None, (home / "serve.log").read_text()
        yield {"home": home, "store": store, "proc": proc}
    finally:
        stop_server(proc)


@pytest.mark.parametrize("args", [
    ["search", "why postgres"], ["search", "why postgres", "--json"],
    ["search", "billing", "--evidence", "--scope", "work", "--json"], ["search", "nothing like this", "--limit", "1"],
    ["recall", "what did we pick for billing?", "--budget", "200"],
    ["recall", "what did we pick for billing?", "--json"],
])
def test_reads_print_the_same_via_the_service(served, args):
    via, local = cli(served["home"], *args), cli(served["home"], *args, service=False)
    assert via.returncode == local.returncode == 0, via.stderr + local.stderr
    assert ANSWERED in via.stderr and ANSWERED not in local.stderr
    assert via.stdout.strip()
    if "--json" in args and args[0] == "recall":
        # recall's scores decay with age, so two runs seconds apart differ in the sixth decimal, in-process too
        assert _same(json.loads(via.stdout), json.loads(local.stdout))
    else:
        assert via.stdout == local.stdout


def _same(a, b) -> bool:
    """Equal JSON documents, floats within 1e-4."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, int | float) and isinstance(b, int | float) and abs(a - b) <= 1e-4
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_errors_are_the_same_via_the_service(served):
    args = ["search", "x", "--evidence", "--type", "semantic"]
    via, local = cli(served["home"], *args), cli(served["home"], *args, service=False)
    assert via.returncode == local.returncode == 2
    assert ANSWERED in via.stderr
    line = [ln for ln in via.stderr.splitlines() if ln.startswith("error:")]
    assert line and line == [ln for ln in local.stderr.splitlines() if ln.startswith("error:")]
    assert via.stdout == local.stdout == ""


def _normal(doc: dict, ids: set[str]) -> dict:
    """A row without what differs between two adds of the same text (its id, times, place in a run)."""
    text = json.dumps(doc, sort_keys=True)
    for i in ids:
        text = text.replace(i, "ID")
    doc = json.loads(text)
    for k in ("created_at", "updated_at", "run_id", "run_pos", "at", "id"):
        doc.pop(k, None)
    return doc


def _audit(store, entity_id: str) -> list[dict]:
    cols = ["actor", "action", "entity_kind", "entity_id", "scope", "before", "after"]
    return [r for r in store.rows("audit", None, cols) if entity_id in (r.get("entity_id") or "")
            or entity_id in (r.get("after") or "")]


@pytest.mark.parametrize("as_json", [False, True])
def test_evidence_add_via_the_service_writes_and_audits_as_in_process(served, as_json):
    home, store = served["home"], served["store"]
    args = ["evidence", "add", "Ana: the deploy freeze starts on Friday", "--app", "slack", "--scope", "work",
            "--at", AT] + (["--json"] if as_json else [])
    via, local = cli(home, *args), cli(home, *args, service=False)
    assert via.returncode == local.returncode == 0, via.stderr + local.stderr
    assert ANSWERED in via.stderr and ANSWERED not in local.stderr
    if as_json:
        a, b = json.loads(via.stdout), json.loads(local.stdout)
        ids = {a["id"], b["id"]}
        assert a["id"] != b["id"]  # two rows: the in-process run did not repeat the service's
        assert _normal(a, ids) == _normal(b, ids)
    else:
        assert re.fullmatch(r"evd_\w+\n", via.stdout) and re.fullmatch(r"evd_\w+\n", local.stdout)
        a, b = {"id": via.stdout.strip()}, {"id": local.stdout.strip()}
        ids = {a["id"], b["id"]}
    rows = store.get_many("evidence", list(ids), ["id", "text", "app", "scope", "captured_at"])
    assert len(rows) == 2
    ra, rb = rows[a["id"]], rows[b["id"]]
    assert {k: v for k, v in ra.items() if k != "id"} == {k: v for k, v in rb.items() if k != "id"}
    audit_a, audit_b = _audit(store, a["id"]), _audit(store, b["id"])
    assert len(audit_a) == len(audit_b) == 1
    assert _normal(audit_a[0], ids) == _normal(audit_b[0], ids)
    assert audit_a[0]["actor"] == "person"


def test_evidence_add_reads_stdin_once_via_the_service(served):
    home, store = served["home"], served["store"]
    via = cli(home, "evidence", "add", "-", "--scope", "work", stdin="Lee: standup moves to 9:30\n")
    assert via.returncode == 0 and ANSWERED in via.stderr, via.stderr
    row = store.get_many("evidence", [via.stdout.strip()], ["id", "text"])[via.stdout.strip()]
    assert row["text"] == "Lee: standup moves to 9:30"


def test_endpoint_file_is_private_and_names_a_live_service(served):
    p = served["home"] / ENDPOINT_FILE
    st = os.stat(p)
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.getuid()
    ep = read_endpoint(served["home"])
    assert ep.pid == served["proc"].pid and ep.url.startswith("http://127.0.0.1:")
    assert ep.secret not in (served["home"] / "serve.log").read_text()  # never logged


def _post(ep: Endpoint, headers: dict, home) -> httpx.Response:
    body = {"command": "search", "args": {"query": "tea", "json": True}, "home": str(home), "clock": []}
    return httpx.post(f"http://127.0.0.1:{ep.port}{ROUTE}", json=body, headers=headers, timeout=30)


def test_the_route_needs_the_secret_and_a_local_host(served):
    ep = read_endpoint(served["home"])
    assert _post(ep, {}, served["home"]).status_code == 401
    assert _post(ep, {"Authorization": "Bearer not-the-secret"}, served["home"]).status_code == 401
    assert _post(ep, {"Authorization": f"Basic {ep.secret}"}, served["home"]).status_code == 401
    good = {"Authorization": f"Bearer {ep.secret}"}
    assert _post(ep, {**good, "Host": f"evil.example:{ep.port}"}, served["home"]).status_code == 421
    assert _post(ep, {**good, "Origin": "http://evil.example"}, served["home"]).status_code == 403
    # the right secret for another data dir's request: refused, the caller works in-process
    assert _post(ep, good, served["home"] / "elsewhere").status_code == 409


def test_another_home_never_uses_this_service(served, tmp_path):
    from memory.store.core import Store

    other = tmp_path / "other"
    Store(other).add_memory("Only the other home knows about the lighthouse", scope="work")
    # even a copy of this service's endpoint file (0600, live pid, right secret) does not make it answer
    write_endpoint(other, read_endpoint(served["home"]))
    via, local = cli(other, "search", "lighthouse", "--json"), cli(other, "search", "lighthouse", "--json",
                                                                   service=False)
    assert via.returncode == 0 and ANSWERED not in via.stderr
    assert via.stdout == local.stdout and "lighthouse" in via.stdout and "PostgreSQL" not in via.stdout


def test_stale_endpoint_falls_back_in_process(served, tmp_path):
    from memory.store.core import Store

    home = tmp_path / "stale"
    Store(home).add_memory("The office plant needs water on Mondays", scope="work")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    port = free_port()  # nobody listens there
    for pid in (dead.pid, os.getpid()):  # a dead service, and a live process that refuses connections
        write_endpoint(home, Endpoint(f"http://127.0.0.1:{port}{ROUTE}", "s3cret", pid))
        via, local = cli(home, "search", "plant", "--json"), cli(home, "search", "plant", "--json", service=False)
        assert via.returncode == local.returncode == 0, via.stderr
        assert via.stdout == local.stdout and "plant" in via.stdout
        assert ANSWERED not in via.stderr


def test_endpoint_file_removed_when_the_service_stops(tmp_path):
    from memory.store.core import Store

    home = tmp_path / "h"
    Store(home).add_memory("Short-lived service", scope="work")
    proc = start_server(home, free_port(), tmp_path / "serve.log")
    try:
        assert read_endpoint(home) is not None
        assert stat.S_IMODE(os.stat(home / ENDPOINT_FILE).st_mode) == 0o600
    finally:
        stop_server(proc)
    assert proc.returncode == 0
    assert not (home / ENDPOINT_FILE).exists()
