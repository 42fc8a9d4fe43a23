"""Commands that estimate without running a model: `roi` (the analytic speculation model) and
`simulate` (γ policies replayed over a run's recorded rounds)."""
