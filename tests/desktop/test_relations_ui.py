"""Relations on the desktop: the browser's detail pane lists them and removes one through a worker; the CLI."""

from __future__ import annotations

import json

from PySide6.QtCore import QUrl

from desktop.cli.main import main
from memory.graph import relations as R
from tests.desktop.conftest import click_row, open_browser, wait_idle


def test_detail_lists_relations_and_remove_deletes_one_from_the_store(qtbot, jobs, store):
    decision = store.add_memory("We moved the build to self-hosted runners", scope="work")["id"]
    reason = store.add_memory("Hosted CI minutes ran out every month", scope="work")["id"]
    alert = store.add_memory("The nightly cost alert fired", scope="work")["id"]
    because = R.add_relation(store, decision, "BECAUSE", reason)
    triggered = R.add_relation(store, alert, "TRIGGERED", decision)
    browser = open_browser(qtbot, jobs, store)
    click_row(qtbot, browser, decision)

    shown = browser.detail.toPlainText()
    assert "Linked memories — 2" in shown
    assert "Because of Hosted CI minutes ran out every month" in shown
    assert "Triggered by The nightly cost alert fired" in shown and "BECAUSE" not in shown
    html = browser.detail.toHtml()
    assert f"unrelate:{because['id']}" in html and f"unrelate:{triggered['id']}" in html

    with qtbot.waitSignal(browser.detail.relation_removed, timeout=30_000) as sig:
        browser.detail.anchorClicked.emit(QUrl(f"unrelate:{because['id']}"))  # what clicking "remove" sends
    wait_idle(qtbot, jobs)
    assert sig.args == [because["id"]]
    # Gone from the store, and the pane was reloaded without it; the other edge and both memories stay.
    assert [e["id"] for e in store.rows("relations", local=True)] == [triggered["id"]]
    shown = browser.detail.toPlainText()
    assert "Linked memories — 1" in shown and "Hosted CI minutes" not in shown and "Triggered by" in shown
    assert store.get(reason)["status"] == "active" and browser.detail.row["id"] == decision
    audit = [a for a in store.rows("audit")
             if a["entity_kind"] == "relation" and a["action"] == "delete"]
    assert [(a["entity_id"], a["actor"]) for a in audit] == [(because["id"], "person")]


def test_cli_relate_related_chain_unrelate(capsys, store):
    ev = store.add_evidence("retro notes: the cache was stale", scope="work")
    a = store.add_memory("We flush the cache on every deploy", scope="work")["id"]
    b = store.add_memory("Stale cache served old prices", scope="work")["id"]

    def run(*args):
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    code, out, _ = run("relate", a, "because", b, "--evidence", ev["id"], "--json")
    edge = json.loads(out)
    assert code == 0 and edge["created"] and edge["relation"] == "BECAUSE" and edge["provenance"] == [ev["id"]]
    code, out, _ = run("relate", a, "BECAUSE", b)
    assert code == 0 and out.startswith("already there")
    code, out, _ = run("related", b, "--json")
    assert [(r["direction"], r["other"]["id"]) for r in json.loads(out)["relations"]] == [("in", a)]
    code, out, _ = run("chain", a, "--depth", "2", "--json")
    [hop] = json.loads(out)["hops"]
    assert hop["to"] == b and [e["id"] for e in hop["evidence"]] == [ev["id"]]
    code, out, _ = run("chain", a)
    assert "BECAUSE " + b in out and "evidence " + ev["id"] in out
    code, out, err = run("relate", a, "CAUSES", b)
    assert code != 0 and "unknown relation" in err and "BECAUSE" in err
    code, out, err = run("chain", a, "--depth", "9")
    assert code != 0 and "depth must be between 1 and 6" in err
    code, out, _ = run("unrelate", a, "BECAUSE", b)
    assert code == 0 and out.startswith("removed")
    code, out, err = run("unrelate", edge["id"])
    assert code != 0 and "no relation" in err
    code, out, _ = run("related", a)
    assert out.strip() == "no relations"
