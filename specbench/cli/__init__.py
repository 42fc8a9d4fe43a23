"""The `specbench` command line: app.py (the command list, exit codes, error handling), options.py
(options shared by several commands), faults.py and exit_codes.py, and one short module per
command, grouped by what the command is for:

- here, measure and write: `run`, `report`, `validate`, `schema`;
- estimate/, without a model: `roi`, `simulate`;
- check/, a claim against measurements: `verify`, `compare` (and its calibration and plan,
  compare_gate.py), `predict-check`;
- rollout/, a decision taken to production: `schedule`, `accept`, `canary`.

Command modules import neither the app nor each other.

`main` is the console script's entry (`specbench = "specbench.cli:main"` in pyproject.toml); it
imports the app only when called, so importing a command module stays cheap.
"""

from __future__ import annotations


def main() -> None:
    """Console-script entry: run the app on sys.argv (exits with the command's exit code)."""
    from specbench.cli.app import main as run_app

    run_app()
