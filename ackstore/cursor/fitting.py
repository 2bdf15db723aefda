"""The ack state fitted to its topic's ledger directory: at open (from a recovered marker),
when ledgers are trimmed, sealed or given a durable bound, at a ledger's swap-in, and
before a seal (which must not cut off what the cursor holds).

Functions over an :class:`~ackstore.cursor.state.AckState`, as :mod:`.deliveries` is: the
state holds the positions and the rules that move them; this module holds what the
directory asks of them. No LMDB and no lock here (the caller holds the cursor's lock).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import LedgerStateError
from ..ledger_acks import bitmap_of_runs
from ..position import trusted
from .deliveries import put_counts
from .small_span import ledger_batches, ledger_count_groups, ledger_runs, read_position
from .state import start_of

if TYPE_CHECKING:
    from ..directory import LedgerDirectory
    from ..ledger_acks import LedgerAcks
    from ..storage.records import Marker
    from .state import AckState

__all__ = ["check_close", "check_seal", "clip", "directory_changed", "load", "on_load", "reconcile", "take_form"]


def load(state: AckState, marker: Marker | None, initial_position: str = "earliest") -> None:
    """Start ``state`` from a recovered marker, with its ledger source already holding the
    marker's ledgers; then fit the directory. With no marker (a cursor that never flushed)
    start at ``initial_position``: ``"earliest"``, the topic's first ledger, or
    ``"latest"``, just before the next entry to be written (:func:`~.state.start_of`)."""
    d = state.topic.directory
    if marker is None:
        state.md = trusted(*start_of(d, initial_position))
        state.rp = state.md.next()
        state.properties = {}
        state.meta_dirty = True  # a new cursor's start position is persisted by the first flush
    else:
        state.md = trusted(*marker.mark_delete)
        state.properties = dict(marker.properties)
        state.meta_dirty = False
    state.range_count = state.ledgers.runs()
    state.limit_ledger, state.limit_value, state.limit_version = -1, -1, -1
    # a lazy open leaves the mark-delete ledger on disk only when its record holds
    # nothing at or below M + 1 (recovery checked): nothing to drop or advance over
    md_ledger = state.md[0]
    reconcile(state, d, clean=md_ledger if md_ledger in state.cache.swapped else None)
    # the read position lives in memory only, as in Pulsar: after any restart reads
    # start at the first unacked entry after M (M + 1: M always stands just before
    # one), so whatever was dispatched and not acked is delivered again. A read
    # position a marker of format 6 or older holds is never used.
    state.rp = state.md.next()


def take_form(state: AckState, small: Any, flushed: bool) -> None:
    """The parts take the small form ``small``'s state exactly, when the form ends, from the
    newest flushed state they reloaded (for its log). ``flushed``: that state is the form's
    own (its newest flush committed and it changed nothing since): its ledgers are read in,
    as the form held them (a state whose ledgers are all in memory is what takes the form
    again). Else the reloaded acks, counts and batches are dropped, and M, the runs, the
    delivery counts and the partial batches are the form's, fitted to the directory as it
    is now (the form followed it: ledgers trimmed or sealed since); exact, not added onto
    the reload: a reset in the form drops acks that state holds, and a flush of the form in
    flight is not in it. Every ledger the form holds is dirty after, and M with it. Either
    way the read position, which lives in memory only, is the form's, and the pages are
    within their budget after (each ledger made fits them, what they evict written back).
    O(the state)."""
    d = state.topic.directory
    ledgers = state.ledgers
    if flushed:
        for ledger in sorted(state.cache.swapped):
            ledgers.get(ledger)
    else:
        for known in list(ledgers.known()):
            state.range_count -= ledgers.vanish(known)
        state.set_md(trusted(small.md_l, small.md_e))
        groups = [(ledger, bitmap_of_runs(runs)) for ledger, runs in ledger_runs(small) if ledger in d]
        if groups:
            state.apply_groups(groups)
        by_ledger = {ledger: counts for ledger, counts in ledger_count_groups(small).items() if ledger in d}
        put_counts(state, by_ledger)  # (the form's: of unacked entries above M)
        for (ledger, entry), batch in ledger_batches(small):
            if ledger in d:
                state.put_batch(ledger, entry, batch)
        reconcile(state, d)
    rp = trusted(*read_position(small))
    state.rp = rp if rp[0] in d and rp > state.md else state.md.next()


def reconcile(state: AckState, d: LedgerDirectory, clean: int | None = None) -> None:
    """Fit ``state`` to the current directory (ledgers trimmed or sealed since).
    ``clean``: a ledger left on disk whose state starts above M + 1 (see :func:`load`): not
    read to be checked for acks at or below M + 1."""
    ledgers = state.ledgers
    for ledger in [x for x in ledgers.known() if x not in d]:
        state.range_count -= ledgers.vanish(ledger)
    loaded = state.cache.loaded
    if loaded:  # a lazy open loads none
        for ledger, la in list(loaded.items()):
            clip(state, ledger, la)
    if d.trimmed(state.md[0]):
        state.set_md(trusted(d.ids[0], -1))
    md_l, md_e = state.md
    end = d.end(md_l)
    if 0 <= end <= md_e:  # persisted past an end sealed (or confirmed) since: clip to it
        md_e = end - 1
        state.md = trusted(md_l, md_e)
        state.rp = state.md.next()
        state.meta_dirty = True
    for ledger in [x for x in ledgers.known() if x < md_l]:
        state.range_count -= ledgers.vanish(ledger)
    md_acks = ledgers.get(md_l) if md_l != clean else None
    if md_acks is not None and 0 <= md_acks.lowest() <= md_e:
        state.range_count += md_acks.drop_through(md_e)
        state.touched(md_l, md_acks)
    state.advance(clean)


def clip(state: AckState, ledger: int, la: LedgerAcks) -> None:
    """Drop acks beyond a sealed ledger's end, or an open one's last confirmed entry
    (state persisted before it was sealed, or before the topic tracked that entry)."""
    end = state.topic.directory.end(ledger)
    if end >= 0 and la.highest() >= end:
        state.range_count += la.drop_from(end)
        state.touched(ledger, la)


def on_load(state: AckState, ledger: int, la: LedgerAcks) -> None:
    """A ledger just swapped in: clipped to its end (:func:`clip`) and, M's ledger, to
    what lies above M. Its record may hold delivery counts at or below M: a move of M
    drops them in memory without a new base record (the marker says they are gone), so
    every reader of the record clips them, as recovery does. O(counts) for M's ledger."""
    clip(state, ledger, la)
    md_l, md_e = state.md
    if ledger == md_l and ledger in state.cache.loaded and 0 <= la.lowest() <= md_e:
        state.range_count += la.drop_through(md_e)
        state.touched(ledger, la)


def directory_changed(state: AckState, d: LedgerDirectory) -> None:
    """The directory changed (ledgers trimmed, sealed or given a bound): M moves up to its
    first ledger when it lies below it, then over what is acked."""
    if d.trimmed(state.md[0]):
        state.set_md(trusted(d.ids[0], -1))
    state.advance()


def check_close(state: AckState, ledger: int, entries: int) -> None:
    """Raise unless sealing ``ledger`` with ``entries`` keeps every ack inside it."""
    la = state.ledgers.peek(ledger)  # a look, not a use: it need not enter the cache
    highest = -1 if la is None else la.highest()  # a delivered (counted) entry was written too
    if state.md[0] == ledger:
        highest = max(highest, state.md[1])
    check_seal(state.name, ledger, entries, highest)


def check_seal(name: str, ledger: int, entries: int, highest: int) -> None:
    """Raise unless sealing ``ledger`` with ``entries`` keeps cursor ``name``'s ``highest``
    entry holding state there (M, an ack or a delivery count; -1: none) inside it."""
    if highest >= entries:
        raise LedgerStateError(
            f"cannot close ledger {ledger} with {entries} entries: cursor {name!r} has acknowledged "
            f"or delivered entry {ledger}:{highest}; allowed entries >= {highest + 1}"
        )
