"""`specbench simulate`: trace replay of γ policies on recorded rounds (`simulate.replay`) and
simulation.json's entries, each policy replayed beside its measured run (`simulate.simulation`)."""
