"""The document blocks every report is made of, and their two renderings: Markdown and
self-contained HTML (images embedded). A report builds one list of blocks, so its report.md and
report.html always say the same thing."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Para:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class TableBlock:
    header: list[str]
    rows: list[list[str]]


@dataclass
class Image:
    path: str  # relative to the run directory
    alt: str


@dataclass
class Box:
    """The decision box: the first thing a reader sees (a framed section in HTML, a quote in md)."""

    title: str
    items: list[str]
    note: str = ""


Block = Heading | Para | Bullets | TableBlock | Image | Box


def to_markdown(blocks: list[Block]) -> str:
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append("#" * b.level + " " + b.text)
        elif isinstance(b, Para):
            out.append(b.text)
        elif isinstance(b, Bullets):
            out.append("\n".join(f"- {i}" for i in b.items))
        elif isinstance(b, TableBlock):
            lines = ["| " + " | ".join(b.header) + " |", "|" + "---|" * len(b.header)]
            lines += ["| " + " | ".join(r) + " |" for r in b.rows]
            out.append("\n".join(lines))
        elif isinstance(b, Image):
            out.append(f"![{b.alt}]({b.path})")
        elif isinstance(b, Box):
            lines = [f"> **{b.title}**", ">"] + [f"> - {i}" for i in b.items]
            lines += [">", f"> {b.note}"] if b.note else []
            out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


def _inline(text: str) -> str:
    """Escape, then render **bold** and `code` (the only inline markup the blocks use)."""
    parts = html.escape(text).split("**")
    text = "".join(f"<strong>{p}</strong>" if i % 2 else p for i, p in enumerate(parts))
    parts = text.split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


# The page fits a 1366-px window (checked in headless Chromium by tests/report/test_html_width.py):
# long unbroken text (paths, flags) wraps anywhere, every table sits in a box that scrolls
# sideways instead of widening the page, and a table of WIDE_TABLE columns or more is set smaller.
WIDE_TABLE = 8
_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222;"
    "overflow-wrap:anywhere}"
    ".table{max-width:100%;overflow-x:auto;margin:1rem 0}"
    "table{border-collapse:collapse;overflow-wrap:normal}td,th{border:1px solid #ccc;"
    "padding:.3rem .6rem;text-align:right}th{background:#f3f3f3}td:first-child{text-align:left}"
    "table.wide{font-size:.8rem}table.wide td,table.wide th{padding:.2rem .35rem}"
    "img{max-width:100%;display:block;margin:1rem 0}code{background:#f3f3f3;padding:0 .2rem}"
    ".decision{border:2px solid #2a6f3e;border-radius:6px;background:#f2faf4;padding:.2rem 1.2rem;"
    "margin:1rem 0}.decision h2{margin:.6rem 0}.decision li{margin:.3rem 0}"
    ".decision .rule{color:#444;font-size:.9rem}"
)


def to_html(blocks: list[Block], run_dir: Path, title: str) -> str:
    body: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            body.append(f"<h{b.level}>{_inline(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            body.append(f"<p>{_inline(b.text)}</p>")
        elif isinstance(b, Bullets):
            body.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, TableBlock):
            head = "".join(f"<th>{_inline(h)}</th>" for h in b.header)
            rows = "".join(
                "<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in b.rows
            )
            wide = ' class="wide"' if len(b.header) >= WIDE_TABLE else ""
            body.append(
                f'<div class="table"><table{wide}><thead><tr>{head}</tr></thead>'
                f"<tbody>{rows}</tbody></table></div>"
            )
        elif isinstance(b, Box):
            items = "".join(f"<li>{_inline(i)}</li>" for i in b.items)
            note = f'<p class="rule">{_inline(b.note)}</p>' if b.note else ""
            body.append(
                f'<section id="decision" class="decision"><h2>{_inline(b.title)}</h2>'
                f"<ul>{items}</ul>{note}</section>"
            )
        elif isinstance(b, Image):
            data = base64.b64encode((run_dir / b.path).read_bytes()).decode()
            body.append(f'<img alt="{html.escape(b.alt)}" src="data:image/png;base64,{data}">')
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
