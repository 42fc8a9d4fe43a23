"""`backend: vllm`: speculation inside vLLM itself (in-process `vllm.LLM`).

- `vllm.vllm_backend`: the backend (one engine per setting)
- `vllm.vllm_session`: one started engine running a batch
- `vllm.vllm_args`: the engine's keyword arguments, checked against the installed vLLM
- `vllm.vllm_log`: where the engine's log goes
- `vllm.vllm_schedule`: an exported γ schedule checked against the installed vLLM
"""
