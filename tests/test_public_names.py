"""The public surface, listed: the names ``ackstore`` exports and the public attributes of
the classes a user holds. A change to the surface (a name added, renamed or gone) makes
this test fail with the difference, to be reviewed and then written into
``tests/public_names.txt`` (``python -m tests.test_public_names`` prints the new list)."""

from __future__ import annotations

import sys
from pathlib import Path

LISTED = Path(__file__).with_name("public_names.txt")


def public_names() -> list[str]:
    import ackstore

    names = [f"ackstore.{name}" for name in sorted(ackstore.__all__)]
    for cls in (ackstore.AckStore, ackstore.Topic, ackstore.Cursor, ackstore.Dispatcher):
        names += [f"{cls.__name__}.{a}" for a in sorted(dir(cls)) if not a.startswith("_") and not _private(cls, a)]
    return names


def _private(cls: type, name: str) -> bool:
    """What the engine's parts call on each other: marked ``@private`` in its docstring, so
    the API reference leaves it out (a method's or property's, or an attribute's docstring
    after its annotation)."""
    import ast
    import inspect
    import itertools

    member = inspect.getattr_static(cls, name)
    doc = inspect.getdoc(member.fget if isinstance(member, property) else member) or ""
    if "@private" in doc and doc is not inspect.getdoc(type(member)):
        return True
    for klass in cls.__mro__:  # an annotated attribute: the string right after it
        try:
            tree = ast.parse(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body  # type: ignore[attr-defined]
        for a, b in itertools.pairwise(body):
            if (
                isinstance(a, ast.AnnAssign)
                and isinstance(a.target, ast.Name)
                and a.target.id == name
                and isinstance(b, ast.Expr)
                and isinstance(b.value, ast.Constant)
                and "@private" in str(b.value.value)
            ):
                return True
    return False


def test_the_public_names_are_the_listed_ones() -> None:
    listed = LISTED.read_text().split()
    now = public_names()
    added, gone = sorted(set(now) - set(listed)), sorted(set(listed) - set(now))
    assert not added and not gone, (
        f"the public surface changed: added {added}, gone {gone}; review, then update {LISTED.name}"
    )


#: what the store and its group flush call on a cursor or a store: the engine's own calls,
#: never names of the objects a user holds
ENGINE_CALLS = (
    "prepare_flush", "commit_flush", "abort_flush", "planner", "pending", "listed", "release",
    "check_alive", "load_cursor", "recover_log", "unlist", "check_writable", "cursor_names", "delete_cursors",
    "flush_cursors", "load_cursors", "open_log", "persist_cursor_config", "restore_cursor", "history_state",
    "history_states", "history_target",
)  # fmt: skip


CORE_CALLS = (
    "take_small_form", "mark_deleted", "apply_config", "directory_changed", "check_close", "plan_rewrite",
    "adopt_rewrite", "adopt_restored", "rewrite_differs", "small",
)  # fmt: skip
"""what the store, its topics, the group flush and compaction call on a cursor's core"""


def test_the_engines_own_calls_are_not_on_the_public_objects() -> None:
    import ackstore
    from ackstore.cursor.core import CursorCore

    for cls in (ackstore.AckStore, ackstore.Cursor):  # not even underscored: they are on the engine's parts
        found = sorted(name for name in dir(cls) if name.lstrip("_") in ENGINE_CALLS)
        assert not found, (cls.__name__, found)
    public = {name for name in dir(ackstore.Cursor) if not name.startswith("_")}
    assert not set(CORE_CALLS) & public, sorted(set(CORE_CALLS) & public)
    assert set(CORE_CALLS) <= set(dir(CursorCore))  # the names above are the core's: a rename shows here


if __name__ == "__main__":  # python -m tests.test_public_names > tests/public_names.txt
    sys.stdout.write("\n".join(public_names()) + "\n")
