"""GPT-style left-to-right transformer language model (torch only).

Token + learned position embeddings → N decoder blocks (causal self-attention, GELU MLP) → a
softmax tied to the token embedding (Radford et al. 2018, "Improving Language Understanding by
Generative Pre-Training"; finetune-transformer-lm).

Blocks are post-LN, as in GPT-1: ``x = LN(x + attention(x)); x = LN(x + mlp(x))``. The family
reproduces GPT-1's recipe, whose fine-tuning settings (lr 6.25e-5, short warmup) were chosen for
this layout, and every block's output is layer-normalised, so the per-layer features the frozen
path mixes share one scale. Post-LN needs learning-rate warmup (Xiong et al. 2020); the
pretraining schedule has it. GPT-1's other choices kept here: GELU (tanh form), dropout 0.1 on
embeddings, attention weights and residual branches, weights N(0, 0.02), no output bias.

Shapes: B batch, T tokens, H hidden (= D, the feature width), L = layers + 1. Batches carry
*trailing* padding: with causal attention a real position t attends only to positions ≤ t, all
real, so padding never reaches a real position and needs no attention mask of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional

from pretrain.models.bilm import PADDING_ID, padding_mask
from pretrain.models.config import ModelConfig
from pretrain.models.flops import predicted_targets
from pretrain.models.linear_cross_entropy import linear_cross_entropy
from pretrain.models.objectives import LEFT_TO_RIGHT

INIT_STD = 0.02  # GPT-1's weight initialisation, N(0, 0.02)


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where position t sees positions ≤ t only."""

    def __init__(self, hidden_size: int, num_heads: int, attention_dropout: float, dropout: float):
        super().__init__()
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size={hidden_size} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.query_key_value = nn.Linear(hidden_size, 3 * hidden_size)  # one fused matmul
        self.output = nn.Linear(hidden_size, hidden_size)
        self.attention_dropout = attention_dropout
        self.dropout = nn.Dropout(dropout)

    def forward(self, hidden: Tensor) -> Tensor:
        batch_size, steps, hidden_size = hidden.shape
        head_size = hidden_size // self.num_heads
        projected = self.query_key_value(hidden).view(batch_size, steps, 3, self.num_heads, head_size)
        query, key, value = projected.permute(2, 0, 3, 1, 4).unbind(0)  # 3 × (B, heads, T, H / heads)
        attended = functional.scaled_dot_product_attention(
            query, key, value, dropout_p=self.attention_dropout if self.training else 0.0, is_causal=True
        )
        merged = attended.transpose(1, 2).reshape(batch_size, steps, hidden_size)  # (B, T, H)
        return self.dropout(self.output(merged))


class Block(nn.Module):
    """One post-LN decoder block."""

    def __init__(self, hidden_size: int, num_heads: int, ffn_size: int, dropout: float, attention_dropout: float):
        super().__init__()
        self.attention = CausalSelfAttention(hidden_size, num_heads, attention_dropout, dropout)
        self.attention_norm = nn.LayerNorm(hidden_size)
        self.mlp = nn.Sequential(
            nn.Linear(hidden_size, ffn_size),
            nn.GELU(approximate="tanh"),
            nn.Linear(ffn_size, hidden_size),
            nn.Dropout(dropout),
        )
        self.mlp_norm = nn.LayerNorm(hidden_size)

    def forward(self, hidden: Tensor) -> Tensor:
        hidden = self.attention_norm(hidden + self.attention(hidden))  # (B, T, H)
        return self.mlp_norm(hidden + self.mlp(hidden))  # (B, T, H)


@dataclass(frozen=True)
class TransformerConfig(ModelConfig):
    """The transformer LM's architecture (family ``gpt``; GPT-1: 12, 768, 12, 3072, 512, 0.1, 0.1).

    Args:
        vocab_size: linked from the data module's tokenizer.
        num_layers: decoder blocks.
        hidden_size: H, the width of every block (and of the features).
        num_heads: attention heads (must divide ``hidden_size``).
        ffn_size: the MLP's inner width (None: 4H).
        max_positions: the position table; longer sentences must be cut by the data module.
        dropout: on embeddings and residual branches.
        attention_dropout: on attention weights.
    """

    num_layers: int = 4
    hidden_size: int = 256
    num_heads: int = 4
    ffn_size: int | None = None
    max_positions: int = 256
    dropout: float = 0.1
    attention_dropout: float = 0.1


class TransformerLM(nn.Module):
    """Left-to-right transformer LM whose per-layer states are the transferable features.

    Follows the surface of ``pretrain.models`` (see its docstring).
    """

    objective = LEFT_TO_RIGHT

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config
        hidden_size = config.hidden_size
        self.vocab_size = config.vocab_size
        self.num_layers = config.num_layers
        self.hidden_size = hidden_size
        self.feature_dim = hidden_size
        self.max_positions = config.max_positions
        self.token_embedding = nn.Embedding(config.vocab_size, hidden_size, padding_idx=PADDING_ID)
        self.position_embedding = nn.Embedding(config.max_positions, hidden_size)
        self.embedding_dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(
            Block(
                hidden_size,
                config.num_heads,
                config.ffn_size or 4 * hidden_size,
                config.dropout,
                config.attention_dropout,
            )
            for _ in range(config.num_layers)
        )
        self.apply(initialize)
        with torch.no_grad():
            self.token_embedding.weight[PADDING_ID].zero_()  # the pad row starts at zero, as padding_idx intends

    def layer_states(self, token_ids: Tensor) -> list[Tensor]:
        """Returns L (B, T, H) states: the embedding sum (layer 0, as block 1 reads it), then
        each block's output. Padded positions hold whatever padding computed: mask before use."""
        steps = token_ids.shape[1]
        if steps > self.max_positions:
            raise ValueError(
                f"a sequence of {steps} tokens is longer than max_positions={self.max_positions}: "
                f"truncate it or build the model with a larger max_positions"
            )
        positions = torch.arange(steps, device=token_ids.device)  # (T,)
        hidden = self.embedding_dropout(self.token_embedding(token_ids) + self.position_embedding(positions))
        states = [hidden]  # (B, T, H) each
        for block in self.blocks:
            hidden = block(hidden)
            states.append(hidden)
        return states

    def layer_outputs(self, token_ids: Tensor, lengths: Tensor) -> Tensor:
        """Per-layer features.

        Returns:
            (L, B, T, D) with D = H: layer 0 is the token + position embedding, layer k the output
            of block k. Padded positions hold zeros.
        """
        mask = padding_mask(lengths, token_ids.shape[1])  # (B, T)
        return torch.stack(self.layer_states(token_ids)) * mask[None, :, :, None]  # (L, B, T, D)

    def hidden_states(self, token_ids: Tensor, lengths: Tensor) -> Tensor:
        """Top-layer states (what the softmax and a fine-tuning head read).

        Returns:
            (B, T, H), zeros at padding.
        """
        top = self.layer_states(token_ids)[-1]  # (B, T, H)
        return top * padding_mask(lengths, token_ids.shape[1])[..., None]

    def forward(self, token_ids: Tensor, lengths: Tensor) -> dict[str, Tensor]:
        """Language-model loss over real tokens only: the state at t predicts token t+1.

        Returns:
            dict with ``nll_forward`` (summed over predicted tokens) and ``count`` (predicted
            tokens: Σ (length - 1)).
        """
        return self.next_token_nll(self.hidden_states(token_ids, lengths), token_ids, lengths)

    def next_token_nll(self, hidden: Tensor, token_ids: Tensor, lengths: Tensor) -> dict[str, Tensor]:
        """The LM loss of any (B, T) sequences (sentences, or GPT's pair inputs while fine-tuning)
        from their (B, T, H) top states, so a head and the auxiliary LM loss share one pass.

        Returns:
            dict with ``nll_forward`` (sum) and ``count``, as ``forward``.
        """
        mask = padding_mask(lengths, token_ids.shape[1])  # (B, T)
        predicts_next = mask[:, :-1] & mask[:, 1:]  # (B, T-1): positions t with a real t+1
        inputs = hidden[:, :-1][predicts_next]  # (N, H)
        targets = token_ids[:, 1:][predicts_next]  # (N,)
        return {
            "nll_forward": self.token_nll(inputs, targets).sum(),
            "count": torch.tensor(targets.numel(), device=token_ids.device),
        }

    def logits(self, hidden: Tensor) -> Tensor:
        """(N, H) states → (N, V) scores through the tied token embedding."""
        return functional.linear(hidden, self.token_embedding.weight)

    def token_nll(self, hidden: Tensor, targets: Tensor) -> Tensor:
        """Negative log-likelihood of each target, (N, H) → (N,)."""
        return linear_cross_entropy(hidden, self.token_embedding.weight, None, targets)  # fused: same values

    def log_probabilities(self, hidden: Tensor) -> Tensor:
        """Full (N, V) log-probabilities, for sampling and inspection (not used in training)."""
        return torch.log_softmax(self.logits(hidden), dim=-1)

    @torch.no_grad()
    def predict(self, token_ids: Tensor, lengths: Tensor) -> Tensor:
        """Greedy predictions: (B, T) next-token ids from the top layer."""
        top = self.hidden_states(token_ids, lengths)  # (B, T, H)
        return self.logits(top).argmax(-1)  # (B, T)

    def parameter_groups(self) -> list[list[nn.Parameter]]:
        """[embeddings (token, which is also the softmax, and position), block 1, …, block N]."""
        embeddings = [self.token_embedding.weight, self.position_embedding.weight]
        return [embeddings] + [list(block.parameters()) for block in self.blocks]


def initialize(module: nn.Module) -> None:
    """GPT-1's initialisation: N(0, 0.02) weights, zero biases, LayerNorm at (1, 0)."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=INIT_STD)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
    if isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


def forward_flops(model: TransformerLM, token_ids: Tensor, lengths: Tensor, softmax: bool = True) -> float:
    """Useful forward FLOPs on a batch (see ``pretrain.models.flops``): every block's projections
    on every real token, attention over the causal (query, key) pairs of real tokens, the tied
    softmax for every next-token prediction (``softmax``; without it, the features alone)."""
    hidden = model.hidden_size
    ffn = model.blocks[0].mlp[0].out_features
    projections = 2 * hidden * 3 * hidden + 2 * hidden * hidden + 2 * 2 * hidden * ffn  # per token, per block
    attended = int((lengths * (lengths + 1) // 2).sum())  # causal (query, key) pairs of real tokens
    predictions = predicted_targets(token_ids, lengths, 1).numel() if softmax else 0
    forward = model.num_layers * (projections * int(lengths.sum()) + 2 * 2 * hidden * attended)
    return forward + 2 * hidden * model.vocab_size * predictions
