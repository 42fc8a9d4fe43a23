"""`specbench canary`: promote, keep watching or roll back a speculative canary against a
control of the same size, from anytime-valid confidence sequences over paired time windows
(docs/theory.md §20, docs/canary.md). Pure numpy / scipy: the sources that produce the windows
live in `data.canary_logs` and `harness.canary`.

- `canary.windows`: `ArmWindow`, `WindowPair` (one line of the state file)
- `canary.sequences`: the normal-mixture and betting confidence sequences
- `canary.guards`: each guard's per-window statistic, harm side and line
- `canary.decision`: the decision at a look (`decide` → `CanaryDecision`)
- `canary.curves`: the sequences after every window and the first decision (`first_decision`)
"""

from specbench.analysis.canary.decision import CanaryDecision, GuardResult, decide
from specbench.analysis.canary.windows import Acceptance, ArmWindow, Tally, WindowPair

__all__ = [
    "Acceptance",
    "ArmWindow",
    "CanaryDecision",
    "GuardResult",
    "Tally",
    "WindowPair",
    "decide",
]
