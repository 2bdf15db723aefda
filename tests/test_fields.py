"""The field types (``ackstore.fields``): what a flush reads of a cursor's parts, declared
once, held by the compiled module's own types where it was built (else by slotted classes),
read and written from Python as attributes either way."""

from __future__ import annotations

import gc
import sys
import weakref

import pytest
from pyroaring import FrozenBitMap

from ackstore import fields
from ackstore.cursor.chain import MarkerChain
from ackstore.cursor.lane import MarkerPlan
from ackstore.cursor.pages import Pages
from ackstore.cursor.plan import Planner
from ackstore.cursor.state import AckState
from ackstore.cursor.store_side import StoreSide
from ackstore.ledger_acks import NO_ENTRIES, LedgerAcks
from ackstore.ledger_cache import CachePool, LedgerCache
from ackstore.storage import codecs
from ackstore.storage.records import IndexEntry
from ackstore.store import AckStore
from ackstore.topic import Topic

from .codec_impls import NOT_COMPILED

PARTS = {
    "PlannerFields": Planner,
    "PagesFields": Pages,
    "StateFields": AckState,
    "ChainFields": MarkerChain,
    "LedgerFields": LedgerAcks,
    "PlanFields": MarkerPlan,
    "CacheFields": LedgerCache,
    "PoolFields": CachePool,
    "CoreFields": StoreSide,
    "HostFields": AckStore,
    "TopicFields": Topic,
}


def test_every_part_derives_from_its_field_type_and_holds_its_fields() -> None:
    for name, cls in PARTS.items():
        base = getattr(fields, name)
        assert issubclass(cls, base), (cls, base)
        assert fields.field_names(cls)[: len(fields.FIELDS[name])] == fields.FIELDS[name]
        # no part declares a field of its field type again as a slot of its own
        own = {s for klass in cls.__mro__ if klass is not base for s in klass.__dict__.get("__slots__", ())}
        assert not own & set(fields.FIELDS[name]), (cls, own & set(fields.FIELDS[name]))


def test_the_field_names_are_the_declarations_annotations() -> None:
    assert fields.FIELDS["LedgerFields"] == ("bitmap", "batches", "runs", "added", "counts", "counts_added", "size")
    assert fields.FIELDS["PoolFields"] == ("total", "budget")
    assert len(fields.FIELDS["ChainFields"]) == 19
    assert fields.field_names(LedgerAcks) == ("bitmap", "batches", "runs", "added", "counts", "counts_added", "size")


class _Derived(fields.ChainFields):  # type: ignore[misc,valid-type]
    __slots__ = ("extra", "__weakref__")


def test_a_field_is_an_attribute_unset_until_set() -> None:
    obj = _Derived()
    with pytest.raises(AttributeError):
        obj.next_seq  # noqa: B018
    obj.next_seq = 7
    obj.extra = "x"
    assert (obj.next_seq, obj.extra) == (7, "x")
    del obj.next_seq
    with pytest.raises(AttributeError):
        obj.next_seq  # noqa: B018
    with pytest.raises(AttributeError):
        obj.not_a_field = 1  # type: ignore[attr-defined]


def test_a_field_holds_a_reference_and_lets_it_go() -> None:
    value = object()
    before = sys.getrefcount(value)
    obj = _Derived()
    for name in fields.FIELDS["ChainFields"]:
        setattr(obj, name, value)
    assert sys.getrefcount(value) == before + len(fields.FIELDS["ChainFields"])
    del obj
    assert sys.getrefcount(value) == before


def test_a_cycle_through_fields_is_collected() -> None:
    a, b = _Derived(), _Derived()
    a.full_live, b.full_live = b, a
    gone = weakref.ref(a)
    del a, b
    gc.collect()
    assert gone() is None


@pytest.mark.skipif(codecs.native is None, reason=NOT_COMPILED)
def test_the_compiled_field_types_are_the_modules_own() -> None:
    native = codecs.native
    assert native is not None
    for name in fields.FIELDS:
        made = getattr(fields, name)
        assert made.__module__ == "ackstore.fields" and made.__name__ == name
        assert "__slots__" not in made.__dict__  # a type of the compiled module, not a class
    with pytest.raises(TypeError, match="names are strings"):
        native.fields_type("ackstore.fields.Bad", (1,), "")
    # a declaration other than the one the module was built from (its fields' indices
    # were compiled in): refused, naming it
    with pytest.raises(RuntimeError, match=r"built from another ackstore/fields.py \(PoolFields .*rebuild it"):
        native.fields_type("ackstore.fields.PoolFields", ("budget", "total"), "")
    with pytest.raises(RuntimeError, match="Unknown"):
        native.fields_type("ackstore.fields.Unknown", ("x",), "")


@pytest.mark.skipif(codecs.native is None, reason=NOT_COMPILED)
def test_the_lane_refuses_a_plan_class_without_the_plan_fields() -> None:
    import lmdb
    from msgpack import packb

    from ackstore.cursor import lane
    from ackstore.storage.log import trim_records
    from ackstore.storage.records import FORMAT_VERSION, log_key

    native = codecs.native
    assert native is not None

    class NotAPlan:
        keep_dirty = frozenset()
        truncated = False

    with pytest.raises(TypeError, match="derives from PlanFields"):
        native.lane_setup(
            NotAPlan, IndexEntry, FrozenBitMap, packb, log_key, FORMAT_VERSION, lane._commit_marker, trim_records,
            lmdb.Error, 64, 0.125, 64, 4, 64, 64, 1024, 8, 8, NO_ENTRIES,
        )  # fmt: skip
    lane.set_delta_bounds(lane.DELTA_MAX_ACKS, lane.DELTA_MAX_SHARE)  # set up again as it was
    assert lane.take_marker is native.take_marker


def test_the_compiled_lane_reads_fields_of_field_types_and_calls_no_method_of_the_engine() -> None:
    """Every attribute the marker lane (``_lane.c``) reads or sets is a field of a field type
    (read at its place, by index), and the only methods it calls by name are an LMDB
    cursor's: what it needs of the engine's own classes it is given (``lane_setup``) or
    handed back to the group flush. Read from the source, so a change that reaches into a
    Python class by name fails here."""
    import re
    from pathlib import Path

    source = (Path(fields.__file__).parent / "_lane.c").read_text()
    table = source[source.index("static Attr attrs[A_COUNT] = {") :]
    table = table[: table.index("\n};")]
    entries = [line.strip() for line in table.splitlines()[1:] if line.strip()]
    assert entries and all(re.fullmatch(r"\[\w+\] = FIELD_OF\(C_\w+, \w+Fields, \w+\),", e) for e in entries), [
        e for e in entries if not e.startswith("[") or "FIELD_OF" not in e
    ]
    names = re.search(r"static const char \*names\[N_COUNT\] = \{([^}]*)\};", source)
    assert names is not None and re.findall(r'"(\w+)"', names.group(1)) == ["set_key", "delete"]
    for declared in re.findall(r"FIELD_OF\(C_\w+, (\w+), (\w+)\)", table):
        assert declared[1] in fields.FIELDS[declared[0]], declared  # a field its type declares
