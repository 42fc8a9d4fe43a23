"""The models a run measures: resolve a configured name, load it, check a target/draft pair.

    resolve.py   a configured name → the shipped tiny pair, a local directory or a hub id (no torch)
    hub.py       find config.json locally or through the hub cache; hub errors → one line
    load.py      `load_model`: weights + tokenizer in eval mode on the picked device and dtype
    pair.py      `check_pair_compatible`: same vocabulary id for id; EOS ids (`VocabInfo`)
    memory.py    `memory_profile`: weight bytes and KV-cache bytes per token
    meta.py      `meta_profile`: the same from config.json alone, the model built on the meta device
    tinypair.py  the tiny target/draft pair shipped in specbench/assets/tiny-pair

The names below are the package's API: `from specbench.models import load_model`.
"""

from specbench.models.load import LoadedModel, load_model, pick_device, pick_dtype
from specbench.models.memory import memory_profile
from specbench.models.pair import VocabInfo, check_pair_compatible, eos_token_ids, logits_size
from specbench.models.resolve import TINY_MODEL_NAMES, offline_requested, resolve_model_path

__all__ = [
    "TINY_MODEL_NAMES",
    "LoadedModel",
    "VocabInfo",
    "check_pair_compatible",
    "eos_token_ids",
    "load_model",
    "logits_size",
    "memory_profile",
    "offline_requested",
    "pick_device",
    "pick_dtype",
    "resolve_model_path",
]
