"""The engine exports of `specbench schedule` (report/schedule/schedule_export.py, docs/schedule.md): every
key written is in the engines' config classes as recorded in specbench/assets/engine-keys.json
(copied from their published source at the named commits); and the pool schedule
(analysis/decide/pool_schedule.py): its throughput ratio weights the workloads by tokens as the formula
says (hand-computed), its decision follows the weights, the command writes it, and a seeded
simulation measures its false-ON rate and power."""

from __future__ import annotations

import copy
import json
import re
import shlex
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from specbench.analysis.calibration import pool_calibration as cal
from specbench.analysis.decide.gamma_schedule import OPEN_END, gamma_at
from specbench.analysis.decide.pool_schedule import PoolMember, pool_schedule
from specbench.analysis.documents.results_model import RunEnv
from specbench.analysis.documents.settings import AnalysisSettings
from specbench.cli.app import app
from specbench.config.stored import StoredConfig
from specbench.errors import SpecbenchError
from specbench.report.schedule import parallel_layout as pl
from specbench.report.schedule import schedule_export as ex
from tests.unit.test_engine_metrics import _minimal, _req, synthetic_engine_run

RANGES = [[1, 3, 4], [4, 11, 2], [12, 40, 1], [41, OPEN_END, 0]]
KEYS = ex.engine_keys()
runner = CliRunner(env={"COLUMNS": "80", "NO_COLOR": "1"})


def _dep(method: str) -> ex.Deployment:
    opts: dict[str, Any] = {"draft_sample_method": "greedy"}
    if method == "ngram":
        opts |= {"prompt_lookup_min": 1, "prompt_lookup_max": 3}
    draft = "org/draft" if method in ex.NEEDS_DRAFT else None
    return ex.Deployment("org/target", method, draft, opts)


def test_the_recorded_list_names_its_sources() -> None:
    for engine in ("vllm", "sglang", "trtllm"):
        rec = {"vllm": KEYS.vllm, "sglang": KEYS.sglang, "trtllm": KEYS.trtllm}[engine]
        assert rec.repository.startswith("github.com/") and rec.path.endswith(".py")
        assert re.fullmatch(r"[0-9a-f]{40}", rec.commit), engine


@pytest.mark.parametrize("method", ["draft_model", "eagle", "eagle3", "mtp", "ngram"])
def test_every_vllm_key_written_is_a_speculative_config_field(method: str) -> None:
    dep = _dep(method)
    base = {"method": dep.method, **({"model": dep.draft} if dep.draft else {}), **dep.options}
    argv = shlex.split(ex.vllm_command(dep.target, ex.vllm_speculative_config(RANGES, base)))
    assert argv[:3] == ["vllm", "serve", "org/target"] and argv[3] == "--speculative-config"
    conf = json.loads(argv[4])
    assert set(conf) <= set(KEYS.vllm.keys), set(conf) - set(KEYS.vllm.keys)
    assert conf["method"] in KEYS.vllm.methods
    assert conf["num_speculative_tokens"] == 4 and conf["num_speculative_tokens_per_batch_size"]
    # one range: the plain fixed-γ config, no per-batch key
    one = ex.vllm_speculative_config([[1, OPEN_END, 3]], base)
    assert one["num_speculative_tokens"] == 3 and "num_speculative_tokens_per_batch_size" not in one


@pytest.mark.parametrize("method", sorted(ex.SGLANG_ALGORITHM))
def test_every_sglang_flag_written_is_a_server_arg(method: str) -> None:
    argv = shlex.split(ex.sglang_command(_dep(method), 3))
    assert argv[:3] == ["python", "-m", "sglang.launch_server"]
    flags = dict(zip(argv[3::2], argv[4::2], strict=True))
    keys = {f.removeprefix("--").replace("-", "_") for f in flags}
    assert keys <= set(KEYS.sglang.keys), keys - set(KEYS.sglang.keys)
    assert flags["--speculative-algorithm"] in KEYS.sglang.algorithms
    # a chain: one candidate per step, the verify window γ + 1
    assert flags["--speculative-num-steps"] == "3" and flags["--speculative-eagle-topk"] == "1"
    assert flags["--speculative-num-draft-tokens"] == "4"
    assert ("--speculative-draft-model-path" in flags) == (method in ex.NEEDS_DRAFT)


def test_sglang_takes_one_gamma_per_server() -> None:
    with pytest.raises(SpecbenchError, match="give --concurrency"):
        ex.one_gamma(RANGES, None)
    assert [ex.one_gamma(RANGES, c) for c in (1, 4, 12, 41)] == [4, 2, 1, 0]
    assert ex.one_gamma([[1, OPEN_END, 2]], None) == 2
    with pytest.raises(SpecbenchError, match="no SGLang chain-drafter"):
        ex.sglang_flags(_dep("ngram"), 2)
    with pytest.raises(SpecbenchError, match="serve without speculation"):
        ex.sglang_flags(_dep("draft_model"), 0)


@pytest.mark.parametrize("method", sorted(ex.TRTLLM_DECODING_TYPE))
def test_every_trtllm_key_written_is_a_decoding_config_field(method: str) -> None:
    opts = yaml.safe_load(yaml.safe_dump(ex.trtllm_options(RANGES, _dep(method))))
    conf = opts["speculative_config"]
    kind = conf["decoding_type"]
    assert kind in KEYS.trtllm.decoding_types
    allowed = set(KEYS.trtllm.base_keys) | set(KEYS.trtllm.decoding_types[kind])
    assert set(conf) <= allowed, set(conf) - allowed
    assert not ex.unknown_keys("trtllm", list(conf), kind)
    assert conf["max_draft_len"] == 4
    assert ("speculative_model" in conf) == (method in ex.NEEDS_DRAFT)
    for b in [*range(1, 100), OPEN_END, OPEN_END + 1]:
        assert ex.trtllm_draft_len(conf["draft_len_schedule"], b) == gamma_at(RANGES, b), b


# --- the pool schedule ---------------------------------------------------------------------


def _workload(name: str, spec_tpot: dict[int, float], n: int = 12) -> list[dict[str, Any]]:
    """Baseline TPOT 10 ms at concurrency 1 and 8 (e2e 330 ms for 33 tokens); γ=3 at the given
    TPOT per concurrency; a small per-prompt jitter shared by both sides."""
    rng = np.random.default_rng(len(name))
    recs = []
    for i in range(n):
        j = float(rng.normal(0, 0.05))
        for c, tpot in spec_tpot.items():
            for r in (
                _req("baseline", f"p{i}", 0, c, 10.0 + j),
                _req("spec", f"p{i}", 3, c, tpot + j),
            ):
                recs.append({**r, "workload": name})
    return recs


def _members(recs: list[dict[str, Any]], w_fast: float, w_flat: float) -> list[PoolMember]:
    from specbench.analysis.decide.pool_schedule import pool_members

    s = AnalysisSettings(n_boot=400, weights={"fast": w_fast, "flat": w_flat})
    return pool_members(recs, s, 0.0)


def test_pool_throughput_ratio_weights_the_workloads_by_tokens() -> None:
    """fast: γ=3 at TPOT 5 (e2e 170 ms), flat: at TPOT 10 (330 ms), both off at 330 ms. The
    pool's ratio is Σ W·(e2e/token)_off / Σ W·(e2e/token)_γ: 330 / (½·170 + ½·330) = 1.32 at
    equal shares, 330 / (0.1·170 + 0.9·330) = 1.051 when flat carries 90 % of the tokens."""
    recs = _workload("fast", {1: 5.0, 8: 12.0}) + _workload("flat", {1: 10.0, 8: 12.0})
    s = AnalysisSettings(n_boot=400)
    for (wf, wl), want, on in [((0.5, 0.5), 1.32, 3), ((0.1, 0.9), 330 / 314, 0)]:
        doc = pool_schedule(_members(recs, wf, wl), s)
        assert doc is not None
        c1 = doc.concurrencies[0]
        ratio = c1.throughput_ratio["3"]
        assert c1.concurrency == 1
        assert ratio is not None and ratio.value == pytest.approx(want, rel=0.01)
        assert c1.gamma == on  # equal shares: ON; flat's 90 %: 1.051 does not clear 1.05
        assert doc.concurrencies[1].gamma == 0  # 12 ms at 8: slower than off
        assert f"pool of 2 workloads (fast {wf:.0%}, flat {wl:.0%}" in doc.family


def test_pool_cells_need_every_workload() -> None:
    recs = _workload("fast", {1: 5.0, 8: 12.0}) + _workload("flat", {1: 10.0})
    doc = pool_schedule(_members(recs, 0.5, 0.5), AnalysisSettings(n_boot=200))
    assert doc is not None and [r.concurrency for r in doc.concurrencies] == [1]


def _two_workload_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    recs = synthetic_engine_run()
    flat = copy.deepcopy(recs)
    for r in flat:
        r["workload"] = "w2"
        if r["kind"] == "spec" and r["concurrency"] == 1:  # no gain at 1 for w2
            r["wall_ms"] = r["e2e_ms"][0] = 10.0 + (10.0 + (r["tpot_ms"] - 5.0)) * 32
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs + flat))
    cfg = {
        **_minimal(),
        "name": "eng",
        "workloads": [
            {"name": "w", "dataset": {"name": "tiny_code"}, "weight": 0.5},
            {"name": "w2", "dataset": {"name": "tiny_code"}, "weight": 0.5},
        ],
        "concurrency": [1, 8],
        "decision": {"bootstrap": 300},
    }
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    return run


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_schedule_command_writes_the_pool_by_default(tmp_path: Path) -> None:
    run = _two_workload_run(tmp_path)
    res = runner.invoke(app, ["schedule", str(run)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["workload"] == "pool of w, w2" and "pool of 2 workloads" in doc["family"]
    # schema 2: closed-loop tokens/s is "throughput" (goodput is SLO goodput only)
    assert doc["schema"] == 2 and doc["throughput"].startswith("closed-loop output tokens/s")
    assert "goodput" not in res.stdout
    ratio = doc["measured"][0]["throughput_ratio"]["3"]["value"]
    own = json.loads(runner.invoke(app, ["schedule", str(run), "--workload", "w"]).stdout)
    assert own["workload"] == "w"
    assert 1.0 < ratio < own["measured"][0]["throughput_ratio"]["3"]["value"]  # w2 dilutes w
    res = runner.invoke(app, ["schedule", str(run), "--format", "trtllm"])
    assert res.exit_code == 0, res.output
    conf = yaml.safe_load(res.stdout)["speculative_config"]
    assert conf["decoding_type"] == "Draft_Target" and conf["speculative_model"] == "DRAFT_MODEL"
    assert "trtllm-serve t --extra_llm_api_options" in res.stderr


@pytest.mark.slow
def test_pool_schedule_false_on_rate_holds_at_the_boundary() -> None:
    """Every cell of both workloads (70 % / 30 % of tokens) at true ratio 1 + margin: ON at any
    concurrency in at most 2.5 % of runs (within two standard errors; 200 runs, 8 prompts each)."""
    rate, se = cal.pool_false_on_rate(8, [2, 4], [1, 4, 16], [0.7, 0.3], reps=200, seed=21)
    assert rate <= 0.025 + 2 * se, (rate, se)


@pytest.mark.slow
def test_pool_schedule_has_power_when_one_workload_gains() -> None:
    """One workload at 1.6×, the other at 1.1×, equal shares (pool 1/(½/1.6 + ½/1.1) = 1.30),
    16 prompts each: most (run, concurrency) pairs are decided ON."""
    rate, _ = cal.pool_power(16, [2, 4], [1, 4, 16], [1.6, 1.1], [0.5, 0.5], reps=40, seed=22)
    assert rate >= 0.7, rate


def test_pool_of_nothing_is_none() -> None:
    assert pool_schedule([], AnalysisSettings()) is None
    with pytest.raises(SpecbenchError, match="TensorRT-LLM decoding_type"):
        ex.trtllm_options(RANGES, ex.Deployment("t", "suffix"))


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_first_screen_prints_the_flag_to_paste(tmp_path: Path) -> None:
    """An engine run's ON decision comes with the `vllm serve` line that starts it; its JSON
    holds only recorded SpeculativeConfig keys."""
    from rich.console import Console

    from specbench.analysis.pipeline.results import build_results
    from specbench.report.run.console import render_summary
    from specbench.report.sections.decision import decision_blocks
    from specbench.report.sections.paste import paste_line

    recs = synthetic_engine_run()
    cfg = {**_minimal(), "name": "eng", "concurrency": [1, 8], "decision": {"bootstrap": 300}}
    results = build_results(recs, StoredConfig.model_validate(cfg), RunEnv())
    console = Console(record=True, width=400)
    render_summary(console, results)
    line = next(x for x in console.export_text().splitlines() if "paste (T=0)" in x)
    argv = shlex.split(line.split(": ", 1)[1])
    assert argv[:3] == ["vllm", "serve", "t"]
    conf = json.loads(argv[argv.index("--speculative-config") + 1])
    assert conf["num_speculative_tokens"] == 3 and conf["method"] == "draft_model"
    assert set(conf) <= set(KEYS.vllm.keys)
    assert any("paste (T=0): `vllm serve t" in str(b) for b in decision_blocks(results))
    # an openai run whose servers name no method: no line rather than a guessed one
    env = {"backend": "openai", "servers": [{"url": "http://a", "gamma": 3, "label": "x"}]}
    openai = StoredConfig.model_validate({**cfg, "backend": "openai"})
    plain = build_results(recs, openai, RunEnv.model_validate(env))
    g = plain.global_.by_temperature[0]
    assert g.verdict == "on" and paste_line(plain, g) is None
    env["servers"][0] |= {"label": g.drafter, "method": "eagle3"}
    named = build_results(recs, openai, RunEnv.model_validate(env))
    line = paste_line(named, named.global_.by_temperature[0])
    assert line is not None and '"method": "eagle3"' in line


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_the_profiles_traffic_mix_sets_the_pools_shares(tmp_path: Path) -> None:
    """A deployment profile's workload shares replace the workloads' weight; with a temperature
    mix and no --temperature, every measured temperature enters in its share (names "w T=t")."""
    run = _two_workload_run(tmp_path)
    recs = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()]
    hot = [{**r, "temperature": 1.0} for r in recs if r["workload"] == "w"]
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs + hot))
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    cfg["profile"] = {"traffic": {"workloads": {"w": 1, "w2": 9}}}
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    doc = json.loads(runner.invoke(app, ["schedule", str(run), "--temperature", "0"]).stdout)
    assert "(w 10%, w2 90%" in doc["family"]
    cfg["profile"]["traffic"]["temperatures"] = {0.0: 3, 1.0: 1}
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    res = runner.invoke(app, ["schedule", str(run)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    # w at T=0: 10 % × 75 % = 7.5; w at T=1: 10 % × 25 % = 2.5; w2 at T=0: 90 % × 75 % = 67.5
    # (w2 has no T=1), renormalised over 77.5: 9.7 %, 3.2 %, 87.1 % (config order, then T)
    assert "(w T=0 10%, w T=1 3%, w2 T=0 87% of output tokens)" in doc["family"]
    assert doc["temperature"] is None
    cfg["profile"]["traffic"] = {"workloads": {"w": -1}}
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    res = runner.invoke(app, ["schedule", str(run), "--temperature", "0"])
    assert res.exit_code == 2 and "profile.traffic.workloads" in res.output


# --- the measured layout in SGLang's and TensorRT-LLM's own keys (issue 34 items 4, 7) ---------

EVERY_LAYOUT: dict[str, Any] = {
    "tensor_parallel_size": 8,
    "pipeline_parallel_size": 2,
    "data_parallel_size": 2,
    "data_parallel_size_local": 1,
    "data_parallel_start_rank": 1,
    "data_parallel_address": "10.0.0.1",
    "data_parallel_rpc_port": 13345,
    "data_parallel_backend": "ray",
    "decode_context_parallel_size": 2,
    "prefill_context_parallel_size": 2,
    "distributed_executor_backend": "ray",
    "nnodes": 2,
    "node_rank": 1,
    "master_addr": "10.0.0.1",
    "master_port": 29600,
    "enforce_eager": True,
}


def _sglang_flags(line: str) -> dict[str, str]:
    """launch_server's flags → values (a bare boolean flag: "")."""
    argv = shlex.split(line)[3:]
    flags: dict[str, str] = {}
    i = 0
    while i < len(argv):
        bare = i + 1 >= len(argv) or argv[i + 1].startswith("--")
        flags[argv[i]] = "" if bare else argv[i + 1]
        i += 1 if bare else 2
    return flags


def test_every_layout_key_written_is_an_engines_recorded_key() -> None:
    """Every vLLM layout value away from its default reaches SGLang's flags / TensorRT-LLM's
    keys under the names recorded from their source (engine-keys.json `parallel`), mapped as the
    table says: vLLM's tensor parallel 8 is SGLang's --tp-size 8, node 0's address and port one
    --dist-init-addr, eager both CUDA-graph switches; TensorRT-LLM's YAML carries the sizes,
    orchestrator_type ray and cuda_graph_config null."""
    sg = pl.sglang_layout(EVERY_LAYOUT)
    flags = _sglang_flags(ex.sglang_command(_dep("eagle3"), 3, sg.flags))
    names = {f.removeprefix("--").replace("-", "_") for f in flags}
    assert names <= KEYS.sglang.known(), names - KEYS.sglang.known()
    assert {f: flags[f] for f in flags if not f.startswith(("--speculative", "--model"))} == {
        "--tp-size": "8",
        "--pp-size": "2",
        "--dp-size": "2",
        "--dcp-size": "2",
        "--nnodes": "2",
        "--node-rank": "1",
        "--disable-prefill-cuda-graph": "",
        "--disable-decode-cuda-graph": "",
        "--dist-init-addr": "10.0.0.1:29600",
    }
    assert any("node 1's line of 2" in n and "--node-rank i" in n for n in sg.notes)
    trt = pl.trtllm_layout(EVERY_LAYOUT)
    opts = yaml.safe_load(yaml.safe_dump(ex.trtllm_options(RANGES, _dep("eagle3"), trt.keys)))
    top = set(opts) - {"speculative_config"}
    assert top <= set(KEYS.trtllm.parallel.keys), top - set(KEYS.trtllm.parallel.keys)
    assert {k: opts[k] for k in top} == {
        "tensor_parallel_size": 8,
        "pipeline_parallel_size": 2,
        "orchestrator_type": "ray",
        "cuda_graph_config": None,
    }
    assert any("one MPI world of 16 processes" in n and "-N 2" in n for n in trt.notes)
    # vLLM's defaults write nothing and say nothing
    defaults = engine_keys_defaults()
    for layout in (pl.sglang_layout(defaults), pl.trtllm_layout(defaults), pl.sglang_layout(None)):
        assert not layout.flags and not layout.keys and not layout.notes


def engine_keys_defaults() -> dict[str, Any]:
    d = KEYS.vllm_engine_args.serve_flag_defaults
    return {k: v for k, v in d.items() if v is not None}


@pytest.mark.parametrize("key", sorted(pl.LAYOUT_MAP))
def test_no_layout_value_is_dropped_silently(key: str) -> None:
    """Each vLLM layout key set away from its default is either written in the engine's own key
    or named in a `# …` note for stderr — for both engines."""
    value = EVERY_LAYOUT[key]
    for engine, layout in (
        (
            "SGLang",
            pl.sglang_layout({key: value, "nnodes": 2} if "master" in key else {key: value}),
        ),
        ("TensorRT-LLM", pl.trtllm_layout({key: value})),
    ):
        written = bool(layout.flags) or bool(layout.keys)
        noted = any(f"vLLM's {key} not carried" in n for n in layout.notes)
        assert written != noted, (engine, key, layout)  # one or the other
    # vLLM's rendezvous address on one node: SGLang needs none, and says so
    alone = pl.sglang_layout({"master_addr": "10.0.0.1"})
    assert not alone.flags and "master_addr not carried (10.0.0.1: one node" in alone.notes[0]
    # an executor other than ray is TensorRT-LLM's MPI default: said, not written
    mp = pl.trtllm_layout({"distributed_executor_backend": "mp"})
    assert not mp.keys and "default (MPI)" in mp.notes[0]
    # the draft's own tensor parallel size (a vLLM speculative option) has no key in either
    assert (
        "draft_tensor_parallel_size=8 not carried"
        in pl.draft_layout_notes("SGLang", {"draft_tensor_parallel_size": 8})[0]
    )
