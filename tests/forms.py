"""A cursor's small form ended on purpose: what any call the form does not serve does
first (the parts load the newest flushed state and take what changed since, and the
cursor stays out of the form at its next flush), for tests about the parts or the
hand-over itself; and the pairs a flush of small forms puts, as bytes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def end_form(cur: Any) -> None:
    """End ``cur``'s small form, if it is in one (its parts hold the state after)."""
    core = cur._core
    with core._lock:
        core._parts()


def pairs(puts: Iterable[tuple[Any, Any]]) -> list[tuple[bytes, bytes]]:
    """The (key, value) pairs of ``flush_small``'s puts as bytes: the compiled twin's ``Puts``
    hands out windows on its buffer, the pure twin's list holds bytes."""
    return [(bytes(key), bytes(value)) for key, value in puts]
