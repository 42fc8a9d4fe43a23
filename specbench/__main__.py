"""`python -m specbench` runs the CLI."""

from specbench.cli.app import main

main()
