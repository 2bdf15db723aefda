"""A cursor's small form ended on purpose: what any call the form does not serve does
first (the parts load the newest flushed state and take what changed since, and the
cursor stays out of the form at its next flush), for tests about the parts or the
hand-over itself."""

from __future__ import annotations

from typing import Any


def end_form(cur: Any) -> None:
    """End ``cur``'s small form, if it is in one (its parts hold the state after)."""
    core = cur._core
    with core._lock:
        core._parts()
