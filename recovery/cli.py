"""``ackstore``: the recovery tool for ackstore stores. Run ``ackstore --help``.

One function per command; one exit path (:func:`main`): 0 success, 1 failure (including
``check`` findings), 2 usage. Errors print one line on stderr, never a traceback
(``ACKSTORE_DEBUG=1`` shows it). Every command takes ``--json``. Only ``check --fix``,
``compact``, ``restore``, ``salvage`` (a new store) and the deletes write, each through one
transaction (restore and salvage build the new store beside its target and rename it into
place).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import click

from ackstore import (
    AckStore,
    AckStoreError,
    CursorConfig,
    StoreLockedError,
    UnknownCursorError,
    UnknownTopicError,
    __version__,
    check,
)
from ackstore.cursor.validate import quoted
from ackstore.history import as_micros, iso
from ackstore.storage.codecs import IMPLEMENTATION
from ackstore.storage.fileio import LEFTOVERS, create_new_file, remove_leftovers, temporary
from ackstore.storage.records import FORMAT_VERSION

from .dump import dump_lines, restore, write_dump
from .exit_path import run

__all__ = ["cli", "main", "guarded", "entry"]

EXISTING = click.Path(exists=True, path_type=Path)


class UsageFailure(Exception):
    """A usage problem found after parsing (exit 2)."""


def _emit(as_json: bool, obj: Any, text: str) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=True, default=str) if as_json else text)


@contextmanager
def _progress(total: int | None, label: str, quiet: bool) -> Iterator[Any]:
    """A rich progress bar on stderr (``total`` None: a count without an end), or nothing
    when quiet or not on a terminal."""
    if quiet or not sys.stderr.isatty():
        yield lambda *a: None
        return
    from rich.progress import Progress

    with Progress(transient=True, console=None) as bar:
        task = bar.add_task(label, total=total)
        yield lambda *a: bar.advance(task)


def _split_cursor(store: AckStore, spec: str) -> tuple[str, str]:
    """``TOPIC/SUBSCRIPTION`` as the store holds it: the topic name may hold '/' (Pulsar's
    do) and so may the cursor's, so every split is tried; exactly one must name a cursor."""
    if "/" not in spec.strip("/"):
        raise UsageFailure(f"--cursor {quoted(spec)} must be TOPIC/SUBSCRIPTION, e.g. persistent://t/ns/orders/sub-a")
    topics = set(store.topics())
    found = []
    for i, ch in enumerate(spec):
        if (
            ch == "/"
            and 0 < i < len(spec) - 1
            and spec[:i] in topics
            and spec[i + 1 :] in store.topic(spec[:i]).cursors()
        ):
            found.append((spec[:i], spec[i + 1 :]))
    if len(found) == 1:
        return found[0]
    if found:
        raise UsageFailure(
            f"--cursor {quoted(spec)} names more than one cursor ({', '.join(f'{t!r} / {n!r}' for t, n in found)})"
        )
    raise UsageFailure(f"--cursor {quoted(spec)} names no cursor of the store; `ackstore cursors STORE` lists them")


def _writer(store: Path) -> AckStore:
    """``store`` opened for writing; when another process holds it, a failure that says what
    an operator can do (the library's advice names an argument, not a command)."""
    try:
        return AckStore.open(store, create=False)
    except StoreLockedError as exc:
        raise StoreLockedError(
            f"store {store} is held by a writer, pid {exc.holder} (ps -p {exc.holder} shows it): stop it, or wait "
            "until it closes the store, and run this again; the commands that only read (stat, cursors, check, "
            "dump, copy, history) work while it runs",
            exc.path,
            exc.holder,
        ) from None


def _open_cursor(store: AckStore, spec: str, config: CursorConfig | None = None):  # type: ignore[no-untyped-def]
    topic, name = _split_cursor(store, spec)
    try:
        return store.topic(topic).cursor(name, config)
    except (UnknownTopicError, UnknownCursorError) as exc:
        raise UsageFailure(f"{exc}; `ackstore cursors STORE` lists them") from None


_PLURALS = {"entry": "entries", "batch": "batches", "delivery": "deliveries"}
"""plural forms that are not the singular with an s"""


def _n(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless the count is one: "1 cursor", "2,000 ranges"."""
    return f"{count:,} {noun if count == 1 else _PLURALS.get(noun, noun + 's')}"


def _show(name: str) -> str:
    """A name for a line of text: control characters (a newline could forge a line) and
    backslashes escaped."""
    if name.isprintable() and "\\" not in name:
        return name
    return "".join(c if c.isprintable() and c != "\\" else c.encode("unicode_escape").decode() for c in name)


def _all_cursors(store: AckStore, topic: str | None = None) -> list[tuple[str, str]]:
    names = [topic] if topic else store.topics()
    out: list[tuple[str, str]] = []
    for t in names:
        try:
            out.extend((t, c) for c in store.topic(t).cursors())
        except UnknownTopicError as exc:
            raise UsageFailure(f"{exc}; `ackstore stat STORE` lists the topics") from None
    return out


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(
    __version__,
    prog_name="ackstore",
    message=f"%(prog)s %(version)s (store format {FORMAT_VERSION}, {IMPLEMENTATION} codecs)",
)
def cli() -> None:
    """Inspect, check, repair, salvage, dump, restore, compact, copy ackstore stores, list a
    cursor's history and rewind it to a flushed state, and delete cursors and topics.

    STORE is a store directory or a single-file snapshot made by `copy`. Every command
    takes --json for scripts, before its name or after it. Exit status: 0 ok, 1 failure or
    findings, 2 usage.
    """


@cli.command()
@click.argument("store", type=EXISTING)
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.option(
    "--prometheus",
    is_flag=True,
    help="print the metrics of ackstore.metrics in Prometheus' text format (for the node-exporter "
    "textfile collector or a cron job); needs the ackstore[metrics] extra",
)
@click.option("--max-cursors", type=click.IntRange(min=0), default=100, show_default=True, help="with --prometheus")
def stat(store: Path, as_json: bool, prometheus: bool, max_cursors: int) -> None:
    """Format, size and every cursor's positions, ranges, records and garbage."""
    if prometheus:
        if as_json:
            raise UsageFailure("--json and --prometheus exclude each other")
        click.echo(_prometheus_text(store, max_cursors), nl=False)
        return
    with AckStore.open(store, readonly=True) as s:
        files = [store] if store.is_file() else [p for p in store.iterdir() if p.name.endswith(".mdb")]
        out: dict[str, Any] = {
            "path": str(store),
            "format_version": s.format_version,
            "size_on_disk": sum(p.stat().st_size for p in files),
            "map_size": s.map_size,
            "topics": {},
        }
        oldest = s.stats().oldest_reader
        out["oldest_reader"] = (
            None if oldest is None else {"pid": oldest.pid, "txnid": oldest.txnid, "behind": oldest.behind}
        )
        pairs = _all_cursors(s)
        with _progress(len(pairs), "stat", as_json) as advance:
            for t in s.topics():
                topic = s.topic(t)
                confirmed = topic.last_confirmed if topic.directory.tracked else None
                out["topics"][t] = {
                    "ledgers": len(topic.ledgers()),
                    "last_confirmed": None if confirmed is None else str(confirmed),
                    "cursors": {},
                }
                for name in topic.cursors():
                    out["topics"][t]["cursors"][name] = _cursor_figures(
                        s, topic.cursor(name, CursorConfig(max_individual_ack_cache_bytes=0))
                    )
                    advance()
    lines = [
        f"{out['path']}: format {out['format_version']}, {out['size_on_disk']:,} B on disk, "
        f"map {out['map_size']:,} B, {_n(len(out['topics']), 'topic')}"
    ]
    if oldest is not None:
        lines.append(
            f"  oldest reader: pid {oldest.pid}, sees transaction {oldest.txnid}, {oldest.behind:,} transactions "
            "behind the newest (LMDB keeps every page it sees: the file grows while it holds them)"
        )
    for t, tv in out["topics"].items():
        bound = f", last confirmed {tv['last_confirmed']}" if tv["last_confirmed"] else ""
        lines.append(f"  {_show(t)}: {_n(tv['ledgers'], 'ledger')}{bound}, {_n(len(tv['cursors']), 'cursor')}")
        for name, c in tv["cursors"].items():
            lines.append(
                f"    {_show(name)}: mark-delete {c['mark_delete']}, {_n(c['ranges'], 'range')}, "
                f"{_n(c['ledgers'], 'ledger')}, {_n(c['records'], 'record')} ({c['record_bytes']:,} B, "
                f"garbage {c['garbage_bytes']:,} B), newest marker {c['newest_marker']}"
                + (", TRUNCATED" if c["truncated"] else "")
                + (
                    f", {c['redelivered_entries']:,} entries delivered more than once (most {c['max_delivery_count']})"
                    if c["redelivered_entries"]
                    else ""
                )
                + (f", {c['markers_skipped']} broken markers skipped" if c["markers_skipped"] else "")
                + (
                    f", history {c['history_seconds']:,} s: {_n(c['history_points'], 'state')} kept"
                    + (f" from {c['history_oldest']}" if c["history_points"] else "")
                    + f" ({c['history_bytes']:,} B)"
                    if c["history_seconds"]
                    else ""
                )
            )
    _emit(as_json, out, "\n".join(lines))


def _prometheus_text(store: Path, max_cursors: int) -> str:
    """Every cursor of an offline store opened read-only (budget 0), exported as metrics."""
    try:
        from prometheus_client import CollectorRegistry, generate_latest

        from ackstore.metrics import AckStoreCollector
    except ImportError:
        raise click.ClickException("--prometheus needs prometheus-client: pip install 'ackstore[metrics]'") from None
    with AckStore.open(store, readonly=True) as s:
        for t, name in _all_cursors(s):
            s.topic(t).cursor(name, CursorConfig(max_individual_ack_cache_bytes=0))
        registry = CollectorRegistry()
        registry.register(AckStoreCollector(s, max_cursors=max_cursors))
        return generate_latest(registry).decode()


def _cursor_figures(s: AckStore, cur) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    st, usage = cur.stats(), cur.log_usage()
    return {
        "mark_delete": str(st.mark_delete_position),
        "ranges": st.ack_range_count,
        "ledgers": st.ledgers_indexed,
        "records": usage.records,
        "record_bytes": usage.record_bytes,
        "garbage_bytes": usage.garbage_bytes,
        "history_bytes": usage.history_bytes,
        "newest_marker": st.recovery.marker_seq,
        "markers_skipped": st.recovery.markers_skipped,
        "truncated": st.truncated,
        **_delivery_figures(cur.delivery_counts()),
        **_history_figures(s, cur),
    }


def _history_figures(s: AckStore, cur) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """The cursor's history window (as persisted: stat opens cursors with a budget of its
    own), the states it keeps and the oldest one's time."""
    found = s.storage.read(lambda txn: s.storage.catalog.cursor(txn, cur.topic.topic_id, cur.name))
    window = 0 if found is None else found[1].history_seconds
    points = s.history.visible(cur.cursor_id, window, time.time()) if window else []
    return {
        "history_seconds": window,
        "history_points": len(points),
        "history_oldest": iso(points[0].micros) if points else None,
    }


def _delivery_figures(counts: dict[Any, int]) -> dict[str, int]:
    """Entries with a delivery count, those delivered more than once, and the highest count."""
    return {
        "delivered_entries": len(counts),
        "redelivered_entries": sum(1 for n in counts.values() if n > 1),
        "max_delivery_count": max(counts.values(), default=0),
    }


@cli.command()
@click.argument("store", type=EXISTING)
@click.option("--topic", help="only this topic's cursors")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def cursors(store: Path, topic: str | None, as_json: bool) -> None:
    """One line per cursor under a header: TOPIC/CURSOR, mark-delete, ranges, ledgers
    (tab-separated; --json for a program)."""
    rows = []
    with AckStore.open(store, readonly=True) as s:
        for t, name in _all_cursors(s, topic):
            st = s.topic(t).cursor(name, CursorConfig(max_individual_ack_cache_bytes=0)).stats()
            rows.append(
                {
                    "topic": t,
                    "cursor": name,
                    "mark_delete": str(st.mark_delete_position),
                    "ranges": st.ack_range_count,
                    "ledgers": st.ledgers_indexed,
                }
            )
    text = "\n".join(
        ["cursor\tmark-delete\tranges\tledgers"]
        + [
            f"{_show(str(r['topic']))}/{_show(str(r['cursor']))}\t{r['mark_delete']}\t{r['ranges']}\t{r['ledgers']}"
            for r in rows
        ]
    )
    _emit(as_json, rows, text if rows else "(no cursors)")


@cli.command("check")
@click.argument("store", type=EXISTING)
@click.option("--fix", is_flag=True, help="roll broken cursors back to their newest intact marker, drop bad records")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def check_cmd(store: Path, fix: bool, as_json: bool) -> int:
    """Check checksums, marker chains, references and invariants; exit 1 on findings.

    With --fix, every cursor with findings is rolled back to its newest intact marker,
    fitted to the ledger directory, and its log rewritten (one transaction); the store
    is then checked again and the exit status says whether it is clean.
    """
    checked = []  # check() opens (and walks) the store once; the bar counts cursors as they pass

    def progress(topic: str, cursor: str) -> None:
        checked.append(cursor)
        advance()

    with _progress(None, "check", as_json) as advance:
        if fix:  # a writer: the operator's words when another one holds the store
            try:
                _writer(store).close()
            except StoreLockedError:
                raise
            except AckStoreError:
                pass  # (a damaged file: check says what, as a finding)
        findings = check(store, fix=fix, progress=progress)
    total = len(checked)
    clean_after = check(store) == [] if fix else not findings
    rows = [asdict(f) for f in findings]
    text = "\n".join(_show(str(f)) for f in findings) or f"{store}: clean ({_n(total, 'cursor')})"
    lost = sum(f.lost for f in findings)
    if fix and findings:
        fixed = sum(f.fixed for f in findings)
        state = "clean" if clean_after else "STILL NOT CLEAN"
        text += f"\n{fixed} of {_n(len(findings), 'finding')} fixed; the store is {state}"
        if lost:
            text += (
                f", but the repair lost the acks of {lost} flush(es) (cursors rolled back past damaged markers): "
                "their messages will be redelivered"
            )
    _emit(as_json, {"findings": rows, "clean": clean_after, "flushes_lost": lost}, text)
    return 0 if clean_after and not lost else 1


@cli.command()
@click.argument("store", type=EXISTING)
@click.option(
    "--cursor",
    "spec",
    required=True,
    help="TOPIC/SUBSCRIPTION (names may hold '/': every split is tried, and exactly one must name a cursor)",
)
@click.option("--budget", type=click.IntRange(min=0), default=3 << 20, show_default=True, help="cache budget, bytes")
@click.option("--verify", type=click.Choice(["keys", "all", "loaded"]), default="keys", show_default=True)
@click.option(
    "--load",
    type=click.Choice(["lazy", "budget"]),
    default="lazy",
    show_default=True,
    help="when ledgers are decoded: at first use (the records the budget covers are checked at open), "
    "or at open up to the budget (AckStore.open(load=))",
)
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def recover(store: Path, spec: str, budget: int, verify: str, load: str, as_json: bool) -> None:
    """Open one cursor as a cursor process would (read-only), timed: what was loaded, skipped, held."""
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    with AckStore.open(store, readonly=True, verify=verify, load=load) as s:
        cur = _open_cursor(s, spec, CursorConfig(max_individual_ack_cache_bytes=budget))
        seconds = time.perf_counter() - t0
        st = cur.stats()
    rep = st.recovery
    out = {
        "cursor": spec,
        "seconds": seconds,
        "marker": rep.marker_seq,
        "markers_skipped": rep.markers_skipped,
        "skipped_reasons": list(rep.skipped_reasons),
        "records_loaded": rep.records_loaded,
        "bytes_read": rep.bytes_loaded,
        "ledgers_in_memory": st.ledgers_in_memory,
        "ledgers_swapped_out": st.ledgers_swapped_out,
        "cache_bytes": st.cache_bytes,
        "budget": budget,
        "load": load,
        "mark_delete": str(st.mark_delete_position),
        "ranges": st.ack_range_count,
        "peak_rss_growth_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before,
    }
    text = (
        f"{spec}: recovered from marker {rep.marker_seq} in {seconds * 1000:.1f} ms\n"
        f"  mark-delete {out['mark_delete']}, {_n(out['ranges'], 'range')}\n"
        f"  decoded {rep.records_loaded} ledger records ({rep.bytes_loaded:,} B), {st.ledgers_swapped_out} left on "
        + ("disk (those within the budget checked), decoded when first used" if load == "lazy" else "disk")
        + f"; {st.cache_bytes:,} B held of a {budget:,} B budget"
    )
    if rep.skipped_reasons:
        text += f"\n  skipped {_n(rep.markers_skipped, 'marker')}:\n" + "\n".join(
            f"    {r}" for r in rep.skipped_reasons
        )
    _emit(as_json, out, text)


@cli.command()
@click.argument("store", type=EXISTING)
@click.option("--cursor", "specs", multiple=True, help="TOPIC/SUBSCRIPTION; repeat for several (default: all)")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "csv"]),
    default="json",
    show_default=True,
    help="json: JSON Lines that `restore` reads; csv: ranges and batches for analysis",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="write here (default stdout)")
@click.option("--json", "as_json", is_flag=True, help="same as --format json")
@click.option(
    "--history",
    "with_history",
    is_flag=True,
    help="add every state a cursor's history keeps (JSON only; restore counts them, does not bring them back)",
)
def dump(store: Path, specs: tuple[str, ...], fmt: str, output: Path | None, as_json: bool, with_history: bool) -> None:
    """Stream the ack ranges and batch-index acks (with directory, config and positions)."""
    fmt = "json" if as_json else fmt
    if with_history and fmt != "json":
        raise click.UsageError("--history writes JSON Lines: it cannot be used with --format csv")
    with AckStore.open(store, readonly=True) as s:
        wanted = None
        if specs:
            wanted = [_split_cursor(s, spec) for spec in specs]
            for spec in specs:
                _open_cursor(s, spec)
        total = len(wanted) if wanted is not None else len(_all_cursors(s))
        skipped: list[list[str]] = []
        with _progress(total, "dump", output is None or as_json) as advance:
            objects = _noting_skips(dump_lines(s, wanted, advance, with_history), skipped)
            if output is None:
                write_dump(objects, sys.stdout, fmt)
            else:
                with temporary(output.with_name(output.name + ".partial")) as tmp:
                    try:
                        with os.fdopen(create_new_file(tmp), "w", encoding="utf-8") as f:
                            write_dump(objects, f, fmt)
                            f.flush()
                            os.fsync(f.fileno())
                    except BaseException:
                        tmp.unlink(missing_ok=True)  # a full disk or an error leaves no .partial behind
                        raise
                    os.replace(tmp, output)
        if skipped:
            names = ", ".join(f"{_show(t)}/{_show(c)}" for t, c in skipped[:5]) + (" ..." if len(skipped) > 5 else "")
            click.echo(f"dump: left out {len(skipped)} cursor(s) the writer deleted during the dump: {names}", err=True)


def _noting_skips(objects: Iterator[dict[str, Any]], skipped: list[list[str]]) -> Iterator[dict[str, Any]]:
    """``objects`` as they are; the end line's ``skipped`` cursors are added to ``skipped``."""
    for obj in objects:
        if obj["type"] == "end":
            skipped.extend(obj.get("skipped", ()))
        yield obj


@cli.command("restore")
@click.argument("store", type=click.Path(path_type=Path))
@click.argument("dump_file", metavar="DUMP", type=click.File("r", encoding="utf-8"))
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def restore_cmd(store: Path, dump_file: Any, as_json: bool) -> None:
    """Build a new store at STORE from a JSON Lines DUMP (`-` for stdin); all or nothing."""
    counts = restore(dump_file, store)
    kept = counts.pop("history")
    singular = {"topics": "topic", "cursors": "cursor", "ranges": "range", "batches": "batch", "deliveries": "delivery"}
    text = f"restored {store}: " + ", ".join(_n(v, singular.get(k, k)) for k, v in counts.items())
    if kept:
        text += f"\n  history states not brought back: {kept:,} (a restored cursor's history starts at the restore)"
    _emit(as_json, {**counts, "history_not_restored": kept}, text)


@cli.command()
@click.argument("store", type=EXISTING)
@click.option("--drop-history", is_flag=True, help="rewrite cursors that keep history too, dropping it")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def compact(store: Path, drop_history: bool, as_json: bool) -> None:
    """Rewrite every cursor's log as live records + one full marker (refuses while a writer runs).

    A cursor that keeps history (CursorConfig.history_seconds) is left as it is, its
    window kept; --drop-history rewrites it too and drops its history (it starts again at
    its next flush). So is a cursor holding more ranges than its
    max_unacked_ranges_to_persist (a cap lowered since its last flush): a rewrite writes
    what a flush would, the lowest ranges up to the cap, and its next flush does that.
    """
    if store.is_file():
        raise UsageFailure(f"{store} is a single-file snapshot; compact works on a store directory")
    with _writer(store) as s:
        stats = s.compact(drop_history=drop_history)
        rewritten = {(st.topic, st.cursor) for st in stats}
        left = {f"{c.topic.name}/{c.name}": c for c in s.open_cursors() if (c.topic.name, c.name) not in rewritten}
        kept = [name for name, c in left.items() if not drop_history and c.config.history_seconds]
        capped = [name for name in left if name not in kept]  # (what else compaction leaves: over its cap)
    rows = [asdict(st) for st in stats]
    before, after = sum(r["bytes_before"] for r in rows), sum(r["bytes_after"] for r in rows)
    text = "\n".join(
        f"{r['topic']}/{r['cursor']}: {r['records_before']:,} -> {_n(r['records_after'], 'record')}, "
        f"{r['bytes_before']:,} -> {r['bytes_after']:,} B"
        for r in rows
    )
    text += (
        f"\ntotal: {before:,} -> {after:,} B of records; the file keeps its size (LMDB reuses the freed pages): "
        "`ackstore copy STORE NEW.mdb` writes a smaller copy"
    )
    if kept:
        text += f"\nleft as they are, keeping their history (--drop-history rewrites them): {', '.join(kept)}"
    if capped:
        text += (
            "\nleft as their flushes wrote them, holding more ranges than their max_unacked_ranges_to_persist "
            f"(the next flush writes the lowest ranges up to it): {', '.join(capped)}"
        )
    if drop_history:
        text += "\nthe history of every cursor rewritten was dropped"
    summary = {"cursors": rows, "bytes_before": before, "bytes_after": after, "kept": kept, "over_cap": capped}
    _emit(as_json, summary, text.strip())


def _confirm(yes: bool, what: str) -> None:
    """Ask before a deletion (``--yes`` skips it); no answer (no terminal, end of input) is a no."""
    if yes:
        return
    if not click.confirm(f"{what}: this cannot be undone. Delete?", default=False, err=True):
        raise click.exceptions.Abort()


@cli.command("delete-cursor")
@click.argument("store", type=EXISTING)
@click.argument("topic")
@click.argument("name")
@click.option("--yes", is_flag=True, help="do not ask for confirmation")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def delete_cursor(store: Path, topic: str, name: str, yes: bool, as_json: bool) -> int:
    """Delete cursor NAME of TOPIC with its whole record log (Pulsar's unsubscribe).

    One transaction, durable when it returns; the store's pages are reused by later
    writes. Refuses while a writer runs. Exit 1 when there is no such cursor.
    """
    if store.is_file():
        raise UsageFailure(f"{store} is a single-file snapshot; delete-cursor works on a store directory")
    with _writer(store) as s:
        try:
            t = s.topic(topic) if topic in s.topics() else None
        except UnknownTopicError:
            t = None
        if t is None or name not in t.cursors():
            _emit(as_json, {"deleted": False}, f"{store}: topic {topic!r} has no cursor {name!r}; nothing deleted")
            return 1
        _confirm(yes, f"cursor {name!r} of topic {topic!r} in {store}")
        t.delete_cursor(name)
    _emit(as_json, {"deleted": True}, f"deleted cursor {name!r} of topic {topic!r}")
    return 0


@cli.command("delete-topic")
@click.argument("store", type=EXISTING)
@click.argument("topic")
@click.option("--yes", is_flag=True, help="do not ask for confirmation")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def delete_topic(store: Path, topic: str, yes: bool, as_json: bool) -> int:
    """Delete TOPIC: every cursor of it with its record log, and its ledger directory.

    One transaction, durable when it returns. Refuses while a writer runs. Exit 1 when
    there is no such topic.
    """
    if store.is_file():
        raise UsageFailure(f"{store} is a single-file snapshot; delete-topic works on a store directory")
    with _writer(store) as s:
        if topic not in s.topics():
            _emit(as_json, {"deleted": False}, f"{store}: no topic {topic!r}; nothing deleted")
            return 1
        n = len(s.topic(topic).cursors())
        _confirm(yes, f"topic {topic!r} and its {_n(n, 'cursor')} in {store}")
        s.delete_topic(topic)
    _emit(as_json, {"deleted": True, "cursors": n}, f"deleted topic {topic!r} and its {_n(n, 'cursor')}")
    return 0


def _when(text: str) -> float | datetime:
    """``--to``: an ISO-8601 time (a naive one is local time; ``Z`` is UTC) or a Unix time
    in seconds; a usage error names anything else."""
    when: float | datetime
    try:
        when = float(text)
    except ValueError:
        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise UsageFailure(
                f"--to {quoted(text)} is not a time: allowed ISO-8601 (2026-11-26T13:59:00Z) or a Unix time in seconds"
            ) from None
    try:
        as_micros(when)
    except AckStoreError as exc:
        raise UsageFailure(f"--to {quoted(text)}: {exc}") from None
    return when


def _iso(t: float) -> str:
    """A HistoryPoint's time (Unix seconds) as ISO-8601 UTC."""
    return iso(round(t * 1e6))


def _acked(snapshot: Any) -> int:
    """Entries acked above the mark-delete position, in ranges."""
    return sum(last - first + 1 for _, runs in snapshot.ranges for first, last in runs)


@cli.command("history")
@click.argument("store", type=EXISTING)
@click.option("--cursor", "spec", required=True, metavar="TOPIC/SUB", help="the cursor, e.g. persistent://t/ns/o/sub")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def history_cmd(store: Path, spec: str, as_json: bool) -> None:
    """List the flushed states of a cursor that `rewind` can put it back to, newest first.

    One line per flush within the cursor's window (CursorConfig.history_seconds): when it
    ran (UTC), the mark-delete position and the ranges of acks it held. Works while a
    writer runs (read-only).
    """
    with AckStore.open(store, readonly=True) as s:
        cur = _open_cursor(s, spec)
        window = cur.config.history_seconds
        points = cur.history()
    rows = [{"time": p.time, "iso": _iso(p.time), "mark_delete": str(p.mark_delete_position),
             "ranges": p.ack_range_count} for p in points]  # fmt: skip
    if not window:
        text = f"{spec}: keeps no history (CursorConfig.history_seconds is 0)"
    else:
        text = "\n".join(
            [f"{spec}: {_n(len(rows), 'flushed state')} kept (window {window:,} s)"]
            + [f"  {r['iso']}  mark-delete {r['mark_delete']}, {_n(r['ranges'], 'range')}" for r in rows]
        )
    _emit(as_json, {"cursor": spec, "history_seconds": window, "points": rows}, text)


@cli.command("rewind")
@click.argument("store", type=EXISTING)
@click.option("--cursor", "spec", required=True, metavar="TOPIC/SUB", help="the cursor, e.g. persistent://t/ns/o/sub")
@click.option("--to", "to", required=True, metavar="TIME", help="ISO-8601 (2026-11-26T13:59:00Z) or Unix seconds")
@click.option("--yes", is_flag=True, help="do not ask for confirmation")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def rewind_cmd(store: Path, spec: str, to: str, yes: bool, as_json: bool) -> None:
    """Put one cursor back exactly as a flush left it: its acks, mark-delete position,
    partial batches and delivery counts become those of the newest kept state flushed at
    or before TIME (`ackstore history` lists them); its properties stay.

    Says what changes and asks first (--yes does not). Durable when it returns, and
    itself a new point of the history, so it can be rewound again. Refuses while a
    writer holds the store (stop it, or call Cursor.restore_as_of in it).
    """
    when = _when(to)
    if store.is_file():
        raise UsageFailure(f"{store} is a single-file snapshot; rewind works on a store directory")
    s = _writer(store)
    try:
        cur = _open_cursor(s, spec)
        before = cur.snapshot()
        point = cur.restore_as_of(when)  # checked: a typed error before anything changes
        after = cur.snapshot()
        change = (
            f"{spec} to its state of {_iso(point.time)}: mark-delete {before.mark_delete_position} -> "
            f"{after.mark_delete_position}, {_n(before.ack_range_count, 'range')} -> "
            f"{_n(after.ack_range_count, 'range')}, acked above it {_acked(before):,} -> {_acked(after):,} entries"
        )
        if not yes and not click.confirm(f"rewind {change}?", default=False, err=True):
            s.close(discard=True)  # the restore is in memory only: dropped
            raise click.exceptions.Abort()
        s.flush()
    finally:
        s.close(discard=True)  # flushed above, or nothing to keep
    row = {
        "cursor": spec,
        "to": to,
        "restored": _iso(point.time),
        "mark_delete": str(after.mark_delete_position),
    }
    _emit(as_json, row | {"ranges": after.ack_range_count}, f"rewound {change}")


@cli.command("salvage")
@click.argument("damaged", type=EXISTING)
@click.argument("new", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def salvage_cmd(damaged: Path, new: Path, as_json: bool) -> int:
    """Rebuild a clean store NEW from what a damaged store or snapshot still holds.

    Reads DAMAGED page by page (never its B-tree), keeps every record whose checksum
    holds, and gives each cursor the newest flushed state whose marker chain and records
    are all intact: never an ack that was not flushed, never a mix of two flushes. Says per
    cursor which marker it came from and what was lost. A cursor's history (the states
    CursorConfig.history_seconds keeps) is not carried: the report says how many kept
    states each cursor loses. DAMAGED is only read; exit 1 when some cursor did not get
    its newest marker back.
    """
    from ackstore.salvage import salvage

    with _progress(100, "salvage", as_json) as advance:
        report = salvage(damaged, new, progress=lambda done, total: advance())
    rows = [asdict(c) | {"complete": c.complete} for c in report.cursors]
    lines = [
        f"salvaged {damaged} -> {new}: {report.pages:,} pages read, {report.leaf_pages:,} leaf pages, "
        f"{_n(report.records, 'record')}, {_n(report.topics, 'topic')}, {_n(len(report.cursors), 'cursor')}"
    ]
    for c in report.cursors:
        if c.marker_seq < 0:
            how = f"LOST: no intact marker among {c.records_found} records; the cursor starts empty"
        elif c.complete:
            how = f"complete: newest marker {c.marker_seq}"
        elif c.marker_seq >= c.newest_marker_seen and c.doubts:
            how = f"from marker {c.marker_seq}, not proven the newest ({'; '.join(c.doubts)})"
        else:
            how = (
                f"from marker {c.marker_seq}, but records up to {c.newest_marker_seen} were found: "
                "the acks of the flushes after it are lost"
            )
        lines.append(
            f"  {_show(c.topic)}/{_show(c.cursor)}: {how}; mark-delete {c.mark_delete}, {_n(c.ranges, 'range')}"
        )
        lines.extend(f"    skipped: {r}" for r in c.reasons[:5])
        lines.extend(f"    not applied: {p}" for p in c.problems)
        if c.history_lost:
            lines.append(
                f"    history not carried: {_n(c.history_lost, 'kept state')} of its history cannot be restored "
                "from the new store (its history starts again at this state)"
                + (f"; {_n(c.history_damaged, 'point')} of them damaged in the file" if c.history_damaged else "")
            )
    for tid, placeholder in report.placeholder_topics.items():
        lines.append(f"  the entry of topic id {tid} was lost: its cursors are kept under the topic {placeholder!r}")
    for topic, ids in report.inferred_ledgers.items():
        lines.append(f"  {topic}: directory entries of ledgers {ids} were lost; added back from the cursors' states")
    for topic, counts in report.sealed_ledgers.items():
        lines.append(
            f"  {_show(topic)}: ledgers {sorted(counts)} were found open below its last ledger (their seal was lost); "
            "sealed one entry past what the cursors hold of each: "
            + ", ".join(f"{ledger} at {_n(n, 'entry')}" for ledger, n in sorted(counts.items()))
        )
    for topic, why in report.unbounded_topics.items():
        lines.append(f"  {topic}: its open ledger's last confirmed entry was not set again ({why})")
    if report.orphan_cursor_ids:
        lines.append(
            f"  cursor ids {report.orphan_cursor_ids} lost their catalog entry: each one's state is kept as "
            "cursor '_salvaged' of topic '_salvaged_cursor_<id>'"
        )
    _emit(
        as_json,
        {**{k: v for k, v in asdict(report).items() if k != "cursors"}, "cursors": rows},
        "\n".join(lines),
    )
    complete = all(c.complete for c in report.cursors) and not report.orphan_cursor_ids
    complete = complete and not report.placeholder_topics
    return 0 if complete else 1


@cli.command()
@click.argument("store", type=EXISTING)
@click.argument("dest", type=click.Path(path_type=Path))
@click.option("--compact/--no-compact", default=True, show_default=True, help="leave out free pages")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def copy(store: Path, dest: Path, compact: bool, as_json: bool) -> None:
    """Write a consistent single-file snapshot DEST (works while the writer runs)."""
    with AckStore.open(store, readonly=True) as s:
        size = s.copy(dest, compact=compact)
    _emit(as_json, {"dest": str(dest), "bytes": size}, f"wrote {dest}: {size:,} B")


def main(argv: list[str] | None = None) -> int:
    """Run the tool; the one exit path (:func:`ackstore.recovery.exit_path.run`). Returns the exit status."""
    return run(
        cli, _json_first(sys.argv[1:] if argv is None else argv), "ackstore", UsageFailure, (AckStoreError, OSError)
    )


def _json_first(argv: list[str]) -> list[str]:
    """``ackstore --json COMMAND ...`` as ``ackstore COMMAND --json ...``: every command
    takes ``--json``, before its name or after it."""
    args = list(argv)
    command = next((i for i, a in enumerate(args) if not a.startswith("-")), None)
    if command is None or "--json" not in args[:command]:
        return args
    args.remove("--json")
    return [*args[: command - 1], args[command - 1], "--json", *args[command:]]


def _reopen_closed_streams() -> None:
    """A standard stream the caller closed (``>&-``, ``<&-``) reads as empty and writes into
    /dev/null, instead of a traceback: the command still runs, and says what failed."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        if getattr(sys, name) is None:
            try:
                os.fstat(fd)
            except OSError:
                opened = os.open(os.devnull, os.O_RDONLY if mode == "r" else os.O_WRONLY)
                if opened != fd:
                    os.dup2(opened, fd)
                    os.close(opened)
            setattr(sys, name, open(fd, mode, closefd=False))  # noqa: SIM115 - lives as long as the process


def _die_with_parent(parent: int) -> None:
    """The child ends when the ``ackstore`` process that forked it does (Linux: the kernel
    sends SIGKILL; elsewhere nothing is done): killing the tool never leaves a worker behind
    that finishes the job unseen."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def guarded(argv: list[str] | None = None) -> int:
    """:func:`main` in a child process: a signal LMDB raises on a damaged file (SIGBUS,
    SIGSEGV, SIGABRT) ends the command with a one-line error and exit 1, not a crash.

    What the child's C code writes to the standard error (LMDB's ``Assertion ... failed``
    before an abort) comes to this process through a pipe, and is shown only when the
    command did not end on a signal (then the one line says what happened); Python's own
    output goes straight to the terminal. The temporary paths the child makes
    (``DEST.partial``, ``NEW.salvaging``, ``NEW.restoring``) are announced to this process,
    which removes any the child left, however it ended. After the first SIGTERM, SIGHUP
    or Ctrl-C the child ignores more of them, so its cleanup runs to its end (a signal sent
    to the process group reaches it twice: directly and from this process).

    ``ACKSTORE_NO_FORK=1`` runs :func:`main` in this process (for debuggers).
    """
    _reopen_closed_streams()
    if os.environ.get("ACKSTORE_NO_FORK") == "1" or not hasattr(os, "fork"):
        return main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    c_err, c_err_w = os.pipe()
    made, made_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run the command, leave through _exit (no second cleanup of the parent's state)
        code = 1
        try:
            os.close(c_err)
            os.close(made)
            _die_with_parent(parent)
            encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
            sys.stderr = open(os.dup(2), "w", buffering=1, encoding=encoding, errors="backslashreplace")  # noqa: SIM115
            os.dup2(c_err_w, 2)  # C code's stderr (LMDB's assertions) goes to the parent
            os.close(c_err_w)
            LEFTOVERS[:] = [made_w]
            for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):  # cleaned up after, once
                signal.signal(sig, _stop)
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except KeyboardInterrupt:
            click.echo("ackstore: aborted", err=True)
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except (BrokenPipeError, OSError):
                pass
            finally:
                os._exit(code)
    os.close(c_err_w)
    os.close(made_w)
    for sig in (signal.SIGTERM, signal.SIGHUP):  # the worker ends the command, and cleans up
        signal.signal(sig, partial(_forward, pid))
    # Ctrl-C reaches the worker too (one process group), which says so; here it is ignored
    # while the worker runs. (Raised here, it could land on a drain thread, not end the wait,
    # and come out once the worker had ended: a second "aborted".)
    interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        c_output = _Drain(c_err)
        announced = _Drain(made)
        status = _wait(pid)
        c_text, paths = c_output.result(), announced.result()
    finally:
        signal.signal(signal.SIGINT, interrupt)
    remove_leftovers(paths)
    if status is None:
        click.echo("ackstore: aborted", err=True)
        return 1
    if os.WIFSIGNALED(status):
        sig = signal.Signals(os.WTERMSIG(status))
        if sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL):
            click.echo(f"ackstore: aborted ({sig.name})", err=True)
        else:
            said = next((line.strip() for line in c_text.decode(errors="replace").splitlines() if line.strip()), "")
            click.echo(
                f"ackstore: error: the store's file is damaged in a way LMDB cannot read safely (it stopped on "
                f"{sig.name}{': ' + said[:200] if said else ''}); nothing was written; 'ackstore check STORE' "
                "says what is damaged",
                err=True,
            )
        return 1
    if c_text:
        sys.stderr.buffer.write(c_text)
        sys.stderr.flush()
    return os.WEXITSTATUS(status)


class _Drain:
    """Reads a pipe to its end in a thread (a child that writes much must not block)."""

    def __init__(self, fd: int) -> None:
        import threading

        self.fd = fd
        self.chunks: list[bytes] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while chunk := os.read(self.fd, 65536):
                self.chunks.append(chunk)
        except OSError:
            pass
        finally:
            os.close(self.fd)

    def result(self) -> bytes:
        self.thread.join()
        return b"".join(self.chunks)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP in the worker: raised where it runs, so that everything a Ctrl-C
    cleans up (``NEW.restoring``, ``OUT.partial``, ``NEW.salvaging``) is cleaned up too."""


def _stop(signum: int, _frame: object) -> None:
    """The worker's first SIGTERM, SIGHUP or SIGINT: later ones are ignored (the cleanup the
    first one starts runs to its end), and this one is raised where the worker runs."""
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signal.Signals(signum).name)


def _forward(pid: int, signum: int, _frame: object) -> None:
    """The parent's SIGTERM or SIGHUP, passed on to the worker ``pid``: unless the worker has
    ended and been reaped already (the wait that reaped it runs this handler on its way out:
    the worker's status must still be read, not lost to an error)."""
    with suppress(ProcessLookupError):
        os.kill(pid, signum)


def _wait(pid: int) -> int | None:
    """The child's wait status (the caller ignores Ctrl-C meanwhile: it reaches the child
    too). None when it was reaped elsewhere (nothing more to learn)."""
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return None


def entry() -> None:
    """The ``ackstore`` console script. A Ctrl-C that reaches this process before its
    worker runs the command (or after) is one line too."""
    try:
        code = guarded(sys.argv[1:])
    except KeyboardInterrupt:
        click.echo("ackstore: aborted", err=True)
        code = 1
    sys.exit(code)
