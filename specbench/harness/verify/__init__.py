"""`specbench verify`: the typed request (`verify.verify_request`), the orchestration
(`verify.verify`) and the two checks (`verify.verify_checks`)."""
