"""ELMo-style bidirectional language model (torch only).

Token embedding → separate forward and backward LSTM stacks (residual between layers, dropout)
→ one softmax shared by both directions (Peters et al. 2018; bilm-tf).

Shapes: B batch, T tokens, H hidden per direction (= embedding size), D = 2H, L = layers + 1.
Batches carry *trailing* padding. The forward stack reads left to right, so padding after a
sentence never reaches its real positions. The backward stack reads each sentence reversed
*within its own length*, so its padding also trails. Padding therefore enters neither
direction, and no time is spent on it beyond what length-bucketed batching leaves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

from pretrain.models.config import ModelConfig
from pretrain.models.flops import lstm_flops_per_token, predicted_targets
from pretrain.models.linear_cross_entropy import linear_cross_entropy
from pretrain.models.objectives import BIDIRECTIONAL_LM


def reverse_within_lengths(tensor: Tensor, lengths: Tensor) -> Tensor:
    """Reverse each row's first ``lengths[b]`` steps along dim 1, leaving padding in place.

    Works for (B, T) ids and (B, T, H) states; applying it twice is the identity.
    """
    batch_size, steps = tensor.shape[:2]
    positions = torch.arange(steps, device=tensor.device).expand(batch_size, steps)  # (B, T)
    reversed_positions = lengths.unsqueeze(1) - 1 - positions
    index = torch.where(reversed_positions >= 0, reversed_positions, positions)  # (B, T)
    if tensor.dim() == 3:
        index = index.unsqueeze(-1).expand_as(tensor)  # (B, T, H)
    return tensor.gather(1, index)


class LSTMStack(nn.Module):
    """Unidirectional LSTM layers with a residual connection between layers (not from the input)."""

    def __init__(self, hidden_size: int, cell_size: int, num_layers: int, dropout: float):
        super().__init__()
        projection = hidden_size if cell_size != hidden_size else 0
        self.layers = nn.ModuleList(
            nn.LSTM(hidden_size, cell_size, batch_first=True, proj_size=projection) for _ in range(num_layers)
        )
        self.dropout = nn.Dropout(dropout)

    def forward(self, inputs: Tensor) -> list[Tensor]:
        """Returns one (B, T, H) output per layer."""
        outputs = []
        hidden = inputs
        for depth, lstm in enumerate(self.layers):
            states, _ = lstm(self.dropout(hidden))  # (B, T, H)
            hidden = states + hidden if depth > 0 else states
            outputs.append(hidden)
        return outputs


PADDING_ID = 0  # every tokenizer's <pad>


@dataclass(frozen=True)
class BiLMConfig(ModelConfig):
    """The biLM's architecture (family ``elmo``).

    Args:
        vocab_size: linked from the data module's tokenizer.
        hidden_size: embedding size and per-direction LSTM output H (features are D = 2H).
        cell_size: LSTM memory size; larger than ``hidden_size`` adds ELMo's projection.
        num_layers: LSTM layers per direction.
        dropout: on LSTM inputs and on the states fed to the softmax.
        softmax: ``full`` (exact) or ``adaptive`` (``nn.AdaptiveLogSoftmaxWithLoss``).
        adaptive_cutoffs: cluster boundaries of the adaptive softmax (frequency ranks).
        tie_weights: share the embedding and full-softmax matrices.
    """

    hidden_size: int = 256
    cell_size: int | None = None
    num_layers: int = 2
    dropout: float = 0.1
    softmax: Literal["full", "adaptive"] = "full"
    adaptive_cutoffs: tuple[int, ...] = (2000, 8000)
    tie_weights: bool = False

    def __post_init__(self):
        if self.softmax not in ("full", "adaptive"):
            raise ValueError(f"softmax must be 'full' or 'adaptive', not {self.softmax!r}")
        if self.tie_weights and self.softmax != "full":
            raise ValueError("tie_weights needs the full softmax")


class BiLM(nn.Module):
    """Bidirectional LM whose per-layer states are the transferable features.

    ``cell_size`` > ``hidden_size`` gives ELMo's LSTM-with-projection (memory cell_size,
    output hidden_size). The adaptive softmax works over the same frequency-ordered vocabulary.
    """

    objective = BIDIRECTIONAL_LM

    def __init__(self, config: BiLMConfig):
        super().__init__()
        self.config = config
        vocab_size, hidden_size = config.vocab_size, config.hidden_size
        self.hidden_size = hidden_size
        self.num_layers = config.num_layers
        self.softmax_kind = config.softmax
        self.embedding = nn.Embedding(vocab_size, hidden_size, padding_idx=PADDING_ID)
        cell_size = config.cell_size or hidden_size
        self.forward_stack = LSTMStack(hidden_size, cell_size, config.num_layers, config.dropout)
        self.backward_stack = LSTMStack(hidden_size, cell_size, config.num_layers, config.dropout)
        self.output_dropout = nn.Dropout(config.dropout)
        if config.softmax == "full":
            self.softmax = nn.Linear(hidden_size, vocab_size)
            if config.tie_weights:
                self.softmax.weight = self.embedding.weight
        else:
            cutoffs = [c for c in config.adaptive_cutoffs if 0 < c < vocab_size - 1] or [max(1, vocab_size // 4)]
            self.softmax = nn.AdaptiveLogSoftmaxWithLoss(hidden_size, vocab_size, cutoffs, div_value=4.0)

    @property
    def feature_dim(self) -> int:
        """D = 2H: every feature layer is [forward; backward] (layer 0: the embedding twice)."""
        return 2 * self.hidden_size

    def parameter_groups(self) -> list[list[nn.Parameter]]:
        """Input to top: [embedding], then layer k of both directions for k = 1..N. The softmax
        (which features never use) joins the top group, unless tied to the embedding."""
        groups = [[self.embedding.weight]]
        for forward_layer, backward_layer in zip(self.forward_stack.layers, self.backward_stack.layers):
            groups.append([*forward_layer.parameters(), *backward_layer.parameters()])
        groups[-1] += [p for p in self.softmax.parameters() if p is not self.embedding.weight]
        return groups

    def directional_states(self, token_ids: Tensor, lengths: Tensor) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """Returns the (B, T, H) embedding and per-layer forward / backward states, in sentence order."""
        embedded = self.embedding(token_ids)  # (B, T, H)
        forward_states = self.forward_stack(embedded)
        backward_states = self.backward_stack(reverse_within_lengths(embedded, lengths))
        backward_states = [reverse_within_lengths(states, lengths) for states in backward_states]
        return embedded, forward_states, backward_states

    def layer_outputs(self, token_ids: Tensor, lengths: Tensor) -> Tensor:
        """Per-layer features.

        Returns:
            (L, B, T, D): layer 0 is the token embedding concatenated with itself; layer k ≥ 1
            is [forward_k ; backward_k]. Padded positions hold zeros.
        """
        embedded, forward_states, backward_states = self.directional_states(token_ids, lengths)
        layers = [torch.cat([embedded, embedded], dim=-1)]
        layers += [torch.cat(pair, dim=-1) for pair in zip(forward_states, backward_states)]
        mask = padding_mask(lengths, token_ids.shape[1])  # (B, T)
        return torch.stack(layers) * mask[None, :, :, None]  # (L, B, T, D)

    def forward(self, token_ids: Tensor, lengths: Tensor) -> dict[str, Tensor]:
        """Language-model loss over real tokens only.

        Forward direction: the state at t predicts token t+1; backward: the state at t predicts
        t-1. Only pairs where both positions are real count.

        Returns:
            dict with ``nll_forward`` and ``nll_backward`` (summed over predicted tokens) and
            ``count`` (predicted tokens per direction).
        """
        _, forward_states, backward_states = self.directional_states(token_ids, lengths)
        forward_top, backward_top = forward_states[-1], backward_states[-1]  # (B, T, H) each
        mask = padding_mask(lengths, token_ids.shape[1])  # (B, T)
        predicts_next = mask[:, :-1] & mask[:, 1:]  # (B, T-1): positions t with a real t+1
        forward_inputs = forward_top[:, :-1][predicts_next]  # (N, H)
        forward_targets = token_ids[:, 1:][predicts_next]  # (N,)
        backward_inputs = backward_top[:, 1:][predicts_next]  # (N, H): states at t+1 predict t
        backward_targets = token_ids[:, :-1][predicts_next]  # (N,)
        hidden = self.output_dropout(torch.cat([forward_inputs, backward_inputs]))  # (2N, H)
        targets = torch.cat([forward_targets, backward_targets])  # (2N,)
        nll = self.token_nll(hidden, targets)  # (2N,)
        count = forward_targets.numel()
        return {
            "nll_forward": nll[:count].sum(),
            "nll_backward": nll[count:].sum(),
            "count": torch.tensor(count, device=token_ids.device),
        }

    def token_nll(self, hidden: Tensor, targets: Tensor) -> Tensor:
        """Negative log-likelihood of each target, (N, H) → (N,)."""
        if self.softmax_kind == "full":  # the output layer and the loss in one node: same values, fewer passes
            return linear_cross_entropy(hidden, self.softmax.weight, self.softmax.bias, targets)
        return -self.softmax(hidden, targets).output

    def log_probabilities(self, hidden: Tensor) -> Tensor:
        """Full (N, V) log-probabilities, for sampling and inspection (not used in training)."""
        if self.softmax_kind == "full":
            return torch.log_softmax(self.softmax(hidden), dim=-1)
        return self.softmax.log_prob(hidden)

    @torch.no_grad()
    def predict(self, token_ids: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Greedy predictions: (B, T) next-token ids from the forward top layer and (B, T)
        previous-token ids from the backward top layer."""
        _, forward_states, backward_states = self.directional_states(token_ids, lengths)
        batch_size, steps = token_ids.shape
        top = torch.stack([forward_states[-1], backward_states[-1]])  # (2, B, T, H)
        best = self.log_probabilities(top.reshape(-1, self.hidden_size)).argmax(-1)  # (2·B·T,)
        best = best.view(2, batch_size, steps)  # (2, B, T)
        return best[0], best[1]


def padding_mask(lengths: Tensor, steps: int) -> Tensor:
    """(B,) lengths → (B, T) bool, True at real tokens."""
    return torch.arange(steps, device=lengths.device)[None, :] < lengths[:, None]


def softmax_flops(model: BiLM, targets: Tensor) -> float:
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


def forward_flops(model: BiLM, token_ids: Tensor, lengths: Tensor, softmax: bool = True) -> float:
    """Useful forward FLOPs on a batch (see ``pretrain.models.flops``): both LSTM stacks on every
    real token, the shared softmax for both directions' predictions (``softmax``; without it, the
    features alone)."""
    per_token = sum(
        lstm_flops_per_token(lstm) for stack in (model.forward_stack, model.backward_stack) for lstm in stack.layers
    )
    predictions = softmax_flops(model, predicted_targets(token_ids, lengths, 2)) if softmax else 0
    return per_token * int(lengths.sum()) + predictions
