"""docs/index.md lists every page of docs/, and every relative link on it resolves."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
LINK = re.compile(r"\]\(([^)#]+)\)")


def test_every_docs_page_is_in_the_index_and_every_link_resolves() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    targets = LINK.findall(index)
    assert all((DOCS / t).exists() for t in targets), [
        t for t in targets if not (DOCS / t).exists()
    ]
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    linked = {Path(t).name for t in targets}
    assert pages <= linked, f"pages missing from docs/index.md: {sorted(pages - linked)}"
