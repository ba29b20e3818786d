"""`mirador purge`, `optimize`, `reembed`, `stats`: upkeep of the store as a whole."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from desktop.cli.common import open_store
from desktop.cli.output import emit_json, print_record

if TYPE_CHECKING:
    import argparse

    from desktop.cli.common import AddCommand, AddJson, AddScope

# What Mirador cannot do through S3: the object store frees deleted bytes on its own schedule (docs/sharing.md).
STORE_KEEPS = ("the object store may keep deleted bytes on its disks until it reclaims them; SeaweedFS: "
               "`volume.vacuum -garbageThreshold 0.0001` in `weed shell` — see docs/sharing.md")

def register(cmd: AddCommand, as_json: AddJson, scope: AddScope) -> None:
    """Add the store upkeep commands to the `mirador` parser."""
    cmd("purge", cmd_purge, "remove deleted data from old versions and indexes now")
    cmd("optimize", cmd_optimize, "compact tables and update indexes now (also runs after write batches)")

    sp = cmd("reembed", cmd_reembed, "embed every row again with the embedder a new store would get "
             "(after an upgrade that retuned it, or for a store made before the tuning)")
    sp.add_argument("--force", action="store_true", help="re-embed even when the store's embedder is current")
    sp.add_argument("--progress", action="store_true", help="show progress even when stderr is not a terminal")
    as_json(sp)

    sp = cmd("stats", cmd_stats, "counts and size of the store")
    as_json(sp)


def cmd_purge(a: argparse.Namespace) -> int:
    """Drop deleted rows and edited-away text from every table version, index and shared bucket."""
    from memory.store.erasure import purge, purge_shared

    store = open_store()
    show = sys.stderr.isatty()

    def progress(table: str, done: int, total: int) -> None:
        if show:
            what = f"purging {table}" if table else "purged"
            print(f"\r{what}: {done:,}/{total:,} tables ".ljust(60), end="" if done < total else "\n",
                  file=sys.stderr, flush=True)

    purge(store, progress=progress)
    print("purged: old versions removed, indexes rebuilt, old text in the audit log replaced by fingerprints")
    failed = 0
    for scope, error in purge_shared(store).items():
        if error is None:
            print(f"purged the shared scope {scope}'s bucket: old versions removed ({STORE_KEEPS})")
        else:
            failed += 1
            print(f"the shared scope {scope}'s store did not answer ({error}): its bucket keeps old versions "
                  "until it does — run `mirador purge` again then (`mirador remote test` checks it)", file=sys.stderr)
    return 1 if failed else 0


def cmd_optimize(a: argparse.Namespace) -> int:
    """Compact fragments and bring indexes up to date."""
    open_store().optimize()
    print("optimized: fragments compacted, indexes brought up to date")
    return 0


def cmd_reembed(a: argparse.Namespace) -> int:
    """Re-embed every row with the embedder a new store would get; resumable after Ctrl+C."""
    from memory.store.core import embedder_record
    from memory.store.reembed import reembed, target_embedder, why_reembed

    store = open_store()
    target = target_embedder(store.config.models)
    why = why_reembed(embedder_record(store.home), target)
    if why is None and not a.force:
        msg = f"nothing to do: the store's vectors already come from {target.name} (--force re-embeds anyway)"
        emit_json({"embedder": target.name, "memories": 0, "evidence": 0, "skipped": 0}) if a.json else print(msg)
        return 0
    show = a.progress or (sys.stderr.isatty() and not a.json)
    if why:
        print(f"re-embedding: {why}", file=sys.stderr)

    def progress(step: str, done: int, total: int) -> None:
        if show:
            what = "switching to the new vectors" if step == "switch" else f"{step} re-embedded"
            print(f"\r{what}: {done:,}/{total:,} ", end="" if done < total else "\n", file=sys.stderr, flush=True)

    try:
        report = reembed(store, progress=progress)
    except KeyboardInterrupt:
        mixed = (embedder_record(store.home) or {}).get("reembedding")
        print("\nstopped: rows re-embedded so far are kept; run `mirador reembed` again to finish "
              + ("(searches match poorly until then: it stopped while switching over)" if mixed else
                 "(searches use the old vectors, as well as before, until then)"), file=sys.stderr)
        raise
    if a.json:
        emit_json(report)
    else:
        print(f"re-embedded {report['memories']:,} memories and {report['evidence']:,} evidence rows with "
              f"{report['embedder']} in {report['seconds']:.1f}s"
              + (f" ({report['reused']:,} embedded by an earlier, stopped run)" if report["reused"] else "")
              + (f"; {report['skipped']} forgotten or edited over and over meanwhile, left as they were"
                 if report["skipped"] else "")
              + f"; searches ran on mixed vectors for {report['switch_seconds']:.1f}s"
              + (f"; deleted the earlier tuned embedder no data dir uses any more ({report['freed_bytes'] / 1e6:.0f} MB)"
                 if report["freed_bytes"] else ""))
    return 0


def cmd_stats(a: argparse.Namespace) -> int:
    """Row counts and sizes."""
    s = open_store().stats()
    emit_json(s) if a.json else print_record(s)
    return 0
