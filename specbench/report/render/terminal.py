"""The console every command prints through, and plain mode.

Plain mode (`specbench --plain`, or SPECBENCH_PLAIN=1) prints ASCII only (tables drawn with +-|,
specbench's symbols spelled out: γ as "gamma", → as "->"; see report/render/ascii_text.py) without colour
or live progress bars, for CI logs. NO_COLOR (no-color.org) or TERM=dumb drop colour and live
display but keep the symbols (a dumb terminal may still show UTF-8); output that is not a terminal
has no colour and no live display either (rich's own detection)."""

from __future__ import annotations

import os
from typing import Any

from rich import box
from rich.console import Console
from rich.style import Style
from rich.text import Text

from specbench.report.render.ascii_text import to_ascii

_PLAIN = {"on": False}


def set_plain(value: bool) -> None:
    """`specbench --plain`: every console made afterwards is plain."""
    _PLAIN["on"] = value


def ascii_mode() -> bool:
    """--plain or SPECBENCH_PLAIN: ASCII only."""
    return _PLAIN["on"] or os.environ.get("SPECBENCH_PLAIN", "") not in ("", "0")


def plain_mode() -> bool:
    """ASCII mode, NO_COLOR or TERM=dumb: no colour, no live display (`table_box()` is ASCII)."""
    return ascii_mode() or "NO_COLOR" in os.environ or os.environ.get("TERM") == "dumb"


class PlainConsole(Console):
    """A console that prints ASCII only: every string is spelled in ASCII before rich lays it out
    (so columns are sized on what is printed), text too long for its cell folds onto the next
    line instead of being cut with rich's "…", and it reports an ASCII encoding, on which rich
    draws every table box as box.ASCII."""

    def render_str(  # the same parameters as rich's, forwarded as given
        self, text: str, *, style: str | Style = "", **kwargs: Any
    ) -> Text:
        kwargs["overflow"] = kwargs.get("overflow") or "fold"
        return super().render_str(to_ascii(text), style=style, **kwargs)

    @property
    def encoding(self) -> str:
        return "ascii"


def make_console(stderr: bool = False) -> Console:
    """The console of every command: plain (ASCII, no colour, no markup styling, no live display)
    in plain mode."""
    if ascii_mode():
        return PlainConsole(
            stderr=stderr, no_color=True, highlight=False, emoji=False, force_terminal=False
        )
    if plain_mode():
        return Console(
            stderr=stderr, no_color=True, highlight=False, emoji=False, force_terminal=False
        )
    return Console(stderr=stderr)


def table_box() -> box.Box:
    return box.ASCII if plain_mode() else box.HEAVY_HEAD


# rich's SIMPLE_HEAD (a rule under the header, no other lines) drawn in ASCII.
ASCII_SIMPLE_HEAD = box.Box("    \n    \n -- \n    \n    \n -- \n    \n    \n", ascii=True)


def compact_box(console: Console) -> box.Box:
    """A rule under the header and no vertical lines: the narrowest readable table, for tables
    that must fit 80 columns; in ASCII on a console that cannot print more (plain mode)."""
    return box.SIMPLE_HEAD if console.encoding.startswith("utf") else ASCII_SIMPLE_HEAD
