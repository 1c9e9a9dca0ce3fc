"""Zero-shot similarity of a graded pair task: the cosine of each pair's two sentence vectors
(:mod:`downstream.zero_shot.pooling`), no training, as a predictions file and the task's metrics.

The predictions file has a graded run's columns: the id columns, ``label`` (the gold score),
``pred`` (the cosine, in [-1, 1]: correlations do not depend on the scale), ``sentence1``,
``sentence2``. Its metrics are the task's (``<split>_pearson``, ``<split>_spearman``, scipy's);
the task's ``zero_shot_metric`` (Spearman, MTEB's) is the method's main score.

Shapes: N pairs (or sentences), D feature width.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from downstream.zero_shot.pooling import sentence_vectors
from harness.datasets.task import EVALUATION_SPLITS, graded_metrics
from harness.datasets.types import Pair, PairData
from harness.errors import UserError


def cosines(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Returns (N,): the cosine of matching rows of two (N, D) arrays (0 where a vector is zero)."""
    norms = np.linalg.norm(first, axis=1) * np.linalg.norm(second, axis=1)  # (N,)
    dots = np.einsum("nd,nd->n", first, second)  # (N,)
    return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)


def check_zero_shot_task(data: PairData) -> None:
    """Zero-shot similarity scores a graded task (one with a ``zero_shot_metric``); one line else."""
    if data.task.zero_shot_metric is None:
        raise UserError(f"{data.name}: zero-shot similarity scores graded tasks; this one is {data.task.target}")


def zero_shot_scores(
    encoder,
    data: PairData,
    pooling: str = "mean",
    mix: str = "average",
    cache_dir: str | Path | None = None,
    splits: tuple[str, ...] = EVALUATION_SPLITS,
) -> dict[str, np.ndarray]:
    """The cosine of every pair of ``splits`` under ``encoder``'s frozen features.

    ``mean`` pooling embeds the data set's whole sentence list (``data.sentences()``), the rows of
    the frozen cells' feature cache, so it reads their cache; ``sentence-transformers`` pooling
    embeds the splits' own sentences.

    Returns:
        ``{split: (N,) cosines}`` in split order.
    """
    check_zero_shot_task(data)
    sentences = data.sentences() if pooling == "mean" else data.sentences(*splits)
    row = {sentence: index for index, sentence in enumerate(sentences)}
    vectors = sentence_vectors(encoder, sentences, pooling, mix, cache_dir)  # (N_sentences, D)
    scores = {}
    for split in splits:
        pairs = data.split(split)
        first = vectors[[row[pair.sentence1] for pair in pairs]]  # (N, D)
        second = vectors[[row[pair.sentence2] for pair in pairs]]  # (N, D)
        scores[split] = cosines(first, second)
    return scores


def zero_shot_frame(data: PairData, pairs: list[Pair], scores: np.ndarray) -> pd.DataFrame:
    """The predictions file of a split: id columns, ``label`` (gold score), ``pred`` (cosine),
    ``sentence1``, ``sentence2``, one row per pair in split order."""
    return pd.DataFrame(
        {
            **data.ids_by_column(pairs),
            "label": [float(pair.label) for pair in pairs],
            "pred": np.asarray(scores, dtype=float),
            "sentence1": [pair.sentence1 for pair in pairs],
            "sentence2": [pair.sentence2 for pair in pairs],
        }
    )


def zero_shot_results(
    encoder, data: PairData, pooling: str = "mean", mix: str = "average", cache_dir: str | Path | None = None
) -> tuple[dict[str, pd.DataFrame], dict[str, float]]:
    """Zero-shot similarity on dev and test.

    Returns:
        ``{split: predictions frame}`` and the task's metrics of every split
        (``dev_pearson``, ``dev_spearman``, ``test_pearson``, ``test_spearman``), fractions in [-1, 1].
    """
    scores = zero_shot_scores(encoder, data, pooling, mix, cache_dir)
    frames = {split: zero_shot_frame(data, data.split(split), values) for split, values in scores.items()}
    metrics = {name: value for split, frame in frames.items() for name, value in graded_metrics(frame, split).items()}
    return frames, metrics
