"""A linear probe of an encoder's frozen features: the check of whether a head arm that collapsed
had usable features. SentEval's MRPC protocol with jiant's pair features: each sentence's vector is
the mean of its frozen per-layer features over its real tokens and the L layers (the feature
store's, cached with the frozen cells'), a pair is [u; v; |u − v|; u·v], standardised, and a linear
model whose L2 strength is chosen by cross-validation on train only scores dev and test: for a task
of classes a logistic regression (stratified folds, ``downstream.run.baselines.cross_validated_logistic``),
for a graded task a ridge regression on the gold score (``cross_validated_ridge``), SentEval's
regression probe in its simplest form. Its outputs are what a head's are and the task's metrics
score them (``downstream.run.evaluation``).

A collapsed arm (every test prediction one class) whose probe is clearly above the majority rate
is a defect of the protocol — the head's optimisation — not an absence of signal.

Shapes: N pairs (or sentences), L layers + 1, T tokens, D = 2H.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from downstream.data.features import FeatureStore
from downstream.data.pair_datamodule import subsample
from downstream.run.baselines import class_probabilities, cross_validated_logistic, cross_validated_ridge
from harness.datasets.types import Pair, PairData


def sentence_vectors(store: FeatureStore) -> np.ndarray:
    """Returns (N, D): each sentence's features averaged over its real tokens and its L layers
    (zeros for a sentence without tokens)."""
    vectors = np.zeros((len(store), store.dim), dtype=np.float64)  # (N, D)
    for index in range(len(store)):
        rows = store.get(index)  # (L, T_i, D)
        if rows.shape[1]:
            vectors[index] = rows.double().mean(dim=(0, 1)).numpy()
    return vectors


def pair_features(vectors: np.ndarray, first: list[int], second: list[int]) -> np.ndarray:
    """Returns (N, 4D): [u; v; |u − v|; u·v] of each pair's sentence vectors."""
    u, v = vectors[first], vectors[second]  # (N, D) each
    return np.concatenate([u, v, np.abs(u - v), u * v], axis=1)


def class_probe(train_features: np.ndarray, train: list[Pair], data: PairData, seed: int):
    """Logistic regression on the (N, 4D) features of ``train`` and their class ids; returns
    (N, 4D) features → (N, C) class probabilities in class-id order."""
    model = cross_validated_logistic(train_features, np.asarray([pair.label for pair in train], dtype=int), seed)
    return lambda features: class_probabilities(model, features, data.num_classes)


def graded_probe(train_features: np.ndarray, train: list[Pair], data: PairData, seed: int):
    """Ridge regression on the (N, 4D) features of ``train`` and their gold scores mapped onto [0, 1]
    (``Task.scaled``, as a head learns them); returns (N, 4D) features → (N,) scores on [0, 1]."""
    model = cross_validated_ridge(train_features, data.task.scaled([pair.label for pair in train]), seed)
    return model.predict


PROBES = {"classes": class_probe, "graded": graded_probe}  # by Task.target: what the probe fits


def fitted_probe(vectors: np.ndarray, row: dict[str, int], data: PairData, train: list[Pair], seed: int):
    """The task's probe fitted on ``train`` over sentence ``vectors`` (N, D), ``row``: a sentence's row.

    Returns:
        ``{"dev": …, "test": …}``: (N, C) class probabilities (classes) or (N,) scores on [0, 1] (graded).
    """

    def features(pairs) -> np.ndarray:
        return pair_features(vectors, [row[p.sentence1] for p in pairs], [row[p.sentence2] for p in pairs])

    predict = PROBES[data.task.target](features(train), train, data, seed)
    return {split: predict(features(data.split(split))) for split in ("dev", "test")}


def probe_probabilities(
    encoder, data: PairData, cache_dir: str | Path | None, seed: int = 0, fraction: float = 1.0
) -> dict[str, np.ndarray]:
    """Fit the probe on ``data``'s train split (or the seeded, stratified ``fraction`` of it that a
    finetune cell of that fraction and seed trains on) under ``encoder``'s frozen features.

    Returns:
        ``{"dev": …, "test": …}``: (N, C) class probabilities in class-id order, or a graded task's
        (N,) scores on [0, 1] (:func:`fitted_probe`).
    """
    sentences = data.sentences()  # the rows (and so the cache) of a frozen cell on the whole data set
    row = {sentence: index for index, sentence in enumerate(sentences)}
    vectors = sentence_vectors(FeatureStore.build(encoder, sentences, cache_dir, progress=False))
    train = subsample(data.train, fraction, seed, data.task) if fraction < 1 else data.train
    with threadpool_limits(torch.get_num_threads()):  # BLAS as many threads as torch (a cell: 1): more stall
        return fitted_probe(vectors, row, data, train, seed)  # a busy machine's cores
