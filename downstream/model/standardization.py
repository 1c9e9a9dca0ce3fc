"""Per-dimension standardisation of frozen features (``--model.standardize``).

Each layer's features are z-scored per dimension with the mean and standard deviation over the
real tokens of the sentences the run trains on (never dev or test), computed once at the start
of the fit and kept in the checkpoint. A random-init encoder's features share a large common
direction that a linear probe removes by standardising them and that a head trained on the raw
features does not get past (docs/finetuning.md); the same transform is applied to both arms.

The default, ``auto``, turns it on exactly where it applies (frozen features under a layer mix,
pretrained arm and twin alike) and off where the encoder trains or ``head=cls`` reads no mix.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from downstream.model.settings import JOINT_HEAD

AUTO = "auto"  # --model.standardize's default

# Dimensions whose deviation is below this are constant (zero-padded narrower layers): kept as
# they are, centred (to exactly 0), not divided.
CONSTANT_STD = 1e-6
SENTENCES_PER_CHUNK = 256  # sentences of the float16 store summed at a time in float64


def resolved_standardize(standardize: bool | str, finetune: str, head: str) -> bool:
    """``--model.standardize`` as a bool: ``auto`` is on for frozen features under a layer mix and
    off otherwise; ``true``/``false`` stay as given (``true`` where it cannot apply is refused by
    ``PairClassifier``)."""
    if standardize == AUTO:
        return finetune == "frozen" and head != JOINT_HEAD
    if not isinstance(standardize, bool):
        raise ValueError(f"standardize={standardize}: choose true, false or {AUTO}")
    return standardize


class FeatureStandardizer(nn.Module):
    """``(x - mean) * scale`` per layer and dimension, zero at padding.

    ``mean`` and ``scale`` (= 1 / std) are buffers of shape (L, D): saved with the head, so a run
    evaluated or resumed from its checkpoint uses the statistics it trained with.
    """

    def __init__(self, num_layers: int, dim: int) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(num_layers, dim))
        self.register_buffer("scale", torch.ones(num_layers, dim))
        self.register_buffer("fitted", torch.tensor(False))

    @torch.no_grad()
    def fit(self, store, rows: list[int]) -> None:
        """Statistics over every real token of the store's sentences ``rows`` (a feature store of
        ``downstream.data.features``: ``features`` (total, L, D), ``offsets`` (n + 1,))."""
        if not rows:
            raise ValueError("standardize: no training sentences to take the statistics from")
        ranges = [(int(store.offsets[row]), int(store.offsets[row + 1])) for row in sorted(set(rows))]
        total = np.zeros(tuple(self.mean.shape))  # (L, D) float64
        squares = np.zeros(tuple(self.mean.shape))  # (L, D)
        count = 0
        for first in range(0, len(ranges), SENTENCES_PER_CHUNK):
            values = np.concatenate(
                [
                    np.asarray(store.features[start:end], dtype=np.float64)
                    for start, end in ranges[first : first + SENTENCES_PER_CHUNK]
                ]
            )  # (N, L, D)
            total += values.sum(axis=0)
            squares += np.square(values).sum(axis=0)
            count += len(values)
        if count == 0:
            raise ValueError("standardize: the training sentences have no tokens")
        mean = total / count  # (L, D)
        std = np.sqrt(np.maximum(squares / count - np.square(mean), 0.0))  # (L, D), population
        scale = np.where(std > CONSTANT_STD, 1.0 / np.maximum(std, CONSTANT_STD), 1.0)
        self.mean.copy_(torch.from_numpy(mean))
        self.scale.copy_(torch.from_numpy(scale))
        self.fitted.fill_(True)

    def forward(self, layers: Tensor, mask: Tensor) -> Tensor:
        """(L, B, T, D) features, (B, T) mask -> (L, B, T, D) standardised, exactly zero at padding."""
        if not bool(self.fitted):
            raise RuntimeError("standardize: the statistics were never computed (fit before use)")
        standardised = (layers - self.mean[:, None, None, :]) * self.scale[:, None, None, :]  # (L, B, T, D)
        return standardised * mask[None, :, :, None].to(standardised.dtype)  # (L, B, T, D)
