"""The fields compiled code reads of a cursor's parts and of its plans, declared once.

Engine internals. A group flush visits every dirty cursor and reads a few fields of its
planner, pages, ack state, marker chain and ledgers; the marker lane (``cursor/lane.py``)
and its compiled twin take a plan from them; the compiled ``Cursor.ack``
(``ackstore/_ack.c``) reads the public cursor's core, the core's store and topic, and
reads and changes the ack state, its ledgers, their cache and the store's pool. Each part's fields that
compiled code reads are declared here, once, as a *field type*; the part's class derives
from it and adds the fields only Python reads as ``__slots__`` of its own.

Where ``ackstore._native`` was built, the field types are made by it
(``_native.fields_type``): types of its own whose instances hold the fields in their own
struct, in the declared order. The build writes that order into a C header
(``setup.py``: ``_fields_layout.h``, one index per field), so compiled code reads a field
at a place fixed when it was compiled, and ``fields_type`` refuses a declaration that is
not the one the module was built from (rebuild it: ``make``). Elsewhere (or with
``ACKSTORE_PURE_PYTHON`` set) they are plain classes with the same ``__slots__``. Either
way Python reads and writes the fields as attributes, at the cost of a slot.

This module is also where the choice of implementation is made, once, for the whole
package: :data:`native` is the compiled module or None.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING, Any

__all__ = [
    "FIELDS",
    "CacheFields",
    "ChainFields",
    "CoreFields",
    "FacadeFields",
    "HostFields",
    "LedgerFields",
    "PagesFields",
    "PlanFields",
    "PlannerFields",
    "PoolFields",
    "StateFields",
    "TopicFields",
    "field_names",
    "native",
]


def _native() -> ModuleType | None:
    if os.environ.get("ACKSTORE_PURE_PYTHON"):
        return None
    try:
        from . import _native as module  # type: ignore[attr-defined]
    except ImportError:
        return None
    return module


native = _native()
"""the compiled module, or None where it is not built (or ``ACKSTORE_PURE_PYTHON`` is set)"""

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Set

    from pyroaring import BitMap

    from .position import Position
    from .storage.index_entry import IndexEntry


class _Planner:
    """A planner's parts: the cursor's id, ack state, pages and marker chain, and the bounds
    its config sets a flush: the PIP-299 cap (``max_unacked_ranges_to_persist``, 0: none),
    ``full_marker_every`` and ``history_seconds``."""

    cursor_id: int
    state: _State
    pages: _Pages
    chain: _Chain
    cap: int
    full_every: int
    history: int


class _Pages:
    """The ledgers a cursor holds, its marker index and what changed since its last marker."""

    dirty: set[int]
    unmarked: Set[int]
    vanished: Set[int]
    loaded: Mapping[int, _Ledger]
    swapped: set[int]
    index: dict[int, IndexEntry]
    pinned: Collection[int]


class _State:
    """A cursor's mark-delete and read positions, range count, properties and whether they
    changed; its ledgers' cache and dirty set; the one-entry cache of a ledger's limit."""

    md: Position
    range_count: int
    meta_dirty: bool
    properties: dict[str, int | str]
    rp: Position
    cache: _Cache
    dirty: set[int]
    limit_ledger: int
    limit_value: int
    limit_version: int


class _Cache:
    """A cursor's loaded ledgers (least recently used first), the swapped-out ones, and the
    bytes they are charged against the cursor's budget and the store's pool."""

    loaded: Mapping[int, _Ledger]
    swapped: set[int]
    nbytes: int
    budget: int
    pool: _Pool


class _Pool:
    """The store-wide running total of every cursor's cache, and its budget."""

    total: int
    budget: int


class _Core:
    """What the ack of one position reads of a cursor's core: its ack state (unset until
    its parts are built), its small form, whether it was deleted, its store, the flush list
    and its planner, the store's lock, its topic."""

    _state: _State
    small: object
    _deleted: bool
    _store: Any  # a _Host (the core's classes name the protocols they use of it)
    _flush_list: Any  # a dict of cores to their planners
    _planner: _Planner
    _lock: object
    topic: Any  # a _Topic


class _Facade:
    """A public ``Cursor``'s core: what the compiled ``Cursor.ack`` acks into."""

    _core: Any  # a CursorCore (a _Core)


class _Host:
    """Whether a store was closed, whether it was opened read-only, and its list of small
    forms changed since the last flush."""

    closed: bool
    readonly: bool
    small_list: dict[Any, Any]  # a changed SmallState -> its CursorCore


class _Topic:
    """A topic's version: bumped on every change of its ledger directory."""

    version: int


class _Chain:
    """Where a cursor's log stands: sequences, the newest marker, its chain, flush counters."""

    next_seq: int
    marker_seq: int
    full_seq: int
    full_live: Collection[int]
    deltas: int
    chain_bytes: int
    full_bytes: int
    force_full: bool
    truncated: bool
    untrimmed: int
    over_cap: bool
    persisted_ranges: int
    flushes: int
    last_flush_bytes: int
    total_flush_bytes: int
    floor: int
    kept: tuple[int, ...]
    slot: int
    slots: int


class _Ledger:
    """A ledger's acks, their run count, and the acks and counts set since its record."""

    bitmap: BitMap
    batches: dict[int, tuple[int, int]]
    runs: int
    added: BitMap | None
    counts: dict[int, int]
    counts_added: dict[int, int]
    size: int


class _Plan:
    """A marker plan: the marker it writes, what it took, what it trims."""

    cursor_id: int
    changes: dict[int, IndexEntry | None]
    full: bool
    marker_seq: int
    pinned: Collection[int]
    meta_dirty: bool
    persisted_ranges: int
    puts: list[tuple[bytes, bytes]]
    marker_bytes: int
    nbytes: int
    gc_below: int
    gc_live: Collection[int]
    trim_keys: tuple[bytes, ...] | None
    full_live: Collection[int]
    dropped: Set[int]
    truncated: bool
    keep_dirty: Set[int]


_DECLARED = {
    "PlannerFields": _Planner,
    "PagesFields": _Pages,
    "StateFields": _State,
    "ChainFields": _Chain,
    "LedgerFields": _Ledger,
    "PlanFields": _Plan,
    "CacheFields": _Cache,
    "PoolFields": _Pool,
    "CoreFields": _Core,
    "FacadeFields": _Facade,
    "HostFields": _Host,
    "TopicFields": _Topic,
}
FIELDS: dict[str, tuple[str, ...]] = {name: tuple(decl.__annotations__) for name, decl in _DECLARED.items()}
"""each field type's name and fields (what its instances hold, in this order): the
annotations of its declaration above"""


def _make(name: str) -> type:
    decl = _DECLARED[name]
    doc = f"Field type (engine internals): {decl.__doc__}"
    if native is not None:
        made: type = native.fields_type(f"{__name__}.{name}", FIELDS[name], doc)
        return made
    return type(name, (), {"__slots__": FIELDS[name], "__module__": __name__, "__doc__": doc})


if TYPE_CHECKING:  # what the type checker sees: the declarations
    PlannerFields = _Planner
    PagesFields = _Pages
    StateFields = _State
    ChainFields = _Chain
    LedgerFields = _Ledger
    PlanFields = _Plan
    CacheFields = _Cache
    PoolFields = _Pool
    CoreFields = _Core
    FacadeFields = _Facade
    HostFields = _Host
    TopicFields = _Topic
else:
    PlannerFields = _make("PlannerFields")
    PagesFields = _make("PagesFields")
    StateFields = _make("StateFields")
    ChainFields = _make("ChainFields")
    LedgerFields = _make("LedgerFields")
    PlanFields = _make("PlanFields")
    CacheFields = _make("CacheFields")
    PoolFields = _make("PoolFields")
    CoreFields = _make("CoreFields")
    FacadeFields = _make("FacadeFields")
    HostFields = _make("HostFields")
    TopicFields = _make("TopicFields")


def field_names(cls: type) -> tuple[str, ...]:
    """Every field an instance of ``cls`` holds: its field type's and its classes' slots
    (less ``__weakref__``), base first."""
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        names += FIELDS.get(klass.__name__, ()) if klass.__module__ == __name__ else ()
        names += [s for s in klass.__dict__.get("__slots__", ()) if s not in ("__weakref__", "__dict__")]
    return tuple(dict.fromkeys(names))
