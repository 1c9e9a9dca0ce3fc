"""Pair heads: two sentences' mixed token features -> one logit per class (MRPC: not paraphrase,
paraphrase; any ``num_classes`` >= 2).

Every head takes ``a`` (B, Ta, D) with ``mask_a`` (B, Ta) and ``b`` (B, Tb, D) with ``mask_b``
(B, Tb); masks are bool, True at real tokens, real tokens first. Values at padding never
matter (they are zeroed on entry), an all-pad sentence gives finite logits, and every pooling,
recurrence and attention is masked, so logits do not change with the padding a batch adds.

- ``pool-mlp``  masked [mean; max] per sentence -> [u; v; |u-v|; u*v] -> MLP (jiant's MRPC head).
- ``bilstm``    shared BiLSTM per sentence -> masked max -> [u; v; |u-v|; u*v] -> MLP (GLUE).
- ``dense``     masked mean per sentence -> [u; v; |u-v|; u*v] -> Dense(ReLU) -> 2 (TF-Hub style).
- ``attn``      ESIM: project, masked cross-attention, compose, BiLSTM, mean+max pool, MLP.
- ``concat-pool`` ULMFiT: [last; max; mean] per sentence -> [u; v; |u-v|; u*v] -> BatchNorm /
                dropout / linear blocks (Howard & Ruder 2018's classifier, for a pair).

Shape legend: B batch, T tokens, D input features per token, H ``hidden_size``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


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


def _mlp(input_dim: int, hidden_size: int, dropout: float, activation: nn.Module, num_classes: int) -> nn.Sequential:
    """Linear -> activation -> Dropout -> Linear(num_classes)."""
    return nn.Sequential(
        nn.Linear(input_dim, hidden_size),
        activation,
        nn.Dropout(dropout),
        nn.Linear(hidden_size, num_classes),
    )


class MaskedBiLSTM(nn.Module):
    """One-layer BiLSTM that reads only the real tokens (packed): (B, T, D) -> (B, T, 2H)."""

    def __init__(self, input_dim: int, hidden_size: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(input_dim, hidden_size, batch_first=True, bidirectional=True)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """Returns: (B, T, 2H), zero at padding (and for all-pad rows)."""
        mask = mask.bool()
        lengths = mask.sum(dim=1)  # (B,)
        positions = torch.arange(mask.size(1), device=mask.device)  # (T,)
        if not torch.equal(mask, positions.unsqueeze(0) < lengths.unsqueeze(1)):
            raise ValueError("masks must have the real tokens first (right padding only)")
        # pack_padded_sequence refuses length 0: read one (zeroed) step, masked out below.
        packed = pack_padded_sequence(
            x, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False
        )
        output, _ = self.lstm(packed)
        output, _ = pad_packed_sequence(
            output, batch_first=True, total_length=x.size(1)
        )  # (B, T, 2H)
        return _zero_padding(output, mask)  # (B, T, 2H)


class PairHead(nn.Module):
    """The protocol of every pair head: ``forward(a, mask_a, b, mask_b) -> (B, C) logits``."""

    def forward(self, a: Tensor, mask_a: Tensor, b: Tensor, mask_b: Tensor) -> Tensor:
        """Args: a (B, Ta, D), mask_a (B, Ta) bool, b (B, Tb, D), mask_b (B, Tb) bool.

        Returns:
            (B, C) logits, C = num_classes; MRPC's index 1 = paraphrase.
        """
        raise NotImplementedError


class PoolMLPHead(PairHead):
    """Masked [mean; max] pooling per sentence, [u; v; |u-v|; u*v], MLP (tanh)."""

    def __init__(self, input_dim: int, hidden_size: int = 256, dropout: float = 0.2, num_classes: int = 2) -> None:
        super().__init__()
        self.classifier = _mlp(8 * input_dim, hidden_size, dropout, nn.Tanh(), num_classes)

    def encode(self, x: Tensor, mask: Tensor) -> Tensor:
        """(B, T, D) -> (B, 2D)."""
        return torch.cat([masked_mean(x, mask), masked_max(x, mask)], dim=-1)  # (B, 2D)

    def forward(self, a: Tensor, mask_a: Tensor, b: Tensor, mask_b: Tensor) -> Tensor:
        u, v = self.encode(a, mask_a), self.encode(b, mask_b)  # (B, 2D) each
        return self.classifier(pair_features(u, v))  # (B, 8D) -> (B, C)


class BiLSTMHead(PairHead):
    """Shared BiLSTM over each sentence, masked max pooling, [u; v; |u-v|; u*v], MLP (tanh)."""

    def __init__(self, input_dim: int, hidden_size: int = 256, dropout: float = 0.2, num_classes: int = 2) -> None:
        super().__init__()
        self.encoder = MaskedBiLSTM(input_dim, hidden_size)
        self.classifier = _mlp(8 * hidden_size, hidden_size, dropout, nn.Tanh(), num_classes)

    def encode(self, x: Tensor, mask: Tensor) -> Tensor:
        """(B, T, D) -> (B, 2H)."""
        return masked_max(self.encoder(_zero_padding(x, mask), mask), mask)  # (B, 2H)

    def forward(self, a: Tensor, mask_a: Tensor, b: Tensor, mask_b: Tensor) -> Tensor:
        u, v = self.encode(a, mask_a), self.encode(b, mask_b)  # (B, 2H) each
        return self.classifier(pair_features(u, v))  # (B, 8H) -> (B, C)


class DenseHead(PairHead):
    """TF-Hub ELMo style: masked mean vector per sentence, [u; v; |u-v|; u*v], Dense(ReLU), C."""

    def __init__(self, input_dim: int, hidden_size: int = 256, dropout: float = 0.2, num_classes: int = 2) -> None:
        super().__init__()
        self.classifier = _mlp(4 * input_dim, hidden_size, dropout, nn.ReLU(), num_classes)

    def forward(self, a: Tensor, mask_a: Tensor, b: Tensor, mask_b: Tensor) -> Tensor:
        u, v = masked_mean(a, mask_a), masked_mean(b, mask_b)  # (B, D) each
        return self.classifier(pair_features(u, v))  # (B, 4D) -> (B, C)


def masked_attention(query: Tensor, keys: Tensor, key_mask: Tensor) -> Tensor:
    """Attend from each query token over the real key tokens (dot-product scores).

    Args:
        query: (B, Tq, H); keys: (B, Tk, H) with padding already zero; key_mask: (B, Tk) bool.

    Returns:
        (B, Tq, H) attention-weighted keys; zero where the row has no real key.
    """
    key_mask = key_mask.bool()
    scores = torch.bmm(query, keys.transpose(1, 2))  # (B, Tq, Tk)
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
    Linear + ReLU, a shared BiLSTM (packed), masked mean and max of both sentences, MLP (tanh).
    """

    def __init__(self, input_dim: int, hidden_size: int = 256, dropout: float = 0.2, num_classes: int = 2) -> None:
        super().__init__()
        self.projection = nn.Linear(input_dim, hidden_size)
        self.compose = nn.Sequential(
            nn.Linear(4 * hidden_size, hidden_size), nn.ReLU(), nn.Dropout(dropout)
        )
        self.composer = MaskedBiLSTM(hidden_size, hidden_size)
        self.classifier = nn.Sequential(
            nn.Dropout(dropout), *_mlp(8 * hidden_size, hidden_size, dropout, nn.Tanh(), num_classes)
        )

    def _infer(self, x: Tensor, aligned: Tensor, mask: Tensor) -> Tensor:
        """(B, T, H), (B, T, H) -> (B, 4H) pooled composition of one sentence."""
        enhanced = torch.cat([x, aligned, x - aligned, x * aligned], dim=-1)  # (B, T, 4H)
        composed = self.composer(self.compose(enhanced), mask)  # (B, T, H) -> (B, T, 2H)
        pooled = [masked_mean(composed, mask), masked_max(composed, mask)]  # 2 x (B, 2H)
        return torch.cat(pooled, dim=-1)  # (B, 4H)

    def forward(self, a: Tensor, mask_a: Tensor, b: Tensor, mask_b: Tensor) -> Tensor:
        a = _zero_padding(self.projection(_zero_padding(a, mask_a)), mask_a)  # (B, Ta, H)
        b = _zero_padding(self.projection(_zero_padding(b, mask_b)), mask_b)  # (B, Tb, H)
        a_aligned = masked_attention(a, b, mask_b)  # (B, Ta, H): b summarised for each a token
        b_aligned = masked_attention(b, a, mask_a)  # (B, Tb, H): a summarised for each b token
        pooled_a = self._infer(a, a_aligned, mask_a)  # (B, 4H)
        pooled_b = self._infer(b, b_aligned, mask_b)  # (B, 4H)
        return self.classifier(torch.cat([pooled_a, pooled_b], dim=-1))  # (B, 8H) -> (B, C)


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

    def __init__(self, input_dim: int, hidden_size: int = 50, dropout: float = 0.4, num_classes: int = 2) -> None:
        super().__init__()
        features = 12 * input_dim  # [u; v; |u-v|; u*v] of 3D-wide pooled vectors
        self.classifier = nn.Sequential(
            nn.BatchNorm1d(features), nn.Dropout(dropout), nn.Linear(features, hidden_size), nn.ReLU(),
            nn.BatchNorm1d(hidden_size), nn.Dropout(0.1), nn.Linear(hidden_size, num_classes),
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
    "attn": AttentionHead,
    "concat-pool": ConcatPoolHead,
}


def build_head(name: str, input_dim: int, hidden_size: int = 256, dropout: float = 0.2,
               num_classes: int = 2) -> PairHead:
    """The pair head called ``name`` (a key of ``HEADS``) for D = ``input_dim`` features.

    Returns:
        a ``PairHead``: ``forward(a, mask_a, b, mask_b) -> (B, num_classes)``.

    Raises:
        ValueError: ``head=<name>: ...`` naming the choices, for an unknown name.
    """
    if name not in HEADS:
        shown = name if isinstance(name, str) and name.isprintable() else repr(name)
        raise ValueError(f"head={shown}: unknown head; choose one of {', '.join(HEADS)}")
    return HEADS[name](input_dim, hidden_size=hidden_size, dropout=dropout, num_classes=num_classes)
