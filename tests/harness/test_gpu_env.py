"""env.json's GPU fields from nvidia-smi, through a fake `nvidia-smi` executable put first on PATH.

The fake answers exactly the three invocations specbench makes (any other argument list is an
error, as a real nvidia-smi says for an unknown query field), printing output in nvidia-smi's
`--format=csv,noheader,nounits` layout and its summary header. NOTE: these lines follow that
documented layout for two H100 80GB HBM3 on driver 550.54.15; they were written for this test, not
captured from a GPU (none was available where it was written) — the GPU check's env.json
(scripts/gpu_check.sh) records the real ones.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
import torch

from specbench.analysis.compare.environment import GPU_ENV_KEYS, env_differences
from specbench.analysis.compare.sides import Side
from specbench.analysis.documents.results_model import RunEnv
from specbench.config import parse_config, read_yaml
from specbench.harness.env.env import transformers_environment
from specbench.harness.env.gpu_env import QUERY, gpu_environment

REPO = Path(__file__).resolve().parents[2]
CAT = shutil.which("cat") or "/bin/cat"  # by path: one test leaves only the fake on PATH
QUERY_ARGS = f"--query-gpu={','.join(QUERY)} --format=csv,noheader,nounits"
APPS_ARGS = "--query-compute-apps=pid,process_name,used_memory --format=csv,noheader,nounits"
TWO_H100 = (
    "NVIDIA H100 80GB HBM3, 550.54.15, 81559, 1980, 1980, 2619, 700.00, [N/A], Enabled\n"
    "NVIDIA H100 80GB HBM3, 550.54.15, 81559, 1755, 1980, 2619, 700.00, [N/A], Enabled\n"
)
APPS = "4242, /usr/bin/python3, 70312\n31337, /opt/conda/bin/python, 1024\n"
HEADER = """Tue Dec  1 16:00:00 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
"""


def fake_smi(folder: Path, query: str, apps: str = APPS, rc: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (("query", query), ("apps", apps), ("header", HEADER)):
        (folder / f"{name}.txt").write_text(text)
    script = folder / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f'[ {rc} -ne 0 ] && {{ echo "NVIDIA-SMI has failed because it could not communicate '
        f'with the NVIDIA driver."; exit {rc}; }}\n'
        f'case "$*" in\n'
        f'  "{QUERY_ARGS}") {CAT} "{folder}/query.txt" ;;\n'
        f'  "{APPS_ARGS}") {CAT} "{folder}/apps.txt" ;;\n'
        f'  "") {CAT} "{folder}/header.txt" ;;\n'
        '  *) echo "Invalid combination of input arguments: $*"; exit 2 ;;\n'
        "esac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    return folder


def test_two_gpus_recorded_with_absent_fields_stated(on_path: Path) -> None:
    fake_smi(on_path, TWO_H100)
    env = gpu_environment(own_pid=31337)
    assert env["gpu_query"] == "nvidia-smi"
    assert (env["gpu_name"], env["gpu_driver"], env["cuda_driver"]) == (
        "NVIDIA H100 80GB HBM3",
        "550.54.15",
        "12.4",
    )
    assert (env["gpu_memory_total_mib"], env["gpu_power_limit_w"], env["gpu_count"]) == (81559, 700.0, 2)  # fmt: skip
    assert env["gpu_clock_sm_mhz"] == "1980 | 1755"  # the second GPU runs slower: both kept
    assert env["gpu_clock_max_sm_mhz"] == 1980 and env["gpu_ecc_mode"] == "Enabled"
    assert env["gpu_mig_mode"] is None and env["gpu_fields_absent"] == ["gpu_mig_mode"]
    assert env["gpu_other_processes"] == "pid 4242 python3 70312 MiB"  # our own pid left out
    assert set(QUERY.values()) | {"cuda_driver", "gpu_count", "gpu_other_processes"} == set(GPU_ENV_KEYS)  # fmt: skip


def test_no_nvidia_smi_or_a_failing_one_records_nothing_guessed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert gpu_environment() == {
        "gpu_query": "nvidia-smi not found on PATH: no GPU fields recorded"
    }
    monkeypatch.setenv("PATH", str(on_path))
    fake_smi(on_path, TWO_H100, rc=9)
    env = gpu_environment()
    assert list(env) == ["gpu_query"] and "failed" in env["gpu_query"]
    fake_smi(on_path, TWO_H100, apps="")
    assert gpu_environment()["gpu_other_processes"] == "none"


def test_env_json_carries_them_and_compare_lists_a_difference(on_path: Path) -> None:
    cfg = parse_config(read_yaml(REPO / "configs" / "tiny.yaml"), "tiny.yaml")
    fake_smi(on_path, TWO_H100)
    base = transformers_environment(cfg, torch.device("cpu"), torch.float32)
    assert base["gpu_name"] == "NVIDIA H100 80GB HBM3" and base["cuda_driver"] == "12.4"
    capped = TWO_H100.replace("700.00", "450.00").replace("550.54.15", "555.42.02")
    fake_smi(on_path, capped)
    new = transformers_environment(cfg, torch.device("cpu"), torch.float32)
    sides = [Side(w, {}, RunEnv.model_validate(e), {}) for w, e in (("base", base), ("new", new))]
    diffs = env_differences(*sides)
    changed = {d.field: (d.base, d.new) for d in diffs}
    assert changed == {
        "gpu_driver": ("550.54.15", "555.42.02"),
        "gpu_power_limit_w": (700.0, 450.0),
    }
