"""The joint pair input of bidirectional encoders (BERT's GLUE recipe, Devlin et al. 2019, §4.1):
one sequence ``[CLS] s1 [SEP] s2 [SEP]`` with segment ids 0 for the first sentence (and its
``[CLS]``/``[SEP]``) and 1 for the second, every token attending to every other, and a linear
classifier (after dropout) on the top state of the first token (``downstream.model.joint_classifiers``'s
``FirstTokenClassifier``). One order per pair: the encoder reads both sentences at once, unlike
GPT's left-to-right input, which needs both orders.

Shapes: B batch, T tokens of the joint sequence, H hidden, C classes.
"""

from __future__ import annotations

import torch
from torch import Tensor

from harness.errors import UserError
from harness.training.batching import pad_batch


def segment_pair(encoder, first: str, second: str) -> tuple[Tensor, Tensor]:
    """The pair as the tokenizer's own pair template: (T,) ids and (T,) segment ids. A pair longer
    than the model's positions is a UserError."""
    ids, segments = encoder.tokenizer.encode_pair_segments(first, second)
    limit = encoder.model.max_positions
    if limit is not None and len(ids) > limit:
        raise UserError(
            f"a pair of {len(ids)} tokens is longer than this {encoder.family} encoder's {limit} "
            f"positions: {first[:40]!r} / {second[:40]!r}"
        )
    return torch.tensor(ids, dtype=torch.long), torch.tensor(segments, dtype=torch.long)


class SegmentBatches:
    """Collate pair indices into joint sequences with segment ids.

    Returns per batch: ``ids`` (B, T), ``lengths`` (B,), ``segments`` (B, T), ``lengths`` again (the
    four input slots every pair batch has), ``labels`` (B,), ``pair_index`` (B,).
    """

    def __init__(self, sequences: list[tuple[Tensor, Tensor]], labels: list[int]):
        self.sequences, self.labels = sequences, labels

    @property
    def lengths(self) -> list[int]:
        return [len(ids) for ids, _ in self.sequences]

    def __call__(self, pair_indices: list[int]):
        ids, lengths = pad_batch([self.sequences[i][0] for i in pair_indices])
        segments, _ = pad_batch([self.sequences[i][1] for i in pair_indices])
        labels = torch.tensor([self.labels[i] for i in pair_indices])
        return ids, lengths, segments, lengths, labels, torch.tensor(pair_indices)
