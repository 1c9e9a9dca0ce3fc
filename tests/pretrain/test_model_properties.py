"""The properties every pretrained family's model keeps, proved on each registered family's tiny
float64 model (``Family.tiny``), so a new family is checked by registering it: each feature half
sees only the context its direction allows (by perturbing tokens and by gradients), a sentence's
features and loss do not depend on the batch it is padded into nor on the pad ids, and the loss
counts real tokens only. Each family's own structure and hand computations: test_<model>.py."""

from dataclasses import replace

import pytest
import torch
from torch import nn

from pretrain.families import family_of, pretrained_families
from pretrain.models.bilm import padding_mask

VOCAB = 50
ALLOWED = {"forward": lambda s, t: s <= t, "backward": lambda s, t: s >= t}  # which positions s feed t


def make_model(family: str, num_layers: int = 3) -> nn.Module:
    torch.manual_seed(0)
    spec = family_of(family)
    return spec.build(replace(spec.tiny_config(VOCAB), num_layers=num_layers)).double().eval()


def random_ids(generator, lengths, steps=None):
    """(B, T) ids in [1, VOCAB) at real positions, pad (0) after each length."""
    steps = steps or max(lengths)
    ids = torch.randint(1, VOCAB, (len(lengths), steps), generator=generator)
    return ids * padding_mask(torch.tensor(lengths), steps)


def other_token(token: int) -> int:
    return 5 + (token - 5 + 17) % (VOCAB - 5)  # a different id, never a special one


def direction_slices(model: nn.Module, dim: int) -> list[tuple[str, slice]]:
    """Each direction's half of a (…, D) feature, in feature order."""
    directions = model.objective.directions
    width = dim // len(directions)
    return [(direction, slice(k * width, (k + 1) * width)) for k, direction in enumerate(directions)]


def token_embedding(model: nn.Module) -> nn.Embedding:
    """The model's token table (a position table has another size)."""
    (table,) = [m for m in model.modules() if isinstance(m, nn.Embedding) and m.num_embeddings == VOCAB]
    return table


@pytest.fixture
def generator():
    return torch.Generator().manual_seed(1234)


FAMILIES = sorted(pretrained_families())


# --- causality: each half sees only the context of its direction -----------------------------------


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("num_layers", [1, 3])
def test_causality_by_perturbing_tokens(generator, family, num_layers):
    model = make_model(family, num_layers)
    lengths = [7, 5, 3]
    ids = random_ids(generator, lengths)  # (B, T)
    lengths_tensor = torch.tensor(lengths)
    with torch.no_grad():
        base = model.layer_outputs(ids, lengths_tensor)  # (L, B, T, D)
        assert base.shape[:3] == (num_layers + 1, 3, 7)
        halves = direction_slices(model, base.shape[-1])
        for b, length in enumerate(lengths):
            for s in range(length):
                changed = ids.clone()
                changed[b, s] = other_token(int(changed[b, s]))
                delta = (model.layer_outputs(changed, lengths_tensor) - base).abs()  # (L, B, T, D)
                assert delta[:, torch.arange(len(lengths)) != b].max() == 0  # other sentences never move
                for layer in range(1, num_layers + 1):
                    for t in range(length):
                        for direction, half in halves:
                            moved = delta[layer, b, t, half].max().item()
                            where = f"{direction} half, layer {layer}, t={t}, changed s={s}"
                            if ALLOWED[direction](s, t):
                                assert moved > 1e-9, f"{where}: ignores a token it may see"
                            else:
                                assert moved == 0, f"{where}: saw a token it may not"
                    assert delta[layer, b, length:].sum() == 0  # padding stays zero
                assert delta[0, b, s].max() > 0  # layer 0 is the token itself
                assert delta[0, b, torch.arange(ids.shape[1]) != s].max() == 0


@pytest.mark.parametrize("family", FAMILIES)
def test_causality_by_gradients(generator, family):
    model = make_model(family)
    lengths = torch.tensor([6, 4])
    ids = random_ids(generator, lengths.tolist())
    table = token_embedding(model)
    embedded = table(ids).detach().requires_grad_(True)  # (B, T, E)
    handle = table.register_forward_hook(lambda module, inputs, output: embedded)
    try:
        layers = model.layer_outputs(ids, lengths)  # (L, B, T, D)
    finally:
        handle.remove()
    # a random read-out: a plain sum of a LayerNorm output is constant (its gradient is zero)
    readout = torch.randn(layers.shape[-1], dtype=torch.float64, generator=generator)  # (D,)
    for layer in range(1, layers.shape[0]):
        for b, length in enumerate(lengths.tolist()):
            for t in range(length):
                for direction, half in direction_slices(model, layers.shape[-1]):
                    output = layers[layer, b, t, half] @ readout[half]
                    (gradient,) = torch.autograd.grad(output, embedded, retain_graph=True)
                    per_position = gradient.abs().sum(-1)  # (B, T)
                    assert per_position[torch.arange(len(lengths)) != b].max() == 0
                    for s in range(ids.shape[1]):
                        reaches = s < length and ALLOWED[direction](s, t)
                        assert (per_position[b, s] > 0) == reaches, (direction, layer, b, t, s)


# --- padding ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_features_do_not_depend_on_the_batch_nor_the_pad_ids(generator, family):
    model = make_model(family)
    sentence = random_ids(generator, [5])[0]  # (5,)
    lengths = torch.tensor([9, 5, 7, 2])
    with torch.no_grad():
        alone = model.layer_outputs(sentence[None], torch.tensor([5]))[:, 0]  # (L, 5, D)
        batch = random_ids(generator, lengths.tolist())  # (4, 9)
        batch[1] = 0
        batch[1, :5] = sentence
        padded = model.layer_outputs(batch, lengths)  # (L, 4, 9, D)
        torch.testing.assert_close(padded[:, 1, :5], alone, rtol=0, atol=1e-10)
        beyond = ~padding_mask(lengths, batch.shape[1])  # (B, T)
        assert padded[:, beyond].abs().max() == 0
        noisy = batch.clone()
        noisy[beyond] = torch.randint(1, VOCAB, noisy.shape, generator=generator)[beyond]
        torch.testing.assert_close(model.layer_outputs(noisy, lengths), padded, rtol=0, atol=1e-12)


@pytest.mark.parametrize("family", FAMILIES)
def test_float32_padding_invariance(generator, family):
    model = make_model(family).float()
    sentence = random_ids(generator, [6])
    with torch.no_grad():
        alone = model.layer_outputs(sentence, torch.tensor([6]))[:, 0]  # (L, 6, D)
        batch = torch.cat([nn.functional.pad(sentence, (0, 6)), random_ids(generator, [12])])  # (2, 12)
        padded = model.layer_outputs(batch, torch.tensor([6, 12]))  # (L, 2, 12, D)
    torch.testing.assert_close(padded[:, 0, :6], alone, rtol=0, atol=1e-5)


# --- the loss --------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_loss_counts_real_tokens_only(generator, family):
    model = make_model(family)
    lengths = [6, 3, 9, 2]
    batch = random_ids(generator, lengths)
    keys = model.objective.nll_keys
    with torch.no_grad():
        together = model(batch, torch.tensor(lengths))
        singles = [model(batch[b : b + 1, :n], torch.tensor([n])) for b, n in enumerate(lengths)]
        for key in keys:
            torch.testing.assert_close(together[key], sum(single[key] for single in singles), rtol=0, atol=1e-9)
        assert int(together["count"]) == sum(n - 1 for n in lengths)
        noisy = batch.clone()
        beyond = ~padding_mask(torch.tensor(lengths), batch.shape[1])
        noisy[beyond] = torch.randint(1, VOCAB, batch.shape, generator=generator)[beyond]
        again = model(noisy, torch.tensor(lengths))
    for key in (*keys, "count"):
        torch.testing.assert_close(again[key], together[key], rtol=0, atol=0)
