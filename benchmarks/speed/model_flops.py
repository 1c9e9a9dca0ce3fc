"""Useful model FLOPs of a training step, for the throughput benchmarks: the family's own count of
the forward matmul work on real tokens (its registry entry's ``flops``, see
``pretrain.models.flops``), ×3 for the forward and backward passes.

A fine-tuning step (:func:`finetune_step_flops`) counts the encoder's features of both sentences
(or, for a joint classifier, both orders of the pair with the auxiliary LM loss's softmax when it
has a weight) on their real tokens, and a frozen head's own work on cached features: its matrix
products as they run (``torch.utils.flop_counter``) plus its LSTMs on real tokens (which the
counter does not see). A pool-mlp or ``cls`` head on a fine-tuned encoder is a few products per
pair and is left out, as the mix and element-wise work are everywhere.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode

from downstream.model.heads import MaskedBiLSTM
from downstream.model.pair_classifier import FeaturePair, JointPair, PairClassifier, TokenPair
from pretrain.families import Family
from pretrain.models.flops import lstm_flops_per_token

TRAINING_FACTOR = 3  # forward + backward (gradients of inputs and of weights)


def step_flops(family: Family, model: nn.Module, token_ids: Tensor, lengths: Tensor) -> float:
    """Useful FLOPs of one training step (forward + backward) of ``family``'s ``model`` on a batch."""
    return TRAINING_FACTOR * family.flops(model, token_ids, lengths)


@torch.no_grad()
def head_flops(head: nn.Module, mask_a: Tensor, mask_b: Tensor, dim: int) -> float:
    """Forward FLOPs of a pair head on features of width ``dim`` under (B, Ta), (B, Tb) masks: its
    matrix products as counted by ``FlopCounterMode`` on a float32 forward, plus both directions of
    every ``MaskedBiLSTM`` on the real tokens of both sentences."""
    was_training = head.training
    head.eval()
    features_a = torch.zeros(*mask_a.shape, dim)  # (B, Ta, D): values do not change the count
    features_b = torch.zeros(*mask_b.shape, dim)  # (B, Tb, D)
    with FlopCounterMode(display=False) as counter, torch.autocast("cpu", enabled=False):
        head(features_a, mask_a, features_b, mask_b)
    head.train(was_training)
    real_tokens = int(mask_a.sum() + mask_b.sum())
    recurrent = sum(
        2 * lstm_flops_per_token(module.lstm) * real_tokens
        for module in head.modules()
        if isinstance(module, MaskedBiLSTM)
    )
    return float(counter.get_total_flops() + recurrent)


def finetune_step_flops(classifier: PairClassifier, inputs: FeaturePair | TokenPair | JointPair) -> float:
    """Useful FLOPs of one training step (forward + backward) of ``classifier`` on a batch."""
    encoder = classifier.encoder
    if isinstance(inputs, FeaturePair):
        forward = head_flops(classifier.head, inputs.mask_a, inputs.mask_b, encoder.dim)
    elif isinstance(inputs, TokenPair):
        forward = sum(
            encoder.spec.flops(encoder.model, ids, lengths, softmax=False)
            for ids, lengths in ((inputs.ids_a, inputs.lengths_a), (inputs.ids_b, inputs.lengths_b))
        )
    else:
        softmax = bool(classifier.lm_weight) and hasattr(encoder.model, "next_token_nll")
        forward = sum(
            encoder.spec.flops(encoder.model, ids, lengths, softmax=softmax)
            for ids, lengths in ((inputs.ids_ab, inputs.lengths_ab), (inputs.ids_ba, inputs.lengths_ba))
        )
    return TRAINING_FACTOR * forward
