"""Turns decoding into records: the plan (plan.py: settings, units, seeds, run directory; env.py:
env.json), the transformers runner, verify's orchestration and the serving driver (serving/)."""
