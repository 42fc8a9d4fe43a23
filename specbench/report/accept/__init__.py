"""`specbench accept`'s output: accept.json and the console (`accept.accept`), the report files
(`accept.accept_document`) and the table cells both share (`accept.accept_tables`)."""
