"""The one exit path of the project's commands (``ackstore``, ``ackstore-spark``).

:func:`run` runs a click command and turns every way it can end into an exit status and at
most one line on stderr, never a traceback: 0 ok (``--help``, or a reader of the output that
closed it early, as ``head`` does), 2 usage (click's, no command at all, or the command's
own ``usage`` errors), 1 failure (the command's ``failures``, Ctrl-C).
``ACKSTORE_DEBUG=1`` lets a failure's traceback through.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Mapping, Sequence

import click

__all__ = ["describe_os_error", "run"]


def run(
    command: click.Command,
    argv: Sequence[str] | None,
    prog: str,
    usage: type[BaseException] | tuple[type[BaseException], ...],
    failures: type[BaseException] | tuple[type[BaseException], ...],
    missing: Mapping[str, str] | None = None,
) -> int:
    """Run ``command`` on ``argv`` as ``prog``; returns the exit status. ``missing`` maps a
    module a command may import (``pyspark``) to what installs it: its absence is then
    one line saying so, exit 1."""
    try:
        result = command.main(args=argv, prog_name=prog, standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except SystemExit:
        if type(sys.stdout).__name__ == "_PacifyFlushWrapper":  # click's own end of a closed pipe (EPIPE)
            _silence_stdout()
            return 0
        raise
    except click.exceptions.NoArgsIsHelpError as exc:  # no command given: a usage error, the help on stderr
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc), err=True)
        return 2
    except click.ClickException as exc:
        click.echo(f"{prog}: error: {exc.format_message()}", err=True)
        return 2 if isinstance(exc, click.UsageError) else exc.exit_code
    except usage as exc:
        click.echo(f"{prog}: error: {exc}", err=True)
        return 2
    except BrokenPipeError:  # `ackstore dump S | head`: the reader took what it wanted and left, as
        _silence_stdout()  # `cat` is told: nothing to say, nothing failed
        return 0
    except failures as exc:
        if os.environ.get("ACKSTORE_DEBUG") == "1":
            raise
        text = describe_os_error(exc, _command(argv)) if isinstance(exc, OSError) else str(exc)
        click.echo(f"{prog}: error: {text}", err=True)
        return 1
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if not missing or top not in missing or os.environ.get("ACKSTORE_DEBUG") == "1":
            raise
        click.echo(f"{prog}: error: {top} is not installed; {missing[top]}", err=True)
        return 1
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:
        cause = exc if isinstance(exc, KeyboardInterrupt) else exc.__cause__  # click wraps it in Abort
        why = f" ({cause})" if isinstance(cause, KeyboardInterrupt) and str(cause) else ""  # the signal, if not Ctrl-C
        click.echo(f"{prog}: aborted{why}", err=True)
        return 1
    return result if isinstance(result, int) else 0


_OS_ADVICE = {
    errno.ENOSPC: "free space on that file system (or give the command another path) and run it again",
    errno.EDQUOT: "the disk quota is used up: free some of it and run it again",
    errno.EACCES: "run the command as a user that may read and write there, or change the permissions",
    errno.EPERM: "run the command as a user that may read and write there, or change the permissions",
    errno.EROFS: "the file system is mounted read-only: use a path on a writable one",
    errno.ENOTDIR: "a part of that path is a file, not a directory: check the path",
    errno.EISDIR: "that path is a directory: give a file's path",
    errno.ENOENT: "check the path: it, or a directory on the way to it, does not exist",
    errno.EIO: "the device reported an I/O error: check the disk (dmesg), then run 'ackstore check'",
}
"""what to do about the operating system's common refusals"""


def describe_os_error(exc: OSError, doing: str) -> str:
    """An operating-system error as one line: what was being done, on which path, what went
    wrong and what to do (Python's own form names neither the command nor, often, the path)."""
    where = f" {exc.filename}" if exc.filename else ""
    if exc.filename2:
        where += f" -> {exc.filename2}"
    why = exc.strerror or str(exc)
    advice = _OS_ADVICE.get(exc.errno or -1)
    return f"{doing}{where}: {why}" + (f"; {advice}" if advice else "")


def _command(argv: Sequence[str] | None) -> str:
    """The subcommand the arguments name (for messages): ``dump``, ``restore``, ..."""
    args = list(sys.argv[1:] if argv is None else argv)
    return next((a for a in args if not a.startswith("-")), "the command")


def _silence_stdout() -> None:
    """Point stdout at /dev/null (after a broken pipe, the interpreter's last flush would fail)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
