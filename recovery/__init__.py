"""The ackstore recovery tool: inspect, check/fix, recover, dump/restore, compact, copy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cli import main

__all__ = ["main"]


def __getattr__(name: str) -> Any:
    """``main`` is imported when first used: ``python -m ackstore.recovery`` imports this
    package before its ``__main__``, which imports the tool where a Ctrl-C is one line."""
    if name == "main":
        from .cli import main

        globals()["main"] = main
        return main
    raise AttributeError(f"module 'ackstore.recovery' has no attribute {name!r}")
