"""Useful model FLOPs of a training step, for the throughput benchmark: the family's own count of
the forward matmul work on real tokens (its registry entry's ``flops``, see
``pretrain.models.flops``), ×3 for the forward and backward passes."""

from __future__ import annotations

from torch import Tensor, nn

from pretrain.families import Family

TRAINING_FACTOR = 3  # forward + backward (gradients of inputs and of weights)


def step_flops(family: Family, model: nn.Module, token_ids: Tensor, lengths: Tensor) -> float:
    """Useful FLOPs of one training step (forward + backward) of ``family``'s ``model`` on a batch."""
    return TRAINING_FACTOR * family.flops(model, token_ids, lengths)
