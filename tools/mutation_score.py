"""The score of a mutation run (``make mutate``): per module, the mutants mutmut made, how
many the tests caught, and the survivors by name (``mutmut show NAME`` prints one's diff).

Reads what ``mutmut run`` left in ``mutants/`` (its ``.meta`` files); ``--docs FILE`` also
writes the table between the markers ``<!-- mutation:start -->`` and ``<!-- mutation:end -->``
of FILE (docs/reliability.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

__all__ = ["main", "score"]

#: how mutmut's exit codes read: caught (the tests failed, timed out or crashed on the
#: mutant), survived (they passed), or not run
_CAUGHT = {1, 3, 24, -24, 152, 255, 36, -11, -9, 37}
_SURVIVED = {0, 5, 33}
_START, _END = "<!-- mutation:start -->", "<!-- mutation:end -->"


def score(root: Path = Path("mutants")) -> dict[str, Counter[str]]:
    """Per module (a dotted name): counts of ``caught``, ``survived``, ``unchecked``, and
    ``survivor:NAME`` for each surviving mutant."""
    out: dict[str, Counter[str]] = {}
    for meta in sorted(root.rglob("*.py.meta")):
        module = ".".join(meta.relative_to(root).with_suffix("").with_suffix("").parts)
        counts: Counter[str] = Counter()
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            if code in _CAUGHT:
                counts["caught"] += 1
            elif code in _SURVIVED:
                counts["survived"] += 1
                counts[f"survivor:{name}"] += 1
            else:
                counts["unchecked"] += 1
        out[module] = counts
    return out


def table(scores: dict[str, Counter[str]]) -> str:
    """The score as a Markdown table, a row per module and the total."""
    rows = ["| module | mutants | caught | survived | unchecked | survived of checked |", "|---|---|---|---|---|---|"]
    total: Counter[str] = Counter()
    for module, c in scores.items():
        total.update({k: v for k, v in c.items() if not k.startswith("survivor:")})
        rows.append(_row(module, c))
    rows.append(_row("**all**", total))
    return "\n".join(rows)


def _row(name: str, c: Counter[str]) -> str:
    checked = c["caught"] + c["survived"]
    share = f"{c['survived'] / checked:.1%}" if checked else "-"
    made = checked + c["unchecked"]
    return f"| {name} | {made:,} | {c['caught']:,} | {c['survived']:,} | {c['unchecked']:,} | {share} |"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ackstore.tools.mutation_score",
        description="Sum up the mutation run `make mutate` left in mutants/.",
    )
    parser.add_argument("--docs", metavar="FILE", type=Path, help="also write the table into FILE, between its markers")
    args = parser.parse_args(argv)
    scores = score()
    if not scores:
        print("no mutation run found in mutants/: run `make mutate` first", file=sys.stderr)
        return 1
    text = table(scores)
    if args.docs is not None:
        page = args.docs.read_text() if args.docs.is_file() else ""
        if _START not in page or _END not in page:
            print(f"{args.docs} has no {_START} ... {_END} markers to write the table between", file=sys.stderr)
            return 1
        head, rest = page.split(_START, 1)
        args.docs.write_text(f"{head}{_START}\n{text}\n{_END}{rest.split(_END, 1)[1]}")
    print(text)
    for c in scores.values():
        for key in sorted(k for k in c if k.startswith("survivor:")):
            print(f"survived: {key.removeprefix('survivor:')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
