"""`specbench simulate`: trace replay of γ policies on recorded rounds (`simulate.replay`)."""
