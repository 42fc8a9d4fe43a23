"""How requests reach an engine.

- `load.arrivals`: load points and when an open-loop batch sends each request
- `load.closed_loop`: the closed loop's thread pool for HTTP backends
- `load.open_loop`: open-loop batches, sent at their arrival times
- `load.prompt_checks`: a config's workloads and concurrency against its prompt sets
"""
