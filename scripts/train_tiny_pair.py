#!/usr/bin/env python
"""Train the tiny target/draft pair shipped in specbench/assets/tiny-pair (reproducible, offline).

Corpus: the *.py files of the running Python's standard library (sysconfig "stdlib" path) — code
plus its docstrings and comments as English prose — so it is reachable on any fresh machine without
a network. Files are taken in sorted relative-path order, skipping test suites, site-packages,
the generated codec tables (encodings/) and the build-specific _sysconfigdata*; each file is cut at
--max-file-chars and files are added until --char-budget characters. Every --val-every-th file is
held out for a validation loss.

Steps (all seeded; fp32 weights, optional bf16 autocast for the matmuls while training):
1. a byte-level BPE tokenizer (`tokenizers`), vocab --vocab-size, `<|endoftext|>` as BOS/EOS/pad;
   documents are separated by it and the tokenizer prepends it to every encoded text;
2. the target (LlamaForCausalLM, --target-layers × --target-hidden) by next-token CE on random
   windows of --seq-len tokens;
3. the draft (much smaller, --draft-layers × --draft-hidden) distilled from the frozen target:
   loss = --kl-weight · KL(p_target ‖ q_draft) + --ce-weight · CE, at temperature 1;
4. both saved in Hugging Face format (+ tokenizer), reloaded from disk in fp32, measured (decode-step
   latencies on --threads threads; acceptance figures on the tiny workloads with
   specbench.decoding.pairstats), and described in manifest.json.

Run from the repository root:  .venv/bin/python scripts/train_tiny_pair.py
"""

from __future__ import annotations

import os

# The 2 cores are often shared: OpenMP's default spin-waiting then makes a 2-thread step several
# times slower (a spinning thread holds the core its partner needs), while passive waiting costs
# little. It must be set before torch loads its OpenMP runtime; an explicit setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import hashlib
import json
import math
import platform
import random
import re
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from specbench.decoding.pairstats import acceptance_figures  # noqa: E402
from specbench.models.tinypair import MODEL_NAMES  # noqa: E402

EOT = "<|endoftext|>"
EXCLUDED_DIRS = (
    "test",
    "tests",
    "idle_test",
    "site-packages",
    "dist-packages",
    "encodings",
    "__pycache__",
)
EXCLUDED_PREFIXES = ("_sysconfigdata",)
WORKLOADS = ("tiny_code", "tiny_prose", "tiny_structured", "tiny_encoded")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------- corpus
def select_stdlib_corpus(
    stdlib: Path, char_budget: int, max_file_chars: int
) -> tuple[list[str], list[str], int]:
    """(relative paths, texts, n_candidate_files): sorted, filtered, truncated, within budget."""
    cands = sorted(
        p
        for p in stdlib.rglob("*.py")
        if not set(p.relative_to(stdlib).parts[:-1]) & set(EXCLUDED_DIRS)
        and not p.name.startswith(EXCLUDED_PREFIXES)
    )
    rels: list[str] = []
    texts: list[str] = []
    total = 0
    for p in cands:
        text = p.read_text(encoding="utf-8", errors="replace")[:max_file_chars]
        if not text.strip():
            continue
        if total + len(text) > char_budget:
            break
        rels.append(p.relative_to(stdlib).as_posix())
        texts.append(text)
        total += len(text)
    return rels, texts, len(cands)


# --corpus broad: three kinds of text, all shipped with every Python install (the standard library) or installed
# by the project's own environment (the running interpreter's site-packages), so the corpus needs
# no network and is the same on any machine with the same install (its file list and sha256 are
# in the manifest).
PROSE_SUFFIXES = (".txt", ".rst", ".md")
PROSE_NAMES = ("METADATA", "LICENSE", "README")
PROSE_STDLIB_FILES = ("pydoc_data/topics.py",)  # the help() text of the language reference
STRUCTURED_SUFFIXES = (".json", ".csv", ".ini", ".cfg", ".toml", ".yaml", ".yml", ".html", ".xml")
PROSE_MIN_LETTER_SHARE = 0.6  # a prose file is mostly letters and spaces (not a table of numbers)


def _skipped(rel: Path) -> bool:
    return bool(set(rel.parts[:-1]) & set(EXCLUDED_DIRS)) or rel.name.startswith(EXCLUDED_PREFIXES)


def _letter_share(text: str) -> float:
    return sum(c.isalpha() or c == " " for c in text) / max(1, len(text))


def corpus_candidates(stdlib: Path, purelib: Path) -> dict[str, list[tuple[str, Path]]]:
    """Every candidate file of each kind as (label, path), label = "stdlib:REL" or "site:REL"."""
    roots = [("stdlib", stdlib)] + ([("site", purelib)] if purelib != stdlib else [])
    out: dict[str, list[tuple[str, Path]]] = {"code": [], "prose": [], "structured": []}
    for tag, root in roots:
        for p in sorted(root.rglob("*")):
            rel = p.relative_to(root)
            if _skipped(rel) or not p.is_file():
                continue
            label = f"{tag}:{rel.as_posix()}"
            suffix = p.suffix.lower()
            if tag == "stdlib" and rel.as_posix() in PROSE_STDLIB_FILES:
                out["prose"].append((label, p))
            elif tag == "stdlib" and suffix == ".py":
                out["code"].append((label, p))
            elif suffix in PROSE_SUFFIXES or p.name in PROSE_NAMES:
                out["prose"].append((label, p))
            elif suffix in STRUCTURED_SUFFIXES:
                out["structured"].append((label, p))
    return out


def select_broad_corpus(
    stdlib: Path, purelib: Path, budgets: dict[str, int], max_file_chars: dict[str, int]
) -> dict[str, Any]:
    """Per kind: the selected (labels, texts) and the candidate count. Candidates are visited in
    the order of sha256(label) (a fixed pseudo-random order, so a budget samples every package
    rather than the alphabetically first ones); each text is cut at the kind's max_file_chars;
    empty texts (and prose that is mostly not letters) are skipped; files are added until the
    kind's character budget would be exceeded."""
    sel: dict[str, Any] = {}
    for kind, cands in corpus_candidates(stdlib, purelib).items():
        order = sorted(cands, key=lambda c: hashlib.sha256(c[0].encode()).hexdigest())
        labels: list[str] = []
        texts: list[str] = []
        total = 0
        for label, p in order:
            text = p.read_text(encoding="utf-8", errors="replace")[: max_file_chars[kind]]
            if not text.strip():
                continue
            if kind == "prose" and _letter_share(text) < PROSE_MIN_LETTER_SHARE:
                continue
            if total + len(text) > budgets[kind]:
                continue  # a shorter file later in the order may still fit
            labels.append(label)
            texts.append(text)
            total += len(text)
        sel[kind] = {"labels": labels, "texts": texts, "n_candidates": len(cands)}
    return sel


# --------------------------------------------------------------------------- tokenizer
def train_tokenizer(texts: list[str], vocab_size: int) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer, length=len(texts))
    eot_id = tok.token_to_id(EOT)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{EOT} $A", pair=f"{EOT} $A {EOT} $B", special_tokens=[(EOT, eot_id)]
    )
    return tok


def encode_docs(tok: Any, texts: list[str], eot_id: int) -> torch.Tensor:
    """Concatenate documents, each preceded by EOT (so EOT acts as BOS, as at inference)."""
    encs = tok.encode_batch(texts, add_special_tokens=False)
    flat: list[int] = []
    for e in encs:
        flat.append(eot_id)
        flat.extend(e.ids)
    return torch.tensor(flat, dtype=torch.long)


# --------------------------------------------------------------------------- models
def llama_config(args: argparse.Namespace, which: str, vocab: int, eot_id: int) -> Any:
    from transformers import LlamaConfig

    layers, hidden, inter, heads = (
        getattr(args, f"{which}_layers"),
        getattr(args, f"{which}_hidden"),
        getattr(args, f"{which}_intermediate"),
        getattr(args, f"{which}_heads"),
    )
    return LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=args.max_positions,
        tie_word_embeddings=True,
        bos_token_id=eot_id,
        eos_token_id=eot_id,
        pad_token_id=eot_id,
        rms_norm_eps=1e-5,
    )


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # tied weights counted once


def lr_at(step: int, total: int, peak: float, warmup: int, floor: float = 0.1) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    prog = (step - warmup) / max(1, total - warmup)
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * prog)))


def sample_batch(data: torch.Tensor, batch: int, seq: int, gen: torch.Generator) -> torch.Tensor:
    starts = torch.randint(0, len(data) - seq - 1, (batch,), generator=gen)
    return torch.stack([data[s : s + seq] for s in starts.tolist()]).to(DEVICE)


# Set by main from --device: where training runs. Batches are drawn on the CPU from the seeded
# generators either way, so the same seed gives the same data order on any device.
DEVICE = torch.device("cpu")


def autocast(enabled: bool) -> Any:
    return torch.autocast(DEVICE.type, dtype=torch.bfloat16, enabled=enabled)


@torch.no_grad()
def eval_loss(model: Any, data: torch.Tensor, args: argparse.Namespace, seed: int) -> float:
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(args.eval_batches):
        x = sample_batch(data, args.target_batch, args.seq_len, gen)
        with autocast(args.bf16):
            losses.append(float(model(input_ids=x, labels=x).loss))
    model.train()
    return sum(losses) / len(losses)


def train_target(
    model: Any, train: torch.Tensor, val: torch.Tensor, args: argparse.Namespace
) -> dict[str, Any]:
    opt = torch.optim.AdamW(
        model.parameters(), lr=args.target_lr, betas=(0.9, 0.95), weight_decay=args.weight_decay
    )
    gen = torch.Generator().manual_seed(args.seed + 1)
    model.train()
    t0 = time.perf_counter()
    running = 0.0
    for step in range(args.target_steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args.target_steps, args.target_lr, args.warmup)
        x = sample_batch(train, args.target_batch, args.seq_len, gen)
        with autocast(args.bf16):
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        running += float(loss.detach())
        if (step + 1) % args.log_every == 0 or step + 1 == args.target_steps:
            el = time.perf_counter() - t0
            log(
                f"target step {step + 1}/{args.target_steps} loss {running / args.log_every:.3f} "
                f"({el:.0f}s, {(step + 1) * x.numel() / el:.0f} tok/s)"
            )
            running = 0.0
    wall = time.perf_counter() - t0
    model.eval()
    return {"wall_s": wall, "val_loss": eval_loss(model, val, args, args.seed + 3)}


def distill_draft(
    draft: Any, target: Any, train: torch.Tensor, val: torch.Tensor, args: argparse.Namespace
) -> dict[str, Any]:
    target.eval()
    for p in target.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW(
        draft.parameters(), lr=args.draft_lr, betas=(0.9, 0.95), weight_decay=args.weight_decay
    )
    gen = torch.Generator().manual_seed(args.seed + 2)
    draft.train()
    t0 = time.perf_counter()
    run_kl = run_ce = 0.0
    for step in range(args.draft_steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args.draft_steps, args.draft_lr, args.warmup)
        x = sample_batch(train, args.draft_batch, args.seq_len, gen)
        with torch.no_grad(), autocast(args.bf16):
            p_logits = target(input_ids=x).logits
        with autocast(args.bf16):
            q_logits = draft(input_ids=x).logits
        logq = F.log_softmax(q_logits.float(), dim=-1)
        logp = F.log_softmax(p_logits.float(), dim=-1)
        p = logp.exp()
        kl = (p * (logp - logq)).sum(-1).mean()
        ce = F.nll_loss(logq[:, :-1].reshape(-1, logq.shape[-1]), x[:, 1:].reshape(-1))
        loss = args.kl_weight * kl + args.ce_weight * ce
        if args.tv_weight:
            # total variation = 1 - beta: the acceptance probability itself (DistillSpec's TVD)
            tv = 0.5 * (p - logq.exp()).abs().sum(-1).mean()
            loss = loss + args.tv_weight * tv
        loss.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        run_kl += float(kl.detach())
        run_ce += float(ce.detach())
        if (step + 1) % args.log_every == 0 or step + 1 == args.draft_steps:
            el = time.perf_counter() - t0
            log(
                f"draft step {step + 1}/{args.draft_steps} kl {run_kl / args.log_every:.3f} "
                f"ce {run_ce / args.log_every:.3f} ({el:.0f}s)"
            )
            run_kl = run_ce = 0.0
    wall = time.perf_counter() - t0
    draft.eval()
    return {"wall_s": wall, "val_loss": eval_loss(draft, val, args, args.seed + 3)}


# --------------------------------------------------------------------------- output
def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def save_pair(out: Path, target: Any, draft: Any, hf_tok: Any, dtype: str) -> None:
    from transformers import GenerationConfig

    for name, model in (("target", target), ("draft", draft)):
        d = out / name
        d.mkdir(parents=True, exist_ok=True)
        for stale in d.iterdir():
            stale.unlink()
        model.generation_config = GenerationConfig(
            bos_token_id=model.config.bos_token_id,
            eos_token_id=model.config.eos_token_id,
            pad_token_id=model.config.pad_token_id,
            do_sample=False,
        )
        # float16 halves the files; loading them as float32 (the configured dtype) is exact, and
        # every figure in the manifest is measured on the reloaded files.
        model.to(device="cpu", dtype=getattr(torch, dtype)).save_pretrained(d)
        hf_tok.save_pretrained(d)


def measure_latency(out: Path, args: argparse.Namespace, threads: int) -> dict[str, Any]:
    """Run benchmarks/bench_tiny_pair.py on the saved pair in a fresh process (fresh allocator and
    thread pool, nothing left over from training)."""
    cmd = [
        sys.executable,
        str(REPO / "benchmarks" / "bench_tiny_pair.py"),
        "--json",
        "--dir",
        str(out),
        "--threads",
        str(threads),
        "--steps",
        str(args.latency_steps),
        "--block",
        str(args.latency_block),
        "--context",
        str(args.latency_context),
    ]
    res = subprocess.run(cmd, check=True, capture_output=True, text=True)
    data: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    return data


def dumps_manifest(obj: Any) -> str:
    """Indented JSON, but lists of numbers (token ids) kept on one line."""
    text = json.dumps(obj, indent=1)

    def collapse(m: re.Match[str]) -> str:
        return "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]"

    return re.sub(r"\[\s*([-\d.,\se+]+?)\s*\]", collapse, text) + "\n"


def load_prompts(
    datasets: Path, tokenizer: Any
) -> tuple[dict[str, dict[str, list[int]]], dict[str, dict[str, str]]]:
    """Token ids (BOS prepended by the tokenizer) of every prompt of each tiny workload, and each
    dataset's path and sha256."""
    prompts: dict[str, dict[str, list[int]]] = {}
    files: dict[str, dict[str, str]] = {}
    for w in WORKLOADS:
        path = datasets / f"{w}.jsonl"
        rel = path.resolve().relative_to(REPO) if path.resolve().is_relative_to(REPO) else path
        files[w] = {"dataset": rel.as_posix(), "dataset_sha256": sha256(path)}
        items: dict[str, list[int]] = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rec = json.loads(line)
                items[rec["id"]] = list(tokenizer(rec["prompt"])["input_ids"])
        prompts[w] = items
    return prompts, files


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    ap.add_argument("--out", type=Path, default=REPO / "specbench" / "assets" / "tiny-pair")
    ap.add_argument(
        "--measure-only",
        action="store_true",
        help="skip training: re-measure the pair already in --out (latency, "
        "acceptance on the current datasets) and update its manifest",
    )
    ap.add_argument("--datasets", type=Path, default=REPO / "datasets")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument(
        "--device",
        default="cpu",
        help="where training runs (cpu, cuda); measuring is always on the CPU. A different "
        "device gives different weights for the same seed (other kernels)",
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--bf16",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="bf16 autocast for training matmuls (weights stay fp32)",
    )
    ap.add_argument(
        "--corpus",
        choices=("stdlib", "broad"),
        default="stdlib",
        help="stdlib: the standard library's *.py files (the shipped pair); broad: code, prose "
        "and structured text from the standard library and site-packages (--*-chars budgets)",
    )
    ap.add_argument("--char-budget", type=int, default=12_000_000, help="--corpus stdlib")
    ap.add_argument("--max-file-chars", type=int, default=400_000, help="code/prose file cut")
    ap.add_argument("--code-chars", type=int, default=7_000_000, help="--corpus broad: code")
    ap.add_argument("--prose-chars", type=int, default=3_000_000, help="--corpus broad: prose")
    ap.add_argument(
        "--structured-chars", type=int, default=1_500_000, help="--corpus broad: structured"
    )
    ap.add_argument("--structured-max-file-chars", type=int, default=100_000)
    ap.add_argument(
        "--save-dtype",
        choices=("float16", "float32"),
        default="float32",
        help="dtype of the weight files (float16 upcasts to float32 exactly on loading)",
    )
    ap.add_argument("--val-every", type=int, default=50)
    ap.add_argument("--vocab-size", type=int, default=4096)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--max-positions", type=int, default=1024)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--log-every", type=int, default=100)
    ap.add_argument("--eval-batches", type=int, default=8)
    ap.add_argument("--target-layers", type=int, default=10)
    ap.add_argument("--target-hidden", type=int, default=160)
    ap.add_argument("--target-intermediate", type=int, default=512)
    ap.add_argument("--target-heads", type=int, default=5)
    ap.add_argument("--target-steps", type=int, default=3000)
    ap.add_argument("--target-batch", type=int, default=4)
    ap.add_argument("--target-lr", type=float, default=3e-3)
    ap.add_argument("--draft-layers", type=int, default=1)
    ap.add_argument("--draft-hidden", type=int, default=96)
    ap.add_argument("--draft-intermediate", type=int, default=256)
    ap.add_argument("--draft-heads", type=int, default=3)
    ap.add_argument("--draft-steps", type=int, default=500)
    ap.add_argument("--draft-batch", type=int, default=8)
    ap.add_argument("--draft-lr", type=float, default=4e-3)
    ap.add_argument("--kl-weight", type=float, default=1.0)
    ap.add_argument("--ce-weight", type=float, default=0.0)
    ap.add_argument(
        "--tv-weight",
        type=float,
        default=0.0,
        help="weight of the total variation TV(p, q) = 1 - beta in the draft loss",
    )
    ap.add_argument(
        "--n-new",
        type=int,
        default=32,
        help="target greedy continuation length per prompt for acceptance figures",
    )
    ap.add_argument("--latency-steps", type=int, default=400)
    ap.add_argument("--latency-context", type=int, default=64)
    ap.add_argument(
        "--latency-block",
        type=int,
        default=8,
        help="consecutive decode steps per model per turn (like a draft round)",
    )
    return ap.parse_args(argv)


def _without_out(argv: list[str]) -> list[str]:
    """argv minus any --out option (it only says where the files go)."""
    out: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a == "--out":
            skip = True
        elif not a.startswith("--out="):
            out.append(a)
    return out


def build_corpus(args: argparse.Namespace) -> tuple[list[str], set[int], dict[str, Any]]:
    """(every selected text in order, the indices held out for validation, the manifest's corpus
    description) for --corpus stdlib (the shipped pair's corpus) or --corpus broad."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    corpus_sha = hashlib.sha256()
    if args.corpus == "stdlib":
        rels, texts, n_cands = select_stdlib_corpus(stdlib, args.char_budget, args.max_file_chars)
        for r, t in zip(rels, texts, strict=True):
            corpus_sha.update(r.encode() + b"\0" + t.encode("utf-8", "replace") + b"\0")
        n_chars = sum(map(len, texts))
        log(f"corpus: {len(rels)} files of {n_cands} candidates, {n_chars} chars from {stdlib}")
        return (
            texts,
            set(range(0, len(texts), args.val_every)),
            {
                "source": "Python standard library *.py files (sysconfig.get_paths()['stdlib']): "
                "code plus docstrings/comments as English prose",
                "stdlib_path": str(stdlib),
                "python_version": platform.python_version(),
                "selection": "all *.py under the stdlib path in sorted relative-path order; "
                f"skipped: files under directories named {list(EXCLUDED_DIRS)}, files starting "
                f"with {list(EXCLUDED_PREFIXES)}, empty files; each file truncated to "
                f"{args.max_file_chars} chars; files added in order until the char budget "
                f"({args.char_budget}) would be exceeded",
                "char_budget": args.char_budget,
                "max_file_chars": args.max_file_chars,
                "n_candidate_files": n_cands,
                "n_files": len(rels),
                "n_chars": n_chars,
                "first_file": rels[0],
                "last_file": rels[-1],
                "sha256": corpus_sha.hexdigest(),
                "sha256_of": "for each selected file in order: relative path, NUL, text "
                "(UTF-8), NUL",
                "validation": f"every {args.val_every}th selected file (index 0, "
                f"{args.val_every}, ...)",
            },
        )
    purelib = Path(sysconfig.get_paths()["purelib"])
    budgets = {
        "code": args.code_chars,
        "prose": args.prose_chars,
        "structured": args.structured_chars,
    }
    max_chars = {
        "code": args.max_file_chars,
        "prose": args.max_file_chars,
        "structured": args.structured_max_file_chars,
    }
    texts = []
    val_idx: set[int] = set()
    kinds: dict[str, Any] = {}
    for kind, ks in select_broad_corpus(stdlib, purelib, budgets, max_chars).items():
        kind_sha = hashlib.sha256()
        for i, (r, t) in enumerate(zip(ks["labels"], ks["texts"], strict=True)):
            blob = r.encode() + b"\0" + t.encode("utf-8", "replace") + b"\0"
            corpus_sha.update(blob)
            kind_sha.update(blob)
            if i % args.val_every == 0:
                val_idx.add(len(texts))
            texts.append(t)
        kinds[kind] = {
            "n_candidate_files": ks["n_candidates"],
            "n_files": len(ks["labels"]),
            "n_chars": sum(map(len, ks["texts"])),
            "char_budget": budgets[kind],
            "max_file_chars": max_chars[kind],
            "sha256": kind_sha.hexdigest(),
            "files": ks["labels"],
        }
        log(
            f"corpus {kind}: {len(ks['labels'])} files of {ks['n_candidates']} candidates, "
            f"{kinds[kind]['n_chars']} chars"
        )
    return (
        texts,
        val_idx,
        {
            "source": "code: the Python standard library's *.py files; prose: the help() text "
            "(pydoc_data/topics.py) and the *.txt/*.rst/*.md, README, LICENSE and dist-info "
            "METADATA files of the standard library and of the running interpreter's "
            "site-packages; structured: their *.json/*.csv/*.ini/*.cfg/*.toml/*.yaml/*.yml/"
            "*.html/*.xml files",
            "stdlib_path": str(stdlib),
            "site_packages_path": str(purelib),
            "python_version": platform.python_version(),
            "selection": "per kind: candidates under the roots, skipping files under "
            f"directories named {list(EXCLUDED_DIRS)} and files starting with "
            f"{list(EXCLUDED_PREFIXES)}; visited in the order of sha256(label) (label = "
            "'stdlib:REL' or 'site:REL'); each text cut at the kind's max_file_chars; empty "
            f"texts, and prose with under {PROSE_MIN_LETTER_SHARE:.0%} letters and spaces, "
            "skipped; a file is added when it fits the kind's remaining char budget",
            "n_chars": sum(map(len, texts)),
            "sha256": corpus_sha.hexdigest(),
            "sha256_of": "for each kind (code, prose, structured) and each selected file in "
            "order: label, NUL, text (UTF-8), NUL",
            "validation": f"every {args.val_every}th selected file of each kind (index 0, "
            f"{args.val_every}, ...)",
            "kinds": kinds,
        },
    )


def train_pair(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    """Corpus → tokenizer → target → distilled draft, saved under args.out. Returns the training
    part of the manifest."""
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

    t_start = time.perf_counter()
    cpu_start = time.process_time()
    random.seed(args.seed)
    torch.manual_seed(args.seed)

    # 1. corpus + tokenizer
    texts, val_idx, corpus_info = build_corpus(args)
    n_chars = sum(map(len, texts))
    t0 = time.perf_counter()
    tok = train_tokenizer(texts, args.vocab_size)
    eot_id = tok.token_to_id(EOT)
    hf_tok = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=EOT,
        eos_token=EOT,
        pad_token=EOT,
        model_max_length=args.max_positions,
    )
    train_ids = encode_docs(tok, [t for i, t in enumerate(texts) if i not in val_idx], eot_id)
    val_ids = encode_docs(tok, [t for i, t in enumerate(texts) if i in val_idx], eot_id)
    tok_wall = time.perf_counter() - t0
    log(
        f"tokenizer: vocab {tok.get_vocab_size()}, {tok_wall:.1f}s incl. encoding; train "
        f"{len(train_ids)} tokens, val {len(val_ids)} tokens "
        f"({n_chars / (len(train_ids) + len(val_ids)):.2f} chars/token)"
    )

    # 2. target
    torch.manual_seed(args.seed)
    target = LlamaForCausalLM(llama_config(args, "target", tok.get_vocab_size(), eot_id)).to(DEVICE)
    log(f"target: {n_params(target)} parameters")
    tstats = train_target(target, train_ids, val_ids, args)
    log(f"target done in {tstats['wall_s']:.0f}s, val loss {tstats['val_loss']:.3f}")

    # 3. draft
    torch.manual_seed(args.seed + 10)
    draft = LlamaForCausalLM(llama_config(args, "draft", tok.get_vocab_size(), eot_id)).to(DEVICE)
    log(f"draft: {n_params(draft)} parameters")
    dstats = distill_draft(draft, target, train_ids, val_ids, args)
    log(f"draft done in {dstats['wall_s']:.0f}s, val loss {dstats['val_loss']:.3f}")
    train_wall = time.perf_counter() - t_start
    train_cpu = time.process_time() - cpu_start
    save_pair(args.out, target, draft, hf_tok, args.save_dtype)
    log(f"training (tokenizer + target + draft) took {train_wall:.0f}s wall, {train_cpu:.0f}s CPU")

    return {
        "schema_version": 1,
        "description": "Tiny Llama target/draft pair sharing one byte-level BPE tokenizer, trained "
        "offline by scripts/train_tiny_pair.py on the Python standard library's code and the "
        "prose and structured text shipped with the Python install and its installed packages.",
        "command": " ".join(["python scripts/train_tiny_pair.py", *_without_out(argv)]),
        "command_note": "--out (where the files are written) omitted; it does not change them",
        "args": {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in vars(args).items()
            if k not in ("out", "datasets", "measure_only")
        },
        "environment": {
            "python_version": platform.python_version(),
            "python_implementation": platform.python_implementation(),
            "torch": torch.__version__,
            "transformers": __import__("transformers").__version__,
            "tokenizers": __import__("tokenizers").__version__,
            "machine": platform.machine(),
            "processor": platform.processor(),
            "cpu_count": os.cpu_count(),
            "threads": args.threads,
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        },
        "corpus": {
            **corpus_info,
            "train_tokens": len(train_ids),
            "val_tokens": len(val_ids),
            "document_separator": EOT,
        },
        "tokenizer": {
            "type": "byte-level BPE (tokenizers), GPT-2 style pre-tokenization, min_frequency 2",
            "vocab_size": tok.get_vocab_size(),
            "special_tokens": {"bos": EOT, "eos": EOT, "pad": EOT, "id": eot_id},
            "prepends_bos": True,
        },
        "training": {
            "seed": args.seed,
            "seeds": {
                "torch_init_target": args.seed,
                "torch_init_draft": args.seed + 10,
                "target_batches": args.seed + 1,
                "draft_batches": args.seed + 2,
                "eval_batches": args.seed + 3,
            },
            "seq_len": args.seq_len,
            "optimizer": "AdamW(betas=(0.9, 0.95)), linear warmup then cosine to 10% of peak, "
            "grad clip 1.0",
            "weight_decay": args.weight_decay,
            "warmup_steps": args.warmup,
            "bf16_autocast": args.bf16,
            "target": {
                "steps": args.target_steps,
                "batch": args.target_batch,
                "lr": args.target_lr,
                "objective": "next-token cross-entropy",
                "tokens_seen": args.target_steps * args.target_batch * args.seq_len,
                "wall_s": round(tstats["wall_s"], 1),
                "val_loss": round(tstats["val_loss"], 4),
            },
            "draft": {
                "steps": args.draft_steps,
                "batch": args.draft_batch,
                "lr": args.draft_lr,
                "objective": f"{args.kl_weight} * KL(p_target || q_draft) + "
                f"{args.tv_weight} * TV(p_target, q_draft) + {args.ce_weight} * CE(data), "
                "temperature 1, target frozen",
                "tokens_seen": args.draft_steps * args.draft_batch * args.seq_len,
                "wall_s": round(dstats["wall_s"], 1),
                "val_loss_ce": round(dstats["val_loss"], 4),
            },
            "tokenizer_wall_s": round(tok_wall, 1),
            "total_wall_s": round(train_wall, 1),
            "total_cpu_s": round(train_cpu, 1),
            "total_wall_note": "tokenizer + encoding + target + draft, excluding saving and "
            "measuring; wall time on a shared machine includes waiting for the CPU "
            "(total_cpu_s is this process's own CPU time)",
        },
    }


def _stored_dtype(model_dir: Path) -> str:
    cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    return str(cfg.get("dtype") or cfg.get("torch_dtype"))


def measure_pair(args: argparse.Namespace) -> dict[str, Any]:
    """Reload the saved pair from disk (fp32, the shipped form) and measure it: sizes, hashes,
    decode-step latency, acceptance figures. Returns those parts of the manifest."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out: Path = args.out
    tgt = AutoModelForCausalLM.from_pretrained(out / "target", dtype=torch.float32).eval()
    drf = AutoModelForCausalLM.from_pretrained(out / "draft", dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(out / "target")

    lat = measure_latency(out, args, args.threads)
    lat1 = measure_latency(out, args, 1) if args.threads != 1 else None
    blk, alt = lat["blocked"], lat["alternating"]
    log(
        f"decode step (blocks of {blk['block']}): target {blk['target_ms_median']:.3f} ms, draft "
        f"{blk['draft_ms_median']:.3f} ms, ratio {blk['ratio_target_over_draft']:.2f}; "
        f"alternating every step: {alt['target_ms_median']:.3f} / {alt['draft_ms_median']:.3f} "
        f"ms, ratio {alt['ratio_target_over_draft']:.2f}"
    )

    prompts, files = load_prompts(args.datasets, tokenizer)
    acc = acceptance_figures(tgt, drf, prompts, n_new=args.n_new, temperature=1.0)
    for w, v in acc["workloads"].items():
        log(
            f"{w}: greedy agreement {v['greedy_agreement']:.3f}, mean beta(T=1) "
            f"{v['mean_beta']:.3f}, target self-agreement {v['target_self_agreement']:.3f}"
        )
    log(
        f"beta spread {acc['beta_spread']:.3f} ({acc['most_predictable']} vs "
        f"{acc['least_predictable']})"
    )
    continuations = acc.pop("continuations")
    for w, v in acc["workloads"].items():
        v.update(files[w])

    weights = {
        f"{name}/{f.name}": sha256(f)
        for name in MODEL_NAMES
        for f in sorted((out / name).glob("*.safetensors"))
    }
    total_bytes = sum(
        f.stat().st_size for f in out.rglob("*") if f.is_file() and f.name != "manifest.json"
    )
    models: dict[str, Any] = {}
    for name, model in (("target", tgt), ("draft", drf)):
        c = model.config
        models[name] = {
            "dir": name,
            "architecture": "LlamaForCausalLM",
            "parameters": n_params(model),
            "num_hidden_layers": c.num_hidden_layers,
            "hidden_size": c.hidden_size,
            "intermediate_size": c.intermediate_size,
            "num_attention_heads": c.num_attention_heads,
            "head_dim": c.hidden_size // c.num_attention_heads,
            "tie_word_embeddings": bool(c.tie_word_embeddings),
            "trained_context": args.seq_len,
            "max_position_embeddings": c.max_position_embeddings,
            "dtype": "float32",
            "stored_dtype": _stored_dtype(out / name),
            "weight_bytes": sum(f.stat().st_size for f in (out / name).glob("*.safetensors")),
        }

    def r4(d: dict[str, Any]) -> dict[str, Any]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in d.items()}

    return {
        "models": models,
        "files": {"sha256": weights, "total_bytes_excluding_manifest": total_bytes},
        "latency": {
            "what": "one decode step (1 token, KV cache, batch 1, fp32, incl. the argmax), target "
            "and draft interleaved (specbench.decoding.pairstats.decode_step_latencies) by "
            "benchmarks/bench_tiny_pair.py in a subprocess; 'blocked': turns of `block` "
            "consecutive steps per model (like a draft round) — the headline figures; "
            "'alternating': one step each in turn (the draft always right after a target step, "
            "its worst case); medians in ms. Machine- and load-dependent: rerun the benchmark to "
            "compare on your machine.",
            "threads": lat["threads"],
            "context_len": lat["context_len"],
            "omp_wait_policy": lat["omp_wait_policy"],
            "nice": lat.get("nice"),
            "target_ms_median": round(blk["target_ms_median"], 4),
            "draft_ms_median": round(blk["draft_ms_median"], 4),
            "ratio_target_over_draft": round(blk["ratio_target_over_draft"], 3),
            "blocked": r4(blk),
            "alternating": r4(alt),
            "single_thread": None
            if lat1 is None
            else {
                "note": "the same measurement with torch.set_num_threads(1), the setting "
                "configs/tiny.yaml runs the pair with",
                "blocked": r4(lat1["blocked"]),
                "alternating": r4(lat1["alternating"]),
            },
        },
        "acceptance": {
            "method": "per prompt (tokenizer(prompt), BOS prepended): the target's greedy "
            "continuation of n_new tokens (KV cache, no EOS stop); then one forward of each model "
            "over prompt+continuation; at the n_new positions predicting continuation tokens: "
            "greedy_agreement = mean[argmax q == argmax p]; mean_beta = mean exact "
            "beta = sum_x min(p, q) with p, q = process_logits(logits, SamplingParams(temperature="
            "1.0)) (docs/theory.md §2 estimator (a)); pooled over all positions of the workload; "
            "target_self_agreement = mean[argmax p == continuation token] (1.0 unless the cached "
            "and full forwards disagree on a near-tie). specbench.decoding.pairstats.acceptance_figures; "
            "all prompts of each dataset are used (tests/test_tiny_pair.py recomputes exactly "
            "these).",
            **acc,
            "continuations": continuations,
        },
    }


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    global DEVICE
    DEVICE = torch.device(args.device)
    torch.set_num_threads(args.threads)
    os.environ.setdefault("RAYON_NUM_THREADS", str(args.threads))
    t_start = time.perf_counter()
    manifest_path = args.out / "manifest.json"
    if args.measure_only:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        manifest["remeasured_with"] = " ".join(
            ["python scripts/train_tiny_pair.py", *_without_out(argv)]
        )
        # "args" stays as the training run recorded it; the measurement settings of this
        # invocation are in the latency and acceptance sections (and remeasured_with).
    else:
        manifest = train_pair(args, argv)
    manifest.update(measure_pair(args))
    manifest_path.write_text(dumps_manifest(manifest), encoding="utf-8")
    log(
        f"wrote {manifest_path}; pair {manifest['files']['total_bytes_excluding_manifest'] / 1e6:.1f}"
        f" MB; script wall {time.perf_counter() - t_start:.0f}s"
    )


if __name__ == "__main__":
    main()
