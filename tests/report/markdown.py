"""Reading a generated report.md back in the report tests."""

from __future__ import annotations


def md_table(md: str, first_header: str, after: str = "") -> list[dict[str, str]]:
    """The rows of the first markdown table (after `after`) whose first header cell is
    `first_header`, as dicts by header."""
    lines = md[md.index(after) :].splitlines() if after else md.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith(f"| {first_header} |"))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, [c.strip() for c in line.strip("|").split("|")], strict=True)))
    return rows
