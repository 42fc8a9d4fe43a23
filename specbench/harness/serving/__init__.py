"""Serving engines measured as deployed: the driver (driver.py) and its adapters, which share
base.py — vLLM in-process (vllm_backend, vllm_session, vllm_log), OpenAI-compatible servers
(openai_backend, openai_request, openai_stream, openai_http, endpoints), Prometheus (metrics)."""
