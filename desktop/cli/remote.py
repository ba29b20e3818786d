"""`mirador remote add|list|test|remove`: shared scopes on S3-compatible object storage (docs/sharing.md)."""

from __future__ import annotations

import getpass
import os
import sys
import time
from typing import TYPE_CHECKING

from desktop.cli.output import emit_json
from memory.errors import InputError, NotFoundError

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

    from desktop.cli.common import AddCommand, AddJson, AddScope
    from memory.config import Config, RemoteBinding
    from memory.store.core import Store

SECRET_ENV = "MIRADOR_REMOTE_SECRET"


def register(cmd: AddCommand, as_json: AddJson, scope: AddScope) -> None:
    """Add `remote` and its actions."""
    sp = cmd("remote", None, "shared scopes: bind a scope to an S3-compatible store (SeaweedFS, MinIO, AWS S3)")
    sp.set_defaults(func=lambda a: (_ for _ in ()).throw(
        InputError("`mirador remote` needs an action: add, list, test, maintain or remove")))
    rsub = sp.add_subparsers(metavar="ACTION")
    ap = rsub.add_parser("add", help="bind a scope (and the scopes below it) to s3://bucket/prefix; the key "
                                     "and secret go to the OS keyring")
    ap.set_defaults(func=cmd_add)
    ap.add_argument("name", help="a name for the binding (letters, digits, - and _)")
    ap.add_argument("--scope", required=True, help="the shared scope, e.g. work/acme")
    ap.add_argument("--url", required=True, help="s3://bucket/prefix")
    ap.add_argument("--endpoint", default="", help="the S3 endpoint, e.g. http://127.0.0.1:8333; empty = AWS")
    ap.add_argument("--region", default="us-east-1", help="the S3 region (default us-east-1)")
    ap.add_argument("--key-id", required=True, help="the S3 access key id")
    ap.add_argument("--share-evidence", action="store_true",
                    help="also keep a copy of the scope's evidence (screen text, transcripts, notes; never frames, "
                         "audio or file paths) in the bucket, so the other devices can search it; off by default")
    ap.add_argument("--secret-stdin", action="store_true",
                    help=f"read the secret from stdin (else ${SECRET_ENV}, else a prompt)")
    ap.add_argument("--env-credentials", action="store_true",
                    help="a device without an OS keyring (a server): keep no credentials; every Mirador process "
                         "reads them from MIRADOR_REMOTE_<NAME>_KEY_ID and MIRADOR_REMOTE_<NAME>_SECRET")
    ap.add_argument("--no-check", action="store_true",
                    help="bind without asking the store first (setting up offline); by default `add` lists the "
                         "bucket and writes a probe row, and binds nothing if that fails")
    as_json(ap)
    lp = rsub.add_parser("list", help="the bindings, their queued writes and whether their store answers")
    lp.set_defaults(func=cmd_list)
    as_json(lp)
    tp = rsub.add_parser("test", help="write, read back and delete a probe row; send queued writes; report times")
    tp.set_defaults(func=cmd_test)
    tp.add_argument("name", help="the binding's name")
    as_json(tp)
    xp = rsub.add_parser("maintain", help="update a shared store's indexes and compact it now (the scheduler does "
                                          "it every remote.maintain_interval_minutes on one device)")
    xp.set_defaults(func=cmd_maintain)
    xp.add_argument("name", nargs="?", help="the binding's name (default: every binding)")
    as_json(xp)
    pp = rsub.add_parser("push", help="share what this device made in the scope before it was bound: its memories "
                                      "there and their relations (and evidence, if the binding shares it)")
    pp.set_defaults(func=cmd_push)
    pp.add_argument("name", help="the binding's name")
    pp.add_argument("--yes", action="store_true", help="confirm (without it, say what would be shared and do nothing)")
    as_json(pp)
    mp = rsub.add_parser("remove", help="drop a binding and its keyring entry (the remote data stays)")
    mp.set_defaults(func=cmd_remove)
    mp.add_argument("name", help="the binding's name")
    mp.add_argument("--yes", action="store_true", help="confirm (without it, say what would happen and do nothing)")
    as_json(mp)


def _home() -> Path:
    from memory.config import data_dir

    return data_dir()


def _secret(a: argparse.Namespace) -> str:
    if a.secret_stdin:
        secret = sys.stdin.readline().strip()
    elif os.environ.get(SECRET_ENV):
        secret = os.environ[SECRET_ENV].strip()
    elif sys.stdin.isatty():
        secret = getpass.getpass("S3 secret access key: ").strip()
    else:
        secret = ""
    if not secret:
        raise InputError(f"no secret given: pipe it with --secret-stdin, set ${SECRET_ENV}, or run in a terminal "
                         "to be asked (it is never taken as an argument, which other users could see)")
    return secret


def _binding(cfg: Config, name: str) -> RemoteBinding:
    for b in cfg.remote.bindings:
        if b.name == name:
            return b
    known = ", ".join(b.name for b in cfg.remote.bindings) or "none yet"
    raise NotFoundError(f"no remote binding named {name!r} (bindings: {known}) — see `mirador remote list`")


def cmd_add(a: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from memory.config import Config, RemoteBinding, load_config, save_config
    from memory.store.remote import credential_env, require_keyring, save_credentials, storage_options
    from memory.store.remote_check import check

    home = _home()
    cfg = load_config(home)
    if any(b.name == a.name for b in cfg.remote.bindings):
        raise InputError(f"a binding named {a.name!r} exists: `mirador remote remove {a.name} --yes` first")
    try:
        b = RemoteBinding(name=a.name, scope=a.scope, url=a.url, endpoint=a.endpoint, region=a.region,
                          evidence=a.share_evidence)
        data = cfg.model_dump()
        data["remote"]["bindings"].append(b.model_dump())
        new = Config.model_validate(data)
    except ValidationError as e:
        msg = "; ".join(err["msg"].removeprefix("Value error, ") for err in e.errors())
        raise InputError(f"binding not added: {msg}") from None
    if a.env_credentials:
        # Nothing kept: a binding whose processes lack the variables would fail at every flush, so refuse now.
        key_var, secret_var = credential_env(b.name)
        unset = [v for v in (key_var, secret_var) if not os.environ.get(v)]
        if unset:
            raise InputError(f"--env-credentials: {' and '.join(unset)} not set — export {key_var} and {secret_var} "
                             "(here and for every Mirador process: the service, the tray app, MCP clients), "
                             "then add the binding again")
        if os.environ[key_var] != a.key_id:
            raise InputError(f"--key-id {a.key_id!r} differs from ${key_var}: give the same key id")
        secret = os.environ[secret_var]
        where = f"the environment ({key_var}, {secret_var})"
    else:
        require_keyring(b.name)  # no keyring: say so (and what works instead) before asking the store
        secret = _secret(a)
        where = "the OS keyring"
    # Ask the store before anything is kept: settings that cannot work (a wrong secret, a missing bucket, the
    # filer's port, a host that does not exist) are refused here, saying which, instead of failing at every
    # flush later while writes queue. Raises StoreRefused: nothing below has run.
    checked = None if a.no_check else check(b, storage_options(b, a.key_id, secret, cfg.remote.timeout_seconds))
    if not a.env_credentials:
        save_credentials(b.name, a.key_id, secret)  # the keyring first: a binding without credentials is useless
    save_config(new, home)
    from desktop.cli.common import open_store

    # This device's memories of the scope, made before the binding: not shared until pushed.
    before = open_store().count("memory", None, scopes=[b.scope], local=True)
    hint = (f" {before} memory(ies) of {b.scope} made on this device before stay here only: "
            f"`mirador remote push {b.name}` shares them.") if before else ""
    ok = (f"; the store answered (list {checked['list_ms']} ms, write {checked['write_ms']} ms)" if checked else
          f"; NOT checked (--no-check): `mirador remote test {b.name}` checks it once the store is reachable")
    return _report(a, {"added": b.model_dump(), "credentials": where, "local_memories_of_scope": before,
                       "checked": checked},
                   f"bound scope {b.scope} to {b.url}" + (f" at {b.endpoint}" if b.endpoint else "")
                   + ("; its evidence is shared too (text, no frames)" if b.evidence
                      else "; its evidence stays on this machine")
                   + f"; credentials are in {where}" + ok + "." + hint)


def _health(store: Store, probe: bool) -> list[dict]:
    rows = store.remotes.health()
    if probe:
        for r in rows:
            try:
                r.update(store.remotes.shared[r["name"]].probe())
                r["online"], r["last_error"] = True, None
            except Exception as e:
                from memory.store.remote_check import HEADLINE, SETTINGS, problem

                found = problem(e, store.remotes.shared[r["name"]].binding)
                r.update(online=False, last_error=found.message, problem=found.kind, headline=HEADLINE[found.kind],
                         settings=found.kind in SETTINGS)
    return rows


def cmd_list(a: argparse.Namespace) -> int:
    from desktop.cli.common import open_store

    store = open_store()
    rows = _health(store, probe=True)
    if a.json:
        emit_json({"bindings": rows})
        return 0
    if not rows:
        print("no shared scopes: bind one with `mirador remote add NAME --scope S --url s3://bucket/prefix ...`")
        return 0
    for r in rows:
        state = "online" if r["online"] else f"{(r.get('headline') or 'offline').upper()} ({r['last_error']})"
        print(f"{r['name']}: {r['scope']} -> {r['url']}" + (f" at {r['endpoint']}" if r["endpoint"] else "")
              + f"  {state}; evidence {'shared' if r.get('evidence') else 'kept here'}; {r['pending']} writes queued" + (f"; {r['memories']} memories" if "memories" in r else ""))
    return 0


def cmd_test(a: argparse.Namespace) -> int:
    from desktop.cli.common import open_store

    store = open_store()
    shared = store.remotes.shared.get(a.name)
    if shared is None:  # every binding in the config is open, so this one is not in the config
        _binding(store.config, a.name)  # raises NotFoundError naming the bindings
        raise NotFoundError(f"no remote binding named {a.name!r} is open")
    t0 = time.perf_counter()
    try:
        probe = shared.probe()
    except Exception as e:  # which it is — credentials, bucket, endpoint, host, port, TLS — and what to do
        from memory.store.remote_check import HEADLINE, Problem, StoreRefused, problem

        found = problem(e, shared.binding)
        raise StoreRefused(Problem(found.kind, f"{a.name}: {HEADLINE[found.kind]} — {found.message}")) from e
    flushed = store.remotes.flush()
    derived = {"erased": 0, "reviewed": 0}
    if not flushed["errors"]:
        from memory.store.erasure import recheck_derived

        derived = recheck_derived(store)  # forgets made while a store was down: their derived memories now
    doc = {"name": a.name, "scope": shared.binding.scope, "url": shared.binding.url, **probe,
           "total_ms": round((time.perf_counter() - t0) * 1000, 1), "sent": flushed["sent"],
           "pending": flushed["pending"], "derived_erased": derived["erased"], "derived_reviewed": derived["reviewed"]}
    later = (f"; finished forgets made offline: {derived['erased']} derived memories erased, {derived['reviewed']} "
             "sent to review") if derived["erased"] or derived["reviewed"] else ""
    return _report(a, doc, f"{a.name}: {shared.binding.url} answers — write {probe['write_ms']} ms, read {probe['read_ms']} "
                    f"ms; {probe['memories']} shared memories; sent {flushed['sent']} queued writes, "
                    f"{flushed['pending']} still queued" + later)


def cmd_maintain(a: argparse.Namespace) -> int:
    from desktop.cli.common import open_store

    store = open_store()
    if a.name is not None:
        _binding(store.config, a.name)  # raises NotFoundError naming the bindings
    if not store.remotes.shared:
        raise InputError("no shared scopes to maintain: bind one with `mirador remote add` first")
    report = store.remotes.maintain(a.name)
    failed = {n: r["error"] for n, r in report.items() if "error" in r}
    if a.json:
        emit_json({"maintained": report})
    else:
        for n, r in report.items():
            if "error" in r:
                print(f"{n}: not maintained — the store did not answer ({r['error']}); try again when it is back")
            else:
                vec = {"built": "vector index built", "retrained": "vector index retrained"}.get(r.get("vector") or "",
                                                                                                 "vector index current")
                print(f"{n}: {r['rows']} shared memories; {vec}; {r.get('compacted', 0)} files merged; "
                      f"{r.get('seconds', 0)} s")
        if len(failed) < len(report):
            from desktop.cli.store_admin import STORE_KEEPS

            print(f"note: {STORE_KEEPS}")
    return 1 if failed else 0


def cmd_push(a: argparse.Namespace) -> int:
    from desktop.cli.common import open_store

    store = open_store()
    b = _binding(store.config, a.name)
    n = store.remotes.made_before()[b.name]
    if not n and not b.evidence:
        return _report(a, {"memories": 0, "relations": 0, "evidence": 0},
                       f"nothing to share: every memory of {b.scope} on this device is already in {b.url}")
    if not a.yes:
        ev = " and its evidence of the scope (a copy; frames stay here)" if b.evidence else ""
        raise InputError(f"this sends {n} memory(ies) of {b.scope} made on this device before it was bound, the "
                         f"relations between them{ev} to {b.url}, where every device sharing {b.scope} sees them. "
                         "Nothing was sent yet: repeat with --yes to share them")
    done = store.remotes.push(b.name)
    pending = store.remotes.pending().get(b.name, 0)
    return _report(a, {**done, "pending": pending},
                   f"shared {done['memories']} memory(ies), {done['relations']} relation(s)"
                   + (f" and {done['evidence']} evidence row(s)" if b.evidence else "") + f" of {b.scope}"
                   + (f"; {pending} wait in the outbox until {b.url} answers" if pending else ""))


def cmd_remove(a: argparse.Namespace) -> int:
    from memory.config import load_config, save_config
    from memory.store.remote import delete_credentials

    home = _home()
    cfg = load_config(home)
    b = _binding(cfg, a.name)
    if not a.yes:
        raise InputError(f"this drops the binding {b.name} ({b.scope} -> {b.url}) and its keyring entry; the "
                         f"memories in {b.url} stay there and are no longer read here, and writes still queued "
                         "for it are dropped. Nothing was changed: repeat with --yes to remove")
    _drop_queued(home, b.name)
    cfg.remote.bindings = [x for x in cfg.remote.bindings if x.name != b.name]
    save_config(cfg, home)
    delete_credentials(b.name)
    return _report(a, {"removed": b.name}, f"removed the binding {b.name}; {b.scope} is a local scope again "
                                    f"(the data in {b.url} was not touched)")


def _drop_queued(home: Path, name: str) -> None:
    from memory.store.remote import drop_queued

    drop_queued(home, name)


def _report(a: argparse.Namespace, doc: dict, text: str) -> int:
    if a.json:
        emit_json(doc)
    else:
        print(text)
    return 0
