"""The `specbench` command line: app.py (the command list, exit codes, error handling), one short
module per command (roi, run, report, accept, compare, verify, simulate, validate) and options.py
(options shared by several commands). Command modules import neither the app nor each other.

`main` is the console script's entry (`specbench = "specbench.cli:main"` in pyproject.toml); it
imports the app only when called, so importing a command module stays cheap.
"""

from __future__ import annotations


def main() -> None:
    """Console-script entry: run the app on sys.argv (exits with the command's exit code)."""
    from specbench.cli.app import main as run_app

    run_app()
