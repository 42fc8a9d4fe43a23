"""`specbench compare`'s output: the console, Markdown and JSON (`compare.compare`), JUnit XML
(`compare.compare_junit`) and the CI gate's sizing (`compare.compare_gate`)."""
