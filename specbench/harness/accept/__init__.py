"""`specbench accept`: the typed request (`accept.accept_request`), its settings
(`accept.accept_config`), the pipeline from logged requests to α and the rollout plan
(`accept.accept`), and `--timings RUN` checked against the pair (`accept.timings_check`)."""
