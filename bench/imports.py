"""Import throughput: a synthetic ChatGPT export of N messages through `run_import`; prints one JSON object.

Measures the first import (redact → key → existence check → embed → write, rows/s), the re-import of the
same file (every row skipped by key, rows/s), and the process's peak RSS. The embedder is the bundled
all-MiniLM-L6-v2 (the real one: embedding dominates the first import).

    .venv/bin/python bench/imports.py [--messages 10000] [--per-conversation 20] [--batch-size 256]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# The bench's stores are throwaway: their data key is wrapped by a passphrase, never put in the person's keyring
# (on a machine without a keyring, as here, that is also the only way to open them without a prompt).
os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
os.environ.setdefault("MIRADOR_PASSPHRASE", "a throwaway passphrase for the bench's stores")

TOPICS = ["billing", "search", "deploy", "auth", "cache", "queue", "metrics", "backup", "ledger", "routing"]
TOOLS = ["Postgres 16", "Redis 7", "Kafka", "SQLite", "ClickHouse", "NATS", "S3", "Nginx", "Caddy", "MariaDB 11"]


def conversation(c: int, turns: int, rnd: random.Random) -> dict:
    """One linear ChatGPT conversation with a system root, like the real export."""
    t0 = 1_700_000_000 + c * 3600
    mapping = {"root": {"id": "root", "parent": None, "children": ["sys"], "message": None},
               "sys": {"id": "sys", "parent": "root", "children": [], "message": {
                   "id": f"c{c}-sys", "author": {"role": "system"}, "create_time": None,
                   "content": {"content_type": "text", "parts": [""]}}}}
    parent = "sys"
    for i in range(turns):
        nid = f"c{c}-m{i}"
        topic, tool = rnd.choice(TOPICS), rnd.choice(TOOLS)
        text = (f"How should the {topic} service use {tool}? We saw latency of {rnd.randint(5, 900)} ms."
                if i % 2 == 0 else
                f"For {topic}, keep {tool} behind a queue; measure p99 before and after. " * rnd.randint(1, 4))
        mapping[nid] = {"id": nid, "parent": parent, "children": [], "message": {
            "id": nid, "author": {"role": "user" if i % 2 == 0 else "assistant"}, "create_time": t0 + 20 * i,
            "content": {"content_type": "text", "parts": [text]}}}
        mapping[parent]["children"].append(nid)
        parent = nid
    return {"id": f"conv-{c}", "title": f"{rnd.choice(TOPICS)} question {c}", "create_time": t0,
            "current_node": parent, "mapping": mapping}


def main() -> None:
    """Build the export, import it twice into a temp store, print the numbers."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--per-conversation", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=256)
    a = ap.parse_args()
    load_before = round(os.getloadavg()[0], 2)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MIRADOR_HOME"] = str(Path(tmp) / "home")
        from capture.redact import Redactor
        from memory.integrations.importers import ImportOptions, make_importer, run_import
        from memory.store.core import Store

        rnd = random.Random(8)
        path = Path(tmp) / "conversations.json"
        n_conv = max(1, a.messages // a.per_conversation)
        path.write_text(json.dumps([conversation(c, a.per_conversation, rnd) for c in range(n_conv)]))
        store = Store()
        store.embedder.embed(["warm up"])  # load the model outside the timed part
        opts = ImportOptions(batch_size=a.batch_size)
        first = run_import(store, make_importer("chatgpt", path, opts), redactor=Redactor(), scope="bench")
        t = time.monotonic()
        again = run_import(store, make_importer("chatgpt", path, opts), redactor=Redactor(), scope="bench")
        again_s = time.monotonic() - t
        print(json.dumps({
            "messages": n_conv * a.per_conversation, "conversations": n_conv, "file_mb": round(path.stat().st_size / 1e6, 2),
            "batch_size": a.batch_size, "imported": first.imported, "seconds": first.seconds,
            "rows_per_second": first.rows_per_second, "reimport_imported": again.imported,
            "reimport_seconds": round(again_s, 2), "reimport_rows_per_second": round(again.read / again_s, 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            # What else ran decides these figures on 2 cores: the 1-minute load average before and after.
            "cpus": os.cpu_count(), "load_before": load_before, "load_after": round(os.getloadavg()[0], 2),
        }))


if __name__ == "__main__":
    main()
