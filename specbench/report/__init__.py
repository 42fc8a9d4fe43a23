"""Rendering only: console tables, Markdown / HTML documents, CSV files and plots, from the typed
results of `specbench.analysis`. Sub-packages by concept, importing one way (bottom first;
`REPORT_ORDER` in tests/unit/test_architecture.py):

- `render/`: the media every report uses — the console and plain mode, ASCII spellings, document
  blocks (Markdown / HTML), figure files
- `roi/`: `specbench roi`'s tables, JSON and CSV (the run plots title their curves with it)
- `schedule/`: the γ schedule in each engine's own configuration, and its plot
- `sections/`: what a run's report says, section by section (first screen, workloads, engines,
  load, batch, γ schedule, ranking), the sentences they share and the run's plots
- `run/`: a run directory's files (report.md / report.html, summary.csv, load_summary.csv), its
  console summary and `specbench run`'s progress
- `accept/`, `compare/`, `canary/`, `simulate/`, `verify/`: each command's own output
- `reference/`: the configuration reference page (docs/config-reference.md)
"""
