"""Where a vLLM engine's log goes (`backend: vllm`): vLLM's Python logging and the engine
processes' stderr into DIR/engine.log, and the lines of it a failure message quotes."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def env_var(name: str, value: str) -> Iterator[None]:
    """Set an environment variable for the duration of a block (spawned processes inherit it)."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


@contextmanager
def stderr_to(log_path: Path) -> Iterator[None]:
    """Send file descriptor 2 to the engine log for a block: the engine's processes, spawned
    inside it, keep writing their warnings and progress bars there instead of the console."""
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def logging_config(log_path: Path) -> Path:
    """A Python logging config sending vLLM's log (this process and the engine's) to a file."""
    conf = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
        "handlers": {
            "file": {
                "class": "logging.FileHandler",
                "filename": str(log_path),
                "formatter": "plain",
                "mode": "a",
            }
        },
        "loggers": {"vllm": {"handlers": ["file"], "level": "INFO", "propagate": False}},
    }
    path = log_path.with_name("engine-logging.json")
    path.write_text(json.dumps(conf))
    return path


def last_error_lines(log_path: Path, n: int = 3) -> str:
    """The last lines of an engine log that look like errors, joined into one line."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    marks = ("Error", "error", "Exception", "Traceback", "failed", "CRITICAL")
    picked = [ln.strip() for ln in lines if any(m in ln for m in marks)]
    picked = [ln for ln in picked if not ln.startswith("Traceback")]
    return " | ".join(dict.fromkeys(picked[-n:]))


def first_line(exc: BaseException) -> str:
    """An exception's first line; for a pydantic validation error, with the error itself."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    if len(lines) > 1 and "validation error" in lines[0]:
        detail = lines[1].removeprefix("Value error, ").split(" [type=")[0]
        return f"{lines[0]}: {detail}"[:400]
    return (lines or [""])[0][:300]
