#!/usr/bin/env python
"""Write a small logged-traffic file for `specbench accept`: the shipped tiny prompts answered by
the tiny target, one JSON object per request.

Each row: `id`, `workload` (the bucket), `prompt`, `response` (the target's answer, decoded
without special tokens), `temperature` and `top_p` (what the response was sampled with),
`new_tokens`, `finish_reason` ("eos" | "length") and `model`. The prompts are the ones
configs/tiny.yaml runs (n per workload drawn with the config's seed), rendered as `run` renders
them; the responses come from the engine's `baseline_generate` (target-only decoding), with the
row's temperature cycling through --temperatures so the file carries per-request parameters.

Run from the repository root (under a minute on two CPU cores):

    .venv/bin/python scripts/make_logged_traffic.py
    .venv/bin/specbench accept --config configs/tiny.yaml \\
        --data datasets/logged/tiny_traffic.jsonl --bucket-by workload
"""

from __future__ import annotations

import argparse
import json
import sys
import zlib
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from specbench.config import DatasetSpec, ModelSpec, WorkloadSpec  # noqa: E402
from specbench.data import build_context_ids, load_workload  # noqa: E402
from specbench.decoding.generate import baseline_generate  # noqa: E402
from specbench.decoding.lm import CachedLM  # noqa: E402
from specbench.decoding.sampling import SamplingParams  # noqa: E402
from specbench.decoding.timing import Clock  # noqa: E402
from specbench.models import eos_token_ids, load_model  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--target", default="tiny-target", help="target model (name, id or directory)")
    ap.add_argument("--workloads", default="tiny_code,tiny_prose,tiny_structured")
    ap.add_argument("--n", type=int, default=8, help="prompts per workload")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument(
        "--temperatures", default="1.0,0.7,0.0", help="cycled over the rows of each workload"
    )
    ap.add_argument("--seed", type=int, default=0, help="prompt sampling and generation seed")
    ap.add_argument(
        "--threads", type=int, default=1, help="torch threads (1 is fastest for tiny models)"
    )
    ap.add_argument("--out", type=Path, default=REPO / "datasets" / "logged" / "tiny_traffic.jsonl")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    temps = [float(t) for t in args.temperatures.split(",")]
    loaded = load_model(ModelSpec(model=args.target, dtype="float32", device="cpu"))
    tok = loaded.tokenizer
    lm = CachedLM(loaded.model, len(tok))
    eos = frozenset(eos_token_ids(loaded))
    clock = Clock(loaded.device)
    rows = []
    for workload in args.workloads.split(","):
        spec = WorkloadSpec(name=workload, dataset=DatasetSpec(name=workload), n=args.n)
        for i, prompt in enumerate(load_workload(spec, args.seed)):
            temp = temps[i % len(temps)]
            messages = [{"role": "user", "content": prompt.turns[0]}]
            ids, _ = build_context_ids(tok, messages, "auto", None)
            # An answer that is empty (EOS first) is not a usable log row: draw again (seeded).
            for attempt in range(5):
                seed = zlib.crc32(f"{args.seed}|{prompt.id}|{attempt}".encode()) & 0x7FFFFFFF
                gen = torch.Generator().manual_seed(seed)
                with torch.inference_mode():
                    out = baseline_generate(
                        lm,
                        ids,
                        SamplingParams(temperature=temp),
                        args.max_new_tokens,
                        clock,
                        eos,
                        generator=gen,
                    )
                if tok.decode(out.output_ids, skip_special_tokens=True).strip() or temp == 0:
                    break
            if not tok.decode(out.output_ids, skip_special_tokens=True).strip():
                print(f"skipped {prompt.id}: the target answers it with nothing", file=sys.stderr)
                continue
            rows.append(
                {
                    "id": prompt.id,
                    "workload": workload,
                    "prompt": prompt.turns[0],
                    "response": tok.decode(out.output_ids, skip_special_tokens=True),
                    "temperature": temp,
                    "top_p": 1.0,
                    "new_tokens": out.new_tokens,
                    "finish_reason": "eos" if out.stop_reason == "eos" else "length",
                    "model": args.target,
                }
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} requests to {args.out}")


if __name__ == "__main__":
    main()
