"""The plan of a `specbench run`, shared by the transformers runner and the serving driver
(`plan.plan`): prompts, temperatures, decoding settings and units, seeds, progress callbacks and
the run directory."""
