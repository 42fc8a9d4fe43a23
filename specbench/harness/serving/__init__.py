"""Serving engines measured as deployed: the driver and its vLLM / OpenAI-compatible / Prometheus adapters."""
