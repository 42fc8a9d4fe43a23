"""`python -m specbench` runs the CLI."""

from specbench.cli import main

main()
