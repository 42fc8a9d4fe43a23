"""GPU physics of speculative decoding on a sized pair: is verify flat in k, and where does batching
make the extra tokens expensive?

The shipped tiny pair is far too small to show what a GPU does with a verify over k + 1 tokens (its
forwards are launch-bound). This builds, in memory and from configs only (no weights to fetch), a
randomly initialised Llama target of a real shape (28 layers × 3072, ≈ 2.8 B parameters, bf16) and
a draft (4 layers × 1280, ≈ 0.1 B) with the tiny tokenizer's vocabulary, and times with KV caches
over a random context (docs/theory.md §time model, §batching):

- batch 1: a target decode step (T_ar), a draft step (T_d) and a target verify over k + 1 tokens
  for k = 1…16 (T_t(k)); T_t(k) = t0 + t1·k is fitted by least squares over the per-k medians and
  labelled flat / grows / unclear from the 95 % interval of t1 (below);
- batch b = 1…64 (the load model): decode step of each model and verify over k + 1 tokens per
  sequence, k ∈ {1, 2, 4, 8}, with the CUDA peak memory of each b;
- every timed forward twice: specbench's `Clock` (device-synchronised wall time, the timer `run`
  and `accept` use) and a pair of `torch.cuda.Event`s around the same forward (the timer
  cross-check; skipped on a CPU, which has no events).

Random weights time like trained ones (same kernels, same shapes); only acceptance cannot come from
them, so predictions take α from the tiny pair's run (`--alpha-from RUN/results.json`) and say so.

    python benchmarks/gpu_physics.py --device cuda --out physics.json --alpha-from reports/tiny/results.json
    python benchmarks/gpu_physics.py --device cpu --quick --out physics.json      # tiny shapes, CI
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

# A verify whose fitted cost grows by less than this over k = 1 → 16 counts as flat.
FLAT_GROWTH = 0.10
# Wall timer vs CUDA events: the agreement the cross-check asks for.
TIMER_TOLERANCE = 0.05


@dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int
    intermediate: int
    heads: int
    kv_heads: int


# Llama-3.2-3B's body (its 128k vocabulary replaced by the tiny tokenizer's 4096) and a 4-layer draft.
SIZED = {"target": Shape(3072, 28, 8192, 24, 8), "draft": Shape(1280, 4, 5120, 10, 2)}
QUICK = {"target": Shape(128, 4, 256, 4, 2), "draft": Shape(64, 1, 128, 2, 1)}


@dataclass(frozen=True)
class Plan:
    context_len: int
    ks: tuple[int, ...]  # batch-1 verify sizes (drafted tokens)
    batches: tuple[int, ...]
    batch_ks: tuple[int, ...]
    reps: int
    batch_reps: int
    warmup: int


FULL_PLAN = Plan(512, tuple(range(1, 17)), (1, 2, 4, 8, 16, 32, 64), (1, 2, 4, 8), 20, 10, 3)
QUICK_PLAN = Plan(32, tuple(range(1, 17)), (1, 2, 4), (1, 2, 4, 8), 3, 2, 1)


def llama_params(shape: Shape, vocab: int) -> int:
    """Parameters of a LlamaForCausalLM with tied embeddings and no biases, counted by hand."""
    head_dim = shape.hidden // shape.heads
    attn = 2 * shape.hidden * shape.hidden + 2 * shape.hidden * shape.kv_heads * head_dim
    mlp = 3 * shape.hidden * shape.intermediate
    norms = 2 * shape.hidden
    return vocab * shape.hidden + shape.layers * (attn + mlp + norms) + shape.hidden


# --------------------------------------------------------------------------------------------
# fits and labels (pure)


@dataclass(frozen=True)
class VerifyFit:
    t0_ms: float
    t1_ms_per_token: float
    t1_ci95: tuple[float, float]
    growth_1_to_16: float  # fitted (T_t(16) − T_t(1)) / T_t(1)
    growth_ci95: tuple[float, float]
    label: str  # "flat" | "grows" | "unclear"


def fit_verify(ks: Sequence[int], ms: Sequence[float], level: float = 0.95) -> VerifyFit:
    """T_t(k) = t0 + t1·k by least squares, and the growth over the k range with its interval.

    growth g = (kmax − kmin)·t1 / T_t(kmin), a ratio of two fitted quantities N / B; its interval
    is Fieller's: the g for which the t-test of the linear contrast N − g·B = 0 does not reject
    (exact under the linear model with Gaussian errors, no matter how N and B correlate). "flat":
    the upper end is below FLAT_GROWTH; "grows": the lower end is above; else "unclear". Each label
    is then wrong with probability ≤ (1 − level)/2 (tests/unit/test_gpu_check_math.py simulates it).
    """
    x = np.asarray(ks, float)
    y = np.asarray(ms, float)
    design = np.column_stack([np.ones_like(x), x])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ coef
    dof = len(x) - 2
    cov = float(resid @ resid) / dof * np.linalg.inv(design.T @ design)  # (t0, t1)
    q = float(stats.t.ppf(0.5 + level / 2, dof))
    t0, t1 = float(coef[0]), float(coef[1])
    span, kmin = float(x.max() - x.min()), float(x.min())
    n_est, b_est = span * t1, t0 + t1 * kmin  # growth = N / B
    grad_n, grad_b = np.array([0.0, span]), np.array([1.0, kmin])
    v_n, v_b, c_nb = grad_n @ cov @ grad_n, grad_b @ cov @ grad_b, grad_n @ cov @ grad_b
    # (N − g·B)² ≤ q²·Var(N − g·B): a quadratic a·g² − 2·h·g + c ≤ 0
    a = b_est**2 - q**2 * v_b
    h = n_est * b_est - q**2 * c_nb
    c = n_est**2 - q**2 * v_n
    disc = h * h - a * c
    if a > 0 and disc >= 0:
        g_lo, g_hi = (h - math.sqrt(disc)) / a, (h + math.sqrt(disc)) / a
    else:  # the base itself is not distinguishable from 0: the interval is unbounded
        g_lo, g_hi = -math.inf, math.inf
    t1_half = q * math.sqrt(cov[1, 1])
    label = "flat" if g_hi < FLAT_GROWTH else "grows" if g_lo > FLAT_GROWTH else "unclear"
    growth_ci = (float(g_lo), float(g_hi))
    return VerifyFit(t0, t1, (t1 - t1_half, t1 + t1_half), n_est / b_est, growth_ci, label)


def alphas_from_run(results: dict[str, Any]) -> list[dict[str, Any]]:
    """(workload, temperature, α) of every entry of a tiny run's results.json."""
    out = []
    for entry in results.get("workloads") or []:
        alpha = (entry.get("alpha") or {}).get("value")
        if isinstance(alpha, int | float) and math.isfinite(alpha):
            out.append(
                {
                    "workload": entry["workload"],
                    "temperature": entry["temperature"],
                    "alpha": float(alpha),
                }
            )
    return out


def predictions(
    alphas: list[dict[str, Any]],
    batch1: dict[str, Any],
    batch_rows: list[dict[str, Any]],
    gamma_max: int,
) -> list[dict[str, Any]]:
    """Predicted speedup per γ at batch 1 (sized timings, tiny α) and the best γ per batch size.

    One formula (specbench.analysis.rollout.predicted_speedup, docs/theory.md §time model):
    T_ar·ā(γ) / (γ·T_d + t0 + t1·γ). Under batching each of the b sequences gains ā(γ) tokens per
    step, so the ratio of throughputs at batch b is the same formula with that b's step times.
    """
    from specbench.analysis.rollout import TimeModel, predicted_speedup

    def model(t_ar: float, t_d: float, ks: list[int], ms: list[float]) -> TimeModel:
        fit = stats.linregress(np.asarray(ks, float), np.asarray(ms, float))
        return TimeModel(
            t_ar, t_d, float(fit.intercept), max(float(fit.slope), 0.0), "ms", "measured"
        )

    def best(tm: TimeModel, alpha: float, gammas: Sequence[int]) -> tuple[int, float]:
        g, s = max(((g, predicted_speedup(g, alpha, tm)) for g in gammas), key=lambda r: r[1])
        return (g, s) if s > 1.0 else (0, 1.0)

    vm1 = {int(k): float(v) for k, v in batch1["verify_ms"].items()}  # JSON keys are strings
    tm1 = model(
        batch1["t_target_ms"], batch1["t_draft_ms"], sorted(vm1), [vm1[k] for k in sorted(vm1)]
    )
    out = []
    for a in alphas:
        per_gamma = [
            {"gamma": g, "speedup": predicted_speedup(g, a["alpha"], tm1)}
            for g in range(1, gamma_max + 1)
        ]
        g1, s1 = best(tm1, a["alpha"], range(1, gamma_max + 1))
        by_batch = []
        for row in batch_rows:
            vm = {int(k): float(v) for k, v in row["verify_ms"].items()}
            tm = model(
                row["t_target_ms"], row["t_draft_ms"], sorted(vm), [vm[k] for k in sorted(vm)]
            )
            g, s = best(tm, a["alpha"], sorted(vm))
            by_batch.append({"batch": row["batch"], "best_gamma": g, "speedup": s})
        out.append(
            a | {"batch1": per_gamma, "best_gamma": g1, "best_speedup": s1, "by_batch": by_batch}
        )
    return out


# --------------------------------------------------------------------------------------------
# torch: models and timers


def build(shape: Shape, vocab: int, dtype: Any, device: Any, seed: int) -> Any:
    """A randomly initialised LlamaForCausalLM built on `device` (no weights read or fetched)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    torch.manual_seed(seed)
    with torch.device(device):
        model = LlamaForCausalLM(config)
    return model.to(dtype).eval()


class DualTimer:
    """Times a callable with specbench's Clock and, on CUDA, with CUDA events on the same call."""

    def __init__(self, device: Any) -> None:
        import torch

        from specbench.decoding.timing import Clock

        self.clock = Clock(device)
        self.cuda = device.type == "cuda"
        self._events = (
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            if self.cuda
            else None
        )

    def __call__(self, fn: Callable[[], Any]) -> tuple[float, float | None]:
        t0 = self.clock.now()  # synchronises: nothing earlier is still running
        if self._events is None:
            fn()
            return self.clock.now() - t0, None
        start, end = self._events
        start.record()
        fn()
        end.record()
        wall = self.clock.now() - t0
        end.synchronize()
        return wall, float(start.elapsed_time(end))


def time_steps(
    models: dict[str, Any],
    batch: int,
    plan: Plan,
    ks: Sequence[int],
    reps: int,
    timer: DualTimer,
    vocab: int,
    seed: int,
) -> dict[str, dict[str, list[float]]]:
    """Wall and event times (ms) of one decode step of each model and a target verify over k + 1
    tokens per sequence for each k, at `batch` sequences after a random context of
    `plan.context_len` tokens. Steps are interleaved per repetition and each cache is cropped back
    after each step, so every step sees the same cache length; warm-up repetitions are dropped."""
    import torch
    from transformers import DynamicCache

    device = next(models["target"].parameters()).device
    gen = torch.Generator().manual_seed(seed)
    caches = {}
    with torch.inference_mode():
        ctx = torch.randint(0, vocab, (batch, plan.context_len), generator=gen).to(device)
        for name, model in models.items():
            caches[name] = DynamicCache(config=model.config)
            model(input_ids=ctx, past_key_values=caches[name], use_cache=True, logits_to_keep=1)
    times: dict[str, dict[str, list[float]]] = {}

    def step(label: str, name: str, tokens: Any, rep: int) -> None:
        n = tokens.shape[1]

        def forward() -> None:
            out = models[name](
                input_ids=tokens, past_key_values=caches[name], use_cache=True, logits_to_keep=n
            )
            out.logits.argmax(dim=-1)  # (b, n): what a verify reads

        with torch.inference_mode():
            wall, event = timer(forward)
            caches[name].crop(-n)
        if rep >= plan.warmup:
            slot = times.setdefault(label, {"wall": [], "event": []})
            slot["wall"].append(wall)
            if event is not None:
                slot["event"].append(event)

    for rep in range(plan.warmup + reps):
        tok = torch.randint(0, vocab, (batch, max(ks) + 1), generator=gen).to(device)
        step("draft", "draft", tok[:, :1], rep)
        step("target", "target", tok[:, :1], rep)
        for k in ks:
            step(f"verify_{k}", "target", tok[:, : k + 1], rep)
    caches.clear()  # free the KV memory before the next batch size
    return times


def copy_bandwidth_gbs(device: Any, gib: float = 2.0, reps: int = 5) -> float:
    """Device-to-device copy bandwidth (bytes read + written per second, GB/s), CUDA events."""
    import torch

    n = int(gib * 2**30)
    src = torch.empty(n, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        dst.copy_(src)
    end.record()
    end.synchronize()
    seconds = start.elapsed_time(end) / 1000 / reps
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n / seconds / 1e9


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


def measure(device_name: str, quick: bool, seed: int = 0) -> dict[str, Any]:
    """Every timing of the module docstring, as one JSON-ready dict."""
    import torch
    import transformers

    from specbench.models.tinypair import tiny_model_dir

    device = torch.device(device_name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: --device cuda but torch sees no CUDA device")
    # bf16 is the deployment dtype on a GPU; CPU bf16 matmuls are slow and not what is studied here.
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    vocab = int(
        json.loads((Path(tiny_model_dir("target")) / "config.json").read_text())["vocab_size"]
    )
    shapes, plan = (QUICK, QUICK_PLAN) if quick else (SIZED, FULL_PLAN)
    if device.type == "cpu":
        torch.set_num_threads(1)
    t_build = time.perf_counter()
    models = {name: build(shape, vocab, dtype, device, seed) for name, shape in shapes.items()}
    build_s = time.perf_counter() - t_build
    timer = DualTimer(device)

    raw1 = time_steps(models, 1, plan, plan.ks, plan.reps, timer, vocab, seed)
    batch1 = {
        "t_target_ms": _median(raw1["target"]["wall"]),
        "t_draft_ms": _median(raw1["draft"]["wall"]),
        "verify_ms": {k: _median(raw1[f"verify_{k}"]["wall"]) for k in plan.ks},
    }
    fit = fit_verify(plan.ks, [batch1["verify_ms"][k] for k in plan.ks])

    batch_rows = []
    for b in plan.batches:
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        raw = time_steps(models, b, plan, plan.batch_ks, plan.batch_reps, timer, vocab, seed + b)
        batch_rows.append(
            {
                "batch": b,
                "t_target_ms": _median(raw["target"]["wall"]),
                "t_draft_ms": _median(raw["draft"]["wall"]),
                "verify_ms": {k: _median(raw[f"verify_{k}"]["wall"]) for k in plan.batch_ks},
                "peak_memory_mb": (
                    torch.cuda.max_memory_allocated(device) / 2**20
                    if device.type == "cuda"
                    else None
                ),
            }
        )
        if device.type == "cuda":
            torch.cuda.empty_cache()

    if device.type == "cuda":
        rows = [
            {
                "step": label,
                "wall_ms": _median(t["wall"]),
                "event_ms": _median(t["event"]),
                "rel_diff": _median(t["wall"]) / _median(t["event"]) - 1.0,
            }
            for label, t in raw1.items()
            if label in {"target", "draft", "verify_8", "verify_16"}
        ]
        worst = max(abs(r["rel_diff"]) for r in rows)
        timer_check: dict[str, Any] = {
            "ran": True,
            "rows": rows,
            "max_abs_rel_diff": worst,
            "tolerance": TIMER_TOLERANCE,
            "passed": worst <= TIMER_TOLERANCE,
        }
        bandwidth = copy_bandwidth_gbs(device)
        target_bytes = sum(p.numel() * p.element_size() for p in models["target"].parameters())
        floor_ms = target_bytes / (bandwidth * 1e9) * 1000
        gpu = torch.cuda.get_device_name(device)
    else:
        timer_check = {"ran": False, "reason": "no CUDA events on a CPU: skipped"}
        bandwidth, floor_ms, gpu = None, None, None

    return {
        "schema": 1,
        "device": str(device),
        "gpu": gpu,
        "dtype": str(dtype).removeprefix("torch."),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "quick": quick,
        "build_s": build_s,
        "vocab": vocab,
        "context_len": plan.context_len,
        "reps": {"batch1": plan.reps, "batch": plan.batch_reps, "warmup": plan.warmup},
        "models": {
            name: asdict(shape)
            | {
                "params": sum(p.numel() for p in models[name].parameters()),
                "params_by_hand": llama_params(shape, vocab),
            }
            for name, shape in shapes.items()
        },
        "batch1": batch1 | {"cost_ratio": batch1["t_draft_ms"] / batch1["t_target_ms"]},
        "verify_fit": asdict(fit),
        "batch": batch_rows,
        "timer_check": timer_check,
        "copy_bandwidth_gbs": bandwidth,
        # The target's weights read once at the measured copy bandwidth: a decode step's floor.
        "weight_read_floor_ms": floor_ms,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda, cuda:1 or cpu")
    parser.add_argument("--quick", action="store_true", help="tiny shapes and few repetitions")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument(
        "--alpha-from", type=Path, help="a tiny run's results.json: α for the predictions"
    )
    parser.add_argument("--gamma-max", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    result = measure(args.device, args.quick, args.seed)
    if args.alpha_from is not None and args.alpha_from.is_file():
        alphas = alphas_from_run(json.loads(args.alpha_from.read_text()))
        result["predictions"] = {
            "alpha_source": f"α of the tiny pair's run ({args.alpha_from.name}) with the "
            "sized pair's timings: the timing half of a deployment, not its acceptance",
            "workloads": predictions(alphas, result["batch1"], result["batch"], args.gamma_max),
        }
    else:
        result["predictions"] = {"alpha_source": None, "workloads": []}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    fit = result["verify_fit"]
    print(
        f"{result['device']} {result['gpu'] or ''} {result['dtype']}: T_ar {result['batch1']['t_target_ms']:.3f} ms, "
        f"T_d {result['batch1']['t_draft_ms']:.3f} ms, T_t(k) = {fit['t0_ms']:.3f} + "
        f"{fit['t1_ms_per_token']:.4f}·k ms ({fit['label']}, growth 1→16 {100 * fit['growth_1_to_16']:.1f} %)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
