"""The cursor's side of what its store and topic call, lock held by the caller: the group
flush's steps, compaction's rewrite, directory and configuration changes, and the release
at close.

:class:`StoreSide` is a base of :class:`~ackstore.cursor.core.CursorCore`: its methods work
on the cursor's parts (the planner, the ack state, the pages), which the cursor sets up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..config import CursorConfig
from ..fields import CoreFields
from ..storage.log import RecoveredState
from . import fitting
from .pages import Pages
from .plan import AnyPlan, Planner, RewritePlan
from .small import take_config
from .small_span import highest_in
from .state import AckState

if TYPE_CHECKING:
    from ..directory import LedgerDirectory

__all__ = ["StoreSide"]


class StoreSide(CoreFields):
    """What the store's flush and compaction and the topic's directory changes call."""

    __slots__ = ("_planner", "_state", "_flush_list", "_config", "_pages")  # and CoreFields'; the core has the rest

    _planner: Planner
    """@private the cursor's flush protocol (prepare, commit, abort): the store's group flush
    calls it directly for every listed cursor (the flush list maps each cursor to it)"""
    _state: AckState
    _pages: Pages
    small: Any
    """@private the cursor's small form (``ackstore.cursor.small``) while it is in it, else
    None: then its state is there and the group flush writes it from there"""

    _config: CursorConfig
    name: str

    def _changed(self) -> None:
        raise NotImplementedError  # the cursor lists itself for the next flush

    def _parts(self) -> None:
        raise NotImplementedError  # the parts hold the cursor's state (the small form ends)

    def built(self) -> Any:
        raise NotImplementedError  # the parts, built if they were not (a call the form serves: it stays eligible)

    def _alive(self) -> None:
        raise NotImplementedError  # the cursor may change: open, not deleted, writable

    def _range_count(self) -> int:
        raise NotImplementedError  # the ranges held, the form's or the parts'

    def edit(self, change: Any, *args: Any, check: bool = True, served: bool = False) -> Any:
        """@private One change on the parts, under the lock (the core's)."""
        raise NotImplementedError

    def apply_config(self, config: CursorConfig) -> None:
        """@private Adopt ``config`` in memory only (a read-only store's own budget; ``update_config``
        persists first). The budget may shrink: evict to fit. A cursor in the small form keeps it
        where the form takes ``config`` (``small.take_config``). Lock held."""
        small = self.small
        if small is not None and take_config(small, self._config, config):
            self._config = config  # (the parts, when built, are built with it)
            return
        self._parts()
        if config.history_seconds and not self._config.history_seconds:
            self._planner.chain.force_full = True  # history starts with a full marker
        elif self._config.history_seconds and not config.history_seconds:
            self._planner.chain.floor = -1  # the window's states: the next trim scans for them
        self._config = config
        self._planner.configure(config)
        self._pages.cache.budget = config.max_individual_ack_cache_bytes
        self._pages.fit()
        self._changed()

    def _prepare_flush(self) -> AnyPlan | None:
        """@private Step 1 of a group flush: the plan of what changed (None: nothing did)."""
        self._parts()
        return self._planner.prepare()

    def _commit_flush(self, plan: AnyPlan) -> None:
        """@private Step 4: ``plan``'s transaction committed; the cursor adopts it, and waits for the
        next flush again when PIP-299 left ranges out (a change since the plan was taken
        listed the cursor already)."""
        self._planner.commit(plan)
        if plan.keep_dirty:
            self._changed()

    def _abort_flush(self, plan: AnyPlan) -> None:
        """@private Step 4, the other way: ``plan`` was not written; what it carried is pending again."""
        self._planner.abort(plan)

    def _bounded(self, small: Any) -> bool:
        raise NotImplementedError  # the small form bounded as of the directory now (False: it ended)

    def directory_changed(self, d: LedgerDirectory, trimmed: bool) -> None:
        """@private The topic's directory changed (``trimmed``: ledgers were dropped): the
        small form follows it (``Served._bounded``), else the parts reconcile."""
        small = self.small
        if small is not None and self._bounded(small):
            return
        self.built()  # (a form that cannot follow it ended; one that never began stays eligible: the form follows it)
        if trimmed:
            fitting.reconcile(self._state, d)
        else:
            fitting.directory_changed(self._state, d)
        self._changed()

    def check_close(self, ledger: int, entries: int) -> None:
        """@private Raise unless sealing ``ledger`` with ``entries`` keeps every ack of this cursor inside it."""
        small = self.small
        if small is not None and self._bounded(small):
            fitting.check_seal(self.name, ledger, entries, highest_in(small, ledger))
            return
        self.built()  # (as in directory_changed)
        fitting.check_close(self._state, ledger, entries)

    def over_cap(self) -> bool:
        """@private Whether the cursor holds more ranges than its PIP-299 cap lets a flush
        persist (its flushes write only the lowest ranges up to it). O(1)."""
        cap = self._config.max_unacked_ranges_to_persist
        return bool(cap) and self._range_count() > cap

    def plan_rewrite(self) -> RewritePlan:
        """@private Compaction: plan a fresh log (every ledger's record + one full marker)."""
        self._parts()
        return self._planner.rewrite_plan()

    def adopt_rewrite(self, plan: RewritePlan) -> None:
        """@private Compaction committed: the log is now exactly ``plan``."""
        self._planner.adopt_rewrite(plan)

    def adopt_restored(self, recovered: RecoveredState) -> None:
        """@private ``restore_as_of``: the cursor's acks, mark-delete position, partial
        batches and delivery counts become ``recovered``'s (a kept flush's state, recovered
        as a reopen right after that flush would), its properties stay, its read position
        goes to M + 1; the next flush writes it whole, as a new full marker. The store's
        flush lock and lock are held (no plan is in flight)."""
        self._parts()
        state, chain = self._state, self._planner.chain
        assert recovered.resolved is not None
        properties = dict(state.properties)
        self._pages.load(recovered)
        fitting.load(state, recovered.resolved.marker)
        state.properties = properties
        state.meta_dirty = True  # the next flush writes the restored state
        chain.force_full = True  # ... whole: it names records older than the chain's
        self._changed()

    def rewrite_differs(self, recovered: RecoveredState, marker_seq: int) -> str | None:
        """@private How a state recovered from a rewritten log differs from this cursor (None: same)."""
        self._parts()
        return self._planner.differs_from(recovered, marker_seq)

    def _release(self) -> None:
        """@private The parts are done with (the store closes, or the small form takes the
        state): the pages give the cache's bytes back to the pool and let go of the parts."""
        self._pages.release()
