"""Does the in-process vLLM step loop's stats recording slow a token? The engine's stats on (what
`backend: vllm` runs: it reads the spec-decode counters from `LLM.get_metrics()`) against off,
for OFF and for draft_model γ=4 on the shipped tiny pair, at batch 1, greedy, 32 tokens a request
(the prompt is token ids 10…49, not text: the draft accepts little on it, so γ=4 is not expected
to pay here; what is compared is stats on against off within each setting).

The loop is the one harness/serving/vllm/vllm_session.py runs (`llm_engine.add_request`, then
`llm_engine.step()` until the request finishes); TPOT is (finish − first token) / 31. Each
(setting, stats) engine runs in a subprocess of its own, the four in turn and then in reverse
order, 40 timed requests after 5 warm-ups each; printed: each engine start's median (how far two
starts of one engine lie apart), each arm's median over both starts, and the ratios. Asked by the
validation of issue 34 item 5 (docs/serving.md, "The exported configuration, measured under the
profile"): in-process OFF ran 1.36× slower per token than the same engine as a server.

    PYTHONPATH=$PWD /path/to/vllm-venv/bin/python benchmarks/bench_vllm_step_loop.py   # ~5 min
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAIR = ROOT / "specbench" / "assets" / "tiny-pair"
WARMUP, TIMED, TOKENS = 5, 40, 32


def measure(gamma: int, stats: bool) -> list[float]:
    """In the child: TPOT (ms) of TIMED batch-1 requests through the step loop."""
    from vllm import LLM, SamplingParams

    spec = (
        {"method": "draft_model", "model": str(PAIR / "draft"), "num_speculative_tokens": gamma}
        if gamma
        else None
    )
    llm = LLM(
        model=str(PAIR / "target"), dtype="float32", enforce_eager=True, max_model_len=1024,
        gpu_memory_utilization=0.3, max_num_seqs=16, seed=0, disable_log_stats=not stats,
        speculative_config=spec,
    )  # fmt: skip
    engine = llm.llm_engine
    params = SamplingParams(temperature=0.0, max_tokens=TOKENS, ignore_eos=True)
    out = []
    for i in range(WARMUP + TIMED):
        engine.add_request(f"r{i}", {"prompt_token_ids": list(range(10, 50))}, params)
        first = None
        done = False
        while not done:
            for o in engine.step():
                if first is None and o.outputs[0].token_ids:
                    first = time.perf_counter()
                done = done or o.finished
        assert first is not None
        if i >= WARMUP:
            out.append((time.perf_counter() - first) / (TOKENS - 1) * 1000.0)
    return out


def main() -> int:
    if len(sys.argv) == 3:  # the child
        print("RESULT " + json.dumps(measure(int(sys.argv[1]), sys.argv[2] == "on")), flush=True)
        return 0
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    order = [(0, "on"), (0, "off"), (4, "on"), (4, "off")]
    tpot: dict[tuple[int, str], list[float]] = {k: [] for k in order}
    starts: list[str] = []  # each engine start's median, in run order: the drift between starts
    for g, s in order + order[::-1]:
        res = subprocess.run(
            [sys.executable, __file__, str(g), s], capture_output=True, text=True, env=env,
            check=False, timeout=600,
        )  # fmt: skip
        line = next((x for x in res.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            print(
                f"error: the γ={g} stats {s} engine failed: {res.stderr[-1500:]}", file=sys.stderr
            )
            return 1
        mine = json.loads(line[len("RESULT ") :])
        tpot[(g, s)] += mine
        starts.append(f"{'off' if g == 0 else f'γ={g}'}/stats {s} {statistics.median(mine):.2f}")
    print("engine starts in order (median TPOT ms): " + ", ".join(starts))
    med = {k: statistics.median(v) for k, v in tpot.items()}
    print("| setting | stats | median TPOT ms (batch 1) |")
    print("|---|---|---|")
    for (g, s), m in med.items():
        print(f"| {'off' if g == 0 else f'draft_model γ={g}'} | {s} | {m:.2f} |")
    print(f"stats on ÷ off, per token: OFF {med[(0, 'on')] / med[(0, 'off')]:.2f}×, "
          f"γ=4 {med[(4, 'on')] / med[(4, 'off')]:.2f}×")  # fmt: skip
    print(f"γ=4's per-token speed-up over OFF: stats on {med[(0, 'on')] / med[(4, 'on')]:.2f}×, "
          f"stats off {med[(0, 'off')] / med[(4, 'off')]:.2f}×")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
