"""`specbench simulate`'s tables (`simulate.simulate`)."""
