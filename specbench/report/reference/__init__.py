"""The configuration reference, docs/config-reference.md, generated from the config models
(`reference.config_reference`)."""
