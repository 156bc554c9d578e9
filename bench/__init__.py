"""dfctl's benchmarks. `python -m bench` runs every bench/<name>.py that has a main();
each writes its figures to bench/results/<name>.md (the lead folds them into BENCHMARKS.md)."""
