"""`device_map: auto` without a GPU: accelerate's own placement planner run on the shipped configs'
models built on the meta device, with the GPUs given as a `max_memory` table (accelerate plans
from sizes alone, so fake GPUs are planned exactly as real ones of that free memory), and the real
`from_pretrained(..., device_map="auto")` of the tiny pair on this CPU-only machine.

What `from_pretrained(device_map="auto")` computes is accelerate's balanced budget
(`get_balanced_memory`: each GPU but the last gets the model's size / n plus a slack of 1.25 × its
largest whole unit) and then `infer_auto_device_map` with the model's `_no_split_modules`; the
first test checks transformers' own `_get_device_map` gives that same map, so the rest check what
a real load would place. Target and draft load one after the other, each with its own device_map:
the draft is planned on the memory the target left free.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import torch

from specbench.config import ModelSpec, parse_config, read_yaml
from specbench.decoding.drafters import ModelDrafter
from specbench.decoding.generate import fixed_gamma, speculative_generate
from specbench.decoding.lm import CachedLM
from specbench.decoding.timing import Clock
from specbench.harness.memory.memory_plan import GIB, SHIPPED_CONFIGS, plan_memory
from specbench.models import load_model
from specbench.models.load import offloaded
from specbench.models.meta import build_on_meta
from specbench.models.resolve import resolve_model_path
from specbench.sampling_params import SamplingParams

accelerate = pytest.importorskip("accelerate")  # the dev extra installs it

REPO = Path(__file__).resolve().parents[2]
TARGET, DRAFT = "meta-llama/Llama-3.3-70B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"
HOST = 512 * GIB  # the "cpu" entry: room to offload what the GPUs cannot hold
WHOLE_UNIT = re.compile(r"model\.layers\.\d+|model\.embed_tokens|model\.norm|model\.rotary_emb|lm_head")  # fmt: skip
Placement = dict[str, int | str]


def _meta(name: str, dtype: torch.dtype = torch.bfloat16) -> torch.nn.Module:
    path = SHIPPED_CONFIGS / name.replace("/", "--") / "config.json"
    return build_on_meta(json.loads(path.read_text()), dtype)


@pytest.fixture(scope="module")
def llama_pair() -> tuple[torch.nn.Module, torch.nn.Module]:
    return _meta(TARGET), _meta(DRAFT)


def auto_map(model: torch.nn.Module, max_memory: dict[int | str, int]) -> Placement:
    """accelerate's plan for device_map="auto" on GPUs of `max_memory` free bytes."""
    from accelerate.utils import get_balanced_memory

    classes = sorted(model._no_split_modules)  # type: ignore[arg-type]
    budget = get_balanced_memory(model, max_memory=dict(max_memory), no_split_module_classes=classes)  # fmt: skip
    placement: Placement = accelerate.infer_auto_device_map(
        model, max_memory=budget, no_split_module_classes=classes
    )
    return placement


def per_device(model: torch.nn.Module, placement: Placement) -> dict[int | str, int]:
    from accelerate.utils import compute_module_sizes

    sizes = compute_module_sizes(model)
    totals: dict[int | str, int] = defaultdict(int)
    for module, device in placement.items():
        totals[device] += sizes[module]
    return dict(totals)


def largest_unit(model: torch.nn.Module) -> int:
    """The largest piece accelerate never splits: a decoder layer, or a leaf such as lm_head."""
    from accelerate.utils import compute_module_sizes

    sizes = compute_module_sizes(model)
    whole = [n for n, m in model.named_modules() if type(m).__name__ in model._no_split_modules]  # type: ignore[operator]
    leaves = [n for n, m in model.named_modules() if n and not list(m.children())]
    return max(sizes[n] for n in whole + leaves)


def left_free(gpus: int, used: dict[int | str, int]) -> dict[int | str, int]:
    free: dict[int | str, int] = {i: 80 * GIB - used.get(i, 0) for i in range(gpus)}
    free["cpu"] = HOST
    return free


def check_layers_whole_and_in_order(model: torch.nn.Module, placement: Placement) -> list[int | str]:  # fmt: skip
    """Every key is a whole unit; every decoder layer appears once; layers never go back to an
    earlier device (GPUs in order, then the host, then disk: one pass). Returns the devices of
    the layers in order."""
    assert all(WHOLE_UNIT.fullmatch(key) for key in placement), list(placement)
    n_layers = model.config.num_hidden_layers  # type: ignore[union-attr]
    layers = [placement[f"model.layers.{i}"] for i in range(n_layers)]
    rank = [d if isinstance(d, int) else {"cpu": 1 << 20, "disk": 1 << 21}[d] for d in layers]
    assert rank == sorted(rank)
    return layers


def test_from_pretrained_auto_plans_what_accelerate_plans(llama_pair: Any) -> None:
    from transformers.integrations.accelerate import _get_device_map

    target, _ = llama_pair
    gpus: dict[int | str, int] = {0: 80 * GIB, 1: 80 * GIB, "cpu": HOST}
    assert _get_device_map(target, "auto", dict(gpus), None) == auto_map(target, gpus)
    assert target._no_split_modules == {"LlamaDecoderLayer"}


@pytest.mark.parametrize("n", [2, 4, 8])
def test_llama70b_pair_spreads_whole_layers_over_every_gpu(llama_pair: Any, n: int) -> None:
    target, draft = llama_pair
    t_map = auto_map(target, left_free(n, {}))
    t_bytes = per_device(target, t_map)
    d_map = auto_map(draft, left_free(n, t_bytes))  # the draft loads second
    d_bytes = per_device(draft, d_map)
    for model, placement in ((target, t_map), (draft, d_map)):
        layers = check_layers_whole_and_in_order(model, placement)
        assert set(layers) == set(range(n))  # every GPU holds layers
        assert set(placement.values()) == set(range(n))  # nothing offloaded to cpu or disk
        # the input device (load.py: the first parameter's) is the embedding's GPU: cuda:0
        assert next(model.named_parameters())[0] == "model.embed_tokens.weight"
        assert placement["model.embed_tokens"] == 0 and placement["lm_head"] == n - 1
    # both models take their tokens on cuda:0; nothing is lost or counted twice (bf16 weights,
    # and the rotary inverse frequencies: a buffer, 512 bytes)
    for model, on in ((target, t_bytes), (draft, d_bytes)):
        buffers = sum(b.numel() * b.element_size() for b in model.buffers())
        assert sum(on.values()) == 2 * sum(p.numel() for p in model.parameters()) + buffers

    # the memory plan (validate --gpus n): each model's even share per GPU. accelerate's busiest
    # GPU holds at least the mean and at most 1.25 × each model's largest unit over it
    path = REPO / "configs" / "llama70b.yaml"
    plan = plan_memory(parse_config(read_yaml(path), str(path)), 80 * GIB, "--gpu-memory", gpus=n)
    busiest = max(t_bytes[i] + d_bytes[i] for i in range(n))
    tolerance = int(1.25 * (largest_unit(target) + largest_unit(draft)))
    assert tolerance < 3.7 * GIB  # lm_heads of 1.96 and 0.98 GiB
    assert plan.weights_per_gpu - 2 <= busiest <= plan.weights_per_gpu + tolerance
    assert plan.fits and busiest + plan.kv_per_token_per_gpu * plan.context_tokens < 80 * GIB


def test_llama70b_on_one_gpu_is_offloaded_and_refused(llama_pair: Any) -> None:
    target, _ = llama_pair
    placement = auto_map(target, left_free(1, {}))
    on = per_device(target, placement)
    layers = check_layers_whole_and_in_order(target, placement)
    assert layers[0] == 0 and layers[-1] == "cpu" and "disk" not in placement.values()
    # accelerate would load it anyway, with a third of the layers in host memory: the timings of
    # such a run measure PCIe, not the GPU. validate says it does not fit
    assert on["cpu"] > 50 * GIB and on[0] <= 80 * GIB
    # so load.py refuses a load that came out like this (one line, exit code 2), and only that
    host = offloaded(placement)
    assert host == [k for k, d in placement.items() if d == "cpu"] and "lm_head" in host
    assert offloaded(auto_map(target, left_free(2, {}))) == []
    assert offloaded({"": "cpu"}) == []  # a CPU-only machine: everything on the host is no offload
    path = REPO / "configs" / "llama70b.yaml"
    plan = plan_memory(parse_config(read_yaml(path), str(path)), 80 * GIB, "--gpu-memory", gpus=1)
    assert plan.fits is False


def test_tiny_pair_on_two_gpus_puts_the_draft_apart(tiny_pair: Any) -> None:
    """The tiny target is balanced over both GPUs; the tiny draft, smaller than the slack, lands
    whole on the last GPU: target and draft then take their tokens on different devices."""
    models = {}
    for loaded in (tiny_pair.target, tiny_pair.draft):
        path = Path(resolve_model_path(loaded.name)) / "config.json"
        models[loaded.name] = build_on_meta(json.loads(path.read_text()), torch.float32)
    target, draft = models["tiny-target"], models["tiny-draft"]
    t_map = auto_map(target, left_free(2, {}))
    d_map = auto_map(draft, left_free(2, per_device(target, t_map)))
    assert set(check_layers_whole_and_in_order(target, t_map)) == {0, 1}
    assert t_map["model.embed_tokens"] == 0
    assert d_map == {"": 1}  # one device: no hooks, the whole draft on cuda:1
    # so the clocks of the runner synchronise both input devices, each once
    t_in, d_in = torch.device("cuda", 0), torch.device("cuda", 1)
    assert Clock(t_in, d_in).cuda_devices == [t_in, d_in]
    assert Clock(t_in, t_in).cuda_devices == [t_in]
    assert Clock(torch.device("cpu"), torch.device("cpu")).cuda_devices == []


@torch.inference_mode()
@pytest.mark.skipif(
    torch.cuda.is_available(),
    reason="maps to cuda there: tests/test_gpu_check.py's device_map test is the CUDA form",
)
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_device_map_auto_load_on_cpu_generates_as_without(tiny_pair: Any, temperature: float) -> None:  # fmt: skip
    mapped = [
        load_model(ModelSpec(model=name, dtype="float32", device_map="auto"))
        for name in ("tiny-target", "tiny-draft")
    ]
    assert [m.device for m in mapped] == [torch.device("cpu")] * 2  # no GPU: accelerate maps cpu
    v = tiny_pair.vocab.real_vocab_size
    params, clock = SamplingParams(temperature=temperature), Clock(torch.device("cpu"))
    ids = tiny_pair.target.tokenizer("def add(a, b):\n    return")["input_ids"]
    outputs = []
    for target, draft in ((tiny_pair.target, tiny_pair.draft), mapped):
        gen = torch.Generator().manual_seed(5)
        drafter = ModelDrafter(CachedLM(draft.model, v), params, clock, gen)
        out = speculative_generate(
            CachedLM(target.model, v), drafter, ids, fixed_gamma(4), params, 24, clock,
            generator=gen,
        )  # fmt: skip
        assert out.rounds is not None
        outputs.append((out.output_ids, out.rounds.accepted, out.rounds.beta))
    assert outputs[0] == outputs[1] and len(outputs[0][0]) == 24


def test_a_draft_without_device_map_is_planned_whole_on_gpu_0(llama_pair: Any) -> None:
    """llama70b.yaml with `draft: {device: cuda}` instead of its device_map: load.py moves the
    draft whole to cuda (= cuda:0), beside the target's first layers; the plan carries it there.
    (GPU 0 is the busiest GPU here but may hold a little less than the target's even share.)"""
    target, draft = llama_pair
    path = REPO / "configs" / "llama70b.yaml"
    raw = read_yaml(path)
    raw["draft"] = {**raw["draft"], "device_map": None, "device": "cuda"}
    plan = plan_memory(parse_config(raw, str(path)), 80 * GIB, "--gpu-memory", gpus=2)
    assert [(m.role, m.shards) for m in plan.models] == [("target", 2), ("draft model", 1)]
    t_bytes = per_device(target, auto_map(target, left_free(2, {})))
    draft_bytes = sum(per_device(draft, {"": 0}).values())
    gpu0 = t_bytes[0] + draft_bytes
    assert abs(gpu0 - plan.weights_per_gpu) <= int(1.25 * largest_unit(target))
    # 65.7 + 15.0 GiB: over GPU 0 — the draft's .to(cuda) would run out of memory, and the
    # plan (which spread the draft over both GPUs before) says so
    assert gpu0 > 80 * GIB and plan.fits is False
