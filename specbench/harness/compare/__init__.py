"""`specbench compare`: the typed request (`compare.compare_request`), what it reads
(`compare.compare_inputs`: sides and the thresholds file) and the A/B job (`compare.ab`)."""
