"""The one exit path of the project's commands (``ackstore``, ``ackstore-spark``).

:func:`run` runs a click command and turns every way it can end into an exit status and at
most one line on stderr, never a traceback: 0 ok (or help), 2 usage (click's, or the
command's own ``usage`` errors), 1 failure (the command's ``failures``, a broken pipe,
Ctrl-C). ``ACKSTORE_DEBUG=1`` lets a failure's traceback through.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import click

__all__ = ["run"]


def run(
    command: click.Command,
    argv: Sequence[str] | None,
    prog: str,
    usage: type[BaseException] | tuple[type[BaseException], ...],
    failures: type[BaseException] | tuple[type[BaseException], ...],
) -> int:
    """Run ``command`` on ``argv`` as ``prog``; returns the exit status."""
    try:
        result = command.main(args=argv, prog_name=prog, standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        return 0
    except click.ClickException as exc:
        click.echo(f"{prog}: error: {exc.format_message()}", err=True)
        return 2 if isinstance(exc, click.UsageError) else exc.exit_code
    except usage as exc:
        click.echo(f"{prog}: error: {exc}", err=True)
        return 2
    except BrokenPipeError:  # `ackstore dump S | head`: the reader left; say so once, quietly
        _silence_stdout()
        click.echo(f"{prog}: error: the output was closed before the command finished (broken pipe)", err=True)
        return 1
    except failures as exc:
        if os.environ.get("ACKSTORE_DEBUG") == "1":
            raise
        click.echo(f"{prog}: error: {exc}", err=True)
        return 1
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo(f"{prog}: aborted", err=True)
        return 1
    return result if isinstance(result, int) else 0


def _silence_stdout() -> None:
    """Point stdout at /dev/null (after a broken pipe, the interpreter's last flush would fail)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
