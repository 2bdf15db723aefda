"""The field types (``ackstore.fields``): what the compiled ``Cursor.ack`` reads of a cursor,
its core, store and topic, declared once, held by the compiled module's own types where it
was built (else by slotted classes), read and written from Python as attributes either way."""

from __future__ import annotations

import gc
import sys
import weakref

import pytest

from ackstore import fields
from ackstore.cursor.facade import Cursor
from ackstore.cursor.store_side import StoreSide
from ackstore.storage import codecs
from ackstore.store import AckStore
from ackstore.topic import Topic

from .codec_impls import NOT_COMPILED

PARTS = {
    "CoreFields": StoreSide,
    "FacadeFields": Cursor,
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
    assert fields.FIELDS["CoreFields"] == ("small", "_deleted", "_store", "_lock", "topic")
    assert fields.FIELDS["TopicFields"] == ("version",)
    assert set(fields.FIELDS) == {"CoreFields", "FacadeFields", "HostFields", "TopicFields"}
    assert fields.field_names(Topic)[:1] == ("version",)


class _Derived(fields.CoreFields):  # type: ignore[misc,valid-type]
    __slots__ = ("extra", "__weakref__")


def test_a_field_is_an_attribute_unset_until_set() -> None:
    obj = _Derived()
    with pytest.raises(AttributeError):
        obj.topic  # noqa: B018
    obj.topic = 7
    obj.extra = "x"
    assert (obj.topic, obj.extra) == (7, "x")
    del obj.topic
    with pytest.raises(AttributeError):
        obj.topic  # noqa: B018
    with pytest.raises(AttributeError):
        obj.not_a_field = 1  # type: ignore[attr-defined]


def test_a_field_holds_a_reference_and_lets_it_go() -> None:
    value = object()
    before = sys.getrefcount(value)
    obj = _Derived()
    for name in fields.FIELDS["CoreFields"]:
        setattr(obj, name, value)
    assert sys.getrefcount(value) == before + len(fields.FIELDS["CoreFields"])
    del obj
    assert sys.getrefcount(value) == before


def test_a_cycle_through_fields_is_collected() -> None:
    a, b = _Derived(), _Derived()
    a.topic, b.topic = b, a
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
    with pytest.raises(RuntimeError, match=r"built from another ackstore/fields.py \(TopicFields .*rebuild it"):
        native.fields_type("ackstore.fields.TopicFields", ("version", "name"), "")
    with pytest.raises(RuntimeError, match="Unknown"):
        native.fields_type("ackstore.fields.Unknown", ("x",), "")


ALLOWED_NAMES = {
    "CorruptRecordError",  # ackstore.errors' exception, a module's name
    "crc32",  # zlib's
    "to_bytes",  # an int's
    "shift",  # a BitMap's
    "serialize",  # a BitMap's
    "set_range", "prev", "last", "key", "value", "get",  # a py-lmdb Cursor's
}  # fmt: skip
"""what compiled code may look up by name: nothing of the engine's own classes"""


def test_compiled_code_reads_only_the_declared_fields_and_no_attribute_of_the_engines_classes() -> None:
    """Every field compiled code reads of an engine object is one of a declared field type's
    (``F_<Type>_<field>``, read at its place), and no compiled file looks an attribute or a
    method of the engine's classes up by name (what it calls by name is an LMDB cursor's, a
    BitMap's, an int's, or a module's function). Read from the sources, so a change that
    reaches into a Python class by name fails here."""
    import re
    from pathlib import Path

    sources = sorted(Path(fields.__file__).parent.glob("_*.c"))
    used: set[tuple[str, str]] = set()
    for path in sources:
        text = path.read_text()
        used |= set(re.findall(r"\bF_(\w+?Fields)_(\w+)\b", text))
        looked_up = re.findall(r'(?:GetAttrString|CallMethod\w*|InternFromString)\([^;]*?"(\w+)"', text)
        assert set(looked_up) <= ALLOWED_NAMES, (path.name, set(looked_up) - ALLOWED_NAMES)
    assert used and {kind for kind, _ in used} <= set(fields.FIELDS)
    for kind, name in used:
        assert name in fields.FIELDS[kind], (kind, name)
