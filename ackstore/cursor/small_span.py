"""The small form's entries and the topic's positions, one to the other.

A cursor in the small form (``ackstore.cursor.small``) keeps its state as the form's
*entries*: M's ledger's own entries, and, once M's ledger is sealed with ``base`` entries
and ledger ``nl`` follows it in the topic's directory, ``nl``'s entry ``e`` as the form's
``base + e``. A ledger rollover so leaves a consumer in the form: the entries it still owes
in the sealed ledger and those it reads from the next one are runs of one line, and when
the last of the sealed ledger's is acked M moves on into ``nl`` (the form's ``rebase``),
as the parts' M moves across a fully acked sealed ledger. These functions read the form's
members only (``md_l``, ``md_e``, ``base``, ``nl``, ``limit``, ``rp_e``, ``rp_nl``), so both
twins share them; :func:`bound_of` is the one rule for what the directory gives the form.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..position import MAX_ENTRY

if TYPE_CHECKING:
    from ..directory import LedgerDirectory

__all__ = [
    "bound_of",
    "cumulative_entry",
    "fit",
    "form_entries",
    "form_entry",
    "form_position",
    "highest_in",
    "is_acked",
    "ledger_counts",
    "ledger_runs",
    "read_entry",
    "read_position",
]


def bound_of(d: LedgerDirectory, md_l: int) -> tuple[int, int, int] | None:
    """What the directory ``d`` gives a form whose M is in ``md_l``: ``(base, nl, limit)``,
    ``base`` and ``nl`` -1 unless ``md_l`` is sealed and a ledger follows it, ``limit`` the
    form's highest entry allowed (M's ledger's last, or nl's as the form's, at most
    ``MAX_ENTRY``); None when ``md_l`` is not in the directory (trimmed: the form ends). O(log
    ledgers)."""
    i = d.index(md_l)
    if i < 0:
        return None
    count = d.counts[i]
    if count < 0:
        return -1, -1, d.open_limit()
    if i + 1 == len(d.ids):
        return -1, -1, count - 1
    after = d.counts[i + 1]
    top = after - 1 if after >= 0 else d.open_limit()
    return count, d.ids[i + 1], min(count + top, MAX_ENTRY)


def fit(s: Any, d: LedgerDirectory) -> bool:
    """The form fitted to directory ``d`` as a recovery fits a state (an open's: bounded as
    of no version, so its first use asks again): M moved on across what it acked whole of
    sealed ledgers. False when M's ledger is not in ``d``. O(ledgers crossed)."""
    while True:
        bound = bound_of(d, s.md_l)
        if bound is None:
            return False
        if not s.bound(-1, *bound):
            return True


def form_entry(s: Any, ledger: Any, entry: Any) -> int:
    """The form's entry of position ``(ledger, entry)``, or -1 when the form does not take it
    (ints; in M's ledger, below ``base`` once that is sealed, or in ``nl``; at most the
    bound). O(1)."""
    if type(ledger) is not int or type(entry) is not int or entry < 0:
        return -1
    base = s.base
    if ledger == s.md_l:
        return entry if (entry < base if base >= 0 else entry <= s.limit) else -1
    if base >= 0 and ledger == s.nl and base + entry <= s.limit:
        return base + entry  # type: ignore[no-any-return]
    return -1


def cumulative_entry(s: Any, ledger: Any, entry: Any) -> int | None:
    """The form's entry a cumulative ack of ``(ledger, entry)`` acks through (at or below
    M's own: nothing to ack): the form's entry of one it takes (:func:`form_entry`; entry -1
    of ``nl``: M's ledger's last), else None (a position behind M in another ledger, or
    entry -1 of M's: the caller checks it; anything else the parts check and take). O(1)."""
    if type(ledger) is not int or type(entry) is not int:
        return None
    if entry == -1 and s.base >= 0 and ledger == s.nl:
        return s.base - 1  # type: ignore[no-any-return]
    x = form_entry(s, ledger, entry)
    return x if x >= 0 else None


def form_entries(s: Any, items: Any) -> list[int] | None:
    """The form's entries of ``items`` (a list or tuple of Positions or ``(ledger, entry)``
    tuples) when it takes every one (:func:`form_entry`'s rule, inline: the pure twin's
    ack and delivery of a list of positions), else None. O(items)."""
    if not isinstance(items, (list, tuple)):
        return None
    md_l, nl, base, limit = s.md_l, s.nl, s.base, s.limit
    top = base - 1 if base >= 0 else limit  # M's ledger's last entry the form takes
    out: list[int] = []
    for item in items:
        if not isinstance(item, tuple) or len(item) != 2:
            return None
        ledger, entry = item
        if type(ledger) is not int or type(entry) is not int or entry < 0:
            return None
        if ledger == md_l and entry <= top:
            out.append(entry)
        elif base >= 0 and ledger == nl and base + entry <= limit:
            out.append(base + entry)
        else:
            return None
    return out


def form_position(s: Any, x: int) -> tuple[int, int]:
    """The position of the form's entry ``x``. O(1)."""
    base = s.base
    return (s.nl, x - base) if 0 <= base <= x else (s.md_l, x)


def read_entry(s: Any, ledger: int, entry: int) -> int:
    """The form's entry of a read position ``(ledger, entry)`` (a sealed ledger's end is
    allowed: it is the next ledger's first), or -1 when it is not the form's. O(1)."""
    base = s.base
    if ledger == s.md_l and 0 <= entry <= (base if base >= 0 else MAX_ENTRY):
        return entry
    if base >= 0 and ledger == s.nl and 0 <= entry <= MAX_ENTRY - base:
        return base + entry  # type: ignore[no-any-return]
    return -1


def read_position(s: Any) -> tuple[int, int]:
    """The form's read position as a position (in nl once a read moved it there)."""
    return (s.nl, s.rp_e - s.base) if s.rp_nl else (s.md_l, s.rp_e)


def ledger_runs(s: Any) -> list[tuple[int, list[tuple[int, int]]]]:
    """The form's runs per ledger, ``[(ledger, [(first, last), ...]), ...]``, as the parts
    hold them (a run across ``base`` is one in each ledger). O(runs)."""
    runs = s.runs()
    base = s.base
    if base < 0 or not runs or runs[-1][1] < base:
        return [(s.md_l, runs)] if runs else []
    mine = [r for r in runs if r[0] < base]
    theirs = [(max(f, base) - base, last - base) for f, last in runs if last >= base]
    if mine and mine[-1][1] >= base:
        mine[-1] = (mine[-1][0], base - 1)
    return ([(s.md_l, mine)] if mine else []) + [(s.nl, theirs)]


def ledger_counts(s: Any) -> list[tuple[tuple[int, int], int]]:
    """The form's delivery counts as ``((ledger, entry), n)``, ascending. O(counts)."""
    return [(form_position(s, x), n) for x, n in s.counts()]


def highest_in(s: Any, ledger: int) -> int:
    """The highest entry of ``ledger`` holding state in the form (M, an ack or a delivery
    count), -1 when none: what sealing ``ledger`` must keep. O(runs + counts)."""
    top = s.md_e if ledger == s.md_l else -1
    for x in [last for _, last in s.runs()] + [x for x, _ in s.counts()]:
        at = form_position(s, x)
        if at[0] == ledger:
            top = max(top, at[1])
    return top  # type: ignore[no-any-return]


def is_acked(s: Any, ledger: int, entry: int) -> bool:
    """Whether position ``(ledger, entry)`` is acked in the form: at or below M, or in a
    run (an entry past a sealed ledger's end is not). O(log runs)."""
    if (ledger, entry) <= (s.md_l, s.md_e):
        return True
    base = s.base
    if ledger == s.md_l:
        return (base < 0 or entry < base) and bool(s.acked(entry))
    return base >= 0 and ledger == s.nl and entry >= 0 and bool(s.acked(base + entry))
