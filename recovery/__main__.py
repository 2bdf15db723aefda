"""``python -m ackstore.recovery``: the same tool as the ``ackstore`` console script."""

from __future__ import annotations

import sys

try:
    from .cli import entry
except KeyboardInterrupt:  # a Ctrl-C while the tool imports: one line, as at any later point
    sys.stderr.write("ackstore: aborted\n")
    raise SystemExit(1) from None

entry()
