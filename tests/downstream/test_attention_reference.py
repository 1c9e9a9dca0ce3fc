"""The batched ``attn`` and ``bilstm`` heads against the implementation they replaced (kept
here as the reference): each sentence through its own projection, attention, composition and
packed BiLSTM. Same weights → the same logits and the same gradients, at float tolerance."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from downstream.model.heads import AttentionHead, BiLSTMHead, masked_max, masked_mean, pair_features


def _zero_padding(x: Tensor, mask: Tensor) -> Tensor:
    return x.masked_fill(~mask.bool().unsqueeze(-1), 0.0)


class PackedBiLSTM(nn.Module):
    """The reference: a packed BiLSTM over each row's real tokens."""

    def __init__(self, input_dim: int, hidden_size: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(input_dim, hidden_size, batch_first=True, bidirectional=True)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        lengths = mask.bool().sum(dim=1)
        packed = pack_padded_sequence(x, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False)
        output, _ = self.lstm(packed)
        output, _ = pad_packed_sequence(output, batch_first=True, total_length=x.size(1))
        return _zero_padding(output, mask)


def reference_attention(query: Tensor, keys: Tensor, key_mask: Tensor) -> Tensor:
    key_mask = key_mask.bool()
    scores = torch.bmm(query, keys.transpose(1, 2)).masked_fill(~key_mask.unsqueeze(1), float("-inf"))
    scores = scores.masked_fill(~key_mask.any(dim=1).view(-1, 1, 1), 0.0)
    weights = torch.softmax(scores, dim=-1) * key_mask.unsqueeze(1).to(scores.dtype)
    return torch.bmm(weights, keys)


class ReferenceAttentionHead(nn.Module):
    """The ``attn`` head as it was: one sentence at a time, packed BiLSTM (same parameter names)."""

    def __init__(self, input_dim: int, hidden_size: int, dropout: float, num_classes: int = 2) -> None:
        super().__init__()
        self.projection = nn.Linear(input_dim, hidden_size)
        self.compose = nn.Sequential(nn.Linear(4 * hidden_size, hidden_size), nn.ReLU(), nn.Dropout(dropout))
        self.composer = PackedBiLSTM(hidden_size, hidden_size)
        self.classifier = nn.Sequential(
            nn.Dropout(dropout),
            nn.Linear(8 * hidden_size, hidden_size),
            nn.Tanh(),
            nn.Dropout(dropout),
            nn.Linear(hidden_size, num_classes),
        )

    def _infer(self, x: Tensor, aligned: Tensor, mask: Tensor) -> Tensor:
        enhanced = torch.cat([x, aligned, x - aligned, x * aligned], dim=-1)
        composed = self.composer(self.compose(enhanced), mask)
        return torch.cat([masked_mean(composed, mask), masked_max(composed, mask)], dim=-1)

    def forward(self, a: Tensor, mask_a: Tensor, b: Tensor, mask_b: Tensor) -> Tensor:
        a = _zero_padding(self.projection(_zero_padding(a, mask_a)), mask_a)
        b = _zero_padding(self.projection(_zero_padding(b, mask_b)), mask_b)
        pooled_a = self._infer(a, reference_attention(a, b, mask_b), mask_a)
        pooled_b = self._infer(b, reference_attention(b, a, mask_a), mask_b)
        return self.classifier(torch.cat([pooled_a, pooled_b], dim=-1))


class ReferenceBiLSTMHead(nn.Module):
    def __init__(self, input_dim: int, hidden_size: int, dropout: float, num_classes: int = 2) -> None:
        super().__init__()
        self.encoder = PackedBiLSTM(input_dim, hidden_size)
        self.classifier = nn.Sequential(
            nn.Linear(8 * hidden_size, hidden_size), nn.Tanh(), nn.Dropout(dropout), nn.Linear(hidden_size, num_classes)
        )

    def forward(self, a: Tensor, mask_a: Tensor, b: Tensor, mask_b: Tensor) -> Tensor:
        u = masked_max(self.encoder(_zero_padding(a, mask_a), mask_a), mask_a)
        v = masked_max(self.encoder(_zero_padding(b, mask_b), mask_b), mask_b)
        return self.classifier(pair_features(u, v))


PAIRS = {"attn": (AttentionHead, ReferenceAttentionHead), "bilstm": (BiLSTMHead, ReferenceBiLSTMHead)}


def batch(seed: int, size: int = 7, dim: int = 12, longest_a: int = 9, longest_b: int = 6):
    """Random right-padded pairs of unequal lengths (one all-pad sentence, one of length 1),
    garbage in the padding."""
    generator = torch.Generator().manual_seed(seed)
    lengths_a = torch.randint(1, longest_a + 1, (size,), generator=generator)
    lengths_b = torch.randint(1, longest_b + 1, (size,), generator=generator)
    lengths_a[0], lengths_b[1], lengths_a[2] = longest_a, 0, 1
    mask_a = torch.arange(longest_a)[None] < lengths_a[:, None]
    mask_b = torch.arange(longest_b)[None] < lengths_b[:, None]
    a = torch.randn(size, longest_a, dim, generator=generator)
    b = torch.randn(size, longest_b, dim, generator=generator)
    a[~mask_a] = 1e4  # values at padding never matter
    b[~mask_b] = float("nan")
    return a, mask_a, b, mask_b


def twins(name: str, dropout: float = 0.2, dim: int = 12, hidden: int = 10):
    fast, reference = PAIRS[name]
    torch.manual_seed(0)
    new = fast(dim, hidden_size=hidden, dropout=dropout)
    old = reference(dim, hidden_size=hidden, dropout=dropout)
    missing = old.load_state_dict(new.state_dict())  # same parameter names and shapes
    assert not missing.missing_keys and not missing.unexpected_keys
    return new, old


@pytest.mark.parametrize("name", PAIRS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_same_weights_give_the_same_logits(name, seed):
    new, old = twins(name)
    inputs = batch(seed)
    with torch.no_grad():
        expected = old.eval()(*inputs)
        torch.testing.assert_close(new.eval()(*inputs), expected, atol=1e-5, rtol=1e-5)
    a, mask_a, b, mask_b = inputs  # swapped sentences: Tb > Ta
    with torch.no_grad():
        torch.testing.assert_close(new(b, mask_b, a, mask_a), old(b, mask_b, a, mask_a), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", PAIRS)
def test_same_weights_give_the_same_gradients(name):
    new, old = twins(name, dropout=0.0)  # train mode without dropout: the same function
    inputs = batch(3)
    labels = torch.tensor([0, 1, 1, 0, 1, 0, 1])
    for head in (new, old):
        torch.nn.functional.cross_entropy(head.train()(*inputs), labels).backward()
    old_grads = dict(old.named_parameters())
    for parameter_name, parameter in new.named_parameters():
        torch.testing.assert_close(
            parameter.grad, old_grads[parameter_name].grad, atol=1e-5, rtol=1e-4, msg=parameter_name
        )


@pytest.mark.parametrize("name", PAIRS)
def test_training_draws_the_same_dropout_masks(name):
    """Seeded, the batched head and the reference drop the same units: the same training logits
    and gradients, so a seeded run takes the same steps up to float rounding."""
    new, old = twins(name, dropout=0.3)
    inputs = batch(6)
    outputs = []
    for head in (new, old):
        torch.manual_seed(11)
        logits = head.train()(*inputs)
        logits.sum().backward()
        outputs.append((logits, {name: p.grad for name, p in head.named_parameters()}))
    torch.testing.assert_close(outputs[0][0], outputs[1][0], atol=1e-5, rtol=1e-5)
    for parameter_name, grad in outputs[0][1].items():
        torch.testing.assert_close(grad, outputs[1][1][parameter_name], atol=1e-5, rtol=1e-4, msg=parameter_name)
    torch.manual_seed(12)
    assert not torch.allclose(new(*inputs), outputs[0][0])  # dropout is on: another seed, other logits


@pytest.mark.parametrize("name", PAIRS)
def test_the_mixed_features_get_the_same_gradient(name):
    new, old = twins(name, dropout=0.0)
    a, mask_a, b, mask_b = batch(4)
    a[~mask_a], b[~mask_b] = 0.0, 0.0  # finite padding, so that gradients there are comparable (zero)
    grads = []
    for head in (new, old):
        inputs = [a.clone().requires_grad_(True), mask_a, b.clone().requires_grad_(True), mask_b]
        head.train()(*inputs).sum().backward()
        grads.append((inputs[0].grad, inputs[2].grad))
    torch.testing.assert_close(grads[0], grads[1], atol=1e-5, rtol=1e-4)


def more_padding(x: Tensor, mask: Tensor, steps: int) -> tuple[Tensor, Tensor]:
    """``steps`` more padding columns, holding 7.0 (the values at padding never matter)."""
    padding = torch.full((x.size(0), steps, x.size(2)), 7.0)
    return torch.cat([x, padding], dim=1), torch.cat([mask, torch.zeros(mask.size(0), steps, dtype=torch.bool)], 1)


@pytest.mark.parametrize("name", PAIRS)
def test_padding_invariance_of_the_batched_head(name):
    new, _ = twins(name)
    a, mask_a, b, mask_b = batch(5)
    with torch.no_grad():
        expected = new.eval()(a, mask_a, b, mask_b)
        padded = new(*more_padding(a, mask_a, 4), *more_padding(b, mask_b, 11))
        alone = new(a[3:4], mask_a[3:4], b[3:4], mask_b[3:4])  # one pair, in a batch of its own
    torch.testing.assert_close(padded, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(alone, expected[3:4], atol=1e-5, rtol=1e-5)
