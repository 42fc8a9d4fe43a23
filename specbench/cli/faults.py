"""Faults of the user's environment (a read-only directory, a full disk, the file-size limit, a
path that is a file where a directory is needed), as one line and the right exit code.

The one place every command's OSError goes through (cli/app.py): the error names the path and
what to change, and the exit code says whether anything was measured —

    2  before anything was measured: nothing to keep, fix it and run again;
    4  mid-run: the records measured so far are kept (records.RecordWriter flushed each line),
       fix it and rerun with --resume.

An OSError whose errno is not the environment's (EBADF, EINVAL, …) stays an internal error
(exit 3): it is a bug.

Crash logs (exit 3) go beside the run when the command works on a run directory
(`beside_run`), so a bug report carries its run; elsewhere (or when that directory cannot be
written) to the temporary directory.
"""

from __future__ import annotations

import errno
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

from specbench import records

# errno → (what happened, what to do); {path} is the file or directory the OS named
_FAULTS: dict[int, tuple[str, str]] = {
    errno.EACCES: (
        "permission denied",
        "choose a path you may write (and read), or fix its permissions",
    ),
    errno.EPERM: ("operation not permitted", "choose another path, or fix its permissions"),
    errno.EROFS: ("read-only file system", "write somewhere else (e.g. --out)"),
    errno.ENOSPC: ("no space left on the device", "free some space or write somewhere else"),
    errno.EDQUOT: ("disk quota exceeded", "free some space or write somewhere else"),
    errno.EFBIG: (
        "file too large (the file-size limit, `ulimit -f`)",
        "raise the limit or write somewhere else",
    ),
    errno.EISDIR: ("is a directory", "give a file path"),
    errno.ENOTDIR: ("a part of the path is a file, not a directory", "give a directory"),
    errno.EEXIST: (
        "already exists (and is not a directory)",
        "give a directory, or remove the file",
    ),
    errno.ENOENT: ("not found", "check the path"),
    errno.ENAMETOOLONG: ("file name too long", "give a shorter path"),
    errno.EMFILE: ("too many open files", "raise the limit (`ulimit -n`)"),
    errno.ENFILE: ("too many open files in the system", "close other programs or raise the limit"),
    errno.EIO: ("input/output error", "check the device"),
    errno.ELOOP: ("too many levels of symbolic links", "fix the link"),
}

_run_dir: Path | None = None
_writing: list[str] = []  # the output paths the command was given (cli/options.py)


def beside_run(run_dir: Path | None) -> None:
    """The run directory the command works on: crash logs go there, and a fault after records
    were written names it."""
    global _run_dir
    _run_dir = run_dir


def writing(path: Path) -> None:
    """An output path the command was given: named when the OS names none (see `describe`)."""
    _writing.append(str(path))


def reset() -> None:
    """Before each command (the tests run many in one process)."""
    beside_run(None)
    _writing.clear()
    records.WRITTEN.clear()


def describe(exc: OSError) -> str | None:
    """One line for an environment fault (None when the errno is not the environment's): the
    path, what happened, what to do. When the OS names no path (a failed write to an open file,
    e.g. /dev/full), the output paths the command was given are named."""
    fault = _FAULTS.get(exc.errno or 0)
    if fault is None:
        return None
    what, todo = fault
    path = exc.filename
    if path is None and _writing:
        path = " or ".join(_writing)
    if path is None and _run_dir is not None:
        path = f"a file in {_run_dir}"
    where = f"{path}: " if path is not None else "writing the output: "
    if exc.filename2 is not None:
        where = f"{exc.filename} → {exc.filename2}: "
    return f"{where}{what}; {todo}"


def fault_exit(exc: OSError) -> tuple[str, int] | None:
    """(the `error:` line, the exit code) of an environment fault, or None for a bug."""
    line = describe(exc)
    if line is None:
        return None
    if records.WRITTEN:
        kept = ", ".join(sorted({str(p.parent) for p in records.WRITTEN}))
        return (
            f"run stopped: {line}; the records measured so far are kept in {kept} — "
            "fix it and rerun with --resume",
            4,
        )
    return line, 2


def crash_log(exc: BaseException) -> Path:
    """Write the traceback of an unexpected error to a log file (beside the run when there is
    a run directory, else the temporary directory); return its path."""
    from specbench import __version__

    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = f"specbench-crash-{stamp}-{os.getpid()}.log"
    text = f"specbench {__version__}: internal error\nargv: {sys.argv!r}\n\n" + "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__)
    )
    if _run_dir is not None and _run_dir.is_dir():
        try:
            (_run_dir / name).write_text(text, encoding="utf-8")
            return _run_dir / name
        except OSError:
            pass  # a read-only or full run directory: the temporary directory below
    path = Path(tempfile.gettempdir()) / name
    path.write_text(text, encoding="utf-8")
    return path
