"""`specbench accept` end to end on the tiny pair: the JSON document, the console plan, the
report, every input format, timing sources, and bad input (one line, exit 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from specbench.analysis.pipeline.results import RESULTS_SCHEMA
from tests.accept_data import (
    GOOD,
    fails_one_line,
    invoke,
    write_accept_config,
    write_rows,
    write_traffic,
)

SHIPPED = Path(__file__).resolve().parents[2] / "datasets" / "logged" / "tiny_traffic.jsonl"


@pytest.fixture(scope="module")
def traffic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_traffic(tmp_path_factory.mktemp("traffic"))


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_accept_config(tmp_path_factory.mktemp("cfg"))


def run_json(*args: str) -> dict[str, Any]:
    res = invoke(*args, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def doc(config: Path, traffic: Path) -> dict[str, Any]:
    return run_json(
        "--config",
        str(config),
        "--data",
        str(traffic),
        "--bucket-by",
        "category",
        "--t-target",
        "10",
        "--t-draft",
        "1",
    )


def _setting(bucket: dict[str, Any], label: str) -> dict[str, Any]:
    return next(s for s in bucket["settings"] if s["setting"] == label)


def test_json_has_alpha_ci_profile_and_plan_per_bucket(doc: dict[str, Any]) -> None:
    assert doc["kind"] == "accept" and doc["estimator"] == "exact_beta_teacher_forced"
    assert [s["label"] for s in doc["settings"]] == ["T=0", "T=1", "logged"]
    assert [b["bucket"] for b in doc["buckets"]] == ["code", "prose"]
    assert doc["overall"]["requests"] == 8 == sum(b["requests"] for b in doc["buckets"])
    assert doc["timing"]["source"] == "flags" and doc["timing"]["t_target_ms"] == 10
    for b in doc["buckets"]:
        assert b["requests"] == 4
        # β at T=0 is the greedy-agreement indicator
        assert _setting(b, "T=0")["alpha"]["value"] == pytest.approx(b["greedy_agreement"]["value"])
        for s in b["settings"]:
            a = s["alpha"]
            assert 0 <= a["ci95"][0] <= a["value"] <= a["ci95"][1] <= 1
            assert sum(p["tokens"] for p in s["profile"]) == s["tokens"] == b["tokens"]
            plan = s["plan"]
            assert len(plan["gammas"]) == 8
            lo = plan["speedup"]["ci95"][0]
            assert (plan["verdict"] == "on") == (
                lo is not None and lo > 1.05 and plan["best_gamma"] > 0
            )
            assert (plan["gamma"] > 0) == (plan["verdict"] == "on")
            row = plan["gammas"][max(plan["best_gamma"], 1) - 1]
            if plan["best_gamma"]:
                assert row["speedup"] == plan["speedup"]
    # 'logged' is each request at its own temperature: code rows T=0.7, prose rows T=0 (greedy)
    prose = doc["buckets"][1]
    assert _setting(prose, "logged")["alpha"]["value"] == pytest.approx(
        _setting(prose, "T=0")["alpha"]["value"]
    )


def test_console_prints_alpha_and_the_rollout_plan(
    config: Path, traffic: Path, tmp_path: Path
) -> None:
    res = invoke(
        "--config",
        str(config),
        "--data",
        str(traffic),
        "--bucket-by",
        "category",
        "--temperature",
        "1",
        "--no-logged-params",
        "--report",
        str(tmp_path / "rep"),
    )
    assert res.exit_code == 0, res.output
    assert "α and rollout plan per bucket" in res.output and "α by position" in res.output
    assert "code" in res.output and "prose" in res.output and "(all)" in res.output
    assert "no timing given: assuming T_d / T_ar = 0.1" in res.output
    for name in ("accept.json", "report.md", "report.html", "plots/accept_profile.png"):
        assert (tmp_path / "rep" / name).stat().st_size > 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "| code | T=1 |" in md and "## prose" in md
    stored = json.loads((tmp_path / "rep" / "accept.json").read_text())
    assert [s["label"] for s in stored["settings"]] == ["T=1"]


def test_chat_messages_give_the_same_alpha_asshipped_prompts(
    config: Path, traffic: Path, doc: dict[str, Any], tmp_path: Path
) -> None:
    df = pd.DataFrame([json.loads(line) for line in traffic.read_text().splitlines()])
    # a final assistant message is the response when the row has no response column
    msgs = [
        [{"role": "user", "content": p}, {"role": "assistant", "content": r}]
        for p, r in zip(df["prompt"], df["response"], strict=True)
    ]
    chat = df.assign(messages=msgs).drop(columns=["prompt", "response"])
    chat.to_json(tmp_path / "chat.jsonl", orient="records", lines=True)
    got = run_json(
        "--config",
        str(config),
        "--data",
        str(tmp_path / "chat.jsonl"),
        "--bucket-by",
        "category",
        "--chat-template",
        "off",
    )
    for label in ("T=0", "T=1", "logged"):
        want = _setting(doc["buckets"][0], label)["alpha"]["value"]
        assert _setting(got["buckets"][0], label)["alpha"]["value"] == pytest.approx(want, abs=1e-6)


def test_timing_from_a_run_results_file(config: Path, traffic: Path, tmp_path: Path) -> None:
    timing = {
        "t_draft_ms": {"mean": 2.0},
        "verify_fit": {"t0_ms": 20.0, "t1_ms_per_token": 1.0},
        "overhead_fit": {"o0_ms": 0.0, "o1_ms_per_token": 0.0},
    }
    results = {
        "schema": RESULTS_SCHEMA,
        "run": {"target": "tiny-target", "draft": "tiny-draft"},
        "workloads": [
            {"workload": "code", "temperature": 1.0, "baseline_step_ms": 20.0, "timing": timing}
        ],
    }
    (tmp_path / "results.json").write_text(json.dumps(results))
    got = run_json(
        "--config",
        str(config),
        "--data",
        str(traffic),
        "--bucket-by",
        "category",
        "--timings",
        str(tmp_path),
        "--temperature",
        "1",
    )
    code = got["buckets"][0]
    assert code["timing"]["source"] == "run" and code["timing"]["verify_slope_ms"] == 1.0
    alpha = code["settings"][0]["alpha"]["value"]
    row = code["settings"][0]["plan"]["gammas"][1]  # γ = 2
    expected = (1 - alpha**3) / (1 - alpha)
    assert row["speedup"]["value"] == pytest.approx(
        20.0 * expected / (2 * 2.0 + 20.0 + 2 * 1.0), rel=1e-4
    )


def test_measure_timing_and_long_responses_in_windows(config: Path, traffic: Path) -> None:
    got = run_json(
        "--config",
        str(config),
        "--data",
        str(traffic),
        "--measure-timing",
        "--timing-reps",
        "2",
        "--max-context",
        "48",
        "--temperature",
        "1",
    )
    assert got["timing"]["source"] == "measured" and got["timing"]["t_target_ms"] > 0
    assert got["measured_timing"]["verify_ms"]
    assert any("scored in windows" in w for w in got["warnings"])
    cut = run_json(
        "--config",
        str(config),
        "--data",
        str(traffic),
        "--max-context",
        "48",
        "--overflow",
        "truncate",
        "--temperature",
        "1",
    )
    assert any("--overflow truncate" in w for w in cut["warnings"])
    assert cut["overall"]["tokens"] < got["overall"]["tokens"]


@pytest.mark.skipif(
    not SHIPPED.is_file(), reason="datasets/logged/tiny_traffic.jsonl not generated"
)
def test_the_shipped_logged_traffic_file(config: Path) -> None:
    got = run_json(
        "--config",
        str(config),
        "--data",
        str(SHIPPED),
        "--bucket-by",
        "workload",
        "--max-requests",
        "2",
    )
    assert {b["bucket"] for b in got["buckets"]} == {"tiny_code", "tiny_prose", "tiny_structured"}
    assert all(b["requests"] == 2 for b in got["buckets"])
    assert got["settings"][-1]["label"] == "logged"


# ------------------------------------------------------------------ bad input


def test_a_malformed_row_names_its_line_and_is_skipped_only_on_request(
    config: Path, tmp_path: Path
) -> None:
    data = write_rows(
        tmp_path, [GOOD, {**GOOD, "response": "  "}, {**GOOD, "temperature": "hot"}, GOOD]
    )
    fails_one_line(
        invoke("--config", str(config), "--data", data),
        "line 2",
        "response",
        "empty",
        "--skip-bad-rows",
    )
    got = run_json("--config", str(config), "--data", data, "--skip-bad-rows")
    assert [r["row"] for r in got["data"]["skipped_rows"]] == ["line 2", "line 3"]
    assert got["overall"]["requests"] == 2


@pytest.fixture(scope="module")
def foreign_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama with its own 300-token tokenizer: not a valid draft for the tiny target."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(
        ["def f(x): return x + 1"] * 20,
        trainers.BpeTrainer(
            vocab_size=300,
            special_tokens=["<eos>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    out = tmp_path_factory.mktemp("foreign") / "m"
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>")
    cfg = LlamaConfig(
        vocab_size=len(hf),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    LlamaForCausalLM(cfg).save_pretrained(out)
    hf.save_pretrained(out)
    return out


def test_an_incompatible_pair_is_one_line(
    config: Path, tmp_path: Path, foreign_model: Path
) -> None:
    data = write_rows(tmp_path, [GOOD])
    fails_one_line(
        invoke("--config", str(config), "--draft", str(foreign_model), "--data", data),
        "vocabularies differ",
    )


# ------------------------------------------------------------------ logs as they live


@pytest.fixture
def memory_logs(traffic: Path) -> Any:
    """The traffic fixture's rows as nested OpenAI request / response logs in two Parquet parts
    on fsspec's in-memory filesystem (memory:// exists only in this process)."""
    import io
    import uuid

    import fsspec
    import pyarrow as pa
    import pyarrow.parquet as pq

    nested = [
        {
            "request": {"messages": [{"role": "user", "content": r["prompt"]}]},
            "response": {"choices": [{"message": {"role": "assistant", "content": r["response"]}}]},
            "metadata": {"category": r["category"], "id": r["id"]},
            "temperature": r["temperature"],
        }
        for r in (json.loads(line) for line in traffic.read_text().splitlines())
    ]
    fs = fsspec.filesystem("memory")
    root = f"/accept-{uuid.uuid4().hex[:8]}/logs"
    for i, part in enumerate((nested[:5], nested[5:])):
        buf = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(part), buf)
        fs.pipe(f"{root}/part-{i}.parquet", buf.getvalue())
    yield f"memory://{root}"
    fs.rm(root, recursive=True)


def test_the_issue_command_reads_nested_logs_from_an_fsspec_glob(
    config: Path, memory_logs: str, doc: dict[str, Any]
) -> None:
    got = run_json(
        "--config", str(config),
        "--data", f"{memory_logs}/part-*.parquet",
        "--prompt-field", "request.messages",
        "--response-field", "response.choices[0].message.content",
        "--bucket-by", "metadata.category",
    )  # fmt: skip
    assert [b["bucket"] for b in got["buckets"]] == ["code", "prose"]
    assert got["overall"]["requests"] == 8 and got["data"]["source"].endswith("part-*.parquet")
    # the same requests as the flat JSONL give the same α (the flat run had timing flags)
    for mine, flat in zip(got["buckets"], doc["buckets"], strict=True):
        for label in ("T=0", "T=1", "logged"):
            assert _setting(mine, label)["alpha"]["value"] == pytest.approx(
                _setting(flat, label)["alpha"]["value"], abs=1e-6
            )
    # no timing given: verdicts are provisional, flat timing flags are not
    assert got["provisional"] is True and doc["provisional"] is False
    plan = _setting(got["buckets"][0], "T=1")["plan"]
    assert plan["provisional"] is True
    be = plan["break_even_cost_ratio"]
    row = plan["gammas"][be["gamma"] - 1]["expected_tokens"]["value"]
    assert be["value"] == pytest.approx(
        (row - 1) / be["gamma"], abs=1e-5
    )  # ā = 1 + γ·c at break-even


def test_max_requests_samples_each_bucket_of_a_remote_glob(config: Path, memory_logs: str) -> None:
    args = (
        "--config", str(config), "--data", f"{memory_logs}/part-*.parquet",
        "--prompt-field", "request.messages", "--response-field",
        "response.choices[0].message.content", "--bucket-by", "metadata.category",
        "--id-field", "metadata.id", "--max-requests", "2", "--temperature", "1",
        "--no-logged-params", "--cost-ratio", "0.2",
    )  # fmt: skip
    got = run_json(*args)
    assert [b["requests"] for b in got["buckets"]] == [2, 2]
    assert got["provisional"] is True and got["timing"]["cost_ratio"] == 0.2
    res = invoke(*args)
    assert res.exit_code == 0, res.output
    assert "PROVISIONAL" in res.output and "(provisional)" in res.output
    assert "pays while T_d/T_ar <" in res.output
    assert res.output.index("break-even draft cost") < res.output.index("rollout plan per bucket")


def test_timing_from_an_engine_backend_run(config: Path, traffic: Path, tmp_path: Path) -> None:
    """An engine run's results.json has only the whole-round fit r0 + r1·γ (T_d = 0)."""
    results = {
        "schema": RESULTS_SCHEMA,
        "run": {"target": "tiny-target", "draft": "tiny-draft"},
        "workloads": [
            {
                "workload": "code",
                "baseline_step_ms": 20.0,
                "timing": {
                    "t_draft_ms": {"mean": None},
                    "verify_fit": {"t0_ms": None, "t1_ms_per_token": None},
                    "engine_round_fit": {"r0_ms": 22.0, "r1_ms_per_token": 3.0, "points": 2},
                },
            }
        ],
    }
    (tmp_path / "results.json").write_text(json.dumps(results))
    got = run_json(
        "--config", str(config), "--data", str(traffic), "--bucket-by", "category",
        "--timings", str(tmp_path / "results.json"), "--temperature", "1", "--no-logged-params",
    )  # fmt: skip
    code = got["buckets"][0]
    t = code["timing"]
    assert t["source"] == "run" and "engine round fit" in t["detail"]
    assert (t["t_draft_ms"], t["verify_base_ms"], t["verify_slope_ms"]) == (0.0, 22.0, 3.0)
    assert got["provisional"] is False
    row = code["settings"][0]["plan"]["gammas"][2]  # γ = 3: T_ar · ā(3) / (r0 + 3·r1)
    expected = row["expected_tokens"]["value"]
    assert row["speedup"]["value"] == pytest.approx(20.0 * expected / (22.0 + 3 * 3.0), rel=1e-4)


def test_drafters_teacher_forcing_cannot_score_are_named(config: Path, tmp_path: Path) -> None:
    head = tmp_path / "eagle-head"
    head.mkdir()
    (head / "config.json").write_text(json.dumps({"architectures": ["EagleLlamaForCausalLM"]}))
    data = write_rows(tmp_path, [GOOD])
    fails_one_line(
        invoke("--config", str(config), "--draft", str(head), "--data", data),
        "'eagle' drafter",
        "engine backend",
    )
