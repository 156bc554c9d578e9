"""What dfctl keeps on this machine: the run registry (SQLite) and each run's metric history (Parquet)."""
