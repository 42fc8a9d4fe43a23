"""Turns decoding into records and files. Sub-packages by concept, importing one way (bottom first;
`HARNESS_ORDER` in tests/unit/test_architecture.py):

- `env/`: env.json (versions, machine, device) and the GPU's state as nvidia-smi reports it
- `memory/`: a model's memory from its files, and whether a config's models fit (`validate
  --gpu-memory`)
- `plan/`: the plan of a run (settings, units, seeds, run directory), shared by both backends
- `serving/`: serving engines measured as deployed (vLLM, OpenAI-compatible servers)
- `transformers/`: the transformers runner, its batch timing and the adaptive plan
- `run/`: `specbench run` as one typed request, `--force`, lockstep turns, and a run directory
  read back (results.json written from it)
- `accept/`, `verify/`, `compare/`, `canary/`: each command's orchestration
"""
