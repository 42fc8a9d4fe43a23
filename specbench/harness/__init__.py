"""Turns decoding into records: the transformers runner, verify's orchestration and the serving driver."""
