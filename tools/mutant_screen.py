"""Screen one module's mutants against the fast tests of its area, one at a time.

``make mutate`` runs every mutant mutmut makes against every test that reaches it, state
machines to the end: tens of hours on 2 cores. This screen is the module-by-module loop
docs/reliability.md records: each mutant ``mutmut run`` left in ``mutants/`` (its ``.meta``
file names them; ``mutmut show NAME`` gives its one-line diff) is applied to a copy of the
module in a git worktree of HEAD, the tests given run there with the pure-Python twins and
``-x``, and the verdict (killed, survived, killed by the timeout, or not placed: a mutant
of several lines, or whose line is not once in its function, or no longer in the source) is
written to a JSON file as it comes, so a stopped screen goes on where it stopped.

    python -m ackstore.tools.mutant_screen ackstore/cursor/moves.py \\
        --tests tests/test_pulsar_seek.py tests/test_revisions.py --out moves.json

The checkout is never changed (the worktree is removed at the end); one mutant takes a few
seconds when killed and the whole selection when it survives. ``--sample N --seed S``
screens N of them drawn at random (a module of a thousand mutants in an hour or so): the
share that survives in the sample estimates the module's.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["apply_mutant", "main", "matching", "sample"]

_NAME = re.compile(r"\.x(?:ǁ(?P<cls>\w+)ǁ|_)(?P<fn>\w+?)__mutmut_\d+$")


def _function_lines(source: str, cls: str | None, fn: str) -> tuple[int, int] | None:
    """First and last line (1-based) of function ``fn`` (a method of ``cls`` when given)."""
    for node in ast.walk(ast.parse(source)):
        body = node.body if isinstance(node, ast.ClassDef) and node.name == cls else None
        if cls is None and isinstance(node, ast.Module):
            body = node.body
        for sub in body or ():
            if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and sub.name == fn:
                return sub.lineno, sub.end_lineno or sub.lineno
    return None


def apply_mutant(source: str, name: str, diff: str) -> str | None:
    """``source`` with mutant ``name``'s one-line change (``diff``, as ``mutmut show``
    prints it, indented relative to its function) made in its function; None when it
    cannot be placed: several lines changed, the function gone, or the line not exactly
    once in it."""
    minus = [line[1:] for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    plus = [line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    found = _NAME.search(name)
    if len(minus) != 1 or len(plus) != 1 or found is None:
        return None
    span = _function_lines(source, found.group("cls"), found.group("fn"))
    if span is None:
        return None
    lines = source.splitlines(keepends=True)
    hits = [i for i in range(span[0] - 1, span[1]) if lines[i].strip() == minus[0].strip()]
    if len(hits) != 1:
        return None
    i = hits[0]
    shift = (len(lines[i]) - len(lines[i].lstrip())) - (len(minus[0]) - len(minus[0].lstrip()))
    indent = len(plus[0]) - len(plus[0].lstrip()) + shift
    return "".join([*lines[:i], " " * indent + plus[0].strip() + "\n", *lines[i + 1 :]])


def sample(names: list[str], n: int, seed: int) -> list[str]:
    """``n`` of ``names`` drawn at random with ``seed`` (the same ones on every machine), in
    their order; all of them when ``n`` is 0 or at least their number."""
    if not 0 < n < len(names):
        return list(names)
    chosen = set(random.Random(seed).sample(range(len(names)), n))
    return [name for i, name in enumerate(names) if i in chosen]


def matching(names: list[str], only: list[str]) -> list[str]:
    """The ``names`` that hold one of ``only`` (all of them when it is empty); a pattern that
    ends in a digit ends a number there (``mutmut_5`` is not ``mutmut_50``)."""
    if not only:
        return list(names)
    found = [re.compile(re.escape(o) + (r"(?!\d)" if o[-1:].isdigit() else "")) for o in only]
    return [n for n in names if any(f.search(n) for f in found)]


def _mutants(module: str) -> list[str]:
    meta = Path("mutants") / f"{module}.meta"
    if not meta.is_file():
        raise SystemExit(f"no mutants of {module} in mutants/ ({meta} is missing): run `make mutate` first")
    return list(json.loads(meta.read_text())["exit_code_by_key"])


def _run_tests(args: argparse.Namespace, worktree: Path, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
         *([] if args.slow else ["-m", "not slow"]), *args.tests],
        cwd=worktree, env=env, capture_output=True, timeout=args.timeout, check=False,
    )  # fmt: skip


def require_clean(args: argparse.Namespace, worktree: Path, env: dict[str, str]) -> None:
    """Exit with a message when the tests fail in ``worktree`` without a mutant: a test that
    fails anyway (a file HEAD does not hold yet) would call every mutant killed."""
    clean = _run_tests(args, worktree, env)
    if clean.returncode != 0:
        last = (clean.stdout.decode(errors="replace").strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(
            f"the tests fail on HEAD without a mutant ({last}): the screen runs HEAD's tests, commit them first"
        )


def _screen(args: argparse.Namespace, worktree: Path, results: dict[str, dict[str, object]]) -> None:
    target = worktree / args.module
    original = target.read_text()
    names = matching(_mutants(args.module), args.only)
    names = sample(names, args.sample, args.seed)
    env = {**os.environ, "ACKSTORE_PURE_PYTHON": "1"}
    mutmut = Path(sys.executable).with_name("mutmut")
    if not mutmut.is_file():
        raise SystemExit(f"mutmut is not installed beside {sys.executable}: `make mutate` installs it")
    todo = [n for n in names if n not in results]
    print(f"{len(todo)} of {len(names)} mutants of {args.module} to run", flush=True)
    if todo:
        require_clean(args, worktree, env)
    for n, name in enumerate(todo, 1):
        diff = subprocess.run([str(mutmut), "show", name], capture_output=True, text=True, check=False).stdout
        mutated = apply_mutant(original, name, diff)
        started = time.monotonic()
        if mutated is None:
            verdict = "not placed"
        else:
            target.write_text(mutated)
            try:
                verdict = "survived" if _run_tests(args, worktree, env).returncode == 0 else "killed"
            except subprocess.TimeoutExpired:
                verdict = "killed by the timeout"
            finally:
                target.write_text(original)
        results[name] = {"verdict": verdict, "seconds": round(time.monotonic() - started, 1), "diff": diff}
        args.out.write_text(json.dumps(results, indent=1, ensure_ascii=False))
        print(f"[{n}/{len(todo)}] {verdict}: {name}", flush=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ackstore.tools.mutant_screen",
        description="Run each mutant mutmut made of MODULE against TESTS (pure-Python twins, -x), in a worktree.",
    )
    parser.add_argument("module", help="the module's path, e.g. ackstore/cursor/moves.py")
    parser.add_argument("--tests", nargs="+", required=True, help="test files of its area")
    parser.add_argument(
        "--out", type=Path, required=True, help="the JSON file of verdicts (read first: a screen goes on)"
    )
    parser.add_argument(
        "--slow", action="store_true", help="run the tests marked slow too (subprocesses, campaigns; default: left out)"
    )
    parser.add_argument(
        "--only", nargs="*", default=[], help="only mutants whose names hold one of these (mutmut_5 is not mutmut_50)"
    )
    parser.add_argument(
        "--sample", type=int, default=0, help="screen this many of them, drawn with --seed (default: all)"
    )
    parser.add_argument("--seed", type=int, default=0, help="the draw's seed (default 0)")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds a mutant's tests may take (default 240)")
    args = parser.parse_args(argv)
    if args.sample < 0:
        parser.error(f"--sample {args.sample} is not a number of mutants: allowed 0 (all) or more")
    if not Path(args.module).is_file():
        parser.error(f"module {args.module!r} is not a file of this checkout")
    results = json.loads(args.out.read_text()) if args.out.is_file() else {}
    worktree = Path(tempfile.mkdtemp(prefix="ackstore-screen-")) / "tree"
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(worktree), "HEAD"], check=True)
    try:
        for built in Path("ackstore").glob("_native*.so"):  # the tests import the package whole
            (worktree / "ackstore" / built.name).write_bytes(built.read_bytes())
        _screen(args, worktree, results)
    except KeyboardInterrupt:
        print(f"stopped; the verdicts so far are in {args.out}", file=sys.stderr)
        return 1
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], check=False)
    verdicts = [str(v["verdict"]) for v in results.values()]
    print(", ".join(f"{verdicts.count(v)} {v}" for v in sorted(set(verdicts))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
