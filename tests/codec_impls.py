"""The decoder implementations a test runs on: the pure-Python twins always, the compiled
module where it was built (``make test`` builds it; CI must have it: see test_codecs)."""

from __future__ import annotations

from types import ModuleType

from ackstore.storage import codecs, pure_codecs

__all__ = ["IMPLEMENTATIONS"]

IMPLEMENTATIONS: list[ModuleType] = [pure_codecs] + ([codecs.native] if codecs.native is not None else [])
