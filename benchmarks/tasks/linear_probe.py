"""A linear probe of an encoder's frozen features: the check of whether a head arm that collapsed
had usable features. SentEval's MRPC protocol with jiant's pair features: each sentence's vector is
the mean of its frozen per-layer features over its real tokens and the L layers (the feature
store's, cached with the frozen cells'), a pair is [u; v; |u − v|; u·v], standardised, and a
logistic regression whose L2 strength is chosen by stratified cross-validation on train only
(``downstream.run.baselines.cross_validated_logistic``) scores dev and test.

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
from downstream.run.baselines import class_probabilities, cross_validated_logistic
from harness.datasets.types import PairData


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


def probe_probabilities(
    encoder, data: PairData, cache_dir: str | Path | None, seed: int = 0, fraction: float = 1.0
) -> dict[str, np.ndarray]:
    """Fit the probe on ``data``'s train split (or the seeded, stratified ``fraction`` of it that a
    finetune cell of that fraction and seed trains on) under ``encoder``'s frozen features.

    Returns:
        ``{"dev": (N, C), "test": (N, C)}`` class probabilities in class-id order.
    """
    sentences = data.sentences()  # the rows (and so the cache) of a frozen cell on the whole data set
    row = {sentence: index for index, sentence in enumerate(sentences)}
    vectors = sentence_vectors(FeatureStore.build(encoder, sentences, cache_dir, progress=False))

    def features(pairs) -> np.ndarray:
        return pair_features(vectors, [row[p.sentence1] for p in pairs], [row[p.sentence2] for p in pairs])

    train = subsample(data.train, fraction, seed) if fraction < 1 else data.train
    labels = np.asarray([pair.label for pair in train], dtype=int)
    with threadpool_limits(torch.get_num_threads()):  # BLAS as many threads as torch (a cell: 1): more stall
        model = cross_validated_logistic(features(train), labels, seed)  # a busy machine's cores
        return {
            split: class_probabilities(model, features(data.split(split)), data.num_classes)
            for split in ("dev", "test")
        }
