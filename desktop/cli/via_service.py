"""Commands a running service answers for the CLI: the same code, run where the store and the model are warm.

`mirador search`, `recall`, `add` and `evidence add` pay for opening the store and loading the embedder in a
fresh process. When a service of the same data dir runs (`mirador serve`, `mirador service`, the tray app),
`try_service` sends the parsed command to it over its local endpoint (desktop/runtime/local_endpoint.py) and
prints what comes back; the service runs the very same handler (desktop.cli.common.run_command) over its own
store with this thread's stdout and stderr captured, so the output is byte for byte what the command would
have printed here, and a write is audited as it would be here (the same actor). Whenever the service cannot
answer (none running, a stale endpoint file, another data dir, a config or time zone that differs from this
process's, a refusal or an error) the command runs in-process, saying so only on stderr with -v.

MIRADOR_NO_SERVICE=1 keeps every command in-process.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterable, Iterator

    from memory.store.core import Store

log = logging.getLogger(__name__)

NO_SERVICE_ENV = "MIRADOR_NO_SERVICE"
READ_TIMEOUT_S = 60.0  # a read that gets no answer in time runs in-process instead
WRITE_TIMEOUT_S = 300.0  # a write is never repeated in-process once sent: wait long for its answer

# Command name -> (module, handler, writes). Only commands whose whole effect is their output (and, for the
# writes, rows audited with the same actor) may be answered by the service.
COMMANDS: dict[str, tuple[str, str, bool]] = {
    "search": ("desktop.cli.memories", "cmd_search", False),
    "recall": ("desktop.cli.recall", "cmd_recall", False),
    "add": ("desktop.cli.memories", "cmd_add", True),
    "evidence add": ("desktop.cli.evidence", "cmd_evidence_add", True),
}


def _command_of(func: Any) -> str | None:
    for name, (module, fn, _) in COMMANDS.items():
        if getattr(func, "__module__", None) == module and getattr(func, "__name__", None) == fn:
            return name
    return None


def _home() -> Path:
    # What memory.config.data_dir says, without importing the config models (pydantic) on this fast path;
    # the service compares it with its own data dir and refuses another one.
    env = os.environ.get("MIRADOR_HOME")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("mirador"))


def _same_place(a: str | Path, b: str | Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _clock() -> list:
    """The local time zone this process parses times in (`--since` and `--at` without a zone)."""
    return [time.timezone, time.altzone, time.daylight, list(time.tzname)]


# ---- the CLI's side ----------------------------------------------------------------------------------


def try_service(args: argparse.Namespace) -> int | None:
    """Run the command on the running service and print its output; its exit code, or None to run in-process."""
    name = _command_of(getattr(args, "func", None))
    if name is None or os.environ.get(NO_SERVICE_ENV):
        return None
    _, _, writes = COMMANDS[name]
    fields = {k: v for k, v in vars(args).items() if k != "func"}
    if fields.get("value_stdin"):
        return None  # a vault value read from stdin stays in this process
    if fields.get("text") == "-":
        from desktop.cli.common import read_text

        fields["text"] = read_text("-")
        args.text = fields["text"]  # stdin is spent: an in-process run must use what was read
        if fields["text"] == "-":
            return None  # the service would read "-" as "read stdin" again
    from desktop.runtime.local_endpoint import Unanswered, call

    home = _home()
    request = {"command": name, "args": fields, "home": str(home), "clock": _clock()}
    try:
        answer = call(home, request, WRITE_TIMEOUT_S if writes else READ_TIMEOUT_S)
    except Unanswered as e:
        if not writes:
            log.info("the service did not answer (%s); working in-process", e)
            return None
        from memory.errors import MiradorError

        raise MiradorError(f"the running Mirador service took the command but gave no answer ({e}); it may have "
                           "been done — check with `mirador list` before repeating it") from None
    if answer is None:
        return None
    try:
        out, err, code = str(answer["stdout"]), str(answer["stderr"]), int(answer["code"])
    except (KeyError, TypeError, ValueError):
        if writes:
            from memory.errors import MiradorError

            raise MiradorError("the running Mirador service answered something unreadable; the command may have "
                               "been done — check with `mirador list` before repeating it") from None
        return None
    log.info("answered by the running Mirador service")
    sys.stdout.write(out)
    sys.stdout.flush()
    if err:
        sys.stderr.write(err)
    return code


# ---- the service's side ------------------------------------------------------------------------------

_captured = threading.local()


class _ThreadStream:
    """Stands in for sys.stdout/sys.stderr: writes of a thread running a CLI request go to its buffer,
    everything else to the real stream (other threads of the service keep printing as before)."""

    def __init__(self, real: TextIO, attr: str) -> None:
        self._real = real
        self._attr = attr

    def _target(self) -> TextIO:
        return getattr(_captured, self._attr, None) or self._real

    def write(self, s: str) -> int:
        return self._target().write(s)

    def writelines(self, lines: Iterable[str]) -> None:
        self._target().writelines(lines)

    def flush(self) -> None:
        self._target().flush()

    def isatty(self) -> bool:
        return False if getattr(_captured, self._attr, None) is not None else self._real.isatty()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


_install_lock = threading.Lock()


def _install_streams() -> None:
    with _install_lock:
        if not isinstance(sys.stdout, _ThreadStream):
            sys.stdout = _ThreadStream(sys.stdout, "out")
        if not isinstance(sys.stderr, _ThreadStream):
            sys.stderr = _ThreadStream(sys.stderr, "err")


@contextmanager
def _capture(out: io.StringIO, err: io.StringIO) -> Iterator[None]:
    _install_streams()
    _captured.out, _captured.err = out, err
    try:
        yield
    finally:
        _captured.out = _captured.err = None


_config_seen: dict[str, Any] = {}


def _config_matches(store: Store) -> bool:
    """True if the service's config is what config.toml says now (what an in-process run would load)."""
    from memory.config import CONFIG_NAME, load_config

    path = Path(store.home) / CONFIG_NAME
    try:
        st = path.stat()
        stamp: Any = (st.st_mtime_ns, st.st_size)
    except FileNotFoundError:
        stamp = None
    if _config_seen.get("key") != (str(store.home), stamp):
        _config_seen.update(key=(str(store.home), stamp), config=load_config(store.home))
    return _config_seen["config"] == store.config


def serve_request(store: Store, req: dict) -> tuple[int, dict]:
    """Run one CLI request over the service's store; (HTTP status, answer)."""
    from desktop.cli.common import bound_store, run_command

    name = req.get("command")
    if name == KEY_LOAN:
        return lend_key(store, req)
    if name not in COMMANDS or not isinstance(req.get("args"), dict):
        return 400, {"error": f"not a command the service runs: {name!r}"}
    if not _same_place(str(req.get("home") or ""), store.home):
        return 409, {"error": "this service serves another data dir"}
    if req.get("clock") != _clock():
        return 409, {"error": "the service runs in another time zone"}
    if not _config_matches(store):
        return 409, {"error": "config.toml changed since the service loaded it"}
    module, fn, _ = COMMANDS[name]
    import importlib

    fields = dict(req["args"])
    fields.pop("verbose", None)  # a traceback is for the caller's terminal: the service answers with one line
    args = argparse.Namespace(**fields, func=getattr(importlib.import_module(module), fn))
    out, err = io.StringIO(), io.StringIO()
    with _capture(out, err), bound_store(store):
        code = run_command(args)
    return 200, {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


# ---- the data key, lent to this data dir's other processes ------------------------------------------------

KEY_LOAN = "data-key"


def lend_key(store: Store, req: dict) -> tuple[int, dict]:
    """The service's data key, for another Mirador process of the same data dir that cannot unwrap it itself
    (no OS keyring, no passphrase in its environment: an assistant's stdio MCP server, a hook). Whoever can
    read the endpoint file's secret is this data dir's owner, who can unlock it anyway: the loan spares them
    the passphrase in every process, as the OS keyring would. Never while Mirador is locked."""
    from memory.errors import MiradorError

    if not _same_place(str(req.get("home") or ""), store.home):
        return 409, {"error": "this service serves another data dir"}
    if store.keys.locked:
        return 423, {"error": "Mirador is locked"}
    from memory.store.keys import PASSPHRASE_ENV, os_keyring

    quietly = store.keys.held or os.environ.get(PASSPHRASE_ENV) or (
        store.keys.method() == "keyring" and os_keyring() is not None)
    try:
        key = store.keys.key() if quietly else None
    except MiradorError as e:
        return 409, {"error": str(e)}
    if key is None:
        return 409, {"error": "this service has not unlocked the data key yet"}
    import base64

    log.info("lent the data key to another process of this data dir")
    return 200, {"key": base64.b64encode(key).decode("ascii")}


def borrow_key(home: Path) -> bytes | None:
    """The data key from a running, unlocked service of this data dir (memory.store.keys.DataKeys.lenders)."""
    if os.environ.get(NO_SERVICE_ENV):
        return None
    from desktop.runtime.local_endpoint import Unanswered, call, read_endpoint

    ep = read_endpoint(Path(home))
    if ep is None or ep.pid == os.getpid():  # no service, or this very process: nothing to borrow
        return None

    try:
        answer = call(Path(home), {"command": KEY_LOAN, "home": str(home)}, READ_TIMEOUT_S)
    except Unanswered:
        return None
    if not answer or not isinstance(answer.get("key"), str):
        return None
    import base64

    log.info("borrowed the data key from the running Mirador service")
    return base64.b64decode(answer["key"])


def install() -> None:
    """Let services started from this process answer CLI requests (called before a service starts)."""
    from desktop.runtime.local_endpoint import set_handler

    set_handler(serve_request)
