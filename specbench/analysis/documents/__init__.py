"""The documents the analysis writes and reads, typed: results.json and accept.json as pydantic
models, their JSON Schemas, the one results.json reader, and the analysis settings read from a
stored config.

- `documents.results_model` (with `results_model_base`, `_workload`, `_engine`, `_load`,
  `_batch`): results.json, schema 2
- `documents.results_read`: reading a results.json back
- `documents.accept_model`: accept.json
- `documents.simulation_model`: simulation.json's entries
- `documents.schemas`: the JSON Schemas shipped in docs/schema/
- `documents.settings`: `AnalysisSettings`, the stored config's keys the analysis reads
"""
