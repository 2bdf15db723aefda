"""A cursor's figures, read from its parts: the full snapshot ``Cursor.stats()`` returns
and the cheap tuple a metrics scrape reads (``Cursor.figures()``). The caller holds the
cursor's lock."""

from __future__ import annotations

from typing import Any, NamedTuple

from ..config import CursorConfig
from ..dispatch.revision import CursorStateRevisionController
from ..position import trusted
from ..stats import CURSOR_FIGURES, CursorStats, RecoveryReport
from .chain import MarkerChain
from .pages import Pages
from .small import OpenFigures, opened_report
from .small_span import ledgers_held, read_position
from .state import AckState

__all__ = [
    "Carried",
    "Parts",
    "carried_of",
    "carry_back",
    "cursor_stats",
    "cursor_figures",
    "carried_now",
    "form_stats",
]


class Parts(NamedTuple):
    """The parts of one cursor its figures come from (None: not built)."""

    state: AckState | None
    pages: Pages | None
    chain: MarkerChain | None
    config: CursorConfig
    controller: CursorStateRevisionController


class Carried(NamedTuple):
    """What lives only in memory of a cursor's parts when the small form takes their place:
    the open's recovery report, the cache's counters, the flush counters and redeliveries
    (the form counts its own from zero; the parts made again at its end add both)."""

    recovery: RecoveryReport
    swap_ins: int
    evictions: int
    write_backs: int
    flushes: int
    flush_bytes: int
    last_bytes: int
    redeliveries: int


def carried_of(state: AckState, pages: Pages, chain: MarkerChain) -> Carried:
    """What the parts carry into the small form (see :class:`Carried`). O(1)."""
    cache = pages.cache
    return Carried(
        chain.recovery, cache.swap_ins, cache.evictions, cache.write_backs, chain.flushes, chain.total_flush_bytes,
        chain.last_flush_bytes, state.redeliveries,
    )  # fmt: skip


def carried_now(carried: Carried | OpenFigures | None) -> Carried | None:
    """What lives in memory only beside a small form: what its parts carried into it, or, for
    a cursor opened into the form, what the open did (``OpenedForm.figures``, a plain tuple;
    made into a :class:`Carried` the first time it is asked: an open builds none), with no
    counts. O(1)."""
    if carried is None or isinstance(carried, Carried):
        return carried
    return Carried(opened_report(carried), 0, 0, 0, 0, 0, 0, 0)


def carry_back(carried: Carried | None, small: Any, state: AckState, pages: Pages, chain: MarkerChain) -> None:
    """Parts made again at the end of the small form ``small`` take back what lives only in
    memory: the form's flush counters and redeliveries, added to what the parts ``carried``
    into the form (or what its open carried: :func:`carried_now`). O(1)."""
    chain.flushes, chain.total_flush_bytes, chain.last_flush_bytes = small.flushes, small.flush_bytes, small.last_bytes
    state.redeliveries += small.redeliveries
    chain.truncated, chain.over_cap = bool(small.truncated), bool(small.over_cap)  # (PIP-299: as the form's)
    if carried is not None:
        cache = pages.cache
        chain.recovery, cache.swap_ins, cache.evictions, cache.write_backs = carried[:4]
        chain.flushes += carried.flushes
        chain.total_flush_bytes += carried.flush_bytes
        if not small.flushes:
            chain.last_flush_bytes = carried.last_bytes
        state.redeliveries += carried.redeliveries


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


def form_stats(topic: str, name: str, small: Any, carried: Carried, parts: Parts) -> CursorStats:
    """:func:`cursor_stats` of a cursor in the small form ``small`` (``parts`` of None but
    its config and controller; ``carried`` as for :func:`cursor_figures`, whose figures these
    are): its state is the form's, not the cache's (no cache bytes, no ledger in memory or
    swapped out); the ledgers its state holds are those its newest state marker names, and
    all of them a flush writes when the form changed since its last; a state marker is a full
    one. O(the form's runs and counts)."""
    figures = dict(zip(CURSOR_FIGURES, cursor_figures(parts, small, carried), strict=True))
    held = ledgers_held(small)
    last = small.last_bytes if small.flushes else carried.last_bytes
    return CursorStats(
        topic=topic,
        name=name,
        mark_delete_position=trusted(small.md_l, small.md_e),
        read_position=trusted(*read_position(small)),
        ack_range_count=figures["ack_range_count"],
        ledgers_in_memory=figures["ledgers_in_memory"],
        ledgers_swapped_out=figures["ledgers_swapped_out"],
        ledgers_indexed=held,
        dirty_ledgers=held if small.dirty else 0,
        cache_bytes=figures["cache_bytes"],
        cache_budget=figures["cache_budget"],
        largest_ledger_bytes=0,
        over_budget=False,
        swap_ins=figures["swap_ins"],
        evictions=figures["evictions"],
        write_backs=figures["write_backs"],
        flushes=figures["flushes"],
        last_flush_bytes=last,
        total_flush_bytes=figures["total_flush_bytes"],
        last_marker_seq=small.next_seq - 1,
        deltas_since_full_marker=0,
        truncated=bool(small.truncated),
        persisted_ranges=figures["persisted_ranges"],
        ranges_over_limit=figures["ranges_over_limit"],
        recovery=carried.recovery,
        revision_num=parts.controller.revision_num,
        revisions_done=figures["revisions_done"],
        revision_running=figures["revision_running"],
        redeliveries=figures["redeliveries"],
    )


def cursor_figures(parts: Parts, small: Any = None, carried: Carried | None = None) -> tuple[int, ...]:
    """The numbers of ``ackstore.stats.CURSOR_FIGURES``, in order, without measuring; of a
    cursor in the small form (``small``, ``ackstore.cursor.small``), its ranges, flushes and
    redeliveries are the form's (its parts do not exist: ``parts`` of None), and ``carried``
    what its parts left when the form took their place (their recovery report and cache
    counters; None: opened into the form). O(1)."""
    state, pages, chain, cfg, controller = parts
    limit = cfg.max_unacked_ranges_to_persist
    if state is None or pages is None or chain is None:  # parts that do not exist
        cache_figures: tuple[int, ...] = (0, cfg.max_individual_ack_cache_bytes, 0, 0, 0, 0, 0)
        ranges = persisted = truncated = blocked = chain_flushes = chain_bytes = skipped = redeliveries = 0
        if carried is not None:
            cache_figures = (*cache_figures[:4], carried.swap_ins, carried.evictions, carried.write_backs)
            chain_flushes, chain_bytes, redeliveries = carried.flushes, carried.flush_bytes, carried.redeliveries
            skipped = carried.recovery.markers_skipped
    else:
        cache = pages.cache
        cache_figures = (
            cache.nbytes, cache.budget, len(cache.loaded), len(cache.swapped), cache.swap_ins, cache.evictions,
            cache.write_backs,
        )  # fmt: skip
        ranges, persisted, truncated = state.range_count, chain.persisted_ranges, int(chain.truncated)
        blocked = int(cfg.pauses(ranges))
        chain_flushes, chain_bytes = chain.flushes, chain.total_flush_bytes
        skipped, redeliveries = chain.recovery.markers_skipped, state.redeliveries
    flushes = flush_bytes = 0
    if small is not None:
        ranges, persisted, flushes, flush_bytes = small.range_count(), small.persisted, small.flushes, small.flush_bytes
        truncated, blocked = small.truncated, int(cfg.pauses(ranges))
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
