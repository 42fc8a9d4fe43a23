"""`backend: openai` end to end: against fake OpenAI-compatible servers (always run: streaming,
counters, retries, failures, bad input) and against a real vLLM server on the tiny pair (marked
`vllm`, skipped when vLLM is not importable)."""

from __future__ import annotations

import json
import math
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from specbench.cli.app import app
from specbench.records import read_records
from tests.logged_requests import ROWS, write_logged_requests
from tests.vllm_server import tiny_vllm_server

runner = CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1"})


class FakeServer:
    """A tiny OpenAI-compatible server: streams `max_tokens` one-character tokens, `per_chunk` at a
    time; with `gamma` > 0 it counts one draft per chunk with `per_chunk − 1` accepted, as vLLM's
    counters would; with `kv_blocks` it reports that many 16-token KV-cache blocks in vLLM's
    `vllm:cache_config_info`; with `echo_prompt` its answer is the prompt's text, repeated to
    `max_tokens` characters (a real server's answers often echo a private prompt)."""

    def __init__(
        self,
        gamma: int = 0,
        metrics: bool = True,
        fail_first: int = 0,
        step_s: float = 0.002,
        kv_blocks: int | None = None,
        host: str = "127.0.0.1",
        echo_prompt: bool = False,
    ) -> None:
        self.gamma, self.metrics, self.fail_left, self.step_s = gamma, metrics, fail_first, step_s
        self.kv_blocks, self.echo_prompt = kv_blocks, echo_prompt
        self.per_chunk = gamma + 1 if gamma else 1
        self.lock = threading.Lock()
        self.counts = {"drafts": 0, "draft_tokens": 0, "accepted": 0}
        self.bodies: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: str, ctype: str = "application/json") -> None:
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/v1/models":
                    self._send(200, json.dumps({"data": [{"id": "fake", "max_model_len": 512}]}))
                elif self.path == "/metrics" and fake.metrics:
                    self._send(200, fake.prometheus(), "text/plain")
                else:
                    self._send(404, '{"error": "not found"}')

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.bodies.append(body)
                    if fake.fail_left > 0:
                        fake.fail_left -= 1
                        self._send(503, '{"error": {"message": "overloaded"}}')
                        return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                n = int(body["max_tokens"])
                answer = fake.answer(body, n)
                sent = 0
                while sent < n:
                    k = min(fake.per_chunk, n - sent)
                    time.sleep(fake.step_s)
                    sent += k
                    if fake.gamma:
                        with fake.lock:
                            fake.counts["drafts"] += 1
                            fake.counts["draft_tokens"] += fake.gamma
                            fake.counts["accepted"] += k - 1
                    choice = {
                        "index": 0,
                        "text": answer[sent - k : sent],
                        "finish_reason": "length" if sent == n else None,
                    }
                    self.wfile.write(f"data: {json.dumps({'choices': [choice]})}\n\n".encode())
                    self.wfile.flush()
                usage = {"prompt_tokens": 5, "completion_tokens": n}
                self.wfile.write(
                    f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode()
                )
                self.wfile.write(b"data: [DONE]\n\n")

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, body: dict[str, Any], n: int) -> str:
        """The `n` one-character tokens of an answer: x…, or the prompt's text repeated."""
        prompt = body.get("prompt")
        if "messages" in body:
            prompt = " ".join(str(m.get("content") or "") for m in body["messages"])
        if not self.echo_prompt or not isinstance(prompt, str) or not prompt:
            return "x" * n
        return (prompt * (n // len(prompt) + 1))[:n]

    def prometheus(self) -> str:
        info = (
            f'vllm:cache_config_info{{block_size="16",engine="0",num_gpu_blocks="{self.kv_blocks}",'
            'num_cpu_blocks="None"} 1.0\n'
            if self.kv_blocks
            else ""
        )
        if not self.gamma:
            return info + 'vllm:num_requests_running{engine="0"} 0\n'
        c = self.counts
        # All accepted tokens are a prefix of the draft: per_pos[i] = drafts that accepted > i.
        full = c["accepted"] // self.gamma if self.gamma else 0
        lines = [
            f'vllm:spec_decode_num_drafts_total{{engine="0"}} {c["drafts"]}',
            f'vllm:spec_decode_num_draft_tokens_total{{engine="0"}} {c["draft_tokens"]}',
            f'vllm:spec_decode_num_accepted_tokens_total{{engine="0"}} {c["accepted"]}',
        ]
        lines += [
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="{i}"}} {full}'
            for i in range(self.gamma)
        ]
        return info + "\n".join(lines) + "\n"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers() -> Iterator[dict[str, FakeServer]]:
    made = {"base": FakeServer(0, step_s=0.004), "spec": FakeServer(2, step_s=0.004)}
    yield made
    for s in made.values():
        s.close()


def write_config(tmp_path: Path, server: dict[str, Any], **over: Any) -> Path:
    cfg: dict[str, Any] = {
        "name": "fake",
        "backend": "openai",
        "target": {"model": "fake"},
        "server": server,
        "workloads": [{"name": "tiny_code", "dataset": {"name": "tiny_code"}, "n": 6}],
        "sampling": {"temperatures": [0.0]},
        "concurrency": [1, 3],
        "max_new_tokens": 13,
        "warmup": 0,
        "output_dir": str(tmp_path / "out"),
        "decision": {"bootstrap": 200},
    }
    cfg.update(over)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True))
    return path


def test_two_servers_give_speedup_acceptance_and_concurrency(
    tmp_path: Path, servers: dict[str, FakeServer]
) -> None:
    endpoints = [
        {"url": servers["base"].url, "gamma": 0},
        {"url": servers["spec"].url + "/v1", "gamma": 2, "label": "fake draft γ=2"},
    ]
    res = runner.invoke(app, ["run", str(write_config(tmp_path, {"endpoints": endpoints}))])
    assert res.exit_code == 0, res.output
    out = tmp_path / "out"
    recs = read_records(out / "records.jsonl")
    reqs = [r for r in recs if r["kind"] in ("baseline", "spec")]
    assert len(reqs) == 2 * 2 * 6  # settings × concurrency levels × prompts
    spec1 = [r for r in reqs if r["kind"] == "spec" and r["concurrency"] == 1]
    for r in spec1:
        assert r["new_tokens"] == 13 and r["chunks"] == [5]  # 13 tokens in chunks of 3
        # 5 drafts per request, 8 accepted: τ = 1 + 8/5
        assert (
            r["spec_counters"]["num_drafts"] == 5 and r["spec_counters"]["num_accepted_tokens"] == 8
        )
        assert r["tpot_ms"] == pytest.approx(r["decode_ms"] / 12, rel=1e-3)
    batches = [r for r in recs if r["kind"] == "engine_metrics" and r["gamma"] == 2]
    assert [b["spec_counters"]["num_drafts"] for b in batches] == [30, 30]
    # the sampling settings reach the server
    body = servers["spec"].bodies[0]
    assert body["temperature"] == 0.0 and body["max_tokens"] == 13 and body["stream"] is True
    assert body["model"] == "fake" and isinstance(body["prompt"], str)

    results = json.loads((out / "results.json").read_text())
    e = results["workloads"][0]
    assert e["engine"]["per_gamma"]["2"]["mean_accepted_length"]["value"] == pytest.approx(
        1 + 8 / 5
    )
    sp = next(g for g in e["gammas"] if g["gamma"] == 2)["measured_speedup"]["value"]
    assert sp > 1.5  # 3 tokens per 4 ms step against 1 token per 4 ms
    assert [r["concurrency"] for r in e["engine"]["concurrency"]] == [1, 3]
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert len(cfg["server"]["endpoints"]) == 2
    md = (out / "report.md").read_text()
    assert (
        "Engine: speedup against concurrency" in md and "plots/concurrency_tiny_code_T0.png" in md
    )


def test_one_server_per_setting_accumulates_with_resume(
    tmp_path: Path, servers: dict[str, FakeServer]
) -> None:
    servers["base"].kv_blocks, servers["spec"].kv_blocks = 1000, 900
    first = write_config(tmp_path, {"url": servers["base"].url, "gamma": 0}, concurrency=[1])
    assert runner.invoke(app, ["run", str(first)]).exit_code == 0
    second = write_config(tmp_path, {"url": servers["spec"].url, "gamma": 2}, concurrency=[1])
    res = runner.invoke(app, ["run", str(second)])
    assert res.exit_code == 2 and "--resume" in res.output
    res = runner.invoke(app, ["run", str(second), "--resume"])
    assert res.exit_code == 0, res.output
    recs = read_records(tmp_path / "out" / "records.jsonl")
    assert sorted({r["gamma"] for r in recs}) == [0, 2]
    stored = yaml.safe_load((tmp_path / "out" / "config.yaml").read_text())
    assert sorted(ep["gamma"] for ep in stored["server"]["endpoints"]) == [0, 2]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert next(g for g in results["workloads"][0]["gammas"] if g["gamma"] == 2)["measured"]
    # the first run's server keeps the KV capacity it reported: speculation's share is there
    assert results["economics"]["kv_capacity"]["by_gamma"]["2"]["taken_share"] == pytest.approx(0.1)


def test_a_fleet_on_other_hosts_is_measured_from_one_client(tmp_path: Path) -> None:
    """Endpoints are servers anywhere (docs/serving.md, "A fleet from one client"): here one on
    127.0.0.2, a second address of this machine standing for another host, and one spelled
    `localhost`; each gets its own requests and its counters are read from its own origin."""
    base, spec = FakeServer(0), FakeServer(2, host="127.0.0.2")
    port = base.url.rsplit(":", 1)[1]
    endpoints = [
        {"url": f"http://localhost:{port}", "gamma": 0},
        {"url": spec.url + "/v1", "gamma": 2, "label": "far γ=2"},
    ]
    try:
        res = runner.invoke(app, ["run", str(write_config(tmp_path, {"endpoints": endpoints}))])
    finally:
        base.close()
        spec.close()
    assert res.exit_code == 0, res.output
    assert len(base.bodies) == len(spec.bodies) == 2 * 6  # concurrency levels × prompts
    recs = read_records(tmp_path / "out" / "records.jsonl")
    batches = [r for r in recs if r["kind"] == "engine_metrics" and r["gamma"] == 2]
    assert [b["spec_counters"]["num_drafts"] for b in batches] == [30, 30]  # 127.0.0.2/metrics
    env = json.loads((tmp_path / "out" / "env.json").read_text())
    assert [s["url"] for s in env["servers"]] == [e["url"] for e in endpoints]
    e = json.loads((tmp_path / "out" / "results.json").read_text())["workloads"][0]
    assert e["engine"]["per_gamma"]["2"]["mean_accepted_length"]["value"] == pytest.approx(
        1 + 8 / 5
    )


def test_server_without_metrics_measures_latency(tmp_path: Path) -> None:
    base, spec = FakeServer(0), FakeServer(2, metrics=False)
    try:
        endpoints = [{"url": base.url, "gamma": 0}, {"url": spec.url, "gamma": 2}]
        res = runner.invoke(
            app, ["run", str(write_config(tmp_path, {"endpoints": endpoints}, concurrency=[1]))]
        )
    finally:
        base.close()
        spec.close()
    assert res.exit_code == 0, res.output
    assert "no /metrics endpoint; latency measured, acceptance unavailable" in res.output
    e = json.loads((tmp_path / "out" / "results.json").read_text())["workloads"][0]
    assert e["alpha"] is None
    assert e["engine"]["concurrency"][0]["gammas"]["2"]["speedup"]["value"] > 1.0


@pytest.mark.parametrize("reported", [True, False])
def test_draft_memory_from_the_servers_or_computed(tmp_path: Path, reported: bool) -> None:
    """The KV capacity each server reports (vLLM's cache_config_info) and the share speculation
    takes; without it, the draft's memory computed from the tiny pair's files."""
    base = FakeServer(0, kv_blocks=1000 if reported else None)
    spec = FakeServer(2, kv_blocks=900 if reported else None)
    try:
        endpoints = [{"url": base.url, "gamma": 0}, {"url": spec.url, "gamma": 2}]
        cfg = write_config(
            tmp_path,
            {"endpoints": endpoints},
            concurrency=[1],
            target={"model": "tiny-target"},
            draft={"model": "tiny-draft"},
        )
        res = runner.invoke(app, ["run", str(cfg)])
    finally:
        base.close()
        spec.close()
    assert res.exit_code == 0, res.output
    out = tmp_path / "out"
    mem = json.loads((out / "env.json").read_text())["memory"]
    assert mem["source"] == ("engine" if reported else "computed")
    assert mem["drafts"]["tiny-draft"]["kv_bytes_per_token"] == 2 * 1 * 3 * 32 * 4
    econ = json.loads((out / "results.json").read_text())["economics"]
    assert econ["draft_memory"]["tiny-draft"]["source"] == "computed"
    md = (out / "report.md").read_text()
    assert "draft `tiny-draft` (computed from its config.json" in md
    if reported:
        assert [(c["gamma"], c["tokens"]) for c in mem["kv_capacity"]] == [(0, 16000), (2, 14400)]
        assert econ["kv_capacity"]["by_gamma"]["2"]["taken_share"] == pytest.approx(0.1)
        assert "speculation takes 1,600 (10.0%)" in md
    else:
        assert mem["kv_capacity"] is None and econ["kv_capacity"] is None
        assert "KV-cache capacity as the engines report it" not in md


def test_retries_then_recorded_failures(tmp_path: Path) -> None:
    flaky = FakeServer(0, fail_first=2)
    try:
        ok = runner.invoke(
            app,
            ["run", str(write_config(tmp_path, {"url": flaky.url, "retries": 2}, concurrency=[1]))],
        )
        assert ok.exit_code == 0, ok.output
        flaky.fail_left = 100
        res = runner.invoke(
            app,
            [
                "run",
                str(write_config(tmp_path, {"url": flaky.url, "retries": 1}, concurrency=[1])),
                "--force",
            ],
        )
    finally:
        flaky.close()
    recs = read_records(tmp_path / "out" / "records.jsonl")
    failed = [r for r in recs if r["kind"] == "failed"]
    assert (
        len(failed) == 6 and "HTTP 503" in failed[0]["error"] and "2 attempts" in failed[0]["error"]
    )
    # every prompt failed: "run incomplete" (exit 4, not a verdict's 1), with why no report
    assert res.exit_code == 4, res.output
    assert "error: run incomplete: 6 of 6 prompts failed (100%" in res.output
    assert "no report: " in res.output and "no complete baseline records" in res.output


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = runner.invoke(
        app, ["run", str(write_config(tmp_path, {"url": f"http://127.0.0.1:{port}"}))]
    )
    assert res.exit_code == 2
    assert f"cannot reach the server at http://127.0.0.1:{port}" in res.output
    assert "Traceback" not in res.output
    monkeypatch.delenv("SPECBENCH_TEST_KEY", raising=False)
    res = runner.invoke(
        app,
        [
            "run",
            str(
                write_config(
                    tmp_path, {"url": "http://127.0.0.1:1", "api_key_env": "SPECBENCH_TEST_KEY"}
                )
            ),
            "--force",
        ],
    )
    assert res.exit_code == 2 and "SPECBENCH_TEST_KEY, which is not set" in res.output


def test_mislabelled_server_is_reported(tmp_path: Path, servers: dict[str, FakeServer]) -> None:
    endpoints = [{"url": servers["spec"].url, "gamma": 0}]  # speculative server labelled baseline
    res = runner.invoke(
        app, ["run", str(write_config(tmp_path, {"endpoints": endpoints}, concurrency=[1]))]
    )
    assert res.exit_code == 0, res.output
    assert "labelled γ=0 (baseline) but reports speculative drafts" in res.output


def test_logged_requests_are_sent_as_sampled(
    tmp_path: Path, servers: dict[str, FakeServer]
) -> None:
    """`dataset.sampling: logged`: each request carries its own temperature, top_p and max
    tokens (the config's where the row has none, max tokens capped at max_new_tokens), every
    setting alike; the records say how each was sampled and results.json reports the mix."""
    expected = {"a": (0.0, 1.0, 4), "b": (0.7, 0.9, 7), "c": (1.0, 0.95, 13), "d": (0.7, 0.5, 13)}
    dataset = write_logged_requests(tmp_path / "logs.jsonl")
    endpoints = [{"url": servers["base"].url, "gamma": 0}, {"url": servers["spec"].url, "gamma": 2}]
    cfg = write_config(
        tmp_path,
        {"endpoints": endpoints},
        workloads=[{"name": "logs", "dataset": dataset}],
        sampling={"temperatures": [0.7, 0.0], "top_p": 0.95},  # one run, not one per value
        concurrency=[1, 2],
        keep_text=True,  # records by the logged ids (private data has hashed ids otherwise)
    )
    res = runner.invoke(app, ["run", str(cfg)])
    assert res.exit_code == 0, res.output
    for server in servers.values():
        assert len(server.bodies) == 2 * 4  # concurrency levels × prompts, once
        for body in server.bodies:
            rid = next(r for r, *_ in ROWS if f"def f_{r}(x):" in body["prompt"])
            sent = (body["temperature"], body["top_p"], body["max_tokens"])
            assert sent == expected[rid]
    recs = read_records(tmp_path / "out" / "records.jsonl")
    reqs = [r for r in recs if r["kind"] in ("baseline", "spec")]
    label = round(sum(t for t, _, _ in expected.values()) / len(expected), 4)
    assert len(reqs) == 2 * 2 * 4 and {r["temperature"] for r in recs} == {label}
    for r in reqs:
        t, p, m = expected[r["prompt_id"]]
        assert r["sampling"] == "logged" and r["top_p"] == p and r["new_tokens"] == m
        assert (r["request"]["temperature"], r["request"]["top_p"]) == (t, p)
        assert r["request"]["max_tokens"] == m
    entry = json.loads((tmp_path / "out" / "results.json").read_text())["workloads"][0]
    mix = entry["request_sampling"]
    assert mix["prompts"] == 4 and mix["temperature"] == {"0": 1, "0.7": 2, "1": 1}
    assert mix["from_config"] == {"temperature": 1, "top_p": 1, "max_tokens": 1}
    assert mix["max_tokens_capped"] == 1
    assert "logs: 4 requests as logged" in res.output


# ---------------------------------------------------------------------------------------------
# a real vLLM server on the tiny pair


def tiny_pair_dirs() -> tuple[str, str]:
    """The shipped tiny pair's directories."""
    from specbench.models.tinypair import tiny_model_dir

    return str(tiny_model_dir("target")), str(tiny_model_dir("draft"))


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with tiny_vllm_server(tmp_path_factory.mktemp("server"), gamma=2) as url:
        yield url


@pytest.mark.vllm
@pytest.mark.slow
def test_real_vllm_server(tmp_path: Path, vllm_server: str) -> None:
    target, _ = tiny_pair_dirs()
    server = {
        "url": vllm_server,
        "gamma": 2,
        "label": "draft_model γ=2",
        "prompt_format": "tokens",
        "extra_body": {"return_token_ids": True},
    }
    cfg = write_config(
        tmp_path, server, target={"model": target}, concurrency=[1, 4], max_new_tokens=16
    )
    res = runner.invoke(app, ["run", str(cfg)])
    # one speculative server and no baseline: refused before anything is measured
    assert res.exit_code == 2 and "no server without speculation" in res.output, res.output
    # a baseline beside it (a fake server here: a second vLLM server would double the start-up)
    base = FakeServer(0)
    try:
        eps = [{**server, "url": vllm_server}, {"url": base.url, "gamma": 0}]
        cfg = write_config(
            tmp_path,
            {"endpoints": [{k: e[k] for k in ("url", "gamma", "label") if k in e} for e in eps],
             "prompt_format": "tokens", "extra_body": {"return_token_ids": True}},
            target={"model": target}, concurrency=[1, 4], max_new_tokens=16,
        )  # fmt: skip
        res = runner.invoke(app, ["run", str(cfg)])  # the refused run left nothing behind
    finally:
        base.close()
    assert res.exit_code == 0, res.output
    recs = read_records(tmp_path / "out" / "records.jsonl")
    reqs = [r for r in recs if r["kind"] == "spec"]
    assert len(reqs) == 12, res.output
    for r in reqs:
        assert r["new_tokens"] == len(r["output_ids"][0]) <= 16
        assert r["ttft_ms"][0] > 0 and r["e2e_ms"][0] >= r["ttft_ms"][0]
    batches = [r for r in recs if r["kind"] == "engine_metrics" and r["gamma"] > 0]
    assert all(b["acceptance_available"] for b in batches)
    c1 = next(b for b in batches if b["concurrency"] == 1)["spec_counters"]
    per_req = [r["spec_counters"] for r in reqs if r["concurrency"] == 1]
    # per-request counters add up to the batch's diff, and vLLM drafts γ tokens every round
    for key in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
        assert sum(c[key] for c in per_req) == c1[key]
    assert (
        c1["num_draft_tokens"] == 2 * c1["num_drafts"]
        and len(c1["num_accepted_tokens_per_pos"]) == 2
    )
    e = json.loads((tmp_path / "out" / "results.json").read_text())["workloads"][0]
    tau = e["engine"]["per_gamma"]["2"]["mean_accepted_length"]["value"]
    assert 1.0 <= tau <= 3.0 and not math.isnan(tau)
    # vLLM's cache_config_info on /metrics: the speculative server's KV capacity, as reported
    mem = json.loads((tmp_path / "out" / "env.json").read_text())["memory"]
    assert mem["source"] == "engine", mem
    (cap,) = mem["kv_capacity"]
    assert cap["gamma"] == 2 and cap["tokens"] == cap["num_gpu_blocks"] * cap["block_size"] > 0


def test_logged_tools_and_system_prompt_reach_the_server(
    tmp_path: Path, servers: dict[str, FakeServer]
) -> None:
    """A logged conversation keeps its system prompt and tool calls, and its `tools` list goes in
    the chat request (`server.chat: true`: the server's template renders them), as in production."""
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Oslo?"},
    ]
    data = tmp_path / "logs.jsonl"
    data.write_text(
        json.dumps({"id": "w", "request": {"messages": messages, "tools": tools}}) + "\n"
    )
    dataset = {
        "path": str(data),
        "messages_field": "request.messages",
        "tools_field": "request.tools",
    }
    endpoints = [{"url": servers["base"].url, "gamma": 0}, {"url": servers["spec"].url, "gamma": 2}]
    cfg = write_config(
        tmp_path,
        {"endpoints": endpoints, "chat": True},
        workloads=[{"name": "logs", "dataset": dataset}],
        concurrency=[1],
    )
    res = runner.invoke(app, ["run", str(cfg)])
    assert res.exit_code == 0, res.output
    for server in servers.values():
        assert server.bodies, "no request reached the server"
        for body in server.bodies:
            assert body["messages"] == messages and body["tools"] == tools
    # logged traffic is private by default (docs/privacy.md): the engine's records keep the
    # answer checks, computed as each answer arrived, and a digest, never the text or the id
    recs = [r for r in read_records(tmp_path / "out" / "records.jsonl") if r.get("turns")]
    assert recs and all("answers" not in r and "output_ids" not in r for r in recs)
    assert all(r["prompt_id"] != "w" and r["answer_digest"] and r["content"] for r in recs)
    assert "Oslo" not in (tmp_path / "out" / "records.jsonl").read_text()
