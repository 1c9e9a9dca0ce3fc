"""The transformer LM's correctness properties, proved on every layer of a tiny float64 model."""

import math

import pytest
import torch

from pretrain.models.bilm import padding_mask
from pretrain.models.transformer import TransformerConfig, TransformerLM

VOCAB, HIDDEN, HEADS = 50, 8, 2


def make_model(seed=0, num_layers=3, **options) -> TransformerLM:
    torch.manual_seed(seed)
    options = {"num_layers": num_layers, "hidden_size": HIDDEN, "num_heads": HEADS, "max_positions": 16,
               "dropout": 0.0, "attention_dropout": 0.0, **options}
    return TransformerLM(TransformerConfig(VOCAB, **options)).double().eval()


def random_ids(generator, lengths, steps=None):
    """(B, T) ids in [1, VOCAB) at real positions, pad (0) after each length."""
    steps = steps or max(lengths)
    ids = torch.randint(1, VOCAB, (len(lengths), steps), generator=generator)
    return ids * padding_mask(torch.tensor(lengths), steps)


def other_token(token: int) -> int:
    return 1 + (token - 1 + 17) % (VOCAB - 1)  # a different non-pad id


@pytest.fixture
def generator():
    return torch.Generator().manual_seed(1234)


# --- causality: no position sees a later one ------------------------------------------------------


@pytest.mark.parametrize("num_layers", [1, 3])
def test_causality_by_perturbing_tokens(generator, num_layers):
    model = make_model(num_layers=num_layers)
    lengths = [7, 5, 3]
    ids = random_ids(generator, lengths)  # (B, T)
    lengths_tensor = torch.tensor(lengths)
    with torch.no_grad():
        base = model.layer_outputs(ids, lengths_tensor)  # (L, B, T, D)
        assert base.shape == (num_layers + 1, 3, 7, HIDDEN)
        for b, length in enumerate(lengths):
            for s in range(length):
                changed = ids.clone()
                changed[b, s] = other_token(int(changed[b, s]))
                delta = (model.layer_outputs(changed, lengths_tensor) - base).abs()  # (L, B, T, D)
                assert delta[:, torch.arange(len(lengths)) != b].max() == 0  # other sentences never move
                for layer in range(1, num_layers + 1):
                    for t in range(length):
                        moved = delta[layer, b, t].max().item()
                        if s > t:
                            assert moved == 0, f"layer {layer}, t={t} saw the later token s={s}"
                        else:
                            assert moved > 1e-9, f"layer {layer}, t={t} ignores the earlier token s={s}"
                    assert delta[layer, b, length:].sum() == 0  # padding stays zero
                assert delta[0, b, s].max() > 0  # layer 0 is the token (+ its position) itself
                assert delta[0, b, torch.arange(ids.shape[1]) != s].max() == 0


def test_causality_by_gradients(generator):
    model = make_model(num_layers=3)
    lengths = torch.tensor([6, 4])
    ids = random_ids(generator, lengths.tolist())
    embedded = model.token_embedding(ids).detach().requires_grad_(True)  # (B, T, H)
    handle = model.token_embedding.register_forward_hook(lambda module, inputs, output: embedded)
    try:
        layers = model.layer_outputs(ids, lengths)  # (L, B, T, D)
    finally:
        handle.remove()
    # a random read-out: a plain sum of a LayerNorm output is constant (its gradient is zero)
    readout = torch.randn(HIDDEN, dtype=torch.float64, generator=generator)  # (D,)
    for layer in range(1, model.num_layers + 1):
        for b, length in enumerate(lengths.tolist()):
            for t in range(length):
                (gradient,) = torch.autograd.grad(layers[layer, b, t] @ readout, embedded, retain_graph=True)
                per_position = gradient.abs().sum(-1)  # (B, T)
                assert per_position[torch.arange(len(lengths)) != b].max() == 0
                for s in range(ids.shape[1]):
                    if s <= t:
                        assert per_position[b, s] > 0, (layer, b, t, s)
                    else:
                        assert per_position[b, s] == 0, (layer, b, t, s)


# --- padding --------------------------------------------------------------------------------------


def test_features_do_not_depend_on_the_batch(generator):
    model = make_model()
    sentence = random_ids(generator, [5])[0]  # (5,)
    lengths = torch.tensor([9, 5, 7, 2])
    with torch.no_grad():
        alone = model.layer_outputs(sentence[None], torch.tensor([5]))[:, 0]  # (L, 5, D)
        batch = random_ids(generator, lengths.tolist())  # (4, 9)
        batch[1] = 0
        batch[1, :5] = sentence
        padded = model.layer_outputs(batch, lengths)  # (L, 4, 9, D)
        torch.testing.assert_close(padded[:, 1, :5], alone, rtol=0, atol=1e-12)
        beyond = ~padding_mask(lengths, batch.shape[1])  # (B, T)
        assert padded[:, beyond].abs().max() == 0
        # the pad ids themselves do not matter either: causal masking alone keeps them out
        noisy = batch.clone()
        noisy[beyond] = torch.randint(1, VOCAB, noisy.shape, generator=generator)[beyond]
        torch.testing.assert_close(model.layer_outputs(noisy, lengths), padded, rtol=0, atol=0)
        torch.testing.assert_close(model.hidden_states(noisy, lengths), padded[-1], rtol=0, atol=0)


def test_float32_padding_invariance(generator):
    model = make_model().float()
    sentence = random_ids(generator, [6])
    with torch.no_grad():
        alone = model.layer_outputs(sentence, torch.tensor([6]))[:, 0]
        batch = torch.cat([torch.nn.functional.pad(sentence, (0, 6)), random_ids(generator, [12])])
        padded = model.layer_outputs(batch, torch.tensor([6, 12]))
    torch.testing.assert_close(padded[:, 0, :6], alone, rtol=0, atol=1e-5)


def test_loss_ignores_padding(generator):
    model = make_model()
    lengths = [6, 3, 9, 2]
    batch = random_ids(generator, lengths)
    with torch.no_grad():
        together = model(batch, torch.tensor(lengths))
        singles = [model(batch[b:b + 1, :n], torch.tensor([n])) for b, n in enumerate(lengths)]
        torch.testing.assert_close(together["nll_forward"], sum(s["nll_forward"] for s in singles),
                                   rtol=0, atol=1e-9)
        assert int(together["count"]) == sum(n - 1 for n in lengths)
        noisy = batch.clone()
        beyond = ~padding_mask(torch.tensor(lengths), batch.shape[1])
        noisy[beyond] = torch.randint(1, VOCAB, batch.shape, generator=generator)[beyond]
        again = model(noisy, torch.tensor(lengths))
    for key in ("nll_forward", "count"):
        torch.testing.assert_close(again[key], together[key], rtol=0, atol=0)


def test_loss_matches_a_hand_computation(generator):
    model = make_model(num_layers=2)
    ids = random_ids(generator, [5, 3])
    lengths = torch.tensor([5, 3])
    with torch.no_grad():
        sums = model(ids, lengths)
        top = model.layer_outputs(ids, lengths)[-1]  # (B, T, H)
        scores = top @ model.token_embedding.weight.T  # (B, T, V): the tied softmax
        log_probabilities = scores - scores.exp().sum(-1, keepdim=True).log()
    expected = -sum(log_probabilities[b, t, ids[b, t + 1]] for b, n in enumerate([5, 3]) for t in range(n - 1))
    torch.testing.assert_close(sums["nll_forward"], expected)
    assert int(sums["count"]) == 4 + 2
    hidden = torch.randn(5, HIDDEN, dtype=torch.float64, generator=generator)
    targets = torch.tensor([0, 7, 15, 35, 49])
    with torch.no_grad():
        torch.testing.assert_close(model.token_nll(hidden, targets),
                                   -model.log_probabilities(hidden)[torch.arange(5), targets])


# --- structure ------------------------------------------------------------------------------------


def expected_parameters(vocab, layers, hidden, positions, ffn=None):
    """Closed form: tied embedding + positions + per block (QKV, output, MLP, two LayerNorms)."""
    ffn = ffn or 4 * hidden
    block = (3 * hidden * hidden + 3 * hidden) + (hidden * hidden + hidden) \
        + (hidden * ffn + ffn) + (ffn * hidden + hidden) + 4 * hidden
    return vocab * hidden + positions * hidden + layers * block


def test_softmax_is_tied_to_the_embedding(generator):
    model = make_model(num_layers=2)
    assert sum(p.numel() for p in model.parameters()) == expected_parameters(VOCAB, 2, HIDDEN, 16)
    hidden = torch.randn(3, HIDDEN, dtype=torch.float64, generator=generator)
    model.token_nll(hidden, torch.tensor([4, 5, 6])).sum().backward()
    assert model.token_embedding.weight.grad[[4, 5, 6]].abs().sum() > 0  # the softmax trains the embedding
    with torch.no_grad():
        model.token_embedding.weight[9] += 1.0  # an embedding edit is a softmax edit
        torch.testing.assert_close(model.logits(hidden), hidden @ model.token_embedding.weight.T, rtol=0, atol=0)


@pytest.mark.parametrize("name, options, parameters", [
    ("tiny", {"num_layers": 2, "hidden_size": 64, "num_heads": 2, "max_positions": 128}, None),
    ("cpu-default", {"num_layers": 6, "hidden_size": 384, "num_heads": 6, "max_positions": 256}, None),
    ("gpt-1", {"num_layers": 12, "hidden_size": 768, "num_heads": 12, "max_positions": 512}, 116.5e6),
])
def test_configurations_construct(name, options, parameters):
    vocab = 40478  # GPT-1's vocabulary (40k merges + bytes + specials)
    with torch.device("meta"):  # shapes only: no memory, no time
        model = TransformerLM(TransformerConfig(vocab, **options))
        lengths = torch.tensor([options["max_positions"], 3])
        layers = model.layer_outputs(torch.zeros(2, options["max_positions"], dtype=torch.long), lengths)
    assert layers.shape == (options["num_layers"] + 1, 2, options["max_positions"], options["hidden_size"])
    count = sum(p.numel() for p in model.parameters())
    assert count == expected_parameters(vocab, options["num_layers"], options["hidden_size"], options["max_positions"])
    if parameters:  # GPT-1 is reported as 117M parameters
        assert abs(count - parameters) / parameters < 0.01


def test_a_sequence_longer_than_the_position_table_is_refused(generator):
    model = make_model()  # max_positions 16
    with torch.no_grad():
        model(random_ids(generator, [16, 4]), torch.tensor([16, 4]))  # exactly the limit is fine
        with pytest.raises(ValueError, match="max_positions=16"):
            model(random_ids(generator, [17, 4]), torch.tensor([17, 4]))
        with pytest.raises(ValueError, match="max_positions=16"):
            model.layer_outputs(random_ids(generator, [20]), torch.tensor([20]))


def test_parameter_groups_cover_every_parameter_once_from_input_to_top():
    model = make_model(num_layers=3)
    groups = model.parameter_groups()
    assert len(groups) == model.num_layers + 1
    flat = [id(p) for group in groups for p in group]
    assert len(flat) == len(set(flat)) == len(list(model.parameters()))
    assert set(flat) == {id(p) for p in model.parameters()}
    assert {id(p) for p in groups[0]} == {id(model.token_embedding.weight), id(model.position_embedding.weight)}
    for depth, block in enumerate(model.blocks, start=1):
        assert {id(p) for p in groups[depth]} == {id(p) for p in block.parameters()}


def test_dropout_only_in_training(generator):
    model = make_model(attention_dropout=0.5, dropout=0.2)
    ids, lengths = random_ids(generator, [8, 5]), torch.tensor([8, 5])
    model.train()
    assert not torch.equal(model.layer_outputs(ids, lengths), model.layer_outputs(ids, lengths))
    model.eval()
    assert torch.equal(model.layer_outputs(ids, lengths), model.layer_outputs(ids, lengths))


def test_layer_outputs_are_differentiable(generator):
    model = make_model(num_layers=2)
    ids, lengths = random_ids(generator, [5, 3]), torch.tensor([5, 3])
    readout = torch.randn(HIDDEN, dtype=torch.float64, generator=generator)  # (D,)
    (model.layer_outputs(ids, lengths)[1] @ readout).sum().backward()
    assert model.blocks[0].attention.query_key_value.weight.grad.abs().sum() > 0
    untouched = model.blocks[1].mlp[0].weight.grad  # block 2 does not feed layer 1
    assert untouched is None or not untouched.any()


# --- it can learn ---------------------------------------------------------------------------------


def test_overfits_a_tiny_batch():
    """Four sentences that share no word after <s>: every prediction is determined except the
    first word (4-way), so the best mean NLL is log(4) / predictions-per-sentence."""
    torch.manual_seed(0)
    sentences = [[1, 10, 11, 12, 13, 14, 15, 2], [1, 20, 21, 22, 23, 24, 25, 2],
                 [1, 30, 31, 32, 33, 34, 35, 2], [1, 40, 41, 42, 43, 44, 2, 0]]
    ids, lengths = torch.tensor(sentences), torch.tensor([8, 8, 8, 7])
    model = TransformerLM(TransformerConfig(VOCAB, num_layers=2, hidden_size=32, num_heads=4, max_positions=8,
                                            dropout=0.0, attention_dropout=0.0))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(150):
        sums = model(ids, lengths)
        optimizer.zero_grad()
        (sums["nll_forward"] / sums["count"]).backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        sums = model(ids, lengths)
    predictions = int(sums["count"])
    assert sums["nll_forward"].item() / predictions < math.log(4) * 4 / predictions + 0.05
    predicted = model.predict(ids, lengths)  # (B, T)
    for b, n in enumerate(lengths.tolist()):
        assert predicted[b, 1:n - 1].tolist() == ids[b, 2:n].tolist()  # after the first word
