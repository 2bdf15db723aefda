"""``python -m ackstore.recovery``: the same tool as the ``ackstore`` console script."""

from __future__ import annotations

from .cli import entry

entry()
