"""Live windows (issue 30): notice that the store changed — in this process or another (the CLI, an MCP
server, the scheduler) — and tell the open windows, which re-read what they show.

One cheap probe per tick: a worker reads each watched table's LanceDB version (the store connects with
read_consistency_interval=0, so `table.version` is the latest committed one: a manifest stat, no scan).
The GUI thread only starts the probe and compares the answer; a probe still out when the next tick
comes is not doubled. `store_changed` carries the names of the tables whose version moved.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QObject, QTimer, Signal

from desktop.ui.workers import Jobs
from memory.store import tables as T

if TYPE_CHECKING:
    from memory.store.core import Store

log = logging.getLogger(__name__)

WATCHED = (T.MEMORIES, T.EVIDENCE, T.VAULT, T.PROPOSALS)
INTERVAL_MS = 1000  # a change shows within two ticks of the probe plus one refresh: under 2 s


def table_versions(store: Store, names=WATCHED) -> dict[str, int]:  # worker thread
    """Each watched table's latest committed version (0 for a table the store does not have yet)."""
    return {name: store.version(name) if store.has_table(name) else 0 for name in names}


def _probe(store: Store) -> dict[str, int] | None:  # worker thread
    # A failed probe (a table being rewritten by a purge this instant) is no news for the person: the
    # next one answers. Returning None keeps it out of Jobs.error, which every window shows.
    try:
        return table_versions(store)
    except Exception as e:
        log.debug("store probe failed: %s", e)
        return None


class StoreWatch(QObject):
    """Polls table versions through `Jobs` and emits `store_changed(frozenset of table names)`."""

    store_changed = Signal(object)
    probed = Signal()  # every answered probe, changed or not (views retry a refresh they had to put off)

    def __init__(self, jobs: Jobs, store: Store, interval_ms: int = INTERVAL_MS, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.jobs, self.store = jobs, store
        self.versions: dict[str, int] | None = None
        self._in_flight = False
        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.probe)

    def start(self) -> None:
        """Take the current versions as the baseline and start polling."""
        self.timer.start()
        self.probe()

    def stop(self) -> None:
        """Stop polling (at quit)."""
        self.timer.stop()

    def probe(self) -> None:
        """Ask a worker for the versions now (skipped while the previous probe is still out)."""
        if self._in_flight:
            return
        self._in_flight = True
        self.jobs.submit(_probe, self.store, on_done=self._answered, on_error=self._failed)

    def _failed(self, message: str) -> None:
        self._in_flight = False
        log.debug("store probe failed: %s", message)

    def _answered(self, versions: dict[str, int] | None) -> None:
        self._in_flight = False
        if versions is None:
            return
        old, self.versions = self.versions, versions
        if old is not None:
            changed = frozenset(n for n, v in versions.items() if old.get(n) != v)
            if changed:
                self.store_changed.emit(changed)
        self.probed.emit()


class LiveView(Protocol):
    """A window that follows the store (the browser, review queue, timeline)."""

    def isVisible(self) -> bool: ...
    def refresh(self) -> None: ...


class LiveViews(QObject):
    """The open windows that follow the store: each gets `refresh()` when a table it shows changed.

    A window that is hidden, or still busy with its previous load, is marked stale and refreshed at a
    later probe (or when it is shown again: `shown`), so no change is lost and refreshes never pile up."""

    def __init__(self, watch: StoreWatch, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.watch = watch
        self._views: list[tuple[LiveView, Callable[[], Iterable[str]]]] = []  # (view, the tables it shows)
        self._stale: dict[int, LiveView] = {}
        watch.store_changed.connect(self._changed)
        watch.probed.connect(self.flush)

    def add(self, view: LiveView, tables_fn: Callable[[], Iterable[str]]) -> None:
        """Follow `view`; tables_fn() names the tables whose changes it shows (asked at each change)."""
        self._views.append((view, tables_fn))

    def _changed(self, changed: frozenset) -> None:
        for view, tables_fn in list(self._views):
            try:
                if set(tables_fn()) & changed:
                    self._stale[id(view)] = view
            except RuntimeError:  # its C++ side was deleted (a closed test window)
                self._forget(view)
        self.flush()

    def shown(self, view: LiveView) -> None:
        """A window was shown again: bring it up to date if it missed a change."""
        self.flush(only=view)

    def flush(self, only: LiveView | None = None) -> None:
        """Refresh every stale view that is visible and idle."""
        for key, view in list(self._stale.items()):
            if only is not None and view is not only:
                continue
            try:
                if not view.isVisible() or _busy(view):
                    continue
                del self._stale[key]
                view.refresh()
            except RuntimeError:
                self._forget(view)

    def _forget(self, view: LiveView) -> None:
        self._views = [(v, f) for v, f in self._views if v is not view]
        self._stale.pop(id(view), None)


def _busy(view) -> bool:
    """Whether the view's list is still loading (a refresh now would only be dropped for a newer one)."""
    busy = getattr(view, "refresh_busy", None)
    if busy is None:
        model = view.current_model() if hasattr(view, "current_model") else getattr(view, "model", None)
        busy = getattr(model, "busy", False)
    return bool(busy() if callable(busy) else busy)


def restore_selection(model, table, ids: list[str], scroll: int, tries: int = 5) -> None:
    """Select the rows with these ids again after a refresh reset the list, and put the scroll bar back.

    A refresh loads as many rows as were shown; rows that arrived above the selection push it past them,
    so pages are fetched (at most `tries` more) until every kept id is loaded or the list ends."""
    from PySide6.QtCore import QItemSelectionModel

    proxy, sel = table.model(), table.selectionModel()
    found = [i for i in (model.index_of(x) for x in ids) if i >= 0]
    if len(found) < len(ids) and tries > 0 and model.canFetchMore():
        def again(_n: int) -> None:
            model.page_loaded.disconnect(again)
            restore_selection(model, table, ids, scroll, tries - 1)

        model.page_loaded.connect(again)  # before fetchMore: a prefetched page arrives at once
        model.fetchMore()
        return
    sel.clearSelection()
    for n, i in enumerate(found):
        idx = proxy.mapFromSource(model.index(i, 0))
        if n == 0:
            sel.setCurrentIndex(idx, QItemSelectionModel.SelectionFlag.NoUpdate)
        sel.select(idx, QItemSelectionModel.SelectionFlag.Select | QItemSelectionModel.SelectionFlag.Rows)
    table.verticalScrollBar().setValue(scroll)
