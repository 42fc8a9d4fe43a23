"""`specbench canary`'s report (`canary.canary`) and its curves (`canary.canary_plot`)."""
