"""`specbench verify` as one typed request: its options checked together, the config they make,
and the one function that runs the checks.

    request = VerifyRequest(config=..., ...)   # SpecbenchError (exit 2) on a refused option
    report = verify_pair(request, progress)    # harness/verify/verify.py's `run_verify`

The fields are the command's options under the same names, without defaults (the command's
options state them once, and `--help` shows them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specbench.errors import SpecbenchError

if TYPE_CHECKING:
    from specbench.analysis.verify.verify_results import VerifyReport
    from specbench.config import RunConfig


@dataclass(frozen=True, kw_only=True)
class VerifyRequest:
    """What `specbench verify` was asked: the config (and --device over it), the sampled test's
    size, the sampling settings and the rule to check."""

    config: Path
    contexts: int
    samples: int
    gamma: int | None
    temperature: list[float] | None
    top_p: float | None
    top_k: int | None
    max_prompts: int | None
    lossy_epsilon: float | None
    significance: float
    seed: int
    device: str | None
    no_ngram: bool
    no_memo: bool

    def __post_init__(self) -> None:
        """The open bounds a range on the option cannot state."""
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise SpecbenchError(f"--top-p must be in (0, 1], got {self.top_p}")
        if self.lossy_epsilon is not None and not 0 < self.lossy_epsilon < 1:
            raise SpecbenchError(f"--lossy-epsilon must be in (0, 1), got {self.lossy_epsilon}")
        if not 0 < self.significance < 1:
            raise SpecbenchError(f"--significance must be in (0, 1), got {self.significance}")

    def run_config(self) -> RunConfig:
        """The config with --device over it; a server's config is refused (no weights here)."""
        from specbench.config import deep_merge, parse_config, read_yaml

        data = read_yaml(self.config)
        over: dict[str, Any] = {}
        if self.device is not None:
            over = {"target": {"device": self.device}, "draft": {"device": self.device}}
        cfg = parse_config(deep_merge(data, over), str(self.config))
        if cfg.backend == "openai":  # a server's models are not here to compute distributions
            raise SpecbenchError(
                f"{self.config}: verify needs the models' weights (the transformers backend "
                "computes the target's and the draft's distributions itself), and this config "
                "measures an OpenAI-compatible server; give a config with `backend: "
                "transformers` and the pair's model directories or hub ids"
            )
        return cfg


def verify_pair(
    request: VerifyRequest, progress: Callable[[str], None] | None = None
) -> VerifyReport:
    """Every drafter of the config checked for losslessness (harness/verify/verify.py)."""
    from specbench.harness.verify.verify import VerifyOptions, run_verify

    r = request
    options = VerifyOptions(
        contexts=r.contexts,
        samples=r.samples,
        gamma=r.gamma,
        temperatures=list(r.temperature) if r.temperature else None,
        top_p=r.top_p,
        top_k=r.top_k,
        max_prompts=r.max_prompts,
        lossy_epsilon=r.lossy_epsilon,
        significance=r.significance,
        seed=r.seed,
        memoize=not r.no_memo,
        ngram=not r.no_ngram,
    )
    return run_verify(r.run_config(), options, r.config.parent, progress=progress)
