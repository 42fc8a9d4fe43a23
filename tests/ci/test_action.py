"""The reusable GitHub Action (.github/actions/specbench/action.yml), its steps run here as a
runner would run them: each `run:` script in bash, with its `env:` expressions resolved from the
inputs, the GitHub context and earlier steps' outputs ($GITHUB_OUTPUT), stopping at the first
failing step. The engine is a local OpenAI-compatible server (the openai backend tests' fake
server, whose speculating instance reports vLLM-style counters); `gh` is a stub that records the
comment it would post."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.harness.test_openai_backend import FakeServer

ROOT = Path(__file__).resolve().parents[2]
ACTION = ROOT / ".github" / "actions" / "specbench" / "action.yml"
EXPR = re.compile(r"\$\{\{\s*([\w.-]+)\s*\}\}")


def _resolve(value: str, ctx: dict[str, Any]) -> str:
    def one(m: re.Match[str]) -> str:
        node: Any = ctx
        for part in m.group(1).split("."):
            node = node.get(part, "") if isinstance(node, dict) else ""
        return str(node)

    return EXPR.sub(one, value)


def run_action(inputs: dict[str, str], tmp: Path, pr: int | None) -> tuple[int, dict[str, Any]]:
    """Run the action's steps; return the exit status of the last step run and the context."""
    action = yaml.safe_load(ACTION.read_text())
    assert action["runs"]["using"] == "composite"
    defaults = {k: str(v.get("default", "")) for k, v in action["inputs"].items()}
    missing = [k for k, v in action["inputs"].items() if v.get("required") and k not in inputs]
    assert not missing, missing
    ctx: dict[str, Any] = {
        "inputs": {**defaults, **inputs},
        "github": {"token": "t0ken", "event": {"pull_request": {"number": pr or ""}}},
        "steps": {},
    }
    ctx["inputs"] = {k: _resolve(v, ctx) for k, v in ctx["inputs"].items()}
    rc = 0
    for step in action["runs"]["steps"]:
        assert "if" not in step, "the action keeps its logic in bash (testable here)"
        out_file = tmp / f"out-{len(ctx['steps'])}.txt"
        out_file.write_text("")
        env = {
            **os.environ,
            "PATH": f"{tmp / 'bin'}{os.pathsep}{os.environ['PATH']}",
            "GITHUB_OUTPUT": str(out_file),
            **{k: _resolve(str(v), ctx) for k, v in (step.get("env") or {}).items()},
        }
        proc = subprocess.run(
            ["bash", "-e", "-c", step["run"]], cwd=ROOT, env=env, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        outputs = dict(
            line.split("=", 1) for line in out_file.read_text().splitlines() if "=" in line
        )
        ctx["steps"][step.get("id", f"s{len(ctx['steps'])}")] = {
            "outputs": outputs, "stdout": proc.stdout, "stderr": proc.stderr, "rc": proc.returncode,
        }  # fmt: skip
        rc = proc.returncode
        if rc != 0:
            break
    return rc, ctx


def engine_config(tmp: Path, base: FakeServer, spec: FakeServer, **over: Any) -> Path:
    """The action's config: the speculating server and the baseline one (`over` replaces keys)."""
    cfg: dict[str, Any] = {
        "name": "ci-engine",
        "backend": "openai",
        "target": {"model": "fake"},
        "server": {
            "endpoints": [
                {"url": spec.url, "gamma": 2, "label": "spec γ=2"},
                {"url": base.url, "gamma": 0},
            ]
        },
        "workloads": [{"name": "tiny_code", "dataset": {"name": "tiny_code"}, "n": 6}],
        "sampling": {"temperatures": [0.0]},
        "concurrency": [1],
        "max_new_tokens": 13,
        "warmup": 0,
        "output_dir": str(tmp / "unused"),
        "decision": {"bootstrap": 200},
        **over,
    }
    path = tmp / "engine.yaml"
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True))
    return path


def gh_stub_and_thresholds(tmp: Path) -> Path:
    """A `gh` on tmp/bin that records the comment it would post (tmp/gh-args, tmp/gh-body), and
    the shipped thresholds file with a cheaper bootstrap (its path)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text(f'#!/bin/sh\necho "$@" > {tmp}/gh-args\ncat "$5" > {tmp}/gh-body\n')
    gh.chmod(gh.stat().st_mode | stat.S_IEXEC)
    thresholds = tmp / "thresholds.yaml"
    thresholds.write_text(
        (ROOT / "ci" / "specbench-thresholds.yaml")
        .read_text()
        .replace("bootstrap: 2000", "bootstrap: 300")
    )
    return thresholds


@pytest.mark.slow
@pytest.mark.long  # a minute or more: make test-long (CI runs it)
def test_action_measures_compares_comments_and_gates(tmp_path: Path) -> None:
    thresholds = gh_stub_and_thresholds(tmp_path)
    base, spec = FakeServer(0, step_s=0.003), FakeServer(2, step_s=0.003)
    try:
        common = {
            "config": str(engine_config(tmp_path, base, spec)),
            "specbench": f"{sys.executable} -m specbench",
            "thresholds": str(thresholds),
            "baseline": str(tmp_path / "baseline"),
        }
        # main: no baseline yet — measured, nothing compared, no comment, gate passes
        rc, ctx = run_action({**common, "out": str(tmp_path / "baseline")}, tmp_path, pr=None)
        assert rc == 0, ctx["steps"]
        # the out dir is the baseline: a run compared with itself tells nothing, so not compared
        assert "nothing to compare; it becomes the baseline" in ctx["steps"]["compare"]["stdout"]
        # a pull request whose engine drafts but accepts nothing: τ 3 → 1, ON → OFF
        spec.per_chunk = 1
        rc, ctx = run_action({**common, "out": str(tmp_path / "pr")}, tmp_path, pr=17)
    finally:
        base.close()
        spec.close()
    steps = ctx["steps"]
    assert steps["compare"]["outputs"] == {"code": "1", "compared": "true"}
    assert rc == 1 and "found a regression" in steps["s4"]["stdout"]
    assert (tmp_path / "gh-args").read_text().split()[:3] == ["pr", "comment", "17"]
    body = (tmp_path / "gh-body").read_text()
    assert body == (tmp_path / "pr" / "compare.md").read_text() and "regress" in body.lower()
    assert (tmp_path / "pr" / "compare.xml").stat().st_size > 0
    assert "Decision at batch 1 (one request in flight), per temperature" in steps["s1"]["stdout"]


def test_action_refuses_an_unreachable_endpoint_before_measuring(tmp_path: Path) -> None:
    """The validate step stops the job with one `error:` line (exit 2) when the engine is down."""
    base, spec = FakeServer(0), FakeServer(2)
    config = engine_config(tmp_path, base, spec)
    base.close()
    spec.close()
    (tmp_path / "bin").mkdir()
    rc, ctx = run_action(
        {"config": str(config), "specbench": f"{sys.executable} -m specbench"}, tmp_path, pr=3
    )
    first = ctx["steps"]["s0"]
    assert rc == 2 and len(ctx["steps"]) == 1
    errors = [line for line in first["stderr"].splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "cannot reach the server" in errors[0]
