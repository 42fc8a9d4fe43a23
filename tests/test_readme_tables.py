"""The documentation's result tables (README.md and docs/*.md) are generated
(scripts/readme_tables.py) from shipped run directories: a figure that drifts from what the records
give fails here until regenerated, and a block removed from every page fails too."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "readme_tables", ROOT / "scripts" / "readme_tables.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_generated_block_is_shown_somewhere() -> None:
    script = _script()
    shown = script.shown_blocks()
    assert set(shown) == set(script.TABLES)
    assert all(shown.values()), f"blocks no page shows: {[n for n, p in shown.items() if not p]}"


def test_doc_tables_are_what_the_shipped_runs_give() -> None:
    script = _script()
    for page in script.PAGES:
        text = page.read_text(encoding="utf-8")
        regenerated, changed = script.regenerate(text)
        assert changed == [], (
            f"{page.name}: blocks out of date: {changed}; run python scripts/readme_tables.py"
        )
        assert regenerated == text


def test_a_changed_figure_is_caught() -> None:
    script = _script()
    (page,) = script.shown_blocks()["demo"][:1]
    readme = page.read_text(encoding="utf-8")
    start = readme.index("<!-- table:demo -->")
    row = readme.index("\n| ", readme.index("|---", start)) + 1  # the first data row
    end = readme.index("\n", row)
    cells = readme[row:end].split(" | ")
    cells[4] = "9" + cells[4]  # the speedup, one digit more
    tampered = readme[:row] + " | ".join(cells) + readme[end:]
    assert tampered != readme
    _, changed = script.regenerate(tampered)
    assert changed == ["demo"]


def test_the_shipped_run_holds_records_config_and_env_only() -> None:
    files = sorted(p.name for p in (ROOT / "docs" / "example-run").iterdir())
    assert files == ["config.yaml", "env.json", "records.jsonl"]
    assert (ROOT / "docs" / "example-run" / "records.jsonl").stat().st_size < 400_000
