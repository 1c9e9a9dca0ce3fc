"""Benchmarks: the suite of finetune cells with controls and baselines, statistics, reports, speed."""

import harness  # noqa: F401 - first: its MLflow defaults must precede the import of mlflow
