"""Build the API reference from the docstrings: ``python -m ackstore.tools.apidoc OUT``.

Every module of the ``ackstore`` package (the compiled ``_native`` aside: its pure-Python
twin documents the same functions) goes through pdoc, offline, with every warning an
error: a docstring or annotation pdoc cannot read fails the build.
"""

from __future__ import annotations

import pkgutil
import sys
import warnings
from pathlib import Path

__all__ = ["INTERNAL", "INTERNAL_NOTE", "PUBLIC", "modules", "build", "main"]

INTERNAL = (
    "ackstore.compact",
    "ackstore.cursor.chain",
    "ackstore.cursor.core",
    "ackstore.cursor.deliveries",
    "ackstore.cursor.figures",
    "ackstore.cursor.lane",
    "ackstore.cursor.moves",
    "ackstore.cursor.pages",
    "ackstore.cursor.plan",
    "ackstore.cursor.read_side",
    "ackstore.cursor.state",
    "ackstore.cursor.store_side",
    "ackstore.cursor.validate",
    "ackstore.directory",
    "ackstore.fields",
    "ackstore.flush",
    "ackstore.history",
    "ackstore.gcpause",
    "ackstore.ledger_acks",
    "ackstore.ledger_cache",
    "ackstore.life",
    "ackstore.recovery",
    "ackstore.storage",
    "ackstore.store_cursors",
    "ackstore.tools",
)
"""the modules (and packages, with every module in them but those of :data:`PUBLIC`) that
hold what ackstore's own parts call on each other: their pages say so first"""
PUBLIC = ("ackstore.tools.spark_jobs",)
"""modules of an :data:`INTERNAL` package that are API all the same (the Spark job's)"""
INTERNAL_NOTE = (
    "**Engine internals**: what ackstore's own parts call on each other, documented for its "
    "maintainers; not API: names here change without notice.\n\n"
)
"""what an internal module's page starts with"""


def internal(name: str) -> bool:
    """Whether module ``name`` is one of :data:`INTERNAL` (or in a package that is)."""
    if name in PUBLIC:
        return False
    return any(name == m or name.startswith(m + ".") for m in INTERNAL)


def modules() -> list[str]:
    """Every module name of the installed ``ackstore`` package, sorted."""
    import importlib

    names = {"ackstore"}
    # ackstore.recovery and ackstore.tools live in folders of their own (the project's
    # top-level recovery/ and tools/): walk each package from where it was imported
    for package in ("ackstore", "ackstore.recovery", "ackstore.tools"):
        names.add(package)
        path = importlib.import_module(package).__path__
        for info in pkgutil.walk_packages(path, package + "."):
            if not info.name.rsplit(".", 1)[-1].startswith("_"):
                names.add(info.name)
    return sorted(names)


def resolve_names(names: list[str]) -> None:
    """Make the modules ``names`` readable by pdoc (in this process only): a package's public
    names it imports when first used are imported now, and a NamedTuple's generated
    constructor, which holds its field annotations as strings to be resolved in a namespace
    of its own where the module's imports are not, is handed the types its class resolves."""
    import importlib
    import typing

    for name in names:
        module = importlib.import_module(name)
        for public in getattr(module, "__all__", ()):
            getattr(module, public)
    for name in names:
        module = importlib.import_module(name)
        for value in vars(module).values():
            named_tuple = isinstance(value, type) and issubclass(value, tuple) and hasattr(value, "_fields")
            if named_tuple and value.__module__ == name:
                value.__new__.__annotations__ = typing.get_type_hints(value)


def build(out: Path) -> int:
    """Write the reference into ``out``; how many modules it documents."""
    import importlib

    import pdoc

    names = modules()
    resolve_names(names)
    for name in names:  # in this process only: the page says it first
        module = importlib.import_module(name)
        if internal(name) and not (module.__doc__ or "").startswith(INTERNAL_NOTE):
            module.__doc__ = INTERNAL_NOTE + (module.__doc__ or "")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # a package's pages already list the submodules this names again: not a docs problem
        warnings.filterwarnings("ignore", message="The module specification .* has already been added")
        pdoc.pdoc(*names, output_directory=out)
    return len(names)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m ackstore.tools.apidoc OUT_DIR", file=sys.stderr)
        return 2
    n = build(Path(argv[0]))
    print(f"API reference of {n} modules in {argv[0]}/index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
