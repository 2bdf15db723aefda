"""PIP-269: the cursor state revision controller.

A *revision* is a cursor position reset (reset to a position, seek, skip, clear-backlog,
rewind). While one runs, new reads are refused and a second reset fails fast; when it
ends, the revision number grows, so any read that started under an older number is
discarded on completion, also when its read-position move already happened
("half in-flight"). Components that keep state beside the cursor (a dispatcher's replay
queue, recently-joined consumers) change it between ``start_revision`` and
``end_revision``, so cursor and component change together.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["CursorStateRevisionController"]


class CursorStateRevisionController:
    """Revision number and under-revision flag of one cursor, under one lock.

    ``enabled=False`` turns every check off (reads are never refused nor discarded, resets
    never exclude each other): it exists so tests can show the anomalies it prevents.
    """

    __slots__ = ("_lock", "_revision_num", "_under_revision", "enabled", "revisions_done")  # (one a cursor)

    def __init__(self, enabled: bool = True) -> None:
        self._lock = threading.Lock()
        self._revision_num = 0
        self._under_revision = False
        self.enabled = enabled
        """False: every check off (tests show with it what the controller prevents)"""
        self.revisions_done = 0
        """position resets completed (a counter)"""

    @property
    def revision_num(self) -> int:
        """The revision number: one more at the start and the end of each position reset."""
        return self._revision_num

    @property
    def revision_running(self) -> int:
        """1 while a position reset is running, else 0 (a gauge)."""
        return int(self._under_revision)

    def start_revision(self) -> int:
        """Begin a reset: returns the current revision number, or -1 if one is already running."""
        with self._lock:
            if self._under_revision:
                return -1
            self._under_revision = self.enabled  # disabled: resets neither exclude each other nor reads
            return self._revision_num

    def end_revision(self, editor: Callable[[], None]) -> int:
        """Apply ``editor`` (the cursor changes), bump the revision number, clear the flag.

        Returns the new revision number, or -1 if no revision was running.
        """
        with self._lock:
            if not self._under_revision and self.enabled:
                return -1
            try:
                editor()
            finally:
                self._revision_num += 1
                self._under_revision = False
                self.revisions_done += 1
            return self._revision_num

    def is_revision_num_outdated(self, revision_num: int) -> bool:
        """True when a reset is running or has completed since ``revision_num`` was read."""
        if not self.enabled:
            return False
        return self._under_revision or revision_num != self._revision_num

    def run_if_current(self, revision_num: int, fn: Callable[[], None]) -> bool:
        """Run ``fn`` (a read's cursor change, e.g. moving the read position) only if no
        reset started or ended since ``revision_num``; atomic with ``end_revision``, so a
        reset from another thread cannot land between the check and the change."""
        with self._lock:
            if self.is_revision_num_outdated(revision_num):
                return False
            fn()
            return True

    def reads_allowed(self) -> bool:
        """False while a position reset runs (a read started now would be discarded)."""
        return not self.enabled or not self._under_revision
