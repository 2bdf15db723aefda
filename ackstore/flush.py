"""The group flush's own objects: a flush in flight (:class:`FlushJob`) and what the
flushes since open add up to (:class:`FlushTotals`). :meth:`AckStore.flush` runs the steps."""

from __future__ import annotations

import logging
import threading
import time
from bisect import bisect_left
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import lmdb

from .cursor import lane, small
from .cursor.plan import say_capped
from .directory import OPEN
from .errors import AckStoreError, StoreError
from .gcpause import gc_paused
from .life import require_open
from .stats import FLUSH_SECONDS_BUCKETS, FlushStats
from .storage.catalog import OPEN_LEDGER_ENTRY_BYTES, Catalog

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

    from .cursor import AnyPlan
    from .cursor.core import CursorCore
    from .cursor.plan import FlushPlan, Planner
    from .history import HistoryKeeper, Taken
    from .ledger_cache import CachePool
    from .lock import StoreLock
    from .readers import ReaderWatch
    from .storage.env import Environment
    from .topic import Topic

__all__ = ["CHUNK", "FlushHost", "FlushJob", "FlushTotals", "GroupFlush"]

log = logging.getLogger("ackstore")

CHUNK = 1024
"""cursors taken (under the store lock) and encoded (outside it) at a time: acks wait for one
chunk's take at most, not for the whole flush's, and a chunk's plans are still in the CPU's
caches when they are encoded"""


_T = TypeVar("_T")


def _chunk(items: list[_T], start: int) -> list[_T]:
    """The chunk of ``items`` from ``start``: ``items`` itself when it is all of them."""
    stop = start + CHUNK
    return items[start:stop] if start or stop < len(items) else items


class FlushHost(Protocol):
    """What the group flush reads and changes of its store (an :class:`~ackstore.AckStore`):
    its lock, storage, topics, flush lists, history keeper, reader watch, cache pool and flush
    count."""

    path: Path
    lock: StoreLock
    held: dict[str, Topic]
    flush_list: dict[CursorCore, Planner]
    small_list: dict[Any, CursorCore]
    flush_count: int
    readers: ReaderWatch
    history: HistoryKeeper
    cache_pool: CachePool

    closed: bool
    readonly: bool

    @property
    def storage(self) -> Environment: ...


@dataclass(slots=True)
class FlushJob:
    """One group flush in flight: the cursors to visit (with their planners), the plans
    taken (and their cursors, in order), the topics' bounds to write, how many plans were
    encoded, the cursor whose own code failed; as they are encoded, every record to put,
    the plans that trim garbage, and the figures."""

    catalog: Catalog
    log_db: Any
    visit: list[CursorCore] = field(default_factory=list)
    visit_planners: list[Planner] = field(default_factory=list)
    visit_listed: bool = False
    plans: list[AnyPlan] = field(default_factory=list)
    cursors: list[CursorCore] = field(default_factory=list)
    planners: list[Planner] = field(default_factory=list)
    general: list[tuple[int, FlushPlan]] = field(default_factory=list)
    """the general path's plans, each with its place in ``plans`` (ascending): encoded in step 2"""
    confirms: list[tuple[Topic, tuple[int, int]]] = field(default_factory=list)
    encoded: int = 0
    failed: CursorCore | None = None
    failed_step: str = "encoding"
    """what the failed cursor's own code was doing: "planning" (step 1, under the store
    lock: a marker plan is encoded there too) or "encoding" (step 2)"""
    puts: list[tuple[bytes, bytes]] = field(default_factory=list)
    trims: list[AnyPlan] = field(default_factory=list)
    trim_failed: AnyPlan | None = None
    """the plan whose trim raised in the last run of :meth:`write` (None: none did)"""
    untrimmed: set[int] = field(default_factory=set)
    """cursor ids whose garbage this flush leaves untrimmed (their trim failed once)"""
    ledger_records: int = 0
    full_markers: int = 0
    nbytes: int = 0
    smalls: list[Any] = field(default_factory=list)
    """the small forms this flush visits (``ackstore.cursor.small``), written from there"""
    small_cursors: list[CursorCore] = field(default_factory=list)
    """their cursors, at the same places"""
    small_puts: list[Iterable[tuple[Any, Any]]] = field(default_factory=list)
    """their states' puts, a chunk's in one (``flush_small``'s: a ``Puts``, whose pairs live
    in one buffer, or the pure twin's list)"""
    small_written: int = 0
    """how many of them changed and have a state in ``small_puts``"""
    history: list[Taken] = field(default_factory=list)
    """the points of the cursors that keep history (``ackstore.history``), with what they drop"""
    keeper: HistoryKeeper | None = None
    """the store's history keeper, when a cursor of the job keeps history"""
    micros: int = -1
    """this flush's time for the history points (microseconds; -1: not taken yet)"""

    def take_general(self, others: list[tuple[CursorCore, Planner]], idle: list[CursorCore]) -> None:
        """Step 1 for the cursors the lane left to the general path (``lane.take_all``'s
        ``others``): each one's plan (``Planner.prepare_other``: new ledger records, PIP-299's
        markers) appended with its cursor and planner, and to ``general``; an idle one to
        ``idle``. If one raises, ``failed`` names its cursor. O(those cursors' changes)."""
        plans = self.plans
        for cur, planner in others:
            self.failed = cur
            plan = planner.prepare_other()
            if plan is None:
                idle.append(cur)
                continue
            self.general.append((len(plans), plan))
            plans.append(plan)
            self.cursors.append(cur)
            self.planners.append(planner)
        self.failed = None

    def cursor_of(self, plan: AnyPlan) -> CursorCore:
        """The cursor ``plan`` is of: a taken plan's, or a small form's whose flush trims
        (``small.logged_plan``). O(plans)."""
        for p, cur in zip(self.plans, self.cursors, strict=True):
            if p is plan:
                return cur
        return next(cur for cur in self.small_cursors if cur.cursor_id == plan.cursor_id)

    def encode(self) -> None:
        """Step 2: the records and marker of every plan taken since the last call, from its
        copies (a lane's plan was encoded when it was taken); their puts gathered in order,
        added to the figures (:func:`ackstore.cursor.lane.encode_all`). ``encoded`` counts
        the plans encoded, also when one raises (it names the cursor). O(plans since)."""
        plans, start, general = self.plans, self.encoded, self.general
        if start < 0:
            raise ValueError(f"a flush job's encoded count is {start}, not a count")
        for i, plan in general[bisect_left(general, start, key=itemgetter(0)) :]:  # the lane's were encoded when taken
            self.encoded = i
            plan.encode()
            self.ledger_records += len(plan.records)
        full, nbytes = lane.encode_all(plans, start, self.puts, self.trims)
        self.encoded = len(plans)
        self.full_markers += full
        self.nbytes += nbytes

    def write(self, txn: lmdb.Transaction) -> int:
        """Step 3 (replayable): the topics' bounds, the garbage of the plans that trim, the
        small forms' states (one call into LMDB a chunk of them), every plan's records (one
        call for them all), the history points; returns the records trimmed."""
        for topic, (ledger, confirmed) in self.confirms:
            self.catalog.put_ledger(txn, topic.topic_id, ledger, OPEN, confirmed)
        c = txn.cursor(db=self.log_db)
        self.trim_failed = None
        # the garbage goes first: a page that makes room before it takes the new records is
        # not split (splits leave pages half full, and a flush writes every page it touches)
        failed: list[AnyPlan] = []
        try:
            trimmed = lane.trim_all(self.trims, self.untrimmed, c, failed)  # with the same LMDB cursor
        finally:
            if failed:
                self.trim_failed = failed[0]
        for puts in self.small_puts:
            c.putmulti(puts)
        c.putmulti(self.puts)
        if self.history:
            assert self.keeper is not None
            self.keeper.write(txn, self.history)
        return trimmed


@dataclass(slots=True)
class FlushTotals:
    """What the flushes since open add up to (``store.stats()`` reads it)."""

    flushes: int = 0
    bytes: int = 0
    trimmed: int = 0
    seconds: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(FLUSH_SECONDS_BUCKETS) + 1))

    def add(self, stats: FlushStats) -> None:
        self.flushes += 1
        self.bytes += stats.bytes_written
        self.trimmed += stats.records_trimmed
        self.seconds += stats.seconds
        self.buckets[bisect_left(FLUSH_SECONDS_BUCKETS, stats.seconds)] += 1


class GroupFlush:
    """The store's group flush: every listed cursor's plan written in ONE transaction, as a
    script of named steps (take, encode, write, adopt, record) with one rollback path.
    Its ``lock`` is the store's flush lock (flushes, compaction and deletions take it first);
    ``totals`` add up the flushes since open. It works on its store (the two are one unit:
    it reads the store's topics, flush list and storage, under the store's lock)."""

    def __init__(self, store: FlushHost) -> None:
        self.store = store
        self.lock = threading.Lock()
        self.totals = FlushTotals()

    def run(self, only: list[CursorCore] | None) -> FlushStats:
        """The group flush, of every listed cursor or of ``only`` these: a script of named
        steps with one rollback path (:meth:`_abort`). Steps 1 and 2 go a chunk of
        :data:`CHUNK` cursors at a time."""
        started = time.perf_counter()
        with self.lock, gc_paused():
            job = self._begin(only)  # under the store lock: the topics' bounds, the cursors to visit
            grows_before = self.store.storage.map_grows
            try:
                for start in range(0, len(job.smalls), CHUNK):
                    self._take_small(job, start)  # 1. the small forms' states, under the store lock
                for start in range(0, len(job.visit), CHUNK):
                    self._take(job, start)  # 1. under the store lock: copy what changed into plans
                    job.encode()  # 2. outside the store lock: acks go on meanwhile
                if not job.plans and not job.confirms and not job.small_written:
                    return FlushStats(0, 0, 0, 0, 0, 0, time.perf_counter() - started, 0)
                trimmed = self._write(job)  # 3. one write transaction for all
            except BaseException as exc:
                self._abort(job, exc)  # every plan's state pending again; names what failed
                raise
            self._adopt(job)  # 4. under the store lock: the cursors adopt what was written
            stats = self._record(job, trimmed, started, self.store.storage.map_grows - grows_before)  # 5. figures
            self.store.readers.observe(self.store.storage.env)  # 6. a reader holding pages back (one WARNING)
            # the plans die while the collector is paused: a collection that this flush's
            # allocations set off when it is switched back on finds what the cursors keep
            # (their new index entries), not every plan's containers (nor promotes them)
            del job
            return stats

    def _begin(self, only: list[CursorCore] | None) -> FlushJob:
        """A flush job: the topics' pending bounds, and the cursors to visit (the listed ones,
        or ``only``) with their planners, as two lists (no pair made per cursor). Only the
        flush lock unlists a cursor, so the listed ones stay listed until visited."""
        store = self.store
        with store.lock:
            require_open(store)
            job = FlushJob(store.storage.catalog, store.storage.log_db)
            job.confirms = [(t, c) for t in store.held.values() if (c := t.pending_bound()) is not None]
            if only is None:
                listed, smalls = store.flush_list, store.small_list
                job.visit, job.visit_planners = list(listed), list(listed.values())
                job.visit_listed = True
                job.smalls, job.small_cursors = list(smalls), list(smalls.values())
                smalls.clear()
            else:
                job.visit = [cur for cur in only if cur.small is None]
                job.visit_planners = [cur._planner for cur in job.visit]
                job.small_cursors = [cur for cur in only if cur.small is not None]
                job.smalls = [cur.small for cur in job.small_cursors]
                for small in job.smalls:
                    store.small_list.pop(small, None)
            return job

    def _take(self, job: FlushJob, start: int) -> None:
        """Step 1, for the chunk of ``job.visit`` from ``start``: each cursor's plan, added to
        the job's. Every cursor visited leaves the flush list (a change from now on, under
        the same lock, lists it again: see ``CursorCore._changed``), so committing needs no look
        at what came in meanwhile. If a cursor's planning raises, the failing cursor put its
        own state back, ``job.failed`` names it and the exception goes to the caller, which
        aborts the plans taken."""
        store = self.store
        visit, planners = _chunk(job.visit, start), _chunk(job.visit_planners, start)
        with store.lock:
            require_open(store)
            taken = len(job.plans)
            idle: list[CursorCore] = []
            others: list[tuple[CursorCore, Planner]] = []
            in_lane = True
            try:
                lane.take_all(visit, planners, job.plans, job.cursors, job.planners, idle, others)  # the lane's plans
                in_lane = False
                job.take_general(others, idle)  # the general path's
                if store.history.windows:
                    self._history(job, taken)
            except BaseException:
                if in_lane:  # the one after those take_all took, left idle or left to the general path
                    done = len(job.plans) - taken + len(idle) + len(others)
                    job.failed = visit[done] if done < len(visit) else None
                job.failed_step = "planning"
                raise
            listed = store.flush_list
            if job.visit_listed and visit is job.visit and len(listed) == len(visit):
                # every listed cursor was visited (none was listed since the job began)
                listed.clear()
            else:
                for cur in visit:
                    listed.pop(cur, None)
            for cur in idle:  # no plan, yet something waits: listed again where it now belongs (its
                cur._changed()  # form's list, when it took the small form since it was listed)

    def _take_small(self, job: FlushJob, start: int) -> None:
        """Step 1 for the small forms of the chunk of ``job.smalls`` from ``start``: each
        changed one's state, encoded and adopted in one visit (``undo_small`` gives it back
        if the write fails), the chunk's puts added to the job's (one ``Puts``; under its log
        key when its cursor keeps history: then with its point and trim,
        :meth:`_history_forms`). A form whose
        cursor left it meanwhile (it ended) is not written: its cursor holds its state again."""
        forms = _chunk(job.smalls, start)
        with self.store.lock:
            require_open(self.store)
            logged: list[Any] = []  # the forms of cursors that keep history it writes (under log keys)
            trims: list[Any] = []  # (form, below, keeps) of the forms whose state trims
            based: list[Any] = []  # the forms whose state begins a chain of their own (base_puts writes it)
            capped: list[Any] = []  # (index, flipped) of the forms whose state is cut (PIP-299) now or was
            version, *rest = small.flush_format()
            puts, nbytes, over, deltas = small.flush_small(forms, version, *rest, logged, trims, based, capped)
            if based:  # (records with the parts' codec, and a marker naming them, a form)
                bases, nbytes_based, made, full = small.flush_bases(based, version, rest[4], trims, over)
                nbytes += nbytes_based
                job.small_puts.append(bases)
                job.small_written += made
                job.full_markers += full  # (a chain that goes on ends in a delta marker)
                job.ledger_records += len(bases) - made
            for form, below, keeps in trims:
                job.trims.append(small.trim_plan(form.cursor_id, below, keeps))
            for at, flipped in capped:
                form, cur = forms[at], job.small_cursors[start + at]
                if flipped:
                    say_capped(cur.topic.name, cur.name, form.range_count(), form.persist, bool(form.over_cap))
                if form.dirty:  # (cut: it stays to be flushed, as its parts keep a ledger the cap cut dirty)
                    self.store.small_list[form] = cur
            if over:
                cursors = dict(zip(map(id, forms), _chunk(job.small_cursors, start), strict=True))
                for form in over:  # states the state layout does not take now: their parts write them, in this flush
                    cur = cursors[id(form)]
                    if cur.small is form:
                        cur._parts()
                        job.visit.append(cur)
                        job.visit_planners.append(cur._planner)
            if logged:
                self._history_forms(job, logged)
        job.small_puts.append(puts)
        job.nbytes += nbytes
        job.small_written += len(puts)
        job.full_markers += len(puts) - deltas  # (a whole state is a full marker; a delta is not)

    def _history_forms(self, job: FlushJob, logged: list[Any]) -> None:
        """Step 1's part for the small forms of cursors that keep history whose states
        :data:`~ackstore.cursor.small.flush_small` just wrote (store lock held): each one's
        point, and the trim its plan makes (what the parts' state plan would), bounded to what
        the window needs (``HistoryKeeper.take``)."""
        keeper = job.keeper = self.store.history
        if job.micros < 0:
            job.micros = keeper.now(time.time())
        for form in logged:
            seq = form.next_seq - 1  # (the sequence its state took)
            plan = small.logged_plan(form.cursor_id, seq, form.persisted)
            job.history.append(keeper.take(form.cursor_id, plan, (form.md_l, form.md_e), seq, job.micros))
            job.nbytes += plan.nbytes  # (the point's)
            if plan.gc_below > 0:
                job.trims.append(plan)

    def _history(self, job: FlushJob, start: int) -> None:
        """Step 1's part for the cursors that keep history (store lock held): each one's
        point of this flush, and its plan trims nothing the window needs."""
        keeper = job.keeper = self.store.history
        windows = keeper.windows
        if job.micros < 0:
            job.micros = keeper.now(time.time())
        for i in range(start, len(job.plans)):
            planner = job.planners[i]
            cid = planner.cursor_id
            if cid in windows:
                plan = job.plans[i]
                full_seq = plan.marker_seq if plan.full else planner.chain.full_seq
                job.history.append(keeper.take(cid, plan, planner.state.md, full_seq, job.micros))

    def _write(self, job: FlushJob) -> int:
        """Step 3: the job's write transaction. A trim that LMDB refuses (a damaged node
        among a cursor's old records: ``mdb_cursor_del`` raised) fails that cursor's trim
        only: the transaction runs again without it, so every cursor's records and marker
        are still written (that cursor's old records stay until ``ackstore check`` or
        ``salvage`` deals with the damage, which a WARNING names)."""
        while True:
            try:
                return self.store.storage.write(job.write)
            except StoreError:
                plan = job.trim_failed
                if plan is None or plan.cursor_id in job.untrimmed:
                    raise
                job.untrimmed.add(plan.cursor_id)
                cur = job.cursor_of(plan)
                log.warning(
                    "ackstore: the old records of cursor %s/%s (id %d) below record %d cannot be trimmed: LMDB "
                    "refused to delete one (a damaged node); its state is flushed, its old records stay. Run "
                    "'ackstore check' on %s",
                    cur.topic.name,
                    cur.name,
                    plan.cursor_id,
                    plan.gc_below,
                    self.store.path,
                )
                plan.gc_below = -1  # its cursor adopts the plan as one that trimmed nothing

    def _abort(self, job: FlushJob, exc: BaseException) -> None:
        """The one rollback path: every plan of ``job`` gives its cursor its pending state
        back (nothing is lost; the next flush tries again); a failure in a cursor's own code
        (planning, encoding) is raised as a StoreError naming it."""
        with self.store.lock:
            if job.smalls:  # their states wait for the next flush again
                small.undo_small(job.smalls)
                smalls = self.store.small_list
                for form, cur in zip(job.smalls, job.small_cursors, strict=True):
                    if cur.small is form and form.dirty:
                        smalls[form] = cur
            listed = self.store.flush_list
            for plan, cur in zip(job.plans, job.cursors, strict=True):
                cur._abort_flush(plan)
                listed[cur] = cur._planner  # waits for the next flush again
            self.store.cache_pool.settle()  # nothing is pinned any more
        if job.failed is None and job.encoded < len(job.plans):
            job.failed = job.cursors[job.encoded]
        if job.failed is not None:
            self._cursor_failed(exc, job.failed, job.failed_step)

    def _adopt(self, job: FlushJob) -> None:
        """Step 4: the transaction committed; each cursor adopts its plan (one that changed
        meanwhile, or that PIP-299 left ranges out of, is on the flush list again), a chunk
        of :data:`CHUNK` under the store lock at a time (a cursor acked before it adopts is
        one acked while its plan was written)."""
        for start in range(0, len(job.plans), CHUNK):
            plans, planners, cursors = _chunk(job.plans, start), _chunk(job.planners, start), _chunk(job.cursors, start)
            with self.store.lock:
                for i in lane.commit_all(plans, planners):  # the lane's plans; then the others
                    plan, cur = plans[i], cursors[i]
                    if type(plan) is not lane.MarkerPlan:
                        cur._commit_flush(plan)  # the general path's
                        if plan.full and small.form_chains():  # the small form may extend its chain
                            cur.take_small_form()
                    else:  # a full marker of the lane's (a state plan, or the marker layout's): the
                        # small form, if the cursor fits it (its state in a slot, or its chain adoptable)
                        cur.take_small_form()
        with self.store.lock:
            self.store.cache_pool.settle()  # nothing is pinned any more
            if job.history:
                self.store.history.adopt(job.history)
            for topic, written in job.confirms:
                topic.bound_written(written)

    def _record(self, job: FlushJob, trimmed: int, started: float, grows: int) -> FlushStats:
        """Step 5: this flush's figures, added to the store's totals."""
        plans = job.plans
        stats = FlushStats(
            cursors=len(plans) + job.small_written,
            ledger_records=job.ledger_records,
            markers=len(plans) + job.small_written,
            full_markers=job.full_markers,
            bytes_written=job.nbytes + OPEN_LEDGER_ENTRY_BYTES * len(job.confirms),
            records_trimmed=trimmed,
            seconds=time.perf_counter() - started,
            map_grows=grows,
        )
        self.totals.add(stats)
        self.store.flush_count += 1
        return stats

    def _cursor_failed(self, exc: BaseException, cur: CursorCore | None, step: str) -> None:
        """Planning or encoding ``cur`` failed (``step`` says which) and every plan was
        aborted: raise a StoreError naming the cursor and the step, unless ``exc`` is already
        the store's own (then the caller re-raises it)."""
        if isinstance(exc, Exception) and not isinstance(exc, AckStoreError):
            where = f"{cur.topic.name}/{cur.name}" if cur is not None else "?"
            raise StoreError(
                f"flush of store {self.store.path} failed while {step} cursor {where}, nothing was "
                f"written; every cursor keeps its state and the next flush retries: {exc!r}"
            ) from exc
