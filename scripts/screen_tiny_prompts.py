#!/usr/bin/env python
"""Screen candidate prompts for the tiny workloads: does the pair continue them with real text?

For each prompt of a JSONL file ({"id", "prompt", ...} per line) the tiny target's greedy answer
(--max-new-tokens, cut at the first EOS, as `specbench run` generates it at T = 0) is checked with
the same content checks the analysis applies (specbench.analysis.estimators.content.answer_checks: an answer
that loops is degenerate and set aside, docs/theory.md §13), and scored with the draft along that
answer (specbench.decoding.pairstats.teacher_forced_stats: greedy agreement, mean exact β at T = 1).
One JSON line per prompt goes to --out (the input record plus those figures), and a summary per
prompt-id prefix to stderr.

It reads the pair in --pair (default: the shipped one). It selects nothing by itself: which
prompts go into datasets/tiny_*.jsonl, and the rule used, is for docs/tiny-pair.md to state.

    .venv/bin/python scripts/screen_tiny_prompts.py candidates.jsonl --out screened.jsonl
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see train_tiny_pair.py

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from specbench.analysis.estimators.content import answer_checks  # noqa: E402
from specbench.decoding.pairstats import greedy_continuation, teacher_forced_stats  # noqa: E402


def screen(target: Any, draft: Any, tok: Any, prompt: str, n_new: int) -> dict[str, Any]:
    ids = list(tok(prompt)["input_ids"])
    cont = greedy_continuation(target, ids, n_new)
    eos = tok.eos_token_id
    stop = "max_new_tokens"
    if eos in cont:
        cont = cont[: cont.index(eos) + 1]
        stop = "eos"
    text = tok.decode(cont, skip_special_tokens=True)
    checks = answer_checks(cont, text, stop)
    st = teacher_forced_stats(target, draft, ids, cont, 1.0) if cont else None
    return {
        "answer": text,
        "degenerate": checks.degenerate,
        "reason": checks.reason,
        "n_tokens": len(cont),
        "greedy_agreement": None if st is None else statistics.fmean(map(float, st["agree"])),
        "mean_beta": None if st is None else statistics.fmean(st["beta"]),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("candidates", type=Path, help="JSONL file, one {'id', 'prompt'} a line")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--pair", type=Path, default=REPO / "specbench" / "assets" / "tiny-pair")
    ap.add_argument("--max-new-tokens", type=int, default=40)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    if not 1 <= args.max_new_tokens <= 1024:
        print("--max-new-tokens must be 1..1024", file=sys.stderr)
        return 2
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(args.threads)
    target = AutoModelForCausalLM.from_pretrained(args.pair / "target", dtype=torch.float32)
    draft = AutoModelForCausalLM.from_pretrained(args.pair / "draft", dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(args.pair / "target")
    target.eval()
    draft.eval()
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with args.out.open("w", encoding="utf-8") as out:
        for line in args.candidates.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            rec = json.loads(line)
            rec.update(screen(target, draft, tok, rec["prompt"], args.max_new_tokens))
            out.write(json.dumps(rec) + "\n")
            out.flush()  # nothing measured is lost if the run is stopped
            groups[str(rec["id"]).rsplit("-", 1)[0]].append(rec)
    for name, recs in groups.items():
        real = [r for r in recs if not r["degenerate"]]
        agree = statistics.fmean(r["greedy_agreement"] for r in real) if real else float("nan")
        print(
            f"{name}: {len(real)}/{len(recs)} answers real text; greedy agreement over those "
            f"{agree:.3f}",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
