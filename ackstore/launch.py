"""The console scripts' first step: importing the tool (LMDB, roaring bitmaps, click) takes a
moment, and a Ctrl-C in it must end the command with one line and exit 1, like a Ctrl-C at
any later point, not with a traceback. The ``ackstore`` package imports nothing of its own
until a name of it is used, so this module is all that runs before the guard."""

from __future__ import annotations

import sys

__all__ = ["ackstore", "ackstore_spark"]


def _aborted(prog: str) -> None:
    sys.stderr.write(f"{prog}: aborted\n")
    raise SystemExit(1)


def ackstore() -> None:
    """``ackstore``: :func:`ackstore.recovery.cli.entry` once it is imported."""
    try:
        from ackstore.recovery.cli import entry
    except KeyboardInterrupt:
        _aborted("ackstore")
    entry()


def ackstore_spark() -> None:
    """``ackstore-spark``: :func:`ackstore.tools.spark_cli.main` once it is imported."""
    try:
        from ackstore.tools.spark_cli import main
    except KeyboardInterrupt:
        _aborted("ackstore-spark")
    sys.exit(main())
