"""ScalarMix: every mix is gamma * sum_k softmax(s)_k h_k, checked against the closed form."""

import math

import pytest
import torch

from downstream.model.pair_classifier import scalar_mix
from downstream.model.scalar_mix import ScalarMix, masked_layer_norm
from downstream.model.settings import Mix

L, B, T, D = 3, 2, 5, 4


def make_layers(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    layers = torch.randn(L, B, T, D, generator=generator)  # (L, B, T, D)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])  # (B, T)
    return layers, mask


def real(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The real-token rows of (B, T, D) as (N, D)."""
    return x[mask]


def test_scalar_mix_matches_closed_form():
    layers, mask = make_layers()
    mix = scalar_mix("scalar", L)
    s = [0.5, -1.0, 2.0]
    gamma = 1.7
    with torch.no_grad():
        mix.layer_scalars.copy_(torch.tensor(s))
        mix.gamma_scale.fill_(gamma)
    denominator = sum(math.exp(value) for value in s)
    expected = gamma * sum(math.exp(s[k]) / denominator * layers[k] for k in range(L))
    out = mix(layers, mask)
    torch.testing.assert_close(real(out, mask), real(expected, mask))
    assert torch.all(out[~mask] == 0)
    torch.testing.assert_close(mix.weights(), torch.softmax(torch.tensor(s), 0))
    assert mix.gamma.item() == pytest.approx(gamma)


def test_average_is_scalar_at_init_and_has_no_parameters():
    layers, mask = make_layers(1)
    average = scalar_mix("average", L)
    scalar = scalar_mix("scalar", L)  # s = 0, gamma = 1 at init
    assert list(average.parameters()) == []
    assert not average.layer_scalars.requires_grad and not average.gamma.requires_grad
    torch.testing.assert_close(average(layers, mask), scalar(layers, mask))
    torch.testing.assert_close(real(average(layers, mask), mask), real(layers.mean(0), mask))
    torch.testing.assert_close(average.weights(), torch.full((L,), 1 / L))


@pytest.mark.parametrize("mix,index", [("top", L - 1), ("layer:0", 0), ("layer:1", 1)])
def test_single_layer_mix_picks_exactly_that_layer(mix, index):
    layers, mask = make_layers(2)
    module = scalar_mix(mix, L)
    assert list(module.parameters()) == []
    out = module(layers, mask)
    torch.testing.assert_close(real(out, mask), real(layers[index], mask), rtol=0, atol=0)
    one_hot = torch.zeros(L)
    one_hot[index] = 1.0
    assert torch.equal(module.weights(), one_hot)


@pytest.mark.parametrize("mix", ["scalar", "average", "top", "layer:1"])
def test_weights_sum_to_one(mix):
    module = scalar_mix(mix, L)
    with torch.no_grad():
        if mix == "scalar":
            module.layer_scalars.copy_(torch.tensor([3.0, -2.0, 0.1]))
    assert module.weights().shape == (L,)
    assert module.weights().sum().item() == pytest.approx(1.0)
    assert module.gamma.dim() == 0


def test_gradients_reach_s_and_gamma_in_scalar_mode():
    layers, mask = make_layers(3)
    module = scalar_mix("scalar", L)
    target = torch.randn(B, T, D, generator=torch.Generator().manual_seed(9))
    (module(layers, mask) * target).sum().backward()
    assert module.layer_scalars.grad is not None and module.gamma.grad is not None
    assert module.layer_scalars.grad.abs().sum() > 0
    assert module.gamma.grad.abs() > 0


def test_padding_is_zero_even_with_layer_norm():
    layers, mask = make_layers(4)
    out = scalar_mix("scalar", L, layer_norm=True)(layers, mask)
    assert out.shape == (B, T, D)
    assert torch.all(out[~mask] == 0)


def test_layer_norm_ignores_padding_values_and_normalises_real_tokens():
    layers, mask = make_layers(5)
    garbage = layers.clone()
    garbage[:, ~mask] = 1e4 * torch.randn(L, int((~mask).sum()), D)
    garbage[0, 1, 4, 0] = float("nan")
    module = scalar_mix("layer:1", L, layer_norm=True)
    clean_out, garbage_out = module(layers, mask), module(garbage, mask)
    torch.testing.assert_close(clean_out, garbage_out)
    for example in range(B):
        values = clean_out[example][mask[example]]  # (T_real, D)
        assert values.mean().item() == pytest.approx(0.0, abs=1e-5)
        assert values.var(unbiased=False).item() == pytest.approx(1.0, abs=1e-4)


def test_layer_norm_statistics_are_per_example():
    layers, mask = make_layers(6)
    together = masked_layer_norm(layers[0], mask)  # (B, T, D)
    alone = masked_layer_norm(layers[0, 1:2, :3], mask[1:2, :3])  # (1, 3, D), no padding
    torch.testing.assert_close(together[1:2, :3], alone)
    all_pad = masked_layer_norm(layers[0], torch.zeros(B, T, dtype=torch.bool))
    assert torch.all(all_pad == 0)


def test_mix_text_parses_once_and_prints_back():
    for text in ("scalar", "average", "top", "layer:0", "layer:12"):
        assert str(Mix.parse(text)) == text and Mix.parse(f" {text} ") == Mix.parse(text)
    assert [Mix.parse(text).layer_index(3) for text in ("scalar", "average", "top", "layer:0", "layer:2")] == [
        None,
        None,
        2,
        0,
        2,
    ]
    assert Mix.parse("scalar").trainable and not Mix.parse("average").trainable


@pytest.mark.parametrize("mix", ["layer:-1", "layer:x", "layer:", "mean", "", "layer:1.5"])
def test_mix_text_that_is_no_mix_is_refused_in_one_line_naming_it(mix):
    with pytest.raises(ValueError) as caught:
        Mix.parse(mix)
    message = str(caught.value)
    assert message.startswith(f"mix={mix}: ") and "\n" not in message
    assert "layer:K" in message or "whole number" in message


@pytest.mark.parametrize("mix", ["layer:3", "layer:9"])
def test_a_layer_the_encoder_lacks_is_refused_with_the_valid_range(mix):
    with pytest.raises(
        ValueError, match=rf"^mix={mix}: the encoder has layers 0\.\.2 \(L=3\); use layer:0 \.\. layer:2$"
    ):
        scalar_mix(mix, 3)


def test_the_module_takes_no_text():
    with pytest.raises(ValueError, match="only_layer=3"):
        ScalarMix(3, trainable=False, only_layer=3)
    with pytest.raises(ValueError, match="only_layer=0"):
        ScalarMix(3, trainable=True, only_layer=0)


@pytest.mark.parametrize("layer_norm", [False, True])
def test_inputs_with_zero_padding_skip_the_fill_and_give_the_same_mix_and_gradients(layer_norm):
    """The feature store's batches are zero at padding: ``padding_is_zero`` skips cleaning them
    and changes neither the output nor the gradients of s and gamma."""
    layers, mask = make_layers(7)
    layers = layers * mask[None, :, :, None]  # (L, B, T, D), zeros at padding, as the store makes them
    results = []
    for padding_is_zero in (False, True):
        torch.manual_seed(0)
        module = scalar_mix("scalar", L, layer_norm=layer_norm)
        with torch.no_grad():
            module.layer_scalars.copy_(torch.tensor([0.3, -0.2, 0.1]))
        out = module(layers, mask, padding_is_zero=padding_is_zero)
        (out * torch.arange(out.numel()).view_as(out)).sum().backward()
        results.append((out, module.layer_scalars.grad, module.gamma_scale.grad))
    for cleaned, skipped in zip(*results):
        torch.testing.assert_close(skipped, cleaned, rtol=0, atol=0)


def test_under_bf16_autocast_float32_features_are_mixed_in_float32():
    """The mix is a weighted sum, not a product worth bf16: autocast does not round (or copy) the
    (L, B, T, D) features; the result is the float32 mix."""
    torch.manual_seed(0)
    mix = ScalarMix(3)
    with torch.no_grad():
        mix.layer_scalars.copy_(torch.tensor([0.3, -0.2, 0.1]))
    layers = torch.randn(3, 2, 5, 4) * 10
    mask = torch.ones(2, 5, dtype=torch.bool)
    expected = mix(layers, mask)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = mix(layers, mask)
    assert mixed.dtype == torch.float32
    torch.testing.assert_close(mixed, expected)
