"""The structure walk every open runs: the compiled ``walk_trees`` and its pure-Python twin
give the same answer on the same bytes, intact or damaged; ``walk`` (the open's) names
exactly what the full survey names; a tree deeper than LMDB makes is damage."""

from __future__ import annotations

import mmap
import os
import random
import shutil
import struct
from pathlib import Path

import pytest

from ackstore import AckStore, CorruptStoreError, CursorConfig, Position
from ackstore.storage import lmdb_file
from ackstore.storage.codecs import native
from ackstore.storage.lmdb_file import current_meta, data_file, read_metas, survey, walk

from .codec_impls import NOT_COMPILED

T = "persistent://t/ns/walk"


@pytest.fixture(scope="module")
def intact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with every tree ackstore keeps in use: topics, cursors, ledgers, log records
    (some large enough for overflow pages), history, and a free list."""
    path = tmp_path_factory.mktemp("walk") / "store"
    rng = random.Random(3)
    with AckStore.open(path, sync=False) as store:
        topic = store.topic(T)
        for ledger in range(1, 4):
            topic.add_ledger(ledger)
            topic.close_ledger(ledger, 60_000)
        topic.add_ledger(4)
        for c in range(60):
            cfg = CursorConfig(history_seconds=3600) if c % 10 == 0 else CursorConfig()
            cur = topic.cursor(f"c{c}", cfg)
            for ledger in range(1, 4):
                cur.ack_entries(ledger, sorted(rng.sample(range(1, 60_000), 300 if c % 7 else 6_000)))
            if c % 20 == 19:
                store.flush()
        for r in range(3):  # rewrites free pages: the free list holds some
            for c in range(0, 60, 3):
                topic.cursor(f"c{c}").ack([Position(4, r)])
            store.flush()
    return path


def _args(path: Path) -> tuple[mmap.mmap, tuple[object, ...]]:
    f = data_file(path)
    meta = current_meta(read_metas(f))
    with open(f, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), os.fstat(fh.fileno()).st_size, access=mmap.ACCESS_READ)
    return mm, (meta.page_size, meta.last_pgno + 1, *lmdb_file._walk_args(meta))


def _both(path: Path) -> bool:
    """The pure twin's answer, checked against the compiled one's where it is built."""
    mm, args = _args(path)
    try:
        pure = lmdb_file._py_walk_trees(mm, *args)
        if native is not None:
            assert native.walk_trees(mm, *args) is pure
        return pure
    finally:
        mm.close()


def _damaged_copies(intact: Path, tmp: Path, n: int, seed: int) -> list[tuple[str, Path]]:
    """``n`` copies of the intact store, each with one kind of damage at a seeded place:
    a byte changed, a page's header field changed, a page zeroed, a node's sizes changed."""
    raw = data_file(intact).read_bytes()
    psize = current_meta(read_metas(data_file(intact))).page_size
    pages = len(raw) // psize
    rng = random.Random(seed)
    out = []
    for k in range(n):
        b = bytearray(raw)
        pgno = rng.randrange(2, pages)
        off = pgno * psize
        kind = rng.choice(["byte", "header", "zero", "node"])
        if kind == "byte":
            at = off + rng.randrange(psize)
            b[at] ^= 1 << rng.randrange(8)
        elif kind == "header":
            field = rng.choice([0, 10, 12, 14])  # pgno, flags, lower, upper
            b[off + field] ^= 1 << rng.randrange(8)
        elif kind == "zero":
            b[off : off + psize] = bytes(psize)
        else:
            lower = struct.unpack_from("<H", b, off + 12)[0]
            nodes = max(0, (lower - 16) // 2)
            if nodes and 16 + 2 * nodes <= psize:
                ptr = struct.unpack_from("<H", b, off + 16 + 2 * rng.randrange(nodes))[0]
                if ptr + 8 <= psize:
                    field = rng.choice([0, 2, 4, 6])  # data size lo, hi, flags, key size
                    b[off + ptr + field] ^= 1 << rng.randrange(8)
        copy = tmp / f"d{k}"
        copy.mkdir()
        (copy / "data.mdb").write_bytes(bytes(b))
        out.append((f"{kind} in page {pgno}", copy))
    return out


def test_the_twins_find_an_intact_store_intact_and_walk_names_nothing(intact: Path) -> None:
    assert _both(intact) is True
    assert walk(intact) == [] == survey(intact).problems


@pytest.mark.parametrize("seed", [1, 2])
def test_the_twins_agree_on_damaged_files_and_walk_names_what_survey_names(
    intact: Path, tmp_path: Path, seed: int
) -> None:
    found = 0
    for what, copy in _damaged_copies(intact, tmp_path, 60, seed):
        clean = _both(copy)
        problems = survey(copy).problems
        assert clean is not bool(problems), f"{what}: walk_trees says {clean}, the survey {problems[:2]}"
        assert walk(copy) == problems, what
        found += not clean
        shutil.rmtree(copy)
    assert found >= 10  # damage to a page header or a node shows (to a value or free space, not here)


@pytest.mark.parametrize("depth", [0, 33])
def test_a_tree_of_a_depth_lmdb_never_makes_is_damage(intact: Path, tmp_path: Path, depth: int) -> None:
    copy = tmp_path / "store"
    shutil.copytree(intact, copy)
    f = data_file(copy)
    meta = current_meta(read_metas(f))
    b = bytearray(f.read_bytes())
    # the main tree's record in the newest meta page: after the page header, the meta's
    # head (magic, version, address, map size) and the free list's record; its depth at 6
    struct.pack_into("<H", b, meta.page * meta.page_size + 16 + 24 + 48 + 6, depth)
    f.write_bytes(bytes(b))
    assert _both(copy) is False
    assert walk(copy) == [f"main tree: a tree of depth {depth} (LMDB's are 1 to 32 deep)"]
    with pytest.raises(CorruptStoreError, match="depth"):
        AckStore.open(copy)


@pytest.mark.skipif(native is None, reason=NOT_COMPILED)
def test_the_compiled_walk_reads_no_page_past_the_buffer(intact: Path) -> None:
    """Page counts past the buffer are clipped to it, and its arguments are checked."""
    assert native is not None
    mm, args = _args(intact)
    try:
        psize, pages, *rest = args
        assert native.walk_trees(mm, psize, pages * 1000, *rest) is True
        assert native.walk_trees(mm[: 4 * psize], psize, pages, *rest) is False  # the roots lie past it
        with pytest.raises(ValueError, match="page size"):
            native.walk_trees(mm, 16, pages, *rest)
        with pytest.raises(TypeError, match="free must be a tuple of 8 ints"):
            native.walk_trees(mm, psize, pages, (1, 2), *rest[1:])
    finally:
        mm.close()
