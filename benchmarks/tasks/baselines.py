"""The baselines a benchmark runs as ``stage=baseline`` cells: the systems themselves live in
:mod:`downstream.run.baselines` (one registry keyed by the names a task lists), where every finetune
summary computes them too (layering: downstream never imports benchmarks); this module fits the one
a method names (``benchmarks.cell.method_names.BASELINE_NAMES``) on the labelled subset of a fraction
and seed, the very pairs a finetune cell of that fraction and seed trains on
(``downstream.data.pair_datamodule.subsample``)."""

from __future__ import annotations

import numpy as np

from benchmarks.cell.method_names import baseline_name
from downstream.data.pair_datamodule import subsample
from downstream.run import baselines
from harness.datasets.types import PairData
from harness.errors import UserError

BASELINES = baselines.BASELINES  # name → Baseline (title, note, fit)


def fit_baseline(method: str, data: PairData, fraction: float = 1.0, seed: int = 0) -> dict[str, np.ndarray]:
    """Fit ``method``'s baseline, one of the task's (``data.task.baselines``), on ``data``'s train
    split, or on the seeded, stratified ``fraction`` of it that cells of that fraction and seed train
    on; deterministic given the seed. A baseline of another task is a one-line UserError.

    Returns:
        ``{"dev": …, "test": …}``: (N, C) class probabilities in class-id order (classes) or (N,)
        scores on the task's scale (graded).
    """
    name = baseline_name(method)
    if name not in data.task.baselines:
        raise UserError(
            f"baseline {method}: not one of {data.name}'s ({', '.join(data.task.baselines)}: "
            f"a {data.task.target} task's baselines)"
        )
    train = subsample(data.train, fraction, seed, data.task) if fraction < 1 else data.train
    return baselines.fit_baseline(name, train, {"dev": data.dev, "test": data.test}, data, seed)
