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
        names += [f"{cls.__name__}.{a}" for a in sorted(dir(cls)) if not a.startswith("_")]
    return names


def test_the_public_names_are_the_listed_ones() -> None:
    listed = LISTED.read_text().split()
    now = public_names()
    added, gone = sorted(set(now) - set(listed)), sorted(set(listed) - set(now))
    assert not added and not gone, (
        f"the public surface changed: added {added}, gone {gone}; review, then update {LISTED.name}"
    )


if __name__ == "__main__":  # python -m tests.test_public_names > tests/public_names.txt
    sys.stdout.write("\n".join(public_names()) + "\n")
