"""Model names, devices and dtypes without loading a model (specbench/models/): missing paths and
hub ids offline are one-line errors, the tiny pair's directory, device and dtype choice."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from specbench.config import ModelSpec
from specbench.errors import SpecbenchError
from specbench.models import (
    load_model,
    pick_device,
    pick_dtype,
    resolve_model_path,
)
from specbench.models.tinypair import tiny_model_dir

REPO_ROOT = Path(__file__).resolve().parents[3]


def _cpu_spec(path: Path | str) -> ModelSpec:
    return ModelSpec(model=str(path), dtype="float32", device="cpu")


@pytest.mark.parametrize("name", ["./no-such-model", "/no/such/model", "~/no-such-model", "a/b/c"])
def test_resolve_missing_local_path(name: str) -> None:
    with pytest.raises(SpecbenchError, match=r"^model directory not found: "):
        resolve_model_path(name)


def test_default_tiny_dir_is_under_assets() -> None:
    expected = REPO_ROOT / "specbench" / "assets" / "tiny-pair" / "draft"
    assert tiny_model_dir("draft").resolve() == expected


def test_pick_device_and_dtype() -> None:
    cpu = torch.device("cpu")
    assert pick_device("cpu") == cpu
    assert pick_dtype("auto", cpu) == torch.float32
    assert pick_dtype("bfloat16", cpu) == torch.bfloat16
    assert pick_dtype("float16", cpu) == torch.float16
    assert pick_dtype("auto", torch.device("cuda")) in {torch.bfloat16, torch.float16}
    expected_auto = "cuda" if torch.cuda.is_available() else "cpu"
    assert pick_device("auto").type == expected_auto
    with pytest.raises(SpecbenchError, match="unknown device"):
        pick_device("quantum")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_pick_device_cuda_without_cuda() -> None:
    with pytest.raises(SpecbenchError, match="CUDA is not available"):
        pick_device("cuda:0")


def test_unknown_hub_id_offline_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SpecbenchError) as excinfo:
        load_model(_cpu_spec("specbench/not-cached"), cache_dir=tmp_path / "empty-cache")
    message = str(excinfo.value)
    assert "\n" not in message
    assert "specbench/not-cached" in message
    assert "HF_HUB_OFFLINE" in message
    assert "download it first" in message


def test_missing_model_dir(tmp_path: Path) -> None:
    with pytest.raises(SpecbenchError, match=r"^model directory not found: "):
        load_model(_cpu_spec(tmp_path / "absent"))
