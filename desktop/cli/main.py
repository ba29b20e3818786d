"""`mirador` command line. Scripts depend on this contract: keep commands and --json shapes stable."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from importlib.metadata import PackageNotFoundError, version

from desktop.cli.output import emit_json, print_hits, print_record, print_rows
from memory.errors import InputError, MiradorError

log = logging.getLogger("mirador")


def _version() -> str:
    try:
        return version("mirador")
    except PackageNotFoundError:
        return "0+unknown"


def _open():
    from memory.store.core import Store

    return Store()


def _details(raw: str | None) -> dict | None:
    from memory.types import parse_details

    if raw is None:
        return None
    try:
        return parse_details(raw)
    except InputError as e:
        raise InputError(f"--details is {e}") from None


def _read_text(text: str) -> str:
    return sys.stdin.read().rstrip("\n") if text == "-" else text


# ---- commands ---------------------------------------------------------------------------------


def cmd_add(a) -> int:
    from memory.types import MemoryType, parse_type

    store = _open()
    mtype = parse_type(a.type)
    kw = dict(scope=a.scope, title=a.title, details=_details(a.details), status=a.status,
              confidence=a.confidence, pinned=a.pin)
    if mtype == MemoryType.VAULT:
        value = sys.stdin.read().rstrip("\n") if a.value_stdin else None
        kw["details"] = {"label": _read_text(a.text)}
        row = store.add_memory(_read_text(a.text), type="vault", value=value, **kw)
    else:
        if a.value_stdin:
            raise InputError("--value-stdin is only for --type vault")
        row = store.add_memory(_read_text(a.text), type=mtype.value, **kw)
    emit_json(row) if a.json else print(row["id"])
    return 0


def cmd_search(a) -> int:
    from memory.store.rows import parse_time
    from memory.retrieval.search import search_evidence, search_memories

    store = _open()
    since, until = parse_time(a.since, "--since"), parse_time(a.until, "--until")
    if a.evidence:
        if a.type or a.status:
            raise InputError("--type and --status apply to memories; drop them with --evidence")
        hits = search_evidence(store, a.query, scopes=a.scope, sources=a.source, apps=a.app, since=since,
                               until=until, limit=a.limit)
    else:
        if a.source or a.app:
            raise InputError("--source and --app filter evidence; add --evidence")
        statuses = None if not a.status else ([] if a.status == ["all"] else a.status)
        hits = search_memories(store, a.query, scopes=a.scope, types=a.type, statuses=statuses, since=since,
                               until=until, limit=a.limit)
    out = [h.to_dict() for h in hits]
    emit_json(out) if a.json else print_hits(out)
    return 0


def cmd_show(a) -> int:
    store = _open()
    row = store.get(a.id)
    if a.reveal:
        row["value"] = store.reveal(a.id)
    emit_json(row) if a.json else print_record(row)
    return 0


def cmd_edit(a) -> int:
    from memory.store.rows import kind_of

    store = _open()
    changes = dict(text=a.text, title=a.title, details=_details(a.details), scope=a.scope,
                   confidence=a.confidence, pinned=a.pin)
    if not any(v is not None for v in changes.values()) and not a.status and not a.value_stdin:
        raise InputError("nothing to change: give --text, --title, --details, --scope, --status, --pin/--unpin, "
                         "--confidence or --value-stdin")
    if kind_of(a.id) == "vault":
        value = sys.stdin.read().rstrip("\n") if a.value_stdin else None
        row = store.update_vault(a.id, label=a.text, value=value, scope=a.scope)
    elif kind_of(a.id) == "evidence":
        raise InputError("evidence is what was captured and is not edited; delete it with `mirador delete ID`")
    else:
        row = store.get(a.id)
        if any(v is not None for v in changes.values()):
            row = store.update_memory(a.id, **changes)
        if a.status:
            row = store.set_status(a.id, a.status)
    emit_json(row) if a.json else print(row["id"])
    return 0


def cmd_delete(a) -> int:
    from memory.store.erasure import forget, forget_where
    from memory.store.rows import parse_time

    store = _open()
    bulk = a.scope or a.app or a.since or a.until
    if a.ids and bulk:
        raise InputError("give either ids or a bulk filter (--scope/--app/--since/--until), not both")
    if a.ids:
        result = forget(store, a.ids)
    elif bulk:
        if not a.yes:
            raise InputError("bulk delete erases for good; repeat with --yes to confirm")
        result = forget_where(store, scope=a.scope, app=a.app, since=parse_time(a.since, "--since"),
                              until=parse_time(a.until, "--until"))
    else:
        raise InputError("nothing to delete: give an id, or --scope/--app/--since/--until with --yes")
    if a.json:
        emit_json(result)
    else:
        print(f"erased {result['deleted']} row(s); {result['frames_removed']} frame file(s) removed")
    return 0


def cmd_purge(a) -> int:
    from memory.store.erasure import purge

    store = _open()
    purge(store)
    print("purged: old versions removed, indexes rebuilt")
    return 0


def cmd_optimize(a) -> int:
    _open().optimize()
    print("optimized: fragments compacted, indexes brought up to date")
    return 0


def cmd_reembed(a) -> int:
    from memory.store.reembed import reembed, target_embedder, why_reembed
    from memory.store.core import embedder_record

    store = _open()
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


def cmd_list(a) -> int:
    kind = "evidence" if a.evidence else "vault" if a.vault else "memory"
    store = _open()
    statuses = None if not a.status else ([] if a.status == ["all"] else a.status)
    rows = store.list(kind, scopes=a.scope, types=a.type if kind == "memory" else None,
                      statuses=statuses if kind == "memory" else None, limit=a.limit, offset=a.offset)
    emit_json(rows) if a.json else print_rows(rows)
    return 0


def cmd_export(a) -> int:
    from memory.integrations.transfer import write_export

    store = _open()
    kw = dict(scopes=a.scope, include_evidence=a.evidence, include_secrets=a.include_secrets)
    if a.out and a.out != "-":
        with open(a.out, "w", encoding="utf-8") as fh:
            n = write_export(store, fh, **kw)
        print(f"exported {n} line(s) to {a.out}", file=sys.stderr)
    else:
        write_export(store, sys.stdout, **kw)
    return 0


def cmd_stats(a) -> int:
    s = _open().stats()
    emit_json(s) if a.json else print_record(s)
    return 0


def cmd_doctor(a) -> int:
    from desktop.cli.doctor import run_checks

    checks = run_checks()
    if a.json:
        emit_json(checks)
    else:
        for c in checks:
            print(f"[{c['status']:>4}] {c['name']}: {c['detail']}" + (f"\n       fix: {c['fix']}" if c.get("fix") else ""))
    return 1 if any(c["status"] == "FAIL" for c in checks) else 0


def cmd_evidence_add(a) -> int:
    from memory.store.rows import parse_time

    row = _open().add_evidence(_read_text(a.text), actor="person", source=a.source, app=a.app or "",
                               window=a.window or "", speaker=a.speaker or "", scope=a.scope,
                               captured_at=parse_time(a.at, "--at"))
    emit_json(row) if a.json else print(row["id"])
    return 0


def cmd_service(a) -> int:
    from desktop.runtime.service import run_service

    return run_service(once=a.once, interval=a.interval)


# ---- parser -----------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    from desktop.cli.parser import build

    return build(sys.modules[__name__], _version())


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `mirador` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if not getattr(args, "func", None):
        # No command: the tray app where there is a display, the headless service otherwise.
        args = parser.parse_args(["app"] + (argv or []))
    try:
        return args.func(args)
    except MiradorError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # last line of defence: one line, not a traceback, for the person
        from models.locate import ModelNotFound

        if isinstance(e, ModelNotFound):
            print(f"error: {e}", file=sys.stderr)
            return 3
        log.debug("unexpected error", exc_info=True)
        print(f"error: {type(e).__name__}: {e} (run with -v for details and report it)", file=sys.stderr)
        if getattr(args, "verbose", False):
            raise
        return 1


if __name__ == "__main__":
    sys.exit(main())
