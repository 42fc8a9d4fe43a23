"""A run directory's files and console.

- `run.documents`: report.md and report.html, and `write_run_files` (summary.csv, load CSV, plots)
- `run.summary_csv`, `run.load_csv`: summary.csv and load_summary.csv
- `run.console`: the console summary at the end of `run` / `report`
- `run.progress`: `specbench run`'s live progress
"""
