"""Serving engines measured as deployed. Sub-packages by concept, importing one way (bottom first;
`SERVING_ORDER` in tests/unit/test_architecture.py):

- `protocol/`: what the driver and every engine adapter share (`protocol.base`: the engine
  setting, conversations and their results, `Backend` / `EngineSession`)
- `load/`: how requests arrive — load points and arrival times, the closed loop's pool, open-loop
  batches, and a config's concurrency against its prompt sets (`load.prompt_checks`)
- `metrics/`: what an engine reports — Prometheus spec-decode counters, per-request acceptance,
  KV-cache capacity and the models' memory
- `openai/`: `backend: openai` (any OpenAI-compatible server: HTTP, requests, streams, its
  servers, what each says about itself)
- `vllm/`: `backend: vllm` (in-process `vllm.LLM`: engine arguments, session, log, the γ schedule
  checked against the installed vLLM)
- `drive/`: the driver both backends share (`drive.driver`), its open-loop batches
  (`drive.open_driver`) and the records it writes and reads back (`drive.engine_records`)
"""
