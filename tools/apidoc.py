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

__all__ = ["modules", "build", "main"]


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


def _resolve_named_tuples(names: list[str]) -> None:
    """A NamedTuple's generated constructor holds its field annotations as strings to be
    resolved in a namespace of its own, where the module's imports are not: hand it the
    types its class resolves (in this process only)."""
    import importlib
    import typing

    for name in names:
        module = importlib.import_module(name)
        for value in vars(module).values():
            named_tuple = isinstance(value, type) and issubclass(value, tuple) and hasattr(value, "_fields")
            if named_tuple and value.__module__ == name:
                value.__new__.__annotations__ = typing.get_type_hints(value)


def build(out: Path) -> int:
    """Write the reference into ``out``; how many modules it documents."""
    import pdoc

    names = modules()
    _resolve_named_tuples(names)
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
