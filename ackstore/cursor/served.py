"""The calls a broker's read path makes all day, answered from the small form when the cursor
is in it (``ackstore.cursor.small``), else from its parts: delivery counts and their
recording, the read position's moves, unacked entries and the ranges. Each takes the store's lock.

:class:`Served` is a base of :class:`~ackstore.cursor.core.CursorCore`, on
:class:`~ackstore.cursor.read_side.ReadSide`; the form and the parts give the same answers
(the state machines hold the two to one model).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..errors import InvalidTypeError
from ..ledger_acks import MAX_COUNT
from ..position import MAX_ENTRY, Position, trusted
from ..storage.records import pack_properties, unpack_properties
from .deliveries import (
    checked_counts,
    checked_deliveries,
    counts_window,
    delivery_count,
    delivery_counts,
    record_deliveries,
    set_delivery_counts,
)
from .moves import batch_mask, batch_target, check_batch_size, reset_target
from .read_side import ReadSide
from .small_span import (
    ahead_of_line,
    behind_line,
    bound_of,
    cumulative_entry,
    form_entry,
    ledger_counts,
    ledger_runs,
    line_at,
    place,
    read_entry,
    read_past_line,
    split_behind,
)
from .state import AckState, drop_property, group_positions, put_property
from .validate import Checks, check_ack, pair

__all__ = ["Served"]


class Served(ReadSide):
    """The read path's calls, the small form's answers first."""

    __slots__ = ()

    small: Any

    def _bounded(self, small: Any) -> bool:
        """The form bounded as of the topic's directory now (lock held): the ledgers its line
        spans after M's and the highest entry allowed (``small_span.bound_of``), M moved on
        across what it acked whole as the parts' M would, and past ledgers trimmed away
        (:meth:`_past_trim`). False when the form cannot follow the directory: the form ends
        (the parts reconcile it). O(1) unless the directory changed."""
        topic = self.topic
        version = topic.version
        while small.limit_version != version:
            d = topic.directory
            bound = bound_of(d, small.md_l)
            if bound is None:
                if self._past_trim(small, d):
                    continue
                self._parts()
                return False
            if small.bound(version, *bound):
                self._changed()  # M moved: the next flush writes it
        return True

    def _past_trim(self, small: Any, d: Any) -> bool:
        """M's ledger was trimmed away (retention dropped ledgers the cursor had not read
        through): what the form holds below the directory's first ledger goes, and M moves
        to that ledger's start and on over its acks, as the parts' reconcile moves it. On
        the form's line, the entries up to that ledger's place are acked (M moves on into
        it, the trimmed ledgers' acks, counts and batches at or below M); past the line,
        everything the form held was trimmed: a reset to the first ledger's first entry.
        Either way the next flush writes the state whole (a slot when it fits, else a new
        base of the chain with records of its own): no later marker names a record written
        before the trim, which a damaged one would leave nothing to fall back to. False,
        the form as it was, on a reader (its parts read the writer's newest state), when
        the directory holds no ledger, or when the line does not say where its first one is
        (the parts take it). O(runs + counts)."""
        first = d.first()
        spans = small.spans
        at = dict(spans).get(first)
        if self._store.readonly or first is None or (at is None and any(ledger >= first for ledger, _ in spans)):
            return False
        if at is None:
            small.reset(first, 0)  # (a reset is written whole next: it unchains the form)
        else:
            if at - 1 > small.md_e and not small.ack_range(small.md_e + 1, at - 1):
                return False  # (M moved on: the parts fit what is left)
            small.unchain()  # written whole next, as the parts write a reconciled state
        self._changed()
        return small.md_l in d

    def _ack_in_form(self, positions: Any) -> bool:
        """``Cursor.ack`` of a list or tuple of positions in the small form (the store lock
        held): True when the form took them, those at or below M in a ledger before M's
        ignored (:func:`~ackstore.cursor.small_span.ahead_of_line`); False when the parts
        take the call. O(positions)."""
        small = self.small
        if (
            small is None
            or not isinstance(positions, (list, tuple))
            or not (small.limit_version == self.topic.version or self._bounded(small))
        ):
            return False
        fits = small.ack_positions(positions)  # every one the form's, or None
        if fits is None:
            rest = ahead_of_line(small, self.topic.directory, self.topic.name, positions)
            if rest is None:  # (checked first as the parts check it: a bad one raises here)
                checks = self._form_checks(small)
                group_positions(positions, checks.limit, checks.check)
                return False
            if not rest:
                return True  # (every one at or below M, ignored)
            fits = small.ack_positions(rest)
            if fits is None:
                return False
        if not fits or small.limit_version < 0:
            self._after_form_ack(small, fits)
        self._changed()
        return True

    def _form_checks(self, small: Any) -> Checks:
        """The parts' checks of an ack or a delivery at the form's M: a call the form does
        not take is checked with them before the parts take it, so that a bad one raises
        with the form as it was."""
        return Checks(self.topic.directory, self.topic.name, (small.md_l, small.md_e))

    def _after_form_ack(self, small: Any, fits: bool) -> None:
        """After an ack in the form: over its cap the parts take the state; M moved on into
        another ledger, the form is bounded there."""
        if not fits:
            self._parts()
        elif small.limit_version < 0:
            self._bounded(small)

    def ack_cumulative(self, position: Any) -> None:
        """``Cursor.ack_cumulative``: in the small form, the form's entries from M + 1 through
        the position acked (M moves there and over the acks after it) when the form takes
        the position (``small_span.cumulative_entry``), else by the parts."""
        small = self.small
        if small is not None and isinstance(position, tuple) and len(position) == 2:
            with self._lock:
                self._alive()
                if self.small is small and self._bounded(small):
                    ledger, entry = position
                    x = cumulative_entry(small, ledger, entry)
                    if x is not None:
                        if x > small.md_e:
                            fits = small.ack_range(small.md_e + 1, x)
                            self._changed()
                            self._after_form_ack(small, fits)
                        return
                    md = (small.md_l, small.md_e)
                    if type(ledger) is int and type(entry) is int and (ledger, entry) <= md:  # behind M: nothing
                        check_ack(self.topic.directory, self.topic.name, md, ledger, entry, low=-1)
                        return
        self.edit(AckState.ack_cumulative, position, served=True)

    def reset_to(self, position: Any, batch: tuple[int, int] | None = None) -> None:
        """``Cursor.reset_to``: in the small form, else by the parts; the target (and the
        batch: the indexes before ``batch[0]`` of a batch of ``batch[1]``) checked first
        (:func:`~ackstore.cursor.moves.reset_target`, ``batch_target``), nothing changed
        when it raises. The form's line is then bounded again from M's new ledger."""
        with self._lock:
            small = self.small
            if small is not None:
                self._alive()
                ledger, entry = reset_target(self.topic, position)
                mask = batch_target(self.topic, pair(position), *batch) if batch is not None else 0
                small.reset(ledger, entry)
                self._changed()
                if self._bounded(small) and mask:  # (the entry is M + 1, on the form's line)
                    self._after_form_ack(small, small.ack_batch(small.md_e + 1, batch[1], mask))  # type: ignore[index]
                return
        self.edit(AckState.reset_to, position, batch, served=True)

    def ack_batch_index(self, position: Any, batch_size: Any, indexes: Any) -> None:
        """``Cursor.ack_batch_index``: in the small form when it holds the position (the form
        records a partial batch as the parts do, and acks the entry once every index is),
        else by the parts; checked first, nothing changed when it raises."""
        with self._lock:
            small = self.small
            if small is not None:
                self._alive()
                ledger, entry = pair(position)
                md = (small.md_l, small.md_e)
                check_ack(self.topic.directory, self.topic.name, md, ledger, entry)
                mask = batch_mask(batch_size, indexes)
                if self._bounded(small):
                    x = form_entry(small, ledger, entry)
                    if x >= 0 or (ledger, entry) <= md:
                        check_batch_size(ledger, entry, batch_size, small.batch(x) if x > small.md_e else None)
                        if mask and x > small.md_e:
                            fits = small.ack_batch(x, batch_size, mask)
                            self._changed()
                            self._after_form_ack(small, fits)
                        return
        self.edit(AckState.ack_batch_index, position, batch_size, indexes, served=True)

    def record_deliveries(self, positions: Any) -> list[int]:
        """``Cursor.record_deliveries`` (``durable``, the flush after it, is the caller's): in
        the small form when it takes every position (one that takes it over its cap ends
        the form), else by the parts."""
        try:
            items = list(positions)
        except TypeError:
            raise InvalidTypeError(f"positions must be an iterable of Position, got {positions!r}") from None
        with self._lock:
            small = self.small
            if small is not None:
                self._alive()
                counts = self._counted_in_form(small, items, None) if self._bounded(small) else None
                if counts is not None:
                    if not small.fits():
                        self._parts()
                    self._changed()
                    return counts
                checked_deliveries(items, self._form_checks(small).check)  # (a bad one raises here)
            return self.edit(record_deliveries, items, served=True)  # type: ignore[no-any-return]

    def _counted_in_form(self, small: Any, items: Any, values: list[int] | None) -> list[int] | None:
        """Deliveries of ``items`` (``values`` None) or their counts set to ``values``, in
        the small form (bounded; the store lock held): each one's count after it, 0 for one
        at or below M in a ledger before M's (acked: checked in its order as the parts check
        it, :func:`~ackstore.cursor.small_span.behind_line`, and not counted); None, changing
        nothing, when the form does not take them (the parts do). O(items)."""

        def count(items: Any, values: list[int] | None) -> list[int] | None:
            return small.deliver_positions(items) if values is None else small.set_counts(items, values)

        out = count(items, values)
        split = None if out is not None or not isinstance(items, (list, tuple)) else split_behind(small, items)
        if split is None:
            return out
        at, rest = split
        for i in at:
            behind_line(small, self.topic.directory, self.topic.name, *items[i])
        behind = set(at)
        kept = None if values is None else [n for i, n in enumerate(values) if i not in behind]
        out = count(rest, kept) if rest else []
        if out is not None:
            for i in at:
                out.insert(i, 0)
        return out

    def restore_delivery_counts(self, counts: dict[Any, Any]) -> int:
        """``Cursor.restore_delivery_counts``: in the small form when it takes every position
        and every count is one it allows (one that takes it over its cap ends the form), else
        by the parts, which check them and say what is wrong."""
        with self._lock:
            small = self.small
            if small is not None:
                self._alive()
                values = list(counts.values())
                allowed = all(type(n) is int and 1 <= n <= MAX_COUNT for n in values)
                out: list[int] | None = None
                if allowed and self._bounded(small):
                    out = self._counted_in_form(small, list(counts), values)
                if out is not None:
                    if not small.fits():
                        self._parts()
                    self._changed()
                    return sum(1 for n in out if n)
                checked_counts(counts, self._form_checks(small).check)  # (a bad one raises here)
            return self.edit(set_delivery_counts, counts)  # type: ignore[no-any-return]

    def delivery_count(self, position: Any) -> int:
        """``Cursor.delivery_count``."""
        with self._lock:
            small = self._fresh()
            if small is not None:
                self.ensure_open()
                ledger, entry = pair(position)
                if self._bounded(small):
                    x = form_entry(small, ledger, entry)
                    return small.count(x) if x >= 0 else 0  # type: ignore[no-any-return]
            return self.read(lambda: delivery_count(self.built(), position), served=True, caught_up=True)

    def delivery_counts(self, start: Any = None, end: Any = None) -> dict[Position, int]:
        """``Cursor.delivery_counts``."""
        with self._lock:
            small = self._fresh()
            if small is not None:
                self.ensure_open()
                low, high = counts_window((small.md_l, small.md_e), start, end)
                window = line_at(small, *low), MAX_ENTRY + 2 if high is None else line_at(small, *high)
                return {trusted(*at): n for at, n in ledger_counts(small, *window)}
            return self.read(lambda: delivery_counts(self.built(), start, end), served=True, caught_up=True)

    def unacked_entries(self, ledger: int, start: int, stop: int, n: int) -> list[int]:
        """``Cursor.unacked_entries``."""
        with self._lock:
            small = self._fresh()
            if small is not None:
                self.ensure_open()
                found = self._form_unacked(small, ledger, start, stop, n)
                if found is not None:
                    return found
                if self.small is not None:
                    self._parts()  # a span the form does not hold: the parts answer (the form ends)
            return self.read(lambda: self.built().unacked_entries(ledger, start, stop, n), served=True, caught_up=True)

    def _form_unacked(self, small: Any, ledger: Any, start: int, stop: int, n: int) -> list[int] | None:
        """``unacked_entries`` from the form, or None when the parts answer (the form ended, the
        ledger is no int, or entries below a spanned ledger's first). A ledger off the line and
        the entries past a spanned ledger's end (the next one's offset) hold no ack: each one
        is listed, as the parts list them."""
        if type(ledger) is not int or not self._bounded(small):
            return None
        if ledger < small.md_l:
            return []
        at = place(small, ledger)
        if at is None:  # no ledger of the line (after it, or between two of its ledgers): nothing acked
            return list(range(start, min(stop, start + n)))
        offset, end = at
        mine = ledger == small.md_l
        if not mine and start < 0:
            return None
        if end < 0:
            if mine:  # (M's ledger alone on the line: no end)
                return [x - offset for x in small.unacked(offset + start, offset + stop, n)]
            end = MAX_ENTRY + 1
        out = [x - offset for x in small.unacked(offset + start, min(offset + stop, end), n)]
        first = max(start, end - offset)  # past the ledger's end
        out += range(first, min(stop, first + n - len(out)))
        return out

    def properties(self) -> dict[str, int | str]:
        """``Cursor.properties``: a copy, from the form's packed ones or the parts'."""
        return self.read(self._properties, served=True)

    def _properties(self) -> dict[str, int | str]:
        small = self.small
        return dict(self._state.properties) if small is None else unpack_properties(small.props)

    def set_property(self, key: Any, value: Any) -> None:
        """``Cursor.set_property``."""
        self._edit_properties(AckState.set_property, put_property, key, value)

    def remove_property(self, key: Any) -> bool:
        """``Cursor.remove_property``: True if it was set."""
        return self._edit_properties(AckState.remove_property, drop_property, key)

    def _edit_properties(self, on_parts: Any, rule: Callable[..., bool], *args: Any) -> bool:
        """``rule(properties, *args)`` (``state.put_property``, ``drop_property``): in the
        small form on its packed properties (packed again when they changed), else
        ``on_parts(ack state, *args)`` by the parts. Whether they changed."""
        with self._lock:
            small = self.small
            if small is None:
                return bool(self.edit(on_parts, *args, served=True))
            self._alive()
            props = unpack_properties(small.props)
            changed = rule(props, *args)
            if changed:
                small.set_props(pack_properties(props))
                self._changed()
            return changed

    def move_read_position(self, position: Position) -> None:
        """``Cursor.move_read_position`` (the read path's own move: not checked)."""
        with self._lock:
            small = self.small
            if small is not None and self._bounded(small):
                x = read_entry(small, position[0], position[1])
                if x >= 0:
                    small.read_from(x)
                    if not read_past_line(small, self.topic.directory):
                        return
                    # (the next ledger's first entry is not the form's: the parts hold it)
            self.edit(AckState.move_read_position, position, check=False, served=True)

    def rewind(self) -> None:
        """``Cursor.rewind``."""
        with self._lock:
            small = self.small
            if small is not None:
                small.rewind()
                return
            self.edit(AckState.rewind, check=False, served=True)

    def ledger_ranges(self) -> Iterator[tuple[int, list[tuple[int, int]]]]:
        """``Cursor.ledger_ranges``: the writer's cursor ledger by ledger, each under the
        lock; a read-only cursor's whole first, from one flushed state."""
        if self._store.readonly:
            yield from self.read(self._ranges, served=True)
            return
        with self._lock:
            self.ensure_open()
            small = self.small
            if small is None:
                ledgers = sorted(self._pages.known())
            else:  # the form's ledgers, read at once
                held = ledger_runs(small)
        if small is not None:
            yield from held
            return
        for ledger in ledgers:
            with self._lock:
                ranges = self._ledger_ranges(ledger)
            if ranges:
                yield ledger, ranges

    def _ledger_ranges(self, ledger: int) -> list[tuple[int, int]]:
        """One ledger's ranges (a swapped-out one read from its record, not cached)."""
        small = self.small
        if small is not None:  # the form began since the iterator started
            return dict(ledger_runs(small)).get(ledger, [])
        la = self._pages.peek(ledger)
        return la.ranges() if la is not None else []

    def _ranges(self) -> list[tuple[int, list[tuple[int, int]]]]:
        """Every ledger's ranges."""
        small = self.small
        if small is not None:
            return ledger_runs(small)  # type: ignore[no-any-return]
        out = []
        for ledger in sorted(self._pages.known()):
            ranges = self._ledger_ranges(ledger)
            if ranges:
                out.append((ledger, ranges))
        return out
