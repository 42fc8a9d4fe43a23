"""`specbench roi`: its rich tables, verdict lines, JSON document and CSV (`roi.roi`)."""
