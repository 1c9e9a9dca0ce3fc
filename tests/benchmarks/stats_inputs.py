"""Inputs shared by the statistics tests: per-run metrics of two methods and predictions tables
right exactly where asked."""

import numpy as np
import pandas as pd

from benchmarks.stats.aggregate import METRICS


def make_runs() -> pd.DataFrame:
    rows = [
        ("elmo", 0, 0.6, 0.70, 0.65, 0.75),
        ("elmo", 1, 0.7, 0.80, 0.70, 0.80),
        ("elmo", 2, 0.8, 0.90, 0.75, 0.85),
        ("random", 0, 0.684, 0.812, 0.665, 0.799),
    ]
    return pd.DataFrame(rows, columns=["method", "seed"] + METRICS)


def frame(correct, ids=None, labels=None) -> pd.DataFrame:
    """Binary predictions right exactly where ``correct`` is true, one ``id`` column."""
    correct = np.asarray(correct, bool)
    labels = np.arange(len(correct)) % 2 if labels is None else np.asarray(labels)
    ids = [f"item{index}" for index in range(len(correct))] if ids is None else ids
    pred = np.where(correct, labels, 1 - labels)
    return pd.DataFrame({"id": ids, "label": labels, "prob": pred * 0.9, "pred": pred})
