"""What this process handed the kernel to write: the write(2) bytes a flush costs, beside
the logical bytes (keys and values) it writes (LMDB writes whole pages)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["wchar"]


def wchar() -> int:
    """Bytes this process handed to write(2) and its kind so far (Linux ``/proc/self/io``;
    0 elsewhere)."""
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("wchar:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0
