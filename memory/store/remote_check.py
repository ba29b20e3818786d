"""What is wrong with a shared store that does not work, in words a person can act on.

LanceDB reports every failure of an S3 request as one long Rust error chain (usually a ValueError, the type
every reader of a shared table also takes for "no such table yet"). `classify` reads the chain: the HTTP
status and the S3 error code where the store answered, else the transport failure — so a wrong secret is
"credentials refused", not "offline", and a missing bucket is not an empty shared scope.

- `check` is what `mirador remote add` runs before it writes anything: list the prefix (endpoint, bucket,
  credentials), then write, read back and delete one row in the probe table (the key may write). It raises
  `StoreRefused` saying which it is and what to do.
- `checked` wraps a LanceDB connection so that a call failing on the store raises `StoreRefused`, never a
  ValueError a caller would read as a missing table (memory/store/remote.py, Shared._connect).
- `problem` is what a shared scope's health shows (remote.py's `health`, the tray, Settings → Sharing).
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from memory.config import RemoteBinding
from memory.errors import InputError
from memory.store import filters as F

if TYPE_CHECKING:
    from memory.store.remote_shared import Shared

PROBE = "mirador_probe"  # `mirador remote add` and `remote test` write and delete one row here

# Problems of the settings (credentials, bucket, endpoint): the store answers, and will keep refusing until the
# binding changes — not "offline". The others may pass on their own (the store is down, the network is away).
SETTINGS = ("credentials", "permission", "bucket", "not_s3", "tls")
HEADLINE = {"credentials": "credentials refused", "permission": "credentials refused", "bucket": "bucket missing",
            "not_s3": "not an S3 endpoint", "tls": "TLS failed", "host": "host not found",
            "refused": "connection refused", "timeout": "no answer", "offline": "offline",
            "other": "store error"}


@dataclass
class Problem:
    kind: str  # a key of HEADLINE
    message: str  # what went wrong and what to do, one line


class StoreRefused(InputError, ConnectionError):
    """A shared store that cannot work with these settings, or does not answer: `kind` says which (HEADLINE).
    A ConnectionError too, so whatever handles a store that does not answer handles this."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.kind = problem.kind


def _where(binding: RemoteBinding) -> tuple[str, str, str]:
    """(endpoint as shown, host, port) of a binding."""
    ep = binding.endpoint or f"AWS S3 ({binding.region})"
    u = urlparse(binding.endpoint) if binding.endpoint else None
    host = (u.hostname or "") if u else "s3.amazonaws.com"
    port = str(u.port or (443 if u.scheme == "https" else 80)) if u else "443"
    return ep, host, port


def _bucket(binding: RemoteBinding) -> str:
    return binding.url.removeprefix("s3://").split("/", 1)[0]


def classify(error: BaseException | str, binding: RemoteBinding, adding: bool = False) -> Problem | None:
    """The problem an error of a store operation shows, or None when it is no failure of the store itself
    (a table that is not there yet, a schema error). adding: the binding is not kept yet (`remote add`)."""
    if isinstance(error, StoreRefused):
        return Problem(error.kind, str(error))
    text = str(error)
    ep, host, port = _where(binding)
    again = ("then run `mirador remote add` again" if adding else
             f"then bind it again: `mirador remote remove {binding.name} --yes` and `mirador remote add`")
    status = re.search(r"status: (\d{3})", text)
    code = re.search(r"<Code>([^<]+)</Code>", text)
    said = re.search(r"<Message>([^<]+)</Message>", text)
    if code:
        c = code.group(1)
        if c == "InvalidAccessKeyId":
            return Problem("credentials", f"{ep} does not know this access key id (InvalidAccessKeyId) — check the "
                                          f"key id against the store's identities (SeaweedFS: its s3.json), {again}")
        if c == "SignatureDoesNotMatch":
            return Problem("credentials", f"{ep} refused the secret for this access key id (SignatureDoesNotMatch) "
                                          f"— give the key's own secret, {again}")
        if c in ("AccessDenied", "AllAccessDisabled", "InvalidToken", "ExpiredToken", "InvalidSecurity"):
            return Problem("permission", f"{ep} refused this key access to {binding.url} ({c}) — grant the key "
                                         "read, write, list and delete on the bucket (SeaweedFS: the identity's "
                                         f"\"actions\" in s3.json), or use a key that has them, {again}")
        if c == "NoSuchBucket":
            b = _bucket(binding)
            return Problem("bucket", f"the bucket {b!r} does not exist at {ep} (NoSuchBucket) — create it "
                                     f"(SeaweedFS: `echo \"s3.bucket.create -name {b}\" | weed shell`; elsewhere the "
                                     f"provider's console), or fix the bucket in --url, {again}")
        detail = f"{c}: {said.group(1)}" if said else c
        if c in ("InternalError", "ServiceUnavailable", "SlowDown"):  # the store's own trouble, not the settings'
            return Problem("other", f"{ep} failed on its side ({detail}) — see the store's log. A SeaweedFS with no "
                                    "room for a new volume logs \"failed to pick … node candidates\": start it with "
                                    "-volume.max=100 -master.volumeSizeLimitMB=1024, or free disk space; "
                                    "`mirador remote test` once it is fixed")
        return Problem("other", f"{ep} refused the request ({detail}) — check the endpoint, bucket and key, {again}")
    if status:
        s = int(status.group(1))
        if s in (401, 403):
            return Problem("credentials", f"{ep} refused the credentials (HTTP {s}) — check the key id and secret, "
                                          f"{again}")
        if s >= 500:
            return Problem("other", f"{ep} failed (HTTP {s}) — the store has a problem of its own; see its log, "
                                    "and `mirador remote test` once it is fixed")
        # An answer without an S3 error document: some HTTP server, not an S3 gateway.
        return Problem("not_s3", f"{ep} answered HTTP {s} but not as an S3 gateway — is that the filer's, the "
                                 "master's or a web server's port? SeaweedFS serves S3 on its -s3.port (8333 by "
                                 f"default); fix --endpoint, {again}")
    low = text.lower()
    if "dns error" in low or "failed to lookup address" in low or "name or service not known" in low \
            or "nodename nor servname" in low or "no such host" in low:
        return Problem("host", f"the host {host!r} of {ep} was not found (DNS) — check the host name in --endpoint, "
                               "and that this device is on the network that knows it (a VPN, the office network)")
    if "connectionrefused" in low or "connection refused" in low:
        return Problem("refused", f"nothing accepts connections at {host}:{port} (connection refused) — is the "
                                  "S3 gateway running, and on that port? (SeaweedFS: `weed server -s3 "
                                  "-s3.port=8333`)")
    if any(w in low for w in ("invalidcontenttype", "certificate", "tls", "ssl", "handshake", "invalidmessage")):
        plain = "; it may speak plain HTTP: use http://" if (binding.endpoint or "").startswith("https://") else ""
        return Problem("tls", f"the TLS connection to {ep} failed{plain} — or its certificate is not trusted by "
                              "this device: trust it in the OS certificate store, or fix --endpoint")
    if "timed out" in low or "kind: timeout" in low or "deadline has elapsed" in low:
        return Problem("timeout", f"{ep} did not answer in time — the store or the network is down or slow; "
                                  "writes wait in the outbox until it answers")
    if "error sending request" in low or "connection reset" in low or "broken pipe" in low \
            or "connection closed" in low:
        return Problem("offline", f"{ep} stopped answering (the connection failed) — the store or the network is "
                                  "down; writes wait in the outbox until it answers")
    if "connect" in low and ("error" in low or "failed" in low) and ("http" in low or "tcp" in low):
        return Problem("refused", f"could not connect to {ep} — check that the store runs and this device reaches "
                                  f"{host}:{port}")
    return None


def problem(error: BaseException, binding: RemoteBinding, adding: bool = False) -> Problem:
    """The problem any failure shows (a failure classify does not know is "other", in its own words)."""
    found = classify(error, binding, adding)
    if found is not None:
        return found
    first = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
    return Problem("other", first)


class _Checked:
    """A LanceDB connection whose calls raise StoreRefused when the store refused or did not answer."""

    def __init__(self, db: Any, binding: RemoteBinding, adding: bool) -> None:
        self._db, self._binding, self._adding = db, binding, adding

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._db, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kw: Any) -> Any:
            try:
                return attr(*args, **kw)
            except Exception as e:
                found = classify(e, self._binding, self._adding)
                if found is None:  # the store answered: e.g. no such table yet, which callers expect
                    raise
                raise StoreRefused(found) from e

        return call


def checked(db: Any, binding: RemoteBinding, adding: bool = False) -> Any:
    """db, whose failing calls on the store raise StoreRefused instead of LanceDB's ValueError."""
    return _Checked(db, binding, adding)


def check(binding: RemoteBinding, options: dict[str, str]) -> dict[str, Any]:
    """Whether a binding works, before it is kept: list its prefix (the endpoint is an S3 gateway, the bucket
    exists, the credentials are accepted), then write, read back and delete one row of the probe table (the key
    may write). Returns the times in ms; raises StoreRefused saying what is wrong and what to do. Nothing is
    written when the listing fails."""
    try:
        return _check(binding, options)
    except StoreRefused as e:
        raise StoreRefused(Problem(e.kind, f"{HEADLINE[e.kind]}: {e}; nothing was bound (--no-check binds "
                                           "without asking the store, to set up offline)")) from e


def _check(binding: RemoteBinding, options: dict[str, str]) -> dict[str, Any]:
    import lancedb
    import pyarrow as pa

    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    try:
        db = checked(lancedb.connect(binding.url, read_consistency_interval=None, storage_options=options), binding,
                     adding=True)
    except StoreRefused:
        raise
    except Exception as e:  # lancedb.connect checks its options: a malformed endpoint or region
        raise StoreRefused(problem(e, binding, adding=True)) from e
    db.table_names()
    out["list_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    t1 = time.perf_counter()
    token = uuid.uuid4().hex
    try:
        table = db.create_table(PROBE, schema=pa.schema([pa.field("id", pa.string())]), exist_ok=True)
        table.add(pa.table({"id": [token]}))
        found = table.count_rows(F.id_is(token))
        table.delete(F.id_is(token))
    except StoreRefused:
        raise
    except Exception as e:  # a failing call on a table handle: classified the same way
        raise StoreRefused(problem(e, binding, adding=True)) from e
    if found != 1:
        raise StoreRefused(Problem("other", f"a row written to {binding.url} was not read back ({found} found) — the "
                                            "store does not keep what it is sent; check its health and log"))
    out["write_ms"] = round((time.perf_counter() - t1) * 1000, 1)
    return out


def probe_store(shared: Shared) -> dict[str, Any]:
    """Write, read back and delete one row in a probe table of a binding's store (never the memories): what
    `mirador remote test` reports, with the time each step took in milliseconds."""
    import pyarrow as pa

    from memory.errors import MiradorError
    from memory.store.remote_dedup import distinct_count
    from memory.store.remote_io import retry

    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    db = shared._connect()
    token = uuid.uuid4().hex
    table = retry(lambda: db.create_table(PROBE, schema=pa.schema([pa.field("id", pa.string())]), exist_ok=True))
    retry(lambda: table.add(pa.table({"id": [token]})))
    out["write_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    t1 = time.perf_counter()
    found = table.count_rows(F.id_is(token))
    out["read_ms"] = round((time.perf_counter() - t1) * 1000, 1)
    retry(lambda: table.delete(F.id_is(token)))
    if found != 1:
        raise MiradorError(f"the probe row written to {shared.binding.url} was not read back ({found} found)")
    try:
        out["memories"] = distinct_count(shared.memories(create=False))
    except (ValueError, FileNotFoundError):
        out["memories"] = 0
    shared._ok()
    return out
