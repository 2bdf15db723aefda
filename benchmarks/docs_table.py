"""Write a generated table into a Markdown file, between two marker comments.

``docs/benchmarks.md`` holds each generated table between ``<!-- begin NAME -->`` and
``<!-- end NAME -->``; the commands that measure (``make bench-docs``) replace what is
between them and leave the prose around it alone, with the date and the machine above the
table.
"""

from __future__ import annotations

import datetime
import os
import platform
import re
from pathlib import Path

__all__ = ["machine_line", "replace_block"]


def machine_line() -> str:
    """When and where: the date, CPUs, OS, Python, and which decoders were in use."""
    from ackstore.storage import codecs

    return (
        f"Measured {datetime.date.today().isoformat()} on {os.cpu_count()} CPUs, {platform.system()} "
        f"{platform.machine()}, Python {platform.python_version()}, decoders: {codecs.IMPLEMENTATION}."
    )


def replace_block(path: Path, name: str, lines: list[str]) -> None:
    """Replace the block ``name`` of ``path`` with the machine line and ``lines``.
    ValueError when the file has no such block (nothing is written)."""
    text = path.read_text()
    begin, end = f"<!-- begin {name} -->", f"<!-- end {name} -->"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise ValueError(f"{path} has no block {begin} ... {end}")
    body = "\n".join([begin, "", machine_line(), "", *lines, "", end])
    path.write_text(pattern.sub(lambda _: body, text, count=1))
