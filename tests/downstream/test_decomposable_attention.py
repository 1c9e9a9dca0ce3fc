"""The batched ``decomp`` head against the paper's equations computed one pair at a time, on each
sentence's real tokens only (Parikh et al., 2016: attend, compare, aggregate): the same weights
give the same logits and the same gradients, whatever the padding."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from downstream.model.heads import DecomposableAttentionHead, build_head
from tests.downstream.test_attention_reference import batch, more_padding


def reference_logits(head: DecomposableAttentionHead, a: Tensor, mask_a: Tensor, b: Tensor, mask_b: Tensor) -> Tensor:
    """Each pair on its own: slices of the real tokens, plain softmaxes, sums over tokens."""
    rows = []
    for k in range(a.size(0)):
        tokens_a = head.projection(a[k, : int(mask_a[k].sum())])  # (la, H)
        tokens_b = head.projection(b[k, : int(mask_b[k].sum())])  # (lb, H)
        scores = head.attend_network(tokens_a) @ head.attend_network(tokens_b).T  # (la, lb): e_ij
        hidden = tokens_a.size(1)
        # β_i = Σ_j softmax_j(e_ij) b_j and α_j = Σ_i softmax_i(e_ij) a_i; nothing to attend to: zeros
        beta = torch.softmax(scores, dim=1) @ tokens_b if len(tokens_b) else torch.zeros(len(tokens_a), hidden)
        alpha = torch.softmax(scores, dim=0).T @ tokens_a if len(tokens_a) else torch.zeros(len(tokens_b), hidden)
        v1 = head.compare_network(torch.cat([tokens_a, beta], dim=1)).sum(dim=0)  # (H,)
        v2 = head.compare_network(torch.cat([tokens_b, alpha], dim=1)).sum(dim=0)  # (H,)
        rows.append(head.aggregate_network(torch.cat([v1, v2])))  # (C,)
    return torch.stack(rows)  # (B, C)


def make_head(dropout: float = 0.2, dim: int = 12, hidden: int = 10) -> DecomposableAttentionHead:
    torch.manual_seed(0)
    head = build_head("decomp", dim, hidden_size=hidden, dropout=dropout)
    assert isinstance(head, DecomposableAttentionHead)
    return head


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_batched_head_computes_the_papers_equations(seed):
    head = make_head().eval()
    a, mask_a, b, mask_b = batch(seed)  # an all-pad sentence, a one-token one, NaN and 1e4 at padding
    with torch.no_grad():
        expected = reference_logits(head, a, mask_a, b, mask_b)
        torch.testing.assert_close(head(a, mask_a, b, mask_b), expected, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(
            head(b, mask_b, a, mask_a), reference_logits(head, b, mask_b, a, mask_a), atol=1e-5, rtol=1e-5
        )  # swapped: Tb > Ta
        padded = head(*more_padding(a, mask_a, 5), *more_padding(b, mask_b, 9))
    torch.testing.assert_close(padded, expected, atol=1e-5, rtol=1e-5)


def test_the_batched_head_gets_the_papers_gradients():
    head = make_head(dropout=0.0).train()  # train mode without dropout: the same function
    a, mask_a, b, mask_b = batch(3)
    a[~mask_a], b[~mask_b] = 0.0, 0.0  # finite padding, so that the input gradients compare (zero there)
    labels = torch.tensor([0, 1, 1, 0, 1, 0, 1])
    grads = []
    for forward in (head, lambda *inputs: reference_logits(head, *inputs)):
        head.zero_grad()
        inputs = [a.clone().requires_grad_(True), mask_a, b.clone().requires_grad_(True), mask_b]
        torch.nn.functional.cross_entropy(forward(*inputs), labels).backward()
        grads.append(
            {"a": inputs[0].grad, "b": inputs[2].grad, **{name: p.grad.clone() for name, p in head.named_parameters()}}
        )
    for name, grad in grads[0].items():
        torch.testing.assert_close(grad, grads[1][name], atol=1e-5, rtol=1e-4, msg=name)


def test_the_aggregate_sums_over_tokens():
    """The paper sums the compared tokens: a sentence repeated twice over is another pair."""
    head = make_head().eval()
    a, mask_a, b, mask_b = batch(4)
    with torch.no_grad():
        once = head(a[:1], mask_a[:1], b[:1], mask_b[:1])
        doubled = head(torch.cat([a[:1], a[:1]], dim=1), torch.cat([mask_a[:1], mask_a[:1]], dim=1), b[:1], mask_b[:1])
    assert not torch.allclose(once, doubled)


def test_the_head_has_the_papers_parameter_count():
    dim, hidden, classes = 12, 10, 2
    head = make_head(dim=dim, hidden=hidden)
    weights = dim * hidden + 7 * hidden**2 + hidden * classes  # projection, F, G, H
    biases = hidden + 2 * hidden + 2 * hidden + hidden + classes
    assert sum(p.numel() for p in head.parameters()) == weights + biases
