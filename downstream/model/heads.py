"""Pair heads: two sentences' mixed token features -> C outputs: one logit per class (MRPC: not
paraphrase, paraphrase; any number of classes >= 2), or one number for a graded score
(``Task.output_size``). A head does not know which: the loss that reads its outputs does
(``downstream.model.pair_classifier``).

Every head takes ``a`` (B, Ta, D) with ``mask_a`` (B, Ta) and ``b`` (B, Tb, D) with ``mask_b``
(B, Tb); masks are bool, True at real tokens, real tokens first. Values at padding never
matter (they are zeroed on entry), an all-pad sentence gives finite logits, and every pooling,
recurrence and attention is masked, so logits do not change with the padding a batch adds.

- ``pool-mlp``  masked [mean; max] per sentence -> [u; v; |u-v|; u*v] -> MLP (jiant's MRPC head).
- ``bilstm``    shared BiLSTM per sentence -> masked max -> [u; v; |u-v|; u*v] -> MLP (GLUE).
- ``dense``     masked mean per sentence -> [u; v; |u-v|; u*v] -> Dense(ReLU) -> C (TF-Hub style).
- ``attn``      ESIM: project, masked cross-attention, compose, BiLSTM, mean+max pool, MLP.
- ``decomp``    decomposable attention (Parikh et al. 2016): project, attend, compare, sum, MLP;
                feed-forward only, so a step costs a few matrix products, not a recurrence.
- ``concat-pool`` ULMFiT: [last; max; mean] per sentence -> [u; v; |u-v|; u*v] -> BatchNorm /
                dropout / linear blocks (Howard & Ruder 2018's classifier, for a pair).

Shape legend: B batch, T tokens, D input features per token, H ``hidden_size``, C outputs.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def _zero_padding(x: Tensor, mask: Tensor) -> Tensor:
    """(B, T, D) with padding set to 0 (NaN/inf there included)."""
    return x.masked_fill(~mask.bool().unsqueeze(-1), 0.0)  # (B, T, D)


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """Mean over the real tokens of each row: (B, T, D), (B, T) -> (B, D); all-pad rows -> 0."""
    mask = mask.bool()
    total = _zero_padding(x, mask).sum(dim=1)  # (B, D)
    count = mask.sum(dim=1, keepdim=True).clamp(min=1).to(x.dtype)  # (B, 1)
    return total / count  # (B, D)


def masked_max(x: Tensor, mask: Tensor) -> Tensor:
    """Max over the real tokens of each row: (B, T, D), (B, T) -> (B, D); all-pad rows -> 0."""
    mask = mask.bool()
    filled = x.masked_fill(~mask.unsqueeze(-1), float("-inf"))  # (B, T, D)
    maxed = filled.max(dim=1).values  # (B, D), -inf for all-pad rows
    has_token = mask.any(dim=1, keepdim=True)  # (B, 1)
    return torch.where(has_token, maxed, torch.zeros_like(maxed))  # (B, D)


def pair_features(u: Tensor, v: Tensor) -> Tensor:
    """(B, F), (B, F) -> (B, 4F): [u; v; |u - v|; u * v]."""
    return torch.cat([u, v, (u - v).abs(), u * v], dim=-1)  # (B, 4F)


def _mlp(input_dim: int, hidden_size: int, dropout: float, activation: nn.Module, outputs: int) -> nn.Sequential:
    """Linear -> activation -> Dropout -> Linear(outputs)."""
    return nn.Sequential(
        nn.Linear(input_dim, hidden_size),
        activation,
        nn.Dropout(dropout),
        nn.Linear(hidden_size, outputs),
    )


def pad_steps(x: Tensor, steps: int) -> Tensor:
    """(B, T, ...) → (B, steps, ...) with trailing zeros (False for a mask); ``steps`` >= T."""
    if x.size(1) == steps:
        return x
    padding = x.new_zeros((x.size(0), steps - x.size(1), *x.shape[2:]))  # (B, steps - T, ...)
    return torch.cat([x, padding], dim=1)  # (B, steps, ...)


def both_sentences(a: Tensor, mask_a: Tensor, b: Tensor, mask_b: Tensor) -> tuple[Tensor, Tensor]:
    """Both sentences of a batch as one batch of rows, so that each layer runs once over all of
    them: (B, Ta, F), (B, Ta), (B, Tb, F), (B, Tb) → (2B, T, F), (2B, T); T = max(Ta, Tb), rows
    ``[:B]`` are ``a``, ``[B:]`` are ``b``, the extra steps are padding."""
    steps = max(a.size(1), b.size(1))
    rows = torch.cat([pad_steps(a, steps), pad_steps(b, steps)])  # (2B, T, F)
    mask = torch.cat([pad_steps(mask_a.bool(), steps), pad_steps(mask_b.bool(), steps)])  # (2B, T)
    return rows, mask


def reverse_within_length(x: Tensor, lengths: Tensor) -> Tensor:
    """Each row's first ``lengths[i]`` steps in reverse order, its padding left in place:
    (B, T, F), (B,) → (B, T, F). Its own inverse."""
    steps = torch.arange(x.size(1), device=x.device)  # (T,)
    last = (lengths.to(x.device) - 1).unsqueeze(1)  # (B, 1)
    index = torch.where(steps < lengths.to(x.device).unsqueeze(1), last - steps, steps)  # (B, T)
    return x.gather(1, index.unsqueeze(-1).expand_as(x))  # (B, T, F)


class MaskedBiLSTM(nn.Module):
    """One-layer BiLSTM that reads only the real tokens of each row: (B, T, D) -> (B, T, 2H).

    Rows are right-padded, so each direction is one plain recurrence over the whole padded
    batch, with no packing: the forward direction reads the rows as they are (its state at a real
    token has seen no padding yet), the backward one reads each row reversed within its length
    (it starts at the last real token). The result equals the packed BiLSTM's at every real token
    (``tests/downstream/test_attention_reference.py``); the parameters are ``nn.LSTM``'s, so the
    state dict is unchanged.
    """

    def __init__(self, input_dim: int, hidden_size: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(input_dim, hidden_size, batch_first=True, bidirectional=True)

    def direction(self, x: Tensor, suffix: str) -> Tensor:
        """One direction's recurrence (weights ``*_l0`` + ``suffix``) from zero states: (B, T, D) -> (B, T, H)."""
        lstm = self.lstm
        weights = [getattr(lstm, f"{name}_l0{suffix}") for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
        zeros = x.new_zeros(1, x.size(0), lstm.hidden_size)  # (1, B, H)
        output, _, _ = torch.lstm(x, (zeros, zeros), weights, True, 1, 0.0, self.training, False, True)
        return output  # (B, T, H)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """Returns: (B, T, 2H), zero at padding (and for all-pad rows)."""
        mask = mask.bool()
        lengths = mask.sum(dim=1)  # (B,)
        if mask.device.type == "cpu":  # elsewhere this check would cost a host sync every step
            positions = torch.arange(mask.size(1))  # (T,)
            if not torch.equal(mask, positions.unsqueeze(0) < lengths.unsqueeze(1)):
                raise ValueError("masks must have the real tokens first (right padding only)")
        forward = self.direction(x, "")  # (B, T, H)
        backward = reverse_within_length(self.direction(reverse_within_length(x, lengths), "_reverse"), lengths)
        return _zero_padding(torch.cat([forward, backward], dim=-1), mask)  # (B, T, 2H)


class PairHead(nn.Module):
    """The protocol of every pair head: ``forward(a, mask_a, b, mask_b) -> (B, C)`` outputs."""

    def forward(self, a: Tensor, mask_a: Tensor, b: Tensor, mask_b: Tensor) -> Tensor:
        """Args: a (B, Ta, D), mask_a (B, Ta) bool, b (B, Tb, D), mask_b (B, Tb) bool.

        Returns:
            (B, C) outputs, C = ``outputs``: class logits (MRPC's index 1 = paraphrase), or (B, 1)
            for a graded score.
        """
        raise NotImplementedError


class PoolMLPHead(PairHead):
    """Masked [mean; max] pooling per sentence, [u; v; |u-v|; u*v], MLP (tanh)."""

    def __init__(self, input_dim: int, hidden_size: int = 256, dropout: float = 0.2, outputs: int = 2) -> None:
        super().__init__()
        self.classifier = _mlp(8 * input_dim, hidden_size, dropout, nn.Tanh(), outputs)

    def encode(self, x: Tensor, mask: Tensor) -> Tensor:
        """(B, T, D) -> (B, 2D)."""
        return torch.cat([masked_mean(x, mask), masked_max(x, mask)], dim=-1)  # (B, 2D)

    def forward(self, a: Tensor, mask_a: Tensor, b: Tensor, mask_b: Tensor) -> Tensor:
        u, v = self.encode(a, mask_a), self.encode(b, mask_b)  # (B, 2D) each
        return self.classifier(pair_features(u, v))  # (B, 8D) -> (B, C)


class BiLSTMHead(PairHead):
    """Shared BiLSTM over each sentence, masked max pooling, [u; v; |u-v|; u*v], MLP (tanh)."""

    def __init__(self, input_dim: int, hidden_size: int = 256, dropout: float = 0.2, outputs: int = 2) -> None:
        super().__init__()
        self.encoder = MaskedBiLSTM(input_dim, hidden_size)
        self.classifier = _mlp(8 * hidden_size, hidden_size, dropout, nn.Tanh(), outputs)

    def encode(self, x: Tensor, mask: Tensor) -> Tensor:
        """(B, T, D) -> (B, 2H)."""
        return masked_max(self.encoder(_zero_padding(x, mask), mask), mask)  # (B, 2H)

    def forward(self, a: Tensor, mask_a: Tensor, b: Tensor, mask_b: Tensor) -> Tensor:
        rows, mask = both_sentences(a, mask_a, b, mask_b)  # (2B, T, D), (2B, T): one BiLSTM pass
        u, v = self.encode(rows, mask).chunk(2)  # (B, 2H) each
        return self.classifier(pair_features(u, v))  # (B, 8H) -> (B, C)


class DenseHead(PairHead):
    """TF-Hub ELMo style: masked mean vector per sentence, [u; v; |u-v|; u*v], Dense(ReLU), C."""

    def __init__(self, input_dim: int, hidden_size: int = 256, dropout: float = 0.2, outputs: int = 2) -> None:
        super().__init__()
        self.classifier = _mlp(4 * input_dim, hidden_size, dropout, nn.ReLU(), outputs)

    def forward(self, a: Tensor, mask_a: Tensor, b: Tensor, mask_b: Tensor) -> Tensor:
        u, v = masked_mean(a, mask_a), masked_mean(b, mask_b)  # (B, D) each
        return self.classifier(pair_features(u, v))  # (B, 4D) -> (B, C)


class LinearHead(PairHead):
    """The linear probe's form as a head: masked mean vector per sentence, [u; v; |u-v|; u*v],
    dropout, one linear layer (no hidden layer; ``hidden_size`` unused)."""

    def __init__(self, input_dim: int, hidden_size: int = 256, dropout: float = 0.2, outputs: int = 2) -> None:
        super().__init__()
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(4 * input_dim, outputs))

    def forward(self, a: Tensor, mask_a: Tensor, b: Tensor, mask_b: Tensor) -> Tensor:
        u, v = masked_mean(a, mask_a), masked_mean(b, mask_b)  # (B, D) each
        return self.classifier(pair_features(u, v))  # (B, 4D) -> (B, C)


def attend(scores: Tensor, keys: Tensor, key_mask: Tensor) -> Tensor:
    """Softmax of (B, Tq, Tk) ``scores`` over the real keys, applied to (B, Tk, H) ``keys``
    (padding zero); a row without real keys gives zeros. Returns (B, Tq, H)."""
    key_mask = key_mask.bool()
    scores = scores.masked_fill(~key_mask.unsqueeze(1), float("-inf"))  # padded keys: -inf
    has_key = key_mask.any(dim=1).view(-1, 1, 1)  # (B, 1, 1)
    scores = scores.masked_fill(~has_key, 0.0)  # all-pad rows: finite, weights zeroed next
    weights = torch.softmax(scores, dim=-1)  # (B, Tq, Tk)
    weights = weights * key_mask.unsqueeze(1).to(weights.dtype)  # (B, Tq, Tk), 0 at padded keys
    return torch.bmm(weights, keys)  # (B, Tq, H)


class AttentionHead(PairHead):
    """ESIM-style head over frozen contextual features.

    ESIM's first BiLSTM is replaced by a linear projection D -> H (the features are already
    contextual). Then: masked cross-attention both ways, compose [x; x~; x - x~; x * x~] ->
    Linear + ReLU, a shared BiLSTM, masked mean and max of both sentences, MLP (tanh).

    Both sentences of a batch go through the projection, the composition and the BiLSTM as one
    batch of 2B rows, and one score matrix serves both attention directions (its transpose is
    the other way), with no packing and no host synchronisation; the logits equal those of the
    sentence-by-sentence, packed implementation (kept as the reference in the tests), and in
    training the composition's dropout draws the same masks in the same order (a's, then b's),
    so a seeded run takes the same steps up to float rounding.
    """

    def __init__(self, input_dim: int, hidden_size: int = 256, dropout: float = 0.2, outputs: int = 2) -> None:
        super().__init__()
        self.projection = nn.Linear(input_dim, hidden_size)
        self.compose = nn.Sequential(nn.Linear(4 * hidden_size, hidden_size), nn.ReLU(), nn.Dropout(dropout))
        self.composer = MaskedBiLSTM(hidden_size, hidden_size)
        self.classifier = nn.Sequential(
            nn.Dropout(dropout), *_mlp(8 * hidden_size, hidden_size, dropout, nn.Tanh(), outputs)
        )

    def forward(self, a: Tensor, mask_a: Tensor, b: Tensor, mask_b: Tensor) -> Tensor:
        batch = a.size(0)
        rows, mask = both_sentences(a, mask_a, b, mask_b)  # (2B, T, D), (2B, T): a's rows, then b's
        x = _zero_padding(self.projection(_zero_padding(rows, mask)), mask)  # (2B, T, H)
        x_a, x_b = x[:batch], x[batch:]  # (B, T, H) each
        mask_a, mask_b = mask[:batch], mask[batch:]  # (B, T) each
        scores = torch.bmm(x_a, x_b.transpose(1, 2))  # (B, T, T): a token i · b token j
        aligned = torch.cat(
            [
                attend(scores, x_b, mask_b),  # (B, T, H): b summarised for each a token
                attend(scores.transpose(1, 2), x_a, mask_a),
            ]
        )  # and a for each b token: (2B, T, H)
        enhanced = torch.cat([x, aligned, x - aligned, x * aligned], dim=-1)  # (2B, T, 4H)
        linear, relu, dropout = self.compose
        projected = relu(linear(enhanced))  # (2B, T, H)
        if dropout.training and dropout.p > 0:  # a's masks, then b's, as one sentence at a time draws them
            steps = projected.size(1)
            projected = torch.cat(
                [
                    pad_steps(dropout(projected[:batch, : a.size(1)]), steps),
                    pad_steps(dropout(projected[batch:, : b.size(1)]), steps),
                ]
            )  # (2B, T, H)
        composed = self.composer(projected, mask)  # (2B, T, H) -> (2B, T, 2H)
        pooled = torch.cat([masked_mean(composed, mask), masked_max(composed, mask)], dim=-1)  # (2B, 4H)
        pooled_a, pooled_b = pooled.chunk(2)  # (B, 4H) each
        return self.classifier(torch.cat([pooled_a, pooled_b], dim=-1))  # (B, 8H) -> (B, C)


def _feed_forward(input_dim: int, hidden_size: int, dropout: float) -> nn.Sequential:
    """Two ReLU layers, each followed by dropout: the paper's F and G (and the first half of H)."""
    return nn.Sequential(
        nn.Linear(input_dim, hidden_size),
        nn.ReLU(),
        nn.Dropout(dropout),
        nn.Linear(hidden_size, hidden_size),
        nn.ReLU(),
        nn.Dropout(dropout),
    )


class DecomposableAttentionHead(PairHead):
    """Decomposable attention (Parikh et al., 2016), feed-forward only, over the mixed features.

    The tokens are projected D -> H (the paper projects its embeddings), then, with the paper's
    three networks (``attend_network`` F, ``compare_network`` G, ``aggregate_network`` its H):
    attend, e_ij = F(a_i) · F(b_j), β_i = Σ_j softmax_j(e_ij) b_j, α_j = Σ_i softmax_i(e_ij) a_i;
    compare, v1_i = G([a_i; β_i]), v2_j = G([b_j; α_j]); aggregate, v1 = Σ_i v1_i and v2 = Σ_j v2_j
    over the real tokens, logits = H([v1; v2]). F and G are two ReLU layers with dropout, H one such
    layer and a linear output (the paper's SNLI model, 200 wide there). The paper's optional
    intra-sentence attention is left out: the features are already contextual.

    No recurrence: a step is a few matrix products per token, of the order of the pool-mlp head's
    cost, and the parameters are D·H + 7H² + H·C (no D² term), so ``hidden_size`` alone sizes it
    for the labels at hand. Both sentences of a batch go through the projection, F and G as one
    batch of 2B rows.
    """

    def __init__(self, input_dim: int, hidden_size: int = 256, dropout: float = 0.2, outputs: int = 2) -> None:
        super().__init__()
        self.projection = nn.Linear(input_dim, hidden_size)
        self.attend_network = _feed_forward(hidden_size, hidden_size, dropout)  # F
        self.compare_network = _feed_forward(2 * hidden_size, hidden_size, dropout)  # G
        self.aggregate_network = nn.Sequential(
            *_feed_forward(2 * hidden_size, hidden_size, dropout)[:3], nn.Linear(hidden_size, outputs)
        )  # H

    def forward(self, a: Tensor, mask_a: Tensor, b: Tensor, mask_b: Tensor) -> Tensor:
        batch = a.size(0)
        rows, mask = both_sentences(a, mask_a, b, mask_b)  # (2B, T, D), (2B, T): a's rows, then b's
        x = _zero_padding(self.projection(_zero_padding(rows, mask)), mask)  # (2B, T, H)
        attended = self.attend_network(x)  # (2B, T, H): F of every token
        scores = torch.bmm(attended[:batch], attended[batch:].transpose(1, 2))  # (B, T, T): e_ij, a_i · b_j
        x_a, x_b = x[:batch], x[batch:]  # (B, T, H) each, zero at padding
        mask_a, mask_b = mask[:batch], mask[batch:]  # (B, T) each
        aligned = torch.cat(
            [
                attend(scores, x_b, mask_b),  # (B, T, H): β, b summarised for each a token
                attend(scores.transpose(1, 2), x_a, mask_a),
            ]
        )  # α for each b token: (2B, T, H)
        compared = self.compare_network(torch.cat([x, aligned], dim=-1))  # (2B, T, 2H) -> (2B, T, H)
        summed = _zero_padding(compared, mask).sum(dim=1)  # (2B, H): Σ over the real tokens
        v1, v2 = summed.chunk(2)  # (B, H) each
        return self.aggregate_network(torch.cat([v1, v2], dim=-1))  # (B, 2H) -> (B, C)


def masked_last(x: Tensor, mask: Tensor) -> Tensor:
    """The features at each row's last real token: (B, T, D), (B, T) -> (B, D); all-pad rows -> 0."""
    lengths = mask.bool().sum(dim=1)  # (B,)
    index = (lengths - 1).clamp(min=0).view(-1, 1, 1).expand(-1, 1, x.size(-1))  # (B, 1, D)
    last = x.gather(1, index).squeeze(1)  # (B, D)
    return torch.where((lengths > 0).unsqueeze(-1), last, torch.zeros_like(last))  # (B, D)


class ConcatPoolHead(PairHead):
    """ULMFiT's classifier for a pair: concat pooling [last; max; mean] of each sentence's features,
    [u; v; |u-v|; u*v], then BatchNorm -> Dropout -> Linear -> ReLU -> BatchNorm -> Dropout -> Linear.
    fastai's text classifier uses a 50-unit hidden block and dropouts 0.4 then 0.1."""

    def __init__(self, input_dim: int, hidden_size: int = 50, dropout: float = 0.4, outputs: int = 2) -> None:
        super().__init__()
        features = 12 * input_dim  # [u; v; |u-v|; u*v] of 3D-wide pooled vectors
        self.classifier = nn.Sequential(
            nn.BatchNorm1d(features),
            nn.Dropout(dropout),
            nn.Linear(features, hidden_size),
            nn.ReLU(),
            nn.BatchNorm1d(hidden_size),
            nn.Dropout(0.1),
            nn.Linear(hidden_size, outputs),
        )

    def encode(self, x: Tensor, mask: Tensor) -> Tensor:
        """(B, T, D) -> (B, 3D)."""
        x = _zero_padding(x, mask)
        return torch.cat([masked_last(x, mask), masked_max(x, mask), masked_mean(x, mask)], dim=-1)  # (B, 3D)

    def forward(self, a: Tensor, mask_a: Tensor, b: Tensor, mask_b: Tensor) -> Tensor:
        u, v = self.encode(a, mask_a), self.encode(b, mask_b)  # (B, 3D) each
        return self.classifier(pair_features(u, v))  # (B, 12D) -> (B, C)


HEADS: dict[str, type[PairHead]] = {
    "pool-mlp": PoolMLPHead,
    "bilstm": BiLSTMHead,
    "dense": DenseHead,
    "linear": LinearHead,
    "attn": AttentionHead,
    "decomp": DecomposableAttentionHead,
    "concat-pool": ConcatPoolHead,
}


def build_head(name: str, input_dim: int, hidden_size: int = 256, dropout: float = 0.2, outputs: int = 2) -> PairHead:
    """The pair head called ``name`` (a key of ``HEADS``) for D = ``input_dim`` features.

    Returns:
        a ``PairHead``: ``forward(a, mask_a, b, mask_b) -> (B, outputs)``.

    Raises:
        ValueError: ``head=<name>: ...`` naming the choices, for an unknown name.
    """
    if name not in HEADS:
        shown = name if isinstance(name, str) and name.isprintable() else repr(name)
        raise ValueError(f"head={shown}: unknown head; choose one of {', '.join(HEADS)}")
    return HEADS[name](input_dim, hidden_size=hidden_size, dropout=dropout, outputs=outputs)
