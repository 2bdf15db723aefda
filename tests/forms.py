"""A cursor's small form ended on purpose: what any call the form does not serve does
first (the parts load the newest flushed state and take what changed since, and the
cursor stays out of the form at its next flush), for tests about the parts or the
hand-over itself."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def end_form(cur: Any) -> None:
    """End ``cur``'s small form, if it is in one (its parts hold the state after)."""
    core = cur._core
    with core._lock:
        core._parts()


LAYOUTS: list[tuple[int, int, int, int] | None] = [None, (1, 2, 0, 1000), (8, 5, 3, 2)]
"""the compiled twin's layouts: as shipped, or lowered so that few runs and counts reach what
many do: runs in chunks past (that many, of a room of that many), an ack's count dropped in
place when more than (that many) counts would move, and (that many) so dropped held however
few the counts are"""


@contextmanager
def compiled_layout(layout: tuple[int, int, int, int] | None) -> Iterator[None]:
    """The compiled twin holds runs and counts as ``layout`` says (``_set_run_chunks``,
    ``_set_count_moves``) within the block."""
    from ackstore.cursor import small as small_form

    native = small_form._native
    if layout is None or native is None:
        yield
        return
    chunks = native._set_run_chunks(*layout[:2])
    moves = native._set_count_moves(*layout[2:])
    try:
        yield
    finally:
        native._set_run_chunks(*chunks)
        native._set_count_moves(*moves)


@contextmanager
def count_cap(cap: int) -> Iterator[None]:
    """Both twins hold at most ``cap`` delivery counts and partial batches within the block
    (``small.COUNT_CAP``, ``_set_count_cap``)."""
    from ackstore.cursor import small as small_form

    native, before = small_form._native, small_form.COUNT_CAP
    small_form.COUNT_CAP = cap
    was = native._set_count_cap(cap) if native is not None else None
    try:
        yield
    finally:
        small_form.COUNT_CAP = before
        if native is not None:
            native._set_count_cap(was)


def sealed_topic(store: Any, name: str, n: int, entries: int) -> Any:
    """Topic ``name`` of ``store`` with ledgers 1..n of ``entries`` entries each, sealed, and
    ledger n + 1 open."""
    topic = store.topic(name)
    for ledger in range(1, n + 1):
        topic.add_ledger(ledger)
        topic.close_ledger(ledger, entries)
    topic.add_ledger(n + 1)
    return topic
