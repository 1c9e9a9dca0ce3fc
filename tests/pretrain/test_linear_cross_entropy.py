"""The fused output layer + loss equals autograd's ``cross_entropy(linear(...))``: values and every
gradient, in one vocabulary block or many (the last one partial), with and without a bias, shared
(tied) weights, repeated targets, scores far from zero, any upstream gradient; its backward runs
once; under bf16 autocast it computes what autocast's path does, under other autocast dtypes
that path runs; the biLM's loss and gradients are the reference ones."""

import pytest
import torch
from torch.nn import functional

from pretrain.models import linear_cross_entropy as module
from pretrain.models.bilm import BiLM, BiLMConfig
from pretrain.models.linear_cross_entropy import LinearCrossEntropy, linear_cross_entropy


@pytest.fixture(autouse=True, params=["one block", "many blocks"])
def blocks(request, monkeypatch):
    """Every test runs with the whole vocabulary in one block, and with 64-row blocks."""
    if request.param == "many blocks":
        monkeypatch.setattr(module, "BLOCK_ELEMENTS", 64)  # → 64 rows, the smallest block
    return request.param


def reference(hidden, weight, bias, targets):
    return functional.cross_entropy(functional.linear(hidden, weight, bias), targets, reduction="none")


def values_and_gradients(function, hidden, weight, bias, targets, upstream):
    inputs = [tensor.detach().clone().requires_grad_() for tensor in (hidden, weight, bias) if tensor is not None]
    hidden, weight = inputs[:2]
    bias = inputs[2] if len(inputs) > 2 else None
    nll = function(hidden, weight, bias, targets)
    gradients = torch.autograd.grad((nll * upstream).sum(), inputs)
    return nll.detach(), gradients


@pytest.mark.parametrize("with_bias", [True, False])
def test_values_and_gradients_equal_autograds_path(with_bias):
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(37, 8, dtype=torch.float64, generator=generator)
    weight = torch.randn(150, 8, dtype=torch.float64, generator=generator)  # 64-row blocks: 64 + 64 + 22
    bias = torch.randn(150, dtype=torch.float64, generator=generator) if with_bias else None
    targets = torch.randint(0, 150, (37,), generator=generator)
    targets[:5] = 7  # repeated targets
    upstream = torch.rand(37, dtype=torch.float64, generator=generator)  # not a constant: e.g. a weighted mean
    expected, expected_gradients = values_and_gradients(reference, hidden, weight, bias, targets, upstream)
    fused, fused_gradients = values_and_gradients(linear_cross_entropy, hidden, weight, bias, targets, upstream)
    torch.testing.assert_close(fused, expected, rtol=1e-12, atol=1e-12)
    assert len(fused_gradients) == len(expected_gradients) == (3 if with_bias else 2)
    for got, want in zip(fused_gradients, expected_gradients):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_block_rows_cover_the_vocabulary_in_cache_sized_multiples_of_64(monkeypatch):
    monkeypatch.setattr(module, "BLOCK_ELEMENTS", 384 * 1024)
    assert module.block_rows(12969, 730) == 512 and module.block_rows(300, 5000) == 64
    assert module.block_rows(100, 1) == 100  # never more rows than the vocabulary


def test_scores_far_from_zero_stay_finite_and_exact():
    """Block maxima keep exp in range: scores in the hundreds, of both signs, across blocks."""
    generator = torch.Generator().manual_seed(3)
    hidden = 40 * torch.randn(11, 4, dtype=torch.float64, generator=generator)
    weight = 10 * torch.randn(200, 4, dtype=torch.float64, generator=generator)
    bias, targets = torch.zeros(200, dtype=torch.float64), torch.randint(0, 200, (11,), generator=generator)
    upstream = torch.ones(11, dtype=torch.float64)
    expected, expected_gradients = values_and_gradients(reference, hidden, weight, bias, targets, upstream)
    fused, fused_gradients = values_and_gradients(linear_cross_entropy, hidden, weight, bias, targets, upstream)
    assert torch.isfinite(fused).all() and expected.abs().max() > 100
    torch.testing.assert_close(fused, expected, rtol=1e-10, atol=1e-9)
    for got, want in zip(fused_gradients, expected_gradients):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-9)


def test_float32_agrees_with_the_reference_to_rounding():
    generator = torch.Generator().manual_seed(1)
    hidden, weight = torch.randn(64, 32, generator=generator), 0.3 * torch.randn(300, 32, generator=generator)
    bias, targets = torch.randn(300, generator=generator), torch.randint(0, 300, (64,), generator=generator)
    upstream = torch.full((64,), 1 / 64)
    expected, expected_gradients = values_and_gradients(reference, hidden, weight, bias, targets, upstream)
    fused, fused_gradients = values_and_gradients(linear_cross_entropy, hidden, weight, bias, targets, upstream)
    torch.testing.assert_close(fused, expected, rtol=1e-5, atol=1e-5)
    for got, want in zip(fused_gradients, expected_gradients):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_a_tied_weight_accumulates_both_gradients():
    """The weight is also the embedding: its gradient is the sum of both uses, as with autograd."""
    generator = torch.Generator().manual_seed(2)
    table = torch.randn(140, 6, dtype=torch.float64, generator=generator)
    ids, targets = torch.randint(0, 140, (9,), generator=generator), torch.randint(0, 140, (9,), generator=generator)
    gradients = []
    for function in (reference, linear_cross_entropy):
        weight = table.clone().requires_grad_()
        hidden = torch.tanh(functional.embedding(ids, weight))  # (N, H) from the same matrix
        function(hidden, weight, None, targets).sum().backward()
        gradients.append(weight.grad)
    torch.testing.assert_close(gradients[1], gradients[0], rtol=1e-12, atol=1e-12)


def test_the_backward_runs_once():
    hidden = torch.randn(4, 3, requires_grad=True)
    nll = LinearCrossEntropy.apply(hidden, torch.randn(5, 3), None, torch.tensor([0, 1, 2, 3])).sum()
    nll.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="cannot run twice"):
        nll.backward()


def test_half_autocast_and_empty_batches_take_autograds_path(monkeypatch):
    calls = []
    monkeypatch.setattr(module.LinearCrossEntropy, "apply", lambda *args: calls.append(args))
    hidden, weight, targets = torch.randn(3, 4), torch.randn(6, 4), torch.tensor([1, 2, 3])
    with torch.autocast("cpu", dtype=torch.float16):
        under_autocast = linear_cross_entropy(hidden, weight, None, targets)
    empty = linear_cross_entropy(hidden[:0], weight, None, targets[:0])
    assert calls == [] and under_autocast.shape == (3,) and empty.shape == (0,)
    linear_cross_entropy(hidden, weight, None, targets)
    assert len(calls) == 1


@pytest.mark.parametrize("with_bias", [True, False])
def test_bf16_autocast_runs_the_fused_node_as_autocast_computes_the_reference(with_bias):
    """Under bf16 autocast the node's matmuls take bfloat16 and its scores are rounded to it, as
    autocast's linear does; loss and gradients stay float32 and agree with autocast's path to
    bfloat16 rounding (the loss much closer: the same rounded scores)."""
    generator = torch.Generator().manual_seed(4)
    hidden, weight = torch.randn(96, 32, generator=generator), 0.3 * torch.randn(300, 32, generator=generator)
    bias = torch.randn(300, generator=generator) if with_bias else None
    targets, upstream = torch.randint(0, 300, (96,), generator=generator), torch.full((96,), 1 / 96)
    results = {}
    for name, function in (("reference", reference), ("fused", linear_cross_entropy)):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            nll, gradients = values_and_gradients(function, hidden, weight, bias, targets, upstream)
            graph = function(hidden.requires_grad_(), weight, bias, targets).grad_fn
        results[name] = nll, gradients, type(graph).__name__
    (expected, expected_gradients, _), (fused, fused_gradients, node) = results["reference"], results["fused"]
    assert node == "LinearCrossEntropyBackward" and fused.dtype == torch.float32
    torch.testing.assert_close(fused, expected, rtol=1e-3, atol=1e-3)
    for got, want in zip(fused_gradients, expected_gradients):
        assert got.dtype == torch.float32
        assert (got - want).norm() <= 0.01 * want.norm()


def test_the_bilm_loss_and_gradients_are_the_references(monkeypatch):
    """The whole biLM step through the fused node equals the same step through autograd's path."""
    ids = torch.tensor([[1, 5, 66, 127, 2], [1, 80, 9, 2, 0]])
    lengths = torch.tensor([5, 4])
    results = []
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr("pretrain.models.bilm.linear_cross_entropy", reference)
        torch.manual_seed(0)
        model = BiLM(BiLMConfig(130, hidden_size=8, num_layers=2, dropout=0.0)).double()
        sums = model(ids, lengths)
        loss = (sums["nll_forward"] + sums["nll_backward"]) / (2 * sums["count"])
        loss.backward()
        results.append((loss.detach(), {name: p.grad for name, p in model.named_parameters()}))
    (fused_loss, fused_gradients), (reference_loss, reference_gradients) = results
    torch.testing.assert_close(fused_loss, reference_loss, rtol=1e-12, atol=1e-12)
    assert fused_gradients.keys() == reference_gradients.keys()
    for name, gradient in reference_gradients.items():
        torch.testing.assert_close(fused_gradients[name], gradient, rtol=1e-10, atol=1e-12, msg=name)
