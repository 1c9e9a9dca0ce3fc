"""The cell, below every other folder of benchmarks: its settings, what defines its result, and how method names are written."""
