"""scripts/train_tiny_pair.py's corpus selection on a small real file tree (no training).

`--corpus broad` sorts the files of a standard library and a site-packages into code, prose and
structured text; these tests build both roots in a temporary directory and check the kinds, the
skip rules and the character budgets. `--corpus stdlib` (the shipped pair's corpus) is checked
against the shipped manifest's corpus sha256 in `test_stdlib_corpus_matches_manifest`.
"""

from __future__ import annotations

import importlib.util
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

import pytest

from specbench.models.tinypair import load_manifest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def train() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "train_tiny_pair", REPO / "scripts" / "train_tiny_pair.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["train_tiny_pair"] = mod
    spec.loader.exec_module(mod)
    return mod


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    std, site = tmp_path / "lib", tmp_path / "site"
    _write(std / "json" / "decoder.py", "def decode(s):\n    return s\n")
    _write(std / "os.py", "import sys\n" * 20)
    _write(std / "test" / "test_os.py", "assert True\n")  # test suites skipped
    _write(std / "site-packages" / "x" / "README.md", "Nested site-packages is skipped.\n")
    _write(std / "pydoc_data" / "topics.py", "topics = {'if': 'The if statement ...'}\n")
    _write(std / "idlelib" / "help.html", "<p>IDLE</p>\n")
    _write(std / "empty.py", "   \n")  # empty: skipped
    _write(site / "pkg-1.0.dist-info" / "METADATA", "Name: pkg\nSummary: a package for tests\n")
    _write(site / "pkg" / "README.md", "This package does one thing well.\n")
    _write(site / "pkg" / "numbers.txt", "1 2 3 4 5 6 7 8 9 10 11 12\n")  # not prose: digits
    _write(site / "pkg" / "data" / "table.csv", "a,b\n1,2\n")
    _write(site / "pkg" / "conf.yaml", "key: value\n")
    _write(site / "pkg" / "tests" / "case.json", '{"skipped": true}\n')
    _write(site / "pkg" / "module.py", "x = 1\n")  # site-packages code is not used
    return std, site


def test_broad_corpus_kinds_and_skips(train: ModuleType, roots: tuple[Path, Path]) -> None:
    std, site = roots
    big = 10**6
    sel = train.select_broad_corpus(
        std,
        site,
        {"code": big, "prose": big, "structured": big},
        {"code": big, "prose": big, "structured": big},
    )
    assert sorted(sel["code"]["labels"]) == ["stdlib:json/decoder.py", "stdlib:os.py"]
    assert sorted(sel["prose"]["labels"]) == [
        "site:pkg-1.0.dist-info/METADATA",
        "site:pkg/README.md",
        "stdlib:pydoc_data/topics.py",
    ]
    assert sorted(sel["structured"]["labels"]) == [
        "site:pkg/conf.yaml",
        "site:pkg/data/table.csv",
        "stdlib:idlelib/help.html",
    ]
    # numbers.txt is a candidate but mostly digits; empty.py a candidate but empty
    assert sel["prose"]["n_candidates"] == 4
    assert sel["code"]["n_candidates"] == 3


def test_broad_corpus_budget_and_cut(train: ModuleType, roots: tuple[Path, Path]) -> None:
    std, site = roots
    os_text = (std / "os.py").read_text()
    decoder = (std / "json" / "decoder.py").read_text()
    # Room for the short file only: the long one is skipped wherever it falls in the order.
    sel = train.select_broad_corpus(
        std,
        site,
        {"code": len(decoder) + 5, "prose": 10**6, "structured": 10**6},
        {"code": 10**6, "prose": 10**6, "structured": 10**6},
    )
    assert sel["code"]["labels"] == ["stdlib:json/decoder.py"]
    # A per-file cut makes both fit, each cut to the limit.
    sel = train.select_broad_corpus(
        std,
        site,
        {"code": 20, "prose": 10**6, "structured": 10**6},
        {"code": 10, "prose": 10**6, "structured": 10**6},
    )
    assert sorted(sel["code"]["texts"]) == sorted([os_text[:10], decoder[:10]])
    again = train.select_broad_corpus(
        std,
        site,
        {"code": 20, "prose": 10**6, "structured": 10**6},
        {"code": 10, "prose": 10**6, "structured": 10**6},
    )
    assert again == sel  # same tree, same selection and order


@pytest.mark.slow
def test_stdlib_corpus_matches_manifest(train: ModuleType) -> None:
    """The default corpus is the one the shipped pair was trained on (same Python install)."""
    manifest = load_manifest()
    corpus = manifest["corpus"]
    if Path(sysconfig.get_paths()["stdlib"]).as_posix() != corpus["stdlib_path"]:
        pytest.skip("another Python install: its standard library is another corpus")
    args = train.parse_args([])
    texts, val_idx, info = train.build_corpus(args)
    assert info["sha256"] == corpus["sha256"]
    assert info["n_files"] == corpus["n_files"] == len(texts)
    assert len(val_idx) == len(range(0, len(texts), args.val_every))
