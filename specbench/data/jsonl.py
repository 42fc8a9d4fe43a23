"""JSONL sources read line by line, each line a JSON object; what makes a line unusable.

A line that is not JSON, not an object, or holds a lone UTF-16 surrogate (a `\\ud800` escape
that decodes to no text a tokenizer takes) stops the read with its line number, or, for a
reader that skips bad rows (`accept --skip-bad-rows`), comes as a `BadLine` row to be counted.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from typing import Any, NamedTuple

from specbench.errors import SpecbenchError


class Row(NamedTuple):
    """One record of a source: where it is ("line 3", "row 3") and its column values. (A tuple:
    millions are made while streaming a large log, and a frozen dataclass is slow to build.)"""

    location: str
    values: dict[str, Any]


class BadLine(dict[str, Any]):
    """The values of a JSONL line that is not a usable object (invalid JSON, not an object, a
    lone UTF-16 surrogate), yielded instead of stopping when the reader skips bad rows."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


def _line_problem(line: str, value: Any) -> str | None:
    """Why a parsed JSONL line cannot be a row, or None. A `\\ud800`-style escape decodes to a
    lone surrogate, which no tokenizer takes (a raw TypeError, issue 32): refused here."""
    if not isinstance(value, dict):
        return f"expected a JSON object, got {type(value).__name__}; write one object per line"
    if _SURROGATE_ESCAPE.search(line):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            return "holds a lone UTF-16 surrogate (an unpaired \\ud800–\\udfff escape), not text"
    return None


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def jsonl_rows(fs: Any, path: str, name: str, bad_lines: bool = False) -> Iterator[Row]:
    """Stream a JSONL file (compressed ones too: .gz, .zst, ... by extension) line by line. A
    line that is no usable object stops the read, or (`bad_lines`) comes as a `BadLine` row."""
    with fs.open(path, "rb", compression="infer") as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8-sig")
        line_no = 0
        try:
            for line_no, line in enumerate(text, start=1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                    problem = _line_problem(line, value)
                except json.JSONDecodeError as exc:
                    problem = f"invalid JSON ({exc.msg}); fix or remove that line"
                if problem is not None:
                    if not bad_lines:
                        raise SpecbenchError(f"{name} line {line_no}: {problem}")
                    yield Row(location=f"line {line_no}", values=BadLine(problem))
                    continue
                yield Row(location=f"line {line_no}", values=value)
        except UnicodeDecodeError:
            raise SpecbenchError(
                f"{name} is not UTF-8 text (line {line_no + 1}); re-save it as UTF-8"
            ) from None
