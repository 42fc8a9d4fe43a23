"""Writing a figure to its file so that a failed write is an error, never a silent empty file.

matplotlib's `savefig(path)` does not report a write that fails on close (a full disk: `roi
--plot /dev/full` exited 0 with no plot); rendering into memory first and writing the bytes
with `Path.write_bytes` raises the OSError, which the CLI turns into one line (cli/faults.py).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any


def save_figure(fig: Any, path: Path | str) -> None:
    """`fig.savefig(path)`, the format from the suffix (png when none), the write checked."""
    path = Path(path)
    buf = io.BytesIO()
    fig.savefig(buf, format=path.suffix.lstrip(".").lower() or "png")
    path.write_bytes(buf.getvalue())
