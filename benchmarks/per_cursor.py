"""What the benchmarks that print CPU time a cursor share: their topics (100 subscriptions
a topic, one ledger each), and their command line (``--runs`` runs of ``--cursors``
cursors, each figure's median and least, and how many cursors are in the small form at the
end)."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from typing import Any

from ackstore import AckStore

__all__ = ["PER_TOPIC", "main_of", "topics_of"]

PER_TOPIC = 100


def topics_of(store: AckStore, cursors: int, name: str) -> list[Any]:
    """Topics ``persistent://<name>/ns/t<i>`` enough for ``cursors`` subscriptions,
    :data:`PER_TOPIC` a topic, each with ledger 1."""
    topics = []
    for t in range(0, cursors, PER_TOPIC):
        topic = store.topic(f"persistent://{name}/ns/t{t // PER_TOPIC}")
        topic.add_ledger(1)
        topics.append(topic)
    return topics


def main_of(module: str, doc: str, run: Callable[[int], dict[str, float]], runs: int, argv: list[str] | None) -> int:
    """Parse ``argv`` for ``python -m benchmarks.<module>`` (its docstring ``doc``), call
    ``run(cursors)`` ``--runs`` times (default ``runs``) and print each figure it returns:
    seconds a cursor, or (a name beginning "in the small form") a count of cursors."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{module}", description=doc.split("\n")[0])
    parser.add_argument("--runs", type=int, default=runs, help=f"runs whose median is printed (default {runs})")
    parser.add_argument("--cursors", type=int, default=1000, help="subscriptions a run makes (default 1000)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.cursors < 1:
        parser.error(f"--runs {args.runs} and --cursors {args.cursors}: each at least 1")
    results = [run(args.cursors) for _ in range(args.runs)]
    for name in results[0]:
        values = [r[name] for r in results]
        if name.startswith("in the small form"):
            print(f"{name}: {int(min(values))} of {args.cursors}")
        else:
            print(f"{name}: median {statistics.median(values) * 1e6:.2f} us a cursor (least {min(values) * 1e6:.2f})")
    return 0
