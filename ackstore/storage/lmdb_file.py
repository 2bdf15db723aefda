"""Read an LMDB data file's structure with ackstore's own code, without letting the library walk it.

LMDB keeps no page checksums and trusts its file: a truncated file makes a mapped read
fault (SIGBUS) and a zeroed page trips an assertion (SIGABRT). Before the library is let
near a file that may be damaged, ackstore checks it here, reading only bytes that lie
inside the file:

- :func:`check_size`: the newest meta page's last page lies inside the file (a truncated
  file is refused before it is mapped). Cheap: two pages read. Every open does it.
- :func:`walk`: every B-tree (the free list, the main tree and each named database) from
  its root: page numbers in range and matching, page types, node offsets and sizes inside
  the page, keys in order within the bounds their parents give (a flipped bit in a branch
  key hides records from lookups while a scan still finds them), equal leaf depth, every
  page reached once, and the page and entry counts the meta records. O(pages). ``check``
  does it before anything else.

The layout (LMDB 0.9, 64-bit, little-endian), as this module reads it:

- page header, 16 bytes: ``pgno u64, pad u16, flags u16, lower u16, upper u16`` (an
  overflow page keeps its page count as ``u32`` where lower/upper are); flags: branch 0x01,
  leaf 0x02, overflow 0x04, meta 0x08, leaf2 0x20; after it, ``(lower - 16) / 2`` node
  offsets (``u16``), in key order.
- node, 8 bytes + key + data: ``lo u16, hi u16, flags u16, ksize u16``; a leaf's data size
  is ``lo | hi << 16``, a branch node's child page ``lo | hi << 16 | flags << 32``; leaf
  flags: 0x01 the data is the page number of an overflow run, 0x02 the data is a named
  database's 48-byte record, 0x04 duplicates (ackstore uses none).
- meta pages 0 and 1, after the header: ``magic u32 (0xBEEFC0DE), version u32, address
  u64, mapsize u64``, two 48-byte database records (free list, main tree: ``pad u32`` (the
  page size, in the free list's), ``flags u16, depth u16, branch_pages, leaf_pages,
  overflow_pages, entries, root`` all ``u64``), ``last_pgno u64, txnid u64``. The meta
  with the larger txnid whose magic checks is the current one.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CorruptStoreError, NotAStoreError
from .codecs import native, scan_page
from .pure_codecs import int_key_order

__all__ = [
    "DbRecord",
    "Meta",
    "PageCounts",
    "read_metas",
    "current_meta",
    "check_size",
    "walk",
    "survey",
    "Survey",
    "tree_name",
    "FREE_TREE",
    "leaf_nodes",
    "data_file",
]

MAGIC = 0xBEEFC0DE
P_BRANCH, P_LEAF, P_OVERFLOW, P_META, P_LEAF2 = 0x01, 0x02, 0x04, 0x08, 0x20
F_BIGDATA, F_SUBDATA, F_DUPDATA = 0x01, 0x02, 0x04
INVALID_PGNO = (1 << 64) - 1
FREE_TREE = "free list"
"""the name the walk gives LMDB's free list (the other trees: "main tree", "database 'NAME'")"""
MAIN_TREE = "main tree"

_TREE_RULES: dict[str, tuple[int, int, int, int]] = {}
"""what each tree's nodes may hold, as ackstore writes them: ``(shortest key, longest key, leaf
flags allowed, leaf flags required)``. The free list's keys are transaction ids; the main
tree holds only the named databases' records; the log's keys are ``(cursor id, sequence)``, a
ledger-directory key ``(topic id, ledger)``, a cursor key a topic id and a name; only a log
record can be too big for its page and go to overflow pages. Anything else is damage."""
_ANY_TREE = (1, 511, F_BIGDATA | F_SUBDATA, 0)
"""a tree ackstore does not know (another program's database): any LMDB key, no duplicates"""

MOST_DEPTH = 32
"""the deepest tree LMDB makes (its cursor stack)"""

_HEADER = struct.Struct("<QHHHH")
_NODE = struct.Struct("<HHHH")
_DB = struct.Struct("<IHHQQQQQ")
_META = struct.Struct("<IIQQ")
_TAIL = struct.Struct("<QQ")


@dataclass(frozen=True, slots=True)
class DbRecord:
    """One B-tree's record (``MDB_db``)."""

    pad: int
    flags: int
    depth: int
    branch_pages: int
    leaf_pages: int
    overflow_pages: int
    entries: int
    root: int


@dataclass(frozen=True, slots=True)
class Meta:
    """One meta page: which of the two, its trees, its last page and transaction id."""

    page: int
    version: int
    free: DbRecord
    main: DbRecord
    last_pgno: int
    txnid: int

    @property
    def page_size(self) -> int:
        return self.free.pad


def data_file(path: str | os.PathLike[str]) -> Path:
    """The LMDB data file of a store directory, or the snapshot file itself."""
    p = Path(path)
    return p / "data.mdb" if p.is_dir() else p


def _meta_at(raw: bytes, page: int) -> Meta | None:
    if len(raw) < 16 + _META.size + 2 * _DB.size + _TAIL.size:
        return None
    _, _, flags, _, _ = _HEADER.unpack_from(raw, 0)
    magic, version, _, _ = _META.unpack_from(raw, 16)
    if magic != MAGIC or not flags & P_META:
        return None
    off = 16 + _META.size
    free = DbRecord(*_DB.unpack_from(raw, off))
    main = DbRecord(*_DB.unpack_from(raw, off + _DB.size))
    last, txnid = _TAIL.unpack_from(raw, off + 2 * _DB.size)
    if free.pad not in (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536):
        return None
    return Meta(page, version, free, main, last, txnid)


def has_magic(f: Path) -> bool:
    """True when the file starts as LMDB's first meta page does (its magic number), however
    short or damaged the rest is."""
    with open(f, "rb") as fh:
        head = fh.read(16 + _META.size)
    return len(head) >= 20 and struct.unpack_from("<I", head, 16)[0] == MAGIC


def read_metas(path: str | os.PathLike[str]) -> list[Meta]:
    """The meta pages of the data file that pass their magic and page-size checks."""
    f = data_file(path)
    with open(f, "rb") as fh:
        first = fh.read(4096)
        meta0 = _meta_at(first, 0)
        size = meta0.page_size if meta0 is not None else 4096
        fh.seek(size)
        meta1 = _meta_at(fh.read(4096), 1)
    return [m for m in (meta0, meta1) if m is not None]


def current_meta(metas: list[Meta], txnid: int | None = None) -> Meta:
    """The meta of transaction ``txnid`` if given and present, else the newest one."""
    if txnid is not None:
        for m in metas:
            if m.txnid == txnid:
                return m
    return max(metas, key=lambda m: m.txnid)


def check_size(path: str | os.PathLike[str]) -> None:
    """Refuse a data file too short for LMDB to open it safely: shorter than its two meta
    pages, or than the root pages of the newest transaction's trees (mapping them would
    fault). Cheap: two pages read.

    The newest meta's last page number is *not* required to lie inside the file: LMDB
    counts pages a transaction allocated and then freed again before it committed (its
    "loose" pages), and those are never written, so a healthy file may end a few pages
    short of it (a compaction or a deletion can do that). That every page the trees reach
    lies inside the file is :func:`walk`'s to check.

    The meta pages are read before the size: a writer in another process writes a
    transaction's pages before its meta page, so the size read after any meta covers it
    (read the other way round, a commit in between looked like a truncated file).
    """
    f = data_file(path)
    try:
        metas = read_metas(f)
        size = f.stat().st_size
    except FileNotFoundError:
        return
    except OSError as exc:
        raise CorruptStoreError(f"cannot read {f}: {exc}", path, None) from None
    if size == 0:
        return  # a new environment
    if not metas:
        if not has_magic(f):
            raise NotAStoreError(
                f"{f} is not a store: {size:,} bytes that are not an LMDB data file (no LMDB meta page); give a "
                "store directory, or a single-file snapshot 'ackstore copy' made"
            )
        if size < 2 * 4096:
            raise CorruptStoreError(
                f"{f} is {size:,} bytes: too short for LMDB's two meta pages",
                path,
                hint="a copy cut off or a disk that filled, too short for anything in it to be read: restore the "
                "store from a copy if there is one, else start a new one",
            )
        raise NotAStoreError(f"{f} is not an LMDB data file (no valid meta page)")
    meta = current_meta(metas)
    roots = [db.root for db in (meta.free, meta.main) if db.root != INVALID_PGNO]
    need = (max(roots, default=1) + 1) * meta.page_size
    if size < need:
        raise CorruptStoreError(
            f"{f} is truncated: {size:,} bytes, but its newest transaction ({meta.txnid}) has a root at page "
            f"{max(roots):,} of {meta.page_size} bytes ({need:,} bytes needed)",
            path,
            hint="a copy cut off or a disk that filled: restore the store from a copy if there is one, else "
            + (
                "'ackstore salvage STORE NEW' brings back what the pages left hold"
                if size >= 2 * meta.page_size
                else "start a new one (too little of it is left to read)"
            ),
        )


@dataclass(frozen=True, slots=True)
class _Node:
    """One node of a page: its key, flags, and where its data is (a branch's child page,
    a leaf's data size and offset; with ``F_BIGDATA`` the offset holds the overflow page number)."""

    key: bytes
    flags: int
    child: int
    size: int
    data: int


def _bounds_ok(lower: int, upper: int, psize: int) -> bool:
    return 16 <= lower <= upper <= psize and not (lower - 16) % 2


def _read_node(mm: mmap.mmap, off: int, i: int, upper: int, psize: int, leaf: bool) -> _Node | str:
    """Node ``i`` of the page at ``off``, or what is wrong with it. Reads only inside the page."""
    (ptr,) = struct.unpack_from("<H", mm, off + 16 + 2 * i)
    if not upper <= ptr <= psize - 8:
        return f"node {i} at offset {ptr} lies outside the page's node area"
    lo, hi, nflags, ksize = _NODE.unpack_from(mm, off + ptr)
    if ptr + 8 + ksize > psize:
        return f"node {i}'s key of {ksize} bytes runs past the page"
    kstart = off + ptr + 8
    key = bytes(mm[kstart : kstart + ksize])
    if not leaf:
        return _Node(key, nflags, lo | hi << 16 | nflags << 32, 0, 0)
    dsize = lo | hi << 16
    if nflags & F_BIGDATA and ptr + 8 + ksize + 8 > psize:
        return f"node {i}'s overflow page number runs past the page"
    if not nflags & F_BIGDATA and ptr + 8 + ksize + dsize > psize:
        return f"node {i}'s data of {dsize} bytes runs past the page"
    return _Node(key, nflags, 0, dsize, kstart + ksize)


class _Walker:
    def __init__(
        self,
        buf: Any,
        psize: int,
        pages: int,
        rules: dict[str, tuple[int, int, int, int]],
        any_rules: tuple[int, int, int, int],
        own: frozenset[bytes],
    ) -> None:
        self.mm = buf
        self.psize = psize
        self.pages = min(pages, len(buf) // psize)
        self.rules = rules
        """what each tree's nodes may hold, by the tree's name (:data:`_TREE_RULES`)"""
        self.any_rules = any_rules
        """... and those of a tree it does not name"""
        self.own = own
        """the named databases ackstore keeps (:data:`OWN_DATABASES`)"""
        self.seen: set[int] = set()
        self.problems: list[str] = []
        self.named: dict[bytes, DbRecord] = {}
        self.leaf_tree: dict[int, str] = {}
        """every intact leaf page reached, and the tree it belongs to"""
        self.page_tree: dict[int, str] = {}
        """every page reached (damaged ones too), and the tree it was reached in"""
        self.lost: list[tuple[str, bytes | None, bytes | None]] = []
        """``(tree, low, high)``: key ranges a damaged page held or indexed (None: unbounded)"""
        self.free: set[int] | None = None
        """the page numbers the free list names (pages LMDB may reuse: stale copies, or a
        transaction that never committed); None until read, or when it is damaged"""
        self._free_ok = True

    def page(self, pgno: int, where: str) -> tuple[int, int, int, int] | None:
        """``(flags, lower, upper, offset)`` of page ``pgno``, or None (a problem noted)."""
        if not 2 <= pgno < self.pages:
            self.problems.append(f"{where}: page number {pgno} is outside the file (pages 2..{self.pages - 1})")
            return None
        if pgno in self.seen:
            self.problems.append(f"{where}: page {pgno} is reached twice")
            return None
        self.seen.add(pgno)
        off = pgno * self.psize
        stored, _, flags, lower, upper = _HEADER.unpack_from(self.mm, off)
        if stored != pgno:
            self.problems.append(f"{where}: page {pgno} says it is page {stored} (damaged or zeroed)")
            return None
        return flags, lower, upper, off

    def tree(self, name: str, db: DbRecord, integer_keys: bool, collect: bool) -> None:
        if name == FREE_TREE:
            self.free = set()
        if db.root == INVALID_PGNO:
            if db.entries or db.depth:
                self.problems.append(f"{name}: no root page, yet {db.entries} entries of depth {db.depth}")
            return
        if not 1 <= db.depth <= MOST_DEPTH:
            self.problems.append(f"{name}: a tree of depth {db.depth} (LMDB's are 1 to {MOST_DEPTH} deep)")
            self._lose(name, None, None)
            return
        counts = {"branch": 0, "leaf": 0, "overflow": 0, "entries": 0}
        if not self.node(name, db.root, 1, db.depth, None, None, integer_keys, collect, counts):
            self._lose(name, None, None)
        if name == FREE_TREE and not self._free_ok:
            self.free = None
        expected = {
            "branch": db.branch_pages,
            "leaf": db.leaf_pages,
            "overflow": db.overflow_pages,
            "entries": db.entries,
        }
        if not self.problems and counts != expected:
            self.problems.append(f"{name}: the tree holds {counts}, its record says {expected}")

    def _lose(self, name: str, low: bytes | None, high: bytes | None) -> None:
        """A page of tree ``name`` between ``low`` and ``high`` is damaged: its keys are in doubt."""
        self.lost.append((name, low, high))
        if name == FREE_TREE:
            self._free_ok = False

    def node(
        self,
        name: str,
        pgno: int,
        level: int,
        depth: int,
        low: bytes | None,
        high: bytes | None,
        integer_keys: bool,
        collect: bool,
        counts: dict[str, int],
    ) -> bool:
        """Walk one page and (after it checks) its children; False when this page itself is
        damaged (its children are then not walked: they are pages damage hides)."""
        where = f"{name} page {pgno}"
        if len(self.problems) > 50:
            self.problems.append(f"{where}: not walked (too much damage)")
            return False
        got = self.page(pgno, where)
        if got is None:
            return False
        self.page_tree[pgno] = name
        flags, lower, upper, off = got
        kind = flags & (P_BRANCH | P_LEAF | P_OVERFLOW | P_META | P_LEAF2)
        want = P_LEAF if level == depth else P_BRANCH
        if kind != want:
            self.problems.append(f"{where}: page type {flags:#x} at level {level} of {depth}, expected {want:#x}")
            return False
        if not _bounds_ok(lower, upper, self.psize):
            self.problems.append(f"{where}: header bounds lower={lower} upper={upper} are impossible")
            return False
        n = (lower - 16) // 2
        if n == 0:
            self.problems.append(f"{where}: an empty page in the tree")
            return False
        counts["branch" if kind == P_BRANCH else "leaf"] += 1
        leaf = kind == P_LEAF
        # the hot loop (every node of every page) is compiled where it can be: codecs.scan_page
        problem, specials, keys, children = scan_page(
            self.mm,
            off,
            n,
            upper,
            self.psize,
            leaf,
            integer_keys,
            (self.free is not None and name == FREE_TREE) or name == MAIN_TREE,
            *self.rules.get(name, self.any_rules),
        )
        for i, nflags, key, kend, dsize in specials:  # the nodes before any problem, in order
            if not self.special(where, i, nflags, key, off + kend, kend, dsize, collect, name, counts):
                return False
        if problem is not None:
            i, what, value = problem
            shown = value[:24].hex() if isinstance(value, bytes) else value
            self.problems.append(f"{where}: " + _PROBLEMS[what].format(i=i, value=shown))
            return False
        counts["entries"] += n if leaf else 0
        # in order (checked above), only the first and the last key can fall outside the
        # bounds the parent gave (a branch's first key is unused)
        first = 0 if leaf else 1
        order = int_key_order if integer_keys else _same
        bad = None
        if n > first:
            if low is not None and order(keys[first]) < order(low):
                bad = first
            elif high is not None and order(keys[-1]) >= order(high):
                bad = n - 1
        if bad is not None:  # a leaf's keys are its first and last here
            key = keys[first] if bad == first else keys[-1]
            self.problems.append(f"{where}: " + _PROBLEMS["order"].format(i=bad, value=key[:24].hex()))
            return False
        if kind == P_LEAF:
            self.leaf_tree[pgno] = name
        for i, child in enumerate(children):
            c_low = keys[i] if i > 0 else low
            c_high = keys[i + 1] if i + 1 < len(keys) else high
            if not self.node(name, child, level + 1, depth, c_low, c_high, integer_keys, collect, counts):
                self._lose(name, c_low, c_high)
        return True

    def special(
        self,
        where: str,
        i: int,
        nflags: int,
        key: bytes,
        data: int,
        kend: int,
        dsize: int,
        collect: bool,
        name: str,
        counts: dict[str, int],
    ) -> bool:
        """A leaf node that is not plain in-page data: an overflow value, a named database's
        record, a free-list record, or duplicates (never written by ackstore)."""
        if nflags & F_DUPDATA:
            self.problems.append(f"{where}: node {i} holds duplicates, which ackstore never writes")
            return False
        if nflags & F_BIGDATA:
            if kend + 8 > self.psize:
                self.problems.append(f"{where}: node {i}'s overflow page number runs past the page")
                return False
            (opg,) = struct.unpack_from("<Q", self.mm, data)
            if not self.overflow(f"{where} node {i}", opg, dsize, counts):
                return False
            if self.free is not None and name == FREE_TREE:
                self.free_list(opg * self.psize + 16, dsize, where)
            return True
        if kend + dsize > self.psize:
            self.problems.append(f"{where}: node {i}'s data of {dsize} bytes runs past the page")
            return False
        if self.free is not None and name == FREE_TREE:
            self.free_list(data, dsize, where)
        elif name == MAIN_TREE and key in self.own and not nflags & F_SUBDATA:
            self.problems.append(f"{where}: node {i} ({key!r}) lost the flag that makes it a named database")
            return False
        elif nflags & F_SUBDATA and collect:
            if dsize != _DB.size:
                self.problems.append(f"{where}: named database {key!r} has a {dsize}-byte record")
                return False
            self.named[key] = DbRecord(*_DB.unpack_from(self.mm, data))
        return True

    def overflow(self, where: str, pgno: int, dsize: int, counts: dict[str, int]) -> bool:
        got = self.page(pgno, where)
        if got is None:
            return False
        flags, _, _, off = got
        (npages,) = struct.unpack_from("<I", self.mm, off + 12)
        if not flags & P_OVERFLOW or npages * self.psize < dsize + 16 or pgno + npages > self.pages:
            self.problems.append(f"{where}: overflow page {pgno} does not hold {dsize} bytes")
            return False
        for extra in range(pgno + 1, pgno + npages):
            self.seen.add(extra)
        counts["overflow"] += npages
        return True

    def free_list(self, start: int, size: int, where: str) -> None:
        """One free-list record (LMDB's ID list: a count, then that many page numbers)."""
        if size < 8 or size % 8:
            self.problems.append(f"{where}: a free-list record of {size} bytes")
            return
        (count,) = struct.unpack_from("<Q", self.mm, start)
        if count != size // 8 - 1:
            self.problems.append(f"{where}: a free-list record of {size} bytes says it holds {count} pages")
            return
        assert self.free is not None
        self.free.update(struct.unpack_from(f"<{count}Q", self.mm, start + 8))


def _same(key: bytes) -> bytes:
    return key


_PROBLEMS = {
    "offset": "node {i} at offset {value} lies outside the page's node area",
    "key": "node {i}'s key of {value} bytes runs past the page",
    "data": "node {i}'s data of {value} bytes runs past the page",
    "order": "key {i} ({value}) is out of order or outside its bounds",
    "ksize": "node {i}'s key of {value} bytes is a size this tree's keys never have",
    "flags": "node {i} has node flags {value}, which this tree's nodes never have",
    "extent": "node {i} at offset {value} does not abut its neighbours (a node's size is damaged)",
}
"""what scan_page's problems say (after "<tree> page <n>: ")"""


@dataclass(slots=True)
class Survey:
    """What a walk of the file's trees found: its problems, and for salvage which pages are
    live, which are free, and which key ranges damage put in doubt."""

    meta: Meta | None
    problems: list[str]
    leaf_tree: dict[int, str] = field(default_factory=dict)
    """intact leaf pages reached from the meta's roots -> the tree each belongs to"""
    reached: set[int] = field(default_factory=set)
    """every page reached from the roots (branch, leaf, overflow)"""
    page_tree: dict[int, str] = field(default_factory=dict)
    """every tree page reached, damaged ones too -> the tree it was reached in"""
    free: set[int] | None = None
    """the pages the free list names; None when the free list is damaged (then nothing tells a
    live page hidden by damage from a stale or never-committed one)"""
    lost: list[tuple[str, bytes | None, bytes | None]] = field(default_factory=list)
    """``(tree, low key, high key)`` ranges a damaged page held or indexed"""
    named: dict[bytes, DbRecord] = field(default_factory=dict)
    """the named databases found in the main tree, with their records (a damaged main tree can
    lose one); a record's ``entries`` is what its tree should hold"""


def survey(path: str | os.PathLike[str], txnid: int | None = None, first_clean: bool = False) -> Survey:
    """Walk the B-trees of the data file as of transaction ``txnid`` (default: newest).

    Reads only inside the file; never raises for damage (an unreadable file is one
    problem). On a file another process writes, hold an LMDB read transaction open for the
    walk and pass its id, so the pages walked are not reused meanwhile. O(pages).
    ``first_clean``: the trees are first walked by :data:`walk_trees`, and an intact file's
    survey is its meta alone (no problems, no pages named); a damaged one is walked again
    here, which names what is wrong.
    """
    f = data_file(path)
    try:
        cut: list[str] = []
        try:
            check_size(f)
        except CorruptStoreError as exc:  # cut short: walk what the file still holds
            cut.append(exc.detail)
        except NotAStoreError:  # no meta page checks: said below (the caller decides what the pages are)
            pass
        metas = read_metas(f)
        if not metas:
            return Survey(None, [*cut, f"{f}: no valid meta page"])
        meta = current_meta(metas, txnid)
        with open(f, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            with mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_READ) as mm:
                if first_clean and not cut and walk_trees(mm, meta.page_size, meta.last_pgno + 1, *_walk_args(meta)):
                    return Survey(meta, [])
                w = _Walker(mm, meta.page_size, meta.last_pgno + 1, _TREE_RULES, _ANY_TREE, OWN_DATABASES)
                w.problems.extend(cut)
                _walk_all(w, meta.free, meta.main)
                return Survey(meta, w.problems, w.leaf_tree, w.seen, w.page_tree, w.free, w.lost, dict(w.named))
    except CorruptStoreError as exc:
        return Survey(None, [exc.detail])
    except (OSError, ValueError, struct.error) as exc:
        return Survey(None, [f"{f}: cannot be read ({exc})"])


def tree_name(db: bytes) -> str:
    """How the walk names a named database's tree."""
    return f"database {db.decode(errors='replace')!r}"


OWN_DATABASES = frozenset({b"log", b"ledgers", b"cursors", b"topics", b"meta", b"history"})
"""the named databases ackstore keeps"""

_TREE_RULES.update(
    {
        FREE_TREE: (8, 8, F_BIGDATA, 0),
        MAIN_TREE: (1, 511, F_SUBDATA | F_BIGDATA, 0),  # another program's file may keep values here
        tree_name(b"log"): (10, 16, F_BIGDATA, 0),  # 10: a state slot's key
        tree_name(b"ledgers"): (16, 16, 0, 0),
        tree_name(b"history"): (16, 16, F_BIGDATA, 0),  # a full marker's point names its records
        # catalog values are far below LMDB's overflow size (a node holds up to about half a
        # page): a key of at most 511 bytes and a value of tens of bytes
        tree_name(b"cursors"): (9, 511, 0, 0),
        tree_name(b"topics"): (1, 511, 0, 0),
        tree_name(b"meta"): (1, 64, 0, 0),
    }
)


def walk(path: str | os.PathLike[str], txnid: int | None = None) -> list[str]:
    """Problems in the B-trees of the data file as of transaction ``txnid`` (default:
    newest): :func:`survey`'s, alone. Every page number in range and matching, page types,
    node offsets and sizes inside the page, keys in order within their parents' bounds,
    equal leaf depth, every page reached once, the counts the meta records. An intact file
    is walked once, by :data:`walk_trees` (compiled where it was built: every open walks
    the whole file); a damaged one again, to name the damage."""
    return survey(path, txnid, first_clean=True).problems


def _walk_all(w: _Walker, free: DbRecord, main: DbRecord) -> None:
    """Every tree: the free list, the main tree, then each named database it holds."""
    w.tree(FREE_TREE, free, integer_keys=True, collect=False)
    w.tree(MAIN_TREE, main, integer_keys=False, collect=True)
    for name, db in sorted(w.named.items()):
        w.tree(tree_name(name), db, integer_keys=False, collect=False)


Record = tuple[int, int, int, int, int, int, int, int]
"""a :class:`DbRecord`'s fields, in order"""
Rules = tuple[int, int, int, int]
"""a tree's rules (:data:`_TREE_RULES`)"""


_NAMED_RULES: dict[bytes, Rules] = {db: _TREE_RULES[tree_name(db)] for db in OWN_DATABASES}
""":data:`_TREE_RULES` of ackstore's own databases, by their names (what :data:`walk_trees` takes)"""


def _walk_args(meta: Meta) -> tuple[Record, Record, Rules, Rules, dict[bytes, Rules], Rules, frozenset[bytes]]:
    """What :data:`walk_trees` takes after the buffer, page size and page count: the meta's
    two trees and this module's rules."""
    free, main = _record_fields(meta.free), _record_fields(meta.main)
    return free, main, _TREE_RULES[FREE_TREE], _TREE_RULES[MAIN_TREE], _NAMED_RULES, _ANY_TREE, OWN_DATABASES


def _record_fields(db: DbRecord) -> Record:
    return (db.pad, db.flags, db.depth, db.branch_pages, db.leaf_pages, db.overflow_pages, db.entries, db.root)


def _py_walk_trees(
    buf: Any,
    psize: int,
    pages: int,
    free: Record,
    main: Record,
    free_rules: Rules,
    main_rules: Rules,
    named_rules: dict[bytes, Rules],
    any_rules: Rules,
    own: frozenset[bytes],
) -> bool:
    """True when the B-trees of the LMDB file in ``buf`` (pages of ``psize`` bytes, the
    first ``pages`` of them in use) show no damage, walked from the records ``free`` and
    ``main`` under the rules given (the free list's, the main tree's, those of each named
    database, by its name, and those of a database not named): the walker's rules, and
    the pure-Python twin of ``ackstore._native.walk_trees``. O(pages)."""
    rules = {FREE_TREE: free_rules, MAIN_TREE: main_rules, **{tree_name(k): v for k, v in named_rules.items()}}
    w = _Walker(buf, psize, pages, rules, any_rules, own)
    _walk_all(w, DbRecord(*free), DbRecord(*main))
    return not w.problems


walk_trees: Callable[..., bool] = native.walk_trees if native is not None else _py_walk_trees
"""whether an LMDB file's B-trees show no damage (:func:`_py_walk_trees`; compiled where built)"""


@dataclass(slots=True)
class PageCounts:
    """What :func:`leaf_nodes` read."""

    pages: int = 0
    leaf_pages: int = 0
    unreadable: int = 0


def leaf_nodes(
    path: str | os.PathLike[str],
    counts: PageCounts | None = None,
    progress: Callable[[int, int], None] | None = None,
    pages_to_read: Iterable[int] | None = None,
) -> Iterator[tuple[int, bytes, bytes]]:
    """``(page number, key, value)`` of every node of every page that looks like a leaf,
    page by page, never following the B-tree (overflow values are read from their pages).
    ``pages_to_read`` limits it to those pages (default: every page, stale pages freed by
    later transactions and pages of transactions that never committed included). Only
    bytes inside the file are read."""
    f = data_file(path)
    counts = counts if counts is not None else PageCounts()
    metas = read_metas(f) if f.stat().st_size >= 8192 else []
    psize = current_meta(metas).page_size if metas else 4096
    with open(f, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size < 2 * psize:
            return
        with mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_READ) as mm:
            pages = size // psize
            counts.pages = pages
            wanted = range(2, pages) if pages_to_read is None else sorted(p for p in pages_to_read if 2 <= p < pages)
            for pgno in wanted:
                if progress is not None and pgno % 1024 == 0:
                    progress(pgno, pages)
                off = pgno * psize
                stored, _, flags, lower, upper = _HEADER.unpack_from(mm, off)
                if stored != pgno or not flags & P_LEAF or flags & (P_LEAF2 | P_OVERFLOW):
                    continue
                if not _bounds_ok(lower, upper, psize):
                    counts.unreadable += 1
                    continue
                counts.leaf_pages += 1
                for i in range((lower - 16) // 2):
                    node = _read_node(mm, off, i, upper, psize, leaf=True)
                    if isinstance(node, str) or node.flags & (F_SUBDATA | F_DUPDATA):
                        continue
                    if not node.flags & F_BIGDATA:
                        yield pgno, node.key, bytes(mm[node.data : node.data + node.size])
                        continue
                    (opg,) = struct.unpack_from("<Q", mm, node.data)
                    ostart = opg * psize
                    if (
                        2 <= opg < pages
                        and ostart + 16 + node.size <= size
                        and _HEADER.unpack_from(mm, ostart)[0] == opg
                    ):
                        yield pgno, node.key, bytes(mm[ostart + 16 : ostart + 16 + node.size])
