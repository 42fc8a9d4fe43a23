"""Commands that take a decision to production: `schedule` (the flags or file that start an engine
with the decided setting), `accept` (acceptance on logged traffic before a gray rollout) and
`canary` (promote, keep watching or roll back the rollout)."""
