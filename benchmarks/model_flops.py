"""Useful model FLOPs of a training step, per family, for the throughput benchmark.

Only the matmul work on real tokens is counted (LSTM gates, attention and MLP projections, the
causal part of attention, the output softmax), ×3 for the forward and backward passes; element-wise
work, padding, dropout and the optimiser are not. A step that wastes time on padding or on memory
traffic therefore shows up as a lower FLOP/s, never as more FLOPs.

Shapes: B batch, T tokens, H hidden, V vocabulary, N predictions.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from pretrain.models.awd_lstm import AWDLSTM
from pretrain.models.bilm import BiLM, padding_mask
from pretrain.models.transformer import TransformerLM

TRAINING_FACTOR = 3  # forward + backward (gradients of inputs and of weights)


def lstm_flops_per_token(lstm: nn.LSTM) -> int:
    """Forward FLOPs of one token through a one-layer ``nn.LSTM`` (with its projection, if any)."""
    cell, output = lstm.hidden_size, lstm.proj_size or lstm.hidden_size
    return 2 * 4 * cell * (lstm.input_size + output) + (2 * cell * output if lstm.proj_size else 0)


def predicted_targets(token_ids: Tensor, lengths: Tensor, directions: int) -> Tensor:
    """The (N,) targets every direction predicts: t+1 from t (and t-1 from t for the biLM)."""
    mask = padding_mask(lengths, token_ids.shape[1])  # (B, T)
    predicts_next = mask[:, :-1] & mask[:, 1:]  # (B, T-1)
    targets = [token_ids[:, 1:][predicts_next], token_ids[:, :-1][predicts_next]]
    return torch.cat(targets[:directions])


def bilm_softmax_flops(model: BiLM, targets: Tensor) -> float:
    """Forward FLOPs of the biLM's softmax for (N,) targets: exact, or the adaptive softmax's
    head for every target plus each tail cluster's two projections for the targets in it."""
    hidden = model.hidden_size
    if model.softmax_kind == "full":
        return 2 * hidden * model.softmax.out_features * targets.numel()
    adaptive = model.softmax
    flops = 2 * hidden * adaptive.head_size * targets.numel()
    for index, projection in enumerate(adaptive.tail):
        low, high = adaptive.cutoffs[index], adaptive.cutoffs[index + 1]
        members = int(((targets >= low) & (targets < high)).sum())
        project, out = projection[0], projection[1]
        flops += 2 * members * (project.in_features * project.out_features + out.in_features * out.out_features)
    return flops


def step_flops(model: nn.Module, token_ids: Tensor, lengths: Tensor) -> float:
    """Useful FLOPs of one training step (forward + backward) of ``model`` on a batch."""
    real_tokens = int(lengths.sum())
    if isinstance(model, BiLM):
        per_token = sum(lstm_flops_per_token(lstm) for stack in (model.forward_stack, model.backward_stack)
                        for lstm in stack.layers)
        forward = per_token * real_tokens + bilm_softmax_flops(model, predicted_targets(token_ids, lengths, 2))
    elif isinstance(model, AWDLSTM):
        per_token = sum(lstm_flops_per_token(layer.lstm) for layer in model.lstms)
        predictions = predicted_targets(token_ids, lengths, 1).numel()
        forward = per_token * real_tokens + 2 * model.embedding_size * model.vocab_size * predictions
    elif isinstance(model, TransformerLM):
        hidden = model.hidden_size
        ffn = model.blocks[0].mlp[0].out_features
        projections = 2 * hidden * 3 * hidden + 2 * hidden * hidden + 2 * 2 * hidden * ffn  # per token, per block
        attended = int((lengths * (lengths + 1) // 2).sum())  # causal (query, key) pairs of real tokens
        predictions = predicted_targets(token_ids, lengths, 1).numel()
        forward = model.num_layers * (projections * real_tokens + 2 * 2 * hidden * attended)
        forward += 2 * hidden * model.vocab_size * predictions
    else:
        raise TypeError(f"no FLOP count for {type(model).__name__}")
    return TRAINING_FACTOR * forward
