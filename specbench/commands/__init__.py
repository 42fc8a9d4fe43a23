"""Further `specbench` subcommands, one module each; importing a module registers its command on
`specbench.cli.app` (cli.py imports them all at its end)."""

COMMAND_MODULES = ("accept", "compare", "verify", "simulate", "validate")
