"""A plain Python model of a topic's ledger directory and its cursors' ack state.

Deliberately naive (sets of positions, loops over entries) so that it is obviously
right; the engine is checked against it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

MAX_ENTRY = (1 << 32) - 2

Pos = tuple[int, int]


@dataclass
class CursorModel:
    floor: Pos = (0, -1)
    acked: set[Pos] = field(default_factory=set)
    batches: dict[Pos, tuple[int, set[int]]] = field(default_factory=dict)
    properties: dict[str, int | str] = field(default_factory=dict)
    #: where reads stand, in memory only: a restart forgets it (reads start at M + 1 again)
    read: Pos = (0, 0)
    #: deliveries of entries not acked (an ack, a reset drop them)
    counts: dict[Pos, int] = field(default_factory=dict)


@dataclass
class TopicModel:
    ledgers: list[list[int | None]] = field(default_factory=list)  # [[id, count or None]]
    last_id: int = -1
    cursors: dict[str, CursorModel] = field(default_factory=dict)
    flushed: dict[str, CursorModel] = field(default_factory=dict)
    limit: int = 0  # PIP-299 max_unacked_ranges_to_persist (0: no limit)
    tracked: bool = False  # the topic tracks its open ledger's last confirmed entry
    confirmed: int | None = None  # that entry (None: untracked or no open ledger)
    confirmed_flushed: int | None = None  # what a reopen finds of it

    # -- derived ----------------------------------------------------------------------------
    def ids(self) -> list[int]:
        return [x[0] for x in self.ledgers]

    def count(self, ledger: int) -> int | None:
        for i, c in self.ledgers:
            if i == ledger:
                return c
        raise KeyError(ledger)

    def md(self, c: CursorModel) -> Pos:
        ledger, entry = c.floor
        ids = self.ids()
        if not ids:
            return ledger, entry
        if ledger < ids[0]:
            ledger, entry = ids[0], -1
        if ledger not in ids:
            return ledger, entry
        counts = dict(self.ledgers)  # type: ignore[arg-type]
        entry = min(entry, self.limit_of(ledger))  # sealed (or confirmed) short of a persisted mark-delete
        at = {x: i for i, x in enumerate(ids)}
        open_limit = MAX_ENTRY if self.confirmed is None else self.confirmed
        while True:
            limit = open_limit if counts[ledger] is None else counts[ledger] - 1  # (limit_of's)
            while (ledger, entry + 1) in c.acked and entry < limit:
                entry += 1
            count = counts[ledger]
            i = at[ledger]
            if count is not None and entry == count - 1 and i + 1 < len(ids):
                ledger, entry = ids[i + 1], -1
                continue
            return ledger, entry

    def within(self, p: Pos) -> bool:
        """``p`` lies in its ledger as the directory now bounds it (acks persisted past a
        bound set since are dropped when they are loaded)."""
        return p[0] in self.ids() and p[1] <= self.limit_of(p[0])

    def ranges(self, c: CursorModel) -> list[tuple[Pos, Pos]]:
        md = self.md(c)
        live = sorted(p for p in c.acked if p > md and self.within(p))
        out: list[tuple[Pos, Pos]] = []
        for p in live:
            if out and out[-1][1][0] == p[0] and out[-1][1][1] == p[1] - 1:
                out[-1] = (out[-1][0], p)
            else:
                out.append((p, p))
        return out

    def partials(self, c: CursorModel) -> dict[Pos, tuple[int, frozenset[int]]]:
        md = self.md(c)
        return {
            p: (s, frozenset(ix)) for p, (s, ix) in c.batches.items() if p > md and p not in c.acked and self.within(p)
        }

    def is_acked(self, c: CursorModel, p: Pos, md: Pos | None = None) -> bool:
        """Whether ``p`` is acked (``md``: the cursor's M, when the caller has it)."""
        return p <= (self.md(c) if md is None else md) or (p in c.acked and self.within(p))

    def counts(self, c: CursorModel) -> dict[Pos, int]:
        """The delivery counts a cursor shows: of entries above M, in the directory, not acked."""
        md = self.md(c)
        return {p: n for p, n in sorted(c.counts.items()) if not self.is_acked(c, p, md) and self.within(p)}

    def read_position(self, c: CursorModel) -> Pos:
        """Where the next sequential read starts: where reads stand, never below M + 1."""
        md = self.md(c)
        return max(c.read, (md[0], md[1] + 1))

    def readable(self, c: CursorModel, n: int, open_entries: int) -> list[Pos]:
        """What a sequential read of ``n`` returns: the first unacked written positions from
        the read position on."""
        start = self.read_position(c)
        out: list[Pos] = []
        md = self.md(c)
        for ledger in self.ids():
            if ledger < start[0]:
                continue
            for entry in range(start[1] if ledger == start[0] else 0, self.written(ledger, open_entries)):
                if len(out) == n:
                    return out
                if not self.is_acked(c, (ledger, entry), md):
                    out.append((ledger, entry))
        return out

    def read(self, c: CursorModel, positions: list[Pos]) -> None:
        """A sequential read returned ``positions``: reads stand after the last one, past a
        run of acked entries that follows and past a sealed ledger's end (Pulsar's next
        available position)."""
        if not positions:
            return
        ledger, entry = positions[-1][0], positions[-1][1] + 1
        ids = self.ids()
        while True:
            count = self.count(ledger)
            i = ids.index(ledger)
            if count is not None and entry >= count and i + 1 < len(ids):
                ledger, entry = ids[i + 1], 0
            elif self.is_acked(c, (ledger, entry)):
                entry += 1
            else:
                break
        c.read = max(c.read, (ledger, entry))

    # -- validation (True when the engine must accept) ----------------------------------------
    def valid_position(self, p: Pos, low: int = 0) -> bool:
        ledger, entry = p
        if ledger not in self.ids():
            return False
        return low <= entry <= self.limit_of(ledger)

    def valid_ack(self, c: CursorModel, p: Pos, low: int = 0) -> bool:
        """:meth:`valid_position` for an ack or a delivery: a position at or below the
        mark-delete position passes whatever its ledger (one trimmed since), if its entry is
        one a ledger can have."""
        ledger, entry = p
        if ledger not in self.ids():
            return 0 <= ledger < self.md(c)[0] and low <= entry <= MAX_ENTRY
        return self.valid_position(p, low)

    def limit_of(self, ledger: int) -> int:
        """The highest entry ``ledger`` accepts: a sealed one's last, an open one's last
        confirmed (while tracked)."""
        count = self.count(ledger)
        if count is not None:
            return count - 1
        return MAX_ENTRY if self.confirmed is None else self.confirmed

    def valid_reset_position(self, p: Pos) -> bool:
        """A reset may also go to just after a sealed ledger's last entry (Pulsar's rule),
        or to the next entry to be written of a tracked open ledger."""
        ledger, entry = p
        if self.valid_position(p):
            return True
        if ledger not in self.ids():
            return False
        count = self.count(ledger)
        if count is not None:
            return count == entry
        return self.confirmed is not None and entry == self.confirmed + 1

    def clamp_reset(self, p: Pos) -> Pos | None:
        """Where a non-strict reset to ``p`` goes (Pulsar's next valid position), None when
        it raises: earliest before the first ledger, the next ledger's first entry in a
        missing ledger or past a ledger's end, the latest past the newest ledger."""
        if self.valid_reset_position(p):
            return p
        ids = self.ids()
        if not ids:
            return None
        ledger, entry = p
        if ledger in ids and entry < 0:
            return ledger, 0
        later = [i for i in ids if i > ledger]
        if later:
            return later[0], 0
        last, count = self.ledgers[-1]
        if count is not None:
            return last, count
        return None if self.confirmed is None else (last, self.confirmed + 1)

    def latest(self) -> Pos:
        """Where a cursor created at the latest position starts (its mark-delete)."""
        if not self.ledgers:
            return 0, -1
        ledger, count = self.ledgers[-1]
        if count is not None:
            return ledger, count - 1
        return ledger, -1 if self.confirmed is None else self.confirmed

    def valid_advance(self, ledger: int, entry: int) -> bool:
        if not self.ledgers or ledger != self.ledgers[-1][0]:
            return False
        count = self.ledgers[-1][1]
        if count is not None:
            return entry == count - 1
        low = -1 if self.confirmed is None else self.confirmed
        if not low <= entry <= MAX_ENTRY:
            return False
        if self.confirmed is None:  # turning the bound on: no cursor may hold an ack past it
            return all(self.highest_live(c, ledger) <= entry for c in self.cursors.values())
        return True

    def advance(self, ledger: int, entry: int) -> None:
        first = not self.tracked
        self.tracked = True
        if self.ledgers[-1][1] is None:
            self.confirmed = entry
            if first:  # the first call is durable at once
                self.confirmed_flushed = entry

    def add_ledger(self, ledger: int) -> None:
        self.ledgers.append([ledger, None])
        self.last_id = ledger
        self.confirmed = self.confirmed_flushed = -1 if self.tracked else None

    def close_ledger(self, entries: int) -> None:
        self.ledgers[-1][1] = entries
        self.confirmed = self.confirmed_flushed = None

    def highest_live(self, c: CursorModel, ledger: int) -> int:
        md = self.md(c)
        hi = md[1] if md[0] == ledger else -1
        for lg, e in c.acked:
            if lg == ledger and (lg, e) > md and self.within((lg, e)):
                hi = max(hi, e)
        for lg, e in [*self.partials(c), *self.counts(c)]:
            if lg == ledger:
                hi = max(hi, e)
        return hi

    # -- operations (call only when valid) -----------------------------------------------------
    def ack(self, c: CursorModel, positions: list[Pos]) -> None:
        ids = set(self.ids())
        positions = [p for p in positions if p[0] in ids]  # (the others lie below M: ignored)
        c.acked.update(positions)
        for p in positions:
            c.counts.pop(p, None)

    def ack_cumulative(self, c: CursorModel, p: Pos) -> None:
        if p > c.floor:
            c.floor = p
        c.counts = {q: n for q, n in c.counts.items() if q > p}

    def deliver(self, c: CursorModel, positions: list[Pos]) -> list[int]:
        """One more delivery of each position (valid ones only); each count after it, 0 if acked."""
        out = []
        for p in positions:
            if self.is_acked(c, p):
                out.append(0)
                continue
            c.counts[p] = min(self.counts(c).get(p, 0) + 1, (1 << 32) - 1)  # (the highest stays)
            out.append(c.counts[p])
        return out

    def set_counts(self, c: CursorModel, counts: dict[Pos, int]) -> int:
        """Counts set by hand (valid ones only): each position not acked takes its count; how
        many did."""
        done = 0
        for p, n in counts.items():
            if not self.is_acked(c, p):
                c.counts[p] = n
                done += 1
        return done

    def ack_batch(self, c: CursorModel, p: Pos, size: int, indexes: list[int]) -> None:
        if not indexes or self.is_acked(c, p):
            return
        old = self.partials(c).get(p)
        ix = set(indexes) | (set(old[1]) if old else set())
        if len(ix) == size:
            c.acked.add(p)
            c.batches.pop(p, None)
            c.counts.pop(p, None)
        else:
            c.batches[p] = (size, ix)

    def written(self, ledger: int, open_entries: int) -> int:
        count = self.count(ledger)
        return open_entries if count is None else count

    def unacked_from(self, c: CursorModel, n: int, open_entries: int) -> list[Pos]:
        """The first ``n`` unacked positions after the mark-delete position."""
        md = self.md(c)
        out: list[Pos] = []
        for ledger in self.ids():
            if ledger < md[0]:
                continue
            for entry in range(self.written(ledger, open_entries)):
                if len(out) == n:
                    return out
                if not self.is_acked(c, (ledger, entry)):
                    out.append((ledger, entry))
        return out

    def entries_from(self, c: CursorModel, n: int, open_entries: int) -> Pos | None:
        """The ``n``-th written position after the mark-delete position, acked or not (the
        last written one when fewer follow; None when none does)."""
        md = self.md(c)
        last = None
        for ledger in self.ids():
            for entry in range(self.written(ledger, open_entries)):
                if (ledger, entry) <= md:
                    continue
                if n == 0:
                    return last
                last, n = (ledger, entry), n - 1
        return last

    def reset(self, c: CursorModel, p: Pos, batch: tuple[int, int] | None = None) -> None:
        """Reset to ``p``; ``batch`` ``(index, size)``: the indexes before ``index`` acked."""
        c.read = p
        c.floor = (p[0], p[1] - 1)
        c.acked.clear()
        c.batches.clear()
        c.counts.clear()  # a reset is a decision to deliver again, not a failed delivery
        if batch is not None and batch[0]:
            c.batches[p] = (batch[1], set(range(batch[0])))

    def reset_outcome(
        self, p: Pos, batch: tuple[int, int] | None, strict: bool
    ) -> tuple[Pos, tuple[int, int] | None] | None:
        """Where a dispatcher's reset(p, batch, strict) goes and with which batch; None: it raises."""
        if batch is not None and not batch[0] < batch[1]:
            return None
        if self.valid_reset_position(p) and (batch is None or not batch[0] or self.valid_position(p)):
            return p, batch
        if strict:
            return None
        target = self.clamp_reset(p)
        return None if target is None else (target, None)

    def batch_size_conflict(self, c: CursorModel, p: Pos, size: int) -> bool:
        old = self.partials(c).get(p)
        return old is not None and old[0] != size

    def flush(self) -> None:
        self.flushed = {name: self.persisted(c) for name, c in self.cursors.items()}
        self.confirmed_flushed = self.confirmed

    def persisted(self, c: CursorModel) -> CursorModel:
        """What a flush persists of ``c``: everything, or with a limit the lowest ranges (PIP-299)."""
        if not self.limit or len(self.ranges(c)) <= self.limit:
            return copy.deepcopy(c)
        md = self.md(c)
        ranges, partials, counts = self.ranges(c), self.partials(c), self.counts(c)
        ledgers = sorted({a[0] for a, _ in ranges} | {p[0] for p in partials} | {p[0] for p in counts})
        kept = CursorModel(floor=md, properties=dict(c.properties))
        left = self.limit
        for ledger in ledgers:
            mine = [r for r in ranges if r[0][0] == ledger]
            if left <= 0:
                continue
            take = mine if len(mine) <= left else mine[:left]
            for a, b in take:
                kept.acked.update((ledger, e) for e in range(a[1], b[1] + 1))
            cut = take[-1][1][1] if len(take) < len(mine) else None
            for p, (size, ix) in partials.items():
                if p[0] == ledger and (cut is None or p[1] < cut):
                    kept.batches[p] = (size, set(ix))
            kept.counts.update({p: n for p, n in counts.items() if p[0] == ledger and (cut is None or p[1] < cut)})
            left -= len(take)
        return kept

    def crash(self) -> None:
        self.confirmed = self.confirmed_flushed
        restored = copy.deepcopy(self.flushed)
        for name in self.cursors:
            restored.setdefault(name, CursorModel())
        self.cursors = {name: self.load(c) for name, c in restored.items()}

    def load(self, c: CursorModel) -> CursorModel:
        """What a load (a restart, a reader's open or refresh) makes of a flushed ``c``:
        clipped to this directory's bounds, once; reads start at M + 1 again."""
        c = copy.deepcopy(c)
        c.read = (0, 0)  # never persisted
        c.floor = self.md(c)
        c.acked = {p for p in c.acked if self.within(p)}
        c.batches = {p: b for p, b in c.batches.items() if self.within(p)}
        c.counts = self.counts(c)
        return c
