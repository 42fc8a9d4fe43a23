"""`backend: openai`: any OpenAI-compatible server.

- `openai.openai_backend`: the backend (one server per setting)
- `openai.openai_request`, `openai.openai_stream`, `openai.openai_http`: one request's body, its
  streamed answer, HTTP and retries
- `openai.endpoints`: the run's servers, read from the config, labelled and checked
- `openai.server_facts`: what a server says about itself (env.json's `server_info`)
"""
