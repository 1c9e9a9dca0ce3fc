"""Sentence vectors from an encoder's frozen per-layer features, for zero-shot similarity.

Two poolings:

- ``mean`` (the harness's): the features the frozen cells cache (``FeatureStore``: real tokens
  only, boundary tokens dropped), mixed over layers (``average`` of every layer, ``top``, or
  ``layer:K``), then averaged over the sentence's tokens;
- ``sentence-transformers``: what sentence-transformers' mean pooling computes, so a published
  sentence encoder reproduces its published scores: the top layer over *every* token the model
  reads, its own boundary tokens included (BERT's ``[CLS]`` and ``[SEP]``; our families' ``<S>``
  and ``</S>``), in float32, straight from the model (the cache holds float16 features without
  boundaries).

Shapes: N sentences, B batch, T tokens, D feature width, L layers + 1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from downstream.data.features import FeatureStore
from downstream.model.settings import Mix

POOLINGS = ("mean", "sentence-transformers")
ZERO_SHOT_MIXES = ("average", "top", "layer:K")  # a learned (scalar) mix needs training
BATCH_SIZE = 64


def zero_shot_mix(text: str) -> Mix:
    """The layer mix of a zero-shot method: ``average``, ``top`` or ``layer:K`` (ValueError else)."""
    mix = Mix.parse(text)
    if mix.kind == "scalar":
        raise ValueError(f"mix={text}: a scalar mix is learned; zero-shot takes {', '.join(ZERO_SHOT_MIXES)}")
    return mix


def mean_vectors(store: FeatureStore, mix: Mix) -> np.ndarray:
    """Returns (N, D) float64: each sentence's features mixed over layers (``mix``), averaged over
    its real tokens; zeros for a sentence without tokens."""
    layer = mix.layer_index(store.num_layers)
    vectors = np.zeros((len(store), store.dim), dtype=np.float64)  # (N, D)
    for index in range(len(store)):
        rows = store.get(index).double()  # (L, T_i, D)
        if rows.shape[1]:
            mixed = rows.mean(dim=0) if layer is None else rows[layer]  # (T_i, D)
            vectors[index] = mixed.mean(dim=0).numpy()
    return vectors


@torch.no_grad()
def all_token_vectors(encoder, sentences: list[str], batch_size: int = BATCH_SIZE) -> np.ndarray:
    """Returns (N, D) float64: the mean of the top layer over every token of each sentence, its
    boundary tokens included, computed in float32 (sentence-transformers' mean pooling)."""
    vectors = np.zeros((len(sentences), encoder.dim), dtype=np.float64)  # (N, D)
    was_training = encoder.model.training
    encoder.model.eval()
    try:
        with torch.autocast(encoder.device.type, enabled=False):
            for start in range(0, len(sentences), batch_size):
                token_ids, lengths = encoder.encode(sentences[start : start + batch_size])  # (B, T), (B,)
                token_ids, lengths = token_ids.to(encoder.device), lengths.to(encoder.device)
                top = encoder.model.layer_outputs(token_ids, lengths)[-1].float()  # (B, T, D)
                real = torch.arange(token_ids.shape[1], device=top.device)[None, :] < lengths[:, None]  # (B, T)
                summed = (top * real[..., None]).sum(dim=1)  # (B, D)
                pooled = summed / real.sum(dim=1, keepdim=True).clamp(min=1)  # (B, D)
                vectors[start : start + len(pooled)] = pooled.double().cpu().numpy()
    finally:
        encoder.model.train(was_training)
    return vectors


def sentence_vectors(
    encoder, sentences: list[str], pooling: str = "mean", mix: str = "average", cache_dir: str | Path | None = None
) -> np.ndarray:
    """Returns (N, D) float64 sentence vectors of ``sentences`` under ``pooling``.

    ``mean`` reads (or builds) the feature cache of exactly this sentence list in ``cache_dir`` (the
    frozen cells' cache when the list is the data set's ``sentences()``); ``sentence-transformers``
    takes the top layer whatever ``mix`` says (that is what it pools).
    """
    if pooling not in POOLINGS:
        raise ValueError(f"pooling={pooling}: choose {' or '.join(POOLINGS)}")
    if pooling == "sentence-transformers":
        return all_token_vectors(encoder, sentences)
    store = FeatureStore.build(encoder, sentences, cache_dir, progress=False)
    return mean_vectors(store, zero_shot_mix(mix))
