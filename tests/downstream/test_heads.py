"""Pair heads: shapes, gradients, padding invariance, masked pooling, and a tiny overfit."""

import pytest
import torch

from downstream.model.heads import HEADS, PairHead, build_head, masked_max, masked_mean

D = 8
LENGTHS_A = [5, 2, 3]
LENGTHS_B = [4, 4, 1]


def lengths_to_mask(lengths: list[int], total: int) -> torch.Tensor:
    return torch.arange(total).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)  # (B, T)


def make_pair(seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    a = torch.randn(len(LENGTHS_A), max(LENGTHS_A), D, generator=generator)  # (B, Ta, D)
    b = torch.randn(len(LENGTHS_B), max(LENGTHS_B), D, generator=generator)  # (B, Tb, D)
    mask_a = lengths_to_mask(LENGTHS_A, a.size(1))
    mask_b = lengths_to_mask(LENGTHS_B, b.size(1))
    return a, mask_a, b, mask_b


def with_garbage_padding(x: torch.Tensor, mask: torch.Tensor, extra: int):
    """Overwrite padding with large values and NaN, and add ``extra`` padding columns."""
    x = torch.cat([x, torch.zeros(x.size(0), extra, x.size(2))], dim=1)  # (B, T + extra, D)
    mask = torch.cat([mask, torch.zeros(mask.size(0), extra, dtype=torch.bool)], dim=1)
    x = x.masked_scatter(~mask.unsqueeze(-1), 1e3 * torch.randn(x.shape))
    x[~mask] = x[~mask].clone().index_fill_(-1, torch.tensor([0]), float("nan"))
    return x, mask


def make_head(name: str, seed: int = 0) -> PairHead:
    torch.manual_seed(seed)
    return build_head(name, D, hidden_size=6, dropout=0.2)


@pytest.mark.parametrize("name", HEADS)
def test_forward_backward_gives_finite_grads(name):
    head = make_head(name).train()
    assert isinstance(head, PairHead)
    logits = head(*make_pair())
    assert logits.shape == (3, 2)
    assert torch.isfinite(logits).all()
    torch.nn.functional.cross_entropy(logits, torch.tensor([0, 1, 1])).backward()
    total = 0.0
    for parameter_name, parameter in head.named_parameters():
        assert parameter.grad is not None, parameter_name
        assert torch.isfinite(parameter.grad).all(), parameter_name
        total += parameter.grad.abs().sum().item()
    assert total > 0


@pytest.mark.parametrize("name", HEADS)
def test_logits_ignore_padding_values_and_extra_padding(name):
    head = make_head(name).eval()
    a, mask_a, b, mask_b = make_pair(1)
    expected = head(a, mask_a, b, mask_b)
    a2, mask_a2 = with_garbage_padding(a, mask_a, extra=3)
    b2, mask_b2 = with_garbage_padding(b, mask_b, extra=2)
    torch.testing.assert_close(head(a2, mask_a2, b2, mask_b2), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", HEADS)
def test_logits_do_not_depend_on_the_batch(name):
    head = make_head(name).eval()
    a, mask_a, b, mask_b = make_pair(2)
    together = head(a, mask_a, b, mask_b)
    alone = head(a[1:2, :2], mask_a[1:2, :2], b[1:2], mask_b[1:2])  # example 1, no extra padding
    torch.testing.assert_close(alone, together[1:2], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", HEADS)
def test_an_all_padding_sentence_gives_finite_logits_and_grads(name):
    head = make_head(name).train()
    a, mask_a, b, mask_b = make_pair(3)
    mask_b[1] = False
    logits = head(a, mask_a, b, mask_b)
    assert torch.isfinite(logits).all()
    logits.sum().backward()
    for parameter in head.parameters():
        assert torch.isfinite(parameter.grad).all()


def test_masked_mean_and_max_ignore_padding():
    x = torch.tensor(
        [[[1.0, -2.0], [3.0, 4.0], [100.0, 100.0]], [[-5.0, 6.0], [float("nan"), float("inf")], [-100.0, 100.0]]]
    )  # (2, 3, 2)
    mask = torch.tensor([[True, True, False], [True, False, False]])
    torch.testing.assert_close(masked_mean(x, mask), torch.tensor([[2.0, 1.0], [-5.0, 6.0]]))
    torch.testing.assert_close(masked_max(x, mask), torch.tensor([[3.0, 4.0], [-5.0, 6.0]]))


def test_masked_pooling_of_an_all_padding_row_is_zero_with_finite_grads():
    x = torch.randn(2, 3, 4, requires_grad=True)
    mask = torch.tensor([[True, False, False], [False, False, False]])
    mean, maximum = masked_mean(x, mask), masked_max(x, mask)
    assert torch.equal(mean[1], torch.zeros(4)) and torch.equal(maximum[1], torch.zeros(4))
    torch.testing.assert_close(mean[0], x[0, 0].detach())
    torch.testing.assert_close(maximum[0], x[0, 0].detach())
    (mean.sum() + maximum.sum()).backward()
    assert torch.isfinite(x.grad).all()
    assert torch.equal(x.grad[1], torch.zeros(3, 4))
    assert torch.equal(x.grad[0, 1:], torch.zeros(2, 4))


@pytest.mark.parametrize("name", ["pool-mlp", "attn", "decomp"])
def test_head_overfits_eight_random_pairs(name):
    generator = torch.Generator().manual_seed(7)
    a = torch.randn(8, 6, D, generator=generator)
    b = torch.randn(8, 5, D, generator=generator)
    mask_a = lengths_to_mask([6, 3, 4, 2, 6, 5, 1, 4], 6)
    mask_b = lengths_to_mask([5, 2, 5, 3, 1, 4, 5, 2], 5)
    labels = torch.tensor([0, 1, 1, 0, 1, 0, 0, 1])
    torch.manual_seed(0)
    head = build_head(name, D, hidden_size=32, dropout=0.2)
    optimiser = torch.optim.Adam(head.parameters(), lr=1e-2)
    accuracy = 0.0
    for step in range(300):
        head.train()
        loss = torch.nn.functional.cross_entropy(head(a, mask_a, b, mask_b), labels)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        if step % 10 == 9:
            with torch.no_grad():
                predictions = head.eval()(a, mask_a, b, mask_b).argmax(-1)
            accuracy = (predictions == labels).float().mean().item()
            if accuracy == 1.0:
                break
    assert accuracy == 1.0


def test_build_head_rejects_unknown_name_in_one_line():
    with pytest.raises(ValueError) as caught:
        build_head("transformer", D)
    message = str(caught.value)
    assert message.startswith("head=transformer: ") and "\n" not in message
    for name in HEADS:
        assert name in message


def test_masks_must_be_right_padded():
    head = make_head("bilstm").eval()
    a, mask_a, b, mask_b = make_pair(4)
    mask_a[0, 0] = False  # a hole before real tokens
    with pytest.raises(ValueError, match="real tokens first"):
        head(a, mask_a, b, mask_b)


def test_the_linear_head_is_one_linear_map_of_the_mean_pair_features():
    head = make_head("linear").eval()
    a, mask_a, b, mask_b = make_pair(4)
    u, v = masked_mean(a, mask_a), masked_mean(b, mask_b)  # (B, D) each
    layer = head.classifier[-1]
    expected = torch.cat([u, v, (u - v).abs(), u * v], dim=-1) @ layer.weight.T + layer.bias  # (B, 4D) -> (B, C)
    torch.testing.assert_close(head(a, mask_a, b, mask_b), expected)
    assert sum(parameter.numel() for parameter in head.parameters()) == (4 * D + 1) * 2
