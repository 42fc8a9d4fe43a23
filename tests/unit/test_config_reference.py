"""docs/config-reference.md is generated from the config models and kept current."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import pytest
import yaml

from specbench.report.reference.config_reference import files, reference

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "config-reference.md"


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_the_page_is_what_the_models_generate() -> None:
    assert PAGE.read_text(encoding="utf-8") == reference(files()), (
        "docs/config-reference.md is out of date: run python scripts/config_reference.py"
    )


def _map_fields() -> set[str]:
    """Names of the fields that hold free-form maps (engine args, speculative options): their keys
    are the engine's, not specbench's."""
    from specbench.report.reference.config_reference import _all_models

    names = set()
    for _, _, root in files():
        for model in _all_models(root):
            for name, field in model.model_fields.items():
                a = field.annotation
                if dict in (
                    typing.get_origin(a),
                    *(typing.get_origin(x) for x in typing.get_args(a)),
                ):
                    names.add(field.alias or name)  # `dict[...] | None` too
    return names


def _keys(doc: Any, skip: set[str]) -> set[str]:
    out: set[str] = set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.add(str(k))
            # a map's keys are the user's (a name `workloads` is also the list of workloads:
            # skipped only where it holds a map)
            if str(k) not in skip or not isinstance(v, dict):
                out |= _keys(v, skip)
    elif isinstance(doc, list):
        for v in doc:
            out |= _keys(v, skip)
    return out


def test_every_key_the_shipped_configs_use_is_on_the_page() -> None:
    """A key a shipped config uses but the page lacks would mean the page misses a model."""
    page = PAGE.read_text(encoding="utf-8")
    skip = _map_fields()
    assert {"extra", "options"} <= skip
    missing = {}
    for path in sorted((ROOT / "configs").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(doc, dict) or "target" not in doc:
            continue  # not a run config
        if keys := sorted(k for k in _keys(doc, skip) if f"| `{k}` |" not in page):
            missing[path.name] = keys
    assert not missing, missing
