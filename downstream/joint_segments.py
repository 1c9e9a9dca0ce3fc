"""The joint pair input of bidirectional encoders (BERT's GLUE recipe, Devlin et al. 2019, §4.1):
one sequence ``[CLS] s1 [SEP] s2 [SEP]`` with segment ids 0 for the first sentence (and its
``[CLS]``/``[SEP]``) and 1 for the second, every token attending to every other, and a linear
classifier (after dropout) on the top state of the first token. One order per pair: the encoder
reads both sentences at once, unlike GPT's left-to-right input (``downstream.joint``), which needs
both orders.

Shapes: B batch, T tokens of the joint sequence, H hidden, C classes.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from harness.batching import pad_batch
from harness.errors import UserError


def segment_pair(encoder, first: str, second: str) -> tuple[Tensor, Tensor]:
    """The pair as the tokenizer's own pair template: (T,) ids and (T,) segment ids. A pair longer
    than the model's positions is a UserError."""
    ids, segments = encoder.tokenizer.encode_pair_segments(first, second)
    limit = encoder.model.max_positions
    if limit is not None and len(ids) > limit:
        raise UserError(f"a pair of {len(ids)} tokens is longer than this {encoder.family} encoder's {limit} "
                        f"positions: {first[:40]!r} / {second[:40]!r}")
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


class FirstTokenClassifier(nn.Module):
    """Dropout + linear on the top state of the joint sequence's first token (``[CLS]``)."""

    def __init__(self, hidden_size: int, dropout: float = 0.1, num_classes: int = 2):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.linear = nn.Linear(hidden_size, num_classes)

    def forward(self, model: nn.Module, ids: Tensor, lengths: Tensor, segments: Tensor,
                _lengths: Tensor | None = None) -> tuple[Tensor, None]:
        """Args: the encoder's model, (B, T) ids, (B,) lengths, (B, T) segment ids.

        Returns:
            (B, C) logits, and None (no language-model loss).
        """
        hidden = model.hidden_states(ids, lengths, segments)  # (B, T, H)
        return self.linear(self.dropout(hidden[:, 0])), None  # (B, H) -> (B, C)
