"""GPT's joint classifier runs both orders as one batch without dropout (evaluation): the same
logits, LM loss and gradients as one pass per order (``benchmarks.speed.finetune_throughput.two_pass_joint``,
the implementation it replaced); in training each order keeps its pass, so seeded dropout draws
the same masks as before."""

from __future__ import annotations

import pytest
import torch

from benchmarks.speed.finetune_throughput import one_pass_per_order, two_pass_joint
from downstream.model.joint_classifiers import JointClassifier, both_orders
from pretrain.models.transformer import TransformerConfig, TransformerLM


def pair_batch(seed: int, extra_ba: int = 0):
    """Random joint sequences of both orders: lengths equal per pair (the same tokens), or the
    ``s2 → s1`` rows ``extra_ba`` tokens longer (a tokenizer that merges across the boundary)."""
    generator = torch.Generator().manual_seed(seed)
    lengths_ab = torch.randint(3, 12, (5,), generator=generator)
    lengths_ba = lengths_ab + extra_ba
    ids_ab = torch.randint(1, 40, (5, int(lengths_ab.max())), generator=generator)
    ids_ba = torch.randint(1, 40, (5, int(lengths_ba.max())), generator=generator)
    for ids, lengths in ((ids_ab, lengths_ab), (ids_ba, lengths_ba)):
        ids[torch.arange(ids.size(1))[None] >= lengths[:, None]] = 0  # padding
    return ids_ab, lengths_ab, ids_ba, lengths_ba


def models(dropout: float = 0.0):
    torch.manual_seed(0)
    language_model = TransformerLM(
        TransformerConfig(
            vocab_size=40,
            num_layers=2,
            hidden_size=16,
            num_heads=2,
            max_positions=32,
            dropout=dropout,
            attention_dropout=dropout,
        )
    )
    return language_model, JointClassifier(16, dropout=dropout)


@pytest.mark.parametrize("extra_ba", [0, 2])
def test_one_batched_pass_equals_one_pass_per_order(extra_ba):
    language_model, head = models(dropout=0.1)
    language_model.eval(), head.eval()  # evaluation: the batched pass
    inputs = pair_batch(0, extra_ba)
    logits, lm = head(language_model, *inputs)
    reference_logits, reference_lm = two_pass_joint(head, language_model, *inputs)
    torch.testing.assert_close(logits, reference_logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lm["nll_forward"], reference_lm["nll_forward"], atol=1e-4, rtol=1e-5)
    assert int(lm["count"]) == int(reference_lm["count"]) == int((inputs[1] - 1).sum() + (inputs[3] - 1).sum())
    (logits.sum() + lm["nll_forward"]).backward()
    grads = {name: p.grad.clone() for name, p in [*language_model.named_parameters(), *head.named_parameters()]}
    language_model.zero_grad(), head.zero_grad()
    reference_logits, reference_lm = two_pass_joint(head, language_model, *inputs)
    (reference_logits.sum() + reference_lm["nll_forward"]).backward()
    for name, p in [*language_model.named_parameters(), *head.named_parameters()]:
        torch.testing.assert_close(grads[name], p.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_training_keeps_one_pass_per_order_and_its_dropout_masks():
    language_model, head = models(dropout=0.2)
    inputs = pair_batch(3)
    outputs = []
    for forward in (head, lambda *a: two_pass_joint(head, *a)):
        torch.manual_seed(5)
        logits, lm = forward(language_model, *inputs)
        outputs.append((logits, lm["nll_forward"]))
    assert torch.equal(outputs[0][0], outputs[1][0]) and torch.equal(outputs[0][1], outputs[1][1])


def test_the_benchmark_baseline_swaps_in_and_out():
    language_model, head = models()
    language_model.eval(), head.eval()
    inputs = pair_batch(1)
    with one_pass_per_order(head):
        inside = head(language_model, *inputs)[0]
    torch.testing.assert_close(inside, head(language_model, *inputs)[0], atol=1e-5, rtol=1e-5)
    assert "forward" not in vars(head)


def test_both_orders_pad_to_the_longer():
    ids_ab, lengths_ab, ids_ba, lengths_ba = pair_batch(2, extra_ba=3)
    ids, lengths = both_orders(ids_ab, lengths_ab, ids_ba, lengths_ba)
    assert ids.shape == (10, ids_ba.size(1)) and torch.equal(lengths, torch.cat([lengths_ab, lengths_ba]))
    assert torch.equal(ids[:5, : ids_ab.size(1)], ids_ab) and not ids[:5, ids_ab.size(1) :].any()
