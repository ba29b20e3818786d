"""Who may read the data folder: its owner alone. Folders 0700, files 0600, whoever wrote them.

The data folder holds everything a person saw and said (memories, evidence, the audit log, frames), so no
other local user may read any of it. Mirador cannot hand a mode to every writer: LanceDB's Rust code
creates the table files with the process umask, and so do logging, PIL and `open()`. So the process umask
is made private (`PRIVATE_UMASK`, `restrict_umask`) before the store opens and at CLI/app start, and
everything a writer creates from then on is 0700/0600 without that writer knowing.

A folder made by an older version, by another program, or copied in with `cp -r` may still be wider: the
store tightens the tree once when it opens (`tighten`), chmod-ing only what is wider, and `mirador doctor`
reports what is left (`loose_paths`), e.g. files of another owner it could not chmod.

Symbolic links are never followed (a link inside the folder may point at the person's other files, whose
modes are not Mirador's to change) and never chmod-ed (on Linux that would change their target).

On Windows mode bits say nothing about who may read a file (its ACL does, and the user profile's folders
are private already): there every function here is a no-op.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

PRIVATE_UMASK = 0o077  # no bits for group or others on anything this process creates
DIR_MODE = 0o700
FILE_MODE = 0o600
SUPPORTED = os.name == "posix"
# In the data folder: its mtime is when the last walk that found nothing it could not fix began (tighten).
STAMP = ".permissions-checked"
STAMP_REFRESH_S = 3600.0  # a store opens many times an hour (every hook): the stamp moves at most hourly


def restrict_umask() -> int:
    """Make the process umask private (adding PRIVATE_UMASK to it, never widening it); returns the old one.

    Process-wide on purpose: LanceDB's writer threads and every library that creates files read it."""
    if not SUPPORTED:
        return 0
    old = os.umask(PRIVATE_UMASK)
    os.umask(old | PRIVATE_UMASK)  # keep any stricter bits the person set (e.g. 0o277)
    return old


def _wanted(mode: int) -> int | None:
    """The mode a folder or file should have, or None for what is left alone (links, sockets, devices).

    Only group and other bits are taken away: the owner's own bits (an owner-executable script) are
    nobody else's business, and a file the owner could not write must stay so."""
    if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
        return stat.S_IMODE(mode) & ~PRIVATE_UMASK
    return None


def _walk(home: Path, since_ns: int | None = None) -> Iterator[tuple[str, int]]:
    """(path, st_mode) of the data folder and every folder under it, and of the files in them; links not followed.

    since_ns: the files of a folder are skipped when it is private and its entries have not changed (its
    mtime) since then: one stat per file is most of a walk's cost, and tens of thousands of frames lie in
    folders nobody has touched since the last walk. None: every file. A path that goes while the walk runs
    (a Lance compaction in another process) is skipped."""
    try:
        st = os.stat(home)  # the folder itself may be a link the person chose: follow it
    except OSError:
        return
    yield str(home), st.st_mode
    stack = [(str(home), st)]
    while stack:
        top, st = stack.pop()
        # A folder that was wide may hold wide files whatever its mtime (`chmod -R`, `cp -r`): read them all.
        files_too = since_ns is None or st.st_mtime_ns >= since_ns or bool(st.st_mode & PRIVATE_UMASK)
        if not files_too and st.st_nlink == 2:
            # No folder inside (a folder's link count is 2 plus its subfolders, where the file system counts
            # them; btrfs says 1, and is listed): an unchanged day of frames is not even listed.
            continue
        try:
            with os.scandir(top) as it:
                entries = list(it)
        except OSError:  # gone, or a folder we may not read (reported by its mode, checked below)
            continue
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):  # the folder's listing says so: no stat to know it
                    est = e.stat(follow_symlinks=False)
                    yield e.path, est.st_mode
                    stack.append((e.path, est))
                elif files_too:
                    yield e.path, e.stat(follow_symlinks=False).st_mode
            except OSError:
                continue


def loose_paths(home: Path) -> list[str]:
    """Every folder or file under home (home included) that group or others have any bit on, in walk order.

    Reads every path (no stamp): what `mirador doctor` reports."""
    if not SUPPORTED or not Path(home).exists():
        return []
    return [p for p, mode in _walk(Path(home)) if (w := _wanted(mode)) is not None and w != stat.S_IMODE(mode)]


def tighten(home: Path, full: bool = False) -> int:
    """Take group and other bits off home and everything under it; returns how many paths were changed.

    Cheap enough for every store open: a chmod only where a path is wider than 0700/0600, and a stat per
    folder plus one per file only in the folders whose entries changed since the last walk (STAMP's time),
    or that were wide themselves. What that skips is a file chmod-ed wider by hand inside an unchanged
    private folder, which no other user can reach anyway (every folder above it is 0700): `mirador doctor`
    reads every path (full=True) and finds it. A path of another owner (a `sudo mirador` run) cannot be
    changed: it is logged with what to do, and left for `mirador doctor` to report."""
    home = Path(home)
    if not SUPPORTED or not home.exists():
        return 0
    stamp = home / STAMP
    started = time.time()  # the walk's start: what folder mtimes are compared with next time
    try:
        last: os.stat_result | None = stamp.lstat()
    except OSError:
        last = None
    if last is not None and last.st_mtime > started:  # the clock went back: the stamp says nothing
        last = None
    since = None if full or last is None else last.st_mtime_ns
    changed, refused = 0, []
    for path, mode in _walk(home, since):
        want = _wanted(mode)
        if want is None or want == stat.S_IMODE(mode):
            continue
        try:
            # Not a link (checked by lstat in the walk), and it cannot have become one since: every folder
            # above it was tightened before the walk listed it, so no other user can swap entries in.
            os.chmod(path, want)
        except FileNotFoundError:
            continue
        except OSError:
            refused.append(path)
            continue
        changed += 1
    if changed:
        log.warning("%d path(s) under %s could be read by other users: now owner-only (folders 0700, files 0600)",
                    changed, home)
    else:
        log.debug("data folder %s: every path already owner-only", home)
    if refused:
        log.warning("%d path(s) under %s could not be made owner-only (first: %s): they belong to another user — "
                    "run `sudo chown -R %s %s`, then `mirador doctor`", len(refused), home, refused[0],
                    user_name(), home)
    elif last is None or started - last.st_mtime >= STAMP_REFRESH_S or full:
        _stamp(stamp, started)
    return changed


def _stamp(stamp: Path, started: float) -> None:
    """Record that every file in a folder unchanged since `started` is private (written rarely: STAMP_REFRESH_S)."""
    try:
        fd = os.open(stamp, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
        os.close(fd)
        # A little before the walk began: a folder changed during it, on a coarse file-system clock, is
        # still read next time.
        os.utime(stamp, (started - 2, started - 2), follow_symlinks=False)
    except OSError as e:  # a read-only folder: the next open walks every file again, nothing worse
        log.debug("could not write %s: %s", stamp, e)


def user_name() -> str:
    """The OS user running this process, for the `chown` a message tells the person to run."""
    import getpass

    try:
        return getpass.getuser()
    except Exception:  # no user name for this uid (a container): the uid does for chown
        return str(os.getuid())
