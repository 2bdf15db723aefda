"""The package's Python files import each other without a circle, type-only imports
included: each file can be read knowing only the files below it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ackstore"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _compiled(name: str) -> bool:
    folder = ROOT.joinpath(*name.split(".")[:-1])
    return any(folder.glob(name.rpartition(".")[2] + ".*.so")) or (folder / f"{name.rpartition('.')[2]}.c").exists()


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` (at ``path``) imports anywhere in its text: at
    the top, inside functions or under ``TYPE_CHECKING``. ``from . import x`` names module
    ``x`` where there is one, a compiled one is no file of the package, and anything else
    is a name of the package's ``__init__``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                target = f"{source}.{alias.name}"
                if target not in modules and _compiled(target):
                    continue  # a compiled module (``ackstore._native``): no Python file of it
                target = target if target in modules else source
                if target in modules and target != name:
                    out.add(target)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names if alias.name in modules and alias.name != name)
    return out


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    part = []
                    while True:
                        top = stack.pop()
                        on.discard(top)
                        part.append(top)
                        if top == node:
                            break
                    if len(part) > 1:
                        found.append(sorted(part))
    return found


def test_circles_are_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_module_of_the_package_imports_itself_round_a_circle() -> None:
    modules = _modules()
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    assert graph["ackstore.cursor.lane"] >= {"ackstore.cursor.chain", "ackstore.cursor.pages"}  # the reading works
    found = circles(graph)
    assert not found, "import circles (type-only imports count): " + "; ".join(" <-> ".join(c) for c in found)


LARGEST_CLASS = 450
"""the most lines a class of the package may take"""
LARGER_STILL: dict[str, int] = {}
"""classes over the bound today, each at most its lines here (shrink the number as one
shrinks; a class that grows fails)"""
FACADE = 350
"""the most lines the public cursor, a face over its core, may take"""


def test_no_class_outgrows_its_bound() -> None:
    sizes: dict[str, int] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                sizes[node.name] = max(sizes.get(node.name, 0), lines)
    over = {name: n for name, n in sizes.items() if n > LARGER_STILL.get(name, LARGEST_CLASS)}
    assert not over, f"classes over {LARGEST_CLASS} lines (or their listed size): {over}"
    assert sizes["Cursor"] <= FACADE, sizes["Cursor"]
