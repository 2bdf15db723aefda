"""The ackstore recovery tool: inspect, check/fix, recover, dump/restore, compact, copy."""

from __future__ import annotations

__all__ = ["main"]

from .cli import main
