"""Benchmarks: the suite of finetune cells with controls and baselines, statistics, reports, speed."""
