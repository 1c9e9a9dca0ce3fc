"""Counting helpers for the families' FLOP functions (each model file has ``forward_flops``).

Only the matmul work on real tokens counts (LSTM gates, attention and MLP projections, the causal
part of attention, the output softmax); element-wise work, padding, dropout and the optimiser do
not, so a step that wastes time on padding shows up as lower FLOP/s, never as more FLOPs.

Shapes: B batch, T tokens, N predictions.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def lstm_flops_per_token(lstm: nn.LSTM) -> int:
    """Forward FLOPs of one token through a one-layer ``nn.LSTM`` (with its projection, if any)."""
    cell, output = lstm.hidden_size, lstm.proj_size or lstm.hidden_size
    return 2 * 4 * cell * (lstm.input_size + output) + (2 * cell * output if lstm.proj_size else 0)


def predicted_targets(token_ids: Tensor, lengths: Tensor, directions: int) -> Tensor:
    """The (N,) targets every direction predicts: t+1 from t (and t-1 from t for the biLM)."""
    mask = torch.arange(token_ids.shape[1], device=lengths.device)[None, :] < lengths[:, None]  # (B, T)
    predicts_next = mask[:, :-1] & mask[:, 1:]  # (B, T-1)
    targets = [token_ids[:, 1:][predicts_next], token_ids[:, :-1][predicts_next]]
    return torch.cat(targets[:directions])
