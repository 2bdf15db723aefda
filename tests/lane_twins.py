"""Both implementations of the marker lane (``ackstore.cursor.lane.take_marker``) on the
same cursor: equal outcomes, equal cursors after. Used by test_lane and, before every
flush, by the state machines."""

from __future__ import annotations

from typing import Any

from pyroaring import BitMap

from ackstore.cursor import Cursor, lane
from ackstore.cursor.lane import MarkerPlan

__all__ = ["lanes_agree"]


def _value(x: Any) -> Any:
    """``x`` with bitmaps as sorted lists and sets sorted, so outcomes compare by value."""
    if isinstance(x, BitMap | frozenset | set) or type(x).__name__ == "FrozenBitMap":
        return ("set", sorted(x))
    if isinstance(x, dict):
        return ("dict", [(k, _value(v)) for k, v in x.items()])  # in order: the order is part of it
    if isinstance(x, list | tuple):
        return (type(x).__name__, [_value(v) for v in x])
    return x


def _plan(plan: object) -> Any:
    if not isinstance(plan, MarkerPlan):
        return plan
    return {name: _value(getattr(plan, name)) for name in MarkerPlan.__slots__}


def _cursor(cur: Cursor) -> Any:
    """What a take may change, and what it reads."""
    planner = cur.planner
    pages, chain, state = planner.pages, planner.chain, planner.state
    return (
        chain.next_seq,
        sorted(pages.dirty),
        _value(pages.pinned),
        state.meta_dirty,
        _value(pages.index),
        _value(chain.full_live),
    )


def lanes_agree(cur: Cursor) -> str:
    """Run every ``take_marker`` on ``cur`` under its lock and assert the same outcome (the
    plan's every field, or None, or OTHER, or the same exception) and the same cursor after;
    each plan is aborted and the sequence it took given back, so the cursor is as it was.
    Returns what the outcome was: "idle", "other" or "plan"."""
    planner = cur.planner
    with cur._lock:
        before = _cursor(cur)
        outcomes = []
        for impl in lane.IMPLEMENTATIONS:
            take = impl.take_marker
            try:
                plan = take(planner)
            except Exception as exc:  # the same exception everywhere
                outcomes.append(("raised", type(exc).__name__, str(exc), _cursor(cur)))
                continue
            outcomes.append(("ok", _plan(plan), _cursor(cur)))
            if isinstance(plan, MarkerPlan):
                planner.abort(plan)
                planner.chain.next_seq = before[0]
            assert _cursor(cur) == before, take
        assert all(o == outcomes[0] for o in outcomes), outcomes
    first = outcomes[0]
    if first[0] != "ok":
        raise AssertionError(f"take_marker raised on a cursor: {first}")
    plan = first[1]
    return "idle" if plan is None else "other" if plan is lane.OTHER else "plan"
