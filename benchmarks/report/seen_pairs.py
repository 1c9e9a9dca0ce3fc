"""The report's word on contamination: for each trained method whose encoder read, in pretraining,
a sentence of some test pairs (``test_seen_pairs``, logged by each run where the encoder's
pretraining text is known; a twin counts the pairs its pretrained twin read), how many, and its
mean test score without them (``test_<metric>_unseen``) beside its score on every pair."""

from __future__ import annotations

import pandas as pd

from benchmarks.report.remarks import score
from harness.datasets.task import CLASSES, Task, metric_title


def seen_pairs_remarks(runs: pd.DataFrame, task: Task = CLASSES) -> list[str]:
    """One remark per method with seen test pairs; one line when the runs that know say none; []
    where no run logged its count (an encoder whose pretraining text is not known)."""
    if "test_seen_pairs" not in runs:
        return []
    metric = f"test_{task.main_metric}"
    counted = runs[pd.to_numeric(runs["test_seen_pairs"], errors="coerce").notna()]
    remarks = []
    for method, group in counted.groupby("method", sort=False):
        seen = int(pd.to_numeric(group["test_seen_pairs"]).max())
        if not seen:
            continue
        unseen = pd.to_numeric(group.get(f"{metric}_unseen", pd.Series(dtype=float)), errors="coerce").dropna()
        total = pd.to_numeric(group.get("test_pairs", pd.Series(dtype=float)), errors="coerce").max()
        of = f" of {int(total)}" if pd.notna(total) else ""
        without = (
            f"; without them its mean {metric_title(metric)} is {score(100 * unseen.mean(), task)} "
            f"({len(unseen)} seeds), against {score(100 * pd.to_numeric(group[metric]).mean(), task)} on all"
            if len(unseen)
            else ""
        )
        remarks.append(
            f"Contamination: `{method}`: {seen}{of} test pairs have a sentence its encoder read in pretraining "
            f"(a twin: its pretrained twin's){without}."
        )
    if not remarks and len(counted):
        remarks.append("Contamination: no test pair has a sentence that an encoder here read in pretraining.")
    return remarks
