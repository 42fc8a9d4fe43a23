"""Memory without loading a model: weights and KV bytes per token from a model's files
(`memory.model_footprint`), and whether a config's models fit its GPUs (`memory.memory_plan`,
`validate --gpu-memory`)."""
