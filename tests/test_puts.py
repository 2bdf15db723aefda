"""``ackstore._native.Puts``: the pairs a flush of small forms puts, in one buffer. Its
iterator hands out the same tuple and windows again once nothing else holds them; these
tests hold them in every way a caller can and check that no pair it was handed ever
changes, and that LMDB's putmulti (which lets go of each pair before the next) writes
exactly the pairs added, again when a write is replayed."""

from __future__ import annotations

from pathlib import Path

import lmdb
import pytest

from ackstore.fields import native

pytestmark = pytest.mark.skipif(native is None, reason="the compiled module is not built")

PAIRS = [(b"k%04d" % i, b"value of %d " % i * (1 + i % 7)) for i in range(300)]


def _filled() -> object:
    puts = native.Puts()
    for key, value in PAIRS:
        puts.add(key, value)
    return puts


def test_a_puts_holds_its_pairs_and_their_bytes() -> None:
    puts = _filled()
    assert len(puts) == len(PAIRS)
    assert puts.nbytes == sum(len(k) + len(v) for k, v in PAIRS)
    assert [(bytes(k), bytes(v)) for k, v in puts] == PAIRS
    assert [(bytes(k), bytes(v)) for k, v in puts] == PAIRS  # again from the first pair
    assert len(native.Puts()) == 0 and list(native.Puts()) == []


def test_a_pair_that_is_still_held_never_changes() -> None:
    puts = _filled()
    held = list(puts)  # every pair held at once
    assert [(bytes(k), bytes(v)) for k, v in held] == PAIRS
    it = iter(puts)
    first = next(it)
    key, value = first
    del first  # the tuple let go, its windows held
    second = next(it)
    assert (bytes(key), bytes(value)) == PAIRS[0] and tuple(map(bytes, second)) == PAIRS[1]
    view = memoryview(second[1])  # a buffer of a window exported
    del second
    third = next(it)
    assert bytes(view) == PAIRS[1][1] and tuple(map(bytes, third)) == PAIRS[2]


def test_no_pair_is_added_while_a_buffer_of_it_is_read() -> None:
    puts = _filled()
    _, value = next(iter(puts))
    view = memoryview(value)
    with pytest.raises(BufferError, match="while a key or value of it is being read"):
        puts.add(b"k", b"v")
    assert len(puts) == len(PAIRS)
    view.release()
    puts.add(b"k", b"v")
    assert len(puts) == len(PAIRS) + 1


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="takes no arguments"):
        native.Puts([])
    with pytest.raises(TypeError, match=r"Puts.add\(key, value\)"):
        native.Puts().add(b"k")
    with pytest.raises(TypeError):
        native.Puts().add("not bytes", b"v")


def test_putmulti_writes_every_pair_and_again_when_replayed(tmp_path: Path) -> None:
    puts = _filled()
    env = lmdb.open(str(tmp_path / "env"), map_size=1 << 24, max_dbs=2)
    db = env.open_db(b"log")
    try:
        with env.begin(write=True) as txn:
            c = txn.cursor(db=db)
            c.putmulti(puts)
            c.putmulti(puts)  # a replayed write puts the same pairs
        with env.begin(write=True) as txn:
            txn.cursor(db=db).putmulti(puts)
        with env.begin(db=db) as txn:
            assert [(bytes(k), bytes(v)) for k, v in txn.cursor(db=db)] == sorted(PAIRS)
    finally:
        env.close()
