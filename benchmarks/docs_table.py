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

__all__ = ["docs_option", "machine_line", "publish", "replace_block"]


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


def docs_option(argv: list[str]) -> tuple[Path | None, list[str]]:
    """A table command's ``--docs MARKDOWN`` option taken out of ``argv``: (the file or
    None, the other arguments)."""
    if "--docs" not in argv:
        return None, argv
    i = argv.index("--docs")
    return Path(argv[i + 1]), argv[:i] + argv[i + 2 :]


def publish(lines: list[str], docs: Path | None, name: str) -> None:
    """Print a table command's ``lines``, and write them into block ``name`` of ``docs``
    when one was given."""
    print("\n".join(lines))
    if docs is not None:
        replace_block(docs, name, lines)
