"""`specbench run` end to end, and a run directory.

- `run.run_request`: the command as one typed request, and the one function that measures it
- `run.force`: `run --force` (the old run removed only once the new one has started)
- `run.lockstep`: unit-by-unit turns between two runs (`compare --ab`)
- `run.rundir`: a run directory read back, and its results.json written
"""
