"""The small form's entries and the topic's positions, one to the other.

A cursor in the small form (``ackstore.cursor.small``) keeps its state as the form's
*entries*: M's ledger's own, and, once M's ledger is sealed and ledgers follow it in the
topic's directory, theirs after them on one line: the form's *spans* are the ledgers after
M's, each with its *offset*, the form's entry of its entry 0 (the entries of every ledger
before it on the line: ``offset`` of the first is M's ledger's entry count). Each spanned
ledger but the last is sealed; a ledger after the last one spanned is not the form's (at
most :data:`SPAN_MOST` are spanned). A ledger rollover so leaves a consumer in the form, and
so do many: the entries it still owes in sealed ledgers and those it reads from the newest
one are runs of one line, and when the last of M's ledger's is acked M moves on into the
next one (the form's ``rebase``), as the parts' M moves across a fully acked sealed ledger.
These functions read the form's members only (``md_l``, ``md_e``, ``spans``, ``limit``,
``rp_e``, ``rp_i``), so both twins share them; :func:`bound_of` is the one rule for what
the directory gives the form.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from ..position import MAX_ENTRY
from .validate import check_ack

if TYPE_CHECKING:
    from ..directory import LedgerDirectory

__all__ = [
    "SPAN_MOST",
    "ahead_of_line",
    "behind_line",
    "split_behind",
    "bound_of",
    "cumulative_entry",
    "fit",
    "form_entries",
    "form_entry",
    "form_position",
    "highest_in",
    "is_acked",
    "ledger_batches",
    "ledger_count_groups",
    "ledger_counts",
    "ledger_runs",
    "line_bound",
    "line_entry",
    "line_index",
    "line_at",
    "place",
    "read_entry",
    "read_position",
    "read_past_line",
]

SPAN_MOST = 255
"""the most ledgers after M's the form spans (the compiled twin's ``SPAN_MOST`` in
``ackstore/_small.c``, which holds it in a byte): a subscription that still owes an entry of
M's ledger across this many rollovers leaves the form (a ledger acked whole costs about 5
bytes of its state, so the line's ledgers fit a state slot with a few hundred ranges besides)"""


_ledger_of = itemgetter(0)


def bound_of(d: LedgerDirectory, md_l: int) -> tuple[tuple[tuple[int, int], ...], int] | None:
    """What the directory ``d`` gives a form whose M is in ``md_l``: its spans, ``((ledger,
    offset), ...)`` of the ledgers that follow ``md_l`` while each before is sealed (at
    most :data:`SPAN_MOST`, offsets within ``MAX_ENTRY``), and ``limit``, the form's highest
    entry allowed (the last spanned ledger's last, or its open bound, at most
    ``MAX_ENTRY``); None when ``md_l`` is not in the directory (trimmed:
    ``Served._past_trim`` moves M on). O(log ledgers + spans)."""
    i = d.index(md_l)
    if i < 0:
        return None
    spans: list[tuple[int, int]] = []
    offset = 0
    while True:
        count = d.counts[i]
        if count < 0:
            return tuple(spans), min(offset + d.open_limit(), MAX_ENTRY)
        if i + 1 == len(d.ids) or len(spans) == SPAN_MOST or offset + count > MAX_ENTRY:
            return tuple(spans), min(offset + count - 1, MAX_ENTRY)
        offset += count
        i += 1
        spans.append((d.ids[i], offset))


def line_bound(d: LedgerDirectory, md_l: int) -> tuple[tuple[tuple[int, int], ...], int, int] | None:
    """:func:`bound_of` ``md_l`` with the ledger's end (``d.end``): ``(spans, limit, end)``,
    or None when ``md_l`` is not in ``d`` (what the compiled open asks of the directory).
    O(log ledgers + spans)."""
    bound = bound_of(d, md_l)
    return None if bound is None else (*bound, d.end(md_l))


def fit(s: Any, d: LedgerDirectory, bound: tuple[tuple[tuple[int, int], ...], int] | None = None) -> bool:
    """The form fitted to directory ``d`` as a recovery fits a state (an open's: bounded as
    of no version, so its first use asks again): M moved on across what it acked whole of
    sealed ledgers. False when M's ledger is not in ``d``. ``bound``: :func:`bound_of` M's
    ledger, when the caller has it. O(ledgers crossed)."""
    while True:
        if bound is None:
            bound = bound_of(d, s.md_l)
            if bound is None:
                return False
        if not s.bound(-1, *bound):
            return True
        bound = None


def place(s: Any, ledger: Any) -> tuple[int, int] | None:
    """Where ``ledger`` is on the form's line: its offset, and the next ledger's (-1: it is
    the last on the line); None when the line does not hold it (the spanned ledgers ascend,
    as the directory's ids). O(log spans)."""
    spans = s.spans
    if ledger == s.md_l:
        return 0, spans[0][1] if spans else -1
    if type(ledger) is not int:
        return None
    j = bisect_left(spans, ledger, key=_ledger_of)
    if j == len(spans) or spans[j][0] != ledger:
        return None
    return spans[j][1], spans[j + 1][1] if j + 1 < len(spans) else -1


def form_entry(s: Any, ledger: Any, entry: Any) -> int:
    """The form's entry of position ``(ledger, entry)``, or -1 when the form does not take it
    (ints; in M's ledger or a spanned one, below the next one's offset and at most the
    bound). O(log spans)."""
    if type(ledger) is not int or type(entry) is not int or entry < 0:
        return -1
    at = place(s, ledger)
    if at is None:
        return -1
    x = at[0] + entry
    return x if x <= (at[1] - 1 if at[1] >= 0 else s.limit) else -1  # type: ignore[no-any-return]


def behind_line(s: Any, d: LedgerDirectory, topic: str, ledger: Any, entry: Any) -> bool:
    """Whether an ack of ``ledger:entry`` that the form does not take (:func:`form_entry`
    -1) is one Pulsar ignores: a position in a ledger before M's (one trimmed since
    included). It is checked first as the parts check it (``validate.check_ack`` at the
    form's M), so a position no ledger of the topic holds raises with the form as it was.
    False for any other (the parts take it), and for a value that is not an int (the parts
    name it). O(log ledgers)."""
    if type(ledger) is not int or type(entry) is not int:
        return False
    check_ack(d, topic, (s.md_l, s.md_e), ledger, entry)
    return ledger < s.md_l  # type: ignore[no-any-return]


def split_behind(s: Any, items: list[Any] | tuple[Any, ...]) -> tuple[list[int], list[Any]] | None:
    """A list of positions (Positions or ``(ledger, entry)`` tuples) that the form does not
    take whole, split into the indexes of those in a ledger before M's (at or below M: what
    :func:`behind_line` ignores once checked) and the others, in their order, when the form
    takes each of those; None when none is behind the line, or an item is neither (not a
    pair of ints, a position past the line): the parts take the list. O(items x log spans)."""
    md_l, at, rest = s.md_l, [], []
    for i, item in enumerate(items):
        if not (isinstance(item, tuple) and len(item) == 2 and type(item[0]) is int and type(item[1]) is int):
            return None
        if item[0] < md_l:
            at.append(i)
        elif form_entry(s, item[0], item[1]) >= 0:
            rest.append(item)
        else:
            return None
    return (at, rest) if at else None


def ahead_of_line(s: Any, d: LedgerDirectory, topic: str, items: list[Any] | tuple[Any, ...]) -> list[Any] | None:
    """The items of a list of positions to ack that the form takes, when the others lie in
    a ledger before M's (:func:`split_behind`), which are ignored; those are checked first as
    the parts check a list, ledger by ledger in their order, each at its highest entry
    (:func:`behind_line`): a wrong one raises, with nothing acked. None when the form does
    not take the list so (or one behind the line has a negative entry, which the parts name
    their own way). O(items x log spans + the ledgers behind x log ledgers)."""
    split = split_behind(s, items)
    if split is None:
        return None
    behind: dict[int, int] = {}  # (ledger: its highest entry named)
    for i in split[0]:
        ledger, entry = items[i]
        if entry < 0:
            return None
        behind[ledger] = max(behind.get(ledger, entry), entry)
    for ledger, top in behind.items():
        behind_line(s, d, topic, ledger, top)
    return split[1]


def cumulative_entry(s: Any, ledger: Any, entry: Any) -> int | None:
    """The form's entry a cumulative ack of ``(ledger, entry)`` acks through (at or below
    M's own: nothing to ack): the form's entry of one it takes (:func:`form_entry`; entry -1
    of a spanned ledger: the last of the ledger before it), else None (a position behind M
    in another ledger, or entry -1 of M's: the caller checks it; anything else the parts
    check and take). O(log spans)."""
    if type(ledger) is not int or type(entry) is not int:
        return None
    if entry == -1 and ledger != s.md_l and (at := place(s, ledger)) is not None:
        return at[0] - 1
    x = form_entry(s, ledger, entry)
    return x if x >= 0 else None


def form_entries(s: Any, items: Any) -> list[int] | None:
    """The form's entries of ``items`` (a list or tuple of Positions or ``(ledger, entry)``
    tuples) when it takes every one (:func:`form_entry`'s rule: the pure twin's ack and
    delivery of a list of positions), else None. O(items x log spans)."""
    if not isinstance(items, (list, tuple)):
        return None
    out: list[int] = []
    for item in items:
        if not isinstance(item, tuple) or len(item) != 2:
            return None
        x = form_entry(s, item[0], item[1])
        if x < 0:
            return None
        out.append(x)
    return out


def line_index(s: Any, x: int) -> int:
    """Which ledger of the form's line its entry ``x`` is in: 0 M's, j the j-th spanned (a
    ledger with no entries holds none). O(log spans)."""
    return bisect_right(s.spans, x, key=lambda span: span[1])


def form_position(s: Any, x: int) -> tuple[int, int]:
    """The position of the form's entry ``x`` (a ledger with no entries holds none). O(log spans)."""
    spans, j = s.spans, line_index(s, x)
    return (s.md_l, x) if j == 0 else (spans[j - 1][0], x - spans[j - 1][1])


def read_entry(s: Any, ledger: int, entry: int) -> int:
    """The form's entry of a read position ``(ledger, entry)`` (a sealed ledger's end is
    allowed: it is the next one's first), or -1 when it is not the form's. O(log spans)."""
    at = place(s, ledger)
    if at is None:
        return -1
    offset, end = at
    return offset + entry if 0 <= entry <= (end if end >= 0 else MAX_ENTRY) - offset else -1


def read_position(s: Any) -> tuple[int, int]:
    """The form's read position as a position (in the ``rp_i``-th ledger of its line)."""
    i = s.rp_i
    if not i:
        return s.md_l, s.rp_e
    ledger, offset = s.spans[i - 1]
    return ledger, s.rp_e - offset


def read_past_line(s: Any, d: LedgerDirectory) -> bool:
    """Whether the form's read position stands at the end of its line's last ledger while
    that ledger is sealed and the directory ``d`` holds one after it: the line stopped
    short (:data:`SPAN_MOST`), and the read position is that next ledger's first entry,
    which the form does not hold. O(1) unless past the form's highest entry allowed."""
    if s.rp_e <= s.limit:
        return False
    ledger, entry = read_position(s)
    i = d.index(ledger)
    return 0 <= i < len(d.ids) - 1 and 0 <= d.counts[i] <= entry


def ledger_runs(s: Any) -> list[tuple[int, list[tuple[int, int]]]]:
    """The form's runs per ledger, ``[(ledger, [(first, last), ...]), ...]``, as the parts
    hold them (a run across an offset is one in each ledger; a ledger with no entries holds
    none). O(runs + spans x log runs)."""
    spans = s.spans
    if not spans:
        runs = s.runs()
        return [(s.md_l, runs)] if runs else []
    line = (s.md_l, *(ledger for ledger, _ in spans))
    return [(ledger, mine) for k, ledger in enumerate(line) if (mine := s.runs_of(k))]


def line_at(s: Any, ledger: int, entry: int) -> int:
    """The form's first entry at or after position ``(ledger, entry)`` (ints, entry at least
    0): 0 before M's ledger, the next ledger's offset past a ledger's end or between two of
    the line, ``2**32`` past the line. O(log spans)."""
    at = place(s, ledger)
    if at is not None:
        return min(at[0] + max(entry, 0), at[1] if at[1] >= 0 else MAX_ENTRY + 2)  # type: ignore[no-any-return]
    if ledger < s.md_l:
        return 0
    spans = s.spans
    j = bisect_right(spans, ledger, key=_ledger_of)
    return spans[j][1] if j < len(spans) else MAX_ENTRY + 2  # type: ignore[no-any-return]


def ledger_counts(s: Any, first: int = 0, stop: int = MAX_ENTRY + 2) -> list[tuple[tuple[int, int], int]]:
    """The form's delivery counts as ``((ledger, entry), n)``, ascending, of its entries
    ``first..stop - 1`` (:func:`line_at` maps positions to them). O(log counts + those) when
    they all lie in M's ledger, else O(those x log spans)."""
    counts, spans, md_l = s.counts(first, stop), s.spans, s.md_l
    if not spans or not counts or counts[-1][0] < spans[0][1]:
        return [((md_l, x), n) for x, n in counts]
    return [(form_position(s, x), n) for x, n in counts]


def ledger_count_groups(s: Any) -> dict[int, dict[int, int]]:
    """The form's delivery counts per ledger, ``{ledger: {entry: n}}``, as the parts hold
    them. O(counts) when they all lie in M's ledger, else O(counts x log spans)."""
    counts, spans = s.counts(), s.spans
    if not spans or not counts or counts[-1][0] < spans[0][1]:
        return {s.md_l: dict(counts)} if counts else {}
    out: dict[int, dict[int, int]] = {}
    for (ledger, entry), n in ledger_counts(s):
        out.setdefault(ledger, {})[entry] = n
    return out


def ledger_batches(s: Any) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The form's partial batches as ``((ledger, entry), (size, mask))``, ascending. O(batches x log spans)."""
    return [(form_position(s, x), (size, mask)) for x, size, mask in s.batches()] if s.nb else []


def ledgers_held(s: Any) -> int:
    """How many ledgers hold the form's acks, delivery counts or partial batches: those its
    state marker names. O(1) for a form whose state is all in M's ledger, else O(runs x spans +
    counts + batches)."""
    if not s.spans or s.top() < s.spans[0][1]:  # (all of it in M's ledger: the next ones hold nothing)
        return 1 if s.n or s.nc or s.nb else 0
    held = {ledger for ledger, _ in ledger_runs(s)} | {at[0] for at, _ in ledger_counts(s)}
    return len(held | {at[0] for at, _ in ledger_batches(s)})


def highest_in(s: Any, ledger: int) -> int:
    """The highest entry of ``ledger`` holding state in the form (M, an ack, a delivery
    count or a partial batch), -1 when none: what sealing ``ledger`` must keep. O(runs +
    counts + batches)."""
    top = s.md_e if ledger == s.md_l else -1
    for x in [last for _, last in s.runs()] + [x for x, _ in s.counts()] + [x for x, _, _ in s.batches()]:
        at = form_position(s, x)
        if at[0] == ledger:
            top = max(top, at[1])
    return top  # type: ignore[no-any-return]


def line_entry(s: Any, ledger: Any, entry: Any) -> int:
    """The form's entry of position ``(ledger, entry)`` on its line, whatever its bound, or
    -1 when the line does not hold it (another ledger, or past a sealed ledger's end: the
    next one's). O(log spans)."""
    at = place(s, ledger) if type(ledger) is int and type(entry) is int and entry >= 0 else None
    if at is None:
        return -1
    x = at[0] + entry
    return x if x < (at[1] if at[1] >= 0 else MAX_ENTRY + 1) else -1  # type: ignore[no-any-return]


def is_acked(s: Any, ledger: int, entry: int) -> bool:
    """Whether position ``(ledger, entry)`` is acked in the form: at or below M, or in a
    run (an entry past a sealed ledger's end is not). O(log spans + log runs)."""
    if (ledger, entry) <= (s.md_l, s.md_e):
        return True
    x = line_entry(s, ledger, entry)
    return x >= 0 and bool(s.acked(x))
