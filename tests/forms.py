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


RUN_CHUNKS: list[tuple[int, int] | None] = [None, (1, 2), (8, 5)]
"""the compiled twin's runs: in one array (as shipped), or in chunks past (that many, of a room of that many)"""


@contextmanager
def run_chunks(chunks: tuple[int, int] | None) -> Iterator[None]:
    """The compiled twin holds runs as ``chunks`` says (``_set_run_chunks``) within the block."""
    from ackstore.cursor import small as small_form

    native = small_form._native
    if chunks is None or native is None:
        yield
        return
    before = native._set_run_chunks(*chunks)
    try:
        yield
    finally:
        native._set_run_chunks(*before)
