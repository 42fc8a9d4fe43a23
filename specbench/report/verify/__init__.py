"""`specbench verify`'s console tables and JSON document (`verify.verify`)."""
