"""From records.jsonl to results.json: the one pipeline (`pipeline.results.build_results`) and the
entry it builds per workload × temperature for each backend.

- `pipeline.results`: the whole document
- `pipeline.cell_figures`: an entry's figures, for every backend, and the one place an entry is built
- `pipeline.transformers_results`, `pipeline.acceptance_detail`: an entry of specbench's own decoding
- `pipeline.serving_results`, `pipeline.schedule_section`: an entry of an engine run
- `pipeline.prompt_basis`: which prompts a cell's figures cover (the verdict's, docs/theory.md §13)
"""
