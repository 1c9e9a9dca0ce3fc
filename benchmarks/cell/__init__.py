"""The cell, below every other folder of benchmarks: its settings and identity, how method names are written."""
