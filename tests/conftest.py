"""Shared fixtures: the shipped tiny pair, loaded once per test session on CPU in fp32.

torch and the model code are imported inside the fixture, not here: this file is loaded for
tests/unit too, whose tests must run without torch (tests/README.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from specbench.config import RunConfig
    from specbench.harness.transformers.runner import Session
    from specbench.models import LoadedModel, VocabInfo


@dataclass(frozen=True)
class TinyPair:
    target: LoadedModel
    draft: LoadedModel
    vocab: VocabInfo

    @property
    def eos_ids(self) -> frozenset[int]:
        return frozenset(self.vocab.eos_token_ids)

    def session(self, cfg: RunConfig) -> Session:
        """The runner's session on this pair for `cfg` (its sampling, tokens and γs)."""
        from specbench.harness.transformers import runner

        return runner.Session(
            cfg, self.target, {"model": self.draft}, self.vocab.real_vocab_size, self.eos_ids
        )


@pytest.fixture(scope="session")
def tiny_pair() -> TinyPair:
    import torch

    from specbench.config import ModelSpec
    from specbench.models import check_pair_compatible, load_model

    torch.set_num_threads(1)  # see RunConfig.cpu_threads: steadier timings for tiny models
    target = load_model(ModelSpec(model="tiny-target", dtype="float32", device="cpu"))
    draft = load_model(ModelSpec(model="tiny-draft", dtype="float32", device="cpu"))
    return TinyPair(target, draft, check_pair_compatible(target, draft))
