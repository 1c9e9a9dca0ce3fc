"""The baselines a benchmark runs as ``stage=baseline`` cells: the systems themselves live in
:mod:`downstream.run.baselines`, where every finetune summary computes them too (layering: downstream
never imports benchmarks); this module fits the one a method names
(``benchmarks.cell.method_names.BASELINE_NAMES``) on the labelled subset of a fraction and seed,
the very pairs a finetune cell of that fraction and seed trains on
(``downstream.data.pair_datamodule.subsample``)."""

from __future__ import annotations

import numpy as np

from benchmarks.cell.method_names import baseline_name
from downstream.data.pair_datamodule import subsample
from downstream.run.baselines import majority_baseline, tfidf_lr_baseline
from harness.datasets.types import PairData

# name → fit(train, evaluation_sets, num_classes, seed) returning {split: (N, C) probabilities}
BASELINES = {
    "majority": lambda train, evaluation_sets, num_classes, seed: majority_baseline(
        train, evaluation_sets, num_classes
    ),
    "tfidf-lr": tfidf_lr_baseline,
}


def fit_baseline(method: str, data: PairData, fraction: float = 1.0, seed: int = 0) -> dict[str, np.ndarray]:
    """Fit ``method``'s baseline on ``data``'s train split, or on the seeded, stratified ``fraction``
    of it that cells of that fraction and seed train on; deterministic given the seed.

    Returns:
        ``{"dev": (N, C), "test": (N, C)}`` class probabilities in class-id order.
    """
    train = subsample(data.train, fraction, seed) if fraction < 1 else data.train
    return BASELINES[baseline_name(method)](train, {"dev": data.dev, "test": data.test}, data.num_classes, seed)
