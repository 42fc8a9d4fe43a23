"""What a run's report says, section by section (used by the documents and the console).

- `sections.decision`: the first screen (the decision per temperature, each workload's optimum)
- `sections.profile_box`: the first screen's box for a run with a deployment profile
- `sections.workload_sections`: each workload × temperature's body and the appendix
- `sections.serving_sections`: engine runs (speedup against concurrency, counters, conformance)
- `sections.load_sections`, `sections.batch_sections`, `sections.schedule_sections`: load cells,
  batch-size predictions, the γ schedule
- `sections.engine_ranking`: the engine runs' ranking table
- `sections.text`: the sentences the sections and the console share; `sections.no_verdict`: what a
  cell without a verdict shows
- `sections.plots`: the run's matplotlib figures (and `roi --plot`'s)
"""
