"""Field paths into nested rows: `response.choices[0].message.content`, `request.messages`,
`metadata.category`, `["key.with.dots"]`.

Logged traffic keeps what was sent and received as nested objects (OpenAI request / response
bodies in a JSON or Parquet struct column), so a column name is not enough. A path is a dotted
list of keys with `[i]` list indices (negative counts from the end) and `["…"]` for keys holding
dots or brackets. A row key equal to the whole path wins, so a flat column literally named
`a.b` keeps working. A string met on the way that holds a JSON object or list (how CSV, and
some loggers, store nested values) is parsed before the path goes on.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specbench.errors import SpecbenchError

_TOKEN = re.compile(
    r"""\.?(?P<key>[^.\[\]"]+)          # a bare key, after a dot or at the start
      | \[(?P<index>-?\d+)\]            # [3], [-1]
      | \[\s*"(?P<quoted>(?:[^"\\]|\\.)*)"\s*\]   # ["a.b"]
    """,
    re.VERBOSE,
)


class _Missing:
    """The value of a path that leads nowhere (distinct from a JSON null)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass(frozen=True)
class FieldPath:
    """A parsed path: `steps` are keys (str) and list indices (int); `text` is what was given."""

    text: str
    steps: tuple[str | int, ...]

    @property
    def column(self) -> str:
        """The top-level column the path starts in (a Parquet reader reads only those)."""
        return str(self.steps[0])

    @property
    def nested(self) -> bool:
        return len(self.steps) > 1


@functools.lru_cache(maxsize=256)
def parse_path(text: str) -> FieldPath:
    """`text` as a `FieldPath`; a malformed path is a user error naming it."""
    steps: list[str | int] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos or (pos == 0 and text.startswith(".")):
            raise SpecbenchError(
                f"field path '{text}' is not valid at character {pos + 1}; write keys with dots "
                'and list indices in brackets, e.g. response.choices[0].message.content or ["a.b"]'
            )
        if m.group("key") is not None:
            if pos > 0 and not text[pos] == ".":
                raise SpecbenchError(
                    f"field path '{text}' needs a dot before '{m.group('key')}' "
                    f"(character {pos + 1})"
                )
            steps.append(m.group("key").strip())
        elif m.group("index") is not None:
            steps.append(int(m.group("index")))
        else:
            steps.append(json.loads(f'"{m.group("quoted")}"'))
        pos = m.end()
    if not steps or not isinstance(steps[0], str):
        raise SpecbenchError(f"field path '{text}' must start with a column name")
    return FieldPath(text, tuple(steps))


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def get_path(row: Mapping[str, Any], path: str | FieldPath) -> Any:
    """The value at `path` in `row`, or `MISSING` when a key or index is absent."""
    fp = parse_path(path) if isinstance(path, str) else path
    if fp.text in row:  # a flat column literally named like the path
        return row[fp.text]
    value: Any = row
    for i, step in enumerate(fp.steps):
        if i > 0:
            value = _maybe_json(value)
        if isinstance(step, int):
            if not isinstance(value, list | tuple) or not -len(value) <= step < len(value):
                return MISSING
            value = value[step]
        else:
            if not isinstance(value, Mapping) or step not in value:
                return MISSING
            value = value[step]
    return value


def has_path(row: Mapping[str, Any], path: str | FieldPath) -> bool:
    return get_path(row, path) is not MISSING
