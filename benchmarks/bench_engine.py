"""Engine benchmarks, measured side by side in one run (these machines are noisy):

1. specbench's speculative loop vs Hugging Face assisted generation on the same pair, prompts, γ
   and greedy decoding (constant schedule, confidence stop off): are the tokens identical, and the
   tokens/s ratio ours ÷ theirs, prompt by prompt, runs interleaved.
2. specbench's baseline loop vs `model.generate()` (greedy, same max_new_tokens), interleaved.
3. Harness overhead: the share of speculative wall time spent outside model forwards.

    .venv/bin/python benchmarks/bench_engine.py                      # tiny pair on CPU, fp32
    .venv/bin/python benchmarks/bench_engine.py --device cuda        # bf16 on GPU by default
    .venv/bin/python benchmarks/bench_engine.py --target DIR --draft DIR --gamma 4 --max-new 64

Prints ratios; it asserts nothing (a benchmark, not a test).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from specbench.config import DatasetSpec, ModelSpec, WorkloadSpec
from specbench.data import load_workload
from specbench.decoding.drafters import ModelDrafter
from specbench.decoding.generate import baseline_generate, fixed_gamma, speculative_generate
from specbench.decoding.lm import CachedLM
from specbench.decoding.timing import Clock
from specbench.models import check_pair_compatible, load_model
from specbench.sampling_params import SamplingParams


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--target", default="tiny-target")
    ap.add_argument("--draft", default="tiny-draft")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="auto", help="auto = bf16 on GPU, fp32 on CPU")
    ap.add_argument("--gamma", type=int, default=4)
    ap.add_argument("--max-new", type=int, default=64)
    ap.add_argument("--prompts", type=int, default=8, help="per tiny workload")
    ap.add_argument(
        "--threads", type=int, default=1, help="torch threads (1 is fastest for tiny models)"
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    target = load_model(ModelSpec(model=args.target, device=args.device, dtype=args.dtype))
    draft = load_model(ModelSpec(model=args.draft, device=args.device, dtype=args.dtype))
    info = check_pair_compatible(target, draft)
    tok = target.tokenizer
    prompts = []
    for name in ("tiny_code", "tiny_prose", "tiny_structured"):
        wl = WorkloadSpec(name=name, dataset=DatasetSpec(name=name), n=args.prompts)
        prompts += [tok(p.turns[0])["input_ids"] for p in load_workload(wl, seed=0)]
    clock = Clock(target.device)
    greedy = SamplingParams()
    eos = frozenset(info.eos_token_ids)
    t_lm = CachedLM(target.model, info.real_vocab_size)
    d_lm = CachedLM(draft.model, info.real_vocab_size)
    print(
        f"device {target.device}, dtype {target.dtype}, γ = {args.gamma}, max_new_tokens {args.max_new}, "
        f"{len(prompts)} prompts, torch threads {torch.get_num_threads()}"
    )

    def ours_spec(ids: list[int]):  # type: ignore[no-untyped-def]
        return speculative_generate(
            t_lm, ModelDrafter(d_lm, greedy, clock, eos_ids=eos), ids, fixed_gamma(args.gamma), greedy,
            args.max_new, clock, eos,
        )  # fmt: skip

    def hf(ids: list[int], assisted: bool) -> tuple[list[int], float]:
        inp = torch.tensor([ids], device=target.device)
        kw = dict(max_new_tokens=args.max_new, do_sample=False, pad_token_id=tok.eos_token_id)
        if assisted:
            kw.update(
                assistant_model=draft.model,
                num_assistant_tokens=args.gamma,
                num_assistant_tokens_schedule="constant",
                assistant_confidence_threshold=0.0,
            )
        t0 = clock.now()
        out = target.model.generate(inp, **kw)
        return out[0, len(ids) :].tolist(), clock.now() - t0

    with torch.inference_mode():
        for ids in prompts[:2]:  # warm-up, not reported
            ours_spec(ids)
            hf(ids, True)
            hf(ids, False)
            baseline_generate(t_lm, ids, greedy, args.max_new, clock, eos)  # fmt: skip

        identical, ratios, base_ratios = 0, [], []
        ours_tok = theirs_tok = ours_ms = theirs_ms = 0.0
        b_tok = g_tok = b_ms = g_ms = 0.0
        wall = forward = 0.0
        for ids in prompts:
            spec = ours_spec(ids)
            theirs, t_ms = hf(ids, True)
            identical += spec.output_ids == theirs[: len(spec.output_ids)] and len(theirs) == len(
                spec.output_ids
            )
            ratios.append((spec.new_tokens / spec.wall_ms) / (len(theirs) / t_ms))
            ours_tok += spec.new_tokens
            ours_ms += spec.wall_ms
            theirs_tok += len(theirs)
            theirs_ms += t_ms
            r = spec.rounds
            assert r is not None
            fwd = (
                spec.ttft_ms
                + spec.draft_prefill_ms
                + sum(r.verify_ms)
                + sum(sum(d) for d in r.draft_ms)
            )
            wall += spec.wall_ms
            forward += fwd
            base = baseline_generate(t_lm, ids, greedy, args.max_new, clock, eos)
            gen_ids, gen_ms = hf(ids, False)
            base_ratios.append((base.new_tokens / base.wall_ms) / (len(gen_ids) / gen_ms))
            b_tok += base.new_tokens
            b_ms += base.wall_ms
            g_tok += len(gen_ids)
            g_ms += gen_ms
    print("\n1. speculative: specbench loop vs HF assisted generation (greedy, constant γ)")
    print(f"   identical outputs: {identical}/{len(prompts)}")
    print(
        f"   tokens/s ours {1000 * ours_tok / ours_ms:.1f}  HF {1000 * theirs_tok / theirs_ms:.1f}  "
        f"ratio (pooled) {(ours_tok / ours_ms) / (theirs_tok / theirs_ms):.2f}×  "
        f"median per prompt {statistics.median(ratios):.2f}×"
    )
    print("\n2. baseline: specbench target-only loop vs model.generate()")
    print(
        f"   tokens/s ours {1000 * b_tok / b_ms:.1f}  generate() {1000 * g_tok / g_ms:.1f}  "
        f"ratio (pooled) {(b_tok / b_ms) / (g_tok / g_ms):.2f}×  median per prompt {statistics.median(base_ratios):.2f}×"
    )
    print("\n3. harness overhead of the speculative loop")
    print(
        f"   outside model forwards: {100 * (wall - forward) / wall:.1f} % of wall time "
        f"({(wall - forward) / ours_tok:.3f} ms per generated token)"
    )
    print(
        f"   speculative vs baseline tokens/s on this pair: {(ours_tok / ours_ms) / (b_tok / b_ms):.2f}×"
    )


if __name__ == "__main__":
    t = time.perf_counter()
    main()
    print(f"\n(benchmark wall time {time.perf_counter() - t:.0f} s)")
