"""Length-bucketed batching shared by every stage: padded id batches and a bucketing sampler."""

from __future__ import annotations

import torch
from torch.utils.data import Sampler, SequentialSampler

from harness.training.resumable_batches import EpochPosition, ResumableBatchSampler


def pad_batch(sequences: list[torch.Tensor], padding_value: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (B, T) ids padded at the end with ``padding_value`` (every tokenizer here pads with 0),
    and (B,) lengths."""
    lengths = torch.tensor([len(sequence) for sequence in sequences])
    ids = torch.nn.utils.rnn.pad_sequence(sequences, batch_first=True, padding_value=padding_value)  # (B, T)
    return ids, lengths


class BucketBatchSampler(ResumableBatchSampler):
    """Batches of similar length, so little padding is left to compute on.

    Indices come from ``sampler`` (random for training, or a ``DistributedSampler`` that
    Lightning injects under DDP); each pool of ``pool_batches`` batches is sorted by length,
    cut into batches, and the batches are shuffled when the sampler is random.
    """

    def __init__(
        self,
        sampler: Sampler,
        batch_size: int,
        drop_last: bool,
        lengths: list[int],
        pool_batches: int = 50,
        position: EpochPosition | None = None,
    ):
        super().__init__(sampler, batch_size, drop_last, position)
        self.lengths = lengths
        self.pool_batches = pool_batches

    def epoch_batches(self) -> list[list[int]]:
        indices = list(self.sampler)
        pool_size = self.batch_size * self.pool_batches
        batches = []
        for start in range(0, len(indices), pool_size):
            pool = sorted(indices[start : start + pool_size], key=lambda index: self.lengths[index])
            batches += [pool[i : i + self.batch_size] for i in range(0, len(pool), self.batch_size)]
        if self.drop_last:
            batches = [batch for batch in batches if len(batch) == self.batch_size]
        if not isinstance(self.sampler, SequentialSampler):
            batches = [batches[i] for i in torch.randperm(len(batches)).tolist()]
        return batches
