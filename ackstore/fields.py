"""The fields compiled code reads of the engine's objects, declared once.

Engine internals. The compiled ``Cursor.ack`` (``ackstore/_ack.c``) reads the public
cursor's core, the core's small form, store, lock and topic, the store's flags and its list
of changed forms, and the topic's version, then hands the positions to the form's own ack
(the form is a type of the compiled module's own). Those fields are declared here, once, as
*field types*; each class derives from its field type and adds the fields only Python reads
as ``__slots__`` of its own.

Where ``ackstore._native`` was built, the field types are made by it
(``_native.fields_type``): types of its own whose instances hold the fields in their own
struct, in the declared order. The build writes that order into a C header
(``setup.py``: ``_fields_layout.h``, one index per field), so compiled code reads a field
at a place fixed when it was compiled, and ``fields_type`` refuses a declaration that is
not the one the module was built from (rebuild it: ``make``). Elsewhere (or with
``ACKSTORE_PURE_PYTHON`` set) they are plain classes with the same ``__slots__``. Either
way Python reads and writes the fields as attributes, at the cost of a slot.

This module is also where the choice of implementation is made, once, for the whole
package: :data:`native` is the compiled module or None.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING, Any

__all__ = [
    "FIELDS",
    "CoreFields",
    "FacadeFields",
    "HostFields",
    "TopicFields",
    "field_names",
    "native",
]


def _native() -> ModuleType | None:
    if os.environ.get("ACKSTORE_PURE_PYTHON"):
        return None
    try:
        from . import _native as module  # type: ignore[attr-defined]
    except ImportError:
        return None
    return module


native = _native()
"""the compiled module, or None where it is not built (or ``ACKSTORE_PURE_PYTHON`` is set)"""


class _Core:
    """What the compiled ``Cursor.ack`` reads of a cursor's core: its small form, whether it
    was deleted, its store, the store's lock, its topic."""

    small: object
    _deleted: bool
    _store: Any  # a _Host (the core's classes name the protocols they use of it)
    _lock: object
    topic: Any  # a _Topic


class _Facade:
    """A public ``Cursor``'s core: what the compiled ``Cursor.ack`` acks into."""

    _core: Any  # a CursorCore (a _Core)


class _Host:
    """Whether a store was closed, whether it was opened read-only, and its list of small
    forms changed since the last flush."""

    closed: bool
    readonly: bool
    small_list: dict[Any, Any]  # a changed SmallState -> its CursorCore


class _Topic:
    """A topic's version: bumped on every change of its ledger directory."""

    version: int


_DECLARED = {
    "CoreFields": _Core,
    "FacadeFields": _Facade,
    "HostFields": _Host,
    "TopicFields": _Topic,
}
FIELDS: dict[str, tuple[str, ...]] = {name: tuple(decl.__annotations__) for name, decl in _DECLARED.items()}
"""each field type's name and fields (what its instances hold, in this order): the
annotations of its declaration above"""


def _make(name: str) -> type:
    decl = _DECLARED[name]
    doc = f"Field type (engine internals): {decl.__doc__}"
    if native is not None:
        made: type = native.fields_type(f"{__name__}.{name}", FIELDS[name], doc)
        return made
    return type(name, (), {"__slots__": FIELDS[name], "__module__": __name__, "__doc__": doc})


if TYPE_CHECKING:  # what the type checker sees: the declarations
    CoreFields = _Core
    FacadeFields = _Facade
    HostFields = _Host
    TopicFields = _Topic
else:
    CoreFields = _make("CoreFields")
    FacadeFields = _make("FacadeFields")
    HostFields = _make("HostFields")
    TopicFields = _make("TopicFields")


def field_names(cls: type) -> tuple[str, ...]:
    """Every field an instance of ``cls`` holds: its field type's and its classes' slots
    (less ``__weakref__``), base first."""
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        names += FIELDS.get(klass.__name__, ()) if klass.__module__ == __name__ else ()
        names += [s for s in klass.__dict__.get("__slots__", ()) if s not in ("__weakref__", "__dict__")]
    return tuple(dict.fromkeys(names))
