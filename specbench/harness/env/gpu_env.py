"""The GPU's state for env.json, as nvidia-smi reports it — never guessed.

A speedup measured on a GPU depends on more than its name: the driver, the clocks it ran at
(a power-capped or thermally throttled GPU runs slower), MIG partitioning, ECC, and whatever else
ran on it at the time. nvidia-smi (NVML's command-line face, on every machine with the NVIDIA
driver) is asked once when env.json is written:

    nvidia-smi --query-gpu=name,driver_version,… --format=csv,noheader,nounits
    nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader,nounits
    nvidia-smi                                  # the header's "CUDA Version" (the driver's)

env.json keys (`GPU_ENV_KEYS`, which `compare` lists among environment differences): gpu_name, gpu_driver, cuda_driver, gpu_memory_total_mib,
gpu_clock_sm_mhz, gpu_clock_max_sm_mhz, gpu_clock_mem_mhz, gpu_power_limit_w, gpu_mig_mode,
gpu_ecc_mode, gpu_count, gpu_other_processes (other processes' pid, name and MiB; "none"), and
gpu_query (how the fields were obtained). A field nvidia-smi reports as [N/A] / [Not Supported]
is null and listed in gpu_fields_absent; without nvidia-smi only gpu_query is written, saying so.
Several GPUs: a field whose values differ is written "a | b" in GPU order. The CUDA runtime is
env.json's `cuda` (torch's build), beside the driver's `cuda_driver`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Any

from specbench.analysis.compare.environment import GPU_ENV_KEYS

QUERY = {
    "name": "gpu_name",
    "driver_version": "gpu_driver",
    "memory.total": "gpu_memory_total_mib",
    "clocks.sm": "gpu_clock_sm_mhz",
    "clocks.max.sm": "gpu_clock_max_sm_mhz",
    "clocks.mem": "gpu_clock_mem_mhz",
    "power.limit": "gpu_power_limit_w",
    "mig.mode.current": "gpu_mig_mode",
    "ecc.mode.current": "gpu_ecc_mode",
}
ABSENT = re.compile(r"^\[.*\]$|^N/A$|^$")  # [N/A], [Not Supported], [Unknown Error], …
TIMEOUT_S = 10.0


def _smi(exe: str, *args: str) -> str | None:
    """nvidia-smi's stdout, or None when it fails or hangs (a wedged driver must not stall a run)."""
    try:
        proc = subprocess.run(
            [exe, *args], capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _value(text: str) -> str | int | float | None:
    text = text.strip()
    if ABSENT.match(text):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def parse_query(stdout: str) -> list[dict[str, Any]]:
    """One dict per GPU (env.json keys) from `--query-gpu=… --format=csv,noheader,nounits`."""
    rows = []
    for line in stdout.splitlines():
        if line.strip():
            cells = [c.strip() for c in line.split(",")]
            if len(cells) == len(QUERY):
                rows.append({key: _value(c) for key, c in zip(QUERY.values(), cells, strict=True)})
    return rows


def parse_processes(stdout: str, own_pid: int) -> str:
    """'pid N NAME M MiB; …' for every compute process but this one; 'none' when there is none."""
    out = []
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 3 or not cells[0].isdigit() or int(cells[0]) == own_pid:
            continue
        used = _value(cells[2])
        mem = f" {used} MiB" if isinstance(used, int | float) else ""
        out.append(f"pid {cells[0]} {os.path.basename(cells[1])}{mem}")
    return "; ".join(out) or "none"


def gpu_environment(own_pid: int | None = None) -> dict[str, Any]:
    """env.json's GPU fields (module docstring)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {"gpu_query": "nvidia-smi not found on PATH: no GPU fields recorded"}
    fields = ",".join(QUERY)
    stdout = _smi(exe, f"--query-gpu={fields}", "--format=csv,noheader,nounits")
    rows = parse_query(stdout or "")
    if not rows:
        return {"gpu_query": "nvidia-smi --query-gpu failed or listed no GPU: no GPU fields"}
    env: dict[str, Any] = {"gpu_query": "nvidia-smi"}
    for key in QUERY.values():
        values = [r[key] for r in rows]
        distinct = list(dict.fromkeys(values))
        env[key] = (
            distinct[0]
            if len(distinct) == 1
            else " | ".join("absent" if v is None else str(v) for v in values)
        )
    header = _smi(exe) or ""
    match = re.search(r"CUDA Version:\s*([0-9.]+)", header)
    env["cuda_driver"] = match.group(1) if match else None
    env["gpu_count"] = len(rows)
    apps = _smi(exe, "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader,nounits")  # fmt: skip
    pid = os.getpid() if own_pid is None else own_pid
    env["gpu_other_processes"] = parse_processes(apps, pid) if apps is not None else None
    env["gpu_fields_absent"] = [k for k in GPU_ENV_KEYS if env.get(k) is None]
    return env
