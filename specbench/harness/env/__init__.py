"""What produced a run's numbers: env.json (`env.env`) and the GPU's state as nvidia-smi reports
it (`env.gpu_env`)."""
