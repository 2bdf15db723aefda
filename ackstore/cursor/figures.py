"""A cursor's figures, read from its parts: the full snapshot ``Cursor.stats()`` returns
and the cheap tuple a metrics scrape reads (``Cursor.figures()``). The caller holds the
cursor's lock."""

from __future__ import annotations

from typing import Any, NamedTuple

from ..config import CursorConfig
from ..dispatch.revision import CursorStateRevisionController
from ..stats import CursorStats
from .chain import MarkerChain
from .pages import Pages
from .state import AckState

__all__ = ["Parts", "cursor_stats", "cursor_figures"]


class Parts(NamedTuple):
    """The parts of one cursor its figures come from (None: not built)."""

    state: AckState | None
    pages: Pages | None
    chain: MarkerChain | None
    config: CursorConfig
    controller: CursorStateRevisionController


def cursor_stats(topic: str, name: str, parts: Parts) -> CursorStats:
    """Every figure, cache sizes measured exactly (the parts built). O(loaded ledgers)."""
    state, pages, chain, cfg, controller = parts
    assert state is not None and pages is not None and chain is not None
    cache = pages.cache
    cache.measure_all()
    sizes = [la.size for la in cache.loaded.values()]
    limit = cfg.max_unacked_ranges_to_persist
    return CursorStats(
        topic=topic,
        name=name,
        mark_delete_position=state.md,
        read_position=state.rp,
        ack_range_count=state.range_count,
        ledgers_in_memory=len(cache.loaded),
        ledgers_swapped_out=len(cache.swapped),
        ledgers_indexed=len(pages.index),
        dirty_ledgers=len(pages.dirty),
        cache_bytes=cache.nbytes,
        cache_budget=cache.budget,
        largest_ledger_bytes=max(sizes, default=0),
        over_budget=cache.nbytes > cache.budget,
        swap_ins=cache.swap_ins,
        evictions=cache.evictions,
        write_backs=cache.write_backs,
        flushes=chain.flushes,
        last_flush_bytes=chain.last_flush_bytes,
        total_flush_bytes=chain.total_flush_bytes,
        last_marker_seq=chain.marker_seq,
        deltas_since_full_marker=chain.deltas,
        truncated=chain.truncated,
        persisted_ranges=chain.persisted_ranges,
        ranges_over_limit=max(0, state.range_count - limit) if limit else 0,
        recovery=chain.recovery,
        revision_num=controller.revision_num,
        revisions_done=controller.revisions_done,
        revision_running=controller.revision_running,
        redeliveries=state.redeliveries,
    )


def cursor_figures(parts: Parts, small: Any = None) -> tuple[int, ...]:
    """The numbers of ``ackstore.stats.CURSOR_FIGURES``, in order, without measuring; of a
    cursor in the small form (``small``, ``ackstore.cursor.small``), its ranges and flushes
    are the form's (the parts hold the state as it was when the form began, or nothing:
    ``parts`` of None, never built, as a cursor opened into the form has them). O(1)."""
    state, pages, chain, cfg, controller = parts
    limit = cfg.max_unacked_ranges_to_persist
    if state is None or pages is None or chain is None:  # parts that hold nothing
        cache_figures: tuple[int, ...] = (0, cfg.max_individual_ack_cache_bytes, 0, 0, 0, 0, 0)
        ranges = persisted = truncated = blocked = chain_flushes = chain_bytes = skipped = redeliveries = 0
    else:
        cache = pages.cache
        cache_figures = (
            cache.nbytes, cache.budget, len(cache.loaded), len(cache.swapped), cache.swap_ins, cache.evictions,
            cache.write_backs,
        )  # fmt: skip
        ranges, persisted, truncated = state.range_count, chain.persisted_ranges, int(chain.truncated)
        blocked = int(state.blocked(cfg.dispatcher_pause_on_ack_state_persistent, limit))
        chain_flushes, chain_bytes = chain.flushes, chain.total_flush_bytes
        skipped, redeliveries = chain.recovery.markers_skipped, state.redeliveries
    flushes = flush_bytes = 0
    if small is not None:  # within the PIP-299 limit by the form's cap: never over it, truncated or blocked
        ranges, persisted, flushes, flush_bytes = small.range_count(), small.persisted, small.flushes, small.flush_bytes
        truncated = blocked = 0
        redeliveries += small.redeliveries
    return (
        ranges,
        persisted,
        max(0, ranges - limit) if limit else 0,
        truncated,
        blocked,
        *cache_figures,
        chain_flushes + flushes,
        chain_bytes + flush_bytes,
        skipped,
        controller.revisions_done,
        controller.revision_running,
        redeliveries,
    )
