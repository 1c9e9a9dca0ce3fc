"""ULMFiT's language model: the AWD-LSTM (Merity, Keskar & Socher 2017) as fastai runs it (torch only).

Token embedding (with embedding dropout) → locked dropout → N single-layer LSTMs, each with
weight-drop on its hidden-to-hidden matrix and locked dropout between layers → locked output
dropout → a decoder whose weight is the embedding (full softmax, own bias). Defaults are fastai's
``awd_lstm_lm_config`` (reference-systems.md): embedding 400, hidden 1152, 3 layers, dropouts
output 0.1 / hidden 0.15 / input 0.25 / embedding 0.02 / weight 0.2, AR α = 2, TAR β = 1;
``drop_mult`` scales all five dropouts. Unlike fastai's stream LM, every sentence starts from a
zero state: sentences are the unit here, as for the biLM.

Shapes: B batch, T tokens, E embedding size, H hidden size, D feature width = max(E, H),
L layers + 1. The LSTM widths run E → H → … → H → E so the top output can share the embedding
matrix. Batches carry *trailing* padding: the LSTMs read left to right, so padding after a
sentence never reaches its real positions.

The dropouts are active in ``train()`` mode only; in ``eval()`` the model is deterministic and
uses its raw weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.func import functional_call

from pretrain.models.bilm import PADDING_ID, padding_mask
from pretrain.models.config import ModelConfig
from pretrain.models.flops import lstm_flops_per_token, predicted_targets
from pretrain.models.linear_cross_entropy import linear_cross_entropy
from pretrain.models.objectives import LEFT_TO_RIGHT


class LockedDropout(nn.Module):
    """Variational dropout: one mask per sequence, shared by every time step."""

    def __init__(self, probability: float):
        super().__init__()
        self.p = probability

    def forward(self, inputs: Tensor) -> Tensor:
        """(B, T, D) → (B, T, D), the same units zeroed at every t of a sequence."""
        if not self.training or self.p == 0:
            return inputs
        batch_size, _, width = inputs.shape
        keep = inputs.new_empty(batch_size, 1, width).bernoulli_(1 - self.p)  # (B, 1, D)
        return inputs * keep / (1 - self.p)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class WeightDroppedLSTM(nn.Module):
    """A single-layer ``nn.LSTM`` with DropConnect on its hidden-to-hidden matrix.

    The raw matrix stays the LSTM's own parameter (``lstm.weight_hh_l0``, a plain ``nn.LSTM``
    state dict). Each training forward draws a fresh element-wise mask (scaled by 1 / (1 - p), as
    ``F.dropout``) and runs the LSTM through ``torch.func.functional_call`` with the dropped matrix
    in place of the raw one; ``nn.LSTM`` re-reads its weights when they change, so the fast fused
    kernel still runs, and the raw parameter is back in place when the call returns. The mask is
    shared by all time steps and sequences of the batch; gradients reach the raw matrix through it.
    """

    def __init__(self, input_size: int, hidden_size: int, weight_drop: float):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, batch_first=True)
        self.weight_drop = weight_drop

    def forward(self, inputs: Tensor) -> Tensor:
        """(B, T, input_size) → (B, T, hidden_size), from a zero initial state."""
        if not self.training or self.weight_drop == 0:
            return self.lstm(inputs)[0]
        dropped = nn.functional.dropout(self.lstm.weight_hh_l0, self.weight_drop, training=True)  # (4H, H)
        return functional_call(self.lstm, {"weight_hh_l0": dropped}, (inputs,))[0]

    def extra_repr(self) -> str:
        return f"weight_drop={self.weight_drop}"


DROPOUTS = ("dropout_output", "dropout_hidden", "dropout_input", "dropout_embedding", "weight_drop")


@dataclass(frozen=True)
class AWDLSTMConfig(ModelConfig):
    """The AWD-LSTM's architecture and regularisation (family ``ulmfit``).

    Args:
        vocab_size: linked from the data module's tokenizer.
        embedding_size: E, the embedding (and, tied, the decoder) width.
        hidden_size: H, the inner LSTMs' width (emb → hidden → … → emb; ULMFiT: 400, 1152, 3).
        num_layers: LSTMs.
        dropout_output: locked dropout on the top states fed to the decoder (ULMFiT: 0.1).
        dropout_hidden: locked dropout between LSTMs (0.15).
        dropout_input: locked dropout on the embeddings (0.25).
        dropout_embedding: whole-word embedding dropout (0.02).
        weight_drop: DropConnect on each LSTM's hidden-to-hidden matrix (0.2).
        drop_mult: scales all five dropouts.
        tie_weights: share the embedding and the decoder.
        alpha: activation regularisation (AR).
        beta: temporal activation regularisation (TAR).
    """

    embedding_size: int = 400
    hidden_size: int = 1152
    num_layers: int = 3
    dropout_output: float = 0.1
    dropout_hidden: float = 0.15
    dropout_input: float = 0.25
    dropout_embedding: float = 0.02
    weight_drop: float = 0.2
    drop_mult: float = 1.0
    tie_weights: bool = True
    alpha: float = 2.0
    beta: float = 1.0

    def __post_init__(self):
        if self.num_layers < 1:
            raise ValueError(f"num_layers must be at least 1, not {self.num_layers}")
        for name, value in self.scaled_dropouts().items():
            if not 0 <= value < 1:
                raise ValueError(f"{name} × drop_mult must lie in [0, 1), not {getattr(self, name)} × {self.drop_mult}")
        if self.alpha < 0 or self.beta < 0:
            raise ValueError(f"alpha and beta must be non-negative, not {self.alpha} and {self.beta}")

    def scaled_dropouts(self) -> dict[str, float]:
        """Each dropout × ``drop_mult``."""
        return {name: getattr(self, name) * self.drop_mult for name in DROPOUTS}


class AWDLSTM(nn.Module):
    """Left-to-right AWD-LSTM language model whose per-layer states are the transferable features.

    ``tie_weights`` shares the embedding matrix with the decoder (the decoder keeps its own bias).
    ``alpha`` weights activation regularization (AR) and ``beta`` temporal activation
    regularization (TAR); both enter ``forward``'s ``regularization`` in training mode only.
    """

    objective = LEFT_TO_RIGHT

    def __init__(self, config: AWDLSTMConfig):
        super().__init__()
        self.config = config
        vocab_size, embedding_size, hidden_size = config.vocab_size, config.embedding_size, config.hidden_size
        num_layers = config.num_layers
        scaled = config.scaled_dropouts()
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.alpha, self.beta = config.alpha, config.beta
        self.dropout_embedding = scaled["dropout_embedding"]
        widths = [embedding_size] + [hidden_size] * (num_layers - 1) + [embedding_size]
        self.layer_widths = tuple(widths)  # width of each feature layer, embedding first
        self.feature_dim = max(widths)

        self.embedding = nn.Embedding(vocab_size, embedding_size, padding_idx=PADDING_ID)
        self.input_dropout = LockedDropout(scaled["dropout_input"])
        self.lstms = nn.ModuleList(
            WeightDroppedLSTM(widths[depth], widths[depth + 1], scaled["weight_drop"]) for depth in range(num_layers)
        )
        self.hidden_dropouts = nn.ModuleList(LockedDropout(scaled["dropout_hidden"]) for _ in range(num_layers - 1))
        self.output_dropout = LockedDropout(scaled["dropout_output"])
        self.decoder = nn.Linear(embedding_size, vocab_size)
        # fastai's initialisation: embedding uniform in ±0.1 (padding row zero), decoder bias zero.
        with torch.no_grad():
            self.embedding.weight.uniform_(-0.1, 0.1)
            self.embedding.weight[PADDING_ID].zero_()
            self.decoder.bias.zero_()
        if config.tie_weights:
            self.decoder.weight = self.embedding.weight

    def embed(self, token_ids: Tensor) -> Tensor:
        """(B, T) ids → (B, T, E) embeddings; in training, embedding dropout drops whole words.

        One keep/drop draw per vocabulary entry per forward (so a word is dropped at all its
        occurrences in the batch), kept rows scaled by 1 / (1 - p): the same as dropping rows of
        the embedding matrix, without touching the rows the batch does not use.
        """
        embedded = self.embedding(token_ids)  # (B, T, E)
        if not self.training or self.dropout_embedding == 0:
            return embedded
        keep = embedded.new_empty(self.vocab_size).bernoulli_(1 - self.dropout_embedding)  # (V,)
        return embedded * (keep / (1 - self.dropout_embedding))[token_ids].unsqueeze(-1)  # (B, T, E)

    def layer_states(self, token_ids: Tensor) -> list[Tensor]:
        """Each layer's output before the dropout that feeds the next layer.

        Returns:
            L tensors: the (B, T, E) embedding (after embedding dropout), then each LSTM's
            (B, T, width) output, the top one (B, T, E). Padded positions are not zeroed.
        """
        embedded = self.embed(token_ids)  # (B, T, E)
        states = [embedded]
        hidden = self.input_dropout(embedded)
        for depth, lstm in enumerate(self.lstms):
            states.append(lstm(hidden))  # (B, T, width)
            if depth < self.num_layers - 1:
                hidden = self.hidden_dropouts[depth](states[-1])
        return states

    def layer_outputs(self, token_ids: Tensor, lengths: Tensor) -> Tensor:
        """Per-layer features.

        Returns:
            (L, B, T, D), D = ``feature_dim`` = max(E, H): layer 0 is the token embedding, layer
            k ≥ 1 the k-th LSTM's output. A layer narrower than D (the embedding and the top
            layer when H > E) fills its first ``layer_widths[k]`` features and is zero beyond.
            Padded positions hold zeros.
        """
        states = self.layer_states(token_ids)
        widened = [nn.functional.pad(state, (0, self.feature_dim - state.shape[-1])) for state in states]
        mask = padding_mask(lengths, token_ids.shape[1])  # (B, T)
        return torch.stack(widened) * mask[None, :, :, None]  # (L, B, T, D)

    def forward(self, token_ids: Tensor, lengths: Tensor) -> dict[str, Tensor]:
        """Language-model loss over real tokens only: the state at t predicts token t+1, and only
        pairs where both positions are real count.

        ``regularization`` is already a mean, to be added to the mean NLL per token:
        AR = α · mean of the squared output-dropped top states over (real tokens × E) and
        TAR = β · mean of (h_{t+1} − h_t)² of the undropped top states over (real consecutive
        pairs × E), as fastai's ``RNNRegularizer`` (which averages over padding too). It is 0 in
        eval mode and when α = β = 0.

        Returns:
            dict with ``nll_forward`` (summed over predicted tokens), ``count`` (predicted
            tokens) and ``regularization`` (scalar).
        """
        top = self.layer_states(token_ids)[-1]  # (B, T, E)
        dropped = self.output_dropout(top)  # (B, T, E)
        mask = padding_mask(lengths, token_ids.shape[1])  # (B, T)
        predicts_next = mask[:, :-1] & mask[:, 1:]  # (B, T-1): positions t with a real t+1
        inputs = dropped[:, :-1][predicts_next]  # (N, E)
        targets = token_ids[:, 1:][predicts_next]  # (N,)
        nll = self.token_nll(inputs, targets)  # (N,)
        regularization = top.new_zeros(())
        if self.training and self.alpha > 0:
            squares = dropped.pow(2).sum(-1)  # (B, T)
            regularization = regularization + self.alpha * squares[mask].sum() / (
                mask.sum().clamp(min=1) * top.shape[-1]
            )
        if self.training and self.beta > 0:
            steps = (top[:, 1:] - top[:, :-1]).pow(2).sum(-1)  # (B, T-1)
            pairs = predicts_next.sum().clamp(min=1) * top.shape[-1]
            regularization = regularization + self.beta * steps[predicts_next].sum() / pairs
        return {
            "nll_forward": nll.sum(),
            "count": torch.tensor(targets.numel(), device=token_ids.device),
            "regularization": regularization,
        }

    def token_nll(self, hidden: Tensor, targets: Tensor) -> Tensor:
        """Negative log-likelihood of each target, (N, E) → (N,)."""
        return linear_cross_entropy(hidden, self.decoder.weight, self.decoder.bias, targets)  # fused: same values

    def log_probabilities(self, hidden: Tensor) -> Tensor:
        """Full (N, V) log-probabilities of (N, E) top states, for sampling and inspection."""
        return torch.log_softmax(self.decoder(hidden), dim=-1)

    @torch.no_grad()
    def predict(self, token_ids: Tensor, lengths: Tensor) -> tuple[Tensor]:
        """Greedy predictions, one (B, T) tensor per direction (here only forward): the most
        likely next token after each position. Positions at or beyond ``lengths`` are
        meaningless; callers should mask them."""
        top = self.layer_states(token_ids)[-1]  # (B, T, E)
        best = self.log_probabilities(top.flatten(0, 1)).argmax(-1)  # (B·T,)
        return (best.view_as(token_ids),)

    def parameter_groups(self) -> list[list[nn.Parameter]]:
        """Every parameter once, from the input to the top: [embedding + decoder, LSTM 1, …, LSTM N].

        The decoder belongs to the embedding's group: tied, its weight *is* the embedding matrix,
        and its bias (and, untied, its weight) is the rest of that vocabulary layer. Fine-tuning a
        classifier never uses the decoder, so its parameters get no gradient there. (fastai's LM
        split puts embedding + decoder last instead; here the order follows the features.)
        """
        vocabulary = [self.embedding.weight, self.decoder.bias]
        if self.decoder.weight is not self.embedding.weight:
            vocabulary.insert(1, self.decoder.weight)
        return [vocabulary] + [list(lstm.parameters()) for lstm in self.lstms]


def forward_flops(model: AWDLSTM, token_ids: Tensor, lengths: Tensor, softmax: bool = True) -> float:
    """Useful forward FLOPs on a batch (see ``pretrain.models.flops``): every LSTM on every real
    token, the decoder for every next-token prediction (``softmax``; without it, the features alone)."""
    per_token = sum(lstm_flops_per_token(layer.lstm) for layer in model.lstms)
    predictions = predicted_targets(token_ids, lengths, 1).numel() if softmax else 0
    return per_token * int(lengths.sum()) + 2 * model.embedding_size * model.vocab_size * predictions
