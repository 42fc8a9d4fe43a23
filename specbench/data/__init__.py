"""Benchmark prompts: load them from shipped sets, local files or Hugging Face datasets, group
them by workload, sample them reproducibly, and render them into token ids for a model.

Public API (see each module for details):

- `Prompt`, `conversation_messages` (`specbench.data.prompt`)
- `load_dataset_rows`, `load_workload`, `available_shipped_sets`, `shipped_dataset_dirs`
  (`specbench.data.loader`)
- `build_context_ids`, `PromptTruncatedWarning` (`specbench.data.render`)
"""

from specbench.data.loader import (
    available_shipped_sets,
    load_dataset_rows,
    load_workload,
    shipped_dataset_dirs,
)
from specbench.data.prompt import Prompt, conversation_messages
from specbench.data.render import PromptTruncatedWarning, build_context_ids

__all__ = [
    "Prompt",
    "PromptTruncatedWarning",
    "available_shipped_sets",
    "build_context_ids",
    "conversation_messages",
    "load_dataset_rows",
    "load_workload",
    "shipped_dataset_dirs",
]
