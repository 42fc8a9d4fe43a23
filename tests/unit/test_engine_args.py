"""Multi-GPU and multi-node engine arguments (issue 34 item 7, docs/serving.md "Multi-GPU and
multi-node"): the config's `engine.tensor_parallel_size`, `pipeline_parallel_size` and
`distributed_executor_backend` are bounded (one line, exit 2), reach `vllm.LLM`'s keyword
arguments under vLLM's own EngineArgs names (the names recorded in engine-keys.json from the
installed vLLM 0.32.0; tests/harness/test_schedule_vllm.py re-reads them from an installed vLLM),
and the pasted `vllm serve` lines carry the measured layout. Pure: no model, no vLLM."""

from __future__ import annotations

import json
import re
import shlex
import typing
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from typer.testing import CliRunner

from specbench.analysis.decide.gamma_schedule import OPEN_END
from specbench.analysis.documents.results_model import RunEnv
from specbench.analysis.pipeline.results import build_results
from specbench.cli.app import app
from specbench.config import parse_config
from specbench.config.backends import ExecutorBackend
from specbench.config.stored import StoredConfig
from specbench.errors import SpecbenchError
from specbench.harness.serving.openai.endpoints import check_endpoints, endpoints_of
from specbench.harness.serving.vllm.vllm_args import engine_args
from specbench.report.schedule import schedule_export as ex
from specbench.report.sections.paste import paste_line
from tests.unit.test_engine_exports import _two_workload_run
from tests.unit.test_engine_metrics import _minimal, synthetic_engine_run

RECORDED = ex.engine_keys().vllm_engine_args
runner = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"})
BASE: dict[str, Any] = {
    "backend": "vllm",
    "target": {"model": "org/target", "dtype": "bfloat16"},
    "draft": {"model": "org/draft"},
    "workloads": [{"name": "w", "dataset": {"name": "tiny_code"}}],
}
TWO_NODES = {"tensor_parallel_size": 4, "pipeline_parallel_size": 2, "distributed_executor_backend": "ray"}  # fmt: skip


def _cfg(**engine: Any) -> Any:
    return parse_config({**BASE, "engine": engine}, "c.yaml")


def test_the_parallel_layout_reaches_the_engine_exactly() -> None:
    kw = engine_args(_cfg(**TWO_NODES, max_model_len=4096), "/m/target", on_cpu=False)
    assert kw == {
        "model": "/m/target",
        "dtype": "bfloat16",
        "tensor_parallel_size": 4,
        "pipeline_parallel_size": 2,
        "distributed_executor_backend": "ray",
        "enforce_eager": False,
        "seed": 0,
        "trust_remote_code": False,
        "disable_log_stats": False,
        "max_model_len": 4096,
    }
    # every name is one of vLLM's EngineArgs fields as recorded from the installed source
    assert set(kw) <= set(RECORDED.keys), set(kw) - set(RECORDED.keys)
    # not given: vLLM chooses the executor (mp on one node); the sizes are vLLM's defaults
    plain = engine_args(_cfg(), "/m/target", on_cpu=True)
    assert "distributed_executor_backend" not in plain
    assert plain["tensor_parallel_size"] == plain["pipeline_parallel_size"] == 1
    assert plain["gpu_memory_utilization"] == 0.3  # the CPU default, as before


def test_executor_values_are_vllms_own() -> None:
    """The config takes vLLM's DistributedExecutorBackend values (vllm/config/parallel.py, as
    recorded) except external_launcher, which is refused with its reason."""
    accepted = set(typing.get_args(ExecutorBackend))
    assert accepted == set(RECORDED.distributed_executor_backends) - {"external_launcher"}
    for backend in sorted(accepted):
        world = {"tensor_parallel_size": 2} if backend != "uni" else {}
        assert _cfg(distributed_executor_backend=backend, **world).engine.distributed_executor_backend == backend  # fmt: skip


TP, PP, EXEC = "tensor_parallel_size", "pipeline_parallel_size", "distributed_executor_backend"
BAD_LAYOUTS = [
    ({TP: 0}, f"engine.{TP}: Input should be greater than or equal to 1"),
    ({PP: 1025}, f"engine.{PP}: Input should be less than or equal to 1024"),
    ({TP: "eight"}, f"engine.{TP}: Input should be a valid integer"),
    ({EXEC: "slurm"}, "Input should be 'mp', 'ray' or 'uni'"),
    ({EXEC: "external_launcher"}, "one copy of the program per GPU"),
    ({EXEC: "uni", PP: 2}, "uni runs one process on one GPU"),
    ({"extra": {TP: 8}}, f"extra.{TP}: give it as engine.{TP}"),
]


@pytest.mark.parametrize(("engine", "message"), BAD_LAYOUTS)
def test_bad_layouts_are_one_line(engine: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecbenchError) as err:
        _cfg(**engine)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_validate_refuses_a_bad_layout_with_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**BASE, "engine": {"tensor_parallel_size": -4}}))
    res = runner.invoke(app, ["validate", str(path), "--offline"])
    assert res.exit_code == 2
    (line,) = [x for x in res.output.splitlines() if x.strip()]
    assert "engine.tensor_parallel_size" in line and "Traceback" not in res.output


def _argv_flags(line: str) -> tuple[list[str], dict[str, str]]:
    """The line's argv and its flags → values (a bare boolean flag: "")."""
    argv = shlex.split(line)
    end = argv.index("--speculative-config")
    flags: dict[str, str] = {}
    i = 3
    while i < end:
        bare = i + 1 >= end or argv[i + 1].startswith("--")
        flags[argv[i]] = "" if bare else argv[i + 1]
        i += 1 if bare else 2
    return argv, flags


def test_the_vllm_serve_line_carries_the_measured_layout() -> None:
    conf = {"method": "draft_model", "model": "org/draft", "num_speculative_tokens": 3}
    argv, flags = _argv_flags(ex.vllm_command("org/target", conf, {"model": "x", **TWO_NODES}))
    assert argv[:3] == ["vllm", "serve", "org/target"]
    assert flags == {
        "--tensor-parallel-size": "4",
        "--pipeline-parallel-size": "2",
        "--distributed-executor-backend": "ray",
    }
    assert set(flags) <= set(RECORDED.serve_flags.values())
    assert json.loads(argv[-1]) == conf
    # vLLM's defaults (one GPU, vLLM's executor) are left off; no engine args: no flags
    one = {"tensor_parallel_size": 1, "pipeline_parallel_size": 1}
    assert ex.vllm_command("t", conf, one) == ex.vllm_command("t", conf)
    assert _argv_flags(ex.vllm_command("t", conf, {"tensor_parallel_size": 8}))[1] == {
        "--tensor-parallel-size": "8"
    }


def test_schedule_and_the_first_screen_paste_the_measured_layout(tmp_path: Path) -> None:
    run = _two_workload_run(tmp_path)
    env = {"backend": "vllm", "engine_args": {"model": "org/target", **TWO_NODES}}
    (run / "env.json").write_text(json.dumps(env))
    res = runner.invoke(app, ["schedule", str(run), "--format", "vllm"])
    assert res.exit_code == 0, res.output
    argv, flags = _argv_flags(res.stdout.strip())
    assert argv[2] == "org/target" and flags["--tensor-parallel-size"] == "4"
    assert flags["--pipeline-parallel-size"] == "2"
    assert flags["--distributed-executor-backend"] == "ray"
    # an openai run's servers were started by someone else: their layout is not known here
    (run / "env.json").write_text(json.dumps({**env, "backend": "openai"}))
    res = runner.invoke(app, ["schedule", str(run), "--format", "vllm"])
    assert res.exit_code == 0 and "--tensor-parallel-size" not in res.stdout

    cfg = {**_minimal(), "name": "eng", "concurrency": [1, 8], "decision": {"bootstrap": 300}}
    results = build_results(
        synthetic_engine_run(), StoredConfig.model_validate(cfg), RunEnv.model_validate(env)
    )
    g = results.global_.by_temperature[0]
    line = paste_line(results, g)
    assert g.verdict == "on" and line is not None
    argv, flags = _argv_flags(line)
    assert flags == {
        "--tensor-parallel-size": "4",
        "--pipeline-parallel-size": "2",
        "--distributed-executor-backend": "ray",
    }


SERVING = Path(__file__).resolve().parents[2] / "docs" / "serving.md"


def _yaml_block(first_line: str) -> str:
    page = SERVING.read_text("utf-8")
    (block,) = re.findall(rf"```yaml\n({re.escape(first_line)}\n.*?)```", page, re.S)
    return str(block)


def test_the_documented_two_node_config_is_the_shipped_one() -> None:
    shipped = (SERVING.parents[1] / "configs" / "llama70b-vllm-2node.yaml").read_text("utf-8")
    body = "\n".join(x for x in shipped.splitlines() if x and not x.startswith("#")) + "\n"
    assert _yaml_block("extends: llama70b-vllm.yaml") == body


def test_the_documented_fleet_is_a_valid_config_of_servers_on_other_hosts() -> None:
    cfg = parse_config(yaml.safe_load(_yaml_block("# a fleet measured from one client: one server per setting, each on its own host")), "serving.md")  # fmt: skip
    eps = endpoints_of(cfg)
    check_endpoints(eps)
    hosts = {urlsplit(e.url).hostname for e in eps}
    assert len(hosts) == len(eps) == 3 and not hosts & {"localhost", "127.0.0.1"}
    assert [e.gamma for e in eps] == [0, 4, 3]


# --- every parallel and multi-node flag of the pasted line (issue 34 item 7) ---------------

MP_TWO_NODES = {
    "tensor_parallel_size": 8,
    "pipeline_parallel_size": 2,
    "distributed_executor_backend": "mp",
    "nnodes": 2,
    "node_rank": 0,
    "master_addr": "10.0.0.1",
    "master_port": 29600,
}


def test_every_flag_pasted_is_a_recorded_vllm_serve_flag() -> None:
    """Every parallel / multi-node EngineArgs value set away from vLLM's default reaches the
    `vllm serve` line under its recorded option; each flag on the line is in the recorded list."""
    conf = {"method": "draft_model", "model": "org/draft", "num_speculative_tokens": 3}
    every = {
        **MP_TWO_NODES,
        "data_parallel_size": 2,
        "data_parallel_size_local": 1,
        "data_parallel_start_rank": 1,
        "data_parallel_address": "10.0.0.1",
        "data_parallel_rpc_port": 13345,
        "data_parallel_backend": "ray",
        "decode_context_parallel_size": 2,
        "prefill_context_parallel_size": 2,
    }
    _, flags = _argv_flags(ex.vllm_command("org/target", conf, {"model": "x", "seed": 0, **every}))
    assert set(flags) <= set(RECORDED.serve_flags.values())
    expect = {RECORDED.serve_flags[k]: str(v) for k, v in every.items() if k != "node_rank"}
    assert flags == expect  # node_rank 0 is vLLM's default: left off
    assert set(RECORDED.serve_flags) == set(RECORDED.serve_flag_defaults)
    assert set(RECORDED.serve_flags) <= set(RECORDED.keys)  # engine.extra passes them
    # vLLM's own defaults give no flag at all
    defaults = {k: v for k, v in RECORDED.serve_flag_defaults.items() if v is not None}
    assert ex.vllm_command("t", conf, defaults) == ex.vllm_command("t", conf)
    # the execution mode: an eager engine is pasted with vLLM's bare flag (a boolean option)
    eager = shlex.split(ex.vllm_command("t", conf, {"enforce_eager": True, "nnodes": 2}))
    assert eager[2:5] == ["t", "--nnodes", "2"] and eager[5] == "--enforce-eager"
    assert ex.vllm_command("t", conf, {"enforce_eager": False}) == ex.vllm_command("t", conf)
    assert set(RECORDED.serve_bool_flags) <= set(RECORDED.serve_flags)
    # other nodes of a multi-node mp layout: the same line with their rank, headless
    note = ex.vllm_other_nodes(MP_TWO_NODES)
    assert note is not None and "--node-rank i --headless" in note and "1 … 1" in note
    assert ex.vllm_other_nodes({"tensor_parallel_size": 8}) is None


def test_schedule_pastes_the_multi_node_mp_layout(tmp_path: Path) -> None:
    run = _two_workload_run(tmp_path)
    env = {"backend": "vllm", "engine_args": {"model": "org/target", **MP_TWO_NODES}}
    (run / "env.json").write_text(json.dumps(env))
    res = runner.invoke(app, ["schedule", str(run), "--format", "vllm"])
    assert res.exit_code == 0, res.output
    _, flags = _argv_flags(res.stdout.strip())
    assert flags["--nnodes"] == "2" and flags["--master-addr"] == "10.0.0.1"
    assert flags["--master-port"] == "29600" and "--node-rank" not in flags
    assert "run the same line with --node-rank i --headless" in res.stderr


CONFIGS = SERVING.parents[1] / "configs"


def _pasted_for(raw: dict[str, Any], gamma: int = 4) -> str:
    """The line `specbench schedule --format vllm` pastes for a run of this config whose
    schedule is γ at every batch size: env.json's engine_args are `engine_args(cfg)` (what the
    vllm backend passes to vllm.LLM), its speculative_config the config's method, draft and
    options (vllm_backend.speculative_config)."""
    from specbench.config import speculative_specs

    cfg = parse_config(raw, "c.yaml")
    kw = engine_args(cfg, cfg.target.model, on_cpu=False)
    spec = speculative_specs(cfg.speculative)[0]
    base = {"method": spec.method, "model": spec.model or cfg.draft.model, **spec.options}
    conf = ex.vllm_speculative_config([[1, OPEN_END, gamma]], base)
    return ex.vllm_command(cfg.target.model, conf, kw)


def test_the_documented_70b_lines_are_what_schedule_pastes() -> None:
    from specbench.config.loader import deep_merge, read_yaml

    page = SERVING.read_text("utf-8")
    shown = [x.strip() for x in page.splitlines() if x.startswith("    vllm serve meta-llama/")]
    one = read_yaml(CONFIGS / "llama70b-vllm.yaml")
    two = read_yaml(CONFIGS / "llama70b-vllm-2node.yaml")
    mp = yaml.safe_load(_yaml_block("# two nodes without Ray: vLLM's mp executor across nodes (specbench runs on node 0)"))  # fmt: skip
    assert mp.pop("extends") == "llama70b-vllm.yaml"
    lines = [_pasted_for(one), _pasted_for(two), _pasted_for(deep_merge(one, mp))]
    assert shown == lines
    for line in lines:
        _, flags = _argv_flags(line)
        assert set(flags) <= set(RECORDED.serve_flags.values())


def _other_engines_for(raw: dict[str, Any], gamma: int = 4) -> tuple[str, str, list[str]]:
    """(SGLang's line, TensorRT-LLM's YAML, their notes) that `specbench schedule --format
    sglang|trtllm` writes for a run of this config at γ everywhere (the same engine_args and
    speculative_config as `_pasted_for`)."""
    from specbench.config import speculative_specs
    from specbench.report.schedule import parallel_layout as pl

    cfg = parse_config(raw, "c.yaml")
    kw = engine_args(cfg, cfg.target.model, on_cpu=False)
    spec = speculative_specs(cfg.speculative)[0]
    dep = ex.Deployment(cfg.target.model, spec.method, spec.model or cfg.draft.model, spec.options)
    sg, trt = pl.sglang_layout(kw), pl.trtllm_layout(kw)
    text = yaml.safe_dump(ex.trtllm_options([[1, OPEN_END, gamma]], dep, trt.keys), sort_keys=False)
    return ex.sglang_command(dep, gamma, sg.flags), text, [*sg.notes, *trt.notes]


def test_the_documented_70b_sglang_and_trtllm_lines_are_what_schedule_writes() -> None:
    from specbench.config.loader import deep_merge, read_yaml

    page = SERVING.read_text("utf-8")
    shown = [x.strip() for x in page.splitlines() if x.startswith("    python -m sglang.launch_")]
    one = read_yaml(CONFIGS / "llama70b-vllm.yaml")
    two = read_yaml(CONFIGS / "llama70b-vllm-2node.yaml")
    mp = yaml.safe_load(_yaml_block("# two nodes without Ray: vLLM's mp executor across nodes (specbench runs on node 0)"))  # fmt: skip
    mp.pop("extends")
    built = [_other_engines_for(c) for c in (one, two, deep_merge(one, mp))]
    assert shown == [b[0] for b in built]
    head = "# trtllm-serve meta-llama/Llama-3.3-70B-Instruct --extra_llm_api_options THIS_FILE.yaml"
    for (_, text, _), where in zip(built, ("one node", "two nodes, Ray", "two nodes, MPI"), strict=True):  # fmt: skip
        assert _yaml_block(f"{head} ({where})").split("\n", 1)[1] == text
    # what the page says stderr adds: the executor not carried to SGLang, the MPI launch
    assert any("distributed_executor_backend not carried (ray" in n for n in built[1][2])
    assert any("srun -N 2 --ntasks-per-node 8" in n for n in built[2][2])
    for line, text, _ in built:
        flags = {f.removeprefix("--").replace("-", "_") for f in shlex.split(line) if f[:2] == "--"}
        assert flags <= ex.engine_keys().sglang.known()
        top = set(yaml.safe_load(text)) - {"speculative_config"}
        assert top <= set(ex.engine_keys().trtllm.parallel.keys)


def test_schedule_writes_the_multi_node_layout_for_sglang_and_trtllm(tmp_path: Path) -> None:
    """The command end to end on a run measured as two mp nodes: SGLang's line carries the sizes
    and node 0's rendezvous as --dist-init-addr; TensorRT-LLM's YAML the sizes; stderr says what
    neither carries and how the nodes start."""
    run = _two_workload_run(tmp_path)
    env = {"backend": "vllm", "engine_args": {"model": "org/target", **MP_TWO_NODES}}
    (run / "env.json").write_text(json.dumps(env))
    res = runner.invoke(app, ["schedule", str(run), "--format", "sglang", "--concurrency", "1"])
    assert res.exit_code == 0, res.output
    argv = shlex.split(res.stdout.strip())
    assert argv[argv.index("--tp-size") + 1] == "8" and argv[argv.index("--pp-size") + 1] == "2"
    assert argv[argv.index("--dist-init-addr") + 1] == "10.0.0.1:29600"
    assert "--node-rank" not in argv and "run the same line with --node-rank i" in res.stderr
    assert "vLLM's distributed_executor_backend not carried (mp" in res.stderr
    res = runner.invoke(app, ["schedule", str(run), "--format", "trtllm"])
    assert res.exit_code == 0, res.output
    doc = yaml.safe_load(res.stdout)
    assert doc["tensor_parallel_size"] == 8 and doc["pipeline_parallel_size"] == 2
    assert doc["speculative_config"]["decoding_type"] == "Draft_Target"
    assert "one MPI world of 16 processes" in res.stderr
    assert "vLLM's master_addr not carried (10.0.0.1" in res.stderr
